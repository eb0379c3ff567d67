"""What the Cube's (and Transpose's) instructions share: operand checks (buffers, capacity, GM
extent, the pipe a core kind has), the record-time memo that lets a repeated pure instruction
reuse its checked cost, spans and effect factory (written once for every instruction family), and
HF32 rounding / SetHF32Mode.
"""
from __future__ import annotations

import numpy as np

from ..program import Instr
from ..recorder import current_context
from .base import GlobalTensor, LocalTensor, _fault


FRACTAL_BYTES = 512          # an L0A / L0B fractal, and load2d's unit


BLOCK_BYTES = 32             # a C0 row of a fractal, and the GM burst


int8 = np.dtype(np.int8)


int32 = np.dtype(np.int32)


def c0_of(dtype) -> int:
    """Elements in 32 bytes: the C0 of NZ / NC1HWC0 and the k0 of a cube fractal."""
    return BLOCK_BYTES // np.dtype(dtype).itemsize


def merge_spans(spans):
    """Merge touching (buffer, lo, hi) spans (for the sanitizer's record)."""
    out = []
    for b, lo, hi in sorted(spans):
        if out and out[-1][0] == b and out[-1][2] >= lo:
            if hi > out[-1][2]:
                out[-1] = (b, out[-1][1], hi)
        else:
            out.append((b, lo, hi))
    return tuple(out)


def local_operand(t, buffers, pipe, name, what):
    """The operand must be a LocalTensor in one of `buffers`, on a core that has that buffer."""
    ctx = current_context()
    if not isinstance(t, LocalTensor):
        raise _fault(pipe, f"{name}: {what} must be a LocalTensor in {'/'.join(buffers)}, "
                     f"got {type(t).__name__}")
    if t.buffer not in buffers:
        raise _fault(pipe, f"{name}: {what} {t!r} is in {t.buffer}; it must be in {'/'.join(buffers)}")
    if t.buffer not in ctx.core.kind.buffers:
        raise _fault(pipe, f"{name}: core kind {ctx.core.kind_name} has no {t.buffer}")
    align = ctx.profile.alignment[t.buffer]
    if t.offset % align:
        raise _fault(pipe, f"{name}: {what} {t!r} starts at {t.buffer} address {t.offset}, "
                     f"not {align}-byte aligned")


def local_extent(t: LocalTensor, hi: int, pipe, name, what) -> None:
    """Bytes [t.offset, hi) must lie in the tensor's window and in its buffer."""
    ctx = current_context()
    cap = ctx.core.kind.buffers[t.buffer]
    if hi > cap:
        raise _fault(pipe, f"{name}: {what} needs {t.buffer}[{t.offset}:{hi}] but {t.buffer} holds "
                     f"{cap} B (overflow)")
    end = t.offset + t.size * t.dtype.itemsize
    if hi > end:
        raise _fault(pipe, f"{name}: {what} needs {t.buffer}[{t.offset}:{hi}], beyond its tensor "
                     f"{t!r} (ends at {end})")


def require_pipe(pipe: str, name: str, hint: str = "") -> None:
    """The core running the instruction must have `pipe` (`hint` ends the fault's message)."""
    ctx = current_context()
    if pipe not in ctx.core.kind.pipes:
        raise _fault(pipe, f"{name} needs {pipe}, which core kind {ctx.core.kind_name} of "
                     f"{ctx.profile.soc_version} lacks{hint}")


def gm_check(g: GlobalTensor, lo: int, hi: int, pipe, name) -> int:
    """GM bytes [g + lo, g + hi) must lie in the extent the kernel was given; returns g's address."""
    if not isinstance(g, GlobalTensor):
        raise _fault(pipe, f"{name}: expected a GlobalTensor, got {type(g).__name__}")
    if g.ptr is None:
        raise _fault(pipe, f"{name}: GlobalTensor used before SetGlobalBuffer")
    a = g.ptr.addr
    if a + lo < g.ptr.base or a + hi > g.ptr.limit:
        raise _fault(pipe, f"{name}: touches {g.ptr.name}[{a + lo - g.ptr.base}:{a + hi - g.ptr.base}] "
                     f"(bytes) outside its extent [0:{g.ptr.limit - g.ptr.base}]")
    return a


def param_in_range(v, lo, hi, pipe, name, field) -> int:
    """The instruction parameter `field` as an int, which must lie in [lo, hi]."""
    v = int(v)
    if not lo <= v <= hi:
        raise _fault(pipe, f"{name}: {field} = {v} outside [{lo}, {hi}]")
    return v


_MEMO: dict = {}


_MEMO_PROFILES: dict = {}


_MEMO_MAX = 200_000


def memo_key(ctx, tag, tensors, params) -> tuple:
    scope = ctx.__dict__.get("memo_scope")
    if scope is None:
        prof = ctx.profile
        _MEMO_PROFILES.setdefault(id(prof), prof)      # keeps the id from being reused
        scope = ctx.memo_scope = (id(prof), ctx.core.kind_name, ctx.functional)
    return (tag, scope, ctx.__dict__.get("hf32_mode", False), params,
            *[(t.buffer, t.offset, t.size, t.dtype) for t in tensors])


def memo_lookup(ctx, tag: str, tensors: tuple, params) -> tuple:
    """(memo key, hit) for a Cube or Transpose instruction between LocalTensors: on a hit the
    instruction has been emitted again from the memo (its cost and effect built once), and the
    caller returns. GM operands and parameterless calls are never memoised (key None)."""
    if params is None:
        return None, False
    for t in tensors:
        if not isinstance(t, LocalTensor):
            return None, False
    key = memo_key(ctx, tag, tensors, tuple(params.__dict__.values()))
    return key, memo_hit(ctx, key)


def memo_hit(ctx, key) -> bool:
    if key is None:
        return False
    hit = _MEMO.get(key)
    if hit is None:
        return False
    args, kw, make = hit
    ctx.emit(Instr(*args, fn=memo_effect(ctx.core, key, make), **kw))
    return True


def memo_effect(core, key, make):
    """The functional effect of a memoised instruction on this core: built once per core and
    key (it closes over the core's buffers only), then shared by every repeat."""
    if make is None:
        return None
    fn = core.effects.get(key)
    if fn is None:
        if len(core.effects) >= 20_000:          # bounded: effects hold views and gather indices
            core.effects.clear()
        fn = core.effects[key] = make(core)
    return fn


def memo_emit(ctx, key, make, *args, **kw) -> None:
    """Emit the instruction; `make(core)` builds its functional effect (None in timing-only mode)."""
    if not ctx.functional:
        make = None
    if key is None:
        fn = make(ctx.core) if make is not None else None
    else:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[key] = (args, kw, make)
        fn = memo_effect(ctx.core, key, make)
    ctx.emit(Instr(*args, fn=fn, **kw))


HF32_MANTISSA_BITS = 11      # SPEC section 2: fp32 range, 11-bit mantissa (TF32 has 10)


def hf32_round(x) -> np.ndarray:
    """Round float32 values to HF32: sign, the 8-bit fp32 exponent and the top 11 of fp32's 23
    fraction bits, rounding to nearest, ties to even. Subnormals are rounded at the same bit
    position (no flush to zero); a value that rounds past the largest finite HF32 becomes inf;
    inf and NaN pass through. Returns float32 (the low 12 fraction bits are zero)."""
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    drop = 23 - HF32_MANTISSA_BITS
    half_ulp = (1 << (drop - 1)) - 1
    lsb = (bits >> drop) & 1
    r = ((bits + half_ulp + lsb) >> drop) << drop
    r = r.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), a, r).astype(np.float32)


def SetHF32Mode(hf32Mode: bool) -> None:
    """A2: later Mmads with float inputs multiply in HF32 (round each input to an 11-bit
    mantissa, nearest-even) instead of FP32. Affects instructions written after it."""
    ctx = current_context()
    ctx.hf32_mode = bool(hf32Mode)
