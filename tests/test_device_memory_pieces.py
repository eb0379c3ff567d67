"""Device memory's pace by the pieces a fetch reads (device_memory.piece_overhead_bytes, 83 on the A2
and A3 chips, set from the data-copy sample's 128-B rows with the L2 off, dc_ub_offset_order),
against figures it was not set from:

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
CHIP_PANELS_GBPS = (33554432 / (29.93 - 3.98) + 67108864 / (56.59 - 3.98)) / 2 / 1e3
DMI_GBPS = 1528.0


def _read_tiles(src, tile_rows: int, tile_cols: int, rows_a_copy: int):
    """Block b reads the b-th tile_rows x tile_cols tile of the ROWS x COLS matrix (tiles in row-major
    order), rows_a_copy rows a copy: each row one piece unless the tile spans whole rows."""
    g = GlobalTensor(half)
    g.SetGlobalBuffer(src, ROWS * COLS)
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, rows_a_copy * tile_cols * 2)
    ub = buf.Get(half)
    first_row, first_col = divmod(GetBlockIdx() * tile_cols, COLS)
    first_row *= tile_rows
    for r in range(first_row, first_row + tile_rows, rows_a_copy):
        DataCopyPad(ub, g[r * COLS + first_col],
                    DataCopyExtParams(rows_a_copy, tile_cols * 2, (COLS - tile_cols) * 2, 0))


PANELS = {"tile_rows": ROWS, "tile_cols": 256, "rows_a_copy": 64}       # COLS // 256 blocks
BANDS = {"tile_rows": ROWS // 32, "tile_cols": COLS, "rows_a_copy": 4}   # 32 blocks, 64 KB a copy


def _device_memory_gbps(tiles: dict, overrides: dict | None = None) -> float:
    blocks = (ROWS // tiles["tile_rows"]) * (COLS // tiles["tile_cols"])
    profile = load_profile("Ascend910B2")
    if overrides:
        profile = profile.override(overrides)
    rep = simulator.run_kernel(_read_tiles, blocks, {"src": np.zeros(ROWS * COLS, np.float16), **tiles},
                               mode="timing", profile=profile, trace=False).report
    dm = rep.device_memory
    assert dm["bytes"] == ROWS * COLS * 2
    return dm["bytes"] / (dm["busy_cycles"] / (rep.clock_mhz * 1e6)) / 1e9


def test_512_byte_rows_from_device_memory_at_the_m1_matmuls_pace():
    assert _device_memory_gbps(PANELS) == pytest.approx(CHIP_PANELS_GBPS, rel=0.06)


def test_whole_rows_at_the_copy_tests_pace():
    assert _device_memory_gbps(BANDS) == pytest.approx(DMI_GBPS, rel=0.03)


def test_without_the_figure_every_piece_streams_at_the_channels_rate():
    no_cost = {"device_memory.piece_overhead_bytes": 0}
    assert _device_memory_gbps(PANELS, no_cost) == pytest.approx(1531.2, rel=1e-9)
