"""Where a convolution's kernels find their tensors: each source as given or as a dense (or
block-diagonal) workspace copy, each gradient written to its tensor or to a dense (or
block-diagonal) workspace part first; and the workspace parts those take.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulator.acl import aclTensor
from simulator.aclnn import Workspace, WorkspacePart
from ..common import tensor_arg, workspace_arg

if TYPE_CHECKING:
    from .call import ConvBackwardCall, GradientWork


def add_part(workspace: Workspace, purpose: str, nbytes: int) -> WorkspacePart:
    """A workspace part of at least 32 B (one block), so every part has an address of its own."""
    return workspace.add(purpose, max(int(nbytes), 32))


@dataclass
class Sources:
    """Where the kernels read gradOutput, input and weight: the tensor itself when it is
    contiguous, else a dense workspace copy that a Contiguous launch fills first."""
    copies: list              # (name, view, workspace part), in launch order
    places: dict              # name -> ("tensor", tensor) | ("ws", part, dtype); "weight:given" where the
                              # weight is read block-diagonal from the workspace (enlarged groups)

    def arg(self, name: str, ws: int):
        place = self.places[name]
        if place[0] == "tensor":
            t = place[1]
            return tensor_arg(t, name) + t.offset
        return workspace_arg(ws, place[1], place[2], f"workspace:{name}")


def plan_source_copies(call: ConvBackwardCall, work: GradientWork, workspace: Workspace) -> Sources:
    """The Contiguous copies of the non-contiguous sources some kernel reads ("gradOutput:cube"
    is the narrowed view the Cube reads when it differs from gradOutput)."""
    narrowed = work.cube_grad_output is not call.grad_output
    dx, dw, db = work.computed
    sources = Sources([], {})
    for name, t, needed in (("gradOutput", call.grad_output, db or (not narrowed and (dx or dw))),
                            ("gradOutput:cube", work.cube_grad_output, narrowed and (dx or dw)),
                            ("input", call.input, dw), ("weight", call.weight, dx),
                            ("bias", call.bias, call.bias is not None)):
        if not needed or t.numel() == 0:
            continue
        if t.is_contiguous():
            sources.places[name] = ("tensor", t)
            continue
        copy = add_part(workspace, f"contiguous copy of gradOutput's first {t.viewDims[-1]} columns (the ones the "
                                    f"windows read)" if name == "gradOutput:cube"
                         else f"contiguous copy of {name} (non-contiguous view)", t.numel() * t.itemsize)
        sources.copies.append((name, t, copy))
        sources.places[name] = ("ws", copy, t.dtype)
    if call.enlarge > 1 and dx and call.weight.numel():
        sources.places["weight:given"] = sources.places["weight"]
        part = enlarged_part(workspace, "weight", call.weight, call.enlarge)
        sources.places["weight"] = ("ws", part, call.weight.dtype)
    return sources


def enlarged_part(workspace: Workspace, name: str, t: aclTensor, E: int) -> WorkspacePart:
    return add_part(workspace, f"{name}, {E} groups to a Cube group (block-diagonal)", t.numel() * E * t.itemsize)


@dataclass
class Outputs:
    """Where the launches write each gradient: the tensor, or a dense workspace part that a
    ViewCopy then scatters into the tensor's non-contiguous view."""
    tensors: dict             # gradInput / gradWeight / gradBias -> aclTensor | None
    dense: dict               # name -> workspace part, for the non-contiguous ones
    enlarged: WorkspacePart | None = None   # gradWeight block-diagonal, before its diagonal is taken out

    def arg(self, name: str, ws: int):
        """Where `name` ends: its tensor, or its dense part before the write-back. (The Cube's
        gradWeight goes to `cube_grad_weight` first.)"""
        t = self.tensors[name]
        if name in self.dense:
            return workspace_arg(ws, self.dense[name], t.dtype, f"workspace:{name}")
        return tensor_arg(t, name) + t.offset

    def cube_grad_weight(self, ws: int):
        """Where the gradWeight epilogue writes: the block-diagonal part for enlarged groups."""
        if self.enlarged is None:
            return self.arg("gradWeight", ws)
        return workspace_arg(ws, self.enlarged, self.tensors["gradWeight"].dtype, "workspace:gradWeight enlarged")


def plan_dense_outputs(call: ConvBackwardCall, work: GradientWork, workspace: Workspace) -> Outputs:
    outputs = Outputs({"gradInput": call.grad_input, "gradWeight": call.grad_weight,
                        "gradBias": call.grad_bias}, {})
    for requested, (name, t) in zip(work.requested, outputs.tensors.items()):
        if requested and t.numel() > 0 and not t.is_contiguous():
            outputs.dense[name] = add_part(workspace, f"{name} dense, before the strided write-back",
                                            t.numel() * t.itemsize)
    if call.enlarge > 1 and work.computed[1] and work.uses_cube:
        outputs.enlarged = enlarged_part(workspace, "gradWeight", call.grad_weight, call.enlarge)
    return outputs
