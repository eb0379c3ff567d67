"""The elementwise operators, each its checks' arguments and its compute (kernel.py COMPUTES):

    aclnnAdd(self, other, alpha, out)                      out = self + alpha * other   (broadcast)
    aclnnMul(self, other, out)                             out = self * other           (broadcast)
                                                           (two dtypes: Casts to the promoted one first,
                                                           but for a FLOAT16 / BF16 and FLOAT pair; a
                                                           Cast to out's dtype last: _plan_promoted;
                                                           integers wrap as torch's, INT32 Axpy in FLOAT)
    aclnnRelu(self, out)                                   out = max(self, 0)           (INT8 through FP16;
                                                           UINT8: a copy, no kernel)
    aclnnSigmoid(self, out)                                out = 1 / (1 + e^-self)      (in FP32; an out of
                                                           another dtype: Sigmoid in self's, then a Cast;
                                                           integer or BOOL self: a Cast to out's first)
    aclnnSilu(self, out)                                   out = self * sigmoid(self)  (in FP32)
    aclnnThresholdBackward(gradOutput, self, threshold, gradInput)
                                                           gradInput = gradOutput where self > threshold, else 0
                                                           (broadcast; CANN's ReluGrad at threshold 0;
                                                           integers in ThresholdGradV2D through FLOAT)

Checks (template.check): null tensors 161001; the operator on the series, valid views, dtypes of
the series, shapes (broadcastable for Add, Mul and ThresholdBackward, one shape otherwise), the
output's shape, the scalars numbers; Add's and Mul's promoted dtype one the AI Core takes and
castable to out's, Add's alpha integral for integers (_check_promoted); for Relu, Silu and
ThresholdBackward every tensor of one dtype (aclnn_relu.cpp, aclnn_silu.cpp,
aclnn_threshold_backward.cpp: OP_CHECK_DTYPE_NOT_MATCH), and Sigmoid's out a float: 161002. The
launch is named as CANN's kernel (Add or Axpy, Mul, Relu, ReluGrad or ThresholdGradV2D, Sigmoid,
Swish).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from simulator.aclnn import OpDef, Param, Plan, Workspace, register
from simulator.enums import dtype_name, param_invalid
from . import template
from .chain import Chain
from .template import TILING_FIELDS

FP32_EPSILON = float(np.finfo(np.float32).eps)
FLOATS = ("FLOAT", "FLOAT16", "BF16")


BF16 = np.dtype(ml_dtypes.bfloat16)


def _is_float(dt) -> bool:
    return np.dtype(dt).kind == "f" or np.dtype(dt) == BF16


def promote_types(a, b) -> np.dtype:
    """aclnn's PromoteType (torch's): a float with an integer or BOOL is the float; two floats or
    two integers promote as numpy promotes them (FLOAT16 with BF16: FLOAT; INT8 with UINT8:
    INT16); BOOL with anything is the other."""
    a, b = np.dtype(a), np.dtype(b)
    if _is_float(a) != _is_float(b):
        return a if _is_float(a) else b
    return np.result_type(a, b)


def _can_cast(src, dst) -> bool:
    """aclnn's CanCast (torch's): no float to an integer or BOOL, no integer to BOOL."""
    src, dst = np.dtype(src), np.dtype(dst)
    return not (_is_float(src) and not _is_float(dst)) and not (dst == np.bool_ and src != np.bool_)


def _binary_outputs(inputs: dict) -> dict:
    a, b = np.asarray(inputs["self"]), np.asarray(inputs["other"])
    return {"out": (np.broadcast_shapes(a.shape, b.shape), promote_types(a.dtype, b.dtype))}


def _check_promoted(op: str):
    """aclnn_add.cpp / aclnn_mul.cpp CheckPromoteType: the promoted dtype cast to out's (161002
    where torch's canCast refuses it: a float into an integer); Add's alpha a number of the
    promoted dtype (an integral one for integers and BOOL). A promotion to a dtype the AI Core
    Add and Mul do not take (INT8 with UINT8: INT16) runs on the AI CPU, which is not modelled:
    refused, saying so."""
    def check(a, profile):
        promoted = promote_types(a["self"].dtype, a["other"].dtype)
        name = dtype_name(promoted)
        if name not in profile.supports(op).dtypes:
            raise param_invalid(f"{op}: self {dtype_name(a['self'].dtype)} and other {dtype_name(a['other'].dtype)} "
                                f"promote to {name}, which CANN's {op} runs on the AI CPU: not simulated")
        if not _can_cast(promoted, a["out"].dtype):
            raise param_invalid(f"{op}: the promoted dtype {name} can't be cast to out's "
                                f"{dtype_name(a['out'].dtype)}")
        if op == "Add" and not _is_float(promoted) and not float(a["alpha"]).is_integer():
            raise param_invalid(f"Add: alpha {a['alpha']!r} can't be cast to the promoted dtype {name}")
    return check


def _in_dtype(value: float, dtype) -> float:
    """A scalar as a tensor of `dtype` holds it (aclnn's ConvertToTensor): rounded for a float,
    wrapped for an integer, nonzero for BOOL."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return float(np.array(int(value), np.int64).astype(dtype))
    return float(np.array(value, dtype).astype(np.float64))


def _define(name: str, params: list, inputs: tuple, output: str, compute: str, kernel: str, broadcast: bool,
            scalar: str | None, infer, plan=None, same_dtype: bool = False, check_more=None) -> None:
    scalars = (scalar,) if scalar else ()

    def check(a, profile):
        template.check(a, name, inputs, output, profile, broadcast, scalars)
        if check_more:
            check_more(a, profile)
        if same_dtype:
            for other in inputs[1:] + (output,):
                if a[other].dataType != a[inputs[0]].dataType:
                    raise param_invalid(f"{name}: {other} has dtype {dtype_name(a[other].dataType)}; it must be "
                                        f"{inputs[0]}'s, {dtype_name(a[inputs[0]].dataType)}")

    def flat_plan(a, profile, forced):
        value = float(a[scalar]) if scalar else 0.0
        return template.plan(a, kernel, inputs, output, compute, value, profile, forced)
    register(OpDef(name, params, check, plan or flat_plan, infer, template.tiling_space(name, inputs), TILING_FIELDS))


def _plan_sigmoid(a: dict, profile, forced: dict) -> Plan:
    """One dtype in and out: CANN's Sigmoid kernel. An out of another dtype runs as aclnnSigmoid
    strings its l0 kernels (ops-math aclnn_sigmoid.cpp, ExecSigmoidGetWorkspaceSize): Contiguous
    of self, Sigmoid in self's dtype, a Cast to out's, ViewCopy into out; so the result is
    rounded to self's dtype before it is cast (FLOAT16 in, FLOAT out: FLOAT16 values)."""
    self_, out = a["self"], a["out"]
    if self_.dtype == out.dtype:
        return template.plan(a, "Sigmoid", ("self",), "out", "sigmoid", 0.0, profile, forced)
    n = out.numel()
    if n == 0:
        return Plan(Workspace(), lambda ws: [], {"launches": "none (empty output)"})
    c = Chain(profile, forced)
    src = c.dense_source(self_, "self")
    final = out if out.is_contiguous() else c.buffer("out dense, before the strided write-back", n, out.dtype)
    if self_.dtype.kind in "iub":       # not a dtype Sigmoid takes: cast to out's first (its Cast after is none)
        cast = c.buffer("self cast to out's dtype", n, out.dtype)
        c.flat("Cast", "cast", [(src, 0)], (cast, 0), n)
        c.flat("Sigmoid", "sigmoid", [(cast, 0)], (final, 0), n)
    else:
        sig = c.buffer("sigmoid(self), in self's dtype", n, self_.dtype)
        c.flat("Sigmoid", "sigmoid", [(src, 0)], (sig, 0), n)
        c.flat("Cast", "cast", [(sig, 0)], (final, 0), n)
    if final is not out:
        c.view_copy(out, "out", final)
    return Plan(c.workspace, c.build, {"launches": ", ".join(c.facts)})


def _check_sigmoid_out(a: dict, profile) -> None:
    """out is a float (aclnn_sigmoid.cpp DTYPE_OUT_LIST): integer and BOOL self only as input."""
    if dtype_name(a["out"].dataType) not in FLOATS:
        allowed = [d for d in profile.supports("Sigmoid").dtypes if d in FLOATS]
        raise param_invalid(f"Sigmoid: out has dtype {dtype_name(a['out'].dataType)}; it must be a float "
                            f"({', '.join(allowed)})")


def _sigmoid_out(i: dict) -> dict:
    """out as self, or FLOAT where self is an integer or BOOL (torch's default float)."""
    x = np.asarray(i["self"])
    return {"out": (x.shape, x.dtype if x.dtype.kind not in "iub" else np.dtype(np.float32))}


MIXED_PAIRS = ({np.dtype(np.float16), np.dtype(np.float32)}, {BF16, np.dtype(np.float32)})
# aclnn_add.cpp AXPY_DTYPE_SUPPORT_LIST; TBE's axpy computes INT32 in FLOAT (x1 + alpha x2, cast back)
AXPY_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int32))


def _plan_promoted(a: dict, profile, forced: dict, label: str, compute: str, scalar: float = 1.0,
                   scale: float | None = None, compute_dtype=None) -> Plan:
    """Add and Mul as aclnn_add.cpp and aclnn_mul.cpp string their l0 kernels: a mixed pair (FLOAT16
    or BF16 with FLOAT) read as it is, the kernel's result FLOAT; otherwise each input not of the
    promoted dtype cast to it by a Cast launch (and Add's other, for a `scale`, multiplied by a Mul
    launch first), the kernel in the promoted dtype; then a Cast to out's dtype where it differs."""
    s, o = a["self"].dtype, a["other"].dtype
    promoted = promote_types(s, o)
    if {s, o} in MIXED_PAIRS and scale is None and scalar == 1.0:
        return template.plan(a, label, ("self", "other"), "out", compute, scalar, profile, forced,
                             result=np.dtype(np.float32))
    staged = {name: template.Staged(promoted) for name in ("self", "other") if a[name].dtype != promoted}
    if scale is not None:
        staged["other"] = template.Staged(promoted, scale)
    return template.plan(a, label, ("self", "other"), "out", compute, scalar, profile, forced, staged=staged,
                         result=promoted, compute_dtype=compute_dtype)


def _plan_add(a: dict, profile, forced: dict) -> Plan:
    """CANN's kernels by alpha (aclnn_add.cpp): Add where alpha is 1 (read in FP32); Axpy where it is
    not and the promoted dtype is FLOAT, FLOAT16 or INT32 (AXPY_DTYPE_SUPPORT_LIST; INT32 in FLOAT,
    as TBE's axpy runs it); otherwise (BF16, INT64, the 8-bit integers, BOOL) a Mul of other by
    alpha, as a tensor of the promoted dtype, then Add."""
    alpha = float(a["alpha"])
    one = not (np.float32(alpha) > 1 or np.float32(alpha) < 1)     # as CANN reads it: in FP32 (NaN too)
    promoted = promote_types(a["self"].dtype, a["other"].dtype)
    if one:
        return _plan_promoted(a, profile, forced, "Add", "add")
    if promoted in AXPY_DTYPES:
        return _plan_promoted(a, profile, forced, "Axpy", "add", alpha,
                              compute_dtype=np.float32 if promoted.kind == "i" else None)
    return _plan_promoted(a, profile, forced, "Add", "add", scale=_in_dtype(alpha, promoted))


_define("Add", [Param("self", "tensor"), Param("other", "tensor"), Param("alpha", "float"),
                Param("out", "tensor", output=True)], ("self", "other"), "out", "add", "Add", True, "alpha",
        _binary_outputs, _plan_add, check_more=_check_promoted("Add"))
_define("Mul", [Param("self", "tensor"), Param("other", "tensor"), Param("out", "tensor", output=True)],
        ("self", "other"), "out", "mul", "Mul", True, None, _binary_outputs,
        lambda a, profile, forced: _plan_promoted(a, profile, forced, "Mul", "mul"),
        check_more=_check_promoted("Mul"))


def _plan_relu(a: dict, profile, forced: dict) -> Plan:
    """CANN's Relu kernel (INT8 through FLOAT16, as TBE's relu casts it); UINT8 has no negatives
    and no kernel: aclnn_relu.cpp strings Contiguous of self and a ViewCopy into out (nothing at
    all where self is out, which this API never is)."""
    self_, out = a["self"], a["out"]
    if self_.dtype != np.uint8 or out.numel() == 0:     # (template.plan's own plan of an empty output)
        return template.plan(a, "Relu", ("self",), "out", "relu", 0.0, profile, forced)
    c = Chain(profile, forced)
    c.view_copy(out, "out", c.dense_source(self_, "self"))
    return Plan(c.workspace, c.build, {"launches": "Contiguous and ViewCopy (UINT8: relu is the identity)"})


_define("Relu", [Param("self", "tensor"), Param("out", "tensor", output=True)], ("self",), "out", "relu", "Relu",
        False, None, lambda i: {"out": (np.asarray(i["self"]).shape, np.asarray(i["self"]).dtype)}, _plan_relu,
        same_dtype=True)


def _broadcast_or_first(a: tuple, b: tuple) -> tuple:
    """The output a caller who gives none gets: the broadcast shape, or the first's where there is
    none (the check then refuses the call)."""
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        return a


def _plan_threshold_backward(a: dict, profile, forced: dict) -> Plan:
    """CANN's kernel by the threshold (aclnn_threshold_backward.cpp): ReluGrad where it is 0 (within
    FP32's epsilon; ReluGrad then compares with 0 itself), ThresholdGradV2D otherwise. Integers:
    ReluGrad in their own dtype (8-bit in FLOAT16), ThresholdGradV2D in FLOAT, compared with the
    threshold there and cast back (TBE's threshold_grad_v2_d: an INT32 gradient past 2^24 comes
    back rounded to FLOAT's precision, and a fractional threshold is compared as it is, where
    torch truncates it to the integer dtype first)."""
    threshold = float(a["threshold"])
    relu_grad = abs(threshold) <= FP32_EPSILON
    integer = a["gradOutput"].dtype.kind in "iu"
    return template.plan(a, "ReluGrad" if relu_grad else "ThresholdGradV2D", ("gradOutput", "self"), "gradInput",
                         "threshold_backward", 0.0 if relu_grad else threshold, profile, forced,
                         compute_dtype=np.float32 if integer and not relu_grad else None)


_define("ThresholdBackward", [Param("gradOutput", "tensor"), Param("self", "tensor"), Param("threshold", "float"),
                              Param("gradInput", "tensor", output=True)], ("gradOutput", "self"), "gradInput",
        "threshold_backward", "ThresholdGradV2D", True, "threshold",
        lambda i: {"gradInput": (_broadcast_or_first(np.shape(i["gradOutput"]), np.shape(i["self"])),
                                 np.asarray(i["gradOutput"]).dtype)},
        _plan_threshold_backward, same_dtype=True)

_unary_out = lambda i: {"out": (np.asarray(i["self"]).shape, np.asarray(i["self"]).dtype)}  # noqa: E731
_define("Sigmoid", [Param("self", "tensor"), Param("out", "tensor", output=True)], ("self",), "out", "sigmoid",
        "Sigmoid", False, None, _sigmoid_out, _plan_sigmoid, check_more=_check_sigmoid_out)
_define("Silu", [Param("self", "tensor"), Param("out", "tensor", output=True)], ("self",), "out", "silu", "Swish",
        False, None, _unary_out, same_dtype=True)
