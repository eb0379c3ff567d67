"""Fast mode against the exact engine, call by call: cycles, error, stated bound, speed.

    python benchmarks/fast_mode.py                       # every call of every shipped trace, Ascend910B1 and Ascend910A
    python benchmarks/fast_mode.py --soc Ascend910B1 --trace traces/silu_smoke.jsonl --calls 0-2
    python benchmarks/fast_mode.py --skip-exact          # fast only, the exact cycles from the traces' baselines
    python benchmarks/fast_mode.py --pins tests/fixtures/cycle_pins.txt   # fast only, every chip, exact from the pins
    python benchmarks/fast_mode.py --audit               # also audit the exact runs' Loops (their times then include it)
    python benchmarks/fast_mode.py --soc Ascend910B1 --trace traces/silu_smoke.jsonl --calls 4 --repeat 7
                                                         # GridSampler N8's speed: 7 more pairs, CPU medians

For each call: the exact engine's cycles (timing mode, or the trace's recorded baseline with
--skip-exact), fast mode's, the error |fast - exact| / exact, the bound fast mode states, the
share of instructions it simulated, and both wall times measured here, one after the other, in
this process (their ratio is the speed-up). With --repeat K those first runs are warm-ups, and K
pairs (exact, then fast) follow in CPU seconds: the times printed are the pairs' medians and the
speed-up the median of their ratios, with its range (the exact run alone moves by 5-10 % from one
run to the next on a shared machine; one pair cannot tell 7.6x from 8x). The exact runs of the
DETR encoder calls take minutes each. Runs from any directory.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # this checkout's simulator, not the installed one

import simulator  # noqa: E402
from simulator import studies  # noqa: E402
from simulator.enums import AclnnError  # noqa: E402
from simulator.kernel import audit_loops  # noqa: E402
from simulator.profile import load_profile  # noqa: E402

TRACES = ("silu_smoke.jsonl", "efficientnet_b0_silu_backward.yaml", "resnet50_conv_backward.yaml",
          "fconv_wmt_en_de_conv_tbc_backward.yaml", "deformable_detr_grid_sample_backward.yaml")


def timed(call, soc: str, mode: str, clock=time.perf_counter):
    t = clock()
    r = simulator.run(call.op, soc, mode=mode, trace=False, tiling=call.tiling,
                      **studies.build_inputs(call, data=False))
    return r.report, clock() - t


def repeated(call, soc: str, pairs: int) -> tuple[float, float, float, float, float]:
    """`pairs` runs of each mode in turn (exact, then fast), in CPU seconds: the median exact and
    fast times, and the median, least and greatest of the pairs' ratios."""
    times = [(timed(call, soc, "timing", time.process_time)[1], timed(call, soc, "fast", time.process_time)[1])
             for _ in range(pairs)]
    ratios = [e / f for e, f in times]
    return (statistics.median(e for e, _ in times), statistics.median(f for _, f in times),
            statistics.median(ratios), min(ratios), max(ratios))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--soc", action="append", help="chip (repeatable; default Ascend910B1 and Ascend910A)")
    ap.add_argument("--trace", action="append", help="trace file (repeatable; default every shipped trace)")
    ap.add_argument("--calls", help="only these calls, e.g. 0-3,7")
    ap.add_argument("--skip-exact", action="store_true", help="take the exact cycles from the trace's baselines")
    ap.add_argument("--pins", help="take the exact cycles from a cycle-pins file (tests/fixtures/cycle_pins.txt "
                                   "pins every shipped trace's calls on every chip); without --soc, its chips")
    ap.add_argument("--audit", action="store_true",
                    help="audit the exact runs' Loops (simulator.kernel.audit_loops): findings are printed and fail "
                         "the run; the exact times then include the audit's cost")
    ap.add_argument("--repeat", type=int, default=0, metavar="K",
                    help="after the first runs (warm-ups), K more pairs in this process, CPU seconds: medians")
    args = ap.parse_args()
    if args.audit and (args.skip_exact or args.pins):
        ap.error("--audit audits the exact runs, which --skip-exact and --pins leave out")
    if args.repeat and (args.skip_exact or args.pins or args.audit):
        ap.error("--repeat times exact runs unaudited, which --skip-exact, --pins and --audit leave out")
    if args.repeat < 0:
        ap.error(f"--repeat must be >= 0, got {args.repeat}")
    pins = read_pins(args.pins) if args.pins else None
    socs = args.soc or (sorted({soc for _, _, soc in pins}) if pins else ["Ascend910B1", "Ascend910A"])
    traces = args.trace or [str(ROOT / "traces" / t) for t in TRACES]
    print(f"{'call':<52} {'exact':>14} {'fast':>14} {'error':>8} {'bound':>7} {'sim':>6} "
          f"{'exact s':>8} {'fast s':>7} {'x':>6}")
    worst = (0.0, "")
    outside = audits = beyond = 0
    for soc in socs:
        profile = load_profile(soc)
        for path in traces:
            w = studies.load_trace(path)
            baselines = (w.baselines.get(soc) or {}).get("calls")
            for i in w.select(args.calls):
                call = w.calls[i]
                tag = f"{Path(path).stem[:30]}[{i}] {call.op[:12]}@{soc}"
                if not profile.supports(call.op):
                    continue
                try:
                    fast, t_fast = timed(call, soc, "fast")
                except AclnnError as e:          # the chip refuses the call (a dtype it lacks)
                    print(f"{tag:<52} refused: {e.status}")
                    continue
                if pins is not None:
                    exact_cycles, t_exact = pins.get((Path(path).name, i, soc)), float("nan")
                    if exact_cycles is None:
                        print(f"{tag:<52} no pin on this chip")
                        continue
                elif args.skip_exact:
                    if not baselines:
                        print(f"{tag:<52} no baseline on this chip")
                        continue
                    exact_cycles, t_exact = baselines[i], float("nan")
                else:
                    with audit_loops() if args.audit else contextlib.nullcontext() as findings:
                        exact, t_exact = timed(call, soc, "timing")
                    exact_cycles = exact.cycles
                    for line in findings or ():
                        print(f"{tag:<52} loop audit: {line}")
                    audits += len(findings or ())
                err = abs(fast.cycles - exact_cycles) / exact_cycles if exact_cycles else 0.0
                f = fast.fast
                if abs(fast.cycles - exact_cycles) > f["bound_cycles"] + 1e-6 * exact_cycles:
                    outside += 1
                if err > worst[0]:
                    worst = (err, tag)
                beyond += err > 0.02
                speed, spread = t_exact / t_fast, ""
                if args.repeat:
                    t_exact, t_fast, speed, low, high = repeated(call, soc, args.repeat)
                    spread = f"  ({low:.2f}-{high:.2f}x over {args.repeat} pairs, CPU s)"
                print(f"{tag:<52} {exact_cycles:>14,.0f} {fast.cycles:>14,.0f} {err:>8.3%} "
                      f"{f['bound_fraction']:>7.2%} {f['simulated_fraction']:>6.1%} {t_exact:>8.2f} {t_fast:>7.2f} "
                      f"{speed:>6.2f}{spread}", flush=True)
    print(f"worst error {worst[0]:.3%} ({worst[1]}); {outside} call(s) outside their stated bound, "
          f"{beyond} beyond 2 % of exact"
          + (f"; {audits} loop audit finding(s)" if args.audit else ""))
    return 1 if outside or audits else 0


def read_pins(path: str) -> dict:
    """(trace file name, call, SoC) -> the exact engine's cycles, from a cycle-pins file
    (engine_fingerprint's format; refused calls left out)."""
    from engine_fingerprint import read_pins as read_pin_file
    pins = {}
    for tag, pin in read_pin_file(path).items():
        if pin.refused is None:
            name, rest = tag.split("[", 1)
            call, soc = rest.split("]@")
            pins[name, int(call), soc] = float(pin.cycles)
    return pins


if __name__ == "__main__":
    sys.exit(main())
