"""`kernel FILE.py`: run a user's own kernel file (a body and `launch(profile)`).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import json
import signal
import sys
import threading
import time
from pathlib import Path

from ..enums import AclnnError, KernelError, Unwind, raised_by_user
from ..inputs import number, read_text
from ..kernel.loop_audit import audit_loops
from ..studies import one_line
from .call_commands import describe
from .common import (DEFAULT_BUDGET_SECONDS, EXIT_OK, EXIT_REJECTED, MODES, CliError, Rejected, a_path, chip_profile,
                     float_in, insight_args, int_in, profile_args, save_trace, trace_path, user_error)


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
    if path.suffix != ".py":
        raise CliError(f"{path}: a kernel file is a Python file (.py)")
    read_text(path, error=CliError)         # a folder, a device, binary: one line before Python sees it
    name = f"ascend_sim_user_kernel_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise CliError(f"{path}{f':{e.lineno}' if e.lineno else ''}: syntax error: {e.msg}") from None
    except BaseException as e:
        if not raised_by_user(e):
            raise
        raise CliError(f"{path}: importing it raised {user_error(e, path)}") from None
    finally:
        sys.path.pop(0)
    return mod


def cmd_kernel(args) -> int:
    from ..api import KernelArgumentError, KernelBodyError, run_kernel
    path = Path(args.file)
    profile = chip_profile(args)
    trace_file = trace_path(args, f"{path.stem}_{profile.soc_version}")
    if args.audit_loops and args.mode == "fast":
        raise CliError("--audit-loops checks a kernel's Loop keys and periods in an exact mode "
                       "(functional or timing), not in fast mode")
    if args.msprof_out:                  # the caller's path, checked before the kernel runs
        from ..outputs import check_output
        check_output(Path(args.msprof_out) / "op_summary.csv", "--msprof-out")
    mod = _bounded(args, path, "importing it", _load_kernel_file, path)
    spec, kind, block_dim = _bounded(args, path, f"its {args.entry}()", _launch_spec, mod, profile, path, args)
    audit = audit_loops() if args.audit_loops else contextlib.nullcontext()
    try:
        with _quiet(args), _time_budget(args.budget_seconds), audit as findings:
            res = run_kernel(spec["body"], block_dim, spec["args"], kind=kind, profile=profile,
                             mode=args.mode, name=spec.get("name"),
                             trace=trace_file is not None or bool(args.lines) or bool(args.msprof_out),
                             warmup=args.warmup, msprof_out=args.msprof_out)
    except _OutOfTime:
        raise CliError(f"{path}: the kernel ran past the budget of {args.budget_seconds:g} s of simulation and "
                       f"was stopped: give --budget-seconds to allow more (does its body end?)") from None
    except KernelBodyError as e:
        raise Rejected(f"{path}: the kernel raised {e}") from None
    except KernelArgumentError as e:
        raise CliError(f"{path}: {args.entry}() returned {e}") from None
    except (KernelError, AclnnError):
        raise
    except BaseException as e:
        if not raised_by_user(e):
            raise
        raise Rejected(f"{path}: the kernel raised {user_error(e, path)}") from None
    checked, why = _bounded(args, path, "its check()", _run_check, mod, res, path, args)
    if args.json:
        out = res.report.to_dict()
        out["check"] = checked
        if args.audit_loops:
            out["loop_audit"] = {"findings": list(findings), "loops": findings.loops,
                                 "skippable": findings.skippable}
        out["trace_file"] = str(trace_file) if trace_file else None
        print(json.dumps(out, indent=2))
    else:
        print(f"kernel {spec.get('name') or getattr(spec['body'], '__name__', 'kernel')} from {path} "
              f"on {profile.soc_version}: {block_dim} blocks on {kind} cores")
        _print_result(res, args)
        if checked is not None:
            print("check: passed" if checked else f"check: FAILED: {why}")
        if args.audit_loops:
            _print_audit(findings)
    save_trace(res.trace, trace_file, announce=not args.json, layout=args.trace_layout)
    if args.msprof_out and not args.json:
        print(f"msprof files: {args.msprof_out} (docs/OUTPUTS.md)")
    if checked is False:                 # the exit says it failed; stderr says why, as every error does
        print(f"ascend-sim: {path}: check() failed: {why}", file=sys.stderr)
    return EXIT_REJECTED if checked is False or (args.audit_loops and findings) else EXIT_OK


# the launcher's limit: CANN's blockDim is at most 65535
MAX_BLOCK_DIM = 65535


class _OutOfTime(Unwind):
    """Raised in the main thread when the kernel's time budget is spent: a BaseException, so
    that neither the engine nor a user's `except Exception` takes it for a fault of theirs."""


@contextlib.contextmanager
def _time_budget(seconds: float):
    """A wall-clock limit on what runs inside (SIGALRM; without it - not the main thread, no
    signals - the run is unlimited, as the API's is)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def out_of_time(signum, frame):
        raise _OutOfTime()
    old_handler = signal.signal(signal.SIGALRM, out_of_time)
    # repeating: the engine may take the first for a block's failure and go on with the next block
    old_delay, _ = signal.setitimer(signal.ITIMER_REAL, seconds, 0.25)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay:                     # an outer timer keeps what it had left
            signal.setitimer(signal.ITIMER_REAL, max(old_delay - (time.monotonic() - started), 1e-3))


def _bounded(args, path: Path, what: str, fn, *fn_args):
    """fn(*fn_args) within the time budget: the file's import, launch() and check() are the
    user's code as much as the body is, and may not end either."""
    try:
        with _time_budget(args.budget_seconds):
            return fn(*fn_args)
    except _OutOfTime:
        raise CliError(f"{path}: {what} ran past the budget of {args.budget_seconds:g} s and was stopped: "
                       f"give --budget-seconds to allow more (does it end?)") from None


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
    except BaseException as e:
        if not raised_by_user(e):
            raise
        raise Rejected(f"{path}: {args.entry}() raised {user_error(e, path)}") from None
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
    block_dim = number(spec["block_dim"], f"{path}: 'block_dim'", lo=1, hi=MAX_BLOCK_DIM, integral=True,
                       error=CliError)
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
    except BaseException as e:
        if not raised_by_user(e):
            raise
        return False, user_error(e, path)


def _print_audit(findings) -> None:
    """--audit-loops: the findings, or that there were none, and how many Loops (per block) had a
    run long enough for fast mode to skip a part (a warm-up, two windows and as much again)."""
    if not findings.loops:
        print("loop audit: the kernel ran no Loop")
        return
    runs = f"{findings.loops} Loop(s) over the blocks, {findings.skippable} with a run long enough for fast mode to skip"
    if findings:
        print(f"loop audit: {len(findings)} finding(s) in {runs}" + "".join(f"\n  {f}" for f in findings))
    elif findings.skippable:
        print(f"loop audit: {runs}; every key and period holds")
    else:
        print(f"loop audit: {runs}: nothing to check")


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
    k.add_argument("--trace", type=a_path, help="where to write the Chrome trace (default out/<file>_<soc>.trace.json)")
    k.add_argument("--no-trace", action="store_true")
    insight_args(k)
    k.add_argument("--warmup", type=int_in(0, 16), default=0,
                   help="run the kernel this many times first and report the run after them: its data is then "
                        "warm in L2, as on the board after the host-to-device copies that precede a kernel")
    k.add_argument("--audit-loops", action="store_true",
                   help="check that each Loop's key and period say what its iterations do (what fast mode "
                        "takes on trust between its windows); findings fail the run (exit 1). Exact modes only")
    k.add_argument("--budget-seconds", type=float_in(0.001, 1e9), default=DEFAULT_BUDGET_SECONDS, metavar="S",
                   help=f"stop the kernel (exit 2) once it has run this long (default {DEFAULT_BUDGET_SECONDS:g} s): "
                        f"a body that never ends, or far more blocks than meant; the file's import, launch() "
                        f"and check() each get as long")
    k.set_defaults(func=cmd_kernel)
