"""Calibration suite: simulated figures beside published ones, with the ratio.

    python benchmarks/calibration.py                 # everything, every chip (a few minutes)
    python benchmarks/calibration.py --quick         # the GEMM at 2048^3 instead of 4096^3
    python benchmarks/calibration.py --socs Ascend910B1 --skip-gemm

1. One-core Mmad throughput (every chip): a loop of msKPP's own shape (32 x 16 x 1024) and of a
   large tile (128 x 128 x 256), against msKPP's 98.6 % of 4096 MAC/cycle (910B1), never above
   100 %; and msKPP's 910B1 MMAD curve point by point.
2. Single-transfer bandwidth (910B1): GM->L1, GM->UB, L1->L0A, L1->L0B, L0C->GM, UB->GM from 1 KB
   up to the smaller of 512 KB, the table's range and the buffer's size, against msKPP's measured
   tables (benchmarks/mskpp_910b1.py); each point within 15 %. Also GM->L1 with ND->NZ.
   Transfers are measured warm (the same bytes moved once before: L2 hits, as msKPP's loops);
   a cold transfer adds the profile's L2 miss latency. msKPP's tables are in cycles at 1.8 GHz,
   so simulated cycles are compared as cycles (GB/s shown at 1.8 GHz, the tables' "GB/s").
3. All-core streaming (every chip): every vector core streams its own slice of GM into UB;
   the aggregate against the profile's device-memory bandwidth: within 10 % and never above.
4. Full-chip GEMM, M = N = K = 4096 FP16, timing-only (every chip): achieved TFLOPS against the
   derived peak (cores x 4096 x 2 x clock), what bounds it (the report's bound), and the engine's
   speed (simulated instructions per wall-second).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "examples"))
sys.path.insert(0, str(HERE))

from mskpp_910b1 import MMAD_FP16_910B1, MSKPP_CLOCK_GHZ, TABLES, table_cycles  # noqa: E402

from simulator import acl  # noqa: E402
from simulator.enums import KernelError  # noqa: E402
from simulator.kernel import *  # noqa: E402,F401,F403
from simulator.program import KernelLaunch  # noqa: E402
from simulator.profile import list_socs, load_profile  # noqa: E402
from simulator.report import Report  # noqa: E402

KB = 1024
OUT: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    OUT.append(line)


def run_device(body, block_dim: int, buffers: dict, *, kind: str, soc: str, mode: str = "timing",
               extra: dict | None = None, trace: bool = True, profile=None):
    """Run a kernel with device buffers that have no host copy (`buffers`: name -> (dtype,
    elements)); returns (Report, TaskRecord, wall seconds)."""
    rt = acl.Runtime()
    with acl.use_runtime(rt):
        if acl.aclInit(None, soc=soc, mode=mode, trace=trace, profile=profile):
            raise RuntimeError(acl.aclGetRecentErrMsg())
        acl.aclrtSetDevice(0)
        args = []
        for name, (dt, n) in buffers.items():
            dt = np.dtype(dt)
            ptr, ret = acl.aclrtMalloc(max(int(n) * dt.itemsize, 1), 0)
            if ret:
                raise RuntimeError(acl.aclGetRecentErrMsg())
            args.append(GM_ADDR(ptr, int(n) * dt.itemsize, dt, name))
        args += list((extra or {}).values())
        box = {}

        def done(rec):
            box["rec"] = rec
            box["report"] = Report.from_task(rec, rt.profile, body.__name__, functional=rt.functional)

        w0 = time.perf_counter()
        acl.enqueue(rt.default_stream, body.__name__, [KernelLaunch(body.__name__, body, block_dim, kind, tuple(args))], done)
        if acl.aclrtSynchronizeStream(None):
            raise KernelError(acl.aclGetRecentErrMsg())
        return box["report"], box["rec"], time.perf_counter() - w0


def last(rec, name: str) -> tuple[float, float]:
    """(start, duration) of the last traced instruction called `name`."""
    hits = [e for e in rec.trace if e[2] == name]
    return hits[-1][3], hits[-1][4]


# ---------------------------------------------------------------------------------------------
# 1. Mmad throughput
# ---------------------------------------------------------------------------------------------
def mmad_loop(m: int, n: int, k: int, iters: int):
    def body(_g):
        pipe = TPipe()
        a, b, c = TBuf(TPosition.A2), TBuf(TPosition.B2), TBuf(TPosition.CO1)
        pipe.InitBuffer(a, m * k * 2)
        pipe.InitBuffer(b, k * n * 2)
        pipe.InitBuffer(c, -(-m // 16) * 16 * n * 4)
        la, lb, lc = a.Get(half), b.Get(half), c.Get(float32)
        InitConstValue(la, InitConstValueParams(1, -(-m // 16) * -(-k // 16), 0, 0))
        InitConstValue(lb, InitConstValueParams(1, -(-n // 16) * -(-k // 16), 0, 0))
        PipeBarrier(PIPE_ALL)
        for i in range(iters):
            Mmad(lc, la, lb, MmadParams(m, n, k, cmatrixInitVal=(i == 0)))
    body.__name__ = f"mmad_{m}x{n}x{k}"
    return body


def bench_mmad(socs):
    say("## 1. One-core Mmad throughput (FP16)")
    say()
    say("Loop of back-to-back Mmads on one cube core; throughput = MACs / cycles from the first Mmad's "
        "start to the last one's end, over 4096 MAC/cycle.")
    say()
    say("| chip | shape m x n x k | simulated | published (msKPP 910B1) | ratio |")
    say("|---|---|---|---|---|")
    for soc in socs:
        rate = load_profile(soc).cube.macs_per_cycle["FLOAT16"]
        for (m, n, k), pub in (((32, 1024, 16), 8057.168324 / 2 / 4096), ((128, 128, 256), None)):
            iters = 64
            rep, rec, _ = run_device(mmad_loop(m, n, k, iters), 1, {"g": (np.uint8, 32)}, kind="cube", soc=soc)
            mm = [e for e in rec.trace if e[2] == "Mmad"]
            span = mm[-1][3] + mm[-1][4] - mm[0][3]
            eff = iters * m * n * k / span / rate
            assert eff <= 1.0 + 1e-12, f"{soc}: Mmad above peak ({eff:.4f})"
            pubs = f"{pub:.1%}" if pub else "(>= 95 %)"
            ratio = f"{eff / pub:.3f}" if pub else ("ok" if eff >= 0.95 else "LOW")
            say(f"| {soc} | {m} x {n} x {k} | {eff:.2%} | {pubs} | {ratio} |")
    p = load_profile("Ascend910B1")
    say()
    say("msKPP's MMAD_FP16_FP16_FP32_1_core_910b1 curve (32 x 16 x n; measured cycles = 2 x MACs / "
        "FLOPs-per-cycle) against the model (start-up + whole fractal steps):")
    say()
    say("| m x k x n | MACs | measured cycles | simulated cycles | sim / measured |")
    say("|---|---|---|---|---|")
    for (m, k, n), fpc in MMAD_FP16_910B1.items():
        macs = m * k * n
        meas = 2 * macs / fpc
        sim = mmad_cycles(p, m, n, k, "FLOAT16")
        say(f"| {m} x {k} x {n} | {macs} | {meas:.2f} | {sim:.2f} | {sim / meas:.3f} |")
    say()


# ---------------------------------------------------------------------------------------------
# 2. single transfers
# ---------------------------------------------------------------------------------------------
def xfer_kernel(path: str, nbytes: int):
    """A kernel moving nbytes once to warm L2, then once more (measured), on `path`."""
    n16 = nbytes // 2

    def body(g):
        pipe = TPipe()
        G = GlobalTensor(half)
        G.SetGlobalBuffer(g)
        if path in ("GM_L1", "GM_L1_ND2NZ"):
            b = TBuf(TPosition.A1)
            pipe.InitBuffer(b, max(nbytes, -(-nbytes // 8192) * 8192))   # NZ pads rows to 16
            l1 = b.Get(half)
            for _ in range(2):
                if path == "GM_L1":
                    DataCopy(l1, G, n16)
                else:   # an ND matrix of 256-element (512 B) rows -> NZ
                    rows = nbytes // 512
                    DataCopy(l1, G, Nd2NzParams(1, rows, 256, 0, 256, -(-rows // 16) * 16, 1, 0))
                PipeBarrier(PIPE_ALL)
        elif path == "GM_UB":
            b = TBuf()
            pipe.InitBuffer(b, nbytes)
            for _ in range(2):
                DataCopy(b.Get(half), G, n16)
                PipeBarrier(PIPE_ALL)
        elif path == "UB_GM":
            b = TBuf()
            pipe.InitBuffer(b, nbytes)
            ub = b.Get(half)
            Duplicate(ub, 0.0, n16)
            PipeBarrier(PIPE_ALL)
            for _ in range(2):
                DataCopy(G, ub, n16)
                PipeBarrier(PIPE_ALL)
        elif path in ("L1_L0A", "L1_L0B"):
            b1 = TBuf(TPosition.A1)
            b0 = TBuf(TPosition.A2 if path == "L1_L0A" else TPosition.B2)
            pipe.InitBuffer(b1, nbytes)
            pipe.InitBuffer(b0, nbytes)
            l1 = b1.Get(half)
            InitConstValue(l1, InitConstValueParams(1, nbytes // 32, 0, 0))
            PipeBarrier(PIPE_ALL)
            for _ in range(2):
                LoadData(b0.Get(half), l1, LoadData2DParams(0, nbytes // 512, 1))
                PipeBarrier(PIPE_ALL)
        elif path == "L0C_GM":
            rows = nbytes // 512                      # fp32 rows of 128 values
            m16 = -(-rows // 16) * 16
            a, bb, c = TBuf(TPosition.A2), TBuf(TPosition.B2), TBuf(TPosition.CO1)
            pipe.InitBuffer(a, m16 * 32)
            pipe.InitBuffer(bb, 128 * 32)
            pipe.InitBuffer(c, m16 * 512)
            la, lb, lc = a.Get(half), bb.Get(half), c.Get(float32)
            InitConstValue(la, InitConstValueParams(1, m16 // 16, 0, 0))
            InitConstValue(lb, InitConstValueParams(1, 8, 0, 0))
            PipeBarrier(PIPE_ALL)
            Mmad(lc, la, lb, MmadParams(rows, 128, 16))
            PipeBarrier(PIPE_ALL)
            C = GlobalTensor(float32)
            C.SetGlobalBuffer(g)
            for _ in range(2):
                Fixpipe(C, lc, FixpipeParamsV220(nSize=128, mSize=rows, srcStride=m16, dstStride=128))
                PipeBarrier(PIPE_ALL)
    body.__name__ = f"xfer_{path}_{nbytes // KB}KB"
    return body


INSTR = {"GM_L1": "DataCopy", "GM_L1_ND2NZ": "DataCopy(ND2NZ)", "GM_UB": "DataCopy", "UB_GM": "DataCopy",
         "L1_L0A": "LoadData(2D)", "L1_L0B": "LoadData(2D)", "L0C_GM": "Fixpipe"}
LABEL = {"GM_L1": "GM->L1 (MTE2)", "GM_L1_ND2NZ": "GM->L1 with ND->NZ (MTE2)", "GM_UB": "GM->UB (MTE2, AIV)",
         "UB_GM": "UB->GM (MTE3, AIV)", "L1_L0A": "L1->L0A (MTE1)", "L1_L0B": "L1->L0B (MTE1)",
         "L0C_GM": "L0C->GM (FIXP)"}


def bench_transfers(soc="Ascend910B1"):
    p = load_profile(soc)
    say(f"## 2. Single-transfer bandwidth on {soc} vs msKPP's measured 910B1 tables")
    say()
    say("GB/s in the tables' unit (MiB per ms) with cycles at msKPP's 1.8 GHz; ratio = simulated / "
        "measured bandwidth (= measured / simulated cycles). Warm (L2-hit) transfers.")
    say()
    worst = {}
    for path in ("GM_L1", "GM_UB", "L1_L0A", "L1_L0B", "L0C_GM", "UB_GM", "GM_L1_ND2NZ"):
        kind = "vector" if path in ("GM_UB", "UB_GM") else "cube"
        _, ck = p.core_kind_for(kind)
        buf = {"GM_L1": "L1", "GM_L1_ND2NZ": "L1", "GM_UB": "UB", "UB_GM": "UB", "L1_L0A": "L0A",
               "L1_L0B": "L0B", "L0C_GM": "L0C"}[path]
        cap = ck.buffers[buf] // KB
        sizes = [kb for kb in TABLES[path] if kb <= min(512, cap)]
        say(f"### {LABEL[path]}: {min(sizes)} KB .. {max(sizes)} KB (table to {max(TABLES[path])} KB, {buf} holds {cap} KB)")
        say()
        say("| KB | measured GB/s | simulated GB/s | measured cycles | simulated cycles | ratio |")
        say("|---|---|---|---|---|---|")
        ratios = []
        for kb in sizes:
            rep, rec, _ = run_device(xfer_kernel(path, kb * KB), 1, {"g": (np.uint8, kb * KB)}, kind=kind, soc=soc)
            _, dur = last(rec, INSTR[path])
            meas = table_cycles(path, kb)
            r = meas / dur
            ratios.append(r)
            sim_gbps = kb / 1024 / (dur / MSKPP_CLOCK_GHZ) * 1e6
            flag = "" if abs(r - 1) <= 0.15 or path == "GM_L1_ND2NZ" else "  <-- outside 15 %"
            say(f"| {kb} | {TABLES[path][kb]:.2f} | {sim_gbps:.2f} | {meas:.0f} | {dur:.0f} | {r:.3f}{flag} |")
        worst[path] = (min(ratios), max(ratios))
        say()
    say("| path | points | worst ratios (min / max) | within 15 % |")
    say("|---|---|---|---|")
    for path, (lo, hi) in worst.items():
        ok = "yes" if lo >= 0.85 and hi <= 1.15 else ("n/a (shape-dependent table)" if path == "GM_L1_ND2NZ" else "NO")
        say(f"| {LABEL[path]} | {len([k for k in TABLES[path]])} in table | {lo:.3f} / {hi:.3f} | {ok} |")
    say()
    return worst


# ---------------------------------------------------------------------------------------------
# 3. all-core streaming
# ---------------------------------------------------------------------------------------------
def stream_kernel(per_core: int, chunk: int):
    def body(g):
        pipe = TPipe()
        q = TQue(TPosition.VECIN, BUFFER_NUM)
        pipe.InitBuffer(q, BUFFER_NUM, chunk)
        G = GlobalTensor(half)
        G.SetGlobalBuffer(g + GetBlockIdx() * (per_core // 2), per_core // 2)
        for i in range(per_core // chunk):
            t = q.AllocTensor(half)
            DataCopy(t, G[i * (chunk // 2)], chunk // 2)
            q.EnQue(t)
            t = q.DeQue(half)
            q.FreeTensor(t)
    body.__name__ = "stream"
    return body


def bench_streaming(socs):
    say("## 3. All-core streaming (GM -> UB on every vector core)")
    say()
    say("Each vector core reads its own slice (distinct addresses: every line misses L2) in copies of "
        "half its UB, double-buffered. Aggregate = bytes / (kernel time - launch overhead). Device "
        "memory delivers its nominal bandwidth times device_memory.efficiency (the share Huawei's "
        "copy test measured on A2 / A3; 1 elsewhere). The per-core ceiling is cores x the GM->UB "
        "path's sustained rate: no kernel can beat min(device memory, ceiling).")
    say()
    say("| chip | cores | bytes | aggregate GB/s | device memory GB/s (nominal x efficiency) | per-core ceiling GB/s | "
        "aggregate / device memory | aggregate / min(both) | within 10 % of device memory, never above |")
    say("|---|---|---|---|---|---|---|---|---|")
    for soc in socs:
        p = load_profile(soc)
        _, kind = p.core_kind_for("vector")
        cores = kind.count
        chunk = kind.buffers["UB"] // 2 // (32 * KB) * (32 * KB)
        per_core = max(4, int(p.device_memory.bandwidth_GBps * 1e9 * 300e-6 / cores) // chunk) * chunk
        rep, rec, _ = run_device(stream_kernel(per_core, chunk), cores, {"g": (np.uint8, per_core * cores)},
                                 kind="vector", soc=soc, trace=False)
        cyc = rep.launches[0]["cycles"] - (p.launch_cycles(cores, cores) - p.runtime.launch_gap_us * p.clock_mhz)   # less what a launch with no work costs
        gbps = per_core * cores / (cyc / (p.clock_mhz * 1e6)) / 1e9
        bw = p.device_memory.bandwidth_GBps * p.device_memory.efficiency
        ceiling = cores * p.path("GM_UB").bytes_per_cycle * p.clock_mhz * 1e6 / 1e9
        r = gbps / bw
        assert r <= 1.0 + 1e-9, f"{soc}: streaming above the device-memory bandwidth"
        ok = "yes" if 0.9 <= r <= 1.0 + 1e-9 else "NO: per-core paths cannot reach it"
        say(f"| {soc} | {cores} | {per_core * cores / 2**20:.0f} MiB | {gbps:,.1f} | "
            f"{p.device_memory.bandwidth_GBps:,g} x {p.device_memory.efficiency:g} = {bw:,.1f} | {ceiling:,.1f} | "
            f"{r:.3f} | {gbps / min(bw, ceiling):.3f} | {ok} |")
    say()


# ---------------------------------------------------------------------------------------------
# 4. full-chip GEMM
# ---------------------------------------------------------------------------------------------
def bench_gemm(socs, size: int):
    from gemm_kernel import gemm_kernel, gemm_tiling
    say(f"## 4. Full-chip GEMM, M = N = K = {size}, FP16, timing-only (examples/gemm_kernel.py)")
    say()
    say("| chip | cores | tiling (baseM x baseN x baseK, stepN, l1K) | us | TFLOPS | peak TFLOPS | "
        "fraction | bound by | M / MTE2 / MTE1 busy (busiest core) | L2 hit | instructions | wall s | instr/s |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    speeds = []
    runs = [(soc, None, soc) for soc in socs]
    for soc, prof, label in runs:
        p = prof or load_profile(soc)
        t = gemm_tiling(size, size, size, "FLOAT16", soc, profile=p)
        rep, rec, wall = run_device(gemm_kernel, t.usedCoreNum,
                                    {"a": (np.float16, size * size), "b": (np.float16, size * size),
                                     "c": (np.float16, size * size)},
                                    kind="cube", soc=soc, extra={"tiling": t}, trace=False, profile=prof)
        tflops = 2.0 * size ** 3 / (rep.time_us * 1e-6) / 1e12
        peak = p.peak_fp16_tflops
        busy = " / ".join(f"{rep.pipes[q]['max_core_busy_fraction']:.0%}" for q in ("PIPE_M", "PIPE_MTE2", "PIPE_MTE1"))
        hit = rep.to_dict().get("l2", {}).get("hit_rate")
        hit = f"{hit:.1%}" if isinstance(hit, float) else "-"
        speed = rep.instructions / wall
        speeds.append(speed)
        assert tflops <= peak * (1 + 1e-9), f"{soc}: above peak"
        say(f"| {label} | {t.usedCoreNum} | {t.baseM}x{t.baseN}x{t.baseK}, {t.stepN}, {t.l1K} | {rep.time_us:,.1f} | "
            f"{tflops:.1f} | {peak:.1f} | {tflops / peak:.1%} | {rep.bound} "
            f"({rep.utilisation[rep.bound]:.0%}) | {busy} | {hit} | {rep.instructions:,} | {wall:.1f} | {speed:,.0f} |")
    say()
    say(f"Engine speed on this machine: {min(speeds):,.0f} - {max(speeds):,.0f} simulated instructions per "
        f"wall-second (timing-only mode, tracing off; the wall time includes recording the micro-programs; "
        f"2 CPU cores shared with other work, so the spread is mostly load).")
    say()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socs", nargs="*", default=list_socs())
    ap.add_argument("--quick", action="store_true", help="GEMM at 2048^3 instead of 4096^3")
    ap.add_argument("--gemm-size", type=int, default=None)
    ap.add_argument("--skip-gemm", action="store_true")
    ap.add_argument("--markdown", help="also write the output to this file")
    args = ap.parse_args(argv)
    w0 = time.perf_counter()
    say(f"# Calibration ({' '.join(sys.argv)})")
    say()
    bench_mmad(args.socs)
    bench_transfers("Ascend910B1")
    bench_streaming(args.socs)
    if not args.skip_gemm:
        bench_gemm(args.socs, args.gemm_size or (2048 if args.quick else 4096))
    say(f"(suite wall time {time.perf_counter() - w0:.0f} s)")
    if args.markdown:
        Path(args.markdown).write_text("\n".join(OUT) + "\n")


if __name__ == "__main__":
    main()
