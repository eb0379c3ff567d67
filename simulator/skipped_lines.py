"""What a fast-forwarded loop's skipped periods leave in the L2: their GM ranges, each transfer's
extrapolated from the two measured windows (one period apart) or, for gathers and scatters a Loop
declares, their nominal rows (simulator/fast.py takes them at the skip)."""
from __future__ import annotations

import numpy as np

from .l2_cache import range_lines
from .program import Instr, Rows


def first_address(gm) -> int | None:
    """Where a transfer's GM ranges start (None for none)."""
    if type(gm) is Rows:
        return gm.start
    return gm[0][0] if gm else None


def _gm_rows(window: list[Instr]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The GM ranges of a window's transfers in program order, expanded in one go: (addresses,
    lengths, the index in `window` of the transfer each belongs to). A pair is a row of one."""
    rows, owners = [], []
    for k, instr in enumerate(window):
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
    return np.unique(range_lines(addr[keep] // line, (addr[keep] + n[keep] - 1) // line + 1)[0])


# skipped periods' ranges are made this many at a time (bounded memory)
TOUCH_CHUNK = 1 << 16


def skipped_touches(windows: tuple, periods: int, keep: int, spans, rows: int = TOUCH_CHUNK):
    """The GM ranges the last `keep` of `periods` skipped periods would have touched, in chunks
    of about `rows` ranges as (addresses, lengths, write flags, allocation bases, periods), oldest
    period first and in each period its reads before its writes (the order the L2 should take
    them in). `windows`: (window 1, window 2, declared). Each transfer's addresses are
    extrapolated from window 1 to window 2 (one period apart), but for gathers and scatters where
    their Loop declares them (`declared`, simulator.kernel.loop.DeclaredTouches): their nominal rows. A range outside every allocation
    (an extrapolated address past a tensor's end) is left out. Windows of different shapes give
    nothing (the loop was not periodic in its transfers). `spans` are the device allocations'
    (first byte, past the last byte), ascending."""
    window1, window2, declared = windows
    if len(window1) != len(window2) or keep <= 0:
        return
    moved = [(first_address(a.gm), first_address(b.gm)) for a, b in zip(window1, window2)]
    valid = np.array([None not in m and not (declared and is_indirect(b)) for m, b in zip(moved, window2)], dtype=bool)
    steps = np.array([0 if None in m else m[1] - m[0] for m in moved], dtype=np.int64)
    addr, n, owner = _gm_rows(window2)
    sel = valid[owner]
    addr, n, owner = addr[sel], n[sel], owner[sel]
    write = np.array([i.gm_write for i in window2], dtype=bool)[owner]
    order = np.argsort(write, kind="stable")     # reads first, each in program order
    addr, n, write, step = addr[order], n[order], write[order], steps[owner[order]]
    if addr.size == 0 and not declared:
        return
    bases, limits = spans
    per_chunk = max(1, rows // max(len(addr) + (declared.rows_per_period() if declared else 0), 1))
    for j0 in range(periods - keep + 1, periods + 1, per_chunk):
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
        owner = np.searchsorted(bases, at, side="right") - 1
        ok = owner >= 0
        owner[~ok] = 0
        ok &= at + nn <= limits[owner]
        yield at[ok], nn[ok], ww[ok], bases[owner[ok]], period[ok]


def touch_together(l2, sources: list) -> int:
    """The L2 takes the skipped periods of several blocks' runs (`sources`: skipped_touches
    generators) period by period, each period's ranges block after block, as blocks running side
    by side would leave them (one block's periods after another's would leave its lines the
    oldest). Returns the dirty bytes it evicted."""
    dirty, live = 0, list(sources)
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
        dirty += l2.touch(at[order], n[order], write[order], base[order])
    return dirty


def is_indirect(instr: Instr) -> bool:
    """A gather or scatter: its L2 address is the nominal one its kernel gives, not one step a
    period from the last."""
    return "[gather]" in instr.name or "[scatter]" in instr.name


def kept_periods(windows, periods: int, l2_bytes: int, line: int, cores: int, distinct: bool = False) -> int:
    """How many of the last skipped periods can still be in the L2 after the skip: as many as
    the L2 holds of what `cores` cores running this loop move per period (LRU keeps the newest)
    or, `distinct`, of the lines they bring into it (those of window 2 that window 1 did not
    touch): a loop that re-reads its lines brings fewer than it moves, and where it fills the L2
    the lines it brings are what evicts those held from before it."""
    new = new_lines(windows, line).size * line if distinct else 0
    # (windows that bring no new line re-read what the L2 holds: by bytes, a few periods are touched, not all)
    per_period = (new or sum(i.chan_bytes for i in windows[1])) * max(cores, 1)
    if per_period <= 0:
        return 0
    return min(periods, -(-l2_bytes // per_period))


def new_lines(windows, line: int) -> np.ndarray:
    """The L2 lines window 2's transfers touch that window 1's did not."""
    return np.setdiff1d(_lines(windows[1], line), _lines(windows[0], line), assume_unique=True)


def first_lost_period(l2, reads, free_lines: float, inflow: float) -> int | None:
    """The first period at which a loop reads a line the L2 held as it began that the loop's own
    new lines have evicted by then, or None. `reads`: (period from the loop's start, the lines
    it reads) in period order; `inflow`: lines the loop adds to the L2 a period, on every core
    running it. Past its free room the L2 evicts its oldest lines first, and those the loop has
    read since it began are its own newest: the lines held from before the loop go in their
    LRU order, skipping those, so one read first at period q is lost when more than its rank
    among the rest have gone by q. Until then the loop's reads of them hit, as its windows saw;
    after, they miss (other cores' reads of them are not seen here: they would keep them longer)."""
    order = l2.resident_stamps()
    if order.size == 0 or inflow <= 0:
        return None
    seen: set = set()
    refreshed = np.empty(0, np.int64)       # stamps of held lines the loop has read, ascending
    for q, lines in reads:
        gone = inflow * q - free_lines
        fresh = np.fromiter((x for x in lines.tolist() if x not in seen), np.int64)
        if fresh.size == 0:
            continue
        seen.update(fresh.tolist())
        stamps = l2.stamps(fresh)
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


def lines_lost(l2, reads, free_lines: float, inflow: float) -> int:
    """How many of the lines a loop's sampled periods read (`reads`: (period from the loop's
    start, its lines)) the L2 holds as the loop begins but will have evicted by that period:
    first_lost_period's projection, counted rather than stopped at, and without its refreshes
    (a line the loop read in an earlier, unsampled period is taken at its old stamp): an
    estimate of how much of its held input a loop loses."""
    order = l2.resident_stamps()
    lost = 0
    for q, lines in reads:
        if lines.size == 0:
            continue
        stamps = l2.stamps(lines)
        stamps = stamps[stamps >= 0]
        lost += int(np.count_nonzero(np.searchsorted(order, stamps) < inflow * q - free_lines))
    return lost
