"""CANN's enums and status codes with their real numeric values, and the errors that carry them."""
from __future__ import annotations

from enum import IntEnum

import ml_dtypes
import numpy as np


class aclnnStatus(IntEnum):
    ACLNN_SUCCESS = 0
    ACLNN_ERR_PARAM_NULLPTR = 161001
    ACLNN_ERR_PARAM_INVALID = 161002
    ACLNN_ERR_RUNTIME_ERROR = 361001
    ACLNN_ERR_INNER = 561000
    ACLNN_ERR_INNER_TILING_ERROR = 561002
    ACLNN_ERR_INNER_NULLPTR = 561103


class aclError(IntEnum):
    ACL_SUCCESS = 0
    ACL_ERROR_INVALID_PARAM = 100000
    ACL_ERROR_UNINITIALIZE = 100001
    ACL_ERROR_REPEAT_INITIALIZE = 100002
    ACL_ERROR_BAD_ALLOC = 200000
    ACL_ERROR_RT_AICORE_EXCEPTION = 507015  # an AI Core fault surfaces at synchronize


class aclDataType(IntEnum):
    ACL_FLOAT = 0
    ACL_FLOAT16 = 1
    ACL_INT8 = 2
    ACL_INT32 = 3
    ACL_UINT8 = 4
    ACL_INT16 = 6
    ACL_INT64 = 9
    ACL_DOUBLE = 11
    ACL_BOOL = 12
    ACL_BF16 = 27


class aclFormat(IntEnum):
    ACL_FORMAT_NCHW = 0
    ACL_FORMAT_NHWC = 1
    ACL_FORMAT_ND = 2
    ACL_FORMAT_NC1HWC0 = 3
    ACL_FORMAT_FRACTAL_Z = 4
    ACL_FORMAT_FRACTAL_NZ = 29
    ACL_FORMAT_NCDHW = 30
    ACL_FORMAT_NCL = 47


class aclrtMemcpyKind(IntEnum):
    ACL_MEMCPY_HOST_TO_HOST = 0
    ACL_MEMCPY_HOST_TO_DEVICE = 1
    ACL_MEMCPY_DEVICE_TO_HOST = 2
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3


# aclDataType <-> numpy, and the short names profiles use ("FLOAT16")
NUMPY_OF = {
    aclDataType.ACL_FLOAT: np.dtype(np.float32),
    aclDataType.ACL_FLOAT16: np.dtype(np.float16),
    aclDataType.ACL_BF16: np.dtype(ml_dtypes.bfloat16),
    aclDataType.ACL_INT8: np.dtype(np.int8),
    aclDataType.ACL_INT32: np.dtype(np.int32),
    aclDataType.ACL_UINT8: np.dtype(np.uint8),
    aclDataType.ACL_INT16: np.dtype(np.int16),
    aclDataType.ACL_INT64: np.dtype(np.int64),
    aclDataType.ACL_DOUBLE: np.dtype(np.float64),
    aclDataType.ACL_BOOL: np.dtype(np.bool_),
}
ACL_OF = {v: k for k, v in NUMPY_OF.items()}


def dtype_name(dt: aclDataType | np.dtype) -> str:
    """The profile's short name of a dtype: ACL_FLOAT16 -> 'FLOAT16'."""
    if not isinstance(dt, aclDataType):
        found = ACL_OF.get(np.dtype(dt))
        if found is None:
            return np.dtype(dt).name.upper()
        dt = found
    return dt.name[len("ACL_"):]


def acl_dtype_of(np_dtype) -> aclDataType | None:
    return ACL_OF.get(np.dtype(np_dtype))


class AclnnError(Exception):
    """An operator call rejected with an aclnn status code; `str()` is the readable message."""

    def __init__(self, status: int, message: str):
        # both in args: SimPy rebuilds an exception that leaves a process as type(e)(*e.args)
        super().__init__(status, message)
        self.status = int(status)
        self.message = message

    def __str__(self) -> str:
        name = str(self.status)
        for codes in (aclnnStatus, aclError):      # runtime calls (aclrtMalloc) fail with aclError codes
            try:
                name = codes(self.status).name
                break
            except ValueError:
                pass
        return f"{name} ({self.status}): {self.message}"


def param_invalid(msg: str) -> AclnnError:
    return AclnnError(aclnnStatus.ACLNN_ERR_PARAM_INVALID, msg)


def param_nullptr(msg: str) -> AclnnError:
    return AclnnError(aclnnStatus.ACLNN_ERR_PARAM_NULLPTR, msg)


class Unwind(BaseException):
    """The engine's own unwinding of a user's code (a body given up on, a time budget spent):
    a BaseException so that a user's `except Exception` does not swallow it, and never the
    user's error."""


def raised_by_user(e: BaseException) -> bool:
    """Whether an exception out of a user's code (a kernel file, a body, a captured script) is
    the user's own: anything it raises, BaseException subclasses included, but an interruption
    (Ctrl-C) and the engine's unwinding."""
    if isinstance(e, (KeyboardInterrupt, Unwind)):
        return False
    subgroup = getattr(e, "subgroup", None)          # an exception group (3.11+) holding one of them
    return subgroup is None or subgroup(lambda x: isinstance(x, (KeyboardInterrupt, Unwind))) is None


def exception_line(e: BaseException) -> str:
    """'ValueError: msg' on one line ('StopIteration' alone when it says nothing)."""
    try:
        msg = " ".join(str(e).split())
    except Exception:                              # a user's __str__ that raises
        msg = "<unprintable>"
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


class KernelError(Exception):
    """A micro-program fault found by the machine (buffer overflow, misalignment, out-of-bounds
    access, uninitialised read, flag misuse, deadlock). The message names core, pipe and
    instruction."""
