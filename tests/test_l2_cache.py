"""The L2's tags: the one-pass path for many disjoint ranges (a strided copy's rows) must leave the
cache exactly as the range-at-a-time path does."""
import numpy as np

from simulator.l2_cache import L2Cache, range_lines, unique_sorted


class _Alloc:
    def __init__(self, addr, size):
        self.addr, self.size = addr, size


ALLOCS = [_Alloc(0, 1 << 20), _Alloc(1 << 20, 300_000)]


def _find(addr):
    return next((a for a in ALLOCS if a.addr <= addr < a.addr + a.size), None)


def _strided(rng, max_rows, max_stride, max_n, max_start):
    """Random rows of a strided copy inside one allocation: [(address, bytes)], and read/write."""
    al = ALLOCS[rng.integers(2)]
    rows, stride = int(rng.integers(1, max_rows)), int(rng.integers(1, max_stride))
    n, start = int(rng.integers(0, max_n)), al.addr + int(rng.integers(0, max_start))
    ranges = [(start + i * stride, n) for i in range(rows) if start + i * stride + n <= al.addr + al.size]
    return al, ranges, bool(rng.integers(2))


def _state(c):
    return (c.hit_lines, c.miss_lines, c.resident, c.clock,
            {k: (m.tolist(), s.tolist()) for k, (m, s) in c.tags.items()})


def test_disjoint_ranges_match_range_at_a_time():
    """Where the one-pass path takes the ranges, it leaves the cache (with eviction) exactly as
    the range-at-a-time path does."""
    rng = np.random.default_rng(1)
    fast_taken = 0
    for _ in range(150):
        fast, ref = L2Cache(64 * 1024, 512, _find), L2Cache(64 * 1024, 512, _find)
        for _ in range(30):
            _, ranges, write = _strided(rng, 20, 3000, 2000, 5000)
            got = fast._access_disjoint(ranges, write)
            if got is None:                  # not disjoint: nothing changed; keep the two in step
                got = fast._access_each(ranges, write)
            else:
                fast_taken += 1
            assert got == ref._access_each(ranges, write)
            assert (fast._evict() if fast.resident > fast.capacity else 0) == \
                (ref._evict() if ref.resident > ref.capacity else 0)
            assert _state(fast) == _state(ref)
    assert fast_taken > 500            # the one-pass path really ran


def test_overlapping_lines_fall_back():
    c = L2Cache(64 * 1024, 512, _find)
    assert c._access_disjoint([(0, 100), (200, 100)], False) is None       # both in line 0
    assert c._access_disjoint([(0, 100), (512, 100)], False) == 2 * 4 * 32   # 4 sectors each


def test_ranges_match_a_line_by_line_model():
    """Every access path against a plain model: a line is a hit if it holds any sector; a read
    fetches the sectors it lacks; a write fills its sectors without a fetch and marks the line dirty."""
    rng = np.random.default_rng(2)
    c = L2Cache(1 << 24, 512, _find)                   # large: no eviction in this test
    lines: dict[int, tuple[int, bool]] = {}            # line address -> (sector bits, dirty)
    hits = misses = 0
    for _ in range(400):
        al, ranges, write = _strided(rng, 40, 9000, 6000, 50_000)
        fetch = 0
        for addr, nb in ranges:
            if nb <= 0:
                continue
            for la in range((addr - al.addr) // 512, (addr - al.addr + nb - 1) // 512 + 1):
                lo = max(addr, al.addr + la * 512)
                hi = min(addr + nb, al.addr + (la + 1) * 512)
                want = sum(1 << s for s in range((lo - al.addr - la * 512) // 32,
                                                 -(-(hi - al.addr - la * 512) // 32)))
                bits, dirty = lines.get(al.addr + la * 512, (0, False))
                hits, misses = hits + bool(bits), misses + (not bits)
                if not write:
                    fetch += bin(want & ~bits).count("1") * 32
                lines[al.addr + la * 512] = (bits | want, dirty or write)
        assert c.access(ranges, write) == (fetch, 0)
        assert (c.hit_lines, c.miss_lines) == (hits, misses)


def _reference_access(state, ranges, write, line=512, sector=32):
    """The L2's documented per-range rule, written plainly: each range touches its lines; a line
    it finds non-empty is a hit; a read fetches the touched sectors the line lacks; a write marks
    the touched sectors and the line dirty; every line of the range gets the range's stamp."""
    masks, stamps = state["masks"], state["stamps"]
    fetch = 0
    for addr, n in ranges:
        if n <= 0:
            continue
        al = _find(addr)
        for ln in range((addr - al.addr) // line, (addr - al.addr + n - 1) // line + 1):
            lo = max(addr - al.addr, ln * line)
            hi = min(addr - al.addr + n, (ln + 1) * line)
            want = {s for s in range(lo // sector, -(-hi // sector))}
            sectors, dirty = masks.get((al.addr, ln), (set(), False))
            if sectors:
                state["hits"] += 1
            else:
                state["misses"] += 1
            if not write:
                fetch += len({s - ln * (line // sector) for s in want} - sectors) * sector
            masks[(al.addr, ln)] = (sectors | {s - ln * (line // sector) for s in want}, dirty or write)
            stamps[(al.addr, ln)] = state["clock"]
        state["clock"] += 1
    return fetch


def test_range_at_a_time_matches_a_plain_model():
    """_access_each (a few lines with integers, longer ranges with arrays, the last allocation
    remembered) against the rule written plainly, over ranges that hop between allocations."""
    rng = np.random.default_rng(2)
    for _ in range(40):
        c = L2Cache(1 << 30, 512, _find)          # no eviction: the model has none
        state = {"masks": {}, "stamps": {}, "hits": 0, "misses": 0, "clock": 0}
        for _ in range(40):
            ranges = []
            for _ in range(int(rng.integers(1, 6))):
                al = ALLOCS[rng.integers(2)]
                n = int(rng.integers(0, 6000))
                start = al.addr + int(rng.integers(0, al.size - n))
                ranges.append((start, n))
            write = bool(rng.integers(2))
            assert c._access_each(ranges, write) == _reference_access(state, ranges, write)
            assert (c.hit_lines, c.miss_lines, c.clock) == (state["hits"], state["misses"], state["clock"])
        for (base, ln), (sectors, dirty) in state["masks"].items():
            mask, stamp = c.tags[base]
            assert int(mask[ln]) == sum(1 << s for s in sectors) | (int(c.dirty) if dirty else 0)
            assert int(stamp[ln]) == state["stamps"][(base, ln)]
        assert sum(int(np.count_nonzero(m)) for m, _ in c.tags.values()) == len(state["masks"])


def test_regular_rows_match_the_same_ranges_listed():
    """A copy's rows given as Rows (five numbers; the tiled-pattern path when the pitch is whole
    lines, the shared-lines path for other rows, the range-at-a-time path for overlapping or few
    rows, the one-line-per-row path for a gather's few rows) leave the cache exactly as the same
    rows listed as (address, bytes) pairs do, taken a range at a time, evictions included."""
    from simulator.program import Rows
    rng = np.random.default_rng(3)
    tiled, few = [], []
    for _ in range(60):
        fast, ref = L2Cache(64 * 1024, 512, _find), L2Cache(64 * 1024, 512, _find)
        plain = fast._access_rows
        fast._access_rows = lambda rows, write, plain=plain: tiled.append(plain(rows, write)) or tiled[-1]
        one = fast._access_few_rows
        fast._access_few_rows = lambda rows, write, one=one: few.append(one(rows, write)) or few[-1]
        for _ in range(30):
            al = ALLOCS[rng.integers(2)]
            count, n = int(rng.integers(1, 40)), int(rng.integers(1, 1500))
            if rng.random() < 0.2:       # a gather's corners: a few short rows
                count, n = int(rng.integers(1, 9)), int(rng.integers(1, 300))
            u = rng.random()
            if u < 0.4:                  # whole lines
                pitch = int(rng.choice([512, 1024, 1536, 2048, 4096]))
            elif u < 0.7:                # short rows sharing lines
                n = int(rng.integers(1, 200))
                pitch = int(rng.integers(n, 600))
            else:
                pitch = int(rng.integers(n, 4000))
            start = al.addr + int(rng.integers(0, 3000))
            while count > 1 and start + (count - 1) * pitch + n > al.addr + al.size:
                count -= 1
            if start + n > al.addr + al.size:
                continue
            rows, write = Rows(None, start, n, pitch, count), bool(rng.integers(2))
            assert list(rows) == [(start + i * pitch, n) for i in range(count)]
            got = fast.access(rows, write)
            fetch = ref._access_each(list(rows), write)           # the reference: a row at a time
            assert got == (fetch, ref._evict() if ref.resident > ref.capacity else 0), (start, n, pitch, count)
            assert _state(fast) == _state(ref)
    assert sum(t is not None for t in tiled) > 100          # the tiled path really ran
    assert sum(t is not None for t in few) > 50             # and the few-rows path
    probe = L2Cache(1 << 24, 512, _find)
    assert probe._access_rows(Rows(None, 100, 700, 1024, 20), False) is not None  # tiled
    assert probe._access_rows(Rows(None, 100, 700, 512, 20), False) is None       # rows overlap
    assert probe._access_rows(Rows(None, 100, 700, 1000, 20), False) is not None  # rows share lines


def test_a_freed_allocation_is_not_found_through_the_remembered_regions():
    """The L2 remembers the last two allocations it touched; once one is freed and forgotten
    (aclrtFree does both) neither may still serve an access to it (its lines stay, as a real
    cache's would)."""
    import pytest
    from simulator.memory import DeviceMemory
    from simulator.program import Rows
    for freed_last in (False, True):                # the freed one remembered second, then first
        mem = DeviceMemory(1 << 24, functional=False)
        a, b = mem.malloc(4096), mem.malloc(4096)
        freed, other = (b, a) if freed_last else (a, b)
        c = L2Cache(64 * 1024, 512, mem.find)
        for addr in (a, b) + ((b,) if freed_last else ()):
            c.access([(addr, 64)], False)
        resident = c.resident
        assert mem.free(freed)
        c.forget(freed)
        assert c.resident == resident
        for ranges in ([(freed, 64)], Rows(None, freed, 64, 128, 2)):
            with pytest.raises(ValueError, match="in no allocation"):
                c.access(ranges, False)
        assert c.access([(other, 64)], False) == (0, 0)      # the live one is still found, a hit


def test_fast_mode_touch_matches_a_plain_model():
    """touch() (fast mode: a skipped loop's ranges in one batch) leaves each line the sectors, the
    dirty bit and the newest stamp the plain per-range rule gives, counts residency and the bytes
    its reads fetch, for ranges that overlap, repeat and hop between allocations, and for a
    gather's one-line rows; the clock moves on once per range."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        c = L2Cache(1 << 30, 512, _find)          # no eviction: the model has none
        state = {"masks": {}, "stamps": {}, "hits": 0, "misses": 0, "clock": 0}
        for _ in range(6):
            ranges, writes = [], []
            gathers = rng.random() < 0.5        # a gather's rows: each inside one line
            for _ in range(int(rng.integers(1, 40))):
                al = ALLOCS[rng.integers(2)]
                if gathers:
                    n = int(rng.integers(1, 129))
                    line = int(rng.integers(0, al.size // 512))
                    start = al.addr + line * 512 + int(rng.integers(0, 512 - n + 1))
                else:
                    n = int(rng.integers(0, 3000))
                    start = al.addr + int(rng.integers(0, al.size - n))
                ranges.append((start, n))
                writes.append(bool(rng.integers(2)))
            # what the batch fetches: per line, the sectors it reads that the line lacked before
            # the batch and that the batch does not write (a lower bound, as touch() documents)
            before = {k: sectors for k, (sectors, _) in state["masks"].items()}
            read, written = {}, {}
            for (a, n), w in zip(ranges, writes):
                al = _find(a)
                for s in range((a - al.addr) // 32, -(-(a - al.addr + n) // 32)) if n > 0 else ():
                    (written if w else read).setdefault((al.addr, s // 16), set()).add(s % 16)
            fetched = 32 * sum(len(got - before.get(k, set()) - written.get(k, set())) for k, got in read.items())
            for r, w in zip(ranges, writes):
                _reference_access(state, [r], w)
            addr = np.array([a for a, _ in ranges], dtype=np.int64)
            base = np.array([_find(a).addr for a in addr], dtype=np.int64)
            crossed, _ = c.touch(addr, np.array([n for _, n in ranges], dtype=np.int64), np.array(writes), base)
            assert crossed == fetched
        for (b, ln), (sectors, dirty) in state["masks"].items():
            mask, stamp = c.tags[b]
            assert int(mask[ln]) == sum(1 << s for s in sectors) | (int(c.dirty) if dirty else 0)
            assert int(stamp[ln]) == state["stamps"][(b, ln)]
        held = sum(int(np.count_nonzero(m)) for m, _ in c.tags.values())
        assert held == len(state["masks"]) == c.resident
        assert c.clock == state["clock"]


def test_fast_mode_touch_of_nothing_changes_nothing():
    """A skip whose chunk kept no range (every one outside the allocations, of no bytes, or a
    gather its Loop declares none for) touches nothing: no fetch, no write-back, the tags and the
    counts as they were, with or without writes going through."""
    for through in (False, True):
        c = L2Cache(64 * 1024, 512, _find)
        c.writes_through_when_full = through
        c.access([(ALLOCS[0].addr, 4096)], True)
        before = ({b: (m.copy(), s.copy()) for b, (m, s) in c.tags.items()}, c.resident, c.hit_lines, c.miss_lines)
        empty = np.empty(0, np.int64)
        base = np.full(3, ALLOCS[1].addr, np.int64)
        for addr, n, write, at in ((empty, empty, np.empty(0, bool), empty),
                                   (base + 64, np.zeros(3, np.int64), np.array([True, False, True]), base)):
            assert c.touch(addr, n, write, at) == (0, 0)
        tags, resident, hits, misses = before
        assert (c.resident, c.hit_lines, c.miss_lines) == (resident, hits, misses)
        assert c.tags.keys() == tags.keys()
        for b, (m, s) in tags.items():
            assert np.array_equal(c.tags[b][0], m) and np.array_equal(c.tags[b][1], s)


def test_fast_mode_touch_keeps_the_newest_lines():
    """Past the capacity, the batch's eviction keeps the most recently touched lines (LRU)."""
    c = L2Cache(64 * 1024, 512, _find)           # 128 lines
    addr = np.arange(0, 300 * 512, 512, dtype=np.int64)
    c.touch(addr, np.full(addr.size, 512), np.zeros(addr.size, bool), np.zeros(addr.size, np.int64))
    mask, _ = c.tags[0]
    held = np.flatnonzero(mask)
    assert c.resident <= c.capacity and held.size == c.resident
    assert held.min() >= 300 - c.capacity and held.max() == 299     # the newest survive


BIG = [_Alloc(0, 3 << 20), _Alloc(3 << 20, 1 << 20)]      # 4 MB: overflows a 2 MB cache


def _find_big(addr):
    return next((a for a in BIG if a.addr <= addr < a.addr + a.size), None)


def _evict_by_sorting(c: L2Cache) -> int:
    """The LRU rule written plainly: every held line sorted by (stamp, allocation, address); the
    oldest go until 1/1024 of the cache is free. Returns the dirty bytes written back."""
    held = [(int(stamp[i]), order, int(i), mask) for order, (mask, stamp) in enumerate(c.tags.values())
            for i in np.flatnonzero(mask)]
    held.sort(key=lambda h: h[:3])
    dirty = 0
    for _, _, i, mask in held[:max(c.resident - c.capacity + c.slack, 0)]:
        dirty += bool(mask[i] & c.dirty)
        mask[i] = 0
        c.resident -= 1
    return dirty * c.line


def test_eviction_is_lru_line_by_line():
    """The cache evicts what plain LRU does (the pool of oldest lines, kept across evictions,
    skips the lines touched since), on random reads and writes that re-touch old lines and
    overflow the cache many times; each eviction frees only 1/1024 of it."""
    rng = np.random.default_rng(11)
    line, big, find = 512, BIG, _find_big
    evictions = 0
    for _ in range(4):
        cache, ref = L2Cache(2 << 20, line, find), L2Cache(2 << 20, line, find)     # 4096 lines
        assert cache.slack == 4
        for _ in range(600):
            al = big[rng.integers(2)]
            n = int(rng.integers(1, 40 * line))
            start = al.addr + int(rng.integers(0, al.size - n))
            write = bool(rng.integers(2))
            got = cache.access([(start, n)], write)
            fetch = ref._access_each([(start, n)], write)
            over = ref.resident > ref.capacity
            evictions += over
            assert got == (fetch, _evict_by_sorting(ref) if over else 0)
            assert _state(cache) == _state(ref)
    assert evictions > 400


def test_a_cache_that_has_filled_has_no_free_room():
    """free_bytes() (what fast mode's skips may still fill) is the room no line has taken yet;
    once the cache has overflowed, the eviction batch it keeps free is not room."""
    big = [_Alloc(0, 4 << 20)]
    c = L2Cache(2 << 20, 512, lambda a: big[0] if a < (4 << 20) else None)
    c.access([(0, 1 << 20)], False)
    assert c.free_bytes() == (c.capacity - c.slack - c.resident) * 512 > 0
    c.access([(1 << 20, 2 << 20)], True)            # overflows: evicts down to capacity - slack
    assert c.resident == c.capacity - c.slack and c.free_bytes() == 0


def test_the_first_lost_period_is_where_an_lru_first_misses_a_line_held_before_the_loop():
    """fast.L2Projection.first_lost_period, from the L2's stamps and a loop's declared reads, names
    the period at which a plain LRU (an OrderedDict replaying every access) first misses a line
    it held before the loop began and the loop had not read yet: each period reads some of
    those lines, then brings `inflow` lines of its own."""
    from collections import OrderedDict

    from simulator.fast import L2Projection
    rng = np.random.default_rng(7)
    line, lines = 512, 128
    found = 0
    for _ in range(200):
        l2 = L2Cache(lines * line, line, _find)
        keep = lines - l2.slack                      # lines the cache holds once it evicts
        lru = OrderedDict()
        before = rng.choice(keep, size=int(rng.integers(10, keep)), replace=False)
        for x in np.concatenate([before, rng.choice(before, size=int(rng.integers(0, 40)))]):
            l2.access([(int(x) * line, line)], False)
            lru[int(x)] = None
            lru.move_to_end(int(x))
        inflow, periods = int(rng.integers(1, 9)), int(rng.integers(5, 60))
        fresh = iter(range(2048, 2048 + inflow * periods))        # the loop's own lines (second allocation)
        reads, expected, seen = [], None, set()
        for q in range(periods):
            old = [int(x) for x in rng.choice(before, size=int(rng.integers(0, 6)))]
            own = [next(fresh) for _ in range(inflow)]
            for x in old + own:
                if x in old and x not in seen and x not in lru and expected is None:
                    expected = q
                seen.add(x)
                lru[x] = None
                lru.move_to_end(x)
                while len(lru) > keep:
                    lru.popitem(last=False)
            reads.append((q, np.array(old + own, np.int64)))
        got = L2Projection((), lines * line, line, 1, l2, inflow=inflow).first_lost_period(iter(reads))
        assert got == expected, (got, expected)
        found += expected is not None
    assert 40 < found < 180          # (both kinds of case drawn)


def test_writes_go_through_once_the_cache_has_filled():
    """writes_through_when_full, against the plain write-back rule with each write made clean by
    hand once the cache has evicted for the first time: the write's bytes go to device memory as
    write-back does (reported beside the dirty lines evicted, not as a fetch the transfer waits
    for), lines it found clean stay clean (held, in LRU order as any), lines already dirty stay
    dirty. Random reads and writes, as (address, bytes) lists and
    as Rows, overflowing the cache many times."""
    from simulator.program import Rows
    rng = np.random.default_rng(17)
    line, big, find = 512, BIG, _find_big
    through_writes = 0
    for _ in range(3):
        cache = L2Cache(2 << 20, line, find, writes_through_when_full=True)
        ref = L2Cache(2 << 20, line, find)
        filled = False
        for _ in range(500):
            al = big[rng.integers(2)]
            n, count = int(rng.integers(1, 6 * line)), int(rng.integers(1, 8))
            pitch = n + int(rng.integers(0, 3 * line))
            start = al.addr + int(rng.integers(0, al.size - (count - 1) * pitch - n))
            rows = [(start + i * pitch, n) for i in range(count)]
            write = bool(rng.integers(2))
            got = cache.access(Rows(None, start, n, pitch, count) if rng.integers(2) else rows, write)
            mask = ref.tags.get(al.addr, (np.zeros(al.size // line, np.uint32),))[0]
            before = mask.copy()
            fetch = ref._access_each(rows, write)
            mask = ref.tags[al.addr][0]
            written = 0
            if write and filled:
                touched = np.zeros(mask.size, bool)
                for a, nb in rows:
                    touched[(a - al.addr) // line:(a - al.addr + nb - 1) // line + 1] = True
                was_dirty = (before & ref.dirty) != 0
                mask[touched & ~was_dirty] &= ~ref.dirty
                written = count * n
                through_writes += 1
            over = ref.resident > ref.capacity
            evicted = _evict_by_sorting(ref) if over else 0
            filled |= over
            assert got == (fetch, evicted + written)
            assert _state(cache) == _state(ref)
    assert through_writes > 100               # the rule really ran


def test_fast_mode_touch_writes_through_once_the_cache_has_filled():
    """touch() (a skipped loop's ranges in one batch): once the cache has filled, their writes
    leave their lines held and clean (their bytes went to device memory in the skipped periods'
    own time, reported as write-back), before, dirty."""
    big = [_Alloc(0, 4 << 20)]
    for filled in (False, True):
        c = L2Cache(2 << 20, 512, lambda a: big[0] if a < (4 << 20) else None, writes_through_when_full=True)
        if filled:
            c.access([(0, 3 << 20)], False)                 # overflows: the cache has filled
        addr = np.arange(3 << 20, 4 << 20, 4096, dtype=np.int64)
        out = c.touch(addr, np.full(addr.size, 4096), np.ones(addr.size, bool), np.zeros(addr.size, np.int64))
        mask = c.tags[0][0][(3 << 20) // 512:]
        assert np.all(mask != 0)                                    # the written lines are held
        assert out == (0, (1 << 20) if filled else 0)              # through once filled; nothing dirty evicted
        assert np.all((mask & c.dirty) == 0) if filled else np.all((mask & c.dirty) != 0)


def test_a_launch_writes_through_only_once_its_own_traffic_has_filled_the_cache():
    """A full cache left by an earlier launch does not send the next launch's writes through: they
    stay dirty (evicting the old lines, as LRU does) until an eviction takes a line the launch
    touched itself, then go through. Counted by hand, a 2 MB cache of 512-B lines: launch 1 reads
    2.5 MB (the cache fills with clean lines); launch 2 writes 1.5 MB of new lines (the old ones
    go, clean: nothing written back; all 1.5 MB still dirty), then 1 MB more, whose first 0.5 MB
    brings its own lines to the cache's 2 MB: the last 0.5 MB goes through (held clean), and
    evicts 0.5 MB of its own dirty lines. Taken one transfer at a time (access) and as fast mode's
    batches (touch)."""
    kb4 = np.arange(0, 1 << 20, 4096, dtype=np.int64)
    for batch in (False, True):
        c = L2Cache(2 << 20, 512, _find_big, writes_through_when_full=True)
        c.launch_began()
        c.access([(0, 5 << 19)], False)
        assert c.filled                                           # launch 1 overflowed it
        c.launch_began()
        assert not c.filled
        first = [(3 << 20) + kb4, (5 << 19) + kb4[:128]]          # 1 MB and 0.5 MB, new to the cache
        went = 0
        for k, addr in enumerate(first + [kb4]):
            base = np.full(addr.size, 3 << 20 if k == 0 else 0, np.int64)
            if batch:
                went += c.touch(addr, np.full(addr.size, 4096), np.ones(addr.size, bool), base)[1]
            else:
                went += sum(c.access([(int(a), 4096)], True)[1] for a in addr)
            if k == 1:
                assert went == 0                                  # 1.5 MB written: none through
                dirty = np.count_nonzero(c.tags[3 << 20][0] & c.dirty) + \
                    np.count_nonzero(c.tags[0][0][5 << 10:6 << 10] & c.dirty)
                assert dirty == 3 << 10                           # every line of it still dirty
        # written back: the last 0.5 MB as it went through, and the 0.5 MB of launch 2's own oldest
        # (dirty) lines its lines then evicted; the 1 MB's first half is held dirty, its second clean
        assert abs(went - (1 << 20)) <= 8 << 10                   # (an eviction batch aside)
        last = (c.tags[0][0][:2 << 10] & c.dirty) != 0
        assert np.count_nonzero(last[:1 << 10]) >= (1 << 10) - 16 and np.count_nonzero(last[1 << 10:]) <= 16
        assert c.filled


def test_fast_mode_touch_finds_the_first_eviction_within_its_batch():
    """A batch of writes that fills the cache part-way leaves each line dirty or clean as the
    same writes taken one at a time by access() do: dirty up to the one that first overflows
    the cache, clean after it (the clean lines read before are what both evict)."""
    writes = np.arange(3 << 20, 4 << 20, 4096, dtype=np.int64)          # 256 writes of 8 lines
    marks = []
    for batch in (True, False):
        c = L2Cache(2 << 20, 512, _find_big, writes_through_when_full=True)
        c.access([(0, 3 << 19)], False)                       # 1.5 MB read: 1,024 lines still free
        if batch:
            c.touch(writes, np.full(writes.size, 4096), np.ones(writes.size, bool),
                    np.full(writes.size, 3 << 20, np.int64))
        else:
            for a in writes.tolist():
                c.access([(a, 4096)], True)
        marks.append((c.tags[3 << 20][0] & c.dirty) != 0)
    assert np.array_equal(marks[0], marks[1])
    assert 0 < np.count_nonzero(marks[0]) < marks[0].size           # both kinds of line


def test_range_lines_and_unique_sorted_against_numpy():
    """range_lines (every line of each range, concatenated) against a line-by-line list, and
    unique_sorted against np.unique, over random ranges: one line each, several, none, any dtype."""
    rng = np.random.default_rng(11)
    for _ in range(400):
        k = int(rng.integers(0, 30))
        l0 = rng.integers(-50, 1000, k)
        span = (np.ones(k, np.int64), rng.integers(1, 5, k), rng.integers(0, 5, k))[int(rng.integers(3))]
        lines, first, counts = range_lines(l0, l0 + span)
        expect = [x for a, c in zip(l0.tolist(), span.tolist()) for x in range(a, a + c)]
        assert lines.dtype == np.int64 and lines.tolist() == expect
        assert counts.tolist() == span.tolist()
        assert first.tolist() == np.concatenate(([0], np.cumsum(span)[:-1])).astype(int).tolist()[:k]
        values = rng.integers(-5, 40, int(rng.integers(0, 60))).astype(rng.choice([np.int64, np.int32, np.uint32]))
        got = unique_sorted(values)
        assert got.dtype == values.dtype and got.tolist() == np.unique(values).tolist()
