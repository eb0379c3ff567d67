"""aclnnSiluBackward's documented errors, table-driven, on every SoC (SPEC sections 3 and 4; the
seed document's 第一段接口 checks):

* 161001 ACLNN_ERR_PARAM_NULLPTR: gradOutput, self or gradInput is null - checked FIRST, so a null
  wins over every other defect (also on the inference series, where the operator does not exist);
* 161002 ACLNN_ERR_PARAM_INVALID: a dtype outside the series' list (BF16 on the training series,
  INT32 / DOUBLE / ... anywhere), dtypes that differ, shapes that differ, rank > 8, the inference
  series (Ascend310P3: unsupported), and views that do not describe device memory (negative
  stride, view beyond its storage, storage outside its allocation, ...).

After each failure aclGetRecentErrMsg() is a non-empty readable message, and simulator.run raises
simulator.AclnnError whose .status is the code.
"""
from __future__ import annotations

import numpy as np
import pytest

import simulator
from simulator import acl, aclnn
from simulator.enums import aclDataType

from conftest import (BF16, F16, F32, INVALID, NULLPTR, SERIES, SPEC_SILU_DTYPES, contiguous_strides)

ALL_SOCS = list(SERIES)
ACL_OF_NP = {F32: aclDataType.ACL_FLOAT, F16: aclDataType.ACL_FLOAT16, BF16: aclDataType.ACL_BF16}


def supported(soc) -> tuple:
    return SPEC_SILU_DTYPES[SERIES[soc]]


# A case builds the three arguments on a device; tensors are described as
# (shape, aclDataType, strides or None, offset, storage elements or None, data: "ok"|"null"|"bad").
F, H, B = aclDataType.ACL_FLOAT, aclDataType.ACL_FLOAT16, aclDataType.ACL_BF16


def T(shape=(2, 3), dt=F, strides=None, offset=0, storage=None, data="ok"):
    return ("tensor", tuple(shape), dt, strides, offset, storage, data)


def _build(dev, spec):
    if spec is None or not (isinstance(spec, tuple) and spec and spec[0] == "tensor"):
        return spec                      # None, or a non-tensor object passed as it is
    _, shape, dt, strides, offset, storage, data = spec
    st = strides if strides is not None else contiguous_strides(shape)
    need = offset + (sum((d - 1) * s for d, s in zip(shape, st)) + 1 if all(shape) else 0)
    n = storage if storage is not None else max(need, 1)
    try:
        itemsize = simulator.enums.NUMPY_OF[aclDataType(dt)].itemsize
    except (KeyError, ValueError):
        itemsize = 4
    ptr = dev.malloc(max(n * itemsize, 1))
    addr = {"ok": ptr, "null": None, "bad": 0x10}[data]
    t = acl.aclCreateTensor(shape, dt, strides, offset, 2, (n,), addr)
    assert t is not None, acl.aclGetRecentErrMsg()
    return t


# (id, gradOutput, self, gradInput, expected status per series: {"training": .., "inference": .., "A2": ..})
OK = 0
EVERYWHERE = lambda code: {"training": code, "inference": code, "A2": code}
# a valid call: 0 where the series supports the operator, 161002 on the inference series
VALID = {"training": OK, "inference": INVALID, "A2": OK}

CASES = [
    # ---- controls: valid calls (so the table cannot pass by rejecting everything)
    ("valid_float", T(), T(), T(), VALID),
    ("valid_float16", T(dt=H), T(dt=H), T(dt=H), VALID),
    ("valid_rank8", T((1, 2, 1, 2, 1, 2, 1, 3)), T((1, 2, 1, 2, 1, 2, 1, 3)),
     T((1, 2, 1, 2, 1, 2, 1, 3)), VALID),
    ("valid_strided", T((2, 3), strides=(1, 2)), T((2, 3), offset=5), T((2, 3), strides=(4, 1)), VALID),
    ("bf16", T(dt=B), T(dt=B), T(dt=B), {"training": INVALID, "inference": INVALID, "A2": OK}),
    # ---- nulls: 161001 first, whatever else is wrong, on every series
    ("null_gradOutput", None, T(), T(), EVERYWHERE(NULLPTR)),
    ("null_self", T(), None, T(), EVERYWHERE(NULLPTR)),
    ("null_gradInput", T(), T(), None, EVERYWHERE(NULLPTR)),
    ("null_all", None, None, None, EVERYWHERE(NULLPTR)),
    ("null_beats_bad_dtype", None, T(dt=aclDataType.ACL_INT32), T(dt=aclDataType.ACL_DOUBLE),
     EVERYWHERE(NULLPTR)),
    ("null_beats_bad_shape", T((2, 3)), T((3, 2)), None, EVERYWHERE(NULLPTR)),
    ("null_beats_bad_view", T(strides=(-3, 1), storage=64), None, T(), EVERYWHERE(NULLPTR)),
    ("null_beats_non_tensor", "tensor", T(), None, EVERYWHERE(NULLPTR)),
    # ---- dtypes outside the list
    ("int32", T(dt=aclDataType.ACL_INT32), T(dt=aclDataType.ACL_INT32), T(dt=aclDataType.ACL_INT32),
     EVERYWHERE(INVALID)),
    ("double", T(dt=aclDataType.ACL_DOUBLE), T(dt=aclDataType.ACL_DOUBLE), T(dt=aclDataType.ACL_DOUBLE),
     EVERYWHERE(INVALID)),
    ("int8", T(dt=aclDataType.ACL_INT8), T(dt=aclDataType.ACL_INT8), T(dt=aclDataType.ACL_INT8),
     EVERYWHERE(INVALID)),
    ("bool", T(dt=aclDataType.ACL_BOOL), T(dt=aclDataType.ACL_BOOL), T(dt=aclDataType.ACL_BOOL),
     EVERYWHERE(INVALID)),
    ("int64_output_only", T(), T(), T(dt=aclDataType.ACL_INT64), EVERYWHERE(INVALID)),
    # ---- dtypes that differ
    ("mixed_f32_f16", T(dt=F), T(dt=H), T(dt=F), EVERYWHERE(INVALID)),
    ("mixed_output", T(dt=H), T(dt=H), T(dt=F), EVERYWHERE(INVALID)),
    ("mixed_bf16_f16", T(dt=B), T(dt=H), T(dt=B), EVERYWHERE(INVALID)),
    ("mixed_f32_bf16", T(dt=F), T(dt=F), T(dt=B), EVERYWHERE(INVALID)),
    # ---- shapes that differ (no broadcasting)
    ("shape_transposed", T((2, 3)), T((3, 2)), T((2, 3)), EVERYWHERE(INVALID)),
    ("shape_output", T((2, 3)), T((2, 3)), T((2, 4)), EVERYWHERE(INVALID)),
    ("shape_extra_dim", T((2, 3)), T((2, 3)), T((2, 3, 1)), EVERYWHERE(INVALID)),
    ("shape_broadcastable", T((1, 3)), T((2, 3)), T((2, 3)), EVERYWHERE(INVALID)),
    ("shape_empty_vs_not", T((0, 3)), T((2, 3)), T((2, 3)), EVERYWHERE(INVALID)),
    # ---- rank
    ("rank9", T((1,) * 9), T((1,) * 9), T((1,) * 9), EVERYWHERE(INVALID)),
    ("rank9_mixed_dims", T((2, 1, 1, 1, 1, 1, 1, 1, 3)), T((2, 1, 1, 1, 1, 1, 1, 1, 3)),
     T((2, 1, 1, 1, 1, 1, 1, 1, 3)), EVERYWHERE(INVALID)),
    # ---- invalid views
    ("negative_stride", T(strides=(-3, 1), offset=3, storage=6), T(), T(), EVERYWHERE(INVALID)),
    ("negative_stride_output", T(), T(), T(strides=(3, -1), offset=2, storage=6), EVERYWHERE(INVALID)),
    ("negative_offset", T(), T(offset=-1), T(), EVERYWHERE(INVALID)),
    ("negative_dim", T((2, -3), strides=(3, 1)), T((2, -3), strides=(3, 1)),
     T((2, -3), strides=(3, 1)), EVERYWHERE(INVALID)),
    ("view_beyond_storage_offset", T(offset=1, storage=6), T(), T(), EVERYWHERE(INVALID)),
    ("view_beyond_storage_stride", T(), T(strides=(4, 1), storage=6), T(), EVERYWHERE(INVALID)),
    ("output_beyond_storage", T(), T(), T(storage=5), EVERYWHERE(INVALID)),
    ("storage_outside_allocation", T(), T(), T(storage=6, data="bad"), EVERYWHERE(INVALID)),
    ("no_device_memory", T(data="null"), T(), T(), EVERYWHERE(INVALID)),
    # ---- not a tensor at all
    ("int_for_tensor", 7, T(), T(), EVERYWHERE(INVALID)),
    ("list_for_tensor", T(), [[1.0, 2.0, 3.0]] * 2, T(), EVERYWHERE(INVALID)),
    ("ndarray_for_tensor", T(), T(), np.zeros((2, 3), np.float32), EVERYWHERE(INVALID)),
]


def _expected(case_expect, soc):
    return case_expect[SERIES[soc]]


@pytest.mark.parametrize("soc", ALL_SOCS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_documented_status(make_device, soc, case):
    name, go, x, gi, expect = case
    dev = make_device(soc)
    args = [_build(dev, s) for s in (go, x, gi)]
    want = _expected(expect, soc)
    assert acl.aclGetRecentErrMsg() is None      # nothing failed yet: nullptr, as in CANN
    ws, ex, ret = aclnn.aclnnSiluBackwardGetWorkspaceSize(*args)
    msg = acl.aclGetRecentErrMsg()
    assert ret == want, f"{name} on {soc}: got {ret}, want {want}; message: {msg}"
    if want == OK:
        assert ex is not None and ws >= 0
        wsp = dev.malloc(ws) if ws else None
        assert aclnn.aclnnSiluBackward(wsp, ws, ex, dev.stream) == 0
        assert acl.aclrtSynchronizeStream(dev.stream) == 0, acl.aclGetRecentErrMsg()
        return
    assert ex is None and ws == 0
    # a readable message: non-empty text, no internal traceback, says what is wrong
    assert isinstance(msg, str) and len(msg.strip()) > 10
    assert "Traceback" not in msg and "internal" not in msg.lower()
    if want == NULLPTR:
        nulls = [n for n, a in zip(("gradOutput", "self", "gradInput"), args) if a is None]
        assert nulls[0] in msg
    if SERIES[soc] == "inference" and want == INVALID:
        assert "not supported" in msg and soc in msg          # the operator is not on this chip
    elif want == INVALID:
        assert _keyword(name, args) in msg, f"{name}: message does not say what is wrong: {msg}"


# what an INVALID message must mention: the kind of defect, or the offending parameter
KEYWORD = {
    "bf16": "BF16", "int32": "dtype", "double": "dtype", "int8": "dtype", "bool": "dtype",
    "int64_output_only": "dtype", "mixed_f32_f16": "dtype", "mixed_output": "dtype",
    "mixed_bf16_f16": "dtype", "mixed_f32_bf16": "dtype", "shape_transposed": "shape",
    "shape_output": "shape", "shape_extra_dim": "shape", "shape_broadcastable": "shape",
    "shape_empty_vs_not": "shape", "rank9": "rank", "rank9_mixed_dims": "rank",
    "negative_stride": "gradOutput", "negative_stride_output": "gradInput",
    "negative_offset": "self", "negative_dim": "gradOutput",
    "view_beyond_storage_offset": "gradOutput", "view_beyond_storage_stride": "self",
    "output_beyond_storage": "gradInput", "storage_outside_allocation": "gradInput",
    "no_device_memory": "gradOutput", "int_for_tensor": "gradOutput",
    "list_for_tensor": "self", "ndarray_for_tensor": "gradInput",
}


def _keyword(name: str, args) -> str:
    return KEYWORD[name]


def test_the_table_covers_every_series():
    """Every documented code appears in the table on every series (guards against a table that
    silently lost its error rows)."""
    for series in ("training", "inference", "A2"):
        codes = {c[4][series] for c in CASES}
        assert {NULLPTR, INVALID} <= codes
    assert {c[4]["A2"] for c in CASES} >= {OK}
    assert {c[4]["training"] for c in CASES} >= {OK}


@pytest.mark.parametrize("soc", ALL_SOCS)
def test_destroyed_tensor_is_invalid(make_device, soc):
    dev = make_device(soc)
    ts = [dev.put(np.ones((2, 3), np.float32)) for _ in range(3)]
    assert acl.aclDestroyTensor(ts[1].tensor) == 0
    _, ex, ret = aclnn.aclnnSiluBackwardGetWorkspaceSize(*(t.tensor for t in ts))
    assert ret == INVALID and ex is None and acl.aclGetRecentErrMsg()


@pytest.mark.parametrize("soc", ALL_SOCS)
def test_stride_count_differs_from_rank(make_device, soc):
    """An aclTensor built directly with fewer strides than dimensions (aclCreateTensor refuses to
    build it) is rejected, not silently truncated."""
    dev = make_device(soc)
    good = dev.put(np.ones((2, 3), np.float32))
    bad = acl.aclTensor((2, 3), aclDataType.ACL_FLOAT, (1,), 0, 2, (2,), good.ptr)
    _, ex, ret = aclnn.aclnnSiluBackwardGetWorkspaceSize(good.tensor, good.tensor, bad)
    assert ret == INVALID and ex is None and acl.aclGetRecentErrMsg()
    assert acl.aclCreateTensor((2, 3), aclDataType.ACL_FLOAT, (1,), 0, 2, (6,), good.ptr) is None


@pytest.mark.parametrize("soc", ALL_SOCS)
def test_arguments_by_keyword_and_missing(make_device, soc):
    """The C signature's names bind by keyword; a missing one is a null (161001); an unknown
    keyword or a surplus positional argument is 161002."""
    dev = make_device(soc)
    g, x, o = (dev.put(np.ones((2, 3), np.float32)).tensor for _ in range(3))
    want_ok = OK if supported(soc) else INVALID
    assert aclnn.aclnnSiluBackwardGetWorkspaceSize(gradOutput=g, self=x, gradInput=o)[2] == want_ok
    assert aclnn.aclnnSiluBackwardGetWorkspaceSize(g, x)[2] == NULLPTR
    assert aclnn.aclnnSiluBackwardGetWorkspaceSize(self=x, gradInput=o)[2] == NULLPTR
    assert aclnn.aclnnSiluBackwardGetWorkspaceSize(g, x, o, o)[2] == INVALID
    assert aclnn.aclnnSiluBackwardGetWorkspaceSize(g, x, o, alpha=1)[2] == INVALID
    assert aclnn.aclnnSiluBackwardGetWorkspaceSize(g, x, o, self=x)[2] == INVALID


def test_phase1_without_a_device_is_a_runtime_error():
    """No aclInit / aclrtSetDevice: 361001 ACLNN_ERR_RUNTIME_ERROR with a message, not a crash."""
    with acl.use_runtime(acl.Runtime()):
        t = acl.aclCreateTensor((2,), aclDataType.ACL_FLOAT, None, 0, 2, (2,), 0x1000)
        ws, ex, ret = aclnn.aclnnSiluBackwardGetWorkspaceSize(t, t, t)
        assert ret == 361001 and ex is None and "aclInit" in acl.aclGetRecentErrMsg()


# ---- simulator.run raises AclnnError with the status ------------------------------------------------
def _arr(shape=(2, 3), dt=np.float32):
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dt)


RUN_CASES = [
    ("null_gradOutput", lambda: dict(gradOutput=None, self=_arr()), EVERYWHERE(NULLPTR)),
    ("missing_self", lambda: dict(gradOutput=_arr()), EVERYWHERE(NULLPTR)),
    ("int32", lambda: dict(gradOutput=_arr(dt=np.int32), self=_arr(dt=np.int32)), EVERYWHERE(INVALID)),
    ("float64", lambda: dict(gradOutput=_arr(dt=np.float64), self=_arr(dt=np.float64)), EVERYWHERE(INVALID)),
    ("bf16", lambda: dict(gradOutput=_arr(dt=BF16), self=_arr(dt=BF16)),
     {"training": INVALID, "inference": INVALID, "A2": OK}),
    ("mixed", lambda: dict(gradOutput=_arr(dt=np.float16), self=_arr()), EVERYWHERE(INVALID)),
    ("shape", lambda: dict(gradOutput=_arr((3, 2)), self=_arr()), EVERYWHERE(INVALID)),
    ("output_shape", lambda: dict(gradOutput=_arr(), self=_arr(), gradInput=np.zeros((2, 4), np.float32)),
     EVERYWHERE(INVALID)),
    ("rank9", lambda: dict(gradOutput=_arr((1,) * 9), self=_arr((1,) * 9)), EVERYWHERE(INVALID)),
    ("complex_has_no_acl_dtype", lambda: dict(gradOutput=_arr(dt=np.complex64), self=_arr(dt=np.complex64)),
     EVERYWHERE(INVALID)),
    ("valid", lambda: dict(gradOutput=_arr(), self=_arr()), VALID),
]


@pytest.mark.parametrize("soc", ALL_SOCS)
@pytest.mark.parametrize("case", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_run_raises_aclnn_error(soc, case):
    name, make, expect = case
    want = expect[SERIES[soc]]
    before = acl.runtime()
    if want == OK:
        r = simulator.run("SiluBackward", soc=soc, **make())
        assert r.gradInput.shape == (2, 3)
        return
    with pytest.raises(simulator.AclnnError) as info:
        simulator.run("SiluBackward", soc=soc, **make())
    assert info.value.status == want
    text = str(info.value)
    assert str(want) in text and info.value.message.strip()
    assert acl.runtime() is before, "simulator.run leaked its private runtime"


def test_run_unknown_parameter_and_operator():
    with pytest.raises(simulator.AclnnError) as info:
        simulator.run("SiluBackward", gradOutput=_arr(), self=_arr(), alpha=1.0)
    assert info.value.status == INVALID and "alpha" in info.value.message
    with pytest.raises(simulator.AclnnError) as info:
        simulator.run("SiluForwardBackwardSideways", x=_arr())
    assert info.value.status == INVALID and "SiluBackward" in info.value.message
