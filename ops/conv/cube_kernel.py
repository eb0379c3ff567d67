"""The Cube launch (all AICs): gradInput and gradWeight units as img2col GEMMs fed by load3d from
the NC1HWC0 maps in L1, double-buffered in L1 and L0A/L0B with explicit flags (`Sched`), drained
by Fixpipe (A2) or through UB (coupled chips).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, NamedTuple

import numpy as np

from simulator.kernel import (DataCopy, DataCopyParams, GetBlockIdx, GlobalTensor, HardEvent, PipeBarrier,
                              PIPE_ALL, SetAtomicAdd, SetAtomicNone, SetFlag, TBuf, TPipe, TPosition,
                              WaitFlag, float32)
from simulator.kernel.cube import (CFG_NZ, BlockMode, DataCopyEnhancedParams, DeqScale, Fixpipe,
                                   FixpipeParamsV220, InitConstValue, InitConstValueParams, LoadData,
                                   LoadData2DParams, LoadData3DParamsV2, Mmad, MmadParams,
                                   SetHF32Mode)
from simulator.arith import align_up, ceil_div
from ..common import copy_nd2nz
from .geometry import F16, Axis, CubeGeometry, axis_window
from .packing import PackWeight
from .tiling import DwTiling, DxTiling
from .vector_pipeline import align32, sub_tensor


@dataclass
class CubeJob:
    """Host-side tiling of the Cube launch."""
    geo: CubeGeometry
    a2: bool
    compute_dtype: np.dtype   # the operands' dtype in L1 / L0A / L0B
    hf32: bool
    nb: int               # L1 / L0 buffers (2: double-buffered)
    l1: int               # bytes per L1 stage slot
    l0a: int
    l0b: int
    l0c: int              # bytes of L0C in use
    dx: DxTiling | None
    dw: DwTiling | None
    wp: PackWeight | None
    dxg_dt: np.dtype | None
    acc_dt: np.dtype | None
    ub_out: int           # coupled chips: UB bytes per output slot
    blocks: list          # per block: [("dx", i) ...] then [("dw", i) ...]


class L0Step(NamedTuple):
    """One Mmad with its operand loads: load_a(L0A slot, L1 slot), load_b(L0B slot, L1 slot)."""
    load_a: Callable
    load_b: Callable
    m: int
    n: int
    k: int
    b_key: tuple | None   # names the B it loads: an L0B slot holding it skips the load


class Stage:
    """One L1 stage: copyin(l1 slot, load_b) and its L0 steps (`L0Step`).
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
        self.l1_bkey = [None] * self.nb       # the B block each L1 slot holds
        self.l0b_key = [None] * self.nb       # the B step each L0B slot holds

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
        load_b = st.bkey is None or self.l1_bkey[s] != st.bkey
        st.copyin(self.l1[s], load_b)
        self.l1_bkey[s] = st.bkey
        SetFlag(HardEvent.MTE2_MTE1, s)

    def _compute(self, st: Stage, i: int):
        s = i % self.nb
        nb = self.nb
        WaitFlag(HardEvent.MTE2_MTE1, s)
        cslot = self.nunit % len(self.l0c)
        for n, step in enumerate(st.steps):
            j = self.nstep % nb
            if self.nstep >= nb:
                WaitFlag(HardEvent.M_MTE1, j)
            step.load_a(self.l0a[j], self.l1[s])
            if step.b_key is None or self.l0b_key[j] != step.b_key:
                step.load_b(self.l0b[j], self.l1[s])
            self.l0b_key[j] = step.b_key
            SetFlag(HardEvent.MTE1_M, j)
            WaitFlag(HardEvent.MTE1_M, j)
            first = st.first and n == 0
            if first and self.nunit >= len(self.l0c):
                WaitFlag(HardEvent.FIX_M if self.job.a2 else HardEvent.V_M, cslot)
            Mmad(self.l0c[cslot], self.l0a[j], self.l0b[j],
                 MmadParams(m=step.m, n=step.n, k=step.k, cmatrixInitVal=first))
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
        s.run(_dw_stages(job, dw_units, gDY, gX, gACC, gA32, c0))


def _zero_stage(m: int, n: int, c0: int, out) -> Stage:
    """A unit no tap reaches: an Mmad of zero fractals writes its (zero) tile."""
    m1, n1 = ceil_div(m, 16), ceil_div(n, 16)

    def copyin(l1, load_b=True):
        InitConstValue(l1, InitConstValueParams(1, (m1 + n1) * 16, 0, 0))

    def la(a2, l1):
        LoadData(a2, l1.ReinterpretCast(a2.dtype), LoadData2DParams(startIndex=0, repeatTimes=m1, srcStride=1))

    def lb(b2, l1):
        LoadData(b2, l1.ReinterpretCast(b2.dtype), LoadData2DParams(startIndex=m1, repeatTimes=n1, srcStride=1))
    return Stage(copyin, [L0Step(la, lb, m, n, c0, None)], True, True, out)


def _depth_plane(pl: int, out_depth: int, src, ax, k: int) -> int | None:
    """The plane of map `src` that depth tap k of output plane pl (image-major, out_depth planes
    per image) reads, or None if it falls in the depth padding; 0 for a folded map (2-D)."""
    if src.fold:
        return 0
    n_img, od = divmod(pl, out_depth)
    jd = od * ax.s - ax.P + k * ax.d
    return n_img * src.D + jd if 0 <= jd < src.D else None


class DxSlab(NamedTuple):
    """One L1 stage of a gradInput unit: c1n gradOutput C1 planes from c1 of one depth tap."""
    kdt: int              # the phase's depth tap
    plane: int            # the gradOutput map plane it reads
    c1: int
    c1n: int


def _dx_out(job: CubeJob, dst, m: int, nw: int):
    """The unit's m x nw tile into the phase grid workspace (NC1HWC0, strided by the phases)."""
    stride = job.geo.nphase * job.geo.dxg.block

    def out(c, ub, phase):
        if phase == "fix":
            Fixpipe(dst, c, FixpipeParamsV220(nSize=nw, mSize=m, srcStride=ceil_div(m, 16) * 16, dstStride=stride),
                    CFG_NZ)
        else:
            _coupled_out(c, ub, phase, m, nw, job.dxg_dt, dst, stride, 0, False, True)
    return out


def _dx_slabs(job: CubeJob, f, pl: int, l1H: int, c0: int) -> list[DxSlab]:
    """The unit's stages: every depth tap that reaches a gradOutput plane, in runs of C1 planes."""
    geo, t = job.geo, job.dx
    C1co = ceil_div(geo.Cout, c0)
    slabs = []
    if l1H:
        for kdt in range(f.ax[0].K):
            plane = _depth_plane(pl, geo.dxg.D, geo.dy, f.ax[0], kdt)
            if plane is None:
                continue
            for c1 in range(0, C1co, t.c1n):
                slabs.append(DxSlab(kdt, plane, c1, min(t.c1n, C1co - c1)))
    return slabs


def _dx_copyin(job: CubeJob, src_a, src_b, c1n: int, l1H: int, blen: int, c0: int, wl: int | None = None):
    """gradOutput rows (the slab; a window of wl columns, DxTiling.window) at the slot's base,
    the W' block after it."""
    my, t, dt = job.geo.dy, job.dx, job.compute_dtype
    isz = dt.itemsize
    boff = align32(t.slab)

    def copyin(l1, load_b):
        if wl is not None:
            _copy_planes(sub_tensor(l1, t.slab, dt), src_a, c1n, l1H, wl, my.Wd, my.block, c0)
        else:
            DataCopy(sub_tensor(l1, t.slab, dt), src_a,
                     DataCopyParams(c1n, l1H * my.Wd * c0 * isz // 32, (my.block - l1H * my.Wd) * c0 * isz // 32, 0))
        if load_b:
            DataCopy(l1[boff].ReinterpretCast(dt), src_b, DataCopyParams(1, blen, 0, 0))
    return copyin


def _dx_steps(job: CubeJob, f, slab: DxSlab, m: int, nw: int, mst: int, window: tuple, c0: int,
              bkey: tuple) -> list[L0Step]:
    """The slab's L0 steps: load3d img2col of gradOutput (A) and load2d of W' (B), kk deep each.
    window: (rows, pad above, pad below, columns, pad left, pad right) of the slab."""
    kk = job.dx.kk
    boff = align32(job.dx.slab)
    l1H, top, bot, l1W, left, right = window
    n1 = ceil_div(nw, 16)
    kst = slab.c1n * f.Khw * c0
    steps = []
    for k0 in range(0, kst, kk):
        kl = min(kk, kst - k0)
        p3 = LoadData3DParamsV2(padList=(left, right, top, bot), l1H=l1H, l1W=l1W, channelSize=slab.c1n * c0,
                                kExtension=kl, mExtension=m, kStartPt=k0, mStartPt=mst,
                                strideW=f.ax[2].s, strideH=f.ax[1].s, filterW=f.ax[2].K,
                                filterH=f.ax[1].K, dilationFilterW=f.ax[2].d, dilationFilterH=f.ax[1].d)
        p2 = LoadData2DParams(startIndex=(k0 // c0) * n1, repeatTimes=ceil_div(kl, c0) * n1, srcStride=1)
        steps.append(L0Step(partial(_load_a3d, p3), partial(_load_b2d, boff, p2), m, nw, kl, bkey + (k0, kl)))
    return steps


def _load_a3d(params, a2, l1):
    LoadData(a2, l1.ReinterpretCast(a2.dtype), params)


def _load_b2d(boff, params, b2, l1):
    LoadData(b2, l1[boff].ReinterpretCast(b2.dtype), params)


def _w_window(f, start: int, n: int, size: int) -> tuple[int, int, int, int]:
    """The W window of a run of n positions from column `start` of a grid row (W windows)."""
    return axis_window(Axis(f.ax[2].s, f.ax[2].d, f.left, f.ax[2].taps, 0), start, n, size)


def _dx_unit_stages(job: CubeJob, unit, gDY, gWP, gDXG, c0: int):
    geo, t, wp = job.geo, job.dx, job.wp
    my, lay = geo.dy, geo.dxg
    g, q, pl, p0, m, j = unit
    f = geo.phases[q]
    n0, nw = t.ntiles[j]
    dst = gDXG[(((g * ceil_div(geo.Cin, 16) + n0 // 16) * geo.nphase + q) * lay.block + pl * lay.plane + p0) * 16]
    out = _dx_out(job, dst, m, nw)
    oh0, oh1 = p0 // lay.Wd, (p0 + m - 1) // lay.Wd
    hlo, l1H, top, bot = axis_window(f.ax[1], oh0, oh1 - oh0 + 1, my.R)
    mst = p0 - oh0 * lay.Wd
    wlo, wl, left, right = 0, my.Wd, f.left, f.right
    if t.window:
        wlo, wl, left, right = _w_window(f, mst, m, my.Wd)
        mst = 0
        if wl == 0:
            l1H = 0
    slabs = _dx_slabs(job, f, pl, l1H, c0)
    if not slabs:
        yield _zero_stage(m, nw, c0, out)
        return
    C1co = ceil_div(geo.Cout, c0)
    for si, slab in enumerate(slabs):
        src_a = gDY[((((g * C1co + slab.c1) * my.NP + slab.plane) * my.R + hlo) * my.Wd + wlo) * c0]
        src_b = gWP[wp.off(g, q, slab.kdt, slab.c1, j, 0)]
        blen = slab.c1n * f.Khw * ceil_div(nw, 16) * 16 * c0 * job.compute_dtype.itemsize // 32
        copyin = _dx_copyin(job, src_a, src_b, slab.c1n, l1H, blen, c0, wl if t.window else None)
        bkey = ("dx", g, q, j, slab.kdt, slab.c1)
        steps = _dx_steps(job, f, slab, m, nw, mst, (l1H, top, bot, wl, left, right), c0, bkey)
        yield Stage(copyin, steps, si == 0, si == len(slabs) - 1, out, bkey)


def _dx_stages(job: CubeJob, unit_ids, gDY, gWP, gDXG, c0: int):
    for ui in unit_ids:
        yield from _dx_unit_stages(job, job.dx.units[ui], gDY, gWP, gDXG, c0)


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
    """The unit's mt x ncol tile into the accumulator (rows `stride` apart; an atomic add into an
    FP32 accumulator, DwTiling.atomic)."""
    atomic = job.dw.atomic

    def out(c, ub, phase):
        if phase == "fix":
            if atomic:
                SetAtomicAdd(np.float32)
            Fixpipe(dst, c, FixpipeParamsV220(nSize=ncol, mSize=mt, srcStride=ceil_div(mt, 16) * 16, dstStride=stride))
            if atomic:
                SetAtomicNone()
        else:
            _coupled_out(c, ub, phase, mt, ncol, job.acc_dt, dst, 0, stride, atomic, False)
    return out


def _dw_maps(job: CubeJob):
    """(left-operand map, right-operand map): gradOutput and input, in the order geo.amap says."""
    geo = job.geo
    return (geo.dy, geo.x) if geo.amap == "dy" else (geo.x, geo.dy)


def _dw_pieces(job: CubeJob, kd: int, pieces) -> list[DwPiece]:
    """The pieces of the unit's K range whose depth tap kd and rows reach the right operand."""
    f = job.geo.dwf
    alay, blay = _dw_maps(job)
    Wg = alay.Wd
    out = []
    for (pl, p0, kl) in pieces:
        plane_b = _depth_plane(pl, alay.D, blay, f.ax[0], kd)
        if plane_b is None:
            continue
        oh0, oh1 = p0 // Wg, (p0 + kl - 1) // Wg
        hlo, l1H, top, bot = axis_window(f.ax[1], oh0, oh1 - oh0 + 1, blay.R)
        if l1H == 0:
            continue
        if job.dw.window:
            col = p0 - oh0 * Wg
            wlo, wl, left, right = _w_window(f, col, kl, blay.Wd)
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
            _copy_planes(a1, src_a, c1nA, 1, pc.kl, Wg, alay.block, c0)
        else:
            DataCopy(a1, src_a, DataCopyParams(c1nA, pc.rowsA * Wg * c0 * isz // 32,
                                               (alay.block - pc.rowsA * Wg) * c0 * isz // 32, 0))
        if job.dw.window:
            _copy_planes(l1[boff].ReinterpretCast(dt), src_b[pc.wlo * c0], c1nB, pc.l1H, pc.wl, Wm, blay.block, c0)
            return
        DataCopy(l1[boff].ReinterpretCast(dt), src_b,
                 DataCopyParams(c1nB, pc.l1H * Wm * c0 * isz // 32, (blay.block - pc.l1H * Wm) * c0 * isz // 32, 0))
    return copyin


def _copy_planes(dst, src, planes: int, rows: int, cols: int, pitch: int, block: int, c0: int):
    """A window of `rows` x `cols` positions from each of `planes` NC1HWC0 planes (rows `pitch`
    positions apart, planes `block` apart) into L1, packed: one strided copy when the strides fit
    DataCopyParams' 16-bit fields, else one a plane (or a row)."""
    isz = dst.dtype.itemsize
    u = c0 * isz // 32                      # 32-B blocks per position
    if rows == 1 and (block - cols) * u <= 65535:
        DataCopy(dst, src, DataCopyParams(planes, cols * u, (block - cols) * u, 0))
        return
    for c in range(planes):
        if (pitch - cols) * u <= 65535:
            DataCopy(dst[c * rows * cols * c0], src[c * block * c0], DataCopyParams(rows, cols * u, (pitch - cols) * u, 0))
            continue
        for r in range(rows):
            DataCopy(dst[(c * rows + r) * cols * c0], src[(c * block + r * pitch) * c0], DataCopyParams(1, cols * u, 0, 0))


def _load_a_nd2nz(q0: int, k1: int, m1: int, c0: int, a2, l1):
    """The NZ left operand's k1 fractal columns from q0, one load2d per column."""
    frac = 512 // a2.dtype.itemsize
    for kb in range(k1):
        LoadData(a2[kb * frac], l1.ReinterpretCast(a2.dtype),
                 LoadData2DParams(startIndex=(q0 // c0 + kb) * m1, repeatTimes=m1, srcStride=1, dstGap=k1 - 1))


def _dw_steps(job: CubeJob, pc: DwPiece, boff: int, mt: int, ncol: int, kstA: int, kstB: int, c1nA: int,
              c1nB: int, c0: int) -> list[L0Step]:
    """The piece's L0 steps, kk positions deep: the left operand by load2d (NZ) or transposing
    load3d, the right operand by load3d img2col."""
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
            la = partial(_load_a3d, pa)
        pb = LoadData3DParamsV2(padList=(left, right, pc.top, pc.bot), l1H=pc.l1H, l1W=b_w, channelSize=c1nB * c0,
                                kExtension=ncol, mExtension=kq, kStartPt=kstB, mStartPt=mst,
                                strideW=f.ax[2].s, strideH=f.ax[1].s, filterW=f.ax[2].K, filterH=f.ax[1].K,
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
    c1aA = m0 // c0
    c1nA = ceil_div(m0 + mt, c0) - c1aA
    kstA = m0 - c1aA * c0
    rowKd = C1b * Khw * c0                  # accumulator elements per (row, depth tap)
    dst = gACC[((g * geo.Mg + m0) * KD + kd) * rowKd + col0]
    out = _dw_out(job, dst, mt, ncol, KD * rowKd)
    specs = _dw_pieces(job, kd, pieces)
    if not specs:
        if not job.dw.atomic:    # (an atomic add of nothing adds nothing)
            yield _zero_stage(mt, ncol, c0, out)
        return
    for si, pc in enumerate(specs):
        a_bytes, src_a = _dw_left_source(job, gA, gA32, g, m0, mt, c1aA, pc, c0)
        src_b = gB[(((g * C1b + c1aB) * blay.NP + pc.plane_b) * blay.R + pc.hlo) * blay.Wd * c0]
        boff = align32(a_bytes)
        copyin = _dw_copyin(job, src_a, src_b, pc, boff, mt, c1nA, c1nB, c0)
        steps = _dw_steps(job, pc, boff, mt, ncol, kstA, kstB, c1nA, c1nB, c0)
        yield Stage(copyin, steps, si == 0, si == len(specs) - 1, out)


def _dw_stages(job: CubeJob, unit_ids, gDY, gX, gACC, gA32, c0: int):
    for ui in unit_ids:
        yield from _dw_unit_stages(job, job.dw.units[ui], gDY, gX, gACC, gA32, c0)
