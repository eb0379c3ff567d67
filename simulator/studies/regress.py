"""Cycle regression: a trace's calls against the baselines it carries, per chip, with a tolerance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .sweep import replay
from .trace import StudyError, Workload, write_baselines
from .whatif import make_profile


@dataclass
class Drift:
    call: int
    label: str
    op: str
    baseline: float | None
    current: float | None
    drift: float | None
    status: str            # ok | DRIFT | ERROR | skipped | new | expected (refused as recorded)
    note: str = ""         # why an ERROR is one, when the row's own status does not say it


@dataclass
class RegressResult:
    soc: str
    tolerance: float
    drifts: list[Drift]
    total_baseline: float
    total_current: float
    rows: list[dict]
    updated: bool = False

    @property
    def total_drift(self) -> float:
        return (self.total_current - self.total_baseline) / self.total_baseline if self.total_baseline else 0.0

    @property
    def failures(self) -> list[Drift]:
        return [d for d in self.drifts if d.status in ("DRIFT", "ERROR")]

    @property
    def passed(self) -> bool:
        return self.updated or (not self.failures and abs(self.total_drift) <= self.tolerance)


# baselines are written to 3 decimals of a cycle (update=True): a call within half of the last one
# is the baseline itself, so --tolerance 0 passes on the engine that recorded it
BASELINE_ROUNDING = 0.0005


def baseline_key(soc: str, mode: str = "timing") -> str:
    """Where a trace keeps a chip's baselines: under the SoC's name for the exact engine (timing
    and functional mode give the same cycles), under '<SoC>:fast' for fast mode's."""
    return f"{soc}:fast" if mode == "fast" else soc


def regress(w: Workload, soc: str, tolerance: float = 0.02, update: bool = False,
            calls: Sequence[int] | None = None, **kw) -> RegressResult:
    """Compare the current cycles of a trace's calls with its baselines on `soc` (fast mode's
    with mode="fast", the exact engine's otherwise). Each call and the count-weighted total must
    stay within ±tolerance. `update=True` records the current cycles as the baselines (in the
    file) instead."""
    if tolerance < 0:
        raise StudyError(f"--tolerance must be >= 0, got {tolerance}")
    make_profile(soc)
    mode = kw.get("mode", "timing")
    key = baseline_key(soc, mode)
    base = w.baselines.get(key)
    if base is None and not update:
        have = ", ".join(sorted(w.baselines)) or "none"
        flag = " --mode fast" if mode == "fast" else ""
        raise StudyError(f"{w.path or w.name}: no {'fast-mode ' if mode == 'fast' else ''}baselines for {soc} "
                         f"(has: {have}); record them with "
                         f"`ascend-sim regress {w.path or 'TRACE'} --soc {soc}{flag} --update`")
    rows = replay(w, soc, calls=calls, **kw)
    drifts: list[Drift] = []
    tb = tc = 0.0
    for r in rows:
        i = r["call"]
        b = base["calls"][i] if base else None
        cur = r["cycles"] if r["status"] == "ok" else None
        if r["status"] == "not available":
            drifts.append(Drift(i, r["label"], r["op"], b if not isinstance(b, str) else None, None, None, "skipped"))
            continue
        if isinstance(b, str):            # the call was recorded as refused: it must still be
            ok = r["status"] == b
            now = f"now runs ({cur:,.0f} cycles)" if cur is not None else f"now {r['status']}"
            drifts.append(Drift(i, r["label"], r["op"], None, cur, None, "expected" if ok else "ERROR",
                                "" if ok else f"recorded as '{b}', {now}"))
            continue
        if cur is None:
            drifts.append(Drift(i, r["label"], r["op"], b, None, None, "ERROR"))
            continue
        if b is None:
            drifts.append(Drift(i, r["label"], r["op"], None, cur, None, "new"))
            continue
        if abs(cur - b) <= BASELINE_ROUNDING:   # the baseline as recorded (to 3 decimals) holds this call
            b = cur
        d = (cur - b) / b if b else (0.0 if cur == 0 else math.inf)
        if abs(d) < 1e-12:
            d = 0.0
        tb += b * r["count"]
        tc += cur * r["count"]
        drifts.append(Drift(i, r["label"], r["op"], b, cur, d, "ok" if abs(d) <= tolerance else "DRIFT"))
    res = RegressResult(soc, tolerance, drifts, tb, tc, rows)
    if update:
        version = _version()
        old = list(base["calls"]) if base else [None] * len(w.calls)
        for r in rows:
            st = r["status"]
            old[r["call"]] = round(r["cycles"], 3) if st == "ok" else (None if st == "not available" else st)
        total = sum(c * w.calls[i].count for i, c in enumerate(old) if isinstance(c, (int, float)))
        w.baselines[key] = {"total": round(total, 3),
                            "recorded": f"ascend-sim {version}, {mode} mode",
                            "calls": old}
        if w.path is not None:
            write_baselines(w)
        res.updated = True
    return res


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("ascend-sim")
    except Exception:          # not installed (running from a checkout)
        return "dev"
