"""What the engine keeps while it runs: a stream task's record (TaskRecord, with a LaunchRecord per
kernel launch: the source of the report and the trace), a core's state (CoreState: its buffers,
flags and what each pipe is doing) and the cores that run one block together (Group)."""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from .enums import KernelError
from .profile import CoreKind
from .program import Instr


@dataclass
class LaunchRecord:
    name: str
    block_dim: int
    core_kind: str
    start: float = 0.0
    end: float = 0.0
    cores_start: float | None = None      # when its first block started on a core (after the overhead)


@dataclass
class BlockRecord:
    """What one core did for one block of a launch (msprof op's per-block rows)."""
    launch: int                  # index in TaskRecord.launches
    block: int
    sub_block: int               # the core's place in its group (AIVs of a mix block: 0, 1)
    core: str
    core_kind: str
    start: float
    end: float
    busy: dict[str, float]       # pipe -> busy cycles (PIPE_S: the scalar unit's own work)
    instructions: dict[str, int]  # pipe -> instructions executed (flags excluded)
    path_bytes: dict[str, int]   # data path -> bytes
    l2: tuple[int, int, int, int]  # L2 lines: read hits, read misses, write hits, write misses


@dataclass
class TaskRecord:
    """What one stream task (an executor run) did: the source of its report and trace."""
    label: str
    start: float = 0.0
    end: float = 0.0
    launches: list[LaunchRecord] = field(default_factory=list)
    busy: dict[tuple[str, str], float] = field(default_factory=dict)   # (core, pipe) -> cycles busy
    work: dict[tuple[str, str], float] = field(default_factory=dict)   # same, without contention
    path_bytes: dict[str, int] = field(default_factory=dict)
    path_parts: dict[tuple, float] = field(default_factory=dict)    # (core index, pipe, path) -> cycles
    l2_bytes: int = 0            # GM traffic of the cores (all of it passes through L2)
    hbm_bytes: int = 0           # what reached device memory: read misses and dirty evictions
    l2_hit_lines: int = 0
    l2_miss_lines: int = 0
    instructions: int = 0
    cores_used: dict[str, set] = field(default_factory=dict)             # core kind -> core names
    trace: list[tuple] = field(default_factory=list)   # (core index, pipe, name, start, dur, GM bytes)
    lines: dict[tuple, list] = field(default_factory=dict)  # (core index, (file, line), pipe) -> [instructions, cycles]
    blocks: list[BlockRecord] = field(default_factory=list)
    flows: list[tuple] = field(default_factory=list)   # (core index, set pipe, wait pipe, set at, waited until)
    error: str | None = None

    @property
    def path_cycles(self) -> dict[str, float]:
        """Cycles per data path, summed in (core, pipe) order: the same bits whatever order the
        cores' pipes finished in."""
        out: dict[str, float] = {}
        for (_, _, path), cycles in sorted(self.path_parts.items()):
            out[path] = out.get(path, 0.0) + cycles
        return out

    def sorted_trace(self) -> list[tuple]:
        """The trace in (core, pipe, start) order, each pipe's instructions in the order it ran
        them: one order whatever order the engine appended them in (sums over it are reproducible)."""
        return sorted(self.trace, key=lambda t: (t[0], t[1], t[3]))


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
