"""The Cube path (simulator/kernel/cube.py) and the GEMM example: layouts against numpy, img2col
against a direct float64 reference, HF32 rounding bit for bit, Mmad numerics and cost per dtype,
the sanitizer's faults, and the GEMM on every chip and dtype it supports.

Tolerances (GEMM vs float64 numpy, relative to max |A @ B|): FLOAT16 output 1e-3 (half's
rounding is 2^-11 relative), BF16 output 8e-3 (2^-8 relative), FLOAT 1e-5 (fp32 accumulation),
HF32 4e-3 (inputs carry 12 significant bits). FLOAT16 / BF16 / FLOAT / HF32 GEMMs are also
checked bit for bit against the Cube's arithmetic written independently here (exact k0-deep
fractal sums, accumulated in fp32 in k order)."""
from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import simulator
from simulator.enums import KernelError
from simulator.kernel import *  # noqa: F401,F403
from simulator.program import BARRIER, COMPUTE, Instr
from simulator.recorder import current_context
from simulator.profile import list_socs, load_profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from gemm_kernel import DTYPES, gemm, gemm_tiling  # noqa: E402

A2_SOCS = [s for s in list_socs() if load_profile(s).series == "A2"]
ALL_SOCS = list_socs()
bf16 = np.dtype(ml_dtypes.bfloat16)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def peek(pipe: str, buffer: str, store: dict, key: str) -> None:
    """Test hook: snapshot a local buffer when `pipe` reaches this point (in functional mode)."""
    ctx = current_context()
    core = ctx.core

    def fn():
        store[key] = core.buffers[buffer].copy()
    # the pipe's transfers in flight land first (as PipeBarrier(pipe) orders them on the chip)
    ctx.emit(Instr(pipe, f"PipeBarrier({pipe})", BARRIER, flag=pipe))
    ctx.emit(Instr(pipe, "peek", COMPUTE, 0.0, fn=fn))


def run(body, args, soc="Ascend910B1", kind="cube", mode="functional"):
    return simulator.run_kernel(body, 1, args, kind=kind, soc=soc, mode=mode)


def nz_ref(mat: np.ndarray, c0: int, strip_rows: int) -> np.ndarray:
    """ND (n x d) -> NZ elements as DataCopy(Nd2NzParams) writes them (loops, for clarity)."""
    n, d = mat.shape
    d1 = -(-d // c0)
    out = np.zeros(d1 * strip_rows * c0, dtype=mat.dtype)
    for r in range(n):
        for c in range(d1 * c0):
            out[(c // c0) * strip_rows * c0 + r * c0 + c % c0] = mat[r, c] if c < d else 0
    return out


def decode_zz(flat: np.ndarray, rows: int, cols: int, k0: int) -> np.ndarray:
    r1, c1 = -(-rows // 16), -(-cols // k0)
    out = np.zeros((r1 * 16, c1 * k0), dtype=flat.dtype)
    for i in range(r1):
        for j in range(c1):
            f = flat[(i * c1 + j) * 16 * k0:(i * c1 + j + 1) * 16 * k0].reshape(16, k0)
            out[i * 16:(i + 1) * 16, j * k0:(j + 1) * k0] = f
    return out[:rows, :cols]


def decode_zn(flat: np.ndarray, k: int, n: int, k0: int) -> np.ndarray:
    k1, n1 = -(-k // k0), -(-n // 16)
    out = np.zeros((k1 * k0, n1 * 16), dtype=flat.dtype)
    for i in range(k1):
        for j in range(n1):
            f = flat[(i * n1 + j) * 16 * k0:(i * n1 + j + 1) * 16 * k0].reshape(16, k0)
            out[i * k0:(i + 1) * k0, j * 16:(j + 1) * 16] = f.T
    return out[:k, :n]


def img2col_ref(x: np.ndarray, fh, fw, sh, sw, dh, dw, pads, c0) -> np.ndarray:
    """Direct float64 img2col of a C x H x W map: rows (ho, wo), columns (c1, kh, kw, c0)."""
    c, h, w = x.shape
    left, right, top, bottom = pads
    ho = (h + top + bottom - dh * (fh - 1) - 1) // sh + 1
    wo = (w + left + right - dw * (fw - 1) - 1) // sw + 1
    out = np.zeros((ho * wo, c * fh * fw))
    for oh in range(ho):
        for ow in range(wo):
            col = 0
            for c1 in range(c // c0):
                for kh in range(fh):
                    for kw in range(fw):
                        for cc in range(c0):
                            hh, ww = oh * sh - top + kh * dh, ow * sw - left + kw * dw
                            if 0 <= hh < h and 0 <= ww < w:
                                out[oh * wo + ow, col] = x[c1 * c0 + cc, hh, ww]
                            col += 1
    return out


def cube_ref(a: np.ndarray, b: np.ndarray, k0: int) -> np.ndarray:
    """The Cube's arithmetic, independently: exact k0-deep block sums, fp32 accumulation."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for k in range(0, a.shape[1], k0):
        acc = acc + (a64[:, k:k + k0] @ b64[k:k + k0]).astype(np.float32)
    return acc


# ---------------------------------------------------------------------------------------------
# HF32 rounding, bit for bit
# ---------------------------------------------------------------------------------------------
def f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("inp, want", [
    (0x3F800000, 0x3F800000),              # 1.0 exact
    (0x3F8007FF, 0x3F800000),              # below half an ulp: down
    (0x3F800800, 0x3F800000),              # tie, kept lsb even (0): down
    (0x3F801800, 0x3F802000),              # tie, lsb odd: up to even
    (0x3F800801, 0x3F801000),              # above the tie: up
    (0xBF801800, 0xBF802000),              # negative tie to even
    (0x3FFFF800, 0x40000000),              # carry into the exponent
    (0x7F7FFFFF, 0x7F800000),              # largest fp32 rounds past HF32's max: inf
    (0x7F800000, 0x7F800000),              # inf
    (0xFF800000, 0xFF800000),              # -inf
    (0x00000000, 0x00000000),              # +0
    (0x80000000, 0x80000000),              # -0
    (0x00000FFF, 0x00001000),              # subnormal: rounded at the same bit position (up)
    (0x00000800, 0x00000000),              # subnormal tie to even: down to 0
    (0x00001800, 0x00002000),              # subnormal tie to even: up
    (0x007FF800, 0x00800000),              # largest subnormals carry into the smallest normal
])
def test_hf32_round_bit_exact(inp, want):
    assert int(bits(hf32_round(f32([inp])))[0]) == want


def test_hf32_round_nan_and_idempotent():
    assert np.isnan(hf32_round(np.float32(np.nan)))
    rng = np.random.default_rng(0)
    x = rng.standard_normal(10000).astype(np.float32) * np.float32(1e3)
    y = hf32_round(x)
    assert np.array_equal(hf32_round(y), y)
    assert not (bits(y) & 0xFFF).any()                              # 11 fraction bits kept
    assert np.all(np.abs(y - x) <= np.abs(x) * 2.0 ** -12 * 1.0000001)


# ---------------------------------------------------------------------------------------------
# layouts: ND -> NZ, load2d, load3d
# ---------------------------------------------------------------------------------------------
def test_nd2nz_matches_numpy_with_tails_and_matrices():
    rng = np.random.default_rng(1)
    nd, n, d, src_d = 2, 20, 37, 40                   # d not a multiple of C0: padded with zeros
    x = rng.standard_normal((nd, n, src_d)).astype(np.float16)
    strip, mstride = 32, 3 * 32 * 16                 # strip stride 32 rows; matrices apart
    store = {}

    def body(x):
        pipe = TPipe()
        buf = TBuf(TPosition.A1)
        pipe.InitBuffer(buf, 2 * mstride * 2)
        l1 = buf.Get(half)
        g = GlobalTensor(half); g.SetGlobalBuffer(x)
        DataCopy(l1, g, Nd2NzParams(nd, n, d, n * src_d, src_d, strip, 1, mstride))
        peek("PIPE_MTE2", "L1", store, "l1")

    run(body, {"x": x})
    l1 = store["l1"].view(np.float16)
    for i in range(nd):
        want = nz_ref(x[i, :, :d], 16, strip)
        got = l1[i * mstride:i * mstride + want.size].copy()
        for s in range(3):                   # rows beyond n are not written: compare rows < n
            lo = s * strip * 16
            assert np.array_equal(got[lo:lo + n * 16], want[lo:lo + n * 16])
        tail = got[2 * strip * 16:2 * strip * 16 + n * 16].reshape(n, 16)
        assert not tail[:, d - 32:].any()     # columns 37..47 of the last strip are zeros


def test_nd2nz_costs_more_than_a_plain_copy():
    for soc in ALL_SOCS:
        p = load_profile(soc)
        if "GM_L1_ND2NZ" not in p.paths:          # a chip without the ND -> NZ copy
            assert p.series in ("training", "inference"), soc
            continue
        for kb in (1, 4, 16, 64, 192, 512):
            n = kb * 1024
            assert p.path("GM_L1_ND2NZ").cycles(n) > p.path("GM_L1").cycles(n), (soc, kb)


@pytest.mark.parametrize("transpose, dst, gap", [(False, "L0A", 0), (True, "L0B", 0), (False, "L0A", 1)])
def test_load2d_fractals(transpose, dst, gap):
    rng = np.random.default_rng(2)
    src = rng.standard_normal(16 * 256).astype(np.float16)      # 16 fractals
    start, rep, stride = 3, 4, 3
    store = {}

    def body(x):
        pipe = TPipe()
        b1, b2 = TBuf(TPosition.A1), TBuf(TPosition.A2 if dst == "L0A" else TPosition.B2)
        pipe.InitBuffer(b1, 16 * 512)
        pipe.InitBuffer(b2, 16 * 512)
        l1, l0 = b1.Get(half), b2.Get(half)
        g = GlobalTensor(half); g.SetGlobalBuffer(x)
        DataCopy(l1, g, 16 * 256)
        PipeBarrier(PIPE_ALL)
        LoadData(l0, l1, LoadData2DParams(startIndex=start, repeatTimes=rep, srcStride=stride,
                                          dstGap=gap, ifTranspose=transpose))
        peek("PIPE_MTE1", dst, store, "l0")

    run(body, {"x": src})
    got = store["l0"].view(np.float16)
    fr = src.reshape(16, 16, 16)
    for i in range(rep):
        want = fr[start + i * stride]
        if transpose:
            want = want.T
        o = i * (1 + gap) * 256
        assert np.array_equal(got[o:o + 256].reshape(16, 16), want)


@pytest.mark.parametrize("dtype, dst, pads, stride, dil, k, mrange, krange, tr", [
    (np.float16, "L0A", (1, 1, 1, 1), (1, 1), (1, 1), (3, 3), (0, 49), (0, 288), False),
    (np.float16, "L0A", (2, 0, 1, 2), (2, 1), (1, 2), (3, 2), (5, 21), (32, 96), False),
    (np.float16, "L0B", (1, 2, 0, 1), (1, 2), (2, 1), (2, 3), (3, 30), (16, 128), False),
    (np.float32, "L0A", (0, 1, 1, 0), (2, 2), (1, 1), (3, 3), (0, 16), (8, 64), False),
    (np.float32, "L0B", (1, 1, 1, 1), (1, 1), (1, 1), (3, 3), (16, 24), (0, 72), False),
    (np.float16, "L0A", (1, 1, 1, 1), (1, 1), (1, 1), (3, 3), (0, 32), (0, 48), True),
])
def test_load3d_img2col_matches_direct_reference(dtype, dst, pads, stride, dil, k, mrange, krange, tr):
    c0 = 32 // np.dtype(dtype).itemsize
    C, H, W = 2 * c0, 7, 7
    rng = np.random.default_rng(3)
    x = rng.standard_normal((C, H, W)).astype(dtype)
    nc1hwc0 = x.reshape(C // c0, c0, H, W).transpose(0, 2, 3, 1).copy()    # test setup only
    fh, fw = k
    params = LoadData3DParamsV2(padList=pads, l1H=H, l1W=W, channelSize=C, kExtension=krange[1],
                                mExtension=mrange[1], kStartPt=krange[0], mStartPt=mrange[0],
                                strideW=stride[1], strideH=stride[0], filterW=fw, filterH=fh,
                                dilationFilterW=dil[1], dilationFilterH=dil[0], enTranspose=tr)
    store = {}

    def body(xg):
        pipe = TPipe()
        b1 = TBuf(TPosition.A1)
        b2 = TBuf(TPosition.A2 if dst == "L0A" else TPosition.B2)
        pipe.InitBuffer(b1, nc1hwc0.nbytes)
        pipe.InitBuffer(b2, 65536)
        l1, l0 = b1.Get(dtype), b2.Get(dtype)
        g = GlobalTensor(dtype); g.SetGlobalBuffer(xg)
        DataCopy(l1, g, nc1hwc0.size)
        PipeBarrier(PIPE_ALL)
        LoadData(l0, l1, params)
        peek("PIPE_MTE1", dst, store, "l0")

    run(body, {"xg": nc1hwc0.reshape(-1)})
    ref = img2col_ref(x.astype(np.float64), fh, fw, stride[0], stride[1], dil[0], dil[1], pads, c0)
    want = ref[mrange[0]:mrange[0] + mrange[1], krange[0]:krange[0] + krange[1]]
    flat = store["l0"].view(dtype)
    if dst == "L0A":
        got = decode_zz(flat, *(want.T.shape if tr else want.shape), c0)
        if tr:
            got = got.T
    else:
        got = decode_zn(flat, want.shape[0], want.shape[1], c0)
    assert np.array_equal(got.astype(np.float64), want)
    _, _, m_all, k_all = img2col_shape(params, dtype)
    assert (m_all, k_all) == ref.shape


# ---------------------------------------------------------------------------------------------
# Mmad: numerics per dtype, accumulation, cost
# ---------------------------------------------------------------------------------------------
def _mmad_chain(a, b, soc, hf32=False, accumulate_twice=False, out_dtype=np.float32):
    """GM -> L1 (ND2NZ) -> L0A / L0B (load2d; B given as B^T) -> Mmad -> Fixpipe -> GM."""
    m, k = a.shape
    n = b.shape[1]
    dt = a.dtype
    c0 = 32 // dt.itemsize
    bt = np.ascontiguousarray(b.T)
    m16, n16 = -(-m // 16) * 16, -(-n // 16) * 16

    def body(ag, bg, cg):
        pipe = TPipe()
        a1, b1, a2, b2, co = (TBuf(TPosition.A1), TBuf(TPosition.B1), TBuf(TPosition.A2),
                              TBuf(TPosition.B2), TBuf(TPosition.CO1))
        for buf, nbytes in ((a1, 16384), (b1, 16384), (a2, 16384), (b2, 16384), (co, 65536)):
            pipe.InitBuffer(buf, nbytes)
        la1, lb1, la2, lb2 = a1.Get(dt), b1.Get(dt), a2.Get(dt), b2.Get(dt)
        lc = co.Get(np.int32 if dt == np.int8 else np.float32)
        if hf32:
            SetHF32Mode(True)
        A = GlobalTensor(dt); A.SetGlobalBuffer(ag)
        B = GlobalTensor(dt); B.SetGlobalBuffer(bg)
        C = GlobalTensor(); C.SetGlobalBuffer(cg)
        InitConstValue(la1, InitConstValueParams(1, 512, 0, 0))
        InitConstValue(lb1, InitConstValueParams(1, 512, 0, 0))
        DataCopy(la1, A, Nd2NzParams(1, m, k, 0, k, m16, 1, 0))
        DataCopy(lb1, B, Nd2NzParams(1, n, k, 0, k, n16, 1, 0))
        PipeBarrier(PIPE_ALL)
        k1 = -(-k // c0)
        for s in range(k1):        # A: NZ (s, mb) -> zZ (mb, s); B^T: NZ (s, nb) is zN already
            LoadData(la2[s * (512 // dt.itemsize)], la1, LoadData2DParams(startIndex=s * (m16 // 16),
                     repeatTimes=m16 // 16, srcStride=1, dstGap=k1 - 1))
        LoadData(lb2, lb1, LoadData2DParams(startIndex=0, repeatTimes=k1 * (n16 // 16), srcStride=1))
        PipeBarrier(PIPE_ALL)
        Mmad(lc, la2, lb2, MmadParams(m, n, k, cmatrixInitVal=True))
        if accumulate_twice:
            Mmad(lc, la2, lb2, MmadParams(m, n, k, cmatrixInitVal=False))
        PipeBarrier(PIPE_ALL)
        Fixpipe(C, lc, FixpipeParamsV220(nSize=n, mSize=m, srcStride=m16, dstStride=n))

    c = np.zeros((m, n), dtype=np.int32 if dt == np.int8 else out_dtype)
    r = run(body, {"ag": a, "bg": bt, "cg": c}, soc=soc)
    return r["cg"], r


@pytest.mark.parametrize("dtype, name", [(np.float16, "FLOAT16"), (bf16, "BF16"), (np.float32, "FLOAT"),
                                         (np.float32, "HF32")])
@pytest.mark.parametrize("k", [72, 64])      # a tail of k (general path) or whole k0 steps (fast path)
def test_mmad_numerics_bit_exact(dtype, name, k):
    rng = np.random.default_rng(4)
    m, n = 40, 24                                            # tails in m and n
    a = (rng.standard_normal((m, k)) * 3).astype(dtype)
    b = (rng.standard_normal((k, n)) * 3).astype(dtype)
    c, _ = _mmad_chain(a, b, "Ascend910B1", hf32=name == "HF32", accumulate_twice=True)
    k0 = 32 // np.dtype(dtype).itemsize
    aa, bb = (hf32_round(a), hf32_round(b)) if name == "HF32" else (a, b)
    once = cube_ref(aa, bb, k0)
    # the second (accumulating) Mmad adds each block step onto the first result
    acc = once.copy()
    for kk in range(0, k, k0):
        acc = acc + (aa[:, kk:kk + k0].astype(np.float64) @ bb[kk:kk + k0].astype(np.float64)).astype(np.float32)
    assert np.array_equal(c, acc)
    ref = 2 * (a.astype(np.float64) @ b.astype(np.float64))
    tol = {"FLOAT16": 1e-6, "BF16": 1e-6, "FLOAT": 1e-6, "HF32": 4e-3}[name]
    assert np.abs(c - ref).max() <= tol * np.abs(ref).max()
    if name == "HF32":                     # HF32 really loses precision against FP32
        c32, _ = _mmad_chain(a, b, "Ascend910B1")
        assert not np.array_equal(c, c32)


def test_mmad_int8_exact():
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (32, 64)).astype(np.int8)
    b = rng.integers(-128, 128, (64, 32)).astype(np.int8)
    c, _ = _mmad_chain(a, b, "Ascend910B1")
    assert np.array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


def test_mmad_cost_and_utilisation():
    p = load_profile("Ascend910B1")
    for (m, n, k, dt) in [(16, 16, 16, "FLOAT16"), (128, 128, 64, "FLOAT16"), (40, 24, 72, "FLOAT16"),
                          (64, 64, 64, "FLOAT"), (33, 17, 9, "HF32"), (32, 32, 64, "INT8")]:
        k0 = {"FLOAT16": 16, "FLOAT": 8, "HF32": 8, "INT8": 32}[dt]
        steps = -(-m // 16) * -(-n // 16) * -(-k // k0)
        cyc = mmad_cycles(p, m, n, k, dt)
        assert cyc == p.cube.startup_cycles + steps * 16 * 16 * k0 / p.cube.macs_per_cycle[dt]
        assert m * n * k / cyc <= p.cube.macs_per_cycle[dt]      # never above the MAC rate
    # the traced Mmad takes exactly that
    rng = np.random.default_rng(6)
    a = rng.standard_normal((40, 72)).astype(np.float16)
    b = rng.standard_normal((72, 24)).astype(np.float16)
    _, r = _mmad_chain(a, b, "Ascend910B1")
    durs = [e[4] for e in r.trace.rec.trace if e[2] == "Mmad"]
    assert durs == [mmad_cycles(p, 40, 24, 72, "FLOAT16")]


def test_fixpipe_atomic_add_and_bf16_out():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 32)).astype(np.float16)
    bt = np.ascontiguousarray(b.T)

    def body(ag, bg, cg, hg):
        pipe = TPipe()
        bufs = [TBuf(p) for p in (TPosition.A1, TPosition.B1, TPosition.A2, TPosition.B2, TPosition.CO1)]
        for bf in bufs:
            pipe.InitBuffer(bf, 4096)
        la1, lb1, la2, lb2 = (bf.Get(half) for bf in bufs[:4])
        lc = bufs[4].Get(float32)
        A = GlobalTensor(half); A.SetGlobalBuffer(ag)
        B = GlobalTensor(half); B.SetGlobalBuffer(bg)
        C = GlobalTensor(float32); C.SetGlobalBuffer(cg)
        H = GlobalTensor(bfloat16); H.SetGlobalBuffer(hg)
        DataCopy(la1, A, Nd2NzParams(1, 16, 16, 0, 16, 16, 1, 0))
        DataCopy(lb1, B, Nd2NzParams(1, 32, 16, 0, 16, 32, 1, 0))
        PipeBarrier(PIPE_ALL)
        LoadData(la2, la1, LoadData2DParams(0, 1, 1))
        LoadData(lb2, lb1, LoadData2DParams(0, 2, 1))
        PipeBarrier(PIPE_ALL)
        Mmad(lc, la2, lb2, MmadParams(16, 32, 16))
        PipeBarrier(PIPE_ALL)
        SetAtomicAdd(np.float32)
        Fixpipe(C, lc, FixpipeParamsV220(nSize=32, mSize=16, srcStride=16, dstStride=32))
        Fixpipe(C, lc, FixpipeParamsV220(nSize=32, mSize=16, srcStride=16, dstStride=32))
        SetAtomicNone()
        Fixpipe(H, lc, FixpipeParamsV220(nSize=32, mSize=16, srcStride=16, dstStride=32))

    c0 = np.ones((16, 32), np.float32)
    r = run(body, {"ag": a, "bg": bt, "cg": c0, "hg": np.zeros((16, 32), bf16)})
    exact = cube_ref(a, b, 16)
    assert np.array_equal(r["cg"], (np.float32(1) + exact) + exact)
    assert np.array_equal(r["hg"], exact.astype(bf16))


@pytest.mark.parametrize("config, m, n, ss, ds, relu, atomic", [
    (CFG_ROW_MAJOR, 20, 40, 32, 40, False, False),      # dense rows
    (CFG_ROW_MAJOR, 20, 40, 32, 57, True, False),       # rows ds apart, relu
    (CFG_ROW_MAJOR, 7, 23, 16, 30, False, True),        # atomic add into strided rows
    (CFG_NZ, 20, 40, 32, 24, False, False),             # a partial last strip
    (CFG_NZ, 16, 48, 16, 16, True, True),               # whole strips, relu, atomic
])
def test_fixpipe_layouts_against_an_element_loop(config, m, n, ss, ds, relu, atomic):
    """Fixpipe reads n1 NZ strips of 16 columns, ss rows apart, from L0C and writes them to GM as
    rows ds elements apart (CFG_ROW_MAJOR) or as strips of 16 columns ds rows apart (CFG_NZ)."""
    n1 = -(-n // 16)
    l0c = (np.arange(n1 * ss * 16, dtype=np.float32) - 300.0) / 8
    size = (m - 1) * ds + n if config is CFG_ROW_MAJOR else ((n1 - 1) * ds + m) * 16
    base = np.linspace(-1, 1, size).astype(np.float32)

    def body(cg):
        pipe = TPipe()
        co1 = TBuf(TPosition.CO1)
        pipe.InitBuffer(co1, l0c.nbytes)
        lc = co1.Get(float32)
        ctx = current_context()                 # test hook: seed L0C as an Mmad would
        core = ctx.core
        ctx.emit(Instr("PIPE_M", "seed L0C", COMPUTE, 1.0, writes=(("L0C", 0, l0c.nbytes),),
                       fn=lambda: core.buffers["L0C"].__setitem__(slice(0, l0c.nbytes), l0c.view(np.uint8))))
        PipeBarrier(PIPE_ALL)
        C = GlobalTensor(float32)
        C.SetGlobalBuffer(cg)
        if atomic:
            SetAtomicAdd(np.float32)
        Fixpipe(C, lc, FixpipeParamsV220(nSize=n, mSize=m, srcStride=ss, dstStride=ds, reluEn=relu), config)

    out = run(body, {"cg": base.copy()})["cg"]
    want = base.copy()
    for r in range(m):
        for c in range(n):
            v = l0c[(c // 16) * ss * 16 + r * 16 + c % 16]
            v = max(v, np.float32(0)) if relu else v
            at = r * ds + c if config is CFG_ROW_MAJOR else (c // 16) * ds * 16 + r * 16 + c % 16
            want[at] = want[at] + v if atomic else v
    assert np.array_equal(out, want)


def test_l0c_to_ub_on_coupled_chip():
    """910A: L0C -> UB with DEQF16 keeps NZ fractals and converts to half."""
    vals = np.arange(2 * 256, dtype=np.float32).reshape(-1) / 7
    store = {}

    def body(xg):
        pipe = TPipe()
        co1, co2 = TBuf(TPosition.CO1), TBuf(TPosition.VECCALC)
        pipe.InitBuffer(co1, 4096)
        pipe.InitBuffer(co2, 4096)
        lc = co1.Get(float32)
        ctx = current_context()                 # test hook: seed L0C as an Mmad would
        core = ctx.core
        ctx.emit(Instr("PIPE_M", "seed L0C", COMPUTE, 1.0, writes=(("L0C", 0, 2048),),
                       fn=lambda: core.buffers["L0C"].__setitem__(slice(0, 2048), vals.view(np.uint8))))
        PipeBarrier(PIPE_ALL)
        out = co2.Get(half)
        DataCopy(out, lc, DataCopyParams(1, 2, 0, 0),
                 DataCopyEnhancedParams(blockMode=BlockMode.BLOCK_MODE_MATRIX, deqScale=DeqScale.DEQF16))
        peek("PIPE_V", "UB", store, "ub")

    run(body, {"xg": vals}, soc="Ascend910A")
    assert np.array_equal(store["ub"][:1024].view(np.float16), vals.astype(np.float16))


def test_transpose_nchw_to_nhwc():
    x = np.arange(2 * 16 * 3 * 4, dtype=np.float16)

    def body(xg, yg):
        pipe = TPipe()
        b = TBuf()
        pipe.InitBuffer(b, 2 * x.nbytes)
        src, dst = b.Get(half), b.Get(half)[x.size]
        g, h = GlobalTensor(half), GlobalTensor(half)
        g.SetGlobalBuffer(xg); h.SetGlobalBuffer(yg)
        DataCopy(src, g, x.size)
        PipeBarrier(PIPE_ALL)
        Transpose(dst, src, None, TransposeParamsExt(2, 16, 3, 4, TransposeType.TRANSPOSE_NCHW2NHWC))
        PipeBarrier(PIPE_ALL)
        DataCopy(h, dst, x.size)

    r = run(body, {"xg": x, "yg": np.zeros_like(x)}, kind="vector")
    assert np.array_equal(r["yg"], x.reshape(2, 16, 3, 4).transpose(0, 2, 3, 1).reshape(-1))


# ---------------------------------------------------------------------------------------------
# the sanitizer: each fault names core, pipe and instruction
# ---------------------------------------------------------------------------------------------
def _fault_of(body, soc="Ascend910B1", args=None):
    with pytest.raises(KernelError) as e:
        run(body, args or {"x": np.zeros(4096, np.float16)}, soc=soc)
    msg = str(e.value)
    assert "core aic0" in msg or "core aicore0" in msg
    assert "(block 0)" in msg and "instruction #" in msg
    return msg


def test_fault_copy_field_past_its_range():
    """DataCopyPad's blockCount is at most 4,095 (DataCopyExtParams; its strides are 32 bits): a
    copy past it faults, naming the field, instead of moving what no chip would."""
    def pad(p):
        def body(x):
            pipe = TPipe()
            b = TBuf()
            pipe.InitBuffer(b, 160 * 1024)
            g = GlobalTensor(half)
            g.SetGlobalBuffer(x)
            DataCopyPad(b.Get(half), g, p, DataCopyPadExtParams())
        return body
    x = {"x": np.zeros(1 << 16, np.float16)}
    with pytest.raises(KernelError, match=r"PIPE_MTE2.*DataCopyPad: blockCount = 4096 outside \[1, 4095\]"):
        run(pad(DataCopyExtParams(4096, 2, 0, 0)), x, kind="vector")
    with pytest.raises(KernelError, match=r"srcStride = 4294967296 outside \[0, 4294967295\]"):
        run(pad(DataCopyExtParams(2, 2, 1 << 32, 0)), x, kind="vector")
    run(pad(DataCopyExtParams(4095, 2, 0, 0)), x, kind="vector")          # the largest count runs


def test_fault_l0a_overflow():
    def body(x):
        pipe = TPipe()
        b1, b2 = TBuf(TPosition.A1), TBuf(TPosition.A2)
        pipe.InitBuffer(b1, 256 * 512)
        pipe.InitBuffer(b2, 65536)
        LoadData(b2.Get(half), b1.Get(half), LoadData2DParams(0, 200, 1))   # 100 KB into 64 KB
    msg = _fault_of(body)
    assert "PIPE_MTE1" in msg and "LoadData(2D)" in msg and "L0A" in msg and "overflow" in msg


def test_fault_misaligned_l0_address():
    def body(x):
        pipe = TPipe()
        b1, b2 = TBuf(TPosition.A1), TBuf(TPosition.B2)
        pipe.InitBuffer(b1, 4096)
        pipe.InitBuffer(b2, 4096)
        LoadData(b2.Get(half)[16], b1.Get(half), LoadData2DParams(0, 1, 1))  # L0B + 32 B
    msg = _fault_of(body)
    assert "PIPE_MTE1" in msg and "LoadData(2D)" in msg and "512-byte aligned" in msg


@pytest.mark.parametrize("soc, dtype, name", [("Ascend910A", bf16, "BF16"), ("Ascend310P3", np.float32, "FLOAT")])
def test_fault_mmad_dtype_not_on_chip(soc, dtype, name):
    def body(x):
        pipe = TPipe()
        bufs = [TBuf(p) for p in (TPosition.A2, TPosition.B2, TPosition.CO1)]
        for bf in bufs:
            pipe.InitBuffer(bf, 4096)
        Mmad(bufs[2].Get(float32), bufs[0].Get(dtype), bufs[1].Get(dtype), MmadParams(16, 16, 16))
    msg = _fault_of(body, soc=soc)
    assert "PIPE_M" in msg and "Mmad" in msg and f"{name} inputs are not supported" in msg and soc in msg


@pytest.mark.parametrize("soc", ["Ascend910A", "Ascend310P3"])
def test_fault_nd2nz_copy_on_a_chip_without_one(soc):
    """CANN's platform files for the training series and the 310P list no
    Intrinsic_data_move_out2l1_nd2nz (the A2 / A3 files do): DataCopy with Nd2NzParams is refused,
    naming the pipe and the instruction; the same copy runs on an A2 chip."""
    def body(x):
        pipe = TPipe()
        buf = TBuf(TPosition.A1)
        pipe.InitBuffer(buf, 4096)
        g = GlobalTensor(half); g.SetGlobalBuffer(x)
        DataCopy(buf.Get(half), g, Nd2NzParams(1, 16, 16, 0, 16, 16, 1, 0))
    msg = _fault_of(body, soc=soc)
    assert "PIPE_MTE2" in msg and "DataCopy(ND2NZ)" in msg and soc in msg and "FRACTAL_NZ" in msg
    run(body, {"x": np.zeros(4096, np.float16)}, soc="Ascend910B1")


def test_fault_fixpipe_out_of_gm_bounds():
    def body(x, c):
        pipe = TPipe()
        co = TBuf(TPosition.CO1)
        pipe.InitBuffer(co, 65536)
        C = GlobalTensor(float32); C.SetGlobalBuffer(c)
        Fixpipe(C[16 * 16], co.Get(float32), FixpipeParamsV220(nSize=16, mSize=32, srcStride=32, dstStride=16))
    msg = _fault_of(body, args={"x": np.zeros(16, np.float16), "c": np.zeros((32, 16), np.float32)})
    assert "PIPE_FIX" in msg and "Fixpipe" in msg and "outside its extent" in msg


def test_fault_fixpipe_on_coupled_chip_and_unwritten_l0c():
    def body(x, c):
        pipe = TPipe()
        co = TBuf(TPosition.CO1)
        pipe.InitBuffer(co, 4096)
        C = GlobalTensor(float32); C.SetGlobalBuffer(c)
        Fixpipe(C, co.Get(float32), FixpipeParamsV220(nSize=16, mSize=16, srcStride=16, dstStride=16))
    args = {"x": np.zeros(16, np.float16), "c": np.zeros((16, 16), np.float32)}
    msg = _fault_of(body, soc="Ascend910A", args=args)
    assert "PIPE_FIX" in msg and "coupled AI core" in msg
    msg = _fault_of(body, args=args)                          # 910B1: L0C read before any Mmad
    assert "PIPE_FIX" in msg and "never written" in msg and "Fixpipe" in msg


def test_fault_transpose_of_fp32_load2d():
    def body(x):
        pipe = TPipe()
        b1, b2 = TBuf(TPosition.B1), TBuf(TPosition.B2)
        pipe.InitBuffer(b1, 4096)
        pipe.InitBuffer(b2, 4096)
        LoadData(b2.Get(float32), b1.Get(float32), LoadData2DParams(0, 1, 1, ifTranspose=True))
    msg = _fault_of(body)
    assert "PIPE_MTE1" in msg and "16-bit" in msg


# ---------------------------------------------------------------------------------------------
# the GEMM example
# ---------------------------------------------------------------------------------------------
TOL = {"FLOAT16": 1e-3, "BF16": 8e-3, "FLOAT": 1e-5, "HF32": 4e-3}


def _gemm_check(soc, dtype, M, N, K, trans_b, seed=8):
    rng = np.random.default_rng(seed)
    it, ot = DTYPES[dtype]
    a = rng.standard_normal((M, K)).astype(it)
    b = rng.standard_normal((K, N)).astype(it)
    c, r = gemm(a, np.ascontiguousarray(b.T) if trans_b else b, dtype, soc, trans_b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max()
    assert err <= TOL[dtype], (soc, dtype, err)
    k0 = 32 // it.itemsize
    aa, bb = (hf32_round(a), hf32_round(b)) if dtype == "HF32" else (a, b)
    assert np.array_equal(c, cube_ref(aa, bb, k0).astype(ot))   # the Cube's arithmetic, bit for bit
    return c, r


@pytest.mark.parametrize("soc", ALL_SOCS)
def test_gemm_fp16_every_chip(soc):
    _gemm_check(soc, "FLOAT16", 160, 144, 200, trans_b=False)


@pytest.mark.parametrize("soc", A2_SOCS)
@pytest.mark.parametrize("dtype", ["BF16", "FLOAT", "HF32"])
def test_gemm_a2_dtypes(soc, dtype):
    _gemm_check(soc, dtype, 96, 80, 136, trans_b=dtype in ("FLOAT", "HF32"))


@pytest.mark.parametrize("soc", ["Ascend910A", "Ascend310P3"])
def test_gemm_fractal_nz_inputs_with_tails_in_every_dim(soc):
    """Chips without an ND -> NZ copy take A and B in FRACTAL_NZ: M, N and K all off the 16 grid."""
    assert gemm_tiling(50, 70, 90, "FLOAT16", soc).nzInputs
    _gemm_check(soc, "FLOAT16", 50, 70, 90, trans_b=False)


def test_gemm_trans_b_and_hf32_differs_from_fp32():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((64, 96)).astype(np.float32)
    bt = rng.standard_normal((48, 96)).astype(np.float32)
    c32, _ = gemm(a, bt, "FLOAT", "Ascend910B1", trans_b=True)
    ch, _ = gemm(a, bt, "HF32", "Ascend910B1", trans_b=True)
    assert not np.array_equal(c32, ch)
    _gemm_check("Ascend910A", "FLOAT16", 48, 40, 72, trans_b=True)


def test_gemm_k_shift_starts_each_block_at_its_own_k_tile():
    """kShift (the Matmul API's enableKdimReorderLoad): block b runs its K loop from L1 tile
    b mod kTiles and wraps. Each output tile must equal the Cube's arithmetic over K in that
    rotated order, bit for bit, K tail included (the first and last steps move with the order)."""
    import dataclasses
    rng = np.random.default_rng(12)
    M, N, K = 64, 1024, 232                      # 4 tiles of 64 x 256; K tiles of 64 (last one 40)
    t = gemm_tiling(M, N, K, "FLOAT16", "Ascend910B1", baseM=64, baseN=256)
    t = dataclasses.replace(t, stepK=1, kTiles=4, usedCoreNum=4, kShift=True)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c, _ = gemm(a, b, "FLOAT16", "Ascend910B1", tiling=t)
    ap = np.pad(a, ((0, 0), (0, 256 - K)))        # the K tail in zero-padded fractals, as L0 holds it
    bp = np.pad(b, ((0, 256 - K), (0, 0)))
    for blk in range(4):
        order = np.concatenate([np.arange(64 * ((blk + j) % 4), 64 * ((blk + j) % 4 + 1)) for j in range(4)])
        cols = slice(256 * blk, 256 * (blk + 1))    # one tile a block (swizzle: one tile row)
        want = cube_ref(ap[:, order], bp[order][:, cols], 16).astype(np.float16)
        assert np.array_equal(c[:, cols], want), blk
    plain, _ = gemm(a, b, "FLOAT16", "Ascend910B1", tiling=dataclasses.replace(t, kShift=False))
    assert not np.array_equal(plain, c)             # the order is not the plain one


def test_gemm_rejects_dtypes_the_chip_lacks():
    with pytest.raises(ValueError, match="no BF16"):
        gemm_tiling(64, 64, 64, "BF16", "Ascend910A")
    with pytest.raises(ValueError, match="trans_b"):
        gemm_tiling(64, 64, 64, "FLOAT", "Ascend910B1")


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910A"])
def test_gemm_timing_only_cycles_identical(soc):
    rng = np.random.default_rng(10)
    a = rng.standard_normal((256, 192)).astype(np.float16)
    b = rng.standard_normal((192, 320)).astype(np.float16)
    _, rf = gemm(a, b, "FLOAT16", soc, mode="functional")
    _, rt = gemm(a, b, "FLOAT16", soc, mode="timing")
    assert rf.cycles == rt.cycles and rf.report.instructions == rt.report.instructions


def test_cube_utilisation_never_above_100_percent():
    p = load_profile("Ascend910B1")
    M = N = 512
    K = 1024
    t = gemm_tiling(M, N, K, "FLOAT16", "Ascend910B1")
    a = np.zeros((M, K), np.float16)
    b = np.zeros((K, N), np.float16)
    _, r = gemm(a, b, "FLOAT16", "Ascend910B1", mode="timing", tiling=t, trace=True)
    mmads = [e for e in r.trace.rec.trace if e[2] == "Mmad"]
    busy = sum(e[4] for e in mmads)
    macs = M * N * K
    rate = p.cube.macs_per_cycle["FLOAT16"]
    assert macs <= busy * rate                                  # per pipe: never faster than peak
    assert macs <= r.cycles * t.usedCoreNum * rate              # chip: never faster than peak
    assert 0.9 <= macs / (busy * rate) <= 1.0                   # big Mmads are near the rate
    for core, pipes in r.report.cores.items():
        assert pipes.get("PIPE_M", 0) <= r.cycles


@pytest.mark.parametrize("direction", [0, 1])
@pytest.mark.parametrize("m_tiles,n_tiles", [(1, 1), (7, 4), (4, 7), (3, 9), (10, 2)])
def test_gemm_swizzle_visits_every_tile_once(m_tiles, n_tiles, direction):
    """catlass's GemmIdentityBlockSwizzle order is a permutation of the output tiles, and
    consecutive tasks stay within a window of 3 tile rows (direction 0) or columns (1)."""
    from gemm_kernel import swizzled_tile
    seen = [swizzled_tile(t, m_tiles, n_tiles, 3, direction) for t in range(m_tiles * n_tiles)]
    assert sorted(seen) == [(i, j) for i in range(m_tiles) for j in range(n_tiles)]
    axis = 0 if direction == 0 else 1
    for t, tile in enumerate(seen):
        window = t // (3 * (n_tiles if direction == 0 else m_tiles))
        assert tile[axis] // 3 == window
