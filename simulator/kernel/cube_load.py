"""The Cube's loads, in Ascend C's words: GM -> L1 with ND->NZ (DataCopy with Nd2NzParams, MTE2),
InitConstValue, and L1 -> L0A / L0B by load2d and img2col load3d (LoadData, MTE1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..enums import dtype_name
from ..program import COMPUTE, GM_XFER, Instr
from ..recorder import current_context
from ..arith import align_up, ceil_div
from .base import GlobalTensor, LocalTensor, _fault
from .operands import (BLOCK_BYTES, FRACTAL_BYTES, c0_of, gm_check, local_extent, local_operand, memo_emit,
                       memo_lookup, merge_spans, param_in_range, require_pipe)

# LoadData 3Dv2's strideH and strideW fields hold [1, 63] (Ascend C's LoadData3DParamsV2)
LOAD3D_MAX_STRIDE = 63


@dataclass
class Nd2NzParams:
    """ndNum ND matrices of nValue rows x dValue columns (elements), rows srcDValue apart in GM,
    matrices srcNdMatrixStride apart, become NZ in L1: column strips of C0 elements
    dstNzC0Stride 32-B rows apart, rows dstNzNStride 32-B rows apart within a strip, matrices
    dstNzMatrixStride elements apart. A row's last strip is padded with zeros to C0
    [ASSUMPTION]; rows beyond nValue are not written."""
    ndNum: int = 1
    nValue: int = 0
    dValue: int = 0
    srcNdMatrixStride: int = 0
    srcDValue: int = 0
    dstNzC0Stride: int = 0
    dstNzNStride: int = 1
    dstNzMatrixStride: int = 0


@dataclass
class InitConstValueParams:
    """repeatTimes iterations, each filling blockNum blocks (32 B in L1, 512 B in L0A/L0B) with
    initValue, dstGap blocks skipped between iterations."""
    repeatTimes: int = 1
    blockNum: int = 0
    dstGap: int = 0
    initValue: float = 0


def InitConstValue(dst: LocalTensor, params: InitConstValueParams) -> None:
    """Fill a local buffer region with a constant (MTE2). Use it to zero the padding of tail
    fractals that loads would otherwise read unwritten. Cost: path INIT_CONST [ASSUMPTION]."""
    ctx = current_context()
    pipe, name = "PIPE_MTE2", "InitConstValue"
    require_pipe(pipe, name)
    local_operand(dst, ("L1", "L0A", "L0B"), pipe, name, "destination")
    unit = BLOCK_BYTES if dst.buffer == "L1" else FRACTAL_BYTES
    rep = param_in_range(params.repeatTimes, 1, 255, pipe, name, "repeatTimes")
    blk = param_in_range(params.blockNum, 1, 32767, pipe, name, "blockNum")
    gap = param_in_range(params.dstGap, 0, 32767, pipe, name, "dstGap")
    spans = [(dst.buffer, dst.offset + i * (blk + gap) * unit, dst.offset + (i * (blk + gap) + blk) * unit)
             for i in range(rep)]
    local_extent(dst, spans[-1][2], pipe, name, "destination")
    total = rep * blk * unit
    value = dst.dtype.type(params.initValue)
    cycles = ctx.profile.path("INIT_CONST").cycles(total)
    if ctx.functional:
        core = ctx.core

        def fn():
            raw = core.buffers[dst.buffer]
            for b, lo, hi in spans:
                raw[lo:hi].view(dst.dtype)[...] = value
    else:
        fn = None
    ctx.emit(Instr(pipe, name, COMPUTE, cycles, path="INIT_CONST", nbytes=total,
                   writes=merge_spans(spans), fn=fn, operands=(dst, f"{rep} x {blk} blocks", value)))


@dataclass
class LoadData2DParams:
    """repeatTimes fractals (512 B each): the i-th from source fractal startIndex + i*srcStride,
    to destination fractal i*(1 + dstGap); ifTranspose transposes each 16 x 16 fractal
    (16-bit types only)."""
    startIndex: int = 0
    repeatTimes: int = 1
    srcStride: int = 0
    sid: int = 0
    dstGap: int = 0
    ifTranspose: bool = False
    addrMode: int = 0


@dataclass
class LoadData3DParamsV2:
    """img2col of one feature map held in L1 as C1 x l1H x l1W x C0 (NC1HWC0 without N;
    channelSize = C1 * C0 channels). The logical img2col matrix has one row per output position
    (ho, wo), row index ho * Wo + wo, and one column per (c1, kh, kw, c0), column index
    ((c1 * filterH + kh) * filterW + kw) * C0 + c0 (FRACTAL_Z's K order), where
    h = ho * strideH - padTop + kh * dilationFilterH (w likewise) and positions outside the map
    read padValue. Rows [mStartPt, +mExtension) and columns [kStartPt, +kExtension) of it are
    written to L0A as zZ fractals (to L0B as zN, the matrix then being the right operand, k =
    positions); enTranspose (L0A, 16-bit) writes its transpose instead. padList is
    [left, right, top, bottom]."""
    padList: tuple = (0, 0, 0, 0)
    l1H: int = 1
    l1W: int = 1
    channelSize: int = 16
    kExtension: int = 16
    mExtension: int = 16
    kStartPt: int = 0
    mStartPt: int = 0
    strideW: int = 1
    strideH: int = 1
    filterW: int = 1
    filterH: int = 1
    dilationFilterW: int = 1
    dilationFilterH: int = 1
    enTranspose: bool = False
    enSmallK: bool = False
    padValue: float = 0
    filterSizeW: bool = False
    filterSizeH: bool = False
    fMatrixCtrl: bool = False


def LoadData(dst: LocalTensor, src, loadDataParams) -> None:
    """MTE1: load2d (LoadData2DParams) L1 -> L0A/L0B, or img2col load3d (LoadData3DParamsV2)
    from an NC1HWC0 feature map in L1."""
    if isinstance(loadDataParams, LoadData2DParams):
        _load2d(dst, src, loadDataParams)
    elif isinstance(loadDataParams, LoadData3DParamsV2):
        _load3d(dst, src, loadDataParams)
    else:
        raise _fault("PIPE_MTE1", f"LoadData: parameters must be LoadData2DParams or LoadData3DParamsV2, "
                     f"not {type(loadDataParams).__name__}")


def img2col_shape(p: LoadData3DParamsV2, dtype) -> tuple[int, int, int, int]:
    """(Ho, Wo, M = Ho*Wo, K = filterH*filterW*channelSize) of LoadData3DParamsV2's matrix."""
    left, right, top, bottom = (int(x) for x in p.padList)
    ho = (p.l1H + top + bottom - p.dilationFilterH * (p.filterH - 1) - 1) // p.strideH + 1
    wo = (p.l1W + left + right - p.dilationFilterW * (p.filterW - 1) - 1) // p.strideW + 1
    return ho, wo, ho * wo, p.filterH * p.filterW * p.channelSize


def _nd2nz(dst: LocalTensor, src: GlobalTensor, p: Nd2NzParams) -> None:
    """DataCopy(dst, src, Nd2NzParams): GM (ND) -> L1 (NZ) on MTE2, costed by the profile's
    GM_L1_ND2NZ path on the bytes moved (each row a whole number of 32-B bursts)."""
    ctx = current_context()
    pipe, name = "PIPE_MTE2", "DataCopy(ND2NZ)"
    if "GM_L1_ND2NZ" not in ctx.profile.paths:
        raise _fault(pipe, f"{name}: {ctx.profile.soc_version} has no ND -> NZ on its GM -> L1 copy (Ascend C "
                     f"supports DataCopy with Nd2NzParams on A2 / A3 chips); load data already in NZ "
                     f"(FRACTAL_NZ) with a plain DataCopy")
    nd, n, d, sd, msrc, c0s, ns, mdst = _nd2nz_operands(dst, src, p, pipe, name)
    dt = dst.dtype
    isz, c0 = dt.itemsize, c0_of(dt)
    d1 = ceil_div(d, c0)
    hi_el = (nd - 1) * mdst + (d1 - 1) * c0s * c0 + (n - 1) * ns * c0 + c0
    local_extent(dst, dst.offset + hi_el * isz, pipe, name, "destination")
    src_hi = (nd - 1) * msrc + (n - 1) * sd + d
    addr = gm_check(src, 0, src_hi * isz, pipe, name)
    row = d * isz
    rows = nd * n
    moved = rows * align_up(row, BLOCK_BYTES)
    if sd == d:
        gm = tuple((addr + i * msrc * isz, n * row) for i in range(nd))
    else:
        gm = tuple((addr + (i * msrc + r * sd) * isz, row) for i in range(nd) for r in range(n))
    writes = _nd2nz_l1_spans(dst.offset, nd, n, d1, c0s, ns, mdst, c0, isz)
    cycles = ctx.profile.path("GM_L1_ND2NZ").cycles(moved)
    if ctx.functional:
        fn = _nd2nz_effect(ctx, dst, addr, src_hi, hi_el, nd, n, d, sd, msrc, c0s, ns, mdst)
    else:
        fn = None
    instr = Instr(pipe, name, GM_XFER, cycles, path="GM_L1_ND2NZ", nbytes=rows * row,
                  chan_bytes=moved, gm=gm, gm_write=False, writes=writes, fn=fn,
                  operands=(dst, src, f"{nd} x {n} x {d}"))
    instr.l2_bypass = src.bypasses_l2
    ctx.emit(instr)


def _nd2nz_operands(dst: LocalTensor, src, p: Nd2NzParams, pipe: str, name: str) -> tuple:
    """Check an ND->NZ copy's operands and parameters; returns (ndNum, nValue, dValue, srcDValue,
    srcNdMatrixStride, dstNzC0Stride, dstNzNStride, dstNzMatrixStride) as ints."""
    require_pipe(pipe, name)
    local_operand(dst, ("L1",), pipe, name, "destination")
    if not isinstance(src, GlobalTensor):
        raise _fault(pipe, f"{name}: the source of an ND->NZ copy is a GlobalTensor in GM")
    if src.dtype.itemsize != dst.dtype.itemsize:
        raise _fault(pipe, f"{name}: source {dtype_name(src.dtype)} and destination "
                     f"{dtype_name(dst.dtype)} differ")
    nd = param_in_range(p.ndNum, 1, 4095, pipe, name, "ndNum")
    n = param_in_range(p.nValue, 1, 16384, pipe, name, "nValue")
    d = param_in_range(p.dValue, 1, 65535, pipe, name, "dValue")
    sd = param_in_range(p.srcDValue, d, 65535, pipe, name, "srcDValue (>= dValue)")
    msrc = param_in_range(p.srcNdMatrixStride, 0, 2 ** 32, pipe, name, "srcNdMatrixStride")
    c0s = param_in_range(p.dstNzC0Stride, 1, 16384, pipe, name, "dstNzC0Stride")
    ns = param_in_range(p.dstNzNStride, 1, 16384, pipe, name, "dstNzNStride")
    mdst = param_in_range(p.dstNzMatrixStride, 0, 2 ** 32, pipe, name, "dstNzMatrixStride")
    if ceil_div(d, c0_of(dst.dtype)) > 1 and c0s < (n - 1) * ns + 1:
        raise _fault(pipe, f"{name}: dstNzC0Stride {c0s} rows is less than a strip's {(n - 1) * ns + 1} "
                     f"rows: the strips would overlap")
    return nd, n, d, sd, msrc, c0s, ns, mdst


def _nd2nz_l1_spans(base0: int, nd, n, d1, c0s, ns, mdst, c0, isz) -> tuple:
    """The sanitizer's record of an ND->NZ copy's L1 writes: per matrix and column strip, its
    rows (one span when they are adjacent)."""
    writes = []
    for i in range(nd):
        for j in range(d1):
            base = base0 + (i * mdst + j * c0s * c0) * isz
            if ns == 1:
                writes.append(("L1", base, base + n * BLOCK_BYTES))
            else:
                writes.extend(("L1", base + r * ns * BLOCK_BYTES, base + r * ns * BLOCK_BYTES + BLOCK_BYTES)
                              for r in range(n))
    return merge_spans(writes)


def _nd2nz_effect(ctx, dst: LocalTensor, addr, src_hi, hi_el, nd, n, d, sd, msrc, c0s, ns, mdst):
    """The functional effect of an ND->NZ copy: each matrix's rows, zero-padded to whole C0
    strips, scattered into the NZ layout."""
    device, core, dt = ctx.device, ctx.core, dst.dtype
    isz, c0 = dt.itemsize, c0_of(dt)
    d1 = ceil_div(d, c0)

    def fn():
        g = device.memory.bytes_at(addr, src_hi * isz)
        if g is None:
            return
        gv = g.view(dt)
        l1 = core.buffers["L1"][dst.offset:dst.offset + hi_el * isz].view(dt)
        r = np.arange(n)
        c = np.arange(d)
        jj = np.arange(d1)
        kk = np.arange(c0)
        didx = (jj[None, :, None] * c0s * c0 + r[:, None, None] * ns * c0 + kk[None, None, :])
        for i in range(nd):
            vals = np.zeros((n, d1 * c0), dtype=dt)
            vals[:, :d] = gv[i * msrc + r[:, None] * sd + c[None, :]]
            l1[i * mdst + didx] = vals.reshape(n, d1, c0)
    return fn


def _load2d(dst: LocalTensor, src, p: LoadData2DParams) -> None:
    """LoadData(dst, src, LoadData2DParams): whole fractals L1 -> L0A / L0B on MTE1, costed by
    the profile's L1_L0A / L1_L0B path. A repeat with the same operands is a memo look-up."""
    ctx = current_context()
    pipe, name = "PIPE_MTE1", "LoadData(2D)"
    key, repeat = memo_lookup(ctx, "l2d", (dst, src), p)
    if repeat:
        return
    rep, start, ss, gap = _load2d_operands(ctx, dst, src, p, pipe, name)
    s0 = src.offset + start * FRACTAL_BYTES
    src_hi = s0 + ((rep - 1) * ss + 1) * FRACTAL_BYTES
    dst_hi = dst.offset + ((rep - 1) * (1 + gap) + 1) * FRACTAL_BYTES
    local_extent(src, src_hi, pipe, name, "source")
    local_extent(dst, dst_hi, pipe, name, "destination")
    nbytes = rep * FRACTAL_BYTES
    path = "L1_L0A" if dst.buffer == "L0A" else "L1_L0B"
    cycles = ctx.profile.path(path).cycles(nbytes)
    if ss == 1 or rep == 1:
        reads = (("L1", s0, src_hi),)
    else:
        reads = merge_spans(("L1", s0 + i * ss * FRACTAL_BYTES, s0 + (i * ss + 1) * FRACTAL_BYTES)
                            for i in range(rep))
    if gap == 0:
        writes = ((dst.buffer, dst.offset, dst_hi),)
    else:
        writes = tuple((dst.buffer, dst.offset + i * (1 + gap) * FRACTAL_BYTES,
                        dst.offset + (i * (1 + gap) + 1) * FRACTAL_BYTES) for i in range(rep))
    make = _load2d_effect(dst, rep, ss, gap, bool(p.ifTranspose), s0, src_hi, dst_hi)
    memo_emit(ctx, key, make, pipe, name, COMPUTE, cycles, path=path, nbytes=nbytes, reads=reads,
              writes=writes, operands=(dst, src, f"{rep} fractals", "T" if p.ifTranspose else ""))


def _load2d_operands(ctx, dst: LocalTensor, src, p: LoadData2DParams, pipe: str, name: str) -> tuple:
    """Check a load2d's operands and parameters; returns (repeatTimes, startIndex, srcStride,
    dstGap) as ints."""
    if isinstance(src, GlobalTensor):
        raise _fault("PIPE_MTE2", f"{name}: GM -> L0A/L0B load2d is not modelled; stage through L1 "
                     f"(DataCopy to an A1/B1 tensor, then LoadData)")
    require_pipe(pipe, name)
    local_operand(src, ("L1",), pipe, name, "source")
    local_operand(dst, ("L0A", "L0B"), pipe, name, "destination")
    if src.dtype.itemsize != dst.dtype.itemsize:
        raise _fault(pipe, f"{name}: source {dtype_name(src.dtype)} and destination "
                     f"{dtype_name(dst.dtype)} differ")
    rep = param_in_range(p.repeatTimes, 1, 255, pipe, name, "repeatTimes")
    start = param_in_range(p.startIndex, 0, 65535, pipe, name, "startIndex")
    ss = param_in_range(p.srcStride, 0, 65535, pipe, name, "srcStride")
    gap = param_in_range(p.dstGap, 0, 65535, pipe, name, "dstGap")
    if gap and ctx.profile.series == "training":
        raise _fault(pipe, f"{name}: dstGap is not enabled on the training series "
                     f"({ctx.profile.soc_version}); write one fractal run per instruction")
    if p.ifTranspose and dst.dtype.itemsize != 2:
        raise _fault(pipe, f"{name}: ifTranspose needs a 16-bit type; {dtype_name(dst.dtype)} "
                     f"fractals are not square (load B^T instead)")
    return rep, start, ss, gap


def _load2d_effect(dst: LocalTensor, rep, ss, gap, tr: bool, s0, src_hi, dst_hi):
    """make(core) for a load2d: one slice copy for a contiguous run of fractals, else a gather
    of each fractal (transposed 16 x 16 when ifTranspose)."""
    dt, dbuf, d0 = dst.dtype, dst.buffer, dst.offset

    def make(core):
        l1, out = core.buffers["L1"], core.buffers[dbuf]
        if ss == 1 and gap == 0 and not tr:          # one contiguous run of fractals
            def fn():
                out[d0:dst_hi] = l1[s0:src_hi]
            return fn
        so = (s0 + np.arange(rep) * ss * FRACTAL_BYTES)[:, None] + np.arange(FRACTAL_BYTES)
        do = (d0 + np.arange(rep) * (1 + gap) * FRACTAL_BYTES)[:, None] + np.arange(FRACTAL_BYTES)

        def fn():
            data = l1[so]
            if tr:
                data = np.ascontiguousarray(data.view(dt).reshape(rep, 16, 16).transpose(0, 2, 1))
                data = data.view(np.uint8).reshape(rep, FRACTAL_BYTES)
            out[do] = data
        return fn
    return make


def _load3d(dst: LocalTensor, src: LocalTensor, p: LoadData3DParamsV2) -> None:
    """LoadData(dst, src, LoadData3DParamsV2): img2col of an L1 feature map into L0A / L0B on
    MTE1, costed by the profile's L1_L0A / L1_L0B path on the fractals written. A repeat with
    the same operands is a memo look-up."""
    ctx = current_context()
    pipe, name = "PIPE_MTE1", "LoadData(3Dv2)"
    key, repeat = memo_lookup(ctx, "l3d", (dst, src), p)
    if repeat:
        return
    geometry, ch = _load3d_operands(dst, src, p, pipe, name)
    mst, mext, kst, kext = geometry[:4]
    dt = dst.dtype
    isz, c0 = dt.itemsize, c0_of(dt)
    map_bytes = (ch // c0) * geometry[14] * geometry[15] * c0 * isz
    local_extent(src, src.offset + map_bytes, pipe, name, "source feature map")
    reads = _load3d_l1_spans(src.offset, isz, geometry)
    if p.enTranspose:
        outr, outc = kext, mext
    else:
        outr, outc = mext, kext
    if dst.buffer == "L0A":
        nfrac = ceil_div(outr, 16) * ceil_div(outc, c0)
    else:
        nfrac = ceil_div(mext, c0) * ceil_div(kext, 16)
    nbytes = nfrac * FRACTAL_BYTES
    local_extent(dst, dst.offset + nbytes, pipe, name, "destination")
    path = "L1_L0A" if dst.buffer == "L0A" else "L1_L0B"
    l3d = ctx.profile.load3d
    cycles = (l3d.cycles(nbytes, dst.buffer == "L0B", geometry[9], geometry[15], geometry[4]) if l3d is not None
              else ctx.profile.path(path).cycles(nbytes))
    layout = "zN" if dst.buffer == "L0B" else "zZT" if p.enTranspose else "zZ"
    make = _load3d_effect(dst, src.offset, map_bytes, nbytes, geometry, layout, dt.type(p.padValue))
    memo_emit(ctx, key, make, pipe, name, COMPUTE, cycles, path=path, nbytes=nbytes, reads=reads,
              writes=((dst.buffer, dst.offset, dst.offset + nbytes),),
              operands=(dst, src, f"m [{mst}:+{mext}] x k [{kst}:+{kext}]"))


def _load3d_operands(dst: LocalTensor, src: LocalTensor, p: LoadData3DParamsV2, pipe: str,
                     name: str) -> tuple[tuple, int]:
    """Check a load3d's operands and parameters; returns (the window's geometry as _l3d_index
    takes it, channelSize)."""
    require_pipe(pipe, name)
    local_operand(src, ("L1",), pipe, name, "source")
    local_operand(dst, ("L0A", "L0B"), pipe, name, "destination")
    dt = dst.dtype
    if src.dtype.itemsize != dt.itemsize:
        raise _fault(pipe, f"{name}: source {dtype_name(src.dtype)} and destination {dtype_name(dt)} differ")
    isz, c0 = dt.itemsize, c0_of(dt)
    if dst.buffer == "L0B" and isz == 1:
        raise _fault(pipe, f"{name}: load3d into B2 takes half/bfloat16/float, not {dtype_name(dt)}")
    if p.enSmallK or p.filterSizeW or p.filterSizeH or p.fMatrixCtrl:
        raise _fault(pipe, f"{name}: enSmallK / filterSizeW / filterSizeH / fMatrixCtrl are not modelled")
    if p.enTranspose and (dst.buffer != "L0A" or isz != 2):
        raise _fault(pipe, f"{name}: enTranspose works only into A2 with a 16-bit type")
    pads = tuple(int(x) for x in p.padList)
    if len(pads) != 4 or any(not 0 <= x <= 255 for x in pads):
        raise _fault(pipe, f"{name}: padList {list(p.padList)} must be 4 values in [0, 255]")
    left, right, top, bottom = pads
    l1h = param_in_range(p.l1H, 1, 32767, pipe, name, "l1H")
    l1w = param_in_range(p.l1W, 1, 32767, pipe, name, "l1W")
    ch = param_in_range(p.channelSize, 1, 65535, pipe, name, "channelSize")
    if ch % c0:
        raise _fault(pipe, f"{name}: channelSize {ch} is not a multiple of C0 = {c0}; the small-channel "
                     f"modes (4 / 8 / N*C0+4 ...) are not modelled: pad the channels to C0")
    sw = param_in_range(p.strideW, 1, LOAD3D_MAX_STRIDE, pipe, name, "strideW")
    sh = param_in_range(p.strideH, 1, LOAD3D_MAX_STRIDE, pipe, name, "strideH")
    fw = param_in_range(p.filterW, 1, 255, pipe, name, "filterW")
    fh = param_in_range(p.filterH, 1, 255, pipe, name, "filterH")
    dw = param_in_range(p.dilationFilterW, 1, 255, pipe, name, "dilationFilterW")
    dh = param_in_range(p.dilationFilterH, 1, 255, pipe, name, "dilationFilterH")
    kext = param_in_range(p.kExtension, 1, 65535, pipe, name, "kExtension")
    mext = param_in_range(p.mExtension, 1, 65535, pipe, name, "mExtension")
    kst = param_in_range(p.kStartPt, 0, 65535, pipe, name, "kStartPt")
    mst = param_in_range(p.mStartPt, 0, 65535, pipe, name, "mStartPt")
    ho, wo, _, kall = img2col_shape(p, dt)
    if ho < 1 or wo < 1:
        raise _fault(pipe, f"{name}: the filter ({fh}x{fw}, dilation {dh}x{dw}) does not fit the padded "
                     f"map {l1h}x{l1w}: no output positions")
    if kst % c0:
        raise _fault(pipe, f"{name}: kStartPt {kst} must be a multiple of C0 = {c0}")
    if kst + kext > kall:
        raise _fault(pipe, f"{name}: columns [{kst}, {kst + kext}) exceed K = filterH*filterW*channelSize "
                     f"= {kall}")
    return (mst, mext, kst, kext, wo, fh * fw * c0, fw, c0, sh, sw, top, left, dh, dw, l1h, l1w), ch


def _load3d_l1_spans(soff: int, isz: int, geometry: tuple) -> tuple:
    """The sanitizer's record of a load3d's L1 reads: per C1 plane, the hull of the map rows the
    window positions touch (a rectangle of h x w per plane, as flat ranges; it may include a few
    bytes at the ends of edge rows that no position reads)."""
    mst, mext, kst, kext, wo, plane_cols, fw, c0, sh, sw, top, left, dh, dw, l1h, l1w = geometry
    reads = []
    r0, r1 = mst, mst + mext - 1
    oh0, oh1 = r0 // wo, r1 // wo
    ow0, ow1 = (r0 % wo, r1 % wo) if oh0 == oh1 else (0, wo - 1)
    for plane in range(kst // plane_cols, (kst + kext - 1) // plane_cols + 1):
        q0 = max(kst, plane * plane_cols) - plane * plane_cols
        q1 = min(kst + kext - 1, (plane + 1) * plane_cols - 1) - plane * plane_cols
        kh0, kh1 = q0 // (fw * c0), q1 // (fw * c0)
        kw0, kw1 = ((q0 // c0) % fw, (q1 // c0) % fw) if kh0 == kh1 else (0, fw - 1)
        h0, h1 = oh0 * sh - top + kh0 * dh, oh1 * sh - top + kh1 * dh
        w0, w1 = ow0 * sw - left + kw0 * dw, ow1 * sw - left + kw1 * dw
        if h1 < 0 or h0 >= l1h or w1 < 0 or w0 >= l1w:
            continue                                  # only padding
        h0, h1 = max(h0, 0), min(h1, l1h - 1)
        w0, w1 = max(w0, 0), min(w1, l1w - 1)
        lo = ((plane * l1h + h0) * l1w + w0) * c0 * isz
        hi = ((plane * l1h + h1) * l1w + w1 + 1) * c0 * isz
        reads.append(("L1", soff + lo, soff + hi))
    return merge_spans(reads)


def _load3d_effect(dst: LocalTensor, soff: int, map_bytes: int, nbytes: int, geometry: tuple,
                   layout: str, pad_value):
    """make(core) for a load3d: one gather from the feature map (_l3d_gather's index), then the
    fractal padding zeroed and the positions outside the map set to padValue."""
    dt, dbuf, d0 = dst.dtype, dst.buffer, dst.offset

    def make(core):
        gather, zeros, pads = _l3d_gather(geometry, layout)
        l1, out = core.buffers["L1"], core.buffers[dbuf]

        def fn():
            fmap = l1[soff:soff + map_bytes].view(dt)
            res = out[d0:d0 + nbytes].view(dt)
            np.take(fmap, gather, out=res, mode="clip")
            if zeros is not None:
                res[zeros] = 0
            if pads is not None:
                res[pads] = pad_value
        return fn
    return make


def _write_zz(mat: np.ndarray, k0: int) -> np.ndarray:
    """A (rows x cols) matrix as zZ fractals (16 x k0), zero-padded to whole fractals."""
    r, c = mat.shape
    r1, c1 = ceil_div(r, 16), ceil_div(c, k0)
    pad = np.zeros((r1 * 16, c1 * k0), dtype=mat.dtype)
    pad[:r, :c] = mat
    return pad.reshape(r1, 16, c1, k0).transpose(0, 2, 1, 3).reshape(-1)


def _write_zn(mat: np.ndarray, k0: int) -> np.ndarray:
    """A (k x n) right matrix as zN fractals (k0 x 16 stored column-major), zero-padded."""
    k, n = mat.shape
    k1, n1 = ceil_div(k, k0), ceil_div(n, 16)
    pad = np.zeros((k1 * k0, n1 * 16), dtype=mat.dtype)
    pad[:k, :n] = mat
    return pad.reshape(k1, k0, n1, 16).transpose(0, 2, 3, 1).reshape(-1)


def _l3d_index(mst, mext, kst, kext, wo, plane_cols, fw, c0, sh, sw, top, left, dh, dw, l1h, l1w):
    """Functional load3d's gather: the flat map index of every (row, column) of the window (0
    where the position falls outside the map) and which positions fall inside (None: all do).
    The map index ((c1 * l1H + h) * l1W + w) * C0 + c0 is a row part plus a column part, since
    h and w are each a row term plus a column term: one broadcast add, not a dozen 2-D passes."""
    oh, ow = np.divmod(mst + np.arange(mext), wo)
    c1, rem = np.divmod(kst + np.arange(kext), plane_cols)
    kh, kw, cc = rem // (fw * c0), (rem // c0) % fw, rem % c0
    h_row, w_row = oh * sh - top, ow * sw - left
    h_col, w_col = kh * dh, kw * dw
    idx = ((h_row * l1w + w_row) * c0)[:, None] + (((c1 * l1h + h_col) * l1w + w_col) * c0 + cc)[None, :]
    if (h_row.min() + h_col.min() >= 0 and h_row.max() + h_col.max() < l1h
            and w_row.min() + w_col.min() >= 0 and w_row.max() + w_col.max() < l1w):
        return None, idx
    hh = h_row[:, None] + h_col[None, :]
    ww = w_row[:, None] + w_col[None, :]
    valid = (hh >= 0) & (hh < l1h) & (ww >= 0) & (ww < l1w)
    return valid, np.where(valid, idx, 0)


_L3D_GATHER: dict = {}


_L3D_GATHER_BYTES = [0]


def _l3d_gather(geometry: tuple, layout: str):
    """Functional load3d as one gather: for every element of the destination's fractals (zZ, zZ
    of the transpose, or zN) the flat map index it takes, plus the positions that are fractal
    padding (zero) and the window positions outside the map (padValue), each None if there are
    none. Cached per geometry and layout."""
    key = (geometry, layout)
    hit = _L3D_GATHER.get(key)
    if hit is not None:
        return hit
    c0 = geometry[7]
    valid, idx = _l3d_index(*geometry)
    marked = idx + 2                                  # 0: fractal padding, 1: outside the map
    if valid is not None:
        marked[~valid] = 1
    if layout == "zN":
        laid = _write_zn(marked, c0)
    else:
        laid = _write_zz(marked.T if layout == "zZT" else marked, c0)
    zeros, pads = np.flatnonzero(laid == 0), np.flatnonzero(laid == 1)
    hit = (np.maximum(laid - 2, 0), zeros if zeros.size else None, pads if pads.size else None)
    size = sum(a.nbytes for a in hit if a is not None)
    if _L3D_GATHER_BYTES[0] + size > 256 << 20:      # bounded: a big window's index is ~0.6 MB
        _L3D_GATHER.clear()
        _L3D_GATHER_BYTES[0] = 0
    _L3D_GATHER[key] = hit
    _L3D_GATHER_BYTES[0] += size
    return hit
