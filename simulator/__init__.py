"""The Ascend simulator: a cycle-approximate model of Huawei Ascend NPUs that runs CANN's aclnn
operators. Start with `simulator.run(...)`, or the ACL API in simulator.acl / simulator.aclnn."""
from .enums import AclnnError, KernelError, aclDataType, aclFormat, aclnnStatus
from .profile import DEFAULT_SOC, Profile, ProfileError, list_socs, load_profile, load_profile_file
from . import acl, aclnn
from .api import Estimate, KernelResult, PlanResult, RunResult, TensorLayout, estimate, plan, run, run_kernel

__all__ = ["run", "RunResult", "TensorLayout", "estimate", "Estimate", "plan", "PlanResult", "run_kernel", "KernelResult", "acl", "aclnn", "load_profile", "load_profile_file", "list_socs",
           "Profile", "ProfileError", "AclnnError", "KernelError", "aclDataType", "aclFormat",
           "aclnnStatus", "DEFAULT_SOC"]
