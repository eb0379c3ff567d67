"""ascend-sim: the command line.

    ascend-sim run SiluBackward --shape 64,1024 --dtype FLOAT16 [--soc Ascend910B1] [--json]
    ascend-sim chips                      # list chip profiles
    ascend-sim chip Ascend910B1           # show one
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

from .enums import AclnnError, KernelError
from .profile import DEFAULT_SOC, ProfileError, list_socs, load_profile

DTYPES = {"FLOAT": np.float32, "FLOAT32": np.float32, "FLOAT16": np.float16, "HALF": np.float16,
          "BF16": ml_dtypes.bfloat16, "BFLOAT16": ml_dtypes.bfloat16, "DOUBLE": np.float64}


class CliError(Exception):
    """A bad argument: printed as one line, exit code 2."""


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.replace("x", ",").split(",") if d.strip() != "")
    except ValueError:
        raise CliError(f"--shape: '{text}' is not a comma-separated list of integers") from None
    if any(d < 0 for d in dims):
        raise CliError(f"--shape: dimensions must be >= 0, got {text}")
    return dims


def _dtype(text: str):
    try:
        return DTYPES[text.upper()]
    except KeyError:
        raise CliError(f"--dtype: unknown dtype '{text}' (use one of {', '.join(sorted(DTYPES))})") from None


def _inputs_for(op: str, args) -> dict:
    rng = np.random.default_rng(args.seed)
    dt = _dtype(args.dtype)
    if op == "SiluBackward":
        shape = _shape(args.shape)
        return {"gradOutput": rng.standard_normal(shape).astype(dt),
                "self": (rng.standard_normal(shape) * 3).astype(dt)}
    raise CliError(f"run: no command-line input builder for '{op}' yet")


def _describe(name: str, a: np.ndarray) -> str:
    if a.size == 0:
        return f"  {name}: shape {list(a.shape)} {a.dtype} (empty)"
    f = a.astype(np.float64)
    flat = ", ".join(f"{v:.6g}" for v in f.reshape(-1)[:4])
    return (f"  {name}: shape {list(a.shape)} {a.dtype}  min {f.min():.6g}  max {f.max():.6g}  "
            f"mean {f.mean():.6g}  first [{flat}{', ...' if a.size > 4 else ''}]")


def cmd_run(args) -> int:
    from .api import run
    params = _inputs_for(args.op, args)
    result = run(args.op, soc=args.soc, mode=args.mode, **params)
    trace_path = Path(args.trace) if args.trace else Path("out") / f"{args.op}_{args.soc}.trace.json"
    result.trace.save(trace_path)
    if args.json:
        out = result.report.to_dict()
        out["trace_file"] = str(trace_path)
        print(json.dumps(out, indent=2))
        return 0
    print(f"aclnn{args.op} on {args.soc}")
    print("outputs:")
    for name, a in result.outputs.items():
        print(_describe(name, a))
    print(result.report.summary())
    print(f"trace: {trace_path} (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def cmd_chips(args) -> int:
    for soc in list_socs():
        p = load_profile(soc)
        cores = ", ".join(f"{k.count} {n}" for n, k in p.cores.items())
        print(f"{soc:<13} {p.series:<9} {p.clock_mhz:>6g} MHz  {cores:<24} "
              f"{p.device_memory.bandwidth_GBps:>7g} GB/s  fp16 peak {p.peak_fp16_tflops:6.1f} TFLOPS")
    return 0


def cmd_chip(args) -> int:
    p = load_profile(args.soc)
    print(json.dumps(p.model_dump(), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ascend-sim", description="Cycle-approximate Ascend NPU simulator")
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run one aclnn operator call and print its report")
    r.add_argument("op", help="operator name as aclnn writes it, e.g. SiluBackward")
    r.add_argument("--soc", default=DEFAULT_SOC, help=f"chip profile (default {DEFAULT_SOC})")
    r.add_argument("--shape", default="64,1024", help="tensor shape, e.g. 64,1024")
    r.add_argument("--dtype", default="FLOAT16", help="FLOAT, FLOAT16 or BF16")
    r.add_argument("--mode", default="functional", choices=["functional", "timing"])
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--trace", help="where to write the Chrome trace (default out/<op>_<soc>.trace.json)")
    r.set_defaults(func=cmd_run)
    c = sub.add_parser("chips", help="list chip profiles")
    c.set_defaults(func=cmd_chips)
    s = sub.add_parser("chip", help="show one chip profile")
    s.add_argument("soc")
    s.set_defaults(func=cmd_chip)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except (CliError, ProfileError) as e:
        print(f"ascend-sim: error: {e}", file=sys.stderr)
        return 2
    except AclnnError as e:
        print(f"ascend-sim: {e}", file=sys.stderr)
        return 1
    except KernelError as e:
        print(f"ascend-sim: kernel fault: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
