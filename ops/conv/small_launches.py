"""gradBias, the small vector launch beside the Cube work: the reduction of gradOutput over N and
the spatial dims.
"""
from __future__ import annotations

import numpy as np

from simulator.kernel import (GM_ADDR, Add, Cast, DataCopyExtParams, DataCopyPad, Duplicate,
                              GetBlockIdx, GlobalTensor, HardEvent, RoundMode, SetFlag, TBuf, TPipe,
                              TPosition, TQue, WaitFlag, float32)
from simulator.kernel.vector import Transpose, TransposeParamsExt, TransposeType
from simulator.program import KernelLaunch
from simulator.arith import align_up
from ..common import split_evenly, tiling_error, ub_bytes, vector_core_count
from .geometry import F32


def _split(items: list, nblocks: int) -> list[list]:
    return [items[first:end] for first, end in split_evenly(len(items), nblocks)]


def _bias_body(src: GM_ADDR, dst: GM_ADDR, N, C, P, npos, chans, src_dt, odt, blocks):
    """Per chunk of chans channels: acc[chans][npos] (fp32) += gradOutput rows over N and position
    chunks; then transpose to [npos][chans] and fold the rows with Adds; cast; store."""
    items = blocks[GetBlockIdx()]
    sGm, dGm = GlobalTensor(src_dt), GlobalTensor(odt)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)
    isz = src_dt.itemsize
    pipe = TPipe()
    in_que = TQue(TPosition.VECIN, 2)
    pipe.InitBuffer(in_que, 2, chans * npos * isz)
    calc = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(calc, 3 * chans * npos * 4 + 32 * chans + 64)
    buf = calc.Get(float32)
    acc, tmp, accT = buf[0], buf[chans * npos], buf[2 * chans * npos]
    outb = calc.Get(np.uint8)[3 * chans * npos * 4].ReinterpretCast(odt)
    ev_pad_zeroed = pipe.AllocEventID(HardEvent.V_MTE2)
    ev_out_ready = pipe.AllocEventID(HardEvent.V_MTE3)
    ev_out_free = pipe.AllocEventID(HardEvent.MTE3_V)
    for ch0, nch in items:
        Duplicate(acc, 0.0, chans * npos)
        for n in range(N):
            for p0 in range(0, P, npos):
                ln = min(npos, P - p0)
                x = in_que.AllocTensor(src_dt)
                if ln < npos or nch < chans:
                    # zero the padding first (V), then load (MTE2)
                    Duplicate(x.ReinterpretCast(np.uint8).ReinterpretCast(np.float32), 0.0, chans * npos * isz // 4)
                    SetFlag(HardEvent.V_MTE2, ev_pad_zeroed)
                    WaitFlag(HardEvent.V_MTE2, ev_pad_zeroed)
                DataCopyPad(x, sGm[(n * C + ch0) * P + p0],
                            DataCopyExtParams(nch, ln * isz, (P - ln) * isz,
                                              (npos * isz - align_up(ln * isz, 32)) // 32))
                in_que.EnQue(x)
                x = in_que.DeQue(src_dt)
                if src_dt != F32:
                    Cast(tmp, x, RoundMode.CAST_NONE, chans * npos)
                    Add(acc, acc, tmp, chans * npos)
                else:
                    Add(acc, acc, x, chans * npos)
                in_que.FreeTensor(x)
        Transpose(accT, acc, None, TransposeParamsExt(1, chans, npos, 1, TransposeType.TRANSPOSE_NCHW2NHWC))
        rows = npos
        while rows > 1:
            h = rows // 2
            Add(accT, accT, accT[(rows - h) * chans], h * chans)
            rows -= h
        if odt != F32:
            Cast(outb, accT, RoundMode.CAST_RINT, chans)
            res = outb
        else:
            res = accT
        SetFlag(HardEvent.V_MTE3, ev_out_ready)
        WaitFlag(HardEvent.V_MTE3, ev_out_ready)
        DataCopyPad(dGm[ch0], res, DataCopyExtParams(1, nch * odt.itemsize, 0, 0))
        SetFlag(HardEvent.MTE3_V, ev_out_free)
        WaitFlag(HardEvent.MTE3_V, ev_out_free)


def bias_launch(src, dst, N, C, P, src_dt, odt, profile) -> KernelLaunch:
    chans = 16
    ub = ub_bytes(profile)
    npos = max(16, min(1024, align_up(P, 16)))
    # halve while it does not fit, staying a multiple of 16 (aligning after the loop could undo the fit)
    while npos > 16 and 2 * chans * npos * src_dt.itemsize + 3 * chans * npos * 4 + 1024 > ub:
        npos = max(16, npos // 2 // 16 * 16)
    if 2 * chans * npos * src_dt.itemsize + 3 * chans * npos * 4 + 1024 > ub:
        raise tiling_error(f"gradBias: {chans} channels x {npos} positions need "
                           f"{2 * chans * npos * src_dt.itemsize + 3 * chans * npos * 4 + 1024} B of UB; UB holds {ub} B")
    items = [(c, min(chans, C - c)) for c in range(0, C, chans)]
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch("GradBias(reduce N, spatial)", _bias_body, len(blocks), "vector",
                        (src, dst, N, C, P, npos, chans, src_dt, odt, blocks))
