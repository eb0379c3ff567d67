"""The weight packed into gradInput's right operand (W'): the prologue's pass that turns the
NCHW (or transposed) weight into the Cube's FRACTAL_Z layout, a UB slot per item.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np

from simulator.kernel import Cast, DataCopyExtParams, DataCopyPad, Duplicate
from simulator.kernel.vector import Transpose, TransposeParamsExt
from simulator.arith import align_up, ceil_div
from ..common import tiling_error
from .geometry import CubeGeometry
from .vector_pipeline import NCHW2NHWC, VecBlock, align32, copy_runs, nhwc2nchw, round_mode, slot_pass, zero_lanes


class PackItem(NamedTuple):
    """nci input channels from ci0 (inside n-tile ntile) of group g: of output-channel plane co1
    (non-transposed weights), or of planes [co1, co1 + PackWeight.co1n) (transposed weights); taps
    [t0, t0 + nt) of each (every tap, unless one channel's taps do not fit in a UB slot)."""
    g: int
    co1: int
    ntile: int
    ci0: int
    nci: int
    t0: int = 0
    nt: int = 0


class PackRegions(NamedTuple):
    """A packing chunk's place in its slot: its sizes (elements) and region offsets (bytes)."""
    packed: int           # elements packed
    held: int             # elements as loaded
    cast: int             # the loaded chunk cast to the compute dtype
    scratch: int          # the first transpose's output
    out: int              # the packed chunk, read by the store


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
    src_dtype: np.dtype   # the weight's dtype in GM
    compute_dtype: np.dtype
    ntiles: list          # (n0, width)
    phases: list          # per phase q: (base, kd taps, hw taps (orig kh, kw) in img2col order) or None
    size: int             # elements
    slot: int = 0
    chunk: int = 0
    held_max: int = 0     # elements of the largest chunk as loaded: fixes every region of a slot
    co1n: int = 0         # transposed weights: output-channel planes per item (all of them where UB allows)
    tap_chunk: int = 0    # taps an item packs: all of them, or fewer when one channel's do not fit in a slot
    items: list = field(default_factory=list)

    @property
    def C1(self) -> int:
        return ceil_div(self.Cout, self.c0)

    @property
    def taps(self) -> int:
        return self.KD * self.KH * self.KW

    def padded(self, n: int, nt: int) -> bool:
        """A chunk of n input channels, nt taps each, whose rows (n x nt elements of one output
        channel) are not whole 32-B blocks and not one run: DataCopyPad lands each row 32-B aligned
        in UB, so the rows are closed up (two transposes) before the packing's own."""
        whole = n == self.Cin and nt == self.taps
        return not self.transposed and not whole and n * nt * self.src_dtype.itemsize % 32 != 0

    def held(self, n: int, nt: int) -> int:
        """Elements of a chunk of n channels, nt taps each, as loaded (rows padded to 32 B if they
        must be)."""
        isz_s = self.src_dtype.itemsize
        return self.c0 * align_up(n * nt * isz_s, 32) // isz_s if self.padded(n, nt) else self.c0 * n * nt

    def regions(self, b: int, n: int, nt: int) -> PackRegions:
        """A chunk of n channels, nt taps each, in the slot at b (non-transposed weights). The
        offsets are those of the largest chunk for every chunk: the next load into this slot
        (which waits for this chunk's compute, not its store) must not land where this chunk's
        store still reads."""
        isz_s, isz = self.src_dtype.itemsize, self.compute_dtype.itemsize
        most = self.held_max
        cast = b + align_up(most * isz_s, 32)
        scratch = cast + (align_up(most * isz, 32) if self.src_dtype != self.compute_dtype else 0)
        return PackRegions(self.c0 * n * nt, self.held(n, nt), cast, scratch, scratch + align_up(most * isz, 32))

    def co_span(self, co1: int) -> tuple[int, int]:
        """Transposed weights: (planes, output channels) of the item from plane co1."""
        planes = min(self.co1n, self.C1 - co1)
        return planes, min(planes * self.c0, self.Cout - co1 * self.c0)

    @property
    def run_pitch(self) -> int:
        """Transposed weights: elements an output channel's taps take in UB: all of them, or an
        item's run of them, each output channel's run landed 32-B aligned."""
        if not self.tap_chunk or self.tap_chunk >= self.taps:
            return self.taps
        return align_up(self.tap_chunk, 32 // self.src_dtype.itemsize)

    def row_pitch(self, nco: int) -> int:
        """Transposed weights: elements a ci row of nco output channels takes in UB (DataCopyPad
        lands each row 32-B aligned; a run of taps, each output channel's)."""
        if self.run_pitch != self.taps:
            return nco * self.run_pitch
        return nco * self.taps if nco == self.Cout else align_up(nco * self.taps, 32 // self.src_dtype.itemsize)

    def transposed_regions(self, b: int, n: int) -> PackRegions:
        """A chunk of n channels in the slot at b (transposed weights: co1n C1 planes at once; the
        regions placed as the largest item's)."""
        isz_s, isz = self.src_dtype.itemsize, self.compute_dtype.itemsize
        planes, nco = self.co_span(0)
        held = n * self.row_pitch(nco)
        packed = n * planes * self.c0 * self.run_pitch
        cast = b + align32(held * isz_s)
        scratch = cast + (align32(held * isz) if self.src_dtype != self.compute_dtype else 0)
        return PackRegions(packed, held, cast, scratch, scratch + align32(packed * isz))

    def slot_bytes(self) -> int:
        """The slot the largest chunk needs (32-B aligned, so the second slot is too)."""
        out = self.regions(0, self.chunk, self.tap_chunk).out
        return align_up(out + self.c0 * self.chunk * self.tap_chunk * self.compute_dtype.itemsize, 32)

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

    def tile_col(self, it: PackItem) -> int:
        """The chunk's first column inside its n-tile, in elements of a c0 row."""
        n0, _ = self.ntiles[it.ntile]
        return (it.ci0 - n0) * self.c0


def plan_packw(geo: CubeGeometry, *, w_dtype, compute_dtype, c0: int, ntiles: int, ub_bytes: int) -> PackWeight:
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
    t = PackWeight(geo.G, geo.Cout, geo.Cin, KD, KH, KW, c0, geo.transposed, np.dtype(w_dtype), compute_dtype,
                   ntiles, phases, max(base, 1))
    taps = t.taps
    isz_s, isz = t.src_dtype.itemsize, compute_dtype.itemsize
    cast = t.src_dtype != compute_dtype
    room = ub_bytes // 2

    def transposed_per_ci(planes, k=taps):
        return (align_up(min(planes * c0, geo.Cout) * k, 16) * (isz_s + (isz if cast else 0))
                + 2 * planes * c0 * k * isz + 96)

    def run_bytes(nt):          # an item of one input channel's run of nt taps
        if geo.transposed:
            return transposed_per_ci(1, align_up(nt, 32 // isz_s))
        return c0 * nt * (isz_s + isz * (3 if cast else 2)) + 96
    # input channels per item: every item stays inside one n-tile
    t.tap_chunk = taps
    if not geo.transposed:
        per_ci = run_bytes(taps)
    else:                # every output-channel plane at once, or as many as one channel's rows fit in UB
        t.co1n = C1
        while t.co1n > 1 and transposed_per_ci(t.co1n) > room:
            t.co1n = ceil_div(t.co1n, 2)
        per_ci = transposed_per_ci(t.co1n)
    nci = room // per_ci
    if 16 <= nci < geo.Cin and not geo.transposed:
        nci = nci // 16 * 16          # whole 32-B rows in UB for the strided load, where 16 fit
    while True:
        if nci < 1:             # one channel's taps do not fit: an item packs a run of them
            if t.tap_chunk == 1:
                raise tiling_error(f"weight packing: one tap of one input channel ({run_bytes(1)} B) does not "
                                   f"fit in UB ({ub_bytes} B)")
            nt = t.tap_chunk - 1
            while nt > 1 and run_bytes(nt) > room:
                nt -= max(nt // 16, 1)
            nci, t.co1n, t.tap_chunk = 1, 1, nt // 16 * 16 if nt >= 16 else nt    # (whole 32-B rows where 16 fit)
        chunks = []             # (n-tile, first channel, channels)
        for j, (n0, nw) in enumerate(ntiles):
            for ci0 in range(n0, n0 + nw, nci):
                chunks.append((j, ci0, min(nci, n0 + nw - ci0)))
        taps_runs = [(t0, min(t.tap_chunk, taps - t0)) for t0 in range(0, taps, t.tap_chunk)]
        t.chunk = max(n for _, _, n in chunks)
        t.held_max = max(t.held(n, nt) for _, _, n in chunks for _, nt in taps_runs)
        # (a chunk whose width is not a multiple of 16 may have rows padded to 32 B in UB)
        need = t.chunk * per_ci if t.tap_chunk == taps else run_bytes(t.tap_chunk)
        t.slot = align_up(max(need, t.slot_bytes() if not geo.transposed else 0), 32)
        if 2 * t.slot <= ub_bytes:
            break
        nci = 0 if t.tap_chunk < taps else nci - 16 if nci > 16 else nci - 1
    step = 1 if not geo.transposed else t.co1n
    t.items = [PackItem(g, co1, j, ci0, n, t0, nt) for g in range(geo.G) for co1 in range(0, C1, step)
               for (j, ci0, n) in chunks for (t0, nt) in taps_runs]
    return t


def _pack_prezero(ub: VecBlock, t: PackWeight, b: int, it: PackItem) -> bool:
    """A partial last co1 plane, or rows padded to 32 B, must read as zeros."""
    c0 = t.c0
    if min(c0, t.Cout - it.co1 * c0) == c0 and not t.padded(it.nci, it.nt):
        return False
    z, cnt = zero_lanes(ub.raw[b], align32(t.held(it.nci, it.nt) * t.src_dtype.itemsize))
    Duplicate(z, 0.0, cnt)
    return True


def _pack_load(ub: VecBlock, t: PackWeight, sGm, b: int, it: PackItem):
    """[co][ci][tap] rows of one co1 plane, nci channels (taps [t0, t0 + nt) of one) each."""
    c0, taps, isz_s, n, nt = t.c0, t.taps, t.src_dtype.itemsize, it.nci, it.nt
    nco = min(c0, t.Cout - it.co1 * c0)
    src = sGm[((it.g * t.Cout + it.co1 * c0) * t.Cin + it.ci0) * taps + it.t0]
    if n == t.Cin and nt == taps:
        DataCopyPad(ub.at(b, t.src_dtype), src, DataCopyExtParams(1, nco * t.Cin * taps * isz_s, 0, 0))
    else:
        row = n * nt * isz_s            # (rows land 32-B aligned: padded when row % 32)
        DataCopyPad(ub.at(b, t.src_dtype), src, DataCopyExtParams(nco, row, t.Cin * taps * isz_s - row, 0))


def _pack_compute(ub: VecBlock, t: PackWeight, b: int, it: PackItem):
    c0, taps, n, dt = t.c0, it.nt, it.nci, t.compute_dtype
    r = t.regions(b, n, taps)
    src = ub.at(b, t.src_dtype)
    if t.src_dtype != dt:
        Cast(ub.at(r.cast, dt), src, round_mode(dt, t.src_dtype), r.held)
        src = ub.at(r.cast, dt)
    if r.held != r.packed:
        # [co][row padded to 32 B] -> [padded row][co]; its first n x taps rows -> [co][ci][tap]
        width = r.held // c0
        Transpose(ub.at(r.scratch, dt), src, None, nhwc2nchw(1, c0, 1, width))
        Transpose(ub.at(r.out, dt), ub.at(r.scratch, dt), None, TransposeParamsExt(1, n * taps, c0, 1, NCHW2NHWC))
        src = ub.at(r.out, dt)
    # [co][ci][tap] -> [tap][co][ci] -> [tap][ci][co]
    Transpose(ub.at(r.scratch, dt), src, None, nhwc2nchw(1, c0 * n, 1, taps))
    Transpose(ub.at(r.out, dt), ub.at(r.scratch, dt), None, TransposeParamsExt(taps, c0, n, 1, NCHW2NHWC))


def _pack_store(ub: VecBlock, t: PackWeight, dGm, b: int, it: PackItem):
    """Each tap's [ci][co] block to its place in every phase that uses the tap."""
    n, c0 = it.nci, t.c0
    runs = []
    for q, ph in enumerate(t.phases):
        if ph is None:
            continue
        _, kds, hws = ph
        for kdt, kd in enumerate(kds):
            for ti, (kh, kw) in enumerate(hws):
                tap = (kd * t.KH + kh) * t.KW + kw - it.t0
                if 0 <= tap < it.nt:
                    runs.append((t.off(it.g, q, kdt, it.co1, it.ntile, ti) + t.tile_col(it), tap * n * c0, n * c0))
    copy_runs(dGm, ub.at(t.regions(b, n, it.nt).out, t.compute_dtype), runs, t.compute_dtype.itemsize)


def _pack_transposed_load(ub: VecBlock, t: PackWeight, sGm, b: int, it: PackItem):
    """[ci][co][tap]: nci rows of the item's output channels (every one's taps), or one channel's
    rows of a run of taps, each output channel's 32-B aligned."""
    _, nco = t.co_span(it.co1)
    isz_s = t.src_dtype.itemsize
    src = sGm[((it.g * t.Cin + it.ci0) * t.Cout + it.co1 * t.c0) * t.taps + it.t0]
    if t.run_pitch != t.taps:
        gap = t.run_pitch * isz_s - align32(it.nt * isz_s)
        DataCopyPad(ub.at(b, t.src_dtype), src, DataCopyExtParams(nco, it.nt * isz_s, (t.taps - it.nt) * isz_s, gap // 32))
    elif nco == t.Cout:
        DataCopyPad(ub.at(b, t.src_dtype), src, DataCopyExtParams(1, it.nci * nco * t.taps * isz_s, 0, 0))
    else:                  # (the planes' rows packed back to back: nco x taps is whole 32-B blocks)
        DataCopyPad(ub.at(b, t.src_dtype), src,
                    DataCopyExtParams(it.nci, nco * t.taps * isz_s, (t.Cout - nco) * t.taps * isz_s, 0))


def _pack_transposed_compute(ub: VecBlock, t: PackWeight, b: int, it: PackItem):
    """[ci][co][tap] -> [co][tap][ci] -> [co1][tap][ci][c0] (channels past the planes' zeroed first)."""
    c0, taps, n, dt = t.c0, t.run_pitch, it.nci, t.compute_dtype
    planes, nco = t.co_span(it.co1)
    r = t.transposed_regions(b, n)
    src = ub.at(b, t.src_dtype)
    pitch = t.row_pitch(nco)
    held = n * pitch
    if t.src_dtype != dt:
        Cast(ub.at(r.cast, dt), src, round_mode(dt, t.src_dtype), held)
        src = ub.at(r.cast, dt)
    if nco < planes * c0:
        z, cnt = zero_lanes(ub.raw[r.scratch], align32(n * planes * c0 * taps * dt.itemsize))
        Duplicate(z, 0.0, cnt)
    # (a padded row's tail, zeroed before the load, lands in rows of channels past nco: zeros)
    Transpose(ub.at(r.scratch, dt), src, None, TransposeParamsExt(1, n, pitch, 1, NCHW2NHWC))
    Transpose(ub.at(r.out, dt), ub.at(r.scratch, dt), None, TransposeParamsExt(planes, c0, taps * n, 1, NCHW2NHWC))


def _pack_transposed_prezero(ub: VecBlock, t: PackWeight, b: int, it: PackItem) -> bool:
    """Rows padded to 32 B in UB must read as zeros."""
    _, nco = t.co_span(it.co1)
    pitch = t.row_pitch(nco)
    if pitch == nco * it.nt:
        return False
    z, cnt = zero_lanes(ub.raw[b], align32(it.nci * pitch * t.src_dtype.itemsize))
    Duplicate(z, 0.0, cnt)
    return True


def _pack_transposed_store(ub: VecBlock, t: PackWeight, dGm, b: int, it: PackItem):
    n, c0, taps = it.nci, t.c0, t.run_pitch
    _, kds, hws = t.phases[0]
    planes, _ = t.co_span(it.co1)
    runs = []
    for p in range(planes):
        co1 = it.co1 + p
        for kdt, kd in enumerate(kds):
            for ti, (kh, kw) in enumerate(hws):
                tap = (kd * t.KH + kh) * t.KW + kw - it.t0
                if 0 <= tap < it.nt:
                    runs.append((t.off(it.g, 0, kdt, co1, it.ntile, ti) + t.tile_col(it),
                                 ((p * taps + tap) * n) * c0, n * c0))
    copy_runs(dGm, ub.at(t.transposed_regions(b, n).out, t.compute_dtype), runs, t.compute_dtype.itemsize)


def pass_packw(ub: VecBlock, items, t: PackWeight, sGm, dGm):
    if t.transposed:
        slot_pass(ub, t.slot, items, partial(_pack_transposed_load, ub, t, sGm), partial(_pack_transposed_compute, ub, t),
                  partial(_pack_transposed_store, ub, t, dGm), partial(_pack_transposed_prezero, ub, t))
    else:
        slot_pass(ub, t.slot, items, partial(_pack_load, ub, t, sGm), partial(_pack_compute, ub, t),
                  partial(_pack_store, ub, t, dGm), partial(_pack_prezero, ub, t))
