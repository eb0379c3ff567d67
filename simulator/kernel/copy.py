"""Data movement: DataCopy and DataCopyPad between GM and the on-chip buffers (MTE2 / MTE3 /
MTE1), with GM bounds, buffer bounds and alignment checked where the copy is written."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..program import COMPUTE, GM_XFER, Instr, Rows, Text
from ..recorder import current_context
from ..arith import align_up
from .base import GlobalTensor, LocalTensor, _fault
from .operands import param_in_range

# DataCopyExtParams' ranges, as the hardware takes them (Ascend C, asc-devkit
# kernel_struct_data_copy.h and the DataCopyPad page): blockCount at most 4095, strides 32 bits.
# The API does not split a value past them: a kernel must issue several copies. Not checked yet:
# DataCopyParams' 16-bit strides (docs/CONVOLUTION.md, "Known limitations": the tall maps' C1
# planes lie further apart than they reach).
BLOCK_COUNT_MAX = 4095
STRIDE_MAX = (1 << 32) - 1


@dataclass
class DataCopyParams:
    """Strided copy, in 32-byte blocks: blockCount blocks of blockLen units, with gaps srcStride /
    dstStride units between blocks."""
    blockCount: int = 1
    blockLen: int = 0
    srcStride: int = 0
    dstStride: int = 0


@dataclass
class DataCopyExtParams:
    """DataCopyPad's parameters: blockLen in bytes; the GM-side stride in bytes, the UB-side
    stride in 32-byte blocks (each UB block starts 32-byte aligned)."""
    blockCount: int = 1
    blockLen: int = 0
    srcStride: int = 0
    dstStride: int = 0
    rsv: int = 0


@dataclass
class DataCopyPadExtParams:
    isPad: bool = False
    leftPadding: int = 0
    rightPadding: int = 0
    paddingValue: float = 0


def DataCopy(dst, src, count_or_params, enhancedParams=None) -> None:
    """Contiguous copy of `count` elements (a whole number of 32-byte blocks), or a strided copy
    with DataCopyParams. The cube path's forms live with the Cube instructions: GM -> L1 with
    Nd2NzParams (ND -> NZ, cube_load.py) and L0C -> UB with DataCopyEnhancedParams (coupled
    chips, fixpipe.py)."""
    if enhancedParams is not None or type(count_or_params).__name__ == "Nd2NzParams":
        from .fixpipe import data_copy_enhanced
        return data_copy_enhanced(dst, src, count_or_params, enhancedParams)
    isz = (src.dtype or dst.dtype).itemsize
    if isinstance(count_or_params, DataCopyParams):
        p = count_or_params
        blen = p.blockLen * 32
        blocks = RegularBlocks(p.blockCount, blen + p.srcStride * 32, blen + p.dstStride * 32, blen)
    else:
        n = int(count_or_params) * isz
        if n % 32:
            raise _fault(_copy_pipe(src, dst),
                         f"DataCopy of {count_or_params} elements = {n} B is not a whole number of "
                         f"32-byte blocks; use DataCopyPad for the tail")
        blocks = RegularBlocks(1, n, n, n)
    if not blocks or blocks[0][2] <= 0:
        raise _fault(None, "DataCopy of nothing")
    _copy(dst, src, blocks, "DataCopy")


def DataCopyPad(dst, src, params: DataCopyExtParams, padParams: DataCopyPadExtParams | None = None) -> None:
    """Copy blockCount blocks of blockLen bytes between GM and UB; UB blocks start 32-byte aligned
    (the hardware pads each to 32 bytes)."""
    p = params
    if p.blockCount <= 0 or p.blockLen <= 0:
        raise _fault(None, f"DataCopyPad with blockCount={p.blockCount}, blockLen={p.blockLen}")
    if p.blockCount > BLOCK_COUNT_MAX or not 0 <= p.srcStride <= STRIDE_MAX or not 0 <= p.dstStride <= STRIDE_MAX:
        pipe = _copy_pipe(src, dst)
        param_in_range(p.blockCount, 1, BLOCK_COUNT_MAX, pipe, "DataCopyPad", "blockCount")
        param_in_range(p.srcStride, 0, STRIDE_MAX, pipe, "DataCopyPad", "srcStride")
        param_in_range(p.dstStride, 0, STRIDE_MAX, pipe, "DataCopyPad", "dstStride")
    row = align_up(p.blockLen, 32)
    if _buffer_of(src) == "GM":      # GM -> UB: srcStride bytes in GM, dstStride 32-B blocks in UB
        blocks = RegularBlocks(p.blockCount, p.blockLen + p.srcStride, row + p.dstStride * 32, p.blockLen)
    else:                            # UB -> GM: srcStride 32-B blocks in UB, dstStride bytes in GM
        blocks = RegularBlocks(p.blockCount, row + p.srcStride * 32, p.blockLen + p.dstStride, p.blockLen)
    _copy(dst, src, blocks, "DataCopyPad")


def SetAtomicAdd(dtype) -> None:
    """Later copies into GM add (in dtype) to what is there instead of overwriting it, as the
    hardware's atomic add in L2 does. Same cost as a plain store [ASSUMPTION]."""
    current_context().atomic = np.dtype(dtype)


def SetAtomicNone() -> None:
    current_context().atomic = None


def _copy_pipe(src, dst) -> str | None:
    """The pipe a copy between these tensors' buffers runs on (None: no such copy), for a fault's message."""
    return _COPY_ROUTES.get((_buffer_of(src), _buffer_of(dst)), (None,))[0]


def _copy(dst, src, blocks: RegularBlocks, name: str) -> None:
    """Emit one copy instruction moving `blocks` (block i: i * src_pitch bytes past the source
    tensor's start to i * dst_pitch past the destination's, n bytes each)."""
    ctx = current_context()
    sbuf, dbuf = _buffer_of(src), _buffer_of(dst)
    route = _COPY_ROUTES.get((sbuf, dbuf))
    if route is None:
        raise _fault(None, f"{name}: no copy path {sbuf} -> {dbuf} (use LoadData / Fixpipe for the cube path)")
    pipe, path = route
    if pipe not in ctx.core.kind.pipes:
        raise _fault(pipe, f"{name}: {sbuf} -> {dbuf} needs {pipe}, which core kind {ctx.core.kind_name} lacks")
    reads, writes = (), ()
    gm_src = gm_dst = None
    c, n = blocks.count, blocks.n
    total, moved = c * n, c * align_up(n, 32)   # every burst moves whole 32-byte blocks
    if sbuf == "GM":
        gm_src = _gm_rows(src, blocks.src_pitch, n, c, pipe, name)
    else:
        reads = _local_rows(src, blocks.src_pitch, n, c, pipe, name, "source")
    if dbuf == "GM":
        gm_dst = _gm_rows(dst, blocks.dst_pitch, n, c, pipe, name)
    else:
        writes = _local_rows(dst, blocks.dst_pitch, n, c, pipe, name, "destination")
    if path is None:
        cycles = ctx.profile.vector_cycles("copy", "FLOAT", moved)
        kind, chan = COMPUTE, 0
    else:
        cycles = ctx.profile.path(path).cycles(moved)
        kind = GM_XFER if "GM" in (sbuf, dbuf) else COMPUTE
        chan = moved if kind == GM_XFER else 0
    atomic = ctx.atomic if dbuf == "GM" else None
    if atomic is not None:
        name += "+AtomicAdd"
    fn = _copy_effect(ctx, dst, src, blocks, gm_dst, gm_src, atomic) if ctx.functional else None
    gm_ranges = gm_dst if gm_dst is not None else gm_src or ()
    if type(gm_ranges) is list:
        gm_ranges = tuple(gm_ranges)
    instr = Instr(pipe, name, kind, cycles, path=path or "UB_UB", nbytes=total, chan_bytes=chan,
                  gm=gm_ranges, gm_write=gm_dst is not None,
                  reads=reads, writes=writes, fn=fn,
                  operands=(dst, src, Text("{} x {} B", len(blocks), blocks[0][2] if blocks else 0)))
    instr.l2_bypass = (dst if dbuf == "GM" else src).bypasses_l2 if kind == GM_XFER else False
    ctx.emit(instr)


def _copy_effect(ctx, dst, src, blocks: RegularBlocks, gm_dst, gm_src, atomic):
    """The functional effect of a copy: block by block from GM (absolute ranges gm_src) or the
    source buffer to GM (gm_dst) or the destination buffer; an atomic copy adds in `atomic`."""
    device, core = ctx.device, ctx.core
    sbuf, dbuf = _buffer_of(src), _buffer_of(dst)

    def fn():
        for i, (so, do, n) in enumerate(blocks):
            if gm_src is not None:
                data = device.memory.bytes_at(gm_src[i][0], n)
            else:
                data = core.buffers[sbuf][src.offset + so:src.offset + so + n]
            if gm_dst is not None:
                out = device.memory.bytes_at(gm_dst[i][0], n)
            else:
                out = core.buffers[dbuf][dst.offset + do:dst.offset + do + n]
            if out is None or data is None:
                continue
            if atomic is not None:
                acc = out.view(atomic)
                acc += data.view(atomic)
            else:
                out[...] = data
    return fn


class RegularBlocks:
    """A copy's blocks when they are regular: block i is (i * src_pitch, i * dst_pitch, n), as a
    list of DataCopyParams' or DataCopyExtParams' blocks would hold them."""
    __slots__ = ("count", "src_pitch", "dst_pitch", "n")

    def __init__(self, count: int, src_pitch: int, dst_pitch: int, n: int):
        self.count, self.src_pitch, self.dst_pitch, self.n = count, src_pitch, dst_pitch, n

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> tuple[int, int, int]:
        if i < 0:
            i += self.count
        if not 0 <= i < self.count:
            raise IndexError(i)
        return (i * self.src_pitch, i * self.dst_pitch, self.n)

    def __iter__(self):
        sp, dp, n = self.src_pitch, self.dst_pitch, self.n
        return ((i * sp, i * dp, n) for i in range(self.count))


# (source buffer, destination buffer) -> (pipe, profile path)
_COPY_ROUTES = {("GM", "UB"): ("PIPE_MTE2", "GM_UB"), ("GM", "L1"): ("PIPE_MTE2", "GM_L1"),
                ("UB", "GM"): ("PIPE_MTE3", "UB_GM"), ("L1", "UB"): ("PIPE_MTE1", "L1_UB"),
                ("UB", "L1"): ("PIPE_MTE3", "UB_L1"), ("L0C", "UB"): ("PIPE_V", "L0C_UB"),
                ("UB", "UB"): ("PIPE_V", None)}


def _buffer_of(t) -> str:
    return "GM" if isinstance(t, GlobalTensor) else t.buffer


def _gm_blocks(g: GlobalTensor, blocks: list[tuple[int, int]], pipe: str, name: str):
    """Check GM blocks (byte offset from g's pointer, byte length) against the extent the kernel
    was given; return absolute address ranges."""
    if g.ptr is None:
        raise _fault(pipe, f"{name}: GlobalTensor used before SetGlobalBuffer")
    out = []
    for off, n in blocks:
        lo = g.ptr.addr + off
        hi = lo + n
        if lo < g.ptr.base or hi > g.ptr.limit:
            raise _fault(pipe, f"{name}: touches {g.ptr.name}[{lo - g.ptr.base}:{hi - g.ptr.base}] "
                         f"(bytes) outside its extent [0:{g.ptr.limit - g.ptr.base}]")
        out.append((lo, n))
    return out


def _local_check(t: LocalTensor, lo: int, hi: int, pipe: str, name: str) -> None:
    ctx = current_context()
    cap = ctx.core.kind.buffers.get(t.buffer)
    if cap is None:
        raise _fault(pipe, f"{name}: this core kind has no {t.buffer}")
    if lo < 0 or hi > cap:
        raise _fault(pipe, f"{name}: {t.buffer}[{lo}:{hi}] overflows {t.buffer} ({cap} B)")


def _local_spans(t: LocalTensor, blocks, pipe: str, name: str, role: str) -> list[tuple[str, int, int]]:
    """Check a local tensor's blocks [(byte offset, bytes)] against its buffer and alignment;
    return them as sanitizer spans."""
    ctx = current_context()
    buf = t.buffer
    align = ctx.profile.alignment[buf]
    cap = ctx.core.kind.buffers.get(buf)
    base = t.offset
    end = base + t.size * t.dtype.itemsize
    spans = []
    for off, n in blocks:
        lo = base + off
        hi = lo + n
        if cap is None or lo < 0 or hi > cap:
            _local_check(t, lo, hi, pipe, name)          # raises, naming the buffer
        if hi > end:
            # inside the buffer but past the tensor: it would overwrite a neighbour's data
            raise _fault(pipe, f"{name}: {role} {buf}[{lo}:{hi}] goes beyond its tensor {t!r} "
                         f"(ends at {end})")
        if lo % align:
            raise _fault(pipe, f"{name}: {role} {buf} address {lo} not {align}-byte aligned")
        spans.append((buf, lo, hi))
    return spans


def _gm_rows(g: GlobalTensor, pitch: int, n: int, count: int, pipe: str, name: str):
    """_gm_blocks for regular blocks (rows ascend, so the first and last decide); the per-block
    check runs only to name the first block out of bounds."""
    if g.ptr is not None and pitch >= 0:
        lo, hi = g.ptr.addr, g.ptr.addr + (count - 1) * pitch + n
        if lo >= g.ptr.base and hi <= g.ptr.limit:
            return Rows(None, g.ptr.addr, n, pitch, count)
    return _gm_blocks(g, [(i * pitch, n) for i in range(count)], pipe, name)


def _local_rows(t: LocalTensor, pitch: int, n: int, count: int, pipe: str, name: str, role: str):
    """_local_spans for regular blocks: buffer, tensor end and alignment hold for every row if
    they hold for the first and last and for the pitch; otherwise the per-block check names the
    first row that fails."""
    ctx = current_context()
    buf = t.buffer
    align = ctx.profile.alignment[buf]
    cap = ctx.core.kind.buffers.get(buf)
    lo = t.offset
    last = lo + (count - 1) * pitch + n
    if (cap is not None and pitch >= 0 and lo >= 0 and last <= cap
            and last <= t.offset + t.size * t.dtype.itemsize and not lo % align
            and (count == 1 or not pitch % align)):
        return Rows(buf, lo, n, pitch, count)
    return tuple(_local_spans(t, [(i * pitch, n) for i in range(count)], pipe, name, role))


__all__ = [
    "DataCopyParams",
    "DataCopyExtParams",
    "DataCopyPadExtParams",
    "SetAtomicAdd",
    "SetAtomicNone",
    "DataCopy",
    "DataCopyPad",
]
