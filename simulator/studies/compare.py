"""Measured against simulated: read what msprof wrote for a real run and set it beside our report
of the same call on the same chip, per pipe and in total, with the ratio simulated / measured.

Files read (docs/OUTPUTS.md "Reading msprof's files" cites the pages):
- the system profiler's `op_summary_*.csv` (one row per kernel task): `Op Name`, `OP Type`,
  `Block Dim` (older CANN) or `Block Num` (newer), `Task Duration(us)`, and per-pipe times in us:
  un-prefixed on the coupled chips (`aicore_time(us)`, `total_cycles`, `vec_time(us)`,
  `mac_time(us)`, `scalar_time(us)`, `mte1_time(us)`, `mte2_time(us)`, `mte3_time(us)`), prefixed
  `aic_` / `aiv_` on Atlas A2 (`aic_mac_time(us)`, `aiv_vec_time(us)`, `aiv_mte2_time(us)`, ...);
- `msprof op`'s `PipeUtilization.csv` (one row per block: `block_id`, `sub_block_id`, the same
  per-pipe columns): averaged over its rows.

A column msprof leaves empty or writes as N/A is skipped. msprof's pipe times are per core
(cycles over the clock, averaged over the blocks' cores); ours are the mean busy cycles of the
pipe over the cores of that kind the call used.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..inputs import parse_json, read_text, schema_error
from .trace import StudyError

# our pipe -> msprof's column stem
PIPE_COLUMNS = {"PIPE_S": "scalar", "PIPE_V": "vec", "PIPE_M": "mac", "PIPE_MTE1": "mte1",
                "PIPE_MTE2": "mte2", "PIPE_MTE3": "mte3", "PIPE_FIX": "fixpipe"}
# stems msprof also writes for the cube pipe
CUBE_ALIASES = ("mac", "cube")
BLOCK_COLUMNS = ("Block Num", "Block Dim")
MIX_BLOCK_COLUMNS = ("Mix Block Num", "Mix Block Dim")


@dataclass
class Measured:
    """One kernel task as msprof measured it: per side ("" coupled, "aic", "aiv") the kernel time
    and the per-pipe times, in us."""
    name: str
    op_type: str
    block_dim: int
    mix_block_dim: int | None = None
    task_us: float | None = None
    times: dict[str, dict[str, float]] = field(default_factory=dict)   # side -> {"total" | pipe: us}
    cycles: dict[str, float] = field(default_factory=dict)             # side -> total_cycles


def _number(raw, column: str = "") -> float | None:
    """A measured figure: None where msprof leaves the cell empty (or N/A); a cell that holds
    anything but a finite number >= 0 is no figure msprof writes (StudyError naming the column)."""
    if raw is None:
        return None
    raw = str(raw).strip()
    if not raw or raw.upper() in ("N/A", "NA", "-"):
        return None
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v < 0:
        raise StudyError(f"column {column!r}: {raw!r} is not a time, a count or a ratio msprof writes "
                         f"(a number >= 0)")
    return v


def _first(row: dict, names) -> float | None:
    for n in names:
        v = _number(row.get(n), n)
        if v is not None:
            return v
    return None


def _side_times(row: dict) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    times: dict[str, dict[str, float]] = {}
    cycles: dict[str, float] = {}
    split = any(k.startswith(("aic_", "aiv_")) for k in row)     # Atlas A2: AIC and AIV columns
    for side in (("aic", "aiv") if split else ("",)):
        pre = f"{side}_" if side else ""
        got: dict[str, float] = {}
        # A2's op_summary names the AIC's time aicore_time(us); msprof op's files aic_time(us)
        total = _first(row, {"": ["aicore_time(us)"], "aic": ["aic_time(us)", "aicore_time(us)"],
                             "aiv": ["aiv_time(us)"]}[side])
        if total is not None:
            got["total"] = total
        for pipe, stem in PIPE_COLUMNS.items():
            stems = CUBE_ALIASES if stem == "mac" else (stem,)
            v = _first(row, [f"{pre}{s}_time(us)" for s in stems])
            if v is not None:
                got[pipe] = v
        if got:
            times[side] = got
        c = _first(row, [f"{pre}total_cycles"])
        if c is not None:
            cycles[side] = c
    return times, cycles


def _rows(path: Path) -> list[dict]:
    text = read_text(path, error=StudyError)
    try:
        rows = [{(k or "").strip(): v for k, v in r.items()} for r in csv.DictReader(io.StringIO(text, newline=""))]
    except csv.Error as e:
        raise StudyError(f"{path}: not a readable CSV file ({e})") from None
    if not rows:
        raise StudyError(f"{path}: no rows")
    return rows


def is_pipe_utilization(path: str | Path) -> bool:
    """Whether the CSV is msprof op's PipeUtilization.csv (per block) rather than an op_summary: a
    block_id column (A2 / A3), or per-pipe times with no task columns (the coupled chips' layout,
    one row a block with no id)."""
    text = read_text(path, error=StudyError)
    head = (text.splitlines() or [""])[0]
    return "block_id" in head or (head.startswith("aic_time(us)") and "Task Duration" not in head)


Figure = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Side(BaseModel):
    model_config = ConfigDict(extra="allow")
    cycles: Figure
    busy: dict[str, Figure]


class _Launch(BaseModel):
    model_config = ConfigDict(extra="allow")
    core_cycles: Figure
    sides: dict[str, _Side] | None = None


class SimulatedReport(BaseModel):
    """The fields of a report (Report.to_dict(), `--json`) that compare reads."""
    model_config = ConfigDict(extra="allow")
    soc: str
    op: str
    mode: str = "timing"
    clock_mhz: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    cores: Any
    launches: list[_Launch]


def read_report(path: str | Path) -> dict:
    """A simulator report saved with --json, checked for what compare needs."""
    where = f"--report {path}"
    raw = parse_json(read_text(path, "--report", StudyError), where, StudyError)
    if not isinstance(raw, dict) or not {"cores", "launches", "clock_mhz", "soc", "op"} <= set(raw):
        raise StudyError(f"{where}: not a simulator report (no cores / launches / clock_mhz); save one with "
                         f"'ascend-sim kernel FILE --json > out/r.json' or 'ascend-sim run ... --json'")
    try:
        return SimulatedReport.model_validate(raw).model_dump()
    except ValidationError as e:
        raise StudyError(schema_error(e, where)) from None


def read_op_summary(path: str | Path) -> list[Measured]:
    """The kernel tasks of an msprof op_summary CSV (both `Block Dim` and `Block Num` spellings)."""
    path = Path(path)
    out = []
    for i, row in enumerate(_rows(path)):
        try:
            blocks = _first(row, BLOCK_COLUMNS)
            times, cycles = _side_times(row)
        except StudyError as e:
            raise StudyError(f"{path}: row {i + 2}: {e}") from None
        if blocks is None:
            raise StudyError(f"{path}: row {i + 2} has no block count (a 'Block Num' or 'Block Dim' "
                             f"column): is this msprof's op_summary file?")
        if blocks < 1 or blocks != int(blocks):
            raise StudyError(f"{path}: row {i + 2}: a block count of {blocks:g} (msprof writes a whole number >= 1)")
        if not times:
            raise StudyError(f"{path}: row {i + 2} has no per-pipe times (aicore_time(us), "
                             f"aiv_vec_time(us), ...): was msprof run with --aic-metrics=PipeUtilization?")
        mix = _first(row, MIX_BLOCK_COLUMNS)
        out.append(Measured(name=(row.get("Op Name") or "").strip(), op_type=(row.get("OP Type") or "").strip(),
                            block_dim=int(blocks), mix_block_dim=int(mix) if mix else None,
                            task_us=_first(row, ["Task Duration(us)"]), times=times, cycles=cycles))
    return out


def read_pipe_utilization(path: str | Path) -> Measured:
    """`msprof op`'s PipeUtilization.csv: one row per block, averaged into one Measured."""
    path = Path(path)
    rows = _rows(path)
    if "block_id" not in rows[0] and not any(k.startswith("aic_time") for k in rows[0]):
        raise StudyError(f"{path}: no block_id or aic_time(us) column: is this msprof op's PipeUtilization.csv?")
    sums: dict[str, dict[str, list[float]]] = {}
    for i, row in enumerate(rows):
        try:
            times, _ = _side_times(row)
        except StudyError as e:
            raise StudyError(f"{path}: row {i + 2}: {e}") from None
        for side, got in times.items():
            for k, v in got.items():
                sums.setdefault(side, {}).setdefault(k, []).append(v)
    if not sums:
        raise StudyError(f"{path}: no per-pipe time columns (aic_mte2_time(us), ...)")
    times = {side: {k: sum(v) / len(v) for k, v in got.items()} for side, got in sums.items()}
    if "block_id" in rows[0]:
        blocks = len({r["block_id"] for r in rows})
    else:                   # the coupled chips' layout: a row a block, an AI core's times under aic_
        blocks = len(rows)
        times = {"": times.get("aic", {})}
    if not times.get("", True):
        raise StudyError(f"{path}: no per-pipe time columns (aic_mte2_time(us), ...)")
    return Measured(name=path.stem, op_type="", block_dim=blocks, times=times)


def select(measured: list[Measured], name: str | None) -> Measured:
    """The row named `name` (Op Name or OP Type), or the only row."""
    if name is None:
        if len(measured) == 1:
            return measured[0]
        raise StudyError(f"the file has {len(measured)} kernel rows: pick one with --op-name "
                         f"(one of {', '.join(sorted({m.name or m.op_type for m in measured})[:10])})")
    hits = [m for m in measured if name in (m.name, m.op_type)]
    if not hits:
        raise StudyError(f"no row named {name!r} (Op Name or OP Type) in the file")
    return hits[0]


@dataclass
class CompareRow:
    side: str
    figure: str          # "kernel" or a pipe
    measured_us: float
    simulated_us: float | None

    @property
    def ratio(self) -> float | None:
        if self.simulated_us is None or not self.measured_us:
            return None
        return self.simulated_us / self.measured_us


def simulated_times(report: dict) -> dict[str, dict[str, float]]:
    """Our report (Report.to_dict()) in msprof's terms, per side ("" for a coupled AI core, "aic",
    "aiv"): the kernel's time on the cores (the launches' `core_cycles`), and each pipe's share of
    the blocks' cycles times that (msprof's ratio x aicore_time), in us. This is what our own
    op_summary file says (simulator/msprof.py), so a call compared with its own file reads 1.00."""
    mhz = report["clock_mhz"]
    out: dict[str, dict[str, float]] = {}
    for l in report["launches"]:
        for side, s in (l.get("sides") or {}).items():
            got = out.setdefault(side, {"total": 0.0})
            got["total"] += l["core_cycles"] / mhz
            for pipe, busy in s["busy"].items():
                share = busy / s["cycles"] if s["cycles"] else 0.0
                got[pipe] = got.get(pipe, 0.0) + share * l["core_cycles"] / mhz
    return out


def compare(measured: Measured, report: dict) -> list[CompareRow]:
    """Rows: for each side msprof measured, the kernel time and every pipe it reports."""
    sim = simulated_times(report)
    if not any(side in sim for side in measured.times):
        raise StudyError(f"the measurement describes {', '.join(s or 'AI core' for s in measured.times)} "
                         f"cores and the simulated call ran on {', '.join(sim) or 'none'}: "
                         f"compare the same call on the same chip ({report['soc']})")
    rows = []
    for side, got in measured.times.items():
        mine = sim.get(side, {})
        for key in ["total"] + [p for p in PIPE_COLUMNS if p in got]:
            if key in got:
                rows.append(CompareRow(side, "kernel" if key == "total" else key, got[key],
                                       mine.get(key, 0.0 if key != "total" else None)))
    return rows


def format_rows(rows: list[CompareRow], measured: Measured, report: dict) -> str:
    lines = [f"{measured.name or measured.op_type or 'measured'} ({measured.block_dim} blocks) "
             f"against {report['op']} on {report['soc']} ({report['mode']} mode)",
             f"  {'side':<8} {'figure':<10} {'measured us':>12} {'simulated us':>13} {'ratio':>7}"]
    for r in rows:
        sim = "-" if r.simulated_us is None else f"{r.simulated_us:,.3f}"
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}"
        lines.append(f"  {r.side or 'aicore':<8} {r.figure:<10} {r.measured_us:>12,.3f} {sim:>13} {ratio:>7}")
    return "\n".join(lines)
