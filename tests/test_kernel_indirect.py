"""Kernel-language pieces added for GridSampler2DBackward, tested on their own with run_kernel:
Compare / CompareScalar (uint8 bit masks, element i -> bit i % 8 of byte i // 8), Select in both
modes, and DataCopyPadIndirect (gathers and atomic scatters at offsets the vector pipe wrote to
UB): results, cost independent of the offsets (timing == functional), and the fault for an offset
that leaves the tensor."""
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
from simulator.kernel.indirect import DataCopyPadIndirect


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


def _gather_body(src, idx_in, out, acc, tiling):
    """Offsets arrive as floats, become int32 element offsets on the vector pipe, then MTE2
    gathers rows of 8 floats at them and MTE3 adds each row twice into `acc` atomically."""
    n, bad = tiling
    pipe = TPipe()
    buf = TBuf()
    pipe.InitBuffer(buf, 16384)
    u = buf.Get(float32)
    sg, ig, og, ag = (GlobalTensor(float32) for _ in range(4))
    sg.SetGlobalBuffer(src), ig.SetGlobalBuffer(idx_in), og.SetGlobalBuffer(out), ag.SetGlobalBuffer(acc)
    DataCopy(u, ig, 8)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
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
