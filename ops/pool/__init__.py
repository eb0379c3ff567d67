"""Pooling: max_pool2d_with_indices.py (MaxPool2dWithIndices on A2: planes on the vector lanes,
one repeat-form Compare and two Selects per tap)."""
from . import max_pool2d_with_indices  # noqa: F401  (registers MaxPool2dWithIndices)
