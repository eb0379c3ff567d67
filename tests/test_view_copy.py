"""The transpose path of the Contiguous / ViewCopy kernels (ops/common.py): a view whose innermost
dimension is not unit-stride but some other dimension is (a transpose / permutation) is copied as
2-D tiles, contiguous runs in and out and a vector Transpose in UB, instead of one 32-B burst per
element.

* random permuted views (2-D to 5-D, odd sizes, offsets, slices) as SiluBackward's inputs and
  output, against the float64 reference with tests/test_silu_backward.py's tolerances; the output
  storage outside the view keeps its NaN sentinel; timing-only cycles equal functional;
* the kernel alone (simulator.run_kernel), bit-exact for every element size (DOUBLE, INT32,
  FLOAT16, INT8...) both ways, tails included;
* the path is taken and pays: a 256x256 transpose moves >10x fewer L2 bytes in under half the
  cycles, a 3-D permutation needs >10x fewer instructions and cycles, than the generic run copy;
* views it must leave to the generic path (broadcast, overlapping, unit-stride innermost).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import ops.common as oc
import simulator

from conftest import BF16, F16, F32, assert_silu_close, dtype_id, random_data

SOC = "Ascend910B1"


def rng_for(*parts) -> np.random.Generator:
    return np.random.default_rng(list(repr(parts).encode()))


def _permuted_view(rng, shape, dtype, fill=None):
    """A view of `shape` into a bigger C-contiguous base: the base's axes permuted so that the
    base's last (contiguous) axis is NOT the view's last, a start offset on every axis, steps of
    1-2 on the other axes (step 1 on the contiguous one) and spare room. Returns (base, view)."""
    rank = len(shape)
    while True:
        perm = rng.permutation(rank)           # view axis i is base axis perm[i]
        if perm[-1] != rank - 1:
            break
    vaxis_contig = int(np.where(perm == rank - 1)[0][0])
    steps = [1 if i == vaxis_contig else int(rng.integers(1, 3)) for i in range(rank)]
    starts = [int(rng.integers(0, 3)) for _ in range(rank)]
    ext = [starts[i] + (shape[i] - 1) * steps[i] + 1 + int(rng.integers(0, 3)) for i in range(rank)]
    base_shape = [0] * rank
    for i in range(rank):
        base_shape[perm[i]] = ext[i]
    base = random_data(rng, tuple(base_shape), dtype) if fill is None \
        else np.full(base_shape, fill).astype(dtype)
    v = base.transpose(perm)
    v = v[tuple(slice(starts[i], starts[i] + (shape[i] - 1) * steps[i] + 1, steps[i])
                for i in range(rank))]
    assert v.shape == tuple(shape) and v.base is not None
    return base, v


class _Spy:
    """Records which views took the transpose path."""
    def __init__(self, monkeypatch):
        self.taken, self.declined = [], []
        orig = oc.plan_transpose_copy

        def spy(t, profile):
            p = orig(t, profile)
            (self.taken if p is not None else self.declined).append(
                (tuple(t.viewDims), tuple(t.stride)))
            return p
        monkeypatch.setattr(oc, "plan_transpose_copy", spy)


@pytest.mark.parametrize("dtype", [F16, F32, BF16], ids=dtype_id)
@pytest.mark.parametrize("rank", [2, 3, 4, 5])
@pytest.mark.parametrize("seed", range(2))
def test_permuted_views_silu(monkeypatch, dtype, rank, seed):
    rng = rng_for("perm", dtype_id(dtype), rank, seed)
    budget = {2: 300, 3: 60, 4: 20, 5: 11}[rank]
    shape = tuple(int(rng.integers(17 if rank == 2 else 2, budget)) | 1 for _ in range(rank))
    _, g = _permuted_view(rng, shape, dtype)
    _, x = _permuted_view(rng, shape, dtype)
    obase, out = _permuted_view(rng, shape, dtype, fill=np.nan)
    g0, x0 = g.copy(), x.copy()
    spy = _Spy(monkeypatch)
    r = simulator.run("SiluBackward", soc=SOC, gradOutput=g, self=x, gradInput=out, trace=False)
    assert r.gradInput is out
    assert_silu_close(out, g0, x0, f"{dtype_id(dtype)} shape {shape} strides {out.strides}")
    assert np.array_equal(g, g0) and np.array_equal(x, x0)
    assert int(np.isfinite(obase.astype(np.float64)).sum()) == out.size, \
        "the kernel wrote output storage outside the view"
    # every view took the transpose path, unless its (unit-stride dim x dims after it) slice is
    # under 256 elements (then the generic copy's runs are as good)
    assert len(spy.taken) + len(spy.declined) == 3
    for dims, strides in spy.declined:
        merged = oc._merge_dims(dims, strides)
        j = [s for _, s in merged].index(1)
        assert int(np.prod([d for d, _ in merged[j:]])) < 256, (dims, strides)
    assert spy.taken, spy.declined
    t = simulator.run("SiluBackward", soc=SOC, mode="timing", gradOutput=g, self=x,
                      gradInput=out, trace=False)
    assert t.report.cycles == r.report.cycles


# ---- the kernel alone, bit-exact for every element size ----------------------------------------
def _fake_tensor(view: np.ndarray, base: np.ndarray):
    isz = base.itemsize
    off = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // isz
    return SimpleNamespace(viewDims=list(view.shape), stride=[s // isz for s in view.strides],
                           offset=int(off), itemsize=isz, dtype=base.dtype)


def _run_copy(view, base, gather: bool, fast: bool, mode="functional"):
    """Run the Contiguous (gather) or ViewCopy (scatter) kernel body alone. Returns
    (storage after, dense after, report)."""
    t = _fake_tensor(view, base)
    dense = np.ascontiguousarray(view) if not gather else np.zeros(view.shape, base.dtype)
    storage = base.reshape(-1)
    if fast:
        plan = oc.plan_transpose_copy(t, _profile())
        assert plan is not None
        r = simulator.run_kernel(oc._transpose_copy_body, plan.block_dim,
                                 {"strided": storage, "dense": dense.reshape(-1), "plan": plan,
                                  "gather": gather}, soc=SOC, mode=mode, trace=False)
    else:
        bd, blocks = oc.plan_view_copy(t, _profile())
        slot = (oc.ub_bytes(_profile()) // 2) // 32 * 32
        r = simulator.run_kernel(oc._view_copy_body, bd,
                                 {"strided": storage, "dense": dense.reshape(-1), "blocks": blocks,
                                  "gather": gather, "isz": t.itemsize, "slot_bytes": slot},
                                 soc=SOC, mode=mode, trace=False)
    if mode != "functional":
        return None, None, r.report
    return r["strided"].reshape(base.shape), r["dense"].reshape(view.shape), r.report


_PROFILE = {}


def _profile():
    if "p" not in _PROFILE:
        from simulator.profile import load_profile
        _PROFILE["p"] = load_profile(SOC)
    return _PROFILE["p"]


def _bits(a):
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float32, F16, BF16, np.int8, np.uint8],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,axes", [((37, 301), (1, 0)), ((5, 70, 33), (2, 0, 1)),
                                        ((3, 9, 13, 40), (3, 1, 0, 2)), ((1030, 3), (1, 0))])
def test_kernel_bit_exact_both_ways(dtype, shape, axes):
    rng = rng_for("kernel", np.dtype(dtype).name, shape)
    big = tuple(s + 3 for s in shape)
    raw = rng.integers(0, 256, size=int(np.prod(big)) * np.dtype(dtype).itemsize, dtype=np.uint8)
    base = raw.view(dtype).reshape(big)                     # arbitrary bit patterns, NaNs too
    view = base[tuple(slice(1, 1 + s) for s in shape)].transpose(axes)
    # gather: storage -> dense
    st, dn, _ = _run_copy(view, base, gather=True, fast=True)
    assert np.array_equal(_bits(dn), _bits(np.ascontiguousarray(view)))
    assert np.array_equal(_bits(st), _bits(base))
    # scatter: dense -> storage (only the view's elements change)
    src = rng.integers(0, 256, size=view.size * view.itemsize, dtype=np.uint8).view(dtype)
    src = src.reshape(view.shape)
    t = _fake_tensor(view, base)
    plan = oc.plan_transpose_copy(t, _profile())
    r = simulator.run_kernel(oc._transpose_copy_body, plan.block_dim,
                             {"strided": base.reshape(-1), "dense": src.reshape(-1), "plan": plan,
                              "gather": False}, soc=SOC, trace=False)
    expect = base.copy()
    ev = expect[tuple(slice(1, 1 + s) for s in shape)].transpose(axes)
    ev[...] = src
    assert np.array_equal(_bits(r["strided"].reshape(big)), _bits(expect))
    tr = simulator.run_kernel(oc._transpose_copy_body, plan.block_dim,
                              {"strided": base.reshape(-1), "dense": src.reshape(-1), "plan": plan,
                               "gather": False}, soc=SOC, mode="timing", trace=False)
    assert tr.report.cycles == r.report.cycles


# ---- the path is taken and pays ----------------------------------------------------------------
def test_256x256_transpose_is_far_cheaper():
    base = (np.arange(256 * 256) % 2000).astype(F16).reshape(256, 256)
    view = base.T
    _, dn, fast = _run_copy(view, base, gather=True, fast=True)
    assert np.array_equal(dn, base.T)
    _, dn2, slow = _run_copy(view, base, gather=True, fast=False)
    assert np.array_equal(dn2, base.T)
    # the generic path reads a 32-B burst per 2-B element: 16x the L2 traffic, ~10x the MTE2 time
    assert fast.l2["bytes"] * 10 < slow.l2["bytes"], (fast.l2, slow.l2)
    assert fast.paths["GM_UB"]["busy_cycles"] * 5 < slow.paths["GM_UB"]["busy_cycles"]
    # on the cores (the launch overheads, ~3,700 cycles in each, are the same): 1.7x on the A2 chips,
    # whose GM paths keep short transfers in flight by the dozen (devices/_atlas_a2.yaml's window)
    on_core = [sum(l["core_cycles"] for l in r.launches) for r in (fast, slow)]
    assert on_core[0] * 1.5 < on_core[1], on_core
    # (in 2-D the generic path's one-element runs share a DataCopyPad per ~3000, so its
    # instruction count is only a few times the transpose path's; see the 3-D case below)
    assert fast.instructions * 2 < slow.instructions, (fast.instructions, slow.instructions)


def test_3d_permutation_far_fewer_instructions():
    """(K, Cin, Cout) -> (Cout, Cin, K), ConvTBC's weight: the generic path's runs of one element
    break every 3 elements; the transpose path moves whole tiles."""
    base = np.zeros((3, 96, 128), F16)
    view = base.transpose(2, 1, 0)
    _, _, fast = _run_copy(view, base, gather=True, fast=True, mode="timing")
    _, _, slow = _run_copy(view, base, gather=True, fast=False, mode="timing")
    assert fast.instructions * 10 < slow.instructions, (fast.instructions, slow.instructions)
    assert fast.cycles * 10 < slow.cycles, (fast.cycles, slow.cycles)


# ---- views left to the generic path ------------------------------------------------------------
@pytest.mark.parametrize("case", ["contiguous", "unit_inner", "broadcast", "overlap", "overlap2", "no_unit",
                                  "tiny"])
def test_declined_views(case):
    base = np.zeros((64, 64), F16)
    view = {"contiguous": base, "unit_inner": base[:, 3:40],
            "broadcast": np.broadcast_to(base[:1], (64, 64)).T,
            "overlap": np.lib.stride_tricks.as_strided(base, (40, 40), (2, 4)),
            "overlap2": np.lib.stride_tricks.as_strided(base, (8, 20, 30), (60, 2, 40)),
            "no_unit": base[::2, ::2].T, "tiny": base[:4, :4].T}[case]
    assert oc.plan_transpose_copy(_fake_tensor(view, base), _profile()) is None


# ---- ConvTbcBackward: its permuted (T, B, C) views on the transpose path -----------------------
@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910A"])
def test_conv_tbc_backward_takes_the_transpose_path(monkeypatch, soc):
    from test_convolution_backward import run_and_check_conv_tbc
    spy = _Spy(monkeypatch)
    run_and_check_conv_tbc(soc, 7, T=21, B=3, cin=40, cout=36, K=3, pad=1, trace=False)
    assert len(spy.taken) == 5 and not spy.declined, (spy.taken, spy.declined)


def test_regular_views_plan_the_same_tiles_a_stretch_at_a_time():
    """_regular_tiles (a stretch of equal-step runs at a time) against _piece_tiles (a run at a
    time, the plain algorithm) on random views: the same tiles, group for group. A 20-million-run
    view (Deformable DETR's gradient) planned in gigabytes the plain way."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(400):
        nd = int(rng.integers(1, 5))
        shape = [int(rng.integers(1, 9)) for _ in range(nd)]
        perm = rng.permutation(nd)
        pad = [int(rng.integers(0, 3)) for _ in range(nd)]
        strides, acc = [0] * nd, 1
        for ax in reversed(range(nd)):                 # a padded, permuted layout of the shape
            strides[perm[ax]] = acc
            acc *= shape[perm[ax]] + pad[perm[ax]]
        offset = int(rng.integers(0, 5))
        isz = int(rng.choice([1, 2, 4, 8]))
        slot = int(rng.choice([32, 64, 256, 4096]))
        want = oc._piece_tiles(shape, strides, offset, isz, slot)
        got = oc._regular_tiles(shape, strides, offset, isz, slot)
        if got is None:
            continue
        checked += 1
        assert got == want, (shape, strides, offset, isz, slot)
    assert checked > 150
    # DETR's encoder gradient: one level of four stacked, 20.7 M runs of 4 elements
    t0 = __import__("time").perf_counter()
    tiles = oc._regular_tiles([32, 32, 20197, 4], [10340864, 323152, 16, 1], 0, 4, 96 * 1024)
    assert sum(g.count for tile in tiles for g in tile) == 32 * 32 * 20197
    assert __import__("time").perf_counter() - t0 < 30
