"""Tiling search: a call's candidate tiling overrides run side by side with its default plan.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

from ..aclnn import check_tiling_override
from ..enums import AclnnError
from ..profile import Profile
from .calls import NotAvailable, light_inputs, validate_call
from .distribute import Task, map_tasks
from .trace import Call, StudyError
from .whatif import MAX_SWEEP_POINTS, make_profile


@dataclass
class TuneResult:
    call: Call
    soc: str
    default: dict                 # the default planner's row
    ranked: list[dict]            # valid candidates, best first (each row has 'candidate')
    invalid: list[dict]           # candidates the planner rejected (561002) or that faulted
    space_size: int

    @property
    def best(self) -> dict | None:
        return self.ranked[0] if self.ranked else None


def tiling_space(call: Call, profile: Profile) -> list[dict]:
    """The operator's own candidate tilings (OpDef.tiling_space), or StudyError if it has none."""
    opdef = validate_call(call)
    fn = getattr(opdef, "tiling_space", None)
    if fn is None:
        raise StudyError(f"{call.op} has no tiling search space (its OpDef sets no tiling_space); "
                         f"give one with --space FIELD=V1,V2,...")
    return [dict(c) for c in fn(light_inputs(call), profile)]


def tune(call: Call, soc: str, overrides: dict | None = None, *, space: dict[str, list] | None = None,
         top: int = 5, max_points: int = MAX_SWEEP_POINTS, **kw) -> TuneResult:
    """Search a call's tiling: run the default plan and every candidate (the op's tiling_space,
    or the cartesian product of `space`), skip the candidates the planner rejects (561002), and
    rank the rest by cycles."""
    overrides = dict(overrides or {})
    prof = make_profile(soc, overrides)
    if space:
        names = list(space)
        size = 1
        for n in names:
            size *= len(space[n])
        if size > max_points:
            raise StudyError(f"--space has {size:,} candidates; the budget is {max_points:,} "
                             f"(give --max-points {size} to search them anyway)")
        opdef = validate_call(call)
        for n in names:                 # an unknown field or a bad value is the user's, not the planner's
            for v in space[n]:
                try:
                    check_tiling_override(opdef, {n: v})
                except AclnnError as e:
                    raise StudyError(f"--space {n}: {e.message}") from None
        cands = [dict(zip(names, vals)) for vals in itertools.product(*(space[n] for n in names))]
    else:
        try:
            cands = tiling_space(call, prof)
        except NotAvailable as e:
            raise StudyError(str(e)) from None
    seen, uniq = set(), []
    for c in cands:
        k = json.dumps(c, sort_keys=True)
        if k not in seen:
            seen.add(k)
            uniq.append(c)
    mode, seed = kw.pop("mode", "timing"), kw.pop("seed", 0)
    tasks = [Task(call, soc, overrides, mode, seed, None)] + [Task(call, soc, overrides, mode, seed, c) for c in uniq]
    kw.setdefault("desc", "tune")
    rows = map_tasks(tasks, **kw)
    default = rows[0]
    if default["status"] != "ok":
        raise StudyError(f"tune: the default plan of {call.op} does not run: {default.get('message', default['status'])}")
    ranked, invalid = [], []
    dtil = json.loads(default.get("tiling") or "{}")
    for c, r in zip(uniq, rows[1:]):
        r = dict(r, candidate=c, is_default=all(dtil.get(k) == v for k, v in c.items()))
        (ranked if r["status"] == "ok" else invalid).append(r)
    ranked.sort(key=lambda r: r["cycles"])
    return TuneResult(call, soc, default, ranked[:max(top, 1)] if top else ranked, invalid, len(uniq))
