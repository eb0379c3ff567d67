"""A composed operator's launches, as CANN's aclnn layer strings l0 kernels together: each step a
flat elementwise kernel (a Cast, Mul, ...), a strided copy (SplitV, ConcatD, a transpose), a
Contiguous / ViewCopy of a user's view, or any other launch, reading and writing named buffers:
a user's tensor or a part of the workspace (sized at plan time, addressed at build time)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from simulator.acl import aclTensor
from simulator.aclnn import Workspace
from simulator.enums import ACL_OF, aclFormat
from simulator.program import KernelLaunch
from ..common import tensor_arg, view_copy_launch, workspace_arg
from .template import flat_job


class Chain:
    """The launches of a composed operator, in order."""

    def __init__(self, profile, forced: dict):
        self.profile, self.forced = profile, forced
        self.workspace = Workspace()
        self.steps = []          # (kind, label, details): built in order by build()
        self.parts = {}          # buffer name -> (WorkspacePart, dtype)
        self.facts = []

    def buffer(self, name: str, n: int, dtype) -> str:
        self.parts[name] = (self.workspace.add(name, n * np.dtype(dtype).itemsize), np.dtype(dtype))
        return name

    def flat(self, label: str, compute: str, ins: list, out, n: int, scalar: float = 0.0) -> None:
        """A flat kernel: ins and out are (buffer name or aclTensor, element offset)."""
        dtypes = tuple(self.dtype(b) for b, _ in ins)
        job, blocks = flat_job(compute, dtypes, self.dtype(out[0]), n, self.profile, self.forced, scalar)
        self.steps.append(("flat", label, (ins, out, job, blocks)))
        self.facts.append(f"{label} {blocks}x{job.tile}")

    def copy(self, label: str, view_of, shape, strides, dense: str, gather: bool) -> None:
        """A strided copy between a dense buffer and a view (shape, strides) of `view_of`."""
        self.steps.append(("copy", label, (view_of, tuple(shape), tuple(strides), dense, gather)))

    def contiguous(self, t: aclTensor, name: str, dense: str) -> None:
        self.steps.append(("view", name, (t, dense, True)))

    def dense_source(self, t: aclTensor, name: str):
        """t itself where it is contiguous, else a buffer its Contiguous copies it into."""
        if t.is_contiguous():
            return t
        dense = self.buffer(f"{name} contiguous", t.numel(), t.dtype)
        self.contiguous(t, name, dense)
        return dense

    def view_copy(self, t: aclTensor, name: str, dense: str) -> None:
        self.steps.append(("view", name, (t, dense, False)))

    def launch(self, make: Callable) -> None:
        """Any other launch: make(address of a buffer or tensor) -> KernelLaunch, at build time."""
        self.steps.append(("launch", "", make))

    def dtype(self, b) -> np.dtype:
        return b.dtype if isinstance(b, aclTensor) else self.parts[b][1]

    def _addr(self, ws: int, b, name: str = ""):
        if isinstance(b, aclTensor):
            return tensor_arg(b, name) + b.offset
        part, dtype = self.parts[b]
        return workspace_arg(ws, part, dtype, f"workspace:{b}")

    def _as_tensor(self, ws: int, b, shape, strides) -> aclTensor:
        if isinstance(b, aclTensor):
            return aclTensor(shape, b.dataType, strides, b.offset, b.format, b.storageDims, b.data)
        part, dtype = self.parts[b]
        return aclTensor(shape, ACL_OF[dtype], strides, 0, aclFormat.ACL_FORMAT_ND, (part.nbytes // dtype.itemsize,),
                         ws + part.offset)

    def build(self, ws: int) -> list[KernelLaunch]:
        launches = []
        for kind, label, d in self.steps:
            if kind == "flat":
                ins, (out, off), job, blocks = d
                args = tuple(self._addr(ws, b, label) + o for b, o in ins)
                launches.append(KernelLaunch(label, job.body, blocks, "vector",
                                             (args, self._addr(ws, out, label) + off, job)))
            elif kind == "launch":
                launches.append(d(lambda b, _ws=ws: self._addr(_ws, b)))
            elif kind == "copy":
                view_of, shape, strides, dense, gather = d
                view = self._as_tensor(ws, view_of, shape, strides)
                make, _ = view_copy_launch(view, label, self.profile, gather=gather, label=label)
                launches.append(make(self._addr(ws, dense)))
            else:
                t, dense, gather = d
                make, _ = view_copy_launch(t, label, self.profile, gather=gather)
                launches.append(make(self._addr(ws, dense)))
        return launches
