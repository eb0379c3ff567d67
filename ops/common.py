"""Pieces every operator shares: how a tensor becomes a kernel argument, and the two copy kernels
that make a non-contiguous view contiguous in the workspace (as CANN's l0op::Contiguous does) and
write a contiguous result back into a non-contiguous output view (ViewCopy)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.acl import aclTensor
from simulator.kernel import (GM_ADDR, DataCopyExtParams, DataCopyPad, GetBlockIdx, GlobalTensor,
                              HardEvent, SetFlag, TBuf, TPipe, TPosition, WaitFlag)
from simulator.machine import KernelLaunch, align_up, ceil_div
from simulator.profile import Profile

MAX_BLOCK_COUNT = 4095          # DataCopyExtParams.blockCount is 12 bits


def tensor_arg(t: aclTensor, name: str) -> GM_ADDR:
    """The kernel argument for a tensor: a pointer to its storage, bounded by it."""
    return GM_ADDR(t.data, t.storage_numel() * t.itemsize, t.dtype, name)


def workspace_arg(base: int, offset: int, nbytes: int, dtype, name: str) -> GM_ADDR:
    return GM_ADDR(base + offset, nbytes, dtype, name)


def vector_core_count(profile: Profile) -> int:
    return profile.core_kind_for("vector")[1].count


def ub_bytes(profile: Profile) -> int:
    return profile.core_kind_for("vector")[1].buffers["UB"]


# ---- strided view <-> contiguous -------------------------------------------------------------
def view_runs(shape, strides, offset) -> tuple[np.ndarray, int]:
    """The view as runs of consecutive storage elements, in row-major order of the view:
    (start offsets of each run, run length)."""
    dims = [(d, s) for d, s in zip(shape, strides) if d != 1]
    merged: list[list[int]] = []
    for d, s in dims:
        if merged and merged[-1][1] == s * d:
            merged[-1] = [merged[-1][0] * d, s]
        else:
            merged.append([d, s])
    if not merged:
        return np.array([offset], dtype=np.int64), 1
    inner_d, inner_s = merged[-1]
    if inner_s == 1:
        run, outer = inner_d, merged[:-1]
    else:
        run, outer = 1, merged
    starts = np.array([offset], dtype=np.int64)
    for d, s in outer:
        starts = (starts[:, None] + np.arange(d, dtype=np.int64)[None, :] * s).reshape(-1)
    return starts, run


@dataclass
class CopyGroup:
    """One DataCopyPad's worth: `count` runs of `length` elements; strided side starts at
    `strided_off` and steps `step` elements per run; the dense side starts at `dense_off`."""
    strided_off: int
    step: int
    count: int
    length: int
    dense_off: int


def plan_view_copy(t: aclTensor, profile: Profile) -> tuple[int, list[list[list[CopyGroup]]]]:
    """Split a view's runs into UB-sized tiles and the tiles over vector cores.
    Returns (block_dim, per block: per tile: groups)."""
    isz = t.itemsize
    slot = (ub_bytes(profile) // 2) // 32 * 32
    max_len = slot // isz
    starts, run = view_runs(t.viewDims, t.stride, t.offset)
    pieces: list[tuple[int, int, int]] = []          # (strided offset, dense offset, length)
    dense = 0
    for s in starts.tolist():
        done = 0
        while done < run:
            n = min(run - done, max_len)
            pieces.append((s + done, dense, n))
            dense += n
            done += n
    # group pieces into tiles that fit the slot, and tiles into DataCopyPad groups
    tiles: list[list[CopyGroup]] = []
    cur: list[CopyGroup] = []
    used = 0
    for so, do, n in pieces:
        need = align_up(n * isz, 32)
        if used + need > slot:
            tiles.append(cur)
            cur, used = [], 0
        g = cur[-1] if cur else None
        if (g is not None and g.length == n and g.count < MAX_BLOCK_COUNT
                and g.dense_off + g.count * n == do
                and (g.count == 1 and so - g.strided_off >= n or
                     g.count > 1 and so - g.strided_off == g.step * g.count)):
            if g.count == 1:
                g.step = so - g.strided_off
            g.count += 1
        else:
            cur.append(CopyGroup(so, n, 1, n, do))
        used += need
    if cur:
        tiles.append(cur)
    ncores = vector_core_count(profile)
    block_dim = max(1, min(ncores, len(tiles)))
    per = ceil_div(len(tiles), block_dim)
    blocks = [tiles[i * per:(i + 1) * per] for i in range(block_dim)]
    blocks = [b for b in blocks if b]
    return len(blocks), blocks


def _view_copy_body(strided: GM_ADDR, dense: GM_ADDR, blocks, gather: bool, isz: int,
                    slot_bytes: int):
    """Kernel body: per tile, MTE2 brings runs into UB (32-B aligned rows), MTE3 writes them
    out; two UB slots ping-pong, ordered by explicit flags."""
    tiles = blocks[GetBlockIdx()]
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, 2 * slot_bytes)
    ub = buf.Get(np.uint8)
    sGm, dGm = GlobalTensor(np.uint8), GlobalTensor(np.uint8)
    sGm.SetGlobalBuffer(strided.cast(np.uint8))
    dGm.SetGlobalBuffer(dense.cast(np.uint8))
    ev = [pipe.AllocEventID(HardEvent.MTE2_MTE3) for _ in range(2)]
    back = [pipe.AllocEventID(HardEvent.MTE3_MTE2) for _ in range(2)]
    pending = [False, False]
    for i, groups in enumerate(tiles):
        k = i % 2
        local = ub[k * slot_bytes]
        if pending[k]:
            WaitFlag(HardEvent.MTE3_MTE2, back[k])
        row = 0
        for g in groups:
            rb = g.length * isz
            gap = (g.step - g.length) * isz
            if gather:
                DataCopyPad(local[row], sGm[g.strided_off * isz],
                            DataCopyExtParams(g.count, rb, gap if g.count > 1 else 0, 0))
            else:
                DataCopyPad(local[row], dGm[g.dense_off * isz], DataCopyExtParams(g.count, rb, 0, 0))
            row += g.count * align_up(rb, 32)
        SetFlag(HardEvent.MTE2_MTE3, ev[k])
        WaitFlag(HardEvent.MTE2_MTE3, ev[k])
        row = 0
        for g in groups:
            rb = g.length * isz
            gap = (g.step - g.length) * isz
            if gather:
                DataCopyPad(dGm[g.dense_off * isz], local[row], DataCopyExtParams(g.count, rb, 0, 0))
            else:
                DataCopyPad(sGm[g.strided_off * isz], local[row],
                            DataCopyExtParams(g.count, rb, 0, gap if g.count > 1 else 0))
            row += g.count * align_up(rb, 32)
        SetFlag(HardEvent.MTE3_MTE2, back[k])
        pending[k] = True
    for k in range(2):
        if pending[k]:
            WaitFlag(HardEvent.MTE3_MTE2, back[k])


def view_copy_launch(t: aclTensor, name: str, profile: Profile, gather: bool):
    """A launch builder that copies view `t` into (gather) or out of (scatter) a dense
    workspace buffer. Returns (builder(dense GM_ADDR) -> KernelLaunch, block_dim)."""
    block_dim, blocks = plan_view_copy(t, profile)
    slot = (ub_bytes(profile) // 2) // 32 * 32
    strided = tensor_arg(t, name)

    def build(dense: GM_ADDR) -> KernelLaunch:
        label = ("Contiguous" if gather else "ViewCopy") + f"({name})"
        return KernelLaunch(label, _view_copy_body, block_dim, "vector",
                            (strided, dense, blocks, gather, t.itemsize, slot))
    return build, block_dim
