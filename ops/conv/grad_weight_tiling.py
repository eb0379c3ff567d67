"""gradWeight's tiling (part of phase 1's plan, after make_cube_geometry): the L0 tile, the
positions per L1 stage, the reduction's K split, W windows and tap groups, and the units with
their costs; a 3D FP16 / BF16 gradWeight takes CANN's own tiling (cann_dw_tiling.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from simulator.arith import align_up, ceil_div
from ..common import tiling_error
from .cann_dw_tiling import DwProblem, cann_dw_split
from .geometry import CubeGeometry
from .tiling import (INSTR_CYCLES, CubeCaps, _l0_k_room, _pick, _rows_for, _step_cycles, _TileSearch, _window_rows,
                     group_sizes, mostly_halo, tap_rows, window_columns)


@dataclass
class DwTiling:
    mt: int               # dW rows per unit
    nt: int               # dW columns per unit
    kk: int               # positions per L0 step
    kc: int               # positions per L1 stage
    ks: int               # K split (partial sums per tile)
    slabA: int
    slabB: int
    units: list = field(default_factory=list)   # (g, kd, m0, mt, col0, ncol, pieces)
    costs: list = field(default_factory=list)
    a_nd2nz: bool = False
    # the tiles add into an FP32 accumulator (zeroed first by a MemSet): when the reduction is split
    # over cores, and always for a 3D convolution, whose gradWeight CANN computes in FP32
    # (Conv3DBackpropFilter*2Fp32) with atomic adds after a MemSet
    atomic: bool = False
    # W windows: each stage holds one grid row's run of kc columns and the map columns it reads,
    # for rows too long for whole rows in L1 (long 1D signals, wide maps)
    window: bool = False
    # tap groups (0: none): a unit's columns are one C1 plane's taps of `hgroup` kernel rows, and a
    # stage holds only the map rows those read, for windows of kernel rows too tall for L1 (large
    # dilations: a 3 x 3 kernel at dilation 36 reads 73 rows)
    hgroup: int = 0


def _pieces(geo: CubeGeometry, kc: int, per_image: bool, window: bool = False) -> list[list]:
    """The gradWeight reduction (grid positions) cut into stages: per grid plane, runs of at most
    kc positions: [(plane, p0, length)]. per_image: runs stay inside one image's valid rows
    (the ND->NZ path reads A from the NC[D]HW tensor). window: runs stay inside one valid row."""
    lay = geo.dy if geo.amap == "dy" else geo.x
    valid_rows = lay.H
    out = []
    if window:
        firsts = [n * lay.pitch for n in range(lay.N)] if lay.fold else [0]
        for pl in range(lay.NP):
            for r in (r0 + h for r0 in firsts for h in range(valid_rows)):
                out += [(pl, r * lay.Wd + c, min(kc, lay.Wd - c)) for c in range(0, lay.Wd, kc)]
        return out
    if lay.fold:
        if per_image:
            for n in range(lay.N):
                base = n * lay.pitch * lay.Wd
                tot = valid_rows * lay.Wd
                out += [(0, base + p, min(kc, tot - p)) for p in range(0, tot, kc)]
        else:
            tot = ((lay.N - 1) * lay.pitch + valid_rows) * lay.Wd
            out += [(0, p, min(kc, tot - p)) for p in range(0, tot, kc)]
    else:
        tot = valid_rows * lay.Wd
        for pl in range(lay.NP):
            out += [(pl, p, min(kc, tot - p)) for p in range(0, tot, kc)]
    return out


def _split_pieces(pieces, ks):
    total = sum(p[2] for p in pieces)
    target = total / ks
    parts, cur, acc = [], [], 0
    for p in pieces:
        cur.append(p)
        acc += p[2]
        if acc >= target * (len(parts) + 1) - 1e-9 and len(parts) < ks - 1:
            parts.append(cur)
            cur = []
    parts.append(cur)
    return [p for p in parts if p]


def _dw_tile_shapes(search: _TileSearch, small: bool, ncols: int):
    """The (baseM, baseN) candidates, largest first: the usual sizes, or the small ones."""
    c0 = search.c0
    sizes_m = (48, 32, 16) if small else (256, 192, 128, 64)
    sizes_n = (48, 32, 16) if small else (512, 384, 256, 192, 128, 64)
    Mg16 = align_up(search.geo.Mg, 16)
    mts = [search.forced_m] if search.forced_m else sorted({min(Mg16, v) for v in sizes_m}, reverse=True)
    if search.forced_n:
        nts = [align_up(search.forced_n, c0)]
    else:
        nts = sorted({min(ncols, v) for v in sizes_n} | ({ncols} if ncols <= 1024 and not small else set()),
                     reverse=True)
    return [(mt, nt) for mt in mts for nt in nts]


def _dw_stage_slabs(search: _TileSearch, mt: int, nt: int, kc: int) -> tuple[int, int]:
    """The A and B slabs (L1 bytes) of a load3d stage of kc positions."""
    geo, isz, c0 = search.geo, search.isz, search.c0
    alay = geo.dy if geo.amap == "dy" else geo.x
    blay = geo.x if geo.amap == "dy" else geo.dy
    c1nB = 1 if search.tap_groups else min(ceil_div(geo.Cb, c0), ceil_div(nt, geo.dwf.Khw * c0) + 1)
    c1nA = ceil_div(mt, c0) + (0 if mt % c0 == 0 else 1)
    rows = _rows_for(kc, alay.Wd)
    sa = c1nA * min(rows, alay.R) * alay.Wd * c0 * isz
    sb = c1nB * min(_window_rows(geo.dwf.ax[1], rows), blay.R) * blay.Wd * c0 * isz
    return sa, sb


def _dw_stage(search: _TileSearch, mt: int, nt: int, kmax: int, nd2nz: bool, window: bool = False):
    """The deepest L1 stage (positions kc, a multiple of the L0 step) whose A and B slabs fit L1
    with their buffers: (kc, A slab bytes, B slab bytes), or None. window: a stage is a run of
    one grid row and the map columns it reads (DwTiling.window), kc at most the row."""
    geo, isz, c0 = search.geo, search.isz, search.c0
    f = geo.dwf
    alay = geo.dy if geo.amap == "dy" else geo.x
    blay = geo.x if geo.amap == "dy" else geo.dy
    c1nB = 1 if search.tap_groups else min(ceil_div(geo.Cb, c0), ceil_div(nt, f.Khw * c0) + 1)
    c1nA = ceil_div(mt, c0) + (0 if mt % c0 == 0 else 1)
    for steps in (16, 12, 8, 6, 4, 3, 2, 1):
        kc = steps * kmax
        if window:
            kc = min(kc, align_up(alay.Wd, 16))
            rows, a_cols, b_cols = 1, kc, window_columns(f.ax[2], kc, blay.Wd)
        else:
            rows = _rows_for(kc, alay.Wd)
            a_cols, b_cols = min(rows, alay.R) * alay.Wd, blay.Wd
        if nd2nz:
            sa = align_up(mt, 16) * align_up(kc, c0) * isz
        else:
            sa = c1nA * a_cols * c0 * isz
        rb = min(_window_rows(f.ax[1], rows), blay.R)
        sb = c1nB * rb * b_cols * c0 * isz
        if search.buffers * (sa + sb) <= search.caps.L1:
            return kc, sa, sb
    return None


def _units_of(best: tuple, geo: CubeGeometry, ncols: int, blocks: int = 1) -> int:
    """A gradWeight candidate's units: its tiles times its K split."""
    _, mt, nt, _, _, ks = best[:6]
    return geo.G * geo.dwf.ax[0].K * ceil_div(geo.Mg, mt) * ceil_div(ncols, nt) * blocks * ks


def _cost_dw_tile(search: _TileSearch, mt: int, nt: int, ncols: int, K_total: int, o_ks, nd2nz: bool,
                  window: bool = False, blocks: int = 1):
    """One gradWeight tile's best K split, scored as _cost_dx_tile scores: (score, mt, nt,
    kmax, kc, ks, A slab, B slab), or None if it does not fit. blocks: column blocks of ncols
    each (tap groups: C1 planes x groups), 1 otherwise."""
    geo, cc = search.geo, search.caps
    kmax = _l0_k_room("gradWeight", cc, search.buffers, search.isz, mt, nt, 16, search.forced_k, search.forced_tile)
    if kmax is None:
        return None
    if mt > 4095 or nt > 4095:
        raise tiling_error(f"ConvolutionBackward gradWeight tiling: an Mmad of m={mt}, n={nt} does not fit "
                           f"Mmad's [1, 4095] range")
    if not search.forced_k:
        kmax = min(kmax, 4095 // 16 * 16)
    stage = _dw_stage(search, mt, nt, kmax, nd2nz, window)
    if stage is None:
        return None
    kc, sa, sb = stage
    kc = min(kc, max(K_total, 16))
    step = _step_cycles(cc, mt, nt, kmax, search.isz, search.c0)
    tiles = geo.G * geo.dwf.ax[0].K * ceil_div(geo.Mg, mt) * ceil_div(ncols, nt) * blocks
    nsteps = ceil_div(K_total, kmax)
    unit_full = nsteps * step
    best = None
    # K split: balance tiles x splits over the cores
    cands = [o_ks] if o_ks else range(1, max(1, cc.cores // tiles) * 4 + 2)
    for ks in cands:
        ks = max(1, min(ks, ceil_div(K_total, 16)))
        if not (search.forced_tile or cc.stages(mt, nt, 4 if ks > 1 else search.osz)):
            continue
        units = tiles * ks
        per = unit_full / ks + 300 + (150 if ks > 1 else 0)
        est = ceil_div(units, cc.cores) * per
        instr = units * (nsteps / ks * 7 + ceil_div(K_total, kc) / ks * 6 + 8)
        score = est + INSTR_CYCLES * instr / cc.cores + (3000 if ks > 1 else 0)
        if best is None or score < best[0]:
            best = (score, mt, nt, kmax, kc, ks, sa, sb)
    return best


def _add_dw_units(t: DwTiling, search: _TileSearch, ncols: int, nd2nz: bool) -> None:
    """The chosen tiling's units (group, kernel depth, rows, columns, reduction part) and their
    costs; the reduction is cut into at most t.ks parts of similar length (t.ks is what it got)."""
    geo = search.geo
    parts = _split_pieces(_pieces(geo, t.kc, nd2nz, t.window), t.ks)
    t.ks = len(parts)
    for g in range(geo.G):
        for kd in range(geo.dwf.ax[0].K):
            for m0 in range(0, geo.Mg, t.mt):
                for col0, ncol in _dw_column_tiles(t, geo, ncols, search.c0):
                    mm = min(t.mt, geo.Mg - m0)
                    for part in parts:
                        npos = sum(p[2] for p in part)
                        t.units.append((g, kd, m0, mm, col0, ncol, part))
                        t.costs.append(ceil_div(npos, t.kk) * _step_cycles(search.caps, mm, ncol, t.kk, search.isz,
                                                                           search.c0) + 300)


def _dw_column_tiles(t: DwTiling, geo: CubeGeometry, ncols: int, c0: int):
    """(first column, columns) of each unit's tile: runs of t.nt of the ncols columns, or with tap
    groups, runs inside each C1 plane's block of one group's kernel rows (their columns are
    consecutive in the (C1, kh, kw, C0) order of gradWeight's columns)."""
    if not t.hgroup:
        return [(col0, min(t.nt, ncols - col0)) for col0 in range(0, ncols, t.nt)]
    KH, KW = geo.dwf.ax[1].K, geo.dwf.ax[2].K
    out = []
    for c1 in range(ceil_div(geo.Cb, c0)):
        for a in range(0, KH, t.hgroup):
            base, width = (c1 * KH + a) * KW * c0, min(t.hgroup, KH - a) * KW * c0
            out += [(base + c, min(t.nt, width - c)) for c in range(0, width, t.nt)]
    return out


def dw_tap_group(geo: CubeGeometry, hgroup: int, col0: int, c0: int) -> tuple[int, int]:
    """The tap group (first kernel row, rows) of a unit whose columns start at col0, with
    `hgroup` rows per group."""
    KH, KW = geo.dwf.ax[1].K, geo.dwf.ax[2].K
    a = (col0 % (KH * KW * c0)) // (KW * c0) // hgroup * hgroup
    return a, min(hgroup, KH - a)


def _cann_dw_tiling(search: _TileSearch, ncols: int, K_total: int, forced: dict) -> "DwTiling | None":
    """A 3D convolution's gradWeight in FP16 / BF16, groups of 1, nothing forced: the tiles and the
    reduction's split CANN's Conv3DBackpropFilter tiling picks (cann_dw_tiling.py), if our buffers
    take them; None otherwise (our own search then)."""
    geo, cc = search.geo, search.caps
    if geo.fold or geo.transposed or geo.G > 1 or search.isz != 2 or search.forced_tile or search.forced_k \
            or forced.get("dwKSplit") or search.buffers != 2:
        return None
    f = geo.dwf
    Do, Ho, Wo = geo.O
    Di, Hi, Wi = geo.X
    prob = DwProblem(geo.N, Do, ceil_div(geo.Mg, 16), ceil_div(geo.Cb, 16), f.ax[0].K, f.ax[1].K, f.ax[2].K,
                     Ho, Wo, Hi, Wi, f.ax[1].s, f.ax[2].s, f.ax[1].d, f.ax[2].d, f.ax[0].pad > 0, cc.L1, cc.L0C,
                     cc.cores)
    split = cann_dw_split(prob)
    if split is None:
        return None
    mt = min(split.m_l0 * 16, align_up(geo.Mg, 16))
    nt = min(split.n_l0 * 16, ncols)
    kk = split.k_l0 * 16
    if _l0_k_room("gradWeight", cc, 2, 2, mt, nt, 16, kk, False) is None:
        return None
    stage = _dw_stage(search, mt, nt, kk, False)
    if stage is None:
        return None
    kc = min(split.k_al1 * 16, stage[0])
    kc = max(kc // kk * kk, kk)
    # CANN's N tile may span the depth taps, ours holds one: its cores' split of the reduction is
    # kept where our tiles spread as evenly, else refined until they do
    tiles = f.ax[0].K * ceil_div(geo.Mg, mt) * ceil_div(ncols, nt)
    spread = [(ceil_div(tiles * ks, cc.cores) / ks, ks) for ks in range(split.k_parts, 4 * split.k_parts + 1)]
    best = min(w for w, _ in spread)
    ks = next(ks for w, ks in spread if w <= best * 1.01)
    return DwTiling(mt, nt, kk, kc, ks, *_dw_stage_slabs(search, mt, nt, kc))


def plan_dw(geo: CubeGeometry, *, caps: CubeCaps, isz: int, c0: int, osz: int, forced: dict, buffers: int,
            nd2nz: bool) -> DwTiling:
    """gradWeight's tiling (phase 1): the L0 tile (baseM rows x baseN columns x baseK
    positions), the positions per L1 stage, the K split, and the units with their costs; the
    tile with the lowest estimate wins. nd2nz: the left operand comes ND->NZ (32-bit dtypes)."""
    search = _TileSearch(geo, caps, isz, c0, osz, buffers, _pick(forced, "dwBaseM", "baseM"),
                         _pick(forced, "dwBaseN", "baseN"), _pick(forced, "dwBaseK", "baseK"))
    o_ks = _pick(forced, "dwKSplit", "dwKSplit")
    ncols = ceil_div(geo.Cb, c0) * geo.dwf.Khw * c0
    K_total = sum(p[2] for p in _pieces(geo, 1 << 30, nd2nz))
    cann = _cann_dw_tiling(search, ncols, K_total, forced)
    if cann is not None:
        _add_dw_units(cann, search, ncols, nd2nz)
        cann.atomic = True
        return cann
    best = _search_dw(search, ncols, K_total, o_ks, nd2nz)
    hgroup, best = _tap_groups_dw(search, best, ncols, K_total, o_ks, nd2nz)
    if best is None:
        raise tiling_error(f"ConvolutionBackward gradWeight tiling: no L0/L1 tile fits (L1 {caps.L1} B, L0A "
                           f"{caps.L0A} B, L0B {caps.L0B} B, L0C {caps.L0C} B); lower the tile overrides")
    _, mt, nt, kk, kc, ks, sa, sb, window = best
    t = DwTiling(mt, nt, kk, kc, ks, sa, sb, a_nd2nz=nd2nz, window=window, hgroup=hgroup)
    _add_dw_units(t, search, ncols, nd2nz)
    t.atomic = t.ks > 1 or not geo.x.fold
    return t


# tap groups replace a whole-kernel plan that fits only when their staged estimate is this much
# faster: the estimate (_staged_cycles) was seen from 11 % under to 4 % over the simulated launch
# (ASPP branches, rates 12-36, on Ascend910A and Ascend910B1), and a smaller gain is within it
TAP_GROUP_GAIN = 1.25


def _tap_groups_dw(search: _TileSearch, whole, ncols: int, K_total: int, o_ks, nd2nz: bool):
    """(kernel rows per stage, candidate): tap groups where no tile fits with every kernel row in
    a stage, or where the whole kernel's stage is mostly halo (tiling.mostly_halo: a 3 x 3 kernel
    at dilation 24 copies 51 map rows a stage for 3 grid rows) and groups stage TAP_GROUP_GAIN
    times faster with as many cores busy; (0, whole) otherwise. A forced tile keeps the whole
    kernel where it fits."""
    geo, c0, cores = search.geo, search.c0, search.caps.cores
    KH, KW = geo.dwf.ax[1].K, geo.dwf.ax[2].K
    if KH == 1:
        return 0, whole
    if whole is not None:
        alay = geo.dy if geo.amap == "dy" else geo.x
        grid_rows = 1 if whole[-1] else _rows_for(whole[4], alay.Wd)
        if search.forced_tile or search.forced_k or o_ks or not mostly_halo(geo.dwf.ax[1], grid_rows):
            return 0, whole
    best = None
    for rows in group_sizes(KH):
        sub = replace(search, geo=replace(geo, dwf=tap_rows(geo.dwf, rows)[0]), tap_groups=True)
        blocks = ceil_div(geo.Cb, c0) * ceil_div(KH, rows)
        cand = _search_dw(sub, rows * KW * c0, K_total, o_ks, nd2nz, blocks)
        if cand is not None:
            t = _staged_cycles(sub, cand, rows * KW * c0, K_total, blocks)
            if best is None or t < best[0]:
                best = (t, rows, cand, _units_of(cand, geo, rows * KW * c0, blocks))
    if best is None:
        return 0, whole
    if whole is not None:
        units = _units_of(whole, geo, ncols)
        faster = best[0] * TAP_GROUP_GAIN < _staged_cycles(search, whole, ncols, K_total)
        if not (faster and best[3] >= min(cores, units)):
            return 0, whole
    return best[1], best[2]


def _staged_cycles(search: _TileSearch, cand, ncols: int, K_total: int, blocks: int = 1) -> float:
    """A candidate's launch time with its stages' copies: per stage the longer of its L0 steps
    and its copy-in (the score leaves the copy out, alike for every whole-kernel plan; a tap
    group's stage copies fewer rows than the whole kernel's)."""
    _, mt, nt, kmax, kc, ks, sa, sb = cand[:8]
    cc = search.caps
    step = _step_cycles(cc, mt, nt, kmax, search.isz, search.c0)
    stage = max(ceil_div(kc, kmax) * step, 190 + (sa + sb) / cc.gm_l1)
    unit = ceil_div(ceil_div(K_total, ks), kc) * stage + 300
    return ceil_div(_units_of(cand, search.geo, ncols, blocks), cc.cores) * unit


def _search_dw(search: _TileSearch, ncols: int, K_total: int, o_ks, nd2nz: bool, blocks: int = 1):
    """The best gradWeight candidate (plan_dw's), with its window flag, or None if no tile fits."""
    geo = search.geo
    best = None
    # whole rows, the usual tile sizes first, smaller ones only when none of those fits (a what-if
    # profile with small buffers); then, where a grid row is longer than whole rows' stages, W
    # windows, the same way, where they score better (a long row leaves whole rows only small
    # tiles) with as many cores busy (the score leaves out their stage a grid row); a plan is
    # refused only when no tile can work
    busy = None
    for window in (False, True):
        found = False
        for small in (False, True):
            if found or (small and search.forced_tile):
                continue
            for mt, nt in _dw_tile_shapes(search, small, ncols):
                cand = _cost_dw_tile(search, mt, nt, ncols, K_total, o_ks, nd2nz, window, blocks)
                if cand is None or (window and busy and _units_of(cand, geo, ncols, blocks) < busy):
                    continue
                found = True
                if best is None or cand[0] < best[0]:
                    best = cand + (window,)
        if best is not None and geo.dwf.ax[2].Q <= best[4]:
            break                   # whole rows already stage a row or more at a time: no window is longer
        busy = min(search.caps.cores, _units_of(best, geo, ncols, blocks)) if best is not None else 0
    return best
