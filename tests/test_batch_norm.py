"""aclnnBatchNorm and aclnnBatchNormBackward against references we did not derive from the kernel:
float64 formulas written here from the definitions (every case) and torch's own
`aten.native_batch_norm` / `native_batch_norm_backward` in float64 where torch is installed.

The draws cover ranks 2 to 5, channels across the 16-channel groups and the cores, tiny and
non-power-of-two spatial sizes, training and inference, null weight / bias / running statistics,
the 1-D tensors in their own dtype, non-contiguous inputs and strided outputs, every dtype of the
series, on Ascend910A, Ascend310P3 (forward only: the inference series has no backward) and
Ascend910B1 / B4. `BATCH_NORM_CASES=N` runs more.

Tolerance, per element: the output dtype's rounding (u_o, and half its subnormal spacing), plus
FP32 arithmetic over the reduction (M = N x spatial terms: (1e-5 + 8 M 2^-24) of the magnitudes
the result is made of).
As in CANN before its Ascend 950, saveInvstd holds the biased variance.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from simulator import TensorLayout as T
from simulator.enums import AclnnError

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
UNIT = {F16: 2.0 ** -11, BF16: 2.0 ** -8, F32: 2.0 ** -24}
CHIPS = {"Ascend910A": "training", "Ascend310P3": "inference", "Ascend910B1": "A2", "Ascend910B4": "A2"}
N_CASES = int(os.environ.get("BATCH_NORM_CASES", "160"))


def draw_case(seed: int) -> dict:
    rng = np.random.default_rng([seed, 23])
    soc = list(CHIPS)[seed % len(CHIPS)]
    series = CHIPS[soc]
    dtypes = [F16, F32] + ([BF16] if series == "A2" else [])
    rank = int(rng.integers(2, 6))
    C = int(rng.choice([1, 3, 16, 17, 40, 64, 70, 100]))
    N = int(rng.integers(1, 5))
    spatial = tuple(int(rng.integers(1, 9)) for _ in range(rank - 2))
    while N * int(np.prod(spatial, dtype=np.int64)) < 2:      # training needs two values a channel
        N += 1
    pick = lambda: dtypes[int(rng.integers(0, len(dtypes)))]  # noqa: E731
    return dict(seed=seed, soc=soc, series=series, shape=(N, C) + spatial, dtype=pick(), vdtype=pick(),
                training=bool(rng.random() < 0.6), momentum=float(rng.choice([0.1, 0.01, 0.5])),
                eps=float(rng.choice([1e-5, 1e-3])), null=frozenset(n for n in ("weight", "bias", "stats")
                                                                      if rng.random() < 0.15),
                noncontig=bool(rng.random() < 0.2 and rank >= 3), strided_out=bool(rng.random() < 0.2),
                backward=series != "inference" and rng.random() < 0.5)


def _id(c) -> str:
    return (f"seed{c['seed']}-{c['soc']}-{'x'.join(map(str, c['shape']))}-{c['dtype'].name}/{c['vdtype'].name}-"
            f"{'train' if c['training'] else 'infer'}{'-bwd' if c['backward'] else ''}")


CASES = [draw_case(i) for i in range(N_CASES)]


def _data(c):
    rng = np.random.default_rng(30_000 + c["seed"])
    shape, C = c["shape"], c["shape"][1]

    def rand(shape, dtype, scale=1.0, shift=0.0):
        return (rng.standard_normal(shape) * scale + shift).astype(dtype)
    x = rand(shape, c["dtype"], 2.0, 0.5)
    if c["noncontig"]:
        x = np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
    d = dict(x=x, dy=rand(shape, c["dtype"]), w=rand(C, c["vdtype"]), b=rand(C, c["vdtype"]),
             rm=rand(C, c["vdtype"], 0.5), rv=(rng.random(C) + 0.5).astype(c["vdtype"]),
             save_mean=rand(C, c["vdtype"], 0.5), save_var=(rng.random(C) * 3 + 0.5).astype(c["vdtype"]))
    for name, keys in (("weight", ("w",)), ("bias", ("b",)), ("stats", ("rm", "rv"))):
        if name in c["null"]:
            for k in keys:
                d[k] = None
    return d


def _f64(a, fill, C):
    return np.full(C, fill) if a is None else a.astype(np.float64)


def forward_reference(c, d):
    """(output, batch mean, biased variance, runningMean after, runningVar after) in float64."""
    x = d["x"].astype(np.float64)
    C = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    sh = (1, C) + (1,) * (x.ndim - 2)
    M = x.size // C
    rm, rv = _f64(d["rm"], 0.0, C), _f64(d["rv"], 1.0, C)
    if c["training"]:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        m = c["momentum"]
        rm_after, rv_after = (1 - m) * rm + m * mean, (1 - m) * rv + m * var * M / (M - 1)
    else:
        mean, var, rm_after, rv_after = rm, rv, rm, rv
    w, b = _f64(d["w"], 1.0, C), _f64(d["b"], 0.0, C)
    xhat = (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + c["eps"])
    y = xhat * w.reshape(sh) + b.reshape(sh)
    # the variance is E[x^2] - mean^2 in FP32 (as CANN's BNTrainingReduce sums x and x^2): its
    # error grows with E[x^2] / variance
    amplify = 1 + (x ** 2).mean(axis=axes) / (var + c["eps"]) if c["training"] else np.ones(C)
    scale = np.abs(w).reshape(sh) * (np.abs(xhat) + 1) * amplify.reshape(sh) + np.abs(b).reshape(sh)
    return y, scale, mean, var, rm_after, rv_after


def backward_reference(c, d):
    """(gradInput, its magnitude scale, gradWeight, gradBias, their scale) in float64."""
    x, dy = d["x"].astype(np.float64), d["dy"].astype(np.float64)
    C = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    sh = (1, C) + (1,) * (x.ndim - 2)
    M = x.size // C
    if c["training"]:
        mean, var = d["save_mean"].astype(np.float64), d["save_var"].astype(np.float64)
    else:
        mean, var = _f64(d["rm"], 0.0, C), _f64(d["rv"], 1.0, C)
    w = _f64(d["w"], 1.0, C)
    invstd = 1 / np.sqrt(var + c["eps"])
    xhat = (x - mean.reshape(sh)) * invstd.reshape(sh)
    gb, gw = dy.sum(axis=axes), (dy * xhat).sum(axis=axes)
    a = (w * invstd).reshape(sh)
    # gradWeight is invstd (sum dy x - mean sum dy) in FP32: its error grows with the two sums
    vscale = invstd * (np.abs(dy * x).sum(axis=axes) + np.abs(mean) * np.abs(dy).sum(axis=axes)) \
        + np.abs(dy).sum(axis=axes)
    if c["training"]:
        gi = a / M * (M * dy - gb.reshape(sh) - xhat * gw.reshape(sh))
        gscale = np.abs(a) * (np.abs(dy) + (np.abs(dy).sum(axis=axes) / M).reshape(sh)
                              + np.abs(xhat) * (vscale / M).reshape(sh))
    else:
        gi, gscale = a * dy, np.abs(a * dy)
    return gi, gscale, gw, gb, vscale


def assert_close(out, ref, scale, M: int, what: str):
    out64 = np.asarray(out).astype(np.float64)
    u_o = UNIT[np.dtype(out.dtype)]
    # (the last term: a value below the dtype's normal range rounds to half its subnormal spacing)
    tol = (2 * u_o * np.abs(ref) + (1e-5 + 8 * M * 2.0 ** -24) * scale
           + float(ml_dtypes.finfo(out.dtype).smallest_subnormal) / 2)
    err = np.abs(out64 - ref)
    bad = ~(err <= tol)
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} outside tolerance; worst err {err.max():.3g} "
                           f"(tol there {tol.reshape(-1)[np.argmax(err)]:.3g})")


def _strided(shape, dtype):
    buf = np.full(tuple(shape[:-1]) + (2 * shape[-1],), np.nan, dtype)
    return buf, buf[..., ::2]


def run_forward(c, d):
    C = c["shape"][1]
    outs = {}
    if c["strided_out"]:
        outs["output"] = _strided(c["shape"], c["dtype"])
    kw = {k: v[1] for k, v in outs.items()}
    rm = None if d["rm"] is None else d["rm"].copy()
    rv = None if d["rv"] is None else d["rv"].copy()
    if c["training"]:
        kw["saveMean"], kw["saveInvstd"] = np.zeros(C, c["vdtype"]), np.zeros(C, c["vdtype"])
    x0 = d["x"].copy()
    r = simulator.run("BatchNorm", c["soc"], input=d["x"], weight=d["w"], bias=d["b"], runningMean=rm,
                      runningVar=rv, training=c["training"], momentum=c["momentum"], eps=c["eps"], **kw)
    assert np.array_equal(d["x"], x0), "input was modified"
    if c["strided_out"]:
        assert np.isnan(outs["output"][0][..., 1::2].astype(np.float32)).all(), "a gap of the strided output was written"
    return r, rm, rv


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_batch_norm_matches_the_formulas(c):
    d = _data(c)
    M = int(np.prod(c["shape"])) // c["shape"][1]
    if c["backward"]:
        kw = dict(saveMean=d["save_mean"], saveInvstd=d["save_var"]) if c["training"] else \
            dict(runningMean=d["rm"], runningVar=d["rv"])
        r = simulator.run("BatchNormBackward", c["soc"], gradOut=d["dy"], input=d["x"], weight=d["w"],
                          training=c["training"], eps=c["eps"], outputMask=[True, True, True], **kw)
        gi, gscale, gw, gb, vscale = backward_reference(c, d)
        assert_close(r.outputs["gradInput"], gi, gscale, M, "gradInput")
        assert_close(r.outputs["gradWeight"], gw, vscale, M, "gradWeight")
        assert_close(r.outputs["gradBias"], gb, vscale, M, "gradBias")
        return
    r, rm, rv = run_forward(c, d)
    y, scale, mean, var, rm_after, rv_after = forward_reference(c, d)
    assert_close(r.outputs["output"], y, scale, M, "output")
    x = d["x"].astype(np.float64)
    xscale = (np.abs(x).max(axis=(0,) + tuple(range(2, x.ndim))) + 1) ** 2
    if c["training"]:
        assert_close(r.outputs["saveMean"], mean, xscale, M, "saveMean")
        assert_close(r.outputs["saveInvstd"], var, xscale, M, "saveInvstd (the variance)")
    if rm is not None:
        assert_close(rm, rm_after, xscale, M, "runningMean")
        assert_close(rv, rv_after, xscale, M, "runningVar")


@pytest.mark.parametrize("c", CASES[:60], ids=[_id(c) for c in CASES[:60]])
def test_batch_norm_matches_torch(c):
    """torch's native_batch_norm (and its backward) in float64 against the formula references
    above: the references, not the simulator, are what torch checks here (the formula test holds
    the simulator to them)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    d = _data(c)
    C = c["shape"][1]
    t = lambda a: None if a is None else torch.from_numpy(np.ascontiguousarray(a).astype(np.float64))  # noqa: E731
    if c["backward"]:
        gi, _, gw, gb, _ = backward_reference(c, d)
        if c["training"]:
            invstd = 1 / torch.sqrt(t(d["save_var"]) + c["eps"])
            got = torch.ops.aten.native_batch_norm_backward(t(d["dy"]), t(d["x"]), t(d["w"]), None, None,
                                                            t(d["save_mean"]), invstd, True, c["eps"], [True] * 3)
        else:
            rm = t(d["rm"]) if d["rm"] is not None else torch.zeros(C, dtype=torch.float64)
            rv = t(d["rv"]) if d["rv"] is not None else torch.ones(C, dtype=torch.float64)
            got = torch.ops.aten.native_batch_norm_backward(t(d["dy"]), t(d["x"]), t(d["w"]), rm, rv, None, None,
                                                            False, c["eps"], [True] * 3)
        for mine, theirs in zip((gi, gw, gb), got):
            np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-9, atol=1e-9)
        return
    y, _, mean, var, rm_after, rv_after = forward_reference(c, d)
    rm = t(d["rm"]) if d["rm"] is not None else (None if c["training"] else torch.zeros(C, dtype=torch.float64))
    rv = t(d["rv"]) if d["rv"] is not None else (None if c["training"] else torch.ones(C, dtype=torch.float64))
    out, save_mean, save_invstd = torch.ops.aten.native_batch_norm(t(d["x"]), t(d["w"]), t(d["b"]), rm, rv,
                                                                   c["training"], c["momentum"], c["eps"])
    np.testing.assert_allclose(y, out.numpy(), rtol=1e-9, atol=1e-9)
    if c["training"]:
        np.testing.assert_allclose(mean, save_mean.numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(var, 1 / save_invstd.numpy() ** 2 - c["eps"], rtol=1e-7, atol=1e-9)
        if rm is not None:
            np.testing.assert_allclose(rm_after, rm.numpy(), rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(rv_after, rv.numpy(), rtol=1e-9, atol=1e-12)


# ---- CANN's launches ----------------------------------------------------------------------------
@pytest.mark.parametrize("soc, C, training, want", [
    ("Ascend910B1", 64, True, ["BatchNormV3"]),
    ("Ascend910B1", 32, True, ["BNTrainingReduce", "BNTrainingUpdate"]),
    ("Ascend910A", 64, True, ["BNTrainingReduce", "BNTrainingUpdate"]),
    ("Ascend910B1", 64, False, ["BNInfer"]),
])
def test_forward_launches_are_canns(soc, C, training, want):
    """ops-nn aclnn_batch_norm.cpp: Ascend C BatchNormV3 on A2 from 64 channels in training, the TBE
    pair otherwise, BNInfer in inference."""
    x = T((4, C, 8, 8), F16)
    kw = dict(saveMean=T((C,), F32), saveInvstd=T((C,), F32)) if training else {}
    r = simulator.run("BatchNorm", soc, mode="timing", input=x, weight=None, bias=None, runningMean=T((C,), F32),
                      runningVar=T((C,), F32), training=training, momentum=0.1, eps=1e-5, output=x, **kw)
    assert [launch["name"] for launch in r.report.launches] == want


@pytest.mark.parametrize("soc, N, C, S, across", [
    ("Ascend310P3", 1, 160, 49, True), ("Ascend310P3", 8, 160, 196, True), ("Ascend310P3", 15, 160, 49, False),
    ("Ascend310P3", 16, 160, 49, False), ("Ascend310P3", 1, 160, 784, False), ("Ascend310P3", 64, 160, 49, False),
    ("Ascend910B1", 1, 1152, 49, True), ("Ascend910B1", 15, 40, 49, False), ("Ascend910B1", 8, 32, 1, False)])
def test_inference_takes_channels_of_one_image_a_tile_where_rows_are_short(soc, N, C, S, across):
    """BNInfer is an elementwise kernel with a per-channel broadcast (TBE's broadcast schedule
    over (channels, spatial)): where rows are short and a block's channels outnumber its images'
    tiles, a tile holds 16 channels' rows of one image (each row's coefficients broadcast), not one
    channel's few rows; and it costs less than one tile per channel, the way it went before."""
    x = T((N, C, S), F16)
    r = simulator.run("BatchNorm", soc, mode="timing", input=x, weight=None, bias=None,
                      runningMean=T((C,), F32), runningVar=T((C,), F32), training=False, momentum=0.1,
                      eps=1e-5, output=x)
    assert (r.report.tiling.get("channelsPerTile") == 16) == across
    if across:
        below = 1 << ((16 * (-(-S // 16) * 16) - 1).bit_length() - 1)     # a tile too small for 16 rows
        per_channel = simulator.run("BatchNorm", soc, mode="timing", input=x, weight=None, bias=None,
                                    runningMean=T((C,), F32), runningVar=T((C,), F32), training=False,
                                    momentum=0.1, eps=1e-5, output=x, tiling={"tileLength": below})
        assert per_channel.report.tiling.get("channelsPerTile") is None
        assert r.cycles < per_channel.cycles


def test_backward_launches_are_canns():
    x = T((4, 32, 8, 8), F16)
    r = simulator.run("BatchNormBackward", "Ascend910B1", mode="timing", gradOut=x, input=x, weight=T((32,), F32),
                      saveMean=T((32,), F32), saveInvstd=T((32,), F32), training=True, eps=1e-5,
                      outputMask=[True, True, True])
    assert [launch["name"] for launch in r.report.launches] == ["BNTrainingUpdateGrad", "BNTrainingReduceGrad"]


def test_empty_input_fills_the_saved_statistics():
    C = 5
    save_mean, save_var = np.ones(C, np.float32), np.ones(C, np.float32)
    r = simulator.run("BatchNorm", "Ascend910B1", input=np.zeros((0, C, 3, 3), np.float32), weight=None, bias=None,
                      runningMean=None, runningVar=None, training=True, momentum=0.1, eps=1e-5,
                      saveMean=save_mean, saveInvstd=save_var)
    assert (save_mean == 0).all() and np.isnan(save_var).all()
    assert r.outputs["output"].shape == (0, C, 3, 3)


# ---- status codes -------------------------------------------------------------------------------
def _fwd(**over):
    a = dict(input=T((2, 4, 5, 5), F16), weight=T((4,), F32), bias=T((4,), F32), runningMean=T((4,), F32),
             runningVar=T((4,), F32), training=True, momentum=0.1, eps=1e-5, output=T((2, 4, 5, 5), F16),
             saveMean=T((4,), F32), saveInvstd=T((4,), F32))
    a.update(over)
    return a


def _bwd(**over):
    a = dict(gradOut=T((2, 4, 5, 5), F16), input=T((2, 4, 5, 5), F16), weight=T((4,), F32), runningMean=None,
             runningVar=None, saveMean=T((4,), F32), saveInvstd=T((4,), F32), training=True, eps=1e-5,
             outputMask=[True, True, True])
    a.update(over)
    return a


STATUS = {
    "forward: null input": ("BatchNorm", "Ascend910B1", 161001, _fwd(input=None)),
    "forward: training without saveMean": ("BatchNorm", "Ascend910B1", 161001, _fwd(saveMean=None)),
    "forward: int32 input": ("BatchNorm", "Ascend910B1", 161002, _fwd(input=T((2, 4, 5, 5), np.int32))),
    "forward: bf16 on 910A": ("BatchNorm", "Ascend910A", 161002, _fwd(input=T((2, 4, 5, 5), BF16),
                                                                   output=T((2, 4, 5, 5), BF16))),
    "forward: rank 1": ("BatchNorm", "Ascend910B1", 161002, _fwd(input=T((8,), F16), output=T((8,), F16))),
    "forward: rank 9": ("BatchNorm", "Ascend910B1", 161002, _fwd(input=T((1, 4) + (1,) * 7, F16),
                                                               output=T((1, 4) + (1,) * 7, F16))),
    "forward: output shape": ("BatchNorm", "Ascend910B1", 161002, _fwd(output=T((2, 4, 5, 4), F16))),
    "forward: output dtype": ("BatchNorm", "Ascend910B1", 161002, _fwd(output=T((2, 4, 5, 5), F32))),
    "forward: null output": ("BatchNorm", "Ascend910B1", 161001, _fwd(output=None)),
    "forward: weight length": ("BatchNorm", "Ascend910B1", 161002, _fwd(weight=T((5,), F32))),
    "forward: runningVar 2-D": ("BatchNorm", "Ascend910B1", 161002, _fwd(runningVar=T((4, 1), F32))),
    "forward: saveInvstd length": ("BatchNorm", "Ascend910B1", 161002, _fwd(saveInvstd=T((3,), F32))),
    "backward: null gradOut": ("BatchNormBackward", "Ascend910B1", 161001, _bwd(gradOut=None)),
    "backward: gradInput asked, null": ("BatchNormBackward", "Ascend910B1", 161001, _bwd(gradInput=None)),
    "backward: outputMask of 2": ("BatchNormBackward", "Ascend910B1", 161002, _bwd(outputMask=[True, True])),
    "backward: on the inference series": ("BatchNormBackward", "Ascend310P3", 161002, _bwd()),
    "backward: gradOut shape": ("BatchNormBackward", "Ascend910B1", 161002, _bwd(gradOut=T((2, 4, 5, 4), F16))),
    "backward: gradOut dtype": ("BatchNormBackward", "Ascend910B1", 161002, _bwd(gradOut=T((2, 4, 5, 5), F32))),
    "backward: saveMean length": ("BatchNormBackward", "Ascend910B1", 161002, _bwd(saveMean=T((5,), F32))),
}


def _raw_status(op: str, soc: str, args: dict) -> tuple[int, str]:
    """The call through the aclnn API itself (simulator.run would allocate an output left null)."""
    from simulator import acl, aclnn
    from simulator.enums import acl_dtype_of
    from test_conv_errors import tensor
    with acl.use_runtime(acl.Runtime()):
        assert acl.aclInit(None, soc=soc, mode="timing") == 0 and acl.aclrtSetDevice(0) == 0
        kw = {}
        for k, v in args.items():
            if isinstance(v, T):
                kw[k] = tensor(v.shape, acl_dtype_of(v.dtype))
            elif isinstance(v, list):
                kw[k] = acl.aclCreateBoolArray(v)
            else:
                kw[k] = v
        _, executor, ret = getattr(aclnn, f"aclnn{op}GetWorkspaceSize")(**kw)
        assert (executor is None) == (ret != 0)
        return ret, acl.aclGetRecentErrMsg()


@pytest.mark.parametrize("name", list(STATUS))
def test_documented_status_codes(name):
    op, soc, status, args = STATUS[name]
    if any(v is None for k, v in args.items() if k in ("output", "saveMean", "saveInvstd", "gradInput")) \
            or "gradInput" in args:
        ret, msg = _raw_status(op, soc, args)
        assert ret == status and msg, (ret, msg)
        return
    with pytest.raises(AclnnError) as e:
        simulator.run(op, soc, mode="timing", **args)
    assert e.value.status == status, str(e.value)
