"""aclnnGlu and aclnnGluBackward, as ops-nn's aclnn_glu*.cpp compose them from l0 kernels:

    aclnnGlu(self, dim, out)                  out = a * sigmoid(b),  (a, b) = self split in halves at dim
        [Contiguous(self)] SplitV, Sigmoid(b), Mul(a, .), [Cast to out's dtype], [ViewCopy(out)]
    aclnnGluBackward(gradOut, self, dim, out) out = cat(gradOut * s, gradOut * s * (a - a * s)), s = sigmoid(b)
        [Contiguous x2] [Cast to FP32 x2 when FLOAT16] SplitV, Sigmoid, Mul, Mul, Sub, Mul, ConcatD,
        [Cast back to FLOAT16], [ViewCopy(out)]

Every step is its own launch through a workspace buffer: the flat elementwise kernel (kernel.py)
for the arithmetic and casts, the strided copy (ops/common.py) for SplitV and ConcatD, which
move the (outer, 2, inner) halves to and from a dense (2, outer, inner) buffer. The backward is
the Atlas A2 / training / inference path (the 950's single GluGrad kernel is not a chip we model).

Checks, in ops-nn's order: null tensors 161001; then 161002: the operator on the series, dtypes
of the series (DOUBLE, which the vector unit cannot compute, is refused), ranks 1 to 8, dim in
[-rank, rank), an even size at dim; then Glu: out the halved shape; GluBackward: gradOut and
out the dtype of self, gradOut the halved shape, out the shape of self.
"""
from __future__ import annotations

import numpy as np

from simulator.aclnn import OpDef, Param, Plan, Workspace, check_tensor_view, register, require_present, require_support
from simulator.enums import dtype_name, param_invalid
from .chain import Chain
from .template import TILING_FIELDS, tiling_space

F32 = np.dtype(np.float32)


def _check(a: dict, op: str, tensors: tuple, profile) -> int:
    """The checks both operators share; returns dim made non-negative."""
    require_present(a, tensors, op)
    support = require_support(op, profile)
    for name in tensors:
        check_tensor_view(a[name], name)
        dtype = dtype_name(a[name].dataType)
        if dtype not in support.dtypes:
            raise param_invalid(f"{op}: {name} has dtype {dtype}; {profile.series_name} supports "
                                f"{', '.join(support.dtypes)}")
        if len(a[name].viewDims) > 8:
            raise param_invalid(f"{op}: {name} has rank {len(a[name].viewDims)}; at most 8")
    shape = a["self"].viewDims
    if not shape:
        raise param_invalid(f"{op}: self must have at least one dimension")
    dim = a["dim"]
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -len(shape) <= dim < len(shape):
        raise param_invalid(f"{op}: Dimension out of range (expected to be in range of [{-len(shape)}, "
                            f"{len(shape) - 1}], but got {dim})")
    d = int(dim) % len(shape)
    if shape[d] % 2:
        raise param_invalid(f"{op}: Halving dimension must be even, but dimension {dim} is size {shape[d]}")
    return d


def _halved(shape: tuple, d: int) -> tuple:
    return shape[:d] + (shape[d] // 2,) + shape[d + 1:]


def check_glu(a: dict, profile) -> None:
    d = _check(a, "Glu", ("self", "out"), profile)
    want = _halved(a["self"].viewDims, d)
    if a["out"].viewDims != want:
        raise param_invalid(f"Glu: The shape of out must be {list(want)}, but get {list(a['out'].viewDims)}")


def check_glu_backward(a: dict, profile) -> None:
    d = _check(a, "GluBackward", ("gradOut", "self", "out"), profile)
    self_ = a["self"]
    for name in ("gradOut", "out"):
        if a[name].dataType != self_.dataType:
            raise param_invalid(f"GluBackward: {name} has dtype {dtype_name(a[name].dataType)}; it must be self's, "
                                f"{dtype_name(self_.dataType)}")
    want = _halved(self_.viewDims, d)
    if a["gradOut"].viewDims != want:
        raise param_invalid(f"GluBackward: The shape of gradOut must be {list(want)}, but got "
                            f"{list(a['gradOut'].viewDims)}")
    if a["out"].viewDims != self_.viewDims:
        raise param_invalid(f"GluBackward: out has shape {list(a['out'].viewDims)}; it must be self's, "
                            f"{list(self_.viewDims)}")


def _split_geometry(shape: tuple, d: int) -> tuple[int, int, tuple, tuple]:
    """(outer, inner, shape, strides) of the halves of a dense tensor split at d, seen as one
    (2, outer, inner) view: half h, row o starts at (2 o + h) inner."""
    outer = int(np.prod(shape[:d], dtype=np.int64))
    inner = shape[d] // 2 * int(np.prod(shape[d + 1:], dtype=np.int64))
    return outer, inner, (2, outer, inner), (inner, 2 * inner, 1)


def plan_glu(a: dict, profile, forced: dict) -> Plan:
    self_, out = a["self"], a["out"]
    d = int(a["dim"]) % len(self_.viewDims)
    m = out.numel()
    if m == 0:
        return Plan(Workspace(), lambda ws: [], {"launches": "none (empty output)"})
    c = Chain(profile, forced)
    src = c.dense_source(self_, "self")
    _, _, shape, strides = _split_geometry(self_.viewDims, d)
    halves = c.buffer("SplitV's halves a, b", 2 * m, self_.dtype)
    c.copy("SplitV", src, shape, strides, halves, gather=True)
    sig = c.buffer("sigmoid(b)", m, self_.dtype)
    c.flat("Sigmoid", "sigmoid", [(halves, m)], (sig, 0), m)
    direct = out.is_contiguous()
    final = out if direct else c.buffer("out dense, before the strided write-back", m, out.dtype)
    if out.dtype == self_.dtype:
        c.flat("Mul", "mul", [(halves, 0), (sig, 0)], (final, 0), m)
    else:
        prod = c.buffer("a * sigmoid(b)", m, self_.dtype)
        c.flat("Mul", "mul", [(halves, 0), (sig, 0)], (prod, 0), m)
        c.flat("Cast", "cast", [(prod, 0)], (final, 0), m)
    if not direct:
        c.view_copy(out, "out", final)
    return Plan(c.workspace, c.build, {"launches": ", ".join(c.facts)})


def plan_glu_backward(a: dict, profile, forced: dict) -> Plan:
    grad, self_, out = a["gradOut"], a["self"], a["out"]
    d = int(a["dim"]) % len(self_.viewDims)
    m = grad.numel()
    if m == 0:
        return Plan(Workspace(), lambda ws: [], {"launches": "none (empty output)"})
    c = Chain(profile, forced)
    f = F32 if self_.dtype == np.float16 else self_.dtype      # FLOAT16 runs in FP32, as ops-nn casts it
    srcs = {}
    for name, t, n in (("self", self_, 2 * m), ("gradOut", grad, m)):
        src = c.dense_source(t, name)
        if f != t.dtype:
            wide = c.buffer(f"{name} in FP32", n, f)
            c.flat("Cast", "cast", [(src, 0)], (wide, 0), n)
            src = wide
        srcs[name] = src
    _, _, shape, strides = _split_geometry(self_.viewDims, d)
    halves = c.buffer("SplitV's halves a, b", 2 * m, f)
    c.copy("SplitV", srcs["self"], shape, strides, halves, gather=True)
    sig = c.buffer("sigmoid(b)", m, f)
    c.flat("Sigmoid", "sigmoid", [(halves, m)], (sig, 0), m)
    grads = c.buffer("gradients of a, b", 2 * m, f)
    c.flat("Mul", "mul", [(srcs["gradOut"], 0), (sig, 0)], (grads, 0), m)       # gradOut * s
    a_s = c.buffer("a * s", m, f)
    c.flat("Mul", "mul", [(halves, 0), (sig, 0)], (a_s, 0), m)
    diff = c.buffer("a - a * s", m, f)
    c.flat("Sub", "sub", [(halves, 0), (a_s, 0)], (diff, 0), m)
    c.flat("Mul", "mul", [(diff, 0), (grads, 0)], (grads, m), m)
    direct = out.is_contiguous()
    if f == out.dtype and direct:
        c.copy("ConcatD", out, shape, strides, grads, gather=False)
    else:
        cat = c.buffer("ConcatD's result", 2 * m, f)
        c.copy("ConcatD", cat, shape, strides, grads, gather=False)
        final = out if direct else c.buffer("out dense, before the strided write-back", 2 * m, out.dtype)
        if f != out.dtype:
            c.flat("Cast", "cast", [(cat, 0)], (final, 0), 2 * m)
        else:
            final = cat
        if not direct:
            c.view_copy(out, "out", final)
    return Plan(c.workspace, c.build, {"launches": ", ".join(c.facts)})


def _glu_out(i: dict) -> dict:
    x = np.asarray(i["self"])
    d = int(i.get("dim", -1)) % x.ndim
    return {"out": (_halved(x.shape, d), x.dtype)}


# a forced blockLength / tileLength applies to every flat kernel of the chain
register(OpDef("Glu", [Param("self", "tensor"), Param("dim", "int"), Param("out", "tensor", output=True)],
               check_glu, plan_glu, _glu_out, tiling_space("Glu", ("self",)), TILING_FIELDS))
register(OpDef("GluBackward", [Param("gradOut", "tensor"), Param("self", "tensor"), Param("dim", "int"),
                               Param("out", "tensor", output=True)],
               check_glu_backward, plan_glu_backward,
               lambda i: {"out": (np.asarray(i["self"]).shape, np.asarray(i["self"]).dtype)},
               tiling_space("GluBackward", ("self",)), TILING_FIELDS))
