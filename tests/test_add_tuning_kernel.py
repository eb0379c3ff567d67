"""examples/add_tuning_kernel.py, Ascend C's Add tuning sample behind the ascendc_add_tuning_a2
figures: each of its pipelines (one buffer set, ping-pong, x and y past the L2, staggered buffers)
computes z = x + y as numpy does, on sizes that split unevenly over the blocks and end in a short
chunk; and the sample's own cases are the ones the README lists."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from add_tuning_kernel import BUFFER_LEN, CASES, AddCase, run  # noqa: E402

FLAVOURS = {"single": dict(double_buffer=False, bypass_l2=False),
            "double": dict(double_buffer=True, bypass_l2=False),
            "bypass": dict(double_buffer=True, bypass_l2=True),
            "staggered": dict(double_buffer=True, bypass_l2=True, staggered=True)}


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
@pytest.mark.parametrize("m, n, blocks, copy_len", [(100, 256, 48, 1024), (37, 96, 5, 160), (9, 64, 1, 96)])
def test_each_pipeline_adds_as_numpy_does(flavour, m, n, blocks, copy_len):
    rng = np.random.default_rng(m * n + blocks)
    x = rng.standard_normal((m, n)).astype(np.float16)
    y = rng.standard_normal((m, n)).astype(np.float16)
    case = AddCase(m, n, blocks, copy_len, **FLAVOURS[flavour])
    z = run("Ascend910B1", case, mode="functional", x=x, y=y).outputs["z"]
    np.testing.assert_array_equal(z, x + y)      # one FLOAT16 rounding of the exact sum, as numpy's


def test_the_cases_are_the_readmes():
    # add.asc on NPU_ARCH 2201: 48 blocks, dataCopyLen 4096 / 16384 / 16256, MAX_DATA_COPY_LEN 16384
    assert BUFFER_LEN == 16384
    assert [(c.blocks, c.copy_len, c.double_buffer, c.bypass_l2) for _, c in sorted(CASES.items())] == [
        (1, 4096, False, False), (48, 4096, False, False), (48, 16384, False, False),
        (48, 16384, True, False), (48, 16384, True, True), (48, 16256, True, True)]


def test_a_copy_past_the_buffers_is_refused():
    with pytest.raises(ValueError, match="copy_len"):
        run("Ascend910B1", AddCase(64, 256, 4, BUFFER_LEN + 16, True, False))


@pytest.mark.parametrize("through", [False, True])
def test_writes_through_a_full_l2_what_if(through):
    """The sample's double-buffered pipeline with x, y and z (2 MiB each) through an L2 of 1 MiB:
    with `l2.writes_through_when_full`, every byte of z crosses device memory within the kernel
    (its writes before the L2 fills are evicted dirty by the 5 MiB that follow, those after go
    through), so device memory moves x, y and z once each; in the plain write-back L2 the last of
    z is still dirty in it when the kernel ends."""
    from simulator.profile import load_profile
    profile = load_profile("Ascend910B1").override({"l2.bytes": 1 << 20, "l2.writes_through_when_full": through})
    case = AddCase(1024, 1024, 48, 4096, double_buffer=True, bypass_l2=False)
    moved = run("Ascend910B1", case, profile=profile).report.device_memory["bytes"]
    arrays = 3 * 1024 * 1024 * 2
    assert moved == arrays if through else arrays - (1 << 20) <= moved < arrays
