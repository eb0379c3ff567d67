"""`replay`, `regress`, `sweep` and `tune`: argument handling and printing around
simulator.studies, which does the work.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..outputs import check_output
from ..profile import DEFAULT_SOC
from .. import studies
from .call_commands import call_from_args
from .common import (check_budget, CliError, EXIT_OK, EXIT_REGRESSION, EXIT_REJECTED, Rejected, check_soc, exec_kw,
                     fmt_cycles,
                     load_workload, what_if_overrides, rows_table, summary_line, text_table)


def _journal(output: str | None, resume: bool) -> Path | None:
    """Where a study journals its rows as they finish (beside its output), checked up front."""
    if output is None:
        if resume:
            raise CliError("--resume needs -o/--output: the rows are journaled beside it")
        return None
    check_output(output, "--output", studies.ROW_SUFFIXES)
    journal = Path(f"{output}.partial.jsonl")
    if resume and not journal.exists():
        raise CliError(f"--resume: no journal '{journal}' to resume from (run without --resume)")
    return check_output(journal, "--output journal")


def _check_study_budget(w, calls, profile, args, repeat: int) -> None:
    """The budget, from the estimates of the distinct calls on the study's first profile (a
    what-if point's sizes differ little; `repeat` scales to every point)."""
    distinct = {w.calls[i].key(): w.calls[i] for i in calls}
    check_budget([studies.estimate_call(c, profile) for c in distinct.values()], args.mode, args, repeat,
                 fallback_bytes=max((c.nbytes() for c in distinct.values()), default=0))


def _finish_rows(rows, output: str, journal: Path | None) -> None:
    studies.write_rows(rows, output)
    if journal is not None and journal.exists():
        journal.unlink()            # the whole result is in the output now


def cmd_replay(args) -> int:
    w = load_workload(args.trace)
    soc = check_soc(args.soc)
    calls = w.select(args.calls)
    overrides = what_if_overrides(args)
    studies.make_profile(soc, overrides)           # a bad --set fails here, before any work
    journal = _journal(args.output, args.resume)
    _check_study_budget(w, calls, studies.make_profile(soc, overrides), args, repeat=1)
    rows = studies.replay(w, soc, overrides, calls=calls, mode=args.mode, seed=args.seed,
                          journal=journal, resume=args.resume, **exec_kw(args))
    if args.output:
        _finish_rows(rows, args.output, journal)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{w.name}: {len(calls)} calls on {soc}" + (f" with {', '.join(args.set)}" if args.set else ""))
        print(rows_table(rows))
        print(summary_line(rows, soc))
        for r in rows:
            if r["status"] == "not available":
                print(f"call {r['call']}: {r['op']} not available in this simulator: skipped")
            elif r["status"] != "ok":
                print(f"call {r['call']}: {r['status']}: {r.get('message', '')}")
        if args.output:
            print(f"rows: {args.output}")
    if args.msprof_out:
        # the files need each call's whole record: the calls run once more, here, one by one
        for i in calls:
            studies.run_call(w.calls[i], soc, overrides, mode=args.mode, seed=args.seed, trace=True,
                             msprof_out=str(Path(args.msprof_out) / f"call{i:03d}"))
        if not args.json:
            print(f"msprof files: {args.msprof_out}/call<N>/ (docs/OUTPUTS.md)")
    failed = [r for r in rows if r["status"] not in ("ok", "not available")]
    return EXIT_REJECTED if failed else EXIT_OK


def _regress_status(d, rows) -> str:
    if d.status == "expected":
        r = next(r for r in rows if r["call"] == d.call)
        return f"ok ({r['status']}, as recorded)"
    return {"ok": "ok", "DRIFT": "DRIFT", "ERROR": "ERROR", "skipped": "not available: skipped",
            "new": "new (no baseline)"}[d.status]


def cmd_regress(args) -> int:
    w = load_workload(args.trace)
    soc = check_soc(args.soc)
    calls = w.select(args.calls)
    if args.update:
        check_output(w.path, "--update (the trace file)")
    res = studies.regress(w, soc, args.tolerance, args.update, calls=calls, **exec_kw(args))
    if args.json:
        print(json.dumps({"soc": soc, "tolerance": args.tolerance, "passed": res.passed, "updated": res.updated,
                          "total_baseline": res.total_baseline, "total_current": res.total_current,
                          "total_drift": res.total_drift,
                          "calls": [d.__dict__ for d in res.drifts]}, indent=1))
    else:
        rows = [[d.call, (d.label or "")[:40], d.op, fmt_cycles(d.baseline), fmt_cycles(d.current),
                 "-" if d.drift is None else f"{(0.0 if abs(d.drift) < 5e-5 else d.drift):+.2%}",
                 _regress_status(d, res.rows)] for d in res.drifts]
        print(f"{w.name} on {soc}, tolerance ±{args.tolerance:.1%}")
        print(text_table(rows, ["#", "label", "op", "baseline", "current", "drift", "status"], right={0, 3, 4, 5}))
        if res.total_baseline:
            td = 0.0 if abs(res.total_drift) < 5e-5 else res.total_drift
            print(f"total: baseline {res.total_baseline:,.0f}  current {res.total_current:,.0f}  drift {td:+.2%}")
        for d in res.drifts:
            if d.status == "ERROR":
                r = next(r for r in res.rows if r["call"] == d.call)
                print(f"call {d.call}: {r['status']}: {r.get('message', '')}")
        if res.updated:
            print(f"regress: baselines for {soc} written to {w.path}")
        elif res.passed:
            n = sum(d.status in ("ok", "expected") for d in res.drifts)
            td = 0.0 if abs(res.total_drift) < 5e-5 else res.total_drift
            print(f"regress: PASS ({n} calls within ±{args.tolerance:.1%}, total drift {td:+.2%})")
        else:
            nd = sum(d.status == "DRIFT" for d in res.drifts)
            ne = sum(d.status == "ERROR" for d in res.drifts)
            why = []
            if nd:
                why.append(f"{nd} call(s) drift beyond ±{args.tolerance:.1%}")
            if ne:
                why.append(f"{ne} call(s) no longer run")
            if abs(res.total_drift) > args.tolerance:
                why.append(f"total drift {res.total_drift:+.2%}")
            print(f"regress: FAIL ({'; '.join(why)}). If the change is intended, record new baselines: "
                  f"ascend-sim regress {args.trace} --soc {soc} --update")
    return EXIT_OK if res.passed else EXIT_REGRESSION


def cmd_sweep(args) -> int:
    spec: dict[str, Any] = {}
    src = Path(args.workload)
    fmt, raw = studies.read_structured(src)
    if isinstance(raw, dict) and "workload" in raw:          # a sweep file
        bad = set(raw) - {"workload", "socs", "set", "parameters", "calls", "output", "plot"}
        if bad:
            raise CliError(f"{src}: unknown sweep field(s) {', '.join(sorted(bad))} "
                           f"(workload, socs, set, parameters, calls, output, plot)")
        spec = raw
        wpath = Path(raw["workload"])
        if not wpath.is_absolute() and not wpath.exists():
            wpath = src.parent / wpath
        w = load_workload(str(wpath))
    else:
        w = load_workload(args.workload)
    socs = args.soc or spec.get("socs") or [DEFAULT_SOC]
    if isinstance(socs, str):
        socs = [socs]
    for s in socs:
        check_soc(s)
    fixed = dict(spec.get("set") or {})
    fixed.update(what_if_overrides(args))
    grid: dict[str, list] = {}
    for k, v in (spec.get("parameters") or {}).items():
        grid[k] = v if isinstance(v, list) else [v]
    for item in args.param:
        k, vals = studies.parse_sweep_values(item, args.max_points)
        grid[k] = vals
    if not grid and len(socs) < 2:
        raise CliError("nothing to sweep: give --param FIELD=V1,V2,... (or several --soc, or a sweep file)")
    output = str(args.output or spec.get("output") or f"out/sweep_{w.name}.csv")
    plot = args.plot or spec.get("plot")
    if plot:
        studies.check_plot(plot)
    journal = _journal(output, args.resume)
    calls = w.select(args.calls if args.calls is not None else spec.get("calls"))
    points = studies.grid_points(socs, grid, fixed, max_points=args.max_points)
    for pt in points:                          # a bad field or value fails here, before any work
        studies.make_profile(pt.soc, pt.overrides)
    _check_study_budget(w, calls, studies.make_profile(points[0].soc, points[0].overrides), args,
                        repeat=len(points))
    print(f"sweep: {w.name}, {len(calls)} calls x {len(points)} points"
          + (f" on Dask {args.scheduler}" if args.scheduler else ""), file=sys.stderr)
    rows = studies.evaluate(w, points, calls=calls, mode=args.mode, seed=args.seed, desc="sweep",
                            journal=journal, resume=args.resume, **exec_kw(args))
    _finish_rows(rows, output, journal)
    params = list(grid)
    totals = studies.point_totals(rows)
    base = totals[0]["cycles"] or 1.0
    table = []
    for t in totals:
        r0 = next(r for r in rows if r["point"] == t["point"])
        table.append([t["point"], r0["soc"]] + [str(r0[k]) for k in params]
                     + [f"{t['cycles']:,.0f}", f"{t['time_us']:,.1f}", f"{base / t['cycles']:.2f}x" if t["cycles"] else "-"]
                     + ([f"{t['skipped']} skipped"] if t["skipped"] else []) + ([f"{t['failed']} failed"] if t["failed"] else []))
    print(text_table(table, ["point", "soc"] + params + ["cycles", "us", "speed-up"], right={0}))
    print(f"rows: {output} ({len(rows)} rows: one per point per call)")
    if plot:
        studies.plot_sweep(rows, params, plot, title=f"{w.name}: sweep")
        print(f"plot: {plot}")
    return EXIT_OK


def cmd_tune(args) -> int:
    call = call_from_args(args)
    soc = check_soc(args.soc)
    space = None
    if args.space:
        space = {}
        for item in args.space:
            k, vals = studies.parse_sweep_values(item, args.max_points, "--space")
            space[k] = vals
    if studies.opdef_for(call.op) is None:
        raise CliError(f"unknown operator '{call.op}'")
    res = studies.tune(call, soc, what_if_overrides(args), space=space, top=args.top, mode="timing",
                       max_points=args.max_points, **exec_kw(args))
    d = res.default
    if args.json:
        print(json.dumps({"call": call.to_record(), "soc": soc, "default": d, "best": res.ranked,
                          "invalid": len(res.invalid), "candidates": res.space_size}, indent=1, default=str))
        return EXIT_OK
    dt = json.loads(d["tiling"])
    fields = sorted({k for r in res.ranked for k in r["candidate"]})
    print(f"tune {call.op} {call.shapes()} on {soc}: {res.space_size} candidates, "
          f"{len(res.invalid)} rejected by the planner (561002) and skipped")
    rows = [["default"] + [str(dt.get(k, "")) for k in fields]
            + [fmt_cycles(d["cycles"]), f"{d['time_us']:,.2f}", "1.00x", d["bound"], "(planner)"]]
    for i, r in enumerate(res.ranked, 1):
        rows.append([f"#{i}"] + [str(r["candidate"].get(k, "")) for k in fields]
                    + [fmt_cycles(r["cycles"]), f"{r['time_us']:,.2f}", f"{d['cycles'] / r['cycles']:.2f}x", r["bound"],
                       "= default" if r.get("is_default") else ""])
    print(text_table(rows, ["", *fields, "cycles", "us", "vs default", "bound", ""], right=set(range(1, len(fields) + 4))))
    best = res.best
    if best and best["cycles"] < d["cycles"]:
        args_txt = " ".join(f"--tiling {k}={v}" for k, v in best["candidate"].items())
        gain = 1 - best["cycles"] / d["cycles"]
        print(f"best: {gain:.1%} fewer cycles than the default plan; run it with: "
              f"ascend-sim run {call.op} ... {args_txt}")
    else:
        print("best: the default plan is already the fastest of the candidates")
    return EXIT_OK


def cmd_compare(args) -> int:
    from ..studies import compare as cmp
    path = Path(args.measured)
    try:
        report = json.loads(Path(args.report).read_text())
    except FileNotFoundError:
        raise CliError(f"--report {args.report}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CliError(f"--report {args.report}: not a JSON report ({studies.one_line(str(e))}); save one "
                       f"with 'ascend-sim kernel FILE --json > out/r.json' or 'ascend-sim run ... --json'") from None
    if not isinstance(report, dict) or not {"cores", "launches", "clock_mhz", "soc", "op"} <= set(report):
        raise CliError(f"--report {args.report}: not a simulator report (no cores / launches / clock_mhz)")
    try:
        with path.open("rb") as f:
            head = f.readline().decode("utf-8-sig", "replace")
    except OSError as e:
        raise CliError(f"{path}: cannot read it ({e.strerror or e})") from None
    if "block_id" in head:
        measured = cmp.read_pipe_utilization(path)
    else:
        measured = cmp.select(cmp.read_op_summary(path), args.op_name)
    rows = cmp.compare(measured, report)
    if args.json:
        print(json.dumps([{"side": r.side or "aicore", "figure": r.figure, "measured_us": r.measured_us,
                           "simulated_us": r.simulated_us, "ratio": r.ratio} for r in rows], indent=2))
    else:
        print(cmp.format_rows(rows, measured, report))
    return EXIT_OK


def cmd_capture(args) -> int:
    from ..studies import capture as cap_mod
    script = Path(args.script)
    out = Path(args.output or Path("out") / f"{script.stem}.yaml")
    check_output(out, "--output", (".yaml", ".yml", ".jsonl", ".json"))
    try:
        cap = cap_mod.run_script(script, list(args.args), args.name)
    except studies.StudyError:
        raise
    except SystemExit as e:
        if e.code not in (0, None):
            raise Rejected(f"{script}: the script exited with {e.code}") from None
        raise CliError(f"{script}: the script exited before the capture ended (sys.exit)") from None
    except Exception as e:
        raise Rejected(f"{script}: the script raised {type(e).__name__}: {studies.one_line(str(e))}") from None
    path = cap.save(out, args.name)
    print(cap.summary())
    print(f"trace: {path} ({sum(c.count for c in cap.calls)} calls, {len(cap.calls)} distinct)")
    return EXIT_OK
