"""What a launch costs besides its blocks' work, as msprof measures it (devices/_atlas_a2.yaml
`runtime`, from an A2 step's kernel_details): the gap between launches, the dispatch and
completion, each core's start (longer as more cores start) and the blocks' dispatch skew. Checked
by hand against the profile's figures, on kernels whose work is known; and the pieces the layout
kernels use: a kernel's own scalar work (ScalarWork), a warm repeat of a call, TIK's core split."""
from __future__ import annotations

import numpy as np
import pytest

import simulator
from simulator import KernelError, TensorLayout
from simulator.kernel import DataCopy, GetBlockIdx, GlobalTensor, ScalarWork, TBuf, TPipe, TPosition
from simulator.profile import load_profile
from ops.common import tik_core_split

SOC = "Ascend910B1"


def _one_copy(x, y):
    """Each block copies 32 B through UB (an MTE2, then an MTE3)."""
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, 32)
    t = buf.Get(np.float32)
    g, h = GlobalTensor(np.float32), GlobalTensor(np.float32)
    g.SetGlobalBuffer(x + 8 * GetBlockIdx(), 8)
    h.SetGlobalBuffer(y + 8 * GetBlockIdx(), 8)
    DataCopy(t, g, 8)
    from simulator.kernel import HardEvent, SetFlag, WaitFlag
    SetFlag(HardEvent.MTE2_MTE3, 0)
    WaitFlag(HardEvent.MTE2_MTE3, 0)
    DataCopy(h, t, 8)


def _run(blocks: int, body=_one_copy):
    x = np.arange(8 * blocks, dtype=np.float32)
    return simulator.run_kernel(body, blocks, {"x": x, "y": np.zeros_like(x)}, soc=SOC, mode="timing",
                                trace=False)


@pytest.mark.parametrize("blocks", [1, 12, 48])
def test_a_launch_costs_its_dispatch_core_start_and_skew_beside_its_work(blocks):
    """Task Duration = dispatch + core start (+ contention per other starting core) + the block's
    own work + the dispatch skew of the blocks after the first; each block's time on its core
    (msprof's aiv_time) holds its start but not the dispatch."""
    p = load_profile(SOC)
    rt = p.runtime
    one = _run(1).report
    body = one.launches[0]["core_cycles"] - rt.block_start_cycles          # the block's own work
    r = _run(blocks).report
    launch = r.launches[0]
    start = rt.block_start_cycles + rt.block_start_contention_cycles * (blocks - 1)
    assert launch["core_cycles"] == pytest.approx(start + body, abs=1e-6)
    want = rt.launch_overhead_us * p.clock_mhz + start + body + rt.block_dispatch_cycles * (blocks - 1)
    assert launch["cycles"] == pytest.approx(want, abs=1e-6)
    assert r.kernel_cycles == r.cycles == pytest.approx(want, abs=1e-6)    # one launch: no gap inside


def _run_on(profile, blocks: int, body=_one_copy, mode: str = "timing"):
    x = np.arange(8 * blocks, dtype=np.float32)
    return simulator.run_kernel(body, blocks, {"x": x, "y": np.zeros_like(x)}, soc=SOC, mode=mode,
                                profile=profile)


def _staggered(changes: dict | None = None):
    return load_profile(SOC).override({"runtime.block_dispatch": "staggered", **(changes or {})})


@pytest.mark.parametrize("blocks", [1, 12, 48])
def test_staggered_blocks_start_a_hand_out_apart_and_the_fit_still_holds(blocks):
    """Blocks handed out one after another start so: block b starts b x block_dispatch_cycles
    after block 0, and no tail follows the last. For blocks of equal, independent work that is
    the fit's own Task Duration (overhead + start + work + the skew), and msprof's aiv_time is
    still a block's own time, not the span of the hand-out."""
    p = _staggered()
    rt = p.runtime
    body = _run_on(p, 1).report.launches[0]["core_cycles"] - rt.block_start_cycles
    result = _run_on(p, blocks)
    launch = result.report.launches[0]
    start = rt.block_start_cycles + rt.block_start_contention_cycles * (blocks - 1)
    assert launch["core_cycles"] == pytest.approx(start + body, abs=1e-6)
    want = rt.launch_overhead_us * p.clock_mhz + start + body + rt.block_dispatch_cycles * (blocks - 1)
    assert launch["cycles"] == pytest.approx(want, abs=1e-6)
    starts = {b.block: b.start for b in result.trace.rec.blocks}
    assert [starts[b] - starts[0] for b in range(blocks)] == pytest.approx(
        [b * rt.block_dispatch_cycles for b in range(blocks)], abs=1e-9)


def test_a_staggered_hand_out_waits_for_a_free_core():
    """More blocks than cores: a block is handed out once a core is free and at least
    block_dispatch_cycles after the block before it, never earlier."""
    def long_block(x, y):
        ScalarWork(5000)
        _one_copy(x, y)
    p = _staggered({"cores.aiv.count": 4})
    d = p.runtime.block_dispatch_cycles
    blocks = sorted(_run_on(p, 10, long_block).trace.rec.blocks, key=lambda b: b.block)
    ends = sorted(b.end for b in blocks[:4])
    for b in range(1, 4):
        assert blocks[b].start - blocks[b - 1].start == pytest.approx(d)
    for b in range(4, 10):
        freed = sorted(x.end for x in blocks[:b])[b - 4]        # the (b-4)-th core to come free
        assert blocks[b].start == pytest.approx(max(freed, blocks[b - 1].start + d))
    assert blocks[4].start == pytest.approx(ends[0])


def test_staggered_blocks_read_while_the_others_are_handed_out():
    """A call whose blocks read from device memory (an FP32 Sigmoid of 4 MB on 48 vector cores):
    started one after another, the first blocks' reads overlap the rest of the hand-out, so the
    call ends sooner than with the skew charged after every block, by no more than that skew,
    and never sooner than device memory could carry its reads (its writes may stay in the L2)."""
    shape = TensorLayout((512, 2049), np.float32)
    together = load_profile(SOC).override({"runtime.block_dispatch": "tail"})
    tail = simulator.run("Sigmoid", SOC, mode="timing", trace=False, profile=together, self=shape, out=shape).report
    p = _staggered()
    staggered = simulator.run("Sigmoid", SOC, mode="timing", trace=False, profile=p, self=shape, out=shape).report
    n = tail.launches[0]["block_dim"]
    skew = p.runtime.block_dispatch_cycles * (n - 1)
    assert n == 48 and tail.cycles - skew <= staggered.cycles < tail.cycles
    moved = 512 * 2049 * 4
    floor = moved / (p.device_memory.bandwidth_GBps * 1e9) * p.hz
    assert staggered.cycles >= floor + p.runtime.launch_overhead_us * p.clock_mhz


def test_the_gap_lies_between_launches_not_inside_them():
    """A 3D gradWeight call in FP16 is six launches on one stream (aclnn's Cast after the
    TransData back): the call's cycles are their Task Durations and five gaps; msprof's sum
    (kernel_us) leaves the gaps out."""
    p = load_profile(SOC)
    dt = np.float16
    r = simulator.run("ConvolutionBackward", soc=SOC, mode="timing", trace=False,
                      gradOutput=TensorLayout((1, 16, 2, 6, 6), dt), input=TensorLayout((1, 16, 4, 8, 8), dt),
                      weight=TensorLayout((16, 16, 3, 3, 3), dt), biasSizes=[16], stride=[1, 1, 1],
                      padding=[0, 0, 0], dilation=[1, 1, 1], transposed=False, outputPadding=[0, 0, 0], groups=1,
                      outputMask=[False, True, False], cubeMathType=0).report
    n = len(r.launches)
    assert n == 6
    assert r.kernel_cycles == pytest.approx(sum(l["cycles"] for l in r.launches))
    assert r.cycles - r.kernel_cycles == pytest.approx((n - 1) * p.runtime.launch_gap_us * p.clock_mhz)


def test_a_chip_without_measured_launch_costs_keeps_its_one_overhead():
    """Ascend910A has no measured kernel_details: a launch costs its assumed overhead only."""
    p = load_profile("Ascend910A")
    rt = p.runtime
    assert (rt.launch_gap_us, rt.block_start_cycles, rt.block_start_contention_cycles, rt.block_dispatch_cycles) \
        == (0, 0, 0, 0)
    x = np.arange(64, dtype=np.float32)
    r = simulator.run_kernel(_one_copy, 8, {"x": x, "y": np.zeros_like(x)}, soc="Ascend910A", mode="timing",
                             trace=False).report
    assert r.launches[0]["cycles"] - r.launches[0]["core_cycles"] == pytest.approx(rt.launch_overhead_us * p.clock_mhz)


def test_scalar_work_is_spent_on_the_scalar_unit_before_the_next_instruction():
    def plain(x, y):
        _one_copy(x, y)

    def with_work(x, y):
        ScalarWork(700)
        _one_copy(x, y)
    a = _run(1, plain).report
    b = _run(1, with_work).report
    assert b.pipes["PIPE_S"]["busy_cycles"] - a.pipes["PIPE_S"]["busy_cycles"] == pytest.approx(700)
    assert b.cycles - a.cycles == pytest.approx(700)        # nothing else was waiting for the scalar unit

    def negative(x, y):
        ScalarWork(-1)
    with pytest.raises(KernelError, match="ScalarWork"):
        _run(1, negative)


def test_a_warm_repeat_finds_its_inputs_in_the_l2():
    """simulator.run(..., warmup=1): the second run of a call that fits the L2 reads it from there;
    the first misses every input line."""
    kw = dict(gradOutput=TensorLayout((64, 1024), np.float16), self=TensorLayout((64, 1024), np.float16))
    cold = simulator.run("SiluBackward", soc=SOC, mode="timing", trace=False, **kw).report
    warm = simulator.run("SiluBackward", soc=SOC, mode="timing", trace=False, warmup=1, **kw).report
    assert cold.l2["hit_rate"] < 0.5 < 0.99 <= warm.l2["hit_rate"]
    assert warm.cycles < cold.cycles


@pytest.mark.parametrize("loops, cores, axis, per", [
    ((1, 2, 9), 48, 2, 1),        # CANN's example: 1 image, 2 C1 planes, 9 position chunks -> 9 cores
    ((2, 4, 6), 48, 2, 1),        # the largest axis under the cores fills best
    ((96, 4, 1), 48, 0, 2),       # a whole multiple of the cores: twice the cores
    ((50, 48, 1), 48, 1, 1),      # 48 scores 96 (a whole multiple), 50 scores 50
    ((0, 0, 0), 48, 0, 1),
])
def test_tik_splits_one_loop_axis_over_the_cores(loops, cores, axis, per):
    assert tik_core_split(loops, cores) == (axis, per)


def test_a_3d_transdata_runs_on_the_cores_its_split_gives():
    """gradOutput 1 x 32 x 8 x 56 x 56 FP16 to NDC1HWC0 as TIK tiles it (trans_data_positive_source_ntc,
    mode 1001): lines of 3,056 positions, so 1 image, 2 C1 planes and 9 position chunks: the chunks
    are split, one tile each on 9 cores; the launch starts every vector core (TIK's block dim is the
    core count; the others exit)."""
    from ops.conv.geometry import MapLayout
    from ops.conv.prologue import plan_to5hd_tik, tik_to5hd_blocks
    dt = np.dtype(np.float16)
    t = plan_to5hd_tik("gradOutput", N=1, G=1, Cg=32, c0=16, P=8 * 56 * 56, lay=MapLayout(1, False, 8, 56, 56, 56),
                       src_dtype=dt, compute_dtype=dt, ub_bytes=196608, tile_scalar=690)
    assert t.L == 3056 and t.slots == 1
    blocks = tik_to5hd_blocks(t, 48)
    assert len(blocks) == 48
    busy = [b for b in blocks if b]
    assert len(busy) == 9 and all(len(b) == 2 for b in busy)          # each: both C1 planes of its chunk
    assert sorted(it.p0 for b in busy for it in b if it.c1 == 0) == list(range(0, 8 * 56 * 56, 3056))


def _gradweight_3d_launches(x: tuple, weight: tuple, groups: int = 1) -> list[str]:
    """The launch labels of a 3D gradWeight-only FP16 call (stride 1, no padding) on SOC."""
    dt = np.float16
    est = simulator.estimate("ConvolutionBackward", SOC, gradOutput=TensorLayout((x[0], weight[0]) + x[2:], dt),
                             input=TensorLayout(x, dt), weight=TensorLayout(weight, dt), biasSizes=[weight[0]],
                             stride=[1, 1, 1], padding=[0, 0, 0], dilation=[1, 1, 1], transposed=False,
                             outputPadding=[0, 0, 0], groups=groups, outputMask=[False, True, False], cubeMathType=0)
    return [name for name, _, _ in est.launches]


def _kinds(labels: list[str]) -> list[str]:
    return [name.split("(")[0].split(":")[0] for name in labels]


def test_a_3d_gradweight_call_launches_what_cann_launches():
    """TransData(gradOutput), TransData(input), MemSet of the FP32 accumulator right before the Cube
    adds into it, the Cube, TransData(gradWeight), and the Cast of the FP32 gradWeight to FP16
    (aclnn's 3D gradWeight path: ops-nn OutputPostProcess)."""
    names = _kinds(_gradweight_3d_launches((1, 16, 8, 56, 56), (32, 16, 1, 1, 1)))
    assert names == ["TransData", "TransData", "MemSet", "Cube", "TransData", "Cast"]


def test_a_depthwise_3d_gradweight_launches_the_rows_kernels():
    """The cann-bench depthwise row's kernel list (TransData x4, MemSet x2, Conv3DBackpropFilter x1):
    the groups' TransData (TIK trans_data_groups, output atomic) takes its own MemSet besides the
    accumulator's."""
    labels = _gradweight_3d_launches((2, 64, 8, 32, 32), (64, 1, 1, 1, 1), groups=64)
    names = _kinds(labels)
    assert sorted(set(names)) == ["Cube", "MemSet", "TransData"]
    assert (names.count("TransData"), names.count("MemSet"), names.count("Cube")) == (4, 2, 1)
    assert labels[labels.index("MemSet(gradWeight)") + 1] == "TransData(gradWeight enlarged -> weight layout)"
