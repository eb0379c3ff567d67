"""Workload traces (traces/README.md): the Call / TensorSpec / Workload types, reading YAML, JSON and
JSON-lines traces with one-line errors, and writing traces and their cycle baselines.
"""
from __future__ import annotations

import json
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Sequence, Union

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..inputs import number, parse_json, parse_yaml, read_text, schema_error
from ..outputs import write_text


FORMAT = "ascend-sim/workload-trace/1"


TOP_LEVEL_KEYS = {"format", "name", "description", "source", "defaults", "step", "calls", "estimated", "baselines",
                  "notes"}
STEP_KINDS = ("training", "inference")


CALL_KEYS = {"op", "tensors", "attrs", "stream", "label", "count", "tiling", "dtype"}


TENSOR_KEYS = {"shape", "dtype", "init", "strides"}


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


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str
    init: str = "normal"          # normal | uniform | uniform(a,b) | zeros | ones
    strides: tuple[int, ...] | None = None     # in elements; None = contiguous (a view otherwise)

    def to_record(self) -> dict:
        d: dict[str, Any] = {"shape": list(self.shape), "dtype": self.dtype}
        if self.strides is not None:
            d["strides"] = list(self.strides)
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
        return sum(int(np.prod(v.shape, dtype=object)) for v in self.tensors.values())

    def nbytes(self) -> int:
        """Bytes of the tensors the call lists (what a functional run makes data for)."""
        return sum(int(np.prod(v.shape, dtype=object)) * numpy_dtype(v.dtype).itemsize
                   for v in self.tensors.values())


UNITS = ("cube", "vector")


@dataclass
class EstimatedCall:
    """A call of the step that we do not simulate: an aten op with what a roofline needs (the unit
    it runs on, its dtype, its work and the bytes it moves). `flops` is the unit's work: for the
    Cube 2 x multiply-adds; for the vector unit one operation per element of the call's largest
    tensor (or the FLOP formula's count where it is larger). simulator/studies/estimate.py turns it
    into a time on any profile."""
    op: str                        # the aten op, e.g. "aten.native_batch_norm"
    unit: str                      # "cube" | "vector"
    dtype: str
    flops: int
    bytes: int
    count: int = 1
    label: str = ""
    shape: tuple[int, ...] = ()    # its output's shape, for tables (not used by the estimate)

    def key(self) -> tuple:
        return (self.op, self.unit, self.dtype, self.flops, self.bytes, self.shape)

    def to_record(self) -> dict:
        rec: dict[str, Any] = {"op": self.op}
        if self.label:
            rec["label"] = self.label
        rec.update({"unit": self.unit, "dtype": self.dtype, "flops": self.flops, "bytes": self.bytes})
        if self.shape:
            rec["shape"] = list(self.shape)
        if self.count != 1:
            rec["count"] = self.count
        return rec

    def shapes(self) -> str:
        return "x".join(map(str, self.shape)) if self.shape else "scalar"


class _EstimatedRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: Annotated[str, Field(strict=True, min_length=1)]
    label: Annotated[str, Field(strict=True)] = ""
    unit: Annotated[str, Field(strict=True, pattern=r"^(cube|vector)$")]
    dtype: Annotated[str, Field(strict=True)]
    flops: Annotated[int, Field(strict=True, ge=0)]
    bytes: Annotated[int, Field(strict=True, ge=0)]
    shape: list[Annotated[int, Field(strict=True, ge=0)]] = []
    count: Annotated[int, Field(strict=True, ge=1, le=1 << 53)] = 1


ESTIMATED_FIELDS = {
    "op": "the aten op's name (text)", "label": "text", "unit": "cube or vector",
    "dtype": "a dtype name (FLOAT16, FLOAT, ...)", "flops": "the unit's work, an integer >= 0",
    "bytes": "bytes moved, an integer >= 0", "shape": "a list of integers >= 0",
    "count": "an integer in 1..2**53"}


def estimated_from_record(rec: Any, where: str) -> EstimatedCall:
    """An EstimatedCall from a trace's `estimated:` entry; errors name `where` and the field."""
    if not isinstance(rec, dict):
        raise StudyError(f"{where}: an estimated call is a mapping with op, unit, dtype, flops, bytes")
    try:
        r = _EstimatedRecord.model_validate(rec)
    except ValidationError as e:
        raise StudyError(schema_error(e, where, ESTIMATED_FIELDS, rec)) from None
    return EstimatedCall(r.op, r.unit, canonical_dtype(r.dtype, f"{where}: dtype"), r.flops, r.bytes, r.count,
                         r.label, tuple(r.shape))


@dataclass
class Workload:
    """A trace: the calls we simulate (`calls`, with their baselines) and, for a whole step, the
    calls we estimate (`estimated`)."""
    name: str
    calls: list[Call]
    description: str = ""
    source: str = ""
    baselines: dict[str, dict] = field(default_factory=dict)
    path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)     # defaults, step, notes: kept on save
    estimated: list[EstimatedCall] = field(default_factory=list)

    @property
    def step(self) -> dict:
        """What the step is: {'kind': 'training' or 'inference', 'batch': samples per step}, each
        key only where the trace says it (a captured trace says its kind)."""
        return self.extra.get("step") or {}

    def select(self, selection: str | Sequence[int] | None) -> list[int]:
        return parse_selection(selection, len(self.calls))


def parse_selection(selection: str | Sequence[int] | None, n: int) -> list[int]:
    """'0-3,7' -> [0, 1, 2, 3, 7] (call indices); None -> all. A selection of no call is refused
    (a study of nothing has no rows to show)."""
    if selection is None or (isinstance(selection, str) and selection == ""):
        return list(range(n))
    out: list[int] = []
    if not isinstance(selection, str):
        for i in selection:
            out.append(_check_index(i, n))
    else:
        for part in selection.split(","):
            part = part.strip()
            m = re.fullmatch(r"(\d+)\s*(?:-\s*(\d+))?", part)
            if not m:
                raise StudyError(f"--calls: '{part}' is not an index or a range like 3-7")
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) else lo
            for i in (lo, hi):
                _check_index(i, n)
            if hi < lo:
                raise StudyError(f"--calls: '{part}' is a range from high to low; write {hi}-{lo}")
            out.extend(range(lo, hi + 1))
    if not out:
        raise StudyError(f"--calls: the selection {selection!r} names no call (the workload has {n}, 0-{n - 1})")
    return sorted(set(out))


def _check_index(i: Any, n: int) -> int:
    """`i` as a call index (any integer type, numpy's too; never a bool), within the workload."""
    try:
        if isinstance(i, bool):
            raise TypeError
        i = operator.index(i)
    except TypeError:
        raise StudyError(f"--calls: {i!r} is not a call index (an integer)") from None
    if not 0 <= i < n:
        raise StudyError(f"--calls: index {i!r} is out of range (the workload has {n} calls, 0-{n - 1})")
    return i


# No chip holds more than 2**50 bytes of device memory (profile.DeviceMemory): a tensor of more
# elements cannot be placed anywhere, and numpy refuses far smaller ones.
MAX_ELEMENTS = 1 << 50


def shape_of(value: Any, where: str) -> tuple[int, ...]:
    text = value
    if isinstance(value, str):
        if not value.strip():
            raise StudyError(f"{where}: no dimensions given (a scalar is [])")
        inner = value.strip("[]() ").rstrip(",").strip()    # (a trailing comma, as Python writes (8,))
        value = re.split(r"\s*[,x]\s*|\s+", inner) if inner else []
        if any(not d for d in value):
            raise StudyError(f"{where}: {text!r} has an empty dimension (dimensions are separated by one ',' or 'x')")
    if not isinstance(value, (list, tuple)):
        raise StudyError(f"{where}: a shape is a list of integers, got {value!r}")
    if len(value) > 64:
        raise StudyError(f"{where}: {len(value)} dimensions; a tensor has at most 64 (aclTensor: 8 in practice)")
    dims = []
    for d in value:
        try:
            dims.append(number(d, where, lo=0, hi=MAX_ELEMENTS, integral=True, error=StudyError,
                               text=isinstance(text, str)))
        except StudyError:
            raise StudyError(f"{where}: {text!r} is not a list of integers >= 0 (each at most 2**50)") from None
    size = 1
    for d in dims:
        size *= d
    if size > MAX_ELEMENTS:
        raise StudyError(f"{where}: {list(dims)} has {size:.3g} elements; no chip holds more than 2**50")
    return tuple(dims)


def check_init(init: str, where: str) -> str:
    init = str(init).strip()
    if init in ("normal", "uniform", "zeros", "ones") or re.fullmatch(
            r"(normal|uniform)\(\s*[-+\d.eE]+\s*,\s*[-+\d.eE]+\s*\)", init):
        return init
    raise StudyError(f"{where}: unknown init '{init}' (normal, uniform, uniform(a,b), normal(mean,std), zeros, ones)")


def default_init(op: str, name: str) -> str:
    """How an input is filled when no init is given: as the operator's Param says."""
    from ..aclnn import REGISTRY
    opdef = REGISTRY.get(op)
    param = opdef.param(name) if opdef is not None else None
    return param.init if param is not None else "normal"


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
                raise StudyError(f"{w}: unknown field(s) {', '.join(sorted(bad))} (a tensor has shape, dtype, "
                                 f"init, strides)")
            if "shape" not in spec:
                raise StudyError(f"{w}: field 'shape' is missing")
            shape = shape_of(spec["shape"], w + ".shape")
            strides = _strides_of(spec.get("strides"), shape, w + ".strides")
            dt = spec.get("dtype", call_dtype)
            init = check_init(spec.get("init", default_init(op, name)), w + ".init")
        else:
            shape = shape_of(spec, w)
            dt = call_dtype
            init = default_init(op, name)
            strides = None
        if dt is None:
            raise StudyError(f"{w}: no dtype (give the tensor's dtype, the call's 'dtype' or defaults.dtype)")
        tensors[str(name)] = TensorSpec(shape, canonical_dtype(dt, w + ".dtype"), init, strides)
    attrs = rec.get("attrs", {}) or {}
    if not isinstance(attrs, dict):
        raise StudyError(f"{where}: field 'attrs' is a mapping of parameter name -> value")
    stream = rec.get("stream", defaults.get("stream", 0))
    count = rec.get("count", 1)
    # a count weights cycle totals (floats): past 2**53 it is no longer a count a float holds
    if not isinstance(stream, int) or isinstance(stream, bool) or not 0 <= stream <= MAX_COUNT:
        raise StudyError(f"{where}: field 'stream' must be an integer in 0..2**53, got {_short(stream)}")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_COUNT:
        raise StudyError(f"{where}: field 'count' must be an integer in 1..2**53, got {_short(count)}")
    tiling = rec.get("tiling")
    if tiling is not None and not isinstance(tiling, dict):
        raise StudyError(f"{where}: field 'tiling' is a mapping of tiling field -> value")
    return Call(op, tensors, dict(attrs), stream, str(rec.get("label", "")), count, tiling)


MAX_COUNT = 1 << 53


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _strides_of(raw, shape: tuple[int, ...], where: str) -> tuple[int, ...] | None:
    """A view's strides in elements (one per dimension, >= 0), or None for a contiguous tensor."""
    if raw is None:
        return None
    if (not isinstance(raw, (list, tuple)) or len(raw) != len(shape)
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_ELEMENTS for v in raw)):
        raise StudyError(f"{where}: a list of {len(shape)} integers >= 0 (elements, one per dimension), "
                         f"got {raw!r}")
    return tuple(raw)


def read_structured(path: Path) -> tuple[str, Any]:
    """A trace, sweep file or call record: ('jsonl' | 'json' | 'yaml', its data); one StudyError
    line for a file that is missing, a folder, binary, malformed or nested absurdly deep."""
    path = Path(path)
    text = read_text(path, error=StudyError)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        header: dict[str, Any] = {}
        calls, baselines, estimated = [], {}, []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("//"):
                continue
            obj = parse_json(line, f"{path}: line {lineno}", StudyError)
            if not isinstance(obj, dict):
                raise StudyError(f"{path}: line {lineno}: each line is a JSON object")
            if "op" in obj:
                obj.setdefault("__line__", lineno)
                calls.append(obj)
            elif "baselines" in obj and len(obj) == 1:
                baselines = obj["baselines"]
            elif "estimated" in obj and len(obj) == 1:
                estimated.append(obj["estimated"])
            else:
                header.update(obj)
        header["calls"] = calls
        if estimated:
            header["estimated"] = estimated
        if baselines:
            header["baselines"] = baselines
        return "jsonl", header
    if suffix == ".json":
        return "json", parse_json(text, str(path), StudyError)
    return "yaml", parse_yaml(text, str(path), StudyError)


CycleCount = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]
# a call recorded as refused: the status its row had ('rejected 161002', 'kernel fault', 'invalid')
RecordedStatus = Annotated[str, Field(strict=True, pattern=r"^(rejected \d+|kernel fault|invalid)$")]


class Baseline(BaseModel):
    """One chip's baselines in a trace: a cycle count per call (a recorded refusal, or null
    for a call not available), their count-weighted total and what recorded them."""
    model_config = ConfigDict(extra="forbid")
    calls: list[Union[CycleCount, RecordedStatus, None]]
    total: CycleCount | None = None
    recorded: Annotated[str, Field(strict=True)] | None = None


def read_baselines(raw: Any, path: Path, n_calls: int) -> dict[str, dict]:
    """A trace's `baselines`, checked: SoC name -> Baseline, one entry per call."""
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: field 'baselines' is a mapping of SoC -> {{total, recorded, calls}}")
    for soc, b in raw.items():
        if not isinstance(soc, str) or not soc:
            raise StudyError(f"{path}: baselines: {soc!r} is not a SoC name")
        try:
            Baseline.model_validate(b)
        except ValidationError as e:
            raise StudyError(schema_error(e, f"{path}: baselines.{soc}", {
                "calls": "a list of one cycle count (a finite number >= 0) per call, a recorded status "
                         "('rejected 161002', 'kernel fault', 'invalid') or null",
                "total": "the count-weighted total cycles, a finite number >= 0",
                "recorded": "text saying what recorded them"}, b)) from None
        if len(b["calls"]) != n_calls:
            raise StudyError(f"{path}: baselines.{soc}.calls has {len(b['calls'])} entries for "
                             f"{n_calls} calls (re-record with `ascend-sim regress {path} --soc {soc} --update`)")
    return raw


def load_trace(path: str | Path) -> Workload:
    """Load a workload trace (YAML, JSON or JSON lines); a malformed file raises StudyError
    naming the file, the call and the field."""
    path = Path(path)
    fmt, raw = read_structured(path)
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: a workload trace is a mapping with 'calls' (see traces/README.md)")
    unknown = set(raw) - TOP_LEVEL_KEYS
    if unknown:
        raise StudyError(f"{path}: unknown top-level field(s) {', '.join(sorted(unknown))} "
                         f"(a trace has {', '.join(sorted(TOP_LEVEL_KEYS))})")
    if raw.get("format", FORMAT) != FORMAT:
        raise StudyError(f"{path}: field 'format' is {raw.get('format')!r}; this simulator reads {FORMAT!r}")
    step = raw.get("step")
    if step is not None:
        if not isinstance(step, dict) or set(step) - {"kind", "batch"} \
                or step.get("kind", "training") not in STEP_KINDS \
                or not (step.get("batch") is None or type(step["batch"]) is int and step["batch"] > 0):
            raise StudyError(f"{path}: field 'step' is {{kind: {' or '.join(STEP_KINDS)}, batch: a positive "
                             f"integer}} (got {step!r})")
        raw["step"] = {k: v for k, v in step.items() if v is not None}
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
    baselines = read_baselines(raw.get("baselines") or {}, path, len(calls))
    est_raw = raw.get("estimated") or []
    if not isinstance(est_raw, list):
        raise StudyError(f"{path}: field 'estimated' is a list of estimated calls (op, unit, dtype, flops, bytes)")
    estimated = [estimated_from_record(rec, f"{path}: estimated call {i}") for i, rec in enumerate(est_raw)]
    extra = {k: raw[k] for k in ("defaults", "step", "notes") if k in raw}
    return Workload(str(raw.get("name") or path.stem), calls, str(raw.get("description") or ""),
                    str(raw.get("source") or ""), baselines, path, extra, estimated)


def estimated_yaml(estimated: list[EstimatedCall]) -> str:
    """The `estimated:` block of a YAML trace, one flow mapping per line."""
    if not estimated:
        return ""
    return "estimated:\n" + "".join(f"  - {json.dumps(e.to_record())}\n" for e in estimated)


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
    head = {"format": FORMAT, "name": w.name}
    if w.description:
        head["description"] = w.description
    if w.source:
        head["source"] = w.source
    head.update(w.extra)
    if path.suffix.lower() == ".jsonl":
        lines = [json.dumps(head)] + [json.dumps(c.to_record()) for c in w.calls]
        lines += [json.dumps({"estimated": e.to_record()}) for e in w.estimated]
        if w.baselines:
            lines.append(json.dumps({"baselines": w.baselines}))
        write_text(path, "\n".join(lines) + "\n", "trace file")
    elif path.suffix.lower() == ".json":
        d = dict(head, calls=[c.to_record() for c in w.calls])
        if w.estimated:
            d["estimated"] = [e.to_record() for e in w.estimated]
        if w.baselines:
            d["baselines"] = w.baselines
        write_text(path, json.dumps(d, indent=1) + "\n", "trace file")
    else:
        text = yaml.safe_dump(head, sort_keys=False, width=100)
        text += "calls:\n" + "".join(f"  - {json.dumps(c.to_record())}\n" for c in w.calls)
        text += estimated_yaml(w.estimated)
        if w.baselines:
            text += _baseline_yaml(w.baselines, w.calls)
        write_text(path, text, "trace file")
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
        return write_text(path, text + block, "baselines")
    end = next((i for i in range(start + 1, len(lines))
                if re.match(r"[A-Za-z_]", lines[i])), len(lines))
    return write_text(path, "".join(lines[:start]) + block + "".join(lines[end:]), "baselines")


def write_estimated(w: Workload) -> Path:
    """Rewrite the trace file's estimated calls only. In a YAML trace the `estimated:` block is
    replaced in place, or put before `baselines:` (the calls, their comments and the baselines
    stay byte for byte); JSON files are rewritten whole."""
    assert w.path is not None
    path = w.path
    if path.suffix.lower() in (".jsonl", ".json"):
        return save_trace(w, path)
    lines = path.read_text().splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    block = estimated_yaml(w.estimated)
    start = next((i for i, l in enumerate(lines) if re.match(r"estimated\s*:", l)), None)
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if re.match(r"[A-Za-z_#]", lines[i])), len(lines))
    else:
        start = end = next((i for i, l in enumerate(lines) if re.match(r"baselines\s*:", l)), len(lines))
    return write_text(path, "".join(lines[:start]) + block + "".join(lines[end:]), "estimated calls")
