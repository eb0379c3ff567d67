"""The Ascend C "Add" sample, in the simulator's micro-program language.

    python examples/vector_add_kernel.py [--soc Ascend910B1] [--n 65536] [--tile 2048]

z = x + y over FLOAT16, split over the vector cores, each block's slice in tiles that ping-pong
through two UB buffers (BUFFER_NUM = 2): CopyIn (MTE2), Compute (V), CopyOut (MTE3), with the
queues implying the flags between the pipes.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

import simulator
from simulator.kernel import (BUFFER_NUM, GM_ADDR, Add, DataCopy, GetBlockIdx, GlobalTensor, Loop, TPipe,
                              TPosition, TQue, half)


@dataclass
class AddTiling:              # the host-side tiling struct the kernel receives
    blockLength: int          # elements per block
    tileLength: int           # elements per UB tile


class KernelAdd:
    def Init(self, x: GM_ADDR, y: GM_ADDR, z: GM_ADDR, tiling: AddTiling):
        self.tiling = tiling
        offset = tiling.blockLength * GetBlockIdx()
        self.xGm, self.yGm, self.zGm = GlobalTensor(half), GlobalTensor(half), GlobalTensor(half)
        self.xGm.SetGlobalBuffer(x + offset, tiling.blockLength)
        self.yGm.SetGlobalBuffer(y + offset, tiling.blockLength)
        self.zGm.SetGlobalBuffer(z + offset, tiling.blockLength)
        self.pipe = TPipe()
        self.inQueueX = TQue(TPosition.VECIN, BUFFER_NUM)
        self.inQueueY = TQue(TPosition.VECIN, BUFFER_NUM)
        self.outQueueZ = TQue(TPosition.VECOUT, BUFFER_NUM)
        nbytes = tiling.tileLength * half.itemsize
        self.pipe.InitBuffer(self.inQueueX, BUFFER_NUM, nbytes)
        self.pipe.InitBuffer(self.inQueueY, BUFFER_NUM, nbytes)
        self.pipe.InitBuffer(self.outQueueZ, BUFFER_NUM, nbytes)

    def Process(self):
        for i in Loop(self.tiling.blockLength // self.tiling.tileLength, period=BUFFER_NUM):   # (fast mode may skip)
            self.CopyIn(i)
            self.Compute()
            self.CopyOut(i)

    def CopyIn(self, i: int):
        T = self.tiling.tileLength
        x = self.inQueueX.AllocTensor(half)
        y = self.inQueueY.AllocTensor(half)
        DataCopy(x, self.xGm[i * T], T)
        DataCopy(y, self.yGm[i * T], T)
        self.inQueueX.EnQue(x)
        self.inQueueY.EnQue(y)

    def Compute(self):
        x = self.inQueueX.DeQue(half)
        y = self.inQueueY.DeQue(half)
        z = self.outQueueZ.AllocTensor(half)
        Add(z, x, y, self.tiling.tileLength)
        self.outQueueZ.EnQue(z)
        self.inQueueX.FreeTensor(x)
        self.inQueueY.FreeTensor(y)

    def CopyOut(self, i: int):
        z = self.outQueueZ.DeQue(half)
        DataCopy(self.zGm[i * self.tiling.tileLength], z, self.tiling.tileLength)
        self.outQueueZ.FreeTensor(z)


def add_custom(x: GM_ADDR, y: GM_ADDR, z: GM_ADDR, tiling: AddTiling):
    """The kernel entry (`__global__ __aicore__ void add_custom(...)` in Ascend C)."""
    op = KernelAdd()
    op.Init(x, y, z, tiling)
    op.Process()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--soc", default="Ascend910B1")
    ap.add_argument("--n", type=int, default=8 * 2048 * 8)
    ap.add_argument("--tile", type=int, default=2048)
    ap.add_argument("--blocks", type=int, default=8)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.n).astype(np.float16)
    y = rng.standard_normal(args.n).astype(np.float16)
    tiling = AddTiling(args.n // args.blocks, args.tile)
    r = simulator.run_kernel(add_custom, args.blocks, {"x": x, "y": y, "z": np.zeros_like(x), "tiling": tiling},
                             soc=args.soc)
    assert np.array_equal(r["z"], x + y), "z != x + y"
    print(f"z == x + y for {args.n} FLOAT16 elements")
    print(r.report.summary())
    print(f"trace: {r.trace.save('out/add_custom.trace.json')}")


if __name__ == "__main__":
    main()
