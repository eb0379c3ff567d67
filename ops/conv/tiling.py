"""Host-side tiling of the two GEMMs (part of phase 1's plan, after make_cube_geometry): L0 tiles,
L1 stages and units for gradInput (`plan_dx`) and gradWeight (`plan_dw`), each unit costed so the
units can be balanced over the AICs; forced tiling fields are applied here and a forced tile that
does not fit is 561002.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from simulator.arith import align_up, ceil_div
from ..common import tiling_error, ub_bytes
from .cann_dw_tiling import DwProblem, cann_dw_split
from .geometry import Axis, CubeGeometry


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


def _cost_dx_tile(search: _TileSearch, fams: list, plane_positions: int, m: int, nt: int, window: bool = False):
    """One gradInput tile's score (estimated cycles plus instructions at INSTR_CYCLES) with the
    L1 stage it allows and its units: (score, m, nt, kmax, c1n, nc, rows, cols, units), or None if
    it does not fit.
    window: a unit is a run of one grid row (DxTiling.window), at most the row."""
    geo, cc, isz, c0, nb = search.geo, search.caps, search.isz, search.c0, search.buffers
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
    rows = min(rows, geo.dy.R)
    cols = max(window_columns(f.ax[2], m, geo.dy.Wd) for _, f in fams) if window else geo.dy.Wd
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
    for q, f in fams:
        nu = runs * geo.dxg.NP * ceil_div(geo.Cin, nt) * geo.G
        per_unit, nsteps = _dx_unit_cost(search, f, m, nt, kmax, c1n, rows, nc, cols)
        units += nu
        cyc += nu * per_unit
        instr += nu * (nsteps * 7 + f.ax[0].K * stages_per * 6 + 10)
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
                        t.costs.append(_dx_unit_cost(search, f, mm, nw, t.kk, t.c1n, rows, t.nc, cols)[0])
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
                cand = _cost_dx_tile(search, fams, plane_positions, m, nt, window)
                if cand is None or (window and cand[-1] < busy):
                    continue
                found = True
                if best is None or cand[0] < best[0]:
                    best = cand + (window,)
        if best is not None and lay.Wd <= best[1]:
            break                   # whole rows already run a row or more at a time: no window is longer
        busy = min(caps.cores, best[-2]) if best is not None else 0
    if best is None:
        raise tiling_error(f"ConvolutionBackward gradInput tiling: no L0/L1 tile fits (L1 {caps.L1} B, L0A "
                           f"{caps.L0A} B, L0B {caps.L0B} B, L0C {caps.L0C} B); lower the tile overrides")
    _, m, nt, kmax, c1n, nc, rows, cols, _, window = best
    n16 = align_up(nt, 16)
    ntiles = [(n0, min(nt, geo.Cin - n0)) for n0 in range(0, geo.Cin, nt)]
    t = DxTiling(m, nt, kmax, c1n, nc, ntiles, c1n * rows * cols * c0 * isz,
                 c1n * max(f.Khw for _, f in fams) * n16 * c0 * isz, window=window)
    _add_dx_units(t, search, fams, plane_positions, rows, cols)
    return t


def _dx_unit_cost(search: _TileSearch, f, m, nt, kmax, c1n, rows, nc, cols):
    """Cycles of one gradInput unit of phase family f (m positions x nt channels, L0 steps of
    kmax, c1n gradOutput C1 planes of `rows` x `cols` dy positions per L1 stage, nc L0C tiles),
    and its L0 steps: per L1 stage, its L0 steps (Mmad against MTE1) or its copy-in (MTE2),
    whichever is longer; plus the L0C drain when it cannot overlap."""
    cc, isz, c0, Wm = search.caps, search.isz, search.c0, cols
    C1co = ceil_div(search.geo.Cout, c0)
    step = _step_cycles(cc, m, nt, kmax, isz, c0)
    cyc, nsteps = 0.0, 0
    for a in range(0, C1co, c1n):
        cn = min(c1n, C1co - a)
        ks = ceil_div(cn * f.Khw * c0, kmax)
        mte2 = 190 + (cn * rows * Wm * c0 * isz + cn * f.Khw * align_up(nt, 16) * c0 * isz) / cc.gm_l1
        cyc += max(ks * step, mte2)
        nsteps += ks
    drain = align_up(m, 16) * align_up(nt, 16) * 4 / 118 + 85
    cyc = f.ax[0].K * cyc + (drain if nc == 1 else max(0.0, drain - cyc))
    return cyc, f.ax[0].K * nsteps


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
    c1nB = min(ceil_div(geo.Cb, c0), ceil_div(nt, geo.dwf.Khw * c0) + 1)
    c1nA = ceil_div(mt, c0) + (0 if mt % c0 == 0 else 1)
    rows = _rows_for(kc, alay.Wd)
    sa = c1nA * min(rows, alay.R) * alay.Wd * c0 * isz
    sb = c1nB * min(_window_rows(geo.dwf.ax[1], rows), blay.R) * blay.Wd * c0 * isz
    return sa, sb


def window_columns(ax: Axis, cols: int, width: int) -> int:
    """Map columns a run of `cols` grid columns reads along W, at most the map's width."""
    return min((cols - 1) * ax.s + (ax.K - 1) * ax.d + 1, width)


def _dw_stage(search: _TileSearch, mt: int, nt: int, kmax: int, nd2nz: bool, window: bool = False):
    """The deepest L1 stage (positions kc, a multiple of the L0 step) whose A and B slabs fit L1
    with their buffers: (kc, A slab bytes, B slab bytes), or None. window: a stage is a run of
    one grid row and the map columns it reads (DwTiling.window), kc at most the row."""
    geo, isz, c0 = search.geo, search.isz, search.c0
    f = geo.dwf
    alay = geo.dy if geo.amap == "dy" else geo.x
    blay = geo.x if geo.amap == "dy" else geo.dy
    c1nB = min(ceil_div(geo.Cb, c0), ceil_div(nt, f.Khw * c0) + 1)
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


def _units_of(best: tuple, geo: CubeGeometry, ncols: int) -> int:
    """A gradWeight candidate's units: its tiles times its K split."""
    _, mt, nt, _, _, ks = best[:6]
    return geo.G * geo.dwf.ax[0].K * ceil_div(geo.Mg, mt) * ceil_div(ncols, nt) * ks


def _cost_dw_tile(search: _TileSearch, mt: int, nt: int, ncols: int, K_total: int, o_ks, nd2nz: bool,
                  window: bool = False):
    """One gradWeight tile's best K split, scored as _cost_dx_tile scores: (score, mt, nt,
    kmax, kc, ks, A slab, B slab), or None if it does not fit."""
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
    tiles = geo.G * geo.dwf.ax[0].K * ceil_div(geo.Mg, mt) * ceil_div(ncols, nt)
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
                for col0 in range(0, ncols, t.nt):
                    ncol = min(t.nt, ncols - col0)
                    mm = min(t.mt, geo.Mg - m0)
                    for part in parts:
                        npos = sum(p[2] for p in part)
                        t.units.append((g, kd, m0, mm, col0, ncol, part))
                        t.costs.append(ceil_div(npos, t.kk) * _step_cycles(search.caps, mm, ncol, t.kk, search.isz,
                                                                           search.c0) + 300)


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
                cand = _cost_dw_tile(search, mt, nt, ncols, K_total, o_ks, nd2nz, window)
                if cand is None or (window and busy and _units_of(cand, geo, ncols) < busy):
                    continue
                found = True
                if best is None or cand[0] < best[0]:
                    best = cand + (window,)
        if best is not None and geo.dwf.ax[2].Q <= best[4]:
            break                   # whole rows already stage a row or more at a time: no window is longer
        busy = min(search.caps.cores, _units_of(best, geo, ncols)) if best is not None else 0
    if best is None:
        raise tiling_error(f"ConvolutionBackward gradWeight tiling: no L0/L1 tile fits (L1 {caps.L1} B, L0A "
                           f"{caps.L0A} B, L0B {caps.L0B} B, L0C {caps.L0C} B); lower the tile overrides")
    _, mt, nt, kk, kc, ks, sa, sb, window = best
    t = DwTiling(mt, nt, kk, kc, ks, sa, sb, a_nd2nz=nd2nz, window=window)
    _add_dw_units(t, search, ncols, nd2nz)
    t.atomic = t.ks > 1 or not geo.x.fold
    return t
