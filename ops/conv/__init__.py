"""Convolution and its backward on the Cube, shared by aclnnConvolutionBackward, aclnnConvolution and
aclnnConvTbcBackward
(docs/CONVOLUTION.md has the pictures and the measured table).

    convolution_backward.py  the operator: checks, the normalised call, the OpDef
    convolution.py           aclnnConvolution: its checks, then gradInput's plan of its adjoint
    conv_tbc_backward.py     aclnnConvTbcBackward: its checks, then the same plan on permuted views
    conv_tbc.py              aclnnConvTbc: the same checks, then aclnnConvolution on permuted views
    plan.py                  workspace parts, tiling and launches of one call
    geometry.py              the normalised convolution (ConvGeometry), img2col families, map layouts,
                             space-to-depth (how the Cube sees it)
    tiling.py                L0 / L1 tiles and units of the two GEMMs, costed and balanced
    prologue.py              vector launch: TransData to NC1HWC0, accumulator zeroing, casts
    packing.py               the prologue's W' pass: the weight packed as gradInput's right operand
    cube_kernel.py           Cube launch: the img2col GEMMs, double-buffered with explicit flags
    epilogue.py              vector launch: phase grids and gradWeight tiles back to NCHW / weight
    vector_pipeline.py       the pass helpers the vector launches share (UB slots, pipelined loops)
    small_launches.py        zero fill and gradBias
"""
from . import convolution_backward  # noqa: F401  (registers ConvolutionBackward)
from . import convolution  # noqa: F401  (registers Convolution)
from . import conv_tbc_backward  # noqa: F401  (registers ConvTbcBackward)
from . import conv_tbc  # noqa: F401  (registers ConvTbc)
