"""Batch normalisation on the vector cores: aclnnBatchNorm and aclnnBatchNormBackward, one kernel
(kernel.py: per channel a reduction pass and an elementwise pass) launched as CANN launches it
(plan.py)."""
from . import batch_norm  # noqa: F401  (registers BatchNorm)
from . import batch_norm_backward  # noqa: F401  (registers BatchNormBackward)
