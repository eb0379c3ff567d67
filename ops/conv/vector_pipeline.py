"""Building blocks of the vector passes: one block's UB carved into slots (`VecBlock`), the two
pipelined loop shapes every pass uses (`slot_pass`: double-buffered MTE2 -> V -> MTE3 slots;
`ring_pass`: three regions in a ring, for passes with no separate compute buffer), the axis
permutations the pre- and post-passes share (`perm_plan`, `run_perm`), and small helpers
(docs/KERNELS.md, "Pass helpers").
"""
from __future__ import annotations

import numpy as np

from simulator.kernel import (DataCopy, DataCopyParams, Duplicate, HardEvent, LocalTensor, PipeBarrier,
                              PIPE_ALL, RoundMode, SetFlag, TBuf, TPipe, TPosition, WaitFlag)
from simulator.kernel.vector import Transpose, TransposeParamsExt, TransposeType
from simulator.arith import align_up
from ..common import tiling_error


NCHW2NHWC, NHWC2NCHW = TransposeType.TRANSPOSE_NCHW2NHWC, TransposeType.TRANSPOSE_NHWC2NCHW


def nhwc2nchw(n, h, w, c) -> TransposeParamsExt:
    """(n, h, w, c) -> (n, c, h, w)."""
    return TransposeParamsExt(n, c, h, w, NHWC2NCHW)


def align32(n: int) -> int:
    return align_up(n, 32)


def sub_tensor(t, nbytes: int, dtype):
    """The first nbytes of local tensor t as a tensor of its own (so that a copy planned for
    this region and writing past it is a fault, not a silent overwrite of the next region)."""
    dtype = np.dtype(dtype)
    return LocalTensor(t.buffer, t.offset, dtype, nbytes // dtype.itemsize, t.position)


def zero_lanes(t, nbytes: int):
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
            z, n = zero_lanes(self.raw[self.top], self.zero_bytes)
            Duplicate(z, 0.0, n)
            SetFlag(HardEvent.V_MTE3, 2)
            WaitFlag(HardEvent.V_MTE3, 2)
            self.zero_ready = True
        return self.raw[self.top]

    def begin_pass(self):
        if self.passes:
            PipeBarrier(PIPE_ALL)
        self.passes += 1


def slot_pass(ub: VecBlock, slot: int, items, load, compute, store, prezero=None, slots: int = 2):
    """Per item: (prezero on V), MTE2 load into slot k, V compute, MTE3 store; two slots ping-pong,
    ordered by flags V->MTE2 (slot's input free), MTE2->V, V->MTE3, MTE3->V (slot's output free).
    Callbacks get (slot base offset, item); prezero(base, item) issues V instructions that must
    precede the load, or returns False. `slots=1` is a TIK kernel's single buffer (an input half
    and an output half of UB): the next item's load overlaps only this item's store."""
    ub.begin_pass()
    if slot * slots > ub.top:
        raise tiling_error(f"vector pass needs {slots} x {slot} B of UB; {ub.top} B available")
    bases = tuple(k * slot for k in range(slots))
    for k in range(slots):
        SetFlag(HardEvent.V_MTE2, k)
    pending = [False] * slots
    for i, it in enumerate(items):
        k = i % slots
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
    for k in range(slots):
        WaitFlag(HardEvent.V_MTE2, k)
        if pending[k]:
            WaitFlag(HardEvent.MTE3_V, k)


def ring_pass(ub: VecBlock, region: int, items, load, compute, store, prezero=None):
    """The load -> one-transpose -> store pipeline on a ring of three UB regions: item j loads into
    L_j and writes its result into O_j = L_(j-1) (consumed by the previous item's compute), so
    L_(j+1) is the region whose output item j-1 stored. Flags: MTE2->V (loaded), V->MTE3
    (computed), MTE3->MTE2 (stored: the region may be loaded again), and MTE3->V before a
    prezero. 1.5 regions per item in flight instead of 2 slots x (in, out), 6 flags instead of 8.
    Callbacks get (load region, out region, item)."""
    ub.begin_pass()
    if region * 3 > ub.top:
        raise tiling_error(f"vector pass needs 3 x {region} B of UB; {ub.top} B available")
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


def round_mode(dst_dt, src_dt):
    return RoundMode.CAST_RINT if dst_dt.itemsize < src_dt.itemsize else RoundMode.CAST_NONE


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


def run_perm(ub: VecBlock, steps, src: int, bufs: tuple, dt) -> int:
    """Run perm_plan's transposes from src, writing bufs[0], bufs[1], bufs[0], ... (src must not
    lie in bufs[0]; it may lie in bufs[1], read before that is overwritten); returns where the
    result is."""
    cur = src
    for i, p in enumerate(steps):
        dst = bufs[i % 2]
        Transpose(ub.at(dst, dt), ub.at(cur, dt), None, p)
        cur = dst
    return cur


def perm_result(steps, src: int, bufs: tuple) -> int:
    return bufs[(len(steps) - 1) % 2] if steps else src
