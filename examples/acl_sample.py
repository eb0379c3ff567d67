"""The helpers every CANN aclnn C++ sample carries (GetShapeSize, Init, CreateAclTensor, the
two-phase call, printing results, releasing), once, for the Python samples beside this file."""
from __future__ import annotations

import numpy as np

from simulator import acl, aclnn
from simulator.enums import aclDataType, aclFormat, aclrtMemcpyKind

ACL_SUCCESS = 0


def get_shape_size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def host_data(shape, value: float) -> np.ndarray:
    """A flat FLOAT host vector for a shape, every element `value` (the samples' std::vector<float>
    of 1s, 2s or 0s)."""
    return np.full(get_shape_size(shape), value, dtype=np.float32)


def init(device_id: int = 0, soc: str | None = None):
    """aclInit, aclrtSetDevice, aclrtCreateStream (soc=None: $ASCEND_SIM_SOC or Ascend910B1)."""
    ret = acl.aclInit(None, soc=soc)
    assert ret == ACL_SUCCESS, f"aclInit failed. ERROR: {ret}"
    ret = acl.aclrtSetDevice(device_id)
    assert ret == ACL_SUCCESS, f"aclrtSetDevice failed. ERROR: {ret}"
    stream, ret = acl.aclrtCreateStream()
    assert ret == ACL_SUCCESS, f"aclrtCreateStream failed. ERROR: {ret}"
    return stream


def create_acl_tensor(host_data, shape, fmt=aclFormat.ACL_FORMAT_ND, data_type=aclDataType.ACL_FLOAT):
    """aclrtMalloc + aclrtMemcpy + aclCreateTensor with contiguous strides, as the samples'
    CreateAclTensor template does. Returns (tensor, device address)."""
    host = np.ascontiguousarray(host_data, dtype=np.float32 if data_type == aclDataType.ACL_FLOAT else None)
    size = get_shape_size(shape) * host.itemsize
    dev, ret = acl.aclrtMalloc(size, 0)                       # ACL_MEM_MALLOC_HUGE_FIRST
    assert ret == ACL_SUCCESS, f"aclrtMalloc failed. ERROR: {ret}"
    ret = acl.aclrtMemcpy(dev, size, host, size, aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
    assert ret == ACL_SUCCESS, f"aclrtMemcpy failed. ERROR: {ret}"
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = shape[i + 1] * strides[i + 1]
    return acl.aclCreateTensor(shape, data_type, strides, 0, fmt, shape, dev), dev


def run_two_phase(op: str, stream, *args):
    """aclnn<op>GetWorkspaceSize(*args), the workspace, aclnn<op> on the stream, synchronize.
    Returns the executor (its .report holds the simulated cost)."""
    workspace_size, executor, ret = getattr(aclnn, f"aclnn{op}GetWorkspaceSize")(*args)
    assert ret == ACL_SUCCESS, f"aclnn{op}GetWorkspaceSize failed. ERROR: {ret}\n{acl.aclGetRecentErrMsg()}"
    workspace = None
    if workspace_size > 0:
        workspace, ret = acl.aclrtMalloc(workspace_size, 0)
        assert ret == ACL_SUCCESS, f"allocate workspace failed. ERROR: {ret}"
    ret = getattr(aclnn, f"aclnn{op}")(workspace, workspace_size, executor, stream)
    assert ret == ACL_SUCCESS, f"aclnn{op} failed. ERROR: {ret}"
    ret = acl.aclrtSynchronizeStream(stream)
    assert ret == ACL_SUCCESS, f"aclrtSynchronizeStream failed. ERROR: {ret}\n{acl.aclGetRecentErrMsg()}"
    if workspace is not None:
        acl.aclrtFree(workspace)
    return executor, workspace_size


def print_results(results) -> dict[str, np.ndarray]:
    """results: [(name, device address, shape)] of FLOAT outputs; copies back and prints each
    element as the samples do ("name[i] is: value"). Returns the host arrays."""
    out = {}
    for name, dev, shape in results:
        size = get_shape_size(shape)
        host = np.zeros(size, dtype=np.float32)
        ret = acl.aclrtMemcpy(host, size * 4, dev, size * 4, aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST)
        assert ret == ACL_SUCCESS, f"copy result from device to host failed. ERROR: {ret}"
        for i in range(size):
            print(f"{name}[{i}] is: {host[i]:f}")
        out[name] = host
    return out


def print_cost(executor, workspace_size: int) -> None:
    r = executor.report
    print(f"\nworkspace {workspace_size} B; {r.cycles:,.0f} cycles = {r.time_us:.2f} us on {r.soc}")


def finalize(stream, device_id: int = 0) -> None:
    acl.aclrtDestroyStream(stream)
    acl.aclrtResetDevice(device_id)
    acl.aclFinalize()
