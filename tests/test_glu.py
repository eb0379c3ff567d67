"""aclnnGlu and aclnnGluBackward against float64 formulas and torch's glu and its autograd (float64)
where torch is installed: random shapes (ranks 1-5), every dim (negative too), non-contiguous
inputs, strided outputs, an output dtype other than self's (Glu), every dtype of the series, on
Ascend910A, Ascend310P3 and Ascend910B1 / B4. `GLU_CASES=N` runs more.

Tolerance: each launch of CANN's composition rounds to its buffer's dtype (sigmoid(b), a * s,
a - a * s are stored; FLOAT16 backward runs in FP32): |out - ref| <= 8 (u_self + u_out) |parts|,
|parts| the magnitudes that make the value (|a| s for Glu; |gradOut| s and |gradOut| s (|a| +
|a| s) for the two halves of the gradient), plus half the output's subnormal spacing.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from conftest import BF16, F16, F32, UNIT, VECTOR_CHIPS, assert_status, assert_within
from simulator import TensorLayout as T

CHIPS = VECTOR_CHIPS
N_CASES = int(os.environ.get("GLU_CASES", "120"))


def draw_case(seed: int) -> dict:
    rng = np.random.default_rng([seed, 53])
    soc = list(CHIPS)[seed % len(CHIPS)]
    dtypes = [F16, F32] + ([BF16] if CHIPS[soc] == "A2" else [])
    rank = int(rng.integers(1, 6))
    big = rng.random() < 0.1
    shape = [int(rng.integers(1, 40 if big else 7)) for _ in range(rank)]
    dim = int(rng.integers(-rank, rank))
    shape[dim] *= 2
    dtype = dtypes[int(rng.integers(0, len(dtypes)))]
    out_dtype = dtypes[int(rng.integers(0, len(dtypes)))] if rng.random() < 0.2 else dtype
    return dict(seed=seed, soc=soc, op="GluBackward" if rng.random() < 0.5 else "Glu", shape=tuple(shape), dim=dim,
                dtype=dtype, out_dtype=out_dtype, noncontig=bool(rng.random() < 0.25 and rank >= 2),
                strided_out=bool(rng.random() < 0.2))


def _id(c) -> str:
    return (f"seed{c['seed']}-{c['soc']}-{c['op']}-{'x'.join(map(str, c['shape']))}-dim{c['dim']}-{c['dtype'].name}"
            + (f"-to-{c['out_dtype'].name}" if c["op"] == "Glu" and c["out_dtype"] != c["dtype"] else ""))


CASES = [draw_case(i) for i in range(N_CASES)]


def _rand(rng, shape, dtype, noncontig):
    a = rng.standard_normal(shape).astype(dtype)
    if noncontig and a.ndim >= 2:
        a = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 0, -1)), 0, -1)
    return a


def _halves(x, dim):
    return np.split(x.astype(np.float64), 2, axis=dim)


def reference(c, x, g):
    """(result, magnitude of its parts) in float64, from the formula."""
    a, b = _halves(x, c["dim"])
    s = 1 / (1 + np.exp(-b))
    if c["op"] == "Glu":
        return a * s, np.abs(a) * s
    g = g.astype(np.float64)
    grad_a, grad_b = g * s, g * s * (a - a * s)
    return (np.concatenate([grad_a, grad_b], axis=c["dim"]),
            np.concatenate([np.abs(g) * s, np.abs(g) * s * (np.abs(a) + np.abs(a) * s)], axis=c["dim"]))


def _run(c):
    rng = np.random.default_rng(70_000 + c["seed"])
    x = _rand(rng, c["shape"], c["dtype"], c["noncontig"])
    half = list(c["shape"])
    half[c["dim"]] //= 2
    g = _rand(rng, tuple(half), c["dtype"], c["noncontig"]) if c["op"] == "GluBackward" else None
    kept = (x.copy(), None if g is None else g.copy())
    shape = tuple(half) if c["op"] == "Glu" else c["shape"]
    dtype = c["out_dtype"] if c["op"] == "Glu" else c["dtype"]
    extra, buf = {}, None
    if c["strided_out"]:
        buf = np.full(shape[:-1] + (2 * shape[-1],), np.nan, dtype)
        extra["out"] = buf[..., ::2]
    elif dtype != c["dtype"]:
        extra["out"] = np.zeros(shape, dtype)
    if c["op"] == "Glu":
        r = simulator.run("Glu", c["soc"], self=x, dim=c["dim"], **extra)
    else:
        r = simulator.run("GluBackward", c["soc"], gradOut=g, self=x, dim=c["dim"], **extra)
    assert np.array_equal(x, kept[0]) and (g is None or np.array_equal(g, kept[1])), "an input was modified"
    out = r.outputs["out"]
    if buf is not None:
        assert np.isnan(buf[..., 1::2].astype(np.float32)).all(), "a gap of the strided output was written"
        out = buf[..., ::2]
    return x, g, out


def _close(c, out, ref, parts, what):
    dtype = c["out_dtype"] if c["op"] == "Glu" else c["dtype"]
    tol = 8 * (UNIT[c["dtype"]] + UNIT[dtype]) * parts + float(ml_dtypes.finfo(dtype).smallest_subnormal) / 2
    assert_within(out, ref, tol, what)


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_glu_matches_the_formula(c):
    x, g, out = _run(c)
    ref, parts = reference(c, x, g)
    assert out.shape == ref.shape and out.dtype == (c["out_dtype"] if c["op"] == "Glu" else c["dtype"])
    _close(c, out, ref, parts, _id(c))


@pytest.mark.parametrize("c", CASES[:50], ids=[_id(c) for c in CASES[:50]])
def test_glu_matches_torch(c):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    x, g, out = _run(c)
    tx = torch.from_numpy(np.ascontiguousarray(x).astype(np.float64)).requires_grad_()
    y = torch.nn.functional.glu(tx, c["dim"])
    if c["op"] == "Glu":
        want = y.detach().numpy()
    else:
        y.backward(torch.from_numpy(np.ascontiguousarray(g).astype(np.float64)))
        want = tx.grad.numpy()
    _, parts = reference(c, x, g)
    _close(c, out, want, parts, f"{_id(c)} vs torch")


def test_launches_are_canns_composition():
    r = simulator.run("Glu", "Ascend910B1", mode="timing", self=T((8, 64), F16), dim=-1)
    assert [x["name"] for x in r.report.launches] == ["SplitV", "Sigmoid", "Mul"]
    r = simulator.run("GluBackward", "Ascend910A", mode="timing", gradOut=T((8, 32), F16), self=T((8, 64), F16),
                      dim=1)
    assert [x["name"] for x in r.report.launches] == ["Cast", "Cast", "SplitV", "Sigmoid", "Mul", "Mul", "Sub", "Mul",
                                                      "ConcatD", "Cast"]
    r = simulator.run("GluBackward", "Ascend910B1", mode="timing", gradOut=T((8, 32), F32), self=T((8, 64), F32),
                      dim=1)
    assert [x["name"] for x in r.report.launches] == ["SplitV", "Sigmoid", "Mul", "Mul", "Sub", "Mul", "ConcatD"]


STATUS = {
    "Glu: null self": (161001, "Glu", dict(self=None, dim=0, out=T((2,), F16))),
    "Glu: int32": (161002, "Glu", dict(self=T((4,), np.int32), dim=0)),
    "Glu: bf16 on 910A": (161002, "Glu", dict(self=T((4,), BF16), dim=0)),
    "Glu: dim out of range": (161002, "Glu", dict(self=T((4, 2), F16), dim=2, out=T((4, 1), F16))),
    "Glu: odd dim": (161002, "Glu", dict(self=T((4, 3), F16), dim=1, out=T((4, 1), F16))),
    "Glu: out shape": (161002, "Glu", dict(self=T((4, 2), F16), dim=0, out=T((4, 1), F16))),
    "Glu: rank 0": (161002, "Glu", dict(self=T((), F16), dim=0, out=T((), F16))),
    "Glu: rank 9": (161002, "Glu", dict(self=T((2,) * 9, F16), dim=0)),
    "Glu: dim not an integer": (161002, "Glu", dict(self=T((4,), F16), dim=0.5, out=T((2,), F16))),
    "GluBackward: null gradOut": (161001, "GluBackward", dict(gradOut=None, self=T((4,), F16), dim=0)),
    "GluBackward: gradOut dtype": (161002, "GluBackward", dict(gradOut=T((2,), F32), self=T((4,), F16), dim=0)),
    "GluBackward: out dtype": (161002, "GluBackward", dict(gradOut=T((2,), F16), self=T((4,), F16), dim=0,
                                                           out=T((4,), F32))),
    "GluBackward: gradOut shape": (161002, "GluBackward", dict(gradOut=T((4,), F16), self=T((4,), F16), dim=0)),
    "GluBackward: out shape": (161002, "GluBackward", dict(gradOut=T((2,), F16), self=T((4,), F16), dim=0,
                                                           out=T((2,), F16))),
    "GluBackward: odd dim": (161002, "GluBackward", dict(gradOut=T((2,), F16), self=T((5,), F16), dim=-1)),
}


@pytest.mark.parametrize("name", list(STATUS))
def test_documented_status_codes(name):
    status, op, args = STATUS[name]
    assert_status(op, "Ascend910A" if "910A" in name else "Ascend910B1", args, status)
