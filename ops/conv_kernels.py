"""The convolution-backward computation shared by aclnnConvolutionBackward and
aclnnConvTbcBackward: the plan (workspace parts and launches) and the kernels.

Both gradients are GEMMs over an img2col'd feature map held in L1 as NC1HWC0 (C0 = 32 B):

* gradInput = a transposed convolution: dX[pos, ci] = sum_{c, k} F[c, pos*S + k*D - P] * W'[ci, (c, k)]
  with F = gradOutput dilated by the stride (holes are zeros) and W' the weight with its taps
  flipped and its channel roles swapped (non-transposed convolution), or F = gradOutput and W' the
  weight as it is (transposed convolution: its input gradient is a plain convolution).
  Cube: A = load3d img2col(F) (positions x (c1, kh, kw, c0)) into L0A, B = W'^T via ND->NZ and
  load2d into L0B, Mmad into L0C, out as (positions x ci) rows (Fixpipe NZ->ND on A2; L0C -> UB
  -> GM on the coupled chips) into the workspace, then a vector pass transposes to NCHW.
* gradWeight = a GEMM over the img2col'd input: dW[m, (c1, kh, kw, c0)] = sum_{n, pos}
  A[n, m, pos] * F[n, c, pos*S + k*D - P] with A = gradOutput and F = input (roles swap when
  transposed). Cube: A via ND->NZ + load2d into L0A, B = load3d img2col(F) into L0B (k =
  positions), Mmad into L0C. The reduction over N x positions is split over cores; their partial
  sums meet in an FP32 accumulator in the workspace by atomic add (Fixpipe / MTE3), and a vector
  pass casts and reorders it into gradWeight.
* gradBias = a vector reduction of gradOutput over N and the spatial positions.

Before the Cube kernels, vector passes (TransData) bring the operands into the Cube's layouts and
compute dtype: NCHW -> NC1HWC0 (with the stride dilation for dX), the weight into W'^T, a cast of
the dW left operand. Non-contiguous views are first made contiguous (Contiguous) and results for
non-contiguous outputs are written back by ViewCopy, as CANN's l0op does. Every intermediate
buffer is a named workspace part.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from simulator.aclnn import Plan, tiling_override
from simulator.enums import NUMPY_OF, AclnnError, aclnnStatus, dtype_name
from simulator.kernel import (GM_ADDR, Add, Cast, DataCopy, DataCopyExtParams, DataCopyPad,
                              DataCopyParams, Duplicate, GetBlockIdx, GlobalTensor, HardEvent,
                              RoundMode, SetAtomicAdd, SetAtomicNone, SetFlag, TBuf, TPipe,
                              TPosition, TQue, WaitFlag, float32)
from simulator.kernel.cube import (CFG_ROW_MAJOR, BlockMode, DataCopyEnhancedParams, DeqScale,
                                   Fixpipe, FixpipeParamsV220, InitConstValue, InitConstValueParams,
                                   LoadData, LoadData2DParams, LoadData3DParamsV2, Mmad, MmadParams,
                                   Nd2NzParams, SetHF32Mode, TransposeParamsExt, TransposeType)
from simulator.kernel.cube import Transpose as TransposeExt
from simulator.machine import KernelLaunch, align_up, ceil_div

from .common import tensor_arg, ub_bytes, vector_core_count, view_copy_launch, workspace_arg

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
STORAGE = {"FLOAT16": F16, "BF16": BF16, "FLOAT": F32, "HF32": F32}
TILING_FIELDS = {"baseM", "baseN", "baseK", "dxBaseM", "dxBaseN", "dxBaseK", "dwBaseM", "dwBaseN",
                 "dwBaseK", "doubleBuffer", "dwKSplit", "blockDim"}


def tiling_error(msg: str) -> AclnnError:
    return AclnnError(aclnnStatus.ACLNN_ERR_INNER_TILING_ERROR, msg)


# =============================================================================================
# geometry of the two GEMMs
# =============================================================================================
@dataclass
class Img2col:
    """One img2col GEMM family: feature map F (N, G, C1, Df, Hf, Wf, C0) in the workspace, output
    grid (Do, Ho, Wo), stride S, dilation D, before-padding P (may be negative: a crop), K taps."""
    N: int
    G: int
    C: int             # channels of F per group (real)
    C1: int
    fdims: tuple       # (Df, Hf, Wf)
    odims: tuple       # (Do, Ho, Wo)
    S: tuple
    D: tuple
    P: tuple
    K: tuple           # (KD, KH, KW)

    @property
    def khw(self) -> int:
        return self.K[1] * self.K[2]

    @property
    def positions(self) -> int:
        return self.odims[0] * self.odims[1] * self.odims[2]

    def axis_window(self, axis: int, o0: int, cnt: int):
        """Source range and pads of the receptive field of outputs [o0, o0+cnt) along H (1) or
        W (2): (lo, length, pad_before, pad_after); length 0 if it misses the map."""
        s, d, p, k, f = self.S[axis], self.D[axis], self.P[axis], self.K[axis], self.fdims[axis]
        v0 = o0 * s - p                           # source coordinate of the first tap of o0
        ext = (cnt - 1) * s + d * (k - 1) + 1     # virtual extent
        lo = max(v0, 0)
        hi = min(v0 + ext, f)
        if hi <= lo:
            return 0, 0, 0, 0
        before = lo - v0
        return lo, hi - lo, before, ext - before - (hi - lo)


@dataclass
class Rect:
    n: int
    od: int
    oh0: int
    th: int
    ow0: int
    tw: int

    @property
    def m(self) -> int:
        return self.th * self.tw


def rects(ic: Img2col, target: int) -> list[Rect]:
    """Output positions cut into rectangles of about `target` positions: whole rows when a row
    fits (positions contiguous in NCHW), else pieces of one row."""
    _, Ho, Wo = ic.odims
    out = []
    if Wo <= target:
        th = max(1, min(Ho, target // Wo))
        for n in range(ic.N):
            for od in range(ic.odims[0]):
                for oh0 in range(0, Ho, th):
                    out.append(Rect(n, od, oh0, min(th, Ho - oh0), 0, Wo))
    else:
        for n in range(ic.N):
            for od in range(ic.odims[0]):
                for oh0 in range(Ho):
                    for ow0 in range(0, Wo, target):
                        out.append(Rect(n, od, oh0, 1, ow0, min(target, Wo - ow0)))
    return out


# =============================================================================================
# the tiling plan
# =============================================================================================
@dataclass
class CubeTiling:
    """Host-side tiling of one Cube kernel, as the kernel receives it."""
    name: str
    baseM: int              # dX: positions per L0C tile; dW: rows (channels) per L0C tile
    baseN: int              # dX: channels per L0C tile; dW: img2col columns per L0C tile
    baseK: int              # dX: img2col columns per Mmad; dW: positions per Mmad
    c1Chunk: int            # C1 planes of the feature map per L1 slab (dX)
    doubleBuffer: bool
    blockDim: int
    kSplit: int = 1
    l1Bytes: int = 0
    l0Bytes: dict = field(default_factory=dict)


def _buf(profile, kind, name):
    return profile.core_kind_for(kind)[1].buffers.get(name, 0)


def _check_fit(what: dict, caps: dict, label: str):
    for buf, need in what.items():
        if need > caps[buf]:
            raise tiling_error(f"{label}: {need} B of {buf} does not fit: {buf} holds {caps[buf]} B "
                               f"({what[buf + '_why'] if buf + '_why' in what else ''})".rstrip(" ()"))


def _pick(ov: dict, key: str, gen: str, default: int) -> int:
    v = ov.get(key, ov.get(gen, default))
    if int(v) <= 0:
        raise tiling_error(f"tiling override: {key} = {v} must be positive")
    return int(v)


def plan_dx_tiling(ic: Img2col, cout: int, isz: int, profile, ov: dict, c0: int) -> tuple[CubeTiling, list]:
    caps = {b: _buf(profile, "cube", b) for b in ("L1", "L0A", "L0B", "L0C")}
    db = bool(ov.get("doubleBuffer", True))
    nb = 2 if db else 1
    baseN = _pick(ov, "dxBaseN", "baseN", min(align_up(cout, 16), 128 if isz == 2 else 64))
    baseM = _pick(ov, "dxBaseM", "baseM", 128 if ic.odims[2] <= 128 else 128)
    kcols = ic.C1 * ic.khw * c0
    default_k = max(c0, min(kcols, (caps["L0A"] // nb) // (align_up(baseM, 16) * isz) // c0 * c0))
    baseK = _pick(ov, "dxBaseK", "baseK", default_k)
    if baseK % c0:
        raise tiling_error(f"tiling override: dxBaseK {baseK} must be a multiple of C0 = {c0}")
    rs = rects(ic, baseM)
    mmax = max(r.m for r in rs)
    need = {"L0A": nb * align_up(mmax, 16) * baseK * isz,
            "L0B": nb * baseK * align_up(baseN, 16) * isz,
            "L0C": nb * align_up(mmax, 16) * align_up(baseN, 16) * 4}
    for b, v in need.items():
        if v > caps[b]:
            raise tiling_error(f"ConvolutionBackward gradInput tiling: {nb} x ({'baseM' if b != 'L0B' else 'baseK'}"
                               f" {mmax if b != 'L0B' else baseK} x {'baseK' if b == 'L0A' else 'baseN'} "
                               f"{baseK if b == 'L0A' else baseN}) needs {v} B of {b}, which does not fit: "
                               f"{b} holds {caps[b]} B")
    if mmax > 4095 or baseN > 4095 or baseK > 4095:
        raise tiling_error(f"ConvolutionBackward gradInput tiling: an Mmad of m={mmax}, n={baseN}, "
                           f"k={baseK} does not fit Mmad's [1, 4095] range")
    # L1: the slab of the feature map for one rect (c1Chunk planes) and the weight tile
    rows = max((r.th - 1) * ic.S[1] + (ic.K[1] - 1) * ic.D[1] + 1 for r in rs)
    cols = max((r.tw - 1) * ic.S[2] + (ic.K[2] - 1) * ic.D[2] + 1 for r in rs)
    rows, cols = min(rows, ic.fdims[1]), min(cols, ic.fdims[2])
    plane = rows * cols * c0 * isz
    wtile_per_c1 = align_up(baseN, 16) * ic.khw * c0 * isz
    avail = caps["L1"] // nb
    c1c = int(ov.get("c1Chunk", max(1, min(ic.C1, avail // max(plane + wtile_per_c1, 1)))))
    l1 = nb * c1c * (plane + wtile_per_c1)
    if l1 > caps["L1"] or c1c < 1:
        raise tiling_error(f"ConvolutionBackward gradInput tiling: one C1 plane of the feature-map slab "
                           f"({rows} x {cols} x C0) and its weight tile need {l1} B of L1, which does not "
                           f"fit: L1 holds {caps['L1']} B")
    t = CubeTiling("gradInput", baseM, baseN, baseK, c1c, db, 0, 1, l1, need)
    return t, rs


def plan_dw_tiling(ic: Img2col, mg: int, isz: int, profile, ov: dict, c0: int, ncores: int):
    caps = {b: _buf(profile, "cube", b) for b in ("L1", "L0A", "L0B", "L0C")}
    db = bool(ov.get("doubleBuffer", True))
    nb = 2 if db else 1
    ncols = ic.C1 * ic.khw * c0
    baseM = _pick(ov, "dwBaseM", "baseM", min(align_up(mg, 16), 128))
    baseN = _pick(ov, "dwBaseN", "baseN", min(ncols, 128 if isz == 2 else 64))
    if baseN % c0:
        baseN = align_up(baseN, c0)
    default_k = (caps["L0A"] // nb) // (align_up(baseM, 16) * isz)
    default_k = min(default_k, (caps["L0B"] // nb) // (align_up(baseN, 16) * isz), 4095)
    default_k = max(16, default_k // 16 * 16)
    baseK = _pick(ov, "dwBaseK", "baseK", default_k)
    rs = rects(ic, baseK)
    kmax = max(r.m for r in rs)
    need = {"L0A": nb * align_up(baseM, 16) * align_up(kmax, c0) * isz,
            "L0B": nb * align_up(kmax, c0) * align_up(baseN, 16) * isz,
            "L0C": align_up(baseM, 16) * align_up(baseN, 16) * 4}
    for b, v in need.items():
        if v > caps[b]:
            raise tiling_error(f"ConvolutionBackward gradWeight tiling: {v} B of {b} (baseM {baseM}, "
                               f"baseN {baseN}, baseK {kmax}, {nb} buffers) does not fit: {b} holds "
                               f"{caps[b]} B")
    if baseM > 4095 or baseN > 4095 or kmax > 4095:
        raise tiling_error(f"ConvolutionBackward gradWeight tiling: an Mmad of m={baseM}, n={baseN}, "
                           f"k={kmax} does not fit Mmad's [1, 4095] range")
    rows = max((r.th - 1) * ic.S[1] + (ic.K[1] - 1) * ic.D[1] + 1 for r in rs)
    cols = max((r.tw - 1) * ic.S[2] + (ic.K[2] - 1) * ic.D[2] + 1 for r in rs)
    rows, cols = min(rows, ic.fdims[1]), min(cols, ic.fdims[2])
    c1_per_tile = min(ic.C1, ceil_div(baseN, ic.khw * c0) + 1)
    slab = c1_per_tile * rows * cols * c0 * isz
    atile = align_up(baseM, 16) * align_up(kmax, c0) * isz
    l1 = nb * (slab + atile)
    if l1 > caps["L1"]:
        raise tiling_error(f"ConvolutionBackward gradWeight tiling: the feature-map slab ({c1_per_tile} "
                           f"C1 planes of {rows} x {cols} x C0) and the left tile need {l1} B of L1, which "
                           f"does not fit: L1 holds {caps['L1']} B (lower dwBaseK or dwBaseN)")
    t = CubeTiling("gradWeight", baseM, baseN, kmax, c1_per_tile, db, 0, 1, l1, need)
    return t, rs


# =============================================================================================
# vector kernels: a generic double-buffered load -> transform -> store loop with explicit flags
# =============================================================================================
def _pipeline(items, slot_in: int, slot_out: int, load, compute, store, zero=None):
    """Per item: (optionally zero the in-slot on V), MTE2 load, V compute, MTE3 store; two slots
    ping-pong, ordered by flags: V->MTE2 (in-slot free), MTE2->V, V->MTE3, MTE3->V (out-slot free).
    load(in_t, item), compute(in_t, out_t, item), store(out_t, item); zero(item) -> bool asks
    for Duplicate(0) of the in-slot before the load."""
    pipe = TPipe()
    bin_, bout = TBuf(TPosition.VECCALC), TBuf(TPosition.VECCALC)
    pipe.InitBuffer(bin_, 2 * slot_in)
    pipe.InitBuffer(bout, 2 * slot_out)
    ins = [bin_.Get(np.uint8)[k * slot_in] for k in range(2)]
    outs = [bout.Get(np.uint8)[k * slot_out] for k in range(2)]
    for k in range(2):
        SetFlag(HardEvent.V_MTE2, k)
    out_pending = [False, False]
    for i, item in enumerate(items):
        k = i % 2
        WaitFlag(HardEvent.V_MTE2, k)
        if zero is not None and zero(item):
            Duplicate(ins[k].ReinterpretCast(np.float32), 0.0, slot_in // 4)
            SetFlag(HardEvent.V_MTE2, k)
            WaitFlag(HardEvent.V_MTE2, k)
        load(ins[k], item)
        SetFlag(HardEvent.MTE2_V, k)
        WaitFlag(HardEvent.MTE2_V, k)
        if out_pending[k]:
            WaitFlag(HardEvent.MTE3_V, k)
        compute(ins[k], outs[k], item)
        SetFlag(HardEvent.V_MTE2, k)
        SetFlag(HardEvent.V_MTE3, k)
        WaitFlag(HardEvent.V_MTE3, k)
        store(outs[k], item)
        SetFlag(HardEvent.MTE3_V, k)
        out_pending[k] = True
    for k in range(2):
        WaitFlag(HardEvent.V_MTE2, k)
        if out_pending[k]:
            WaitFlag(HardEvent.MTE3_V, k)


def _split(items: list, nblocks: int) -> list[list]:
    nblocks = max(1, min(nblocks, len(items)))
    per = ceil_div(len(items), nblocks)
    return [items[i * per:(i + 1) * per] for i in range(ceil_div(len(items), per))]


def _zero_fill_body(dst: GM_ADDR, ranges, slot: int):
    """Zero [off, off+n) byte ranges of a workspace buffer: Duplicate once, DataCopy out."""
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, slot)
    z = buf.Get(np.float32)
    Duplicate(z, 0.0, slot // 4)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    g = GlobalTensor(np.uint8)
    g.SetGlobalBuffer(dst.cast(np.uint8))
    zb = z.ReinterpretCast(np.uint8)
    for off, n in ranges[GetBlockIdx()]:
        if n % 32:
            DataCopyPad(g[off], zb, DataCopyExtParams(1, n, 0, 0))
        else:
            DataCopy(g[off], zb, n)


def zero_fill_launch(name: str, dst: GM_ADDR, nbytes: int, profile) -> KernelLaunch:
    slot = min(ub_bytes(profile) // 2, 64 * 1024)
    chunks = [(o, min(slot, nbytes - o)) for o in range(0, nbytes, slot)]
    blocks = _split(chunks, vector_core_count(profile))
    return KernelLaunch(f"ZeroFill({name})", _zero_fill_body, len(blocks), "vector", (dst, blocks, slot))


# ---- NCHW -> NC1HWC0 (cast, channel padding, stride dilation) ------------------------------
@dataclass
class To5HD:
    N: int
    G: int
    Cg: int
    C1: int
    c0: int
    sdims: tuple       # source (D, H, W)
    dil: tuple         # (sd, sh, sw) zero-insertion factors
    fdims: tuple       # destination (Df, Hf, Wf)
    src_dtype: np.dtype
    dst_dtype: np.dtype
    LP: int            # positions per item (UB row pitch, elements)


def _to5hd_body(src: GM_ADDR, dst: GM_ADDR, t: To5HD, blocks):
    items = blocks[GetBlockIdx()]
    isz_s, isz_c = t.src_dtype.itemsize, t.dst_dtype.itemsize
    c0, LP = t.c0, t.LP
    P = t.sdims[0] * t.sdims[1] * t.sdims[2]
    PF = t.fdims[0] * t.fdims[1] * t.fdims[2]
    sGm, dGm = GlobalTensor(t.src_dtype), GlobalTensor(t.dst_dtype)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)
    cast = t.src_dtype != t.dst_dtype
    slot_in = c0 * LP * max(isz_s, isz_c) + (c0 * LP * isz_c if cast else 0)
    slot_out = c0 * LP * isz_c
    dilated = any(d > 1 for d in t.dil)

    def zero(it):
        n, g, c1, p0, ln = it
        return ln < LP or min(c0, t.Cg - c1 * c0) < c0

    def load(ub, it):
        n, g, c1, p0, ln = it
        rows = min(c0, t.Cg - c1 * c0)
        x = ub.ReinterpretCast(t.src_dtype)
        DataCopyPad(x, sGm[((n * t.G + g) * t.Cg + c1 * c0) * P + p0],
                    DataCopyExtParams(rows, ln * isz_s, (P - ln) * isz_s, (LP - align_up(ln * isz_s, 32) // isz_s) * isz_s // 32))

    def compute(ub, out, it):
        x = ub.ReinterpretCast(t.src_dtype)
        if cast:
            y = ub[c0 * LP * max(isz_s, isz_c)].ReinterpretCast(t.dst_dtype)
            Cast(y, x, RoundMode.CAST_RINT if isz_c < isz_s else RoundMode.CAST_NONE, c0 * LP)
            x = y
        TransposeExt(out.ReinterpretCast(t.dst_dtype), x, None,
                     TransposeParamsExt(1, c0, LP, 1, TransposeType.TRANSPOSE_NCHW2NHWC))

    def store(out, it):
        n, g, c1, p0, ln = it
        o = out.ReinterpretCast(t.dst_dtype)
        base = ((n * t.G + g) * t.C1 + c1) * PF * c0
        if not dilated:
            DataCopy(dGm[base + p0 * c0], o, ln * c0)
            return
        D, H, W = t.sdims
        sd, sh, sw = t.dil
        Df, Hf, Wf = t.fdims
        p = p0
        while p < p0 + ln:
            d, rem = divmod(p, H * W)
            h, w = divmod(rem, W)
            run = min(W - w, p0 + ln - p)
            doff = ((d * sd * Hf + h * sh) * Wf + w * sw) * c0
            if sw == 1:
                DataCopy(dGm[base + doff], o[(p - p0) * c0], run * c0)
            else:
                DataCopy(dGm[base + doff], o[(p - p0) * c0],
                         DataCopyParams(run, c0 * isz_c // 32, 0, (sw - 1) * c0 * isz_c // 32))
            p += run

    _pipeline(items, slot_in, slot_out, load, compute, store, zero)


def to5hd_launch(name, src: GM_ADDR, dst: GM_ADDR, t: To5HD, profile) -> KernelLaunch:
    P = t.sdims[0] * t.sdims[1] * t.sdims[2]
    items = []
    for n in range(t.N):
        for g in range(t.G):
            for c1 in range(t.C1):
                if any(d > 1 for d in t.dil):
                    W = t.sdims[2]
                    step = max(W, (t.LP // W) * W) if W <= t.LP else t.LP
                else:
                    step = t.LP
                for p0 in range(0, P, step):
                    items.append((n, g, c1, p0, min(step, P - p0)))
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch(f"TransData({name}->NC1HWC0)", _to5hd_body, len(blocks), "vector",
                        (src, dst, t, blocks))


def to5hd_lp(profile, c0, isz_s, isz_c, cast, W, dilated) -> int:
    ub = ub_bytes(profile)
    per = c0 * (max(isz_s, isz_c) + (isz_c if cast else 0) + isz_c) * 2
    lp = ub // per
    lp = max(16, min(lp, 4096) // 16 * 16)
    if dilated and W < lp and W > 0:
        lp = max(align_up(W, 16), (lp // W) * W // 16 * 16 if (lp // W) * W >= 16 else align_up(W, 16))
        lp = align_up(lp, 16)
    return lp


# ---- flat cast ---------------------------------------------------------------------------------
def _cast_body(src: GM_ADDR, dst: GM_ADDR, sdt, ddt, chunk, blocks):
    items = blocks[GetBlockIdx()]
    sGm, dGm = GlobalTensor(sdt), GlobalTensor(ddt)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)

    def load(ub, it):
        o, n = it
        DataCopyPad(ub.ReinterpretCast(sdt), sGm[o], DataCopyExtParams(1, n * sdt.itemsize, 0, 0))

    def compute(ub, out, it):
        Cast(out.ReinterpretCast(ddt), ub.ReinterpretCast(sdt),
             RoundMode.CAST_RINT if ddt.itemsize < sdt.itemsize else RoundMode.CAST_NONE, align_up(it[1], 8))

    def store(out, it):
        o, n = it
        DataCopyPad(dGm[o], out.ReinterpretCast(ddt), DataCopyExtParams(1, n * ddt.itemsize, 0, 0))

    _pipeline(items, chunk * sdt.itemsize, chunk * ddt.itemsize, load, compute, store,
              zero=lambda it: it[1] % 8 != 0)


def cast_launch(name, src, dst, n, sdt, ddt, profile) -> KernelLaunch:
    chunk = max(256, (ub_bytes(profile) // (2 * (sdt.itemsize + ddt.itemsize))) // 256 * 256)
    chunk = min(chunk, 16384)
    items = [(o, min(chunk, n - o)) for o in range(0, n, chunk)]
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch(f"Cast({name})", _cast_body, len(blocks), "vector", (src, dst, sdt, ddt, chunk, blocks))


# ---- weight -> W'^T rows (dX right operand) ------------------------------------------------
@dataclass
class PackW:
    G: int
    rows_in: int       # source rows per group (non-transposed: Cout_g; transposed: Cin_g)
    cols_in: int       # source columns per row (other channel count * kk)
    M: int             # output rows per group (dX channels)
    Kc: int            # channels of the K dimension per group
    C1: int
    c0: int
    KD: int
    KHW: int
    flip: bool
    src_dtype: np.dtype
    dst_dtype: np.dtype
    pitch: int         # UB row pitch of the loaded block (elements)


def _packw_body(src: GM_ADDR, dst: GM_ADDR, t: PackW, blocks):
    """Non-transposed: per (g, c1) load C0 rows (co) of Cin_g*kk, transpose to [(ci, k)][c0],
    store each tap's [ci] column of 32-B rows at the flipped tap. Transposed: per (g, c1) load
    Cin_g rows of the c1 chunk's (co, k), transpose each row block to [ci][k][c0], store."""
    items = blocks[GetBlockIdx()]
    isz_s, isz_c = t.src_dtype.itemsize, t.dst_dtype.itemsize
    c0, kk = t.c0, t.KD * t.KHW
    sGm, dGm = GlobalTensor(t.src_dtype), GlobalTensor(t.dst_dtype)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)
    cast = t.src_dtype != t.dst_dtype
    rowsU = c0 if t.flip else t.M
    elems = rowsU * t.pitch
    slot_in = elems * max(isz_s, isz_c) + (elems * isz_c if cast else 0)
    slot_out = elems * isz_c
    rowK = t.KD * t.C1 * t.KHW * c0          # elements per output row (one dX channel)

    def zero(it):
        return True

    def load(ub, it):
        g, c1, ci0, cin = it
        x = ub.ReinterpretCast(t.src_dtype)
        if t.flip:
            rows = min(c0, t.Kc - c1 * c0)
            DataCopyPad(x, sGm[(g * t.rows_in + c1 * c0) * t.cols_in + ci0 * kk],
                        DataCopyExtParams(rows, cin * kk * isz_s, (t.cols_in - cin * kk) * isz_s,
                                          (t.pitch * isz_s - align_up(cin * kk * isz_s, 32)) // 32))
        else:
            v = min(c0, t.Kc - c1 * c0)
            DataCopyPad(x, sGm[g * t.rows_in * t.cols_in + c1 * c0 * kk],
                        DataCopyExtParams(t.M, v * kk * isz_s, (t.cols_in - v * kk) * isz_s,
                                          (t.pitch * isz_s - align_up(v * kk * isz_s, 32)) // 32))

    def compute(ub, out, it):
        x = ub.ReinterpretCast(t.src_dtype)
        if cast:
            y = ub[elems * max(isz_s, isz_c)].ReinterpretCast(t.dst_dtype)
            Cast(y, x, RoundMode.CAST_RINT if isz_c < isz_s else RoundMode.CAST_NONE, elems)
            x = y
        o = out.ReinterpretCast(t.dst_dtype)
        if t.flip:      # [c0][pitch] -> [pitch][c0]
            TransposeExt(o, x, None, TransposeParamsExt(1, c0, t.pitch, 1, TransposeType.TRANSPOSE_NCHW2NHWC))
        elif t.pitch == c0 * kk:   # [ci][c0][k] -> [ci][k][c0], all rows at once
            TransposeExt(o, x, None, TransposeParamsExt(t.M, c0, kk, 1, TransposeType.TRANSPOSE_NCHW2NHWC))
        else:
            for ci in range(t.M):
                TransposeExt(o[ci * c0 * kk], x[ci * t.pitch], None,
                             TransposeParamsExt(1, c0, kk, 1, TransposeType.TRANSPOSE_NCHW2NHWC))

    def store(out, it):
        g, c1, ci0, cin = it
        o = out.ReinterpretCast(t.dst_dtype)
        base = g * t.M * rowK
        if t.flip:
            for k in range(kk):
                kf = kk - 1 - k
                kd, khw = divmod(kf, t.KHW)
                off = base + ci0 * rowK + (kd * t.C1 + c1) * t.KHW * c0 + khw * c0
                DataCopyPad(dGm[off], o[k * c0],
                            DataCopyExtParams(cin, c0 * isz_c, (kk - 1), rowK * isz_c - c0 * isz_c))
        else:
            off = base + c1 * t.KHW * c0
            DataCopyPad(dGm[off], o, DataCopyExtParams(t.M * t.KD, t.KHW * c0 * isz_c, 0,
                                                       (t.C1 - 1) * t.KHW * c0 * isz_c))

    _pipeline(items, slot_in, slot_out, load, compute, store, zero)


def packw_launch(src, dst, t: PackW, profile) -> KernelLaunch:
    if t.flip:
        isz = max(t.src_dtype.itemsize, t.dst_dtype.itemsize)
        per_ci = t.c0 * t.KD * t.KHW * (2 * isz + 2 * t.dst_dtype.itemsize) * 2
        cin = max(1, min(t.M, (ub_bytes(profile) - 4096) // per_ci))
        t.pitch = align_up(cin * t.KD * t.KHW, 16)
        items = [(g, c1, ci0, min(cin, t.M - ci0)) for g in range(t.G) for c1 in range(t.C1)
                 for ci0 in range(0, t.M, cin)]
    else:
        items = [(g, c1, 0, t.M) for g in range(t.G) for c1 in range(t.C1)]
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch("TransData(weight->W'T)", _packw_body, len(blocks), "vector", (src, dst, t, blocks))


# ---- dX rows (positions x channels) -> NCHW --------------------------------------------------
def _dx_out_body(src: GM_ADDR, dst: GM_ADDR, N, G, Cg, Cpad, P, LP, dt, blocks):
    items = blocks[GetBlockIdx()]
    isz = dt.itemsize
    sGm, dGm = GlobalTensor(dt), GlobalTensor(dt)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)

    def load(ub, it):
        n, g, p0, ln = it
        DataCopy(ub.ReinterpretCast(dt), sGm[((n * G + g) * P + p0) * Cpad], ln * Cpad)

    def compute(ub, out, it):
        TransposeExt(out.ReinterpretCast(dt), ub.ReinterpretCast(dt), None,
                     TransposeParamsExt(1, Cpad, LP, 1, TransposeType.TRANSPOSE_NHWC2NCHW))

    def store(out, it):
        n, g, p0, ln = it
        DataCopyPad(dGm[((n * G + g) * Cg) * P + p0], out.ReinterpretCast(dt),
                    DataCopyExtParams(Cg, ln * isz, (LP * isz - align_up(ln * isz, 32)) // 32, (P - ln) * isz))

    _pipeline(items, LP * Cpad * isz, LP * Cpad * isz, load, compute, store,
              zero=lambda it: it[3] < LP)


def dx_out_launch(src, dst, N, G, Cg, Cpad, P, dt, profile) -> KernelLaunch:
    LP = max(16, min(2048, (ub_bytes(profile) // (4 * Cpad * dt.itemsize)) // 16 * 16))
    if 4 * Cpad * dt.itemsize * 16 > ub_bytes(profile):
        raise tiling_error(f"gradInput layout pass: {Cpad} channels x 16 positions x 4 buffers do not fit "
                           f"in UB ({ub_bytes(profile)} B)")
    items = [(n, g, p0, min(LP, P - p0)) for n in range(N) for g in range(G) for p0 in range(0, P, LP)]
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch("GradInput(NHWC->NCHW)", _dx_out_body, len(blocks), "vector",
                        (src, dst, N, G, Cg, Cpad, P, LP, dt, blocks))


# ---- dW accumulator (FP32, [g][m][kd][c1][khw][c0]) -> gradWeight --------------------------
def _dw_out_body(src: GM_ADDR, dst: GM_ADDR, G, Mg, Cc, C1, c0, KD, KHW, kkp, mc, dt, blocks):
    items = blocks[GetBlockIdx()]
    kk = KD * KHW
    isz = dt.itemsize
    rowK = KD * C1 * KHW * c0
    sGm, dGm = GlobalTensor(float32), GlobalTensor(dt)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)
    elems = mc * kkp * c0
    first = [True]

    def zero(it):
        if first[0] or True:
            first[0] = False
            return True
        return False

    def load(ub, it):
        g, c1, m0, mn = it
        x = ub.ReinterpretCast(float32)
        for kd in range(KD):
            DataCopyPad(x[kd * KHW * c0], sGm[(g * Mg + m0) * rowK + (kd * C1 + c1) * KHW * c0],
                        DataCopyExtParams(mn, KHW * c0 * 4, (rowK - KHW * c0) * 4,
                                          (kkp - KHW) * c0 * 4 // 32))

    def compute(ub, out, it):
        g, c1, m0, mn = it
        x = ub.ReinterpretCast(float32)
        tr = ub[elems * 4].ReinterpretCast(float32)
        TransposeExt(tr, x, None, TransposeParamsExt(1, c0, mn * kkp, 1, TransposeType.TRANSPOSE_NHWC2NCHW))
        o = out.ReinterpretCast(dt)
        if dt == F32:
            from simulator.kernel import Copy
            Copy(o, tr, c0 * mn * kkp)
        else:
            Cast(o, tr, RoundMode.CAST_RINT, c0 * mn * kkp)

    def store(out, it):
        g, c1, m0, mn = it
        o = out.ReinterpretCast(dt)
        for cc in range(min(c0, Cc - c1 * c0)):
            c = c1 * c0 + cc
            DataCopyPad(dGm[((g * Mg + m0) * Cc + c) * kk], o[cc * mn * kkp],
                        DataCopyExtParams(mn, kk * isz, (kkp * isz - align_up(kk * isz, 32)) // 32,
                                          (Cc * kk - kk) * isz))

    _pipeline(items, 2 * elems * 4, elems * isz, load, compute, store, zero)


def dw_out_launch(src, dst, G, Mg, Cc, C1, c0, KD, KHW, dt, profile) -> KernelLaunch:
    kk = KD * KHW
    kkp = align_up(kk, 32 // dt.itemsize)
    kkp = align_up(kkp, 8)
    per_m = kkp * c0 * (2 * 4 + dt.itemsize) * 2
    mc = max(1, min(Mg, ub_bytes(profile) // per_m))
    if mc < 1 or per_m > ub_bytes(profile):
        raise tiling_error(f"gradWeight layout pass: one row ({kkp} taps x C0) needs {per_m} B of UB, "
                           f"which does not fit: UB holds {ub_bytes(profile)} B")
    items = [(g, c1, m0, min(mc, Mg - m0)) for g in range(G) for c1 in range(C1) for m0 in range(0, Mg, mc)]
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch("GradWeight(FP32 sum->weight layout)", _dw_out_body, len(blocks), "vector",
                        (src, dst, G, Mg, Cc, C1, c0, KD, KHW, kkp, mc, dt, blocks))


# ---- gradBias ----------------------------------------------------------------------------------
def _bias_body(src: GM_ADDR, dst: GM_ADDR, N, C, P, LP, cc, sdt, odt, blocks):
    """Per chunk of cc channels: acc[cc][LP] (fp32) += gradOutput rows over N and position
    chunks; then transpose to [LP][cc] and fold the rows with Adds; cast; store."""
    items = blocks[GetBlockIdx()]
    sGm, dGm = GlobalTensor(sdt), GlobalTensor(odt)
    sGm.SetGlobalBuffer(src)
    dGm.SetGlobalBuffer(dst)
    isz = sdt.itemsize
    pipe = TPipe()
    inQ = TQue(TPosition.VECIN, 2)
    pipe.InitBuffer(inQ, 2, cc * LP * isz)
    calc = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(calc, 3 * cc * LP * 4 + 32 * cc + 64)
    buf = calc.Get(float32)
    acc, tmp, tr = buf[0], buf[cc * LP], buf[2 * cc * LP]
    outb = calc.Get(np.uint8)[3 * cc * LP * 4].ReinterpretCast(odt)
    ev_z = pipe.AllocEventID(HardEvent.V_MTE2)
    ev_o = pipe.AllocEventID(HardEvent.V_MTE3)
    ev_b = pipe.AllocEventID(HardEvent.MTE3_V)
    for c0_, cn in items:
        Duplicate(acc, 0.0, cc * LP)
        for n in range(N):
            for p0 in range(0, P, LP):
                ln = min(LP, P - p0)
                x = inQ.AllocTensor(sdt)
                if ln < LP or cn < cc:
                    # zero the padding first (V), then load (MTE2)
                    Duplicate(x.ReinterpretCast(np.uint8).ReinterpretCast(np.float32), 0.0, cc * LP * isz // 4)
                    SetFlag(HardEvent.V_MTE2, ev_z)
                    WaitFlag(HardEvent.V_MTE2, ev_z)
                DataCopyPad(x, sGm[(n * C + c0_) * P + p0],
                            DataCopyExtParams(cn, ln * isz, (P - ln) * isz,
                                              (LP * isz - align_up(ln * isz, 32)) // 32))
                inQ.EnQue(x)
                x = inQ.DeQue(sdt)
                if sdt != F32:
                    Cast(tmp, x, RoundMode.CAST_NONE, cc * LP)
                    Add(acc, acc, tmp, cc * LP)
                else:
                    Add(acc, acc, x, cc * LP)
                inQ.FreeTensor(x)
        TransposeExt(tr, acc, None, TransposeParamsExt(1, cc, LP, 1, TransposeType.TRANSPOSE_NCHW2NHWC))
        rows = LP
        while rows > 1:
            h = rows // 2
            Add(tr, tr, tr[(rows - h) * cc], h * cc)
            rows -= h
        if odt != F32:
            Cast(outb, tr, RoundMode.CAST_RINT, cc)
            res = outb
        else:
            res = tr
        SetFlag(HardEvent.V_MTE3, ev_o)
        WaitFlag(HardEvent.V_MTE3, ev_o)
        DataCopyPad(dGm[c0_], res, DataCopyExtParams(1, cn * odt.itemsize, 0, 0))
        SetFlag(HardEvent.MTE3_V, ev_b)
        WaitFlag(HardEvent.MTE3_V, ev_b)


def bias_launch(src, dst, N, C, P, sdt, odt, profile) -> KernelLaunch:
    cc = 16
    ub = ub_bytes(profile)
    LP = max(16, min(1024, align_up(P, 16)))
    while LP > 16 and 2 * cc * LP * sdt.itemsize + 3 * cc * LP * 4 + 1024 > ub:
        LP //= 2
    LP = align_up(LP, 16)
    items = [(c, min(cc, C - c)) for c in range(0, C, cc)]
    blocks = _split(items, vector_core_count(profile))
    return KernelLaunch("GradBias(reduce N, spatial)", _bias_body, len(blocks), "vector",
                        (src, dst, N, C, P, LP, cc, sdt, odt, blocks))


# =============================================================================================
# Cube kernels
# =============================================================================================
@dataclass
class CubeArgs:
    ic: Img2col
    cd: np.dtype          # compute storage dtype
    hf32: bool
    t: CubeTiling
    Mg: int               # dX: channels per group (rows of W'^T); dW: rows per group (A channels)
    Mtot: int             # dW: channels of the A tensor (all groups)
    Cpad: int             # dX: padded channels per group of the output rows
    out_dtype: np.dtype
    a2: bool              # Fixpipe (A2) or L0C -> UB (coupled)


def _slab(FGm, a1, ic: Img2col, n, g, c1a, c1n, j, hlo, l1H, wlo, l1W, c0, isz):
    Df, Hf, Wf = ic.fdims
    base = (((n * ic.G + g) * ic.C1 + c1a) * Df + j) * Hf * Wf * c0 + (hlo * Wf + wlo) * c0
    if l1W == Wf:
        DataCopy(a1, FGm[base], DataCopyParams(c1n, l1H * Wf * c0 * isz // 32,
                                               (Df * Hf * Wf - l1H * Wf) * c0 * isz // 32, 0))
    else:
        for i in range(c1n):
            DataCopy(a1[i * l1H * l1W * c0], FGm[base + i * Df * Hf * Wf * c0],
                     DataCopyParams(l1H, l1W * c0 * isz // 32, (Wf - l1W) * c0 * isz // 32, 0))


def _queues(a: CubeArgs, slab_bytes, b1_bytes, l0a_bytes, l0b_bytes, l0c_bytes):
    nb = 2 if a.t.doubleBuffer else 1
    pipe = TPipe()
    q = {}
    for name, pos, size, depth in (("A1", TPosition.A1, slab_bytes, nb), ("B1", TPosition.B1, b1_bytes, nb),
                                   ("A2", TPosition.A2, l0a_bytes, nb), ("B2", TPosition.B2, l0b_bytes, nb),
                                   ("CO1", TPosition.CO1, l0c_bytes, 1)):
        q[name] = TQue(pos, depth)
        pipe.InitBuffer(q[name], depth, max(size, 512))
    if not a.a2:
        q["CO2"] = TQue(TPosition.CO2, 1)
        pipe.InitBuffer(q["CO2"], 1, l0c_bytes)
    return pipe, q


def _copy_out_coupled(q, c, m, nn, dst_gm: GlobalTensor, row_stride: int, odt, atomic: bool):
    """Coupled chips: L0C -> UB (NZ, with FP32 -> FP16 conversion if asked) on PIPE_V, then each
    16-column strip to GM rows on MTE3 (atomic add for partial sums)."""
    m1, n1 = ceil_div(m, 16), ceil_div(nn, 16)
    ub = q["CO2"].AllocTensor(odt)
    DataCopy(ub, c, DataCopyParams(1, m1 * n1, 0, 0),
             DataCopyEnhancedParams(BlockMode.BLOCK_MODE_MATRIX,
                                    DeqScale.DEQF16 if odt == F16 else DeqScale.DEQ_NONE))
    q["CO2"].EnQue(ub)
    ub = q["CO2"].DeQue(odt)
    isz = odt.itemsize
    if atomic:
        SetAtomicAdd(np.float32)
    for l in range(n1):
        DataCopy(dst_gm[l * 16], ub[l * m1 * 256],
                 DataCopyParams(m, 16 * isz // 32, 0, (row_stride - 16) * isz // 32))
    if atomic:
        SetAtomicNone()
    q["CO2"].FreeTensor(ub)


def _grad_input_body(F: GM_ADDR, WT: GM_ADDR, OUT: GM_ADDR, a: CubeArgs, blocks):
    """dX rows = img2col(F) (positions x (c1,kh,kw,c0)) x W'^T ((c1,k,c0) x ci), per unit
    (rect, group, channel tile); K runs over the kernel depth taps and C1 chunks in L1."""
    units = blocks[GetBlockIdx()]
    ic, t, cd = a.ic, a.t, a.cd
    isz, c0 = cd.itemsize, 32 // cd.itemsize
    KD, KHW = ic.K[0], ic.khw
    rowK = KD * ic.C1 * KHW * c0
    Df = ic.fdims[0]
    nt_max = min(t.baseN, align_up(a.Mg, 16))
    mmax = max(u[0].m for u in units)
    slab = t.c1Chunk * min((max(u[0].th for u in units) - 1) * ic.S[1] + (ic.K[1] - 1) * ic.D[1] + 1, ic.fdims[1]) \
        * min((max(u[0].tw for u in units) - 1) * ic.S[2] + (ic.K[2] - 1) * ic.D[2] + 1, ic.fdims[2]) * c0 * isz
    b1 = align_up(nt_max, 16) * t.c1Chunk * KHW * c0 * isz
    l0a = align_up(mmax, 16) * t.baseK * isz
    l0b = t.baseK * align_up(nt_max, 16) * isz
    l0c = align_up(mmax, 16) * align_up(nt_max, 16) * 4
    pipe, q = _queues(a, max(align_up(slab, 32), align_up(mmax, 16) * 32), max(b1, align_up(nt_max, 16) * 32),
                      max(l0a, align_up(mmax, 16) * 32), max(l0b, align_up(nt_max, 16) * 32), l0c)
    if a.hf32:
        SetHF32Mode(True)
    FGm, WGm, OGm = GlobalTensor(cd), GlobalTensor(cd), GlobalTensor(a.out_dtype)
    FGm.SetGlobalBuffer(F)
    WGm.SetGlobalBuffer(WT)
    OGm.SetGlobalBuffer(OUT)
    _, Ho, Wo = ic.odims
    P = ic.positions
    for r, g, n0, nt in units:
        m = r.m
        m1, n1 = ceil_div(m, 16), ceil_div(nt, 16)
        c = q["CO1"].AllocTensor(float32)
        first = True
        hlo, l1H, top, bottom = ic.axis_window(1, r.oh0, r.th)
        wlo, l1W, left, right = ic.axis_window(2, r.ow0, r.tw)
        for kd in range(KD):
            j = r.od * ic.S[0] + kd * ic.D[0] - ic.P[0]
            if not 0 <= j < Df or l1H == 0 or l1W == 0:
                continue
            for c1a in range(0, ic.C1, t.c1Chunk):
                c1n = min(t.c1Chunk, ic.C1 - c1a)
                a1 = q["A1"].AllocTensor(cd)
                _slab(FGm, a1, ic, r.n, g, c1a, c1n, j, hlo, l1H, wlo, l1W, c0, isz)
                q["A1"].EnQue(a1)
                bt = q["B1"].AllocTensor(cd)
                width = c1n * KHW * c0
                if nt % 16:
                    InitConstValue(bt, InitConstValueParams(1, align_up(nt, 16) * ceil_div(width, c0), 0, 0))
                DataCopy(bt, WGm[(g * a.Mg + n0) * rowK + (kd * ic.C1 + c1a) * KHW * c0],
                         Nd2NzParams(1, nt, width, 0, rowK, align_up(nt, 16), 1, 0))
                q["B1"].EnQue(bt)
                a1 = q["A1"].DeQue(cd)
                bt = q["B1"].DeQue(cd)
                for k0 in range(0, width, t.baseK):
                    kl = min(t.baseK, width - k0)
                    a2 = q["A2"].AllocTensor(cd)
                    LoadData(a2, a1, LoadData3DParamsV2(
                        padList=(left, right, top, bottom), l1H=l1H, l1W=l1W, channelSize=c1n * c0,
                        kExtension=kl, mExtension=m, kStartPt=k0, mStartPt=0, strideW=ic.S[2],
                        strideH=ic.S[1], filterW=ic.K[2], filterH=ic.K[1], dilationFilterW=ic.D[2],
                        dilationFilterH=ic.D[1]))
                    q["A2"].EnQue(a2)
                    b2 = q["B2"].AllocTensor(cd)
                    LoadData(b2, bt, LoadData2DParams(startIndex=(k0 // c0) * n1,
                                                      repeatTimes=ceil_div(kl, c0) * n1, srcStride=1))
                    q["B2"].EnQue(b2)
                    a2 = q["A2"].DeQue(cd)
                    b2 = q["B2"].DeQue(cd)
                    Mmad(c, a2, b2, MmadParams(m=m, n=nt, k=kl, cmatrixInitVal=first))
                    first = False
                    q["A2"].FreeTensor(a2)
                    q["B2"].FreeTensor(b2)
                q["A1"].FreeTensor(a1)
                q["B1"].FreeTensor(bt)
        if first:       # no tap reaches the map: the tile is zero (an Mmad of zero fractals)
            z1 = q["A1"].AllocTensor(cd)
            InitConstValue(z1, InitConstValueParams(1, m1 * 16, 0, 0))
            q["A1"].EnQue(z1)
            zb = q["B1"].AllocTensor(cd)
            InitConstValue(zb, InitConstValueParams(1, n1 * 16, 0, 0))
            q["B1"].EnQue(zb)
            z1, zb = q["A1"].DeQue(cd), q["B1"].DeQue(cd)
            a2 = q["A2"].AllocTensor(cd)
            LoadData(a2, z1, LoadData2DParams(startIndex=0, repeatTimes=m1, srcStride=1))
            q["A2"].EnQue(a2)
            b2 = q["B2"].AllocTensor(cd)
            LoadData(b2, zb, LoadData2DParams(startIndex=0, repeatTimes=n1, srcStride=1))
            q["B2"].EnQue(b2)
            a2, b2 = q["A2"].DeQue(cd), q["B2"].DeQue(cd)
            Mmad(c, a2, b2, MmadParams(m=m, n=nt, k=c0, cmatrixInitVal=True))
            q["A2"].FreeTensor(a2)
            q["B2"].FreeTensor(b2)
            q["A1"].FreeTensor(z1)
            q["B1"].FreeTensor(zb)
        q["CO1"].EnQue(c)
        c = q["CO1"].DeQue(float32)
        pos0 = (r.od * Ho + r.oh0) * Wo + r.ow0
        dst = OGm[((r.n * ic.G + g) * P + pos0) * a.Cpad + n0]
        if a.a2:
            Fixpipe(dst, c, FixpipeParamsV220(nSize=nt, mSize=m, srcStride=m1 * 16, dstStride=a.Cpad))
        else:
            _copy_out_coupled(q, c, m, nt, dst, a.Cpad, a.out_dtype, False)
        q["CO1"].FreeTensor(c)


def _grad_weight_body(A: GM_ADDR, F: GM_ADDR, DW: GM_ADDR, a: CubeArgs, blocks):
    """dW tile (rows x img2col columns) = sum over this block's position tiles of
    A (rows x positions) x img2col(F) (positions x columns); partial sums atomic-add into the FP32
    accumulator."""
    units = blocks[GetBlockIdx()]
    ic, t, cd = a.ic, a.t, a.cd
    isz, c0 = cd.itemsize, 32 // cd.itemsize
    KD, KHW = ic.K[0], ic.khw
    rowK = KD * ic.C1 * KHW * c0
    Df = ic.fdims[0]
    _, Ho, Wo = ic.odims
    PD = ic.positions
    rows = min((max(r.th for u in units for r in u[5]) - 1) * ic.S[1] + (ic.K[1] - 1) * ic.D[1] + 1, ic.fdims[1])
    cols = min((max(r.tw for u in units for r in u[5]) - 1) * ic.S[2] + (ic.K[2] - 1) * ic.D[2] + 1, ic.fdims[2])
    slab = t.c1Chunk * rows * cols * c0 * isz
    kmax = align_up(t.baseK, 16)
    a1b = align_up(t.baseM, 16) * kmax * isz
    pipe, q = _queues(a, a1b, align_up(slab, 32), a1b, kmax * align_up(t.baseN, 16) * isz,
                      align_up(t.baseM, 16) * align_up(t.baseN, 16) * 4)
    if a.hf32:
        SetHF32Mode(True)
    AGm, FGm, DGm = GlobalTensor(cd), GlobalTensor(cd), GlobalTensor(float32)
    AGm.SetGlobalBuffer(A)
    FGm.SetGlobalBuffer(F)
    DGm.SetGlobalBuffer(DW)
    for g, kd, m0, mt, col0, kitems in units:
        ncol = min(t.baseN, ic.C1 * KHW * c0 - col0)
        c1a = col0 // (KHW * c0)
        c1n = ceil_div(col0 + ncol, KHW * c0) - c1a
        kst = col0 - c1a * KHW * c0
        m1 = ceil_div(mt, 16)
        c = q["CO1"].AllocTensor(float32)
        first = True
        for r in kitems:
            j = r.od * ic.S[0] + kd * ic.D[0] - ic.P[0]
            hlo, l1H, top, bottom = ic.axis_window(1, r.oh0, r.th)
            wlo, l1W, left, right = ic.axis_window(2, r.ow0, r.tw)
            if not 0 <= j < Df or l1H == 0 or l1W == 0:
                continue
            kt = r.m
            k1 = ceil_div(kt, c0)
            pos0 = (r.od * Ho + r.oh0) * Wo + r.ow0
            a1 = q["A1"].AllocTensor(cd)
            if mt % 16:
                InitConstValue(a1, InitConstValueParams(1, m1 * 16 * k1, 0, 0))
            DataCopy(a1, AGm[(r.n * a.Mtot + g * a.Mg + m0) * PD + pos0],
                     Nd2NzParams(1, mt, kt, 0, PD, m1 * 16, 1, 0))
            q["A1"].EnQue(a1)
            fm = q["B1"].AllocTensor(cd)
            _slab(FGm, fm, ic, r.n, g, c1a, c1n, j, hlo, l1H, wlo, l1W, c0, isz)
            q["B1"].EnQue(fm)
            a1 = q["A1"].DeQue(cd)
            fm = q["B1"].DeQue(cd)
            a2 = q["A2"].AllocTensor(cd)
            for i in range(m1):
                LoadData(a2[i * k1 * 512 // isz], a1, LoadData2DParams(startIndex=i, repeatTimes=k1, srcStride=m1))
            q["A2"].EnQue(a2)
            b2 = q["B2"].AllocTensor(cd)
            LoadData(b2, fm, LoadData3DParamsV2(
                padList=(left, right, top, bottom), l1H=l1H, l1W=l1W, channelSize=c1n * c0,
                kExtension=ncol, mExtension=kt, kStartPt=kst, mStartPt=0, strideW=ic.S[2],
                strideH=ic.S[1], filterW=ic.K[2], filterH=ic.K[1], dilationFilterW=ic.D[2],
                dilationFilterH=ic.D[1]))
            q["B2"].EnQue(b2)
            a2 = q["A2"].DeQue(cd)
            b2 = q["B2"].DeQue(cd)
            Mmad(c, a2, b2, MmadParams(m=mt, n=ncol, k=kt, cmatrixInitVal=first))
            first = False
            q["A2"].FreeTensor(a2)
            q["B2"].FreeTensor(b2)
            q["A1"].FreeTensor(a1)
            q["B1"].FreeTensor(fm)
        if first:
            q["CO1"].FreeTensor(c)
            continue
        q["CO1"].EnQue(c)
        c = q["CO1"].DeQue(float32)
        dst = DGm[((g * a.Mg + m0) * KD + kd) * ic.C1 * KHW * c0 + col0]
        if a.a2:
            SetAtomicAdd(np.float32)
            Fixpipe(dst, c, FixpipeParamsV220(nSize=ncol, mSize=mt, srcStride=m1 * 16, dstStride=rowK))
            SetAtomicNone()
        else:
            _copy_out_coupled(q, c, mt, ncol, dst, rowK, F32, True)
        q["CO1"].FreeTensor(c)


# =============================================================================================
# the plan
# =============================================================================================
def _pad3(t: tuple, fill: int) -> tuple:
    return (fill,) * (3 - len(t)) + tuple(t)


def _cube_units_dx(rs, G, Mg, baseN, ncores, block_dim_ov):
    units = [(r, g, n0, min(baseN, Mg - n0)) for g in range(G) for r in rs for n0 in range(0, Mg, baseN)]
    return _split(units, block_dim_ov or ncores)


def _cube_units_dw(rs, G, KD, Mg, ncols, t: CubeTiling, ncores, ksplit_ov, block_dim_ov):
    tiles = [(g, kd, m0, min(t.baseM, Mg - m0), col0)
             for g in range(G) for kd in range(KD) for m0 in range(0, Mg, t.baseM)
             for col0 in range(0, ncols, t.baseN)]
    cores = block_dim_ov or ncores
    ks = ksplit_ov or max(1, min(len(rs), cores // max(len(tiles), 1)))
    units = []
    for tile in tiles:
        for part in _split(rs, ks):
            units.append(tile + (part,))
    return _split(units, cores), ks


def plan_convolution_backward(op, geom, go, x, w, outs, promoted, compute, cube_math, profile) -> Plan:
    mask = [o is not None for o in outs]
    gi, gw, gb = outs
    ov = tiling_override(op, TILING_FIELDS)
    cd = STORAGE[compute]
    isz, c0 = cd.itemsize, 32 // cd.itemsize
    nd = geom.nd
    G = geom.groups
    kk3 = _pad3(geom.k, 1)
    S3, D3 = _pad3(geom.stride, 1), _pad3(geom.dilation, 1)
    PL3 = _pad3(tuple(p[0] for p in geom.pad), 0)
    in3, out3 = _pad3(geom.in_sp, 1), _pad3(geom.out_sp, 1)
    Cin_g, Cout_g = geom.Cin // G, geom.Cout // G
    KD, KHW = kk3[0], kk3[1] * kk3[2]
    kk = KD * KHW
    ncores = profile.core_kind_for("cube")[1].count
    a2 = "PIPE_FIX" in profile.core_kind_for("cube")[1].pipes
    hf32 = compute == "HF32"
    workspace: list[tuple[str, int]] = []
    tiling: dict = {"computeDtype": compute, "cubeMathType": cube_math, "promotedDtype": promoted,
                    "C0": c0, "groups": G}

    def part(name: str, nbytes: int) -> int:
        workspace.append((name, max(int(nbytes), 32)))
        return len(workspace) - 1

    steps = []   # (kind, payload) resolved at build time with workspace offsets
    empty = geom.N == 0 or geom.Cin == 0 or geom.Cout == 0
    # ---- inputs: contiguous copies -------------------------------------------------------
    srcs = {}
    for name, t, needed in (("gradOutput", go, mask[0] or mask[1] or mask[2]), ("input", x, mask[1]),
                            ("weight", w, mask[0])):
        if not needed or t.numel() == 0:
            continue
        if t.is_contiguous():
            srcs[name] = ("tensor", t)
        else:
            idx = part(f"contiguous copy of {name} (non-contiguous view)", t.numel() * t.itemsize)
            steps.append(("contig", name, t, idx))
            srcs[name] = ("ws", idx, t.dtype)

    def src_arg(name, ws, offs):
        s = srcs[name]
        if s[0] == "tensor":
            t = s[1]
            return tensor_arg(t, name) + t.offset
        return workspace_arg(ws, offs[s[1]], workspace[s[1]][1], s[2], f"workspace:{name}")

    launches_spec = []
    if not empty and (mask[0] or mask[1]):
        if not geom.transposed:
            ic_dx = Img2col(geom.N, G, Cout_g, ceil_div(Cout_g, c0),
                            tuple((o - 1) * s + 1 for o, s in zip(out3, S3)), in3, (1, 1, 1), D3,
                            tuple(d * (k - 1) - p for d, k, p in zip(D3, kk3, PL3)), kk3)
            ic_dw = Img2col(geom.N, G, Cin_g, ceil_div(Cin_g, c0), in3, out3, S3, D3, PL3, kk3)
            dx_dil = S3
        else:
            ic_dx = Img2col(geom.N, G, Cout_g, ceil_div(Cout_g, c0), out3, in3, S3, D3, PL3, kk3)
            ic_dw = ic_dx
            dx_dil = (1, 1, 1)
        if mask[0]:
            for i, p in enumerate(ic_dx.P):
                if -p > 255 * 4096 or p > 255:
                    raise tiling_error(f"gradInput: the transposed convolution needs a load3d padding of "
                                       f"{p} (> 255) along axis {i}, which does not fit load3d's padList")
            t_dx, rs_dx = plan_dx_tiling(ic_dx, Cin_g, isz, profile, ov, c0)
            if (t_dx.baseK // c0) * ceil_div(min(t_dx.baseN, Cin_g), 16) > 255:
                t_dx.baseK = max(c0, 255 // ceil_div(min(t_dx.baseN, Cin_g), 16) * c0)
            blocks_dx = _cube_units_dx(rs_dx, G, Cin_g, t_dx.baseN, ncores, int(ov.get("blockDim", 0)))
            t_dx.blockDim = len(blocks_dx)
            tiling["gradInput"] = {k: v for k, v in t_dx.__dict__.items() if k != "name"}
        if mask[1]:
            Mg_dw = Cout_g if not geom.transposed else Cin_g
            ncols = ic_dw.C1 * KHW * c0
            t_dw, rs_dw = plan_dw_tiling(ic_dw, Mg_dw, isz, profile, ov, c0, ncores)
            if t_dw.baseK > 255 * c0:
                raise tiling_error(f"gradWeight tiling: baseK {t_dw.baseK} positions needs more than 255 "
                                   f"load2d fractals per row band; it does not fit")
            blocks_dw, ks = _cube_units_dw(rs_dw, G, KD, Mg_dw, ncols, t_dw, ncores,
                                           int(ov.get("dwKSplit", 0)), int(ov.get("blockDim", 0)))
            t_dw.blockDim, t_dw.kSplit = len(blocks_dw), ks
            tiling["gradWeight"] = {k: v for k, v in t_dw.__dict__.items() if k != "name"}
        # feature maps in NC1HWC0
        Fdx = Fdw = None
        if mask[0]:
            Fdx = part("gradOutput as NC1HWC0" + (" dilated by the stride" if any(s > 1 for s in dx_dil) else "")
                       + f" ({dtype_name(cd)}, the gradInput feature map)",
                       geom.N * G * ic_dx.C1 * int(np.prod(ic_dx.fdims)) * c0 * isz)
        if mask[1]:
            if geom.transposed and Fdx is not None:
                Fdw = Fdx
            else:
                nm = "input" if not geom.transposed else "gradOutput"
                Fdw = part(f"{nm} as NC1HWC0 ({dtype_name(cd)}, the gradWeight feature map)",
                           geom.N * G * ic_dw.C1 * int(np.prod(ic_dw.fdims)) * c0 * isz)
        launches_spec.append(("features", ic_dx if mask[0] else None, ic_dw if mask[1] else None, Fdx, Fdw, dx_dil))
        if mask[0]:
            WT = part(f"weight as W'^T rows ({dtype_name(cd)}, taps {'flipped, ' if not geom.transposed else ''}"
                      f"the gradInput right operand)", G * Cin_g * KD * ic_dx.C1 * KHW * c0 * isz)
            Cpad = align_up(Cin_g, 16)
            DXW = part(f"gradInput rows (positions x channels, {dtype_name(gi.dtype)}) from the Cube",
                       geom.N * G * ic_dx.positions * Cpad * gi.itemsize)
            launches_spec.append(("dx", ic_dx, t_dx, blocks_dx, WT, DXW, Cpad, Fdx))
        if mask[1]:
            a_name = "gradOutput" if not geom.transposed else "input"
            a_src = go if not geom.transposed else x
            Adw = None
            if a_src.dtype != cd:
                Adw = part(f"{a_name} cast to {dtype_name(cd)} (the gradWeight left operand)",
                           a_src.numel() * isz)
            DW = part(f"gradWeight FP32 accumulator (partial sums of {t_dw.kSplit} core(s) per tile, atomic add)",
                      G * Mg_dw * KD * ic_dw.C1 * KHW * c0 * 4)
            launches_spec.append(("dw", ic_dw, t_dw, blocks_dw, a_name, a_src, Adw, DW, Mg_dw, Fdw))
    # outputs that are not contiguous: computed dense in the workspace, then ViewCopy
    dense_out = {}
    for i, (name, t) in enumerate((("gradInput", gi), ("gradWeight", gw), ("gradBias", gb))):
        if mask[i] and t.numel() > 0 and not t.is_contiguous():
            dense_out[name] = part(f"{name} dense, before the strided write-back", t.numel() * t.itemsize)
    offs_cache = {}
    plan = Plan(workspace, lambda ws: [], tiling)

    def out_arg(name, t, ws, offs):
        if name in dense_out:
            i = dense_out[name]
            return workspace_arg(ws, offs[i], workspace[i][1], t.dtype, f"workspace:{name}")
        return tensor_arg(t, name) + t.offset

    def build(ws):
        offs = list(plan.workspace_offsets().values())
        L = []
        for st in steps:
            _, name, t, idx = st
            b, _ = view_copy_launch(t, name, profile, gather=True)
            L.append(b(workspace_arg(ws, offs[idx], workspace[idx][1], t.dtype, f"workspace:{name}")))
        if empty:
            if mask[1] and gw.numel():
                L.append(zero_fill_launch("gradWeight", out_arg("gradWeight", gw, ws, offs), gw.numel() * gw.itemsize, profile))
            if mask[2] and gb.numel() and (geom.N == 0 or geom.Cout == 0):
                L.append(zero_fill_launch("gradBias", out_arg("gradBias", gb, ws, offs), gb.numel() * gb.itemsize, profile))
        for spec in launches_spec:
            if spec[0] == "features":
                _, icx, icw, Fdx, Fdw, dil = spec
                goa = src_arg("gradOutput", ws, offs)
                for ic, idx, src_name, sdil in ((icx, Fdx, "gradOutput", dil),
                                                (icw, Fdw if Fdw != Fdx else None,
                                                 "input" if not geom.transposed else "gradOutput", (1, 1, 1))):
                    if ic is None or idx is None:
                        continue
                    sarg = src_arg(src_name, ws, offs)
                    sdt = sarg.dtype
                    fb = workspace[idx][1]
                    farg = workspace_arg(ws, offs[idx], fb, cd, f"workspace:{src_name}5HD")
                    sd = _pad3((go if src_name == "gradOutput" else x).viewDims[2:], 1)
                    if any(v > 1 for v in sdil):
                        L.append(zero_fill_launch(f"{src_name} dilated", farg, fb, profile))
                    lp = to5hd_lp(profile, c0, sdt.itemsize, isz, sdt != cd, sd[2], any(v > 1 for v in sdil))
                    L.append(to5hd_launch(src_name, sarg, farg, To5HD(geom.N, G, ic.C, ic.C1, c0, sd, sdil,
                                                                      ic.fdims, sdt, cd, lp), profile))
            elif spec[0] == "dx":
                _, ic, t, blocks, WT, DXW, Cpad, Fdx = spec
                warg = src_arg("weight", ws, offs)
                wt_arg = workspace_arg(ws, offs[WT], workspace[WT][1], cd, "workspace:W'T")
                wsrc = w
                if not geom.transposed:
                    pw = PackW(G, Cout_g, Cin_g * kk, Cin_g, Cout_g, ic.C1, c0, KD, KHW, True, warg.dtype, cd,
                               align_up(Cin_g * kk * warg.dtype.itemsize, 32) // warg.dtype.itemsize)
                    pw.pitch = align_up(pw.pitch, 16)
                else:
                    pitch = c0 * kk
                    if (pitch * warg.dtype.itemsize) % 32:
                        pitch = align_up(pitch * warg.dtype.itemsize, 32) // warg.dtype.itemsize
                    pw = PackW(G, Cin_g, Cout_g * kk, Cin_g, Cout_g, ic.C1, c0, KD, KHW, False, warg.dtype, cd, pitch)
                L.append(packw_launch(warg, wt_arg, pw, profile))
                fx = workspace_arg(ws, offs[Fdx], workspace[Fdx][1], cd, "workspace:F(dX)")
                dxw = workspace_arg(ws, offs[DXW], workspace[DXW][1], gi.dtype, "workspace:dX rows")
                args = CubeArgs(ic, cd, hf32, t, Cin_g, 0, Cpad, gi.dtype, a2)
                L.append(KernelLaunch("GradInput(Cube: img2col x W'T)", _grad_input_body, len(blocks), "cube",
                                      (fx, wt_arg, dxw, args, blocks)))
                L.append(dx_out_launch(dxw, out_arg("gradInput", gi, ws, offs), geom.N, G, Cin_g, Cpad,
                                       ic.positions, gi.dtype, profile))
                if "gradInput" in dense_out:
                    b, _ = view_copy_launch(gi, "gradInput", profile, gather=False)
                    L.append(b(out_arg("gradInput", gi, ws, offs)))
            elif spec[0] == "dw":
                _, ic, t, blocks, a_name, a_src, Adw, DW, Mg, Fdw = spec
                aarg = src_arg(a_name, ws, offs)
                if Adw is not None:
                    dst = workspace_arg(ws, offs[Adw], workspace[Adw][1], cd, f"workspace:{a_name}:cast")
                    L.append(cast_launch(a_name, aarg, dst, a_src.numel(), aarg.dtype, cd, profile))
                    aarg = dst
                dwa = workspace_arg(ws, offs[DW], workspace[DW][1], F32, "workspace:dW FP32")
                L.append(zero_fill_launch("gradWeight accumulator", dwa, workspace[DW][1], profile))
                fw = workspace_arg(ws, offs[Fdw], workspace[Fdw][1], cd, "workspace:F(dW)")
                args = CubeArgs(ic, cd, hf32, t, Mg, Mg * G, 0, F32, a2)
                L.append(KernelLaunch("GradWeight(Cube: A x img2col, atomic FP32)", _grad_weight_body,
                                      len(blocks), "cube", (aarg, fw, dwa, args, blocks)))
                Cc = ic.C
                L.append(dw_out_launch(dwa, out_arg("gradWeight", gw, ws, offs), G, Mg, Cc, ic.C1, c0, KD, KHW,
                                       gw.dtype, profile))
                if "gradWeight" in dense_out:
                    b, _ = view_copy_launch(gw, "gradWeight", profile, gather=False)
                    L.append(b(out_arg("gradWeight", gw, ws, offs)))
        if mask[2] and gb.numel() and not (geom.N == 0):
            goa = src_arg("gradOutput", ws, offs)
            P = int(np.prod(geom.out_sp))
            L.append(bias_launch(goa, out_arg("gradBias", gb, ws, offs), geom.N, geom.Cout, P, goa.dtype,
                                 gb.dtype, profile))
            if "gradBias" in dense_out:
                b, _ = view_copy_launch(gb, "gradBias", profile, gather=False)
                L.append(b(out_arg("gradBias", gb, ws, offs)))
        return L

    plan.build = build
    return plan
