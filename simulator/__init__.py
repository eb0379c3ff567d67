"""The Ascend simulator: a cycle-approximate model of Huawei Ascend NPUs that runs CANN's aclnn
operators. Start with `simulator.run(...)`, or the ACL API in simulator.acl / simulator.aclnn."""
from .enums import AclnnError, KernelError, aclDataType, aclFormat, aclnnStatus
from .profile import DEFAULT_SOC, Profile, ProfileError, list_socs, load_profile, load_profile_file
from . import acl, aclnn
from .api import Estimate, KernelResult, PlanResult, RunResult, TensorLayout, estimate, plan, run, run_kernel



def capture(name: str = "captured", merge: bool = True, kind: str | None = None, batch: int | None = None):
    """Record a PyTorch model's calls of the operators we simulate as a workload trace:
    `with simulator.capture() as cap: loss.backward()` (a training step) or `with
    simulator.capture(batch=8) as cap, torch.no_grad(): model(x)` (an inference pass), then
    `cap.save("trace.yaml")` and `print(cap.summary())`. Needs torch (simulator.studies.capture)."""
    from .studies.capture import capture as _capture
    return _capture(name, merge, kind, batch)


__all__ = ["run", "capture", "RunResult", "TensorLayout", "estimate", "Estimate", "plan", "PlanResult", "run_kernel", "KernelResult", "acl", "aclnn", "load_profile", "load_profile_file", "list_socs",
           "Profile", "ProfileError", "AclnnError", "KernelError", "aclDataType", "aclFormat",
           "aclnnStatus", "DEFAULT_SOC"]
