"""The elementwise family on one vector kernel template: kernel.py (the flat kernel and each
operator's compute), template.py (checks and plan), operators.py (Add, Mul, Relu,
ThresholdBackward, Sigmoid, Silu), glu.py (Glu and GluBackward, chains of the same kernel and
the strided copies, as CANN composes them)."""
from . import glu, operators  # noqa: F401  (registers the operators)
