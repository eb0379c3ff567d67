"""Pooling on A2: max_pool2d_with_indices.py (MaxPool2dWithIndices: planes on the vector lanes,
a repeat-form Compare and two Selects per tap) and max_pool2d_with_indices_backward.py (its
backward: the gradients scattered to their maxima with a Compare EQ per tap and atomic adds)."""
from . import max_pool2d_with_indices, max_pool2d_with_indices_backward  # noqa: F401  (register both)
