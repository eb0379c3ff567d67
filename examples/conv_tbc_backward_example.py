"""The call example of aclnnConvTbcBackward, in Python on the simulator, following the CANN
sample's steps (init, device memory, aclCreateTensor, phase 1, workspace, phase 2 on a stream,
synchronize, copy back, print). The seed document's 调用示例 body did not survive its export
("[object Object]"), so the shapes here are ours, in the style of the ConvolutionBackward sample:

self (gradOutput) (T_out=6, B=1, Cout=2), input (T=5, B=1, Cin=2), weight (K=2, Cin=2, Cout=2),
bias (2,), pad 1, cubeMathType 1, FLOAT, all ones. T_out = T + 2*pad + 1 - K = 6. Expected:
gradInput 4.0 everywhere (2 taps x 2 output channels), gradWeight 5.0 (each tap sees all 5 input
steps), gradBias 6.0 (6 steps x 1 batch).

Ascend910B1 by default; `ASCEND_SIM_SOC=Ascend910A` for the training series (the inference series
does not have this operator: phase 1 returns 161002 there).
"""
import numpy as np

from simulator import acl, aclnn
from simulator.enums import aclDataType, aclFormat, aclrtMemcpyKind

ACL_SUCCESS = 0


def get_shape_size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def create_acl_tensor(host_data: np.ndarray, shape, fmt):
    size = get_shape_size(shape) * host_data.itemsize
    dev, ret = acl.aclrtMalloc(size, 0)
    assert ret == ACL_SUCCESS, f"aclrtMalloc failed. ERROR: {ret}"
    ret = acl.aclrtMemcpy(dev, size, host_data, size, aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
    assert ret == ACL_SUCCESS, f"aclrtMemcpy failed. ERROR: {ret}"
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = shape[i + 1] * strides[i + 1]
    tensor = acl.aclCreateTensor(shape, aclDataType.ACL_FLOAT, strides, 0, fmt, shape, dev)
    return tensor, dev


def main() -> int:
    device_id = 0
    ret = acl.aclInit(None)
    assert ret == ACL_SUCCESS, f"aclInit failed. ERROR: {ret}"
    ret = acl.aclrtSetDevice(device_id)
    assert ret == ACL_SUCCESS, f"aclrtSetDevice failed. ERROR: {ret}"
    stream, ret = acl.aclrtCreateStream()
    assert ret == ACL_SUCCESS, f"aclrtCreateStream failed. ERROR: {ret}"

    self_shape = [6, 1, 2]
    input_shape = [5, 1, 2]
    weight_shape = [2, 2, 2]
    bias_shape = [2]
    pad = 1
    cube_math_type = 1
    ncl, nd = aclFormat.ACL_FORMAT_NCL, aclFormat.ACL_FORMAT_ND

    ones = lambda shape: np.ones(get_shape_size(shape), dtype=np.float32)  # noqa: E731
    self_t, _ = create_acl_tensor(ones(self_shape), self_shape, ncl)
    input_t, _ = create_acl_tensor(ones(input_shape), input_shape, ncl)
    weight_t, _ = create_acl_tensor(ones(weight_shape), weight_shape, ncl)
    bias_t, _ = create_acl_tensor(ones(bias_shape), bias_shape, nd)
    grad_input, grad_input_dev = create_acl_tensor(np.zeros(get_shape_size(input_shape), np.float32), input_shape, ncl)
    grad_weight, grad_weight_dev = create_acl_tensor(np.zeros(get_shape_size(weight_shape), np.float32), weight_shape, ncl)
    grad_bias, grad_bias_dev = create_acl_tensor(np.zeros(get_shape_size(bias_shape), np.float32), bias_shape, nd)

    workspace_size, executor, ret = aclnn.aclnnConvTbcBackwardGetWorkspaceSize(
        self_t, input_t, weight_t, bias_t, pad, cube_math_type, grad_input, grad_weight, grad_bias)
    assert ret == ACL_SUCCESS, (f"aclnnConvTbcBackwardGetWorkspaceSize failed. ERROR: {ret}\n"
                                f"{acl.aclGetRecentErrMsg()}")
    workspace = None
    if workspace_size > 0:
        workspace, ret = acl.aclrtMalloc(workspace_size, 0)
        assert ret == ACL_SUCCESS, f"allocate workspace failed. ERROR: {ret}"
    ret = aclnn.aclnnConvTbcBackward(workspace, workspace_size, executor, stream)
    assert ret == ACL_SUCCESS, f"aclnnConvTbcBackward failed. ERROR: {ret}"
    ret = acl.aclrtSynchronizeStream(stream)
    assert ret == ACL_SUCCESS, f"aclrtSynchronizeStream failed. ERROR: {ret}\n{acl.aclGetRecentErrMsg()}"

    for name, dev, shape in (("gradInputResult", grad_input_dev, input_shape),
                             ("gradWeightResult", grad_weight_dev, weight_shape),
                             ("gradBiasResult", grad_bias_dev, bias_shape)):
        size = get_shape_size(shape)
        host = np.zeros(size, dtype=np.float32)
        ret = acl.aclrtMemcpy(host, size * 4, dev, size * 4, aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST)
        assert ret == ACL_SUCCESS, f"copy result from device to host failed. ERROR: {ret}"
        for i in range(size):
            print(f"{name}[{i}] is: {host[i]:f}")

    report = executor.report
    print(f"\nworkspace {workspace_size} B; {report.cycles:,.0f} cycles = {report.time_us:.2f} us on "
          f"{report.soc}")
    acl.aclrtDestroyStream(stream)
    acl.aclrtResetDevice(device_id)
    acl.aclFinalize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
