"""One call of a trace: its OpDef, inputs built from a fixed seed, run through simulator.run, and
the row a study keeps of it (status, cycles, bound, pipe busy fractions, tiling).
"""
from __future__ import annotations

import json
import re
import threading
from typing import Any

import numpy as np

from ..enums import AclnnError, KernelError
from ..inputs import number
from ..profile import PIPES, Profile, ProfileError
from .trace import Call, StudyError, TensorSpec, numpy_dtype
from .whatif import make_profile


def opdef_for(op: str):
    from .. import aclnn
    return aclnn.REGISTRY.get(op)


def available_ops() -> list[str]:
    from .. import aclnn
    return sorted(aclnn.REGISTRY)


# aclnn's integer attributes and array elements are int64_t
INT64 = (-(1 << 63), (1 << 63) - 1)


def coerce_attr(op: str, name: str, kind: str, value: Any, allow_text: bool = True) -> Any:
    """An attribute as the operator takes it. null is the operator's own to judge (an absent
    array is aclnn's nullptr). Where `allow_text` (a command line's --attr) a value written as
    text ('1,1', 'true') is parsed; from a file a number is a number: text, bools where a number
    goes, null inside a list and non-finite numbers are refused, naming the attribute and element."""
    where = f"{op} attribute '{name}' ({kind})"
    if value is None:
        return None
    text = isinstance(value, str)           # the elements of a text value are text too
    if text and not allow_text:
        raise StudyError(f"{where}: {value!r} is text; give "
                         f"{'a list' if kind.endswith('_array') else 'a number' if kind != 'bool' else 'true or false'}")
    if kind in ("int_array", "bool_array"):
        if text:
            value = [v for v in re.split(r"[,\s]+", value.strip("[]() ")) if v]
        elif isinstance(value, (int, float, bool)):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise StudyError(f"{where}: expected a list, got {value!r}")
        if kind == "int_array":
            return [number(v, f"{where}[{i}]", lo=INT64[0], hi=INT64[1], integral=True, error=StudyError, text=text)
                    for i, v in enumerate(value)]
        return [_to_bool(v, f"{where}[{i}]", text) for i, v in enumerate(value)]
    if kind == "int":
        return number(value, where, lo=INT64[0], hi=INT64[1], integral=True, error=StudyError, text=text)
    if kind == "float":
        return number(value, where, error=StudyError, text=text)
    if kind == "bool":
        return _to_bool(value, where, text)
    return value


def _to_bool(v: Any, where: str, text: bool = True) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v in (0, 1):
        return bool(v)
    if not text or not isinstance(v, str):
        raise StudyError(f"{where}: {v!r} is not a boolean (true/false/1/0)")
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
    """Random data for a tensor: an array of its shape, or for a view (strides given) a buffer of
    the view's extent with the view over it (a non-contiguous input stays non-contiguous)."""
    if spec.strides is None:
        return _draw(rng, spec, spec.shape)
    extent = 1 + sum((d - 1) * s for d, s in zip(spec.shape, spec.strides)) if all(spec.shape) else 0
    base = _draw(rng, spec, (extent,))
    isz = base.dtype.itemsize
    return np.lib.stride_tricks.as_strided(base, spec.shape, tuple(s * isz for s in spec.strides))


def _draw(rng: np.random.Generator, spec: TensorSpec, shape: tuple[int, ...]) -> np.ndarray:
    dt = numpy_dtype(spec.dtype)
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


def build_inputs(call: Call, seed: int = 0, data: bool = True) -> dict[str, Any]:
    """The keyword arguments of simulator.run for a call: tensors as random arrays drawn from a
    fixed seed (in parameter order, so the same call always gets the same data), attributes
    coerced to their parameter kinds. Output tensors the call does not list are left to the
    operator's shape rules. With data=False (timing-only runs) tensors are TensorLayouts: no
    host memory, whatever their size."""
    from ..api import TensorLayout
    opdef = validate_call(call)
    rng = np.random.default_rng(seed)
    kw: dict[str, Any] = {}
    for p in opdef.params:
        if p.kind == "tensor":
            spec = call.tensors.get(p.name)
            if spec is None:
                continue
            if not data:
                kw[p.name] = TensorLayout(spec.shape, numpy_dtype(spec.dtype),
                                          None if p.output else spec.strides)
                continue
            try:
                kw[p.name] = np.zeros(spec.shape, numpy_dtype(spec.dtype)) if p.output else _fill(rng, spec)
            except (MemoryError, ValueError) as e:      # ValueError: numpy's "array is too big"
                nbytes = int(np.prod(spec.shape, dtype=object)) * numpy_dtype(spec.dtype).itemsize
                raise StudyError(f"{p.name}: {nbytes / 2 ** 30:,.1f} GiB of data does not fit in host memory "
                                 f"({type(e).__name__}); timing mode needs no data") from None
        elif p.name in call.attrs:
            kw[p.name] = coerce_attr(call.op, p.name, p.kind, call.attrs[p.name], allow_text=False)
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
            kw[p.name] = coerce_attr(call.op, p.name, p.kind, call.attrs[p.name], allow_text=False)
    return kw


def compute_cores(profile: Profile, pipe: str) -> int:
    return sum(k.count for k in profile.cores.values() if pipe in k.pipes and k.runs) or 1


def _row_from_report(report, profile: Profile) -> dict[str, Any]:
    fast = report.fast or {}
    row: dict[str, Any] = {"status": "ok", "cycles": report.cycles, "time_us": report.time_us,
                           "bound": report.bound,
                           # how far the cycles may be from the exact engine's (0: they are its)
                           "error_bound_cycles": fast.get("bound_cycles", 0.0),
                           "error_bound_fraction": fast.get("bound_fraction", 0.0),
                           "simulated_fraction": fast.get("simulated_fraction", 1.0),
                           "workspace_bytes": report.workspace_bytes,
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


def estimate_call(call: Call, profile: Profile, tiling: dict | None = None, mode: str = "timing"):
    """The call's Estimate (simulator.estimate) from its layouts alone, in `mode` (fast mode
    counts what it simulates), or None where the call would not run (not available, rejected,
    a fault): its row will say why."""
    from ..api import estimate
    try:
        kw = build_inputs(call, data=False)
        with _RUN_LOCK:
            return estimate(call.op, profile=profile, tiling=tiling if tiling is not None else call.tiling,
                            mode=mode, **kw)
    except (NotAvailable, StudyError, AclnnError, KernelError):
        return None


_RUN_LOCK = threading.Lock()      # the ACL runtime is process-global: one call at a time per process


def run_call(call: Call, soc: str, overrides: dict | None = None, *, mode: str = "timing",
             seed: int = 0, tiling: dict | None = None, trace: bool = False,
             profile: Profile | None = None, msprof_out: str | None = None) -> tuple[dict[str, Any], Any]:
    """Run one call; returns (row, RunResult or None). Never raises for a call that is rejected,
    faults or is not available: the row's status says what happened."""
    from ..api import run
    base = {"op": call.op, "shapes": call.shapes()}
    try:
        prof = profile or make_profile(soc, overrides)
        kw = build_inputs(call, seed, data=mode == "functional")
    except NotAvailable as e:
        return dict(base, status="not available", message=str(e)), None
    except (StudyError, ProfileError) as e:
        return dict(base, status="invalid", message=str(e)), None
    til = tiling if tiling is not None else call.tiling
    try:
        with _RUN_LOCK:
            res = run(call.op, mode=mode, profile=prof, trace=trace, tiling=til, msprof_out=msprof_out, **kw)
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
