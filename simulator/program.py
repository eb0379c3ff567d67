"""The program format: what a kernel body records and the engine runs. An `Instr` is one
instruction as the scalar unit issues it to a pipe (its kind, cost, data path, the byte ranges it
reads and writes for the sanitizer, and its functional effect); a `KernelLaunch` is a body and a
block count. The kernel language (simulator.kernel) depends on this file and on the recording
context (simulator.recorder's `current_context`), never on the Device.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Callable, NamedTuple

# instruction kinds
COMPUTE, GM_XFER, SET, WAIT, BARRIER, END, XSET, XWAIT, MARK = range(9)
# MARK: a fast-mode loop's mark (simulator/fast/): no cost, no queue place; every actor notes it


class LoopMark(NamedTuple):
    """What a MARK instruction carries (its `flag`): mark `phase` of loop run `run` (0, 1: a
    window starts; 2: `skip` iterations of `period` are fast-forwarded here) and, at the skip,
    (window 1's GM transfers, window 2's, the DeclaredTouches or None)."""
    run: int
    phase: int
    skip: int
    period: int
    windows: tuple | None


class Instr:
    """One micro-program instruction, as the scalar unit issues it to a pipe.

    reads / writes: local-buffer byte ranges (buffer, start, stop) for the sanitizer, a tuple or
    `Rows`; gm: the GM ranges (address, bytes) it touches, a tuple or `Rows`;
    fn: the functional effect, run when its data lands (skipped in timing-only mode);
    path / nbytes: the data path and bytes moved (for cost and the report);
    scalar: the scalar unit's own cycles for the API call, spent before the instruction issues;
    indirect: a gather or scatter, whose GM addresses come from data (the L2 sees the nominal ones
    its Loop declares, not one step a period: fast mode); l2_bypass: a GM transfer the L2 does not
    cache (it crosses device memory's channel whole)."""
    __slots__ = ("pipe", "name", "kind", "cycles", "path", "nbytes", "chan_bytes", "gm", "gm_write",
                 "reads", "writes", "fn", "flag", "ready", "issued", "index", "operands", "pipe_all_marker",
                 "scalar", "line", "indirect", "l2_bypass")

    def __init__(self, pipe: str, name: str, kind: int = COMPUTE, cycles: float = 0.0,
                 path: str | None = None, nbytes: int = 0, chan_bytes: int = 0,
                 reads: tuple = (), writes: tuple = (), fn: Callable | None = None,
                 flag: tuple | LoopMark | None = None, operands: tuple | str = (), gm: tuple = (),
                 gm_write: bool = False):
        self.pipe, self.name, self.kind, self.cycles = pipe, name, kind, cycles
        # chan_bytes: bytes through L2 (whole 32-B bursts); gm: the GM ranges [(addr, n)] touched
        self.path, self.nbytes, self.chan_bytes = path, nbytes, chan_bytes
        self.gm, self.gm_write = gm, gm_write
        self.reads, self.writes, self.fn, self.flag = reads, writes, fn, flag
        self.operands = operands      # formatted only when an error or a deadlock names it
        self.ready = 0.0              # when the scalar unit finished issuing it, on its own clock (engine)
        self.issued = 0.0             # when the scalar unit put it in the pipe's queue (engine)
        self.index = -1
        self.pipe_all_marker = False   # one of the BARRIERs a PipeBarrier(PIPE_ALL) puts in each pipe's queue
        self.scalar = 0.0             # the scalar unit's cycles for the API call (set when emitted)
        self.line = None              # (file, line) of the kernel body that issued it (when tracing)
        self.indirect = False
        self.l2_bypass = False        # its GlobalTensor's SetL2CacheHint(CACHE_MODE_DISABLE): not cached in L2

    def describe(self) -> str:
        ops = self.operands
        if isinstance(ops, tuple):
            ops = ", ".join(map(str, ops))
        ops = f"({ops})" if ops else ""
        return f"instruction #{self.index} {self.name}{ops}"


class Rows:
    """`count` rows of `n` bytes, `pitch` bytes apart from `start`, read as the tuple of per-row
    ranges a copy would otherwise carry: (address, n) for GM (`buf` None), (buf, lo, hi) in a
    local buffer. Five numbers instead of a tuple per row: a strided copy moves thousands of rows
    per instruction, and every running block holds a chunk of its instructions at once."""
    __slots__ = ("buf", "start", "n", "pitch", "count")

    def __init__(self, buf: str | None, start: int, n: int, pitch: int, count: int):
        self.buf, self.start, self.n, self.pitch, self.count = buf, start, n, pitch, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> tuple:
        if i < 0:
            i += self.count
        if not 0 <= i < self.count:
            raise IndexError(i)
        lo = self.start + i * self.pitch
        return (lo, self.n) if self.buf is None else (self.buf, lo, lo + self.n)

    def __iter__(self):
        s, n, p, buf = self.start, self.n, self.pitch, self.buf
        if buf is None:
            return ((s + i * p, n) for i in range(self.count))
        return ((buf, s + i * p, s + i * p + n) for i in range(self.count))

    def key(self) -> tuple:
        return (self.buf, self.start, self.n, self.pitch, self.count)

    def extent(self) -> tuple[int, int]:
        """[first byte, past the last byte)."""
        return self.start, self.start + (self.count - 1) * self.pitch + self.n

    def __repr__(self) -> str:
        return f"Rows({self.buf}, {self.start}, {self.n} B x {self.count}, pitch {self.pitch})"


class Text:
    """An operand's description, formatted only if a message names the instruction (most
    instructions are never named, and a tensor's repr costs more than recording it)."""
    __slots__ = ("form", "args")

    def __init__(self, form: str, *args):
        self.form, self.args = form, args

    def __str__(self) -> str:
        return self.form.format(*self.args)


@dataclass
class KernelLaunch:
    """One kernel launch: the body runs per block as body(*args); `kind` picks the core kind
    (vector, cube or mix)."""
    name: str
    body: Callable[..., None]
    block_dim: int
    kind: str = "vector"
    args: tuple = ()


LIBRARY = os.path.dirname(os.path.abspath(__file__))      # simulator/: frames here are not the kernel's
_LINES: dict = {}


def caller_line() -> tuple[str, int] | None:
    """(file, line) of the innermost frame outside the simulator package: the line of the kernel
    body (the user's, or an operator's in ops/) that made the instruction being emitted."""
    f = sys._getframe(2)
    lib = LIBRARY
    while f is not None and f.f_code.co_filename.startswith(lib):
        f = f.f_back
    if f is None:
        return None
    key = (f.f_code.co_filename, f.f_lineno)
    return _LINES.setdefault(key, key)         # one tuple per line, however many instructions
