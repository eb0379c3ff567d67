"""ResNet-50 convolution backward (every distinct conv layer shape, batch 32, gradInput +
gradWeight, FP16, cubeMathType 1) on Ascend910B1 in timing-only mode.

Per layer: cycles, microseconds, cube utilisation (the layer's MACs over the chip's FP16 MAC rate
x cycles), the bounding resource (from the report), the roofline lower bound (cube MACs at peak,
or the compulsory device-memory bytes at full bandwidth, whichever is larger) and the simulator's
wall time. Asserts cube utilisation <= 100 % and cycles >= the roofline bound.

    python benchmarks/resnet50_conv_backward.py [--soc Ascend910B1] [--batch 32] [--layers N]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import simulator

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


def run_layer(soc, N, cin, cout, k, s, p, hw):
    ho = (hw + 2 * p - k) // s + 1
    dt = np.float16
    x = np.zeros((N, cin, hw, hw), dt)
    w = np.zeros((cout, cin, k, k), dt)
    dy = np.zeros((N, cout, ho, ho), dt)
    t0 = time.perf_counter()
    r = simulator.run("ConvolutionBackward", soc=soc, mode="timing", trace=False, gradOutput=dy, input=x,
                      weight=w, biasSizes=[cout], stride=[s, s], padding=[p, p], dilation=[1, 1],
                      transposed=False, outputPadding=[0, 0], groups=1, outputMask=[True, True, False],
                      cubeMathType=1)
    wall = time.perf_counter() - t0
    macs = 2 * N * cout * ho * ho * cin * k * k           # dX + dW
    return r, wall, macs, (x.nbytes + w.nbytes + dy.nbytes) * 2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--soc", default="Ascend910B1")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--layers", type=int, default=len(LAYERS))
    args = ap.parse_args(argv)
    prof = simulator.load_profile(args.soc)
    cores = prof.core_kind_for("cube")[1].count
    mac_rate = cores * prof.cube.macs_per_cycle["FLOAT16"]
    bw = prof.device_bytes_per_cycle
    print(f"ResNet-50 conv backward (dX + dW, FP16), batch {args.batch}, {args.soc}, timing-only")
    print(f"{'layer':<24}{'cycles':>13}{'us':>10}{'cube util':>10}{'roofline':>12}{'x roof':>8}"
          f"  {'bound':<12}{'wall s':>8}")
    total_wall = 0.0
    ok = True
    for name, cin, cout, k, s, p, hw in LAYERS[:args.layers]:
        r, wall, macs, nbytes = run_layer(args.soc, args.batch, cin, cout, k, s, p, hw)
        total_wall += wall
        util = macs / (mac_rate * r.cycles)
        roof = max(macs / mac_rate, nbytes / bw)
        print(f"{name:<24}{r.cycles:>13,.0f}{r.time_us:>10,.1f}{util:>10.1%}{roof:>12,.0f}"
              f"{r.cycles / roof:>8.2f}  {r.report.bound:<12}{wall:>8.2f}", flush=True)
        if util > 1.0 or r.cycles < roof:
            ok = False
            print(f"  !! physical bound violated on {name}")
    print(f"total simulator wall time: {total_wall:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
