"""A 3D map, or a 3D gradWeight, back to NCDHW as CANN's TIK TransData does it (NDC1HWC0 or
FRACTAL_Z_3D -> NCDHW, `trans_data_negative_target_ntc`): its tiling's mode, loop units and core
split (`TilingNegativeNtc200` and `GetMcInfoNegative200` in the canndev tiling), and its kernel's
moves, one of ours for each of its `data_move`s, `vnchwconv`s and `data_move_pad`s.

The tiling sees the map as rows (N, "C-left") x C1 planes x positions (D x HW, "C-right") and
picks a mode by the positions of a row:
* 2001, many positions: a tile is a few rows of one or a few C1 planes; one vnchwconv per (row, C1
  plane) turns [positions][c0] into [c0][positions];
* 2002, few positions: a tile is 16 rows x up to a UB line of C1 planes and positions; a vnchwconv
  puts the 16 rows last, then one UB -> UB move per (C1 plane, channel) with a burst per position
  gathers each channel's positions, and a second vnchwconv puts the rows first again;
* 2003, under 54 blocks a row (C x positions): several row tiles share one UB line; not modelled
  here (`plan_tik_map_back` returns None and the caller keeps its own pass).
Each tile is loaded with one move per row (a burst per C1 plane) for a partial depth plane and one
per (row, C1 plane) for whole depth planes; the kernel has one input and one output half of UB, so
a tile's load waits for the previous tile's last vector step and its reorder for the previous
store. One loop axis is split over the cores; TIK launches every core, the rest exit.

A weight (`fz3d_rows`: FRACTAL_Z_3D [D][C1][HW][rows][c0], the Cube's FP32 gradWeight, which the
tiling sees as rows = output channels and positions = taps) is loaded as TIK's `_copy_data_in_1`
does: per (C1 plane, partial or whole depth plane) one move with a burst per tap (the tile's rows x
c0, contiguous), into the output half as [C1][tap][row][c0]; then one UB -> UB move per row, a
burst per (C1 plane, tap), puts it in the input half as a map tile is loaded ("chnt -> ncht"), and
the rest is a map's. Only mode 2002 is modelled for it (the 3x3x3 and 5x5x5 weights of 16 input
channels or more take it); 2001 (many taps: 32 or more a multiple of 16, else 128 or 240 and up)
and 2003 (under 54 blocks a row, such as a 3x3x3 kernel of up to 15 input channels) keep the
caller's own pass.

Here a map tile is read from our gradInput workspace ([C1][N][D][HW][c0], one phase), not from an
NDC1HWC0 tensor: each move keeps TIK's bursts and lengths, only its source stride differs. Also
ours, not TIK's: UB rows are packed (TIK's 2002 rows sit a vnchwconv line apart, its 2001 C1
planes unpadded), which moves addresses only; float32's vnchwconv in 2001 is two 32-bit ones per
(row, C1 plane) on the chip and one Transpose here (the same bytes, one call's scalar work less),
and in 2002 16-bit ones over twice the columns (here 32-bit, the same bytes); a core whose tiles
read UB they did not write (padding rows, positions or channels) zeroes it once first; and
data_move_pad is the A2 / A3 form (TIK's other branch is for chips without it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import ml_dtypes
import numpy as np

from simulator.arith import align_up, ceil_div
from simulator.kernel import (DataCopy, DataCopyExtParams, DataCopyPad, DataCopyParams, Duplicate, HardEvent,
                              ScalarWork, SetFlag, WaitFlag)
from simulator.kernel.vector import Transpose, TransposeParamsExt
from .prologue import TIK_TILING_BYTES, TIK_UB_RESERVED
from .vector_pipeline import NCHW2NHWC, VecBlock, align32, nhwc2nchw, zero_lanes

VNC_LINES = 16              # rows of one vnchwconv (trans_data_common_func.py)
MODE_2003_BLOCKS = 54       # under this many blocks a row (C x positions), tiling mode 2003
STRIDE_LIMIT = 65535        # the largest stride a data_move takes, in 32-B blocks
BF16 = np.dtype(ml_dtypes.bfloat16)


@dataclass(frozen=True)
class TikMapBack:
    """The tiling of one NDC1HWC0 -> NCDHW TransData: the map N x C x D x HW (C1 planes of c0),
    its mode, its loop units over rows (cl), C1 planes (c) and positions (cr), and its split."""
    N: int
    C: int
    c0: int
    D: int
    HW: int
    dtype: np.dtype
    mode: int
    cl_unit: int
    c_unit: int
    cr_unit: int
    axis: int               # the axis split over the cores: 0 rows, 1 C1 planes, 2 positions
    per_core: int           # its loops a core
    cores: int              # cores with work
    launched: int           # blocks launched (every vector core)
    half: int               # bytes of each UB half (input, output)
    tile_scalar: float      # the scalar unit's work a tile beside its calls (profile scalar.tik_tile_cycles)
    fz3d_rows: int = 0      # a FRACTAL_Z_3D source ([D][C1][HW][rows][c0]) of this many rows; 0: NDC1HWC0

    @property
    def C1(self) -> int:
        return ceil_div(self.C, self.c0)

    @property
    def cr(self) -> int:
        return self.D * self.HW

    @property
    def counts(self) -> tuple[int, int, int]:
        return ceil_div(self.N, self.cl_unit), ceil_div(self.C1, self.c_unit), ceil_div(self.cr, self.cr_unit)


class MapBackTile(NamedTuple):
    """Rows [n0, n0 + nn), C1 planes [k0, k0 + kn), positions [t0, t0 + tn)."""
    n0: int
    nn: int
    k0: int
    kn: int
    t0: int
    tn: int


def _split(counts: tuple, units: tuple, lefts: tuple, cores: int) -> tuple[int, int, int]:
    """GetMcInfoNegative200: the axis (rows, C1 planes, positions) whose loops fill the cores best,
    ties to the rows, then the C1 planes; returns (axis, loops a core, cores used)."""
    def fill(count: int, whole_round_counts: bool) -> int:
        full = cores if count // cores > 0 else 0
        rem = count % cores
        return full + rem + (cores if rem == 0 and whole_round_counts else 0)
    scores = (fill(counts[0], True), fill(counts[1], True), fill(counts[2], lefts[2] > units[2] / 2))
    axis = scores.index(max(scores))
    count = counts[axis]
    used = ceil_div(count, ceil_div(count, cores))
    return axis, ceil_div(count, used), used


def plan_tik_map_back(*, N: int, C: int, c0: int, D: int, HW: int, dtype, ub_bytes: int, cores: int,
                      tile_scalar: float, fz3d_rows: int = 0) -> TikMapBack | None:
    """TilingNegativeNtc200 for NDC1HWC0 [N, D, C1, HW, c0] -> NCDHW [N, C, D, HW] (its real
    shapes; float32 with A2's 32-bit vnchwconv; bfloat16 moved as float16 by the kernel but never
    given mode 2001 by the tiling, whose dtype check does not list it). None for mode 2003.
    With `fz3d_rows`, a weight: FRACTAL_Z_3D [D, C1, HW, rows, c0] -> NCDHW [N, C, D, HW], the same
    tiling (the transdata host code sends both pairs to it, the output's C-right axes D and HW);
    None where it picks mode 2001 (not modelled for this source)."""
    dtype = np.dtype(dtype)
    isz = dtype.itemsize
    ebk = 32 // isz                                     # elements a block
    ub_elems = (ub_bytes - TIK_UB_RESERVED) // isz - TIK_TILING_BYTES // isz
    ub_offset = ub_elems // 2 // ebk * ebk              # each half, in elements
    line_blocks = ub_offset // VNC_LINES // ebk
    line_blocks -= 1 if line_blocks % 2 == 0 else 0
    vnc_col = line_blocks * ebk                         # a vnchwconv line
    C1, cr = ceil_div(C, c0), D * HW
    if cr % c0 == 0:
        gate = 2 * VNC_LINES
    elif (ub_offset // c0 // c0 * c0) // align_up(cr, c0) <= C1:
        gate = 8 * VNC_LINES
    else:
        gate = 15 * VNC_LINES
    once = cr >= gate and dtype != BF16    # the tiling's dtype list for one vnchwconv has no bfloat16
    unit_cr = ub_offset // c0 // c0 * c0 if once else vnc_col // c0 // ebk * ebk
    cr_unit = min(cr, unit_cr)
    cr_cnt = ceil_div(cr, cr_unit)
    if cr_cnt > 1 or C1 == 1:
        unit_c = 1
    else:
        unit_c = unit_cr // align_up(cr_unit, c0 if once else ebk)
    c_unit = min(C1, unit_c)
    c_cnt = ceil_div(C1, c_unit)
    if once and fz3d_rows:
        return None
    if once:
        mode, cl_unit = 2001, min(N, ub_offset // (c_unit * align_up(cr_unit, c0) * c0))
    elif C * cr < MODE_2003_BLOCKS * ebk and cr_cnt == 1 and c_cnt == 1:
        return None
    else:
        mode, cl_unit = 2002, min(N, VNC_LINES)
    counts = (ceil_div(N, cl_unit), c_cnt, cr_cnt)
    axis, per, used = _split(counts, (cl_unit, c_unit, cr_unit), (N % cl_unit, C1 % c_unit, cr % cr_unit), cores)
    return TikMapBack(N, C, c0, D, HW, dtype, mode, cl_unit, c_unit, cr_unit, axis, per, used, cores,
                      ub_offset * isz, tile_scalar, fz3d_rows)


def map_back_tiles(t: TikMapBack) -> list[list[MapBackTile]]:
    """Each launched block's tiles, in the kernel's loop order (positions, C1 planes, rows)."""
    counts = t.counts
    blocks = []
    for b in range(t.cores):
        ranges = [range(c) for c in counts]
        ranges[t.axis] = range(b * t.per_core, min(counts[t.axis], (b + 1) * t.per_core))
        blocks.append([MapBackTile(i * t.cl_unit, min(t.cl_unit, t.N - i * t.cl_unit),
                                   k * t.c_unit, min(t.c_unit, t.C1 - k * t.c_unit),
                                   j * t.cr_unit, min(t.cr_unit, t.cr - j * t.cr_unit))
                       for j in ranges[2] for k in ranges[1] for i in ranges[0]])
    return blocks + [[] for _ in range(t.launched - t.cores)]


def _pitch(t: TikMapBack, tile: MapBackTile) -> int:
    """Positions a C1 plane takes in UB: 2001 pads them to a vnchwconv's 16 (c0), 2002 packs them."""
    return align_up(tile.tn, t.c0) if t.mode == 2001 else tile.tn


def _channels(t: TikMapBack, tile: MapBackTile) -> int:
    return min(tile.kn * t.c0, t.C - tile.k0 * t.c0)


def _aligned_positions(t: TikMapBack, tile: MapBackTile) -> int:
    """Mode 2002's positions a channel takes after its moves: as loaded when each core holds every
    position in one tile, else rounded up to a 32-B block."""
    return tile.tn if t.counts[2] == 1 and t.axis != 2 else align_up(tile.tn, 32 // t.dtype.itemsize)


def _needs_zeros(t: TikMapBack, tiles: list[MapBackTile]) -> bool:
    """A vnchwconv reads whole groups of 16 rows (2002) or 16 positions (2001), positions rounded
    up to a block (2002) and the padding channels of the last C1 plane: UB the tile did not write,
    stale on the chip, zeroed here once (a Duplicate TIK does not issue) so that it has been written."""
    if t.C % t.c0:
        return True
    if t.mode == 2001:
        return any(tile.tn % t.c0 for tile in tiles)
    return any(tile.nn < VNC_LINES or _aligned_positions(t, tile) > tile.tn for tile in tiles)


def _load(t: TikMapBack, ub: VecBlock, sGm, tile: MapBackTile) -> None:
    """The tile's rows into UB ([row][C1][positions][c0]) as TIK's moves: a partial depth plane at
    either end in one move per row (a burst per C1 plane), whole planes in one per (row, C1 plane)."""
    isz, c0, HW, dt = t.dtype.itemsize, t.c0, t.HW, t.dtype
    pos = c0 * isz // 32                            # blocks a position
    cp = _pitch(t, tile)
    row = tile.kn * cp * c0                         # elements a row in UB
    left = 0 if tile.t0 % HW == 0 else min(HW - tile.t0 % HW, tile.tn)
    mid = (tile.tn - left) // HW
    right = tile.tn - left - mid * HW
    plane_gap = (t.C1 - 1) * HW * pos               # TIK's gap between depth planes of NDC1HWC0
    c1_step = t.N * t.cr * c0                       # our workspace: C1 planes N x D x HW apart

    def src(n, k, t_):
        return sGm[(((tile.k0 + k) * t.N + n) * t.cr + t_) * c0]

    def partial_plane(first: int, count: int) -> None:         # a move per row, a burst per C1 plane
        for r in range(tile.nn):
            dst = ub.at(r * row * isz + first * c0 * isz, dt)
            if (HW - count) * pos > STRIDE_LIMIT:
                for k in range(tile.kn):
                    DataCopy(dst[k * cp * c0], src(tile.n0 + r, k, tile.t0 + first), DataCopyParams(1, count * pos, 0, 0))
            else:
                DataCopy(dst, src(tile.n0 + r, 0, tile.t0 + first),
                         DataCopyParams(tile.kn, count * pos, (c1_step // c0 - count) * pos, (cp - count) * pos))

    if left:
        partial_plane(0, left)
    for r in range(tile.nn if mid else 0):                     # whole planes: a move per (row, C1 plane)
        for k in range(tile.kn):
            dst = ub.at((r * row + (k * cp + left) * c0) * isz, dt)
            if plane_gap > STRIDE_LIMIT:
                for d in range(mid):
                    DataCopy(dst[d * HW * c0], src(tile.n0 + r, k, tile.t0 + left + d * HW),
                             DataCopyParams(1, HW * pos, 0, 0))
            else:
                DataCopy(dst, src(tile.n0 + r, k, tile.t0 + left), DataCopyParams(mid, HW * pos, 0, 0))
    if right:
        partial_plane(left + mid * HW, right)


def _load_fz3d(t: TikMapBack, ub: VecBlock, sGm, tile: MapBackTile) -> None:
    """A weight tile from FRACTAL_Z_3D as TIK's `_copy_data_in_1` moves it in: into the output half
    as [C1][tap][row][c0], one move per (C1 plane, partial or whole depth plane) with a burst per
    tap (the tile's rows x c0, contiguous in the source)."""
    isz, c0, HW, dt, nn = t.dtype.itemsize, t.c0, t.HW, t.dtype, tile.nn
    blk = c0 * isz // 32                            # blocks of one row's c0
    tap_step = t.fz3d_rows * c0                     # source elements between taps, C1 planes, depth planes
    c1_step, d_step = HW * tap_step, t.C1 * HW * tap_step
    gap = (tap_step - nn * c0) * isz // 32          # blocks skipped between two taps' bursts
    left = 0 if tile.t0 % HW == 0 else min(HW - tile.t0 % HW, tile.tn)
    mid = (tile.tn - left) // HW
    right = tile.tn - left - mid * HW
    base = (tile.t0 // HW) * d_step + tile.k0 * c1_step + (tile.t0 % HW) * tap_step + tile.n0 * c0

    def taps(src: int, first: int, count: int, k: int) -> None:
        dst = ub.at(t.half + ((k * tile.tn + first) * nn * c0) * isz, dt)
        if gap > STRIDE_LIMIT:
            for i in range(count):
                DataCopy(dst[i * nn * c0], sGm[src + i * tap_step], DataCopyParams(1, nn * blk, 0, 0))
        else:
            DataCopy(dst, sGm[src], DataCopyParams(count, nn * blk, gap, 0))

    after_left = base + (left - HW) * tap_step + d_step if left else base    # the next depth plane's first tap
    for k in range(tile.kn if left else 0):
        taps(base + k * c1_step, 0, left, k)
    for k in range(tile.kn):
        for d in range(mid):
            taps(after_left + d * d_step + k * c1_step, left + d * HW, HW, k)
    for k in range(tile.kn if right else 0):
        taps(after_left + mid * d_step + k * c1_step, left + mid * HW, right, k)


def _chnt_to_ncht(t: TikMapBack, ub: VecBlock, tile: MapBackTile) -> None:
    """A loaded weight tile, [C1][tap][row][c0] in the output half, to [row][C1][tap][c0] in the
    input half: one UB -> UB move per row, a burst per (C1 plane, tap)."""
    isz, c0, dt, nn = t.dtype.itemsize, t.c0, t.dtype, tile.nn
    blk = c0 * isz // 32
    row = tile.kn * tile.tn * c0
    for r in range(nn):
        DataCopy(ub.at(r * row * isz, dt), ub.at(t.half + r * c0 * isz, dt),
                 DataCopyParams(tile.kn * tile.tn, blk, (nn - 1) * blk, 0))


def _reorder(t: TikMapBack, ub: VecBlock, tile: MapBackTile) -> int:
    """The tile to [row][channel][positions] in the output half; returns its row pitch (elements)."""
    c0, dt, cp = t.c0, t.dtype, _pitch(t, tile)
    src, dst = 0, t.half
    if t.mode == 2001:                  # one vnchwconv per (row, C1 plane): [positions][c0] -> [c0][positions]
        for r in range(tile.nn):
            for k in range(tile.kn):
                off = ((r * tile.kn + k) * cp * c0) * dt.itemsize
                Transpose(ub.at(dst + off, dt), ub.at(src + off, dt), None, nhwc2nchw(1, cp, 1, c0))
        return tile.kn * c0 * cp
    # 2002: [16 rows][C1][positions][c0] -> [C1][positions][c0][16 rows]
    line = tile.kn * cp * c0
    Transpose(ub.at(dst, dt), ub.at(src, dt), None, TransposeParamsExt(1, VNC_LINES, line, 1, NCHW2NHWC))
    cra = _aligned_positions(t, tile)
    blk = VNC_LINES * dt.itemsize // 32             # a position's 16 rows, in blocks
    for k in range(tile.kn):                        # -> [C1][c0][positions][16 rows]: a move per channel
        last = tile.k0 + k == t.C1 - 1 and t.C % c0
        for c in range(t.C % c0 if last else c0):
            DataCopy(ub.at(src + ((k * c0 + c) * cra) * VNC_LINES * dt.itemsize, dt),
                     ub.at(dst + ((k * cp * c0) + c) * VNC_LINES * dt.itemsize, dt),
                     DataCopyParams(cp, blk, (c0 - 1) * blk, 0))
    line2 = tile.kn * c0 * cra                      # -> [16 rows][C1 c0][positions]
    Transpose(ub.at(dst, dt), ub.at(src, dt), None, TransposeParamsExt(1, line2, VNC_LINES, 1, NCHW2NHWC))
    return line2


def _store(t: TikMapBack, ub: VecBlock, dGm, tile: MapBackTile, row: int) -> None:
    """data_move_pad to NCDHW: one move for the tile when each row's channels are one run (all the
    positions in the tile, 16-aligned in 2001), else one per row with a burst per channel."""
    isz, dt = t.dtype.itemsize, t.dtype
    nch = _channels(t, tile)
    out = ub.at(t.half, dt)
    first = (tile.n0 * t.C + tile.k0 * t.c0) * t.cr + tile.t0
    cpad = row // (tile.kn * t.c0)                  # a channel's positions in UB
    whole = t.counts[2] == 1 and (t.mode == 2002 or tile.tn % t.c0 == 0)
    if whole:
        run = nch * tile.tn
        DataCopyPad(dGm[first], out, DataCopyExtParams(tile.nn, run * isz, (row * isz - align32(run * isz)) // 32,
                                                       (t.C * t.cr - run) * isz))
        return
    for r in range(tile.nn):
        DataCopyPad(dGm[first + r * t.C * t.cr], out[r * row],
                    DataCopyExtParams(nch, tile.tn * isz, (cpad * isz - align32(tile.tn * isz)) // 32,
                                      (t.cr - tile.tn) * isz))


def pass_tik_map_back(ub: VecBlock, tiles: list[MapBackTile], t: TikMapBack, sGm, dGm) -> None:
    """One block's tiles: load (MTE2), reorder (V), store (MTE3), one tile in UB at a time."""
    ub.begin_pass()
    waits = []                                      # flags set and not yet waited for
    if _needs_zeros(t, tiles):
        z, n = zero_lanes(ub.raw[0], 2 * t.half)
        Duplicate(z, 0.0, n)
        SetFlag(HardEvent.V_MTE2, 0)
        waits.append(HardEvent.V_MTE2)
    # a FRACTAL_Z_3D tile is loaded into the output half, which the last store reads
    load_waits = (HardEvent.V_MTE2, HardEvent.MTE3_MTE2) if t.fz3d_rows else (HardEvent.V_MTE2,)
    for tile in tiles:
        if t.tile_scalar:
            ScalarWork(t.tile_scalar)
        for event in load_waits:                    # the half the load writes is free again
            if event in waits:
                WaitFlag(event, 0)
                waits.remove(event)
        (_load_fz3d if t.fz3d_rows else _load)(t, ub, sGm, tile)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        if HardEvent.MTE3_V in waits:               # the output half is free again
            WaitFlag(HardEvent.MTE3_V, 0)
            waits.remove(HardEvent.MTE3_V)
        if t.fz3d_rows:
            _chnt_to_ncht(t, ub, tile)
        row = _reorder(t, ub, tile)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        SetFlag(HardEvent.V_MTE2, 0)
        _store(t, ub, dGm, tile, row)
        SetFlag(HardEvent.MTE3_V, 0)
        waits += [HardEvent.V_MTE2, HardEvent.MTE3_V]
        if t.fz3d_rows:
            SetFlag(HardEvent.MTE3_MTE2, 0)
            waits.append(HardEvent.MTE3_MTE2)
    for event in waits:
        WaitFlag(event, 0)
