"""The layout launches around the main kernel: NCHW <-> NHWC transposes through UB (with the zero
pad pixels the corner runs may touch). The zero fills are ops/common.py's.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from simulator.kernel import (GM_ADDR, Cast, DataCopyExtParams, DataCopyPad, Duplicate, GetBlockIdx, Loop,
                              GlobalTensor, PipeBarrier, PIPE_ALL, RoundMode, TBuf, TPipe, TPosition, TQue,
                              Transpose, TransposeParamsExt, TransposeType)
from simulator.arith import align_up, ceil_div
from ..common import split_evenly, ub_bytes, vector_core_count
from .tiling import MAX_BLOCK_COUNT, UB_RESERVE


@dataclass
class LayoutTiling:
    """The NCHW <-> NHWC transposes and the zero fill."""
    N: int
    C: int
    HW: int
    src: np.dtype           # dtype read
    dst: np.dtype           # dtype written
    T: int                  # pixels per tile
    Cc: int                 # channels per chunk
    Ccp: int                # Cc padded to 32 bytes (in the wider dtype)
    pad: int                # zero pixels before / after the NHWC buffer
    tiles_per_n: int
    blocks: tuple


def plan_layout(N, C, HW, src, dst, pad, profile) -> LayoutTiling:
    esz = max(src.itemsize, dst.itemsize)
    cblk = 32 // min(src.itemsize, dst.itemsize)       # pad channels so both dtypes' rows are 32 B
    ub = ub_bytes(profile) - UB_RESERVE
    Cc = C
    while True:
        Ccp = align_up(Cc, cblk)
        for T in (512, 256, 128, 64, 32, 16):
            if T > align_up(HW, 16) and T > 16:
                continue
            need = 2 * Ccp * T * src.itemsize + 2 * T * Ccp * dst.itemsize + 2 * Ccp * T * esz + 4096
            if need <= ub and Cc <= MAX_BLOCK_COUNT:
                break
        else:
            T = 0
        if T >= min(64, align_up(HW, 16)) or Cc <= cblk:
            break
        Cc = align_up(ceil_div(Cc, 2), cblk)
    tiles_per_n = ceil_div(HW, T)
    blocks = split_evenly(N * tiles_per_n, vector_core_count(profile))
    return LayoutTiling(N, C, HW, src, dst, T, Cc, Ccp, pad, tiles_per_n, blocks)


def transpose_2d(dst, src, rows: int, cols: int) -> None:
    """dst [cols][rows] = src [rows][cols]^T: Ascend C's Transpose NCHW -> NHWC with N = H = 1."""
    Transpose(dst, src, None, TransposeParamsExt(1, rows, 1, cols, TransposeType.TRANSPOSE_NCHW2NHWC))


def _pad_write(gm: GlobalTensor, zeros, nbytes: int, isz: int, room: int) -> None:
    """Write nbytes of zeros from UB `zeros` (room bytes) to gm, in pieces."""
    done = 0
    while done < nbytes:
        n = min(room, nbytes - done)
        DataCopyPad(gm[done // isz], zeros, DataCopyExtParams(1, n, 0, 0))
        done += n


def _transpose_queues(src: GM_ADDR, dst: GM_ADDR, t: LayoutTiling, calc_dtype):
    """Both layout kernels' buffers: double-buffered in/out queues of one Ccp x T tile and a
    cast buffer. The input slots start zeroed, because the transpose reads the rows past a
    tile's tail (channels past C, pixels past HW)."""
    T, Ccp = t.T, t.Ccp
    pipe = TPipe()
    inQ, outQ = TQue(TPosition.VECIN, 2), TQue(TPosition.VECOUT, 2)
    pipe.InitBuffer(inQ, 2, Ccp * T * t.src.itemsize)
    pipe.InitBuffer(outQ, 2, Ccp * T * t.dst.itemsize)
    calc = TBuf()
    pipe.InitBuffer(calc, Ccp * T * np.dtype(calc_dtype).itemsize)
    srcGm, dstGm = GlobalTensor(t.src), GlobalTensor(t.dst)
    srcGm.SetGlobalBuffer(src)
    dstGm.SetGlobalBuffer(dst)
    for _ in range(2):
        z = inQ.AllocTensor(t.src)
        Duplicate(z, 0, Ccp * T)
        inQ.FreeTensor(z)
    PipeBarrier(PIPE_ALL)
    return inQ, outQ, calc, srcGm, dstGm


def _tile_points(t: LayoutTiling, tile: int) -> int:
    """A tile's pixel count: tiles with as many pixels cost the same (fast mode's Loop key)."""
    return min(t.T, t.HW - tile % t.tiles_per_n * t.T)


def nchw_to_nhwc_kernel(src: GM_ADDR, dst: GM_ADDR, t: LayoutTiling):
    """TransposeToNHWC: per tile of T pixels and Cc channels, MTE2 brings the channel rows
    (strided DataCopyPad), the vector pipe casts to the compute dtype and transposes, MTE3 writes
    pixel rows of the padded NHWC buffer. Block 0 also zeroes the pad pixels."""
    T, Cc, Ccp, C, HW = t.T, t.Cc, t.Ccp, t.C, t.HW
    isz, osz = t.src.itemsize, t.dst.itemsize
    inQ, outQ, calc, srcGm, dstGm = _transpose_queues(src, dst, t, calc_dtype=t.dst)
    first, end = t.blocks[GetBlockIdx()]
    if GetBlockIdx() == 0 and t.pad:
        z = outQ.AllocTensor(t.dst)
        Duplicate(z, 0, T * Ccp)
        outQ.EnQue(z)
        z = outQ.DeQue(t.dst)
        nb = t.pad * C * osz
        _pad_write(dstGm, z, nb, osz, T * Ccp * osz)
        _pad_write(dstGm[(t.pad + t.N * HW) * C], z, nb, osz, T * Ccp * osz)
        outQ.FreeTensor(z)
    for tile in Loop(range(first, end), key=partial(_tile_points, t), period=2):
        n, j = divmod(tile, t.tiles_per_n)
        p0 = j * T
        cnt = min(T, HW - p0)
        for c0 in range(0, C, Cc):
            cc = min(Cc, C - c0)
            a = inQ.AllocTensor(t.src)
            row = align_up(cnt * isz, 32)
            DataCopyPad(a, srcGm[(n * C + c0) * HW + p0],
                        DataCopyExtParams(cc, cnt * isz, (HW - cnt) * isz, (T * isz - row) // 32))
            inQ.EnQue(a)
            a = inQ.DeQue(t.src)
            b = outQ.AllocTensor(t.dst)
            if isz != osz:
                f = calc.Get(t.dst)
                Cast(f, a, RoundMode.CAST_NONE, Ccp * T)
                transpose_2d(b, f, Ccp, T)
            else:
                transpose_2d(b, a, Ccp, T)
            inQ.FreeTensor(a)
            outQ.EnQue(b)
            b = outQ.DeQue(t.dst)
            DataCopyPad(dstGm[(t.pad + n * HW + p0) * C + c0], b,
                        DataCopyExtParams(cnt, cc * osz, (Ccp * osz - align_up(cc * osz, 32)) // 32,
                                          (C - cc) * osz))
            outQ.FreeTensor(b)


def nhwc_to_nchw_kernel(src: GM_ADDR, dst: GM_ADDR, t: LayoutTiling):
    """TransposeCast(inputGrad): the NHWC accumulator back to NCHW, cast to the output dtype."""
    T, Cc, Ccp, C, HW = t.T, t.Cc, t.Ccp, t.C, t.HW
    isz, osz = t.src.itemsize, t.dst.itemsize
    inQ, outQ, calc, srcGm, dstGm = _transpose_queues(src, dst, t, calc_dtype=t.src)
    first, end = t.blocks[GetBlockIdx()]
    for tile in Loop(range(first, end), key=partial(_tile_points, t), period=2):
        n, j = divmod(tile, t.tiles_per_n)
        p0 = j * T
        cnt = min(T, HW - p0)
        for c0 in range(0, C, Cc):
            cc = min(Cc, C - c0)
            a = inQ.AllocTensor(t.src)
            DataCopyPad(a, srcGm[(t.pad + n * HW + p0) * C + c0],
                        DataCopyExtParams(cnt, cc * isz, (C - cc) * isz, (Ccp * isz - align_up(cc * isz, 32)) // 32))
            inQ.EnQue(a)
            a = inQ.DeQue(t.src)
            b = outQ.AllocTensor(t.dst)
            if isz != osz:
                f = calc.Get(t.src)
                transpose_2d(f, a, T, Ccp)
                Cast(b, f, RoundMode.CAST_RINT, Ccp * T)
            else:
                transpose_2d(b, a, T, Ccp)
            inQ.FreeTensor(a)
            outQ.EnQue(b)
            b = outQ.DeQue(t.dst)
            row = align_up(cnt * osz, 32)
            DataCopyPad(dstGm[(n * C + c0) * HW + p0], b,
                        DataCopyExtParams(cc, cnt * osz, (T * osz - row) // 32, (HW - cnt) * osz))
            outQ.FreeTensor(b)
