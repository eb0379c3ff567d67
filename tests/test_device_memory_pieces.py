"""Device memory's pace by the pieces a fetch reads, as the what-if docs/CALIBRATION.md describes
(device_memory.piece_overhead_bytes 83 on Ascend910B2, from the data-copy sample's 128-B rows with
the L2 off, dc_ub_offset_order; no profile sets it yet), against figures it was not set from:

* 512-B rows, each starting a line the L2 holds nothing of: CANN's M = 1 MatMuls on a 910B2
  (cann-bench, benchmarks/published_figures.yaml cb_matmul_9 and cb_matmul_11) stream their
  4096-wide FP16 weights in 256-column panels, 512-B rows 8 KB apart, at 32 MB in 29.93 us and
  64 MB in 56.59 us: 1.29 and 1.28 TB/s net of an empty 48-block kernel (3.98 us, memset_48block_a2);
* whole rows: Huawei's ascend-dmi copy test, 1,528 GB/s (flagperf_a3, an A3 die, which the A2
  chips' device memory follows).
"""
import numpy as np
import pytest

import simulator
from simulator.profile import load_profile
from simulator.kernel import DataCopyExtParams, DataCopyPad, GetBlockIdx, GlobalTensor, TBuf, TPipe, TPosition, half

ROWS, COLS = 4096, 8192          # 64 MB of FLOAT16
PIECES = {"device_memory.piece_overhead_bytes": 83}
CHIP_PANELS_GBPS = (33554432 / (29.93 - 3.98) + 67108864 / (56.59 - 3.98)) / 2 / 1e3
DMI_GBPS = 1528.0


def _read_panels(src, width: int):
    """Block b reads columns [b * width, (b + 1) * width) of the ROWS x COLS matrix, 64 rows a copy."""
    g = GlobalTensor(half)
    g.SetGlobalBuffer(src, ROWS * COLS)
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, 64 * width * 2)
    ub = buf.Get(half)
    col = GetBlockIdx() * width
    for r in range(0, ROWS, 64):
        DataCopyPad(ub, g[r * COLS + col], DataCopyExtParams(64, width * 2, (COLS - width) * 2, 0))


def _read_bands(src, rows: int):
    """Block b reads rows [b * rows, (b + 1) * rows) whole, 4 rows (64 KB, one piece) a copy."""
    g = GlobalTensor(half)
    g.SetGlobalBuffer(src, ROWS * COLS)
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, 4 * COLS * 2)
    ub = buf.Get(half)
    first = GetBlockIdx() * rows
    for r in range(first, first + rows, 4):
        DataCopyPad(ub, g[r * COLS], DataCopyExtParams(4, COLS * 2, 0, 0))


def _device_memory_gbps(body, blocks: int, arg: dict, pieces: dict = PIECES) -> float:
    rep = simulator.run_kernel(body, blocks, {"src": np.zeros(ROWS * COLS, np.float16), **arg}, mode="timing",
                               profile=load_profile("Ascend910B2").override(pieces), trace=False).report
    dm = rep.device_memory
    assert dm["bytes"] == ROWS * COLS * 2
    return dm["bytes"] / (dm["busy_cycles"] / (rep.clock_mhz * 1e6)) / 1e9


def test_the_chips_figures_as_read():
    assert 1270 < CHIP_PANELS_GBPS < 1300


def test_512_byte_rows_from_device_memory_at_the_m1_matmuls_pace():
    assert _device_memory_gbps(_read_panels, COLS // 256, {"width": 256}) == pytest.approx(CHIP_PANELS_GBPS, rel=0.06)


def test_whole_rows_at_the_copy_tests_pace():
    assert _device_memory_gbps(_read_bands, 32, {"rows": ROWS // 32}) == pytest.approx(DMI_GBPS, rel=0.03)


def test_without_the_figure_every_piece_streams_at_the_channels_rate():
    assert _device_memory_gbps(_read_panels, COLS // 256, {"width": 256}, {}) == pytest.approx(1531.2, rel=1e-9)
