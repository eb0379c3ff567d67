"""Every operator declares a tiling search space (OpDef.tiling_space): for calls on several chips,
each candidate is a tiling phase 1 accepts (no 561002) whose plan differs from the default plan
and from every other candidate's; the space is deterministic and bounded; and `ascend-sim tune`
searches it for a small call of each operator."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import simulator
from simulator import aclnn
from simulator.api import TensorLayout
from simulator.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
F16, F32 = np.float16, np.float32
MAX_CANDIDATES = 60


def _conv(go, x, w, stride=(1, 1), padding=(0, 0), groups=1, mask=(True, True, False), dtype=F16):
    return dict(gradOutput=TensorLayout(go, dtype), input=TensorLayout(x, dtype), weight=TensorLayout(w, dtype),
                biasSizes=[go[1]], stride=list(stride), padding=list(padding), dilation=[1] * len(stride),
                transposed=False, outputPadding=[0] * len(stride), groups=groups, outputMask=list(mask),
                cubeMathType=0 if dtype == F16 else 1)


def _tbc(T, B, Cin, Cout, K, pad):
    return dict(self=TensorLayout((T + 2 * pad + 1 - K, B, Cout), F16), input=TensorLayout((T, B, Cin), F16),
                weight=TensorLayout((K, Cin, Cout), F16), bias=TensorLayout((Cout,), F16), pad=pad, cubeMathType=0)


def _grid(N, C, H, W, Ho, Wo, interp=0, dtype=F32):
    return dict(gradOutput=TensorLayout((N, C, Ho, Wo), dtype), input=TensorLayout((N, C, H, W), dtype),
                grid=TensorLayout((N, Ho, Wo, 2), dtype), interpolationMode=interp, paddingMode=0,
                alignCorners=False, outputMask=[True, True])


CALLS = {
    "resnet50 layer3 conv2 (3x3)": ("ConvolutionBackward", _conv((32, 256, 14, 14), (32, 256, 14, 14),
                                                                 (256, 256, 3, 3), padding=(1, 1))),
    "resnet50 layer2 downsample (1x1 s2, batch 4)": ("ConvolutionBackward", _conv((4, 512, 28, 28), (4, 256, 56, 56),
                                                                         (512, 256, 1, 1), stride=(2, 2))),
    "grouped FP32 conv": ("ConvolutionBackward", _conv((2, 48, 9, 9), (2, 24, 9, 9), (48, 8, 3, 3), padding=(1, 1),
                                                       groups=3, dtype=F32)),
    "resnet50 conv1 (gradWeight only)": ("ConvolutionBackward", _conv((32, 64, 112, 112), (32, 3, 224, 224),
                                                                      (64, 3, 7, 7), stride=(2, 2), padding=(3, 3),
                                                                      mask=(False, True, False))),
    "conv_tbc": ("ConvTbcBackward", _tbc(50, 8, 96, 128, 3, 1)),
    "detr encoder level 3": ("GridSampler2DBackward", _grid(32, 32, 13, 19, 20197, 4)),
    "bicubic, odd C": ("GridSampler2DBackward", _grid(2, 37, 9, 11, 6, 5, interp=2)),
    "resnet50 batch norm": ("BatchNorm", dict(input=TensorLayout((8, 256, 14, 14), F16), weight=TensorLayout((256,), F32),
                                              bias=TensorLayout((256,), F32), runningMean=TensorLayout((256,), F32),
                                              runningVar=TensorLayout((256,), F32), training=True, momentum=0.1,
                                              eps=1e-5, saveMean=TensorLayout((256,), F32),
                                              saveInvstd=TensorLayout((256,), F32))),
    "residual add": ("Add", dict(self=TensorLayout((8, 256, 28, 28), F16), other=TensorLayout((8, 256, 28, 28), F16),
                                 alpha=1.0)),
    "bias add (broadcast in UB)": ("Add", dict(self=TensorLayout((8, 256, 28, 28), F16),
                                               other=TensorLayout((256, 1, 1), F16), alpha=1.0)),
}
SOCS = ("Ascend910B1", "Ascend310P3", "Ascend910A")


def _tiling(op, soc, kw, tiling=None):
    return json.dumps(simulator.plan(op, soc, tiling=tiling, **kw).tiling, sort_keys=True)


def test_every_operator_declares_a_tiling_space():
    for name, op in aclnn.REGISTRY.items():
        assert op.tiling_space is not None, f"{name} declares no tiling space"


@pytest.mark.parametrize("soc", SOCS)
@pytest.mark.parametrize("label", CALLS)
def test_each_candidate_is_accepted_and_plans_differently(label, soc):
    op, kw = CALLS[label]
    prof = load_profile(soc)
    try:
        simulator.plan(op, soc, **kw)
    except aclnn.AclnnError:            # the call is not one this chip runs: nothing to search
        assert aclnn.REGISTRY[op].tiling_space(kw, prof) == []
        return
    space = aclnn.REGISTRY[op].tiling_space(kw, prof)
    assert 5 <= len(space) <= MAX_CANDIDATES, (len(space), space)
    assert space == aclnn.REGISTRY[op].tiling_space(kw, prof)          # deterministic
    fields = aclnn.REGISTRY[op].tiling_fields
    plans = {_tiling(op, soc, kw)}
    for cand in space:
        assert set(cand) <= set(fields)
        plans.add(_tiling(op, soc, kw, cand))      # raises AclnnError (561002) if phase 1 refused it
    assert len(plans) == len(space) + 1             # each candidate a plan of its own, none the default's


@pytest.mark.parametrize("soc", SOCS)
@pytest.mark.parametrize("other", [(256, 1, 1), (28,), (8, 256, 1, 1)])
def test_broadcast_candidates_keep_the_operand_in_ub(soc, other):
    """Where the default plan broadcasts an operand in UB (a bias, a row, a per-channel scale), the
    candidates are tiles of its rows and periods, so tune compares in-UB plans: tiles of 512 x 2^k
    elements cut its rows and fell back to copying the operand out, every one of them."""
    kw = dict(self=TensorLayout((8, 256, 28, 28), F16), other=TensorLayout(other, F16), alpha=1.0)
    assert "broadcastInUB" in simulator.plan("Add", soc, **kw).tiling
    space = aclnn.REGISTRY["Add"].tiling_space(kw, load_profile(soc))
    assert len(space) >= 5
    assert all("broadcastInUB" in simulator.plan("Add", soc, tiling=c, **kw).tiling for c in space)


def test_grid_sampler_block_dim_is_applied_and_checked():
    kw = _grid(2, 16, 8, 8, 20, 20)
    assert simulator.plan("GridSampler2DBackward", "Ascend910B1", tiling={"blockDim": 5}, **kw).tiling["blockDim"] == 5
    with pytest.raises(aclnn.AclnnError) as e:
        simulator.plan("GridSampler2DBackward", "Ascend910B1", tiling={"blockDim": 70000}, **kw)
    assert e.value.status == 561002 and "blockDim" in e.value.message


def test_conv_forced_base_k_alone_searches_the_tiles_it_fits():
    """A forced baseK restricts the tile search to the tiles with room for it (rather than
    failing on the first searched tile without)."""
    op, kw = CALLS["resnet50 layer3 conv2 (3x3)"]
    t = simulator.plan(op, "Ascend910B1", tiling={"dxBaseK": 64}, **kw).tiling["gradInput"]
    assert t["baseK"] == 64
    l0a = load_profile("Ascend910B1").core_kind_for("cube")[1].buffers["L0A"]
    assert 2 * -(-t["baseM"] // 16) * 16 * 64 * 2 <= l0a


TUNE_CALLS = {
    "ConvolutionBackward": ["--shape", "gradOutput=1,16,6,6", "--shape", "input=1,8,8,8", "--shape", "weight=16,8,3,3",
                            "--attr", "biasSizes=16", "--attr", "stride=1,1", "--attr", "padding=0,0",
                            "--attr", "dilation=1,1", "--attr", "transposed=false", "--attr", "outputPadding=0,0",
                            "--attr", "groups=1", "--attr", "outputMask=1,1,0", "--attr", "cubeMathType=0"],
    "ConvTbcBackward": ["--shape", "self=6,2,16", "--shape", "input=6,2,8", "--shape", "weight=3,8,16",
                        "--shape", "bias=16", "--attr", "pad=1", "--attr", "cubeMathType=0"],
    "GridSampler2DBackward": ["--shape", "gradOutput=1,16,20,20", "--shape", "input=1,16,5,5", "--shape", "grid=1,20,20,2",
                              "--dtype", "FLOAT", "--attr", "interpolationMode=0", "--attr", "paddingMode=0",
                              "--attr", "alignCorners=false", "--attr", "outputMask=1,1"],
}


@pytest.mark.parametrize("op", TUNE_CALLS)
def test_tune_searches_the_operator_space(op):
    p = subprocess.run([sys.executable, "-m", "simulator.cli", "tune", op, *TUNE_CALLS[op], "--top", "3",
                        "--workers", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "no tiling search space" not in p.stdout + p.stderr
    head = p.stdout.splitlines()[0]
    assert head.startswith(f"tune {op}") and "0 rejected by the planner" in head, p.stdout
    assert sum(line.lstrip().startswith(("#1", "#2", "#3")) for line in p.stdout.splitlines()) == 3, p.stdout
    assert "default" in p.stdout and "best:" in p.stdout
