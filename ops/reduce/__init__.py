"""Reductions: kernel.py (one FP32 reduction kernel over a contiguous (A, R, B) view),
operators.py (ReduceSum and Mean: their checks, passes and CANN's launches)."""
from . import operators  # noqa: F401  (registers ReduceSum, Mean)
