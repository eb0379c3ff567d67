"""The reduction kernel (ReduceSum / ReduceMean): a contiguous (A, R, B) tensor summed over R into
(A, B), in FP32 whatever the dtype (16-bit data is cast on the way in), scaled (the mean) and
cast to the output's dtype on the way out.

  B == 1, R <= 64 (short rows): up to 255 rows a tile, one DataCopyPad (rows padded to 32 B in
      UB), one Cast, one WholeReduceSum (vcadd: a row a repeat).
  B == 1, rows up to 4096: several rows a tile, each at a pitch of whole 8 x 64 lanes (one
      DataCopyPad, the gaps zeroed once), one Cast, one WholeReduceSum of every 64-lane repeat,
      then one summing each row's partials (a row a repeat: its 32-B aligned start is why the
      pitch is whole 8 repeats; the zeros it adds cost less than an instruction a row, but a row
      of 196 does 2.6x its vector work).
  B == 1, longer rows: each row in chunks added into a 64 x 2^j lane accumulator, folded by
      halving adds to 64 lanes, then one WholeReduceSum.
  B > 1: output columns in tiles; R rows of a column tile come in groups (one strided
      DataCopyPad each) and are added into the tile's accumulator, a row an Add.

Work is split over the vector cores by output rows (B == 1) or (row, column tile) items.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.arith import align_up, ceil_div
from simulator.kernel import (GM_ADDR, Add, Cast, Copy, DataCopyExtParams, DataCopyPad, Duplicate, GetBlockIdx,
                              GlobalTensor, Loop, Muls, RoundMode, TBuf, TPipe, TPosition, TQue, WholeReduceSum)

F32 = np.dtype(np.float32)
LANES = 64            # FP32 lanes of a 256-B repeat
MAX_REPEAT = 255
MEDIUM_ROW = 4096     # rows to this long: each row's 64-lane partials summed by one repeat (mask <= 64)


@dataclass(frozen=True)
class ReduceJob:
    A: int
    R: int
    B: int
    in_dtype: np.dtype
    out_dtype: np.dtype
    scale: float          # 1 for a sum, 1 / count for the last pass of a mean
    items: tuple          # per block: (first item, item count); an item is a row (B == 1) or a (row, column tile)
    rows: int             # B == 1, short rows: rows a tile; long rows: elements a chunk
    cols: int             # B > 1: columns a tile
    group: int            # B > 1: R rows a copy
    part: int = 0         # rows of R a work item sums (0: all; else each item sums one part into an FP32
                          # partial and a second pass adds the parts)
    pitch: int = 0        # B == 1, rows up to MEDIUM_ROW: UB elements a row takes (whole 8 x 64 lanes)


def _store(g: GlobalTensor, at: int, res, job: ReduceJob, n: int, que: TQue) -> None:
    """Scale, cast and write n results from res (FP32) to g[at:]."""
    if job.scale != 1.0:
        Muls(res, res, job.scale, n)
    y = que.AllocTensor(job.out_dtype)
    if job.out_dtype == F32:
        Copy(y, res, n)
    else:
        Cast(y, res, RoundMode.CAST_RINT, n)
    que.EnQue(y)
    y = que.DeQue(job.out_dtype)
    DataCopyPad(g[at], y, DataCopyExtParams(1, n * job.out_dtype.itemsize, 0, 0))
    que.FreeTensor(y)


def _load(g: GlobalTensor, at: int, count: int, length: int, gap: int, que: TQue, wide, job: ReduceJob,
          pitch: int = 0):
    """count rows of `length` elements, `gap` elements apart in GM, into UB rows padded to 32 B
    (or placed `pitch` elements apart); returns the FP32 rows and their padded length in elements."""
    isz = job.in_dtype.itemsize
    padded = pitch or align_up(length * isz, 32) // isz
    raw = que.AllocTensor(job.in_dtype)
    DataCopyPad(raw, g[at], DataCopyExtParams(count, length * isz, gap * isz if count > 1 else 0,
                                              (padded * isz - align_up(length * isz, 32)) // 32))
    que.EnQue(raw)
    raw = que.DeQue(job.in_dtype)
    if job.in_dtype == F32:
        return raw, padded, raw
    Cast(wide, raw, RoundMode.CAST_NONE, count * padded)
    return wide, padded, raw


def _reduce_row_tiles(gin, gout, job: ReduceJob, first: int, count: int, in_que, out_que, wide, res, acc):
    """B == 1, rows a tile: a short row one vcadd repeat; a medium row every 64-lane repeat into
    acc, then its partials one repeat."""
    tiles = ceil_div(count, job.rows)
    for t in Loop(tiles, key=lambda t: t == tiles - 1, period=2):
        k = min(job.rows, count - t * job.rows)
        row0 = first + t * job.rows
        x, padded, raw = _load(gin, row0 * job.R, k, job.R, 0, in_que, wide, job, job.pitch)
        if job.pitch:
            m = job.pitch // LANES
            WholeReduceSum(acc, x, LANES, k * m, 1, 1, 8)
            WholeReduceSum(res, acc, m, k, 1, 1, m * 4 // 32)
        else:
            WholeReduceSum(res, x, job.R, k, 1, 1, padded * 4 // 32)
        in_que.FreeTensor(raw)
        _store(gout, row0, res, job, k, out_que)


def reduce_body(src: GM_ADDR, dst: GM_ADDR, job: ReduceJob):
    first, count = job.items[GetBlockIdx()]
    gin, gout = GlobalTensor(job.in_dtype), GlobalTensor(job.out_dtype)
    gin.SetGlobalBuffer(src)
    gout.SetGlobalBuffer(dst)
    isz = job.in_dtype.itemsize
    pipe = TPipe()
    in_que, out_que = TQue(TPosition.VECIN, 2), TQue(TPosition.VECOUT, 2)
    if job.B == 1 and job.R <= LANES:
        span = job.rows * (align_up(job.R * isz, 32) // isz)
        out_n = job.rows
    elif job.B == 1 and job.pitch:
        span, out_n = job.rows * job.pitch, job.rows
    elif job.B == 1:
        span, out_n = job.rows, MAX_REPEAT
    else:
        span = job.group * (align_up(job.cols * isz, 32) // isz)
        out_n = job.cols
    pipe.InitBuffer(in_que, 2, align_up(span * isz, 32))
    pipe.InitBuffer(out_que, 2, align_up(out_n * job.out_dtype.itemsize, 32))
    calc = TBuf(TPosition.VECCALC)
    acc_n = job.rows if job.B == 1 and job.R > LANES else job.cols
    if job.pitch:
        acc_n = job.rows * (job.pitch // LANES)         # each row's 64-lane partials
    pipe.InitBuffer(calc, (span if isz < 4 else 0) * 4 + align_up(out_n * 4, 32) + (acc_n or 0) * 4 + 32)
    for _ in range(2):          # rows padded to 32 B leave gaps the copies never write: zero them once
        raw = in_que.AllocTensor(job.in_dtype)
        Duplicate(raw, 0.0, span)
        in_que.FreeTensor(raw)
    work = calc.Get(F32)
    wide = work[0] if isz < 4 else None
    res = work[span if isz < 4 else 0]
    acc = work[(span if isz < 4 else 0) + align_up(out_n * 4, 32) // 4]
    if job.B == 1 and (job.R <= LANES or job.pitch):
        _reduce_row_tiles(gin, gout, job, first, count, in_que, out_que, wide, res, acc)
    elif job.B == 1:
        T, part = job.rows, job.part or job.R
        parts = ceil_div(job.R, part)
        for t in Loop(ceil_div(count, MAX_REPEAT), key=lambda t: t == ceil_div(count, MAX_REPEAT) - 1, period=1):
            k = min(MAX_REPEAT, count - t * MAX_REPEAT)
            for j in range(k):
                row, p = divmod(first + t * MAX_REPEAT + j, parts)
                length = min(part, job.R - p * part)
                Duplicate(acc, 0.0, T)
                for c in range(ceil_div(length, T)):
                    n = min(T, length - c * T)
                    x, _, raw = _load(gin, row * job.R + p * part + c * T, 1, n, 0, in_que, wide, job)
                    Add(acc, acc, x, n)
                    in_que.FreeTensor(raw)
                n = T
                while n > LANES:
                    n //= 2
                    Add(acc, acc, acc[n], n)
                WholeReduceSum(res[j], acc, LANES, 1, 1, 1, 8)
            _store(gout, first + t * MAX_REPEAT, res, job, k, out_que)
    else:
        col_tiles = ceil_div(job.B, job.cols)
        part = job.part or job.R
        parts = ceil_div(job.R, part)
        for i in Loop(count, key=lambda i: ((first + i) % col_tiles == col_tiles - 1,
                                           (first + i) // col_tiles % parts == parts - 1), period=1):
            ap, ct = divmod(first + i, col_tiles)
            a, p = divmod(ap, parts)
            c0 = ct * job.cols
            n = min(job.cols, job.B - c0)
            r_begin = p * part
            r_end = min(job.R, r_begin + part)
            Duplicate(acc, 0.0, n)
            for r0 in range(r_begin, r_end, job.group):
                k = min(job.group, r_end - r0)
                x, padded, raw = _load(gin, (a * job.R + r0) * job.B + c0, k, n, job.B - n, in_que, wide, job)
                for r in range(k):
                    Add(acc, acc, x[r * padded], n)
                in_que.FreeTensor(raw)
            _store(gout, ap * job.B + c0, acc, job, n, out_que)
