"""The ACL runtime (AscendCL), simulated: init, devices, device memory, memcpy, streams, events,
aclTensor and arrays.

Functions follow pyACL's convention: they return their out-values followed by the status code
(`ptr, ret = aclrtMalloc(size, 0)`); functions whose C form returns a pointer return the object
(or None). Host buffers are numpy arrays (or bytes for sources).

Streams are asynchronous: an operator enqueued on a stream runs when the stream is synchronised
(aclrtSynchronizeStream / aclrtSynchronizeEvent / aclrtSynchronizeDevice); results are visible
after that, as on the device.
"""
from __future__ import annotations

import os
import threading
import traceback
from contextlib import contextmanager
from typing import Any, Sequence

import numpy as np
import simpy

from .enums import (AclnnError, KernelError, aclDataType, aclError, aclFormat, aclrtMemcpyKind,
                    NUMPY_OF)
from .fast import DEFAULT_SCHEDULE
from .machine import Device
from .records import TaskRecord
from .profile import DEFAULT_SOC, Profile, ProfileError, load_profile

ACL_SUCCESS = aclError.ACL_SUCCESS


class aclTensor:
    """A view over device memory: logical shape (viewDims), strides and offset in elements,
    format, and the storage it views (storageDims from address `data`)."""

    def __init__(self, viewDims, dataType, stride, offset, format, storageDims, data):
        self.viewDims = tuple(int(d) for d in viewDims)
        self.dataType = aclDataType(dataType)
        self.stride = tuple(int(s) for s in stride)
        self.offset = int(offset)
        self.format = aclFormat(format)
        self.storageDims = tuple(int(d) for d in storageDims)
        self.data = None if data is None else int(data)
        self.destroyed = False

    @property
    def dtype(self) -> np.dtype:
        return NUMPY_OF[self.dataType]

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def numel(self) -> int:
        n = 1
        for d in self.viewDims:
            n *= d
        return n

    def storage_numel(self) -> int:
        n = 1
        for d in self.storageDims:
            n *= d
        return n

    def contiguous_strides(self) -> tuple[int, ...]:
        out, acc = [], 1
        for d in reversed(self.viewDims):
            out.append(acc)
            acc *= max(d, 1)
        return tuple(reversed(out))

    def is_contiguous(self) -> bool:
        """Row-major dense (size-1 dimensions' strides do not matter)."""
        acc = 1
        for d, s in zip(reversed(self.viewDims), reversed(self.stride)):
            if d != 1 and s != acc:
                return False
            acc *= d
        return True

    def __repr__(self) -> str:
        return (f"aclTensor(shape={list(self.viewDims)}, {self.dataType.name}, stride={list(self.stride)}, "
                f"offset={self.offset}, {self.format.name})")


class aclIntArray:
    def __init__(self, values):
        self.values = tuple(int(v) for v in values)

    def __len__(self):
        return len(self.values)

    def __repr__(self):
        return f"aclIntArray({list(self.values)})"


class aclBoolArray:
    def __init__(self, values):
        self.values = tuple(bool(v) for v in values)

    def __len__(self):
        return len(self.values)

    def __repr__(self):
        return f"aclBoolArray({list(self.values)})"


class aclrtStream:
    def __init__(self, sid: int):
        self.id = sid
        self.tail: simpy.Event | None = None
        self.destroyed = False
        self.launched = False       # a kernel has run on it: the next one waits the launch gap

    def __repr__(self):
        return f"aclrtStream({self.id})"


class aclrtEvent:
    def __init__(self):
        self.marker: simpy.Event | None = None
        self.time: float | None = None


class Runtime:
    """One process's ACL state: the chosen SoC and mode, the device and its streams."""

    def __init__(self):
        self.initialized = False
        self.profile: Profile | None = None
        self.functional = True
        self.mode = "functional"
        self.tracing = True
        self.device: Device | None = None
        self.device_id: int | None = None
        self.default_stream: aclrtStream | None = None
        self._streams = 0
        self._errors: dict[int, list[str]] = {}     # thread id -> messages, newest first
        self.reports: list[Any] = []
        self.tiling_overrides: dict[str, dict] = {}   # operator -> tiling fields to force

    MAX_ERRORS = 32        # messages nobody reads pile up to this many, then the oldest are lost (as in CANN)

    def error(self, code: int, message: str) -> int:
        self.last_error = message
        return int(code)

    @property
    def last_error(self) -> str:
        """The newest error message of this thread ("" if none), without clearing it."""
        msgs = self._errors.get(threading.get_ident())
        return msgs[0] if msgs else ""

    @last_error.setter
    def last_error(self, message: str) -> None:
        """Record an error message for this thread; an empty one clears them."""
        tid = threading.get_ident()
        if not message:
            self._errors.pop(tid, None)
            return
        msgs = self._errors.setdefault(tid, [])
        msgs.insert(0, message)
        del msgs[self.MAX_ERRORS:]

    def take_errors(self) -> str | None:
        """aclGetRecentErrMsg: this thread's messages, newest first, and clear them."""
        msgs = self._errors.pop(threading.get_ident(), None)
        return "\n".join(msgs) if msgs else None

    def require_device(self) -> Device:
        if self.device is None:
            raise AclnnError(361001, "no device: call aclInit and aclrtSetDevice first")
        return self.device


_runtime = Runtime()


def runtime() -> Runtime:
    return _runtime


@contextmanager
def use_runtime(rt: Runtime):
    """Run ACL calls against a private runtime (the high-level simulator.run does this)."""
    global _runtime
    saved = _runtime
    _runtime = rt
    try:
        yield rt
    finally:
        _runtime = saved


# ---- init / device ---------------------------------------------------------------------------
MODES = ("functional", "timing", "fast")


def _new_device(rt: Runtime) -> Device:
    return Device(rt.profile, functional=rt.functional, trace=rt.tracing,
                  fast=DEFAULT_SCHEDULE if rt.mode == "fast" else None)


def aclInit(configPath: str | None = None, *, soc: str | None = None, mode: str | None = None,
            profile: Profile | None = None, trace: bool = True) -> int:
    """Initialise ACL. The SoC comes from `soc`, else $ASCEND_SIM_SOC, else Ascend910B1; `mode`
    is 'functional' (default, or $ASCEND_SIM_MODE), 'timing' or 'fast' (timing, with declared
    loops fast-forwarded: simulator/fast/); `profile` passes a what-if profile object directly."""
    rt = _runtime
    if rt.initialized:
        return rt.error(aclError.ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialised")
    mode = mode or os.environ.get("ASCEND_SIM_MODE", "functional")
    if mode not in MODES:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM,
                        f"aclInit: mode must be 'functional', 'timing' or 'fast', not {mode!r}")
    try:
        rt.profile = profile or load_profile(soc or os.environ.get("ASCEND_SIM_SOC") or DEFAULT_SOC)
    except ProfileError as e:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclInit: {e}")
    rt.functional = mode == "functional"
    rt.mode = mode
    rt.tracing = trace
    rt.initialized = True
    return ACL_SUCCESS


def aclFinalize() -> int:
    rt = _runtime
    if not rt.initialized:
        return rt.error(aclError.ACL_ERROR_UNINITIALIZE, "aclFinalize: not initialised")
    if rt.device is not None:
        rt.device.abandon_recordings()     # blocks of tasks never synchronised
    rt.__init__()
    return ACL_SUCCESS


def aclrtSetDevice(deviceId: int) -> int:
    rt = _runtime
    if not rt.initialized:
        return rt.error(aclError.ACL_ERROR_UNINITIALIZE, "aclrtSetDevice: call aclInit first")
    if deviceId != 0:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtSetDevice: the simulator has one device (0), not {deviceId}")
    if rt.device is None:
        rt.device = _new_device(rt)
        rt.default_stream = aclrtStream(0)
    rt.device_id = 0
    return ACL_SUCCESS


def aclrtResetDevice(deviceId: int) -> int:
    rt = _runtime
    if rt.device is None or deviceId != rt.device_id:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtResetDevice: device {deviceId} is not set")
    rt.device.abandon_recordings()
    rt.device = None
    rt.device_id = None
    return ACL_SUCCESS


def aclrtGetDevice() -> tuple[int, int]:
    rt = _runtime
    if rt.device_id is None:
        return -1, rt.error(aclError.ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: no device set")
    return rt.device_id, ACL_SUCCESS


def aclrtGetSocName() -> str | None:
    return _runtime.profile.soc_version if _runtime.profile else None


def aclGetRecentErrMsg() -> str | None:
    """As CANN's: obtains and clears the messages of this thread's failed calls, the newest on
    top (one per line); None (nullptr) when there is none."""
    return _runtime.take_errors()


# ---- memory ----------------------------------------------------------------------------------
def aclrtMalloc(size: int, policy: int = 0) -> tuple[int | None, int]:
    rt = _runtime
    if rt.device is None:
        return None, rt.error(aclError.ACL_ERROR_UNINITIALIZE, "aclrtMalloc: no device set")
    if not isinstance(size, (int, np.integer)) or size <= 0:
        return None, rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtMalloc: size must be positive, got {size!r}")
    addr = rt.device.memory.malloc(int(size))
    if addr is None:
        mem = rt.device.memory
        return None, rt.error(aclError.ACL_ERROR_BAD_ALLOC,
                              f"aclrtMalloc: {size} B does not fit: {mem.used} of {mem.capacity} B in use")
    return addr, ACL_SUCCESS


def aclrtFree(devPtr: int) -> int:
    rt = _runtime
    if rt.device is None or not rt.device.memory.free(devPtr):
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtFree: {devPtr!r} is not an allocation")
    rt.device.l2.forget(devPtr)
    return ACL_SUCCESS


def _host_bytes(buf, count: int, writable: bool) -> np.ndarray:
    if isinstance(buf, (bytes, bytearray, memoryview)) and not writable:
        arr = np.frombuffer(buf, dtype=np.uint8)
    elif isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise ValueError("host buffer must be C-contiguous")
        arr = buf.reshape(-1).view(np.uint8)
    else:
        raise ValueError(f"host buffer must be a numpy array{'' if writable else ' or bytes'}")
    if arr.size < count:
        raise ValueError(f"host buffer holds {arr.size} B, fewer than count={count}")
    return arr[:count]


def _dev_bytes(rt: Runtime, ptr, count: int, limit: int | None = None) -> np.ndarray | None:
    if not isinstance(ptr, (int, np.integer)):
        raise ValueError(f"device pointer expected, got {type(ptr).__name__}")
    a = rt.device.memory.find(int(ptr))
    if a is None or int(ptr) + count > a.addr + a.size:
        raise ValueError(f"device range 0x{int(ptr):x}+{count} is outside any allocation")
    return rt.device.memory.bytes_at(int(ptr), count)


def aclrtMemcpy(dst, destMax: int, src, count: int, kind: int) -> int:
    """Synchronous copy of `count` bytes. Host buffers are numpy arrays (bytes for sources)."""
    rt = _runtime
    if rt.device is None:
        return rt.error(aclError.ACL_ERROR_UNINITIALIZE, "aclrtMemcpy: no device set")
    try:
        kind = aclrtMemcpyKind(kind)
    except ValueError:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtMemcpy: unknown kind {kind!r}")
    if count < 0 or count > destMax:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtMemcpy: count {count} exceeds destMax {destMax}")
    if count == 0:
        return ACL_SUCCESS
    try:
        if kind == aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE:
            s, d = _host_bytes(src, count, False), _dev_bytes(rt, dst, count)
        elif kind == aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST:
            s, d = _dev_bytes(rt, src, count), _host_bytes(dst, count, True)
        elif kind == aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE:
            s, d = _dev_bytes(rt, src, count), _dev_bytes(rt, dst, count)
        else:
            s, d = _host_bytes(src, count, False), _host_bytes(dst, count, True)
    except ValueError as e:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtMemcpy ({kind.name}): {e}")
    if d is not None:
        d[...] = s if s is not None else 0
    return ACL_SUCCESS


def aclrtMemset(devPtr: int, maxCount: int, value: int, count: int) -> int:
    rt = _runtime
    if rt.device is None:
        return rt.error(aclError.ACL_ERROR_UNINITIALIZE, "aclrtMemset: no device set")
    if count > maxCount:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, "aclrtMemset: count exceeds maxCount")
    try:
        d = _dev_bytes(rt, devPtr, count)
    except ValueError as e:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtMemset: {e}")
    if d is not None:
        d[...] = value & 0xFF
    return ACL_SUCCESS


# ---- streams and events ----------------------------------------------------------------------
def aclrtCreateStream() -> tuple[aclrtStream | None, int]:
    rt = _runtime
    if rt.device is None:
        return None, rt.error(aclError.ACL_ERROR_UNINITIALIZE, "aclrtCreateStream: no device set")
    rt._streams += 1
    return aclrtStream(rt._streams), ACL_SUCCESS


def aclrtDestroyStream(stream: aclrtStream) -> int:
    if not isinstance(stream, aclrtStream) or stream.destroyed:
        return _runtime.error(aclError.ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: not a live stream")
    ret = aclrtSynchronizeStream(stream)
    stream.destroyed = True
    return ret


def resolve_stream(stream) -> aclrtStream:
    rt = _runtime
    if stream is None:
        return rt.default_stream
    if not isinstance(stream, aclrtStream) or stream.destroyed:
        raise AclnnError(161002, f"{stream!r} is not a live stream")
    return stream


def enqueue(stream: aclrtStream, label: str, launches: list, on_done) -> None:
    """Append a task (kernel launches run one after another) to a stream. A launch that follows
    another on the stream first waits the profile's launch gap; the task's time starts with its
    first launch, so a call's cycles hold the gaps between its own launches only."""
    device = _runtime.require_device()
    env = device.env
    after = stream.tail
    rec = TaskRecord(label)
    gap = device.profile.runtime.launch_gap_us * device.profile.clock_mhz

    def task():
        if after is not None:
            yield after
        for i, launch in enumerate(launches):
            if stream.launched and gap:
                yield env.timeout(gap)
            if i == 0:
                rec.start = env.now
            stream.launched = True
            yield env.process(device.run_launch(launch, rec))
        if not launches:
            rec.start = env.now
        rec.end = env.now
        on_done(rec)

    stream.tail = env.process(task())


def _run_until(event: simpy.Event | None) -> int:
    """Advance the device until `event` has happened; faults and deadlocks become status codes."""
    rt = _runtime
    if event is None or event.processed:
        return ACL_SUCCESS
    device = rt.device
    try:
        device.run(until=event)
    except KernelError as e:
        _reset_engine(rt)
        return rt.error(aclError.ACL_ERROR_RT_AICORE_EXCEPTION, f"AI Core fault: {e}")
    except RuntimeError as e:
        if "No scheduled events left" not in str(e):
            return _internal(rt, e)
        report = device.deadlock_report()
        _reset_engine(rt)
        return rt.error(aclError.ACL_ERROR_RT_AICORE_EXCEPTION, f"AI Core fault: {report}")
    except Exception as e:
        return _internal(rt, e)
    return ACL_SUCCESS


def _internal(rt: Runtime, e: Exception) -> int:
    """A bug in the simulator (not in the kernel): a status code with the whole story."""
    _reset_engine(rt)
    return rt.error(aclError.ACL_ERROR_RT_AICORE_EXCEPTION,
                    f"internal simulator error: {e!r}\n{traceback.format_exc()}")


def _reset_engine(rt: Runtime) -> None:
    """After a fault the device's engine restarts (as a device reset would); memory survives."""
    old = rt.device
    old.abandon_recordings()
    fresh = _new_device(rt)
    fresh.memory = old.memory
    rt.device = fresh
    rt.default_stream = aclrtStream(0)


def aclrtSynchronizeStream(stream: aclrtStream | None) -> int:
    rt = _runtime
    if rt.device is None:
        return rt.error(aclError.ACL_ERROR_UNINITIALIZE, "aclrtSynchronizeStream: no device set")
    try:
        s = resolve_stream(stream)
    except AclnnError as e:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtSynchronizeStream: {e.message}")
    ret = _run_until(s.tail)
    if ret == ACL_SUCCESS:
        s.tail = None
    return ret


def aclrtSynchronizeDevice() -> int:
    rt = _runtime
    if rt.device is None:
        return rt.error(aclError.ACL_ERROR_UNINITIALIZE, "aclrtSynchronizeDevice: no device set")
    try:
        rt.device.run()
    except KernelError as e:
        _reset_engine(rt)
        return rt.error(aclError.ACL_ERROR_RT_AICORE_EXCEPTION, f"AI Core fault: {e}")
    except Exception as e:
        return _internal(rt, e)
    if rt.device.active:
        report = rt.device.deadlock_report()
        _reset_engine(rt)
        return rt.error(aclError.ACL_ERROR_RT_AICORE_EXCEPTION, f"AI Core fault: {report}")
    return ACL_SUCCESS


def aclrtCreateEvent() -> tuple[aclrtEvent, int]:
    return aclrtEvent(), ACL_SUCCESS


def aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream | None) -> int:
    rt = _runtime
    try:
        s = resolve_stream(stream)
    except AclnnError as e:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtRecordEvent: {e.message}")
    env = rt.require_device().env
    after = s.tail

    def mark():
        if after is not None:
            yield after
        event.time = env.now

    s.tail = env.process(mark())
    event.marker = s.tail
    return ACL_SUCCESS


def aclrtStreamWaitEvent(stream: aclrtStream | None, event: aclrtEvent) -> int:
    rt = _runtime
    try:
        s = resolve_stream(stream)
    except AclnnError as e:
        return rt.error(aclError.ACL_ERROR_INVALID_PARAM, f"aclrtStreamWaitEvent: {e.message}")
    if event.marker is None:
        return ACL_SUCCESS
    env = rt.require_device().env
    waits = [e for e in (s.tail, event.marker) if e is not None]
    s.tail = simpy.AllOf(env, waits)
    return ACL_SUCCESS


def aclrtSynchronizeEvent(event: aclrtEvent) -> int:
    if _runtime.device is None:
        return _runtime.error(aclError.ACL_ERROR_UNINITIALIZE, "aclrtSynchronizeEvent: no device set")
    return _run_until(event.marker)


def aclrtEventElapsedTime(start: aclrtEvent, end: aclrtEvent) -> tuple[float, int]:
    """Milliseconds of simulated device time between two recorded, completed events."""
    rt = _runtime
    if start.time is None or end.time is None:
        return 0.0, rt.error(aclError.ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: event not completed")
    return (end.time - start.time) / rt.profile.clock_mhz / 1000.0, ACL_SUCCESS


def aclrtDestroyEvent(event: aclrtEvent) -> int:
    return ACL_SUCCESS


# ---- tensors and arrays ----------------------------------------------------------------------
def aclCreateTensor(viewDims: Sequence[int], dataType: int, stride: Sequence[int] | None,
                    offset: int, format: int, storageDims: Sequence[int], data: int | None):
    """A tensor view over device memory; returns None for arguments that cannot describe one
    (the operator then reports a null tensor)."""
    try:
        if stride is None:
            acc, st = 1, []
            for d in reversed(list(viewDims)):
                st.append(acc)
                acc *= max(int(d), 1)
            stride = list(reversed(st))
        if len(stride) != len(viewDims):
            _runtime.last_error = "aclCreateTensor: stride and viewDims differ in length"
            return None
        return aclTensor(viewDims, dataType, stride, offset, format, storageDims, data)
    except (TypeError, ValueError) as e:
        _runtime.last_error = f"aclCreateTensor: {e}"
        return None


def aclDestroyTensor(tensor: aclTensor) -> int:
    if isinstance(tensor, aclTensor):
        tensor.destroyed = True
    return ACL_SUCCESS


def aclCreateIntArray(value: Sequence[int], size: int | None = None) -> aclIntArray | None:
    try:
        vals = list(value)[: size if size is not None else None]
        return aclIntArray(vals)
    except (TypeError, ValueError):
        return None


def aclCreateBoolArray(value: Sequence[bool], size: int | None = None) -> aclBoolArray | None:
    try:
        vals = list(value)[: size if size is not None else None]
        return aclBoolArray(vals)
    except (TypeError, ValueError):
        return None


def aclDestroyIntArray(array) -> int:
    return ACL_SUCCESS


def aclDestroyBoolArray(array) -> int:
    return ACL_SUCCESS
