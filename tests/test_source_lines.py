"""Cycles per kernel source line: every traced instruction remembers the line of the kernel body
that issued it (the user's file, never the simulator's), and the per-line figures add up to the
report's per-pipe figures."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import simulator
from simulator.cli import main

KERNEL = textwrap.dedent('''\
    import numpy as np
    from simulator.kernel import (DataCopy, Exp, GlobalTensor, HardEvent, SetFlag, TBuf, TPipe,
                                  WaitFlag, float32)


    def body(x, y):
        pipe = TPipe()
        b = TBuf()
        pipe.InitBuffer(b, 4096 * 4)
        t = b.Get(float32)
        gx, gy = GlobalTensor(), GlobalTensor()
        gx.SetGlobalBuffer(x)
        gy.SetGlobalBuffer(y)
        DataCopy(t, gx, 4096)                          # line 14: the copy in
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        for _ in range(3):
            Exp(t, t, 4096)                            # line 18: three Exps
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        DataCopy(gy, t, 4096)                          # line 21: the copy out


    def launch(profile):
        x = np.linspace(-1, 1, 4096 * 2, dtype=np.float32)
        return {"body": body, "block_dim": 1, "args": {"x": x, "y": np.zeros_like(x)}}
    ''')


@pytest.fixture()
def kernel_file(tmp_path):
    f = tmp_path / "my_kernel.py"
    f.write_text(KERNEL)
    return f


def _run(kernel_file, trace=True):
    import importlib.util
    spec = importlib.util.spec_from_file_location("my_kernel", kernel_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    s = mod.launch(None)
    return simulator.run_kernel(s["body"], 1, s["args"], trace=trace)     # one block: exact counts


def test_each_line_gets_its_instructions_cycles_and_pipe(kernel_file):
    r = _run(kernel_file)
    by_line = {l["line"]: l for l in r.report.lines}
    assert all(Path(l["file"]).resolve() == kernel_file.resolve() for l in r.report.lines)
    assert by_line[14]["pipe"] == "PIPE_MTE2" and by_line[14]["instructions"] == 1
    assert by_line[18]["pipe"] == "PIPE_V" and by_line[18]["instructions"] == 3
    assert by_line[21]["pipe"] == "PIPE_MTE3" and by_line[21]["instructions"] == 1
    assert by_line[18]["source"].startswith("Exp(t, t, 4096)")
    # the per-line cycles add up to the report's per-pipe busy cycles (no overlap on V and MTE3)
    for pipe in ("PIPE_V", "PIPE_MTE3", "PIPE_S"):
        per_line = sum(l["pipes"].get(pipe, 0.0) for l in r.report.lines)
        assert per_line == pytest.approx(r.report.pipes[pipe]["busy_cycles"]), pipe
    # the scalar unit's cycles of a line are its calls' costs
    costs = simulator.load_profile().scalar.cycles_per_call
    assert by_line[18]["pipes"]["PIPE_S"] == pytest.approx(3 * costs["vector"])
    # the hottest line first
    assert r.report.lines == sorted(r.report.lines, key=lambda l: -l["cycles"])


def test_no_line_is_the_simulators_own(kernel_file):
    r = _run(kernel_file)
    lib = Path(simulator.__file__).resolve().parent
    assert r.report.lines and not any(lib in Path(l["file"]).resolve().parents for l in r.report.lines)


def test_an_operators_lines_are_its_kernel_source():
    x = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float16)
    r = simulator.run("SiluBackward", gradOutput=x, self=x.copy())
    assert r.report.lines and all(l["file"].endswith("silu_backward.py") for l in r.report.lines[:5])


def test_untraced_runs_keep_no_lines(kernel_file):
    assert _run(kernel_file, trace=False).report.lines == []


def test_cli_lines(kernel_file, capsys):
    assert main(["kernel", str(kernel_file), "--lines", "3", "--no-trace"]) == 0
    out = capsys.readouterr().out
    assert "hottest source lines" in out
    table = out.split("hottest source lines", 1)[1].splitlines()[2:5]
    assert len(table) == 3 and all("my_kernel.py:" in row for row in table)
    assert any("Exp(t, t, 4096)" in row for row in table)
