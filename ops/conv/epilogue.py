"""The epilogue launch (vector): gradInput's phase grids interleaved and transposed back to
NC[D]HW, and gradWeight's tiles (or FP32 accumulator) cast and reordered to the weight layout.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.kernel import (Cast, DataCopy, DataCopyExtParams, DataCopyPad, DataCopyParams, Duplicate,
                              GetBlockIdx, GlobalTensor)
from simulator.kernel.vector import Transpose, TransposeParamsExt
from simulator.arith import align_up, ceil_div
from ..common import tiling_error
from .geometry import CubeGeometry, SpaceToDepth
from .prologue import perm_plan, perm_result, run_perm
from .vector_pipeline import (NCHW2NHWC, VecBlock, align32, round_mode, zero_lanes, nhwc2nchw, slot_pass,
                              ring_pass)


def tchain(vb: VecBlock, seq, cur: int, target: int, other: int, dt) -> int:
    """Run transposes one after another, alternating between two buffers so that the last one
    lands in `target` (cur must be neither)."""
    for i, p in enumerate(seq):
        dst = target if (len(seq) - 1 - i) % 2 == 0 else other
        Transpose(vb.at(dst, dt), vb.at(cur, dt), None, p)
        cur = dst
    return cur


def repitch(vb: VecBlock, src: int, tmp: int, dst: int, rows: int, width: int, widthp: int, dt):
    """[rows][width] -> [rows][widthp] (rows padded to widthp, e.g. to start every row 32-B
    aligned for a strided store): transpose to [width][rows] inside a zeroed [widthp][rows],
    transpose back."""
    z, n = zero_lanes(vb.raw[tmp], align32(widthp * rows * dt.itemsize))
    Duplicate(z, 0.0, n)
    Transpose(vb.at(tmp, dt), vb.at(src, dt), None, nhwc2nchw(1, rows, 1, width))
    Transpose(vb.at(dst, dt), vb.at(tmp, dt), None, TransposeParamsExt(1, widthp, rows, 1, NCHW2NHWC))


@dataclass
class DxOut:
    geo: CubeGeometry
    odt: np.dtype
    C1o: int
    c1n: int              # C1 planes (of 16 channels) per item
    ni: int               # phase rows per item
    whole: bool           # an item is whole images (rows of every phase)
    Wqp: int              # output row pitch in UB (elements)
    mode: str             # "flat" (one contiguous store), "fast" (one strided store), "rows" (per channel)
    reg: int              # bytes per region
    nreg: int             # regions per slot: in, (work,) out
    slot: int


def plan_dx_out(geo: CubeGeometry, odt, ub: int) -> DxOut:
    odt = np.dtype(odt)
    osz = odt.itemsize
    Sh, Sw = geo.S[1], geo.S[2]
    Qh, Qw = geo.Qmax[1], geo.Qmax[2]
    Wq = Qw * Sw
    Xh, Xw = geo.X[1], geo.X[2]
    unit = 32 // osz
    C1o = ceil_div(geo.Cin, 16)
    for nreg in (2, 3):
        room = ub // 3 if nreg == 2 else ub // 2 // nreg       # nreg 2: the ring of three regions
        row_b = Sh * max(Sw * Qw, align_up(Wq, unit)) * 16 * osz        # one phase row, all phases, one C1
        if row_b > room:
            if nreg == 3:
                raise tiling_error(f"gradInput layout pass: one phase row ({row_b} B) does not fit in UB ({ub} B)")
            continue
        if Qh * row_b <= room:          # whole images, as many C1 planes as fit
            c1n = max(1, min(C1o, room // (Qh * row_b)))
            ni = Qh
            whole = True
            if Wq == Xw and Qh * Sh == Xh and geo.X[0] == 1:
                mode, Wqp = "flat", Wq
            elif Wq == Xw and Qh * Sh == Xh and Xh * Xw * osz % 32 == 0:
                mode, Wqp = "fast", Wq
            else:
                mode, Wqp = "rows", align_up(Wq, unit)
        else:
            c1n, whole = 1, False
            ni = max(1, room // row_b)
            mode = "rows"
            if Wq == Xw:
                for cand in range(ni, 0, -1):
                    if cand * Sh * Wq * osz % 32 == 0:
                        if cand * 2 >= ni:
                            ni, mode = cand, "fast"
                        break
            Wqp = Wq if mode == "fast" else align_up(Wq, unit)
        ntrans = 1 + (Sw > 1) + 2 * (Sh > 1)
        if nreg == 2 and (ntrans > 1 or mode == "rows"):
            continue
        break
    reg = align32(c1n * Sh * ni * max(Sw * Qw, Wqp) * 16 * osz)
    return DxOut(geo, odt, C1o, c1n, ni, whole, Wqp, mode, reg, nreg, reg if nreg == 2 else nreg * reg)


def dx_out_items(t: DxOut) -> list:
    geo = t.geo
    Qh = geo.Qmax[1]
    return [(g, c1, min(t.c1n, t.C1o - c1), n, xd, i0, min(t.ni, Qh - i0)) for n in range(geo.N)
            for g in range(geo.G) for c1 in range(0, t.C1o, t.c1n) for xd in range(geo.X[0])
            for i0 in range(0, Qh, t.ni)]


def pass_dx_out(vb: VecBlock, items, t: DxOut, sGm, dGm):
    geo, odt = t.geo, t.odt
    osz = odt.itemsize
    Sd, Sh, Sw = geo.S
    Qw = geo.Qmax[2]
    Wq = Qw * Sw
    lay = geo.dxg
    Xd, Xh, Xw = geo.X
    S = geo.nphase
    reg = t.reg
    blk = 16 * osz // 32                          # 32-B blocks per position (16 channels)

    def phase_of(xd, rh, rw):
        return ((xd % Sd) * Sh + rh) * Sw + rw, xd // Sd

    def prezero(b, it):
        g, c1, c1n, n, xd, i0, ni = it
        if ni == t.ni and all(geo.phases[phase_of(xd, rh, rw)[0]] is not None
                              for rh in range(Sh) for rw in range(Sw)):
            return False
        z, cnt = zero_lanes(vb.raw[b], reg)
        Duplicate(z, 0.0, cnt)
        return True

    inplane = Sh * Sw
    # every in-plane phase present and unshifted, rows whole: the (C1, phase) blocks of an item
    # are evenly strided in the workspace and one strided copy loads them all
    one_copy = (Sd == 1 and lay.Wd == Qw and all(f is not None and f.ax[1].sh == 0 and f.ax[2].sh == 0
                                                    for f in geo.phases))

    def load(b, it):
        g, c1, c1n, n, xd, i0, ni = it
        per_phase = t.ni * Qw                   # positions of one phase of one C1 plane in UB
        if one_copy:
            row0 = n * lay.pitch if lay.fold else 0
            plane = 0 if lay.fold else n * lay.D + xd
            src = ((g * t.C1o + c1) * S * lay.block + plane * lay.plane + (row0 + i0) * lay.Wd) * 16
            DataCopy(vb.at(b, odt), sGm[src], DataCopyParams(c1n * inplane, ni * Qw * blk, (lay.block - ni * Qw) * blk,
                                                             (per_phase - ni * Qw) * blk))
            return
        for rh in range(Sh):
            for rw in range(Sw):
                pi = rh * Sw + rw
                q, idd = phase_of(xd, rh, rw)
                f = geo.phases[q]
                if f is None:
                    continue
                row0 = n * lay.pitch if lay.fold else 0
                plane = 0 if lay.fold else n * lay.D + idd
                src = (((g * t.C1o + c1) * S + q) * lay.block + plane * lay.plane
                       + (row0 + f.ax[1].sh + i0) * lay.Wd + f.ax[2].sh) * 16
                dst = b + pi * per_phase * 16 * osz            # UB: [c1][phase][i][j][16]
                # UB holds the in-plane phases of each C1 plane (a depth phase is one item's xd),
                # the workspace all S phases
                if lay.Wd == Qw:
                    DataCopy(vb.at(dst, odt), sGm[src],
                             DataCopyParams(c1n, ni * Qw * blk, (S * lay.block - ni * Qw) * blk,
                                            (inplane * per_phase - ni * Qw) * blk))
                else:
                    for c in range(c1n):
                        DataCopy(vb.at(dst + c * inplane * per_phase * 16 * osz, odt),
                                 sGm[src + c * S * lay.block * 16],
                                 DataCopyParams(ni, Qw * blk, (lay.Wd - Qw) * blk, 0))

    def compute(b, it):
        g, c1, c1n, n, xd, i0, ni = it
        N16 = c1n * 16
        seq = [nhwc2nchw(c1n, Sh * Sw * t.ni * Qw, 1, 16)]                          # -> [c1][16][rh][rw][i][j]
        if Sw > 1:                                                                  # -> [c16][rh][i][j][rw]
            seq.append(TransposeParamsExt(N16 * Sh, Sw, t.ni * Qw, 1, NCHW2NHWC))
        if Sh > 1:                                                                  # -> [c16][i][rh][j rw]
            seq.append(TransposeParamsExt(N16, Sh, t.ni, Wq, NCHW2NHWC))
            seq.append(nhwc2nchw(N16 * t.ni, Wq, 1, Sh))
        r = [b, b + reg, b + (t.nreg - 1) * reg]
        if t.mode != "rows":
            tchain(vb, seq, r[0], r[2], r[1], odt)
        else:             # rows padded to Wqp: every row (and channel block) 32-B aligned
            tchain(vb, seq, r[0], r[1], r[2], odt)
            repitch(vb, r[1], r[0], r[2], N16 * t.ni * Sh, Wq, t.Wqp, odt)

    def store(b, it):
        g, c1, c1n, n, xd, i0, ni = it
        out = vb.at(b + (t.nreg - 1) * reg, odt)
        h0 = i0 * Sh
        nrows = min(ni * Sh, Xh - h0)
        if nrows <= 0:
            return
        nch = min(c1n * 16, geo.Cin - c1 * 16)
        chan = ((n * geo.G + g) * geo.Cin + c1 * 16) * Xd * Xh * Xw + (xd * Xh + h0) * Xw
        pitch = t.ni * Sh * t.Wqp
        if t.mode == "flat":
            DataCopyPad(dGm[chan], out, DataCopyExtParams(1, nch * Xh * Xw * osz, 0, 0))
        elif t.mode == "fast":
            DataCopyPad(dGm[chan], out, DataCopyExtParams(nch, nrows * Xw * osz, (pitch * osz - align32(nrows * Xw * osz)) // 32,
                                                          (Xd * Xh * Xw - nrows * Xw) * osz))
        else:
            for cc in range(nch):
                DataCopyPad(dGm[chan + cc * Xd * Xh * Xw], out[cc * pitch],
                            DataCopyExtParams(nrows, Xw * osz, (t.Wqp * osz - align32(Xw * osz)) // 32, 0))

    if t.nreg != 2:
        slot_pass(vb, t.slot, items, load, compute, store, prezero)
        return
    # one transpose (stride 1): the ring of three regions; store() reads b + reg = the out region

    def r_prezero(lb, ob, it, dry):
        g, c1, c1n, n, xd, i0, ni = it
        need = not (ni == t.ni and all(geo.phases[phase_of(xd, rh, rw)[0]] is not None
                                       for rh in range(Sh) for rw in range(Sw)))
        return need if dry else prezero(lb, it)

    def r_compute(lb, ob, it):
        g, c1, c1n, n, xd, i0, ni = it
        Transpose(vb.at(ob, odt), vb.at(lb, odt), None, nhwc2nchw(c1n, Sh * Sw * t.ni * Qw, 1, 16))

    ring_pass(vb, reg, items, lambda lb, ob, it: load(lb, it), r_compute,
          lambda lb, ob, it: store(ob - reg, it), r_prezero)


@dataclass
class DwOut:
    G: int
    Mg: int
    Cc: int               # real B-map channels per group
    C1: int
    c0: int
    KD: int
    Khw: int
    adt: np.dtype         # accumulator dtype
    odt: np.dtype
    mr: int
    rowp: int             # output row pitch in UB (elements)
    reg: int
    nreg: int
    slot: int


def plan_dw_out(G, Mg, Cc, c0, KD, Khw, adt, odt, ub: int) -> DwOut:
    adt, odt = np.dtype(adt), np.dtype(odt)
    C1 = ceil_div(Cc, c0)
    rowK = KD * C1 * Khw * c0
    rowp = rowK if (Cc == C1 * c0 or rowK * odt.itemsize % 32 == 0) else align_up(rowK, 32 // odt.itemsize)
    nreg = 1 if (adt == odt and KD == 1 and rowp == rowK) else 3
    per_row = rowK * adt.itemsize + nreg * max(rowK, rowp) * odt.itemsize + 96
    room = ub // 2
    if per_row > room:
        raise tiling_error(f"gradWeight layout pass: one row ({per_row} B) does not fit in UB ({ub} B)")
    mr = max(1, min(Mg, room // per_row))
    reg = align32(mr * max(rowK, rowp) * odt.itemsize)
    slot = align32(mr * rowK * adt.itemsize) + nreg * reg
    return DwOut(G, Mg, Cc, C1, c0, KD, Khw, adt, odt, mr, rowp, reg, nreg, slot)


def dw_out_items(t: DwOut) -> list:
    return [(g, m0, min(t.mr, t.Mg - m0)) for g in range(t.G) for m0 in range(0, t.Mg, t.mr)]


def pass_dw_out(vb: VecBlock, items, t: DwOut, sGm, dGm):
    c0, KD, Khw, C1 = t.c0, t.KD, t.Khw, t.C1
    rowK = KD * C1 * Khw * c0
    taps = KD * Khw
    asz, osz = t.adt.itemsize, t.odt.itemsize
    r0 = align32(t.mr * rowK * asz)

    def regs(b):
        if t.nreg == 1:
            return [None, None, b + r0]
        return [b + r0, b + r0 + t.reg, b + r0 + 2 * t.reg]

    def load(b, it):
        g, m0, mr = it
        n = mr * rowK
        src = sGm[(g * t.Mg + m0) * rowK]
        if n * asz % 32:
            DataCopyPad(vb.at(b, t.adt), src, DataCopyExtParams(1, n * asz, 0, 0))
        else:
            DataCopy(vb.at(b, t.adt), src, n)

    def compute(b, it):
        g, m0, mr = it
        r = regs(b)
        n = mr * rowK
        cur = b
        if t.adt != t.odt:
            Cast(vb.at(r[0], t.odt), vb.at(b, t.adt), round_mode(t.odt, t.adt), n)
            cur = r[0]
        seq = []
        if KD > 1:        # [m][kd][c1][hw c0] -> [m][c1][kd][hw c0]
            seq.append(TransposeParamsExt(mr, KD, C1, Khw * c0, NCHW2NHWC))
            seq.append(nhwc2nchw(mr * C1, Khw * c0, 1, KD))
        seq.append(nhwc2nchw(mr * C1, KD * Khw, 1, c0))      # -> [m][c1][c0][kd hw]
        if t.nreg == 1:
            Transpose(vb.at(r[2], t.odt), vb.at(cur, t.odt), None, seq[0])
        elif t.rowp == rowK:
            tchain(vb, seq, cur, r[2], r[1], t.odt)
        else:
            tchain(vb, seq, cur, r[1], r[2], t.odt)
            repitch(vb, r[1], r[0], r[2], mr, rowK, t.rowp, t.odt)

    def store(b, it):
        g, m0, mr = it
        out = vb.at(regs(b)[2], t.odt)
        dst = dGm[(g * t.Mg + m0) * t.Cc * taps]
        if t.Cc == C1 * c0:
            n = mr * t.Cc * taps
            if n * osz % 32:
                DataCopyPad(dst, out, DataCopyExtParams(1, n * osz, 0, 0))
            else:
                DataCopy(dst, out, n)
        else:
            DataCopyPad(dst, out, DataCopyExtParams(mr, t.Cc * taps * osz,
                                                    (t.rowp * osz - align32(t.Cc * taps * osz)) // 32, 0))

    slot_pass(vb, t.slot, items, load, compute, store)


@dataclass
class SpaceToDepthOut:
    """gradWeight of the folded convolution ([m][th][tw][ph][pw][c]) back to (m, C, KH, KW):
    permutes, with the taps outside the kernel and the padding channels cropped off as whole
    leading blocks."""
    sd: SpaceToDepth
    Mg: int
    adt: np.dtype
    odt: np.dtype
    mr: int
    slot: int


def plan_space_to_depth_out(sd: SpaceToDepth, Mg: int, adt, odt, ub: int) -> SpaceToDepthOut:
    adt, odt = np.dtype(adt), np.dtype(odt)
    row = sd.Kh * sd.Kw * 16
    per = row * (adt.itemsize + 2 * odt.itemsize)
    mr = max(16, min(Mg, (ub // 2) // per) // 16 * 16)
    slot = align32(mr * row * adt.itemsize) + 2 * align32(mr * row * odt.itemsize)
    return SpaceToDepthOut(sd, Mg, adt, odt, mr, slot)


def space_to_depth_out_items(t: SpaceToDepthOut) -> list:
    return [(m0, min(t.mr, t.Mg - m0)) for m0 in range(0, t.Mg, t.mr)]


def pass_space_to_depth_dw(vb: VecBlock, items, t: SpaceToDepthOut, sGm, dGm):
    sd = t.sd
    Th, Tw, cp, C = sd.Kh, sd.Kw, sd.cp, sd.Cin
    KH, KW = sd.K
    row = Th * Tw * 16
    asz, osz = t.adt.itemsize, t.odt.itemsize
    rA = align32(t.mr * row * asz)
    rB = rA + align32(t.mr * row * osz)
    cast = t.adt != t.odt

    def chain(b, mr, emit: bool):
        A, B = b + rA, b + rB
        cur = b
        if cast:
            if emit:
                Cast(vb.at(A, t.odt), vb.at(b, t.adt), round_mode(t.odt, t.adt), mr * row)
            cur = A
        other = lambda c: (B, A) if A <= c < B else (A, B)          # noqa: E731
        for dims, perm, crop in (((mr, Th, Tw, 2, 2, cp), (1, 3, 2, 4, 5, 0), -sd.dh * 2 * Tw * cp * mr),
                                 ((KH, 2 * Tw, cp, mr), (1, 0, 2, 3), -sd.dw * KH * cp * mr),
                                 ((KW, KH, cp, mr), (2, 3, 1, 0), 0),
                                 ((C, mr, KH, KW), (1, 0, 2, 3), 0)):
            steps = perm_plan(dims, perm)
            bufs = other(cur)
            cur = run_perm(vb, steps, cur, bufs, t.odt) if emit else perm_result(steps, cur, bufs)
            cur += crop * osz
        return cur

    def load(b, it):
        m0, mr = it
        DataCopy(vb.at(b, t.adt), sGm[m0 * row], mr * row)

    def compute(b, it):
        chain(b, it[1], True)

    def store(b, it):
        m0, mr = it
        res = chain(b, mr, False)
        n = mr * C * KH * KW
        DataCopyPad(dGm[m0 * C * KH * KW], vb.at(res, t.odt), DataCopyExtParams(1, n * osz, 0, 0))

    slot_pass(vb, t.slot, items, load, compute, store)


@dataclass
class Epilogue:
    ub: int
    dx: DxOut | None
    dw: "DwOut | SpaceToDepthOut | None"
    blocks: list


def epilogue_body(gms: tuple, E: Epilogue):
    work = E.blocks[GetBlockIdx()]
    vb = VecBlock(E.ub, 0)
    g = []
    for a in gms:
        t = None
        if a is not None:
            t = GlobalTensor(a.dtype)
            t.SetGlobalBuffer(a)
        g.append(t)
    dx = [it for k, it in work if k == "dx"]
    dw = [it for k, it in work if k == "dw"]
    if dx:
        pass_dx_out(vb, dx, E.dx, g[0], g[1])
    if dw:
        if isinstance(E.dw, SpaceToDepthOut):
            pass_space_to_depth_dw(vb, dw, E.dw, g[2], g[3])
        else:
            pass_dw_out(vb, dw, E.dw, g[2], g[3])
