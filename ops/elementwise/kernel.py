"""The elementwise family's template kernel (Sigmoid of one dtype has CANN's own: sigmoid.py): the flat output split over the vector cores in
blocks, each block in UB tiles through double-buffered queues (CopyIn, Compute, CopyOut), the
inputs cast to the compute dtype on the way in and the result cast to the output's on the way out.
An operator is its compute: a few instructions over FP32 or native tiles (COMPUTES).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from simulator.arith import align_up, ceil_div
from simulator.kernel import (BUFFER_NUM, CMPMODE, GM_ADDR, SELMODE, Add, Adds, Broadcast, Cast, CompareScalar, DataCopy,
                              DataCopyExtParams, DataCopyPad, Exp, GetBlockIdx, GlobalTensor, Loop, Mul, Muls,
                              Reciprocal, Relu, RoundMode, Select, Sub, TBuf, TPipe, TPosition, TQue)


@dataclass(frozen=True)
class ElementwiseJob:
    total: int                # output elements
    block: int                # elements a block (the last may be shorter)
    tile: int                 # elements a UB tile
    in_dtypes: tuple          # each input's dtype as it is in GM
    out_dtype: np.dtype
    compute_dtype: np.dtype   # what the arithmetic runs in
    compute: str              # a key of COMPUTES
    scalar: float = 0.0       # alpha, threshold
    row: int = 0              # the broadcast inputs' row: each of their values covers `row` outputs
    broadcast: tuple = ()     # the inputs given compact (one value a row) and broadcast in UB
    period_values: int = 0    # their values when they repeat along the output ((C, 1, 1) against (N, C, H, W): C)
    wrap: bool = False        # an 8-bit integer result taken modulo 256 before its cast (wrap_8bit)

    @property
    def body(self):
        return elementwise_body

    @property
    def resident(self) -> bool:
        """Tiles of whole periods: every tile sees the same broadcast values, expanded once a core."""
        return bool(self.period_values) and self.tile % self.period_len == 0

    @property
    def period_len(self) -> int:
        """Outputs after which the broadcast values repeat (0: they do not)."""
        return self.period_values * self.row


def _add(dst, srcs, tmp, n, scalar):
    a, b = srcs
    if scalar != 1.0:
        Muls(tmp, b, scalar, n)
        b = tmp
    Add(dst, a, b, n)


def _sub(dst, srcs, tmp, n, scalar):
    Sub(dst, srcs[0], srcs[1], n)


def _mul(dst, srcs, tmp, n, scalar):
    Mul(dst, srcs[0], srcs[1], n)


def _muls(dst, srcs, tmp, n, scalar):
    Muls(dst, srcs[0], scalar, n)


def _relu(dst, srcs, tmp, n, scalar):
    Relu(dst, srcs[0], n)


def _threshold_backward(dst, srcs, tmp, n, scalar):
    """gradInput = gradOutput where self > threshold, else 0."""
    dy, x = srcs
    mask = tmp.ReinterpretCast(np.uint8)
    CompareScalar(mask, x, scalar, CMPMODE.GT, n)
    Select(dst, mask, dy, 0.0, SELMODE.VSEL_TENSOR_SCALAR_MODE, n)


def _sigmoid(dst, srcs, tmp, n, scalar):
    """1 / (1 + e^-x)."""
    Muls(tmp, srcs[0], -1.0, n)
    Exp(tmp, tmp, n)
    Adds(tmp, tmp, 1.0, n)
    Reciprocal(dst, tmp, n)


def _silu(dst, srcs, tmp, n, scalar):
    """x * sigmoid(x)."""
    _sigmoid(tmp, srcs, tmp, n, scalar)
    Mul(dst, srcs[0], tmp, n)


# compute -> (instructions over tiles, needs a temporary tile, computes in FP32 whatever the dtype:
# CANN's TBE Sigmoid and SiLU cast 16-bit data to FP32 on the way in)
COMPUTES: dict[str, tuple[Callable, bool, bool]] = {
    "add": (_add, True, False), "sub": (_sub, False, False), "mul": (_mul, False, False), "muls": (_muls, False, False),
    "relu": (_relu, False, False),
    "threshold_backward": (_threshold_backward, True, False),
    "sigmoid": (_sigmoid, True, True), "silu": (_silu, True, True),
    "cast": (None, False, False),          # one Cast from the input's dtype to the output's (elementwise_body)
}


def wrap_8bit(x, frac, floor, n: int, signed: bool) -> None:
    """x (integer values in FP16 or FP32) to the 8-bit integer range by modulo 256, two's
    complement for INT8, as TBE's add and mul do before their cast back (util_common's
    uint8_int8_overflow_proc: x + 128 for INT8, x - floor(x / 256) x 256, - 128). Every step is
    exact at these magnitudes. frac: a tile of x's dtype; floor: an INT32 tile."""
    if signed:
        Adds(x, x, 128.0, n)
    Muls(frac, x, 1.0 / 256, n)
    Cast(floor, frac, RoundMode.CAST_FLOOR, n)
    Cast(frac, floor, RoundMode.CAST_NONE, n)
    Muls(frac, frac, 256.0, n)
    Sub(x, x, frac, n)
    if signed:
        Adds(x, x, -128.0, n)


def ub_per_element(job_in: tuple, out_dtype, compute_dtype, wrap: bool = False) -> int:
    """UB bytes per tile element: the input queue (every input), the output queue, the compute
    tiles (a cast of each input that needs one, the result, a temporary; for a wrap, a tile of
    the compute dtype and one of INT32)."""
    cdt = np.dtype(compute_dtype)
    casts = sum(1 for d in job_in if np.dtype(d) != cdt)
    return (BUFFER_NUM * sum(np.dtype(d).itemsize for d in job_in) + BUFFER_NUM * np.dtype(out_dtype).itemsize
            + (casts + 2 + wrap) * cdt.itemsize + 4 * wrap)


def _copy(dst, src, n: int, isz: int) -> None:
    if (n * isz) % 32 == 0:
        DataCopy(dst, src, n)
    else:
        DataCopyPad(dst, src, DataCopyExtParams(1, n * isz, 0, 0))


class UbLayout(NamedTuple):
    offsets: list             # each input's tile in the input slot (None: a resident operand)
    stage: dict               # a broadcast input's compact values in the input slot, loaded a tile at a time
    slot: int                 # input slot bytes
    stride: int               # compute tile stride, elements
    total: int                # UB bytes in all
    home: dict                # a resident operand: (its compact values, one period, a tile) byte offsets
    held: int                 # bytes of the resident operands' period and tile


def ub_layout(job: ElementwiseJob) -> UbLayout:
    """Where each input's tile, each broadcast input's compact values and the compute tiles sit
    (32-B aligned)."""
    T, cdt = job.tile, np.dtype(job.compute_dtype)
    offsets, stage, home, at, compact, held = [], {}, {}, 0, 0, 0
    for k, dt in enumerate(job.in_dtypes):
        resident = job.resident and k in job.broadcast
        offsets.append(None if resident else at)
        at += 0 if resident else align_up(T * np.dtype(dt).itemsize, 32)
    for k in job.broadcast:
        isz = np.dtype(job.in_dtypes[k]).itemsize
        if not job.resident and job.row == 1:         # one value an output: read as a plain tile
            continue
        if not job.resident:
            stage[k] = at
            at = align_up(at + max(1, T // job.row) * isz, 32)
            continue
        per = full = None               # one period (values repeated along their rows), then a whole tile
        if job.row > 1:
            per, held = held, held + align_up(job.period_len * isz, 32)
        full = per
        if T > job.period_len:
            full, held = held, held + align_up(T * isz, 32)
        home[k] = (compact, per, full)
        compact += align_up(job.period_values * isz, 32)
    stride = align_up(T * cdt.itemsize, 32) // cdt.itemsize
    casts = sum(1 for d in job.in_dtypes if np.dtype(d) != cdt)
    total = (BUFFER_NUM * at + BUFFER_NUM * align_up(T * job.out_dtype.itemsize, 32)
             + (casts + 2 + job.wrap) * stride * cdt.itemsize + job.wrap * align_up(T * 4, 32) + compact + held)
    return UbLayout(offsets, stage, at, stride, total, home, held)


def _expand_resident(gin: list, job: ElementwiseJob, layout: UbLayout, pipe: TPipe) -> tuple:
    """Each resident operand's tile: its compact values loaded once, repeated along a row, then
    along whole periods, as the tiles all start a period in."""
    compact_que = TQue(TPosition.VECIN, 1)
    pipe.InitBuffer(compact_que, 1, sum(align_up(job.period_values * np.dtype(job.in_dtypes[k]).itemsize, 32)
                                        for k in layout.home))
    held = TBuf(TPosition.VECCALC)
    if layout.held:
        pipe.InitBuffer(held, layout.held)
    raw = compact_que.AllocTensor(np.uint8)
    for k, (c, _, _) in layout.home.items():
        _copy(raw[c].ReinterpretCast(job.in_dtypes[k]), gin[k][0], job.period_values,
              np.dtype(job.in_dtypes[k]).itemsize)
    compact_que.EnQue(raw)
    raw = compact_que.DeQue(np.uint8)
    room, period, tiles = held.Get(np.uint8) if layout.held else None, job.period_len, {}
    for k, (c, per, full) in layout.home.items():
        dt = job.in_dtypes[k]
        src = raw[c].ReinterpretCast(dt)
        if per is not None:
            Broadcast(room[per].ReinterpretCast(dt), src, (job.period_values, job.row), (job.period_values, 1))
            src = room[per].ReinterpretCast(dt)
        if job.tile > period:
            Broadcast(room[full].ReinterpretCast(dt), src, (job.tile // period, period), (1, period))
            src = room[full].ReinterpretCast(dt)
        tiles[k] = src
    return tiles, compact_que, raw


def _tile_key(job: ElementwiseJob, start: int, tiles: int, resident: dict):
    """What makes a block's tiles alike: the last is shorter; a broadcast input's compact copy
    costs by its address's 32-B phase; where the values repeat a tile at a time, the reads go
    back to their start every period, so a tile's place in the period."""
    T, B = job.tile, max(job.row, 1)
    phase = [np.dtype(job.in_dtypes[k]).itemsize for k in job.broadcast if k not in resident]
    values = job.period_values or ceil_div(job.total, B)
    repeats = bool(job.period_values) and not resident

    def key(i):
        first = start + i * T
        return ((i == tiles - 1,) + tuple(first // B % values * isz % 32 for isz in phase)
                + ((first % job.period_len // T,) if repeats else ()))
    return key


def elementwise_body(ins: tuple, out: GM_ADDR, job: ElementwiseJob):
    start = job.block * GetBlockIdx()
    length = min(job.block, job.total - start)
    B = job.row
    gin = []
    for k, (a, dt) in enumerate(zip(ins, job.in_dtypes)):
        g = GlobalTensor(dt)
        if k in job.broadcast:              # tiles never straddle a row (nor a period); a block may start inside one
            g.SetGlobalBuffer(a, job.period_values or ceil_div(job.total, B))
        else:
            g.SetGlobalBuffer(a + start, length)
        gin.append(g)
    gout = GlobalTensor(job.out_dtype)
    gout.SetGlobalBuffer(out + start, length)
    T, cdt = job.tile, job.compute_dtype
    layout = ub_layout(job)
    offsets, stage, stride = layout.offsets, layout.stage, layout.stride
    pipe = TPipe()
    in_que, out_que = TQue(TPosition.VECIN, BUFFER_NUM), TQue(TPosition.VECOUT, BUFFER_NUM)
    pipe.InitBuffer(in_que, BUFFER_NUM, layout.slot)
    pipe.InitBuffer(out_que, BUFFER_NUM, T * job.out_dtype.itemsize)
    casts = [i for i, d in enumerate(job.in_dtypes) if np.dtype(d) != cdt]
    calc = TBuf(TPosition.VECCALC)
    tiles_bytes = (len(casts) + 2 + job.wrap) * stride * cdt.itemsize
    pipe.InitBuffer(calc, tiles_bytes + job.wrap * align_up(T * 4, 32))
    work = calc.Get(cdt)
    cast_of = {i: work[k * stride] for k, i in enumerate(casts)}
    result, tmp = work[len(casts) * stride], work[(len(casts) + 1) * stride]
    if job.wrap:
        frac, floor = work[(len(casts) + 2) * stride], calc.Get(np.uint8)[tiles_bytes].ReinterpretCast(np.int32)
    fn = COMPUTES[job.compute][0]
    tiles = ceil_div(length, T)
    resident, compact_que, compact = _expand_resident(gin, job, layout, pipe) if layout.home else ({}, None, None)
    values = job.period_values or ceil_div(job.total, max(B, 1))
    for i in Loop(tiles, key=_tile_key(job, start, tiles, resident), period=BUFFER_NUM):
        n = min(T, length - i * T)
        raw = in_que.AllocTensor(np.uint8)
        for k, (g, dt) in enumerate(zip(gin, job.in_dtypes)):
            if k in resident:
                continue
            if k in stage:
                _copy(raw[stage[k]].ReinterpretCast(dt), g[(start + i * T) // B % values], max(1, n // B),
                      np.dtype(dt).itemsize)
            elif k in job.broadcast:
                _copy(raw[offsets[k]].ReinterpretCast(dt), g[(start + i * T) % values], n, np.dtype(dt).itemsize)
            else:
                _copy(raw[offsets[k]].ReinterpretCast(dt), g[i * T], n, np.dtype(dt).itemsize)
        in_que.EnQue(raw)
        raw = in_que.DeQue(np.uint8)
        for k in stage:                     # whole rows, or a part of one row
            rows, cols = (n // B, B) if n >= B else (1, n)
            Broadcast(raw[offsets[k]].ReinterpretCast(job.in_dtypes[k]),
                      raw[stage[k]].ReinterpretCast(job.in_dtypes[k]), (rows, cols), (rows, 1))
        srcs = []
        for k, dt in enumerate(job.in_dtypes):
            src = resident[k] if k in resident else raw[offsets[k]].ReinterpretCast(dt)
            if k in cast_of:
                Cast(cast_of[k], src, RoundMode.CAST_NONE, n)
                src = cast_of[k]
            srcs.append(src)
        y = out_que.AllocTensor(job.out_dtype)
        if fn is None:
            widening = job.out_dtype.itemsize > cdt.itemsize
            Cast(y, srcs[0], RoundMode.CAST_NONE if widening else RoundMode.CAST_RINT, n)
        elif job.out_dtype == cdt:
            fn(y, srcs, tmp, n, job.scalar)
        else:
            fn(result, srcs, tmp, n, job.scalar)
            if job.wrap:
                wrap_8bit(result, frac, floor, n, job.out_dtype == np.int8)
            Cast(y, result, RoundMode.CAST_RINT, n)
        in_que.FreeTensor(raw)
        out_que.EnQue(y)
        y = out_que.DeQue(job.out_dtype)
        _copy(gout[i * T], y, n, job.out_dtype.itemsize)
        out_que.FreeTensor(y)
    if compact_que is not None:
        compact_que.FreeTensor(compact)
