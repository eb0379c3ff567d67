"""`replay`, `regress`, `sweep` and `tune`: argument handling and printing around
simulator.studies, which does the work.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..enums import raised_by_user
from ..outputs import check_output
from ..profile import DEFAULT_SOC
from .. import studies
from ..studies.whatif import MAX_SWEEP_POINTS
from .call_commands import call_args, call_from_args
from .common import (MODES, SEED, CliError, EXIT_OK, EXIT_REGRESSION, Rejected, a_path, budget_args,
                     check_budget, check_soc, error_bound, exec_args, exec_kw, exit_for_failures, float_in, fmt_cycles,
                     int_in, load_workload, profile_args, rows_table, summary_line, text_table, user_error,
                     what_if_overrides)


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
    check_budget([studies.estimate_call(c, profile, mode=args.mode) for c in distinct.values()], args.mode, args, repeat,
                 fallback_bytes=max((c.nbytes() for c in distinct.values()), default=0))


def _finish_rows(rows, output: str, journal: Path | None) -> None:
    studies.write_rows(rows, output)
    if journal is not None and journal.exists():
        journal.unlink()            # the whole result is in the output now


def cmd_replay(args) -> int:
    w = load_workload(args.trace)
    socs = list(dict.fromkeys(check_soc(s) for s in (args.soc or [DEFAULT_SOC])))
    calls = w.select(args.calls)
    overrides = what_if_overrides(args)
    for soc in socs:
        studies.make_profile(soc, overrides)       # a bad --set fails here, before any work
    if args.msprof_out and len(socs) > 1:
        raise CliError("--msprof-out takes one --soc (the files are one chip's)")
    journal = _journal(args.output, args.resume)
    _check_study_budget(w, calls, studies.make_profile(socs[0], overrides), args, repeat=len(socs))
    # the estimated part belongs to the whole step: a --calls subset is not one
    batch = args.batch or w.step.get("batch")        # samples per step, for samples a second
    with_estimate = bool(w.estimated or w.step or args.batch) and args.calls is None and not args.simulated_only
    points = [studies.Point(soc, dict(overrides), {}) for soc in socs]
    rows = studies.evaluate(w, points, calls=calls, mode=args.mode, seed=args.seed, journal=journal,
                            resume=args.resume, estimated=with_estimate, desc=f"replay on {', '.join(socs)}",
                            **exec_kw(args))
    if args.output:
        _finish_rows(rows, args.output, journal)
    totals = studies.point_totals(rows)              # one point per --soc, in order
    if args.json:
        print(json.dumps({"steps": [_step_record(t, w, with_estimate, batch) for t in totals], "rows": rows},
                         indent=1))
    else:
        for k, soc in enumerate(socs):
            if k:
                print()
            _print_replay(w, soc, calls, [r for r in rows if r["point"] == k], totals[k], args, with_estimate, batch)
        if len(socs) > 1:
            print()
            print(step_comparison(rows, socs, totals))
        if args.output:
            print(f"rows: {args.output}")
    if args.msprof_out:
        # the files need each call's whole record: the calls run once more, here, one by one
        for i in calls:
            studies.run_call(w.calls[i], socs[0], overrides, mode=args.mode, seed=args.seed, trace=True,
                             msprof_out=str(Path(args.msprof_out) / f"call{i:03d}"))
        if not args.json:
            print(f"msprof files: {args.msprof_out}/call<N>/ (docs/OUTPUTS.md)")
    return exit_for_failures(rows)


def _step_record(t: dict, w, with_estimate: bool, batch: int | None) -> dict:
    """One chip's step for --json: the simulated part, the estimated part, their sum and share."""
    return {"soc": t["soc"], "simulated_us": t["time_us"], "simulated_cycles": t["cycles"],
            "estimated_us": t["estimated_us"] if with_estimate else None,
            "step_us": t["step_us"] if with_estimate else None,
            "simulated_share": t["simulated_share"] if with_estimate else None,
            "simulated_calls": t["ok"], "estimated_calls": t["estimated"], "not_available": t["skipped"],
            "failed": t["failed"], "estimate_left_out": bool(w.estimated) and not with_estimate,
            "kind": w.step.get("kind"), "batch": batch,
            "samples_per_s": per_second(t, batch) if with_estimate else None}


def _print_replay(w, soc: str, calls, rows: list[dict], total: dict, args, with_estimate: bool,
                  batch: int | None) -> None:
    sim = [r for r in rows if r["kind"] == "simulated"]
    est = [r for r in rows if r["kind"] == "estimated"]
    print(f"{w.name}: {len(calls)} simulated calls on {soc}" + (f" with {', '.join(args.set)}" if args.set else ""))
    print(rows_table(sim))
    print(summary_line(sim, soc))
    for r in sim:
        if r["status"] == "not available":
            print(f"call {r['call']}: {r['op']} not available in this simulator: skipped")
        elif r["status"] != "ok":
            print(f"call {r['call']}: {r['status']}: {r.get('message', '')}")
    if est:
        print(estimated_table(est, top=args.top_estimated))
    if with_estimate:
        print(step_line(total, soc, rows, batch))
    elif args.batch:
        print("--batch: no samples a second for part of the step (--calls or --simulated-only)")
    if not with_estimate and w.estimated:
        why = "--calls selects simulated calls" if args.calls is not None else "--simulated-only"
        print(f"step: the trace's {sum(e.count for e in w.estimated)} estimated calls are left out ({why}); "
              f"the total above is the simulated part only")


def estimated_table(est: list[dict], top: int = 10) -> str:
    """The estimated calls that cost the most (count-weighted), labelled as estimates."""
    ranked = sorted(est, key=lambda r: -r["time_us"] * r["count"])
    out = [[r["call"], (r["label"] or "")[:34], r["op"][:34], r["unit"], r["dtype"], r["shapes"][:22], r["count"],
            f"{r['time_us']:,.2f}", f"{r['time_us'] * r['count']:,.1f}", r["bound"], "estimated"]
           for r in ranked[:top]]
    n = sum(r["count"] for r in est)
    head = (f"estimated: {n} calls ({len(est)} distinct), a roofline each from the profile (docs/STEP.md); "
            f"the {min(top, len(est))} that cost the most:")
    lines = [head, text_table(out, ["#", "label", "op", "unit", "dtype", "shape", "n", "us", "us x n", "bound",
                                    "status"], right={0, 6, 7, 8})]
    if len(est) > top:
        lines.append(f"... and {len(est) - top} more (all in --json and -o rows)")
    return "\n".join(lines)


def per_second(t: dict, batch: int | None) -> float | None:
    """Samples a second at the trace's batch, when the step is whole (nothing left out)."""
    whole = not (t["skipped"] or t["failed"])
    return batch / (t["step_us"] * 1e-6) if batch and whole and t["step_us"] else None


def step_line(t: dict, soc: str, rows: list[dict] | None = None, batch: int | None = None) -> str:
    """The step on one chip: simulated + estimated = total, the share simulated, samples a second
    (a trace that gives its batch), and what it leaves out (calls not available in this
    simulator, refused on this chip, or failed)."""
    refused = [r for r in rows or [] if r["kind"] == "simulated" and r["status"].startswith("rejected")
               and "not supported on" in r.get("message", "")]
    left = []
    if t["skipped"]:
        left.append(f"{t['skipped']} distinct call(s) not available in this simulator")
    if refused:
        n = sum(r["count"] for r in refused)
        ops = ", ".join(sorted({r["op"] for r in refused}))
        left.append(f"{n} call(s) of {ops} not supported on {soc} (rejected 161002, as CANN refuses them)")
    if t["failed"] > len(refused):
        left.append(f"{t['failed'] - len(refused)} distinct call(s) refused or failed")
    return (f"step on {soc}: simulated {t['time_us']:,.1f} us + estimated {t['estimated_us']:,.1f} us = "
            f"{t['step_us']:,.1f} us ({t['simulated_share']:.1%} simulated)"
            + (f"; batch {batch}: {rate:,.1f} samples/s" if (rate := per_second(t, batch)) else "")
            + (f"; left out: {'; '.join(left)}" if left else ""))


def step_comparison(rows: list[dict], socs: list[str], totals: list[dict]) -> str:
    """Where a step's time moves between chips: per part (simulated operator, estimated aten op)
    the count-weighted time on each chip and its change against the first, largest change first."""
    groups: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        if r["status"] not in ("ok", "estimated"):
            continue
        g = groups.setdefault((r["kind"], r["op"]), {})
        g[r["soc"]] = g.get(r["soc"], 0.0) + r["time_us"] * r["count"]
    base = socs[0]
    ranked = sorted(groups.items(), key=lambda kv: -max(abs(kv[1].get(s, 0.0) - kv[1].get(base, 0.0)) for s in socs))
    out = []
    for (kind, op), us in ranked:
        out.append([kind, op[:40]] + [f"{us.get(s, 0.0):,.1f}" if s in us else "-" for s in socs]
                   + [_delta(us.get(s), us.get(base)) for s in socs[1:]])
    partial = [bool(t["skipped"] or t["failed"]) for t in totals]
    out.append(["step", "total"] + [f"{t['step_us']:,.1f}" + (" *" if p else "") for t, p in zip(totals, partial)]
               + ["- *" if partial[0] or p else _delta(t["step_us"], totals[0]["step_us"])
                  for t, p in zip(totals[1:], partial[1:])])
    head = ["part", "op"] + [f"{s} us" for s in socs] + [f"{s} vs {base}" for s in socs[1:]]
    note = ("\n* leaves out calls that did not run there (its step line says which): its total is not the "
            "whole step, so not compared" if any(partial) else "")
    return ("where the step's time moves (count-weighted us per part; simulated parts are simulated, "
            "estimated parts a roofline):\n" + text_table(out, head, right=set(range(2, len(head)))) + note)


def _delta(v: float | None, base: float | None) -> str:
    if v is None or base is None:
        return "-"
    d = v - base
    return f"{d:+,.1f} us" + (f" ({d / base:+.0%})" if base else "")


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
    res = studies.regress(w, soc, args.tolerance, args.update, calls=calls, mode=args.mode, **exec_kw(args))
    if args.json:
        print(json.dumps({"soc": soc, "tolerance": args.tolerance, "passed": res.passed, "updated": res.updated,
                          "total_baseline": res.total_baseline, "total_current": res.total_current,
                          "total_drift": res.total_drift,
                          "calls": [d.__dict__ for d in res.drifts]}, indent=1))
    else:
        rows = [[d.call, (d.label or "")[:40], d.op, fmt_cycles(d.baseline), fmt_cycles(d.current),
                 "-" if d.drift is None else f"{(0.0 if abs(d.drift) < 5e-5 else d.drift):+.2%}",
                 _regress_status(d, res.rows)] for d in res.drifts]
        print(f"{w.name} on {soc}{' (fast mode)' if args.mode == 'fast' else ''}, tolerance ±{args.tolerance:.1%}")
        print(text_table(rows, ["#", "label", "op", "baseline", "current", "drift", "status"], right={0, 3, 4, 5}))
        if res.total_baseline:
            td = 0.0 if abs(res.total_drift) < 5e-5 else res.total_drift
            print(f"total: baseline {res.total_baseline:,.0f}  current {res.total_current:,.0f}  drift {td:+.2%}")
        for d in res.drifts:
            if d.status == "ERROR" and d.note:
                print(f"call {d.call}: {d.note}")
            elif d.status == "ERROR":
                r = next(r for r in res.rows if r["call"] == d.call)
                print(f"call {d.call}: {r['status']}: {r.get('message', '')}")
        if res.updated:
            print(f"regress: {'fast-mode ' if args.mode == 'fast' else ''}baselines for {soc} written to {w.path}")
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
        sweep_file = studies.read_sweep_file(src, raw)
        spec = sweep_file.model_dump(exclude_none=True)
        wpath = Path(sweep_file.workload)
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
    given: set[str] = set()
    for item in args.param:
        k, vals = studies.parse_sweep_values(item, args.max_points)
        if k in given:
            raise CliError(f"--param {k}: given twice; list its values once (--param {k}=V1,V2,...)")
        given.add(k)
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
    execution = exec_kw(args)                  # a bad --scheduler fails here, before any work
    n_est = len(w.estimated) if (w.estimated and calls_given(args, spec) is None and not args.simulated_only) else 0
    print(f"sweep: {w.name}, {len(calls)} calls" + (f" (+ {n_est} estimated)" if n_est else "")
          + f" x {len(points)} points"
          + (f" on Dask {args.scheduler}" if args.scheduler else ""), file=sys.stderr)
    with_estimate = bool(w.estimated) and calls_given(args, spec) is None and not args.simulated_only
    rows = studies.evaluate(w, points, calls=calls, mode=args.mode, seed=args.seed, desc="sweep",
                            journal=journal, resume=args.resume, estimated=with_estimate, **execution)
    _finish_rows(rows, output, journal)
    params = list(grid)
    totals = studies.point_totals(rows)
    key = "step_us" if with_estimate else "time_us"
    base = totals[0][key] or 1.0
    table = []
    for t in totals:
        r0 = next(r for r in rows if r["point"] == t["point"])
        figures = [f"{t['cycles']:,.0f}", f"{t['time_us']:,.1f}"]
        if with_estimate:
            figures += [f"{t['estimated_us']:,.1f}", f"{t['step_us']:,.1f}", f"{t['simulated_share']:.0%}"]
        table.append([t["point"], r0["soc"]] + [str(r0[k]) for k in params] + figures
                     + [f"{base / t[key]:.2f}x" if t[key] else "-"]
                     + ([f"{t['skipped']} skipped"] if t["skipped"] else []) + ([f"{t['failed']} failed"] if t["failed"] else []))
    head = ["point", "soc"] + params + (["sim cycles", "sim us", "est us", "step us", "simulated", "speed-up"]
                                        if with_estimate else ["cycles", "us", "speed-up"])
    print(text_table(table, head, right={0}))
    if with_estimate:
        print("step = simulated calls + estimated calls (a roofline each from the point's profile, labelled "
              "'estimated' in the rows; docs/STEP.md)")
    elif w.estimated:
        print(f"the trace's {sum(e.count for e in w.estimated)} estimated calls are left out "
              f"({'--calls selects simulated calls' if calls_given(args, spec) is not None else '--simulated-only'}): "
              f"cycles are the simulated part only")
    print(f"rows: {output} ({len(rows)} rows: one per point per call)")
    if plot:
        studies.plot_sweep(rows, params, plot, title=f"{w.name}: sweep")
        print(f"plot: {plot}")
    return exit_for_failures(rows, note=True)


def calls_given(args, spec: dict):
    """The --calls selection of a sweep (the command line's, else the sweep file's), or None."""
    return args.calls if args.calls is not None else spec.get("calls")


def cmd_tune(args) -> int:
    call = call_from_args(args)
    soc = check_soc(args.soc)
    space = None
    if args.space:
        space = {}
        for item in args.space:
            k, vals = studies.parse_sweep_values(item, args.max_points, "--space")
            if k in space:
                raise CliError(f"--space {k}: given twice; list its values once (--space {k}=V1,V2,...)")
            space[k] = vals
    if studies.opdef_for(call.op) is None:
        raise CliError(f"unknown operator '{call.op}'")
    res = studies.tune(call, soc, what_if_overrides(args), space=space, top=args.top, mode=args.mode,
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
    fast = args.mode == "fast"
    rows = [["default"] + [str(dt.get(k, "")) for k in fields]
            + [fmt_cycles(d["cycles"]), f"{d['time_us']:,.2f}", "1.00x", d["bound"]]
            + ([error_bound(d)] if fast else []) + ["(planner)"]]
    for i, r in enumerate(res.ranked, 1):
        rows.append([f"#{i}"] + [str(r["candidate"].get(k, "")) for k in fields]
                    + [fmt_cycles(r["cycles"]), f"{r['time_us']:,.2f}", f"{d['cycles'] / r['cycles']:.2f}x", r["bound"]]
                    + ([error_bound(r)] if fast else []) + ["= default" if r.get("is_default") else ""])
    head = ["", *fields, "cycles", "us", "vs default", "bound"] + (["vs exact"] if fast else []) + [""]
    print(text_table(rows, head, right=set(range(1, len(fields) + 4))))
    best = res.best
    if best and best["cycles"] < d["cycles"]:
        args_txt = " ".join(f"--tiling {k}={v}" for k, v in best["candidate"].items())
        gain = 1 - best["cycles"] / d["cycles"]
        print(f"best: {gain:.1%} fewer cycles than the default plan; run it with: "
              f"ascend-sim run {call.op} ... {args_txt}")
    else:
        print("best: the default plan is already the fastest of the candidates")
    if fast and any(r.get("simulated_fraction", 1.0) < 1.0 for r in [d, *res.ranked]):
        print("fast mode: each row's cycles are within its 'vs exact' bound of the exact engine's; "
              "confirm the winner with --mode timing")
    return EXIT_OK


def cmd_compare(args) -> int:
    from ..studies import compare as cmp
    path = Path(args.measured)
    report = cmp.read_report(args.report)
    if cmp.is_pipe_utilization(path):
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
        cap = cap_mod.run_script(script, list(args.args), args.name, args.kind, args.batch)
    except studies.StudyError:
        raise
    except SystemExit as e:
        if e.code not in (0, None):
            raise Rejected(f"{script}: the script exited with {e.code}") from None
        raise CliError(f"{script}: the script exited before the capture ended (sys.exit)") from None
    except BaseException as e:
        if not raised_by_user(e):
            raise
        raise Rejected(f"{script}: the script raised {user_error(e, Path(script))}") from None
    path = cap.save(out, args.name)
    print(cap.summary())
    print(f"trace: {path} ({sum(c.count for c in cap.calls)} simulated calls, {len(cap.calls)} distinct; "
          f"{sum(e.count for e in cap.estimated)} estimated, {len(cap.estimated)} distinct)")
    return EXIT_OK


def register(sub) -> None:
    """Add the study commands: `replay`, `regress`, `sweep`, `tune`, `compare`, `capture`."""
    _add_replay(sub)
    _add_regress(sub)
    _add_sweep(sub)
    _add_tune(sub)
    _add_compare(sub)
    _add_capture(sub)


def _add_replay(sub) -> None:
    """`replay`: every call of a trace on one chip."""
    rp = sub.add_parser("replay", help="replay a workload trace (a whole training step) on one chip or several",
                        description="Replay every call of a workload trace (traces/README.md) on any SoC, with "
                                    "optional what-if overrides, in timing mode. Calls of operators not in this "
                                    "simulator are skipped with a 'not available' line. A trace with estimated "
                                    "calls (captured from a whole step) also gets their roofline estimate on the "
                                    "profile, labelled 'estimated', and the step's split: simulated + estimated = "
                                    "total. Several --soc compare the step across chips (docs/STEP.md).",
                        epilog="examples:\n  ascend-sim replay traces/resnet50_conv_backward.yaml --soc Ascend910B1\n"
                               "  ascend-sim replay traces/resnet50_conv_backward.yaml --soc Ascend910A --soc Ascend910B1\n"
                               "  ascend-sim replay traces/resnet50_conv_backward.yaml --set device_memory.bandwidth_GBps=x0.5",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("trace", help="workload trace (.yaml, .json or .jsonl)")
    profile_args(rp, many_socs=True)
    rp.add_argument("--calls", metavar="SEL", help="only these simulated calls, e.g. 0-5,9 (the estimated part, "
                                                   "which belongs to the whole step, is then left out)")
    rp.add_argument("--simulated-only", action="store_true",
                    help="leave out the trace's estimated calls: the simulated part alone")
    rp.add_argument("--top-estimated", type=int_in(0, 10 ** 6), default=10, metavar="N",
                    help="how many estimated calls to list, those that cost the most first (default 10)")
    rp.add_argument("--mode", default="timing", choices=MODES,
                    help="timing (default), functional, or fast: loops fast-forwarded within a stated bound")
    rp.add_argument("--seed", type=SEED, default=0)
    rp.add_argument("-o", "--output", type=a_path, help="write the rows (.csv, .json or .jsonl); each row is also "
                                            "journaled as it finishes in OUTPUT.partial.jsonl")
    rp.add_argument("--resume", action="store_true",
                    help="keep the rows an interrupted run journaled for -o and run only the rest")
    rp.add_argument("--json", action="store_true", help="print the rows as JSON")
    rp.add_argument("--batch", type=int_in(1, 10 ** 9), metavar="N",
                    help="samples per step (default: the trace's step.batch): the step line prints samples a second")
    rp.add_argument("--msprof-out", metavar="DIR", type=a_path,
                    help="also write msprof's files for each call under DIR/call<N>/ (the calls run once "
                         "more, in this process; docs/OUTPUTS.md)")
    budget_args(rp)
    exec_args(rp)
    rp.set_defaults(func=cmd_replay)


def _add_regress(sub) -> None:
    """`regress`: a trace's cycles against its baselines."""
    rg = sub.add_parser("regress", help="compare a trace's cycles with its baselines (for CI)",
                        description="Replay a trace and compare each call's cycles, and the count-weighted total, "
                                    "with the baselines recorded in the trace for the SoC. Exit 3 when any call or "
                                    "the total drifts beyond the tolerance (either way); --update records the "
                                    "current cycles as the new baselines.")
    rg.add_argument("trace")
    rg.add_argument("--soc", default=DEFAULT_SOC, help=f"chip profile (default {DEFAULT_SOC})")
    rg.add_argument("--tolerance", type=float_in(0, 100), default=0.02,
                    help="relative drift allowed (default 0.02 = 2%%)")
    rg.add_argument("--update", action="store_true", help="rewrite the baselines for this SoC")
    rg.add_argument("--calls", metavar="SEL", help="only these calls, e.g. 0-5,9")
    rg.add_argument("--mode", default="timing", choices=MODES,
                    help="timing (default: the exact engine's baselines, under the SoC's name) or fast (fast "
                         "mode's own baselines, under '<SoC>:fast'); functional checks the exact baselines too")
    rg.add_argument("--json", action="store_true")
    exec_args(rg)
    rg.set_defaults(func=cmd_regress)


def _add_sweep(sub) -> None:
    """`sweep`: a workload over a grid of chips and profile fields."""
    sw = sub.add_parser("sweep", help="what-if sweep: cartesian product of profile fields over a workload",
                        description="Run a workload over the cartesian product of SoCs and profile-field values; "
                                    "write tidy rows (one per point per call) and plots.",
                        epilog="examples:\n  ascend-sim sweep traces/efficientnet_b0_silu_backward.yaml "
                               "--param device_memory.bandwidth_GBps=800,1600,3200 --param cores.aiv.count=24,48 "
                               "-o out/sweep.csv --plot out/sweep.png\n"
                               "  ascend-sim sweep traces/sweeps/hbm_bandwidth.yaml --workers 2\n"
                               "values: lists 800,1600; ranges 1000:2000:250 (stop included); relative x0.5,x1,x2",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sw.add_argument("workload", help="a workload trace, or a sweep file (YAML with workload, socs, set, parameters)")
    sw.add_argument("--soc", action="append", metavar="SOC", help=f"chip, repeatable (default {DEFAULT_SOC})")
    sw.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="fixed override at every point")
    sw.add_argument("--param", action="append", default=[], metavar="FIELD=V1,V2,...",
                    help="a swept profile field and its values, repeatable")
    sw.add_argument("--calls", metavar="SEL", help="only these simulated calls, e.g. 0-5,9 (the estimated part, "
                                                   "which belongs to the whole step, is then left out)")
    sw.add_argument("--simulated-only", action="store_true", help="leave out the trace's estimated calls")
    sw.add_argument("-o", "--output", type=a_path, help="rows file: .csv, .json or .jsonl (default out/sweep_<name>.csv)")
    sw.add_argument("--plot", type=a_path, help="plot file: .png or .svg (cycles vs parameter, pipe breakdown, roofline)")
    sw.add_argument("--mode", default="fast", choices=MODES,
                    help="fast (default: loops fast-forwarded, each row with its stated error bound), or "
                         "timing to force the exact engine, or functional")
    sw.add_argument("--seed", type=SEED, default=0)
    sw.add_argument("--max-points", type=int_in(1, 10 ** 7), default=MAX_SWEEP_POINTS,
                    help=f"the sweep's budget: refuse a grid of more points (default {MAX_SWEEP_POINTS:,})")
    sw.add_argument("--resume", action="store_true",
                    help="keep the rows an interrupted sweep journaled (OUTPUT.partial.jsonl), run only the rest")
    budget_args(sw)
    exec_args(sw)
    sw.set_defaults(func=cmd_sweep)


def _add_tune(sub) -> None:
    """`tune`: a call's tiling space searched."""
    tn = sub.add_parser("tune", help="search an operator call's tiling space",
                        description="Run a call with the default planner and with every candidate tiling (the "
                                    "operator's own search space, or --space); candidates the planner rejects "
                                    "(561002) are skipped; print the best few beside the default.",
                        epilog="example:\n  ascend-sim tune SiluBackward --shape 32,96,56,56 --dtype FLOAT16 --top 5\n"
                               "  ascend-sim tune SiluBackward --shape 8,1024 --space tileLength=512,1024,2048",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    call_args(tn)
    profile_args(tn)
    tn.add_argument("--space", action="append", default=[], metavar="FIELD=V1,V2,...",
                    help="search this grid instead of the operator's space (repeatable)")
    tn.add_argument("--top", type=int_in(1, 10 ** 6), default=5, help="how many of the best to show (default 5)")
    tn.add_argument("--max-points", type=int_in(1, 10 ** 7), default=MAX_SWEEP_POINTS,
                    help=f"refuse a --space of more candidates (default {MAX_SWEEP_POINTS:,})")
    tn.add_argument("--mode", default="fast", choices=("fast", "timing"),
                    help="fast (default: loops fast-forwarded, each candidate with its stated error bound) or "
                         "timing to force the exact engine")
    tn.add_argument("--json", action="store_true")
    exec_args(tn)
    tn.set_defaults(func=cmd_tune)


def _add_compare(sub) -> None:
    """`compare`: msprof's measurements beside a simulated report."""
    cp = sub.add_parser("compare", help="set msprof's measurements of a real run beside a simulated report",
                        description="Read what msprof wrote for a real run (its op_summary CSV, with either the "
                                    "'Block Dim' or the 'Block Num' column, or msprof op's PipeUtilization.csv) "
                                    "and print measured beside simulated, per pipe and for the kernel, with the "
                                    "ratio simulated / measured. The simulated side is a report saved with --json "
                                    "by 'ascend-sim run' or 'ascend-sim kernel' for the same call on the same chip.",
                        epilog="example:\n  ascend-sim kernel examples/kernels/add_sample.py --soc Ascend910A --mode timing "
                               "--warmup 1 --json --no-trace > out/add.json\n"
                               "  ascend-sim compare tests/fixtures/msprof/add_sample_op_summary.csv --report out/add.json",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    cp.add_argument("measured", help="msprof's op_summary_*.csv or msprof op's PipeUtilization.csv")
    cp.add_argument("--report", type=a_path, required=True, help="the simulated report: JSON from 'run --json' or 'kernel --json'")
    cp.add_argument("--op-name", help="the op_summary row to use (its Op Name or OP Type) when there are several")
    cp.add_argument("--json", action="store_true", help="print the rows as JSON")
    cp.set_defaults(func=cmd_compare)


def _add_capture(sub) -> None:
    """`capture`: a workload trace from a PyTorch script."""
    ca = sub.add_parser("capture", help="run a PyTorch script and write the workload trace of its calls",
                        description="Run a Python script (a PyTorch model's forward and backward) under "
                                    "simulator.capture(): the aten calls that map to our operators "
                                    "(convolution_backward, silu_backward, grid_sampler_2d_backward, "
                                    "conv_tbc_backward) become the simulated calls of a workload trace for "
                                    "replay, sweep and regress, and every other kernel of the step an "
                                    "estimated call (a roofline on replay), so the trace is the whole step. "
                                    "The step begins at the first call autograd records; what runs before it "
                                    "(building the model, init, casts) is set-up and not counted (docs/STEP.md). "
                                    "The summary ranks the estimated ops by their share of FLOPs and bytes. "
                                    "Needs torch.",
                        epilog="example:\n  ascend-sim capture my_train_step.py -o traces/my_model.yaml -- --batch 8\n"
                               "  ascend-sim replay traces/my_model.yaml --soc Ascend910B1",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ca.add_argument("script", help="the Python script to run (as python SCRIPT ARGS would); its own "
                                   "arguments go after --")
    ca.add_argument("-o", "--output", type=a_path, help="the trace to write (.yaml, .jsonl or .json; default out/<script>.yaml)")
    ca.add_argument("--name", help="the trace's name (default: the script's)")
    ca.add_argument("--kind", choices=("training", "inference"),
                    help="what the step is (default: training if a backward ran, else inference)")
    ca.add_argument("--batch", type=int_in(1, 10 ** 9), metavar="N",
                    help="samples per step, kept in the trace: replay then prints samples per second")
    ca.set_defaults(func=cmd_capture)
