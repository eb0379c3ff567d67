"""What the L2 holds around a skip: the lines a fast-forwarded loop's skipped periods leave in it
(their GM ranges, each transfer's extrapolated from the two measured windows one period apart or,
for gathers and scatters a Loop declares, their nominal rows); L2Projection, the one LRU order
that says where a skip must stop for the L2 to keep its regime, where a run first reads a line
its own new lines have evicted and how many skipped periods the L2 keeps; and which of a gather
loop's periods differ in what they newly read (PeriodClasses). `declared` below is a Loop's DeclaredRows
(simulator.kernel.loop): the GM rows its `touches` declares, per iteration."""
from __future__ import annotations

from functools import cached_property
from typing import NamedTuple

import numpy as np

from ..l2_cache import range_lines, unique_sorted
from ..program import Instr, Rows
from .schedule import FastSchedule


def first_address(gm) -> int | None:
    """Where a transfer's GM ranges start (None for none)."""
    if type(gm) is Rows:
        return gm.start
    return gm[0][0] if gm else None


class WindowTransfers(list):
    """A measured window's GM transfers, in program order (a list, as the recorder appends them),
    remembering their rows once expanded: the L2's projection and the skip's touches both read
    window 2's."""
    __slots__ = ("gm_rows",)


def _gm_rows(window: list[Instr]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The GM ranges of a window's transfers in program order, expanded in one go: (addresses,
    lengths, the index in `window` of the transfer each belongs to). A pair is a row of one."""
    got = getattr(window, "gm_rows", None)
    if got is None:
        got = _expand_rows(window)
        if type(window) is WindowTransfers:
            window.gm_rows = got
    return got


def _expand_rows(window: list[Instr]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, owners = [], []
    for k, instr in enumerate(window):
        if instr.l2_bypass:          # (not cached: leaves nothing in the L2)
            continue
        gm = instr.gm
        if type(gm) is Rows:
            rows.append((gm.start, gm.n, gm.pitch, gm.count))
            owners.append(k)
        else:
            rows.extend((a, n, 0, 1) for a, n in gm)
            owners.extend([k] * len(gm))
    r = np.array(rows, dtype=np.int64).reshape(-1, 4)
    count = r[:, 3]
    row = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    addr = np.repeat(r[:, 0], count) + np.repeat(r[:, 2], count) * row
    return addr, np.repeat(r[:, 1], count), np.repeat(np.array(owners, dtype=np.int64), count)


def _lines(window: list[Instr], line: int) -> np.ndarray:
    """The L2 lines (address // line) a window's GM transfers touch, distinct, ascending."""
    if not window:
        return np.empty(0, np.int64)
    addr, n, _ = _gm_rows(window)
    keep = n > 0
    return unique_sorted(range_lines(addr[keep] // line, (addr[keep] + n[keep] - 1) // line + 1)[0])


# skipped periods' ranges are made this many at a time (bounded memory)
TOUCH_CHUNK = 1 << 16


def skipped_touches(windows: tuple, periods: int, keep: int, spans, rows: int = TOUCH_CHUNK,
                    chunk_bytes: int | None = None):
    """The GM ranges the last `keep` of `periods` skipped periods would have touched, in chunks
    of about `rows` ranges as (addresses, lengths, write flags, allocation bases, periods), oldest
    period first and in each period its reads before its writes (the order the L2 should take
    them in). `windows`: (window 1, window 2, declared). Each transfer's addresses are
    extrapolated from window 1 to window 2 (one period apart), but for gathers and scatters where
    their Loop declares them (`declared`, DeclaredTouches below): their nominal rows. A range
    outside every allocation (an extrapolated address past a tensor's end) is left out. Windows of different shapes give
    nothing (the loop was not periodic in its transfers). `spans` are the device allocations'
    (first byte, past the last byte), ascending. A chunk holds at most `chunk_bytes` of window
    2's ranges (its declared rows aside), but at least one period: the L2 evicts after each
    chunk, so a skip that fills it loses its oldest lines as it goes, not all at its end."""
    window1, window2, declared = windows
    if len(window1) != len(window2) or keep <= 0:
        return
    valid, steps, writes = [], [], []
    for a, b in zip(window1, window2):
        writes.append(b.gm_write)
        first = None if declared and is_indirect(b) else first_address(a.gm)
        moved_to = None if first is None else first_address(b.gm)
        valid.append(moved_to is not None)
        steps.append(0 if moved_to is None else moved_to - first)
    addr, n, owner = _gm_rows(window2)
    sel = np.array(valid, dtype=bool)[owner]
    addr, n, owner = addr[sel], n[sel], owner[sel]
    steps = np.array(steps, dtype=np.int64)
    write = np.array(writes, dtype=bool)[owner]
    order = np.argsort(write, kind="stable")     # reads first, each in program order
    addr, n, write, step = addr[order], n[order], write[order], steps[owner[order]]
    if addr.size == 0 and not declared:
        return
    bases, limits = spans
    per_chunk = max(1, rows // max(len(addr) + (declared.rows_per_period() if declared else 0), 1))
    if chunk_bytes is not None and addr.size:
        per_chunk = max(1, min(per_chunk, chunk_bytes // max(int(n.sum()), 1)))
    for j0 in range(periods - keep + 1, periods + 1, per_chunk):
        if per_chunk == 1 or j0 == periods:     # (one period: no tiling, reads first by one stable sort)
            yield _one_period(addr + j0 * step, n, write, declared.period_rows(j0) if declared else None,
                              j0, bases, limits)
            continue
        j = np.arange(j0, min(j0 + per_chunk, periods + 1), dtype=np.int64)[:, None]
        at = (addr + j * step).ravel()       # period-major
        reps = j.shape[0]
        nn, ww = np.tile(n, reps), np.tile(write, reps)
        period = np.repeat(j[:, 0], addr.size)
        if declared:          # each period's declared rows beside its own, reads first
            got = [declared.period_rows(int(k)) for k in j[:, 0]]
            at = np.concatenate([at] + [r[0] for r in got])
            nn = np.concatenate([nn] + [r[1] for r in got])
            ww = np.concatenate([ww] + [r[2] for r in got])
            period = np.concatenate([period] + [np.full(r[0].size, k) for k, r in zip(j[:, 0], got)])
            order = np.lexsort((ww, period))
            at, nn, ww, period = at[order], nn[order], ww[order], period[order]
        ok, base = _inside(at, nn, bases, limits)
        yield at[ok], nn[ok], ww[ok], base, period[ok]


def _one_period(at, n, write, declared_rows, period: int, bases, limits):
    """skipped_touches' chunk of one period: its ranges and its declared rows (if any), reads
    first, those inside an allocation."""
    if declared_rows is not None:
        at = np.concatenate((at, declared_rows[0]))
        n = np.concatenate((n, declared_rows[1]))
        write = np.concatenate((write, declared_rows[2]))
        order = np.argsort(write, kind="stable")
        at, n, write = at[order], n[order], write[order]
    ok, base = _inside(at, n, bases, limits)
    return at[ok], n[ok], write[ok], base, np.full(base.size, period, np.int64)


def _inside(at, n, bases, limits):
    """Which ranges lie inside an allocation (`bases`, `limits` ascending), and the base of each
    that does."""
    owner = np.searchsorted(bases, at, side="right") - 1
    ok = owner >= 0
    owner[~ok] = 0
    ok &= at + n <= limits[owner]
    return ok, bases[owner[ok]]


def touch_together(l2, sources: list) -> tuple[int, int]:
    """The L2 takes the skipped periods of several blocks' runs (`sources`: skipped_touches
    generators) period by period, each period's ranges block after block, as blocks running side
    by side would leave them (one block's periods after another's would leave its lines the
    oldest). Returns, as L2Cache.touch does, (bytes its reads fetched from device memory, bytes
    written back: dirty lines evicted and writes gone through)."""
    crossed = dirty = 0
    live = list(sources)
    while live:
        parts, still = [], []
        for g in live:
            chunk = next(g, None)
            if chunk is not None:
                parts.append(chunk)
                still.append(g)
        live = still
        if not parts:
            break
        at, n, write, base, period = (np.concatenate(x) for x in zip(*parts))
        order = np.argsort(period, kind="stable")
        moved, evicted = l2.touch(at[order], n[order], write[order], base[order])
        crossed += moved
        dirty += evicted
    return crossed, dirty


def is_indirect(instr: Instr) -> bool:
    """A gather or scatter: its L2 address is the nominal one its kernel gives, not one step a
    period from the last."""
    return instr.indirect


class DeclaredTouches:
    """A skip's gathers and scatters where their Loop declares them (`touches`): the GM rows of
    its last periods, those the L2 will take (L2Projection.kept), made as the skip is recorded (the
    kernel, and the program it is recording, are not kept for the L2 to ask later). `strata`:
    the skip's classes of periods where it has them (Strata), else None. `kept`: how many of its
    last periods the L2 takes, the one count both the rows made here and the L2's touches use."""
    __slots__ = ("rows", "strata", "kept")

    def __init__(self, declared, start: int, skip: int, period: int, kept: int, strata=None):
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
    new1: int          # lines window 1's period reads that the class_lookback periods before it did not
    new2: int          # the same for window 2's period
    excess: float      # the skipped periods' sum of (their count - new2)


class PeriodClasses:
    """How many L2 lines each period of a run reads, by its Loop's declared gathers, that none of
    the few periods before it read: what tells one period of a gather loop from another before it
    runs (where the L2 does not hold the loop's reads for long, a period that re-reads recent
    lines runs faster: docs/FAST_MODE.md). Its settings are the schedule's class_* ones."""

    def __init__(self, declared, start: int, period: int, line: int, l2=None,
                 schedule: FastSchedule | None = None):
        self.declared, self.start, self.period, self.line = declared, start, period, line
        self.schedule = schedule or FastSchedule()
        self.l2 = l2                  # the L2 as the loop is recorded
        self.lines: dict[int, np.ndarray] = {}     # period -> the distinct lines it reads, ascending
        self.counts: dict[int, int] = {}

    def _make_lines(self, periods) -> None:
        """The lines of those of these periods (from the run's start) not made yet, made together
        (a period that would start before the run's first iteration reads none)."""
        todo = [q for q in periods if q not in self.lines]
        firsts = [self.start + q * self.period for q in todo]
        made = iter(self.declared.lines_of_ranges([f for f in firsts if f >= 0], self.period, self.line))
        for q, f in zip(todo, firsts):
            self.lines[q] = next(made) if f >= 0 else np.empty(0, np.int64)

    def new_lines(self, q: int) -> np.ndarray:
        """The lines period q (from the run's start) reads that the class_lookback periods before it did not."""
        back = self.schedule.class_lookback
        self._make_lines(range(q - back, q + 1))
        if back < 1:
            return self.lines[q]
        return np.setdiff1d(self.lines[q], np.concatenate([self.lines[q - b] for b in range(1, back + 1)]))

    def new(self, q: int) -> int:
        """Lines period q (from the run's start) reads that the schedule's class_lookback periods before it did not."""
        got = self.counts.get(q)
        if got is None:
            self._count([q])
            got = self.counts[q]
        return got

    def _count(self, qs) -> None:
        """new() of each of these periods, in one pass: every line read in a period and the
        class_lookback before it, ordered by line (periods ascending within one), is new where
        the same line was last read more than class_lookback periods before, or never."""
        back = self.schedule.class_lookback
        todo = sorted({q for q in qs if q not in self.counts})
        if not todo:
            return
        periods = sorted({p for q in todo for p in range(q - back, q + 1)})
        self._make_lines(periods)
        parts = [self.lines[p] for p in periods]
        lines = np.concatenate(parts)
        index = np.repeat(np.arange(len(periods)), [x.size for x in parts])
        order = np.argsort(lines, kind="stable")
        lines, index = lines[order], index[order]
        when = np.asarray(periods, np.int64)[index]
        fresh = np.ones(lines.size, bool)
        fresh[1:] = (lines[1:] != lines[:-1]) | (when[1:] - when[:-1] > back)
        counts = np.bincount(index[fresh], minlength=len(periods))
        at = {p: i for i, p in enumerate(periods)}
        for q in todo:
            self.counts[q] = int(counts[at[q]])

    def _held(self, periods: list[int]) -> float:
        """The share of these periods' newly read lines the L2 holds already."""
        lines = unique_sorted(np.concatenate([self.new_lines(q) for q in periods]))
        if self.l2 is None or not lines.size:
            return 0.0
        return float(np.count_nonzero(self.l2.held(lines))) / lines.size

    def _alike(self, a: float, b: float) -> bool:
        return abs(a - b) <= max(1.0, self.schedule.class_tolerance * abs(b))

    def sample(self, first: int, count: int) -> list[int]:
        """The periods (from the run's start) sampled of a skip's `count` from `first` on."""
        return self._periods(first, count, self.schedule.class_sample)

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
        if skip_periods < self.schedule.class_shortest:
            return None
        sampled = self.sample(skip_first, skip_periods)
        self._count([*sampled, w1 + 1])
        sample = [self.new(q) for q in sampled]
        if all(self._alike(x, self.new(w1 + 1)) for x in sample):
            return None
        mean = sum(sample) / len(sample)
        common = float(np.median(sample))
        if sum(self._alike(x, common) for x in sample) < self.schedule.class_common_share * len(sample):
            return None             # (no class most periods share: counts scattered, not classes)
        if self._held(sampled) >= self.schedule.class_held_share:
            return None             # (the L2 holds what they newly read: a re-read period gains nothing)
        for shift in range(min(self.schedule.class_search, skip_periods - 2) + 1):
            n1, n2 = self.new(w1 + shift), self.new(w1 + shift + 1)
            if self._alike(n2, common) and not self._alike(n1, n2) and (n1 - n2) * (mean - n2) > 0:
                return shift
        return 0

    def strata(self, w1: int, skip_first: int, skip_periods: int) -> Strata | None:
        """The windows' counts (window 1 at period w1) and the skip's excess over window 2's, or
        None where the windows are of one class or the skip's mean count does not lie between
        theirs (a share of window 1's difference from 1 to 0: no extrapolation)."""
        n1, n2 = self.new(w1), self.new(w1 + 1)
        if skip_periods < self.schedule.class_shortest or self._alike(n1, n2):
            return None
        whole = self.schedule.class_whole
        qs = self._periods(skip_first, skip_periods, self.schedule.class_long_sample if skip_periods > whole else whole)
        self._count(qs)
        excess = sum(self.new(q) - n2 for q in qs) * skip_periods / len(qs)
        share = excess / skip_periods / (n1 - n2)
        if not 0.0 < share <= 1.0 or self._alike(n2 + excess / skip_periods, n2):
            return None
        return Strata(n1, n2, excess)


class L2Projection:
    """The L2 around one segment's skip, as LRU holds it: one order, from which every question
    fast mode asks of the L2 is read. As the segment is recorded the L2 holds lines from before
    the loop in LRU order (`l2`; None past the run's first cut, when what it holds is the loop's
    own) with some free room; each period the loop brings the lines window 2 touches that
    window 1 did not (`new`), on every core running it, `inflow` of them lines the L2 lacks.
    Past the free room each line brought evicts the oldest held line the loop has not touched
    since it began: by period q, `inflow x q - free` of the lines from before (`gone`); past one
    L2's worth, the loop's own oldest. Read off that order:

    * `cut`: where the regime changes within a skip (the free room runs out, then the lines from
      before are all gone), which the windows cannot see;
    * `first_lost` / `lines_lost`: the first period at which, and how many, of the loop's reads
      of lines held from before find them gone (`loses_input`: whether that is its input);
    * `kept`: how many of a skip's last periods the L2 still holds after it.

    `inflow` may be given (a loop described by its reads alone, without windows)."""

    def __init__(self, windows, l2_bytes: int, line: int, cores: int, l2=None, inflow: int | None = None):
        self.windows, self.l2_bytes, self.line, self.cores, self.l2 = windows, l2_bytes, line, cores, l2
        self._inflow = inflow

    @cached_property
    def new(self) -> np.ndarray | None:
        """The lines window 2 touches that window 1 did not (None without two windows)."""
        if len(self.windows) < 2:
            return None
        return np.setdiff1d(_lines(self.windows[1], self.line), _lines(self.windows[0], self.line), assume_unique=True)

    def inflow(self) -> int:
        """Lines a period brings that the L2 (as the run is recorded) lacks, on every core running
        the loop."""
        if self._inflow is None:
            self._inflow = int(np.count_nonzero(~self.l2.held(self.new))) * max(self.cores, 1)
        return self._inflow

    def free_lines(self) -> float:
        return self.l2.free_bytes() / self.line

    def gone(self, q: float) -> float:
        """How many lines held from before the loop its own new lines have evicted by period q
        (from the loop's start; none while they fill the free room)."""
        return self.inflow() * q - self.free_lines()

    def cut(self, schedule: FastSchedule, skip: int, period: int, recorded: int = 0) -> tuple[int, bool]:
        """The skip (iterations, after `recorded` periods of the segment), cut to a whole number of
        periods in which the regime holds, and whether the cut was at the L2's size. Given the L2
        as the loop is recorded, first where the free room runs out (less what the segment's head
        fills; an L2 the head fills gives no skip: its windows straddle the fill); the next
        segment then where the lines from before are all gone, one L2's worth of the lines the
        loop newly touches (all of them: held or not, each takes a place among the newest)
        counted from its start, where the L2 filled (skipped one L2's worth from its windows on,
        a segment would carry the write-back of the lines from before the fill, which has ended
        by then, to the run's end); from then on the L2 holds the loop's own newest lines (the
        regime stays). A segment after a cut where the run first loses a held line counts from
        its own start too."""
        if self.new is None:
            return skip, True
        per_period = self.new.size * self.line * max(self.cores, 1)
        if per_period <= 0:
            return skip, True
        fit, by_size = self.l2_bytes // per_period, True
        if self.l2 is not None:
            filling = self.inflow() * self.line
            free = self.l2.free_bytes()
            if 0 < filling <= free:                   # (else nothing to fill, or full already)
                room = max(free - filling * (schedule.warmup_periods + 2), 0)
                if room // filling < fit:
                    fit, by_size = room // filling, False
        else:
            fit = max(fit - recorded, 0)
        return min(skip, fit * period), by_size

    def first_lost(self, declared, start: int, end: int, period: int) -> int | None:
        """The iteration at which the run (items start .. end - 1) first reads, by its declared rows
        (`declared`), a line held from before it that its own new lines have evicted by then, or
        None."""
        reads = ((q, declared.read_lines(start + q * period, period, self.line, keep=False))
                 for q in range((end - start) // period))
        q = self.first_lost_period(reads)
        return None if q is None else start + q * period

    def first_lost_period(self, reads) -> int | None:
        """The first period at which a loop reads a line held from before it that its own new lines
        have evicted by then, or None. `reads`: (period from the loop's start, the lines it reads)
        in period order. The lines from before go in their LRU order, skipping those the loop has
        read since it began (its own newest by then), so one read first at period q is lost when
        more than its rank among the rest have gone by q. Until then the loop's reads of them
        hit, as its windows saw; after, they miss (other cores' reads of them are not seen here:
        they would keep them longer)."""
        order = self.l2.resident_stamps()
        if order.size == 0 or self.inflow() <= 0:
            return None
        seen: set = set()
        refreshed = np.empty(0, np.int64)       # stamps of held lines the loop has read, ascending
        for q, lines in reads:
            gone = self.gone(q)
            fresh = np.fromiter((x for x in lines.tolist() if x not in seen), np.int64)
            if fresh.size == 0:
                continue
            seen.update(fresh.tolist())
            stamps = self.l2.stamps(fresh)
            stamps = stamps[stamps >= 0]
            if stamps.size == 0:
                continue
            if gone > 0:
                rank = np.searchsorted(order, stamps) - np.searchsorted(refreshed, stamps)
                if np.any(rank < gone):
                    return q
            stamps.sort()
            refreshed = np.insert(refreshed, np.searchsorted(refreshed, stamps), stamps)
        return None

    def lines_lost(self, reads) -> int:
        """How many of the lines a loop's sampled periods read (`reads`: (period from the loop's
        start, its lines)) are held from before it but gone by that period: first_lost_period's
        order, counted rather than stopped at, and without its refreshes (a line the loop read in
        an earlier, unsampled period is taken at its old stamp): an estimate of how much of its
        held input a loop loses."""
        order = self.l2.resident_stamps()
        lost = 0
        for q, lines in reads:
            if lines.size == 0:
                continue
            stamps = self.l2.stamps(lines)
            stamps = stamps[stamps >= 0]
            lost += int(np.count_nonzero(np.searchsorted(order, stamps) < self.gone(q)))
        return lost

    def loses_input(self, classes: PeriodClasses, skip_first: int, skip_periods: int) -> bool:
        """Whether the L2, full as the loop is recorded, loses to the loop's own new lines many of
        the held lines a sample of its periods newly read (`classes`: its declared reads) before
        they read them: per period, at least the schedule's losing_share of one core's part of the
        inflow. Those reads hit in the windows and miss later; an estimate, only for telling a
        loop that loses a few lines from one that loses its input. A skip of under class_shortest
        periods is not asked: by lines or by bytes, its few periods leave about the same lines."""
        schedule = classes.schedule
        if self.l2 is None or self.inflow() <= 0 or skip_periods < schedule.class_shortest:
            return False
        sampled = classes.sample(skip_first, skip_periods)
        lost = self.lines_lost((q, np.fromiter(classes.new_lines(q), np.int64)) for q in sampled)
        return lost >= schedule.losing_share * self.inflow() / max(self.cores, 1) * len(sampled)

    def kept(self, periods: int, cores: int, distinct: bool = False) -> int:
        """How many of a skip's last `periods` the L2 holds after it: as many as it holds of what
        `cores` cores running the loop move per period (LRU keeps the newest) or, `distinct`, of
        the lines they bring (`new`): a loop that re-reads its lines brings fewer than it moves,
        and where it fills the L2 the lines it brings are what evicts those held from before it."""
        brought = self.new.size * self.line if distinct else 0
        # (windows that bring no new line re-read what the L2 holds: by bytes, a few periods are touched, not all)
        per_period = (brought or sum(i.chan_bytes for i in self.windows[1])) * max(cores, 1)
        if per_period <= 0:
            return 0
        return min(periods, -(-(self.l2_bytes // self.line * self.line) // per_period))
