"""The tiling search space of ConvolutionBackward and ConvTbcBackward (OpDef.tiling_space): the
Cube tilings a CANN tiling engineer would try for one call, pruned by the planner (plan.py and
tiling.py decide what fits; nothing here repeats that arithmetic).
"""
from __future__ import annotations

import math

import numpy as np

from ..tiling_space import distinct_accepted, sizes
from .small_launches import group_enlarge

KSPLITS = (1, 2, 4, 8)              # gradWeight K splits tried (partial sums per tile)
CORE_FRACTIONS = (1, 2, 3)          # quarters of the Cube cores tried as blockDim (all is the default)


def _halvings(k: int, step: int) -> list[int]:
    """A forced baseK a half and a quarter of the default's (multiples of step, at least step)."""
    return sorted({max(step, k // d // step * step) for d in (2, 4)} - {k}, reverse=True)


def cube_candidates(default: dict, cores: int, positions: int, dx_channels: int, dw_rows: int,
                    dw_cols: int) -> list[dict]:
    """Candidate overrides around the default plan, one family of fields at a time (the GEMMs
    share the Cube blocks only through the balancing, so varying one tile with the other left to
    the planner covers what matters at a fraction of the cartesian product's size):

    - gradInput L0 tile (dxBaseM x dxBaseN): baseM up to 5 sizes from 32 to 1024 positions,
      baseN up to 3 from 16 to 256 channels, each at most the extent it covers (`positions`,
      `dx_channels`) or that extent itself: <= 15 pairs;
    - gradWeight L0 tile (dwBaseM x dwBaseN): up to 3 row sizes (16..256) x 4 column sizes
      (64..512) within `dw_rows` / `dw_cols`: <= 12 pairs;
    - dxBaseK / dwBaseK a half and a quarter of the default's: <= 4;
    - dwKSplit 1, 2, 4, 8 (the default's left out): <= 4;
    - blockDim a quarter, a half and three quarters of the Cube cores: <= 3;
    - doubleBuffer off: 1.

    At most 39 candidates before the planner drops the ones that do not fit (an L0C tile of
    1024 x 256 FP32 does not, on any chip) and those that plan as another does."""
    out: list[dict] = []
    dx, dw = default.get("gradInput", default.get("cube")), default.get("gradWeight")
    c0 = int(default.get("C0", 16))
    if dx:
        for n in sizes(16, 256, dx_channels, 3):
            out += [{"dxBaseM": m, "dxBaseN": n} for m in sizes(32, 1024, positions, 5)]
    if dw:
        for m in sizes(16, 256, dw_rows, 3):
            out += [{"dwBaseM": m, "dwBaseN": n} for n in sizes(64, 512, dw_cols, 4, step=c0)]
    if dx:
        out += [{"dxBaseK": k} for k in _halvings(int(dx["baseK"]), c0)]
    if dw:
        out += [{"dwBaseK": k} for k in _halvings(int(dw["baseK"]), 16)]
        out += [{"dwKSplit": s} for s in KSPLITS if s != dw["kSplit"]]
    if dx or dw:
        out += [{"blockDim": b} for b in sorted({max(1, cores * q // 4) for q in CORE_FRACTIONS})]
        out.append({"doubleBuffer": False})
    return out


def conv_tiling_space(op: str, inputs: dict, profile, *, positions: int, dx_channels: int, dw_rows: int,
                      dw_cols: int) -> list[dict]:
    """The candidates of cube_candidates that phase 1 accepts, each a plan of its own (neither
    the default plan nor another candidate's); the extents are the call's, in elements."""
    cores = profile.core_kind_for("cube")[1].count
    return distinct_accepted(op, inputs, profile, lambda default: cube_candidates(
        default, cores, positions, dx_channels, dw_rows, dw_cols))


def convolution_space(inputs: dict, profile) -> list[dict]:
    """ConvolutionBackward's tiling space (cube_candidates has what it holds). The extents: the
    gradInput GEMM's rows are input positions over the batch, its columns input channels per
    group; gradWeight's are weight's first dim per group by the rest of its shape (taps of the
    last two spatial dims: the depth kernel is an outer loop)."""
    x, w = inputs["input"], inputs["weight"]
    groups, enlarge = cube_groups(inputs, profile)
    return conv_tiling_space("ConvolutionBackward", inputs, profile,
                             positions=x.shape[0] * math.prod(x.shape[2:]), dx_channels=x.shape[1] // groups,
                             dw_rows=w.shape[0] // groups, dw_cols=enlarge * w.shape[1] * math.prod(w.shape[2:][-2:]))


def cube_groups(inputs: dict, profile) -> tuple[int, int]:
    """(the Cube groups, original groups each runs), as the planners enlarge a call's groups."""
    x, w = inputs["input"], inputs["weight"]
    groups = max(1, int(inputs.get("groups") or 1))
    enlarge = group_enlarge(groups, tuple(w.shape), np.dtype(w.dtype).itemsize, bool(inputs.get("transposed", False)),
                            32 // np.dtype(x.dtype).itemsize, profile)
    return groups // enlarge, enlarge


def conv_tbc_space(inputs: dict, profile) -> list[dict]:
    """ConvTbcBackward's tiling space: its conv1d's (input (T, B, Cin), weight (K, Cin, Cout))."""
    x, w = inputs["input"], inputs["weight"]
    return conv_tiling_space("ConvTbcBackward", inputs, profile, positions=x.shape[0] * x.shape[1],
                             dx_channels=x.shape[2], dw_rows=w.shape[2], dw_cols=w.shape[1] * w.shape[0])
