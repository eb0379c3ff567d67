"""Every SPEC section 4 error condition of aclnnConvolutionBackward and aclnnConvTbcBackward
returns its status code on each product series, table-driven: one row per condition, with the
expected status on (training = Ascend910A, inference = Ascend310P3, A2 = Ascend910B1).

Each row starts from a valid call and changes one thing; the valid calls themselves return 0.
Only phase 1 runs (the checks and the plan)."""
from __future__ import annotations

import numpy as np
import pytest

from simulator import acl, aclnn
from simulator.enums import aclDataType as DT
from simulator.enums import aclFormat as F

SERIES = {"training": "Ascend910A", "inference": "Ascend310P3", "A2": "Ascend910B1"}
OK, NULL, INVALID, TILING = 0, 161001, 161002, 561002


@pytest.fixture(params=list(SERIES), scope="module")
def series(request):
    rt = acl.Runtime()
    with acl.use_runtime(rt):
        assert acl.aclInit(None, soc=SERIES[request.param], mode="timing") == 0
        assert acl.aclrtSetDevice(0) == 0
        yield request.param


def tensor(shape, dtype=DT.ACL_FLOAT, fmt=None, strides=None):
    shape = list(shape)
    if fmt is None:
        fmt = {1: F.ACL_FORMAT_ND, 3: F.ACL_FORMAT_NCL, 4: F.ACL_FORMAT_NCHW, 5: F.ACL_FORMAT_NCDHW}.get(
            len(shape), F.ACL_FORMAT_ND)
    n = int(np.prod(shape)) if shape else 1
    isz = {DT.ACL_FLOAT: 4, DT.ACL_FLOAT16: 2, DT.ACL_BF16: 2, DT.ACL_INT32: 4, DT.ACL_DOUBLE: 8}[dtype]
    ptr, ret = acl.aclrtMalloc(max(n, 1) * isz, 0)
    assert ret == 0
    return acl.aclCreateTensor(shape, dtype, strides, 0, fmt, [max(n, 1)], ptr)


# ---- aclnnConvolutionBackward ------------------------------------------------------------------
def conv_call(xs=(2, 4, 8, 8), ws=(6, 4, 3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1),
              transposed=False, output_padding=None, groups=1, mask=(True, True, True), cm=1,
              dt=DT.ACL_FLOAT16, gos=None):
    """A valid ConvolutionBackward argument dict (FP16 by default: every series accepts it)."""
    nd = len(xs) - 2
    output_padding = output_padding or [0] * nd
    if gos is None:
        from conv_reference import conv_out_size, norm_padding
        pads = norm_padding(padding, nd)
        out = conv_out_size(xs[2:], ws[2:], stride, pads, dilation, transposed, output_padding)
        cout = ws[1] * groups if transposed else ws[0]
        gos = (xs[0], cout, *out)
    return {"gradOutput": tensor(gos, dt), "input": tensor(xs, dt), "weight": tensor(ws, dt),
            "biasSizes": acl.aclCreateIntArray([gos[1]]), "stride": acl.aclCreateIntArray(stride),
            "padding": acl.aclCreateIntArray(padding), "dilation": acl.aclCreateIntArray(dilation),
            "transposed": transposed, "outputPadding": acl.aclCreateIntArray(output_padding),
            "groups": groups, "outputMask": acl.aclCreateBoolArray(mask), "cubeMathType": cm,
            "gradInput": tensor(xs, dt), "gradWeight": tensor(ws, dt), "gradBias": tensor([gos[1]], dt)}


def _set(**kw):
    def f(a):
        a.update(kw)
        return a
    return f


def _retensor(name, shape=None, dtype=None, fmt=None):
    def f(a):
        t = a[name]
        a[name] = tensor(shape or t.viewDims, dtype if dtype is not None else t.dataType, fmt)
        return a
    return f


def _all_dtype(dtype):
    def f(a):
        for n in ("gradOutput", "input", "weight", "gradInput", "gradWeight", "gradBias"):
            a[n] = tensor(a[n].viewDims, dtype)
        return a
    return f


def _ints(name, values):
    return lambda a: {**a, name: acl.aclCreateIntArray(values)}


def _then(*fs):
    def f(a):
        for g in fs:
            a = g(a)
        return a
    return f


T3 = (OK, OK, OK)
INV3 = (INVALID, INVALID, INVALID)
A2_ONLY = (INVALID, INVALID, OK)
A2_REJECTS = (OK, OK, INVALID)

# (id, base-call kwargs, change, expected (training, inference, A2))
CONV_CASES = [
    ("valid 2D", {}, None, T3),
    ("valid 1D", dict(xs=(2, 4, 9), ws=(6, 4, 3), stride=(2,), padding=(1,), dilation=(1,)), None, T3),
    ("valid 3D (A2 only)", dict(xs=(1, 2, 4, 5, 5), ws=(3, 2, 2, 3, 3), stride=(1, 1, 1),
                                padding=(0, 1, 1), dilation=(1, 1, 1)), None, A2_ONLY),
    ("valid transposed", dict(transposed=True, stride=(2, 2), output_padding=(1, 0), ws=(4, 3, 3, 3)), None, T3),
    ("valid depthwise", dict(groups=4, ws=(8, 1, 3, 3)), None, T3),
    ("valid 4-entry padding", dict(padding=(1, 0, 2, 1)), None, T3),
    # 1. nulls (outputs only where their mask bit is set) and the mask's length -> 161001
    *[(f"null {n}", {}, _set(**{n: None}), (NULL,) * 3)
      for n in ("gradOutput", "input", "weight", "stride", "padding", "dilation", "outputPadding",
                "outputMask", "gradInput", "gradWeight", "gradBias")],
    ("null biasSizes with gradBias asked", {}, _set(biasSizes=None), (NULL,) * 3),
    ("null biasSizes, gradBias not asked", dict(mask=(True, True, False)), _set(biasSizes=None), T3),
    ("null gradInput, not asked", dict(mask=(False, True, True)), _set(gradInput=None), T3),
    ("null gradWeight, not asked", dict(mask=(True, False, True)), _set(gradWeight=None), T3),
    ("null gradBias, not asked", dict(mask=(True, True, False)), _set(gradBias=None), T3),
    ("all outputs null, nothing asked", dict(mask=(False, False, False)),
     _set(gradInput=None, gradWeight=None, gradBias=None), T3),
    ("outputMask of 2", {}, _set(outputMask=acl.aclCreateBoolArray([True, True])), (NULL,) * 3),
    ("outputMask of 4", {}, _set(outputMask=acl.aclCreateBoolArray([True] * 4)), (NULL,) * 3),
    # 3. dtypes
    ("INT32 input", {}, _retensor("input", dtype=DT.ACL_INT32), INV3),
    ("DOUBLE gradOutput", {}, _retensor("gradOutput", dtype=DT.ACL_DOUBLE), INV3),
    ("INT32 gradWeight", {}, _retensor("gradWeight", dtype=DT.ACL_INT32), INV3),
    ("BF16 everywhere", dict(cm=1), _all_dtype(DT.ACL_BF16), A2_ONLY),
    ("FLOAT everywhere, cubeMathType 1", dict(cm=1), _all_dtype(DT.ACL_FLOAT), T3),
    ("FLOAT weight with FP16 (promotes to FLOAT)", dict(cm=1), _retensor("weight", dtype=DT.ACL_FLOAT), T3),
    ("FLOAT weight with FP16, cubeMathType 0", dict(cm=0), _retensor("weight", dtype=DT.ACL_FLOAT), A2_ONLY),
    ("BF16 input with FP16 (promotes to FLOAT), cm 0", dict(cm=0),
     _then(_retensor("input", dtype=DT.ACL_BF16), _retensor("gradInput", dtype=DT.ACL_BF16)), A2_ONLY),
    # 4. formats and ranks
    ("4D NHWC", {}, _retensor("input", fmt=F.ACL_FORMAT_NHWC), INV3),
    ("4D ND", {}, _retensor("weight", fmt=F.ACL_FORMAT_ND), INV3),
    ("4D NC1HWC0", {}, _retensor("gradOutput", fmt=F.ACL_FORMAT_NC1HWC0), INV3),
    ("3D NCHW", dict(xs=(2, 4, 9), ws=(6, 4, 3), stride=(1,), padding=(1,), dilation=(1,)),
     _retensor("input", fmt=F.ACL_FORMAT_NCHW), INV3),
    ("3D ND", dict(xs=(2, 4, 9), ws=(6, 4, 3), stride=(1,), padding=(1,), dilation=(1,)),
     _then(*[_retensor(n, fmt=F.ACL_FORMAT_ND) for n in ("input", "gradOutput", "weight", "gradInput",
                                                          "gradWeight")]), T3),
    ("5D NCHW", dict(xs=(1, 2, 4, 5, 5), ws=(3, 2, 2, 3, 3), stride=(1, 1, 1), padding=(0, 1, 1),
                     dilation=(1, 1, 1)), _retensor("weight", fmt=F.ACL_FORMAT_NCHW), INV3),
    ("2-D tensors", dict(xs=(2, 4), ws=(6, 4), stride=(), padding=(), dilation=(), gos=(2, 6)), None, INV3),
    # 5. attribute values
    ("stride 0", {}, _ints("stride", [0, 1]), INV3),
    ("padding -1", {}, _ints("padding", [-1, 1]), INV3),
    ("dilation 0", {}, _ints("dilation", [1, 0]), INV3),
    ("groups 0", {}, _set(groups=0), INV3),
    ("outputPadding 1 without transposed", {}, _ints("outputPadding", [1, 0]), INV3),
    # CANN's checker bounds outputPadding by stride in 3D only (1D / 2D accept any value >= 0);
    # the shapes here agree with the outputPadding, so the bound is what rejects the call
    ("outputPadding >= stride, transposed 3D", dict(xs=(1, 3, 4, 5, 5), ws=(3, 2, 2, 3, 3), stride=(2, 2, 2),
                                                    padding=(0, 1, 1), dilation=(1, 1, 1), transposed=True,
                                                    output_padding=[0, 2, 0]), None, INV3),
    ("outputPadding >= stride, transposed 2D (accepted)", dict(transposed=True, stride=(2, 2), ws=(4, 3, 3, 3),
                                                               output_padding=[2, 3]), None, T3),
    ("outputPadding negative, transposed", dict(transposed=True, stride=(2, 2), ws=(4, 3, 3, 3)),
     _ints("outputPadding", [-1, 0]), INV3),
    # 6. cubeMathType (SPEC section 3)
    ("cubeMathType 4", {}, _set(cubeMathType=4), INV3),
    ("cubeMathType -1", {}, _set(cubeMathType=-1), INV3),
    ("FP16 with cubeMathType 0", dict(cm=0), None, T3),
    ("FP16 with cubeMathType 2", dict(cm=2), None, T3),
    ("FP16 with cubeMathType 3", dict(cm=3), None, T3),
    ("FLOAT with cubeMathType 0", dict(cm=0, dt=DT.ACL_FLOAT), None, A2_ONLY),
    ("FLOAT with cubeMathType 2", dict(cm=2, dt=DT.ACL_FLOAT), None, T3),
    ("FLOAT with cubeMathType 3", dict(cm=3, dt=DT.ACL_FLOAT), None, A2_ONLY),
    ("BF16 with cubeMathType 0", dict(cm=0, dt=DT.ACL_BF16), None, A2_ONLY),
    ("BF16 with cubeMathType 2", dict(cm=2, dt=DT.ACL_BF16), None, A2_ONLY),
    ("BF16 with cubeMathType 3", dict(cm=3, dt=DT.ACL_BF16), None, A2_ONLY),
    # 7. shapes
    ("ranks differ", {}, _retensor("weight", shape=(6, 4, 3)), INV3),
    ("N differs", {}, _retensor("gradOutput", shape=(3, 6, 8, 8)), INV3),
    ("gradInput shape", {}, _retensor("gradInput", shape=(2, 4, 8, 7)), INV3),
    ("gradWeight shape", {}, _retensor("gradWeight", shape=(6, 4, 3, 2)), INV3),
    ("gradBias shape", {}, _retensor("gradBias", shape=(5,)), INV3),
    ("gradBias 2-D", {}, _retensor("gradBias", shape=(6, 1), fmt=F.ACL_FORMAT_ND), INV3),
    ("stride of 1 in 2D", {}, _ints("stride", [1]), INV3),
    ("dilation of 3 in 2D", {}, _ints("dilation", [1, 1, 1]), INV3),
    ("outputPadding of 1 in 2D", {}, _ints("outputPadding", [0]), INV3),
    ("padding of 3 in 2D", {}, _ints("padding", [1, 1, 1]), INV3),
    ("padding of 4 in 1D", dict(xs=(2, 4, 9), ws=(6, 4, 3), stride=(1,), padding=(1,), dilation=(1,)),
     _ints("padding", [1, 1, 1, 1]), INV3),
    ("biasSizes of 2", {}, _ints("biasSizes", [6, 1]), INV3),
    ("biasSizes value", {}, _ints("biasSizes", [5]), INV3),
    # 8. channels and the formula
    ("gradOutput channels != weight[0]", {}, _retensor("gradOutput", shape=(2, 5, 8, 8)), INV3),
    ("input channels != groups * weight[1]", dict(groups=2, ws=(6, 2, 3, 3)),
     _then(_retensor("input", shape=(2, 6, 8, 8)), _retensor("gradInput", shape=(2, 6, 8, 8))), INV3),
    ("weight[0] not divisible by groups", dict(groups=2, ws=(6, 2, 3, 3)),
     _then(_retensor("weight", shape=(5, 2, 3, 3)), _retensor("gradWeight", shape=(5, 2, 3, 3)),
           _retensor("gradOutput", shape=(2, 5, 8, 8)), _retensor("gradBias", shape=(5,)),
           _ints("biasSizes", [5])), INV3),
    ("transposed: input channels != weight[0]", dict(transposed=True, ws=(4, 3, 3, 3)),
     _then(_retensor("weight", shape=(5, 3, 3, 3)), _retensor("gradWeight", shape=(5, 3, 3, 3))), INV3),
    ("transposed: gradOutput channels != groups * weight[1]", dict(transposed=True, ws=(4, 3, 3, 3)),
     _then(_retensor("gradOutput", shape=(2, 4, 8, 8)), _retensor("gradBias", shape=(4,)),
           _ints("biasSizes", [4])), INV3),
    ("gradOutput spatial != formula", {}, _retensor("gradOutput", shape=(2, 6, 8, 7)), INV3),
    ("kernel larger than the padded input", dict(xs=(1, 1, 2, 2), ws=(1, 1, 5, 5), padding=(0, 0),
                                                 gos=(1, 1, 1, 1)), None, INV3),
    ("transposed spatial != formula", dict(transposed=True, stride=(2, 2), ws=(4, 3, 3, 3)),
     _retensor("gradOutput", shape=(2, 3, 15, 16)), INV3),
    # 9. A2 limits (transposed=false)
    ("kernel W 256", dict(xs=(1, 1, 1, 256), ws=(1, 1, 1, 256), padding=(0, 0)), None, A2_REJECTS),
    ("kernel L 256 (1D)", dict(xs=(1, 1, 256), ws=(1, 1, 256), stride=(1,), padding=(0,), dilation=(1,)),
     None, A2_REJECTS),
    ("kernel 256, transposed (no limit)", dict(xs=(1, 1, 1, 2), ws=(1, 1, 1, 256), padding=(0, 0),
                                                transposed=True), None, T3),
    ("padding 256", dict(xs=(1, 1, 2), ws=(1, 1, 1), stride=(1,), padding=(256,), dilation=(1,)),
     None, A2_REJECTS),
    ("4-entry padding with 256", dict(xs=(1, 1, 2, 2), ws=(1, 1, 1, 1), padding=(0, 256, 0, 0)),
     None, A2_REJECTS),
    # the training and inference series accept it (gradInput's load3d padding of 256 is held in
    # L1; a dilation field past 255 faults in the kernel, as "kernel W 256" does)
    ("dilation 256", dict(xs=(1, 1, 300), ws=(1, 1, 2), stride=(1,), padding=(0,), dilation=(256,)),
     None, A2_REJECTS),
    ("dilation 256, gradWeight only", dict(xs=(1, 1, 300), ws=(1, 1, 2), stride=(1,), padding=(0,),
                                           dilation=(256,), mask=(False, True, True)), None, A2_REJECTS),
    ("3D stride H 64", dict(xs=(1, 1, 2, 65, 2), ws=(1, 1, 1, 1, 1), stride=(1, 64, 1), padding=(0, 0, 0),
                            dilation=(1, 1, 1)), None, INV3),
    ("3D stride D 64 (no limit on D)", dict(xs=(1, 1, 65, 2, 2), ws=(1, 1, 1, 1, 1), stride=(64, 1, 1),
                                            padding=(0, 0, 0), dilation=(1, 1, 1)), None, A2_ONLY),
    ("3D padding D 256 (no limit on D)", dict(xs=(1, 1, 1, 2, 2), ws=(1, 1, 1, 1, 1), stride=(1, 1, 1),
                                              padding=(256, 0, 0), dilation=(1, 1, 1)), None, A2_ONLY),
    ("groups 65536", dict(xs=(1, 65536, 1), ws=(65536, 1, 1), stride=(1,), padding=(0,), dilation=(1,),
                          groups=65536), None, A2_REJECTS),
    # 10. empty tensors
    ("input N = 0", dict(xs=(0, 4, 8, 8)), None, A2_ONLY),
    ("input C = 0", dict(xs=(2, 0, 8, 8), ws=(6, 0, 3, 3)), None, A2_ONLY),
    ("input H = 0", dict(xs=(2, 4, 0, 8), padding=(0, 1), gos=(2, 6, 0, 8)), None, INV3),
    ("gradOutput C = 0", dict(ws=(0, 4, 3, 3)), None, INV3),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_convolution_backward_status(series, case):
    _, base, change, expected = case
    a = conv_call(**base)
    if change is not None:
        a = change(a)
    want = expected[list(SERIES).index(series)]
    ws, executor, ret = aclnn.aclnnConvolutionBackwardGetWorkspaceSize(**a)
    msg = acl.aclGetRecentErrMsg()             # read once: as in CANN, reading clears it
    assert ret == want, (series, msg)
    if case[0] == "outputPadding >= stride, transposed 3D" and series == "A2":
        assert "outputPadding[1] = 2 must be smaller than stride[1] = 2 or dilation[1] = 1" in msg
    if want:
        assert executor is None and msg
    else:
        assert executor is not None and ws >= 0


# ---- aclnnConvTbcBackward ---------------------------------------------------------------------
def tbc_call(T=6, B=2, cin=4, cout=5, K=3, pad=1, cm=1, dt=DT.ACL_FLOAT16):
    to = T + 2 * pad + 1 - K
    return {"self": tensor((to, B, cout), dt), "input": tensor((T, B, cin), dt),
            "weight": tensor((K, cin, cout), dt), "bias": tensor((cout,), dt), "pad": pad,
            "cubeMathType": cm, "gradInput": tensor((T, B, cin), dt),
            "gradWeight": tensor((K, cin, cout), dt), "gradBias": tensor((cout,), dt)}


TBC_NO_INF = (OK, INVALID, OK)             # valid, but the inference series lacks the operator
TBC_A2 = (INVALID, INVALID, OK)
TBC_TRAIN = (OK, INVALID, INVALID)

TBC_CASES = [
    ("valid", {}, None, TBC_NO_INF),
    ("valid pad 0", dict(pad=0), None, TBC_NO_INF),
    *[(f"null {n}", {}, _set(**{n: None}), (NULL,) * 3)
      for n in ("self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias")],
    ("INT32 self", {}, _retensor("self", dtype=DT.ACL_INT32), INV3),
    ("DOUBLE weight", {}, _retensor("weight", dtype=DT.ACL_DOUBLE), INV3),
    ("BF16", dict(dt=DT.ACL_BF16), None, TBC_A2),
    ("FLOAT, cubeMathType 1", dict(dt=DT.ACL_FLOAT), None, TBC_NO_INF),
    ("FLOAT, cubeMathType 0", dict(dt=DT.ACL_FLOAT, cm=0), None, TBC_A2),
    ("FLOAT, cubeMathType 3", dict(dt=DT.ACL_FLOAT, cm=3), None, TBC_A2),
    ("BF16, cubeMathType 2", dict(dt=DT.ACL_BF16, cm=2), None, TBC_A2),
    ("cubeMathType 7", {}, _set(cubeMathType=7), INV3),
    ("self NCHW", {}, _retensor("self", fmt=F.ACL_FORMAT_NCHW), INV3),
    ("bias NCL", {}, _retensor("bias", fmt=F.ACL_FORMAT_NCL), INV3),
    ("bias 2-D", {}, _then(_retensor("bias", shape=(5, 1)), _retensor("gradBias", shape=(5, 1))), INV3),
    ("weight 2-D", {}, _retensor("weight", shape=(3, 20), fmt=F.ACL_FORMAT_ND), INV3),
    ("input[2] != weight[1]", {}, _then(_retensor("input", shape=(6, 2, 3)),
                                        _retensor("gradInput", shape=(6, 2, 3))), INV3),
    ("bias[0] != weight[2]", {}, _then(_retensor("bias", shape=(4,)), _retensor("gradBias", shape=(4,))), INV3),
    ("pad -1", dict(pad=0), _then(_set(pad=-1), _retensor("self", shape=(2, 2, 5))), INV3),
    ("pad 256", dict(pad=256), None, TBC_TRAIN),
    ("K 256", dict(T=256, K=256, pad=0), None, TBC_TRAIN),
    ("self T wrong", {}, _retensor("self", shape=(5, 2, 5)), INV3),
    ("self B wrong", {}, _retensor("self", shape=(6, 3, 5)), INV3),
    ("gradInput shape", {}, _retensor("gradInput", shape=(6, 2, 5)), INV3),
    ("gradWeight shape", {}, _retensor("gradWeight", shape=(2, 4, 5)), INV3),
    ("gradBias shape", {}, _retensor("gradBias", shape=(6,)), INV3),
    ("empty self (B = 0)", dict(B=0), None, INV3),
    ("empty self (T_out = 0)", dict(T=1, K=4, pad=1), None, INV3),
]


@pytest.mark.parametrize("case", TBC_CASES, ids=[c[0] for c in TBC_CASES])
def test_conv_tbc_backward_status(series, case):
    _, base, change, expected = case
    a = tbc_call(**base)
    if change is not None:
        a = change(a)
    want = expected[list(SERIES).index(series)]
    ws, executor, ret = aclnn.aclnnConvTbcBackwardGetWorkspaceSize(**a)
    assert ret == want, (series, acl.aclGetRecentErrMsg())


# ---- phase 2 and tiling -------------------------------------------------------------------------
def test_phase2_null_executor_and_missing_workspace(series):
    assert aclnn.aclnnConvolutionBackward(None, 0, None, None) == NULL
    a = conv_call(xs=(2, 4, 9, 9), ws=(6, 4, 3, 3), stride=(2, 2))
    ws, executor, ret = aclnn.aclnnConvolutionBackwardGetWorkspaceSize(**a)
    assert ret == 0
    if ws > 0:
        assert aclnn.aclnnConvolutionBackward(None, ws, executor, None) == NULL


def test_tiling_override_that_cannot_fit(series):
    aclnn.set_tiling_override("ConvolutionBackward", {"baseM": 4096, "baseN": 4096})
    try:
        ws, executor, ret = aclnn.aclnnConvolutionBackwardGetWorkspaceSize(**conv_call())
        assert ret == TILING
        msg = acl.aclGetRecentErrMsg()
        assert "L0" in msg and "does not fit" in msg
        aclnn.set_tiling_override("ConvolutionBackward", {"noSuchField": 1})
        assert aclnn.aclnnConvolutionBackwardGetWorkspaceSize(**conv_call())[2] == TILING
    finally:
        aclnn.set_tiling_override("ConvolutionBackward", None)


@pytest.mark.parametrize("op, stride, mask, words", [
    # a stride past load3d's field: refused in phase 1 (the kernel faulted in phase 2)
    ("Convolution", [64, 64], None, "past load3d's field [1, 63]"),
    ("ConvolutionBackward", [64, 64], [False, True, False], "gradWeight: an img2col stride of 64"),
    # strides of 2^31 - 2, which aclnn accepts in 2D: refused at once (phase 1 took minutes)
    ("ConvolutionBackward", [2147483646, 1], [True, False, False], "sub-pixel phases"),
    ("ConvolutionBackward", [2147483646, 1], [False, True, False], "sub-pixel phases"),
])
def test_strides_the_plan_does_not_model_are_561002_in_phase_1(op, stride, mask, words):
    """aclnn allows 1D / 2D strides to 2^31 - 2; what this plan cannot lay out is said as our
    limit (561002, naming it), quickly, before any launch."""
    import time
    import simulator
    from simulator.enums import AclnnError
    x = np.zeros((1, 4, 66, 66), np.float16)
    w = np.zeros((8, 4, 3, 3), np.float16)
    kw = dict(stride=stride, padding=[0, 0], dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=1,
              cubeMathType=0)
    if op == "Convolution":
        kw.update(input=x, weight=w, bias=None)
    else:
        out = [(66 - 3) // s + 1 for s in stride]
        kw.update(gradOutput=np.zeros((1, 8, *out), np.float16), input=x, weight=w, biasSizes=[8], outputMask=mask)
    t = time.time()
    with pytest.raises(AclnnError) as e:
        simulator.plan(op, "Ascend910B1", **kw)
    assert e.value.status == 561002 and words in str(e.value), str(e.value)
    assert time.time() - t < 20


def test_a_gradinput_of_stride_64_still_runs():
    """Only the GEMMs whose img2col steps by the stride are refused: gradInput's sub-pixel phases
    step by one, so stride 64 x 64 runs (and matches the reference, test_convolution_backward)."""
    import simulator
    r = simulator.plan("ConvolutionBackward", "Ascend910B1", gradOutput=np.zeros((1, 8, 1, 1), np.float16),
                       input=np.zeros((1, 4, 66, 66), np.float16), weight=np.zeros((8, 4, 3, 3), np.float16),
                       biasSizes=[8], stride=[64, 64], padding=[0, 0], dilation=[1, 1], transposed=False,
                       outputPadding=[0, 0], groups=1, outputMask=[True, False, False], cubeMathType=0)
    assert r.workspace_size > 0
