"""The Vector unit's throughput as the AIbench paper measured it (Tinkerver/AIBench,
operator_generate/vector_workload_generate.py): 30 blocks, each a loop of 100 iterations that
copies two FP16 operands of `repeats` x 128 elements from GM into UB, multiplies them with one
vec_mul of `repeats` repeats (mask 128, strides 8), and copies the product back to GM.

    python examples/vector_throughput_kernel.py [--soc Ascend910A] [--repeats 255]

The harness's UB tensors are declared outside its loop, so TIK's double buffering
(`thread_num=2`) has nothing to double: each iteration's copies wait for the previous iteration's
multiply and copy-out to release the buffers, as queues of depth 1 do here (BUFFER_NUM 1).
Throughput is the multiplies over the Vector pipe's busy cycles, per core: the loop itself moves
6 bytes per multiply through GM, so over the loop's time it measures the copies, not the unit.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

import simulator
from simulator.kernel import (GM_ADDR, DataCopy, GetBlockIdx, GlobalTensor, Mul, TPipe, TPosition, TQue,
                              half)

ROW = 1024                    # the harness's GM tensors are (rows, 60, 1024) FP16; a block reads
BLOCK_STRIDE = 64 * ROW       # A and B at 64 K and 64 K + 32 K elements into input_a_gm, and writes
B_OFFSET = 32 * ROW           # at 32 K elements into output_r_gm
UB_ELEMENTS = 32 * ROW        # each UB tensor is (32, 1024) FP16


@dataclass
class VectorLoopTiling:
    repeats: int              # vec_mul repeats of 128 FP16 (the harness's `index`), 1..255
    iterations: int           # the harness: 100


class KernelVectorLoop:
    def Init(self, a: GM_ADDR, r: GM_ADDR, tiling: VectorLoopTiling):
        self.tiling = tiling
        self.n = tiling.repeats * 128
        self.aGm, self.rGm = GlobalTensor(half), GlobalTensor(half)
        self.aGm.SetGlobalBuffer(a + BLOCK_STRIDE * GetBlockIdx(), BLOCK_STRIDE)
        self.rGm.SetGlobalBuffer(r, 2 * B_OFFSET)
        self.pipe = TPipe()
        self.qa, self.qb = TQue(TPosition.VECIN, 1), TQue(TPosition.VECIN, 1)
        self.qc = TQue(TPosition.VECOUT, 1)
        for q in (self.qa, self.qb, self.qc):
            self.pipe.InitBuffer(q, 1, UB_ELEMENTS * half.itemsize)

    def Process(self):
        n = self.n
        for _ in range(self.tiling.iterations):
            a = self.qa.AllocTensor(half)
            DataCopy(a, self.aGm[0], n)
            self.qa.EnQue(a)
            b = self.qb.AllocTensor(half)
            DataCopy(b, self.aGm[B_OFFSET], n)
            self.qb.EnQue(b)
            a, b = self.qa.DeQue(half), self.qb.DeQue(half)
            c = self.qc.AllocTensor(half)
            Mul(c, a, b, n)
            self.qc.EnQue(c)
            self.qa.FreeTensor(a)
            self.qb.FreeTensor(b)
            c = self.qc.DeQue(half)
            DataCopy(self.rGm[B_OFFSET], c, n)
            self.qc.FreeTensor(c)


def vector_loop_kernel(a: GM_ADDR, r: GM_ADDR, tiling: VectorLoopTiling):
    """The kernel entry: one call per block."""
    op = KernelVectorLoop()
    op.Init(a, r, tiling)
    op.Process()


def vector_loop_rates(soc: str, repeats: int, blocks: int = 30, iterations: int = 100,
                      mode: str = "timing", profile=None):
    """(multiplies per Vector-busy cycle, multiplies per cycle of the call) per core, and the run."""
    a = np.random.default_rng(0).uniform(-2, 2, blocks * BLOCK_STRIDE).astype(np.float16)
    r = np.zeros(2 * B_OFFSET, np.float16)
    res = simulator.run_kernel(vector_loop_kernel, blocks, {"a": a, "r": r,
                                                            "tiling": VectorLoopTiling(repeats, iterations)},
                               kind="vector", soc=soc, mode=mode, name="vector_loop", trace=False,
                               profile=profile)
    flops = iterations * repeats * 128
    busy = res.report.pipes["PIPE_V"]["busy_cycles"] / res.report.pipes["PIPE_V"]["cores"]
    return flops / busy, flops / res.report.cycles, res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--soc", default="Ascend910A")
    ap.add_argument("--repeats", type=int, default=255)
    args = ap.parse_args()
    on_unit, on_call, res = vector_loop_rates(args.soc, args.repeats)
    from simulator.profile import load_profile
    p = load_profile(args.soc)
    _, kind = p.core_kind_for("vector")
    print(f"{on_unit:.1f} multiplies per Vector-busy cycle per core = "
          f"{on_unit * kind.count * p.clock_mhz / 1e3:.0f} GFLOPS over {kind.count} cores; "
          f"{on_call:.1f} per cycle of the call (bound by {res.report.bound})")


if __name__ == "__main__":
    main()
