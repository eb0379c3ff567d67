"""Fast mode's segment planning (simulator.fast.segments.SegmentPlanner) apart from the engine, over
random runs, periods, windows, declared gathers and L2 states (seeded draws; a test below checks
they reach every kind of cut, so that none of these can pass by never planning one):

* segments are whole periods that never reach past the run;
* planning never writes the L2 (the engine's L2 as the loop is recorded is the one the block
  then runs against: a plan that touched it would change what the windows measure), and a
  run's skips read it only at the first (the regime it holds as the run begins);
* a segment after an L2 cut takes the settling periods (FastSchedule.settle_periods) before its
  windows, and (until the L2 holds the run's own lines) its new lines from its start to its
  skip's end fit in the L2;
* no skip passes over the iteration at which the run first reads a held line its own lines
  have evicted (a regime its windows did not see)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.fast import FastSchedule
from simulator.fast.l2 import PeriodClasses
from simulator.fast.segments import SegmentPlanner, runs
from simulator.kernel.indirect import NominalRows
from simulator.kernel.loop import DeclaredRows
from simulator.l2_cache import L2Cache
from simulator.program import Instr

LINE = 512
TENSOR = 1 << 22          # one GM allocation of 4 MB that the windows, the gathers and the earlier traffic touch


class _Alloc:
    addr, size = 0, TENSOR


def _find(addr):
    return _Alloc if 0 <= addr < TENSOR else None


class _ReadOnlyL2:
    """The L2 as the planner may see it: its reads pass through (and are counted), a write fails."""

    def __init__(self, l2: L2Cache):
        self._l2, self.reads = l2, 0

    def __getattr__(self, name):
        if name in ("access", "touch", "forget"):
            raise AssertionError(f"planning wrote the L2 ({name})")
        self.reads += 1
        return getattr(self._l2, name)


class _Declared(DeclaredRows):
    """A Loop's declared gathers given as their rows, per iteration (addresses, lengths, write
    flags) or None, in place of a kernel's `touches`; the rest is DeclaredRows' own."""

    def __init__(self, rows: list):
        super().__init__(rows, None)

    def _make(self, ks, keep: bool) -> dict:
        made = {k: self.items[k] for k in ks if k not in self.memo}
        if keep:
            self.memo.update(made)
        return made


def _scenario(seed: int):
    """A run's length and period, its windows' transfers, its declared gathers (some runs: one period
    in five or six re-reading what the period before read), and an L2 holding earlier traffic."""
    rng = np.random.default_rng(seed)
    length, period = int(rng.integers(1, 1200)), int(rng.choice([1, 1, 2, 3]))
    step = int(rng.choice([0, 512, 1024, 4096, int(rng.integers(1, 20000))]))
    nbytes, l2_kb = int(rng.integers(1, 4096)), int(rng.choice([16, 64, 256, 1024]))
    hot = int(rng.integers(1, 1 << 13)) * LINE
    rows = None
    if rng.random() < 0.7:
        per, every, classes = int(rng.choice([1, 4, 16])), int(rng.choice([5, 6])), rng.random() < 0.5
        rows = []
        for k in range(length):
            again = classes and (k // period) % every == 0
            addr = (rng.integers(0, hot, per) // 64 * 64 + (0 if again else k * step)) % (TENSOR - 8192)
            rows.append((addr.astype(np.int64), np.full(per, int(rng.choice([64, 256, 512, 2048])), np.int64),
                         rng.random(per) < 0.2))
    l2 = L2Cache(l2_kb << 10, LINE, _find)
    for k, a in enumerate(rng.integers(0, min(2 * hot, TENSOR - 4096), int(rng.choice([0, 50, 400, 4000])))):
        l2.access(((int(a), 4096),), k % 3 == 0)
    start = int(rng.integers(0, 1 << 20))

    def window(k):
        return [Instr("PIPE_MTE2", "DataCopy", gm=(((start + (k * period + p) * step) % (TENSOR - 8192), nbytes),))
                for p in range(period)]

    return dict(length=length, period=period, l2=l2, l2_kb=l2_kb, declared=rows,
                windows=[window(1), window(2)], cores=int(rng.integers(1, 48)), of_kind=int(rng.choice([1, 8, 48])))


def _new_lines(windows) -> int:
    """How many L2 lines window 2's transfers touch that window 1's do not."""
    def lines(window):
        return {line for instr in window for a, n in instr.gm for line in range(a // LINE, (a + n - 1) // LINE + 1)}
    return len(lines(windows[1]) - lines(windows[0]))


def _l2_state(l2: L2Cache):
    return (l2.resident, l2.clock, l2.hit_lines, l2.miss_lines,
            {k: (m.tolist(), s.tolist()) for k, (m, s) in l2.tags.items()})


def _plan(sc, seen: dict):
    """Plans the scenario's run segment by segment, checking each, and counts in `seen` the kinds
    of segment met."""
    schedule, period, length = FastSchedule(), sc["period"], sc["length"]
    l2 = _ReadOnlyL2(sc["l2"])
    spec = SimpleNamespace(bytes=sc["l2_kb"] << 10, line_bytes=LINE)
    declared = _Declared(sc["declared"]) if sc["declared"] is not None else None
    planner = SegmentPlanner(schedule, spec, l2, 0, length, period, declared, sc["cores"], sc["of_kind"])
    i, first, settle = 0, True, False
    new = _new_lines(sc["windows"])
    while i < length:
        head = planner.head(i)
        expected = schedule.split(length - i, period, settle) if settle is not None else None
        if head is None:
            assert settle is None or expected is None
            break
        assert head.iterations % period == 0 and head.planned_skip % period == 0
        if head.classes is None and settle is not None:  # settling periods after a cut (classes move windows)
            assert head.iterations == expected[0]
        seen["classes"] += head.classes is not None
        reads, filled = l2.reads, planner.filled
        skip = planner.skip(i, head, sc["windows"])
        assert first or l2.reads == reads, "a skip after the run's first read the L2"
        n = skip.iterations
        assert n % period == 0 and 0 <= n <= head.planned_skip
        if first:      # the run's new lines of one skip fit in the L2
            assert n // period * new * LINE * sc["cores"] <= sc["l2_kb"] << 10
        elif not filled:   # after a cut, with those of the periods it records first: from the segment's start
            assert (n + head.iterations) // period * new * LINE * sc["cores"] <= sc["l2_kb"] << 10 or n == 0
        # the next segment settles after a cut, not after the run's first uncut skip (else: as the one before)
        first, settle = False, True if n < head.planned_skip else (False if first else None)
        assert i + head.iterations + n <= length
        lost = planner.lost
        if lost is not None:
            seen["lost"] += 1
            assert not i + head.iterations < lost < i + head.iterations + n, "a skip passed the first lost read"
        seen["cut"] += n < head.planned_skip
        seen["declared"] += skip.declared is not None
        i += head.iterations + n


def test_segments_over_random_runs():
    seen = dict.fromkeys(("classes", "lost", "cut", "declared"), 0)
    for seed in range(60):
        sc = _scenario(seed)
        before = _l2_state(sc["l2"])
        _plan(sc, seen)
        assert _l2_state(sc["l2"]) == before
    assert all(seen.values()), f"the draws missed a kind of segment: {seen}"


def test_the_schedule_refuses_a_long_sample_over_the_whole():
    with pytest.raises(ValueError, match="class_long_sample"):
        FastSchedule(class_whole=32, class_long_sample=64)


@given(keys=st.lists(st.integers(0, 2), max_size=30))
def test_runs_are_the_maximal_runs_of_equal_keys(keys):
    got = list(runs(keys, lambda k: k))
    assert [k for a, b in got for k in keys[a:b]] == keys
    assert all(len(set(keys[a:b])) == 1 for a, b in got)
    assert all(keys[b - 1] != keys[b] for _, b in got[:-1])
    assert list(runs(keys, None)) == ([(0, len(keys))] if keys else [])


def test_period_classes_count_the_lines_no_recent_period_read():
    """PeriodClasses.new(q), made from a Loop's declared NominalRows in one pass over many periods,
    against the definition in plain sets: the lines (address // line) period q's reads touch that
    none of the class_lookback periods before it touched (writes and empty rows touch none; a
    period starting before the run's first iteration reads nothing)."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        length, period, back = int(rng.integers(1, 40)), int(rng.integers(1, 4)), int(rng.integers(1, 6))
        start = int(rng.integers(-6, 6))
        shapes = [(int(rng.integers(1, 4)), int(rng.choice([0, 64, 512, 3000]))) for _ in range(3)]
        table = []
        for _k in range(length):
            copies = []
            for _c in range(int(rng.integers(0, 4))):
                rows, pitch = shapes[int(rng.integers(0, 3))]
                bases = rng.integers(0, 1 << 16, int(rng.integers(0, 5))) * int(rng.choice([1, 32, 512]))
                copies.append(NominalRows(bases, int(rng.choice([0, 1, 256, 700, 2048])), pitch, rows, bool(rng.random() < 0.3)))
            table.append(copies)

        def lines_of(q: int) -> set:
            out = set()
            if start + q * period < 0:
                return out
            for k in range(max(start + q * period, 0), min(start + (q + 1) * period, length)):
                for c in table[k]:
                    for b in c.bases.tolist():
                        for r in range(c.rows):
                            a = b + r * c.pitch
                            if c.n > 0 and not c.write:
                                out.update(range(a // LINE, (a + c.n - 1) // LINE + 1))
            return out

        classes = PeriodClasses(DeclaredRows(list(range(length)), lambda k: table[k]), start, period, LINE,
                                schedule=FastSchedule(class_lookback=back))
        qs = sorted({int(q) for q in rng.integers(-3, length // period + 3, 6)})
        classes._count(qs[:3])            # (some made together, the rest one at a time)
        for q in qs:
            expected = len(lines_of(q).difference(*(lines_of(q - b) for b in range(1, back + 1))))
            assert classes.new(q) == expected, (q, start, period, back)
