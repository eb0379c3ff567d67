"""Out of L0C: Fixpipe (A2) to GM with NZ->ND, dtype conversion, ReLU and atomic add, and the coupled
chips' L0C -> UB DataCopy (DataCopyEnhancedParams, BlockMode).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..enums import dtype_name
from ..program import COMPUTE, GM_XFER, Instr, Rows
from ..recorder import current_context
from ..arith import align_up, ceil_div
from .base import GlobalTensor, LocalTensor, _fault, bfloat16, float32, half
from .cube_load import Nd2NzParams, _nd2nz
from .operands import (BLOCK_BYTES, gm_check, int32, local_extent, local_operand, merge_spans, param_in_range,
                       require_pipe)


class QuantMode_t(Enum):
    NoQuant = "none"         # fp32 -> fp32 (int32 -> int32)
    F322F16 = "f16"          # fp32 -> half, round to nearest even
    F322BF16 = "bf16"        # fp32 -> bfloat16, round to nearest even


class FixpipeConfig(Enum):
    CFG_ROW_MAJOR = "ND"     # NZ in L0C -> ND (row-major) in GM
    CFG_NZ = "NZ"            # keep NZ


CFG_ROW_MAJOR, CFG_NZ = FixpipeConfig.CFG_ROW_MAJOR, FixpipeConfig.CFG_NZ


@dataclass
class FixpipeParamsV220:
    """Move mSize x nSize of an NZ result in L0C to GM. srcStride: rows (of 16 values) between
    consecutive 16-column strips in L0C (normally ceil16(m)). dstStride: for CFG_ROW_MAJOR the
    GM row stride in elements; for CFG_NZ the rows (of 16 values) between strips in GM.
    quantPre None takes the conversion from the GM tensor's dtype."""
    nSize: int = 0
    mSize: int = 0
    srcStride: int = 0
    dstStride: int = 0
    quantPre: QuantMode_t | None = None
    reluEn: bool = False
    unitFlag: int = 0
    isChannelSplit: bool = False
    ndNum: int = 1
    srcNdStride: int = 0
    dstNdStride: int = 0


FixpipeParams = FixpipeParamsV220


def Fixpipe(dst: GlobalTensor, src: LocalTensor, params: FixpipeParamsV220,
            config: FixpipeConfig = CFG_ROW_MAJOR) -> None:
    """PIPE_FIX (A2): L0C (NZ, fp32/int32) -> GM, converting to the GM tensor's dtype (fp32,
    half or bfloat16; rounding to nearest even) and from NZ to ND (CFG_ROW_MAJOR) or keeping NZ.
    Honours SetAtomicAdd (the values are added to GM in the atomic dtype). The transfer costs
    the profile's L0C_GM path on the larger of the bytes read and written and reserves the
    written bytes on the memory system."""
    ctx = current_context()
    pipe, name = "PIPE_FIX", "Fixpipe"
    m, n, ss, out = _fixpipe_operands(dst, src, params, pipe, name)
    ds = int(params.dstStride)
    n1 = ceil_div(n, 16)
    row_src = 16 * src.dtype.itemsize
    local_extent(src, src.offset + ((n1 - 1) * ss + m) * row_src, pipe, name, "source (CO1)")
    reads = merge_spans(("L0C", src.offset + l * ss * row_src, src.offset + l * ss * row_src + m * row_src)
                        for l in range(n1))
    addr, hi, gm, moved = _fixpipe_gm_rows(dst, config, m, n, ds, out.itemsize, pipe, name)
    written = sum(b for _, b in gm) if type(gm) is tuple else gm.count * gm.n
    cost_bytes = max(written, m * n1 * row_src)
    cycles = ctx.profile.path("L0C_GM").cycles(cost_bytes)
    atomic = ctx.atomic
    if atomic is not None and atomic != out:
        raise _fault(pipe, f"{name}: SetAtomicAdd({dtype_name(atomic)}) but Fixpipe writes {dtype_name(out)}")
    if ctx.functional:
        fn = _fixpipe_effect(ctx, src, addr, hi, m, n, ss, ds, out, bool(params.reluEn), atomic, config)
    else:
        fn = None
    label = name + ("+AtomicAdd" if atomic is not None else "")
    instr = Instr(pipe, label, GM_XFER, cycles, path="L0C_GM", nbytes=written, chan_bytes=moved,
                  gm=gm, gm_write=True, reads=reads, fn=fn,
                  operands=(dst, src, f"{m} x {n}", dtype_name(out), config.value))
    instr.l2_bypass = dst.bypasses_l2
    ctx.emit(instr)


class BlockMode(Enum):
    BLOCK_MODE_NORMAL = 0
    BLOCK_MODE_MATRIX = 1
    BLOCK_MODE_VECTOR = 2


class DeqScale(Enum):
    DEQ_NONE = 0             # fp32 -> fp32
    DEQF16 = 3               # fp32 -> half, round to nearest even


@dataclass
class DataCopyEnhancedParams:
    blockMode: BlockMode = BlockMode.BLOCK_MODE_NORMAL
    deqScale: DeqScale = DeqScale.DEQ_NONE
    deqValue: float = 0
    sidStoreMode: int = 0
    isRelu: bool = False


def data_copy_enhanced(dst, src, params, enhanced) -> None:
    """DataCopy forms of the cube path (called by copy.DataCopy): Nd2NzParams (GM -> L1) and
    DataCopyEnhancedParams (L0C -> UB)."""
    if isinstance(params, Nd2NzParams):
        _nd2nz(dst, src, params)
    elif enhanced is not None:
        _l0c_to_ub(dst, src, params, enhanced)
    else:
        raise _fault(None, f"DataCopy: unsupported parameters {type(params).__name__}")


_QUANT_OUT = {QuantMode_t.NoQuant: None, QuantMode_t.F322F16: half, QuantMode_t.F322BF16: bfloat16}


def _fixpipe_operands(dst, src, params: FixpipeParamsV220, pipe: str, name: str) -> tuple:
    """Check a Fixpipe's operands, sizes and conversion; returns (mSize, nSize, srcStride, the
    GM dtype)."""
    require_pipe(pipe, name, " (coupled AI core: move L0C -> UB with DataCopy(ub, l0c, DataCopyParams, "
                         "DataCopyEnhancedParams), then UB -> GM with DataCopy / DataCopyPad)")
    if isinstance(dst, LocalTensor):
        raise _fault(pipe, f"{name}: L0C -> L1 is not modelled; the destination must be a GlobalTensor")
    local_operand(src, ("L0C",), pipe, name, "source (CO1)")
    if src.dtype not in (float32, int32):
        raise _fault(pipe, f"{name}: the L0C source holds float or int32, not {dtype_name(src.dtype)}")
    if params.ndNum != 1 or params.isChannelSplit:
        raise _fault(pipe, f"{name}: ndNum > 1 and channel split are not modelled")
    m = param_in_range(params.mSize, 1, 65535, pipe, name, "mSize")
    n = param_in_range(params.nSize, 1, 4095, pipe, name, "nSize")
    ss = param_in_range(params.srcStride, m, 65535, pipe, name, "srcStride (>= mSize)")
    if not isinstance(dst, GlobalTensor) or dst.ptr is None:
        raise _fault(pipe, f"{name}: the destination must be a GlobalTensor with SetGlobalBuffer done")
    out = dst.dtype
    if params.quantPre is not None:
        want = _QUANT_OUT[params.quantPre] or src.dtype
        if want != out:
            raise _fault(pipe, f"{name}: quantPre {params.quantPre.name} writes {dtype_name(want)} "
                         f"but the GM tensor is {dtype_name(out)}")
    ok = (half, bfloat16, float32) if src.dtype == float32 else (int32,)
    if out not in ok:
        raise _fault(pipe, f"{name}: cannot convert {dtype_name(src.dtype)} in L0C to {dtype_name(out)}")
    return m, n, ss, out


def _fixpipe_gm_rows(dst: GlobalTensor, config: FixpipeConfig, m: int, n: int, ds: int, osz: int,
                     pipe: str, name: str) -> tuple:
    """Check and lay out a Fixpipe's GM writes: m rows of n (CFG_ROW_MAJOR) or ceil(n/16) NZ
    strips of m rows (CFG_NZ), dstStride apart. Returns (GM address, bytes spanned, the GM
    ranges, bytes moved in whole 32-B bursts)."""
    if config is CFG_ROW_MAJOR:
        if ds < n:
            raise _fault(pipe, f"{name}: dstStride {ds} is less than nSize {n} (rows would overlap)")
        hi = ((m - 1) * ds + n) * osz
        addr = gm_check(dst, 0, hi, pipe, name)
        row = n * osz
        gm = ((addr, m * row),) if ds == n else Rows(None, addr, row, ds * osz, m)
        moved = m * align_up(row, BLOCK_BYTES) if ds != n else align_up(m * row, BLOCK_BYTES)
    else:
        if ds < m:
            raise _fault(pipe, f"{name}: dstStride {ds} rows is less than mSize {m} (strips would overlap)")
        n1 = ceil_div(n, 16)
        hi = ((n1 - 1) * ds + m) * 16 * osz
        addr = gm_check(dst, 0, hi, pipe, name)
        strip = m * 16 * osz
        gm = Rows(None, addr, strip, ds * 16 * osz, n1)
        moved = n1 * align_up(strip, BLOCK_BYTES)
    return addr, hi, gm, moved


def _fixpipe_effect(ctx, src: LocalTensor, addr: int, hi: int, m: int, n: int, ss: int, ds: int, out,
                    relu: bool, atomic, config: FixpipeConfig):
    """The functional effect of a Fixpipe: L0C's NZ strips read as one (m, n) view, ReLU,
    converted, then stored (or atomically added) into GM as rows or NZ strips."""
    device, core, so = ctx.device, ctx.core, src.offset
    isz, osz = src.dtype.itemsize, out.itemsize
    n1 = ceil_div(n, 16)
    row_src = 16 * isz

    def put(view, v):                       # into a strided GM view: store, or add (atomic)
        if atomic is not None:
            view += v
        else:
            view[...] = v

    def fn():
        g = device.memory.bytes_at(addr, hi)
        if g is None:
            return
        cv = core.buffers["L0C"][so:so + ((n1 - 1) * ss + m) * row_src].view(src.dtype)
        # NZ strips of 16 columns, ss rows apart, read as one (m, n1, 16) view
        vals = as_strided(cv, (m, n1, 16), (16 * isz, ss * 16 * isz, isz)).reshape(m, n1 * 16)[:, :n]
        if relu:
            vals = np.maximum(vals, 0)
        vals = vals.astype(out)
        gv = g.view(out)
        if config is CFG_ROW_MAJOR:         # m rows of n, ds apart
            put(as_strided(gv, (m, n), (ds * osz, osz)), vals)
        else:                               # NZ strips of 16 columns, ds rows apart
            strips = as_strided(gv, (m, n1, 16), (16 * osz, ds * 16 * osz, osz))
            w = n // 16
            if w:
                put(strips[:, :w], vals[:, :w * 16].reshape(m, w, 16))
            if n % 16:
                put(strips[:, w, :n % 16], vals[:, w * 16:])
    return fn


def _l0c_to_ub(dst: LocalTensor, src: LocalTensor, p, enh: DataCopyEnhancedParams) -> None:
    """CO1 (L0C) -> CO2 (UB) in whole 16 x 16 fractals (BLOCK_MODE_MATRIX): blockCount runs of
    blockLen fractals, srcStride / dstStride fractals skipped between runs. The NZ layout is
    kept; DEQF16 converts fp32 to half. NZ -> ND is then a strided UB -> GM DataCopy."""
    ctx = current_context()
    pipe, name = "PIPE_V", "DataCopy(L0C->UB)"
    require_pipe(pipe, name)
    local_operand(src, ("L0C",), pipe, name, "source (CO1)")
    local_operand(dst, ("UB",), pipe, name, "destination (CO2)")
    if enh.blockMode is not BlockMode.BLOCK_MODE_MATRIX:
        raise _fault(pipe, f"{name}: only BLOCK_MODE_MATRIX (whole 16x16 fractals) is modelled")
    if src.dtype != float32:
        raise _fault(pipe, f"{name}: the L0C source must be float, not {dtype_name(src.dtype)}")
    want = half if enh.deqScale is DeqScale.DEQF16 else float32
    if dst.dtype != want:
        raise _fault(pipe, f"{name}: deqScale {enh.deqScale.name} writes {dtype_name(want)}, but the "
                     f"destination is {dtype_name(dst.dtype)}")
    cnt = param_in_range(p.blockCount, 1, 4095, pipe, name, "blockCount")
    blen = param_in_range(p.blockLen, 1, 65535, pipe, name, "blockLen")
    sfr, dfr = 256 * src.dtype.itemsize, 256 * dst.dtype.itemsize
    runs = [(src.offset + i * (blen + int(p.srcStride)) * sfr, dst.offset + i * (blen + int(p.dstStride)) * dfr)
            for i in range(cnt)]
    local_extent(src, runs[-1][0] + blen * sfr, pipe, name, "source (CO1)")
    local_extent(dst, runs[-1][1] + blen * dfr, pipe, name, "destination (CO2)")
    total = cnt * blen * sfr
    cycles = ctx.profile.path("L0C_UB").cycles(total)
    reads = merge_spans(("L0C", s, s + blen * sfr) for s, _ in runs)
    writes = merge_spans(("UB", d, d + blen * dfr) for _, d in runs)
    if ctx.functional:
        core, relu, out = ctx.core, bool(enh.isRelu), dst.dtype

        def fn():
            for s, d in runs:
                v = core.buffers["L0C"][s:s + blen * sfr].view(float32)
                if relu:
                    v = np.maximum(v, 0)
                core.buffers["UB"][d:d + blen * dfr].view(out)[...] = v.astype(out)
    else:
        fn = None
    ctx.emit(Instr(pipe, name, COMPUTE, cycles, path="L0C_UB", nbytes=total, reads=reads,
                   writes=writes, fn=fn, operands=(dst, src, f"{cnt} x {blen} fractals", enh.deqScale.name)))
