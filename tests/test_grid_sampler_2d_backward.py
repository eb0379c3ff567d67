"""aclnnGridSampler2DBackward against the float64 reference in grid_sampler_reference.py (written
from the formulas, checked here against finite differences of a float64 forward grid_sample):
every interpolation x padding x alignCorners x outputMask combination, each dtype on each series
that has it, the edge cases (coordinates exactly on a border, reflection with several flips,
alignCorners with size-1 dimensions, nearest exactly at .5, grid points far outside), channel
chunks, non-contiguous views, empty tensors, timing-only == functional cycles, inputs left
untouched, the seed's example, every parameter check with its status code, and (if torch is
importable) torch.ops.aten.grid_sampler_2d_backward.

Tolerances: an element passes when
    |got - ref| <= rtol * scale + ceps * cscale + orr * |ref| + floor
where (see grid_sampler_reference) scale is the sum of |terms| that make up the element and cscale
the same sum with each weight replaced by |unnormalised coordinate| + 1.
* FLOAT: the kernels compute in fp32; a chain of ~10 roundings per term and a tree sum over
  channels -> rtol 4e-6 (measured worst ~1.7e-6); the unnormalised coordinate itself is held in
  fp32 (rounded by 2^-24 relative), which moves a weight such as 1 - tx by that much even where
  the weight is tiny -> ceps 2^-22 (4 ulp of the coordinate).
* FLOAT16 / BF16: computed in FP32 as above (the reference takes the already-rounded inputs),
  then rounded once to the output dtype: orr 2^-10 (FLOAT16, one ulp) / 2^-7 (BF16), plus the
  fp16 subnormal spacing 2^-24 as floor.
* DOUBLE: the same kernels in float64: rtol 1e-13, ceps 2^-50.
* Bicubic: ceps 64 u of the compute dtype (2^-18 in FP32), for the cancellation in the outer
  taps' cubic coefficients (BICUBIC_CEPS below says why and how it was measured).
"""
from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np
import pytest

import simulator
from simulator import acl, aclnn
from simulator.enums import AclnnError, aclDataType, aclFormat, aclrtMemcpyKind

from grid_sampler_reference import (cubic_coeffs, grid_sampler_2d_backward_ref, pad_tap,
                                    source_index, unnormalize)

OP = "GridSampler2DBackward"
F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
BF16 = np.dtype(ml_dtypes.bfloat16)
NULLPTR, INVALID = 161001, 161002
A2, TRAINING = "Ascend910B1", "Ascend910A"
# SPEC section 4 (and CANN's code for DOUBLE): what each series takes
SERIES_DTYPES = {TRAINING: (F32, F16), A2: (F32, F16, BF16, F64), "Ascend910B4": (F32, F16, BF16, F64)}
SERIES_MODES = {TRAINING: (0, 1), A2: (0, 1, 2), "Ascend910B4": (0, 1, 2)}
TOL = {F32: (4e-6, 2.0 ** -22, 0.0, 1e-30), F16: (4e-6, 2.0 ** -22, 2.0 ** -10, 2.0 ** -24),
       BF16: (4e-6, 2.0 ** -22, 2.0 ** -7, 1e-30), F64: (1e-13, 2.0 ** -50, 0.0, 1e-300)}
ACL_DT = {F32: aclDataType.ACL_FLOAT, F16: aclDataType.ACL_FLOAT16, BF16: aclDataType.ACL_BF16,
          F64: aclDataType.ACL_DOUBLE, np.dtype(np.int32): aclDataType.ACL_INT32}


def rng_for(*parts) -> np.random.Generator:
    return np.random.default_rng(list(repr(parts).encode()))


def case(rng, N=2, C=3, H=5, W=7, Ho=4, Wo=6, dtype=F32, spread=1.3):
    go = rng.standard_normal((N, C, Ho, Wo)).astype(dtype)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    g = rng.uniform(-spread, spread, (N, Ho, Wo, 2)).astype(dtype)
    return go, x, g


def run(go, x, g, interp=0, pad=0, align=False, mask=(True, True), soc=A2, mode="functional", **kw):
    return simulator.run(OP, soc=soc, mode=mode, gradOutput=go, input=x, grid=g,
                         interpolationMode=interp, paddingMode=pad, alignCorners=align,
                         outputMask=None if mask is None else list(mask), **kw)


# Bicubic's outer-tap coefficients, ((A x - 5A) x + 8A) x - 4A at x = 1 + t or 2 - t (PyTorch's
# formula, and the kernel's), cancel intermediates of up to ~7.5 down to values near 0: evaluated
# in FP32 they are off by up to 20 units of 2^-24 absolute (measured over 2 M values of t; the
# inner taps by under 3), so a weight cx * cy is off by up to ~46 u however small it is. torch's
# own FP32 result of test_grid_sampler_random's case 2900 missed the 4 u coordinate term by that.
BICUBIC_CEPS = {F64: 64 * 2.0 ** -53}


def violations(got, R, name, interp=None):
    got = np.asarray(got)
    rtol, ceps, orr, floor = TOL[np.dtype(got.dtype)]
    if interp == 2:
        ceps = max(ceps, BICUBIC_CEPS.get(np.dtype(got.dtype), 64 * 2.0 ** -24))
    ref = R[name]
    bound = rtol * R[name + "_scale"] + ceps * R[name + "_cscale"] + orr * np.abs(ref) + floor
    with np.errstate(invalid="ignore"):
        return ~(np.abs(got.astype(np.float64) - ref) <= bound)


def assert_close(r, go, x, g, interp, pad, align, mask=(True, True), what=""):
    R = grid_sampler_2d_backward_ref(go, x, g, interp, pad, align)
    for on, name in zip(mask, ("inputGrad", "gridGrad")):
        if not on:
            continue
        got = r.outputs[name]
        assert got.shape == R[name].shape and got.dtype == x.dtype, f"{what} {name}"
        bad = violations(got, R, name, interp)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            pytest.fail(f"{what}: {name}: {int(bad.sum())} of {bad.size} out of tolerance; first at "
                        f"{i}: got {got[i]!r}, ref {R[name][i]!r}, scale {R[name + '_scale'][i]:.3g}")


# ---- the reference against finite differences of a forward grid_sample --------------------------
def forward(x, g, interp, pad, align):
    """grid_sample in float64, from the same formulas (for the finite-difference checks)."""
    N, C, H, W = x.shape
    out = np.zeros((N, C) + g.shape[1:3])
    for n in range(N):
        gx, gy = g[n, ..., 0].reshape(-1), g[n, ..., 1].reshape(-1)
        img = x[n].reshape(C, -1)

        def val(yy, xx):
            ok = (xx >= 0) & (xx <= W - 1) & (yy >= 0) & (yy <= H - 1)
            idx = (np.where(ok, yy, 0) * W + np.where(ok, xx, 0)).astype(int)
            return img[:, idx] * ok
        if interp == 2:
            ix, _ = unnormalize(gx, W, align)
            iy, _ = unnormalize(gy, H, align)
            x0, y0 = np.floor(ix), np.floor(iy)
            cx, _ = cubic_coeffs(ix - x0)
            cy, _ = cubic_coeffs(iy - y0)
            o = sum(cx[i] * cy[j] * val(pad_tap(y0 - 1 + j, H, pad, align), pad_tap(x0 - 1 + i, W, pad, align))
                    for i in range(4) for j in range(4))
        else:
            ix, _ = source_index(gx, W, pad, align)
            iy, _ = source_index(gy, H, pad, align)
            if interp == 1:
                o = val(np.rint(iy), np.rint(ix))
            else:
                x0, y0 = np.floor(ix), np.floor(iy)
                tx, ty = ix - x0, iy - y0
                o = ((1 - tx) * (1 - ty) * val(y0, x0) + tx * (1 - ty) * val(y0, x0 + 1)
                     + (1 - tx) * ty * val(y0 + 1, x0) + tx * ty * val(y0 + 1, x0 + 1))
        out[n] = o.reshape((C,) + g.shape[1:3])
    return out


@pytest.mark.parametrize("interp,pad,align", [(i, p, a) for i in (0, 2) for p in (0, 1, 2) for a in (False, True)]
                         + [(1, p, a) for p in (0, 1, 2) for a in (False, True)])
def test_reference_matches_finite_differences(interp, pad, align):
    rng = rng_for("fd", interp, pad, align)
    go, x, g = (a.astype(np.float64) for a in case(rng, N=1, C=2, H=4, W=5, Ho=2, Wo=3, spread=1.6))
    R = grid_sampler_2d_backward_ref(go, x, g, interp, pad, align)
    d = rng.standard_normal(x.shape)        # the loss is linear in the input: exact
    np.testing.assert_allclose((R["inputGrad"] * d).sum(), (go * forward(d, g, interp, pad, align)).sum(),
                               rtol=1e-12, atol=1e-12)
    h = 1e-6
    fd = np.zeros_like(g)
    for i in np.ndindex(g.shape):
        gp, gm = g.copy(), g.copy()
        gp[i] += h
        gm[i] -= h
        fd[i] = (go * (forward(x, gp, interp, pad, align) - forward(x, gm, interp, pad, align))).sum() / (2 * h)
    np.testing.assert_allclose(R["gridGrad"], fd, rtol=1e-5, atol=1e-6)


def test_tolerance_rejects_a_small_error():
    rng = rng_for("tol")
    go, x, g = case(rng)
    R = grid_sampler_2d_backward_ref(go, x, g, 0, 0, False)
    wrong = (R["inputGrad"] * (1 + 1e-4)).astype(np.float32)
    assert violations(wrong, R, "inputGrad").any()
    wrong = (R["gridGrad"] + 1e-4 * R["gridGrad_scale"]).astype(np.float32)
    assert violations(wrong, R, "gridGrad").any()


# ---- every mode x padding x alignCorners x outputMask ---------------------------------------------
@pytest.mark.parametrize("mask", [(True, True), (True, False), (False, True)], ids=["both", "input", "grid"])
@pytest.mark.parametrize("align", [False, True], ids=["noalign", "align"])
@pytest.mark.parametrize("pad", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("interp", [0, 1, 2], ids=["bilinear", "nearest", "bicubic"])
def test_all_combinations(interp, pad, align, mask):
    rng = rng_for("combo", interp, pad, align)
    go, x, g = case(rng, spread=1.4)
    r = run(go, x, g, interp, pad, align, mask)
    assert set(r.outputs) == {n for on, n in zip(mask, ("inputGrad", "gridGrad")) if on}
    assert_close(r, go, x, g, interp, pad, align, mask, f"{interp}/{pad}/{align}/{mask}")


# ---- dtypes per series ---------------------------------------------------------------------------
@pytest.mark.parametrize("soc,dtype,interp", [(s, d, i) for s in SERIES_DTYPES for d in SERIES_DTYPES[s]
                                              for i in SERIES_MODES[s] if s != "Ascend910B4" or d == F16],
                         ids=lambda v: v if isinstance(v, str) else getattr(v, "name", str(v)))
def test_dtypes_per_series(soc, dtype, interp):
    rng = rng_for("dtype", soc, dtype.name, interp)
    go, x, g = case(rng, N=2, C=9, H=6, W=5, Ho=5, Wo=7, dtype=dtype, spread=1.2)
    r = run(go, x, g, interp, 2, False, soc=soc)
    assert_close(r, go, x, g, interp, 2, False, what=f"{soc} {dtype}")


# ---- edge cases ------------------------------------------------------------------------------------
def robust_values(rng, n, lo, hi, sizes, pad, align):
    """n grid values with lo <= |v| <= hi whose source coordinates (for every size) stay 1e-3
    away from the places where a coordinate rounding in FP32 changes the answer discontinuously
    (integers: bilinear's corners; k + 0.5: nearest's rounding)."""
    out = []
    while len(out) < n:
        v = np.float32(rng.uniform(lo, hi) * rng.choice([-1, 1]))
        ok = True
        for size in sizes:
            c, _ = source_index(np.array([np.float64(v)]), size, pad, align)
            f = (c[0] * 2) % 1.0
            ok &= min(f, 1 - f) > 2e-3
        if ok:
            out.append(v)
    return np.array(out, np.float32)


def exact_grid(values_x, values_y):
    """A (1, len(y), len(x), 2) grid of every (x, y) pair."""
    gx, gy = np.meshgrid(values_x, values_y)
    return np.stack([gx, gy], -1)[None].astype(np.float32)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("interp", [0, 2])
def test_coordinates_exactly_on_borders_and_pixels(interp, pad, align):
    """x, y hitting -0.5, 0, W-1, W-0.5 and interior pixel centres exactly (dyadic values, exact
    in fp32 and in the reference): the gradient there is the one-sided value PyTorch takes."""
    H, W = 5, 8
    xs = np.array([-1.0, -0.875, -0.75, 0.0, 0.75, 0.875, 1.0, 0.25])   # W=8: -0.5, 0, 0.5, 3.5, 6.5, 7, 7.5, 4.5
    ys = np.array([-1.0, -0.8, 0.0, 0.8, 1.0, 0.5]) if not align else np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    if align:
        xs = np.array([-1.0, -5 / 7, 0.0, 3 / 7, 1.0, 1 / 7]).astype(np.float32)
    g = exact_grid(xs, ys)
    rng = rng_for("border", interp, pad, align)
    x = rng.standard_normal((1, 3, H, W)).astype(np.float32)
    go = rng.standard_normal((1, 3) + g.shape[1:3]).astype(np.float32)
    r = run(go, x, g, interp, pad, align)
    assert_close(r, go, x, g, interp, pad, align, what="borders")


def test_border_clip_gradient_is_zero_at_the_border():
    """Border padding: a point exactly at 0 or W-1 (after unnormalising) takes no grid gradient in
    that coordinate (PyTorch's clip_coordinates_set_grad: <= 0 and >= W-1 give 0)."""
    g = exact_grid([-1.0, 1.0], [0.0])              # align: x' = 0 and x' = W-1
    rng = rng_for("clip0")
    x = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    go = rng.standard_normal((1, 2, 1, 2)).astype(np.float32)
    r = run(go, x, g, 0, 1, True)
    assert np.all(r.gridGrad[..., 0] == 0)
    assert_close(r, go, x, g, 0, 1, True)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("interp", [0, 1, 2])
def test_reflection_with_several_flips(interp, align):
    rng = rng_for("flips", interp, align)
    x = rng.standard_normal((1, 4, 6, 5)).astype(np.float32)
    vals = robust_values(rng, 9, 2.0, 12.0, (5, 6), 2, align)      # 2 to 12 widths out: 4-24 flips
    g = exact_grid(vals, vals[::-1])
    go = rng.standard_normal((1, 4) + g.shape[1:3]).astype(np.float32)
    for pad in (2,):
        r = run(go, x, g, interp, pad, align)
        assert_close(r, go, x, g, interp, pad, align, what="flips")
        if interp != 1:
            assert np.abs(r.gridGrad).max() > 0


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("interp", [0, 1, 2])
@pytest.mark.parametrize("hw", [(1, 1), (1, 6), (5, 1)], ids=["1x1", "1xW", "Hx1"])
def test_size_one_dimensions(hw, interp, pad, align):
    """alignCorners with a size-1 dimension: (W - 1) / 2 = 0 unnormalises everything to 0 with a
    zero gradient; reflection's span is 0 there."""
    H, W = hw
    rng = rng_for("one", hw, interp, pad, align)
    go, x, g = case(rng, N=1, C=3, H=H, W=W, Ho=3, Wo=4, spread=1.5)
    r = run(go, x, g, interp, pad, align)
    assert_close(r, go, x, g, interp, pad, align, what=f"{hw}")
    if align and interp != 2:
        if W == 1:
            assert np.all(r.gridGrad[..., 0] == 0)
        if H == 1:
            assert np.all(r.gridGrad[..., 1] == 0)


@pytest.mark.parametrize("pad", [0, 1, 2])
def test_nearest_rounds_half_to_even(pad):
    """Unnormalised coordinates exactly at k + 0.5 go to the even neighbour."""
    H, W = 4, 8
    ks = np.arange(-1, 8)
    xs = (ks + 1.0) / 4 - 1                         # ((x + 1) * 8 - 1) / 2 = k + 0.5 exactly
    g = exact_grid(xs, [-0.75, -0.25])              # y' = 0.0 and 1.0 for H = 4
    x = np.zeros((1, 1, H, W), np.float32)
    go = np.arange(1, 1 + g.shape[1] * g.shape[2], dtype=np.float32).reshape(1, 1, *g.shape[1:3])
    r = run(go, x, g, 1, pad, False)
    assert_close(r, go, x, g, 1, pad, False)
    if pad == 0:
        row = r.inputGrad[0, 0, 0]
        # k + 0.5 for k = -1..7 -> -0 (even 0), 2, 2, 4, 4, 6, 6, 8 (outside), 8 (outside)
        expect = np.zeros(W)
        for k, v in zip(ks, go[0, 0, 0]):
            t = int(np.rint(k + 0.5))
            if 0 <= t < W:
                expect[t] += v
        np.testing.assert_array_equal(row, expect)
        assert row[1] == row[3] == row[5] == row[7] == 0
    assert np.all(r.gridGrad == 0)


@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("interp", [0, 1, 2])
def test_grid_points_far_outside(interp, pad):
    vals = [-1e30, -1e6, -1000.0, -37.0, -1.5, 1.5, 37.0, 1000.0, 1e6, 1e30, 0.3]
    if pad == 2 or (interp == 2 and pad != 0):
        vals = [-1000.0, -37.0, -1.5, 1.5, 37.0, 1000.0, 0.3]   # fp32 reflection keeps ~3 digits at 1e3
    g = exact_grid(vals, vals[::-1])
    rng = rng_for("far", interp, pad)
    x = rng.standard_normal((1, 3, 5, 6)).astype(np.float32)
    go = rng.standard_normal((1, 3) + g.shape[1:3]).astype(np.float32)
    r = run(go, x, g, interp, pad, False)
    assert_close(r, go, x, g, interp, pad, False, what="far")
    assert np.all(np.isfinite(r.inputGrad)) and np.all(np.isfinite(r.gridGrad))


def test_channel_chunks_and_tail_tiles():
    """More channels than fit UB at once (the kernel loops over channel chunks, each gather
    moving a chunk) and a point count that leaves a partial last tile."""
    rng = rng_for("chunks")
    go, x, g = case(rng, N=1, C=300, H=4, W=6, Ho=3, Wo=23, spread=1.2)
    for interp, pad in ((0, 0), (2, 1)):
        r = run(go, x, g, interp, pad, True)
        assert r.report.tiling["channelChunks"] > 1
        assert_close(r, go, x, g, interp, pad, True, what=f"chunks {interp}")


def test_non_contiguous_inputs_and_outputs():
    rng = rng_for("views")
    N, C, H, W, Ho, Wo = 2, 5, 6, 7, 4, 3
    x = rng.standard_normal((N, H, W, C)).astype(np.float32).transpose(0, 3, 1, 2)    # NHWC storage
    go = rng.standard_normal((N, C, Ho, 2 * Wo)).astype(np.float32)[..., ::2]          # strided
    g = rng.uniform(-1.2, 1.2, (N, 2, Ho, Wo)).astype(np.float32).transpose(0, 2, 3, 1)
    gi_base = np.full((N, C, H, W + 3), 7.0, np.float32)
    gg_base = np.full((N, Ho, Wo, 4), 7.0, np.float32)
    gi, gg = gi_base[..., 1:W + 1], gg_base[..., 1:3]
    r = run(go, x, g, 0, 1, False, inputGrad=gi, gridGrad=gg)
    assert r.outputs["inputGrad"] is gi
    assert_close(r, go, x, g, 0, 1, False, what="views")
    assert np.all(gi_base[..., 0] == 7) and np.all(gi_base[..., W + 1:] == 7)
    assert np.all(gg_base[..., 0] == 7) and np.all(gg_base[..., 3] == 7)
    names = [w["purpose"] for w in r.report.workspace_breakdown]
    assert any("contiguous copy of input" in n for n in names)
    assert any("strided write-back" in n for n in names)


@pytest.mark.parametrize("interp", [0, 1])
def test_empty_tensors(interp):
    rng = rng_for("empty")
    go, x, g = case(rng, N=2, C=0, H=3, W=4, Ho=2, Wo=2)      # no channels: gridGrad is zero
    gg = np.full(g.shape, 5.0, np.float32)
    r = run(go, x, g, interp, 0, False, gridGrad=gg)
    assert np.all(r.gridGrad == 0) and r.inputGrad.size == 0
    go, x, g = case(rng, N=2, C=3, H=3, W=4, Ho=0, Wo=2)      # no points: inputGrad is zero
    gi = np.full(x.shape, 5.0, np.float32)
    r = run(go, x, g, interp, 0, False, inputGrad=gi)
    assert np.all(r.inputGrad == 0) and r.gridGrad.size == 0
    go, x, g = case(rng, N=0, C=3, H=3, W=4, Ho=2, Wo=2)
    r = run(go, x, g, interp, 0, False)
    assert r.workspace_size == 0 and r.report.launches == []


def test_nearest_grid_gradient_only_is_zero_fill():
    rng = rng_for("nearest-gg")
    go, x, g = case(rng)
    gg = np.full(g.shape, 3.0, np.float32)
    r = run(go, x, g, 1, 0, False, mask=(False, True), gridGrad=gg)
    assert np.all(r.gridGrad == 0)
    assert [l["name"] for l in r.report.launches] == ["InitOutput(gridGrad)"]


# ---- timing-only mode, report, trace ---------------------------------------------------------------
@pytest.mark.parametrize("soc,dtype,interp,pad,C", [(A2, F32, 0, 0, 64), (A2, F16, 2, 2, 5), (A2, BF16, 1, 1, 9),
                                                   (A2, F64, 0, 2, 3), (TRAINING, F16, 0, 1, 17),
                                                   (A2, F32, 0, 0, 300)])
def test_timing_only_gives_the_same_cycles(soc, dtype, interp, pad, C):
    rng = rng_for("timing", soc, dtype.name, interp, C)
    go, x, g = case(rng, N=2, C=C, H=6, W=7, Ho=5, Wo=9, dtype=dtype)
    f = run(go, x, g, interp, pad, False, soc=soc)
    t = run(go, x, g, interp, pad, False, soc=soc, mode="timing")
    assert f.cycles == t.cycles
    assert f.report.instructions == t.report.instructions
    assert t.report.mode == "timing"


def test_gathers_and_atomics_show_in_report_and_trace():
    rng = rng_for("report")
    N, Ho, Wo = 2, 5, 9
    go, x, g = case(rng, N=N, C=16, H=6, W=7, Ho=Ho, Wo=Wo)
    r = run(go, x, g, 0, 0, False)
    rows = {row["instruction"]: row for row in r.report.instruction_rows()}
    assert rows["DataCopyPad[gather]"]["count"] == N * Ho * Wo * 2 == r.report.tiling["gathers"]
    assert rows["DataCopyPad[scatter]+AtomicAdd"]["count"] == N * Ho * Wo * 2
    assert rows["DataCopyPad[gather]"]["pipe"] == "PIPE_MTE2"
    assert rows["DataCopyPad[scatter]+AtomicAdd"]["pipe"] == "PIPE_MTE3"
    assert rows["DataCopyPad[gather]"]["mean_cycles"] > 100          # small GM reads pay the latency
    names = {e["name"] for e in r.trace.events() if e.get("ph") == "X"}
    assert {"DataCopyPad[gather]", "DataCopyPad[scatter]+AtomicAdd", "GridSampler2DGrad",
            "TransposeToNHWC(input)", "InitWorkspace(inputGrad accumulator)",
            "TransposeCast(inputGrad)"} <= names
    ws = {w["purpose"]: w["bytes"] for w in r.report.workspace_breakdown}
    acc = [b for p, b in ws.items() if "accumulator" in p]
    assert acc == [(N * 6 * 7 + 2) * 16 * 4]                        # NHWC FLOAT + 1 pad pixel each end
    assert r.report.workspace_bytes >= sum(ws.values())


def test_bicubic_is_a2_only_and_fp16_computes_in_fp32():
    rng = rng_for("series")
    go, x, g = case(rng, dtype=F16)
    with pytest.raises(AclnnError) as e:
        run(go, x, g, 2, 0, False, soc=TRAINING)
    assert e.value.status == INVALID
    r = run(go, x, g, 0, 0, False, soc=TRAINING)
    ops = {row["instruction"] for row in r.report.instruction_rows()}
    assert "Cast" in ops                                            # FP16 <-> FP32 as instructions
    assert r.report.tiling["computeDtype"] == "FLOAT"


# ---- the low-level ACL API: seed example, inputs untouched, null pointers --------------------------
@contextlib.contextmanager
def device(soc=A2):
    rt = acl.Runtime()
    with acl.use_runtime(rt):
        assert acl.aclInit(None, soc=soc) == 0
        assert acl.aclrtSetDevice(0) == 0
        yield rt


def put(arr, shape=None, strides=None, offset=0, dt=None):
    arr = np.ascontiguousarray(arr)
    ptr, ret = acl.aclrtMalloc(max(arr.nbytes, 1), 0)
    assert ret == 0
    if arr.nbytes:
        assert acl.aclrtMemcpy(ptr, arr.nbytes, arr, arr.nbytes, aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    shape = arr.shape if shape is None else shape
    if strides is None:
        strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    t = acl.aclCreateTensor(shape, ACL_DT[arr.dtype] if dt is None else dt, strides, offset,
                            aclFormat.ACL_FORMAT_ND, (arr.size,), ptr)
    return t, ptr, arr


def read(ptr, like):
    out = np.zeros_like(like)
    assert acl.aclrtMemcpy(out, out.nbytes, ptr, out.nbytes, aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    return out


def call(go, x, g, gi, gg, interp=0, pad=0, align=False, mask=(True, True)):
    m = None if mask is None else acl.aclCreateBoolArray(list(mask))
    return aclnn.aclnnGridSampler2DBackwardGetWorkspaceSize(go, x, g, interp, pad, align, m, gi, gg)


def test_seed_example_through_the_acl_api():
    """The seed document's example: gradOutput ones (1,1,3,3), input 1..40 (1,1,5,8), grid at the
    corners, edge midpoints and centre, bilinear, zeros, alignCorners false."""
    gor = np.ones((1, 1, 3, 3), np.float32)
    xr = np.arange(1, 41, dtype=np.float32).reshape(1, 1, 5, 8)
    gr = np.array([-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0, -1, 1, 0, 1, 1, 1], np.float32).reshape(1, 3, 3, 2)
    with device():
        stream, _ = acl.aclrtCreateStream()
        (go, _, _), (x, _, _), (g, _, _) = put(gor), put(xr), put(gr)
        gi, gi_ptr, gi_host = put(np.zeros((1, 1, 5, 8), np.float32))
        gg, gg_ptr, gg_host = put(np.zeros((1, 3, 3, 2), np.float32))
        ws_size, ex, ret = call(go, x, g, gi, gg)
        assert ret == 0
        ws = None
        if ws_size:
            ws, ret = acl.aclrtMalloc(ws_size, 0)
        assert aclnn.aclnnGridSampler2DBackward(ws, ws_size, ex, stream) == 0
        assert acl.aclrtSynchronizeStream(stream) == 0
        got_gi, got_gg = read(gi_ptr, gi_host), read(gg_ptr, gg_host)
    R = grid_sampler_2d_backward_ref(gor, xr, gr, 0, 0, False)
    np.testing.assert_allclose(got_gi, R["inputGrad"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got_gg, R["gridGrad"], rtol=1e-5, atol=1e-5)
    # by hand: (-1, -1) unnormalises to (-0.5, -0.5): a quarter of its gradient on pixel (0, 0)
    assert got_gi[0, 0, 0, 0] == 0.25
    assert got_gi.sum() == pytest.approx(0.25 + 0.5 + 0.25 + 0.5 + 1 + 0.5 + 0.25 + 0.5 + 0.25)


def test_inputs_are_not_modified():
    rng = rng_for("untouched")
    gor, xr, gr = case(rng, C=4)
    with device():
        stream, _ = acl.aclrtCreateStream()
        (go, gop, _), (x, xp, _), (g, gp, _) = put(gor), put(xr), put(gr)
        gi, _, _ = put(np.zeros(xr.shape, np.float32))
        gg, _, _ = put(np.zeros(gr.shape, np.float32))
        ws_size, ex, ret = call(go, x, g, gi, gg, 0, 2, True)
        assert ret == 0
        ws, _ = acl.aclrtMalloc(ws_size, 0)
        assert aclnn.aclnnGridSampler2DBackward(ws, ws_size, ex, stream) == 0
        assert acl.aclrtSynchronizeStream(stream) == 0
        assert np.array_equal(read(gop, gor), gor)
        assert np.array_equal(read(xp, xr), xr)
        assert np.array_equal(read(gp, gr), gr)


def test_null_output_mask_is_success_with_nothing_to_do():
    rng = rng_for("nullmask")
    gor, xr, gr = case(rng)
    with device():
        stream, _ = acl.aclrtCreateStream()
        (go, _, _), (x, _, _), (g, _, _) = put(gor), put(xr), put(gr)
        gi, gip, gih = put(np.full(xr.shape, 9.0, np.float32))
        for mask in (None, (False, False)):
            ws_size, ex, ret = call(go, x, g, gi, None, mask=mask)
            assert ret == 0 and ws_size == 0
            assert aclnn.aclnnGridSampler2DBackward(None, 0, ex, stream) == 0
            assert acl.aclrtSynchronizeStream(stream) == 0
            assert np.all(read(gip, gih) == 9.0)
        # nulls everywhere are fine when nothing is asked for
        assert call(None, None, None, None, None, mask=None)[2] == 0


# ---- every check, in SPEC order, with its status ----------------------------------------------------
def _tensors(N=1, C=2, H=3, W=4, Ho=2, Wo=3, dt=F32, **over):
    shapes = {"gradOutput": (N, C, Ho, Wo), "input": (N, C, H, W), "grid": (N, Ho, Wo, 2),
              "inputGrad": (N, C, H, W), "gridGrad": (N, Ho, Wo, 2)}
    dts = {k: dt for k in shapes}
    for k, v in over.items():
        if k.endswith("_dt"):
            dts[k[:-3]] = np.dtype(v)
        else:
            shapes[k] = v
    return {k: put(np.zeros(s, dts[k]))[0] for k, s in shapes.items()}


CHECKS = [
    # (id, soc, tensor overrides, None-ed tensors, interp, pad, mask, status)
    ("ok", A2, {}, (), 0, 0, (True, True), 0),
    ("ok-bicubic-a2", A2, {}, (), 2, 2, (True, True), 0),
    ("ok-null-gridGrad-unmasked", A2, {}, ("gridGrad",), 0, 0, (True, False), 0),
    ("ok-null-inputGrad-unmasked", A2, {}, ("inputGrad",), 0, 0, (False, True), 0),
    ("mask-length-3", A2, {}, (), 0, 0, (True, True, False), INVALID),
    ("null-gradOutput", A2, {}, ("gradOutput",), 0, 0, (True, True), NULLPTR),
    ("null-input", A2, {}, ("input",), 0, 0, (True, True), NULLPTR),
    ("null-grid", A2, {}, ("grid",), 0, 0, (True, True), NULLPTR),
    ("null-inputGrad-masked", A2, {}, ("inputGrad",), 0, 0, (True, False), NULLPTR),
    ("null-gridGrad-masked", A2, {}, ("gridGrad",), 0, 0, (False, True), NULLPTR),
    ("null-before-invalid", A2, {"grid": (1, 2, 3, 5)}, ("input",), 0, 0, (True, True), NULLPTR),
    ("series-310P3", "Ascend310P3", {}, (), 0, 0, (True, True), INVALID),
    ("dtype-gradOutput", A2, {"gradOutput_dt": F16}, (), 0, 0, (True, True), INVALID),
    ("dtype-grid", A2, {"grid_dt": F16}, (), 0, 0, (True, True), INVALID),
    ("dtype-inputGrad", A2, {"inputGrad_dt": F16}, (), 0, 0, (True, True), INVALID),
    ("dtype-gridGrad", A2, {"gridGrad_dt": BF16}, (), 0, 0, (True, True), INVALID),
    ("dtype-int32", A2, {f"{k}_dt": np.int32 for k in ("gradOutput", "input", "grid", "inputGrad", "gridGrad")},
     (), 0, 0, (True, True), INVALID),
    ("dtype-bf16-training", TRAINING, {f"{k}_dt": BF16 for k in ("gradOutput", "input", "grid", "inputGrad", "gridGrad")},
     (), 0, 0, (True, True), INVALID),
    ("dtype-double-training", TRAINING, {f"{k}_dt": F64 for k in ("gradOutput", "input", "grid", "inputGrad", "gridGrad")},
     (), 0, 0, (True, True), INVALID),
    ("rank-input", A2, {"input": (1, 2, 12), "inputGrad": (1, 2, 12)}, (), 0, 0, (True, True), INVALID),
    ("rank-grid", A2, {"grid": (1, 6, 2), "gridGrad": (1, 6, 2)}, (), 0, 0, (True, True), INVALID),
    ("rank-gradOutput", A2, {"gradOutput": (1, 2, 2, 3, 1)}, (), 0, 0, (True, True), INVALID),
    ("rank-inputGrad", A2, {"inputGrad": (2, 3, 4)}, (), 0, 0, (True, True), INVALID),
    ("N-grid", A2, {"grid": (2, 2, 3, 2), "gridGrad": (2, 2, 3, 2)}, (), 0, 0, (True, True), INVALID),
    ("N-gradOutput", A2, {"gradOutput": (2, 2, 2, 3)}, (), 0, 0, (True, True), INVALID),
    ("C", A2, {"gradOutput": (1, 3, 2, 3)}, (), 0, 0, (True, True), INVALID),
    ("H-zero", A2, {"input": (1, 2, 0, 4), "inputGrad": (1, 2, 0, 4)}, (), 0, 0, (True, True), INVALID),
    ("W-zero", A2, {"input": (1, 2, 3, 0), "inputGrad": (1, 2, 3, 0)}, (), 0, 0, (True, True), INVALID),
    ("grid-H", A2, {"grid": (1, 3, 3, 2), "gridGrad": (1, 3, 3, 2)}, (), 0, 0, (True, True), INVALID),
    ("grid-W", A2, {"grid": (1, 2, 4, 2), "gridGrad": (1, 2, 4, 2)}, (), 0, 0, (True, True), INVALID),
    ("grid-last", A2, {"grid": (1, 2, 3, 3), "gridGrad": (1, 2, 3, 3)}, (), 0, 0, (True, True), INVALID),
    ("inputGrad-shape", A2, {"inputGrad": (1, 2, 3, 5)}, (), 0, 0, (True, True), INVALID),
    ("gridGrad-shape", A2, {"gridGrad": (1, 2, 4, 2)}, (), 0, 0, (True, True), INVALID),
    ("interp-3", A2, {}, (), 3, 0, (True, True), INVALID),
    ("interp-negative", A2, {}, (), -1, 0, (True, True), INVALID),
    ("bicubic-training", TRAINING, {}, (), 2, 0, (True, True), INVALID),
    ("pad-3", A2, {}, (), 0, 3, (True, True), INVALID),
    ("pad-negative", A2, {}, (), 0, -1, (True, True), INVALID),
]


@pytest.mark.parametrize("cid,soc,over,nulls,interp,pad,mask,status", CHECKS, ids=[c[0] for c in CHECKS])
def test_checks(cid, soc, over, nulls, interp, pad, mask, status):
    with device(soc):
        ts = _tensors(**over)
        for n in nulls:
            ts[n] = None
        ws, ex, ret = call(ts["gradOutput"], ts["input"], ts["grid"], ts["inputGrad"], ts["gridGrad"],
                           interp, pad, False, mask)
        assert ret == status, acl.aclGetRecentErrMsg()
        if status:
            assert ex is None and acl.aclGetRecentErrMsg()


# ---- torch, when it is there ------------------------------------------------------------------------
def test_matches_torch_if_available():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    for interp in (0, 1, 2):
        for pad in (0, 1, 2):
            for align in (False, True):
                rng = rng_for("torch", interp, pad, align)
                go, x, g = case(rng, spread=1.4)
                r = run(go, x, g, interp, pad, align)
                tgi, tgg = torch.ops.aten.grid_sampler_2d_backward(
                    torch.from_numpy(go), torch.from_numpy(x), torch.from_numpy(g), interp, pad, align,
                    [True, True])
                R = grid_sampler_2d_backward_ref(go, x, g, interp, pad, align)
                for name, t in (("inputGrad", tgi), ("gridGrad", tgg)):
                    tol = 2 * (4e-6 * R[name + "_scale"] + 2.0 ** -22 * R[name + "_cscale"]) + 1e-30
                    assert np.all(np.abs(r.outputs[name] - t.numpy()) <= tol), (interp, pad, align, name)


@pytest.mark.parametrize("interp,pad,C", [(0, 0, 6), (1, 2, 6), (2, 1, 6), (0, 2, 300), (2, 0, 70)])
def test_several_tiles_per_core(interp, pad, C):
    """On two vector cores each block runs several tiles (and channel chunks): the software
    pipeline (gathers of the next step issued with the scatters of this one, offsets and
    weights double-buffered) must keep every step's data apart."""
    from simulator.profile import load_profile
    prof = load_profile(A2).override({"cores.aiv.count": 2})
    rng = rng_for("tiles", interp, pad, C)
    go, x, g = case(rng, N=2, C=C, H=7, W=6, Ho=9, Wo=15, spread=1.3)
    r = run(go, x, g, interp, pad, False, soc=None, profile=prof)
    assert r.report.launches[-1]["block_dim"] <= 2
    assert_close(r, go, x, g, interp, pad, False, what="tiles")
