"""pytest plugin: assert cycle baselines in your own test suite, as pytest-benchmark users compare
against saved runs. Installed with ascend-sim (entry point `pytest11`), nothing to configure:

    import numpy as np, simulator

    def test_silu_cost(cycle_baseline):
        x = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float16)
        r = simulator.run("SiluBackward", mode="timing", gradOutput=x, self=x)
        cycle_baseline(r)                       # or cycle_baseline(r, name="silu", tolerance=0.01)

    pytest --cycle-baseline-update     # record (or re-record) the baselines
    pytest                             # later runs fail when a call drifts beyond the tolerance

Baselines live in one JSON file (default `.cycle_baselines.json` beside the rootdir's ini file,
or `--cycle-baseline-file` / ini `cycle_baseline_file`), keyed by test id, name and SoC, so a test
parametrised over chips keeps one baseline per chip. A missing baseline fails (so CI notices a
new check) unless `--cycle-baseline-update` is given. The tolerance is relative, default 0.02
(`--cycle-baseline-tolerance`, ini `cycle_baseline_tolerance`, or per check).

Values accepted: a RunResult or KernelResult (from simulator.run / run_kernel), a Report, or a
number of cycles.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DEFAULT_FILE = ".cycle_baselines.json"


def pytest_addoption(parser):
    g = parser.getgroup("ascend-sim", "ascend-sim cycle baselines")
    g.addoption("--cycle-baseline-update", action="store_true", default=False,
                help="record the current cycles as the baselines instead of comparing")
    g.addoption("--cycle-baseline-file", default=None,
                help=f"baseline file (default {DEFAULT_FILE} in the rootdir)")
    g.addoption("--cycle-baseline-tolerance", type=float, default=None,
                help="relative drift allowed (default 0.02)")
    parser.addini("cycle_baseline_file", f"ascend-sim cycle baseline file (default {DEFAULT_FILE})",
                  default=DEFAULT_FILE)
    parser.addini("cycle_baseline_tolerance", "ascend-sim relative cycle tolerance (default 0.02)",
                  default="0.02")


class BaselineStore:
    def __init__(self, path: Path, update: bool, tolerance: float):
        self.path, self.update, self.tolerance = path, update, tolerance
        self.data: dict[str, dict] = {}
        if path.exists():
            try:
                raw = json.loads(path.read_text())
                self.data = dict(raw.get("baselines", {}))
            except (json.JSONDecodeError, AttributeError) as e:
                raise pytest.UsageError(f"{path}: not a cycle-baseline file ({e})") from None
        self.dirty = False
        self.checked = self.recorded = self.failed = 0

    def save(self) -> None:
        if not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"version": 1, "baselines": dict(sorted(self.data.items()))},
                                        indent=1) + "\n")


def _cycles_of(value: Any) -> tuple[float, str, str]:
    """(cycles, soc, what) of a RunResult / KernelResult / Report / number."""
    report = getattr(value, "report", None) or (value if hasattr(value, "cycles") and hasattr(value, "soc") else None)
    if report is not None:
        return float(report.cycles), str(report.soc), str(getattr(report, "op", ""))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), "-", ""
    raise TypeError(f"cycle_baseline: give a simulator.run / run_kernel result, a Report or a number, "
                    f"not {type(value).__name__}")


class CycleBaseline:
    """The fixture's value: call it with a result to compare (or record) its cycles."""

    def __init__(self, store: BaselineStore, nodeid: str):
        self.store, self.nodeid = store, nodeid
        self.results: list[dict] = []

    def __call__(self, value: Any, name: str | None = None, tolerance: float | None = None) -> float:
        cycles, soc, op = _cycles_of(value)
        key = self.nodeid + (f"::{name}" if name else "") + f"@{soc}"
        tol = self.store.tolerance if tolerance is None else tolerance
        st = self.store
        if st.update:
            st.data[key] = {"cycles": round(cycles, 3), "soc": soc, "op": op}
            st.dirty = True
            st.recorded += 1
            return cycles
        base = st.data.get(key)
        st.checked += 1
        if base is None:
            st.failed += 1
            pytest.fail(f"no cycle baseline for {key} in {st.path} (current: {cycles:,.0f} cycles); "
                        f"record it with `pytest --cycle-baseline-update`", pytrace=False)
        b = float(base["cycles"])
        drift = (cycles - b) / b if b else (0.0 if cycles == 0 else float("inf"))
        self.results.append({"key": key, "baseline": b, "cycles": cycles, "drift": drift})
        if abs(drift) > tol:
            st.failed += 1
            pytest.fail(f"{key}: {cycles:,.0f} cycles, baseline {b:,.0f}: drift {drift:+.2%} beyond "
                        f"±{tol:.1%}; if intended, re-record with `pytest --cycle-baseline-update`",
                        pytrace=False)
        return cycles

    check = __call__


def _store(config) -> BaselineStore:
    st = getattr(config, "_ascend_sim_baselines", None)
    if st is None:
        f = config.getoption("--cycle-baseline-file") or config.getini("cycle_baseline_file") or DEFAULT_FILE
        path = Path(f)
        if not path.is_absolute():
            path = Path(config.rootpath) / path
        tol = config.getoption("--cycle-baseline-tolerance")
        if tol is None:
            tol = float(config.getini("cycle_baseline_tolerance") or 0.02)
        st = BaselineStore(path, bool(config.getoption("--cycle-baseline-update")), tol)
        config._ascend_sim_baselines = st
    return st


@pytest.fixture
def cycle_baseline(request) -> CycleBaseline:
    """Compare a simulated call's cycles with the saved baseline (see simulator.pytest_plugin)."""
    return CycleBaseline(_store(request.config), request.node.nodeid)


def pytest_sessionfinish(session, exitstatus):
    st = getattr(session.config, "_ascend_sim_baselines", None)
    if st is not None and st.update:
        st.save()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    st = getattr(config, "_ascend_sim_baselines", None)
    if st is None:
        return
    if st.update:
        terminalreporter.write_line(f"ascend-sim: recorded {st.recorded} cycle baseline(s) in {st.path}")
    elif st.checked:
        terminalreporter.write_line(f"ascend-sim: {st.checked} cycle baseline(s) checked, {st.failed} failed "
                                    f"(tolerance ±{st.tolerance:.1%}, {st.path})")
