"""Engine fingerprints: one line per call with its cycles (repr, every bit), its instruction count,
a hash of its whole report and a hash of its sorted per-instruction trace (core, pipe, name, start,
duration, device-memory bytes). An engine change that claims not to move a cycle must print the
same lines before and after (issue 14):

    python benchmarks/engine_fingerprint.py --set quick > before.txt    # at the old commit
    python benchmarks/engine_fingerprint.py --set quick --against before.txt

Sets (timing mode, traces from traces/): quick (silu_smoke on three chips, DETR call 0, ResNet-50
calls 0 and 7; ~30 s) and full (fconv, EfficientNet, silu_smoke on three chips, ResNet-50 calls
on Ascend910A, DETR calls 0-3, GridSampler 2x64x64x64 on two chips; ~2 min). Run from the
repository root.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

# this checkout's simulator, not the installed one: a worktree of an old commit measures that commit
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import simulator  # noqa: E402
from simulator import TensorLayout, studies  # noqa: E402


def fingerprint(tag: str, result) -> str:
    report = result.report.to_dict()
    report.pop("trace", None)
    report.pop("lines", None)       # source line numbers: a refactor moves them, the cycles stay
    rh = hashlib.sha1(json.dumps(report, sort_keys=True, default=str).encode()).hexdigest()[:12]
    th = "-"
    if result.report.trace is not None:
        th = hashlib.sha1(repr(sorted(result.report.trace.rec.trace)).encode()).hexdigest()[:12]
    return f"{tag} {result.report.cycles!r} {result.report.instructions} {rh} {th}"


def trace_calls(path: str, soc: str, only: set[int] | None = None):
    for i, call in enumerate(studies.load_trace(path).calls):
        if only is not None and i not in only:
            continue
        tag = f"{path.split('/')[-1]}[{i}]@{soc}"
        try:
            r = simulator.run(call.op, soc, mode="timing", trace=True, tiling=call.tiling,
                              **studies.build_inputs(call, data=False))
        except Exception as e:              # a call the chip refuses is part of the fingerprint
            yield f"{tag} refused {type(e).__name__}"
            continue
        yield fingerprint(tag, r)


def grid_call(soc: str):
    n, c, h, w = 2, 64, 64, 64
    kw = dict(gradOutput=TensorLayout((n, c, h, w), np.float32), input=TensorLayout((n, c, h, w), np.float32),
              grid=TensorLayout((n, h, w, 2), np.float32), interpolationMode=0, paddingMode=0,
              alignCorners=False, outputMask=[True, True])
    yield fingerprint(f"grid2x64x64x64@{soc}",
                      simulator.run("GridSampler2DBackward", soc, mode="timing", trace=True, **kw))


SMOKE_CHIPS = ("Ascend910B1", "Ascend910A", "Ascend310P3")


def quick():
    for soc in SMOKE_CHIPS:
        yield from trace_calls("traces/silu_smoke.jsonl", soc)
    yield from trace_calls("traces/deformable_detr_grid_sample_backward.yaml", "Ascend910B1", {0})
    yield from trace_calls("traces/resnet50_conv_backward.yaml", "Ascend910B1", {0, 7})


def full():
    yield from trace_calls("traces/fconv_wmt_en_de_conv_tbc_backward.yaml", "Ascend910B1")
    yield from trace_calls("traces/efficientnet_b0_silu_backward.yaml", "Ascend910B1")
    for soc in SMOKE_CHIPS:
        yield from trace_calls("traces/silu_smoke.jsonl", soc)
    yield from trace_calls("traces/resnet50_conv_backward.yaml", "Ascend910A", {0, 5, 11, 20})
    yield from trace_calls("traces/deformable_detr_grid_sample_backward.yaml", "Ascend910B1", {0, 1, 2, 3})
    for soc in ("Ascend910B1", "Ascend910A"):
        yield from grid_call(soc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("quick", "full"), default="quick")
    ap.add_argument("--against", help="a file of earlier output: print only the lines that differ")
    args = ap.parse_args()
    lines = list(quick() if args.set == "quick" else full()) if args.against else None
    if lines is None:
        for line in (quick() if args.set == "quick" else full()):
            print(line, flush=True)
        return 0
    with open(args.against) as f:
        before = [ln.rstrip("\n") for ln in f if ln.strip()]
    differ = [(a, b) for a, b in zip(before, lines) if a != b]
    if len(before) != len(lines):
        differ.append((f"{len(before)} lines", f"{len(lines)} lines"))
    for a, b in differ:
        print(f"- {a}\n+ {b}")
    print(f"{len(lines)} calls, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
