"""Operators: one module per aclnn operator (its checks, tiling plan and workspace, and its kernel
as a tiled micro-program). Importing this package registers them with simulator.aclnn."""
from . import silu_backward  # noqa: F401
from . import convolution_backward  # noqa: F401
from . import conv_tbc_backward  # noqa: F401
from . import grid_sampler_2d_backward  # noqa: F401
