"""Every setting of fast mode, in one FastSchedule: how much of a loop run is simulated, how a skip
is bounded, how periods of a gather loop are told apart, and how alike blocks are grouped. Each
setting says what it rests on."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class FastSchedule:
    """Every setting fast mode has (docs/FAST_MODE.md gives the measurements behind each)."""
    # -- a loop run: warm-up | window 1 | window 2 | skip | tail (each a whole number of periods)
    warmup_periods: int = 1      # periods before the first window: the pipeline fills in one (warm-ups of
                                 # 1-24 periods moved no shipped call's error past its bound)
    tail_periods: int = 0        # periods after the skip: the seam is itself an ordinary step, none needed
    # more warm-up for a segment after an L2 cut: the write-back the fill starts takes periods to
    # reach its pace (SiLU calls that fill the L2 mid-loop: up to 4 % short with none, within 1 % with 3)
    settle_periods: int = 3
    unmeasured: float = 0.01     # bound added per fast-forwarded cycle, for the L2 and channel state
                                 # the windows cannot see (the campaigns' skips alone: under 1 %)
    # -- a gather loop's classes of periods (l2.PeriodClasses), by the lines its declared reads
    # newly touch: GridSampler2DBackward 3 x 16 x 127 x 67 FP16 on one core of Ascend910_9392
    # (2 MB L2) runs one period in five or six 11 % faster; windows on two ordinary ones put it
    # +1.90 % from the exact engine, outside its 0.96 % bound; with classes, within it
    class_lookback: int = 4      # periods looked back: lines read that recently are taken to be in the L2
    class_sample: int = 16       # periods sampled to see whether a skip's periods differ from window 2's
    class_whole: int = 128       # a skip of up to this many periods is counted whole, a longer one sampled
    class_long_sample: int = 64  # periods sampled from a longer one, evenly spaced: a bound on CPU time, not a
                                 # measured optimum (counting a skip whole reads every period's declared rows)
    class_search: int = 8        # periods the windows may move to find a period of each class
    class_shortest: int = 8      # a shorter skip is too few periods to tell classes in
    class_tolerance: float = 0.05   # counts within this share (or one line) are one class
    # a skip has classes only where at least this share of its sampled periods' counts lie in the
    # median's class; else its counts are scattered, not classes, and it keeps the plain windows
    class_common_share: float = 0.5
    # where the L2 holds this share of what a skip's periods newly read, a period that re-reads
    # recent lines gains nothing: no classes (the DETR encoder's loops on Ascend910B1 hold all of
    # them; measuring their classes there cost 1.5x the CPU time for the same cycles)
    class_held_share: float = 0.5
    # a loop whose skips would evict, per period, this share of one core's inflow from held lines it
    # reads later changes regime (GridSampler2DBackward 8 x 32 x 106 x 130 on Ascend910B4, campaign
    # seed 61 call 14: its skips must leave the lines they bring, or it reads -14.7 %)
    losing_share: float = 0.1
    # -- alike blocks (shadows.AlikeBlocks): shadows per representative, and the bound's share for
    # how their grouping shifts the channels' queues: with 8 a representative, GridSampler calls on
    # Ascend910B4 went 1.26-1.45 % short against bounds of 0.8-1.2 %; with 2, within 0.2 %; 120
    # shadowed campaign calls against every block simulated moved at most 2.8 % of their launch
    shadows_per_representative: int = 2
    grouping: float = 0.03
    # a block whose two windows both lie this share (and more than they differ) on one side of the
    # pace its alike blocks share, and whose reads miss in the L2 more (or less) often than theirs
    # by this share of their rate, keeps its own (SkipBarrier.block_pace): GridSampler N8 C64
    # 128x128 on Ascend910B4, whose blocks with evicted input miss on about half their reads and
    # end 28 % after the rest, was 14 % short with the shared pace; 3.6-3.9 % short with a share
    # of 2-10 % (5.1 % at 15 %, as one of them no longer qualifies)
    systematic_share: float = 0.05

    def __post_init__(self):
        if not 0 < self.class_long_sample <= self.class_whole:
            raise ValueError(f"FastSchedule: class_long_sample ({self.class_long_sample}) must lie in 1 .. "
                             f"class_whole ({self.class_whole}): it samples skips longer than that")

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
