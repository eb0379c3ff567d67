"""The vector launches before the Cube, one per layout as CANN launches a TransData per tensor:
gradOutput and input to tall NC1HWC0 maps (cast, channels padded to C0, zero gap rows between
stacked images; a 3D convolution's maps as CANN's TIK TransData tiles them), the space-to-depth
input map, the weight packed into gradInput's right operand (W', packing.py) and the ND->NZ
operand's cast. (The FP32 gradWeight accumulator is zeroed by a MemSet launch of its own.)
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

from simulator.kernel import (Cast, DataCopy, DataCopyExtParams, DataCopyPad, DataCopyParams, Duplicate,
                              GetBlockIdx, GlobalTensor, ScalarWork)
from simulator.kernel.vector import Transpose, TransposeParamsExt
from simulator.arith import align_up, ceil_div
from .geometry import MapLayout, SpaceToDepth
from ..common import tik_core_split
from .vector_pipeline import (NCHW2NHWC, VecBlock, align32, perm_plan, perm_result, ring_pass, round_mode, run_perm,
                              slot_pass, zero_lanes)
from .packing import PackWeight, pass_packw


class To5HDItem(NamedTuple):
    """One item of a TransData pass: c1n C1 planes from plane c1 of image n, group g, positions
    [p0, p0 + npos) of the image."""
    n: int
    g: int
    c1: int
    c1n: int
    p0: int
    npos: int


class GapItem(NamedTuple):
    """Gap rows to zero: nimg images from n0 of (g, c1), gap positions [p0, p0 + npos) of each."""
    g: int
    c1: int
    n0: int
    nimg: int
    p0: int
    npos: int


@dataclass
class To5HDPass:
    name: str
    N: int
    G: int
    Cg: int
    C1: int
    c0: int
    P: int                # positions per image (D*H*W)
    lay: MapLayout
    src_dtype: np.dtype   # the tensor's dtype in GM
    compute_dtype: np.dtype   # the map's dtype (the Cube's operand dtype)
    c1n: int              # C1 planes per item
    L: int                # positions per item (P when whole images fit)
    slot: int             # bytes per slot (slot_pass) or per ring region (ring_pass)
    ring: bool = False    # no cast: one transpose per item, on ring_pass's three regions
    slots: int = 2        # slot_pass's slots: 1 for CANN's TIK TransData (an input and an output half)
    tile_scalar: float = 0.0   # the scalar unit's own cycles per item (a TIK kernel's: scalar.tik_tile_cycles)


# TIK's TransData keeps 256 B and 64 x 8 B of UB for itself and halves the rest (src_ub, dst_ub);
# one vnchwconv line holds 16 rows (trans_data_common_func.py, trans_data_positive_source_ntc.py)
TIK_UB_RESERVED = 256
TIK_TILING_BYTES = 512


def tik_vnc_line(ub_bytes: int, src_isz: int, isz: int) -> int:
    """Positions of one channel row in a TIK NCDHW -> NDC1HWC0 tile (mode 1001: 3,056 for fp16 in
    a 192 KB UB): half the UB TIK leaves, over the 16 rows of a vnchwconv, in 16-position steps;
    with a cast in the pass (CANN casts in a kernel of its own) the half also holds the cast rows."""
    usable = ub_bytes - TIK_UB_RESERVED - TIK_TILING_BYTES
    per_pos = 16 * (src_isz + (isz if src_isz != isz else 0))
    return max(16, (usable // 2) // per_pos // 16 * 16)


def plan_to5hd_tik(name: str, *, N: int, G: int, Cg: int, c0: int, P: int, lay: MapLayout, src_dtype,
                   compute_dtype, ub_bytes: int, tile_scalar: float) -> To5HDPass:
    """gradOutput / input of a 3D convolution to NDC1HWC0 as CANN's TIK TransData does it
    (trans_data_positive_source_ntc, mode 1001): a tile is one image, one C1 plane of 16 channels
    and up to a vnchwconv line of positions; one tile in UB at a time (its load overlaps only the
    previous tile's store)."""
    C1 = ceil_div(Cg, c0)
    L = min(P, tik_vnc_line(ub_bytes, src_dtype.itemsize, compute_dtype.itemsize))
    pitch = L if L == P else align_up(L, 32 // src_dtype.itemsize)
    elems = c0 * pitch
    cast = align32(elems * compute_dtype.itemsize) if src_dtype != compute_dtype else 0
    slot = align32(elems * src_dtype.itemsize) + cast + align32(elems * compute_dtype.itemsize)
    return To5HDPass(name, N, G, Cg, C1, c0, P, lay, src_dtype, compute_dtype, 1, L, slot, False, 1, tile_scalar)


def tik_to5hd_blocks(t: To5HDPass, cores: int) -> list[list[To5HDItem]]:
    """The tiles of a TIK TransData per core: one of (images, C1 planes, position chunks) split
    over the cores (tik_core_split), the other two whole in each."""
    loops = (t.N, t.G * t.C1, ceil_div(t.P, t.L))
    axis, per = tik_core_split(loops, cores)
    blocks = []
    for lo in range(0, loops[axis], per):
        ranges = [range(x) for x in loops]
        ranges[axis] = range(lo, min(lo + per, loops[axis]))
        blocks.append([To5HDItem(n, gc // t.C1, gc % t.C1, 1, k * t.L, min(t.L, t.P - k * t.L))
                       for n in ranges[0] for gc in ranges[1] for k in ranges[2]])
    return blocks + [[] for _ in range(cores - len(blocks))]     # TIK launches every core; the rest exit


def plan_to5hd(name: str, *, N: int, G: int, Cg: int, c0: int, P: int, lay: MapLayout, src_dtype, compute_dtype,
               ub_bytes: int) -> To5HDPass:
    C1 = ceil_div(Cg, c0)
    isz_s, isz = src_dtype.itemsize, compute_dtype.itemsize
    dts = (src_dtype, compute_dtype)
    if src_dtype == compute_dtype:          # no cast: one transpose per item, on the ring of three regions
        room = ub_bytes // 3
        plane = align32(c0 * P * isz)
        if plane <= room:
            c1n = max(1, min(C1, room // plane))
            return To5HDPass(name, N, G, Cg, C1, c0, P, lay, *dts, c1n, P, align32(c1n * c0 * P * isz), True)
        unit = 32 // isz
        L = max(unit, (room // (c0 * isz)) // unit * unit)
        return To5HDPass(name, N, G, Cg, C1, c0, P, lay, *dts, 1, L, align32(c0 * L * isz), True)
    # a cast: per item the input, its cast and the transposed output
    per_pos = c0 * (isz_s + isz + isz)      # one C1 plane

    def slot_of(c1n, npos):
        elems = c1n * c0 * npos
        return align32(elems * isz_s) + align32(elems * isz) + align32(elems * isz)
    room = ub_bytes // 2
    if slot_of(1, P) <= room:
        c1n = max(1, min(C1, room // max(slot_of(1, P), 1)))
        while c1n > 1 and slot_of(c1n, P) > room:
            c1n -= 1
        return To5HDPass(name, N, G, Cg, C1, c0, P, lay, *dts, c1n, P, slot_of(c1n, P))
    unit = 32 // min(isz_s, isz)
    L = max(unit, (room // per_pos) // unit * unit)
    return To5HDPass(name, N, G, Cg, C1, c0, P, lay, *dts, 1, L, slot_of(1, L))


def to5hd_items(t: To5HDPass) -> list[To5HDItem]:
    items = []
    for n in range(t.N):
        for g in range(t.G):
            for c1 in range(0, t.C1, t.c1n):
                for p0 in range(0, t.P, t.L):
                    items.append(To5HDItem(n, g, c1, min(t.c1n, t.C1 - c1), p0, min(t.L, t.P - p0)))
    return items


def _to5hd_pitch(t: To5HDPass, it: To5HDItem) -> int:
    """Positions per C1 plane in UB: whole images as they are, a run of positions padded to 32 B
    (DataCopyPad lands each channel's run 32-B aligned)."""
    return it.npos if it.npos == t.P else align_up(it.npos, 32 // t.src_dtype.itemsize)


def _to5hd_channels(t: To5HDPass, it: To5HDItem) -> int:
    return min(it.c1n * t.c0, t.Cg - it.c1 * t.c0)


def _to5hd_needs_prezero(t: To5HDPass, it: To5HDItem) -> bool:
    """Channel padding (a partial last C1 plane) or position padding must read as zeros."""
    return not (_to5hd_channels(t, it) == it.c1n * t.c0 and _to5hd_pitch(t, it) == it.npos)


def _to5hd_prezero(ub: VecBlock, t: To5HDPass, b: int, it: To5HDItem) -> bool:
    if not _to5hd_needs_prezero(t, it):
        return False
    z, cnt = zero_lanes(ub.raw[b], align32(it.c1n * t.c0 * _to5hd_pitch(t, it) * t.src_dtype.itemsize))
    Duplicate(z, 0.0, cnt)
    return True


def _to5hd_load(ub: VecBlock, t: To5HDPass, sGm, b: int, it: To5HDItem):
    if t.tile_scalar:
        ScalarWork(t.tile_scalar)
    isz_s = t.src_dtype.itemsize
    nch, pitch = _to5hd_channels(t, it), _to5hd_pitch(t, it)
    src = sGm[((it.n * t.G + it.g) * t.Cg + it.c1 * t.c0) * t.P + it.p0]
    dst = ub.at(b, t.src_dtype)
    if it.npos == t.P:
        DataCopyPad(dst, src, DataCopyExtParams(1, nch * t.P * isz_s, 0, 0))
    else:
        DataCopyPad(dst, src, DataCopyExtParams(nch, it.npos * isz_s, (t.P - it.npos) * isz_s,
                                                (pitch * isz_s - align32(it.npos * isz_s)) // 32))


def _to5hd_transpose(ub: VecBlock, t: To5HDPass, dst: int, src, it: To5HDItem):
    """[c1][c0][pos] -> [c1][pos][c0]."""
    Transpose(ub.at(dst, t.compute_dtype), src, None,
              TransposeParamsExt(it.c1n, t.c0, _to5hd_pitch(t, it), 1, NCHW2NHWC))


def _to5hd_store(t: To5HDPass, dGm, out, it: To5HDItem):
    c0, isz, block = t.c0, t.compute_dtype.itemsize, t.lay.block
    pitch = _to5hd_pitch(t, it)
    off = ((it.g * t.C1 + it.c1) * block + t.lay.img(it.n) + it.p0) * c0
    DataCopy(dGm[off], out, DataCopyParams(it.c1n, it.npos * c0 * isz // 32, (pitch - it.npos) * c0 * isz // 32,
                                           (block - it.npos) * c0 * isz // 32))


def _to5hd_slot_pass(ub: VecBlock, items, t: To5HDPass, sGm, dGm):
    """(Cast, then) transpose: in, (cast) and out regions in each slot."""
    isz_s, isz = t.src_dtype.itemsize, t.compute_dtype.itemsize
    cast = t.src_dtype != t.compute_dtype
    # every item of the pass places its regions as the largest does: the next load into a slot
    # waits for this item's compute, not its store, so it must not land where the store reads
    most = max((it.c1n * t.c0 * _to5hd_pitch(t, it) for it in items), default=0)

    def cast_at(b):
        return b + align32(most * isz_s)

    def out_at(b):
        return cast_at(b) + (align32(most * isz) if cast else 0)

    def compute(b, it):
        src = ub.at(b, t.src_dtype)
        if cast:
            cap = it.c1n * t.c0 * _to5hd_pitch(t, it)
            Cast(ub.at(cast_at(b), t.compute_dtype), src, round_mode(t.compute_dtype, t.src_dtype), cap)
            src = ub.at(cast_at(b), t.compute_dtype)
        _to5hd_transpose(ub, t, out_at(b), src, it)

    slot_pass(ub, t.slot, items, partial(_to5hd_load, ub, t, sGm), compute,
              lambda b, it: _to5hd_store(t, dGm, ub.at(out_at(b), t.compute_dtype), it),
              partial(_to5hd_prezero, ub, t), t.slots)


def _to5hd_ring_pass(ub: VecBlock, items, t: To5HDPass, sGm, dGm):
    """No cast: one transpose from the load region into the out region of the ring."""
    def prezero(lb, ob, it, dry):
        return _to5hd_needs_prezero(t, it) if dry else _to5hd_prezero(ub, t, lb, it)

    ring_pass(ub, t.slot, items, lambda lb, ob, it: _to5hd_load(ub, t, sGm, lb, it),
              lambda lb, ob, it: _to5hd_transpose(ub, t, ob, ub.at(lb, t.src_dtype), it),
              lambda lb, ob, it: _to5hd_store(t, dGm, ub.at(ob, t.compute_dtype), it), prezero)


def pass_to5hd(ub: VecBlock, items, t: To5HDPass, sGm, dGm):
    if t.ring:
        _to5hd_ring_pass(ub, items, t, sGm, dGm)
    else:
        _to5hd_slot_pass(ub, items, t, sGm, dGm)


def gap_items(t: To5HDPass, zero_bytes: int) -> list[GapItem]:
    """Zero the gap rows between stacked images: per (g, c1), the gaps of as many images as the
    zero region covers in one strided copy (or one gap in pieces when it is larger)."""
    lay = t.lay
    if not lay.fold or lay.pitch == lay.H:
        return []
    esz = t.c0 * t.compute_dtype.itemsize
    gapP = (lay.pitch - lay.H) * lay.Wd
    per = zero_bytes // (gapP * esz)
    if per >= 1:
        return [GapItem(g, c1, n0, min(per, lay.N - n0), 0, gapP) for g in range(t.G) for c1 in range(t.C1)
                for n0 in range(0, lay.N, per)]
    step = zero_bytes // esz
    return [GapItem(g, c1, n, 1, p, min(step, gapP - p))
            for g in range(t.G) for c1 in range(t.C1) for n in range(lay.N) for p in range(0, gapP, step)]


def zero_gap(ub: VecBlock, it: GapItem, t: To5HDPass, dGm):
    lay, c0, isz = t.lay, t.c0, t.compute_dtype.itemsize
    off = ((it.g * t.C1 + it.c1) * lay.block + lay.img(it.n0) + lay.H * lay.Wd + it.p0) * c0
    DataCopy(dGm[off], ub.zeros().ReinterpretCast(t.compute_dtype),
             DataCopyParams(it.nimg, it.npos * c0 * isz // 32, 0, (lay.pitch * lay.Wd - it.npos) * c0 * isz // 32))


class SpaceToDepthItem(NamedTuple):
    """Rows [row0, row0 + nrows) of image n's space-to-depth map (x')."""
    n: int
    row0: int
    nrows: int


@dataclass
class SpaceToDepthMap:
    name: str
    N: int
    sd: SpaceToDepth
    X: tuple              # original (H, W)
    lay: MapLayout
    src_dtype: np.dtype
    compute_dtype: np.dtype
    ni: int               # x' rows per item
    slot: int
    G: int = 1
    C1: int = 1
    c0: int = 16


def plan_space_to_depth_map(sd: SpaceToDepth, *, N: int, X, lay: MapLayout, src_dtype, compute_dtype,
                            ub_bytes: int) -> SpaceToDepthMap:
    src_dtype, compute_dtype = np.dtype(src_dtype), np.dtype(compute_dtype)
    per_row = sd.cp * 2 * 2 * sd.Xw                  # elements of one x' row (in and out alike)
    room = ub_bytes // 2
    per_b = align32(per_row * src_dtype.itemsize) + 2 * align32(per_row * compute_dtype.itemsize)
    ni = max(1, min(sd.Xh, room // per_b))
    slot = align32(ni * per_row * src_dtype.itemsize) + 2 * align32(ni * per_row * compute_dtype.itemsize)
    return SpaceToDepthMap("input", N, sd, tuple(X), lay, src_dtype, compute_dtype, ni, slot)


def space_to_depth_items(t: SpaceToDepthMap) -> list[SpaceToDepthItem]:
    return [SpaceToDepthItem(n, i0, min(t.ni, t.sd.Xh - i0)) for n in range(t.N) for i0 in range(0, t.sd.Xh, t.ni)]


def pass_space_to_depth(ub: VecBlock, items, t: SpaceToDepthMap, sGm, dGm):
    sd, ni = t.sd, t.ni
    src_dt, dt = t.src_dtype, t.compute_dtype
    isz_s, isz = src_dt.itemsize, dt.itemsize
    Xh, Xw = t.X
    Wx2 = 2 * sd.Xw
    n_in = sd.cp * 2 * ni * Wx2
    r_a = align32(n_in * isz_s)
    r_b = r_a + align32(n_in * isz)
    cast = src_dt != dt
    # [c][i][ph][j][pw] -> [i][j][ph][pw][c]: 16 lanes = (ph, pw, c)
    steps = perm_plan((sd.cp, ni, 2, sd.Xw, 2), (1, 3, 2, 4, 0))

    def prezero(b, it):
        z, cnt = zero_lanes(ub.raw[b], align32(n_in * isz_s))
        Duplicate(z, 0.0, cnt)
        return True

    def load(b, it):
        h0 = 2 * it.row0 - sd.eh
        lo, hi = max(h0, 0), min(h0 + 2 * ni, Xh)
        if hi > lo:
            DataCopyPad(ub.at(b + (lo - h0) * Wx2 * isz_s, src_dt), sGm[it.n * sd.Cin * Xh * Xw + lo * Xw],
                        DataCopyExtParams(sd.Cin, (hi - lo) * Xw * isz_s, (Xh * Xw - (hi - lo) * Xw) * isz_s,
                                          (2 * ni * Wx2 * isz_s - align32((hi - lo) * Xw * isz_s)) // 32))

    def compute(b, it):
        src = b
        if cast:
            Cast(ub.at(b + r_a, dt), ub.at(b, src_dt), round_mode(dt, src_dt), n_in)
            src = b + r_a
        run_perm(ub, steps, src, (b + r_a, b + r_b) if not cast else (b + r_b, b + r_a), dt)

    def store(b, it):
        res = perm_result(steps, b + r_a if cast else b, (b + r_a, b + r_b) if not cast else (b + r_b, b + r_a))
        DataCopy(dGm[(t.lay.img(it.n) + it.row0 * sd.Xw) * 16], ub.at(res, dt), it.nrows * sd.Xw * 16)

    slot_pass(ub, t.slot, items, load, compute, store, prezero)


class CastPass(NamedTuple):
    """The ND->NZ left operand cast to the compute dtype: `elements` of `source`, `chunk` an item."""
    elements: int
    src_dtype: np.dtype
    dst_dtype: np.dtype
    chunk: int
    source: str


class Span(NamedTuple):
    """A run [offset, offset + count) of elements (casts)."""
    offset: int
    count: int


def cast_items(n: int, chunk: int) -> list[Span]:
    return [Span(o, min(chunk, n - o)) for o in range(0, n, chunk)]


def pass_cast(ub: VecBlock, items, src_dtype, dst_dtype, chunk, sGm, dGm):
    out = align32(chunk * src_dtype.itemsize)          # the cast's region in a slot

    def prezero(b, it):
        if it.count % 8 == 0:
            return False
        z, n = zero_lanes(ub.raw[b], align32(chunk * src_dtype.itemsize))
        Duplicate(z, 0.0, n)
        return True

    def load(b, it):
        DataCopyPad(ub.at(b, src_dtype), sGm[it.offset], DataCopyExtParams(1, it.count * src_dtype.itemsize, 0, 0))

    def compute(b, it):
        Cast(ub.at(b + out, dst_dtype), ub.at(b, src_dtype), round_mode(dst_dtype, src_dtype), align_up(it.count, 8))

    def store(b, it):
        DataCopyPad(dGm[it.offset], ub.at(b + out, dst_dtype), DataCopyExtParams(1, it.count * dst_dtype.itemsize, 0, 0))

    slot_pass(ub, out + align32(chunk * dst_dtype.itemsize), items, load, compute, store, prezero)


class PrologueTensors(NamedTuple):
    """The GM tensors the launches before the Cube read and write (None where a call has none)."""
    grad_output: object = None
    input: object = None
    weight: object = None
    packed_weight: object = None
    dy_map: object = None
    x_map: object = None
    cast_src: object = None
    cast_dst: object = None


@dataclass
class Prologue:
    """One vector launch before the Cube: a layout pass (a map to NC1HWC0, the weight to W') or
    the ND->NZ operand's cast, its items dealt over its blocks."""
    ub: int
    zero_bytes: int       # UB kept zeroed at the top (gap rows); 0 when the launch writes none
    maps: list            # (To5HDPass or SpaceToDepthMap, source, destination): PrologueTensors' names
    packw: PackWeight | None
    cast: CastPass | None
    blocks: list          # per block: [(kind, item)]


def prologue_body(gms: PrologueTensors, P: Prologue):
    work = P.blocks[GetBlockIdx()]
    ub = VecBlock(P.ub, P.zero_bytes)
    tensors = {}
    for name, a in gms._asdict().items():
        if a is not None:
            tensors[name] = GlobalTensor(a.dtype)
            tensors[name].SetGlobalBuffer(a)
    by_kind = {}
    for kind, it in work:
        by_kind.setdefault(kind, []).append(it)
    for i, (t, src, dst) in enumerate(P.maps):
        if by_kind.get(("5hd", i)):
            if isinstance(t, SpaceToDepthMap):
                pass_space_to_depth(ub, by_kind[("5hd", i)], t, tensors[src], tensors[dst])
            else:
                pass_to5hd(ub, by_kind[("5hd", i)], t, tensors[src], tensors[dst])
    if P.packw is not None and by_kind.get("pack"):
        pass_packw(ub, by_kind["pack"], P.packw, tensors["weight"], tensors["packed_weight"])
    if P.cast is not None and by_kind.get("cast"):
        c = P.cast
        pass_cast(ub, by_kind["cast"], c.src_dtype, c.dst_dtype, c.chunk, tensors["cast_src"], tensors["cast_dst"])
    gaps = [(k, it) for k, it in work if isinstance(k, tuple) and k[0] == "gap"]
    if gaps:
        ub.begin_pass()
        for kind, it in gaps:
            t, _, dst = P.maps[kind[1]]
            zero_gap(ub, it, t, tensors[dst])
