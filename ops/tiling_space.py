"""What every operator's `tiling_space` shares: its raw candidates pruned by the planner itself.

An operator proposes the tilings a CANN tiling engineer would try for a call; phase 1 (the
operator's own checks and planner, through `simulator.plan`) then decides which of them can run.
A candidate the planner rejects (561002: it does not fit) is dropped, and so is one whose plan
is the default plan's or an earlier candidate's, so that every candidate left is a distinct plan.
No fit arithmetic is repeated here.
"""
from __future__ import annotations

import json

import numpy as np

from simulator.enums import AclnnError, aclnnStatus


def _layouts(inputs: dict) -> dict:
    """The call's arguments with every array as a contiguous TensorLayout: phase 1 reads no data,
    and the zero-stride stand-ins a tiling space is given are not views the call would make."""
    from simulator.api import TensorLayout
    return {k: TensorLayout(v.shape, v.dtype) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def planned_tiling(op: str, inputs: dict, profile, tiling: dict | None = None) -> dict | None:
    """The tiling phase 1 reports for the call with `tiling` forced; None if the planner rejects
    it (561002). Any other failure of phase 1 is the call's, and is raised."""
    import simulator
    try:
        return simulator.plan(op, profile=profile, tiling=tiling, **_layouts(inputs)).tiling
    except AclnnError as e:
        if e.status == aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR:
            return None
        raise


def _key(tiling: dict) -> str:
    return json.dumps(tiling, sort_keys=True, default=str)


def distinct_accepted(op: str, inputs: dict, profile, propose) -> list[dict]:
    """The candidates `propose(default tiling)` makes that phase 1 accepts, in their order,
    keeping only the first of those that plan alike and none that plans as the default does. A
    call phase 1 rejects as it is (a check fails, or no tiling fits it) has no space: []."""
    try:
        default = planned_tiling(op, inputs, profile)
    except AclnnError:
        return []
    if default is None:
        return []
    seen, out = {_key(default)}, []
    for cand in propose(default):
        tiling = planned_tiling(op, inputs, profile, cand)
        if tiling is None or _key(tiling) in seen:
            continue
        seen.add(_key(tiling))
        out.append(cand)
    return out


def sizes(lo: int, hi: int, cap: int, count: int, step: int = 16) -> list[int]:
    """Up to `count` tile sizes, largest first: the powers of two from lo to hi below `cap`
    (the extent the tile covers, rounded up to `step`), and `cap` itself if it is at most hi (one
    tile covering it all)."""
    cap = -(-max(cap, 1) // step) * step
    vals = {v for v in (lo << k for k in range(32)) if v <= hi and v < cap}
    if cap <= hi:
        vals.add(cap)
    return sorted(vals, reverse=True)[:count]
