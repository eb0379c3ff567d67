"""Operators: one package or module per aclnn operator (its checks, tiling plan and workspace, and
its kernel as a tiled micro-program). Importing this package registers them with simulator.aclnn;
the registry does so at first use (the `ascend_sim.operators` entry point names this package)."""
from . import silu_backward  # noqa: F401
from . import conv  # noqa: F401  (ConvolutionBackward, ConvTbcBackward)
from . import grid_sampler  # noqa: F401  (GridSampler2DBackward, GridSampler2D)
from . import batch_norm  # noqa: F401  (BatchNorm, BatchNormBackward)
from . import elementwise  # noqa: F401  (Add, Mul, Relu, ThresholdBackward, Sigmoid, Silu, Glu, GluBackward)
from . import reduce  # noqa: F401  (ReduceSum, Mean)
from . import matmul  # noqa: F401  (Mm, Matmul, Addmm)
from . import pool  # noqa: F401  (MaxPool2dWithIndices)
