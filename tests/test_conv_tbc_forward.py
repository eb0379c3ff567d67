"""aclnnConvTbc (PyTorch's conv_tbc forward) against a float64 formula written here and, where torch
is installed, torch.conv_tbc in float64: random T, B, Cin, Cout (across the C0 boundaries), K 1..5,
pad 0..3, every dtype and cubeMathType the series allows, non-contiguous self, on Ascend910A and
Ascend910B1 / B4; the inference series refuses it. `CONV_TBC_FORWARD_CASES=N` runs more.

    output[t, b, o] = bias[o] + sum_k sum_c self_padded[t + k, b, c] * weight[k, c, o]

Tolerance, as tests/test_conv_tbc_random.py states it, with A the same sum over magnitudes:
|out - ref| <= (2 u_c + max(1e-5, K Cin 2^-24)) A + 2 u_o |ref| + s_o (the bias is added after the
output's rounding, in FP32, and rounded again: docs/CONVOLUTION.md).
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from conftest import assert_status, assert_within, cube_dtype
from simulator import TensorLayout as T

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
UNIT = {"FLOAT16": 2.0 ** -11, "BF16": 2.0 ** -8, "HF32": 2.0 ** -12, "FLOAT": 2.0 ** -24}
OUT_UNIT = {F16: 2.0 ** -11, BF16: 2.0 ** -8, F32: 2.0 ** -24}
CHIPS = {"Ascend910A": "training", "Ascend910B1": "A2", "Ascend910B4": "A2"}
N_CASES = int(os.environ.get("CONV_TBC_FORWARD_CASES", "60"))


def draw_case(seed: int) -> dict:
    rng = np.random.default_rng([seed, 97])
    soc = list(CHIPS)[seed % len(CHIPS)]
    series = CHIPS[soc]
    dtypes = [F16, F32] + ([BF16] if series == "A2" else [])
    dtype = dtypes[int(rng.integers(0, len(dtypes)))]
    maths = [1, 2] if series == "training" and dtype == F32 else [0, 1, 2, 3]
    if dtype == BF16:
        maths = [0, 1]
    K, pad = int(rng.integers(1, 6)), int(rng.integers(0, 4))
    t = max(1, K - 2 * pad) + int(rng.integers(0, 12))
    chans = [1, 7, 8, 9, 15, 16, 17, 33, 64, 100]
    return dict(seed=seed, soc=soc, dtype=dtype, math=int(rng.choice(maths)), T=t, B=int(rng.integers(1, 5)),
                Cin=int(rng.choice(chans)), Cout=int(rng.choice(chans)), K=K, pad=pad,
                noncontig=bool(rng.random() < 0.3))


CASES = [draw_case(i) for i in range(N_CASES)]


def _id(c) -> str:
    return (f"seed{c['seed']}-{c['soc']}-T{c['T']}B{c['B']}-{c['Cin']}to{c['Cout']}-K{c['K']}p{c['pad']}-"
            f"{c['dtype'].name}-m{c['math']}")


def _data(c):
    rng = np.random.default_rng(5_000 + c["seed"])
    x = rng.standard_normal((c["T"], c["B"], c["Cin"])).astype(c["dtype"])
    if c["noncontig"]:
        x = np.ascontiguousarray(x.transpose(1, 0, 2)).transpose(1, 0, 2)
    w = (rng.standard_normal((c["K"], c["Cin"], c["Cout"])) / np.sqrt(c["K"] * c["Cin"])).astype(c["dtype"])
    b = rng.standard_normal(c["Cout"]).astype(c["dtype"])
    return x, w, b


def reference(x, w, b, pad):
    """(value, magnitude sum) in float64 from the formula."""
    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    xp = np.pad(x64, ((pad, pad), (0, 0), (0, 0)))
    K, t_out = w.shape[0], xp.shape[0] - w.shape[0] + 1
    out, mag = np.tile(b64, (t_out, x.shape[1], 1)), np.tile(np.abs(b64), (t_out, x.shape[1], 1))
    for k in range(K):
        out += np.einsum("tbc,co->tbo", xp[k:k + t_out], w64[k])
        mag += np.einsum("tbc,co->tbo", np.abs(xp[k:k + t_out]), np.abs(w64[k]))
    return out, mag


def _close(c, out, ref, mag, what):
    series = CHIPS[c["soc"]]
    comp = cube_dtype(series, c["dtype"], c["math"])
    n = c["K"] * c["Cin"]
    tol = ((2 * UNIT[comp] + max(1e-5, n * 2.0 ** -24)) * mag + 2 * OUT_UNIT[c["dtype"]] * np.abs(ref)
           + float(ml_dtypes.finfo(c["dtype"]).smallest_subnormal) / 2)
    assert_within(out, ref, tol, what)


def _run(c):
    x, w, b = _data(c)
    kept = [a.copy() for a in (x, w, b)]
    r = simulator.run("ConvTbc", c["soc"], self=x, weight=w, bias=b, pad=c["pad"], cubeMathType=c["math"])
    assert all(np.array_equal(a, k) for a, k in zip((x, w, b), kept)), "an input was modified"
    return x, w, b, r.outputs["output"]


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_conv_tbc_matches_the_formula(c):
    x, w, b, out = _run(c)
    ref, mag = reference(x, w, b, c["pad"])
    assert out.shape == ref.shape and out.dtype == c["dtype"]
    _close(c, out, ref, mag, _id(c))


@pytest.mark.parametrize("c", CASES[:25], ids=[_id(c) for c in CASES[:25]])
def test_conv_tbc_matches_torch(c):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    x, w, b, out = _run(c)
    want = torch.conv_tbc(*(torch.from_numpy(np.ascontiguousarray(a).astype(np.float64)) for a in (x, w, b)),
                          c["pad"]).numpy()
    _, mag = reference(x, w, b, c["pad"])
    _close(c, out, want, mag, f"{_id(c)} vs torch")


def _args(**over):
    a = dict(self=T((10, 2, 8), F16), weight=T((3, 8, 16), F16), bias=T((16,), F16), pad=1, output=T((10, 2, 16), F16),
             cubeMathType=0)
    a.update(over)
    return a


STATUS = {
    "null weight": (161001, "Ascend910B1", _args(weight=None)),
    "inference series": (161002, "Ascend310P3", _args()),
    "bf16 on 910A": (161002, "Ascend910A", _args(self=T((10, 2, 8), BF16))),
    "rank": (161002, "Ascend910B1", _args(self=T((10, 2, 8, 1), F16))),
    "channels": (161002, "Ascend910B1", _args(weight=T((3, 4, 16), F16))),
    "bias": (161002, "Ascend910B1", _args(bias=T((8,), F16))),
    "negative pad": (161002, "Ascend910B1", _args(pad=-1)),
    "output shape": (161002, "Ascend910B1", _args(output=T((9, 2, 16), F16))),
    "cubeMathType": (161002, "Ascend910B1", _args(cubeMathType=7)),
}


@pytest.mark.parametrize("name", list(STATUS))
def test_documented_status_codes(name):
    status, soc, args = STATUS[name]
    assert_status("ConvTbc", soc, args, status)
