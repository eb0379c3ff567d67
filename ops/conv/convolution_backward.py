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

from dataclasses import dataclass

import numpy as np

from simulator.acl import aclBoolArray, aclIntArray
from simulator.aclnn import (OpDef, Param, Plan, check_tensor_view, register, require_present,
                             require_support)
from simulator.enums import aclFormat, dtype_name, param_invalid, param_nullptr

from .plan import ConvBackwardCall, plan_convolution_backward

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
def promote(names: list[str]) -> str:
    """Convolution dtype promotion: f32 with f16/bf16 -> f32; f16 with bf16 -> f32."""
    s = set(names)
    if len(s) == 1:
        return names[0]
    return "FLOAT"


def cube_compute_dtype(promoted: str, cube_math: int, profile, op: str) -> str:
    """The Cube's compute dtype for a promoted input dtype and cubeMathType (SPEC section 3),
    gated on what the chip's Cube multiplies (profile `cube.macs_per_cycle`): 161002 if the
    combination is not allowed on this series."""
    if not isinstance(cube_math, (int, np.integer)) or isinstance(cube_math, bool) \
            or not 0 <= int(cube_math) <= 3:
        raise param_invalid(f"{op}: cubeMathType {cube_math!r} must be 0 (KEEP_DTYPE), "
                            f"1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32)")
    cm = int(cube_math)
    macs = profile.cube.macs_per_cycle
    fp32_cube = "FLOAT" in macs
    hf32_cube = "HF32" in macs
    name = CUBE_MATH_NAMES[cm]
    if not fp32_cube:
        # training / inference series: the Cube multiplies FP16 only
        if promoted in ("FLOAT", "BF16") and cm in (KEEP_DTYPE, USE_HF32):
            raise param_invalid(f"{op}: cubeMathType {cm} ({name}) with {promoted} input is not "
                                f"supported on {profile.series_name} (its Cube has no "
                                f"{'FP32/HF32' if promoted == 'FLOAT' else 'BF16'}); use 1 or 2 to "
                                f"compute in FP16")
        if promoted == "BF16":
            raise param_invalid(f"{op}: cubeMathType {cm} ({name}) with BF16 input is not supported "
                                f"on {profile.series_name}")
        return "FLOAT16"
    if promoted == "FLOAT":
        if cm == KEEP_DTYPE:
            return "FLOAT"
        if cm == USE_FP16:
            return "FLOAT16"
        return "HF32" if hf32_cube else "FLOAT"
    if cm == USE_FP16:
        return "FLOAT16"
    return promoted


def int_values(a, name: str) -> list[int]:
    if not isinstance(a, aclIntArray):
        raise param_invalid(f"{name} must be an aclIntArray, got {type(a).__name__}")
    return list(a.values)


def _ranged(values, lo, hi, what, op, series):
    for v in values:
        if not lo <= v <= hi:
            raise param_invalid(f"{op}: {what} {v} is outside [{lo}, {hi}] on {series}")


@dataclass(frozen=True)
class ConvGeometry:
    """One convolution, normalised: nd spatial dims, per-dim (before, after) padding. For a
    transposed convolution, weight is (Cin, Cout/groups, *k); otherwise (Cout, Cin/groups, *k).
    `in_sp` is input's spatial shape, `out_sp` gradOutput's."""
    nd: int
    N: int
    Cin: int
    Cout: int
    groups: int
    in_sp: tuple
    out_sp: tuple
    k: tuple
    stride: tuple
    dilation: tuple
    pad: tuple            # ((before, after), ...) per spatial dim
    out_pad: tuple
    transposed: bool

    @property
    def macs(self) -> int:
        """MACs of one gradient (dx or dw) of this convolution: N*Cout*prod(out)*Cin/g*prod(k)
        for a convolution (roles swapped when transposed)."""
        sp = self.out_sp if not self.transposed else self.in_sp
        kk = int(np.prod(self.k))
        return self.N * self.Cout * int(np.prod(sp)) * (self.Cin // self.groups) * kk


def conv_out_len(i: int, k: int, s: int, d: int, lo: int, hi: int, transposed: bool, op: int) -> int:
    if transposed:
        return (i - 1) * s - lo - hi + d * (k - 1) + op + 1
    return (i + lo + hi - d * (k - 1) - 1) // s + 1


# ---- checks -------------------------------------------------------------------------------------
def check(a: dict, profile) -> None:
    op = OP
    go, x, w = a["gradOutput"], a["input"], a["weight"]
    require_present(a, ("gradOutput", "input", "weight", "stride", "padding", "dilation", "outputPadding",
                        "outputMask"), op)
    mask_arr = a["outputMask"]
    if not isinstance(mask_arr, aclBoolArray):
        raise param_invalid(f"{op}: outputMask must be an aclBoolArray, got {type(mask_arr).__name__}")
    if len(mask_arr) != 3:
        raise param_nullptr(f"{op}: outputMask has {len(mask_arr)} entries; it must have 3 "
                            f"(gradInput, gradWeight, gradBias)")
    mask = mask_arr.values
    for bit, name in zip(mask, ("gradInput", "gradWeight", "gradBias")):
        if bit and a[name] is None:
            raise param_nullptr(f"{op}: {name} is a null pointer but outputMask asks for it")
    if mask[2] and a["biasSizes"] is None:
        raise param_nullptr(f"{op}: biasSizes is a null pointer but outputMask asks for gradBias")

    support = require_support(op, profile)
    outs = [(n, a[n]) for n, bit in zip(("gradInput", "gradWeight", "gradBias"), mask) if bit]
    # unrequested outputs that were passed anyway are still read as tensors (and ignored)
    tensors = [("gradOutput", go), ("input", x), ("weight", w)] + outs
    for name, t in tensors:
        check_tensor_view(t, name)

    # 3. dtypes
    for name, t in tensors:
        dn = dtype_name(t.dataType)
        if dn not in support.dtypes:
            raise param_invalid(f"{op}: {name} has dtype {dn}; {profile.series_name} supports "
                                f"{', '.join(support.dtypes)}")
    promoted = promote([dtype_name(t.dataType) for t in (go, x, w)])

    # 4. formats (and the ranks this series supports)
    for name, t in [("gradOutput", go), ("input", x), ("weight", w)] + outs:
        r = len(t.viewDims)
        if name == "gradBias":
            if t.format not in BIAS_FORMATS:
                raise param_invalid(f"{op}: gradBias has format {t.format.name}; it must be ND")
            continue
        allowed = FORMATS_BY_RANK.get(r)
        if allowed is None or r not in support.ranks:
            conv = {3: "1D", 4: "2D", 5: "3D"}
            ok = ", ".join(f"{rk}-D ({conv[rk]} convolution)" for rk in support.ranks)
            raise param_invalid(f"{op}: {name} has rank {r}; {profile.series_name} supports {ok}")
        if t.format not in allowed:
            raise param_invalid(f"{op}: {name} is {r}-D with format {t.format.name}; a {r}-D tensor "
                                f"must be {' or '.join(f.name for f in allowed)}")

    # 5. attribute values
    stride = int_values(a["stride"], "stride")
    padding = int_values(a["padding"], "padding")
    dilation = int_values(a["dilation"], "dilation")
    out_pad = int_values(a["outputPadding"], "outputPadding")
    groups = a["groups"]
    transposed = a["transposed"]
    if not isinstance(transposed, (bool, np.bool_)):
        raise param_invalid(f"{op}: transposed must be a bool, got {transposed!r}")
    transposed = bool(transposed)
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool):
        raise param_invalid(f"{op}: groups must be an int, got {groups!r}")
    groups = int(groups)
    if any(v < 1 for v in stride):
        raise param_invalid(f"{op}: stride {stride} must be >= 1 in every dimension")
    if any(v < 0 for v in padding):
        raise param_invalid(f"{op}: padding {padding} must be >= 0 in every dimension")
    if any(v < 1 for v in dilation):
        raise param_invalid(f"{op}: dilation {dilation} must be >= 1 in every dimension")
    if groups < 1:
        raise param_invalid(f"{op}: groups {groups} must be >= 1")
    if not transposed:
        if any(v != 0 for v in out_pad):
            raise param_invalid(f"{op}: outputPadding {out_pad} must be all 0 when transposed is false")
    else:
        if any(v < 0 for v in out_pad):
            raise param_invalid(f"{op}: outputPadding {out_pad} must be >= 0")
        # CANN's checker bounds outputPadding (by stride or dilation) for 3D only (docs/CONVOLUTION.md)
        if len(x.viewDims) == 5:
            for i, (p, s, d) in enumerate(zip(out_pad, stride, dilation)):
                if p >= s and p >= d:
                    raise param_invalid(f"{op}: outputPadding[{i}] = {p} must be smaller than stride[{i}] = {s} "
                                        f"or dilation[{i}] = {d} for a 3D transposed convolution")

    # 6. cubeMathType
    cube_compute_dtype(promoted, a["cubeMathType"], profile, op)

    # 7. shapes
    r = len(x.viewDims)
    if len(go.viewDims) != r or len(w.viewDims) != r:
        raise param_invalid(f"{op}: gradOutput, input and weight must have one rank, got "
                            f"{len(go.viewDims)}, {r}, {len(w.viewDims)}")
    nd = r - 2
    if go.viewDims[0] != x.viewDims[0]:
        raise param_invalid(f"{op}: gradOutput N {go.viewDims[0]} != input N {x.viewDims[0]}")
    if mask[0] and a["gradInput"].viewDims != x.viewDims:
        raise param_invalid(f"{op}: gradInput shape {list(a['gradInput'].viewDims)} != input shape "
                            f"{list(x.viewDims)}")
    if mask[1] and a["gradWeight"].viewDims != w.viewDims:
        raise param_invalid(f"{op}: gradWeight shape {list(a['gradWeight'].viewDims)} != weight shape "
                            f"{list(w.viewDims)}")
    cout = go.viewDims[1]
    if mask[2] and a["gradBias"].viewDims != (cout,):
        raise param_invalid(f"{op}: gradBias shape {list(a['gradBias'].viewDims)} must be [{cout}] "
                            f"(1-D, gradOutput's channels)")
    for name, vals in (("stride", stride), ("dilation", dilation), ("outputPadding", out_pad)):
        if len(vals) != nd:
            raise param_invalid(f"{op}: {name} has {len(vals)} entries; a {nd}D convolution needs {nd}")
    if len(padding) == nd:
        pads = tuple((p, p) for p in padding)
    elif nd == 2 and len(padding) == 4:
        pads = ((padding[0], padding[1]), (padding[2], padding[3]))
    else:
        extra = " or 4 ([top, bottom, left, right])" if nd == 2 else ""
        raise param_invalid(f"{op}: padding has {len(padding)} entries; a {nd}D convolution needs {nd}{extra}")
    if mask[2] or a["biasSizes"] is not None:
        bs = int_values(a["biasSizes"], "biasSizes")
        if len(bs) != 1:
            raise param_invalid(f"{op}: biasSizes has {len(bs)} entries; it must have 1")
        if mask[2] and bs[0] != cout:
            raise param_invalid(f"{op}: biasSizes {bs} must be [{cout}] (the output channels)")

    # 8. channels and the convolution formula
    k = tuple(w.viewDims[2:])
    if not transposed:
        cin = groups * w.viewDims[1]
        if go.viewDims[1] != w.viewDims[0]:
            raise param_invalid(f"{op}: gradOutput channels {go.viewDims[1]} != weight[0] {w.viewDims[0]}")
        if x.viewDims[1] != cin:
            raise param_invalid(f"{op}: input channels {x.viewDims[1]} != groups * weight[1] = "
                                f"{groups} * {w.viewDims[1]}")
        if w.viewDims[0] % groups:
            raise param_invalid(f"{op}: weight[0] (output channels) {w.viewDims[0]} is not divisible "
                                f"by groups {groups}")
    else:
        if x.viewDims[1] != w.viewDims[0]:
            raise param_invalid(f"{op}: (transposed) input channels {x.viewDims[1]} != weight[0] "
                                f"{w.viewDims[0]}")
        if go.viewDims[1] != groups * w.viewDims[1]:
            raise param_invalid(f"{op}: (transposed) gradOutput channels {go.viewDims[1]} != groups * "
                                f"weight[1] = {groups} * {w.viewDims[1]}")
        if w.viewDims[0] % groups:
            raise param_invalid(f"{op}: (transposed) weight[0] (input channels) {w.viewDims[0]} is not "
                                f"divisible by groups {groups}")
    in_sp = tuple(x.viewDims[2:])
    out_sp = tuple(go.viewDims[2:])
    want = tuple(conv_out_len(in_sp[i], k[i], stride[i], dilation[i], pads[i][0], pads[i][1],
                              transposed, out_pad[i]) for i in range(nd))
    if any(v < 1 for v in want) and all(d > 0 for d in in_sp + k):
        raise param_invalid(f"{op}: the convolution has no output: input {list(in_sp)}, kernel "
                            f"{list(k)}, stride {stride}, padding {padding}, dilation {dilation} give "
                            f"{list(want)}")
    if out_sp != want:
        raise param_invalid(f"{op}: gradOutput spatial shape {list(out_sp)} does not match the "
                            f"{'transposed ' if transposed else ''}convolution formula: {list(want)} "
                            f"for input {list(in_sp)}, kernel {list(k)}, stride {stride}, padding "
                            f"{padding}, dilation {dilation}"
                            + (f", outputPadding {out_pad}" if transposed else ""))

    # 9. the series' limits
    lim = support.limits
    if lim and not transposed:
        hw = list(range(nd)) if nd < 3 else [1, 2]       # 3D: H and W only (D has no upper bound)
        if "kernel" in lim:
            _ranged([k[i] for i in hw], *lim["kernel"], "kernel size", op, profile.series_name)
        if "padding" in lim:
            hw_pads = [p for i in hw for p in pads[i]]
            _ranged(hw_pads, *lim["padding"], "padding", op, profile.series_name)
        if "dilation" in lim:
            _ranged(dilation, *lim["dilation"], "dilation", op, profile.series_name)
        if nd == 3 and "stride3d" in lim:
            _ranged([stride[1], stride[2]], *lim["stride3d"], "3D stride (H/W)", op, profile.series_name)
        if "groups" in lim:
            _ranged([groups], *lim["groups"], "groups", op, profile.series_name)

    # 10. empty tensors
    if any(t.numel() == 0 for t in (go, x, w)):
        if not support.options.get("empty_tensors", False):
            raise param_invalid(f"{op}: empty tensors are not supported on {profile.series_name} "
                                f"(gradOutput {list(go.viewDims)}, input {list(x.viewDims)}, weight "
                                f"{list(w.viewDims)})")
        if any(d == 0 for d in x.viewDims[2:]):
            raise param_invalid(f"{op}: input {list(x.viewDims)}: only its N or C may be 0")
        if any(d == 0 for d in k):
            raise param_invalid(f"{op}: weight {list(w.viewDims)} has an empty kernel")
        out_c_dim = w.viewDims[1] if transposed else w.viewDims[0]
        if out_c_dim == 0 or go.viewDims[1] == 0:
            raise param_invalid(f"{op}: gradOutput/weight output channels are 0; only input's N or C "
                                f"may be 0")


def geometry(a: dict) -> ConvGeometry:
    """The normalised convolution of a checked call."""
    x, w, go = a["input"], a["weight"], a["gradOutput"]
    nd = len(x.viewDims) - 2
    padding = list(a["padding"].values)
    pads = tuple((p, p) for p in padding) if len(padding) == nd else \
        ((padding[0], padding[1]), (padding[2], padding[3]))
    groups = int(a["groups"])
    transposed = bool(a["transposed"])
    cin = x.viewDims[1]
    cout = go.viewDims[1]
    return ConvGeometry(nd=nd, N=x.viewDims[0], Cin=cin, Cout=cout, groups=groups,
                        in_sp=tuple(x.viewDims[2:]), out_sp=tuple(go.viewDims[2:]),
                        k=tuple(w.viewDims[2:]), stride=tuple(a["stride"].values),
                        dilation=tuple(a["dilation"].values), pad=pads,
                        out_pad=tuple(a["outputPadding"].values), transposed=transposed)


def plan(a: dict, profile, tiling: dict) -> Plan:
    """Phase 1's plan of a checked call: the call normalised (outputs outside outputMask left
    out), then the planner shared with ConvTbcBackward."""
    grad_output, inp, weight = a["gradOutput"], a["input"], a["weight"]
    mask = tuple(a["outputMask"].values)
    promoted = promote([dtype_name(t.dataType) for t in (grad_output, inp, weight)])
    call = ConvBackwardCall(geometry(a), grad_output, inp, weight,
                            a["gradInput"] if mask[0] else None, a["gradWeight"] if mask[1] else None,
                            a["gradBias"] if mask[2] else None, promoted,
                            cube_compute_dtype(promoted, a["cubeMathType"], profile, OP), int(a["cubeMathType"]))
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

register(OpDef(OP, PARAMS, check, plan, infer_outputs, tiling_fields=TILING_FIELDS))
