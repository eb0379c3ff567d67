"""Kernel-language pieces added for GridSampler2DBackward, tested on their own with run_kernel:
Compare / CompareScalar (uint8 bit masks, element i -> bit i % 8 of byte i // 8), Select in both
modes, and DataCopyPadIndirect (gathers and atomic scatters at offsets the vector pipe wrote to
UB): results, cost independent of the offsets (timing == functional), and the fault for an offset
that leaves the tensor; IndirectCopies (a loop of them checked as one) against numpy and against
the same copies one call at a time."""
from __future__ import annotations

import numpy as np
import pytest

import simulator
from simulator.enums import KernelError
from simulator.kernel import (CMPMODE, SELMODE, Adds, Cast, Compare, CompareScalar, DataCopy, Duplicate,
                              DataCopyPad,
                              DataCopyExtParams, GlobalTensor, HardEvent, Muls, RoundMode, Select,
                              SetAtomicAdd, SetAtomicNone, SetFlag, TBuf, TPipe, TPosition, WaitFlag, float32,
                              int32)
from simulator.kernel.indirect import DataCopyPadIndirect, IndirectCopies


def _compare_body(a, b, out, tiling):
    pipe = TPipe()
    buf = TBuf()
    pipe.InitBuffer(buf, 8192)
    u = buf.Get(float32)
    ag, bg, og = GlobalTensor(float32), GlobalTensor(float32), GlobalTensor(float32)
    ag.SetGlobalBuffer(a), bg.SetGlobalBuffer(b), og.SetGlobalBuffer(out)
    DataCopy(u, ag, 64)
    DataCopy(u[64], bg, 64)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    m1 = u[512].ReinterpretCast(np.uint8)
    m2 = u[520].ReinterpretCast(np.uint8)
    Compare(m1, u, u[64], CMPMODE.LT, 64)
    CompareScalar(m2, u, 0.0, CMPMODE.GE, 64)
    Select(u[128], m1, u, u[64], SELMODE.VSEL_TENSOR_TENSOR_MODE, 64)     # min(a, b)
    Select(u[192], m2, u, -5.0, SELMODE.VSEL_TENSOR_SCALAR_MODE, 64)      # a >= 0 ? a : -5
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(og, u[128], 128)
    DataCopyPad(og[128], m1.ReinterpretCast(float32), DataCopyExtParams(1, 8, 0, 0))   # the mask's 8 bytes


def test_compare_and_select():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    r = simulator.run_kernel(_compare_body, 1, {"a": a, "b": b, "out": np.zeros(136, np.float32),
                                                "tiling": None})
    out = r["out"]
    np.testing.assert_array_equal(out[:64], np.minimum(a, b))
    np.testing.assert_array_equal(out[64:128], np.where(a >= 0, a, -5.0).astype(np.float32))
    bits = out[128:130].view(np.uint8)
    np.testing.assert_array_equal(bits, np.packbits(a < b, bitorder="little"))


def _offsets_in(src, idx_in, out, acc, ub_bytes: int, n: int):
    """A body's start: a UB buffer, the four GlobalTensors, and `n` float offsets copied in and
    ready for the vector pipe."""
    pipe = TPipe()
    buf = TBuf()
    pipe.InitBuffer(buf, ub_bytes)
    u = buf.Get(float32)
    sg, ig, og, ag = (GlobalTensor(float32) for _ in range(4))
    sg.SetGlobalBuffer(src), ig.SetGlobalBuffer(idx_in), og.SetGlobalBuffer(out), ag.SetGlobalBuffer(acc)
    DataCopyPad(u, ig, DataCopyExtParams(1, n * 4, 0, 0))
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    return pipe, u, sg, og, ag


def _gather_body(src, idx_in, out, acc, tiling):
    """Offsets arrive as floats, become int32 element offsets on the vector pipe, then MTE2
    gathers rows of 8 floats at them and MTE3 adds each row twice into `acc` atomically."""
    n, bad = tiling
    pipe, u, sg, og, ag = _offsets_in(src, idx_in, out, acc, 16384, 8)
    off = u[64].ReinterpretCast(int32)
    Muls(u[8], u, 8.0, 8)
    if bad:
        Adds(u[8], u[8], 1000.0, 8)
    Cast(off, u[8], RoundMode.CAST_RINT, 8)
    SetFlag(HardEvent.V_MTE2, 0)
    WaitFlag(HardEvent.V_MTE2, 0)
    rows = u[512]
    for i in range(n):
        DataCopyPadIndirect(rows[i * 8], sg, DataCopyExtParams(1, 32, 0, 0), off, i)
    SetFlag(HardEvent.MTE2_MTE3, 0)
    WaitFlag(HardEvent.MTE2_MTE3, 0)
    DataCopy(og, rows, n * 8)
    SetAtomicAdd(float32)
    for _ in range(2):
        for i in range(n):
            DataCopyPadIndirect(ag, rows[i * 8], DataCopyExtParams(1, 32, 0, 0), off, i)
    SetAtomicNone()


@pytest.mark.parametrize("mode", ["functional", "timing"])
def test_indirect_gather_and_atomic_scatter(mode):
    src = np.arange(16 * 8, dtype=np.float32)
    idx = np.array([3, 0, 15, 3, 7, 7, 1, 9], np.float32)
    args = {"src": src, "idx_in": idx, "out": np.zeros(64, np.float32),
            "acc": np.zeros(16 * 8, np.float32), "tiling": (8, False)}
    r = simulator.run_kernel(_gather_body, 1, args, mode=mode)
    f = simulator.run_kernel(_gather_body, 1, args, mode="functional")
    assert r.cycles == f.cycles
    if mode == "functional":
        rows = src.reshape(16, 8)
        np.testing.assert_array_equal(r["out"].reshape(8, 8), rows[idx.astype(int)])
        expect = np.zeros((16, 8), np.float32)
        for i in idx.astype(int):
            expect[i] += 2 * rows[i]
        np.testing.assert_array_equal(r["acc"].reshape(16, 8), expect)
    names = {row["instruction"] for row in r.report.instruction_rows()}
    assert {"DataCopyPad[gather]", "DataCopyPad[scatter]+AtomicAdd"} <= names


def test_indirect_offset_outside_the_tensor_faults():
    args = {"src": np.zeros(128, np.float32), "idx_in": np.zeros(8, np.float32),
            "out": np.zeros(64, np.float32), "acc": np.zeros(128, np.float32), "tiling": (8, True)}
    with pytest.raises(KernelError, match=r"DataCopyPad\[gather\].*offset 1000.*outside its extent"):
        simulator.run_kernel(_gather_body, 1, args)


def _wrong_buffer_body(src, out, tiling):
    pipe = TPipe()
    ub, l0a = TBuf(), TBuf(TPosition.A2)
    pipe.InitBuffer(ub, 1024)
    pipe.InitBuffer(l0a, 1024)
    g = GlobalTensor(float32)
    g.SetGlobalBuffer(src)
    DataCopyPadIndirect(l0a.Get(float32), g, DataCopyExtParams(1, 32, 0, 0), ub.Get(int32), 0)


def test_indirect_copy_to_a_buffer_without_a_gm_path_is_a_kernel_error():
    with pytest.raises(KernelError, match=r"DataCopyPad\[gather\]: no copy path between GM and L0A"):
        simulator.run_kernel(_wrong_buffer_body, 1, {"src": np.zeros(64, np.float32),
                                                     "out": np.zeros(8, np.float32), "tiling": None},
                             soc="Ascend910A")       # a core with both UB and L0A


def _reused_params_body(src, out, tiling):
    """Two gathers issued with one params object, changed between them (as a kernel may reuse
    its DataCopyExtParams): each gather moves the blocks it was issued with."""
    pipe = TPipe()
    buf = TBuf()
    pipe.InitBuffer(buf, 4096)
    u = buf.Get(float32)
    g, og = GlobalTensor(float32), GlobalTensor(float32)
    g.SetGlobalBuffer(src)
    og.SetGlobalBuffer(out)
    idx = u[512].ReinterpretCast(int32)
    Duplicate(u, 0.0, 128)
    Duplicate(idx, 8, 8)                            # every offset: element 8
    SetFlag(HardEvent.V_MTE2, 0)
    WaitFlag(HardEvent.V_MTE2, 0)
    params = DataCopyExtParams(2, 32, 0, 0)         # two rows of 8 floats
    DataCopyPadIndirect(u, g, params, idx, 0)
    params.blockCount = 1
    DataCopyPadIndirect(u[64], g, params, idx, 1)
    SetFlag(HardEvent.MTE2_MTE3, 0)
    WaitFlag(HardEvent.MTE2_MTE3, 0)
    DataCopy(og, u, 128)


def test_indirect_copy_moves_the_blocks_it_was_issued_with():
    src = np.arange(64, dtype=np.float32)
    r = simulator.run_kernel(_reused_params_body, 1, {"src": src, "out": np.zeros(128, np.float32),
                                                      "tiling": None})
    out = r["out"]
    np.testing.assert_array_equal(out[:16], src[8:24])       # two blocks
    np.testing.assert_array_equal(out[64:72], src[8:16])     # one block
    np.testing.assert_array_equal(out[72:80], 0)             # not a second one


def _strided_gather_body(src, idx_in, out, acc, tiling):
    """`n` copies of `rows` blocks of `blen` floats (GM blocks `gap` floats apart), gathered at
    offsets from `idx_in` into UB slots `step` floats apart, then scattered back with atomic add
    into `acc` at the same offsets: one copy at a time (as_run False) or as IndirectCopies runs,
    the scatters interleaved with a second gather run as GridSampler issues them."""
    n, rows, blen, gap, step, as_run = tiling
    pipe, u, sg, og, ag = _offsets_in(src, idx_in, out, acc, 65536, n)
    off = u[2048].ReinterpretCast(int32)
    Cast(off, u, RoundMode.CAST_RINT, n)
    slots, again = u[4096], u[8192]
    Duplicate(slots, 0.0, n * step)                  # the gaps between slots, if any
    SetFlag(HardEvent.V_MTE2, 0)
    WaitFlag(HardEvent.V_MTE2, 0)
    gather = DataCopyExtParams(rows, blen * 4, gap * 4, 0)
    scatter = DataCopyExtParams(rows, blen * 4, 0, gap * 4)
    nominal = [7 * i for i in range(n)]              # what the L2 model sees
    if as_run:
        IndirectCopies(slots, sg, gather, off, 0, n, step, nominal).issue_all()
    else:
        for i in range(n):
            DataCopyPadIndirect(slots[i * step], sg, gather, off, i, nominal[i])
    SetFlag(HardEvent.MTE2_MTE3, 0)
    WaitFlag(HardEvent.MTE2_MTE3, 0)
    DataCopyPad(og, slots, DataCopyExtParams(1, n * step * 4, 0, 0))
    SetAtomicAdd(float32)
    if as_run:
        a = IndirectCopies(again, sg, gather, off, 0, n, step, nominal)
        b = IndirectCopies(ag, slots, scatter, off, 0, n, step, nominal)
        for i in range(n):
            a.issue(i)
            b.issue(i)
    else:
        for i in range(n):
            DataCopyPadIndirect(again[i * step], sg, gather, off, i, nominal[i])
            DataCopyPadIndirect(ag, slots[i * step], scatter, off, i, nominal[i])
    SetAtomicNone()


@pytest.mark.parametrize("seed", range(6))
def test_a_run_of_indirect_copies_is_its_copies_one_by_one(seed):
    """Against numpy's fancy indexing (the gathered rows, the atomic sums) and against the same
    copies issued one call at a time (same cycles, same report, same trace), over random shapes."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 24))
    rows, blen, gap = int(rng.integers(1, 4)), 8 * int(rng.integers(1, 3)), 8 * int(rng.integers(0, 3))
    step = rows * blen + 8 * int(rng.integers(0, 2))
    span = (rows - 1) * (blen + gap) + blen
    size = 256
    src = rng.standard_normal(size + span).astype(np.float32)
    idx = rng.integers(0, size, n).astype(np.float32)
    args = {"src": src, "idx_in": idx, "out": np.zeros(n * step, np.float32),
            "acc": np.zeros(size + span, np.float32)}
    one = simulator.run_kernel(_strided_gather_body, 1, {**args, "tiling": (n, rows, blen, gap, step, False)},
                               trace=True)
    run = simulator.run_kernel(_strided_gather_body, 1, {**args, "tiling": (n, rows, blen, gap, step, True)},
                               trace=True)
    assert run.cycles == one.cycles
    assert sorted(run.report.trace.rec.trace) == sorted(one.report.trace.rec.trace)
    expect_out = np.zeros((n, step), np.float32)
    expect_acc = np.zeros(size + span, np.float64)
    for i, o in enumerate(idx.astype(int)):
        for r in range(rows):
            block = src[o + r * (blen + gap):o + r * (blen + gap) + blen]
            expect_out[i, r * blen:(r + 1) * blen] = block
            expect_acc[o + r * (blen + gap):o + r * (blen + gap) + blen] += block
    for r in (one, run):
        np.testing.assert_array_equal(r["out"].reshape(n, step), expect_out)
        np.testing.assert_allclose(r["acc"], expect_acc, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(run["acc"], one["acc"])


def _bad_run_body(src, out, tiling):
    what = tiling
    pipe = TPipe()
    buf = TBuf()
    pipe.InitBuffer(buf, 4096)
    u = buf.Get(float32)
    g = GlobalTensor(float32)
    g.SetGlobalBuffer(src)
    idx = u[512].ReinterpretCast(int32)
    Duplicate(idx, 0, 8)
    SetFlag(HardEvent.V_MTE2, 0)
    WaitFlag(HardEvent.V_MTE2, 0)
    params = DataCopyExtParams(1, 32, 0, 0)
    if what == "nominal":
        IndirectCopies(u, g, params, idx, 0, 3, 8, [0, 8, 60]).issue_all()
    elif what == "index":
        IndirectCopies(u, g, params, idx, 500, 20, 0).issue_all()     # idx has 512 elements
    elif what == "slot":
        IndirectCopies(u[1000], g, params, idx, 0, 4, 8).issue_all()    # copy 3 starts at u's end
    elif what == "past":
        IndirectCopies(u[1000], g, params, idx, 0, 5, 8).issue_all()
    elif what == "small after large":       # the same slot and shape, recorded before for a big tensor
        IndirectCopies(u, g, params, idx, 0, 1).issue_all()
        IndirectCopies(buf.Get(float32, 4), g, params, idx, 0, 1).issue_all()
    elif what == "huge nominal":            # would wrap around in int64 once multiplied by 4
        IndirectCopies(u, g, params, idx, 0, 1, 0, [2 ** 62]).issue_all()
    elif what == "issue past":
        IndirectCopies(u, g, params, idx, 0, 2, 8).issue(2)
    elif what == "empty":                   # an empty loop records nothing, then one copy is asked for
        run = IndirectCopies(u, g, params, idx, 0, 0, 8)
        run.issue_all()
        run.issue(0)


@pytest.mark.parametrize("what, message", [
    ("nominal", r"DataCopyPad\[gather\]: nominal offset 60 takes the copy outside src's extent"),
    ("index", r"DataCopyPad\[gather\]: offset index 512 outside"),   # the first one past
    ("slot", r"DataCopyPad\[gather\]: UB\[4096:4128\] goes beyond its tensor UB\[4096:\+0xFLOAT\]"),
    ("past", r"LocalTensor index 32 outside 0..24"),
    ("small after large", r"DataCopyPad\[gather\]: UB\[0:32\] goes beyond its tensor UB\[0:\+4xFLOAT\]"),
    ("huge nominal", r"nominal offset 4611686018427387904 takes the copy outside src's extent"),
    ("issue past", r"DataCopyPad\[gather\]: copy 2 of a run of 2"),
    ("empty", r"DataCopyPad\[gather\]: copy 0 of a run of 0"),
])
def test_a_bad_run_of_indirect_copies_is_a_kernel_error_naming_it(what, message):
    with pytest.raises(KernelError, match=message):
        simulator.run_kernel(_bad_run_body, 1, {"src": np.zeros(64, np.float32), "out": np.zeros(8, np.float32),
                                                "tiling": what})


def _repeat_body(a, b, out, tiling):
    """The repeat forms: 5 repeats of 16 FP32 lanes, src0 stepping 3 lane rows (96 elements) a
    repeat, the others one (16 elements = 2 blocks)."""
    from simulator.kernel import Add, BinaryRepeatParams
    pipe = TPipe()
    buf = TBuf()
    pipe.InitBuffer(buf, 16384)
    u = buf.Get(float32)
    ag, bg, og = GlobalTensor(float32), GlobalTensor(float32), GlobalTensor(float32)
    ag.SetGlobalBuffer(a), bg.SetGlobalBuffer(b), og.SetGlobalBuffer(out)
    DataCopy(u, ag, 240)
    DataCopy(u[256], bg, 80)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    rp = BinaryRepeatParams(dstRepStride=2, src0RepStride=6, src1RepStride=2)
    bits = u[1024].ReinterpretCast(np.uint8)
    Compare(bits, u, u[256], CMPMODE.GT, 16, 5, rp)                       # a[48k + i] > b[16k + i]
    Duplicate(u[512], -1.0, 80)
    Select(u[512], bits, u, u[256], SELMODE.VSEL_TENSOR_TENSOR_MODE, 16, 5, rp)    # max of the two
    Add(u[640], u, u[256], 16, 5, rp)                                     # their sum
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(og, u[512], 80)
    DataCopy(og[80], u[640], 80)
    DataCopyPad(og[160], bits.ReinterpretCast(float32), DataCopyExtParams(1, 40, 0, 0))   # 5 repeats x 64 bits


def test_repeat_forms_step_their_operands_and_pack_a_repeats_bits():
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal(240).astype(np.float32), rng.standard_normal(80).astype(np.float32)
    out = simulator.run_kernel(_repeat_body, 1, {"a": a, "b": b, "out": np.zeros(200, np.float32),
                                                 "tiling": None})["out"]
    strided = a.reshape(5, 48)[:, :16]                     # repeat k: a[48k .. 48k + 15]
    rows = b.reshape(5, 16)
    np.testing.assert_array_equal(out[:80].reshape(5, 16), np.maximum(strided, rows))
    np.testing.assert_array_equal(out[80:160].reshape(5, 16), strided + rows)
    bits = np.unpackbits(out[160:170].view(np.uint8), bitorder="little").reshape(5, 64)
    np.testing.assert_array_equal(bits[:, :16].astype(bool), strided > rows)
    assert not bits[:, 16:].any()                          # the lanes past the mask stay clear
