"""Cycle lower bounds from the chips' published figures, independent of the cost model's counters.

The report's own roofline (tests/test_studies.py, test_no_call_beats_its_roofline) is built from
what the model says it moved and computed, so a model that forgets work passes it. These bounds
use only the call's shapes and the profile's published figures (clock, device-memory bandwidth,
L2 size, Cube MACs per cycle per core, core counts, the vector unit's repeat width):

* device memory: the L2 starts cold, so every input byte that the result depends on crosses the
  device-memory channel at least once; the L2 is write-back, so outputs need cross it only for
  the part that cannot stay in the L2 (output bytes beyond its capacity).
      cycles >= (inputs + max(0, outputs - L2 bytes)) / (bandwidth / clock)
* Cube: gradInput and gradWeight each need one multiply-accumulate per (output element, valid
  kernel tap, input channel): taps that land in the padding multiply zeros and are not counted.
  At the chip's fastest floating-point Cube rate (the largest macs_per_cycle other than INT8, so
  the bound holds whatever cubeMathType lets the kernel use) on every cube core:
      cycles >= MACs / (macs_per_cycle x cube cores)
* vector (SiluBackward): each element of gradInput needs at least one vector lane-operation, at
  most repeat_bytes per cycle per vector core (one repeat a cycle, the fastest class).

Simulated cycles must be at least each bound, and at most SLACK times the tightest one. SLACK is
generous on purpose: the bounds leave out the launch overhead (2 us, ~3700 cycles on a 910B1),
transfer latencies, the kernels' relayouts (ND->NZ, NC1HWC0: an operand reread and rewritten),
the Cube's 16x16x16 fractals (a dimension that is not a multiple of 16 is padded), imbalance
between cores and the vector work of a Cube operator. On the shapes below the simulated cycles
are 1.2-28x the tightest bound (measured: SiluBackward 1.2-4.8x, the Cube operators 2.7-28x, the
most ConvTbcBackward kernel 3 on Ascend910A), so SLACK = 40 tolerates these overheads and fails
a gross slow-down (an order of magnitude, on all but that worst shape).

GridSampler2DBackward's work is per sampled point (address arithmetic, four scattered taps per
channel), a rate no profile publishes; its device-memory bound is a true floor but sits 160-500x
below the simulated cycles on small shapes, so its upper check (GRID_SLACK) only catches a
model gone wild, not a drift.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import simulator
from simulator import TensorLayout

SLACK = 40.0
GRID_SLACK = 2000.0
F16, F32 = np.float16, np.float32


def _bytes(*layouts: TensorLayout) -> int:
    return sum(int(np.prod(t.shape)) * t.dtype.itemsize for t in layouts)


def memory_bound(profile, inputs: int, outputs: int) -> float:
    bytes_per_cycle = profile.device_memory.bandwidth_GBps * 1e9 / (profile.clock_mhz * 1e6)
    return (inputs + max(0, outputs - profile.l2.bytes)) / bytes_per_cycle


def cube_bound(profile, macs: int) -> float:
    _, cube = profile.core_kind_for("cube")
    rate = max(v for k, v in profile.cube.macs_per_cycle.items() if k != "INT8")
    return macs / (rate * cube.count)


def valid_taps(size: int, out: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """Pairs (output position, kernel tap) whose input position lies inside the tensor."""
    return sum(1 for o in range(out) for k in range(kernel) if 0 <= o * stride - pad + k * dilation < size)


def check(profile, cycles: float, bounds: dict[str, float], slack: float = SLACK):
    for name, bound in bounds.items():
        assert cycles >= bound, f"{profile.soc_version}: {cycles:.0f} cycles beat the {name} bound {bound:.0f}"
    tight = max(bounds.values())
    assert cycles <= slack * tight, (f"{profile.soc_version}: {cycles:.0f} cycles are "
                                     f"{cycles / tight:.1f}x the tightest bound {tight:.0f} ({bounds})")


# ---- ConvolutionBackward ----------------------------------------------------------------------
CONV_SHAPES = {       # N, Cin, Cout, H, W, kernel, stride, pad
    "3x3-28x28": (8, 64, 64, 28, 28, 3, 1, 1),
    "1x1-256to64-14x14": (16, 256, 64, 14, 14, 1, 1, 0),
    "3x3-stride2-28x28": (8, 64, 128, 28, 28, 3, 2, 1),
    "1x1-56x56-memory": (8, 32, 32, 56, 56, 1, 1, 0),
}


@pytest.mark.parametrize("shape, soc", [
    ("3x3-28x28", "Ascend910B1"), ("3x3-28x28", "Ascend310P3"),
    ("1x1-256to64-14x14", "Ascend910A"), ("1x1-256to64-14x14", "Ascend910B4"),
    ("3x3-stride2-28x28", "Ascend910B2"), ("3x3-stride2-28x28", "Ascend910A"),
    ("1x1-56x56-memory", "Ascend910B3"), ("1x1-56x56-memory", "Ascend310P3"),
])
def test_convolution_backward_respects_memory_and_cube_bounds(shape, soc):
    n, cin, cout, h, w, k, s, p = CONV_SHAPES[shape]
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    go = TensorLayout((n, cout, ho, wo), F16)
    x = TensorLayout((n, cin, h, w), F16)
    wt = TensorLayout((cout, cin, k, k), F16)
    profile = simulator.load_profile(soc)
    r = simulator.run("ConvolutionBackward", soc, mode="timing", trace=False, gradOutput=go, input=x,
                      weight=wt, biasSizes=[cout], stride=[s, s], padding=[p, p], dilation=[1, 1],
                      transposed=False, outputPadding=[0, 0], groups=1,
                      outputMask=[True, True, False], cubeMathType=0)
    taps = valid_taps(h, ho, k, s, p, 1) * valid_taps(w, wo, k, s, p, 1)
    macs = 2 * n * cout * cin * taps                 # gradInput and gradWeight
    check(profile, r.cycles, {
        "device-memory": memory_bound(profile, _bytes(go, x, wt), _bytes(x, wt)),
        "Cube": cube_bound(profile, macs)})


def test_valid_taps_counts_what_a_direct_loop_counts():
    """The tap count against a brute-force walk over a padded 1-D signal."""
    for size, kernel, stride, pad, dil in [(7, 3, 1, 1, 1), (56, 7, 2, 3, 1), (10, 3, 2, 0, 2), (5, 5, 1, 2, 1)]:
        out = (size + 2 * pad - dil * (kernel - 1) - 1) // stride + 1
        padded = np.zeros(size + 2 * pad, bool)
        padded[pad:pad + size] = True
        want = sum(int(padded[o * stride + t * dil]) for o in range(out) for t in range(kernel))
        assert valid_taps(size, out, kernel, stride, pad, dil) == want


# ---- ConvTbcBackward --------------------------------------------------------------------------
TBC_SHAPES = {        # T, B, Cin, Cout, K, pad
    "k3-256to512": (50, 8, 256, 512, 3, 1),
    "k1-512to1024": (50, 16, 512, 1024, 1, 0),
}


@pytest.mark.parametrize("shape, soc", [("k3-256to512", "Ascend910A"), ("k1-512to1024", "Ascend910B3")])
def test_conv_tbc_backward_respects_memory_and_cube_bounds(shape, soc):
    t, b, cin, cout, k, pad = TBC_SHAPES[shape]
    to = t + 2 * pad - k + 1
    go = TensorLayout((to, b, cout), F16)
    x = TensorLayout((t, b, cin), F16)
    wt = TensorLayout((k, cin, cout), F16)
    bias = TensorLayout((cout,), F16)
    profile = simulator.load_profile(soc)
    r = simulator.run("ConvTbcBackward", soc, mode="timing", trace=False, self=go, input=x, weight=wt,
                      bias=bias, pad=pad, cubeMathType=0)
    macs = 2 * b * cout * cin * valid_taps(t, to, k, 1, pad, 1)
    check(profile, r.cycles, {
        "device-memory": memory_bound(profile, _bytes(go, x, wt), _bytes(x, wt, bias)),
        "Cube": cube_bound(profile, macs)})


# ---- GridSampler2DBackward --------------------------------------------------------------------
GRID_SHAPES = {       # N, C, H_in, W_in, H_out, W_out
    "2x32-32x32-to-32x32": (2, 32, 32, 32, 32, 32),
    "1x16-64x64-to-32x48": (1, 16, 64, 64, 32, 48),
}


@pytest.mark.parametrize("shape, soc", [("2x32-32x32-to-32x32", "Ascend910B1"),
                                        ("1x16-64x64-to-32x48", "Ascend910A")])
def test_grid_sampler_2d_backward_respects_the_memory_bound(shape, soc):
    """gradOutput and grid are read whole (every element enters a result); `input` only where the
    grid samples it, so it is left out; gradInput and gradGrid are written."""
    n, c, hi, wi, ho, wo = GRID_SHAPES[shape]
    go = TensorLayout((n, c, ho, wo), F32)
    x = TensorLayout((n, c, hi, wi), F32)
    grid = TensorLayout((n, ho, wo, 2), F32)
    profile = simulator.load_profile(soc)
    r = simulator.run("GridSampler2DBackward", soc, mode="timing", trace=False, gradOutput=go, input=x,
                      grid=grid, interpolationMode=0, paddingMode=0, alignCorners=False,
                      outputMask=[True, True])
    check(profile, r.cycles, {"device-memory": memory_bound(profile, _bytes(go, grid), _bytes(x, grid))},
          slack=GRID_SLACK)


# ---- SiluBackward ----------------------------------------------------------------------------
@pytest.mark.parametrize("n, soc, dtype", [(1 << 20, "Ascend910B1", F16), (1 << 20, "Ascend910B1", F32),
                                           (1 << 20, "Ascend910A", F16), (3 << 20, "Ascend910B4", F32)])
def test_silu_backward_respects_memory_and_vector_bounds(n, soc, dtype):
    go, x = TensorLayout((n,), dtype), TensorLayout((n,), dtype)
    profile = simulator.load_profile(soc)
    r = simulator.run("SiluBackward", soc, mode="timing", trace=False, gradOutput=go, self=x)
    _, vec = profile.core_kind_for("vector")
    lanes_per_cycle = profile.vector.repeat_bytes / np.dtype(dtype).itemsize * vec.count
    check(profile, r.cycles, {"device-memory": memory_bound(profile, _bytes(go, x), _bytes(x)),
                              "vector": math.ceil(n / lanes_per_cycle)})


# ---- BatchNorm / BatchNormBackward -------------------------------------------------------------
@pytest.mark.parametrize("op, soc, shape", [("BatchNorm", "Ascend910B1", (32, 64, 56, 56)),
                                            ("BatchNorm", "Ascend910A", (32, 256, 28, 28)),
                                            ("BatchNormBackward", "Ascend910B1", (32, 128, 28, 28)),
                                            ("BatchNormBackward", "Ascend910A", (16, 512, 14, 14))])
def test_batch_norm_respects_memory_and_vector_bounds(op, soc, shape):
    """Training: every input element is read at least once (the statistics need all of it before
    the first output), and each output element takes at least one vector lane-operation."""
    c = shape[1]
    x, v = TensorLayout(shape, F16), TensorLayout((c,), F32)
    profile = simulator.load_profile(soc)
    if op == "BatchNorm":
        r = simulator.run(op, soc, mode="timing", trace=False, input=x, weight=v, bias=v, runningMean=v, runningVar=v,
                          training=True, momentum=0.1, eps=1e-5, saveMean=v, saveInvstd=v)
        reads, writes = _bytes(x), _bytes(x)
    else:
        r = simulator.run(op, soc, mode="timing", trace=False, gradOut=x, input=x, weight=v, saveMean=v,
                          saveInvstd=v, training=True, eps=1e-5, outputMask=[True, True, True])
        reads, writes = 2 * _bytes(x), _bytes(x)
    _, vec = profile.core_kind_for("vector")
    lanes_per_cycle = profile.vector.repeat_bytes / 2 * vec.count
    check(profile, r.cycles, {"device-memory": memory_bound(profile, reads, writes),
                              "vector": math.ceil(int(np.prod(shape)) / lanes_per_cycle)})


# ---- Glu / GluBackward -------------------------------------------------------------------------
@pytest.mark.parametrize("op, soc, shape, dtype", [("Glu", "Ascend910B1", (50, 80, 2048), F16),
                                                   ("Glu", "Ascend910A", (64, 4096), F32),
                                                   ("GluBackward", "Ascend910B1", (50, 80, 2048), F16),
                                                   ("GluBackward", "Ascend310P3", (64, 4096), F32)])
def test_glu_respects_memory_and_vector_bounds(op, soc, shape, dtype):
    """self is read at least once and the output written; each output element takes at least one
    vector lane-operation (the sigmoid alone takes four)."""
    x = TensorLayout(shape, dtype)
    half = TensorLayout(shape[:-1] + (shape[-1] // 2,), dtype)
    profile = simulator.load_profile(soc)
    if op == "Glu":
        r = simulator.run(op, soc, mode="timing", trace=False, self=x, dim=-1)
        reads, writes, outs = _bytes(x), _bytes(half), int(np.prod(half.shape))
    else:
        r = simulator.run(op, soc, mode="timing", trace=False, gradOut=half, self=x, dim=-1)
        reads, writes, outs = _bytes(x, half), _bytes(x), int(np.prod(shape))
    _, vec = profile.core_kind_for("vector")
    lanes_per_cycle = profile.vector.repeat_bytes / np.dtype(dtype).itemsize * vec.count
    check(profile, r.cycles, {"device-memory": memory_bound(profile, reads, writes),
                              "vector": math.ceil(outs / lanes_per_cycle)})


# ---- ReduceSum / Mean ----------------------------------------------------------------------------
@pytest.mark.parametrize("op, soc, shape, dims", [("Mean", "Ascend910B1", (32, 1152, 7, 7), [2, 3]),
                                                  ("ReduceSum", "Ascend910A", (32, 96, 112, 112), [2, 3]),
                                                  ("ReduceSum", "Ascend910B4", (64, 512, 256), [0]),
                                                  ("Mean", "Ascend310P3", (4096, 4096), [])])
def test_reductions_respect_memory_and_vector_bounds(op, soc, shape, dims):
    """Every input element is read once and takes at least one FP32 lane-operation (the adds or
    the vcadd); FLOAT16 input."""
    from simulator.enums import aclDataType
    x = TensorLayout(shape, F16)
    profile = simulator.load_profile(soc)
    names = ("dim", "keepDim") if op == "Mean" else ("dims", "keepDims")
    r = simulator.run(op, soc, mode="timing", trace=False, self=x, dtype=int(aclDataType.ACL_FLOAT16),
                      **{names[0]: dims, names[1]: True})
    _, vec = profile.core_kind_for("vector")
    lanes_per_cycle = profile.vector.repeat_bytes / 4 * vec.count
    check(profile, r.cycles, {"device-memory": memory_bound(profile, _bytes(x), 0),
                              "vector": math.ceil(int(np.prod(shape)) / lanes_per_cycle)})


# ---- Mm ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("soc, mnk", [("Ascend910B1", (2048, 2048, 2048)), ("Ascend910A", (1024, 4096, 1024)),
                                      ("Ascend910B4", (4096, 256, 4096)), ("Ascend310P3", (512, 512, 512))])
def test_mm_respects_memory_and_cube_bounds(soc, mnk):
    """FLOAT16: the Cube's peak over its cores, and every operand read once and the output written."""
    M, N, K = mnk
    a, b, c = TensorLayout((M, K), F16), TensorLayout((K, N), F16), TensorLayout((M, N), F16)
    profile = simulator.load_profile(soc)
    r = simulator.run("Mm", soc, mode="timing", trace=False, self=a, mat2=b, cubeMathType=0)
    check(profile, r.cycles, {"device-memory": memory_bound(profile, _bytes(a, b), _bytes(c)),
                              "cube": cube_bound(profile, M * N * K)})


@pytest.mark.parametrize("soc, mnk", [("Ascend910B1", (2048, 1000, 2048)), ("Ascend910A", (256, 1000, 2048)),
                                      ("Ascend310P3", (512, 512, 512))])
def test_addmm_respects_memory_and_cube_bounds(soc, mnk):
    """FLOAT16 with a bias row: the Cube's peak, and mat1, mat2, the bias and out each moved once."""
    M, N, K = mnk
    s, a, b, c = (TensorLayout(x, F16) for x in ((N,), (M, K), (K, N), (M, N)))
    profile = simulator.load_profile(soc)
    r = simulator.run("Addmm", soc, mode="timing", trace=False, self=s, mat1=a, mat2=b, beta=1.0, alpha=1.0,
                      cubeMathType=0)
    check(profile, r.cycles, {"device-memory": memory_bound(profile, _bytes(s, a, b), _bytes(c)),
                              "cube": cube_bound(profile, M * N * K)})


@pytest.mark.parametrize("soc, shape, dtype", [("Ascend910B1", (8, 64, 112, 112), F16),
                                               ("Ascend910B4", (4, 128, 56, 56), F32)])
def test_max_pool_respects_memory_and_vector_bounds(soc, shape, dtype):
    """3x3, stride 2, pad 1 (ResNet's stem): self read once, out and INT64 indices written once;
    each output compared once per tap (one lane a cycle per vector lane of the core's width)."""
    N, C, H, W = shape
    Ho, Wo = (H - 1) // 2 + 1, (W - 1) // 2 + 1
    x, out, idx = TensorLayout(shape, dtype), TensorLayout((N, C, Ho, Wo), dtype), TensorLayout((N, C, Ho, Wo), np.int64)
    profile = simulator.load_profile(soc)
    r = simulator.run("MaxPool2dWithIndices", soc, mode="timing", trace=False, self=x, kernelSize=[3, 3],
                      stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceilMode=False, out=out, indices=idx)
    _, kind = profile.core_kind_for("vector")
    lanes_per_cycle = kind.count * profile.vector.repeat_bytes // 4
    check(profile, r.cycles, {"device-memory": memory_bound(profile, _bytes(x), _bytes(out, idx)),
                              "vector": math.ceil(N * C * Ho * Wo * 9 / lanes_per_cycle)})


def test_max_pool_backward_respects_memory_and_vector_bounds():
    """gradOutput and indices read once, gradInput zeroed and written once; per tap each output
    compared once."""
    soc, (N, C, H, W) = "Ascend910B1", (8, 64, 112, 112)
    go, idx = TensorLayout((N, C, 56, 56), F32), TensorLayout((N, C, 56, 56), np.int32)
    x = TensorLayout((N, C, H, W), F32)
    profile = simulator.load_profile(soc)
    r = simulator.run("MaxPool2dWithIndicesBackward", soc, mode="timing", trace=False, gradOutput=go, self=x,
                      indices=idx, kernelSize=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceilMode=False)
    _, kind = profile.core_kind_for("vector")
    lanes_per_cycle = kind.count * profile.vector.repeat_bytes // 4
    check(profile, r.cycles, {"device-memory": memory_bound(profile, _bytes(go, idx), 2 * _bytes(x)),
                              "vector": math.ceil(N * C * 56 * 56 * 9 / lanes_per_cycle)})
