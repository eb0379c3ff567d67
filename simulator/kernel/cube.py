"""The Cube path, in Ascend C's words: GM -> L1 with ND->NZ conversion (MTE2), L1 -> L0A/L0B
load2d and img2col load3d (MTE1), Mmad on the cube (M), L0C -> GM with NZ->ND and dtype
conversion (Fixpipe, A2) or L0C -> UB (the coupled chips), InitConstValue and SetHF32Mode.
Transpose (UB, PIPE_V) does NCHW <-> NHWC, from which NC1HWC0 (NCHW2NHWC on (N*C1, C0, H, W))
and FRACTAL_Z weights (the same plus a strided DataCopy) are built; ND <-> NZ is DataCopy with
Nd2NzParams one way and Fixpipe (or L0C -> UB plus a strided UB -> GM copy) the other.

Layouts (Ascend C `Mmad` documentation; SPEC section 2):

* L1 (A1/B1), the usual NZ: a matrix of R rows x D columns is cut into column strips of C0
  elements (C0 = 32 B / element size: 16 fp16/bf16, 8 fp32, 32 int8); each strip stores its rows
  one after another, 32 B per row. An NZ fractal is 16 rows x C0.
* L0A (A2), zZ: A (m x k) in fractals of 16 x k0 (k0 = 32 B / element size), fractals row-major
  (for each 16-row band all its k fractals), each fractal row-major. 512 B per fractal.
* L0B (B2), zN: B (k x n) in fractals of k0 x 16, fractals row-major over (k band, n band), each
  fractal column-major: 16 rows of 32 B, one per column n, holding k0 values of k.
* L0C (CO1), NZ: C (m x n) in 16 x 16 fractals of fp32 (int32 for int8), column strips of 16
  ordered strip by strip, each strip ceil16(m) rows of 16 values.

Every instruction checks its operands where it is written (buffers, capacity, alignment, GM
extent, dtypes the chip's Cube multiplies) and names core, pipe and instruction in its fault;
every cost comes from the profile (`paths`, `cube`), never from a constant here.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..enums import dtype_name
from ..machine import COMPUTE, GM_XFER, Instr, align_up, ceil_div, current_context
from .base import GlobalTensor, LocalTensor, _fault, bfloat16, float32, half

FRACTAL_BYTES = 512          # an L0A / L0B fractal, and load2d's unit
BLOCK_BYTES = 32             # a C0 row of a fractal, and the GM burst
int8 = np.dtype(np.int8)
int32 = np.dtype(np.int32)


def _c0(dtype) -> int:
    """Elements in 32 bytes: the C0 of NZ / NC1HWC0 and the k0 of a cube fractal."""
    return BLOCK_BYTES // np.dtype(dtype).itemsize


def _merge(spans):
    """Merge touching (buffer, lo, hi) spans (for the sanitizer's record)."""
    out = []
    for b, lo, hi in sorted(spans):
        if out and out[-1][0] == b and out[-1][2] >= lo:
            if hi > out[-1][2]:
                out[-1] = (b, out[-1][1], hi)
        else:
            out.append((b, lo, hi))
    return tuple(out)


def _local(t, buffers, pipe, name, what):
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


def _extent(t: LocalTensor, hi: int, pipe, name, what) -> None:
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


def _pipe_ok(pipe: str, name: str, hint: str = "") -> None:
    ctx = current_context()
    if pipe not in ctx.core.kind.pipes:
        raise _fault(pipe, f"{name} needs {pipe}, which core kind {ctx.core.kind_name} of "
                     f"{ctx.profile.soc_version} lacks{hint}")


def _gm_check(g: GlobalTensor, lo: int, hi: int, pipe, name) -> int:
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


def _u(v, lo, hi, pipe, name, field):
    v = int(v)
    if not lo <= v <= hi:
        raise _fault(pipe, f"{name}: {field} = {v} outside [{lo}, {hi}]")
    return v


# ---------------------------------------------------------------------------------------------
# record-time memo: load2d, load3d, Mmad and Transpose are pure functions of their parameters,
# their operands' windows and the core kind; a repeat of an instruction already checked on this
# profile and core kind reuses its cost and sanitizer spans (the engine still checks the spans when
# the instruction runs). In functional mode the memo keeps a factory `make(core) -> fn` for the
# functional effect, so a repeat builds only its closure over the recording core.
# ---------------------------------------------------------------------------------------------
_MEMO: dict = {}
_MEMO_PROFILES: dict = {}
_MEMO_MAX = 200_000


def _memo_key(ctx, tag, tensors, params) -> tuple:
    scope = ctx.__dict__.get("memo_scope")
    if scope is None:
        prof = ctx.profile
        _MEMO_PROFILES.setdefault(id(prof), prof)      # keeps the id from being reused
        scope = ctx.memo_scope = (id(prof), ctx.core.kind_name, ctx.functional)
    return (tag, scope, ctx.__dict__.get("hf32_mode", False), params,
            *[(t.buffer, t.offset, t.size, t.dtype) for t in tensors])


def _memo_hit(ctx, key) -> bool:
    if key is None:
        return False
    hit = _MEMO.get(key)
    if hit is None:
        return False
    args, kw, make = hit
    ctx.emit(Instr(*args, fn=_effect(ctx.core, key, make), **kw))
    return True


def _effect(core, key, make):
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


def _memo_emit(ctx, key, make, *args, **kw) -> None:
    """Emit the instruction; `make(core)` builds its functional effect (None in timing-only mode)."""
    if not ctx.functional:
        make = None
    if key is None:
        fn = make(ctx.core) if make is not None else None
    else:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[key] = (args, kw, make)
        fn = _effect(ctx.core, key, make)
    ctx.emit(Instr(*args, fn=fn, **kw))


# ---------------------------------------------------------------------------------------------
# HF32
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# GM -> L1 with ND -> NZ (DataCopy(dstL1, srcGm, Nd2NzParams))
# ---------------------------------------------------------------------------------------------
@dataclass
class Nd2NzParams:
    """ndNum ND matrices of nValue rows x dValue columns (elements), rows srcDValue apart in GM,
    matrices srcNdMatrixStride apart, become NZ in L1: column strips of C0 elements
    dstNzC0Stride 32-B rows apart, rows dstNzNStride 32-B rows apart within a strip, matrices
    dstNzMatrixStride elements apart. A row's last strip is padded with zeros to C0
    [ASSUMPTION]; rows beyond nValue are not written."""
    ndNum: int = 1
    nValue: int = 0
    dValue: int = 0
    srcNdMatrixStride: int = 0
    srcDValue: int = 0
    dstNzC0Stride: int = 0
    dstNzNStride: int = 1
    dstNzMatrixStride: int = 0


def _nd2nz(dst: LocalTensor, src: GlobalTensor, p: Nd2NzParams) -> None:
    ctx = current_context()
    pipe, name = "PIPE_MTE2", "DataCopy(ND2NZ)"
    _pipe_ok(pipe, name)
    _local(dst, ("L1",), pipe, name, "destination")
    if not isinstance(src, GlobalTensor):
        raise _fault(pipe, f"{name}: the source of an ND->NZ copy is a GlobalTensor in GM")
    dt = dst.dtype
    if src.dtype.itemsize != dt.itemsize:
        raise _fault(pipe, f"{name}: source {dtype_name(src.dtype)} and destination "
                     f"{dtype_name(dt)} differ")
    isz, c0 = dt.itemsize, _c0(dt)
    nd = _u(p.ndNum, 1, 4095, pipe, name, "ndNum")
    n = _u(p.nValue, 1, 16384, pipe, name, "nValue")
    d = _u(p.dValue, 1, 65535, pipe, name, "dValue")
    sd = _u(p.srcDValue, d, 65535, pipe, name, "srcDValue (>= dValue)")
    msrc = _u(p.srcNdMatrixStride, 0, 2 ** 32, pipe, name, "srcNdMatrixStride")
    c0s = _u(p.dstNzC0Stride, 1, 16384, pipe, name, "dstNzC0Stride")
    ns = _u(p.dstNzNStride, 1, 16384, pipe, name, "dstNzNStride")
    mdst = _u(p.dstNzMatrixStride, 0, 2 ** 32, pipe, name, "dstNzMatrixStride")
    d1 = ceil_div(d, c0)
    if d1 > 1 and c0s < (n - 1) * ns + 1:
        raise _fault(pipe, f"{name}: dstNzC0Stride {c0s} rows is less than a strip's {(n - 1) * ns + 1} "
                     f"rows: the strips would overlap")
    hi_el = (nd - 1) * mdst + (d1 - 1) * c0s * c0 + (n - 1) * ns * c0 + c0
    _extent(dst, dst.offset + hi_el * isz, pipe, name, "destination")
    src_hi = (nd - 1) * msrc + (n - 1) * sd + d
    addr = _gm_check(src, 0, src_hi * isz, pipe, name)
    row = d * isz
    rows = nd * n
    moved = rows * align_up(row, BLOCK_BYTES)
    if sd == d:
        gm = tuple((addr + i * msrc * isz, n * row) for i in range(nd))
    else:
        gm = tuple((addr + (i * msrc + r * sd) * isz, row) for i in range(nd) for r in range(n))
    writes = []
    for i in range(nd):
        for j in range(d1):
            base = dst.offset + (i * mdst + j * c0s * c0) * isz
            if ns == 1:
                writes.append(("L1", base, base + n * BLOCK_BYTES))
            else:
                writes.extend(("L1", base + r * ns * BLOCK_BYTES, base + r * ns * BLOCK_BYTES + BLOCK_BYTES)
                              for r in range(n))
    cycles = ctx.profile.path("GM_L1_ND2NZ").cycles(moved)
    fn = None
    if ctx.functional:
        device, core = ctx.device, ctx.core

        def fn():
            g = device.memory.bytes_at(addr, src_hi * isz)
            if g is None:
                return
            gv = g.view(dt)
            l1 = core.buffers["L1"][dst.offset:dst.offset + hi_el * isz].view(dt)
            r = np.arange(n)
            c = np.arange(d)
            jj = np.arange(d1)
            kk = np.arange(c0)
            didx = (jj[None, :, None] * c0s * c0 + r[:, None, None] * ns * c0 + kk[None, None, :])
            for i in range(nd):
                vals = np.zeros((n, d1 * c0), dtype=dt)
                vals[:, :d] = gv[i * msrc + r[:, None] * sd + c[None, :]]
                l1[i * mdst + didx] = vals.reshape(n, d1, c0)
    ctx.emit(Instr(pipe, name, GM_XFER, cycles, path="GM_L1_ND2NZ", nbytes=rows * row,
                   chan_bytes=moved, gm=gm, gm_write=False, writes=_merge(writes), fn=fn,
                   operands=(dst, src, f"{nd} x {n} x {d}")))


# ---------------------------------------------------------------------------------------------
# InitConstValue (MTE2): fill L1 / L0A / L0B with a constant
# ---------------------------------------------------------------------------------------------
@dataclass
class InitConstValueParams:
    """repeatTimes iterations, each filling blockNum blocks (32 B in L1, 512 B in L0A/L0B) with
    initValue, dstGap blocks skipped between iterations."""
    repeatTimes: int = 1
    blockNum: int = 0
    dstGap: int = 0
    initValue: float = 0


def InitConstValue(dst: LocalTensor, params: InitConstValueParams) -> None:
    """Fill a local buffer region with a constant (MTE2). Use it to zero the padding of tail
    fractals that loads would otherwise read unwritten. Cost: path INIT_CONST [ASSUMPTION]."""
    ctx = current_context()
    pipe, name = "PIPE_MTE2", "InitConstValue"
    _pipe_ok(pipe, name)
    _local(dst, ("L1", "L0A", "L0B"), pipe, name, "destination")
    unit = BLOCK_BYTES if dst.buffer == "L1" else FRACTAL_BYTES
    rep = _u(params.repeatTimes, 1, 255, pipe, name, "repeatTimes")
    blk = _u(params.blockNum, 1, 32767, pipe, name, "blockNum")
    gap = _u(params.dstGap, 0, 32767, pipe, name, "dstGap")
    spans = [(dst.buffer, dst.offset + i * (blk + gap) * unit, dst.offset + (i * (blk + gap) + blk) * unit)
             for i in range(rep)]
    _extent(dst, spans[-1][2], pipe, name, "destination")
    total = rep * blk * unit
    value = dst.dtype.type(params.initValue)
    cycles = ctx.profile.path("INIT_CONST").cycles(total)
    fn = None
    if ctx.functional:
        core = ctx.core

        def fn():
            raw = core.buffers[dst.buffer]
            for b, lo, hi in spans:
                raw[lo:hi].view(dst.dtype)[...] = value
    ctx.emit(Instr(pipe, name, COMPUTE, cycles, path="INIT_CONST", nbytes=total,
                   writes=_merge(spans), fn=fn, operands=(dst, f"{rep} x {blk} blocks", value)))


# ---------------------------------------------------------------------------------------------
# load2d: L1 -> L0A / L0B (MTE1)
# ---------------------------------------------------------------------------------------------
@dataclass
class LoadData2DParams:
    """repeatTimes fractals (512 B each): the i-th from source fractal startIndex + i*srcStride,
    to destination fractal i*(1 + dstGap); ifTranspose transposes each 16 x 16 fractal
    (16-bit types only)."""
    startIndex: int = 0
    repeatTimes: int = 1
    srcStride: int = 0
    sid: int = 0
    dstGap: int = 0
    ifTranspose: bool = False
    addrMode: int = 0


def _load2d(dst: LocalTensor, src, p: LoadData2DParams) -> None:
    ctx = current_context()
    pipe, name = "PIPE_MTE1", "LoadData(2D)"
    key = None
    if isinstance(src, LocalTensor) and isinstance(dst, LocalTensor):
        key = _memo_key(ctx, "l2d", (dst, src), tuple(p.__dict__.values()))
        if _memo_hit(ctx, key):
            return
    if isinstance(src, GlobalTensor):
        raise _fault("PIPE_MTE2", f"{name}: GM -> L0A/L0B load2d is not modelled; stage through L1 "
                     f"(DataCopy to an A1/B1 tensor, then LoadData)")
    _pipe_ok(pipe, name)
    _local(src, ("L1",), pipe, name, "source")
    _local(dst, ("L0A", "L0B"), pipe, name, "destination")
    if src.dtype.itemsize != dst.dtype.itemsize:
        raise _fault(pipe, f"{name}: source {dtype_name(src.dtype)} and destination "
                     f"{dtype_name(dst.dtype)} differ")
    rep = _u(p.repeatTimes, 1, 255, pipe, name, "repeatTimes")
    start = _u(p.startIndex, 0, 65535, pipe, name, "startIndex")
    ss = _u(p.srcStride, 0, 65535, pipe, name, "srcStride")
    gap = _u(p.dstGap, 0, 65535, pipe, name, "dstGap")
    if gap and ctx.profile.series == "training":
        raise _fault(pipe, f"{name}: dstGap is not enabled on the training series "
                     f"({ctx.profile.soc_version}); write one fractal run per instruction")
    if p.ifTranspose and dst.dtype.itemsize != 2:
        raise _fault(pipe, f"{name}: ifTranspose needs a 16-bit type; {dtype_name(dst.dtype)} "
                     f"fractals are not square (load B^T instead)")
    s0 = src.offset + start * FRACTAL_BYTES
    src_hi = s0 + ((rep - 1) * ss + 1) * FRACTAL_BYTES
    dst_hi = dst.offset + ((rep - 1) * (1 + gap) + 1) * FRACTAL_BYTES
    _extent(src, src_hi, pipe, name, "source")
    _extent(dst, dst_hi, pipe, name, "destination")
    nbytes = rep * FRACTAL_BYTES
    path = "L1_L0A" if dst.buffer == "L0A" else "L1_L0B"
    cycles = ctx.profile.path(path).cycles(nbytes)
    if ss == 1 or rep == 1:
        reads = (("L1", s0, src_hi),)
    else:
        reads = _merge(("L1", s0 + i * ss * FRACTAL_BYTES, s0 + (i * ss + 1) * FRACTAL_BYTES)
                       for i in range(rep))
    if gap == 0:
        writes = ((dst.buffer, dst.offset, dst_hi),)
    else:
        writes = tuple((dst.buffer, dst.offset + i * (1 + gap) * FRACTAL_BYTES,
                        dst.offset + (i * (1 + gap) + 1) * FRACTAL_BYTES) for i in range(rep))
    dt, tr, dbuf, d0 = dst.dtype, bool(p.ifTranspose), dst.buffer, dst.offset

    def make(core):
        l1, out = core.buffers["L1"], core.buffers[dbuf]
        if ss == 1 and gap == 0 and not tr:          # one contiguous run of fractals
            def fn():
                out[d0:dst_hi] = l1[s0:src_hi]
            return fn
        so = (s0 + np.arange(rep) * ss * FRACTAL_BYTES)[:, None] + np.arange(FRACTAL_BYTES)
        do = (d0 + np.arange(rep) * (1 + gap) * FRACTAL_BYTES)[:, None] + np.arange(FRACTAL_BYTES)

        def fn():
            data = l1[so]
            if tr:
                data = np.ascontiguousarray(data.view(dt).reshape(rep, 16, 16).transpose(0, 2, 1))
                data = data.view(np.uint8).reshape(rep, FRACTAL_BYTES)
            out[do] = data
        return fn
    _memo_emit(ctx, key, make, pipe, name, COMPUTE, cycles, path=path, nbytes=nbytes, reads=reads,
               writes=writes, operands=(dst, src, f"{rep} fractals", "T" if p.ifTranspose else ""))


# ---------------------------------------------------------------------------------------------
# load3d (img2col): L1 NC1HWC0 feature map -> L0A / L0B (MTE1)
# ---------------------------------------------------------------------------------------------
@dataclass
class LoadData3DParamsV2:
    """img2col of one feature map held in L1 as C1 x l1H x l1W x C0 (NC1HWC0 without N;
    channelSize = C1 * C0 channels). The logical img2col matrix has one row per output position
    (ho, wo), row index ho * Wo + wo, and one column per (c1, kh, kw, c0), column index
    ((c1 * filterH + kh) * filterW + kw) * C0 + c0 (FRACTAL_Z's K order), where
    h = ho * strideH - padTop + kh * dilationFilterH (w likewise) and positions outside the map
    read padValue. Rows [mStartPt, +mExtension) and columns [kStartPt, +kExtension) of it are
    written to L0A as zZ fractals (to L0B as zN, the matrix then being the right operand, k =
    positions); enTranspose (L0A, 16-bit) writes its transpose instead. padList is
    [left, right, top, bottom]."""
    padList: tuple = (0, 0, 0, 0)
    l1H: int = 1
    l1W: int = 1
    channelSize: int = 16
    kExtension: int = 16
    mExtension: int = 16
    kStartPt: int = 0
    mStartPt: int = 0
    strideW: int = 1
    strideH: int = 1
    filterW: int = 1
    filterH: int = 1
    dilationFilterW: int = 1
    dilationFilterH: int = 1
    enTranspose: bool = False
    enSmallK: bool = False
    padValue: float = 0
    filterSizeW: bool = False
    filterSizeH: bool = False
    fMatrixCtrl: bool = False


def img2col_shape(p: LoadData3DParamsV2, dtype) -> tuple[int, int, int, int]:
    """(Ho, Wo, M = Ho*Wo, K = filterH*filterW*channelSize) of LoadData3DParamsV2's matrix."""
    left, right, top, bottom = (int(x) for x in p.padList)
    ho = (p.l1H + top + bottom - p.dilationFilterH * (p.filterH - 1) - 1) // p.strideH + 1
    wo = (p.l1W + left + right - p.dilationFilterW * (p.filterW - 1) - 1) // p.strideW + 1
    return ho, wo, ho * wo, p.filterH * p.filterW * p.channelSize


def _write_zz(mat: np.ndarray, k0: int) -> np.ndarray:
    """A (rows x cols) matrix as zZ fractals (16 x k0), zero-padded to whole fractals."""
    r, c = mat.shape
    r1, c1 = ceil_div(r, 16), ceil_div(c, k0)
    pad = np.zeros((r1 * 16, c1 * k0), dtype=mat.dtype)
    pad[:r, :c] = mat
    return pad.reshape(r1, 16, c1, k0).transpose(0, 2, 1, 3).reshape(-1)


def _write_zn(mat: np.ndarray, k0: int) -> np.ndarray:
    """A (k x n) right matrix as zN fractals (k0 x 16 stored column-major), zero-padded."""
    k, n = mat.shape
    k1, n1 = ceil_div(k, k0), ceil_div(n, 16)
    pad = np.zeros((k1 * k0, n1 * 16), dtype=mat.dtype)
    pad[:k, :n] = mat
    return pad.reshape(k1, k0, n1, 16).transpose(0, 2, 3, 1).reshape(-1)


def _l3d_index(mst, mext, kst, kext, wo, plane_cols, fw, c0, sh, sw, top, left, dh, dw, l1h, l1w):
    """Functional load3d's gather: the flat map index of every (row, column) of the window (0
    where the position falls outside the map) and which positions fall inside (None: all do).
    The map index ((c1 * l1H + h) * l1W + w) * C0 + c0 is a row part plus a column part, since
    h and w are each a row term plus a column term: one broadcast add, not a dozen 2-D passes."""
    oh, ow = np.divmod(mst + np.arange(mext), wo)
    c1, rem = np.divmod(kst + np.arange(kext), plane_cols)
    kh, kw, cc = rem // (fw * c0), (rem // c0) % fw, rem % c0
    h_row, w_row = oh * sh - top, ow * sw - left
    h_col, w_col = kh * dh, kw * dw
    idx = ((h_row * l1w + w_row) * c0)[:, None] + (((c1 * l1h + h_col) * l1w + w_col) * c0 + cc)[None, :]
    if (h_row.min() + h_col.min() >= 0 and h_row.max() + h_col.max() < l1h
            and w_row.min() + w_col.min() >= 0 and w_row.max() + w_col.max() < l1w):
        return None, idx
    hh = h_row[:, None] + h_col[None, :]
    ww = w_row[:, None] + w_col[None, :]
    valid = (hh >= 0) & (hh < l1h) & (ww >= 0) & (ww < l1w)
    return valid, np.where(valid, idx, 0)


_L3D_GATHER: dict = {}
_L3D_GATHER_BYTES = [0]


def _l3d_gather(geometry: tuple, layout: str):
    """Functional load3d as one gather: for every element of the destination's fractals (zZ, zZ
    of the transpose, or zN) the flat map index it takes, plus the positions that are fractal
    padding (zero) and the window positions outside the map (padValue), each None if there are
    none. Cached per geometry and layout."""
    key = (geometry, layout)
    hit = _L3D_GATHER.get(key)
    if hit is not None:
        return hit
    c0 = geometry[7]
    valid, idx = _l3d_index(*geometry)
    marked = idx + 2                                  # 0: fractal padding, 1: outside the map
    if valid is not None:
        marked[~valid] = 1
    if layout == "zN":
        laid = _write_zn(marked, c0)
    else:
        laid = _write_zz(marked.T if layout == "zZT" else marked, c0)
    zeros, pads = np.flatnonzero(laid == 0), np.flatnonzero(laid == 1)
    hit = (np.maximum(laid - 2, 0), zeros if zeros.size else None, pads if pads.size else None)
    size = sum(a.nbytes for a in hit if a is not None)
    if _L3D_GATHER_BYTES[0] + size > 256 << 20:      # bounded: a big window's index is ~0.6 MB
        _L3D_GATHER.clear()
        _L3D_GATHER_BYTES[0] = 0
    _L3D_GATHER[key] = hit
    _L3D_GATHER_BYTES[0] += size
    return hit


def _load3d(dst: LocalTensor, src: LocalTensor, p: LoadData3DParamsV2) -> None:
    ctx = current_context()
    pipe, name = "PIPE_MTE1", "LoadData(3Dv2)"
    key = None
    if isinstance(src, LocalTensor) and isinstance(dst, LocalTensor):
        key = _memo_key(ctx, "l3d", (dst, src), tuple(p.__dict__.values()))
        if _memo_hit(ctx, key):
            return
    _pipe_ok(pipe, name)
    _local(src, ("L1",), pipe, name, "source")
    _local(dst, ("L0A", "L0B"), pipe, name, "destination")
    dt = dst.dtype
    if src.dtype.itemsize != dt.itemsize:
        raise _fault(pipe, f"{name}: source {dtype_name(src.dtype)} and destination {dtype_name(dt)} differ")
    isz, c0 = dt.itemsize, _c0(dt)
    if dst.buffer == "L0B" and isz == 1:
        raise _fault(pipe, f"{name}: load3d into B2 takes half/bfloat16/float, not {dtype_name(dt)}")
    if p.enSmallK or p.filterSizeW or p.filterSizeH or p.fMatrixCtrl:
        raise _fault(pipe, f"{name}: enSmallK / filterSizeW / filterSizeH / fMatrixCtrl are not modelled")
    if p.enTranspose and (dst.buffer != "L0A" or isz != 2):
        raise _fault(pipe, f"{name}: enTranspose works only into A2 with a 16-bit type")
    pads = tuple(int(x) for x in p.padList)
    if len(pads) != 4 or any(not 0 <= x <= 255 for x in pads):
        raise _fault(pipe, f"{name}: padList {list(p.padList)} must be 4 values in [0, 255]")
    left, right, top, bottom = pads
    l1h = _u(p.l1H, 1, 32767, pipe, name, "l1H")
    l1w = _u(p.l1W, 1, 32767, pipe, name, "l1W")
    ch = _u(p.channelSize, 1, 65535, pipe, name, "channelSize")
    if ch % c0:
        raise _fault(pipe, f"{name}: channelSize {ch} is not a multiple of C0 = {c0}; the small-channel "
                     f"modes (4 / 8 / N*C0+4 ...) are not modelled: pad the channels to C0")
    sw = _u(p.strideW, 1, 63, pipe, name, "strideW")
    sh = _u(p.strideH, 1, 63, pipe, name, "strideH")
    fw = _u(p.filterW, 1, 255, pipe, name, "filterW")
    fh = _u(p.filterH, 1, 255, pipe, name, "filterH")
    dw = _u(p.dilationFilterW, 1, 255, pipe, name, "dilationFilterW")
    dh = _u(p.dilationFilterH, 1, 255, pipe, name, "dilationFilterH")
    kext = _u(p.kExtension, 1, 65535, pipe, name, "kExtension")
    mext = _u(p.mExtension, 1, 65535, pipe, name, "mExtension")
    kst = _u(p.kStartPt, 0, 65535, pipe, name, "kStartPt")
    mst = _u(p.mStartPt, 0, 65535, pipe, name, "mStartPt")
    ho, wo, _, kall = img2col_shape(p, dt)
    if ho < 1 or wo < 1:
        raise _fault(pipe, f"{name}: the filter ({fh}x{fw}, dilation {dh}x{dw}) does not fit the padded "
                     f"map {l1h}x{l1w}: no output positions")
    if kst % c0:
        raise _fault(pipe, f"{name}: kStartPt {kst} must be a multiple of C0 = {c0}")
    if kst + kext > kall:
        raise _fault(pipe, f"{name}: columns [{kst}, {kst + kext}) exceed K = filterH*filterW*channelSize "
                     f"= {kall}")
    c1n = ch // c0
    map_bytes = c1n * l1h * l1w * c0 * isz
    _extent(src, src.offset + map_bytes, pipe, name, "source feature map")
    # the sanitizer's record: per C1 plane, the hull of the map rows the window positions touch
    # (a rectangle of h x w per plane, as flat ranges; it may include a few bytes at the ends of
    # edge rows that no position reads)
    reads = []
    r0, r1 = mst, mst + mext - 1
    oh0, oh1 = r0 // wo, r1 // wo
    ow0, ow1 = (r0 % wo, r1 % wo) if oh0 == oh1 else (0, wo - 1)
    plane_cols = fh * fw * c0
    for plane in range(kst // plane_cols, (kst + kext - 1) // plane_cols + 1):
        q0 = max(kst, plane * plane_cols) - plane * plane_cols
        q1 = min(kst + kext - 1, (plane + 1) * plane_cols - 1) - plane * plane_cols
        kh0, kh1 = q0 // (fw * c0), q1 // (fw * c0)
        kw0, kw1 = ((q0 // c0) % fw, (q1 // c0) % fw) if kh0 == kh1 else (0, fw - 1)
        h0, h1 = oh0 * sh - top + kh0 * dh, oh1 * sh - top + kh1 * dh
        w0, w1 = ow0 * sw - left + kw0 * dw, ow1 * sw - left + kw1 * dw
        if h1 < 0 or h0 >= l1h or w1 < 0 or w0 >= l1w:
            continue                                  # only padding
        h0, h1 = max(h0, 0), min(h1, l1h - 1)
        w0, w1 = max(w0, 0), min(w1, l1w - 1)
        lo = ((plane * l1h + h0) * l1w + w0) * c0 * isz
        hi = ((plane * l1h + h1) * l1w + w1 + 1) * c0 * isz
        reads.append(("L1", src.offset + lo, src.offset + hi))
    if p.enTranspose:
        outr, outc = kext, mext
    else:
        outr, outc = mext, kext
    if dst.buffer == "L0A":
        nfrac = ceil_div(outr, 16) * ceil_div(outc, c0)
    else:
        nfrac = ceil_div(mext, c0) * ceil_div(kext, 16)
    nbytes = nfrac * FRACTAL_BYTES
    _extent(dst, dst.offset + nbytes, pipe, name, "destination")
    path = "L1_L0A" if dst.buffer == "L0A" else "L1_L0B"
    cycles = ctx.profile.path(path).cycles(nbytes)
    geometry = (mst, mext, kst, kext, wo, plane_cols, fw, c0, sh, sw, top, left, dh, dw, l1h, l1w)
    pad_value, layout = dt.type(p.padValue), ("zN" if dst.buffer == "L0B" else "zZT" if p.enTranspose else "zZ")
    soff, dbuf, d0 = src.offset, dst.buffer, dst.offset

    def make(core):
        gather, zeros, pads = _l3d_gather(geometry, layout)
        l1, out = core.buffers["L1"], core.buffers[dbuf]

        def fn():
            fmap = l1[soff:soff + map_bytes].view(dt)
            res = out[d0:d0 + nbytes].view(dt)
            np.take(fmap, gather, out=res, mode="clip")
            if zeros is not None:
                res[zeros] = 0
            if pads is not None:
                res[pads] = pad_value
        return fn
    _memo_emit(ctx, key, make, pipe, name, COMPUTE, cycles, path=path, nbytes=nbytes, reads=_merge(reads),
               writes=((dst.buffer, dst.offset, dst.offset + nbytes),),
               operands=(dst, src, f"m [{mst}:+{mext}] x k [{kst}:+{kext}]"))


def LoadData(dst: LocalTensor, src, loadDataParams) -> None:
    """MTE1: load2d (LoadData2DParams) L1 -> L0A/L0B, or img2col load3d (LoadData3DParamsV2)
    from an NC1HWC0 feature map in L1."""
    if isinstance(loadDataParams, LoadData2DParams):
        _load2d(dst, src, loadDataParams)
    elif isinstance(loadDataParams, LoadData3DParamsV2):
        _load3d(dst, src, loadDataParams)
    else:
        raise _fault("PIPE_MTE1", f"LoadData: parameters must be LoadData2DParams or LoadData3DParamsV2, "
                     f"not {type(loadDataParams).__name__}")


# ---------------------------------------------------------------------------------------------
# Mmad (PIPE_M)
# ---------------------------------------------------------------------------------------------
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


_CUBE_DTYPES = {(half, half): ("FLOAT16", float32), (bfloat16, bfloat16): ("BF16", float32),
                (float32, float32): ("FLOAT", float32), (int8, int8): ("INT8", int32)}


def cube_dtype(a_dtype, b_dtype, hf32: bool = False) -> str | None:
    """The profile name of the Cube's compute dtype for these input dtypes (None if none)."""
    found = _CUBE_DTYPES.get((np.dtype(a_dtype), np.dtype(b_dtype)))
    if found is None:
        return None
    return "HF32" if (found[0] == "FLOAT" and hf32) else found[0]


def mmad_cycles(profile, m: int, n: int, k: int, dtype_name_: str) -> float:
    """Cube cycles of one Mmad: start-up plus whole 16 x k0 x 16 fractal steps at the profile's
    MAC rate for the dtype (k0 = 16 for 16-bit, 8 for 32-bit, 32 for int8)."""
    k0 = {"FLOAT16": 16, "BF16": 16, "FLOAT": 8, "HF32": 8, "INT8": 32}[dtype_name_]
    macs = ceil_div(m, 16) * ceil_div(n, 16) * ceil_div(k, k0) * 16 * 16 * k0
    return profile.cube.startup_cycles + macs / profile.cube.macs_per_cycle[dtype_name_]


def Mmad(dst: LocalTensor, fm: LocalTensor, filter: LocalTensor, params: MmadParams) -> None:
    """PIPE_M: C (CO1, NZ) = A (A2, zZ) x B (B2, zN) [+ C]. Inputs are rounded to the compute
    dtype (HF32 under SetHF32Mode(True)); products are exact and each k0-deep fractal step is
    summed exactly, then added to the fp32 accumulator (fp32 accumulation across steps;
    int32 for int8). Exactly k of the depth is used; C is written in whole 16 x 16 fractals
    (its rows beyond m and columns beyond n come from the padding of A and B), and the
    sanitizer requires only A's first m rows and B's first n columns to have been written."""
    ctx = current_context()
    pipe, name = "PIPE_M", "Mmad"
    key = None
    if isinstance(dst, LocalTensor) and isinstance(fm, LocalTensor) and isinstance(filter, LocalTensor):
        key = _memo_key(ctx, "mmad", (dst, fm, filter), tuple(params.__dict__.values()))
        if _memo_hit(ctx, key):
            return
    _pipe_ok(pipe, name)
    _local(fm, ("L0A",), pipe, name, "left matrix (A2)")
    _local(filter, ("L0B",), pipe, name, "right matrix (B2)")
    _local(dst, ("L0C",), pipe, name, "result (CO1)")
    if params.isBias or params.enSsparse or params.enWinogradA or params.enWinogradB or params.cmatrixSource:
        raise _fault(pipe, f"{name}: bias, sparsity, winograd and cmatrixSource are not modelled")
    m = _u(params.m, 1, 4095, pipe, name, "m")
    n = _u(params.n, 1, 4095, pipe, name, "n")
    k = _u(params.k, 1, 4095, pipe, name, "k")
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
    k0 = _c0(fm.dtype)
    m1, n1, k1 = ceil_div(m, 16), ceil_div(n, 16), ceil_div(k, k0)
    a_bytes, b_bytes = m1 * k1 * FRACTAL_BYTES, k1 * n1 * FRACTAL_BYTES
    c_row = 16 * acc.itemsize
    c_bytes = n1 * m1 * 16 * c_row
    _extent(fm, fm.offset + a_bytes, pipe, name, "left matrix (A2)")
    _extent(filter, filter.offset + b_bytes, pipe, name, "right matrix (B2)")
    _extent(dst, dst.offset + c_bytes, pipe, name, "result (CO1)")
    # sanitizer: the 32-B rows of the fractals that hold real rows of A, columns of B, rows of C
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
    # the Cube writes whole 16 x 16 fractals of C (rows beyond m and columns beyond n hold
    # whatever the padding of A and B gives); an accumulating Mmad reads the rows it uses
    init = bool(params.cmatrixInitVal)
    if not init:
        if m == m1 * 16:          # whole strips: one contiguous span
            reads.append(("L0C", dst.offset, dst.offset + c_bytes))
        else:
            reads.extend(("L0C", dst.offset + l * m1 * 16 * c_row, dst.offset + l * m1 * 16 * c_row + m * c_row)
                         for l in range(n1))
    cspans = [("L0C", dst.offset, dst.offset + c_bytes)]
    cycles = mmad_cycles(ctx.profile, m, n, k, cname)
    at, bt = fm.dtype, filter.dtype
    ao, bo, co = fm.offset, filter.offset, dst.offset

    def make(core):
        a_raw = core.buffers["L0A"][ao:ao + a_bytes].view(at).reshape(m1, k1, 16, k0)
        b_raw = core.buffers["L0B"][bo:bo + b_bytes].view(bt).reshape(k1, n1, 16, k0)
        cview = core.buffers["L0C"][co:co + c_bytes].view(acc).reshape(n1, m1 * 16, 16)
        if cname != "INT8" and k == k1 * k0:
            def fn():                              # whole k0 steps: the common case, no padding of k
                with np.errstate(all="ignore"):    # padding rows may hold anything
                    _mmad_steps(a_raw, b_raw, cview, cname == "HF32", init)
            return fn

        def fn():
            a = a_raw.transpose(0, 2, 1, 3).reshape(m1 * 16, k1 * k0)[:, :k]
            b = b_raw.transpose(0, 3, 1, 2).reshape(k1 * k0, n1 * 16)[:k]
            c = cview.transpose(1, 0, 2).reshape(m1 * 16, n1 * 16)
            with np.errstate(all="ignore"):
                out = _mmad_math(a, b, c, cname, k0, init)
            cview[...] = out.reshape(m1 * 16, n1, 16).transpose(1, 0, 2)
        return fn
    _memo_emit(ctx, key, make, pipe, name, COMPUTE, cycles, path=None, reads=tuple(reads),
               writes=tuple(cspans),
               operands=(dst, fm, filter, f"m={m} n={n} k={k}", cname, "init" if init else "acc"))


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


# ---------------------------------------------------------------------------------------------
# Fixpipe: L0C -> GM (A2, PIPE_FIX)
# ---------------------------------------------------------------------------------------------
class QuantMode_t(Enum):
    NoQuant = "none"         # fp32 -> fp32 (int32 -> int32)
    F322F16 = "f16"          # fp32 -> half, round to nearest even
    F322BF16 = "bf16"        # fp32 -> bfloat16, round to nearest even


class FixpipeConfig(Enum):
    CFG_ROW_MAJOR = "ND"     # NZ in L0C -> ND (row-major) in GM
    CFG_NZ = "NZ"            # keep NZ


CFG_ROW_MAJOR, CFG_NZ = FixpipeConfig.CFG_ROW_MAJOR, FixpipeConfig.CFG_NZ


@dataclass
class FixpipeParamsV220:
    """Move mSize x nSize of an NZ result in L0C to GM. srcStride: rows (of 16 values) between
    consecutive 16-column strips in L0C (normally ceil16(m)). dstStride: for CFG_ROW_MAJOR the
    GM row stride in elements; for CFG_NZ the rows (of 16 values) between strips in GM.
    quantPre None takes the conversion from the GM tensor's dtype."""
    nSize: int = 0
    mSize: int = 0
    srcStride: int = 0
    dstStride: int = 0
    quantPre: QuantMode_t | None = None
    reluEn: bool = False
    unitFlag: int = 0
    isChannelSplit: bool = False
    ndNum: int = 1
    srcNdStride: int = 0
    dstNdStride: int = 0


FixpipeParams = FixpipeParamsV220
_QUANT_OUT = {QuantMode_t.NoQuant: None, QuantMode_t.F322F16: half, QuantMode_t.F322BF16: bfloat16}


def Fixpipe(dst: GlobalTensor, src: LocalTensor, params: FixpipeParamsV220,
            config: FixpipeConfig = CFG_ROW_MAJOR) -> None:
    """PIPE_FIX (A2): L0C (NZ, fp32/int32) -> GM, converting to the GM tensor's dtype (fp32,
    half or bfloat16; rounding to nearest even) and from NZ to ND (CFG_ROW_MAJOR) or keeping NZ.
    Honours SetAtomicAdd (the values are added to GM in the atomic dtype). The transfer costs
    the profile's L0C_GM path on the larger of the bytes read and written and reserves the
    written bytes on the memory system."""
    ctx = current_context()
    pipe, name = "PIPE_FIX", "Fixpipe"
    _pipe_ok(pipe, name, " (coupled AI core: move L0C -> UB with DataCopy(ub, l0c, DataCopyParams, "
                         "DataCopyEnhancedParams), then UB -> GM with DataCopy / DataCopyPad)")
    if isinstance(dst, LocalTensor):
        raise _fault(pipe, f"{name}: L0C -> L1 is not modelled; the destination must be a GlobalTensor")
    _local(src, ("L0C",), pipe, name, "source (CO1)")
    if src.dtype not in (float32, int32):
        raise _fault(pipe, f"{name}: the L0C source holds float or int32, not {dtype_name(src.dtype)}")
    if params.ndNum != 1 or params.isChannelSplit:
        raise _fault(pipe, f"{name}: ndNum > 1 and channel split are not modelled")
    m = _u(params.mSize, 1, 65535, pipe, name, "mSize")
    n = _u(params.nSize, 1, 4095, pipe, name, "nSize")
    ss = _u(params.srcStride, m, 65535, pipe, name, "srcStride (>= mSize)")
    if not isinstance(dst, GlobalTensor) or dst.ptr is None:
        raise _fault(pipe, f"{name}: the destination must be a GlobalTensor with SetGlobalBuffer done")
    out = dst.dtype
    if params.quantPre is not None:
        want = _QUANT_OUT[params.quantPre] or src.dtype
        if want != out:
            raise _fault(pipe, f"{name}: quantPre {params.quantPre.name} writes {dtype_name(want)} "
                         f"but the GM tensor is {dtype_name(out)}")
    ok = (half, bfloat16, float32) if src.dtype == float32 else (int32,)
    if out not in ok:
        raise _fault(pipe, f"{name}: cannot convert {dtype_name(src.dtype)} in L0C to {dtype_name(out)}")
    ds = int(params.dstStride)
    osz, isz = out.itemsize, src.dtype.itemsize
    n1 = ceil_div(n, 16)
    row_src = 16 * isz
    _extent(src, src.offset + ((n1 - 1) * ss + m) * row_src, pipe, name, "source (CO1)")
    reads = _merge(("L0C", src.offset + l * ss * row_src, src.offset + l * ss * row_src + m * row_src)
                   for l in range(n1))
    if config is CFG_ROW_MAJOR:
        if ds < n:
            raise _fault(pipe, f"{name}: dstStride {ds} is less than nSize {n} (rows would overlap)")
        hi = ((m - 1) * ds + n) * osz
        addr = _gm_check(dst, 0, hi, pipe, name)
        row = n * osz
        gm = ((addr, m * row),) if ds == n else tuple((addr + r * ds * osz, row) for r in range(m))
        moved = m * align_up(row, BLOCK_BYTES) if ds != n else align_up(m * row, BLOCK_BYTES)
    else:
        if ds < m:
            raise _fault(pipe, f"{name}: dstStride {ds} rows is less than mSize {m} (strips would overlap)")
        hi = ((n1 - 1) * ds + m) * 16 * osz
        addr = _gm_check(dst, 0, hi, pipe, name)
        strip = m * 16 * osz
        gm = tuple((addr + l * ds * 16 * osz, strip) for l in range(n1))
        moved = n1 * align_up(strip, BLOCK_BYTES)
    written = sum(b for _, b in gm)
    cost_bytes = max(written, m * n1 * row_src)
    cycles = ctx.profile.path("L0C_GM").cycles(cost_bytes)
    atomic = ctx.atomic
    if atomic is not None and atomic != out:
        raise _fault(pipe, f"{name}: SetAtomicAdd({dtype_name(atomic)}) but Fixpipe writes {dtype_name(out)}")
    relu = bool(params.reluEn)
    fn = None
    if ctx.functional:
        device, core, so = ctx.device, ctx.core, src.offset

        def put(view, v):                       # into a strided GM view: store, or add (atomic)
            if atomic is not None:
                view += v
            else:
                view[...] = v

        def fn():
            g = device.memory.bytes_at(addr, hi)
            if g is None:
                return
            cv = core.buffers["L0C"][so:so + ((n1 - 1) * ss + m) * row_src].view(src.dtype)
            # NZ strips of 16 columns, ss rows apart, read as one (m, n1, 16) view
            vals = as_strided(cv, (m, n1, 16), (16 * isz, ss * 16 * isz, isz)).reshape(m, n1 * 16)[:, :n]
            if relu:
                vals = np.maximum(vals, 0)
            vals = vals.astype(out)
            gv = g.view(out)
            if config is CFG_ROW_MAJOR:         # m rows of n, ds apart
                put(as_strided(gv, (m, n), (ds * osz, osz)), vals)
            else:                               # NZ strips of 16 columns, ds rows apart
                strips = as_strided(gv, (m, n1, 16), (16 * osz, ds * 16 * osz, osz))
                w = n // 16
                if w:
                    put(strips[:, :w], vals[:, :w * 16].reshape(m, w, 16))
                if n % 16:
                    put(strips[:, w, :n % 16], vals[:, w * 16:])
    label = name + ("+AtomicAdd" if atomic is not None else "")
    ctx.emit(Instr(pipe, label, GM_XFER, cycles, path="L0C_GM", nbytes=written, chan_bytes=moved,
                   gm=gm, gm_write=True, reads=reads, fn=fn,
                   operands=(dst, src, f"{m} x {n}", dtype_name(out), config.value)))


# ---------------------------------------------------------------------------------------------
# L0C -> UB on the coupled chips (DataCopy with DataCopyEnhancedParams, PIPE_V)
# ---------------------------------------------------------------------------------------------
class BlockMode(Enum):
    BLOCK_MODE_NORMAL = 0
    BLOCK_MODE_MATRIX = 1
    BLOCK_MODE_VECTOR = 2


class DeqScale(Enum):
    DEQ_NONE = 0             # fp32 -> fp32
    DEQF16 = 3               # fp32 -> half, round to nearest even


@dataclass
class DataCopyEnhancedParams:
    blockMode: BlockMode = BlockMode.BLOCK_MODE_NORMAL
    deqScale: DeqScale = DeqScale.DEQ_NONE
    deqValue: float = 0
    sidStoreMode: int = 0
    isRelu: bool = False


def _l0c_to_ub(dst: LocalTensor, src: LocalTensor, p, enh: DataCopyEnhancedParams) -> None:
    """CO1 (L0C) -> CO2 (UB) in whole 16 x 16 fractals (BLOCK_MODE_MATRIX): blockCount runs of
    blockLen fractals, srcStride / dstStride fractals skipped between runs. The NZ layout is
    kept; DEQF16 converts fp32 to half. NZ -> ND is then a strided UB -> GM DataCopy."""
    ctx = current_context()
    pipe, name = "PIPE_V", "DataCopy(L0C->UB)"
    _pipe_ok(pipe, name)
    _local(src, ("L0C",), pipe, name, "source (CO1)")
    _local(dst, ("UB",), pipe, name, "destination (CO2)")
    if enh.blockMode is not BlockMode.BLOCK_MODE_MATRIX:
        raise _fault(pipe, f"{name}: only BLOCK_MODE_MATRIX (whole 16x16 fractals) is modelled")
    if src.dtype != float32:
        raise _fault(pipe, f"{name}: the L0C source must be float, not {dtype_name(src.dtype)}")
    want = half if enh.deqScale is DeqScale.DEQF16 else float32
    if dst.dtype != want:
        raise _fault(pipe, f"{name}: deqScale {enh.deqScale.name} writes {dtype_name(want)}, but the "
                     f"destination is {dtype_name(dst.dtype)}")
    cnt = _u(p.blockCount, 1, 4095, pipe, name, "blockCount")
    blen = _u(p.blockLen, 1, 65535, pipe, name, "blockLen")
    sfr, dfr = 256 * src.dtype.itemsize, 256 * dst.dtype.itemsize
    runs = [(src.offset + i * (blen + int(p.srcStride)) * sfr, dst.offset + i * (blen + int(p.dstStride)) * dfr)
            for i in range(cnt)]
    _extent(src, runs[-1][0] + blen * sfr, pipe, name, "source (CO1)")
    _extent(dst, runs[-1][1] + blen * dfr, pipe, name, "destination (CO2)")
    total = cnt * blen * sfr
    cycles = ctx.profile.path("L0C_UB").cycles(total)
    reads = _merge(("L0C", s, s + blen * sfr) for s, _ in runs)
    writes = _merge(("UB", d, d + blen * dfr) for _, d in runs)
    fn = None
    if ctx.functional:
        core, relu, out = ctx.core, bool(enh.isRelu), dst.dtype

        def fn():
            for s, d in runs:
                v = core.buffers["L0C"][s:s + blen * sfr].view(float32)
                if relu:
                    v = np.maximum(v, 0)
                core.buffers["UB"][d:d + blen * dfr].view(out)[...] = v.astype(out)
    ctx.emit(Instr(pipe, name, COMPUTE, cycles, path="L0C_UB", nbytes=total, reads=reads,
                   writes=writes, fn=fn, operands=(dst, src, f"{cnt} x {blen} fractals", enh.deqScale.name)))


def _data_copy_ext(dst, src, params, enhanced) -> None:
    """DataCopy forms of the cube path (called by copy.DataCopy): Nd2NzParams (GM -> L1) and
    DataCopyEnhancedParams (L0C -> UB)."""
    if isinstance(params, Nd2NzParams):
        _nd2nz(dst, src, params)
    elif enhanced is not None:
        _l0c_to_ub(dst, src, params, enhanced)
    else:
        raise _fault(None, f"DataCopy: unsupported parameters {type(params).__name__}")


# ---------------------------------------------------------------------------------------------
# UB layout transposes (PIPE_V): NCHW <-> NHWC, the basis of NC1HWC0 and FRACTAL_Z conversion
# ---------------------------------------------------------------------------------------------
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
    key = None
    if params is not None and isinstance(src, LocalTensor) and isinstance(dst, LocalTensor):
        key = _memo_key(ctx, "transpose", (dst, src), tuple(params.__dict__.values()))
        if _memo_hit(ctx, key):
            return
    _pipe_ok(pipe, name)
    if params is None:
        raise _fault(pipe, f"{name}: TransposeParamsExt is required")
    _local(src, ("UB",), pipe, name, "source")
    _local(dst, ("UB",), pipe, name, "destination")
    if src.dtype != dst.dtype:
        raise _fault(pipe, f"{name}: source {dtype_name(src.dtype)} and destination {dtype_name(dst.dtype)} differ")
    shape = tuple(int(x) for x in (params.nSize, params.cSize, params.hSize, params.wSize))
    if min(shape) < 1:
        raise _fault(pipe, f"{name}: sizes {shape} must be positive")
    count = int(np.prod(shape))
    nbytes = count * src.dtype.itemsize
    _extent(src, src.offset + nbytes, pipe, name, "source")
    _extent(dst, dst.offset + nbytes, pipe, name, "destination")
    lo, hi = sorted(((src.offset, src.offset + nbytes), (dst.offset, dst.offset + nbytes)))
    if lo[1] > hi[0]:
        raise _fault(pipe, f"{name}: source and destination overlap")
    cycles = ctx.profile.vector_cycles("transpose", dtype_name(src.dtype), nbytes)
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
    _memo_emit(ctx, key, make, pipe, name, COMPUTE, cycles, path=None, reads=(src.span(count),),
               writes=(dst.span(count),), operands=(dst, src, shape, params.transposeType.name))


__all__ = [
    "Nd2NzParams",
    "InitConstValueParams",
    "InitConstValue",
    "LoadData2DParams",
    "LoadData3DParamsV2",
    "LoadData",
    "img2col_shape",
    "MmadParams",
    "Mmad",
    "mmad_cycles",
    "cube_dtype",
    "SetHF32Mode",
    "hf32_round",
    "QuantMode_t",
    "FixpipeConfig",
    "CFG_ROW_MAJOR",
    "CFG_NZ",
    "FixpipeParamsV220",
    "FixpipeParams",
    "Fixpipe",
    "BlockMode",
    "DeqScale",
    "DataCopyEnhancedParams",
    "TransposeType",
    "TransposeParamsExt",
    "Transpose",
]
