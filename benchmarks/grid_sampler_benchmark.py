"""GridSampler2DBackward on a backward pass typical of detection and optical-flow models: N=8, C=64,
a 128x128 input sampled by a 128x128 grid, FLOAT, bilinear, zeros, alignCorners false, both
gradients. Timing-only mode (the cycles equal functional mode's; the data does not matter).
Prints, per chip: cycles, microseconds, the bounding resource, the simulator's wall time, the
launches, and the cost of the gathers and the atomic scatters.

    python benchmarks/grid_sampler_benchmark.py [--soc Ascend910B1 --soc Ascend910A] [--no-trace]

What to expect: the kernel does 2 gathers (one per corner row, 2 x 64 FLOAT = 512 B) and 2 atomic
scatters per grid point, 262,144 of each. Such small copies are latency-bound (GM->UB ~245
cycles, UB->GM ~150 on the A2 profile, one copy at a time per pipe), so MTE2 bounds the call:
about points-per-core x 2 x 250 cycles, plus the vector work between tiles that the pipeline does
not hide. Device memory and L2 are far from busy.
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

N, C, H, W, HO, WO = 8, 64, 128, 128, 128, 128


def bench(soc: str, trace: bool) -> None:
    profile = simulator.load_profile(soc)
    go = np.zeros((N, C, HO, WO), np.float32)
    x = np.zeros((N, C, H, W), np.float32)
    g = np.zeros((N, HO, WO, 2), np.float32)
    t0 = time.perf_counter()
    r = simulator.run("GridSampler2DBackward", soc=soc, mode="timing", trace=trace, gradOutput=go,
                      input=x, grid=g, interpolationMode=0, paddingMode=0, alignCorners=False,
                      outputMask=[True, True])
    wall = time.perf_counter() - t0
    rp = r.report
    ncores = profile.core_kind_for("vector")[1].count
    print(f"\n== {soc}: {ncores} vector cores @ {profile.clock_mhz:g} MHz ==")
    print(f"cycles {r.cycles:,.0f}   time {r.time_us:,.1f} us   bound {rp.bound} "
          f"({rp.utilisation[rp.bound]:.0%} of the call)   simulator wall {wall:.1f} s "
          f"({rp.instructions:,} instructions, {rp.instructions / wall:,.0f}/s, trace {'on' if trace else 'off'})")
    print(f"workspace {rp.workspace_bytes:,} B: " + "; ".join(f"{w['bytes']:,} B {w['purpose']}"
                                                          for w in rp.workspace_breakdown))
    for l in rp.launches:
        print(f"  {l['name']:<38} x{l['block_dim']:<3} {l['cycles']:>12,.0f} cycles")
    for pipe, p in rp.pipes.items():
        if p["busy_cycles"]:
            print(f"  {pipe:<10} busy {p['busy_fraction']:6.1%} (busiest core {p['max_core_busy_fraction']:6.1%})")
    print(f"  L2 {rp.l2['bytes']:,} B, hit rate {rp.l2['hit_rate']:.1%}; device memory "
          f"{rp.device_memory['bytes']:,} B = {rp.device_memory['fraction_of_peak']:.1%} of peak")
    t = rp.tiling
    print(f"  tiling: {t['pointsPerTile']} points/tile, {t['channelChunks']} channel chunk(s), "
          f"{t['gathers']:,} gathers, {t['atomicScatters']:,} atomic scatters")
    if trace:
        rows = {row["instruction"]: row for row in rp.instruction_rows()}
        for name in ("DataCopyPad[gather]", "DataCopyPad[scatter]+AtomicAdd"):
            row = rows[name]
            print(f"  {name:<32} {row['count']:>9,} x {row['mean_cycles']:6.1f} cycles = "
                  f"{row['total_cycles'] / ncores:>12,.0f} cycles per core on {row['pipe']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--soc", action="append", help="chip(s); default Ascend910B1 and Ascend910A")
    ap.add_argument("--no-trace", action="store_true", help="skip the timeline (faster; no per-instruction rows)")
    args = ap.parse_args()
    print(f"GridSampler2DBackward N={N} C={C} input {H}x{W} grid {HO}x{WO} FLOAT bilinear zeros, timing-only")
    for soc in args.soc or ["Ascend910B1", "Ascend910A"]:
        bench(soc, not args.no_trace)


if __name__ == "__main__":
    main()
