"""ascend-sim: the command line.

    ascend-sim run SiluBackward --shape 64,1024 --dtype FLOAT16      # one aclnn call, its report
    ascend-sim ops                                                    # operators and parameters
    ascend-sim chips | chip Ascend910B1 | diff Ascend910B1 Ascend910B4
    ascend-sim replay traces/efficientnet_b0_silu_backward.yaml --soc Ascend910A
    ascend-sim regress traces/efficientnet_b0_silu_backward.yaml --soc Ascend910B1
    ascend-sim sweep TRACE --param device_memory.bandwidth_GBps=800,1600,3200 -o out/s.csv --plot out/s.png
    ascend-sim tune SiluBackward --shape 32,96,56,56 --dtype FLOAT16
    ascend-sim kernel my_kernel.py --soc Ascend910B4
    ascend-sim compare op_summary_0_1.csv --report out/add.json      # measured beside simulated
    ascend-sim capture train_step.py -o traces/my_model.yaml          # a trace from a PyTorch script

Exit codes: 0 success, 1 a call rejected by the operator (aclnn status) or a kernel fault,
2 a usage error (bad argument, unknown SoC / field / operator, malformed file), 3 a cycle
regression. Errors are one line; set ASCEND_SIM_DEBUG=1 to get Python's traceback instead.
The study logic (traces, sweeps, tuning) lives in simulator/studies/; the subcommands are in
call_commands, study_commands and kernel_command, what they share in common.
"""
from __future__ import annotations

import argparse
import errno
import os
import sys

from ..enums import AclnnError, KernelError
from ..outputs import OutputError
from ..profile import ProfileError
from ..studies import StudyError, one_line
from . import call_commands, kernel_command, study_commands
from .common import CliError, EXIT_OK, EXIT_REJECTED, EXIT_USAGE, Rejected, Parser, os_error

# what a write to a full, broken or closed output raises (with no file name: the standard streams)
OUTPUT_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EBADF, errno.EFBIG, errno.EDQUOT}


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: each command module adds its own subcommands."""
    ap = Parser(prog="ascend-sim", description="Cycle-approximate simulator of Huawei Ascend NPUs: run aclnn "
                 "operator calls, replay workload traces, guard cycle counts in CI, sweep what-if profiles "
                 "and tune tilings.",
                 epilog="Exit codes: 0 ok, 1 call rejected or kernel fault, 2 usage error, 3 cycle regression.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    call_commands.register(sub)
    study_commands.register(sub)
    kernel_command.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    debug = bool(os.environ.get("ASCEND_SIM_DEBUG"))
    try:
        ap = build_parser()
        argv = list(sys.argv[1:] if argv is None else argv)
        script_args: list[str] = []
        if argv[:1] == ["capture"] and "--" in argv:      # the captured script's own arguments
            cut = argv.index("--")
            argv, script_args = argv[:cut], argv[cut + 1:]
        args = ap.parse_args(argv)
        if args.command == "capture":
            args.args = script_args
        return args.func(args)
    except SystemExit:                # --help
        raise
    except (CliError, StudyError, ProfileError, OutputError) as e:
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
        if isinstance(e, OSError) and e.filename is not None:     # a path the system refuses (too long,
            print(f"ascend-sim: error: {os_error(e)}", file=sys.stderr)   # no access, a loop, a full disk)
            return EXIT_USAGE
        if isinstance(e, OSError) and e.errno in OUTPUT_ERRNOS:     # the output itself (a full disk, a
            print(f"ascend-sim: error: cannot write the output: {e.strerror}", file=sys.stderr)   # closed one)
            return EXIT_USAGE
        if isinstance(e, ValueError) and "null byte" in str(e):     # os's refusal of a path
            print("ascend-sim: error: a path given holds a NUL byte, which no file name can", file=sys.stderr)
            return EXIT_USAGE
        print(f"ascend-sim: internal error: {type(e).__name__}: {one_line(str(e))} "
              f"(rerun with ASCEND_SIM_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return EXIT_REJECTED
