"""The micro-program language: Ascend C's vocabulary, in Python.

A kernel body is a plain Python function that the machine runs once per block. Inside it, the
names below issue instructions to the block's core, exactly where Ascend C's would:

    pipe = TPipe()
    inQ = TQue(TPosition.VECIN, BUFFER_NUM)
    pipe.InitBuffer(inQ, BUFFER_NUM, tile * 4)
    xGm = GlobalTensor(np.float32); xGm.SetGlobalBuffer(x + offset, length)
    for i in range(tiles):
        t = inQ.AllocTensor(np.float32); DataCopy(t, xGm[i * tile], tile); inQ.EnQue(t)
        t = inQ.DeQue(np.float32); Exp(t, t, tile); ...

Queues imply their synchronisation (EnQue sets, DeQue waits, AllocTensor waits, FreeTensor sets);
SetFlag / WaitFlag / PipeBarrier are there for those who want them. Every capacity, alignment and
bound is checked where the instruction is written, and the error names the core, the pipe and the
instruction. See docs/KERNELS.md.
"""
from .base import *  # noqa: F401,F403
from .base import __all__ as _base_all
from .copy import *  # noqa: F401,F403
from .copy import __all__ as _copy_all
from .vector import *  # noqa: F401,F403
from .vector import __all__ as _vector_all
from .cube import *  # noqa: F401,F403
from .cube import __all__ as _cube_all
from .indirect import DataCopyPadIndirect  # noqa: F401
from .loop import Loop  # noqa: F401
from .loop_audit import audit_loops  # noqa: F401

__all__ = _base_all + _copy_all + _vector_all + _cube_all + ["DataCopyPadIndirect", "Loop"]
