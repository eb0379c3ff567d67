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
import os
import sys

from ..enums import AclnnError, KernelError
from ..outputs import OutputError
from ..profile import DEFAULT_SOC, ProfileError
from ..studies import StudyError, one_line
from .call_commands import call_args, cmd_chip, cmd_chips, cmd_diff, cmd_ops, cmd_run
from .common import (SEED, CliError, EXIT_OK, EXIT_REJECTED, EXIT_USAGE, Rejected, Parser, exec_args, float_in,
                     budget_args, int_in, profile_args)
from ..studies.whatif import MAX_SWEEP_POINTS
from .kernel_command import KERNEL_CONVENTION, cmd_kernel
from .study_commands import cmd_capture, cmd_compare, cmd_regress, cmd_replay, cmd_sweep, cmd_tune


def insight_args(p: argparse.ArgumentParser) -> None:
    """The views of one run beyond its report: the trace's layout, msprof's files, hot lines."""
    p.add_argument("--trace-layout", choices=["core", "pipe"], default="core",
                   help="core: a process per core (default); pipe: a process per pipe with flag arrows, "
                        "as msprof op simulator draws it")
    p.add_argument("--msprof-out", metavar="DIR",
                   help="also write msprof's files for the run there (OPPROF_*/ per launch, op_summary, "
                        "msKPP's Pipe_statistic.csv; docs/OUTPUTS.md)")
    p.add_argument("--lines", type=int_in(1, 1000), nargs="?", const=10, default=0, metavar="N",
                   help="also print the N (default 10) kernel source lines that cost the most cycles")


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="ascend-sim", description="Cycle-approximate simulator of Huawei Ascend NPUs: run aclnn "
                 "operator calls, replay workload traces, guard cycle counts in CI, sweep what-if profiles "
                 "and tune tilings.",
                 epilog="Exit codes: 0 ok, 1 call rejected or kernel fault, 2 usage error, 3 cycle regression.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

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
    r.add_argument("--mode", default="functional", choices=["functional", "timing"],
                   help="functional computes the outputs; timing skips the data (same cycles)")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--trace", help="where to write the Chrome trace (default out/<op>_<soc>.trace.json)")
    r.add_argument("--no-trace", action="store_true", help="do not write a trace")
    insight_args(r)
    r.add_argument("--estimate", action="store_true",
                   help="print the estimate (instructions per launch, memory, time) from the plan and stop")
    budget_args(r)
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
    profile_args(rp)
    rp.add_argument("--calls", metavar="SEL", help="only these calls, e.g. 0-5,9")
    rp.add_argument("--mode", default="timing", choices=["functional", "timing"])
    rp.add_argument("--seed", type=SEED, default=0)
    rp.add_argument("-o", "--output", help="write the rows (.csv, .json or .jsonl); each row is also "
                                            "journaled as it finishes in OUTPUT.partial.jsonl")
    rp.add_argument("--resume", action="store_true",
                    help="keep the rows an interrupted run journaled for -o and run only the rest")
    rp.add_argument("--json", action="store_true", help="print the rows as JSON")
    rp.add_argument("--msprof-out", metavar="DIR",
                    help="also write msprof's files for each call under DIR/call<N>/ (the calls run once "
                         "more, in this process; docs/OUTPUTS.md)")
    budget_args(rp)
    exec_args(rp)
    rp.set_defaults(func=cmd_replay)

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
    rg.add_argument("--json", action="store_true")
    exec_args(rg)
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
    sw.add_argument("--seed", type=SEED, default=0)
    sw.add_argument("--max-points", type=int_in(1, 10 ** 7), default=MAX_SWEEP_POINTS,
                    help=f"the sweep's budget: refuse a grid of more points (default {MAX_SWEEP_POINTS:,})")
    sw.add_argument("--resume", action="store_true",
                    help="keep the rows an interrupted sweep journaled (OUTPUT.partial.jsonl), run only the rest")
    budget_args(sw)
    exec_args(sw)
    sw.set_defaults(func=cmd_sweep)

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
    tn.add_argument("--json", action="store_true")
    exec_args(tn)
    tn.set_defaults(func=cmd_tune)

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
    cp.add_argument("--report", required=True, help="the simulated report: JSON from 'run --json' or 'kernel --json'")
    cp.add_argument("--op-name", help="the op_summary row to use (its Op Name or OP Type) when there are several")
    cp.add_argument("--json", action="store_true", help="print the rows as JSON")
    cp.set_defaults(func=cmd_compare)

    ca = sub.add_parser("capture", help="run a PyTorch script and write the workload trace of its calls",
                        description="Run a Python script (a PyTorch model's forward and backward) under "
                                    "simulator.capture(): the aten calls that map to our operators "
                                    "(convolution_backward, silu_backward, grid_sampler_2d_backward, "
                                    "conv_tbc_backward) become a workload trace for replay, sweep and regress; "
                                    "the summary ranks the calls it could not map by their share of FLOPs "
                                    "and bytes. Needs torch.",
                        epilog="example:\n  ascend-sim capture my_train_step.py -o traces/my_model.yaml -- --batch 8\n"
                               "  ascend-sim replay traces/my_model.yaml --soc Ascend910B1",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ca.add_argument("script", help="the Python script to run (as python SCRIPT ARGS would); its own "
                                   "arguments go after --")
    ca.add_argument("-o", "--output", help="the trace to write (.yaml, .jsonl or .json; default out/<script>.yaml)")
    ca.add_argument("--name", help="the trace's name (default: the script's)")
    ca.set_defaults(func=cmd_capture)

    k = sub.add_parser("kernel", help="run your own kernel file (a body and a launch() function)",
                       description="Run a kernel written with simulator.kernel in your own Python file.\n\n"
                                   + KERNEL_CONVENTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    k.add_argument("file", help="your kernel file (.py)")
    profile_args(k)
    k.add_argument("--entry", default="launch", help="the launch function's name (default launch)")
    k.add_argument("--mode", default="functional", choices=["functional", "timing"])
    k.add_argument("--json", action="store_true")
    k.add_argument("--trace", help="where to write the Chrome trace (default out/<file>_<soc>.trace.json)")
    k.add_argument("--no-trace", action="store_true")
    insight_args(k)
    k.add_argument("--warmup", type=int_in(0, 16), default=0,
                   help="run the kernel this many times first and report the run after them: its data is then "
                        "warm in L2, as on the board after the host-to-device copies that precede a kernel")
    k.set_defaults(func=cmd_kernel)
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
        print(f"ascend-sim: internal error: {type(e).__name__}: {one_line(str(e))} "
              f"(rerun with ASCEND_SIM_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return EXIT_REJECTED
