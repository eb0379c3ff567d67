"""The elementwise family on one vector kernel template: kernel.py (the flat kernel and each
operator's compute), template.py (checks and plan), operators.py (Add, Mul, Relu,
ThresholdBackward, Sigmoid, Silu)."""
from . import operators  # noqa: F401  (registers Add, Mul, Relu, ThresholdBackward, Sigmoid, Silu)
