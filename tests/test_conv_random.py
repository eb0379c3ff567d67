"""A randomised comparison of all three ConvolutionBackward gradients against references we did not
derive from the kernels: the float64 formula reference (tests/conv_reference.py) on every case, and
torch's own `convolution_backward` in float64 where torch is installed.

The generator covers the whole parameter space the operator accepts: 1D, 2D and 3D (3D on the A2
series only), transposed and not, stride / dilation / padding (symmetric and 2D 4-entry) and
outputPadding per spatial dim independently, groups, channel counts on both sides of C0, odd and
tiny spatial sizes, every outputMask, non-contiguous views, and every dtype and cubeMathType the
chip's series allows, on Ascend910A, Ascend310P3, Ascend910B1 and Ascend910B4. Cases are seeded and
reproducible (the test id names the seed); `CONV_RANDOM_CASES=N` runs more of them.

Each case is a formula test (always) and a torch test (skipped, with the reason, where torch is not
installed). torch's `convolution_backward` takes symmetric padding and an outputPadding below stride
or dilation only; CANN accepts 2D 4-entry padding and, in 1D / 2D, any outputPadding, so for those
cases the torch oracle is torch's autograd through its convolution with the padding made explicit
(zeros padded onto the input, or the transposed output cropped and zero-extended).

Random draws reach what hand-picked cases do not: e.g. a transposed gradInput whose L1 slab is
sized for stride-1 windows reads rows the slab does not hold only when stride-H > 1 and the window
is tall enough.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from conv_reference import conv_backward, conv_out_size, norm_padding
from test_convolution_backward import assert_close, compute_dtype

BF16 = np.dtype(ml_dtypes.bfloat16)
CHIPS = {"Ascend910A": "training", "Ascend310P3": "inference", "Ascend910B1": "A2", "Ascend910B4": "A2"}
N_CASES = int(os.environ.get("CONV_RANDOM_CASES", "240"))

def draw_case(seed: int) -> dict:
    """One valid call, drawn from seed alone. Each spatial dim gets its own kernel, stride,
    dilation, padding and outputPadding."""
    rng = np.random.default_rng(seed)
    soc = list(CHIPS)[seed % len(CHIPS)]
    series = CHIPS[soc]
    big_rng = np.random.default_rng([seed, 7])    # (its own stream: the other draws stay as they were)
    big = big_rng.random() < 0.08
    while True:
        nd = int(rng.choice([1, 2, 2, 3] if series == "A2" else [1, 2, 2]))
        transposed = bool(rng.random() < 0.5)
        groups = int(rng.choice([1, 1, 1, 2, 3]))
        wide = rng.random() < 0.2          # channels across C0 = 16
        cig = int(rng.integers(1, 24 if wide else 6))
        cog = int(rng.integers(1, 24 if wide else 6))
        if big:                            # past the Cube's n-tiles and the weight packing's chunks
            cig = int(big_rng.choice([33, 63, 65, 100, 129, 257]))
            cog = int(big_rng.choice([1, 17, 65, 130]))
            groups = 1
        k = tuple(int(rng.integers(1, 5 if nd < 3 else 4)) for _ in range(nd))
        s = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        d = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        if nd == 2 and not transposed and rng.random() < 0.3:
            p = tuple(int(rng.integers(0, 4)) for _ in range(4))
        else:
            p = tuple(int(rng.integers(0, 4)) for _ in range(nd))
        sp = tuple(int(rng.integers(1, 10 if nd < 3 else 6)) for _ in range(nd))
        # CANN's checker: outputPadding < stride or < dilation in 3D, any value >= 0 in 1D / 2D
        # (past every window: those gradOutput elements feed gradBias only)
        opad = tuple(int(rng.integers(0, max(si, di) if nd == 3 else si + di + 2)) if transposed else 0
                     for si, di in zip(s, d))
        dtype = np.dtype(rng.choice(["float16", "float32"] + (["bfloat16"] if series == "A2" else [])))
        if dtype.name == "bfloat16":
            dtype = BF16
        if series == "A2":
            cm = int(rng.integers(0, 4))
            if dtype == BF16 and cm == 2:
                cm = 1
        else:
            cm = int(rng.integers(0, 4)) if dtype == np.float16 else int(rng.choice([1, 2]))
        mask = tuple(bool(b) for b in rng.integers(0, 2, 3))
        if not any(mask):
            mask = (True, True, True)
        n = int(rng.integers(1, 4))
        c = dict(seed=seed, soc=soc, series=series, nd=nd, transposed=transposed, groups=groups,
                 xs=(n, cig * groups) + sp, k=k, cout=cog * groups, stride=s, dilation=d, padding=p,
                 opad=opad, dtype=dtype, cm=cm, mask=mask, noncontig=bool(rng.random() < 0.2),
                 strided_out=bool(rng.random() < 0.2))
        pads = norm_padding(p, nd)
        out = conv_out_size(sp, k, s, pads, d, transposed, list(opad))
        if all(o >= 1 for o in out) and np.prod(out) * cog * groups * n <= 6000:
            c["out"] = tuple(out)
            return c


def _id(c) -> str:
    return (f"seed{c['seed']}-{c['soc']}-{c['nd']}D{'-T' if c['transposed'] else ''}-"
            f"{c['dtype'].name}-cm{c['cm']}")


CASES = [draw_case(i) for i in range(N_CASES)]


def _data(c):
    rng = np.random.default_rng(10_000 + c["seed"])
    g = c["groups"]
    ws = ((c["xs"][1], c["cout"] // g) if c["transposed"] else (c["cout"], c["xs"][1] // g)) + c["k"]

    def rand(shape):
        a = rng.standard_normal(shape).astype(c["dtype"])
        if c["noncontig"] and a.ndim >= 3:
            a = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)
        return a
    return rand(c["xs"]), rand(ws), rand((c["xs"][0], c["cout"]) + c["out"])


def torch_accepts(c) -> bool:
    """Whether torch's convolution_backward takes the call as it is."""
    return len(c["padding"]) == c["nd"] and all(o < max(s, d) for o, s, d in zip(c["opad"], c["stride"], c["dilation"]))


def torch_grads(torch, c, x, w, dy):
    """(gradInput, gradWeight, gradBias) from torch in float64: its convolution_backward where it
    takes the call, otherwise autograd through aten.convolution with no padding, the padding applied
    around it: a convolution's input zero-padded by (before, after); a transposed convolution's full
    output cropped from `before` to the output size (zero-extended where outputPadding runs past it)."""
    t_dy, t_x, t_w = [torch.from_numpy(np.ascontiguousarray(a).astype(np.float64)) for a in (dy, x, w)]
    nd, stride, dilation = c["nd"], list(c["stride"]), list(c["dilation"])
    if torch_accepts(c):
        return tuple(g.numpy() for g in torch.ops.aten.convolution_backward(
            t_dy, t_x, t_w, [c["cout"]], stride, list(c["padding"]), dilation, c["transposed"],
            list(c["opad"]), c["groups"], [True, True, True]))
    pairs = norm_padding(c["padding"], nd)
    t_x.requires_grad_(True)
    t_w.requires_grad_(True)
    t_b = torch.zeros(c["cout"], dtype=torch.float64, requires_grad=True)
    zeros = [0] * nd
    if not c["transposed"]:
        flat = [p for lo_hi in reversed(pairs) for p in lo_hi]          # F.pad: last dim first
        xp = torch.nn.functional.pad(t_x, flat)
        y = torch.ops.aten.convolution(xp, t_w, None, stride, zeros, dilation, False, zeros, c["groups"])
    else:
        full = torch.ops.aten.convolution(t_x, t_w, None, stride, zeros, dilation, True, zeros, c["groups"])
        extend = [max(0, lo + o - f) for (lo, _), o, f in zip(pairs, c["out"], full.shape[2:])]
        full = torch.nn.functional.pad(full, [p for e in reversed(extend) for p in (0, e)])
        y = full[(slice(None), slice(None)) + tuple(slice(lo, lo + o) for (lo, _), o in zip(pairs, c["out"]))]
    y = y + t_b.reshape((1, -1) + (1,) * nd)
    assert tuple(y.shape) == dy.shape, (tuple(y.shape), dy.shape)
    y.backward(t_dy)
    return t_x.grad.numpy(), t_w.grad.numpy(), t_b.grad.numpy()


_OUTPUTS: dict[int, dict] = {}           # seed -> the simulator's outputs, for the torch test
_FAILED: dict[int, str] = {}             # seed -> why the formula test failed


def run_case(c) -> dict:
    """Run case c, check it against the formula reference; returns the outputs by name."""
    x, w, dy = _data(c)
    x0, w0, dy0 = x.copy(), w.copy(), dy.copy()
    outs = {}
    if c["strided_out"]:
        # outputs passed in as every-other-element views of NaN-filled buffers: the gaps must stay NaN
        for name, shape, dt in (("gradInput", x.shape, x.dtype), ("gradWeight", w.shape, w.dtype),
                                ("gradBias", (c["cout"],), dy.dtype)):
            if c["mask"][("gradInput", "gradWeight", "gradBias").index(name)]:
                outs[name] = np.full(shape[:-1] + (2 * shape[-1],), np.nan, dt)
    res = simulator.run("ConvolutionBackward", soc=c["soc"], **{k: v[..., ::2] for k, v in outs.items()},
                        gradOutput=dy, input=x, weight=w,
                        biasSizes=[c["cout"]], stride=list(c["stride"]), padding=list(c["padding"]),
                        dilation=list(c["dilation"]), transposed=c["transposed"],
                        outputPadding=list(c["opad"]), groups=c["groups"], outputMask=list(c["mask"]),
                        cubeMathType=c["cm"])
    # the inputs are not modified
    assert np.array_equal(x, x0) and np.array_equal(w, w0) and np.array_equal(dy, dy0)
    args = (c["stride"], c["padding"], c["dilation"], c["groups"], c["transposed"], list(c["opad"]), c["mask"])
    ref = conv_backward(dy, x, w, *args)
    absref = conv_backward(np.abs(dy.astype(np.float64)), np.abs(x.astype(np.float64)),
                           np.abs(w.astype(np.float64)), *args)
    comp = compute_dtype(c["series"], (dy.dtype, x.dtype, w.dtype), c["cm"])
    got = {}
    for i, name in enumerate(("gradInput", "gradWeight", "gradBias")):
        if not c["mask"][i]:
            continue
        out = res.outputs[name]
        if name in outs:
            assert np.isnan(outs[name][..., 1::2].astype(np.float32)).all(), f"{name}: a gap was written"
            out = outs[name][..., ::2]
        assert_close(out, ref[i], absref[i], comp if i < 2 else "FLOAT", f"{name} vs formula")
        got[name] = np.array(out)
    _OUTPUTS[c["seed"]] = got
    return got


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_gradients_match_independent_references(c):
    try:
        run_case(c)
    except BaseException as e:
        _FAILED[c["seed"]] = str(e).splitlines()[0] if str(e) else repr(e)
        raise


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_gradients_match_torch(c):
    """torch in float64 against the formula reference (to 1e-10 of the sums over absolute values)
    and then against the simulator's outputs, with the formula test's tolerance. A case that failed
    against the formula fails here too, without a second simulator run."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    x, w, dy = _data(c)
    args = (c["stride"], c["padding"], c["dilation"], c["groups"], c["transposed"], list(c["opad"]))
    ref = conv_backward(dy, x, w, *args)
    absref = conv_backward(np.abs(dy.astype(np.float64)), np.abs(x.astype(np.float64)),
                           np.abs(w.astype(np.float64)), *args)
    tref = torch_grads(torch, c, x, w, dy)
    how = "convolution_backward" if torch_accepts(c) else "autograd, explicit padding"
    for i, name in enumerate(("gradInput", "gradWeight", "gradBias")):
        diff = np.abs(ref[i] - tref[i])
        assert (diff <= 1e-10 * absref[i] + 1e-300).all(), \
            f"{_id(c)}: {name}: the formula reference and torch ({how}) disagree by {diff.max():.3g}"
    if c["seed"] in _FAILED:
        pytest.fail(f"{_id(c)}: not compared with torch; it failed against the formula reference: "
                    f"{_FAILED[c['seed']]}", pytrace=False)
    outs = _OUTPUTS.get(c["seed"]) or run_case(c)
    comp = compute_dtype(c["series"], (dy.dtype, x.dtype, w.dtype), c["cm"])
    for i, name in enumerate(("gradInput", "gradWeight", "gradBias")):
        if name in outs:
            assert_close(outs[name], tref[i], absref[i], comp if i < 2 else "FLOAT", f"{name} vs torch ({how})")
