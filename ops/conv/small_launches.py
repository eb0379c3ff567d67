"""The small vector launches beside the Cube work: gradBias (the reduction of gradOutput over N and
the spatial dims) and the forward convolution's bias add.
"""
from __future__ import annotations

import math

import numpy as np

from simulator.kernel import (GM_ADDR, Add, Cast, Copy, DataCopyExtParams, DataCopyPad, Duplicate,
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


def _bias_add_body(out: GM_ADDR, bias: GM_ADDR, C, P, npos, chans, odt, bias_dt, blocks):
    """out[n, c, p] += bias[c], in FP32. Per channel chunk, the bias is laid out once as a
    [chans][npos] tile (rows doubled, then transposed); each item then loads, adds, stores."""
    items = blocks[GetBlockIdx()]
    oGm, bGm = GlobalTensor(odt), GlobalTensor(bias_dt)
    oGm.SetGlobalBuffer(out)
    bGm.SetGlobalBuffer(bias)
    osz = odt.itemsize
    tile = chans * npos
    pipe = TPipe()
    in_que = TQue(TPosition.VECIN, 2)
    pipe.InitBuffer(in_que, 2, tile * osz)
    out_que = TQue(TPosition.VECOUT, 2)
    pipe.InitBuffer(out_que, 2, tile * osz)
    calc = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(calc, 3 * tile * 4 + 64)
    buf = calc.Get(float32)
    rows, biasT, work = buf[0], buf[tile], buf[2 * tile]
    raw = calc.Get(np.uint8)[3 * tile * 4].ReinterpretCast(bias_dt)
    ev_bias_in = pipe.AllocEventID(HardEvent.MTE2_V)
    ev_pad_zeroed = pipe.AllocEventID(HardEvent.V_MTE2)
    current = None
    for ch0, nch, n, p0, ln in items:
        if ch0 != current:
            current = ch0
            Duplicate(rows, 0.0, chans)
            DataCopyPad(raw, bGm[ch0], DataCopyExtParams(1, nch * bias_dt.itemsize, 0, 0))
            SetFlag(HardEvent.MTE2_V, ev_bias_in)
            WaitFlag(HardEvent.MTE2_V, ev_bias_in)
            if bias_dt != F32:
                Cast(rows, raw, RoundMode.CAST_NONE, nch)
            else:
                Copy(rows, raw, nch)
            filled = 1
            while filled < npos:           # [npos][chans]: the bias row, doubled
                step = min(filled, npos - filled)
                Copy(rows[filled * chans], rows, step * chans)
                filled += step
            Transpose(biasT, rows, None, TransposeParamsExt(1, chans, npos, 1, TransposeType.TRANSPOSE_NHWC2NCHW))
        x = in_que.AllocTensor(odt)
        gap = (npos * osz - align_up(ln * osz, 32)) // 32
        if ln < npos or nch < chans:       # the rows' tails are added too: zero them before the load
            Duplicate(x.ReinterpretCast(np.uint8).ReinterpretCast(np.float32), 0.0, tile * osz // 4)
            SetFlag(HardEvent.V_MTE2, ev_pad_zeroed)
            WaitFlag(HardEvent.V_MTE2, ev_pad_zeroed)
        DataCopyPad(x, oGm[(n * C + ch0) * P + p0], DataCopyExtParams(nch, ln * osz, (P - ln) * osz, gap))
        in_que.EnQue(x)
        x = in_que.DeQue(odt)
        y = out_que.AllocTensor(odt)
        if odt != F32:
            Cast(work, x, RoundMode.CAST_NONE, tile)
            Add(work, work, biasT, tile)
            Cast(y, work, RoundMode.CAST_RINT, tile)
        else:
            Add(y, x, biasT, tile)
        in_que.FreeTensor(x)
        out_que.EnQue(y)
        y = out_que.DeQue(odt)
        DataCopyPad(oGm[(n * C + ch0) * P + p0], y, DataCopyExtParams(nch, ln * osz, gap, (P - ln) * osz))
        out_que.FreeTensor(y)


def bias_add_launch(out, bias, N, C, P, odt, bias_dt, profile) -> KernelLaunch:
    """The convolution's bias added to its output (N, C, P positions), channel chunks of 16 by
    position chunks dealt over the vector cores: CANN adds it this way after a transposed 3D
    convolution (its other kernels add it to the Cube's accumulator, docs/CONVOLUTION.md)."""
    chans = 16
    ub = ub_bytes(profile)
    osz = np.dtype(odt).itemsize

    def need(npos):
        return 4 * chans * npos * osz + 3 * chans * npos * 4 + 1024

    npos = max(16, min(1024, align_up(P, 16)))
    while npos > 16 and need(npos) > ub:
        npos = max(16, npos // 2 // 16 * 16)
    if need(npos) > ub:
        raise tiling_error(f"Convolution bias: {chans} channels x {npos} positions need {need(npos)} B of UB; "
                           f"UB holds {ub} B")
    items = [(c, min(chans, C - c), n, p, min(npos, P - p))
             for c in range(0, C, chans) for n in range(N) for p in range(0, P, npos)]
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch("Add(output, bias)", _bias_add_body, len(blocks), "vector",
                        (out, bias, C, P, npos, chans, np.dtype(odt), np.dtype(bias_dt), blocks))


def _enlarge_body(src: GM_ADDR, dst: GM_ADDR, dt, E: int, A: int, B: int, taps: int, zero_elems: int, ne: int,
                  gather: bool, blocks):
    """Per Cube group, between the weight layout (E x A rows of B x taps per Cube group) and its
    block-diagonal form ((E A) x (E B) x taps): enlarging, the block zeroed (unless zero_elems is
    0: a MemSet zeroed it) and then, for each row a of the original groups, the E groups' rows (one
    strided load) stored on the diagonal (one strided store: group e's row at column e B);
    gathering (gradWeight back), the diagonal rows loaded and stored as the weight layout's."""
    groups = blocks[GetBlockIdx()]
    sGm, dGm = GlobalTensor(dt), GlobalTensor(dt)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)
    isz = dt.itemsize
    row = B * taps * isz
    pitch = align_up(row, 32)
    region = E * A * E * B * taps
    diagonal_gap = (A * E * B + B) * taps * isz - row      # bytes between group e's row and e + 1's
    zeroing = not gather and zero_elems > 0
    zero_bytes = align_up(zero_elems * isz, 32) if zeroing else 0
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, zero_bytes + 2 * ne * pitch)
    raw = buf.Get(np.uint8)
    zeros = raw.ReinterpretCast(dt)
    slots = [raw[zero_bytes + k * ne * pitch].ReinterpretCast(dt) for k in range(2)]
    ev_loaded = [pipe.AllocEventID(HardEvent.MTE2_MTE3) for _ in range(2)]
    ev_free = [pipe.AllocEventID(HardEvent.MTE3_MTE2) for _ in range(2)]
    if zeroing:
        ev_zeroed = pipe.AllocEventID(HardEvent.V_MTE3)
        Duplicate(raw.ReinterpretCast(np.float32), 0.0, zero_bytes // 4)
        SetFlag(HardEvent.V_MTE3, ev_zeroed)
        WaitFlag(HardEvent.V_MTE3, ev_zeroed)
    used = [False, False]
    k = 0
    for g in groups:
        base = g * region
        if zeroing:
            for off in range(0, region, zero_elems):
                DataCopyPad(dGm[base + off], zeros, DataCopyExtParams(1, min(zero_elems, region - off) * isz, 0, 0))
        for a in range(A):
            for e0 in range(0, E, ne):
                n = min(ne, E - e0)
                plain = ((g * E + e0) * A + a) * B * taps
                diagonal = base + a * E * B * taps + e0 * (A * E * B + B) * taps
                if used[k]:
                    WaitFlag(HardEvent.MTE3_MTE2, ev_free[k])
                if gather:
                    DataCopyPad(slots[k], sGm[diagonal], DataCopyExtParams(n, row, diagonal_gap, 0))
                else:
                    DataCopyPad(slots[k], sGm[plain], DataCopyExtParams(n, row, (A - 1) * row, 0))
                SetFlag(HardEvent.MTE2_MTE3, ev_loaded[k])
                WaitFlag(HardEvent.MTE2_MTE3, ev_loaded[k])
                if gather:
                    DataCopyPad(dGm[plain], slots[k], DataCopyExtParams(n, row, 0, (A - 1) * row))
                else:
                    DataCopyPad(dGm[diagonal], slots[k], DataCopyExtParams(n, row, 0, diagonal_gap))
                SetFlag(HardEvent.MTE3_MTE2, ev_free[k])
                used[k] = True
                k ^= 1
    for k in range(2):
        if used[k]:
            WaitFlag(HardEvent.MTE3_MTE2, ev_free[k])


def group_enlarge(groups: int, weight_dims: tuple, itemsize: int, transposed: bool, c0: int, profile) -> int:
    """Original groups the Cube runs as one (CANN's "enlarge", TBE util_conv2d): the fewest that
    fill whole C0 planes of input channels and of 16 output channels, at most the groups. 1 where
    it would not divide the groups evenly (CANN pads the last Cube group; we do not) or a group's
    weight row does not fit a quarter of UB (the enlarging launch's slots)."""
    if groups == 1:
        return 1
    rows, cols = weight_dims[0] // groups, weight_dims[1]
    cin, cout = (rows, cols) if transposed else (cols, rows)
    E = min(math.lcm(math.lcm(cin, c0) // cin, math.lcm(cout, 16) // cout), groups)
    taps = int(np.prod(weight_dims[2:]))
    if E == 1 or groups % E or align_up(cols * taps * itemsize, 32) > ub_bytes(profile) // 4:
        return 1
    return E


def enlarge_launch(w, E: int, cube_groups: int, src, dst, profile, gather: bool = False,
                   zeroed: bool = False) -> KernelLaunch:
    """The weight `w` (E cube_groups A rows of B x taps) laid out for cube_groups Cube groups of E
    original groups each: block-diagonal, (E A) x (E B) x taps per Cube group, zeros off the
    diagonal (CANN's group "enlarge", TBE util_conv2d: its grouped weight TransData writes this
    FRACTAL_Z; here a launch of its own before the packing). `zeroed`: a MemSet launched before
    it zeroed dst, so only the diagonal is written (as CANN's atomic trans_data_groups). `gather`:
    the way back, a gradWeight computed block-diagonal to the weight layout (the blocks off the
    diagonal left). Cube groups are dealt over the vector cores."""
    dtype, A, B = w.dtype, w.viewDims[0] // (cube_groups * E), w.viewDims[1]
    taps = int(np.prod(w.viewDims[2:]))
    dt = np.dtype(dtype)
    ub = ub_bytes(profile)
    pitch = align_up(B * taps * dt.itemsize, 32)
    ne = max(1, min(E, (ub // 2) // (2 * pitch)))
    zero_elems = 0 if zeroed else min(E * A * E * B * taps, (ub // 4) // dt.itemsize // 16 * 16)
    blocks = _split(list(range(cube_groups)), min(cube_groups, vector_core_count(profile)))
    name = "TransData(gradWeight enlarged -> weight layout)" if gather else "TransData(weight -> groups enlarged)"
    return KernelLaunch(name, _enlarge_body, len(blocks), "vector",
                        (src, dst, dt, E, A, B, taps, zero_elems, ne, gather, blocks))
