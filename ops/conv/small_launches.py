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


def _bias_body(src: GM_ADDR, dst: GM_ADDR, N, C, P, LP, cc, sdt, odt, blocks):
    """Per chunk of cc channels: acc[cc][LP] (fp32) += gradOutput rows over N and position
    chunks; then transpose to [LP][cc] and fold the rows with Adds; cast; store."""
    items = blocks[GetBlockIdx()]
    sGm, dGm = GlobalTensor(sdt), GlobalTensor(odt)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)
    isz = sdt.itemsize
    pipe = TPipe()
    inQ = TQue(TPosition.VECIN, 2)
    pipe.InitBuffer(inQ, 2, cc * LP * isz)
    calc = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(calc, 3 * cc * LP * 4 + 32 * cc + 64)
    buf = calc.Get(float32)
    acc, tmp, tr = buf[0], buf[cc * LP], buf[2 * cc * LP]
    outb = calc.Get(np.uint8)[3 * cc * LP * 4].ReinterpretCast(odt)
    ev_z = pipe.AllocEventID(HardEvent.V_MTE2)
    ev_o = pipe.AllocEventID(HardEvent.V_MTE3)
    ev_b = pipe.AllocEventID(HardEvent.MTE3_V)
    for c0_, cn in items:
        Duplicate(acc, 0.0, cc * LP)
        for n in range(N):
            for p0 in range(0, P, LP):
                ln = min(LP, P - p0)
                x = inQ.AllocTensor(sdt)
                if ln < LP or cn < cc:
                    # zero the padding first (V), then load (MTE2)
                    Duplicate(x.ReinterpretCast(np.uint8).ReinterpretCast(np.float32), 0.0, cc * LP * isz // 4)
                    SetFlag(HardEvent.V_MTE2, ev_z)
                    WaitFlag(HardEvent.V_MTE2, ev_z)
                DataCopyPad(x, sGm[(n * C + c0_) * P + p0],
                            DataCopyExtParams(cn, ln * isz, (P - ln) * isz,
                                              (LP * isz - align_up(ln * isz, 32)) // 32))
                inQ.EnQue(x)
                x = inQ.DeQue(sdt)
                if sdt != F32:
                    Cast(tmp, x, RoundMode.CAST_NONE, cc * LP)
                    Add(acc, acc, tmp, cc * LP)
                else:
                    Add(acc, acc, x, cc * LP)
                inQ.FreeTensor(x)
        Transpose(tr, acc, None, TransposeParamsExt(1, cc, LP, 1, TransposeType.TRANSPOSE_NCHW2NHWC))
        rows = LP
        while rows > 1:
            h = rows // 2
            Add(tr, tr, tr[(rows - h) * cc], h * cc)
            rows -= h
        if odt != F32:
            Cast(outb, tr, RoundMode.CAST_RINT, cc)
            res = outb
        else:
            res = tr
        SetFlag(HardEvent.V_MTE3, ev_o)
        WaitFlag(HardEvent.V_MTE3, ev_o)
        DataCopyPad(dGm[c0_], res, DataCopyExtParams(1, cn * odt.itemsize, 0, 0))
        SetFlag(HardEvent.MTE3_V, ev_b)
        WaitFlag(HardEvent.MTE3_V, ev_b)


def bias_launch(src, dst, N, C, P, sdt, odt, profile) -> KernelLaunch:
    cc = 16
    ub = ub_bytes(profile)
    LP = max(16, min(1024, align_up(P, 16)))
    # halve while it does not fit, staying a multiple of 16 (aligning after the loop could undo the fit)
    while LP > 16 and 2 * cc * LP * sdt.itemsize + 3 * cc * LP * 4 + 1024 > ub:
        LP = max(16, LP // 2 // 16 * 16)
    if 2 * cc * LP * sdt.itemsize + 3 * cc * LP * 4 + 1024 > ub:
        raise tiling_error(f"gradBias: {cc} channels x {LP} positions need "
                           f"{2 * cc * LP * sdt.itemsize + 3 * cc * LP * 4 + 1024} B of UB; UB holds {ub} B")
    items = [(c, min(cc, C - c)) for c in range(0, C, cc)]
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch("GradBias(reduce N, spatial)", _bias_body, len(blocks), "vector",
                        (src, dst, N, C, P, LP, cc, sdt, odt, blocks))
