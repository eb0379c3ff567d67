"""Every input ends cleanly: the documented exit code, one line on stderr, never an internal
error, within a time and memory bound. First one case of each class of hostile input that once
ended badly (each class is fixed at its root: simulator/inputs.py reads every file and coerces
every number, pydantic schemas check sweep files, baselines and reports); then a seeded fuzzer
over every command and every input file kind (valid, nearly valid, hostile), run through the
CLI's main in this process. FUZZ_EXAMPLES=N runs N generated invocations (a hunt); CI runs a
fixed, derandomised set (tests/conftest.py).
"""
from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

from simulator.cli import main

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "traces" / "silu_smoke.jsonl"
SECONDS = 30                      # no single invocation may take longer
PEAK_RSS_BYTES = 2 << 30          # nor may an invocation raise the process's peak memory by more
INTERNAL = ("internal error", "Traceback", "561000", "ACLNN_ERR_INNER (", "internal simulator error")
PREFIX = {2: ("ascend-sim: error: ",),
          1: ("ascend-sim: call rejected: ", "ascend-sim: kernel fault: ", "ascend-sim: "),
          3: ("",), 0: ("",), 130: ("ascend-sim: interrupted",)}


def cli(argv, capsys, cwd: Path | None = None):
    """(exit code, stdout, stderr) of one in-process invocation, checked for what every
    invocation owes: an exit in 0-3, one line on stderr for an error, no internal error, within
    SECONDS and the memory bound."""
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    # the growth of the peak: the suite's process has its own peak from the tests before this one
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t = time.monotonic()
    try:
        code = main([str(a) for a in argv])
    finally:
        os.chdir(old)
    elapsed = time.monotonic() - t
    out, err = capsys.readouterr()
    assert code in (0, 1, 2, 3, 130), (argv, code, err)
    assert not any(s in err for s in INTERNAL), (argv, err)
    assert elapsed < SECONDS, (argv, elapsed)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak < PEAK_RSS_BYTES, argv
    if code in (1, 2, 130) and err:       # the error is one line, the last (a study may say what it starts first)
        last = err.splitlines()[-1]
        assert last.startswith(PREFIX[code]) and err.endswith("\n"), (argv, err)
        assert sum(line.startswith("ascend-sim:") for line in err.splitlines()) == 1, (argv, err)
    if code in (2, 130):
        assert err, argv
    return code, out, err


# ---- one case of each class, with the exit it must give -----------------------------------------
TRACE_YAML = ("format: ascend-sim/workload-trace/1\ncalls:\n"
              "  - {op: SiluBackward, dtype: FLOAT16, tensors: {gradOutput: [4, 64], self: [4, 64]}}\n")
REPORT = {"soc": "Ascend910B1", "op": "Add", "mode": "timing", "clock_mhz": 1800, "cores": {},
          "launches": [{"core_cycles": 100, "sides": {"aiv": {"cycles": 100, "busy": {"PIPE_V": 50}}}}]}
OP_SUMMARY = ("Op Name,OP Type,Block Num,Task Duration(us),aiv_time(us),aiv_vec_time(us)\n"
              "add,Add,8,1.0,0.9,0.5\n")


KERNEL = """
import numpy as np
from simulator.kernel import GM_ADDR, Adds, DataCopy, GlobalTensor, TPipe, TPosition, TQue, half
{top}

def body(x: GM_ADDR, n):
    {pre}
    g = GlobalTensor(half)
    g.SetGlobalBuffer(x, n)
    pipe = TPipe()
    qi, qo = TQue(TPosition.VECIN, 1), TQue(TPosition.VECOUT, 1)
    pipe.InitBuffer(qi, 1, n * 2)
    pipe.InitBuffer(qo, 1, n * 2)
    a = qi.AllocTensor(half)
    DataCopy(a, g[0], n)
    qi.EnQue(a)
    a = qi.DeQue(half)
    b = qo.AllocTensor(half)
    {mid}
    qo.EnQue(b)
    qi.FreeTensor(a)
    b = qo.DeQue(half)
    DataCopy(g[0], b, n)
    qo.FreeTensor(b)


def launch():
    {launch}
    return {{"body": body, "block_dim": {block_dim}, "args": {{"x": np.ones({n}, np.float16), "n": {n}}}}}


def check(outputs):
    {check}
    assert (outputs["x"] == 2).all()
"""


def kernel_file(top="", pre="pass", mid="Adds(b, a, 1.0, n)", launch="pass", block_dim="2", check="pass",
                n=64) -> str:
    return KERNEL.format(top=top, pre=pre, mid=mid, launch=launch, block_dim=block_dim, check=check, n=n)


def _deep(n):
    return "[" * n + "]" * n


CLASSES = {
    # reading files: a folder, bytes that are not UTF-8, nesting that exhausts a parser
    "trace is a folder": ({"t.yaml/": None}, ["replay", "t.yaml"], 2),
    "trace is binary": ({"t.yaml": bytes(range(256))}, ["replay", "t.yaml"], 2),
    "trace is Latin-1": ({"t.yaml": "name: caf\xe9\n".encode("latin-1")}, ["replay", "t.yaml"], 2),
    "trace nested deep (JSON)": ({"t.json": _deep(100_000)}, ["replay", "t.json"], 2),
    "trace nested deep (YAML)": ({"t.yaml": _deep(5_000)}, ["replay", "t.yaml"], 2),
    "profile is a folder": ({"p.yaml/": None}, ["chip", "p.yaml"], 2),
    "profile is binary": ({"p.yaml": b"\xff\xfe\x00"}, ["chip", "p.yaml"], 2),
    "profile nested deep": ({"p.yaml": "a: " + _deep(3_000)}, ["chip", "p.yaml"], 2),
    "kernel file is a folder": ({"k.py/": None}, ["kernel", "k.py"], 2),
    "report is binary": ({"r.json": b"\x80" * 10, "m.csv": OP_SUMMARY}, ["compare", "m.csv", "--report", "r.json"], 2),
    "CSV is a folder": ({"r.json": json.dumps(REPORT), "m.csv/": None}, ["compare", "m.csv", "--report", "r.json"], 2),
    # numbers: not finite, too large, relative what-ifs with a factor that is not a factor
    "Infinity in a JSON trace": ({"t.json": '{"calls": [{"op": "SiluBackward", "dtype": "FLOAT16", '
                                            '"tensors": {"gradOutput": [Infinity], "self": [4]}}]}'},
                                 ["replay", "t.json"], 2),
    "dimension too large for numpy": ({"t.yaml": TRACE_YAML.replace("[4, 64]", "[100000000000000000000000, 4]", 1)},
                                      ["replay", "t.yaml", "--mode", "timing"], 2),
    "null in a shape": ({"t.yaml": TRACE_YAML.replace("[4, 64]", "[null, 64]", 1)}, ["replay", "t.yaml"], 2),
    "what-if /0": ({}, ["chip", "Ascend910B1", "--set", "clock_mhz=/0"], 2),
    "what-if factor that underflows to 0": ({}, ["chip", "Ascend910B1", "--set", "clock_mhz=/1e-400"], 2),
    "what-if factor not a number": ({}, ["chip", "Ascend910B1", "--set", "clock_mhz=x."], 2),
    "what-if product not finite": ({}, ["chip", "Ascend910B1", "--set", "clock_mhz=x1e308"], 2),
    # study files with the wrong types
    "sweep workload a number": ({"s.yaml": "workload: 3\n"}, ["sweep", "s.yaml"], 2),
    "sweep workload null": ({"s.yaml": "workload: null\n"}, ["sweep", "s.yaml"], 2),
    "sweep parameters a list": ({"s.yaml": f"workload: {SMOKE}\nparameters: [1, 2]\n"}, ["sweep", "s.yaml"], 2),
    "sweep parameter with no values": ({"s.yaml": f"workload: {SMOKE}\nparameters: {{clock_mhz: []}}\n"},
                                       ["sweep", "s.yaml"], 2),
    "sweep set a list": ({"s.yaml": f"workload: {SMOKE}\nset: [1]\nparameters: {{clock_mhz: [1000]}}\n"},
                         ["sweep", "s.yaml"], 2),
    "sweep socs nested": ({"s.yaml": f"workload: {SMOKE}\nsocs: [[1]]\nparameters: {{clock_mhz: [1000]}}\n"},
                          ["sweep", "s.yaml"], 2),
    "sweep calls a float": ({"s.yaml": f"workload: {SMOKE}\ncalls: 3.5\nparameters: {{clock_mhz: [1000]}}\n"},
                            ["sweep", "s.yaml"], 2),
    "sweep plot a number": ({"s.yaml": f"workload: {SMOKE}\nplot: 3\nparameters: {{clock_mhz: [1000]}}\n"},
                            ["sweep", "s.yaml"], 2),
    # compare on reports with missing fields, a zero clock, non-finite block counts
    "report with zero clock": ({"r.json": json.dumps(dict(REPORT, clock_mhz=0)), "m.csv": OP_SUMMARY},
                               ["compare", "m.csv", "--report", "r.json"], 2),
    "report launch without cycles": ({"r.json": json.dumps(dict(REPORT, launches=[{}])), "m.csv": OP_SUMMARY},
                                     ["compare", "m.csv", "--report", "r.json"], 2),
    "report without mode": ({"r.json": json.dumps({k: v for k, v in REPORT.items() if k != "mode"}),
                             "m.csv": OP_SUMMARY}, ["compare", "m.csv", "--report", "r.json"], 0),
    "block count inf": ({"r.json": json.dumps(REPORT), "m.csv": OP_SUMMARY.replace(",8,", ",inf,")},
                        ["compare", "m.csv", "--report", "r.json"], 2),
    # regress baselines keyed or valued with the wrong types
    "baseline keyed by a number": ({"t.yaml": TRACE_YAML + "baselines: {1: {calls: [5]}}\n"},
                                   ["regress", "t.yaml", "--soc", "1"], 2),
    "baseline not finite": ({"t.yaml": TRACE_YAML + "baselines: {Ascend910B1: {calls: [.inf]}}\n"},
                            ["regress", "t.yaml"], 2),
    "baseline a word": ({"t.yaml": TRACE_YAML + "baselines: {Ascend910B1: {calls: [fast]}}\n"},
                        ["regress", "t.yaml"], 2),
    "baseline a list": ({"t.yaml": TRACE_YAML + "baselines: {Ascend910B1: [1]}\n"}, ["regress", "t.yaml"], 2),
    "baseline total negative": ({"t.yaml": TRACE_YAML + "baselines: {Ascend910B1: {total: -1, calls: [5]}}\n"},
                                ["regress", "t.yaml"], 2),
    # kernel files: SystemExit anywhere, a body that never ends, absurd block counts, the user's errors
    "kernel that runs": ({"k.py": kernel_file()}, ["kernel", "k.py"], 0),
    "kernel whose check fails": ({"k.py": kernel_file(mid="Adds(b, a, 2.0, n)")}, ["kernel", "k.py"], 1),
    "sys.exit at import": ({"k.py": kernel_file(top="raise SystemExit(3)")}, ["kernel", "k.py"], 2),
    "sys.exit in launch": ({"k.py": kernel_file(launch="raise SystemExit(7)")}, ["kernel", "k.py"], 1),
    "sys.exit in the body": ({"k.py": kernel_file(pre="raise SystemExit(9)")}, ["kernel", "k.py"], 1),
    "sys.exit in check": ({"k.py": kernel_file(check="raise SystemExit(5)")}, ["kernel", "k.py"], 1),
    "a body that never ends": ({"k.py": kernel_file(pre="while True: pass")},
                               ["kernel", "k.py", "--budget-seconds", "1"], 2),
    "an import that never ends": ({"k.py": kernel_file(top="while True: pass")},
                                  ["kernel", "k.py", "--budget-seconds", "1"], 2),
    "a launch() that never ends": ({"k.py": kernel_file(launch="while True: pass")},
                                   ["kernel", "k.py", "--budget-seconds", "1"], 2),
    "a check() that never ends": ({"k.py": kernel_file(check="while True: pass")},
                                  ["kernel", "k.py", "--budget-seconds", "1"], 2),
    "block_dim 10**9": ({"k.py": kernel_file(block_dim="10**9")}, ["kernel", "k.py"], 2),
    "block_dim inf": ({"k.py": kernel_file(block_dim="float('inf')")}, ["kernel", "k.py"], 2),
    "division by zero in the body": ({"k.py": kernel_file(pre="1 / 0")}, ["kernel", "k.py"], 1),
    "wrong argument in the body": ({"k.py": kernel_file(mid="Adds(b, a, 1.0, 'n')")}, ["kernel", "k.py"], 1),
    # outputs: an empty path is not the current folder; no folder is made at the filesystem root
    "empty --msprof-out": ({}, ["run", "SiluBackward", "--shape", "4,4", "--msprof-out", ""], 2),
    "empty --trace": ({}, ["run", "SiluBackward", "--shape", "4,4", "--trace", ""], 2),
    "--trace in a new folder at /": ({}, ["run", "SiluBackward", "--shape", "4,4", "--trace",
                                          "/ascend-sim-no-such-folder/t.json"], 2),
    "--trace in /proc": ({}, ["run", "SiluBackward", "--shape", "4,4", "--trace", "/proc/t.json"], 2),
    # what-ifs that pass their types but leave no core for a kernel kind
    "no core runs vector kernels": ({}, ["run", "SiluBackward", "--shape", "4,4", "--set", "cores.aiv.runs=[]"], 2),
    "vector kernels on a core with no vector unit": ({}, ["run", "SiluBackward", "--shape", "4,4", "--set",
                                                           "cores.aic.runs=[cube,mix,vector]"], 2),
    "mix kernels on a core with no cube unit": ({}, ["run", "SiluBackward", "--shape", "4,4", "--set",
                                                     "cores.aiv.runs=[vector,mix]"], 2),
    "a list field given a word": ({}, ["run", "SiluBackward", "--shape", "4,4", "--set", "cores.aiv.runs=vector"], 2),
    "a core without the pipe a copy needs": ({}, ["run", "SiluBackward", "--shape", "4,4", "--set",
                                                  "cores.aiv.pipes=[PIPE_S]"], 1),
    "clock beyond physics": ({}, ["run", "SiluBackward", "--shape", "4,4", "--set", "clock_mhz=1e300"], 2),
    "bandwidth that rounds to nothing": ({}, ["run", "SiluBackward", "--shape", "4,4", "--set",
                                              "device_memory.bandwidth_GBps=1e-300"], 2),
    # a Dask address that does not parse, a LocalCluster of no workers
    "scheduler address": ({}, ["replay", str(SMOKE), "--calls", "0", "--scheduler", "::::"], 2),
    "LocalCluster of 0": ({}, ["replay", str(SMOKE), "--calls", "0", "--scheduler", "local:0"], 2),
    "block count nan": ({"r.json": json.dumps(REPORT), "m.csv": OP_SUMMARY.replace(",8,", ",nan,")},
                        ["compare", "m.csv", "--report", "r.json"], 2),
    # the third round: YAML aliases that stand for 10**9 values, OS limits on paths, user code
    # raising BaseException, a TLS scheduler without settings, a selection of no call, what-ifs on
    # operator options, text and null where numbers go, a UB what-if below one tile
    "alias bomb in a trace": ({"t.yaml": TRACE_YAML + "notes:\n" + "".join(
        f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i else 'x'] * 10)}]\n" for i in range(9))}, ["replay", "t.yaml"], 2),
    "alias bomb in a profile": ({"p.yaml": "inherits: Ascend910B1\nx:\n" + "".join(
        f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i else 'x'] * 10)}]\n" for i in range(9))}, ["chip", "p.yaml"], 2),
    "an alias inside its own value": ({"t.yaml": TRACE_YAML + "notes: &a [1, *a]\n"}, ["replay", "t.yaml"], 2),
    "a 300-character --trace": ({}, ["run", "SiluBackward", "--shape", "4,4", "--trace", "t" * 300 + ".json"], 2),
    "a 300-character -o": ({"t.yaml": TRACE_YAML}, ["replay", "t.yaml", "-o", "o" * 300 + ".csv"], 2),
    "a 300-character --soc path": ({}, ["run", "SiluBackward", "--shape", "4,4", "--soc", "s" * 300 + ".yaml"], 2),
    "BaseException in the body": ({"k.py": kernel_file(pre="raise BaseException('b')")}, ["kernel", "k.py"], 1),
    "GeneratorExit in the body": ({"k.py": kernel_file(pre="raise GeneratorExit")}, ["kernel", "k.py"], 1),
    "GeneratorExit in launch": ({"k.py": kernel_file(launch="raise GeneratorExit")}, ["kernel", "k.py"], 1),
    "BaseException at import": ({"k.py": kernel_file(top="raise BaseException('b')")}, ["kernel", "k.py"], 2),
    "KeyboardInterrupt in the body": ({"k.py": kernel_file(pre="raise KeyboardInterrupt")}, ["kernel", "k.py"], 130),
    "tls:// scheduler without TLS settings": ({}, ["replay", str(SMOKE), "--calls", "0", "--scheduler",
                                                  "tls://127.0.0.1:8786"], 2),
    "a scheduler scheme we do not speak": ({}, ["replay", str(SMOKE), "--calls", "0", "--scheduler", "ws://h:1"], 2),
    "UB below one tile": ({}, ["run", "SiluBackward", "--shape", "4096", "--set", "cores.aiv.buffers.UB=1024"], 1),
    "an exception whose message raises": ({"k.py": kernel_file(
        top="class E(Exception):\n    def __str__(self):\n        return 1 / 0", launch="raise E()")},
        ["kernel", "k.py"], 1),
    "a sweep selecting no call": ({"s.yaml": f"workload: {SMOKE}\ncalls: []\nparameters: {{clock_mhz: [1000]}}\n"
                                             f"output: o/rows.csv\n"}, ["sweep", "s.yaml"], 2),
    "a what-if on max_rank past any rank": ({}, ["run", "SiluBackward", "--shape", "4,4", "--set",
                                                 "operators.SiluBackward.max_rank=x1e300"], 2),
    "a what-if giving a bool option a list": ({}, ["chip", "Ascend910B1", "--set",
                                                   "operators.ConvolutionBackward.options.empty_tensors=[1]"], 2),
    "null in a stride": ({"t.yaml": "calls:\n  - " + (
        "{op: ConvolutionBackward, dtype: FLOAT16, tensors: {gradOutput: [1, 4, 8, 8], input: [1, 4, 8, 8], "
        "weight: [4, 4, 3, 3]}, attrs: {biasSizes: [4], stride: [null, 1], padding: [1, 1], dilation: [1, 1], "
        "transposed: false, outputPadding: [0, 0], groups: 1, outputMask: [true, true, false], cubeMathType: 0}}\n")},
                         ["run", "--file", "t.yaml", "--call", "0"], 2),
    "text in a shape list": ({"t.yaml": TRACE_YAML.replace("[4, 64]", "['4', 64]", 1)}, ["replay", "t.yaml"], 2),
    "an array of text as a kernel argument": ({"k.py": kernel_file().replace("np.ones({n}, np.float16)".format(n=64),
                                                                             "np.array(['a', ''])")}, ["kernel", "k.py"], 2),
}


def _write(folder: Path, files: dict) -> None:
    for name, content in files.items():
        p = folder / name.rstrip("/")
        if name.endswith("/"):
            p.mkdir()
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)


@pytest.mark.parametrize("case", sorted(CLASSES))
def test_each_class_of_hostile_input_ends_with_its_exit(case, tmp_path, capsys):
    files, argv, want = CLASSES[case]
    _write(tmp_path, files)
    extra = ["--no-trace"] if argv[0] in ("run", "kernel") and "--trace" not in argv else []
    code, out, err = cli(argv + extra, capsys, cwd=tmp_path)
    assert code == want, (case, err)
    assert not Path("/ascend-sim-no-such-folder").exists()
    assert not (tmp_path / "o").exists()            # a refused sweep makes no output folder


@pytest.mark.parametrize("argv, field", [
    (["run", "SiluBackward", "--shape", "4096", "--set", "cores.aiv.buffers.UB=1024"], "cores.aiv.buffers.UB"),
    (["run", "SiluBackward", "--shape", "4096", "--soc", "Ascend910A", "--set", "cores.aicore.buffers.UB=1024"],
     "cores.aicore.buffers.UB"),
    (["replay", str(SMOKE), "--calls", "4", "--set", "cores.aiv.buffers.UB=8192"], "cores.aiv.buffers.UB"),
])
def test_a_what_if_below_one_tile_names_the_field_to_raise(argv, field, capsys):
    """A UB what-if too small for the operator's smallest tile: the operator's tiling refusal
    (561002, as CANN's tiling would fail on such a chip) says how much UB one tile needs and which
    profile field to raise, never a tiling override the user did not give."""
    code = main(argv + ["--no-trace"] * (argv[0] == "run") + ["--workers", "1", "--no-progress"] * (argv[0] == "replay"))
    out, err = capsys.readouterr()
    text = out + err
    assert code == 1, text
    assert "tiling override" not in text and f"raise {field} to at least" in text, text
    need = int(text.split(f"raise {field} to at least ")[1].split()[0])
    more = [a.replace("=1024", f"={need}").replace("=8192", f"={need}") for a in argv]   # exactly enough runs
    assert main(more + ["--no-trace"] * (argv[0] == "run") + ["--workers", "1", "--no-progress"] * (argv[0] == "replay")) == 0
    capsys.readouterr()


def test_a_refusal_recorded_as_baseline_that_now_runs_says_so(tmp_path, capsys):
    """A call recorded as refused that now runs fails the regression, and the line under the
    table says what changed (not the row's own status, 'ok')."""
    (tmp_path / "t.yaml").write_text(TRACE_YAML + "baselines: {Ascend910B1: {calls: ['rejected 161002']}}\n")
    code, out, err = cli(["regress", str(tmp_path / "t.yaml"), "--workers", "1"], capsys)
    assert code == 3, (out, err)
    assert "call 0: recorded as 'rejected 161002', now runs (" in out, out
    assert "call 0: ok" not in out, out


# ---- the fuzzer ----------------------------------------------------------------------------------
# Each generated case is one invocation: a command, its arguments and the files it reads, made
# valid, nearly valid (one field or argument wrong in a way the docs give an exit for) or
# hostile (a folder, binary bytes, Latin-1, absurd nesting, a file over the size limit, text
# that is not the format). The exit each must give is worked out from how the case was made,
# never read back from the CLI.
import tempfile                                                  # noqa: E402
from dataclasses import dataclass, field                         # noqa: E402

import faulthandler                                              # noqa: E402
from hypothesis import HealthCheck, event, given, settings       # noqa: E402
from hypothesis import strategies as st                          # noqa: E402

from simulator.cli.common import MODES                           # noqa: E402
from simulator.inputs import MAX_INPUT_BYTES                     # noqa: E402
from simulator.profile import load_profile                       # noqa: E402

from conftest import examples                                    # noqa: E402

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))
EXAMPLES = 660            # shared by the eleven families (60 each; the listings run out first): ~20 s
SOCS = ["Ascend910B1", "Ascend910B4", "Ascend910A", "Ascend310P3"]
MEMORY_GROWTH_BYTES = 3 << 29      # no invocation may raise the process's peak RSS by more (1.5 GiB)
FAST = ["--workers", "1", "--no-progress"]


@dataclass
class Case:
    argv: list
    want: int
    label: str
    files: dict = field(default_factory=dict)     # name -> text | bytes | None (a folder) | int (a sparse size)


# hostile contents any input file may be replaced by: all end in exit 2
HOSTILE = {
    "folder": None,
    "binary": bytes(range(256)) * 8,
    "Latin-1": "name: caf\xe9 cr\xe8me\n".encode("latin-1"),
    "deep JSON": "[" * 50_000 + "]" * 50_000,
    "deep YAML": "a: " + "[" * 3_000 + "]" * 3_000,
    "deep mapping": "a: " + "{b: " * 200 + "1" + "}" * 200,
    "over the size limit": MAX_INPUT_BYTES + 1,
    "empty": "",
    "a YAML scalar": "3\n",
    "a JSON list": "[1, 2, 3]\n",
    "NaN in JSON": '{"calls": [NaN]}',
}


def _small_trace(n_calls: int = 1, extra: str = "") -> str:
    calls = ["  - {op: SiluBackward, dtype: FLOAT16, tensors: {gradOutput: [4, 64], self: [4, 64]}}",
             "  - {op: SiluBackward, dtype: FLOAT, tensors: {gradOutput: [33], self: [33]}}"][:n_calls]
    return "format: ascend-sim/workload-trace/1\nname: fuzz\ncalls:\n" + "\n".join(calls) + "\n" + extra


# (what is broken, the call record field it replaces) -> all refused as a malformed trace, exit 2
TRACE_DEFECTS = {
    "negative dimension": ("tensors", "{gradOutput: [-1, 64], self: [4, 64]}"),
    "fractional dimension": ("tensors", "{gradOutput: [1.5, 64], self: [4, 64]}"),
    "null dimension": ("tensors", "{gradOutput: [null, 64], self: [4, 64]}"),
    "infinite dimension": ("tensors", "{gradOutput: [.inf, 64], self: [4, 64]}"),
    "dimension past 2**50": ("tensors", "{gradOutput: [1267650600228229401496703205376, 64], self: [4, 64]}"),
    "boolean dimension": ("tensors", "{gradOutput: [true, 64], self: [4, 64]}"),
    "shape a mapping": ("tensors", "{gradOutput: {a: 1}, self: [4, 64]}"),
    "tensors a list": ("tensors", "[1, 2]"),
    "unknown dtype": ("dtype", "NOPE"),
    "dtype a number": ("dtype", "3"),
    "op a number": ("op", "3"),
    "op null": ("op", "null"),
    "count 0": ("count", "0"),
    "count fractional": ("count", "1.5"),
    "count a word": ("count", "many"),
    "count too large for a float": ("count", str(10 ** 400)),
    "stream too large": ("stream", str(10 ** 30)),
    "stream negative": ("stream", "-1"),
    "tiling a list": ("tiling", "[1]"),
    "attrs a list": ("attrs", "[1]"),
    "unknown field": ("bogus", "1"),
}


def _trace_with(key: str, value: str) -> str:
    rec = {"op": "SiluBackward", "dtype": "FLOAT16", "tensors": "{gradOutput: [4, 64], self: [4, 64]}"}
    rec[key] = value
    body = ", ".join(f"{k}: {v}" for k, v in rec.items())
    return f"format: ascend-sim/workload-trace/1\ncalls:\n  - {{{body}}}\n"


@st.composite
def file_input(draw, valid: str, suffix: str):
    """(file contents, exit 2 if hostile else None, label): the valid text, or a hostile one."""
    if draw(st.integers(0, 3)):
        return valid, None, "valid"
    name = draw(st.sampled_from(sorted(HOSTILE)))
    return HOSTILE[name], 2, name


# profile fields whose every value in range runs any call (they set times, not sizes), with
# their range: the model must stay right at the extremes
TIMING_FIELDS = {
    "clock_mhz": (1, 1e5),
    "device_memory.bandwidth_GBps": (1e-3, 1e6),
    "runtime.launch_overhead_us": (0, 1e9),
    "l2.miss_latency_cycles": (0, 1e9),
    "l2.read_latency_cycles": (0, 1e9),
    "l2.miss_bandwidth_ratio": (1e-9, 1),
    "sync.scalar_issue_cycles": (0, 1e9),
    "vector.startup_cycles": (0, 1e9),
}
BAD_VALUES = ["nan", "inf", "-inf", "-1", "0x", "abc", "[]", "null", "1e400", "true", "{a: 1}", "''", str(10 ** 400)]


@st.composite
def what_if(draw, soc: str):
    """(--set FIELD=VALUE, exit): an in-range value (0), out of range or not a number (2), or
    a relative one whose factor is or is not a factor."""
    key = draw(st.sampled_from(sorted(TIMING_FIELDS)))
    lo, hi = TIMING_FIELDS[key]
    kind = draw(st.sampled_from(["in range", "extreme", "bad", "relative", "bad factor", "unknown field"]))
    if kind == "in range":
        return f"{key}={draw(st.floats(max(lo, 1e-3), hi, allow_nan=False))!r}", 0
    if kind == "extreme":
        v = draw(st.sampled_from([lo, hi]))
        return f"{key}={v!r}", (0 if v > 0 or key not in ("l2.miss_bandwidth_ratio",) else 2)
    if kind == "bad":
        v = draw(st.sampled_from(BAD_VALUES + [repr(hi * 10), repr(lo - 1)]))
        return f"{key}={v}", 2
    if kind == "relative":
        base = _field(soc, key)
        op = draw(st.sampled_from(["x", "/"]))
        f = draw(st.floats(1e-3, 1e3, allow_nan=False, exclude_min=False))
        new = base * f if op == "x" else base / f
        ok = lo <= new <= hi and not (key == "l2.miss_bandwidth_ratio" and new <= 0)
        return f"{key}={op}{f!r}", 0 if ok else 2
    if kind == "bad factor":
        return f"{key}={draw(st.sampled_from(['x', '/']))}{draw(st.sampled_from(['0', '0.0', '1e-400', '1e400', '.', '1.2.3']))}", 2
    return f"no.such.{key}=1", 2


def _field(soc: str, key: str):
    node = load_profile(soc).model_dump()
    for part in key.split("."):
        node = node[part]
    return node


@st.composite
def run_case(draw) -> Case:
    mode = draw(st.sampled_from(MODES))
    soc = draw(st.sampled_from(SOCS[:3]))                  # SiluBackward runs on these
    argv = ["run", "SiluBackward", "--no-trace", "--mode", mode, "--soc", soc, "--budget-seconds", "20"]
    kind = draw(st.sampled_from(["valid", "shape", "what-if", "argument", "output"]))
    if kind == "valid":
        dims = draw(st.lists(st.integers(0, 48), min_size=1, max_size=3))
        return Case(argv + ["--shape", ",".join(map(str, dims))], 0, "run: valid")
    argv += ["--shape", "4,64"]
    if kind == "shape":
        bad = draw(st.sampled_from(["-1,4", "1.5", "abc", "2**40", "99999999999999999999999,4", "nan", "inf,1", "4;4"]))
        return Case(argv[:-2] + ["--shape", bad], 2, f"run: shape {bad}")
    if kind == "what-if":
        item, want = draw(what_if(soc))
        return Case(argv + ["--set", item], want, f"run: --set {item.split('=')[0]} ({want})")
    if kind == "argument":
        flag, value = draw(st.sampled_from([("--seed", "-1"), ("--seed", "1e3"), ("--budget-seconds", "nan"),
                                            ("--budget-seconds", "inf"), ("--budget-memory", "-1"),
                                            ("--lines", "0"), ("--mode", "fastest"), ("--soc", "Ascend999"),
                                            ("--dtype", "NOPE"), ("--tiling", "blockLength=abc"),
                                            ("--attr", "x"), ("--init", "self=weird")]))
        return Case(argv + [flag, value], 2, f"run: {flag} {value}")
    where = draw(st.sampled_from(["", "/proc/x.json", "/ascend-sim-fuzz-root/t.json", "out.txt", "."]))
    return Case(argv[:3] + argv[4:] + ["--trace", where], 2, f"run: --trace {where!r}")


@st.composite
def trace_case(draw) -> Case:
    """replay / regress / sweep over a trace that is valid, nearly valid or hostile."""
    command = draw(st.sampled_from(["replay", "regress", "sweep", "run --file"]))
    suffix = draw(st.sampled_from([".yaml", ".json", ".jsonl"]))
    defect = draw(st.sampled_from([None, None, "field", "file", "calls", "scheduler", "output"]))
    text, want, label = _small_trace(draw(st.integers(1, 2))), 0, "valid"
    if defect == "field":
        name = draw(st.sampled_from(sorted(TRACE_DEFECTS)))
        text, want, label = _trace_with(*TRACE_DEFECTS[name]), 2, name
    contents = text
    if suffix != ".yaml" and isinstance(contents, str):          # the same trace in JSON / JSON lines
        import yaml
        try:
            data = yaml.safe_load(contents)
            contents = (json.dumps(data) if suffix == ".json" else
                        "\n".join([json.dumps({k: v for k, v in data.items() if k != "calls"})]
                                  + [json.dumps(c) for c in data["calls"]]) + "\n")
        except (ValueError, TypeError):      # a value JSON cannot hold (inf): keep it YAML
            suffix = ".yaml"
    if defect == "file":
        contents, hostile, how = draw(file_input(contents, suffix))
        if hostile is not None:
            want, label = hostile, how
    files = {f"t{suffix}": contents}
    argv = [command, f"t{suffix}"]
    if command == "run --file":
        argv = ["run", "--file", f"t{suffix}", "--call", "0", "--no-trace", "--mode", draw(st.sampled_from(MODES))]
    elif command == "regress":
        argv += ["--update"]
    else:
        argv += ["--mode", draw(st.sampled_from(MODES)), *FAST]
    if command == "sweep":
        argv += ["--param", f"clock_mhz={draw(st.sampled_from(['1000,1800', '1:100000:50000', '1000']))}", "-o", "rows.csv"]
    argv += FAST[:2] if command == "regress" else []
    if command == "run --file" and defect in ("calls", "scheduler", "output"):
        defect = None
    if defect == "calls" and want == 0:
        sel = draw(st.sampled_from(["5", "a", "1-", "0-99", "-1"]))
        argv += ["--calls", sel]
        want, label = 2, f"--calls {sel}"
    if defect == "scheduler" and want == 0 and command != "regress":
        addr = draw(st.sampled_from(["::::", "tcp://[:x", "local:0", "local:100000"]))
        argv += ["--scheduler", addr]
        want, label = 2, f"--scheduler {addr}"
    if defect == "output" and want == 0 and command != "regress":
        out = draw(st.sampled_from(["rows.txt", f"t{suffix}/x.csv", "folder", "/proc/rows.csv"]))
        files.setdefault("folder", None)
        argv += ["-o", out]
        want, label = 2, f"-o {out}"
    return Case(argv, want, f"{command}: {label}", files)


SWEEP_DEFECTS = {
    "workload a number": "workload: 3", "workload a list": "workload: [t.yaml]", "workload null": "workload: null",
    "socs a number": "socs: 3", "socs nested": "socs: [[Ascend910B1]]", "socs empty": "socs: []",
    "set a list": "set: [1]", "set a word": "set: abc", "parameters a number": "parameters: 3",
    "parameters a list": "parameters: [1, 2]", "a parameter with no values": "parameters: {clock_mhz: []}",
    "calls a float": "calls: 3.5", "calls a mapping": "calls: {a: 1}", "calls negative": "calls: [-1]",
    "plot a number": "plot: 3", "output a list": "output: [a]", "unknown field": "bogus: 1",
}


@st.composite
def sweep_file_case(draw) -> Case:
    fields = {"workload": "workload: t.yaml", "parameters": "parameters: {clock_mhz: [1000, 1800]}",
              "output": "output: rows.csv"}
    want, label = 0, "valid"
    if draw(st.booleans()):
        name = draw(st.sampled_from(sorted(SWEEP_DEFECTS)))
        line = SWEEP_DEFECTS[name]
        fields[line.split(":")[0]] = line
        want, label = 2, name
    if draw(st.booleans()) and want == 0:
        fields["socs"] = f"socs: [{draw(st.sampled_from(SOCS[:3]))}]"
    text = "\n".join(fields.values()) + "\n"
    if "workload" not in text:
        text = "workload: t.yaml\n" + text
    return Case(["sweep", "s.yaml", *FAST], want, f"sweep file: {label}",
                {"s.yaml": text, "t.yaml": _small_trace()})


@st.composite
def profile_case(draw) -> Case:
    """chip / run on a profile file that inherits a shipped one and changes a field."""
    key = draw(st.sampled_from(sorted(TIMING_FIELDS)))
    lo, hi = TIMING_FIELDS[key]
    head, _, leaf = key.rpartition(".")
    good = draw(st.booleans())
    value = repr(draw(st.floats(max(lo, 1e-3), hi, allow_nan=False))) if good else draw(st.sampled_from(BAD_VALUES))
    body = f"{leaf}: {value}" if not head else f"{head}: {{{leaf}: {value}}}"
    contents, hostile, label = draw(file_input(f"inherits: Ascend910B1\nsoc_version: Mine\n{body}\n", ".yaml"))
    want = hostile or (0 if good else 2)
    argv = draw(st.sampled_from([["chip", "p.yaml"],
                                 ["run", "SiluBackward", "--shape", "4,64", "--soc", "p.yaml", "--no-trace",
                                  "--mode", "timing"]]))
    return Case(argv, want, f"profile: {label if hostile else key} ({want})", {"p.yaml": contents})


KERNEL_VARIANTS = {      # name -> (kernel_file arguments, extra CLI arguments, exit)
    "valid": ({}, [], 0),
    "check fails": ({"mid": "Adds(b, a, 2.0, n)"}, [], 1),
    "sys.exit at import": ({"top": "raise SystemExit(3)"}, [], 2),
    "sys.exit in launch": ({"launch": "raise SystemExit(0)"}, [], 1),
    "sys.exit in the body": ({"pre": "raise SystemExit(1)"}, [], 1),
    "sys.exit in check": ({"check": "raise SystemExit(2)"}, [], 1),
    "endless body": ({"pre": "while True: pass"}, ["--budget-seconds", "0.5"], 2),
    "division by zero": ({"pre": "1 / 0"}, [], 1),
    "wrong argument": ({"mid": "Adds(b, a, 1.0, 'n')"}, [], 1),
    "name error": ({"pre": "undefined_name"}, [], 1),
    "launch raises": ({"launch": "raise ValueError('no')"}, [], 1),
    "syntax error": ({"top": "def ("}, [], 2),
    "block_dim 0": ({"block_dim": "0"}, [], 2),
    "block_dim 10**9": ({"block_dim": "10**9"}, [], 2),
    "block_dim inf": ({"block_dim": "float('inf')"}, [], 2),
    "block_dim nan": ({"block_dim": "float('nan')"}, [], 2),
    "block_dim text": ({"block_dim": "'two'"}, [], 2),
    "block_dim 2.5": ({"block_dim": "2.5"}, [], 2),
    "buffer overflow": ({"n": 1 << 20}, [], 1),
}


@st.composite
def kernel_case(draw) -> Case:
    name = draw(st.sampled_from(sorted(KERNEL_VARIANTS)))
    kw, extra, want = KERNEL_VARIANTS[name]
    if name == "valid":
        kw = {"block_dim": str(draw(st.integers(1, 8)))}
    mode = draw(st.sampled_from(MODES))
    if name == "check fails" and mode != "functional" or name == "sys.exit in check" and mode != "functional":
        want = 0                         # check() runs in functional mode only
    contents, hostile, label = draw(file_input(kernel_file(**kw), ".py"))
    if hostile is not None:
        want, name = 2, label
    return Case(["kernel", "k.py", "--no-trace", "--mode", mode, *extra], want, f"kernel: {name}",
                {"k.py": contents})


@st.composite
def compare_case(draw) -> Case:
    report, csv_text, want, label = dict(REPORT), OP_SUMMARY, 0, "valid"
    defect = draw(st.sampled_from([None, "report", "csv", "report file", "csv file"]))
    if defect == "report":
        label, change = draw(st.sampled_from([
            ("zero clock", {"clock_mhz": 0}), ("clock a word", {"clock_mhz": "fast"}),
            ("no launches", {"launches": None}), ("launch without cycles", {"launches": [{}]}),
            ("cycles negative", {"launches": [{"core_cycles": -5}]}), ("no soc", {"soc": None}),
            ("sides a list", {"launches": [{"core_cycles": 1, "sides": [1]}]})]))
        report.update(change)
        want = 2
    elif defect == "csv":
        label, csv_text = draw(st.sampled_from([
            ("block count inf", OP_SUMMARY.replace(",8,", ",inf,")), ("block count nan", OP_SUMMARY.replace(",8,", ",nan,")),
            ("block count missing", OP_SUMMARY.replace(",8,", ",,")), ("no rows", OP_SUMMARY.splitlines()[0] + "\n"),
            ("no pipe times", "Op Name,OP Type,Block Num\nadd,Add,8\n")]))
        want = 2
    report_text, csv_file = json.dumps(report), csv_text
    if defect == "report file":
        report_text, want, label = draw(file_input(report_text, ".json"))
        want = want or 0
    if defect == "csv file":
        csv_file, want, label = draw(file_input(csv_text, ".csv"))
        want = want or 0
    return Case(["compare", "m.csv", "--report", "r.json"], want, f"compare: {label}",
                {"r.json": report_text, "m.csv": csv_file})


@st.composite
def listing_case(draw) -> Case:
    case = draw(st.sampled_from([
        Case(["ops"], 0, "ops"), Case(["chips"], 0, "chips"), Case(["chip", "Ascend910B4"], 0, "chip"),
        Case(["diff", "Ascend910B1", "Ascend910A"], 0, "diff"), Case(["chip", "Ascend999"], 2, "chip: unknown"),
        Case(["nosuchcommand"], 2, "unknown command"), Case([], 2, "no command"),
        Case(["run"], 2, "run: no operator"), Case(["run", "NoSuchOp", "--shape", "4"], 2, "run: unknown operator"),
        Case(["tune", "SiluBackward", "--shape", "4,64", "--space", "blockLength=256", *FAST], 0, "tune"),
        Case(["tune", "SiluBackward", "--shape", "4,64", "--space", "blockLength=abc", *FAST], 2, "tune: bad space"),
        Case(["tune", "SiluBackward", "--shape", "4,64", "--top", "0"], 2, "tune: --top 0"),
        Case(["capture", "folder", "-o", "t.yaml"], 2, "capture: a folder"),
        Case(["capture", "nothing.py", "-o", "t.yaml"], 2, "capture: no script")]))
    return Case(list(case.argv), case.want, case.label, {"folder": None})


# ---- the third round's classes, as generators --------------------------------------------------
import builtins                                                  # noqa: E402
import importlib.util                                            # noqa: E402
import stat                                                      # noqa: E402

from simulator.inputs import MAX_YAML_VALUES                      # noqa: E402


@dataclass(frozen=True)
class Link:
    """A symbolic link to `target` (which need not exist) among a case's files."""
    target: str


def _alias_notes(width: int, depth: int) -> tuple[str, int]:
    """A `notes:` block of anchors a0..a<depth>, each a list of `width` aliases of the one before,
    and how many values it stands for once expanded (YAML's semantics: an alias is its anchor's
    whole value): the notes mapping, and per anchor its key and its list."""
    lines = [f"  a0: &a0 [{', '.join(['x'] * width)}]"]
    size = 1 + width
    total = 1 + 1 + size
    for i in range(1, depth + 1):
        lines.append(f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
        size = 1 + width * size
        total += 1 + size
    return "notes:\n" + "\n".join(lines) + "\n", total


@st.composite
def alias_case(draw) -> Case:
    """A YAML file of every kind with an alias expansion in it, small or a bomb: a trace keeps
    its notes (exit 0 when small), a profile or a sweep file has no such field (exit 2 either way);
    a bomb is refused before anything walks it (exit 2, within the time and memory bounds)."""
    width, depth = draw(st.integers(2, 40)), draw(st.integers(1, 12))
    notes, total = _alias_notes(width, depth)
    if MAX_YAML_VALUES // 4 < total <= MAX_YAML_VALUES * 4:   # not near the bound: the expectation is clear
        notes, total = _alias_notes(2, 2)
    bomb = total > MAX_YAML_VALUES
    kind = draw(st.sampled_from(["replay", "regress", "run --file", "sweep", "profile", "sweep file", "what-if"]))
    files = {"t.yaml": _small_trace() + notes}
    if kind == "replay":
        return Case(["replay", "t.yaml", *FAST], 2 if bomb else 0, f"alias: replay ({total:,})", files)
    if kind == "regress":
        return Case(["regress", "t.yaml", "--update", *FAST[:2]], 2 if bomb else 0, f"alias: regress ({total:,})", files)
    if kind == "run --file":
        return Case(["run", "--file", "t.yaml", "--call", "0", "--no-trace"], 2 if bomb else 0,
                    f"alias: run --file ({total:,})", files)
    if kind == "sweep":
        return Case(["sweep", "t.yaml", "--param", "clock_mhz=1000", *FAST], 2 if bomb else 0,
                    f"alias: sweep ({total:,})", files)
    if kind == "profile":
        return Case(["chip", "p.yaml"], 2, f"alias: profile ({total:,})",
                    {"p.yaml": "inherits: Ascend910B1\nsoc_version: Mine\n" + notes})
    if kind == "sweep file":
        return Case(["sweep", "s.yaml", *FAST], 2, f"alias: sweep file ({total:,})",
                    {"s.yaml": "workload: t.yaml\nparameters: {clock_mhz: [1000]}\n" + notes, "t.yaml": _small_trace()})
    return Case(["chip", "Ascend910B1", "--set", f"cores.aiv.runs=&a [*a]"], 2, "alias: a what-if value")


# values that are not a number, for every numeric position of every file kind
NOT_NUMBERS = ["null", "'4'", "''", "true", ".nan", ".inf", "-.inf", "1e400", "abc", "[1]", "{a: 1}"]
CONV_CALL = ("{op: ConvolutionBackward, dtype: FLOAT16, tensors: {gradOutput: [1, 4, 8, 8], input: [1, 4, 8, 8], "
             "weight: [4, 4, 3, 3]}, attrs: {biasSizes: [4], stride: STRIDE, padding: [1, 1], dilation: [1, 1], "
             "transposed: false, outputPadding: [0, 0], groups: GROUPS, outputMask: [true, true, false], cubeMathType: 0}}")


@st.composite
def numeric_case(draw) -> Case:
    """A value that is not a number (null, text, a bool, non-finite, a list or mapping) where a
    number goes: a shape, a count, a stream, a conv call's attribute (a list element or a
    scalar), a baseline's total or call, a sweep's parameter value, a profile field, an
    operator option's what-if. Each is refused naming the field: a file field as a malformed file
    (exit 2); an attribute as that call's own failure (`replay` exit 1 with the row, `regress
    --update` records it, exit 0; `run --file` exit 2, or 1 when the operator refuses a null)."""
    bad = draw(st.sampled_from(NOT_NUMBERS))
    where = draw(st.sampled_from(["shape", "count", "stream", "attr element", "attr scalar", "baseline total",
                                  "baseline call", "sweep value", "profile", "operator option"]))
    label = f"numbers: {where} = {bad}"
    if where == "shape":
        return Case(["replay", "t.yaml", *FAST], 2, label,
                    {"t.yaml": _trace_with("tensors", f"{{gradOutput: [{bad}, 64], self: [4, 64]}}")})
    if where in ("count", "stream"):
        return Case(["replay", "t.yaml", *FAST], 2, label, {"t.yaml": _trace_with(where, bad)})
    if where.startswith("attr"):
        call = CONV_CALL.replace("STRIDE", f"[{bad}, 1]" if where == "attr element" else "[1, 1]")
        call = call.replace("GROUPS", bad if where == "attr scalar" else "1")
        files = {"t.yaml": f"format: ascend-sim/workload-trace/1\ncalls:\n  - {call}\n"}
        command = draw(st.sampled_from(["replay", "regress", "run --file"]))
        if command == "replay":
            return Case(["replay", "t.yaml", *FAST], 1, label, files)
        if command == "regress":
            return Case(["regress", "t.yaml", "--update", *FAST[:2]], 0, label, files)
        null_scalar = where == "attr scalar" and bad == "null"
        return Case(["run", "--file", "t.yaml", "--call", "0", "--no-trace", "--mode", "timing"],
                    1 if null_scalar else 2, label, files)
    if where == "baseline total":
        # total is optional: null leaves the calls to judge (the recorded 5 cycles are far off: exit 3)
        return Case(["regress", "t.yaml", *FAST[:2]], 3 if bad == "null" else 2, label,
                    {"t.yaml": _small_trace() + f"baselines: {{Ascend910B1: {{total: {bad}, calls: [5]}}}}\n"})
    if where == "baseline call":
        # a null call baseline means "not available": reported, not failed
        return Case(["regress", "t.yaml", *FAST[:2]], 0 if bad == "null" else 2, label,
                    {"t.yaml": _small_trace() + f"baselines: {{Ascend910B1: {{calls: [{bad}]}}}}\n"})
    if where == "sweep value":
        return Case(["sweep", "s.yaml", *FAST], 2, label,
                    {"s.yaml": f"workload: t.yaml\nparameters: {{clock_mhz: [{bad}]}}\n", "t.yaml": _small_trace()})
    if where == "profile":
        key = draw(st.sampled_from(sorted(TIMING_FIELDS)))
        head, _, leaf = key.rpartition(".")
        body = f"{leaf}: {bad}" if not head else f"{head}: {{{leaf}: {bad}}}"
        return Case(["chip", "p.yaml"], 2, label, {"p.yaml": f"inherits: Ascend910B1\nsoc_version: Mine\n{body}\n"})
    field_ = draw(st.sampled_from(["operators.SiluBackward.max_rank", "operators.ConvolutionBackward.limits.kernel",
                                   "operators.ConvolutionBackward.options.empty_tensors"]))
    value = bad if not field_.endswith("kernel") else f"[1, {bad}]"
    if field_.endswith("max_rank") and bad == "null":
        return Case(["chip", "Ascend910B1", "--set", f"{field_}={value}"], 0, label)   # no limit: allowed
    if field_.endswith("empty_tensors") and bad == "true":
        return Case(["chip", "Ascend910B1", "--set", f"{field_}={value}"], 0, label)   # a bool option stays a bool
    return Case(["chip", "Ascend910B1", "--set", f"{field_}={value}"], 2, label)


# paths the system refuses or that lead nowhere: each ends as one line, exit 2
ODD_PATHS = {
    "a 300-character name": "n" * 300 + ".yaml",
    "a path over PATH_MAX": "d/" * 2100 + "t.yaml",
    "through a file": "t.yaml/x.yaml",
    "a NUL byte": "a\0b.yaml",
    "through a symlink loop": "loop/x.yaml",
    "a dangling symlink": "dangling.yaml",
    "a name with a newline": "new\nline.yaml",
    "a folder": "folder",
}


@st.composite
def path_case(draw) -> Case:
    """An odd path in every path argument of every command: exit 2, one line naming it."""
    name = draw(st.sampled_from(sorted(ODD_PATHS)))
    odd = ODD_PATHS[name]
    files = {"t.yaml": _small_trace(), "folder": None, "loop": Link("loop"), "dangling.yaml": Link("nowhere.yaml")}
    out = _as(odd, ".csv")
    inputs = [["replay", odd, *FAST], ["regress", odd, *FAST[:2]], ["run", "--file", odd, "--call", "0", "--no-trace"],
              ["sweep", odd, *FAST], ["chip", odd], ["run", "SiluBackward", "--shape", "4", "--soc", odd, "--no-trace"],
              ["kernel", _as(odd, ".py"), "--no-trace"], ["capture", _as(odd, ".py"), "-o", "c.yaml"],
              ["compare", _as(odd, ".csv"), "--report", "r.json"],
              ["compare", "m.csv", "--report", _as(odd, ".json")]]
    outputs = [["replay", "t.yaml", "-o", out, *FAST], ["sweep", "t.yaml", "--param", "clock_mhz=1000", "-o", out, *FAST],
               ["run", "SiluBackward", "--shape", "4", "--trace", _as(odd, ".json")],
               ["run", "SiluBackward", "--shape", "4", "--no-trace", "--msprof-out", _as(odd, "")],
               ["capture", "s.py", "-o", odd], ["sweep", "t.yaml", "--param", "clock_mhz=1000", "--plot",
                                                 _as(odd, ".png"), *FAST]]
    if name in ("a dangling symlink", "a name with a newline"):
        outputs = []                       # both are names a file can be written under
    if name == "a folder":
        outputs = [o for o in outputs if "--msprof-out" not in o]     # msprof's output is a folder
    argv = draw(st.sampled_from(inputs + outputs))
    files.update({"r.json": json.dumps(REPORT), "m.csv": OP_SUMMARY, "s.py": "x = 1\n"})
    return Case(argv, 2, f"path: {argv[0]} {name}", files)


def _as(path: str, suffix: str) -> str:
    """`path` with its last '.yaml' (the file's own suffix, not a folder's) changed to `suffix`."""
    head, dot, _ = path.rpartition(".yaml")
    return head + suffix if dot else path


RAISABLE = sorted(n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException))
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def _raise(name: str) -> str:
    if name in ("BaseExceptionGroup", "ExceptionGroup"):
        return f"raise {name}('grouped', [ValueError('inner')])"
    return f"raise {name}.__new__({name})"


@st.composite
def raising_case(draw) -> Case:
    """A kernel file or a captured script whose code raises any builtin exception class, at
    import, in launch(), in the body or in check(): the user's error with their file and line
    (exit 2 at import, 1 after), KeyboardInterrupt 'interrupted' (130), SystemExit as before."""
    name = draw(st.sampled_from(RAISABLE))
    where = draw(st.sampled_from(["import", "launch", "body", "check", "script"]))
    code = _raise(name)
    if where == "script":
        want = 130 if name == "KeyboardInterrupt" else 2 if name == "SystemExit" or not HAVE_TORCH else 1
        return Case(["capture", "s.py", "-o", "c.yaml"], want, f"raises: script {name}",
                    {"s.py": f"x = 1\n{code}\n"})
    mode = draw(st.sampled_from(MODES))
    kw = {"import": {"top": code}, "launch": {"launch": code}, "body": {"pre": code}, "check": {"check": code}}[where]
    if name == "KeyboardInterrupt":
        want = 130 if where != "check" or mode == "functional" else 0
    elif where == "import":
        want = 2
    elif where == "check":
        want = 1 if mode == "functional" else 0          # check() runs in functional mode only
    else:
        want = 1
    return Case(["kernel", "k.py", "--no-trace", "--mode", mode], want, f"raises: {where} {name}",
                {"k.py": kernel_file(**kw)})


# every family gets its share of the examples (drawn from one strategy, hypothesis favours the first)
FAMILIES = {"run": run_case, "trace": trace_case, "sweep file": sweep_file_case, "profile": profile_case,
            "kernel": kernel_case, "compare": compare_case, "listings": listing_case, "aliases": alias_case,
            "numbers": numeric_case, "paths": path_case, "raises": raising_case}
PER_FAMILY = -(-(FUZZ_EXAMPLES or examples(EXAMPLES)) // len(FAMILIES))


HANG_LOG = Path(tempfile.gettempdir()) / "ascend-sim-fuzz-hang.txt"
_hang_file = []


def _hang_log():
    if not _hang_file:
        _hang_file.append(HANG_LOG.open("w"))
    return _hang_file[0]


def _materialise(folder: Path, files: dict) -> None:
    for name, content in files.items():
        p = folder / name
        if isinstance(content, Link):
            os.symlink(content.target, p)
        elif content is None:
            p.mkdir(exist_ok=True)
        elif isinstance(content, int):
            with p.open("wb") as f:
                f.truncate(content)                # sparse: over the size limit, costs no disk
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=PER_FAMILY, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_fuzz_every_command_ends_with_its_documented_exit(family, data, capsys):
    case = data.draw(FAMILIES[family](), label="case")
    umask = data.draw(st.sampled_from([0o022, 0o027, 0o002, 0o077]), label="umask")
    file_mode = data.draw(st.sampled_from([0o644, 0o640, 0o600, 0o664, 0o444]), label="mode of the given files")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _materialise(folder, case.files)
        for p in folder.iterdir():
            if p.is_file() and not p.is_symlink():
                p.chmod(file_mode)
        given = _tree(folder)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        old_umask = os.umask(umask)
        # a hang ends the run, its stack in HANG_LOG (pytest holds stderr)
        faulthandler.dump_traceback_later(SECONDS * 4, exit=True, file=_hang_log())
        try:
            code, out, err = cli(case.argv, capsys, cwd=folder)
        finally:
            faulthandler.cancel_dump_traceback_later()
            os.umask(old_umask)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
        after = _tree(folder)
    assert grown < MEMORY_GROWTH_BYTES, (case, grown)
    assert code == case.want, (case.label, case.argv, code, err)
    assert not Path("/ascend-sim-fuzz-root").exists()
    # the files given keep their modes; a new one has what open() gives under the umask; a usage
    # error (exit 2) leaves nothing behind, and no command leaves a temporary file
    for name, mode in after.items():
        if name in given:
            assert mode == given[name], (case.label, name, oct(mode), oct(given[name]))
        else:
            assert code != 2, (case.label, "left behind", name)
            assert not Path(name).name.startswith(".ascend-sim") and not Path(name).name.startswith("."), \
                (case.label, "temporary file left", name)
            want = (0o777 if stat.S_ISDIR(mode) else 0o666) & ~umask
            assert stat.S_IMODE(mode) == want, (case.label, name, oct(mode), oct(want))
    event(f"{case.label.split(':')[0]}: exit {code}")


def _tree(folder: Path) -> dict[str, int]:
    """Every path under `folder` (links not followed) -> its st_mode."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for n in dirs + files:
            p = Path(root) / n
            out[str(p.relative_to(folder))] = p.lstat().st_mode
    return out


def test_an_edited_profile_file_is_read_again(tmp_path, monkeypatch):
    """A profile file is cached by its content's identity, not its name: after an edit (or in
    another folder under the same name) the new values are used."""
    from simulator.studies import make_profile
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "mine.yaml"
    p.write_text("inherits: Ascend910B1\nclock_mhz: 1000\n")
    assert load_profile("mine.yaml").clock_mhz == 1000
    assert make_profile("mine.yaml", {"cores.aiv.count": 8}).clock_mhz == 1000
    p.write_text("inherits: Ascend910B1\nclock_mhz: 1234.5\n")
    os.utime(p, ns=(time.time_ns() + 10 ** 9,) * 2)       # a later mtime even on a coarse clock
    assert load_profile("mine.yaml").clock_mhz == 1234.5
    assert make_profile("mine.yaml", {"cores.aiv.count": 8}).clock_mhz == 1234.5


def test_a_kernel_body_error_names_the_users_line():
    """simulator.run_kernel: an exception of the body's own is KernelBodyError (a KernelError)
    with the exception and the body's line; a machine fault stays a plain KernelError."""
    import inspect
    import numpy as np
    from simulator import run_kernel
    from simulator.api import KernelBodyError

    def body(x, n):
        return n / 0

    line = inspect.getsourcelines(body)[1] + 1
    with pytest.raises(KernelBodyError) as e:
        run_kernel(body, 2, {"x": np.ones(8, np.float16), "n": 8})
    assert str(e.value) == f"ZeroDivisionError: division by zero (at {Path(__file__).name}:{line})"


CAPTURE_SCRIPT = ("import torch\nx = torch.randn(3, 8, requires_grad=True)\ny = torch.nn.functional.silu(x)\n"
                  "y.backward(torch.ones_like(y))\n")
WRITERS = {   # what writes a file (or a folder of them) -> (argv, what it writes, needs)
    "regress --update": (["regress", "t.yaml", "--update"], "t.yaml", None),
    "replay -o CSV": (["replay", "t.yaml", "-o", "rows.csv"], "rows.csv", None),
    "replay -o JSON": (["replay", "t.yaml", "-o", "rows.json"], "rows.json", None),
    "sweep -o": (["sweep", "t.yaml", "--param", "clock_mhz=1000,1800", "-o", "s.csv"], "s.csv", None),
    "sweep --plot": (["sweep", "t.yaml", "--param", "clock_mhz=1000,1800", "-o", "s.csv", "--plot", "s.png"],
                     "s.png", "matplotlib"),
    "run --trace": (["run", "SiluBackward", "--shape", "4,4", "--trace", "tr.json"], "tr.json", None),
    "kernel --trace": (["kernel", "k.py", "--trace", "kt.json"], "kt.json", None),
    "run --msprof-out": (["run", "SiluBackward", "--shape", "4,4", "--no-trace", "--msprof-out", "prof"], "prof", None),
    "capture -o": (["capture", "s.py", "-o", "c.yaml"], "c.yaml", "torch"),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_writer_honours_the_umask_and_keeps_a_files_mode(writer, tmp_path, capsys):
    """A new output gets what open() gives under the umask (not the 0600 of a temporary file); a
    file rewritten in place (regress --update, a second run) keeps the mode it had."""
    argv, target, needs = WRITERS[writer]
    if needs:
        pytest.importorskip(needs)
    (tmp_path / "t.yaml").write_text(TRACE_YAML)
    (tmp_path / "k.py").write_text(kernel_file())
    (tmp_path / "s.py").write_text(CAPTURE_SCRIPT)
    extra = ["--workers", "1", "--no-progress"] if argv[0] in ("regress", "replay", "sweep") else []
    for umask in (0o027, 0o002):
        old = os.umask(umask)
        try:
            if writer != "regress --update":
                for p in [tmp_path / target, *sorted((tmp_path / target).rglob("*"))][::-1]:
                    if p.is_dir():
                        p.rmdir()
                    elif p.exists():
                        p.unlink()
            code, out, err = cli(argv + extra, capsys, cwd=tmp_path)
            assert code == 0, err
            made = [tmp_path / target, *(tmp_path / target).rglob("*")]
            for p in made if writer != "regress --update" else []:
                want = (0o777 if p.is_dir() else 0o666) & ~umask
                assert stat.S_IMODE(p.stat().st_mode) == want, (writer, p, oct(p.stat().st_mode), oct(want))
            files = [p for p in made if p.is_file()]
            for p in files:
                p.chmod(0o604)
            code, out, err = cli(argv + extra, capsys, cwd=tmp_path)
            assert code == 0, err
            for p in files:
                assert stat.S_IMODE(p.stat().st_mode) == 0o604, (writer, p, oct(p.stat().st_mode))
        finally:
            os.umask(old)
