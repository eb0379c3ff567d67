"""Every input a user can give ends cleanly (issue 13): success, exit 2 with one line naming the
field, or a documented aclnn status; never "internal error", never 561000 (our own bugs only),
within a time bound. The examples a new user tried first, then hypothesis over the CLI's
argument space and over profile what-ifs. HYPOTHESIS_EXAMPLES=N runs N generated inputs per
property (tests/conftest.py: the hypothesis profiles).
"""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import simulator
from simulator import TensorLayout
from simulator.cli import main
from simulator.enums import AclnnError, KernelError, aclnnStatus
from simulator.profile import ProfileError, load_profile
from simulator.studies import profile_fields

from conftest import examples

EXAMPLES = 200       # measured: the whole file in about 30 s on a loaded machine
SECONDS = 30          # no single input may take longer (the budget flags below keep big work out)
CLEAN_EXITS = {0, 1, 2}
INTERNAL = ("internal error", "Traceback", "561000", "ACLNN_ERR_INNER ")


def _cli(argv, capsys):
    t = time.time()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    elapsed = time.time() - t
    return code, out, err, elapsed


def _assert_clean(code, err, elapsed, argv):
    assert code in CLEAN_EXITS, (argv, code, err)
    assert not any(s in err for s in INTERNAL), (argv, err)
    assert elapsed < SECONDS, (argv, elapsed)
    if code == 2:
        assert err.startswith("ascend-sim: error: ") and err.count("\n") == 1, (argv, err)
    if code == 1:
        assert err.startswith(("ascend-sim: call rejected: ", "ascend-sim: kernel fault: ")), (argv, err)


# ---- the examples from the issue, as regression tests ----------------------------------------
SMALL = ["--shape", "64,64", "--no-trace"]


@pytest.mark.parametrize("argv, want", [
    (["run", "SiluBackward", "--shape", "0,1024", "--no-trace"], 0),                   # empty: success
    (["run", "SiluBackward", "--shape", "100000,100000,100000", "--mode", "timing", "--no-trace"], 1),
    (["run", "SiluBackward", *SMALL, "--set", "clock_mhz=inf"], 2),
    (["run", "SiluBackward", *SMALL, "--set", "clock_mhz=nan"], 2),
    (["run", "SiluBackward", *SMALL, "--set", "alignment.UB=0"], 2),
    (["run", "SiluBackward", *SMALL, "--set", "alignment.UB=48"], 2),
    (["run", "SiluBackward", *SMALL, "--set", "cores.aiv.buffers.UB=-1"], 2),
    (["run", "SiluBackward", *SMALL, "--set", "cores.aiv.count=0"], 2),
    (["run", "SiluBackward", *SMALL, "--set", "cores.aiv.buffers.UB=1000"], 2),
    (["run", "SiluBackward", *SMALL, "--tiling", "tileLength=abc"], 2),
    (["run", "SiluBackward", *SMALL, "--tiling", "nosuchfield=4"], 2),
    (["tune", "SiluBackward", "--shape", "64,64", "--space", "tileLength=abc", "--workers", "1"], 2),
    (["run", "SiluBackward", "--shape", "64,64", "--seed", "-1", "--no-trace"], 2),
    (["tune", "SiluBackward", "--shape", "64,64", "--top", "0"], 2),
    (["sweep", "traces/silu_smoke.jsonl", "--param", "clock_mhz=1:100000000:1"], 2),
    (["sweep", "traces/silu_smoke.jsonl", "--param", "clock_mhz=1:1e400:1"], 2),
    (["replay", "traces/silu_smoke.jsonl", "--resume"], 2),
    (["run", "ConvolutionBackward", "--shape", "gradOutput=256,512,56,56", "--shape", "input=256,512,56,56",
      "--shape", "weight=512,512,3,3", "--attr", "stride=1,1", "--attr", "padding=1,1", "--attr", "dilation=1,1",
      "--attr", "transposed=false", "--attr", "outputPadding=0,0", "--attr", "groups=1",
      "--attr", "outputMask=1,1,0", "--attr", "cubeMathType=0", "--no-trace"], 2),      # over the memory budget
])
def test_examples_from_the_issue(argv, want, capsys):
    code, out, err, elapsed = _cli(argv, capsys)
    _assert_clean(code, err, elapsed, argv)
    assert code == want, (argv, err)


@pytest.mark.parametrize("where", ["dir", "under_file", "bad_suffix"])
def test_output_paths_are_checked_before_any_work(where, tmp_path, capsys):
    f = tmp_path / "a_file"
    f.write_text("x")
    path = {"dir": tmp_path, "under_file": f / "t.json", "bad_suffix": tmp_path / "t.txt"}[where]
    for argv in (["run", "SiluBackward", "--shape", "64,64", "--trace", path],
                 ["replay", "traces/silu_smoke.jsonl", "--calls", "0", "-o", path, "--workers", "1"],
                 ["sweep", "traces/silu_smoke.jsonl", "--calls", "0", "--param", "clock_mhz=1000", "--plot", path]):
        t = time.time()
        code, out, err, _ = _cli(argv, capsys)
        assert code == 2 and out == "" and ("--trace" in err or "--output" in err or "--plot" in err), (argv, err)
        assert time.time() - t < 5, argv            # refused before the work, not after


def test_a_missing_output_folder_is_created(tmp_path, capsys):
    path = tmp_path / "new" / "deeper" / "t.json"
    code, out, err, _ = _cli(["run", "SiluBackward", "--shape", "64,64", "--trace", path], capsys)
    assert code == 0 and path.exists() and "bound by" in out


def test_an_interrupted_sweep_resumes_from_its_journal(tmp_path, capsys):
    """A journal with some rows (as an interrupted sweep leaves it): --resume runs only the rest
    and the result equals a fresh sweep's, row for row."""
    fresh, resumed = tmp_path / "fresh.csv", tmp_path / "resumed.csv"
    argv = ["sweep", "traces/silu_smoke.jsonl", "--calls", "0-1", "--param", "clock_mhz=1000,1500",
            "--workers", "1", "--no-progress"]
    assert _cli(argv + ["-o", fresh], capsys)[0] == 0
    assert not (tmp_path / "fresh.csv.partial.jsonl").exists()      # removed once the output is whole
    from simulator.studies import load_trace, task_key
    from simulator.studies.distribute import Task
    w = load_trace("traces/silu_smoke.jsonl")
    import json
    rows = {(r["point"], r["call"]): r for r in simulator.studies.read_rows(fresh)}
    journal = tmp_path / "resumed.csv.partial.jsonl"
    task = Task(w.calls[0], "Ascend910B1", {"clock_mhz": 1000}, "fast", 0)     # (sweep's default mode)
    done = {k: v for k, v in rows[(0, 0)].items() if k not in ("soc", "point", "clock_mhz", "call", "label",
                                                                "stream", "count")}
    done["cycles"] = -1.0                          # marks the row that came from the journal
    journal.write_text(json.dumps({"key": task_key(task), "row": done}) + "\n" + '{"key": "cut sh')
    assert _cli(argv + ["-o", resumed, "--resume"], capsys)[0] == 0
    again = {(r["point"], r["call"]): r for r in simulator.studies.read_rows(resumed)}
    assert again[(0, 0)]["cycles"] == -1.0                       # taken from the journal, not rerun
    assert {k: again[k]["cycles"] for k in again if k != (0, 0)} == {k: rows[k]["cycles"] for k in rows if k != (0, 0)}


# ---- the CLI's argument space --------------------------------------------------------------------
# A call that runs (exit 0), varied in ways that keep it valid, with at most one defect whose exit
# the README fixes: 2 for a usage error (unknown operator, SoC or profile field, bad value, bad
# shape), 1 for a call the operator rejects with its aclnn status. The expected exit is computed
# from the case, never read back from the CLI.
LIMITS = ["--no-trace", "--budget-seconds", "3", "--budget-memory", "0.25"]
BASES = {      # operator -> (a small valid call, one of its tiling fields, the SoCs that support it)
    "SiluBackward": (["--shape", "gradOutput=4,1000", "--shape", "self=4,1000", "--dtype", "FLOAT16"],
                     "blockLength", ["Ascend910B1", "Ascend910B4", "Ascend910A"]),
    "GridSampler2DBackward": (["--shape", "gradOutput=1,4,5,5", "--shape", "input=1,4,6,6", "--shape", "grid=1,5,5,2",
                               "--dtype", "FLOAT", "--attr", "interpolationMode=0", "--attr", "paddingMode=0",
                               "--attr", "alignCorners=false", "--attr", "outputMask=1,1"],
                              "pointsPerTile", ["Ascend910B1", "Ascend910B4", "Ascend910A"]),
    "ConvolutionBackward": (["--shape", "gradOutput=1,8,6,6", "--shape", "input=1,4,6,6", "--shape", "weight=8,4,3,3",
                             "--attr", "biasSizes=8", "--attr", "stride=1,1", "--attr", "padding=1,1",
                             "--attr", "dilation=1,1", "--attr", "transposed=false", "--attr", "outputPadding=0,0",
                             "--attr", "groups=1", "--attr", "outputMask=1,1,1", "--attr", "cubeMathType=0",
                             "--dtype", "FLOAT16"],
                            "baseM", ["Ascend910B1", "Ascend910B4", "Ascend910A", "Ascend310P3"]),
    "ConvTbcBackward": (["--shape", "self=5,2,8", "--shape", "input=5,2,4", "--shape", "weight=3,4,8",
                         "--shape", "bias=8", "--attr", "pad=1", "--attr", "cubeMathType=0", "--dtype", "FLOAT16"],
                        "baseM", ["Ascend910B1", "Ascend910B4", "Ascend910A"]),
}
MISMATCHED = {"SiluBackward": "4,999", "GridSampler2DBackward": "3,3,3,3", "ConvolutionBackward": "3,8,6,6",
              "ConvTbcBackward": "5,2,9"}


def _first_shape(args, value):
    args = list(args)
    i = args.index("--shape") + 1
    args[i] = f"{args[i].split('=')[0]}={value}"
    return args


def _dtype(args, value):
    args = list(args)
    args[args.index("--dtype") + 1] = value
    return args


# name -> (what it does to (op, args, tiling field), the exit it must give on operator op)
DEFECTS = {
    "unknown operator": (lambda op, a, t: ("NoSuchOp", a), lambda op: 2),
    "unknown SoC": (lambda op, a, t: (op, a + ["--soc", "Ascend999"]), lambda op: 2),
    "missing profile file": (lambda op, a, t: (op, a + ["--soc", "no_such_chip.yaml"]), lambda op: 2),
    "unknown profile field": (lambda op, a, t: (op, a + ["--set", "no.such.field=3"]), lambda op: 2),
    "non-finite clock": (lambda op, a, t: (op, a + ["--set", "clock_mhz=nan"]), lambda op: 2),
    "zero clock": (lambda op, a, t: (op, a + ["--set", "clock_mhz=0"]), lambda op: 2),
    "negative clock": (lambda op, a, t: (op, a + ["--set", "clock_mhz=-1"]), lambda op: 2),
    "clock not a number": (lambda op, a, t: (op, a + ["--set", "clock_mhz=abc"]), lambda op: 2),
    "no vector cores": (lambda op, a, t: (op, a + ["--set", "cores.aiv.count=0"]), lambda op: 2),
    "unknown dtype": (lambda op, a, t: (op, _dtype(a, "NOPE")), lambda op: 2),
    "shape not integers": (lambda op, a, t: (op, _first_shape(a, "abc")), lambda op: 2),
    "fractional shape": (lambda op, a, t: (op, _first_shape(a, "1.5,2")), lambda op: 2),
    "negative dimension": (lambda op, a, t: (op, _first_shape(a, "-1,4")), lambda op: 2),
    "shape as an expression": (lambda op, a, t: (op, _first_shape(a, "2**40")), lambda op: 2),
    "negative seed": (lambda op, a, t: (op, a + ["--seed", "-1"]), lambda op: 2),
    "seed not a number": (lambda op, a, t: (op, a + ["--seed", "abc"]), lambda op: 2),
    "unknown tiling field": (lambda op, a, t: (op, a + ["--tiling", "bogus=4"]), lambda op: 2),
    "tiling value not a number": (lambda op, a, t: (op, a + ["--tiling", f"{t}=abc"]), lambda op: 2),
    "dtype the operator does not take": (lambda op, a, t: (op, _dtype(a, "INT8")), lambda op: 1),
    "shapes that disagree": (lambda op, a, t: (op, _first_shape(a, MISMATCHED[op])), lambda op: 1),
    "tensor left out (nullptr)": (lambda op, a, t: (op, _first_shape(a, "")), lambda op: 1),
    # timing mode: no data, so the allocation is what refuses it (functional mode's budget says 2 first)
    "larger than device memory": (lambda op, a, t: (op, _first_shape(a, "100000,100000,100000") + ["--mode", "timing"]),
                                  lambda op: 1),
    "a SoC the operator does not support": (lambda op, a, t: (op, a + ["--soc", "Ascend310P3"]),
                                            lambda op: 0 if "Ascend310P3" in BASES[op][2] else 1),
}


@st.composite
def cli_cases(draw):
    """(argv, the exit it must give, the defect's name)."""
    op = draw(st.sampled_from(sorted(BASES)))
    args, tiling_field, socs = BASES[op]
    defect = draw(st.sampled_from([None, *sorted(DEFECTS)]))
    args = args + ["--mode", draw(st.sampled_from(["timing", "timing", "functional", "fast"]))]
    if draw(st.booleans()):
        args += ["--seed", str(draw(st.integers(0, 2 ** 63 - 1)))]
    touches = DEFECTS[defect][0](op, ["--shape", "x=1", "--dtype", "FLOAT"], tiling_field)[1] if defect else []
    if "--soc" not in touches and draw(st.booleans()):
        args += ["--soc", draw(st.sampled_from(socs))]
    if "--set" not in touches and draw(st.booleans()):
        args += ["--set", f"clock_mhz={draw(st.integers(500, 3000))}"]
    want = 0
    if defect:
        change, exit_of = DEFECTS[defect]
        want = exit_of(op)
        op, args = change(op, args, tiling_field)
    return ["run", op, *args, *LIMITS], want, defect or "none"


@settings(max_examples=examples(EXAMPLES), suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(case=cli_cases())
def test_any_cli_call_gives_the_exit_the_readme_promises(case, capsys):
    argv, want, defect = case
    code, out, err, elapsed = _cli(argv, capsys)
    _assert_clean(code, err, elapsed, argv)
    assert code == want, (defect, argv, err)
    assert (err == "") == (want == 0), (defect, argv, err)
    event(f"{defect}: exit {code}")    # --hypothesis-show-statistics counts the outcomes


@pytest.mark.parametrize("mode", ["timing", "fast"])
@pytest.mark.parametrize("defect", sorted(DEFECTS))
@pytest.mark.parametrize("op", sorted(BASES))
def test_each_defect_on_each_operator(op, defect, mode, capsys):
    """The whole catalogue once on every operator, in the exact engine and in fast mode (the
    property above adds the variations)."""
    args, tiling_field, _ = BASES[op]
    change, exit_of = DEFECTS[defect]
    name, args = change(op, args + ["--mode", mode], tiling_field)
    argv = ["run", name, *args, *LIMITS]
    code, out, err, elapsed = _cli(argv, capsys)
    _assert_clean(code, err, elapsed, argv)
    assert code == exit_of(op), (argv, err)


GRID = ["run", "GridSampler2DBackward", "--shape", "gradOutput=1,4,5,5", "--shape", "input=1,4,6,6",
        "--shape", "grid=1,5,5,2", "--attr", "interpolationMode=0", "--attr", "paddingMode=0",
        "--attr", "alignCorners=false", *LIMITS]


@pytest.mark.parametrize("argv", [GRID + ["--dtype", "INT8"],
                                  _first_shape(GRID, "3,3,3,3") + ["--dtype", "FLOAT"]])
def test_a_grid_sampler_call_without_an_output_mask_computes_nothing(argv, capsys):
    """SPEC section 4 (CANN's check order): a null outputMask is success with workspace 0, before
    any other check; the same call with outputMask=1,1 is refused (161002)."""
    code, out, err, elapsed = _cli(argv, capsys)
    _assert_clean(code, err, elapsed, argv)
    assert code == 0 and " 0 cycles" in out and "workspace  0 B" in out, (argv, out, err)
    code, out, err, elapsed = _cli(argv + ["--attr", "outputMask=1,1"], capsys)
    assert code == 1 and "161002" in err, (argv, err)


# ---- profile what-ifs ----------------------------------------------------------------------------
def _what_if_value(v):
    return st.one_of(st.sampled_from([0, -1, 1, 3, 2 ** 40, math.inf, math.nan, -math.inf, "abc", None, True]),
                     st.just(v * 2) if isinstance(v, (int, float)) and not isinstance(v, bool) else st.just(v),
                     st.just(v // 2 if isinstance(v, int) and not isinstance(v, bool) else v))


@settings(max_examples=examples(EXAMPLES), suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_what_if_profile_either_is_refused_or_runs(data):
    """A what-if either fails validation (ProfileError naming the field) or is a machine every
    operator plans on: success or a documented status (561002 when no tiling fits), never a
    division by zero or 561000 inside a run, in the exact engine or in fast mode."""
    soc = data.draw(st.sampled_from(["Ascend910B1", "Ascend910A", "Ascend310P3"]))
    base = load_profile(soc)
    fields = profile_fields(base)
    changes = {}
    for name in data.draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=3, unique=True)):
        changes[name] = data.draw(_what_if_value(fields[name]))
    try:
        prof = base.override(changes)
    except ProfileError as e:
        assert "field" in str(e) or "Value error" in str(e), str(e)
        event("profile refused (ProfileError)")
        return
    calls = [
        ("SiluBackward", dict(gradOutput=TensorLayout((4, 1000), np.float16), self=TensorLayout((4, 1000), np.float16))),
        ("ConvolutionBackward", dict(gradOutput=TensorLayout((1, 8, 6, 6), np.float16),
                                     input=TensorLayout((1, 4, 6, 6), np.float16),
                                     weight=TensorLayout((8, 4, 3, 3), np.float16), biasSizes=[8],
                                     stride=[1, 1], padding=[1, 1], dilation=[1, 1], transposed=False,
                                     outputPadding=[0, 0], groups=1, outputMask=[True, True, True], cubeMathType=0)),
        ("GridSampler2DBackward", dict(gradOutput=TensorLayout((1, 4, 5, 5), np.float32),
                                       input=TensorLayout((1, 4, 6, 6), np.float32),
                                       grid=TensorLayout((1, 5, 5, 2), np.float32), interpolationMode=0,
                                       paddingMode=0, alignCorners=False, outputMask=[True, True])),
    ]
    mode = data.draw(st.sampled_from(["timing", "fast"]))     # (fast mode plans and records alike)
    for op, kw in calls:
        t = time.time()
        try:
            simulator.run(op, profile=prof, mode=mode, trace=False, **kw)
            event(f"{op}: ran")
        except AclnnError as e:
            assert e.status != aclnnStatus.ACLNN_ERR_INNER, (changes, op, str(e))
            event(f"{op}: status {e.status}")
        except KernelError as e:         # a what-if the planner accepted must not fault in its kernel
            pytest.fail(f"{changes}: {op} planned but faulted: {e}")
        assert time.time() - t < SECONDS, (changes, op)


# ---- the Python API -------------------------------------------------------------------------------
def test_recent_error_message_follows_cann(make_device):
    """aclGetRecentErrMsg obtains and clears this thread's messages, the newest on top; nullptr
    (None) when nothing failed."""
    from simulator import acl
    make_device("Ascend910B1")
    assert acl.aclGetRecentErrMsg() is None
    assert acl.aclrtMalloc(0)[1] != 0
    assert acl.aclrtFree(12345) != 0
    msg = acl.aclGetRecentErrMsg()
    assert msg.splitlines()[0].startswith("aclrtFree") and msg.splitlines()[1].startswith("aclrtMalloc")
    assert acl.aclGetRecentErrMsg() is None


def test_lists_work_and_bad_array_likes_are_161002():
    got = simulator.run("SiluBackward", gradOutput=[[1.0, 2.0]], self=np.zeros((1, 2), np.float32)).gradInput
    assert np.allclose(got, [[0.5, 1.0]])         # silu'(0) = 1/2
    for bad in ([[1.0, 2.0], [3.0]], "abc", {"a": 1}):
        with pytest.raises(AclnnError) as e:
            simulator.run("SiluBackward", gradOutput=bad, self=np.zeros((1, 2), np.float32))
        assert e.value.status == aclnnStatus.ACLNN_ERR_PARAM_INVALID and "gradOutput" in e.value.message
    out = np.zeros((1, 2), np.float32)
    out.flags.writeable = False
    with pytest.raises(AclnnError) as e:
        simulator.run("SiluBackward", gradOutput=np.ones((1, 2), np.float32), self=np.zeros((1, 2), np.float32),
                      gradInput=out)
    assert e.value.status == aclnnStatus.ACLNN_ERR_PARAM_INVALID and "read-only" in e.value.message


def test_timing_mode_holds_no_tensor_data():
    """A 4 GiB call in timing mode: layouts only, the same cycles as with arrays of its shape
    (checked on a small shape), and outputs that cost nothing."""
    big = TensorLayout((1024, 1024, 2048), np.float16)
    r = simulator.run("SiluBackward", mode="timing", trace=False, gradOutput=big, self=big)
    assert r.gradInput.shape == big.shape and r.gradInput.strides == (0, 0, 0)
    small = dict(gradOutput=np.ones((64, 1000), np.float16), self=np.ones((64, 1000), np.float16))
    a = simulator.run("SiluBackward", mode="timing", trace=False, **small).cycles
    b = simulator.run("SiluBackward", mode="timing", trace=False,
                      **{k: TensorLayout(v.shape, v.dtype) for k, v in small.items()}).cycles
    assert a == b
    with pytest.raises(AclnnError):
        simulator.run("SiluBackward", mode="functional", gradOutput=big, self=big)


@pytest.mark.parametrize("trace, call", [("traces/resnet50_conv_backward.yaml", 5),
                                         ("traces/fconv_wmt_en_de_conv_tbc_backward.yaml", 14),
                                         ("traces/efficientnet_b0_silu_backward.yaml", 3)])
def test_the_estimate_counts_the_instructions_a_run_executes(trace, call):
    from simulator.studies import build_inputs, load_trace
    c = load_trace(trace).calls[call]
    kw = build_inputs(c, data=False)
    est = simulator.estimate(c.op, tiling=c.tiling, **kw)
    ran = simulator.run(c.op, mode="timing", trace=False, tiling=c.tiling, **kw).report.instructions
    assert abs(est.instructions / ran - 1) < 0.10, (est.instructions, ran)


# --- a review's findings: bad inputs where the output's shape is derived, and API shapes --------
F16 = np.float16


def _status(fn):
    try:
        fn()
    except AclnnError as e:
        return e.status, str(e)
    return 0, ""


@pytest.mark.parametrize("op, kw, status, words", [
    # an input that is null: phase 1 names it (the output stand-in must not hide it)
    ("Relu", dict(self=None), aclnnStatus.ACLNN_ERR_PARAM_NULLPTR, "self is a null pointer"),
    # outputs that cannot be derived: the inputs' own fault, 161002, not "out is a null pointer"
    ("Add", dict(self=np.ones((4, 3), np.float32), other=np.ones((4, 5), np.float32), alpha=1.0),
     aclnnStatus.ACLNN_ERR_PARAM_INVALID, "do not broadcast"),
    ("Mean", dict(self=np.ones((4, 3), np.float32), dim=[0], keepDim=False, dtype=999),
     aclnnStatus.ACLNN_ERR_PARAM_INVALID, "dtype 999"),
    ("Mm", dict(self=np.zeros((3, 16, 32), F16), mat2=np.zeros((2, 32, 8), F16), cubeMathType=0),
     aclnnStatus.ACLNN_ERR_PARAM_INVALID, "2-D"),
    ("Convolution", dict(input=np.zeros((1, 4, 5, 5), F16), weight=np.zeros((8, 4, 3, 3), F16), bias=None,
                         stride=[0, 0], padding=[0, 0], dilation=[1, 1], transposed=False, outputPadding=[0, 0],
                         groups=1, cubeMathType=0), aclnnStatus.ACLNN_ERR_PARAM_INVALID, "stride"),
    ("Convolution", dict(input=np.zeros((1, 4, 1, 1), F16), weight=np.zeros((8, 4, 3, 3), F16), bias=None,
                         stride=[1, 1], padding=[0, 0], dilation=[1, 1], transposed=False, outputPadding=[0, 0],
                         groups=1, cubeMathType=0), aclnnStatus.ACLNN_ERR_PARAM_INVALID, "cannot be derived"),
    ("MaxPool2dWithIndices", dict(self=np.zeros((1, 2, 8, 8), np.float32), kernelSize=[100, 100], stride=[2, 2],
                                  padding=[0, 0], dilation=[1, 1], ceilMode=False),
     aclnnStatus.ACLNN_ERR_PARAM_INVALID, "cannot be derived"),
    # an int or a bool array given as something else
    ("MaxPool2dWithIndices", dict(self=np.zeros((1, 2, 8, 8), np.float32), kernelSize=2, stride=[2, 2],
                                  padding=[0, 0], dilation=[1, 1], ceilMode=False),
     aclnnStatus.ACLNN_ERR_PARAM_INVALID, "kernelSize: an int array is expected"),
    ("ConvolutionBackward", dict(gradOutput=np.zeros((1, 8, 3, 3), F16), input=np.zeros((1, 4, 5, 5), F16),
                                 weight=np.zeros((8, 4, 3, 3), F16), biasSizes=[8], stride=[1, 1], padding=[0, 0],
                                 dilation=[1, 1], transposed=False, outputPadding=[0, 0], groups=1,
                                 outputMask=["a", 0, 0], cubeMathType=0),
     aclnnStatus.ACLNN_ERR_PARAM_INVALID, "outputMask: every element"),
    ("Mean", dict(self=np.ones((4, 3), np.float32), dim=[0.5], keepDim=False, dtype=0),
     aclnnStatus.ACLNN_ERR_PARAM_INVALID, "dim: every element of an int array"),
])
def test_underivable_outputs_and_misshapen_arrays_get_the_documented_status(op, kw, status, words):
    got, msg = _status(lambda: simulator.run(op, mode="timing", **kw))
    assert got == status and words in msg, (got, msg)


def test_empty_tensors_that_the_documents_allow_run():
    # an N-D self of no elements folds into M (its strides were all taken as 1, not dense)
    r = simulator.run("Matmul", self=np.zeros((0, 3, 4), F16), other=np.zeros((4, 5), F16), cubeMathType=0)
    assert r.outputs["out"].shape == (0, 3, 5)
    # max pooling's backward with no element, or no window: gradInput is zeros
    for go, x in [((0, 2, 4, 4), (0, 2, 8, 8)), ((1, 2, 0, 4), (1, 2, 1, 8))]:
        r = simulator.run("MaxPool2dWithIndicesBackward", gradOutput=np.ones(go, np.float32),
                          self=np.ones(x, np.float32), indices=np.zeros(go, np.int32), kernelSize=[2, 2],
                          stride=[2, 2], padding=[0, 0], dilation=[1, 1], ceilMode=False)
        assert r.outputs["gradInput"].shape == x and not r.outputs["gradInput"].any()
