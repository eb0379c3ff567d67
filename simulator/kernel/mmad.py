"""Mmad (PIPE_M): C (L0C, FP32 / INT32) += A (L0A, zZ) x B (L0B, zN) in the compute dtypes the chip's
Cube multiplies, with its numerics (exact step sums of depth k0, FP32 accumulation) and cost.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..enums import dtype_name
from ..program import COMPUTE
from ..recorder import current_context
from ..arith import ceil_div
from .base import LocalTensor, _fault, bfloat16, float32, half
from .operands import (BLOCK_BYTES, FRACTAL_BYTES, c0_of, hf32_round, int8, int32, local_extent, local_operand,
                       memo_emit, memo_lookup, param_in_range, require_pipe)


@dataclass
class MmadParams:
    """C (m x n, L0C) = A (m x k, L0A) x B (k x n, L0B), or C += A x B when cmatrixInitVal is
    False. m, n, k in elements, each in [1, 4095]."""
    m: int = 0
    n: int = 0
    k: int = 0
    isBias: bool = False
    fmOffset: int = 0
    enSsparse: bool = False
    enWinogradA: bool = False
    enWinogradB: bool = False
    unitFlag: int = 0
    cmatrixInitVal: bool = True
    cmatrixSource: bool = False
    kDirectionAlign: bool = False


def Mmad(dst: LocalTensor, fm: LocalTensor, filter: LocalTensor, params: MmadParams) -> None:
    """PIPE_M: C (CO1, NZ) = A (A2, zZ) x B (B2, zN) [+ C]. Inputs are rounded to the compute
    dtype (HF32 under SetHF32Mode(True)); products are exact and each k0-deep fractal step is
    summed exactly, then added to the fp32 accumulator (fp32 accumulation across steps;
    int32 for int8). Exactly k of the depth is used; C is written in whole 16 x 16 fractals
    (its rows beyond m and columns beyond n come from the padding of A and B), and the
    sanitizer requires only A's first m rows and B's first n columns to have been written."""
    ctx = current_context()
    pipe, name = "PIPE_M", "Mmad"
    key, repeat = memo_lookup(ctx, "mmad", (dst, fm, filter), params)
    if repeat:
        return
    m, n, k, cname, acc = _mmad_operands(ctx, dst, fm, filter, params, pipe, name)
    k0 = c0_of(fm.dtype)
    m1, n1, k1 = ceil_div(m, 16), ceil_div(n, 16), ceil_div(k, k0)
    a_bytes, b_bytes = m1 * k1 * FRACTAL_BYTES, k1 * n1 * FRACTAL_BYTES
    c_bytes = n1 * m1 * 16 * 16 * acc.itemsize
    local_extent(fm, fm.offset + a_bytes, pipe, name, "left matrix (A2)")
    local_extent(filter, filter.offset + b_bytes, pipe, name, "right matrix (B2)")
    local_extent(dst, dst.offset + c_bytes, pipe, name, "result (CO1)")
    init = bool(params.cmatrixInitVal)
    reads = _mmad_reads(dst, fm, filter, m, n, k1, init, acc.itemsize)
    cycles = mmad_cycles(ctx.profile, m, n, k, cname)
    make = _mmad_effect(dst, fm, filter, m1, n1, k1, k0, k, a_bytes, b_bytes, c_bytes, acc, cname, init)
    # the Cube writes whole 16 x 16 fractals of C (rows beyond m and columns beyond n hold
    # whatever the padding of A and B gives)
    memo_emit(ctx, key, make, pipe, name, COMPUTE, cycles, path=None, reads=reads,
              writes=(("L0C", dst.offset, dst.offset + c_bytes),),
              operands=(dst, fm, filter, f"m={m} n={n} k={k}", cname, "init" if init else "acc"))


def mmad_cycles(profile, m: int, n: int, k: int, dtype_name_: str) -> float:
    """Cube cycles of one Mmad: start-up plus whole 16 x k0 x 16 fractal steps at the profile's
    MAC rate for the dtype (k0 = 16 for 16-bit, 8 for 32-bit, 32 for int8)."""
    k0 = {"FLOAT16": 16, "BF16": 16, "FLOAT": 8, "HF32": 8, "INT8": 32}[dtype_name_]
    macs = ceil_div(m, 16) * ceil_div(n, 16) * ceil_div(k, k0) * 16 * 16 * k0
    return profile.cube.startup_cycles + macs / profile.cube.macs_per_cycle[dtype_name_]


def cube_dtype(a_dtype, b_dtype, hf32: bool = False) -> str | None:
    """The profile name of the Cube's compute dtype for these input dtypes (None if none)."""
    found = _CUBE_DTYPES.get((np.dtype(a_dtype), np.dtype(b_dtype)))
    if found is None:
        return None
    return "HF32" if (found[0] == "FLOAT" and hf32) else found[0]


_CUBE_DTYPES = {(half, half): ("FLOAT16", float32), (bfloat16, bfloat16): ("BF16", float32),
                (float32, float32): ("FLOAT", float32), (int8, int8): ("INT8", int32)}


def _mmad_operands(ctx, dst, fm, filter, params: MmadParams, pipe: str, name: str) -> tuple:
    """Check an Mmad's operands, sizes and dtypes; returns (m, n, k, the profile's compute dtype
    name, the accumulator dtype)."""
    require_pipe(pipe, name)
    local_operand(fm, ("L0A",), pipe, name, "left matrix (A2)")
    local_operand(filter, ("L0B",), pipe, name, "right matrix (B2)")
    local_operand(dst, ("L0C",), pipe, name, "result (CO1)")
    if params.isBias or params.enSsparse or params.enWinogradA or params.enWinogradB or params.cmatrixSource:
        raise _fault(pipe, f"{name}: bias, sparsity, winograd and cmatrixSource are not modelled")
    m = param_in_range(params.m, 1, 4095, pipe, name, "m")
    n = param_in_range(params.n, 1, 4095, pipe, name, "n")
    k = param_in_range(params.k, 1, 4095, pipe, name, "k")
    hf32 = bool(getattr(ctx, "hf32_mode", False))
    found = _CUBE_DTYPES.get((fm.dtype, filter.dtype))
    if found is None:
        raise _fault(pipe, f"{name}: no cube mode multiplies {dtype_name(fm.dtype)} x "
                     f"{dtype_name(filter.dtype)} (inputs must be both half, bfloat16, float or int8)")
    cname, acc = found
    if cname == "FLOAT" and hf32:
        cname = "HF32"
    rates = ctx.profile.cube.macs_per_cycle
    if cname not in rates:
        raise _fault(pipe, f"{name}: {cname} inputs are not supported by the Cube of "
                     f"{ctx.profile.soc_version} (it multiplies {', '.join(sorted(rates))})")
    if dst.dtype != acc:
        raise _fault(pipe, f"{name}: the result of a {cname} Mmad is {dtype_name(acc)} in L0C, "
                     f"not {dtype_name(dst.dtype)}")
    return m, n, k, cname, acc


def _mmad_reads(dst, fm, filter, m: int, n: int, k1: int, init: bool, acc_size: int) -> tuple:
    """The sanitizer's record of an Mmad's reads: the 32-B rows of the fractals that hold real
    rows of A and columns of B, and (accumulating) the rows of C it adds to."""
    m1, n1 = ceil_div(m, 16), ceil_div(n, 16)
    a_bytes, b_bytes = m1 * k1 * FRACTAL_BYTES, k1 * n1 * FRACTAL_BYTES
    if m % 16 == 0:
        reads = [("L0A", fm.offset, fm.offset + a_bytes)]
    else:
        reads = [("L0A", fm.offset, fm.offset + (m1 - 1) * k1 * FRACTAL_BYTES)] if m1 > 1 else []
        tail = (m % 16) * BLOCK_BYTES
        reads += [("L0A", o, o + tail) for o in
                  range(fm.offset + (m1 - 1) * k1 * FRACTAL_BYTES, fm.offset + a_bytes, FRACTAL_BYTES)]
    if n % 16 == 0:
        reads.append(("L0B", filter.offset, filter.offset + b_bytes))
    else:
        tail = (n % 16) * BLOCK_BYTES
        for j in range(k1):
            o = filter.offset + j * n1 * FRACTAL_BYTES
            if n1 > 1:
                reads.append(("L0B", o, o + (n1 - 1) * FRACTAL_BYTES))
            o += (n1 - 1) * FRACTAL_BYTES
            reads.append(("L0B", o, o + tail))
    if not init:
        c_row = 16 * acc_size
        if m == m1 * 16:          # whole strips: one contiguous span
            reads.append(("L0C", dst.offset, dst.offset + n1 * m1 * 16 * c_row))
        else:
            reads.extend(("L0C", dst.offset + l * m1 * 16 * c_row, dst.offset + l * m1 * 16 * c_row + m * c_row)
                         for l in range(n1))
    return tuple(reads)


def _mmad_effect(dst, fm, filter, m1, n1, k1, k0, k, a_bytes, b_bytes, c_bytes, acc, cname: str, init: bool):
    """make(core) for an Mmad: views of the three fractal layouts, and _mmad_steps (whole k0
    steps of a float type) or _mmad_math on them."""
    at, bt = fm.dtype, filter.dtype
    ao, bo, co = fm.offset, filter.offset, dst.offset

    def make(core):
        a_raw = core.buffers["L0A"][ao:ao + a_bytes].view(at).reshape(m1, k1, 16, k0)
        b_raw = core.buffers["L0B"][bo:bo + b_bytes].view(bt).reshape(k1, n1, 16, k0)
        cview = core.buffers["L0C"][co:co + c_bytes].view(acc).reshape(n1, m1 * 16, 16)
        if cname != "INT8" and k == k1 * k0:
            # whole k0 steps: the common case, no padding of k (padding rows may hold anything:
            # Device.run ignores floating-point warnings for every effect)
            def fn():
                _mmad_steps(a_raw, b_raw, cview, cname == "HF32", init)
            return fn

        def fn():
            a = a_raw.transpose(0, 2, 1, 3).reshape(m1 * 16, k1 * k0)[:, :k]
            b = b_raw.transpose(0, 3, 1, 2).reshape(k1 * k0, n1 * 16)[:k]
            c = cview.transpose(1, 0, 2).reshape(m1 * 16, n1 * 16)
            out = _mmad_math(a, b, c, cname, k0, init)
            cview[...] = out.reshape(m1 * 16, n1, 16).transpose(1, 0, 2)
        return fn
    return make


def _mmad_steps(a_raw, b_raw, cview, hf32: bool, init: bool) -> None:
    """_mmad_math's float arithmetic straight on the fractal layouts, for k a whole number of
    k0 steps: A2 (m1, k1, 16, k0), B2 (k1, n1, 16, k0), C (n1, m1*16, 16) in place. Bit for bit
    the same as _mmad_math: each step exact in float64, rounded to float32, added in order."""
    m1, k1, _, k0 = a_raw.shape
    a = a_raw.transpose(1, 0, 2, 3).reshape(k1, m1 * 16, k0)
    b = b_raw.transpose(0, 3, 1, 2).reshape(k1, k0, -1)
    if hf32:
        a, b = hf32_round(a), hf32_round(b)
    steps = np.matmul(a, b, dtype=np.float64).astype(np.float32)
    first = steps[0].reshape(m1 * 16, -1, 16)
    if init:
        first += 0.0                              # as 0 + step: a -0.0 step gives +0.0
    else:
        first += cview.transpose(1, 0, 2)         # C + step 0, in NZ order
    # the steps in order (np.add.reduce over the outer axis adds row by row; tested bit-exact)
    cview[...] = np.add.reduce(steps, axis=0).reshape(m1 * 16, -1, 16).transpose(1, 0, 2)


def _mmad_math(a, b, c, cname: str, k0: int, init: bool) -> np.ndarray:
    """The Cube's arithmetic on a (rows x k), b (k x cols), c (rows x cols), whole fractals."""
    m, k = a.shape
    n = b.shape[1]
    n16 = c.shape[1]
    k1 = ceil_div(k, k0)
    if cname == "INT8":
        prod = a.astype(np.int64) @ b.astype(np.int64)
        out = np.zeros((m, n16), dtype=np.int64)
        out[:, :n] = prod
        if not init:
            out += c.astype(np.int64)
        return out.astype(np.int32)           # wraps like an int32 accumulator
    if cname == "HF32":
        a, b = hf32_round(a), hf32_round(b)
    a64 = np.zeros((m, k1 * k0))
    a64[:, :k] = a.astype(np.float64)
    b64 = np.zeros((k1 * k0, n16))
    b64[:k, :n] = b.astype(np.float64)
    # each k0-deep step in float64 (exact products; batched BLAS), rounded to float32 per step
    steps = np.matmul(a64.reshape(m, k1, k0).transpose(1, 0, 2), b64.reshape(k1, k0, n16)).astype(np.float32)
    acc = np.zeros((m, n16), dtype=np.float32) if init else c.astype(np.float32).copy()
    for j in range(k1):
        acc += steps[j]
    return acc
