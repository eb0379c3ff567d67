"""The copy of a broadcast view (ops/broadcast_copy.py): an operand expanded to an output's shape
(stride-0 dimensions) made dense by loading its values once per UB tile and repeating them with
the vector unit, not one burst per output element.

* the kernel alone, bit-exact against numpy's own broadcast_to, for every element size, on random
  broadcast views of random slices (column, row and scalar sources, repeats outside the unit,
  rows longer than a tile, units split over blocks, short units sharing a tile); the storage is
  left as it was; timing mode
  gives the functional cycles;
* operators whose operand is expanded this way, against float64 formulas: Mul of a (C, 1) scale
  against (N, C, L) (ranks differ), Add of a (C, 1, 1) bias, Addmm with a column or scalar self,
  at sizes the run copy planned one Python object and one DataCopyPad per element for (a
  MemoryError, or tens of millions of cycles);
* it pays: fewer cycles than copying a dense view of the same shape.
"""
from __future__ import annotations

import numpy as np
import pytest

import ops.common as oc
import simulator
from ops.broadcast_copy import broadcast_copy_body, plan_broadcast_copy
from conftest import BF16, F16, F32
from simulator import TensorLayout as T

SOCS = ["Ascend910B1", "Ascend910A", "Ascend310P3", "Ascend910B4"]


def _profile(soc):
    from simulator.profile import load_profile
    return load_profile(soc)


def _bits(a):
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def _random_broadcast_view(rng, dtype):
    """A random slice of a random-bits base, given size-1 axes and broadcast to a random shape
    (new leading axes too). Returns (base, view)."""
    rank = int(rng.integers(1, 5))
    sizes = [int(rng.choice([1, 2, 3, 7, 16, 33, 100, 513, 4000, 70000])) for _ in range(rank)]
    while np.prod(sizes) > 400_000:
        sizes = [max(1, s // 4) for s in sizes]
    src_shape = [1 if rng.random() < 0.5 else s for s in sizes]
    big = [s + int(rng.integers(0, 3)) for s in src_shape]
    isz = np.dtype(dtype).itemsize
    base = rng.integers(0, 256, size=int(np.prod(big)) * isz, dtype=np.uint8).view(dtype).reshape(big)
    starts = [int(rng.integers(0, b - s + 1)) for b, s in zip(big, src_shape)]
    src = base[tuple(slice(a, a + s) for a, s in zip(starts, src_shape))]
    lead = [int(rng.choice([2, 3, 5])) for _ in range(int(rng.integers(0, 2)))]
    return base, np.broadcast_to(src, tuple(lead) + tuple(sizes))


def _run(view, base, soc, mode="functional"):
    isz = base.itemsize
    off = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // isz
    p = _profile(soc)
    plan = plan_broadcast_copy(oc._merge_dims(view.shape, [s // isz for s in view.strides]), off, isz,
                               oc.vector_core_count(p), oc.ub_bytes(p))
    dense = np.zeros(view.shape, base.dtype)
    return plan, simulator.run_kernel(broadcast_copy_body, plan.block_dim if plan else 1,
                                      {"src_addr": base.reshape(-1), "dense_addr": dense.reshape(-1), "plan": plan},
                                      soc=soc, mode=mode, trace=False) if plan else None


@pytest.mark.parametrize("dtype", [np.float64, np.int32, F32, F16, BF16, np.int8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("seed", range(6))
def test_kernel_bit_exact(dtype, seed):
    rng = np.random.default_rng([seed, np.dtype(dtype).itemsize, 99])
    soc = SOCS[seed % len(SOCS)]
    done = 0
    for _ in range(100):
        if done == 3:
            break
        base, view = _random_broadcast_view(rng, dtype)
        kept = base.copy()
        plan, r = _run(view, base, soc)
        if plan is None:                # no repeated axis drawn, or the unit's values are strided
            continue
        assert np.array_equal(_bits(r["dense_addr"].reshape(view.shape)), _bits(np.ascontiguousarray(view))), \
            (soc, view.shape, view.strides)
        assert np.array_equal(_bits(r["src_addr"].reshape(base.shape)), _bits(kept))
        _, t = _run(view, base, soc, mode="timing")
        assert t.report.cycles == r.report.cycles
        done += 1
    assert done == 3, "too few broadcast views drawn"


@pytest.mark.parametrize("shape, strides, unit, packed", [
    ((100_000,), (0,), "a scalar", False),
    ((3, 50_000), (1, 0), "a column whose rows are longer than a tile", False),
    ((700, 7), (0, 1), "a short row", False),
    ((4, 64, 9, 300), (0, 300, 0, 1), "a row repeated inside and outside the unit", False),
    ((4, 64, 32, 56), (0, 56, 0, 1), "short units, their rows consecutive: several a tile", True),
    ((3, 64, 32, 57), (0, 60, 0, 1), "short units whose rows have gaps and are not 32-B long", True),
    ((256, 64, 32), (0, 1, 0), "a column unit repeated whole: loaded once a tile", True),
])
def test_units_and_tiles(shape, strides, unit, packed):
    base = (np.arange(sum((d - 1) * s for d, s in zip(shape, strides)) + 2) % 1999).astype(F16)
    view = np.lib.stride_tricks.as_strided(base[1:], shape, tuple(s * 2 for s in strides))
    plan, r = _run(view, base, "Ascend910B1")
    assert plan is not None, unit
    assert (plan.pack > 1) == packed, (unit, plan)
    assert np.array_equal(r["dense_addr"].reshape(shape), view), unit


def test_views_left_to_the_run_copy():
    """No stride-0 axis, or the unit's values not consecutive in storage (a column view of a
    row-major matrix, broadcast along rows): plan_broadcast_copy declines them."""
    cores, ub = 20, 192 * 1024
    assert plan_broadcast_copy(oc._merge_dims((64, 64), (64, 1)), 0, 2, cores, ub) is None
    assert plan_broadcast_copy(oc._merge_dims((64, 64), (1, 64)), 0, 2, cores, ub) is None
    assert plan_broadcast_copy(oc._merge_dims((64, 8), (5, 0)), 0, 2, cores, ub) is None
    assert plan_broadcast_copy(oc._merge_dims((64, 8), (1, 0)), 0, 2, cores, ub) is not None


def _close(out, want, dtype):
    tol = {F16: 2.0 ** -11, BF16: 2.0 ** -8, F32: 2.0 ** -24}[dtype]
    assert np.all(np.abs(out.astype(np.float64) - want) <= tol * np.abs(want) + 2.0 ** -25)   # subnormal half ulp


@pytest.mark.parametrize("soc", SOCS)
def test_operators_with_an_expanded_operand(soc):
    rng = np.random.default_rng(list(soc.encode()))
    dtype = F16
    x, s = rng.standard_normal((8, 64, 3001)).astype(dtype), rng.standard_normal((64, 1)).astype(dtype)
    r = simulator.run("Mul", soc, self=x, other=s)
    _close(r.outputs["out"], x.astype(np.float64) * s.astype(np.float64), dtype)
    x, b = rng.standard_normal((2, 96, 40, 40)).astype(dtype), rng.standard_normal((96, 1, 1)).astype(dtype)
    r = simulator.run("Add", soc, self=x, other=b, alpha=1.0)
    _close(r.outputs["out"], x.astype(np.float64) + b.astype(np.float64), dtype)
    m1, m2 = (rng.integers(-2, 3, shape).astype(dtype) for shape in ((300, 16), (16, 2000)))
    for self_ in (rng.integers(-4, 5, (300, 1)).astype(dtype), np.array(3.0, dtype)):
        r = simulator.run("Addmm", soc, self=self_, mat1=m1, mat2=m2, beta=0.5, alpha=1.0, cubeMathType=1)
        want = 0.5 * self_.astype(np.float64) + m1.astype(np.float64) @ m2.astype(np.float64)
        assert np.array_equal(r.outputs["out"].astype(np.float64), want)       # small integers and halves: exact


def test_a_large_expansion_plans_a_tile_at_a_time():
    """A (64, 1) scale against (8, 64, 100000) and a column bias of an 8192 x 8192 Addmm: the run
    copy planned an object and a DataCopyPad per output element (MemoryError). Now the whole
    call, kernels included, takes a few instructions per KiB of output (a run copy: ~1,000)."""
    for op, kw, nbytes in [
            ("Mul", dict(self=T((8, 64, 100000), F16), other=T((64, 1), F16)), 8 * 64 * 100000 * 2),
            ("Addmm", dict(self=T((8192, 1), F16), mat1=T((8192, 64), F16), mat2=T((64, 8192), F16), beta=0.5,
                           alpha=1.0, cubeMathType=0), 8192 * 8192 * 2)]:
        e = simulator.estimate(op, "Ascend910B2", **kw)
        assert e.instructions < 4 * nbytes / 1024, (op, e.instructions)


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910A"])
def test_it_pays_against_copying_a_dense_view(soc):
    """Expanding a (256, 1, 1) bias to (8, 256, 56, 56) (given as the expanded view, which Add
    copies out) reads 512 B; a dense (8, 256, 56, 56) view of a bigger tensor reads all it writes.
    The expansion must cost less (it took 39 million cycles on Ascend910A as a run copy, one burst
    per element)."""
    expanded = T((8, 256, 56, 56), F16, strides=(0, 1, 0, 0))
    bias = simulator.run("Add", soc, mode="timing", self=T((8, 256, 56, 56), F16), other=expanded,
                         alpha=1.0).report.launches
    bc = next(la for la in bias if la["name"] == "Contiguous(other)")
    big = np.zeros((8, 256, 56, 64), F16)[..., :56]
    dense = simulator.run("Add", soc, mode="timing", self=T((8, 256, 56, 56), F16), other=big,
                          alpha=1.0).report.launches
    dc = next(la for la in dense if la["name"] == "Contiguous(other)")
    assert bc["cycles"] < dc["cycles"], (bc["cycles"], dc["cycles"])
