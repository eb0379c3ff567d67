"""Vector instructions (PIPE_V): cost = start-up + repeats x cycles per repeat, from the profile."""
from __future__ import annotations

import numpy as np

from ..enums import dtype_name
from ..machine import COMPUTE, Instr, current_context
from .base import PIPE_V, LocalTensor, RoundMode, _fault

def _vec(op_class: str, name: str, dst: LocalTensor, srcs: tuple, count: int | None, compute,
         cost_dtype=None) -> None:
    ctx = current_context()
    tensors = (dst,) + srcs
    n = dst.size if count is None else int(count)
    for t in tensors:
        if not isinstance(t, LocalTensor):
            raise _fault(PIPE_V, f"{name}: operands must be LocalTensors in UB, got {type(t).__name__}")
        if t.buffer != "UB":
            raise _fault(PIPE_V, f"{name}: vector operands live in UB, not {t.buffer}")
        if n > t.size:
            raise _fault(PIPE_V, f"{name}: count {n} exceeds the operand {t!r} ({t.size} elements)")
    if n <= 0:
        raise _fault(PIPE_V, f"{name}: count {n} must be positive")
    nbytes = n * max(t.dtype.itemsize for t in tensors)
    cycles = ctx.profile.vector_cycles(op_class, dtype_name(cost_dtype or dst.dtype), nbytes)
    fn = None
    if ctx.functional:
        def fn():
            compute(dst.view(ctx, n), *[s.view(ctx, n) for s in srcs])
    ctx.emit(Instr("PIPE_V", name, COMPUTE, cycles, path=None,
                   reads=tuple(s.span(n) for s in srcs), writes=(dst.span(n),), fn=fn,
                   operands=(dst, *srcs, n)))


def _binary(op_class, name, ufunc):
    def op(dst: LocalTensor, src0: LocalTensor, src1: LocalTensor, count: int | None = None):
        if src0.dtype != dst.dtype or src1.dtype != dst.dtype:
            raise _fault(PIPE_V, f"{name}: operand dtypes differ ({dst!r}, {src0!r}, {src1!r})")
        _vec(op_class, name, dst, (src0, src1), count, lambda d, a, b: ufunc(a, b, out=d))
    op.__name__ = name
    return op


def _unary(op_class, name, func):
    def op(dst: LocalTensor, src: LocalTensor, count: int | None = None):
        if src.dtype != dst.dtype:
            raise _fault(PIPE_V, f"{name}: operand dtypes differ ({dst!r}, {src!r})")
        _vec(op_class, name, dst, (src,), count, lambda d, a: func(a, d))
    op.__name__ = name
    return op


def _scalar_op(op_class, name, ufunc):
    def op(dst: LocalTensor, src: LocalTensor, scalar, count: int | None = None):
        if src.dtype != dst.dtype:
            raise _fault(PIPE_V, f"{name}: operand dtypes differ ({dst!r}, {src!r})")
        s = dst.dtype.type(scalar)
        _vec(op_class, name, dst, (src,), count, lambda d, a: ufunc(a, s, out=d))
    op.__name__ = name
    return op


Add = _binary("add", "Add", np.add)
Sub = _binary("sub", "Sub", np.subtract)
Mul = _binary("mul", "Mul", np.multiply)
Div = _binary("div", "Div", np.divide)
Max = _binary("max", "Max", np.maximum)
Min = _binary("min", "Min", np.minimum)
Adds = _scalar_op("adds", "Adds", np.add)
Muls = _scalar_op("muls", "Muls", np.multiply)
Maxs = _scalar_op("maxs", "Maxs", np.maximum)
Mins = _scalar_op("mins", "Mins", np.minimum)
Exp = _unary("exp", "Exp", lambda a, d: np.exp(a, out=d))
Ln = _unary("ln", "Ln", lambda a, d: np.log(a, out=d))
Abs = _unary("abs", "Abs", lambda a, d: np.abs(a, out=d))
Sqrt = _unary("sqrt", "Sqrt", lambda a, d: np.sqrt(a, out=d))
Relu = _unary("maxs", "Relu", lambda a, d: np.maximum(a, a.dtype.type(0), out=d))
Reciprocal = _unary("rec", "Reciprocal", lambda a, d: np.divide(a.dtype.type(1), a, out=d))


def Duplicate(dst: LocalTensor, scalar, count: int | None = None) -> None:
    s = dst.dtype.type(scalar)

    def fill(d):
        d[...] = s
    _vec("dup", "Duplicate", dst, (), count, fill)


def Copy(dst: LocalTensor, src: LocalTensor, count: int | None = None) -> None:
    """UB -> UB vector copy."""
    def copy(d, a):
        d[...] = a
    _vec("copy", "Copy", dst, (src,), count, copy)


_ROUNDERS = {RoundMode.CAST_FLOOR: np.floor, RoundMode.CAST_CEIL: np.ceil,
             RoundMode.CAST_TRUNC: np.trunc, RoundMode.CAST_RINT: np.rint,
             RoundMode.CAST_NONE: np.rint,
             RoundMode.CAST_ROUND: lambda a: np.sign(a) * np.floor(np.abs(a) + 0.5)}


def Cast(dst: LocalTensor, src: LocalTensor, roundMode: RoundMode = RoundMode.CAST_NONE,
         count: int | None = None) -> None:
    """Convert between dtypes. Narrowing float casts round to nearest even (CAST_NONE/CAST_RINT);
    casts to integers apply the round mode."""
    to_int = dst.dtype.kind in "iu"
    if not to_int and roundMode not in (RoundMode.CAST_NONE, RoundMode.CAST_RINT) \
            and dst.dtype.itemsize < src.dtype.itemsize:
        raise _fault(PIPE_V, f"Cast: round mode {roundMode.name} for float narrowing is not modelled")

    def conv(d, a):
        if to_int:
            d[...] = _ROUNDERS[roundMode](a.astype(np.float64)).astype(d.dtype)
        else:
            d[...] = a.astype(d.dtype)
    _vec("conv", "Cast", dst, (src,), count, conv,
         cost_dtype=dst.dtype if dst.dtype.itemsize >= src.dtype.itemsize else src.dtype)




__all__ = [
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Max",
    "Min",
    "Adds",
    "Muls",
    "Maxs",
    "Mins",
    "Exp",
    "Ln",
    "Abs",
    "Sqrt",
    "Relu",
    "Reciprocal",
    "Duplicate",
    "Copy",
    "Cast",
]
