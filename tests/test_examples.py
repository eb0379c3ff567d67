"""The seed documents' call examples (examples/*_example.py) run as a user would run them, and
print what the formulas say they should."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grid_sampler_reference import grid_sampler_2d_backward_ref

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def printed(script: str, soc: str = "Ascend910B1") -> dict[str, np.ndarray]:
    p = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True,
                       timeout=300, env={"ASCEND_SIM_SOC": soc, "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    values: dict[str, list[float]] = {}
    for name, i, v in re.findall(r"^(\w[\w ]*)\[(\d+)\] is: (\S+)$", p.stdout, re.M):
        values.setdefault(name, []).append(float(v))
        assert int(i) == len(values[name]) - 1
    assert "cycles" in p.stdout
    return {k: np.array(v) for k, v in values.items()}


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910A"])
def test_silu_backward_example(soc):
    x = np.arange(1, 7, dtype=np.float64)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(printed("silu_backward_example.py", soc)["out result"],
                               s * (1 + x * (1 - s)), atol=1e-6)


def test_convolution_backward_example():
    out = printed("convolution_backward_example.py")
    # all-ones 2x2x7x7 with a 2x2 1x1 kernel: dX sums 2 output channels, dW and dB sum 2*7*7
    np.testing.assert_array_equal(out["gradInputResult"], np.full(2 * 2 * 7 * 7, 2.0))
    np.testing.assert_array_equal(out["gradWeightResult"], np.full(4, 98.0))
    np.testing.assert_array_equal(out["gradBiasResult"], np.full(2, 98.0))


def test_conv_tbc_backward_example():
    out = printed("conv_tbc_backward_example.py")
    np.testing.assert_array_equal(out["gradInputResult"], np.full(10, 4.0))
    np.testing.assert_array_equal(out["gradWeightResult"], np.full(8, 5.0))
    np.testing.assert_array_equal(out["gradBiasResult"], np.full(2, 6.0))


def test_grid_sampler_2d_backward_example():
    out = printed("grid_sampler_2d_backward_example.py")
    grid = np.array([-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0, -1, 1, 0, 1, 1, 1], float).reshape(1, 3, 3, 2)
    ref = grid_sampler_2d_backward_ref(np.ones((1, 1, 3, 3)), np.arange(1, 41, dtype=float).reshape(1, 1, 5, 8),
                                       grid, 0, 0, False)
    np.testing.assert_allclose(out["inputGradResultData"], ref["inputGrad"].ravel(), atol=1e-6)
    np.testing.assert_allclose(out["gridGradResultData"], ref["gridGrad"].ravel(), atol=1e-5)
