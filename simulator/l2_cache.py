"""The shared L2 cache's tags: which bytes of a GM transfer hit, which must be fetched from device
memory, and which dirty lines an eviction writes back to it. The cache holds no data (GM arrays in
DeviceMemory do); the chip-wide channels that carry the bytes are in simulator.memory."""
from __future__ import annotations

from itertools import repeat
from typing import Callable, NamedTuple

import numpy as np

from .memory import Allocation
from .program import Rows


def range_lines(l0: np.ndarray, l1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lines [l0, l1) of each range, concatenated; where each range's lines start in them,
    and how many it has."""
    counts = l1 - l0
    first = np.cumsum(counts) - counts
    total = int(first[-1] + counts[-1]) if counts.size else 0
    if total == counts.size and counts.size and counts.min() == 1:     # (a line each: a gather's rows)
        return l0.astype(np.int64), first, counts
    if not counts.size or counts.min() < 1:
        return np.arange(total, dtype=np.int64) + np.repeat(l0 - first, counts), first, counts
    # a running sum of steps of one line, each range starting with the jump from the last line of
    # the range before it (cheaper than repeating each range's start by its count)
    step = np.ones(total, np.int64)
    step[first] = l0 - np.concatenate(([0], l1[:-1] - 1))
    return np.cumsum(step), first, counts


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """np.unique(values) (the distinct values, ascending) by one sort: numpy 2's np.unique hashes,
    5-15 times slower on the tens of thousands of line numbers fast mode passes it."""
    ordered = np.sort(values, axis=None)
    if ordered.size < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


class Region(NamedTuple):
    """An allocation's tags as the L2 reads them: its bytes [base, limit), its lines' sector masks
    and last-use stamps, and the same two read and written an item at a time (memoryviews: a
    gather's row costs a few item updates, which numpy's own indexing makes dearer)."""
    base: int
    limit: int
    mask: np.ndarray
    stamp: np.ndarray
    mask_items: memoryview
    stamp_items: memoryview


class L2Cache:
    """Tags of the shared L2: LRU over lines, write-back, write-allocate without a fetch (a core's
    write fills its bytes). Each line remembers which 32-byte sectors it holds: a read fetches the
    sectors it touches that the line lacks; evicting a dirty line writes the whole line back. The
    cache holds no data (GM arrays do): it only decides which bytes go to device memory.

    Tags live in numpy arrays per allocation (a sector mask with a dirty bit, and a last-use
    stamp per line), so a long transfer costs a few array operations, not a loop over lines.
    When the cache overflows, the least recently used lines are evicted until 1/1024 of it is
    free: LRU, a line at a time as the hardware evicts, but for up to 1/1024 of the cache evicted
    early (a batch spares the array set-up per line). Freeing a larger share at once is not
    neutral: a sixteenth of a 192 MB L2 is 12 MB of write-back, most of which LRU would have kept
    to the end of a short launch.

    With `writes_through_when_full` (a profile's `l2.writes_through_when_full`), once the cache
    has filled with the running kernel's own lines (it evicts a line touched since the launch
    began: the kernel's traffic has overflowed it), a write goes on to device memory as it is
    made, as a dirty line's write-back does: its bytes join the write-back device memory's channel
    carries with the traffic (the writer's transfer first, up to its own size), the writer's own
    latency ending at the L2, not a miss's; its lines are held clean, in LRU order as any, so a
    later read still hits them. Until then, and from the next launch on until its own traffic
    overflows the cache, writes stay dirty in it."""

    SECTOR = 32
    BATCH = 1024      # an eviction frees 1/BATCH of the cache
    POOL = 16         # the oldest 1/POOL of the cache is found in one pass and evicted in order

    def __init__(self, nbytes: int, line: int, find: Callable[[int], Allocation | None],
                 writes_through_when_full: bool = False):
        self.line = line
        # once the running kernel's own lines have filled the cache (an eviction takes a line
        # touched since its launch began), a write goes through to device memory as it is made
        # and leaves its lines clean (still held, LRU as any): `filled` says when
        self.writes_through_when_full = writes_through_when_full
        self.filled = False
        self.launch_stamp = 0               # the clock as the running launch's blocks started
        self.capacity = max(nbytes // line, 1)
        self.slack = max(self.capacity // self.BATCH, 1)
        # the oldest lines, oldest first, as (owner, line, stamp then): owners[i] is an
        # allocation's (mask, stamp); the next eviction starts at `_next`
        self._pool: tuple[list, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._next = 0
        self.sectors = max(line // self.SECTOR, 1)
        self.full = np.uint32((1 << self.sectors) - 1)
        self.dirty = np.uint32(1 << self.sectors)
        self.full_bits, self.dirty_bits = int(self.full), int(self.dirty)     # (as Python ints)
        self._write_marks = self.dirty_bits     # what this access's writes mark: dirty, or 0 going through
        self.find = find                    # address -> the device Allocation holding it
        self.tags: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # allocation -> (mask, stamp)
        # the Regions of the last allocation touched and of the one before it (a gather loop
        # alternates between its source and its scatter's destination); forget() drops a freed
        # allocation from them
        self._last = self._prev = None
        self.resident = 0
        self.clock = 0
        self.hit_lines = 0
        self.miss_lines = 0

    def forget(self, addr: int) -> None:
        """The allocation at `addr` was freed: no later access may find it through the
        remembered regions. Its lines stay as they are (freeing memory does not touch the cache)."""
        if self._prev is not None and self._prev[0] == addr:
            self._prev = None
        if self._last is not None and self._last[0] == addr:
            self._last, self._prev = self._prev, None

    def _tags(self, addr: int) -> Region:
        """The Region of the allocation holding `addr`; ValueError if none."""
        region = self._region(addr)
        if region is None:
            raise ValueError(f"L2: device address 0x{addr:x} is in no allocation")
        return region

    def _region(self, addr: int) -> Region | None:
        """The Region of the allocation holding `addr`, now the last touched (None if no
        allocation holds it)."""
        last, prev = self._last, self._prev
        if last is not None and last[0] <= addr < last[1]:
            return last
        if prev is not None and prev[0] <= addr < prev[1]:
            self._last, self._prev = prev, last
            return prev
        a = self.find(addr)
        if a is None:
            return None
        t = self.tags.get(a.addr)
        if t is None:
            n = -(-a.size // self.line)
            t = self.tags[a.addr] = (np.zeros(n, np.uint32), np.zeros(n, np.int64))
        self._last, self._prev = Region(a.addr, a.addr + a.size, *t, memoryview(t[0]), memoryview(t[1])), last
        return self._last

    def free_bytes(self) -> int:
        """Room no line has taken yet: once full, the cache keeps up to an eviction batch free,
        and that is not room (the next lines evict)."""
        return max(self.capacity - self.slack - self.resident, 0) * self.line

    def held(self, lines: np.ndarray) -> np.ndarray:
        """Which of these lines (address // line size, in any allocation) the cache holds now
        (allocations start on a line: device memory aligns them to 512 bytes)."""
        return self.stamps(lines) >= 0

    def access(self, ranges, write: bool) -> tuple[int, int]:
        """Touch address ranges [(addr, nbytes)]; returns (bytes a read fetches from device
        memory; bytes written back to it: dirty lines evicted and, once the cache has filled with
        writes_through_when_full, a write's own bytes). Two forms give the same tags: array
        operations, with a fixed set-up cost (a third of it for regular rows, whose lines are a
        strided view of the tags) and little per line, and a line-by-line loop, cheap to start
        and dearer per range and per line. The thresholds below, in units of a range's cost in
        the loop, pick the cheaper for the ranges' count and length."""
        fetch = None
        through = write and self.filled and self.writes_through_when_full
        self._write_marks = 0 if through else self.dirty_bits
        if through:
            written = (ranges.count * max(ranges.n, 0) if type(ranges) is Rows
                       else sum(max(n, 0) for _, n in ranges))
        if type(ranges) is Rows:          # regular rows: no tuple per row
            nr, n = ranges.count, ranges.n
            if nr <= 8 and 0 < n <= self.line:      # (never worth the array set-up: 5 nr <= 40)
                fetch = self._access_few_rows(ranges, write)
            elif nr >= 2 and 4 * nr + nr * n // self.line > 40:    # worth the array set-up
                fetch = self._access_rows(ranges, write)
            if fetch is None:             # (address, n) pairs made in C, not by Rows' generator
                p = ranges.pitch
                ranges = (((ranges.start, n),) if nr == 1 else
                          zip(range(ranges.start, ranges.start + nr * p, p), repeat(n, nr)) if p > 0
                          else list(ranges))
        elif (nr := len(ranges)) >= 8 and 4 * nr + sum(n for _, n in ranges) // self.line > 110:
            # worth the array set-up
            fetch = self._access_disjoint(ranges, write)
        if fetch is None:
            fetch = self._access_each(ranges, write)
        evicted = self._evict() if self.resident > self.capacity else 0
        return fetch, (evicted + written if through else evicted)

    def _access_each(self, ranges, write: bool) -> int:
        """access() one range at a time (any ranges); returns the bytes to fetch. A range of a few
        lines is updated with plain integers (array calls cost more than they save there), in the
        same order and with the same stamps as the array form."""
        line, sector, full = self.line, self.SECTOR, self.full_bits
        dirty = self._write_marks if write else 0
        fetch = 0
        base = limit = -1
        mask = stamp = None
        clock = self.clock
        hits = lines = 0
        for addr, n in ranges:
            if n <= 0:
                continue
            if not base <= addr < limit:
                base, limit, mask, stamp, _, _ = self._tags(addr)
            rel, end = addr - base, addr - base + n
            l0, l1 = rel // line, (end - 1) // line + 1
            lo = (rel - l0 * line) // sector
            hi = -(-(end - (l1 - 1) * line) // sector)
            if l1 - l0 == 1:                 # one line (a gather's row): the commonest case
                want = full & ((full >> lo) << lo) & ((1 << hi) - 1)
                old = mask.item(l0)
                if old:
                    hits += 1
                if not write:
                    fetch += (want & ~old).bit_count() * sector
                mask[l0] = old | want | dirty
                stamp[l0] = clock
                clock += 1
                lines += 1
                continue
            if l1 - l0 <= 8:
                present = 0
                for i in range(l0, l1):
                    want = full
                    if i == l0:
                        want &= (full >> lo) << lo
                    if i == l1 - 1:
                        want &= (1 << hi) - 1
                    old = mask.item(i)
                    if old:
                        present += 1
                    if not write:
                        fetch += (want & ~old).bit_count() * sector
                    mask[i] = old | want | dirty
                    stamp[i] = clock
            else:       # the two end lines in integers, the whole lines between in one slice
                first, last = full & ((full >> lo) << lo), full & ((1 << hi) - 1)
                old0, old1 = mask.item(l0), mask.item(l1 - 1)
                mid = mask[l0 + 1:l1 - 1]
                present = int(np.count_nonzero(mid)) + (old0 != 0) + (old1 != 0)
                if write:
                    mid |= self.full | dirty
                else:
                    # a whole line lacks the sectors it does not hold
                    held = int(np.bitwise_count(mid & self.full).sum())
                    fetch += ((l1 - l0 - 2) * self.sectors - held + (first & ~old0).bit_count()
                              + (last & ~old1).bit_count()) * sector
                    mid |= self.full
                mask[l0] = old0 | first | dirty
                mask[l1 - 1] = old1 | last | dirty
                stamp[l0:l1] = clock
            clock += 1
            hits += present
            lines += l1 - l0
        self.clock = clock
        self._count(hits, lines)
        return fetch

    def touch(self, addr: np.ndarray, n: np.ndarray, write: np.ndarray, base: np.ndarray) -> tuple[int, int]:
        """Fast mode: the tags take the ranges (addresses, lengths, write flags, the base of the
        allocation each lies in) as transfers in this order would, with no time: what a
        fast-forwarded loop's skipped iterations leave in the L2. Taken in one batch, then one
        eviction: the newest lines stay, as LRU keeps them (what is evicted went back to memory
        during the skipped time). Returns, as access() does, (bytes the reads fetched from device
        memory; bytes written back: dirty lines evicted and the writes that went through). A
        sector the batch both reads and writes is taken as never fetched: the fetches are a lower
        bound where a loop reads what it wrote within the batch."""
        line = self.line
        keep = n > 0
        if not keep.all():
            addr, n, write, base = addr[keep], n[keep], write[keep], base[keep]
        through = write & self.filled if self.writes_through_when_full else np.zeros(write.size, bool)
        if self.writes_through_when_full and not self.filled and write.any():
            through = write & (np.arange(write.size) > self._fill_point(addr, n))
        went_through = int(n[through].sum())
        crossed = 0
        stamps = self.clock + np.arange(addr.size, dtype=np.int64)
        self.clock += int(addr.size)
        no_bits = np.uint32(0)
        # (the allocations: distinct among the starts of runs of one base, far fewer than the ranges)
        for b in unique_sorted(np.concatenate((base[:1], base[1:][base[1:] != base[:-1]]))).tolist():
            region = self._region(b)
            if region is None:
                continue
            mask, stamp = region.mask, region.stamp
            sel = base == b
            rel = addr[sel] - b
            end = rel + n[sel]
            lines, _, counts, want = self._range_wants(rel, end, rel // line, (end - 1) // line + 1)
            # (every range has a line at least: those of no bytes were dropped above)
            one_line_each = lines.size == rel.size

            def per_line(x):
                return x if one_line_each else np.repeat(x, counts)

            # each line's touches grouped by one sort (the reductions do not depend on their order;
            # 32-bit keys sort about a quarter faster)
            order = np.argsort(lines.astype(np.uint32) if mask.size <= 1 << 32 else lines)
            lines = lines[order]
            first = np.flatnonzero(np.concatenate(([True], lines[1:] != lines[:-1])))
            held = lines[first]
            written = per_line(write[sel])[order]
            want = want[order]
            read_sectors = np.bitwise_or.reduceat(np.where(written, no_bits, want), first)
            write_sectors = np.bitwise_or.reduceat(np.where(written, want, no_bits), first)
            want |= per_line(np.where(write[sel] & ~through[sel], self.dirty, no_bits))[order]
            add = np.bitwise_or.reduceat(want, first)
            newest = np.maximum.reduceat(per_line(stamps[sel])[order], first)
            old = mask[held]
            crossed += int(np.bitwise_count(read_sectors & ~old & ~write_sectors).sum()) * self.SECTOR
            self.resident += int(np.count_nonzero(old == 0))
            mask[held] = old | add
            stamp[held] = newest
        return crossed, went_through + (self._evict() if self.resident > self.capacity else 0)

    def launch_began(self) -> None:
        """A launch's blocks start: its writes stay dirty until its own traffic overflows the
        cache (writes_through_when_full). Launches running at once on several streams count
        from the latest to start."""
        self.launch_stamp = self.clock
        self.filled = False

    def _fill_point(self, addr: np.ndarray, n: np.ndarray) -> int:
        """touch()'s ranges taken in order: the index of the one whose lines first overflow the
        cache with the running launch's own (the cache holds only lines touched since it began,
        and one more comes: its writes after that go through), or their count if none."""
        line = self.line
        # (however many are new, no overflow: first by a bound of two reductions, a range of n
        # bytes spanning at most n // line + 2 lines, then by the ranges' lines)
        if self.resident + int(n.sum()) // line + 2 * n.size <= self.capacity:
            return addr.size
        l0, l1 = addr // line, (addr + n - 1) // line + 1
        if self.resident + int((l1 - l0).sum()) <= self.capacity:
            return addr.size
        lines, first, _ = range_lines(l0, l1)
        new = np.zeros(lines.size, bool)
        new[np.unique(lines, return_index=True)[1]] = True
        new &= self.stamps(lines) < self.launch_stamp
        brought = np.cumsum(np.add.reduceat(new, first))
        if self.resident + int(brought[-1]) <= self.capacity:     # (the launch's own lines are resident)
            return addr.size
        own = sum(int(np.count_nonzero((mask != 0) & (stamp >= self.launch_stamp)))
                  for mask, stamp in self.tags.values())
        over = np.flatnonzero(own + brought > self.capacity)
        return int(over[0]) if over.size else addr.size

    def _access_few_rows(self, rows: Rows, write: bool) -> int | None:
        """A few rows that each lie inside one line, in one allocation (a gather's corners):
        _access_each's one-line step, without making the rows' pairs. Returns the bytes to
        fetch, or None (nothing changed) for rows that do not qualify."""
        start, n, pitch, c = rows.start, rows.n, rows.pitch, rows.count
        region = self._last
        if region is None or not region[0] <= start < region[1]:
            region = self._region(start)
            if region is None:
                return None
        base, limit, _, _, mask, stamp = region
        if pitch < 0 or start + (c - 1) * pitch + n > limit:
            return None
        line = self.line
        rel = start - base
        # (range() takes no step of 0: rows at one address are one row c times, checked once)
        starts = range(rel, rel + c * pitch, pitch) if pitch else repeat(rel, c)
        if pitch:
            for r in starts:
                if r % line + n > line:
                    return None
        elif rel % line + n > line:
            return None
        sector, full = self.SECTOR, self.full_bits
        dirty = self._write_marks if write else 0
        fetch = hits = 0
        clock = self.clock
        for r in starts:
            l0, lo = divmod(r, line)
            lo, hi = lo // sector, -(-(lo + n) // sector)
            want = full & ((full >> lo) << lo) & ((1 << hi) - 1)
            old = mask[l0]
            if old:
                hits += 1
            if not write:
                fetch += (want & ~old).bit_count()
            mask[l0] = old | want | dirty
            stamp[l0] = clock
            clock += 1
        self.clock = clock
        self.hit_lines += hits
        self.miss_lines += c - hits
        self.resident += c - hits
        return fetch * sector

    def _count(self, present: int, lines: int) -> None:
        """Book `lines` touched lines of which `present` were held: hits, misses, residency."""
        self.hit_lines += present
        self.miss_lines += lines - present
        self.resident += lines - present

    def _range_wants(self, rel: np.ndarray, end: np.ndarray, l0: np.ndarray, l1: np.ndarray):
        """Ranges [rel, end) of one allocation (lines [l0, l1) each): every line they touch, in
        order, the sectors each touch wants, and per range its first touch and touch count."""
        sector = self.SECTOR
        if l0.size and int(l1[-1] - l0[-1]) == 1 and (l1 - l0 == 1).all():     # (a gather's rows: a line each)
            lo = ((rel - l0 * self.line) // sector).astype(np.uint32)
            hi = (-(-(end - l0 * self.line) // sector)).astype(np.uint32)
            want = (self.full >> lo << lo) & ((np.uint32(1) << hi) - np.uint32(1))
            return l0, np.arange(l0.size), np.ones(l0.size, np.int64), want
        lines, first, counts = range_lines(l0, l1)
        want = np.full(lines.size, self.full, np.uint32)
        lo = ((rel - l0 * self.line) // sector).astype(np.uint32)
        want[first] &= (self.full >> lo) << lo
        hi = (-(-(end - (l1 - 1) * self.line) // sector)).astype(np.uint32)
        want[first + counts - 1] &= (np.uint32(1) << hi) - np.uint32(1)
        return lines, first, counts, want

    def _access_disjoint(self, ranges, write: bool) -> int | None:
        """access() for many ranges in one allocation that touch ascending, disjoint sets of
        lines (a strided copy's rows): the same updates in one pass of array operations.
        Returns the bytes to fetch, or None (nothing changed) if the ranges do not qualify."""
        r = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        r = r[r[:, 1] > 0]
        if not len(r):
            return 0
        a = self.find(int(r[0, 0]))
        if a is None:
            return None
        rel, end = r[:, 0] - a.addr, r[:, 0] - a.addr + r[:, 1]
        if rel.min() < 0 or end.max() > a.size:
            return None
        line = self.line
        l0, l1 = rel // line, (end - 1) // line + 1
        if np.any(l0[1:] < l1[:-1]):
            return None
        _, _, mask, stamp, _, _ = self._tags(int(r[0, 0]))
        lines, _, counts, want = self._range_wants(rel, end, l0, l1)
        return self._touch(mask, stamp, lines, want, self.clock + np.repeat(np.arange(len(r)), counts),
                           len(r), write)

    def _touch(self, mask, stamp, lines, want, stamps, ranges: int, write: bool, repeats: int = 0) -> int:
        """Give distinct `lines` their sectors `want` and last-use `stamps`, for `ranges` ranges
        taken in one go (the clock moves on by that many); `repeats` more touches of those lines
        came after their first (hits). Returns the bytes to fetch."""
        m = mask[lines]
        present = int(np.count_nonzero(m))
        fetch = 0
        if write:
            mask[lines] = m | want | np.uint32(self._write_marks)
        else:
            fetch = int(np.bitwise_count(want & ~m).sum()) * self.SECTOR
            mask[lines] = m | want
        stamp[lines] = stamps
        self.clock += ranges
        self._count(present + repeats, lines.size + repeats)
        return fetch

    def _access_rows(self, rows: Rows, write: bool) -> int | None:
        """access() for regular rows in one allocation, in arrays. When the pitch is a whole number
        of lines and rows do not share lines, each row touches the same lines, shifted, with the
        same sector masks: a row's pattern tiled. Other rows that do not overlap take
        _access_shared_rows. Returns the bytes to fetch, or None (nothing changed) for rows that
        overlap or leave the allocation."""
        line, sector, full = self.line, self.SECTOR, self.full_bits
        c, n, pitch = rows.count, rows.n, rows.pitch
        if pitch < n or n <= 0:             # rows that overlap: range at a time
            return None
        a = self.find(rows.start)
        if a is None:
            return None
        rel = rows.start - a.addr
        if rel + (c - 1) * pitch + n > a.size:
            return None
        if pitch % line:
            return self._access_shared_rows(rows, write, a)
        l0, l1 = rel // line, (rel + n - 1) // line + 1
        per, step = l1 - l0, pitch // line
        lo = (rel - l0 * line) // sector
        hi = -(-(rel + n - (l1 - 1) * line) // sector)
        if per > step:                      # rows share lines
            return self._access_shared_rows(rows, write, a)
        pattern = [full] * per
        pattern[0] &= (full >> lo) << lo
        pattern[-1] &= (1 << hi) - 1
        _, _, mask, stamp, _, _ = self._tags(rows.start)
        if l0 + c * step <= mask.size:
            # the rows' lines as a (count, per) view of the tags: what _touch does, in place
            m = mask[l0:l0 + c * step].reshape(c, step)[:, :per]
            want = np.array(pattern, dtype=np.uint32)
            present = int(np.count_nonzero(m))
            fetch = 0
            if write:
                m |= want | np.uint32(self._write_marks)
            else:
                fetch = int(np.bitwise_count(want & ~m).sum()) * sector
                m |= want
            stamp[l0:l0 + c * step].reshape(c, step)[:, :per] = \
                np.arange(self.clock, self.clock + c, dtype=np.int64)[:, None]
            self.clock += c
            self._count(present, c * per)
            return fetch
        lines = (np.arange(c, dtype=np.int64) * step + l0)[:, None] + np.arange(per, dtype=np.int64)
        lines = lines.ravel()
        want = np.tile(np.array(pattern, dtype=np.uint32), c)
        return self._touch(mask, stamp, lines, want,
                           np.repeat(np.arange(self.clock, self.clock + c, dtype=np.int64), per), c, write)

    def _access_shared_rows(self, rows: Rows, write: bool, a) -> int:
        """Rows that do not overlap (pitch >= n), in one allocation, whose lines may be shared by
        neighbouring rows: what the range-at-a-time path does, in arrays. The rows touch lines in
        ascending order, so a line's touches are adjacent: its first touch is a hit if the line
        held any sector before, the later ones always are; a read fetches the union of the sectors
        the touches want less what the line held; the line keeps the stamp of the last row that
        touched it."""
        line = self.line
        c, n = rows.count, rows.n
        rel = (rows.start - a.addr) + np.arange(c, dtype=np.int64) * rows.pitch
        end = rel + n
        l0, l1 = rel // line, (end - 1) // line + 1
        lines, _, counts, want = self._range_wants(rel, end, l0, l1)
        touches = lines.size
        new = np.empty(touches, dtype=bool)
        new[0] = True
        np.not_equal(lines[1:], lines[:-1], out=new[1:])
        heads = np.flatnonzero(new)
        held = lines[heads]
        union = np.bitwise_or.reduceat(want, heads)
        last_row = np.repeat(np.arange(c, dtype=np.int64), counts)[np.append(heads[1:], touches) - 1]
        _, _, mask, stamp, _, _ = self._tags(a.addr)
        return self._touch(mask, stamp, held, union, self.clock + last_row, c, write, touches - held.size)

    def stamps(self, lines: np.ndarray) -> np.ndarray:
        """When each of these lines (address // line size) was last used, -1 for one the cache
        does not hold (LRU evicts the smallest first)."""
        out = np.full(lines.size, -1, np.int64)
        addr = lines * self.line
        for base, (mask, stamp) in self.tags.items():
            inside = (addr >= base) & (addr < base + mask.size * self.line)
            if inside.any():
                at = (addr[inside] - base) // self.line
                out[inside] = np.where(mask[at] != 0, stamp[at], -1)
        return out

    def resident_stamps(self) -> np.ndarray:
        """The last-use stamps of every line the cache holds, ascending (its LRU order)."""
        got = [stamp[mask != 0] for mask, stamp in self.tags.values()]
        return np.sort(np.concatenate(got)) if got else np.empty(0, np.int64)

    def _evict(self) -> int:
        """Evict the least recently used lines until 1/1024 of the cache is free; returns the
        bytes of dirty lines written back. The lines go in the pool's order (oldest first; at
        one stamp, by allocation then address), skipping those touched since the pool was made:
        a touched line is newer than every line the pool or the cache held then, so this is LRU.
        Evicting a line the running launch touched means its own traffic has filled the cache
        (`filled`)."""
        k = self.resident - self.capacity + self.slack
        dirty_lines = 0
        while k > 0:
            if self._pool is None or self._next >= self._pool[1].size:
                if not self._fill_pool(k):
                    break
            owners, own, idx, then = self._pool
            lo = self._next
            hi = min(own.size, lo + 2 * k + 64)
            o, ix = own[lo:hi], idx[lo:hi]
            valid = np.zeros(hi - lo, bool)
            for j in unique_sorted(o).tolist():
                sel = o == j
                mask, stamp = owners[j]
                valid[sel] = (mask[ix[sel]] != 0) & (stamp[ix[sel]] == then[lo:hi][sel])
            taken = np.cumsum(valid)
            if taken[-1] > k:
                end = int(np.searchsorted(taken, k)) + 1        # just past the k-th valid line
                valid[end:] = False
            else:
                end = hi - lo
            self._next = lo + end
            if not self.filled and valid.any() and int(then[lo:hi][valid].max()) >= self.launch_stamp:
                self.filled = True
            for j in unique_sorted(o[valid]).tolist():
                mask = owners[j][0]
                go = ix[valid & (o == j)]
                dirty_lines += int(np.count_nonzero(mask[go] & self.dirty))
                mask[go] = 0
                self.resident -= go.size
                k -= go.size
        return dirty_lines * self.line

    def _fill_pool(self, k: int) -> bool:
        """Find the oldest 1/16 of the cache's lines, or the k to evict if more, in one pass
        (False if it holds none)."""
        owners, lines, stamps = [], [], []
        for mask, stamp in self.tags.values():
            idx = np.flatnonzero(mask)
            if idx.size:
                owners.append((mask, stamp))
                lines.append(idx)
                stamps.append(stamp[idx])
        if not owners:
            self._pool = None
            return False
        allstamps = np.concatenate(stamps)
        n = min(max(self.capacity // self.POOL, self.slack, k), allstamps.size)
        cut = np.partition(allstamps, n - 1)[n - 1]
        older = np.flatnonzero(allstamps < cut)
        at_cut = np.flatnonzero(allstamps == cut)[:n - older.size]
        chosen = np.sort(np.concatenate([older, at_cut]))                  # allocation, then address
        chosen = chosen[np.argsort(allstamps[chosen], kind="stable")]     # then oldest first
        own = np.repeat(np.arange(len(owners)), [a.size for a in lines])
        self._pool = (owners, own[chosen], np.concatenate(lines)[chosen], allstamps[chosen])
        self._next = 0
        return True
