"""aclnnSiluBackward: gradInput = gradOutput * s * (1 + self * (1 - s)), s = sigmoid(self).

Checks (161001 for nulls, then 161002): the operator exists on the chip's series, valid views,
dtype in the series' list, one dtype for all three, one shape for all three, rank <= 8.
Plan: non-contiguous inputs are first copied into the workspace (Contiguous), a non-contiguous
output is computed into the workspace and written back (ViewCopy); the element-wise kernel splits
the flat tensor over the vector cores in 256-byte aligned blocks and each block into UB tiles,
double-buffered. FP16/BF16 are computed in FP32, with the casts as instructions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.aclnn import (OpDef, Param, Plan, Workspace, check_tensor_view, register, require_present,
                             require_support)
from simulator.enums import NUMPY_OF, AclnnError, aclnnStatus, dtype_name, param_invalid
from simulator.kernel import (BUFFER_NUM, GM_ADDR, Adds, Cast, DataCopy, DataCopyExtParams,
                              DataCopyPad, Exp, GetBlockIdx, GlobalTensor, Loop, Mul, Muls, Reciprocal,
                              RoundMode, TBuf, TPipe, TPosition, TQue, float32)
from simulator.program import KernelLaunch
from simulator.arith import align_up, ceil_div
from .common import tensor_arg, ub_bytes, ub_too_small, vector_core_count, view_copy_launch, workspace_arg

MIN_BLOCK_ELEMS = 2048     # tiling choice: below this, fewer cores with longer blocks


@dataclass
class SiluBackwardTiling:
    """Host-side tiling, as the kernel receives it."""
    totalLength: int
    blockLength: int        # elements per block (the last block may be shorter)
    tileLength: int         # elements per UB tile
    computeFp32: bool       # cast FP16/BF16 to FP32 for the arithmetic


def _copy_in(local, gm: GlobalTensor, n: int, isz: int) -> None:
    if (n * isz) % 32 == 0:
        DataCopy(local, gm, n)
    else:
        DataCopyPad(local, gm, DataCopyExtParams(1, n * isz, 0, 0))


def _copy_out(gm: GlobalTensor, local, n: int, isz: int) -> None:
    if (n * isz) % 32 == 0:
        DataCopy(gm, local, n)
    else:
        DataCopyPad(gm, local, DataCopyExtParams(1, n * isz, 0, 0))


class KernelSiluBackward:
    """The kernel, in the shape of an Ascend C vector kernel: Init, then per tile CopyIn,
    Compute, CopyOut, with queues between the stages."""

    def Init(self, gradOutput: GM_ADDR, x: GM_ADDR, gradInput: GM_ADDR, t: SiluBackwardTiling):
        self.t = t
        self.dtype = gradOutput.dtype
        self.isz = self.dtype.itemsize
        start = t.blockLength * GetBlockIdx()
        self.length = min(t.blockLength, t.totalLength - start)
        self.gGm, self.xGm, self.yGm = (GlobalTensor(self.dtype) for _ in range(3))
        self.gGm.SetGlobalBuffer(gradOutput + start, self.length)
        self.xGm.SetGlobalBuffer(x + start, self.length)
        self.yGm.SetGlobalBuffer(gradInput + start, self.length)
        T = t.tileLength
        self.pipe = TPipe()
        self.inQueue = TQue(TPosition.VECIN, BUFFER_NUM)      # gradOutput and self, side by side
        self.outQueue = TQue(TPosition.VECOUT, BUFFER_NUM)
        self.pipe.InitBuffer(self.inQueue, BUFFER_NUM, 2 * T * self.isz)
        self.pipe.InitBuffer(self.outQueue, BUFFER_NUM, T * self.isz)
        self.calc = TBuf(TPosition.VECCALC)
        n_tmp = 4 if t.computeFp32 else 2                     # (g32, x32,) s, t
        self.pipe.InitBuffer(self.calc, n_tmp * T * 4)

    def Process(self):
        T = self.t.tileLength
        tiles = ceil_div(self.length, T)
        # a partial last tile is a different iteration; the queues alternate BUFFER_NUM buffers
        for i in Loop(tiles, key=lambda i: i == tiles - 1, period=BUFFER_NUM):
            n = min(T, self.length - i * T)
            self.CopyIn(i, n)
            self.Compute(n)
            self.CopyOut(i, n)

    def CopyIn(self, i: int, n: int):
        T = self.t.tileLength
        local = self.inQueue.AllocTensor(self.dtype)
        _copy_in(local, self.gGm[i * T], n, self.isz)
        _copy_in(local[T], self.xGm[i * T], n, self.isz)
        self.inQueue.EnQue(local)

    def Compute(self, n: int):
        T = self.t.tileLength
        local = self.inQueue.DeQue(self.dtype)
        y = self.outQueue.AllocTensor(self.dtype)
        tmp = self.calc.Get(float32)
        if self.t.computeFp32:
            g, x, s, u = tmp[0], tmp[T], tmp[2 * T], tmp[3 * T]
            Cast(g, local, RoundMode.CAST_NONE, n)
            Cast(x, local[T], RoundMode.CAST_NONE, n)
        else:
            g, x, s, u = local, local[T], tmp[0], tmp[T]
        Muls(u, x, -1.0, n)          # -x
        Exp(u, u, n)                 # e^-x
        Adds(u, u, 1.0, n)           # 1 + e^-x
        Reciprocal(s, u, n)          # s = sigmoid(x)
        Muls(u, s, -1.0, n)
        Adds(u, u, 1.0, n)           # 1 - s
        Mul(u, u, x, n)              # x (1 - s)
        Adds(u, u, 1.0, n)           # 1 + x (1 - s)
        Mul(u, u, s, n)              # s (1 + x (1 - s))
        if self.t.computeFp32:
            Mul(u, u, g, n)
            Cast(y, u, RoundMode.CAST_RINT, n)
        else:
            Mul(y, u, g, n)
        self.outQueue.EnQue(y)
        self.inQueue.FreeTensor(local)

    def CopyOut(self, i: int, n: int):
        T = self.t.tileLength
        y = self.outQueue.DeQue(self.dtype)
        _copy_out(self.yGm[i * T], y, n, self.isz)
        self.outQueue.FreeTensor(y)


def silu_backward_kernel(gradOutput: GM_ADDR, x: GM_ADDR, gradInput: GM_ADDR, tiling: SiluBackwardTiling):
    op = KernelSiluBackward()
    op.Init(gradOutput, x, gradInput, tiling)
    op.Process()


TILING_FIELDS = {"blockLength": "int", "tileLength": "int"}


def plan_tiling(n: int, dtype: np.dtype, profile, override: dict | None = None) -> tuple[int, SiluBackwardTiling]:
    """Block split over the vector cores and the UB tile; `override` forces blockLength and/or
    tileLength (tiling experiments) and is checked against UB capacity (561002)."""
    isz = dtype.itemsize
    fp32 = dtype != np.float32
    # UB bytes per tile element: in queue 2 slots x 2 tensors, out queue 2 slots, fp32 temps
    per_elem = BUFFER_NUM * 2 * isz + BUFFER_NUM * isz + (4 if fp32 else 2) * 4
    repeat_elems = profile.vector.repeat_bytes // 4            # a full fp32 repeat
    max_tile = ub_bytes(profile) // per_elem // repeat_elems * repeat_elems
    align = profile.vector.repeat_bytes // isz
    ncores = vector_core_count(profile)
    override = override or {}
    if max_tile == 0 and "tileLength" not in override:
        raise AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR, ub_too_small(
            profile, repeat_elems * per_elem, f"one tile of {repeat_elems} elements ({per_elem} B each)"))
    block = int(override.get("blockLength", max(align_up(ceil_div(n, ncores), align), MIN_BLOCK_ELEMS)))
    tile = int(override.get("tileLength", min(max_tile, align_up(block, repeat_elems))))
    if block <= 0 or tile <= 0:
        raise AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR,
                         f"tiling override: blockLength {block} and tileLength {tile} must be positive")
    if tile * per_elem > ub_bytes(profile):
        raise AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR,
                         f"tiling override: tileLength {tile} needs {tile * per_elem} B of UB "
                         f"({per_elem} B per element), UB holds {ub_bytes(profile)} B")
    if (tile * isz) % 32 or (block * isz) % 32:
        raise AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR,
                         f"tiling override: blockLength and tileLength must be multiples of "
                         f"{32 // isz} elements (32 bytes)")
    block_dim = ceil_div(n, block)
    if block_dim > 65535:
        raise AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR, f"blockDim {block_dim} exceeds 65535")
    return block_dim, SiluBackwardTiling(n, block, tile, fp32)


def check(a: dict, profile) -> None:
    require_present(a, ("gradOutput", "self", "gradInput"))
    support = require_support("SiluBackward", profile)
    for name in ("gradOutput", "self", "gradInput"):
        check_tensor_view(a[name], name)
    for name in ("gradOutput", "self", "gradInput"):
        dn = dtype_name(a[name].dataType)
        if dn not in support.dtypes:
            raise param_invalid(f"{name} has dtype {dn}; {profile.series_name} supports "
                                f"{', '.join(support.dtypes)}")
    dts = {a[n].dataType for n in ("gradOutput", "self", "gradInput")}
    if len(dts) > 1:
        raise param_invalid("gradOutput, self and gradInput must have one dtype, got "
                            + ", ".join(f"{n}={dtype_name(a[n].dataType)}" for n in ("gradOutput", "self", "gradInput")))
    shapes = {a[n].viewDims for n in ("gradOutput", "self", "gradInput")}
    if len(shapes) > 1:
        raise param_invalid("gradOutput, self and gradInput must have one shape, got "
                            + ", ".join(f"{n}={list(a[n].viewDims)}" for n in ("gradOutput", "self", "gradInput")))
    rank = len(a["self"].viewDims)
    if support.max_rank is not None and rank > support.max_rank:
        raise param_invalid(f"rank {rank} exceeds the maximum of {support.max_rank}")


def plan(a: dict, profile, tiling: dict) -> Plan:
    go, x, gi = a["gradOutput"], a["self"], a["gradInput"]
    n = x.numel()
    if n == 0:
        return Plan(tiling={"note": "empty tensors: nothing to do"})
    dtype = NUMPY_OF[x.dataType]
    nbytes = n * dtype.itemsize
    workspace, copies_in, copy_out = Workspace(), [], None
    for name, t in (("gradOutput", go), ("self", x)):
        if not t.is_contiguous():
            copies_in.append((name, t, workspace.add(f"contiguous copy of {name} (non-contiguous input)", nbytes)))
    if not gi.is_contiguous():
        copy_out = workspace.add("contiguous gradInput before the strided write-back", nbytes)
    block_dim, tiling = plan_tiling(n, dtype, profile, tiling)
    builders = {name: view_copy_launch(t, name, profile, gather=True)[0] for name, t, _ in copies_in}
    out_builder = view_copy_launch(gi, "gradInput", profile, gather=False)[0] if copy_out is not None else None

    def build(ws: int | None) -> list[KernelLaunch]:
        launches = []
        args = {"gradOutput": tensor_arg(go, "gradOutput") + go.offset,
                "self": tensor_arg(x, "self") + x.offset}
        for name, t, part in copies_in:
            dense = workspace_arg(ws, part, dtype, f"workspace:{name}")
            launches.append(builders[name](dense))
            args[name] = dense
        if copy_out is not None:
            out = workspace_arg(ws, copy_out, dtype, "workspace:gradInput")
        else:
            out = tensor_arg(gi, "gradInput") + gi.offset
        launches.append(KernelLaunch("SiluBackward", silu_backward_kernel, block_dim, "vector",
                                     (args["gradOutput"], args["self"], out, tiling)))
        if copy_out is not None:
            launches.append(out_builder(out))
        return launches

    return Plan(workspace, build, {
        "blockDim": block_dim, "blockLength": tiling.blockLength, "tileLength": tiling.tileLength,
        "bufferNum": BUFFER_NUM, "computeDtype": "FLOAT", "contiguousCopies": [c[0] for c in copies_in],
        "viewCopyOut": copy_out is not None})


def infer_outputs(inputs: dict) -> dict:
    x = inputs["self"]
    return {"gradInput": (tuple(x.shape), x.dtype)}


def tiling_space(inputs: dict, profile) -> list[dict]:
    """Candidate tilings for `ascend-sim tune`: block counts from a quarter of the vector cores to
    eight times as many, times UB tiles from one fp32 repeat up to the largest tile that fits
    (powers of two and the maximum), at most 256 tiles per block, and the default planner's own
    choice. The planner still checks each (561002)."""
    x = inputs["self"]
    n, dtype = int(np.prod(x.shape, dtype=np.int64)), np.dtype(x.dtype)
    if n == 0:
        return []
    isz = dtype.itemsize
    per_elem = BUFFER_NUM * 2 * isz + BUFFER_NUM * isz + (4 if dtype != np.float32 else 2) * 4
    repeat_elems = profile.vector.repeat_bytes // 4
    max_tile = ub_bytes(profile) // per_elem // repeat_elems * repeat_elems
    align = profile.vector.repeat_bytes // isz
    ncores = vector_core_count(profile)
    blocks = sorted({align_up(ceil_div(n, max(1, ncores * f // 4)), align) for f in (1, 2, 4, 8, 16, 32)})
    tiles = sorted({t for t in (repeat_elems << k for k in range(20)) if t <= max_tile} | {max_tile})
    _, default = plan_tiling(n, dtype, profile)
    out = [{"blockLength": default.blockLength, "tileLength": default.tileLength}]   # the planner's own choice
    for b in sorted(set(blocks) | {default.blockLength}):
        for t in tiles:
            if t <= align_up(b, repeat_elems) and ceil_div(b, t) <= 256:
                out.append({"blockLength": b, "tileLength": t})
    return out


register(OpDef("SiluBackward",
               [Param("gradOutput", "tensor"), Param("self", "tensor"), Param("gradInput", "tensor", output=True)],
               check, plan, infer_outputs, tiling_space, TILING_FIELDS))
