"""What-if profiles: `--set FIELD=VALUE` assignments (dotted fields, relative `x2` / `/2` values)
resolved against a chip's profile, sweep value lists and ranges.
"""
from __future__ import annotations

import difflib
import json
import math
import re
from typing import Any, Iterable

import yaml

from ..inputs import number, yaml_value
from ..profile import Profile, ProfileError, load_profile, profile_key
from .trace import StudyError


_RELATIVE = re.compile(r"^\s*([x*/])\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*$")


def parse_value(text: str) -> Any:
    """A command-line value: YAML scalars (3200, 1.5, true, [1, 2]), or relative 'x2' / '*2' / '/2'."""
    if _RELATIVE.match(text):
        return text.strip()
    try:
        return yaml_value(text)
    except (yaml.YAMLError, RecursionError):
        return text


def parse_assignments(items: Iterable[str] | None, flag: str = "--set") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise StudyError(f"{flag}: '{item}' is not FIELD=VALUE (e.g. device_memory.bandwidth_GBps=3200)")
        k, v = item.split("=", 1)
        if not k.strip():
            raise StudyError(f"{flag}: '{item}' has no field name")
        out[k.strip()] = parse_value(v.strip())
    return out


MAX_SWEEP_POINTS = 10_000     # the default budget of a sweep: points, before any is made


def parse_sweep_values(item: str, max_points: int = MAX_SWEEP_POINTS, flag: str = "--param") -> tuple[str, list[Any]]:
    """'cores.aiv.count=24,32,48' or 'clock_mhz=1000:2000:250' (start:stop:step, stop included)."""
    if "=" not in item:
        raise StudyError(f"{flag}: '{item}' is not FIELD=V1,V2,... (e.g. device_memory.bandwidth_GBps=800,1600,3200)")
    k, v = item.split("=", 1)
    k, v = k.strip(), v.strip()
    m = re.fullmatch(r"([-+\d.eE]+):([-+\d.eE]+):([-+\d.eE]+)", v)
    if m:
        try:
            a, b, s = (float(x) for x in m.groups())
        except ValueError:
            raise StudyError(f"{flag} {k}: '{v}' is not start:stop:step") from None
        if not all(math.isfinite(x) for x in (a, b, s)):
            raise StudyError(f"{flag} {k}: '{v}' needs finite start, stop and step")
        if s <= 0 or b < a:
            raise StudyError(f"{flag} {k}: '{v}' needs step > 0 and stop >= start")
        n = int(math.floor((b - a) / s + 1e-9)) + 1
        if n > max_points:
            raise StudyError(f"{flag} {k}: '{v}' gives {n:,} values; the budget is {max_points:,} points "
                             f"(raise it with --max-points, or use a larger step)")
        vals = [a + i * s for i in range(n)]
        if all(float(x).is_integer() for x in (a, b, s)):
            vals = [int(x) for x in vals]
        return k, vals
    vals = [parse_value(x.strip()) for x in v.split(",") if x.strip()]
    if not vals:
        raise StudyError(f"{flag} {k}: no values")
    return k, vals


def _flat_fields(data: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(data, dict):
        for k, v in data.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict):
                out.update(_flat_fields(v, key))
            else:
                out[key] = v
    return out


def profile_fields(profile: Profile) -> dict[str, Any]:
    """Every field of a profile by dotted path: {'device_memory.bandwidth_GBps': 1600, ...}."""
    return _flat_fields(profile.model_dump())


def resolve_overrides(base: Profile, overrides: dict[str, Any]) -> dict[str, Any]:
    """Check field names (with a suggestion for a misspelling) and resolve relative values."""
    fields = profile_fields(base)
    out = {}
    for key, value in overrides.items():
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else " (see `ascend-sim chip SOC` for the fields)"
            raise StudyError(f"{base.soc_version} has no profile field '{key}'{hint}")
        cur = fields[key]
        if isinstance(value, str):
            m = _RELATIVE.match(value)
            if m and isinstance(cur, (int, float)) and not isinstance(cur, bool):
                f = number(m.group(2), f"{key}={value}: the factor", lo=0, above=True, error=StudyError)
                new = cur / f if m.group(1) == "/" else cur * f
                if not math.isfinite(new):
                    raise StudyError(f"{key}={value}: gives {new}, not a finite number")
                value = int(round(new)) if isinstance(cur, int) and float(new).is_integer() else new
        if isinstance(cur, bool) and not isinstance(value, bool):
            raise StudyError(f"{key} is true or false ({str(cur).lower()} on {base.soc_version}), not {value!r}")
        if isinstance(cur, (list, tuple)) and not isinstance(value, (list, tuple)):
            shown = ", ".join(map(str, cur))
            raise StudyError(f"{key} is a list ([{shown}] on {base.soc_version}): give one in brackets, "
                             f"e.g. {key}=[{shown}], not {value!r}")
        out[key] = value
    return out


_PROFILE_CACHE: dict[str, Profile] = {}


def make_profile(soc: str, overrides: dict[str, Any] | None = None) -> Profile:
    """The SoC's profile with what-if overrides applied (dotted fields, relative values allowed).
    Unknown SoC / field or an invalid value raises ProfileError / StudyError with one line."""
    key = json.dumps([profile_key(soc), overrides or {}], sort_keys=True, default=str)
    if key in _PROFILE_CACHE:
        return _PROFILE_CACHE[key]
    base = load_profile(soc)
    if overrides:
        resolved = resolve_overrides(base, overrides)
        try:
            prof = base.override(resolved)
        except ProfileError as e:
            msg = "; ".join(str(e).splitlines())
            raise StudyError(f"profile override: {msg}") from None
    else:
        prof = base
    _PROFILE_CACHE[key] = prof
    return prof
