"""gradWeight's accumulator ([g][m][kd][c1][kh kw][c0]) to the weight layout when one row of one
C1 plane (every tap of c0 input channels) is longer than half the UB: kernels of a few thousand
taps (51 x 51, 11 x 11 x 11). An item takes a run of one kd plane's kh x kw taps for a few rows, as
a TransData cuts a line too long for its UB; the layout pass of docs/CONVOLUTION.md otherwise."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from simulator.kernel import Cast, DataCopy, DataCopyExtParams, DataCopyPad, DataCopyParams, Duplicate, ScalarWork
from simulator.kernel.vector import Transpose
from simulator.arith import align_up
from ..common import tiling_error
from .vector_pipeline import VecBlock, align32, nhwc2nchw, round_mode, slot_pass, zero_lanes

RUN_ROWS = 16             # output channels an item takes at most (the layout pass's tile of 16)
MAX_BLOCK_GAP = 65535     # DataCopyParams' srcStride field: 32-B blocks between rows


@dataclass
class DwAccumulator:
    """gradWeight's FP32 accumulator in GM, [g][m][kd][c1][kh kw][c0], as its layout passes read it."""
    G: int
    Mg: int
    Cc: int               # real B-map channels per group
    C1: int
    c0: int
    KD: int
    Khw: int
    adt: np.dtype         # accumulator dtype
    odt: np.dtype         # gradWeight's dtype


@dataclass
class DwTapRuns(DwAccumulator):
    """Rows of `mr` output channels, one C1 plane, one kd plane, `run` kh x kw taps an item; in UB
    each tap run is `pitch` taps (whole 32-B rows of every output layout)."""
    mr: int
    run: int
    pitch: int
    slot: int
    tile_scalar: float = 0.0

    def regions(self, b: int) -> tuple[int, int, int]:
        """(loaded run, its cast, the transposed result) of the slot at b."""
        n = self.mr * self.pitch * self.c0
        cast = b + align32(n * self.adt.itemsize)
        out = cast + (align32(n * self.odt.itemsize) if self.adt != self.odt else 0)
        return b, cast, out


class DwRunItem(NamedTuple):
    """Rows [m0, m0 + mr) of group g, C1 plane c1, kd plane kd, kh x kw taps [h0, h0 + nh)."""
    g: int
    m0: int
    mr: int
    c1: int
    kd: int
    h0: int
    nh: int


def plan_dw_tap_runs(*, G: int, Mg: int, Cc: int, C1: int, c0: int, KD: int, Khw: int, adt, odt, ub_bytes: int,
                     tile_scalar: float = 0.0) -> DwTapRuns:
    adt, odt = np.dtype(adt), np.dtype(odt)
    room = ub_bytes // 2
    per_tap = c0 * (adt.itemsize + odt.itemsize * (2 if adt != odt else 1))
    cap = (room - 96) // per_tap             # taps of one row a slot holds
    run = Khw if align_up(Khw, 16) <= cap else cap // 16 * 16
    if run < 1:
        raise tiling_error(f"gradWeight layout pass: 16 taps of one C1 plane ({16 * per_tap} B) do not fit in "
                           f"half the UB ({room} B)")
    pitch = align_up(run, 16)
    mr = max(1, min(Mg, RUN_ROWS, (room - 96) // (pitch * per_tap)))
    t = DwTapRuns(G, Mg, Cc, C1, c0, KD, Khw, adt, odt, mr, run, pitch, 0, tile_scalar)
    t.slot = align32(t.regions(0)[2] + mr * c0 * pitch * odt.itemsize)
    return t


def dw_run_items(t: DwTapRuns) -> list[DwRunItem]:
    return [DwRunItem(g, m0, min(t.mr, t.Mg - m0), c1, kd, h0, min(t.run, t.Khw - h0))
            for g in range(t.G) for m0 in range(0, t.Mg, t.mr) for c1 in range(t.C1)
            for kd in range(t.KD) for h0 in range(0, t.Khw, t.run)]


def pass_dw_tap_runs(ub: VecBlock, items, t: DwTapRuns, sGm, dGm):
    c0, asz, osz = t.c0, t.adt.itemsize, t.odt.itemsize
    acc_row = t.KD * t.C1 * t.Khw * c0          # one row of the accumulator in GM
    taps = t.KD * t.Khw

    def prezero(b, it):
        """A short last run: the taps past it in UB are transposed too, and must be numbers."""
        if it.nh == t.pitch:
            return False
        z, cnt = zero_lanes(ub.raw[b], align32(it.mr * t.pitch * c0 * asz))
        Duplicate(z, 0.0, cnt)
        return True

    def load(b, it):
        if t.tile_scalar:
            ScalarWork(t.tile_scalar)
        src = (it.g * t.Mg + it.m0) * acc_row + ((it.kd * t.C1 + it.c1) * t.Khw + it.h0) * c0
        run, gap = it.nh * c0 * asz // 32, (acc_row - it.nh * c0) * asz // 32
        dst_gap = (t.pitch - it.nh) * c0 * asz // 32
        if it.mr == 1 or gap <= MAX_BLOCK_GAP:
            DataCopy(ub.at(b, t.adt), sGm[src], DataCopyParams(it.mr, run, gap, dst_gap))
            return
        for i in range(it.mr):
            DataCopy(ub.at(b + i * t.pitch * c0 * asz, t.adt), sGm[src + i * acc_row], DataCopyParams(1, run, 0, 0))

    def compute(b, it):
        loaded, cast, out = t.regions(b)
        cur = loaded
        if t.adt != t.odt:
            Cast(ub.at(cast, t.odt), ub.at(loaded, t.adt), round_mode(t.odt, t.adt), it.mr * t.pitch * c0)
            cur = cast
        Transpose(ub.at(out, t.odt), ub.at(cur, t.odt), None, nhwc2nchw(it.mr, t.pitch, 1, c0))  # -> [m][c0][taps]

    def store(b, it):
        out = t.regions(b)[2]
        nch = min(c0, t.Cc - it.c1 * c0)
        for i in range(it.mr):
            dst = dGm[((it.g * t.Mg + it.m0 + i) * t.Cc + it.c1 * c0) * taps + it.kd * t.Khw + it.h0]
            DataCopyPad(dst, ub.at(out + i * c0 * t.pitch * osz, t.odt),
                        DataCopyExtParams(nch, it.nh * osz, (t.pitch * osz - align32(it.nh * osz)) // 32,
                                          (taps - it.nh) * osz))

    slot_pass(ub, t.slot, items, load, compute, store, prezero)
