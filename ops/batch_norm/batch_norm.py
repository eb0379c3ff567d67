"""aclnnBatchNorm: batch normalisation over dim 1, training (batch statistics, running statistics
updated in place) or inference (the running statistics).

    aclnnBatchNormGetWorkspaceSize(input, weight, bias, runningMean, runningVar, training, momentum,
        eps, output, saveMean, saveInvstd) -> (workspaceSize, executor, status)

Checks, as CANN's (ops-nn norm/batch_norm_v3/op_host/op_api/aclnn_batch_norm.cpp):

 1. null input or output, or (training) null saveMean / saveInvstd                  -> 161001
 2. the operator on this product series; valid tensor views                         -> 161002
 3. every tensor's dtype in the series' list (profile `operators.BatchNorm`)
 4. input rank 2..8, formats ND / NCL / NCHW / NCDHW (a 5-D tensor NCDHW), output with
    input's shape, format and dtype
 5. weight, bias, runningMean, runningVar (and saveMean, saveInvstd when training) 1-D of C
 6. momentum and eps numbers

An empty input launches nothing but the fills of saveMean (0) and saveInvstd (NaN), as CANN does.
Null weight, bias, runningMean, runningVar read as 1, 0, 0, 1. As in CANN before its Ascend 950,
saveInvstd holds the batch's biased variance (aclnnBatchNormBackward reads it so); runningVar
takes the unbiased one (x N*spatial / (N*spatial - 1)).

The launches are CANN's: on A2, training with C >= 64, its Ascend C BatchNormV3 (one launch, whole
channels a core); otherwise the TBE pair BNTrainingReduce (per-channel sum and sum of squares) and
BNTrainingUpdate; in inference BNInfer. CANN's casts of the 1-D tensors to FP32 and their copies
back are not launched here (ops/batch_norm/kernel.py reads and writes them in their dtype).
"""
from __future__ import annotations

import numpy as np

from simulator.aclnn import OpDef, Param, Plan, Workspace, check_tensor_view, register, require_present, require_support
from simulator.enums import NUMPY_OF, aclFormat, dtype_name, param_invalid, param_nullptr
from ..common import check_number, tensor_arg, zero_fill_launch
from .kernel import CH, BatchNormJob, fill_launch
from .plan import Launches, tiling_space, batch_norm_launch, channel_ranges, nc_s, pick_tile, plan_from, two_launches

OP = "BatchNorm"
FORMATS = (aclFormat.ACL_FORMAT_ND, aclFormat.ACL_FORMAT_NCL, aclFormat.ACL_FORMAT_NCHW, aclFormat.ACL_FORMAT_NCDHW)
VECTORS = ("weight", "bias", "runningMean", "runningVar")
SAVED = ("saveMean", "saveInvstd")
TILING_FIELDS = {"blockDim": "int", "tileLength": "int"}
BATCH_NORM_V3_MIN_C = 64        # aclnn_batch_norm.cpp: the Ascend C kernel from 64 channels on


def check_nd_tensor(t, name: str, support, profile, op: str) -> None:
    """dtype in the series' list, rank 2..max_rank, a plain format (5-D: NCDHW)."""
    dtype = dtype_name(t.dataType)
    if dtype not in support.dtypes:
        raise param_invalid(f"{op}: {name} has dtype {dtype}; {profile.series_name} supports "
                            f"{', '.join(support.dtypes)}")
    rank = len(t.viewDims)
    if not 2 <= rank <= (support.max_rank or 8):
        raise param_invalid(f"{op}: {name} has rank {rank}; it must be 2 to {support.max_rank or 8} (channels at dim 1)")
    if t.format not in FORMATS or (rank == 5 and t.format != aclFormat.ACL_FORMAT_NCDHW):
        raise param_invalid(f"{op}: {name} is {rank}-D with format {t.format.name}; it must be ND, NCL, NCHW or "
                            f"NCDHW (NCDHW when 5-D)")


def check_vector(t, name: str, C: int, support, profile, op: str) -> None:
    """A per-channel tensor: a dtype of the series, 1-D of C."""
    dtype = dtype_name(t.dataType)
    if dtype not in support.dtypes:
        raise param_invalid(f"{op}: {name} has dtype {dtype}; {profile.series_name} supports "
                            f"{', '.join(support.dtypes)}")
    if t.viewDims != (C,):
        raise param_invalid(f"{op}: {name} has shape {list(t.viewDims)}; it must be [{C}] (input's channels)")


def check(a: dict, profile) -> None:
    require_present(a, ("input", "output"), OP)
    training = a["training"]
    if not isinstance(training, (bool, np.bool_)):
        raise param_invalid(f"{OP}: training must be a bool, got {training!r}")
    if training:
        for name in SAVED:
            if a[name] is None:
                raise param_nullptr(f"{OP}: {name} is a null pointer (training needs it)")
    support = require_support(OP, profile)
    present = [n for n in ("input", "output") + VECTORS + SAVED if a[n] is not None]
    for name in present:
        check_tensor_view(a[name], name)
    x, y = a["input"], a["output"]
    check_nd_tensor(x, "input", support, profile, OP)
    check_nd_tensor(y, "output", support, profile, OP)
    if y.viewDims != x.viewDims or y.format != x.format or y.dataType != x.dataType:
        raise param_invalid(f"{OP}: output ({list(y.viewDims)}, {y.format.name}, {dtype_name(y.dataType)}) must have "
                            f"input's shape, format and dtype ({list(x.viewDims)}, {x.format.name}, "
                            f"{dtype_name(x.dataType)})")
    C = x.viewDims[1]
    for name in VECTORS + (SAVED if training else ()):
        if a[name] is not None:
            check_vector(a[name], name, C, support, profile, OP)
    check_number(a["momentum"], "momentum", OP)
    check_number(a["eps"], "eps", OP)


def _empty(a: dict, profile) -> Plan:
    """An empty input: saveMean 0 and saveInvstd NaN where given, nothing else."""
    fills = []
    for name, value in (("saveMean", 0.0), ("saveInvstd", float("nan"))):
        t = a[name]
        if t is not None and t.numel():
            fills.append((name, t, value))

    def build(ws):
        return [zero_fill_launch(f"Fill({name})", tensor_arg(t, name) + t.offset, t.numel() * t.itemsize, profile)
                if value == 0.0 else fill_launch(f"Fill({name}, NaN)", tensor_arg(t, name) + t.offset, t.numel(),
                                                 NUMPY_OF[t.dataType], value)
                for name, t, value in fills]
    return Plan(Workspace(), build, {"launches": "fills only (empty input)"})


def plan(a: dict, profile, tiling: dict) -> Plan:
    x = a["input"]
    if x.numel() == 0:
        return _empty(a, profile)
    training = bool(a["training"])
    N, C, S = nc_s(x)
    xdt = NUMPY_OF[x.dataType]
    io = Launches(Workspace(), profile)
    io.add("input", x)
    for name in ("weight", "bias"):
        io.add(name, a[name])
    for name in ("runningMean", "runningVar"):        # updated in place when training
        io.add(name, a[name], output=training)
    io.add("output", a["output"], output=True, read=False)
    if training:
        for name in SAVED:
            io.add(name, a[name], output=True, read=False)
    ranges = channel_ranges(C, profile, tiling)
    across_per_block = 0 if training else max(n for _, n in ranges)     # BNInfer's pass 2 may go across channels
    job = BatchNormJob(N, C, S, "forward-train" if training else "forward-infer", "both", float(a["eps"]),
                       float(a["momentum"]), xdt, *pick_tile(N, S, xdt.itemsize, False, profile, tiling, across_per_block),
                       ranges, frozenset(io.tensors))
    figures = {"N": N, "C": C, "spatial": S, "tileLength": job.tile, "rowsPerTile": job.rows, "blockDim": len(job.ranges),
               "channelsPerBlock": max(n for _, n in job.ranges)}
    if job.across:
        figures["channelsPerTile"] = CH
        figures.pop("rowsPerTile")
    if not training:
        figures["kernels"] = "BNInfer"
        return plan_from(io, lambda ws: [batch_norm_launch("BNInfer", job, io, ws)], figures)
    if profile.series == "A2" and C >= BATCH_NORM_V3_MIN_C:
        figures["kernels"] = "BatchNormV3"
        return plan_from(io, lambda ws: [batch_norm_launch("BatchNormV3", job, io, ws)], figures)
    figures["kernels"] = "BNTrainingReduce + BNTrainingUpdate"
    kernels = two_launches(job, io, io.workspace, ("BNTrainingReduce", "BNTrainingUpdate"), {"input"},
                           set(io.tensors))
    return plan_from(io, kernels, figures)


def infer_outputs(inputs: dict) -> dict:
    x = np.asarray(inputs["input"])
    c = (x.shape[1],) if x.ndim > 1 else (0,)
    saved = (c, np.dtype(np.float32)) if inputs.get("training") else None
    return {"output": (x.shape, x.dtype), "saveMean": saved, "saveInvstd": saved, "runningMean": None,
            "runningVar": None}


PARAMS = [Param("input", "tensor"), Param("weight", "tensor"), Param("bias", "tensor"),
          # updated in place when training: outputs that are also read (simulator.run reads them back)
          Param("runningMean", "tensor", output=True), Param("runningVar", "tensor", output=True, init="uniform(0.5,1.5)"),
          Param("training", "bool"),
          Param("momentum", "float"), Param("eps", "float"), Param("output", "tensor", output=True),
          Param("saveMean", "tensor", output=True), Param("saveInvstd", "tensor", output=True)]

register(OpDef(OP, PARAMS, check, plan, infer_outputs, tiling_space(OP), TILING_FIELDS))
