"""aclnnConvolution and aclnnConvolutionBackward with many groups (the depthwise and grouped layers of
EfficientNet and MobileNet), where the Cube runs several original groups as one (CANN's group "enlarge", TBE util_conv2d:
enlarge = min(lcm(lcm(cin, C0) / cin, lcm(cout, 16) / cout), groups), the weight laid out
block-diagonal; gradWeight taken back off the diagonal): outputs against the float64 formula
reference and torch, on every chip; the
enlarge factor against values worked by hand from that formula; and the cost it saves.
"""
from __future__ import annotations

import numpy as np
import pytest

import simulator
from test_convolution import CHIPS, _dtypes, assert_close, reference, torch_output
from conv_reference import conv_backward
from test_convolution_backward import SOC, assert_close as assert_close_backward, compute_dtype

N_CASES = 40


def draw(seed: int) -> dict:
    rng = np.random.default_rng([seed, 29])
    soc = list(CHIPS)[seed % len(CHIPS)]
    series = CHIPS[soc]
    groups = int(rng.choice([8, 16, 32, 48, 64]))
    cig = int(rng.choice([1, 1, 1, 2, 3]))
    cog = cig * int(rng.choice([1, 1, 2]))          # a depthwise multiplier
    transposed = bool(rng.random() < 0.25)
    k = int(rng.integers(1, 6))
    s, d = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    p = int(rng.integers(0, 3))
    sp = int(rng.integers(max(1, (k - 1) * d + 1 - 2 * p), 10))
    dtype, bias_dtype, cm = _dtypes(rng, series)
    cin, cout = cig * groups, cog * groups
    c = dict(seed=seed, soc=soc, series=series, nd=2, transposed=transposed, groups=groups,
             xs=(int(rng.integers(1, 3)), cin, sp, sp), ws=((cin, cog) if transposed else (cout, cig)) + (k, k),
             cout=cout, stride=(s, s), dilation=(d, d), padding=(p, p), opad=(0, 0), dtype=dtype, cm=cm,
             bias_dtype=bias_dtype if rng.random() < 0.5 else None)
    return c


CASES = [draw(i) for i in range(N_CASES)]


def _id(c) -> str:
    return f"seed{c['seed']}-{c['soc']}-g{c['groups']}-w{'x'.join(map(str, c['ws']))}{'-T' if c['transposed'] else ''}"


def _data(c):
    rng = np.random.default_rng(40_000 + c["seed"])
    x = rng.standard_normal(c["xs"]).astype(c["dtype"])
    w = rng.standard_normal(c["ws"]).astype(c["dtype"])
    bias = rng.standard_normal(c["cout"]).astype(c["bias_dtype"]) if c["bias_dtype"] is not None else None
    return x, w, bias


def _run(c, x, w, bias):
    return simulator.run("Convolution", soc=c["soc"], input=x, weight=w, bias=bias, stride=list(c["stride"]),
                         padding=list(c["padding"]), dilation=list(c["dilation"]), transposed=c["transposed"],
                         outputPadding=[0, 0], groups=c["groups"], cubeMathType=c["cm"])


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_many_groups_match_the_formula_and_torch(c):
    x, w, bias = _data(c)
    res = _run(c, x, w, bias)
    out = res.outputs["output"]
    ref, mag, bias_mag = reference(c, x, w, bias)
    assert out.shape == ref.shape
    comp = compute_dtype(c["series"], (x.dtype, w.dtype), c["cm"])
    assert_close(out, ref, mag, bias_mag, comp, f"{_id(c)} vs formula")
    try:
        import torch
    except ImportError:
        return
    assert_close(out, torch_output(torch, c, x, w, bias), mag, bias_mag, comp, f"{_id(c)} vs torch")


# (input, weight, groups, dtype) -> (enlarge, Cube groups), worked by hand from util_conv2d's formula;
# the first is the one the TBE source comments on (1152 channels, 5x5 depthwise: 72 groups of 16)
ENLARGE = [
    ((1, 1152, 7, 7), (1152, 1, 5, 5), 1152, np.float16, 16, 72),
    ((1, 32, 8, 8), (32, 1, 3, 3), 32, np.float16, 16, 2),
    ((1, 32, 8, 8), (32, 2, 3, 3), 16, np.float16, 8, 2),        # lcm(2, 16) / 2 = 8
    ((1, 144, 8, 8), (144, 3, 3, 3), 48, np.float16, 16, 3),     # lcm(3, 16) / 3 = 16
    ((1, 12, 8, 8), (12, 1, 3, 3), 12, np.float16, 12, 1),       # capped by the groups
    ((1, 32, 8, 8), (32, 1, 3, 3), 32, np.float32, 16, 2),       # C0 8: lcm(8, 16) = 16
    ((1, 24, 8, 8), (24, 1, 3, 3), 24, np.float16, None, 24),    # 16 does not divide 24: not enlarged
    ((1, 64, 8, 8), (64, 32, 3, 3), 2, np.float16, None, 2),     # 32 channels a group: already whole planes
]


@pytest.mark.parametrize("xs,ws,groups,dtype,enlarge,cube_groups", ENLARGE)
def test_enlarge_factor_is_canns(xs, ws, groups, dtype, enlarge, cube_groups):
    from simulator import TensorLayout
    res = simulator.run("Convolution", soc="Ascend910B1", mode="timing", input=TensorLayout(xs, dtype),
                        weight=TensorLayout(ws, dtype), bias=None, stride=[1, 1], padding=[1, 1], dilation=[1, 1],
                        transposed=False, outputPadding=[0, 0], groups=groups, cubeMathType=1 if dtype == np.float32 else 0)
    tiling = res.report.tiling
    assert tiling["groups"] == groups
    assert tiling.get("groupEnlarge") == enlarge
    assert tiling.get("cubeGroups", groups) == cube_groups
    names = [launch["name"] for launch in res.report.launches]
    assert ("TransData(weight -> groups enlarged)" in names) == (enlarge is not None)


def test_enlarged_depthwise_costs_about_a_dense_conv_of_its_cube_groups():
    """Enlarged, the 1152-channel depthwise layer is 72 Cube groups of 16 channels: its Cube launch
    costs what a 72-group convolution of 16 x 16 dense weights costs (the same MMADs), not 1152
    groups' worth, on the inference chip."""
    from simulator import TensorLayout

    def cube_cycles(ws, groups):
        res = simulator.run("Convolution", soc="Ascend310P3", mode="timing", input=TensorLayout((1, 1152, 7, 7), np.float16),
                            weight=TensorLayout(ws, np.float16), bias=None, stride=[1, 1], padding=[2, 2],
                            dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=groups, cubeMathType=0)
        return next(launch["cycles"] for launch in res.report.launches if launch["name"].startswith("Cube"))
    assert cube_cycles((1152, 1, 5, 5), 1152) == pytest.approx(cube_cycles((1152, 16, 5, 5), 72), rel=1e-9)


@pytest.mark.parametrize("c", CASES[:24], ids=[_id(c) for c in CASES[:24]])
def test_many_groups_backward_matches_the_formula_and_torch(c):
    """The same calls' backward, every outputMask with a Cube gradient, against the float64
    formula (conv_reference.conv_backward) and torch autograd in float64."""
    rng = np.random.default_rng(60_000 + c["seed"])
    x, w, _ = _data(c)
    out = reference(c, x, w, None)[0].shape
    dy = rng.standard_normal(out).astype(c["dtype"])
    mask = [(True, True, True), (True, False, False), (False, True, False), (True, True, False)][c["seed"] % 4]
    res = simulator.run("ConvolutionBackward", soc=SOC[c["series"]], gradOutput=dy, input=x, weight=w,
                        biasSizes=[c["cout"]], stride=list(c["stride"]), padding=list(c["padding"]),
                        dilation=list(c["dilation"]), transposed=c["transposed"], outputPadding=[0, 0],
                        groups=c["groups"], outputMask=list(mask), cubeMathType=c["cm"])
    args = (c["stride"], c["padding"], c["dilation"], c["groups"], c["transposed"], [0, 0], mask)
    ref = conv_backward(dy, x, w, *args)
    absref = conv_backward(np.abs(dy.astype(np.float64)), np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)),
                           *args)
    comp = compute_dtype(c["series"], (dy.dtype, x.dtype, w.dtype), c["cm"])
    for i, name in enumerate(("gradInput", "gradWeight", "gradBias")):
        if mask[i]:
            assert_close_backward(res.outputs[name], ref[i], absref[i], comp if i < 2 else "FLOAT", f"{_id(c)} {name}")
    try:
        import torch
    except ImportError:
        return
    t = [torch.from_numpy(a.astype(np.float64)).requires_grad_() for a in (x, w)]
    fn = torch.nn.functional.conv_transpose2d if c["transposed"] else torch.nn.functional.conv2d
    y = fn(t[0], t[1], None, list(c["stride"]), list(c["padding"]), dilation=list(c["dilation"]), groups=c["groups"])
    y.backward(torch.from_numpy(dy.astype(np.float64)))
    for i, name in enumerate(("gradInput", "gradWeight")):
        if mask[i]:
            assert_close_backward(res.outputs[name], t[i].grad.numpy(), absref[i], comp, f"{_id(c)} {name} vs torch")
