"""The Ascend C data-copy best practice (asc-devkit examples/01_simd_cpp_api/05_best_practices/
04_memory_access/data_copy), in the simulator's micro-program language.

    python examples/data_copy_kernel.py [--soc Ascend910B2] [--path L1] [--n 12288] [--tile 64 256]
                                        [--order once|whole4|split4|same|offset]

A FLOAT16 matrix m x n in GM, its rows split over the blocks (m / blocks rows each), read tile by
tile (tileM rows x tileN columns) into one on-chip buffer and nothing else:
  L1  on the cube cores: DataCopy with Nd2NzParams (ND -> NZ), as data_copy_l1.h;
  UB  on the vector cores: DataCopyPad, one row of the tile a block, as data_copy_ub.h.
`order` is the sample's scenario: the matrix once; the whole matrix four times over
(RepeatCopy(0, n, 4)); its four column quarters, each four times over before the next (the L2
keeps a quarter); or every block reading the whole matrix with the L2 off (SetL2CacheHint), in the
same order on every block ("same": its blocks of rows at the same time) or rotated by the block's
index ("offset"). The sample's measured Task Durations on a 910B2 are the source
`ascendc_data_copy_a2` in benchmarks/published_figures.yaml.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

import simulator
from simulator.kernel import (GM_ADDR, PIPE_ALL, CacheMode, DataCopy, DataCopyExtParams, DataCopyPad, DataCopyPadExtParams,
                              GetBlockIdx, GlobalTensor, Nd2NzParams, PipeBarrier, TBuf, TPipe, TPosition, half)

ORDERS = ("once", "whole4", "split4", "same", "offset")


@dataclass
class DataCopyTiling:
    m: int
    n: int
    blocks: int
    tileM: int
    tileN: int
    order: str = "once"


def _align(v: int, a: int) -> int:
    return (v + a - 1) // a * a


def _row_runs(t: DataCopyTiling):
    """(first row, rows) of each pass a block makes: its own rows, or (same / offset) every block's
    in turn, from its own index on for offset."""
    rows = t.m // t.blocks
    me = GetBlockIdx()
    if t.order not in ("same", "offset"):
        return [(me * rows, rows)]
    return [(((b + me) % t.blocks if t.order == "offset" else b) * rows, rows) for b in range(t.blocks)]


def _column_runs(t: DataCopyTiling):
    """(first column, columns, times) of each pass over the block's rows, in the scenario's order."""
    if t.order in ("once", "same", "offset"):
        return [(0, t.n, 1)]
    if t.order == "whole4":
        return [(0, t.n, 4)]
    quarter = t.n // 4
    return [(s * quarter, quarter, 4) for s in range(4)]


def data_copy(src: GM_ADDR, t: DataCopyTiling, to_l1: bool = True):
    """The kernel entry: every block reads its m / blocks rows, tile by tile, into one buffer
    (L1 through ND -> NZ when to_l1, else UB)."""
    matrix = GlobalTensor(half)
    matrix.SetGlobalBuffer(src, t.m * t.n)
    pipe = TPipe()
    buf = TBuf(TPosition.A1 if to_l1 else TPosition.VECCALC)
    pipe.InitBuffer(buf, (_align(t.tileM, 16) if to_l1 else t.tileM) * _align(t.tileN, 16) * half.itemsize)
    local = buf.Get(half)
    if t.order in ("same", "offset"):
        matrix.SetL2CacheHint(CacheMode.CACHE_MODE_DISABLE)
    for n0, count, times in _column_runs(t):
        for first_row, rows in [run for _ in range(times) for run in _row_runs(t)]:
            for m in range(first_row, first_row + rows, t.tileM):
                for c in range(0, count, t.tileN):
                    cols = min(t.tileN, count - c)
                    tile = matrix[m * t.n + n0 + c]
                    if to_l1:
                        DataCopy(local, tile, Nd2NzParams(1, t.tileM, cols, 0, t.n, _align(t.tileM, 16), 1, 0))
                    else:
                        row_gap = (t.n - cols) * half.itemsize
                        DataCopyPad(local, tile, DataCopyExtParams(t.tileM, cols * half.itemsize, row_gap, 0, 0),
                                    DataCopyPadExtParams(False, 0, 0, 0))
        if to_l1:             # data_copy_l1.h ends each pass (Process, RepeatCopy) with one
            PipeBarrier(PIPE_ALL)


def data_copy_l1(src: GM_ADDR, t: DataCopyTiling):
    data_copy(src, t, True)


def data_copy_ub(src: GM_ADDR, t: DataCopyTiling):
    data_copy(src, t, False)


def run(soc: str, path: str, t: DataCopyTiling, mode: str = "timing", profile=None):
    """One launch of the sample on `soc` (or `profile`, a what-if of it); the matrix as
    aclrtMemcpy placed it: cold in the L2."""
    if path not in ("L1", "UB") or t.order not in ORDERS:
        raise ValueError(f"path L1 or UB, order one of {ORDERS}")
    if t.m % t.blocks or (t.m // t.blocks) % t.tileM:
        raise ValueError("m must split into whole tiles per block")
    body, kind = (data_copy_l1, "cube") if path == "L1" else (data_copy_ub, "vector")
    return simulator.run_kernel(body, t.blocks, {"src": np.zeros((t.m, t.n), np.float16), "t": t}, kind=kind,
                                soc=soc, mode=mode, profile=profile, trace=False,
                                name=f"kernel_data_copy_{path.lower()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--soc", default="Ascend910B2")
    ap.add_argument("--path", choices=("L1", "UB"), default="L1")
    ap.add_argument("--m", type=int, default=12288)
    ap.add_argument("--n", type=int, default=12288)
    ap.add_argument("--blocks", type=int, help="default: every core of the kind (24 AIC / 48 AIV on A2)")
    ap.add_argument("--tile", type=int, nargs=2, default=(64, 256), metavar=("M", "N"))
    ap.add_argument("--order", choices=ORDERS, default="once")
    args = ap.parse_args()
    from simulator.profile import load_profile
    _, kind = load_profile(args.soc).core_kind_for("cube" if args.path == "L1" else "vector")
    t = DataCopyTiling(args.m, args.n, args.blocks or kind.count, *args.tile, order=args.order)
    print(run(args.soc, args.path, t).report.summary())


if __name__ == "__main__":
    main()
