"""aclnnConvolution: a 1D/2D/3D convolution, transposed or not, with groups, dilation and bias, on
the Cube.

    aclnnConvolutionGetWorkspaceSize(input, weight, bias, stride, padding, dilation, transposed,
        outputPadding, groups, output, cubeMathType) -> (workspaceSize, executor, status)

Math as PyTorch's `convolution`. Checks, in the order of CANN's checkers (161001 for nulls, then
161002 for everything else):

 1. null input / weight / stride / padding / dilation / output, and outputPadding when
    transposed                                                                      -> 161001
 2. the operator on this product series; valid tensor views
 3. dtypes: input, weight and output in the series' list (profile `operators.Convolution`), bias
    FLOAT, FLOAT16 or BF16 where the series has them; input and weight promote as the backward's
    (f32 with f16/bf16 -> f32; f16 with bf16 -> f32), the output may be any listed dtype
 4. formats: 3D ND/NCL, 4D NCHW, 5D NCDHW, one rank for all three, input's format == output's;
    the rank in the series' `ranks`; bias 1-D (ND or a plain layout)
 5. stride >= 1, dilation >= 1, padding >= 0, groups >= 1; array lengths: stride and dilation
    rank - 2, padding 1 or 2 in 1D (1 when transposed), 2 or 4 in 2D, 3 in 3D; outputPadding
    rank - 2 and each entry >= 0 and below stride or dilation when transposed (ignored otherwise)
 6. cubeMathType in 0..3 and allowed for the promoted dtype on this series (SPEC section 3)
 7. channels: input C == groups * weight[1] (transposed: input C == weight[0]), weight[0]
    divisible by groups; output N == input N, output C == weight[0] (transposed: groups *
    weight[1]); bias [output C]
 8. output spatial shape == the (transposed) convolution formula; a padded input shorter than
    the dilated kernel has no output
 9. the series' limits (A2: kernel H/W [1,255], padding [0,255], dilation [1,255], 3D stride H/W
    [1,63], groups [1,65535])
10. empty tensors: an empty input or weight must give an empty output; an empty output launches
    nothing.

The computation is ConvolutionBackward's gradInput kernels (ops/conv/plan.py): a convolution is the
gradInput of the transposed convolution its weight describes, and a transposed convolution the
gradInput of the convolution. So the launches are CANN's: TransData of input to NC1HWC0 (NDC1HWC0
in 3D) and of the weight, the Cube kernel, TransData of the output back. CANN adds the bias to the
Cube's FP32 accumulator (Conv2D, Conv3DV2, Conv2DTranspose) or, after a transposed 3D
convolution, in a vector Add; here it is always that vector Add, in FP32 on the rounded output
(docs/CONVOLUTION.md, "aclnnConvolution").
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulator.aclnn import OpDef, Param, Plan, check_tensor_view, register, require_present, require_support
from simulator.enums import dtype_name, param_invalid, param_nullptr

from .convolution_backward import (BIAS_FORMATS, FORMATS_BY_RANK, TILING_FIELDS, check_series_limits, conv_out_len,
                                   cube_compute_dtype, int_values)
from ..common import promote
from .geometry import STORAGE, ConvGeometry
from .call import ConvBackwardCall
from .plan import plan_convolution_backward
from .small_launches import group_enlarge
from .space import conv_tiling_space, cube_groups

OP = "Convolution"
BIAS_DTYPES = ("FLOAT", "FLOAT16", "BF16")
# the backward planner's words for the roles the forward call gives its tensors, for the names of
# its launches and workspace parts: gradOutput is what the Cube reads (input), gradInput what it
# writes (output). (A plain replacement: the forward plans no gradWeight, whose names it would
# garble.)
_ROLES = (("gradOutput", "input"), ("gradInput", "output"))


def _attributes(a: dict) -> tuple:
    """5a. The attributes' types: (stride, padding, dilation, outputPadding, groups, transposed)."""
    stride, padding, dilation = (int_values(a[n], n) for n in ("stride", "padding", "dilation"))
    transposed = a["transposed"]
    if not isinstance(transposed, (bool, np.bool_)):
        raise param_invalid(f"{OP}: transposed must be a bool, got {transposed!r}")
    out_pad = int_values(a["outputPadding"], "outputPadding") if transposed else []
    groups = a["groups"]
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool):
        raise param_invalid(f"{OP}: groups must be an int, got {groups!r}")
    return stride, padding, dilation, out_pad, int(groups), bool(transposed)


def _pads(padding: list, nd: int, transposed: bool) -> tuple:
    """((before, after), ...) per spatial dim, from the lengths aclnnConvolution takes."""
    if len(padding) == nd:
        return tuple((p, p) for p in padding)
    if nd == 1 and len(padding) == 2 and not transposed:
        return ((padding[0], padding[1]),)
    if nd == 2 and len(padding) == 4:
        return ((padding[0], padding[1]), (padding[2], padding[3]))
    allowed = {1: "1" if transposed else "1 or 2 ([left, right])", 2: "2 or 4 ([top, bottom, left, right])",
               3: "3"}[nd]
    raise param_invalid(f"{OP}: padding has {len(padding)} entries; a {nd}D {'transposed ' if transposed else ''}"
                        f"convolution takes {allowed}")


def _check_values(stride, padding, dilation, out_pad, groups, transposed, nd: int) -> tuple:
    """5b. Values and array lengths; returns the normalised padding."""
    for name, vals in (("stride", stride), ("dilation", dilation)):
        if len(vals) != nd:
            raise param_invalid(f"{OP}: {name} has {len(vals)} entries; a {nd}D convolution needs {nd}")
        if any(v < 1 for v in vals):
            raise param_invalid(f"{OP}: {name} {vals} must be >= 1 in every dimension")
    if any(v < 0 for v in padding):
        raise param_invalid(f"{OP}: padding {padding} must be >= 0 in every dimension")
    pads = _pads(padding, nd, transposed)
    if groups < 1:
        raise param_invalid(f"{OP}: groups {groups} must be >= 1")
    if transposed:
        if len(out_pad) != nd:
            raise param_invalid(f"{OP}: outputPadding has {len(out_pad)} entries; a {nd}D convolution needs {nd}")
        for i, (p, s, d) in enumerate(zip(out_pad, stride, dilation)):
            if p < 0 or (p >= s and p >= d):
                raise param_invalid(f"{OP}: outputPadding[{i}] = {p} must be >= 0 and smaller than stride[{i}] = "
                                    f"{s} or dilation[{i}] = {d}")
    return pads


def _check_tensors(a: dict, support, profile) -> None:
    """3, 4. Dtypes, formats and ranks."""
    tensors = [(n, a[n]) for n in ("input", "weight", "output")]
    for name, t in tensors:
        dtype = dtype_name(t.dataType)
        if dtype not in support.dtypes:
            raise param_invalid(f"{OP}: {name} has dtype {dtype}; {profile.series_name} supports "
                                f"{', '.join(support.dtypes)}")
    bias = a["bias"]
    if bias is not None:
        dtype = dtype_name(bias.dataType)
        allowed = [d for d in BIAS_DTYPES if d in support.dtypes]
        if dtype not in allowed:
            raise param_invalid(f"{OP}: bias has dtype {dtype}; {profile.series_name} supports {', '.join(allowed)}")
        if bias.format not in BIAS_FORMATS or len(bias.viewDims) != 1:
            raise param_invalid(f"{OP}: bias must be 1-D (ND), got {len(bias.viewDims)}-D {bias.format.name}")
    rank = len(a["input"].viewDims)
    if any(len(t.viewDims) != rank for _, t in tensors):
        raise param_invalid(f"{OP}: input, weight and output must have one rank, got "
                            f"{[len(t.viewDims) for _, t in tensors]}")
    allowed = FORMATS_BY_RANK.get(rank)
    if allowed is None or rank not in support.ranks:
        kinds = {3: "1D", 4: "2D", 5: "3D"}
        ok = ", ".join(f"{r}-D ({kinds[r]} convolution)" for r in support.ranks)
        raise param_invalid(f"{OP}: input has rank {rank}; {profile.series_name} supports {ok}")
    for name, t in tensors:
        if t.format not in allowed:
            raise param_invalid(f"{OP}: {name} is {rank}-D with format {t.format.name}; a {rank}-D tensor must be "
                                f"{' or '.join(f.name for f in allowed)}")
    if a["input"].format != a["output"].format:
        raise param_invalid(f"{OP}: output's format {a['output'].format.name} differs from input's "
                            f"{a['input'].format.name}")


def _check_shapes(a: dict, attrs: tuple, pads: tuple) -> None:
    """7, 8. Channels, bias and the output's shape."""
    stride, _, dilation, out_pad, groups, transposed = attrs
    x, w, y = a["input"].viewDims, a["weight"].viewDims, a["output"].viewDims
    if w[0] % groups:
        raise param_invalid(f"{OP}: weight[0] {w[0]} is not divisible by groups {groups}")
    if not transposed and x[1] != groups * w[1]:
        raise param_invalid(f"{OP}: input channels {x[1]} != groups * weight[1] = {groups} * {w[1]}")
    if transposed and x[1] != w[0]:
        raise param_invalid(f"{OP}: (transposed) input channels {x[1]} != weight[0] {w[0]}")
    cout = groups * w[1] if transposed else w[0]
    bias = a["bias"]
    if bias is not None and bias.viewDims != (cout,):
        raise param_invalid(f"{OP}: bias shape {list(bias.viewDims)} must be [{cout}] (the output channels)")
    k = w[2:]
    want = [conv_out_len(x[2 + i], k[i], stride[i], dilation[i], pads[i][0], pads[i][1], transposed,
                         out_pad[i] if transposed else 0) for i in range(len(k))]
    if any(v < 1 for v in want) and all(d > 0 for d in tuple(x[2:]) + tuple(k)):
        raise param_invalid(f"{OP}: the convolution has no output: input {list(x[2:])}, kernel {list(k)}, stride "
                            f"{stride}, padding {[list(p) for p in pads]}, dilation {dilation} give {want}")
    shape = [x[0], cout] + want
    if list(y) != shape:
        raise param_invalid(f"{OP}: output shape {list(y)} is not the {'transposed ' if transposed else ''}"
                            f"convolution's {shape} (input {list(x)}, weight {list(w)}, stride {stride}, padding "
                            f"{[list(p) for p in pads]}, dilation {dilation}"
                            + (f", outputPadding {out_pad})" if transposed else ")"))


def _check_empty(a: dict, support, profile) -> None:
    """10. An empty input or weight gives an empty output."""
    x, w, y = a["input"], a["weight"], a["output"]
    if not any(t.numel() == 0 for t in (x, w, y)):
        return
    if not support.options.get("empty_tensors", False):
        raise param_invalid(f"{OP}: empty tensors are not supported on {profile.series_name}")
    if (x.numel() == 0 or w.numel() == 0) and y.numel() != 0:
        raise param_invalid(f"{OP}: input {list(x.viewDims)} or weight {list(w.viewDims)} is empty but output "
                            f"{list(y.viewDims)} is not")


def check(a: dict, profile) -> None:
    """Phase 1's checks, in the order the module docstring lists them."""
    require_present(a, ("input", "weight", "stride", "padding", "dilation", "output"), OP)
    if isinstance(a["transposed"], (bool, np.bool_)) and a["transposed"] and a["outputPadding"] is None:
        raise param_nullptr(f"{OP}: outputPadding is a null pointer but transposed is true")
    support = require_support(OP, profile)
    for name in ("input", "weight", "bias", "output"):
        if a[name] is not None:
            check_tensor_view(a[name], name)
    _check_tensors(a, support, profile)
    attrs = _attributes(a)
    nd = len(a["input"].viewDims) - 2
    pads = _check_values(*attrs, nd)
    promoted = promote([dtype_name(a[n].dataType) for n in ("input", "weight")])
    cube_compute_dtype(promoted, a["cubeMathType"], profile, OP)
    _check_shapes(a, attrs, pads)
    check_series_limits(support, attrs[0], attrs[2], attrs[4], pads, tuple(a["weight"].viewDims[2:]), OP, profile)
    _check_empty(a, support, profile)


def as_gradient(a: dict, enlarge: int = 1) -> ConvGeometry:
    """The convolution whose gradInput is this call's output. For a convolution: the transposed
    convolution its weight describes, reading input as its gradOutput (outputPadding takes up the
    input rows the windows' floor leaves out). For a transposed convolution: the convolution its
    weight describes; gradInput's kernels read only the padding before each axis, so an
    outputPadding past every window leaves the output's last rows to no tap (they are the bias)."""
    x, w, y = a["input"].viewDims, a["weight"].viewDims, a["output"].viewDims
    nd = len(x) - 2
    stride, dilation = tuple(a["stride"].values), tuple(a["dilation"].values)
    transposed = bool(a["transposed"])
    pads = _pads(list(a["padding"].values), nd, transposed)
    k = tuple(w[2:])
    out_pad = (0,) * nd
    if not transposed:
        out_pad = tuple((x[2 + i] + sum(pads[i]) - dilation[i] * (k[i] - 1) - 1) % stride[i] for i in range(nd))
    return ConvGeometry(nd=nd, N=x[0], Cin=y[1], Cout=x[1], groups=int(a["groups"]) // enlarge, in_sp=tuple(y[2:]),
                        out_sp=tuple(x[2:]), k=k, stride=stride, dilation=dilation, pad=pads, out_pad=out_pad,
                        transposed=not transposed)


def _in_forward_words(text: str, kernel: str) -> str:
    """A launch or workspace part named in this call's words; the Cube launch by CANN's kernel."""
    if text.startswith("Cube: "):
        return f"Cube: {kernel}"
    for backward, forward in _ROLES:
        text = text.replace(backward, forward)
    return text


def plan(a: dict, profile, tiling: dict) -> Plan:
    """Phase 1's plan: the call as the gradInput of its adjoint convolution (as_gradient), planned by
    ConvolutionBackward's planner, its launches and workspace parts named in this call's words."""
    x, w, y = a["input"], a["weight"], a["output"]
    promoted = promote([dtype_name(t.dataType) for t in (x, w)])
    if y.numel() == 0:
        return Plan(tiling={"promotedDtype": promoted, "launches": "none (empty output)"})
    compute = cube_compute_dtype(promoted, a["cubeMathType"], profile, OP)
    enlarge = (group_enlarge(int(a["groups"]), w.viewDims, w.itemsize, bool(a["transposed"]),
                             32 // STORAGE[compute].itemsize, profile) if w.numel() else 1)
    call = ConvBackwardCall(as_gradient(a, enlarge), x, y, w, y, None, None, promoted, compute,
                            int(a["cubeMathType"]), a["bias"], enlarge)
    inner = plan_convolution_backward(call, profile, tiling)
    nd = len(x.viewDims) - 2         # CANN runs a 1D convolution as a 2D one, a 3D one as Conv3DV2 (A2)
    kernel = {(2, False): "Conv2D", (2, True): "Conv2DTranspose", (3, False): "Conv3DV2",
              (3, True): "Conv3DTranspose"}[(max(2, nd), bool(a["transposed"]))]
    # (the report's names only: the launches keep the parts they were built with, at the same offsets)
    inner.workspace.parts = [replace(p, purpose=_in_forward_words(p.purpose, kernel)) for p in inner.workspace.parts]
    if "gradInput" in inner.tiling:
        inner.tiling["cube"] = inner.tiling.pop("gradInput")

    def build(ws):
        launches = inner.build(ws)
        for launch in launches:
            launch.name = _in_forward_words(launch.name, kernel)
        return launches
    return Plan(inner.workspace, build, inner.tiling)


def infer_outputs(inputs: dict) -> dict:
    """The output's shape for simulator.run, from the convolution formula (input's dtype)."""
    x, w = np.asarray(inputs["input"]), np.asarray(inputs["weight"])
    nd = x.ndim - 2
    transposed = bool(inputs.get("transposed", False))
    stride, dilation = list(inputs["stride"]), list(inputs["dilation"])
    pads = _pads(list(inputs["padding"]), nd, transposed)
    out_pad = list(inputs.get("outputPadding") or [0] * nd)
    groups = int(inputs.get("groups", 1))
    sp = [conv_out_len(x.shape[2 + i], w.shape[2 + i], stride[i], dilation[i], pads[i][0], pads[i][1], transposed,
                       out_pad[i] if transposed else 0) for i in range(nd)]
    cout = groups * w.shape[1] if transposed else w.shape[0]
    return {"output": ((x.shape[0], cout, *sp), x.dtype)}


def convolution_space(inputs: dict, profile) -> list[dict]:
    """The tiling space: the Cube tile of the GEMM that computes the output (rows: output
    positions over the batch; columns: output channels per group)."""
    out = infer_outputs(inputs)["output"][0]
    groups, _ = cube_groups(inputs, profile)
    return conv_tiling_space(OP, inputs, profile, positions=out[0] * int(np.prod(out[2:])),
                             dx_channels=out[1] // groups, dw_rows=0, dw_cols=0)


PARAMS = [Param("input", "tensor"), Param("weight", "tensor"), Param("bias", "tensor"),
          Param("stride", "int_array"), Param("padding", "int_array"), Param("dilation", "int_array"),
          Param("transposed", "bool"), Param("outputPadding", "int_array"), Param("groups", "int"),
          Param("output", "tensor", output=True), Param("cubeMathType", "int")]

register(OpDef(OP, PARAMS, check, plan, infer_outputs, convolution_space,
               {k: v for k, v in TILING_FIELDS.items() if not k.startswith("dw")}))
