"""Every setting of fast mode, in one FastSchedule: how much of a loop run is simulated, how a skip
is bounded, how periods of a gather loop are told apart, and how alike blocks are grouped. Each
setting says what it rests on."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FastSchedule:
    """How much of a run of interchangeable iterations fast mode simulates."""
    warmup_periods: int = 1      # periods before the first window (the pipeline fills)
    tail_periods: int = 0        # periods after the skip (the seam is itself an ordinary step: none needed)
    unmeasured: float = 0.01     # bound added per fast-forwarded cycle (L2 and channel state)
    # more warm-up for a segment after an L2 cut: the write-back the fill starts takes periods to
    # reach its pace (SiLU calls that fill the L2 mid-loop: up to 4 % short with none, within 1 % with 3)
    settle_periods: int = 3

    def split(self, length: int, period: int, settle: bool = False) -> tuple[int, int] | None:
        """(iterations simulated before the skip, iterations skipped) for a run of `length`
        interchangeable iterations (`settle`: the segment follows an L2 cut), or None when the run
        is too short to be worth a skip."""
        head = (self.warmup_periods + 2) * period
        extra = self.settle_periods * period if settle else 0
        skip = length - extra - head - self.tail_periods * period
        skip -= skip % period
        if skip < max(head, 2):          # a short run: its transient would weigh too much
            return None
        return head + extra, skip


DEFAULT_SCHEDULE = FastSchedule()
