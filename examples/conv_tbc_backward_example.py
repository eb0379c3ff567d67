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

from acl_sample import (create_acl_tensor, finalize, host_data, init, print_cost, print_results,
                        run_two_phase)
from simulator.enums import aclFormat


def main() -> int:
    device_id = 0
    stream = init(device_id)                                   # 1. device / stream

    self_shape = [6, 1, 2]                                     # 2. inputs and outputs
    input_shape = [5, 1, 2]
    weight_shape = [2, 2, 2]
    bias_shape = [2]
    pad, cube_math_type = 1, 1
    ncl, nd = aclFormat.ACL_FORMAT_NCL, aclFormat.ACL_FORMAT_ND
    self_t, _ = create_acl_tensor(host_data(self_shape, 1.0), self_shape, ncl)
    input_t, _ = create_acl_tensor(host_data(input_shape, 1.0), input_shape, ncl)
    weight_t, _ = create_acl_tensor(host_data(weight_shape, 1.0), weight_shape, ncl)
    bias_t, _ = create_acl_tensor(host_data(bias_shape, 1.0), bias_shape, nd)
    grad_input, grad_input_dev = create_acl_tensor(host_data(input_shape, 0.0), input_shape, ncl)
    grad_weight, grad_weight_dev = create_acl_tensor(host_data(weight_shape, 0.0), weight_shape, ncl)
    grad_bias, grad_bias_dev = create_acl_tensor(host_data(bias_shape, 0.0), bias_shape, nd)

    executor, ws = run_two_phase(                              # 3. the two-phase call
        "ConvTbcBackward", stream, self_t, input_t, weight_t, bias_t, pad, cube_math_type,
        grad_input, grad_weight, grad_bias)

    print_results([("gradInputResult", grad_input_dev, input_shape),      # 4. results
                   ("gradWeightResult", grad_weight_dev, weight_shape),
                   ("gradBiasResult", grad_bias_dev, bias_shape)])
    print_cost(executor, ws)
    finalize(stream, device_id)                                # 5. release
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
