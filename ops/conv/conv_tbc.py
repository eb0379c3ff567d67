"""aclnnConvTbc: PyTorch's conv_tbc, a 1-D convolution over time with tensors laid out Time, Batch,
Channel.

    aclnnConvTbcGetWorkspaceSize(self, weight, bias, pad, output, cubeMathType)

self (T, B, Cin), weight (K, Cin, Cout), bias (Cout), output (T + 2*pad + 1 - K, B, Cout). It is
aclnnConvolution (1-D, with bias) on permuted views, as ops-nn runs it: self -> (B, Cin, T),
weight -> (Cout, Cin, K), output -> (B, Cout, T_out), the permutations strided views that the
convolution's planner copies to its layouts (TransData) and back (ViewCopy).

Checks: those of aclnnConvTbcBackward (conv_tbc_backward.check_tbc), self in the input's place and
output in gradOutput's.
"""
from __future__ import annotations

import numpy as np

from simulator.acl import aclIntArray
from simulator.aclnn import OpDef, Param, Plan, register
from . import convolution
from .conv_tbc_backward import _permuted, check_tbc
from .convolution_backward import TILING_FIELDS

OP = "ConvTbc"


def check(a: dict, profile) -> None:
    check_tbc(a, profile, OP, "self", "output", {}, ("self", "weight"))


def as_convolution(a: dict) -> dict:
    """The aclnnConvolution call this is: NCL views of the same storage."""
    ncl = (1, 2, 0)
    return {"input": _permuted(a["self"], ncl), "weight": _permuted(a["weight"], (2, 1, 0)), "bias": a["bias"],
            "stride": aclIntArray([1]), "padding": aclIntArray([int(a["pad"])]), "dilation": aclIntArray([1]),
            "transposed": False, "outputPadding": aclIntArray([0]), "groups": 1,
            "output": _permuted(a["output"], ncl), "cubeMathType": a["cubeMathType"]}


def plan(a: dict, profile, tiling: dict) -> Plan:
    return convolution.plan(as_convolution(a), profile, tiling)


def infer_outputs(inputs: dict) -> dict:
    x, w = np.asarray(inputs["self"]), np.asarray(inputs["weight"])
    pad = int(inputs.get("pad", 0))
    return {"output": ((x.shape[0] + 2 * pad + 1 - w.shape[0], x.shape[1], w.shape[2]), x.dtype)}


def conv_tbc_forward_space(inputs: dict, profile) -> list[dict]:
    x, w = np.asarray(inputs["self"]), np.asarray(inputs["weight"])
    pad = int(inputs.get("pad", 0))
    return convolution.convolution_space(
        {"input": np.empty((x.shape[1], x.shape[2], x.shape[0]), x.dtype), "weight": np.empty((w.shape[2], w.shape[1], w.shape[0]), w.dtype),
         "bias": inputs.get("bias"), "stride": [1], "padding": [pad], "dilation": [1], "transposed": False,
         "outputPadding": [0], "groups": 1, "cubeMathType": inputs.get("cubeMathType", 0)}, profile)


register(OpDef(OP, [Param("self", "tensor"), Param("weight", "tensor"), Param("bias", "tensor"), Param("pad", "int"),
                    Param("output", "tensor", output=True), Param("cubeMathType", "int")],
               check, plan, infer_outputs, conv_tbc_forward_space,
               {k: v for k, v in TILING_FIELDS.items() if not k.startswith("dw")}))
