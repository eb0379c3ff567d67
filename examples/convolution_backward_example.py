"""The 调用示例 (call example) of aclnnConvolutionBackward from the CANN documents, in Python on
the simulator: the same steps as the C++ sample (init, device memory, aclCreateTensor, phase 1,
workspace, phase 2 on a stream, synchronize, copy back, print), on Ascend910B1 by default
(`ASCEND_SIM_SOC=Ascend910A python examples/convolution_backward_example.py` for another chip).

gradOutput, input: (2, 2, 7, 7) ones; weight (2, 2, 1, 1) ones; stride 1, padding 0, dilation 1,
not transposed, groups 1, outputMask all true, cubeMathType 1, FLOAT. Expected: gradInput 2.0
everywhere, gradWeight 98.0, gradBias 98.0.
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


def create_acl_tensor(host_data: np.ndarray, shape):
    """aclrtMalloc + aclrtMemcpy + aclCreateTensor with contiguous strides (NCHW for 4-D, ND
    otherwise), as the sample's CreateAclTensor template does."""
    size = get_shape_size(shape) * host_data.itemsize
    dev, ret = acl.aclrtMalloc(size, 0)
    assert ret == ACL_SUCCESS, f"aclrtMalloc failed. ERROR: {ret}"
    ret = acl.aclrtMemcpy(dev, size, host_data, size, aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
    assert ret == ACL_SUCCESS, f"aclrtMemcpy failed. ERROR: {ret}"
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = shape[i + 1] * strides[i + 1]
    fmt = aclFormat.ACL_FORMAT_NCHW if len(shape) == 4 else aclFormat.ACL_FORMAT_ND
    tensor = acl.aclCreateTensor(shape, aclDataType.ACL_FLOAT, strides, 0, fmt, shape, dev)
    return tensor, dev


def main() -> int:
    # 1. init
    device_id = 0
    ret = acl.aclInit(None)
    assert ret == ACL_SUCCESS, f"aclInit failed. ERROR: {ret}"
    ret = acl.aclrtSetDevice(device_id)
    assert ret == ACL_SUCCESS, f"aclrtSetDevice failed. ERROR: {ret}"
    stream, ret = acl.aclrtCreateStream()
    assert ret == ACL_SUCCESS, f"aclrtCreateStream failed. ERROR: {ret}"

    # 2. inputs and outputs
    grad_output_shape = [2, 2, 7, 7]
    input_shape = [2, 2, 7, 7]
    weight_shape = [2, 2, 1, 1]
    bias_size = [2]
    stride, padding, dilation = [1, 1], [0, 0], [1, 1]
    transposed = False
    output_padding = [0, 0]
    groups = 1
    output_mask = [True, True, True]
    cube_math_type = 1

    ones = lambda shape: np.ones(get_shape_size(shape), dtype=np.float32)  # noqa: E731
    grad_output, _ = create_acl_tensor(ones(grad_output_shape), grad_output_shape)
    inp, _ = create_acl_tensor(ones(input_shape), input_shape)
    weight, _ = create_acl_tensor(ones(weight_shape), weight_shape)
    grad_input, grad_input_dev = create_acl_tensor(ones(input_shape), input_shape)
    grad_weight, grad_weight_dev = create_acl_tensor(ones(weight_shape), weight_shape)
    grad_bias, grad_bias_dev = create_acl_tensor(ones(bias_size), bias_size)

    bias_sizes = acl.aclCreateIntArray(bias_size, 1)
    strides = acl.aclCreateIntArray(stride, 2)
    pads = acl.aclCreateIntArray(padding, 2)
    dilations = acl.aclCreateIntArray(dilation, 2)
    output_pads = acl.aclCreateIntArray(output_padding, 2)
    out_mask = acl.aclCreateBoolArray(output_mask, 3)

    # 3. the two-phase call
    workspace_size, executor, ret = aclnn.aclnnConvolutionBackwardGetWorkspaceSize(
        grad_output, inp, weight, bias_sizes, strides, pads, dilations, transposed, output_pads,
        groups, out_mask, cube_math_type, grad_input, grad_weight, grad_bias)
    assert ret == ACL_SUCCESS, (f"aclnnConvolutionBackwardGetWorkspaceSize failed. ERROR: {ret}\n"
                                f"{acl.aclGetRecentErrMsg()}")
    workspace = None
    if workspace_size > 0:
        workspace, ret = acl.aclrtMalloc(workspace_size, 0)
        assert ret == ACL_SUCCESS, f"allocate workspace failed. ERROR: {ret}"
    ret = aclnn.aclnnConvolutionBackward(workspace, workspace_size, executor, stream)
    assert ret == ACL_SUCCESS, f"aclnnConvolutionBackward failed. ERROR: {ret}"

    # 4. wait for the stream
    ret = acl.aclrtSynchronizeStream(stream)
    assert ret == ACL_SUCCESS, f"aclrtSynchronizeStream failed. ERROR: {ret}\n{acl.aclGetRecentErrMsg()}"

    # 5. results back to the host
    for name, dev, shape in (("gradInputResult", grad_input_dev, input_shape),
                             ("gradWeightResult", grad_weight_dev, weight_shape),
                             ("gradBiasResult", grad_bias_dev, bias_size)):
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
