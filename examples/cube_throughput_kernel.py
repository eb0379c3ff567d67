"""The Cube's throughput as the AIbench paper measured it: on one core, a loop of matrix multiplies
whose operands already sit in L1, each call loading A and B from L1 into L0A / L0B and running
one Mmad into L0C (TIK's `tik_instance.matmul(dst_l0c, a_l1, b_l1, m, k, n)`, twice per iteration,
the second accumulating: Tinkerver/AIBench, operator_generate/矩阵matmul相关测试generate(复件).py).

    python examples/cube_throughput_kernel.py [--soc Ascend910A] [--m 160] [--n 160] [--k 160]

BUFFER_NUM 1 (`l0Buffers=1`) is TIK's matmul as that harness calls it: the same L0A / L0B each
call, so a call's loads wait for the previous Mmad to release them and its Mmad waits for its
loads (TIK's automatic synchronisation on a buffer it reuses). `l0Buffers=2` double-buffers L0,
the best case. Throughput = MACs over the loop's cycles, per core.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

import simulator
from simulator.kernel import *  # noqa: F401,F403  (Ascend C's vocabulary)


@dataclass
class CubeLoopTiling:
    m: int                    # elements, multiples of 16
    n: int
    k: int
    calls: int                # matmul calls (AIbench: 100 iterations x 2)
    l0Buffers: int            # 1: TIK's matmul as called there; 2: L0 double-buffered


def cube_loop_kernel(g: GM_ADDR, t: CubeLoopTiling):
    """One block: A (m x k) and B (k x n) in L1, `calls` x (L1 -> L0A, L1 -> L0B, Mmad)."""
    m1, n1, k1 = t.m // 16, t.n // 16, t.k // 16
    pipe = TPipe()
    a1, b1 = TBuf(TPosition.A1), TBuf(TPosition.B1)
    pipe.InitBuffer(a1, m1 * k1 * 512)
    pipe.InitBuffer(b1, k1 * n1 * 512)
    qa, qb = TQue(TPosition.A2, t.l0Buffers), TQue(TPosition.B2, t.l0Buffers)
    pipe.InitBuffer(qa, t.l0Buffers, m1 * k1 * 512)
    pipe.InitBuffer(qb, t.l0Buffers, k1 * n1 * 512)
    c = TBuf(TPosition.CO1)
    pipe.InitBuffer(c, t.m * t.n * 4)
    la1, lb1, lc = a1.Get(half), b1.Get(half), c.Get(float32)
    InitConstValue(la1, InitConstValueParams(m1 * k1, 16, 0, 0))   # 16 x 32 B per fractal
    InitConstValue(lb1, InitConstValueParams(k1 * n1, 16, 0, 0))
    PipeBarrier(PIPE_ALL)
    for i in range(t.calls):
        a2 = qa.AllocTensor(half)
        LoadData(a2, la1, LoadData2DParams(startIndex=0, repeatTimes=m1 * k1, srcStride=1))
        qa.EnQue(a2)
        b2 = qb.AllocTensor(half)
        LoadData(b2, lb1, LoadData2DParams(startIndex=0, repeatTimes=k1 * n1, srcStride=1))
        qb.EnQue(b2)
        a2, b2 = qa.DeQue(half), qb.DeQue(half)
        Mmad(lc, a2, b2, MmadParams(t.m, t.n, t.k, cmatrixInitVal=(i % 2 == 0)))
        qa.FreeTensor(a2)
        qb.FreeTensor(b2)


def cube_loop_macs_per_cycle(soc: str, m: int, n: int, k: int, calls: int = 200, l0_buffers: int = 1,
                             profile=None) -> float:
    """MACs per cycle of the loop on one core, from the first load's start to the last Mmad's end."""
    r = simulator.run_kernel(cube_loop_kernel, 1, {"g": np.zeros(32, np.uint8),
                                                   "t": CubeLoopTiling(m, n, k, calls, l0_buffers)},
                             kind="cube", soc=soc, mode="timing", name="cube_loop", trace=True,
                             profile=profile)
    ev = [e for e in r.trace.rows() if e[2] == "Mmad" or e[2].startswith("LoadData")]
    first = min(e[3] for e in ev if e[2].startswith("LoadData"))
    last = max(e[3] + e[4] for e in ev if e[2] == "Mmad")
    return calls * m * n * k / (last - first)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--soc", default="Ascend910A")
    ap.add_argument("--m", type=int, default=160)
    ap.add_argument("--n", type=int, default=160)
    ap.add_argument("--k", type=int, default=160)
    ap.add_argument("--l0-buffers", type=int, default=1, choices=(1, 2))
    args = ap.parse_args()
    rate = cube_loop_macs_per_cycle(args.soc, args.m, args.n, args.k, l0_buffers=args.l0_buffers)
    from simulator.profile import load_profile
    peak = load_profile(args.soc).cube.macs_per_cycle["FLOAT16"]
    print(f"{rate:.0f} MAC/cycle = {rate / peak:.1%} of the Cube's {peak}")


if __name__ == "__main__":
    main()
