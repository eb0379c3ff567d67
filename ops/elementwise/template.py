"""What every elementwise operator shares: its checks (dtypes of the series, broadcastable shapes,
an output of the broadcast shape and a dtype the result casts to), and its plan (broadcast and
non-contiguous inputs made contiguous by the strided copies, a non-contiguous output written back,
the flat kernel's blocks and tiles).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simulator.acl import aclTensor
from simulator.aclnn import Plan, Workspace, check_tensor_view, require_present, require_support
from simulator.arith import align_up, ceil_div
from simulator.enums import ACL_OF, aclFormat, dtype_name, param_invalid
from simulator.program import KernelLaunch
from ..common import check_number, tensor_arg, tiling_error, ub_bytes, vector_core_count, view_copy_launch, workspace_arg
from ..tiling_space import distinct_accepted
from .kernel import COMPUTES, ElementwiseJob, ub_layout, ub_per_element
from .sigmoid import sigmoid_job

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
MIN_BLOCK = 2048              # as SiluBackward: below this, fewer cores with longer blocks
MIN_PART = 512               # a row split into tiles: parts of at least this many elements, else no UB broadcast
TILING_FIELDS = {"blockLength": "int", "tileLength": "int"}
MULTIPLIES = ("mul", "muls")
WRAPS = ("add", "mul", "muls")


def broadcast_shape(shapes, op: str, names: tuple = ()) -> tuple:
    """numpy's rule: dims aligned from the right, each 1 or equal; else 161002 (naming the
    tensors, where `names` gives them)."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        big = dims - {1}
        if len(big) > 1:
            which = (", ".join(f"{n} {list(s)}" for n, s in zip(names, shapes)) if len(names) == len(shapes)
                     else f"shapes {[list(s) for s in shapes]}")
            raise param_invalid(f"{op}: {which} do not broadcast (dim {i}: {sorted(dims)})")
        out.append(big.pop() if big else 1)
    return tuple(out)


def check(a: dict, op: str, inputs: tuple, output: str, profile, broadcast: bool, scalars: tuple = ()) -> None:
    """Nulls (161001), then the series, views, dtypes, shapes and the output (161002)."""
    require_present(a, inputs + (output,), op)
    support = require_support(op, profile)
    for name in inputs + (output,):
        check_tensor_view(a[name], name)
        dtype = dtype_name(a[name].dataType)
        if dtype not in support.dtypes:
            raise param_invalid(f"{op}: {name} has dtype {dtype}; {profile.series_name} supports "
                                f"{', '.join(support.dtypes)}")
        if len(a[name].viewDims) > (support.max_rank or 8):
            raise param_invalid(f"{op}: {name} has rank {len(a[name].viewDims)}; at most {support.max_rank or 8}")
    shapes = [a[n].viewDims for n in inputs]
    if broadcast:
        want = broadcast_shape(shapes, op, inputs)
    else:
        if len(set(shapes)) > 1:
            raise param_invalid(f"{op}: {', '.join(inputs)} must have one shape, got {[list(s) for s in shapes]}")
        want = shapes[0]
    if a[output].viewDims != want:
        raise param_invalid(f"{op}: {output} has shape {list(a[output].viewDims)}; it must be {list(want)}")
    for name in scalars:
        check_number(a[name], name, op)


def _expanded(t: aclTensor, shape: tuple) -> aclTensor:
    """t as a view of `shape`: the broadcast dims with stride 0."""
    pad = len(shape) - len(t.viewDims)
    strides = (0,) * pad + tuple(0 if d == 1 and s != 1 else st for d, s, st in
                                 zip(t.viewDims, shape[pad:], t.stride))
    return aclTensor(shape, t.dataType, strides, t.offset, t.format, t.storageDims, t.data)


def broadcast_pattern(t: aclTensor, shape: tuple) -> tuple[int, int]:
    """(B, M) when contiguous t, against an output of `shape`, holds M values, each covering B
    consecutive outputs, repeated along the output's leading dims: its shape is ones, then the
    output's dims, then ones ((C, 1, 1) against (N, C, H, W): B = H W, M = C, repeated N times;
    (W,): B = 1, M = W). M is 0 when the values do not repeat ((N, C, 1, 1): one value a row of
    H W). The kernel broadcasts it in UB as CANN's broadcast kernels do. (0, 0) when t is not of
    that form, or not broadcast."""
    dims = (1,) * (len(shape) - len(t.viewDims)) + tuple(t.viewDims)
    if not t.is_contiguous() or len(dims) != len(shape):
        return 0, 0
    end = len(shape)
    while end > 0 and dims[end - 1] == 1:
        end -= 1
    begin = end
    while begin > 0 and dims[begin - 1] == shape[begin - 1]:
        begin -= 1
    if any(d != 1 for d in dims[:begin]):
        return 0, 0
    B, M = int(np.prod(shape[end:], dtype=np.int64)), int(np.prod(shape[begin:end], dtype=np.int64))
    repeated = B * M < int(np.prod(shape, dtype=np.int64))
    return (B, M if repeated else 0) if B > 1 or repeated else (0, 0)


def _divisor_at_most(m: int, cap: int, fits) -> int:
    """The largest divisor of m no larger than cap that fits; 1 when none does (whether 1 fits or
    not: the caller checks the tile)."""
    small = [d for d in range(1, int(m ** 0.5) + 1) if m % d == 0]
    return max((d for d in small + [m // d for d in small] if d <= cap and fits(d)), default=1)


def row_tiling(n: int, B: int, period_len: int, need, profile, forced: dict) -> tuple[int, int, int]:
    """(blocks, block, tile) when inputs broadcast along rows of B, and repeat every `period_len`
    elements (0: they do not): tiles of whole periods (the operand expanded once a core), of whole
    rows or of an exact part of one (a tile straddles neither a row nor a period), blocks of whole
    tiles over the vector cores; need(tile) is the kernel's UB bytes. 0 tiles when a row has no
    part of a useful size that fits, or when the period would cut the tiles to under half of what
    whole rows would take (the operand is then copied out, and the flat kernel takes the call)."""
    ub = ub_bytes(profile)
    rows_fit, share = 1, max(MIN_BLOCK, ceil_div(n, vector_core_count(profile)))   # a core's share of the work
    while B * rows_fit * 2 <= share and need(B * rows_fit * 2) <= ub:
        rows_fit *= 2
    if period_len and 2 * period_len <= share and need(period_len) <= ub:
        repeats = 1
        while period_len * repeats * 2 <= share and need(period_len * repeats * 2) <= ub:
            repeats *= 2
        tile = period_len * repeats
    elif period_len and need(B) <= ub:
        tile = B * _divisor_at_most(period_len // B, max(1, share // B), lambda r: need(B * r) <= ub)
        tile = tile if (tile >= MIN_PART or tile == period_len) and 2 * tile >= B * rows_fit else 0
    elif need(B) <= ub:
        tile = B * rows_fit
    else:
        tile = next((B // p for p in range(2, B // MIN_PART + 1) if B % p == 0 and need(B // p) <= ub), 0)
    tile = int(forced.get("tileLength", tile))
    if tile <= 0 or (period_len and tile % period_len and period_len % tile):
        return 0, 0, 0              # (a forced tile across periods: the flat kernel checks it)
    tiles = ceil_div(n, tile)
    block = int(forced.get("blockLength", tile * max(ceil_div(tiles, vector_core_count(profile)),
                                                     ceil_div(MIN_BLOCK, tile))))
    if block <= 0 or block % tile or (tile % B and B % tile) or need(tile) > ub:
        raise tiling_error("elementwise tiling with operands broadcast "
                           + (f"along rows of {B}: tileLength {tile} must be whole rows or an exact part of one, "
                              if B > 1 else "") + f"fit UB ({need(tile)} B of {ub} B), blockLength {block} whole tiles")
    return ceil_div(n, block), block, tile


def tiling(n: int, per_elem: int, isz_min: int, profile, forced: dict) -> tuple[int, int, int]:
    """(blocks, block, tile): the flat split over the vector cores and the UB tile."""
    ub = ub_bytes(profile)
    align = profile.vector.repeat_bytes // isz_min
    max_tile = ub // per_elem // align * align
    block = int(forced.get("blockLength", max(align_up(ceil_div(n, vector_core_count(profile)), align), MIN_BLOCK)))
    tile = int(forced.get("tileLength", min(max_tile, align_up(block, align))))
    if block <= 0 or tile <= 0 or tile * per_elem > ub or (tile * isz_min) % 32 or (block * isz_min) % 32:
        raise tiling_error(f"elementwise tiling: blockLength {block} and tileLength {tile} must be positive "
                           f"multiples of 32 B, and the tile fit UB ({tile} x {per_elem} B > {ub} B)"
                           if tile * per_elem > ub else
                           f"elementwise tiling: blockLength {block} and tileLength {tile} must be positive "
                           f"multiples of 32 B")
    return ceil_div(n, block), block, tile


def flat_job(compute: str, in_dtypes: tuple, out_dtype, n: int, profile, forced: dict | None = None,
             scalar: float = 0.0, row: int = 0, broadcast: tuple = (), period_values: int = 0,
             compute_dtype=None) -> tuple[ElementwiseJob, int]:
    """(job, blocks) of the flat kernel computing `compute` over n elements (job.body runs it). It
    computes in FP16 when every input is FP16, as CANN's kernels do, unless the op computes in FP32
    (Sigmoid, SiLU); integers in their own dtype (8-bit ones and BOOL in FP16, 8-bit products in
    FP32); else in FP32 (the vector unit has no BF16 arithmetic). A Cast computes in its input's
    dtype. A sigmoid with one dtype in and out is CANN's own Sigmoid kernel (sigmoid.py).
    `compute_dtype`, where given, is the kernel's own (ThresholdGradV2D's and Axpy's FLOAT for
    integers)."""
    in_dtypes = tuple(np.dtype(d) for d in in_dtypes)
    if compute == "sigmoid" and in_dtypes[0] == np.dtype(out_dtype):
        return sigmoid_job(n, out_dtype, profile, forced)
    if compute_dtype is not None:
        compute_dtype = np.dtype(compute_dtype)
    elif compute == "cast":
        compute_dtype = in_dtypes[0]
    elif all(d.kind in "iub" for d in in_dtypes + (np.dtype(out_dtype),)):
        # integers compute in their own dtype; 8-bit ones and BOOL in FP16, which holds them
        # exactly (the vector unit has no 8-bit arithmetic: TBE's relu and add cast s8, u8 and
        # bool to f16 and back), but for TBE's mul 8-bit ones in FP32, which holds their products
        narrow = in_dtypes[0].itemsize == 1
        compute_dtype = (F32 if compute in MULTIPLIES and in_dtypes[0].kind != "b" else F16) if narrow \
            else in_dtypes[0]
    else:
        all_f16 = all(d == np.float16 for d in in_dtypes)
        compute_dtype = F16 if all_f16 and not COMPUTES[compute][2] else F32
    out_dtype = np.dtype(out_dtype)
    # TBE's add and mul take an 8-bit result modulo 256 before the cast back (kernel.wrap_8bit)
    wrap = compute in WRAPS and out_dtype.kind in "iu" and out_dtype.itemsize == 1 and compute_dtype.kind == "f"
    per_elem = ub_per_element(in_dtypes, out_dtype, compute_dtype, wrap) + (compute_dtype.itemsize if
                                                                            COMPUTES[compute][1] else 0)
    if broadcast:
        def need(tile):
            return ub_layout(ElementwiseJob(n, tile, tile, in_dtypes, out_dtype, compute_dtype, compute,
                                            float(scalar), row, tuple(broadcast), period_values, wrap)).total
        blocks, block, tile = row_tiling(n, row, period_values * row, need, profile, forced or {})
        if not tile:
            return None, 0
    else:
        blocks, block, tile = tiling(n, per_elem, min([d.itemsize for d in in_dtypes] + [np.dtype(out_dtype).itemsize]),
                                     profile, forced or {})
    return ElementwiseJob(n, block, tile, in_dtypes, out_dtype, compute_dtype, compute, float(scalar),
                          row, tuple(broadcast), period_values, wrap), blocks


class Staged(NamedTuple):
    """An input that launches of its own prepare before the kernel reads it, as aclnn strings l0
    kernels: made contiguous, cast to `dtype` (where it is not), multiplied by `scale` (Add's alpha
    as a tensor of that dtype: a Mul launch). Its buffer keeps the input's own shape."""
    dtype: np.dtype
    scale: float | None = None


class _Stage(NamedTuple):
    """A Staged input's workspace parts (None where its step is not needed) and its launches."""
    name: str
    tensor: aclTensor
    staged: Staged
    contig: object
    cast: object
    scaled: object

    @property
    def fact(self) -> str:
        return dtype_name(self.staged.dtype) + ("" if self.staged.scale is None else f" x {self.staged.scale:g}")

    def contiguous(self, ws: int, profile) -> list[KernelLaunch]:
        if self.contig is None:
            return []
        copy, _ = view_copy_launch(self.tensor, self.name, profile, gather=True)
        return [copy(workspace_arg(ws, self.contig, self.tensor.dtype, f"workspace:{self.name}"))]

    def launches(self, ws: int, profile) -> list[KernelLaunch]:
        """Its Cast and Mul (its Contiguous comes first, with every input's: `contiguous`)."""
        t, st, out = self.tensor, self.staged, []
        m, src = t.numel(), tensor_arg(t, self.name) + t.offset
        if self.contig is not None:
            src = workspace_arg(ws, self.contig, t.dtype, f"workspace:{self.name}")
        if self.cast is not None:
            dst = workspace_arg(ws, self.cast, st.dtype, f"workspace:{self.name} cast")
            out.append(_flat_launch("Cast", "cast", src, dst, t.dtype, st.dtype, m, profile))
            src = dst
        if self.scaled is not None:
            dst = workspace_arg(ws, self.scaled, st.dtype, f"workspace:{self.name} scaled")
            out.append(_flat_launch("Mul", "muls", src, dst, st.dtype, st.dtype, m, profile, st.scale))
        return out


def _stage(name: str, t: aclTensor, st: Staged, workspace: Workspace) -> _Stage:
    m = t.numel()
    contig = None if t.is_contiguous() else workspace.add(f"contiguous copy of {name}", m * t.itemsize)
    cast = None if t.dtype == st.dtype else workspace.add(f"{name} cast to {dtype_name(st.dtype)}",
                                                          m * st.dtype.itemsize)
    scaled = None if st.scale is None else workspace.add(f"{name} times {st.scale:g}", m * st.dtype.itemsize)
    return _Stage(name, t, st, contig, cast, scaled)


def _contiguous_like(t: aclTensor, dtype, data: int = 0) -> aclTensor:
    dims = tuple(t.viewDims)
    strides = tuple(int(np.prod(dims[i + 1:], dtype=np.int64)) for i in range(len(dims)))
    return aclTensor(dims, ACL_OF[np.dtype(dtype)], strides, 0, aclFormat.ACL_FORMAT_ND, dims, data)


def _rebased(t: aclTensor, data: int) -> aclTensor:
    return aclTensor(t.viewDims, t.dataType, t.stride, t.offset, t.format, t.storageDims, data)


def _flat_launch(label: str, compute: str, src, dst, dtype_in, dtype_out, n: int, profile, scalar: float = 0.0):
    job, blocks = flat_job(compute, (dtype_in,), dtype_out, n, profile, {}, scalar)
    return KernelLaunch(label, job.body, blocks, "vector", ((src,), dst, job))


def plan(a: dict, label: str, inputs: tuple, output: str, compute: str, scalar: float, profile, forced: dict,
         ub_broadcast: bool = True, staged: dict | None = None, result=None, compute_dtype=None) -> Plan:
    """Contiguous copies of strided inputs and of broadcast ones the kernel cannot broadcast in UB,
    the kernel, the ViewCopy of a strided output. `staged` inputs (name -> Staged) are prepared
    by launches of their own first; a `result` dtype other than the output's is the kernel's, and a
    Cast launch then writes the output (aclnn's Cast of the l0 result to out's dtype)."""
    out = a[output]
    n = out.numel()
    if n == 0:
        return Plan(Workspace(), lambda ws: [], {"launches": "none (empty output)"})
    staged, result, shape, workspace = staged or {}, np.dtype(result or out.dtype), out.viewDims, Workspace()
    sources, pattern, broadcast, in_dtypes, steps = [], None, [], [], []
    for k, name in enumerate(inputs):
        t, base = a[name], None
        if name in staged:
            step = _stage(name, t, staged[name], workspace)
            steps.append(step)
            base = step.scaled or step.cast or step.contig
            if base is not None:
                t = _contiguous_like(t, step.staged.dtype)
        view = t if t.viewDims == shape else _expanded(t, shape)
        in_dtypes.append(t.dtype)
        found = (0, 0) if view.is_contiguous() or not ub_broadcast else broadcast_pattern(t, shape)
        if found[0] and pattern in (None, found):
            pattern = found
            broadcast.append(k)
            sources.append((name, t, None, base))
            continue
        part = None if view.is_contiguous() else workspace.add(f"contiguous copy of {name}"
                                                               + (" (broadcast)" if view is not t else ""),
                                                               n * t.itemsize)
        sources.append((name, view, part, base))
    dense = None if out.is_contiguous() and result == out.dtype else \
        workspace.add(f"{output} dense, before the strided write-back" if result == out.dtype else
                      f"the kernel's result in {dtype_name(result)}", n * result.itemsize)
    dense_out = None if out.is_contiguous() or result == out.dtype else \
        workspace.add(f"{output} dense, before the strided write-back", n * out.itemsize)
    row, values = pattern or (0, 0)
    job, blocks = flat_job(compute, tuple(in_dtypes), result, n, profile, forced, scalar, row, tuple(broadcast),
                           values, compute_dtype)
    if job is None:                 # no part of a row fits: the broadcast operands are copied out dense
        return plan(a, label, inputs, output, compute, scalar, profile, forced, False, staged, result, compute_dtype)

    def build(ws):
        # as aclnn strings them: every input's Contiguous, then the Casts (and Mul), then the kernel
        launches, staging, args = [c for step in steps for c in step.contiguous(ws, profile)], [], []
        for name, view, part, base in sources:
            if base is not None:
                view = _rebased(view, ws + base.offset)
            if part is None:
                args.append(tensor_arg(view, name) + view.offset)
                continue
            copy, _ = view_copy_launch(view, name, profile, gather=True)
            addr = workspace_arg(ws, part, view.dtype, f"workspace:{name}")
            (staging if base is not None else launches).append(copy(addr))
            args.append(addr)
        launches += [launch for step in steps for launch in step.launches(ws, profile)] + staging
        dst = workspace_arg(ws, dense, result, f"workspace:{output}") if dense is not None \
            else tensor_arg(out, output) + out.offset
        launches.append(KernelLaunch(label, job.body, blocks, "vector", (tuple(args), dst, job)))
        if result != out.dtype:
            final = workspace_arg(ws, dense_out, out.dtype, f"workspace:{output} dense") if dense_out is not None \
                else tensor_arg(out, output) + out.offset
            launches.append(_flat_launch("Cast", "cast", dst, final, result, out.dtype, n, profile))
            dst = final
        if not out.is_contiguous():
            back, _ = view_copy_launch(out, output, profile, gather=False)
            launches.append(back(dst))
        return launches

    return Plan(workspace, build, {"blockDim": blocks, "blockLength": job.block, "tileLength": job.tile,
                                   "computeDtype": dtype_name(job.compute_dtype),
                                   "contiguousCopies": [step.name for step in steps if step.contig is not None]
                                   + [s[0] for s in sources if s[2] is not None],
                                   **({"broadcastInUB": [inputs[k] for k in broadcast]} if broadcast else {}),
                                   **({"staged": {step.name: step.fact for step in steps}} if steps else {}),
                                   **({"resultDtype": dtype_name(result)} if result != out.dtype else {})})


def tiling_space(op: str, inputs_: tuple):
    """`ascend-sim tune`'s candidates for an elementwise operator: block counts from a quarter of
    the vector cores to eight times as many, by UB tiles from 1 KiB of output to the largest
    that fits; where the default plan broadcasts an operand in UB, tiles of its rows and periods
    instead (the default's, halved and doubled: others would copy the operand out). The planner
    keeps the distinct ones it accepts."""
    def space(inputs: dict, profile) -> list[dict]:
        n = int(np.prod(np.broadcast_shapes(*(tuple(inputs[name].shape) for name in inputs_))))
        cores = vector_core_count(profile)

        def blocks(unit: int) -> list[int]:
            return sorted({align_up(ceil_div(n, max(1, cores * f // 4)), unit) for f in (1, 2, 4, 8, 16, 32)})

        def propose(default):
            if "broadcastInUB" in default:
                t0 = default["tileLength"]
                tiles = sorted({t0 << k for k in range(4)} | {t0 >> k for k in range(1, 4) if t0 % (1 << k) == 0})
                return [{"blockLength": b, "tileLength": t} for t in tiles for b in blocks(t) if t <= b][:60]
            tiles = [512 << k for k in range(8)]
            return [{"blockLength": b, "tileLength": t} for b in blocks(128) for t in tiles if t <= align_up(b, 128)][:60]
        return distinct_accepted(op, inputs, profile, propose)
    return space
