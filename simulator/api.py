"""The high-level entry: `simulator.run("SiluBackward", soc="Ascend910B1", gradOutput=a, self=b)`.

It takes the same path as a C++ caller: a private ACL runtime, device memory, aclTensors over the
arrays' layouts (a non-contiguous numpy view becomes a non-contiguous aclTensor), phase 1, the
workspace, phase 2 on a stream, synchronize, and the outputs copied back.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import acl, aclnn
from .enums import AclnnError, KernelError, aclFormat, acl_dtype_of, aclnnStatus, exception_line, raised_by_user
from .memory import UNWRITTEN_BYTE
from .profile import Profile
from .report import Report, Trace

_FORMAT_BY_RANK = {3: aclFormat.ACL_FORMAT_NCL, 4: aclFormat.ACL_FORMAT_NCHW, 5: aclFormat.ACL_FORMAT_NCDHW}


@dataclass
class RunResult:
    op: str
    outputs: dict[str, np.ndarray]
    workspace_size: int
    cycles: float
    time_us: float
    report: Report
    trace: Trace = field(repr=False)

    def __getattr__(self, name: str) -> Any:
        outputs = self.__dict__.get("outputs", {})
        if name in outputs:
            return outputs[name]
        raise AttributeError(name)


@contextmanager
def _private_device(soc, mode, profile, trace):
    """A private ACL runtime with device 0 set: calls here never touch the caller's ACL state."""
    rt = acl.Runtime()
    with acl.use_runtime(rt):
        ret = acl.aclInit(None, soc=soc, mode=mode, profile=profile, trace=trace)
        if ret:
            _fail(ret)
        acl.aclrtSetDevice(0)
        yield rt


def _fail(status, message=None):
    raise AclnnError(status, message or acl.aclGetRecentErrMsg() or "(no error message was recorded)")


@dataclass(frozen=True)
class TensorLayout:
    """A tensor with no data: its shape, dtype and, optionally, strides in elements (default
    contiguous). Timing-only calls take it in place of an array, so that a tensor of any size
    costs no host memory; functional calls need the data and reject it."""
    shape: tuple
    dtype: Any
    strides: tuple | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if self.strides is None:
            st, acc = [], 1
            for d in reversed(self.shape):
                st.append(acc)
                acc *= max(d, 1)
            object.__setattr__(self, "strides", tuple(reversed(st)))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=object))

    def stand_in(self) -> np.ndarray:
        """A read-only zero-stride array of this shape and dtype: free, whatever the size."""
        return np.broadcast_to(np.zeros((), self.dtype), self.shape)


def _as_array(v, name: str):
    """A tensor argument as a numpy array (lists and other array-likes are converted; Python
    floats become FLOAT, as in torch), or a TensorLayout as it is; anything numpy cannot make a
    numeric array of is 161002."""
    if isinstance(v, (np.ndarray, TensorLayout)):
        return v
    try:
        arr = np.asarray(v)
    except (ValueError, TypeError) as e:
        raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                         f"{name}: not an array ({type(v).__name__}: {one_line(str(e))})") from None
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                         f"{name}: not a numeric array (a {type(v).__name__} numpy reads as {arr.dtype})")
    if arr.dtype == np.float64 and not hasattr(v, "dtype"):
        arr = arr.astype(np.float32)      # Python floats: FLOAT, as torch.tensor([...]) makes them
    return arr


def one_line(text: str) -> str:
    return " ".join(str(text).split())


class _HostTensor:
    """A host array (or a TensorLayout, timing only) placed in device memory with its layout."""

    def __init__(self, arr, name: str, fmt: aclFormat | None, functional: bool = True):
        if isinstance(arr, TensorLayout) and functional:
            raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                             f"{name}: a TensorLayout has no data; functional mode needs an array "
                             f"(or run with mode='timing')")
        dt = acl_dtype_of(arr.dtype)
        if dt is None:
            raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                             f"{name}: numpy dtype {arr.dtype} has no aclDataType")
        isz = arr.dtype.itemsize
        if isinstance(arr, TensorLayout):
            strides = arr.strides
        else:
            if any(s < 0 or s % isz for s in arr.strides):
                arr = np.ascontiguousarray(arr)        # negative or unaligned strides: copy (documented)
            strides = tuple(s // isz for s in arr.strides)
        self.arr, self.name = arr, name
        if not arr.size:                # an empty tensor: numpy's strides mean nothing; take the dense ones
            strides, acc = [], 1
            for d in reversed(arr.shape):
                strides.append(acc)
                acc *= max(d, 1)
            strides = tuple(reversed(strides))
        self.strides = strides
        extent = (sum((d - 1) * s for d, s in zip(arr.shape, self.strides)) + 1) if arr.size else 0
        self.extent = extent
        self.functional = functional
        nbytes = max(extent, 1) * isz
        self.ptr, ret = acl.aclrtMalloc(nbytes, 0)
        if ret:
            raise AclnnError(ret, f"{name}: {_size(nbytes)} does not fit in device memory "
                                  f"({one_line(acl.aclGetRecentErrMsg() or '')})")
        if functional:            # timing-only mode moves no data
            self.storage = np.zeros(max(extent, 1), dtype=arr.dtype)
            if arr.size:
                as_strided(self.storage, shape=arr.shape, strides=arr.strides)[...] = arr
            ret = acl.aclrtMemcpy(self.ptr, nbytes, self.storage, nbytes,
                                  acl.aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
            if ret:
                _fail(ret)
        fmt = fmt if fmt is not None else _FORMAT_BY_RANK.get(arr.ndim, aclFormat.ACL_FORMAT_ND)
        self.tensor = acl.aclCreateTensor(arr.shape, dt, self.strides, 0, fmt, (max(extent, 1),), self.ptr)

    def read_back(self) -> None:
        if not self.functional:
            return
        nbytes = self.storage.nbytes
        ret = acl.aclrtMemcpy(self.storage, nbytes, self.ptr, nbytes, acl.aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST)
        if ret:
            _fail(ret)
        if self.arr.size:
            self.arr[...] = as_strided(self.storage, shape=self.arr.shape, strides=self.arr.strides)


def _size(nbytes: int) -> str:
    for unit, k in (("PiB", 2 ** 50), ("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= k:
            return f"{nbytes / k:.2f} {unit}"
    return f"{nbytes} B"


def _to_arg(name: str, kind: str, value):
    if value is None:
        return None
    if kind in ("int_array", "bool_array"):
        if isinstance(value, (str, bytes)) or not np.iterable(value):
            raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                             f"{name}: an {kind.replace('_', ' ')} is expected (a list), got {type(value).__name__} "
                             f"{one_line(repr(value))[:60]}")
        items = list(value)
        if kind == "int_array":
            if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in items):
                raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                                 f"{name}: every element of an int array must be an integer, got {one_line(repr(items))[:80]}")
            return acl.aclCreateIntArray([int(v) for v in items])
        if not all(isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)) for v in items):
            raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                             f"{name}: every element of a bool array must be a bool (or 0 / 1), got "
                             f"{one_line(repr(items))[:80]}")
        return acl.aclCreateBoolArray([bool(v) for v in items])
    return value


def _check_params(op: str) -> aclnn.OpDef:
    opdef = aclnn.REGISTRY.get(op)
    if opdef is None:
        raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                         f"unknown operator '{op}'; known: {', '.join(sorted(aclnn.REGISTRY))}")
    return opdef


def _bind_arrays(opdef, params: dict, format, functional: bool):
    """The call's arguments as the aclnn functions take them: numpy arrays placed in device
    memory (with their data in functional mode), outputs not passed allocated from the operator's
    shape rules. Returns (host tensors, args, output arrays)."""
    names = {p.name for p in opdef.params}
    unknown = set(params) - names
    if unknown:
        raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                         f"{opdef.name} has no parameter(s) {', '.join(sorted(unknown))}; "
                         f"parameters: {', '.join(p.name for p in opdef.params)}")
    host: dict[str, _HostTensor] = {}
    args: dict[str, Any] = {}
    tensors: dict[str, Any] = {}
    for p in opdef.inputs:
        v = params.get(p.name)
        if p.kind == "tensor" and v is not None:
            tensors[p.name] = _as_array(v, p.name)
            host[p.name] = _HostTensor(tensors[p.name], p.name, format, functional)
            args[p.name] = host[p.name].tensor
        else:
            args[p.name] = _to_arg(p.name, p.kind, v)
    wanted, why = {}, None
    if opdef.infer_outputs is not None:
        try:
            wanted = opdef.infer_outputs({k: (v.stand_in() if isinstance(v, TensorLayout) else v)
                                          for k, v in {**params, **tensors}.items()}) or {}
        except Exception as e:       # phase 1 says what is wrong with the inputs (see _phase1_failed)
            wanted, why = {}, one_line(f"{type(e).__name__}: {e}")
    outputs: dict[str, np.ndarray] = {}
    underived: list[str] = []
    for p in opdef.outputs:
        v = params.get(p.name)
        if v is None and wanted.get(p.name) is not None:
            shape, dt = wanted[p.name]
            if not _is_layout(shape, dt):
                why = f"it would be {one_line(repr(shape))} {dt}"
            else:       # timing-only: an output no one reads is a layout, shown as a free zero-stride view
                v = _unwritten(shape, dt) if functional else TensorLayout(shape, dt)
        if v is None and opdef.infer_outputs is not None and why is not None:
            underived.append(p.name)
            first = next((tensors[q.name] for q in opdef.inputs if q.name in tensors), None)
            # a stand-in so that phase 1 runs its checks on the inputs and names what is wrong
            v = TensorLayout(first.shape, first.dtype) if first is not None else TensorLayout((1,), np.float32)
            if functional:
                v = np.zeros(v.shape, v.dtype)
        if v is None:
            args[p.name] = None
            continue
        if isinstance(v, np.ndarray) and not v.flags.writeable:
            raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                             f"{p.name}: the output array is read-only (the call writes it)")
        if not isinstance(v, (np.ndarray, TensorLayout)):
            raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                             f"{p.name}: an output must be a writable numpy array, got {type(v).__name__}")
        host[p.name] = _HostTensor(v, p.name, format, functional)
        args[p.name] = host[p.name].tensor
        outputs[p.name] = v.stand_in() if isinstance(v, TensorLayout) else v
    if underived:
        args["_underived"] = (underived, why)
    return host, args, outputs


def _is_layout(shape, dt) -> bool:
    """Whether an inferred output is a tensor the device can hold: whole non-negative dims, a dtype
    with an aclDataType."""
    try:
        return (all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape)
                and acl_dtype_of(np.dtype(dt)) is not None)
    except TypeError:
        return False


def _phase1_failed(opdef, args: dict, ret) -> None:
    """Raise phase 1's error. Where an output could not be derived from the inputs and phase 1
    found nothing wrong with them but the stand-in output (or nothing at all), the inputs are what
    is inconsistent: 161002 with the reason."""
    underived, why = args.get("_underived", ((), None))
    msg = acl.aclGetRecentErrMsg() or ""
    if underived and (not ret or any(f"{n} " in msg or f"{n}:" in msg or f"{n}[" in msg for n in underived)):
        raise AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID,
                         f"{opdef.name}: {', '.join(underived)} cannot be derived from the inputs ({why}); "
                         f"check the inputs' shapes and attributes, or pass {', '.join(underived)}")
    if ret:
        _fail(ret, msg or None)


def _unwritten(shape, dt) -> np.ndarray:
    """An output the caller did not pass, as a framework allocates one (torch.empty on the device):
    UNWRITTEN_BYTE in every byte, so an element the call leaves unwritten reads NaN (-1 in the
    integers) instead of a zero that may pass for a result."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.zeros(shape, dt)
    return np.full(int(np.prod(shape)) * dt.itemsize, UNWRITTEN_BYTE, np.uint8).view(dt).reshape(shape)


@dataclass
class PlanResult:
    """What phase 1 decides for a call, without running it: the workspace (its named parts) and
    the tiling the operator chose (the same figures a run reports)."""
    op: str
    workspace_size: int
    workspace: list[tuple[str, int]]
    tiling: dict


def plan(op: str, soc: str | None = None, *, profile: Profile | None = None, format: aclFormat | None = None,
         tiling: dict | None = None, **params) -> PlanResult:
    """Phase 1 of an aclnn call only (checks, tiling, workspace), as simulator.run takes it; the
    tensors' data is never read (np.zeros arrays of any size cost no memory until written). Raises AclnnError
    for a call the operator rejects."""
    opdef = _check_params(op)
    with _private_device(soc, "timing", profile, False):
        aclnn.set_tiling_override(op, tiling)
        _, args, _ = _bind_arrays(opdef, params, format, False)
        ws_size, executor, ret = getattr(aclnn, f"aclnn{op}GetWorkspaceSize")(
            **{k: v for k, v in args.items() if k != "_underived"})
        if ret or "_underived" in args:
            _phase1_failed(opdef, args, ret)
        return PlanResult(op, ws_size, executor.plan.workspace.breakdown(), dict(executor.plan.tiling))


def _phase1(opdef, params: dict, format, functional: bool, tiling: dict | None):
    """Bind the arguments, run phase 1 and allocate the workspace: (host tensors, output
    arrays, workspace size, executor, workspace address or None)."""
    aclnn.set_tiling_override(opdef.name, tiling)
    host, args, outputs = _bind_arrays(opdef, params, format, functional)
    ws_size, executor, ret = getattr(aclnn, f"aclnn{opdef.name}GetWorkspaceSize")(
        **{k: v for k, v in args.items() if k != "_underived"})
    if ret or "_underived" in args:
        _phase1_failed(opdef, args, ret)
    ws = None
    if ws_size > 0:
        ws, ret = acl.aclrtMalloc(ws_size, 0)
        if ret:
            _fail(ret)
    return host, outputs, ws_size, executor, ws


# Wall time per simulated instruction, for estimates: measured on this project's 2-core VM over
# calls of the shipped traces (timing 10-18 us, functional 16-31 us per instruction; see
# docs/RELIABILITY.md). An estimate, not a promise.
SECONDS_PER_INSTRUCTION = {"timing": 15e-6, "fast": 15e-6, "functional": 30e-6}


@dataclass
class Estimate:
    """What a call will cost to simulate, known before it runs (from its plan): the instructions
    its launches issue (each launch's first and last blocks recorded, scaled to all blocks), the
    bytes of tensors and workspace, the host memory a functional run holds, and a wall time."""
    op: str
    instructions: int
    launches: list[tuple[str, int, int]]        # (name, blocks, instructions)
    tensor_bytes: int
    workspace_bytes: int

    def host_bytes(self, mode: str) -> int:
        """Host memory of a run: in functional mode each tensor lives three times (the caller's
        array, its staging copy and the simulated device memory), plus the workspace; timing
        mode holds no tensor data."""
        return 3 * self.tensor_bytes + self.workspace_bytes if mode == "functional" else 0

    def seconds(self, mode: str) -> float:
        """Estimated wall time of the run on a machine like this project's 2-core VM."""
        return self.instructions * SECONDS_PER_INSTRUCTION[mode]


def estimate(op: str, soc: str | None = None, *, profile: Profile | None = None, format: aclFormat | None = None,
             tiling: dict | None = None, mode: str = "timing", **params) -> Estimate:
    """The size of a call before it runs, as simulator.run takes it (arrays, or TensorLayouts:
    no data is read). `mode` "fast" counts the instructions fast mode simulates (its declared
    loops' skipped iterations are not recorded); the exact modes count them all. Raises
    AclnnError where phase 1 would, KernelError where a block's body faults while it records."""
    opdef = _check_params(op)
    layouts = {k: (TensorLayout(v.shape, v.dtype) if isinstance(v, np.ndarray) else v) for k, v in params.items()}
    with _private_device(soc, "fast" if mode == "fast" else "timing", profile, False) as rt:
        host, _, ws_size, executor, ws = _phase1(opdef, layouts, format, False, tiling)
        launches = [(la.name, la.block_dim, rt.device.count_launch(la)) for la in executor.plan.build(ws)]
        tensor_bytes = sum(h.arr.size * h.arr.dtype.itemsize for h in host.values())
        return Estimate(op, sum(n for _, _, n in launches), launches, tensor_bytes, ws_size)


@contextmanager
def _progress_bar(rt, total: int | None):
    """A tqdm bar on stderr over the instructions the device has issued, updated from a helper
    thread (the engine is not slowed: it only bumps a counter)."""
    if not total:
        yield
        return
    import threading
    from tqdm import tqdm
    bar = tqdm(total=total, unit="instr", unit_scale=True, desc="simulating", leave=False,
               dynamic_ncols=True)
    stop = threading.Event()

    def poll():
        while not stop.wait(0.25):
            dev = rt.device
            if dev is not None:
                bar.n = min(dev.issued, total)
                bar.refresh()
    t = threading.Thread(target=poll, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        bar.close()


def run(op: str, soc: str | None = None, *, mode: str = "functional", profile: Profile | None = None,
        format: aclFormat | None = None, trace: bool = True, tiling: dict | None = None,
        progress: int | None = None, msprof_out: str | None = None, warmup: int = 0, **params) -> RunResult:
    """Run one aclnn operator call on a simulated chip and return its outputs and report.

    Keyword names are the aclnn parameter names. Tensors are numpy arrays (any layout; BF16 as
    ml_dtypes.bfloat16). Outputs may be passed (they are written in place) or left out (then they
    are allocated from the operator's shape rules). `mode="timing"` skips the data. Raises
    AclnnError (with .status) for a rejected call and KernelError for a kernel fault.
    `tiling` forces fields of the operator's tiling (561002 if they cannot work). `progress`: the
    call's estimated instructions (simulator.estimate) to show a progress bar on stderr over.
    `msprof_out`: also write the call's msprof and msKPP files there (docs/OUTPUTS.md).
    `warmup`: run the call that many times first on the same device and report the run after
    them, as a benchmark that times a repeated call measures it (what fits the L2 is warm)."""
    opdef = _check_params(op)
    if msprof_out is not None:
        from .outputs import check_output
        check_output(Path(msprof_out) / "op_summary.csv", "msprof_out")
    with _private_device(soc, mode, profile, trace) as rt:
        host, outputs, ws_size, executor, ws = _phase1(opdef, params, format, mode == "functional", tiling)
        stream, _ = acl.aclrtCreateStream()
        if warmup:
            aclnn.aclSetAclOpExecutorRepeatable(executor)
        for run_index in range(warmup + 1):
            ret = getattr(aclnn, f"aclnn{op}")(ws, ws_size, executor, stream)
            if ret:
                _fail(ret)
            with _progress_bar(rt, progress if run_index == warmup else None):
                ret = acl.aclrtSynchronizeStream(stream)
            if ret:
                raise KernelError(acl.aclGetRecentErrMsg() or "kernel fault (no message was recorded)")
        if warmup:
            aclnn.aclDestroyAclOpExecutor(executor)
        for p in opdef.outputs:
            if p.name in outputs and isinstance(host[p.name].arr, np.ndarray):
                ht = host[p.name]
                ht.read_back()
                if ht.arr is not outputs[p.name]:       # the array was copied (negative strides)
                    outputs[p.name][...] = ht.arr
        report = executor.report
        if msprof_out is not None:
            from .msprof import write_msprof
            write_msprof(report.trace.rec, rt.profile, op, msprof_out)
        return RunResult(op, outputs, ws_size, report.cycles, report.time_us, report, report.trace)


class KernelArgumentError(ValueError):
    """An argument run_kernel cannot place on the device (an array of text or of objects)."""


class KernelBodyError(KernelError):
    """A user's kernel body raised an exception of its own (a wrong argument, a division by
    zero): the user's error, not a fault the machine found. The message names the exception and
    the line of the user's code it came from."""


class _UserBody:
    """A user's kernel body as the engine calls it: an exception it raises (any BaseException
    but an interruption: SystemExit and GeneratorExit included) is kept, with the innermost line
    of the user's code it passed through, and the block ends as a KernelBodyError; the machine's
    own faults (KernelError) and its unwinding pass through."""

    def __init__(self, body):
        self.body = body
        self.__name__ = getattr(body, "__name__", "kernel")
        self.error: str | None = None

    def __call__(self, *args):
        try:
            return self.body(*args)
        except KernelError:
            raise
        except BaseException as e:
            if not raised_by_user(e):
                raise
            if self.error is None:
                self.error = f"{exception_line(e)}{_user_line(e)}"
            raise KernelBodyError(self.error) from None


def _abandon(rt) -> None:
    """Best effort, after an interruption that may have come mid-handoff between the engine and
    a body it records: the run is given up either way, and the interruption is what to report."""
    try:
        if rt.device is not None:
            rt.device.abandon_recordings()
    except Exception:
        pass


def _user_line(e: BaseException) -> str:
    """' (at file.py:12)': the innermost frame of the traceback outside the simulator package."""
    import traceback
    from .program import LIBRARY
    where = ""
    for fr in traceback.extract_tb(e.__traceback__):
        if not fr.filename.startswith(LIBRARY):
            where = f" (at {Path(fr.filename).name}:{fr.lineno})"
    return where


@dataclass
class KernelResult:
    """What run_kernel returns: every array argument as it is after the kernel (copies; the
    arrays passed in are not modified), and the cost."""
    outputs: dict[str, np.ndarray]
    cycles: float
    time_us: float
    report: Report
    trace: Trace = field(repr=False)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.outputs[name]


def run_kernel(body, block_dim: int, args: dict[str, Any], *, kind: str = "vector",
               soc: str | None = None, mode: str = "functional", profile: Profile | None = None,
               name: str | None = None, trace: bool = True, warmup: int = 0,
               msprof_out: str | None = None) -> KernelResult:
    """Run your own kernel body (written with simulator.kernel) on a simulated chip.

    `args` maps the body's parameter names to values: numpy arrays become GM_ADDR pointers to
    device copies of them; anything else (a tiling struct, ints) is passed as it is. `kind` is
    'vector' (AIV on A2), 'cube' (AIC on A2) or 'mix'; on the coupled chips all run on AI cores.
    `warmup` runs the kernel that many times first (the arrays are copied in again after them), so
    the reported run finds its data warm in L2, as a board run does after its host-to-device copies.
    Raises KernelError with the core, pipe and instruction at fault, KernelBodyError (a
    KernelError) with the line of `body` for an exception the body itself raised, and
    KernelArgumentError for an array of text or objects in `args`."""
    from .kernel import GM_ADDR
    from .program import KernelLaunch
    if msprof_out is not None:           # before the run, as run() does: a path that cannot be written is the caller's
        from .outputs import check_output
        check_output(Path(msprof_out) / "op_summary.csv", "msprof_out")
    with _private_device(soc, mode, profile, trace) as rt:
        placed: dict[str, tuple[int, np.ndarray]] = {}
        values = []
        for key, v in args.items():
            if isinstance(v, np.ndarray):
                if v.dtype.kind in "USO" or v.dtype.fields:      # text, objects, records (not ml_dtypes' 'V')
                    raise KernelArgumentError(f"args['{key}']: an array of {v.dtype} ({v.dtype.kind!r}); an array "
                                              f"a kernel reads holds numbers (bool, int, float)")
                a = np.ascontiguousarray(v).copy()
                ptr, ret = acl.aclrtMalloc(max(a.nbytes, 1), 0)
                if ret:
                    _fail(ret)
                if a.nbytes:
                    acl.aclrtMemcpy(ptr, a.nbytes, a, a.nbytes, acl.aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
                placed[key] = (ptr, a)
                values.append(GM_ADDR(ptr, a.nbytes, a.dtype, key))
            else:
                values.append(v)
        label = name or getattr(body, "__name__", "kernel")
        body = _UserBody(body)
        box: dict[str, Report] = {}

        def done(rec):
            box["report"] = Report.from_task(rec, rt.profile, label, functional=rt.functional, mode=rt.mode)

        for run in range(warmup + 1):
            if run:                     # the warm-up changed the outputs: start from the inputs again
                for ptr, a in placed.values():
                    if a.nbytes:
                        acl.aclrtMemcpy(ptr, a.nbytes, a, a.nbytes, acl.aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
            acl.enqueue(rt.default_stream, label, [KernelLaunch(label, body, block_dim, kind, tuple(values))], done)
            try:
                ret = acl.aclrtSynchronizeStream(None)
            except BaseException:          # interrupted (Ctrl-C, a time budget): unwind the bodies too
                _abandon(rt)
                raise
            if ret and body.error is not None:
                raise KernelBodyError(body.error)
            if ret:
                raise KernelError(acl.aclGetRecentErrMsg() or "kernel fault (no message was recorded)")
        outputs = {}
        for key, (ptr, a) in placed.items():
            if a.nbytes:
                acl.aclrtMemcpy(a, a.nbytes, ptr, a.nbytes, acl.aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST)
            outputs[key] = a
        report = box["report"]
        if msprof_out is not None:
            from .msprof import write_msprof
            write_msprof(report.trace.rec, rt.profile, label, msprof_out)
        return KernelResult(outputs, report.cycles, report.time_us, report, report.trace)
