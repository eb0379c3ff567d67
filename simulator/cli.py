"""ascend-sim: the command line.

    ascend-sim run SiluBackward --shape 64,1024 --dtype FLOAT16      # one aclnn call, its report
    ascend-sim ops                                                    # operators and parameters
    ascend-sim chips | chip Ascend910B1 | diff Ascend910B1 Ascend910B4
    ascend-sim replay traces/efficientnet_b0_silu_backward.yaml --soc Ascend910A
    ascend-sim regress traces/efficientnet_b0_silu_backward.yaml --soc Ascend910B1
    ascend-sim sweep TRACE --param device_memory.bandwidth_GBps=800,1600,3200 -o out/s.csv --plot out/s.png
    ascend-sim tune SiluBackward --shape 32,96,56,56 --dtype FLOAT16
    ascend-sim kernel my_kernel.py --soc Ascend910B4

Exit codes: 0 success, 1 a call rejected by the operator (aclnn status) or a kernel fault,
2 a usage error (bad argument, unknown SoC / field / operator, malformed file), 3 a cycle
regression. Errors are one line; set ASCEND_SIM_DEBUG=1 to get Python's traceback instead.
The study logic (traces, sweeps, tuning) lives in simulator/studies.py.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from .enums import AclnnError, KernelError
from .profile import DEFAULT_SOC, ProfileError, list_socs, load_profile
from . import studies
from .studies import Call, StudyError, TensorSpec, one_line

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_REGRESSION = 0, 1, 2, 3


class CliError(Exception):
    """A bad argument: printed as one line, exit code 2."""


class Rejected(Exception):
    """A call the simulator ran and refused (exit code 1), already explained."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so every error is one line."""

    def error(self, message: str):
        raise CliError(f"{message} (see '{self.prog} --help')")


# ---- shared helpers ------------------------------------------------------------------------------
def _check_soc(soc: str) -> str:
    try:
        load_profile(soc)
    except ProfileError as e:
        raise CliError(one_line(str(e))) from None
    return soc


def _profile_args(p: argparse.ArgumentParser, many_socs: bool = False) -> None:
    if many_socs:
        p.add_argument("--soc", action="append", metavar="SOC",
                       help=f"chip profile, repeatable (default {DEFAULT_SOC}); a .yaml path also works")
    else:
        p.add_argument("--soc", default=DEFAULT_SOC, help=f"chip profile (default {DEFAULT_SOC}); a .yaml path also works")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a profile field by dotted path, repeatable: "
                        "--set device_memory.bandwidth_GBps=3200 --set cores.aiv.count=24; "
                        "relative values x2, /2 scale the chip's own value")


def _overrides(args) -> dict[str, Any]:
    return studies.parse_assignments(args.set, "--set")


def _profile(args, soc: str | None = None):
    soc = _check_soc(soc or args.soc)
    return studies.make_profile(soc, _overrides(args))


def _exec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local worker processes (default: one per CPU; 1 runs in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask distributed cluster (tcp://host:8786), or 'local:N' to start a "
                        "LocalCluster of N workers (needs the [dask] extra)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="show a progress bar (default: when stderr is a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false")


def _exec_kw(args) -> dict[str, Any]:
    if args.workers is not None and args.workers < 1:
        raise CliError(f"--workers must be >= 1, got {args.workers}")
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    return {"workers": args.workers, "scheduler": args.scheduler, "progress": progress}


def _load_workload(path: str) -> studies.Workload:
    return studies.load_trace(path)


def _fmt_cycles(c) -> str:
    return "-" if c is None else f"{c:,.0f}"


def _table(rows: list[list[str]], head: list[str], right: set[int] = frozenset()) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)] if rows else [len(h) for h in head]
    def fmt(r):
        return "  ".join(str(x).rjust(w) if i in right else str(x).ljust(w)
                         for i, (x, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join([fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows])


# ---- run: one call -------------------------------------------------------------------------------
def _named(items: list[str], flag: str) -> tuple[str | None, dict[str, str]]:
    """'64,1024' and 'self=64,1024' forms: (the unnamed value, {name: value})."""
    plain, named = None, {}
    for item in items:
        if "=" in item:
            k, v = item.split("=", 1)
            named[k.strip()] = v.strip()
        else:
            if plain is not None:
                raise CliError(f"{flag}: more than one unnamed value ({plain}, {item}); name them: NAME=VALUE")
            plain = item
    return plain, named


def _call_from_args(args) -> Call:
    """The call to run: from --file (a call, or a trace with --call N) and/or the command line."""
    if args.file:
        path = Path(args.file)
        fmt, raw = studies.read_structured(path)
        if isinstance(raw, dict) and "calls" in raw:
            w = studies.load_trace(path)
            if args.call is None and len(w.calls) > 1:
                raise CliError(f"{path} holds {len(w.calls)} calls: pick one with --call N (0-{len(w.calls) - 1})")
            i = args.call or 0
            if not 0 <= i < len(w.calls):
                raise CliError(f"--call {i}: {path} has calls 0-{len(w.calls) - 1}")
            base = w.calls[i]
        else:
            base = studies.call_from_record(raw, str(path))
        if args.op and args.op != base.op:
            raise CliError(f"operator '{args.op}' given, but {path} holds a {base.op} call")
    else:
        if not args.op:
            raise CliError("name an operator (e.g. SiluBackward) or give --file CALL.yaml")
        base = Call(args.op)
    op = base.op
    opdef = studies.opdef_for(op)
    if opdef is None:
        raise CliError(f"unknown operator '{op}' (available: {', '.join(studies.available_ops())})")
    kinds = {p.name: p for p in opdef.params}
    tensors = dict(base.tensors)
    attrs = dict(base.attrs)
    shape_plain, shape_named = _named(args.shape, "--shape")
    dtype_plain, dtype_named = _named(args.dtype, "--dtype")
    _, init_named = _named(args.init, "--init")
    for name in list(shape_named) + list(dtype_named) + list(init_named):
        if name not in kinds or kinds[name].kind != "tensor":
            tens = [p.name for p in opdef.params if p.kind == "tensor"]
            raise CliError(f"{op} has no tensor parameter '{name}' (tensors: {', '.join(tens)})")
    default_dtype = studies.canonical_dtype(dtype_plain, "--dtype") if dtype_plain else None
    tensor_inputs = [p.name for p in opdef.inputs if p.kind == "tensor"]
    for p in opdef.params:
        if p.kind != "tensor":
            continue
        old = tensors.get(p.name)
        shape_txt = shape_named.get(p.name) or (shape_plain if (p.name in tensor_inputs and p.name not in tensors) else None)
        if shape_txt is None and old is None:
            if p.name in dtype_named or p.name in init_named:
                raise CliError(f"--dtype/--init {p.name}: give its shape too (--shape {p.name}=...)")
            continue
        shape = studies.shape_of(shape_txt, f"--shape {p.name}") if shape_txt is not None else old.shape
        dt = dtype_named.get(p.name) or default_dtype or (old.dtype if old else "FLOAT16")
        init = init_named.get(p.name) or (old.init if old else ("uniform(-1,1)" if p.name == "grid" else "normal"))
        tensors[p.name] = TensorSpec(shape, studies.canonical_dtype(dt, f"--dtype {p.name}"),
                                     studies.check_init(init, f"--init {p.name}"))
    if not any(p.name in tensors for p in opdef.inputs if p.kind == "tensor"):
        raise CliError(f"{op}: give the tensor shapes, e.g. --shape 64,1024 or --shape "
                       f"{tensor_inputs[0] if tensor_inputs else 'NAME'}=... (tensors: {', '.join(tensor_inputs)})")
    for item in args.attr:
        if "=" not in item:
            raise CliError(f"--attr: '{item}' is not NAME=VALUE")
        k, v = (s.strip() for s in item.split("=", 1))
        if k not in kinds or kinds[k].kind == "tensor":
            names = [p.name for p in opdef.params if p.kind != "tensor"]
            raise CliError(f"{op} has no attribute '{k}' (attributes: {', '.join(names) or 'none'})")
        attrs[k] = None if v.lower() in ("null", "none") else studies.coerce_attr(op, k, kinds[k].kind, v)
    tiling = dict(base.tiling or {})
    tiling.update(studies.parse_assignments(args.tiling, "--tiling"))
    return Call(op, tensors, attrs, base.stream, base.label, base.count, tiling or None)


def _describe(name: str, a: np.ndarray) -> str:
    if a.size == 0:
        return f"  {name}: shape {list(a.shape)} {a.dtype} (empty)"
    f = a.astype(np.float64)
    flat = ", ".join(f"{v:.6g}" for v in f.reshape(-1)[:4])
    return (f"  {name}: shape {list(a.shape)} {a.dtype}  min {f.min():.6g}  max {f.max():.6g}  "
            f"mean {f.mean():.6g}  first [{flat}{', ...' if a.size > 4 else ''}]")


def cmd_run(args) -> int:
    from .api import run
    call = _call_from_args(args)
    profile = _profile(args)
    try:
        kw = studies.build_inputs(call, args.seed)
    except studies.NotAvailable as e:
        raise CliError(str(e)) from None
    result = run(call.op, mode=args.mode, profile=profile, trace=not args.no_trace,
                 tiling=call.tiling, **kw)
    soc = profile.soc_version
    trace_path = None
    if not args.no_trace:
        trace_path = Path(args.trace) if args.trace else Path("out") / f"{call.op}_{soc}.trace.json"
        result.trace.save(trace_path)
    if args.json:
        out = result.report.to_dict()
        out["call"] = call.to_record()
        if args.set:
            out["overrides"] = _overrides(args)
        out["trace_file"] = str(trace_path) if trace_path else None
        print(json.dumps(out, indent=2))
        return EXIT_OK
    print(f"aclnn{call.op} on {soc}" + (f" (with {', '.join(args.set)})" if args.set else ""))
    dts = sorted({t.dtype for t in call.tensors.values()})
    print(f"call: {call.shapes()} {'/'.join(dts)}" + "".join(f" {k}={v}" for k, v in call.attrs.items())
          + ("".join(f" tiling.{k}={v}" for k, v in call.tiling.items()) if call.tiling else ""))
    if result.outputs and args.mode == "functional":
        print("outputs:")
        for name, a in result.outputs.items():
            print(_describe(name, a))
    print(result.report.summary())
    if trace_path:
        print(f"trace: {trace_path} (open in https://ui.perfetto.dev or chrome://tracing)")
    return EXIT_OK


# ---- ops, chips ---------------------------------------------------------------------------------
def cmd_ops(args) -> int:
    from . import aclnn
    out = {name: [{"name": p.name, "kind": p.kind, "output": p.output} for p in op.params]
           for name, op in sorted(aclnn.REGISTRY.items())}
    if args.json:
        print(json.dumps(out, indent=2))
        return EXIT_OK
    for name, op in sorted(aclnn.REGISTRY.items()):
        ins = ", ".join(f"{p.name}:{p.kind}" for p in op.inputs)
        outs = ", ".join(p.name for p in op.outputs)
        extra = " [tunable]" if getattr(op, "tiling_space", None) else ""
        print(f"aclnn{name}({ins}) -> {outs}{extra}")
        if op.tiling_fields:
            print(f"    --tiling fields: {', '.join(f'{f}:{k}' for f, k in op.tiling_fields.items())}")
    return EXIT_OK


def cmd_chips(args) -> int:
    rows = []
    for soc in list_socs():
        p = load_profile(soc)
        rows.append({"soc": soc, "series": p.series, "clock_mhz": p.clock_mhz,
                     "cores": {n: k.count for n, k in p.cores.items()},
                     "device_memory_GBps": p.device_memory.bandwidth_GBps,
                     "l2_MiB": p.l2.bytes / 2**20, "fp16_peak_TFLOPS": round(p.peak_fp16_tflops, 1)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    for r in rows:
        cores = ", ".join(f"{c} {n}" for n, c in r["cores"].items())
        print(f"{r['soc']:<13} {r['series']:<9} {r['clock_mhz']:>6g} MHz  {cores:<24} "
              f"{r['device_memory_GBps']:>7g} GB/s  L2 {r['l2_MiB']:>4g} MiB  fp16 peak {r['fp16_peak_TFLOPS']:6.1f} TFLOPS")
    return EXIT_OK


def cmd_chip(args) -> int:
    p = _profile(args, args.soc)
    if args.json:
        print(json.dumps(p.model_dump(), indent=2))
        return EXIT_OK
    fields = studies.profile_fields(p)
    width = max(len(k) for k in fields)
    print(f"{p.soc_version} ({p.series_name})" + (f" with {', '.join(args.set)}" if args.set else ""))
    for k, v in fields.items():
        print(f"  {k:<{width}}  {v}")
    print(f"  {'(derived) fp16 peak TFLOPS':<{width}}  {p.peak_fp16_tflops:.1f}")
    print(f"  {'(derived) device bytes/cycle':<{width}}  {p.device_bytes_per_cycle:.1f}")
    return EXIT_OK


def cmd_diff(args) -> int:
    a, b = _profile(args, args.soc_a), _profile(args, args.soc_b)
    fa, fb = studies.profile_fields(a), studies.profile_fields(b)
    keys = [k for k in list(fa) + [k for k in fb if k not in fa] if fa.get(k, "<absent>") != fb.get(k, "<absent>")]
    derived = [("(derived) fp16 peak TFLOPS", round(a.peak_fp16_tflops, 1), round(b.peak_fp16_tflops, 1)),
               ("(derived) device bytes/cycle", round(a.device_bytes_per_cycle, 1), round(b.device_bytes_per_cycle, 1))]
    if args.json:
        print(json.dumps({k: [fa.get(k), fb.get(k)] for k in keys}, indent=2, default=str))
        return EXIT_OK
    rows = [[k, str(fa.get(k, "<absent>")), str(fb.get(k, "<absent>"))] for k in keys]
    rows += [[k, str(x), str(y)] for k, x, y in derived if x != y]
    if not rows:
        print(f"{args.soc_a} and {args.soc_b} are identical")
        return EXIT_OK
    print(_table(rows, ["field", args.soc_a, args.soc_b]))
    print(f"{len(keys)} field(s) differ")
    return EXIT_OK


# ---- replay, regress ----------------------------------------------------------------------------
def _rows_table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        status = "" if r["status"] == "ok" else r["status"]
        shapes = r["shapes"].split()
        dims = {x.split("=", 1)[-1] for x in shapes}
        shown = dims.pop() if len(dims) == 1 else r["shapes"]
        out.append([r["call"], (r["label"] or "")[:40], r["op"], shown[:60], r["count"],
                    _fmt_cycles(r.get("cycles")),
                    f"{r['time_us']:,.2f}" if r.get("time_us") is not None else "-",
                    r.get("bound", "") or "", status])
    return _table(out, ["#", "label", "op", "shapes", "n", "cycles", "us", "bound", "status"], right={0, 4, 5, 6})


def _summary_line(rows: list[dict], soc: str) -> str:
    tot = studies.point_totals(rows)[0]
    us = tot["time_us"]
    return (f"total: {tot['cycles']:,.0f} cycles = {us:,.1f} us on {soc} over {tot['ok']} calls"
            + (f"; {tot['skipped']} not available" if tot["skipped"] else "")
            + (f"; {tot['failed']} FAILED" if tot["failed"] else "") + " (count-weighted, calls run one after another)")


def cmd_replay(args) -> int:
    w = _load_workload(args.trace)
    soc = _check_soc(args.soc)
    calls = w.select(args.calls)
    rows = studies.replay(w, soc, _overrides(args), calls=calls, mode=args.mode, seed=args.seed, **_exec_kw(args))
    if args.output:
        studies.write_rows(rows, args.output)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{w.name}: {len(calls)} calls on {soc}" + (f" with {', '.join(args.set)}" if args.set else ""))
        print(_rows_table(rows))
        print(_summary_line(rows, soc))
        for r in rows:
            if r["status"] == "not available":
                print(f"call {r['call']}: {r['op']} not available in this simulator: skipped")
            elif r["status"] != "ok":
                print(f"call {r['call']}: {r['status']}: {r.get('message', '')}")
        if args.output:
            print(f"rows: {args.output}")
    failed = [r for r in rows if r["status"] not in ("ok", "not available")]
    return EXIT_REJECTED if failed else EXIT_OK


def _regress_status(d, rows) -> str:
    if d.status == "expected":
        r = next(r for r in rows if r["call"] == d.call)
        return f"ok ({r['status']}, as recorded)"
    return {"ok": "ok", "DRIFT": "DRIFT", "ERROR": "ERROR", "skipped": "not available: skipped",
            "new": "new (no baseline)"}[d.status]


def cmd_regress(args) -> int:
    w = _load_workload(args.trace)
    soc = _check_soc(args.soc)
    calls = w.select(args.calls)
    res = studies.regress(w, soc, args.tolerance, args.update, calls=calls, **_exec_kw(args))
    if args.json:
        print(json.dumps({"soc": soc, "tolerance": args.tolerance, "passed": res.passed, "updated": res.updated,
                          "total_baseline": res.total_baseline, "total_current": res.total_current,
                          "total_drift": res.total_drift,
                          "calls": [d.__dict__ for d in res.drifts]}, indent=1))
    else:
        rows = [[d.call, (d.label or "")[:40], d.op, _fmt_cycles(d.baseline), _fmt_cycles(d.current),
                 "-" if d.drift is None else f"{(0.0 if abs(d.drift) < 5e-5 else d.drift):+.2%}",
                 _regress_status(d, res.rows)] for d in res.drifts]
        print(f"{w.name} on {soc}, tolerance ±{args.tolerance:.1%}")
        print(_table(rows, ["#", "label", "op", "baseline", "current", "drift", "status"], right={0, 3, 4, 5}))
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


# ---- sweep ---------------------------------------------------------------------------------------
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
        w = _load_workload(str(wpath))
    else:
        w = _load_workload(args.workload)
    socs = args.soc or spec.get("socs") or [DEFAULT_SOC]
    if isinstance(socs, str):
        socs = [socs]
    for s in socs:
        _check_soc(s)
    fixed = dict(spec.get("set") or {})
    fixed.update(_overrides(args))
    grid: dict[str, list] = {}
    for k, v in (spec.get("parameters") or {}).items():
        grid[k] = v if isinstance(v, list) else [v]
    for item in args.param:
        k, vals = studies.parse_sweep_values(item)
        grid[k] = vals
    if not grid and len(socs) < 2:
        raise CliError("nothing to sweep: give --param FIELD=V1,V2,... (or several --soc, or a sweep file)")
    output = args.output or spec.get("output") or f"out/sweep_{w.name}.csv"
    plot = args.plot or spec.get("plot")
    calls = w.select(args.calls if args.calls is not None else spec.get("calls"))
    points = studies.grid_points(socs, grid, fixed)
    for pt in points:                          # a bad field or value fails here, before any work
        studies.make_profile(pt.soc, pt.overrides)
    print(f"sweep: {w.name}, {len(calls)} calls x {len(points)} points"
          + (f" on Dask {args.scheduler}" if args.scheduler else ""), file=sys.stderr)
    rows = studies.evaluate(w, points, calls=calls, mode=args.mode, seed=args.seed, desc="sweep", **_exec_kw(args))
    studies.write_rows(rows, output)
    params = list(grid)
    totals = studies.point_totals(rows)
    base = totals[0]["cycles"] or 1.0
    table = []
    for t in totals:
        r0 = next(r for r in rows if r["point"] == t["point"])
        table.append([t["point"], r0["soc"]] + [str(r0[k]) for k in params]
                     + [f"{t['cycles']:,.0f}", f"{t['time_us']:,.1f}", f"{base / t['cycles']:.2f}x" if t["cycles"] else "-"]
                     + ([f"{t['skipped']} skipped"] if t["skipped"] else []) + ([f"{t['failed']} failed"] if t["failed"] else []))
    print(_table(table, ["point", "soc"] + params + ["cycles", "us", "speed-up"], right={0}))
    print(f"rows: {output} ({len(rows)} rows: one per point per call)")
    if plot:
        studies.plot_sweep(rows, params, plot, title=f"{w.name}: sweep")
        print(f"plot: {plot}")
    return EXIT_OK


# ---- tune ----------------------------------------------------------------------------------------
def cmd_tune(args) -> int:
    call = _call_from_args(args)
    soc = _check_soc(args.soc)
    space = None
    if args.space:
        space = {}
        for item in args.space:
            k, vals = studies.parse_sweep_values(item)
            space[k] = vals
    if studies.opdef_for(call.op) is None:
        raise CliError(f"unknown operator '{call.op}'")
    res = studies.tune(call, soc, _overrides(args), space=space, top=args.top, mode="timing", **_exec_kw(args))
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
            + [_fmt_cycles(d["cycles"]), f"{d['time_us']:,.2f}", "1.00x", d["bound"], "(planner)"]]
    for i, r in enumerate(res.ranked, 1):
        rows.append([f"#{i}"] + [str(r["candidate"].get(k, "")) for k in fields]
                    + [_fmt_cycles(r["cycles"]), f"{r['time_us']:,.2f}", f"{d['cycles'] / r['cycles']:.2f}x", r["bound"],
                       "= default" if r.get("is_default") else ""])
    print(_table(rows, ["", *fields, "cycles", "us", "vs default", "bound", ""], right=set(range(1, len(fields) + 4))))
    best = res.best
    if best and best["cycles"] < d["cycles"]:
        args_txt = " ".join(f"--tiling {k}={v}" for k, v in best["candidate"].items())
        gain = 1 - best["cycles"] / d["cycles"]
        print(f"best: {gain:.1%} fewer cycles than the default plan; run it with: "
              f"ascend-sim run {call.op} ... {args_txt}")
    else:
        print("best: the default plan is already the fastest of the candidates")
    return EXIT_OK


# ---- kernel FILE.py ------------------------------------------------------------------------------
KERNEL_CONVENTION = """\
A kernel file is plain Python that defines:

  launch(profile) -> dict     (or launch() with no argument)
      returns {"body": <kernel function>, "block_dim": <int>, "args": {<name>: <value>},
               "kind": "vector" | "cube" | "mix" (default "vector"), "name": <str, optional>}
      Array values in args become GM_ADDR pointers to device copies; other values (a tiling
      struct, ints) are passed as they are. The body is called once per block as body(*args.values()).
  check(outputs) -> None      (optional)
      gets {<name>: array after the kernel}; raise AssertionError (or return False) to fail.

See examples/kernels/vadd.py."""


def _load_kernel_file(path: Path):
    if not path.exists():
        raise CliError(f"{path}: no such file")
    if path.suffix != ".py":
        raise CliError(f"{path}: a kernel file is a Python file (.py)")
    name = f"ascend_sim_user_kernel_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise CliError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:
        raise CliError(f"{path}: importing it raised {_user_error(e, path)}") from None
    finally:
        sys.path.pop(0)
    return mod


def _user_error(e: BaseException, path: Path) -> str:
    """'ValueError: msg (at file.py:12)', pointing at the deepest frame in the user's file."""
    where = ""
    for fr in traceback.extract_tb(e.__traceback__):
        if Path(fr.filename).resolve() == path.resolve():
            where = f" (at {path.name}:{fr.lineno})"
    return f"{type(e).__name__}: {one_line(str(e))}{where}"


def cmd_kernel(args) -> int:
    from .api import run_kernel
    path = Path(args.file)
    profile = _profile(args)
    mod = _load_kernel_file(path)
    launch = getattr(mod, args.entry, None)
    if not callable(launch):
        raise CliError(f"{path}: defines no {args.entry}() function (see 'ascend-sim kernel --help' "
                       f"for the convention)")
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        nparams = len(inspect.signature(launch).parameters)
        with quiet:
            spec = launch(profile) if nparams >= 1 else launch()
    except Exception as e:
        raise Rejected(f"{path}: {args.entry}() raised {_user_error(e, path)}") from None
    if not isinstance(spec, dict) or not {"body", "block_dim", "args"} <= set(spec):
        raise CliError(f"{path}: {args.entry}() must return a dict with 'body', 'block_dim' and 'args' "
                       f"(got {type(spec).__name__}{' with ' + ', '.join(spec) if isinstance(spec, dict) else ''})")
    extra = set(spec) - {"body", "block_dim", "args", "kind", "name"}
    if extra:
        raise CliError(f"{path}: {args.entry}() returned unknown key(s) {', '.join(sorted(extra))}")
    if not callable(spec["body"]):
        raise CliError(f"{path}: 'body' must be the kernel function")
    if not isinstance(spec["args"], dict):
        raise CliError(f"{path}: 'args' must be a dict of the body's parameters")
    kind = spec.get("kind", "vector")
    if kind not in ("vector", "cube", "mix"):
        raise CliError(f"{path}: 'kind' must be vector, cube or mix, not {kind!r}")
    try:
        block_dim = int(spec["block_dim"])
    except (TypeError, ValueError):
        raise CliError(f"{path}: 'block_dim' must be an integer, got {spec['block_dim']!r}") from None
    if block_dim < 1:
        raise CliError(f"{path}: 'block_dim' must be >= 1, got {block_dim}")
    try:
        with (contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()):
            res = run_kernel(spec["body"], block_dim, spec["args"], kind=kind, profile=profile,
                             mode=args.mode, name=spec.get("name"), trace=not args.no_trace)
    except (KernelError, AclnnError):
        raise
    except Exception as e:
        raise Rejected(f"{path}: the kernel raised {_user_error(e, path)}") from None
    checked = None
    check = getattr(mod, "check", None)
    if callable(check) and args.mode == "functional":
        try:
            with (contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()):
                ok = check(res.outputs)
            checked = ok is not False
            why = "check() returned False"
        except AssertionError as e:
            checked, why = False, one_line(str(e)) or "assertion failed"
        except Exception as e:
            checked, why = False, _user_error(e, path)
    trace_path = None
    if not args.no_trace:
        trace_path = Path(args.trace) if args.trace else Path("out") / f"{path.stem}_{profile.soc_version}.trace.json"
        res.trace.save(trace_path)
    if args.json:
        out = res.report.to_dict()
        out["check"] = checked
        out["trace_file"] = str(trace_path) if trace_path else None
        print(json.dumps(out, indent=2))
    else:
        print(f"kernel {spec.get('name') or getattr(spec['body'], '__name__', 'kernel')} from {path} "
              f"on {profile.soc_version}: {block_dim} blocks on {kind} cores")
        if args.mode == "functional":
            print("arrays after the kernel:")
            for k, a in res.outputs.items():
                print(_describe(k, a))
        print(res.report.summary())
        if checked is not None:
            print("check: passed" if checked else f"check: FAILED: {why}")
        if trace_path:
            print(f"trace: {trace_path} (open in https://ui.perfetto.dev or chrome://tracing)")
    return EXIT_REJECTED if checked is False else EXIT_OK


# ---- parser --------------------------------------------------------------------------------------
def _call_args(p: argparse.ArgumentParser, op_required: bool = False) -> None:
    p.add_argument("op", nargs="?", help="operator name as aclnn writes it, e.g. SiluBackward (see 'ascend-sim ops')")
    p.add_argument("--shape", action="append", default=[], metavar="[NAME=]DIMS",
                   help="tensor shape, e.g. 64,1024 (every input tensor) or input=32,64,56,56; repeatable")
    p.add_argument("--dtype", action="append", default=[], metavar="[NAME=]DTYPE",
                   help="FLOAT, FLOAT16, BF16 or DOUBLE (every tensor) or NAME=DTYPE; default FLOAT16")
    p.add_argument("--attr", action="append", default=[], metavar="NAME=VALUE",
                   help="an attribute: --attr stride=2,2 --attr groups=1 --attr outputMask=1,1,0")
    p.add_argument("--init", action="append", default=[], metavar="NAME=KIND",
                   help="how to fill a tensor: normal (default), uniform, uniform(a,b), normal(mean,std), zeros, ones")
    p.add_argument("--tiling", action="append", default=[], metavar="FIELD=VALUE",
                   help="force a tiling field (e.g. --tiling tileLength=4096); 561002 if it cannot work")
    p.add_argument("--file", metavar="CALL.yaml",
                   help="take the call from a file: one call record, or a trace with --call N")
    p.add_argument("--call", type=int, metavar="N", help="which call of the --file trace")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="ascend-sim", description="Cycle-approximate simulator of Huawei Ascend NPUs: run aclnn "
                 "operator calls, replay workload traces, guard cycle counts in CI, sweep what-if profiles "
                 "and tune tilings.",
                 epilog="Exit codes: 0 ok, 1 call rejected or kernel fault, 2 usage error, 3 cycle regression.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser("run", help="run one aclnn operator call and print its report",
                       description="Run one aclnn operator call (two-phase API on a simulated stream) and print "
                                   "its report; writes a Chrome trace.",
                       epilog="examples:\n  ascend-sim run SiluBackward --shape 64,1024 --dtype FLOAT16\n"
                              "  ascend-sim run ConvolutionBackward --shape gradOutput=8,64,56,56 --shape input=8,64,56,56 "
                              "--shape weight=64,64,3,3 --attr biasSizes=64 --attr stride=1,1 --attr padding=1,1 "
                              "--attr dilation=1,1 --attr transposed=false --attr outputPadding=0,0 --attr groups=1 "
                              "--attr outputMask=1,1,0 --attr cubeMathType=0\n"
                              "  ascend-sim run --file traces/resnet50_conv_backward.yaml --call 3 --mode timing",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _call_args(r)
    _profile_args(r)
    r.add_argument("--mode", default="functional", choices=["functional", "timing"],
                   help="functional computes the outputs; timing skips the data (same cycles)")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--trace", help="where to write the Chrome trace (default out/<op>_<soc>.trace.json)")
    r.add_argument("--no-trace", action="store_true", help="do not write a trace")
    r.set_defaults(func=cmd_run)

    o = sub.add_parser("ops", help="list the operators and their parameters")
    o.add_argument("--json", action="store_true")
    o.set_defaults(func=cmd_ops)

    c = sub.add_parser("chips", help="list chip profiles")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_chips)
    s = sub.add_parser("chip", help="show one chip profile, field by dotted path (the names --set takes)")
    s.add_argument("soc")
    s.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="show it with overrides")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_chip)
    d = sub.add_parser("diff", help="the fields in which two chip profiles differ")
    d.add_argument("soc_a", metavar="SOC_A")
    d.add_argument("soc_b", metavar="SOC_B")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_diff, set=[])

    rp = sub.add_parser("replay", help="replay a workload trace on a chip",
                        description="Replay every call of a workload trace (traces/README.md) on any SoC, with "
                                    "optional what-if overrides, in timing mode. Calls of operators not in this "
                                    "simulator are skipped with a 'not available' line.")
    rp.add_argument("trace", help="workload trace (.yaml, .json or .jsonl)")
    _profile_args(rp)
    rp.add_argument("--calls", metavar="SEL", help="only these calls, e.g. 0-5,9")
    rp.add_argument("--mode", default="timing", choices=["functional", "timing"])
    rp.add_argument("--seed", type=int, default=0)
    rp.add_argument("-o", "--output", help="write the rows (.csv, .json or .jsonl)")
    rp.add_argument("--json", action="store_true", help="print the rows as JSON")
    _exec_args(rp)
    rp.set_defaults(func=cmd_replay)

    rg = sub.add_parser("regress", help="compare a trace's cycles with its baselines (for CI)",
                        description="Replay a trace and compare each call's cycles, and the count-weighted total, "
                                    "with the baselines recorded in the trace for the SoC. Exit 3 when any call or "
                                    "the total drifts beyond the tolerance (either way); --update records the "
                                    "current cycles as the new baselines.")
    rg.add_argument("trace")
    rg.add_argument("--soc", default=DEFAULT_SOC, help=f"chip profile (default {DEFAULT_SOC})")
    rg.add_argument("--tolerance", type=float, default=0.02, help="relative drift allowed (default 0.02 = 2%%)")
    rg.add_argument("--update", action="store_true", help="rewrite the baselines for this SoC")
    rg.add_argument("--calls", metavar="SEL", help="only these calls, e.g. 0-5,9")
    rg.add_argument("--json", action="store_true")
    _exec_args(rg)
    rg.set_defaults(func=cmd_regress)

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
    sw.add_argument("--calls", metavar="SEL", help="only these calls, e.g. 0-5,9")
    sw.add_argument("-o", "--output", help="rows file: .csv, .json or .jsonl (default out/sweep_<name>.csv)")
    sw.add_argument("--plot", help="plot file: .png or .svg (cycles vs parameter, pipe breakdown, roofline)")
    sw.add_argument("--mode", default="timing", choices=["functional", "timing"])
    sw.add_argument("--seed", type=int, default=0)
    _exec_args(sw)
    sw.set_defaults(func=cmd_sweep)

    tn = sub.add_parser("tune", help="search an operator call's tiling space",
                        description="Run a call with the default planner and with every candidate tiling (the "
                                    "operator's own search space, or --space); candidates the planner rejects "
                                    "(561002) are skipped; print the best few beside the default.",
                        epilog="example:\n  ascend-sim tune SiluBackward --shape 32,96,56,56 --dtype FLOAT16 --top 5\n"
                               "  ascend-sim tune SiluBackward --shape 8,1024 --space tileLength=512,1024,2048",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _call_args(tn)
    _profile_args(tn)
    tn.add_argument("--space", action="append", default=[], metavar="FIELD=V1,V2,...",
                    help="search this grid instead of the operator's space (repeatable)")
    tn.add_argument("--top", type=int, default=5, help="how many of the best to show (default 5)")
    tn.add_argument("--json", action="store_true")
    _exec_args(tn)
    tn.set_defaults(func=cmd_tune)

    k = sub.add_parser("kernel", help="run your own kernel file (a body and a launch() function)",
                       description="Run a kernel written with simulator.kernel in your own Python file.\n\n"
                                   + KERNEL_CONVENTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    k.add_argument("file", help="your kernel file (.py)")
    _profile_args(k)
    k.add_argument("--entry", default="launch", help="the launch function's name (default launch)")
    k.add_argument("--mode", default="functional", choices=["functional", "timing"])
    k.add_argument("--json", action="store_true")
    k.add_argument("--trace", help="where to write the Chrome trace (default out/<file>_<soc>.trace.json)")
    k.add_argument("--no-trace", action="store_true")
    k.set_defaults(func=cmd_kernel)
    return ap


def main(argv: list[str] | None = None) -> int:
    debug = bool(os.environ.get("ASCEND_SIM_DEBUG"))
    try:
        ap = build_parser()
        args = ap.parse_args(argv)
        return args.func(args)
    except SystemExit:                # --help
        raise
    except (CliError, StudyError, ProfileError) as e:
        if debug:
            raise
        print(f"ascend-sim: error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except AclnnError as e:
        if debug:
            raise
        print(f"ascend-sim: call rejected: {one_line(str(e))}", file=sys.stderr)
        return EXIT_REJECTED
    except KernelError as e:
        if debug:
            raise
        print(f"ascend-sim: kernel fault: {one_line(str(e))}", file=sys.stderr)
        return EXIT_REJECTED
    except Rejected as e:
        print(f"ascend-sim: {one_line(str(e))}", file=sys.stderr)
        return EXIT_REJECTED
    except KeyboardInterrupt:
        print("ascend-sim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # never a traceback for the user
        if debug:
            raise
        print(f"ascend-sim: internal error: {type(e).__name__}: {one_line(str(e))} "
              f"(rerun with ASCEND_SIM_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return EXIT_REJECTED


if __name__ == "__main__":
    sys.exit(main())
