"""The aclnn two-phase protocol.

Each operator in ops/ registers an `OpDef`: its parameters in the C signature's order, its checks,
and its planner (workspace and kernel launches). From that, this module makes the two functions
CANN has for every operator:

    workspaceSize, executor, ret = aclnnSiluBackwardGetWorkspaceSize(gradOutput, self, gradInput)
    ret = aclnnSiluBackward(workspace, workspaceSize, executor, stream)

Phase 1 checks everything and plans; phase 2 enqueues the executor's kernels on the stream and
frees the executor unless aclSetAclOpExecutorRepeatable was called.
"""
from __future__ import annotations

import numbers
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import acl
from .enums import AclnnError, aclnnStatus, param_invalid, param_nullptr
from .program import KernelLaunch
from .records import TaskRecord
from .profile import Profile

ACLNN_SUCCESS = 0
WORKSPACE_ALIGN = 512


@dataclass
class Param:
    name: str
    kind: str                    # tensor | int_array | bool_array | int | float | bool
    output: bool = False
    # how `run`, `replay` and the studies fill this input when the user gives no data or init
    # (normal, uniform(a,b), ...): sampling coordinates, say, belong in [-1, 1]
    init: str = "normal"


def _align(n: int) -> int:
    return -(-n // WORKSPACE_ALIGN) * WORKSPACE_ALIGN


@dataclass(frozen=True)
class WorkspacePart:
    """One named part of a call's workspace: what it holds, its size, and where it starts."""
    purpose: str
    nbytes: int
    offset: int                  # from the workspace's base address, a multiple of WORKSPACE_ALIGN


class Workspace:
    """A call's scratch device memory as named parts, each starting 512-B aligned. Phase 1 adds
    the parts, so every offset is known when the plan is made; phase 2 supplies the base address."""

    def __init__(self):
        self.parts: list[WorkspacePart] = []
        self.size = 0

    def add(self, purpose: str, nbytes: int) -> WorkspacePart:
        part = WorkspacePart(purpose, int(nbytes), self.size)
        self.parts.append(part)
        self.size += _align(part.nbytes)
        return part

    def breakdown(self) -> list[tuple[str, int]]:
        """(purpose, bytes) of each part, as the report and simulator.plan() show them."""
        return [(p.purpose, p.nbytes) for p in self.parts]


@dataclass
class Plan:
    """What phase 1 decided: the workspace, how to build the kernel launches once the workspace
    address is known, and the tiling figures the report shows."""
    workspace: Workspace = field(default_factory=Workspace)
    build: Callable[[int | None], list[KernelLaunch]] = lambda ws: []
    tiling: dict[str, Any] = field(default_factory=dict)

    @property
    def workspace_size(self) -> int:
        return self.workspace.size


@dataclass
class OpDef:
    name: str
    params: list[Param]
    check: Callable[[dict, Profile], None]
    plan: Callable[[dict, Profile, dict], Plan]     # (args, profile, forced tiling fields) -> Plan
    infer_outputs: Callable[[dict], dict] | None = None   # for simulator.run: output name -> (shape, dtype)
    # for `ascend-sim tune`: (inputs as simulator.run takes them, profile) -> candidate tiling
    # overrides (dicts of tiling fields); the planner rejects the ones that cannot work (561002)
    tiling_space: Callable[[dict, Profile], list[dict]] | None = None
    # the tiling fields a caller may force (simulator.run(tiling=...), --tiling): name -> "int"
    # (a positive integer) or "bool"; anything else in an override is 561002, checked here once
    tiling_fields: dict[str, str] = field(default_factory=dict)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def inputs(self) -> list[Param]:
        return [p for p in self.params if not p.output]

    @property
    def outputs(self) -> list[Param]:
        return [p for p in self.params if p.output]


OPERATOR_GROUP = "ascend_sim.operators"     # entry points: modules that register operators


class _Registry(dict):
    """Operator name -> OpDef. Filled at first use, not at import: the engine never imports an
    operator package. Operators are found through the `ascend_sim.operators` entry-point group
    (this project's `ops`, and any installed package that declares one), or, where no
    distribution declares any (a source tree on sys.path), the in-tree `ops` package."""
    _loaded = False

    def load(self) -> None:
        if _Registry._loaded:
            return
        _Registry._loaded = True
        import importlib
        from importlib.metadata import entry_points
        modules = [ep.value for ep in entry_points(group=OPERATOR_GROUP)] or ["ops"]
        for name in dict.fromkeys(modules):
            importlib.import_module(name)


def _loads_first(method):
    def wrapper(self, *args):
        self.load()
        return method(self, *args)
    wrapper.__name__ = method.__name__
    return wrapper


# every way of reading the registry loads the operators first (writing, by register(), does not)
for _name in ("__getitem__", "__contains__", "__iter__", "__len__", "get", "items", "keys", "values"):
    setattr(_Registry, _name, _loads_first(getattr(dict, _name)))


REGISTRY: dict[str, OpDef] = _Registry()


def __getattr__(name: str):
    """aclnnXxxGetWorkspaceSize / aclnnXxx exist once the operators are registered."""
    if name.startswith("aclnn") and not _Registry._loaded:
        REGISTRY.load()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class aclOpExecutor:
    def __init__(self, op: OpDef, args: dict, plan: Plan, profile: Profile):
        self.op, self.args, self.plan, self.profile = op, args, plan, profile
        self.repeatable = False
        self.freed = False
        self.report = None
        self.reports: list = []

    @property
    def workspace_size(self) -> int:
        return self.plan.workspace_size

    def __repr__(self):
        return f"aclOpExecutor({self.op.name}, workspace={self.workspace_size} B)"


def register(op: OpDef) -> OpDef:
    REGISTRY[op.name] = op
    globals()[f"aclnn{op.name}GetWorkspaceSize"] = _make_phase1(op)
    globals()[f"aclnn{op.name}"] = _make_phase2(op)
    return op


def _fail(err: AclnnError) -> int:
    acl.runtime().last_error = err.message
    return err.status


def _make_phase1(op: OpDef):
    def phase1(*args, **kwargs):
        rt = acl.runtime()
        try:
            bound = _bind(op, args, kwargs)
            if rt.device is None:
                raise AclnnError(aclnnStatus.ACLNN_ERR_RUNTIME_ERROR,
                                 "no device: call aclInit and aclrtSetDevice first")
            op.check(bound, rt.profile)
            tiling = check_tiling_override(op, rt.tiling_overrides.get(op.name) or {})
            plan = op.plan(bound, rt.profile, tiling)
        except AclnnError as e:
            return 0, None, _fail(e)
        except Exception as e:  # an internal fault must still come back as a status code
            return 0, None, _fail(AclnnError(aclnnStatus.ACLNN_ERR_INNER,
                                             f"internal error in {op.name} phase 1: {e!r}\n{traceback.format_exc()}"))
        return plan.workspace_size, aclOpExecutor(op, bound, plan, rt.profile), ACLNN_SUCCESS

    phase1.__name__ = f"aclnn{op.name}GetWorkspaceSize"
    phase1.__doc__ = (f"Phase 1 of aclnn{op.name}({', '.join(p.name for p in op.params)}): "
                      f"check and plan. Returns (workspaceSize, executor, status).")
    return phase1


def _make_phase2(op: OpDef):
    def phase2(workspace, workspaceSize, executor, stream=None):
        rt = acl.runtime()
        try:
            if executor is None:
                raise param_nullptr(f"aclnn{op.name}: executor is null")
            if not isinstance(executor, aclOpExecutor):
                raise param_invalid(f"aclnn{op.name}: {executor!r} is not an aclOpExecutor")
            if executor.freed:
                raise param_invalid(f"aclnn{op.name}: the executor was already run and freed (call "
                                    f"aclSetAclOpExecutorRepeatable after phase 1 to reuse it)")
            if executor.op is not op:
                raise param_invalid(f"aclnn{op.name}: the executor belongs to aclnn{executor.op.name}")
            need = executor.workspace_size
            if not _is_uint(workspaceSize):
                raise param_invalid(f"aclnn{op.name}: workspaceSize {workspaceSize!r} is invalid")
            if workspace is not None and not _is_uint(workspace):
                raise param_invalid(f"aclnn{op.name}: workspace {workspace!r} is not a device address")
            if int(workspaceSize) > 0 and workspace is None:
                raise param_nullptr(f"aclnn{op.name}: workspaceSize is {workspaceSize} but workspace is null")
            if int(workspaceSize) < need:
                raise param_invalid(f"aclnn{op.name}: workspaceSize {workspaceSize} is smaller than the "
                                    f"{need} B phase 1 asked for")
            device = rt.require_device()
            if need > 0:
                a = device.memory.find(int(workspace))
                if a is None or int(workspace) + need > a.addr + a.size:
                    raise param_invalid(f"aclnn{op.name}: workspace 0x{int(workspace):x} does not hold "
                                        f"{need} B of device memory")
            s = acl.resolve_stream(stream)
            launches = executor.plan.build(int(workspace) if need > 0 else None)
        except AclnnError as e:
            return _fail(e)

        def done(rec: TaskRecord):
            from .report import Report
            executor.report = Report.from_task(rec, executor.profile, op.name, executor.plan.workspace.breakdown(),
                                               executor.workspace_size, executor.plan.tiling,
                                               rt.functional, rt.mode)
            executor.reports.append(executor.report)
            rt.reports.append(executor.report)

        acl.enqueue(s, f"aclnn{op.name}", launches, done)
        if not executor.repeatable:
            executor.freed = True
        return ACLNN_SUCCESS

    phase2.__name__ = f"aclnn{op.name}"
    phase2.__doc__ = (f"Phase 2 of aclnn{op.name}: run the executor on a stream (asynchronous; "
                      f"results after aclrtSynchronizeStream). Returns the status.")
    return phase2


def _is_uint(v) -> bool:
    """A C uint64_t / void* value: a non-negative integer (Python or numpy), not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and int(v) >= 0


def aclSetAclOpExecutorRepeatable(executor) -> int:
    if executor is None:
        return _fail(param_nullptr("aclSetAclOpExecutorRepeatable: executor is null"))
    if not isinstance(executor, aclOpExecutor) or executor.freed:
        return _fail(param_invalid("aclSetAclOpExecutorRepeatable: not a live executor"))
    executor.repeatable = True
    return ACLNN_SUCCESS


def aclDestroyAclOpExecutor(executor) -> int:
    if executor is None:
        return _fail(param_nullptr("aclDestroyAclOpExecutor: executor is null"))
    if not isinstance(executor, aclOpExecutor) or executor.freed:
        return _fail(param_invalid("aclDestroyAclOpExecutor: not a live executor (already freed?)"))
    executor.freed = True
    return ACLNN_SUCCESS


def _bind(op: OpDef, args: tuple, kwargs: dict) -> dict:
    names = [p.name for p in op.params]
    if len(args) > len(names):
        raise param_invalid(f"aclnn{op.name}GetWorkspaceSize takes {len(names)} arguments "
                            f"({', '.join(names)}), got {len(args)}")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise param_invalid(f"aclnn{op.name}GetWorkspaceSize has no parameter '{k}' "
                                f"(parameters: {', '.join(names)})")
        if k in bound:
            raise param_invalid(f"aclnn{op.name}GetWorkspaceSize: '{k}' given twice")
        bound[k] = v
    for n in names:
        bound.setdefault(n, None)
    return bound


# ---- tiling experiments -------------------------------------------------------------------------
def set_tiling_override(op: str, tiling: dict | None) -> None:
    """Force tiling fields for an operator's next plans (tiling experiments); None clears."""
    rt = acl.runtime()
    if tiling:
        rt.tiling_overrides[op] = dict(tiling)
    else:
        rt.tiling_overrides.pop(op, None)


def check_tiling_override(op: OpDef, tiling: dict) -> dict:
    """The tiling contract, the same for every operator: only the fields the OpDef declares,
    each with a value of its kind (an int field: 1 .. 2^31 - 1, as a tiling struct's uint32 holds
    it; a bool field: true / false or 1 / 0); anything else is ACLNN_ERR_INNER_TILING_ERROR
    (561002). Returns the checked fields, which phase 1 hands to the planner."""
    def bad(msg: str) -> AclnnError:
        return AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR, f"{op.name} tiling override: {msg}")
    fields = op.tiling_fields
    unknown = sorted(str(k) for k in tiling if k not in fields)
    if unknown:
        takes = f"it takes {', '.join(sorted(fields))}" if fields else "it has no tiling field to force"
        raise bad(f"unknown field(s) {', '.join(unknown)}; {takes}")
    out = {}
    for name, value in tiling.items():
        if fields[name] == "bool":
            if isinstance(value, (bool, np.bool_)) or isinstance(value, numbers.Integral) and value in (0, 1):
                out[name] = bool(value)
                continue
            raise bad(f"{name} must be true or false (1 or 0), got {value!r}")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or not 1 <= value < 2 ** 31:
            raise bad(f"{name} must be an integer in [1, 2^31 - 1], got {value!r}")
        out[name] = int(value)
    return out


# ---- checks shared by operators ----------------------------------------------------------------
def require_present(a: dict, names, op: str = "") -> None:
    """The SPEC's first check: a null tensor or array is 161001."""
    prefix = f"{op}: " if op else ""
    for name in names:
        if a[name] is None:
            raise param_nullptr(f"{prefix}{name} is a null pointer")


def require_support(op: str, profile: Profile):
    """What the chip's product series supports of the operator; not at all is 161002."""
    support = profile.supports(op)
    if support is None:
        raise param_invalid(f"aclnn{op} is not supported on {profile.soc_version} ({profile.series_name})")
    return support


def check_tensor_view(t, name: str) -> None:
    """A tensor that is not null must describe a valid view of device memory it owns (161002)."""
    if not isinstance(t, acl.aclTensor):
        raise param_invalid(f"{name} is not an aclTensor (got {type(t).__name__})")
    if t.destroyed:
        raise param_invalid(f"{name} was destroyed")
    if len(t.stride) != len(t.viewDims):
        raise param_invalid(f"{name} has {len(t.stride)} strides for {len(t.viewDims)} dimensions")
    if any(d < 0 for d in t.viewDims):
        raise param_invalid(f"{name} has a negative dimension: {list(t.viewDims)}")
    if any(s < 0 for s in t.stride):
        raise param_invalid(f"{name} has a negative stride: {list(t.stride)}")
    if t.offset < 0:
        raise param_invalid(f"{name} has a negative offset {t.offset}")
    if any(d < 0 for d in t.storageDims):
        raise param_invalid(f"{name} has a negative storage dimension: {list(t.storageDims)}")
    if t.numel() == 0:
        return
    extent = t.offset + sum((d - 1) * s for d, s in zip(t.viewDims, t.stride)) + 1
    if extent > t.storage_numel():
        raise param_invalid(f"{name}: the view (shape {list(t.viewDims)}, stride {list(t.stride)}, "
                            f"offset {t.offset}) reaches element {extent - 1}, beyond its storage of "
                            f"{t.storage_numel()} elements")
    if t.data is None:
        raise param_invalid(f"{name} has no device memory")
    device = acl.runtime().device
    if device is not None:
        a = device.memory.find(t.data)
        if a is None or t.data + t.storage_numel() * t.itemsize > a.addr + a.size:
            raise param_invalid(f"{name}: its storage ({t.storage_numel()} x {t.itemsize} B at "
                                f"0x{t.data:x}) is not inside one device allocation")
