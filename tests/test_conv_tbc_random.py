"""A randomised comparison of aclnnConvTbcBackward's three gradients against references we did not
derive from the kernels: the float64 formula reference (tests/conv_reference.py, conv_tbc_backward)
on every case and, where torch is installed, torch's autograd through `torch.conv_tbc` in float64
(the two oracles are also checked against each other).

The generator covers the operator's whole valid parameter space (SPEC section 4, restated here, not
read from devices/): every chip that has the operator (Ascend910A on the training series,
Ascend910B1..B4 on A2; the inference series' Ascend310P3 must refuse it with 161002), T, B, Cin,
Cout down to 1, channel counts on both sides of the C0 boundaries (8 for FP32, 16 for FP16 / BF16),
K 1..5 (K > T where the padding makes it valid), pad 0..3, every dtype of the series, mixed dtypes
(promotion f32 with f16 / bf16 -> f32, f16 with bf16 -> f32; bias and the gradients keep their own
dtypes), every cubeMathType the series allows for the promoted dtype, and non-contiguous views:
permuted storage, every-other-element steps, views into a larger buffer (a storage offset),
broadcast (stride-0) inputs, and outputs passed as such views of NaN-filled buffers (the elements
outside the view must stay NaN; input elements outside the view are NaN too, so a kernel that reads
them shows it). A quarter of the cases go through the two-phase ACL API (aclCreateTensor with an
explicit offset and ND or NCL format) instead of simulator.run.

Tolerance per element, as tests/test_convolution_backward.py states it, with A the same gradient
computed from |gradOutput|, |input|, |weight|:

    |out - ref| <= (2 u_c + 1e-5) * A + u_o * |ref| + s_o

u_c the unit roundoff of the Cube's compute dtype (FP16 2^-11, BF16 2^-8, HF32 2^-12, FP32 2^-24;
gradBias is an FP32 vector sum), u_o that of the output dtype (the final cast) and s_o half the
output dtype's smallest subnormal step (FP16 2^-25: a tiny result is rounded to a multiple of 2^-24,
not to u_o of itself). The 1e-5 is FP32 accumulation: there it covers reductions up to ~160 terms;
here an element sums n = K * Cout (gradInput) or T_out * B (gradWeight, gradBias) products, up to
~1,500, so the term is max(1e-5, n * 2^-24), the worst case of n FP32 additions in any order
(the usual gamma_n bound; it is still below 1e-4 of A). A non-finite output is always a failure
(NaN never compares).

The comparison is this file's own, for the accumulation term above (test_convolution_backward's
assert_close, which fails a NaN too since this file found that it did not, keeps 1e-5).

Sizes: T * B * (Cin + Cout) <= 24,000 for most cases (Cin and Cout up to 300, across the Cube's
64 / 128 / 256 tile edges), and 6 % larger cases (T 16..60, B 2..8, Cout 64..300, up to 100,000)
that give the Cube more units than the chip has cores, so that a core runs several in a row.

Cases are seeded and independent of the count: case s is drawn from seed s alone, so
`CONV_TBC_RANDOM_CASES=N` (default 120, ~15 s on the 2-core machine) runs seeds 0..N-1 and a
failing id `s<seed>-...` is re-run with
`python -c "import sys; sys.path.insert(0, 'tests'); import test_conv_tbc_random as t; t.check_case(t.draw_case(<seed>))"`.
A call the simulator refuses (any status code) or that faults while it runs fails the case with
the status and message: the draws are all valid by SPEC.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import simulator
from conftest import BF16, F16, F32, SERIES, private_device
from conv_reference import conv_tbc_backward
from simulator import acl, aclnn
from simulator.enums import AclnnError, KernelError
from simulator.enums import aclFormat as F
from test_convolution_backward import UNIT, compute_dtype

N_CASES = int(os.environ.get("CONV_TBC_RANDOM_CASES", "120"))

# SPEC section 4 (the ConvTbcBackward row), restated independently of devices/ and ops/
SPEC_TBC_DTYPES = {"training": (F32, F16), "inference": (), "A2": (F32, F16, BF16)}
TBC_SOCS = [soc for soc, s in SERIES.items() if SPEC_TBC_DTYPES[s]]
NO_TBC_SOCS = [soc for soc, s in SERIES.items() if not SPEC_TBC_DTYPES[s]]
# profiles in devices/ beyond SPEC section 2 (each file cites its own sources): a few cases each
BEYOND_SPEC_SOCS = sorted(set(simulator.list_socs()) - set(SERIES))
C0_EDGES = (7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 47, 48, 49)
TILE_EDGES = (63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 256, 257)   # the Cube's M / N tiles
MAX_ELEMENTS = 24_000        # T * B * (Cin + Cout): keeps a case to a fraction of a second
LARGE_SHARE, MAX_LARGE = 0.06, 100_000     # the few large cases (up to ~1 s each)
NAMES_IN = ("self", "input", "weight", "bias")
NAMES_OUT = ("gradInput", "gradWeight", "gradBias")
SHORT = {"self": "dy", "input": "x", "weight": "w", "bias": "b",
         "gradInput": "gi", "gradWeight": "gw", "gradBias": "gb"}
DT_SHORT = {F32: "f32", F16: "f16", BF16: "bf16"}
U_OUT = {F32: 2.0 ** -24, F16: 2.0 ** -11, BF16: 2.0 ** -8}
SUB_OUT = {F32: 2.0 ** -150, F16: 2.0 ** -25, BF16: 2.0 ** -134}


def promoted(dts) -> np.dtype:
    s = {np.dtype(d) for d in dts}
    return s.pop() if len(s) == 1 else F32


def valid_cube_math(series: str, prom) -> list[int]:
    """SPEC section 3: the training series' Cube multiplies FP16 only (FLOAT needs 1 or 2 to go
    down to FP16; BF16 is not in its dtypes); A2 takes 0..3 for every dtype."""
    if series == "A2" or np.dtype(prom) == F16:
        return [0, 1, 2, 3]
    return [1, 2]


# ---- the draw ----------------------------------------------------------------------------------
def _channels(rng) -> int:
    r = rng.random()
    if r < 0.45:
        return int(rng.integers(1, 7))
    if r < 0.75:
        return int(rng.choice(C0_EDGES))
    if r < 0.87:
        return int(rng.choice(TILE_EDGES))
    return int(rng.integers(1, 301))


def _draw_layout(rng, ndim: int, is_output: bool) -> dict:
    """How a tensor sits in its storage: `perm` (storage axis order), `step` (axis, start: every
    other element), `margin` (extra elements before / after on each axis: an offset and padded
    strides), `bcast` (an input axis of stride 0)."""
    lay = {}
    if not is_output and rng.random() < 0.12:
        lay["bcast"] = int(rng.integers(0, ndim))
        return lay
    if ndim > 1 and rng.random() < 0.45:
        perm = tuple(int(i) for i in rng.permutation(ndim))
        if perm != tuple(range(ndim)):
            lay["perm"] = perm
    if rng.random() < 0.35:
        lay["step"] = (int(rng.integers(0, ndim)), int(rng.integers(0, 2)))
    if rng.random() < 0.3:
        lay["margin"] = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(ndim))
    return lay


def _lay_code(lay: dict) -> str:
    return "".join(k[0] for k in ("perm", "step", "margin", "bcast") if k in lay)


def draw_case(seed: int) -> dict:
    """One call valid by SPEC, drawn from seed alone."""
    rng = np.random.default_rng([seed, 0x7bc])
    soc = TBC_SOCS[seed % len(TBC_SOCS)]
    series = SERIES[soc]
    large = rng.random() < LARGE_SHARE
    while True:
        K = int(rng.integers(1, 6))
        pad = int(rng.integers(0, 4))
        if large:        # more Cube units than cores: a core runs several, one after another
            T, B = int(rng.integers(16, 61)), int(rng.integers(2, 9))
            cin, cout = _channels(rng), int(rng.integers(64, 301))
        else:
            r = rng.random()
            T = int(rng.integers(1, 4) if r < 0.3 else rng.integers(4, 13) if r < 0.8 else rng.integers(13, 41))
            B = int(rng.integers(1, 5) if rng.random() < 0.8 else rng.integers(5, 9))
            cin, cout = _channels(rng), _channels(rng)
        t_out = T + 2 * pad + 1 - K
        if t_out >= 1 and max(T, t_out) * B * (cin + cout) <= (MAX_LARGE if large else MAX_ELEMENTS):
            break
    dts = SPEC_TBC_DTYPES[series]
    if rng.random() < 0.7:                  # one dtype for all four
        d = dts[int(rng.integers(0, len(dts)))]
        dtypes = (d,) * 4
    else:                                   # each its own (promotion; bias and gradients keep theirs)
        dtypes = tuple(dts[int(i)] for i in rng.integers(0, len(dts), 4))
    prom = promoted(dtypes[:3])
    cms = valid_cube_math(series, prom)
    cm = cms[int(rng.integers(0, len(cms)))]
    path = "acl" if rng.random() < 0.25 else "run"
    layouts = {}
    if rng.random() < 0.5:
        for name in NAMES_IN + NAMES_OUT:
            lay = _draw_layout(rng, 1 if name in ("bias", "gradBias") else 3, name in NAMES_OUT)
            if lay:
                layouts[name] = lay
    # simulator.run: an output may be left out (the simulator allocates it) or passed in
    passed = {n: bool(path == "acl" or n in layouts or rng.random() < 0.5) for n in NAMES_OUT}
    fmts = {n: (F.ACL_FORMAT_NCL if rng.random() < 0.5 else F.ACL_FORMAT_ND)
            for n in ("self", "input", "weight", "gradInput", "gradWeight")}
    return dict(seed=seed, soc=soc, series=series, large=large, T=T, B=B, cin=cin, cout=cout, K=K, pad=pad,
                t_out=t_out, dtypes=dtypes, cm=cm, path=path, layouts=layouts, passed=passed,
                fmts=fmts)


def case_id(c) -> str:
    dt = c["dtypes"]
    dts = DT_SHORT[dt[0]] if len(set(dt)) == 1 else ".".join(DT_SHORT[d] for d in dt)
    bits = [f"s{c['seed']}", c["soc"], f"T{c['T']}B{c['B']}ci{c['cin']}co{c['cout']}k{c['K']}p{c['pad']}",
            dts, f"cm{c['cm']}", c["path"]]
    lays = [f"{SHORT[n]}.{_lay_code(l)}" for n, l in c["layouts"].items()]
    return "-".join(bits + lays)


# ---- tensors in their layouts ------------------------------------------------------------------
def shapes(c) -> dict:
    s = {"self": (c["t_out"], c["B"], c["cout"]), "input": (c["T"], c["B"], c["cin"]),
         "weight": (c["K"], c["cin"], c["cout"]), "bias": (c["cout"],)}
    s.update(gradInput=s["input"], gradWeight=s["weight"], gradBias=s["bias"])
    return s


def place(shape, lay: dict, dtype, fill) -> tuple[np.ndarray, np.ndarray]:
    """(base, view): a C-contiguous buffer filled with `fill` and a view of it with the logical
    shape, laid out as `lay` says (non-negative strides)."""
    nd = len(shape)
    if "bcast" in lay:
        small = tuple(1 if i == lay["bcast"] else d for i, d in enumerate(shape))
        base = np.full(small, fill, dtype=np.float64).astype(dtype)
        return base, np.broadcast_to(base, shape)
    ext = list(shape)
    step_ax, start = lay.get("step", (None, 0))
    margin = lay.get("margin", ((0, 0),) * nd)
    sl = []
    for i in range(nd):
        st = 2 if i == step_ax else 1
        lo = margin[i][0] + (start if i == step_ax else 0)
        ext[i] = lo + (shape[i] - 1) * st + 1 + margin[i][1] + (1 if i == step_ax else 0)
        sl.append(slice(lo, lo + (shape[i] - 1) * st + 1, st))
    perm = lay.get("perm", tuple(range(nd)))
    base = np.full([ext[p] for p in perm], fill, dtype=np.float64).astype(dtype)
    logical = np.transpose(base, np.argsort(perm))
    view = logical[tuple(sl)]
    assert view.shape == tuple(shape) and np.shares_memory(base, view)
    return base, view


def make_data(c) -> dict:
    """name -> (base, view) for the inputs: standard normal values in each tensor's own dtype
    (the references see exactly these), NaN in the storage outside the views."""
    rng = np.random.default_rng([c["seed"], 0xda7a])
    out = {}
    for name, dt in zip(NAMES_IN, c["dtypes"]):
        shape = shapes(c)[name]
        lay = c["layouts"].get(name, {})
        base, view = place(shape, lay, dt, np.nan)
        if "bcast" in lay:
            base[...] = rng.standard_normal(base.shape).astype(dt)
        else:
            view[...] = rng.standard_normal(shape).astype(dt)
        out[name] = (base, view)
    return out


def out_dtypes(c) -> dict:
    # the gradients keep the dtypes of input, weight and bias (the seed document)
    return {"gradInput": c["dtypes"][1], "gradWeight": c["dtypes"][2], "gradBias": c["dtypes"][3]}


def _element_strides(base, view):
    isz = view.itemsize
    off = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return [s // isz for s in view.strides], off // isz


# ---- running the operator ----------------------------------------------------------------------
def _refused(c, status, msg):
    pytest.fail(f"{case_id(c)}: a call valid by SPEC was refused with status {status}: {_short(msg)}\n"
                f"  re-run: {rerun_hint(c)}", pytrace=False)


def _faulted(c, msg):
    pytest.fail(f"{case_id(c)}: a call valid by SPEC faulted while it ran: {_short(msg)}\n"
                f"  re-run: {rerun_hint(c)}", pytrace=False)


def _short(msg) -> str:
    """The first line of a message and, for an internal error that carries a traceback, its
    last line (the exception that started it)."""
    lines = [l for l in str(msg).splitlines() if l.strip()]
    return lines[0] if len(lines) < 2 else f"{lines[0]} [... {lines[-1].strip()}]"


def rerun_hint(c) -> str:
    return (f"python -c \"import sys; sys.path.insert(0, 'tests'); import test_conv_tbc_random as t; "
            f"t.check_case(t.draw_case({c['seed']}))\"")


def run_op(c, data) -> dict:
    """The call, by simulator.run or the two-phase ACL API: name -> (output view as the caller
    sees it, its whole base buffer or None when the simulator allocated it)."""
    views = {n: v for n, (_, v) in data.items()}
    outs = {}
    for name, dt in out_dtypes(c).items():
        if c["passed"][name] or c["path"] == "acl":
            outs[name] = place(shapes(c)[name], c["layouts"].get(name, {}), dt, np.nan)
    if c["path"] == "run":
        refusal = fault = None
        try:
            res = simulator.run("ConvTbcBackward", soc=c["soc"], self=views["self"], input=views["input"],
                                weight=views["weight"], bias=views["bias"], pad=c["pad"],
                                cubeMathType=c["cm"], **{n: v for n, (_, v) in outs.items()})
        except AclnnError as e:
            refusal = e
        except KernelError as e:
            fault = e
        if refusal is not None:
            _refused(c, refusal.status, refusal.message)
        if fault is not None:
            _faulted(c, fault)
        return {n: (res.outputs[n], outs[n][0] if n in outs else None) for n in NAMES_OUT}
    with private_device(c["soc"]) as dev:
        args, dev_out = {}, {}
        for name in NAMES_IN:
            base, view = data[name]
            strides, off = _element_strides(base, view)
            fmt = c["fmts"].get(name, F.ACL_FORMAT_ND)
            args[name] = dev.put(base, view.shape, strides, off, fmt=fmt).tensor
        for name, (base, view) in outs.items():
            strides, off = _element_strides(base, view)
            fmt = c["fmts"].get(name, F.ACL_FORMAT_ND)
            dev_out[name] = dev.put(base, view.shape, strides, off, fmt=fmt)
            args[name] = dev_out[name].tensor
        ws_size, executor, ret = aclnn.aclnnConvTbcBackwardGetWorkspaceSize(
            **args, pad=c["pad"], cubeMathType=c["cm"])
        if ret:
            _refused(c, ret, acl.aclGetRecentErrMsg())
        ws = dev.malloc(ws_size) if ws_size > 0 else None
        ret = aclnn.aclnnConvTbcBackward(ws, ws_size, executor, dev.stream)
        if ret:
            _refused(c, ret, f"phase 2: {acl.aclGetRecentErrMsg()}")
        ret = acl.aclrtSynchronizeStream(dev.stream)
        if ret:
            _faulted(c, f"aclrtSynchronizeStream returned {ret}: {acl.aclGetRecentErrMsg()}")
        result = {}
        for name, (base, view) in outs.items():
            store = dev_out[name].storage().reshape(-1)
            got_base = store[:base.size].reshape(base.shape)
            strides, off = _element_strides(base, view)
            got = np.lib.stride_tricks.as_strided(store[off:], view.shape,
                                                  [s * view.itemsize for s in strides]).copy()
            result[name] = (got, got_base)
        return result


# ---- the checks --------------------------------------------------------------------------------
def reduction_lengths(c) -> dict:
    """How many products each gradient element sums: gradInput over the taps and output
    channels, gradWeight and gradBias over the output steps and the batch."""
    return {"gradInput": c["K"] * c["cout"], "gradWeight": c["t_out"] * c["B"],
            "gradBias": c["t_out"] * c["B"]}


def tolerance(ref, absref, comp: str, out_dtype, n: int) -> np.ndarray:
    od = np.dtype(out_dtype)
    acc = max(1e-5, n * 2.0 ** -24)
    return (2 * UNIT[comp] + acc) * absref + U_OUT[od] * np.abs(ref) + SUB_OUT[od]


def assert_close(c, name, out, ref, absref, comp, what):
    out = np.asarray(out)
    assert out.shape == ref.shape, f"{case_id(c)}: {name} shape {out.shape} != {ref.shape}"
    assert out.dtype == out_dtypes(c)[name], f"{case_id(c)}: {name} dtype {out.dtype}"
    out64 = out.astype(np.float64)
    tol = tolerance(ref, absref, comp, out.dtype, reduction_lengths(c)[name])
    err = np.abs(out64 - ref)
    bad = ~(err <= tol)                         # NaN / inf fail
    if bad.any():
        idx = [tuple(int(j) for j in i) for i in np.argwhere(bad)[:4]]
        worst = np.unravel_index(np.nanargmax(np.where(bad, err / tol, -1)), err.shape) \
            if np.isfinite(err[bad]).any() else idx[0]
        lines = [f"{i}: got {out64[i]!r} ref {ref[i]!r} tol {tol[i]:.3g}" for i in idx]
        pytest.fail(f"{case_id(c)}: {name} vs {what}: {int(bad.sum())} of {bad.size} elements "
                    f"outside tolerance (compute {comp}, output {np.dtype(out.dtype).name}); worst at "
                    f"{tuple(int(j) for j in worst)}: err {err[worst]:.3g} tol {tol[worst]:.3g}\n  "
                    + "\n  ".join(lines) + f"\n  re-run: {rerun_hint(c)}", pytrace=False)


def references(c, data):
    v = {n: np.asarray(data[n][1]).astype(np.float64) for n in NAMES_IN}
    ref = conv_tbc_backward(v["self"], v["input"], v["weight"], c["pad"])
    absref = conv_tbc_backward(np.abs(v["self"]), np.abs(v["input"]), np.abs(v["weight"]), c["pad"])
    return v, ref, absref


def comp_dtypes(c):
    comp = compute_dtype(c["series"], c["dtypes"][:3], c["cm"])
    return {"gradInput": comp, "gradWeight": comp, "gradBias": "FLOAT"}


_RESULTS: dict[int, dict] = {}            # seed -> outputs, for the torch comparison
_FAILED: dict[int, str] = {}              # seed -> why the formula comparison failed


def check_case(c) -> dict:
    """Run case c and check it against the formula reference; returns the outputs."""
    data = make_data(c)
    before = {n: b.copy() for n, (b, _) in data.items()}
    got = run_op(c, data)
    for n, (b, _) in data.items():            # the inputs (and their storage) are not modified
        assert np.array_equal(b, before[n], equal_nan=True), f"{case_id(c)}: {n} was modified"
    _, ref, absref = references(c, data)
    comps = comp_dtypes(c)
    outs = {}
    for i, name in enumerate(NAMES_OUT):
        out, base = got[name]
        if base is not None:                  # storage outside the output view stays NaN
            outside = base[~_mask_of(c, name, base)]
            assert np.isnan(outside.astype(np.float32)).all(), \
                f"{case_id(c)}: {name}: storage outside the output view was written"
        assert_close(c, name, out, ref[i], absref[i], comps[name], "the formula reference")
        outs[name] = np.array(out)
    _RESULTS[c["seed"]] = outs
    return outs


def _mask_of(c, name, base) -> np.ndarray:
    mbase, mview = place(shapes(c)[name], c["layouts"].get(name, {}), bool, False)
    mview[...] = True
    assert mbase.shape == base.shape
    return mbase


CASES = [draw_case(i) for i in range(N_CASES)]
IDS = [case_id(c) for c in CASES]


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_conv_tbc_backward_random(c):
    try:
        check_case(c)
    except BaseException as e:
        _FAILED[c["seed"]] = str(e).splitlines()[0].removeprefix(f"{case_id(c)}: ") if str(e) else repr(e)
        raise


def torch_grads(torch, v: dict, pad: int):
    # contiguous copies: conv_tbc .view()s its operands
    t = {n: torch.from_numpy(np.ascontiguousarray(v[n])).requires_grad_(n != "self") for n in NAMES_IN}
    y = torch.conv_tbc(t["input"], t["weight"], t["bias"], pad)
    assert tuple(y.shape) == v["self"].shape
    y.backward(t["self"])
    return tuple(t[n].grad.numpy() for n in ("input", "weight", "bias"))


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_conv_tbc_backward_random_vs_torch(c):
    """The formula reference against torch's autograd of conv_tbc in float64 (both float64 sums
    of at most ~1,500 products: they agree to ~1,500 * 2^-53 = 2e-13 of A, and 1e-12 A allows for
    that), then the simulator's outputs against torch with the tolerance above. A case whose
    outputs already failed against the formula fails here too, without a second simulator run."""
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    v, ref, absref = references(c, make_data(c))
    tref = torch_grads(torch, v, c["pad"])
    for i, name in enumerate(NAMES_OUT):
        diff = np.abs(ref[i] - tref[i])
        assert (diff <= 1e-12 * absref[i] + 1e-300).all(), \
            f"{case_id(c)}: {name}: the formula reference and torch disagree by {diff.max():.3g}"
    if c["seed"] in _FAILED:
        pytest.fail(f"{case_id(c)}: not compared with torch; it failed against the formula reference: "
                    f"{_FAILED[c['seed']]}", pytrace=False)
    outs = _RESULTS.get(c["seed"]) or check_case(c)
    comps = comp_dtypes(c)
    for i, name in enumerate(NAMES_OUT):
        assert_close(c, name, outs[name], tref[i], absref[i], comps[name], "torch.conv_tbc autograd")


@pytest.mark.parametrize("soc", NO_TBC_SOCS)
def test_series_without_the_operator_refuses_it(soc):
    """SPEC section 4: the inference series does not have aclnnConvTbcBackward (161002), for
    calls that are valid on the others."""
    for seed in range(0, 40, 7):
        c = dict(draw_case(seed), soc=soc)
        data = make_data(c)
        with pytest.raises(AclnnError) as e:
            simulator.run("ConvTbcBackward", soc=soc, **{n: data[n][1] for n in NAMES_IN},
                          pad=c["pad"], cubeMathType=c["cm"])
        assert e.value.status == 161002, (case_id(c), e.value)


@pytest.mark.parametrize("soc", BEYOND_SPEC_SOCS)
def test_chip_beyond_spec_runs_or_refuses_the_operator(soc):
    """A profile beyond SPEC section 2 runs the first drawn cases (calls valid on the training and
    A2 series) against the formula reference if its series has the operator, else refuses them."""
    support = simulator.load_profile(soc).supports("ConvTbcBackward")
    for seed in range(3):
        c = dict(draw_case(seed), soc=soc, seed=10**9 + seed)   # its own key in _RESULTS
        if support is not None:
            check_case(c)
            continue
        data = make_data(c)
        with pytest.raises(AclnnError) as e:
            simulator.run("ConvTbcBackward", soc=soc, **{n: data[n][1] for n in NAMES_IN},
                          pad=c["pad"], cubeMathType=c["cm"])
        assert e.value.status == 161002, (case_id(c), e.value)


def test_every_chip_profile_is_covered():
    """Every SoC profile in devices/ is either drawn here, checked to refuse the operator, or run by
    the test above."""
    import pathlib
    devices = pathlib.Path(simulator.__file__).resolve().parent.parent / "devices"
    socs = {p.stem for p in devices.glob("*.yaml") if not p.stem.startswith("_")}
    assert socs == set(TBC_SOCS) | set(NO_TBC_SOCS) | set(BEYOND_SPEC_SOCS), socs
    assert set(BEYOND_SPEC_SOCS).isdisjoint(SERIES)
    if len(CASES) >= len(TBC_SOCS):
        assert {c["soc"] for c in CASES} == set(TBC_SOCS)


def test_a_refusal_is_a_failure_not_a_skip(monkeypatch):
    """A valid call the simulator refuses fails the case (pytest's Failed), on both paths."""
    def refuse(*a, **k):
        raise AclnnError(161002, "refused for the test")
    monkeypatch.setattr(simulator, "run", refuse)
    c = dict(draw_case(0), path="run")
    with pytest.raises(pytest.fail.Exception, match="refused with status 161002"):
        check_case(c)
    monkeypatch.setattr(aclnn, "aclnnConvTbcBackwardGetWorkspaceSize", lambda **k: (0, None, 161002),
                        raising=False)
    c = dict(draw_case(0), path="acl")
    with pytest.raises(pytest.fail.Exception, match="refused with status 161002"):
        check_case(c)
