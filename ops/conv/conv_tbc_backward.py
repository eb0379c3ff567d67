"""aclnnConvTbcBackward: the gradients of PyTorch's conv_tbc (a 1-D convolution over time, with
tensors laid out Time, Batch, Channel).

    aclnnConvTbcBackwardGetWorkspaceSize(self, input, weight, bias, pad, cubeMathType,
        gradInput, gradWeight, gradBias) -> (workspaceSize, executor, status)

self = gradOutput (T_out, B, Cout), input (T, B, Cin), weight (K, Cin, Cout), bias (Cout);
T_out = T + 2*pad + 1 - K. It is conv1d backward on permuted views, so it shares the convolution
kernels (ops/conv/plan.py) rather than duplicating them:

    gradOutput (T_out, B, Cout) -> (B, Cout, T_out)      input  (T, B, Cin)  -> (B, Cin, T)
    weight     (K, Cin, Cout)   -> (Cout, Cin, K)        outputs permuted the same way

The permutations are strided aclTensor views (no data moves on the host); the convolution's
planner copies them to dense layouts in the workspace as CANN's Contiguous / ViewCopy do.

Checks, in order (161001 for nulls, then 161002): null tensors; the operator on this series (not
on the inference series); valid views; dtypes in the series' list (promotion as the convolution);
formats ND/NCL (bias ND); cubeMathType (SPEC section 3); ranks 3/3/3/1; input[2] == weight[1];
bias[0] == weight[2]; gradOutput B == input B; pad >= 0 and the series' limits (A2: pad [0,255],
K [1,255]); gradOutput == (T + 2*pad + 1 - K, B, Cout); output shapes == input / weight / bias
shapes; an empty gradOutput; other empty tensors as the series allows (A2: Cin == 0).
"""
from __future__ import annotations

import numpy as np

from simulator.acl import aclTensor
from simulator.aclnn import (OpDef, Param, Plan, check_tensor_view, register, require_present,
                             require_support)
from simulator.enums import aclFormat, dtype_name, param_invalid

from ..common import promote
from .convolution_backward import TILING_FIELDS, cube_compute_dtype
from .geometry import ConvGeometry
from .call import ConvBackwardCall
from .plan import plan_convolution_backward
from .space import conv_tbc_space

OP = "ConvTbcBackward"
TBC_FORMATS = (aclFormat.ACL_FORMAT_ND, aclFormat.ACL_FORMAT_NCL)
NAMES = ("self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias")


def check_tbc(a: dict, profile, op: str, x: str, y: str, outputs: dict, operands: tuple) -> None:
    """The checks conv_tbc and its backward share, in the order the module docstring lists them
    (the first that fails is the call's status): x is the (T, B, Cin) input's name, y the
    (T_out, B, Cout) tensor's, outputs an output name -> the name whose shape it must have,
    operands the tensors whose dtypes promote to the Cube's input dtype."""
    names = tuple(dict.fromkeys((y, x, "weight", "bias") + tuple(outputs)))
    require_present(a, names, op)
    support = require_support(op, profile)
    for name in names:
        check_tensor_view(a[name], name)
    for name in names:
        dtype = dtype_name(a[name].dataType)
        if dtype not in support.dtypes:
            raise param_invalid(f"{op}: {name} has dtype {dtype}; {profile.series_name} supports "
                                f"{', '.join(support.dtypes)}")
    promoted = promote([dtype_name(a[n].dataType) for n in operands])
    for name in names:
        t = a[name]
        allowed = (aclFormat.ACL_FORMAT_ND,) if name in ("bias", "gradBias") else TBC_FORMATS
        if t.format not in allowed:
            raise param_invalid(f"{op}: {name} has format {t.format.name}; it must be "
                                f"{' or '.join(f.name for f in allowed)}")
    cube_compute_dtype(promoted, a["cubeMathType"], profile, op)
    grad_output, input_, weight, bias = a[y], a[x], a["weight"], a["bias"]
    for name, t, r in ((y, grad_output, 3), (x, input_, 3), ("weight", weight, 3), ("bias", bias, 1)):
        if len(t.viewDims) != r:
            raise param_invalid(f"{op}: {name} has rank {len(t.viewDims)}; it must be {r}-D")
    if input_.viewDims[2] != weight.viewDims[1]:
        raise param_invalid(f"{op}: input channels {x}[2] = {input_.viewDims[2]} != weight[1] = {weight.viewDims[1]}")
    if bias.viewDims[0] != weight.viewDims[2]:
        raise param_invalid(f"{op}: bias[0] = {bias.viewDims[0]} != weight[2] = {weight.viewDims[2]} (output channels)")
    pad = a["pad"]
    if not isinstance(pad, (int, np.integer)) or isinstance(pad, bool):
        raise param_invalid(f"{op}: pad must be an int, got {pad!r}")
    if pad < 0:
        raise param_invalid(f"{op}: pad {pad} must be >= 0")
    lim = support.limits
    if "pad" in lim and not lim["pad"][0] <= pad <= lim["pad"][1]:
        raise param_invalid(f"{op}: pad {pad} is outside [{lim['pad'][0]}, {lim['pad'][1]}] on "
                            f"{profile.series_name}")
    K = weight.viewDims[0]
    if "kernel" in lim and not lim["kernel"][0] <= K <= lim["kernel"][1]:
        raise param_invalid(f"{op}: kernel size weight[0] = {K} is outside [{lim['kernel'][0]}, "
                            f"{lim['kernel'][1]}] on {profile.series_name}")
    T, B = input_.viewDims[0], input_.viewDims[1]
    t_out = T + 2 * pad + 1 - K
    want = (t_out, B, weight.viewDims[2])
    if grad_output.viewDims != want:
        raise param_invalid(f"{op}: {y} shape {list(grad_output.viewDims)} must be "
                            f"[T + 2*pad + 1 - K, B, Cout] = {list(want)}")
    for name, ref in outputs.items():
        if a[name].viewDims != a[ref].viewDims:
            raise param_invalid(f"{op}: {name} shape {list(a[name].viewDims)} != {ref} shape {list(a[ref].viewDims)}")
    if grad_output.numel() == 0:
        raise param_invalid(f"{op}: {y} {list(grad_output.viewDims)} is empty")
    if any(t.numel() == 0 for t in (input_, weight)):
        if not support.options.get("empty_tensors", False):
            raise param_invalid(f"{op}: empty tensors are not supported on {profile.series_name} "
                                f"({x} {list(input_.viewDims)}, weight {list(weight.viewDims)})")


def check(a: dict, profile) -> None:
    """Phase 1's checks. A call that passes is a conv1d that tbc_as_conv1d can state."""
    check_tbc(a, profile, OP, "input", "self", {"gradInput": "input", "gradWeight": "weight", "gradBias": "bias"},
              ("self", "input", "weight"))


def _permuted(t: aclTensor, order, fmt=aclFormat.ACL_FORMAT_NCL) -> aclTensor:
    """A view of the same storage with dimensions reordered (no data moves)."""
    return aclTensor([t.viewDims[i] for i in order], t.dataType, [t.stride[i] for i in order],
                     t.offset, fmt, t.storageDims, t.data)


def tbc_as_conv1d(a: dict):
    """The conv1d this call is: (geometry, gradOutput, input, weight, [gradInput, gradWeight,
    gradBias]) as NCL views."""
    grad_output, input_, weight = a["self"], a["input"], a["weight"]
    T, B, Cin = input_.viewDims
    K, _, Cout = weight.viewDims
    pad = int(a["pad"])
    geom = ConvGeometry(nd=1, N=B, Cin=Cin, Cout=Cout, groups=1, in_sp=(T,), out_sp=(grad_output.viewDims[0],),
                        k=(K,), stride=(1,), dilation=(1,), pad=((pad, pad),), out_pad=(0,),
                        transposed=False)
    ncl = (1, 2, 0)
    return (geom, _permuted(grad_output, ncl), _permuted(input_, ncl), _permuted(weight, (2, 1, 0)),
            [_permuted(a["gradInput"], ncl), _permuted(a["gradWeight"], (2, 1, 0)), a["gradBias"]])


def plan(a: dict, profile, tiling: dict) -> Plan:
    """Phase 1's plan of a checked call: the conv1d it is, planned as ConvolutionBackward's."""
    promoted = promote([dtype_name(a[n].dataType) for n in ("self", "input", "weight")])
    compute = cube_compute_dtype(promoted, a["cubeMathType"], profile, OP)
    geom, grad_output, inp, weight, outs = tbc_as_conv1d(a)
    call = ConvBackwardCall(geom, grad_output, inp, weight, *outs, promoted, compute, int(a["cubeMathType"]))
    return plan_convolution_backward(call, profile, tiling)


def infer_outputs(inputs: dict) -> dict:
    x, w, b = (np.asarray(inputs[n]) for n in ("input", "weight", "bias"))
    return {"gradInput": (x.shape, x.dtype), "gradWeight": (w.shape, w.dtype),
            "gradBias": (b.shape, b.dtype)}


register(OpDef(OP, [Param("self", "tensor"), Param("input", "tensor"), Param("weight", "tensor"),
                    Param("bias", "tensor"), Param("pad", "int"), Param("cubeMathType", "int"),
                    Param("gradInput", "tensor", output=True), Param("gradWeight", "tensor", output=True),
                    Param("gradBias", "tensor", output=True)],
               check, plan, infer_outputs, conv_tbc_space, TILING_FIELDS))
