"""MatMul on the Cube: kernel.py (the template GEMM and its tiling), operators.py (Mm and Matmul:
checks, the layout and cast launches around the GEMM)."""
from . import operators  # noqa: F401  (registers Mm, Matmul)
