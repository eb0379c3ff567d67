"""aclnnMaxPool2dWithIndicesBackward(gradOutput, self, indices, kernelSize, stride, padding, dilation,
ceilMode, gradInput): each gradOutput element added to gradInput at its window's maximum, the flat
index h W + w in `indices` (torch's max_pool2d_with_indices_backward). Atlas A2 only, and there
(the document) FLOAT gradients, INT32 indices and dilation 1.

Two launches, as CANN's non-deterministic default (MaxPool3DGradWithArgmax, atomic adds):
a zero fill of gradInput, then the scatter: per tile of G planes x output rows and columns,
gradOutput and indices come into UB one DataCopyPad per plane and are transposed so the planes
are the vector lanes; the tile's input window is zeroed; per output row and tap, an Adds gives
the tap's flat index on a template of the columns' offsets, a repeat-form Compare EQ against
the indices and a Select keep the gradients whose maximum sits at that tap, and a repeat-form Add
adds them into the window at the tap's columns (the repeat stride steps the stride's columns).
The window is transposed back and added into gradInput with atomic adds, one copy per plane
(windows of neighbouring tiles overlap). Our own: the tile search (shared with the forward).

Checks: null self / indices (and gradOutput / gradInput) 161001; then 161002: the series, dtypes
(FLOAT gradients, INT32 indices on A2), rank 3 or 4, kernelSize / stride / padding lengths and
values (padding in 0..kernelSize, as this document states it), dilation 1, gradOutput's and
indices' shapes (the pooled shape), gradInput's (self's).
"""
from __future__ import annotations


import numpy as np

from simulator.aclnn import OpDef, Param, Plan, Workspace, check_tensor_view, register, require_present, \
    require_support
from simulator.arith import align_up
from simulator.enums import dtype_name, param_invalid
from simulator.kernel import (CMPMODE, GM_ADDR, SELMODE, Add, Adds, BinaryRepeatParams, Compare, DataCopyExtParams,
                              DataCopyPad, Duplicate, GetBlockIdx, GlobalTensor, Loop, PIPE_ALL, PipeBarrier, Select,
                              SetAtomicAdd, SetAtomicNone, TBuf, TPipe, TPosition, Transpose, TransposeParamsExt,
                              TransposeType)
from simulator.program import KernelLaunch
from ..common import zero_fill_launch
from ..elementwise.chain import Chain
from .max_pool2d_with_indices import (MAX_REP_STRIDE, PoolJob as GradJob, _pair, _window, dense_operands, job_in_passes,
                                      out_size, pass_window, tile_at, tile_kind)

OP = "MaxPool2dWithIndicesBackward"
TILING_FIELDS = {"planes": "int", "rows": "int", "cols": "int"}
F32, I32 = np.dtype(np.float32), np.dtype(np.int32)


def _geometry(a: dict):
    k = _pair(a["kernelSize"], "kernelSize", (1, 2), op=OP)
    s = _pair(a["stride"], "stride", (0, 1, 2), default=k, op=OP)
    p = _pair(a["padding"], "padding", (1, 2), op=OP)
    d = _pair(a["dilation"], "dilation", (1, 2), op=OP)
    return k, s, p, d


def _check(a: dict, profile) -> None:
    names = ("gradOutput", "self", "indices", "gradInput")
    require_present(a, names, OP)
    support = require_support(OP, profile)
    for name in names:
        check_tensor_view(a[name], name)
    for name in ("gradOutput", "self", "gradInput"):
        if dtype_name(a[name].dataType) not in support.dtypes:
            raise param_invalid(f"{OP}: {name} has dtype {dtype_name(a[name].dataType)}; {profile.series_name} "
                                f"supports {', '.join(support.dtypes)}")
    if dtype_name(a["indices"].dataType) != "INT32":
        raise param_invalid(f"{OP}: indices has dtype {dtype_name(a['indices'].dataType)}; "
                            f"{profile.series_name} supports INT32")
    x = a["self"]
    if len(x.viewDims) not in (3, 4):
        raise param_invalid(f"{OP}: self must be 3-D or 4-D, got {len(x.viewDims)}-D")
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _geometry(a)
    if min(kh, kw) <= 0 or min(sh, sw) <= 0:
        raise param_invalid(f"{OP}: kernelSize {[kh, kw]} and stride {[sh, sw]} must be positive")
    if not (0 <= ph <= kh and 0 <= pw <= kw):
        raise param_invalid(f"{OP}: padding {[ph, pw]} must be in 0 .. kernelSize ({[kh, kw]})")
    if (dh, dw) != (1, 1):
        raise param_invalid(f"{OP}: dilation {[dh, dw]} must be 1 on {profile.series_name}")
    H, W = x.viewDims[-2:]
    ceil = bool(a["ceilMode"])
    want = tuple(x.viewDims[:-2]) + (out_size(H, kh, sh, ph, ceil), out_size(W, kw, sw, pw, ceil))
    for name in ("gradOutput", "indices"):
        if a[name].viewDims != want:
            raise param_invalid(f"{OP}: {name} has shape {list(a[name].viewDims)}; the pooled shape is {list(want)}")
    if a["gradInput"].viewDims != x.viewDims:
        raise param_invalid(f"{OP}: gradInput has shape {list(a['gradInput'].viewDims)}; it must be self's "
                            f"{list(x.viewDims)}")


def _buffers(job: GradJob) -> list[tuple[str, int]]:
    hx, _, _, wxA = _window(job, job.hy, job.wy, 0)
    wxA += 8
    wyA = align_up(job.wy, 8)
    tile = job.G * job.hy * wyA * 4
    win = job.G * hx * wxA * 4
    return [("go", tile), ("ix", tile), ("goT", tile), ("ixT", tile), ("win", win), ("winT", win),
            ("tmpl", job.wy * job.G * 4), ("cand", job.wy * job.G * 4), ("sel", job.wy * job.G * 4),
            ("bits", job.wy * 8)]


def ub_need(job: GradJob) -> int:
    return sum(align_up(b, 32) for _, b in _buffers(job))


def grad_job(x, out_hw, k, s, p, profile, forced: dict) -> GradJob:
    """The forward's tile search (passes of taps included), over this kernel's buffers."""
    *lead, H, W = x.viewDims
    base = dict(nc=int(np.prod(lead, dtype=np.int64)), H=H, W=W, Ho=out_hw[0], Wo=out_hw[1], kh=k[0], kw=k[1],
                sh=s[0], sw=s[1], pt=p[0], pl=p[1])
    return job_in_passes(OP, base, ub_need, profile, forced)


def grad_body(grad_out: GM_ADDR, indices: GM_ADDR, grad_in: GM_ADDR, job: GradJob):
    first, count = job.items[GetBlockIdx()]
    gGm, iGm, xGm = GlobalTensor(F32), GlobalTensor(I32), GlobalTensor(F32)
    gGm.SetGlobalBuffer(grad_out, job.nc * job.Ho * job.Wo)
    iGm.SetGlobalBuffer(indices, job.nc * job.Ho * job.Wo)
    xGm.SetGlobalBuffer(grad_in, job.nc * job.H * job.W)
    G = job.G
    pipe, got = TPipe(), {}
    for name, nbytes in _buffers(job):
        got[name] = TBuf(TPosition.VECCALC)
        pipe.InitBuffer(got[name], align_up(nbytes, 32))
    go, ix, goT, ixT = got["go"].Get(F32), got["ix"].Get(I32), got["goT"].Get(F32), got["ixT"].Get(I32)
    tmpl = got["tmpl"].Get(I32)
    for w in range(job.wy):
        Duplicate(tmpl[w * G], w * job.sw, G)
    lb = G * 4 // 32
    row_rp = BinaryRepeatParams(dstRepStride=lb, src0RepStride=lb, src1RepStride=lb)
    # a one-column tile (a column stride past the repeat stride's reach) is one repeat: no step
    step = job.sw * lb if job.sw * lb <= MAX_REP_STRIDE else lb
    tap_rp = BinaryRepeatParams(dstRepStride=step, src0RepStride=step, src1RepStride=lb)
    bufs = (got["win"].Get(F32), got["winT"].Get(F32), tmpl, got["cand"].Get(I32), got["sel"].Get(F32),
            got["bits"].Get(np.uint8), row_rp, tap_rp)
    plane_o = job.Ho * job.Wo
    for t in Loop(range(first, first + count), key=lambda t: tile_kind(job, t, 4)):
        g0, oh0, ow0, gn, hn, wn, ih0, iw0 = tile_at(job, t)
        wnA = align_up(wn, 8)
        hx, wx = (hn - 1) * job.sh + job.kh, (wn - 1) * job.sw + job.kw
        if min(hx, job.H - ih0) <= max(0, -ih0) or min(wx, job.W - iw0) <= max(0, -iw0):
            continue                        # every window of the tile lies in the padding (padding past
                                            # kernel / 2, which this document allows): nothing lands
        PipeBarrier(PIPE_ALL)
        if gn < G or wnA > wn:              # lanes and columns no copy fills
            Duplicate(go, 0.0, G * hn * wnA)
            Duplicate(ix, -1, G * hn * wnA)
            PipeBarrier(PIPE_ALL)
        at = g0 * plane_o + oh0 * job.Wo + ow0
        for src, dst in ((gGm, go), (iGm, ix)):
            for p in range(gn):
                DataCopyPad(dst[p * hn * wnA], src[at + p * plane_o],
                            DataCopyExtParams(hn, wn * 4, (job.Wo - wn) * 4, (wnA - align_up(wn, 8)) // 8))
        PipeBarrier(PIPE_ALL)
        Transpose(goT, go, None, TransposeParamsExt(1, G, hn, wnA, TransposeType.TRANSPOSE_NCHW2NHWC))
        Transpose(ixT, ix, None, TransposeParamsExt(1, G, hn, wnA, TransposeType.TRANSPOSE_NCHW2NHWC))
        for i0 in range(0, job.kh, job.tap_rows):
            for j0 in range(0, job.kw, job.tap_cols):
                _grad_pass(job, xGm, goT, ixT, bufs, (g0, gn, hn, wn, ih0, iw0), i0, j0)


def _grad_pass(job: GradJob, xGm, goT, ixT, bufs, tile, i0: int, j0: int) -> None:
    """One pass of a tile: the taps of kernel rows [i0, i0 + tap_rows) and columns [j0, j0 +
    tap_cols) scattered into their window, which is added into gradInput."""
    win, winT, tmpl, cand, sel, bits, row_rp, tap_rp = bufs
    g0, gn, hn, wn, ih0, iw0 = tile
    pih0, piw0, kh, kw, hx, wx, off, wxA, r_lo, r_hi, c_lo, c_hi = pass_window(job, hn, wn, ih0, iw0, i0, j0)
    G, wnA = job.G, align_up(wn, 8)
    if r_hi <= r_lo or c_hi <= c_lo:        # this pass's window lies in the padding
        return
    if i0 or j0:                            # the last pass's window may still be on its way out
        PipeBarrier(PIPE_ALL)
    Duplicate(win, 0.0, hx * wxA * G)
    for r in range(hn):
        g_row, i_row = goT[r * wnA * G], ixT[r * wnA * G]
        for i in range(i0, i0 + kh):
            ih = r * job.sh + i
            for j in range(j0, j0 + kw):
                Adds(cand, tmpl, (ih0 + ih) * job.W + iw0 + j, wn * G)
                Compare(bits, i_row, cand, CMPMODE.EQ, G, wn, row_rp)
                Select(sel, bits, g_row, 0.0, SELMODE.VSEL_TENSOR_SCALAR_MODE, G, wn, row_rp)
                tap = win[((ih - i0) * wxA + off + j - j0) * G]
                Add(tap, tap, sel, G, wn, tap_rp)
    Transpose(winT, win, None, TransposeParamsExt(1, G, hx, wxA, TransposeType.TRANSPOSE_NHWC2NCHW))
    PipeBarrier(PIPE_ALL)
    cols = c_hi - c_lo
    plane_i = job.H * job.W
    SetAtomicAdd(F32)
    for p in range(gn):
        DataCopyPad(xGm[(g0 + p) * plane_i + (pih0 + r_lo) * job.W + piw0 + c_lo],
                    winT[p * hx * wxA + r_lo * wxA + off + c_lo],
                    DataCopyExtParams(r_hi - r_lo, cols * 4, (wxA * 4 - align_up(cols * 4, 32)) // 32,
                                      (job.W - cols) * 4))
    SetAtomicNone()


def _plan(a: dict, profile, forced: dict) -> Plan:
    go, x, gi = a["gradOutput"], a["self"], a["gradInput"]
    if gi.numel() == 0:
        return Plan(Workspace(), lambda ws: [], {"launches": "none (empty gradInput)"})
    if go.numel() == 0:             # no window: every gradient is zero
        c = Chain(profile, {})
        at = dense_operands(c, a, (), ("gradInput",))
        c.launch(lambda addr: zero_fill_launch("MemSet(gradInput)", addr(at["gradInput"]), gi.numel() * 4, profile))
        at["finish"]()
        return Plan(c.workspace, c.build, {"launches": "MemSet (empty gradOutput)"})
    k, s, p, _ = _geometry(a)
    job = grad_job(x, go.viewDims[-2:], k, s, p, profile, forced)
    c = Chain(profile, {})
    at = dense_operands(c, a, ("gradOutput", "indices"), ("gradInput",))
    c.launch(lambda addr: zero_fill_launch("MemSet(gradInput)", addr(at["gradInput"]), gi.numel() * 4, profile))
    c.launch(lambda addr: KernelLaunch("MaxPoolGradWithArgmax", grad_body, len(job.items), "vector",
                                       (addr(at["gradOutput"]), addr(at["indices"]), addr(at["gradInput"]), job)))
    at["finish"]()
    return Plan(c.workspace, c.build, {"blockDim": len(job.items), "planes": job.G, "rows": job.hy, "cols": job.wy,
                                       "tiles": int(np.prod(job.tiles))})


def _space(inputs: dict, profile) -> list[dict]:
    from ..tiling_space import distinct_accepted
    return distinct_accepted(OP, inputs, profile, lambda default: [
        {"planes": g, "rows": r, "cols": c} for g in (16, 32, 64) for r in (1, 2, 4, 8) for c in (8, 16, 32, 64)])


register(OpDef(OP, [Param("gradOutput", "tensor"), Param("self", "tensor"), Param("indices", "tensor"),
                    Param("kernelSize", "int_array"), Param("stride", "int_array"), Param("padding", "int_array"),
                    Param("dilation", "int_array"), Param("ceilMode", "bool"),
                    Param("gradInput", "tensor", output=True)],
               _check, _plan, lambda i: {"gradInput": (np.asarray(i["self"]).shape, np.asarray(i["self"]).dtype)},
               _space, TILING_FIELDS))
