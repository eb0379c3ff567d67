"""The tiling CANN's Conv3DBackpropFilter (the TBE kernel aclnnConvolutionBackward launches for a
3D gradWeight in FP16 / BF16 on Atlas A2) gets from its cube "cache tiling": a search over the ways
to spread the GEMM over the cores, each priced by CANN's own cycle model of the kernel, the cheapest
kept. Read from CANN's open tiling sources (Hayden727/cann-ops, src/common/op_host/op_tiling/cube/:
algorithm/calculator/cycle_calculator.cc and conv3d_dw_cycle_calculator.cc, util/cube_util.cc and
math_util.cc, constants_define.h) and written here in our own terms; only the path CANN takes for
our calls is here (no full-load L1 patterns, groups of 1).

The GEMM, in 16-element fractals: M = Cout1 (gradOutput channels), N = Cin1 x kd x kh x kw (the
kernel's taps beside the input channels), K = Ho x Wo per (image, output depth) slice, summed over
the slices. The cores split images (batch_dim), output depths (d_dim), M (m_dim), Cin1 and the
depth taps (n_dim, kd_dim) and the positions of a slice (k_dim). Each core walks its N tiles, for
each its M tiles, and for each its slices and K stages, accumulating in L0C, and adds its tile into
the FP32 output once (an atomic add: the MemSet before the kernel zeroed it).

What we keep of it (DwSplit): the L0 tile (m_l0 x k_l0 x n_l0 fractals), the L1 stage of positions
(k_al1 fractals) and how many parts the reduction is cut into (batch_dim x d_dim x k_dim); the
kernel's units follow from those as ops/conv/tiling.py builds them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.arith import align_up, ceil_div

# CANN's cycle-model figures for the 910B ("k1971", constants_define.h), in cycles and bytes a cycle
MTE2_LATENCY = 300
GM_BYTES_PER_CYCLE = 96
L1_READ_BYTES_PER_CYCLE = 256
L0A_WRITE_BYTES_PER_CYCLE = 256
L0C_READ_BYTES_PER_CYCLE = 256
FIXPIPE_BYTES_PER_CYCLE = 128
LOAD2D_CYCLES = 20
LOAD3D_CYCLES = 42
MMAD_CYCLES = 20
FRACTAL = 256            # elements of a 16 x 16 fractal
# "the number of load2d instructions equals m_l0; when it reaches 60, L1 will not enable DB"
LOAD2D_DB_LIMIT = 60
# a split is kept only if it uses this share of the cores, where images x depths can fill them
CORE_USE = 0.8


@dataclass(frozen=True)
class DwProblem:
    """The call as the tiling sees it (2-byte operands, groups of 1)."""
    N: int
    Do: int
    cout1: int
    cin1: int
    kd: int
    kh: int
    kw: int
    Ho: int
    Wo: int
    Hi: int
    Wi: int
    sh: int
    sw: int
    dh: int
    dw: int
    pad_d: bool              # depth padding: an N tile may not span depth taps
    l1: int
    l0c: int
    cores: int
    itemsize: int = 2

    @property
    def k_fractals(self) -> int:
        return align_up(self.Ho * self.Wo, 16) // 16


@dataclass(frozen=True)
class DwSplit:
    """CANN's choice: the cores' split and the tile sizes, in fractals of 16."""
    batch_dim: int
    d_dim: int
    m_dim: int
    n_dim: int
    k_dim: int
    m_l0: int
    k_l0: int
    n_l0: int
    k_al1: int
    k_bl1: int
    cycles: int              # CANN's own estimate of the kernel

    @property
    def k_parts(self) -> int:
        """How many pieces the reduction (images x depths x positions) is cut into."""
        return self.batch_dim * self.d_dim * self.k_dim


def _divisors(x: int, most: int) -> list[int]:
    return [f for f in range(1, min(x, most) + 1) if x % f == 0]


def _split_factors(x: int, cores: int) -> list[int]:
    """The splits tried for an axis of x: its divisors and the cores' divisors up to x."""
    return sorted(set(_divisors(x, cores)) | set(_divisors(cores, min(cores, x))))


def _nearest_divisor(x: int, f: int) -> int:
    """The largest divisor of x not above f (x itself when f >= x)."""
    if f >= x:
        return x
    f = max(f, 1)
    while x % f:
        f -= 1
    return f


def _rows_read(p: DwProblem, positions: int) -> int:
    """Input rows an L1 stage of `positions` (a multiple of 16) reads, with the window's halo."""
    ho = ceil_div(positions, p.Wo) + (0 if positions % p.Wo == 0 or p.Wo % positions == 0 else 1)
    return min((ho - 1) * p.sh + (p.kh - 1) * p.dh + 1, p.Hi)


def _c1_read(p: DwProblem, n_fractals: int) -> int:
    """Input C1 planes an N tile of n_fractals reads (it may straddle a plane boundary)."""
    khw = p.kh * p.kw
    extra = (1 if khw % n_fractals else 0) if khw > n_fractals else \
        (0 if n_fractals % khw == 0 else 1 if 2 * n_fractals % khw == 0 else 2)
    return ceil_div(n_fractals, khw) + extra


def _al1_bytes(p: DwProblem, m_l0: int, k_al1: int, db: int) -> int:
    return m_l0 * 16 * k_al1 * 16 * db * p.itemsize


def _bl1_bytes(p: DwProblem, n_l0: int, k_bl1: int, db: int) -> int:
    return _rows_read(p, k_bl1 * 16) * p.Wi * _c1_read(p, n_l0) * 16 * db * p.itemsize


def _load3d_rate(p: DwProblem) -> int:
    """CANN's img2col rate into L0B (cube_util.cc): 512 B over the turns per 16 positions."""
    rows = (15 if 16 % p.Wo == 0 else 16) // p.Wi
    if p.sw == 1:
        return 512 // (rows + 4)
    if p.sw in (2, 4, 8):
        return 512 // (rows + 2 + 2 * p.sw)
    return 28


def _l0_tile(p: DwProblem, m_pc: int, n_total: int) -> tuple[int, int]:
    """CANN's GetMN0: the L0C tile (m_l0, n_l0) in fractals, the larger of two shapes (n first up
    to 16, or m first up to 16), each side a divisor of its extent, fitting L1 at one stage."""
    def fits(m, n):
        return _al1_bytes(p, m, 1, 1) + _bl1_bytes(p, n, 1, 1) <= p.l1

    def largest(cap, extent, ok):
        f = min(cap, extent)
        while f > 0 and (extent % f or not ok(f)):
            f -= 1
        return f

    n1 = largest(16, n_total, lambda n: fits(1, n))
    m1 = largest(min(128 // max(n1, 1), 64), m_pc, lambda m: fits(m, n1)) if n1 else 0
    m2 = largest(16, m_pc, lambda m: fits(m, 1))
    n2 = largest(min(128 // max(m2, 1), 64), n_total, lambda n: fits(m2, n)) if m2 else 0
    a, b = m1 * n1, m2 * n2
    if a != b:
        return (m1, n1) if a > b else (m2, n2)
    if abs(m1 - n1) != abs(m2 - n2):
        return (m1, n1) if abs(m1 - n1) < abs(m2 - n2) else (m2, n2)
    m = min(m1, m2)
    return m, a // max(m, 1)


def _cycles(p: DwProblem, split: tuple, m_l0: int, k_l0: int, n_l0: int, k_al1: int, k_bl1: int,
            batch_pc: int, m_pc: int, n_pc: int) -> tuple[int, int, int]:
    """CANN's cycle model of one core's work (neither operand held whole in L1): per N tile and M
    tile, per slice and per L1 stage, the larger of the stage's GM loads and its L0 steps (each the
    larger of the Mmad and its two MTE1 loads), plus the tile's Fixpipe. Returns (cycles, A's and
    B's L1 buffers)."""
    mte1_a = LOAD2D_CYCLES + k_l0 * FRACTAL * p.itemsize // L1_READ_BYTES_PER_CYCLE \
        + m_l0 * k_l0 * FRACTAL * p.itemsize // L0A_WRITE_BYTES_PER_CYCLE
    mte1_b = LOAD3D_CYCLES + k_l0 * n_l0 * FRACTAL * p.itemsize // _load3d_rate(p)
    mad = max(m_l0 * k_l0 * n_l0 + MMAD_CYCLES, mte1_a + mte1_b)
    mte2_a = MTE2_LATENCY + m_l0 * 16 * k_al1 * 16 * p.itemsize // GM_BYTES_PER_CYCLE
    c1 = ceil_div(n_l0, p.kh * p.kw)
    rows = _rows_read(p, k_bl1 * 16)
    mte2_b = MTE2_LATENCY + min(c1, rows) * max(c1, rows) * _bursts(min((p.Wo - 1) * p.sw + (p.kw - 1) * p.dw + 1, p.Wi)) \
        * FRACTAL * p.itemsize // GM_BYTES_PER_CYCLE
    l0c = m_l0 * n_l0 * FRACTAL * 4
    fixpipe = l0c // L0C_READ_BYTES_PER_CYCLE + l0c // FIXPIPE_BYTES_PER_CYCLE
    k_dim = split[4]
    k_pc = ceil_div(p.k_fractals, k_dim)
    m_tiles, n_tiles = ceil_div(m_pc, m_l0), ceil_div(n_pc, n_l0)
    db_a = 2 if 2 * _al1_bytes(p, m_l0, k_al1, 1) + _bl1_bytes(p, n_l0, k_bl1, 1) <= p.l1 else 1
    db_b = 2 if _al1_bytes(p, m_l0, k_al1, db_a) + 2 * _bl1_bytes(p, n_l0, k_bl1, 1) <= p.l1 else 1
    loads = ceil_div(min(k_al1, k_bl1), k_l0) * m_l0
    lo, hi = min(k_al1, k_bl1), max(k_al1, k_bl1)
    ratio = hi // lo
    if k_al1 == k_bl1:
        step = k_al1 // k_l0 * mad
        stage = max(mte2_a + mte2_b, step) if db_a == db_b == 2 and loads < LOAD2D_DB_LIMIT else mte2_a + mte2_b + step
        total = n_tiles * m_tiles * (batch_pc * (k_pc // k_al1) * stage + fixpipe)
    else:
        inner_load, outer_load = (mte2_b, mte2_a) if k_al1 > k_bl1 else (mte2_a, mte2_b)
        inner_db, outer_db = (db_b, db_a) if k_al1 > k_bl1 else (db_a, db_b)
        step = lo // k_l0 * mad
        inner = max(inner_load, step) if inner_db == 2 and loads < LOAD2D_DB_LIMIT else inner_load + step
        outer = max(outer_load, ratio * inner) if outer_db == 2 and loads * ratio < LOAD2D_DB_LIMIT \
            else outer_load + ratio * inner
        total = n_tiles * m_tiles * (batch_pc * (k_pc // hi) * outer + fixpipe)
    return total, db_a, db_b


def _bursts(width: int) -> int:
    """GM -> L1 bursts of a row of `width` C0 vectors in CANN's cost: the row split into runs of
    16, 8, 4, 2 and 1 (cube_util.cc's packing of 512-B lines)."""
    one, two, four, eight = width & 1, (width >> 1) & 1, (width >> 2) & 1, (width >> 3) & 1
    both = min(one, two)
    return (one - both) + (two - both) + both + four + eight + (width >> 4)


def _l1_depths(p: DwProblem, m_l0: int, k_l0: int, n_l0: int, k_pc: int) -> tuple[int, int]:
    """k_al1 and k_bl1 (fractals of K per L1 stage, one buffer each as the search sizes them): B
    takes the rows L1 has room for beside one A step, A what is left; each a multiple of k_l0
    dividing the core's K, the larger a multiple of the smaller."""
    steps = k_pc // k_l0
    remain = p.l1 - _al1_bytes(p, m_l0, k_l0, 1)
    rows = remain // (p.Wi * _c1_read(p, n_l0) * 16 * p.itemsize)
    ho = (rows - p.dh * (p.kh - 1) - 1) // p.sh + 1
    t = _nearest_divisor(steps, max(min(ceil_div(ho * p.Wo, 16) // k_l0, steps), 1) if ho > 0 else steps)
    while t > 1 and _bl1_bytes(p, n_l0, t * k_l0, 1) > remain:
        t = _nearest_divisor(steps, t - 1)
    k_bl1 = t * k_l0
    room = p.l1 - _bl1_bytes(p, n_l0, k_bl1, 1)
    k_al1 = _nearest_divisor(steps, min(room // (m_l0 * 16 * 16 * p.itemsize), k_pc) // k_l0) * k_l0

    def unsettled(a, b):
        return (a % b and b % a) or k_pc % max(a, b) or \
            _al1_bytes(p, m_l0, a, 1) + _bl1_bytes(p, n_l0, b, 1) > p.l1
    if k_al1 > k_bl1 and k_al1 % k_bl1:
        while k_al1 > k_l0 and unsettled(k_al1, k_bl1):
            k_al1 -= k_l0
    elif k_bl1 > k_al1 and k_bl1 % k_al1:
        while k_bl1 > k_l0 and unsettled(k_al1, k_bl1):
            k_bl1 -= k_l0
    return max(k_al1, k_l0), max(k_bl1, k_l0)


def cann_dw_split(p: DwProblem) -> DwSplit | None:
    """The split and tiles CANN's cache tiling picks for this call, or None if none fits."""
    best = None
    cores = p.cores
    k_total = p.k_fractals
    prune = p.N * p.Do >= cores

    def search(pruned: bool):
        nonlocal best
        for d_dim in _divisors(p.Do, cores):
            for kd_dim in _divisors(p.kd, cores):
                for b_dim in _split_factors(p.N, cores):
                    if d_dim * kd_dim * b_dim > cores:
                        break
                    if p.Do > 1 and d_dim > 1:
                        slices = ceil_div(p.N, b_dim) * (p.Do // d_dim)
                        if (slices > p.Do and slices % p.Do) or (slices < p.Do and p.Do % slices):
                            continue
                    n_factors = _split_factors(p.cin1, cores) if p.kd == 1 else _divisors(p.cin1, cores)
                    for n_dim in n_factors:
                        for m_dim in _split_factors(p.cout1, cores):
                            used = d_dim * kd_dim * b_dim * n_dim * m_dim
                            if used > cores:
                                break
                            k_dim = min(cores // used, k_total)
                            if k_dim < 1 or (pruned and used * k_dim < math.ceil(cores * CORE_USE)):
                                continue
                            cand = _price(p, (b_dim, d_dim, m_dim, n_dim, k_dim, kd_dim))
                            if cand is not None and (best is None or cand.cycles < best.cycles):
                                best = cand

    search(prune)
    if best is None and prune:
        search(False)
    return best


def _price(p: DwProblem, split: tuple) -> DwSplit | None:
    b_dim, d_dim, m_dim, n_dim, k_dim, kd_dim = split
    batch_pc = ceil_div(p.N, b_dim) * (p.Do // d_dim)
    m_pc = ceil_div(p.cout1, m_dim)
    cin_pc = ceil_div(p.cin1, n_dim) if p.kd == 1 else p.cin1 // n_dim
    n_pc = cin_pc * p.kh * p.kw * (p.kd // kd_dim)
    n_total = cin_pc * p.kh * p.kw if (p.kd > 1 and p.pad_d) else n_pc
    k_pc = ceil_div(p.k_fractals, k_dim)
    m_l0, n_l0 = _l0_tile(p, m_pc, n_total)
    if not (m_l0 and n_l0):
        return None
    k_l0 = min(k_pc, 64 // m_l0, 64 // n_l0)
    while k_l0 > 1 and (k_pc % k_l0 or _al1_bytes(p, m_l0, k_l0, 1) + _bl1_bytes(p, n_l0, k_l0, 1) > p.l1):
        k_l0 = _nearest_divisor(k_pc, k_l0 - 1)
    k_l0 = max(k_l0, 1)
    k_al1, k_bl1 = _l1_depths(p, m_l0, k_l0, n_l0, k_pc)
    cycles, _, _ = _cycles(p, split, m_l0, k_l0, n_l0, k_al1, k_bl1, batch_pc, m_pc, n_pc)
    return DwSplit(b_dim, d_dim, m_dim, n_dim * kd_dim, k_dim, m_l0, k_l0, n_l0, k_al1, k_bl1, cycles)
