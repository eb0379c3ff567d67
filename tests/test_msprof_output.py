"""msprof-compatible output: the files `msprof op`, the system profiler and msKPP write, with their
headers as those tools write them and values that agree with the report (a column that disagrees
is a bug).

Every header we write is compared in full, column by column, with the header Huawei's own source
writes or its own tests expect, copied into tests/fixtures/msprof/headers/ (the README there cites
repository, path and commit for each file):
  msOpProf's metric_csv_header.h   OpBasicInfo, PipeUtilization, Memory, L2Cache,
                                   ArithmeticUtilization, for the Ascend910B and Ascend310P layouts
  msOpProf's api_data.h            the simulator's *_instr_exe.csv and *_code_exe.csv
  msprof's op_summary assembler    op_summary, both layouts (the coupled one's PMU columns from msKPP)
  msKPP's test_statistic_info.py   Pipe_statistic.csv, Instruction_statistic.csv
Searched and not found: a published sample file (rows as well as header) of any `msprof op` CSV;
the hiascend.com msprof op pages show them as images. The headers above are the tools' own source.
Not compared: file names. Current msOpProf appends the run's timestamp (`PipeUtilization_<stamp>.csv`,
`<core>_instr_exe_<stamp>.csv`); we write the undecorated names older CANN releases document.
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import simulator
from simulator.cli import main
from simulator.studies.compare import compare, read_op_summary, read_pipe_utilization

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "tests" / "fixtures" / "msprof" / "headers"
METRIC_FILES = ("OpBasicInfo", "PipeUtilization", "Memory", "L2Cache", "ArithmeticUtilization")


def rows_of(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def num(v: str) -> float:
    return 0.0 if v == "N/A" else float(v)


@pytest.fixture(scope="module")
def silu(tmp_path_factory):
    out = tmp_path_factory.mktemp("msprof")
    x = np.random.default_rng(0).standard_normal((64, 4096)).astype(np.float16)
    r = simulator.run("SiluBackward", "Ascend910B1", gradOutput=x, self=x.copy(), msprof_out=str(out))
    return r, out


@pytest.fixture(scope="module")
def coupled(tmp_path_factory):
    """The add sample on the coupled layout (Ascend310P3: AI cores with cube and vector units)."""
    out = tmp_path_factory.mktemp("msprof_coupled")
    sys.path.insert(0, str(ROOT / "examples" / "kernels"))
    try:
        import add_sample
    finally:
        sys.path.pop(0)
    spec = add_sample.launch(None)
    simulator.run_kernel(spec["body"], 8, spec["args"], soc="Ascend310P3", warmup=1, msprof_out=str(out))
    return out


def header_of(path: Path) -> list[str]:
    with path.open(newline="") as f:
        return next(csv.reader(f))


def assert_same_columns(ours: list[str], published: list[str]) -> None:
    """Equal in full; on failure name every position that differs, not only the first."""
    diffs = [(i, a, b) for i, (a, b) in enumerate(zip(ours, published)) if a != b]
    assert ours == published, (f"{len(ours)} columns written, {len(published)} published; first differences "
                               f"(index, ours, published): {diffs[:8]}; only ours: "
                               f"{[c for c in ours if c not in published]}; only published: "
                               f"{[c for c in published if c not in ours]}")


@pytest.mark.parametrize("layout, name", [
    *(("Ascend910B", n) for n in (*METRIC_FILES, "op_summary")),
    *(("Ascend310P", n) for n in (*METRIC_FILES, "op_summary")),
])
def test_each_header_is_the_published_one_in_full(layout, name, silu, coupled):
    out = silu[1] if layout == "Ascend910B" else coupled
    (written,) = out.glob("op_summary_*.csv" if name == "op_summary" else f"OPPROF_*/{name}.csv")
    assert_same_columns(header_of(written), header_of(PUBLISHED / layout / f"{name}.csv"))


@pytest.mark.parametrize("layout", ["Ascend910B", "Ascend310P"])
@pytest.mark.parametrize("name", ["instr_exe", "code_exe"])
def test_the_simulator_files_have_the_published_headers(layout, name, silu, coupled):
    out = silu[1] if layout == "Ascend910B" else coupled
    files = list(out.glob(f"OPPROF_*/simulator/*/*_{name}.csv"))
    assert files
    for f in files:
        assert_same_columns(header_of(f), header_of(PUBLISHED / "simulator" / f"{name}.csv"))


@pytest.mark.parametrize("name", ["Pipe_statistic", "Instruction_statistic"])
def test_the_mskpp_files_have_the_published_header_line(name, silu, coupled):
    """msKPP's test compares the raw first line (quoted), so we do too."""
    published = (PUBLISHED / "mskpp" / f"{name}.csv").read_text().splitlines()[0]
    for out in (silu[1], coupled):
        assert (out / f"{name}.csv").read_text().splitlines()[0] == published


def test_the_layout_is_msprof_ops(silu):
    r, out = silu
    (opprof,) = out.glob("OPPROF_*")
    for name in METRIC_FILES:
        assert (opprof / f"{name}.csv").is_file()
    assert len(list(out.glob("op_summary_*.csv"))) == 1
    assert (out / "Pipe_statistic.csv").is_file() and (out / "Instruction_statistic.csv").is_file()
    cores = sorted(p.name for p in (opprof / "simulator").iterdir() if p.is_dir())
    assert cores and all(c.startswith("core") and ".veccore" in c for c in cores)
    for c in cores:
        assert (opprof / "simulator" / c / f"{c}_instr_exe.csv").is_file()
        assert (opprof / "simulator" / c / f"{c}_code_exe.csv").is_file()


def test_per_block_rows_agree_with_the_report(silu):
    r, out = silu
    rep = r.report
    (opprof,) = out.glob("OPPROF_*")
    pipe = rows_of(opprof / "PipeUtilization.csv")
    assert len(pipe) == rep.launches[0]["block_dim"]
    assert [int(p["block_id"]) for p in pipe] == list(range(len(pipe)))
    mhz = rep.clock_mhz
    for col, p in (("aiv_vec_time(us)", "PIPE_V"), ("aiv_mte2_time(us)", "PIPE_MTE2"),
                   ("aiv_mte3_time(us)", "PIPE_MTE3"), ("aiv_scalar_time(us)", "PIPE_S")):
        total = sum(num(row[col]) for row in pipe) * mhz
        assert total == pytest.approx(rep.pipes[p]["busy_cycles"], rel=1e-5), col
    for row in pipe:                      # a ratio is the time over the block's time
        assert num(row["aiv_vec_ratio"]) == pytest.approx(num(row["aiv_vec_time(us)"]) / num(row["aiv_time(us)"]),
                                                          rel=1e-4)
    mem = rows_of(opprof / "Memory.csv")
    assert sum(num(m["GM_to_UB_datas(KB)"]) for m in mem) * 1024 == pytest.approx(rep.paths["GM_UB"]["bytes"], rel=1e-5)
    assert sum(num(m["UB_to_GM_datas(KB)"]) for m in mem) * 1024 == pytest.approx(rep.paths["UB_GM"]["bytes"], rel=1e-5)
    l2 = rows_of(opprof / "L2Cache.csv")
    lines = sum(num(x[c]) for x in l2 for c in ("aiv_write_cache_hit", "aiv_write_cache_miss_allocate",
                                                 "aiv_r0_read_cache_hit", "aiv_r0_read_cache_miss_allocate"))
    rec = rep.trace.rec
    assert lines == rec.l2_hit_lines + rec.l2_miss_lines
    basic = rows_of(opprof / "OpBasicInfo.csv")[0]
    assert int(basic["Block Dim"]) == rep.launches[0]["block_dim"] and basic["Mix Block Dim"] == "N/A"
    assert float(basic["Task Duration(us)"]) == pytest.approx(rep.launches[0]["cycles"] / mhz, rel=1e-5)


def test_our_op_summary_compared_with_our_report_reads_one(silu):
    r, out = silu
    (summary,) = out.glob("op_summary_*.csv")
    (row,) = read_op_summary(summary)
    assert row.block_dim == r.report.launches[0]["block_dim"]
    for c in compare(row, r.report.to_dict()):
        if c.measured_us:
            assert c.ratio == pytest.approx(1.0, rel=1e-4), c
    (opprof,) = out.glob("OPPROF_*")
    pu = read_pipe_utilization(opprof / "PipeUtilization.csv")
    assert pu.block_dim == r.report.launches[0]["block_dim"]


def test_per_core_files_add_up(silu):
    r, out = silu
    rec = r.report.trace.rec
    (opprof,) = out.glob("OPPROF_*")
    instr = sum(int(row["call_count"]) for f in (opprof / "simulator").glob("*/*_instr_exe.csv") for row in rows_of(f))
    assert instr == len([t for t in rec.trace if t[1] != "PIPE_S"]) + len([t for t in rec.trace if t[1] == "PIPE_S"])
    code_cycles = sum(int(row["cycles"]) for f in (opprof / "simulator").glob("*/*_code_exe.csv") for row in rows_of(f))
    assert code_cycles == pytest.approx(sum(l["cycles"] for l in r.report.lines), rel=1e-3)
    assert all(":" in row["code"] for f in (opprof / "simulator").glob("*/*_code_exe.csv") for row in rows_of(f))


def test_the_pipe_layout_trace_has_a_process_per_pipe_and_flag_arrows(silu):
    r, out = silu
    (opprof,) = out.glob("OPPROF_*")
    ev = json.loads((opprof / "simulator" / "trace.json").read_text())["traceEvents"]
    names = {e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    assert {"PIPE_V", "PIPE_MTE2", "PIPE_MTE3"} <= names
    starts = {e["id"]: e for e in ev if e.get("ph") == "s"}
    ends = {e["id"]: e for e in ev if e.get("ph") == "f"}
    assert starts and set(starts) == set(ends)
    for k, s in starts.items():
        f = ends[k]
        assert f["ts"] >= s["ts"] and f["tid"] == s["tid"] and f["pid"] != s["pid"]
    # one slice per traced instruction, none overlapping on its (pipe, core) track
    slices = sorted((e["pid"], e["tid"], e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("ph") == "X")
    assert len(slices) == len(r.report.trace.rec.trace)
    for a, b in zip(slices, slices[1:]):
        if a[:2] == b[:2]:
            assert b[2] >= a[3] - 1e-9


def test_the_add_sample_on_a_coupled_chip_writes_the_coupled_headers(tmp_path):
    sys.path.insert(0, str(ROOT / "examples" / "kernels"))
    try:
        import add_sample
    finally:
        sys.path.pop(0)
    spec = add_sample.launch(None)
    r = simulator.run_kernel(spec["body"], 8, spec["args"], soc="Ascend910A", warmup=1, msprof_out=str(tmp_path))
    (summary,) = tmp_path.glob("op_summary_*.csv")
    head = summary.read_text().splitlines()[0].split(",")
    assert "total_cycles" in head and "vec_time(us)" in head and "aic_total_cycles" not in head
    (row,) = read_op_summary(summary)
    fixture = read_op_summary(ROOT / "tests" / "fixtures" / "msprof" / "add_sample_op_summary.csv")[0]
    assert set(row.times) == set(fixture.times) == {""}           # the same columns as the board's
    assert row.block_dim == fixture.block_dim == 8
    # our file against the board's row: the ratios compare() prints for the fixture
    for c in compare(fixture, r.report.to_dict()):
        if c.measured_us:
            mine = row.times[""][c.figure if c.figure != "kernel" else "total"]
            assert mine == pytest.approx(c.simulated_us, rel=1e-4)


def test_cli_msprof_out_on_run_kernel_and_replay(tmp_path, capsys):
    assert main(["run", "SiluBackward", "--shape", "8,256", "--dtype", "FLOAT16", "--no-trace",
                 "--msprof-out", str(tmp_path / "run")]) == 0
    assert list((tmp_path / "run").glob("OPPROF_*/PipeUtilization.csv"))
    assert main(["kernel", str(ROOT / "examples" / "kernels" / "axpy.py"), "--mode", "timing", "--no-trace",
                 "--msprof-out", str(tmp_path / "kernel")]) == 0
    assert list((tmp_path / "kernel").glob("op_summary_*.csv"))
    assert main(["replay", str(ROOT / "traces" / "silu_smoke.jsonl"), "--calls", "0-1", "--no-progress",
                 "--msprof-out", str(tmp_path / "replay")]) == 0
    assert sorted(p.name for p in (tmp_path / "replay").iterdir()) == ["call000", "call001"]
    assert main(["run", "SiluBackward", "--shape", "8,256", "--dtype", "FLOAT16",
                 "--trace", str(tmp_path / "t.json"), "--trace-layout", "pipe"]) == 0
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert any(e.get("name") == "process_name" and e["args"]["name"] == "PIPE_MTE2" for e in ev)
    capsys.readouterr()
