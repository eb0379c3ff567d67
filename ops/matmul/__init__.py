"""MatMul on the Cube: kernel.py (the template GEMM and its tiling), operators.py (Mm and Matmul:
checks, the layout and cast launches around the GEMM), addmm.py (Addmm: the GEMM, then the scaled
add of self)."""
from . import addmm, operators  # noqa: F401  (registers Mm, Matmul, Addmm)
