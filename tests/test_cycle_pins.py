"""Cycle pins: the exact engine's cycles (every bit of the float), instruction counts and report
hashes for the calls of the shipped traces, against tests/fixtures/cycle_pins.txt. Any change
to the exact engine, a kernel or a profile that moves a cycle fails here with the call, the
pinned and new cycles and the drift; a refactor that claims to move none must pass unchanged.

The file pins every call of the five workload traces in traces/ (benchmarks/engine_fingerprint.py's
TRACES; the batch-256 ResNet-50 step is benchmarks/validation.py's) on every SoC in devices/ (a call the chip
refuses is pinned as refused; HEAVY_NOT_YET_PINNED lists the DETR encoder calls still to record)
and, after each, what it cost to record (CPU seconds on a loaded 2-core machine, without the
per-instruction trace, as the suite runs it). The suite's budget is a few minutes on one core
(pytest runs serially), so it checks, by this rule:

* every call that cost under SUITE_MAX_CALL_S to record, on every chip (most SiLU calls, the
  ResNet-50 calls on Ascend310P3, every refusal);
* and on Ascend910B1 and Ascend910A the cheapest call of each trace whatever it cost, so that
  every operator and trace is in the suite on both series that run them all;
* never the four DETR encoder calls (20197 queries, ~3 min and 16 million instructions each):
  `python benchmarks/engine_fingerprint.py --set heavy --against tests/fixtures/cycle_pins.txt`
  checks them (about two hours of CPU).

That is about 930 of the 1,776 other pins, ~2.5 min of CPU as recorded. `python
benchmarks/engine_fingerprint.py --set pins --against tests/fixtures/cycle_pins.txt` checks all
1,776 (~30-40 min of CPU on a loaded 2-core machine: the fconv trace's 480 calls take half of it);
`--ops` limits it to the calls of some operators.

Re-recording, after an intended change to the cost model, only:

    CYCLE_PINS_UPDATE=1 python -m pytest tests/test_cycle_pins.py    # the suite's calls
    python benchmarks/engine_fingerprint.py --set pins --record tests/fixtures/cycle_pins.txt
    python benchmarks/engine_fingerprint.py --set heavy --record tests/fixtures/cycle_pins.txt
        (about 4 min a call: split it over processes with --socs, each into its own copy, then merge)

in a commit of its own whose message states the drift (the lines the failing run printed).
"""
from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path

import pytest

from simulator.profile import load_profile

ROOT = Path(__file__).resolve().parent.parent


def _load_fingerprints():
    """benchmarks/engine_fingerprint.py is the one home of the fingerprint and the call sets."""
    spec = importlib.util.spec_from_file_location("engine_fingerprint", ROOT / "benchmarks" / "engine_fingerprint.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("engine_fingerprint", module)
    spec.loader.exec_module(module)
    return module


fp = _load_fingerprints()
PINS = fp.read_pins(fp.PIN_FILE) if fp.PIN_FILE.exists() else {}
UPDATE = os.environ.get("CYCLE_PINS_UPDATE") == "1"

SUITE_MAX_CALL_S = 0.5
CHEAPEST_OF_EACH_TRACE_ON = ("Ascend910B1", "Ascend910A")


def _cheapest_of_each_trace() -> set[str]:
    cheapest = {}
    for c in fp.every_call():
        pin = PINS.get(c.tag)
        if c.soc in CHEAPEST_OF_EACH_TRACE_ON and pin and pin.refused is None and pin.cpu_seconds is not None:
            key = (c.trace, c.soc)
            if key not in cheapest or pin.cpu_seconds < PINS[cheapest[key]].cpu_seconds:
                cheapest[key] = c.tag
    return set(cheapest.values())


def _in_suite(call, cheapest: set[str]) -> bool:
    if call.heavy:
        return False
    pin = PINS.get(call.tag)
    if pin is None or pin.cpu_seconds is None:
        return True                     # not recorded yet: run it, so that it fails as unpinned
    return pin.cpu_seconds < SUITE_MAX_CALL_S or call.tag in cheapest


# DETR encoder calls whose pins were not recorded with the rest (each takes 6-8 min of CPU on a
# loaded machine): a heavy call is listed here until its pin is recorded after a change that moved
# it. None now: every heavy call has its pin.
HEAVY_NOT_YET_PINNED: set[str] = set()

_CHEAPEST = _cheapest_of_each_trace()
SUITE = [c for c in fp.every_call() if _in_suite(c, _CHEAPEST)]
_recorded: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _write_when_updating():
    yield
    if UPDATE and _recorded:
        fp.record(fp.PIN_FILE, _recorded)


@pytest.mark.parametrize("call", SUITE, ids=lambda c: c.tag)
def test_call_matches_its_pin(call):
    if UPDATE:
        _recorded.append(call.pin_line())
        return
    pin = PINS.get(call.tag)
    assert pin is not None, f"{call.tag} has no pin: record it (see this file's docstring)"
    new = fp.Pin.parse(call.run(trace=False))
    problem = pin.mismatch(new)
    assert problem is None, (f"{problem}\nIf the change is intended, re-record the pins in a commit of "
                             "its own that states the drift (tests/test_cycle_pins.py says how).")


def test_every_call_of_every_trace_on_every_chip_is_pinned():
    """The heavy calls too, except those not recorded yet (HEAVY_NOT_YET_PINNED: recording them
    takes about two hours of CPU, `--set heavy --record`; `--set heavy --against` reports each missing one)."""
    missing = [c.tag for c in fp.every_call() if c.tag not in PINS and c.tag not in HEAVY_NOT_YET_PINNED]
    assert not missing, f"{len(missing)} calls have no pin, e.g. {missing[:5]}"
    assert all(fp.PinCall(*_split(t)).heavy for t in HEAVY_NOT_YET_PINNED)
    assert not HEAVY_NOT_YET_PINNED & set(PINS), "pinned now: take them off HEAVY_NOT_YET_PINNED"
    assert len({c.tag for c in fp.every_call()}) == len(fp.every_call())


def _split(tag: str) -> tuple[str, int, str]:
    trace, rest = tag.split("[")
    index, soc = rest.split("]@")
    return trace, int(index), soc


def test_a_call_of_an_operator_the_profile_lacks_is_pinned_as_refused():
    """The pins agree with devices/: where a profile does not list the call's operator, the pin
    is a refusal (a refusal of a listed operator, e.g. BF16 on Ascend910A, is the operator's)."""
    for c in fp.every_call():
        op = fp._calls(c.trace)[c.index].op
        if load_profile(c.soc).supports(op) is None and c.tag in PINS:
            assert PINS[c.tag].refused is not None, c.tag


def test_a_drift_is_reported_with_the_call_both_cycles_and_the_percentage():
    pin = fp.Pin.parse("resnet50_conv_backward.yaml[3]@Ascend910B1 200000.0 1234 aaaaaaaaaaaa bbbbbbbbbbbb")
    msg = pin.mismatch(fp.Pin.parse("resnet50_conv_backward.yaml[3]@Ascend910B1 203000.5 1240 cccccccccccc -"))
    assert msg.startswith("resnet50_conv_backward.yaml[3]@Ascend910B1: pinned 200000.0 cycles, now 203000.5")
    assert "drift +1.500250%" in msg and "1234 -> 1240" in msg
    # the last bit of the float counts
    assert pin.mismatch(fp.Pin.parse(f"{pin.tag} {math.nextafter(200000.0, 1e9)!r} 1234 aaaaaaaaaaaa -"))
    assert pin.mismatch(fp.Pin.parse(f"{pin.tag} 200000.0 1234 aaaaaaaaaaaa -")) is None
    assert "instructions 1234 -> 1235" in pin.mismatch(fp.Pin.parse(f"{pin.tag} 200000.0 1235 aaaaaaaaaaaa -"))
    assert "report differs" in pin.mismatch(fp.Pin.parse(f"{pin.tag} 200000.0 1234 dddddddddddd -"))
    refused = fp.Pin.parse(f"{pin.tag} refused AclnnError")
    assert "pinned refused AclnnError, now 200000.0 cycles" in refused.mismatch(pin)
