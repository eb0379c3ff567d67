"""Every default plan fits (issue 11): the planners pick tiles that fit the profile they are given,
including what-if profiles with smaller buffers, and say 561002 only when no tiling can.

Random calls of the four operators on random chips whose L1 / L0A / L0B / L0C / UB are shrunk by
what-ifs (as `--set cores.aic.buffers.L1=/4` does) must either run and give the right numbers
(the float64 references) or be refused with 561002; a refusal is checked by forcing the smallest
tiling the operator has: if that runs, the default planner gave up on a call it could have
planned. Never a kernel fault, never an internal error."""
from __future__ import annotations

import numpy as np
import pytest

import simulator
from simulator.enums import AclnnError, KernelError
from simulator.studies import make_profile
from conv_reference import conv_backward
from test_conv_random import draw_case, _data
from test_convolution_backward import assert_close, compute_dtype
from conftest import assert_silu_close

TILING_ERROR = 561002
CUBE_KIND = {"Ascend910A": "aicore", "Ascend310P3": "aicore", "Ascend910B1": "aic", "Ascend910B4": "aic"}
VEC_KIND = {"Ascend910A": "aicore", "Ascend310P3": "aicore", "Ascend910B1": "aiv", "Ascend910B4": "aiv"}
N_CASES = 48


def shrunk_profile(soc: str, rng) -> tuple:
    """The chip with each on-chip buffer divided at random (L1 / L0 by up to 16, UB by up to 32)."""
    sets = {}
    for buf in ("L1", "L0A", "L0B", "L0C"):
        sets[f"cores.{CUBE_KIND[soc]}.buffers.{buf}"] = f"/{int(rng.choice([1, 2, 4, 8, 16]))}"
    sets[f"cores.{VEC_KIND[soc]}.buffers.UB"] = f"/{int(rng.choice([1, 2, 4, 8, 16, 32]))}"
    return make_profile(soc, sets), sets


def _conv_call(c):
    x, w, dy = _data(c)
    return dict(gradOutput=dy, input=x, weight=w, biasSizes=[c["cout"]], stride=list(c["stride"]),
                padding=list(c["padding"]), dilation=list(c["dilation"]), transposed=c["transposed"],
                outputPadding=list(c["opad"]), groups=c["groups"], outputMask=list(c["mask"]),
                cubeMathType=c["cm"])


SMALLEST = {"ConvolutionBackward": {"baseM": 16, "baseN": 16, "baseK": 16, "doubleBuffer": False},
            "SiluBackward": {"tileLength": 64},
            "GridSampler2DBackward": {"pointsPerTile": 16, "channelsPerChunk": 8}}


def _run_or_refuse(op, profile, kw, sets):
    try:
        return simulator.run(op, profile=profile, **kw)
    except AclnnError as e:
        assert e.status == TILING_ERROR, (sets, e.message)
        try:
            simulator.run(op, profile=profile, mode="timing", tiling=SMALLEST[op], **kw)
        except AclnnError as e2:
            assert e2.status == TILING_ERROR, (sets, e2.message)
            return None
        pytest.fail(f"{op} refused its default plan on {sets} ({e.message}) but {SMALLEST[op]} runs")
    except KernelError as e:
        pytest.fail(f"{op} faulted on {sets}: {e}")


@pytest.mark.parametrize("seed", range(N_CASES))
def test_conv_default_plan_fits_shrunk_buffers(seed):
    c = draw_case(50_000 + seed)
    rng = np.random.default_rng(seed)
    profile, sets = shrunk_profile(c["soc"], rng)
    kw = _conv_call(c)
    res = _run_or_refuse("ConvolutionBackward", profile, kw, sets)
    if res is None:
        return
    args = (c["stride"], c["padding"], c["dilation"], c["groups"], c["transposed"], list(c["opad"]), c["mask"])
    ref = conv_backward(kw["gradOutput"], kw["input"], kw["weight"], *args)
    absref = conv_backward(*(np.abs(kw[n].astype(np.float64)) for n in ("gradOutput", "input", "weight")), *args)
    comp = compute_dtype(c["series"], (kw["gradOutput"].dtype, kw["input"].dtype, kw["weight"].dtype), c["cm"])
    for i, name in enumerate(("gradInput", "gradWeight", "gradBias")):
        if c["mask"][i]:
            assert_close(res.outputs[name], ref[i], absref[i], comp if i < 2 else "FLOAT", name)


@pytest.mark.parametrize("seed", range(12))
def test_silu_default_plan_fits_shrunk_buffers(seed):
    rng = np.random.default_rng(seed)
    soc = ("Ascend910A", "Ascend910B1", "Ascend910B4")[seed % 3]     # 310P3 has no SiluBackward
    profile, sets = shrunk_profile(soc, rng)
    dt = np.float16 if seed % 2 else np.float32
    x = rng.uniform(-6, 6, int(rng.integers(1, 200_000))).astype(dt)
    g = rng.standard_normal(x.shape).astype(dt)
    res = _run_or_refuse("SiluBackward", profile, dict(gradOutput=g, self=x), sets)
    if res is not None:
        assert_silu_close(res.outputs["gradInput"], g, x)


@pytest.mark.parametrize("seed", range(12))
def test_grid_sampler_default_plan_fits_shrunk_buffers(seed):
    from test_grid_sampler_2d_backward import assert_close as grid_close
    rng = np.random.default_rng(100 + seed)
    soc = ("Ascend910A", "Ascend910B1", "Ascend910B4")[seed % 3]
    profile, sets = shrunk_profile(soc, rng)
    N, C, H, W, Ho, Wo = (int(v) for v in rng.integers(1, [3, 200, 12, 12, 9, 9]))
    interp = int(rng.integers(0, 3 if soc != "Ascend910A" else 2))
    pad, align = int(rng.integers(0, 3)), bool(rng.integers(0, 2))
    go = rng.standard_normal((N, C, Ho, Wo)).astype(np.float32)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    g = rng.uniform(-1.2, 1.2, (N, Ho, Wo, 2)).astype(np.float32)
    kw = dict(gradOutput=go, input=x, grid=g, interpolationMode=interp, paddingMode=pad, alignCorners=align,
              outputMask=[True, True])
    res = _run_or_refuse("GridSampler2DBackward", profile, kw, sets)
    if res is not None:
        grid_close(res, go, x, g, interp, pad, align, what=str(sets))


def test_a_refusal_says_what_does_not_fit():
    """L0C shrunk to 512 B: not even a 16 x 16 FP32 tile fits; the message names the buffer."""
    profile = make_profile("Ascend910B1", {"cores.aic.buffers.L0C": 512})
    c = draw_case(2)
    with pytest.raises(AclnnError) as e:
        simulator.run("ConvolutionBackward", profile=profile, mode="timing", **_conv_call(c))
    assert e.value.status == TILING_ERROR and "L0C" in e.value.message


def _trace_calls():
    from pathlib import Path
    from simulator.studies import load_trace
    out = []
    for path in sorted(Path(__file__).parent.parent.joinpath("traces").glob("*.*")):
        if path.suffix not in (".yaml", ".yml", ".json", ".jsonl"):
            continue
        for i, call in enumerate(load_trace(path).calls):
            out.append((path.name, i, call))
    return out


@pytest.mark.parametrize("soc", ["Ascend910A", "Ascend310P3", "Ascend910B1", "Ascend910B4"])
def test_every_shipped_trace_call_plans_on_every_chip(soc):
    """Phase 1 of every call of every shipped trace (the encoder calls that take minutes to run
    included): planned, or refused only because the chip's series lacks the operator or dtype."""
    from simulator.profile import load_profile
    prof = load_profile(soc)
    refused = []
    for name, i, call in _trace_calls():
        support = prof.supports(call.op)
        if support is None:
            continue
        try:
            simulator.plan(call.op, profile=prof, **_shapes_only(call))
        except AclnnError as e:
            if e.status == 161002 and "dtype" in e.message:
                continue
            refused.append(f"{name} call {i} ({call.label}): {e}")
    assert not refused, "\n".join(refused)


def _shapes_only(call):
    """The call's arguments with zero-filled tensors (calloc: no memory is touched)."""
    from simulator.studies import light_inputs
    return {k: (np.zeros(v.shape, v.dtype) if isinstance(v, np.ndarray) else v)
            for k, v in light_inputs(call).items()}
