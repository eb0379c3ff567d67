"""Every ConvolutionBackward call a chip accepts runs: none ends in an inner tiling error (561002),
an inner error (561000) or a kernel fault. Calls are drawn at random over the whole space the
operator's checks accept, at model sizes (channels to 1024, kernels to 7, strides, dilations,
groups, 4-entry and per-dim padding, transposed, every outputMask, every dtype the series takes, a
fifth of them with rows of 2,000 to 40,000 positions, a tenth with weights of a few elements) on
every chip; each is planned (phase 1)
and each of its launches has its first and last blocks recorded with every capacity, alignment and
bound check the kernel language makes (simulator.estimate), which is where a tile or a row larger
than a buffer would show.
`CONV_VALID_CASES=N` draws more."""
from __future__ import annotations

import itertools
import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from simulator import AclnnError, KernelError, TensorLayout
from simulator.profile import list_socs, load_profile

N_CASES = int(os.environ.get("CONV_VALID_CASES", "60"))
DTYPES = {"FLOAT": np.float32, "FLOAT16": np.float16, "BF16": ml_dtypes.bfloat16}
SOCS = list_socs()


def draw_call(seed: int):
    """(soc, call kwargs) of a call whose every size the operator's checks accept, or None when
    this seed's draw is not a convolution at all (an empty output)."""
    rng = np.random.default_rng([seed, 49])
    soc = SOCS[seed % len(SOCS)]
    support = load_profile(soc).supports("ConvolutionBackward")
    nd = int(rng.choice([r - 2 for r in support.ranks]))
    transposed = bool(rng.random() < 0.25)
    groups = int(rng.choice([1, 1, 1, 2, 4, 8]))
    depthwise = rng.random() < 0.1
    cin = int(rng.choice([1, 3, 16, 31, 64, 128, 257, 512, 1024]))
    cout = int(rng.choice([1, 16, 33, 64, 127, 256, 640, 1024]))
    if depthwise:
        groups = cin = cout = int(rng.choice([16, 32, 64]))
    # a tenth of the draws take a weight of a few elements (1x1 kernels, 1-7 channels): its rows
    # and its gradWeight are shorter than a 32-B block (their own generator: the other draws stay)
    tiny = np.random.default_rng([seed, 7]).random() < 0.1
    if tiny and not depthwise:
        cin, cout = (int(v) for v in np.random.default_rng([seed, 8]).choice([1, 2, 3, 5, 7], 2))
        groups = 1
    cin, cout = max(cin // groups, 1) * groups, max(cout // groups, 1) * groups
    k = tuple(int(rng.integers(1, 8)) for _ in range(nd))
    s = tuple(int(rng.integers(1, 4)) for _ in range(nd))
    d = tuple(int(rng.integers(1, 3)) for _ in range(nd))
    p = tuple(int(rng.integers(0, kk)) for kk in k)
    if tiny and not depthwise:
        k, p = (1,) * nd, (0,) * nd
    # small spatial sizes keep the drawn calls quick while every buffer still sees model-size rows
    sp = tuple(int(rng.integers(max((kk - 1) * dd + 1 - 2 * pp, 1), max((kk - 1) * dd + 1 - 2 * pp, 1) + 9))
               for kk, dd, pp in zip(k, d, p))
    if nd == 3:
        sp = tuple(min(v, 12) for v in sp)
    if rng.random() < 0.2:      # a row longer than L1 or UB takes whole: W windows
        sp = sp[:-1] + (int(rng.integers(2000, 40000 if nd == 1 else 12000)),)
    op = tuple(0 for _ in range(nd))
    if transposed:
        op = tuple(int(rng.integers(0, max(ss, dd))) if nd == 3 else int(rng.integers(0, ss))
                   for ss, dd in zip(s, d))
        out_sp = tuple((x - 1) * ss - 2 * pp + dd * (kk - 1) + oo + 1 for x, ss, pp, dd, kk, oo in zip(sp, s, p, d, k, op))
        w_shape = (cin, cout // groups) + k
        gout, inp = (2, cout) + out_sp, (2, cin) + sp
    else:
        out_sp = tuple((x + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for x, kk, ss, pp, dd in zip(sp, k, s, p, d))
        w_shape = (cout, cin // groups) + k
        gout, inp = (2, cout) + out_sp, (2, cin) + sp
    if min(out_sp) < 1:
        return None
    dtype = str(rng.choice(list(support.dtypes)))
    mask = [bool(b) for b in rng.integers(0, 2, 3)]
    if not any(mask):
        mask[1] = True
    cube_math = 1 if dtype == "FLOAT" and soc not in ("Ascend910A", "Ascend310P3") else 0
    if dtype == "FLOAT" and soc in ("Ascend910A", "Ascend310P3"):
        cube_math = 1             # (those series compute FLOAT in FP16: cubeMathType 0 is refused)
    dt = DTYPES[dtype]
    return soc, dict(gradOutput=TensorLayout(gout, dt), input=TensorLayout(inp, dt), weight=TensorLayout(w_shape, dt),
                     biasSizes=[cout], stride=list(s), padding=list(p), dilation=list(d), transposed=transposed,
                     outputPadding=list(op), groups=groups, outputMask=mask, cubeMathType=cube_math)


@pytest.mark.parametrize("seed", range(N_CASES))
def test_a_valid_call_plans_and_records(seed):
    drawn = draw_call(seed)
    if drawn is None:
        pytest.skip("the draw has an empty output")
    soc, kw = drawn
    try:
        simulator.estimate("ConvolutionBackward", soc, **kw)
    except AclnnError as e:
        # the operator's own checks may refuse a drawn call (161002: a limit of the chip's series):
        # that is the documented contract, not an inner error
        assert e.status not in (561000, 561002, 561103), f"{soc}: {e}"
        assert e.status == 161002, f"{soc}: {e}"
    except KernelError as e:
        pytest.fail(f"{soc}: a kernel fault while recording: {e}")


@pytest.mark.parametrize("seed", range(N_CASES))
def test_the_forward_of_a_valid_call_plans_and_records(seed):
    """aclnnConvolution shares the Cube kernels, tilings and layout passes: the same draws, as the
    forward of the same convolution, meet no inner error either."""
    drawn = draw_call(seed)
    if drawn is None:
        pytest.skip("the draw has an empty output")
    soc, kw = drawn
    try:
        simulator.estimate("Convolution", soc, input=kw["input"], weight=kw["weight"], bias=None,
                           stride=kw["stride"], padding=kw["padding"], dilation=kw["dilation"],
                           transposed=kw["transposed"], outputPadding=kw["outputPadding"], groups=kw["groups"],
                           cubeMathType=kw["cubeMathType"])
    except AclnnError as e:
        assert e.status == 161002, f"{soc}: {e}"
    except KernelError as e:
        pytest.fail(f"{soc}: a kernel fault while recording: {e}")


def test_the_call_the_issue_found_refused_runs():
    """x 2x128x8x64x64, weight 256x128x5x5x5, pad 2, BF16, gradWeight only: its gradWeight rows
    (128 channels x 125 taps in FP32) are longer than half the UB; they are cut into C1 chunks."""
    bf = ml_dtypes.bfloat16
    est = simulator.estimate("ConvolutionBackward", "Ascend910B2", gradOutput=TensorLayout([2, 256, 8, 64, 64], bf),
                             input=TensorLayout([2, 128, 8, 64, 64], bf), weight=TensorLayout([256, 128, 5, 5, 5], bf),
                             biasSizes=[256], stride=[1, 1, 1], padding=[2, 2, 2], dilation=[1, 1, 1],
                             transposed=False, outputPadding=[0, 0, 0], groups=1, outputMask=[False, True, False],
                             cubeMathType=0)
    assert est.instructions > 0


@pytest.mark.parametrize("soc", SOCS)
@pytest.mark.parametrize("spatial, kernel", [((256, 256), (1, 1)), ((258, 300), (3, 3)), ((2, 258, 258), (1, 3, 3))])
def test_maps_of_65536_positions_or_more_run(soc, spatial, kernel):
    """A map of D x H x W >= 65,536 positions: the gradWeight's ND -> NZ rows (32-bit dtypes) lie
    that many elements apart, past Nd2NzParams' 16-bit srcDValue; they are copied a row at a time."""
    support = load_profile(soc).supports("ConvolutionBackward")
    if len(spatial) + 2 not in support.ranks:
        pytest.skip(f"{soc} takes no {len(spatial)}D convolution")
    for dtype in support.dtypes:
        dt = DTYPES[dtype]
        cube_math = 1 if dtype == "FLOAT" else 0
        out = tuple(x - k + 1 for x, k in zip(spatial, kernel))
        est = simulator.estimate("ConvolutionBackward", soc, gradOutput=TensorLayout((1, 16) + out, dt),
                                 input=TensorLayout((1, 8) + spatial, dt), weight=TensorLayout((16, 8) + kernel, dt),
                                 biasSizes=[16], stride=[1] * len(spatial), padding=[0] * len(spatial),
                                 dilation=[1] * len(spatial), transposed=False, outputPadding=[0] * len(spatial),
                                 groups=1, outputMask=[True, True, True], cubeMathType=cube_math)
        assert est.instructions > 0


def test_a_gradweight_over_65536_positions_matches_the_formula():
    """The row-at-a-time copies carry the right rows: FP32 gradWeight of a 256 x 256 map (1x1
    kernel: a sum over positions) against float64. Entries of -1, 0 and 1 are exact in HF32 and
    their sums exact in FP32, so any element out of place shows."""
    rng = np.random.default_rng(65536)
    x = rng.integers(-1, 2, (1, 4, 256, 256)).astype(np.float32)
    dy = rng.integers(-1, 2, (1, 8, 256, 256)).astype(np.float32)
    r = simulator.run("ConvolutionBackward", "Ascend910B2", gradOutput=dy, input=x, weight=np.zeros((8, 4, 1, 1), np.float32),
                      biasSizes=None, stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False,
                      outputPadding=[0, 0], groups=1, outputMask=[False, True, False], cubeMathType=1)
    ref = np.einsum("nohw,nihw->oi", dy.astype(np.float64), x.astype(np.float64))[:, :, None, None]
    np.testing.assert_array_equal(r.outputs["gradWeight"].astype(np.float64), ref)


def _long_row_calls(support):
    """(gradOutput, input, weight, stride, padding, dilation) with rows longer than whole rows in
    L1 or UB take: a 1D signal as speech models feed it (16,000 and 100,000 samples), a 2D map
    20,000 wide, a 3D map 12,000 wide."""
    calls = []
    if 3 in support.ranks:
        calls += [((2, 32, 15998), (2, 32, 16000), (32, 32, 3), [1], [0], [1]),
                  ((1, 16, 50000), (1, 16, 100000), (16, 16, 4), [2], [1], [1]),
                  ((2, 512, 3199), (2, 1, 16000), (512, 1, 10), [5], [0], [1])]
    if 4 in support.ranks:
        calls.append(((1, 64, 4, 20000), (1, 64, 4, 20000), (64, 64, 3, 3), [1, 1], [1, 1], [1, 1]))
    if 5 in support.ranks:
        calls.append(((1, 16, 2, 2, 12000), (1, 16, 2, 2, 12000), (16, 16, 3, 3, 3), [1] * 3, [1] * 3, [1] * 3))
    return calls


@pytest.mark.parametrize("soc", SOCS)
def test_rows_longer_than_a_buffer_run(soc):
    """Rows too long for L1 (the Cube's stages) or UB (gradInput's layout pass) are cut into W
    windows: every such call plans and records, every gradient, every dtype."""
    support = load_profile(soc).supports("ConvolutionBackward")
    for gout, inp, w, s, p, d in _long_row_calls(support):
        for dtype in support.dtypes:
            dt = DTYPES[dtype]
            est = simulator.estimate("ConvolutionBackward", soc, gradOutput=TensorLayout(gout, dt),
                                     input=TensorLayout(inp, dt), weight=TensorLayout(w, dt), biasSizes=[w[0]],
                                     stride=s, padding=p, dilation=d, transposed=False, outputPadding=[0] * len(s),
                                     groups=1, outputMask=[True, True, True], cubeMathType=int(dtype == "FLOAT"))
            assert est.instructions > 0


@pytest.mark.parametrize("soc", SOCS)
def test_windowed_gradients_match_the_formula(soc):
    """The W windows carry the right columns: gradInput and gradWeight of long 1D signals (and a
    wide 2D map where the chip takes 2D) against the float64 formula. Entries of -1, 0 and 1 sum
    exactly in FP32; a 16-bit output then rounds once (relative error <= 2^-11)."""
    from conv_reference import conv_backward
    support = load_profile(soc).supports("ConvolutionBackward")
    rng = np.random.default_rng([49, len(soc)])
    cases = []
    if 3 in support.ranks:     # (x shape, weight shape, stride, padding, dilation)
        cases += [((2, 16, 6000), (32, 16, 5), [2], [2], [2]), ((1, 24, 9000), (16, 24, 3), [1], [1], [1]),
                  ((1, 16, 5000), (16, 16, 4), [3], [1], [1])]
    if 4 in support.ranks:
        cases.append(((1, 16, 3, 7000), (16, 16, 2, 3), [1, 2], [0, 1], [1, 1]))
    for dtype in support.dtypes:
        dt = DTYPES[dtype]
        for xs, ws, s, p, d in cases:
            out = [(x + 2 * pp - dd * (k - 1) - 1) // ss + 1 for x, k, ss, pp, dd in zip(xs[2:], ws[2:], s, p, d)]
            x = rng.integers(-1, 2, xs).astype(dt)
            w = rng.integers(-1, 2, ws).astype(dt)
            dy = rng.integers(-1, 2, (xs[0], ws[0], *out)).astype(dt)
            r = simulator.run("ConvolutionBackward", soc, gradOutput=dy, input=x, weight=w, biasSizes=None, stride=s,
                              padding=p, dilation=d, transposed=False, outputPadding=[0] * len(s), groups=1,
                              outputMask=[True, True, False], cubeMathType=int(dtype == "FLOAT"))
            rdx, rdw, _ = conv_backward(dy, x, w, s, p, d, mask=(True, True, False))
            for name, ref in (("gradInput", rdx), ("gradWeight", rdw)):
                got = r.outputs[name].astype(np.float64)
                np.testing.assert_allclose(got, ref, rtol=2.0 ** -11, atol=0, err_msg=f"{soc} {dtype} {xs} {name}")


@pytest.mark.parametrize("soc, mask, lengths", [
    ("Ascend910B1", [False, True, False], (1000, 1200, 1300, 1400, 1600)),
    ("Ascend310P3", [False, True, False], (1000, 1200, 1300, 1400, 1600)),
    ("Ascend910B1", [True, False, False], (2000, 3000, 5000)),
])
def test_a_longer_row_does_not_cost_less(soc, mask, lengths):
    """gradWeight (or gradInput) of a 1D convolution (256 -> 256, kernel 3) over longer and longer
    rows: the work grows with the row, so the time may not fall as it grows. W windows used to be
    tried only when no whole row fit L1: the rows that just fit took small tiles (gradWeight 16 x
    48 at L = 1,300) and up to twice the time of the rows just too long for them."""
    times = []
    for L in lengths:
        kw = dict(gradOutput=TensorLayout((8, 256, L - 2), np.float16), input=TensorLayout((8, 256, L), np.float16),
                  weight=TensorLayout((256, 256, 3), np.float16), biasSizes=[256], stride=[1], padding=[0],
                  dilation=[1], transposed=False, outputPadding=[0], groups=1, outputMask=mask, cubeMathType=0)
        times.append(simulator.run("ConvolutionBackward", soc, mode="timing", **kw).cycles)
    assert all(a <= 1.1 * b for a, b in zip(times, times[1:])), times


def draw_large_dilation_call(seed: int):
    """(soc, call kwargs) of a call with dilations of 16 to 255 (DeepLab's atrous rates and past):
    gradInput's img2col then needs load3d padding (K - 1) x d - pad past its 255, and the map rows a
    stage of the whole kernel reads, (K - 1) x d + 1, outgrow L1. Groups and transposed calls too;
    sizes are the smallest the windows allow, plus a little."""
    rng = np.random.default_rng([seed, 4936])
    soc = SOCS[seed % len(SOCS)]
    support = load_profile(soc).supports("ConvolutionBackward")
    nd = int(rng.choice([r - 2 for r in support.ranks]))
    k = tuple(int(rng.integers(2, 6)) for _ in range(nd))
    d = tuple(int(rng.integers(16, 256)) if rng.random() < 0.7 or i == nd - 1 else int(rng.integers(1, 4))
              for i in range(nd))
    if nd == 3:                 # (depth taps are stages of their own: large H and W dilations are the case)
        d = (int(rng.integers(1, 4)),) + d[1:]
    s = tuple(int(rng.integers(1, 4)) for _ in range(nd))
    p = tuple(int(rng.integers(0, min(255, (kk - 1) * dd) + 1)) for kk, dd in zip(k, d))
    transposed = bool(rng.random() < 0.25)
    groups = int(rng.choice([1, 1, 2, 4]))
    cin, cout = int(rng.choice([1, 16, 64, 256])) * groups, int(rng.choice([16, 64, 256]))
    if transposed:
        sp = tuple(int(rng.integers(1, 7)) for _ in range(nd))
        p = tuple(min(pp, ((x - 1) * ss + dd * (kk - 1)) // 2) for pp, x, ss, dd, kk in zip(p, sp, s, d, k))
        out_sp = tuple((x - 1) * ss - 2 * pp + dd * (kk - 1) + 1 for x, kk, ss, pp, dd in zip(sp, k, s, p, d))
        w_shape = (cin, cout // groups) + k
    else:
        sp = tuple(max((kk - 1) * dd + 1 - 2 * pp, 1) + int(rng.integers(0, 6)) for kk, dd, pp in zip(k, d, p))
        out_sp = tuple((x + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for x, kk, ss, pp, dd in zip(sp, k, s, p, d))
        w_shape = (cout, cin // groups) + k
    dtype = str(rng.choice(list(support.dtypes)))
    mask = [bool(b) for b in rng.integers(0, 2, 3)]
    mask[int(rng.integers(0, 2))] = True
    dt = DTYPES[dtype]
    return soc, dict(gradOutput=TensorLayout((1, cout) + out_sp, dt), input=TensorLayout((1, cin) + sp, dt),
                     weight=TensorLayout(w_shape, dt), biasSizes=[cout], stride=list(s), padding=list(p),
                     dilation=list(d), transposed=transposed, outputPadding=[0] * nd, groups=groups,
                     outputMask=mask, cubeMathType=int(dtype == "FLOAT" or soc in ("Ascend910A", "Ascend310P3")))


@pytest.mark.parametrize("seed", range(N_CASES // 3))
def test_a_large_dilation_plans_and_records(seed):
    """Dilations the operator accepts (to 255 on A2) run: gradInput's padding past load3d's 255 is
    zeros the stage holds in L1, and a kernel whose rows' window outgrows L1 is staged a group of
    kernel rows at a time (both GEMMs). These were refused with 561002."""
    soc, kw = draw_large_dilation_call(seed)
    forward = dict(input=kw["input"], weight=kw["weight"], bias=None, stride=kw["stride"], padding=kw["padding"],
                   dilation=kw["dilation"], transposed=kw["transposed"], outputPadding=kw["outputPadding"],
                   groups=kw["groups"], cubeMathType=kw["cubeMathType"])
    for op, call in (("ConvolutionBackward", kw), ("Convolution", forward)):
        try:
            simulator.estimate(op, soc, **call)
        except AclnnError as e:
            assert e.status == 161002, f"{soc} {op}: {e}"
        except KernelError as e:
            pytest.fail(f"{soc} {op}: a kernel fault while recording: {e}")


@pytest.mark.parametrize("soc", SOCS)
def test_deeplab_atrous_branch_runs(soc):
    """DeepLabV3's ASPP branch at output stride 8 (torchvision's default: 2048 -> 256 channels, 3 x 3,
    rate 36, on a 65 x 65 map): a stage of the whole kernel reads 73 map rows, past a 910B's L1;
    gradWeight is staged a group of kernel rows at a time."""
    support = load_profile(soc).supports("ConvolutionBackward")
    dt = DTYPES["BF16" if "BF16" in support.dtypes else "FLOAT16"]
    kw = dict(gradOutput=TensorLayout((8, 256, 65, 65), dt), input=TensorLayout((8, 2048, 65, 65), dt),
              weight=TensorLayout((256, 2048, 3, 3), dt), biasSizes=[256], stride=[1, 1], padding=[36, 36],
              dilation=[36, 36], transposed=False, outputPadding=[0, 0], groups=1, outputMask=[True, True, False],
              cubeMathType=0)
    plan = simulator.plan("ConvolutionBackward", soc, **kw)
    rows = plan.tiling["gradWeight"].get("kernelRowsPerStage", 3)
    assert rows in (1, 2, 3)
    if soc.startswith("Ascend910B"):          # 512 KB of L1: 73 rows of 65 x 16 channels do not fit twice
        assert rows < 3
    assert simulator.estimate("ConvolutionBackward", soc, **kw).instructions > 0


def _large_dilation_cases(support):
    """(x shape, weight shape, stride, padding, dilation): gradInput padding past 255 (1D, 2D, and
    below a 3D map), kernel rows staged in groups (2D), both at once."""
    cases = []
    if 3 in support.ranks:
        cases += [((2, 16, 270), (16, 16, 3), [1], [0], [128]), ((1, 16, 520), (16, 16, 3), [2], [3], [255])]
    if 4 in support.ranks:
        cases += [((1, 32, 300, 20), (16, 32, 3, 2), [1, 2], [0, 1], [128, 3]),
                  ((1, 16, 300, 300), (16, 16, 3, 3), [1, 1], [2, 2], [128, 140]),
                  ((1, 16, 257, 257), (16, 16, 3, 3), [1, 1], [48, 48], [48, 48]),
                  ((1, 24, 40, 520), (16, 24, 2, 3), [1, 3], [1, 0], [20, 255])]
    if 5 in support.ranks:      # stride H 2: the last grid rows pad 256 below a 3D map (255 above)
        cases.append(((1, 16, 2, 261, 3), (16, 16, 1, 4, 1), [1, 2, 1], [0, 251, 0], [1, 254, 1]))
    return cases


@pytest.mark.parametrize("soc", SOCS)
def test_large_dilation_gradients_match_the_formula(soc):
    """The zero margins and the tap groups carry the right rows and columns: gradInput, gradWeight
    and the forward (aclnnConvolution, planned as gradInput of its adjoint) against the float64
    formula, exact (entries -1, 0, 1 sum exactly and stay under 2,048); timing mode gives the
    functional cycles."""
    from conv_reference import conv_backward, conv_forward
    support = load_profile(soc).supports("ConvolutionBackward")
    rng = np.random.default_rng([4937, len(soc)])
    dtype = "FLOAT16" if "FLOAT16" in support.dtypes else sorted(support.dtypes)[0]
    dt = DTYPES[dtype]
    for xs, ws, s, p, d in _large_dilation_cases(support):
        out = [(x + 2 * pp - dd * (k - 1) - 1) // ss + 1 for x, k, ss, pp, dd in zip(xs[2:], ws[2:], s, p, d)]
        x = rng.integers(-1, 2, xs).astype(dt)
        w = rng.integers(-1, 2, ws).astype(dt)
        dy = rng.integers(-1, 2, (xs[0], ws[0], *out)).astype(dt)
        kw = dict(gradOutput=dy, input=x, weight=w, biasSizes=None, stride=s, padding=p, dilation=d,
                  transposed=False, outputPadding=[0] * len(s), groups=1, outputMask=[True, True, False],
                  cubeMathType=int(dtype == "FLOAT"))
        r = simulator.run("ConvolutionBackward", soc, **kw)
        rdx, rdw, _ = conv_backward(dy, x, w, s, p, d, mask=(True, True, False))
        for name, ref in (("gradInput", rdx), ("gradWeight", rdw)):
            np.testing.assert_array_equal(r.outputs[name].astype(np.float64), ref, err_msg=f"{soc} {xs} {d} {name}")
        assert simulator.run("ConvolutionBackward", soc, mode="timing", **kw).cycles == r.cycles
        y = simulator.run("Convolution", soc, input=x, weight=w, bias=None, stride=s, padding=p, dilation=d,
                          transposed=False, outputPadding=[0] * len(s), groups=1, cubeMathType=int(dtype == "FLOAT"))
        np.testing.assert_array_equal(y.outputs["output"].astype(np.float64), conv_forward(x, w, s, p, d),
                                      err_msg=f"{soc} {xs} {d} forward")


@pytest.mark.parametrize("soc, mask", [("Ascend910B1", [False, True, False]), ("Ascend910A", [True, True, False])])
def test_a_larger_dilation_does_not_cost_much_less(soc, mask):
    """An atrous convolution (512 -> 128, 3 x 3, on a 65 x 65 map, batch 2) at rates 12 to 36: the
    work is the same and the windows grow, so a larger rate may cost less only by the margin the
    planner leaves (tap groups replace a whole kernel that fits when estimated 1.25x faster). With
    every kernel row in a stage, gradWeight on 910B1 cost 1.59 M cycles at rate 30 against 0.17 M at
    rate 36: its stages copied 61 map rows each for two grid rows."""
    times = []
    for rate in (12, 18, 24, 30, 36):
        kw = dict(gradOutput=TensorLayout((2, 128, 65, 65), np.float16),
                  input=TensorLayout((2, 512, 65, 65), np.float16),
                  weight=TensorLayout((128, 512, 3, 3), np.float16), biasSizes=[128], stride=[1, 1],
                  padding=[rate, rate], dilation=[rate, rate], transposed=False, outputPadding=[0, 0], groups=1,
                  outputMask=mask, cubeMathType=0)
        times.append(simulator.run("ConvolutionBackward", soc, mode="timing", **kw).cycles)
    assert all(a <= 1.25 * b for i, a in enumerate(times) for b in times[i + 1:]), times


def _large_kernel_calls(support):
    """(input, weight, groups, padding) of kernels whose taps overflow a UB slot of the weight
    packing or of the gradWeight layout pass: RepLKNet's 31 x 31 depthwise, SLaK-size 51 x 51, a
    1D kernel of 255 taps, a 3D 11 x 11 x 11."""
    calls = []
    if 3 in support.ranks:
        calls.append(((1, 32, 300), (32, 32, 255), 1, [127]))
    if 4 in support.ranks:
        calls += [((1, 64, 36, 36), (64, 1, 31, 31), 64, [15, 15]), ((1, 16, 54, 53), (16, 16, 51, 51), 1, [25, 25])]
    if 5 in support.ranks:
        calls.append(((1, 32, 12, 12, 12), (32, 32, 11, 11, 11), 1, [5, 5, 5]))
    return calls


@pytest.mark.parametrize("soc", SOCS)
def test_large_kernels_run(soc):
    """Kernels of hundreds to thousands of taps: one input channel's taps are packed a run at a
    time, and gradWeight's rows of one C1 plane laid out a run of taps at a time, every dtype,
    transposed or not."""
    support = load_profile(soc).supports("ConvolutionBackward")
    for inp, w, groups, pad in _large_kernel_calls(support):
        nd = len(inp) - 2
        for dtype, transposed in itertools.product(support.dtypes, (False, True)):
            dt = DTYPES[dtype]
            cout = w[1] * groups if transposed else w[0]
            out = tuple(x + 2 * p - k + 1 for x, p, k in zip(inp[2:], pad, w[2:]))
            if transposed:
                out = tuple(x - 2 * p + k - 1 for x, p, k in zip(inp[2:], pad, w[2:]))
            est = simulator.estimate("ConvolutionBackward", soc, gradOutput=TensorLayout((1, cout) + out, dt),
                                     input=TensorLayout(inp, dt), weight=TensorLayout(w, dt), biasSizes=[cout],
                                     stride=[1] * nd, padding=pad, dilation=[1] * nd, transposed=transposed,
                                     outputPadding=[0] * nd, groups=groups, outputMask=[True, True, True],
                                     cubeMathType=1 if dtype == "FLOAT" else 0)
            assert est.instructions > 0
