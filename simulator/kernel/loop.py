"""`Loop`: a kernel loop the engine can see, so that fast mode can fast-forward it.

    for tile in Loop(tiles, period=2):          # a double-buffered loop over tiles
        ...
    for item in Loop(items, key=lambda it: it.rows):   # items of different shapes
    for i in Loop(steps, period=2, touches=nominal_touches):   # gathers / scatters declared

In the exact modes (functional, timing) `Loop` is its iterations, nothing more: the program is
what the plain `for` would record. In fast mode a run of interchangeable iterations (consecutive
ones with the same `key`; all of them without one) is recorded only in part: a warm-up, two
measured windows of `period` iterations and a tail, with the iterations between them never run
at all, and the engine adds what they would have cost (simulator/fast.py). `period` is the loop's
buffer rotation (2 where iterations alternate two buffers or event ids), so that the iterations
around the skip alternate as in the whole loop. Iterations must be interchangeable in cost: the
same instructions on operands of the same sizes (their addresses may differ). A loop whose
iterations differ (a partial last tile, a first iteration that waits for something) gives them a
`key` that tells them apart, or runs them outside the Loop. Where the two windows differ all the
same (a key that calls unlike iterations alike), the run is recorded whole from there on.

A key is a promise fast mode cannot check between its windows, and so is the period: the lines
the skipped iterations leave in the L2 are extrapolated from the windows, each transfer moved by
what it moved from window 1 to window 2. Gathers and scatters do not move by one step a period
(their nominal addresses follow the data's geometry): a loop that has them declares `touches`,
a function of an iteration giving the `NominalRows` its gathers and scatters show the L2 (made
by `nominal_rows` from the same tensors, params and nominal offsets), and the skipped periods
put those lines in the L2 instead of extrapolated ones. Those rows also tell the periods of a
gather loop apart before they run (PeriodClasses: a period that re-reads recent lines runs
faster where the L2 is small), and where a skip's periods fall in two classes the windows take
one of each. A Loop's body must also run every iteration (no `break`: fast mode would not see
it). `audit_loops()` checks the key and the period: in the exact modes
every `Loop` then records each iteration and reports one that fast mode would take on trust
(past the warm-up and the two windows of a run whose windows are alike, before its tail) although
its cost shapes differ from the iteration a period before it, or although a GM transfer of it
(gathers and scatters aside) did not move by the step it moved a period before, or changed its
rows' layout; and, for every iteration of a Loop with `touches`, gathers and scatters other than
it declares.
"""
from __future__ import annotations

import sys
import threading
from collections import deque
from contextlib import contextmanager
from typing import Callable, Hashable, Iterable, Iterator, NamedTuple, TypeVar

import numpy as np

from ..fast import DEFAULT_SCHEDULE
from ..l2_cache import range_lines
from ..skipped_lines import first_address, first_lost_period, is_indirect, kept_periods, lines_lost, new_lines
from .indirect import NominalRows
from ..program import Rows
from ..recorder import current_context

T = TypeVar("T")


def Loop(iterations: int | Iterable[T], key: Callable[[T], Hashable] | None = None,
         period: int = 1, touches: Callable[[T], Iterable] | None = None) -> Iterable[T]:
    """The iterations (an int n means range(n)) of a loop that fast mode may fast-forward;
    `touches(item)`: the NominalRows of the item's gathers and scatters, if it has any."""
    items = range(iterations) if isinstance(iterations, int) else iterations
    if period < 1:
        raise ValueError(f"Loop: period must be >= 1, got {period}")
    ctx = current_context()
    audit = _audit.current
    if audit is not None:
        caller = sys._getframe(1)
        where = f"{caller.f_code.co_filename.rsplit('/', 1)[-1]}:{caller.f_lineno}"
        if ctx.fast is None:
            return _audited(ctx, list(items), key, period, where, audit, touches)
        audit.found.setdefault((where, "recorded in fast mode: not audited (audit an exact mode's run)"), set())
    if ctx.fast is None:
        return items
    return _fast_forwarded(ctx, list(items), key, period, touches)


class DeclaredRows:
    """The GM rows a Loop's `touches` declares for its iterations, each made once: (addresses,
    lengths, write flags) per iteration (a run's skipped periods and the classes of its periods
    both read them)."""
    __slots__ = ("items", "touches", "memo")

    def __init__(self, items: list, touches: Callable):
        self.items, self.touches = items, touches
        self.memo: dict[int, tuple] = {}

    def of(self, first: int, count: int, keep: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Iterations first .. first + count - 1's rows, in their order (None for none); `keep`:
        remember them (a pass over a whole run would hold every row until the segment ends)."""
        parts = []
        for k in range(max(first, 0), min(first + count, len(self.items))):
            got = self.memo.get(k)
            if got is None:
                got = _rows(declared_rows(self.touches, self.items[k]))
                if keep:
                    self.memo[k] = got
            if got is not None:
                parts.append(got)
        if not parts:
            return None
        return tuple(np.concatenate(x) for x in zip(*parts)) if len(parts) > 1 else parts[0]

    def read_lines(self, first: int, count: int, line: int, keep: bool = True) -> np.ndarray:
        """The L2 lines (address // `line`) iterations first .. first + count - 1 read, distinct."""
        rows = self.of(first, count, keep)
        if rows is None:
            return np.empty(0, np.int64)
        addr, n, write = rows
        sel = ~write & (n > 0)
        a, n = addr[sel], n[sel]
        return np.unique(range_lines(a // line, (a + n - 1) // line + 1)[0])


def _rows(declared: list) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    if not declared:
        return None
    addr = [np.asarray(t.bases, dtype=np.int64) if t.rows == 1 else
            (np.asarray(t.bases, dtype=np.int64)[:, None] + t.pitch * np.arange(t.rows)).ravel() for t in declared]
    counts = [a.size for a in addr]
    k = len(declared)
    size = np.repeat(np.fromiter((t.n for t in declared), np.int64, k), counts)
    write = np.repeat(np.fromiter((bool(t.write) for t in declared), bool, k), counts)
    return np.concatenate(addr), size, write


class DeclaredTouches:
    """A skip's gathers and scatters where their Loop declares them (`touches`): the GM rows of
    its last periods, those the L2 will take (kept_periods), made as the skip is recorded (the
    kernel, and the program it is recording, are not kept for the L2 to ask later). `strata`:
    the skip's classes of periods where it has them (Strata), else None. `kept`: how many of its
    last periods the L2 takes, the one count both the rows made here and the L2's touches use."""
    __slots__ = ("rows", "strata", "kept")

    def __init__(self, declared: DeclaredRows, start: int, skip: int, period: int, kept: int, strata=None):
        self.rows: dict[int, tuple] = {}
        self.strata, self.kept = strata, kept
        for j in range(skip // period - kept + 1, skip // period + 1):
            got = declared.of(start + (j - 1) * period, period)
            if got is not None:
                self.rows[j] = got

    def rows_per_period(self) -> int:
        """The most rows a period holds."""
        return max((r[0].size for r in self.rows.values()), default=0)

    def period_rows(self, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(addresses, lengths, write flags) of the GM rows skipped period j (from 1) gathers and
        scatters, in its iterations' order (none for a period before the first kept)."""
        got = self.rows.get(j)
        return got if got is not None else (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool))


class Strata(NamedTuple):
    """A skip whose periods are not all alike in what they read (a gather loop where one period
    in a few re-reads lines a recent period read): window 1 and window 2 are placed on
    periods of two classes, window 2 on the most common one, and each skipped period is taken to
    cost window 2's figures plus, in proportion to how far its count of newly read lines lies
    from window 2's towards window 1's, their difference (simulator.fast.Meter)."""
    new1: int          # lines window 1's period reads that the 4 periods before it did not (PeriodClasses)
    new2: int          # the same for window 2's period
    excess: float      # the skipped periods' sum of (their count - new2)


class PeriodClasses:
    """How many L2 lines each period of a run reads, by its Loop's declared gathers, that none of
    the few periods before it read: what tells one period of a gather loop from another before it
    runs (where the L2 does not hold the loop's reads for long, a period that re-reads recent
    lines runs faster: docs/FAST_MODE.md)."""
    SAMPLE = 16        # periods sampled to see whether a skip's periods differ from window 2's
    WHOLE = 128        # a skip of up to this many periods is counted whole, a longer one sampled
    SEARCH = 8         # periods the windows may move to find two classes
    SHORTEST = 8       # a shorter skip is too few periods to tell classes in
    TOLERANCE = 0.05   # counts within this share (or one line) are one class
    BACK = 4           # periods looked back: lines read that recently are taken to be in the L2

    def __init__(self, declared: DeclaredRows, start: int, period: int, line: int, l2=None):
        self.declared, self.start, self.period, self.line = declared, start, period, line
        self.l2 = l2                  # the L2 as the loop is recorded
        self.lines: dict[int, set] = {}
        self.counts: dict[int, int] = {}

    def _read_lines(self, q: int) -> set:
        got = self.lines.get(q)
        if got is None:
            first = self.start + q * self.period
            got = set(self.declared.read_lines(first, self.period, self.line).tolist()) if first >= 0 else set()
            self.lines[q] = got
        return got

    def _new_lines(self, q: int) -> set:
        return self._read_lines(q).difference(*(self._read_lines(q - b) for b in range(1, self.BACK + 1)))

    def new(self, q: int) -> int:
        """Lines period q (from the run's start) reads that the BACK periods before it did not."""
        got = self.counts.get(q)
        if got is None:
            got = self.counts[q] = len(self._new_lines(q))
        return got

    def _held(self, periods: list[int]) -> float:
        """The share of these periods' newly read lines the L2 holds already."""
        lines = set().union(*(self._new_lines(q) for q in periods))
        if self.l2 is None or not lines:
            return 0.0
        return float(np.count_nonzero(self.l2.held(np.fromiter(lines, np.int64, len(lines))))) / len(lines)

    def _alike(self, a: float, b: float) -> bool:
        return abs(a - b) <= max(1.0, self.TOLERANCE * abs(b))

    def _periods(self, first: int, count: int, most: int) -> list[int]:
        if count <= most:
            return list(range(first, first + count))
        return sorted({first + (k * count) // most for k in range(most)})

    def placement(self, w1: int, skip_first: int, skip_periods: int) -> int | None:
        """How many periods to move the windows (window 1 at period w1, window 2 after it) so that
        window 2 is of the skip's most common class and window 1 of the class that pulls the
        skip's mean away from it; None where a sample of the skip's periods are all window 2's
        class, share no common class, or read newly what the L2 mostly holds (then the skip has
        no strata); 0 where no such pair is near."""
        if skip_periods < self.SHORTEST:
            return None
        sampled = self._periods(skip_first, skip_periods, self.SAMPLE)
        sample = [self.new(q) for q in sampled]
        if all(self._alike(x, self.new(w1 + 1)) for x in sample):
            return None
        mean = sum(sample) / len(sample)
        common = float(np.median(sample))
        if 2 * sum(self._alike(x, common) for x in sample) < len(sample):
            return None             # (no class most periods share: counts scattered, not classes)
        if 2 * self._held(sampled) >= 1.0:
            return None             # (the L2 holds what they newly read: a re-read period gains nothing)
        for shift in range(min(self.SEARCH, skip_periods - 2) + 1):
            n1, n2 = self.new(w1 + shift), self.new(w1 + shift + 1)
            if self._alike(n2, common) and not self._alike(n1, n2) and (n1 - n2) * (mean - n2) > 0:
                return shift
        return 0

    LOSING = 0.1       # a loop losing this share of what it brings to its reads of held lines changes regime

    def losing(self, skip_first: int, skip_periods: int, inflow: int, cores: int) -> bool:
        """Whether the L2 as the loop is recorded, full, loses to the loop's own new lines (`inflow` a
        period, on every core) many of the held lines a sample of its periods newly read before
        they read them (skipped_lines.lines_lost): per period, at least LOSING of what one core's
        part of the inflow is. Those reads hit in the windows and miss later; an estimate, only for
        telling a loop that loses a few lines from one that loses its input. A skip of under
        SHORTEST periods is not asked: by lines or by bytes, its few periods leave about the same
        lines."""
        if self.l2 is None or inflow <= 0 or skip_periods < self.SHORTEST:
            return False
        sampled = self._periods(skip_first, skip_periods, self.SAMPLE)
        reads = ((q, np.fromiter(self._new_lines(q), np.int64)) for q in sampled)
        lost = lines_lost(self.l2, reads, self.l2.free_bytes() / self.line, inflow)
        return lost >= self.LOSING * inflow / max(cores, 1) * len(sampled)

    def strata(self, w1: int, skip_first: int, skip_periods: int) -> Strata | None:
        """The windows' counts (window 1 at period w1) and the skip's excess over window 2's, or
        None where the windows are of one class or the skip's mean count does not lie between
        theirs (a share of window 1's difference from 1 to 0: no extrapolation)."""
        n1, n2 = self.new(w1), self.new(w1 + 1)
        if skip_periods < self.SHORTEST or self._alike(n1, n2):
            return None
        qs = self._periods(skip_first, skip_periods, self.WHOLE // 2 if skip_periods > self.WHOLE else self.WHOLE)
        excess = sum(self.new(q) - n2 for q in qs) * skip_periods / len(qs)
        share = excess / skip_periods / (n1 - n2)
        if not 0.0 < share <= 1.0 or self._alike(n2 + excess / skip_periods, n2):
            return None
        return Strata(n1, n2, excess)


def declared_rows(touches: Callable, item) -> list:
    """What `touches` declares for an iteration, checked to be NominalRows."""
    got = list(touches(item))
    for t in got:
        if not isinstance(t, NominalRows):
            raise TypeError(f"Loop touches({item!r}) must give NominalRows (simulator.kernel.indirect."
                            f"nominal_rows), got {t!r}")
    return got


def _fast_forwarded(ctx, items: list, key, period: int, touches) -> Iterator:
    """Fast mode: each run of interchangeable iterations, with its middle fast-forwarded (in two
    segments, each measured, where the loop's new lines would fill the L2 during one skip: the
    first up to the fill, the second in the regime after it, its windows a few periods later).
    Where the Loop declares its gathers and their periods read unlike (PeriodClasses), its windows
    move to take a period of each class."""
    n, i = len(items), 0
    l2_spec = ctx.profile.l2
    cores = min(ctx.block_num, ctx.core.kind.count)
    declared_rows_of = DeclaredRows(items, touches) if touches is not None else None
    while i < n:
        j = i + 1
        if key is None:
            j = n
        else:
            k = key(items[i])
            while j < n and key(items[j]) == k:
                j += 1
        filled = False          # a segment of this run has filled the L2 with its own lines
        # where the run's new lines outgrow the L2's free room as it begins (`fills`), the iteration
        # at which it first reads a line the L2 held before it began that its own lines have
        # evicted by then: a regime the windows before it do not see
        start, lost, fills = i, None, False
        l2 = ctx.device.l2                # (its free room cuts the first segment only)
        settle = False          # the segment follows an L2 cut: its windows wait for the new regime
        while i < j:
            split = ctx.fast.split(j - i, period, settle)
            if split is None:
                yield from items[i:j]
                i = j
                break
            head, skip = split
            classes = probe = None
            sampled = (head // period, skip // period)     # the periods the classes sample
            if declared_rows_of is not None:
                declared_rows_of.memo.clear()     # (rows are kept for one segment at a time)
                probe = classes = PeriodClasses(declared_rows_of, i, period, l2_spec.line_bytes, ctx.device.l2)
                shift = classes.placement(head // period - 2, *sampled)
                if shift is None:
                    classes = None
                elif shift:
                    head, skip = head + shift * period, skip - shift * period
            run = None
            for r in range(head):
                if r == head - 2 * period:
                    run = ctx.loop_mark(None, 0)
                elif r == head - period:
                    ctx.loop_mark(run, 1)
                yield items[i + r]
            if not ctx.windows_alike():     # the key called unlike iterations alike: no skip here
                ctx.loop_mark(run, 2, 0, period)
                yield from items[i + head:j]
                i = j
                break
            if not filled:      # (once filled, the L2 holds this loop's newest lines: no new regime)
                cut, by_size = ctx.fast.within_l2(skip, period, ctx.open_windows[-1], l2_spec.bytes,
                                                  l2_spec.line_bytes, cores, l2)
                if l2 is not None and cut < skip and not by_size and declared_rows_of is not None:
                    fills = True
                    lost = _first_lost(declared_rows_of, start, j, period, ctx.open_windows[-1], l2, cores)
                elif l2 is not None and cut < skip and probe is not None:     # (full as the loop begins)
                    fills = probe.losing(*sampled, _inflow(ctx.open_windows[-1], l2, cores), cores)
                l2 = None
                settle = cut < skip
                filled, skip = cut < skip and by_size, cut
            if lost is not None and i + head + skip > lost >= i + head:     # (a whole number of periods)
                skip, settle, filled = lost - i - head, True, False
            declared = None
            if touches is not None and skip:
                kept = kept_periods(ctx.open_windows[-1], skip // period, l2_spec.bytes // l2_spec.line_bytes
                                    * l2_spec.line_bytes, l2_spec.line_bytes, cores if fills else ctx.core.kind.count,
                                    fills)
                strata = classes and classes.strata(head // period - 2, head // period, skip // period)
                declared = DeclaredTouches(declared_rows_of, i + head, skip, period, kept, strata)
            ctx.loop_mark(run, 2, skip, period, declared)
            i += head + skip


def _first_lost(declared: DeclaredRows, start: int, end: int, period: int, windows, l2, cores: int) -> int | None:
    """The iteration at which a run (items start .. end - 1) whose new lines will fill the L2
    first reads a line the L2 held before the run but has evicted since (skipped_lines.
    first_lost_period, from the declared reads of each period and the L2 as the run is
    recorded); None for none."""
    line = l2.line
    reads = ((q, declared.read_lines(start + q * period, period, line, keep=False))
             for q in range((end - start) // period))
    q = first_lost_period(l2, reads, l2.free_bytes() / line, _inflow(windows, l2, cores))
    return None if q is None else start + q * period


def _inflow(windows, l2, cores: int) -> int:
    """Lines a loop brings into the L2 a period, on every core running it: those window 2
    touches that window 1 did not and the L2 as the loop is recorded does not hold."""
    return int(np.count_nonzero(~l2.held(new_lines(windows, l2.line)))) * max(cores, 1)


class _AuditState:
    """One audit_loops(): what it found, (where, what) -> the blocks it was found in, and the
    Loops it audited (per block, source line and call: a block recorded twice, or a kernel run
    again after a warm-up, counts once)."""

    def __init__(self, before: "_AuditState | None"):
        self.before, self.closed = before, False
        self.found: dict[tuple[str, str], set[int]] = {}
        self.loops: set[tuple] = set()
        self.skippable: set[tuple] = set()


class _Audit:
    current: _AuditState | None = None     # the innermost open audit (recording threads see it too)


_audit = _Audit()
_audit_lock = threading.Lock()


class LoopFindings(list):
    """audit_loops()'s findings, one line each (filled when the audit ends); `loops` counts the
    Loops it audited (per block), `skippable` those with a run long enough for fast mode to
    fast-forward a part."""
    loops = skippable = 0


@contextmanager
def audit_loops():
    """Within it, every `Loop` recorded in an exact mode checks its key and period. Yields a
    LoopFindings, filled as the audit ends: per place and finding, the blocks it was found in."""
    with _audit_lock:
        state = _audit.current = _AuditState(_audit.current)
    findings = LoopFindings()
    try:
        yield findings
    finally:
        with _audit_lock:
            state.closed = True
            if _audit.current is state:
                before = state.before
                while before is not None and before.closed:
                    before = before.before
                _audit.current = before
        findings.loops, findings.skippable = len(state.loops), len(state.skippable)
        for (where, what), blocks in state.found.items():
            on = f" (block{'s' if len(blocks) > 1 else ''} {', '.join(map(str, sorted(blocks)))})" if blocks else ""
            findings.append(f"{where}: {what}{on}")


def _trusted(keys: list, period: int) -> list[int | None]:
    """Per iteration, where its run of one key starts if fast mode would take it for window 2
    instead of recording it (the skipped span after a run's warm-up and windows), else None.
    Where the L2 cuts a skip, fast mode measures the rest of the run again: its later segments'
    warm-ups and windows are recorded, not trusted, and this span covers them too (the audit
    checks a little more than fast mode trusts, never less)."""
    n = len(keys)
    out: list[int | None] = [None] * n
    start = 0
    for i in range(1, n + 1):
        if i < n and keys[i] == keys[start]:
            continue
        split = DEFAULT_SCHEDULE.split(i - start, period)
        if split is not None:
            head, skip = split
            out[start + head:start + head + skip] = [start] * skip
        start = i
    return out


def _audited(ctx, items: list, key, period: int, where: str, state: _AuditState, touches=None) -> Iterator:
    """The iterations, each recorded with its cost shapes and GM transfers, and each that fast
    mode would take on trust compared with the two a period and two periods before it (one
    finding per run of one key)."""
    keys = [key(x) if key is not None else None for x in items]
    trusted = _trusted(keys, period)
    calls = ctx.block_memo["audited loops"] = ctx.block_memo.get("audited loops", 0) + 1
    loop_id = (where, ctx.block_idx, ctx.sub_block, calls)
    state.loops.add(loop_id)
    if any(t is not None for t in trusted):
        state.skippable.add(loop_id)
    last: deque = deque(maxlen=2 * period)     # the latest iterations' (cost shapes, placements)
    reported = None                            # the run (its first iteration) with a finding already
    opened = None                              # the run whose skipped span has begun
    undeclared = False                         # an iteration's gathers and scatters differed from `touches`
    ctx.open_windows.append([[]])
    ctx.open_shapes.append([[]])
    try:
        for r, x in enumerate(items):
            yield x
            shapes, moves = ctx.open_shapes[-1][-1], ctx.open_windows[-1][-1]
            ctx.open_shapes[-1][-1], ctx.open_windows[-1][-1] = [], []
            now = (shapes, [_placement(i) for i in moves])
            if touches is not None and not undeclared:
                why = _undeclared(moves, declared_rows(touches, x))
                if why:
                    undeclared = True          # (one finding per Loop)
                    state.found.setdefault((where, f"iteration {r} {why}"), set()).add(ctx.block_idx)
            run = trusted[r]
            if run is not None and run != opened:      # (the last 2 periods are its two windows)
                opened = run
                windows = [it[0] for it in last]
                if sum(windows[:period], []) != sum(windows[period:], []):
                    reported = run     # unlike windows: fast mode sees them and records the run whole
            if run is not None and run != reported:
                why = _unlike(last[-2 * period], last[-period], now, r, period)
                if why:
                    reported = run
                    key_text = "" if key is None else f" (key {keys[r]!r})"
                    state.found.setdefault((where, f"iteration {r}{key_text} {why}"), set()).add(ctx.block_idx)
            last.append(now)
    finally:
        ctx.open_windows.pop()
        ctx.open_shapes.pop()


def _undeclared(moves: list, declared: Iterable) -> str | None:
    """How an iteration's gathers and scatters differ from the NominalRows its Loop declares
    for it, or None."""
    def row(start, n, pitch, count, write):
        return int(start), int(n), int(pitch) if count > 1 else 0, int(count), bool(write)
    issued = sorted(row(i.gm.start, i.gm.n, i.gm.pitch, i.gm.count, i.gm_write) for i in moves if is_indirect(i))
    said = sorted(row(b, t.n, t.pitch, t.rows, t.write) for t in declared for b in np.asarray(t.bases).tolist())
    if issued == said:
        return None
    known = set(said)
    extra = next((r for r in issued if r not in known), None)
    return (f"issues {len(issued)} gather/scatter row set(s), its Loop's touches declare {len(said)}"
            + (f" (issued, not declared: {extra[3]} row(s) of {extra[1]} B at 0x{extra[0]:x})" if extra else ""))


def _unlike(before2, before, now, r: int, period: int) -> str | None:
    """How iteration r (`now`: its cost shapes and transfers' placements) is not what a skip
    would take it for, given the iterations a period and two periods before it, or None."""
    a, b = before[0], now[0]
    if a != b:
        at = next((k for k, (u, v) in enumerate(zip(a, b)) if u != v), min(len(a), len(b)))
        return (f"differs from iteration {r - period} at its instruction {at} of {len(b)}: "
                f"{_shape_text(b[at]) if at < len(b) else 'none'} against "
                f"{_shape_text(a[at]) if at < len(a) else 'none'}")
    for k, (x, y, z) in enumerate(zip(before2[1], before[1], now[1])):
        if None in (x, y, z):
            continue
        what = f"its GM transfer {k} ({z[2]})"
        if z[1] != y[1]:
            return (f"lays out {what} as {_layout_text(z[1])}, iteration {r - period} as "
                    f"{_layout_text(y[1])} (a skip repeats the windows' layout)")
        if z[0] - y[0] != y[0] - x[0]:
            return (f"moves {what} by {z[0] - y[0]} bytes from iteration {r - period}, which moved "
                    f"it by {y[0] - x[0]} (a skip extrapolates one step per period)")
    return None


def _shape_text(shape: tuple) -> str:
    pipe, kind, cycles, path, nbytes, _, flag = shape
    what = f"{path} {nbytes} B" if path else f"kind {kind}"
    return f"{pipe} {what}, {cycles:.6g} cycles" + (f", flag {flag}" if flag is not None else "")


def _layout_text(layout: tuple) -> str:
    if layout[0] == "rows":
        return f"{layout[3]} row(s) of {layout[1]} B, {layout[2]} B apart"
    ranges = layout[1]
    shown = ", ".join(f"+{o}:{n} B" for o, n in ranges[:4])
    return f"{len(ranges)} ranges ({shown}{', ...' if len(ranges) > 4 else ''})"


def _placement(instr) -> tuple | None:
    """A GM transfer's first address, its layout relative to it, and its name; None for a gather
    or scatter, which the L2 sees at the nominal addresses its kernel declares (not one step a
    period: docs/FAST_MODE.md)."""
    if is_indirect(instr):
        return None
    gm = instr.gm
    a0 = first_address(gm)
    if type(gm) is Rows:            # (one row's pitch moves nothing)
        return a0, ("rows", gm.n, gm.pitch if gm.count > 1 else 0, gm.count), instr.name
    return a0, ("ranges", tuple((a - a0, n) for a, n in gm)), instr.name
