"""aclnnConvolutionBackward: the gradients of a 1D/2D/3D (transposed) convolution, on the Cube.

    aclnnConvolutionBackwardGetWorkspaceSize(gradOutput, input, weight, biasSizes, stride, padding,
        dilation, transposed, outputPadding, groups, outputMask, cubeMathType,
        gradInput, gradWeight, gradBias) -> (workspaceSize, executor, status)

Math as PyTorch's `convolution_backward`. Checks, in SPEC section 4's order (161001 for nulls,
then 161002 for everything else):

 1. null gradOutput / input / weight / stride / padding / dilation / outputPadding / outputMask;
    outputMask length != 3; the outputs (and biasSizes) only where their mask bit is set  -> 161001
 2. the operator on this product series; valid tensor views
 3. dtypes: every tensor in the series' list (profile `operators.ConvolutionBackward.dtypes`);
    gradOutput, input and weight promote (f32 with f16/bf16 -> f32; f16 with bf16 -> f32)
 4. formats: 3D ND/NCL, 4D NCHW, 5D NCDHW; the rank in the series' `ranks` (3D conv on A2 only)
 5. stride >= 1, padding >= 0, dilation >= 1, groups >= 1, outputPadding 0 unless transposed,
    and >= 0 when transposed (< stride or < dilation in 3D only, as CANN's checker has it)
 6. cubeMathType in 0..3 and allowed for the promoted dtype on this series (SPEC section 3)
 7. shapes: equal ranks, same N, gradInput == input, gradWeight == weight, gradBias 1-D of the
    output channels, array lengths == rank - 2 (padding may have 4 entries in 2D), biasSizes [C]
 8. channels: gradOutput C == weight[0] and input C == groups * weight[1] (roles swap when
    transposed); output spatial size == the convolution formula
 9. the series' limits (A2: kernel H/W [1,255], padding [0,255], dilation [1,255], 3D stride H/W
    [1,63], groups [1,65535]; as the CANN documents say, for transposed=false)
10. empty tensors: only N or C of input may be 0, where the series allows empty tensors (A2);
    the training and inference series reject them.

Where the seed document and SPEC differ, SPEC wins (it records what the code does): the outputs
may be null where their mask bit is 0; on A2, cubeMathType 2 (USE_FP16) with BF16 computes in
FP16 rather than failing, and 1/3 with FP16 or BF16 keep the dtype.

The computation (kernels, tiling, workspace) is in the rest of ops/conv/ (docs/CONVOLUTION.md); it
is shared with aclnnConvTbcBackward (ops/conv/conv_tbc_backward.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simulator.acl import aclBoolArray, aclIntArray
from simulator.aclnn import (OpDef, Param, Plan, check_tensor_view, register, require_present,
                             require_support)
from simulator.enums import aclFormat, dtype_name, param_invalid, param_nullptr

from ..common import promote
from .geometry import STORAGE, ConvGeometry
from .call import ConvBackwardCall
from .plan import plan_convolution_backward
from .small_launches import group_enlarge
from .space import convolution_space

OP = "ConvolutionBackward"

FORMATS_BY_RANK = {
    3: (aclFormat.ACL_FORMAT_ND, aclFormat.ACL_FORMAT_NCL),
    4: (aclFormat.ACL_FORMAT_NCHW,),
    5: (aclFormat.ACL_FORMAT_NCDHW,),
}
# formats a 1-D gradBias may have (it is ND in the documents; the plain layouts are accepted)
BIAS_FORMATS = (aclFormat.ACL_FORMAT_ND, aclFormat.ACL_FORMAT_NCL, aclFormat.ACL_FORMAT_NCHW,
                aclFormat.ACL_FORMAT_NCDHW)

KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, USE_HF32 = 0, 1, 2, 3
CUBE_MATH_NAMES = {0: "KEEP_DTYPE", 1: "ALLOW_FP32_DOWN_PRECISION", 2: "USE_FP16", 3: "USE_HF32"}
# the tiling a caller may force (shared with ConvTbcBackward): L0 tiles for both GEMMs or for one
# (dx* gradInput, dw* gradWeight), the gradWeight K split, the Cube block count, double buffering
TILING_FIELDS = {**{f: "int" for f in ("baseM", "baseN", "baseK", "dxBaseM", "dxBaseN", "dxBaseK", "dwBaseM",
                                       "dwBaseN", "dwBaseK", "dwKSplit", "blockDim")}, "doubleBuffer": "bool"}


# ---- helpers shared with ConvTbcBackward ---------------------------------------------------------
def cube_compute_dtype(promoted: str, cube_math: int, profile, op: str) -> str:
    """The Cube's compute dtype for a promoted input dtype and cubeMathType (SPEC section 3),
    gated on what the chip's Cube multiplies (profile `cube.macs_per_cycle`): 161002 if the
    combination is not allowed on this series."""
    if not isinstance(cube_math, (int, np.integer)) or isinstance(cube_math, bool) \
            or not 0 <= int(cube_math) <= 3:
        raise param_invalid(f"{op}: cubeMathType {cube_math!r} must be 0 (KEEP_DTYPE), "
                            f"1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32)")
    math_type = int(cube_math)
    macs = profile.cube.macs_per_cycle
    fp32_cube = "FLOAT" in macs
    hf32_cube = "HF32" in macs
    name = CUBE_MATH_NAMES[math_type]
    if not fp32_cube:
        # training / inference series: the Cube multiplies FP16 only
        if promoted in ("FLOAT", "BF16") and math_type in (KEEP_DTYPE, USE_HF32):
            raise param_invalid(f"{op}: cubeMathType {math_type} ({name}) with {promoted} input is not "
                                f"supported on {profile.series_name} (its Cube has no "
                                f"{'FP32/HF32' if promoted == 'FLOAT' else 'BF16'}); use 1 or 2 to "
                                f"compute in FP16")
        if promoted == "BF16":
            raise param_invalid(f"{op}: cubeMathType {math_type} ({name}) with BF16 input is not supported "
                                f"on {profile.series_name}")
        return "FLOAT16"
    if promoted == "FLOAT":
        if math_type == KEEP_DTYPE:
            return "FLOAT"
        if math_type == USE_FP16:
            return "FLOAT16"
        return "HF32" if hf32_cube else "FLOAT"
    if math_type == USE_FP16:
        return "FLOAT16"
    return promoted


def int_values(a, name: str) -> list[int]:
    """The values of an aclIntArray argument; anything else is 161002."""
    if not isinstance(a, aclIntArray):
        raise param_invalid(f"{name} must be an aclIntArray, got {type(a).__name__}")
    return list(a.values)


def check_range(values, lo, hi, what, op, series):
    """Each value in [lo, hi], else 161002 naming the series."""
    for v in values:
        if not lo <= v <= hi:
            raise param_invalid(f"{op}: {what} {v} is outside [{lo}, {hi}] on {series}")


def conv_out_len(i: int, k: int, s: int, d: int, lo: int, hi: int, transposed: bool, out_pad: int) -> int:
    """gradOutput's length along one axis: input length i, kernel k, stride s, dilation d,
    padding lo / hi before and after, and outputPadding out_pad (transposed only)."""
    if transposed:
        return (i - 1) * s - lo - hi + d * (k - 1) + out_pad + 1
    return (i + lo + hi - d * (k - 1) - 1) // s + 1


# ---- checks (phase 1, before the plan) -------------------------------------------------------------
GRADS = ("gradInput", "gradWeight", "gradBias")


@dataclass(frozen=True)
class ConvAttributes:
    """The convolution's attributes as check 5 reads them (padding as the caller gave it)."""
    stride: list
    padding: list
    dilation: list
    output_padding: list
    groups: int
    transposed: bool


def _check_nulls(a: dict) -> tuple:
    """1. Null tensors and arrays, and an outputMask that is not 3 bools (161001); returns the
    mask."""
    require_present(a, ("gradOutput", "input", "weight", "stride", "padding", "dilation", "outputPadding",
                        "outputMask"), OP)
    mask_arr = a["outputMask"]
    if not isinstance(mask_arr, aclBoolArray):
        raise param_invalid(f"{OP}: outputMask must be an aclBoolArray, got {type(mask_arr).__name__}")
    if len(mask_arr) != 3:
        raise param_nullptr(f"{OP}: outputMask has {len(mask_arr)} entries; it must have 3 "
                            f"(gradInput, gradWeight, gradBias)")
    mask = mask_arr.values
    for bit, name in zip(mask, GRADS):
        if bit and a[name] is None:
            raise param_nullptr(f"{OP}: {name} is a null pointer but outputMask asks for it")
    if mask[2] and a["biasSizes"] is None:
        raise param_nullptr(f"{OP}: biasSizes is a null pointer but outputMask asks for gradBias")
    return mask


def _check_dtypes(tensors: list, support, profile) -> None:
    """3. Every tensor's dtype is in the series' list."""
    for name, t in tensors:
        dtype = dtype_name(t.dataType)
        if dtype not in support.dtypes:
            raise param_invalid(f"{OP}: {name} has dtype {dtype}; {profile.series_name} supports "
                                f"{', '.join(support.dtypes)}")


def _check_formats(tensors: list, support, profile) -> None:
    """4. Each tensor's format for its rank, and the ranks this series supports."""
    for name, t in tensors:
        r = len(t.viewDims)
        if name == "gradBias":
            if t.format not in BIAS_FORMATS:
                raise param_invalid(f"{OP}: gradBias has format {t.format.name}; it must be ND")
            continue
        allowed = FORMATS_BY_RANK.get(r)
        if allowed is None or r not in support.ranks:
            conv = {3: "1D", 4: "2D", 5: "3D"}
            ok = ", ".join(f"{rk}-D ({conv[rk]} convolution)" for rk in support.ranks)
            raise param_invalid(f"{OP}: {name} has rank {r}; {profile.series_name} supports {ok}")
        if t.format not in allowed:
            raise param_invalid(f"{OP}: {name} is {r}-D with format {t.format.name}; a {r}-D tensor "
                                f"must be {' or '.join(f.name for f in allowed)}")


def _read_attributes(a: dict) -> ConvAttributes:
    """5a. The attributes' types: int arrays, a bool transposed, an int groups."""
    stride = int_values(a["stride"], "stride")
    padding = int_values(a["padding"], "padding")
    dilation = int_values(a["dilation"], "dilation")
    output_padding = int_values(a["outputPadding"], "outputPadding")
    groups = a["groups"]
    transposed = a["transposed"]
    if not isinstance(transposed, (bool, np.bool_)):
        raise param_invalid(f"{OP}: transposed must be a bool, got {transposed!r}")
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool):
        raise param_invalid(f"{OP}: groups must be an int, got {groups!r}")
    return ConvAttributes(stride, padding, dilation, output_padding, int(groups), bool(transposed))


def _check_attribute_values(attrs: ConvAttributes, rank: int) -> None:
    """5b. stride >= 1, padding >= 0, dilation >= 1, groups >= 1; outputPadding 0 unless
    transposed, else >= 0 (and, in 3D, below stride or dilation)."""
    stride, dilation, out_pad = attrs.stride, attrs.dilation, attrs.output_padding
    if any(v < 1 for v in stride):
        raise param_invalid(f"{OP}: stride {stride} must be >= 1 in every dimension")
    if any(v < 0 for v in attrs.padding):
        raise param_invalid(f"{OP}: padding {attrs.padding} must be >= 0 in every dimension")
    if any(v < 1 for v in dilation):
        raise param_invalid(f"{OP}: dilation {dilation} must be >= 1 in every dimension")
    if attrs.groups < 1:
        raise param_invalid(f"{OP}: groups {attrs.groups} must be >= 1")
    if not attrs.transposed:
        if any(v != 0 for v in out_pad):
            raise param_invalid(f"{OP}: outputPadding {out_pad} must be all 0 when transposed is false")
        return
    if any(v < 0 for v in out_pad):
        raise param_invalid(f"{OP}: outputPadding {out_pad} must be >= 0")
    # CANN's checker bounds outputPadding (by stride or dilation) for 3D only (docs/CONVOLUTION.md)
    if rank == 5:
        for i, (p, s, d) in enumerate(zip(out_pad, stride, dilation)):
            if p >= s and p >= d:
                raise param_invalid(f"{OP}: outputPadding[{i}] = {p} must be smaller than stride[{i}] = {s} "
                                    f"or dilation[{i}] = {d} for a 3D transposed convolution")


def _normalised_padding(padding: list, nd: int) -> tuple:
    """((before, after), ...) per spatial dim: nd entries, or 4 ([top, bottom, left, right]) in 2D."""
    if len(padding) == nd:
        return tuple((p, p) for p in padding)
    if nd == 2 and len(padding) == 4:
        return ((padding[0], padding[1]), (padding[2], padding[3]))
    extra = " or 4 ([top, bottom, left, right])" if nd == 2 else ""
    raise param_invalid(f"{OP}: padding has {len(padding)} entries; a {nd}D convolution needs {nd}{extra}")


def _check_shapes(a: dict, mask, attrs: ConvAttributes) -> tuple:
    """7. One rank, one N, each gradient shaped as its tensor, the arrays' lengths and biasSizes;
    returns the normalised padding."""
    grad_output, input_, weight = a["gradOutput"], a["input"], a["weight"]
    r = len(input_.viewDims)
    if len(grad_output.viewDims) != r or len(weight.viewDims) != r:
        raise param_invalid(f"{OP}: gradOutput, input and weight must have one rank, got "
                            f"{len(grad_output.viewDims)}, {r}, {len(weight.viewDims)}")
    nd = r - 2
    if grad_output.viewDims[0] != input_.viewDims[0]:
        raise param_invalid(f"{OP}: gradOutput N {grad_output.viewDims[0]} != input N {input_.viewDims[0]}")
    for bit, name, ref, ref_name in ((mask[0], "gradInput", input_, "input"),
                                     (mask[1], "gradWeight", weight, "weight")):
        if bit and a[name].viewDims != ref.viewDims:
            raise param_invalid(f"{OP}: {name} shape {list(a[name].viewDims)} != {ref_name} shape "
                                f"{list(ref.viewDims)}")
    cout = grad_output.viewDims[1]
    if mask[2] and a["gradBias"].viewDims != (cout,):
        raise param_invalid(f"{OP}: gradBias shape {list(a['gradBias'].viewDims)} must be [{cout}] "
                            f"(1-D, gradOutput's channels)")
    for name, vals in (("stride", attrs.stride), ("dilation", attrs.dilation), ("outputPadding", attrs.output_padding)):
        if len(vals) != nd:
            raise param_invalid(f"{OP}: {name} has {len(vals)} entries; a {nd}D convolution needs {nd}")
    pads = _normalised_padding(attrs.padding, nd)
    if mask[2] or a["biasSizes"] is not None:
        bias_sizes = int_values(a["biasSizes"], "biasSizes")
        if len(bias_sizes) != 1:
            raise param_invalid(f"{OP}: biasSizes has {len(bias_sizes)} entries; it must have 1")
        if mask[2] and bias_sizes[0] != cout:
            raise param_invalid(f"{OP}: biasSizes {bias_sizes} must be [{cout}] (the output channels)")
    return pads


def _check_channels(grad_output, input_, weight, attrs: ConvAttributes) -> None:
    """8a. gradOutput C == weight[0] and input C == groups * weight[1], roles swapped when
    transposed; weight[0] divisible by groups."""
    groups, w = attrs.groups, weight.viewDims
    if not attrs.transposed:
        if grad_output.viewDims[1] != w[0]:
            raise param_invalid(f"{OP}: gradOutput channels {grad_output.viewDims[1]} != weight[0] {w[0]}")
        if input_.viewDims[1] != groups * w[1]:
            raise param_invalid(f"{OP}: input channels {input_.viewDims[1]} != groups * weight[1] = "
                                f"{groups} * {w[1]}")
        if w[0] % groups:
            raise param_invalid(f"{OP}: weight[0] (output channels) {w[0]} is not divisible by groups {groups}")
        return
    if input_.viewDims[1] != w[0]:
        raise param_invalid(f"{OP}: (transposed) input channels {input_.viewDims[1]} != weight[0] {w[0]}")
    if grad_output.viewDims[1] != groups * w[1]:
        raise param_invalid(f"{OP}: (transposed) gradOutput channels {grad_output.viewDims[1]} != groups * "
                            f"weight[1] = {groups} * {w[1]}")
    if w[0] % groups:
        raise param_invalid(f"{OP}: (transposed) weight[0] (input channels) {w[0]} is not divisible by groups "
                            f"{groups}")


def _check_output_size(grad_output, input_, weight, attrs: ConvAttributes, pads: tuple) -> None:
    """8b. gradOutput's spatial shape is what the (transposed) convolution formula gives."""
    in_sp, out_sp, k = tuple(input_.viewDims[2:]), tuple(grad_output.viewDims[2:]), tuple(weight.viewDims[2:])
    stride, padding, dilation, out_pad = attrs.stride, attrs.padding, attrs.dilation, attrs.output_padding
    want = tuple(conv_out_len(in_sp[i], k[i], stride[i], dilation[i], pads[i][0], pads[i][1],
                              attrs.transposed, out_pad[i]) for i in range(len(in_sp)))
    if any(v < 1 for v in want) and all(d > 0 for d in in_sp + k):
        raise param_invalid(f"{OP}: the convolution has no output: input {list(in_sp)}, kernel "
                            f"{list(k)}, stride {stride}, padding {padding}, dilation {dilation} give "
                            f"{list(want)}")
    if out_sp != want:
        raise param_invalid(f"{OP}: gradOutput spatial shape {list(out_sp)} does not match the "
                            f"{'transposed ' if attrs.transposed else ''}convolution formula: {list(want)} "
                            f"for input {list(in_sp)}, kernel {list(k)}, stride {stride}, padding "
                            f"{padding}, dilation {dilation}"
                            + (f", outputPadding {out_pad}" if attrs.transposed else ""))


def check_series_limits(support, stride, dilation, groups: int, pads: tuple, k: tuple, op: str, profile) -> None:
    """The series' limits on kernel, padding, dilation, 3D stride and groups, as its CANN documents
    give them (shared with aclnnConvolution)."""
    lim = support.limits
    nd, series = len(k), profile.series_name
    hw = list(range(nd)) if nd < 3 else [1, 2]       # 3D: H and W only (D has no upper bound)
    if "kernel" in lim:
        check_range([k[i] for i in hw], *lim["kernel"], "kernel size", op, series)
    if "padding" in lim:
        check_range([p for i in hw for p in pads[i]], *lim["padding"], "padding", op, series)
    if "dilation" in lim:
        check_range(dilation, *lim["dilation"], "dilation", op, series)
    if nd == 3 and "stride3d" in lim:
        check_range([stride[1], stride[2]], *lim["stride3d"], "3D stride (H/W)", op, series)
    if "groups" in lim:
        check_range([groups], *lim["groups"], "groups", op, series)


def _check_series_limits(support, attrs: ConvAttributes, pads: tuple, k: tuple, profile) -> None:
    """9. The series' limits on a (non-transposed) convolution."""
    if not attrs.transposed:
        check_series_limits(support, attrs.stride, attrs.dilation, attrs.groups, pads, k, OP, profile)


def _check_empty(grad_output, input_, weight, transposed: bool, support, profile) -> None:
    """10. Empty tensors: only input's N or C may be 0, on a series that allows empty tensors."""
    if not any(t.numel() == 0 for t in (grad_output, input_, weight)):
        return
    if not support.options.get("empty_tensors", False):
        raise param_invalid(f"{OP}: empty tensors are not supported on {profile.series_name} "
                            f"(gradOutput {list(grad_output.viewDims)}, input {list(input_.viewDims)}, weight "
                            f"{list(weight.viewDims)})")
    if any(d == 0 for d in input_.viewDims[2:]):
        raise param_invalid(f"{OP}: input {list(input_.viewDims)}: only its N or C may be 0")
    if any(d == 0 for d in weight.viewDims[2:]):
        raise param_invalid(f"{OP}: weight {list(weight.viewDims)} has an empty kernel")
    out_channels = weight.viewDims[1] if transposed else weight.viewDims[0]
    if out_channels == 0 or grad_output.viewDims[1] == 0:
        raise param_invalid(f"{OP}: gradOutput/weight output channels are 0; only input's N or C "
                            f"may be 0")


def check(a: dict, profile) -> None:
    """Phase 1's checks, in the order the module docstring lists them (SPEC section 4): the
    first that fails is the call's status. A call that passes is one plan() can normalise."""
    grad_output, input_, weight = a["gradOutput"], a["input"], a["weight"]
    mask = _check_nulls(a)
    support = require_support(OP, profile)
    outs = [(n, a[n]) for n, bit in zip(GRADS, mask) if bit]
    # an output outside outputMask is ignored, whatever the caller passed there
    tensors = [("gradOutput", grad_output), ("input", input_), ("weight", weight)] + outs
    for name, t in tensors:
        check_tensor_view(t, name)
    _check_dtypes(tensors, support, profile)
    promoted = promote([dtype_name(t.dataType) for t in (grad_output, input_, weight)])
    _check_formats(tensors, support, profile)
    attrs = _read_attributes(a)
    _check_attribute_values(attrs, len(input_.viewDims))
    cube_compute_dtype(promoted, a["cubeMathType"], profile, OP)
    pads = _check_shapes(a, mask, attrs)
    _check_channels(grad_output, input_, weight, attrs)
    _check_output_size(grad_output, input_, weight, attrs, pads)
    _check_series_limits(support, attrs, pads, tuple(weight.viewDims[2:]), profile)
    _check_empty(grad_output, input_, weight, attrs.transposed, support, profile)


def geometry(a: dict) -> ConvGeometry:
    """The normalised convolution of a checked call (plan's first step)."""
    input_, weight, grad_output = a["input"], a["weight"], a["gradOutput"]
    nd = len(input_.viewDims) - 2
    return ConvGeometry(nd=nd, N=input_.viewDims[0], Cin=input_.viewDims[1], Cout=grad_output.viewDims[1],
                        groups=int(a["groups"]), in_sp=tuple(input_.viewDims[2:]),
                        out_sp=tuple(grad_output.viewDims[2:]), k=tuple(weight.viewDims[2:]),
                        stride=tuple(a["stride"].values), dilation=tuple(a["dilation"].values),
                        pad=_normalised_padding(list(a["padding"].values), nd),
                        out_pad=tuple(a["outputPadding"].values), transposed=bool(a["transposed"]))


def plan(a: dict, profile, tiling: dict) -> Plan:
    """Phase 1's plan of a checked call: the call normalised (outputs outside outputMask left
    out), then the planner shared with ConvTbcBackward."""
    grad_output, inp, weight = a["gradOutput"], a["input"], a["weight"]
    mask = tuple(a["outputMask"].values)
    promoted = promote([dtype_name(t.dataType) for t in (grad_output, inp, weight)])
    compute = cube_compute_dtype(promoted, a["cubeMathType"], profile, OP)
    empty = any(t.numel() == 0 for t in (grad_output, inp, weight))
    enlarge = 1 if empty else group_enlarge(int(a["groups"]), weight.viewDims, weight.itemsize, bool(a["transposed"]),
                                            32 // STORAGE[compute].itemsize, profile)
    geom = geometry(a)
    call = ConvBackwardCall(replace(geom, groups=geom.groups // enlarge), grad_output, inp, weight,
                            a["gradInput"] if mask[0] else None, a["gradWeight"] if mask[1] else None,
                            a["gradBias"] if mask[2] else None, promoted, compute, int(a["cubeMathType"]),
                            enlarge=enlarge)
    return plan_convolution_backward(call, profile, tiling)


def infer_outputs(inputs: dict) -> dict:
    """Output shapes for simulator.run: gradInput like input, gradWeight like weight, gradBias
    (C_out,) in gradOutput's dtype; only where outputMask asks."""
    x, w, go = (np.asarray(inputs[n]) for n in ("input", "weight", "gradOutput"))
    mask = list(inputs.get("outputMask") or (True, True, True))
    return {"gradInput": (x.shape, x.dtype) if mask[0] else None,
            "gradWeight": (w.shape, w.dtype) if mask[1] else None,
            "gradBias": ((go.shape[1],), go.dtype) if len(mask) > 2 and mask[2] else None}


PARAMS = [Param("gradOutput", "tensor"), Param("input", "tensor"), Param("weight", "tensor"),
          Param("biasSizes", "int_array"), Param("stride", "int_array"), Param("padding", "int_array"),
          Param("dilation", "int_array"), Param("transposed", "bool"),
          Param("outputPadding", "int_array"), Param("groups", "int"),
          Param("outputMask", "bool_array"), Param("cubeMathType", "int"),
          Param("gradInput", "tensor", output=True), Param("gradWeight", "tensor", output=True),
          Param("gradBias", "tensor", output=True)]

register(OpDef(OP, PARAMS, check, plan, infer_outputs, convolution_space, TILING_FIELDS))
