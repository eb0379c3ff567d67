"""The epilogue launch (vector): gradInput's phase grids interleaved and transposed back to
NC[D]HW, and gradWeight's tiles (or FP32 accumulator) cast and reordered to the weight layout.
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

from simulator.kernel import (Cast, DataCopy, DataCopyExtParams, DataCopyPad, DataCopyParams, Duplicate,
                              GetBlockIdx, GlobalTensor, ScalarWork)
from simulator.kernel.vector import Transpose, TransposeParamsExt
from simulator.arith import align_up, ceil_div
from ..common import tik_core_split, tiling_error
from .geometry import CubeGeometry, SpaceToDepth
from .grad_weight_runs import DwAccumulator, DwTapRuns, pass_dw_tap_runs
from .tik_map_back import TikMapBack, pass_tik_map_back
from .vector_pipeline import (NCHW2NHWC, VecBlock, align32, round_mode, zero_lanes, nhwc2nchw, slot_pass,
                              ring_pass, perm_plan, perm_result, run_perm)


def tchain(ub: VecBlock, seq, cur: int, target: int, other: int, dt) -> int:
    """Run transposes one after another, alternating between two buffers so that the last one
    lands in `target` (cur must be neither)."""
    for i, p in enumerate(seq):
        dst = target if (len(seq) - 1 - i) % 2 == 0 else other
        Transpose(ub.at(dst, dt), ub.at(cur, dt), None, p)
        cur = dst
    return cur


def repitch(ub: VecBlock, src: int, tmp: int, dst: int, rows: int, width: int, widthp: int, dt):
    """[rows][width] -> [rows][widthp] (rows padded to widthp, e.g. to start every row 32-B
    aligned for a strided store): transpose to [width][rows] inside a zeroed [widthp][rows],
    transpose back."""
    z, n = zero_lanes(ub.raw[tmp], align32(widthp * rows * dt.itemsize))
    Duplicate(z, 0.0, n)
    Transpose(ub.at(tmp, dt), ub.at(src, dt), None, nhwc2nchw(1, rows, 1, width))
    Transpose(ub.at(dst, dt), ub.at(tmp, dt), None, TransposeParamsExt(1, widthp, rows, 1, NCHW2NHWC))


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
    wq: int = 0           # phase columns per item: Qmax[2], or fewer when one phase row is longer than UB takes
    nh: int = 0           # phase rows (rh) per item: all S[1] (0), or fewer when one column of them is too long

    def rows(self, it: "DxOutItem") -> int:
        """The in-plane phase rows the item holds."""
        Sh = self.geo.S[1]
        return Sh if not self.nh else min(self.nh, Sh - it.r0)


def plan_dx_out(geo: CubeGeometry, *, odt, ub_bytes: int) -> DxOut:
    odt = np.dtype(odt)
    osz = odt.itemsize
    Sh, Sw = geo.S[1], geo.S[2]
    Qh, Qw = geo.Qmax[1], geo.Qmax[2]
    Wq = Qw * Sw
    Xh, Xw = geo.X[1], geo.X[2]
    unit = 32 // osz
    C1o = ceil_div(geo.Cin, 16)
    for nreg in (2, 3):
        room = ub_bytes // 3 if nreg == 2 else ub_bytes // 2 // nreg       # nreg 2: the ring of three regions
        row_b = Sh * max(Sw * Qw, align_up(Wq, unit)) * 16 * osz        # one phase row, all phases, one C1
        if row_b > room:
            if nreg == 3:
                return _plan_dx_out_columns(geo, odt, room, ub_bytes)
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
    return DxOut(geo, odt, C1o, c1n, ni, whole, Wqp, mode, reg, nreg, reg if nreg == 2 else nreg * reg, Qw)


def _plan_dx_out_columns(geo: CubeGeometry, odt, room: int, ub_bytes: int) -> DxOut:
    """Phase rows longer than a UB region takes: an item is one phase row of one C1 plane, cut
    into runs of wq phase columns (each output row written as pieces); at strides where even one
    column of every in-plane phase is too long, an item also holds only nh of the phase rows."""
    osz, Sh, Sw = odt.itemsize, geo.S[1], geo.S[2]
    unit = 32 // osz
    step = unit // math.gcd(unit, Sw)       # phase columns whose Sw phases fill whole 32-B blocks

    def region(wq, nh=Sh):                  # UB rows padded to 32 B when a run's Sw x wq columns are not
        return align32(nh * align_up(Sw * wq, unit) * 16 * osz)
    wq, nh = room // (Sh * 16 * osz) // Sw // unit * unit, 0   # whole 32-B blocks of phase columns, where that fits
    if wq < unit:                           # large strides: fewer columns, their phases' rows still 32-B blocks
        wq = max(1, room // (Sh * 16 * osz) // Sw)
        while wq > 1 and region(wq) > room:
            wq -= 1
        if wq >= step:
            wq -= wq % step
        if region(wq) > room:               # one column of every phase row is too long: some rows an item
            nh = room // region(1, 1)
    if region(wq, nh or Sh) > room:
        raise tiling_error(f"gradInput layout pass: one phase column of one phase row ({region(1, 1)} B) "
                           f"does not fit in a UB region ({room} B of {ub_bytes} B)")
    reg = region(wq, nh or Sh)
    return DxOut(geo, odt, ceil_div(geo.Cin, 16), 1, 1, False, align_up(wq * Sw, unit), "rows", reg, 3, 3 * reg, wq,
                 nh)


class DxOutItem(NamedTuple):
    """c1n C1 planes (16 channels each) from c1 of image n, group g, output depth xd: phase rows
    [i0, i0 + ni)."""
    g: int
    c1: int
    c1n: int
    n: int
    xd: int
    i0: int
    ni: int
    w0: int = 0           # first phase column (DxOut.wq columns from it)
    r0: int = 0           # first in-plane phase row (DxOut.nh rows from it, or all)


def dx_out_items(t: DxOut) -> list[DxOutItem]:
    geo = t.geo
    Qh, Qw = geo.Qmax[1], geo.Qmax[2]
    return [DxOutItem(g, c1, min(t.c1n, t.C1o - c1), n, xd, i0, min(t.ni, Qh - i0), w0, r0) for n in range(geo.N)
            for g in range(geo.G) for c1 in range(0, t.C1o, t.c1n) for xd in range(geo.X[0])
            for i0 in range(0, Qh, t.ni) for r0 in range(0, geo.S[1], t.nh or geo.S[1]) for w0 in range(0, Qw, t.wq)]


def _phase_of(geo: CubeGeometry, xd: int, rh: int, rw: int) -> tuple[int, int]:
    """(phase, depth index in the phase grid) of output depth xd and in-plane phase (rh, rw)."""
    Sd, Sh, Sw = geo.S
    return ((xd % Sd) * Sh + rh) * Sw + rw, xd // Sd


def _dx_out_needs_prezero(t: DxOut, it: DxOutItem) -> bool:
    """A partial item, or a phase no tap reaches (never written by the Cube), must read as zeros."""
    geo, Sw = t.geo, t.geo.S[2]
    return not (it.ni == t.ni and it.w0 + t.wq <= geo.Qmax[2] and all(geo.phases[_phase_of(geo, it.xd, rh, rw)[0]] is not None
                                      for rh in range(it.r0, it.r0 + t.rows(it)) for rw in range(Sw)))


def _dx_out_prezero(ub: VecBlock, t: DxOut, b: int, it: DxOutItem) -> bool:
    if not _dx_out_needs_prezero(t, it):
        return False
    z, cnt = zero_lanes(ub.raw[b], t.reg)
    Duplicate(z, 0.0, cnt)
    return True


def _dx_out_one_copy(t: DxOut) -> bool:
    """Every in-plane phase present and unshifted, rows whole: the (C1, phase) blocks of an item
    are evenly strided in the workspace and one strided copy loads them all."""
    geo = t.geo
    return (geo.S[0] == 1 and geo.dxg.Wd == geo.Qmax[2] == t.wq and not t.nh
            and all(f is not None and f.ax[1].sh == 0 and f.ax[2].sh == 0 for f in geo.phases))


def _dx_out_load_one_copy(ub: VecBlock, t: DxOut, sGm, b: int, it: DxOutItem):
    geo, lay, odt = t.geo, t.geo.dxg, t.odt
    Qw, blk = geo.Qmax[2], 16 * odt.itemsize // 32
    per_phase = t.ni * Qw                   # positions of one phase of one C1 plane in UB
    row0 = it.n * lay.pitch if lay.fold else 0
    plane = 0 if lay.fold else it.n * lay.D + it.xd
    src = ((it.g * t.C1o + it.c1) * geo.nphase * lay.block + plane * lay.plane + (row0 + it.i0) * lay.Wd) * 16
    DataCopy(ub.at(b, odt), sGm[src], DataCopyParams(it.c1n * geo.S[1] * geo.S[2], it.ni * Qw * blk,
                                                     (lay.block - it.ni * Qw) * blk, (per_phase - it.ni * Qw) * blk))


def _dx_out_load_phase(ub: VecBlock, t: DxOut, sGm, b: int, it: DxOutItem, rh: int, rw: int):
    """One in-plane phase of the item into UB ([c1][phase][i][j][16]); UB holds the in-plane
    phases of each C1 plane (a depth phase is one item's xd), the workspace all S phases."""
    geo, lay, odt = t.geo, t.geo.dxg, t.odt
    Sw = geo.S[2]
    S, inplane, Qw = geo.nphase, t.rows(it) * Sw, t.wq
    osz = odt.itemsize
    blk = 16 * osz // 32                    # 32-B blocks per position (16 channels)
    per_phase = t.ni * Qw                   # positions of one phase of one C1 plane in UB
    q, idd = _phase_of(geo, it.xd, rh, rw)
    f = geo.phases[q]
    if f is None:
        return
    row0 = it.n * lay.pitch if lay.fold else 0
    plane = 0 if lay.fold else it.n * lay.D + idd
    src = (((it.g * t.C1o + it.c1) * S + q) * lay.block + plane * lay.plane
           + (row0 + f.ax[1].sh + it.i0) * lay.Wd + f.ax[2].sh + it.w0) * 16
    if Qw != geo.Qmax[2]:                   # a run of columns: those the grid holds past w0
        Qw = min(Qw, lay.Wd - f.ax[2].sh - it.w0)
        if Qw <= 0:
            return
    dst = b + ((rh - it.r0) * Sw + rw) * per_phase * 16 * osz
    if lay.Wd == Qw:
        DataCopy(ub.at(dst, odt), sGm[src],
                 DataCopyParams(it.c1n, it.ni * Qw * blk, (S * lay.block - it.ni * Qw) * blk,
                                (inplane * per_phase - it.ni * Qw) * blk))
    else:
        for c in range(it.c1n):
            DataCopy(ub.at(dst + c * inplane * per_phase * 16 * osz, odt), sGm[src + c * S * lay.block * 16],
                     DataCopyParams(it.ni, Qw * blk, (lay.Wd - Qw) * blk, 0))


def _dx_out_load(ub: VecBlock, t: DxOut, sGm, one_copy: bool, b: int, it: DxOutItem):
    if one_copy:
        _dx_out_load_one_copy(ub, t, sGm, b, it)
        return
    Sw = t.geo.S[2]
    for rh in range(it.r0, it.r0 + t.rows(it)):
        for rw in range(Sw):
            _dx_out_load_phase(ub, t, sGm, b, it, rh, rw)


def _dx_out_transposes(t: DxOut, c1n: int, Sh: int) -> list:
    """[c1][rh][rw][i][j][16] -> [c16][i][rh][j][rw]: channels out, then the phases interleaved
    (Sh: the item's phase rows)."""
    Sw = t.geo.S[2]
    Qw = t.wq
    Wq = Qw * Sw
    N16 = c1n * 16
    seq = [nhwc2nchw(c1n, Sh * Sw * t.ni * Qw, 1, 16)]                          # -> [c1][16][rh][rw][i][j]
    if Sw > 1:                                                                  # -> [c16][rh][i][j][rw]
        seq.append(TransposeParamsExt(N16 * Sh, Sw, t.ni * Qw, 1, NCHW2NHWC))
    if Sh > 1:                                                                  # -> [c16][i][rh][j rw]
        seq.append(TransposeParamsExt(N16, Sh, t.ni, Wq, NCHW2NHWC))
        seq.append(nhwc2nchw(N16 * t.ni, Wq, 1, Sh))
    return seq


def _dx_out_compute(ub: VecBlock, t: DxOut, b: int, it: DxOutItem):
    seq = _dx_out_transposes(t, it.c1n, t.rows(it))
    r = [b, b + t.reg, b + (t.nreg - 1) * t.reg]
    if t.mode != "rows":
        tchain(ub, seq, r[0], r[2], r[1], t.odt)
    else:             # rows padded to Wqp: every row (and channel block) 32-B aligned
        tchain(ub, seq, r[0], r[1], r[2], t.odt)
        Wq = t.wq * t.geo.S[2]
        repitch(ub, r[1], r[0], r[2], it.c1n * 16 * t.ni * t.rows(it), Wq, t.Wqp, t.odt)


def _dx_out_store(ub: VecBlock, t: DxOut, dGm, b: int, it: DxOutItem):
    """The item's rows of each channel to gradInput (NC[D]HW): one copy, one strided copy, or
    one strided copy per channel (t.mode)."""
    geo, osz = t.geo, t.odt.itemsize
    Sh, rows = geo.S[1], t.rows(it)
    Xd, Xh, Xw = geo.X
    out = ub.at(b + (t.nreg - 1) * t.reg, t.odt)
    h0 = it.i0 * Sh + it.r0                 # (an item of some phase rows holds one phase row: ni 1)
    nrows = min(it.ni * rows, Xh - h0)
    if nrows <= 0:
        return
    nch = min(it.c1n * 16, geo.Cin - it.c1 * 16)
    chan = ((it.n * geo.G + it.g) * geo.Cin + it.c1 * 16) * Xd * Xh * Xw + (it.xd * Xh + h0) * Xw
    pitch = t.ni * rows * t.Wqp
    if t.wq != geo.Qmax[2]:                 # a run of columns: each row a piece of its output row
        x0 = it.w0 * geo.S[2]
        ncols = min(t.wq * geo.S[2], Xw - x0)
        if ncols <= 0:
            return
        for cc in range(nch):
            DataCopyPad(dGm[chan + cc * Xd * Xh * Xw + x0], out[cc * pitch],
                        DataCopyExtParams(nrows, ncols * osz, (t.Wqp * osz - align32(ncols * osz)) // 32,
                                          (Xw - ncols) * osz))
        return
    if t.mode == "flat":
        DataCopyPad(dGm[chan], out, DataCopyExtParams(1, nch * Xh * Xw * osz, 0, 0))
    elif t.mode == "fast":
        DataCopyPad(dGm[chan], out, DataCopyExtParams(nch, nrows * Xw * osz, (pitch * osz - align32(nrows * Xw * osz)) // 32,
                                                      (Xd * Xh * Xw - nrows * Xw) * osz))
    else:
        for cc in range(nch):
            DataCopyPad(dGm[chan + cc * Xd * Xh * Xw], out[cc * pitch],
                        DataCopyExtParams(nrows, Xw * osz, (t.Wqp * osz - align32(Xw * osz)) // 32, 0))


def pass_dx_out(ub: VecBlock, items, t: DxOut, sGm, dGm):
    load = partial(_dx_out_load, ub, t, sGm, _dx_out_one_copy(t))
    if t.nreg != 2:
        slot_pass(ub, t.slot, items, load, partial(_dx_out_compute, ub, t), partial(_dx_out_store, ub, t, dGm),
                  partial(_dx_out_prezero, ub, t))
        return
    # one transpose (stride 1): the ring of three regions; the store reads ob = (its b) + reg

    def prezero(lb, ob, it, dry):
        return _dx_out_needs_prezero(t, it) if dry else _dx_out_prezero(ub, t, lb, it)

    def compute(lb, ob, it):
        Transpose(ub.at(ob, t.odt), ub.at(lb, t.odt), None, _dx_out_transposes(t, it.c1n, t.rows(it))[0])

    ring_pass(ub, t.reg, items, lambda lb, ob, it: load(lb, it), compute,
              lambda lb, ob, it: _dx_out_store(ub, t, dGm, ob - t.reg, it), prezero)


@dataclass
class DwOut(DwAccumulator):
    """gradWeight's accumulator rows ([g][m][kd][c1][kh kw][c0]) to the weight layout (m, Cin, kd,
    kh, kw), an item at a time: `mr` rows x `c1n` C1 planes. As CANN's TIK TransData
    (FRACTAL_Z(_3D) -> NC(D)HW, trans_data_negative_target_ntc) does it: 16 output channels a tile,
    as many C1 planes as its UB line holds, one tile in UB at a time, one loop axis split over the
    cores; a row too long for UB is cut into C1 chunks."""
    mr: int               # rows (output channels of gradWeight) per item
    c1n: int              # C1 planes per item
    rowp: int             # output row pitch in UB (elements)
    reg: int
    nreg: int
    slot: int
    slots: int = 1
    tile_scalar: float = 0.0

    @property
    def row_k(self) -> int:
        """Accumulator elements of one row of an item (its c1n planes, every tap)."""
        return self.KD * self.c1n * self.Khw * self.c0


# CANN's TIK kernel: 16 output channels (one cl unit) a tile, and as many C1 planes as fit 88
# columns of taps rounded to 8 (src_c_lp_unit: 2 planes of a 3x3x3 kernel's 27 taps, 11 of 1)
TIK_ROWS = 16
TIK_TAP_COLUMNS = 88


def _dw_out_fit(c1n, mr, KD, Khw, c0, adt, odt):
    """(row_k, rowp, regions, bytes per row in UB) of an item of mr rows x c1n C1 planes."""
    rowK = KD * c1n * Khw * c0
    rowp = rowK if rowK * odt.itemsize % 32 == 0 else align_up(rowK, 32 // odt.itemsize)
    nreg = 1 if (adt == odt and KD == 1 and rowp == rowK) else 3
    return rowK, rowp, nreg, rowK * adt.itemsize + nreg * max(rowK, rowp) * odt.itemsize


def plan_dw_out(*, G: int, Mg: int, Cc: int, c0: int, KD: int, Khw: int, adt, odt, ub_bytes: int,
                tile_scalar: float = 0.0) -> DwOut | None:
    """The pass's tiles; None when one row of one C1 plane does not fit in half the UB (the pass
    of runs of taps, grad_weight_runs.py, takes those)."""
    adt, odt = np.dtype(adt), np.dtype(odt)
    C1 = ceil_div(Cc, c0)
    room = ub_bytes // 2
    c1n = max(1, min(C1, TIK_TAP_COLUMNS // align_up(KD * Khw, 8)))
    while c1n > 1 and _dw_out_fit(c1n, 1, KD, Khw, c0, adt, odt)[3] + 96 > room:
        c1n = max(1, c1n // 2)
    rowK, rowp, nreg, per_row = _dw_out_fit(c1n, 1, KD, Khw, c0, adt, odt)
    per_row += 96
    if per_row > room:
        return None
    mr = max(1, min(Mg, TIK_ROWS, room // per_row))
    reg = align32(mr * max(rowK, rowp) * odt.itemsize)
    slot = align32(mr * rowK * adt.itemsize) + nreg * reg
    return DwOut(G, Mg, Cc, C1, c0, KD, Khw, adt, odt, mr, c1n, rowp, reg, nreg, slot, 1, tile_scalar)


class DwOutItem(NamedTuple):
    """Rows [m0, m0 + mr) (output channels of gradWeight) of group g, C1 planes [c1, c1 + c1n)."""
    g: int
    m0: int
    mr: int
    c1: int = 0
    c1n: int = 0


def dw_out_blocks(t: DwOut, cores: int) -> list[list[DwOutItem]]:
    """The items per block: TIK's split of one loop axis (row tiles, or C1 chunks) over the cores."""
    row_tiles = t.G * ceil_div(t.Mg, t.mr)
    chunks = ceil_div(t.C1, t.c1n)
    axis, per = tik_core_split((row_tiles, chunks), cores)
    loops = (row_tiles, chunks)
    blocks = []
    for lo in range(0, loops[axis], per):
        ranges = [range(row_tiles), range(chunks)]
        ranges[axis] = range(lo, min(lo + per, loops[axis]))
        items = []
        for rt in ranges[0]:
            g, m0 = divmod(rt, ceil_div(t.Mg, t.mr))
            m0 *= t.mr
            for ch in ranges[1]:
                c1 = ch * t.c1n
                items.append(DwOutItem(g, m0, min(t.mr, t.Mg - m0), c1, min(t.c1n, t.C1 - c1)))
        blocks.append(items)
    return blocks + [[] for _ in range(cores - len(blocks))]     # TIK launches every core; the rest exit


class DwRegions(NamedTuple):
    """A gradWeight layout slot's regions after the loaded rows (None: not used)."""
    cast: int | None      # the rows cast to gradWeight's dtype (also repitch's scratch)
    work: int | None      # the transposes' other buffer
    out: int              # the result, read by the store


def pass_dw_out(ub: VecBlock, items, t: DwOut, sGm, dGm):
    c0, KD, Khw, C1 = t.c0, t.KD, t.Khw, t.C1
    taps = KD * Khw
    asz, osz = t.adt.itemsize, t.odt.itemsize
    r0 = align32(t.mr * t.row_k * asz)
    acc_row = KD * C1 * Khw * c0            # one row of the accumulator in GM

    def regs(b) -> DwRegions:
        if t.nreg == 1:
            return DwRegions(None, None, b + r0)
        return DwRegions(b + r0, b + r0 + t.reg, b + r0 + 2 * t.reg)

    def shape(it):
        """(rows, C1 planes, elements of a row in UB, its pitch)."""
        rowK = KD * it.c1n * Khw * c0
        rowp = rowK if rowK * osz % 32 == 0 else align_up(rowK, 32 // osz)
        return it.mr, it.c1n, rowK, rowp

    def load(b, it):
        if t.tile_scalar:
            ScalarWork(t.tile_scalar)
        mr, c1n, rowK, _ = shape(it)
        src = sGm[(it.g * t.Mg + it.m0) * acc_row + it.c1 * Khw * c0]
        if c1n == C1:
            n = mr * rowK
            if n * asz % 32:
                DataCopyPad(ub.at(b, t.adt), src, DataCopyExtParams(1, n * asz, 0, 0))
            else:
                DataCopy(ub.at(b, t.adt), src, n)
        else:                      # per (row, kd): the chunk's c1n planes, C1 planes apart
            run = c1n * Khw * c0 * asz
            DataCopy(ub.at(b, t.adt), src, DataCopyParams(mr * KD, run // 32, (C1 - c1n) * Khw * c0 * asz // 32, 0))

    def compute(b, it):
        mr, c1n, rowK, rowp = shape(it)
        r = regs(b)
        n = mr * rowK
        cur = b
        if t.adt != t.odt:
            Cast(ub.at(r.cast, t.odt), ub.at(b, t.adt), round_mode(t.odt, t.adt), n)
            cur = r.cast
        seq = []
        if KD > 1:        # [m][kd][c1][hw c0] -> [m][c1][kd][hw c0]
            seq.append(TransposeParamsExt(mr, KD, c1n, Khw * c0, NCHW2NHWC))
            seq.append(nhwc2nchw(mr * c1n, Khw * c0, 1, KD))
        seq.append(nhwc2nchw(mr * c1n, KD * Khw, 1, c0))      # -> [m][c1][c0][kd hw]
        if t.nreg == 1:
            Transpose(ub.at(r.out, t.odt), ub.at(cur, t.odt), None, seq[0])
        elif rowp == rowK:
            tchain(ub, seq, cur, r.out, r.work, t.odt)
        else:
            tchain(ub, seq, cur, r.work, r.out, t.odt)
            repitch(ub, r.work, r.cast, r.out, mr, rowK, rowp, t.odt)

    def store(b, it):
        mr, c1n, rowK, rowp = shape(it)
        out = ub.at(regs(b).out, t.odt)
        nch = min(c1n * c0, t.Cc - it.c1 * c0)
        dst = dGm[((it.g * t.Mg + it.m0) * t.Cc + it.c1 * c0) * taps]
        if nch == t.Cc == c1n * c0:      # whole rows, no padding channels: one contiguous run
            n = mr * t.Cc * taps
            if n * osz % 32:
                DataCopyPad(dst, out, DataCopyExtParams(1, n * osz, 0, 0))
            else:
                DataCopy(dst, out, n)
        else:
            DataCopyPad(dst, out, DataCopyExtParams(mr, nch * taps * osz, (rowp * osz - align32(nch * taps * osz)) // 32,
                                                    (t.Cc - nch) * taps * osz))

    slot_pass(ub, t.slot, items, load, compute, store, slots=t.slots)


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


def plan_space_to_depth_out(sd: SpaceToDepth, *, Mg: int, adt, odt, ub_bytes: int) -> SpaceToDepthOut:
    adt, odt = np.dtype(adt), np.dtype(odt)
    row = sd.Kh * sd.Kw * 16
    per = row * (adt.itemsize + 2 * odt.itemsize)
    mr = max(16, min(Mg, (ub_bytes // 2) // per) // 16 * 16)
    slot = align32(mr * row * adt.itemsize) + 2 * align32(mr * row * odt.itemsize)
    return SpaceToDepthOut(sd, Mg, adt, odt, mr, slot)


def space_to_depth_out_items(t: SpaceToDepthOut) -> list[DwOutItem]:
    return [DwOutItem(0, m0, min(t.mr, t.Mg - m0)) for m0 in range(0, t.Mg, t.mr)]


def pass_space_to_depth_dw(ub: VecBlock, items, t: SpaceToDepthOut, sGm, dGm):
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
                Cast(ub.at(A, t.odt), ub.at(b, t.adt), round_mode(t.odt, t.adt), mr * row)
            cur = A
        other = lambda c: (B, A) if A <= c < B else (A, B)          # noqa: E731
        for dims, perm, crop in (((mr, Th, Tw, 2, 2, cp), (1, 3, 2, 4, 5, 0), -sd.dh * 2 * Tw * cp * mr),
                                 ((KH, 2 * Tw, cp, mr), (1, 0, 2, 3), -sd.dw * KH * cp * mr),
                                 ((KW, KH, cp, mr), (2, 3, 1, 0), 0),
                                 ((C, mr, KH, KW), (1, 0, 2, 3), 0)):
            steps = perm_plan(dims, perm)
            bufs = other(cur)
            cur = run_perm(ub, steps, cur, bufs, t.odt) if emit else perm_result(steps, cur, bufs)
            cur += crop * osz
        return cur

    def load(b, it):
        DataCopy(ub.at(b, t.adt), sGm[it.m0 * row], it.mr * row)

    def compute(b, it):
        chain(b, it.mr, True)

    def store(b, it):
        res = chain(b, it.mr, False)
        n = it.mr * C * KH * KW
        DataCopyPad(dGm[it.m0 * C * KH * KW], ub.at(res, t.odt), DataCopyExtParams(1, n * osz, 0, 0))

    slot_pass(ub, t.slot, items, load, compute, store)


class EpilogueTensors(NamedTuple):
    """The GM tensors the launches after the Cube read and write (None where a call has none)."""
    dx_phases: object = None
    grad_input: object = None
    dw_acc: object = None
    grad_weight: object = None


@dataclass
class Epilogue:
    ub: int
    dx: DxOut | TikMapBack | None
    dw: "DwOut | DwTapRuns | SpaceToDepthOut | TikMapBack | None"
    blocks: list


def epilogue_body(gms: EpilogueTensors, E: Epilogue):
    work = E.blocks[GetBlockIdx()]
    ub = VecBlock(E.ub, 0)
    g = {}
    for name, a in gms._asdict().items():
        if a is not None:
            g[name] = GlobalTensor(a.dtype)
            g[name].SetGlobalBuffer(a)
    dx = [it for k, it in work if k == "dx"]
    dw = [it for k, it in work if k == "dw"]
    if dx and isinstance(E.dx, TikMapBack):
        pass_tik_map_back(ub, dx, E.dx, g["dx_phases"], g["grad_input"])
    elif dx:
        pass_dx_out(ub, dx, E.dx, g["dx_phases"], g["grad_input"])
    if dw:
        if isinstance(E.dw, TikMapBack):
            pass_tik_map_back(ub, dw, E.dw, g["dw_acc"], g["grad_weight"])
        elif isinstance(E.dw, SpaceToDepthOut):
            pass_space_to_depth_dw(ub, dw, E.dw, g["dw_acc"], g["grad_weight"])
        elif isinstance(E.dw, DwTapRuns):
            pass_dw_tap_runs(ub, dw, E.dw, g["dw_acc"], g["grad_weight"])
        else:
            pass_dw_out(ub, dw, E.dw, g["dw_acc"], g["grad_weight"])
