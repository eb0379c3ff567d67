"""The convolution as the Cube sees it: per-axis img2col families (gradInput's sub-pixel phases,
gradWeight's window), the tall NC1HWC0 map layouts and grids, the space-to-depth fold for
conv1-like layers, and the storage dtypes of the maps.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from simulator.arith import ceil_div
from ..common import tiling_error


@dataclass(frozen=True)
class ConvGeometry:
    """One convolution, normalised: nd spatial dims, per-dim (before, after) padding. For a
    transposed convolution, weight is (Cin, Cout/groups, *k); otherwise (Cout, Cin/groups, *k).
    `in_sp` is input's spatial shape, `out_sp` gradOutput's."""
    nd: int
    N: int
    Cin: int
    Cout: int
    groups: int
    in_sp: tuple
    out_sp: tuple
    k: tuple
    stride: tuple
    dilation: tuple
    pad: tuple            # ((before, after), ...) per spatial dim
    out_pad: tuple
    transposed: bool

    @property
    def macs(self) -> int:
        """MACs of one gradient (dx or dw) of this convolution: N*Cout*prod(out)*Cin/g*prod(k)
        for a convolution (roles swapped when transposed)."""
        sp = self.out_sp if not self.transposed else self.in_sp
        kk = int(np.prod(self.k))
        return self.N * self.Cout * int(np.prod(sp)) * (self.Cin // self.groups) * kk


BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
STORAGE = {"FLOAT16": F16, "BF16": BF16, "FLOAT": F32, "HF32": F32}


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


def axis_window(ax: Axis, o0: int, cnt: int, length: int, taps: tuple | None = None):
    """Map rows a run of grid rows [o0, o0 + cnt) (grid index, shift included) reads along H:
    (lo, rows, pad_before, pad_after); rows 0 if the window misses the map. taps: (first, count),
    the kernel rows of one tap group (a stage that holds only those rows' window), else all."""
    first, count = taps if taps is not None else (0, max(ax.K, 1))
    v0 = o0 * ax.s - ax.pad + first * ax.d
    ext = (cnt - 1) * ax.s + ax.d * (count - 1) + 1
    lo, hi = max(v0, 0), min(v0 + ext, length)
    if hi <= lo:
        return 0, 0, 0, 0
    before = lo - v0
    return lo, hi - lo, before, ext - before - (hi - lo)


@dataclass(frozen=True)
class MapLayout:
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
class Img2colFamily:
    """One img2col family: per axis (D, H, W) and the load3d W padding."""
    ax: tuple
    left: int
    right: int

    @property
    def Khw(self) -> int:
        return self.ax[1].K * self.ax[2].K


def _pad3(t, fill):
    return (fill,) * (3 - len(t)) + tuple(t)


@dataclass
class CubeGeometry:
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
    dy: MapLayout               # gradOutput map
    x: MapLayout                # input map
    # gradInput
    S: tuple              # phases per axis (sd, sh, sw)
    phases: list          # per phase q: Img2colFamily or None (no tap)
    dxg: MapLayout              # the phase grid (one per phase)
    Qmax: tuple           # valid outputs per phase, max over phases, per axis
    shmax: tuple          # grid shift, max over phases, per axis (H, W; D has none)
    # gradWeight
    dwf: Img2colFamily | None     # gradWeight's family (None where gradWeight is not computed)
    Mg: int               # rows of dW per group (A-map channels)
    Cb: int               # B-map channels per group
    amap: str             # "dy" or "x": the A-map (its layout is the grid)
    bmap: str
    s2d: "SpaceToDepth | None" = None   # gradWeight over the input folded 2x2 into channels (conv1-like layers)

    @property
    def nphase(self) -> int:
        return self.S[0] * self.S[1] * self.S[2]


@dataclass(frozen=True)
class SpaceToDepth:
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


def _space_to_depth_axis(X, k, p, e):
    pairs = [(kk, ph) for kk in range(k) for ph in (0, 1) if (kk - p + e - ph) % 2 == 0]
    a = [(kk - p + e - ph) // 2 for kk, ph in pairs]
    amin, amax = min(a), max(a)
    return (X + e + 1) // 2, amax - amin + 1, -amin, 2 * amin + p - e


def _space_to_depth(geom, c0, mask) -> SpaceToDepth | None:
    """The folded gradWeight applies to 2D, groups 1, stride 2 x 2, dilation 1, 4 * C_in <= C0
    (16-bit), an input width whose rows stay 32-B aligned, and a requested gradWeight."""
    if (geom.nd != 2 or geom.transposed or geom.groups != 1 or tuple(geom.stride) != (2, 2)
            or tuple(geom.dilation) != (1, 1) or c0 != 16 or 4 * geom.Cin > c0 or not mask[1]
            or geom.in_sp[1] % 16 or geom.Cout % 16):
        return None
    (kh, kw), (ph, pw) = geom.k, (geom.pad[0][0], geom.pad[1][0])
    Xh, Kh, Ph, dh = _space_to_depth_axis(geom.in_sp[0], kh, ph, ph % 2)
    Xw, Kw, Pw, dw = _space_to_depth_axis(geom.in_sp[1], kw, pw, 0)
    return SpaceToDepth(geom.Cin, c0 // 4, ph % 2, Xh, Xw, Kh, Kw, dh, dw, (kh, kw)), (Ph, Pw)


@dataclass(frozen=True)
class _Axes3:
    """The convolution's per-axis figures as (D, H, W): a 1D / 2D convolution gets unit leading
    axes (kernel, stride, dilation and sizes 1, padding 0), so one code path serves every rank."""
    k: tuple
    s: tuple
    d: tuple
    pad_before: tuple
    X: tuple              # input spatial
    O: tuple              # gradOutput spatial


def _axes3(geom) -> _Axes3:
    return _Axes3(_pad3(geom.k, 1), _pad3(geom.stride, 1), _pad3(geom.dilation, 1),
                  _pad3(tuple(p[0] for p in geom.pad), 0), _pad3(geom.in_sp, 1), _pad3(geom.out_sp, 1))


def _forward_pitches(axes: _Axes3, mask, sd: SpaceToDepth | None, sd_pad_h: int | None, phases_h: list):
    """Rows per image of the folded maps (fold axis H): gradOutput's Pd and input's Px = s_h * Pd,
    enough for every window gradWeight and gradInput's phases read past an image's last row."""
    O, X, k, s, d, p = axes.O[1], axes.X[1], axes.k[1], axes.s[1], axes.d[1], axes.pad_before[1]
    req = [O]
    if mask[1] and sd is not None:
        after = max(0, (O - 1) - sd_pad_h + (sd.Kh - 1) - (sd.Xh - 1))
        req.append(sd.Xh + max(sd_pad_h, after))
    elif mask[1]:
        after = max(0, (O - 1) * s - p + (k - 1) * d - (X - 1))
        req.append(ceil_div(X + max(p, after), s))
    if mask[0]:
        for ax in phases_h:
            if ax.K:
                req += [ax.Q + ax.sh, O + ax.pad, ax.Q - 1 - ax.P + (ax.K - 1) * ax.d + 1]
        req.append(max(ax.sh for ax in phases_h) + max(ax.Q for ax in phases_h))
    Pd = max(req)
    return Pd, (Pd if sd is not None else s * Pd)


def _phase_grid(axes: _Axes3, ph: list, N: int, fold: bool, Pd: int):
    """The grid every gradInput phase writes: rows per image (fold: the dy pitch; 3D: enough for
    every phase), width enough for every phase's valid outputs after its shift. Returns (grid,
    Qmax, shmax)."""
    Qmax = tuple(max(ax.Q for ax in ph[i]) for i in range(3))
    shmax = (0, max(ax.sh for ax in ph[1]), max(ax.sh for ax in ph[2]))
    Wg = shmax[2] + Qmax[2]
    for ax in ph[2]:
        if ax.K:
            Wg = max(Wg, axes.O[2] + ax.pad - ax.d * (ax.K - 1))
    Hg = Pd if fold else shmax[1] + Qmax[1]
    return MapLayout(N, fold, Qmax[0], Qmax[1], Hg, Wg), Qmax, shmax


def _phase_families(ph: list, map_width: int, grid_width: int) -> list:
    """Per sub-pixel phase (D, H, W order): its img2col family, or None if it has no tap or no
    output (a zero fill of the grid stands for it)."""
    phases = []
    for ax_d in ph[0]:
        for ax_h in ph[1]:
            for ax_w in ph[2]:
                axs = (ax_d, ax_h, ax_w)
                if min(ax.K for ax in axs) == 0 or min(ax.Q for ax in axs) == 0:
                    phases.append(None)
                    continue
                left, right = wpad(ax_w, map_width, grid_width)
                phases.append(Img2colFamily(axs, left, right))
    return phases


def _forward_geometry(geom, axes: _Axes3, mask, c0: int) -> CubeGeometry:
    """A convolution's two GEMMs: gradInput as sub-pixel phases of a stride-1 convolution of dy,
    gradWeight = dy^T x img2col(x) (over the space-to-depth fold where it applies)."""
    N, G, fold = geom.N, geom.groups, geom.nd < 3
    sd = _space_to_depth(geom, c0, mask)
    sd_pad = None
    if sd is not None:
        sd, sd_pad = sd
    fw = tuple(forward_axis(axes.s[i], axes.d[i], axes.pad_before[i], axes.k[i], axes.O[i]) for i in range(3))
    if sd is not None:
        fw = (fw[0], forward_axis(1, 1, sd_pad[0], sd.Kh, axes.O[1]), forward_axis(1, 1, sd_pad[1], sd.Kw, axes.O[2]))
    ph = [phase_axes(axes.X[i], axes.O[i], axes.k[i], axes.s[i], axes.d[i], axes.pad_before[i]) for i in range(3)]
    S = tuple(len(p) for p in ph)
    if fold:
        Pd, Px = _forward_pitches(axes, mask, sd, sd_pad[0] if sd_pad else None, ph[1])
    else:
        Pd, Px = axes.O[1], axes.X[1]
    X3, O3 = axes.X, axes.O
    dy = MapLayout(N, fold, O3[0], O3[1], Pd, O3[2])
    x = MapLayout(N, fold, X3[0], X3[1], Px, X3[2]) if sd is None else MapLayout(N, fold, 1, sd.Xh, Px, sd.Xw)
    dxg, Qmax, shmax = _phase_grid(axes, ph, N, fold, Pd)
    phases = _phase_families(ph, O3[2], dxg.Wd)
    dwf = Img2colFamily(fw, *wpad(fw[2], x.Wd, O3[2])) if mask[1] else None
    Cin, Cout = geom.Cin // G, geom.Cout // G
    return CubeGeometry(geom.nd, N, G, Cin, Cout, False, X3, O3, axes.k, fold, dy, x, S, phases, dxg, Qmax, shmax,
                        dwf, Cout, c0 if sd is not None else Cin, "dy", "x", sd)


def _transposed_geometry(geom, axes: _Axes3) -> CubeGeometry:
    """A transposed convolution's two GEMMs: gradInput is a plain stride-s convolution of dy
    (one "phase"), gradWeight = x^T x img2col(dy)."""
    N, G, fold = geom.N, geom.groups, geom.nd < 3
    X3, O3 = axes.X, axes.O
    fw = tuple(forward_axis(axes.s[i], axes.d[i], axes.pad_before[i], axes.k[i], X3[i]) for i in range(3))
    O, X, k, s, d, p = O3[1], X3[1], axes.k[1], axes.s[1], axes.d[1], axes.pad_before[1]
    if fold:
        after = max(0, (X - 1) * s - p + (k - 1) * d - (O - 1))
        Px = max(X, ceil_div(O + max(p, after), s))
        Pd = s * Px
    else:
        Pd, Px = O, X
    dy = MapLayout(N, fold, O3[0], O3[1], Pd, O3[2])
    x = MapLayout(N, fold, X3[0], X3[1], Px, X3[2])
    left, right = wpad(fw[2], O3[2], X3[2])
    fam = Img2colFamily(fw, left, right)
    Cin, Cout = geom.Cin // G, geom.Cout // G
    return CubeGeometry(geom.nd, N, G, Cin, Cout, True, X3, O3, axes.k, fold, dy, x, (1, 1, 1), [fam], x, X3,
                        (0, 0, 0), fam, Cin, Cout, "x", "dy")


# gradInput runs one sub-pixel GEMM per stride phase (the product of the strides); a plan of more
# phases than this would take longer to lay out than to simulate (stride 255 x 255 is 65,025)
MAX_SUBPIXEL_PHASES = 1 << 16


def make_cube_geometry(geom, mask, c0: int = 16) -> CubeGeometry:
    """The convolution as the Cube computes it, the planner's first step after the checks: the
    img2col families of both GEMMs and the layouts of their maps and grids. mask: the gradients
    computed (gradInput, gradWeight, ...); the maps make room only for the windows those read."""
    axes = _axes3(geom)
    phases = int(np.prod([int(x) for x in axes.s], dtype=object))
    if not geom.transposed and phases > MAX_SUBPIXEL_PHASES:      # (the maps' pitches follow the phases too)
        raise tiling_error(f"strides {list(geom.stride)} make {phases:,} sub-pixel phases, past the "
                           f"{MAX_SUBPIXEL_PHASES:,} this plan lays out; not modelled yet (CANN accepts 1D / 2D "
                           f"strides to 2^31 - 2)")
    if geom.transposed:
        return _transposed_geometry(geom, axes)
    return _forward_geometry(geom, axes, mask, c0)
