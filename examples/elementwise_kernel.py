"""A one-input elementwise operator over FLOAT (fp32), as torch_npu's Exp, Sigmoid and Muls run it:
y = exp(x), y = 1 / (1 + exp(-x)) or y = x * 2.0 (or y = x, a device-memory copy through UB, as Huawei's
ascend-dmi d2d test makes one), split over every vector core, each block's slice in tiles that
ping-pong through two UB buffers (BUFFER_NUM = 2): CopyIn (MTE2), Compute (V), CopyOut (MTE3).

    python examples/elementwise_kernel.py [--soc Ascend910B2] [--op exp] [--n 1048576]

benchmarks/validation.py uses it for the published torch.exp / torch.nn.Sigmoid / `x * 2.0` / d2d copy
bandwidths.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

import simulator
from simulator.kernel import (BUFFER_NUM, GM_ADDR, Adds, DataCopy, Exp, GetBlockIdx, GlobalTensor, Loop, Muls,
                              Reciprocal, TPipe, TPosition, TQue, float32)

OPS = ("exp", "sigmoid", "muls", "copy")


@dataclass
class ElementwiseTiling:
    op: str                   # one of OPS
    blockLength: int          # elements per block
    tileLength: int           # elements per UB tile


class KernelElementwise:
    def Init(self, x: GM_ADDR, y: GM_ADDR, tiling: ElementwiseTiling):
        self.tiling = tiling
        offset = tiling.blockLength * GetBlockIdx()
        self.xGm, self.yGm = GlobalTensor(float32), GlobalTensor(float32)
        self.xGm.SetGlobalBuffer(x + offset, tiling.blockLength)
        self.yGm.SetGlobalBuffer(y + offset, tiling.blockLength)
        self.pipe = TPipe()
        self.inQueueX = TQue(TPosition.VECIN, BUFFER_NUM)
        self.outQueueY = TQue(TPosition.VECOUT, BUFFER_NUM)
        nbytes = tiling.tileLength * float32.itemsize
        self.pipe.InitBuffer(self.inQueueX, BUFFER_NUM, nbytes)
        self.pipe.InitBuffer(self.outQueueY, BUFFER_NUM, nbytes)

    def Process(self):
        for i in Loop(self.tiling.blockLength // self.tiling.tileLength, period=BUFFER_NUM):
            self.CopyIn(i)
            self.Compute()
            self.CopyOut(i)

    def CopyIn(self, i: int):
        T = self.tiling.tileLength
        x = self.inQueueX.AllocTensor(float32)
        DataCopy(x, self.xGm[i * T], T)
        self.inQueueX.EnQue(x)

    def Compute(self):
        T = self.tiling.tileLength
        x = self.inQueueX.DeQue(float32)
        y = self.outQueueY.AllocTensor(float32)
        if self.tiling.op == "exp":
            Exp(y, x, T)
        elif self.tiling.op == "muls":          # a tensor times a Python scalar
            Muls(y, x, 2.0, T)
        elif self.tiling.op == "copy":          # a device-to-device copy, through UB
            DataCopy(y, x, T)
        else:                                   # 1 / (1 + exp(-x))
            Muls(y, x, -1.0, T)
            Exp(y, y, T)
            Adds(y, y, 1.0, T)
            Reciprocal(y, y, T)
        self.outQueueY.EnQue(y)
        self.inQueueX.FreeTensor(x)

    def CopyOut(self, i: int):
        y = self.outQueueY.DeQue(float32)
        DataCopy(self.yGm[i * self.tiling.tileLength], y, self.tiling.tileLength)
        self.outQueueY.FreeTensor(y)


def elementwise_kernel(x: GM_ADDR, y: GM_ADDR, tiling: ElementwiseTiling):
    """The kernel entry: one call per block."""
    op = KernelElementwise()
    op.Init(x, y, tiling)
    op.Process()


def elementwise_tiling(n: int, blocks: int, op: str = "exp", ub_bytes: int = 196608) -> ElementwiseTiling:
    """Power-of-two tiles as large as four fp32 buffers (two in, two out) allow; n must split
    evenly into blocks x tiles."""
    if op not in OPS:
        raise ValueError(f"op {op!r}: one of {OPS}")
    most = ub_bytes // 4 // float32.itemsize
    tile = 64
    while tile * 2 <= most:
        tile *= 2
    block = n // blocks
    while block % tile:
        tile //= 2
    if tile < 64 or block * blocks != n:
        raise ValueError(f"{n} elements do not split into {blocks} blocks of whole 64-element tiles")
    return ElementwiseTiling(op, block, tile)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--soc", default="Ascend910B2")
    ap.add_argument("--op", default="exp", choices=OPS)
    ap.add_argument("--n", type=int, default=48 * 8192)
    ap.add_argument("--blocks", type=int, default=48)
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal(args.n).astype(np.float32)
    t = elementwise_tiling(args.n, args.blocks, args.op)
    r = simulator.run_kernel(elementwise_kernel, args.blocks, {"x": x, "y": np.zeros_like(x), "tiling": t},
                             soc=args.soc)
    ref = {"exp": np.exp(x), "sigmoid": 1 / (1 + np.exp(-x)), "muls": x * 2.0, "copy": x}[args.op]
    print(f"max |y - ref| / max |ref| = {np.abs(r['y'] - ref).max() / np.abs(ref).max():.2e}")
    print(r.report.summary())


if __name__ == "__main__":
    main()
