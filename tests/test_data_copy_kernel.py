"""examples/data_copy_kernel.py, the Ascend C data-copy sample behind the ascendc_data_copy_a2
figures, against what its README measured on the chip besides time: the L2's read hit rate of
its repeated scenarios (r0 + r1 read hits over hits and miss-allocates: 0.006 % and 0.005 % when
the whole matrix is read four times over, 75.00 % when each column quarter is), and the bytes a
cold single pass moves. The matrix is scaled down with the L2 (a 4 MB what-if) so that, as on the
chip, the whole matrix does not fit and a quarter does."""
import sys
from pathlib import Path

import numpy as np
import pytest

import simulator
from simulator.kernel import GM_ADDR, CacheMode, DataCopy, GlobalTensor, TBuf, TPipe, TPosition, half

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from data_copy_kernel import DataCopyTiling, run  # noqa: E402
from simulator.profile import load_profile  # noqa: E402

M, N = 768, 4096          # 6 MB of FLOAT16 against a 4 MB L2: a quarter (1.5 MB) fits


@pytest.mark.parametrize("path, blocks", [("L1", 24), ("UB", 48)])
@pytest.mark.parametrize("order, low, high", [("whole4", 0.0, 0.01), ("split4", 0.745, 0.755)])
def test_repeated_reads_hit_the_l2_as_measured(path, blocks, order, low, high):
    profile = load_profile("Ascend910B2").override({"l2.bytes": 4 << 20})
    rep = run("Ascend910B2", path, DataCopyTiling(M, N, blocks, 16, 256, order=order), profile=profile).report
    assert low <= rep.l2["hit_rate"] <= high, rep.l2
    assert rep.l2["bytes"] == 4 * M * N * 2


@pytest.mark.parametrize("path, blocks", [("L1", 24), ("UB", 48)])
def test_one_cold_pass_reads_the_matrix_from_device_memory_once(path, blocks):
    rep = run("Ascend910B2", path, DataCopyTiling(M, N, blocks, 16, 256)).report
    assert rep.device_memory["bytes"] == M * N * 2 and rep.l2["hit_rate"] == 0.0


def test_a_tiling_that_does_not_split_into_whole_tiles_is_refused():
    with pytest.raises(ValueError, match="whole tiles"):
        run("Ascend910B2", "L1", DataCopyTiling(M, N, 24, 48, 256))


def _read_twice(src: GM_ADDR, n: int, uncached: bool):
    """One block reads `n` FLOAT16 elements from GM into UB twice, its GlobalTensor's L2 off or on."""
    g = GlobalTensor(half)
    g.SetGlobalBuffer(src, n)
    if uncached:
        g.SetL2CacheHint(CacheMode.CACHE_MODE_DISABLE)
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, 8192 * 2)
    ub = buf.Get(half)
    for _ in range(2):
        for i in range(0, n, 8192):
            DataCopy(ub, g[i], 8192)


@pytest.mark.parametrize("uncached", [False, True])
def test_a_tensor_with_the_l2_off_reads_device_memory_every_time(uncached):
    """CANN's SetL2CacheHint page: CACHE_MODE_DISABLE keeps the tensor's data out of the L2, so
    a second read of it goes to device memory again; the default mode finds it in the L2."""
    n = 8192 * 16
    rep = simulator.run_kernel(_read_twice, 1, {"src": np.zeros(n, np.float16), "n": n, "uncached": uncached},
                               soc="Ascend910B2", mode="timing", trace=False).report
    assert rep.device_memory["bytes"] == (2 if uncached else 1) * n * 2
    assert rep.l2["hit_rate"] == (0.0 if uncached else 0.5)


def test_the_l2_hint_is_refused_where_the_chip_has_none():
    with pytest.raises(simulator.KernelError, match="SetL2CacheHint.*Atlas A2 / A3 only"):
        simulator.run_kernel(_read_twice, 1, {"src": np.zeros(8192, np.float16), "n": 8192, "uncached": True},
                             soc="Ascend910A", mode="timing", trace=False)


def _hit_rate_per_core(figure_ids: tuple[str, str], cores: int, clock_mhz: float) -> float:
    """B a cycle a core at which the chip served the L2's hits in the data-copy sample's split4
    row (each column quarter read four times): its four passes' bytes less the misses' pass, at
    the pace the same path's "4 times" row (no hits) read device memory, over the rest of its time."""
    import yaml
    figs = {f["id"]: f for f in yaml.safe_load((Path(__file__).resolve().parent.parent / "benchmarks"
                                                 / "published_figures.yaml").read_text())["figures"]}
    split4, whole4 = (figs[i] for i in figure_ids)
    matrix = 12288 * 12288 * 2
    cold_us = whole4["measured"] / 4                    # one pass of the matrix from device memory
    hits_us = split4["measured"] - cold_us              # the three passes the L2 served
    return 3 * matrix / (hits_us * 1e-6) / cores / (clock_mhz * 1e6)


def test_nd2nz_copies_served_by_the_l2_stream_no_faster_than_the_chips_converter():
    """One core, 128 KB ND -> NZ tiles read four times a column quarter: MTE2 moves them at the
    rate the chip served its hits a core (dc_l1_split4: about 110 B a cycle), not at twice it, as
    two copies in flight each at the burst rate did; plain copies into UB do overlap past one
    copy's sustained rate (msKPP's 44 B a cycle; the chip about 66, dc_ub_split4)."""
    chip_l1 = _hit_rate_per_core(("dc_l1_split4", "dc_l1_whole4"), 24, 1800)
    chip_ub = _hit_rate_per_core(("dc_ub_split4", "dc_ub_whole4"), 48, 1800)
    assert 100 < chip_l1 < 120 and 55 < chip_ub < 75          # the published rows, as read
    rates = {}
    for path in ("L1", "UB"):
        rep = run("Ascend910B2", path, DataCopyTiling(M, N, 1, 64, 1024, order="split4")).report
        rates[path] = rep.l2["bytes"] / rep.pipes["PIPE_MTE2"]["busy_cycles"]
    assert 0.85 * chip_l1 < rates["L1"] < 1.1 * chip_l1, rates
    assert 44 < rates["UB"] < chip_ub, rates
