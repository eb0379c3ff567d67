"""The tiling contract, the same for every operator (issue 11): a forced tiling field the operator
does not declare, or a value of the wrong kind, is ACLNN_ERR_INNER_TILING_ERROR (561002) with a
message naming the field; a declared field with a sensible value is applied (the plan changes:
block counts, tile counts, instructions and cycles, not only the report's echo of the field); a
forced tiling that cannot fit is 561002 saying what does not fit."""
from __future__ import annotations

import numpy as np
import pytest

import simulator
from simulator import aclnn
from simulator.enums import AclnnError

TILING_ERROR = 561002


def _silu():
    x = np.linspace(-3, 3, 2048, dtype=np.float32).reshape(2, 1024)
    return dict(gradOutput=np.ones_like(x), self=x)


def _conv():
    rng = np.random.default_rng(0)
    return dict(gradOutput=rng.standard_normal((1, 4, 6, 6)).astype(np.float16),
                input=rng.standard_normal((1, 3, 8, 8)).astype(np.float16),
                weight=rng.standard_normal((4, 3, 3, 3)).astype(np.float16), biasSizes=[4], stride=[1, 1],
                padding=[0, 0], dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=1,
                outputMask=[True, True, False], cubeMathType=1)


def _tbc():
    rng = np.random.default_rng(1)
    return dict(self=rng.standard_normal((32, 8, 6)).astype(np.float16),
                input=rng.standard_normal((32, 8, 4)).astype(np.float16),
                weight=rng.standard_normal((3, 4, 6)).astype(np.float16),
                bias=rng.standard_normal((6,)).astype(np.float16), pad=1, cubeMathType=1)


def _grid():
    rng = np.random.default_rng(2)
    return dict(gradOutput=rng.standard_normal((1, 40, 5, 7)).astype(np.float32),
                input=rng.standard_normal((1, 40, 6, 6)).astype(np.float32),
                grid=rng.uniform(-1, 1, (1, 5, 7, 2)).astype(np.float32), interpolationMode=0, paddingMode=0,
                alignCorners=False, outputMask=[True, True])


OPS = {"SiluBackward": _silu, "ConvolutionBackward": _conv, "ConvTbcBackward": _tbc,
       "GridSampler2DBackward": _grid}
# a declared field and a value that works, per operator, with the report's tiling key it shows in
APPLIED = {"SiluBackward": ({"tileLength": 256}, lambda t: t["tileLength"] == 256),
           "ConvolutionBackward": ({"dxBaseM": 32}, lambda t: t["gradInput"]["baseM"] == 32),
           "ConvTbcBackward": ({"blockDim": 1}, lambda t: t["blockDim"] == 1),
           "GridSampler2DBackward": ({"pointsPerTile": 16, "channelsPerChunk": 16},
                                     lambda t: t["pointsPerTile"] == 16 and t["channelsPerChunk"] == 16)}


def _launch(report, name_part: str) -> dict:
    (launch,) = [la for la in report.to_dict()["launches"] if name_part in la["name"]]
    return launch


# What the forced field must do to the plan, beyond showing in the report, on the calls of OPS
# (default, forced): the consequence each field exists for, counted independently of the echo.
PLAN_CHANGES = {
    # 2048 elements in one block: one tile by default, 2048 / 256 = 8 tiles forced, each a copy
    # in, the vector work and a copy out (more than 4x the instructions leaves room for a prologue)
    "SiluBackward": lambda d, f: (d.report.tiling["blockLength"] == f.report.tiling["blockLength"] == 2048
                                  and d.report.tiling["tileLength"] == 2048
                                  and f.report.instructions > 4 * d.report.instructions),
    # a smaller gradInput baseM: more M units of work, so the Cube launch spreads over more blocks
    "ConvolutionBackward": lambda d, f: (f.report.tiling["gradInput"]["units"]
                                         > d.report.tiling["gradInput"]["units"]
                                         and _launch(f.report, "Cube: GradInput")["block_dim"]
                                         > _launch(d.report, "Cube: GradInput")["block_dim"]),
    # blockDim 1: each gradient's Cube launch runs on one core, where the default spread
    # gradInput over more
    "ConvTbcBackward": lambda d, f: (_launch(f.report, "Cube: GradInput")["block_dim"] == 1
                                     < _launch(d.report, "Cube: GradInput")["block_dim"]
                                     and _launch(f.report, "Cube: GradWeight")["block_dim"] == 1),
    # 40 channels in chunks of 16: 3 chunks instead of 1, three times the gathers, and the
    # smaller tiles of points spread over more blocks
    "GridSampler2DBackward": lambda d, f: (d.report.tiling["channelChunks"] == 1
                                           and f.report.tiling["channelChunks"] == 3
                                           and f.report.tiling["gathers"] == 3 * d.report.tiling["gathers"]
                                           and _launch(f.report, "GridSampler2DGrad")["block_dim"]
                                           > _launch(d.report, "GridSampler2DGrad")["block_dim"]),
}


def _status(op, tiling):
    with pytest.raises(AclnnError) as e:
        simulator.run(op, tiling=tiling, **OPS[op]())
    return e.value


@pytest.mark.parametrize("op", OPS)
def test_unknown_field_is_a_tiling_error(op):
    err = _status(op, {"noSuchField": 7})
    assert err.status == TILING_ERROR and "noSuchField" in err.message and "Traceback" not in err.message


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("value", ["abc", 0, -3, 2.5, None, True])
def test_bad_value_is_a_tiling_error(op, value):
    field = next(iter(aclnn.REGISTRY[op].tiling_fields))
    if aclnn.REGISTRY[op].tiling_fields[field] == "bool":
        field = next(f for f, k in aclnn.REGISTRY[op].tiling_fields.items() if k == "int")
    err = _status(op, {field: value})
    assert err.status == TILING_ERROR and field in err.message and "Traceback" not in err.message


@pytest.mark.parametrize("op", OPS)
def test_declared_field_is_applied(op):
    """Applied means the plan changed, not only that the report repeats the field: the figures the
    field controls, the instruction count and the cycles all move."""
    tiling, shows = APPLIED[op]
    default = simulator.run(op, mode="timing", **OPS[op]())
    forced = simulator.run(op, mode="timing", tiling=tiling, **OPS[op]())
    assert shows(forced.report.tiling), forced.report.tiling
    assert not shows(default.report.tiling), "the forced value must differ from the default plan's"
    assert PLAN_CHANGES[op](default, forced), (default.report.tiling, forced.report.tiling)
    assert forced.report.instructions != default.report.instructions
    assert forced.cycles != default.cycles


def test_every_operator_declares_its_fields():
    for name, op in aclnn.REGISTRY.items():
        assert op.tiling_fields, f"{name} declares no tiling field"
        assert set(op.tiling_fields.values()) <= {"int", "bool"}


def test_odd_keys_and_huge_values_are_tiling_errors():
    assert "unknown field(s) 1" in _status("SiluBackward", {1: 2, "x": 3}).message
    assert _status("SiluBackward", {"tileLength": 10 ** 30}).status == TILING_ERROR
    r = simulator.run("SiluBackward", mode="timing", tiling={"tileLength": np.int64(256)}, **_silu())
    assert r.report.tiling["tileLength"] == 256


def test_conv_double_buffer_takes_a_bool():
    assert _status("ConvolutionBackward", {"doubleBuffer": 2}).status == TILING_ERROR
    r = simulator.run("ConvolutionBackward", mode="timing", tiling={"doubleBuffer": np.False_}, **_conv())
    assert r.report.tiling["gradInput"]["doubleBuffer"] is False
    r = simulator.run("ConvolutionBackward", mode="timing", tiling={"doubleBuffer": False}, **_conv())
    assert r.report.tiling["gradInput"]["doubleBuffer"] is False


def test_grid_sampler_forced_tiling_that_cannot_work():
    err = _status("GridSampler2DBackward", {"pointsPerTile": 24})
    assert err.status == TILING_ERROR and "multiple of 16" in err.message
    err = _status("GridSampler2DBackward", {"channelsPerChunk": 41})
    assert err.status == TILING_ERROR and "channelsPerChunk" in err.message
