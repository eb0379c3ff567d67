"""The ascend-sim command line, end to end in subprocesses: every subcommand, and bad input giving
one line on stderr, no traceback, and the documented exit code (1 rejected call, 2 usage error)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simulator.cli", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(p: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr + p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("ascend-sim"), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_main_job_as_the_readme_shows(tmp_path):
    p = cli("run", "SiluBackward", "--shape", "64,1024", "--dtype", "FLOAT16", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "aclnnSiluBackward on Ascend910B1" in p.stdout
    assert "gradInput: shape [64, 1024] float16" in p.stdout
    assert "cycles" in p.stdout and "bound by" in p.stdout
    trace = tmp_path / "out" / "SiluBackward_Ascend910B1.trace.json"
    assert trace.exists() and "traceEvents" in json.loads(trace.read_text())


def test_run_json_with_overrides_and_tiling(tmp_path):
    p = cli("run", "SiluBackward", "--shape", "16,4096", "--dtype", "FLOAT", "--soc", "Ascend910B4",
            "--set", "cores.aiv.count=20", "--tiling", "tileLength=1024", "--json",
            "--trace", str(tmp_path / "t.json"))
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["soc"] == "Ascend910B4" and d["cycles"] > 0
    assert d["tiling"]["tileLength"] == 1024
    assert d["overrides"] == {"cores.aiv.count": 20}
    assert d["call"]["tensors"]["self"] == {"shape": [16, 4096], "dtype": "FLOAT"}
    assert (tmp_path / "t.json").exists()


def test_run_a_call_from_a_file(tmp_path):
    f = tmp_path / "call.yaml"
    f.write_text("op: SiluBackward\ndtype: BF16\ntensors: {gradOutput: [8, 300], self: [8, 300]}\n")
    p = cli("run", "--file", str(f), "--mode", "timing", "--no-trace")
    assert p.returncode == 0, p.stderr
    assert "gradOutput=8x300 self=8x300 BF16" in p.stdout
    p = cli("run", "--file", "traces/efficientnet_b0_silu_backward.yaml", "--call", "1", "--mode", "timing",
            "--no-trace", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["call"]["tensors"]["self"]["shape"] == [32, 48, 1, 1]


def test_an_unnamed_shape_that_would_change_no_tensor_of_a_file_is_refused(tmp_path):
    """`run --file CALL --shape DIMS`: every input of the file has its shape, so an unnamed --shape
    changed nothing and the file's call ran silently; it is refused, naming the inputs. Named, it
    replaces that tensor's shape."""
    f = tmp_path / "call.yaml"
    f.write_text("op: SiluBackward\ndtype: FLOAT16\ntensors: {gradOutput: [8, 300], self: [8, 300]}\n")
    assert_one_line_error(cli("run", "--file", str(f), "--shape", "4,64", "--no-trace"), 2,
                          "--shape 4,64", "NAME=DIMS", "gradOutput, self")
    p = cli("run", "--file", str(f), "--shape", "gradOutput=4,64", "--shape", "self=4,64", "--mode", "timing",
            "--no-trace", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["call"]["tensors"]["self"]["shape"] == [4, 64]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_an_output_that_cannot_be_written_is_one_line():
    """Standard output on a full device: one line naming the cause, exit 2, no internal error."""
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "simulator.cli", "chips"], cwd=ROOT, stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == ["ascend-sim: error: cannot write the output: No space left on device"]


def test_a_call_from_a_trace_keeps_its_views():
    """A trace's tensor given as a view (strides: the DETR gradient is a strided view, which the
    operator copies contiguous first) stays one in `run --file` (and `tune --file`): dropping its
    strides ran another call (the DETR encoder call 5.7 % faster than the trace's)."""
    trace = "traces/deformable_detr_grid_sample_backward.yaml"
    p = cli("run", "--file", trace, "--call", "0", "--mode", "timing", "--no-trace", "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    from simulator import studies
    call = studies.load_trace(ROOT / trace).calls[0]
    assert d["call"]["tensors"]["gradOutput"]["strides"] == list(call.tensors["gradOutput"].strides)
    assert d["cycles"] == pytest.approx(studies.load_trace(ROOT / trace).baselines["Ascend910B1"]["calls"][0],
                                        abs=0.01)


@pytest.mark.parametrize("args, code, needles", [
    (["run", "NoSuchOp", "--shape", "4"], 2, ["unknown operator 'NoSuchOp'", "SiluBackward"]),
    (["run", "SiluBackward", "--shape", "64,a"], 2, ["--shape", "not a list of integers"]),
    (["run", "SiluBackward", "--shape", "64,-3"], 2, ["--shape", ">= 0"]),
    (["run", "SiluBackward", "--shape", "64", "--dtype", "FLOAT8"], 2, ["unknown dtype 'FLOAT8'"]),
    (["run", "SiluBackward", "--shape", "64", "--soc", "Ascend999"], 2, ["unknown SoC 'Ascend999'"]),
    (["run", "SiluBackward", "--shape", "64", "--set", "device_memory.bandwith_GBps=1"], 2,
     ["no profile field 'device_memory.bandwith_GBps'", "did you mean 'device_memory.bandwidth_GBps'"]),
    (["run", "SiluBackward", "--shape", "64", "--set", "clock_mhz=-5"], 2, ["clock_mhz"]),
    (["run", "SiluBackward", "--shape", "64", "--set", "clock_mhz"], 2, ["FIELD=VALUE"]),
    (["run", "SiluBackward", "--shape", "64", "--attr", "alpha=1"], 2, ["no attribute 'alpha'"]),
    (["run", "SiluBackward"], 2, ["give the tensor shapes"]),
    (["run", "SiluBackward", "--shape", "64", "--frobnicate"], 2, ["unrecognized arguments: --frobnicate"]),
    (["frobnicate"], 2, ["invalid choice: 'frobnicate'"]),
    (["run", "SiluBackward", "--shape", "self=64", "--shape", "gradOutput=65", "--no-trace"], 1,
     ["161002", "one shape"]),
    (["run", "SiluBackward", "--shape", "64", "--dtype", "BF16", "--soc", "Ascend910A", "--no-trace"], 1,
     ["161002", "BF16"]),
    (["run", "SiluBackward", "--shape", "1000", "--tiling", "tileLength=1000000", "--no-trace"], 1,
     ["561002", "UB"]),
    (["chip", "Ascend999"], 2, ["unknown SoC"]),
    (["diff", "Ascend910B1", "nope"], 2, ["unknown SoC 'nope'"]),
    (["replay", "traces/missing.yaml"], 2, ["no such file"]),
    (["replay", "traces/efficientnet_b0_silu_backward.yaml", "--calls", "70"], 2, ["out of range"]),
    (["replay", "traces/efficientnet_b0_silu_backward.yaml", "--workers", "0"], 2, ["--workers"]),
    (["regress", "traces/efficientnet_b0_silu_backward.yaml", "--soc", "Ascend910B4"], 2,
     ["no baselines for Ascend910B4", "--update"]),
    (["sweep", "traces/silu_smoke.jsonl"], 2, ["nothing to sweep"]),
    (["sweep", "traces/silu_smoke.jsonl", "--param", "cores.aiv.cnt=1,2"], 2, ["did you mean 'cores.aiv.count'"]),
    (["tune", "SiluBackward", "--shape", "64", "--space", "tileLength"], 2, ["FIELD=V1,V2"]),
    (["kernel", "no/such/kernel.py"], 2, ["no such file"]),
])
def test_bad_input_is_one_line(args, code, needles):
    assert_one_line_error(cli(*args), code, *needles)


@pytest.mark.parametrize("content, needle", [
    ("calls: [\n", "not valid YAML"),
    ("calls: []\n", "non-empty list"),
    ("calls:\n  - {tensors: {self: [4]}}\n", "call 0: field 'op'"),
    ("calls:\n  - {op: SiluBackward, tensors: {self: [4, z]}}\n", "call 0: tensors.self"),
    ("calls:\n  - {op: SiluBackward, dtype: FLOAT, tensors: {self: [4]}, speed: 3}\n", "unknown field(s) speed"),
    ("format: other/2\ncalls:\n  - {op: SiluBackward}\n", "field 'format'"),
    ("calls:\n  - {op: SiluBackward, dtype: FLOAT, tensors: {self: [4]}}\n"
     "baselines: {Ascend910B1: {calls: [1, 2]}}\n", "has 2 entries for 1 calls"),
])
def test_malformed_trace_files(tmp_path, content, needle):
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    assert_one_line_error(cli("replay", str(f)), 2, needle)


def test_malformed_jsonl_names_the_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"name": "x"}\n{"op": "SiluBackward", "tensors": {"self": [4]}, "dtype": "FLOAT"}\n{"op": \n')
    assert_one_line_error(cli("replay", str(f)), 2, "line 3", "not valid JSON")


def test_help_everywhere(capsys):
    from simulator.cli import main
    p = cli("--help")                         # once as a user would, the rest in-process (faster)
    assert p.returncode == 0 and "usage: ascend-sim" in p.stdout and "regress" in p.stdout
    for sub in ("run", "ops", "chips", "chip", "diff", "replay", "regress", "sweep", "tune", "kernel"):
        with pytest.raises(SystemExit) as e:
            main([sub, "--help"])
        assert e.value.code == 0
        assert f"usage: ascend-sim {sub}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["kernel", "--help"])
    assert "launch(profile)" in capsys.readouterr().out


def test_ops_chips_chip_diff():
    p = cli("ops")
    assert p.returncode == 0 and "aclnnSiluBackward(gradOutput:tensor, self:tensor) -> gradInput [tunable]" in p.stdout
    p = cli("chips", "--json")
    assert p.returncode == 0
    assert {c["soc"] for c in json.loads(p.stdout)} >= {"Ascend910A", "Ascend310P3", "Ascend910B1"}
    p = cli("chip", "Ascend910B1", "--set", "device_memory.bandwidth_GBps=x2")
    assert p.returncode == 0
    assert any(l.split() == ["device_memory.bandwidth_GBps", "3200.0"] for l in p.stdout.splitlines()), p.stdout
    p = cli("diff", "Ascend910B1", "Ascend910B4")
    assert p.returncode == 0
    rows = {l.split()[0]: l.split()[1:] for l in p.stdout.splitlines()[2:] if l.strip()}
    assert rows["clock_mhz"] == ["1850.0", "1500.0"] and rows["cores.aiv.count"] == ["48", "40"]
    p = cli("diff", "Ascend910B2", "Ascend910B2")
    assert p.returncode == 0 and "identical" in p.stdout


def test_kernel_file(tmp_path):
    p = cli("kernel", "examples/kernels/axpy.py", "--soc", "Ascend910B4", "--trace", str(tmp_path / "k.json"))
    assert p.returncode == 0, p.stderr
    assert "check: passed" in p.stdout and "axpy on Ascend910B4" in p.stdout
    assert (tmp_path / "k.json").exists()
    p = cli("kernel", "examples/kernels/axpy.py", "--mode", "timing", "--json", "--no-trace",
            "--set", "cores.aiv.count=24")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["cycles"] > 0


AUDITED_KERNEL = """\
import numpy as np
from simulator.kernel import *
def body(x, y):
    xg, yg = GlobalTensor(float32), GlobalTensor(float32)
    xg.SetGlobalBuffer(x)
    yg.SetGlobalBuffer(y)
    pipe = TPipe()
    qi, qo = TQue(TPosition.VECIN, 2), TQue(TPosition.VECOUT, 2)
    pipe.InitBuffer(qi, 2, 4096)
    pipe.InitBuffer(qo, 2, 4096)
    for i in Loop(40, period=2):
        n = 512 if i == 20 else 1024
        t = qi.AllocTensor(float32)
        DataCopy(t, xg[i * 1024], n)
        qi.EnQue(t)
        t, o = qi.DeQue(float32), qo.AllocTensor(float32)
        Adds(o, t, 1.0, n)
        qo.EnQue(o)
        qi.FreeTensor(t)
        o = qo.DeQue(float32)
        DataCopy(yg[i * 1024], o, n)
        qo.FreeTensor(o)
def launch():
    return {"body": body, "block_dim": 1,
            "args": {"x": np.ones(40960, np.float32), "y": np.zeros(40960, np.float32)}}
"""


def test_kernel_file_loop_audit(tmp_path):
    """--audit-loops: a kernel whose Loop claims unlike iterations alike (a short tile between
    full ones, where fast mode's two windows cannot see it) fails with the finding; the axpy
    example's Loop holds."""
    p = cli("kernel", "examples/kernels/axpy.py", "--mode", "timing", "--no-trace", "--audit-loops")
    assert p.returncode == 0, p.stdout + p.stderr
    # (8 tiles a block: too few to skip at a period of 2, which takes 6 simulated and as many again)
    assert "loop audit: 48 Loop(s) over the blocks, 0 with a run long enough for fast mode to skip: nothing " \
           "to check" in p.stdout, p.stdout

    f = tmp_path / "k.py"
    f.write_text(AUDITED_KERNEL)
    p = cli("kernel", str(f), "--mode", "timing", "--no-trace", "--audit-loops", "--json")
    assert p.returncode == 1, p.stdout + p.stderr
    audit = json.loads(p.stdout)["loop_audit"]
    assert audit["loops"] == audit["skippable"] == 1
    found = audit["findings"]
    assert found == ["k.py:11: iteration 20 differs from iteration 18 at its instruction 1 of 11: PIPE_MTE2 "
                     "GM_UB 2048 B, 264.675 cycles against PIPE_MTE2 GM_UB 4096 B, 289.349 cycles (block 0)"], found
    p = cli("kernel", str(f), "--mode", "timing", "--no-trace", "--audit-loops")
    assert p.returncode == 1 and "loop audit: 1 finding(s) in 1 Loop(s) over the blocks, 1 with a run long " \
                                 "enough for fast mode to skip\n  k.py:11: iteration 20" in p.stdout, p.stdout
    assert_one_line_error(cli("kernel", str(f), "--mode", "fast", "--no-trace", "--audit-loops"), 2,
                          "exact mode")


@pytest.mark.parametrize("source, code, needle", [
    ("def launch(:\n    pass\n", 2, "syntax error"),
    ("x = 1\n", 2, "defines no launch()"),
    ("def launch():\n    return {'body': print}\n", 2, "'body', 'block_dim' and 'args'"),
    ("def launch():\n    raise ValueError('no tiling for you')\n", 1, "ValueError: no tiling for you (at k.py:2)"),
    ("import numpy as np\nfrom simulator.kernel import *\n"
     "def body(x):\n    t = TPipe()\n    q = TQue(TPosition.VECIN, 1)\n    t.InitBuffer(q, 1, 10**7)\n"
     "def launch():\n    return {'body': body, 'block_dim': 1, 'args': {'x': np.zeros(8, np.float32)}}\n",
     1, "kernel fault"),
    ("import numpy as np\nfrom simulator.kernel import *\n"
     "def body(x):\n    pass\n"
     "def launch():\n    return {'body': body, 'block_dim': 1, 'args': {'x': np.zeros(8, np.float32)}}\n"
     "def check(out):\n    assert out['x'][0] == 1, 'x[0] is not 1'\n", 1, None),
])
def test_kernel_file_errors(tmp_path, source, code, needle):
    f = tmp_path / "k.py"
    f.write_text(source)
    p = cli("kernel", str(f), "--no-trace")
    if needle is None:                     # a failed check() is a report, not an error line
        assert p.returncode == code and "check: FAILED: x[0] is not 1" in p.stdout
        return
    assert_one_line_error(p, code, needle)


def test_kernel_msprof_out_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    """As run and replay do: exit 2 naming --msprof-out, not the kernel's fault after its work."""
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    p = cli("kernel", str(ROOT / "examples" / "kernels" / "add_sample.py"), "--no-trace", "--msprof-out", str(blocker))
    assert_one_line_error(p, 2, "--msprof-out", "not a folder")


@pytest.mark.parametrize("args, words", [
    (["run", "SiluBackward", "--shape", "1,,2", "--no-trace"], "empty dimension"),
    (["run", "SiluBackward", "--shape", "", "--no-trace"], "no dimensions given"),
    (["tune", "SiluBackward", "--shape", "8,32", "--space", "tileLength=16", "--space", "tileLength=32"], "given twice"),
])
def test_input_that_used_to_be_taken_silently_is_refused(args, words):
    assert_one_line_error(cli(*args), 2, words)
