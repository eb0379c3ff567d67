"""The Cube launch's gradWeight units: dW = dy^T x img2col(x) (roles swapped when transposed), the
left operand by transposing load3d (or ND->NZ and load2d for 32-bit dtypes), the right by load3d
img2col of the map's rows a stage's positions read (a W window's columns, a tap group's rows),
tiles written or added atomically into the accumulator.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from simulator.kernel import DataCopy, DataCopyParams, SetAtomicAdd, SetAtomicNone
from simulator.kernel.cube import (CFG_NZ, CFG_ROW_MAJOR, Fixpipe, FixpipeParamsV220, InitConstValue,
                                   InitConstValueParams, LoadData, LoadData2DParams, LoadData3DParamsV2)
from simulator.arith import align_up, ceil_div
from ..common import copy_nd2nz
from .cube_pipeline import CubeJob, L0Step, Stage, copy_planes, coupled_out, depth_plane, load_a3d, w_window, zero_stage
from .geometry import axis_window
from .grad_weight_tiling import dw_tap_group
from .vector_pipeline import sub_tensor, align32


class DwPiece(NamedTuple):
    """One L1 stage of a gradWeight unit: positions [p0, p0 + kl) of map plane pl (the K side)."""
    pl: int
    p0: int
    kl: int
    plane_b: int          # the right operand's map plane
    oh0: int              # first left-operand row
    rowsA: int            # left-operand rows
    hlo: int              # first right-operand row
    l1H: int              # right-operand rows
    top: int              # right-operand padding rows above and below
    bot: int
    # W windows (DwTiling.window): the piece is one grid row's run from column col; the right
    # operand holds map columns [wlo, wlo + wl) with load3d padding left / right
    col: int = 0
    wlo: int = 0
    wl: int = 0
    left: int = 0
    right: int = 0


def _dw_out(job: CubeJob, dst, mt: int, ncol: int, stride: int):
    """The unit's mt x ncol tile into the accumulator (an atomic add into an FP32 accumulator,
    DwTiling.atomic): rows `stride` apart, or as NZ strips `stride` rows apart (FRACTAL_Z_3D)."""
    atomic, nz = job.dw.atomic, bool(job.dw_nz_rows)

    def out(c, ub, phase):
        if phase == "fix":
            if atomic:
                SetAtomicAdd(np.float32)
            Fixpipe(dst, c, FixpipeParamsV220(nSize=ncol, mSize=mt, srcStride=ceil_div(mt, 16) * 16, dstStride=stride),
                    CFG_NZ if nz else CFG_ROW_MAJOR)
            if atomic:
                SetAtomicNone()
        else:
            coupled_out(c, ub, phase, mt, ncol, job.acc_dt, dst, stride, stride, atomic, nz)
    return out


def _dw_maps(job: CubeJob):
    """(left-operand map, right-operand map): gradOutput and input, in the order geo.amap says."""
    geo = job.geo
    return (geo.dy, geo.x) if geo.amap == "dy" else (geo.x, geo.dy)


def _dw_pieces(job: CubeJob, kd: int, pieces, taps: tuple) -> list[DwPiece]:
    """The pieces of the unit's K range whose depth tap kd and kernel rows `taps` (first, count)
    reach the right operand."""
    f = job.geo.dwf
    alay, blay = _dw_maps(job)
    Wg = alay.Wd
    out = []
    for (pl, p0, kl) in pieces:
        plane_b = depth_plane(pl, alay.D, blay, f.ax[0], kd)
        if plane_b is None:
            continue
        oh0, oh1 = p0 // Wg, (p0 + kl - 1) // Wg
        hlo, l1H, top, bot = axis_window(f.ax[1], oh0, oh1 - oh0 + 1, blay.R, taps)
        if l1H == 0:
            continue
        if job.dw.window:
            col = p0 - oh0 * Wg
            wlo, wl, left, right = w_window(f, col, kl, blay.Wd)
            if wl == 0:
                continue
            out.append(DwPiece(pl, p0, kl, plane_b, oh0, 1, hlo, l1H, top, bot, col, wlo, wl, left, right))
            continue
        out.append(DwPiece(pl, p0, kl, plane_b, oh0, oh1 - oh0 + 1, hlo, l1H, top, bot))
    return out


def _dw_left_source(job: CubeJob, gA, gA32, g: int, m0: int, mt: int, c1aA: int, pc: DwPiece, c0: int):
    """(L1 bytes of the left operand, its GM source): ND rows for ND->NZ, or NC1HWC0 rows."""
    geo, isz = job.geo, job.compute_dtype.itemsize
    alay, _ = _dw_maps(job)
    Wg = alay.Wd
    if job.dw.a_nd2nz:
        a_bytes = align_up(mt, 16) * align_up(pc.kl, c0) * isz
        if alay.fold:
            n_img = pc.p0 // (alay.pitch * Wg)
            pimg = pc.p0 - n_img * alay.pitch * Wg
        else:
            n_img, od = divmod(pc.pl, alay.D)
            pimg = od * alay.H * Wg + pc.p0
        return a_bytes, gA32[((n_img * geo.G + g) * geo.Mg + m0) * alay.D * alay.H * alay.Wd + pimg]
    c1nA = ceil_div(m0 + mt, c0) - c1aA
    a_cols = pc.kl if job.dw.window else pc.rowsA * Wg
    a_bytes = c1nA * a_cols * c0 * isz
    return a_bytes, gA[((((g * ceil_div(geo.Mg, c0) + c1aA) * alay.NP + pc.pl) * alay.R + pc.oh0) * Wg + pc.col) * c0]


def _dw_copyin(job: CubeJob, src_a, src_b, pc: DwPiece, boff: int, mt: int, c1nA: int, c1nB: int, c0: int):
    """The left operand at the slot's base (ND->NZ, zero-padded to 16 rows, or NC1HWC0 rows), the
    right operand's rows after it."""
    dt = job.compute_dtype
    isz = dt.itemsize
    alay, blay = _dw_maps(job)
    Wg, Wm = alay.Wd, blay.Wd
    m1 = ceil_div(mt, 16)

    def copyin(l1, load_b=True):
        a1 = sub_tensor(l1, boff, dt)
        if job.dw.a_nd2nz:
            if mt % 16:
                InitConstValue(a1, InitConstValueParams(1, m1 * 16 * ceil_div(pc.kl, c0), 0, 0))
            copy_nd2nz(a1, src_a, mt, pc.kl, alay.D * alay.H * alay.Wd, m1 * 16)
        elif job.dw.window:
            copy_planes(a1, src_a, c1nA, 1, pc.kl, Wg, alay.block, c0)
        else:
            DataCopy(a1, src_a, DataCopyParams(c1nA, pc.rowsA * Wg * c0 * isz // 32,
                                               (alay.block - pc.rowsA * Wg) * c0 * isz // 32, 0))
        if job.dw.window:
            copy_planes(l1[boff].ReinterpretCast(dt), src_b[pc.wlo * c0], c1nB, pc.l1H, pc.wl, Wm, blay.block, c0)
            return
        DataCopy(l1[boff].ReinterpretCast(dt), src_b,
                 DataCopyParams(c1nB, pc.l1H * Wm * c0 * isz // 32, (blay.block - pc.l1H * Wm) * c0 * isz // 32, 0))
    return copyin


def _load_a_nd2nz(q0: int, k1: int, m1: int, c0: int, a2, l1):
    """The NZ left operand's k1 fractal columns from q0, one load2d per column."""
    frac = 512 // a2.dtype.itemsize
    for kb in range(k1):
        LoadData(a2[kb * frac], l1.ReinterpretCast(a2.dtype),
                 LoadData2DParams(startIndex=(q0 // c0 + kb) * m1, repeatTimes=m1, srcStride=1, dstGap=k1 - 1))


def _dw_steps(job: CubeJob, pc: DwPiece, boff: int, mt: int, ncol: int, kstA: int, kstB: int, c1nA: int,
              c1nB: int, c0: int, filter_h: int) -> list[L0Step]:
    """The piece's L0 steps, kk positions deep: the left operand by load2d (NZ) or transposing
    load3d, the right operand by load3d img2col of filter_h kernel rows (a tap group's, or all)."""
    f = job.geo.dwf
    alay, blay = _dw_maps(job)
    Wg, Wm = alay.Wd, blay.Wd
    m1 = ceil_div(mt, 16)
    kk = job.dw.kk
    steps = []
    for q0 in range(0, pc.kl, kk):
        kq = min(kk, pc.kl - q0)
        k1 = ceil_div(kq, c0)
        mst = pc.p0 + q0 - pc.oh0 * Wg
        a_w, b_w, left, right = Wg, Wm, f.left, f.right
        if job.dw.window:
            mst, a_w, b_w, left, right = q0, pc.kl, pc.wl, pc.left, pc.right
        if job.dw.a_nd2nz:
            la = partial(_load_a_nd2nz, q0, k1, m1, c0)
        else:
            pa = LoadData3DParamsV2(padList=(0, 0, 0, 0), l1H=pc.rowsA, l1W=a_w, channelSize=c1nA * c0,
                                    kExtension=mt, mExtension=kq, kStartPt=kstA, mStartPt=mst,
                                    enTranspose=True)
            la = partial(load_a3d, pa)
        pb = LoadData3DParamsV2(padList=(left, right, pc.top, pc.bot), l1H=pc.l1H, l1W=b_w, channelSize=c1nB * c0,
                                kExtension=ncol, mExtension=kq, kStartPt=kstB, mStartPt=mst,
                                strideW=f.ax[2].s, strideH=f.ax[1].s, filterW=f.ax[2].K, filterH=filter_h,
                                dilationFilterW=f.ax[2].d, dilationFilterH=f.ax[1].d)
        steps.append(L0Step(la, partial(_load_b3d, boff, pb), mt, ncol, kq, None))
    return steps


def _load_b3d(boff, params, b2, l1):
    LoadData(b2, l1[boff].ReinterpretCast(b2.dtype), params)


def _dw_unit_stages(job: CubeJob, unit, gDY, gX, gACC, gA32, c0: int):
    geo, f = job.geo, job.geo.dwf
    gA, gB = (gDY, gX) if geo.amap == "dy" else (gX, gDY)
    _, blay = _dw_maps(job)
    Khw, KD = f.Khw, f.ax[0].K
    C1b = ceil_div(geo.Cb, c0)
    g, kd, m0, mt, col0, ncol, pieces = unit
    # the unit's columns are (C1, tap, c0) of the right operand; its rows output channels
    c1aB = col0 // (Khw * c0)
    c1nB = ceil_div(col0 + ncol, Khw * c0) - c1aB
    kstB = col0 - c1aB * Khw * c0
    taps = (0, f.ax[1].K)
    if job.dw.hgroup:           # one C1 plane's tap group: its stages hold only its rows' window
        taps = dw_tap_group(geo, job.dw.hgroup, col0, c0)
        kstB -= taps[0] * f.ax[2].K * c0
    c1aA = m0 // c0
    c1nA = ceil_div(m0 + mt, c0) - c1aA
    kstA = m0 - c1aA * c0
    rowKd = C1b * Khw * c0                  # accumulator elements per (row, depth tap)
    if job.dw_nz_rows:                      # FRACTAL_Z_3D: a 16-column strip of every row per (kd, C1, tap)
        dst = gACC[((kd * rowKd + col0) // 16 * job.dw_nz_rows + m0) * 16]
        out = _dw_out(job, dst, mt, ncol, job.dw_nz_rows)
    else:
        dst = gACC[((g * geo.Mg + m0) * KD + kd) * rowKd + col0]
        out = _dw_out(job, dst, mt, ncol, KD * rowKd)
    specs = _dw_pieces(job, kd, pieces, taps)
    if not specs:
        if not job.dw.atomic:    # (an atomic add of nothing adds nothing)
            yield zero_stage(mt, ncol, c0, out)
        return
    for si, pc in enumerate(specs):
        a_bytes, src_a = _dw_left_source(job, gA, gA32, g, m0, mt, c1aA, pc, c0)
        src_b = gB[(((g * C1b + c1aB) * blay.NP + pc.plane_b) * blay.R + pc.hlo) * blay.Wd * c0]
        boff = align32(a_bytes)
        copyin = _dw_copyin(job, src_a, src_b, pc, boff, mt, c1nA, c1nB, c0)
        steps = _dw_steps(job, pc, boff, mt, ncol, kstA, kstB, c1nA, c1nB, c0, taps[1])
        yield Stage(copyin, steps, si == 0, si == len(specs) - 1, out)


def dw_stages(job: CubeJob, unit_ids, gDY, gX, gACC, gA32, c0: int):
    for ui in unit_ids:
        yield from _dw_unit_stages(job, job.dw.units[ui], gDY, gX, gACC, gA32, c0)
