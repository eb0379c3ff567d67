"""The Cube launch's pipeline, shared by its two GEMMs: the job (host-side tiling), L1 stages and
their L0 steps, and `Sched`, which runs them double-buffered in L1 and L0A/L0B with explicit flags
and drains each L0C tile by Fixpipe (A2) or through UB (coupled chips); and the stage pieces both
GEMMs use (a zero tile, a depth tap's plane, a window's copy into L1, load3d).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from simulator.kernel import (DataCopy, DataCopyParams, HardEvent, SetAtomicAdd, SetAtomicNone, SetFlag,
                              WaitFlag)
from simulator.kernel.cube import (BlockMode, DataCopyEnhancedParams, DeqScale, InitConstValue,
                                   InitConstValueParams, LoadData, LoadData2DParams, Mmad, MmadParams)
from simulator.arith import ceil_div
from .geometry import F16, Axis, CubeGeometry, axis_window
from .grad_weight_tiling import DwTiling
from .packing import PackWeight
from .tiling import DxTiling


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
    dw_nz_rows: int = 0   # gradWeight's accumulator as FRACTAL_Z_3D (NZ strips of this many rows); 0: row-major


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


def coupled_out(c, ub, phase, m, n, odt, dst, strips_stride, rows_stride, atomic, nz: bool):
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


def zero_stage(m: int, n: int, c0: int, out) -> Stage:
    """A unit no tap reaches: an Mmad of zero fractals writes its (zero) tile."""
    m1, n1 = ceil_div(m, 16), ceil_div(n, 16)

    def copyin(l1, load_b=True):
        InitConstValue(l1, InitConstValueParams(1, (m1 + n1) * 16, 0, 0))

    def la(a2, l1):
        LoadData(a2, l1.ReinterpretCast(a2.dtype), LoadData2DParams(startIndex=0, repeatTimes=m1, srcStride=1))

    def lb(b2, l1):
        LoadData(b2, l1.ReinterpretCast(b2.dtype), LoadData2DParams(startIndex=m1, repeatTimes=n1, srcStride=1))
    return Stage(copyin, [L0Step(la, lb, m, n, c0, None)], True, True, out)


def depth_plane(pl: int, out_depth: int, src, ax, k: int) -> int | None:
    """The plane of map `src` that depth tap k of output plane pl (image-major, out_depth planes
    per image) reads, or None if it falls in the depth padding; 0 for a folded map (2-D)."""
    if src.fold:
        return 0
    n_img, od = divmod(pl, out_depth)
    jd = od * ax.s - ax.P + k * ax.d
    return n_img * src.D + jd if 0 <= jd < src.D else None


def copy_planes(dst, src, planes: int, rows: int, cols: int, pitch: int, block: int, c0: int):
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


def load_a3d(params, a2, l1):
    LoadData(a2, l1.ReinterpretCast(a2.dtype), params)


def w_window(f, start: int, n: int, size: int) -> tuple[int, int, int, int]:
    """The W window of a run of n positions from column `start` of a grid row (W windows)."""
    return axis_window(Axis(f.ax[2].s, f.ax[2].d, f.left, f.ax[2].taps, 0), start, n, size)
