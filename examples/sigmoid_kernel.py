"""CANN's Sigmoid as it runs on an Atlas A2 chip (aclnnSigmoid: one TBE elementwise kernel,
`impl/dynamic/sigmoid.py`, its default high-precision build), in FLOAT, FLOAT16 and BF16:

    y = 1 / (1 + exp(-x)), computed in fp32: Cast up (16-bit inputs), Muls -1, Exp, Adds 1,
    Duplicate 1.0, Div (the chip has inf/nan support, so vdiv rather than vrec), Cast down.

Tiling as TBE's elementwise schedule does it: each block takes ceil(n / cores) elements rounded up
to 128 (so fewer blocks than cores for a short vector), and a block whose share does not fit one UB
tile walks it in double-buffered tiles of `tile` elements (UB split over the fp32 nodes that live
at once). Tails are whole: the last block and the last tile take what is left, copied with
DataCopyPad where it is not whole 32-B blocks.

    python examples/sigmoid_kernel.py [--soc Ascend910B2] [--dtype FLOAT16] [--shape 1024,1024]

benchmarks/validation.py times the published Sigmoid rows with it.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import simulator
from simulator.arith import align_up, ceil_div
from simulator.kernel import (BUFFER_NUM, GM_ADDR, Adds, Cast, DataCopy, DataCopyExtParams, DataCopyPad, Div,
                              Duplicate, Exp, GetBlockIdx, GlobalTensor, Muls, RoundMode, TBuf, TPipe,
                              TPosition, TQue, float32)

DTYPES = {"FLOAT": np.dtype(np.float32), "FLOAT16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16)}
# TBE's elementwise schedule: a block's share is a multiple of 128 elements, and double-buffered
# tiles are capped at 16,383 elements of a 4-byte dtype (elewise tiling, DoUbTiling)
BLOCK_ALIGN = 128
DB_TILE_CAP = 16383
# fp32 nodes of the sigmoid that live in UB at once (x in fp32, the ones of the division, the
# result) [ASSUMPTION: TBE's coexisting-node count for this graph is not published; 3 is what the
# 910A's elementwise compile info records for a graph of this size]
COEXISTING_FP32 = 3


@dataclass(frozen=True)
class SigmoidTiling:
    dtype: str                # FLOAT, FLOAT16 or BF16
    n: int                    # elements in all
    block_elems: int          # elements per block (the last one takes the rest)
    tile: int                 # elements per UB tile


def sigmoid_tiling(n: int, dtype: str, vector_cores: int, ub_bytes: int) -> SigmoidTiling:
    per = align_up(ceil_div(n, vector_cores), BLOCK_ALIGN)
    most = ub_bytes // COEXISTING_FP32 // 32 * 32 // 4                 # one tile, no double buffer
    most_db = ub_bytes // 2 // COEXISTING_FP32 // 32 * 32 // 4
    if per <= min(most, DB_TILE_CAP):
        return SigmoidTiling(dtype, n, per, per)
    limit = min(most_db, DB_TILE_CAP) // BLOCK_ALIGN * BLOCK_ALIGN
    tile = align_up(ceil_div(per, ceil_div(per, limit)), BLOCK_ALIGN)
    return SigmoidTiling(dtype, n, per, tile)


def blocks_of(t: SigmoidTiling) -> int:
    return ceil_div(t.n, t.block_elems)


def _copy(dst, src, count: int, itemsize: int) -> None:
    if count * itemsize % 32:
        DataCopyPad(dst, src, DataCopyExtParams(1, count * itemsize, 0, 0))
    else:
        DataCopy(dst, src, count)


def sigmoid_kernel(x: GM_ADDR, y: GM_ADDR, t: SigmoidTiling):
    dt = DTYPES[t.dtype]
    wide = dt == np.float32
    first = GetBlockIdx() * t.block_elems
    mine = min(t.block_elems, t.n - first)
    xGm, yGm = GlobalTensor(dt), GlobalTensor(dt)
    xGm.SetGlobalBuffer(x.cast(dt) + first, mine)
    yGm.SetGlobalBuffer(y.cast(dt) + first, mine)
    pipe = TPipe()
    depth = BUFFER_NUM if t.tile < t.block_elems else 1
    inQ, outQ = TQue(TPosition.VECIN, depth), TQue(TPosition.VECOUT, depth)
    tile_bytes = align_up(t.tile * dt.itemsize, 32)
    pipe.InitBuffer(inQ, depth, tile_bytes)
    pipe.InitBuffer(outQ, depth, tile_bytes)
    work, ones = TBuf(), TBuf()
    pipe.InitBuffer(work, align_up(t.tile * 4, 32))
    pipe.InitBuffer(ones, align_up(t.tile * 4, 32))
    for start in range(0, mine, t.tile):
        n = min(t.tile, mine - start)
        xin = inQ.AllocTensor(dt)
        _copy(xin, xGm[start], n, dt.itemsize)
        inQ.EnQue(xin)
        xin = inQ.DeQue(dt)
        f = xin if wide else work.Get(float32)
        if not wide:
            Cast(f, xin, RoundMode.CAST_NONE, n)
        one = ones.Get(float32)
        Muls(f, f, -1.0, n)
        Exp(f, f, n)
        Adds(f, f, 1.0, n)
        Duplicate(one, 1.0, n)
        yout = outQ.AllocTensor(dt)
        if wide:
            Div(yout, one, f, n)
        else:
            Div(f, one, f, n)
            Cast(yout, f, RoundMode.CAST_RINT, n)
        inQ.FreeTensor(xin)
        outQ.EnQue(yout)
        yout = outQ.DeQue(dt)
        _copy(yGm[start], yout, n, dt.itemsize)
        outQ.FreeTensor(yout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--soc", default="Ascend910B2")
    ap.add_argument("--dtype", default="FLOAT16", choices=sorted(DTYPES))
    ap.add_argument("--shape", default="1024,1024")
    args = ap.parse_args()
    from simulator.profile import load_profile
    p = load_profile(args.soc)
    _, kind = p.core_kind_for("vector")
    n = int(np.prod([int(v) for v in args.shape.split(",")]))
    x = np.random.default_rng(0).uniform(-8, 8, n).astype(DTYPES[args.dtype])
    t = sigmoid_tiling(n, args.dtype, kind.count, kind.buffers["UB"])
    r = simulator.run_kernel(sigmoid_kernel, blocks_of(t), {"x": x, "y": np.zeros_like(x), "t": t},
                             soc=args.soc, warmup=1)
    ref = 1 / (1 + np.exp(-x.astype(np.float64)))
    print(f"max |y - ref| = {np.abs(r['y'].astype(np.float64) - ref).max():.2e}")
    print(r.report.summary())


if __name__ == "__main__":
    main()
