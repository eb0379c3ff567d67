"""aclnnAddmm against a float64 formula (beta self + alpha mat1 @ mat2) and torch.addmm (float64)
where torch is installed: random M, K, N, every form of self that broadcasts ([N], [1, N], [M, 1],
[M, N]), beta and alpha including 0, a transposed mat2 view (a Linear layer's weight.t(), as
torch's addmm gets it), every dtype and cubeMathType the series allows, on Ascend910A, Ascend310P3
and Ascend910B1 / B4. `ADDMM_CASES=N` runs more.

Tolerance, with A = |mat1| @ |mat2|: the MatMul's as tests/test_matmul.py states it, scaled by
|alpha|, plus a unit roundoff u of the coarsest dtype involved for each rounding after the Cube
(its result, alpha's and beta's products, the add): u (3 |alpha| A + 2 |beta self|), plus out's
rounding of the result.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from conftest import BF16, F16, F32, UNIT, VECTOR_CHIPS, assert_status, assert_within, cube_dtype
from simulator import TensorLayout as T

N_CASES = int(os.environ.get("ADDMM_CASES", "40"))
CUBE_UNIT = {"FLOAT16": 2.0 ** -11, "BF16": 2.0 ** -8, "HF32": 2.0 ** -12, "FLOAT": 2.0 ** -24}


def draw_case(seed: int) -> dict:
    rng = np.random.default_rng([seed, 127])
    soc = list(VECTOR_CHIPS)[seed % len(VECTOR_CHIPS)]
    series = VECTOR_CHIPS[soc]
    dtypes = [F16, F32] + ([BF16] if series == "A2" else [])
    dtype = dtypes[int(rng.integers(0, len(dtypes)))]
    maths = [1, 2] if dtype == F32 and series != "A2" else ([0, 1] if dtype == BF16 else [0, 1, 2, 3])
    hi = 300 if rng.random() < 0.2 else 70
    M, K, N = (int(rng.integers(1, hi)) for _ in range(3))
    form = int(rng.integers(0, 4))
    return dict(seed=seed, soc=soc, M=M, K=K, N=N, dtype=dtype, math=int(rng.choice(maths)),
                self_shape={0: (N,), 1: (1, N), 2: (M, 1), 3: (M, N)}[form],
                beta=float(rng.choice([1.0, 1.0, 0.0, 0.5, -2.0])), alpha=float(rng.choice([1.0, 1.0, 0.0, 1.5])),
                transposed=bool(rng.random() < 0.4))


CASES = [draw_case(i) for i in range(N_CASES)]


def _id(c) -> str:
    return (f"seed{c['seed']}-{c['soc']}-{c['M']}x{c['K']}x{c['N']}-self{'x'.join(map(str, c['self_shape']))}-"
            f"b{c['beta']}-a{c['alpha']}-{c['dtype'].name}-m{c['math']}{'-wT' if c['transposed'] else ''}")


def _run(c):
    rng = np.random.default_rng(12_000 + c["seed"])
    x = rng.standard_normal((c["M"], c["K"])).astype(c["dtype"])
    w = rng.standard_normal((c["N"], c["K"])).astype(c["dtype"]).T if c["transposed"] else \
        rng.standard_normal((c["K"], c["N"])).astype(c["dtype"])
    s = rng.standard_normal(c["self_shape"]).astype(c["dtype"])
    if c["beta"] == 0:
        s[...] = np.nan                 # beta 0 ignores self, NaNs included
    kept = (x.copy(), w.copy(), s.copy())
    r = simulator.run("Addmm", c["soc"], self=s, mat1=x, mat2=w, beta=c["beta"], alpha=c["alpha"],
                      cubeMathType=c["math"])
    for a, b in zip((x, w, s), kept):
        assert np.array_equal(a, b, equal_nan=True), "an input was modified"
    return x, w, s, r.outputs["out"]


def _close(c, got, x64, w64, s64, ref, what):
    u = max(UNIT[c["dtype"]], CUBE_UNIT[cube_dtype(VECTOR_CHIPS[c["soc"]], c["dtype"], c["math"])])
    mag = abs(c["alpha"]) * (np.abs(x64) @ np.abs(w64))
    own = 0.0 if c["beta"] == 0 else abs(c["beta"]) * np.abs(s64)
    cube = 2 * CUBE_UNIT[cube_dtype(VECTOR_CHIPS[c["soc"]], c["dtype"], c["math"])] + max(1e-5, c["K"] * 2.0 ** -24)
    tol = (cube + 3 * u) * mag + 2 * u * own + UNIT[c["dtype"]] * np.abs(ref) + \
        float(ml_dtypes.finfo(c["dtype"]).smallest_subnormal) / 2
    assert got.shape == ref.shape and got.dtype == c["dtype"], what
    assert_within(got, ref, tol, what)


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_addmm_matches_the_formula(c):
    x, w, s, got = _run(c)
    x64, w64, s64 = (a.astype(np.float64) for a in (x, w, s))
    ref = c["alpha"] * (x64 @ w64) + (0.0 if c["beta"] == 0 else c["beta"] * s64)
    _close(c, got, x64, w64, s64, ref, _id(c))


@pytest.mark.parametrize("c", CASES[:20], ids=[_id(c) for c in CASES[:20]])
def test_addmm_matches_torch(c):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    x, w, s, got = _run(c)
    tx, tw, ts = (torch.from_numpy(np.ascontiguousarray(a).astype(np.float64)) for a in (x, w, s))
    ref = torch.addmm(ts, tx, tw, beta=c["beta"], alpha=c["alpha"]).numpy()
    _close(c, got, tx.numpy(), tw.numpy(), ts.numpy(), ref, f"{_id(c)} vs torch")


def test_launches_follow_the_scalars():
    def names(soc, **kw):
        a = dict(self=T((384,), F16), mat1=T((256, 512), F16), mat2=T((512, 384), F16), beta=1.0, alpha=1.0,
                 cubeMathType=0) | kw
        return [x["name"] for x in simulator.run("Addmm", soc, mode="timing", **a).report.launches]
    assert names("Ascend910B1") == ["MatMul", "BroadcastTo(self)", "Add"]
    assert names("Ascend910B1", self=T((256, 384), F16), beta=0.5, alpha=2.0) == ["MatMul", "Muls", "Muls", "Add"]
    assert names("Ascend910B1", beta=0.0) == ["MatMul"]
    assert names("Ascend910A", beta=0.0, alpha=3.0) == ["TransData(ND -> FRACTAL_NZ)"] * 2 + ["MatMul", "Muls"]


def _args(**over):
    a = dict(self=T((4,), F16), mat1=T((8, 16), F16), mat2=T((16, 4), F16), beta=1.0, alpha=1.0,
             out=T((8, 4), F16), cubeMathType=0)
    a.update(over)
    return a


STATUS = {
    "null mat1": (161001, "Ascend910B1", _args(mat1=None)),
    "null self": (161001, "Ascend910B1", _args(self=None)),
    "bf16 on 910A": (161002, "Ascend910A", _args(self=T((4,), BF16), mat1=T((8, 16), BF16), mat2=T((16, 4), BF16),
                                                  out=T((8, 4), BF16))),
    "1-D mat1": (161002, "Ascend910B1", _args(mat1=T((16,), F16))),
    "K differs": (161002, "Ascend910B1", _args(mat2=T((15, 4), F16))),
    "self does not broadcast": (161002, "Ascend910B1", _args(self=T((3,), F16))),
    "3-D self": (161002, "Ascend910B1", _args(self=T((1, 8, 4), F16))),
    "out shape": (161002, "Ascend910B1", _args(out=T((8, 5), F16))),
    "beta not a number": (161002, "Ascend910B1", _args(beta="one")),
    "FP32 KEEP_DTYPE on 910A": (161002, "Ascend910A", _args(self=T((4,), F32), mat1=T((8, 16), F32),
                                                             mat2=T((16, 4), F32), out=T((8, 4), F32))),
    "cubeMathType 7": (161002, "Ascend910B1", _args(cubeMathType=7)),
}


@pytest.mark.parametrize("name", list(STATUS))
def test_documented_status_codes(name):
    status, soc, args = STATUS[name]
    assert_status("Addmm", soc, args, status)
