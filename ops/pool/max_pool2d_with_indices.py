"""aclnnMaxPool2dWithIndices(self, kernelSize, stride, padding, dilation, ceilMode, out, indices):
2-D max pooling of an (N, C, H, W) or (C, H, W) self, with each maximum's flat index h W + w in
its plane (the first maximum in window order, as torch returns it). Atlas A2 only.

The kernel follows CANN's A2 one (ops-nn MaxPool3DWithArgmaxV2, its no-expand-indices path):
a tile of G planes x a window of input rows and columns comes into UB (one DataCopyPad per
plane, -inf where the window hangs over the padding), is transposed so the planes are the
vector lanes ((rows, cols, G)), and each tap of the kernel is one repeat-form Compare and two
Selects over a row of outputs (the repeat stride steps the stride's columns), the tap's flat
index an Adds on a template of the columns' offsets. Max and indices are transposed back and
written per plane. BF16 is computed in FP32 (a Cast each way), as CANN does.
Our own: the tile's search (planes per tile, output rows and columns) below; CANN's tiling code
is not reproduced. The document bounds neither kernelSize nor stride: a window too large for UB
is taken in passes of kernel rows (then of one row and fewer columns), in window order so the
first maximum still wins; a column stride past a repeat stride's reach takes one-column tiles.

Checks (the document's list; the order is ours): null self / out / indices 161001; then 161002: the series, dtypes
(self BF16 / FLOAT16 / FLOAT, out self's, indices INT32 / INT64), rank 3 or 4, kernelSize 1 or 2
long and positive, stride 0 (= kernelSize), 1 or 2 long and positive, padding 1 or 2 long and in
0..kernelSize / 2, dilation 1 or 2 long and 1 (A2), an output dim of 0, out's and indices' shapes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from simulator.aclnn import OpDef, Param, Plan, check_tensor_view, register, require_present, \
    require_support
from simulator.arith import align_up, ceil_div
from simulator.enums import AclnnError, dtype_name, param_invalid
from simulator.kernel import (CMPMODE, GM_ADDR, SELMODE, Adds, BinaryRepeatParams, Cast, Compare, DataCopyExtParams,
                              DataCopyPad, Duplicate, GetBlockIdx, GlobalTensor, Loop, PIPE_ALL, PipeBarrier,
                              RoundMode, Select, TBuf, TPipe, TPosition, Transpose, TransposeParamsExt,
                              TransposeType)
from simulator.program import KernelLaunch
from ..common import split_evenly, tiling_error, ub_bytes, vector_core_count
from ..elementwise.chain import Chain

OP = "MaxPool2dWithIndices"
TILING_FIELDS = {"planes": "int", "rows": "int", "cols": "int"}
F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
MAX_REPEAT = 255           # a vector instruction's repeats: a tap covers at most this many output columns
MAX_REP_STRIDE = 255       # and steps at most this many 32-B blocks between them


def _pair(v, name: str, lengths: tuple, default=None, op: str = OP) -> tuple[int, int]:
    v = [] if v is None else list(getattr(v, "values", v))
    if len(v) not in lengths:
        raise param_invalid(f"{op}: {name} has length {len(v)}; it must be {' or '.join(map(str, lengths))}")
    if not v:
        return default
    return (int(v[0]), int(v[-1]))


def out_size(size: int, k: int, s: int, p: int, ceil: bool) -> int:
    """torch's pooling output size: floor (or ceil) of (size + 2p - k) / s + 1, less a last window
    that would start in the right padding."""
    n = (size + 2 * p - k + (s - 1 if ceil else 0)) // s + 1
    if ceil and (n - 1) * s >= size + p:
        n -= 1
    return n


def _geometry(a: dict) -> tuple:
    k = _pair(a["kernelSize"], "kernelSize", (1, 2))
    s = _pair(a["stride"], "stride", (0, 1, 2), default=k)
    p = _pair(a["padding"], "padding", (1, 2))
    d = _pair(a["dilation"], "dilation", (1, 2))
    return k, s, p, d


def _check(a: dict, profile) -> None:
    require_present(a, ("self", "out", "indices"), OP)
    support = require_support(OP, profile)
    for name in ("self", "out", "indices"):
        check_tensor_view(a[name], name)
    x, out, idx = a["self"], a["out"], a["indices"]
    if dtype_name(x.dataType) not in support.dtypes:
        raise param_invalid(f"{OP}: self has dtype {dtype_name(x.dataType)}; {profile.series_name} supports "
                            f"{', '.join(support.dtypes)}")
    if out.dataType != x.dataType:
        raise param_invalid(f"{OP}: out has dtype {dtype_name(out.dataType)}; it must be self's, "
                            f"{dtype_name(x.dataType)}")
    if dtype_name(idx.dataType) not in ("INT32", "INT64"):
        raise param_invalid(f"{OP}: indices has dtype {dtype_name(idx.dataType)}; it must be INT32 or INT64")
    if len(x.viewDims) not in (3, 4):
        raise param_invalid(f"{OP}: self must be 3-D or 4-D, got {len(x.viewDims)}-D")
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _geometry(a)
    if min(kh, kw) <= 0 or min(sh, sw) <= 0:
        raise param_invalid(f"{OP}: kernelSize {[kh, kw]} and stride {[sh, sw]} must be positive")
    if not (0 <= ph <= kh // 2 and 0 <= pw <= kw // 2):
        raise param_invalid(f"{OP}: padding {[ph, pw]} must be in 0 .. kernelSize / 2 ({[kh // 2, kw // 2]})")
    if (dh, dw) != (1, 1):
        raise param_invalid(f"{OP}: dilation {[dh, dw]} must be 1 on {profile.series_name}")
    H, W = x.viewDims[-2:]
    Ho, Wo = out_size(H, kh, sh, ph, bool(a["ceilMode"])), out_size(W, kw, sw, pw, bool(a["ceilMode"]))
    if min(x.viewDims[:-2]) <= 0 or Ho <= 0 or Wo <= 0:
        raise param_invalid(f"{OP}: the output shape {list(x.viewDims[:-2]) + [Ho, Wo]} has a dim of 0")
    want = tuple(x.viewDims[:-2]) + (Ho, Wo)
    for name in ("out", "indices"):
        if a[name].viewDims != want:
            raise param_invalid(f"{OP}: {name} has shape {list(a[name].viewDims)}; it must be {list(want)}")


@dataclass(frozen=True)
class PoolJob:
    """A pooling kernel's job (the forward's and the backward's): the geometry and the tiles."""
    nc: int
    H: int
    W: int
    Ho: int
    Wo: int
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    G: int                    # planes a tile: the vector lanes of one FP32 repeat (16, 32, 48 or 64)
    hy: int                   # output rows a tile
    wy: int                   # output columns a tile
    items: tuple = ()         # per block: (first tile, tiles)
    dtype: np.dtype = F32     # self and out (the backward: FLOAT)
    idx_dtype: np.dtype = I32  # indices in GM
    # kernel rows / columns a pass takes (0: all): a window too large for UB is taken in passes
    # of taps, in window order, the maxima and indices kept between them
    khc: int = 0
    kwc: int = 0

    @property
    def tap_rows(self) -> int:
        return self.khc or self.kh

    @property
    def tap_cols(self) -> int:
        return self.kwc or self.kw

    @property
    def tiles(self) -> tuple[int, int, int]:
        return ceil_div(self.nc, self.G), ceil_div(self.Ho, self.hy), ceil_div(self.Wo, self.wy)


def _blk(dtype) -> int:
    return 32 // np.dtype(dtype).itemsize


def _window(job: PoolJob, hn: int, wn: int, c_lo: int) -> tuple[int, int, int, int]:
    """A tile's input rows and columns, the UB column of its column 0 (so that its first column
    inside the image, c_lo, starts a 32-B block: DataCopyPad lands rows there), its UB row width."""
    hx, wx = (hn - 1) * job.sh + job.tap_rows, (wn - 1) * job.sw + job.tap_cols
    b = _blk(job.dtype)
    off = (-c_lo) % b
    return hx, wx, off, align_up(off + wx, b)


class PassWindow(NamedTuple):
    """A pass's input window: its first row and column in the input, its kernel rows and columns,
    its rows and columns, its UB column offset and row width (as _window's), and the rows
    [r_lo, r_hi) and columns [c_lo, c_hi) of it inside the image."""
    ih0: int
    iw0: int
    kh: int
    kw: int
    hx: int
    wx: int
    off: int
    wxA: int
    r_lo: int
    r_hi: int
    c_lo: int
    c_hi: int


def pass_window(job: PoolJob, hn: int, wn: int, ih0: int, iw0: int, i0: int, j0: int) -> PassWindow:
    """The window of the pass at kernel row i0, column j0 of a tile whose window starts at (ih0, iw0)."""
    ih0, iw0 = ih0 + i0, iw0 + j0
    kh, kw = min(job.tap_rows, job.kh - i0), min(job.tap_cols, job.kw - j0)
    c_lo = max(0, -iw0)
    hx, wx, off, wxA = _window(job, hn, wn, c_lo)
    hx, wx = hx - (job.tap_rows - kh), wx - (job.tap_cols - kw)
    return PassWindow(ih0, iw0, kh, kw, hx, wx, off, wxA, max(0, -ih0), min(hx, job.H - ih0), c_lo,
                      min(wx, job.W - iw0))


def _buffers(job: PoolJob) -> list[tuple[str, int]]:
    """UB buffers (name, bytes): the input window as copied and in FP32, its transpose, max and
    indices as (rows, columns, planes) and as planes of rows, the indices widened (INT64), the
    template of column offsets, a candidate index row, the compare mask."""
    hx, _, _, wxA = _window(job, job.hy, job.wy, 0)
    wxA += _blk(job.dtype)                     # room for any tile's block offset
    wyA = align_up(job.wy, 16)                 # rows of whole 32-B blocks for every out dtype
    x = job.G * hx * wxA
    out = job.G * job.hy * wyA
    return [("raw", x * job.dtype.itemsize), ("wide", x * 4 if job.dtype != F32 else 0), ("xt", x * 4),
            ("mx", out * 4), ("ix", out * 4), ("mxT", out * 4), ("ixT", out * 4),
            ("ix64", out * job.idx_dtype.itemsize if job.idx_dtype != I32 else 0),
            ("tmpl", job.wy * job.G * 4), ("cand", job.wy * job.G * 4), ("bits", job.wy * 8)]


def ub_need(job: PoolJob) -> int:
    return sum(align_up(b, 32) for _, b in _buffers(job))


def search_tiles(op: str, nc: int, Ho: int, Wo: int, taps: int, stride: int, fits, forced: dict, profile,
                 one_column: bool = False) -> tuple:
    """(planes G, output rows hy, columns wy, per-block (first tile, tiles)): for each G (a multiple
    of 16 up to 64), the fewest column splits whose one-row tile fits UB (fits(G, hy, wy)), then as
    many rows as fit; the split with the fewest estimated cycles (per tile one copy per plane in
    and two out, per output row four instructions a tap). Forced planes / rows / cols override.
    one_column: a column stride past a repeat stride's reach takes tiles one column wide (a tap
    then is one repeat, and steps nowhere)."""
    best = None
    # the narrow plane counts only when no other fits (a tap's repeat stride is in 32-B blocks)
    groups = sorted({min(align_up(nc, 16), g) for g in (16, 32, 64)})
    for G, narrow in [(G, False) for G in groups] + [(G, True) for G in groups]:
        if narrow != (stride * G // 8 > MAX_REP_STRIDE) or (narrow and (best is not None or not one_column)):
            continue
        wt = next((wt for wt in range(ceil_div(Wo, MAX_REPEAT), Wo + 1)
                   if (not narrow or wt == Wo) and fits(G, 1, ceil_div(Wo, wt))), None)
        if wt is None:
            continue
        wy = ceil_div(Wo, wt)
        hy = 1
        while hy < Ho and fits(G, hy + 1, wy):
            hy += 1
        cost = ceil_div(nc, G) * ceil_div(Ho, hy) * ceil_div(Wo, wy) * (3 * G * 40 + hy * taps * 4 * (20 + wy))
        if best is None or cost < best[0]:
            best = (cost, G, hy, wy)
    if best is None:
        raise tiling_error(f"{op}: no tile of 16 planes and one output row fits UB ({ub_bytes(profile)} B), or the "
                           f"column stride {stride} is past what a repeat stride can step ({MAX_REP_STRIDE} blocks)")
    _, G, hy, wy = best
    G, hy, wy = int(forced.get("planes", G)), int(forced.get("rows", hy)), int(forced.get("cols", wy))
    if G % 16 or not 16 <= G <= 64 or hy <= 0 or not 0 < wy <= MAX_REPEAT \
            or (stride * G // 8 > MAX_REP_STRIDE and not (one_column and wy == 1)) or not fits(G, hy, wy):
        raise tiling_error(f"{op} tiling: planes {G} must be a multiple of 16 up to 64 (and stride x planes / 8 at "
                           f"most {MAX_REP_STRIDE}), rows {hy} positive, cols {wy} in 1..{MAX_REPEAT} (a tap is one "
                           f"repeat a column), and the tile fit UB ({ub_bytes(profile)} B)")
    total = ceil_div(nc, G) * ceil_div(Ho, hy) * ceil_div(Wo, wy)
    items = tuple((a_, b - a_) for a_, b in split_evenly(total, vector_core_count(profile)) if b > a_)
    return G, hy, wy, items


def tile_at(job, t: int) -> tuple:
    """Tile t of a pooling job (planes, then output rows, then columns): its first plane, output
    row and column, their counts, and the input window's first row and column."""
    n_g, n_h, n_w = job.tiles
    gi, rest = divmod(t, n_h * n_w)
    hi, wi = divmod(rest, n_w)
    g0, oh0, ow0 = gi * job.G, hi * job.hy, wi * job.wy
    gn, hn, wn = min(job.G, job.nc - g0), min(job.hy, job.Ho - oh0), min(job.wy, job.Wo - ow0)
    return g0, oh0, ow0, gn, hn, wn, oh0 * job.sh - job.pt, ow0 * job.sw - job.pl


def tile_kind(job, t: int, isz: int) -> tuple:
    """What makes tiles alike for fast mode: their sizes, how far their window hangs over each
    edge, and the 32-B phase of their first input and output elements in GM."""
    g0, oh0, ow0, gn, hn, wn, ih0, iw0 = tile_at(job, t)
    hx, wx = (hn - 1) * job.sh + job.kh, (wn - 1) * job.sw + job.kw
    return (gn, hn, wn, max(0, -ih0), max(0, ih0 + hx - job.H), max(0, -iw0), max(0, iw0 + wx - job.W),
            (g0 * job.H * job.W + max(ih0, 0) * job.W + max(iw0, 0)) * isz % 32,
            (g0 * job.Ho * job.Wo + oh0 * job.Wo + ow0) * isz % 32)


def pool_job(x, out_hw, k, s, p, idx_dtype, profile, forced: dict) -> PoolJob:
    *lead, H, W = x.viewDims
    base = dict(nc=int(np.prod(lead, dtype=np.int64)), H=H, W=W, Ho=out_hw[0], Wo=out_hw[1], kh=k[0], kw=k[1],
                sh=s[0], sw=s[1], pt=p[0], pl=p[1], dtype=np.dtype(x.dtype), idx_dtype=np.dtype(idx_dtype))
    return job_in_passes(OP, base, ub_need, profile, forced)


def job_in_passes(op: str, base: dict, need, profile, forced: dict) -> PoolJob:
    """The tiles of the whole window if one fits UB (need(job) bytes); else of passes of fewer
    kernel rows, then of one row and fewer columns, so the taps still run in window order."""
    ub = ub_bytes(profile)
    kh, kw = base["kh"], base["kw"]
    passes = [(0, 0)] + [(r, 0) for r in _halvings(kh)] + [(1, c) for c in _halvings(kw)]
    for n, (khc, kwc) in enumerate(passes):
        chunk = dict(base, khc=khc, kwc=kwc)
        try:
            G, hy, wy, items = search_tiles(op, base["nc"], base["Ho"], base["Wo"], kh * kw, base["sw"],
                                            lambda G, hy, wy: need(PoolJob(G=G, hy=hy, wy=wy, **chunk)) <= ub,
                                            forced, profile, one_column=True)
        except AclnnError:
            if n == len(passes) - 1:
                raise
            continue
        return PoolJob(G=G, hy=hy, wy=wy, items=items, **chunk)


def _halvings(n: int) -> list[int]:
    """n // 2, n // 4, ... down to 1 (nothing for n = 1)."""
    out = []
    while n > 1:
        n //= 2
        out.append(n)
    return out


def pool_body(x: GM_ADDR, out: GM_ADDR, indices: GM_ADDR, job: PoolJob):
    first, count = job.items[GetBlockIdx()]
    dt, it = job.dtype, job.idx_dtype
    xGm, oGm, iGm = GlobalTensor(dt), GlobalTensor(dt), GlobalTensor(it)
    xGm.SetGlobalBuffer(x, job.nc * job.H * job.W)
    oGm.SetGlobalBuffer(out, job.nc * job.Ho * job.Wo)
    iGm.SetGlobalBuffer(indices, job.nc * job.Ho * job.Wo)
    G = job.G
    pipe, got = TPipe(), {}
    for name, nbytes in _buffers(job):
        if nbytes:
            buf = TBuf(TPosition.VECCALC)
            pipe.InitBuffer(buf, align_up(nbytes, 32))
            got[name] = buf
    raw = got["raw"].Get(dt)
    xin = got["wide"].Get(F32) if "wide" in got else raw
    xt, mx, ix = got["xt"].Get(F32), got["mx"].Get(F32), got["ix"].Get(I32)
    mxT, ixT = got["mxT"].Get(F32), got["ixT"].Get(I32)
    tmpl, cand, bits = got["tmpl"].Get(I32), got["cand"].Get(I32), got["bits"].Get(np.uint8)
    for w in range(job.wy):                 # column w's offset in the input, w sw, on every lane
        Duplicate(tmpl[w * G], w * job.sw, G)
    lb = G * 4 // 32                        # a lane row, in 32-B blocks
    tap_rp = BinaryRepeatParams(dstRepStride=lb, src0RepStride=job.sw * lb if job.sw * lb <= MAX_REP_STRIDE else lb,
                                src1RepStride=lb)
    row_rp = BinaryRepeatParams(dstRepStride=lb, src0RepStride=lb, src1RepStride=lb)
    plane = job.Ho * job.Wo
    bufs = (raw, xin, xt, mx, ix, bits, cand, tmpl, tap_rp, row_rp)
    for t in Loop(range(first, first + count), key=lambda t: tile_kind(job, t, dt.itemsize)):
        g0, oh0, ow0, gn, hn, wn, ih0, iw0 = tile_at(job, t)
        wnA = align_up(wn, 16)
        for i0 in range(0, job.kh, job.tap_rows):
            for j0 in range(0, job.kw, job.tap_cols):
                _pool_pass(job, xGm, bufs, (g0, gn, hn, wn, ih0, iw0), i0, j0)
        Transpose(mxT, mx, None, TransposeParamsExt(1, G, hn, wnA, TransposeType.TRANSPOSE_NHWC2NCHW))
        Transpose(ixT, ix, None, TransposeParamsExt(1, G, hn, wnA, TransposeType.TRANSPOSE_NHWC2NCHW))
        res_m, res_i = mxT, ixT
        if dt != F32:
            res_m = raw
            Cast(res_m, mxT, RoundMode.CAST_RINT, G * hn * wnA)
        if it != I32:
            res_i = got["ix64"].Get(it)
            Cast(res_i, ixT, RoundMode.CAST_NONE, G * hn * wnA)
        PipeBarrier(PIPE_ALL)
        at = g0 * plane + oh0 * job.Wo + ow0
        for res, g, isz in ((res_m, oGm, dt.itemsize), (res_i, iGm, it.itemsize)):
            for p in range(gn):
                DataCopyPad(g[at + p * plane], res[p * hn * wnA],
                            DataCopyExtParams(hn, wn * isz, (wnA * isz - align_up(wn * isz, 32)) // 32,
                                              (job.Wo - wn) * isz))


def _pool_pass(job: PoolJob, xGm, bufs, tile, i0: int, j0: int):
    """One pass of a tile: the input window kernel rows [i0, i0 + tap_rows) and columns
    [j0, j0 + tap_cols) read, copied in, transposed, and its taps folded into the maxima."""
    raw, xin, xt, mx, ix, bits, cand, tmpl, tap_rp, row_rp = bufs
    g0, gn, hn, wn, ih0, iw0 = tile
    ih0, iw0, kh, kw, hx, wx, off, wxA, r_lo, r_hi, c_lo, c_hi = pass_window(job, hn, wn, ih0, iw0, i0, j0)
    G, dt = job.G, job.dtype
    wnA = align_up(wn, 16)
    PipeBarrier(PIPE_ALL)
    if r_lo > 0 or c_lo > 0 or r_hi < hx or c_hi < wx or gn < G or off or wxA > off + wx:
        Duplicate(raw, float("-inf"), G * hx * wxA)
        PipeBarrier(PIPE_ALL)
    cols = c_hi - c_lo
    if r_hi > r_lo and cols > 0:
        for p in range(gn):
            DataCopyPad(raw[p * hx * wxA + r_lo * wxA + off + c_lo],
                        xGm[(g0 + p) * job.H * job.W + (ih0 + r_lo) * job.W + iw0 + c_lo],
                        DataCopyExtParams(r_hi - r_lo, cols * dt.itemsize, (job.W - cols) * dt.itemsize,
                                          (wxA * dt.itemsize - align_up(cols * dt.itemsize, 32)) // 32))
    PipeBarrier(PIPE_ALL)
    if dt != F32:
        Cast(xin, raw, RoundMode.CAST_NONE, G * hx * wxA)
    Transpose(xt, xin, None, TransposeParamsExt(1, G, hx, wxA, TransposeType.TRANSPOSE_NCHW2NHWC))
    if i0 == j0 == 0:
        Duplicate(mx, float("-inf"), hn * wnA * G)
        Duplicate(ix, 0, hn * wnA * G)
    for r in range(hn):
        row_m, row_i = mx[r * wnA * G], ix[r * wnA * G]
        for i in range(kh):
            ih = r * job.sh + i                     # the tap's row in the window
            for j in range(kw):
                tap = xt[(ih * wxA + off + j) * G]
                Compare(bits, tap, row_m, CMPMODE.GT, G, wn, tap_rp)
                Select(row_m, bits, tap, row_m, SELMODE.VSEL_TENSOR_TENSOR_MODE, G, wn, tap_rp)
                Adds(cand, tmpl, (ih0 + ih) * job.W + iw0 + j, wn * G)
                Select(row_i, bits, cand, row_i, SELMODE.VSEL_TENSOR_TENSOR_MODE, G, wn, row_rp)


def dense_operands(c, a: dict, inputs: tuple, outputs: tuple) -> dict:
    """Each tensor as the kernel takes it: itself when contiguous, else a workspace buffer that a
    Contiguous launch fills (an input) or a ViewCopy empties after the kernel (an output: call
    the returned `finish`)."""
    where = {}
    for name in inputs + outputs:
        t = a[name]
        if t.is_contiguous():
            where[name] = t
        else:
            where[name] = c.buffer(f"{name} dense", t.numel(), t.dtype)
            if name in inputs:
                c.contiguous(t, name, where[name])

    def finish():
        for name in outputs:
            if where[name] is not a[name]:
                c.view_copy(a[name], name, where[name])
    where["finish"] = finish
    return where


def _plan(a: dict, profile, forced: dict) -> Plan:
    x, out, idx = a["self"], a["out"], a["indices"]
    k, s, p, _ = _geometry(a)
    job = pool_job(x, out.viewDims[-2:], k, s, p, idx.dtype, profile, forced)
    c = Chain(profile, {})
    at = dense_operands(c, a, ("self",), ("out", "indices"))
    c.launch(lambda addr: KernelLaunch("MaxPoolWithArgmaxV1", pool_body, len(job.items), "vector",
                                       (addr(at["self"]), addr(at["out"]), addr(at["indices"]), job)))
    at["finish"]()
    return Plan(c.workspace, c.build, {"blockDim": len(job.items), "planes": job.G, "rows": job.hy, "cols": job.wy,
                                       "tiles": int(np.prod(job.tiles))})


def _infer(i: dict) -> dict:
    x = np.asarray(i["self"])
    k = _pair(i["kernelSize"], "kernelSize", (1, 2))
    s = _pair(i["stride"], "stride", (0, 1, 2), default=k)
    p = _pair(i["padding"], "padding", (1, 2))
    ceil = bool(i.get("ceilMode", False))
    shape = x.shape[:-2] + (out_size(x.shape[-2], k[0], s[0], p[0], ceil), out_size(x.shape[-1], k[1], s[1], p[1], ceil))
    return {"out": (shape, x.dtype), "indices": (shape, np.dtype(np.int64))}


def _space(inputs: dict, profile) -> list[dict]:
    from ..tiling_space import distinct_accepted
    return distinct_accepted(OP, inputs, profile, lambda default: [
        {"planes": g, "rows": r, "cols": c} for g in (16, 32, 64) for r in (1, 2, 4, 8) for c in (8, 16, 32, 64)])


register(OpDef(OP, [Param("self", "tensor"), Param("kernelSize", "int_array"), Param("stride", "int_array"),
                    Param("padding", "int_array"), Param("dilation", "int_array"), Param("ceilMode", "bool"),
                    Param("out", "tensor", output=True), Param("indices", "tensor", output=True)],
               _check, _plan, _infer, _space, TILING_FIELDS))
