"""aclnnAddmm(self, mat1, mat2, beta, alpha, out, cubeMathType): out = beta self + alpha (mat1 @ mat2),
self broadcast to (M, N) ([N], [1, N], [M, 1] or [M, N]), composed as CANN's aclnn layer composes it:

    [the MatMul's launches, as aclnnMm's] [Muls alpha] [BroadcastTo(self)] [Muls beta] Add [ViewCopy(out)]

beta 0 ignores self (its values too: a NaN in self does not reach out). alpha 0 still runs the MatMul.
Left out: CANN's fused bias (a MatMul that adds a 1-D self when beta and alpha are 1, on A2) and
the broadcast inside Add's own kernel: self is expanded by a strided copy first, a pass over
(M, N) that CANN does not make.

Checks: null tensors 161001; then 161002: the operator on the series, dtypes of the series,
mat1 and mat2 2-D with equal contracted dims, self broadcastable to (M, N), out (M, N), beta and
alpha numbers, cubeMathType for the promoted dtype.
"""
from __future__ import annotations

import numpy as np

from simulator.aclnn import OpDef, Param, Plan, check_tensor_view, register, require_present, require_support
from simulator.enums import dtype_name, param_invalid
from ..common import check_number, promote
from ..conv.convolution_backward import cube_compute_dtype
from ..elementwise.chain import Chain
from ..elementwise.template import broadcast_shape
from .operators import TILING_FIELDS, _facts, _space, gemm_steps

OP = "Addmm"


def _check(a: dict, profile) -> None:
    names = ("self", "mat1", "mat2", "out")
    require_present(a, names, OP)
    support = require_support(OP, profile)
    for name in names:
        check_tensor_view(a[name], name)
        if dtype_name(a[name].dataType) not in support.dtypes:
            raise param_invalid(f"{OP}: {name} has dtype {dtype_name(a[name].dataType)}; {profile.series_name} "
                                f"supports {', '.join(support.dtypes)}")
    xs, ws, ss = a["mat1"].viewDims, a["mat2"].viewDims, a["self"].viewDims
    if (len(xs), len(ws)) != (2, 2):
        raise param_invalid(f"{OP}: mat1 and mat2 must be 2-D, got {len(xs)}-D and {len(ws)}-D")
    if xs[1] != ws[0]:
        raise param_invalid(f"{OP}: mat1's last dim {xs[1]} must equal mat2's first, {ws[0]} ({list(xs)} @ {list(ws)})")
    want = (xs[0], ws[1])
    if len(ss) > 2 or broadcast_shape([ss, want], OP) != want:
        raise param_invalid(f"{OP}: self of shape {list(ss)} does not broadcast to mat1 @ mat2's {list(want)}")
    if a["out"].viewDims != want:
        raise param_invalid(f"{OP}: out has shape {list(a['out'].viewDims)}; it must be {list(want)}")
    for name in ("beta", "alpha"):
        check_number(a[name], name, OP)
    cube_compute_dtype(promote([dtype_name(a[n].dataType) for n in ("mat1", "mat2")]), a["cubeMathType"], profile, OP)


def _plan(a: dict, profile, forced: dict) -> Plan:
    x, w, s, y = a["mat1"], a["mat2"], a["self"], a["out"]
    (M, _), N = x.viewDims, w.viewDims[1]
    beta, alpha = float(a["beta"]), float(a["alpha"])
    compute = cube_compute_dtype(promote([dtype_name(t.dataType) for t in (x, w)]), a["cubeMathType"], profile, OP)
    c = Chain(profile, {})
    if M * N == 0:
        return Plan(c.workspace, c.build, {"launches": "none (empty output)"})
    n = M * N
    plain = beta == 0 and alpha == 1          # out is the MatMul's result, in out's dtype
    result, t = gemm_steps(c, x, w, ("mat1", "mat2"), compute, profile, forced, y if plain else None)
    final = y if y.is_contiguous() else c.buffer("out dense, before the strided write-back", n, y.dtype)
    if plain:
        if result is not y and c.dtype(result) == y.dtype:
            final = result
        elif result is not y:
            c.flat("Cast", "cast", [(result, 0)], (final, 0), n)
    elif beta == 0:
        c.flat("Muls", "muls", [(result, 0)], (final, 0), n, alpha)
    else:
        if alpha != 1:
            scaled = c.buffer("alpha (mat1 @ mat2)", n, c.dtype(result))
            c.flat("Muls", "muls", [(result, 0)], (scaled, 0), n, alpha)
            result = scaled
        term = s
        if s.viewDims != (M, N) or not s.is_contiguous():
            pad = 2 - len(s.viewDims)
            dims, strides = (1,) * pad + s.viewDims, (0,) * pad + s.stride
            term = c.buffer("self broadcast", n, s.dtype)
            c.copy("BroadcastTo(self)", s, (M, N), tuple(0 if d == 1 else st for d, st in zip(dims, strides)),
                   term, gather=True)
        if beta != 1:
            scaled = c.buffer("beta self", n, s.dtype)
            c.flat("Muls", "muls", [(term, 0)], (scaled, 0), n, beta)
            term = scaled
        c.flat("Add", "add", [(term, 0), (result, 0)], (final, 0), n, 1.0)
    if final is not y:
        c.view_copy(y, "out", final)
    return Plan(c.workspace, c.build, _facts(compute, t))


def _infer(i: dict) -> dict:
    x, w, s = (np.asarray(i[k]) for k in ("mat1", "mat2", "self"))
    return {"out": ((x.shape[0], w.shape[1]), np.result_type(s, x, w))}


register(OpDef(OP, [Param("self", "tensor"), Param("mat1", "tensor"), Param("mat2", "tensor"), Param("beta", "float"),
                    Param("alpha", "float"), Param("out", "tensor", output=True), Param("cubeMathType", "int")],
               _check, _plan, _infer, _space(OP, "mat2"), TILING_FIELDS))
