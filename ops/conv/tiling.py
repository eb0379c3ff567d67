"""Host-side tiling of the two GEMMs (part of phase 1's plan, after make_cube_geometry): what both
share (the Cube's buffers, the L0 room, the balance over the AICs, forced fields) and gradInput's
L0 tiles, L1 stages and units (`plan_dx`), each unit costed so the units can be balanced over the
AICs; gradWeight's is grad_weight_tiling.py. A forced tile that does not fit is 561002.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from simulator.arith import align_up, ceil_div
from ..common import tiling_error, ub_bytes
from .geometry import Axis, CubeGeometry, Img2colFamily


@dataclass
class CubeCaps:
    L1: int
    L0A: int
    L0B: int
    L0C: int
    cores: int
    a2: bool
    macs: float           # MACs per cycle in the compute dtype
    mte1_a: float         # bytes per cycle L1 -> L0A
    mte1_b: float
    gm_l1: float
    ub: int               # UB bytes: coupled chips stage each L0C tile there (two slots)

    def stages(self, m: int, n: int, isz: int) -> bool:
        """Whether an m x n L0C tile fits its L0C -> UB staging (coupled chips; A2 has Fixpipe)."""
        return self.a2 or 2 * align_up(m, 16) * align_up(n, 16) * isz <= self.ub


def cube_caps(profile, compute: str) -> CubeCaps:
    _, kind = profile.core_kind_for("cube")
    b = kind.buffers
    return CubeCaps(b["L1"], b["L0A"], b["L0B"], b["L0C"], kind.count, "PIPE_FIX" in kind.pipes,
                    profile.cube.macs_per_cycle[compute], profile.path("L1_L0A").bytes_per_cycle,
                    profile.path("L1_L0B").bytes_per_cycle, profile.path("GM_L1").bytes_per_cycle,
                    ub_bytes(profile))


# the planner's exchange rate between simulated cycles and instructions: a tile shape that saves
# instructions (the simulator's own cost) at the price of a few cycles is preferred up to this rate
INSTR_CYCLES = 6.0


def _step_cycles(cc: CubeCaps, m, n, k, isz, c0) -> float:
    """One L0 step: the Mmad against the MTE1 loads that feed it (they overlap, double-buffered)."""
    mm = ceil_div(m, 16) * ceil_div(n, 16) * ceil_div(k, c0) * 16 * 16 * c0 / cc.macs + 2
    mte1 = align_up(m, 16) * align_up(k, c0) * isz / cc.mte1_a + align_up(k, c0) * align_up(n, 16) * isz / cc.mte1_b + 5
    return max(mm, mte1)


def balance(costs: list[float], blocks: int) -> tuple[list[list[int]], float]:
    """Longest-processing-time assignment of units to blocks: (unit indices per block, makespan)."""
    import heapq
    blocks = max(1, min(blocks, len(costs)))
    heap = [(0.0, b) for b in range(blocks)]
    out = [[] for _ in range(blocks)]
    for i in sorted(range(len(costs)), key=lambda i: -costs[i]):
        t, b = heapq.heappop(heap)
        out[b].append(i)
        heapq.heappush(heap, (t + costs[i], b))
    for o in out:
        o.sort()
    return out, max(t for t, _ in heap)


def _pick(forced: dict, key: str, gen: str):
    """A forced tiling field: the GEMM's own (key) or the one both GEMMs share (gen); None if
    neither is forced."""
    v = forced.get(key, forced.get(gen))
    if v is None:
        return None
    if int(v) <= 0:
        raise tiling_error(f"tiling override: {key} = {v} must be positive")
    return int(v)


@dataclass
class DxTiling:
    m: int                # positions per unit (L0C tile rows)
    nt: int               # channels per unit (L0C tile columns)
    kk: int               # img2col columns per L0 step
    c1n: int              # gradOutput C1 planes per L1 stage
    nc: int               # L0C tiles in flight (1 or 2)
    ntiles: list          # (n0, width) per n-tile
    slab: int             # L1 bytes: the dy slab of a stage
    bchunk: int           # L1 bytes: the weight chunk of a stage
    units: list = field(default_factory=list)   # (g, q, plane, p0, m, j)
    costs: list = field(default_factory=list)
    window: bool = False  # W windows: a unit is a run of one grid row, its stage the columns it reads
    hgroup: int = 0       # tap groups (0: none): a stage holds one group of `hgroup` kernel rows (DwTiling's)


# load3d's padding fields hold [0, 255]: padding past that is zeros a stage holds in L1
LOAD3D_PAD_MAX = 255


def l1_margins(top: int, bot: int, left: int, right: int) -> tuple[int, int, int, int]:
    """The zero rows (above, below) and columns (left, right) a stage holds in L1 for padding
    load3d's fields cannot take (gradInput of a large dilation: (K - 1) x d - pad)."""
    return tuple(max(0, v - LOAD3D_PAD_MAX) for v in (top, bot, left, right))


def _needs_margins(f, grid_rows: int, map_rows: int) -> bool:
    """Whether a stage of phase family f may need padding past load3d's fields: above or left (the
    family's padding), right, or below the map's last row (a 3D map's last grid rows, stride H > 1,
    read up to (grid_rows - 1) x s - pad + (K - 1) x d + 1 rows)."""
    ax = f.ax[1]
    below = (grid_rows - 1) * ax.s - ax.pad + (ax.K - 1) * ax.d + 1 - map_rows
    return max(ax.pad, f.ax[2].pad, f.right, below) > LOAD3D_PAD_MAX


def tap_rows(f, hgroup: int):
    """Img2col family f as a stage of one tap group of `hgroup` kernel rows sees it (f itself when
    hgroup is 0 or covers its rows), and the groups it takes: what the stage's window and slab
    sizes follow from."""
    ax = f.ax[1]
    if not hgroup or hgroup >= ax.K:
        return f, 1
    sub = Axis(ax.s, ax.d, ax.P, ax.taps[:hgroup], ax.Q)
    return Img2colFamily((f.ax[0], sub, f.ax[2]), f.left, f.right), ceil_div(ax.K, hgroup)


def _rows_for(m: int, Wg: int) -> int:
    """Grid rows an m-position run can touch (it may start anywhere in a row)."""
    return min(ceil_div(m - 1, Wg) + 1, ceil_div(m, Wg) + 1)


def _window_rows(ax: Axis, grid_rows: int) -> int:
    """Map rows that grid_rows consecutive output rows of an img2col family read along H."""
    return (grid_rows - 1) * ax.s + (ax.K - 1) * ax.d + 1


def _l0_k_room(what: str, cc: CubeCaps, nb: int, isz: int, m: int, n: int, kstep: int, o_k: int | None,
               forced: bool) -> int | None:
    """The deepest K step (a multiple of kstep) that nb buffers of an m x K tile in L0A and a
    K x n tile in L0B leave room for, with the m x n FP32 result in L0C; None if this (m, n)
    does not fit. A forced baseK (o_k) is checked and returned (rounded up to kstep); a forced
    tile that does not fit is a tiling error saying what does not fit; a searched tile that
    leaves no room for the forced baseK is skipped (None), as any tile that does not fit is."""
    m16, n16 = align_up(m, 16), align_up(n, 16)
    if m16 * n16 * 4 > cc.L0C:
        if forced:
            raise tiling_error(f"ConvolutionBackward {what} tiling: the L0C tile baseM {m} x baseN {n} (FP32) "
                               f"needs {m16 * n16 * 4} B of L0C, which does not fit: L0C holds {cc.L0C} B")
        return None
    if o_k:
        k = align_up(o_k, kstep)
        for b, v in (("L0A", nb * m16 * k * isz), ("L0B", nb * k * n16 * isz)):
            if v > getattr(cc, b):
                if not forced:
                    return None
                raise tiling_error(f"ConvolutionBackward {what} tiling: {v} B of {b} (baseM {m}, baseN {n}, "
                                   f"baseK {o_k}, {nb} buffers) does not fit: {b} holds {getattr(cc, b)} B")
        return k
    k = min(cc.L0A // (nb * m16 * isz), cc.L0B // (nb * n16 * isz)) // kstep * kstep
    if k < kstep:
        if forced:
            raise tiling_error(f"ConvolutionBackward {what} tiling: baseM {m} / baseN {n} leave no room for "
                               f"{kstep} of K in L0A/L0B ({cc.L0A} / {cc.L0B} B): does not fit")
        return None
    return k


@dataclass(frozen=True)
class _TileSearch:
    """What one GEMM's tile search reads besides the tile it costs: the call's geometry, the
    Cube's buffers, the element sizes and the tile fields the caller forced."""
    geo: CubeGeometry
    caps: CubeCaps
    isz: int              # bytes per element of the compute dtype
    c0: int
    osz: int              # bytes per element the L0C tile is staged in (UB on coupled chips)
    buffers: int          # L1 / L0 buffers per operand (2: double-buffered)
    forced_m: int | None
    forced_n: int | None
    forced_k: int | None
    tap_groups: bool = False      # gradWeight's units hold one C1 plane's tap group (DwTiling.hgroup)

    @property
    def forced_tile(self) -> bool:
        """A forced baseM / baseN: tried as it is, and an error if it does not fit."""
        return bool(self.forced_m or self.forced_n)


def _forced_dx_tile(forced: dict, c0: int) -> tuple:
    """The forced gradInput tile (baseM, baseN, baseK; None where not forced), validated."""
    o_m, o_n = _pick(forced, "dxBaseM", "baseM"), _pick(forced, "dxBaseN", "baseN")
    o_k = _pick(forced, "dxBaseK", "baseK")
    if o_k is not None and o_k % c0:
        raise tiling_error(f"tiling override: dxBaseK {o_k} must be a multiple of C0 = {c0}")
    if o_n is not None and o_n % 16:        # n-tiles start on whole 16-channel blocks of gradInput
        raise tiling_error(f"tiling override: dxBaseN {o_n} must be a multiple of 16")
    return o_m, o_n, o_k


def _dx_tile_shapes(search: _TileSearch, small: bool, plane_positions: int):
    """The (baseN, baseM) candidates, widest n-tile first: the usual sizes, or the small ones."""
    Cin16 = align_up(search.geo.Cin, 16)
    sizes_n = (32, 16) if small else (256, 128, 64)
    nts = [search.forced_n] if search.forced_n else sorted({min(Cin16, v) for v in sizes_n}, reverse=True)
    if search.forced_m:
        ms = [search.forced_m]
    else:
        ms = sorted({min(align_up(plane_positions, 16), v) for v in range(16, 4096, 16)})
    return [(nt, m) for nt in nts for m in ms]


def _cost_dx_tile(search: _TileSearch, fams: list, plane_positions: int, m: int, nt: int, window: bool = False,
                  hgroup: int = 0):
    """One gradInput tile's score (estimated cycles plus instructions at INSTR_CYCLES) with the
    L1 stage it allows and its units: (score, m, nt, kmax, c1n, nc, rows, cols, units), or None if
    it does not fit.
    window: a unit is a run of one grid row (DxTiling.window), at most the row.
    hgroup: a stage holds one tap group of that many kernel rows (DxTiling.hgroup)."""
    geo, cc, isz, c0, nb = search.geo, search.caps, search.isz, search.c0, search.buffers
    margins = any(_needs_margins(f, plane_positions // geo.dxg.Wd, geo.dy.R) for _, f in fams)
    whole, fams = fams, [(q, tap_rows(f, hgroup)[0]) for q, f in fams]
    C1co = ceil_div(geo.Cout, c0)
    if window:
        m = min(m, align_up(geo.dxg.Wd, 16))
    m16, n16 = align_up(m, 16), align_up(nt, 16)
    kmax = _l0_k_room("gradInput", cc, nb, isz, m, nt, c0, search.forced_k, search.forced_tile)
    if kmax is None or not (search.forced_tile or cc.stages(m, nt, search.osz)):
        return None
    nc = 2 if 2 * m16 * n16 * 4 <= cc.L0C else 1
    if m > 4095 or nt > 4095:
        raise tiling_error(f"ConvolutionBackward gradInput tiling: an Mmad of m={m}, n={nt} does not fit "
                           f"Mmad's [1, 4095] range")
    # L1: dy slab (all rows the tile's grid rows read) + weight chunk, per stage, double-buffered
    # the dy rows a tile's grid rows read: (rows - 1) * stride + the window's reach; stride
    # is 1 for the phases of a convolution's gradInput, s for a transposed one's
    rows = max(_window_rows(f.ax[1], 1 if window else _rows_for(m, geo.dxg.Wd)) for _, f in fams)
    if not margins:             # (with margins a stage may hold its whole window's rows and columns)
        rows = min(rows, geo.dy.R)
    if window:
        cols = max(window_columns(f.ax[2], m, 1 << 30 if margins else geo.dy.Wd) for _, f in fams)
    else:
        cols = geo.dy.Wd + max(sum(l1_margins(0, 0, f.left, f.right)) for _, f in fams)
    per_c1 = rows * cols * c0 * isz + max(f.Khw for _, f in fams) * n16 * c0 * isz
    c1n = min(C1co, (cc.L1 // nb) // per_c1)
    if c1n < 1:
        return None
    stages_per = ceil_div(C1co, c1n)
    c1n = ceil_div(C1co, stages_per)            # even stages
    units = 0
    cyc = 0.0
    instr = 0.0
    runs = plane_positions // geo.dxg.Wd * ceil_div(geo.dxg.Wd, m) if window else ceil_div(plane_positions, m)
    for q, f in whole:
        nu = runs * geo.dxg.NP * ceil_div(geo.Cin, nt) * geo.G
        per_unit, nsteps = _dx_unit_cost(search, f, m, nt, kmax, c1n, rows, nc, cols, hgroup)
        units += nu
        cyc += nu * per_unit
        instr += nu * (nsteps * 7 + f.ax[0].K * tap_rows(f, hgroup)[1] * stages_per * 6 + 10)
    waves = ceil_div(units, cc.cores)
    est = max(cyc / cc.cores, waves * cyc / units)
    return est + INSTR_CYCLES * instr / cc.cores, m, nt, kmax, c1n, nc, rows, cols, units


def _add_dx_units(t: DxTiling, search: _TileSearch, fams: list, plane_positions: int, rows: int, cols: int) -> None:
    """The chosen tiling's units (group, phase, plane, first position, positions, n-tile) and
    their costs, ordered so units sharing a weight block run one after another on a core."""
    geo = search.geo
    Wd = geo.dxg.Wd
    if t.window:
        runs = [(r * Wd + c, min(t.m, Wd - c)) for r in range(plane_positions // Wd) for c in range(0, Wd, t.m)]
    else:
        runs = [(p0, min(t.m, plane_positions - p0)) for p0 in range(0, plane_positions, t.m)]
    for g in range(geo.G):
        for q, f in fams:
            for pl in range(geo.dxg.NP):
                for p0, mm in runs:
                    for j, (n0, nw) in enumerate(t.ntiles):
                        t.units.append((g, q, pl, p0, mm, j))
                        t.costs.append(_dx_unit_cost(search, f, mm, nw, t.kk, t.c1n, rows, t.nc, cols, t.hgroup)[0])
    # (group, phase, n-tile) outermost
    order = sorted(range(len(t.units)), key=lambda i: (t.units[i][0], t.units[i][1], t.units[i][5], t.units[i][2],
                                                       t.units[i][3]))
    t.units = [t.units[i] for i in order]
    t.costs = [t.costs[i] for i in order]


def plan_dx(geo: CubeGeometry, *, caps: CubeCaps, isz: int, c0: int, osz: int, forced: dict, buffers: int) -> DxTiling:
    """gradInput's tiling (phase 1): the L0 tile (baseM positions x baseN channels x baseK), the
    gradOutput C1 planes per L1 stage, and the units with their costs; the tile with the lowest
    estimate of cycles plus instructions wins. Forced fields are tried as they are."""
    search = _TileSearch(geo, caps, isz, c0, osz, buffers, *_forced_dx_tile(forced, c0))
    lay = geo.dxg
    fams = [(q, f) for q, f in enumerate(geo.phases) if f is not None]
    rows_needed = (lay.N - 1) * lay.pitch + geo.shmax[1] + geo.Qmax[1] if lay.fold else lay.pitch
    plane_positions = rows_needed * lay.Wd
    hgroup, best = _tap_groups_dx(search, _search_dx(search, fams, plane_positions), fams, plane_positions)
    if best is None:
        raise tiling_error(f"ConvolutionBackward gradInput tiling: no L0/L1 tile fits (L1 {caps.L1} B, L0A "
                           f"{caps.L0A} B, L0B {caps.L0B} B, L0C {caps.L0C} B); lower the tile overrides")
    _, m, nt, kmax, c1n, nc, rows, cols, _, window = best
    n16 = align_up(nt, 16)
    ntiles = [(n0, min(nt, geo.Cin - n0)) for n0 in range(0, geo.Cin, nt)]
    t = DxTiling(m, nt, kmax, c1n, nc, ntiles, c1n * rows * cols * c0 * isz,
                 c1n * max(tap_rows(f, hgroup)[0].Khw for _, f in fams) * n16 * c0 * isz, window=window,
                 hgroup=hgroup)
    _add_dx_units(t, search, fams, plane_positions, rows, cols)
    return t


def group_sizes(rows: int) -> list[int]:
    """Kernel rows per tap group worth trying, largest first: one size per count of groups."""
    return sorted({ceil_div(rows, n) for n in range(2, rows + 1)}, reverse=True)


def mostly_halo(ax: Axis, grid_rows: int) -> bool:
    """Whether a stage of `grid_rows` grid rows with every kernel row copies more map rows than
    stages of one kernel row each would copy together: only then are tap groups worth trying
    beside a whole kernel that fits (never at dilation 1; at rate 24, 3 grid rows read 51 map rows
    where three one-row stages read 9)."""
    run = (grid_rows - 1) * ax.s + 1
    return ax.K * run < run + (ax.K - 1) * ax.d


def _tap_groups_dx(search: _TileSearch, whole, fams: list, plane_positions: int):
    """(kernel rows per stage, candidate): tap groups where no tile fits with every kernel row in
    a stage, or where the whole kernel's stage is mostly halo and groups score lower with as many
    cores busy (as gradWeight's: grad_weight_tiling._tap_groups_dw); (0, whole) otherwise. A
    forced tile keeps the whole kernel where it fits."""
    KH = max(f.ax[1].K for _, f in fams)
    if KH == 1:
        return 0, whole
    if whole is not None:
        grid_rows = 1 if whole[-1] else _rows_for(whole[1], search.geo.dxg.Wd)
        if search.forced_tile or search.forced_k or not any(mostly_halo(f.ax[1], grid_rows) for _, f in fams):
            return 0, whole
    best, rows_best = None, 0
    for rows in group_sizes(KH):
        cand = _search_dx(search, fams, plane_positions, rows)
        if cand is not None and (best is None or cand[0] < best[0]):
            best, rows_best = cand, rows
    if best is None or (whole is not None and not (best[0] < whole[0] and best[-2] >= min(search.caps.cores,
                                                                                          whole[-2]))):
        return 0, whole
    return rows_best, best


def _search_dx(search: _TileSearch, fams: list, plane_positions: int, hgroup: int = 0):
    """The best gradInput candidate (plan_dx's), with its window flag, or None if no tile fits."""
    lay, cores = search.geo.dxg, search.caps.cores
    best, busy = None, 0
    # whole rows, smaller n-tiles only when none of the usual ones fits; then, where a row is longer
    # than whole rows' runs, W windows, the same way, where they score better with as many cores
    # busy (as gradWeight's: plan_dw)
    for window in (False, True):
        found = False
        for small in (False, True):
            if found or (small and search.forced_tile):
                continue
            for nt, m in _dx_tile_shapes(search, small, plane_positions):
                cand = _cost_dx_tile(search, fams, plane_positions, m, nt, window, hgroup)
                if cand is None or (window and cand[-1] < busy):
                    continue
                found = True
                if best is None or cand[0] < best[0]:
                    best = cand + (window,)
        if best is not None and lay.Wd <= best[1]:
            break                   # whole rows already run a row or more at a time: no window is longer
        busy = min(cores, best[-2]) if best is not None else 0
    return best


def _dx_unit_cost(search: _TileSearch, f, m, nt, kmax, c1n, rows, nc, cols, hgroup: int = 0):
    """Cycles of one gradInput unit of phase family f (m positions x nt channels, L0 steps of
    kmax, c1n gradOutput C1 planes of `rows` x `cols` dy positions per L1 stage, nc L0C tiles),
    and its L0 steps: per L1 stage, its L0 steps (Mmad against MTE1) or its copy-in (MTE2),
    whichever is longer; plus the L0C drain when it cannot overlap."""
    cc, isz, c0, Wm = search.caps, search.isz, search.c0, cols
    C1co = ceil_div(search.geo.Cout, c0)
    f, groups = tap_rows(f, hgroup)
    step = _step_cycles(cc, m, nt, kmax, isz, c0)
    cyc, nsteps = 0.0, 0
    for a in range(0, C1co, c1n):
        cn = min(c1n, C1co - a)
        ks = ceil_div(cn * f.Khw * c0, kmax)
        mte2 = 190 + (cn * rows * Wm * c0 * isz + cn * f.Khw * align_up(nt, 16) * c0 * isz) / cc.gm_l1
        cyc += max(ks * step, mte2)
        nsteps += ks
    drain = align_up(m, 16) * align_up(nt, 16) * 4 / 118 + 85
    stages = f.ax[0].K * groups             # every C1 run again per depth tap and tap group
    cyc = stages * cyc + (drain if nc == 1 else max(0.0, drain - cyc))
    return cyc, stages * nsteps


def window_columns(ax: Axis, cols: int, width: int) -> int:
    """Map columns a run of `cols` grid columns reads along W, at most the map's width."""
    return min((cols - 1) * ax.s + (ax.K - 1) * ax.d + 1, width)
