"""`Loop`: a kernel loop the engine can see, so that fast mode can fast-forward it.

    for tile in Loop(tiles, period=2):          # a double-buffered loop over tiles
        ...
    for item in Loop(items, key=lambda it: it.rows):   # items of different shapes
    for i in Loop(steps, period=2, touches=nominal_touches):   # gathers / scatters declared

In the exact modes (functional, timing) `Loop` is its iterations, nothing more: the program is
what the plain `for` would record. In fast mode a run of interchangeable iterations (consecutive
ones with the same `key`; all of them without one) is recorded only in part: a warm-up, two
measured windows of `period` iterations and a tail, with the iterations between them never run
at all, and the engine adds what they would have cost (simulator/fast/). `period` is the loop's
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
from typing import Callable, Hashable, Iterable, TypeVar

import numpy as np

from ..fast.segments import fast_forwarded
from ..l2_cache import range_lines, unique_sorted
from ..recorder import current_context
from .indirect import NominalRows
from .loop_audit import ACTIVE, audited


T = TypeVar("T")


def Loop(iterations: int | Iterable[T], key: Callable[[T], Hashable] | None = None,
         period: int = 1, touches: Callable[[T], Iterable] | None = None) -> Iterable[T]:
    """The iterations (an int n means range(n)) of a loop that fast mode may fast-forward;
    `touches(item)`: the NominalRows of the item's gathers and scatters, if it has any."""
    items = range(iterations) if isinstance(iterations, int) else iterations
    if period < 1:
        raise ValueError(f"Loop: period must be >= 1, got {period}")
    ctx = current_context()
    audit = ACTIVE.current
    if audit is not None:
        caller = sys._getframe(1)
        where = f"{caller.f_code.co_filename.rsplit('/', 1)[-1]}:{caller.f_lineno}"
        if ctx.fast is None:
            declared = (lambda item: declared_rows(touches, item)) if touches is not None else None
            return audited(ctx, list(items), key, period, where, audit, declared)
        audit.found.setdefault((where, "recorded in fast mode: not audited (audit an exact mode's run)"), set())
    if ctx.fast is None:
        return items
    items = list(items)
    return fast_forwarded(ctx, items, key, period, DeclaredRows(items, touches) if touches is not None else None)


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
        ks = range(max(first, 0), min(first + count, len(self.items)))
        made, memo = self._make(ks, keep), self.memo
        parts = [got for k in ks if (got := made[k] if k in made else memo[k]) is not None]
        if not parts:
            return None
        return tuple(np.concatenate(x) for x in zip(*parts)) if len(parts) > 1 else parts[0]

    def _make(self, ks, keep: bool) -> dict:
        """The rows of those of iterations `ks` not remembered yet, made together (a few rows an
        iteration cost numpy's set-up more than their work); remembered if `keep`."""
        missing = [k for k in ks if k not in self.memo]
        if not missing:
            return {}
        made = dict(zip(missing, _rows_each([declared_rows(self.touches, self.items[k]) for k in missing])))
        if keep:
            self.memo.update(made)
        return made

    def read_lines(self, first: int, count: int, line: int, keep: bool = True) -> np.ndarray:
        """The L2 lines (address // `line`) iterations first .. first + count - 1 read, distinct."""
        return self.lines_of_ranges([first], count, line, keep)[0]

    def lines_of_ranges(self, firsts: list[int], count: int, line: int, keep: bool = True) -> list[np.ndarray]:
        """read_lines(first, count, line) for each of `firsts`, made together (`keep` as `of`'s)."""
        spans = [range(max(f, 0), min(f + count, len(self.items))) for f in firsts]
        made, memo = self._make(sorted({k for ks in spans for k in ks}), keep), self.memo
        got = [(i, r) for i, ks in enumerate(spans) for k in ks
               if (r := made[k] if k in made else memo[k]) is not None]
        out = [np.empty(0, np.int64) for _ in firsts]
        if not got:
            return out
        addr, n, write = (np.concatenate(x) for x in zip(*(r for _, r in got)))
        tag = np.repeat(np.fromiter((i for i, _ in got), np.int64, len(got)), [r[0].size for _, r in got])
        sel = ~write & (n > 0)
        a, n, tag = addr[sel], n[sel], tag[sel]
        lines, _, counts = range_lines(a // line, (a + n - 1) // line + 1)
        tag = np.repeat(tag, counts)
        if not lines.size:
            return out
        span = int(lines.max()) + 1
        keys = unique_sorted(tag * span + lines)      # (by range, then line: each range's lines distinct and ascending)
        tags = keys // span
        cuts = np.searchsorted(tags, np.arange(len(firsts) + 1))
        for k in range(len(firsts)):
            if cuts[k] < cuts[k + 1]:
                out[k] = keys[cuts[k]:cuts[k + 1]] - k * span
        return out


def _rows_each(declared: list[list]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
    """Per iteration, the (addresses, lengths, write flags) of its declared NominalRows in their
    order, each row of each copy (None for an iteration that declares none), made in one pass."""
    flat = [t for d in declared for t in d]
    if not flat:
        return [None] * len(declared)
    rows, pitch = flat[0].rows, flat[0].pitch
    bases = [np.asarray(t.bases, dtype=np.int64) for t in flat]
    counts = [b.size * t.rows for b, t in zip(bases, flat)]
    if all(t.rows == rows and t.pitch == pitch for t in flat):    # (one shape: one expansion)
        addr = bases[0] if len(flat) == 1 else np.concatenate(bases)
        if rows > 1:
            addr = (addr[:, None] + pitch * np.arange(rows)).ravel()
    else:
        addr = np.concatenate([b if t.rows == 1 else (b[:, None] + t.pitch * np.arange(t.rows)).ravel()
                               for b, t in zip(bases, flat)])
    size = np.repeat(np.fromiter((t.n for t in flat), np.int64, len(flat)), counts)
    write = np.repeat(np.fromiter((bool(t.write) for t in flat), bool, len(flat)), counts)
    out, at, item = [], 0, 0
    for d in declared:
        if not d:
            out.append(None)
            continue
        end = at + sum(counts[item:item + len(d)])
        item += len(d)
        out.append((addr[at:end], size[at:end], write[at:end]))
        at = end
    return out


def declared_rows(touches: Callable, item) -> list:
    """What `touches` declares for an iteration, checked to be NominalRows."""
    got = list(touches(item))
    for t in got:
        if not isinstance(t, NominalRows):
            raise TypeError(f"Loop touches({item!r}) must give NominalRows (simulator.kernel.indirect."
                            f"nominal_rows), got {t!r}")
    return got
