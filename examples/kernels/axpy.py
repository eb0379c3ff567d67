"""A user's own kernel file for `ascend-sim kernel`: z = a * x + y over FLOAT16.

    ascend-sim kernel examples/kernels/axpy.py --soc Ascend910B4
    ascend-sim kernel examples/kernels/axpy.py --set cores.aiv.count=24 --mode timing

The convention: the file defines the kernel body (written with simulator.kernel), a
`launch(profile)` that returns what to run, and optionally `check(outputs)`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.kernel import (BUFFER_NUM, GM_ADDR, Add, DataCopy, GetBlockIdx, GlobalTensor, Loop, Muls,
                              TPipe, TPosition, TQue, half)

N = 48 * 8 * 2048            # elements
A = 0.5


@dataclass
class AxpyTiling:
    blockLength: int
    tileLength: int
    a: float


def axpy(x: GM_ADDR, y: GM_ADDR, z: GM_ADDR, t: AxpyTiling):
    off = t.blockLength * GetBlockIdx()
    xGm, yGm, zGm = GlobalTensor(half), GlobalTensor(half), GlobalTensor(half)
    xGm.SetGlobalBuffer(x + off, t.blockLength)
    yGm.SetGlobalBuffer(y + off, t.blockLength)
    zGm.SetGlobalBuffer(z + off, t.blockLength)
    pipe = TPipe()
    qx, qy, qz = TQue(TPosition.VECIN, BUFFER_NUM), TQue(TPosition.VECIN, BUFFER_NUM), TQue(TPosition.VECOUT, BUFFER_NUM)
    T = t.tileLength
    for q in (qx, qy, qz):
        pipe.InitBuffer(q, BUFFER_NUM, T * half.itemsize)
    # Loop: a loop fast mode may fast-forward (its iterations alike; BUFFER_NUM the buffer rotation)
    for i in Loop(t.blockLength // T, period=BUFFER_NUM):
        xl, yl = qx.AllocTensor(half), qy.AllocTensor(half)          # CopyIn
        DataCopy(xl, xGm[i * T], T)
        DataCopy(yl, yGm[i * T], T)
        qx.EnQue(xl)
        qy.EnQue(yl)
        xl, yl = qx.DeQue(half), qy.DeQue(half)                      # Compute
        zl = qz.AllocTensor(half)
        Muls(xl, xl, t.a, T)
        Add(zl, xl, yl, T)
        qz.EnQue(zl)
        qx.FreeTensor(xl)
        qy.FreeTensor(yl)
        zl = qz.DeQue(half)                                          # CopyOut
        DataCopy(zGm[i * T], zl, T)
        qz.FreeTensor(zl)


def launch(profile):
    """What to run on the chip `profile` describes (the CLI passes the profile, --set included)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float16)
    y = rng.standard_normal(N).astype(np.float16)
    blocks = 48                       # on a chip with fewer vector cores the blocks run in waves
    print(f"launch: {blocks} blocks on a chip with {profile.core_kind_for('vector')[1].count} vector cores")
    return {"body": axpy, "block_dim": blocks, "kind": "vector",
            "args": {"x": x, "y": y, "z": np.zeros_like(x), "tiling": AxpyTiling(N // blocks, 2048, A)}}


def check(outputs):
    """Called with the arrays after the kernel (functional mode)."""
    x, y, z = outputs["x"], outputs["y"], outputs["z"]
    want = (x * np.float16(A)) + y
    assert np.allclose(z.astype(np.float32), want.astype(np.float32), atol=1e-2), "z != a*x + y"
