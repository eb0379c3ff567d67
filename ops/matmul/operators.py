"""aclnnMm and aclnnMatmul on the template GEMM (kernel.py; on A2 / A3 one product takes the tile
order and load balance of CANN's MatMulV3 base kernel, `as_matmul_v3`), with the launches CANN's
aclnn layer puts around its MatMul:

    aclnnMm(self, mat2, out, cubeMathType)           out (M, N) = self (M, K) @ mat2 (K, N)
    aclnnMatmul(self, other, out, cubeMathType)      1-D and 2-D operands as torch.matmul takes them,
                                                     and an N-D self against a 2-D other (the batch
                                                     folded into M)

    [Contiguous] [Cast to the Cube's input dtype] [TransData ND -> NZ: the training and inference
    series, whose Cube reads FRACTAL_NZ] [a transpose of mat2: 32-bit data, which load2d cannot
    transpose] MatMul [Cast to out's dtype] [ViewCopy(out)]

The Cube's dtype follows cubeMathType as for the convolution (SPEC section 3): FLOAT16 and BF16
as they are; FLOAT as FP32 (KEEP_DTYPE, A2), HF32 (ALLOW_FP32_DOWN_PRECISION / USE_HF32, A2) or
FP16 (USE_FP16, and every FP32 call on the FP16-only Cube of the training and inference series).

Checks: null tensors 161001; then 161002: the operator on the series, dtypes of the series,
ranks (Mm: 2 and 2; Matmul: 1 or more, other 1 or 2, a batched other is not modelled), the
contracted dims equal, out's shape, cubeMathType for the promoted dtype.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from simulator.acl import aclTensor
from simulator.aclnn import OpDef, Param, Plan, check_tensor_view, register, require_present, require_support
from simulator.arith import align_up, ceil_div
from simulator.enums import dtype_name, param_invalid
from simulator.kernel import (GM_ADDR, DataCopy, DataCopyExtParams, DataCopyPad, Duplicate, GetBlockIdx,
                              GlobalTensor, HardEvent, Loop, PIPE_ALL, PipeBarrier, SetFlag, TBuf, TPipe, TPosition,
                              WaitFlag)
from simulator.program import KernelLaunch
from ..common import promote, split_evenly, tiling_error, ub_bytes, vector_core_count, zero_fill_launch
from ..conv.convolution_backward import cube_compute_dtype
from ..elementwise.chain import Chain
from .kernel import DTYPES, GemmTiling, gemm_kernel, gemm_tiling

TILING_FIELDS = {"baseM": "int", "baseN": "int"}


# ---- TransData ND -> FRACTAL_NZ (the coupled chips' Cube reads NZ from GM) ------------------------
def _nd_to_nz_body(src: GM_ADDR, dst: GM_ADDR, rows: int, cols: int, dtype, chunk: int, items: tuple,
                   line_bytes: int = 512):
    """Per item (matrix, column strip s, row chunk): the chunk's rows of the strip's c0 columns
    into UB rows of 32 B (zeros past the matrix), then one contiguous write into the strip's NZ rows."""
    first, count = items[GetBlockIdx()]
    isz = np.dtype(dtype).itemsize
    c0, r16 = 32 // isz, align_up(rows, 16)
    chunks = ceil_div(r16, chunk)
    per_matrix = ceil_div(cols, c0) * chunks
    sGm, dGm = GlobalTensor(dtype), GlobalTensor(dtype)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)
    pipe, buf = TPipe(), TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, 2 * chunk * 32)
    ub = buf.Get(dtype)
    loaded = [pipe.AllocEventID(HardEvent.MTE2_MTE3) for _ in range(2)]
    written = [pipe.AllocEventID(HardEvent.MTE3_MTE2) for _ in range(2)]
    zeroed = pipe.AllocEventID(HardEvent.V_MTE2)
    pending = [False, False]
    # neighbouring strips share L2 lines: a strip's place in its line is part of what makes items alike
    strips_a_line = max(1, line_bytes // 32)
    for i in Loop(count, key=lambda i: (i < 2, (first + i) % chunks == chunks - 1,
                                        (first + i) % per_matrix // chunks == ceil_div(cols, c0) - 1,
                                        (first + i) % per_matrix // chunks % strips_a_line), period=2):
        b, rest = divmod(first + i, per_matrix)
        s, ch = divmod(rest, chunks)
        at_src, at_dst = b * rows * cols, b * r16 * ceil_div(cols, c0) * c0
        r0, k = ch * chunk, i % 2
        n_rows = min(chunk, r16 - r0)
        real = max(0, min(n_rows, rows - r0))
        width = min(c0, cols - s * c0)
        t = ub[k * chunk * c0]
        if pending[k]:
            WaitFlag(HardEvent.MTE3_MTE2, written[k])
        if real < n_rows or width < c0:           # the padding rows and columns are zeros (few items:
            PipeBarrier(PIPE_ALL)                 # a full barrier keeps the slot's last write-out first)
            Duplicate(t, 0.0, n_rows * c0)
            SetFlag(HardEvent.V_MTE2, zeroed)
            WaitFlag(HardEvent.V_MTE2, zeroed)
        if real:
            DataCopyPad(t, sGm[at_src + r0 * cols + s * c0], DataCopyExtParams(real, width * isz, (cols - width) * isz, 0))
        SetFlag(HardEvent.MTE2_MTE3, loaded[k])
        WaitFlag(HardEvent.MTE2_MTE3, loaded[k])
        DataCopy(dGm[at_dst + (s * r16 + r0) * c0], t, n_rows * c0)
        SetFlag(HardEvent.MTE3_MTE2, written[k])
        pending[k] = True
    for k in range(2):
        if pending[k]:
            WaitFlag(HardEvent.MTE3_MTE2, written[k])


def nd_to_nz_launch(src, dst, rows: int, cols: int, dtype, profile, batch: int = 1) -> KernelLaunch:
    """One TransData of `batch` (rows, cols) matrices, one after another in GM, to FRACTAL_NZ."""
    chunk = min(align_up(rows, 16), max(16, ub_bytes(profile) // 2 // 32 // 16 * 16), 4080)
    items = batch * ceil_div(cols, 32 // np.dtype(dtype).itemsize) * ceil_div(align_up(rows, 16), chunk)
    blocks = tuple((a, b - a) for a, b in split_evenly(items, vector_core_count(profile)) if b > a)
    return KernelLaunch("TransData(ND -> FRACTAL_NZ)", _nd_to_nz_body, len(blocks), "vector",
                        (src, dst, rows, cols, np.dtype(dtype), chunk, blocks, profile.l2.line_bytes))


def nz_elements(rows: int, cols: int, dtype) -> int:
    c0 = 32 // np.dtype(dtype).itemsize
    return align_up(rows, 16) * ceil_div(cols, c0) * c0


# ---- checks ---------------------------------------------------------------------------------------
def _matrix_views(a: dict, left: str, right: str) -> tuple[aclTensor, aclTensor, aclTensor]:
    """self, other and out as 2-D views (M, K), (K, N), (M, N): a 1-D operand is a row or a column,
    an N-D self's batch is folded into M (a contiguous self and out)."""
    x, w, y = a[left], a[right], a["out"]

    def view(t, shape, strides):
        return aclTensor(shape, t.dataType, strides, t.offset, t.format, t.storageDims, t.data)
    if len(x.viewDims) == 1:
        x2 = view(x, (1, x.viewDims[0]), (0, x.stride[0]))
    else:
        lead = int(np.prod(x.viewDims[:-1], dtype=np.int64))
        x2 = x if len(x.viewDims) == 2 else view(x, (lead, x.viewDims[-1]), (x.viewDims[-1], 1))
    w2 = view(w, (w.viewDims[0], 1), (w.stride[0], 0)) if len(w.viewDims) == 1 else w
    M, N = x2.viewDims[0], w2.viewDims[1]
    y2 = view(y, (M, N), (N, 1)) if y.viewDims != (M, N) else y
    return x2, w2, y2


def _expected_out(xs: tuple, ws: tuple) -> tuple:
    """torch.matmul's result shape (the batch dims broadcast; None when they do not)."""
    if len(xs) == 1 and len(ws) == 1:
        return ()
    if len(ws) == 1:
        return xs[:-1]
    if len(ws) == 2:
        return (ws[1],) if len(xs) == 1 else xs[:-1] + (ws[1],)
    try:
        batch = np.broadcast_shapes(xs[:-2], ws[:-2])
    except ValueError:
        return None
    return batch + ((ws[-1],) if len(xs) == 1 else (xs[-2], ws[-1]))


def _check(a: dict, profile, op: str, right: str) -> None:
    names = ("self", right, "out")
    require_present(a, names, op)
    support = require_support(op, profile)
    for name in names:
        check_tensor_view(a[name], name)
        if dtype_name(a[name].dataType) not in support.dtypes:
            raise param_invalid(f"{op}: {name} has dtype {dtype_name(a[name].dataType)}; {profile.series_name} "
                                f"supports {', '.join(support.dtypes)}")
    xs, ws = a["self"].viewDims, a[right].viewDims
    if op == "Mm" and (len(xs), len(ws)) != (2, 2):
        raise param_invalid(f"Mm: self and mat2 must be 2-D, got {len(xs)}-D and {len(ws)}-D")
    if not xs or not ws or len(xs) > 6:
        raise param_invalid(f"{op}: self has rank {len(xs)} and {right} rank {len(ws)}; each must be 1 to 6")
    if len(ws) > 6:
        raise param_invalid(f"{op}: {right} has rank {len(ws)}; at most 6")
    k_right = ws[0] if len(ws) == 1 else ws[-2]
    if xs[-1] != k_right:
        raise param_invalid(f"{op}: self's last dim {xs[-1]} must equal {right}'s contracted dim, {k_right} "
                            f"({list(xs)} @ {list(ws)})")
    want = _expected_out(xs, ws)
    if want is None:
        raise param_invalid(f"{op}: the batch dims of self {list(xs[:-2])} and {right} {list(ws[:-2])} do not "
                            f"broadcast")
    if a["out"].viewDims != want:
        raise param_invalid(f"{op}: out has shape {list(a['out'].viewDims)}; it must be {list(want)}")
    if len(xs) > 2 and len(ws) <= 2 and not (a["self"].is_contiguous() and a["out"].is_contiguous()):
        raise param_invalid(f"{op}: an N-D self folds into M only when self and out are contiguous")
    cube_compute_dtype(promote([dtype_name(a[n].dataType) for n in ("self", right)]), a["cubeMathType"], profile, op)


# ---- plan -----------------------------------------------------------------------------------------
def gemm_steps(c: Chain, x: aclTensor, w: aclTensor, names: tuple, compute: str, profile, forced: dict, y=None,
               batch: int = 1):
    """The launches of x (M, K) @ w (K, N) up to and with the MatMul: (result, tiling). The result
    is y itself when y is a contiguous tensor of the Cube's out dtype, else a workspace buffer.
    `batch` > 1: x and w are (..., M, K) and (..., K, N) views holding `batch` matrices each (the
    broadcast ones expanded) or one 2-D matrix for every product, and one MatMul launch runs them."""
    (M, K), N = x.viewDims[-2:], w.viewDims[-1]
    in_t, out_t = (np.dtype(d) for d in DTYPES[compute])
    counts = [1 if len(v.viewDims) == 2 else batch for v in (x, w)]
    strides = [n * (nz_elements(r, k, in_t) if _nz_inputs(profile) else r * k) if n > 1 else 0
               for n, (r, k) in zip(counts, ((M, K), (K, N)))]
    if K == 0:                              # an empty sum: the product is zeros
        result = y if y is not None and y.is_contiguous() and y.dtype == out_t else \
            c.buffer("MatMul's result", batch * M * N, out_t)
        c.launch(lambda addr: zero_fill_launch("MemSet(MatMul's result)", addr(result), batch * M * N * out_t.itemsize,
                                               profile))
        return result, None
    tiles = _forced_tiles(forced, profile, in_t.itemsize)
    t = gemm_tiling(M, N, K, compute, profile.soc_version, in_t.itemsize == 4, profile=profile, **tiles,
                    **({"batch": batch, "strideA": strides[0] // counts[0], "strideB": strides[1] // counts[1]}
                       if batch > 1 else {}))
    if not t.nzInputs and batch == 1:
        a_transposed = len(x.viewDims) == 2 and M > 1 and K > 1 and x.stride == (1, M)   # MatMulV3's isATrans
        t = as_matmul_v3(t, profile, balance=not (tiles or a_transposed))

    def dense(src: aclTensor, name: str, shape: tuple, transpose: bool):
        """src as dense (rows, cols) matrices of the Cube's input dtype, transposed if asked."""
        buf = src
        if not src.is_contiguous() or transpose and src.dtype != in_t:
            buf = c.buffer(f"{name} contiguous", src.numel(), src.dtype)
            c.contiguous(src, name, buf)
        if src.dtype != in_t:
            cast = c.buffer(f"{name} as {dtype_name(in_t)}", src.numel(), in_t)
            c.flat("Cast", "cast", [(buf, 0)], (cast, 0), src.numel())
            buf = cast
        if transpose:
            rows, cols = shape
            nb = src.numel() // (rows * cols)
            out = c.buffer(f"{name} transposed", nb * rows * cols, in_t)
            if nb == 1:
                c.copy(f"Transpose({name})", buf, (cols, rows), (1, cols), out, gather=True)
            else:
                c.copy(f"Transpose({name})", buf, (nb, cols, rows), (rows * cols, 1, cols), out, gather=True)
            buf = out
        return buf
    left, right = names
    a_buf = dense(x, left, (M, K), False)
    b_buf = dense(w, right, (K, N), t.transB)
    if t.nzInputs:
        for name, rows, cols, nb in ((left, M, K, counts[0]), (right, K, N, counts[1])):
            src = a_buf if name == left else b_buf
            nz = c.buffer(f"{name} in FRACTAL_NZ", nb * nz_elements(rows, cols, in_t), in_t)
            c.launch(lambda addr, s=src, d=nz, r=rows, k=cols, n=nb: nd_to_nz_launch(addr(s), addr(d), r, k, in_t,
                                                                                    profile, n))
            if name == left:
                a_buf = nz
            else:
                b_buf = nz
    direct = y is not None and y.is_contiguous() and y.dtype == out_t
    result = y if direct else c.buffer("MatMul's result", batch * M * N, out_t)
    c.launch(lambda addr: KernelLaunch("MatMul" if batch == 1 else "BatchMatMul", gemm_kernel, t.usedCoreNum, "cube",
                                       (addr(a_buf), addr(b_buf), addr(result), t)))
    return result, t


def _forced_tiles(forced: dict, profile, isz: int) -> dict:
    """A forced baseM / baseN: multiples of 16 whose L0C tile and smallest double-buffered L0A /
    L0B tiles fit the chip (else 561002, not a fault inside the kernel)."""
    tiles = {k: int(v) for k, v in forced.items() if k in TILING_FIELDS}
    if not tiles:
        return tiles
    _, kind = profile.core_kind_for("cube")
    buf = kind.buffers
    bm, bn = tiles.get("baseM", 128), tiles.get("baseN", 256)
    c0 = 32 // isz
    if bm <= 0 or bn <= 0 or bm % 16 or bn % 16 or bm * bn * 4 > buf["L0C"] \
            or 2 * bm * c0 * isz > buf["L0A"] or 2 * bn * c0 * isz > buf["L0B"] or 2 * isz * c0 * (bm + bn) > buf["L1"]:
        raise tiling_error(f"MatMul tiling: baseM {bm} and baseN {bn} must be positive multiples of 16 whose tiles "
                           f"fit L0C ({buf['L0C']} B), L0A, L0B and L1")
    return tiles


# MatMulV3's load balance is tuned for this many Cube cores (hicann/ops-nn mat_mul_v3 op_tiling
# `OptimizeLoadBalanceBasicKernel`: "aicNum == 24, other core counts not verified")
V3_BALANCED_CORES = 24
V3_FEW_ROUNDS = 4           # under this many rounds of tiles, baseM is cut to fill the last one
V3_SMALL_M = (128, 672)     # else an M in (128, 672] takes the least baseM that keeps its tile rows
# A + B + C up to this many bytes for a 192 MiB L2 (scaled by the chip's) are one L2 tile, every
# output tile dealt in one diagonal walk (`DoL2CacheTiling`: "100M, so that the L2 never evicts")
V3_ONE_L2_TILE_BYTES = 100 << 20
V3_L2_REFERENCE_BYTES = 192 << 20


def as_matmul_v3(t: GemmTiling, profile, balance: bool = True) -> GemmTiling:
    """The tiling as CANN's MatMulV3 base kernel runs a single ND matrix product on A2 / A3 (its
    small-shape and full-load tilings are not modelled): on a 24-core chip, unless the tiles were
    forced or A comes transposed, its load balance, which only narrows baseM
    (`OptimizeLoadBalanceBasicKernel`, for the 128 x 256 tiles 128 B deep of its base tiling); and,
    while A, B and C fit one L2 tile, its diagonal order (`MatmulBaseBlock::UpdateBasicIndex`).
    Larger products split into L2 tiles by `CalcTile`, which is not ported: they keep catlass's
    swizzle, which groups the tiles for the L2 too."""
    _, kind = profile.core_kind_for("cube")
    in_t, out_t = (np.dtype(d) for d in DTYPES[t.dtype])
    cann_base_k = 128 // in_t.itemsize          # before gemm_tiling's clamp to a short K
    if balance and kind.count == V3_BALANCED_CORES and t.stepN == 1 and t.baseM * t.baseN == 128 * 256 \
            and t.baseK == min(cann_base_k, align_up(t.K, 32 // in_t.itemsize)):
        m_tiles, n_tiles = ceil_div(t.M, t.baseM), ceil_div(t.N, t.baseN)
        bm = t.baseM
        if m_tiles * n_tiles < V3_FEW_ROUNDS * kind.count:
            rows = align_up(m_tiles * n_tiles, kind.count) // n_tiles
            bm = align_up(ceil_div(t.M, rows), 16)
        elif V3_SMALL_M[0] < t.M <= V3_SMALL_M[1]:
            while bm > 16 and ceil_div(t.M, bm - 16) == m_tiles:
                bm -= 16
        m_tiles = ceil_div(t.M, bm)
        t = dataclasses.replace(t, baseM=bm, mTiles=m_tiles, usedCoreNum=min(kind.count, m_tiles * n_tiles))
    total = (t.M * t.K + t.K * t.N) * in_t.itemsize + t.M * t.N * out_t.itemsize
    one_l2_tile = total <= V3_ONE_L2_TILE_BYTES * profile.l2.bytes / V3_L2_REFERENCE_BYTES
    return dataclasses.replace(t, diagonal=one_l2_tile)


def _nz_inputs(profile) -> bool:
    """The Cube reads FRACTAL_NZ from GM (the chip has no ND -> NZ copy): as gemm_tiling decides."""
    return "GM_L1_ND2NZ" not in profile.paths


def _facts(compute: str, t) -> dict:
    if t is None:
        return {"cubeDtype": compute, "launches": "MemSet (K = 0)"}
    return {"cubeDtype": compute, "baseM": t.baseM, "baseN": t.baseN, "baseK": t.baseK,
            "blockDim": t.usedCoreNum, "nzInputs": t.nzInputs, "transB": t.transB,
            "tileOrder": "MatMulV3 diagonal" if t.diagonal else "catlass swizzle"}


def _batched_views(a: dict, right: str):
    """self and other for a batched other: each a 2-D matrix when its batch is one matrix, else a
    view over the whole broadcast batch (stride 0 where it broadcasts). Returns (x, w, out, the
    batch's matrices); out holds them dense when it is contiguous."""
    x, w, y = a["self"], a[right], a["out"]

    def view(t, shape, strides):
        return aclTensor(tuple(shape), t.dataType, tuple(strides), t.offset, t.format, t.storageDims, t.data)
    if len(x.viewDims) == 1:
        x = view(x, (1, x.viewDims[0]), (0, x.stride[0]))
    batch = tuple(np.broadcast_shapes(x.viewDims[:-2], w.viewDims[:-2]))
    B = int(np.prod(batch, dtype=np.int64))

    def over_batch(t):
        own = t.viewDims[:-2]
        if int(np.prod(own, dtype=np.int64)) == 1:
            return view(t, t.viewDims[-2:], t.stride[-2:])
        pad = len(batch) - len(own)
        strides = [0] * pad + [0 if d == 1 else st for d, st in zip(own, t.stride[:-2])]
        return view(t, batch + t.viewDims[-2:], strides + list(t.stride[-2:]))
    return over_batch(x), over_batch(w), y, B


def plan(a: dict, profile, forced: dict, op: str, right: str) -> Plan:
    if len(a[right].viewDims) > 2:
        return _batched_plan(a, profile, forced, op, right)
    x, w, y = _matrix_views(a, "self", right)
    (M, _), N = x.viewDims, w.viewDims[1]
    compute = cube_compute_dtype(promote([dtype_name(t.dataType) for t in (x, w)]), a["cubeMathType"], profile, op)
    c = Chain(profile, {})
    if M * N == 0:
        return Plan(c.workspace, c.build, {"launches": "none (empty output)"})
    result, t = gemm_steps(c, x, w, ("self", right), compute, profile, forced, y)
    if result is not y:
        final = y if y.is_contiguous() else c.buffer("out dense, before the strided write-back", M * N, y.dtype)
        if y.dtype != np.dtype(DTYPES[compute][1]):
            c.flat("Cast", "cast", [(result, 0)], (final, 0), M * N)
        else:
            final = result
        if not y.is_contiguous():
            c.view_copy(y, "out", final)
    return Plan(c.workspace, c.build, _facts(compute, t))


def _batched_plan(a: dict, profile, forced: dict, op: str, right: str) -> Plan:
    x, w, y, B = _batched_views(a, right)
    M, N = x.viewDims[-2], w.viewDims[-1]
    compute = cube_compute_dtype(promote([dtype_name(t.dataType) for t in (x, w)]), a["cubeMathType"], profile, op)
    c = Chain(profile, {})
    if B * M * N == 0:
        return Plan(c.workspace, c.build, {"launches": "none (empty output)"})
    result, t = gemm_steps(c, x, w, ("self", right), compute, profile, forced, y, batch=B)
    if result is not y:
        final = y if y.is_contiguous() else c.buffer("out dense, before the strided write-back", B * M * N, y.dtype)
        if y.dtype != np.dtype(DTYPES[compute][1]):
            c.flat("Cast", "cast", [(result, 0)], (final, 0), B * M * N)
        else:
            final = result
        if not y.is_contiguous():
            c.view_copy(a["out"], "out", final)
    return Plan(c.workspace, c.build, _facts(compute, t) | {"batch": B})


def _infer(right: str):
    def infer(i: dict) -> dict:
        x, w = np.asarray(i["self"]), np.asarray(i[right])
        return {"out": (_expected_out(x.shape, w.shape), np.result_type(x, w))}
    return infer


def _space(op: str, right: str):
    def space(inputs: dict, profile) -> list[dict]:
        from ..tiling_space import distinct_accepted
        return distinct_accepted(op, inputs, profile, lambda default: [
            {"baseM": m, "baseN": n} for m in (16, 32, 64, 128, 256) for n in (16, 64, 128, 256, 512)])
    return space


for _op, _right in (("Mm", "mat2"), ("Matmul", "other")):
    register(OpDef(_op, [Param("self", "tensor"), Param(_right, "tensor"), Param("out", "tensor", output=True),
                         Param("cubeMathType", "int")],
                   (lambda op, r: lambda a, profile: _check(a, profile, op, r))(_op, _right),
                   (lambda op, r: lambda a, profile, forced: plan(a, profile, forced, op, r))(_op, _right),
                   _infer(_right), _space(_op, _right), TILING_FIELDS))
