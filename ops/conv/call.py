"""One checked ConvolutionBackward call as the planner takes it (ConvBackwardCall), and who writes
each of its gradients (GradientWork: the Cube, a zero fill, or nothing for an empty call)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.acl import aclTensor
from .geometry import ConvGeometry, make_cube_geometry


@dataclass(frozen=True)
class ConvBackwardCall:
    """One checked call, normalised: the convolution, its tensors (an output is None where
    outputMask leaves it out) and its dtypes. The planner's only input besides the profile and
    the forced tiling fields."""
    geometry: ConvGeometry
    grad_output: aclTensor
    input: aclTensor
    weight: aclTensor
    grad_input: aclTensor | None
    grad_weight: aclTensor | None
    grad_bias: aclTensor | None
    promoted_dtype: str       # gradOutput, input and weight promoted to one dtype
    compute_dtype: str        # what the Cube multiplies in: FLOAT16, BF16, FLOAT or HF32
    cube_math_type: int
    # aclnnConvolution's bias, added to the convolution it computes as gradInput (None otherwise)
    bias: aclTensor | None = None
    # original groups folded into one Cube group (CANN's group "enlarge"; geometry.groups counts
    # the Cube groups): the weight is first laid out block-diagonal
    enlarge: int = 1

    @property
    def output_mask(self) -> list[bool]:
        return [t is not None for t in (self.grad_input, self.grad_weight, self.grad_bias)]


def _cube_convolution(geom, grad_output):
    """The convolution the Cube computes, the gradOutput view it reads, and whether no window
    reads any element at all. A transposed convolution's outputPadding may reach past every
    window along W (outputPadding >= stride, which CANN accepts in 1D and 2D): those last
    columns of gradOutput feed no gradient but gradBias, and load3d's output width follows its
    map's width, so the Cube reads a view of the columns the windows reach (made contiguous by
    the usual copy)."""
    if not geom.transposed:
        return geom, grad_output, False
    X, O, k, s, d = geom.in_sp[-1], geom.out_sp[-1], geom.k[-1], geom.stride[-1], geom.dilation[-1]
    before = geom.pad[-1][0]
    reach = (X - 1) * s + d * (k - 1) + 1 - before      # columns of gradOutput the windows read
    if reach <= 0:
        return geom, grad_output, True
    if O < reach + s:           # load3d's grid is X wide: the extra columns fit in its last stride
        return geom, grad_output, False
    view = aclTensor(grad_output.viewDims[:-1] + (reach,), grad_output.dataType, grad_output.stride,
                     grad_output.offset, grad_output.format, grad_output.storageDims, grad_output.data)
    return replace(geom, out_sp=geom.out_sp[:-1] + (reach,)), view, False


@dataclass(frozen=True)
class GradientWork:
    """Who writes each gradient. `computed` is outputMask less the gradients a zero fill writes
    because no window touches an input element (stride and padding skip them all): the Cube
    computes the rest, unless the call is empty."""
    requested: list           # outputMask: gradInput, gradWeight, gradBias
    computed: list
    empty: bool               # N, Cin or Cout is 0: no GEMM at all
    zero_grad_input: bool
    zero_grad_weight: bool
    cube_convolution: ConvGeometry  # the call's convolution, narrowed to the gradOutput columns read
    cube_grad_output: aclTensor     # the gradOutput view the Cube reads

    @property
    def uses_cube(self) -> bool:
        return not self.empty and (self.computed[0] or self.computed[1])


def divide_work(call: ConvBackwardCall, c0: int) -> GradientWork:
    """Decide, per gradient, whether the Cube computes it or a zero fill writes it."""
    geom, mask = call.geometry, call.output_mask
    empty = geom.N == 0 or geom.Cin == 0 or geom.Cout == 0
    cube_conv, cube_grad_output, no_taps = _cube_convolution(geom, call.grad_output)
    # no tap reaches gradInput: it is zero, and for a transposed convolution gradWeight is too
    zero_dx = mask[0] and not empty and (no_taps or not cube_conv.transposed and all(
        f is None for f in make_cube_geometry(cube_conv, mask, c0).phases))
    zero_dw = mask[1] and not empty and no_taps
    computed = [mask[0] and not zero_dx, mask[1] and not zero_dw, mask[2]]
    return GradientWork(mask, computed, empty, zero_dx, zero_dw, cube_conv, cube_grad_output)
