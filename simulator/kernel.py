"""The micro-program language: Ascend C's vocabulary, in Python.

A kernel body is a plain Python function that the machine runs once per block. Inside it, the
names below issue instructions to the block's core, exactly where Ascend C's would:

    pipe = TPipe()
    inQ = TQue(TPosition.VECIN, BUFFER_NUM)
    pipe.InitBuffer(inQ, BUFFER_NUM, tile * 4)
    xGm = GlobalTensor(np.float32); xGm.SetGlobalBuffer(x + offset, length)
    for i in range(tiles):
        t = inQ.AllocTensor(np.float32); DataCopy(t, xGm[i * tile], tile); inQ.EnQue(t)
        t = inQ.DeQue(np.float32); Exp(t, t, tile); ...

Queues imply their synchronisation (EnQue sets, DeQue waits, AllocTensor waits, FreeTensor sets);
SetFlag / WaitFlag / PipeBarrier are there for those who want them. Every capacity, alignment and
bound is checked where the instruction is written, and the error names the core, the pipe and the
instruction. See docs/KERNELS.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import ml_dtypes
import numpy as np

from .enums import KernelError, dtype_name
from .machine import (BARRIER, COMPUTE, GM_XFER, SET, WAIT, Instr, align_up, ceil_div,
                      current_context)

BUFFER_NUM = 2
half = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
int32 = np.dtype(np.int32)


class Pipe(str, Enum):
    PIPE_S = "PIPE_S"
    PIPE_V = "PIPE_V"
    PIPE_M = "PIPE_M"
    PIPE_MTE1 = "PIPE_MTE1"
    PIPE_MTE2 = "PIPE_MTE2"
    PIPE_MTE3 = "PIPE_MTE3"
    PIPE_FIX = "PIPE_FIX"
    PIPE_ALL = "PIPE_ALL"


PIPE_S, PIPE_V, PIPE_M = Pipe.PIPE_S, Pipe.PIPE_V, Pipe.PIPE_M
PIPE_MTE1, PIPE_MTE2, PIPE_MTE3 = Pipe.PIPE_MTE1, Pipe.PIPE_MTE2, Pipe.PIPE_MTE3
PIPE_FIX, PIPE_ALL = Pipe.PIPE_FIX, Pipe.PIPE_ALL

_SHORT = {"S": "PIPE_S", "V": "PIPE_V", "M": "PIPE_M", "MTE1": "PIPE_MTE1", "MTE2": "PIPE_MTE2",
          "MTE3": "PIPE_MTE3", "FIX": "PIPE_FIX"}


class HardEvent(Enum):
    """A (source pipe, destination pipe) pair, named as Ascend C names them: MTE2_V means the
    vector pipe waits for MTE2."""
    MTE2_V = ("PIPE_MTE2", "PIPE_V")
    V_MTE2 = ("PIPE_V", "PIPE_MTE2")
    V_MTE3 = ("PIPE_V", "PIPE_MTE3")
    MTE3_V = ("PIPE_MTE3", "PIPE_V")
    MTE2_MTE3 = ("PIPE_MTE2", "PIPE_MTE3")
    MTE3_MTE2 = ("PIPE_MTE3", "PIPE_MTE2")
    MTE2_MTE1 = ("PIPE_MTE2", "PIPE_MTE1")
    MTE1_MTE2 = ("PIPE_MTE1", "PIPE_MTE2")
    MTE1_M = ("PIPE_MTE1", "PIPE_M")
    M_MTE1 = ("PIPE_M", "PIPE_MTE1")
    M_FIX = ("PIPE_M", "PIPE_FIX")
    FIX_M = ("PIPE_FIX", "PIPE_M")
    M_V = ("PIPE_M", "PIPE_V")
    V_M = ("PIPE_V", "PIPE_M")
    MTE1_V = ("PIPE_MTE1", "PIPE_V")
    V_MTE1 = ("PIPE_V", "PIPE_MTE1")
    FIX_MTE2 = ("PIPE_FIX", "PIPE_MTE2")
    MTE2_FIX = ("PIPE_MTE2", "PIPE_FIX")
    S_V = ("PIPE_S", "PIPE_V")
    V_S = ("PIPE_V", "PIPE_S")
    S_MTE2 = ("PIPE_S", "PIPE_MTE2")
    MTE2_S = ("PIPE_MTE2", "PIPE_S")
    S_MTE3 = ("PIPE_S", "PIPE_MTE3")
    MTE3_S = ("PIPE_MTE3", "PIPE_S")

    @property
    def src(self) -> str:
        return self.value[0]

    @property
    def dst(self) -> str:
        return self.value[1]


class TPosition(Enum):
    GM = "GM"
    VECIN = "VECIN"
    VECOUT = "VECOUT"
    VECCALC = "VECCALC"
    A1 = "A1"
    B1 = "B1"
    A2 = "A2"
    B2 = "B2"
    CO1 = "CO1"
    CO2 = "CO2"


_BUFFER_OF = {TPosition.VECIN: "UB", TPosition.VECOUT: "UB", TPosition.VECCALC: "UB",
              TPosition.A1: "L1", TPosition.B1: "L1", TPosition.A2: "L0A", TPosition.B2: "L0B",
              TPosition.CO1: "L0C", TPosition.CO2: "UB"}
# (producer pipe, consumer pipe) that a queue at this position synchronises
_QUEUE_PIPES = {TPosition.VECIN: ("PIPE_MTE2", "PIPE_V"), TPosition.VECOUT: ("PIPE_V", "PIPE_MTE3"),
                TPosition.A1: ("PIPE_MTE2", "PIPE_MTE1"), TPosition.B1: ("PIPE_MTE2", "PIPE_MTE1"),
                TPosition.A2: ("PIPE_MTE1", "PIPE_M"), TPosition.B2: ("PIPE_MTE1", "PIPE_M"),
                TPosition.CO2: ("PIPE_V", "PIPE_MTE3")}


class RoundMode(Enum):
    CAST_NONE = "none"      # float narrowing: round to nearest even
    CAST_RINT = "rint"
    CAST_FLOOR = "floor"
    CAST_CEIL = "ceil"
    CAST_ROUND = "round"    # half away from zero
    CAST_TRUNC = "trunc"


# ---------------------------------------------------------------------------------------------
# tensors
# ---------------------------------------------------------------------------------------------
class LocalTensor:
    """A typed window [offset, offset + size*itemsize) of one on-chip buffer (UB, L1, L0A/B/C)."""
    __slots__ = ("buffer", "offset", "dtype", "size", "position")

    def __init__(self, buffer: str, offset: int, dtype, size: int, position: TPosition):
        self.buffer, self.offset, self.dtype = buffer, offset, np.dtype(dtype)
        self.size, self.position = size, position

    def __getitem__(self, i: int) -> "LocalTensor":
        if not isinstance(i, (int, np.integer)) or i < 0 or i > self.size:
            raise _fault(None, f"LocalTensor index {i} outside 0..{self.size}")
        return LocalTensor(self.buffer, self.offset + int(i) * self.dtype.itemsize, self.dtype,
                           self.size - int(i), self.position)

    def ReinterpretCast(self, dtype) -> "LocalTensor":
        dtype = np.dtype(dtype)
        return LocalTensor(self.buffer, self.offset, dtype,
                           self.size * self.dtype.itemsize // dtype.itemsize, self.position)

    def GetSize(self) -> int:
        return self.size

    def span(self, count: int) -> tuple[str, int, int]:
        return (self.buffer, self.offset, self.offset + count * self.dtype.itemsize)

    def view(self, ctx, count: int) -> np.ndarray:
        raw = ctx.core.buffers[self.buffer]
        return raw[self.offset:self.offset + count * self.dtype.itemsize].view(self.dtype)

    def __repr__(self) -> str:
        return f"{self.buffer}[{self.offset}:+{self.size}x{dtype_name(self.dtype)}]"


class GM_ADDR:
    """A device pointer as a kernel receives it: the address of element 0, the element dtype, and
    the extent [base, limit) the kernel may touch (its tensor or workspace). `x + n` advances n
    elements, as `(__gm__ T*)x + n` does in Ascend C."""
    __slots__ = ("addr", "base", "limit", "dtype", "name")

    def __init__(self, addr: int, nbytes: int, dtype, name: str, base: int | None = None,
                 limit: int | None = None):
        self.addr = addr
        self.base = addr if base is None else base
        self.limit = addr + nbytes if limit is None else limit
        self.dtype = np.dtype(dtype)
        self.name = name

    def __add__(self, n: int) -> "GM_ADDR":
        return GM_ADDR(self.addr + int(n) * self.dtype.itemsize, 0, self.dtype, self.name,
                       self.base, self.limit)

    def cast(self, dtype) -> "GM_ADDR":
        return GM_ADDR(self.addr, 0, dtype, self.name, self.base, self.limit)

    def __repr__(self) -> str:
        return f"{self.name}@+{self.addr - self.base}"


class GlobalTensor:
    """A typed view of GM, as Ascend C's GlobalTensor<T>."""
    __slots__ = ("dtype", "ptr", "size")

    def __init__(self, dtype=None):
        self.dtype = np.dtype(dtype) if dtype is not None else None
        self.ptr: GM_ADDR | None = None
        self.size = 0

    def SetGlobalBuffer(self, ptr: GM_ADDR, bufferSize: int | None = None) -> None:
        if not isinstance(ptr, GM_ADDR):
            raise _fault(None, f"SetGlobalBuffer expects a GM_ADDR, got {type(ptr).__name__}")
        if self.dtype is None:
            self.dtype = ptr.dtype
        elif ptr.dtype != self.dtype:
            ptr = ptr.cast(self.dtype)
        room = (ptr.limit - ptr.addr) // self.dtype.itemsize
        self.ptr = ptr
        self.size = room if bufferSize is None else int(bufferSize)

    def __getitem__(self, i: int) -> "GlobalTensor":
        g = GlobalTensor(self.dtype)
        g.ptr = self.ptr + int(i)
        g.size = self.size - int(i)
        return g

    def GetSize(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"{self.ptr!r}:{dtype_name(self.dtype)}"


# ---------------------------------------------------------------------------------------------
# TPipe, TQue, TBuf
# ---------------------------------------------------------------------------------------------
class TPipe:
    """Owns a block's on-chip buffer space and event ids. One per block, as in Ascend C."""

    def __init__(self):
        ctx = current_context()
        if ctx.pipe_alloc is not None:
            raise _fault(PIPE_S, "TPipe created twice in one block")
        ctx.pipe_alloc = self
        self._ctx = ctx
        self._cursor = {b: 0 for b in ctx.core.kind.buffers}
        self._next_event: dict[tuple[str, str], int] = {}
        self._queues: list[TQue] = []

    def InitBuffer(self, que, num: int, length: int | None = None) -> None:
        """Reserve num buffers of length bytes for a TQue, or (TBuf) one buffer of num bytes."""
        if isinstance(que, TBuf):
            num, length = 1, num
        buf = _BUFFER_OF[que.position]
        if buf == "UB" and que.position is TPosition.CO2 and "UB" not in self._cursor:
            raise _fault(PIPE_S, "CO2 is GM on this core kind; no UB to allocate")
        if buf not in self._cursor:
            raise _fault(PIPE_S, f"this core kind ({self._ctx.core.kind_name}) has no {buf}")
        align = self._ctx.profile.alignment[buf]
        size = align_up(int(length), align)
        start = align_up(self._cursor[buf], align)
        end = start + num * size
        cap = self._ctx.core.kind.buffers[buf]
        if end > cap:
            raise _fault(PIPE_S, f"InitBuffer({que.position.name}, {num} x {length} B) needs "
                         f"{buf}[{start}:{end}] but {buf} holds {cap} B")
        self._cursor[buf] = end
        que._bind(self, buf, [start + i * size for i in range(num)], size)

    def AllocEventID(self, event: HardEvent) -> int:
        key = event.value
        n = self._next_event.get(key, 0)
        limit = self._ctx.profile.sync.event_ids
        if n >= limit:
            raise _fault(PIPE_S, f"out of event ids for {event.name}: this chip has {limit} "
                         f"(0-{limit - 1}) per pipe pair")
        self._next_event[key] = n + 1
        return n

    def Destroy(self) -> None:
        """End of block: consume flags that FreeTensor set and nobody waited for, as TPipe's
        destructor does in Ascend C."""
        for q in self._queues:
            q._drain()
        self._queues = []

    def Reset(self) -> None:
        self.Destroy()


class TQue:
    """A queue of `depth` buffers at a position; EnQue/DeQue/AllocTensor/FreeTensor imply flags."""

    def __init__(self, position: TPosition, depth: int = 1):
        self.position, self.depth = position, depth
        self._pipe: TPipe | None = None

    def _bind(self, pipe: TPipe, buffer: str, offsets: list[int], size: int) -> None:
        if self.position not in _QUEUE_PIPES and not (self.position is TPosition.CO1):
            raise _fault(PIPE_S, f"a TQue cannot sit at {self.position.name}; use TBuf")
        self._pipe, self.buffer, self.offsets, self.slot_bytes = pipe, buffer, offsets, size
        if self.position is TPosition.CO1:
            cons = "PIPE_FIX" if "PIPE_FIX" in pipe._ctx.core.kind.pipes else "PIPE_V"
            self.producer, self.consumer = "PIPE_M", cons
        else:
            self.producer, self.consumer = _QUEUE_PIPES[self.position]
        fwd = HardEvent((self.producer, self.consumer))
        bwd = HardEvent((self.consumer, self.producer))
        self.fwd_ids = [pipe.AllocEventID(fwd) for _ in offsets]
        self.bwd_ids = [pipe.AllocEventID(bwd) for _ in offsets]
        self.state = ["free"] * len(offsets)     # free -> allocated -> queued -> dequeued -> free
        self.pending_free = [False] * len(offsets)
        self.next_slot = 0
        self.fifo: list[int] = []
        pipe._queues.append(self)

    def _check(self):
        if self._pipe is None:
            raise _fault(PIPE_S, f"TQue at {self.position.name} used before TPipe.InitBuffer")

    def AllocTensor(self, dtype) -> LocalTensor:
        self._check()
        n = len(self.offsets)
        for k in range(n):
            slot = (self.next_slot + k) % n
            if self.state[slot] == "free":
                break
        else:
            raise _fault(self.producer, f"AllocTensor on {self.position.name} queue: all {n} "
                         f"buffers are in use (FreeTensor one first); this would hang on hardware")
        self.next_slot = (slot + 1) % n
        if self.pending_free[slot]:
            _flag(WAIT, self.consumer, self.producer, self.bwd_ids[slot], "WaitFlag(AllocTensor)")
            self.pending_free[slot] = False
        self.state[slot] = "allocated"
        dtype = np.dtype(dtype)
        return LocalTensor(self.buffer, self.offsets[slot], dtype, self.slot_bytes // dtype.itemsize,
                           self.position)

    def _slot_of(self, t: LocalTensor) -> int:
        if t.buffer == self.buffer and t.offset in self.offsets:
            return self.offsets.index(t.offset)
        raise _fault(None, f"tensor {t!r} does not belong to this {self.position.name} queue")

    def EnQue(self, t: LocalTensor) -> None:
        self._check()
        slot = self._slot_of(t)
        if self.state[slot] != "allocated":
            raise _fault(self.producer, f"EnQue of a buffer that is {self.state[slot]}, not allocated")
        _flag(SET, self.producer, self.consumer, self.fwd_ids[slot], "SetFlag(EnQue)")
        self.state[slot] = "queued"
        self.fifo.append(slot)

    def DeQue(self, dtype=None) -> LocalTensor:
        self._check()
        if not self.fifo:
            raise _fault(self.consumer, f"DeQue on an empty {self.position.name} queue: nothing was "
                         f"EnQue'd; this would hang on hardware")
        slot = self.fifo.pop(0)
        _flag(WAIT, self.producer, self.consumer, self.fwd_ids[slot], "WaitFlag(DeQue)")
        self.state[slot] = "dequeued"
        dtype = np.dtype(dtype) if dtype is not None else float32
        return LocalTensor(self.buffer, self.offsets[slot], dtype, self.slot_bytes // dtype.itemsize,
                           self.position)

    def FreeTensor(self, t: LocalTensor) -> None:
        self._check()
        slot = self._slot_of(t)
        if self.state[slot] == "allocated":
            # freed without EnQue/DeQue (the producer side used it alone): no flags needed
            self.state[slot] = "free"
            return
        if self.state[slot] != "dequeued":
            raise _fault(self.consumer, f"FreeTensor of a buffer that is {self.state[slot]}")
        _flag(SET, self.consumer, self.producer, self.bwd_ids[slot], "SetFlag(FreeTensor)")
        self.state[slot] = "free"
        self.pending_free[slot] = True

    def _drain(self) -> None:
        for slot, pending in enumerate(self.pending_free):
            if pending:
                _flag(WAIT, self.consumer, self.producer, self.bwd_ids[slot], "WaitFlag(TPipe.Destroy)")
                self.pending_free[slot] = False


class TBuf:
    """A scratch buffer without synchronisation (VECCALC)."""

    def __init__(self, position: TPosition = TPosition.VECCALC):
        self.position = position
        self._pipe = None

    def _bind(self, pipe: TPipe, buffer: str, offsets: list[int], size: int) -> None:
        self._pipe, self.buffer, self.offset, self.nbytes = pipe, buffer, offsets[0], size

    def Get(self, dtype, count: int | None = None) -> LocalTensor:
        if self._pipe is None:
            raise _fault(PIPE_S, "TBuf used before TPipe.InitBuffer")
        dtype = np.dtype(dtype)
        n = self.nbytes // dtype.itemsize if count is None else int(count)
        if n * dtype.itemsize > self.nbytes:
            raise _fault(PIPE_S, f"TBuf.Get({n} x {dtype_name(dtype)}) exceeds its {self.nbytes} B")
        return LocalTensor(self.buffer, self.offset, dtype, n, self.position)


# ---------------------------------------------------------------------------------------------
# block and sync
# ---------------------------------------------------------------------------------------------
def GetBlockIdx() -> int:
    return current_context().block_idx


def GetBlockNum() -> int:
    return current_context().block_num


def _fault(pipe, reason: str) -> KernelError:
    ctx = current_context()
    pipe = pipe.value if isinstance(pipe, Pipe) else (pipe or "PIPE_S")
    where = f"core {ctx.core.name} (block {ctx.block_idx}), {pipe}, instruction #{len(ctx.program)}"
    return KernelError(f"{where}: {reason}")


def _flag(kind: int, src: str, dst: str, event_id: int, name: str) -> None:
    ctx = current_context()
    limit = ctx.profile.sync.event_ids
    if not 0 <= event_id < limit:
        raise _fault(src if kind == SET else dst,
                     f"{name}: event id {event_id} outside 0..{limit - 1} on this chip")
    pipe = src if kind == SET else dst
    ctx.emit(Instr(pipe, name, kind, flag=(src, dst, event_id),
                   operands=f"{src}->{dst}, id {event_id}"))


def SetFlag(event: HardEvent, eventID: int) -> None:
    _flag(SET, event.src, event.dst, int(eventID), "SetFlag")


def WaitFlag(event: HardEvent, eventID: int) -> None:
    _flag(WAIT, event.src, event.dst, int(eventID), "WaitFlag")


def PipeBarrier(pipe: Pipe) -> None:
    """PIPE_ALL stalls the scalar unit until every pipe drains; a single pipe's barrier orders
    that pipe, which in this model already runs its instructions one at a time."""
    ctx = current_context()
    p = Pipe(pipe)
    if p is PIPE_ALL:
        instr = Instr("PIPE_S", "PipeBarrier(PIPE_ALL)", BARRIER, flag="PIPE_ALL")
    else:
        instr = Instr(p.value, f"PipeBarrier({p.value})", BARRIER)
    ctx.emit(instr)


# ---------------------------------------------------------------------------------------------
# data movement
# ---------------------------------------------------------------------------------------------
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


def _copy(dst, src, blocks: list[tuple[int, int, int]], name: str, pad_unit: int = 0) -> None:
    """Emit one copy instruction moving `blocks` = [(src byte offset, dst byte offset, bytes)]
    relative to the tensors' starts."""
    ctx = current_context()
    sbuf, dbuf = _buffer_of(src), _buffer_of(dst)
    route = _COPY_ROUTES.get((sbuf, dbuf))
    if route is None:
        raise _fault(None, f"{name}: no copy path {sbuf} -> {dbuf} (use LoadData / Fixpipe for the cube path)")
    pipe, path = route
    if pipe not in ctx.core.kind.pipes:
        raise _fault(pipe, f"{name}: {sbuf} -> {dbuf} needs {pipe}, which core kind {ctx.core.kind_name} lacks")
    total = sum(b[2] for b in blocks)
    # every burst moves whole 32-byte blocks
    moved = sum(align_up(b[2], 32) for b in blocks)
    reads, writes = [], []
    gm_src = gm_dst = None
    if sbuf == "GM":
        gm_src = _gm_blocks(src, [(b[0], b[2]) for b in blocks], pipe, name)
    else:
        for so, _, n in blocks:
            lo = src.offset + so
            _local_check(src, lo, lo + n, pipe, name)
            if lo % ctx.profile.alignment[sbuf]:
                raise _fault(pipe, f"{name}: source {sbuf} address {lo} not {ctx.profile.alignment[sbuf]}-byte aligned")
            reads.append((sbuf, lo, lo + n))
    if dbuf == "GM":
        gm_dst = _gm_blocks(dst, [(b[1], b[2]) for b in blocks], pipe, name)
    else:
        for _, do, n in blocks:
            lo = dst.offset + do
            _local_check(dst, lo, lo + n, pipe, name)
            if lo % ctx.profile.alignment[dbuf]:
                raise _fault(pipe, f"{name}: destination {dbuf} address {lo} not {ctx.profile.alignment[dbuf]}-byte aligned")
            writes.append((dbuf, lo, lo + n))
    if path is None:
        cycles = ctx.profile.vector_cycles("copy", "FLOAT", moved)
        kind, chan = COMPUTE, 0
    else:
        cycles = ctx.profile.path(path).cycles(moved)
        kind = GM_XFER if "GM" in (sbuf, dbuf) else COMPUTE
        chan = moved if kind == GM_XFER else 0
    fn = None
    if ctx.functional:
        device, core = ctx.device, ctx.core

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
                if out is not None and data is not None:
                    out[...] = data
    ctx.emit(Instr(pipe, name, kind, cycles, path=path or "UB_UB", nbytes=total, chan_bytes=chan,
                   reads=tuple(reads), writes=tuple(writes), fn=fn,
                   operands=f"{dst!r} <- {src!r}, {len(blocks)} x {blocks[0][2] if blocks else 0} B"))


def DataCopy(dst, src, count_or_params) -> None:
    """Contiguous copy of `count` elements (a whole number of 32-byte blocks), or a strided copy
    with DataCopyParams."""
    isz = (src.dtype or dst.dtype).itemsize
    if isinstance(count_or_params, DataCopyParams):
        p = count_or_params
        blen = p.blockLen * 32
        blocks = [(i * (blen + p.srcStride * 32), i * (blen + p.dstStride * 32), blen)
                  for i in range(p.blockCount)]
    else:
        n = int(count_or_params) * isz
        if n % 32:
            raise _fault(_COPY_ROUTES.get((_buffer_of(src), _buffer_of(dst)), (None,))[0],
                         f"DataCopy of {count_or_params} elements = {n} B is not a whole number of "
                         f"32-byte blocks; use DataCopyPad for the tail")
        blocks = [(0, 0, n)]
    if not blocks or blocks[0][2] <= 0:
        raise _fault(None, "DataCopy of nothing")
    _copy(dst, src, blocks, "DataCopy")


def DataCopyPad(dst, src, params: DataCopyExtParams, padParams: DataCopyPadExtParams | None = None) -> None:
    """Copy blockCount blocks of blockLen bytes between GM and UB; UB blocks start 32-byte aligned
    (the hardware pads each to 32 bytes)."""
    p = params
    if p.blockCount <= 0 or p.blockLen <= 0:
        raise _fault(None, f"DataCopyPad with blockCount={p.blockCount}, blockLen={p.blockLen}")
    row = align_up(p.blockLen, 32)
    if _buffer_of(src) == "GM":      # GM -> UB: srcStride bytes in GM, dstStride 32-B blocks in UB
        blocks = [(i * (p.blockLen + p.srcStride), i * (row + p.dstStride * 32), p.blockLen)
                  for i in range(p.blockCount)]
    else:                            # UB -> GM: srcStride 32-B blocks in UB, dstStride bytes in GM
        blocks = [(i * (row + p.srcStride * 32), i * (p.blockLen + p.dstStride), p.blockLen)
                  for i in range(p.blockCount)]
    _copy(dst, src, blocks, "DataCopyPad")


# ---------------------------------------------------------------------------------------------
# vector instructions
# ---------------------------------------------------------------------------------------------
def _vec(op_class: str, name: str, dst: LocalTensor, srcs: tuple, count: int | None, compute,
         cost_dtype=None) -> None:
    ctx = current_context()
    tensors = (dst,) + srcs
    n = dst.size if count is None else int(count)
    for t in tensors:
        if not isinstance(t, LocalTensor):
            raise _fault(PIPE_V, f"{name}: operands must be LocalTensors in UB, got {type(t).__name__}")
        if t.buffer != "UB":
            raise _fault(PIPE_V, f"{name}: vector operands live in UB, not {t.buffer}")
        if n > t.size:
            raise _fault(PIPE_V, f"{name}: count {n} exceeds the operand {t!r} ({t.size} elements)")
    if n <= 0:
        raise _fault(PIPE_V, f"{name}: count {n} must be positive")
    nbytes = n * max(t.dtype.itemsize for t in tensors)
    cycles = ctx.profile.vector_cycles(op_class, dtype_name(cost_dtype or dst.dtype), nbytes)
    fn = None
    if ctx.functional:
        def fn():
            compute(dst.view(ctx, n), *[s.view(ctx, n) for s in srcs])
    ctx.emit(Instr("PIPE_V", name, COMPUTE, cycles, path=None,
                   reads=tuple(s.span(n) for s in srcs), writes=(dst.span(n),), fn=fn,
                   operands=f"{dst!r}, {', '.join(map(repr, srcs))}, {n}"))


def _binary(op_class, name, ufunc):
    def op(dst: LocalTensor, src0: LocalTensor, src1: LocalTensor, count: int | None = None):
        if src0.dtype != dst.dtype or src1.dtype != dst.dtype:
            raise _fault(PIPE_V, f"{name}: operand dtypes differ ({dst!r}, {src0!r}, {src1!r})")
        _vec(op_class, name, dst, (src0, src1), count, lambda d, a, b: ufunc(a, b, out=d))
    op.__name__ = name
    return op


def _unary(op_class, name, func):
    def op(dst: LocalTensor, src: LocalTensor, count: int | None = None):
        if src.dtype != dst.dtype:
            raise _fault(PIPE_V, f"{name}: operand dtypes differ ({dst!r}, {src!r})")
        _vec(op_class, name, dst, (src,), count, lambda d, a: func(a, d))
    op.__name__ = name
    return op


def _scalar_op(op_class, name, ufunc):
    def op(dst: LocalTensor, src: LocalTensor, scalar, count: int | None = None):
        if src.dtype != dst.dtype:
            raise _fault(PIPE_V, f"{name}: operand dtypes differ ({dst!r}, {src!r})")
        s = dst.dtype.type(scalar)
        _vec(op_class, name, dst, (src,), count, lambda d, a: ufunc(a, s, out=d))
    op.__name__ = name
    return op


Add = _binary("add", "Add", np.add)
Sub = _binary("sub", "Sub", np.subtract)
Mul = _binary("mul", "Mul", np.multiply)
Div = _binary("div", "Div", np.divide)
Max = _binary("max", "Max", np.maximum)
Min = _binary("min", "Min", np.minimum)
Adds = _scalar_op("adds", "Adds", np.add)
Muls = _scalar_op("muls", "Muls", np.multiply)
Maxs = _scalar_op("maxs", "Maxs", np.maximum)
Mins = _scalar_op("mins", "Mins", np.minimum)
Exp = _unary("exp", "Exp", lambda a, d: np.exp(a, out=d))
Ln = _unary("ln", "Ln", lambda a, d: np.log(a, out=d))
Abs = _unary("abs", "Abs", lambda a, d: np.abs(a, out=d))
Sqrt = _unary("sqrt", "Sqrt", lambda a, d: np.sqrt(a, out=d))
Relu = _unary("maxs", "Relu", lambda a, d: np.maximum(a, a.dtype.type(0), out=d))
Reciprocal = _unary("rec", "Reciprocal", lambda a, d: np.divide(a.dtype.type(1), a, out=d))


def Duplicate(dst: LocalTensor, scalar, count: int | None = None) -> None:
    s = dst.dtype.type(scalar)

    def fill(d):
        d[...] = s
    _vec("dup", "Duplicate", dst, (), count, fill)


def Copy(dst: LocalTensor, src: LocalTensor, count: int | None = None) -> None:
    """UB -> UB vector copy."""
    def copy(d, a):
        d[...] = a
    _vec("copy", "Copy", dst, (src,), count, copy)


_ROUNDERS = {RoundMode.CAST_FLOOR: np.floor, RoundMode.CAST_CEIL: np.ceil,
             RoundMode.CAST_TRUNC: np.trunc, RoundMode.CAST_RINT: np.rint,
             RoundMode.CAST_NONE: np.rint,
             RoundMode.CAST_ROUND: lambda a: np.sign(a) * np.floor(np.abs(a) + 0.5)}


def Cast(dst: LocalTensor, src: LocalTensor, roundMode: RoundMode = RoundMode.CAST_NONE,
         count: int | None = None) -> None:
    """Convert between dtypes. Narrowing float casts round to nearest even (CAST_NONE/CAST_RINT);
    casts to integers apply the round mode."""
    to_int = dst.dtype.kind in "iu"
    if not to_int and roundMode not in (RoundMode.CAST_NONE, RoundMode.CAST_RINT) \
            and dst.dtype.itemsize < src.dtype.itemsize:
        raise _fault(PIPE_V, f"Cast: round mode {roundMode.name} for float narrowing is not modelled")

    def conv(d, a):
        if to_int:
            d[...] = _ROUNDERS[roundMode](a.astype(np.float64)).astype(d.dtype)
        else:
            d[...] = a.astype(d.dtype)
    _vec("conv", "Cast", dst, (src,), count, conv,
         cost_dtype=dst.dtype if dst.dtype.itemsize >= src.dtype.itemsize else src.dtype)


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("annotations", "dataclass", "Enum",
                                                                     "np", "ml_dtypes")]
