"""The convolution-backward computation shared by aclnnConvolutionBackward and
aclnnConvTbcBackward: the plan (workspace parts, tiling, launches) and the kernels.

Three launches do the work (docs/CONVOLUTION.md has the pictures and the measured table):

1. **Prologue** (vector, all AIVs): TransData of gradOutput and input from NC[D]HW to tall
   NC1HWC0 maps in the workspace (cast to the Cube's dtype, channels padded to C0, and for 1D/2D
   the batch folded into H: image n's rows start at n * pitch, with zero gap rows between images
   so that one load3d window never mixes two images), the weight packed into the gradInput right
   operand (taps flipped, channel roles swapped, already in L0B's zN fractal order, one block per
   n-tile), and the FP32 gradWeight accumulator zeroed when partial sums meet there.
2. **Cube** (all AICs): gradInput and gradWeight as img2col GEMMs, both fed by load3d straight
   from the NC1HWC0 maps in L1.
   * gradInput of a stride-s convolution is split into s^d sub-pixel phases: output positions
     r + s*i of phase r only see the taps k with (r + p - k*d) % s == 0, each a dense stride-1
     convolution of gradOutput (no zero insertion, no wasted MACs). A = load3d(dy slab) (positions
     x (c1, kh, kw, c0)), B = packed weight (load2d, whole L0B tile per instruction), Mmad into
     L0C, Fixpipe NZ -> the phase grid in NC1HWC0 (A2), or L0C -> UB -> GM (coupled chips).
   * gradWeight: A = dy^T by load3d with a 1x1 window and enTranspose (channels x positions),
     B = load3d img2col of the input slab into L0B (positions x (c1, kh, kw, c0)), Mmad
     accumulating over the positions in L0C; partial sums of K-split tiles meet in an FP32
     accumulator by atomic add, unsplit tiles are written once in the output dtype. (32-bit
     compute dtypes have no load3d transpose: A comes from gradOutput by ND->NZ then.)
   Both run double-buffered in L1 (a stage = one feature-map slab + one right-operand chunk,
   reused by all of its L0 steps) and in L0A/L0B (one load per operand and one Mmad per step),
   with explicit flags; units are balanced over the 24 AICs by a host-side cost estimate.
3. **Epilogue** (vector): the phase grids interleaved and transposed back to NC[D]HW, the
   gradWeight accumulator cast and reordered to (C_out, C_in/g, k...).
gradBias is a vector reduction of gradOutput (its own launch, only when asked for).
Non-contiguous inputs are made contiguous first and non-contiguous outputs written back by
ViewCopy, as CANN's l0op does. Every intermediate buffer is a named workspace part.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from simulator.aclnn import Plan, tiling_override
from simulator.enums import AclnnError, aclnnStatus, dtype_name
from simulator.kernel import (GM_ADDR, Add, Cast, DataCopy, DataCopyExtParams, DataCopyPad,
                              DataCopyParams, Duplicate, GetBlockIdx, GlobalTensor, HardEvent, LocalTensor,
                              PipeBarrier, PIPE_ALL, RoundMode, SetAtomicAdd, SetAtomicNone,
                              SetFlag, TBuf, TPipe, TPosition, TQue, WaitFlag, float32)
from simulator.kernel.cube import (CFG_NZ, BlockMode, DataCopyEnhancedParams, DeqScale, Fixpipe,
                                   FixpipeParamsV220, InitConstValue, InitConstValueParams,
                                   LoadData, LoadData2DParams, LoadData3DParamsV2, Mmad, MmadParams,
                                   Nd2NzParams, SetHF32Mode, TransposeParamsExt, TransposeType)
from simulator.kernel.cube import Transpose as TransposeExt
from simulator.machine import KernelLaunch, align_up, ceil_div

from .common import tensor_arg, ub_bytes, vector_core_count, view_copy_launch, workspace_arg

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
STORAGE = {"FLOAT16": F16, "BF16": BF16, "FLOAT": F32, "HF32": F32}
NCHW2NHWC, NHWC2NCHW = TransposeType.TRANSPOSE_NCHW2NHWC, TransposeType.TRANSPOSE_NHWC2NCHW


def nhwc2nchw(n, h, w, c) -> TransposeParamsExt:
    """(n, h, w, c) -> (n, c, h, w)."""
    return TransposeParamsExt(n, c, h, w, NHWC2NCHW)


def tiling_error(msg: str) -> AclnnError:
    return AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR, msg)


# =============================================================================================
# geometry
# =============================================================================================
@dataclass(frozen=True)
class Axis:
    """One axis of one img2col family: output o (0-based, true index) reads map index
    o*s - P + t*d for img2col tap t < K; taps[t] is the original kernel index of tap t. Q valid
    outputs per image. P < 0 (a crop) only occurs with s == 1 (gradInput phases): load3d then
    pads max(P, 0) and the grid is shifted by sh = max(-P, 0)."""
    s: int
    d: int
    P: int
    taps: tuple
    Q: int

    @property
    def K(self) -> int:
        return len(self.taps)

    @property
    def pad(self) -> int:
        return max(self.P, 0)

    @property
    def sh(self) -> int:
        return max(-self.P, 0)


def forward_axis(s, d, p, k, Q) -> Axis:
    return Axis(s, d, p, tuple(range(k)), Q)


def phase_axes(X: int, O: int, k: int, s: int, d: int, p: int) -> list[Axis]:
    """The s sub-pixel phases of a stride-s transposed convolution along one axis (gradInput of
    a convolution): dX[r + s*i] = sum over taps kk with (r + p - kk*d) % s == 0 of
    dy[(r + p - kk*d)/s + i] * w[kk]: a stride-1 convolution of dy (taps in increasing dy
    offset, i.e. flipped), dilation d/gcd(s, d). A phase with no tap has K == 0."""
    out = []
    for r in range(s):
        Q = max(0, ceil_div(X - r, s))
        taps = [kk for kk in range(k) if (r + p - kk * d) % s == 0][::-1]
        if not taps or Q == 0:
            out.append(Axis(1, 1, 0, (), Q))
            continue
        offs = [(r + p - kk * d) // s for kk in taps]
        dd = offs[1] - offs[0] if len(taps) > 1 else 1
        out.append(Axis(1, dd, -offs[0], tuple(taps), Q))
    return out


def axis_window(ax: Axis, o0: int, cnt: int, length: int):
    """Map rows a run of grid rows [o0, o0 + cnt) (grid index, shift included) reads along H:
    (lo, rows, pad_before, pad_after); rows 0 if the window misses the map."""
    v0 = o0 * ax.s - ax.pad
    ext = (cnt - 1) * ax.s + ax.d * (max(ax.K, 1) - 1) + 1
    lo, hi = max(v0, 0), min(v0 + ext, length)
    if hi <= lo:
        return 0, 0, 0, 0
    before = lo - v0
    return lo, hi - lo, before, ext - before - (hi - lo)


@dataclass(frozen=True)
class Lay:
    """A tall NC1HWC0 layout: blocks (g, c1[, phase]) of NP planes x R rows x Wd columns of C0
    values. 1D/2D (fold): the batch is folded into the rows, image n's rows start at n * pitch
    (rows beyond its H are zero gap rows for maps, junk for grids), NP = 1. 3D: plane
    n * D + depth, R = rows per image."""
    N: int
    fold: bool
    D: int
    H: int
    pitch: int
    Wd: int

    @property
    def NP(self) -> int:
        return 1 if self.fold else self.N * self.D

    @property
    def R(self) -> int:
        return self.N * self.pitch if self.fold else self.pitch

    @property
    def plane(self) -> int:
        return self.R * self.Wd

    @property
    def block(self) -> int:
        return self.NP * self.plane

    def img(self, n: int) -> int:
        """Position of image n's first element (depth 0, row 0)."""
        return n * self.pitch * self.Wd if self.fold else n * self.D * self.plane


def wpad(ax: Axis, Wm: int, Wg: int) -> tuple[int, int]:
    """load3d left / right padding along W for a grid Wg wide over a map Wm wide."""
    left = ax.pad
    right = (Wg - 1) * ax.s + ax.d * (ax.K - 1) + 1 - Wm - left
    if right < 0:
        right = 0
        got = (Wm + left - ax.d * (ax.K - 1) - 1) // ax.s + 1
        assert got == Wg, (got, Wg, ax, Wm)
    return left, right


@dataclass
class Fam:
    """One img2col family: per axis (D, H, W) and the load3d W padding."""
    ax: tuple
    left: int
    right: int

    @property
    def Khw(self) -> int:
        return self.ax[1].K * self.ax[2].K


def _load3d_limits(fam: Fam, what: str) -> None:
    """load3d's padding fields are [0, 255]: a transposed convolution whose img2col needs more
    padding cannot be tiled (561002). (Filter, dilation and stride limits are the operator's
    checks on A2; elsewhere they fault in the kernel, as on the hardware.)"""
    msgs = []
    for name, ax in (("H", fam.ax[1]), ("W", fam.ax[2])):
        if ax.pad > 255:
            msgs.append(f"a load3d padding of {ax.pad} (> 255) along {name}")
    if fam.right > 255:
        msgs.append(f"a load3d right padding of {fam.right} (> 255)")
    if msgs:
        raise tiling_error(f"{what}: the img2col needs {'; '.join(msgs)}, which does not fit load3d's padList")


def _pad3(t, fill):
    return (fill,) * (3 - len(t)) + tuple(t)


@dataclass
class Geo:
    """The call's two GEMM families and the layouts of their maps and grids."""
    nd: int
    N: int
    G: int
    Cin: int              # per group
    Cout: int             # per group
    transposed: bool
    X: tuple              # input spatial (D, H, W)
    O: tuple              # gradOutput spatial
    k: tuple
    fold: bool
    dy: Lay               # gradOutput map
    x: Lay                # input map
    # gradInput
    S: tuple              # phases per axis (sd, sh, sw)
    phases: list          # per phase q: Fam or None (no tap)
    dxg: Lay              # the phase grid (one per phase)
    Qmax: tuple           # valid outputs per phase, max over phases, per axis
    shmax: tuple          # grid shift, max over phases, per axis (H, W; D has none)
    # gradWeight
    dwf: Fam
    Mg: int               # rows of dW per group (A-map channels)
    Cb: int               # B-map channels per group
    amap: str             # "dy" or "x": the A-map (its layout is the grid)
    bmap: str
    s2d: "S2D | None" = None   # gradWeight over the input folded 2x2 into channels (conv1-like layers)

    @property
    def nphase(self) -> int:
        return self.S[0] * self.S[1] * self.S[2]


@dataclass(frozen=True)
class S2D:
    """gradWeight of a stride-2 convolution with few input channels, over the input folded 2x2
    into channels: x'[i][j][(ph, pw, c)] = x[2i + ph - eh][2j + pw] (C padded to cp = C0 / 4 per
    phase, so 16 lanes hold 4 phases x cp channels instead of 16 lanes holding C of them). The
    convolution becomes stride 1 with taps t, the original tap k = 2t + phase + delta (k outside
    [0, K) is a tap the weight does not have: its gradient is computed and dropped)."""
    Cin: int
    cp: int
    eh: int
    Xh: int               # x' rows / columns per image
    Xw: int
    Kh: int               # taps of the folded convolution
    Kw: int
    dh: int               # delta: k = 2t + phase + delta
    dw: int
    K: tuple              # original kernel (KH, KW)


def _s2d_axis(X, k, p, e):
    pairs = [(kk, ph) for kk in range(k) for ph in (0, 1) if (kk - p + e - ph) % 2 == 0]
    a = [(kk - p + e - ph) // 2 for kk, ph in pairs]
    amin, amax = min(a), max(a)
    return (X + e + 1) // 2, amax - amin + 1, -amin, 2 * amin + p - e


def _s2d_geo(geom, c0, mask) -> S2D | None:
    """The folded gradWeight applies to 2D, groups 1, stride 2 x 2, dilation 1, 4 * C_in <= C0
    (16-bit), an input width whose rows stay 32-B aligned, and a requested gradWeight."""
    if (geom.nd != 2 or geom.transposed or geom.groups != 1 or tuple(geom.stride) != (2, 2)
            or tuple(geom.dilation) != (1, 1) or c0 != 16 or 4 * geom.Cin > c0 or not mask[1]
            or geom.in_sp[1] % 16 or geom.Cout % 16):
        return None
    (kh, kw), (ph, pw) = geom.k, (geom.pad[0][0], geom.pad[1][0])
    Xh, Kh, Ph, dh = _s2d_axis(geom.in_sp[0], kh, ph, ph % 2)
    Xw, Kw, Pw, dw = _s2d_axis(geom.in_sp[1], kw, pw, 0)
    return S2D(geom.Cin, c0 // 4, ph % 2, Xh, Xw, Kh, Kw, dh, dw, (kh, kw)), (Ph, Pw)


def make_geo(geom, mask, c0: int = 16) -> Geo:
    nd, N, G = geom.nd, geom.N, geom.groups
    k3, s3, d3 = _pad3(geom.k, 1), _pad3(geom.stride, 1), _pad3(geom.dilation, 1)
    pb3 = _pad3(tuple(p[0] for p in geom.pad), 0)
    X3, O3 = _pad3(geom.in_sp, 1), _pad3(geom.out_sp, 1)
    fold = nd < 3
    Cin, Cout = geom.Cin // G, geom.Cout // G
    sd = _s2d_geo(geom, c0, mask)
    if sd is not None:
        sd, (Ph, Pw) = sd
    if not geom.transposed:
        fw = tuple(forward_axis(s3[a], d3[a], pb3[a], k3[a], O3[a]) for a in range(3))
        if sd is not None:
            fw = (fw[0], forward_axis(1, 1, Ph, sd.Kh, O3[1]), forward_axis(1, 1, Pw, sd.Kw, O3[2]))
        ph = [phase_axes(X3[a], O3[a], k3[a], s3[a], d3[a], pb3[a]) for a in range(3)]
        S = tuple(len(p) for p in ph)
        # pitches (fold axis H): dy rows per image Pd, x rows per image Px = s_h * Pd
        O, X, k, s, d, p = O3[1], X3[1], k3[1], s3[1], d3[1], pb3[1]
        if fold:
            req = [O]
            if mask[1] and sd is not None:
                after = max(0, (O - 1) - Ph + (sd.Kh - 1) - (sd.Xh - 1))
                req.append(sd.Xh + max(Ph, after))
            elif mask[1]:
                after = max(0, (O - 1) * s - p + (k - 1) * d - (X - 1))
                req.append(ceil_div(X + max(p, after), s))
            if mask[0]:
                for a in ph[1]:
                    if a.K:
                        req += [a.Q + a.sh, O + a.pad, a.Q - 1 - a.P + (a.K - 1) * a.d + 1]
                req.append(max(a.sh for a in ph[1]) + max(a.Q for a in ph[1]))
            Pd = max(req)
            Px = Pd if sd is not None else s * Pd
        else:
            Pd, Px = O, X
        dy = Lay(N, fold, O3[0], O3[1], Pd, O3[2])
        x = Lay(N, fold, X3[0], X3[1], Px, X3[2]) if sd is None else Lay(N, fold, 1, sd.Xh, Px, sd.Xw)
        # the phase grid: rows per image (fold: the dy pitch; 3D: enough for every phase),
        # width enough for every phase's valid outputs after its shift
        Qmax = tuple(max(a.Q for a in ph[i]) for i in range(3))
        shmax = (0, max(a.sh for a in ph[1]), max(a.sh for a in ph[2]))
        Wg = shmax[2] + Qmax[2]
        for a in ph[2]:
            if a.K:
                Wg = max(Wg, O3[2] + a.pad - a.d * (a.K - 1))
        Hg = Pd if fold else shmax[1] + Qmax[1]
        dxg = Lay(N, fold, Qmax[0], Qmax[1], Hg, Wg)
        phases = []
        for rd in range(S[0]):
            for rh in range(S[1]):
                for rw in range(S[2]):
                    axs = (ph[0][rd], ph[1][rh], ph[2][rw])
                    if min(a.K for a in axs) == 0 or min(a.Q for a in axs) == 0:
                        phases.append(None)
                        continue
                    left, right = wpad(axs[2], O3[2], Wg)
                    phases.append(Fam(axs, left, right))
        left, right = wpad(fw[2], x.Wd, O3[2])
        dwf = Fam(fw, left, right)
        return Geo(nd, N, G, Cin, Cout, False, X3, O3, k3, fold, dy, x, S, phases, dxg, Qmax, shmax,
                   dwf, Cout, c0 if sd is not None else Cin, "dy", "x", sd)
    # transposed: gradInput is a plain stride-s convolution of dy; gradWeight = x^T img2col(dy)
    fw = tuple(forward_axis(s3[a], d3[a], pb3[a], k3[a], X3[a]) for a in range(3))
    O, X, k, s, d, p = O3[1], X3[1], k3[1], s3[1], d3[1], pb3[1]
    if fold:
        after = max(0, (X - 1) * s - p + (k - 1) * d - (O - 1))
        Px = max(X, ceil_div(O + max(p, after), s))
        Pd = s * Px
    else:
        Pd, Px = O, X
    dy = Lay(N, fold, O3[0], O3[1], Pd, O3[2])
    x = Lay(N, fold, X3[0], X3[1], Px, X3[2])
    left, right = wpad(fw[2], O3[2], X3[2])
    fam = Fam(fw, left, right)
    return Geo(nd, N, G, Cin, Cout, True, X3, O3, k3, fold, dy, x, (1, 1, 1), [fam], x, X3, (0, 0, 0),
               fam, Cin, Cout, "x", "dy")


# =============================================================================================
# tiling
# =============================================================================================
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


def _balance(costs: list[float], blocks: int) -> tuple[list[list[int]], float]:
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


def _pick(ov: dict, key: str, gen: str):
    v = ov.get(key, ov.get(gen))
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
    tile that does not fit is a tiling error saying what does not fit."""
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


def plan_dx(geo: Geo, cc: CubeCaps, isz: int, c0: int, osz: int, ov: dict, nb: int) -> DxTiling:
    C1co = ceil_div(geo.Cout, c0)
    lay = geo.dxg
    Wg = lay.Wd
    fams = [(q, f) for q, f in enumerate(geo.phases) if f is not None]
    Khw_max = max(f.Khw for _, f in fams)
    rows_needed = (lay.N - 1) * lay.pitch + geo.shmax[1] + geo.Qmax[1] if lay.fold else lay.pitch
    M_plane = rows_needed * Wg
    nplanes = lay.NP
    o_m, o_n, o_k = _pick(ov, "dxBaseM", "baseM"), _pick(ov, "dxBaseN", "baseN"), _pick(ov, "dxBaseK", "baseK")
    if o_k is not None and o_k % c0:
        raise tiling_error(f"tiling override: dxBaseK {o_k} must be a multiple of C0 = {c0}")
    Cin16 = align_up(geo.Cin, 16)
    nts = [o_n] if o_n else sorted({min(Cin16, 256), min(Cin16, 128), min(Cin16, 64)}, reverse=True)
    if o_m:
        ms = [o_m]
    else:
        ms = sorted({min(align_up(M_plane, 16), v) for v in range(16, 4096, 16)})
    best = None
    for nt in nts:
        n16 = align_up(nt, 16)
        for m in ms:
            m16 = align_up(m, 16)
            kmax = _l0_k_room("gradInput", cc, nb, isz, m, nt, c0, o_k, bool(o_m or o_n))
            if kmax is None or not (o_m or o_n or cc.stages(m, nt, osz)):
                continue
            nc = 2 if 2 * m16 * n16 * 4 <= cc.L0C else 1
            if m > 4095 or nt > 4095:
                raise tiling_error(f"ConvolutionBackward gradInput tiling: an Mmad of m={m}, n={nt} does not fit "
                                   f"Mmad's [1, 4095] range")
            # L1: dy slab (all rows the tile's grid rows read) + weight chunk, per stage, double-buffered
            # the dy rows a tile's grid rows read: (rows - 1) * stride + the window's reach; stride
            # is 1 for the phases of a convolution's gradInput, s for a transposed one's
            rows = max(_window_rows(f.ax[1], _rows_for(m, Wg)) for _, f in fams)
            rows = min(rows, geo.dy.R)
            per_c1 = rows * geo.dy.Wd * c0 * isz + Khw_max * n16 * c0 * isz
            c1n = min(C1co, (cc.L1 // nb) // per_c1)
            if c1n < 1:
                continue
            stages_per = ceil_div(C1co, c1n)
            c1n = ceil_div(C1co, stages_per)            # even stages
            units = 0
            cyc = 0.0
            instr = 0.0
            for q, f in fams:
                nu = ceil_div(M_plane, m) * nplanes * ceil_div(geo.Cin, nt) * geo.G
                per_unit, nsteps = _dx_unit_cost(cc, f, m, nt, kmax, c1n, C1co, rows, geo.dy.Wd, isz, c0, nc)
                units += nu
                cyc += nu * per_unit
                instr += nu * (nsteps * 7 + f.ax[0].K * stages_per * 6 + 10)
            waves = ceil_div(units, cc.cores)
            est = max(cyc / cc.cores, waves * cyc / units)
            score = est + INSTR_CYCLES * instr / cc.cores
            if best is None or score < best[0]:
                best = (score, m, nt, kmax, c1n, nc, rows)
    if best is None:
        raise tiling_error(f"ConvolutionBackward gradInput tiling: no L0/L1 tile fits (L1 {cc.L1} B, L0A "
                           f"{cc.L0A} B, L0B {cc.L0B} B, L0C {cc.L0C} B); lower the tile overrides")
    _, m, nt, kmax, c1n, nc, rows = best
    n16 = align_up(nt, 16)
    ntiles = [(n0, min(nt, geo.Cin - n0)) for n0 in range(0, geo.Cin, nt)]
    t = DxTiling(m, nt, kmax, c1n, nc, ntiles, c1n * rows * geo.dy.Wd * c0 * isz,
                 c1n * Khw_max * n16 * c0 * isz)
    for g in range(geo.G):
        for q, f in fams:
            for pl in range(nplanes):
                for p0 in range(0, M_plane, m):
                    mm = min(m, M_plane - p0)
                    for j, (n0, nw) in enumerate(ntiles):
                        t.units.append((g, q, pl, p0, mm, j))
                        t.costs.append(_dx_unit_cost(cc, f, mm, nw, kmax, c1n, C1co, rows, geo.dy.Wd, isz, c0, nc)[0])
    # units sharing a weight block run one after another on a core (q, n-tile outermost)
    order = sorted(range(len(t.units)), key=lambda i: (t.units[i][0], t.units[i][1], t.units[i][5], t.units[i][2],
                                                       t.units[i][3]))
    t.units = [t.units[i] for i in order]
    t.costs = [t.costs[i] for i in order]
    return t


def _dx_unit_cost(cc, f, m, nt, kmax, c1n, C1co, rows, Wm, isz, c0, nc):
    """Cycles of one gradInput unit: per L1 stage, its L0 steps (Mmad against MTE1) or its
    copy-in (MTE2), whichever is longer; plus the L0C drain when it cannot overlap."""
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


def _pieces(geo: Geo, kc: int, per_image: bool) -> list[list]:
    """The gradWeight reduction (grid positions) cut into stages: per grid plane, runs of at most
    kc positions: [(plane, p0, length)]. per_image: runs stay inside one image's valid rows
    (the ND->NZ path reads A from the NC[D]HW tensor)."""
    lay = geo.dy if geo.amap == "dy" else geo.x
    valid_rows = lay.H
    out = []
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


def plan_dw(geo: Geo, cc: CubeCaps, isz: int, c0: int, osz: int, ov: dict, nb: int, nd2nz: bool) -> DwTiling:
    f = geo.dwf
    KD, Khw = f.ax[0].K, f.Khw
    C1b = ceil_div(geo.Cb, c0)
    ncols = C1b * Khw * c0
    Mg = geo.Mg
    alay = geo.dy if geo.amap == "dy" else geo.x
    blay = geo.x if geo.amap == "dy" else geo.dy
    Wg, Wm = alay.Wd, blay.Wd
    o_m, o_n, o_k = _pick(ov, "dwBaseM", "baseM"), _pick(ov, "dwBaseN", "baseN"), _pick(ov, "dwBaseK", "baseK")
    o_ks = _pick(ov, "dwKSplit", "dwKSplit")
    Mg16 = align_up(Mg, 16)
    mts = [o_m] if o_m else sorted({min(Mg16, v) for v in (256, 192, 128, 64)}, reverse=True)
    if o_n:
        nts = [align_up(o_n, c0)]
    else:
        nts = sorted({min(ncols, v) for v in (512, 384, 256, 192, 128, 64)} | ({ncols} if ncols <= 1024 else set()),
                     reverse=True)
    K_total = sum(p[2] for p in _pieces(geo, 1 << 30, nd2nz))
    best = None
    for mt in mts:
        m16 = align_up(mt, 16)
        for nt in nts:
            kmax = _l0_k_room("gradWeight", cc, nb, isz, mt, nt, 16, o_k, bool(o_m or o_n))
            if kmax is None:
                continue
            if mt > 4095 or nt > 4095:
                raise tiling_error(f"ConvolutionBackward gradWeight tiling: an Mmad of m={mt}, n={nt} does not fit "
                                   f"Mmad's [1, 4095] range")
            if not o_k:
                kmax = min(kmax, 4095 // 16 * 16)
            c1nB = min(C1b, ceil_div(nt, Khw * c0) + 1)
            c1nA = ceil_div(mt, c0) + (0 if mt % c0 == 0 else 1)
            # stage: as many L0 steps as L1 holds (A slab + B slab, double-buffered)
            best_kc = None
            for steps in (16, 12, 8, 6, 4, 3, 2, 1):
                kc = steps * kmax
                rows = _rows_for(kc, Wg)
                if nd2nz:
                    sa = m16 * align_up(kc, c0) * isz
                else:
                    sa = c1nA * min(rows, alay.R) * Wg * c0 * isz
                rb = min(_window_rows(f.ax[1], rows), blay.R)
                sb = c1nB * rb * Wm * c0 * isz
                if nb * (sa + sb) <= cc.L1:
                    best_kc = (kc, sa, sb)
                    break
            if best_kc is None:
                continue
            kc, sa, sb = best_kc
            kc = min(kc, max(K_total, 16))
            step = _step_cycles(cc, mt, nt, kmax, isz, c0)
            tiles = geo.G * KD * ceil_div(Mg, mt) * ceil_div(ncols, nt)
            nsteps = ceil_div(K_total, kmax)
            unit_full = nsteps * step
            # K split: balance tiles x splits over the cores
            cands = [o_ks] if o_ks else range(1, max(1, cc.cores // tiles) * 4 + 2)
            for ks in cands:
                ks = max(1, min(ks, ceil_div(K_total, 16)))
                if not (o_m or o_n or cc.stages(mt, nt, 4 if ks > 1 else osz)):
                    continue
                units = tiles * ks
                per = unit_full / ks + 300 + (150 if ks > 1 else 0)
                est = ceil_div(units, cc.cores) * per
                instr = units * (nsteps / ks * 7 + ceil_div(K_total, kc) / ks * 6 + 8)
                score = est + INSTR_CYCLES * instr / cc.cores + (3000 if ks > 1 else 0)
                if best is None or score < best[0]:
                    best = (score, mt, nt, kmax, kc, ks, sa, sb)
    if best is None:
        raise tiling_error(f"ConvolutionBackward gradWeight tiling: no L0/L1 tile fits (L1 {cc.L1} B, L0A "
                           f"{cc.L0A} B, L0B {cc.L0B} B, L0C {cc.L0C} B); lower the tile overrides")
    _, mt, nt, kk, kc, ks, sa, sb = best
    t = DwTiling(mt, nt, kk, kc, ks, sa, sb, a_nd2nz=nd2nz)
    pieces = _pieces(geo, kc, nd2nz)
    parts = _split_pieces(pieces, ks)
    t.ks = len(parts)
    for g in range(geo.G):
        for kd in range(KD):
            for m0 in range(0, Mg, mt):
                for col0 in range(0, ncols, nt):
                    ncol = min(nt, ncols - col0)
                    mm = min(mt, Mg - m0)
                    for part in parts:
                        npos = sum(p[2] for p in part)
                        t.units.append((g, kd, m0, mm, col0, ncol, part))
                        t.costs.append(ceil_div(npos, kk) * _step_cycles(cc, mm, ncol, kk, isz, c0) + 300)
    return t


# ---- small helpers kept from the first version ----
def _split(items: list, nblocks: int) -> list[list]:
    nblocks = max(1, min(nblocks, len(items)))
    per = ceil_div(len(items), nblocks)
    return [items[i * per:(i + 1) * per] for i in range(ceil_div(len(items), per))]


def _zero_fill_body(dst: GM_ADDR, ranges, slot: int):
    """Zero [off, off+n) byte ranges of a workspace buffer: Duplicate once, DataCopy out."""
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, slot)
    z = buf.Get(np.float32)
    Duplicate(z, 0.0, slot // 4)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    g = GlobalTensor(np.uint8)
    g.SetGlobalBuffer(dst.cast(np.uint8))
    zb = z.ReinterpretCast(np.uint8)
    for off, n in ranges[GetBlockIdx()]:
        if n % 32:
            DataCopyPad(g[off], zb, DataCopyExtParams(1, n, 0, 0))
        else:
            DataCopy(g[off], zb, n)


def zero_fill_launch(name: str, dst: GM_ADDR, nbytes: int, profile) -> KernelLaunch:
    slot = min(ub_bytes(profile) // 2, 64 * 1024)
    chunks = [(o, min(slot, nbytes - o)) for o in range(0, nbytes, slot)]
    blocks = _split(chunks, vector_core_count(profile))
    return KernelLaunch(f"ZeroFill({name})", _zero_fill_body, len(blocks), "vector", (dst, blocks, slot))



# ---- gradBias ----------------------------------------------------------------------------------
def _bias_body(src: GM_ADDR, dst: GM_ADDR, N, C, P, LP, cc, sdt, odt, blocks):
    """Per chunk of cc channels: acc[cc][LP] (fp32) += gradOutput rows over N and position
    chunks; then transpose to [LP][cc] and fold the rows with Adds; cast; store."""
    items = blocks[GetBlockIdx()]
    sGm, dGm = GlobalTensor(sdt), GlobalTensor(odt)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)
    isz = sdt.itemsize
    pipe = TPipe()
    inQ = TQue(TPosition.VECIN, 2)
    pipe.InitBuffer(inQ, 2, cc * LP * isz)
    calc = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(calc, 3 * cc * LP * 4 + 32 * cc + 64)
    buf = calc.Get(float32)
    acc, tmp, tr = buf[0], buf[cc * LP], buf[2 * cc * LP]
    outb = calc.Get(np.uint8)[3 * cc * LP * 4].ReinterpretCast(odt)
    ev_z = pipe.AllocEventID(HardEvent.V_MTE2)
    ev_o = pipe.AllocEventID(HardEvent.V_MTE3)
    ev_b = pipe.AllocEventID(HardEvent.MTE3_V)
    for c0_, cn in items:
        Duplicate(acc, 0.0, cc * LP)
        for n in range(N):
            for p0 in range(0, P, LP):
                ln = min(LP, P - p0)
                x = inQ.AllocTensor(sdt)
                if ln < LP or cn < cc:
                    # zero the padding first (V), then load (MTE2)
                    Duplicate(x.ReinterpretCast(np.uint8).ReinterpretCast(np.float32), 0.0, cc * LP * isz // 4)
                    SetFlag(HardEvent.V_MTE2, ev_z)
                    WaitFlag(HardEvent.V_MTE2, ev_z)
                DataCopyPad(x, sGm[(n * C + c0_) * P + p0],
                            DataCopyExtParams(cn, ln * isz, (P - ln) * isz,
                                              (LP * isz - align_up(ln * isz, 32)) // 32))
                inQ.EnQue(x)
                x = inQ.DeQue(sdt)
                if sdt != F32:
                    Cast(tmp, x, RoundMode.CAST_NONE, cc * LP)
                    Add(acc, acc, tmp, cc * LP)
                else:
                    Add(acc, acc, x, cc * LP)
                inQ.FreeTensor(x)
        TransposeExt(tr, acc, None, TransposeParamsExt(1, cc, LP, 1, TransposeType.TRANSPOSE_NCHW2NHWC))
        rows = LP
        while rows > 1:
            h = rows // 2
            Add(tr, tr, tr[(rows - h) * cc], h * cc)
            rows -= h
        if odt != F32:
            Cast(outb, tr, RoundMode.CAST_RINT, cc)
            res = outb
        else:
            res = tr
        SetFlag(HardEvent.V_MTE3, ev_o)
        WaitFlag(HardEvent.V_MTE3, ev_o)
        DataCopyPad(dGm[c0_], res, DataCopyExtParams(1, cn * odt.itemsize, 0, 0))
        SetFlag(HardEvent.MTE3_V, ev_b)
        WaitFlag(HardEvent.MTE3_V, ev_b)


def bias_launch(src, dst, N, C, P, sdt, odt, profile) -> KernelLaunch:
    cc = 16
    ub = ub_bytes(profile)
    LP = max(16, min(1024, align_up(P, 16)))
    while LP > 16 and 2 * cc * LP * sdt.itemsize + 3 * cc * LP * 4 + 1024 > ub:
        LP //= 2
    LP = align_up(LP, 16)
    items = [(c, min(cc, C - c)) for c in range(0, C, cc)]
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch("GradBias(reduce N, spatial)", _bias_body, len(blocks), "vector",
                        (src, dst, N, C, P, LP, cc, sdt, odt, blocks))




# =============================================================================================
# vector kernels: passes over one block's UB, each a double-buffered MTE2 -> V -> MTE3 pipeline
# =============================================================================================
def _a32(n: int) -> int:
    return align_up(n, 32)


def _region(t, nbytes: int, dtype):
    """The first nbytes of local tensor t as a tensor of its own (so that a copy planned for
    this region and writing past it is a fault, not a silent overwrite of the next region)."""
    dtype = np.dtype(dtype)
    return LocalTensor(t.buffer, t.offset, dtype, nbytes // dtype.itemsize, t.position)


def _zview(t, nbytes: int):
    """A tensor as 16- or 32-bit lanes for a zero fill of nbytes."""
    if nbytes % 4 == 0:
        return t.ReinterpretCast(np.float32), nbytes // 4
    return t.ReinterpretCast(np.float16), nbytes // 2


class VecBlock:
    """One AIV block's UB, carved by hand: the passes run one after another (a PIPE_ALL barrier
    between two), each laying out its two ping-pong slots from offset 0; a zero region at the top
    feeds zero stores."""

    def __init__(self, ub: int, zero_bytes: int):
        self.pipe = TPipe()
        buf = TBuf(TPosition.VECCALC)
        self.pipe.InitBuffer(buf, ub)
        self.raw = buf.Get(np.uint8)
        self.ub = ub
        self.zero_bytes = zero_bytes
        self.top = ub - zero_bytes          # passes use [0, top)
        self.zero_ready = False
        self.passes = 0

    def at(self, off: int, dt):
        return self.raw[off].ReinterpretCast(dt)

    def zeros(self):
        if not self.zero_ready:
            z, n = _zview(self.raw[self.top], self.zero_bytes)
            Duplicate(z, 0.0, n)
            SetFlag(HardEvent.V_MTE3, 2)
            WaitFlag(HardEvent.V_MTE3, 2)
            self.zero_ready = True
        return self.raw[self.top]

    def begin_pass(self):
        if self.passes:
            PipeBarrier(PIPE_ALL)
        self.passes += 1


def vpipe(vb: VecBlock, slot: int, items, load, compute, store, prezero=None):
    """Per item: (prezero on V), MTE2 load into slot k, V compute, MTE3 store; two slots ping-pong,
    ordered by flags V->MTE2 (slot's input free), MTE2->V, V->MTE3, MTE3->V (slot's output free).
    Callbacks get (slot base offset, item); prezero(base, item) issues V instructions that must
    precede the load, or returns False."""
    vb.begin_pass()
    if slot * 2 > vb.top:
        raise tiling_error(f"vector pass needs 2 x {slot} B of UB; {vb.top} B available")
    bases = (0, slot)
    for k in range(2):
        SetFlag(HardEvent.V_MTE2, k)
    pending = [False, False]
    for i, it in enumerate(items):
        k = i & 1
        b = bases[k]
        WaitFlag(HardEvent.V_MTE2, k)
        if prezero is not None and prezero(b, it):
            SetFlag(HardEvent.V_MTE2, k)
            WaitFlag(HardEvent.V_MTE2, k)
        load(b, it)
        SetFlag(HardEvent.MTE2_V, k)
        WaitFlag(HardEvent.MTE2_V, k)
        if pending[k]:
            WaitFlag(HardEvent.MTE3_V, k)
        compute(b, it)
        SetFlag(HardEvent.V_MTE2, k)
        SetFlag(HardEvent.V_MTE3, k)
        WaitFlag(HardEvent.V_MTE3, k)
        store(b, it)
        SetFlag(HardEvent.MTE3_V, k)
        pending[k] = True
    for k in range(2):
        WaitFlag(HardEvent.V_MTE2, k)
        if pending[k]:
            WaitFlag(HardEvent.MTE3_V, k)


def vring(vb: VecBlock, region: int, items, load, compute, store, prezero=None):
    """The load -> one-transpose -> store pipeline on a ring of three UB regions: item j loads into
    L_j and writes its result into O_j = L_(j-1) (consumed by the previous item's compute), so
    L_(j+1) is the region whose output item j-1 stored. Flags: MTE2->V (loaded), V->MTE3
    (computed), MTE3->MTE2 (stored: the region may be loaded again), and MTE3->V before a
    prezero. 1.5 regions per item in flight instead of 2 slots x (in, out), 6 flags instead of 8.
    Callbacks get (load region, out region, item)."""
    vb.begin_pass()
    if region * 3 > vb.top:
        raise tiling_error(f"vector pass needs 3 x {region} B of UB; {vb.top} B available")
    regs = (0, region, 2 * region)
    stored = [False, False, False]     # region holds an output whose store has been issued
    for j, it in enumerate(items):
        li, oi = (j * 2) % 3, (j * 2 + 1) % 3 if j == 0 else ((j - 1) * 2) % 3
        # L_j: L_0 = 0, O_0 = 1, L_1 = 2, O_1 = 0, L_2 = 1, O_2 = 2 ... (L_j = 2j mod 3, O_j = L_(j-1))
        if stored[li]:
            WaitFlag(HardEvent.MTE3_MTE2, li)
            stored[li] = False
        if prezero is not None:
            if prezero(regs[li], regs[oi], it, dry=True):
                SetFlag(HardEvent.MTE2_V, 3)       # the region is free on MTE2's side too
                WaitFlag(HardEvent.MTE2_V, 3)
                prezero(regs[li], regs[oi], it, dry=False)
                SetFlag(HardEvent.V_MTE2, 3)
                WaitFlag(HardEvent.V_MTE2, 3)
        load(regs[li], regs[oi], it)
        SetFlag(HardEvent.MTE2_V, li)
        WaitFlag(HardEvent.MTE2_V, li)
        compute(regs[li], regs[oi], it)
        SetFlag(HardEvent.V_MTE3, oi)
        WaitFlag(HardEvent.V_MTE3, oi)
        store(regs[li], regs[oi], it)
        SetFlag(HardEvent.MTE3_MTE2, oi)
        stored[oi] = True
    for r in range(3):
        if stored[r]:
            WaitFlag(HardEvent.MTE3_MTE2, r)


def copy_runs(dst, src, runs, isz: int) -> None:
    """DataCopy element runs [(dst offset, src offset, count)] (count * isz whole 32-B blocks),
    merging consecutive runs of one length and constant forward strides into one strided copy."""
    i = 0
    while i < len(runs):
        d0, s0, n = runs[i]
        j = i + 1
        if j < len(runs) and runs[j][2] == n:
            dd, ds = runs[j][0] - d0, runs[j][1] - s0
            if dd >= n and ds >= n and (dd - n) * isz % 32 == 0 and (ds - n) * isz % 32 == 0:
                while j + 1 < len(runs) and runs[j + 1][2] == n and runs[j + 1][0] - runs[j][0] == dd \
                        and runs[j + 1][1] - runs[j][1] == ds:
                    j += 1
                j += 1
                cnt = j - i
                DataCopy(dst[d0], src[s0], DataCopyParams(cnt, n * isz // 32, (ds - n) * isz // 32,
                                                          (dd - n) * isz // 32))
                i = j
                continue
        DataCopy(dst[d0], src[s0], n)
        i += 1


def _round(dst_dt, src_dt):
    return RoundMode.CAST_RINT if dst_dt.itemsize < src_dt.itemsize else RoundMode.CAST_NONE


# ---- prologue: NC[D]HW -> tall NC1HWC0 (cast, channel padding, zero gap rows) ----------------
@dataclass
class To5HD:
    name: str
    N: int
    G: int
    Cg: int
    C1: int
    c0: int
    P: int                # positions per image (D*H*W)
    lay: Lay
    sdt: np.dtype
    cd: np.dtype
    c1n: int              # C1 planes per item
    L: int                # positions per item (P when whole images fit)
    slot: int             # bytes per slot (vpipe) or per ring region (vring)
    ring: bool = False


def plan_to5hd(name, N, G, Cg, c0, P, lay: Lay, sdt, cd, ub: int) -> To5HD:
    C1 = ceil_div(Cg, c0)
    isz_s, isz = sdt.itemsize, cd.itemsize
    if sdt == cd:          # no cast: one transpose per item, on the ring of three regions
        room = ub // 3
        plane = _a32(c0 * P * isz)
        if plane <= room:
            c1n = max(1, min(C1, room // plane))
            return To5HD(name, N, G, Cg, C1, c0, P, lay, sdt, cd, c1n, P, _a32(c1n * c0 * P * isz), True)
        unit = 32 // isz
        L = max(unit, (room // (c0 * isz)) // unit * unit)
        return To5HD(name, N, G, Cg, C1, c0, P, lay, sdt, cd, 1, L, _a32(c0 * L * isz), True)
    per_pos = c0 * (isz_s + (isz if sdt != cd else 0) + isz)      # in + cast + out, one C1 plane

    def slot_of(c1n, Lp):
        return _a32(c1n * c0 * Lp * isz_s) + (_a32(c1n * c0 * Lp * isz) if sdt != cd else 0) + _a32(c1n * c0 * Lp * isz)
    room = ub // 2
    if slot_of(1, P) <= room:
        c1n = max(1, min(C1, room // max(slot_of(1, P), 1)))
        while c1n > 1 and slot_of(c1n, P) > room:
            c1n -= 1
        return To5HD(name, N, G, Cg, C1, c0, P, lay, sdt, cd, c1n, P, slot_of(c1n, P))
    unit = 32 // min(isz_s, isz)
    L = max(unit, (room // per_pos) // unit * unit)
    return To5HD(name, N, G, Cg, C1, c0, P, lay, sdt, cd, 1, L, slot_of(1, L))


def to5hd_items(t: To5HD) -> list:
    items = []
    for n in range(t.N):
        for g in range(t.G):
            for c1a in range(0, t.C1, t.c1n):
                for p0 in range(0, t.P, t.L):
                    items.append((n, g, c1a, min(t.c1n, t.C1 - c1a), p0, min(t.L, t.P - p0)))
    return items


def pass_to5hd(vb: VecBlock, items, t: To5HD, sGm, dGm):
    isz_s, isz, c0 = t.sdt.itemsize, t.cd.itemsize, t.c0
    cast = t.sdt != t.cd
    unit = 32 // isz_s

    def geom(it):
        n, g, c1a, c1n, p0, L = it
        whole = L == t.P
        Lp = L if whole else align_up(L, unit)
        nch = min(c1n * c0, t.Cg - c1a * c0)
        return whole, Lp, nch

    def regions(b, c1n, Lp):
        cap = c1n * c0 * Lp
        r_in = b
        r_cast = r_in + _a32(cap * isz_s)
        r_out = r_cast + (_a32(cap * isz) if cast else 0)
        return cap, r_in, r_cast, r_out

    def prezero(b, it):
        whole, Lp, nch = geom(it)
        c1n, L = it[3], it[5]
        if nch == c1n * c0 and (whole or (Lp == L and L * isz_s % 32 == 0)):
            return False
        cap = c1n * c0 * Lp
        z, cnt = _zview(vb.raw[b], _a32(cap * isz_s))
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
                                                    (Lp * isz_s - _a32(L * isz_s)) // 32))

    def compute(b, it):
        c1n = it[3]
        whole, Lp, nch = geom(it)
        cap, r_in, r_cast, r_out = regions(b, c1n, Lp)
        src = vb.at(r_in, t.sdt)
        if cast:
            Cast(vb.at(r_cast, t.cd), src, _round(t.cd, t.sdt), cap)
            src = vb.at(r_cast, t.cd)
        TransposeExt(vb.at(r_out, t.cd), src, None, TransposeParamsExt(c1n, c0, Lp, 1, NCHW2NHWC))

    def store(b, it):
        n, g, c1a, c1n, p0, L = it
        whole, Lp, nch = geom(it)
        cap, r_in, r_cast, r_out = regions(b, c1n, Lp)
        off = ((g * t.C1 + c1a) * t.lay.block + t.lay.img(n) + p0) * c0
        DataCopy(dGm[off], vb.at(r_out, t.cd), DataCopyParams(c1n, L * c0 * isz // 32, (Lp - L) * c0 * isz // 32,
                                                              (t.lay.block - L) * c0 * isz // 32))

    if not t.ring:
        vpipe(vb, t.slot, items, load, compute, store, prezero)
        return

    def r_prezero(lb, ob, it, dry):
        if dry:
            whole, Lp, nch = geom(it)
            return not (nch == it[3] * c0 and (whole or (Lp == it[5] and it[5] * isz_s % 32 == 0)))
        return prezero(lb, it)

    def r_compute(lb, ob, it):
        whole, Lp, nch = geom(it)
        TransposeExt(vb.at(ob, t.cd), vb.at(lb, t.sdt), None, TransposeParamsExt(it[3], c0, Lp, 1, NCHW2NHWC))

    def r_store(lb, ob, it):
        n, g, c1a, c1n, p0, L = it
        whole, Lp, nch = geom(it)
        off = ((g * t.C1 + c1a) * t.lay.block + t.lay.img(n) + p0) * c0
        DataCopy(dGm[off], vb.at(ob, t.cd), DataCopyParams(c1n, L * c0 * isz // 32, (Lp - L) * c0 * isz // 32,
                                                           (t.lay.block - L) * c0 * isz // 32))

    vring(vb, t.slot, items, lambda lb, ob, it: load(lb, it), r_compute, r_store, r_prezero)


def gap_items(t: To5HD, zero_bytes: int) -> list:
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


def zero_gap(vb: VecBlock, it, t: To5HD, dGm):
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
        TransposeExt(vb.at(dst, dt), vb.at(cur, dt), None, p)
        cur = dst
    return cur


def perm_result(steps, src: int, bufs: tuple) -> int:
    return bufs[(len(steps) - 1) % 2] if steps else src


# ---- prologue: the input folded 2x2 into channels (space-to-depth, conv1-like gradWeight) ---------
@dataclass
class S2DMap:
    name: str
    N: int
    sd: S2D
    X: tuple              # original (H, W)
    lay: Lay
    sdt: np.dtype
    cd: np.dtype
    ni: int               # x' rows per item
    slot: int
    G: int = 1
    C1: int = 1
    c0: int = 16


def plan_s2d_map(N, sd: S2D, X, lay: Lay, sdt, cd, ub: int) -> S2DMap:
    sdt, cd = np.dtype(sdt), np.dtype(cd)
    per_row = sd.cp * 2 * 2 * sd.Xw                  # elements of one x' row (in and out alike)
    room = ub // 2
    per_b = _a32(per_row * sdt.itemsize) + 2 * _a32(per_row * cd.itemsize)
    ni = max(1, min(sd.Xh, room // per_b))
    slot = _a32(ni * per_row * sdt.itemsize) + 2 * _a32(ni * per_row * cd.itemsize)
    return S2DMap("input", N, sd, tuple(X), lay, sdt, cd, ni, slot)


def s2d_items(t: S2DMap) -> list:
    return [(n, i0, min(t.ni, t.sd.Xh - i0)) for n in range(t.N) for i0 in range(0, t.sd.Xh, t.ni)]


def pass_s2d(vb: VecBlock, items, t: S2DMap, sGm, dGm):
    sd, ni = t.sd, t.ni
    isz_s, isz = t.sdt.itemsize, t.cd.itemsize
    Xh, Xw = t.X
    Wx2 = 2 * sd.Xw
    n_in = sd.cp * 2 * ni * Wx2
    r_a = _a32(n_in * isz_s)
    r_b = r_a + _a32(n_in * isz)
    cast = t.sdt != t.cd
    # [c][i][ph][j][pw] -> [i][j][ph][pw][c]: 16 lanes = (ph, pw, c)
    steps = perm_plan((sd.cp, ni, 2, sd.Xw, 2), (1, 3, 2, 4, 0))

    def prezero(b, it):
        z, cnt = _zview(vb.raw[b], _a32(n_in * isz_s))
        Duplicate(z, 0.0, cnt)
        return True

    def load(b, it):
        n, i0, nr = it
        h0 = 2 * i0 - sd.eh
        lo, hi = max(h0, 0), min(h0 + 2 * ni, Xh)
        if hi > lo:
            DataCopyPad(vb.at(b + (lo - h0) * Wx2 * isz_s, t.sdt), sGm[n * sd.Cin * Xh * Xw + lo * Xw],
                        DataCopyExtParams(sd.Cin, (hi - lo) * Xw * isz_s, (Xh * Xw - (hi - lo) * Xw) * isz_s,
                                          (2 * ni * Wx2 * isz_s - _a32((hi - lo) * Xw * isz_s)) // 32))

    def compute(b, it):
        src = b
        if cast:
            Cast(vb.at(b + r_a, t.cd), vb.at(b, t.sdt), _round(t.cd, t.sdt), n_in)
            src = b + r_a
        run_perm(vb, steps, src, (b + r_a, b + r_b) if not cast else (b + r_b, b + r_a), t.cd)

    def store(b, it):
        n, i0, nr = it
        res = perm_result(steps, b + r_a if cast else b, (b + r_a, b + r_b) if not cast else (b + r_b, b + r_a))
        DataCopy(dGm[(t.lay.img(n) + i0 * sd.Xw) * 16], vb.at(res, t.cd), nr * sd.Xw * 16)

    vpipe(vb, t.slot, items, load, compute, store, prezero)


# ---- prologue: the weight as gradInput's right operand --------------------------------------
@dataclass
class PackW:
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
    items: list = field(default_factory=list)

    @property
    def C1(self) -> int:
        return ceil_div(self.Cout, self.c0)

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


def plan_packw(geo: Geo, w_dtype, cd, c0, ntiles, ub: int) -> PackW:
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
    t = PackW(geo.G, geo.Cout, geo.Cin, KD, KH, KW, c0, geo.transposed, np.dtype(w_dtype), cd, ntiles,
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
    if nci < 1:
        raise tiling_error(f"weight packing: one input channel ({per_ci} B) does not fit in UB ({ub} B)")
    if nci < geo.Cin:
        nci = nci // 16 * 16          # whole 32-B rows in UB for the strided load
        if nci < 16:
            raise tiling_error(f"weight packing: 16 input channels ({16 * per_ci} B) do not fit in UB ({ub} B)")
    chunks = []
    for j, (n0, nw) in enumerate(ntiles):
        for ci0 in range(n0, n0 + nw, nci):
            chunks.append((j, ci0, min(nci, n0 + nw - ci0)))
    t.chunk = max(c[2] for c in chunks)
    t.slot = t.chunk * per_ci
    if not geo.transposed:
        t.items = [(g, co1, j, ci0, n) for g in range(geo.G) for co1 in range(C1) for (j, ci0, n) in chunks]
    else:
        t.items = [(g, j, ci0, n) for g in range(geo.G) for (j, ci0, n) in chunks]
    return t


def pass_packw(vb: VecBlock, items, t: PackW, sGm, dGm):
    c0, isz_s, isz = t.c0, t.sdt.itemsize, t.cd.itemsize
    taps = t.KD * t.KH * t.KW
    cast = t.sdt != t.cd
    if not t.transposed:
        def regs(b, n):
            cap = c0 * n * taps
            r_cast = b + _a32(cap * isz_s)
            r_t1 = r_cast + (_a32(cap * isz) if cast else 0)
            return cap, r_cast, r_t1, r_t1 + _a32(cap * isz)

        def prezero(b, it):
            g, co1, j, ci0, n = it
            if min(c0, t.Cout - co1 * c0) == c0 and (n == t.Cin or n * taps * isz_s % 32 == 0):
                return False
            cap = c0 * n * taps
            z, cnt = _zview(vb.raw[b], _a32(cap * isz_s))
            Duplicate(z, 0.0, cnt)
            return True

        def load(b, it):
            g, co1, j, ci0, n = it
            nco = min(c0, t.Cout - co1 * c0)
            src = sGm[((g * t.Cout + co1 * c0) * t.Cin + ci0) * taps]
            if n == t.Cin:
                DataCopyPad(vb.at(b, t.sdt), src, DataCopyExtParams(1, nco * t.Cin * taps * isz_s, 0, 0))
            else:
                row = n * taps * isz_s
                if row % 32:
                    raise tiling_error("weight packing: a channel chunk row is not 32-B aligned in UB")
                DataCopyPad(vb.at(b, t.sdt), src, DataCopyExtParams(nco, row, (t.Cin - n) * taps * isz_s, 0))

        def compute(b, it):
            g, co1, j, ci0, n = it
            cap, r_cast, r_t1, r_out = regs(b, n)
            src = vb.at(b, t.sdt)
            if cast:
                Cast(vb.at(r_cast, t.cd), src, _round(t.cd, t.sdt), cap)
                src = vb.at(r_cast, t.cd)
            # [co][ci][tap] -> [tap][co][ci] -> [tap][ci][co]
            TransposeExt(vb.at(r_t1, t.cd), src, None, nhwc2nchw(1, c0 * n, 1, taps))
            TransposeExt(vb.at(r_out, t.cd), vb.at(r_t1, t.cd), None, TransposeParamsExt(taps, c0, n, 1, NCHW2NHWC))

        def store(b, it):
            g, co1, j, ci0, n = it
            out = vb.at(regs(b, n)[3], t.cd)
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

        vpipe(vb, t.slot, items, load, compute, store, prezero)
        return
    # transposed: rows are input channels; [ci][co][tap] -> [co][tap][ci] -> [co1][tap][ci][c0]
    C1 = t.C1

    def lay_of(n):
        cap_in = n * t.Cout * taps
        cap = n * C1 * c0 * taps
        r_cast = _a32(cap_in * isz_s)
        r_t1 = r_cast + (_a32(cap_in * isz) if cast else 0)
        r_out = r_t1 + _a32(cap * isz)
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
            Cast(vb.at(b + r_cast, t.cd), src, _round(t.cd, t.sdt), cap_in)
            src = vb.at(b + r_cast, t.cd)
        if t.Cout % c0:
            z, cnt = _zview(vb.raw[b + r_t1], _a32(cap * isz))
            Duplicate(z, 0.0, cnt)
        TransposeExt(vb.at(b + r_t1, t.cd), src, None, TransposeParamsExt(1, n, t.Cout * taps, 1, NCHW2NHWC))
        TransposeExt(vb.at(b + r_out, t.cd), vb.at(b + r_t1, t.cd), None,
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

    vpipe(vb, t.slot, items, load, compute, store)


# ---- prologue: zero fill (the gradWeight FP32 accumulator) ------------------------------------
def zero_items(nbytes: int, zero_bytes: int) -> list:
    return [(o, min(zero_bytes, nbytes - o)) for o in range(0, nbytes, zero_bytes)]


def zero_fill(vb: VecBlock, it, dGm8):
    off, n = it
    z = vb.zeros()
    if n % 32:
        DataCopyPad(dGm8[off], z, DataCopyExtParams(1, n, 0, 0))
    else:
        DataCopy(dGm8[off], z, n)


# ---- prologue: flat cast (gradWeight's ND->NZ left operand in a 32-bit compute dtype) ---------
def cast_items(n: int, chunk: int) -> list:
    return [(o, min(chunk, n - o)) for o in range(0, n, chunk)]


def pass_cast(vb: VecBlock, items, sdt, ddt, chunk, sGm, dGm):
    def prezero(b, it):
        if it[1] % 8 == 0:
            return False
        z, n = _zview(vb.raw[b], _a32(chunk * sdt.itemsize))
        Duplicate(z, 0.0, n)
        return True

    def load(b, it):
        DataCopyPad(vb.at(b, sdt), sGm[it[0]], DataCopyExtParams(1, it[1] * sdt.itemsize, 0, 0))

    def compute(b, it):
        Cast(vb.at(b + _a32(chunk * sdt.itemsize), ddt), vb.at(b, sdt), _round(ddt, sdt), align_up(it[1], 8))

    def store(b, it):
        DataCopyPad(dGm[it[0]], vb.at(b + _a32(chunk * sdt.itemsize), ddt),
                    DataCopyExtParams(1, it[1] * ddt.itemsize, 0, 0))

    vpipe(vb, _a32(chunk * sdt.itemsize) + _a32(chunk * ddt.itemsize), items, load, compute, store, prezero)


@dataclass
class Prologue:
    ub: int
    zero_bytes: int
    maps: list            # (To5HD, src GM index, dst GM index)
    packw: PackW | None
    acc_zero: int         # bytes of the accumulator to zero (0: none)
    cast: tuple | None    # (n, sdt, ddt, chunk)
    blocks: list          # per block: [(kind, item)]


def _prologue_body(gms: tuple, P: Prologue):
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
            if isinstance(t, S2DMap):
                pass_s2d(vb, by[("5hd", i)], t, g[si], g[di])
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


# ---- epilogue: gradInput phase grids -> NC[D]HW ---------------------------------------------
def tchain(vb: VecBlock, seq, cur: int, target: int, other: int, dt) -> int:
    """Run transposes one after another, alternating between two buffers so that the last one
    lands in `target` (cur must be neither)."""
    for i, p in enumerate(seq):
        dst = target if (len(seq) - 1 - i) % 2 == 0 else other
        TransposeExt(vb.at(dst, dt), vb.at(cur, dt), None, p)
        cur = dst
    return cur


def repitch(vb: VecBlock, src: int, tmp: int, dst: int, rows: int, width: int, widthp: int, dt):
    """[rows][width] -> [rows][widthp] (rows padded to widthp, e.g. to start every row 32-B
    aligned for a strided store): transpose to [width][rows] inside a zeroed [widthp][rows],
    transpose back."""
    z, n = _zview(vb.raw[tmp], _a32(widthp * rows * dt.itemsize))
    Duplicate(z, 0.0, n)
    TransposeExt(vb.at(tmp, dt), vb.at(src, dt), None, nhwc2nchw(1, rows, 1, width))
    TransposeExt(vb.at(dst, dt), vb.at(tmp, dt), None, TransposeParamsExt(1, widthp, rows, 1, NCHW2NHWC))


@dataclass
class DxOut:
    geo: Geo
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


def plan_dx_out(geo: Geo, odt, ub: int) -> DxOut:
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
    reg = _a32(c1n * Sh * ni * max(Sw * Qw, Wqp) * 16 * osz)
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
        z, cnt = _zview(vb.raw[b], reg)
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
                if lay.Wd == Qw:
                    DataCopy(vb.at(dst, odt), sGm[src],
                             DataCopyParams(c1n, ni * Qw * blk, (S * lay.block - ni * Qw) * blk,
                                            (S * per_phase - ni * Qw) * blk))
                else:
                    for c in range(c1n):
                        DataCopy(vb.at(dst + c * S * per_phase * 16 * osz, odt), sGm[src + c * S * lay.block * 16],
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
            DataCopyPad(dGm[chan], out, DataCopyExtParams(nch, nrows * Xw * osz, (pitch * osz - _a32(nrows * Xw * osz)) // 32,
                                                          (Xd * Xh * Xw - nrows * Xw) * osz))
        else:
            for cc in range(nch):
                DataCopyPad(dGm[chan + cc * Xd * Xh * Xw], out[cc * pitch],
                            DataCopyExtParams(nrows, Xw * osz, (t.Wqp * osz - _a32(Xw * osz)) // 32, 0))

    if t.nreg != 2:
        vpipe(vb, t.slot, items, load, compute, store, prezero)
        return
    # one transpose (stride 1): the ring of three regions; store() reads b + reg = the out region

    def r_prezero(lb, ob, it, dry):
        g, c1, c1n, n, xd, i0, ni = it
        need = not (ni == t.ni and all(geo.phases[phase_of(xd, rh, rw)[0]] is not None
                                       for rh in range(Sh) for rw in range(Sw)))
        return need if dry else prezero(lb, it)

    def r_compute(lb, ob, it):
        g, c1, c1n, n, xd, i0, ni = it
        TransposeExt(vb.at(ob, odt), vb.at(lb, odt), None, nhwc2nchw(c1n, Sh * Sw * t.ni * Qw, 1, 16))

    vring(vb, reg, items, lambda lb, ob, it: load(lb, it), r_compute,
          lambda lb, ob, it: store(ob - reg, it), r_prezero)


# ---- epilogue: gradWeight accumulator -> (rows, channels, taps) -------------------------------
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
    reg = _a32(mr * max(rowK, rowp) * odt.itemsize)
    slot = _a32(mr * rowK * adt.itemsize) + nreg * reg
    return DwOut(G, Mg, Cc, C1, c0, KD, Khw, adt, odt, mr, rowp, reg, nreg, slot)


def dw_out_items(t: DwOut) -> list:
    return [(g, m0, min(t.mr, t.Mg - m0)) for g in range(t.G) for m0 in range(0, t.Mg, t.mr)]


def pass_dw_out(vb: VecBlock, items, t: DwOut, sGm, dGm):
    c0, KD, Khw, C1 = t.c0, t.KD, t.Khw, t.C1
    rowK = KD * C1 * Khw * c0
    taps = KD * Khw
    asz, osz = t.adt.itemsize, t.odt.itemsize
    r0 = _a32(t.mr * rowK * asz)

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
            Cast(vb.at(r[0], t.odt), vb.at(b, t.adt), _round(t.odt, t.adt), n)
            cur = r[0]
        seq = []
        if KD > 1:        # [m][kd][c1][hw c0] -> [m][c1][kd][hw c0]
            seq.append(TransposeParamsExt(mr, KD, C1, Khw * c0, NCHW2NHWC))
            seq.append(nhwc2nchw(mr * C1, Khw * c0, 1, KD))
        seq.append(nhwc2nchw(mr * C1, KD * Khw, 1, c0))      # -> [m][c1][c0][kd hw]
        if t.nreg == 1:
            TransposeExt(vb.at(r[2], t.odt), vb.at(cur, t.odt), None, seq[0])
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
                                                    (t.rowp * osz - _a32(t.Cc * taps * osz)) // 32, 0))

    vpipe(vb, t.slot, items, load, compute, store)


@dataclass
class S2DOut:
    """gradWeight of the folded convolution ([m][th][tw][ph][pw][c]) back to (m, C, KH, KW):
    permutes, with the taps outside the kernel and the padding channels cropped off as whole
    leading blocks."""
    sd: S2D
    Mg: int
    adt: np.dtype
    odt: np.dtype
    mr: int
    slot: int


def plan_s2d_out(sd: S2D, Mg: int, adt, odt, ub: int) -> S2DOut:
    adt, odt = np.dtype(adt), np.dtype(odt)
    row = sd.Kh * sd.Kw * 16
    per = row * (adt.itemsize + 2 * odt.itemsize)
    mr = max(16, min(Mg, (ub // 2) // per) // 16 * 16)
    slot = _a32(mr * row * adt.itemsize) + 2 * _a32(mr * row * odt.itemsize)
    return S2DOut(sd, Mg, adt, odt, mr, slot)


def s2d_out_items(t: S2DOut) -> list:
    return [(m0, min(t.mr, t.Mg - m0)) for m0 in range(0, t.Mg, t.mr)]


def pass_s2d_dw(vb: VecBlock, items, t: S2DOut, sGm, dGm):
    sd = t.sd
    Th, Tw, cp, C = sd.Kh, sd.Kw, sd.cp, sd.Cin
    KH, KW = sd.K
    row = Th * Tw * 16
    asz, osz = t.adt.itemsize, t.odt.itemsize
    rA = _a32(t.mr * row * asz)
    rB = rA + _a32(t.mr * row * osz)
    cast = t.adt != t.odt

    def chain(b, mr, emit: bool):
        A, B = b + rA, b + rB
        cur = b
        if cast:
            if emit:
                Cast(vb.at(A, t.odt), vb.at(b, t.adt), _round(t.odt, t.adt), mr * row)
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

    vpipe(vb, t.slot, items, load, compute, store)


@dataclass
class Epilogue:
    ub: int
    dx: DxOut | None
    dw: "DwOut | S2DOut | None"
    blocks: list


def _epilogue_body(gms: tuple, E: Epilogue):
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
        if isinstance(E.dw, S2DOut):
            pass_s2d_dw(vb, dw, E.dw, g[2], g[3])
        else:
            pass_dw_out(vb, dw, E.dw, g[2], g[3])


# =============================================================================================
# the Cube kernel
# =============================================================================================
@dataclass
class CubeJob:
    """Host-side tiling of the Cube launch."""
    geo: Geo
    a2: bool
    cd: np.dtype
    hf32: bool
    nb: int               # L1 / L0 buffers (2: double-buffered)
    l1: int               # bytes per L1 stage slot
    l0a: int
    l0b: int
    l0c: int              # bytes of L0C in use
    dx: DxTiling | None
    dw: DwTiling | None
    wp: PackW | None
    dxg_dt: np.dtype | None
    acc_dt: np.dtype | None
    ub_out: int           # coupled chips: UB bytes per output slot
    blocks: list          # per block: [("dx", i) ...] then [("dw", i) ...]


class Stage:
    """One L1 stage: copyin(l1 slot, load_b) and its L0 steps (loadA, loadB, m, n, k, B key).
    bkey names the right-operand block the stage copies into its slot's B region: a slot that
    already holds it skips the copy (and an L0B slot that holds a step's B skips the load)."""
    __slots__ = ("copyin", "steps", "first", "last", "out", "bkey")

    def __init__(self, copyin, steps, first=False, last=False, out=None, bkey=None):
        self.copyin, self.steps, self.first, self.last, self.out = copyin, steps, first, last, out
        self.bkey = bkey


class Sched:
    """The block's Cube pipeline with explicit flags: L1 stage slots (MTE2 -> MTE1), L0A/L0B
    step slots (MTE1 -> M), L0C tiles (M -> FIX on A2; M -> V -> MTE3 through UB on the coupled
    chips). The next stage's copy-in is written before this stage's compute, so MTE2 prefetches
    one stage ahead; every slot is released by the pipe that used it last."""

    def __init__(self, job: CubeJob, l1, l0a, l0b, l0c: list, ub: list | None):
        self.job, self.l1, self.l0a, self.l0b, self.l0c, self.ub = job, l1, l0a, l0b, l0c, ub
        self.nb = job.nb
        self.nstage = self.nstep = self.nunit = 0
        self.ub_pending = [False] * len(l0c)
        self.l1b = [None] * self.nb           # the B block each L1 slot holds
        self.l0bk = [None] * self.nb          # the B step each L0B slot holds

    def run(self, stages):
        it = iter(stages)
        nxt = next(it, None)
        if nxt is None:
            return
        self._copyin(nxt, 0)
        i = 0
        while nxt is not None:
            cur = nxt
            nxt = next(it, None)
            if nxt is not None:
                self._copyin(nxt, i + 1)
            self._compute(cur, i)
            if cur.last:
                self._copyout(cur.out)
            i += 1
        self._drain(i)

    def _copyin(self, st: Stage, i: int):
        s = i % self.nb
        if i >= self.nb:
            WaitFlag(HardEvent.MTE1_MTE2, s)
        load_b = st.bkey is None or self.l1b[s] != st.bkey
        st.copyin(self.l1[s], load_b)
        self.l1b[s] = st.bkey
        SetFlag(HardEvent.MTE2_MTE1, s)

    def _compute(self, st: Stage, i: int):
        s = i % self.nb
        nb = self.nb
        WaitFlag(HardEvent.MTE2_MTE1, s)
        cslot = self.nunit % len(self.l0c)
        for n, (la, lb, m, nn, k, bk) in enumerate(st.steps):
            j = self.nstep % nb
            if self.nstep >= nb:
                WaitFlag(HardEvent.M_MTE1, j)
            la(self.l0a[j], self.l1[s])
            if bk is None or self.l0bk[j] != bk:
                lb(self.l0b[j], self.l1[s])
            self.l0bk[j] = bk
            SetFlag(HardEvent.MTE1_M, j)
            WaitFlag(HardEvent.MTE1_M, j)
            first = st.first and n == 0
            if first and self.nunit >= len(self.l0c):
                WaitFlag(HardEvent.FIX_M if self.job.a2 else HardEvent.V_M, cslot)
            Mmad(self.l0c[cslot], self.l0a[j], self.l0b[j], MmadParams(m=m, n=nn, k=k, cmatrixInitVal=first))
            SetFlag(HardEvent.M_MTE1, j)
            self.nstep += 1
        SetFlag(HardEvent.MTE1_MTE2, s)

    def _copyout(self, out):
        cs = self.nunit % len(self.l0c)
        c = self.l0c[cs]
        if self.job.a2:
            SetFlag(HardEvent.M_FIX, cs)
            WaitFlag(HardEvent.M_FIX, cs)
            out(c, None, "fix")
            SetFlag(HardEvent.FIX_M, cs)
        else:
            SetFlag(HardEvent.M_V, cs)
            WaitFlag(HardEvent.M_V, cs)
            if self.ub_pending[cs]:
                WaitFlag(HardEvent.MTE3_V, cs)
            out(c, self.ub[cs], "ub")          # L0C -> UB on V
            SetFlag(HardEvent.V_M, cs)
            SetFlag(HardEvent.V_MTE3, cs)
            WaitFlag(HardEvent.V_MTE3, cs)
            out(c, self.ub[cs], "store")       # UB -> GM on MTE3
            SetFlag(HardEvent.MTE3_V, cs)
            self.ub_pending[cs] = True
        self.nunit += 1

    def _drain(self, nstages: int):
        for i in range(max(0, nstages - self.nb), nstages):
            WaitFlag(HardEvent.MTE1_MTE2, i % self.nb)
        for i in range(max(0, self.nstep - self.nb), self.nstep):
            WaitFlag(HardEvent.M_MTE1, i % self.nb)
        nc = len(self.l0c)
        for u in range(max(0, self.nunit - nc), self.nunit):
            WaitFlag(HardEvent.FIX_M if self.job.a2 else HardEvent.V_M, u % nc)
        for cs, p in enumerate(self.ub_pending):
            if p:
                WaitFlag(HardEvent.MTE3_V, cs)
        self.nstage = self.nstep = self.nunit = 0
        self.ub_pending = [False] * nc


def _coupled_out(c, ub, phase, m, n, odt, dst, strips_stride, rows_stride, atomic, nz: bool):
    """Coupled chips: L0C -> UB (V, whole fractals, NZ kept, FP32 -> FP16 on the way), then UB
    -> GM on MTE3: NZ strips into NC1HWC0 planes (nz) or 16-column strips into row-major rows."""
    m1, n1 = ceil_div(m, 16), ceil_div(n, 16)
    u = ub.ReinterpretCast(odt)
    osz = odt.itemsize
    if phase == "ub":
        DataCopy(u, c, DataCopyParams(1, m1 * n1, 0, 0),
                 DataCopyEnhancedParams(BlockMode.BLOCK_MODE_MATRIX, DeqScale.DEQF16 if odt == F16 else DeqScale.DEQ_NONE))
        return
    if atomic:
        SetAtomicAdd(np.float32)
    if nz:
        DataCopy(dst, u, DataCopyParams(n1, m * 16 * osz // 32, (m1 * 16 - m) * 16 * osz // 32,
                                        (strips_stride - m) * 16 * osz // 32))
    else:
        for l in range(n1):
            DataCopy(dst[l * 16], u[l * m1 * 256], DataCopyParams(m, 16 * osz // 32, 0, (rows_stride - 16) * osz // 32))
    if atomic:
        SetAtomicNone()


def _gm(a, dt=None):
    if a is None:
        return None
    g = GlobalTensor(dt or a.dtype)
    g.SetGlobalBuffer(a)
    return g


def _cube_body(DY, XM, WP, DXG, ACC, A32, job: CubeJob):
    cd = job.cd
    isz, c0 = cd.itemsize, 32 // cd.itemsize
    work = job.blocks[GetBlockIdx()]
    pipe = TPipe()
    bufs = {}
    for name, pos, size in (("L1", TPosition.A1, job.nb * job.l1), ("L0A", TPosition.A2, job.nb * job.l0a),
                            ("L0B", TPosition.B2, job.nb * job.l0b), ("L0C", TPosition.CO1, job.l0c)):
        b = TBuf(pos)
        pipe.InitBuffer(b, size)
        bufs[name] = b.Get(np.uint8)
    ub = None
    if not job.a2:
        b = TBuf(TPosition.VECCALC)
        pipe.InitBuffer(b, 2 * job.ub_out)
        ub = [b.Get(np.uint8)[i * job.ub_out] for i in range(2)]
    if job.hf32:
        SetHF32Mode(True)
    l1 = [bufs["L1"][i * job.l1] for i in range(job.nb)]
    l0a = [bufs["L0A"][i * job.l0a].ReinterpretCast(cd) for i in range(job.nb)]
    l0b = [bufs["L0B"][i * job.l0b].ReinterpretCast(cd) for i in range(job.nb)]
    gDY, gX, gWP = _gm(DY, cd), _gm(XM, cd), _gm(WP, cd)
    gDXG = _gm(DXG, job.dxg_dt) if DXG is not None else None
    gACC = _gm(ACC, job.acc_dt) if ACC is not None else None
    gA32 = _gm(A32, cd) if A32 is not None else None
    dx_units = [i for k, i in work if k == "dx"]
    dw_units = [i for k, i in work if k == "dw"]
    if dx_units:
        t = job.dx
        csz = align_up(t.m, 16) * align_up(t.nt, 16) * 4
        l0c = [bufs["L0C"][i * csz].ReinterpretCast(float32) for i in range(t.nc)]
        s = Sched(job, l1, l0a, l0b, l0c, ub)
        s.run(_dx_stages(job, dx_units, gDY, gWP, gDXG, isz, c0))
    if dw_units:
        if dx_units:
            PipeBarrier(PIPE_ALL)
        l0c = [bufs["L0C"][0].ReinterpretCast(float32)]
        s = Sched(job, l1, l0a, l0b, l0c, ub)
        s.run(_dw_stages(job, dw_units, gDY, gX, gACC, gA32, isz, c0))


def _zero_stage(m: int, n: int, c0: int, out) -> Stage:
    """A unit no tap reaches: an Mmad of zero fractals writes its (zero) tile."""
    m1, n1 = ceil_div(m, 16), ceil_div(n, 16)

    def copyin(l1, load_b=True):
        InitConstValue(l1, InitConstValueParams(1, (m1 + n1) * 16, 0, 0))

    def la(a2, l1):
        LoadData(a2, l1.ReinterpretCast(a2.dtype), LoadData2DParams(startIndex=0, repeatTimes=m1, srcStride=1))

    def lb(b2, l1):
        LoadData(b2, l1.ReinterpretCast(b2.dtype), LoadData2DParams(startIndex=m1, repeatTimes=n1, srcStride=1))
    return Stage(copyin, [(la, lb, m, n, c0, None)], True, True, out)


def _depth_plane(pl: int, out_depth: int, src, ax, k: int) -> int | None:
    """The plane of map `src` that depth tap k of output plane pl (image-major, out_depth planes
    per image) reads, or None if it falls in the depth padding; 0 for a folded map (2-D)."""
    if src.fold:
        return 0
    n_img, od = divmod(pl, out_depth)
    jd = od * ax.s - ax.P + k * ax.d
    return n_img * src.D + jd if 0 <= jd < src.D else None


def _dx_stages(job: CubeJob, unit_ids, gDY, gWP, gDXG, isz, c0):
    geo, t, wp = job.geo, job.dx, job.wp
    my, lay = geo.dy, geo.dxg
    Wg = lay.Wd
    C1co = ceil_div(geo.Cout, c0)
    C1o = ceil_div(geo.Cin, 16)
    S = geo.nphase
    odt = job.dxg_dt
    boff = _a32(t.slab)                     # the weight block's place in every L1 slot
    for ui in unit_ids:
        g, q, pl, p0, m, j = t.units[ui]
        f = geo.phases[q]
        n0, nw = t.ntiles[j]
        n1 = ceil_div(nw, 16)
        m1 = ceil_div(m, 16)
        Khw = f.Khw
        kk = t.kk
        dst = gDXG[(((g * C1o + n0 // 16) * S + q) * lay.block + pl * lay.plane + p0) * 16]

        def out(c, ub, phase, m=m, nw=nw, dst=dst, m1=m1):
            if phase == "fix":
                Fixpipe(dst, c, FixpipeParamsV220(nSize=nw, mSize=m, srcStride=m1 * 16, dstStride=S * lay.block), CFG_NZ)
            else:
                _coupled_out(c, ub, phase, m, nw, odt, dst, S * lay.block, 0, False, True)
        oh0, oh1 = p0 // Wg, (p0 + m - 1) // Wg
        hlo, l1H, top, bot = axis_window(f.ax[1], oh0, oh1 - oh0 + 1, my.R)
        mst = p0 - oh0 * Wg
        specs = []
        if l1H:
            for kdt in range(f.ax[0].K):
                plane = _depth_plane(pl, lay.D, my, f.ax[0], kdt)
                if plane is None:
                    continue
                for c1a in range(0, C1co, t.c1n):
                    specs.append((kdt, plane, c1a, min(t.c1n, C1co - c1a)))
        if not specs:
            yield _zero_stage(m, nw, c0, out)
            continue
        for si, (kdt, plane, c1a, cn) in enumerate(specs):
            src_a = gDY[(((g * C1co + c1a) * my.NP + plane) * my.R + hlo) * my.Wd * c0]
            src_b = gWP[wp.off(g, q, kdt, c1a, j, 0)]
            blen = cn * Khw * n1 * 16 * c0 * isz // 32

            def copyin(l1, load_b, src_a=src_a, src_b=src_b, cn=cn, blen=blen, l1H=l1H):
                DataCopy(_region(l1, t.slab, job.cd), src_a,
                         DataCopyParams(cn, l1H * my.Wd * c0 * isz // 32, (my.block - l1H * my.Wd) * c0 * isz // 32, 0))
                if load_b:
                    DataCopy(l1[boff].ReinterpretCast(job.cd), src_b, DataCopyParams(1, blen, 0, 0))
            kst = cn * Khw * c0
            steps = []
            for k0 in range(0, kst, kk):
                kl = min(kk, kst - k0)
                p3 = LoadData3DParamsV2(padList=(f.left, f.right, top, bot), l1H=l1H, l1W=my.Wd, channelSize=cn * c0,
                                        kExtension=kl, mExtension=m, kStartPt=k0, mStartPt=mst,
                                        strideW=f.ax[2].s, strideH=f.ax[1].s, filterW=f.ax[2].K,
                                        filterH=f.ax[1].K, dilationFilterW=f.ax[2].d, dilationFilterH=f.ax[1].d)
                p2 = LoadData2DParams(startIndex=(k0 // c0) * n1, repeatTimes=ceil_div(kl, c0) * n1, srcStride=1)

                def la(a2, l1, p3=p3):
                    LoadData(a2, l1.ReinterpretCast(a2.dtype), p3)

                def lb(b2, l1, p2=p2):
                    LoadData(b2, l1[boff].ReinterpretCast(b2.dtype), p2)
                bkey = ("dx", g, q, j, kdt, c1a)
                steps.append((la, lb, m, nw, kl, bkey + (k0, kl)))
            yield Stage(copyin, steps, si == 0, si == len(specs) - 1, out, bkey)


def _dw_stages(job: CubeJob, unit_ids, gDY, gX, gACC, gA32, isz, c0):
    geo, t = job.geo, job.dw
    f = geo.dwf
    alay = geo.dy if geo.amap == "dy" else geo.x
    blay = geo.x if geo.amap == "dy" else geo.dy
    gA, gB = (gDY, gX) if geo.amap == "dy" else (gX, gDY)
    Wg, Wm = alay.Wd, blay.Wd
    Khw, KD = f.Khw, f.ax[0].K
    C1a, C1b = ceil_div(geo.Mg, c0), ceil_div(geo.Cb, c0)
    rowKd = C1b * Khw * c0
    kk = t.kk
    atomic = t.ks > 1
    HWimg = alay.D * alay.H * alay.Wd
    for ui in unit_ids:
        g, kd, m0, mt, col0, ncol, pieces = t.units[ui]
        m1 = ceil_div(mt, 16)
        c1aB = col0 // (Khw * c0)
        c1nB = ceil_div(col0 + ncol, Khw * c0) - c1aB
        kstB = col0 - c1aB * Khw * c0
        c1aA = m0 // c0
        c1nA = ceil_div(m0 + mt, c0) - c1aA
        kstA = m0 - c1aA * c0
        dst = gACC[((g * geo.Mg + m0) * KD + kd) * rowKd + col0]

        def out(c, ub, phase, mt=mt, ncol=ncol, dst=dst, m1=m1):
            if phase == "fix":
                if atomic:
                    SetAtomicAdd(np.float32)
                Fixpipe(dst, c, FixpipeParamsV220(nSize=ncol, mSize=mt, srcStride=m1 * 16, dstStride=KD * rowKd))
                if atomic:
                    SetAtomicNone()
            else:
                _coupled_out(c, ub, phase, mt, ncol, job.acc_dt, dst, 0, KD * rowKd, atomic, False)
        specs = []
        for (pl, p0, kl) in pieces:
            plane_b = _depth_plane(pl, alay.D, blay, f.ax[0], kd)
            if plane_b is None:
                continue
            oh0, oh1 = p0 // Wg, (p0 + kl - 1) // Wg
            hlo, l1H, top, bot = axis_window(f.ax[1], oh0, oh1 - oh0 + 1, blay.R)
            if l1H == 0:
                continue
            specs.append((pl, p0, kl, plane_b, oh0, oh1 - oh0 + 1, hlo, l1H, top, bot))
        if not specs:
            if atomic:
                continue             # nothing to add
            yield _zero_stage(mt, ncol, c0, out)
            continue
        for si, (pl, p0, kl, plane_b, oh0, rowsA, hlo, l1H, top, bot) in enumerate(specs):
            if t.a_nd2nz:
                a_bytes = align_up(mt, 16) * align_up(kl, c0) * isz
                if alay.fold:
                    n_img = p0 // (alay.pitch * Wg)
                    pimg = p0 - n_img * alay.pitch * Wg
                else:
                    n_img, od = divmod(pl, alay.D)
                    pimg = od * alay.H * Wg + p0
                src_a = gA32[((n_img * geo.G + g) * geo.Mg + m0) * HWimg + pimg]
            else:
                a_bytes = c1nA * rowsA * Wg * c0 * isz
                src_a = gA[(((g * C1a + c1aA) * alay.NP + pl) * alay.R + oh0) * Wg * c0]
            src_b = gB[(((g * C1b + c1aB) * blay.NP + plane_b) * blay.R + hlo) * Wm * c0]
            boff = _a32(a_bytes)

            def copyin(l1, load_b=True, src_a=src_a, src_b=src_b, kl=kl, rowsA=rowsA, boff=boff, l1H=l1H, mt=mt,
                       m1=m1, c1nA=c1nA, c1nB=c1nB):
                a1 = _region(l1, boff, job.cd)
                if t.a_nd2nz:
                    if mt % 16:
                        InitConstValue(a1, InitConstValueParams(1, m1 * 16 * ceil_div(kl, c0), 0, 0))
                    DataCopy(a1, src_a, Nd2NzParams(1, mt, kl, 0, HWimg, m1 * 16, 1, 0))
                else:
                    DataCopy(a1, src_a, DataCopyParams(c1nA, rowsA * Wg * c0 * isz // 32,
                                                       (alay.block - rowsA * Wg) * c0 * isz // 32, 0))
                DataCopy(l1[boff].ReinterpretCast(job.cd), src_b,
                         DataCopyParams(c1nB, l1H * Wm * c0 * isz // 32, (blay.block - l1H * Wm) * c0 * isz // 32, 0))
            steps = []
            for q0 in range(0, kl, kk):
                kq = min(kk, kl - q0)
                k1 = ceil_div(kq, c0)
                mst = p0 + q0 - oh0 * Wg
                if t.a_nd2nz:
                    def la(a2, l1, q0=q0, k1=k1):
                        frac = 512 // a2.dtype.itemsize
                        for kb in range(k1):
                            LoadData(a2[kb * frac], l1.ReinterpretCast(a2.dtype),
                                     LoadData2DParams(startIndex=(q0 // c0 + kb) * m1, repeatTimes=m1, srcStride=1,
                                                      dstGap=k1 - 1))
                else:
                    pa = LoadData3DParamsV2(padList=(0, 0, 0, 0), l1H=rowsA, l1W=Wg, channelSize=c1nA * c0,
                                            kExtension=mt, mExtension=kq, kStartPt=kstA, mStartPt=mst,
                                            enTranspose=True)

                    def la(a2, l1, pa=pa):
                        LoadData(a2, l1.ReinterpretCast(a2.dtype), pa)
                pb = LoadData3DParamsV2(padList=(f.left, f.right, top, bot), l1H=l1H, l1W=Wm, channelSize=c1nB * c0,
                                        kExtension=ncol, mExtension=kq, kStartPt=kstB, mStartPt=mst,
                                        strideW=f.ax[2].s, strideH=f.ax[1].s, filterW=f.ax[2].K, filterH=f.ax[1].K,
                                        dilationFilterW=f.ax[2].d, dilationFilterH=f.ax[1].d)

                def lb(b2, l1, pb=pb, boff=boff):
                    LoadData(b2, l1[boff].ReinterpretCast(b2.dtype), pb)
                steps.append((la, lb, mt, ncol, kq, None))
            yield Stage(copyin, steps, si == 0, si == len(specs) - 1, out)


# =============================================================================================
# the plan
# =============================================================================================
def _deal(items: list, nblocks: int) -> list[list]:
    """Items dealt round-robin over at most nblocks blocks (similar items, similar costs)."""
    nblocks = max(1, min(nblocks, len(items)))
    return [items[b::nblocks] for b in range(nblocks)]


def _cube_geometry(geom, go):
    """The convolution the Cube computes, the gradOutput view it reads, and whether no window
    reads any element at all. A transposed convolution's outputPadding may reach past every
    window along W (outputPadding >= stride, which CANN accepts in 1D and 2D): those last
    columns of gradOutput feed no gradient but gradBias, and load3d's output width follows its
    map's width, so the Cube reads a view of the columns the windows reach (made contiguous by
    the usual copy)."""
    if not geom.transposed:
        return geom, go, False
    X, O, k, s, d = geom.in_sp[-1], geom.out_sp[-1], geom.k[-1], geom.stride[-1], geom.dilation[-1]
    before = geom.pad[-1][0]
    reach = (X - 1) * s + d * (k - 1) + 1 - before      # columns of gradOutput the windows read
    if reach <= 0:
        return geom, go, True
    if O < reach + s:           # load3d's grid is X wide: the extra columns fit in its last stride
        return geom, go, False
    from dataclasses import replace
    from simulator.acl import aclTensor
    view = aclTensor(go.viewDims[:-1] + (reach,), go.dataType, go.stride, go.offset, go.format, go.storageDims,
                     go.data)
    return replace(geom, out_sp=geom.out_sp[:-1] + (reach,)), view, False


def plan_convolution_backward(op, geom, go, x, w, outs, promoted, compute, cube_math, profile) -> Plan:
    mask = [o is not None for o in outs]
    gi, gw, gb = outs
    ov = tiling_override(op)
    cd = STORAGE[compute]
    isz, c0 = cd.itemsize, 32 // cd.itemsize
    G = geom.groups
    hf32 = compute == "HF32"
    nb = 2 if bool(ov.get("doubleBuffer", True)) else 1
    nvec = vector_core_count(profile)
    ub = ub_bytes(profile)
    workspace: list[tuple[str, int]] = []
    tiling: dict = {"computeDtype": compute, "cubeMathType": cube_math, "promotedDtype": promoted,
                    "C0": c0, "groups": G}

    def part(name: str, nbytes: int) -> int:
        workspace.append((name, max(int(nbytes), 32)))
        return len(workspace) - 1

    empty = geom.N == 0 or geom.Cin == 0 or geom.Cout == 0
    wanted = mask
    call_geom = geom
    geom, go_cube, no_taps = _cube_geometry(geom, go)
    # windows that touch no input element (stride and padding skip them all) give a zero
    # gradInput, and for a transposed convolution a zero gradWeight too: a zero fill writes them
    dx_zero = mask[0] and not empty and (no_taps or not geom.transposed
                                         and all(f is None for f in make_geo(geom, mask, c0).phases))
    dw_zero = mask[1] and not empty and no_taps
    mask = [mask[0] and not dx_zero, mask[1] and not dw_zero, mask[2]]      # what the Cube computes
    steps = []
    srcs = {}
    for name, t, needed in (("gradOutput", go, mask[2] or (go_cube is go and (mask[0] or mask[1]))),
                            ("gradOutput:cube", go_cube, go_cube is not go and (mask[0] or mask[1])),
                            ("input", x, mask[1]), ("weight", w, mask[0])):
        if not needed or t.numel() == 0:
            continue
        if t.is_contiguous():
            srcs[name] = ("tensor", t)
        else:
            idx = part(f"contiguous copy of gradOutput's first {t.viewDims[-1]} columns (the ones the windows read)"
                       if name == "gradOutput:cube" else f"contiguous copy of {name} (non-contiguous view)",
                       t.numel() * t.itemsize)
            steps.append((name, t, idx))
            srcs[name] = ("ws", idx, t.dtype)

    def offsets():
        out, off = [], 0
        for _, n in workspace:
            out.append(off)
            off += align_up(n, 512)
        return out

    def src_arg(name, ws, offs):
        s = srcs[name]
        if s[0] == "tensor":
            t = s[1]
            return tensor_arg(t, name) + t.offset
        return workspace_arg(ws, offs[s[1]], workspace[s[1]][1], s[2], f"workspace:{name}")

    def ws_arg(i, dt, label, ws, offs):
        return workspace_arg(ws, offs[i], workspace[i][1], dt, label)

    cube = None
    if not empty and (mask[0] or mask[1]):
        geo = make_geo(geom, mask, c0)
        cc = cube_caps(profile, compute)
        if mask[0]:
            for f in geo.phases:
                if f is not None:
                    _load3d_limits(f, "ConvolutionBackward gradInput")
        nd2nz = isz == 4
        dx = plan_dx(geo, cc, isz, c0, gi.itemsize, ov, nb) if mask[0] else None
        dw = plan_dw(geo, cc, isz, c0, gw.itemsize, ov, nb, nd2nz) if mask[1] else None
        C1co, C1ci = ceil_div(geo.Cout, c0), ceil_div(geo.Cin, c0)
        zero_bytes = min(16384, ub // 8) // 32 * 32
        room = ub - zero_bytes
        # ---- workspace parts
        DYM = part(f"gradOutput as tall NC1HWC0 ({dtype_name(cd)}, C0 {c0}, {geo.dy.pitch} rows per image)",
                   G * C1co * geo.dy.block * c0 * isz)
        XM = None
        if mask[1]:
            XM = part(f"input as tall NC1HWC0 ({dtype_name(cd)}, C0 {c0}, {geo.x.pitch} rows per image)",
                      G * C1ci * geo.x.block * c0 * isz)
        maps = [(plan_to5hd("gradOutput", geo.N, G, geo.Cout, c0, int(np.prod(geo.O)), geo.dy, go.dtype, cd, room),
                 0, 4)]
        if mask[1] and geo.s2d is not None:
            maps.append((plan_s2d_map(geo.N, geo.s2d, geo.X[1:], geo.x, x.dtype, cd, room), 1, 8))
        elif mask[1]:
            maps.append((plan_to5hd("input", geo.N, G, geo.Cin, c0, int(np.prod(geo.X)), geo.x, x.dtype, cd, room),
                         1, 8))
        wp = WP = DXG = None
        if mask[0]:
            wp = plan_packw(geo, w.dtype, cd, c0, dx.ntiles, room)
            WP = part(f"weight as gradInput's right operand (taps flipped, {'per sub-pixel phase, ' if geo.nphase > 1 else ''}"
                      f"L0B zN fractals per n-tile of {dx.nt}, {dtype_name(cd)})", wp.size * isz)
            DXG = part(f"gradInput per sub-pixel phase, NC1HWC0 ({geo.nphase} phase grid(s) of {geo.dxg.R} x "
                       f"{geo.dxg.Wd}, {dtype_name(gi.dtype)})",
                       G * ceil_div(geo.Cin, 16) * geo.nphase * geo.dxg.block * 16 * gi.itemsize)
        ACC = A32 = None
        acc_dt = None
        cast = None
        if mask[1]:
            KD, Khw = geo.dwf.ax[0].K, geo.dwf.Khw
            rowKd = ceil_div(geo.Cb, c0) * Khw * c0
            acc_dt = F32 if dw.ks > 1 else np.dtype(gw.dtype)
            ACC = part((f"gradWeight FP32 accumulator (partial sums of {dw.ks} cores per tile, atomic add)"
                        if dw.ks > 1 else f"gradWeight tiles ({dtype_name(acc_dt)}, C0-blocked columns)"),
                       G * geo.Mg * KD * rowKd * acc_dt.itemsize)
            if nd2nz:
                aname, at = ("gradOutput", go) if geo.amap == "dy" else ("input", x)
                if np.dtype(at.dtype) != cd:
                    A32 = part(f"{aname} cast to {dtype_name(cd)} (gradWeight's left operand, ND->NZ)", at.numel() * isz)
                    cast = (at.numel(), np.dtype(at.dtype), cd, 8192, aname)
                else:
                    A32 = ("src", aname)
        # ---- cube blocks: LPT over the AICs
        costs, kinds = [], []
        if dx is not None:
            costs += dx.costs
            kinds += [("dx", i) for i in range(len(dx.units))]
        if dw is not None:
            costs += dw.costs
            kinds += [("dw", i) for i in range(len(dw.units))]
        nblk = int(ov.get("blockDim", 0)) or cc.cores
        groups_, makespan = _balance(costs, nblk)
        blocks = []
        for grp in groups_:
            ks = [kinds[i] for i in grp]
            blocks.append([k for k in ks if k[0] == "dx"] + [k for k in ks if k[0] == "dw"])
        l1 = max(_a32(dx.slab) + dx.bchunk if dx else 0, _a32(dw.slabA) + dw.slabB if dw else 0,
                 # a unit that no tap reaches writes its tile from zero fractals (_zero_stage)
                 (ceil_div(dx.m, 16) + ceil_div(dx.nt, 16)) * 512 if dx else 0,
                 (ceil_div(dw.mt, 16) + ceil_div(dw.nt, 16)) * 512 if dw else 0)
        l0a = max(align_up(dx.m, 16) * dx.kk * isz if dx else 0, align_up(dw.mt, 16) * dw.kk * isz if dw else 0)
        l0b = max(dx.kk * align_up(dx.nt, 16) * isz if dx else 0, dw.kk * align_up(dw.nt, 16) * isz if dw else 0)
        l0c = max(dx.nc * align_up(dx.m, 16) * align_up(dx.nt, 16) * 4 if dx else 0,
                  align_up(dw.mt, 16) * align_up(dw.nt, 16) * 4 if dw else 0)
        for b, need, cap in (("L1", nb * l1, cc.L1), ("L0A", nb * l0a, cc.L0A), ("L0B", nb * l0b, cc.L0B),
                             ("L0C", l0c, cc.L0C)):
            if need > cap:
                raise tiling_error(f"ConvolutionBackward tiling: {need} B of {b} does not fit: {b} holds {cap} B")
        ub_out = 0
        if not cc.a2:
            ub_out = max(align_up(dx.m, 16) * align_up(dx.nt, 16) * gi.itemsize if dx else 0,
                         align_up(dw.mt, 16) * align_up(dw.nt, 16) * acc_dt.itemsize if dw else 0)
            if 2 * ub_out > ub:
                raise tiling_error(f"ConvolutionBackward tiling: 2 x {ub_out} B of UB for L0C -> UB does not fit")
        cube = CubeJob(geo, cc.a2, cd, hf32, nb, _a32(l1), l0a, l0b, l0c, dx, dw, wp,
                       np.dtype(gi.dtype) if mask[0] else None, acc_dt, ub_out, blocks)
        # ---- prologue work
        pro_items = []
        for i, (t, _, _) in enumerate(maps):
            pro_items += [(("5hd", i), it) for it in (s2d_items(t) if isinstance(t, S2DMap) else to5hd_items(t))]
            pro_items += [(("gap", i), it) for it in gap_items(t, zero_bytes)]
        if wp is not None:
            pro_items += [("pack", it) for it in wp.items]
        if mask[1] and dw.ks > 1:
            pro_items += [("acc0", it) for it in zero_items(workspace[ACC][1], zero_bytes)]
        if cast is not None:
            pro_items += [("cast", it) for it in cast_items(cast[0], cast[3])]
        pro_blocks = [[] for _ in range(min(nvec, len(pro_items)))]
        kinds_p = []
        for k, _ in pro_items:
            if k not in kinds_p:
                kinds_p.append(k)
        off = 0
        for k in kinds_p:
            its = [it for kk, it in pro_items if kk == k]
            for i, it in enumerate(its):
                pro_blocks[(off + i) % len(pro_blocks)].append((k, it))
            off += len(its)
        prologue = Prologue(ub, zero_bytes, maps, wp, workspace[ACC][1] if (mask[1] and dw.ks > 1) else 0,
                            cast[:4] if cast else None, pro_blocks)
        # ---- epilogue work
        dxo = plan_dx_out(geo, gi.dtype, ub) if mask[0] else None
        dwo = None
        if mask[1] and geo.s2d is not None:
            dwo = plan_s2d_out(geo.s2d, geo.Mg, acc_dt, gw.dtype, ub)
        elif mask[1]:
            dwo = plan_dw_out(G, geo.Mg, geo.Cb, c0, geo.dwf.ax[0].K, geo.dwf.Khw, acc_dt, gw.dtype, ub)
        epi_items = ([("dx", it) for it in dx_out_items(dxo)] if dxo else []) + \
                    ([("dw", it) for it in (s2d_out_items(dwo) if isinstance(dwo, S2DOut) else dw_out_items(dwo))]
                     if dwo else [])
        epi_blocks = [[] for _ in range(min(nvec, len(epi_items)))]
        for i, it in enumerate(epi_items):
            epi_blocks[i % len(epi_blocks)].append(it)
        epilogue = Epilogue(ub, dxo, dwo, epi_blocks)
        if dx is not None:
            tiling["gradInput"] = {"baseM": dx.m, "baseN": dx.nt, "baseK": dx.kk, "c1Chunk": dx.c1n,
                                   "L0CTiles": dx.nc, "units": len(dx.units), "phases": geo.nphase,
                                   "phasesWithTaps": sum(f is not None for f in geo.phases),
                                   "rowsPerImage": geo.dy.pitch, "doubleBuffer": nb == 2}
        if dw is not None:
            tiling["gradWeight"] = {"baseM": dw.mt, "baseN": dw.nt, "baseK": dw.kk, "stagePositions": dw.kc,
                                    "kSplit": dw.ks, "units": len(dw.units), "leftOperand":
                                    "ND->NZ + load2d" if dw.a_nd2nz else "load3d (1x1, transposed)",
                                    "doubleBuffer": nb == 2}
        tiling["blockDim"] = len(blocks)
        tiling["estimatedCubeCycles"] = round(makespan)
    dense_out = {}
    for i, (name, t) in enumerate((("gradInput", gi), ("gradWeight", gw), ("gradBias", gb))):
        if wanted[i] and t.numel() > 0 and not t.is_contiguous():
            dense_out[name] = part(f"{name} dense, before the strided write-back", t.numel() * t.itemsize)
    plan = Plan(workspace, lambda ws: [], tiling)

    def out_arg(name, t, ws, offs):
        if name in dense_out:
            i = dense_out[name]
            return workspace_arg(ws, offs[i], workspace[i][1], t.dtype, f"workspace:{name}")
        return tensor_arg(t, name) + t.offset

    def build(ws):
        offs = offsets()
        assert offs == list(plan.workspace_offsets().values()) or len(set(n for n, _ in workspace)) != len(workspace)
        L = []
        for name, t, idx in steps:
            b, _ = view_copy_launch(t, name, profile, gather=True)
            L.append(b(ws_arg(idx, t.dtype, f"workspace:{name}", ws, offs)))
        if empty:
            if mask[1] and gw.numel():
                L.append(zero_fill_launch("gradWeight", out_arg("gradWeight", gw, ws, offs), gw.numel() * gw.itemsize,
                                          profile))
            if mask[0] and gi.numel() and (geom.Cout == 0 and geom.N > 0 and geom.Cin > 0):
                L.append(zero_fill_launch("gradInput", out_arg("gradInput", gi, ws, offs), gi.numel() * gi.itemsize,
                                          profile))
            if mask[2] and gb.numel() and (geom.N == 0 or geom.Cout == 0):
                L.append(zero_fill_launch("gradBias", out_arg("gradBias", gb, ws, offs), gb.numel() * gb.itemsize,
                                          profile))
        for name, t, zero in (("gradInput", gi, dx_zero), ("gradWeight", gw, dw_zero)):
            if zero:
                L.append(zero_fill_launch(name, out_arg(name, t, ws, offs), t.numel() * t.itemsize, profile))
        if cube is not None:
            dya = src_arg("gradOutput" if go_cube is go else "gradOutput:cube", ws, offs)
            xa = src_arg("input", ws, offs) if mask[1] else None
            wa = src_arg("weight", ws, offs) if mask[0] else None
            wpa = ws_arg(WP, cd, "workspace:W'", ws, offs) if WP is not None else None
            dym = ws_arg(DYM, cd, "workspace:dy 5HD", ws, offs)
            xm = ws_arg(XM, cd, "workspace:x 5HD", ws, offs) if XM is not None else None
            acca = ws_arg(ACC, acc_dt, "workspace:dW acc", ws, offs) if ACC is not None else None
            dxga = ws_arg(DXG, gi.dtype, "workspace:dX phases", ws, offs) if DXG is not None else None
            a32 = cs_src = cs_dst = None
            if A32 is not None:
                if isinstance(A32, tuple):
                    a32 = src_arg(A32[1], ws, offs)
                else:
                    a32 = cs_dst = ws_arg(A32, cd, "workspace:A cast", ws, offs)
                    cs_src = src_arg(cast[4], ws, offs)
            gms = (dya, xa, wa, wpa, dym, acca, cs_src, cs_dst, xm)
            L.append(KernelLaunch("TransData(gradOutput, input -> NC1HWC0; weight -> W')" if mask[0] and mask[1] else
                                  ("TransData(gradOutput -> NC1HWC0; weight -> W')" if mask[0] else
                                   "TransData(gradOutput, input -> NC1HWC0)"),
                                  _prologue_body, len(prologue.blocks), "vector", (gms, prologue)))
            name = " + ".join(n for n, b in (("GradInput(sub-pixel img2col x W'T)", mask[0]),
                                             ("GradWeight(dy^T x img2col)", mask[1])) if b)
            L.append(KernelLaunch(f"Cube: {name}", _cube_body, len(cube.blocks), "cube",
                                  (dym, xm, wpa, dxga, acca, a32, cube)))
            ego = (dxga, out_arg("gradInput", gi, ws, offs) if mask[0] else None,
                   acca, out_arg("gradWeight", gw, ws, offs) if mask[1] else None)
            L.append(KernelLaunch(" + ".join(n for n, b in (("GradInput(phases NC1HWC0 -> NCHW)", mask[0]),
                                                           ("GradWeight(-> weight layout)", mask[1])) if b),
                                  _epilogue_body, len(epilogue.blocks), "vector", (ego, epilogue)))
        for name, t in (("gradInput", gi), ("gradWeight", gw)):
            if name in dense_out:       # written dense above (by the epilogue or a zero fill)
                b, _ = view_copy_launch(t, name, profile, gather=False)
                L.append(b(out_arg(name, t, ws, offs)))
        if mask[2] and gb.numel() and not (geom.N == 0):
            goa = src_arg("gradOutput", ws, offs)
            P = int(np.prod(call_geom.out_sp))
            L.append(bias_launch(goa, out_arg("gradBias", gb, ws, offs), geom.N, geom.Cout, P, goa.dtype,
                                 gb.dtype, profile))
            if "gradBias" in dense_out:
                b, _ = view_copy_launch(gb, "gradBias", profile, gather=False)
                L.append(b(out_arg("gradBias", gb, ws, offs)))
        return L

    plan.build = build
    return plan
