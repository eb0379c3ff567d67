"""Studies: workload traces, replay, cycle regression, what-if sweeps and tiling search.

This is the logic behind `ascend-sim replay / regress / sweep / tune`; the command line in
simulator/cli.py only parses arguments and prints. Everything here is plain Python and usable
from a notebook:

    from simulator import studies
    w = studies.load_trace("traces/efficientnet_b0_silu_backward.yaml")
    rows = studies.replay(w, "Ascend910B1")
    rows = studies.sweep(w, ["Ascend910B1"], {"device_memory.bandwidth_GBps": [800, 1600, 3200]})
    best = studies.tune(w.calls[0], "Ascend910B1")

A workload trace is a sequence of operator calls (operator, tensor shapes and dtypes, attributes,
stream) with optional cycle baselines per SoC; traces/README.md documents the format. A call is
turned into a `simulator.run` generically from the operator's OpDef parameters: tensors become
random arrays from a fixed seed, attributes are coerced to the parameter's kind. Calls of an
operator that is not registered are reported as "not available" and skipped, never a crash.

Work is split into tasks (one per distinct call per profile point) and run in-process, on local
processes (`workers=N`, concurrent.futures) or on a Dask distributed cluster (`scheduler=ADDRESS`).
The simulator is bit-deterministic, so every backend gives identical rows.
"""
from __future__ import annotations

import csv
import difflib
import itertools
import json
import math
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import yaml

from .enums import AclnnError, KernelError
from .profile import PIPES, Profile, ProfileError, load_profile

FORMAT = "ascend-sim/workload-trace/1"
TOP_LEVEL_KEYS = {"format", "name", "description", "source", "defaults", "calls", "baselines", "notes"}
CALL_KEYS = {"op", "tensors", "attrs", "stream", "label", "count", "tiling", "dtype"}
TENSOR_KEYS = {"shape", "dtype", "init"}
PARAM_KINDS = ("tensor", "int_array", "bool_array", "int", "float", "bool")

DTYPE_ALIASES = {"FLOAT": "FLOAT", "FLOAT32": "FLOAT", "FP32": "FLOAT", "FLOAT16": "FLOAT16",
                 "HALF": "FLOAT16", "FP16": "FLOAT16", "BF16": "BF16", "BFLOAT16": "BF16",
                 "DOUBLE": "DOUBLE", "FLOAT64": "DOUBLE", "INT8": "INT8", "UINT8": "UINT8",
                 "INT16": "INT16", "INT32": "INT32", "INT64": "INT64", "BOOL": "BOOL"}


class StudyError(ValueError):
    """A bad trace, call, sweep file or parameter: the message is one line naming what is wrong."""


def numpy_dtype(name: str) -> np.dtype:
    import ml_dtypes
    table = {"FLOAT": np.float32, "FLOAT16": np.float16, "BF16": ml_dtypes.bfloat16,
             "DOUBLE": np.float64, "INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16,
             "INT32": np.int32, "INT64": np.int64, "BOOL": np.bool_}
    return np.dtype(table[canonical_dtype(name)])


def canonical_dtype(name: Any, where: str = "dtype") -> str:
    key = str(name).strip().upper()
    if key.startswith("ACL_"):
        key = key[4:]
    if key not in DTYPE_ALIASES:
        raise StudyError(f"{where}: unknown dtype '{name}' (use one of "
                         f"{', '.join(sorted(set(DTYPE_ALIASES.values())))})")
    return DTYPE_ALIASES[key]


# ---- workload traces -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str
    init: str = "normal"          # normal | uniform | uniform(a,b) | zeros | ones

    def to_record(self) -> dict:
        d: dict[str, Any] = {"shape": list(self.shape), "dtype": self.dtype}
        if self.init != "normal":
            d["init"] = self.init
        return d


@dataclass
class Call:
    """One operator call of a workload. `count` says how often it occurs (totals are weighted by
    it); `tiling` forces tiling fields for it; `stream` is recorded and reported."""
    op: str
    tensors: dict[str, TensorSpec] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    stream: int = 0
    label: str = ""
    count: int = 1
    tiling: dict[str, Any] | None = None

    def key(self) -> str:
        """What makes two calls cost the same (label, stream and count do not)."""
        return json.dumps({"op": self.op, "t": {k: v.to_record() for k, v in sorted(self.tensors.items())},
                           "a": self.attrs, "tiling": self.tiling}, sort_keys=True, default=str)

    def to_record(self) -> dict:
        rec: dict[str, Any] = {"op": self.op}
        if self.label:
            rec["label"] = self.label
        rec["tensors"] = {k: v.to_record() for k, v in self.tensors.items()}
        if self.attrs:
            rec["attrs"] = dict(self.attrs)
        if self.stream:
            rec["stream"] = self.stream
        if self.count != 1:
            rec["count"] = self.count
        if self.tiling:
            rec["tiling"] = dict(self.tiling)
        return rec

    def shapes(self) -> str:
        return " ".join(f"{k}={'x'.join(map(str, v.shape)) or 'scalar'}" for k, v in self.tensors.items())

    def elements(self) -> int:
        return sum(int(np.prod(v.shape, dtype=np.int64)) for v in self.tensors.values())


@dataclass
class Workload:
    name: str
    calls: list[Call]
    description: str = ""
    source: str = ""
    baselines: dict[str, dict] = field(default_factory=dict)
    path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)     # defaults, notes: kept on save

    def select(self, selection: str | Sequence[int] | None) -> list[int]:
        return parse_selection(selection, len(self.calls))


def parse_selection(selection: str | Sequence[int] | None, n: int) -> list[int]:
    """'0-3,7' -> [0, 1, 2, 3, 7] (call indices); None -> all."""
    if selection is None or selection == "":
        return list(range(n))
    if not isinstance(selection, str):
        out = [int(i) for i in selection]
    else:
        out = []
        for part in selection.split(","):
            part = part.strip()
            m = re.fullmatch(r"(\d+)\s*(?:-\s*(\d+))?", part)
            if not m:
                raise StudyError(f"--calls: '{part}' is not an index or a range like 3-7")
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) else lo
            out.extend(range(lo, hi + 1))
    bad = [i for i in out if not 0 <= i < n]
    if bad:
        raise StudyError(f"--calls: index {bad[0]} is out of range (the workload has {n} calls, 0-{n - 1})")
    return sorted(set(out))


def _shape_of(value: Any, where: str) -> tuple[int, ...]:
    text = value
    if isinstance(value, str):
        value = [d for d in re.split(r"[,x\s]+", value.strip("[]() ")) if d]
    if not isinstance(value, (list, tuple)):
        raise StudyError(f"{where}: a shape is a list of integers, got {value!r}")
    try:
        dims = tuple(int(d) for d in value)
    except (TypeError, ValueError):
        raise StudyError(f"{where}: {text!r} is not a list of integers") from None
    if any(isinstance(d, bool) for d in value) or any(d < 0 for d in dims):
        raise StudyError(f"{where}: dimensions must be integers >= 0, got {list(value)}")
    return dims


def _init_ok(init: str, where: str) -> str:
    init = str(init).strip()
    if init in ("normal", "uniform", "zeros", "ones") or re.fullmatch(
            r"(normal|uniform)\(\s*[-+\d.eE]+\s*,\s*[-+\d.eE]+\s*\)", init):
        return init
    raise StudyError(f"{where}: unknown init '{init}' (normal, uniform, uniform(a,b), normal(mean,std), zeros, ones)")


def call_from_record(rec: Any, where: str, defaults: dict | None = None) -> Call:
    """A Call from a trace record (a mapping); errors name `where` and the field."""
    if not isinstance(rec, dict):
        raise StudyError(f"{where}: a call is a mapping with 'op' and 'tensors', got {type(rec).__name__}")
    defaults = defaults or {}
    unknown = set(rec) - CALL_KEYS
    if unknown:
        raise StudyError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} "
                         f"(a call has {', '.join(sorted(CALL_KEYS))})")
    op = rec.get("op")
    if not isinstance(op, str) or not op:
        raise StudyError(f"{where}: field 'op' (the aclnn operator name, e.g. SiluBackward) is missing")
    call_dtype = rec.get("dtype", defaults.get("dtype"))
    tensors: dict[str, TensorSpec] = {}
    traw = rec.get("tensors", {}) or {}
    if not isinstance(traw, dict):
        raise StudyError(f"{where}: field 'tensors' is a mapping of parameter name -> shape or {{shape, dtype}}")
    for name, spec in traw.items():
        w = f"{where}: tensors.{name}"
        if isinstance(spec, dict):
            bad = set(spec) - TENSOR_KEYS
            if bad:
                raise StudyError(f"{w}: unknown field(s) {', '.join(sorted(bad))} (a tensor has shape, dtype, init)")
            if "shape" not in spec:
                raise StudyError(f"{w}: field 'shape' is missing")
            shape = _shape_of(spec["shape"], w + ".shape")
            dt = spec.get("dtype", call_dtype)
            init = _init_ok(spec.get("init", "uniform(-1,1)" if name == "grid" else "normal"), w + ".init")
        else:
            shape = _shape_of(spec, w)
            dt = call_dtype
            init = "uniform(-1,1)" if name == "grid" else "normal"
        if dt is None:
            raise StudyError(f"{w}: no dtype (give the tensor's dtype, the call's 'dtype' or defaults.dtype)")
        tensors[str(name)] = TensorSpec(shape, canonical_dtype(dt, w + ".dtype"), init)
    attrs = rec.get("attrs", {}) or {}
    if not isinstance(attrs, dict):
        raise StudyError(f"{where}: field 'attrs' is a mapping of parameter name -> value")
    stream = rec.get("stream", defaults.get("stream", 0))
    count = rec.get("count", 1)
    if not isinstance(stream, int) or isinstance(stream, bool) or stream < 0:
        raise StudyError(f"{where}: field 'stream' must be an integer >= 0, got {stream!r}")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise StudyError(f"{where}: field 'count' must be an integer >= 1, got {count!r}")
    tiling = rec.get("tiling")
    if tiling is not None and not isinstance(tiling, dict):
        raise StudyError(f"{where}: field 'tiling' is a mapping of tiling field -> value")
    return Call(op, tensors, dict(attrs), stream, str(rec.get("label", "")), count, tiling)


def _read_structured(path: Path) -> tuple[str, Any]:
    if not path.exists():
        raise StudyError(f"{path}: no such file")
    text = path.read_text()
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        header: dict[str, Any] = {}
        calls, baselines = [], {}
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("//"):
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise StudyError(f"{path}: line {lineno}: not valid JSON: {e.msg} (column {e.colno})") from None
            if not isinstance(obj, dict):
                raise StudyError(f"{path}: line {lineno}: each line is a JSON object")
            if "op" in obj:
                obj.setdefault("__line__", lineno)
                calls.append(obj)
            elif "baselines" in obj and len(obj) == 1:
                baselines = obj["baselines"]
            else:
                header.update(obj)
        header["calls"] = calls
        if baselines:
            header["baselines"] = baselines
        return "jsonl", header
    try:
        if suffix == ".json":
            return "json", json.loads(text)
        return "yaml", yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise StudyError(f"{path}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise StudyError(f"{path}: not valid YAML: {problem}{at}") from None


def load_trace(path: str | Path) -> Workload:
    """Load a workload trace (YAML, JSON or JSON lines); a malformed file raises StudyError
    naming the file, the call and the field."""
    path = Path(path)
    fmt, raw = _read_structured(path)
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: a workload trace is a mapping with 'calls' (see traces/README.md)")
    unknown = set(raw) - TOP_LEVEL_KEYS
    if unknown:
        raise StudyError(f"{path}: unknown top-level field(s) {', '.join(sorted(unknown))} "
                         f"(a trace has {', '.join(sorted(TOP_LEVEL_KEYS))})")
    if raw.get("format", FORMAT) != FORMAT:
        raise StudyError(f"{path}: field 'format' is {raw.get('format')!r}; this simulator reads {FORMAT!r}")
    calls_raw = raw.get("calls")
    if not isinstance(calls_raw, list) or not calls_raw:
        raise StudyError(f"{path}: field 'calls' must be a non-empty list of calls")
    defaults = raw.get("defaults") or {}
    if not isinstance(defaults, dict) or set(defaults) - {"dtype", "stream"}:
        raise StudyError(f"{path}: field 'defaults' may hold 'dtype' and 'stream' only")
    calls = []
    for i, rec in enumerate(calls_raw):
        line = rec.pop("__line__", None) if isinstance(rec, dict) else None
        where = f"{path}: call {i}" + (f" (line {line})" if line else "")
        calls.append(call_from_record(rec, where, defaults))
    baselines = raw.get("baselines") or {}
    if not isinstance(baselines, dict):
        raise StudyError(f"{path}: field 'baselines' is a mapping of SoC -> {{total, calls}}")
    for soc, b in baselines.items():
        if not isinstance(b, dict) or not isinstance(b.get("calls"), list):
            raise StudyError(f"{path}: baselines.{soc} needs a 'calls' list (one cycle count per call, null to skip)")
        if len(b["calls"]) != len(calls):
            raise StudyError(f"{path}: baselines.{soc}.calls has {len(b['calls'])} entries for "
                             f"{len(calls)} calls (re-record with `ascend-sim regress {path} --soc {soc} --update`)")
        for j, c in enumerate(b["calls"]):
            if c is None or (isinstance(c, str) and re.fullmatch(r"rejected \d+|kernel fault|invalid", c)):
                continue
            if isinstance(c, bool) or not isinstance(c, (int, float)):
                raise StudyError(f"{path}: baselines.{soc}.calls[{j}] is {c!r}, not a cycle count, "
                                 f"a recorded status ('rejected 161002') or null")
    extra = {k: raw[k] for k in ("defaults", "notes") if k in raw}
    return Workload(str(raw.get("name") or path.stem), calls, str(raw.get("description") or ""),
                    str(raw.get("source") or ""), baselines, path, extra)


def _baseline_yaml(baselines: dict[str, dict], calls: list[Call]) -> str:
    """The `baselines:` block, written by hand so each cycle count sits beside its call."""
    lines = ["baselines:"]
    for soc in sorted(baselines):
        b = baselines[soc]
        lines.append(f"  {soc}:")
        for k in ("total", "recorded"):
            if k in b:
                lines.append(f"    {k}: {json.dumps(b[k])}")
        lines.append("    calls:")
        for i, c in enumerate(b["calls"]):
            lbl = calls[i].label if i < len(calls) else ""
            lines.append(f"      - {json.dumps(c)}   # {i} {calls[i].op if i < len(calls) else ''} {lbl}".rstrip())
    return "\n".join(lines) + "\n"


def save_trace(w: Workload, path: str | Path | None = None) -> Path:
    """Write a workload as YAML (or JSON lines when the path ends in .jsonl, JSON for .json)."""
    path = Path(path or w.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {"format": FORMAT, "name": w.name}
    if w.description:
        head["description"] = w.description
    if w.source:
        head["source"] = w.source
    head.update(w.extra)
    if path.suffix.lower() == ".jsonl":
        lines = [json.dumps(head)] + [json.dumps(c.to_record()) for c in w.calls]
        if w.baselines:
            lines.append(json.dumps({"baselines": w.baselines}))
        path.write_text("\n".join(lines) + "\n")
    elif path.suffix.lower() == ".json":
        d = dict(head, calls=[c.to_record() for c in w.calls])
        if w.baselines:
            d["baselines"] = w.baselines
        path.write_text(json.dumps(d, indent=1) + "\n")
    else:
        text = yaml.safe_dump(head, sort_keys=False, width=100)
        text += "calls:\n" + "".join(f"  - {json.dumps(c.to_record())}\n" for c in w.calls)
        if w.baselines:
            text += _baseline_yaml(w.baselines, w.calls)
        path.write_text(text)
    return path


def write_baselines(w: Workload) -> Path:
    """Rewrite the trace file's baselines only. In a YAML trace the `baselines:` block is replaced
    in place (the calls and their comments are kept); JSON files are rewritten whole."""
    assert w.path is not None
    path = w.path
    if path.suffix.lower() in (".jsonl", ".json"):
        return save_trace(w, path)
    lines = path.read_text().splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if re.match(r"baselines\s*:", l)), None)
    block = _baseline_yaml(w.baselines, w.calls) if w.baselines else ""
    if start is None:
        text = "".join(lines)
        if text and not text.endswith("\n"):
            text += "\n"
        path.write_text(text + block)
        return path
    end = next((i for i in range(start + 1, len(lines))
                if re.match(r"[A-Za-z_]", lines[i])), len(lines))
    path.write_text("".join(lines[:start]) + block + "".join(lines[end:]))
    return path


# ---- profiles and what-if overrides --------------------------------------------------------------
_RELATIVE = re.compile(r"^\s*([x*/])\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*$")


def parse_value(text: str) -> Any:
    """A command-line value: YAML scalars (3200, 1.5, true, [1, 2]), or relative 'x2' / '*2' / '/2'."""
    if _RELATIVE.match(text):
        return text.strip()
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
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


def parse_sweep_values(item: str) -> tuple[str, list[Any]]:
    """'cores.aiv.count=24,32,48' or 'clock_mhz=1000:2000:250' (start:stop:step, stop included)."""
    if "=" not in item:
        raise StudyError(f"--param: '{item}' is not FIELD=V1,V2,... (e.g. device_memory.bandwidth_GBps=800,1600,3200)")
    k, v = item.split("=", 1)
    k, v = k.strip(), v.strip()
    m = re.fullmatch(r"([-+\d.eE]+):([-+\d.eE]+):([-+\d.eE]+)", v)
    if m:
        try:
            a, b, s = (float(x) for x in m.groups())
        except ValueError:
            raise StudyError(f"--param {k}: '{v}' is not start:stop:step") from None
        if s <= 0 or b < a:
            raise StudyError(f"--param {k}: '{v}' needs step > 0 and stop >= start")
        n = int(math.floor((b - a) / s + 1e-9)) + 1
        vals = [a + i * s for i in range(n)]
        if all(float(x).is_integer() for x in (a, b, s)):
            vals = [int(x) for x in vals]
        return k, vals
    vals = [parse_value(x.strip()) for x in v.split(",") if x.strip()]
    if not vals:
        raise StudyError(f"--param {k}: no values")
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
                f = float(m.group(2))
                new = cur / f if m.group(1) == "/" else cur * f
                value = int(round(new)) if isinstance(cur, int) and float(new).is_integer() else new
        out[key] = value
    return out


_PROFILE_CACHE: dict[str, Profile] = {}


def make_profile(soc: str, overrides: dict[str, Any] | None = None) -> Profile:
    """The SoC's profile with what-if overrides applied (dotted fields, relative values allowed).
    Unknown SoC / field or an invalid value raises ProfileError / StudyError with one line."""
    key = json.dumps([soc, overrides or {}], sort_keys=True, default=str)
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


# ---- one call ------------------------------------------------------------------------------------
def opdef_for(op: str):
    from . import aclnn
    return aclnn.REGISTRY.get(op)


def available_ops() -> list[str]:
    from . import aclnn
    return sorted(aclnn.REGISTRY)


def _coerce_attr(op: str, name: str, kind: str, value: Any) -> Any:
    where = f"{op} attribute '{name}' ({kind})"
    if value is None:
        return None
    if kind in ("int_array", "bool_array"):
        if isinstance(value, str):
            value = [v for v in re.split(r"[,\s]+", value.strip("[]() ")) if v]
        elif isinstance(value, (int, bool)):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise StudyError(f"{where}: expected a list, got {value!r}")
        try:
            if kind == "int_array":
                return [int(v) for v in value]
            return [_to_bool(v, where) for v in value]
        except ValueError:
            raise StudyError(f"{where}: '{value}' is not a list of integers") from None
    if kind == "int":
        try:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        except (TypeError, ValueError):
            raise StudyError(f"{where}: '{value}' is not an integer") from None
    if kind == "float":
        try:
            return float(value)
        except (TypeError, ValueError):
            raise StudyError(f"{where}: '{value}' is not a number") from None
    if kind == "bool":
        return _to_bool(value, where)
    return value


def _to_bool(v: Any, where: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on", "t", "y"):
        return True
    if s in ("0", "false", "no", "off", "f", "n"):
        return False
    raise StudyError(f"{where}: '{v}' is not a boolean (true/false/1/0)")


class NotAvailable(Exception):
    """The call's operator is not registered in this build of the simulator."""


def validate_call(call: Call):
    """The call's OpDef, after checking the call's names against its parameters (StudyError),
    or NotAvailable when the operator is not registered."""
    opdef = opdef_for(call.op)
    if opdef is None:
        raise NotAvailable(f"operator '{call.op}' is not available in this simulator "
                           f"(registered: {', '.join(available_ops())})")
    kinds = {p.name: p for p in opdef.params}
    for name in call.tensors:
        if name not in kinds:
            raise StudyError(f"{call.op} has no parameter '{name}' (parameters: {', '.join(kinds)})")
        if kinds[name].kind != "tensor":
            raise StudyError(f"{call.op} parameter '{name}' is a {kinds[name].kind}, not a tensor: put it under attrs")
    for name in call.attrs:
        if name not in kinds:
            raise StudyError(f"{call.op} has no parameter '{name}' (parameters: {', '.join(kinds)})")
        if kinds[name].kind == "tensor":
            raise StudyError(f"{call.op} parameter '{name}' is a tensor: put it under tensors with a shape")
    missing = [p.name for p in opdef.params if p.kind not in ("tensor", "int_array", "bool_array")
               and p.name not in call.attrs]
    if missing:
        raise StudyError(f"{call.op} needs attribute(s) {', '.join(missing)} "
                         f"({', '.join(kinds[m].kind for m in missing)})")
    return opdef


def _fill(rng: np.random.Generator, spec: TensorSpec) -> np.ndarray:
    dt = numpy_dtype(spec.dtype)
    shape = spec.shape
    init = spec.init.replace(" ", "")
    if init == "zeros":
        return np.zeros(shape, dtype=dt)
    if init == "ones":
        return np.ones(shape, dtype=dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -8, 8, size=shape).astype(dt)
    m = re.fullmatch(r"(normal|uniform)(?:\(([-+\d.eE]+),([-+\d.eE]+)\))?", init)
    kind, a, b = m.group(1), m.group(2), m.group(3)
    if kind == "uniform":
        lo, hi = (float(a), float(b)) if a is not None else (-1.0, 1.0)
        out = rng.random(size=shape, dtype=np.float32) * np.float32(hi - lo) + np.float32(lo)
    else:
        mean, std = (float(a), float(b)) if a is not None else (0.0, 1.0)
        out = rng.standard_normal(size=shape, dtype=np.float32)
        if (mean, std) != (0.0, 1.0):
            out = out * np.float32(std) + np.float32(mean)
    return out.astype(dt)


def build_inputs(call: Call, seed: int = 0) -> dict[str, Any]:
    """The keyword arguments of simulator.run for a call: tensors as random arrays drawn from a
    fixed seed (in parameter order, so the same call always gets the same data), attributes
    coerced to their parameter kinds. Output tensors the call does not list are left to the
    operator's shape rules."""
    opdef = validate_call(call)
    rng = np.random.default_rng(seed)
    kw: dict[str, Any] = {}
    for p in opdef.params:
        if p.kind == "tensor":
            spec = call.tensors.get(p.name)
            if spec is not None:
                kw[p.name] = np.zeros(spec.shape, numpy_dtype(spec.dtype)) if p.output else _fill(rng, spec)
        elif p.name in call.attrs:
            kw[p.name] = _coerce_attr(call.op, p.name, p.kind, call.attrs[p.name])
    return kw


def light_inputs(call: Call) -> dict[str, Any]:
    """Inputs without data (zero-stride views with the right shape and dtype), for tiling_space."""
    opdef = validate_call(call)
    kw: dict[str, Any] = {}
    for p in opdef.params:
        if p.kind == "tensor" and p.name in call.tensors:
            spec = call.tensors[p.name]
            kw[p.name] = np.broadcast_to(np.zeros((), numpy_dtype(spec.dtype)), spec.shape)
        elif p.name in call.attrs:
            kw[p.name] = _coerce_attr(call.op, p.name, p.kind, call.attrs[p.name])
    return kw


def compute_cores(profile: Profile, pipe: str) -> int:
    return sum(k.count for k in profile.cores.values() if pipe in k.pipes and k.runs) or 1


def _row_from_report(report, profile: Profile) -> dict[str, Any]:
    row: dict[str, Any] = {"status": "ok", "cycles": report.cycles, "time_us": report.time_us,
                           "bound": report.bound, "workspace_bytes": report.workspace_bytes,
                           "device_bytes": report.device_memory["bytes"],
                           "device_GBps": report.device_memory["GBps"],
                           "roofline_cycles": report.roofline_cycles,
                           "roofline_efficiency": report.roofline_efficiency}
    work = {p: report.pipes[p]["work_cycles"] for p in ("PIPE_V", "PIPE_M") if p in report.pipes}
    cpipe = max(work, key=lambda p: work[p]) if work else "PIPE_V"
    row.update({"compute_pipe": cpipe, "compute_work_cycles": work.get(cpipe, 0.0),
                "compute_cores": compute_cores(profile, cpipe),
                "device_bytes_per_cycle": profile.device_bytes_per_cycle})
    for pipe in PIPES:
        row[f"busy_{pipe}"] = report.pipes[pipe]["busy_fraction"] if pipe in report.pipes else 0.0
    row["tiling"] = json.dumps(report.tiling, sort_keys=True, default=str)
    return row


_RUN_LOCK = threading.Lock()      # the ACL runtime is process-global: one call at a time per process


def run_call(call: Call, soc: str, overrides: dict | None = None, *, mode: str = "timing",
             seed: int = 0, tiling: dict | None = None, trace: bool = False,
             profile: Profile | None = None) -> tuple[dict[str, Any], Any]:
    """Run one call; returns (row, RunResult or None). Never raises for a call that is rejected,
    faults or is not available: the row's status says what happened."""
    from .api import run
    base = {"op": call.op, "shapes": call.shapes()}
    try:
        prof = profile or make_profile(soc, overrides)
        kw = build_inputs(call, seed)
    except NotAvailable as e:
        return dict(base, status="not available", message=str(e)), None
    except (StudyError, ProfileError) as e:
        return dict(base, status="invalid", message=str(e)), None
    til = tiling if tiling is not None else call.tiling
    try:
        with _RUN_LOCK:
            res = run(call.op, mode=mode, profile=prof, trace=trace, tiling=til, **kw)
    except AclnnError as e:
        return dict(base, status=f"rejected {e.status}", status_code=e.status,
                    message=one_line(str(e))), None
    except KernelError as e:
        return dict(base, status="kernel fault", message=one_line(str(e))), None
    row = dict(base)
    row.update(_row_from_report(res.report, prof))
    return row, res


def one_line(msg: str) -> str:
    """A message on one line: an internal traceback is cut, other lines joined."""
    lines = [l.strip() for l in str(msg).splitlines() if l.strip()]
    if not lines:
        return ""
    if any(l.startswith("Traceback") for l in lines):
        lines = lines[:next(i for i, l in enumerate(lines) if l.startswith("Traceback"))] or lines[:1]
    return "; ".join(lines)


# ---- distribution --------------------------------------------------------------------------------
@dataclass
class Task:
    """One unit of work: a call on one profile point, optionally with a forced tiling."""
    call: Call
    soc: str
    overrides: dict[str, Any]
    mode: str = "timing"
    seed: int = 0
    tiling: dict | None = None


def execute_task(task: Task) -> dict[str, Any]:
    """Run a task (in whatever process or Dask worker gets it) and return its row."""
    row, _ = run_call(task.call, task.soc, task.overrides, mode=task.mode, seed=task.seed,
                      tiling=task.tiling)
    return row


def _progress(total: int, desc: str, enabled: bool):
    try:
        from tqdm import tqdm
    except ImportError:          # pragma: no cover - tqdm is a core dependency
        enabled = False
        tqdm = None
    if not enabled or tqdm is None:
        class _Null:
            def update(self, n=1): pass
            def close(self): pass
        return _Null()
    return tqdm(total=total, desc=desc, unit="call", file=sys.stderr, leave=False, dynamic_ncols=True)


def _dask_client(scheduler: str):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise StudyError("--scheduler needs dask.distributed: pip install 'ascend-sim[dask]'") from None
    m = re.fullmatch(r"local(?::(\d+))?", scheduler)
    if m:
        import logging
        for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core",
                     "distributed.worker", "distributed.http.proxy"):
            logging.getLogger(name).setLevel(logging.WARNING)
        cluster = LocalCluster(n_workers=int(m.group(1) or os.cpu_count() or 1), threads_per_worker=1,
                               processes=True, dashboard_address=None)
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout="10s"), None
    except (OSError, TimeoutError) as e:
        raise StudyError(f"--scheduler: cannot reach a Dask scheduler at {scheduler}: {one_line(str(e))}") from None


def map_tasks(tasks: Sequence[Task], *, workers: int | None = 1, scheduler: str | None = None,
              progress: bool = False, desc: str = "simulating",
              fn: Callable[[Task], dict] = execute_task) -> list[dict]:
    """Run tasks and return their rows in task order. Biggest calls go first (better packing);
    `workers` local processes (None: one per CPU), or a Dask scheduler address ('local:N' starts
    a LocalCluster)."""
    n = len(tasks)
    results: list[dict | None] = [None] * n
    order = sorted(range(n), key=lambda i: -tasks[i].call.elements())
    bar = _progress(n, desc, progress)
    try:
        if scheduler:
            client, cluster = _dask_client(scheduler)
            try:
                from distributed import as_completed
                futures = client.map(fn, [tasks[i] for i in order], pure=False)
                index = {f.key: i for f, i in zip(futures, order)}
                for fut in as_completed(futures):
                    results[index[fut.key]] = fut.result()
                    bar.update(1)
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()
        else:
            workers = workers or os.cpu_count() or 1
            if workers <= 1 or n <= 1:
                for i in order:
                    results[i] = fn(tasks[i])
                    bar.update(1)
            else:
                from concurrent.futures import ProcessPoolExecutor, as_completed
                with ProcessPoolExecutor(max_workers=min(workers, n)) as ex:
                    futs = {ex.submit(fn, tasks[i]): i for i in order}
                    for fut in as_completed(futs):
                        results[futs[fut]] = fut.result()
                        bar.update(1)
    finally:
        bar.close()
    return results  # type: ignore[return-value]


# ---- replay, sweep -------------------------------------------------------------------------------
@dataclass
class Point:
    soc: str
    overrides: dict[str, Any]            # everything applied (fixed + swept)
    params: dict[str, Any]               # the swept values, for the rows


ROW_HEAD = ["soc", "point", "call", "label", "op", "stream", "count", "shapes", "status", "cycles",
            "time_us", "bound", "workspace_bytes", "device_bytes", "device_GBps", "roofline_cycles",
            "roofline_efficiency", "compute_pipe", "compute_work_cycles", "compute_cores",
            "device_bytes_per_cycle"] + [f"busy_{p}" for p in PIPES] + ["tiling", "message"]


def evaluate(w: Workload, points: Sequence[Point], *, calls: Sequence[int] | None = None,
             workers: int | None = 1, scheduler: str | None = None, progress: bool = False,
             mode: str = "timing", seed: int = 0, desc: str = "simulating") -> list[dict]:
    """Rows for every (point, call): identical calls of a point are simulated once."""
    idx = list(calls) if calls is not None else list(range(len(w.calls)))
    for p in points:                      # fail fast, in this process, on a bad SoC or field
        make_profile(p.soc, p.overrides)
    tasks: list[Task] = []
    slot: dict[tuple[int, str], int] = {}
    for pi, p in enumerate(points):
        for ci in idx:
            key = (pi, w.calls[ci].key())
            if key not in slot:
                slot[key] = len(tasks)
                tasks.append(Task(w.calls[ci], p.soc, p.overrides, mode, seed))
    results = map_tasks(tasks, workers=workers, scheduler=scheduler, progress=progress, desc=desc)
    rows = []
    for pi, p in enumerate(points):
        for ci in idx:
            c = w.calls[ci]
            r = results[slot[(pi, c.key())]]
            row: dict[str, Any] = {"soc": p.soc, "point": pi}
            row.update(p.params)
            row.update({"call": ci, "label": c.label, "op": c.op, "stream": c.stream, "count": c.count})
            row.update(r)
            rows.append(row)
    return rows


def replay(w: Workload, soc: str, overrides: dict | None = None, **kw) -> list[dict]:
    """Every call of a workload on one SoC (with optional what-if overrides): one row per call."""
    return evaluate(w, [Point(soc, dict(overrides or {}), {})], desc=f"replay on {soc}", **kw)


def grid_points(socs: Sequence[str], grid: dict[str, list], fixed: dict | None = None) -> list[Point]:
    """The cartesian product of SoCs and parameter values (parameters vary fastest, in order)."""
    names = list(grid)
    pts = []
    for soc in socs:
        for values in itertools.product(*(grid[k] for k in names)) if names else [()]:
            params = dict(zip(names, values))
            pts.append(Point(soc, {**(fixed or {}), **params}, params))
    return pts


def sweep(w: Workload, socs: Sequence[str], grid: dict[str, list], fixed: dict | None = None, **kw) -> list[dict]:
    """A what-if sweep: one row per point per call (tidy)."""
    kw.setdefault("desc", "sweep")
    return evaluate(w, grid_points(socs, grid, fixed), **kw)


def total_cycles(rows: Iterable[dict]) -> float:
    return sum(r["cycles"] * r.get("count", 1) for r in rows if r.get("status") == "ok")


def point_totals(rows: Sequence[dict]) -> list[dict]:
    """Per point: the count-weighted total cycles and time of the calls that ran."""
    out: dict[int, dict] = {}
    for r in rows:
        t = out.setdefault(r["point"], {"point": r["point"], "soc": r["soc"], "cycles": 0.0, "time_us": 0.0,
                                        "ok": 0, "skipped": 0, "failed": 0})
        if r["status"] == "ok":
            t["cycles"] += r["cycles"] * r["count"]
            t["time_us"] += r["time_us"] * r["count"]
            t["ok"] += 1
        elif r["status"] == "not available":
            t["skipped"] += 1
        else:
            t["failed"] += 1
    return [out[k] for k in sorted(out)]


def read_rows(path: str | Path) -> list[dict]:
    """Rows written by write_rows, back with numbers as numbers (CSV cells are text)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        out = []
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                row: dict[str, Any] = {}
                for k, v in r.items():
                    try:
                        row[k] = int(v)
                    except ValueError:
                        try:
                            row[k] = float(v)
                        except ValueError:
                            row[k] = v
                out.append(row)
        return out
    if path.suffix.lower() == ".jsonl":
        return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    return json.loads(path.read_text())


def write_rows(rows: Sequence[dict], path: str | Path) -> Path:
    """Tidy rows to CSV (.csv), JSON (.json) or JSON lines (.jsonl)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    head = [c for c in ROW_HEAD if c in cols]
    params = [c for c in cols if c not in ROW_HEAD and c != "status_code"]
    order = head[:2] + params + head[2:] + (["status_code"] if "status_code" in cols else [])
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with path.open("w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=order, extrasaction="ignore")
            wr.writeheader()
            for r in rows:
                wr.writerow({k: r.get(k, "") for k in order})
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps({k: r.get(k) for k in order if k in r}) + "\n" for r in rows))
    elif suffix == ".json":
        path.write_text(json.dumps([{k: r.get(k) for k in order if k in r} for r in rows], indent=1) + "\n")
    else:
        raise StudyError(f"--output: '{path}' must end in .csv, .json or .jsonl")
    return path


# ---- regression ------------------------------------------------------------------------------------
@dataclass
class Drift:
    call: int
    label: str
    op: str
    baseline: float | None
    current: float | None
    drift: float | None
    status: str            # ok | DRIFT | ERROR | skipped | new | expected (refused as recorded)


@dataclass
class RegressResult:
    soc: str
    tolerance: float
    drifts: list[Drift]
    total_baseline: float
    total_current: float
    rows: list[dict]
    updated: bool = False

    @property
    def total_drift(self) -> float:
        return (self.total_current - self.total_baseline) / self.total_baseline if self.total_baseline else 0.0

    @property
    def failures(self) -> list[Drift]:
        return [d for d in self.drifts if d.status in ("DRIFT", "ERROR")]

    @property
    def passed(self) -> bool:
        return self.updated or (not self.failures and abs(self.total_drift) <= self.tolerance)


def regress(w: Workload, soc: str, tolerance: float = 0.02, update: bool = False,
            calls: Sequence[int] | None = None, **kw) -> RegressResult:
    """Compare the current cycles of a trace's calls with its baselines on `soc`. Each call and
    the count-weighted total must stay within ±tolerance. `update=True` records the current
    cycles as the baselines (in the file) instead."""
    if tolerance < 0:
        raise StudyError(f"--tolerance must be >= 0, got {tolerance}")
    make_profile(soc)
    base = w.baselines.get(soc)
    if base is None and not update:
        have = ", ".join(sorted(w.baselines)) or "none"
        raise StudyError(f"{w.path or w.name}: no baselines for {soc} (has: {have}); record them with "
                         f"`ascend-sim regress {w.path or 'TRACE'} --soc {soc} --update`")
    rows = replay(w, soc, calls=calls, **kw)
    drifts: list[Drift] = []
    tb = tc = 0.0
    for r in rows:
        i = r["call"]
        b = base["calls"][i] if base else None
        cur = r["cycles"] if r["status"] == "ok" else None
        if r["status"] == "not available":
            drifts.append(Drift(i, r["label"], r["op"], b if not isinstance(b, str) else None, None, None, "skipped"))
            continue
        if isinstance(b, str):            # the call was recorded as refused: it must still be
            ok = r["status"] == b
            drifts.append(Drift(i, r["label"], r["op"], None, cur, None, "expected" if ok else "ERROR"))
            continue
        if cur is None:
            drifts.append(Drift(i, r["label"], r["op"], b, None, None, "ERROR"))
            continue
        if b is None:
            drifts.append(Drift(i, r["label"], r["op"], None, cur, None, "new"))
            continue
        d = (cur - b) / b if b else (0.0 if cur == 0 else math.inf)
        if abs(d) < 1e-12:
            d = 0.0
        tb += b * r["count"]
        tc += cur * r["count"]
        drifts.append(Drift(i, r["label"], r["op"], b, cur, d, "ok" if abs(d) <= tolerance else "DRIFT"))
    res = RegressResult(soc, tolerance, drifts, tb, tc, rows)
    if update:
        version = _version()
        old = list(base["calls"]) if base else [None] * len(w.calls)
        for r in rows:
            st = r["status"]
            old[r["call"]] = round(r["cycles"], 3) if st == "ok" else (None if st == "not available" else st)
        total = sum(c * w.calls[i].count for i, c in enumerate(old) if isinstance(c, (int, float)))
        w.baselines[soc] = {"total": round(total, 3),
                            "recorded": f"ascend-sim {version}, {kw.get('mode', 'timing')} mode",
                            "calls": old}
        if w.path is not None:
            write_baselines(w)
        res.updated = True
    return res


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("ascend-sim")
    except Exception:          # not installed (running from a checkout)
        return "dev"


# ---- tiling search -------------------------------------------------------------------------------
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
         top: int = 5, **kw) -> TuneResult:
    """Search a call's tiling: run the default plan and every candidate (the op's tiling_space,
    or the cartesian product of `space`), skip the candidates the planner rejects (561002), and
    rank the rest by cycles."""
    overrides = dict(overrides or {})
    prof = make_profile(soc, overrides)
    if space:
        names = list(space)
        cands = [dict(zip(names, vals)) for vals in itertools.product(*(space[n] for n in names))]
        validate_call(call)
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


def _short(key: str) -> str:
    """A parameter's short name for plots: 'cores.aiv.count' -> 'aiv.count'."""
    parts = key.split(".")
    if len(parts) > 1 and parts[-1] in ("count", "bytes", "latency_cycles", "bytes_per_cycle", "clock_mhz"):
        return ".".join(parts[-2:])
    return parts[-1]


def r0_soc(rows: Sequence[dict]) -> str:
    return rows[0]["soc"] if rows else ""


# ---- plots -------------------------------------------------------------------------------------------
def plot_sweep(rows: Sequence[dict], params: Sequence[str], path: str | Path, title: str = "") -> Path:
    """Three panels: total cycles against the first swept parameter (a line per SoC and other
    parameters), the per-pipe busy breakdown per point, and a roofline with every call placed on
    it. PNG or SVG by the file's extension (matplotlib, Agg backend)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise StudyError(f"--plot: '{path}' must end in .png or .svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    totals = point_totals(rows)
    by_point: dict[int, list[dict]] = {}
    for r in rows:
        by_point.setdefault(r["point"], []).append(r)
    first = {p: by_point[p][0] for p in by_point}
    socs = sorted({r["soc"] for r in rows})
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))

    # (a) cycles vs the first parameter
    ax = axes[0]
    xparam = params[0] if params else None
    series: dict[str, list[tuple[Any, float]]] = {}
    for t in totals:
        r0 = first[t["point"]]
        others = [f"{_short(k)}={r0[k]}" for k in params[1:]]
        name = " ".join([r0["soc"]] + others)
        x = r0[xparam] if xparam else r0["soc"]
        series.setdefault(name, []).append((x, t["cycles"]))
    numeric = xparam is not None and all(isinstance(x, (int, float)) for s in series.values() for x, _ in s)
    for name, pts in series.items():
        if numeric:
            pts = sorted(pts)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        else:
            ax.plot([str(p[0]) for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xlabel(xparam or "SoC")
    ax.set_ylabel("workload cycles (sum over calls, count-weighted)")
    ax.set_title("cycles vs " + (xparam or "SoC"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)

    # (b) per-pipe busy fraction per point (cycle-weighted over the calls)
    ax = axes[1]
    pipes = [p for p in PIPES if any(r.get(f"busy_{p}", 0) for r in rows if r.get("status") == "ok")]
    labels, fracs = [], {p: [] for p in pipes}
    for t in totals:
        rs = [r for r in by_point[t["point"]] if r["status"] == "ok"]
        wsum = sum(r["cycles"] * r["count"] for r in rs) or 1.0
        r0 = first[t["point"]]
        labels.append("\n".join(([r0["soc"]] if len(socs) > 1 or not params else [])
                                + [f"{_short(k)}={r0[k]}" for k in params]))
        for p in pipes:
            fracs[p].append(sum(r[f"busy_{p}"] * r["cycles"] * r["count"] for r in rs) / wsum)
    n = max(len(pipes), 1)
    width = 0.8 / n
    xs = np.arange(len(labels))
    for j, p in enumerate(pipes):
        ax.bar(xs + (j - (n - 1) / 2) * width, fracs[p], width, label=p)
    ax.set_xticks(xs, [l.replace("\n", ", ") for l in labels], fontsize=7, rotation=25, ha="right")
    ax.set_ylabel("busy fraction (mean over cores used, cycle-weighted)")
    ax.set_ylim(0, 1)
    ax.set_title("per-pipe breakdown")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)

    # (c) roofline in the compute pipe's units
    ax = axes[2]
    cmap = plt.get_cmap("tab10")
    roofs = {}
    for k, t in enumerate(totals):
        rs = [r for r in by_point[t["point"]] if r["status"] == "ok" and r.get("device_bytes")]
        if not rs:
            continue
        color = cmap(k % 10)
        xi = [r["compute_work_cycles"] / r["device_bytes"] for r in rs]
        yi = [min(r["compute_work_cycles"] / (r["cycles"] * r["compute_cores"]), 1.0) for r in rs]
        ax.scatter(xi, yi, s=[12 + 30 * r["count"] ** 0.5 for r in rs], color=color, alpha=0.7,
                   label=labels[k].replace("\n", " ") or r0_soc(by_point[t["point"]]))
        ridge = rs[0]["compute_cores"] / rs[0]["device_bytes_per_cycle"]   # work cycles per byte at the ridge
        roofs.setdefault(round(ridge, 9), color)
    if roofs:
        allx = [r["compute_work_cycles"] / r["device_bytes"] for r in rows
                if r.get("status") == "ok" and r.get("device_bytes")]
        lo = min(min(allx), min(roofs)) / 4
        hi = max(max(allx), max(roofs)) * 4
        xx = np.geomspace(lo, hi, 200)
        for ridge, color in roofs.items():
            ax.plot(xx, np.minimum(1.0, xx / ridge), color=color, lw=1.2, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
    ax.set_xlabel("intensity: compute-pipe work cycles per device-memory byte")
    ax.set_ylabel("compute-pipe utilisation (fraction of chip peak)")
    ax.set_title("roofline (dashed: min(1, intensity / ridge))")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
