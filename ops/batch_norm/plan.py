"""The plan both batch-norm operators share: the call as (N, C, spatial), its channels split over
the vector cores (whole channels a block, as CANN's BatchNormV3 splits them), the UB tile, the
per-channel sums' workspace, Contiguous copies of non-contiguous inputs and ViewCopy write-backs of
non-contiguous outputs, and the launches in CANN's order.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulator.aclnn import Plan, Workspace
from simulator.enums import NUMPY_OF
from simulator.program import KernelLaunch
from ..tiling_space import distinct_accepted
from ..common import split_evenly, tensor_arg, tiling_error, ub_bytes, vector_core_count, view_copy_launch, workspace_arg
from .kernel import CH, ROWS, BatchNormJob, batch_norm_body, ub_need

MAX_TILE = 8192


def nc_s(t) -> tuple[int, int, int]:
    """(N, C, spatial) of a tensor with channels at dim 1."""
    d = t.viewDims
    return int(d[0]), int(d[1]), int(np.prod(d[2:], dtype=np.int64))


def pick_tile(N: int, S: int, isz: int, backward: bool, profile, forced: dict,
              channels_per_block: int = 0) -> tuple[int, int, int, bool]:
    """(tile, rows, pitch, across): the largest power-of-two tile (ROWS to MAX_TILE elements) that
    fits UB and is not far past what a channel holds; a channel's rows shorter than half a tile go
    several to a tile (each at a 32-B aligned pitch), as CANN's kernels pack short rows. Given the
    channels a block takes (BNInfer's), short rows are taken CH channels of one image a tile
    instead (`across`) where that makes fewer tiles. A forced tileLength must be such a tile and
    fit."""
    ub = ub_bytes(profile)
    pitch = -(-S * isz // 32) * 32 // isz

    def grow(want):
        tile = ROWS
        while tile < MAX_TILE and tile < want and ub_need(2 * tile, isz, backward) <= ub:
            tile *= 2
        return tile
    if "tileLength" in forced:
        tile = int(forced["tileLength"])
        if tile < ROWS or tile & (tile - 1):
            raise tiling_error(f"BatchNorm tiling: tileLength {tile} must be a power of two >= {ROWS}")
    else:
        tile = grow(N * pitch if 2 * pitch <= MAX_TILE else S)
    rows = tile // pitch if 2 * pitch <= tile else 1
    across = False
    if channels_per_block and 2 * pitch <= MAX_TILE and CH * pitch <= MAX_TILE:
        wide = tile if "tileLength" in forced else grow(CH * pitch)
        cpb = channels_per_block
        across = wide >= CH * pitch and N * -(-cpb // CH) < cpb * -(-N // rows)
        if across:
            tile = wide
    if ub_need(tile, isz, backward) > ub:
        raise tiling_error(f"BatchNorm tiling: a tile of {tile} elements needs {ub_need(tile, isz, backward)} B of UB; "
                           f"UB holds {ub} B")
    return tile, max(1, rows), pitch, across


def channel_ranges(C: int, profile, forced: dict) -> tuple:
    cores = min(int(forced.get("blockDim", 0)) or vector_core_count(profile), C)
    return tuple((first, end - first) for first, end in split_evenly(C, cores) if end > first)


class Launches:
    """The tensors of one call, where each kernel finds them (the tensor, or a workspace copy),
    and the launches around the kernels: Contiguous copies before, ViewCopy write-backs after."""

    def __init__(self, workspace: Workspace, profile):
        self.workspace, self.profile = workspace, profile
        self.tensors: dict = {}
        self.copies: list = []          # (name, tensor, part): inputs made contiguous first
        self.dense: dict = {}           # name -> part: outputs written dense, then scattered

    def add(self, name: str, t, output: bool = False, read: bool = True) -> None:
        """A tensor the kernels use: an input (read), an output (written; `read` too when it is
        updated in place, as the running statistics are)."""
        if t is None or t.numel() == 0:
            return
        self.tensors[name] = t
        if t.is_contiguous():
            return
        part = self.workspace.add(f"{name} dense ({'before the strided write-back' if output else 'a contiguous copy'})",
                                  t.numel() * t.itemsize)
        if output:
            self.dense[name] = part
        if read:
            self.copies.append((name, t, part))

    def addr(self, name: str, ws: int):
        t = self.tensors[name]
        part = self.dense.get(name) or next((p for n, _, p in self.copies if n == name), None)
        if part is not None:
            return workspace_arg(ws, part, NUMPY_OF[t.dataType], f"workspace:{name}")
        return tensor_arg(t, name) + t.offset

    def build(self, ws: int, kernels: list) -> list[KernelLaunch]:
        """[Contiguous copies] + kernels(addr) + [ViewCopy write-backs]."""
        out = []
        for name, t, part in self.copies:
            copy, _ = view_copy_launch(t, name, self.profile, gather=True)
            out.append(copy(workspace_arg(ws, part, NUMPY_OF[t.dataType], f"workspace:{name}")))
        out += kernels
        for name, part in self.dense.items():
            back, _ = view_copy_launch(self.tensors[name], name, self.profile, gather=False)
            out.append(back(workspace_arg(ws, part, NUMPY_OF[self.tensors[name].dataType], f"workspace:{name}")))
        return out


def batch_norm_launch(label: str, job: BatchNormJob, io: Launches, ws: int, sums=None) -> KernelLaunch:
    """One kernel launch of `job`, its GM arguments bound: every tensor the job names, and the
    per-channel sums' workspace part (`sums`)."""
    gm = {name: (io.addr(name, ws), NUMPY_OF[t.dataType]) for name, t in io.tensors.items() if name in job.has}
    if sums is not None:
        f32 = np.dtype(np.float32)
        C = job.C
        base = workspace_arg(ws, sums, f32, "workspace:sums")
        gm["sum"] = (base, f32)
        gm["sumsq"] = (base + C, f32)
    return KernelLaunch(label, batch_norm_body, len(job.ranges), "vector", (gm, job))


def two_launches(job: BatchNormJob, io: Launches, workspace: Workspace, labels: tuple, reduce_has: set,
                 update_has: set):
    """CANN's pair of TBE kernels (a reduction writing per-channel sums, then an update reading
    them): the sums' part and a builder of the two launches."""
    sums = workspace.add(f"per-channel sums ({job.C} x 2 FP32)", 2 * job.C * 4)
    reduce_job = replace(job, phase="reduce", has=frozenset(reduce_has | {"sum", "sumsq"}))
    update_job = replace(job, phase="update", has=frozenset(update_has | {"sum", "sumsq"}))

    def kernels(ws):
        return [batch_norm_launch(labels[0], reduce_job, io, ws, sums),
                batch_norm_launch(labels[1], update_job, io, ws, sums)]
    return kernels


def plan_from(io: Launches, kernels, tiling: dict) -> Plan:
    return Plan(io.workspace, lambda ws: io.build(ws, kernels(ws)), tiling)


def tiling_space(op: str):
    """`ascend-sim tune`'s candidates for a batch-norm operator: a quarter, a half and three
    quarters of the vector cores as blockDim, and every power-of-two tile from 256 elements
    to 8192; the planner keeps the distinct ones it accepts."""
    def space(inputs: dict, profile) -> list[dict]:
        cores = vector_core_count(profile)

        def propose(default):
            out = [{"blockDim": max(1, cores * q // 4)} for q in (1, 2, 3)]
            return out + [{"tileLength": 256 << k} for k in range(6)]
        return distinct_accepted(op, inputs, profile, propose)
    return space
