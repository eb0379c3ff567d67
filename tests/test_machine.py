"""The machine itself, with kernels written in the micro-program language: the sanitizer (each
fault names core, pipe and instruction), cross-core flags, streams, the shared memory system."""
import re
import warnings

import numpy as np
import pytest

import simulator
from simulator import acl
from simulator.kernel import (ASCEND_IS_AIC, PIPE_MTE2, PIPE_MTE3, PIPE_S, Adds, CrossCoreSetFlag,
                              CrossCoreWaitFlag, DataCopy, Exp, GetBlockIdx, GetBlockNum,
                              GetSubBlockIdx, GlobalTensor, HardEvent, PipeBarrier, PIPE_ALL,
                              SetFlag, TBuf, TPipe, TPosition, TQue, WaitFlag, float32, half, Cast,
                              RoundMode, DataCopyParams)
from simulator.program import KernelLaunch

WHERE = re.compile(r"core (aiv|aic|aicore)\d+ \(block \d+\), PIPE_\w+")


def fault_of(body, block_dim=1, soc=None, kind="vector", **arrays):
    arrays = arrays or {"x": np.zeros(1024, np.float32)}
    with pytest.raises(simulator.KernelError) as e:
        simulator.run_kernel(body, block_dim, arrays, soc=soc, kind=kind)
    msg = str(e.value)
    return msg


def _ub(nbytes=8192):
    pipe = TPipe()
    b = TBuf()
    pipe.InitBuffer(b, nbytes)
    return pipe, b.Get(float32)


def _gm(x):
    g = GlobalTensor()
    g.SetGlobalBuffer(x)
    return g


# ---- sanitizer -------------------------------------------------------------------------------
def k_deadlock(x):
    _, t = _ub()
    WaitFlag(HardEvent.MTE2_V, 0)
    Exp(t, t, 64)


def k_double_set(x):
    SetFlag(HardEvent.MTE2_V, 1)
    SetFlag(HardEvent.MTE2_V, 1)
    WaitFlag(HardEvent.MTE2_V, 1)


def k_uninitialised(x):
    _, t = _ub()
    Exp(t, t, 64)


def k_gm_out_of_bounds(x):
    _, t = _ub()
    DataCopy(t, _gm(x)[512], 1024)


def k_ub_overflow(x):
    _ub(300000)


def k_misaligned(x):
    _, t = _ub()
    DataCopy(t[3], _gm(x), 64)


def k_not_32_bytes(x):
    _, t = _ub()
    DataCopy(t, _gm(x), 7)


def k_flag_never_waited(x):
    SetFlag(HardEvent.MTE2_V, 1)


def k_alloc_full_queue(x):
    pipe = TPipe()
    q = TQue(TPosition.VECIN, 2)
    pipe.InitBuffer(q, 2, 1024)
    q.AllocTensor(float32)
    q.AllocTensor(float32)
    q.AllocTensor(float32)


def k_deque_empty(x):
    pipe = TPipe()
    q = TQue(TPosition.VECIN, 2)
    pipe.InitBuffer(q, 2, 1024)
    q.DeQue(float32)


def k_vector_count_too_big(x):
    _, t = _ub(1024)
    Exp(t, t, 1000)


def k_too_many_event_ids(x):
    pipe = TPipe()
    qs = [TQue(TPosition.VECIN, 2) for _ in range(3)]
    for q in qs:
        pipe.InitBuffer(q, 2, 1024)


@pytest.mark.parametrize("body, soc, reason", [
    (k_deadlock, None, "deadlock"),
    (k_double_set, None, "set twice without a wait"),
    (k_uninitialised, None, "never written in this block"),
    (k_gm_out_of_bounds, None, "outside its extent"),
    (k_ub_overflow, None, "UB holds 196608 B"),
    (k_misaligned, None, "not 32-byte aligned"),
    (k_not_32_bytes, None, "not a whole number of 32-byte blocks"),
    (k_flag_never_waited, None, "never waited on"),
    (k_alloc_full_queue, None, "all 2 buffers are in use"),
    (k_deque_empty, None, "empty VECIN queue"),
    (k_vector_count_too_big, None, "exceeds the operand"),
    (k_too_many_event_ids, "Ascend910A", "out of event ids"),
])
def test_each_fault_names_core_pipe_and_instruction(body, soc, reason):
    msg = fault_of(body, soc=soc)
    assert reason in msg
    assert "instruction #" in msg
    if reason == "deadlock":
        assert re.search(r"core aiv0 \(block 0\).*\n\s+PIPE_V: waiting for flag", msg), msg
    else:
        assert WHERE.search(msg), msg


def test_deadlock_report_says_what_each_pipe_waits_on():
    msg = fault_of(k_deadlock, block_dim=2)
    assert "event queue drained" in msg
    assert msg.count("waiting for flag PIPE_MTE2->PIPE_V id 0") == 2


def test_fault_in_one_call_leaves_the_runtime_usable():
    with acl.use_runtime(acl.Runtime()):
        acl.aclInit(None)
        acl.aclrtSetDevice(0)
        ptr, _ = acl.aclrtMalloc(4096)
        from simulator.kernel import GM_ADDR
        arg = GM_ADDR(ptr, 4096, np.float32, "x")
        acl.enqueue(acl.runtime().default_stream, "bad", [KernelLaunch("bad", k_deadlock, 1, "vector", (arg,))],
                    lambda rec: None)
        assert acl.aclrtSynchronizeStream(None) == 507015
        assert "deadlock" in acl.aclGetRecentErrMsg()
        done = []
        acl.enqueue(acl.runtime().default_stream, "ok", [KernelLaunch("ok", lambda x: None, 1, "vector", (arg,))],
                    lambda rec: done.append(rec))
        assert acl.aclrtSynchronizeStream(None) == 0 and done


def test_collector_threshold_is_raised_only_while_the_engine_runs():
    import gc
    seen = []

    def k_probe(x):
        seen.append(gc.get_threshold()[0])

    before = gc.get_threshold()
    simulator.run_kernel(k_probe, 1, {"x": np.zeros(64, np.float32)})
    assert seen and seen[0] >= 50_000 and gc.get_threshold() == before
    fault_of(k_deadlock)                    # restored after a fault as well
    assert gc.get_threshold() == before


# ---- cross-core flags (A2) ---------------------------------------------------------------------
def k_mix_handoff(buf):
    pipe = TPipe()
    if ASCEND_IS_AIC():
        CrossCoreSetFlag(3, 2, PIPE_S)         # AIC -> both AIVs of the block
        CrossCoreWaitFlag(4, 2)                # waits for both AIVs
    else:
        CrossCoreWaitFlag(3, 2)
        b = TBuf()
        pipe.InitBuffer(b, 4096)
        t = b.Get(float32, 512)
        g = GlobalTensor()
        g.SetGlobalBuffer(buf + (GetBlockIdx() * 2 + GetSubBlockIdx()) * 512, 512)
        DataCopy(t, g, 512)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        Adds(t, t, float(GetBlockIdx() + 1), 512)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        DataCopy(g, t, 512)
        CrossCoreSetFlag(4, 2, PIPE_MTE3)


def test_mix_kernel_runs_aic_with_its_two_aivs():
    r = simulator.run_kernel(k_mix_handoff, 3, {"buf": np.zeros(3 * 1024, np.float32)}, kind="mix")
    expect = np.repeat(np.arange(1, 4, dtype=np.float32), 1024)
    np.testing.assert_array_equal(r["buf"], expect)
    assert len([c for c in r.report.cores if c.startswith("aic")]) == 3
    assert len([c for c in r.report.cores if c.startswith("aiv")]) == 6


def k_barrier(buf):
    for _ in range(3):
        CrossCoreSetFlag(1, 0)
        CrossCoreWaitFlag(1, 0)


def test_mode0_barrier_and_its_deadlock_when_blocks_exceed_cores():
    simulator.run_kernel(k_barrier, 8, {"buf": np.zeros(8, np.float32)})
    msg = fault_of(k_barrier, block_dim=50, buf=np.zeros(8, np.float32))
    assert "waits for a free aiv core" in msg and "cross-core flag" in msg


def k_overset(buf):
    if ASCEND_IS_AIC():
        for _ in range(16):
            CrossCoreSetFlag(2, 2)


def test_cross_core_counter_limit_and_chips_without_flags():
    assert "the counter holds 15" in fault_of(k_overset, kind="mix", buf=np.zeros(8, np.float32))
    assert "no cross-core flags" in fault_of(k_barrier, soc="Ascend910A", buf=np.zeros(8, np.float32))
    assert "no partner core" in fault_of(k_overset, kind="cube", buf=np.zeros(8, np.float32))


# ---- memory system -------------------------------------------------------------------------------
def k_stream(x, y, n_per_block, tile):
    """Each block copies its slice of x to y through UB, double-buffered by queues."""
    pipe = TPipe()
    q = TQue(TPosition.VECIN, 2)
    pipe.InitBuffer(q, 2, tile * 4)
    start = GetBlockIdx() * n_per_block
    xg, yg = GlobalTensor(), GlobalTensor()
    xg.SetGlobalBuffer(x + start, n_per_block)
    yg.SetGlobalBuffer(y + start, n_per_block)
    for i in range(n_per_block // tile):
        t = q.AllocTensor(float32)
        DataCopy(t, xg[i * tile], tile)
        q.EnQue(t)
        t = q.DeQue(float32)
        q.FreeTensor(t)
    PipeBarrier(PIPE_ALL)


def _stream_run(blocks, n_per_block, soc="Ascend910B1", profile=None, tile=8192):
    x = np.zeros(blocks * n_per_block, np.float32)
    return simulator.run_kernel(k_stream, blocks, {"x": x, "y": x.copy(), "n_per_block": n_per_block,
                                                   "tile": tile}, soc=soc, profile=profile, mode="timing")


def test_device_memory_never_faster_than_its_bandwidth():
    p = simulator.load_profile("Ascend910B1")
    r = _stream_run(48, 1 << 20)           # 48 x 4 MiB of reads, far beyond what one core can pull
    dm = r.report.device_memory
    assert dm["GBps"] <= p.device_memory.bandwidth_GBps * (1 + 1e-9)
    assert dm["GBps"] >= 0.85 * p.device_memory.bandwidth_GBps
    one = _stream_run(1, 1 << 20)
    per_core_peak = p.paths["GM_UB"].bytes_per_cycle * p.clock_mhz / 1e3   # GB/s
    assert one.report.paths["GM_UB"]["GBps"] <= per_core_peak * (1 + 1e-9)
    assert one.report.paths["GM_UB"]["GBps"] >= 0.8 * per_core_peak


def test_what_if_bandwidth_scales_a_bandwidth_bound_kernel():
    p = simulator.load_profile("Ascend910B1")
    base = _stream_run(48, 1 << 19).cycles
    fast = _stream_run(48, 1 << 19, profile=p.override({"device_memory.bandwidth_GBps": 3200})).cycles
    assert fast < 0.8 * base


def k_read_twice(x, n, tile):
    pipe = TPipe()
    b = TBuf()
    pipe.InitBuffer(b, tile * 4)
    t = b.Get(float32)
    g = GlobalTensor()
    g.SetGlobalBuffer(x, n)
    for _ in range(2):
        for i in range(n // tile):
            DataCopy(t, g[i * tile], tile)
            PipeBarrier(PIPE_ALL)


def test_l2_holds_what_fits_and_misses_what_does_not():
    small = np.zeros(1 << 16, np.float32)            # 256 KiB: second pass hits
    r = simulator.run_kernel(k_read_twice, 1, {"x": small, "n": small.size, "tile": 8192}, mode="timing")
    assert r.report.l2["hit_rate"] == pytest.approx(0.5)
    assert r.report.device_memory["bytes"] == small.nbytes
    p = simulator.load_profile("Ascend910B1").override({"l2.bytes": 128 * 1024})
    r2 = simulator.run_kernel(k_read_twice, 1, {"x": small, "n": small.size, "tile": 8192},
                              mode="timing", profile=p)
    assert r2.report.l2["hit_rate"] == 0.0
    assert r2.report.device_memory["bytes"] == 2 * small.nbytes
    assert r2.cycles > r.cycles


# ---- streams -----------------------------------------------------------------------------------
def _launch(blocks):
    return KernelLaunch("copy", k_stream, blocks, "vector")


def _run_streams(plan):
    """plan: list of (stream index, blocks); returns elapsed cycles of the whole device run."""
    with acl.use_runtime(acl.Runtime()):
        acl.aclInit(None, mode="timing")
        acl.aclrtSetDevice(0)
        from simulator.kernel import GM_ADDR
        n = 1 << 16
        streams = [acl.aclrtCreateStream()[0] for _ in range(2)]
        ends = []
        for si, blocks in plan:
            ptr, _ = acl.aclrtMalloc(blocks * n * 4)
            arg = GM_ADDR(ptr, blocks * n * 4, np.float32, "x")
            launch = KernelLaunch("copy", k_stream, blocks, "vector", (arg, arg, n, 8192))
            acl.enqueue(streams[si], "copy", [launch], lambda rec: ends.append(rec.end))
        for s in streams:
            assert acl.aclrtSynchronizeStream(s) == 0
        return max(ends)


def test_streams_overlap_on_free_cores_and_serialise_within_a_stream():
    one = _run_streams([(0, 16)])
    serial = _run_streams([(0, 16), (0, 16)])
    parallel = _run_streams([(0, 16), (1, 16)])
    assert serial >= 2 * one * 0.99
    assert parallel < 0.75 * serial


def test_events_order_streams():
    with acl.use_runtime(acl.Runtime()):
        acl.aclInit(None, mode="timing")
        acl.aclrtSetDevice(0)
        from simulator.kernel import GM_ADDR
        ptr, _ = acl.aclrtMalloc(16 * 65536 * 4)
        arg = GM_ADDR(ptr, 16 * 65536 * 4, np.float32, "x")
        s0, _ = acl.aclrtCreateStream()
        s1, _ = acl.aclrtCreateStream()
        ev, _ = acl.aclrtCreateEvent()
        start, _ = acl.aclrtCreateEvent()
        recs = {}
        acl.aclrtRecordEvent(start, s0)
        acl.enqueue(s0, "a", [KernelLaunch("a", k_stream, 16, "vector", (arg, arg, 65536, 8192))],
                    lambda r: recs.setdefault("a", r))
        acl.aclrtRecordEvent(ev, s0)
        acl.aclrtStreamWaitEvent(s1, ev)
        acl.enqueue(s1, "b", [KernelLaunch("b", k_stream, 16, "vector", (arg, arg, 65536, 8192))],
                    lambda r: recs.setdefault("b", r))
        assert acl.aclrtSynchronizeStream(s1) == 0
        assert recs["b"].start >= recs["a"].end
        ms, ret = acl.aclrtEventElapsedTime(start, ev)
        assert ret == 0 and ms == pytest.approx((recs["a"].end - recs["a"].start) / 1850 / 1000, rel=1e-6)


# ---- determinism and modes ---------------------------------------------------------------------
def k_blocks(x, nblocks):
    pipe = TPipe()
    b = TBuf()
    pipe.InitBuffer(b, 4096)
    t = b.Get(float32, 1024)
    g = GlobalTensor()
    per = 1024
    g.SetGlobalBuffer(x + GetBlockIdx() * per, per)
    DataCopy(t, g, per)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Exp(t, t, per)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(g, t, per)
    assert GetBlockNum() == nblocks


def test_waves_timing_equals_functional_and_is_deterministic():
    x = np.linspace(-1, 1, 100 * 1024, dtype=np.float32)
    f = simulator.run_kernel(k_blocks, 100, {"x": x, "nblocks": 100})
    t = simulator.run_kernel(k_blocks, 100, {"x": x, "nblocks": 100}, mode="timing")
    f2 = simulator.run_kernel(k_blocks, 100, {"x": x, "nblocks": 100})
    assert f.cycles == t.cycles == f2.cycles
    np.testing.assert_allclose(f["x"], np.exp(x), rtol=1e-6)
    assert np.array_equal(x, np.linspace(-1, 1, 100 * 1024, dtype=np.float32))   # input untouched
    one_wave = simulator.run_kernel(k_blocks, 48, {"x": x, "nblocks": 48}, mode="timing").cycles
    assert f.cycles > 2 * (one_wave - 2.0 * 1850) * 0.9      # 100 blocks on 48 AIVs = 3 waves


def test_trace_is_chrome_format_with_named_cores_and_pipes():
    r = simulator.run_kernel(k_blocks, 100, {"x": np.zeros(100 * 1024, np.float32), "nblocks": 100},
                             mode="timing")
    ev = r.trace.to_chrome()["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"PIPE_V", "PIPE_MTE2", "PIPE_MTE3"} <= names
    procs = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert "core aiv0" in procs
    xs = [e for e in ev if e["ph"] == "X" and e["pid"] > 0]
    assert xs and all(e["dur"] >= 0 and e["ts"] >= 0 for e in xs)
    assert any(e["ph"] == "C" for e in ev)
    assert max(e["ts"] + e["dur"] for e in xs) <= r.time_us + 1e-6


def test_report_tables_add_up(tmp_path):
    r = simulator.run_kernel(k_blocks, 60, {"x": np.zeros(60 * 1024, np.float32), "nblocks": 60})
    rows = r.report.instruction_rows()
    for pipe in ("PIPE_V", "PIPE_MTE2", "PIPE_MTE3"):
        per_instr = sum(x["total_cycles"] for x in rows if x["pipe"] == pipe)
        per_core = sum(x["busy_cycles"] for x in r.report.pipe_rows() if x["pipe"] == pipe)
        assert per_instr == pytest.approx(per_core)
    assert sum(x["count"] for x in rows if x["instruction"] == "Exp") == 60
    text = r.report.to_csv(tmp_path / "pipes.csv").read_text().splitlines()
    assert text[0] == "core,pipe,busy_cycles,busy_fraction"
    assert len(text) == 1 + 48 * 4          # 60 blocks ran on the 48 AIVs, 4 pipes each
    import json
    d = json.loads(r.report.to_json())
    assert d["cycles"] == r.cycles and d["bound"] in d["utilisation"]


# ---- long programs: recorded a chunk at a time ---------------------------------------------------
def k_long(x, n):
    _, t = _ub()
    g = _gm(x)[GetBlockIdx() * 64]
    DataCopy(t, g, 64)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    for _ in range(n):
        Adds(t, t, 1.0, 64)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(g, t, 64)


def k_long_then_fault(x, n):
    _, t = _ub(1024)
    DataCopy(t, _gm(x), 64)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    for _ in range(n):
        Adds(t, t, 1.0, 64)
    Exp(t, t, 1000)                      # more than the operand holds: a record-time fault


def k_long_deadlock(x, n):
    _, t = _ub()
    WaitFlag(HardEvent.MTE2_V, 0)        # nobody sets it
    for _ in range(n):
        Adds(t, t, 1.0, 64)


@pytest.fixture
def small_chunks(monkeypatch):
    """Record programs 100 instructions at a time, and note how long each chunk grew."""
    from simulator.recorder import ProgramRecorder
    seen = []
    pause = ProgramRecorder.pause

    def noting(self):
        seen.append(len(self.ctx.program))
        pause(self)
    monkeypatch.setattr(ProgramRecorder, "CHUNK", 100)
    monkeypatch.setattr(ProgramRecorder, "pause", noting)
    return seen


def test_a_long_program_in_chunks_gives_the_same_result_and_cycles(small_chunks, monkeypatch):
    x = np.zeros(1024, np.float32)
    args = {"x": x, "n": 3000}
    chunked = simulator.run_kernel(k_long, 2, args)
    assert len(small_chunks) >= 2 * 30 and max(small_chunks) == 100     # never more than a chunk held
    small_chunks.clear()
    from simulator.recorder import ProgramRecorder
    monkeypatch.setattr(ProgramRecorder, "CHUNK", 10 ** 9)             # the whole program in one go
    whole = simulator.run_kernel(k_long, 2, args)
    assert small_chunks == []
    assert chunked.cycles == whole.cycles and chunked.report.instructions == whole.report.instructions == 2 * 3006
    np.testing.assert_array_equal(chunked["x"][:128], np.full(128, 3000.0, np.float32))
    np.testing.assert_array_equal(chunked["x"][128:], 0.0)


def test_a_block_recorded_again_leaves_no_instructions_for_the_collector(monkeypatch):
    """A body that outgrows a chunk is unwound and recorded again in chunks; the first attempt's
    instructions must be freed at once, not left in its context's cycle with its TPipe (48 long
    blocks once left ~0.4 GB of them to the collector)."""
    import gc

    from simulator.recorder import ProgramRecorder
    from simulator.program import Instr
    monkeypatch.setattr(ProgramRecorder, "CHUNK", 100)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        simulator.run_kernel(k_long, 2, {"x": np.zeros(1024, np.float32), "n": 3000})
        gc.collect()
        left = sum(isinstance(o, Instr) for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == 0


def test_faults_and_deadlocks_after_many_chunks_are_reported_and_unwound(small_chunks):
    import threading
    msg = fault_of(k_long_then_fault, x=np.zeros(1024, np.float32), n=1000)
    assert "exceeds the operand" in msg and "Exp" in msg
    before = threading.active_count()
    for _ in range(3):
        msg = fault_of(k_long_deadlock, x=np.zeros(1024, np.float32), n=1000)
        assert "deadlock" in msg and "PIPE_V" in msg
    assert threading.active_count() <= before + 1       # abandoned recordings gave their threads back
    r = simulator.run_kernel(k_long, 1, {"x": np.zeros(1024, np.float32), "n": 10})   # still usable
    np.testing.assert_array_equal(r["x"][:64], 10.0)


def test_a_fault_names_its_launch():
    """A call runs several launches: the fault says which one (as well as core, pipe, instruction),
    both for a fault found while recording and for one found while the pipes run."""
    import numpy as np
    from simulator.kernel import DataCopy, GlobalTensor, TBuf, TPipe, TPosition

    def overflow(x):
        t = TPipe()
        b = TBuf(TPosition.VECCALC)
        t.InitBuffer(b, 10 ** 7)

    def unwritten(x):
        t = TPipe()
        b = TBuf(TPosition.VECCALC)
        t.InitBuffer(b, 256)
        g = GlobalTensor(np.float32)
        g.SetGlobalBuffer(x)
        DataCopy(g, b.Get(np.float32), 64)          # reads UB that nothing wrote

    for body in (overflow, unwritten):
        with pytest.raises(simulator.KernelError) as e:
            simulator.run_kernel(body, 1, {"x": np.zeros(64, np.float32)}, name="MyLaunch")
        assert "(launch MyLaunch)" in str(e.value) and WHERE.search(str(e.value)), str(e.value)


# ---- transfers in flight and the scalar unit (issue 15) -----------------------------------------
def _copies(n_copies, nbytes):
    """n back-to-back GM -> UB copies of distinct bytes on one pipe, then a flag to V."""
    def body(x):
        _, t = _ub(n_copies * nbytes)
        g = _gm(x)
        elems = nbytes // 4
        for i in range(n_copies):
            DataCopy(t[i * elems], g[i * elems], elems)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        Exp(t, t, elems * n_copies)
    return body


def _mte2_span(in_flight, n_copies, nbytes, soc="Ascend910B1"):
    """The count alone: the profile's window of bytes in flight taken off (its own test is below)."""
    p = simulator.load_profile(soc).override({"paths.GM_UB.in_flight": in_flight, "paths.GM_UB.in_flight_bytes": None,
                                              "scalar.cycles_per_call.copy": 0})
    x = np.ones(n_copies * nbytes // 4, np.float32)
    r = simulator.run_kernel(_copies(n_copies, nbytes), 1, {"x": x}, profile=p)
    assert np.allclose(r["x"], 1)                      # (the input is not an output: unchanged)
    rows = [t for t in r.trace.rows() if t[1] == "PIPE_MTE2"]
    v = [t for t in r.trace.rows() if t[1] == "PIPE_V"]
    return rows, v, r


def test_one_transfer_costs_what_its_path_says_whatever_is_in_flight():
    """msKPP's single-transfer figures hold: a lone transfer is not shortened by overlap."""
    for n in (1, 2, 4):
        rows, _, _ = _mte2_span(n, 1, 4096)
        (_, _, _, start, dur, _), = rows
        p = simulator.load_profile("Ascend910B1").path("GM_UB")
        assert dur == pytest.approx(p.cycles(4096, simulator.load_profile("Ascend910B1").l2.miss_latency_cycles))


def test_back_to_back_transfers_overlap_their_latency_up_to_in_flight():
    cost = simulator.load_profile("Ascend910B1").path("GM_UB")
    miss = simulator.load_profile("Ascend910B1").l2.miss_latency_cycles
    one = cost.cycles(512, miss)
    for n in (1, 2, 4):
        rows, v, r = _mte2_span(n, 8, 512)
        starts = [t[3] for t in rows]
        ends = [t[3] + t[4] for t in rows]
        span = max(ends) - min(starts)
        if n == 1:      # one at a time: each starts when the one before has landed
            assert all(b >= a - 1e-9 for a, b in zip(ends, starts[1:]))
            assert span == pytest.approx(8 * one)
        else:           # never more than n in flight, and the whole is shorter
            for t in starts:
                assert sum(1 for s, e in zip(starts, ends) if s <= t < e) <= n
            assert span < 8 * one * 0.75
        # the flag after them lets V start only once every transfer has landed
        assert v[0][3] >= max(ends) - 1e-9
        # the pipe's busy time is the union of its transfers' spans
        assert r.report.cores["aiv0"]["PIPE_MTE2"] == pytest.approx(span if n > 1 else sum(t[4] for t in rows))


def test_a_window_of_bytes_lets_short_transfers_overlap_past_in_flight():
    """With in_flight_bytes, more than in_flight transfers fly while their bytes leave room in
    the window: 512-B copies under a 2 KB window fly four at a time (a new one starts as the
    first lands, so never more than four); 4 KB ones, each filling it, still two at a time."""
    def span(nbytes, window):
        p = simulator.load_profile("Ascend910B1").override({
            "paths.GM_UB.in_flight": 2, "paths.GM_UB.in_flight_bytes": window, "scalar.cycles_per_call.copy": 0})
        x = np.ones(16 * nbytes // 4, np.float32)
        r = simulator.run_kernel(_copies(16, nbytes), 1, {"x": x}, profile=p)
        rows = [t for t in r.trace.rows() if t[1] == "PIPE_MTE2"]
        starts, ends = [t[3] for t in rows], [t[3] + t[4] for t in rows]
        most = max(sum(1 for s, e in zip(starts, ends) if s <= t < e) for t in starts)
        return max(ends) - min(starts), most
    small, most = span(512, 2048)
    assert most == 4
    assert small < 0.6 * span(512, None)[0]
    (large, most), (plain, _) = span(4096, 4096), span(4096, None)
    assert most == 2 and large == pytest.approx(plain)


def _loaded(x, ub_bytes: int):
    """A UB tensor holding x's 1024 floats, the vector pipe told they are in."""
    _, t = _ub(ub_bytes)
    DataCopy(t, _gm(x), 1024)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    return t


def test_the_scalar_unit_costs_per_call_and_can_bound_a_kernel():
    def body(x):
        t = _loaded(x, 4096)
        for _ in range(200):
            Adds(t, t, 1.0, 64)
    base = simulator.load_profile("Ascend910B1")
    x = np.zeros(1024, np.float32)
    costs = base.scalar.cycles_per_call
    r = simulator.run_kernel(body, 1, {"x": x})
    want = costs["copy"] + 2 * costs["flag"] + 200 * costs["vector"]
    assert r.report.cores["aiv0"]["PIPE_S"] == pytest.approx(want)
    assert r.report.bound == "PIPE_S"                     # 80 cycles a call against ~10 of vector work
    scalar = [t for t in r.trace.rows() if t[1] == "PIPE_S"]
    assert scalar and sum(t[4] for t in scalar) == pytest.approx(want)
    free = base.override({f"scalar.cycles_per_call.{c}": 0 for c in costs})
    r0 = simulator.run_kernel(body, 1, {"x": x}, profile=free)
    assert r0.report.bound != "PIPE_S" and r0.cycles < r.cycles


def test_a_copy_between_ub_tensors_costs_the_scalar_unit_a_copy_call():
    """A DataCopy UB -> UB runs on PIPE_V but is a copy call (its burst descriptor), as the
    profile's classes say: `copy` (DataCopy, LoadData, Fixpipe), `vector` for vector calls. CANN's
    TIK TransData NDC1HWC0 -> NCDHW on a 910B2 issues half its 20,500 moves a core UB -> UB and its
    scalar unit spends about 24 cycles a move (mineru_vision_910b2's mv_conv3d_transdata_y)."""
    def body(x):
        t = _loaded(x, 16384)
        for i in range(100):
            DataCopy(t[2048], t[(i % 4) * 8], DataCopyParams(1, 1, 0, 0))
        Adds(t, t, 1.0, 64)
    base = simulator.load_profile("Ascend910B1")
    costs = base.scalar.cycles_per_call
    assert costs["copy"] != costs["vector"]
    r = simulator.run_kernel(body, 1, {"x": np.zeros(1024, np.float32)})
    want = 101 * costs["copy"] + 2 * costs["flag"] + costs["vector"]
    assert r.report.cores["aiv0"]["PIPE_S"] == pytest.approx(want)
    ub_copies = [t for t in r.trace.rows() if t[1] == "PIPE_V" and t[2] == "DataCopy"]
    assert len(ub_copies) == 100


def test_a_call_never_beats_its_roofline():
    """Overlapped transfers count once in a pipe's work: the roofline stays a lower bound."""
    for n in (1, 2, 4):
        _, _, r = _mte2_span(n, 16, 2048)
        assert r.report.cycles >= r.report.roofline_cycles


# ---- the per-core engine (issue 14): results depend on times, not on which actor runs first ----
def test_written_runs_answer_as_a_set_of_bytes_does():
    """The sanitizer's run cache against the plainest model, the set of written bytes: a span it
    covers was written, and (below its limit) a written span is covered."""
    from simulator.core_state import WrittenRuns

    class Small(WrittenRuns):
        LIMIT = 3                          # a full cache may forget, never invent
    rng = np.random.default_rng(7)
    for trial in range(300):
        runs, model = (Small() if trial % 3 == 0 else WrittenRuns()), set()
        for _ in range(int(rng.integers(1, 40))):
            lo = int(rng.integers(0, 300))
            hi = lo + int(rng.integers(1, 40))
            if rng.random() < 0.5:
                runs.add("UB", lo, hi)
                model.update(range(lo, hi))
            lo = int(rng.integers(0, 300))
            hi = lo + int(rng.integers(1, 40))
            written = set(range(lo, hi)) <= model
            if runs.covers("UB", lo, hi):
                assert written
            elif not isinstance(runs, Small):
                assert not written
        starts, ends = runs.starts.get("UB", []), runs.ends.get("UB", [])
        assert all(a < b for a, b in zip(starts, ends))
        assert all(e < s for e, s in zip(ends, starts[1:]))     # merged: no two runs touch


def k_set_twice_taken_between(x):
    """SetFlag twice on MTE2 with the V pipe's wait taking the first in between (in time): valid.
    MTE2 runs far ahead of V in the engine's order, so only times can tell."""
    _, t = _ub()
    g = _gm(x)
    DataCopy(t, g, 64)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Exp(t[64], t, 64)                       # V takes the first set before MTE2 sets again
    SetFlag(HardEvent.V_MTE2, 0)
    WaitFlag(HardEvent.V_MTE2, 0)
    DataCopy(t[128], g[64], 64)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Exp(t[192], t[128], 64)


def k_set_twice_overlapping(x):
    """The second SetFlag comes (in time) while the first is still set, since the V pipe's
    wait is issued only after every pipe drained: a fault, though the engine meets the waits
    before it knows when the sets were taken."""
    _, t = _ub()
    g = _gm(x)
    DataCopy(t, g, 64)
    SetFlag(HardEvent.MTE2_V, 0)
    DataCopy(t[128], g[64], 64)
    SetFlag(HardEvent.MTE2_V, 0)
    PipeBarrier(PIPE_ALL)
    WaitFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Exp(t[192], t[128], 64)


def test_a_flag_set_again_is_judged_by_time():
    x = np.arange(1024, dtype=np.float32) / 1024
    simulator.run_kernel(k_set_twice_taken_between, 1, {"x": x})
    assert "set twice without a wait" in fault_of(k_set_twice_overlapping, x=x)


def k_race_hidden_by_a_shared_moment(x):
    """V reads what MTE2 copies in with no MTE2->V flag; MTE3 meets the other cores (a
    cross-core flag) while the copy is in flight. In time the read comes before the bytes land:
    a fault, whichever pipe the engine happens to advance first."""
    _, t = _ub(65536)
    g = _gm(x)
    DataCopy(t, g, 8192)
    PipeBarrier(PIPE_MTE2)
    CrossCoreSetFlag(1, 0, PIPE_MTE3)
    SetFlag(HardEvent.MTE3_V, 0)
    WaitFlag(HardEvent.MTE3_V, 0)
    Exp(t[8192], t, 64)
    CrossCoreWaitFlag(1, 0)


def k_overwrite_after_the_copy_out(x, y, z):
    """V overwrites a copy-out's source with no MTE3->V flag, but long after the copy (in time):
    the copy takes the old values, as the timing says, though the engine may have run V ahead."""
    _, t = _ub(131072)
    DataCopy(t, _gm(x), 64)
    DataCopy(t[8192], _gm(z), 8192)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Adds(t[1024], t, 1.0, 64)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(_gm(y), t[1024], 64)
    for _ in range(20):
        Exp(t[16384], t[8192], 8192)
    Adds(t[1024], t, 100.0, 64)


def test_pipes_meet_in_time_order_for_the_sanitizer_and_the_effects():
    assert "was never written" in fault_of(k_race_hidden_by_a_shared_moment, soc="Ascend910B1",
                                          x=np.ones(16384, np.float32))
    r = simulator.run_kernel(k_overwrite_after_the_copy_out, 1,
                             {"x": np.zeros(64, np.float32), "y": np.zeros(64, np.float32),
                              "z": np.zeros(8192, np.float32)}, soc="Ascend910B1")
    assert (r["y"] == 1.0).all()


def _overflowing_cast_body(src, out):
    """FP32 values past FP16's range, cast to FP16 on the vector pipe."""
    pipe = TPipe()
    buf = TBuf()
    pipe.InitBuffer(buf, 1024)
    u = buf.Get(float32)
    h = u[64].ReinterpretCast(half)
    sg, og = GlobalTensor(float32), GlobalTensor(half)
    sg.SetGlobalBuffer(src)
    og.SetGlobalBuffer(out)
    DataCopy(u, sg, 16)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Cast(h, u, RoundMode.CAST_RINT, 16)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(og, h, 16)


def test_an_overflowing_cast_gives_inf_without_a_warning():
    """The hardware's arithmetic raises no floating-point exception: a cast past FP16's range
    is inf, and numpy's RuntimeWarning must not reach the user (GridSampler's FP16 tail tiles
    cast padding lanes that hold anything)."""
    src = np.array([1e6, -1e6, 1.5, np.nan] * 4, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = simulator.run_kernel(_overflowing_cast_body, 1, {"src": src, "out": np.zeros(16, np.float16)})
    out = r["out"]
    np.testing.assert_array_equal(out[0::4], np.inf)
    np.testing.assert_array_equal(out[1::4], -np.inf)
    np.testing.assert_array_equal(out[2::4], np.float16(1.5))
    assert np.isnan(out[3::4]).all()


def test_an_operator_error_raised_inside_a_kernel_is_reported_with_its_message():
    """SimPy rebuilds an exception that leaves a process as type(e)(*e.args): an AclnnError
    raised while a kernel runs once became 'TypeError: __init__() missing message'. It is an
    internal error (a planned kernel must not fail), reported with the status and the text."""
    from simulator.enums import AclnnError

    def body(x):
        raise AclnnError(561002, "weight packing: this does not fit")
    with pytest.raises(Exception, match="561002.*weight packing: this does not fit"):
        simulator.run_kernel(body, 1, {"x": np.zeros(8, np.float32)})


@pytest.mark.parametrize("num, length", [(1, -64), (1, 0), (0, 64), (1, 16.5), (1, float("nan")), (True, 64)])
def test_init_buffer_of_no_whole_size_faults_at_the_call(num, length):
    """A queue of -64 B was taken, and the first copy into it faulted with an extent of -64."""
    import simulator
    from simulator.enums import KernelError
    from simulator.kernel import TPipe, TPosition, TQue

    def body():
        pipe = TPipe()
        pipe.InitBuffer(TQue(TPosition.VECIN, 1), num, length)

    with pytest.raises(KernelError, match="InitBuffer.*whole number >= 1"):
        simulator.run_kernel(body, 1, {}, kind="vector", soc="Ascend910B1", trace=False)
