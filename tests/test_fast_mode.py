"""Fast mode against the exact engine: the bound it states must hold.

Every case runs a call twice, in `timing` mode (the exact engine, the reference) and in `fast`
mode, and asserts |fast - exact| <= the bound fast mode reports (and <= 2 % of exact, the
product's promise), that the instruction count it reports matches the exact run's within the
same share, and that it is deterministic. Calls are drawn at random (seeded) over shapes, dtypes,
chips and what-if profiles with few cores, small buffers or a small L2, sized so that the loops are long
enough to be fast-forwarded; the test also checks that most cases did fast-forward something, so
that it cannot pass by simulating everything.
"""
from __future__ import annotations

import numpy as np
import pytest

import simulator
from simulator import TensorLayout
from simulator.kernel import audit_loops
from simulator.profile import load_profile

CASES = 30
PROMISE = 0.02          # |fast - exact| / exact on every call (issue 29)
SOCS = ("Ascend910B1", "Ascend910A", "Ascend310P3", "Ascend910B4")


def _what_if(rng: np.random.Generator, soc: str):
    """The chip, or a what-if of it with few vector cores and/or a smaller UB."""
    base = load_profile(soc)
    changes = {}
    vector = next(name for name, k in base.cores.items() if "vector" in k.units)
    if rng.random() < 0.85:
        changes[f"cores.{vector}.count"] = int(rng.integers(1, 5))
    if rng.random() < 0.3:
        ub = base.cores[vector].buffers["UB"]
        changes[f"cores.{vector}.buffers.UB"] = ub // 2
    if rng.random() < 0.3:          # an L2 the call overflows part-way (its regime changes)
        changes["l2.bytes"] = int(rng.choice([256, 512, 1024])) << 10
    return base.override(changes) if changes else base, changes


def _silu_case(rng: np.random.Generator, soc: str):
    dtype = rng.choice([np.float16, np.float32])
    rows = int(rng.integers(1, 64))
    cols = int(rng.integers(2000, 60000))
    shape = (rows, cols)
    return "SiluBackward", dict(gradOutput=TensorLayout(shape, dtype), self=TensorLayout(shape, dtype))


def _grid_case(rng: np.random.Generator, soc: str):
    n, c = int(rng.integers(1, 3)), int(rng.choice([4, 16, 32, 64]))
    h, w = int(rng.integers(8, 40)), int(rng.integers(8, 40))
    ho, wo = int(rng.integers(16, 64)), int(rng.integers(16, 64))
    mode = int(rng.integers(0, 2))          # bilinear, nearest
    return "GridSampler2DBackward", dict(
        gradOutput=TensorLayout((n, c, ho, wo), np.float32), input=TensorLayout((n, c, h, w), np.float32),
        grid=TensorLayout((n, ho, wo, 2), np.float32), interpolationMode=mode,
        paddingMode=int(rng.integers(0, 3)), alignCorners=bool(rng.integers(0, 2)), outputMask=[True, True])


OPS = {_silu_case: "SiluBackward", _grid_case: "GridSampler2DBackward"}


def _cases():
    rng = np.random.default_rng(29)
    out = []
    for i in range(CASES):
        soc = SOCS[i % len(SOCS)]
        makes = [_silu_case, _grid_case] if i % 2 == 0 else [_grid_case, _silu_case]
        make = next((m for m in makes if load_profile(soc).supports(OPS[m])), None)
        if make is None:
            continue
        op, kw = make(rng, soc)
        profile, changes = _what_if(rng, soc)
        out.append(pytest.param(op, soc, profile, kw, id=f"{i}-{op}-{soc}-{'-'.join(f'{k}={v}' for k, v in changes.items())}"))
    return out


FORWARDED: list[bool] = []


CASE_LIST = _cases()


def _check_bound(op, soc, profile, kw) -> dict:
    """Runs the call exact (its loops audited) and fast, twice; asserts the bound, the promise,
    the instruction count and determinism. Returns what fast mode reported of its run."""
    with audit_loops() as findings:
        exact = simulator.run(op, soc, mode="timing", profile=profile, trace=False, **kw).report
    assert not findings, "a Loop's key or period does not hold:\n" + "\n".join(findings[:5])
    fast = simulator.run(op, soc, mode="fast", profile=profile, trace=False, **kw).report
    again = simulator.run(op, soc, mode="fast", profile=profile, trace=False, **kw).report
    assert fast.mode == "fast" and exact.fast is None
    assert again.cycles == fast.cycles, "fast mode must be deterministic"
    f = fast.fast
    err = abs(fast.cycles - exact.cycles)
    assert err <= f["bound_cycles"] + 1e-6 * exact.cycles, (
        f"{op} on {soc}: fast {fast.cycles:.1f} vs exact {exact.cycles:.1f} (error {err:.1f} cycles) "
        f"outside the stated bound {f['bound_cycles']:.1f}")
    assert err <= PROMISE * exact.cycles
    assert abs(fast.instructions - exact.instructions) <= PROMISE * exact.instructions
    assert f["simulated_instructions"] + f["fast_forwarded_instructions"] == fast.instructions
    return f


@pytest.mark.parametrize("op, soc, profile, kw", CASE_LIST)
def test_fast_mode_stays_inside_its_bound(op, soc, profile, kw):
    FORWARDED.append(_check_bound(op, soc, profile, kw)["fast_forwarded_instructions"] > 0)


@pytest.mark.parametrize("soc, self_shape, other_shape, dtype", [
    ("Ascend310P3", (100, 24576), (24576,), np.float32),          # a row longer than a tile: reads go back a period
    ("Ascend910A", (16, 256, 56, 56), (256, 1, 1), np.float16),   # tiles of whole rows inside a period
    ("Ascend910B1", (64, 100, 256), (256,), np.float16),          # whole periods: the operand resident
])
def test_fast_mode_holds_on_an_operand_repeated_in_ub(soc, self_shape, other_shape, dtype):
    """Add's operand broadcast in UB and repeated along the leading dims: its reads return to the
    values' start every period, which the Loop's key must tell apart (the audit), and the bound holds."""
    _check_bound("Add", soc, load_profile(soc), dict(self=TensorLayout(self_shape, dtype),
                                                     other=TensorLayout(other_shape, dtype), alpha=1.0))


def _conv_case(rng: np.random.Generator, soc: str):
    """A ConvolutionBackward or ConvTbcBackward call large enough for its layout launches to have
    alike blocks (which fast mode runs as shadows on vector-only cores)."""
    a2 = load_profile(soc).series == "A2"
    dtype = np.dtype(rng.choice(["float16", "float32"] + (["bfloat16"] if a2 else [])))
    if rng.random() < 0.3 and load_profile(soc).supports("ConvTbcBackward"):
        t, b, cin, cout, k = (int(rng.integers(64, 512)), int(rng.integers(4, 17)), int(rng.choice([64, 256, 512])),
                              int(rng.choice([64, 128, 512])), int(rng.choice([1, 3, 5])))
        pad = int(rng.integers(0, k))
        return "ConvTbcBackward", dict(
            self=TensorLayout((t + 2 * pad - k + 1, b, cout), dtype), input=TensorLayout((t, b, cin), dtype),
            weight=TensorLayout((k, cin, cout), dtype), bias=TensorLayout((cout,), dtype), pad=pad,
            cubeMathType=1 if dtype == np.float32 else 0)
    n, cin, cout = int(rng.integers(4, 17)), int(rng.choice([16, 48, 64, 128])), int(rng.choice([32, 64, 96, 256]))
    h, w = int(rng.integers(14, 57)), int(rng.integers(14, 57))
    k, s = int(rng.choice([1, 3])), int(rng.choice([1, 2]))
    p = k // 2
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return "ConvolutionBackward", dict(
        gradOutput=TensorLayout((n, cout, ho, wo), dtype), input=TensorLayout((n, cin, h, w), dtype),
        weight=TensorLayout((cout, cin, k, k), dtype), biasSizes=[cout], stride=[s, s], padding=[p, p],
        dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=1,
        outputMask=[bool(rng.random() < 0.8), True, bool(rng.random() < 0.5)],
        cubeMathType=1 if dtype == np.float32 else 0)


def _conv_cases():
    rng = np.random.default_rng(2931)
    out = []
    for i in range(CONV_CASES):
        soc = SOCS[i % len(SOCS)]
        op, kw = _conv_case(rng, soc)
        profile, changes = _what_if(rng, soc) if rng.random() < 0.3 else (load_profile(soc), {})
        out.append(pytest.param(op, soc, profile, kw, id=f"{i}-{op}-{soc}-{'-'.join(f'{k}={v}' for k, v in changes.items())}"))
    return out


CONV_CASES = 12
SHADOWED: list[bool] = []


@pytest.mark.parametrize("op, soc, profile, kw", _conv_cases())
def test_fast_mode_stays_inside_its_bound_on_convolutions(op, soc, profile, kw):
    """The convolutions declare no loops: fast mode runs their layout launches' alike blocks as
    shadows (on vector-only cores, the A2 series) and is exact elsewhere."""
    SHADOWED.append(_check_bound(op, soc, profile, kw)["shadowed_blocks"] > 0)


def test_some_convolution_cases_shadowed_blocks():
    """The convolution cases above would pass by simulating everything: some must shadow."""
    if len(SHADOWED) < CONV_CASES:
        pytest.skip("runs after the convolution cases (run the module whole)")
    assert sum(SHADOWED) >= 3, f"only {sum(SHADOWED)} of {CONV_CASES} convolution cases ran shadows"


def test_most_cases_fast_forwarded_something():
    """The bound test above would pass by simulating everything: most of its cases must not."""
    if len(FORWARDED) < len(CASE_LIST):
        pytest.skip("runs after the bound cases (run the module whole)")
    assert sum(FORWARDED) >= 0.6 * len(FORWARDED), f"only {sum(FORWARDED)} of {len(FORWARDED)} cases fast-forwarded"


def test_bound_holds_when_every_core_fills_the_l2_mid_loop():
    """The whole chip's cores stream a SiLU through an L2 that fills part-way. Where the skips'
    L2 touches evict dirty lines (the output) whose write-back the windows never paid, the bound
    must take that write-back (without it this call was -1.5 % against a stated 0.5 %, when the
    skip could span the fill). Since a skip stops where the L2's free room runs out, the next
    segment measures the evicting regime and this call is within 0.01 %; the bound must hold
    either way."""
    shape = (16, 96, 56, 56)
    kw = dict(gradOutput=TensorLayout(shape, np.float16), self=TensorLayout(shape, np.float16))
    profile = load_profile("Ascend910B1").override({"l2.bytes": 16 << 20})
    exact = simulator.run("SiluBackward", "Ascend910B1", mode="timing", profile=profile, trace=False, **kw).report
    fast = simulator.run("SiluBackward", "Ascend910B1", mode="fast", profile=profile, trace=False, **kw).report
    assert fast.fast["fast_forwarded_instructions"] > 0
    assert abs(fast.cycles - exact.cycles) <= fast.fast["bound_cycles"]


def test_exact_modes_are_untouched_by_loops():
    """A declared Loop records in the exact modes what a plain for would: same program, same
    cycles with and without the fast schedule's marks being possible."""
    kw = dict(gradOutput=TensorLayout((4, 50000), np.float16), self=TensorLayout((4, 50000), np.float16))
    profile = load_profile("Ascend910B1").override({"cores.aiv.count": 2})
    r = simulator.run("SiluBackward", "Ascend910B1", mode="timing", profile=profile, trace=True, **kw)
    assert not any(row[2] == "LoopMark" for row in r.report.trace.rows())
    assert r.report.fast is None


def test_the_estimate_of_a_fast_run_counts_what_fast_mode_simulates():
    """`simulator.estimate(..., mode="fast")` (what `replay`, `sweep` and `tune` weigh against the
    time budget in fast mode) counts the instructions fast mode records, not the whole loop's:
    otherwise a call fast mode runs in seconds is refused for what the exact engine would cost.
    (Blocks run as shadows of alike ones record their programs too: what fast mode simulates is
    fewer still.)"""
    shape = (32, 96, 112, 112)          # EfficientNet-B0's largest SiLU: long tile loops
    kw = dict(gradOutput=TensorLayout(shape, np.float16), self=TensorLayout(shape, np.float16))
    exact = simulator.estimate("SiluBackward", "Ascend910B1", **kw)
    fast = simulator.estimate("SiluBackward", "Ascend910B1", mode="fast", **kw)
    run = simulator.run("SiluBackward", "Ascend910B1", mode="fast", trace=False, **kw).report
    assert exact.instructions == run.instructions       # the exact count: every block records alike
    simulated, recorded = run.fast["simulated_instructions"], run.fast["recorded_instructions"]
    assert simulated <= recorded < exact.instructions / 4
    assert recorded / 2 <= fast.instructions <= recorded * 2


def test_a_launch_takes_its_blocks_skipped_lines_together():
    """SkipBarrier: a block's k-th skip goes into the L2 only once every running block with a
    k-th skip has reached it or ended; a block whose skips are unknown (recorded in chunks) is
    not waited for."""
    from simulator.fast import SkipBarrier

    taken = []
    names = ["a", "b", "c", "chunked"]

    class L2:
        def touch(self, addr, n, write, base):
            taken.extend((names[int(a)], int(p)) for a, p in zip(addr, n))
            return 0, 0

    class Block:
        shadows, l2 = [], L2()

        def __init__(self, name):
            self.name = name

        def skipped_lines(self, windows, periods, sources):
            one = tuple(np.array([x]) for x in (names.index(self.name), periods, False, 0, 1))
            return [iter([one])], 1

    barrier = SkipBarrier()
    a, b, c, chunked = Block("a"), Block("b"), Block("c"), Block("chunked")
    barrier.join(a, 2)
    barrier.join(b, 2)
    barrier.join(c, 1)
    barrier.join(chunked, None)
    barrier.arrive(chunked, ((), (), None), 7)
    assert taken == [("chunked", 7)]                 # not waited for, not waiting
    barrier.arrive(a, ((), (), None), 1)
    barrier.arrive(b, ((), (), None), 1)
    assert taken == [("chunked", 7)]                 # c has a first skip too
    barrier.arrive(a, ((), (), None), 2)                     # a's second waits for the firsts, and b's second
    barrier.arrive(c, ((), (), None), 1)
    assert taken[1:] == [("a", 1), ("b", 1), ("c", 1)]
    barrier.leave(b)                                 # b ends before its second skip
    assert taken[4:] == [("a", 2)]


def test_a_skip_counts_what_the_skips_beside_it_moved_across_device_memory():
    """SkipBarrier.crossing: what the touches of k-th skips taken while a block ran moved across
    device memory (bytes) and the most periods one took; a block that starts once the others
    have ended (more blocks than cores) counts only its own."""
    from simulator.fast import SkipBarrier

    taken = []

    class L2:
        def touch(self, addr, n, write, base):
            taken.append(sorted(int(a) for a in addr))
            return 100 * len(addr), 10 * len(addr)          # (bytes crossed, dirty bytes evicted)

    class Block:
        shadows, l2 = [], L2()

        def __init__(self, k):
            self.k = k

        def skipped_lines(self, windows, periods, sources):
            one = tuple(np.array([x]) for x in (self.k, 8, False, 0, 1))
            return [iter([one])], periods

    barrier = SkipBarrier()
    blocks = [Block(k) for k in range(3)]
    for block in blocks:
        barrier.join(block, 1)
    barrier.arrive(blocks[0], ((), (), None), 5)
    barrier.arrive(blocks[1], ((), (), None), 6)
    assert taken == [] and barrier.crossing(blocks[0], 0) == (0, 0)
    barrier.arrive(blocks[2], ((), (), None), 4)
    assert taken == [[0, 1, 2]]
    assert all(barrier.crossing(block, 0) == (330, 6) for block in blocks)
    for block in blocks:
        barrier.leave(block)
    later = Block(9)
    barrier.join(later, 1)
    barrier.arrive(later, ((), (), None), 2)
    assert taken[-1] == [9] and barrier.crossing(later, 0) == (110, 2)
    assert barrier.crossing(blocks[0], 0) == (330, 6)


def test_alike_blocks_share_their_pace():
    """SkipBarrier: the blocks' k-th skips that repeat the same work are fast-forwarded at the
    mean of what their windows measured; other work, or another k, keeps its own."""
    from simulator.fast import SkipBarrier

    barrier = SkipBarrier()
    same = (0, (("PIPE_MTE2", (("'executed'", 2),)),))
    barrier.measured(same, 3540.0, 8)
    barrier.measured(same, 4754.0, 8)                   # a window that drew a long wait
    barrier.measured((1,) + same[1:], 9000.0, 8)        # the blocks' next skips: another regime
    barrier.measured((0, (("PIPE_MTE2", (("'executed'", 4),)),)), 100.0, 8)   # other work
    assert barrier.pace(same) == pytest.approx((3540.0 + 4754.0) / 2)
    assert barrier.pace((1,) + same[1:]) == 9000.0


def test_a_block_systematically_off_the_shared_pace_keeps_its_own():
    """SkipBarrier.block_pace: a block both of whose windows lie on one side of the shared pace,
    beyond the schedule's share and further apart from it than from each other, the second no
    nearer, and whose reads miss in the L2 more (or less) often than the others', keeps its own
    pace; a window that drew a long wait alone, windows on both sides, a block still settling
    towards the others, or one as slow but missing as often as they do (a queue's wait) share
    the mean."""
    from simulator.fast import FastSchedule, SkipBarrier

    share = FastSchedule().systematic_share
    barrier = SkipBarrier()
    key = (0, (("PIPE_MTE2", (("'executed'", 2),)),))
    for cycles, rates in ((40000.0, (0.05, 0.05)), (40000.0, (0.05, 0.05)), (40000.0, (0.05, 0.05)),
                          (52000.0, (0.2, 0.2))):
        barrier.measured(key, cycles, 25, rates)
    shared = barrier.pace(key)                                                     # 43,000
    slow, usual, fast = (0.2, 0.2), (0.0875, 0.0875), (0.01, 0.01)                # usual: the mean
    assert barrier.block_pace(key, 49000.0, 52000.0, slow, share) == 52000.0      # behind, and falling further
    assert barrier.block_pace(key, 40000.0, 40000.0, fast, share) == 40000.0      # ahead, steadily
    assert barrier.block_pace(key, 49000.0, 52000.0, usual, share) == shared      # as slow, but in a queue
    assert barrier.block_pace(key, 40000.0, 40000.0, slow, share) == shared       # ahead, though missing more
    assert barrier.block_pace(key, 43500.0, 52000.0, slow, share) == shared       # one window's wait
    assert barrier.block_pace(key, 38000.0, 48000.0, slow, share) == shared       # one on each side
    assert barrier.block_pace(key, 52000.0, 47500.0, slow, share) == shared       # settling towards the rest
    assert barrier.block_pace(key, 44000.0, 44500.0, slow, share) == shared       # within the share


def test_blocks_whose_input_the_l2_evicted_fall_behind_in_fast_mode_too():
    """GridSampler2DBackward N8 C64 128x128 (silu_smoke call 4) on Ascend910B4: its main launch
    starts on a full L2, and 14 of its 40 blocks, whose input rows are the oldest held, miss on
    about half their reads from the first periods on and end about 28 % after the rest. Sharing
    one pace among all alike blocks put the call 14 % short of the exact engine; those blocks now
    keep their own, within the issue's 5 % of it."""
    from simulator import studies
    from pathlib import Path
    trace = studies.load_trace(Path(__file__).resolve().parent.parent / "traces" / "silu_smoke.jsonl")
    call = trace.calls[4]
    exact, fast = (simulator.run(call.op, "Ascend910B4", mode=mode, trace=False,
                                 **studies.build_inputs(call, data=False)).report for mode in ("timing", "fast"))
    assert fast.fast["fast_forwarded_instructions"] > 0
    assert abs(fast.cycles - exact.cycles) <= min(fast.fast["bound_cycles"], 0.05 * exact.cycles)


def test_a_skip_stops_where_the_l2_fills():
    """The first segment of a loop stops where the L2's free room runs out, counting only the
    lines the L2 does not hold already and less what the loop's head fills; the next at the
    L2's size counted from its own start (less the periods it records before its skip). An L2
    already full, or holding every line the loop touches, cuts at its size only."""
    from simulator.fast import FastSchedule, L2Projection
    from simulator.program import Instr

    class L2:
        def __init__(self, free, held=()):
            self.free, self.lines = free, set(held)

        def free_bytes(self):
            return self.free

        def held(self, lines):
            return np.array([int(x) in self.lines for x in lines], bool)

    def copy(addr):
        return Instr("PIPE_MTE2", "DataCopy", gm=((addr, 1024),))

    windows = [[copy(0)], [copy(4096)]]             # two new 512-byte lines a period: 8 and 9
    schedule = FastSchedule()
    size, per_period = 1 << 20, 2 * 512 * 4         # 4 cores

    def cut(l2=None, recorded=0):
        return L2Projection(windows, size, 512, 4, l2).cut(schedule, 1000, 2, recorded)

    by_size = (min(1000, 2 * (size // per_period)), True)
    assert cut() == by_size
    assert cut(L2(40 * per_period)) == (2 * (40 - 3), False)
    assert cut(L2(2 * per_period)) == (0, False)    # the head fills it
    assert cut(L2(100)) == by_size                  # full already
    assert cut(L2(40 * per_period, {8, 9})) == by_size                  # all hits
    half = per_period // 2                          # line 8 held: one new line a period fills the L2
    assert cut(L2(40 * half, {8})) == (2 * (40 - 3), False)
    # after the first cut, the size counts from the segment's start: its recorded periods brought lines too
    assert cut(recorded=6) == (by_size[0] - 2 * 6, True)
    assert cut(L2(100), recorded=6) == by_size      # (the first cut)
    assert cut(recorded=size // per_period + 5) == (0, True)      # a head longer than one L2's worth: no skip


def test_a_segment_after_the_fill_ends_where_the_lines_from_before_it_are_gone():
    """SiLU backward, FP32, 27 x 360,000 on Ascend910B4 with a 32 MB L2 (writes go through once a
    launch's own traffic fills it): after the fill, each period evicts dirty lines written
    before it until one L2's worth of new lines has come in, then only clean ones. A segment
    that skipped one L2's worth from its windows on carried that write-back to the run's end:
    fast mode read 8.2 % over the exact engine (and 8 % more bytes through device memory)."""
    profile = load_profile("Ascend910B4").override({"l2.bytes": 32 << 20})
    assert profile.l2.writes_through_when_full
    kw = dict(gradOutput=TensorLayout((27, 360000), np.float32), self=TensorLayout((27, 360000), np.float32))
    exact, fast = (simulator.run("SiluBackward", "Ascend910B4", mode=mode, profile=profile, trace=False, **kw).report
                   for mode in ("timing", "fast"))
    assert fast.fast["fast_forwarded_instructions"] > 0
    assert abs(fast.cycles - exact.cycles) <= 0.01 * exact.cycles
    assert abs(fast.device_memory["bytes"] - exact.device_memory["bytes"]) <= 0.01 * exact.device_memory["bytes"]


@pytest.mark.parametrize("soc", ["Ascend910A", "Ascend910B4"])
def test_the_decoder_call_is_within_the_promise(soc):
    """The DETR decoder's level-0 call. On Ascend910A it was the trace's worst call before the
    blocks shared their pace (+2.4 %, then +4.7 % under LRU eviction, where the launch's slowest
    block was the one whose window drew the longest wait in device memory's queue). On
    Ascend910B4 (device memory at 0.8 TB/s) its layout launches are bound by device memory from
    their first period, and their second runs' windows were measured while the other blocks
    skipped: -7.1 % until a launch waited for device memory to move what it and its skips moved."""
    from simulator import studies
    from pathlib import Path
    trace = studies.load_trace(Path(__file__).resolve().parent.parent / "traces" /
                               "deformable_detr_grid_sample_backward.yaml")
    call = trace.calls[3]
    exact = simulator.run(call.op, soc, mode="timing", trace=False, **studies.build_inputs(call, data=False)).report
    fast = simulator.run(call.op, soc, mode="fast", trace=False, **studies.build_inputs(call, data=False)).report
    assert fast.fast["fast_forwarded_instructions"] > 0
    assert abs(fast.cycles - exact.cycles) <= min(fast.fast["bound_cycles"], PROMISE * exact.cycles)


def _uneven_loop_kernel(a, r, sizes, order=None):
    """Per iteration: copy sizes[i] FP16 elements in (from slot order[i] of the input, slot i
    by default), double them, copy them out (queues of depth 1); the Loop claims every iteration
    alike (no key) with a period of 2."""
    from simulator.kernel import Add, DataCopy, GlobalTensor, Loop, TPipe, TPosition, TQue, half
    aGm, rGm = GlobalTensor(half), GlobalTensor(half)
    aGm.SetGlobalBuffer(a)
    rGm.SetGlobalBuffer(r)
    pipe = TPipe()
    qi, qo = TQue(TPosition.VECIN, 1), TQue(TPosition.VECOUT, 1)
    most = max(sizes)
    pipe.InitBuffer(qi, 1, most * 2)
    pipe.InitBuffer(qo, 1, most * 2)
    for i in Loop(len(sizes), period=2):
        n = sizes[i]
        x = qi.AllocTensor(half)
        DataCopy(x, aGm[(i if order is None else order[i]) * most], n)
        qi.EnQue(x)
        x = qi.DeQue(half)
        y = qo.AllocTensor(half)
        Add(y, x, x, n)
        qo.EnQue(y)
        qi.FreeTensor(x)
        y = qo.DeQue(half)
        DataCopy(rGm[i * most], y, n)
        qo.FreeTensor(y)


@pytest.mark.parametrize("pattern, skips", [((1024, 1024), True), ((1024, 4096, 1024), False)])
def test_a_loop_is_fast_forwarded_only_where_its_windows_are_alike(pattern, skips):
    """A Loop whose key calls unlike iterations alike (here: sizes repeating every 3 iterations,
    declared with a period of 2) has windows that issue different instructions; fast mode then
    simulates the run whole instead of extrapolating a window that is not the loop's."""
    sizes = [pattern[i % len(pattern)] for i in range(60)]
    most = max(sizes)
    args = dict(a=np.ones(60 * most, np.float16), r=np.zeros(60 * most, np.float16), sizes=sizes)
    exact = simulator.run_kernel(_uneven_loop_kernel, 1, args, soc="Ascend910B1", mode="timing", trace=False).report
    fast = simulator.run_kernel(_uneven_loop_kernel, 1, args, soc="Ascend910B1", mode="fast", trace=False).report
    assert (fast.fast["fast_forwarded_instructions"] > 0) == skips
    if not skips:
        assert fast.cycles == exact.cycles
    assert abs(fast.cycles - exact.cycles) <= fast.fast["bound_cycles"] + 1e-9 * exact.cycles


@pytest.mark.parametrize("pattern, order, finding", [
    ((1024,), None, None),
    ((1024, 4096, 1024), None, None),             # unlike windows: fast mode sees them (no skip)
    ((1024,) * 50 + (4096,), None, "iteration 50 differs"),                # one unlike iteration between them
    ((1024,), [(i // 2) * 2 + (1 - i % 2) for i in range(60)], None),      # pairs swapped: linear per period
    ((1024,), [(i * 7) % 60 for i in range(60)], "(a skip extrapolates"),   # wraps: not linear per period
])
def test_the_loop_audit_finds_what_a_skip_would_take_wrongly(pattern, order, finding):
    """audit_loops() reports an iteration a skip would take for one it is not like, which fast
    mode's two windows cannot see when it lies between them, and addresses a skip would
    extrapolate wrongly; a loop that is what it declares gives no finding, nor one whose windows
    already differ (fast mode then records the run whole)."""
    sizes = [pattern[i % len(pattern)] for i in range(60)]
    most = max(sizes)
    args = dict(a=np.ones(60 * most, np.float16), r=np.zeros(60 * most, np.float16), sizes=sizes, order=order)
    with audit_loops() as findings:
        simulator.run_kernel(_uneven_loop_kernel, 1, args, soc="Ascend910B1", mode="timing", trace=False)
    if finding is None:
        assert findings == []
    else:
        assert len(findings) == 1 and finding in findings[0], findings


def _strided_loop_kernel(x, pitches):
    """Per iteration: eight rows of 256 bytes, pitches[i] bytes apart, into UB."""
    from simulator.kernel import DataCopyExtParams, DataCopyPad, GlobalTensor, Loop, TPipe, TPosition, TQue
    xg = GlobalTensor(np.uint8)
    xg.SetGlobalBuffer(x)
    pipe, q = TPipe(), TQue(TPosition.VECIN, 2)
    pipe.InitBuffer(q, 2, 8192)
    for i in Loop(len(pitches), period=2):
        t = q.AllocTensor(np.uint8)
        DataCopyPad(t, xg[i * 256], DataCopyExtParams(8, 256, pitches[i], 0))
        q.EnQue(t)
        q.FreeTensor(q.DeQue(np.uint8))


def test_the_loop_audit_finds_rows_laid_out_anew():
    """The same bytes in rows spaced otherwise from iteration 30: a skip would repeat the windows'
    layout; the audit says so."""
    pitches = [0 if i < 30 else 1 << 16 for i in range(60)]
    args = dict(x=np.ones(60 * 256 + 8 * (1 << 16) + (1 << 16), np.uint8), pitches=pitches)
    with audit_loops() as findings:
        simulator.run_kernel(_strided_loop_kernel, 1, args, soc="Ascend910B1", mode="timing", trace=False)
    assert findings.loops == 1
    assert len(findings) == 1 and "iteration 30 lays out its GM transfer 0 (DataCopyPad) as 8 row(s) of 256 B, 65792 B apart" in findings[0], findings


@pytest.mark.parametrize("op, soc, kw", [
    ("GridSampler2DBackward", "Ascend910B1", dict(
        gradOutput=TensorLayout((2, 32, 48, 48), np.float32), input=TensorLayout((2, 32, 40, 40), np.float32),
        grid=TensorLayout((2, 48, 48, 2), np.float32), interpolationMode=0, paddingMode=0, alignCorners=False,
        outputMask=[True, True])),
    ("ConvolutionBackward", "Ascend910B1", dict(
        gradOutput=TensorLayout((4, 64, 14, 14), np.float16), input=TensorLayout((4, 32, 28, 28), np.float16),
        weight=TensorLayout((64, 32, 3, 3), np.float16), biasSizes=[64], stride=[2, 2], padding=[1, 1],
        dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=1, outputMask=[True, True, False],
        cubeMathType=0)),
])
def test_alike_blocks_run_as_shadows_within_the_bound(op, soc, kw):
    """On the whole chip's vector cores, a launch's alike blocks (one program shape, one dispatch sweep)
    run as shadows of a few representatives: their GM transfers cross the L2 and the channels
    beside the representatives', their instructions are not simulated. The call stays inside its
    bound (which takes the spread of the representatives' times) and the promise; with a trace,
    which shows every block, every block is simulated."""
    exact = simulator.run(op, soc, mode="timing", trace=False, **kw).report
    fast = simulator.run(op, soc, mode="fast", trace=False, **kw).report
    traced = simulator.run(op, soc, mode="fast", trace=True, **kw).report
    f = fast.fast
    assert f["shadowed_blocks"] > 0 and traced.fast["shadowed_blocks"] == 0
    assert f["simulated_instructions"] < traced.fast["simulated_instructions"]
    assert fast.instructions == traced.instructions
    assert fast.cores.keys() == exact.cores.keys()          # every core that ran a block is there
    err = abs(fast.cycles - exact.cycles)
    assert err <= min(f["bound_cycles"] + 1e-6 * exact.cycles, PROMISE * exact.cycles)
    # the shadows' own traffic is counted: bytes per path and to device memory as the exact run's
    for path, p in exact.paths.items():
        assert fast.paths[path]["bytes"] == pytest.approx(p["bytes"], rel=0.02)
    assert fast.device_memory["bytes"] == pytest.approx(exact.device_memory["bytes"], rel=0.05)
    # and their busy cycles, per pipe over the cores (a core may run another block than in the
    # exact run: shadows release their cores when their representative ends)
    for pipe, p in exact.pipes.items():
        assert fast.pipes[pipe]["busy_cycles"] == pytest.approx(p["busy_cycles"], rel=0.02)


def test_alike_blocks_choose_their_representatives():
    """The first two blocks of a shape and sweep are representatives; then each carries up to
    `per_representative` shadows (the least loaded first) before another is made; a block of
    another shape or sweep, a shape that syncs with other cores (None), or a representative that
    has begun moving data, touched the L2 for a skip or ended (sealed) takes none."""
    from simulator.fast import AlikeBlocks

    class Run:
        def __init__(self):
            self.sealed, self.start, self.end, self.shadows = False, 0.0, 0.0, []
            self.fast = self

    alike = AlikeBlocks(per_representative=2)
    made = []
    for _ in range(9):
        rep = alike.representative_for(("s",), 0.0)
        if rep is None:
            rep = Run()
            alike.add(("s",), 0.0, rep)
            made.append(rep)
    assert len(made) == 3                         # 2 representatives with 2 shadows each, then a third
    assert sorted(n for _, n in alike.groups[("s",), 0.0]) == [2, 2, 2]
    assert alike.representative_for(("s",), 5.0) is None and alike.representative_for(None, 0.0) is None
    other = Run()
    alike.add(("t",), 0.0, other)
    alike.add(("t",), 0.0, Run())
    other.sealed = True
    assert alike.representative_for(("t",), 0.0) is not other


def test_cores_that_run_cube_launches_run_every_block():
    """Shadows free their cores together, so a later launch's blocks take other cores than in
    the exact run; where Cube launches share those cores (Ascend910A's AI cores), alike blocks
    are not shadowed."""
    kw = dict(gradOutput=TensorLayout((8, 64, 56, 56), np.float16), self=TensorLayout((8, 64, 56, 56), np.float16))
    coupled = simulator.run("SiluBackward", "Ascend910A", mode="fast", trace=False, **kw).report
    a2 = simulator.run("SiluBackward", "Ascend910B1", mode="fast", trace=False, **kw).report
    assert coupled.fast["shadowed_blocks"] == 0 and a2.fast["shadowed_blocks"] > 0


def test_staggered_blocks_still_run_as_shadows_their_lag_behind():
    """Where a chip's blocks start one after another (profile.runtime.block_dispatch), alike
    blocks handed out in one sweep still run as shadows: a shadow's transfers cross as long after
    its representative's as it started after it, and it ends that much later (its time on its
    core is its representative's). The blocks start when the exact engine starts them, and the
    call stays inside its bound and the promise."""
    p = load_profile("Ascend910B1").override({"runtime.block_dispatch": "staggered"})
    kw = dict(gradOutput=TensorLayout((8, 64, 56, 56), np.float16), self=TensorLayout((8, 64, 56, 56), np.float16))
    exact = simulator.run("SiluBackward", "Ascend910B1", mode="timing", trace=False, profile=p, **kw)
    fast = simulator.run("SiluBackward", "Ascend910B1", mode="fast", trace=False, profile=p, **kw)
    f = fast.report.fast
    assert f["shadowed_blocks"] > 0
    err = abs(fast.cycles - exact.cycles)
    assert err <= min(f["bound_cycles"] + 1e-6 * exact.cycles, PROMISE * exact.cycles)
    starts = lambda r: sorted((b.block, b.start) for b in r.trace.rec.blocks)
    assert starts(fast) == starts(exact)
    times = {round(b.end - b.start, 6) for b in fast.trace.rec.blocks}
    assert len(times) < len(fast.trace.rec.blocks) - f["shadowed_blocks"] + 1   # shadows take a representative's


def _two_pass_kernel(x, z, n_per_block, tile, busy_blocks):
    """Blocks below `busy_blocks` read their slice of x twice (the second pass finds it in the
    L2), except that blocks from 2 on read z the second time (never read before: misses); the
    others do nothing. Every block's program has one shape (addresses aside)."""
    from simulator.kernel import DataCopy, GetBlockIdx, GlobalTensor, Loop, PIPE_ALL, PipeBarrier, TBuf, TPipe, \
        TPosition, float32
    b = GetBlockIdx()
    if b >= busy_blocks:
        return
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, tile * 4)
    t = buf.Get(float32)
    first, second = GlobalTensor(float32), GlobalTensor(float32)
    first.SetGlobalBuffer(x + b * n_per_block, n_per_block)
    second.SetGlobalBuffer((x if b < 2 else z) + b * n_per_block, n_per_block)
    for g in (first, second):
        for i in Loop(n_per_block // tile):
            DataCopy(t, g[i * tile], tile)
            PipeBarrier(PIPE_ALL)


@pytest.mark.parametrize("busy_blocks", [18, 4])
def test_shadows_whose_lines_the_l2_lacks_widen_the_bound(busy_blocks):
    """Alike blocks whose data the L2 holds for the representatives (blocks 0 and 1) but not for
    the shadows: a shadow takes its representative's time, so the bound takes what its transfers
    cost more, scaled to the whole block (here the call is about 19 % slower than fast mode
    says, and says so). Blocks that end at once (no work: busy_blocks 4 of 18) take no shadows
    after they have ended (they would wait for an end that has passed)."""
    blocks, n = 18, 64 * 1024
    x = np.zeros(blocks * n, np.float32)
    args = {"x": x, "z": x.copy(), "n_per_block": n, "tile": 2048, "busy_blocks": busy_blocks}
    exact = simulator.run_kernel(_two_pass_kernel, blocks, args, soc="Ascend910B1", mode="timing", trace=False).report
    fast = simulator.run_kernel(_two_pass_kernel, blocks, args, soc="Ascend910B1", mode="fast", trace=False).report
    assert fast.fast["shadowed_blocks"] > 0
    assert abs(fast.cycles - exact.cycles) <= fast.fast["bound_cycles"] + 1e-6 * exact.cycles


def _grid_call(n, c, ho, wo, h, w, dtype, mode, padding, align, mask):
    return dict(gradOutput=TensorLayout((n, c, ho, wo), dtype), input=TensorLayout((n, c, h, w), dtype),
                grid=TensorLayout((n, ho, wo, 2), dtype), interpolationMode=mode, paddingMode=padding,
                alignCorners=align, outputMask=mask)


def test_alike_blocks_in_small_groups_keep_the_waits_of_the_exact_run():
    """A representative's shadows move their data when it does, in one lump with it. On
    Ascend910B4, whose device memory is this GridSampler call's bottleneck, lumps of 9 blocks
    (8 shadows a representative) shifted every block's waits: the call ran 1.45 % short, outside
    the bound it stated then (1.59 % short of fast mode with every block simulated, a trace). In
    lumps of 3 the shadows move it 0.28 % from every block simulated (lumps of 9: 0.61 %). Against
    the exact engine it is 0.86 % short, 0.57 of them the skips' own: device memory's cost of
    opening pieces reorders its queue (the exact engine's call moves non-monotonically with that
    cost, 220,549 / 220,331 / 219,921 / 220,741 cycles at 0 / 40 / 83 / 166 B a piece), which the
    skips' windows see differently (docs/FAST_MODE.md). The call is held to the shipped traces'
    promise and its own bound."""
    kw = _grid_call(4, 128, 119, 141, 53, 53, np.float32, 1, 0, True, [True, False])
    exact = simulator.run("GridSampler2DBackward", "Ascend910B4", mode="timing", trace=False, **kw).report
    fast = simulator.run("GridSampler2DBackward", "Ascend910B4", mode="fast", trace=False, **kw).report
    every_block = simulator.run("GridSampler2DBackward", "Ascend910B4", mode="fast", trace=True, **kw).report
    assert fast.fast["shadowed_blocks"] > 0 and every_block.fast["shadowed_blocks"] == 0
    assert abs(fast.cycles - every_block.cycles) <= 0.005 * every_block.cycles
    assert abs(fast.cycles - exact.cycles) <= min(PROMISE * exact.cycles, fast.fast["bound_cycles"])


def test_declared_gathers_bring_a_small_l2_call_near_the_exact_engine():
    """One vector core, a 2 MB L2: the gathers' extrapolated lines made this GridSampler call
    13.8 % short (the later images' windows ran faster than the first's, and the bound took
    that). Declared (Loop `touches`), they leave each image the L2 the exact engine leaves. One
    period in five or six reads lines the period before it read (an output row ends there) and
    runs 11 % faster; windows on two periods of one class put the call +1.90 % from the exact
    engine, outside the bound they stated (0.96 %). Windows on a period of each class, and a pace
    that mixes them as the skip's periods do, put it within 0.1 %, inside the bound."""
    soc = "Ascend910_9392"
    profile = load_profile(soc).override({"l2.bytes": 2 << 20, "cores.aiv.count": 1})
    kw = _grid_call(3, 16, 127, 67, 115, 119, np.float16, 0, 2, True, [True, True])
    exact = simulator.run("GridSampler2DBackward", soc, mode="timing", profile=profile, trace=False, **kw).report
    fast = simulator.run("GridSampler2DBackward", soc, mode="fast", profile=profile, trace=False, **kw).report
    assert abs(exact.cycles - fast.cycles) <= min(0.001 * exact.cycles, fast.fast["bound_cycles"])


def test_a_loop_that_evicts_lines_it_has_yet_to_read_is_measured_after_it_does():
    """GridSampler on Ascend910A with a 2 MB L2 and 2 AI cores: the loop's reads find the
    transposed input the launch before left in the L2, until its own new lines, once the L2 is
    full, have evicted those it has yet to read (the exact engine's periods cost 57,889 cycles,
    then up to 61,841 from period 38 of 52). Its skips had been cut where the L2 fills, and the
    windows after it came before that: -1.21 %, outside a 0.80 % bound. The declared reads and
    the L2's LRU order now say where the first such line is lost, and a skip stops there (and the
    skips of a loop that fills the L2 leave in it the lines they bring, not as many periods as
    the bytes they move would fill, so that the windows after it see what the exact engine's
    L2 holds)."""
    profile = load_profile("Ascend910A").override({"l2.bytes": 2 << 20, "cores.aicore.count": 2})
    kw = _grid_call(1, 32, 103, 131, 82, 29, np.float32, 0, 2, False, [True, True])
    exact = simulator.run("GridSampler2DBackward", "Ascend910A", mode="timing", profile=profile, trace=False,
                          **kw).report
    fast = simulator.run("GridSampler2DBackward", "Ascend910A", mode="fast", profile=profile, trace=False,
                         **kw).report
    assert abs(exact.cycles - fast.cycles) <= min(0.003 * exact.cycles, fast.fast["bound_cycles"])


def test_a_loop_that_begins_with_a_full_l2_and_loses_its_input_leaves_the_lines_it_brings():
    """GridSampler on Ascend910B4 with a 2 MB L2 and one vector core, an eighth of a call a random
    campaign found (`fast_mode_campaign.py --calls 100 --seed 61`, call 14: 8 images, 16 MB, 8
    vector cores, the same errors): the L2 is full as the main loop begins, and the loop's own
    lines evict the transposed input it has yet to read. Its skips left in the L2 as many periods
    as the bytes they move would fill, and a gather loop re-reads most of what it moves: too few
    lines to evict the input, so the windows after the skip found all of it there (in the
    campaign's call 28,617 cycles a step, where the exact engine's steps cost 32,857 to 37,360):
    -4.51 %, outside a 3.13 % bound. Where a sample of its periods says the loop loses to such
    reads a tenth of what it brings (L2Projection.loses_input), its skips leave the lines they bring,
    as those of a loop that fills the L2 part-way do."""
    profile = load_profile("Ascend910B4").override({"l2.bytes": 2 << 20, "cores.aiv.count": 1})
    kw = _grid_call(1, 32, 106, 130, 123, 68, np.float16, 0, 2, True, [True, True])
    exact = simulator.run("GridSampler2DBackward", "Ascend910B4", mode="timing", profile=profile, trace=False,
                          **kw).report
    fast = simulator.run("GridSampler2DBackward", "Ascend910B4", mode="fast", profile=profile, trace=False,
                         **kw).report
    assert abs(exact.cycles - fast.cycles) <= min(0.01 * exact.cycles, fast.fast["bound_cycles"])


def _gather_setup(x, nbytes: int):
    """A kernel's GM tensor over x, a UB buffer of `nbytes`, offsets of 0 for its gathers and
    their params (one block of `nbytes`)."""
    from simulator.kernel import (PIPE_ALL, DataCopyExtParams, Duplicate, GlobalTensor, PipeBarrier, TBuf, TPipe,
                                  TPosition, int32)
    xg = GlobalTensor(np.float32)
    xg.SetGlobalBuffer(x)
    pipe, buf, idx = TPipe(), TBuf(TPosition.VECCALC), TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, max(nbytes, 4096))
    pipe.InitBuffer(idx, 64)
    offsets = idx.Get(int32)
    Duplicate(offsets, 0, 16)
    PipeBarrier(PIPE_ALL)
    return xg, DataCopyExtParams(1, nbytes, 0, 0), offsets, buf.Get(np.float32)


def _revisit_kernel(x, every, back):
    """One gather of 8 KB an iteration, each from rows no iteration read before but every
    `every`-th, which reads again the rows the iteration `back` before it read (it finds them in
    the L2 where the others miss)."""
    from simulator.kernel import PIPE_ALL, Loop, PipeBarrier
    from simulator.kernel.indirect import DataCopyPadIndirect, nominal_rows
    xg, params, offsets, dst = _gather_setup(x, 8192)

    def start(i):                     # (in floats: 2048 of them an iteration)
        fresh = i - (i + 1) // every if i % every != every - 1 else (i - back) - i // every
        return 2048 * fresh

    for i in Loop(60, touches=lambda i: [nominal_rows(xg, params, [start(i)], True)]):
        DataCopyPadIndirect(dst, xg, params, offsets, 0, nominal=start(i))
        PipeBarrier(PIPE_ALL)


@pytest.mark.parametrize("every, back", [(5, 1), (7, 1), (5, 2), (6, 4)])
def test_periods_of_two_classes_are_each_measured(every, back):
    """A gather loop where one iteration in `every` hits the L2 (it re-reads the rows of the
    iteration `back` before it) and the others miss: windows on two missing iterations were the
    exact engine's +8 % (every 5th), outside the 0.9 % bound they stated. The declared rows tell
    the classes apart before the loop runs (the lines an iteration reads that the 4 before it did
    not): the windows move to one iteration of each, and the skip mixes them as its own do."""
    x = np.zeros(2048 * 64, np.float32)
    args = dict(x=x, every=every, back=back)
    exact = simulator.run_kernel(_revisit_kernel, 1, args, soc="Ascend910B1", mode="timing", trace=False).report
    fast = simulator.run_kernel(_revisit_kernel, 1, args, soc="Ascend910B1", mode="fast", trace=False).report
    assert fast.fast["simulated_fraction"] < 0.25
    assert abs(exact.cycles - fast.cycles) <= min(0.005 * exact.cycles, fast.fast["bound_cycles"])


def test_declared_gathers_leave_the_l2_the_next_launch_finds():
    """GridSampler on a default Ascend910A: the skipped periods' gathers and scatters, once
    extrapolated from the windows and put in the L2 block after block, left 17 % of the
    accumulator's lines untouched and old, and the transpose after the main launch evicted them:
    the call was 0.93 % slow against a bound of 0.63 %. Declared (Loop `touches`) and taken
    period by period across the blocks, they leave the exact engine's L2."""
    kw = _grid_call(8, 64, 111, 59, 88, 93, np.float32, 1, 2, False, [True, False])
    exact = simulator.run("GridSampler2DBackward", "Ascend910A", mode="timing", trace=False, **kw).report
    fast = simulator.run("GridSampler2DBackward", "Ascend910A", mode="fast", trace=False, **kw).report
    assert abs(exact.cycles - fast.cycles) <= min(0.0025 * exact.cycles, fast.fast["bound_cycles"])


def _declared_loop_kernel(x, wrong_at):
    """A gather per iteration at a declared nominal offset; iteration `wrong_at` declares another
    (-1: every iteration declares a tuple, not NominalRows)."""
    from simulator.kernel import Loop
    from simulator.kernel.indirect import DataCopyPadIndirect, nominal_rows
    xg, params, offsets, dst = _gather_setup(x, 64)

    def touches(i):
        if wrong_at == -1:
            return [(i * 64, 64)]
        return [nominal_rows(xg, params, [i * 16 + (8 if i == wrong_at else 0)], True)]

    for i in Loop(40, period=2, touches=touches):
        DataCopyPadIndirect(dst, xg, params, offsets, 0, nominal=i * 16)


def test_the_loop_audit_checks_declared_touches():
    """audit_loops() compares each iteration's gathers and scatters with what its Loop's
    `touches` declares for it."""
    args = dict(x=np.ones(40 * 16 + 64, np.float32))
    for wrong_at, finding in ((None, None), (25, "iteration 25 issues 1 gather/scatter row set(s)")):
        with audit_loops() as findings:
            simulator.run_kernel(_declared_loop_kernel, 1, dict(args, wrong_at=wrong_at), soc="Ascend910B1",
                                 mode="timing", trace=False)
        if finding is None:
            assert findings == []
        else:
            assert len(findings) == 1 and finding in findings[0], findings


def test_the_bound_takes_what_shadow_groups_shift_a_launch_by():
    """Which blocks fall into which representative's group shifts a contended launch: this
    GridSampler call on Ascend910B3 with an 8 MB L2 is +0.23 % from the exact engine with every
    block simulated, -0.78, -2.04, -0.20 and -1.40 % with 1, 2, 4 and 8 shadows a
    representative. The bound takes `FastSchedule.grouping` of each launch that ran shadows."""
    soc = "Ascend910B3"
    profile = load_profile(soc).override({"l2.bytes": 8 << 20})
    kw = _grid_call(6, 32, 51, 147, 87, 109, np.float32, 1, 0, False, [True, False])
    exact = simulator.run("GridSampler2DBackward", soc, mode="timing", profile=profile, trace=False, **kw).report
    fast = simulator.run("GridSampler2DBackward", soc, mode="fast", profile=profile, trace=False, **kw).report
    assert fast.fast["shadowed_blocks"] > 0
    assert abs(exact.cycles - fast.cycles) <= fast.fast["bound_cycles"] + 1e-6 * exact.cycles


def test_touches_that_give_no_nominal_rows_fail_with_a_message():
    """Fast mode asks a Loop's `touches` for the iterations it skips: what is not NominalRows
    stops the run with a message that names the Loop's line and what it should give."""
    from simulator.api import KernelBodyError
    with pytest.raises(KernelBodyError, match=r"touches\(\d+\) must give NominalRows .*test_fast_mode.py:\d+"):
        simulator.run_kernel(_declared_loop_kernel, 1, dict(x=np.ones(40 * 16 + 64, np.float32), wrong_at=-1),
                             soc="Ascend910B1", mode="fast", trace=False)


def _bn(shape, training=True):
    c = shape[1]
    v = TensorLayout((c,), np.float32)
    return dict(input=TensorLayout(shape, np.float16), weight=v, bias=v, runningMean=v, runningVar=v,
                training=training, momentum=0.1, eps=1e-5, saveMean=v, saveInvstd=v)


@pytest.mark.parametrize("op, soc, kw", [
    ("BatchNorm", "Ascend910B1", _bn((8, 64, 56, 56))),
    ("BatchNorm", "Ascend910A", _bn((4, 128, 28, 28), training=False)),
    ("BatchNormBackward", "Ascend910B1", dict(gradOut=TensorLayout((8, 64, 28, 28), np.float16),
                                              input=TensorLayout((8, 64, 28, 28), np.float16),
                                              weight=TensorLayout((64,), np.float32), training=True, eps=1e-5,
                                              outputMask=[True, True, True])),
    ("Add", "Ascend910B1", dict(self=TensorLayout((16, 256, 28, 28), np.float16),
                                other=TensorLayout((16, 256, 28, 28), np.float16), alpha=1.0)),
    ("ThresholdBackward", "Ascend910A", dict(gradOutput=TensorLayout((8, 512, 28, 28), np.float16),
                                             self=TensorLayout((8, 512, 28, 28), np.float16), threshold=0.0)),
    ("Mul", "Ascend910B1", dict(self=TensorLayout((32, 96, 56, 56), np.float16),
                                other=TensorLayout((32, 96, 1, 1), np.float16))),
    ("Mean", "Ascend910A", dict(self=TensorLayout((32, 96, 56, 56), np.float16), dim=[2, 3], keepDim=True,
                                dtype=1)),
    ("ReduceSum", "Ascend910B1", dict(self=TensorLayout((4096, 1024), np.float16), dims=[0], keepDims=False,
                                      dtype=1)),
    ("GluBackward", "Ascend910B1", dict(gradOut=TensorLayout((50, 80, 1024), np.float16),
                                        self=TensorLayout((50, 80, 2048), np.float16), dim=-1)),
    ("Mm", "Ascend910A", dict(self=TensorLayout((1024, 2048), np.float16), mat2=TensorLayout((2048, 1024), np.float16),
                              cubeMathType=0)),
    ("MaxPool2dWithIndices", "Ascend910B1", dict(self=TensorLayout((8, 64, 112, 112), np.float16), kernelSize=[3, 3],
                                                 stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceilMode=False)),
    ("Sigmoid", "Ascend910B1", dict(self=TensorLayout((4096, 4096), np.float32))),
    ("MaxPool2dWithIndicesBackward", "Ascend910B4", dict(
        gradOutput=TensorLayout((4, 64, 56, 56), np.float32), self=TensorLayout((4, 64, 112, 112), np.float32),
        indices=TensorLayout((4, 64, 56, 56), np.int32), kernelSize=[3, 3], stride=[2, 2], padding=[1, 1],
        dilation=[1, 1], ceilMode=False)),
    ("MaxPool2dWithIndices", "Ascend910B4", dict(self=TensorLayout((2, 64, 60, 60), np.float32), kernelSize=[5, 5],
                                                 stride=[1, 1], padding=[2, 2], dilation=[1, 1], ceilMode=False,
                                                 tiling={"planes": 16, "rows": 1, "cols": 30})),
    ("MaxPool2dWithIndicesBackward", "Ascend910B1", dict(
        gradOutput=TensorLayout((2, 64, 60, 60), np.float32), self=TensorLayout((2, 64, 60, 60), np.float32),
        indices=TensorLayout((2, 64, 60, 60), np.int32), kernelSize=[5, 5], stride=[1, 1], padding=[2, 2],
        dilation=[1, 1], ceilMode=False, tiling={"planes": 16, "rows": 1, "cols": 30})),
    ("Matmul", "Ascend910A", dict(self=TensorLayout((4, 1, 512, 1024), np.float16),
                                  other=TensorLayout((1, 8, 1024, 512), np.float16), cubeMathType=0)),
    ("Matmul", "Ascend310P3", dict(self=TensorLayout((512, 32768), np.float16),
                                   other=TensorLayout((32768, 64), np.float16), cubeMathType=0)),
], ids=["bn-910B1", "bn-infer-910A", "bn-backward-910B1", "add-910B1", "threshold-backward-910A",
        "se-mul-broadcast-910B1", "mean-910A", "sum-over-batch-910B1", "glu-backward-910B1", "mm-910A",
        "max-pool-910B1", "sigmoid-910B1", "max-pool-backward-910B4", "max-pool-edges-910B4",
        "max-pool-backward-edges-910B1", "batch-matmul-910A", "mm-strips-310P3"])
def test_the_step_operators_loops_hold_the_bound(op, soc, kw):
    """Batch norm's, the elementwise kernel's (row broadcast included), the reductions', Glu's chain,
    the MatMul's (TransData to NZ, the GEMM), max pooling's and Sigmoid's declared Loops pass the audit, and fast mode stays
    inside its bound on them."""
    _check_bound(op, soc, load_profile(soc), kw)


@pytest.mark.parametrize("columns, through", [(2048, True), (4096, False)],
                         ids=["2048-writes-through", "4096-write-back"])
def test_a_chain_that_fills_the_l2_with_dirty_lines_keeps_the_promise(columns, through):
    """GluBackward's chain on Ascend910B1 (the fconv step's shapes) fills the 192 MB L2 with its
    own written lines: later launches evict dirty lines where their windows evicted clean ones,
    and lose input the L2 held as they began. Fast mode follows the exact engine within 2 %, as
    the L2 takes each skip's periods a sixteenth of itself at a time and device memory carries
    what they moved (4.2 % and, with writes going through once the L2 has filled, 3.3 % before)."""
    profile = load_profile("Ascend910B1").override({"l2.writes_through_when_full": through})
    _check_bound("GluBackward", "Ascend910B1", profile, dict(
        gradOut=TensorLayout((50, 80, columns // 2), np.float16), self=TensorLayout((50, 80, columns), np.float16),
        dim=-1))
