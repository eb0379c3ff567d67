"""Fast mode's segment planning (simulator.fast.segments.SegmentPlanner) apart from the engine: over
random runs, periods, windows and L2 states, the segments it plans are whole periods that never
reach past the run, and planning only reads the L2 (the engine's L2 as the loop is recorded is
the one the block then runs against: a plan that touched it would change the exact figures the
windows measure)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.fast import FastSchedule
from simulator.fast.segments import SegmentPlanner, runs
from simulator.l2_cache import L2Cache
from simulator.program import Instr

LINE = 512
TENSOR = 1 << 22          # one GM allocation of 4 MB the windows and the earlier traffic read


class _Alloc:
    addr, size = 0, TENSOR


def _find(addr):
    return _Alloc if 0 <= addr < TENSOR else None


def _l2_state(l2: L2Cache):
    return (l2.resident, l2.clock, l2.hit_lines, l2.miss_lines,
            {k: (m.tolist(), s.tolist()) for k, (m, s) in l2.tags.items()})


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 400), period=st.integers(1, 4), cores=st.integers(1, 8),
       l2_kb=st.sampled_from([16, 64, 256]), step=st.integers(0, 8192), nbytes=st.integers(1, 4096),
       earlier=st.integers(0, 300), seed=st.integers(0, 2 ** 16))
def test_segments_are_whole_periods_inside_the_run_and_leave_the_l2_as_it_was(
        length, period, cores, l2_kb, step, nbytes, earlier, seed):
    rng = np.random.default_rng(seed)
    l2 = L2Cache(l2_kb << 10, LINE, _find)
    for a in rng.integers(0, TENSOR - 4096, earlier):          # what the L2 holds as the loop begins
        l2.access(((int(a), 4096),), bool(rng.integers(2)))
    before = _l2_state(l2)
    start = int(rng.integers(0, 1 << 20))

    def window(k):
        return [Instr("PIPE_MTE2", "DataCopy", gm=((start + (k * period + p) * step, nbytes),)) for p in range(period)]

    spec = SimpleNamespace(bytes=l2_kb << 10, line_bytes=LINE)
    planner = SegmentPlanner(FastSchedule(), spec, l2, 0, length, period, None, cores, 8)
    i, skipped = 0, 0
    while i < length:
        head = planner.head(i)
        if head is None:
            break
        assert head.iterations % period == 0 and head.skip % period == 0
        skip = planner.skip(i, head, [window(1), window(2)])
        assert skip.iterations % period == 0 and 0 <= skip.iterations <= head.skip
        assert i + head.iterations + skip.iterations <= length
        skipped += skip.iterations
        i += head.iterations + skip.iterations
    assert skipped <= length
    assert _l2_state(l2) == before


@given(keys=st.lists(st.integers(0, 2), max_size=30))
def test_runs_are_the_maximal_runs_of_equal_keys(keys):
    got = list(runs(keys, lambda k: k))
    assert [k for a, b in got for k in keys[a:b]] == keys
    assert all(len(set(keys[a:b])) == 1 for a, b in got)
    assert all(keys[b - 1] != keys[b] for _, b in got[:-1])
    assert list(runs(keys, None)) == ([(0, len(keys))] if keys else [])
