"""aclnnMm and aclnnMatmul against float64 matrix products and torch.matmul (float64) where torch is
installed: random M, K, N (1 to a few hundred, across the 16-row fractals and the L0 tiles),
Matmul's 1-D and N-D operands and batched others (broadcast batch dims: one BatchMatMul launch), non-contiguous (column-major) operands, strided outputs, an out
dtype other than the inputs', every dtype and cubeMathType the series allows, on Ascend910A,
Ascend310P3 (FRACTAL_NZ inputs by TransData) and Ascend910B1 / B4. `MATMUL_CASES=N` runs more.

Tolerance, as for the convolution (tests/test_convolution_backward.py), with A = |self| @ |other|:
|out - ref| <= (2 u_c + max(1e-5, K 2^-24)) A + u_o |ref| + s_o, u_c the Cube's input dtype's unit
roundoff (HF32 2^-12), u_o the output's, s_o half its smallest subnormal step.
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import simulator
from conftest import BF16, F16, F32, UNIT, VECTOR_CHIPS, assert_status, assert_within, cube_dtype
from simulator import TensorLayout as T

CHIPS = VECTOR_CHIPS
N_CASES = int(os.environ.get("MATMUL_CASES", "60"))
CUBE_UNIT = {"FLOAT16": 2.0 ** -11, "BF16": 2.0 ** -8, "HF32": 2.0 ** -12, "FLOAT": 2.0 ** -24}


def draw_case(seed: int) -> dict:
    rng = np.random.default_rng([seed, 113])
    soc = list(CHIPS)[seed % len(CHIPS)]
    series = CHIPS[soc]
    dtypes = [F16, F32] + ([BF16] if series == "A2" else [])
    dtype = dtypes[int(rng.integers(0, len(dtypes)))]
    maths = [1, 2] if dtype == F32 and series != "A2" else ([0, 1] if dtype == BF16 else [0, 1, 2, 3])
    hi = 400 if rng.random() < 0.2 else 70
    M, K, N = (int(rng.integers(1, hi)) for _ in range(3))
    op = "Mm" if rng.random() < 0.4 else "Matmul"
    xs, ws = (M, K), (K, N)
    if op == "Matmul":
        form = int(rng.integers(0, 9))
        xs = {0: (K,), 1: (M, K), 2: (2, 3, M, K), 3: (M, K), 4: (3, M, K), 5: (3, M, K), 6: (K,), 7: (2, 1, M, K),
              8: (M, K)}[form]
        ws = {3: (K,), 5: (3, K, N), 6: (2, K, N), 7: (1, 3, K, N), 8: (2, 2, K, N)}.get(form, (K, N))
    out = dtypes[int(rng.integers(0, len(dtypes)))] if rng.random() < 0.2 else dtype
    return dict(seed=seed, soc=soc, op=op, xs=xs, ws=ws, dtype=dtype, out=out, math=int(rng.choice(maths)),
                fortran=bool(rng.random() < 0.25 and len(xs) == 2 and len(ws) <= 2),
                strided_out=bool(rng.random() < 0.15 and (op == "Mm" or len(ws) > 2)))


CASES = [draw_case(i) for i in range(N_CASES)]


def _id(c) -> str:
    return (f"seed{c['seed']}-{c['soc']}-{c['op']}-{'x'.join(map(str, c['xs']))}@{'x'.join(map(str, c['ws']))}-"
            f"{c['dtype'].name}-to-{c['out'].name}-m{c['math']}")


def _run(c):
    rng = np.random.default_rng(11_000 + c["seed"])
    x = rng.standard_normal(c["xs"]).astype(c["dtype"])
    w = rng.standard_normal(c["ws"]).astype(c["dtype"])
    if c["fortran"]:
        x, w = np.asfortranarray(x), (np.asfortranarray(w) if w.ndim == 2 else w)
    kept = (x.copy(), w.copy())
    shape = np.matmul(np.zeros(c["xs"]), np.zeros(c["ws"])).shape
    right = "mat2" if c["op"] == "Mm" else "other"
    buf = None
    if c["strided_out"]:
        buf = np.full(shape[:-1] + (2 * shape[-1],), np.nan, c["out"])
        out = buf[..., ::2]
    else:
        out = np.zeros(shape, c["out"])
    r = simulator.run(c["op"], c["soc"], self=x, **{right: w}, out=out, cubeMathType=c["math"])
    assert np.array_equal(x, kept[0]) and np.array_equal(w, kept[1]), "an input was modified"
    got = r.outputs["out"]
    if buf is not None:
        assert np.isnan(buf[..., 1::2].astype(np.float32)).all(), "a gap of the strided output was written"
        got = buf[..., ::2]
    return x, w, got


def _close(c, got, ref, mag, what):
    comp = cube_dtype(CHIPS[c["soc"]], c["dtype"], c["math"])
    K = c["xs"][-1]
    tol = ((2 * CUBE_UNIT[comp] + max(1e-5, K * 2.0 ** -24)) * mag + UNIT[c["out"]] * np.abs(ref)
           + float(ml_dtypes.finfo(c["out"]).smallest_subnormal) / 2)
    assert_within(got, ref, tol, what)


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_matmul_matches_the_product(c):
    x, w, got = _run(c)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref, mag = np.matmul(x64, w64), np.matmul(np.abs(x64), np.abs(w64))
    assert got.shape == ref.shape and got.dtype == c["out"]
    _close(c, got, ref, mag, _id(c))


@pytest.mark.parametrize("c", CASES[:25], ids=[_id(c) for c in CASES[:25]])
def test_matmul_matches_torch(c):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    x, w, got = _run(c)
    tx, tw = (torch.from_numpy(np.ascontiguousarray(a).astype(np.float64)) for a in (x, w))
    _close(c, got, torch.matmul(tx, tw).numpy(), torch.matmul(tx.abs(), tw.abs()).numpy(), f"{_id(c)} vs torch")


def test_launches_are_canns():
    r = simulator.run("Mm", "Ascend910B1", mode="timing", self=T((256, 512), F16), mat2=T((512, 384), F16),
                      cubeMathType=0)
    assert [x["name"] for x in r.report.launches] == ["MatMul"]
    r = simulator.run("Mm", "Ascend910B1", mode="timing", self=T((256, 512), F32), mat2=T((512, 384), F32),
                      cubeMathType=0)
    assert [x["name"] for x in r.report.launches] == ["Transpose(mat2)", "MatMul"]
    r = simulator.run("Mm", "Ascend910A", mode="timing", self=T((256, 512), F16), mat2=T((512, 384), F16),
                      cubeMathType=0)
    assert [x["name"] for x in r.report.launches] == ["TransData(ND -> FRACTAL_NZ)"] * 2 + ["MatMul"]


def _args(**over):
    a = dict(self=T((8, 16), F16), mat2=T((16, 4), F16), out=T((8, 4), F16), cubeMathType=0)
    a.update(over)
    return a


STATUS = {
    "Mm: null mat2": (161001, "Mm", "Ascend910B1", _args(mat2=None)),
    "Mm: bf16 on 910A": (161002, "Mm", "Ascend910A", _args(self=T((8, 16), BF16), mat2=T((16, 4), BF16),
                                                           out=T((8, 4), BF16))),
    "Mm: 1-D self": (161002, "Mm", "Ascend910B1", _args(self=T((16,), F16), out=T((4,), F16))),
    "Mm: K differs": (161002, "Mm", "Ascend910B1", _args(mat2=T((15, 4), F16))),
    "Mm: out shape": (161002, "Mm", "Ascend910B1", _args(out=T((8, 5), F16))),
    "Mm: FP32 KEEP_DTYPE on 910A": (161002, "Mm", "Ascend910A", _args(self=T((8, 16), F32), mat2=T((16, 4), F32),
                                                                      out=T((8, 4), F32))),
    "Mm: cubeMathType 7": (161002, "Mm", "Ascend910B1", _args(cubeMathType=7)),
    "Matmul: batch dims do not broadcast": (161002, "Matmul", "Ascend910B1", dict(
        self=T((2, 8, 16), F16), other=T((3, 16, 4), F16), out=T((3, 8, 4), F16), cubeMathType=0)),
    "Matmul: contracted dims differ (batched)": (161002, "Matmul", "Ascend910B1", dict(
        self=T((2, 8, 16), F16), other=T((2, 15, 4), F16), out=T((2, 8, 4), F16), cubeMathType=0)),
}


@pytest.mark.parametrize("name", list(STATUS))
def test_documented_status_codes(name):
    status, op, soc, args = STATUS[name]
    assert_status(op, soc, args, status)


@pytest.mark.parametrize("soc", list(CHIPS))
def test_a_short_product_with_wide_rows_runs(soc):
    """M = 16 rows against 49152 columns: the L0C sub-tiles a core keeps are capped by the chip's
    event ids (4 on the training series), as its CO1 queue needs one each."""
    from ops.matmul.kernel import gemm_tiling
    assert gemm_tiling(16, 49152, 64, "FLOAT16", soc).stepN > 1     # enough tiles to keep wide ones
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((16, 64)).astype(F16), rng.standard_normal((64, 49152)).astype(F16)
    r = simulator.run("Mm", soc, self=x, mat2=w, cubeMathType=0)
    ref, mag = x.astype(np.float64) @ w.astype(np.float64), np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64))
    assert_within(r.outputs["out"], ref, (2 * 2.0 ** -11 + 1e-5) * mag + 2.0 ** -11 * np.abs(ref) + 2.0 ** -25,
                  f"16x64 @ 64x49152 on {soc}")


@pytest.mark.parametrize("soc", list(CHIPS))
@pytest.mark.parametrize("M, K, N, fortran", [(33, 70000, 20, False), (17, 100, 70001, False), (9, 65536, 24, True)])
def test_rows_65536_or_more_elements_apart_run(soc, M, K, N, fortran):
    """An ND -> NZ copy's srcDValue is 16 bits: operands whose rows lie 65,536 or more elements
    apart (A's K, B's N, B^T's K) are copied a row at a time on the chips that copy ND -> NZ, as
    catlass does, not refused. Entries of -1, 0 and 1 make every product and sum exact (FP32
    accumulation, |sums| far below 2048, FLOAT16's last exact integer), so any element out of
    place shows."""
    rng = np.random.default_rng(M)
    x = rng.integers(-1, 2, (M, K)).astype(F16)
    w = rng.integers(-1, 2, (K, N)).astype(F16)
    if fortran:
        w = np.asfortranarray(w)
    r = simulator.run("Mm", soc, self=x, mat2=w, cubeMathType=0)
    ref = x.astype(np.float64) @ w.astype(np.float64)
    assert np.abs(ref).max() < 2048
    np.testing.assert_array_equal(r.outputs["out"].astype(np.float64), ref, err_msg=f"{M}x{K} @ {K}x{N} on {soc}")


@pytest.mark.parametrize("M, K, N, blocks", [(1, 4096, 4096, 16), (1, 8192, 4096, 16), (128, 4096, 4096, 16),
                                              (512, 4096, 4096, 64)])
def test_a_short_product_keeps_its_tiles_on_every_core(M, K, N, blocks):
    """CANN's MatMulV3 base tiling on a 24-core A2 (hicann/ops-nn matmul_v3_base_tiling.cpp,
    DoSmallShapeTiling / CalcBase: the N width with the least (baseM + baseN) x rounds) gives these
    calls 16 x 256 (M = 1) or 128 x 256 blocks, one per L0C, B's L1 tile 4 x 64 deep: as many
    output tiles as `blocks`, on min(blocks, 24) cores."""
    from ops.matmul.kernel import gemm_tiling
    t = gemm_tiling(M, N, K, "FLOAT16", "Ascend910B2")
    assert (t.baseM, t.baseN * t.stepN, t.mTiles * t.nTiles, t.usedCoreNum) == \
        (min(128, max(16, M)), 256, blocks, min(blocks, 24))
    assert t.l1K >= 256


@pytest.mark.parametrize("op, kw", [
    ("Mm", dict(self=np.ones((3, 0), F16), mat2=np.ones((0, 4), F16))),
    ("Matmul", dict(self=np.ones((2, 3, 0), F32), other=np.ones((2, 0, 4), F32))),
])
def test_an_empty_contraction_is_zeros(op, kw):
    r = simulator.run(op, "Ascend910B1", cubeMathType=1, **kw)
    assert r.outputs["out"].shape == np.matmul(*[np.zeros(a.shape) for a in kw.values()]).shape
    assert not r.outputs["out"].any()


@pytest.mark.parametrize("tiling", [{"baseM": 24}, {"baseN": 7}, {"baseM": 512, "baseN": 512}])
def test_a_forced_tile_that_cannot_work_is_a_tiling_error(tiling):
    assert_status("Mm", "Ascend910B1", _args(tiling=tiling), 561002)


@pytest.mark.parametrize("m_tiles, n_tiles", [(4, 16), (16, 8), (11, 4), (6, 9), (1, 16), (7, 1), (12, 18)])
def test_matmul_v3_deals_every_output_tile_once(m_tiles, n_tiles):
    """MatMulV3's diagonal order (ops-nn `MatmulBaseBlock::UpdateBasicIndex`) shifts a column after
    every lcm(m, n) tasks; without that shift, tile counts sharing a factor would deal some tiles
    twice and never others."""
    from ops.matmul.kernel import diagonal_tile
    dealt = [diagonal_tile(t, m_tiles, n_tiles) for t in range(m_tiles * n_tiles)]
    assert sorted(dealt) == [(m, n) for m in range(m_tiles) for n in range(n_tiles)]


def test_matmul_v3_reads_every_panel_in_its_first_round():
    """The point of the order, on cann-bench's M = 512 x 4096 x 4096 call: its first round of 24
    tiles (4 x 16 of them) covers all 4 A panels and all 16 B panels, where catlass's windows of 3
    tile rows cover 3 and 8."""
    from ops.matmul.kernel import diagonal_tile, swizzled_tile
    first = [diagonal_tile(t, 4, 16) for t in range(24)]
    assert ({m for m, _ in first}, {n for _, n in first}) == (set(range(4)), set(range(16)))
    swizzled = [swizzled_tile(t, 4, 16, 3, 0) for t in range(24)]
    assert (len({m for m, _ in swizzled}), len({n for _, n in swizzled})) == (3, 8)


def _mm_tiling(soc, M, K, N, **kw):
    x, w = np.zeros((M, K), F16), np.zeros((K, N), F16)
    return simulator.plan("Mm", soc, self=x, mat2=w, cubeMathType=0, **kw).tiling


@pytest.mark.parametrize("M, K, N, base_m", [(1009, 1024, 1024, 96), (1024, 1024, 1024, 96), (1024, 32, 1024, 96),
                                             (512, 4096, 4096, 128), (560, 64, 8192, 112), (2048, 4096, 2048, 128)])
def test_matmul_v3_balances_a_few_rounds_over_24_cores(M, K, N, base_m):
    """What ops-nn's `OptimizeLoadBalanceBasicKernel` says it does on a 24-core A2: under four rounds
    of 128 x 256 tiles, the baseM that fills the last round best (1024 x 1024: 8 x 4 = 32 tiles, 48
    slots in two rounds, 12 tile rows of 96; the same at K = 32, whose L0 tiles are 32 deep here and
    64 in CANN's); from four rounds on, an M up to 672 gives up the rows its tile rows do not need
    (560: five tile rows of 128 or of 112)."""
    t = _mm_tiling("Ascend910B2", M, K, N)
    assert (t["baseM"], t["tileOrder"]) == (base_m, "MatMulV3 diagonal")


def test_matmul_v3_order_and_balance_only_where_its_kernel_runs_them():
    """The balance is for 24 cores only ("other core counts not verified") and not for forced
    tiles or a transposed A; the diagonal order is the A2 / A3 kernel's, for one product whose A, B
    and C fit an L2 tile (100 MiB at 192 MiB of L2); the rest keep catlass's swizzle."""
    assert _mm_tiling("Ascend910B3", 1024, 1024, 1024)["baseM"] == 128                       # 20 cores
    assert _mm_tiling("Ascend910B2", 1024, 1024, 1024, tiling={"baseM": 128})["baseM"] == 128
    x = np.zeros((1024, 1024), F16).T
    assert simulator.plan("Mm", "Ascend910B2", self=x, mat2=np.zeros((1024, 1024), F16),
                          cubeMathType=0).tiling["baseM"] == 128
    assert _mm_tiling("Ascend910B2", 8192, 8192, 8192)["tileOrder"] == "catlass swizzle"        # 384 MiB
    assert _mm_tiling("Ascend910A", 1024, 1024, 1024)["tileOrder"] == "catlass swizzle"         # not MatMulV3
    batched = simulator.plan("Matmul", "Ascend910B2", self=np.zeros((2, 1024, 1024), F16),
                             other=np.zeros((2, 1024, 1024), F16), cubeMathType=0).tiling
    assert batched["tileOrder"] == "catlass swizzle"
    addmm = simulator.plan("Addmm", "Ascend910B2", self=np.zeros((1024,), F16), mat1=np.zeros((1024, 1024), F16),
                           mat2=np.zeros((1024, 1024), F16), beta=1.0, alpha=1.0, cubeMathType=0).tiling
    assert (addmm["baseM"], addmm["tileOrder"]) == (96, "MatMulV3 diagonal")
