"""`audit_loops()`: in the exact modes, every `Loop` recorded inside it checks its key and its
period, reporting an iteration fast mode would take on trust although it is not like the one a
period before it, and gathers and scatters its `touches` does not declare."""
from __future__ import annotations

import threading
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import numpy as np

from ..fast.l2 import first_address, is_indirect
from ..fast.schedule import DEFAULT_SCHEDULE
from ..program import Rows


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


ACTIVE = _Audit()


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
        state = ACTIVE.current = _AuditState(ACTIVE.current)
    findings = LoopFindings()
    try:
        yield findings
    finally:
        with _audit_lock:
            state.closed = True
            if ACTIVE.current is state:
                before = state.before
                while before is not None and before.closed:
                    before = before.before
                ACTIVE.current = before
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


def audited(ctx, items: list, key, period: int, where: str, state: _AuditState,
             declared: Callable | None = None) -> Iterator:
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
            if declared is not None and not undeclared:
                why = _undeclared(moves, declared(x))
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
