"""Copies whose GM address is data: the offset sits in UB, written there by the vector pipe.

On the hardware a kernel that gathers (or scatters) rows at computed positions has the scalar unit
read each offset from UB (`idx.GetValue(i)`, after a V->S sync) and issue a `DataCopyPad` at that
GM address. Here a kernel body runs before any data exists, so the body cannot read the offset;
`DataCopyPadIndirect` records the copy with the offset's UB location instead, and the offset is
read when the copy executes (functional mode). Everything else is DataCopyPad's: the blocks, the
cost (the path's latency and rate over whole 32-byte bursts), the UB alignment and the atomic add
of `SetAtomicAdd`. The cost does not depend on the offset, so timing-only mode (no data) gives the
same cycles.

GM bounds are checked when the copy executes (the offset is known only then): an offset that takes
a block outside the GlobalTensor's extent stops the run naming core, pipe and instruction. In
timing-only mode there is no offset to check.

The L2 model needs addresses when the copy executes, which must not depend on data (timing-only
mode has none): pass `nominal`, the element offset the kernel expects to touch (for example where
an identity grid would sample), and the L2 sees that address; without it the copy is treated as an
L2 hit and touches no tags.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..program import GM_XFER, Instr, Rows, caller_line
from ..recorder import current_context
from ..arith import align_up
from .base import GlobalTensor, LocalTensor, _fault
from .copy import _COPY_ROUTES, DataCopyExtParams, _local_check


def DataCopyPadIndirect(dst, src, params: DataCopyExtParams, offsets: LocalTensor, index: int,
                        nominal: int | None = None) -> None:
    """DataCopyPad between GM and UB where the GM side starts `offsets[index]` elements (int32 in
    UB, read at execution) past the GlobalTensor's start. GM -> UB is a gather (MTE2), UB -> GM a
    scatter (MTE3; with SetAtomicAdd the blocks add into GM). `params` as DataCopyPad's."""
    IndirectCopies(dst, src, params, offsets, index, 1, 0,
                   None if nominal is None else (nominal,)).issue(0)


class NominalRows(NamedTuple):
    """Where a run of indirect copies touches GM for the L2 model: copy i's `rows` rows of `n`
    bytes, `pitch` bytes apart, from byte address bases[i]."""
    bases: np.ndarray
    n: int
    pitch: int
    rows: int
    write: bool


def nominal_rows(gm: GlobalTensor, params: DataCopyExtParams, nominals, gather: bool) -> NominalRows:
    """The GM rows a run of IndirectCopies between `gm` and a local tensor would show the L2 at
    element offsets `nominals`: what a kernel declares for a Loop's skipped iterations (`Loop`'s
    `touches`), unchecked (the copies that are recorded check them)."""
    isz = gm.dtype.itemsize
    if type(nominals) is not np.ndarray or nominals.dtype != np.int64 or nominals.ndim != 1:
        nominals = np.asarray(nominals, dtype=np.int64).reshape(-1)
    bases = nominals * isz + gm.ptr.addr
    return NominalRows(bases, params.blockLen, _gm_pitch(params, gather), params.blockCount, not gather)


def _gm_pitch(p: DataCopyExtParams, gather: bool) -> int:
    """Bytes from one GM block of a copy to the next: srcStride apart for a gather, dstStride for
    a scatter."""
    return p.blockLen + (p.srcStride if gather else p.dstStride)


class IndirectCopies:
    """A loop of DataCopyPadIndirect copies of one shape: copy i moves between the local tensor
    at element i * local_step and GM at `offsets[first + i]` (`nominals[i]` for the L2 model).
    Everything is checked, and the GM pointer and `params` are read, when the run is made (a
    fault names the instruction the run starts at); `issue(i)` records copy i, the very
    instruction `DataCopyPadIndirect(local[i * local_step], ..., offsets, first + i, nominals[i])`
    would record then, so a kernel keeps its own issue order (GridSampler alternates a gather
    loop with a scatter loop). A GridSampler call is mostly such loops: made call by call, their
    checks and operand slices would be about half of its recording."""

    def __init__(self, dst, src, params: DataCopyExtParams, offsets: LocalTensor, first: int = 0,
                 count: int = 1, local_step: int = 0, nominals=None):
        self.ctx = ctx = current_context()
        self.gather = gather = isinstance(src, GlobalTensor)
        g, local = (src, dst) if gather else (dst, src)
        kind_name = "DataCopyPad[gather]" if gather else "DataCopyPad[scatter]"
        if not isinstance(g, GlobalTensor) or not isinstance(local, LocalTensor):
            raise _fault(None, f"{kind_name}: needs one GlobalTensor and one LocalTensor")
        p = params
        first, count, local_step = int(first), int(count), int(local_step)
        self.kind_name, self.count, self.pipe = kind_name, count, None
        if count < 0 or local_step < 0:
            raise _fault(None, f"{kind_name}: a run needs count >= 0 and local_step >= 0 "
                         f"(got {count} and {local_step})")
        if count == 0:                         # an empty loop records nothing
            return
        if (count - 1) * local_step > local.size:
            raise _fault(None, f"LocalTensor index {(count - 1) * local_step} outside 0..{local.size}")
        step = local_step * local.dtype.itemsize
        # a gather loop repeats one shape and a few UB slots thousands of times: what depends on
        # nothing else is checked and worked out once per block (the offsets tensor and the
        # indices are checked for every run: nothing memoised depends on them)
        memo = ctx.block_memo
        key = (gather, p.blockCount, p.blockLen, p.srcStride, p.dstStride, local.buffer, local.offset,
               local.size * local.dtype.itemsize, step, count)
        known = memo.get(key)
        if known is None:
            slots = [_prepare(ctx, gather, g, local[i * local_step], p, offsets, first + i, kind_name)
                     for i in range(count)]
            known = memo[key] = (*slots[0][:2], [s[2] for s in slots], *slots[0][3:])
        self.pipe, self.path, self.spans, self.moved, self.cycles, gm_pitch, ub_pitch, self.size = known
        _check_call(g, offsets, first, self.pipe, kind_name)
        # the first index past the offsets tensor, if the run reaches it
        _check_call(g, offsets, min(first + count - 1, max(first, offsets.size)), self.pipe, kind_name)
        ptr, isz = g.ptr, g.dtype.itemsize
        self.bases = None
        if nominals is not None:
            try:
                nom = np.asarray(nominals, dtype=np.int64).reshape(-1)
            except (OverflowError, TypeError, ValueError):
                raise _fault(self.pipe, f"{kind_name}: nominal offsets must be int64 element offsets") from None
            if nom.size != count:
                raise _fault(self.pipe, f"{kind_name}: {nom.size} nominal offsets for {count} copies")
            # the element offsets that keep every block inside the tensor (Python integers: a
            # huge nominal must not wrap around in int64)
            lowest = -((ptr.addr - ptr.base) // isz)
            highest = (ptr.limit - (p.blockCount - 1) * gm_pitch - p.blockLen - ptr.addr) // isz
            bad = (nom < lowest) | (nom > highest)
            if bad.any():
                raise _fault(self.pipe, f"{kind_name}: nominal offset {int(nom[np.argmax(bad)])} takes the "
                             f"copy outside {ptr.name}'s extent")
            self.bases = nominal_rows(g, p, nom, gather).bases.tolist()
        self.dst, self.src, self.local, self.offsets = dst, src, local, offsets
        self.first, self.local_step = first, local_step
        self.ptr, self.isz, self.gm_pitch, self.ub_pitch = ptr, isz, gm_pitch, ub_pitch
        self.n, self.rows = p.blockLen, p.blockCount      # as made (a kernel may reuse its params)
        self.line = caller_line() if ctx.lines else None  # the report books the copies to this line
        # what a message naming copy i formats (not the run itself: it holds the recording context)
        self.operand_parts = (local, local_step, gather, src, dst, offsets, first, self.size)

    def issue(self, i: int) -> None:
        """Record copy i of the run (0 <= i < count)."""
        if not 0 <= i < self.count:
            raise _fault(self.pipe, f"{self.kind_name}: copy {i} of a run of {self.count}")
        ctx, gather, spans = self.ctx, self.gather, self.spans[i]
        ob = self.offsets.offset + (self.first + i) * 4
        reads = (("UB", ob, ob + 4),) if gather else (("UB", ob, ob + 4),) + spans
        bases = self.bases
        gm = () if bases is None else Rows(None, bases[i], self.n, self.gm_pitch, self.rows)
        atomic = None if gather else ctx.atomic
        # (positional, cheaper: pipe, name, kind, cycles, path, nbytes, chan_bytes, reads, writes, fn,
        # flag, operands, gm, gm_write)
        instr = Instr(self.pipe, _NAMES[gather, atomic is not None], GM_XFER, self.cycles, self.path,
                      self.rows * self.n, self.moved, reads, spans if gather else (), None, None,
                      _CopyOperands(self.operand_parts, i), gm, not gather)
        instr.line = self.line
        instr.indirect = True
        if ctx.functional:
            instr.fn = self._effect(instr, ob, self.local.offset + i * self.local_step * self.local.dtype.itemsize,
                                    atomic)
        ctx.emit(instr)

    def issue_all(self) -> None:
        """Record every copy of the run, in order."""
        for i in range(self.count):
            self.issue(i)

    def _effect(self, instr: Instr, ob: int, local_offset: int, atomic):
        """Functional mode: the copy, at the offset it reads from UB when it executes."""
        device, core, isz, ptr, pipe = self.ctx.device, self.ctx.core, self.isz, self.ptr, self.pipe
        gather, ubuf, n, count = self.gather, self.local.buffer, self.n, self.rows
        gm_pitch, ub_pitch = self.gm_pitch, self.ub_pitch

        def fn():
            off = int(core.buffers["UB"][ob:ob + 4].view(np.int32)[0])
            start = ptr.addr + off * isz
            for i in range(count):
                lo, lo_off = start + i * gm_pitch, i * ub_pitch
                if lo < ptr.base or lo + n > ptr.limit:
                    raise core.fault(pipe, instr, f"offset {off} (read from UB) takes the copy to "
                                     f"{ptr.name}[{lo - ptr.base}:{lo + n - ptr.base}] (bytes), "
                                     f"outside its extent [0:{ptr.limit - ptr.base}]")
                gmem = device.memory.bytes_at(lo, n)
                if gmem is None:
                    continue
                ub = core.buffers[ubuf][local_offset + lo_off:local_offset + lo_off + n]
                if gather:
                    ub[...] = gmem
                elif atomic is not None:
                    acc = gmem.view(atomic)
                    acc += ub.view(atomic)
                else:
                    gmem[...] = ub
        return fn


_NAMES = {(True, False): "DataCopyPad[gather]", (False, False): "DataCopyPad[scatter]",
          (False, True): "DataCopyPad[scatter]+AtomicAdd"}      # (gather, atomic) -> name


def _check_call(g, offsets, index: int, pipe: str, kind_name: str) -> None:
    """What a call may get wrong that its memo key does not cover: the GlobalTensor, the offsets
    tensor and the index into it."""
    if g.ptr is None:
        raise _fault(pipe, f"{kind_name}: GlobalTensor used before SetGlobalBuffer")
    if not isinstance(offsets, LocalTensor) or offsets.buffer != "UB" or offsets.dtype != np.int32:
        raise _fault(pipe, f"{kind_name}: offsets must be an int32 LocalTensor in UB, got {offsets!r}")
    if not 0 <= index < offsets.size:
        raise _fault(pipe, f"{kind_name}: offset index {index} outside {offsets!r}")


def _prepare(ctx, gather: bool, g, local, params: DataCopyExtParams, offsets, index: int, kind_name: str):
    """What a copy of this shape and local slot always is, checked once per block: (pipe, path,
    the local spans, bytes moved, cycles, GM row pitch, UB row pitch, the operand text)."""
    route = _COPY_ROUTES.get(("GM", local.buffer) if gather else (local.buffer, "GM"))
    if route is None:
        raise _fault(None, f"{kind_name}: no copy path between GM and {local.buffer}")
    pipe, path = route
    if pipe not in ctx.core.kind.pipes:
        raise _fault(pipe, f"{kind_name}: needs {pipe}, which core kind {ctx.core.kind_name} lacks")
    _check_call(g, offsets, index, pipe, kind_name)       # (the order the faults always came in)
    p = params
    if p.blockCount <= 0 or p.blockLen <= 0:
        raise _fault(pipe, f"{kind_name} with blockCount={p.blockCount}, blockLen={p.blockLen}")
    row = align_up(p.blockLen, 32)
    # block i: GM at i * gm_pitch bytes (srcStride bytes between blocks for a gather, dstStride for
    # a scatter), UB at i * (row + k * 32) with k the UB side's stride in 32-byte blocks
    gm_pitch = _gm_pitch(p, gather)
    ub_pitch = row + 32 * (p.dstStride if gather else p.srcStride)
    buf = local.buffer
    align = ctx.profile.alignment[buf]
    cap = ctx.core.kind.buffers.get(buf)
    end = local.offset + local.size * local.dtype.itemsize
    spans = []
    for i in range(p.blockCount):
        lo = local.offset + i * ub_pitch
        if cap is None or lo < 0 or lo + p.blockLen > cap:
            _local_check(local, lo, lo + p.blockLen, pipe, kind_name)       # raises, naming the buffer
        if lo + p.blockLen > end:
            # inside the buffer but past the tensor: it would overwrite a neighbour's data
            raise _fault(pipe, f"{kind_name}: {buf}[{lo}:{lo + p.blockLen}] goes beyond its tensor "
                         f"{local!r} (ends at {end})")
        if lo % align:
            raise _fault(pipe, f"{kind_name}: {buf} address {lo} not {align}-byte aligned")
        spans.append((buf, lo, lo + p.blockLen))
    moved = p.blockCount * row             # every block is blockLen bytes, moved in whole bursts
    return (pipe, path, tuple(spans), moved, ctx.profile.path(path).cycles(moved), gm_pitch, ub_pitch,
            f"{p.blockCount} x {p.blockLen} B")


class _CopyOperands:
    """Copy i of a run's operands (its local slot, the GlobalTensor, the offset it reads, the row
    shape), formatted only if a message names the instruction."""
    __slots__ = ("parts", "i")

    def __init__(self, parts: tuple, i: int):
        self.parts, self.i = parts, i

    def __str__(self) -> str:
        local, local_step, gather, src, dst, offsets, first, size = self.parts
        slot = repr(local[self.i * local_step]) if local_step else str(local)
        dst, src = (slot, str(src)) if gather else (str(dst), slot)
        return f"{dst}, {src}, offset {offsets!r}[{first + self.i}], {size}"


__all__ = ["DataCopyPadIndirect", "IndirectCopies", "NominalRows", "nominal_rows"]
