"""aclnnGridSampler2DBackward: the gradients of grid_sample (2-D) with respect to its input and
its grid, as PyTorch's `grid_sampler_2d_backward` computes them.

Checks (SPEC section 4, in this order): a null outputMask -> success with workspace 0 (nothing to
do; also when both bits are false, as CANN does); an outputMask that is not 2 long -> 161002;
null gradOutput / input / grid, or a null inputGrad / gridGrad whose mask bit is set -> 161001;
the operator exists on the chip's series (161002 on the inference series); valid views; all
dtypes equal input's and in the series' list (profile operators.GridSampler2DBackward.dtypes);
all 4-D; N equal; C equal; input H, W != 0; grid dims 1, 2 == gradOutput dims 2, 3; grid last
dim == 2; inputGrad shape == input's, gridGrad shape == grid's; interpolationMode in the
profile's interpolation_modes (bicubic 2 on A2 only) and paddingMode in 0..2. All -> 161002.

How the kernel works (the strategy CANN's A2 path takes: l0op::Transpose to NHWC, then the
GridSamplerGrad kernel, then a transpose back):

1. `TransposeToNHWC(input)` (only when gridGrad is wanted with bilinear / bicubic): the NCHW input
   becomes an NHWC copy in the workspace, in the compute dtype (FLOAT; DOUBLE for DOUBLE), with
   `pad` zero pixels before and after so a corner run that starts one pixel left of the image or
   ends one pixel right of it stays inside the buffer. In NHWC one corner is one C-long burst and
   the two corners of a bilinear row (x0, x0+1) are one 2C-long burst: one gather per row.
2. `InitWorkspace(inputGrad accumulator)` (when inputGrad is wanted): a zeroed NHWC FLOAT
   accumulator of the same layout; atomic adds land there (FP16/BF16 would lose the sum in
   their own precision, and the transpose back needs a buffer anyway).
3. `GridSampler2DGrad` on the vector cores, per tile of P grid points of one batch:
   * MTE2 brings the grid tile; the vector pipe de-interleaves x / y (Transpose), casts to FP32,
     unnormalises, applies the padding with its gradient factor (border: clip; reflection:
     reflect with flips and sign, then clip), takes floor / round-half-to-even, the corner
     weights and their in-bounds masks (Compare / Select: no data-dependent control flow) and
     the int32 GM offsets of each corner run, clamped so every run stays inside the buffer.
   * MTE2 gathers every run of every point, in bounds or not (the instruction stream must not
     depend on the data): `DataCopyPad[gather]` with the offset read from UB when it executes.
     Bilinear 2 gathers per point, bicubic 4 (zeros) or 16 (border / reflection), nearest none.
   * gradOutput arrives channel-major straight from NCHW (one strided DataCopyPad per tile) and
     is transposed to point-major. gridGrad: per corner the dot product over channels of the
     gathered row and gradOutput (Mul, Transpose, a tree of Adds), masked, times the weights'
     derivatives, times the padding factor; written per tile. inputGrad: the weights broadcast
     along the channels (a doubling Copy and a Transpose) times gradOutput, then
     `DataCopyPad[scatter]+AtomicAdd` per run per point into the accumulator.
   * Channels beyond what fits UB are processed in chunks (the gathers then move a chunk each).
   * The steps (tile, chunk) are software-pipelined: step s+1's gathers are issued alternately
     with step s's scatters, so the scalar unit's in-order issue into bounded pipe queues never
     leaves MTE2 idle behind a backlog of MTE3 work; offsets are double-buffered by tile parity.
     Tiles are split evenly over the vector cores.
4. `TransposeCast(inputGrad)`: the accumulator back to NCHW, cast to the output dtype.
Non-contiguous inputs are first copied contiguous (Contiguous); non-contiguous outputs are
computed into the workspace and written back (ViewCopy).

FP16 / BF16 are computed in FP32 inside the kernels (casts are instructions), as the real kernel
does; on the training series CANN casts with separate Cast operators around a FP32 kernel, which
we fold into the transposes and the main kernel. DOUBLE (A2, as CANN's code lists it) runs the
same kernels in float64; the vector unit has no float64 rate, so its cost is the FLOAT class per
256 bytes, and the accumulator takes float64 atomic adds [ASSUMPTIONS: CANN really dispatches
DOUBLE to the AI CPU, which is not modelled].

Differences from the seed document: it lists interpolationMode 0 and 1 only; SPEC (recent CANN
code) adds bicubic (2) on A2, which we accept there. It lists 161001 for any null output; we
follow SPEC (only outputs whose outputMask bit is set must be non-null), and a null outputMask
(or both bits false) returns success with workspace 0, as CANN's code does.

Modelling notes: the scalar unit's per-point address arithmetic (GetValue) is not charged beyond
the one-cycle issue of each copy; gathers and scatters see the L2 at the address an identity grid
would touch (their real addresses are data, and timing-only mode has none); a point with NaN
coordinates is treated as -100 (outside), as the CANN kernel does; unnormalised coordinates are
clamped to +-2^23 (FP32 resolves no pixel beyond); a zero-weight corner still adds 0 * gradOutput,
so an infinite gradOutput turns an out-of-bounds neighbour into NaN where PyTorch skips it.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from simulator.aclnn import (OpDef, Param, Plan, check_tensor_view, register, require_present,
                             require_support, tiling_override)
from simulator.enums import NUMPY_OF, AclnnError, aclDataType, aclnnStatus, dtype_name, param_invalid
from simulator.kernel import (CMPMODE, GM_ADDR, SELMODE, Abs, Add, Cast, Compare, CompareScalar, Copy,
                              DataCopy, DataCopyExtParams, DataCopyPad, Div, Duplicate,
                              GetBlockIdx, GlobalTensor, HardEvent, Maxs, Mins, Mul, Muls,
                              PipeBarrier, PIPE_ALL, RoundMode, Select, SetAtomicAdd,
                              SetAtomicNone, SetFlag, Sub, TBuf, TPipe, TPosition, TQue,
                              Transpose, TransposeParamsExt, TransposeType, WaitFlag,
                              Adds, float32, int32)
from simulator.kernel.indirect import DataCopyPadIndirect
from simulator.machine import KernelLaunch, align_up, ceil_div
from .common import tensor_arg, ub_bytes, vector_core_count, view_copy_launch, workspace_arg

OP = "GridSampler2DBackward"
BILINEAR, NEAREST, BICUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2
PADDING_MODES = (ZEROS, BORDER, REFLECTION)
CUBIC_A = -0.75                 # PyTorch's cubic convolution coefficient
COORD_LIMIT = float(2 ** 23)    # |unnormalised coordinate| clamp (FP32 resolves no pixel beyond)
NAN_COORD = -100.0              # where the CANN kernel puts a NaN coordinate
P_MAX = 64                      # grid points per tile, at most (tiling choice)
P_ALIGN = 16                    # points per tile are a multiple of this (32-B rows for FP16 too)
UB_RESERVE = 2048               # UB bytes kept free (alignment slack)
MAX_BLOCK_COUNT = 4095          # DataCopyExtParams.blockCount is 12 bits


# ---------------------------------------------------------------------------------------------
# host-side tiling
# ---------------------------------------------------------------------------------------------
def _tiling_error(msg: str) -> AclnnError:
    return AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR, f"{OP} tiling: {msg}")


def geometry(interp: int, padding: int):
    """(planes K, runs, pad pixels). A run is (first plane, taps L, dy, dx): L taps that are
    consecutive in x, gathered / scattered by one copy; (dy, dx) place it relative to the corner
    (floor(y), floor(x)) (used for the L2's nominal address)."""
    if interp == BILINEAR:
        return 4, ((0, 2, 0, 0), (2, 2, 1, 0)), 1
    if interp == NEAREST:
        return 1, ((0, 1, 0, 0),), 0
    if padding == ZEROS:
        return 16, tuple((4 * j, 4, j - 1, -1) for j in range(4)), 3
    return 16, tuple((4 * j + i, 1, j - 1, i - 1) for j in range(4) for i in range(4)), 0


def _split(total: int, ncores: int) -> tuple:
    """Contiguous ranges of `total` work items over at most `ncores` blocks, sizes within one."""
    nb = max(1, min(ncores, total))
    return tuple((b * total // nb, (b + 1) * total // nb) for b in range(nb))


@dataclass
class GridSamplerGradTiling:
    """What the main kernel receives (host-side tiling struct)."""
    N: int
    C: int
    H: int
    W: int
    Ho: int
    Wo: int
    interp: int
    padding: int
    align: bool
    io: np.dtype            # tensors' dtype
    cdt: np.dtype           # compute dtype (FLOAT, or DOUBLE)
    P: int                  # grid points per tile
    Cc: int                 # channels per chunk
    Ccp: int                # Cc padded to 32 bytes
    nch: int                # channel chunks
    K: int                  # corner planes
    runs: tuple
    pad: int                # zero pixels before / after the NHWC buffers
    need_x: bool            # gridGrad with bilinear / bicubic: gathers of the input
    need_in: bool           # inputGrad: scatters
    need_gg: bool           # gridGrad
    tiles_per_n: int
    blocks: tuple           # per block: (first tile, end tile)
    n_vec: int              # scratch vectors (compute dtype, P each)
    n_int: int              # scratch int32 vectors (P each)


def _scratch_counts(interp: int, K: int, runs: int) -> tuple[int, int]:
    vec = 24 + 3 * K + (48 if interp == BICUBIC else 14)
    ints = 6 + 2 * runs + (8 if interp == BICUBIC else 0)
    return vec, ints


def _main_buffers(t: GridSamplerGradTiling) -> list[int]:
    """Byte sizes of every UB buffer the main kernel allocates, in its order."""
    P, Ccp, K = t.P, t.Ccp, t.K
    isz, esz = t.io.itemsize, t.cdt.itemsize
    out = [P * 2 * isz, Ccp * P * isz]                       # grid tile, gradOutput tile
    if t.need_x:
        out.append(K * P * Ccp * esz)                        # gathered corners
    if t.need_in:
        out.append(K * P * Ccp * esz)                        # contributions to scatter
    if t.need_gg:
        out.append(P * 2 * isz)                              # gridGrad tile
    if t.need_x or t.need_in:
        out.append(Ccp * K * P * esz)                        # channel-major scratch
    if isz != esz:
        out.append(Ccp * P * esz)                            # gradOutput in the compute dtype
    out.append(P * Ccp * esz)                                # gradOutput point-major
    out.append(t.n_vec * P * esz + t.n_int * P * 4 + 4 * 32)  # small vectors and masks
    return out


TILING_FIELDS = {"pointsPerTile": "int", "channelsPerChunk": "int"}


def plan_main(N, C, H, W, Ho, Wo, interp, padding, align, io, cdt, need_in, need_gg, profile, override=None):
    """The main kernel's tiling: grid points per tile P (a multiple of P_ALIGN, at most P_MAX) and
    channels per pass Cc, the largest that fit UB (P first). `override` forces pointsPerTile and /
    or channelsPerChunk; one that cannot work, or a call no tiling fits, is 561002."""
    K, runs, pad = geometry(interp, padding)
    need_x = need_gg and interp != NEAREST
    esz = cdt.itemsize
    cblk = 32 // esz
    HoWo = Ho * Wo
    ub = ub_bytes(profile) - UB_RESERVE
    n_vec, n_int = _scratch_counts(interp, K, len(runs))
    p_cap = min(P_MAX, align_up(HoWo, P_ALIGN))
    override = override or {}
    o_p, o_c = override.get("pointsPerTile"), override.get("channelsPerChunk")
    if o_p is not None and (o_p % P_ALIGN or o_p > P_MAX):
        raise _tiling_error(f"pointsPerTile {o_p} must be a multiple of {P_ALIGN}, at most {P_MAX}")
    if o_c is not None and o_c > C:
        raise _tiling_error(f"channelsPerChunk {o_c} exceeds C = {C}")
    p_range = [o_p] if o_p else range(p_cap, P_ALIGN - 1, -P_ALIGN)
    Cc = o_c or C
    while True:
        Ccp = align_up(Cc, cblk)
        best = None
        for P in p_range:
            t = GridSamplerGradTiling(N, C, H, W, Ho, Wo, interp, padding, align, io, cdt, P, Cc,
                                      Ccp, ceil_div(C, Cc), K, runs, pad, need_x, need_in, need_gg,
                                      0, (), n_vec, n_int)
            if sum(align_up(b, 32) for b in _main_buffers(t)) <= ub:
                best = t
                break
        if best is not None and (o_c or o_p or best.P >= min(p_cap, 32) or Cc <= cblk):
            break
        if o_c or Cc <= cblk:
            forced = f" (pointsPerTile {o_p}, channelsPerChunk {o_c})" if (o_p or o_c) else ""
            raise _tiling_error(f"no tiling fits UB ({ub} B usable) for C={C}{forced}")
        Cc = align_up(ceil_div(Cc, 2), cblk)
    t = best
    t.tiles_per_n = ceil_div(HoWo, t.P)
    t.blocks = _split(N * t.tiles_per_n, vector_core_count(profile))
    return t


@dataclass
class LayoutTiling:
    """The NCHW <-> NHWC transposes and the zero fill."""
    N: int
    C: int
    HW: int
    src: np.dtype           # dtype read
    dst: np.dtype           # dtype written
    T: int                  # pixels per tile
    Cc: int                 # channels per chunk
    Ccp: int                # Cc padded to 32 bytes (in the wider dtype)
    pad: int                # zero pixels before / after the NHWC buffer
    tiles_per_n: int
    blocks: tuple


def plan_layout(N, C, HW, src, dst, pad, profile) -> LayoutTiling:
    esz = max(src.itemsize, dst.itemsize)
    cblk = 32 // min(src.itemsize, dst.itemsize)       # pad channels so both dtypes' rows are 32 B
    ub = ub_bytes(profile) - UB_RESERVE
    Cc = C
    while True:
        Ccp = align_up(Cc, cblk)
        for T in (512, 256, 128, 64, 32, 16):
            if T > align_up(HW, 16) and T > 16:
                continue
            need = 2 * Ccp * T * src.itemsize + 2 * T * Ccp * dst.itemsize + 2 * Ccp * T * esz + 4096
            if need <= ub and Cc <= MAX_BLOCK_COUNT:
                break
        else:
            T = 0
        if T >= min(64, align_up(HW, 16)) or Cc <= cblk:
            break
        Cc = align_up(ceil_div(Cc, 2), cblk)
    tiles_per_n = ceil_div(HW, T)
    blocks = _split(N * tiles_per_n, vector_core_count(profile))
    return LayoutTiling(N, C, HW, src, dst, T, Cc, Ccp, pad, tiles_per_n, blocks)


def _t2d(dst, src, rows: int, cols: int) -> None:
    """dst [cols][rows] = src [rows][cols]^T: Ascend C's Transpose NCHW -> NHWC with N = H = 1."""
    Transpose(dst, src, None, TransposeParamsExt(1, rows, 1, cols, TransposeType.TRANSPOSE_NCHW2NHWC))


# ---------------------------------------------------------------------------------------------
# kernels: layout changes and the zero fill
# ---------------------------------------------------------------------------------------------
def _pad_write(gm: GlobalTensor, zeros, nbytes: int, isz: int, room: int) -> None:
    """Write nbytes of zeros from UB `zeros` (room bytes) to gm, in pieces."""
    done = 0
    while done < nbytes:
        n = min(room, nbytes - done)
        DataCopyPad(gm[done // isz], zeros, DataCopyExtParams(1, n, 0, 0))
        done += n


def nchw_to_nhwc_kernel(src: GM_ADDR, dst: GM_ADDR, t: LayoutTiling):
    """TransposeToNHWC: per tile of T pixels and Cc channels, MTE2 brings the channel rows
    (strided DataCopyPad), the vector pipe casts to the compute dtype and transposes, MTE3 writes
    pixel rows of the padded NHWC buffer. Block 0 also zeroes the pad pixels."""
    T, Cc, Ccp, C, HW = t.T, t.Cc, t.Ccp, t.C, t.HW
    isz, osz = t.src.itemsize, t.dst.itemsize
    pipe = TPipe()
    inQ, outQ = TQue(TPosition.VECIN, 2), TQue(TPosition.VECOUT, 2)
    pipe.InitBuffer(inQ, 2, Ccp * T * isz)
    pipe.InitBuffer(outQ, 2, T * Ccp * osz)
    calc = TBuf()
    pipe.InitBuffer(calc, Ccp * T * osz)
    srcGm, dstGm = GlobalTensor(t.src), GlobalTensor(t.dst)
    srcGm.SetGlobalBuffer(src)
    dstGm.SetGlobalBuffer(dst)
    for _ in range(2):                      # channel rows past C are read by the transpose
        z = inQ.AllocTensor(t.src)
        Duplicate(z, 0, Ccp * T)
        inQ.FreeTensor(z)
    PipeBarrier(PIPE_ALL)
    first, end = t.blocks[GetBlockIdx()]
    if GetBlockIdx() == 0 and t.pad:
        z = outQ.AllocTensor(t.dst)
        Duplicate(z, 0, T * Ccp)
        outQ.EnQue(z)
        z = outQ.DeQue(t.dst)
        nb = t.pad * C * osz
        _pad_write(dstGm, z, nb, osz, T * Ccp * osz)
        _pad_write(dstGm[(t.pad + t.N * HW) * C], z, nb, osz, T * Ccp * osz)
        outQ.FreeTensor(z)
    for tile in range(first, end):
        n, j = divmod(tile, t.tiles_per_n)
        p0 = j * T
        cnt = min(T, HW - p0)
        for c0 in range(0, C, Cc):
            cc = min(Cc, C - c0)
            a = inQ.AllocTensor(t.src)
            row = align_up(cnt * isz, 32)
            DataCopyPad(a, srcGm[(n * C + c0) * HW + p0],
                        DataCopyExtParams(cc, cnt * isz, (HW - cnt) * isz, (T * isz - row) // 32))
            inQ.EnQue(a)
            a = inQ.DeQue(t.src)
            b = outQ.AllocTensor(t.dst)
            if isz != osz:
                f = calc.Get(t.dst)
                Cast(f, a, RoundMode.CAST_NONE, Ccp * T)
                _t2d(b, f, Ccp, T)
            else:
                _t2d(b, a, Ccp, T)
            inQ.FreeTensor(a)
            outQ.EnQue(b)
            b = outQ.DeQue(t.dst)
            DataCopyPad(dstGm[(t.pad + n * HW + p0) * C + c0], b,
                        DataCopyExtParams(cnt, cc * osz, (Ccp * osz - align_up(cc * osz, 32)) // 32,
                                          (C - cc) * osz))
            outQ.FreeTensor(b)


def nhwc_to_nchw_kernel(src: GM_ADDR, dst: GM_ADDR, t: LayoutTiling):
    """TransposeCast(inputGrad): the NHWC accumulator back to NCHW, cast to the output dtype."""
    T, Cc, Ccp, C, HW = t.T, t.Cc, t.Ccp, t.C, t.HW
    isz, osz = t.src.itemsize, t.dst.itemsize
    pipe = TPipe()
    inQ, outQ = TQue(TPosition.VECIN, 2), TQue(TPosition.VECOUT, 2)
    pipe.InitBuffer(inQ, 2, T * Ccp * isz)
    pipe.InitBuffer(outQ, 2, Ccp * T * osz)
    calc = TBuf()
    pipe.InitBuffer(calc, Ccp * T * isz)
    srcGm, dstGm = GlobalTensor(t.src), GlobalTensor(t.dst)
    srcGm.SetGlobalBuffer(src)
    dstGm.SetGlobalBuffer(dst)
    for _ in range(2):                      # pixel rows past the tail are read by the transpose
        z = inQ.AllocTensor(t.src)
        Duplicate(z, 0, T * Ccp)
        inQ.FreeTensor(z)
    PipeBarrier(PIPE_ALL)
    first, end = t.blocks[GetBlockIdx()]
    for tile in range(first, end):
        n, j = divmod(tile, t.tiles_per_n)
        p0 = j * T
        cnt = min(T, HW - p0)
        for c0 in range(0, C, Cc):
            cc = min(Cc, C - c0)
            a = inQ.AllocTensor(t.src)
            DataCopyPad(a, srcGm[(t.pad + n * HW + p0) * C + c0],
                        DataCopyExtParams(cnt, cc * isz, (C - cc) * isz, (Ccp * isz - align_up(cc * isz, 32)) // 32))
            inQ.EnQue(a)
            a = inQ.DeQue(t.src)
            b = outQ.AllocTensor(t.dst)
            if isz != osz:
                f = calc.Get(t.src)
                _t2d(f, a, T, Ccp)
                Cast(b, f, RoundMode.CAST_RINT, Ccp * T)
            else:
                _t2d(b, a, T, Ccp)
            inQ.FreeTensor(a)
            outQ.EnQue(b)
            b = outQ.DeQue(t.dst)
            row = align_up(cnt * osz, 32)
            DataCopyPad(dstGm[(n * C + c0) * HW + p0], b,
                        DataCopyExtParams(cc, cnt * osz, (T * osz - row) // 32, (HW - cnt) * osz))
            outQ.FreeTensor(b)


@dataclass
class ZeroTiling:
    total_bytes: int
    chunk: int              # bytes per DataCopy from the zeroed UB buffer
    blocks: tuple           # per block: (first byte, end byte)


def plan_zero(nbytes: int, profile, min_block: int = 64 * 1024) -> ZeroTiling:
    ncores = vector_core_count(profile)
    per = align_up(max(ceil_div(nbytes, ncores), min_block), 32)
    blocks = tuple((b, min(b + per, nbytes)) for b in range(0, nbytes, per))
    return ZeroTiling(nbytes, min(32 * 1024, ub_bytes(profile) // 2 // 32 * 32), blocks)


def zero_kernel(dst: GM_ADDR, t: ZeroTiling):
    """InitWorkspace: Duplicate zeros into UB once, then stream them to GM (MTE3)."""
    pipe = TPipe()
    q = TQue(TPosition.VECOUT, 1)
    pipe.InitBuffer(q, 1, t.chunk)
    gm = GlobalTensor(np.uint8)
    gm.SetGlobalBuffer(dst.cast(np.uint8))
    z = q.AllocTensor(float32)
    Duplicate(z, 0.0, t.chunk // 4)
    q.EnQue(z)
    z = q.DeQue(np.uint8)
    lo, hi = t.blocks[GetBlockIdx()]
    off = lo
    while off < hi:
        n = min(t.chunk, hi - off)
        if n % 32 == 0:
            DataCopy(gm[off], z, n)
        else:
            DataCopyPad(gm[off], z, DataCopyExtParams(1, n, 0, 0))
        off += n
    q.FreeTensor(z)


# ---------------------------------------------------------------------------------------------
# the main kernel
# ---------------------------------------------------------------------------------------------
TS = SELMODE.VSEL_TENSOR_SCALAR_MODE
TT = SELMODE.VSEL_TENSOR_TENSOR_MODE


class _Scratch:
    """Named vectors carved out of one VECCALC buffer (allocated on first use)."""

    def __init__(self, buf: TBuf, t: GridSamplerGradTiling):
        self.P, self.cdt = t.P, t.cdt
        self.raw = buf.Get(np.uint8)
        self.vec_base, self.int_base = 0, t.n_vec * t.P * t.cdt.itemsize
        self.mask_base = self.int_base + t.n_int * t.P * 4
        self.n_vec, self.n_int = t.n_vec, t.n_int
        self.vecs, self.ints, self.masks = {}, {}, {}

    def v(self, name: str, length: int = 1):
        """A compute-dtype vector of length * P elements."""
        got = self.vecs.get(name)
        if got is None:
            used = sum(n for _, n in self.vecs.values())
            if used + length > self.n_vec:
                raise RuntimeError(f"scratch: {used + length} vectors needed, {self.n_vec} planned")
            t = self.raw[self.vec_base + used * self.P * self.cdt.itemsize].ReinterpretCast(self.cdt)
            got = self.vecs[name] = (t, length)
        return got[0]

    def i(self, name: str):
        got = self.ints.get(name)
        if got is None:
            k = len(self.ints)
            if k >= self.n_int:
                raise RuntimeError(f"scratch: more than {self.n_int} int vectors")
            got = self.ints[name] = self.raw[self.int_base + k * self.P * 4].ReinterpretCast(int32)
        return got

    def m(self, name: str):
        got = self.masks.get(name)
        if got is None:
            k = len(self.masks)
            got = self.masks[name] = self.raw[self.mask_base + k * 32]
        return got


class KernelGridSampler2DGrad:
    """Init, then per tile: CopyInGrid, ComputeCoords, per channel chunk (CopyInGradOutput,
    Gather, ComputeChunk, Scatter), ComputeGridGrad, CopyOutGridGrad."""

    def Init(self, gradOutput: GM_ADDR, grid: GM_ADDR, xws: GM_ADDR | None, acc: GM_ADDR | None,
             gridGrad: GM_ADDR | None, t: GridSamplerGradTiling):
        self.t = t
        P, Ccp, K = t.P, t.Ccp, t.K
        io, cdt = t.io, t.cdt
        sizes = iter(_main_buffers(t))
        self.pipe = pipe = TPipe()
        self.gridQ = TQue(TPosition.VECIN, 1)
        pipe.InitBuffer(self.gridQ, 1, next(sizes))
        self.gQ = TQue(TPosition.VECIN, 1)
        pipe.InitBuffer(self.gQ, 1, next(sizes))
        if t.need_x:
            self.xQ = TQue(TPosition.VECIN, 1)
            pipe.InitBuffer(self.xQ, 1, next(sizes))
        if t.need_in:
            self.sQ = TQue(TPosition.VECOUT, 1)
            pipe.InitBuffer(self.sQ, 1, next(sizes))
        if t.need_gg:
            self.ggQ = TQue(TPosition.VECOUT, 1)
            pipe.InitBuffer(self.ggQ, 1, next(sizes))
        if t.need_x or t.need_in:
            self.tBuf = TBuf()
            pipe.InitBuffer(self.tBuf, next(sizes))
        if io.itemsize != cdt.itemsize:
            self.gfBuf = TBuf()
            pipe.InitBuffer(self.gfBuf, next(sizes))
        self.gpmBuf = TBuf()
        pipe.InitBuffer(self.gpmBuf, next(sizes))
        sbuf = TBuf()
        pipe.InitBuffer(sbuf, next(sizes))
        self.s = _Scratch(sbuf, t)
        if t.need_x:
            self.idxEvent = pipe.AllocEventID(HardEvent.V_MTE2)
        self.goGm, self.gridGm = GlobalTensor(io), GlobalTensor(io)
        self.goGm.SetGlobalBuffer(gradOutput)
        self.gridGm.SetGlobalBuffer(grid)
        self.xws, self.acc = xws, acc
        if gridGrad is not None:
            self.ggGm = GlobalTensor(io)
            self.ggGm.SetGlobalBuffer(gridGrad)
        # lanes no copy writes (channel padding, the tail tile's points) are read by vector ops:
        # give them zeros once, before any copy lands
        for q, n in ((self.gridQ, P * 2), (self.gQ, Ccp * P)):
            z = q.AllocTensor(io)
            Duplicate(z, 0, n)
            q.FreeTensor(z)
        if t.need_x:
            z = self.xQ.AllocTensor(cdt)
            Duplicate(z, 0, K * P * Ccp)
            self.xQ.FreeTensor(z)
        Duplicate(self.s.v("one"), 1.0, P)
        PipeBarrier(PIPE_ALL)

    # ---- driver ------------------------------------------------------------------------------
    def Process(self):
        """Software-pipelined over (tile, channel chunk) steps: while step s's contributions are
        scattered (MTE3), step s+1's corners are gathered (MTE2); the copies are issued
        alternately so the scalar unit's in-order issue never starves one queue behind the
        other's backlog."""
        t = self.t
        first, end = t.blocks[GetBlockIdx()]
        steps = [(tile, ch) for tile in range(first, end) for ch in range(t.nch)]
        if not steps:
            return
        self.CopyInGrid(steps[0][0])
        self.ComputeCoords(steps[0][0])
        self.CopyInGradOutput(*steps[0])
        gathers = self.GatherOps(*steps[0]) if t.need_x else None
        self.Interleave(gathers, None)
        for i, (tile, ch) in enumerate(steps):
            nxt = steps[i + 1] if i + 1 < len(steps) else None
            last = ch == t.nch - 1
            if last and nxt is not None:
                self.CopyInGrid(nxt[0])             # MTE2 runs it after this step's gathers
            self.ComputeChunk(tile, ch)
            if last and t.need_gg:
                self.ComputeGridGrad()
            if last and nxt is not None:
                self.ComputeCoords(nxt[0])
            gathers = scatters = None
            if nxt is not None:
                self.CopyInGradOutput(*nxt)
                if t.need_x:
                    gathers = self.GatherOps(*nxt)
            if t.need_in:
                scatters = self.ScatterOps(tile, ch)
            self.Interleave(gathers, scatters)
            if last and t.need_gg:
                self.CopyOutGridGrad(tile)

    def _tile(self, tile):
        t = self.t
        n, j = divmod(tile, t.tiles_per_n)
        p0 = j * t.P
        return n, p0, min(t.P, t.Ho * t.Wo - p0)

    @staticmethod
    def Interleave(a, b):
        """Issue two (ops, finish) lists alternately, then their finishing steps."""
        ops_a, ops_b = (a[0] if a else []), (b[0] if b else [])
        for k in range(max(len(ops_a), len(ops_b))):
            if k < len(ops_a):
                ops_a[k]()
            if k < len(ops_b):
                ops_b[k]()
        for x in (a, b):
            if x:
                x[1]()

    # ---- grid tile -> coordinates, weights, masks, offsets ------------------------------------
    def CopyInGrid(self, tile):
        t = self.t
        n, p0, cnt = self._tile(tile)
        g = self.gridQ.AllocTensor(t.io)
        DataCopyPad(g, self.gridGm[(n * t.Ho * t.Wo + p0) * 2],
                    DataCopyExtParams(1, cnt * 2 * t.io.itemsize, 0, 0))
        self.gridQ.EnQue(g)

    def ComputeCoords(self, tile):
        t, s, P = self.t, self.s, self.t.P
        par = tile % 2
        g = self.gridQ.DeQue(t.io)
        xy = s.v("xy", 2)
        if t.io.itemsize != t.cdt.itemsize:
            gf = s.v("gridf", 2)
            Cast(gf, g, RoundMode.CAST_NONE, 2 * P)
            _t2d(xy, gf, P, 2)                 # [P][2] -> [2][P]: x then y
        else:
            _t2d(xy, g, P, 2)
        self.gridQ.FreeTensor(g)
        ix, iy = xy, xy[P]
        if t.interp == BICUBIC:
            self.mx, self.my = self.unnormalize(ix, t.W), self.unnormalize(iy, t.H)
            self.sanitize(ix)
            self.sanitize(iy)
            self.BicubicCoords(ix, iy, par)
        else:
            self.gxm, self.gym = s.v("gxm"), s.v("gym")
            self.source_index(ix, t.W, self.gxm)
            self.source_index(iy, t.H, self.gym)
            if t.interp == BILINEAR:
                self.BilinearCoords(ix, iy, par)
            else:
                self.NearestCoords(ix, iy, par)
        if t.need_x:
            SetFlag(HardEvent.V_MTE2, self.idxEvent)      # the offsets are in UB

    def unnormalize(self, v, size):
        """grid_sampler_unnormalize_set_grad: returns the constant d(coord)/d(grid)."""
        P = self.t.P
        Adds(v, v, 1.0, P)
        if self.t.align:
            Muls(v, v, 0.5, P)
            Muls(v, v, float(size - 1), P)
            return (size - 1) / 2.0
        Muls(v, v, float(size), P)
        Adds(v, v, -1.0, P)
        Muls(v, v, 0.5, P)
        return size / 2.0

    def sanitize(self, v):
        """NaN -> -100 (outside, as the CANN kernel does); clamp to +-2^23 (no int32 overflow)."""
        s, P = self.s, self.t.P
        m = s.m("m0")
        Compare(m, v, v, CMPMODE.EQ, P)
        Select(v, m, v, NAN_COORD, TS, P)
        Maxs(v, v, -COORD_LIMIT, P)
        Mins(v, v, COORD_LIMIT, P)

    def clip(self, v, size, g=None):
        """clip_coordinates(_set_grad): <= 0 -> 0 and >= size-1 -> size-1 with gradient 0."""
        s, P = self.s, self.t.P
        m = s.m("m0")
        if g is None:
            Maxs(v, v, 0.0, P)
            Mins(v, v, float(size - 1), P)
            return
        CompareScalar(m, v, 0.0, CMPMODE.GT, P)
        Select(v, m, v, 0.0, TS, P)
        Select(g, m, g, 0.0, TS, P)
        CompareScalar(m, v, float(size - 1), CMPMODE.LT, P)
        Select(v, m, v, float(size - 1), TS, P)
        Select(g, m, g, 0.0, TS, P)

    def reflect(self, v, twice_low, twice_high, g=None):
        """reflect_coordinates(_set_grad), with fmod and floor(in / span) as PyTorch has them."""
        s, P = self.s, self.t.P
        if twice_low == twice_high:
            Duplicate(v, 0.0, P)
            if g is not None:
                Duplicate(g, 0.0, P)
            return
        mn = twice_low / 2.0
        span = (twice_high - twice_low) / 2.0
        m, sg, q, e, h = s.m("m0"), s.v("r_sign"), s.v("r_q"), s.v("r_e"), s.v("r_h")
        qi = s.i("r_qi")
        Adds(v, v, -mn, P)
        if g is not None:
            CompareScalar(m, v, 0.0, CMPMODE.LT, P)
            Duplicate(sg, -1.0, P)
            Select(sg, m, sg, 1.0, TS, P)            # -1 where in < min
        Abs(v, v, P)
        Duplicate(q, span, P)
        Div(q, v, q, P)
        Cast(qi, q, RoundMode.CAST_FLOOR, P)
        Cast(q, qi, RoundMode.CAST_NONE, P)         # flips = floor(in / span)
        Muls(e, q, span, P)
        Sub(e, v, e, P)                             # in - flips * span
        CompareScalar(m, e, 0.0, CMPMODE.LT, P)     # in / span rounded up to the next integer:
        Adds(h, e, span, P)                         # fmod is one span more
        Select(e, m, h, e, TT, P)
        Muls(h, q, 0.5, P)
        Cast(qi, h, RoundMode.CAST_FLOOR, P)
        Cast(h, qi, RoundMode.CAST_NONE, P)
        Muls(h, h, 2.0, P)
        Sub(h, q, h, P)                             # flips % 2
        CompareScalar(m, h, 0.5, CMPMODE.LT, P)     # even flips
        Adds(q, e, mn, P)                           # extra + min
        Muls(h, e, -1.0, P)
        Adds(h, h, span, P)
        Adds(h, h, mn, P)                           # span - extra + min
        Select(v, m, q, h, TT, P)
        if g is not None:
            Muls(h, sg, -1.0, P)
            Select(sg, m, sg, h, TT, P)
            Mul(g, g, sg, P)

    def source_index(self, v, size, g):
        """grid_sampler_compute_source_index_set_grad: v in place, g = its gradient factor."""
        t = self.t
        mult = self.unnormalize(v, size)
        self.sanitize(v)
        Duplicate(g, mult, t.P)
        if t.padding == BORDER:
            self.clip(v, size, g)
        elif t.padding == REFLECTION:
            if t.align:
                self.reflect(v, 0.0, 2.0 * (size - 1), g)
            else:
                self.reflect(v, -1.0, 2.0 * size - 1.0, g)
            self.clip(v, size, g)

    def valid(self, dst, v, lo, hi):
        """dst = 1 where lo <= v <= hi (v integral floats), else 0."""
        s, P = self.s, self.t.P
        m = s.m("m0")
        CompareScalar(m, v, lo - 0.5, CMPMODE.GT, P)
        Select(dst, m, s.v("one"), 0.0, TS, P)
        CompareScalar(m, v, hi + 0.5, CMPMODE.LT, P)
        Select(dst, m, dst, 0.0, TS, P)

    def offsets(self, dst, yi, xi, ylo, yhi, xlo, xhi):
        """dst = (clamp(yi) * W + clamp(xi)) * C, int32 (xi / yi are clobbered)."""
        t, P = self.t, self.t.P
        Maxs(yi, yi, ylo, P)
        Mins(yi, yi, yhi, P)
        Maxs(xi, xi, xlo, P)
        Mins(xi, xi, xhi, P)
        Muls(dst, yi, t.W, P)
        Add(dst, dst, xi, P)
        Muls(dst, dst, t.C, P)

    def BilinearCoords(self, ix, iy, par):
        t, s, P = self.t, self.s, self.t.P
        x0i, y0i, a, b = s.i("x0i"), s.i("y0i"), s.i("ta"), s.i("tb")
        x0, y0, tx, ty, ux, uy = (s.v(n) for n in ("x0", "y0", "tx", "ty", "ux", "uy"))
        vx0, vx1, vy0, vy1 = (s.v(n) for n in ("vx0", "vx1", "vy0", "vy1"))
        for fi, f, v, tv, uv in ((x0i, x0, ix, tx, ux), (y0i, y0, iy, ty, uy)):
            Cast(fi, v, RoundMode.CAST_FLOOR, P)
            Cast(f, fi, RoundMode.CAST_NONE, P)
            Sub(tv, v, f, P)                        # ix - ix_nw
            Adds(uv, f, 1.0, P)
            Sub(uv, uv, v, P)                       # ix_se - ix
        self.valid(vx0, x0, 0, t.W - 1)
        self.valid(vx1, x0, -1, t.W - 2)
        self.valid(vy0, y0, 0, t.H - 1)
        self.valid(vy1, y0, -1, t.H - 2)
        w, vm = s.v("w", 4), s.v("vm", 4)
        ax0, ax1, by0, by1 = s.v("ax0"), s.v("ax1"), s.v("by0"), s.v("by1")
        Mul(ax0, ux, vx0, P)
        Mul(ax1, tx, vx1, P)
        Mul(by0, uy, vy0, P)
        Mul(by1, ty, vy1, P)
        for k, (xa, ya, xv, yv) in enumerate(((ax0, by0, vx0, vy0), (ax1, by0, vx1, vy0),
                                              (ax0, by1, vx0, vy1), (ax1, by1, vx1, vy1))):
            Mul(w[k * P], xa, ya, P)                # nw, ne, sw, se
            Mul(vm[k * P], xv, yv, P)
        self.w, self.vm = w, vm
        for r, (_, _, dy, _) in enumerate(t.runs):
            Adds(a, y0i, dy, P)
            Copy(b, x0i, P)
            self.offsets(s.i(f"idx{par}_{r}"), a, b, 0, t.H - 1, -1, t.W - 1)

    def NearestCoords(self, ix, iy, par):
        t, s, P = self.t, self.s, self.t.P
        xi, yi = s.i("x0i"), s.i("y0i")
        x, y, vx, vy = s.v("x0"), s.v("y0"), s.v("vx0"), s.v("vy0")
        Cast(xi, ix, RoundMode.CAST_RINT, P)        # nearbyint: half to even
        Cast(yi, iy, RoundMode.CAST_RINT, P)
        Cast(x, xi, RoundMode.CAST_NONE, P)
        Cast(y, yi, RoundMode.CAST_NONE, P)
        self.valid(vx, x, 0, t.W - 1)
        self.valid(vy, y, 0, t.H - 1)
        w = s.v("w", 1)
        Mul(w, vx, vy, P)
        self.w = w
        self.offsets(s.i(f"idx{par}_0"), yi, xi, 0, t.H - 1, 0, t.W - 1)

    def cubic(self, c, cg, tv):
        """PyTorch's get_cubic_upsample_coefficients (c: 4 vectors) and
        get_cubic_coefficients_grad (cg), for the fractional part tv."""
        s, P, A = self.s, self.t.P, CUBIC_A
        u = s.v("cu")
        # c0 = conv2(t + 1), c1 = conv1(t), c2 = conv1(1 - t), c3 = conv2(2 - t)
        for k, (sign, off, conv) in enumerate(((1, 1.0, 2), (1, 0.0, 1), (-1, 1.0, 1), (-1, 2.0, 2))):
            Muls(u, tv, float(sign), P)
            Adds(u, u, off, P)                      # x
            d = c[k * P]
            if conv == 1:                           # ((A + 2) x - (A + 3)) x x + 1
                Muls(d, u, A + 2, P)
                Adds(d, d, -(A + 3), P)
                Mul(d, d, u, P)
                Mul(d, d, u, P)
                Adds(d, d, 1.0, P)
            else:                                   # ((A x - 5A) x + 8A) x - 4A
                Muls(d, u, A, P)
                Adds(d, d, -5 * A, P)
                Mul(d, d, u, P)
                Adds(d, d, 8 * A, P)
                Mul(d, d, u, P)
                Adds(d, d, -4 * A, P)
        # gradients: x = -1 - t, -t, 1 - t, 2 - t
        forms = ((-1.0, -3 * A, -10 * A, -8 * A), (0.0, -3 * (A + 2), -2 * (A + 3), None),
                 (1.0, 3 * (A + 2), -2 * (A + 3), None), (2.0, 3 * A, -10 * A, 8 * A))
        for k, (off, p2, p1, p0) in enumerate(forms):
            Muls(u, tv, -1.0, P)
            Adds(u, u, off, P)
            d = cg[k * P]
            Muls(d, u, p2, P)
            Adds(d, d, p1, P)
            Mul(d, d, u, P)
            if p0 is not None:
                Adds(d, d, p0, P)

    def pad_tap(self, v, size):
        """compute_coordinates for an integer tap (bicubic): border clip, reflection reflect+clip."""
        t = self.t
        if t.padding == REFLECTION:
            if t.align:
                self.reflect(v, 0.0, 2.0 * (size - 1))
            else:
                self.reflect(v, -1.0, 2.0 * size - 1.0)
        self.clip(v, size)

    def BicubicCoords(self, ix, iy, par):
        t, s, P = self.t, self.s, self.t.P
        x0i, y0i, a, b = s.i("x0i"), s.i("y0i"), s.i("ta"), s.i("tb")
        x0, y0, tx, ty = s.v("x0"), s.v("y0"), s.v("tx"), s.v("ty")
        for fi, f, v, tv in ((x0i, x0, ix, tx), (y0i, y0, iy, ty)):
            Cast(fi, v, RoundMode.CAST_FLOOR, P)
            Cast(f, fi, RoundMode.CAST_NONE, P)
            Sub(tv, v, f, P)
        cx, cy, gx, gy = s.v("cx", 4), s.v("cy", 4), s.v("gcx", 4), s.v("gcy", 4)
        self.cubic(cx, gx, tx)
        self.cubic(cy, gy, ty)
        self.cx, self.cy, self.gcx, self.gcy = cx, cy, gx, gy
        w = s.v("w", 16)
        if t.padding == ZEROS:
            vx, vy, vm = s.v("vx", 4), s.v("vy", 4), s.v("vm", 16)
            ax, by = s.v("ax", 4), s.v("by", 4)
            for i in range(4):
                self.valid(vx[i * P], x0, 1 - i, t.W - i)       # x0 - 1 + i in [0, W-1]
                self.valid(vy[i * P], y0, 1 - i, t.H - i)
                Mul(ax[i * P], cx[i * P], vx[i * P], P)
                Mul(by[i * P], cy[i * P], vy[i * P], P)
            for j in range(4):
                for i in range(4):
                    Mul(w[(4 * j + i) * P], ax[i * P], by[j * P], P)
                    Mul(vm[(4 * j + i) * P], vx[i * P], vy[j * P], P)
            self.vm = vm
            for r, (_, _, dy, dx) in enumerate(t.runs):
                Adds(a, y0i, dy, P)
                Adds(b, x0i, dx, P)
                self.offsets(s.i(f"idx{par}_{r}"), a, b, 0, t.H - 1, -3, t.W - 1)
        else:
            xt, yt = s.v("xt", 4), s.v("yt", 4)
            for i in range(4):
                Adds(xt[i * P], x0, float(i - 1), P)
                self.pad_tap(xt[i * P], t.W)
                Adds(yt[i * P], y0, float(i - 1), P)
                self.pad_tap(yt[i * P], t.H)
            for j in range(4):
                for i in range(4):
                    Mul(w[(4 * j + i) * P], cx[i * P], cy[j * P], P)
            self.vm = None
            xs = [s.i(f"xt{i}") for i in range(4)]
            ys = [s.i(f"yt{i}") for i in range(4)]
            for i in range(4):
                Cast(xs[i], xt[i * P], RoundMode.CAST_RINT, P)
                Cast(ys[i], yt[i * P], RoundMode.CAST_RINT, P)
                Muls(ys[i], ys[i], t.W, P)
            for j in range(4):
                for i in range(4):
                    d = s.i(f"idx{par}_{4 * j + i}")
                    Add(d, ys[j], xs[i], P)
                    Muls(d, d, t.C, P)
        self.w = w

    # ---- per channel chunk --------------------------------------------------------------------
    def CopyInGradOutput(self, tile, ch):
        """gradOutput[n, c0:c0+cc, p0:p0+cnt] channel-major, rows P elements apart."""
        t = self.t
        n, p0, cnt = self._tile(tile)
        c0 = ch * t.Cc
        cc = min(t.Cc, t.C - c0)
        isz = t.io.itemsize
        g = self.gQ.AllocTensor(t.io)
        HoWo = t.Ho * t.Wo
        row = align_up(cnt * isz, 32)
        DataCopyPad(g, self.goGm[(n * t.C + c0) * HoWo + p0],
                    DataCopyExtParams(cc, cnt * isz, (HoWo - cnt) * isz, (t.P * isz - row) // 32))
        self.gQ.EnQue(g)

    def _chunk_gm(self, base: GM_ADDR, n, c0) -> GlobalTensor:
        t = self.t
        g = GlobalTensor(t.cdt)
        g.SetGlobalBuffer(base + ((t.pad + n * t.H * t.W) * t.C + c0))
        return g

    def _nominal(self, n, p0, p, dy, dx, L, c0):
        """The element offset an identity grid would touch (for the L2 model only)."""
        t = self.t
        ho, wo = divmod(p0 + p, t.Wo)
        y = min(max(ho * t.H // t.Ho + dy, 0), t.H - 1)
        x = min(max(wo * t.W // t.Wo + dx, -t.pad), t.W - L + t.pad)
        return (y * t.W + x) * t.C

    def GatherOps(self, tile, ch):
        """Allocate the corner buffer now; return (the gathers, the EnQue that ends them)."""
        t, P, Ccp = self.t, self.t.P, self.t.Ccp
        n, p0, cnt = self._tile(tile)
        c0 = ch * t.Cc
        cc = min(t.Cc, t.C - c0)
        esz = t.cdt.itemsize
        x = self.xQ.AllocTensor(t.cdt)
        if ch == 0:
            WaitFlag(HardEvent.V_MTE2, self.idxEvent)
        gm = self._chunk_gm(self.xws, n, c0)
        ops = []
        for r, (k0, L, dy, dx) in enumerate(t.runs):
            idx = self.s.i(f"idx{tile % 2}_{r}")
            params = DataCopyExtParams(L, cc * esz, (t.C - cc) * esz,
                                       (P * Ccp * esz - align_up(cc * esz, 32)) // 32)
            for p in range(cnt):
                ops.append(partial(DataCopyPadIndirect, x[(k0 * P + p) * Ccp], gm, params, idx, p,
                                   nominal=self._nominal(n, p0, p, dy, dx, L, c0)))
        return ops, partial(self.xQ.EnQue, x)

    def ComputeChunk(self, tile, ch):
        t, s, P, Ccp, K = self.t, self.s, self.t.P, self.t.Ccp, self.t.K
        cc = min(t.Cc, t.C - ch * t.Cc)
        KP = K * P
        g = self.gQ.DeQue(t.io)
        gpm = self.gpmBuf.Get(t.cdt)
        if t.io.itemsize != t.cdt.itemsize:
            gf = self.gfBuf.Get(t.cdt)
            Cast(gf, g, RoundMode.CAST_NONE, Ccp * P)
            _t2d(gpm, gf, Ccp, P)              # [C][P] -> [P][C]
        else:
            _t2d(gpm, g, Ccp, P)
        self.gQ.FreeTensor(g)
        T = self.tBuf.Get(t.cdt)
        if t.need_x:
            x = self.xQ.DeQue(t.cdt)
            for k in range(K):
                Mul(x[k * P * Ccp], x[k * P * Ccp], gpm, P * Ccp)
            _t2d(T, x, KP, Ccp)                # [K*P][C] -> [C][K*P]
            self.xQ.FreeTensor(x)
            rows = cc                               # sum the channel rows: a tree of Adds
            while rows > 1:
                h = rows // 2
                Add(T, T, T[(rows - h) * KP], h * KP)
                rows -= h
            d = s.v("d", K)
            if ch == 0:
                Copy(d, T, KP)
            else:
                Add(d, d, T, KP)
        if t.need_in:
            S = self.sQ.AllocTensor(t.cdt)
            Copy(T, self.w, KP)                     # the weights, repeated along the channels
            rows = 1
            while rows < Ccp:
                m = min(rows, Ccp - rows)
                Copy(T[rows * KP], T, m * KP)
                rows += m
            _t2d(S, T, Ccp, KP)                # [C][K*P] -> [K*P][C]
            for k in range(K):
                Mul(S[k * P * Ccp], S[k * P * Ccp], gpm, P * Ccp)
            self.sQ.EnQue(S)

    def ScatterOps(self, tile, ch):
        """Take the contributions now; return (the atomic scatters, what ends them)."""
        t, P, Ccp = self.t, self.t.P, self.t.Ccp
        n, p0, cnt = self._tile(tile)
        c0 = ch * t.Cc
        cc = min(t.Cc, t.C - c0)
        esz = t.cdt.itemsize
        S = self.sQ.DeQue(t.cdt)
        gm = self._chunk_gm(self.acc, n, c0)
        SetAtomicAdd(t.cdt)                         # MTE3's stores to GM now add
        ops = []
        for r, (k0, L, dy, dx) in enumerate(t.runs):
            idx = self.s.i(f"idx{tile % 2}_{r}")
            params = DataCopyExtParams(L, cc * esz, (P * Ccp * esz - align_up(cc * esz, 32)) // 32,
                                       (t.C - cc) * esz)
            for p in range(cnt):
                ops.append(partial(DataCopyPadIndirect, gm, S[(k0 * P + p) * Ccp], params, idx, p,
                                   nominal=self._nominal(n, p0, p, dy, dx, L, c0)))

        def finish():
            SetAtomicNone()
            self.sQ.FreeTensor(S)
        return ops, finish

    # ---- gridGrad -----------------------------------------------------------------------------
    def ComputeGridGrad(self):
        t, s, P = self.t, self.s, self.t.P
        gg = self.ggQ.AllocTensor(t.io)
        g2 = s.v("g2", 2)
        gx, gy = g2, g2[P]
        if t.interp == NEAREST:
            Duplicate(g2, 0.0, 2 * P)
        else:
            d = s.v("d", t.K)
            if self.vm is not None:
                Mul(d, d, self.vm, t.K * P)         # out-of-bounds corners contribute nothing
            u = s.v("gu")
            if t.interp == BILINEAR:
                Dk = [d[k * P] for k in range(4)]   # nw, ne, sw, se
                uy, ty, ux, tx = s.v("uy"), s.v("ty"), s.v("ux"), s.v("tx")
                Sub(u, Dk[1], Dk[0], P)
                Mul(gx, u, uy, P)
                Sub(u, Dk[3], Dk[2], P)
                Mul(u, u, ty, P)
                Add(gx, gx, u, P)                   # (ne - nw)(1 - ty) + (se - sw) ty
                Sub(u, Dk[2], Dk[0], P)
                Mul(gy, u, ux, P)
                Sub(u, Dk[3], Dk[1], P)
                Mul(u, u, tx, P)
                Add(gy, gy, u, P)                   # (sw - nw)(1 - tx) + (se - ne) tx
                Mul(gx, gx, self.gxm, P)
                Mul(gy, gy, self.gym, P)
            else:
                e = s.v("ge")
                Duplicate(gx, 0.0, 2 * P)
                for j in range(4):                  # gix = -sum_j cy_j sum_i D_ij gcx_i
                    Mul(e, d[(4 * j) * P], self.gcx, P)
                    for i in range(1, 4):
                        Mul(u, d[(4 * j + i) * P], self.gcx[i * P], P)
                        Add(e, e, u, P)
                    Mul(e, e, self.cy[j * P], P)
                    Sub(gx, gx, e, P)
                for i in range(4):                  # giy = -sum_i cx_i sum_j D_ij gcy_j
                    Mul(e, d[i * P], self.gcy, P)
                    for j in range(1, 4):
                        Mul(u, d[(4 * j + i) * P], self.gcy[j * P], P)
                        Add(e, e, u, P)
                    Mul(e, e, self.cx[i * P], P)
                    Sub(gy, gy, e, P)
                Muls(gx, gx, self.mx, P)
                Muls(gy, gy, self.my, P)
        if t.io.itemsize != t.cdt.itemsize:
            gT = s.v("gT", 2)
            _t2d(gT, g2, 2, P)                 # [2][P] -> [P][2]
            Cast(gg, gT, RoundMode.CAST_RINT, 2 * P)
        else:
            _t2d(gg, g2, 2, P)
        self.ggQ.EnQue(gg)

    def CopyOutGridGrad(self, tile):
        t = self.t
        n, p0, cnt = self._tile(tile)
        gg = self.ggQ.DeQue(t.io)
        DataCopyPad(self.ggGm[(n * t.Ho * t.Wo + p0) * 2], gg,
                    DataCopyExtParams(1, cnt * 2 * t.io.itemsize, 0, 0))
        self.ggQ.FreeTensor(gg)


def grid_sampler2d_grad_kernel(gradOutput, grid, xws, acc, gridGrad, tiling):
    op = KernelGridSampler2DGrad()
    op.Init(gradOutput, grid, xws, acc, gridGrad, tiling)
    op.Process()


# ---------------------------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------------------------
def _mask(a: dict):
    m = a["outputMask"]
    if m is None:
        return None
    vals = tuple(getattr(m, "values", m))
    return vals


def check(a: dict, profile) -> None:
    mask = _mask(a)
    if mask is None:
        return                                       # nothing to compute (plan: workspace 0)
    if len(mask) != 2:
        raise param_invalid(f"outputMask must have 2 entries (inputGrad, gridGrad), got {len(mask)}")
    if not any(mask):
        return
    names = ["gradOutput", "input", "grid"] + [n for n, on in zip(("inputGrad", "gridGrad"), mask) if on]
    require_present(a, names)
    support = require_support(OP, profile)
    for name in names:
        check_tensor_view(a[name], name)
    x = a["input"]
    xdt = dtype_name(x.dataType)
    for name in names:
        if a[name].dataType != x.dataType:
            raise param_invalid(f"{name} has dtype {dtype_name(a[name].dataType)}; it must equal "
                                f"input's ({xdt})")
    if xdt not in support.dtypes:
        raise param_invalid(f"input has dtype {xdt}; {profile.series_name} supports "
                            f"{', '.join(support.dtypes)}")
    for name in names:
        if len(a[name].viewDims) != 4:
            raise param_invalid(f"{name} must be 4-D, got shape {list(a[name].viewDims)}")
    go, g = a["gradOutput"].viewDims, a["grid"].viewDims
    xs = x.viewDims
    if not (xs[0] == g[0] == go[0]):
        raise param_invalid(f"input, grid and gradOutput must have one batch size, got input "
                            f"{list(xs)}, grid {list(g)}, gradOutput {list(go)}")
    if xs[1] != go[1]:
        raise param_invalid(f"input and gradOutput must have one channel count, got input "
                            f"{list(xs)} and gradOutput {list(go)}")
    if xs[2] == 0 or xs[3] == 0:
        raise param_invalid(f"input must have non-empty spatial dimensions, got {list(xs)}")
    if g[1] != go[2] or g[2] != go[3]:
        raise param_invalid(f"grid dims 1, 2 must equal gradOutput dims 2, 3, got grid {list(g)} "
                            f"and gradOutput {list(go)}")
    if g[3] != 2:
        raise param_invalid(f"grid's last dimension must be 2, got {list(g)}")
    if mask[0] and a["inputGrad"].viewDims != xs:
        raise param_invalid(f"inputGrad shape {list(a['inputGrad'].viewDims)} must equal input's {list(xs)}")
    if mask[1] and a["gridGrad"].viewDims != g:
        raise param_invalid(f"gridGrad shape {list(a['gridGrad'].viewDims)} must equal grid's {list(g)}")
    modes = support.options.get("interpolation_modes", [BILINEAR, NEAREST])
    im, pm = a["interpolationMode"], a["paddingMode"]
    if not isinstance(im, (int, np.integer)) or isinstance(im, bool) or int(im) not in modes:
        raise param_invalid(f"interpolationMode {im!r} is not supported on {profile.series_name} "
                            f"(supported: {list(modes)})")
    if not isinstance(pm, (int, np.integer)) or isinstance(pm, bool) or int(pm) not in PADDING_MODES:
        raise param_invalid(f"paddingMode {pm!r} must be 0 (zeros), 1 (border) or 2 (reflection)")


# ---------------------------------------------------------------------------------------------
# plan
# ---------------------------------------------------------------------------------------------
def _nothing(note: str) -> Plan:
    return Plan([], lambda ws: [], {"note": note})


def plan(a: dict, profile) -> Plan:
    mask = _mask(a)
    if mask is None or not any(mask):
        return _nothing("outputMask is null or all false: nothing to compute")
    want_in, want_gg = bool(mask[0]), bool(mask[1])
    x, go, grid = a["input"], a["gradOutput"], a["grid"]
    N, C, H, W = x.viewDims
    Ho, Wo = grid.viewDims[1], grid.viewDims[2]
    interp, padding, align = int(a["interpolationMode"]), int(a["paddingMode"]), bool(a["alignCorners"])
    io = NUMPY_OF[x.dataType]
    cdt = np.dtype(np.float64) if x.dataType == aclDataType.ACL_DOUBLE else np.dtype(np.float32)
    outs = {"inputGrad": a["inputGrad"] if want_in else None,
            "gridGrad": a["gridGrad"] if want_gg else None}
    workspace: list[tuple[str, int]] = []

    def add_ws(purpose: str, nbytes: int) -> int:
        workspace.append((purpose, nbytes))
        return len(workspace) - 1

    empty = N * C * Ho * Wo == 0
    # ---- empty gradients: the outputs that are not empty are zeros ----
    if empty:
        zero_jobs = []
        for name, t in outs.items():
            if t is None or t.numel() == 0:
                continue
            nbytes = t.numel() * t.itemsize
            if t.is_contiguous():
                zero_jobs.append((name, t, None, nbytes))
            else:
                zero_jobs.append((name, t, add_ws(f"zeros for {name} before the strided write-back", nbytes), nbytes))
        if not zero_jobs:
            return _nothing("empty tensors: nothing to compute")
        p = Plan(workspace, lambda ws: [], {"note": "empty gradOutput: the gradients are zeros"})
        offs = list(p.workspace_offsets().values())

        def build_empty(ws):
            launches = []
            for name, t, idx, nbytes in zero_jobs:
                if idx is None:
                    dst = tensor_arg(t, name) + t.offset
                    launches.append(KernelLaunch(f"InitOutput({name})", zero_kernel,
                                                 len(plan_zero(nbytes, profile).blocks), "vector",
                                                 (dst, plan_zero(nbytes, profile))))
                else:
                    dense = workspace_arg(ws, offs[idx], nbytes, t.dtype, f"workspace:{name}")
                    zt = plan_zero(nbytes, profile)
                    launches.append(KernelLaunch(f"InitOutput({name})", zero_kernel, len(zt.blocks),
                                                 "vector", (dense, zt)))
                    launches.append(view_copy_launch(t, name, profile, gather=False)[0](dense))
            return launches
        p.build = build_empty
        return p

    if interp == NEAREST and not want_in:
        # gridGrad of nearest sampling is zero everywhere
        t = outs["gridGrad"]
        nbytes = t.numel() * t.itemsize
        idx = None if t.is_contiguous() else add_ws("zeros for gridGrad before the strided write-back", nbytes)
        p = Plan(workspace, lambda ws: [], {"note": "nearest: gridGrad is zero; no inputGrad wanted"})
        offs = list(p.workspace_offsets().values())

        def build_zero(ws):
            zt = plan_zero(nbytes, profile)
            if idx is None:
                return [KernelLaunch("InitOutput(gridGrad)", zero_kernel, len(zt.blocks), "vector",
                                     (tensor_arg(t, "gridGrad") + t.offset, zt))]
            dense = workspace_arg(ws, offs[idx], nbytes, t.dtype, "workspace:gridGrad")
            return [KernelLaunch("InitOutput(gridGrad)", zero_kernel, len(zt.blocks), "vector", (dense, zt)),
                    view_copy_launch(t, "gridGrad", profile, gather=False)[0](dense)]
        p.build = build_zero
        return p

    t = plan_main(N, C, H, W, Ho, Wo, interp, padding, align, io, cdt, want_in, want_gg, profile,
                  tiling_override(OP))
    esz = cdt.itemsize
    # ---- contiguous inputs ----
    contig = {}
    for name, tensor in (("gradOutput", go), ("input", x), ("grid", grid)):
        if name == "input" and not t.need_x:
            continue
        if not tensor.is_contiguous():
            contig[name] = add_ws(f"contiguous copy of {name} (non-contiguous input)",
                                  tensor.numel() * tensor.itemsize)
    nhwc_bytes = ((N * H * W) + 2 * t.pad) * C * esz
    x_idx = add_ws(f"input transposed to NHWC in {dtype_name(cdt)}, {t.pad} zero pixel(s) each end, "
                   f"for the corner gathers", nhwc_bytes) if t.need_x else None
    acc_idx = add_ws(f"inputGrad accumulator, NHWC {dtype_name(cdt)}, {t.pad} pixel(s) each end: "
                     f"the atomic adds land here", nhwc_bytes) if want_in else None
    out_idx = {}
    for name, tensor in outs.items():
        if tensor is not None and not tensor.is_contiguous():
            out_idx[name] = add_ws(f"contiguous {name} before the strided write-back",
                                   tensor.numel() * tensor.itemsize)
    lay_in = plan_layout(N, C, H * W, io, cdt, t.pad, profile) if t.need_x else None
    lay_out = plan_layout(N, C, H * W, cdt, io, t.pad, profile) if want_in else None
    gathers = N * Ho * Wo * len(t.runs) * t.nch if t.need_x else 0
    scatters = N * Ho * Wo * len(t.runs) * t.nch if want_in else 0
    tiling = {"blockDim": len(t.blocks), "pointsPerTile": t.P, "channelsPerChunk": t.Cc,
              "channelChunks": t.nch, "cornerPlanes": t.K, "runsPerPoint": len(t.runs),
              "gathers": gathers, "gatherBytes": gathers * sum(L for _, L, _, _ in t.runs) // max(len(t.runs), 1) * C * esz,
              "atomicScatters": scatters,
              "atomicBytes": scatters * sum(L for _, L, _, _ in t.runs) // max(len(t.runs), 1) * C * esz,
              "computeDtype": dtype_name(cdt), "interpolationMode": interp, "paddingMode": padding,
              "alignCorners": align, "outputMask": [want_in, want_gg]}
    p = Plan(workspace, lambda ws: [], tiling)
    offs = list(p.workspace_offsets().values())
    builders = {name: view_copy_launch(tensor, name, profile, gather=True)[0]
                for name, tensor in (("gradOutput", go), ("input", x), ("grid", grid)) if name in contig}
    out_builders = {name: view_copy_launch(outs[name], name, profile, gather=False)[0] for name in out_idx}

    def build(ws):
        launches = []
        args = {}
        for name, tensor in (("gradOutput", go), ("input", x), ("grid", grid)):
            if name in contig:
                dense = workspace_arg(ws, offs[contig[name]], tensor.numel() * tensor.itemsize,
                                      tensor.dtype, f"workspace:{name}")
                launches.append(builders[name](dense))
                args[name] = dense
            else:
                args[name] = tensor_arg(tensor, name) + tensor.offset
        xws = acc = None
        if t.need_x:
            xws = workspace_arg(ws, offs[x_idx], nhwc_bytes, cdt, "workspace:input NHWC")
            launches.append(KernelLaunch("TransposeToNHWC(input)", nchw_to_nhwc_kernel,
                                         len(lay_in.blocks), "vector", (args["input"], xws, lay_in)))
        if want_in:
            acc = workspace_arg(ws, offs[acc_idx], nhwc_bytes, cdt, "workspace:inputGrad accumulator")
            zt = plan_zero(nhwc_bytes, profile)
            launches.append(KernelLaunch("InitWorkspace(inputGrad accumulator)", zero_kernel,
                                         len(zt.blocks), "vector", (acc, zt)))
        dst = {}
        for name, tensor in outs.items():
            if tensor is None:
                dst[name] = None
            elif name in out_idx:
                dst[name] = workspace_arg(ws, offs[out_idx[name]], tensor.numel() * tensor.itemsize,
                                          tensor.dtype, f"workspace:{name}")
            else:
                dst[name] = tensor_arg(tensor, name) + tensor.offset
        launches.append(KernelLaunch("GridSampler2DGrad", grid_sampler2d_grad_kernel, len(t.blocks),
                                     "vector", (args["gradOutput"], args["grid"], xws, acc,
                                                dst["gridGrad"], t)))
        if want_in:
            launches.append(KernelLaunch("TransposeCast(inputGrad)", nhwc_to_nchw_kernel,
                                         len(lay_out.blocks), "vector", (acc, dst["inputGrad"], lay_out)))
        for name in out_idx:
            launches.append(out_builders[name](dst[name]))
        return launches

    p.build = build
    return p


def infer_outputs(inputs: dict) -> dict:
    x, grid = inputs["input"], inputs["grid"]
    mask = inputs.get("outputMask")
    mask = (True, True) if mask is None else tuple(mask)
    out = {}
    if len(mask) > 0 and mask[0]:
        out["inputGrad"] = (tuple(x.shape), x.dtype)
    if len(mask) > 1 and mask[1]:
        out["gridGrad"] = (tuple(grid.shape), grid.dtype)
    return out


register(OpDef(OP,
               [Param("gradOutput", "tensor"), Param("input", "tensor"), Param("grid", "tensor"),
                Param("interpolationMode", "int"), Param("paddingMode", "int"),
                Param("alignCorners", "bool"), Param("outputMask", "bool_array"),
                Param("inputGrad", "tensor", output=True), Param("gridGrad", "tensor", output=True)],
               check, plan, infer_outputs, tiling_fields=TILING_FIELDS))
