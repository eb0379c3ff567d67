"""CANN's Sigmoid kernel (aclnnSigmoid's one launch, and GLU's: TBE's elementwise
`impl/dynamic/sigmoid.py`, its default high-precision build), for one dtype in and out (a
Sigmoid whose out dtype differs from self's runs this kernel in self's dtype, then a Cast:
operators.py `_plan_sigmoid`, as aclnn_sigmoid.cpp strings them):

    y = 1 / (1 + exp(-x)) in FP32: Cast up (16-bit data), Muls -1, Exp, Adds 1, Div (A2 has
    inf/nan support, so vdiv rather than vrec), Cast down.

TBE's schedule absorbs the broadcast of 1 into the vdiv (CANN 8.1.RC1's
tbe/dsl/unify_schedule/vector/elewise/elewise_schedule.py `_match_scalar_scene`: the ones
compute-inlined, one block of UB reserved for them), so no tile of ones is filled:
here one repeat of ones, filled once, is read again by every repeat of the Div (src0RepStride 0;
TBE reads one 32-B block with a block stride of 0, the same bytes a repeat).

Tiling as TBE's elementwise schedule does it, not as our template does: a block takes
ceil(n / cores) elements rounded up to 128 (so a short vector has fewer blocks than cores), and a
block whose share does not fit one UB tile walks it in double-buffered tiles capped at 16,383
elements. The calibration rows (benchmarks/published_figures.yaml, cb_sigmoid_*) are timed
through this kernel (docs/CALIBRATION.md says where they stand).
[ASSUMPTION: the 910A and 310P builds run the same sequence; only A2's is evidenced.]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.arith import align_up, ceil_div
from simulator.kernel import (BUFFER_NUM, GM_ADDR, Adds, BinaryRepeatParams, Cast, DataCopy, DataCopyExtParams,
                              DataCopyPad, Div, Duplicate, Exp, GetBlockIdx, GlobalTensor, Loop, Muls, RoundMode,
                              TBuf, TPipe, TPosition, TQue, float32)
from ..common import tiling_error, ub_bytes, vector_core_count

F32 = np.dtype(np.float32)
# TBE's elementwise schedule: a block's share is a multiple of 128 elements, and double-buffered
# tiles are capped at 16,383 elements of a 4-byte dtype (elewise tiling, DoUbTiling)
BLOCK_ALIGN = 128
DB_TILE_CAP = 16383
# FP32 nodes of the graph that live in UB at once, the tile size's divisor [ASSUMPTION: TBE's
# coexisting-node count for this graph is not published; 3 is what the 910A's elementwise compile
# info records for a graph of this size]
COEXISTING_FP32 = 3
LANES = 64                  # FP32 elements a 256-B repeat
MAX_REPEATS = 255           # repeatTimes is 8 bits


@dataclass(frozen=True)
class SigmoidJob:
    total: int                # elements in all
    block: int                # elements per block (the last one takes the rest)
    tile: int                 # elements per UB tile
    dtype: np.dtype           # in and out
    compute_dtype: np.dtype = F32

    @property
    def body(self):
        return sigmoid_body


def ub_need(tile: int, block: int, dtype: np.dtype) -> int:
    """UB bytes: the in and out queues (double-buffered when a block has more than one tile),
    the FP32 copy of a 16-bit tile and one repeat of ones."""
    depth = BUFFER_NUM if tile < block else 1
    return 2 * depth * align_up(tile * dtype.itemsize, 32) + (0 if dtype == F32 else align_up(tile * 4, 32)) \
        + LANES * 4


def sigmoid_job(n: int, dtype, profile, forced: dict | None = None) -> tuple[SigmoidJob, int]:
    """(job, blocks): TBE's split (of the forced blockLength, if any), or the forced tileLength
    (whole 128s, at most the block)."""
    dtype, forced = np.dtype(dtype), forced or {}
    ub = ub_bytes(profile)
    block = int(forced.get("blockLength", align_up(ceil_div(n, vector_core_count(profile)), BLOCK_ALIGN)))
    most = ub // COEXISTING_FP32 // 32 * 32 // 4                       # one tile, no double buffer
    most_db = ub // 2 // COEXISTING_FP32 // 32 * 32 // 4
    if block <= min(most, DB_TILE_CAP):
        tile = block
    else:
        limit = min(most_db, DB_TILE_CAP) // BLOCK_ALIGN * BLOCK_ALIGN
        tile = align_up(ceil_div(block, ceil_div(block, limit)), BLOCK_ALIGN) if block > 0 else 0
    tile = int(forced.get("tileLength", tile))
    if block <= 0 or tile <= 0 or tile > block or block % BLOCK_ALIGN or tile % BLOCK_ALIGN \
            or ub_need(tile, block, dtype) > ub:
        raise tiling_error(f"Sigmoid tiling: blockLength {block} and tileLength {tile} must be positive multiples "
                           f"of {BLOCK_ALIGN}, the tile no longer than the block, and the tiles fit UB "
                           f"({ub_need(max(tile, 0), max(block, 1), dtype)} B of {ub} B)")
    return SigmoidJob(n, block, tile, dtype), ceil_div(n, block)


def _copy(dst, src, count: int, itemsize: int) -> None:
    if count * itemsize % 32:
        DataCopyPad(dst, src, DataCopyExtParams(1, count * itemsize, 0, 0))
    else:
        DataCopy(dst, src, count)


def _reciprocal(dst, one, x, n: int) -> None:
    """dst = 1 / x over n FP32 elements, in repeats of LANES that all read the same repeat of ones."""
    full, tail = divmod(n, LANES)
    again = BinaryRepeatParams(src0RepStride=0)
    for r0 in range(0, full, MAX_REPEATS):
        Div(dst[r0 * LANES], one, x[r0 * LANES], LANES, min(MAX_REPEATS, full - r0), again)
    if tail:
        Div(dst[full * LANES], one, x[full * LANES], tail, 1, again)


def sigmoid_body(ins: tuple, out: GM_ADDR, job: SigmoidJob):
    dt = job.dtype
    wide = dt == F32
    first = GetBlockIdx() * job.block
    mine = min(job.block, job.total - first)
    xGm, yGm = GlobalTensor(dt), GlobalTensor(dt)
    xGm.SetGlobalBuffer(ins[0] + first, mine)
    yGm.SetGlobalBuffer(out + first, mine)
    pipe = TPipe()
    depth = BUFFER_NUM if job.tile < job.block else 1
    inQ, outQ = TQue(TPosition.VECIN, depth), TQue(TPosition.VECOUT, depth)
    tile_bytes = align_up(job.tile * dt.itemsize, 32)
    pipe.InitBuffer(inQ, depth, tile_bytes)
    pipe.InitBuffer(outQ, depth, tile_bytes)
    work, ones = TBuf(), TBuf()
    if not wide:
        pipe.InitBuffer(work, align_up(job.tile * 4, 32))
    pipe.InitBuffer(ones, LANES * 4)
    one = ones.Get(float32)
    Duplicate(one, 1.0, LANES)
    tiles = ceil_div(mine, job.tile)
    for i in Loop(tiles, key=lambda i: i == tiles - 1, period=depth):
        start = i * job.tile
        n = min(job.tile, mine - start)
        xin = inQ.AllocTensor(dt)
        _copy(xin, xGm[start], n, dt.itemsize)
        inQ.EnQue(xin)
        xin = inQ.DeQue(dt)
        f = xin if wide else work.Get(float32)
        if not wide:
            Cast(f, xin, RoundMode.CAST_NONE, n)
        Muls(f, f, -1.0, n)
        Exp(f, f, n)
        Adds(f, f, 1.0, n)
        yout = outQ.AllocTensor(dt)
        if wide:
            _reciprocal(yout, one, f, n)
        else:
            _reciprocal(f, one, f, n)
            Cast(yout, f, RoundMode.CAST_RINT, n)
        inQ.FreeTensor(xin)
        outQ.EnQue(yout)
        yout = outQ.DeQue(dt)
        _copy(yGm[start], yout, n, dt.itemsize)
        outQ.FreeTensor(yout)
