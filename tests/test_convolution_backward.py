"""aclnnConvolutionBackward / aclnnConvTbcBackward numerics against the float64 references of
tests/conv_reference.py (the gradient formulas, no torch), and timing-only == functional cycles.

Tolerance (per element, stated in docs/CONVOLUTION.md): with A = the same gradient computed from
|gradOutput|, |input|, |weight| (the sum of the magnitudes of every product in it),

    |out - ref| <= (2 u_c + 1e-5) * A + u_o * |ref| + s_o / 2

where u_c is the unit roundoff of the Cube's compute dtype (FP16 2^-11, BF16 2^-8, HF32 2^-12,
FP32 2^-24: each product's two rounded inputs), 1e-5 covers FP32 accumulation in L0C / the
workspace over the reduction lengths used here, and u_o is the output dtype's unit roundoff (the
final cast), s_o its smallest subnormal (the final cast of a value below the normal range is off
by up to half of it: FP16 2^-25). Inputs are generated in their own dtype, so the reference sees
the same values.
"""
from __future__ import annotations

import itertools
import zlib

import ml_dtypes
import numpy as np
import pytest

import simulator
from simulator.enums import AclnnError
from conv_reference import conv_backward, conv_out_size, conv_tbc_backward, norm_padding

BF16 = np.dtype(ml_dtypes.bfloat16)
UNIT = {"FLOAT16": 2.0 ** -11, "BF16": 2.0 ** -8, "HF32": 2.0 ** -12, "FLOAT": 2.0 ** -24}
NP_UNIT = {np.dtype(np.float16): 2.0 ** -11, BF16: 2.0 ** -8, np.dtype(np.float32): 2.0 ** -24}


def compute_dtype(series: str, dtypes, cm: int) -> str:
    """SPEC section 3, restated independently of ops/ (the test's own oracle)."""
    names = {np.dtype(np.float32): "FLOAT", np.dtype(np.float16): "FLOAT16", BF16: "BF16"}
    s = {names[np.dtype(d)] for d in dtypes}
    promoted = s.pop() if len(s) == 1 else "FLOAT"
    if series != "A2":
        return "FLOAT16"
    if promoted == "FLOAT":
        return {0: "FLOAT", 1: "HF32", 2: "FLOAT16", 3: "HF32"}[cm]
    return "FLOAT16" if cm == 2 else promoted


def _rand(rng, shape, dtype, noncontig=False):
    a = rng.standard_normal(shape).astype(dtype)
    if noncontig and a.ndim >= 3:
        # the same values in a transposed buffer: a non-contiguous view with the logical shape
        buf = np.ascontiguousarray(np.swapaxes(a, -1, -2))
        a = np.swapaxes(buf, -1, -2)
        assert a.shape[-2] == 1 or a.shape[-1] == 1 or not a.flags.c_contiguous
    return a


def assert_close(out, ref, absref, comp: str, name: str):
    out64 = np.asarray(out).astype(np.float64)
    # the last term: rounding to the output dtype below its normal range is off by up to half
    # the subnormal spacing (FP16: 2^-25), however small the value
    tol = ((2 * UNIT[comp] + 1e-5) * absref + NP_UNIT[np.dtype(out.dtype)] * np.abs(ref)
           + float(ml_dtypes.finfo(out.dtype).smallest_subnormal) / 2)
    err = np.abs(out64 - ref)
    bad = ~(err <= tol)              # (a NaN, e.g. an element never written, fails too)
    assert not bad.any(), (f"{name}: {bad.sum()} of {bad.size} elements outside tolerance; worst "
                           f"err {err.max():.3g} (tol there {tol.reshape(-1)[np.argmax(err)]:.3g}), "
                           f"compute {comp}")


SOC = {"training": "Ascend910A", "inference": "Ascend310P3", "A2": "Ascend910B1"}


def _case(series, xs, ks, cout, stride, padding, dilation, groups=1, transposed=False, opad=None,
          mask=(1, 1, 1), dtype=np.float16, cm=1, noncontig=False, wdtype=None):
    return dict(series=series, xs=xs, ks=ks, cout=cout, stride=stride, padding=padding,
                dilation=dilation, groups=groups, transposed=transposed, opad=opad, mask=mask,
                dtype=dtype, cm=cm, noncontig=noncontig, wdtype=wdtype)


f16, f32 = np.float16, np.float32
# the explicit coverage: every axis of the issue at least once (small shapes)
CASES = [
    # Cin past gradInput's n-tile: the last tile's weight rows are not whole 32-B blocks
    _case("training", (1, 65, 5, 5), (3, 3), 4, (1, 1), (1, 1), (1, 1)),
    _case("A2", (1, 65, 7), (3,), 130, (1,), (1,), (1,)),
    # fewer than 16 input channels per weight-packing chunk (many taps): refused with 561002 before
    _case("A2", (1, 40, 6, 6, 6), (5, 5, 5), 8, (1, 1, 1), (2, 2, 2), (1, 1, 1)),
    _case("A2", (2, 100, 1, 3, 1), (3, 3, 2), 65, (1, 2, 1), (1, 3, 0), (3, 1, 2), transposed=True, opad=(2, 0, 1)),
    # weight-packing chunks of different widths in one slot (the next load must not land where
    # the last store still reads), and a slot that is not a whole number of 32-B blocks
    _case("A2", (1, 260, 20), (20,), 130, (1,), (0,), (1,), dtype=f32, cm=0, mask=(1, 0, 0)),
    _case("A2", (1, 61, 9), (1,), 400, (1,), (0,), (1,), dtype=f32, cm=0, wdtype=f16, mask=(1, 0, 0)),
    _case("A2", (2, 5, 9), (3,), 6, (1,), (1,), (1,)),                                   # 1D
    _case("A2", (1, 3, 17), (5,), 4, (3,), (2,), (2,), dtype=f32, cm=0),                 # 1D stride, dilation, FP32
    _case("A2", (2, 4, 7, 6), (3, 3), 8, (1, 1), (1, 1), (1, 1)),                        # 2D
    _case("A2", (1, 6, 9, 11), (3, 2), 5, (2, 3), (1, 0), (2, 1), dtype=f32, cm=1),      # stride+dilation, HF32
    _case("A2", (2, 3, 8, 7), (3, 3), 4, (2, 1), (0, 2, 1, 0), (1, 1)),                  # 4-entry padding
    _case("A2", (1, 8, 6, 6), (3, 3), 4, (1, 1), (1, 1), (1, 1), groups=2, dtype=BF16, cm=0),  # groups, BF16
    _case("A2", (2, 16, 5, 5), (3, 3), 16, (1, 1), (1, 1), (1, 1), groups=16),           # depthwise
    _case("A2", (1, 4, 5, 4), (3, 3), 6, (2, 2), (1, 1), (1, 1), transposed=True, opad=(1, 0)),  # transposed
    _case("A2", (1, 4, 5, 4), (2, 3), 6, (2, 1), (0, 1), (1, 2), groups=2, transposed=True, opad=(1, 0),
          dtype=f32, cm=2),                                                              # transposed groups, FP16 compute
    _case("A2", (1, 2, 3, 4, 5), (2, 2, 3), 3, (1, 1, 2), (1, 0, 1), (1, 1, 1)),          # 3D
    _case("A2", (1, 3, 4, 5, 4), (2, 3, 2), 4, (2, 1, 1), (0, 1, 1), (1, 1, 2), dtype=f32, cm=3),  # 3D HF32
    _case("A2", (2, 5, 7, 9), (3, 3), 7, (1, 2), (1, 1), (1, 1), noncontig=True),         # non-contiguous
    _case("A2", (2, 4, 6, 6), (3, 3), 4, (1, 1), (1, 1), (1, 1), dtype=f16, wdtype=f32, cm=1),  # mixed dtypes -> FLOAT
    _case("training", (2, 4, 7, 6), (3, 3), 8, (2, 1), (1, 1), (1, 2), dtype=f32, cm=1),  # 910A, FLOAT via FP16
    _case("training", (1, 6, 8, 8), (3, 3), 6, (1, 1), (1, 1), (1, 1), groups=3, transposed=True, opad=(0, 0)),
    _case("inference", (2, 3, 9), (3,), 5, (2,), (1,), (1,)),                            # 310P3 1D
    _case("inference", (1, 4, 6, 5), (2, 2), 3, (1, 1), (0, 1, 1, 0), (1, 1), dtype=f32, cm=2),
    # conv1-like (stride 2, C_in <= 4): gradWeight over the input folded 2x2 into channels
    _case("A2", (2, 3, 32, 32), (7, 7), 16, (2, 2), (3, 3), (1, 1)),
    _case("A2", (1, 2, 14, 16), (4, 3), 32, (2, 2), (2, 1), (1, 1), mask=(0, 1, 0), dtype=BF16, cm=0),
    # maps too large for one UB item: chunked TransData and layout passes with a partial last chunk
    _case("A2", (1, 16, 88, 72), (3, 3), 16, (1, 1), (1, 1), (1, 1), mask=(1, 1, 0)),
    _case("A2", (1, 16, 88, 72), (3, 3), 16, (2, 2), (1, 1), (1, 1), mask=(1, 0, 0)),
]
# issue 11's reports: a transposed gradInput with stride H > 1 lost rows (the L1 slab was sized
# for stride-1 windows); outputPadding past every window (CANN accepts it in 1D / 2D); a
# convolution whose windows touch no input element; a 3D gradWeight unit in the depth padding
CASES += [
    _case("A2", (1, 1, 4, 5), (1, 1), 1, (3, 1), (0, 0), (1, 1), transposed=True, opad=(0, 0), dtype=f32, cm=0),
    _case("training", (1, 1, 4, 5), (4, 3), 1, (2, 2), (1, 1), (2, 3), transposed=True, opad=(1, 1)),
    _case("inference", (2, 3, 4, 5), (2, 3), 4, (1, 2), (1, 0), (1, 2), transposed=True, opad=(3, 4)),
    _case("A2", (2, 2, 3), (1,), 3, (2,), (0,), (1,), transposed=True, opad=(6,), dtype=f32, cm=0),
    _case("A2", (2, 1, 1), (1,), 4, (2,), (3,), (1,), dtype=BF16, cm=1),
    _case("A2", (3, 32, 2, 4, 3), (2, 3, 1), 20, (3, 1, 3), (2, 1, 2), (3, 1, 3), groups=2, mask=(0, 1, 1),
          dtype=BF16, cm=1),
    # a 3D gradWeight of fewer than 8 elements: its FP32 copy before the Cast is padded to a
    # 32-B block, and the Cast wrote that whole block into the 16-bit gradWeight
    _case("A2", (1, 1, 3, 3, 3), (1, 1, 1), 3, (1, 1, 1), (0, 0, 0), (1, 1, 1), mask=(0, 1, 0)),
    _case("A2", (2, 1, 2, 2, 2), (1, 1, 1), 1, (1, 1, 1), (0, 0, 0), (1, 1, 1), dtype=BF16, cm=0),
    _case("A2", (1, 7, 2, 3, 2), (1, 1, 1), 1, (1, 2, 1), (0, 1, 0), (1, 1, 1)),
    # 3D: outputPadding >= stride but < dilation (CANN accepts it)
    _case("A2", (1, 3, 3, 4, 5), (2, 2, 2), 4, (1, 1, 1), (0, 0, 0), (2, 2, 2), transposed=True, opad=(1, 1, 1),
          dtype=f32, cm=0),
]
# large 2D strides (a patch embedding's backward): even 16 columns of every in-plane phase overflowed
# a UB region of the gradInput layout pass, then one column of them (strides past 32): refused
# with 561002 before, though CANN runs them
CASES += [
    _case("A2", (1, 3, 64, 48), (16, 16), 8, (16, 16), (0, 0), (1, 1), mask=(1, 1, 0)),
    _case("A2", (1, 2, 50, 50), (3, 3), 3, (24, 24), (0, 0), (1, 1), mask=(1, 0, 0)),
    _case("A2", (1, 2, 130, 130), (3, 3), 3, (63, 63), (0, 0), (1, 1), mask=(1, 0, 0)),
    _case("A2", (1, 3, 100, 90), (5, 5), 4, (40, 30), (1, 2), (1, 1), mask=(1, 0, 0), dtype=f32, cm=0),
    _case("training", (1, 3, 70, 70), (2, 2), 4, (33, 33), (0, 0), (1, 1), mask=(1, 0, 0)),
]
# kernels whose taps for one input channel overflow a UB slot of the weight packing (a RepLKNet
# 31 x 31 depthwise kernel, a 3D 11 x 11 x 11 one): refused with 561002 before; packed a run of
# taps an item, with FP32 weights cast to FP16 and a partial last run of taps
CASES += [
    _case("A2", (1, 16, 33, 34), (31, 31), 16, (1, 1), (15, 15), (1, 1), groups=16, mask=(1, 1, 0)),
    _case("A2", (1, 2, 34, 33), (31, 31), 3, (1, 1), (14, 15), (1, 1), mask=(1, 0, 0), dtype=f32, cm=2),
    _case("A2", (1, 2, 12, 12, 11), (11, 11, 11), 2, (1, 1, 1), (5, 5, 5), (1, 1, 1), mask=(1, 0, 0), dtype=BF16, cm=0),
    _case("A2", (1, 3, 5, 4), (31, 31), 17, (1, 1), (2, 3), (1, 1), transposed=True, opad=(0, 0), mask=(1, 0, 0)),
    _case("A2", (1, 2, 3, 4), (31, 31), 18, (2, 1), (1, 0), (1, 1), groups=2, transposed=True, opad=(1, 0),
          mask=(1, 0, 0), dtype=f32, cm=2),
]
# gradWeight rows of one C1 plane longer than half the UB (51 x 51, 11 x 11 x 11 kernels): refused
# with 561002 before; the layout pass takes a run of one kd plane's taps an item
CASES += [
    _case("A2", (1, 16, 52, 51), (51, 51), 16, (1, 1), (25, 25), (1, 1), groups=16, mask=(0, 1, 0)),
    _case("A2", (2, 3, 11, 12, 11), (11, 11, 11), 18, (1, 1, 1), (5, 5, 5), (1, 1, 1), mask=(0, 1, 0), dtype=BF16, cm=0),
    _case("A2", (1, 2, 3, 4), (31, 31), 18, (2, 1), (1, 0), (1, 1), groups=2, transposed=True, opad=(1, 0),
          mask=(0, 1, 0), dtype=f32, cm=2),
    _case("training", (1, 2, 42, 43), (41, 41), 17, (1, 1), (0, 0), (1, 1)),
    # rows of the accumulator more than 65,535 blocks apart (400 channels of 11 x 11 x 11 taps): a
    # copy a row
    _case("A2", (1, 400, 11, 11, 12), (11, 11, 11), 16, (1, 1, 1), (0, 0, 0), (1, 1, 1), mask=(0, 1, 0)),
]
# every outputMask subset, on a small 2D case, on A2 and on the coupled training series
CASES += [_case(s, (1, 3, 5, 5), (3, 3), 4, (1, 1), (1, 1), (1, 1), mask=m)
          for s in ("A2", "training") for m in itertools.product((0, 1), repeat=3) if m != (1, 1, 1)]


def _random_cases(n, seed=4):
    """A randomised set over the same axes (reproducible)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        nd = int(rng.integers(1, 4))
        series = "A2" if nd == 3 else str(rng.choice(["A2", "A2", "training", "inference"]))
        groups = int(rng.choice([1, 1, 2, 3]))
        cig, cog = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        k = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        s = tuple(int(rng.integers(1, 3)) for _ in range(nd))
        d = tuple(int(rng.integers(1, 3)) for _ in range(nd))
        transposed = bool(rng.random() < 0.3)
        if nd == 2 and rng.random() < 0.3:
            p = tuple(int(rng.integers(0, 3)) for _ in range(4))
        else:
            p = tuple(int(rng.integers(0, 3)) for _ in range(nd))
        sp = tuple(int(rng.integers(4, 9 if nd < 3 else 6)) for _ in range(nd))
        opad = tuple(int(rng.integers(0, si)) if transposed else 0 for si in s)
        dtype = rng.choice([f16, f32] + ([BF16] if series == "A2" else []))
        cm = int(rng.choice([1, 2] if (series != "A2" and dtype != f16) else [0, 1, 2, 3]))
        if series == "A2" and dtype == BF16 and cm == 2:
            cm = 1
        out.append(_case(series, (int(rng.integers(1, 3)), cig * groups) + sp, k, cog * groups, s, p, d,
                         groups, transposed, opad, tuple(int(b) for b in rng.integers(0, 2, 3)),
                         dtype, cm, bool(rng.random() < 0.25)))
    return out


def _valid(c) -> bool:
    nd = len(c["xs"]) - 2
    pads = norm_padding(c["padding"], nd)
    if c["transposed"]:
        ws = (c["xs"][1], c["cout"] // c["groups"]) + c["ks"]
    else:
        ws = (c["cout"], c["xs"][1] // c["groups"]) + c["ks"]
    out = conv_out_size(c["xs"][2:], c["ks"], c["stride"], pads, c["dilation"], c["transposed"],
                        list(c["opad"] or [0] * nd))
    return all(o >= 1 for o in out), ws, out


CASES += [c for c in _random_cases(16) if _valid(c)[0]]


def _id(c):
    nd = len(c["xs"]) - 2
    bits = [c["series"], f"{nd}D", "x".join(map(str, c["xs"])), "k" + "x".join(map(str, c["ks"])),
            f"s{''.join(map(str, c['stride']))}", f"p{''.join(map(str, c['padding']))}",
            f"d{''.join(map(str, c['dilation']))}", f"g{c['groups']}", np.dtype(c["dtype"]).name,
            f"cm{c['cm']}", "m" + "".join(str(int(b)) for b in c["mask"])]
    if c["transposed"]:
        bits.append("T")
    if c["noncontig"]:
        bits.append("nc")
    return "-".join(bits)


def run_case(c, mode="functional", tiling=None):
    rng = np.random.default_rng(zlib.crc32(_id(c).encode()))
    nd = len(c["xs"]) - 2
    ok, ws, out = _valid(c)
    assert ok
    wdt = c["wdtype"] or c["dtype"]
    x = _rand(rng, c["xs"], c["dtype"], c["noncontig"])
    w = _rand(rng, ws, wdt, c["noncontig"])
    dy = _rand(rng, (c["xs"][0], c["cout"], *out), c["dtype"], c["noncontig"])
    mask = tuple(bool(b) for b in c["mask"])
    res = simulator.run("ConvolutionBackward", soc=SOC[c["series"]], mode=mode, tiling=tiling,
                        gradOutput=dy, input=x, weight=w, biasSizes=[c["cout"]], stride=list(c["stride"]),
                        padding=list(c["padding"]), dilation=list(c["dilation"]),
                        transposed=c["transposed"], outputPadding=list(c["opad"] or [0] * nd),
                        groups=c["groups"], outputMask=list(mask), cubeMathType=c["cm"])
    return res, (dy, x, w, mask)


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_convolution_backward_numerics(c):
    res, (dy, x, w, mask) = run_case(c)
    args = (c["stride"], c["padding"], c["dilation"], c["groups"], c["transposed"],
            list(c["opad"] or [0] * (len(c["xs"]) - 2)), mask)
    ref = conv_backward(dy, x, w, *args)
    absref = conv_backward(np.abs(dy.astype(np.float64)), np.abs(x.astype(np.float64)),
                           np.abs(w.astype(np.float64)), *args)
    comp = compute_dtype(c["series"], (dy.dtype, x.dtype, w.dtype), c["cm"])
    for i, name in enumerate(("gradInput", "gradWeight", "gradBias")):
        if mask[i]:
            assert_close(res.outputs[name], ref[i], absref[i], comp if i < 2 else "FLOAT", name)
        else:
            assert name not in res.outputs
    # an unrequested gradient is neither computed nor written: no launch names it
    names = " ".join(l["name"] for l in res.report.launches).lower()
    for i, tag in enumerate(("gradinput", "gradweight", "gradbias")):
        assert (tag in names) == mask[i], names


def test_unrequested_outputs_are_not_written():
    """An output passed in with its mask bit 0 keeps its contents."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float16)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
    dy = rng.standard_normal((1, 4, 4, 4)).astype(np.float16)
    gi = np.full(x.shape, 7, np.float16)
    gb = np.full((4,), 9, np.float16)
    res = simulator.run("ConvolutionBackward", soc="Ascend910B1", gradOutput=dy, input=x, weight=w,
                        biasSizes=[4], stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False,
                        outputPadding=[0, 0], groups=1, outputMask=[False, True, False], cubeMathType=1,
                        gradInput=gi, gradBias=gb)
    assert (res.outputs["gradInput"] == 7).all() and (res.outputs["gradBias"] == 9).all()


def run_and_check_conv_tbc(soc, seed, T, B, cin, cout, K, pad, **run_kw):
    """A random FP16 ConvTbcBackward call, its three gradients checked against conv_tbc_backward."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, B, cin)).astype(np.float16)
    w = rng.standard_normal((K, cin, cout)).astype(np.float16)
    b = rng.standard_normal((cout,)).astype(np.float16)
    dy = rng.standard_normal((T + 2 * pad + 1 - K, B, cout)).astype(np.float16)
    res = simulator.run("ConvTbcBackward", soc=soc, self=dy, input=x, weight=w, bias=b, pad=pad,
                        cubeMathType=1, **run_kw)
    ref = conv_tbc_backward(dy, x, w, pad)
    absref = conv_tbc_backward(np.abs(dy.astype(np.float64)), np.abs(x.astype(np.float64)),
                               np.abs(w.astype(np.float64)), pad)
    for i, name in enumerate(("gradInput", "gradWeight", "gradBias")):
        assert_close(res.outputs[name], ref[i], absref[i], "FLOAT16" if i < 2 else "FLOAT", name)
    return res


@pytest.mark.parametrize("soc,cin,cout,K", [("Ascend910A", 65, 1, 1), ("Ascend910B1", 65, 128, 1),
                                             ("Ascend910B1", 257, 1, 3), ("Ascend910A", 100, 9, 2)])
def test_conv_tbc_input_channels_past_an_n_tile(soc, cin, cout, K):
    """Cin beyond gradInput's n-tile leaves a last tile of a few channels, whose weight rows
    (n x taps elements) are not whole 32-B blocks: the packing loads them padded and closes them
    up (it raised 561002 inside the kernel, seen as an internal error, before)."""
    run_and_check_conv_tbc(soc, 5, T=4, B=2, cin=cin, cout=cout, K=K, pad=K // 2)


def test_fp32_gradweight_units_of_different_heights_on_one_core():
    """One core runs two gradWeight units of different heights (32 rows, then 1): the software
    pipeline records the next stage before computing this one, and the left operand's loader once
    read the next unit's row count (m1) instead of its own (FP32 compute, ND -> NZ operand)."""
    rng = np.random.default_rng(0)
    dy = rng.standard_normal((1, 1, 33)).astype(np.float32)
    x = np.ones((1, 1, 1), np.float32)
    w = rng.standard_normal((1, 1, 33)).astype(np.float32)
    b = np.zeros(33, np.float32)
    res = simulator.run("ConvTbcBackward", soc="Ascend910B1", self=dy, input=x, weight=w, bias=b, pad=0,
                        cubeMathType=0, tiling={"dwBaseM": 32, "blockDim": 1})
    ref = conv_tbc_backward(dy, x, w, 0)
    absref = conv_tbc_backward(np.abs(dy.astype(np.float64)), np.abs(x.astype(np.float64)),
                               np.abs(w.astype(np.float64)), 0)
    for i, name in enumerate(("gradInput", "gradWeight", "gradBias")):
        assert_close(res.outputs[name], ref[i], absref[i], "FLOAT", name)


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910A"])
def test_conv_tbc_backward_numerics(soc):
    res = run_and_check_conv_tbc(soc, 2, T=7, B=3, cin=5, cout=6, K=3, pad=1)
    # it ran the convolution's kernels (shared code, not a copy)
    names = " ".join(l["name"] for l in res.report.launches)
    assert "GradInput" in names and "GradWeight" in names


def test_empty_input_n_zero_on_a2_gives_zeros():
    x = np.zeros((0, 3, 5, 5), np.float16)
    w = np.ones((4, 3, 3, 3), np.float16)
    dy = np.zeros((0, 4, 3, 3), np.float16)
    res = simulator.run("ConvolutionBackward", soc="Ascend910B1", gradOutput=dy, input=x, weight=w,
                        biasSizes=[4], stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False,
                        outputPadding=[0, 0], groups=1, outputMask=[True, True, True], cubeMathType=1,
                        gradWeight=np.full(w.shape, 5, np.float16), gradBias=np.full((4,), 5, np.float16))
    assert res.outputs["gradInput"].shape == x.shape
    assert (res.outputs["gradWeight"] == 0).all() and (res.outputs["gradBias"] == 0).all()


def test_timing_only_cycles_equal_functional():
    c = _case("A2", (2, 8, 9, 9), (3, 3), 16, (2, 2), (1, 1), (1, 1), dtype=np.float16)
    f, _ = run_case(c, "functional")
    t, _ = run_case(c, "timing")
    assert f.cycles == t.cycles and f.workspace_size == t.workspace_size
    c2 = _case("training", (1, 4, 7, 7), (3, 3), 4, (1, 1), (1, 1), (1, 1), transposed=True, opad=(0, 0))
    assert run_case(c2, "functional")[0].cycles == run_case(c2, "timing")[0].cycles


def test_a_forced_gradinput_n_tile_must_be_whole_16_channel_blocks():
    """gradInput's n-tiles start on whole 16-channel blocks; a forced baseN of 100 computed wrong
    gradients before, and is 561002 in phase 1 now."""
    c = _case("A2", (1, 449, 9), (8,), 130, (1,), (0,), (1,), mask=(1, 0, 0))
    with pytest.raises(AclnnError) as e:
        run_case(c, tiling={"baseN": 100})
    assert e.value.status == 561002 and "multiple of 16" in str(e.value)
    run_case(c, tiling={"baseN": 96})


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910A"])
def test_empty_batch_fills_a_strided_grad_bias_and_nothing_beside_it(soc):
    """N == 0: gradBias (a sum over an empty batch) is zeros, also when it is a strided view,
    whose dense stand-in must be written back; the elements between its strides keep theirs."""
    x = np.zeros((0, 3, 5, 5), np.float16)
    w = np.ones((4, 3, 3, 3), np.float16)
    dy = np.zeros((0, 4, 3, 3), np.float16)
    store = np.full((8,), 5, np.float16)
    if soc == "Ascend910A":                 # no empty tensors on this series: a clear refusal
        with pytest.raises(AclnnError) as e:
            simulator.run("ConvolutionBackward", soc=soc, gradOutput=dy, input=x, weight=w,
                          biasSizes=[4], stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False,
                          outputPadding=[0, 0], groups=1, outputMask=[False, False, True], cubeMathType=1,
                          gradBias=store[::2])
        assert e.value.status == 161002 and "empty" in str(e.value)
        assert (store == 5).all()
        return
    res = simulator.run("ConvolutionBackward", soc=soc, gradOutput=dy, input=x, weight=w,
                        biasSizes=[4], stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False,
                        outputPadding=[0, 0], groups=1, outputMask=[False, True, True], cubeMathType=1,
                        gradWeight=np.full(w.shape, 5, np.float16), gradBias=store[::2])
    assert (res.outputs["gradBias"] == 0).all() and (res.outputs["gradWeight"] == 0).all()
    assert (store[::2] == 0).all() and (store[1::2] == 5).all()
