"""SiluBackward on Ascend910B1: simulated cycles and microseconds, achieved device-memory bandwidth
as a fraction of the profile's, and the simulator's own wall time, for 1M and 64M elements in
FLOAT and FLOAT16.

    python benchmarks/silu_backward_benchmark.py [--soc Ascend910B1] [--functional]

Expected band for the large cases: a streaming kernel whose inputs are read once from device
memory (the L2 cannot hold 64M-element tensors) should be bound by device memory (FLOAT: 12 B
per element in or out) or by the vector pipe (FLOAT16: 6 B per element but the arithmetic runs in
FP32 after casts). The achieved device-memory bandwidth can never exceed the profile's nominal
one; for the 64M FLOAT case it should sit within 90-100 % of what the channel delivers (the
nominal rate times device_memory.efficiency: 95.7 % on A2, Huawei's copy test; torch_npu's own
elementwise kernels reach 78-80 % of the nominal rate on the chips, docs/CALIBRATION.md).
Writes stay in the write-back L2 until evicted, so the bytes that reach device memory are the
reads plus the evicted part of the writes.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

# this checkout's simulator, not the installed one: a worktree of an old commit measures that commit
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import simulator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--soc", default="Ascend910B1")
    ap.add_argument("--functional", action="store_true",
                    help="also time functional mode (real data; needs ~3 GB of RAM at 64M)")
    args = ap.parse_args()
    profile = simulator.load_profile(args.soc)
    print(f"SiluBackward on {args.soc}: device memory {profile.device_memory.bandwidth_GBps:g} GB/s, "
          f"{profile.core_kind_for('vector')[1].count} vector cores @ {profile.clock_mhz:g} MHz")
    header = (f"{'elements':>10} {'dtype':>8} {'mode':>10} {'cycles':>12} {'us':>10} {'HBM GB/s':>9} "
              f"{'of peak':>8} {'L2 GB/s':>9} {'bound':>14} {'instrs':>8} {'wall s':>7} {'instr/s':>9}")
    print(header)
    modes = ["timing"] + (["functional"] if args.functional else [])
    for n in (1 << 20, 1 << 26):
        for dt in (np.float32, np.float16):
            x = np.zeros(n, dt)
            for mode in modes:
                if mode == "functional":
                    rng = np.random.default_rng(0)
                    x = rng.standard_normal(n).astype(dt)
                t0 = time.perf_counter()
                r = simulator.run("SiluBackward", soc=args.soc, mode=mode, gradOutput=x, self=x,
                                  trace=False)
                wall = time.perf_counter() - t0
                rp = r.report
                dm = rp.device_memory
                assert dm["GBps"] <= profile.device_memory.bandwidth_GBps * (1 + 1e-9)
                print(f"{n:>10} {np.dtype(dt).name:>8} {mode:>10} {r.cycles:>12,.0f} {r.time_us:>10,.1f} "
                      f"{dm['GBps']:>9,.1f} {dm['fraction_of_peak']:>8.1%} {rp.l2['GBps']:>9,.1f} "
                      f"{rp.bound:>14} {rp.instructions:>8} {wall:>7.2f} {rp.instructions / wall:>9,.0f}")


if __name__ == "__main__":
    main()
