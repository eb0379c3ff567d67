"""aclnnReduceSum and aclnnMean against float64 formulas and torch.sum / torch.mean (float64) where
torch is installed: random shapes (ranks 1-5, odd and long rows), random dim sets (empty: every
dim; negative; not adjacent), keepDim, a `dtype` other than self's, Mean's out dtype other than
`dtype`, non-contiguous self, strided out, every dtype of the series, on Ascend910A, Ascend310P3
and Ascend910B1 / B4. `REDUCE_CASES=N` runs more.

Tolerance: self is cast to `dtype` (u_dtype |x| each), summed in FP32 (at most R ulps of FP32 of
the running sum |x|, R the reduced count), scaled, and rounded to out: |out - ref| <= (u_dtype +
4 R 2^-24) S + (u_dtype + u_out) |ref| + half the output's subnormal spacing, S = the sum (or mean)
of |x|.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from conftest import BF16, F16, F32, UNIT, VECTOR_CHIPS, assert_status, assert_within
from simulator import TensorLayout as T
from simulator.enums import AclnnError, aclDataType

ACL = {F16: aclDataType.ACL_FLOAT16, BF16: aclDataType.ACL_BF16, F32: aclDataType.ACL_FLOAT}
CHIPS = VECTOR_CHIPS
N_CASES = int(os.environ.get("REDUCE_CASES", "120"))
NAMES = {"ReduceSum": ("dims", "keepDims"), "Mean": ("dim", "keepDim")}


def draw_case(seed: int) -> dict:
    rng = np.random.default_rng([seed, 71])
    soc = list(CHIPS)[seed % len(CHIPS)]
    dtypes = [F16, F32] + ([BF16] if CHIPS[soc] == "A2" else [])
    rank = int(rng.integers(1, 6))
    hi = 300 if rng.random() < 0.15 else 9
    shape = tuple(int(rng.integers(1, hi)) for _ in range(rank))
    while int(np.prod(shape)) > 400_000:
        shape = shape[1:]
    rank = len(shape)
    dims = [int(d) for d in rng.permutation(rank)[:int(rng.integers(0, rank + 1))]]
    dims = [d - rank if rng.random() < 0.3 else d for d in dims]
    op = "Mean" if rng.random() < 0.5 else "ReduceSum"
    dtype = dtypes[int(rng.integers(0, len(dtypes)))]
    acc = dtypes[int(rng.integers(0, len(dtypes)))] if rng.random() < 0.2 else dtype
    out = dtypes[int(rng.integers(0, len(dtypes)))] if op == "Mean" and rng.random() < 0.2 else acc
    return dict(seed=seed, soc=soc, op=op, shape=shape, dims=dims, keep=bool(rng.random() < 0.5), dtype=dtype,
                acc=acc, out=out, noncontig=bool(rng.random() < 0.25 and rank >= 2), strided_out=bool(rng.random() < 0.15))


def _id(c) -> str:
    return (f"seed{c['seed']}-{c['soc']}-{c['op']}-{'x'.join(map(str, c['shape']))}-dims{c['dims']}"
            f"{'-keep' if c['keep'] else ''}-{c['dtype'].name}-{c['acc'].name}-{c['out'].name}")


CASES = [draw_case(i) for i in range(N_CASES)]


def _axes(c):
    return tuple(d % len(c["shape"]) for d in c["dims"]) if c["dims"] else tuple(range(len(c["shape"])))


def _run(c):
    rng = np.random.default_rng(90_000 + c["seed"])
    x = rng.standard_normal(c["shape"]).astype(c["dtype"])
    if c["noncontig"]:
        x = np.swapaxes(np.ascontiguousarray(np.swapaxes(x, 0, -1)), 0, -1)
    kept = x.copy()
    shape = np.sum(np.zeros(c["shape"]), axis=_axes(c), keepdims=c["keep"]).shape
    dims_name, keep_name = NAMES[c["op"]]
    extra, buf = {}, None
    if c["strided_out"] and len(shape):
        buf = np.full(shape[:-1] + (2 * shape[-1],), np.nan, c["out"])
        extra["out"] = buf[..., ::2]
    else:
        extra["out"] = np.zeros(shape, c["out"])
    r = simulator.run(c["op"], c["soc"], self=x, dtype=int(ACL[c["acc"]]), **{dims_name: c["dims"], keep_name: c["keep"]},
                      **extra)
    assert np.array_equal(x, kept), "self was modified"
    out = r.outputs["out"]
    if buf is not None:
        assert np.isnan(buf[..., 1::2].astype(np.float32)).all(), "a gap of the strided output was written"
        out = buf[..., ::2]
    return x, out, r


def reference(c, x):
    x64 = x.astype(np.float64)
    f = np.mean if c["op"] == "Mean" else np.sum
    return f(x64, axis=_axes(c), keepdims=c["keep"]), f(np.abs(x64), axis=_axes(c), keepdims=c["keep"])


def _close(c, out, ref, size, what):
    count = int(np.prod([c["shape"][a] for a in _axes(c)]))
    u = UNIT[c["acc"]]
    tol = ((u + 4 * count * 2.0 ** -24) * size + (u + UNIT[c["out"]]) * np.abs(ref)
           + float(ml_dtypes.finfo(c["out"]).smallest_subnormal) / 2)
    assert_within(out, ref, tol, what)


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_reduction_matches_the_formula(c):
    x, out, _ = _run(c)
    ref, size = reference(c, x)
    assert out.shape == ref.shape and out.dtype == c["out"]
    _close(c, out, ref, size, _id(c))


@pytest.mark.parametrize("c", CASES[:50], ids=[_id(c) for c in CASES[:50]])
def test_reduction_matches_torch(c):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    x, out, _ = _run(c)
    tx = torch.from_numpy(np.ascontiguousarray(x).astype(np.float64))
    dims = list(_axes(c))
    want = (torch.mean if c["op"] == "Mean" else torch.sum)(tx, dim=dims, keepdim=c["keep"]).numpy()
    _, size = reference(c, x)
    _close(c, out, want, size, f"{_id(c)} vs torch")


def test_launches_are_canns():
    r = simulator.run("Mean", "Ascend910B1", mode="timing", self=T((32, 96, 56, 56), F16), dim=[2, 3], keepDim=True,
                      dtype=int(ACL[F16]))
    assert [x["name"] for x in r.report.launches] == ["ReduceMean"]
    r = simulator.run("ReduceSum", "Ascend910A", mode="timing", self=T((8, 16, 32), F16), dims=[0, 2], keepDims=False,
                      dtype=int(ACL[F32]), out=T((16,), F32))
    assert [x["name"] for x in r.report.launches] == ["Cast", "ReduceSum", "ReduceSum"]
    # a sum over the batch (few column tiles) splits R over the cores, then adds the parts: within 2x of
    # the same bytes summed along rows
    over_rows, along_rows = (simulator.run("ReduceSum", "Ascend910B1", mode="timing", self=T(shape, F16), dims=dims,
                                           keepDims=False, dtype=int(ACL[F16]))
                             for shape, dims in (((4096, 1024), [0]), ((1024, 4096), [1])))
    assert over_rows.report.launches[0]["block_dim"] == 48 and over_rows.cycles < 2 * along_rows.cycles
    for shape, dims in (((32, 1000), [0]), ((3, 7000), [0]), ((1, 100_000), [])):    # wide rows fill UB
        r = simulator.run("ReduceSum", "Ascend910B1", mode="timing", self=T(shape, F16), dims=dims, keepDims=True,
                          dtype=int(ACL[F16]))
        assert r.cycles > 0
    r = simulator.run("Mean", "Ascend310P3", self=np.zeros((0, 4), F32), dim=[0], keepDim=False, dtype=int(ACL[F32]))
    assert [x["name"] for x in r.report.launches] == ["Fill"] and np.isnan(r.outputs["out"]).all()


STATUS = {
    "ReduceSum: null self": (161001, "ReduceSum", dict(self=None, dims=[0], keepDims=False, dtype=int(ACL[F16]),
                                                       out=T((), F16))),
    "Mean: null dim": (161001, "Mean", dict(self=T((4,), F16), dim=None, keepDim=False, dtype=int(ACL[F16]),
                                            out=T((), F16))),
    "Mean: int32 self": (161002, "Mean", dict(self=T((4,), np.int32), dim=[0], keepDim=False, dtype=int(ACL[F32]),
                                              out=T((), F32))),
    "Mean: bf16 dtype on 910A": (161002, "Mean", dict(self=T((4,), F32), dim=[0], keepDim=False,
                                                      dtype=int(ACL[BF16]), out=T((), F32))),
    "ReduceSum: out not dtype": (161002, "ReduceSum", dict(self=T((4,), F16), dims=[0], keepDims=False,
                                                           dtype=int(ACL[F32]), out=T((), F16))),
    "ReduceSum: dim out of range": (161002, "ReduceSum", dict(self=T((4, 2), F16), dims=[2], keepDims=False,
                                                              dtype=int(ACL[F16]), out=T((4,), F16))),
    "Mean: repeated dim": (161002, "Mean", dict(self=T((4, 2), F16), dim=[1, -1], keepDim=False, dtype=int(ACL[F16]),
                                                out=T((4,), F16))),
    "Mean: out shape": (161002, "Mean", dict(self=T((4, 2), F16), dim=[1], keepDim=True, dtype=int(ACL[F16]),
                                             out=T((4,), F16))),
    "ReduceSum: rank 9": (161002, "ReduceSum", dict(self=T((1,) * 9, F16), dims=[0], keepDims=True,
                                                    dtype=int(ACL[F16]), out=T((1,) * 9, F16))),
    "Mean: dtype not an aclDataType": (161002, "Mean", dict(self=T((4,), F16), dim=[0], keepDim=False, dtype=999,
                                                            out=T((), F16))),
}


@pytest.mark.parametrize("name", list(STATUS))
def test_documented_status_codes(name):
    status, op, args = STATUS[name]
    assert_status(op, "Ascend910A" if "910A" in name else "Ascend910B1", args, status)


@pytest.mark.parametrize("seed", range(24))
def test_every_reduction_plan_fits_ub_or_is_refused_as_a_tiling_error(seed):
    """Random (A, R, B) geometries, wide rows and long ones, on the chips and on what-ifs with UB cut
    down to 1/2 .. 1/16: the call runs (no kernel fault) or is refused with 561002."""
    from simulator.studies import make_profile
    rng = np.random.default_rng([seed, 7])
    soc = list(CHIPS)[seed % len(CHIPS)]
    shape = tuple(int(rng.choice([1, 3, 17, 64, 65, 1000, 4097, 30000])) for _ in range(3))
    while int(np.prod(shape)) > 3_000_000:
        shape = shape[1:]
    dims = [int(d) for d in rng.permutation(len(shape))[:int(rng.integers(1, len(shape) + 1))]]
    kind = "aiv" if CHIPS[soc] == "A2" else "aicore"
    profile = make_profile(soc, {f"cores.{kind}.buffers.UB": f"/{int(rng.choice([1, 2, 4, 16]))}"})
    dtype = [F16, F32][seed % 2]
    try:
        r = simulator.run("ReduceSum", profile=profile, mode="timing", self=T(shape, dtype), dims=dims, keepDims=False,
                          dtype=int(ACL[dtype]))
    except AclnnError as e:
        assert e.status == 561002, str(e)
    else:
        assert r.cycles > 0


@pytest.mark.parametrize("shape", [(64, 96, 56, 56), (64, 144, 56, 56)])
def test_a_mean_over_medium_rows_streams_near_the_device_bandwidth(shape):
    """The squeeze-excite means of an EfficientNet-B0 inference pass at batch 64 (rows of 3136) on
    the inference chip: a tensor past its 16 MiB L2 streams from LPDDR4X at 204.8 GB/s (the
    published figure) and the kernel keeps up with it: no more than 1.1x the time those bytes take
    (several rows a tile, two vcadd passes, not a loop per row). (Rows of 196 are padded to 512
    lanes and are vector-bound at about 2.3x: ops/reduce/kernel.py says so.)"""
    r = simulator.run("Mean", "Ascend310P3", mode="timing", self=T(shape, F16), dim=[-1, -2], keepDim=True,
                      dtype=int(ACL[F16]))
    nbytes = int(np.prod(shape)) * 2
    assert r.time_us <= 1.1 * nbytes / 204.8e3 + 5.0, r.report.summary()
