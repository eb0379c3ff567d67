"""`Loop`: a kernel loop the engine can see, so that fast mode can fast-forward it.

    for tile in Loop(tiles, period=2):          # a double-buffered loop over tiles
        ...
    for item in Loop(items, key=lambda it: it.rows):   # items of different shapes

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
the skipped iterations leave in the L2 are extrapolated from the windows, each transfer's address
moving by what it moved from window 1 to window 2. `audit_loops()` checks both: in the exact
modes, every declared loop then records each iteration and reports, in a run of one key beyond
its first two periods (which fast mode always simulates), an iteration whose cost shapes differ
from the one a period before it, or whose GM transfers did not move by the same step as that
one's did.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Hashable, Iterable, Iterator, TypeVar

from ..recorder import current_context

T = TypeVar("T")


def Loop(iterations: int | Iterable[T], key: Callable[[T], Hashable] | None = None,
         period: int = 1) -> Iterable[T]:
    """The iterations (an int n means range(n)) of a loop that fast mode may fast-forward."""
    items = range(iterations) if isinstance(iterations, int) else iterations
    if period < 1:
        raise ValueError(f"Loop: period must be >= 1, got {period}")
    ctx = current_context()
    if ctx.fast is None:
        if _audit.findings is not None:
            return _audited(ctx, list(items), key, period, sys._getframe(1))
        return items
    return _fast_forwarded(ctx, list(items), key, period)


def _fast_forwarded(ctx, items: list, key, period: int) -> Iterator:
    """Fast mode: each run of interchangeable iterations, with its middle fast-forwarded (in two
    segments, each measured, where the loop's new lines would fill the L2 during one skip: the
    first up to the fill, the second in the regime after it)."""
    n, i = len(items), 0
    l2_spec = ctx.profile.l2
    cores = min(ctx.block_num, ctx.core.kind.count)
    while i < n:
        j = i + 1
        if key is None:
            j = n
        else:
            k = key(items[i])
            while j < n and key(items[j]) == k:
                j += 1
        filled = False          # a segment of this run has filled the L2 with its own lines
        l2 = ctx.device.l2                # (its free room cuts the first segment only)
        while i < j:
            split = ctx.fast.split(j - i, period)
            if split is None:
                yield from items[i:j]
                i = j
                break
            head, skip = split
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
                l2 = None
                filled, skip = cut < skip and by_size, cut
            ctx.loop_mark(run, 2, skip, period)
            i += head + skip


class _Audit:
    findings: list[str] | None = None      # while audit_loops() is on: what it found


_audit = _Audit()


@contextmanager
def audit_loops():
    """Within it, every `Loop` recorded in an exact mode checks its key and period (a list of
    findings is yielded: one line per run of iterations a skip would have taken for others they
    are not like, or whose addresses it would have extrapolated wrongly)."""
    before = _audit.findings
    _audit.findings = []
    try:
        yield _audit.findings
    finally:
        _audit.findings = before


def _audited(ctx, items: list, key, period: int, frame) -> Iterator:
    """The iterations, each recorded with its cost shapes and GM transfers; at the end, each
    run of one key compared period by period."""
    keys = [key(x) if key is not None else None for x in items]
    shapes: list[list] = []
    starts: list[list] = []          # per iteration: its GM transfers' first addresses
    ctx.open_windows.append([[]])
    ctx.open_shapes.append([[]])
    try:
        for x in items:
            yield x
            shapes.append(ctx.open_shapes[-1][-1])
            starts.append([_first_address(i) for i in ctx.open_windows[-1][-1]])
            ctx.open_shapes[-1][-1] = []
            ctx.open_windows[-1][-1] = []
    finally:
        ctx.open_windows.pop()
        ctx.open_shapes.pop()
    if len(shapes) < len(items):
        return
    where = f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno} (block {ctx.block_idx})"
    start = 0
    for i in range(1, len(items) + 1):
        if i < len(items) and keys[i] == keys[start]:
            continue
        for r in range(start + 2 * period, i):
            why = _unlike(shapes, starts, r, period)
            if why:
                _audit.findings.append(f"{where}: iteration {r} (key {keys[r]!r}) {why}")
                break
        start = i


def _unlike(shapes: list, starts: list, r: int, period: int) -> str | None:
    """How iteration r is not what a skip would take it for, or None."""
    a, b = shapes[r - period], shapes[r]
    if a != b:
        at = next((k for k, (u, v) in enumerate(zip(a, b)) if u != v), min(len(a), len(b)))
        return (f"differs from iteration {r - period} at its instruction {at} of {len(b)} "
                f"({b[at] if at < len(b) else None} against {a[at] if at < len(a) else None})")
    s0, s1, s2 = starts[r - 2 * period], starts[r - period], starts[r]
    if len(s0) == len(s1) == len(s2):
        for k, (x, y, z) in enumerate(zip(s0, s1, s2)):
            if None not in (x, y, z) and z - y != y - x:
                return (f"moves its GM transfer {k} by {z - y} bytes from iteration {r - period}, "
                        f"which moved it by {y - x} (a skip extrapolates one step per period)")
    return None


def _first_address(instr) -> int | None:
    """Where a GM transfer starts; None for a gather or scatter, which the L2 sees at the nominal
    addresses its kernel declares (approximate by design: docs/FAST_MODE.md)."""
    if "[gather]" in instr.name or "[scatter]" in instr.name:
        return None
    gm = instr.gm
    return gm.start if hasattr(gm, "start") else gm[0][0]
