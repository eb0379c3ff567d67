"""The Ascend C add sample as published with its msprof measurement, as a kernel file: 8 blocks
of 2048 FLOAT16 elements, tiles of 128 elements, BUFFER_NUM 2 (examples/vector_add_kernel.py is
the kernel). msKPP's tests carry the msprof op_summary row of this sample on a 1.0 GHz coupled
chip (tests/fixtures/msprof/add_sample_op_summary.csv); set them side by side:

    ascend-sim kernel examples/kernels/add_sample.py --soc Ascend910A --mode timing --warmup 1 \\
        --json --no-trace > out/add.json
    ascend-sim compare tests/fixtures/msprof/add_sample_op_summary.csv --report out/add.json

--warmup 1: on the board the host-to-device copies just before the kernel leave x and y in the
(memory-side) L2; a simulated first run would find them cold.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vector_add_kernel import AddTiling, add_custom  # noqa: E402

BLOCKS, BLOCK_LENGTH, TILE_LENGTH = 8, 2048, 128


def launch(profile):
    rng = np.random.default_rng(0)
    n = BLOCKS * BLOCK_LENGTH
    x = rng.standard_normal(n).astype(np.float16)
    y = rng.standard_normal(n).astype(np.float16)
    return {"body": add_custom, "block_dim": BLOCKS, "name": "add_custom",
            "args": {"x": x, "y": y, "z": np.zeros(n, np.float16),
                     "tiling": AddTiling(BLOCK_LENGTH, TILE_LENGTH)}}


def check(outputs):
    assert np.array_equal(outputs["z"], outputs["x"] + outputs["y"]), "z != x + y"
