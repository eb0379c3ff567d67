"""aclnnReduceSum and aclnnMean, as ops-math composes them:

    aclnnReduceSum(self, dims, keepDims, dtype, out)    out = sum of self over dims (all when empty)
    aclnnMean(self, dim, keepDim, dtype, out)           out = the mean of self over dim (all when empty)
        [Contiguous(self)] [Cast to dtype] ReduceSum / ReduceMean [Cast to out's dtype] [ViewCopy(out)]

The reduction kernel (kernel.py) sums a contiguous (A, R, B) view over R in FP32. Reduced dims
that are not adjacent take one pass each, innermost first, through an FP32 workspace (CANN's
kernel merges them in one launch: a pass more here); so do fewer rows than cores of at least
SPLIT_ROW elements: their parts are summed over the cores, then the parts (CANN's two-stage
reduction). An empty self fills out with 0 (sum) or NaN
(mean), as CANN's Fill does.

Checks, in ops-math's order: null self, dims or out 161001; then 161002: the operator on the
series, self's, dtype's and out's dtypes in the series' list (integer, DOUBLE and complex
reductions are not modelled: refused), out the dtype `dtype` (ReduceSum), rank at most 8, each
dim in [-rank, rank) and not repeated, out the reduced shape.
"""
from __future__ import annotations

import numpy as np

from simulator.aclnn import OpDef, Param, Plan, Workspace, check_tensor_view, register, require_present, require_support
from simulator.arith import align_up, ceil_div
from simulator.enums import NUMPY_OF, aclDataType, dtype_name, param_invalid
from simulator.program import KernelLaunch
from ..batch_norm.kernel import fill_launch
from ..common import split_evenly, tensor_arg, tiling_error, ub_bytes, vector_core_count, view_copy_launch, workspace_arg
from ..elementwise.kernel import elementwise_body
from ..elementwise.template import flat_job
from .kernel import F32, LANES, MAX_REPEAT, MEDIUM_ROW, ReduceJob, reduce_body

TILING_FIELDS = {"rowsPerTile": "int"}
SPLIT_ROW = 16384     # a row this long, with fewer rows than cores, is split over the cores
SPLIT_ROWS_B = 8      # B > 1 with fewer column tiles than cores: parts of at least this many rows of R


def _dtype_of(v) -> np.dtype:
    return NUMPY_OF[aclDataType(int(v))]


def reduced_shape(shape: tuple, dims, keep: bool) -> tuple:
    rank = max(1, len(shape))
    axes = {int(d) % rank for d in dims} if len(dims) else set(range(len(shape)))
    return tuple(1 if i in axes else n for i, n in enumerate(shape) if keep or i not in axes)


def _check(a: dict, op: str, dims_name: str, keep_name: str, profile) -> None:
    require_present(a, ("self", dims_name, "out"), op)
    support = require_support(op, profile)
    for name in ("self", "out"):
        check_tensor_view(a[name], name)
    try:
        dtype = dtype_name(_dtype_of(a["dtype"]))
    except (ValueError, KeyError, TypeError):
        raise param_invalid(f"{op}: dtype {a['dtype']!r} is not an aclDataType") from None
    for name, d in (("self", dtype_name(a["self"].dataType)), ("dtype", dtype), ("out", dtype_name(a["out"].dataType))):
        if d not in support.dtypes:
            raise param_invalid(f"{op}: {name} has dtype {d}; {profile.series_name} supports {', '.join(support.dtypes)}")
    if op == "ReduceSum" and dtype_name(a["out"].dataType) != dtype:
        raise param_invalid(f"{op}: out has dtype {dtype_name(a['out'].dataType)}; it must be dtype's, {dtype}")
    shape = a["self"].viewDims
    for name in ("self", "out"):
        if len(a[name].viewDims) > 8:
            raise param_invalid(f"{op}: {name} has rank {len(a[name].viewDims)}; at most 8")
    rank = max(1, len(shape))
    seen = set()
    for d in a[dims_name].values:
        if not -rank <= int(d) < rank:
            raise param_invalid(f"{op}: Provided dim {d} must be in the range of [{-rank}, {rank - 1}]")
        if int(d) % rank in seen:
            raise param_invalid(f"{op}: Dim {int(d) % rank} appears multiple times in the list of dims")
        seen.add(int(d) % rank)
    want = reduced_shape(shape, a[dims_name].values, bool(a[keep_name]))
    if a["out"].viewDims != want:
        raise param_invalid(f"{op}: out has shape {list(a['out'].viewDims)}; the reduction gives {list(want)}")


def passes(shape: tuple, dims) -> list[tuple[int, int, int]]:
    """The (A, R, B) passes that reduce a contiguous `shape` over dims: runs of adjacent reduced
    (or kept) dims merged, size-1 dims dropped, the innermost reduced run first."""
    rank = len(shape)
    axes = {int(d) % max(1, rank) for d in dims} if len(dims) else set(range(rank))
    runs = []                                  # [size, reduced]
    for i, n in enumerate(shape):
        if n == 1:
            continue
        r = i in axes
        if runs and runs[-1][1] == r:
            runs[-1][0] *= n
        else:
            runs.append([n, r])
    out = []
    while any(r for _, r in runs):
        j = max(i for i, (_, r) in enumerate(runs) if r)
        A = int(np.prod([n for n, _ in runs[:j]], dtype=np.int64))
        B = int(np.prod([n for n, _ in runs[j + 1:]], dtype=np.int64))
        out.append((A, runs[j][0], B))
        runs = runs[:j] + runs[j + 1:]
        merged = []
        for n, r in runs:
            if merged and merged[-1][1] == r:
                merged[-1][0] *= n
            else:
                merged.append([n, r])
        runs = merged
    return out or [(int(np.prod(shape, dtype=np.int64)), 1, 1)]


def plan_pass(A: int, R: int, B: int, in_dtype, out_dtype, scale: float, profile, forced: dict,
              part: int = 0) -> tuple[ReduceJob, int]:
    """The pass's tiling: work items over the vector cores, rows or columns a tile within UB."""
    ub = ub_bytes(profile) - 1024
    isz, osz = np.dtype(in_dtype).itemsize, np.dtype(out_dtype).itemsize
    wide = 4 if isz < 4 else 0
    cores = vector_core_count(profile)
    rows = cols = group = pitch = 0
    if B == 1 and R <= LANES:
        padded = align_up(R * isz, 32) // isz
        per_row = padded * (2 * isz + wide) + 4 + 2 * osz
        rows = int(forced.get("rowsPerTile", min(MAX_REPEAT, ub // per_row, ceil_div(A, cores))))
        items = A
        fits = 0 < rows <= MAX_REPEAT and rows * per_row <= ub
    elif B == 1 and R <= MEDIUM_ROW and not part:
        pitch = align_up(R, 8 * LANES)
        m = pitch // LANES
        most = MAX_REPEAT // m                 # one instruction's repeats
        per_row = pitch * (2 * isz + wide) + m * 4 + 4 + 2 * osz
        rows = int(forced.get("rowsPerTile", min(most, ub // per_row, ceil_div(A, cores))))
        items = A
        fits = 0 < rows <= most and rows * per_row <= ub
    elif B == 1:
        rows = LANES
        while rows * 2 * (2 * isz + wide + 4) + MAX_REPEAT * (4 + 2 * osz) <= ub and rows < R:
            rows *= 2
        rows = int(forced.get("rowsPerTile", rows))
        items = A * (ceil_div(R, part) if part else 1)
        fits = rows >= LANES and rows & (rows - 1) == 0 and rows * (2 * isz + wide + 4) + MAX_REPEAT * (4 + 2 * osz) <= ub
    else:
        cols = min(B, 4096)
        per_col = 8 + 2 * osz          # the accumulator, the result, the output queue's two tiles
        cp = align_up(cols * isz, 32) // isz
        group = int(forced.get("rowsPerTile", max(1, min(R, 4095, (ub - cols * per_col) // (cp * (2 * isz + wide))))))
        items = A * ceil_div(B, cols) * (ceil_div(R, part) if part else 1)
        fits = group >= 1 and group * cp * (2 * isz + wide) + cols * per_col <= ub and group <= 4095
    if not fits:
        raise tiling_error(f"reduction tiling over (A {A}, R {R}, B {B}): rowsPerTile {forced.get('rowsPerTile')} "
                           f"does not fit UB ({ub} B) or the instruction limits")
    job = ReduceJob(A, R, B, np.dtype(in_dtype), np.dtype(out_dtype), float(scale),
                    tuple((s, e - s) for s, e in split_evenly(items, cores) if e > s), rows, cols, group, part, pitch)
    return job, len(job.items)


def _cast(label, src, dst, n, from_dtype, to_dtype, profile):
    job, blocks = flat_job("cast", (from_dtype,), to_dtype, n, profile)
    return KernelLaunch(label, elementwise_body, blocks, "vector", ((src,), dst, job))


def plan(a: dict, dims_name: str, kernel: str, mean: bool, profile, forced: dict) -> Plan:
    self_, out = a["self"], a["out"]
    dtype = _dtype_of(a["dtype"])
    dims = list(a[dims_name].values)
    ws = Workspace()
    if out.numel() == 0:
        return Plan(ws, lambda base: [], {"launches": "none (empty output)"})
    dense = None if out.is_contiguous() else ws.add("out dense, before the strided write-back", out.numel() * out.itemsize)
    if self_.numel() == 0:
        def build_fill(base):
            dst = workspace_arg(base, dense, out.dtype, "workspace:out") if dense else tensor_arg(out, "out") + out.offset
            launches = [fill_launch("Fill", dst, out.numel(), out.dtype, float("nan") if mean else 0.0)]
            if dense:
                launches.append(view_copy_launch(out, "out", profile, gather=False)[0](dst))
            return launches
        return Plan(ws, build_fill, {"launches": "Fill (empty self)"})
    n = self_.numel()
    contiguous = None if self_.is_contiguous() else ws.add("self contiguous", n * self_.itemsize)
    cast_in = None if self_.dtype == dtype else ws.add(f"self as {dtype_name(dtype)}", n * dtype.itemsize)
    steps = []
    for A, R, B in passes(self_.viewDims, dims):
        cores = vector_core_count(profile)
        if B == 1 and A < cores and R >= SPLIT_ROW:      # few long rows: parts over the cores, then their sum
            part = align_up(ceil_div(R, ceil_div(cores, A)), LANES)
            steps += [(A, R, 1, part), (A, ceil_div(R, part), 1, 0)]
        elif B > 1 and 2 * A * ceil_div(B, 4096) <= cores and R >= 2 * SPLIT_ROWS_B:   # few column tiles: R split
            part = max(SPLIT_ROWS_B, ceil_div(R, ceil_div(cores, A * ceil_div(B, 4096))))
            steps += [(A, R, B, part), (A, ceil_div(R, part), B, 0)]
        else:
            steps.append((A, R, B, 0))
    count = n // out.numel() if mean else 1
    jobs, parts, src_dtype = [], [], dtype
    for i, (A, R, B, part) in enumerate(steps):
        last = i == len(steps) - 1
        to = dtype if last else F32
        job, blocks = plan_pass(A, R, B, src_dtype, to, 1.0 / count if last and mean else 1.0, profile, forced, part)
        jobs.append((job, blocks))
        parts.append(None if last else ws.add(f"pass {i + 1} sums", A * B * (ceil_div(R, part) if part else 1) * 4))
        src_dtype = to
    cast_out = None if out.dtype == dtype else ws.add(f"{kernel} result as {dtype_name(dtype)}", out.numel() * dtype.itemsize)

    def build(base):
        launches = []
        src = tensor_arg(self_, "self") + self_.offset
        if contiguous is not None:
            src = workspace_arg(base, contiguous, self_.dtype, "workspace:self")
            launches.append(view_copy_launch(self_, "self", profile, gather=True)[0](src))
        if cast_in is not None:
            wide = workspace_arg(base, cast_in, dtype, "workspace:self cast")
            launches.append(_cast("Cast", src, wide, n, self_.dtype, dtype, profile))
            src = wide
        final = workspace_arg(base, dense, out.dtype, "workspace:out") if dense else tensor_arg(out, "out") + out.offset
        for (job, blocks), part in zip(jobs, parts):
            if part is not None:
                dst = workspace_arg(base, part, F32, "workspace:pass")
            elif cast_out is not None:
                dst = workspace_arg(base, cast_out, dtype, "workspace:result")
            else:
                dst = final
            launches.append(KernelLaunch(kernel, reduce_body, blocks, "vector", (src, dst, job)))
            src = dst
        if cast_out is not None:
            launches.append(_cast("Cast", src, final, out.numel(), dtype, out.dtype, profile))
        if dense is not None:
            launches.append(view_copy_launch(out, "out", profile, gather=False)[0](final))
        return launches

    return Plan(ws, build, {"passes": [(j.A, j.R, j.B) for j, _ in jobs], "blockDim": [b for _, b in jobs],
                            "rowsPerTile": [j.rows or j.group for j, _ in jobs]})


def _infer(dims_name: str, keep_name: str):
    def infer(i: dict) -> dict:
        x = np.asarray(i["self"])
        dtype = _dtype_of(i["dtype"]) if i.get("dtype") is not None else x.dtype
        return {"out": (reduced_shape(x.shape, i.get(dims_name, []), bool(i.get(keep_name, False))), dtype)}
    return infer


def _space(op: str):
    def space(inputs: dict, profile) -> list[dict]:
        from ..tiling_space import distinct_accepted
        return distinct_accepted(op, inputs, profile, lambda default: [{"rowsPerTile": r} for r in
                                                                        (1, 2, 4, 8, 16, 32, 64, 128, 255, 256, 512, 1024)])
    return space


for _op, _dims, _keep, _kernel, _mean in (("ReduceSum", "dims", "keepDims", "ReduceSum", False),
                                          ("Mean", "dim", "keepDim", "ReduceMean", True)):
    register(OpDef(_op, [Param("self", "tensor"), Param(_dims, "int_array"), Param(_keep, "bool"), Param("dtype", "int"),
                         Param("out", "tensor", output=True)],
                   (lambda op, d, k: lambda a, profile: _check(a, op, d, k, profile))(_op, _dims, _keep),
                   (lambda d, kn, m: lambda a, profile, forced: plan(a, d, kn, m, profile, forced))(
                       _dims, _kernel, _mean),
                   _infer(_dims, _keep), _space(_op), TILING_FIELDS))
