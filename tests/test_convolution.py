"""aclnnConvolution against references we did not derive from its kernels: the float64 formula
reference (tests/conv_reference.py, `conv_forward`, plus the bias) on every case, and torch's own
`aten.convolution` in float64 where torch is installed; its status codes against the calls CANN's
document says must fail; its launches against CANN's dispatch; its cycles against the chips'
published bounds.

The random draws cover what the operator accepts: 1D, 2D and 3D (3D on the A2 series), transposed
and not, per-dim kernel / stride / dilation / padding (2D 4-entry and 1D 2-entry included) and
outputPadding (below stride or dilation, so also past every window), groups, channels across C0,
with and without bias (in its own dtype), non-contiguous inputs and strided outputs, every dtype
and cubeMathType the series allows, on Ascend910A, Ascend310P3, Ascend910B1 and Ascend910B4.
`CONV_FORWARD_CASES=N` runs more.

Tolerance: that of the backward's tests (tests/test_convolution_backward.py) with one more rounding
to the output dtype, as the bias is added to the rounded convolution (docs/CONVOLUTION.md):
    |out - ref| <= (2 u_c + 1e-5) A + 2 u_o (|ref| + |bias|) + s_o / 2
with A the convolution of |input| and |weight|.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from simulator import TensorLayout
from simulator.enums import AclnnError
from conv_reference import conv_backward, conv_forward, conv_out_size, norm_padding
from test_convolution_backward import NP_UNIT, UNIT, compute_dtype
from test_physics_bounds import check, cube_bound, memory_bound, valid_taps

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
CHIPS = {"Ascend910A": "training", "Ascend310P3": "inference", "Ascend910B1": "A2", "Ascend910B4": "A2"}
N_CASES = int(os.environ.get("CONV_FORWARD_CASES", "300"))


def _padding(rng, nd: int, transposed: bool) -> tuple:
    if nd == 2 and rng.random() < 0.3:
        return tuple(int(rng.integers(0, 4)) for _ in range(4))
    if nd == 1 and not transposed and rng.random() < 0.3:
        return tuple(int(rng.integers(0, 4)) for _ in range(2))
    return tuple(int(rng.integers(0, 4)) for _ in range(nd))


def _dtypes(rng, series: str) -> tuple:
    """(input / weight / output dtype, bias dtype, cubeMathType) the series allows."""
    names = [F16, F32] + ([BF16] if series == "A2" else [])
    dtype = names[int(rng.integers(0, len(names)))]
    bias_dtype = names[int(rng.integers(0, len(names)))]
    if series == "A2":
        cm = int(rng.integers(0, 4))
        if dtype == BF16 and cm == 2:
            cm = 1
    else:
        cm = int(rng.integers(0, 4)) if dtype == F16 else int(rng.choice([1, 2]))
    return dtype, bias_dtype, cm


def _pairs(c):
    """(before, after) per spatial dim; a 1D 2-entry padding is [left, right]."""
    p = c["padding"]
    return [(p[0], p[1])] if c["nd"] == 1 and len(p) == 2 else norm_padding(p, c["nd"])


def draw_case(seed: int) -> dict:
    """One valid call, drawn from seed alone."""
    rng = np.random.default_rng([seed, 11])
    soc = list(CHIPS)[seed % len(CHIPS)]
    series = CHIPS[soc]
    while True:
        nd = int(rng.choice([1, 2, 2, 3] if series == "A2" else [1, 2, 2]))
        transposed = bool(rng.random() < 0.4)
        groups = int(rng.choice([1, 1, 1, 2, 3]))
        wide = rng.random() < 0.25
        cig, cog = (int(rng.integers(1, 40 if wide else 6)) for _ in range(2))
        k = tuple(int(rng.integers(1, 5 if nd < 3 else 4)) for _ in range(nd))
        s = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        d = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        p = _padding(rng, nd, transposed)
        sp = tuple(int(rng.integers(1, 12 if nd < 3 else 6)) for _ in range(nd))
        opad = tuple(int(rng.integers(0, max(si, di))) if transposed else 0 for si, di in zip(s, d))
        dtype, bias_dtype, cm = _dtypes(rng, series)
        n = int(rng.integers(1, 4))
        cin, cout = cig * groups, cog * groups
        c = dict(seed=seed, soc=soc, series=series, nd=nd, transposed=transposed, groups=groups,
                 xs=(n, cin) + sp, ws=((cin, cog) if transposed else (cout, cig)) + k, cout=cout, stride=s,
                 dilation=d, padding=p, opad=opad, dtype=dtype, cm=cm,
                 bias_dtype=bias_dtype if rng.random() < 0.6 else None,
                 noncontig=bool(rng.random() < 0.2), strided_out=bool(rng.random() < 0.2))
        out = conv_out_size(sp, k, s, _pairs(dict(nd=nd, padding=p)), d, transposed, list(opad))
        if all(o >= 1 for o in out) and np.prod(out) * cout * n <= 8000:
            c["out"] = (n, cout) + tuple(out)
            return c


def _id(c) -> str:
    return (f"seed{c['seed']}-{c['soc']}-{c['nd']}D{'-T' if c['transposed'] else ''}-{c['dtype'].name}-cm{c['cm']}"
            f"{'-bias' if c['bias_dtype'] is not None else ''}")


CASES = [draw_case(i) for i in range(N_CASES)]


def _data(c):
    rng = np.random.default_rng(20_000 + c["seed"])

    def rand(shape, dtype):
        a = rng.standard_normal(shape).astype(dtype)
        if c["noncontig"] and a.ndim >= 3:
            a = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)
        return a
    bias = rand((c["cout"],), c["bias_dtype"]) if c["bias_dtype"] is not None else None
    return rand(c["xs"], c["dtype"]), rand(c["ws"], c["dtype"]), bias


def reference(c, x, w, bias):
    """(output, sum of magnitudes, |bias| broadcast) in float64, from the formulas."""
    args = (c["stride"], _pairs(c), c["dilation"], c["groups"], c["transposed"], list(c["opad"]))
    y = conv_forward(x, w, *args)
    mag = conv_forward(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)), *args)
    b = np.zeros(c["cout"]) if bias is None else bias.astype(np.float64)
    shape = (1, -1) + (1,) * c["nd"]
    return y + b.reshape(shape), mag, np.abs(b).reshape(shape)


def assert_close(out, ref, mag, bias_mag, comp: str, what: str):
    out64 = np.asarray(out).astype(np.float64)
    u_o = NP_UNIT[np.dtype(out.dtype)]
    tol = ((2 * UNIT[comp] + 1e-5) * mag + 2 * u_o * (np.abs(ref) + bias_mag)
           + float(ml_dtypes.finfo(out.dtype).smallest_subnormal) / 2)
    err = np.abs(out64 - ref)
    bad = ~(err <= tol)
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} elements outside tolerance; worst err "
                           f"{err.max():.3g} (tol there {tol.reshape(-1)[np.argmax(err)]:.3g}), compute {comp}")


def _call(c, x, w, bias, **extra):
    return simulator.run("Convolution", soc=c["soc"], input=x, weight=w, bias=bias, stride=list(c["stride"]),
                         padding=list(c["padding"]), dilation=list(c["dilation"]), transposed=c["transposed"],
                         outputPadding=list(c["opad"]), groups=c["groups"], cubeMathType=c["cm"], **extra)


_OUTPUTS: dict[int, np.ndarray] = {}
_FAILED: dict[int, str] = {}


def run_case(c) -> np.ndarray:
    x, w, bias = _data(c)
    kept = [a.copy() for a in (x, w, bias) if a is not None]
    extra = {}
    if c["strided_out"]:            # every other element of a NaN-filled buffer: the gaps stay NaN
        buf = np.full(c["out"][:-1] + (2 * c["out"][-1],), np.nan, c["dtype"])
        extra["output"] = buf[..., ::2]
    res = _call(c, x, w, bias, **extra)
    assert all(np.array_equal(a, b) for a, b in zip([a for a in (x, w, bias) if a is not None], kept)), \
        "an input was modified"
    out = res.outputs["output"]
    if c["strided_out"]:
        assert np.isnan(buf[..., 1::2].astype(np.float32)).all(), "a gap of the strided output was written"
        out = buf[..., ::2]
    assert out.shape == c["out"]
    ref, mag, bias_mag = reference(c, x, w, bias)
    comp = compute_dtype(c["series"], (x.dtype, w.dtype), c["cm"])
    assert_close(out, ref, mag, bias_mag, comp, f"{_id(c)} vs formula")
    _OUTPUTS[c["seed"]] = np.array(out)
    return _OUTPUTS[c["seed"]]


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_output_matches_the_formula(c):
    try:
        run_case(c)
    except BaseException as e:
        _FAILED[c["seed"]] = str(e).splitlines()[0] if str(e) else repr(e)
        raise


def torch_output(torch, c, x, w, bias):
    """torch's aten.convolution in float64, the padding made explicit where torch takes only
    symmetric padding (zeros around the input; a transposed output cropped and zero-extended)."""
    t = [None if a is None else torch.from_numpy(np.ascontiguousarray(a).astype(np.float64)) for a in (x, w, bias)]
    nd, stride, dilation = c["nd"], list(c["stride"]), list(c["dilation"])
    pairs = _pairs(c)
    if all(lo == hi for lo, hi in pairs):
        return torch.ops.aten.convolution(t[0], t[1], t[2], stride, [lo for lo, _ in pairs], dilation,
                                          c["transposed"], list(c["opad"]), c["groups"]).numpy()
    zeros = [0] * nd
    if not c["transposed"]:
        xp = torch.nn.functional.pad(t[0], [p for lo_hi in reversed(pairs) for p in lo_hi])
        return torch.ops.aten.convolution(xp, t[1], t[2], stride, zeros, dilation, False, zeros, c["groups"]).numpy()
    full = torch.ops.aten.convolution(t[0], t[1], None, stride, zeros, dilation, True, zeros, c["groups"])
    out = c["out"][2:]
    extend = [max(0, lo + o - f) for (lo, _), o, f in zip(pairs, out, full.shape[2:])]
    full = torch.nn.functional.pad(full, [p for e in reversed(extend) for p in (0, e)])
    y = full[(slice(None), slice(None)) + tuple(slice(lo, lo + o) for (lo, _), o in zip(pairs, out))]
    if t[2] is not None:
        y = y + t[2].reshape((1, -1) + (1,) * nd)
    return y.numpy()


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_output_matches_torch(c):
    """torch in float64 against the formula reference (1e-10 of the magnitudes), then against the
    simulator's output with the formula test's tolerance."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    x, w, bias = _data(c)
    ref, mag, bias_mag = reference(c, x, w, bias)
    tref = torch_output(torch, c, x, w, bias)
    assert tref.shape == ref.shape
    assert (np.abs(ref - tref) <= 1e-10 * (mag + bias_mag) + 1e-300).all(), "the formula reference and torch disagree"
    if c["seed"] in _FAILED:
        pytest.fail(f"{_id(c)}: failed against the formula reference: {_FAILED[c['seed']]}", pytrace=False)
    out = _OUTPUTS.get(c["seed"])
    if out is None:
        out = run_case(c)
    comp = compute_dtype(c["series"], (x.dtype, w.dtype), c["cm"])
    assert_close(out, tref, mag, bias_mag, comp, f"{_id(c)} vs torch")


def test_timing_mode_gives_the_functional_cycles():
    c = next(c for c in CASES if c["soc"] == "Ascend910B1" and c["bias_dtype"] is not None)
    x, w, bias = _data(c)
    functional = _call(c, x, w, bias)
    timing = simulator.run("Convolution", soc=c["soc"], mode="timing", input=TensorLayout(x.shape, x.dtype),
                           weight=TensorLayout(w.shape, w.dtype), bias=TensorLayout(bias.shape, bias.dtype),
                           stride=list(c["stride"]), padding=list(c["padding"]), dilation=list(c["dilation"]),
                           transposed=c["transposed"], outputPadding=list(c["opad"]), groups=c["groups"],
                           cubeMathType=c["cm"])
    assert timing.cycles == functional.cycles


@pytest.mark.parametrize("soc", list(CHIPS))
def test_a_long_signal_matches_the_formula(soc):
    """A 1D signal longer than its rows fit L1 or UB whole (a speech model's 20,000 samples; Whisper's
    first convolution over 3,000 frames) is cut into W windows: exact with -1 / 0 / 1 entries,
    whose sums FP16 holds exactly here, and timing mode gives the functional cycles."""
    rng = np.random.default_rng(20000)
    for xs, ws, s, p in (((2, 16, 20000), (32, 16, 5), 2, 2), ((1, 80, 3000), (384, 80, 3), 1, 1)):
        x, w = rng.integers(-1, 2, xs).astype(F16), rng.integers(-1, 2, ws).astype(F16)
        kw = dict(bias=None, stride=[s], padding=[p], dilation=[1], transposed=False, outputPadding=[0], groups=1,
                  cubeMathType=0)
        r = simulator.run("Convolution", soc=soc, input=x, weight=w, **kw)
        np.testing.assert_array_equal(r.outputs["output"].astype(np.float64), conv_forward(x, w, [s], [p], [1]))
        timing = simulator.run("Convolution", soc=soc, mode="timing", input=TensorLayout(xs, F16),
                               weight=TensorLayout(ws, F16), **kw)
        assert timing.cycles == r.cycles


# ---- CANN's dispatch ----------------------------------------------------------------------------
def test_launches_follow_cann_dispatch():
    """CANN's aclnnConvolution (ops-nn conv/convolution_forward/op_host/op_api/aclnn_convolution.cpp):
    TransData of the input to NC1HWC0 and of the weight, the Cube kernel (Conv2D for 1D and 2D),
    TransData of the output back; our bias is one more vector launch after them. On A2 a 16-bit
    weight's TransData is TIK's, built for unknown shapes, so its output is atomic and a MemSet
    zeroes it first (CANN 8.1 trans_data_positive_source_ntc.py, `_is_padding_n`; PaddleOCR-VL's
    910B2 profile: TransData x, MemSet, TransData w, Conv2D, TransData y)."""
    x = np.ones((2, 16, 8, 8), np.float16)
    w = np.ones((32, 16, 3, 3), np.float16)
    b = np.ones(32, np.float16)
    r = simulator.run("Convolution", "Ascend910B1", input=x, weight=w, bias=b, stride=[1, 1], padding=[1, 1],
                      dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=1, cubeMathType=0)
    names = [launch["name"] for launch in r.report.launches]
    assert names[0].startswith("TransData(input") and names[1] == "MemSet(weight FRACTAL_Z)"
    assert names[2].startswith("TransData(weight")
    assert names[3] == "Cube: Conv2D" and names[4].startswith("TransData(output")
    assert names[5].startswith("Add(output, bias)") and len(names) == 6
    # the interior of an all-ones 3x3 convolution over 16 channels, plus the bias
    assert (r.outputs["output"][:, :, 1:-1, 1:-1] == 16 * 9 + 1).all()


@pytest.mark.parametrize("soc,dtype,groups,cleared", [
    ("Ascend910B2", np.float16, 1, ["MemSet(weight FRACTAL_Z)"]),
    ("Ascend910_9392", "bf16", 1, ["MemSet(weight FRACTAL_Z)"]),
    # an FP32 weight's FRACTAL_Z (C0 8) is a DSL TransData, which writes every byte
    ("Ascend910B2", np.float32, 1, []),
    # groups: TIK's trans_data_groups is atomic as well, so the enlarged weight is zeroed too
    ("Ascend910B3", np.float16, 8, ["MemSet(weight groups enlarged)", "MemSet(weight FRACTAL_Z)"]),
    # the training and inference series' binaries: no such MemSet modelled
    ("Ascend910A", np.float16, 1, []),
    ("Ascend310P3", np.float16, 1, []),
])
def test_weight_transdata_memset(soc, dtype, groups, cleared):
    """Which weight TransData a MemSet precedes, and that the result is still the convolution."""
    dt = ml_dtypes.bfloat16 if dtype == "bf16" else dtype
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, (2, 16, 6, 6)).astype(dt)
    w = rng.integers(-2, 3, (16, 16 // groups, 3, 3)).astype(dt)
    r = simulator.run("Convolution", soc, input=x, weight=w, bias=None, stride=[1, 1], padding=[1, 1],
                      dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=groups, cubeMathType=0)
    names = [launch["name"] for launch in r.report.launches]
    assert [n for n in names if n.startswith("MemSet")] == cleared
    for memset in cleared:           # each just before the TransData whose output it zeroes
        assert names[names.index(memset) + 1].startswith("TransData(weight")
    want = conv_forward(x.astype(np.float64), w.astype(np.float64), [1, 1], [1, 1], [1, 1], groups)
    np.testing.assert_array_equal(r.outputs["output"].astype(np.float64), want)


def _grouped_forward():
    """Ascend910B3, groups of 2 channels: 8 of them enlarged into one Cube group."""
    rng = np.random.default_rng(4)
    x = rng.integers(-2, 3, (2, 16, 6, 6)).astype(np.float16)
    w = rng.integers(-2, 3, (16, 2, 3, 3)).astype(np.float16)
    r = simulator.run("Convolution", "Ascend910B3", input=x, weight=w, bias=None, stride=[1, 1], padding=[1, 1],
                      dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=8, cubeMathType=0)
    want = conv_forward(x.astype(np.float64), w.astype(np.float64), [1, 1], [1, 1], [1, 1], 8)
    return r.outputs["output"].astype(np.float64), want


def _grad_weight_3d():
    """Ascend910B2, a 3D gradWeight in FP16: FP32 atomic adds into a workspace."""
    rng = np.random.default_rng(4)
    x = rng.integers(-2, 3, (1, 4, 3, 5, 5)).astype(np.float16)
    w = rng.integers(-2, 3, (8, 4, 2, 3, 3)).astype(np.float16)
    dy = rng.integers(-2, 3, (1, 8, 2, 5, 5)).astype(np.float16)
    r = simulator.run("ConvolutionBackward", "Ascend910B2", gradOutput=dy, input=x, weight=w, biasSizes=[8],
                      stride=[1, 1, 1], padding=[0, 1, 1], dilation=[1, 1, 1], transposed=False,
                      outputPadding=[0, 0, 0], groups=1, outputMask=[False, True, False], cubeMathType=0)
    want = conv_backward(dy, x, w, [1, 1, 1], [0, 1, 1], [1, 1, 1], mask=(False, True, False))[1]
    return r.outputs["gradWeight"].astype(np.float64), want


@pytest.mark.parametrize("memset,call", [("MemSet(weight groups enlarged)", _grouped_forward),
                                         ("MemSet(gradWeight FP32 accumulator)", _grad_weight_3d)])
def test_a_memset_left_out_shows_in_the_output(monkeypatch, memset, call):
    """aclrtMalloc does not clear memory (simulator.memory.UNWRITTEN_BYTE), so the MemSets before a
    launch that writes only part of its output (the enlarged groups' diagonal blocks) or adds into it
    (a 3D gradWeight's atomic adds) are what make the result right: with one left out it is not."""
    import ops.conv.plan as plan
    got, want = call()
    np.testing.assert_array_equal(got, want)
    zero_fill = plan.zero_fill_launch
    monkeypatch.setattr(plan, "zero_fill_launch", lambda label, dst, nbytes, profile:
                        zero_fill(label, dst, 0 if label == memset else nbytes, profile))
    got, want = call()
    assert not np.array_equal(got, want)


@pytest.mark.parametrize("soc,dtype", [("Ascend910B2", np.float32), ("Ascend910B2", np.float16),
                                       ("Ascend910_9392", np.float32)])
def test_a_3d_weight_transdata_is_tik_in_every_dtype(soc, dtype):
    """NCDHW -> FRACTAL_Z_3D is no DSL pair in CANN 8.1's trans_data.py (`DSL_SUPPORT`), so even an
    FP32 3D weight takes TIK's positive_source_ntc and its MemSet on A2 / A3 (where 3D runs)."""
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, (1, 4, 4, 5, 5)).astype(dtype)
    w = rng.integers(-2, 3, (8, 4, 2, 3, 3)).astype(dtype)
    r = simulator.run("Convolution", soc, input=x, weight=w, bias=None, stride=[1, 1, 1], padding=[0, 1, 1],
                      dilation=[1, 1, 1], transposed=False, outputPadding=[0, 0, 0], groups=1, cubeMathType=0)
    names = [launch["name"] for launch in r.report.launches]
    assert names[names.index("MemSet(weight FRACTAL_Z)") + 1].startswith("TransData(weight")
    want = conv_forward(x.astype(np.float64), w.astype(np.float64), [1, 1, 1], [0, 1, 1], [1, 1, 1])
    np.testing.assert_allclose(r.outputs["output"].astype(np.float64), want, rtol=1e-6)


def test_an_empty_output_launches_nothing():
    x = np.zeros((0, 4, 5, 5), np.float16)
    w = np.ones((6, 4, 3, 3), np.float16)
    r = simulator.run("Convolution", "Ascend910B1", input=x, weight=w, bias=None, stride=[1, 1], padding=[0, 0],
                      dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=1, cubeMathType=0)
    assert r.outputs["output"].shape == (0, 6, 3, 3) and not r.report.launches


# ---- status codes -------------------------------------------------------------------------------
def _args(**over):
    a = dict(input=TensorLayout((2, 4, 8, 8), F16), weight=TensorLayout((6, 4, 3, 3), F16), bias=None,
             stride=[1, 1], padding=[1, 1], dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=1,
             output=TensorLayout((2, 6, 8, 8), F16), cubeMathType=0)
    a.update(over)
    return a


T = TensorLayout
STATUS_CASES = {
    # 161001: null pointers
    "null input": (161001, "Ascend910B1", _args(input=None)),
    "null weight": (161001, "Ascend910B1", _args(weight=None)),
    "null stride": (161001, "Ascend910B1", _args(stride=None)),
    "null outputPadding, transposed": (161001, "Ascend910B1", _args(
        transposed=True, outputPadding=None, weight=T((4, 6, 3, 3), F16))),
    # 161002: dtypes, formats, lengths, values, shapes, limits, cubeMathType
    "int32 input": (161002, "Ascend910B1", _args(input=T((2, 4, 8, 8), np.int32))),
    "bf16 on 910A": (161002, "Ascend910A", _args(input=T((2, 4, 8, 8), BF16), weight=T((6, 4, 3, 3), BF16),
                                                 output=T((2, 6, 8, 8), BF16))),
    "double bias": (161002, "Ascend910B1", _args(bias=T((6,), np.float64))),
    "3D on 910A": (161002, "Ascend910A", _args(input=T((1, 4, 4, 8, 8), F16), weight=T((6, 4, 3, 3, 3), F16),
                                               padding=[1, 1, 1], stride=[1, 1, 1], dilation=[1, 1, 1],
                                               output=T((1, 6, 4, 8, 8), F16))),
    "rank 6": (161002, "Ascend910B1", _args(input=T((1, 1, 4, 4, 4, 4), F16), weight=T((6, 1, 1, 1, 1, 1), F16))),
    "ranks differ": (161002, "Ascend910B1", _args(weight=T((6, 4, 3), F16))),
    "stride length": (161002, "Ascend910B1", _args(stride=[1])),
    "stride 0": (161002, "Ascend910B1", _args(stride=[0, 1])),
    "dilation 0": (161002, "Ascend910B1", _args(dilation=[1, 0])),
    "negative padding": (161002, "Ascend910B1", _args(padding=[-1, 1])),
    "padding of 3 in 2D": (161002, "Ascend910B1", _args(padding=[1, 1, 1])),
    "padding of 1 in 2D": (161002, "Ascend910B1", _args(padding=[1])),
    "groups 0": (161002, "Ascend910B1", _args(groups=0)),
    "channels vs groups": (161002, "Ascend910B1", _args(groups=2)),
    "output shape": (161002, "Ascend910B1", _args(output=T((2, 6, 7, 8), F16))),
    "output channels": (161002, "Ascend910B1", _args(output=T((2, 5, 8, 8), F16))),
    "bias length": (161002, "Ascend910B1", _args(bias=T((5,), F16))),
    "bias 2-D": (161002, "Ascend910B1", _args(bias=T((6, 1), F16))),
    "no output (kernel > padded input)": (161002, "Ascend910B1", _args(
        weight=T((6, 4, 11, 11), F16), padding=[0, 0], output=T((2, 6, 1, 1), F16))),
    "outputPadding >= stride and dilation": (161002, "Ascend910B1", _args(
        transposed=True, weight=T((4, 6, 3, 3), F16), outputPadding=[1, 0], output=T((2, 6, 9, 8), F16))),
    "cubeMathType 4": (161002, "Ascend910B1", _args(cubeMathType=4)),
    "FP32 KEEP_DTYPE on 910A": (161002, "Ascend910A", _args(input=T((2, 4, 8, 8), F32), weight=T((6, 4, 3, 3), F32),
                                                            output=T((2, 6, 8, 8), F32))),
    "kernel over the A2 limit": (161002, "Ascend910B1", _args(weight=T((6, 4, 1, 256), F16), padding=[0, 128],
                                                              output=T((2, 6, 8, 9), F16))),
    "empty input, output not empty": (161002, "Ascend910B1", _args(
        input=T((2, 0, 8, 8), F16), weight=T((6, 0, 3, 3), F16))),
}


@pytest.mark.parametrize("name", list(STATUS_CASES))
def test_documented_status_codes(name):
    status, soc, args = STATUS_CASES[name]
    with pytest.raises(AclnnError) as e:
        simulator.run("Convolution", soc, mode="timing", **args)
    assert e.value.status == status, str(e.value)
    assert "Convolution" in str(e.value) or "aclnnConvolution" in str(e.value)


def test_null_output_is_161001_with_a_message():
    """simulator.run allocates an output left out, so the null output goes through the aclnn API."""
    from simulator import acl, aclnn
    from test_conv_errors import DT, tensor
    with acl.use_runtime(acl.Runtime()):
        assert acl.aclInit(None, soc="Ascend910B1", mode="timing") == 0
        assert acl.aclrtSetDevice(0) == 0
        _, executor, ret = aclnn.aclnnConvolutionGetWorkspaceSize(
            input=tensor((2, 4, 8, 8), DT.ACL_FLOAT16), weight=tensor((6, 4, 3, 3), DT.ACL_FLOAT16), bias=None,
            stride=acl.aclCreateIntArray([1, 1]), padding=acl.aclCreateIntArray([1, 1]),
            dilation=acl.aclCreateIntArray([1, 1]), transposed=False, outputPadding=acl.aclCreateIntArray([0, 0]),
            groups=1, output=None, cubeMathType=0)
        assert ret == 161001 and executor is None
        assert "output is a null pointer" in acl.aclGetRecentErrMsg()


# ---- cycles against the chips' published figures --------------------------------------------------
@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910A", "Ascend310P3"])
def test_forward_respects_memory_and_cube_bounds(soc):
    n, cin, cout, h, k, s, p = 8, 64, 128, 28, 3, 2, 1
    ho = (h + 2 * p - k) // s + 1
    x, w, y = T((n, cin, h, h), F16), T((cout, cin, k, k), F16), T((n, cout, ho, ho), F16)
    profile = simulator.load_profile(soc)
    r = simulator.run("Convolution", soc, mode="timing", trace=False, input=x, weight=w, bias=None, stride=[s, s],
                      padding=[p, p], dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=1,
                      output=y, cubeMathType=0)
    macs = n * cout * cin * valid_taps(h, ho, k, s, p, 1) ** 2
    nbytes = [int(np.prod(t.shape)) * 2 for t in (x, w, y)]
    check(profile, r.cycles, {"device-memory": memory_bound(profile, nbytes[0] + nbytes[1], nbytes[2]),
                              "Cube": cube_bound(profile, macs)})
