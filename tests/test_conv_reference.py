"""The float64 convolution references (tests/conv_reference.py) checked on their own, without torch,
so that the randomised operator tests do not rest on an oracle nobody checked:

* the forward against a direct loop written here from the definition (gather for a convolution,
  scatter for a transposed one, with its own output-size formula and its own reading of the
  padding), so that the adjoint checks below do not compare a wrong forward with its own transpose;
* adjointness: the convolution is bilinear in (input, weight), so for any gradOutput g
      <conv(x, w) + b, g> == <x, gradInput(g, w)> + <b, gradBias(g)> == <w, gradWeight(x, g)> + <b, gradBias(g)>
  in float64 to 1e-10 of the same sums taken over absolute values;
* central finite differences of the loss L = sum((conv(x, w) + b) * g) at a few random elements of
  input, weight and bias against gradInput, gradWeight and gradBias (L is linear in each element,
  so the difference quotient is exact up to rounding).

The cases are seeded and span the parameter space the operator accepts and a little more: 1D, 2D and
3D, transposed or not, stride, dilation, symmetric / asymmetric / 4-entry 2D padding, outputPadding
up to stride + dilation + 1, groups (depthwise too) and every outputMask. The same three checks
cover conv_tbc's reference, which is also checked against the general reference as a 1D convolution.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from conv_reference import conv_backward, conv_forward, conv_tbc_backward, conv_tbc_forward

N_CASES = 90
N_TBC = 40
FD_STEP = 1e-3
ADJOINT_RTOL = 1e-10
FD_RTOL = 1e-9


# ---- the draw -------------------------------------------------------------------------------------
def draw(seed: int) -> dict:
    """One convolution, drawn from seed alone: per-dimension (before, after) padding pairs and the
    form the call passes them in (symmetric ints, 2D [top, bottom, left, right], or the pairs)."""
    rng = np.random.default_rng([seed, 0xc0de])
    while True:
        nd = int(rng.choice([1, 2, 2, 3]))
        transposed = bool(rng.random() < 0.5)
        depthwise = rng.random() < 0.15
        if depthwise:
            groups, cig, cog = int(rng.integers(2, 5)), 1, int(rng.integers(1, 3))
        else:
            groups, cig, cog = int(rng.choice([1, 1, 2, 3])), int(rng.integers(1, 4)), int(rng.integers(1, 4))
        kmax, smax = (4, 6) if nd < 3 else (3, 4)
        k = tuple(int(rng.integers(1, kmax + 1)) for _ in range(nd))
        s = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        d = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        sp = tuple(int(rng.integers(1, smax + 1)) for _ in range(nd))
        form = str(rng.choice(["symmetric", "pairs"] + (["four"] if nd == 2 else [])))
        if form == "symmetric":
            sym = [int(rng.integers(0, 4)) for _ in range(nd)]
            pairs = [(p, p) for p in sym]
            padding = sym
        else:
            pairs = [(int(rng.integers(0, 4)), int(rng.integers(0, 4))) for _ in range(nd)]
            padding = [p for pr in pairs for p in pr] if form == "four" else pairs
        opad = tuple(int(rng.integers(0, si + di + 2)) if transposed else 0 for si, di in zip(s, d))
        out = direct_out_size(sp, k, s, d, pairs, transposed, opad)
        if all(o >= 1 for o in out) and np.prod(out) * np.prod(k) <= 1500:
            mask = tuple(bool(b) for b in rng.integers(0, 2, 3))
            return dict(seed=seed, nd=nd, transposed=transposed, groups=groups, depthwise=depthwise,
                        n=int(rng.integers(1, 3)), cin=cig * groups, cout=cog * groups, k=k, stride=s,
                        dilation=d, sp=sp, form=form, pairs=pairs, padding=padding, opad=opad, out=out,
                        mask=mask if any(mask) else (True, True, True))


def case_id(c: dict) -> str:
    return (f"s{c['seed']}-{c['nd']}D{'T' if c['transposed'] else ''}-g{c['groups']}"
            f"{'dw' if c['depthwise'] else ''}-k{'x'.join(map(str, c['k']))}"
            f"-s{''.join(map(str, c['stride']))}-d{''.join(map(str, c['dilation']))}-{c['form']}")


def direct_out_size(sp, k, s, d, pairs, transposed, opad):
    if transposed:
        return tuple((i - 1) * si - lo - hi + di * (ki - 1) + op + 1
                     for i, ki, si, di, (lo, hi), op in zip(sp, k, s, d, pairs, opad))
    return tuple((i + lo + hi - di * (ki - 1) - 1) // si + 1 for i, ki, si, di, (lo, hi) in zip(sp, k, s, d, pairs))


def tensors(c: dict):
    rng = np.random.default_rng([c["seed"], 0xda7a])
    g = c["groups"]
    ws = (c["cin"], c["cout"] // g) if c["transposed"] else (c["cout"], c["cin"] // g)
    x = rng.standard_normal((c["n"], c["cin"]) + c["sp"])
    w = rng.standard_normal(ws + c["k"])
    b = rng.standard_normal(c["cout"])
    gy = rng.standard_normal((c["n"], c["cout"]) + c["out"])
    return x, w, b, gy


def call_args(c: dict) -> tuple:
    return c["stride"], c["padding"], c["dilation"], c["groups"], c["transposed"], list(c["opad"])


# ---- the direct loop ------------------------------------------------------------------------------
def direct_conv(x, w, b, c) -> np.ndarray:
    """y = conv(x, w) + b by its definition, one output (or input) position and one tap at a time:
    a convolution gathers y[o] = sum_k x[o*s + k*d - before] . w[k]; a transposed one scatters
    x[i] . w[k] to y[i*s + k*d - before]. Positions outside the tensors contribute nothing."""
    g, nd = c["groups"], c["nd"]
    s, d, k = c["stride"], c["dilation"], c["k"]
    lo = [p[0] for p in c["pairs"]]
    out = direct_out_size(c["sp"], k, s, d, c["pairs"], c["transposed"], c["opad"])
    cig, cog = c["cin"] // g, c["cout"] // g
    y = np.zeros((x.shape[0], c["cout"]) + out)
    for grp in range(g):
        ci, co = slice(grp * cig, (grp + 1) * cig), slice(grp * cog, (grp + 1) * cog)
        for tap in itertools.product(*[range(n) for n in k]):
            if not c["transposed"]:
                wk = w[co][(slice(None), slice(None)) + tap]                 # (cog, cig)
                for o in itertools.product(*[range(n) for n in out]):
                    src = tuple(o[i] * s[i] + tap[i] * d[i] - lo[i] for i in range(nd))
                    if all(0 <= src[i] < c["sp"][i] for i in range(nd)):
                        y[(slice(None), co) + o] += x[(slice(None), ci) + src] @ wk.T
            else:
                wk = w[ci][(slice(None), slice(None)) + tap]                 # (cig, cog)
                for i_pos in itertools.product(*[range(n) for n in c["sp"]]):
                    dst = tuple(i_pos[i] * s[i] + tap[i] * d[i] - lo[i] for i in range(nd))
                    if all(0 <= dst[i] < out[i] for i in range(nd)):
                        y[(slice(None), co) + dst] += x[(slice(None), ci) + i_pos] @ wk
    return y + b.reshape((1, -1) + (1,) * nd)


def reference_forward(x, w, b, c) -> np.ndarray:
    y = conv_forward(x, w, c["stride"], c["padding"], c["dilation"], c["groups"], c["transposed"], list(c["opad"]))
    return y + b.reshape((1, -1) + (1,) * c["nd"])


def loss(x, w, b, gy, c) -> float:
    return float(np.sum(reference_forward(x, w, b, c) * gy))


CASES = [draw(i) for i in range(N_CASES)]
IDS = [case_id(c) for c in CASES]


def test_the_draw_covers_the_parameter_space():
    seen = {(c["nd"], c["transposed"]) for c in CASES}
    assert seen == {(nd, t) for nd in (1, 2, 3) for t in (False, True)}, seen
    assert {c["form"] for c in CASES if c["nd"] == 2} == {"symmetric", "pairs", "four"}
    assert any(c["depthwise"] and c["transposed"] for c in CASES) and any(c["depthwise"] and not c["transposed"]
                                                                        for c in CASES)
    assert any(c["groups"] > 1 and not c["depthwise"] for c in CASES)
    assert any(any(lo != hi for lo, hi in c["pairs"]) for c in CASES if c["transposed"])
    assert any(any(o >= max(s, d) for o, s, d in zip(c["opad"], c["stride"], c["dilation"])) for c in CASES)
    for nd in (1, 2, 3):
        assert any(c["nd"] == nd and max(c["stride"]) > 1 and max(c["dilation"]) > 1 for c in CASES), nd


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_forward_matches_the_direct_loop(c):
    x, w, b, _ = tensors(c)
    ref = reference_forward(x, w, b, c)
    direct = direct_conv(x, w, b, c)
    assert ref.shape == direct.shape, f"{case_id(c)}: output shape {ref.shape} != {direct.shape}"
    np.testing.assert_allclose(ref, direct, rtol=1e-12, atol=1e-12, err_msg=case_id(c))


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_backward_is_the_adjoint_of_the_forward(c):
    x, w, b, gy = tensors(c)
    dx, dw, db = conv_backward(gy, x, w, *call_args(c))
    assert dx.shape == x.shape and dw.shape == w.shape and db.shape == b.shape
    y = reference_forward(x, w, b, c)
    lhs = float(np.sum(y * gy))
    scale = float(np.sum(reference_forward(np.abs(x), np.abs(w), np.abs(b), c) * np.abs(gy)))
    bias_term = float(b @ db)
    for name, rhs in (("gradInput", float(np.sum(x * dx)) + bias_term),
                      ("gradWeight", float(np.sum(w * dw)) + bias_term)):
        assert abs(lhs - rhs) <= ADJOINT_RTOL * scale, \
            f"{case_id(c)}: <conv(x, w) + b, g> = {lhs!r} but via {name} {rhs!r} (scale {scale:.3g})"
    # a masked-out gradient is None and the others are unchanged
    part = conv_backward(gy, x, w, *call_args(c), mask=c["mask"])
    for keep, full, got in zip(c["mask"], (dx, dw, db), part):
        assert (got is None) if not keep else np.array_equal(got, full), case_id(c)


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_gradients_match_finite_differences(c):
    x, w, b, gy = tensors(c)
    grads = dict(zip(("input", "weight", "bias"), conv_backward(gy, x, w, *call_args(c))))
    rng = np.random.default_rng([c["seed"], 0xfd])
    scale = float(np.sum(np.abs(reference_forward(np.abs(x), np.abs(w), np.abs(b), c)) * np.abs(gy)))
    tensors_by_name = {"input": x, "weight": w, "bias": b}
    for name, t in tensors_by_name.items():
        for flat in rng.choice(t.size, min(3, t.size), replace=False):
            j = np.unravel_index(int(flat), t.shape)
            vals = {}
            for sign in (1, -1):
                moved = {n: a.copy() for n, a in tensors_by_name.items()}
                moved[name][j] += sign * FD_STEP
                vals[sign] = loss(moved["input"], moved["weight"], moved["bias"], gy, c)
            fd = (vals[1] - vals[-1]) / (2 * FD_STEP)
            assert abs(fd - grads[name][j]) <= FD_RTOL * (scale + 1), \
                f"{case_id(c)}: d loss / d {name}{j}: finite difference {fd!r}, reference {grads[name][j]!r}"


# ---- conv_tbc -------------------------------------------------------------------------------------
def draw_tbc(seed: int) -> dict:
    rng = np.random.default_rng([seed, 0x7bc, 0xc0de])
    while True:
        c = dict(seed=seed, T=int(rng.integers(1, 9)), B=int(rng.integers(1, 4)), cin=int(rng.integers(1, 5)),
                 cout=int(rng.integers(1, 5)), K=int(rng.integers(1, 6)), pad=int(rng.integers(0, 4)))
        c["t_out"] = c["T"] + 2 * c["pad"] + 1 - c["K"]
        if c["t_out"] >= 1:
            return c


def tbc_id(c: dict) -> str:
    return f"s{c['seed']}-T{c['T']}B{c['B']}ci{c['cin']}co{c['cout']}k{c['K']}p{c['pad']}"


def tbc_tensors(c: dict):
    rng = np.random.default_rng([c["seed"], 0xda7a])
    return (rng.standard_normal((c["T"], c["B"], c["cin"])), rng.standard_normal((c["K"], c["cin"], c["cout"])),
            rng.standard_normal(c["cout"]), rng.standard_normal((c["t_out"], c["B"], c["cout"])))


def direct_tbc(x, w, b, pad):
    """out[t, b, o] = bias[o] + sum_k sum_c x[t + k - pad, b, c] * w[k, c, o], one element at a time."""
    T, B, cin = x.shape
    K, _, cout = w.shape
    y = np.zeros((T + 2 * pad + 1 - K, B, cout))
    for t, bb, o in itertools.product(range(y.shape[0]), range(B), range(cout)):
        acc = b[o]
        for k in range(K):
            src = t + k - pad
            if 0 <= src < T:
                acc += sum(x[src, bb, ci] * w[k, ci, o] for ci in range(cin))
        y[t, bb, o] = acc
    return y


TBC_CASES = [draw_tbc(i) for i in range(N_TBC)]
TBC_IDS = [tbc_id(c) for c in TBC_CASES]


def test_the_tbc_draw_covers_k_past_t_and_every_pad():
    assert {c["pad"] for c in TBC_CASES} == {0, 1, 2, 3}
    assert any(c["K"] > c["T"] for c in TBC_CASES) and any(c["t_out"] < c["T"] for c in TBC_CASES)


@pytest.mark.parametrize("c", TBC_CASES, ids=TBC_IDS)
def test_tbc_reference(c):
    """Forward against the direct loop, the backward's adjointness and finite differences, and the
    whole backward against the general reference as a 1D convolution (x -> (B, Cin, T),
    w -> (Cout, Cin, K))."""
    x, w, b, gy = tbc_tensors(c)
    what = tbc_id(c)
    y = conv_tbc_forward(x, w, b, c["pad"])
    direct = direct_tbc(x, w, b, c["pad"])
    assert y.shape == direct.shape, f"{what}: output shape {y.shape} != {direct.shape}"
    np.testing.assert_allclose(y, direct, rtol=1e-12, atol=1e-12, err_msg=what)

    dx, dw, db = conv_tbc_backward(gy, x, w, c["pad"])
    lhs = float(np.sum(y * gy))
    scale = float(np.sum(conv_tbc_forward(np.abs(x), np.abs(w), np.abs(b), c["pad"]) * np.abs(gy)))
    for name, rhs in (("gradInput", np.sum(x * dx) + b @ db), ("gradWeight", np.sum(w * dw) + b @ db)):
        assert abs(lhs - rhs) <= ADJOINT_RTOL * scale, f"{what}: <y, g> = {lhs!r} but via {name} {rhs!r}"

    rng = np.random.default_rng([c["seed"], 0xfd])
    named = {"input": x, "weight": w, "bias": b}
    grads = {"input": dx, "weight": dw, "bias": db}
    for name, t in named.items():
        for flat in rng.choice(t.size, min(3, t.size), replace=False):
            j = np.unravel_index(int(flat), t.shape)
            vals = []
            for sign in (1, -1):
                moved = {n: a.copy() for n, a in named.items()}
                moved[name][j] += sign * FD_STEP
                vals.append(float(np.sum(conv_tbc_forward(moved["input"], moved["weight"], moved["bias"],
                                                          c["pad"]) * gy)))
            fd = (vals[0] - vals[1]) / (2 * FD_STEP)
            assert abs(fd - grads[name][j]) <= FD_RTOL * (scale + 1), \
                f"{what}: d loss / d {name}{j}: finite difference {fd!r}, reference {grads[name][j]!r}"

    gx1, gw1, gb1 = conv_backward(gy.transpose(1, 2, 0), x.transpose(1, 2, 0), w.transpose(2, 1, 0),
                                  [1], [c["pad"]], [1])
    np.testing.assert_allclose(dx, gx1.transpose(2, 0, 1), rtol=1e-12, atol=1e-12, err_msg=what)
    np.testing.assert_allclose(dw, gw1.transpose(2, 1, 0), rtol=1e-12, atol=1e-12, err_msg=what)
    np.testing.assert_allclose(db, gb1, rtol=1e-12, atol=1e-12, err_msg=what)
