"""Engine speed (issue 14): wall time of three workloads in timing mode, each beside a fixed
pure-Python yardstick loop timed in the same run, so that figures taken minutes apart on a
machine whose speed drifts can still be compared (the ratio workload / yardstick).

    python benchmarks/engine_speed.py            # all three (the DETR encoder call takes minutes)
    python benchmarks/engine_speed.py --quick    # ResNet-50 trace and the GridSampler call only

Workloads (Ascend910B1, timing mode, no trace file):
  resnet50   every call of traces/resnet50_conv_backward.yaml, one after another in this process
  grid       GridSampler2DBackward N=8, C=64, 128x128 input, 128x128 grid, FLOAT, bilinear
  detr_enc   traces/deformable_detr_grid_sample_backward.yaml call 4 (encoder level 3)

Also printed: instructions executed and microseconds per instruction (the engine's cost per
instruction, the figure issue 14 sets out to cut), the ratio to BASELINE below (in yardsticks,
so a slow minute of the machine does not count), and the process's peak RSS so far (run one
workload with --only for its own peak). The goal is
every workload at least 5x faster than BASELINE in yardstick units and the DETR call under 60 s.
"""
from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

import numpy as np

# this checkout's simulator, not the installed one: a worktree of an old commit measures that commit
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import simulator  # noqa: E402
from simulator import TensorLayout, studies  # noqa: E402

SOC = "Ascend910B1"

# Measured at commit b488c43 (the engine before issue 14) on this project's 2-core VM, this
# script's own output (the yardstick loop took 0.052-0.054 s); the whole run's peak RSS was 823 MB.
BASELINE = {
    # workload: (seconds, yardsticks, instructions)
    "resnet50": (13.01, 248.4, 1_069_134),
    "grid": (24.92, 457.7, 951_479),
    "detr_enc": (411.34, 7915.8, 15_879_910),
}


def yardstick() -> float:
    """A fixed pure-Python loop (dict, list and float work, as the engine does): its time tracks
    the machine's current speed."""
    t = time.perf_counter()
    d: dict[int, float] = {}
    acc = 0.0
    for i in range(400_000):
        d[i & 1023] = d.get(i & 1023, 0.0) + i * 0.5
        acc += d.get((i * 7) & 1023, 1.0)
    assert acc > 0
    return time.perf_counter() - t


def _run_call(call) -> tuple[float, int]:
    kw = studies.build_inputs(call, data=False)
    t = time.perf_counter()
    r = simulator.run(call.op, SOC, mode="timing", trace=False, tiling=call.tiling, **kw)
    return time.perf_counter() - t, r.report.instructions


def resnet50() -> tuple[float, int]:
    w = studies.load_trace("traces/resnet50_conv_backward.yaml")
    total, instr = 0.0, 0
    for c in w.calls:
        s, n = _run_call(c)
        total += s
        instr += n
    return total, instr


def grid() -> tuple[float, int]:
    n, c, h, w = 8, 64, 128, 128
    kw = dict(gradOutput=TensorLayout((n, c, h, w), np.float32), input=TensorLayout((n, c, h, w), np.float32),
              grid=TensorLayout((n, h, w, 2), np.float32), interpolationMode=0, paddingMode=0,
              alignCorners=False, outputMask=[True, True])
    t = time.perf_counter()
    r = simulator.run("GridSampler2DBackward", SOC, mode="timing", trace=False, **kw)
    return time.perf_counter() - t, r.report.instructions


def detr_enc() -> tuple[float, int]:
    return _run_call(studies.load_trace("traces/deformable_detr_grid_sample_backward.yaml").calls[4])


WORKLOADS = {"resnet50": resnet50, "grid": grid, "detr_enc": detr_enc}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the DETR encoder call (minutes)")
    ap.add_argument("--only", choices=sorted(WORKLOADS), action="append")
    args = ap.parse_args()
    names = args.only or [n for n in WORKLOADS if not (args.quick and n == "detr_enc")]
    print(f"{'workload':10} {'seconds':>9} {'yardstick':>9} {'in yards':>9} {'instructions':>13} "
          f"{'us/instr':>8} {'vs baseline':>11} {'peak MB':>8}")
    for name in names:
        gc.collect()
        y0 = yardstick()
        secs, instr = WORKLOADS[name]()
        y1 = yardstick()
        y = (y0 + y1) / 2
        base = BASELINE.get(name)
        vs = f"{base[1] / (secs / y):.2f}x" if base else "-"
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024    # the process's so far
        print(f"{name:10} {secs:9.2f} {y:9.3f} {secs / y:9.1f} {instr:13,} {secs / instr * 1e6:8.1f} {vs:>11} "
              f"{peak:8,}", flush=True)


if __name__ == "__main__":
    main()
