"""Pieces every operator shares: how a tensor becomes a kernel argument; the copies that make a
view contiguous in the workspace (l0op::Contiguous) and write a dense result back into an output
view (ViewCopy): a copy of the view's runs, a tiled one with a vector Transpose for permuted views
(broadcast views: broadcast_copy.py); the split of work over blocks; the zero fill of GM."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from simulator.acl import aclTensor
from simulator.aclnn import WorkspacePart
from simulator.kernel import (GM_ADDR, DataCopy, DataCopyExtParams, DataCopyPad, Duplicate, GetBlockIdx, Loop,
                              GlobalTensor, HardEvent, Nd2NzParams, SetFlag, TBuf, TPipe, TPosition, TQue, WaitFlag,
                              float32)
from simulator.kernel.operands import c0_of
from simulator.kernel.vector import Transpose, TransposeParamsExt, TransposeType
from simulator.program import KernelLaunch
from simulator.arith import align_up, ceil_div
from simulator.enums import AclnnError, aclnnStatus, param_invalid
from simulator.profile import Profile
from .broadcast_copy import broadcast_copy_body, plan_broadcast_copy

MAX_BLOCK_COUNT = 4095          # DataCopyExtParams.blockCount is 12 bits


def promote(names) -> str:
    """The floating dtypes' promotion (torch's, as the aclnn operators take it): one dtype is
    itself; any two different ones (FLOAT with FLOAT16 / BF16, FLOAT16 with BF16) are FLOAT."""
    s = set(names)
    return s.pop() if len(s) == 1 else "FLOAT"


def check_number(v, name: str, op: str) -> None:
    """A scalar attribute (alpha, eps, momentum, threshold) must be a number: else 161002."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise param_invalid(f"{op}: {name} must be a number, got {v!r}")


def tiling_error(msg: str) -> AclnnError:
    """ACLNN_ERR_INNER_TILING_ERROR (561002): no tiling can run the call (or a forced one cannot)."""
    return AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR, msg)


# Nd2NzParams.srcDValue is 16 bits: catlass (STRIDE_LIMIT, atlasa2/copy_gm_to_l1.hpp) copies a
# matrix whose rows lie 65,536 or more elements apart one row at a time
STRIDE_LIMIT = 65536


def copy_nd2nz(dst, src, rows: int, cols: int, row_pitch: int, dst_rows: int) -> None:
    """GM rows x cols from `src` (rows row_pitch elements apart) into L1's NZ layout of dst_rows
    rows a strip, as catlass's CopyGmToL1 for a row-major matrix issues it."""
    if row_pitch < STRIDE_LIMIT:
        DataCopy(dst, src, Nd2NzParams(1, rows, cols, 0, row_pitch, dst_rows, 1, 0))
        return
    c0 = c0_of(dst.dtype)
    for r in range(rows):     # (catlass passes srcDValue and dstNzNStride 0, which a one-row copy ignores)
        DataCopy(dst[r * c0], src[r * row_pitch], Nd2NzParams(1, 1, cols, 0, cols, dst_rows, 1, 0))


def tensor_arg(t: aclTensor, name: str) -> GM_ADDR:
    """The kernel argument for a tensor: a pointer to its storage, bounded by it."""
    return GM_ADDR(t.data, t.storage_numel() * t.itemsize, t.dtype, name)


def workspace_arg(base: int, part: WorkspacePart, dtype, name: str) -> GM_ADDR:
    """The kernel argument for a part of the workspace whose base address is `base`."""
    return GM_ADDR(base + part.offset, part.nbytes, dtype, name)


def vector_core_count(profile: Profile) -> int:
    return profile.core_kind_for("vector")[1].count


def ub_bytes(profile: Profile) -> int:
    return profile.core_kind_for("vector")[1].buffers["UB"]


def ub_too_small(profile: Profile, need: int, what: str) -> str:
    """Why a plan cannot start when the vector core's UB holds less than `need` bytes, naming
    the profile field a what-if would raise."""
    kind = profile.core_kind_for("vector")[0]
    return (f"UB holds {ub_bytes(profile)} B, less than {what} needs ({need} B): "
            f"raise cores.{kind}.buffers.UB to at least {need}")


# ---- strided view <-> contiguous -------------------------------------------------------------
def _run_dims(shape, strides) -> tuple[int, list[list[int]]]:
    """The view's dimensions merged where they are contiguous: (run length of the innermost
    unit-stride dimension, the outer dimensions [size, stride] whose runs start apart)."""
    dims = [(d, s) for d, s in zip(shape, strides) if d != 1]
    merged: list[list[int]] = []
    for d, s in dims:
        if merged and merged[-1][1] == s * d:
            merged[-1] = [merged[-1][0] * d, s]
        else:
            merged.append([d, s])
    if not merged:
        return 1, []
    inner_d, inner_s = merged[-1]
    if inner_s == 1:
        return inner_d, merged[:-1]
    return 1, merged


def view_runs(shape, strides, offset) -> tuple[np.ndarray, int]:
    """The view as runs of consecutive storage elements, in row-major order of the view:
    (start offsets of each run, run length)."""
    run, outer = _run_dims(shape, strides)
    starts = np.array([offset], dtype=np.int64)
    for d, s in outer:
        starts = (starts[:, None] + np.arange(d, dtype=np.int64)[None, :] * s).reshape(-1)
    return starts, run


@dataclass
class CopyGroup:
    """One DataCopyPad's worth: `count` runs of `length` elements; strided side starts at
    `strided_off` and steps `step` elements per run; the dense side starts at `dense_off`."""
    strided_off: int
    step: int
    count: int
    length: int
    dense_off: int


def plan_view_copy(t: aclTensor, profile: Profile) -> tuple[int, list[list[list[CopyGroup]]]]:
    """Split a view's runs into UB-sized tiles and the tiles over vector cores.
    Returns (block_dim, per block: per tile: groups)."""
    isz = t.itemsize
    slot = (ub_bytes(profile) // 2) // 32 * 32
    tiles = _regular_tiles(t.viewDims, t.stride, t.offset, isz, slot)
    if tiles is None:
        tiles = _piece_tiles(t.viewDims, t.stride, t.offset, isz, slot)
    blocks = _split_tiles(tiles, vector_core_count(profile))
    return len(blocks), blocks


def _regular_tiles(shape, strides, offset: int, isz: int, slot: int) -> list[list[CopyGroup]] | None:
    """The tiles of a view whose runs fit a slot and do not overlap, computed a stretch of runs at
    a time (the innermost outer dimension: equal steps) instead of a run at a time: the same
    tiles and groups as _piece_tiles, without a Python object per run (a 20-million-run view
    planned in ~4 GB that way). None: not such a view (the caller takes _piece_tiles)."""
    run, outer = _run_dims(shape, strides)
    if run * isz > slot or not outer or outer[-1][1] < run or any(s < 0 for _, s in outer):
        return None
    per_tile = slot // align_up(run * isz, 32)
    last_d, last_s = outer[-1]
    tiles: list[list[CopyGroup]] = []
    g: CopyGroup | None = None
    piece = 0                                           # runs so far (their dense offset / run)
    for idx in itertools.product(*(range(d) for d, _ in outer[:-1])):
        base = offset + sum(i * s for i, (_, s) in zip(idx, outer[:-1]))
        k = 0
        while k < last_d:
            if piece % per_tile == 0:
                tiles.append([])
                g = None
            so = base + k * last_s
            # _piece_tiles' rule: a run joins the group if it keeps the group's step (a group of
            # one takes any step that does not overlap)
            if g is not None and g.count < MAX_BLOCK_COUNT and (
                    (g.count == 1 and so - g.strided_off >= run) or
                    (g.count > 1 and so - g.strided_off == g.step * g.count)):
                if g.count == 1:
                    g.step = so - g.strided_off
                n = 1
                if g.step == last_s:                    # the rest of the stretch keeps the step
                    n = min(last_d - k, per_tile - piece % per_tile, MAX_BLOCK_COUNT - g.count)
                g.count += n
            else:
                g = CopyGroup(so, run, 1, run, piece * run)
                tiles[-1].append(g)
                n = 1
            k += n
            piece += n
    return tiles


def _piece_tiles(shape, strides, offset: int, isz: int, slot: int) -> list[list[CopyGroup]]:
    """The tiles of any view, a run (or a slot-sized piece of one) at a time."""
    max_len = slot // isz
    starts, run = view_runs(shape, strides, offset)
    pieces: list[tuple[int, int, int]] = []          # (strided offset, dense offset, length)
    dense = 0
    for s in starts.tolist():
        done = 0
        while done < run:
            n = min(run - done, max_len)
            pieces.append((s + done, dense, n))
            dense += n
            done += n
    # group pieces into tiles that fit the slot, and tiles into DataCopyPad groups
    tiles: list[list[CopyGroup]] = []
    cur: list[CopyGroup] = []
    used = 0
    for so, do, n in pieces:
        need = align_up(n * isz, 32)
        if used + need > slot:
            tiles.append(cur)
            cur, used = [], 0
        g = cur[-1] if cur else None
        if (g is not None and g.length == n and g.count < MAX_BLOCK_COUNT
                and g.dense_off + g.count * n == do
                and (g.count == 1 and so - g.strided_off >= n or
                     g.count > 1 and so - g.strided_off == g.step * g.count)):
            if g.count == 1:
                g.step = so - g.strided_off
            g.count += 1
        else:
            cur.append(CopyGroup(so, n, 1, n, do))
        used += need
    if cur:
        tiles.append(cur)
    return tiles


def _byte_io(strided: GM_ADDR, dense: GM_ADDR, ub_bytes: int):
    """The copy kernels' set-up: a TPipe with ub_bytes of UB scratch, and both GM tensors as bytes."""
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, ub_bytes)
    sGm, dGm = GlobalTensor(np.uint8), GlobalTensor(np.uint8)
    sGm.SetGlobalBuffer(strided.cast(np.uint8))
    dGm.SetGlobalBuffer(dense.cast(np.uint8))
    return pipe, buf.Get(np.uint8), sGm, dGm


def _view_copy_body(strided: GM_ADDR, dense: GM_ADDR, blocks, gather: bool, isz: int,
                    slot_bytes: int):
    """Kernel body: per tile, MTE2 brings runs into UB (32-B aligned rows), MTE3 writes them
    out; two UB slots ping-pong, ordered by explicit flags."""
    tiles = blocks[GetBlockIdx()]
    pipe, ub, sGm, dGm = _byte_io(strided, dense, 2 * slot_bytes)
    ev = [pipe.AllocEventID(HardEvent.MTE2_MTE3) for _ in range(2)]
    back = [pipe.AllocEventID(HardEvent.MTE3_MTE2) for _ in range(2)]
    pending = [False, False]
    # the first two tiles wait for no slot; tiles whose copies have one shape cost the same
    shape = [(i < 2, tuple((g.count, g.length, g.step) for g in groups)) for i, groups in enumerate(tiles)]
    for i in Loop(len(tiles), key=shape.__getitem__, period=2):
        groups = tiles[i]
        k = i % 2
        local = ub[k * slot_bytes]
        if pending[k]:
            WaitFlag(HardEvent.MTE3_MTE2, back[k])
        row = 0
        for g in groups:
            rb = g.length * isz
            gap = (g.step - g.length) * isz
            if gather:
                DataCopyPad(local[row], sGm[g.strided_off * isz],
                            DataCopyExtParams(g.count, rb, gap if g.count > 1 else 0, 0))
            else:
                DataCopyPad(local[row], dGm[g.dense_off * isz], DataCopyExtParams(g.count, rb, 0, 0))
            row += g.count * align_up(rb, 32)
        SetFlag(HardEvent.MTE2_MTE3, ev[k])
        WaitFlag(HardEvent.MTE2_MTE3, ev[k])
        row = 0
        for g in groups:
            rb = g.length * isz
            gap = (g.step - g.length) * isz
            if gather:
                DataCopyPad(dGm[g.dense_off * isz], local[row], DataCopyExtParams(g.count, rb, 0, 0))
            else:
                DataCopyPad(sGm[g.strided_off * isz], local[row],
                            DataCopyExtParams(g.count, rb, 0, gap if g.count > 1 else 0))
            row += g.count * align_up(rb, 32)
        SetFlag(HardEvent.MTE3_MTE2, back[k])
        pending[k] = True
    for k in range(2):
        if pending[k]:
            WaitFlag(HardEvent.MTE3_MTE2, back[k])


def view_copy_launch(t: aclTensor, name: str, profile: Profile, gather: bool, label: str | None = None):
    """A launch builder that copies view `t` into (gather) or out of (scatter) a dense
    workspace buffer, its launch named `label` (else Contiguous(name) / ViewCopy(name)).
    Returns (builder(dense GM_ADDR) -> KernelLaunch, block_dim).
    Gathered broadcast views take `plan_broadcast_copy`, permuted views (innermost dimension not
    unit-stride, another one unit-stride) `plan_transpose_copy`, the rest the generic run copy."""
    title = label or ("Contiguous" if gather else "ViewCopy") + f"({name})"
    bp = plan_broadcast_copy(_merge_dims(t.viewDims, t.stride), t.offset, t.itemsize, vector_core_count(profile),
                             ub_bytes(profile)) if gather else None
    if bp is not None:
        source = tensor_arg(t, name)
        return (lambda dense: KernelLaunch(title, broadcast_copy_body, bp.block_dim, "vector", (source, dense, bp)),
                bp.block_dim)
    tp = plan_transpose_copy(t, profile)
    if tp is not None:
        strided = tensor_arg(t, name)

        def build_t(dense: GM_ADDR) -> KernelLaunch:
            return KernelLaunch(title, _transpose_copy_body, tp.block_dim, "vector",
                                (strided, dense, tp, gather))
        return build_t, tp.block_dim
    block_dim, blocks = plan_view_copy(t, profile)
    slot = (ub_bytes(profile) // 2) // 32 * 32
    strided = tensor_arg(t, name)

    def build(dense: GM_ADDR) -> KernelLaunch:
        return KernelLaunch(title, _view_copy_body, block_dim, "vector",
                            (strided, dense, blocks, gather, t.itemsize, slot))
    return build, block_dim


# ---- permuted view <-> contiguous: 2-D tiles transposed in UB -----------------------------------
# A view whose innermost dimension is not unit-stride (a transpose / permutation) has runs of one
# element, and the generic copy above moves one 32-B burst per element. As CANN does with a
# TransData / Transpose kernel, this path picks the view's unit-stride dimension `a` (the
# storage's contiguous axis) and the view dimensions after it, flattened, `b` (contiguous in the
# dense tensor), and copies (a x b) tiles: MTE2 brings tb rows of ta storage-contiguous elements
# (one DataCopyPad per run of rows along the view's innermost dimension: blockCount rows,
# srcStride the gap), the vector unit transposes the tile in UB (Transpose, NCHW2NHWC on
# (1, rows, 1, cols), bytes-wise on a same-size integer type), and MTE3 writes ta dense rows of tb
# elements (one DataCopyPad). ViewCopy is the same in reverse. Two UB slots (each an input and an
# output region) ping-pong, ordered by explicit flags; tiles are split over the vector cores.

_SAME_SIZE_INT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


@dataclass
class TransposeTile:
    """One tile: `na` elements along a (contiguous in storage) times `nb` along b (contiguous in
    the dense tensor). Storage rows: `groups` of (offset, rows, row stride) in b order, each row
    `na` elements; dense rows: `na` rows of `nb` elements from `dense_off`, `dense_stride` apart."""
    na: int
    nb: int
    groups: list
    dense_off: int


@dataclass
class TransposePlan:
    block_dim: int
    blocks: list                 # per block: list of TransposeTile
    isz: int
    dense_stride: int            # elements between consecutive a rows of the dense tensor
    region: int                  # bytes of one UB region (4 regions: 2 slots x in/out)


def _merge_dims(shape, strides):
    """Drop size-1 dims and merge adjacent dims that are contiguous in storage (outer stride =
    inner stride x inner size); the dense (row-major) order is unchanged by the merge."""
    merged: list[list[int]] = []
    for d, s in zip(shape, strides):
        if d == 1:
            continue
        if merged and merged[-1][1] == s * d:
            merged[-1] = [merged[-1][0] * d, s]
        else:
            merged.append([d, s])
    return merged


def plan_transpose_copy(t: aclTensor, profile: Profile) -> TransposePlan | None:
    """The transpose path's plan for view `t`, or None when it does not apply (contiguous or
    unit-stride innermost, broadcast / overlapping views, no unit-stride dimension, tiny slices)."""
    axes = _transpose_axes(t)
    if axes is None:
        return None
    dims, j = axes
    A = dims[j][0]
    bdims = dims[j + 1:]
    Bt = int(np.prod([d for d, _ in bdims]))
    if A < 2 or A * Bt < 256:
        return None
    isz = t.itemsize
    if isz not in _SAME_SIZE_INT:
        return None
    ncores = vector_core_count(profile)
    region = (ub_bytes(profile) // 4) // 32 * 32
    total = int(np.prod([d for d, _ in dims]))
    # tiles no bigger than a core's share, but at least 8 KiB (runs long enough to pay)
    E = min(region // isz, max(8192 // isz, align_up(ceil_div(total, ncores), 32 // isz)))
    R = bdims[-1][0]
    ta, tb, m = _transpose_tile_shape(A, R, Bt // R, E, isz)
    assert align_up(ta, 32 // isz) * align_up(tb, 32 // isz) * isz <= region
    tiles = _transpose_tiles(t.offset, dims, j, ta, tb, m)
    blocks = _split_tiles(tiles, ncores)
    return TransposePlan(len(blocks), blocks, isz, Bt, region)


def _transpose_axes(t: aclTensor):
    """(the view's merged dims [size, stride], the index of its unit-stride dim) when the
    transpose path can copy it: non-empty, no negative or zero strides, innermost not
    unit-stride, and no two elements sharing storage. None otherwise."""
    shape, strides = [int(d) for d in t.viewDims], [int(s) for s in t.stride]
    if not shape or int(np.prod(shape)) == 0 or any(s < 0 for s in strides):
        return None
    dims = _merge_dims(shape, strides)
    if len(dims) < 2 or dims[-1][1] == 1 or any(s == 0 for _, s in dims):
        return None
    # no overlap: sorted by stride, each stride passes the furthest element the dims below reach
    by_stride = sorted(((s, d) for d, s in dims))
    if by_stride[0][0] != 1:
        return None
    reach = 0
    for s, d in by_stride:
        if s <= reach:
            return None
        reach += (d - 1) * s
    return dims, next(i for i, (_, s) in enumerate(dims) if s == 1)


def _transpose_tile_shape(A: int, R: int, nq: int, E: int, isz: int) -> tuple[int, int, int]:
    """A tile of about E elements: (ta along a, tb along b, m). When whole innermost b rows of R
    fit, a tile takes m > 0 of them (tb = m * R); otherwise m = 0 and tb cuts a row. ta and tb
    are balanced (equal tiles, multiples of 32 B where they are cut)."""
    al = 32 // isz
    sq = max(al, int(np.sqrt(E)) // al * al)
    ta = min(align_up(A, al), sq)
    tb_lim = (E // ta) // al * al
    if tb_lim >= R:
        m = min(nq, tb_lim // R)
        m = ceil_div(nq, ceil_div(nq, m))
        tb = m * R
    else:
        m = 0
        tb = align_up(ceil_div(R, ceil_div(R, tb_lim)), al)
        tb = min(tb, tb_lim)
    ta_lim = (E // align_up(tb, al)) // al * al
    ta = min(A, ta_lim)
    ta = min(A, align_up(ceil_div(A, ceil_div(A, ta)), al))
    return ta, tb, m


def _transpose_tiles(offset: int, dims, j: int, ta: int, tb: int, m: int) -> list[TransposeTile]:
    """Every tile of the view, in dense order: per outer index (the dims before a), per ta
    slice of a, per b tile (m whole innermost rows, or a tb-long piece of one)."""
    A = dims[j][0]
    bdims = dims[j + 1:]
    Bt = int(np.prod([d for d, _ in bdims]))
    R, r_s = bdims[-1]
    nq = Bt // R
    # offsets of the b-outer tuples (all b dims but the innermost), in storage
    qoff = np.zeros(1, dtype=np.int64)
    for d, s in bdims[:-1]:
        qoff = (qoff[:, None] + np.arange(d, dtype=np.int64)[None, :] * s).reshape(-1)
    qoff = qoff.tolist()
    ooff = np.array([offset], dtype=np.int64)
    for d, s in dims[:j]:
        ooff = (ooff[:, None] + np.arange(d, dtype=np.int64)[None, :] * s).reshape(-1)
    # b tiles: (b start, nb, groups relative to the tile's storage base)
    btiles = []
    if m:
        for q0 in range(0, nq, m):
            qs = qoff[q0:q0 + m]
            btiles.append((q0 * R, len(qs) * R, [(q, R, r_s) for q in qs]))
    else:
        for q in range(nq):
            for r0 in range(0, R, tb):
                n = min(tb, R - r0)
                btiles.append((q * R + r0, n, [(qoff[q] + r0 * r_s, n, r_s)]))
    tiles = []
    for o, base in enumerate(ooff.tolist()):
        for a0 in range(0, A, ta):
            na = min(ta, A - a0)
            for b0, nb, groups in btiles:
                tiles.append(TransposeTile(na, nb, [(base + a0 + g, n, st) for g, n, st in groups],
                                           o * A * Bt + a0 * Bt + b0))
    return tiles


def _split_tiles(tiles: list, ncores: int) -> list[list]:
    """Tiles over at most ncores blocks, in order, ceil(tiles / blocks) each (no empty block)."""
    block_dim = max(1, min(ncores, len(tiles)))
    per = ceil_div(len(tiles), block_dim)
    blocks = [tiles[i * per:(i + 1) * per] for i in range(block_dim)]
    return [b for b in blocks if b]


def _transpose_copy_body(strided: GM_ADDR, dense: GM_ADDR, plan: TransposePlan, gather: bool):
    """Kernel body of the transpose path (see above). Per slot k: MTE2 fills in[k], V transposes
    in[k] -> out[k], MTE3 drains out[k]; flags MTE2->V, V->MTE3 forward and V->MTE2 (in[k] free),
    MTE3->V (out[k] free) back."""
    tiles = plan.blocks[GetBlockIdx()]
    isz, region, dstride = plan.isz, plan.region, plan.dense_stride
    al = 32 // isz
    it = _SAME_SIZE_INT[isz]
    pipe, ub, sGm, dGm = _byte_io(strided, dense, 4 * region)
    ins = [ub[(2 * k) * region] for k in range(2)]
    outs = [ub[(2 * k + 1) * region] for k in range(2)]
    m2v = [pipe.AllocEventID(HardEvent.MTE2_V) for _ in range(2)]
    v2m3 = [pipe.AllocEventID(HardEvent.V_MTE3) for _ in range(2)]
    v2m2 = [pipe.AllocEventID(HardEvent.V_MTE2) for _ in range(2)]
    m3v = [pipe.AllocEventID(HardEvent.MTE3_V) for _ in range(2)]
    # the input regions' padding (row tails, rows past a tail tile) is transposed into padding
    # columns that are never written out; give it defined bytes once
    for k in range(min(2, len(tiles))):
        Duplicate(ins[k].ReinterpretCast(np.int16), 0, region // 2)
        SetFlag(HardEvent.V_MTE2, v2m2[k])
    in_free = [k < len(tiles) for k in range(2)]     # a V->MTE2 flag is pending for in[k]
    out_busy = [False, False]       # an MTE3->V flag is pending for out[k]
    for i, tile in enumerate(tiles):
        k = i % 2
        na, nb = tile.na, tile.nb
        pa, pb = align_up(na, al), align_up(nb, al)
        if in_free[k]:
            WaitFlag(HardEvent.V_MTE2, v2m2[k])
            in_free[k] = False
        src_u, dst_u = ins[k], outs[k]
        if gather:          # storage rows (b) of na elements -> in: (pb rows, pa cols)
            _storage_rows(tile, src_u, sGm, isz, pa, into_ub=True)
            rows, cols = pb, pa
        else:               # dense rows (a) of nb elements -> in: (pa rows, pb cols)
            DataCopyPad(src_u, dGm[tile.dense_off * isz],
                        DataCopyExtParams(na, nb * isz, (dstride - nb) * isz if na > 1 else 0, 0))
            rows, cols = pa, pb
        SetFlag(HardEvent.MTE2_V, m2v[k])
        WaitFlag(HardEvent.MTE2_V, m2v[k])
        if out_busy[k]:
            WaitFlag(HardEvent.MTE3_V, m3v[k])
            out_busy[k] = False
        Transpose(dst_u.ReinterpretCast(it), src_u.ReinterpretCast(it), None,
                  TransposeParamsExt(1, rows, 1, cols, TransposeType.TRANSPOSE_NCHW2NHWC))
        SetFlag(HardEvent.V_MTE2, v2m2[k])
        in_free[k] = True
        SetFlag(HardEvent.V_MTE3, v2m3[k])
        WaitFlag(HardEvent.V_MTE3, v2m3[k])
        if gather:          # out: (pa rows, pb cols) -> dense rows
            DataCopyPad(dGm[tile.dense_off * isz], dst_u,
                        DataCopyExtParams(na, nb * isz, 0, (dstride - nb) * isz if na > 1 else 0))
        else:               # out: (pb rows, pa cols) -> storage rows
            _storage_rows(tile, dst_u, sGm, isz, pa, into_ub=False)
        SetFlag(HardEvent.MTE3_V, m3v[k])
        out_busy[k] = True
    for k in range(2):
        if in_free[k]:
            WaitFlag(HardEvent.V_MTE2, v2m2[k])
        if out_busy[k]:
            WaitFlag(HardEvent.MTE3_V, m3v[k])


def _storage_rows(tile: TransposeTile, ub, sGm: GlobalTensor, isz: int, pa: int, into_ub: bool) -> None:
    """The tile's storage-side rows (na elements each, pa apart in UB), one DataCopyPad per
    group of equally spaced rows: GM -> UB (into_ub) or UB -> GM."""
    na = tile.na
    row = 0
    for off, n, st in tile.groups:
        gap = (st - na) * isz if n > 1 else 0
        if into_ub:
            DataCopyPad(ub[row * pa * isz], sGm[off * isz], DataCopyExtParams(n, na * isz, gap, 0))
        else:
            DataCopyPad(sGm[off * isz], ub[row * pa * isz], DataCopyExtParams(n, na * isz, 0, gap))
        row += n


# ---- blocks and zero fills, for every operator ------------------------------------------------
def tik_core_split(loops: tuple, cores: int) -> tuple[int, int]:
    """How CANN's TIK layout kernels (TransData's positive_source_ntc / negative_target_ntc) spread
    their loops over the cores: exactly one loop axis is split, the one whose count fills the cores
    best (a count past the cores scores the cores plus its remainder, a whole multiple twice the
    cores), the others run whole inside each core (GetMcInfoPositiveNtc100 / GetMcInfoNegative200 in
    the canndev tiling). Returns (the axis, its loops per core); so a call with few images, few C1
    planes and few position chunks runs on few cores."""
    def fill(x: int) -> int:
        return (cores if x >= cores else 0) + x % cores + (cores if x and x % cores == 0 else 0)
    axis = max(range(len(loops)), key=lambda i: (fill(loops[i]), -i))
    return axis, ceil_div(max(loops[axis], 1), cores)


def split_evenly(total: int, ncores: int) -> tuple:
    """Contiguous ranges (first, end) of `total` work items over at most `ncores` blocks, sizes
    within one of each other."""
    nb = max(1, min(ncores, total))
    return tuple((b * total // nb, (b + 1) * total // nb) for b in range(nb))


@dataclass
class ZeroTiling:
    total_bytes: int
    chunk: int              # bytes per DataCopy from the zeroed UB buffer
    blocks: tuple           # per block: (first byte, end byte)


# the most one vector_dup writes: 255 repeats of 256 B (CANN's MemSet duplicates its zeros with one)
MAX_DUP_BYTES = 255 * 256


def plan_zero(nbytes: int, profile) -> ZeroTiling:
    """CANN's MemSet (the kernel aclnn launches before one that adds into its output atomically,
    TBE's mem_set): every vector core, each a 32-B aligned share of the bytes; cores past the
    end start and have nothing to do, as on the chip."""
    ncores = vector_core_count(profile)
    per = align_up(max(ceil_div(nbytes, ncores), 1), 32)
    blocks = tuple((min(b * per, nbytes), min((b + 1) * per, nbytes)) for b in range(ncores))
    return ZeroTiling(nbytes, min(MAX_DUP_BYTES, per, ub_bytes(profile) // 2 // 32 * 32), blocks)


def zero_kernel(dst: GM_ADDR, t: ZeroTiling):
    """Duplicate zeros into UB once, then stream them to GM (MTE3), each block its own range."""
    lo, hi = t.blocks[GetBlockIdx()]
    if lo >= hi:
        return
    pipe = TPipe()
    q = TQue(TPosition.VECOUT, 1)
    pipe.InitBuffer(q, 1, t.chunk)
    gm = GlobalTensor(np.uint8)
    gm.SetGlobalBuffer(dst.cast(np.uint8))
    z = q.AllocTensor(float32)
    Duplicate(z, 0.0, t.chunk // 4)
    q.EnQue(z)
    z = q.DeQue(np.uint8)
    off = lo
    while off < hi:
        n = min(t.chunk, hi - off)
        if n % 32 == 0:
            DataCopy(gm[off], z, n)
        else:
            DataCopyPad(gm[off], z, DataCopyExtParams(1, n, 0, 0))
        off += n
    q.FreeTensor(z)


def zero_fill_launch(label: str, dst: GM_ADDR, nbytes: int, profile: Profile) -> KernelLaunch:
    """A launch that zeroes nbytes of GM at dst (an output no window reaches, a workspace
    accumulator before atomic adds); `label` names it in the report."""
    t = plan_zero(nbytes, profile)
    return KernelLaunch(label, zero_kernel, len(t.blocks), "vector", (dst, t))
