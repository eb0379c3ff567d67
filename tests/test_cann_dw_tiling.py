"""The tiling CANN's Conv3DBackpropFilter gets (ops/conv/cann_dw_tiling.py) against a second,
independent reading of CANN's tiling sources: a line-by-line Python port of its cache tiling
(cycle_calculator.cc, conv3d_dw_cycle_calculator.cc, cube_util.cc in Hayden727/cann-ops, written
apart from this module for the fidelity issue's research). The expected splits, tiles and CANN's
own cycle estimates below are that port's output for these calls; and the invariants CANN's search
keeps hold for random calls."""
from __future__ import annotations

import numpy as np
import pytest

from simulator.arith import ceil_div
from ops.conv.cann_dw_tiling import DwProblem, cann_dw_split


def _problem(x, dy, w, stride=(1, 1, 1), pad=(0, 0, 0), dil=(1, 1, 1), cores=24):
    N, Cin, Di, Hi, Wi = x
    _, Cout, Do, Ho, Wo = dy
    _, _, kd, kh, kw = w
    return DwProblem(N, Do, ceil_div(Cout, 16), ceil_div(Cin, 16), kd, kh, kw, Ho, Wo, Hi, Wi, stride[1], stride[2],
                     dil[1], dil[2], pad[0] > 0, 512 * 1024, 128 * 1024, cores)


# (x, dy, weight, pad) -> (batch, d, m, n, k dims; m_l0, k_l0, n_l0; k_al1, k_bl1; CANN's cycles)
PORT = [
    (((2, 32, 16, 32, 32), (2, 64, 14, 30, 30), (64, 32, 3, 3, 3), (0, 0, 0)),
     ((2, 1, 1, 2, 6), (4, 2, 27), (10, 10), 22156)),
    (((2, 64, 8, 64, 64), (2, 128, 8, 64, 64), (128, 64, 5, 5, 5), (2, 2, 2)),
     ((1, 1, 2, 1, 12), (4, 2, 25), (22, 22), 1016640)),
    (((4, 63, 7, 31, 31), (4, 127, 7, 31, 31), (127, 63, 3, 3, 3), (1, 1, 1)),
     ((2, 1, 1, 4, 3), (8, 7, 9), (21, 21), 77940)),
    (((2, 64, 16, 128, 128), (2, 128, 16, 128, 128), (128, 64, 3, 3, 3), (1, 1, 1)),
     ((2, 4, 1, 1, 3), (8, 3, 12), (18, 18), 1296288)),
]


@pytest.mark.parametrize("call, want", PORT, ids=["64x32x3", "128x64x5", "127x63x3", "128x64x3-large"])
def test_the_split_is_the_one_cann_s_tiling_picks(call, want):
    s = cann_dw_split(_problem(*call[:3], pad=call[3]))
    dims, l0, l1, cycles = want
    assert (s.batch_dim, s.d_dim, s.m_dim, s.n_dim, s.k_dim) == dims
    assert (s.m_l0, s.k_l0, s.n_l0) == l0
    assert (s.k_al1, s.k_bl1) == l1
    assert s.cycles == cycles


@pytest.mark.parametrize("seed", range(40))
def test_the_split_keeps_cann_s_invariants(seed):
    """Any call: L0A / L0B halves hold the step (m x k and n x k at most 64 fractals each), the
    cores split into at most their count and into 80 % of them where images x depths fill them,
    the K step divides the core's K and the L1 stages fit L1."""
    rng = np.random.default_rng(seed)
    N, Do = int(rng.integers(1, 5)), int(rng.integers(1, 12))
    k = int(rng.choice([1, 3, 5]))
    Ho = Wo = int(rng.integers(4, 70))
    cin, cout = int(rng.choice([16, 32, 47, 64, 128, 320])), int(rng.choice([16, 33, 64, 128, 256]))
    x, dy, w = (N, cin, Do + k - 1, Ho + k - 1, Wo + k - 1), (N, cout, Do, Ho, Wo), (cout, cin, k, k, k)
    p = _problem(x, dy, w)
    s = cann_dw_split(p)
    assert s is not None
    assert s.m_l0 * s.k_l0 <= 64 and s.n_l0 * s.k_l0 <= 64
    used = s.batch_dim * s.d_dim * s.m_dim * s.n_dim * s.k_dim
    assert used <= p.cores
    if p.N * p.Do >= p.cores:
        assert used >= 0.8 * p.cores
    k_pc = ceil_div(p.k_fractals, s.k_dim)
    assert k_pc % s.k_l0 == 0 and s.k_al1 % s.k_l0 == 0 and s.k_bl1 % s.k_l0 == 0
    assert max(s.k_al1, s.k_bl1) % min(s.k_al1, s.k_bl1) == 0
