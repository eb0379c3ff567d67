"""Every input a user can give ends cleanly (issue 13): success, exit 2 with one line naming the
field, or a documented aclnn status; never "internal error", never 561000 (our own bugs only),
within a time bound. The examples a new user tried first, then hypothesis over the CLI's
argument space and over profile what-ifs. EDGE_EXAMPLES=N runs N generated inputs per property.
"""
from __future__ import annotations

import math
import os
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

EXAMPLES = int(os.environ.get("EDGE_EXAMPLES", "60"))
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
    task = Task(w.calls[0], "Ascend910B1", {"clock_mhz": 1000}, "timing", 0)
    done = {k: v for k, v in rows[(0, 0)].items() if k not in ("soc", "point", "clock_mhz", "call", "label",
                                                                "stream", "count")}
    done["cycles"] = -1.0                          # marks the row that came from the journal
    journal.write_text(json.dumps({"key": task_key(task), "row": done}) + "\n" + '{"key": "cut sh')
    assert _cli(argv + ["-o", resumed, "--resume"], capsys)[0] == 0
    again = {(r["point"], r["call"]): r for r in simulator.studies.read_rows(resumed)}
    assert again[(0, 0)]["cycles"] == -1.0                       # taken from the journal, not rerun
    assert {k: again[k]["cycles"] for k in again if k != (0, 0)} == {k: rows[k]["cycles"] for k in rows if k != (0, 0)}


# ---- the CLI's argument space -------------------------------------------------------------------
DIM = st.one_of(st.integers(0, 48), st.sampled_from([-1, 10 ** 6, 10 ** 12]))
SHAPE = st.one_of(st.lists(DIM, min_size=1, max_size=5).map(lambda d: ",".join(map(str, d))),
                  st.sampled_from(["", "abc", "4,,4", "1.5,2", "-0", "2**40"]))
DTYPE = st.sampled_from(["FLOAT16", "FLOAT", "BF16", "DOUBLE", "INT8", "float16", "fp32", "NOPE"])
FIELD = st.sampled_from(sorted(profile_fields(load_profile("Ascend910B1"))) + ["no.such.field", "cores", ""])
VALUE = st.one_of(st.integers(-5, 5), st.sampled_from(["0", "-1", "inf", "nan", "1e30", "x2", "/2", "x0", "abc",
                                                       "3", "32", "65536", "4097", "true", "[1,2]"]))


@st.composite
def cli_argv(draw):
    op = draw(st.sampled_from(["SiluBackward", "GridSampler2DBackward", "ConvolutionBackward", "ConvTbcBackward",
                               "NoSuchOp"]))
    argv = ["run", op, "--no-trace", "--budget-seconds", "3", "--budget-memory", "0.25"]
    opdef = simulator.aclnn.REGISTRY.get(op)
    tensors = [p.name for p in opdef.params if p.kind == "tensor" and not p.output] if opdef else ["x"]
    for name in draw(st.lists(st.sampled_from(tensors), max_size=len(tensors), unique=True)) or tensors[:1]:
        argv += ["--shape", f"{name}={draw(SHAPE)}"]
    if draw(st.booleans()):
        argv += ["--dtype", draw(DTYPE)]
    attrs = [p for p in opdef.params if p.kind != "tensor"] if opdef else []
    for p in draw(st.lists(st.sampled_from(attrs), max_size=len(attrs), unique_by=lambda p: p.name)) if attrs else []:
        value = draw(st.one_of(st.sampled_from(["0", "1", "2", "-1", "true", "1,1", "2,2", "0,0", "1,1,0", "x", "null"]),
                               st.integers(-3, 70).map(str)))
        argv += ["--attr", f"{p.name}={value}"]
    if opdef and opdef.tiling_fields and draw(st.booleans()):
        field = draw(st.sampled_from(sorted(opdef.tiling_fields) + ["bogus"]))
        argv += ["--tiling", f"{field}={draw(VALUE)}"]
    for _ in range(draw(st.integers(0, 2))):
        argv += ["--set", f"{draw(FIELD)}={draw(VALUE)}"]
    argv += ["--mode", draw(st.sampled_from(["timing", "timing", "functional"]))]
    if draw(st.booleans()):
        argv += ["--seed", str(draw(st.one_of(st.integers(-2, 2 ** 64), st.just("abc"))))]
    if draw(st.integers(0, 9)) == 0:
        argv += ["--soc", draw(st.sampled_from(["Ascend910A", "Ascend310P3", "Ascend910B4", "Ascend999", "x.yaml"]))]
    return argv


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("EDGE_RANDOM"),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=cli_argv())
def test_any_cli_call_ends_cleanly(argv, capsys):
    code, out, err, elapsed = _cli(argv, capsys)
    _assert_clean(code, err, elapsed, argv)
    event(f"exit {code}")              # --hypothesis-show-statistics counts the outcomes


# ---- profile what-ifs ----------------------------------------------------------------------------
def _what_if_value(v):
    return st.one_of(st.sampled_from([0, -1, 1, 3, 2 ** 40, math.inf, math.nan, -math.inf, "abc", None, True]),
                     st.just(v * 2) if isinstance(v, (int, float)) and not isinstance(v, bool) else st.just(v),
                     st.just(v // 2 if isinstance(v, int) and not isinstance(v, bool) else v))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("EDGE_RANDOM"), suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_what_if_profile_either_is_refused_or_runs(data):
    """A what-if either fails validation (ProfileError naming the field) or is a machine every
    operator plans on: success or a documented status (561002 when no tiling fits), never a
    division by zero or 561000 inside a run."""
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
    for op, kw in calls:
        t = time.time()
        try:
            simulator.run(op, profile=prof, mode="timing", trace=False, **kw)
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
