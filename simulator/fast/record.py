"""What fast mode did in a task, as the report shows it (FastRecord)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FastRecord:
    """What fast mode did in a task: instructions simulated and fast-forwarded, and the bound."""
    skipped: int = 0             # instructions fast-forwarded (estimated from the windows)
    # (launch, core) -> bound cycles of the blocks that core ran in that launch
    bounds: dict[tuple[int, str], float] = field(default_factory=dict)
    fast_forwarded: dict[tuple[int, str], float] = field(default_factory=dict)   # same key: cycles
    # launch -> device memory's cycles for what its skips' L2 touches wrote back (dirty lines
    # evicted, writes gone through): write-back of the skipped time that the windows'
    # extrapolation may not have paid (the windows may have evicted clean lines, or none, where
    # the skipped periods evicted dirty ones, or written before the L2 filled)
    writeback: dict[int, float] = field(default_factory=dict)
    # launch -> what its shadows may be off by: the representatives' spread, excess, grouping
    sampling: dict[int, float] = field(default_factory=dict)
    shadowed: int = 0            # blocks run as a representative's shadow
    shadow_recorded: int = 0     # instructions they recorded (their GM transfers crossed, the rest not run)

    def add_block(self, launch: int, core: str, bound: float, skipped_time: float) -> None:
        key = (launch, core)
        self.bounds[key] = self.bounds.get(key, 0.0) + bound
        self.fast_forwarded[key] = self.fast_forwarded.get(key, 0.0) + skipped_time

    def bound_cycles(self) -> float:
        """The task's bound: per launch, the core with the largest (its blocks run one after
        another; the cores run side by side), its unpaid write-back and its shadows' sampling
        bound, summed over the launches (one after another)."""
        per_core: dict[int, float] = {}
        for (launch, _), b in self.bounds.items():
            per_core[launch] = max(per_core.get(launch, 0.0), b)
        return float(sum(per_core.values()) + sum(self.writeback.values()) + sum(self.sampling.values()))

    def to_dict(self, cycles: float, instructions: int) -> dict:
        """The report's `fast` entry: `instructions` is the task's count, fast-forwarded included."""
        bound = self.bound_cycles()
        simulated = instructions - self.skipped
        return {"simulated_instructions": simulated, "fast_forwarded_instructions": self.skipped,
                "simulated_fraction": simulated / instructions if instructions else 1.0,
                "bound_cycles": bound, "bound_fraction": bound / cycles if cycles else 0.0,
                "shadowed_blocks": self.shadowed, "recorded_instructions": simulated + self.shadow_recorded,
                "exact": bound == 0.0 and self.skipped == 0 and self.shadowed == 0}
