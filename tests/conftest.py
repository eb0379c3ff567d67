"""Shared fixtures and helpers for the simulator's tests.

* `make_device(soc, mode=..., profile=...)`: aclInit + aclrtSetDevice inside a private
  `acl.use_runtime(acl.Runtime())`, so no test leaks global ACL state; the context is closed when
  the test ends. `device` is the same on the default SoC.
* `SimDevice.put(...)`: a numpy array placed in device memory as an aclTensor with the strides and
  offset you ask for (or those of a numpy view of a base array).
* `silu_ref` / `assert_silu_close`: the float64 reference from SPEC section 4 and the per-dtype
  tolerances (reasons below).
* `SPEC_SILU_DTYPES`: what SPEC section 4 says each series supports (independent of devices/).
* hypothesis profiles: `ci` (loaded when CI is set) draws the same examples on every run
  (derandomize) and prints the blob that reproduces a failure; `dev` (otherwise) draws new ones and
  keeps failures in the local example database; `HYPOTHESIS_EXAMPLES=N` is a long hunt (`hunt`: N
  examples per property, random). HYPOTHESIS_PROFILE=ci reproduces CI locally. A property's own
  example count is `examples(default)`.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest
from hypothesis import settings

import simulator
from simulator import acl, aclnn
from simulator.enums import aclDataType, aclFormat, aclrtMemcpyKind

HUNT_EXAMPLES = int(os.environ.get("HYPOTHESIS_EXAMPLES", "0"))
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, max_examples=100,
                          deadline=None)
settings.register_profile("dev", print_blob=True, max_examples=100, deadline=None)
settings.register_profile("hunt", print_blob=True, max_examples=max(HUNT_EXAMPLES, 1), deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE")
                      or ("hunt" if HUNT_EXAMPLES else "ci" if os.environ.get("CI") else "dev"))


def examples(default: int) -> int:
    """A property's example count: its own (sized to back its claim within the suite's time), or
    HYPOTHESIS_EXAMPLES during a hunt."""
    return HUNT_EXAMPLES or default


BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
UNIT = {F16: 2.0 ** -11, BF16: 2.0 ** -8, F32: 2.0 ** -24}          # unit roundoff
# one chip of each series that has the vector operators, and a second A2 one
VECTOR_CHIPS = {"Ascend910A": "training", "Ascend310P3": "inference", "Ascend910B1": "A2", "Ascend910B4": "A2"}

ACL_DT = {F32: aclDataType.ACL_FLOAT, F16: aclDataType.ACL_FLOAT16, BF16: aclDataType.ACL_BF16,
          np.dtype(np.float64): aclDataType.ACL_DOUBLE, np.dtype(np.int32): aclDataType.ACL_INT32,
          np.dtype(np.int8): aclDataType.ACL_INT8, np.dtype(np.int64): aclDataType.ACL_INT64,
          np.dtype(np.bool_): aclDataType.ACL_BOOL, np.dtype(np.uint8): aclDataType.ACL_UINT8,
          np.dtype(np.int16): aclDataType.ACL_INT16}

# status codes, SPEC section 3
ACLNN_SUCCESS = 0
NULLPTR = 161001
INVALID = 161002

# SPEC section 2 (series of each SoC) and section 4 (aclnnSiluBackward: what each series takes)
SERIES = {"Ascend910A": "training", "Ascend310P3": "inference", "Ascend910B1": "A2",
          "Ascend910B2": "A2", "Ascend910B3": "A2", "Ascend910B4": "A2"}
SPEC_SILU_DTYPES = {"training": (F32, F16), "inference": (), "A2": (F32, F16, BF16)}
SILU_SOCS = [s for s, series in SERIES.items() if SPEC_SILU_DTYPES[series]]
SOC_DTYPES = [(soc, dt) for soc in SILU_SOCS for dt in SPEC_SILU_DTYPES[SERIES[soc]]]


def dtype_id(dt) -> str:
    return {F32: "FLOAT", F16: "FLOAT16", BF16: "BF16"}.get(np.dtype(dt), np.dtype(dt).name)


# ---- the reference and the tolerances ----------------------------------------------------------
def silu_ref(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """gradInput = g * s * (1 + x * (1 - s)), s = sigmoid(x), in float64 (SPEC section 4)."""
    g = np.asarray(g).astype(np.float64)
    x = np.asarray(x).astype(np.float64)
    with np.errstate(over="ignore"):
        s = 1.0 / (1.0 + np.exp(-x))
    return g * s * (1.0 + x * (1.0 - s))


# Tolerances, per output dtype. An element passes when
#     |got - ref| <= rtol * |ref| + atol_g * |g| + floor
# with ref computed in float64 from the very same (already rounded) inputs.
# * FLOAT: the kernel computes in fp32 with numpy's fp32 exp, a reciprocal and a handful of
#   multiply/adds, each rounded to fp32 (2^-24 relative): a few ulp -> rtol 1e-5. The factor
#   (1 + x(1 - s)) cancels near its root x ~ -1.28 (and 1 - s cancels for large x): there the
#   error is a few ulp of 1 (~1e-7) times s*g, not relative to the tiny result -> atol_g 1e-6
#   times |g| (an absolute atol that scales with the incoming gradient). The same term covers
#   x < -88, where fp32 exp(-x) overflows and the kernel returns 0 for a result below 1e-37*|g|.
# * FLOAT16: computed in fp32 (errors as above), then rounded once to fp16: half an ulp is
#   2^-11 = 4.9e-4 relative -> rtol 1e-3; results in fp16's subnormal range (< 6.1e-5) are
#   rounded to a multiple of 2^-24 -> floor 2^-24.
# * BF16: computed in fp32, rounded once to bf16 (8 significant bits): half an ulp is
#   2^-9 = 2.0e-3, ~2^-8 after the fp32 error and the reference's own rounding margin ->
#   rtol 8e-3 (bf16 has fp32's exponent range, so no subnormal floor is needed beyond fp32's).
@dataclass(frozen=True)
class Tol:
    rtol: float
    atol_g: float
    floor: float


TOL = {F32: Tol(1e-5, 1e-6, 1e-38), F16: Tol(1e-3, 1e-6, 2.0 ** -24), BF16: Tol(8e-3, 1e-6, 1e-38)}


def silu_violations(got, g, x) -> np.ndarray:
    """Boolean mask of elements outside the tolerance (NaN where the reference is NaN must be NaN)."""
    got = np.asarray(got)
    tol = TOL[np.dtype(got.dtype)]
    ref = silu_ref(g, x)
    out = got.astype(np.float64)
    gm = np.abs(np.asarray(g).astype(np.float64))
    bound = tol.rtol * np.abs(ref) + tol.atol_g * gm + tol.floor
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(out - ref) <= bound)
    both_nan = np.isnan(ref) & np.isnan(out)
    return bad & ~both_nan


def assert_silu_close(got, g, x, what: str = "") -> None:
    got = np.asarray(got)
    assert got.shape == np.shape(x), f"{what}: shape {got.shape} != {np.shape(x)}"
    bad = silu_violations(got, g, x)
    if bad.any():
        idx = np.argwhere(bad)[:5]
        ref = silu_ref(g, x)
        lines = [f"{tuple(i)}: x={np.asarray(x)[tuple(i)]!r} g={np.asarray(g)[tuple(i)]!r} "
                 f"got={got[tuple(i)]!r} ref={ref[tuple(i)]!r}" for i in idx]
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} elements out of tolerance "
                    f"{TOL[np.dtype(got.dtype)]}:\n  " + "\n  ".join(lines))


def random_data(rng: np.random.Generator, shape, dtype, scale: float = 3.0) -> np.ndarray:
    """Random values in the dtype, kept well inside its range (fp16 results must not overflow)."""
    return np.asarray((rng.standard_normal(shape) * scale).astype(dtype))      # 0-d stays an array


# ---- the device -------------------------------------------------------------------------------
@dataclass
class DevTensor:
    """An aclTensor and the device allocation holding its storage."""
    tensor: object
    ptr: int
    nbytes: int
    dtype: np.dtype
    storage_shape: tuple
    dev: "SimDevice"

    def storage(self) -> np.ndarray:
        """The whole storage, read back from the device."""
        return self.dev.read(self.ptr, self.nbytes, self.dtype).reshape(self.storage_shape)

    def view(self) -> np.ndarray:
        """The tensor's view (shape, strides, offset), read back from the device."""
        t = self.tensor
        flat = self.dev.read(self.ptr, self.nbytes, self.dtype)
        if int(np.prod(t.viewDims)) == 0:
            return np.zeros(t.viewDims, dtype=self.dtype)
        isz = self.dtype.itemsize
        return np.lib.stride_tricks.as_strided(flat[t.offset:], shape=t.viewDims,
                                               strides=[s * isz for s in t.stride]).copy()

    def raw(self) -> bytes:
        return self.dev.read(self.ptr, self.nbytes, np.uint8).tobytes()


class SimDevice:
    """ACL calls against one private runtime (already initialised, device 0 set)."""

    def __init__(self, rt: acl.Runtime, soc: str):
        self.rt, self.soc = rt, soc
        self.stream, ret = acl.aclrtCreateStream()
        assert ret == 0
        self.profile = rt.profile

    @property
    def functional(self) -> bool:
        return self.rt.functional

    def malloc(self, nbytes: int) -> int:
        ptr, ret = acl.aclrtMalloc(int(nbytes), 0)
        assert ret == 0, acl.aclGetRecentErrMsg()
        return ptr

    def write(self, ptr: int, arr: np.ndarray) -> None:
        arr = np.ascontiguousarray(arr)
        assert acl.aclrtMemcpy(ptr, arr.nbytes, arr, arr.nbytes,
                               aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE) == 0, acl.aclGetRecentErrMsg()

    def read(self, ptr: int, nbytes: int, dtype) -> np.ndarray:
        host = np.zeros(nbytes, dtype=np.uint8)
        assert acl.aclrtMemcpy(host, nbytes, ptr, nbytes,
                               aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST) == 0, acl.aclGetRecentErrMsg()
        return host.view(np.dtype(dtype))

    def put(self, storage: np.ndarray, shape=None, strides=None, offset: int = 0,
            acl_dtype=None, fmt=aclFormat.ACL_FORMAT_ND, storage_dims=None) -> DevTensor:
        """`storage` (any shape, copied as it is, C order) placed on the device, and an aclTensor
        viewing it with `shape`, element `strides` (default: contiguous) and element `offset`."""
        storage = np.ascontiguousarray(storage)
        nbytes = max(storage.nbytes, 1)
        ptr = self.malloc(nbytes)
        if storage.nbytes:
            self.write(ptr, storage)
        shape = storage.shape if shape is None else tuple(shape)
        dt = ACL_DT[storage.dtype] if acl_dtype is None else acl_dtype
        sdims = (storage.size,) if storage_dims is None else tuple(storage_dims)
        t = acl.aclCreateTensor(shape, dt, strides, offset, fmt, sdims, ptr)
        assert t is not None, acl.aclGetRecentErrMsg()
        return DevTensor(t, ptr, nbytes, storage.dtype, (storage.size,), self)

    def put_view(self, base: np.ndarray, view: np.ndarray) -> DevTensor:
        """`view` is a numpy view into the C-contiguous array `base` (non-negative strides): the
        whole of `base` goes to the device as the storage and the aclTensor carries the view's
        shape, strides and offset in elements."""
        assert base.flags.c_contiguous and np.shares_memory(base, view) or view.size == 0
        isz = view.itemsize
        start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        assert start % isz == 0 and all(s >= 0 and s % isz == 0 for s in view.strides), \
            "put_view needs non-negative, element-aligned strides"
        strides = [s // isz for s in view.strides]
        return self.put(base, view.shape, strides, start // isz if view.size else 0)

    def put_output(self, shape, dtype, strides=None, offset: int = 0, fill=np.nan,
                   spare: int = 0) -> DevTensor:
        """An output tensor over fresh storage filled with the sentinel `fill` (the kernel must
        not touch storage outside the view); `spare` extra elements after the view's extent."""
        shape = tuple(shape)
        if strides is None:
            strides = contiguous_strides(shape)
        extent = offset + view_extent(shape, strides)
        st = np.full(max(extent + spare, 1), fill, dtype=np.float64).astype(dtype)
        return self.put(st, shape, strides, offset)

    # ---- aclnnSiluBackward through the two-phase protocol ------------------------------------
    def silu(self, g: DevTensor, x: DevTensor, out: DevTensor, sync: bool = True):
        """Phase 1, the workspace, phase 2 and (unless sync=False) synchronize. Returns
        (workspaceSize, executor)."""
        ws_size, ex, ret = aclnn.aclnnSiluBackwardGetWorkspaceSize(g.tensor, x.tensor, out.tensor)
        assert ret == 0, f"phase 1: {ret}: {acl.aclGetRecentErrMsg()}"
        ws = self.malloc(ws_size) if ws_size > 0 else None
        ret = aclnn.aclnnSiluBackward(ws, ws_size, ex, self.stream)
        assert ret == 0, f"phase 2: {ret}: {acl.aclGetRecentErrMsg()}"
        if sync:
            ret = acl.aclrtSynchronizeStream(self.stream)
            assert ret == 0, f"synchronize: {ret}: {acl.aclGetRecentErrMsg()}"
        return ws_size, ex


def contiguous_strides(shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(tuple(shape)):
        out.append(acc)
        acc *= max(int(d), 1)
    return out[::-1]


def view_extent(shape, strides) -> int:
    """Elements of storage a view reaches from its offset (0 for an empty view)."""
    if any(d == 0 for d in shape):
        return 0
    return sum((d - 1) * s for d, s in zip(shape, strides)) + 1


@contextlib.contextmanager
def private_device(soc: str = simulator.DEFAULT_SOC, mode: str = "functional", profile=None):
    """The context manager behind `make_device` (usable where fixtures are not, e.g. hypothesis)."""
    rt = acl.Runtime()
    with acl.use_runtime(rt):
        ret = acl.aclInit(None, soc=soc, mode=mode, profile=profile)
        assert ret == 0, acl.aclGetRecentErrMsg()
        assert acl.aclrtSetDevice(0) == 0
        yield SimDevice(rt, soc)


@pytest.fixture
def make_device():
    with contextlib.ExitStack() as stack:
        def make(soc: str = simulator.DEFAULT_SOC, mode: str = "functional", profile=None) -> SimDevice:
            return stack.enter_context(private_device(soc, mode, profile))
        saved = acl.runtime()
        yield make
    assert acl.runtime() is saved, "a test left another ACL runtime current"


@pytest.fixture
def device(make_device) -> SimDevice:
    return make_device()


def assert_within(out, ref, tol, what: str) -> None:
    """Every element of out within tol of the float64 reference (a NaN fails)."""
    err = np.abs(np.asarray(out).astype(np.float64) - ref)
    bad = ~(err <= tol)
    assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} outside tolerance; worst err {err.max():.3g}"


def assert_status(op: str, soc: str, args: dict, status: int) -> None:
    """The call is refused in phase 1 with this status code."""
    import simulator
    from simulator.enums import AclnnError
    try:
        simulator.run(op, soc, mode="timing", **args)
    except AclnnError as e:
        assert e.status == status, str(e)
    else:
        raise AssertionError(f"{op} on {soc} was accepted; expected status {status}")


def cube_dtype(series: str, dtype, math: int) -> str:
    """The Cube's compute dtype for an input dtype and cubeMathType (SPEC section 3, restated here):
    FLOAT16 and BF16 as they are; FLOAT as FLOAT (KEEP_DTYPE) or HF32 (1, 3) on A2, FLOAT16 with
    USE_FP16 and on the FP16-only Cube of the other series."""
    if dtype == F16:
        return "FLOAT16"
    if dtype == BF16:
        return "BF16"
    if series != "A2" or math == 2:
        return "FLOAT16"
    return {0: "FLOAT", 1: "HF32", 3: "HF32"}[math]
