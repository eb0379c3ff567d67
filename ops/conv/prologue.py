"""The prologue launch (vector, all AIVs): gradOutput and input to tall NC1HWC0 maps (cast,
channels padded to C0, zero gap rows between stacked images), the space-to-depth input map, the
weight packed into gradInput's right operand (W'), the FP32 gradWeight accumulator zeroed and
the ND->NZ operand cast.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simulator.kernel import (Cast, DataCopy, DataCopyExtParams, DataCopyPad, DataCopyParams, Duplicate,
                              GetBlockIdx, GlobalTensor)
from simulator.kernel.vector import Transpose, TransposeParamsExt
from simulator.arith import align_up, ceil_div
from ..common import tiling_error
from .geometry import CubeGeometry, MapLayout, SpaceToDepth
from .vector_pipeline import (NCHW2NHWC, VecBlock, align32, round_mode, zero_lanes, copy_runs, nhwc2nchw,
                              slot_pass, ring_pass)


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
    sdt: np.dtype
    cd: np.dtype
    c1n: int              # C1 planes per item
    L: int                # positions per item (P when whole images fit)
    slot: int             # bytes per slot (slot_pass) or per ring region (ring_pass)
    ring: bool = False


def plan_to5hd(name, N, G, Cg, c0, P, lay: MapLayout, sdt, cd, ub: int) -> To5HDPass:
    C1 = ceil_div(Cg, c0)
    isz_s, isz = sdt.itemsize, cd.itemsize
    if sdt == cd:          # no cast: one transpose per item, on the ring of three regions
        room = ub // 3
        plane = align32(c0 * P * isz)
        if plane <= room:
            c1n = max(1, min(C1, room // plane))
            return To5HDPass(name, N, G, Cg, C1, c0, P, lay, sdt, cd, c1n, P, align32(c1n * c0 * P * isz), True)
        unit = 32 // isz
        L = max(unit, (room // (c0 * isz)) // unit * unit)
        return To5HDPass(name, N, G, Cg, C1, c0, P, lay, sdt, cd, 1, L, align32(c0 * L * isz), True)
    per_pos = c0 * (isz_s + (isz if sdt != cd else 0) + isz)      # in + cast + out, one C1 plane

    def slot_of(c1n, Lp):
        return align32(c1n * c0 * Lp * isz_s) + (align32(c1n * c0 * Lp * isz) if sdt != cd else 0) + align32(c1n * c0 * Lp * isz)
    room = ub // 2
    if slot_of(1, P) <= room:
        c1n = max(1, min(C1, room // max(slot_of(1, P), 1)))
        while c1n > 1 and slot_of(c1n, P) > room:
            c1n -= 1
        return To5HDPass(name, N, G, Cg, C1, c0, P, lay, sdt, cd, c1n, P, slot_of(c1n, P))
    unit = 32 // min(isz_s, isz)
    L = max(unit, (room // per_pos) // unit * unit)
    return To5HDPass(name, N, G, Cg, C1, c0, P, lay, sdt, cd, 1, L, slot_of(1, L))


def to5hd_items(t: To5HDPass) -> list:
    items = []
    for n in range(t.N):
        for g in range(t.G):
            for c1a in range(0, t.C1, t.c1n):
                for p0 in range(0, t.P, t.L):
                    items.append((n, g, c1a, min(t.c1n, t.C1 - c1a), p0, min(t.L, t.P - p0)))
    return items


def pass_to5hd(vb: VecBlock, items, t: To5HDPass, sGm, dGm):
    isz_s, isz, c0 = t.sdt.itemsize, t.cd.itemsize, t.c0
    cast = t.sdt != t.cd
    unit = 32 // isz_s

    def geom(it):
        n, g, c1a, c1n, p0, L = it
        whole = L == t.P
        Lp = L if whole else align_up(L, unit)
        nch = min(c1n * c0, t.Cg - c1a * c0)
        return whole, Lp, nch

    # every item of the pass places its regions as the largest does: the next load into a slot
    # waits for this item's compute, not its store, so it must not land where the store reads
    most = max((it[3] * c0 * geom(it)[1] for it in items), default=0)

    def regions(b, c1n, Lp):
        cap = c1n * c0 * Lp
        r_in = b
        r_cast = r_in + align32(most * isz_s)
        r_out = r_cast + (align32(most * isz) if cast else 0)
        return cap, r_in, r_cast, r_out

    def prezero(b, it):
        whole, Lp, nch = geom(it)
        c1n, L = it[3], it[5]
        if nch == c1n * c0 and (whole or (Lp == L and L * isz_s % 32 == 0)):
            return False
        cap = c1n * c0 * Lp
        z, cnt = zero_lanes(vb.raw[b], align32(cap * isz_s))
        Duplicate(z, 0.0, cnt)
        return True

    def load(b, it):
        n, g, c1a, c1n, p0, L = it
        whole, Lp, nch = geom(it)
        src = sGm[((n * t.G + g) * t.Cg + c1a * c0) * t.P + p0]
        dst = vb.at(b, t.sdt)
        if whole:
            DataCopyPad(dst, src, DataCopyExtParams(1, nch * t.P * isz_s, 0, 0))
        else:
            DataCopyPad(dst, src, DataCopyExtParams(nch, L * isz_s, (t.P - L) * isz_s,
                                                    (Lp * isz_s - align32(L * isz_s)) // 32))

    def compute(b, it):
        c1n = it[3]
        whole, Lp, nch = geom(it)
        cap, r_in, r_cast, r_out = regions(b, c1n, Lp)
        src = vb.at(r_in, t.sdt)
        if cast:
            Cast(vb.at(r_cast, t.cd), src, round_mode(t.cd, t.sdt), cap)
            src = vb.at(r_cast, t.cd)
        Transpose(vb.at(r_out, t.cd), src, None, TransposeParamsExt(c1n, c0, Lp, 1, NCHW2NHWC))

    def store(b, it):
        n, g, c1a, c1n, p0, L = it
        whole, Lp, nch = geom(it)
        cap, r_in, r_cast, r_out = regions(b, c1n, Lp)
        off = ((g * t.C1 + c1a) * t.lay.block + t.lay.img(n) + p0) * c0
        DataCopy(dGm[off], vb.at(r_out, t.cd), DataCopyParams(c1n, L * c0 * isz // 32, (Lp - L) * c0 * isz // 32,
                                                              (t.lay.block - L) * c0 * isz // 32))

    if not t.ring:
        slot_pass(vb, t.slot, items, load, compute, store, prezero)
        return

    def r_prezero(lb, ob, it, dry):
        if dry:
            whole, Lp, nch = geom(it)
            return not (nch == it[3] * c0 and (whole or (Lp == it[5] and it[5] * isz_s % 32 == 0)))
        return prezero(lb, it)

    def r_compute(lb, ob, it):
        whole, Lp, nch = geom(it)
        Transpose(vb.at(ob, t.cd), vb.at(lb, t.sdt), None, TransposeParamsExt(it[3], c0, Lp, 1, NCHW2NHWC))

    def r_store(lb, ob, it):
        n, g, c1a, c1n, p0, L = it
        whole, Lp, nch = geom(it)
        off = ((g * t.C1 + c1a) * t.lay.block + t.lay.img(n) + p0) * c0
        DataCopy(dGm[off], vb.at(ob, t.cd), DataCopyParams(c1n, L * c0 * isz // 32, (Lp - L) * c0 * isz // 32,
                                                           (t.lay.block - L) * c0 * isz // 32))

    ring_pass(vb, t.slot, items, lambda lb, ob, it: load(lb, it), r_compute, r_store, r_prezero)


def gap_items(t: To5HDPass, zero_bytes: int) -> list:
    """Zero the gap rows between stacked images: per (g, c1), the gaps of as many images as the
    zero region covers in one strided copy (or one gap in pieces when it is larger)."""
    lay = t.lay
    if not lay.fold or lay.pitch == lay.H:
        return []
    esz = t.c0 * t.cd.itemsize
    gapP = (lay.pitch - lay.H) * lay.Wd
    per = zero_bytes // (gapP * esz)
    if per >= 1:
        return [(g, c1, n0, min(per, lay.N - n0), 0, gapP) for g in range(t.G) for c1 in range(t.C1)
                for n0 in range(0, lay.N, per)]
    step = zero_bytes // esz
    return [(g, c1, n, p, min(step, gapP - p)) and (g, c1, n, 1, p, min(step, gapP - p))
            for g in range(t.G) for c1 in range(t.C1) for n in range(lay.N) for p in range(0, gapP, step)]


def zero_gap(vb: VecBlock, it, t: To5HDPass, dGm):
    g, c1, n0, nn, p, ln = it
    lay, c0, isz = t.lay, t.c0, t.cd.itemsize
    off = ((g * t.C1 + c1) * lay.block + lay.img(n0) + lay.H * lay.Wd + p) * c0
    DataCopy(dGm[off], vb.zeros().ReinterpretCast(t.cd),
             DataCopyParams(nn, ln * c0 * isz // 32, 0, (lay.pitch * lay.Wd - ln) * c0 * isz // 32))


def perm_plan(dims, perm) -> list:
    """Transposes that permute the axes of a contiguous tensor (dims) into the order perm: each
    axis is moved into place from the last position back, one NCHW2NHWC when nothing trails the
    moved block, two (a rotation and its partial undo) otherwise."""
    cur, shape, steps = list(range(len(dims))), list(dims), []
    for pos in range(len(dims) - 1, -1, -1):
        i = cur.index(perm[pos])
        if i == pos:
            continue
        outer, A = int(np.prod(shape[:i])), shape[i]
        B, inner = int(np.prod(shape[i + 1:pos + 1])), int(np.prod(shape[pos + 1:]))
        if inner == 1:
            steps.append(TransposeParamsExt(outer, A, B, 1, NCHW2NHWC))
        else:
            steps.append(TransposeParamsExt(outer, A, B, inner, NCHW2NHWC))    # [o][A][B][in] -> [o][B][in][A]
            steps.append(nhwc2nchw(outer * B, inner, 1, A))                    # -> [o][B][A][in]
        cur.insert(pos, cur.pop(i))
        shape.insert(pos, shape.pop(i))
    return steps


def run_perm(vb: VecBlock, steps, src: int, bufs: tuple, dt) -> int:
    """Run perm_plan's transposes from src, writing bufs[0], bufs[1], bufs[0], ... (src must not
    lie in bufs[0]; it may lie in bufs[1], read before that is overwritten); returns where the
    result is."""
    cur = src
    for i, p in enumerate(steps):
        dst = bufs[i % 2]
        Transpose(vb.at(dst, dt), vb.at(cur, dt), None, p)
        cur = dst
    return cur


def perm_result(steps, src: int, bufs: tuple) -> int:
    return bufs[(len(steps) - 1) % 2] if steps else src


@dataclass
class SpaceToDepthMap:
    name: str
    N: int
    sd: SpaceToDepth
    X: tuple              # original (H, W)
    lay: MapLayout
    sdt: np.dtype
    cd: np.dtype
    ni: int               # x' rows per item
    slot: int
    G: int = 1
    C1: int = 1
    c0: int = 16


def plan_space_to_depth_map(N, sd: SpaceToDepth, X, lay: MapLayout, sdt, cd, ub: int) -> SpaceToDepthMap:
    sdt, cd = np.dtype(sdt), np.dtype(cd)
    per_row = sd.cp * 2 * 2 * sd.Xw                  # elements of one x' row (in and out alike)
    room = ub // 2
    per_b = align32(per_row * sdt.itemsize) + 2 * align32(per_row * cd.itemsize)
    ni = max(1, min(sd.Xh, room // per_b))
    slot = align32(ni * per_row * sdt.itemsize) + 2 * align32(ni * per_row * cd.itemsize)
    return SpaceToDepthMap("input", N, sd, tuple(X), lay, sdt, cd, ni, slot)


def space_to_depth_items(t: SpaceToDepthMap) -> list:
    return [(n, i0, min(t.ni, t.sd.Xh - i0)) for n in range(t.N) for i0 in range(0, t.sd.Xh, t.ni)]


def pass_space_to_depth(vb: VecBlock, items, t: SpaceToDepthMap, sGm, dGm):
    sd, ni = t.sd, t.ni
    isz_s, isz = t.sdt.itemsize, t.cd.itemsize
    Xh, Xw = t.X
    Wx2 = 2 * sd.Xw
    n_in = sd.cp * 2 * ni * Wx2
    r_a = align32(n_in * isz_s)
    r_b = r_a + align32(n_in * isz)
    cast = t.sdt != t.cd
    # [c][i][ph][j][pw] -> [i][j][ph][pw][c]: 16 lanes = (ph, pw, c)
    steps = perm_plan((sd.cp, ni, 2, sd.Xw, 2), (1, 3, 2, 4, 0))

    def prezero(b, it):
        z, cnt = zero_lanes(vb.raw[b], align32(n_in * isz_s))
        Duplicate(z, 0.0, cnt)
        return True

    def load(b, it):
        n, i0, nr = it
        h0 = 2 * i0 - sd.eh
        lo, hi = max(h0, 0), min(h0 + 2 * ni, Xh)
        if hi > lo:
            DataCopyPad(vb.at(b + (lo - h0) * Wx2 * isz_s, t.sdt), sGm[n * sd.Cin * Xh * Xw + lo * Xw],
                        DataCopyExtParams(sd.Cin, (hi - lo) * Xw * isz_s, (Xh * Xw - (hi - lo) * Xw) * isz_s,
                                          (2 * ni * Wx2 * isz_s - align32((hi - lo) * Xw * isz_s)) // 32))

    def compute(b, it):
        src = b
        if cast:
            Cast(vb.at(b + r_a, t.cd), vb.at(b, t.sdt), round_mode(t.cd, t.sdt), n_in)
            src = b + r_a
        run_perm(vb, steps, src, (b + r_a, b + r_b) if not cast else (b + r_b, b + r_a), t.cd)

    def store(b, it):
        n, i0, nr = it
        res = perm_result(steps, b + r_a if cast else b, (b + r_a, b + r_b) if not cast else (b + r_b, b + r_a))
        DataCopy(dGm[(t.lay.img(n) + i0 * sd.Xw) * 16], vb.at(res, t.cd), nr * sd.Xw * 16)

    slot_pass(vb, t.slot, items, load, compute, store, prezero)


@dataclass
class PackWeight:
    """Weight -> WP: per phase q, [g][n-tile j][kd tap][co1][hw tap][n16_j][c0]: for each L1
    stage (a run of co1) and n-tile one contiguous block, and inside it the L0B zN fractals of
    B = W'^T (rows: (co1, kh, kw) of the phase's taps, flipped; columns: input channels)."""
    G: int
    Cout: int             # per group (K side channels)
    Cin: int              # per group (N side)
    KD: int
    KH: int
    KW: int
    c0: int
    transposed: bool
    sdt: np.dtype
    cd: np.dtype
    ntiles: list          # (n0, width)
    phases: list          # per phase q: (base, kd taps, hw taps (orig kh, kw) in img2col order) or None
    size: int             # elements
    slot: int = 0
    chunk: int = 0
    held_max: int = 0     # elements of the largest chunk as loaded: fixes every region of a slot
    items: list = field(default_factory=list)

    @property
    def C1(self) -> int:
        return ceil_div(self.Cout, self.c0)

    def padded(self, n: int) -> bool:
        """A chunk of n input channels whose rows (n x taps elements of one output channel) are
        not whole 32-B blocks: DataCopyPad lands each row 32-B aligned in UB, so the rows are
        closed up (two transposes) before the packing's own."""
        return not self.transposed and n != self.Cin and n * self.KD * self.KH * self.KW * self.sdt.itemsize % 32 != 0

    def held(self, n: int) -> int:
        """Elements of a chunk of n channels as loaded (rows padded to 32 B if they must be)."""
        taps, isz_s = self.KD * self.KH * self.KW, self.sdt.itemsize
        return self.c0 * align_up(n * taps * isz_s, 32) // isz_s if self.padded(n) else self.c0 * n * taps

    def regs(self, b: int, n: int) -> tuple[int, int, int, int, int]:
        """(elements packed, elements as loaded, cast, first transpose and output offsets) of a
        chunk of n channels in the slot at b (non-transposed weights). The offsets are those of
        the largest chunk for every chunk: the next load into this slot (which waits for this
        chunk's compute, not its store) must not land where this chunk's store still reads."""
        taps, isz_s, isz = self.KD * self.KH * self.KW, self.sdt.itemsize, self.cd.itemsize
        most = self.held_max
        r_cast = b + align_up(most * isz_s, 32)
        r_t1 = r_cast + (align_up(most * isz, 32) if self.sdt != self.cd else 0)
        return self.c0 * n * taps, self.held(n), r_cast, r_t1, r_t1 + align_up(most * isz, 32)

    def slot_bytes(self) -> int:
        """The slot the largest chunk needs (32-B aligned, so the second slot is too)."""
        r_out = self.regs(0, self.chunk)[4]
        return align_up(r_out + self.c0 * self.chunk * self.KD * self.KH * self.KW * self.cd.itemsize, 32)

    @property
    def n16(self) -> list:
        return [align_up(w, 16) for _, w in self.ntiles]

    @property
    def n16tot(self) -> int:
        return sum(self.n16)

    def off(self, g, q, kdt, co1, j, t) -> int:
        base, kds, hws = self.phases[q]
        Thw = len(hws)
        n16 = self.n16
        # [g][n-tile j][kd][co1][hw tap][n16_j][c0]: a stage's run of co1 is one contiguous block
        KDq = len(kds)
        return base + (g * KDq * self.C1 * Thw * self.n16tot + KDq * self.C1 * Thw * sum(n16[:j])
                       + ((kdt * self.C1 + co1) * Thw + t) * n16[j]) * self.c0


def plan_packw(geo: CubeGeometry, w_dtype, cd, c0, ntiles, ub: int) -> PackWeight:
    KD, KH, KW = geo.k
    phases, base = [], 0
    C1 = ceil_div(geo.Cout, c0)
    n16tot = sum(align_up(w, 16) for _, w in ntiles)
    for f in geo.phases:
        if f is None:
            phases.append(None)
            continue
        hws = [(kh, kw) for kh in f.ax[1].taps for kw in f.ax[2].taps]
        phases.append((base, f.ax[0].taps, hws))
        base += geo.G * f.ax[0].K * C1 * len(hws) * n16tot * c0
    t = PackWeight(geo.G, geo.Cout, geo.Cin, KD, KH, KW, c0, geo.transposed, np.dtype(w_dtype), cd, ntiles,
              phases, max(base, 1))
    taps = KD * KH * KW
    isz_s, isz = t.sdt.itemsize, cd.itemsize
    room = ub // 2
    # input channels per item: every item stays inside one n-tile
    if not geo.transposed:
        per_ci = c0 * taps * (isz_s + isz * (3 if t.sdt != cd else 2)) + 96
    else:
        per_ci = taps * (geo.Cout * (isz_s + (isz if t.sdt != cd else 0)) + 2 * C1 * c0 * isz) + 96
    nci = room // per_ci
    if 16 <= nci < geo.Cin and not geo.transposed:
        nci = nci // 16 * 16          # whole 32-B rows in UB for the strided load, where 16 fit
    while True:
        if nci < 1:
            raise tiling_error(f"weight packing: one input channel ({per_ci} B) does not fit in UB ({ub} B)")
        chunks = []
        for j, (n0, nw) in enumerate(ntiles):
            for ci0 in range(n0, n0 + nw, nci):
                chunks.append((j, ci0, min(nci, n0 + nw - ci0)))
        t.chunk = max(c[2] for c in chunks)
        t.held_max = max(t.held(n) for _, _, n in chunks)
        # (a chunk whose width is not a multiple of 16 may have rows padded to 32 B in UB)
        t.slot = align_up(max(t.chunk * per_ci, t.slot_bytes() if not geo.transposed else 0), 32)
        if 2 * t.slot <= ub:
            break
        nci = nci - 16 if nci > 16 else nci - 1
    if not geo.transposed:
        t.items = [(g, co1, j, ci0, n) for g in range(geo.G) for co1 in range(C1) for (j, ci0, n) in chunks]
    else:
        t.items = [(g, j, ci0, n) for g in range(geo.G) for (j, ci0, n) in chunks]
    return t


def pass_packw(vb: VecBlock, items, t: PackWeight, sGm, dGm):
    c0, isz_s, isz = t.c0, t.sdt.itemsize, t.cd.itemsize
    taps = t.KD * t.KH * t.KW
    cast = t.sdt != t.cd
    if not t.transposed:
        def prezero(b, it):
            g, co1, j, ci0, n = it
            if min(c0, t.Cout - co1 * c0) == c0 and not t.padded(n):
                return False
            z, cnt = zero_lanes(vb.raw[b], align32(t.held(n) * isz_s))
            Duplicate(z, 0.0, cnt)
            return True

        def load(b, it):
            g, co1, j, ci0, n = it
            nco = min(c0, t.Cout - co1 * c0)
            src = sGm[((g * t.Cout + co1 * c0) * t.Cin + ci0) * taps]
            if n == t.Cin:
                DataCopyPad(vb.at(b, t.sdt), src, DataCopyExtParams(1, nco * t.Cin * taps * isz_s, 0, 0))
            else:
                row = n * taps * isz_s          # (rows land 32-B aligned: padded when row % 32)
                DataCopyPad(vb.at(b, t.sdt), src, DataCopyExtParams(nco, row, (t.Cin - n) * taps * isz_s, 0))

        def compute(b, it):
            g, co1, j, ci0, n = it
            cap, held, r_cast, r_t1, r_out = t.regs(b, n)
            src = vb.at(b, t.sdt)
            if cast:
                Cast(vb.at(r_cast, t.cd), src, round_mode(t.cd, t.sdt), held)
                src = vb.at(r_cast, t.cd)
            if held != cap:
                # [co][row padded to 32 B] -> [padded row][co]; its first n x taps rows -> [co][ci][tap]
                width = held // c0
                Transpose(vb.at(r_t1, t.cd), src, None, nhwc2nchw(1, c0, 1, width))
                Transpose(vb.at(r_out, t.cd), vb.at(r_t1, t.cd), None,
                             TransposeParamsExt(1, n * taps, c0, 1, NCHW2NHWC))
                src = vb.at(r_out, t.cd)
            # [co][ci][tap] -> [tap][co][ci] -> [tap][ci][co]
            Transpose(vb.at(r_t1, t.cd), src, None, nhwc2nchw(1, c0 * n, 1, taps))
            Transpose(vb.at(r_out, t.cd), vb.at(r_t1, t.cd), None, TransposeParamsExt(taps, c0, n, 1, NCHW2NHWC))

        def store(b, it):
            g, co1, j, ci0, n = it
            out = vb.at(t.regs(b, n)[4], t.cd)
            n0 = t.ntiles[j][0]
            runs = []
            for q, ph in enumerate(t.phases):
                if ph is None:
                    continue
                _, kds, hws = ph
                for kdt, kd in enumerate(kds):
                    for ti, (kh, kw) in enumerate(hws):
                        tap = (kd * t.KH + kh) * t.KW + kw
                        runs.append((t.off(g, q, kdt, co1, j, ti) + (ci0 - n0) * c0, tap * n * c0, n * c0))
            copy_runs(dGm, out, runs, isz)

        slot_pass(vb, t.slot, items, load, compute, store, prezero)
        return
    # transposed: rows are input channels; [ci][co][tap] -> [co][tap][ci] -> [co1][tap][ci][c0]
    C1 = t.C1

    def lay_of(n):
        cap_in = n * t.Cout * taps
        cap = n * C1 * c0 * taps
        r_cast = align32(cap_in * isz_s)
        r_t1 = r_cast + (align32(cap_in * isz) if cast else 0)
        r_out = r_t1 + align32(cap * isz)
        return cap_in, cap, r_cast, r_t1, r_out

    def load(b, it):
        g, j, ci0, n = it
        cap_in = lay_of(n)[0]
        DataCopyPad(vb.at(b, t.sdt), sGm[(g * t.Cin + ci0) * t.Cout * taps], DataCopyExtParams(1, cap_in * isz_s, 0, 0))

    def compute(b, it):
        g, j, ci0, n = it
        cap_in, cap, r_cast, r_t1, r_out = lay_of(n)
        src = vb.at(b, t.sdt)
        if cast:
            Cast(vb.at(b + r_cast, t.cd), src, round_mode(t.cd, t.sdt), cap_in)
            src = vb.at(b + r_cast, t.cd)
        if t.Cout % c0:
            z, cnt = zero_lanes(vb.raw[b + r_t1], align32(cap * isz))
            Duplicate(z, 0.0, cnt)
        Transpose(vb.at(b + r_t1, t.cd), src, None, TransposeParamsExt(1, n, t.Cout * taps, 1, NCHW2NHWC))
        Transpose(vb.at(b + r_out, t.cd), vb.at(b + r_t1, t.cd), None,
                     TransposeParamsExt(C1, c0, taps * n, 1, NCHW2NHWC))

    def store(b, it):
        g, j, ci0, n = it
        out = vb.at(b + lay_of(n)[4], t.cd)
        n0 = t.ntiles[j][0]
        _, kds, hws = t.phases[0]
        runs = []
        for co1 in range(C1):
            for kdt, kd in enumerate(kds):
                for ti, (kh, kw) in enumerate(hws):
                    tap = (kd * t.KH + kh) * t.KW + kw
                    runs.append((t.off(g, 0, kdt, co1, j, ti) + (ci0 - n0) * c0, ((co1 * taps + tap) * n) * c0, n * c0))
        copy_runs(dGm, out, runs, isz)

    slot_pass(vb, t.slot, items, load, compute, store)


def zero_items(nbytes: int, zero_bytes: int) -> list:
    return [(o, min(zero_bytes, nbytes - o)) for o in range(0, nbytes, zero_bytes)]


def zero_fill(vb: VecBlock, it, dGm8):
    off, n = it
    z = vb.zeros()
    if n % 32:
        DataCopyPad(dGm8[off], z, DataCopyExtParams(1, n, 0, 0))
    else:
        DataCopy(dGm8[off], z, n)


def cast_items(n: int, chunk: int) -> list:
    return [(o, min(chunk, n - o)) for o in range(0, n, chunk)]


def pass_cast(vb: VecBlock, items, sdt, ddt, chunk, sGm, dGm):
    def prezero(b, it):
        if it[1] % 8 == 0:
            return False
        z, n = zero_lanes(vb.raw[b], align32(chunk * sdt.itemsize))
        Duplicate(z, 0.0, n)
        return True

    def load(b, it):
        DataCopyPad(vb.at(b, sdt), sGm[it[0]], DataCopyExtParams(1, it[1] * sdt.itemsize, 0, 0))

    def compute(b, it):
        Cast(vb.at(b + align32(chunk * sdt.itemsize), ddt), vb.at(b, sdt), round_mode(ddt, sdt), align_up(it[1], 8))

    def store(b, it):
        DataCopyPad(dGm[it[0]], vb.at(b + align32(chunk * sdt.itemsize), ddt),
                    DataCopyExtParams(1, it[1] * ddt.itemsize, 0, 0))

    slot_pass(vb, align32(chunk * sdt.itemsize) + align32(chunk * ddt.itemsize), items, load, compute, store, prezero)


@dataclass
class Prologue:
    ub: int
    zero_bytes: int
    maps: list            # (To5HDPass, src GM index, dst GM index)
    packw: PackWeight | None
    acc_zero: int         # bytes of the accumulator to zero (0: none)
    cast: tuple | None    # (n, sdt, ddt, chunk)
    blocks: list          # per block: [(kind, item)]


def prologue_body(gms: tuple, P: Prologue):
    work = P.blocks[GetBlockIdx()]
    vb = VecBlock(P.ub, P.zero_bytes)
    g = []
    for a in gms:
        t = GlobalTensor(a.dtype) if a is not None else None
        if t is not None:
            t.SetGlobalBuffer(a)
        g.append(t)
    by = {}
    for kind, it in work:
        by.setdefault(kind, []).append(it)
    for i, (t, si, di) in enumerate(P.maps):
        if by.get(("5hd", i)):
            if isinstance(t, SpaceToDepthMap):
                pass_space_to_depth(vb, by[("5hd", i)], t, g[si], g[di])
            else:
                pass_to5hd(vb, by[("5hd", i)], t, g[si], g[di])
    if P.packw is not None and by.get("pack"):
        pass_packw(vb, by["pack"], P.packw, g[2], g[3])
    if P.cast is not None and by.get("cast"):
        n, sdt, ddt, chunk = P.cast
        pass_cast(vb, by["cast"], sdt, ddt, chunk, g[6], g[7])
    zeros = [(k, it) for k, it in work if k in ("acc0",) or (isinstance(k, tuple) and k[0] == "gap")]
    if zeros:
        vb.begin_pass()
        acc8 = None
        if g[5] is not None:
            acc8 = GlobalTensor(np.uint8)
            acc8.SetGlobalBuffer(gms[5].cast(np.uint8))
        for kind, it in zeros:
            if kind == "acc0":
                zero_fill(vb, it, acc8)
            else:
                t, si, di = P.maps[kind[1]]
                zero_gap(vb, it, t, g[di])
