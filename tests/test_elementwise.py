"""The elementwise family (Add, Mul, Relu, Sigmoid, Silu, ThresholdBackward) against float64 formulas and torch's
own ops in float64 where torch is installed: random shapes (ranks 1-5, broadcast operands,
non-contiguous inputs, strided outputs, odd and tiny sizes), every dtype of the series, on
Ascend910A, Ascend310P3 and Ascend910B1 / B4. `ELEMENTWISE_CASES=N` runs more.

Tolerance: the computation rounds in its compute dtype (FP16 natively, FP32 for BF16 and FP32,
and for Sigmoid and SiLU always: CANN's kernels) and once to the output dtype: |out - ref| <=
(u_c + u_o) (|ref| + |parts|), with |parts| the magnitudes that make the result (|self| +
|alpha other| for Add; four times the value for Sigmoid and SiLU, whose exp and reciprocal each
round), plus half the output's subnormal spacing.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from conftest import assert_status, assert_within
from simulator import TensorLayout as T

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
UNIT = {F16: 2.0 ** -11, BF16: 2.0 ** -8, F32: 2.0 ** -24}
CHIPS = {"Ascend910A": "training", "Ascend310P3": "inference", "Ascend910B1": "A2", "Ascend910B4": "A2"}
OPS = ("Add", "Mul", "Relu", "Sigmoid", "Silu", "ThresholdBackward")
N_CASES = int(os.environ.get("ELEMENTWISE_CASES", "200"))


def draw_case(seed: int) -> dict:
    rng = np.random.default_rng([seed, 31])
    soc = list(CHIPS)[seed % len(CHIPS)]
    op = OPS[int(rng.integers(0, len(OPS)))]
    dtypes = [F16, F32] + ([BF16] if CHIPS[soc] == "A2" else [])
    rank = int(rng.integers(1, 6))
    big = rng.random() < 0.1
    shape = tuple(int(rng.integers(1, 40 if big else 9)) for _ in range(rank))
    other = shape
    if op in ("Add", "Mul", "ThresholdBackward") and rng.random() < 0.4:           # a broadcast operand
        other = tuple(1 if rng.random() < 0.5 else d for d in shape)[int(rng.integers(0, rank)):]
        if rng.random() < 0.5:
            shape, other = other, shape
    return dict(seed=seed, soc=soc, op=op, shape=shape, other=other, dtype=dtypes[int(rng.integers(0, len(dtypes)))],
                alpha=float(rng.choice([1.0, 0.5, -2.0])), threshold=float(rng.choice([0.0, 0.3, -1.0])),
                noncontig=bool(rng.random() < 0.2 and rank >= 2), strided_out=bool(rng.random() < 0.2))


def _id(c) -> str:
    return f"seed{c['seed']}-{c['soc']}-{c['op']}-{'x'.join(map(str, c['shape']))}-{c['dtype'].name}"


CASES = [draw_case(i) for i in range(N_CASES)]


def _arrays(c):
    rng = np.random.default_rng(40_000 + c["seed"])

    def rand(shape):
        a = rng.standard_normal(shape).astype(c["dtype"])
        if c["noncontig"] and a.ndim >= 2:
            a = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)
        return a
    return rand(c["shape"]), rand(c["other"])


def reference(c, a, b):
    """(result, magnitude of its parts) in float64."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if c["op"] == "Add":
        return a64 + c["alpha"] * b64, np.abs(a64) + np.abs(c["alpha"] * b64)
    if c["op"] == "Mul":
        return a64 * b64, np.abs(a64 * b64)
    if c["op"] == "Relu":
        return np.maximum(a64, 0), np.abs(a64)
    if c["op"] in ("Sigmoid", "Silu"):
        s = 1 / (1 + np.exp(-a64))
        # FP32 exp and reciprocal: a few units of FP32 each, relative to the value
        return (s, 4 * s + 0) if c["op"] == "Sigmoid" else (a64 * s, 4 * np.abs(a64 * s))
    out = np.where(b64 > c["threshold"], a64, 0.0)
    return out, np.abs(out)


def _call(c, a, b, **out):
    op = c["op"]
    if op == "Add":
        return simulator.run(op, c["soc"], self=a, other=b, alpha=c["alpha"], **out)
    if op == "Mul":
        return simulator.run(op, c["soc"], self=a, other=b, **out)
    if op in ("Relu", "Sigmoid", "Silu"):
        return simulator.run(op, c["soc"], self=a, **out)
    return simulator.run(op, c["soc"], gradOutput=a, self=b, threshold=c["threshold"], **out)


def _run(c):
    a, b = _arrays(c)
    kept = (a.copy(), b.copy())
    shape = np.broadcast_shapes(a.shape, b.shape) if c["op"] in ("Add", "Mul", "ThresholdBackward") else a.shape
    name = "gradInput" if c["op"] == "ThresholdBackward" else "out"
    extra, buf = {}, None
    if c["strided_out"] and len(shape):
        buf = np.full(tuple(shape[:-1]) + (2 * shape[-1],), np.nan, c["dtype"])
        extra[name] = buf[..., ::2]
    r = _call(c, a, b, **extra)
    assert np.array_equal(a, kept[0]) and np.array_equal(b, kept[1]), "an input was modified"
    out = r.outputs[name]
    if buf is not None:
        assert np.isnan(buf[..., 1::2].astype(np.float32)).all(), "a gap of the strided output was written"
        out = buf[..., ::2]
    return a, b, out


def _close(out, ref, parts, dtype, what, op=""):
    comp = F16 if dtype == F16 and op not in ("Sigmoid", "Silu") else F32
    tol = (UNIT[comp] + UNIT[dtype]) * (np.abs(ref) + parts) + float(ml_dtypes.finfo(dtype).smallest_subnormal) / 2
    assert_within(out, ref, tol, what)


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_elementwise_matches_the_formula(c):
    a, b, out = _run(c)
    ref, parts = reference(c, a, b)
    assert out.shape == ref.shape
    _close(out, ref, parts, c["dtype"], _id(c), c["op"])


@pytest.mark.parametrize("c", CASES[:80], ids=[_id(c) for c in CASES[:80]])
def test_elementwise_matches_torch(c):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    a, b, out = _run(c)
    ta, tb = (torch.from_numpy(np.ascontiguousarray(x).astype(np.float64)) for x in (a, b))
    want = {"Add": lambda: torch.add(ta, tb, alpha=c["alpha"]), "Mul": lambda: torch.mul(ta, tb),
            "Relu": lambda: torch.relu(ta), "Sigmoid": lambda: torch.sigmoid(ta),
            "Silu": lambda: torch.nn.functional.silu(ta),
            "ThresholdBackward": lambda: torch.ops.aten.threshold_backward(ta, tb, c["threshold"])}[c["op"]]().numpy()
    _, parts = reference(c, a, b)
    _close(out, want, parts, c["dtype"], f"{_id(c)} vs torch", c["op"])


def test_launch_is_canns_kernel_and_a_broadcast_outside_ub_is_a_copy():
    r = simulator.run("Add", "Ascend910B1", mode="timing", self=T((8, 64), F16), other=T((64,), F16), alpha=1.0)
    assert [launch["name"] for launch in r.report.launches] == ["Add"]
    # both operands broadcast, along different axes: the kernel broadcasts one in UB, the other is copied out
    r = simulator.run("Add", "Ascend910B1", mode="timing", self=T((8, 1), F16), other=T((1, 64), F16), alpha=1.0)
    assert [launch["name"] for launch in r.report.launches] == ["Contiguous(other)", "Add"]
    # aclnnAdd (aclnn_add.cpp): a mixed pair as it is where alpha is 1; otherwise each input cast to the
    # promoted dtype, then Add, or Axpy where alpha is not 1 (FLOAT, FLOAT16), or a Mul of other by
    # alpha then Add (BF16); a Cast to out's dtype where it differs. aclnnThresholdBackward runs
    # ReluGrad at threshold 0, ThresholdGradV2D at any other
    for dtypes, alpha, kernels in (((F32, F32, F32), 1.0, ["Add"]), ((F32, F32, F32), 0.5, ["Axpy"]),
                                   ((F16, F16, F16), -2.0, ["Axpy"]), ((F16, F32, F32), 1.0, ["Add"]),
                                   ((F16, F32, F32), 0.5, ["Cast", "Axpy"]), ((BF16, BF16, BF16), 0.5, ["Mul", "Add"]),
                                   ((F32, F32, F32), 1 + 1e-9, ["Add"]), ((F16, BF16, F32), 1.0, ["Cast", "Cast", "Add"]),
                                   ((BF16, F32, BF16), 1.0, ["Add", "Cast"]), ((F16, F16, F32), 1.0, ["Add", "Cast"])):
        r = simulator.run("Add", "Ascend910B1", mode="timing", self=T((8, 64), dtypes[0]), other=T((8, 64), dtypes[1]),
                          alpha=alpha, out=T((8, 64), dtypes[2]))
        assert [launch["name"] for launch in r.report.launches] == kernels, (dtypes, alpha)
    for threshold, kernel in ((0.0, "ReluGrad"), (0.5, "ThresholdGradV2D")):
        r = simulator.run("ThresholdBackward", "Ascend910A", mode="timing", gradOutput=T((4, 8), F32),
                          self=T((4, 8), F32), threshold=threshold)
        assert [launch["name"] for launch in r.report.launches] == [kernel]


def test_relu_grad_compares_with_zero_and_add_reads_alpha_in_fp32():
    """A threshold within FP32's epsilon of 0 runs CANN's ReluGrad, which compares self with 0; an
    alpha that is 1 in FP32 (or NaN, which CANN's test also reads as 1) adds self and other as they are."""
    x = np.array([5e-9, -5e-9, 1e-3, -1e-3], np.float32)
    g = np.ones(4, np.float32)
    for threshold in (1e-8, -1e-8):
        r = simulator.run("ThresholdBackward", "Ascend910B1", gradOutput=g, self=x, threshold=threshold)
        assert [launch["name"] for launch in r.report.launches] == ["ReluGrad"]
        np.testing.assert_array_equal(r.outputs["gradInput"], np.where(x > 0, g, 0))
    a, b = np.array([1.0, 2.0], np.float32), np.array([3.0, 5.0], np.float32)
    for alpha in (1 + 1e-9, float("nan")):
        np.testing.assert_array_equal(simulator.run("Add", "Ascend910B1", self=a, other=b, alpha=alpha).outputs["out"],
                                      a + b)


@pytest.mark.parametrize("soc, self_shape, other_shape, dtype", [
    ("Ascend910B1", (8, 96, 1, 1), (8, 96, 7, 7), F16),           # EfficientNet's squeeze-excite scale
    ("Ascend910A", (4, 24, 9, 9), (4, 24, 1, 1), F32),
    ("Ascend310P3", (2, 3, 1), (2, 3, 40000), F16),              # a row longer than a UB tile: tiles part rows
    ("Ascend910B4", (3, 1), (3, 5), BF16),
])
def test_an_operand_broadcast_along_rows_is_broadcast_in_ub(soc, self_shape, other_shape, dtype):
    """(N, C, 1, 1) against (N, C, H, W): no Contiguous copy of the expanded operand; the kernel
    reads one value a row and broadcasts it in UB, so it moves fewer bytes than a same-shape Mul
    and, past a few tens of thousands of elements, takes fewer cycles."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(self_shape).astype(dtype), rng.standard_normal(other_shape).astype(dtype)
    r = simulator.run("Mul", soc, self=a, other=b)
    assert [launch["name"] for launch in r.report.launches] == ["Mul"]
    want = a.astype(np.float64) * b.astype(np.float64)
    _close(r.outputs["out"], want, np.abs(want), dtype, "row broadcast")
    big = max(self_shape, other_shape, key=lambda s: int(np.prod(s)))
    same = simulator.run("Mul", soc, mode="timing", self=T(big, dtype), other=T(big, dtype))
    # a small call pays the staging copy and the Broadcast instruction in every block (910A, 7776
    # elements: 14 % more than a same-shape Mul)
    assert r.cycles < same.cycles or int(np.prod(big)) < 32768


@pytest.mark.parametrize("soc", list(CHIPS))
def test_an_operand_repeated_along_leading_dims_is_broadcast_in_ub(soc):
    """A (C, 1, 1) bias against (N, C, H, W), a (W,) row against (N, H, W): one launch, the
    operand read compact, against the float64 formula. Periods that tile a core's share (the operand
    expanded once, then reused), periods larger than a tile (tiles of whole rows inside one, or of
    one row's part), rows of one value. The call costs less than copying the operand out first."""
    rng = np.random.default_rng(list(soc.encode()))
    dtypes = [F16, F32] + ([BF16] if CHIPS[soc] == "A2" else [])
    for x_shape, b_shape in [((2, 96, 40, 40), (96, 1, 1)), ((8, 64), (64,)), ((3, 7, 9), (9,)), ((4, 3, 7), (3, 1)),
                             ((6, 1021), (1021,)), ((2, 5, 3, 30000), (3, 30000)), ((3, 2, 70000), (2, 1)),
                             ((5, 2, 1, 3), (1, 3))]:
        dtype = dtypes[int(rng.integers(0, len(dtypes)))]
        x, b = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
        first = bool(rng.integers(0, 2))
        r = simulator.run("Mul", soc, **(dict(self=b, other=x) if first else dict(self=x, other=b)))
        assert [launch["name"] for launch in r.report.launches] == ["Mul"], (x_shape, b_shape)
        plan = simulator.plan("Mul", soc, **(dict(self=b, other=x) if first else dict(self=x, other=b))).tiling
        assert plan["broadcastInUB"] == ["self" if first else "other"], plan
        want = x.astype(np.float64) * b.astype(np.float64)
        _close(r.outputs["out"], want, np.abs(want), dtype, f"{x_shape} x {b_shape}")
        copied = simulator.run("Mul", soc, mode="timing", self=T(x_shape, dtype),
                               other=T(x_shape, dtype, strides=(0,) * (len(x_shape) - 1) + (1,)))
        timed = simulator.run("Mul", soc, mode="timing", self=T(x_shape, dtype), other=T(b_shape, dtype))
        assert timed.cycles < copied.cycles, (x_shape, b_shape, timed.cycles, copied.cycles)


@pytest.mark.parametrize("soc, x_shape, b_shape", [
    ("Ascend910B1", (3, 8191, 512), (8191, 1)), ("Ascend910A", (4, 257, 28, 28), (257, 1, 1)),
    ("Ascend310P3", (8, 257, 784), (257, 1)), ("Ascend910B4", (64, 97, 512), (97, 1)),
])
def test_a_period_that_would_cut_tiles_short_is_copied_out(soc, x_shape, b_shape):
    """A prime number of repeated rows, each shorter than a tile: tiles inside one period would be
    a row each (several times slower than the flat kernel's), so the operand is copied out, and the
    call costs no more than with the operand given expanded."""
    r = simulator.run("Mul", soc, mode="timing", self=T(x_shape, F16), other=T(b_shape, F16))
    copied = simulator.run("Mul", soc, mode="timing", self=T(x_shape, F16),
                           other=T(x_shape, F16, strides=(0,) * (len(x_shape) - len(b_shape)) +
                                   tuple(1 if d > 1 else 0 for d in b_shape)))
    assert r.cycles <= 1.05 * copied.cycles, (r.cycles, copied.cycles)


STATUS = {
    "Add: int16": (161002, "Add", dict(self=T((4,), np.int16), other=T((4,), np.int16), alpha=1.0)),
    "Add: int8 with uint8 promotes to int16 (AI CPU)": (161002, "Add", dict(self=T((4,), np.int8), other=T((4,), np.uint8),
                                                                            alpha=1.0, out=T((4,), np.int32))),
    "Add: a float into an int32 out": (161002, "Add", dict(self=T((4,), F32), other=T((4,), np.int32), alpha=1.0,
                                                           out=T((4,), np.int32))),
    "Add: int32 into a bool out": (161002, "Add", dict(self=T((4,), np.int32), other=T((4,), np.int32), alpha=1.0,
                                                       out=T((4,), np.bool_))),
    "Add: a fractional alpha with integers": (161002, "Add", dict(self=T((4,), np.int32), other=T((4,), np.int64),
                                                                  alpha=2.5)),
    "Mul: a float into a bool out": (161002, "Mul", dict(self=T((4,), F16), other=T((4,), np.bool_),
                                                         out=T((4,), np.bool_))),
    "Add: no broadcast": (161002, "Add", dict(self=T((4, 3), F16), other=T((4,), F16), alpha=1.0, out=T((4, 3), F16))),
    "Add: out shape": (161002, "Add", dict(self=T((4,), F16), other=T((4,), F16), alpha=1.0, out=T((5,), F16))),
    "Add: alpha not a number": (161002, "Add", dict(self=T((4,), F16), other=T((4,), F16), alpha="x")),
    "Mul: bf16 on 910A": (161002, "Mul", dict(self=T((4,), BF16), other=T((4,), BF16))),
    "Relu: rank 9": (161002, "Relu", dict(self=T((1,) * 9, F16))),
    "Relu: out of another dtype": (161002, "Relu", dict(self=T((4,), F16), out=T((4,), F32))),
    "Relu: int16": (161002, "Relu", dict(self=T((4,), np.int16))),
    "Relu: int8 into int32": (161002, "Relu", dict(self=T((4,), np.int8), out=T((4,), np.int32))),
    "Sigmoid: an integer out": (161002, "Sigmoid", dict(self=T((4,), np.int32), out=T((4,), np.int32))),
    "Sigmoid: bool into bf16 on 910A": (161002, "Sigmoid", dict(self=T((4,), np.bool_), out=T((4,), BF16))),
    "Silu: out of another dtype": (161002, "Silu", dict(self=T((4,), BF16), out=T((4,), F32))),
    "ThresholdBackward: int64": (161002, "ThresholdBackward", dict(gradOutput=T((4,), np.int64), self=T((4,), np.int64),
                                                                threshold=0.0)),
    "ThresholdBackward: shapes differ": (161002, "ThresholdBackward",
                                         dict(gradOutput=T((4,), F16), self=T((5,), F16), threshold=0.0)),
    "ThresholdBackward: gradOutput and self of two dtypes": (161002, "ThresholdBackward",
                                                            dict(gradOutput=T((4,), F16), self=T((4,), F32),
                                                                 threshold=0.0)),
    "ThresholdBackward: gradInput of another dtype": (161002, "ThresholdBackward",
                                                      dict(gradOutput=T((4,), F16), self=T((4,), F16), threshold=0.0,
                                                           gradInput=T((4,), F32))),
    "ThresholdBackward: null self": (161001, "ThresholdBackward", dict(gradOutput=T((4,), F16), self=None,
                                                                        threshold=0.0)),
}


@pytest.mark.parametrize("name", list(STATUS))
def test_documented_status_codes(name):
    status, op, args = STATUS[name]
    assert_status(op, "Ascend910A" if "910A" in name else "Ascend910B1", args, status)


@pytest.mark.parametrize("seed", range(20))
def test_every_broadcast_plan_fits_ub_or_is_refused_as_a_tiling_error(seed):
    """Row broadcasts of every width (2, primes, rows longer than UB, an all-ones operand, a row
    repeated along the rows), dtypes
    mixed with the output's, on the chips and on what-ifs with UB cut to 1/2 .. 1/16: the call runs
    (no kernel fault) or is refused with 561002; a forced tiling too."""
    from simulator.enums import AclnnError
    from simulator.studies import make_profile
    rng = np.random.default_rng([seed, 17])
    soc = list(CHIPS)[seed % len(CHIPS)]
    rows, B = int(rng.choice([1, 2, 7, 2729, 50000])), int(rng.choice([2, 3, 81, 1021, 10007, 40000]))
    while rows * B > 2_000_000:
        rows //= 7
    kind = "aiv" if CHIPS[soc] == "A2" else "aicore"
    profile = make_profile(soc, {f"cores.{kind}.buffers.UB": f"/{int(rng.choice([1, 2, 4, 16]))}"})
    dt, odt = [F16, F32][seed % 2], [F16, F32][(seed // 2) % 2]
    other = (1, 1) if seed % 5 == 0 else (B,) if seed % 5 == 1 else (rows, 1)     # (B,): repeated along rows
    tiling = {"blockLength": 2 * B, "tileLength": 2 * B} if seed % 3 == 0 else None
    try:
        r = simulator.run("Mul", profile=profile, mode="timing", self=T((max(rows, 1), B), dt), other=T(other, dt),
                          out=T((max(rows, 1), B), odt), tiling=tiling)
    except AclnnError as e:
        assert e.status == 561002, str(e)
    else:
        assert r.cycles > 0


def test_sigmoid_splits_a_forced_block_as_tbe_does_and_refuses_a_tile_past_it():
    """CANN's Sigmoid kernel (ops/elementwise/sigmoid.py): a forced blockLength is walked in TBE's
    double-buffered tiles (capped at 16,383 elements); a forced tileLength longer than the block
    is a tiling error, not silently shortened."""
    import simulator
    x = np.zeros(200_000, np.float32)
    t = simulator.plan("Sigmoid", "Ascend910B1", self=x, tiling={"blockLength": 65536}).tiling
    assert t["blockLength"] == 65536 and t["tileLength"] <= 16383 and 65536 % t["tileLength"] == 0
    assert_status("Sigmoid", "Ascend910B1", dict(self=x, tiling={"blockLength": 128, "tileLength": 256}), 561002)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sigmoid_divides_in_repeats_past_255_and_a_tail(dtype):
    """The Div of CANN's Sigmoid kernel reads one repeat of ones again on every repeat (TBE folds
    the broadcast of 1 into vdiv); a forced tile of 24,448 elements is 382 repeats of 64, more than
    one instruction's 255, and the last block's 37 elements a masked tail. Against the float64
    formula, to FP32's rounding (then the 16-bit cast's, subnormals to their spacing)."""
    import simulator
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(24_485) * 4).astype(dtype)
    r = simulator.run("Sigmoid", "Ascend910B1", self=x, tiling={"blockLength": 24448, "tileLength": 24448})
    ref = 1 / (1 + np.exp(-x.astype(np.float64)))
    rtol, atol = (2.0 ** -20, 1e-30) if dtype == np.float32 else (2.0 ** -10, 2.0 ** -24)
    np.testing.assert_allclose(r.outputs["out"].astype(np.float64), ref, rtol=rtol, atol=atol)


MIXED = [(soc, s, o) for soc, kind in CHIPS.items()
         for s in ([F16, F32] + ([BF16] if kind == "A2" else [])) for o in ([F16, F32] + ([BF16] if kind == "A2" else []))
         if s != o]


@pytest.mark.parametrize("soc,self_dtype,out_dtype", MIXED, ids=[f"{c}-{s.name}-{o.name}" for c, s, o in MIXED])
def test_sigmoid_into_another_dtype_rounds_to_self_then_casts(soc, self_dtype, out_dtype):
    """An out of another dtype than self's: aclnnSigmoid runs Sigmoid in self's dtype, then a Cast
    to out's (ops-math aclnn_sigmoid.cpp), so every value of out is one of self's dtype, cast. Against
    the float64 formula rounded three times (FP32 inside the kernel, self's dtype, out's); self
    non-contiguous and out strided on some draws; torch's own sigmoid in self's dtype, cast, where
    installed."""
    rng = np.random.default_rng([ord(c) for c in soc + self_dtype.name + out_dtype.name])
    shape = (int(rng.integers(1, 40)), int(rng.integers(1, 300)))
    x = (rng.standard_normal(shape) * 3).astype(self_dtype)
    strided = shape[1] > 1 and rng.random() < 0.5
    if strided:
        x = np.swapaxes(np.ascontiguousarray(np.swapaxes(x, 0, 1)), 0, 1)
    kept = x.copy()
    buf = np.full((shape[0], 2 * shape[1]), np.nan, out_dtype)
    out = buf[:, ::2] if strided else np.zeros(shape, out_dtype)
    r = simulator.run("Sigmoid", soc, self=x, out=out)
    y = buf[:, ::2] if strided else r.outputs["out"]
    assert np.array_equal(x, kept)
    if strided:
        assert np.isnan(buf[:, 1::2].astype(np.float32)).all(), "a gap of the strided output was written"
    names = [l["name"] for l in r.report.launches]
    assert names[names.index("Sigmoid") + 1] == "Cast", names
    assert np.array_equal(y.astype(self_dtype).astype(out_dtype), y), "out holds values self's dtype cannot"
    ref = 1 / (1 + np.exp(-x.astype(np.float64)))
    sub = max(float(ml_dtypes.finfo(d).smallest_subnormal) for d in (self_dtype, out_dtype)) / 2
    tol = (UNIT[F32] + UNIT[self_dtype] + UNIT[out_dtype]) * 5 * np.abs(ref) + sub
    assert_within(y.astype(np.float64), ref, tol, f"{soc} {self_dtype.name} -> {out_dtype.name}")
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    tdt = {F16: torch.float16, F32: torch.float32, BF16: torch.bfloat16}
    want = torch.sigmoid(torch.from_numpy(x.astype(np.float32)).to(tdt[self_dtype])).to(tdt[out_dtype])
    want = want.to(torch.float64).numpy()
    # torch rounds to self's dtype, then to out's, as CANN does; each rounding may land a unit apart
    assert_within(y.astype(np.float64), want, 2 * (UNIT[self_dtype] + UNIT[out_dtype]) * np.abs(want) + sub,
                  "against torch")


INTEGER_CHIPS = [soc for soc, kind in CHIPS.items() if kind != "inference"]
INTS = [np.dtype(d) for d in (np.int8, np.uint8, np.int32, np.int64)]


def _integer_self(rng, dtype, shape, noncontig):
    """Values over the dtype's whole range, a fifth of them small; transposed storage when noncontig."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    small = rng.random(shape) < 0.2
    x[small] = rng.integers(max(info.min, -3), 4, size=int(small.sum())).astype(dtype)
    if noncontig and len(shape) >= 2:
        x = np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
    return x


@pytest.mark.parametrize("soc", INTEGER_CHIPS)
@pytest.mark.parametrize("dtype", INTS, ids=[d.name for d in INTS])
def test_relu_of_integers_is_exact_and_uint8_is_a_copy(soc, dtype):
    """aclnnRelu's integer dtypes (its document: INT8, INT32, INT64, UINT8 on the training and A2
    series): max(self, 0) exactly, over the whole range, self non-contiguous and out strided on
    some draws. INT8 computes in FLOAT16 (which holds it exactly) as TBE's relu casts it; UINT8 runs
    no Relu kernel (aclnn_relu.cpp: Contiguous, then ViewCopy into out). Against numpy's maximum and
    torch.relu where installed."""
    rng = np.random.default_rng([ord(c) for c in soc + dtype.name])
    for draw in range(3):
        shape = tuple(int(rng.integers(1, 30)) for _ in range(int(rng.integers(1, 5))))
        x = _integer_self(rng, dtype, shape, draw == 1)
        kept = x.copy()
        buf = np.full(shape[:-1] + (2 * shape[-1],), 7, dtype)
        strided = draw == 2
        r = simulator.run("Relu", soc, self=x, **({"out": buf[..., ::2]} if strided else {}))
        y = buf[..., ::2] if strided else r.outputs["out"]
        assert np.array_equal(x, kept), "self was modified"
        assert y.dtype == dtype and np.array_equal(y, np.maximum(x, dtype.type(0))), (soc, dtype, shape)
        if strided:
            assert (buf[..., 1::2] == 7).all(), "a gap of the strided output was written"
        names = [launch["name"] for launch in r.report.launches]
        assert ("Relu" in names) == (dtype != np.uint8), names
        torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
        assert np.array_equal(y, torch.relu(torch.from_numpy(np.ascontiguousarray(x))).numpy())
    if dtype == np.int8:
        assert simulator.plan("Relu", soc, self=x).tiling["computeDtype"] == "FLOAT16"


SIGMOID_SELF = [np.dtype(d) for d in (np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_)]
SIGMOID_INT = [(soc, s, o) for soc in INTEGER_CHIPS for s in SIGMOID_SELF
               for o in ([F16, F32] + ([BF16] if CHIPS[soc] == "A2" else []))]


@pytest.mark.parametrize("soc,self_dtype,out_dtype", SIGMOID_INT,
                         ids=[f"{c}-{s.name}-{o.name}" for c, s, o in SIGMOID_INT])
def test_sigmoid_of_integers_and_bool_casts_to_out_first(soc, self_dtype, out_dtype):
    """aclnnSigmoid takes integer and BOOL self into a float out: a Cast of self to out's dtype,
    then Sigmoid in it (aclnn_sigmoid.cpp), so self is rounded to out's dtype first (a large
    INT32 saturates FLOAT16 to inf, and sigmoid to 1). Against the float64 formula of self rounded
    to out's dtype, to FP32's rounding inside the kernel and out's; torch's sigmoid of self in
    out's dtype where installed. Without out, out is FLOAT, as torch's. Below -88.7 the kernel's
    FP32 exp(-self) overflows and the result is 0, as CANN's: the tolerance allows it there."""
    rng = np.random.default_rng([ord(c) for c in soc + self_dtype.name + out_dtype.name])
    shape = (int(rng.integers(1, 20)), int(rng.integers(1, 300)))
    if self_dtype == np.bool_:
        x = rng.random(shape) < 0.5
    else:
        x = _integer_self(rng, self_dtype, shape, rng.random() < 0.5)
        x[rng.random(shape) < 0.5] = rng.integers(-12 if self_dtype.kind == "i" else 0, 13)
    kept = x.copy()
    r = simulator.run("Sigmoid", soc, self=x, out=np.zeros(shape, out_dtype))
    y = r.outputs["out"].astype(np.float64)
    assert np.array_equal(x, kept)
    assert [launch["name"] for launch in r.report.launches][-2:] == ["Cast", "Sigmoid"]
    with np.errstate(over="ignore"):
        rounded = x.astype(np.float64).astype(out_dtype).astype(np.float64)
        ref = 1 / (1 + np.exp(-rounded))
    # below -88.7 the kernel's FP32 exp(-x) overflows and sigmoid is 0 (CANN's TBE Sigmoid: vexp in FP32)
    sub = float(ml_dtypes.finfo(out_dtype).smallest_subnormal) / 2 + np.where(rounded < -88.7, ref, 0)
    assert_within(y, ref, (5 * UNIT[F32] + UNIT[out_dtype]) * np.abs(ref) + sub, f"{soc} {self_dtype} -> {out_dtype}")
    if self_dtype == np.int32:
        assert simulator.run("Sigmoid", soc, mode="timing", self=T((4,), self_dtype)).outputs["out"].dtype == F32
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    tdt = {F16: torch.float16, F32: torch.float32, BF16: torch.bfloat16}[out_dtype]
    want = torch.sigmoid(torch.from_numpy(np.ascontiguousarray(x)).to(tdt)).to(torch.float64).numpy()
    # two FP32 computations (each within five units of FP32), each rounded to out's dtype
    assert_within(y, want, (10 * UNIT[F32] + 2 * UNIT[out_dtype]) * np.abs(want) + sub, "against torch")


def _round(x, dtype):
    return np.asarray(x, np.float64).astype(dtype).astype(np.float64)


PROMOTED_CASES = list(range(24))


@pytest.mark.parametrize("seed", PROMOTED_CASES)
def test_add_and_mul_of_two_dtypes_cast_first_and_round_as_cann_strings_them(seed):
    """Inputs of two float dtypes, outs of a third, alphas a 16-bit dtype cannot hold: aclnn_add.cpp
    and aclnn_mul.cpp run a mixed pair (FLOAT16 or BF16 with FLOAT, Add's alpha 1) as it is, the
    result FLOAT; otherwise each input cast to the promoted dtype by a Cast launch, then the kernel in
    it (BF16's alpha as a BF16 tensor: other x alpha rounded to BF16 by a Mul launch, then Add); a
    Cast to out's dtype last. Against that rounding order in float64, and torch where installed
    (which rounds alpha and the product once less: a unit of the promoted dtype on alpha x other)."""
    rng = np.random.default_rng([seed, 77])
    soc = ["Ascend910B1", "Ascend910B4", "Ascend910A", "Ascend310P3"][seed % 4]
    floats = [F16, F32] + ([BF16] if CHIPS[soc] == "A2" else [])
    sd, od, outd = (floats[int(rng.integers(0, len(floats)))] for _ in range(3))
    op = "Add" if seed % 3 else "Mul"
    alpha = float(rng.choice([1.0, 0.3, -1.7])) if op == "Add" else 1.0
    shape = tuple(int(rng.integers(1, 12)) for _ in range(int(rng.integers(1, 4))))
    oshape = tuple(1 if rng.random() < 0.4 else d for d in shape)
    a, b = rng.standard_normal(shape).astype(sd), rng.standard_normal(oshape).astype(od)
    if len(shape) >= 2 and seed % 5 == 0:
        a = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 0, 1)), 0, 1)
    r = simulator.run(op, soc, self=a, other=b, out=np.zeros(shape, outd), **({"alpha": alpha} if op == "Add" else {}))
    y = r.outputs["out"].astype(np.float64)
    p = sd if sd == od else F32
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if op == "Mul":
        ref, parts = _round(a64 * b64, p), np.abs(a64 * b64)
    elif {sd, od} in ({F16, F32}, {BF16, F32}) and alpha == 1.0:
        ref, parts = _round(a64 + b64, F32), np.abs(a64) + np.abs(b64)
    elif p == BF16 and alpha != 1.0:
        scaled = _round(b64 * _round(alpha, BF16), BF16)
        ref, parts = _round(a64 + scaled, BF16), np.abs(a64) + np.abs(scaled)
    else:
        ref, parts = _round(a64 + alpha * b64, p), np.abs(a64) + np.abs(alpha * b64)
    ref = _round(ref, outd)
    names = [launch["name"] for launch in r.report.launches if not launch["name"].startswith("Contiguous")]
    as_is = {sd, od} in ({F16, F32}, {BF16, F32}) and alpha == 1.0
    result = F32 if as_is else p
    casts_in = 0 if as_is else (sd != p) + (od != p)
    assert names[:casts_in] == ["Cast"] * casts_in and names[casts_in] != "Cast", names
    assert (names[-1] == "Cast") == (outd != result), names
    sub = max(float(ml_dtypes.finfo(d).smallest_subnormal) for d in (p, outd))
    tol = 2 * UNIT[p] * (np.abs(ref) + parts) + UNIT[outd] * np.abs(ref) + sub
    assert_within(y, ref, tol, f"{soc} {op} {sd.name}+{od.name}->{outd.name} alpha {alpha}")
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    tdt = {F16: torch.float16, F32: torch.float32, BF16: torch.bfloat16}
    ta, tb = torch.from_numpy(a.astype(np.float32)).to(tdt[sd]), torch.from_numpy(b.astype(np.float32)).to(tdt[od])
    want = (torch.mul(ta, tb) if op == "Mul" else torch.add(ta, tb, alpha=alpha)).to(tdt[outd]).to(torch.float64).numpy()
    assert_within(y, want, 2 * tol + 2 * UNIT[p] * parts, "against torch")


TB_INTS = [(soc, np.dtype(d)) for soc in CHIPS for d in (np.int8, np.uint8, np.int32)]


@pytest.mark.parametrize("soc,dtype", TB_INTS, ids=[f"{c}-{d.name}" for c, d in TB_INTS])
def test_threshold_backward_of_integers(soc, dtype):
    """aclnnThresholdBackward's integer dtypes (INT32, INT8, UINT8 on every series its document
    lists, the Atlas inference series too): gradOutput where self > threshold, else 0, self
    broadcast or non-contiguous on some draws. ReluGrad (threshold 0) is exact; ThresholdGradV2D
    casts integers to FLOAT, compares and selects there, and casts back (TBE's threshold_grad_v2_d),
    so an INT32 gradient comes back rounded to FLOAT's 24 bits. Against numpy's where with that
    rounding, and torch's threshold_backward on gradients FLOAT holds exactly. (INT32 gradients
    within 2^31 - 128, whose FLOAT rounding stays in range.)"""
    rng = np.random.default_rng([ord(c) for c in soc + dtype.name])
    info = np.iinfo(dtype)
    hi = min(int(info.max), 2 ** 31 - 128)
    for draw, threshold in enumerate((0.0, 2.0, -3.0, 0.0, 5.0)):
        shape = tuple(int(rng.integers(1, 20)) for _ in range(int(rng.integers(1, 4))))
        g = rng.integers(max(int(info.min), -hi), hi, size=shape, endpoint=True).astype(dtype)
        xshape = shape[int(rng.integers(0, len(shape))):] if draw % 2 else shape
        x = rng.integers(max(int(info.min), -6), 7, size=xshape).astype(dtype)
        if draw == 3 and len(shape) >= 2:
            g = np.swapaxes(np.ascontiguousarray(np.swapaxes(g, 0, 1)), 0, 1)
        r = simulator.run("ThresholdBackward", soc, gradOutput=g, self=x, threshold=threshold)
        y = r.outputs["gradInput"]
        kept = g if threshold == 0.0 or dtype != np.int32 else g.astype(np.float32).astype(np.float64).astype(dtype)
        assert y.dtype == dtype and np.array_equal(y, np.where(x > threshold, kept, 0).astype(dtype)), \
            (soc, dtype, threshold, shape, xshape)
        assert [launch["name"] for launch in r.report.launches][-1] == ("ReluGrad" if threshold == 0.0
                                                                         else "ThresholdGradV2D")
        torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
        if threshold < info.min:        # (torch refuses a threshold its dtype cannot hold)
            continue
        exact = np.abs(g.astype(np.int64)) < 2 ** 24
        want = torch.ops.aten.threshold_backward(torch.from_numpy(np.ascontiguousarray(g)),
                                                 torch.from_numpy(np.ascontiguousarray(x)), threshold).numpy()
        assert np.array_equal(y[exact], want[exact])


def test_a_bf16_alpha_is_a_bf16_tensor_and_its_product_rounds_before_the_add():
    """aclnnAdd of BF16 with alpha 0.3 (aclnn_add.cpp: no Axpy for BF16): alpha as a BF16 tensor
    (0.30078125), other x alpha by a Mul launch rounded to BF16, then Add. 3 x 0.30078125 =
    0.90234375 is a BF16 value; 3 x 0.3 would round to 0.8984375, and 1 + 0.90234375 ties to
    1.90625. Exact. Also BF16 + BF16 into a
    FLOAT out: the sum rounded to BF16 first, then a Cast (1 + 2^-8 is 1 in BF16)."""
    a = np.array([0.0, 1.0, -2.0], BF16)
    b = np.array([3.0, 3.0, 0.5], BF16)
    r = simulator.run("Add", "Ascend910B1", self=a, other=b, alpha=0.3)
    assert [launch["name"] for launch in r.report.launches] == ["Mul", "Add"]
    np.testing.assert_array_equal(r.outputs["out"].astype(np.float64), [0.90234375, 1.90625, -1.8515625])
    r = simulator.run("Add", "Ascend910B1", self=np.array([1.0, 1.0], BF16), other=np.array([2 ** -8, 3 * 2 ** -9], BF16),
                      alpha=1.0, out=np.zeros(2, F32))
    assert [launch["name"] for launch in r.report.launches] == ["Add", "Cast"]
    np.testing.assert_array_equal(r.outputs["out"], [1.0, 1.0078125])


INT_BINARY = [np.dtype(d) for d in (np.int8, np.uint8, np.int32, np.int64, np.bool_)]
INT_BINARY_CASES = [(soc, d, op) for soc in CHIPS for d in INT_BINARY for op in ("Add", "Mul")]


def _integers(rng, dtype, shape):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    small = rng.random(shape) < 0.3
    x[small] = rng.integers(max(info.min, -5), 6, size=int(small.sum())).astype(dtype)
    return x


@pytest.mark.parametrize("soc,dtype,op", INT_BINARY_CASES, ids=[f"{c}-{d.name}-{o}" for c, d, o in INT_BINARY_CASES])
def test_add_and_mul_of_integers_and_bool_wrap_as_torch(soc, dtype, op):
    """aclnnAdd and aclnnMul of INT8, UINT8, INT32, INT64 and BOOL on the AI Core of every series
    (l0op Add / Mul AI Core lists): exact, two's complement wrap-around past the range, as torch's.
    The 8-bit ones compute in FLOAT16 (Add) or FLOAT (Mul) and are taken modulo 256 before the cast
    back (TBE's uint8_int8_overflow_proc); BOOL in FLOAT16, back to BOOL (Add is or, Mul and). Add's
    alpha not 1: a Mul of other by alpha as a tensor of the dtype, then Add (INT32 takes Axpy, in
    FLOAT: test_int32_add_with_alpha_runs_axpy_in_float). Whole ranges, one operand broadcast or
    transposed on some draws. Against numpy's wrapping arithmetic and torch where installed."""
    rng = np.random.default_rng([ord(c) for c in soc + dtype.name + op])
    for draw in range(3):
        shape = tuple(int(rng.integers(1, 24)) for _ in range(int(rng.integers(1, 4))))
        oshape = shape[int(rng.integers(0, len(shape))):] if draw == 1 else shape
        a, b = _integers(rng, dtype, shape), _integers(rng, dtype, oshape)
        if draw == 2 and len(shape) >= 2:
            a = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 0, 1)), 0, 1)
        alpha = (1, 3, -2)[draw] if op == "Add" and not (dtype == np.int32 or dtype == np.bool_) else 1
        kept = (a.copy(), b.copy())
        kw = dict(alpha=float(alpha)) if op == "Add" else {}
        r = simulator.run(op, soc, self=a, other=b, **kw)
        y = r.outputs["out"]
        assert np.array_equal(a, kept[0]) and np.array_equal(b, kept[1]), "an input was modified"
        with np.errstate(over="ignore"):
            if dtype == np.bool_:
                want = (a | b) if op == "Add" else (a & b)
            else:
                wide = (a.astype(np.int64) + alpha * b.astype(np.int64)) if op == "Add" else \
                    a.astype(np.int64) * b.astype(np.int64)
                want = wide.astype(dtype)          # (int64 to a narrower integer: the low bits)
        assert y.dtype == dtype and np.array_equal(y, want), (soc, op, dtype, shape, oshape, alpha)
        names = [launch["name"] for launch in r.report.launches if not launch["name"].startswith("Contiguous")]
        assert names == ([op] if alpha == 1 else ["Mul", "Add"]), names
        torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
        ta, tb = torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))
        t = torch.add(ta, tb, alpha=alpha) if op == "Add" else torch.mul(ta, tb)
        assert np.array_equal(y, t.numpy())
    if dtype.itemsize == 1 and dtype != np.bool_:
        plan = simulator.plan(op, soc, self=a, other=b, **kw).tiling
        assert plan["computeDtype"] == ("FLOAT" if op == "Mul" else "FLOAT16"), plan


def test_8bit_add_and_mul_wrap_modulo_256():
    """The values past the range, exactly: INT8 127 + 1 = -128, -128 + -128 = 0, 100 x 3 = 44,
    -128 x -128 = 0 (16,384 in FLOAT), -128 x -1 = -128; UINT8 200 + 100 = 44, 255 x 255 = 1
    (65,025 in FLOAT), 0 + 255 x 3 = 253 (the alpha product by a Mul launch)."""
    i8, u8 = np.int8, np.uint8
    add = simulator.run("Add", "Ascend910B1", self=np.array([127, -128, 5], i8), other=np.array([1, -128, -5], i8),
                        alpha=1.0).outputs["out"]
    np.testing.assert_array_equal(add, np.array([-128, 0, 0], i8))
    mul = simulator.run("Mul", "Ascend910A", self=np.array([100, -128, -128], i8),
                        other=np.array([3, -128, -1], i8)).outputs["out"]
    np.testing.assert_array_equal(mul, np.array([44, 0, -128], i8))
    add = simulator.run("Add", "Ascend310P3", self=np.array([200, 0], u8), other=np.array([100, 255], u8),
                        alpha=3.0).outputs["out"]
    np.testing.assert_array_equal(add, np.array([(200 + 300) % 256, 253], u8))
    mul = simulator.run("Mul", "Ascend910B4", self=np.array([255, 16], u8), other=np.array([255, 16], u8)).outputs["out"]
    np.testing.assert_array_equal(mul, np.array([1, 0], u8))


@pytest.mark.parametrize("soc", list(CHIPS))
def test_int32_add_with_alpha_runs_axpy_in_float(soc):
    """aclnnAdd of INT32 with alpha not 1 is CANN's Axpy (AXPY_DTYPE_SUPPORT_LIST), which TBE's axpy
    computes in FLOAT: both inputs cast to FLOAT, alpha x other rounded, the sum rounded, cast back
    (saturating, the vector unit's conversion [ASSUMPTION]). So past 2^24 the result is FLOAT's, not
    torch's exact one. Against the float64 formula of those roundings; against torch where every
    value stays within 2^24."""
    rng = np.random.default_rng([ord(c) for c in soc])
    big = rng.integers(-2 ** 31, 2 ** 31 - 1, size=(6, 50), dtype=np.int32, endpoint=True)
    small = rng.integers(-2 ** 20, 2 ** 20, size=(6, 50), dtype=np.int32)
    for alpha in (3, -2, 0):
        for a, b in ((big, big[::-1]), (small, small[:, ::-1].copy())):
            r = simulator.run("Add", soc, self=a, other=b, alpha=float(alpha))
            assert [launch["name"] for launch in r.report.launches] == ["Axpy"]
            f32 = lambda v: np.asarray(v, np.float64).astype(np.float32).astype(np.float64)  # noqa: E731
            ref = f32(f32(a) + f32(alpha * f32(b)))
            want = np.clip(np.trunc(ref), -2 ** 31, 2 ** 31 - 1).astype(np.int32)
            np.testing.assert_array_equal(r.outputs["out"], want)
            if a is small:
                torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
                t = torch.add(torch.from_numpy(a), torch.from_numpy(b), alpha=alpha).numpy()
                np.testing.assert_array_equal(r.outputs["out"], t)


MIXED_INT = [((np.int32, np.float16, None), F16, ["Cast", "Add"]), ((np.bool_, np.int8, None), np.int8, ["Cast", "Add"]),
             ((np.int32, np.int64, None), np.int64, ["Cast", "Mul", "Add"]),
             ((np.uint8, np.int32, F32), F32, ["Cast", "Add", "Cast"]), ((np.bool_, np.bool_, F16), F16, ["Add", "Cast"]),
             ((np.int64, BF16, F32), F32, ["Cast", "Add", "Cast"])]


@pytest.mark.parametrize("dtypes,result,launches", MIXED_INT,
                         ids=[f"{a.__name__}-{np.dtype(b).name}" for (a, b, _), _, _ in MIXED_INT])
def test_integers_promote_as_torch_with_floats_and_each_other(dtypes, result, launches):
    """torch's promotion, which aclnn's PromoteType follows (numpy's would make INT32 with FLOAT16
    a FLOAT64): an integer or BOOL with a float is the float, BOOL with an integer the integer,
    INT32 with INT64 INT64; each input not of it cast first, out's Cast last. alpha 2 where the
    promoted dtype is INT64 (a Mul launch), else 1. Values the floats hold exactly; against the
    int64 formula cast to the result's dtype, and torch where installed."""
    sd, od, outd = (None if d is None else np.dtype(d) for d in dtypes)
    rng = np.random.default_rng(5)
    a = _integers(rng, sd, (3, 40)) % 100 if sd != np.bool_ else _integers(rng, sd, (3, 40))
    b = (_integers(rng, od, (40,)) if od.kind in "iub" else rng.integers(-50, 50, 40)).astype(od)
    alpha = 2 if {sd, od} == {np.dtype(np.int32), np.dtype(np.int64)} else 1
    r = simulator.run("Add", "Ascend910B1", self=a, other=b, alpha=float(alpha),
                      **({"out": np.zeros((3, 40), outd)} if outd is not None else {}))
    assert [launch["name"] for launch in r.report.launches] == launches
    y = r.outputs["out"]
    want = a.astype(np.int64) + alpha * (b if od.kind in "iub" else b.astype(np.float64)).astype(np.int64)
    if sd == od == np.bool_:
        want = a | b                            # (BOOL + BOOL is BOOL: or)
    assert y.dtype == result and np.array_equal(y, want.astype(result))
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    tb = torch.from_numpy(b.astype(np.float32)).to(torch.bfloat16) if od == BF16 else torch.from_numpy(b)
    t = torch.add(torch.from_numpy(a), tb, alpha=alpha)
    assert np.array_equal(y, (t.to(torch.float32) if t.dtype == torch.bfloat16 else t).numpy().astype(result))
