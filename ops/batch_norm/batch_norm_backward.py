"""aclnnBatchNormBackward: the gradients of batch normalisation.

    aclnnBatchNormBackwardGetWorkspaceSize(gradOut, input, weight, runningMean, runningVar, saveMean,
        saveInvstd, training, eps, outputMask, gradInput, gradWeight, gradBias)
        -> (workspaceSize, executor, status)

With xhat = (x - mean) * invstd per channel and M = N * spatial:

    training   mean, invstd = saveMean, 1 / sqrt(saveInvstd + eps)  (saveInvstd holds the variance
               aclnnBatchNorm wrote, as CANN's kernels read it before its Ascend 950)
               gradInput = w invstd / M * (M dy - sum dy - xhat sum(dy xhat))
    inference  mean, invstd = runningMean, 1 / sqrt(runningVar + eps); gradInput = w invstd dy
    both       gradWeight = sum dy xhat, gradBias = sum dy

Checks, as CANN's (ops-nn norm/batch_norm_grad_v3/op_host/op_api/aclnn_batch_norm_backward.cpp):

 1. null gradOut, input or outputMask; a gradient outputMask asks for that is null  -> 161001
 2. the operator on this product series (not the inference series); valid views     -> 161002
 3. outputMask of 3; dtypes in the series' list; gradOut, input (and gradInput) of one dtype,
    shape and format, rank 2..8, a plain format
 4. weight, runningMean, runningVar, saveMean, saveInvstd, gradWeight, gradBias 1-D of C

Null weight, runningMean, runningVar, saveMean, saveInvstd read as 1, 0, 1, 0, 1; an empty input
launches nothing. The launches are CANN's TBE pair: BNTrainingUpdateGrad (gradWeight and gradBias,
the per-channel reduction), then BNTrainingReduceGrad (training) or BNInferGrad (inference) for
gradInput.
"""
from __future__ import annotations

import numpy as np

from simulator.acl import aclBoolArray
from simulator.aclnn import OpDef, Param, Plan, Workspace, check_tensor_view, register, require_present, require_support
from simulator.enums import NUMPY_OF, param_invalid, param_nullptr
from ..common import check_number
from .batch_norm import TILING_FIELDS, check_nd_tensor, check_vector
from .kernel import BatchNormJob
from .plan import Launches, tiling_space, channel_ranges, nc_s, pick_tile, plan_from, two_launches

OP = "BatchNormBackward"
VECTORS = ("weight", "runningMean", "runningVar", "saveMean", "saveInvstd")
GRADS = ("gradInput", "gradWeight", "gradBias")


def _mask(a: dict) -> tuple:
    m = a["outputMask"]
    if not isinstance(m, aclBoolArray):
        raise param_invalid(f"{OP}: outputMask must be an aclBoolArray, got {type(m).__name__}")
    if len(m) != 3:
        raise param_invalid(f"{OP}: outputMask has {len(m)} entries; it must have 3 (gradInput, gradWeight, gradBias)")
    return tuple(bool(b) for b in m.values)


def check(a: dict, profile) -> None:
    require_present(a, ("gradOut", "input", "outputMask"), OP)
    mask = _mask(a)
    for bit, name in zip(mask, GRADS):
        if bit and a[name] is None:
            raise param_nullptr(f"{OP}: {name} is a null pointer but outputMask asks for it")
    if not isinstance(a["training"], (bool, np.bool_)):
        raise param_invalid(f"{OP}: training must be a bool, got {a['training']!r}")
    support = require_support(OP, profile)
    grads = [n for n, bit in zip(GRADS, mask) if bit]
    for name in ("gradOut", "input") + VECTORS + tuple(grads):
        if a[name] is not None:
            check_tensor_view(a[name], name)
    x = a["input"]
    for name in ("gradOut", "input") + (("gradInput",) if mask[0] else ()):
        t = a[name]
        check_nd_tensor(t, name, support, profile, OP)
        if t.viewDims != x.viewDims or t.format != x.format or t.dataType != x.dataType:
            raise param_invalid(f"{OP}: {name} ({list(t.viewDims)}, {t.format.name}) must have input's shape, format "
                                f"and dtype ({list(x.viewDims)}, {x.format.name})")
    C = x.viewDims[1]
    for name in VECTORS + tuple(n for n in grads if n != "gradInput"):
        if a[name] is not None:
            check_vector(a[name], name, C, support, profile, OP)
    check_number(a["eps"], "eps", OP)


def plan(a: dict, profile, tiling: dict) -> Plan:
    x, dy = a["input"], a["gradOut"]
    if x.numel() == 0 or dy.numel() == 0:
        return Plan(Workspace(), lambda ws: [], {"launches": "none (empty input)"})
    mask = _mask(a)
    training = bool(a["training"])
    N, C, S = nc_s(x)
    xdt = NUMPY_OF[x.dataType]
    io = Launches(Workspace(), profile)
    for name in ("gradOut", "input") + VECTORS:
        io.add(name, a[name])
    for bit, name in zip(mask, GRADS):
        if bit:
            io.add(name, a[name], output=True, read=False)
    io.tensors["gradOutput"] = io.tensors.pop("gradOut")          # the kernel's name for it
    io.copies = [("gradOutput" if n == "gradOut" else n, t, p) for n, t, p in io.copies]
    job = BatchNormJob(N, C, S, "backward-train" if training else "backward-infer", "both", float(a["eps"]), 0.0,
                       xdt, *pick_tile(N, S, xdt.itemsize, True, profile, tiling), channel_ranges(C, profile, tiling),
                       frozenset(io.tensors))
    second = "BNTrainingReduceGrad" if training else "BNInferGrad"
    stats = {"weight", "runningMean", "runningVar", "saveMean", "saveInvstd"} & set(io.tensors)
    kernels = two_launches(job, io, io.workspace, ("BNTrainingUpdateGrad", second),
                           {"gradOutput", "input", "gradWeight", "gradBias"} & set(io.tensors) | stats,
                           {"gradOutput", "input", "gradInput"} & set(io.tensors) | stats)
    figures = {"N": N, "C": C, "spatial": S, "tileLength": job.tile, "rowsPerTile": job.rows, "blockDim": len(job.ranges),
               "kernels": f"BNTrainingUpdateGrad + {second}" if mask[0] else "BNTrainingUpdateGrad"}
    if not mask[0]:
        return plan_from(io, lambda ws: kernels(ws)[:1], figures)
    return plan_from(io, kernels, figures)


def infer_outputs(inputs: dict) -> dict:
    x = np.asarray(inputs["input"])
    mask = list(inputs.get("outputMask") or (True, True, True))
    w = inputs.get("weight")
    vdt = np.asarray(w).dtype if w is not None else np.dtype(np.float32)
    c = (x.shape[1],)
    return {"gradInput": (x.shape, x.dtype) if mask[0] else None, "gradWeight": (c, vdt) if mask[1] else None,
            "gradBias": (c, vdt) if mask[2] else None}


PARAMS = [Param("gradOut", "tensor"), Param("input", "tensor"), Param("weight", "tensor"),
          Param("runningMean", "tensor"), Param("runningVar", "tensor", init="uniform(0.5,1.5)"),
          Param("saveMean", "tensor"), Param("saveInvstd", "tensor", init="uniform(0.5,1.5)"),
          Param("training", "bool"), Param("eps", "float"), Param("outputMask", "bool_array"),
          Param("gradInput", "tensor", output=True), Param("gradWeight", "tensor", output=True),
          Param("gradBias", "tensor", output=True)]

register(OpDef(OP, PARAMS, check, plan, infer_outputs, tiling_space(OP), TILING_FIELDS))
