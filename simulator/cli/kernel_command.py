"""`kernel FILE.py`: run a user's own kernel file (a body and `launch(profile)`).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import json
import sys
import traceback
from pathlib import Path

from ..enums import AclnnError, KernelError
from ..studies import one_line
from .call_commands import describe
from ..acl import MODES
from .common import (CliError, EXIT_OK, EXIT_REJECTED, Rejected, chip_profile, insight_args, int_in, profile_args,
                     save_trace, trace_path)


KERNEL_CONVENTION = """\
A kernel file is plain Python that defines:

  launch(profile) -> dict     (or launch() with no argument)
      returns {"body": <kernel function>, "block_dim": <int>, "args": {<name>: <value>},
               "kind": "vector" | "cube" | "mix" (default "vector"), "name": <str, optional>}
      Array values in args become GM_ADDR pointers to device copies; other values (a tiling
      struct, ints) are passed as they are. The body is called once per block as body(*args.values()).
  check(outputs) -> None      (optional)
      gets {<name>: array after the kernel}; raise AssertionError (or return False) to fail.

See examples/kernels/axpy.py and examples/kernels/add_sample.py."""


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
    from ..api import run_kernel
    path = Path(args.file)
    profile = chip_profile(args)
    trace_file = trace_path(args, f"{path.stem}_{profile.soc_version}")
    mod = _load_kernel_file(path)
    spec, kind, block_dim = _launch_spec(mod, profile, path, args)
    try:
        with _quiet(args):
            res = run_kernel(spec["body"], block_dim, spec["args"], kind=kind, profile=profile,
                             mode=args.mode, name=spec.get("name"),
                             trace=trace_file is not None or bool(args.lines) or bool(args.msprof_out),
                             warmup=args.warmup, msprof_out=args.msprof_out)
    except (KernelError, AclnnError):
        raise
    except Exception as e:
        raise Rejected(f"{path}: the kernel raised {_user_error(e, path)}") from None
    checked, why = _run_check(mod, res, path, args)
    if args.json:
        out = res.report.to_dict()
        out["check"] = checked
        out["trace_file"] = str(trace_file) if trace_file else None
        print(json.dumps(out, indent=2))
    else:
        print(f"kernel {spec.get('name') or getattr(spec['body'], '__name__', 'kernel')} from {path} "
              f"on {profile.soc_version}: {block_dim} blocks on {kind} cores")
        _print_result(res, args)
        if checked is not None:
            print("check: passed" if checked else f"check: FAILED: {why}")
    save_trace(res.trace, trace_file, announce=not args.json, layout=args.trace_layout)
    if args.msprof_out and not args.json:
        print(f"msprof files: {args.msprof_out} (docs/OUTPUTS.md)")
    return EXIT_REJECTED if checked is False else EXIT_OK


def _quiet(args):
    """With --json, what the user's code prints goes to stderr so that stdout stays JSON."""
    return contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()


def _launch_spec(mod, profile, path: Path, args) -> tuple[dict, str, int]:
    """Call the file's launch function and check what it returns: (spec, core kind, block count)."""
    launch = getattr(mod, args.entry, None)
    if not callable(launch):
        raise CliError(f"{path}: defines no {args.entry}() function (see 'ascend-sim kernel --help' "
                       f"for the convention)")
    try:
        nparams = len(inspect.signature(launch).parameters)
        with _quiet(args):
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
    return spec, kind, block_dim


def _run_check(mod, res, path: Path, args) -> tuple[bool | None, str]:
    """The file's optional check(outputs), functional mode only: (passed, or None if not run; why not)."""
    check = getattr(mod, "check", None)
    if not callable(check) or args.mode != "functional":
        return None, ""
    try:
        with _quiet(args):
            ok = check(res.outputs)
        return ok is not False, "check() returned False"
    except AssertionError as e:
        return False, one_line(str(e)) or "assertion failed"
    except Exception as e:
        return False, _user_error(e, path)


def _print_result(res, args) -> None:
    """The arrays after the kernel (functional mode), the report and the hottest lines."""
    if args.mode == "functional":
        print("arrays after the kernel:")
        for k, a in res.outputs.items():
            print(describe(k, a))
    print(res.report.summary())
    if args.lines:
        print(f"  hottest source lines (of {len(res.report.lines)} kept)")
        print(res.report.lines_table(args.lines))


def register(sub) -> None:
    """Add `kernel`."""
    _add_kernel(sub)


def _add_kernel(sub) -> None:
    """`kernel FILE.py`: a user's own kernel file."""
    k = sub.add_parser("kernel", help="run your own kernel file (a body and a launch() function)",
                       description="Run a kernel written with simulator.kernel in your own Python file.\n\n"
                                   + KERNEL_CONVENTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    k.add_argument("file", help="your kernel file (.py)")
    profile_args(k)
    k.add_argument("--entry", default="launch", help="the launch function's name (default launch)")
    k.add_argument("--mode", default="functional", choices=MODES)
    k.add_argument("--json", action="store_true")
    k.add_argument("--trace", help="where to write the Chrome trace (default out/<file>_<soc>.trace.json)")
    k.add_argument("--no-trace", action="store_true")
    insight_args(k)
    k.add_argument("--warmup", type=int_in(0, 16), default=0,
                   help="run the kernel this many times first and report the run after them: its data is then "
                        "warm in L2, as on the board after the host-to-device copies that precede a kernel")
    k.set_defaults(func=cmd_kernel)
