"""The 调用示例 (call example) of aclnnSiluBackward from the CANN documents, in Python on the
simulator, step by step as the C++ sample: gradOutput (2, 3) of ones, self = 1..6, FLOAT.

    python examples/silu_backward_example.py          (ASCEND_SIM_SOC picks another chip)

Expected: gradInput = s (1 + x (1 - s)) with s = sigmoid(x): 0.927671, 1.090784, 1.088104, ...
"""
import numpy as np

from acl_sample import create_acl_tensor, finalize, init, print_cost, print_results, run_two_phase


def main() -> int:
    device_id = 0
    stream = init(device_id)                                   # 1. device / stream
    shape = [2, 3]                                             # 2. inputs and outputs
    grad_out, _ = create_acl_tensor(np.ones(6), shape)
    self_t, _ = create_acl_tensor(np.arange(1, 7), shape)
    grad_in, grad_in_dev = create_acl_tensor(np.zeros(6), shape)
    executor, ws = run_two_phase("SiluBackward", stream, grad_out, self_t, grad_in)   # 3. the call
    print_results([("out result", grad_in_dev, shape)])        # 4. results
    print_cost(executor, ws)
    finalize(stream, device_id)                                # 5. release
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
