"""The seed document's 调用示例 for aclnnGridSampler2DBackward, in Python on the simulator, step
by step as the C++ sample does it: aclInit / aclrtSetDevice / aclrtCreateStream, device memory and
aclCreateTensor for gradOutput (1,1,3,3) of ones, input (1,1,5,8) = 1..40, grid (1,3,3,2) at the
corners, edge midpoints and centre, inputGrad and gridGrad zeroed; bilinear (0), zeros (0),
alignCorners false, outputMask {true, true}; phase 1, the workspace, phase 2 on the stream,
synchronize, copy back and print; then release everything.

(The C++ sample first sets `outputMask = nullptr` and then replaces it with a 2-entry
aclBoolArray before the call; with a null outputMask phase 1 returns success, workspace 0 and
nothing is computed.)

Ascend910B1 by default; `ASCEND_SIM_SOC=Ascend910A` runs it on the training series (the inference
series does not have this operator: phase 1 returns 161002 there).
"""
import os

import numpy as np

from simulator import acl, aclnn
from simulator.enums import aclDataType, aclFormat, aclrtMemcpyKind

ACL_SUCCESS = 0


def get_shape_size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def init(device_id, soc):
    ret = acl.aclInit(None, soc=soc)
    assert ret == ACL_SUCCESS, f"aclInit failed. ERROR: {ret}"
    ret = acl.aclrtSetDevice(device_id)
    assert ret == ACL_SUCCESS, f"aclrtSetDevice failed. ERROR: {ret}"
    stream, ret = acl.aclrtCreateStream()
    assert ret == ACL_SUCCESS, f"aclrtCreateStream failed. ERROR: {ret}"
    return stream


def create_acl_tensor(host_data, shape, data_type=aclDataType.ACL_FLOAT):
    host = np.asarray(host_data, dtype=np.float32)
    size = get_shape_size(shape) * host.itemsize
    dev, ret = acl.aclrtMalloc(size, 0)                       # ACL_MEM_MALLOC_HUGE_FIRST
    assert ret == ACL_SUCCESS, f"aclrtMalloc failed. ERROR: {ret}"
    ret = acl.aclrtMemcpy(dev, size, host, size, aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
    assert ret == ACL_SUCCESS, f"aclrtMemcpy failed. ERROR: {ret}"
    strides = [1] * len(shape)                                # contiguous strides
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = shape[i + 1] * strides[i + 1]
    tensor = acl.aclCreateTensor(shape, data_type, strides, 0, aclFormat.ACL_FORMAT_ND, shape, dev)
    return tensor, dev


def main() -> int:
    # 1. device / stream
    device_id = 0
    stream = init(device_id, os.environ.get("ASCEND_SIM_SOC", "Ascend910B1"))

    # 2. inputs and outputs
    interpolation_mode = 0
    padding_mode = 0
    align_corners = False
    grad_output_shape = [1, 1, 3, 3]
    input_shape = [1, 1, 5, 8]
    grid_shape = [1, 3, 3, 2]
    input_grad_shape = [1, 1, 5, 8]
    grid_grad_shape = [1, 3, 3, 2]
    grad_output_host = [1] * 9
    input_host = list(range(1, 41))
    grid_host = [-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0, -1, 1, 0, 1, 1, 1]
    output_mask = acl.aclCreateBoolArray([True, True], 2)

    grad_output, grad_output_dev = create_acl_tensor(grad_output_host, grad_output_shape)
    inp, input_dev = create_acl_tensor(input_host, input_shape)
    grid, grid_dev = create_acl_tensor(grid_host, grid_shape)
    input_grad, input_grad_dev = create_acl_tensor([0] * 40, input_grad_shape)
    grid_grad, grid_grad_dev = create_acl_tensor([0] * 18, grid_grad_shape)

    # 3. the two-phase call
    workspace_size, executor, ret = aclnn.aclnnGridSampler2DBackwardGetWorkspaceSize(
        grad_output, inp, grid, interpolation_mode, padding_mode, align_corners, output_mask,
        input_grad, grid_grad)
    assert ret == ACL_SUCCESS, (f"aclnnGridSampler2DBackwardGetWorkspaceSize failed. ERROR: {ret}\n"
                                f"{acl.aclGetRecentErrMsg()}")
    workspace = None
    if workspace_size > 0:
        workspace, ret = acl.aclrtMalloc(workspace_size, 0)
        assert ret == ACL_SUCCESS, f"allocate workspace failed. ERROR: {ret}"
    ret = aclnn.aclnnGridSampler2DBackward(workspace, workspace_size, executor, stream)
    assert ret == ACL_SUCCESS, f"aclnnGridSampler2DBackward failed. ERROR: {ret}"

    # 4. wait for the stream
    ret = acl.aclrtSynchronizeStream(stream)
    assert ret == ACL_SUCCESS, f"aclrtSynchronizeStream failed. ERROR: {ret}\n{acl.aclGetRecentErrMsg()}"

    # 5. results back to the host
    for name, dev, shape in (("inputGradResultData", input_grad_dev, input_grad_shape),
                             ("gridGradResultData", grid_grad_dev, grid_grad_shape)):
        size = get_shape_size(shape)
        host = np.zeros(size, dtype=np.float32)
        ret = acl.aclrtMemcpy(host, size * 4, dev, size * 4, aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST)
        assert ret == ACL_SUCCESS, f"copy {name} from device to host failed. ERROR: {ret}"
        for i in range(size):
            print(f"{name}[{i}] is: {host[i]:f}")

    report = executor.report
    print(f"\nworkspace {workspace_size} B; {report.cycles:,.0f} cycles = {report.time_us:.2f} us on "
          f"{report.soc}")
    print(report.summary())

    # 6. release tensors and arrays; 7. device resources
    for t in (grad_output, inp, grid, input_grad, grid_grad):
        acl.aclDestroyTensor(t)
    acl.aclDestroyBoolArray(output_mask)
    for dev in (grad_output_dev, input_dev, grid_dev, input_grad_dev, grid_grad_dev):
        acl.aclrtFree(dev)
    if workspace_size > 0:
        acl.aclrtFree(workspace)
    acl.aclrtDestroyStream(stream)
    acl.aclrtResetDevice(device_id)
    acl.aclFinalize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
