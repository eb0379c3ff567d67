"""What every subcommand shares: exit codes, one-line errors, the chip / what-if / execution
options and their parsing, and the tables the commands print.
"""
from __future__ import annotations

import argparse
import errno
import math
import sys
import traceback
from pathlib import Path
from typing import Any

from .. import acl
from ..outputs import check_output
from ..profile import DEFAULT_SOC, ProfileError, load_profile
from .. import studies
from ..enums import exception_line
from ..studies import one_line


EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_REGRESSION = 0, 1, 2, 3

# the simulation modes every command's --mode offers (functional computes the data, timing only the
# cycles, fast fast-forwards declared loops: the runtime's list)
MODES = acl.MODES


class CliError(Exception):
    """A bad argument: printed as one line, exit code 2."""


class Rejected(Exception):
    """A call the simulator ran and refused (exit code 1), already explained."""


def os_error(e: OSError) -> str:
    """An OSError as one line naming the path the system refused and why (its errno's name too,
    which is what a user searches for)."""
    code = f" [{errno.errorcode[e.errno]}]" if e.errno in errno.errorcode else ""
    what = e.strerror or one_line(str(e)) or type(e).__name__
    paths = [p for p in (e.filename, e.filename2) if p is not None]
    where = " -> ".join(f"'{p}'" for p in paths)
    return f"{where}: {what}{code}" if where else f"{what}{code}"


def user_error(e: BaseException, path: Path) -> str:
    """'ValueError: msg (at file.py:12)' for an exception out of a user's file, pointing at the
    deepest frame in that file."""
    where = ""
    for fr in traceback.extract_tb(e.__traceback__):
        if Path(fr.filename).resolve() == path.resolve():
            where = f" (at {path.name}:{fr.lineno})"
    return f"{exception_line(e)}{where}"


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so every error is one line."""

    def error(self, message: str):
        raise CliError(f"{message} (see '{self.prog} --help')")


def int_in(lo: int, hi: int):
    """An argparse type: an integer in [lo, hi] (a bad one is exit 2 naming the option and value)."""
    def parse(text: str) -> int:
        try:
            v = int(text, 0)
        except (TypeError, ValueError):
            v = None
        if v is None or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer in [{lo:,}, {hi:,}]")
        return v
    return parse


def float_in(lo: float, hi: float):
    """An argparse type: a finite number in [lo, hi]."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except (TypeError, ValueError):
            v = None
        if v is None or not math.isfinite(v) or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number in [{lo:g}, {hi:g}]")
        return v
    return parse


SEED = int_in(0, 2 ** 63 - 1)


def a_path(text: str) -> str:
    """An argparse type: a file or folder path, never empty (an empty one would mean the current
    folder, or the default, without saying so)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; give a file or folder name")
    return text


def check_soc(soc: str) -> str:
    try:
        load_profile(soc)
    except ProfileError as e:
        raise CliError(one_line(str(e))) from None
    return soc


def profile_args(p: argparse.ArgumentParser, many_socs: bool = False) -> None:
    if many_socs:
        p.add_argument("--soc", action="append", metavar="SOC",
                       help=f"chip profile, repeatable (default {DEFAULT_SOC}); a .yaml path also works")
    else:
        p.add_argument("--soc", default=DEFAULT_SOC, help=f"chip profile (default {DEFAULT_SOC}); a .yaml path also works")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a profile field by dotted path, repeatable: "
                        "--set device_memory.bandwidth_GBps=3200 --set cores.aiv.count=24; "
                        "relative values x2, /2 scale the chip's own value")


def what_if_overrides(args) -> dict[str, Any]:
    return studies.parse_assignments(args.set, "--set")


def chip_profile(args, soc: str | None = None):
    soc = check_soc(soc or args.soc)
    return studies.make_profile(soc, what_if_overrides(args))


def insight_args(p: argparse.ArgumentParser) -> None:
    """The views of one run beyond its report: the trace's layout, msprof's files, hot lines."""
    p.add_argument("--trace-layout", choices=["core", "pipe"], default="core",
                   help="core: a process per core (default); pipe: a process per pipe with flag arrows, "
                        "as msprof op simulator draws it")
    p.add_argument("--msprof-out", metavar="DIR", type=a_path,
                   help="also write msprof's files for the run there (OPPROF_*/ per launch, op_summary, "
                        "msKPP's Pipe_statistic.csv; docs/OUTPUTS.md)")
    p.add_argument("--lines", type=int_in(1, 1000), nargs="?", const=10, default=0, metavar="N",
                   help="also print the N (default 10) kernel source lines that cost the most cycles")


def exec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int_in(1, 1024), default=None, metavar="N",
                   help="local worker processes (default: one per CPU; 1 runs in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask distributed cluster (tcp://host:8786), or 'local:N' to start a "
                        "LocalCluster of N workers (needs the [dask] extra)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show a progress bar (default: when stderr is a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false")


def exec_kw(args) -> dict[str, Any]:
    if args.workers is not None and args.workers < 1:
        raise CliError(f"--workers must be >= 1, got {args.workers}")
    studies.check_scheduler(args.scheduler)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    return {"workers": args.workers, "scheduler": args.scheduler, "progress": progress}


def trace_path(args, default_stem: str) -> Path | None:
    """Where --trace goes (None with --no-trace), checked before any work starts."""
    if args.no_trace:
        return None
    path = Path(args.trace) if args.trace else Path("out") / f"{default_stem}.trace.json"
    return check_output(path, "--trace", (".json",))


def save_trace(trace, path: Path | None, announce: bool = True, layout: str = "core") -> None:
    """Write the trace after the result is printed, so an output error never loses the result."""
    sys.stdout.flush()
    if path is not None:
        trace.save(path, layout)
        if announce:
            print(f"trace: {path} (open in https://ui.perfetto.dev or chrome://tracing)")


def budget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget-seconds", type=float_in(0, 1e9), default=DEFAULT_BUDGET_SECONDS, metavar="S",
                   help=f"refuse work estimated to take longer (default {DEFAULT_BUDGET_SECONDS:g} s); "
                        f"the estimate comes from the plan before anything runs")
    p.add_argument("--budget-memory", type=float_in(0, 1e6), default=DEFAULT_BUDGET_GIB, metavar="GIB",
                   help=f"refuse a functional run estimated to hold more host memory (default "
                        f"{DEFAULT_BUDGET_GIB:g} GiB)")


DEFAULT_BUDGET_SECONDS = 600.0
DEFAULT_BUDGET_GIB = 8.0


def check_budget(estimates: list, mode: str, args, repeat: int = 1, fallback_bytes: int = 0) -> None:
    """Refuse up front (exit 2) work whose estimate passes the budget, saying the estimate and
    how to go ahead. `estimates` are simulator.Estimate (None for calls that will not run);
    `repeat` scales them (a sweep's points)."""
    known = [e for e in estimates if e is not None]
    if mode == "functional" and len(known) < len(estimates) and fallback_bytes:
        memory_fallback = 3 * fallback_bytes       # calls that will not plan still get their data made
    else:
        memory_fallback = 0
    seconds = repeat * sum(e.seconds(mode) for e in known)
    memory = max([e.host_bytes(mode) for e in known] + [memory_fallback])
    instr = repeat * sum(e.instructions for e in known)
    if seconds > args.budget_seconds:
        raise CliError(f"estimated {instr:,} instructions, about {_duration(seconds)} of simulation on "
                       f"a 2-core machine; the budget is {args.budget_seconds:g} s: give --budget-seconds "
                       f"{math.ceil(seconds * 2)} to run it anyway"
                       + (", or fewer calls/points" if repeat > 1 or len(known) > 1 else ""))
    if memory > args.budget_memory * 2 ** 30:
        held = f"{memory / 2 ** 30:.1f} GiB" if memory >= 2 ** 30 else f"{memory / 2 ** 20:.1f} MiB"
        raise CliError(f"a functional run of this call holds about {held} of host memory; "
                       f"the budget is {args.budget_memory:g} GiB: give --budget-memory "
                       f"{math.ceil(memory / 2 ** 30) + 1} to run it anyway, or --mode timing (no data, same cycles)")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def load_workload(path: str) -> studies.Workload:
    return studies.load_trace(path)


def fmt_cycles(c) -> str:
    return "-" if c is None else f"{c:,.0f}"


def text_table(rows: list[list[str]], head: list[str], right: set[int] = frozenset()) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)] if rows else [len(h) for h in head]
    def fmt(r):
        return "  ".join(str(x).rjust(w) if i in right else str(x).ljust(w)
                         for i, (x, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join([fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows])


def error_bound(row: dict) -> str:
    """A row's fast-mode bound as '±x.xx%' ('exact' where nothing was fast-forwarded)."""
    b = row.get("error_bound_fraction") or 0.0
    return f"±{b:.2%}" if b or (row.get("simulated_fraction") or 1.0) < 1.0 else "exact"


def rows_table(rows: list[dict]) -> str:
    fast = any(r.get("simulated_fraction") is not None and r["simulated_fraction"] < 1.0 for r in rows)
    out = []
    for r in rows:
        status = "" if r["status"] == "ok" else r["status"]
        shapes = r["shapes"].split()
        dims = {x.split("=", 1)[-1] for x in shapes}
        shown = dims.pop() if len(dims) == 1 else r["shapes"]
        out.append([r["call"], (r["label"] or "")[:40], r["op"], shown[:60], r["count"],
                    fmt_cycles(r.get("cycles")),
                    f"{r['time_us']:,.2f}" if r.get("time_us") is not None else "-",
                    r.get("bound", "") or ""] + ([error_bound(r) if r["status"] == "ok" else ""] if fast else [])
                   + [status])
    head = ["#", "label", "op", "shapes", "n", "cycles", "us", "bound"] + (["vs exact"] if fast else []) + ["status"]
    return text_table(out, head, right={0, 4, 5, 6})


def summary_line(rows: list[dict], soc: str) -> str:
    tot = studies.point_totals(rows)[0]
    us = tot["time_us"]
    within = (f" (fast mode: within ±{tot['error_bound_cycles']:,.0f} cycles of the exact engine)"
              if tot["error_bound_cycles"] else "")
    return (f"total: {tot['cycles']:,.0f} cycles = {us:,.1f} us on {soc}{within} over {tot['ok']} calls"
            + (f"; {tot['skipped']} not available" if tot["skipped"] else "")
            + (f"; {tot['failed']} FAILED" if tot["failed"] else "") + " (count-weighted, calls run one after another)")


def exit_for_failures(rows: list[dict], note: bool = False) -> int:
    """Exit 1 if a call failed at any point (it is left out of the totals); with `note`, say which
    (replay's table shows them row by row)."""
    failed = [r for r in rows if r["status"] not in ("ok", "not available", "estimated")]
    if failed and note:
        first: dict[int, dict] = {}
        for r in failed:
            first.setdefault(r["call"], r)
        print(f"{len(failed)} FAILED (call x point), left out of the totals: "
              + "; ".join(f"call {c} ({r['op']}): {r['status']}" for c, r in list(first.items())[:5])
              + (f"; and {len(first) - 5} more calls" if len(first) > 5 else ""))
    return EXIT_REJECTED if failed else EXIT_OK
