"""One actor's figures at a loop's marks (Meter), the two windows it measured (Window), and the
bound of a skip from its pipes' windows (skip_bound)."""
from __future__ import annotations

from dataclasses import dataclass

from ..program import LoopMark


class Meter:
    """One actor's figures at a loop's marks, and what its fast-forwards have added."""
    __slots__ = ("marks", "extra")

    def __init__(self):
        self.marks: dict[int, list[dict]] = {}   # loop token -> its figures at the windows' starts
        self.extra: dict = {}                    # figure -> added by fast-forwards so far

    def virtual(self, figures: dict) -> dict:
        """The figures as the whole run would have them by now (the skips' additions included)."""
        extra = self.extra
        return {k: v + extra.get(k, 0) for k, v in figures.items()}

    def mark(self, mark: LoopMark, figures: dict, strata=None) -> Window | None:
        """The actor meets `mark` (phase 0, 1: a window starts; 2: the skip) of its loop run; at
        the skip, its windows (and its figures gain the skipped periods'). With `strata`
        (l2.Strata: the windows on periods of two classes), each skipped period gains window 2's
        figures plus window 1's difference from them in proportion to how far its class lies
        from window 2's towards window 1's."""
        token, phase, skip, period = mark.run, mark.phase, mark.skip, mark.period
        now = self.virtual(figures)
        if phase < 2:
            self.marks.setdefault(token, []).append(now)
            return None
        start1, start2 = self.marks.pop(token)
        periods = skip / period
        toward1 = strata.excess / (strata.new1 - strata.new2) if strata is not None else 0.0
        extra = self.extra
        work = []
        for k, v in now.items():
            step = v - start2.get(k, 0)
            add = periods * step
            if toward1:
                add += toward1 * (start2.get(k, 0) - start1.get(k, 0) - step)
            if add:
                extra[k] = extra.get(k, 0) + add
            if step and (k == "executed" or (type(k) is tuple and k[0] == "bytes")):
                work.append((repr(k), step))
        first, second = start2["time"] - start1["time"], now["time"] - start2["time"]
        spans = ((start1, start2), (start2, now))     # window 1, window 2
        reads = tuple(sum(b.get(("l2", i), 0) - a.get(("l2", i), 0) for i in (0, 1)) for a, b in spans)
        misses = tuple(b.get(("l2", 1), 0) - a.get(("l2", 1), 0) for a, b in spans)
        busy = now.get("busy", 0.0) - start2.get("busy", 0.0)
        if toward1 and periods:
            # the skip's pace is the classes' mix; what the bound takes for a steady state not
            # reached is then the whole of the mix's correction (window 1 might have been a transient)
            shift = toward1 * (first - second) / periods
            busy += toward1 * (start2.get("busy", 0.0) - start1.get("busy", 0.0) - busy) / periods
            # (a window next to a period of another class catches the pipes out of phase: over
            # the two windows they keep one pace, which is what the pipes' spread compares)
            return Window(periods, first, second + shift, busy, tuple(sorted(work)), abs(shift), (first + second) / 2,
                          reads, misses)
        return Window(periods, first, second, busy, tuple(sorted(work)), abs(second - first), second, reads, misses)


@dataclass(frozen=True)
class Window:
    """One actor's two measured windows of a fast-forwarded loop run (cycles per period)."""
    periods: float               # periods skipped
    first: float
    second: float                # what each skipped period was taken to cost
    busy: float                  # the actor's busy cycles in the second window
    work: tuple = ()             # its instructions and bytes per path in the second window
    drift: float = 0.0           # how far the pace may be from a steady state's, per period
    steady: float = 0.0          # what the pipes' spread compares: window 2, or with classes the two windows' mean
    reads: tuple = (0, 0)        # L2 lines its GM reads touched in window 1 and in window 2
    misses: tuple = (0, 0)       # of those, the lines the L2 did not hold


def skip_bound(windows: list[Window]) -> tuple[float, Window | None]:
    """A loop run's bound, and the window that sets its pace, from its pipes' windows. In a
    steady state every pipe that works in the loop keeps one pace (the busiest pipe's) and the
    pace repeats: the bound is the skipped periods times the larger of the spread of the working
    pipes' second windows and the change of the busiest pipe's window from the first to the
    second."""
    active = [w for w in windows if w.busy > 0] or windows
    if not active:
        return 0.0, None
    pace = max(active, key=lambda w: w.busy)
    spread = max(w.steady for w in active) - min(w.steady for w in active)
    return pace.periods * max(spread, pace.drift), pace
