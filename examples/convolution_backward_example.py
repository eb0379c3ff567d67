"""The 调用示例 (call example) of aclnnConvolutionBackward from the CANN documents, in Python on
the simulator: the same steps as the C++ sample (init, device memory, aclCreateTensor, phase 1,
workspace, phase 2 on a stream, synchronize, copy back, print), on Ascend910B1 by default
(`ASCEND_SIM_SOC=Ascend910A python examples/convolution_backward_example.py` for another chip).

gradOutput, input: (2, 2, 7, 7) ones; weight (2, 2, 1, 1) ones; stride 1, padding 0, dilation 1,
not transposed, groups 1, outputMask all true, cubeMathType 1, FLOAT. Expected: gradInput 2.0
everywhere, gradWeight 98.0, gradBias 98.0.
"""

from acl_sample import (create_acl_tensor, finalize, host_data, init, print_cost, print_results,
                        run_two_phase)
from simulator import acl
from simulator.enums import aclFormat


def main() -> int:
    device_id = 0
    stream = init(device_id)                                   # 1. device / stream

    grad_output_shape = [2, 2, 7, 7]                           # 2. inputs and outputs
    input_shape = [2, 2, 7, 7]
    weight_shape = [2, 2, 1, 1]
    bias_size = [2]
    nchw, nd = aclFormat.ACL_FORMAT_NCHW, aclFormat.ACL_FORMAT_ND
    grad_output, _ = create_acl_tensor(host_data(grad_output_shape, 1.0), grad_output_shape, nchw)
    inp, _ = create_acl_tensor(host_data(input_shape, 1.0), input_shape, nchw)
    weight, _ = create_acl_tensor(host_data(weight_shape, 1.0), weight_shape, nchw)
    grad_input, grad_input_dev = create_acl_tensor(host_data(input_shape, 1.0), input_shape, nchw)
    grad_weight, grad_weight_dev = create_acl_tensor(host_data(weight_shape, 1.0), weight_shape, nchw)
    grad_bias, grad_bias_dev = create_acl_tensor(host_data(bias_size, 1.0), bias_size, nd)
    bias_sizes = acl.aclCreateIntArray(bias_size, 1)
    strides = acl.aclCreateIntArray([1, 1], 2)
    pads = acl.aclCreateIntArray([0, 0], 2)
    dilations = acl.aclCreateIntArray([1, 1], 2)
    output_pads = acl.aclCreateIntArray([0, 0], 2)
    out_mask = acl.aclCreateBoolArray([True, True, True], 3)
    transposed, groups, cube_math_type = False, 1, 1

    executor, ws = run_two_phase(                              # 3. the two-phase call
        "ConvolutionBackward", stream, grad_output, inp, weight, bias_sizes, strides, pads, dilations,
        transposed, output_pads, groups, out_mask, cube_math_type, grad_input, grad_weight, grad_bias)

    print_results([("gradInputResult", grad_input_dev, input_shape),      # 4. results
                   ("gradWeightResult", grad_weight_dev, weight_shape),
                   ("gradBiasResult", grad_bias_dev, bias_size)])
    print_cost(executor, ws)
    finalize(stream, device_id)                                # 5. release
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
