"""A whole training step: the calls we do not simulate are estimated (a roofline per call from the
chip profile, simulator/studies/estimate.py), kept in the trace (`estimated:`), and replayed beside
the simulated calls; capture counts the step, not its set-up, with our own convolution FLOPs.
The roofline is checked against hand computations from the profiles' published figures, the
capture's FLOPs and bytes against hand counts. Tests that run torch skip without it."""
from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator import studies
from simulator.profile import load_profile
from simulator.studies import EstimatedCall, StudyError

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simulator.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


# ---- the roofline against hand computations ---------------------------------------------------------
# Ascend910B1 (devices/_atlas_a2.yaml, Ascend910B1.yaml): 24 AIC with the Cube, 48 AIV with the vector
# unit, 1850 MHz; Cube 4096 FP16 multiply-adds per cycle; vector 256 B per repeat, vadd 2 cycles per
# repeat; HBM 1600 GB/s nominal, of which a stream gets 95.7 % (Huawei's d2d test); L2 192 MiB at
# 1600 / 0.2222 GB/s; a launch: 1.27 us of gap after the previous kernel and 0.51 us of dispatch,
# each core's start of 755 cycles plus 50 for each other core starting, and 54 cycles of dispatch
# skew per block after the first (msprof's kernel_details of an A2 step, devices/_atlas_a2.yaml).
B1 = dict(aic=24, aiv=48, hz=1850e6, macs=4096, repeat=256, vadd=2, hbm=1600e9, hbm_share=0.957,
          l2_ratio=0.2222, l2_bytes=192 * 2 ** 20, gap=1.27, overhead=0.51, start=755, contention=50, skew=54)


def launch_us(cores: int) -> float:
    """A kernel with no work on every one of `cores` cores, by hand."""
    return B1["gap"] + B1["overhead"] + (B1["start"] + (B1["contention"] + B1["skew"]) * (cores - 1)) / B1["hz"] * 1e6


def test_the_profile_has_the_figures_the_hand_computations_use():
    p = load_profile("Ascend910B1")
    assert (p.cores["aic"].count, p.cores["aiv"].count, p.hz) == (B1["aic"], B1["aiv"], B1["hz"])
    assert p.cube.macs_per_cycle["FLOAT16"] == B1["macs"]
    assert (p.vector.repeat_bytes, p.vector.cycles_per_repeat["add"]) == (B1["repeat"], B1["vadd"])
    assert (p.device_memory.bandwidth_GBps * 1e9, p.device_memory.efficiency, p.l2.miss_bandwidth_ratio,
            p.l2.bytes) == (B1["hbm"], B1["hbm_share"], B1["l2_ratio"], B1["l2_bytes"])
    rt = p.runtime
    assert (rt.launch_gap_us, rt.launch_overhead_us, rt.block_start_cycles, rt.block_start_contention_cycles,
            rt.block_dispatch_cycles) == (B1["gap"], B1["overhead"], B1["start"], B1["contention"], B1["skew"])


@pytest.mark.parametrize("call, compute_us, memory_us, bound", [
    # a 4096^3 FP16 matmul: 2 x 4096^3 FLOPs on 24 x 4096 x 2 x 1.85e9 FLOP/s; 3 x 32 MiB through the L2
    (EstimatedCall("aten.mm", "cube", "FLOAT16", 2 * 4096 ** 3, 3 * 4096 * 4096 * 2),
     2 * 4096 ** 3 / (24 * 4096 * 2 * 1850e6) * 1e6, 3 * 4096 * 4096 * 2 / (1600e9 / 0.2222) * 1e6, "compute"),
    # an FP16 add over 2^27 elements: 3 x 256 MiB, past the L2, streams from HBM (at what a stream gets of
    # it); 128 lanes / 2 cycles on 48 AIV
    (EstimatedCall("aten.add", "vector", "FLOAT16", 2 ** 27, 3 * 2 ** 28),
     2 ** 27 / (48 * 128 / 2 * 1850e6) * 1e6, 3 * 2 ** 28 / (1600e9 * 0.957) * 1e6, "memory"),
    # an FP32 exp-like op over 2^20 elements with 16 operations each: 64 lanes per repeat
    (EstimatedCall("aten.erf", "vector", "FLOAT", 16 * 2 ** 20, 2 * 4 * 2 ** 20),
     16 * 2 ** 20 / (48 * 64 / 2 * 1850e6) * 1e6, 8 * 2 ** 20 / (1600e9 / 0.2222) * 1e6, "compute"),
    # a one-element counter update: the launch is all of it
    (EstimatedCall("aten.add_", "vector", "INT64", 1, 16), 1 / (48 * 32 / 2 * 1850e6) * 1e6,
     16 / (1600e9 / 0.2222) * 1e6, "launch"),
])
def test_roofline_against_a_hand_computation(call, compute_us, memory_us, bound):
    r = studies.roofline(call, load_profile("Ascend910B1"))
    assert r.compute_us == pytest.approx(compute_us, rel=1e-12)
    assert r.memory_us == pytest.approx(memory_us, rel=1e-12)
    assert r.time_us == pytest.approx(max(compute_us, memory_us) + launch_us(B1[call.unit == "cube" and "aic" or "aiv"]),
                                      rel=1e-12)
    assert r.bound == bound


def test_a_dtype_the_cube_lacks_runs_at_its_fp16_rate():
    """Ascend910A's Cube has FP16 and INT8 rates only: an FP32 matmul is priced at FP16's (CANN's
    allow_fp32_to_fp16 there); on 910B1 FLOAT has its own rate, a quarter of FP16's."""
    mm = EstimatedCall("aten.mm", "cube", "FLOAT", 2 * 10 ** 12, 0)
    a = studies.roofline(mm, load_profile("Ascend910A"))
    assert a.rate_dtype == "FLOAT16" and a.compute_us == pytest.approx(2e12 / (32 * 4096 * 2 * 1000e6) * 1e6)
    b = studies.roofline(mm, load_profile("Ascend910B1"))
    assert b.rate_dtype == "FLOAT" and b.compute_us == pytest.approx(2e12 / (24 * 1024 * 2 * 1850e6) * 1e6)


def test_a_profile_what_if_moves_the_estimated_part():
    base = load_profile("Ascend910B1")
    big = EstimatedCall("aten.add", "vector", "FLOAT16", 2 ** 27, 3 * 2 ** 28)       # HBM-bound
    busy = EstimatedCall("aten.erf", "vector", "FLOAT", 16 * 2 ** 20, 8 * 2 ** 20)   # vector-bound
    mm = EstimatedCall("aten.mm", "cube", "FLOAT16", 2 * 4096 ** 3, 3 * 4096 * 4096 * 2)
    half_hbm = base.override({"device_memory.bandwidth_GBps": 800})
    assert studies.roofline(big, half_hbm).memory_us == pytest.approx(2 * studies.roofline(big, base).memory_us)
    assert studies.roofline(mm, half_hbm).time_us == studies.roofline(mm, base).time_us       # compute-bound
    fewer = base.override({"cores.aiv.count": 24, "cores.aic.count": 12})
    assert studies.roofline(busy, fewer).compute_us == pytest.approx(2 * studies.roofline(busy, base).compute_us)
    assert studies.roofline(mm, fewer).compute_us == pytest.approx(2 * studies.roofline(mm, base).compute_us)
    slow_launch = base.override({"runtime.launch_overhead_us": 5.0})
    assert studies.roofline(mm, slow_launch).time_us == pytest.approx(studies.roofline(mm, base).time_us + 5.0 - B1["overhead"])


STEP_TRACE = """\
format: ascend-sim/workload-trace/1
name: small_step
defaults: {dtype: FLOAT16}
calls:
  - {op: SiluBackward, label: act, count: 2, tensors: {gradOutput: [32, 64, 56, 56], self: [32, 64, 56, 56]}}
estimated:
  - {"op": "aten.mm", "label": "fc", "unit": "cube", "dtype": "FLOAT16", "flops": 17179869184, "bytes": 100663296, "shape": [4096, 4096]}
  - {"op": "aten.erf", "label": "busy", "unit": "vector", "dtype": "FLOAT", "flops": 16777216, "bytes": 8388608, "count": 3}
  - {"op": "aten.add", "label": "big", "unit": "vector", "dtype": "FLOAT16", "flops": 134217728, "bytes": 805306368}
"""


@pytest.fixture
def step_trace(tmp_path):
    t = tmp_path / "step.yaml"
    t.write_text(STEP_TRACE)
    return t


def test_a_what_if_moves_both_parts_of_the_step(step_trace):
    w = studies.load_trace(step_trace)
    rows = studies.sweep(w, ["Ascend910B1"], {"cores.aiv.count": [48, 24]}, estimated=True)
    assert [r["kind"] for r in rows] == ["simulated", "estimated", "estimated", "estimated"] * 2
    assert all(r["status"] == "estimated" for r in rows if r["kind"] == "estimated")
    full, half = studies.point_totals(rows)
    assert half["time_us"] > 1.5 * full["time_us"]                      # the SiLU is vector-bound
    busy = [r for r in rows if r["label"] == "busy"]
    assert busy[1]["compute_us"] == pytest.approx(2 * busy[0]["compute_us"])
    # three busy calls twice as long; four vector launches on half the cores, each starting fewer
    assert half["estimated_us"] - full["estimated_us"] == pytest.approx(
        3 * busy[0]["compute_us"] - 4 * (launch_us(48) - launch_us(24)))
    for t in (full, half):
        assert t["step_us"] == pytest.approx(t["time_us"] + t["estimated_us"])
        assert t["simulated_share"] == pytest.approx(t["time_us"] / t["step_us"])
        est = [r for r in rows if r["point"] == t["point"] and r["kind"] == "estimated"]
        assert t["estimated_us"] == pytest.approx(sum(r["time_us"] * r["count"] for r in est))
    # without the estimate the rows are the simulated calls alone, as before
    assert [r["kind"] for r in studies.replay(w, "Ascend910B1")] == ["simulated"]


# ---- the trace keeps the estimated calls -------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".yaml", ".json", ".jsonl"])
def test_estimated_calls_round_trip(step_trace, tmp_path, suffix):
    w = studies.load_trace(step_trace)
    out = studies.save_trace(w, tmp_path / f"again{suffix}")
    back = studies.load_trace(out)
    assert [e.to_record() for e in back.estimated] == [e.to_record() for e in w.estimated]
    assert [c.key() for c in back.calls] == [c.key() for c in w.calls]


def test_write_estimated_leaves_the_calls_and_baselines_as_they_were(tmp_path):
    t = tmp_path / "smoke.yaml"
    t.write_text((TRACES / "resnet50_conv_backward.yaml").read_text())
    w = studies.load_trace(t)
    before = t.read_text()
    w.estimated = w.estimated[:2]
    studies.write_estimated(w)
    after = t.read_text()
    kept = [l for l in before.splitlines() if not l.startswith("  - {\"op\": \"aten.")]
    assert [l for l in after.splitlines() if not l.startswith("  - {\"op\": \"aten.")] == kept
    back = studies.load_trace(t)
    assert len(back.estimated) == 2 and back.baselines == studies.load_trace(TRACES / "resnet50_conv_backward.yaml").baselines


def test_a_trace_without_estimated_calls_still_loads():
    w = studies.load_trace(TRACES / "silu_smoke.jsonl")
    assert w.estimated == [] and len(w.calls) == 5


@pytest.mark.parametrize("entry, needle", [
    ('{"op": "aten.mm", "unit": "tensor", "dtype": "FLOAT16", "flops": 1, "bytes": 1}', "unit"),
    ('{"op": "aten.mm", "unit": "cube", "dtype": "FLOAT16", "flops": -1, "bytes": 1}', "flops"),
    ('{"op": "aten.mm", "unit": "cube", "dtype": "FLOAT17", "flops": 1, "bytes": 1}', "dtype"),
    ('{"op": "aten.mm", "unit": "cube", "dtype": "FLOAT16", "flops": 1}', "bytes"),
    ('{"op": "aten.mm", "unit": "cube", "dtype": "FLOAT16", "flops": 1, "bytes": 1, "speed": 2}', "speed"),
])
def test_a_bad_estimated_call_is_one_line_naming_the_field(tmp_path, entry, needle):
    t = tmp_path / "bad.yaml"
    t.write_text(STEP_TRACE.split("estimated:")[0] + "estimated:\n  - " + entry + "\n")
    with pytest.raises(StudyError, match=needle) as e:
        studies.load_trace(t)
    assert "estimated call 0" in str(e.value) and "\n" not in str(e.value)


# ---- the shipped traces' estimated part, checked against their own simulated calls -------------------
def _conv_macs(call) -> int:
    """N x C_out x H_out x W_out x (C_in / groups) x kh x kw of a ConvolutionBackward call."""
    go, w = call.tensors["gradOutput"].shape, call.tensors["weight"].shape
    n = 1
    for d in (go[0], w[0], *go[2:], *w[1:]):
        n *= d
    return n


def _forward_macs(call) -> int:
    """The same count for a Convolution call, its output size from the convolution formula."""
    x, w = call.tensors["input"].shape, call.tensors["weight"].shape
    a = call.attrs
    n = x[0] * w[0] * w[1]
    for i, k in enumerate(w[2:]):
        n *= (x[2 + i] + 2 * a["padding"][i] - a["dilation"][i] * (k - 1) - 1) // a["stride"][i] + 1
        n *= k
    return n


def test_resnet50s_forward_convolutions_are_the_backward_calls_forward_halves():
    """Every ResNet-50 convolution is simulated forward and backward: the forward calls'
    multiply-adds are those the backward calls' shapes imply, count-weighted, 53 layers each, and
    no convolution is left to the estimate."""
    w = studies.load_trace(TRACES / "resnet50_conv_backward.yaml")
    forward = [c for c in w.calls if c.op == "Convolution"]
    backward = [c for c in w.calls if c.op == "ConvolutionBackward"]
    assert sum(c.count for c in forward) == sum(c.count for c in backward) == 53
    assert sum(_forward_macs(c) * c.count for c in forward) == sum(_conv_macs(c) * c.count for c in backward)
    assert not any(e.op in ("aten.convolution", "aten.convolution_backward") for e in w.estimated)


def test_efficientnets_depthwise_backward_is_counted_with_its_groups():
    """EfficientNet-B0's convolution backward is estimated (its trace simulates the SiLUs): each
    backward is the forward's FLOPs once per gradient it makes, the stem making no input gradient.
    Counting a depthwise weight gradient without its groups would put the backward at ~48x."""
    w = studies.load_trace(TRACES / "efficientnet_b0_silu_backward.yaml")
    fwd = sum(e.flops * e.count for e in w.estimated if e.op == "aten.convolution")
    bwd = sum(e.flops * e.count for e in w.estimated if e.op == "aten.convolution_backward")
    stem = 2 * 32 * 32 * 112 * 112 * 3 * 3 * 3
    assert bwd == 2 * fwd - stem
    assert sum(e.count for e in w.estimated if e.op == "aten.convolution") == 81


# ---- replay and sweep print the step -------------------------------------------------------------
def test_replay_prints_the_step_and_compares_chips(step_trace):
    p = cli("replay", str(step_trace), "--soc", "Ascend910B1", "--soc", "Ascend910A", "--workers", "1",
            "--no-progress", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    rows, steps = out["rows"], out["steps"]
    assert [s["soc"] for s in steps] == ["Ascend910B1", "Ascend910A"]
    for s in steps:
        mine = [r for r in rows if r["soc"] == s["soc"]]
        sim = sum(r["time_us"] * r["count"] for r in mine if r["kind"] == "simulated")
        est = sum(r["time_us"] * r["count"] for r in mine if r["kind"] == "estimated")
        assert s["simulated_us"] == pytest.approx(sim) and s["estimated_us"] == pytest.approx(est)
        assert s["step_us"] == pytest.approx(sim + est) and s["simulated_share"] == pytest.approx(sim / (sim + est))
    text = cli("replay", str(step_trace), "--soc", "Ascend910B1", "--soc", "Ascend910A", "--workers", "1",
               "--no-progress").stdout
    b1 = steps[0]
    assert (f"step on Ascend910B1: simulated {b1['simulated_us']:,.1f} us + estimated {b1['estimated_us']:,.1f} us "
            f"= {b1['step_us']:,.1f} us ({b1['simulated_share']:.1%} simulated)") in text
    assert "where the step's time moves" in text and "aten.mm" in text and "SiluBackward" in text
    assert text.count("  estimated") >= 6                 # every estimated row is labelled, on both chips


def test_a_calls_subset_is_not_the_step(step_trace):
    p = cli("replay", str(step_trace), "--calls", "0", "--workers", "1", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "estimated calls are left out (--calls selects simulated calls)" in p.stdout
    assert "step on" not in p.stdout


def test_sweep_rows_and_plot_carry_the_split(step_trace, tmp_path):
    out = tmp_path / "rows.csv"
    args = ["sweep", str(step_trace), "--param", "device_memory.bandwidth_GBps=800,1600", "-o", str(out),
            "--workers", "1", "--no-progress"]
    if HAVE_MPL:
        args += ["--plot", str(tmp_path / "p.png")]
    p = cli(*args)
    assert p.returncode == 0, p.stderr
    assert "est us" in p.stdout and "step us" in p.stdout
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert {r["kind"] for r in rows} == {"simulated", "estimated"}
    big = [float(r["memory_us"]) for r in rows if r["label"] == "big"]
    assert big[0] == pytest.approx(2 * big[1])                 # 800 GB/s, then 1600
    if HAVE_MPL:
        assert (tmp_path / "p.png").stat().st_size > 0


# ---- capture: the step, not its set-up; FLOPs and bytes against hand counts -----------------------------
@needs_torch
def test_coverage_of_a_small_model_with_a_depthwise_layer_against_a_hand_count():
    import torch
    import simulator
    torch.manual_seed(0)
    with simulator.capture() as cap:
        # set-up inside the block: construction (init), a cast, the input
        m = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1, bias=False), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 2, 1, bias=False)).to(torch.float64)
        x = torch.randn(2, 4, 6, 6, dtype=torch.float64)
        m(x).sum().backward()
    # 2 x N x C_out x H x W x (C_in / groups) x kh x kw per convolution
    fwd = [2 * 2 * 8 * 36 * 4 * 9, 2 * 2 * 8 * 36 * 1 * 9, 2 * 2 * 2 * 36 * 8 * 1]
    # the first layer makes no input gradient (x does not require it): its weight gradient only
    bwd = [fwd[0], 2 * fwd[1], 2 * fwd[2]]
    assert cap.ops["convolution"].flops == sum(fwd)
    assert cap.ops["convolution_backward"].flops == sum(bwd)
    flops_total = sum(s.flops for s in cap.ops.values())
    assert flops_total == sum(fwd) + sum(bwd)
    assert cap.coverage()["flops"] == 1.0          # the forward and backward convolutions are both mapped
    assert cap.coverage({"ConvolutionBackward"})["flops"] == pytest.approx(sum(bwd) / (sum(fwd) + sum(bwd)))
    # the set-up is not the step
    assert {"uniform_", "_to_copy"} <= set(cap.setup) and "uniform_" not in cap.ops and "_to_copy" not in cap.ops
    assert "randn" in cap.setup
    assert cap.no_kernel.get("detach", 0) > 0 and cap.ops["detach"].bytes == 0


@needs_torch
def test_bytes_of_a_tiny_step_against_a_hand_count():
    import torch
    import simulator
    x = torch.randn(2, 3, requires_grad=True)             # FLOAT: 24 bytes
    with simulator.capture() as cap:
        torch.relu(x).sum().backward()
    want = {"relu": 24 + 24,                              # read x, write y
            "sum": 24 + 4,                                # read y, write the scalar
            "ones_like": 4,                               # write the scalar gradient (reads no data)
            "threshold_backward": 4 + 24 + 24}            # the expanded gradient spans one element; y; out
    assert {n: s.bytes for n, s in cap.ops.items() if s.bytes} == want
    assert all(cap.ops[n].bytes == 0 for n in ("detach", "expand"))
    # relu, sum and threshold_backward are mapped (Relu, ReduceSum, ThresholdBackward): their bytes are
    # the simulated share
    assert cap.coverage() == {"flops": 0.0, "bytes": pytest.approx((48 + 28 + 52) / (48 + 28 + 4 + 52))}
    assert sum(e.count for e in cap.estimated) == 1 and all(e.unit == "vector" for e in cap.estimated)
    assert [c.op for c in cap.calls] == ["Relu", "ReduceSum", "ThresholdBackward"]


@needs_torch
def test_capture_writes_the_estimated_part_into_the_trace(tmp_path):
    import torch
    import simulator
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.SiLU(), torch.nn.Linear(32, 4), torch.nn.Tanh())
    x = torch.randn(8, 16)
    with simulator.capture() as cap:
        m(x).sum().backward()
    back = studies.load_trace(cap.save(tmp_path / "t.yaml"))
    assert [c.op for c in back.calls if c.op.startswith("Silu")] == ["Silu", "SiluBackward"]
    # the Linear layers' addmm and the backward's mm are simulated, so no matmul is estimated
    assert {c.op for c in back.calls} == {"Silu", "SiluBackward", "ReduceSum", "Mm", "Addmm"}
    assert cap.ops["addmm"].flops == 2 * (8 * 16 * 32 + 8 * 32 * 4) and not [e for e in back.estimated if e.unit == "cube"]
    estimated = {e.op for e in back.estimated}
    assert {"aten.tanh", "aten.tanh_backward"} <= estimated and not {"aten.silu", "aten.mm", "aten.addmm"} & estimated
    assert "estimated" in cap.summary() and "set-up" not in cap.summary()


@needs_torch
@pytest.mark.parametrize("name", ["resnet50_conv_backward", "fconv_wmt_en_de_conv_tbc_backward"])
def test_shipped_estimated_part_is_the_capture_of_the_model(name):
    sys.path.insert(0, str(TRACES))
    import torch_models
    w, cap = torch_models.step_workload(name)
    shipped = studies.load_trace(TRACES / f"{name}.yaml")
    assert [e.to_record() for e in w.estimated] == [e.to_record() for e in shipped.estimated]
    assert sum(s.calls for s in cap.setup.values()) > 0 and not any(n in cap.ops for n in ("uniform_", "normal_"))


def test_a_chip_that_refuses_a_simulated_call_says_its_step_is_not_whole(step_trace):
    """The Atlas inference chip 310P3 has no SiluBackward (CANN refuses it with 161002): its step
    names what it leaves out, and the comparison does not set its partial total against a whole one."""
    p = cli("replay", str(step_trace), "--soc", "Ascend910B1", "--soc", "Ascend310P3", "--workers", "1",
            "--no-progress")
    assert p.returncode == 1, p.stderr
    assert ("left out: 2 call(s) of SiluBackward not supported on Ascend310P3 (rejected 161002, as CANN "
            "refuses them)") in p.stdout
    total = next(l for l in p.stdout.splitlines() if l.startswith("step ") and "total" in l)
    assert total.rstrip().endswith("- *") and "not the whole step" in p.stdout


@needs_torch
def test_conv_tbc_flops_against_a_hand_count():
    import torch
    import simulator
    x = torch.randn(5, 2, 3, requires_grad=True)           # T=5, B=2, C_in=3
    w = torch.randn(3, 3, 4, requires_grad=True)           # k=3, C_in=3, C_out=4
    b = torch.zeros(4, requires_grad=True)
    with simulator.capture() as cap:
        torch.conv_tbc(x, w, b, 1).sum().backward()
    fwd = 2 * 5 * 2 * 3 * 4 * 3                            # T_out = 5 + 2 x 1 - 3 + 1 = 5
    assert cap.ops["conv_tbc"].flops == fwd
    assert cap.ops["conv_tbc_backward"].flops == 2 * fwd    # input and weight gradients
    (call,) = [c for c in cap.calls if c.op == "ConvTbcBackward"]
    assert [c.op for c in cap.calls if c.op.startswith("ConvTbc")] == ["ConvTbc", "ConvTbcBackward"]
    assert "mm" not in cap.ops          # its parts are its own
    assert cap.coverage()["flops"] == pytest.approx(1.0)
