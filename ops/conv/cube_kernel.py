"""The Cube launch (all AICs): gradInput and gradWeight units as img2col GEMMs fed by load3d from
the NC1HWC0 maps in L1, run by the pipeline of cube_pipeline.py. This module holds the launch's
body and gradInput's units (sub-pixel phases of dy's img2col x W'^T); gradWeight's are
cube_grad_weight.py.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from simulator.kernel import (DataCopy, DataCopyParams, GetBlockIdx, GlobalTensor, PipeBarrier, PIPE_ALL,
                              TBuf, TPipe, TPosition, float32)
from simulator.kernel.cube import (CFG_NZ, Fixpipe, FixpipeParamsV220, InitConstValue, InitConstValueParams,
                                   LoadData, LoadData2DParams, LoadData3DParamsV2, SetHF32Mode)
from simulator.arith import align_up, ceil_div
from .cube_grad_weight import dw_stages
from .cube_pipeline import (CubeJob, L0Step, Sched, Stage, copy_planes, coupled_out, depth_plane, load_a3d, w_window,
                            zero_stage)
from .geometry import axis_window
from .tiling import l1_margins
from .vector_pipeline import align32, sub_tensor


def _gm(a, dt=None):
    if a is None:
        return None
    g = GlobalTensor(dt or a.dtype)
    g.SetGlobalBuffer(a)
    return g


def cube_body(DY, XM, WP, DXG, ACC, A32, job: CubeJob):
    dt = job.compute_dtype
    c0 = 32 // dt.itemsize
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
    l0a = [bufs["L0A"][i * job.l0a].ReinterpretCast(dt) for i in range(job.nb)]
    l0b = [bufs["L0B"][i * job.l0b].ReinterpretCast(dt) for i in range(job.nb)]
    gDY, gX, gWP = _gm(DY, dt), _gm(XM, dt), _gm(WP, dt)
    gDXG = _gm(DXG, job.dxg_dt) if DXG is not None else None
    gACC = _gm(ACC, job.acc_dt) if ACC is not None else None
    gA32 = _gm(A32, dt) if A32 is not None else None
    dx_units = [i for k, i in work if k == "dx"]
    dw_units = [i for k, i in work if k == "dw"]
    if dx_units:
        t = job.dx
        csz = align_up(t.m, 16) * align_up(t.nt, 16) * 4
        l0c = [bufs["L0C"][i * csz].ReinterpretCast(float32) for i in range(t.nc)]
        s = Sched(job, l1, l0a, l0b, l0c, ub)
        s.run(_dx_stages(job, dx_units, gDY, gWP, gDXG, c0))
    if dw_units:
        if dx_units:
            PipeBarrier(PIPE_ALL)
        l0c = [bufs["L0C"][0].ReinterpretCast(float32)]
        s = Sched(job, l1, l0a, l0b, l0c, ub)
        s.run(dw_stages(job, dw_units, gDY, gX, gACC, gA32, c0))


class DxSlab(NamedTuple):
    """One L1 stage of a gradInput unit: c1n gradOutput C1 planes from c1 of one depth tap, and
    the kernel rows `taps` (first, count) of the phase's, with the slab's window over gradOutput:
    (first row, rows, pad above, pad below)."""
    kdt: int              # the phase's depth tap
    plane: int            # the gradOutput map plane it reads
    c1: int
    c1n: int
    taps: tuple
    hwin: tuple


def _dx_out(job: CubeJob, dst, m: int, nw: int):
    """The unit's m x nw tile into the phase grid workspace (NC1HWC0, strided by the phases)."""
    stride = job.geo.nphase * job.geo.dxg.block

    def out(c, ub, phase):
        if phase == "fix":
            Fixpipe(dst, c, FixpipeParamsV220(nSize=nw, mSize=m, srcStride=ceil_div(m, 16) * 16, dstStride=stride),
                    CFG_NZ)
        else:
            coupled_out(c, ub, phase, m, nw, job.dxg_dt, dst, stride, 0, False, True)
    return out


def _dx_slabs(job: CubeJob, f, pl: int, oh0: int, rows: int, c0: int) -> list[DxSlab]:
    """The unit's stages: every depth tap that reaches a gradOutput plane and every tap group
    (DxTiling.hgroup; one group of all kernel rows without) whose window over the grid rows
    [oh0, oh0 + rows) reaches the map, in runs of C1 planes."""
    geo, t = job.geo, job.dx
    C1co = ceil_div(geo.Cout, c0)
    K = f.ax[1].K
    groups = [(a, min(t.hgroup, K - a)) for a in range(0, K, t.hgroup)] if t.hgroup else [None]
    slabs = []
    for kdt in range(f.ax[0].K):
        plane = depth_plane(pl, geo.dxg.D, geo.dy, f.ax[0], kdt)
        if plane is None:
            continue
        for taps in groups:
            hwin = axis_window(f.ax[1], oh0, rows, geo.dy.R, taps)
            if hwin[1] == 0:
                continue
            for c1 in range(0, C1co, t.c1n):
                slabs.append(DxSlab(kdt, plane, c1, min(t.c1n, C1co - c1), taps or (0, K), hwin))
    return slabs


def _dx_copyin(job: CubeJob, src_a, src_b, slab: DxSlab, window: tuple, wl: int | None, b_copy: DataCopyParams,
               c0: int):
    """gradOutput rows (the slab; a window of wl columns, DxTiling.window) at the slot's base, in
    the zero margins load3d's padding cannot take (l1_margins), the W' block after it."""
    my, t, dt = job.geo.dy, job.dx, job.compute_dtype
    isz = dt.itemsize
    boff = align32(t.slab)
    l1H, top, bot, l1W, left, right = window
    et, eb, el, er = l1_margins(top, bot, left, right)
    c1n = slab.c1n

    def copyin(l1, load_b):
        a1 = sub_tensor(l1, t.slab, dt)
        if et or eb or el or er:
            rows, cols = et + l1H + eb, el + l1W + er
            _zero_l1(a1, c1n * rows * cols * c0 * isz // 32)
            u = c0 * isz // 32
            for c in range(c1n):
                dst, src = a1[((c * rows + et) * cols + el) * c0], src_a[c * my.block * c0]
                if max(my.Wd - l1W, el + er) * u <= 65535:
                    DataCopy(dst, src, DataCopyParams(l1H, l1W * u, (my.Wd - l1W) * u, (el + er) * u))
                    continue
                for r in range(l1H):        # strides past DataCopyParams' 16-bit fields: a row at a time
                    DataCopy(dst[r * cols * c0], src[r * my.Wd * c0], DataCopyParams(1, l1W * u, 0, 0))
        elif wl is not None:
            copy_planes(a1, src_a, c1n, l1H, wl, my.Wd, my.block, c0)
        else:
            DataCopy(a1, src_a, DataCopyParams(c1n, l1H * my.Wd * c0 * isz // 32, (my.block - l1H * my.Wd) * c0 * isz // 32, 0))
        if load_b:
            DataCopy(l1[boff].ReinterpretCast(dt), src_b, b_copy)
    return copyin


def _zero_l1(dst, blocks: int):
    """Zero `blocks` 32-B blocks of L1 (InitConstValue, in runs its fields take)."""
    done = 0
    while done < blocks:
        blk = min(32767, blocks - done)
        rep = min(255, (blocks - done) // blk)
        InitConstValue(dst[done * 32 // dst.dtype.itemsize], InitConstValueParams(rep, blk, 0, 0))
        done += rep * blk


def _dx_steps(job: CubeJob, f, slab: DxSlab, m: int, nw: int, mst: int, window: tuple, c0: int,
              bkey: tuple) -> list[L0Step]:
    """The slab's L0 steps: load3d img2col of gradOutput (A) and load2d of W' (B), kk deep each.
    window: (rows, pad above, pad below, columns, pad left, pad right) of the slab; padding past
    load3d's fields is the slab's zero margins in L1 (l1_margins)."""
    kk = job.dx.kk
    boff = align32(job.dx.slab)
    l1H, top, bot, l1W, left, right = window
    et, eb, el, er = l1_margins(top, bot, left, right)
    n1 = ceil_div(nw, 16)
    kh = slab.taps[1]
    kst = slab.c1n * kh * f.ax[2].K * c0
    steps = []
    for k0 in range(0, kst, kk):
        kl = min(kk, kst - k0)
        p3 = LoadData3DParamsV2(padList=(left - el, right - er, top - et, bot - eb), l1H=et + l1H + eb,
                                l1W=el + l1W + er, channelSize=slab.c1n * c0,
                                kExtension=kl, mExtension=m, kStartPt=k0, mStartPt=mst,
                                strideW=f.ax[2].s, strideH=f.ax[1].s, filterW=f.ax[2].K,
                                filterH=kh, dilationFilterW=f.ax[2].d, dilationFilterH=f.ax[1].d)
        p2 = LoadData2DParams(startIndex=(k0 // c0) * n1, repeatTimes=ceil_div(kl, c0) * n1, srcStride=1)
        steps.append(L0Step(partial(load_a3d, p3), partial(_load_b2d, boff, p2), m, nw, kl, bkey + (k0, kl)))
    return steps


def _load_b2d(boff, params, b2, l1):
    LoadData(b2, l1[boff].ReinterpretCast(b2.dtype), params)


def _dx_unit_stages(job: CubeJob, unit, gDY, gWP, gDXG, c0: int):
    geo, t, wp = job.geo, job.dx, job.wp
    my, lay = geo.dy, geo.dxg
    g, q, pl, p0, m, j = unit
    f = geo.phases[q]
    n0, nw = t.ntiles[j]
    dst = gDXG[(((g * ceil_div(geo.Cin, 16) + n0 // 16) * geo.nphase + q) * lay.block + pl * lay.plane + p0) * 16]
    out = _dx_out(job, dst, m, nw)
    oh0, oh1 = p0 // lay.Wd, (p0 + m - 1) // lay.Wd
    mst = p0 - oh0 * lay.Wd
    wlo, wl, left, right = 0, my.Wd, f.left, f.right
    if t.window:
        wlo, wl, left, right = w_window(f, mst, m, my.Wd)
        mst = 0
    slabs = _dx_slabs(job, f, pl, oh0, oh1 - oh0 + 1, c0) if wl else []
    if not slabs:
        yield zero_stage(m, nw, c0, out)
        return
    C1co = ceil_div(geo.Cout, c0)
    KW, KH = f.ax[2].K, f.ax[1].K
    unit = ceil_div(nw, 16) * 16 * c0 * job.compute_dtype.itemsize // 32     # 32-B blocks of W' per tap
    for si, slab in enumerate(slabs):
        hlo, l1H, top, bot = slab.hwin
        a, kh = slab.taps
        src_a = gDY[((((g * C1co + slab.c1) * my.NP + slab.plane) * my.R + hlo) * my.Wd + wlo) * c0]
        src_b = gWP[wp.off(g, q, slab.kdt, slab.c1, j, a * KW)]
        if kh == KH:
            b_copy = DataCopyParams(1, slab.c1n * f.Khw * unit, 0, 0)
        else:                   # a tap group: its rows of taps in each C1 plane's block
            b_copy = DataCopyParams(slab.c1n, kh * KW * unit, (KH - kh) * KW * unit, 0)
        window = (l1H, top, bot, wl, left, right)
        copyin = _dx_copyin(job, src_a, src_b, slab, window, wl if t.window else None, b_copy, c0)
        bkey = ("dx", g, q, j, slab.kdt, slab.c1) + ((a,) if t.hgroup else ())
        steps = _dx_steps(job, f, slab, m, nw, mst, window, c0, bkey)
        yield Stage(copyin, steps, si == 0, si == len(slabs) - 1, out, bkey)


def _dx_stages(job: CubeJob, unit_ids, gDY, gWP, gDXG, c0: int):
    for ui in unit_ids:
        yield from _dx_unit_stages(job, job.dx.units[ui], gDY, gWP, gDXG, c0)
