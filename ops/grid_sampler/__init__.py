"""aclnnGridSampler2DBackward (the operator, its checks and plan: grid_sampler_2d_backward.py), its
main kernel (kernel.py), aclnnGridSampler2D (the forward: grid_sampler_2d.py, its kernel
forward_kernel.py, sharing the coordinates, the gathers, the layouts and the tiling search), the
layout and zero-fill launches around them (layout_kernels.py) and the host-side tiling (tiling.py)."""
from . import grid_sampler_2d_backward  # noqa: F401  (registers GridSampler2DBackward)
from . import grid_sampler_2d  # noqa: F401  (registers GridSampler2D)
