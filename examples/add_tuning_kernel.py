"""Ascend C's Add performance-tuning sample (asc-devkit examples/01_simd_cpp_api/05_best_practices/
00_vector_compute/add_high_performance, add.asc), in the simulator's micro-program language.

    python examples/add_tuning_kernel.py [--soc Ascend910B1] [--case 4]

z = x + y over an 8192 x 8192 FLOAT16 matrix, its rows split evenly over the blocks, each block's
slice in chunks of `copy_len` elements: DataCopy x and y into UB (MTE2), Add (V), DataCopy z out
(MTE3), with the sample's own flags between the pipes. The cases, as the sample numbers them:

  1  one block, chunks of 4,096, one set of buffers
  2  48 blocks, chunks of 4,096
  3  48 blocks, chunks of 16,384
  4  as 3, double-buffered (ping-pong buffers, two event IDs)
  5  as 4, x and y read past the L2 (SetL2CacheHint(CACHE_MODE_DISABLE))
  6  as 5, chunks of 16,256 whose buffers start 256 B apart (the sample's UB bank-conflict fix;
     UB banks are not modelled, so this case runs as 5 with other chunk sizes)

Case 0 (a scalar loop over every element, 1.24 s on the chip) is left out. The arrays are placed
by aclrtMemcpy, cold in the L2. The sample's measured Task Durations (Atlas A2 training, 48 vector
cores at 1.85 GHz: a 910B1) are the source `ascendc_add_tuning_a2` in
benchmarks/published_figures.yaml.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

import simulator
from simulator.kernel import (GM_ADDR, PIPE_ALL, Add, CacheMode, DataCopy, GetBlockIdx, GlobalTensor, HardEvent,
                              PipeBarrier, SetFlag, TBuf, TPipe, WaitFlag, half)

BUFFER_LEN = 16384            # the sample's MAX_DATA_COPY_LEN on A2: six buffers of it fill the 192 KB UB


@dataclass
class AddCase:
    m: int
    n: int
    blocks: int
    copy_len: int
    double_buffer: bool
    bypass_l2: bool
    staggered: bool = False   # case 6: y's buffers right after x's copy_len elements, not after BUFFER_LEN


CASES = {1: AddCase(8192, 8192, 1, 4096, False, False),
         2: AddCase(8192, 8192, 48, 4096, False, False),
         3: AddCase(8192, 8192, 48, 16384, False, False),
         4: AddCase(8192, 8192, 48, 16384, True, False),
         5: AddCase(8192, 8192, 48, 16384, True, True),
         6: AddCase(8192, 8192, 48, 16256, True, True, staggered=True)}


def _block_rows(c: AddCase) -> tuple[int, int]:
    """(first row, rows) of this block: the remainder rows go one each to the first blocks."""
    me = GetBlockIdx()
    base, rem = divmod(c.m, c.blocks)
    if me < rem:
        return me * (base + 1), base + 1
    return rem * (base + 1) + (me - rem) * base, base


def _buffers(ub, c: AddCase):
    """(x, y, z) UB tensors of each buffer set, at the sample's addresses."""
    L = BUFFER_LEN
    if not c.double_buffer:
        return [(ub[0], ub[L], ub[2 * L])]
    if c.staggered:
        return [(ub[0], ub[c.copy_len], ub[4 * L]), (ub[2 * L], ub[2 * L + c.copy_len], ub[4 * L + c.copy_len])]
    return [(ub[0], ub[L], ub[2 * L]), (ub[3 * L], ub[4 * L], ub[5 * L])]


def add_tuning(x: GM_ADDR, y: GM_ADDR, z: GM_ADDR, c: AddCase):
    first_row, rows = _block_rows(c)
    total = rows * c.n
    xg, yg, zg = GlobalTensor(half), GlobalTensor(half), GlobalTensor(half)
    for g, ptr in ((xg, x), (yg, y), (zg, z)):
        g.SetGlobalBuffer(ptr, c.m * c.n)
    if c.bypass_l2:
        xg.SetL2CacheHint(CacheMode.CACHE_MODE_DISABLE)
        yg.SetL2CacheHint(CacheMode.CACHE_MODE_DISABLE)
    pipe = TPipe()
    buf = TBuf()
    pipe.InitBuffer(buf, 6 * BUFFER_LEN * half.itemsize)
    sets = _buffers(buf.Get(half), c)
    chunks = -(-total // c.copy_len)
    base = first_row * c.n
    if c.double_buffer:       # both buffer sets start free
        for ev in (0, 1):
            SetFlag(HardEvent.V_MTE2, ev)
            SetFlag(HardEvent.MTE3_V, ev)
    for i in range(chunks):
        start = i * c.copy_len
        count = min(c.copy_len, total - start)
        ev = i & 1 if c.double_buffer else 0
        xl, yl, zl = sets[ev]
        if c.double_buffer or i:
            WaitFlag(HardEvent.V_MTE2, ev)
        DataCopy(xl, xg[base + start], count)
        DataCopy(yl, yg[base + start], count)
        SetFlag(HardEvent.MTE2_V, ev)
        WaitFlag(HardEvent.MTE2_V, ev)
        if c.double_buffer or i:
            WaitFlag(HardEvent.MTE3_V, ev)
        Add(zl, xl, yl, count)
        if c.double_buffer or i < chunks - 1:
            SetFlag(HardEvent.V_MTE2, ev)
        SetFlag(HardEvent.V_MTE3, ev)
        WaitFlag(HardEvent.V_MTE3, ev)
        DataCopy(zg[base + start], zl, count)
        if c.double_buffer or i < chunks - 1:
            SetFlag(HardEvent.MTE3_V, ev)
    if c.double_buffer:
        for ev in (0, 1):
            WaitFlag(HardEvent.V_MTE2, ev)
            WaitFlag(HardEvent.MTE3_V, ev)
    PipeBarrier(PIPE_ALL)


def run(soc: str, case: int | AddCase, mode: str = "timing", profile=None, x=None, y=None):
    """One launch of the sample's case (its number, or an AddCase of other sizes) on `soc` (or
    `profile`, a what-if of it); x and y default to zeros. Returns the KernelResult (z in
    .outputs["z"] in functional mode)."""
    if not isinstance(case, AddCase) and case not in CASES:
        raise ValueError(f"case one of {sorted(CASES)}")
    c = case if isinstance(case, AddCase) else CASES[case]
    if c.copy_len > BUFFER_LEN or c.n % 16 or c.copy_len % 16:
        raise ValueError("copy_len up to BUFFER_LEN, and copies of whole 32-byte blocks")
    zeros = np.zeros((c.m, c.n), np.float16)
    arrays = {"x": zeros if x is None else x, "y": zeros if y is None else y, "z": zeros}
    return simulator.run_kernel(add_tuning, c.blocks, {**arrays, "c": c}, kind="vector", soc=soc, mode=mode,
                                profile=profile, trace=False, name="add_custom")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--soc", default="Ascend910B1")
    ap.add_argument("--case", type=int, choices=sorted(CASES), default=4)
    args = ap.parse_args()
    print(run(args.soc, args.case).report.summary())


if __name__ == "__main__":
    main()
