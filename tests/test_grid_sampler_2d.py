"""aclnnGridSampler2D (the forward of torch.nn.functional.grid_sample, 2-D) against a float64
reference written here from the formulas (PyTorch's grid_sampler_2d: unnormalise, border clip,
reflection, bilinear / nearest (round half to even) / bicubic (A = -0.75, each tap padded on its
own)), and against torch.nn.functional.grid_sample in float64 when torch is importable: every
interpolation x padding x alignCorners, randomised calls over N, C, H_in, W_in, H_out, W_out,
modes, dtypes and every chip whose profile lists the operator (grid points far outside [-1, 1],
non-contiguous input, grid and out), each dtype on each series, several tiles and channel chunks
per core, empty tensors, timing == functional cycles, fast mode's loop audit and bound, a
memory bound, and every status code the document lists.

Tolerance: an element passes when
    |got - ref| <= rtol * scale + ceps * cscale + orr * |ref| + floor
with ref, scale = sum over the element's taps of |weight * value| and cscale = sum over its taps
of |value| * (|x| + |y| + 2), x, y the unnormalised coordinates before padding, all in float64
from the very inputs the kernel gets (already rounded to their dtype).
* FLOAT: the kernel computes in FP32: a weight is a handful of roundings (unnormalise, floor,
  differences, one product: a few units of 2^-24), its product with the value one more, and the
  tree sum over the corners one per level -> rtol 4e-6 of the sum of |terms|. The coordinate is
  held in FP32, so it is off by a few ulp of its own magnitude (reflection's fmod works on the
  unpadded coordinate, so that magnitude is the raw one); a weight moves by as much times its
  slope (<= 1 per axis for bilinear) -> ceps 2^-22 (4 ulp) of |x| + |y| + 2 per tap's |value|.
* Bicubic: the outer taps' coefficients ((A t - 5A) t + 8A) t - 4A cancel intermediates of up to
  ~7.5 to values near 0, off by up to ~20 u in FP32 (the backward's tests measured it), and a
  slope up to ~1.3: ceps 64 u of the compute dtype.
* FLOAT16: computed in FP32 as above, then rounded once to FP16 (half an ulp, 2^-11 relative;
  one ulp with the FP32 error) -> orr 2^-10, and FP16's subnormal spacing 2^-24 as floor.
* DOUBLE: the same kernel in float64: rtol 1e-13, ceps 2^-50 (bicubic 64 * 2^-53).
Nearest is discontinuous where a coordinate is k + 0.5: grid values whose float64 coordinate lies
within 2e-3 of such a place are drawn again (the kernel's FP32 coordinate may round the other
way there); bilinear and bicubic are continuous, so no draw is avoided for them.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import simulator
from simulator import TensorLayout, acl, aclnn
from simulator.enums import aclDataType, aclFormat, aclrtMemcpyKind
from simulator.kernel import audit_loops
from simulator.profile import load_profile

from conftest import assert_status

OP = "GridSampler2D"
F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
NULLPTR, INVALID = 161001, 161002
A2, TRAINING = "Ascend910B1", "Ascend910A"
DTYPES = {"FLOAT": F32, "FLOAT16": F16, "DOUBLE": F64}
ACL_DT = {F32: aclDataType.ACL_FLOAT, F16: aclDataType.ACL_FLOAT16, F64: aclDataType.ACL_DOUBLE}
# CANN's aclnnGridSampler2D document: FLOAT32, FLOAT16, DOUBLE; bicubic on A2, with FLOAT32 / FLOAT16
DOC_DTYPES = {"training": (F32, F16, F64), "A2": (F32, F16, F64)}
TOL = {F32: (4e-6, 2.0 ** -22, 0.0, 1e-30), F16: (4e-6, 2.0 ** -22, 2.0 ** -10, 2.0 ** -24),
       F64: (1e-13, 2.0 ** -50, 0.0, 1e-300)}
BICUBIC_CEPS = {F32: 64 * 2.0 ** -24, F16: 64 * 2.0 ** -24, F64: 64 * 2.0 ** -53}
A = -0.75


# ---- the float64 reference ----------------------------------------------------------------------
def unnormalize(v, size, align):
    return (v + 1) / 2 * (size - 1) if align else ((v + 1) * size - 1) / 2


def reflect(v, twice_low, twice_high):
    if twice_low == twice_high:
        return np.zeros_like(v)
    mn, span = twice_low / 2, (twice_high - twice_low) / 2
    v = np.abs(v - mn)
    extra, flips = np.fmod(v, span), np.floor(v / span)
    return np.where(flips % 2 == 0, extra + mn, span - extra + mn)


def pad_coord(v, size, pad, align):
    """PyTorch's compute_coordinates."""
    if pad == 1:
        return np.clip(v, 0, size - 1)
    if pad == 2:
        v = reflect(v, 0, 2 * (size - 1)) if align else reflect(v, -1, 2 * size - 1)
        return np.clip(v, 0, size - 1)
    return v


def cubic(t):
    """get_cubic_upsample_coefficients: the four taps' weights for the fraction t."""
    def c1(x):
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def c2(x):
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


def reference(x, g, interp, pad, align):
    """(out, scale, cscale) in float64 (module docstring)."""
    x, g = np.asarray(x, np.float64), np.asarray(g, np.float64)
    N, C, H, W = x.shape
    Ho, Wo = g.shape[1:3]
    out = np.zeros((N, C, Ho * Wo))
    scale, cscale = np.zeros_like(out), np.zeros_like(out)
    for n in range(N):
        img = x[n].reshape(C, H * W)
        rx, ry = unnormalize(g[n, ..., 0].reshape(-1), W, align), unnormalize(g[n, ..., 1].reshape(-1), H, align)
        slope = np.abs(rx) + np.abs(ry) + 2

        def tap(yy, xx, w):
            ok = (xx >= 0) & (xx <= W - 1) & (yy >= 0) & (yy <= H - 1)
            idx = (np.where(ok, yy, 0) * W + np.where(ok, xx, 0)).astype(np.int64)
            v = img[:, idx] * ok
            out[n] += w * v
            scale[n] += np.abs(w * v)
            cscale[n] += np.abs(v) * slope
        if interp == 2:
            x0, y0 = np.floor(rx), np.floor(ry)
            cx, cy = cubic(rx - x0), cubic(ry - y0)
            for j in range(4):
                for i in range(4):
                    tap(pad_coord(y0 - 1 + j, H, pad, align), pad_coord(x0 - 1 + i, W, pad, align), cx[i] * cy[j])
        else:
            ix, iy = pad_coord(rx, W, pad, align), pad_coord(ry, H, pad, align)
            if interp == 1:
                tap(np.rint(iy), np.rint(ix), 1.0)
            else:
                x0, y0 = np.floor(ix), np.floor(iy)
                tx, ty = ix - x0, iy - y0
                tap(y0, x0, (1 - tx) * (1 - ty))
                tap(y0, x0 + 1, tx * (1 - ty))
                tap(y0 + 1, x0, (1 - tx) * ty)
                tap(y0 + 1, x0 + 1, tx * ty)
    shape = (N, C, Ho, Wo)
    return out.reshape(shape), scale.reshape(shape), cscale.reshape(shape)


def violations(got, R, interp):
    got = np.asarray(got)
    rtol, ceps, orr, floor = TOL[np.dtype(got.dtype)]
    if interp == 2:
        ceps = max(ceps, BICUBIC_CEPS[np.dtype(got.dtype)])
    ref, scale, cscale = R
    bound = rtol * scale + ceps * cscale + orr * np.abs(ref) + floor
    with np.errstate(invalid="ignore"):
        return ~(np.abs(got.astype(np.float64) - ref) <= bound)


def assert_close(got, x, g, interp, pad, align, what=""):
    R = reference(x, g, interp, pad, align)
    assert got.shape == R[0].shape and got.dtype == x.dtype, what
    bad = violations(got, R, interp)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} out of tolerance; first at {i}: got {got[i]!r}, "
                    f"ref {R[0][i]!r}, scale {R[1][i]:.3g}")


# ---- inputs --------------------------------------------------------------------------------------
def grid_values(rng, n, size, interp, pad, align, dtype, far=1.3):
    """n grid values in the dtype, most in [-1.3, 1.3], 15 % out to +-far; for nearest none whose
    coordinate is within 2e-3 of k + 0.5 (module docstring)."""
    out = np.empty(0, dtype)
    while out.size < n:
        v = rng.uniform(-1.3, 1.3, 2 * n + 8)
        outside = rng.random(v.size) < 0.15
        v[outside] = rng.uniform(-far, far, int(outside.sum()))
        v = v.astype(dtype)
        if interp == 1:
            c = pad_coord(unnormalize(v.astype(np.float64), size, align), size, pad, align)
            d = (c - 0.5) % 1.0
            near = np.minimum(d, 1 - d)                 # distance to the nearest k + 0.5
            v = v[near > 2e-3]
        out = np.concatenate([out, v])
    return out[:n]


def make_case(rng, N=2, C=3, H=5, W=7, Ho=4, Wo=6, dtype=F32, interp=0, pad=0, align=False, far=1.3):
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    gx = grid_values(rng, N * Ho * Wo, W, interp, pad, align, dtype, far)
    gy = grid_values(rng, N * Ho * Wo, H, interp, pad, align, dtype, far)
    return x, np.stack([gx, gy], -1).reshape(N, Ho, Wo, 2)


def rng_for(*parts) -> np.random.Generator:
    return np.random.default_rng(list(repr(parts).encode()))


def run(x, g, interp=0, pad=0, align=False, soc=A2, mode="functional", **kw):
    return simulator.run(OP, soc=soc, mode=mode, input=x, grid=g, interpolationMode=interp, paddingMode=pad,
                         alignCorners=align, **kw)


def test_reference_is_independent_of_torch_and_agrees_with_it():
    """The reference above against torch.nn.functional.grid_sample in float64 on every mode."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    for interp in (0, 1, 2):
        for pad in (0, 1, 2):
            for align in (False, True):
                x, g = make_case(rng_for("oracles", interp, pad, align), dtype=F64, interp=interp, pad=pad,
                                 align=align, far=5.0)
                ref, scale, _ = reference(x, g, interp, pad, align)
                t = _torch(torch, x, g, interp, pad, align)
                assert np.all(np.abs(t - ref) <= 1e-12 * (scale + 1)), (interp, pad, align)


def _torch(torch, x, g, interp, pad, align):
    return torch.nn.functional.grid_sample(
        torch.from_numpy(np.asarray(x, np.float64)), torch.from_numpy(np.asarray(g, np.float64)),
        mode=("bilinear", "nearest", "bicubic")[interp], padding_mode=("zeros", "border", "reflection")[pad],
        align_corners=align).numpy()


def test_tolerance_rejects_a_small_error():
    x, g = make_case(rng_for("tol"))
    R = reference(x, g, 0, 0, False)
    assert violations((R[0] * (1 + 1e-4) + 1e-4 * R[1]).astype(np.float32), R, 0).any()


# ---- every mode ----------------------------------------------------------------------------------
@pytest.mark.parametrize("align", [False, True], ids=["noalign", "align"])
@pytest.mark.parametrize("pad", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("interp", [0, 1, 2], ids=["bilinear", "nearest", "bicubic"])
def test_all_modes(interp, pad, align):
    x, g = make_case(rng_for("modes", interp, pad, align), interp=interp, pad=pad, align=align, far=4.0)
    r = run(x, g, interp, pad, align)
    assert set(r.outputs) == {"out"}
    assert_close(r.outputs["out"], x, g, interp, pad, align, f"{interp}/{pad}/{align}")


# ---- dtypes per series ---------------------------------------------------------------------------
SERIES_OF = {TRAINING: "training", A2: "A2", "Ascend910B4": "A2"}


@pytest.mark.parametrize("soc,dtype,interp", [(s, d, i) for s in SERIES_OF for d in DOC_DTYPES[SERIES_OF[s]]
                                              for i in ((0, 1, 2) if SERIES_OF[s] == "A2" and d != F64 else (0, 1))],
                         ids=lambda v: v if isinstance(v, str) else getattr(v, "name", str(v)))
def test_dtypes_per_series(soc, dtype, interp):
    pad = {0: 2, 1: 1, 2: 0}[interp]
    x, g = make_case(rng_for("dtype", soc, dtype.name, interp), N=2, C=9, H=6, W=5, Ho=5, Wo=7, dtype=dtype,
                     interp=interp, pad=pad, far=3.0)
    r = run(x, g, interp, pad, False, soc=soc)
    assert_close(r.outputs["out"], x, g, interp, pad, False, f"{soc} {dtype}")


def test_profiles_list_the_documents_dtypes():
    for soc in ("Ascend910A", "Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4"):
        prof = load_profile(soc)
        want = DOC_DTYPES[prof.series]
        assert tuple(DTYPES[d] for d in prof.supports(OP).dtypes) == want, soc
    assert load_profile("Ascend310P3").supports(OP) is None


# ---- randomised calls on every chip with the operator ---------------------------------------------
def _chips():
    from pathlib import Path
    out = []
    for path in sorted((Path(simulator.__file__).parent.parent / "devices").glob("Ascend*.yaml")):
        support = load_profile(path.stem).supports(OP)
        if support is not None:
            modes = support.options.get("interpolation_modes", [0, 1])
            out.append((path.stem, tuple(support.dtypes), (modes,) if isinstance(modes, int) else tuple(modes)))
    return out


CHIPS = _chips()
N_CASES = 30


def _view(rng, data, kind):
    """(view of data, the array owning its storage, which of its elements the view covers):
    contiguous, stored in another dimension order, or a strided slice of a larger array."""
    if kind == "contiguous":
        return data, data, np.ones(data.shape, bool)
    if kind == "permuted":
        perm = rng.permutation(4)
        base = np.ascontiguousarray(data.transpose(perm))
        return base.transpose(np.argsort(perm)), base, np.ones(base.shape, bool)
    base = np.zeros(tuple(d * 2 + 1 for d in data.shape), data.dtype)
    sl = tuple(slice(1, 1 + 2 * d, 2) if rng.random() < 0.5 else slice(0, d) for d in data.shape)
    base[sl] = data
    covered = np.zeros(base.shape, bool)
    covered[sl] = True
    return base[sl], base, covered


def draw(i):
    rng = np.random.default_rng([2026, 12, 2, i])
    soc, dtypes, modes = CHIPS[i % len(CHIPS)]
    dtype = DTYPES[dtypes[int(rng.integers(len(dtypes)))]]
    interp = int(modes[int(rng.integers(len(modes)))])
    if interp == 2 and dtype == F64:
        dtype = F32
    c = dict(i=i, soc=soc, dtype=dtype, interp=interp, pad=int(rng.integers(3)), align=bool(rng.integers(2)),
             N=int(rng.integers(1, 4)), C=int(rng.choice((1, 2, 3, 8, 16, 17, 33, 70, 129))),
             H=int(rng.integers(1, 12)), W=int(rng.integers(1, 12)), Ho=int(rng.integers(1, 9)),
             Wo=int(rng.integers(1, 12)), far=float(rng.choice((1.3, 3.0, 40.0))),
             views=[("contiguous", "permuted", "strided")[int(k)] for k in rng.choice(3, 3, p=[0.5, 0.25, 0.25])],
             seed=int(rng.integers(2 ** 31)))
    if rng.random() < 0.15:                  # several tiles and channel chunks per core
        c.update(C=int(rng.choice((200, 300))), Ho=int(rng.integers(8, 20)), Wo=int(rng.integers(8, 20)))
    return c


CASES = [draw(i) for i in range(N_CASES)]
_OUT: dict[int, np.ndarray] = {}


def _id(c):
    return (f"{c['i']}-{c['soc']}-{c['dtype'].name}-i{c['interp']}p{c['pad']}{'a' if c['align'] else ''}-"
            f"{c['N']}x{c['C']}x{c['H']}x{c['W']}-{c['Ho']}x{c['Wo']}-{'/'.join(v[0] for v in c['views'])}")


def _inputs(c):
    rng = np.random.default_rng(c["seed"])
    x, g = make_case(rng, c["N"], c["C"], c["H"], c["W"], c["Ho"], c["Wo"], c["dtype"], c["interp"], c["pad"],
                     c["align"], c["far"])
    return rng, x, g


def _run_case(c):
    rng, x, g = _inputs(c)
    xv, _, _ = _view(rng, x, c["views"][0])
    gv, _, _ = _view(rng, g, c["views"][1])
    shape = (c["N"], c["C"], c["Ho"], c["Wo"])
    ov, obase, covered = _view(rng, np.full(shape, 7, c["dtype"]), c["views"][2])
    obase[...] = 7
    kept = (xv.copy(), gv.copy())
    r = simulator.run(OP, soc=c["soc"], input=xv, grid=gv, interpolationMode=c["interp"], paddingMode=c["pad"],
                      alignCorners=c["align"], out=ov)
    assert r.outputs["out"] is ov
    assert np.array_equal(kept[0], xv) and np.array_equal(kept[1], gv), "an input was modified"
    assert np.all(obase[~covered] == 7), "elements around the out view changed"
    _OUT[c["i"]] = np.array(ov)
    return x, g, np.array(ov)


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_random_call(c):
    x, g, got = _run_case(c)
    assert_close(got, x, g, c["interp"], c["pad"], c["align"], _id(c))


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_random_call_vs_torch(c):
    """torch.nn.functional.grid_sample in float64 on the same (rounded) inputs, with the reference
    test's tolerance (its scales taken from the reference)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    _, x, g = _inputs(c)
    got = _OUT.get(c["i"])
    if got is None:
        got = _run_case(c)[2]
    t = _torch(torch, x, g, c["interp"], c["pad"], c["align"])
    _, scale, cscale = reference(x, g, c["interp"], c["pad"], c["align"])
    bad = violations(got, (t, scale, cscale), c["interp"])
    assert not bad.any(), f"{_id(c)}: {int(bad.sum())} elements outside the tolerance of torch's float64 result"


def test_every_chip_with_the_operator_is_drawn():
    assert {c["soc"] for c in CASES} == {soc for soc, _, _ in CHIPS}
    assert {"Ascend910A", "Ascend910B1", "Ascend910B4"} <= {c["soc"] for c in CASES}
    assert {c["dtype"] for c in CASES} == {F32, F16, F64}


# ---- tiles, chunks, empty tensors, modes of the engine ---------------------------------------------
@pytest.mark.parametrize("interp,pad,C", [(0, 0, 6), (1, 2, 40), (2, 1, 6), (0, 2, 300), (2, 0, 70)])
def test_several_tiles_and_chunks_per_core(interp, pad, C):
    """On two vector cores each block runs several tiles (and channel chunks): the software
    pipeline (next step's gathers behind this step's compute, offsets and weights kept per tile
    parity, double-buffered corners and output tiles) must keep every step's data apart."""
    prof = load_profile(A2).override({"cores.aiv.count": 2})
    x, g = make_case(rng_for("tiles", interp, pad, C), N=2, C=C, H=7, W=6, Ho=9, Wo=15, interp=interp, pad=pad)
    r = run(x, g, interp, pad, False, soc=None, profile=prof, tiling={"pointsPerTile": 16})
    assert r.report.launches[-1]["block_dim"] <= 2
    assert_close(r.outputs["out"], x, g, interp, pad, False, f"{interp}/{pad}/{C}")


@pytest.mark.parametrize("shape_x,shape_g", [((0, 3, 4, 5), (0, 2, 3, 2)), ((2, 0, 4, 5), (2, 2, 3, 2)),
                                              ((2, 3, 4, 5), (2, 0, 3, 2)), ((2, 3, 4, 5), (2, 2, 0, 2))])
def test_empty_tensors_need_nothing(shape_x, shape_g):
    x, g = np.ones(shape_x, np.float32), np.zeros(shape_g, np.float32)
    r = run(x, g)
    assert r.outputs["out"].shape == (shape_x[0], shape_x[1], shape_g[1], shape_g[2])
    assert simulator.plan(OP, A2, input=x, grid=g, interpolationMode=0, paddingMode=0,
                          alignCorners=False).workspace_size == 0


def test_timing_mode_gives_the_functional_cycles():
    x, g = make_case(rng_for("timing"), N=2, C=20, H=9, W=11, Ho=12, Wo=13)
    f = run(x, g, 0, 2, True)
    t = run(TensorLayout(x.shape, x.dtype), TensorLayout(g.shape, g.dtype), 0, 2, True, mode="timing")
    assert f.cycles == t.cycles and f.report.instructions == t.report.instructions


def test_workspace_is_the_padded_nhwc_input():
    x, g = TensorLayout((2, 64, 10, 12), F16), TensorLayout((2, 5, 7, 2), F16)
    for interp, pad_px in ((0, 1), (1, 0)):
        p = simulator.plan(OP, A2, input=x, grid=g, interpolationMode=interp, paddingMode=0, alignCorners=False)
        assert p.workspace_size == -(-((2 * 10 * 12 + 2 * pad_px) * 64 * 4) // 512) * 512
        assert p.tiling["computeDtype"] == "FLOAT"


def test_forced_tiling_is_applied():
    kw = dict(input=TensorLayout((1, 40, 6, 6), F32), grid=TensorLayout((1, 5, 7, 2), F32), interpolationMode=0,
              paddingMode=0, alignCorners=False)
    d = simulator.run(OP, A2, mode="timing", **kw)
    f = simulator.run(OP, A2, mode="timing", tiling={"pointsPerTile": 16, "channelsPerChunk": 16}, **kw)
    assert d.report.tiling["channelChunks"] == 1 and f.report.tiling["channelChunks"] == 3
    assert f.report.tiling["gathers"] == 3 * d.report.tiling["gathers"]
    assert f.report.instructions != d.report.instructions
    assert len(aclnn.REGISTRY[OP].tiling_space(dict(input=np.zeros((1, 40, 6, 6), F32),
                                                    grid=np.zeros((1, 5, 7, 2), F32), interpolationMode=0,
                                                    paddingMode=0, alignCorners=False), load_profile(A2))) > 1


@pytest.mark.parametrize("interp", [0, 2])
def test_fast_mode_loops_audited_and_bounded(interp):
    """The kernel's Loop (key, period, declared gathers) passes the audit of the exact engine, and
    fast mode stays inside its stated bound, on two cores with several tiles and chunks each."""
    prof = load_profile(A2).override({"cores.aiv.count": 2})
    kw = dict(input=TensorLayout((2, 96, 24, 30), F32), grid=TensorLayout((2, 40, 30, 2), F32),
              interpolationMode=interp, paddingMode=1, alignCorners=False)
    with audit_loops() as findings:
        exact = simulator.run(OP, None, mode="timing", profile=prof, trace=False, **kw).report
    assert findings.loops >= 1
    assert not findings, "\n".join(findings[:5])
    fast = simulator.run(OP, None, mode="fast", profile=prof, trace=False, **kw).report
    assert fast.fast["fast_forwarded_instructions"] > 0
    assert abs(fast.cycles - exact.cycles) <= fast.fast["bound_cycles"] + 1e-6 * exact.cycles
    assert fast.instructions == exact.instructions


@pytest.mark.parametrize("soc", [A2, TRAINING])
def test_respects_the_memory_bound(soc):
    """input and grid are read whole (the NHWC transpose reads every input element; every grid
    point enters a result) and out is written whole: the call takes at least those bytes' time
    at the device memory's rate (tests/test_physics_bounds.py's bound and slack)."""
    from test_physics_bounds import GRID_SLACK, _bytes, check, memory_bound
    x, g = TensorLayout((2, 32, 32, 32), F32), TensorLayout((2, 48, 48, 2), F32)
    out = TensorLayout((2, 32, 48, 48), F32)
    prof = load_profile(soc)
    t0 = time.process_time()
    r = simulator.run(OP, soc, mode="timing", trace=False, input=x, grid=g, interpolationMode=0, paddingMode=0,
                      alignCorners=False)
    check(prof, r.cycles, {"device-memory": memory_bound(prof, _bytes(x, g), _bytes(out))}, slack=GRID_SLACK)
    assert time.process_time() - t0 < 30


# ---- the status codes the document lists -----------------------------------------------------------
def _args(dtype=F32, x=(2, 3, 5, 6), g=(2, 4, 7, 2), o=None, gdt=None, odt=None, interp=0, pad=0):
    o = o if o is not None else (x[0], x[1], g[1], g[2])
    return dict(input=np.zeros(x, dtype), grid=np.zeros(g, gdt or dtype), out=np.zeros(o, odt or dtype),
                interpolationMode=interp, paddingMode=pad, alignCorners=False)


STATUS = [
    ("null input", A2, dict(input=None), NULLPTR),
    ("null grid", A2, dict(grid=None), NULLPTR),
    ("null before invalid", A2, dict(input=None, interpolationMode=9), NULLPTR),
    ("not on inference", "Ascend310P3", {}, INVALID),
    ("grid dtype differs", A2, _args(gdt=F16), INVALID),
    ("out dtype differs", A2, _args(odt=F64), INVALID),
    ("BF16 not in the list", A2, "bf16", INVALID),
    ("INT32 not in the list", A2, _args(dtype=np.dtype(np.int32)), INVALID),
    ("interpolationMode 3", A2, dict(interpolationMode=3), INVALID),
    ("interpolationMode -1", A2, dict(interpolationMode=-1), INVALID),
    ("paddingMode 3", A2, dict(paddingMode=3), INVALID),
    ("paddingMode -1", A2, dict(paddingMode=-1), INVALID),
    ("bicubic on training", TRAINING, dict(interpolationMode=2), INVALID),
    ("bicubic with DOUBLE", A2, _args(dtype=F64, interp=2), INVALID),
    ("input 3-D", A2, _args(x=(2, 3, 5), o=(2, 3, 4, 7)), INVALID),
    ("grid 5-D", A2, _args(g=(2, 4, 7, 2, 1), o=(2, 3, 4, 7)), INVALID),
    ("out 3-D", A2, _args(o=(2, 3, 28)), INVALID),
    ("N differs (grid)", A2, _args(g=(1, 4, 7, 2), o=(2, 3, 4, 7)), INVALID),
    ("N differs (out)", A2, _args(o=(1, 3, 4, 7)), INVALID),
    ("C differs", A2, _args(o=(2, 4, 4, 7)), INVALID),
    ("out H differs", A2, _args(o=(2, 3, 5, 7)), INVALID),
    ("out W differs", A2, _args(o=(2, 3, 4, 6)), INVALID),
    ("grid last dim 3", A2, _args(g=(2, 4, 7, 3)), INVALID),
    ("input H empty", A2, _args(x=(2, 3, 0, 6)), INVALID),
    ("input W empty", A2, _args(x=(2, 3, 5, 0)), INVALID),
]


@pytest.mark.parametrize("what,soc,over,status", STATUS, ids=[s[0] for s in STATUS])
def test_status_codes(what, soc, over, status):
    if over == "bf16":
        import ml_dtypes
        args = _args(dtype=np.dtype(ml_dtypes.bfloat16))
    elif "input" in over and "out" in over:
        args = over
    else:
        args = {**_args(), **over}
    assert_status(OP, soc, args, status)


def _acl_tensors(fmt_of=None):
    shapes = {"input": (1, 2, 3, 4), "grid": (1, 2, 2, 2), "out": (1, 2, 2, 2)}
    ts = {}
    for n, shape in shapes.items():
        arr = np.zeros(shape, np.float32)
        ptr, ret = acl.aclrtMalloc(arr.nbytes, 0)
        assert ret == 0 and acl.aclrtMemcpy(ptr, arr.nbytes, arr, arr.nbytes,
                                            aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE) == 0
        strides = [int(np.prod(shape[i + 1:])) for i in range(4)]
        ts[n] = acl.aclCreateTensor(shape, aclDataType.ACL_FLOAT, strides, 0,
                                    (fmt_of or {}).get(n, aclFormat.ACL_FORMAT_ND), (arr.size,), ptr)
    return shapes, ts


@pytest.mark.parametrize("name", ["input", "grid", "out"])
def test_null_tensors_through_the_acl_api(name):
    with simulator.acl.use_runtime(acl.Runtime()):
        acl.aclInit(None)
        acl.aclrtSetDevice(0)
        _, ts = _acl_tensors()
        ts[name] = None
        _, ex, ret = aclnn.aclnnGridSampler2DGetWorkspaceSize(ts["input"], ts["grid"], 9, 0, False, ts["out"])
        assert ret == NULLPTR and ex is None, acl.aclGetRecentErrMsg()


@pytest.mark.parametrize("name", ["input", "grid", "out"])
@pytest.mark.parametrize("fmt", [aclFormat.ACL_FORMAT_NC1HWC0, aclFormat.ACL_FORMAT_FRACTAL_NZ,
                                 aclFormat.ACL_FORMAT_NCDHW])
def test_private_formats_are_refused(name, fmt):
    """Through the ACL API (formats are the aclTensor's): ND, NCHW and NHWC pass, others 161002."""
    with simulator.acl.use_runtime(acl.Runtime()):
        acl.aclInit(None)
        acl.aclrtSetDevice(0)
        shapes, ts = _acl_tensors({name: fmt})
        _, ex, ret = aclnn.aclnnGridSampler2DGetWorkspaceSize(ts["input"], ts["grid"], 0, 0, False, ts["out"])
        assert ret == INVALID and ex is None, acl.aclGetRecentErrMsg()
        ts[name] = acl.aclCreateTensor(shapes[name], aclDataType.ACL_FLOAT,
                                       [int(np.prod(shapes[name][i + 1:])) for i in range(4)], 0,
                                       aclFormat.ACL_FORMAT_NCHW, (int(np.prod(shapes[name])),), ts[name].data)
        _, ex, ret = aclnn.aclnnGridSampler2DGetWorkspaceSize(ts["input"], ts["grid"], 0, 0, False, ts["out"])
        assert ret == 0, acl.aclGetRecentErrMsg()
