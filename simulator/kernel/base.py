"""The language's foundation: pipes, positions, events, tensors, TPipe / TQue / TBuf, block
queries and explicit synchronisation."""
from __future__ import annotations

from enum import Enum, IntEnum

import ml_dtypes
import numpy as np

from ..enums import KernelError, dtype_name
from ..program import BARRIER, SET, WAIT, XSET, XWAIT, Instr
from ..recorder import current_context
from ..arith import align_up


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

    def __init__(self, src: str, dst: str):
        self.src, self.dst = src, dst     # plain attributes: flags are most of a Cube kernel's instructions


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
        i = int(i)
        t = object.__new__(LocalTensor)    # the dtype is already a dtype: skip np.dtype()
        t.buffer, t.offset, t.dtype = self.buffer, self.offset + i * self.dtype.itemsize, self.dtype
        t.size, t.position = self.size - i, self.position
        return t

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


class CacheMode(IntEnum):
    """Ascend C's L2 cache modes for a GlobalTensor (SetL2CacheHint; A2 / A3 and later)."""
    CACHE_MODE_DISABLE = 0
    CACHE_MODE_NORMAL = 1
    CACHE_MODE_PERSISTENT = 4


class GlobalTensor:
    """A typed view of GM, as Ascend C's GlobalTensor<T>."""
    __slots__ = ("dtype", "ptr", "size", "cache_mode")

    def __init__(self, dtype=None):
        self.dtype = np.dtype(dtype) if dtype is not None else None
        self.ptr: GM_ADDR | None = None
        self.size = 0
        self.cache_mode = CacheMode.CACHE_MODE_NORMAL

    def SetL2CacheHint(self, mode: CacheMode) -> None:
        """Copies through this tensor or its views (DataCopy, DataCopyPad, ND -> NZ, Fixpipe;
        not the gathers and scatters) bypass the L2 when mode is CACHE_MODE_DISABLE. The
        persistent mode is not offered on these products (CANN's SetL2CacheHint page: planned
        for the 950)."""
        ctx = current_context()
        if ctx.profile.series != "A2":       # (the A3 dies are of the A2 series here)
            raise _fault(None, f"SetL2CacheHint: {ctx.profile.soc_version} has no L2 cache hint (Atlas A2 / A3 only)")
        if mode not in (CacheMode.CACHE_MODE_DISABLE, CacheMode.CACHE_MODE_NORMAL):
            raise _fault(None, f"SetL2CacheHint: {mode!r} is not supported (CACHE_MODE_DISABLE or CACHE_MODE_NORMAL)")
        self.cache_mode = CacheMode(mode)

    @property
    def bypasses_l2(self) -> bool:
        return self.cache_mode == CacheMode.CACHE_MODE_DISABLE

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
        g.cache_mode = self.cache_mode
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
        for what, v in (("buffers", num), ("bytes", length)):
            whole = not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating)) \
                and float(v).is_integer()
            if not whole or v < 1:
                raise _fault(PIPE_S, f"InitBuffer({que.position.name}, {num!r}, {length!r}): {what} must be a whole "
                                     f"number >= 1, got {v!r}")
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


def GetSubBlockIdx() -> int:
    """On A2 mix kernels: which of the block's AIVs this is (0 or 1); 0 elsewhere."""
    return current_context().sub_block


def GetTaskRation() -> int:
    """AIVs per AIC in a mix kernel's block (2 on A2), 1 elsewhere."""
    g = current_context().group
    return max(len(g.aivs()), 1) if g is not None and g.aic() is not None else 1


def ASCEND_IS_AIC() -> bool:
    """True on a core with the cube unit (an AIC on A2, any AI core on the coupled chips)."""
    return "cube" in current_context().core.kind.units


def ASCEND_IS_AIV() -> bool:
    """True on a core with the vector unit (an AIV on A2, any AI core on the coupled chips)."""
    return "vector" in current_context().core.kind.units


def CrossCoreSetFlag(flagId: int, modeId: int = 0, pipe: Pipe = Pipe.PIPE_S) -> None:
    """Signal other cores of the launch when `pipe` reaches this point (A2). Mode 0: every core
    of this kind; 1: the block's other AIV; 2: AIC -> its AIVs, or AIV -> its AIC."""
    _cross_core(XSET, "CrossCoreSetFlag", flagId, modeId, pipe)


def CrossCoreWaitFlag(flagId: int, modeId: int = 0, pipe: Pipe = Pipe.PIPE_S) -> None:
    """Wait for a cross-core flag. On PIPE_S the scalar unit stops issuing until it is set;
    on another pipe only that pipe waits. Mode 0 is a barrier over all cores of this kind; in
    mode 2 an AIC waits for all its AIVs."""
    _cross_core(XWAIT, "CrossCoreWaitFlag", flagId, modeId, pipe)


def SetFlag(event: HardEvent, eventID: int) -> None:
    _flag(SET, event.src, event.dst, int(eventID), "SetFlag")


def WaitFlag(event: HardEvent, eventID: int) -> None:
    _flag(WAIT, event.src, event.dst, int(eventID), "WaitFlag")


def ScalarWork(cycles: float) -> None:
    """Scalar arithmetic of the kernel's own between API calls (a hand-written kernel's address,
    loop and tiling arithmetic per tile): the scalar unit spends `cycles` more before it issues the
    next instruction."""
    cycles = float(cycles)
    if not cycles >= 0 or cycles == float("inf"):
        raise _fault(PIPE_S, f"ScalarWork: cycles {cycles!r} must be finite and >= 0")
    current_context().scalar_debt += cycles


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
# machinery: buffers of positions, cross-core flags, faults, flags
# ---------------------------------------------------------------------------------------------
_BUFFER_OF = {TPosition.VECIN: "UB", TPosition.VECOUT: "UB", TPosition.VECCALC: "UB",
              TPosition.A1: "L1", TPosition.B1: "L1", TPosition.A2: "L0A", TPosition.B2: "L0B",
              TPosition.CO1: "L0C", TPosition.CO2: "UB"}


# (producer pipe, consumer pipe) that a queue at this position synchronises
_QUEUE_PIPES = {TPosition.VECIN: ("PIPE_MTE2", "PIPE_V"), TPosition.VECOUT: ("PIPE_V", "PIPE_MTE3"),
                TPosition.A1: ("PIPE_MTE2", "PIPE_MTE1"), TPosition.B1: ("PIPE_MTE2", "PIPE_MTE1"),
                TPosition.A2: ("PIPE_MTE1", "PIPE_M"), TPosition.B2: ("PIPE_MTE1", "PIPE_M"),
                TPosition.CO2: ("PIPE_V", "PIPE_MTE3")}


def _cross_core(kind: int, name: str, flagId: int, modeId: int, pipe) -> None:
    ctx = current_context()
    p = Pipe(pipe).value
    n = ctx.profile.sync.cross_core_flag_ids
    if n == 0:
        raise _fault(p, f"{name}: {ctx.profile.soc_version} has no cross-core flags (A2 only)")
    if not 0 <= int(flagId) < n:
        raise _fault(p, f"{name}: flag id {flagId} outside 0..{n - 1}")
    if modeId not in (0, 1, 2):
        raise _fault(p, f"{name}: mode {modeId} is not 0 (all cores of a kind), 1 (the two AIVs "
                     f"of a block) or 2 (AIC <-> AIV of a block)")
    ctx.emit(Instr(p, name, kind, flag=(int(flagId), int(modeId)),
                   operands=(f"flag {flagId}", f"mode {modeId}")))


def _fault(pipe, reason: str) -> KernelError:
    ctx = current_context()
    pipe = pipe.value if isinstance(pipe, Pipe) else (pipe or "PIPE_S")
    where = f"core {ctx.core.name} (block {ctx.block_idx}), {pipe}, instruction #{len(ctx.program)}"
    return KernelError(f"{where}: {reason}{ctx.core.in_launch()}")


def _flag(kind: int, src: str, dst: str, event_id: int, name: str) -> None:
    ctx = current_context()
    # (pipe, flag, operands) per flag and call, checked once per device (flags are most of a
    # Cube kernel's instructions)
    fields = ctx.memo.get((kind, src, dst, event_id, name))
    if fields is None:
        limit = ctx.profile.sync.event_ids
        if not 0 <= event_id < limit:
            raise _fault(src if kind == SET else dst,
                         f"{name}: event id {event_id} outside 0..{limit - 1} on this chip")
        fields = ctx.memo[kind, src, dst, event_id, name] = (
            src if kind == SET else dst, (src, dst, event_id), (f"{src}->{dst}", f"id {event_id}"))
    # (positional, cheaper: pipe, name, kind, cycles, path, nbytes, chan_bytes, reads, writes, fn,
    # flag, operands)
    ctx.emit(Instr(fields[0], name, kind, 0.0, None, 0, 0, (), (), None, fields[1], fields[2]))


__all__ = [
    "BUFFER_NUM",
    "CacheMode",
    "half",
    "bfloat16",
    "float32",
    "int32",
    "Pipe",
    "PIPE_S",
    "PIPE_V",
    "PIPE_M",
    "PIPE_MTE1",
    "PIPE_MTE2",
    "PIPE_MTE3",
    "PIPE_FIX",
    "PIPE_ALL",
    "HardEvent",
    "TPosition",
    "RoundMode",
    "LocalTensor",
    "GM_ADDR",
    "GlobalTensor",
    "TPipe",
    "TQue",
    "TBuf",
    "GetBlockIdx",
    "GetBlockNum",
    "SetFlag",
    "GetSubBlockIdx",
    "GetTaskRation",
    "ASCEND_IS_AIC",
    "ASCEND_IS_AIV",
    "CrossCoreSetFlag",
    "CrossCoreWaitFlag",
    "WaitFlag",
    "PipeBarrier",
    "ScalarWork",
]
