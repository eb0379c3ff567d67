"""The elementwise family: kernel.py (the flat kernel template and each operator's compute),
sigmoid.py (CANN's own Sigmoid kernel, which the template hands Sigmoid when self and out share
a dtype), template.py (checks and plan), operators.py (Add, Mul, Relu, ThresholdBackward,
Sigmoid, Silu), glu.py (Glu and GluBackward, chains of these kernels and the strided copies, as
CANN composes them), chain.py (the chains' launches)."""
from . import glu, operators  # noqa: F401  (registers the operators)
