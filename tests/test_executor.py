"""The two-phase protocol's executor lifecycle (SPEC section 3) and the ACL runtime around it.

Phase 1 returns (workspaceSize, executor, status); phase 2 runs the executor on a stream,
asynchronously, and frees it unless aclSetAclOpExecutorRepeatable was called after phase 1 (then
aclDestroyAclOpExecutor frees it). Phase 2 with a null executor, or with workspaceSize > 0 and no
workspace -> 161001. Results are visible after aclrtSynchronizeStream. Reusing a freed executor
-> 161002 (simulator/aclnn.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import simulator
from simulator import acl, aclnn
from simulator.enums import aclrtMemcpyKind

from conftest import F16, F32, INVALID, NULLPTR, SILU_SOCS, assert_silu_close, random_data

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_BAD_ALLOC = 200000

H2H, H2D, D2H, D2D = (aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_HOST, aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE,
                      aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST, aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE)


def _operands(dev, strided: bool = False, shape=(13, 21), dtype=F32, seed=0):
    """gradOutput, self (transposed, so the call needs a workspace, when strided) and gradInput
    (filled with a NaN sentinel); also the host arrays for the reference."""
    rng = np.random.default_rng(seed)
    g = random_data(rng, shape, dtype, 1.0)
    if strided:
        xb = random_data(rng, shape[::-1], dtype)
        x = xb.T
        tx = dev.put_view(xb, x)
    else:
        x = random_data(rng, shape, dtype)
        tx = dev.put(x)
    return dev.put(g), tx, dev.put_output(shape, dtype), g, x


def _phase1(tg, tx, to):
    ws, ex, ret = aclnn.aclnnSiluBackwardGetWorkspaceSize(tg.tensor, tx.tensor, to.tensor)
    assert ret == 0, acl.aclGetRecentErrMsg()
    return ws, ex


@pytest.fixture(params=SILU_SOCS)
def dev(request, make_device):
    return make_device(request.param)


# ---- phase 2 arguments ---------------------------------------------------------------------------
def test_null_executor_is_nullptr(dev):
    assert aclnn.aclnnSiluBackward(None, 0, None, dev.stream) == NULLPTR
    assert "executor" in acl.aclGetRecentErrMsg()


def test_workspace_size_without_workspace_is_nullptr(dev):
    tg, tx, to, g, x = _operands(dev, strided=True)
    ws, ex = _phase1(tg, tx, to)
    assert ws > 0, "a transposed input needs a workspace (its contiguous copy)"
    assert aclnn.aclnnSiluBackward(None, ws, ex, dev.stream) == NULLPTR
    assert "workspace" in acl.aclGetRecentErrMsg()
    # the failed call did not consume the executor: a correct call still works
    assert aclnn.aclnnSiluBackward(dev.malloc(ws), ws, ex, dev.stream) == 0
    assert acl.aclrtSynchronizeStream(dev.stream) == 0
    assert_silu_close(to.view(), g, x, "after a refused phase 2")


@pytest.mark.parametrize("how", ["size_smaller", "allocation_smaller", "pointer_inside_too_late"])
def test_workspace_too_small_is_invalid(dev, how):
    tg, tx, to, g, x = _operands(dev, strided=True)
    ws, ex = _phase1(tg, tx, to)
    assert ws > 0
    if how == "size_smaller":
        ret = aclnn.aclnnSiluBackward(dev.malloc(ws), ws - 1, ex, dev.stream)
    elif how == "allocation_smaller":
        ret = aclnn.aclnnSiluBackward(dev.malloc(ws - 32), ws, ex, dev.stream)
    else:
        ret = aclnn.aclnnSiluBackward(dev.malloc(ws) + 64, ws, ex, dev.stream)
    assert ret == INVALID and acl.aclGetRecentErrMsg()


@pytest.mark.parametrize("workspace,size", [("ws", "x"), ("ws", -1), ("ws", 1.5), ("ws", None),
                                            ("ws", float("nan")), ("ws", float("inf")),
                                            ("abc", "size"), (1.5, "size"), ([1], "size"),
                                            (-5, "size"), (0x10, "size")])
def test_phase2_garbage_workspace_arguments_are_invalid(dev, workspace, size):
    """Values that are not a uint64 size / a device address are refused with 161002, never an
    exception (they used to raise ValueError / TypeError / OverflowError)."""
    tg, tx, to, g, x = _operands(dev, strided=True)
    ws, ex = _phase1(tg, tx, to)
    wsp = dev.malloc(ws)
    workspace = wsp if workspace == "ws" else workspace
    size = ws if size == "size" else size
    assert aclnn.aclnnSiluBackward(workspace, size, ex, dev.stream) == INVALID
    assert acl.aclGetRecentErrMsg()
    assert aclnn.aclnnSiluBackward(np.int64(wsp), np.uint64(ws), ex, dev.stream) == 0   # numpy ints are fine
    assert acl.aclrtSynchronizeStream(dev.stream) == 0


@pytest.mark.parametrize("bad", ["string", 42, "destroyed"])
def test_bad_stream_is_invalid(dev, bad):
    tg, tx, to, g, x = _operands(dev)
    ws, ex = _phase1(tg, tx, to)
    if bad == "destroyed":
        stream, _ = acl.aclrtCreateStream()
        assert acl.aclrtDestroyStream(stream) == 0
        bad = stream
    assert aclnn.aclnnSiluBackward(None, ws, ex, bad) == INVALID
    assert aclnn.aclnnSiluBackward(None, ws, ex, None) == 0          # None: the default stream
    assert acl.aclrtSynchronizeStream(None) == 0
    assert_silu_close(to.view(), g, x, "default stream")


@pytest.mark.parametrize("obj", ["executor", 3, object()])
def test_not_an_executor_is_invalid(dev, obj):
    assert aclnn.aclnnSiluBackward(None, 0, obj, dev.stream) == INVALID


# ---- lifecycle -----------------------------------------------------------------------------------
def test_non_repeatable_executor_is_freed_by_phase2(dev):
    tg, tx, to, g, x = _operands(dev)
    ws, ex = _phase1(tg, tx, to)
    assert aclnn.aclnnSiluBackward(None, ws, ex, dev.stream) == 0
    assert aclnn.aclnnSiluBackward(None, ws, ex, dev.stream) == INVALID
    assert "freed" in acl.aclGetRecentErrMsg()
    assert aclnn.aclDestroyAclOpExecutor(ex) == INVALID                  # already freed
    assert aclnn.aclSetAclOpExecutorRepeatable(ex) == INVALID           # too late
    assert acl.aclrtSynchronizeStream(dev.stream) == 0
    assert_silu_close(to.view(), g, x, "single run")


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_repeatable_executor_runs_twice_with_the_same_result(dev, strided):
    tg, tx, to, g, x = _operands(dev, strided=strided, dtype=F16)
    ws, ex = _phase1(tg, tx, to)
    assert aclnn.aclSetAclOpExecutorRepeatable(ex) == 0
    wsp = dev.malloc(ws) if ws else None
    assert aclnn.aclnnSiluBackward(wsp, ws, ex, dev.stream) == 0
    assert acl.aclrtSynchronizeStream(dev.stream) == 0
    first = to.storage().copy()
    assert_silu_close(to.view(), g, x, "first run")
    dev.write(to.ptr, np.full(first.size, np.nan).astype(F16))           # wipe the output
    assert aclnn.aclnnSiluBackward(wsp, ws, ex, dev.stream) == 0
    assert acl.aclrtSynchronizeStream(dev.stream) == 0
    assert to.storage().tobytes() == first.tobytes()
    assert len(ex.reports) == 2 and all(r.cycles > 0 for r in ex.reports)
    # destroying frees it; afterwards it can be neither run nor destroyed again
    assert aclnn.aclDestroyAclOpExecutor(ex) == 0
    assert aclnn.aclnnSiluBackward(wsp, ws, ex, dev.stream) == INVALID
    assert aclnn.aclDestroyAclOpExecutor(ex) == INVALID
    assert aclnn.aclSetAclOpExecutorRepeatable(ex) == INVALID


def test_repeatable_executor_sees_new_input_data(dev):
    """The executor keeps the tensors (addresses), not the data: a rerun after new data is
    copied in computes on the new data, as on the device."""
    tg, tx, to, g, x = _operands(dev)
    ws, ex = _phase1(tg, tx, to)
    assert aclnn.aclSetAclOpExecutorRepeatable(ex) == 0
    assert aclnn.aclnnSiluBackward(None, ws, ex, dev.stream) == 0
    assert acl.aclrtSynchronizeStream(dev.stream) == 0
    x2 = (x * -0.5).astype(F32)
    dev.write(tx.ptr, x2)
    assert aclnn.aclnnSiluBackward(None, ws, ex, dev.stream) == 0
    assert acl.aclrtSynchronizeStream(dev.stream) == 0
    assert_silu_close(to.view(), g, x2, "rerun on new data")
    assert aclnn.aclDestroyAclOpExecutor(ex) == 0


def test_destroy_before_running_frees_it(dev):
    tg, tx, to, g, x = _operands(dev)
    ws, ex = _phase1(tg, tx, to)
    assert aclnn.aclDestroyAclOpExecutor(ex) == 0
    assert aclnn.aclnnSiluBackward(None, ws, ex, dev.stream) == INVALID
    assert acl.aclGetRecentErrMsg()


def test_executor_api_null_arguments(dev):
    assert aclnn.aclSetAclOpExecutorRepeatable(None) == NULLPTR
    assert aclnn.aclDestroyAclOpExecutor(None) == NULLPTR
    assert aclnn.aclSetAclOpExecutorRepeatable("executor") == INVALID
    assert aclnn.aclDestroyAclOpExecutor(17) == INVALID


# ---- asynchrony --------------------------------------------------------------------------------
@pytest.mark.parametrize("sync", ["stream", "device", "event"])
def test_results_visible_only_after_synchronize(dev, sync):
    tg, tx, to, g, x = _operands(dev, strided=True)
    ws, ex = _phase1(tg, tx, to)
    assert aclnn.aclnnSiluBackward(dev.malloc(ws), ws, ex, dev.stream) == 0
    # enqueued, not run: the output still holds its sentinel and there is no report yet
    assert np.isnan(to.storage().astype(np.float64)).all()
    assert ex.report is None
    if sync == "stream":
        assert acl.aclrtSynchronizeStream(dev.stream) == 0
    elif sync == "device":
        assert acl.aclrtSynchronizeDevice() == 0
    else:
        event, ret = acl.aclrtCreateEvent()
        assert ret == 0 and acl.aclrtRecordEvent(event, dev.stream) == 0
        assert np.isnan(to.storage().astype(np.float64)).all()
        assert acl.aclrtSynchronizeEvent(event) == 0
    assert_silu_close(to.view(), g, x, f"after synchronize ({sync})")
    assert ex.report is not None and ex.report.cycles > 0


def test_two_streams(dev):
    """Calls on two streams both complete (the device runs streams concurrently, so B may finish
    while A is synchronised, as on hardware; it is complete once B is synchronised)."""
    a = _operands(dev, seed=1)
    b = _operands(dev, seed=2)
    stream_b, ret = acl.aclrtCreateStream()
    assert ret == 0
    for (tg, tx, to, _, _), stream in ((a, dev.stream), (b, stream_b)):
        ws, ex = _phase1(tg, tx, to)
        assert aclnn.aclnnSiluBackward(None, ws, ex, stream) == 0
    assert acl.aclrtSynchronizeStream(dev.stream) == 0
    assert_silu_close(a[2].view(), a[3], a[4], "stream A")
    assert acl.aclrtSynchronizeStream(stream_b) == 0
    assert_silu_close(b[2].view(), b[3], b[4], "stream B")


def test_event_elapsed_time_covers_the_call(dev):
    tg, tx, to, g, x = _operands(dev, shape=(64, 1024))
    start, _ = acl.aclrtCreateEvent()
    end, _ = acl.aclrtCreateEvent()
    assert acl.aclrtRecordEvent(start, dev.stream) == 0
    ws, ex = _phase1(tg, tx, to)
    assert aclnn.aclnnSiluBackward(None, ws, ex, dev.stream) == 0
    assert acl.aclrtRecordEvent(end, dev.stream) == 0
    assert acl.aclrtSynchronizeStream(dev.stream) == 0
    ms, ret = acl.aclrtEventElapsedTime(start, end)
    assert ret == 0
    assert ms * 1000 == pytest.approx(ex.report.time_us, rel=1e-9)


# ---- the ACL runtime -------------------------------------------------------------------------------
def test_acl_init_twice_is_repeat_initialize():
    with acl.use_runtime(acl.Runtime()):
        assert acl.aclInit(None) == ACL_SUCCESS
        assert acl.aclInit(None) == ACL_ERROR_REPEAT_INITIALIZE
        assert acl.aclGetRecentErrMsg()
        assert acl.aclFinalize() == ACL_SUCCESS
        assert acl.aclFinalize() == ACL_ERROR_UNINITIALIZE
        assert acl.aclInit(None) == ACL_SUCCESS                          # again after finalize


def test_runtime_calls_before_init_or_device():
    with acl.use_runtime(acl.Runtime()):
        assert acl.aclrtSetDevice(0) == ACL_ERROR_UNINITIALIZE
        assert acl.aclrtMalloc(64, 0) == (None, ACL_ERROR_UNINITIALIZE)
        assert acl.aclrtCreateStream()[1] == ACL_ERROR_UNINITIALIZE
        assert acl.aclInit(None, soc="Ascend999Z") == ACL_ERROR_INVALID_PARAM
        assert "Ascend999Z" in acl.aclGetRecentErrMsg()
        assert acl.aclInit(None, mode="turbo") == ACL_ERROR_INVALID_PARAM
        assert acl.aclInit(None) == ACL_SUCCESS
        assert acl.aclrtSetDevice(1) == ACL_ERROR_INVALID_PARAM             # one device: 0
        assert acl.aclrtSetDevice(0) == ACL_SUCCESS
        assert acl.aclrtGetDevice() == (0, ACL_SUCCESS)


@pytest.mark.parametrize("soc", simulator.list_socs())
def test_malloc_beyond_device_memory_is_bad_alloc(make_device, soc):
    dev = make_device(soc)
    cap = dev.profile.device_memory.bytes
    ptr, ret = acl.aclrtMalloc(cap + 1, 0)
    assert ptr is None and ret == ACL_ERROR_BAD_ALLOC
    assert str(cap) in acl.aclGetRecentErrMsg()
    assert acl.aclrtMalloc(0, 0)[1] == ACL_ERROR_INVALID_PARAM
    assert acl.aclrtMalloc(-4, 0)[1] == ACL_ERROR_INVALID_PARAM


def test_malloc_exhaustion_and_free(make_device):
    """Allocations add up against the capacity; freeing gives the room back (a 1 MiB what-if)."""
    profile = simulator.load_profile("Ascend910B1").override({"device_memory.bytes": 1 << 20})
    make_device(profile=profile)
    a, ret = acl.aclrtMalloc(600 * 1024, 0)
    assert ret == ACL_SUCCESS
    assert acl.aclrtMalloc(600 * 1024, 0) == (None, ACL_ERROR_BAD_ALLOC)
    assert acl.aclrtFree(a) == ACL_SUCCESS
    assert acl.aclrtFree(a) == ACL_ERROR_INVALID_PARAM                       # double free
    b, ret = acl.aclrtMalloc(600 * 1024, 0)
    assert ret == ACL_SUCCESS and b is not None


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int64])
def test_memcpy_kinds(device, dtype):
    rng = np.random.default_rng(7)
    src = (rng.standard_normal(1000) * 100).astype(dtype)
    n = src.nbytes
    d1, d2 = device.malloc(n), device.malloc(n)
    # H2D then D2H round-trips
    assert acl.aclrtMemcpy(d1, n, src, n, H2D) == ACL_SUCCESS
    back = np.zeros_like(src)
    assert acl.aclrtMemcpy(back, n, d1, n, D2H) == ACL_SUCCESS
    assert back.tobytes() == src.tobytes()
    # D2D
    assert acl.aclrtMemcpy(d2, n, d1, n, D2D) == ACL_SUCCESS
    back2 = np.zeros_like(src)
    assert acl.aclrtMemcpy(back2, n, d2, n, D2H) == ACL_SUCCESS
    assert back2.tobytes() == src.tobytes()
    # H2H, and bytes as a host source
    dst = np.zeros_like(src)
    assert acl.aclrtMemcpy(dst, n, src, n, H2H) == ACL_SUCCESS
    assert dst.tobytes() == src.tobytes()
    assert acl.aclrtMemcpy(d1, n, bytes(n), n, H2D) == ACL_SUCCESS
    assert acl.aclrtMemcpy(back, n, d1, n, D2H) == ACL_SUCCESS
    assert not back.any()
    # partial copy: only `count` bytes move
    half = n // 2
    marker = np.full(n, 0xAB, np.uint8)
    assert acl.aclrtMemcpy(d2, n, marker, half, H2D) == ACL_SUCCESS
    got = np.zeros(n, np.uint8)
    assert acl.aclrtMemcpy(got, n, d2, n, D2H) == ACL_SUCCESS
    assert (got[:half] == 0xAB).all() and got[half:].tobytes() == src.view(np.uint8)[half:].tobytes()


def test_memcpy_errors(device):
    d = device.malloc(64)
    host = np.zeros(64, np.uint8)
    assert acl.aclrtMemcpy(d, 32, host, 64, H2D) == ACL_ERROR_INVALID_PARAM      # count > destMax
    assert acl.aclrtMemcpy(d, 128, np.zeros(128, np.uint8), 128, H2D) == ACL_ERROR_INVALID_PARAM  # past the allocation
    assert acl.aclrtMemcpy(host, 64, 0x1234, 64, D2H) == ACL_ERROR_INVALID_PARAM  # not device memory
    assert acl.aclrtMemcpy(d, 64, host, 64, 9) == ACL_ERROR_INVALID_PARAM         # unknown kind
    assert acl.aclrtMemcpy(host[::2], 32, d, 32, D2H) == ACL_ERROR_INVALID_PARAM  # non-contiguous host
    assert acl.aclrtMemcpy(np.zeros(8, np.uint8), 64, d, 64, D2H) == ACL_ERROR_INVALID_PARAM  # host too small
    assert acl.aclGetRecentErrMsg()
    assert acl.aclrtMemcpy(d, 64, host, 0, H2D) == ACL_SUCCESS                     # nothing to copy
