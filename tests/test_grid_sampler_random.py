"""aclnnGridSampler2DBackward over its whole valid parameter space, drawn at random (seeded), on
every chip profile whose series has the operator: dtype (each the series lists), interpolation
(bicubic on A2 only), padding, alignCorners, outputMask, batch, channels on both sides of the
vector core's channel chunk, spatial sizes down to 1, grids inside, on and far outside the image,
and non-contiguous views of every input and output. Each call is checked against the float64
formula reference (tests/grid_sampler_reference.py) and, where torch is importable, against
torch.ops.aten.grid_sampler_2d_backward run in float64 (the two oracles are also checked against
each other). Outputs given as views must keep the bytes around them.

    GRID_RANDOM_CASES=600 python -m pytest tests/test_grid_sampler_random.py -q   # a longer hunt

Grid values whose float64 source coordinate lies within 2e-3 of a place where the answer jumps
(an integer for bilinear's corners and its border clip, k + 0.5 for nearest's rounding), but not
exactly on it, are drawn again: the kernel holds coordinates in FP32 (DOUBLE: float64) and may land on the other side of
such a place; the fixed tests in test_grid_sampler_2d_backward.py cover exact borders and pixels.
"""
from __future__ import annotations

import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import simulator
from simulator.profile import load_profile

from grid_sampler_reference import grid_sampler_2d_backward_ref, source_index, unnormalize
from test_grid_sampler_2d_backward import violations

OP = "GridSampler2DBackward"
N_CASES = int(os.environ.get("GRID_RANDOM_CASES", "48"))
DTYPES = {"FLOAT": np.dtype(np.float32), "FLOAT16": np.dtype(np.float16),
          "BF16": np.dtype(ml_dtypes.bfloat16), "DOUBLE": np.dtype(np.float64)}


def _chips() -> list[tuple[str, tuple[str, ...], tuple[int, ...]]]:
    """(soc, dtypes, interpolation modes) for every profile whose series has the operator."""
    out = []
    for path in sorted((Path(simulator.__file__).parent.parent / "devices").glob("Ascend*.yaml")):
        prof = load_profile(path.stem)
        support = prof.operators.get(OP)
        if support is None:
            continue
        modes = support.options.get("interpolation_modes", [0, 1])
        modes = (modes,) if isinstance(modes, int) else tuple(modes)
        out.append((path.stem, tuple(support.dtypes), modes))
    return out


CHIPS = _chips()


def _grid_values(rng, n, size, interp, pad, align, dtype, far: float) -> np.ndarray:
    """n grid values (one axis) in the dtype, most within [-1.3, 1.3], some out to +-far, none
    within 2e-3 of a discontinuity of the answer (see the module's docstring)."""
    out = np.empty(0, dtype)
    while out.size < n:
        v = rng.uniform(-1.3, 1.3, 2 * n + 8)
        outside = rng.random(v.size) < 0.15
        v[outside] = rng.uniform(-far, far, int(outside.sum()))
        v = v.astype(dtype)
        v64 = v.astype(np.float64)
        if interp == 2:                       # bicubic: taps are padded one by one
            c, _ = unnormalize(v64, size, align)
            step = 1.0
        else:
            c, _ = source_index(v64, size, pad, align)
            step = 0.5 if interp == 1 else 1.0
            if interp == 0:                   # bilinear: the clip and reflection kinks too
                raw, _ = unnormalize(v64, size, align)
                near = np.abs(raw - np.round(raw * 2) / 2)
                c = np.where((near > 0) & (near < 2e-3), np.nan, c)
        phase = (c / step) % 1.0 if interp != 1 else (c - 0.5) % 1.0
        near = np.minimum(phase, 1 - phase)
        # exactly on such a place is kept: there (clipped, or a coordinate exact in every
        # precision, as for a size-1 dimension) the kernel computes the same coordinate
        ok = np.isfinite(c) & ((near == 0) | (near > 2e-3))
        out = np.concatenate([out, v[ok]])
    return out[:n]


def _view(rng, shape, data, kind):
    """A view of `data` (shape `shape`): contiguous, stored in another dimension order, or a
    strided slice of a larger array. Returns (view, the array that owns the storage)."""
    if kind == "contiguous":
        v = np.ascontiguousarray(data)
        return v, v
    if kind == "permuted":
        perm = rng.permutation(4)
        base = np.ascontiguousarray(data.transpose(perm))
        return base.transpose(np.argsort(perm)), base
    base = np.zeros(tuple(d * 2 + 1 for d in shape), data.dtype)
    sl = tuple(slice(1, 1 + 2 * d, 2) if rng.random() < 0.5 else slice(0, d) for d in shape)
    base[sl] = data
    return base[sl], base


def draw(i: int) -> dict:
    rng = np.random.default_rng([2026, 11, 26, i])
    soc, dtypes, modes = CHIPS[int(rng.integers(len(CHIPS)))]
    dname = dtypes[int(rng.integers(len(dtypes)))]
    interp = int(modes[int(rng.integers(len(modes)))])
    c_choices = (1, 2, 3, 5, 8, 16, 17, 33, 64, 70, 129)
    large = rng.random() < 0.1               # several tiles per core, several channel chunks
    c = dict(
        i=i, soc=soc, dtype=dname, interp=interp, pad=int(rng.integers(3)), align=bool(rng.integers(2)),
        mask=[(True, True), (True, False), (False, True)][int(rng.integers(3))],
        N=int(rng.integers(1, 4)), C=int(c_choices[int(rng.integers(len(c_choices)))]),
        H=int(rng.integers(1, 10)), W=int(rng.integers(1, 10)),
        Ho=int(rng.integers(1, 9)), Wo=int(rng.integers(1, 12)),
        far=float([1.3, 3.0, 40.0][int(rng.integers(3))]),
        views=[("contiguous", "permuted", "strided")[int(k)] for k in rng.choice(3, 5, p=[0.6, 0.2, 0.2])],
        seed=int(rng.integers(2 ** 31)))
    if large:
        c.update(C=int(rng.choice((200, 300, 520))), Ho=int(rng.integers(8, 33)), Wo=int(rng.integers(8, 33)),
                 H=int(rng.integers(4, 20)), W=int(rng.integers(4, 20)))
    return c


def _id(c: dict) -> str:
    return (f"{c['i']}-{c['soc']}-{c['dtype']}-i{c['interp']}p{c['pad']}{'a' if c['align'] else ''}"
            f"-m{int(c['mask'][0])}{int(c['mask'][1])}-{c['N']}x{c['C']}x{c['H']}x{c['W']}-"
            f"{c['Ho']}x{c['Wo']}")


CASES = [draw(i) for i in range(N_CASES)]


def _inputs(c: dict):
    """(rng, gradOutput, input, grid) of case c; rng goes on to draw the views."""
    rng = np.random.default_rng(c["seed"])
    dt = DTYPES[c["dtype"]]
    N, C, H, W, Ho, Wo = c["N"], c["C"], c["H"], c["W"], c["Ho"], c["Wo"]
    go = rng.standard_normal((N, C, Ho, Wo)).astype(dt)
    x = rng.standard_normal((N, C, H, W)).astype(dt)
    gx = _grid_values(rng, N * Ho * Wo, W, c["interp"], c["pad"], c["align"], dt, c["far"])
    gy = _grid_values(rng, N * Ho * Wo, H, c["interp"], c["pad"], c["align"], dt, c["far"])
    return rng, go, x, np.stack([gx, gy], -1).reshape(N, Ho, Wo, 2)


_OUTPUTS: dict[int, dict] = {}           # case -> the simulator's outputs, for the torch test
_FAILED: dict[int, str] = {}             # case -> why the reference test failed


def run_call(c: dict) -> dict:
    """Run case c and check it against the float64 reference; returns the outputs by name."""
    rng, go, x, g = _inputs(c)
    dt = DTYPES[c["dtype"]]
    interp, pad, align, mask = c["interp"], c["pad"], c["align"], c["mask"]
    go_v, _ = _view(rng, go.shape, go, c["views"][0])
    x_v, _ = _view(rng, x.shape, x, c["views"][1])
    g_v, _ = _view(rng, g.shape, g, c["views"][2])
    outs, bases = {}, {}
    for k, (name, shape) in enumerate((("inputGrad", x.shape), ("gridGrad", g.shape))):
        if mask[k]:
            v, base = _view(rng, shape, np.full(shape, 7, dt), c["views"][3 + k])
            base[...] = 7                    # the bytes around a view stay 7
            outs[name], bases[name] = v, base
    kept = [a.copy() for a in (go_v, x_v, g_v)]
    r = simulator.run(OP, soc=c["soc"], mode="functional", gradOutput=go_v, input=x_v, grid=g_v,
                      interpolationMode=interp, paddingMode=pad, alignCorners=align,
                      outputMask=list(mask), **outs)
    what = _id(c)
    for before, after in zip(kept, (go_v, x_v, g_v)):
        assert np.array_equal(before, after, equal_nan=True), f"{what}: an input was modified"
    R = grid_sampler_2d_backward_ref(go, x, g, interp, pad, align)
    for name in outs:
        got = r.outputs[name]
        assert got is outs[name], f"{what}: {name} is not the array passed in"
        bad = violations(got, R, name, interp)
        if bad.any():
            j = tuple(np.argwhere(bad)[0])
            pytest.fail(f"{what}: {name}: {int(bad.sum())} of {bad.size} outside the tolerance of the "
                        f"float64 reference; first at {j}: got {got[j]!r}, ref {R[name][j]!r}")
        touched = np.zeros(bases[name].nbytes, bool)
        offs = _element_offsets(got, bases[name])
        touched[offs] = True
        rest = np.frombuffer(bases[name].tobytes(), np.uint8)
        seven = np.frombuffer(np.full(bases[name].shape, 7, dt).tobytes(), np.uint8)
        assert np.array_equal(rest[~touched], seven[~touched]), f"{what}: bytes around {name} changed"
    _OUTPUTS[c["i"]] = {name: np.array(r.outputs[name]) for name in outs}
    return _OUTPUTS[c["i"]]


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_random_call(c):
    try:
        run_call(c)
    except BaseException as e:
        _FAILED[c["i"]] = str(e).splitlines()[0] if str(e) else repr(e)
        raise


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_random_call_vs_torch(c):
    """torch.ops.aten.grid_sampler_2d_backward in float64 against the float64 reference (the two
    oracles agree to 1e-9 of the reference's scale), then against the simulator's outputs with the
    reference test's tolerance. A case that failed against the reference fails here too."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    _, go, x, g = _inputs(c)
    what = _id(c)
    interp, pad, align = c["interp"], c["pad"], c["align"]
    R = grid_sampler_2d_backward_ref(go, x, g, interp, pad, align)
    tgi, tgg = torch.ops.aten.grid_sampler_2d_backward(
        torch.from_numpy(go.astype(np.float64)), torch.from_numpy(x.astype(np.float64)),
        torch.from_numpy(g.astype(np.float64)), interp, pad, align, [True, True])
    if c["i"] in _FAILED:
        pytest.fail(f"{what}: not compared with torch; it failed against the reference: {_FAILED[c['i']]}",
                    pytrace=False)
    outs = _OUTPUTS.get(c["i"]) or run_call(c)
    for name, t in (("inputGrad", tgi), ("gridGrad", tgg)):
        t = t.numpy()
        scale = R[name + "_scale"] + R[name + "_cscale"] + 1.0
        assert np.all(np.abs(t - R[name]) <= 1e-9 * scale), f"{what}: the two oracles disagree on {name}"
        if name in outs:
            bad = violations(outs[name], {name: t, name + "_scale": R[name + "_scale"],
                                          name + "_cscale": R[name + "_cscale"]}, name, interp)
            assert not bad.any(), f"{what}: {name} outside the tolerance of torch's float64 result"


def _element_offsets(view: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Byte offsets in `base` of every byte of every element of `view`."""
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    idx = np.indices(view.shape).reshape(view.ndim, -1)
    first = start + (np.array(view.strides)[:, None] * idx).sum(0)
    return (first[:, None] + np.arange(view.itemsize)).ravel()


def test_every_chip_with_the_operator_is_drawn():
    """The draw covers every chip and dtype the profiles list for the operator (at the default
    count), so a new chip profile is exercised without editing this file."""
    if N_CASES < 48:
        pytest.skip("fewer cases than the default")
    drawn = {(c["soc"], c["dtype"]) for c in CASES}
    socs = {soc for soc, _, _ in CHIPS}
    assert {s for s, _ in drawn} == socs
    assert {d for _, d in drawn} == {d for _, ds, _ in CHIPS for d in ds}
