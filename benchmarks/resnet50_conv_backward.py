"""ResNet-50 convolution backward: every distinct conv layer shape, batch 32, FP16, on
Ascend910B1 in timing-only mode (plus, with --torch-compare, functional mode against torch).

    python benchmarks/resnet50_conv_backward.py [--soc Ascend910B1] [--batch 32] [--layers N]
    python benchmarks/resnet50_conv_backward.py --torch-compare      # also N=8 C=64 56x56 3x3 vs torch

Per layer: cycles, microseconds, cube utilisation (the layer's real MACs over the chip's FP16
MAC rate x cycles), the same over the Cube launch alone (its 2 us start-up included: the figure
to set beside the single-launch GEMM of the calibration), the roofline lower bound and the
achieved / roofline ratio, the bounding resource (the report's), the simulated instructions and
the simulator's wall time. It asserts that cube utilisation never exceeds 100 % and that no
layer beats its roofline bound.

What is computed: gradInput and gradWeight (outputMask [1, 1, 0], no bias), cubeMathType 1,
except conv1, whose input is the image: autograd never asks for its gradient, so conv1 runs
[0, 1, 0] (as traces/resnet50_conv_backward.yaml does). MACs count only the gradients computed.

Roofline lower bound (cycles), for any implementation of the call: the largest of
  * the real MACs at the full chip's FP16 rate (24 cubes x 4096 MAC/cycle),
  * the compulsory device-memory reads (gradOutput, input, weight, as the masks need them; the L2
    starts cold each call, written results may stay in the 192 MB L2) at 1.6 TB/s,
  * every compulsory byte (those reads plus the gradients written) once through the L2 at its
    chip-wide bandwidth.

Why the large 3x3 layers reach 45-65 % cube utilisation over the call (74-86 % inside the Cube
launch) while the 4096^3 GEMM of benchmarks/calibration.py reaches 93 % (docs/CONVOLUTION.md has
the per-launch breakdown and the measured table):
  * the operator is three launches, not one: TransData of gradOutput and input into NC1HWC0 (and
    the weight into the Cube's fractal layout) before the Cube, and the layout pass of both
    gradients after it. Those passes move the activations through UB at device-memory / L2
    speed while the Cube idles, and each launch pays its 2 us start-up: on l3 3x3 256 the Cube
    launch is ~78 % of the call, the vector passes and launch gaps the rest;
  * inside the Cube launch (74-86 % of peak): the batch is folded into the feature map's rows with
    one zero gap row per image (so a load3d window never mixes two images), and those gap rows
    are computed as junk positions (1/8 of the work on 7x7 maps, 1/15 on 14x14); positions are
    cut into tiles of whole 16-row fractals, and 120 units do not split evenly over 24 cores;
  * the GEMM keeps its 4096 x 4096 operands in L2 and streams 128 x 256 tiles; a convolution
    layer is only 0.8-7 GFLOP, so a 3-launch call of 60-70 us has proportionally more fixed cost.
The 1x1 layers are bounded by device memory (their activations are large next to their MACs)
and by the L0C drain (Fixpipe) when the reduction is short; conv1 by MTE1 (K is 16 deep per tap).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import simulator  # noqa: E402

# (name, Cin, Cout, k, stride, pad, input H=W) -- torchvision ResNet-50 v1.5 (stride on the 3x3)
LAYERS = [
    ("conv1 7x7/2", 3, 64, 7, 2, 3, 224),
    ("l1 1x1 64->64", 64, 64, 1, 1, 0, 56),
    ("l1 3x3 64", 64, 64, 3, 1, 1, 56),
    ("l1 1x1 64->256 (+ds)", 64, 256, 1, 1, 0, 56),
    ("l1 1x1 256->64", 256, 64, 1, 1, 0, 56),
    ("l2 1x1 256->128", 256, 128, 1, 1, 0, 56),
    ("l2 3x3/2 128", 128, 128, 3, 2, 1, 56),
    ("l2 1x1 128->512", 128, 512, 1, 1, 0, 28),
    ("l2 ds 1x1/2 256->512", 256, 512, 1, 2, 0, 56),
    ("l2 1x1 512->128", 512, 128, 1, 1, 0, 28),
    ("l2 3x3 128", 128, 128, 3, 1, 1, 28),
    ("l3 1x1 512->256", 512, 256, 1, 1, 0, 28),
    ("l3 3x3/2 256", 256, 256, 3, 2, 1, 28),
    ("l3 1x1 256->1024", 256, 1024, 1, 1, 0, 14),
    ("l3 ds 1x1/2 512->1024", 512, 1024, 1, 2, 0, 28),
    ("l3 1x1 1024->256", 1024, 256, 1, 1, 0, 14),
    ("l3 3x3 256", 256, 256, 3, 1, 1, 14),
    ("l4 1x1 1024->512", 1024, 512, 1, 1, 0, 14),
    ("l4 3x3/2 512", 512, 512, 3, 2, 1, 14),
    ("l4 1x1 512->2048", 512, 2048, 1, 1, 0, 7),
    ("l4 ds 1x1/2 1024->2048", 1024, 2048, 1, 2, 0, 14),
    ("l4 1x1 2048->512", 2048, 512, 1, 1, 0, 7),
    ("l4 3x3 512", 512, 512, 3, 1, 1, 7),
]


def layer_mask(name: str) -> list[bool]:
    """conv1's input is the image: no input gradient (autograd's outputMask there)."""
    return [False, True, False] if name.startswith("conv1") else [True, True, False]


def run_layer(soc, N, cin, cout, k, s, p, hw, mask, mode="timing", seed=None):
    ho = (hw + 2 * p - k) // s + 1
    dt = np.float16
    if seed is None:
        x = np.zeros((N, cin, hw, hw), dt)
        w = np.zeros((cout, cin, k, k), dt)
        dy = np.zeros((N, cout, ho, ho), dt)
    else:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((N, cin, hw, hw)).astype(dt)
        w = rng.standard_normal((cout, cin, k, k)).astype(dt)
        dy = rng.standard_normal((N, cout, ho, ho)).astype(dt)
    t0 = time.perf_counter()
    r = simulator.run("ConvolutionBackward", soc=soc, mode=mode, trace=False, gradOutput=dy, input=x,
                      weight=w, biasSizes=[cout], stride=[s, s], padding=[p, p], dilation=[1, 1],
                      transposed=False, outputPadding=[0, 0], groups=1, outputMask=mask,
                      cubeMathType=1)
    wall = time.perf_counter() - t0
    macs = (int(mask[0]) + int(mask[1])) * N * cout * ho * ho * cin * k * k
    reads = dy.nbytes + (x.nbytes if mask[1] else 0) + (w.nbytes if mask[0] else 0)
    writes = (x.nbytes if mask[0] else 0) + (w.nbytes if mask[1] else 0)
    return r, wall, macs, reads, writes, (x, w, dy)


def roofline(prof, macs, reads, writes) -> tuple[float, str]:
    cores = prof.core_kind_for("cube")[1].count
    bounds = {"cube": macs / (cores * prof.cube.macs_per_cycle["FLOAT16"]),
              "device memory": reads / prof.device_bytes_per_cycle,
              "L2": (reads + writes) / prof.l2_bytes_per_cycle}
    name = max(bounds, key=bounds.get)
    return bounds[name], name


def torch_compare(soc: str, reps: int = 5) -> int:
    """Functional mode on N=8, C=64, 56x56, K=64, 3x3 (stride 1, pad 1), FP16, gradInput +
    gradWeight, against torch CPU's convolution_backward on the same FP16 tensors (and FP32,
    torch's fast CPU path). Wall times, best of `reps`, the three calls interleaved so that a
    slow phase of the machine hits them alike; the simulator's first call (cold caches) too."""
    try:
        import torch
    except ImportError:
        print("torch comparison: torch is not installed (pip install torch==2.13.0); skipped")
        return 0
    N, C, H, K = 8, 64, 56, 64
    print(f"\nFunctional mode vs torch {torch.__version__} CPU ({torch.get_num_threads()} threads): "
          f"convolution_backward N={N} C={C} {H}x{H} K={K} 3x3/1 pad 1, gradInput + gradWeight")
    sim, tt, outs, first = [], {torch.float16: [], torch.float32: []}, None, None
    for _ in range(reps):
        r, wall, macs, _, _, (x, w, dy) = run_layer(soc, N, C, K, 3, 1, 1, H, [True, True, False],
                                                    mode="functional", seed=0)
        first = wall if first is None else first
        sim.append(wall)
        for dt in tt:
            tx, tw, tdy = (torch.from_numpy(a).to(dt) for a in (x, w, dy))
            t0 = time.perf_counter()
            o = torch.ops.aten.convolution_backward(tdy, tx, tw, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                                    [True, True, False])
            tt[dt].append(time.perf_counter() - t0)
            if dt == torch.float32:
                outs = o
    best, t16, t32 = min(sim), min(tt[torch.float16]), min(tt[torch.float32])
    err = [float(np.abs(r.outputs[n].astype(np.float64) - outs[i].double().numpy()).max()
                 / max(float(outs[i].abs().max()), 1e-30)) for i, n in enumerate(("gradInput", "gradWeight"))]
    print(f"  simulator (functional, {r.report.instructions:,} instructions, {r.cycles:,.0f} cycles): "
          f"{best:.3f} s wall (best of {reps}; first call {first:.3f} s)")
    print(f"  torch CPU FP16: {t16:.3f} s   simulator / torch {best / t16:.2f}x")
    print(f"  torch CPU FP32: {t32:.3f} s   simulator / torch {best / t32:.2f}x")
    print(f"  max |simulator - torch FP32| / max |torch|: gradInput {err[0]:.1e}, gradWeight {err[1]:.1e}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="Ascend910B1")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--layers", type=int, default=len(LAYERS), help="only the first N layers")
    ap.add_argument("--torch-compare", action="store_true",
                    help="also time functional mode on N=8 C=64 56x56 3x3 against torch CPU (skipped without torch)")
    ap.add_argument("--torch-only", action="store_true", help="only the torch comparison")
    args = ap.parse_args(argv)
    if args.torch_only:
        return torch_compare(args.soc)
    prof = simulator.load_profile(args.soc)
    cores = prof.core_kind_for("cube")[1].count
    mac_rate = cores * prof.cube.macs_per_cycle["FLOAT16"]
    print(f"ResNet-50 conv backward (gradInput + gradWeight; conv1 gradWeight only), FP16, batch "
          f"{args.batch}, {args.soc}, timing-only")
    print(f"{'layer':<24}{'cycles':>11}{'us':>8}{'cube util':>10}{'in Cube':>9}{'roofline':>10}{'x roof':>7}  "
          f"{'(roof bound)':<17}{'bound':<12}{'instr':>9}{'wall s':>8}")
    total_wall, total_instr, total_cycles = 0.0, 0, 0.0
    ok = True
    t_start = time.perf_counter()
    for name, cin, cout, k, s, p, hw in LAYERS[:args.layers]:
        r, wall, macs, reads, writes, _ = run_layer(args.soc, args.batch, cin, cout, k, s, p, hw, layer_mask(name))
        total_wall += wall
        total_instr += r.report.instructions
        total_cycles += r.cycles
        util = macs / (mac_rate * r.cycles)
        cube_cycles = sum(l["cycles"] for l in r.report.launches if l["core_kind"] == "aic")
        util_cube = macs / (mac_rate * cube_cycles)
        roof, roof_by = roofline(prof, macs, reads, writes)
        print(f"{name:<24}{r.cycles:>11,.0f}{r.time_us:>8,.1f}{util:>10.1%}{util_cube:>9.1%}{roof:>10,.0f}"
              f"{r.cycles / roof:>7.2f}  {'(' + roof_by + ')':<17}{r.report.bound:<12}"
              f"{r.report.instructions:>9,}{wall:>8.2f}", flush=True)
        if util > 1.0 or r.cycles < roof:
            ok = False
            print(f"  !! physical bound violated on {name}: cube utilisation {util:.1%}, cycles {r.cycles:,.0f} "
                  f"< roofline {roof:,.0f}")
    elapsed = time.perf_counter() - t_start
    print(f"total: {total_cycles:,.0f} cycles = {prof.cycles_to_us(total_cycles):,.0f} us simulated; "
          f"{total_instr:,} instructions; simulator wall time {total_wall:.1f} s "
          f"({total_instr / max(total_wall, 1e-9):,.0f} instructions per second), {elapsed:.1f} s with set-up")
    assert ok, "a layer beat its physical bound"
    if args.torch_compare:
        torch_compare(args.soc)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
