"""Replay and what-if sweeps: the profile points of a grid, evaluating a workload at each, and the
tidy rows (CSV / JSON / JSON lines) they produce.
"""
from __future__ import annotations

import csv
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Iterable, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError

from ..inputs import parse_json, read_text, schema_error
from ..outputs import atomic_path, check_output, write_text
from ..profile import PIPES
from .distribute import Task, map_tasks
from .estimate import estimated_row
from .trace import StudyError, Workload
from .whatif import MAX_SWEEP_POINTS, make_profile


Name = Annotated[str, Field(min_length=1, strict=True)]
# a what-if value as a profile field takes it: a number, a word, true/false, or a list of those
Scalar = Union[StrictInt, StrictFloat, StrictStr, bool]
Value = Union[Scalar, list[Scalar]]


class SweepFile(BaseModel):
    """A sweep file (traces/sweeps/): the workload, chips, fixed what-ifs, the swept parameters
    (each a value or a non-empty list of values), the calls and where the rows and plot go."""
    model_config = ConfigDict(extra="forbid")
    workload: Name
    socs: Union[Name, Annotated[list[Name], Field(min_length=1)], None] = None
    set: dict[Name, Value] | None = None
    parameters: dict[Name, Union[Scalar, Annotated[list[Value], Field(min_length=1)]]] | None = None
    calls: Union[StrictStr, list[Annotated[int, Field(ge=0, strict=True)]], None] = None
    output: Name | None = None
    plot: Name | None = None


SWEEP_FIELDS = {
    "workload": "the trace's path (text)",
    "socs": "a SoC name or a non-empty list of SoC names",
    "set": "a mapping of profile field -> value (a number, a word, true/false or a list of those)",
    "parameters": "a mapping of profile field -> a value or a non-empty list of values",
    "calls": "call indices: text like '0-3,7' or a list of integers >= 0",
    "output": "the rows' file path (text)",
    "plot": "the plot's file path (text)",
}


def read_sweep_file(path: Path, raw: dict) -> SweepFile:
    try:
        return SweepFile.model_validate(raw)
    except ValidationError as e:
        raise StudyError(schema_error(e, f"{path}: sweep file", SWEEP_FIELDS, raw)) from None


@dataclass
class Point:
    soc: str
    overrides: dict[str, Any]            # everything applied (fixed + swept)
    params: dict[str, Any]               # the swept values, for the rows


ROW_SUFFIXES = (".csv", ".json", ".jsonl")
ROW_HEAD = ["soc", "point", "kind", "call", "label", "op", "stream", "count", "shapes", "status", "cycles",
            "time_us", "bound", "error_bound_cycles", "error_bound_fraction", "simulated_fraction",
            "unit", "dtype", "flops", "bytes", "compute_us", "memory_us", "launch_us", "memory",
            "rate_dtype", "workspace_bytes", "device_bytes", "device_GBps", "roofline_cycles",
            "roofline_efficiency", "compute_pipe", "compute_work_cycles", "compute_cores",
            "device_bytes_per_cycle"] + [f"busy_{p}" for p in PIPES] + ["tiling", "message"]


def evaluate(w: Workload, points: Sequence[Point], *, calls: Sequence[int] | None = None,
             workers: int | None = 1, scheduler: str | None = None, progress: bool = False,
             mode: str = "timing", seed: int = 0, desc: str = "simulating",
             journal: str | Path | None = None, resume: bool = False, estimated: bool = False) -> list[dict]:
    """Rows for every (point, call): identical calls of a point are simulated once. With a
    `journal` file, each call's row is appended to it the moment it finishes, so an interrupted
    study keeps what it finished; `resume` takes the rows already there instead of running
    those calls again (a row counts only for the very same call, profile, mode and seed).
    With `estimated`, each point also has a row per estimated call of the workload (kind
    "estimated", status "estimated": a roofline on the point's profile, studies/estimate.py);
    every row's `kind` says which part of the step it is."""
    idx = list(calls) if calls is not None else list(range(len(w.calls)))
    for p in points:                      # fail fast, in this process, on a bad SoC or field
        make_profile(p.soc, p.overrides)
    tasks: list[Task] = []
    slot: dict[tuple[int, str], int] = {}
    for pi, p in enumerate(points):
        for ci in idx:
            key = (pi, w.calls[ci].key())
            if key not in slot:
                slot[key] = len(tasks)
                tasks.append(Task(w.calls[ci], p.soc, p.overrides, mode, seed))
    results = _run_journaled(tasks, journal, resume, workers=workers, scheduler=scheduler,
                             progress=progress, desc=desc)
    rows = []
    for pi, p in enumerate(points):
        for ci in idx:
            c = w.calls[ci]
            r = results[slot[(pi, c.key())]]
            row: dict[str, Any] = {"soc": p.soc, "point": pi}
            row.update(p.params)
            row.update({"kind": "simulated", "call": ci, "label": c.label, "op": c.op, "stream": c.stream,
                        "count": c.count})
            row.update(r)
            rows.append(row)
        if estimated and w.estimated:
            prof = make_profile(p.soc, p.overrides)
            for ei, e in enumerate(w.estimated):
                row = {"soc": p.soc, "point": pi}
                row.update(p.params)
                row.update({"kind": "estimated", "call": ei, "label": e.label, "op": e.op, "stream": 0,
                            "count": e.count})
                row.update(estimated_row(e, prof))
                rows.append(row)
    return rows


def task_key(t: Task) -> str:
    """What makes a row reusable on --resume: the call, the profile point, mode and seed."""
    return json.dumps([t.call.to_record(), t.soc, t.overrides, t.mode, t.seed, t.tiling],
                      sort_keys=True, default=str)


def read_journal(path: Path) -> dict[str, dict]:
    """The rows a journal holds, by task key; a line cut short by an interruption is ignored."""
    done: dict[str, dict] = {}
    if path.exists():
        for line in read_text(path, "journal", StudyError).splitlines():
            try:
                entry = json.loads(line)
                done[entry["key"]] = entry["row"]
            except (ValueError, KeyError, TypeError):
                continue
    return done


def _run_journaled(tasks: list[Task], journal, resume: bool, **kw) -> list[dict]:
    keys = [task_key(t) for t in tasks]
    done = read_journal(Path(journal)) if journal is not None and resume else {}
    todo = [i for i, k in enumerate(keys) if k not in done]
    results: list[dict | None] = [done.get(k) for k in keys]
    if journal is None:
        for i, row in zip(todo, map_tasks([tasks[i] for i in todo], **kw)):
            results[i] = row
        return results  # type: ignore[return-value]
    path = Path(journal)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if resume else "w") as f:
        def record(j: int, row: dict) -> None:
            results[todo[j]] = row
            f.write(json.dumps({"key": keys[todo[j]], "row": row}, default=str) + "\n")
            f.flush()
        map_tasks([tasks[i] for i in todo], on_result=record, **kw)
    return results  # type: ignore[return-value]


def replay(w: Workload, soc: str, overrides: dict | None = None, **kw) -> list[dict]:
    """Every call of a workload on one SoC (with optional what-if overrides): one row per call
    (with estimated=True, the estimated calls' rows too: the whole step)."""
    return evaluate(w, [Point(soc, dict(overrides or {}), {})], desc=f"replay on {soc}", **kw)


def grid_points(socs: Sequence[str], grid: dict[str, list], fixed: dict | None = None,
                max_points: int = MAX_SWEEP_POINTS) -> list[Point]:
    """The cartesian product of SoCs and parameter values (parameters vary fastest, in order).
    A grid of more than max_points points is refused before it is made."""
    size = len(socs)
    for k in grid:
        size *= len(grid[k])
    if size > max_points:
        dims = " x ".join([f"{len(socs)} SoC(s)"] + [f"{len(v)} {k}" for k, v in grid.items()])
        raise StudyError(f"the sweep has {size:,} points ({dims}); the budget is {max_points:,} "
                         f"(give --max-points {size} to run it anyway, or fewer values)")
    names = list(grid)
    pts = []
    for soc in socs:
        for values in itertools.product(*(grid[k] for k in names)) if names else [()]:
            params = dict(zip(names, values))
            pts.append(Point(soc, {**(fixed or {}), **params}, params))
    return pts


def sweep(w: Workload, socs: Sequence[str], grid: dict[str, list], fixed: dict | None = None, **kw) -> list[dict]:
    """A what-if sweep: one row per point per call (tidy)."""
    kw.setdefault("desc", "sweep")
    return evaluate(w, grid_points(socs, grid, fixed), **kw)


def total_cycles(rows: Iterable[dict]) -> float:
    """The simulated calls' count-weighted cycles (estimated rows are not counted)."""
    return sum(r["cycles"] * r.get("count", 1) for r in rows if r.get("status") == "ok")


def point_totals(rows: Sequence[dict]) -> list[dict]:
    """Per point: the count-weighted cycles and time of the simulated calls that ran (`cycles`,
    `time_us`) and how far they may be from the exact engine's (`error_bound_cycles`: the calls'
    fast-mode bounds, summed), of the estimated calls (`estimated_cycles`, `estimated_us`), the
    step's time (`step_us`, their sum) and the share of it that is simulated (`simulated_share`)."""
    out: dict[int, dict] = {}
    for r in rows:
        t = out.setdefault(r["point"], {"point": r["point"], "soc": r["soc"], "cycles": 0.0, "time_us": 0.0,
                                        "error_bound_cycles": 0.0, "ok": 0, "skipped": 0, "failed": 0,
                                        "estimated_cycles": 0.0, "estimated_us": 0.0, "estimated": 0})
        if r["status"] == "ok":
            t["cycles"] += r["cycles"] * r["count"]
            t["error_bound_cycles"] += (r.get("error_bound_cycles") or 0.0) * r["count"]
            t["time_us"] += r["time_us"] * r["count"]
            t["ok"] += 1
        elif r["status"] == "estimated":
            t["estimated_cycles"] += r["cycles"] * r["count"]
            t["estimated_us"] += r["time_us"] * r["count"]
            t["estimated"] += 1
        elif r["status"] == "not available":
            t["skipped"] += 1
        else:
            t["failed"] += 1
    for t in out.values():
        t["step_us"] = t["time_us"] + t["estimated_us"]
        t["simulated_share"] = t["time_us"] / t["step_us"] if t["step_us"] else 0.0
    return [out[k] for k in sorted(out)]


def read_rows(path: str | Path) -> list[dict]:
    """Rows written by write_rows, back with numbers as numbers (CSV cells are text)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        out = []
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                row: dict[str, Any] = {}
                for k, v in r.items():
                    try:
                        row[k] = int(v)
                    except ValueError:
                        try:
                            row[k] = float(v)
                        except ValueError:
                            row[k] = v
                out.append(row)
        return out
    if path.suffix.lower() == ".jsonl":
        return [parse_json(l, str(path), StudyError) for l in read_text(path, error=StudyError).splitlines()
                if l.strip()]
    return parse_json(read_text(path, error=StudyError), str(path), StudyError)


def write_rows(rows: Sequence[dict], path: str | Path) -> Path:
    """Tidy rows to CSV (.csv), JSON (.json) or JSON lines (.jsonl)."""
    path = check_output(path, "--output", ROW_SUFFIXES)
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    head = [c for c in ROW_HEAD if c in cols]
    params = [c for c in cols if c not in ROW_HEAD and c != "status_code"]
    order = head[:2] + params + head[2:] + (["status_code"] if "status_code" in cols else [])
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with atomic_path(path, "--output") as tmp, tmp.open("w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=order, extrasaction="ignore")
            wr.writeheader()
            for r in rows:
                wr.writerow({k: r.get(k, "") for k in order})
    elif suffix == ".jsonl":
        write_text(path, "".join(json.dumps({k: r.get(k) for k in order if k in r}) + "\n" for r in rows), "--output")
    else:
        write_text(path, json.dumps([{k: r.get(k) for k in order if k in r} for r in rows], indent=1) + "\n",
                   "--output")
    return path
