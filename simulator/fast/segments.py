"""How fast mode records a declared loop (simulator.kernel.Loop): each run of interchangeable
iterations split into a warm-up, two measured windows and a skip, in segments where the L2 would
change regime during one skip, with the marks the engine's actors meet.

The planning is `SegmentPlanner`'s, apart from the engine: given where a segment starts it says
how many iterations to record before the skip (`Head`), and given the two windows those recorded
it says how many to skip and what the skip leaves in the L2 (`Skip`), asking the segment's
l2.L2Projection. `fast_forwarded` only yields the iterations and places the marks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .l2 import DeclaredTouches, L2Projection, PeriodClasses
from .schedule import FastSchedule


@dataclass(frozen=True)
class Head:
    """What a segment records before its skip: `iterations` (warm-up, window 1, window 2) and the
    skip it plans for (`planned_skip`, iterations; cut once the windows are seen). `sampled`: the
    planned skip as (first period, periods) from the segment's start, before the classes moved the
    windows; `probe`: the segment's PeriodClasses where the Loop declares its gathers (asked
    whether the run loses its input), and `classes` the same where they placed the windows, else
    None."""
    iterations: int
    planned_skip: int
    sampled: tuple[int, int]
    classes: PeriodClasses | None
    probe: PeriodClasses | None


@dataclass(frozen=True)
class Skip:
    """What a segment fast-forwards after its windows: `iterations` (a whole number of periods)
    and the gathers and scatters of its last periods the L2 takes (`declared`, or None)."""
    iterations: int
    declared: DeclaredTouches | None


class SegmentPlanner:
    """One run of interchangeable iterations (items start .. end - 1) split into segments. It reads
    the L2 as the run is recorded (`l2`, never written) and the Loop's declared rows (`declared`,
    or None); what one segment decided that the next must know (the L2 filled by the run's own
    lines, the iteration at which it first loses a held line, a segment that must settle) it
    carries."""

    def __init__(self, schedule: FastSchedule, l2_spec, l2, start: int, end: int, period: int, declared,
                 cores: int, cores_of_kind: int):
        if l2 is not None and l2.line != l2_spec.line_bytes:
            raise ValueError(f"the L2's line ({l2.line} B) is not its profile's ({l2_spec.line_bytes} B)")
        self.schedule, self.l2_spec, self.l2 = schedule, l2_spec, l2
        self.start, self.end, self.period, self.declared = start, end, period, declared
        self.cores, self.cores_of_kind = cores, cores_of_kind
        self.filled = False     # a segment of this run has filled the L2 with its own lines
        # where the run's new lines outgrow the L2's free room as it begins (`fills`), the iteration
        # at which it first reads a line the L2 held before it began that its own lines have
        # evicted by then: a regime the windows before it do not see
        self.lost: int | None = None
        self.fills = False
        self.first_cut = True   # the L2's free room cuts the first segment only
        self.settle = False     # the segment follows an L2 cut: its windows wait for the new regime

    def head(self, i: int) -> Head | None:
        """The segment starting at iteration i: what it records before its skip, or None where what
        is left is too short to skip (it is recorded whole). Where the Loop declares its gathers and
        their periods read unlike (PeriodClasses), its windows move to take a period of each class."""
        period = self.period
        split = self.schedule.split(self.end - i, period, self.settle)
        if split is None:
            return None
        head, skip = split
        classes = probe = None
        sampled = (head // period, skip // period)
        if self.declared is not None:
            self.declared.memo.clear()     # (rows are kept for one segment at a time)
            probe = classes = PeriodClasses(self.declared, i, period, self.l2_spec.line_bytes, self.l2, self.schedule)
            shift = classes.placement(head // period - 2, *sampled)
            if shift is None:
                classes = None
            elif shift:
                head, skip = head + shift * period, skip - shift * period
        return Head(head, skip, sampled, classes, probe)

    def skip(self, i: int, head: Head, windows) -> Skip:
        """The skip of the segment starting at iteration i, once its two windows (`windows`: their
        transfers) are recorded: cut where the loop's new lines would fill the L2 (the rest of the
        run is measured again in the regime after the fill, its windows a few periods later) and
        where the run first reads a held line its own lines have evicted."""
        period, spec, skip = self.period, self.l2_spec, head.planned_skip
        l2 = self.l2 if self.first_cut else None
        projection = L2Projection(windows, spec.bytes, spec.line_bytes, self.cores, l2)
        if not self.filled:     # (once filled, the L2 holds this loop's newest lines: no new regime)
            cut, by_size = projection.cut(self.schedule, skip, period, head.iterations // period)
            if l2 is not None and cut < skip and not by_size and self.declared is not None:
                self.fills = True
                self.lost = projection.first_lost(self.declared, self.start, self.end, period)
            elif l2 is not None and cut < skip and head.probe is not None:     # (full as the loop begins)
                self.fills = projection.loses_input(head.probe, *head.sampled)
            self.first_cut = False
            self.settle = cut < skip
            self.filled, skip = cut < skip and by_size, cut
        lost = self.lost
        if lost is not None and i + head.iterations + skip > lost >= i + head.iterations:   # (whole periods)
            skip, self.settle, self.filled = lost - i - head.iterations, True, False
        declared = None
        if self.declared is not None and skip:
            kept = projection.kept(skip // period, self.cores if self.fills else self.cores_of_kind, self.fills)
            w1 = head.iterations // period - 2
            strata = head.classes and head.classes.strata(w1, head.iterations // period, skip // period)
            declared = DeclaredTouches(self.declared, i + head.iterations, skip, period, kept, strata)
        return Skip(skip, declared)


def runs(items: list, key) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of consecutive items with the same key (all of them without one)."""
    n, i = len(items), 0
    while i < n:
        j = n
        if key is not None:
            j, k = i + 1, key(items[i])
            while j < n and key(items[j]) == k:
                j += 1
        yield i, j
        i = j


def fast_forwarded(ctx, items: list, key, period: int, declared_rows_of) -> Iterator:
    """Fast mode: each run of interchangeable iterations, with its middle fast-forwarded as
    SegmentPlanner plans it; the marks tell the engine where its windows start and where it skips."""
    cores = min(ctx.block_num, ctx.core.kind.count)
    for start, end in runs(items, key):
        planner = SegmentPlanner(ctx.fast, ctx.profile.l2, ctx.device.l2, start, end, period, declared_rows_of,
                                 cores, ctx.core.kind.count)
        i = start
        while i < end:
            head = planner.head(i)
            if head is None:
                yield from items[i:end]
                break
            run = None
            for r in range(head.iterations):
                if r == head.iterations - 2 * period:
                    run = ctx.loop_mark(None, 0)
                elif r == head.iterations - period:
                    ctx.loop_mark(run, 1)
                yield items[i + r]
            if not ctx.windows_alike():     # the key called unlike iterations alike: no skip here
                ctx.loop_mark(run, 2, 0, period)
                yield from items[i + head.iterations:end]
                break
            skip = planner.skip(i, head, ctx.open_windows[-1])
            ctx.loop_mark(run, 2, skip.iterations, period, skip.declared)
            i += head.iterations + skip.iterations
