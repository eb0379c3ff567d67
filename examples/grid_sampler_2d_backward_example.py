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

from acl_sample import create_acl_tensor, finalize, init, print_cost, print_results, run_two_phase
from simulator import acl


def main() -> int:
    device_id = 0                                              # 1. device / stream
    stream = init(device_id, os.environ.get("ASCEND_SIM_SOC", "Ascend910B1"))

    interpolation_mode, padding_mode, align_corners = 0, 0, False     # 2. inputs and outputs
    grad_output_shape = [1, 1, 3, 3]
    input_shape = [1, 1, 5, 8]
    grid_shape = [1, 3, 3, 2]
    grad_output, _ = create_acl_tensor([1] * 9, grad_output_shape)
    inp, _ = create_acl_tensor(list(range(1, 41)), input_shape)
    grid, _ = create_acl_tensor([-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0, -1, 1, 0, 1, 1, 1], grid_shape)
    input_grad, input_grad_dev = create_acl_tensor([0] * 40, input_shape)
    grid_grad, grid_grad_dev = create_acl_tensor([0] * 18, grid_shape)
    output_mask = acl.aclCreateBoolArray([True, True], 2)

    executor, ws = run_two_phase(                              # 3. the two-phase call
        "GridSampler2DBackward", stream, grad_output, inp, grid, interpolation_mode, padding_mode,
        align_corners, output_mask, input_grad, grid_grad)

    print_results([("inputGradResultData", input_grad_dev, input_shape),  # 4. results
                   ("gridGradResultData", grid_grad_dev, grid_shape)])
    print_cost(executor, ws)
    print(executor.report.summary())
    finalize(stream, device_id)                                # 5. release
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
