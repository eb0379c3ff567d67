"""A core while it runs blocks: its buffers, what each pipe is doing (for a deadlock's report), and
the sanitizer's record of which bytes of its buffers the block has written (CoreState, with
WrittenRuns and ByteMaps); and the cores that run one block together (Group)."""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from .enums import KernelError
from .profile import CoreKind
from .program import Instr, Rows

# The sanitizer remembers at most this many spans per block as known-written (a cache: a span past
# it is checked against the byte map each time). A strided copy has a span per row, and a block
# may issue hundreds of thousands of rows.
CHECKED_SPANS = 16384


def rows_of(flags: np.ndarray, rows: Rows) -> np.ndarray:
    """The bytes of local `rows` in a buffer's byte flags, as a (count, n) view (the rows were
    checked against the buffer when they were recorded)."""
    assert rows.start >= 0 and rows.start + (rows.count - 1) * rows.pitch + rows.n <= flags.size
    return np.lib.stride_tricks.as_strided(flags[rows.start:], shape=(rows.count, rows.n),
                                           strides=(rows.pitch, 1), writeable=True)


class WrittenRuns:
    """The sanitizer's cache of a block's valid bytes per buffer as merged [lo, hi) runs: a block
    writes a buffer in long runs, so a few runs cover what thousands of distinct spans (a gather
    loop's rows, its offsets) touch, and a span inside a run needs no look at the byte map. At
    most LIMIT runs per buffer are kept (bytes past them are checked against the byte map)."""
    LIMIT = 4096
    __slots__ = ("starts", "ends")

    def __init__(self):
        self.starts: dict[str, list[int]] = {}
        self.ends: dict[str, list[int]] = {}

    def covers(self, buf: str, lo: int, hi: int) -> bool:
        starts = self.starts.get(buf)
        if not starts:
            return False
        i = bisect_right(starts, lo) - 1
        return i >= 0 and self.ends[buf][i] >= hi

    def add(self, buf: str, lo: int, hi: int) -> None:
        starts = self.starts.get(buf)
        if starts is None:
            self.starts[buf], self.ends[buf] = [lo], [hi]
            return
        ends = self.ends[buf]
        i = bisect_right(starts, lo) - 1           # the last run that starts at or before lo
        if i >= 0 and ends[i] >= lo:               # it touches: extend it
            if ends[i] >= hi:
                return
            ends[i] = hi
        else:
            if len(starts) >= self.LIMIT:
                return
            i += 1
            starts.insert(i, lo)
            ends.insert(i, hi)
        k = i + 1                                  # absorb the runs it now reaches
        while k < len(starts) and starts[k] <= ends[i]:
            if ends[k] > ends[i]:
                ends[i] = ends[k]
            k += 1
        if k > i + 1:
            del starts[i + 1:k]
            del ends[i + 1:k]


class ByteMaps(dict):
    """buffer -> its bytes' written flags (numpy bool), each made when first needed."""

    def __init__(self, sizes: dict[str, int]):
        super().__init__()
        self.sizes = sizes

    def __missing__(self, buf: str) -> np.ndarray:
        arr = self[buf] = np.zeros(self.sizes[buf], dtype=np.bool_)
        return arr


class CoreState:
    """One AI core (or AIC / AIV): its buffers persist across blocks; its flags and the
    sanitizer's record of which bytes were written are per block."""

    def __init__(self, name: str, index: int, kind_name: str, kind: CoreKind, functional: bool):
        self.name, self.index, self.kind_name, self.kind = name, index, kind_name, kind
        self.buffers = {b: (np.zeros(n, dtype=np.uint8) if functional else None)
                        for b, n in kind.buffers.items()}
        self.valid: dict[str, np.ndarray] = {}
        self.effects: dict = {}       # memoised instructions' functional effects (simulator.kernel.cube)
        self.checked: set = set()
        self.runs = WrittenRuns()
        self.pipe_state: dict[str, str] = {}
        self.scalar_state = "idle"
        self.block = -1
        self.launch = ""          # the name of the launch whose block the core runs (for faults)

    def reset_for_block(self, block: int, launch: str = "") -> None:
        self.block, self.launch = block, launch
        self.valid = ByteMaps(self.kind.buffers)   # made on first use: the runs answer most checks
        self.checked: set = set()     # spans known valid in this block (written, or read and checked)
        self.runs = WrittenRuns()     # the same bytes as merged runs (a span inside one is valid)
        self.pipe_state = {p: "idle" for p in self.kind.pipes}
        self.scalar_state = "issuing"

    def without_sanitizer(self) -> None:
        """Fast mode: a fast-forwarded loop never writes what its skipped iterations would have,
        so the block's reads are not checked (the exact modes check them)."""
        self.check_reads = _no_check
        self.record_writes = _no_record

    # ---- the sanitizer: a block reads only bytes it has written -------------------------------
    # Both run for almost every instruction, and most of its spans are already known (in
    # `checked`): that look-up comes first, the run cache and the byte maps only after it.
    def check_reads(self, pipe: str, instr: Instr) -> None:
        """Fault if `instr` reads a byte of a local buffer that this block has not written."""
        reads, checked = instr.reads, self.checked
        if type(reads) is Rows:
            key = reads.key()
            if key in checked:
                return
            lo, hi = reads.extent()
            if self.runs.covers(reads.buf, lo, hi) or rows_of(self.valid[reads.buf], reads).all():
                if len(checked) < CHECKED_SPANS:
                    checked.add(key)
                return
            # else row by row, to name the first unwritten byte
        for span in reads:
            if span in checked:             # bytes once written stay written for the block
                continue
            buf, lo, hi = span
            if not self.runs.covers(buf, lo, hi):
                v = self.valid[buf][lo:hi]
                if not v.all():
                    bad = lo + int(np.argmin(v))
                    raise self.fault(pipe, instr, f"reads {buf}[{lo}:{hi}] but byte {bad} was never "
                                     f"written in this block (missing copy-in or missing flag)")
                self.runs.add(buf, lo, hi)
            if len(checked) < CHECKED_SPANS:
                checked.add(span)

    def record_writes(self, writes: tuple | Rows) -> None:
        """The bytes an instruction has written are valid for the rest of the block."""
        checked = self.checked
        if type(writes) is Rows:
            key = writes.key()
            if key not in checked:
                buf = writes.buf
                lo, hi = writes.extent()
                if not self.runs.covers(buf, lo, hi):
                    rows_of(self.valid[buf], writes)[...] = True
                    if writes.pitch == writes.n:     # one run
                        self.runs.add(buf, lo, hi)
                if len(checked) < CHECKED_SPANS:
                    checked.add(key)
            return
        for span in writes:
            if span not in checked:
                buf, lo, hi = span
                if not self.runs.covers(buf, lo, hi):
                    self.valid[buf][lo:hi] = True
                    self.runs.add(buf, lo, hi)
                if len(checked) < CHECKED_SPANS:
                    checked.add(span)

    def fault(self, pipe: str, instr: Instr | None, reason: str) -> KernelError:
        where = f"core {self.name} (block {self.block}), {pipe}"
        if instr is not None:
            where += f", {instr.describe()}"
        return KernelError(f"{where}: {reason}{self.in_launch()}")

    def in_launch(self) -> str:
        """' (launch NAME)' for a fault message: a call has several launches."""
        return f" (launch {self.launch})" if self.launch else ""


@dataclass
class Group:
    """The cores that run one block of a launch together: on A2 a mix kernel's block is one AIC
    and its AIVs (sharing data only through GM, synchronised by cross-core flags); otherwise one
    core. `participants` counts the launch's cores per kind (for mode-0 cross-core barriers)."""
    launch_id: int
    block: int
    cores: list[CoreState]
    participants: dict[str, int]
    record: int = 0              # the launch's index in its task's TaskRecord.launches

    def aic(self) -> CoreState | None:
        return next((c for c in self.cores if "cube" in c.kind.units and "vector" not in c.kind.units), None)

    def aivs(self) -> list[CoreState]:
        return [c for c in self.cores if "vector" in c.kind.units and "cube" not in c.kind.units]


def _no_check(pipe: str, instr: Instr) -> None:
    return None


def _no_record(writes) -> None:
    return None
