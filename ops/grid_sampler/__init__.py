"""aclnnGridSampler2DBackward (the operator, its checks and plan: grid_sampler_2d_backward.py), its
main kernel (kernel.py), the layout and zero-fill launches around it (layout_kernels.py) and the
host-side tiling (tiling.py)."""
from . import grid_sampler_2d_backward  # noqa: F401  (registers GridSampler2DBackward)
