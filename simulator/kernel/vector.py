"""Vector instructions (PIPE_V): cost = start-up + repeats x cycles per repeat, from the profile."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..enums import dtype_name
from ..program import COMPUTE, Instr
from ..recorder import current_context
from .base import PIPE_V, LocalTensor, RoundMode, _fault
from .operands import local_extent, local_operand, memo_emit, memo_lookup, require_pipe


def _operand(t, n: int, name: str, too_big: str) -> None:
    """A vector operand: a LocalTensor in UB holding n elements (n > 0). `too_big` is formatted
    with t and n only when it is the fault (a tensor's repr costs more than the instruction)."""
    if not isinstance(t, LocalTensor):
        raise _fault(PIPE_V, f"{name}: operands must be LocalTensors in UB, got {type(t).__name__}")
    if t.buffer != "UB":
        raise _fault(PIPE_V, f"{name}: vector operands live in UB, not {t.buffer}")
    if n > t.size:
        raise _fault(PIPE_V, f"{name}: {too_big.format(t=t, n=n)} ({t.size} elements)")
    if n <= 0:
        raise _fault(PIPE_V, f"{name}: count {n} must be positive")


def vector_cost(ctx, op_class: str, dtype, nbytes: int) -> float:
    """The profile's cycles for a vector instruction, memoised per device (a kernel repeats a few
    shapes thousands of times)."""
    key = (op_class, dtype, nbytes)
    cycles = ctx.memo.get(key)
    if cycles is None:
        name = dtype if isinstance(dtype, str) else dtype_name(dtype)
        cycles = ctx.memo[key] = ctx.profile.vector_cycles(op_class, name, nbytes)
    return cycles


def _vec(op_class: str, name: str, dst: LocalTensor, srcs: tuple, count: int | None, compute,
         cost_dtype=None) -> None:
    ctx = current_context()
    tensors = (dst,) + srcs
    n = dst.size if count is None else int(count)
    for t in tensors:
        _operand(t, n, name, "count {n} exceeds the operand {t!r}")
    nbytes = n * max([t.dtype.itemsize for t in tensors])
    cycles = vector_cost(ctx, op_class, cost_dtype or dst.dtype, nbytes)
    if ctx.functional:
        def fn():
            compute(dst.view(ctx, n), *[s.view(ctx, n) for s in srcs])
    else:
        fn = None
    ctx.emit(Instr("PIPE_V", name, COMPUTE, cycles, None, 0, 0, tuple([s.span(n) for s in srcs]),
                   (dst.span(n),), fn, None, (dst, *srcs, n)))      # (positional: cheaper)


def _binary(op_class, name, ufunc):
    def op(dst: LocalTensor, src0: LocalTensor, src1: LocalTensor, count: int | None = None,
           repeatTimes: int | None = None, repeatParams: "BinaryRepeatParams | None" = None):
        """count elements; or the repeat form: count is the mask (elements a repeat), repeat k's
        operands RepStride x 32 B after repeat k-1's (repeatParams)."""
        if src0.dtype != dst.dtype or src1.dtype != dst.dtype:
            raise _fault(PIPE_V, f"{name}: operand dtypes differ ({dst!r}, {src0!r}, {src1!r})")
        if repeatTimes is None:
            _vec(op_class, name, dst, (src0, src1), count, lambda d, a, b: ufunc(a, b, out=d))
            return
        p = repeatParams or BinaryRepeatParams()
        mask, repeat = int(count), int(repeatTimes)
        ((id_, nd), (i0, n0), (i1, n1)), _ = _repeat_form(
            name, (dst, src0, src1), mask, repeat, (p.dstRepStride, p.src0RepStride, p.src1RepStride),
            (p.dstBlkStride, p.src0BlkStride, p.src1BlkStride))

        def compute(ctx):
            a, b = src0.view(ctx, n0)[i0], src1.view(ctx, n1)[i1]
            dst.view(ctx, nd)[id_] = ufunc(a, b)
        _vec_spans(op_class, name, ((dst, nd),), ((src0, n0), (src1, n1)), repeat * 256, dst.dtype, compute)
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


def Broadcast(dst: LocalTensor, src: LocalTensor, dstShape: tuple, srcShape: tuple) -> None:
    """Ascend C's Broadcast (advanced API, two dimensions): src, of srcShape (a, 1) or (1, b),
    repeated along its unit axis into dst, of dstShape (a, b). Priced as a vector copy of dst's
    bytes: the API writes each destination element once (Brcb, then block copies)."""
    a, b = (int(d) for d in dstShape)
    if len(srcShape) != 2 or tuple(srcShape) not in ((a, 1), (1, b)):
        raise _fault(PIPE_V, f"Broadcast: srcShape {tuple(srcShape)} must be ({a}, 1) or (1, {b}) for dstShape ({a}, {b})")
    if src.dtype != dst.dtype:
        raise _fault(PIPE_V, f"Broadcast: operand dtypes differ ({dst!r}, {src!r})")
    n_src = int(srcShape[0]) * int(srcShape[1])

    def compute(ctx):
        dst.view(ctx, a * b).reshape(a, b)[...] = src.view(ctx, n_src).reshape(tuple(srcShape))
    _vec_spans("copy", "Broadcast", ((dst, a * b),), ((src, n_src),), a * b * dst.dtype.itemsize, dst.dtype, compute)


def WholeReduceSum(dst: LocalTensor, src: LocalTensor, mask: int, repeatTimes: int, dstRepStride: int,
                   srcBlkStride: int, srcRepStride: int) -> None:
    """Ascend C's WholeReduceSum (vcadd): repeat i sums the first `mask` elements of src's repeat
    i, which starts i x srcRepStride 32-B blocks in, into dst[i x dstRepStride]. A repeat reads at
    most 256 B; the sum runs in the operands' dtype, pairwise."""
    isz = src.dtype.itemsize
    lanes = 256 // isz
    mask, repeats = int(mask), int(repeatTimes)
    if not 0 < mask <= lanes or not 0 < repeats <= 255 or int(srcBlkStride) != 1:
        raise _fault(PIPE_V, f"WholeReduceSum: mask {mask} must be in [1, {lanes}], repeatTimes {repeats} in "
                             f"[1, 255] and srcBlkStride 1 (got {srcBlkStride})")
    if src.dtype != dst.dtype:
        raise _fault(PIPE_V, f"WholeReduceSum: operand dtypes differ ({dst!r}, {src!r})")
    step = int(srcRepStride) * 32 // isz
    n_src, n_dst = (repeats - 1) * step + mask, (repeats - 1) * int(dstRepStride) + 1

    def compute(ctx):
        a = src.view(ctx, n_src)
        rows = np.lib.stride_tricks.as_strided(a, (repeats, mask), (step * isz, isz))
        dst.view(ctx, n_dst)[::max(1, int(dstRepStride))][:repeats] = rows.sum(axis=1, dtype=src.dtype)
    _vec_spans("reduce_sum", "WholeReduceSum", ((dst, n_dst),), ((src, n_src),), repeats * 256, dst.dtype, compute)


_ROUNDERS = {RoundMode.CAST_FLOOR: np.floor, RoundMode.CAST_CEIL: np.ceil,
             RoundMode.CAST_TRUNC: np.trunc, RoundMode.CAST_RINT: np.rint,
             RoundMode.CAST_NONE: np.rint,
             RoundMode.CAST_ROUND: lambda a: np.sign(a) * np.floor(np.abs(a) + 0.5)}


def Cast(dst: LocalTensor, src: LocalTensor, roundMode: RoundMode = RoundMode.CAST_NONE,
         count: int | None = None) -> None:
    """Convert between dtypes. Narrowing float casts round to nearest even (CAST_NONE/CAST_RINT);
    casts to integers apply the round mode and saturate at the integer's range [ASSUMPTION: the
    vector unit's conversions saturate; numpy's own past the range differs by platform]."""
    to_int = dst.dtype.kind in "iu"
    if not to_int and roundMode not in (RoundMode.CAST_NONE, RoundMode.CAST_RINT) \
            and dst.dtype.itemsize < src.dtype.itemsize:
        raise _fault(PIPE_V, f"Cast: round mode {roundMode.name} for float narrowing is not modelled")

    def conv(d, a):
        if to_int:
            info = np.iinfo(d.dtype)        # (float64's largest below 2^63 for INT64)
            hi = float(info.max) if info.bits < 53 else np.nextafter(float(info.max), 0.0)
            d[...] = np.clip(_ROUNDERS[roundMode](a.astype(np.float64)), float(info.min), hi).astype(d.dtype)
        else:
            d[...] = a.astype(d.dtype)
    # repeats of 256 B of the wider side; a profile may price each direction ("conv.FLOAT16>FLOAT")
    _vec("conv", "Cast", dst, (src,), count, conv, cost_dtype=f"{dtype_name(src.dtype)}>{dtype_name(dst.dtype)}")


# ---- compare / select: bit masks beside their data ------------------------------------------
class CMPMODE(Enum):
    """Ascend C's comparison modes for Compare / CompareScalar."""
    LT = "lt"
    GT = "gt"
    EQ = "eq"
    LE = "le"
    GE = "ge"
    NE = "ne"


class SELMODE(Enum):
    """Ascend C's Select modes: mode 1 picks src0 or a scalar, mode 2 src0 or src1."""
    VSEL_CMPMASK_SPR = 0
    VSEL_TENSOR_SCALAR_MODE = 1
    VSEL_TENSOR_TENSOR_MODE = 2


_CMP = {CMPMODE.LT: np.less, CMPMODE.GT: np.greater, CMPMODE.EQ: np.equal,
        CMPMODE.LE: np.less_equal, CMPMODE.GE: np.greater_equal, CMPMODE.NE: np.not_equal}


def _vec_spans(op_class: str, name: str, writes: tuple, reads: tuple, nbytes: int, cost_dtype,
               compute) -> None:
    """Like _vec, for instructions whose operands have different element counts (a bit mask
    beside its data): `writes` / `reads` are (LocalTensor, elements) pairs and
    compute(ctx) runs the numpy effect."""
    ctx = current_context()
    for t, n in writes + reads:
        _operand(t, n, name, "needs {n} elements of {t!r}")
    cycles = vector_cost(ctx, op_class, cost_dtype, nbytes)
    if ctx.functional:
        def fn():
            compute(ctx)
    else:
        fn = None
    ctx.emit(Instr("PIPE_V", name, COMPUTE, cycles, path=None,
                   reads=tuple(t.span(n) for t, n in reads),
                   writes=tuple(t.span(n) for t, n in writes), fn=fn,
                   operands=tuple(t for t, _ in writes + reads)))


def _mask_bytes(count: int) -> int:
    return -(-int(count) // 8)


def _check_mask(name: str, mask: LocalTensor) -> None:
    if mask.dtype.itemsize != 1 or mask.dtype.kind not in "ui":
        raise _fault(PIPE_V, f"{name}: the mask must be a uint8 tensor, got {mask!r}")


@dataclass(frozen=True)
class BinaryRepeatParams:
    """The repeat form's strides, in 32-byte blocks: between repeats (RepStride) and between the
    blocks of one repeat (BlkStride; only 1, contiguous, is modelled)."""
    dstBlkStride: int = 1
    src0BlkStride: int = 1
    src1BlkStride: int = 1
    dstRepStride: int = 8
    src0RepStride: int = 8
    src1RepStride: int = 8


def _repeat_form(name: str, tensors: tuple, mask: int, repeat: int, rep_strides: tuple, blk_strides: tuple):
    """Per operand (index array of its elements, extent in elements) for `repeat` repeats of
    `mask` elements each, repeat k starting rep_stride * 32 bytes after repeat k-1."""
    if any(int(b) != 1 for b in blk_strides):
        raise _fault(PIPE_V, f"{name}: block strides other than 1 are not modelled")
    if any(not 0 <= int(r) <= 255 for r in rep_strides):
        raise _fault(PIPE_V, f"{name}: repeat strides {list(rep_strides)} must be 0..255 blocks (8 bits)")
    width = 256 // max(t.dtype.itemsize for t in tensors)
    if not 0 < mask <= width or not 0 < repeat <= 255:
        raise _fault(PIPE_V, f"{name}: mask {mask} must be 1..{width} and repeatTimes {repeat} 1..255")
    out = []
    for t, rep in zip(tensors, rep_strides):
        step = int(rep) * 32 // t.dtype.itemsize
        index = (np.arange(repeat)[:, None] * step + np.arange(mask)[None, :]).ravel()
        out.append((index, (repeat - 1) * step + mask))
    return out, width


def Compare(dst: LocalTensor, src0: LocalTensor, src1: LocalTensor, cmpMode: CMPMODE,
            count: int, repeatTimes: int | None = None, repeatParams: BinaryRepeatParams | None = None) -> None:
    """dst (uint8 bit mask, element i -> bit i % 8 of byte i // 8) = src0 <cmpMode> src1. The
    repeat form (count is then the mask: elements per repeat, with repeatTimes and repeatParams)
    compares repeat k's elements at its strided addresses; its bits start at bit k x (256 B /
    the element size), as the hardware packs one repeat's result."""
    if src0.dtype != src1.dtype:
        raise _fault(PIPE_V, f"Compare: operand dtypes differ ({src0!r}, {src1!r})")
    _check_mask("Compare", dst)
    op = _CMP[CMPMODE(cmpMode)]
    if repeatTimes is not None:
        p = repeatParams or BinaryRepeatParams()
        mask, repeat = int(count), int(repeatTimes)
        ((i0, n0), (i1, n1)), width = _repeat_form("Compare", (src0, src1), mask, repeat,
                                                   (p.src0RepStride, p.src1RepStride),
                                                   (p.src0BlkStride, p.src1BlkStride))
        nbits = repeat * width

        def compute(ctx):
            bits = np.zeros((repeat, width), bool)
            bits[:, :mask] = op(src0.view(ctx, n0)[i0], src1.view(ctx, n1)[i1]).reshape(repeat, mask)
            dst.view(ctx, _mask_bytes(nbits))[...] = np.packbits(bits.ravel(), bitorder="little")
        _vec_spans("cmp", "Compare", ((dst, _mask_bytes(nbits)),), ((src0, n0), (src1, n1)), repeat * 256,
                   src0.dtype, compute)
        return
    n = int(count)

    def compute(ctx):
        bits = op(src0.view(ctx, n), src1.view(ctx, n))
        dst.view(ctx, _mask_bytes(n))[...] = np.packbits(bits, bitorder="little")
    _vec_spans("cmp", "Compare", ((dst, _mask_bytes(n)),), ((src0, n), (src1, n)),
               n * src0.dtype.itemsize, src0.dtype, compute)


def CompareScalar(dst: LocalTensor, src0: LocalTensor, src1Scalar, cmpMode: CMPMODE,
                  count: int) -> None:
    """dst (uint8 bit mask) = src0 <cmpMode> scalar."""
    _check_mask("CompareScalar", dst)
    n, op = int(count), _CMP[CMPMODE(cmpMode)]
    s = src0.dtype.type(src1Scalar)

    def compute(ctx):
        bits = op(src0.view(ctx, n), s)
        dst.view(ctx, _mask_bytes(n))[...] = np.packbits(bits, bitorder="little")
    _vec_spans("cmp", "CompareScalar", ((dst, _mask_bytes(n)),), ((src0, n),),
               n * src0.dtype.itemsize, src0.dtype, compute)


def Select(dst: LocalTensor, selMask: LocalTensor, src0: LocalTensor, src1, selMode: SELMODE,
           count: int, repeatTimes: int | None = None, repeatParams: BinaryRepeatParams | None = None) -> None:
    """dst[i] = src0[i] where bit i of selMask is set, else src1[i] (VSEL_TENSOR_TENSOR_MODE) or
    the scalar src1 (VSEL_TENSOR_SCALAR_MODE). The repeat form (count is the mask, with
    repeatTimes and repeatParams) reads repeat k's bits from bit k x (256 B / the element size),
    as Compare's repeat form writes them."""
    _check_mask("Select", selMask)
    mode = SELMODE(selMode)
    if src0.dtype != dst.dtype:
        raise _fault(PIPE_V, f"Select: operand dtypes differ ({dst!r}, {src0!r})")
    tensor_mode = mode is SELMODE.VSEL_TENSOR_TENSOR_MODE
    if tensor_mode:
        if not isinstance(src1, LocalTensor) or src1.dtype != dst.dtype:
            raise _fault(PIPE_V, f"Select: tensor-tensor mode needs src1 a {dst.dtype} LocalTensor")
    elif mode is SELMODE.VSEL_TENSOR_SCALAR_MODE:
        if isinstance(src1, LocalTensor):
            raise _fault(PIPE_V, "Select: tensor-scalar mode takes a scalar src1")
        scalar = dst.dtype.type(src1)
    else:
        raise _fault(PIPE_V, f"Select: mode {mode.name} is not modelled")
    if repeatTimes is not None:
        p = repeatParams or BinaryRepeatParams()
        mask, repeat = int(count), int(repeatTimes)
        ops = (dst, src0) + ((src1,) if tensor_mode else ())
        forms, width = _repeat_form("Select", ops, mask, repeat,
                                    (p.dstRepStride, p.src0RepStride, p.src1RepStride)[:len(ops)],
                                    (p.dstBlkStride, p.src0BlkStride, p.src1BlkStride)[:len(ops)])
        (id_, nd), (i0, n0) = forms[0], forms[1]
        nbits = repeat * width
        reads = [(selMask, _mask_bytes(nbits)), (src0, n0)] + ([(src1, forms[2][1])] if tensor_mode else [])

        def compute(ctx):
            bits = np.unpackbits(selMask.view(ctx, _mask_bytes(nbits)), bitorder="little")[:nbits]
            bits = bits.reshape(repeat, width)[:, :mask].ravel().astype(bool)
            other = src1.view(ctx, forms[2][1])[forms[2][0]] if tensor_mode else scalar
            out = dst.view(ctx, nd)
            out[id_] = np.where(bits, src0.view(ctx, n0)[i0], other)
        _vec_spans("select", "Select", ((dst, nd),), tuple(reads), repeat * 256, dst.dtype, compute)
        return
    n = int(count)
    reads = [(selMask, _mask_bytes(n)), (src0, n)] + ([(src1, n)] if tensor_mode else [])

    def compute(ctx):
        bits = np.unpackbits(selMask.view(ctx, _mask_bytes(n)), bitorder="little")[:n].astype(bool)
        other = src1.view(ctx, n) if tensor_mode else scalar
        dst.view(ctx, n)[...] = np.where(bits, src0.view(ctx, n), other)
    _vec_spans("select", "Select", ((dst, n),), tuple(reads), n * dst.dtype.itemsize, dst.dtype,
               compute)


# ---- Transpose (UB, PIPE_V): NCHW <-> NHWC, from which NC1HWC0 (NCHW2NHWC on (N*C1, C0, H, W))
# and FRACTAL_Z weights are built; it shares the Cube instructions' record-time memo
class TransposeType(Enum):
    TRANSPOSE_NCHW2NHWC = 1
    TRANSPOSE_NHWC2NCHW = 2


@dataclass
class TransposeParamsExt:
    nSize: int = 1
    cSize: int = 1
    hSize: int = 1
    wSize: int = 1
    transposeType: TransposeType = TransposeType.TRANSPOSE_NCHW2NHWC


def Transpose(dst: LocalTensor, src: LocalTensor, sharedTmpBuffer: LocalTensor | None = None,
              params: TransposeParamsExt | None = None) -> None:
    """PIPE_V, UB -> UB: (N, C, H, W) <-> (N, H, W, C). NCHW -> NC1HWC0 is this transpose on
    (N*C1, C0, H, W); FRACTAL_Z weights are it followed by a strided DataCopy. Cost: the
    profile's vector class 'transpose' over the bytes moved."""
    ctx = current_context()
    pipe, name = "PIPE_V", "Transpose"
    key, repeat = memo_lookup(ctx, "transpose", (dst, src), params)
    if repeat:
        return
    require_pipe(pipe, name)
    if params is None:
        raise _fault(pipe, f"{name}: TransposeParamsExt is required")
    local_operand(src, ("UB",), pipe, name, "source")
    local_operand(dst, ("UB",), pipe, name, "destination")
    if src.dtype != dst.dtype:
        raise _fault(pipe, f"{name}: source {dtype_name(src.dtype)} and destination {dtype_name(dst.dtype)} differ")
    shape = tuple(int(x) for x in (params.nSize, params.cSize, params.hSize, params.wSize))
    if min(shape) < 1:
        raise _fault(pipe, f"{name}: sizes {shape} must be positive")
    count = int(np.prod(shape))
    nbytes = count * src.dtype.itemsize
    local_extent(src, src.offset + nbytes, pipe, name, "source")
    local_extent(dst, dst.offset + nbytes, pipe, name, "destination")
    lo, hi = sorted(((src.offset, src.offset + nbytes), (dst.offset, dst.offset + nbytes)))
    if lo[1] > hi[0]:
        raise _fault(pipe, f"{name}: source and destination overlap")
    cycles = vector_cost(ctx, "transpose", src.dtype, nbytes)
    to_nhwc = params.transposeType is TransposeType.TRANSPOSE_NCHW2NHWC
    n_, c_, h_, w_ = shape
    sdt, s0, sbuf, d0, dbuf = src.dtype, src.offset, src.buffer, dst.offset, dst.buffer

    def make(core):
        s = core.buffers[sbuf][s0:s0 + nbytes].view(sdt)
        d = core.buffers[dbuf][d0:d0 + nbytes].view(sdt)
        if to_nhwc:
            s, d = s.reshape(n_, c_, h_, w_), d.reshape(n_, h_, w_, c_)
            perm = (0, 2, 3, 1)
        else:
            s, d = s.reshape(n_, h_, w_, c_), d.reshape(n_, c_, h_, w_)
            perm = (0, 3, 1, 2)

        def fn():
            d[...] = s.transpose(perm)
        return fn
    memo_emit(ctx, key, make, pipe, name, COMPUTE, cycles, path=None, reads=(src.span(count),),
               writes=(dst.span(count),), operands=(dst, src, shape, params.transposeType.name))


__all__ = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Adds", "Muls", "Maxs", "Mins", "Exp", "Ln", "Abs",
           "Sqrt", "Relu", "Reciprocal", "Duplicate", "Copy", "Broadcast", "WholeReduceSum", "Cast",
           "CMPMODE", "SELMODE", "BinaryRepeatParams", "Compare", "CompareScalar", "Select",
           "TransposeType", "TransposeParamsExt", "Transpose"]
