"""What a stream task did, kept as it runs: a TaskRecord per task, with a LaunchRecord per kernel
launch and a BlockRecord per block on a core. The report, the trace and msprof read them."""
from __future__ import annotations

from dataclasses import dataclass, field

from .fast import FastRecord


@dataclass
class LaunchRecord:
    """One kernel launch of a task: when it was launched, when its blocks started and ended."""
    name: str
    block_dim: int
    core_kind: str
    start: float = 0.0
    end: float = 0.0
    cores_start: float | None = None      # when its first block started on a core (after the overhead)
    cores_end: float | None = None        # when its last block ended (before the dispatch tail)
    dispatch_waits: float = 0.0           # staggered: cycles the hand-out waited between blocks

    def core_cycles(self) -> float:
        """Its time on the cores without the launch overhead, the tail or the hand-out's waits
        (msprof's aicore_time: a block's own time, start included)."""
        return ((self.end if self.cores_end is None else self.cores_end)
                - (self.start if self.cores_start is None else self.cores_start) - self.dispatch_waits)


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
    hbm_opened: int = 0          # device memory's time opening the pieces it fetched, in bytes' worth
    l2_hit_lines: int = 0
    l2_miss_lines: int = 0
    instructions: int = 0
    cores_used: dict[str, set] = field(default_factory=dict)             # core kind -> core names
    trace: list[tuple] = field(default_factory=list)   # (core index, pipe, name, start, dur, GM bytes)
    lines: dict[tuple, list] = field(default_factory=dict)  # (core index, (file, line), pipe) -> [instructions, cycles]
    blocks: list[BlockRecord] = field(default_factory=list)
    flows: list[tuple] = field(default_factory=list)   # (core index, set pipe, wait pipe, set at, waited until)
    error: str | None = None
    fast: FastRecord | None = None   # fast mode: what was simulated, what fast-forwarded, the bound

    @property
    def path_cycles(self) -> dict[str, float]:
        """Cycles per data path, summed in (core, pipe) order: the same bits whatever order the
        cores' pipes finished in."""
        out: dict[str, float] = {}
        for (_, _, path), cycles in sorted(self.path_parts.items()):
            out[path] = out.get(path, 0.0) + cycles
        return out

    def book_line(self, core: int, line: tuple[str, int] | None, pipe: str, cycles: float) -> None:
        """Book an instruction's cycles on a core's pipe to the source line that issued it."""
        st = self.lines.get((core, line, pipe))
        if st is None:
            self.lines[core, line, pipe] = [1, cycles]
        else:
            st[0] += 1
            st[1] += cycles

    def sorted_trace(self) -> list[tuple]:
        """The trace in (core, pipe, start) order, each pipe's instructions in the order it ran
        them: one order whatever order the engine appended them in (sums over it are reproducible)."""
        return sorted(self.trace, key=lambda t: (t[0], t[1], t[3]))
