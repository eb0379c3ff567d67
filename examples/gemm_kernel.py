"""A full-chip GEMM in the simulator's Ascend C vocabulary: C (M x N) = A (M x K) @ B (K x N), run
alone. The kernel and its host-side tiling are ops/matmul/kernel.py (what aclnnMm launches): copy
that file to start a cube kernel.

Run:  python examples/gemm_kernel.py --soc Ascend910B1 --m 512 --n 512 --k 512 --dtype FLOAT16
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import simulator
from ops.matmul.kernel import (DTYPES, GemmTiling, KernelGemm, gemm_kernel, gemm_tiling, input_elements,  # noqa: F401
                               swizzled_tile, to_nz)
from simulator.profile import load_profile


def gemm(a: np.ndarray, b: np.ndarray, dtype: str = "FLOAT16", soc: str = "Ascend910B1",
         trans_b: bool = False, mode: str = "functional", tiling: GemmTiling | None = None,
         trace: bool = False):
    """C = A @ B (A @ B^T given B^T when trans_b). Returns (C, KernelResult)."""
    M, K = a.shape
    N = b.shape[0] if trans_b else b.shape[1]
    if (b.shape[1] if trans_b else b.shape[0]) != K:
        raise ValueError(f"shapes {a.shape} and {b.shape} do not multiply (trans_b={trans_b})")
    t = tiling or gemm_tiling(M, N, K, dtype, soc, trans_b)
    in_t, out_t = DTYPES[dtype]
    c = np.zeros((M, N), dtype=out_t)
    a, b = np.asarray(a, dtype=in_t), np.asarray(b, dtype=in_t)
    if t.nzInputs:      # what TransData ND -> NZ would leave in GM before the MatMul
        a, b = to_nz(a, 32 // in_t.itemsize), to_nz(b, 32 // in_t.itemsize)
    r = simulator.run_kernel(gemm_kernel, t.usedCoreNum, {"a": a, "b": b, "c": c, "tiling": t},
                             kind="cube", soc=soc, mode=mode, name="gemm", trace=trace)
    return r["c"], r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="Ascend910B1")
    ap.add_argument("--m", type=int, default=512)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--k", type=int, default=512)
    ap.add_argument("--dtype", default="FLOAT16", choices=list(DTYPES))
    ap.add_argument("--trans-b", action="store_true", help="B is stored N x K (needed for FLOAT/HF32)")
    ap.add_argument("--mode", default="functional", choices=["functional", "timing"])
    ap.add_argument("--trace", help="write a Chrome trace (Perfetto) to this file")
    args = ap.parse_args(argv)
    trans_b = args.trans_b or DTYPES[args.dtype][0].itemsize == 4
    rng = np.random.default_rng(0)
    in_t = DTYPES[args.dtype][0]
    a = rng.standard_normal((args.m, args.k)).astype(in_t)
    b = rng.standard_normal((args.n, args.k) if trans_b else (args.k, args.n)).astype(in_t)
    t = gemm_tiling(args.m, args.n, args.k, args.dtype, args.soc, trans_b)
    print(f"tiling: {t}")
    w0 = time.perf_counter()
    c, r = gemm(a, b, args.dtype, args.soc, trans_b, args.mode, t, trace=bool(args.trace))
    wall = time.perf_counter() - w0
    print(r.report.summary())
    flops = 2.0 * args.m * args.n * args.k
    peak = load_profile(args.soc).peak_fp16_tflops
    tflops = flops / (r.time_us * 1e-6) / 1e12
    print(f"achieved {tflops:.1f} TFLOPS = {tflops / peak:.1%} of the {peak:.1f} TFLOPS fp16 peak")
    print(f"engine: {r.report.instructions:,} instructions in {wall:.2f} s = "
          f"{r.report.instructions / wall:,.0f} instructions per wall-second")
    if args.mode == "functional":
        ref = a.astype(np.float64) @ (b.astype(np.float64).T if trans_b else b.astype(np.float64))
        err = np.abs(c.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30)
        print(f"max |C - A@B| / max |A@B| = {err:.2e} (vs float64 numpy)")
    if args.trace:
        print(f"trace: {r.trace.save(args.trace)}")


if __name__ == "__main__":
    main()
