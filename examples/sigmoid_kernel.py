"""CANN's Sigmoid as it runs on an Atlas A2 chip, through aclnnSigmoid: its one launch is the
kernel in ops/elementwise/sigmoid.py (TBE's elementwise schedule, computed in FP32 with a Div).

    python examples/sigmoid_kernel.py [--soc Ascend910B2] [--dtype FLOAT16] [--shape 1024,1024]

benchmarks/validation.py times the published Sigmoid rows the same way (warm).
"""
from __future__ import annotations

import argparse

import numpy as np

import simulator
from simulator.studies.trace import numpy_dtype


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--soc", default="Ascend910B2")
    ap.add_argument("--dtype", default="FLOAT16", choices=("FLOAT", "FLOAT16", "BF16"))
    ap.add_argument("--shape", default="1024,1024")
    args = ap.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    x = np.random.default_rng(0).uniform(-8, 8, shape).astype(numpy_dtype(args.dtype))
    r = simulator.run("Sigmoid", args.soc, warmup=1, self=x)
    ref = 1 / (1 + np.exp(-x.astype(np.float64)))
    print(f"max |y - ref| = {np.abs(r.out.astype(np.float64) - ref).max():.2e}")
    print(r.report.summary())


if __name__ == "__main__":
    main()
