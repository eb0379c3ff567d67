"""`run` (one aclnn call from --shape / --attr / --file), `ops`, `chips`, `chip`, `diff`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from ..aclnn import check_tiling_override
from ..enums import AclnnError
from ..profile import list_socs, load_profile
from .. import studies
from ..studies import Call, TensorSpec
from .common import (MODES, SEED, CliError, EXIT_OK, a_path, budget_args, check_budget, chip_profile, insight_args,
                     int_in, profile_args, save_trace, text_table, trace_path, what_if_overrides)


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


def call_from_args(args) -> Call:
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
    if shape_plain is not None and all(name in tensors for name in tensor_inputs):
        raise CliError(f"--shape {shape_plain}: {args.file or 'the call'} sets every input's shape already; "
                       f"name the one to change (--shape NAME=DIMS; inputs: {', '.join(tensor_inputs)})")
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
        init = init_named.get(p.name) or (old.init if old else p.init)
        strides = old.strides if old is not None and shape_txt is None else None   # a view stays one
        tensors[p.name] = TensorSpec(shape, studies.canonical_dtype(dt, f"--dtype {p.name}"),
                                     studies.check_init(init, f"--init {p.name}"), strides)
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
    try:                      # the tiling contract, checked here so a bad field is exit 2, not a call
        check_tiling_override(opdef, tiling)
    except AclnnError as e:
        raise CliError(f"--tiling: {e.message}") from None
    return Call(op, tensors, attrs, base.stream, base.label, base.count, tiling or None)


def describe(name: str, a: np.ndarray) -> str:
    if a.size == 0:
        return f"  {name}: shape {list(a.shape)} {a.dtype} (empty)"
    f = a.astype(np.float64)
    flat = ", ".join(f"{v:.6g}" for v in f.reshape(-1)[:4])
    return (f"  {name}: shape {list(a.shape)} {a.dtype}  min {f.min():.6g}  max {f.max():.6g}  "
            f"mean {f.mean():.6g}  first [{flat}{', ...' if a.size > 4 else ''}]")


def cmd_run(args) -> int:
    from ..api import run
    call = call_from_args(args)
    profile = chip_profile(args)
    soc = profile.soc_version
    trace_file = trace_path(args, f"{call.op}_{soc}")
    est = studies.estimate_call(call, profile, mode=args.mode)
    if args.estimate:
        return _print_estimate(call, soc, est, args.mode)
    check_budget([est], args.mode, args, fallback_bytes=call.nbytes())
    try:
        kw = studies.build_inputs(call, args.seed, data=args.mode == "functional")
    except studies.NotAvailable as e:
        raise CliError(str(e)) from None
    show = est is not None and est.seconds(args.mode) > 3 and sys.stderr.isatty()
    result = run(call.op, mode=args.mode, profile=profile,
                 trace=trace_file is not None or bool(args.lines) or bool(args.msprof_out), msprof_out=args.msprof_out,
                 tiling=call.tiling, progress=est.instructions if show else None, warmup=args.warmup, **kw)
    if args.json:
        out = result.report.to_dict()
        out["call"] = call.to_record()
        if args.set:
            out["overrides"] = what_if_overrides(args)
        out["trace_file"] = str(trace_file) if trace_file else None
        print(json.dumps(out, indent=2))
        save_trace(result.trace, trace_file, announce=False, layout=args.trace_layout)
        return EXIT_OK
    print(f"aclnn{call.op} on {soc}" + (f" (with {', '.join(args.set)})" if args.set else ""))
    dts = sorted({t.dtype for t in call.tensors.values()})
    print(f"call: {call.shapes()} {'/'.join(dts)}" + "".join(f" {k}={v}" for k, v in call.attrs.items())
          + ("".join(f" tiling.{k}={v}" for k, v in call.tiling.items()) if call.tiling else ""))
    if result.outputs and args.mode == "functional":
        print("outputs:")
        for name, a in result.outputs.items():
            print(describe(name, a))
    print(result.report.summary())
    if args.lines:
        print(f"  hottest source lines of the operator's kernels (of {len(result.report.lines)} kept)")
        print(result.report.lines_table(args.lines))
    save_trace(result.trace, trace_file, layout=args.trace_layout)
    if args.msprof_out:
        print(f"msprof files: {args.msprof_out} (docs/OUTPUTS.md)")
    return EXIT_OK


def _print_estimate(call: Call, soc: str, est, mode: str) -> int:
    if est is None:
        raise CliError(f"{call.op}: no estimate: the call does not plan (run it to see why)")
    print(f"estimate of aclnn{call.op} {call.shapes()} on {soc} ({mode} mode), from its plan:")
    what = "instructions simulated" if mode == "fast" else "instructions"
    why = " (fast mode records no skipped iteration)" if mode == "fast" else ""
    for name, blocks, n in est.launches:
        print(f"  {name}: {blocks} blocks, {n:,} {what}")
    print(f"  total {est.instructions:,} {what}{why}, about {est.seconds(mode):,.1f} s of simulation; "
          f"tensors {est.tensor_bytes:,} B, workspace {est.workspace_bytes:,} B, host memory "
          f"{est.host_bytes(mode):,} B")
    return EXIT_OK


def cmd_ops(args) -> int:
    from .. import aclnn
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
    p = chip_profile(args, args.soc)
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
    a, b = chip_profile(args, args.soc_a), chip_profile(args, args.soc_b)
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
    print(text_table(rows, ["field", args.soc_a, args.soc_b]))
    print(f"{len(keys)} field(s) differ")
    return EXIT_OK


def call_args(p: argparse.ArgumentParser, op_required: bool = False) -> None:
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
    p.add_argument("--call", type=int_in(0, 10 ** 9), metavar="N", help="which call of the --file trace")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the random inputs (default 0)")


def register(sub) -> None:
    """Add `run`, `ops`, `chips`, `chip` and `diff`."""
    _add_run(sub)
    _add_listings(sub)


def _add_run(sub) -> None:
    """`run`: one aclnn call, its report, trace and msprof files."""
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
    call_args(r)
    profile_args(r)
    r.add_argument("--mode", default="functional", choices=MODES,
                   help="functional computes the outputs; timing skips the data (same cycles); fast also "
                        "fast-forwards declared loops, within the bound it reports")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--trace", type=a_path, help="where to write the Chrome trace (default out/<op>_<soc>.trace.json)")
    r.add_argument("--no-trace", action="store_true", help="do not write a trace")
    insight_args(r)
    r.add_argument("--warmup", type=int_in(0, 16), default=0,
                   help="run the call this many times first on the same device and report the run after them "
                        "(what fits the L2 is then warm, as in a benchmark that repeats the call)")
    r.add_argument("--estimate", action="store_true",
                   help="print the estimate (instructions per launch, memory, time) from the plan and stop")
    budget_args(r)
    r.set_defaults(func=cmd_run)


def _add_listings(sub) -> None:
    """`ops`, `chips`, `chip` and `diff`: what the simulator has, without running anything."""
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
