"""aclnnSiluBackward: outputs against the float64 reference of SPEC section 4,
    gradInput = g * s * (1 + x * (1 - s)),  s = sigmoid(x),
on every SoC of the series that support it and every dtype each supports (FLOAT, FLOAT16 on the
training series; + BF16 on A2), for contiguous and non-contiguous inputs AND outputs (transposes,
slices with steps, offsets, broadcast inputs, negative steps), empty tensors, timing-only mode,
determinism, the device-memory lower bound on cycles, inputs left untouched, and the seed
document's C++ example through the low-level ACL / aclnn API.

Tolerances (stated and reasoned in conftest.TOL): FLOAT rtol 1e-5 (fp32 compute, a few ulp) plus
1e-6*|g| absolute for the cancellation in 1 + x(1-s); FLOAT16 rtol 1e-3 (one rounding to fp16,
2^-11) plus a 2^-24 floor for fp16 subnormals; BF16 rtol 8e-3 (one rounding to bf16, ~2^-8).
"""
from __future__ import annotations

import numpy as np
import pytest

import simulator
from simulator import acl, aclnn
from simulator.enums import aclDataType, aclFormat, aclrtMemcpyKind

from conftest import (BF16, F16, F32, SILU_SOCS, SOC_DTYPES, assert_silu_close,
                      contiguous_strides, dtype_id, random_data, silu_ref, silu_violations)

SOC_DTYPE_IDS = [f"{s}-{dtype_id(d)}" for s, d in SOC_DTYPES]
soc_dtype = pytest.mark.parametrize("soc,dtype", SOC_DTYPES, ids=SOC_DTYPE_IDS)


def rng_for(*parts) -> np.random.Generator:
    """A generator seeded from the test's parameters (stable across runs, unlike hash())."""
    return np.random.default_rng(list(repr(parts).encode()))


# ---- the reference itself ------------------------------------------------------------------------
def test_reference_is_the_derivative_of_silu():
    """The float64 reference is d/dx (x * sigmoid(x)) times g (checked by central differences),
    so the tests compare against the right formula."""
    x = np.linspace(-12, 12, 241)
    g = np.linspace(-2, 3, 241)
    h = 1e-6
    silu = lambda v: v / (1 + np.exp(-v))
    numeric = g * (silu(x + h) - silu(x - h)) / (2 * h)
    np.testing.assert_allclose(silu_ref(g, x), numeric, rtol=1e-7, atol=1e-8)


def test_tolerance_rejects_a_one_percent_error():
    """The checker is not vacuous: a result 1 % (fp32) or 3 % (fp16, bf16) off fails."""
    rng = np.random.default_rng(1)
    x = random_data(rng, (64,), F32)
    g = random_data(rng, (64,), F32)
    good = silu_ref(g, x).astype(F32)
    assert not silu_violations(good, g, x).any()
    assert silu_violations((silu_ref(g, x) * 1.01).astype(F32), g, x).any()
    for dt in (F16, BF16):
        xd, gd = x.astype(dt), g.astype(dt)
        assert not silu_violations(silu_ref(gd, xd).astype(dt), gd, xd).any()
        assert silu_violations((silu_ref(gd, xd) * 1.03).astype(dt), gd, xd).any()


# ---- contiguous, random shapes of every rank ------------------------------------------------------
def _odd_shape(rng, rank: int, max_numel: int) -> tuple[int, ...]:
    shape = [int(rng.choice([1, 3, 5, 7, 9, 11, 13])) for _ in range(rank)]
    while int(np.prod(shape)) > max_numel:
        i = int(np.argmax(shape))
        shape[i] = max(1, shape[i] // 2) | 1
    return tuple(shape)


@soc_dtype
@pytest.mark.parametrize("rank", range(0, 9))
def test_contiguous_random_shapes(soc, dtype, rank):
    rng = rng_for("contig", soc, dtype_id(dtype), rank)
    shape = _odd_shape(rng, rank, 3000)
    g = random_data(rng, shape, dtype, 1.0)
    x = random_data(rng, shape, dtype, 3.0)
    g0, x0 = g.copy(), x.copy()
    r = simulator.run("SiluBackward", soc=soc, gradOutput=g, self=x)
    assert r.gradInput.dtype == dtype and r.gradInput.shape == shape
    assert_silu_close(r.gradInput, g, x, f"{soc} {dtype_id(dtype)} {shape}")
    assert r.workspace_size == 0            # contiguous: no Contiguous / ViewCopy workspace
    assert g.tobytes() == g0.tobytes() and x.tobytes() == x0.tobytes(), "inputs were modified"


@soc_dtype
@pytest.mark.parametrize("n", [1, 31, 2049, 100_003])
def test_1d_many_blocks_and_tails(soc, dtype, n):
    """Odd lengths: one element, one short tile, a block boundary +1, many blocks with a tail
    that is not a whole number of 32-byte blocks."""
    rng = rng_for("1d", soc, dtype_id(dtype), n)
    g = random_data(rng, (n,), dtype, 2.0)
    x = random_data(rng, (n,), dtype, 4.0)
    r = simulator.run("SiluBackward", soc=soc, gradOutput=g, self=x, trace=False)
    assert_silu_close(r.gradInput, g, x, f"{soc} n={n}")


@soc_dtype
def test_special_values(soc, dtype):
    """Signed zeros, tiny, large and NaN inputs: finite where the formula is finite (fp32 exp
    overflow for x < -88 gives 0, within atol_g*|g|), NaN where an input is NaN."""
    big = {F32: 1e30, F16: 6e4, BF16: 1e30}[np.dtype(dtype)]
    xs = np.array([0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0, -1.2785, 5.0, -5.0, 20.0, -20.0, 87.0,
                   -87.0, -89.0, -100.0, 100.0, 1e4, -1e4, big, -big, np.nan, 0.5])
    xs = np.clip(xs, -big, big)
    gs = np.array([1.0, -2.0, 3.0, 0.0, -0.0, 1e-3, 7.0, -1.0, 2.5, 1.0, 1.0, -1.0, 1.0, 1.0, 2.0,
                   -3.0, 1.0, 1.0, 1.0, 1.0, 1.0, np.nan])
    x, g = xs.astype(dtype), gs.astype(dtype)
    with np.errstate(all="ignore"):
        r = simulator.run("SiluBackward", soc=soc, gradOutput=g, self=x)
    assert_silu_close(r.gradInput, g, x, f"{soc} special values")
    out = r.gradInput.astype(np.float64)
    assert np.isnan(out[-2]) and np.isnan(out[-1])
    assert np.isfinite(out[:-2]).all()


# ---- non-contiguous numpy views (inputs AND output) through simulator.run ---------------------------
def _views(case: str, rng, dtype):
    """(gradOutput view, self view, gradInput view or None, the output's base array or None)."""
    mk = lambda shape, scale=2.0: random_data(rng, shape, dtype, scale)
    if case == "transpose_2d":
        return mk((13, 7)).T, mk((13, 7), 4).T, None, None
    if case == "permute_4d":
        return (mk((3, 5, 2, 7)).transpose(2, 0, 3, 1), mk((2, 3, 5, 7), 4).transpose(0, 1, 3, 2),
                None, None)
    if case == "step_slices":
        return mk((9, 20, 7))[1::2, 3:17:3, ::2], mk((4, 25, 5), 4)[:, 2::5, 1:], None, None
    if case == "negative_steps":
        return mk((11, 6))[::-1, ::-2], mk((11, 3), 4)[::-1], None, None
    if case == "broadcast_input":
        g = np.broadcast_to(mk((1, 9)), (5, 9))            # stride 0: an expanded view
        return g, mk((5, 9), 4), None, None
    if case == "output_transposed":
        base = np.full((7, 13), np.nan).astype(dtype)
        return mk((13, 7)), mk((13, 7), 4), base.T, base
    if case == "output_step_slice":
        base = np.full((10, 31), np.nan).astype(dtype)
        return mk((5, 7)), mk((5, 7), 4), base[1::2, 2:30:4], base
    if case == "output_negative_steps":
        base = np.full((6, 10), np.nan).astype(dtype)
        return mk((6, 5)), mk((6, 5), 4), base[::-1, 1::2], base
    if case == "all_views_8d":
        shape = (3, 1, 2, 3, 1, 2, 3, 2)                      # the views' common shape
        rev = tuple(range(7, -1, -1))
        step2 = tuple(slice(1, None, 2) for _ in shape)       # 2d+1 -> d elements
        g = mk(tuple(2 * d + 1 for d in shape[::-1]))[step2].transpose(rev)
        x = mk(tuple(3 * d for d in shape), 4)[tuple(slice(2, None, 3) for _ in shape)]
        base = np.full(tuple(2 * d + 1 for d in shape[::-1]), np.nan).astype(dtype)
        return g, x, base[step2].transpose(rev), base
    raise AssertionError(case)


VIEW_CASES = ["transpose_2d", "permute_4d", "step_slices", "negative_steps", "broadcast_input",
              "output_transposed", "output_step_slice", "output_negative_steps", "all_views_8d"]


@soc_dtype
@pytest.mark.parametrize("case", VIEW_CASES)
def test_numpy_views(soc, dtype, case):
    rng = rng_for("views", soc, dtype_id(dtype), case)
    g, x, out, base = _views(case, rng, dtype)
    assert g.shape == x.shape and (out is None or out.shape == x.shape)
    assert not (g.flags.c_contiguous and x.flags.c_contiguous and (out is None or out.flags.c_contiguous))
    g_copy, x_copy = g.copy(), x.copy()
    base_before = None if base is None else base.copy()
    kw = {} if out is None else {"gradInput": out}
    r = simulator.run("SiluBackward", soc=soc, gradOutput=g, self=x, **kw)
    got = r.gradInput
    if out is not None:
        assert got is out                      # written in place
    assert_silu_close(got, g_copy, x_copy, f"{soc} {dtype_id(dtype)} {case}")
    assert np.array_equal(g, g_copy, equal_nan=True) and np.array_equal(x, x_copy, equal_nan=True)
    if base is not None:
        # every element of the output's storage outside the view keeps its NaN sentinel
        assert np.isnan(base_before.astype(np.float64)).all()
        assert np.isfinite(got.astype(np.float64)).all()
        assert int(np.isfinite(base.astype(np.float64)).sum()) == out.size, \
            "the kernel wrote outside the output view"
    # simulator.run passes a view with non-negative strides as a strided aclTensor (the operator
    # then copies it through the workspace); negative strides are copied on the host (documented)
    strided = [a for a in (g, x, out) if a is not None and not a.flags.c_contiguous
               and min(a.strides) >= 0]
    assert (r.workspace_size > 0) == bool(strided)


# ---- strided aclTensors with offsets, through the low-level API -----------------------------------
def _random_view(rng, shape, dtype, fill=None):
    """A random strided view of a bigger C-contiguous base with the common `shape`: a permutation
    of the base's axes, a start (so an element offset), a step and spare room per axis.
    Returns (base, view)."""
    rank = len(shape)
    perm = rng.permutation(rank) if rank else np.arange(0)
    steps = [int(rng.integers(1, 4)) for _ in shape]
    starts = [int(rng.integers(0, 3)) for _ in shape]
    ext = [starts[i] + (shape[i] - 1) * steps[i] + 1 + int(rng.integers(0, 2)) for i in range(rank)]
    base_shape = tuple(ext[p] for p in perm)
    if fill is None:
        base = random_data(rng, base_shape, dtype)
    else:
        base = np.full(base_shape, fill).astype(dtype)
    v = base.transpose(np.argsort(perm)) if rank else base[...]
    v = v if not rank else v[tuple(slice(starts[i], starts[i] + (shape[i] - 1) * steps[i] + 1, steps[i]) for i in range(rank))]
    assert v.shape == tuple(shape)
    return base, v


def _storage_outside(t, storage: np.ndarray) -> np.ndarray:
    """The storage elements a tensor's view does not cover."""
    tensor = t.tensor
    mask = np.ones(storage.size, dtype=bool)
    if int(np.prod(tensor.viewDims)):
        idx = np.lib.stride_tricks.as_strided(
            np.arange(storage.size)[tensor.offset:], shape=tensor.viewDims,
            strides=[s * 8 for s in tensor.stride])
        mask[idx.reshape(-1)] = False
    return storage.reshape(-1)[mask]


@soc_dtype
@pytest.mark.parametrize("seed", range(4))
def test_strided_offset_views_lowlevel(make_device, soc, dtype, seed):
    """aclTensors with element strides and offsets into bigger storages, for both inputs and the
    output: the view's result is right, the inputs' storages are bit-identical afterwards, and
    no output storage element outside the view is written."""
    rng = rng_for("lowlevel", soc, dtype_id(dtype), seed)
    dev = make_device(soc)
    rank = int(rng.integers(1, 9))
    shape = _odd_shape(rng, rank, 400)
    gb, gv = _random_view(rng, shape, dtype)
    xb, xv = _random_view(rng, shape, dtype)
    ob, ov = _random_view(rng, shape, dtype, fill=np.nan)
    tg, tx, to = dev.put_view(gb, gv), dev.put_view(xb, xv), dev.put_view(ob, ov)
    g_raw, x_raw = tg.raw(), tx.raw()
    ws, ex = dev.silu(tg, tx, to)
    assert_silu_close(to.view(), gv, xv, f"{soc} {dtype_id(dtype)} shape {shape} "
                      f"strides {to.tensor.stride} offset {to.tensor.offset}")
    assert tg.raw() == g_raw and tx.raw() == x_raw, "an input's device memory was modified"
    outside = _storage_outside(to, to.storage()).astype(np.float64)
    assert np.isnan(outside).all(), "the kernel wrote output storage outside the view"
    expect_ws = any(not t.tensor.is_contiguous() for t in (tg, tx, to))
    assert (ws > 0) == expect_ws


@pytest.mark.parametrize("soc", SILU_SOCS)
@pytest.mark.parametrize("offset", [1, 7, 333])
def test_contiguous_view_at_an_offset(make_device, soc, offset):
    """A dense view that starts `offset` elements into its storage (no workspace needed)."""
    dev = make_device(soc)
    rng = rng_for("offset", soc, offset)
    n = 1001
    gs = random_data(rng, (offset + n + 5,), F32)
    xs = random_data(rng, (offset + n + 5,), F32)
    tg = dev.put(gs, (7, 11, 13), None, offset)
    tx = dev.put(xs, (7, 11, 13), None, offset)
    to = dev.put_output((7, 11, 13), F32, offset=offset, spare=9)
    ws, _ = dev.silu(tg, tx, to)
    assert ws == 0
    g = gs[offset:offset + n].reshape(7, 11, 13)
    x = xs[offset:offset + n].reshape(7, 11, 13)
    assert_silu_close(to.view(), g, x, f"offset {offset}")
    st = to.storage().astype(np.float64)
    assert np.isnan(st[:offset]).all() and np.isnan(st[offset + n:]).all()


# ---- empty tensors -----------------------------------------------------------------------------------
EMPTY_SHAPES = [(0,), (3, 0), (2, 0, 5), (0, 7, 1), (1,) * 7 + (0,)]


@soc_dtype
@pytest.mark.parametrize("shape", EMPTY_SHAPES, ids=str)
def test_empty_tensors(make_device, soc, dtype, shape):
    """Empty: workspace 0, nothing to do (no kernel launch), and the call succeeds through both
    phases; also when the empty views are non-contiguous."""
    dev = make_device(soc)
    strides = [s * 3 for s in contiguous_strides(shape)][::-1][:len(shape)]
    tg = dev.put(np.ones(4, dtype), shape, strides, 1)
    tx = dev.put(np.ones(4, dtype), shape, None, 0)
    to = dev.put(np.full(4, 5.0).astype(dtype), shape, strides, 2)
    ws, ex = dev.silu(tg, tx, to)
    assert ws == 0
    assert ex.report is not None and ex.report.launches == [] and ex.report.cycles == 0
    assert (to.storage().astype(np.float64) == 5.0).all()
    r = simulator.run("SiluBackward", soc=soc, gradOutput=np.zeros(shape, dtype),
                      self=np.zeros(shape, dtype))
    assert r.workspace_size == 0 and r.gradInput.shape == shape and r.gradInput.dtype == dtype
    assert r.cycles == 0 and r.report.launches == []


# ---- timing-only mode, determinism, the memory lower bound --------------------------------------------
def _layouts(layout: str, rng, dtype):
    if layout == "contiguous":
        return {"gradOutput": random_data(rng, (37, 129), dtype),
                "self": random_data(rng, (37, 129), dtype)}
    if layout == "strided":
        out = np.zeros((129, 74), dtype)[:, ::2]
        return {"gradOutput": random_data(rng, (37, 129), dtype).T,
                "self": random_data(rng, (129, 40), dtype)[:, 3:],
                "gradInput": out}
    if layout == "large":
        return {"gradOutput": random_data(rng, (300_001,), dtype),
                "self": random_data(rng, (300_001,), dtype)}
    raise AssertionError(layout)


@soc_dtype
@pytest.mark.parametrize("layout", ["contiguous", "strided", "large"])
def test_timing_mode_gives_the_same_cycles(soc, dtype, layout):
    """mode="timing" skips the data but must cost exactly the same: cycles, per-core per-pipe busy
    cycles, bytes per path, instruction count and workspace are identical."""
    rng = rng_for("timing", soc, dtype_id(dtype), layout)
    kw = _layouts(layout, rng, dtype)
    f = simulator.run("SiluBackward", soc=soc, trace=False, **{k: v.copy() for k, v in kw.items()})
    t = simulator.run("SiluBackward", soc=soc, mode="timing", trace=False,
                      **{k: v.copy() for k, v in kw.items()})
    assert f.report.mode == "functional" and t.report.mode == "timing"
    assert t.cycles == f.cycles and t.time_us == f.time_us
    assert t.workspace_size == f.workspace_size
    assert t.report.instructions == f.report.instructions
    assert t.report.cores == f.report.cores
    assert t.report.paths == f.report.paths
    assert t.report.device_memory == f.report.device_memory
    assert_silu_close(f.gradInput, kw["gradOutput"], kw["self"], layout)


@pytest.mark.parametrize("soc", SILU_SOCS)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_same_call_twice_is_bit_identical(soc, layout):
    rng = rng_for("twice", soc, layout)
    kw = _layouts(layout, rng, F16)
    a = simulator.run("SiluBackward", soc=soc, **{k: v.copy() for k, v in kw.items()})
    b = simulator.run("SiluBackward", soc=soc, **{k: v.copy() for k, v in kw.items()})
    assert a.cycles == b.cycles                 # exactly, not approximately
    assert a.report.to_dict() == b.report.to_dict()
    assert a.gradInput.tobytes() == b.gradInput.tobytes()
    assert a.trace.to_chrome() == b.trace.to_chrome()


@soc_dtype
@pytest.mark.parametrize("shape,bandwidth", [((4096,), None), ((129, 37), None),
                                             ((1 << 20,), None), ((1 << 20,), 100.0)],
                         ids=["4096", "129x37", "1M", "1M-100GBps"])
def test_cycles_not_below_the_device_memory_bound(soc, dtype, shape, bandwidth):
    """The call cannot beat physics: the two inputs start in device memory (nothing has read them,
    so the L2 is cold) and must cross the device-memory channel at least once, so
        cycles >= 2 * n * itemsize / (bandwidth in bytes per cycle),
    and also >= whatever the model itself says went through device memory. The 100 GB/s what-if
    makes the bound tight for a large call."""
    profile = simulator.load_profile(soc)
    if bandwidth is not None:
        profile = profile.override({"device_memory.bandwidth_GBps": bandwidth})
    n = int(np.prod(shape))
    x = np.zeros(shape, dtype)
    r = simulator.run("SiluBackward", profile=profile, gradOutput=x, self=x.copy(),
                      mode="timing", trace=False)
    per_cycle = profile.device_memory.bandwidth_GBps * 1e9 / (profile.clock_mhz * 1e6)
    compulsory = 2 * n * np.dtype(dtype).itemsize
    assert r.cycles >= compulsory / per_cycle
    assert r.cycles >= r.report.device_memory["bytes"] / per_cycle
    launch = profile.runtime.launch_overhead_us * profile.clock_mhz
    assert r.cycles >= launch
    if bandwidth is not None:
        assert r.cycles < 3 * compulsory / per_cycle + launch, "the bound should be nearly tight"


@pytest.mark.parametrize("n,tiling", [
    (13952, {"blockLength": 13952, "tileLength": 4096}),     # tiles start on 512-B L2 lines
    (18432, {"blockLength": 2304, "tileLength": 2304}),      # blocks start on lines
    (13952, {"blockLength": 13952, "tileLength": 6976}),     # a tile ends mid-line
    (17408, {"blockLength": 2176, "tileLength": 2176}),      # a block ends mid-line
], ids=["aligned-tiles", "aligned-blocks", "tile-splits-a-line", "block-splits-a-line"])
def test_device_memory_bytes_cover_the_compulsory_reads(n, tiling):
    """On a fresh device each input byte is read from device memory at least once; the report's
    device-memory bytes must count them (they feed the roofline and the 'bound by' verdict).
    FLOAT16 on Ascend910B1 with forced tilings whose tiles / blocks do or do not start on 512-byte
    L2 lines."""
    x = np.zeros(n, F16)
    r = simulator.run("SiluBackward", soc="Ascend910B1", gradOutput=x, self=x.copy(),
                      mode="timing", trace=False, tiling=tiling)
    assert r.report.tiling["blockLength"] == tiling["blockLength"]
    assert r.report.tiling["tileLength"] == tiling["tileLength"]
    assert r.report.device_memory["bytes"] >= 2 * n * 2


# ---- the seed document's example, through the low-level API -------------------------------------
@pytest.mark.parametrize("soc", SILU_SOCS)
def test_seed_document_example(soc):
    """The C++ sample of the aclnnSiluBackward document, call by call (pyACL convention: out-values
    then the status): gradOut = ones(2, 3), self = 1..6, FLOAT. The printed values
    ("out result[i] is: %f") equal the reference's."""
    with acl.use_runtime(acl.Runtime()):
        assert acl.aclInit(None, soc=soc) == 0
        assert acl.aclrtSetDevice(0) == 0
        stream, ret = acl.aclrtCreateStream()
        assert ret == 0

        def create(host, shape, dtype):
            size = host.nbytes
            addr, ret = acl.aclrtMalloc(size, 0)
            assert ret == 0
            assert acl.aclrtMemcpy(addr, size, host, size, aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE) == 0
            strides = [1] * len(shape)
            for i in range(len(shape) - 2, -1, -1):
                strides[i] = shape[i + 1] * strides[i + 1]
            t = acl.aclCreateTensor(shape, dtype, strides, 0, aclFormat.ACL_FORMAT_ND, shape, addr)
            assert t is not None
            return addr, t

        shape = [2, 3]
        grad_out_host = np.array([1, 1, 1, 1, 1, 1], np.float32)
        self_host = np.array([1, 2, 3, 4, 5, 6], np.float32)
        go_addr, grad_out = create(grad_out_host, shape, aclDataType.ACL_FLOAT)
        x_addr, self_t = create(self_host, shape, aclDataType.ACL_FLOAT)
        gi_addr, grad_in = create(np.zeros(6, np.float32), shape, aclDataType.ACL_FLOAT)

        ws_size, executor, ret = aclnn.aclnnSiluBackwardGetWorkspaceSize(grad_out, self_t, grad_in)
        assert ret == 0, acl.aclGetRecentErrMsg()
        ws_addr = None
        if ws_size > 0:
            ws_addr, ret = acl.aclrtMalloc(ws_size, 0)
            assert ret == 0
        assert aclnn.aclnnSiluBackward(ws_addr, ws_size, executor, stream) == 0
        assert acl.aclrtSynchronizeStream(stream) == 0

        out = np.zeros(6, np.float32)
        assert acl.aclrtMemcpy(out, out.nbytes, gi_addr, out.nbytes,
                               aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        printed = [f"out result[{i}] is: {v:f}" for i, v in enumerate(out)]
        expected = [f"out result[{i}] is: {v:f}" for i, v in
                    enumerate(silu_ref(grad_out_host, self_host).astype(np.float32))]
        assert printed == expected
        assert_silu_close(out, grad_out_host, self_host, "seed example")

        for t in (grad_out, self_t, grad_in):
            assert acl.aclDestroyTensor(t) == 0
        for a in (go_addr, x_addr, gi_addr):
            assert acl.aclrtFree(a) == 0
        if ws_size > 0:
            assert acl.aclrtFree(ws_addr) == 0
        assert acl.aclrtDestroyStream(stream) == 0
        assert acl.aclrtResetDevice(0) == 0
        assert acl.aclFinalize() == 0
