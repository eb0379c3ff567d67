"""Engine fingerprints: one line per call with its cycles (repr, every bit), its instruction count,
a hash of its whole report (less the hot source lines, which a refactor moves) and a hash of its
sorted per-instruction trace (core, pipe, name, start, duration, device-memory bytes). An engine
change that claims not to move a cycle must print the same lines before and after:

    python benchmarks/engine_fingerprint.py --set quick > before.txt    # at the old commit
    python benchmarks/engine_fingerprint.py --set quick --against before.txt

Sets (timing mode unless --mode fast; traces from traces/; run from the repository root):

* quick: silu_smoke on three chips, DETR call 0, ResNet-50 calls 0 and 7 (~30 s).
* full: fconv's ConvTBC backward calls, EfficientNet, silu_smoke on three chips, ResNet-50 calls on Ascend910A, DETR
  calls 0-3, GridSampler 2x64x64x64 on two chips (~2 min).
* pins: every call of every shipped trace on every SoC in devices/ except the heavy ones, without
  the per-instruction trace (a quarter faster; cycles, instructions and the report hash are
  compared, the report does not depend on the trace). A call the chip refuses (its profile
  lacks the operator, or the operator rejects the call) is a line `<call> refused <exception>`.
  The stored pins are tests/fixtures/cycle_pins.txt; tests/test_cycle_pins.py checks those that
  fit the suite's time budget (its docstring states the rule), `--set pins --against
  tests/fixtures/cycle_pins.txt` all of them (~30-40 min of CPU).
* heavy: the 4 DETR encoder calls (20197 queries) on every chip that has GridSampler2DBackward,
  also without a trace (15.9 million instructions per call, ~4 min each: too slow for the
  suite). Pinned in the same file; `--set heavy --against tests/fixtures/cycle_pins.txt` checks
  them (about two hours of CPU: 32 calls of about 4 min).

`--mode fast` runs the same calls in fast mode (declared loops fast-forwarded): a refactor of fast
mode that claims not to move its figures prints the same lines before and after. quick and full
run with a trace, under which fast mode simulates every block (no shadows): check a change that
reaches the shadows with `--set pins --mode fast` (no trace; `--socs` to keep it short). The
stored pins are timing-mode lines; do not record fast-mode lines into them.

`--against FILE` compares by call name, so FILE may hold more calls than the set; a pin without
a trace hash (`-`) is compared on the other fields. `--record FILE` writes the set's lines, each
with the CPU seconds it took, into FILE as they come, keeping the other calls' lines; `--socs`
limits pins and heavy to some SoCs (to record in several processes), `--ops` to the calls of some
operators (to re-record those a change to one operator's kernel moves; a full `--against` after
it shows whether any other call moved). Re-recording the stored
pins after an intended change to the cost model belongs in its own commit whose message states
the drift (the lines `--against` printed).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# this checkout's simulator, not the installed one: a worktree of an old commit measures that commit
sys.path.insert(0, str(ROOT))

import simulator  # noqa: E402
from simulator import TensorLayout, studies  # noqa: E402

PIN_FILE = ROOT / "tests" / "fixtures" / "cycle_pins.txt"
TRACES = ("silu_smoke.jsonl", "efficientnet_b0_silu_backward.yaml", "resnet50_conv_backward.yaml",
          "fconv_wmt_en_de_conv_tbc_backward.yaml", "deformable_detr_grid_sample_backward.yaml")
SOCS = ("Ascend910B1", "Ascend910A", "Ascend310P3", "Ascend910B2", "Ascend910B3", "Ascend910B4",
        "Ascend910_9392", "Ascend910_9362")
HEAVY = {"deformable_detr_grid_sample_backward.yaml": (4, 5, 6, 7)}    # the encoder calls
SMOKE_CHIPS = ("Ascend910B1", "Ascend910A", "Ascend310P3")
MODE = {"mode": "timing"}           # --mode fast switches every run of the set


def fingerprint(tag: str, result) -> str:
    report = result.report.to_dict()
    report.pop("trace", None)
    report.pop("lines", None)       # source line numbers: a refactor moves them, the cycles stay
    report.pop("measured", None)    # the profile's published-figure fit: no result of the run
    rh = hashlib.sha1(json.dumps(report, sort_keys=True, default=str).encode()).hexdigest()[:12]
    th = "-"
    if result.report.trace is not None and result.report.trace.rec.trace:
        th = hashlib.sha1(repr(sorted(result.report.trace.rec.trace)).encode()).hexdigest()[:12]
    return f"{tag} {result.report.cycles!r} {result.report.instructions} {rh} {th}"


@dataclass(frozen=True)
class Pin:
    """One fingerprint line, parsed: a run (cycles as their repr, so every bit counts) or a refusal."""
    tag: str
    cycles: str | None = None
    instructions: int | None = None
    report_hash: str | None = None
    trace_hash: str | None = None
    refused: str | None = None
    cpu_seconds: float | None = None    # what the call cost when recorded (a `# 0.52 s` comment)

    @classmethod
    def parse(cls, line: str) -> "Pin":
        line, _, comment = line.partition("#")
        cost = float(comment.split()[0]) if comment.strip() else None
        tag, rest = line.strip().split(" ", 1)
        if rest.startswith("refused "):
            return cls(tag, refused=rest[len("refused "):], cpu_seconds=cost)
        cycles, instructions, rh, th = rest.split()
        return cls(tag, cycles, int(instructions), rh, None if th == "-" else th, cpu_seconds=cost)

    def line(self) -> str:
        head = (f"{self.tag} refused {self.refused}" if self.refused is not None else
                f"{self.tag} {self.cycles} {self.instructions} {self.report_hash} {self.trace_hash or '-'}")
        return head if self.cpu_seconds is None else f"{head}  # {self.cpu_seconds:.2f} s"

    def mismatch(self, new: "Pin") -> str | None:
        """None if `new` matches this pin; else one line: the call, pinned and new cycles, drift."""
        if self.refused is not None or new.refused is not None:
            if self.refused == new.refused:
                return None
            was = f"refused {self.refused}" if self.refused is not None else f"{self.cycles} cycles"
            now = f"refused {new.refused}" if new.refused is not None else f"{new.cycles} cycles"
            return f"{self.tag}: pinned {was}, now {now}"
        if self.cycles != new.cycles:
            drift = (float(new.cycles) - float(self.cycles)) / float(self.cycles)
            return (f"{self.tag}: pinned {self.cycles} cycles, now {new.cycles} "
                    f"(drift {drift:+.6%}; instructions {self.instructions} -> {new.instructions})")
        if self.instructions != new.instructions:
            return (f"{self.tag}: same cycles {self.cycles}, instructions "
                    f"{self.instructions} -> {new.instructions}")
        if self.report_hash != new.report_hash:
            return f"{self.tag}: same cycles and instructions, report differs (hash {self.report_hash} -> {new.report_hash})"
        if self.trace_hash and new.trace_hash and self.trace_hash != new.trace_hash:
            return f"{self.tag}: same cycles and report, instruction trace differs (hash {self.trace_hash} -> {new.trace_hash})"
        return None


@dataclass(frozen=True)
class PinCall:
    """One call of a shipped trace on one SoC."""
    trace: str
    index: int
    soc: str

    @property
    def tag(self) -> str:
        return f"{self.trace}[{self.index}]@{self.soc}"

    @property
    def heavy(self) -> bool:
        return self.index in HEAVY.get(self.trace, ())

    def run(self, trace: bool = True) -> str:
        """The call's fingerprint line (a heavy call always without a trace: its 16 million
        records would cost gigabytes)."""
        call = _calls(self.trace)[self.index]
        trace = trace and not self.heavy
        try:
            r = simulator.run(call.op, self.soc, mode=MODE["mode"], trace=trace, tiling=call.tiling,
                              **studies.build_inputs(call, data=False))
        except Exception as e:              # a call the chip refuses is part of the fingerprint
            return f"{self.tag} refused {type(e).__name__}"
        return fingerprint(self.tag, r)

    def pin_line(self) -> str:
        """The line the pin file stores: the fingerprint without a trace, and its CPU seconds."""
        t = time.process_time()
        line = self.run(trace=False)
        return f"{line}  # {time.process_time() - t:.2f} s"


_TRACE_CACHE: dict[str, list] = {}


def _calls(trace: str) -> list:
    if trace not in _TRACE_CACHE:
        _TRACE_CACHE[trace] = studies.load_trace(ROOT / "traces" / trace).calls
    return _TRACE_CACHE[trace]


def every_call() -> list[PinCall]:
    """Every call of every shipped trace on every SoC, heavy ones included, in pin-file order."""
    return [PinCall(t, i, soc) for soc in SOCS for t in TRACES for i in range(len(_calls(t)))]


def read_pins(path: str | Path = PIN_FILE) -> dict[str, Pin]:
    with open(path) as f:
        pins = [Pin.parse(ln.strip()) for ln in f if ln.strip() and not ln.startswith("#")]
    return {p.tag: p for p in pins}


# ---- the sets -------------------------------------------------------------------------------------
def trace_calls(path: str, soc: str, only: set[int] | None = None):
    for i in range(len(_calls(path.split("/")[-1]))):
        if only is None or i in only:
            yield PinCall(path.split("/")[-1], i, soc).run()


def grid_call(soc: str):
    n, c, h, w = 2, 64, 64, 64
    kw = dict(gradOutput=TensorLayout((n, c, h, w), np.float32), input=TensorLayout((n, c, h, w), np.float32),
              grid=TensorLayout((n, h, w, 2), np.float32), interpolationMode=0, paddingMode=0,
              alignCorners=False, outputMask=[True, True])
    yield fingerprint(f"grid2x64x64x64@{soc}",
                      simulator.run("GridSampler2DBackward", soc, mode=MODE["mode"], trace=True, **kw))


def quick():
    for soc in SMOKE_CHIPS:
        yield from trace_calls("traces/silu_smoke.jsonl", soc)
    yield from trace_calls("traces/deformable_detr_grid_sample_backward.yaml", "Ascend910B1", {0})
    yield from trace_calls("traces/resnet50_conv_backward.yaml", "Ascend910B1", {0, 7})


def full():
    yield from trace_calls("traces/fconv_wmt_en_de_conv_tbc_backward.yaml", "Ascend910B1", set(range(15)))
    yield from trace_calls("traces/efficientnet_b0_silu_backward.yaml", "Ascend910B1")
    for soc in SMOKE_CHIPS:
        yield from trace_calls("traces/silu_smoke.jsonl", soc)
    yield from trace_calls("traces/resnet50_conv_backward.yaml", "Ascend910A", {0, 5, 11, 20})
    yield from trace_calls("traces/deformable_detr_grid_sample_backward.yaml", "Ascend910B1", {0, 1, 2, 3})
    for soc in ("Ascend910B1", "Ascend910A"):
        yield from grid_call(soc)


def pins(socs=SOCS, ops=None):
    for c in every_call():
        if not c.heavy and c.soc in socs and (ops is None or _calls(c.trace)[c.index].op in ops):
            yield c.run(trace=False)


def heavy(socs=SOCS, ops=None):
    for c in every_call():
        if c.heavy and c.soc in socs and (ops is None or _calls(c.trace)[c.index].op in ops):
            yield c.run()


SETS: dict[str, Callable[..., Iterator[str]]] = {"quick": quick, "full": full, "pins": pins, "heavy": heavy}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=tuple(SETS), default="quick")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--against", help="a file of earlier output: print only the calls that differ")
    group.add_argument("--record", help="write the set's lines, with their CPU seconds, into this file "
                                        "(other calls' lines are kept)")
    ap.add_argument("--times", action="store_true", help="print each call's CPU seconds (stderr)")
    ap.add_argument("--socs", help="pins and heavy: only these SoCs (comma-separated)")
    ap.add_argument("--ops", help="pins and heavy: only the calls of these operators, as the traces name "
                                  "them (comma-separated: Glu,GluBackward)")
    ap.add_argument("--mode", choices=("timing", "fast"), default="timing",
                    help="the engine mode every call runs in (fast: compare fast-mode refactors)")
    args = ap.parse_args()
    if args.record and args.mode != "timing":
        ap.error("--record writes cycle pins, which are timing-mode figures")
    MODE["mode"] = args.mode
    if (args.socs or args.ops) and args.set not in ("pins", "heavy"):
        ap.error("--socs and --ops choose among the pins and heavy sets' calls")
    kw = {}
    if args.socs:
        kw["socs"] = tuple(args.socs.split(","))
    if args.ops:
        kw["ops"] = frozenset(args.ops.split(","))
        known = {c.op for t in TRACES for c in _calls(t)}
        if kw["ops"] - known:
            ap.error(f"--ops {','.join(sorted(kw['ops'] - known))}: no trace calls it; the traces' operators are "
                     f"{', '.join(sorted(known))}")
    calls = SETS[args.set](**kw)
    lines = []
    for line, seconds in timed(calls):
        lines.append(line)
        if args.times:
            print(f"{seconds:8.2f} s  {line.split(' ', 1)[0]}", file=sys.stderr, flush=True)
        if args.record:                 # line by line: a long recording that stops keeps what it did
            record(Path(args.record), [f"{line}  # {seconds:.2f} s"], quiet=True)
        elif not args.against:
            print(line, flush=True)
    if args.record:
        print(f"recorded {len(lines)} calls into {args.record}")
        return 0
    if args.against:
        before = read_pins(args.against)
        differ = []
        for line in lines:
            new = Pin.parse(line)
            old = before.get(new.tag)
            msg = f"{new.tag}: not in {args.against}" if old is None else old.mismatch(new)
            if msg:
                differ.append(msg)
                print(msg, flush=True)
        print(f"{len(lines)} calls, {len(differ)} differ")
        return 1 if differ else 0
    return 0


def timed(lines: Iterator[str]) -> Iterator[tuple[str, float]]:
    """Each line with the CPU seconds it took (not wall time: on a shared machine the wall time
    measures the other jobs)."""
    t = time.process_time()
    for line in lines:
        yield line, time.process_time() - t
        t = time.process_time()


PIN_FILE_HEADER = """\
# Cycle pins, checked by tests/test_cycle_pins.py (which calls the suite runs, and how to re-record).
# <trace>[<call>]@<SoC> <cycles repr> <instructions> <report hash> <trace hash or ->  # <CPU s>
# or <trace>[<call>]@<SoC> refused <exception>  # <CPU s>
"""


def record(path: Path, lines: list[str], quiet: bool = False):
    """Write `lines` into the pin file at `path`, replacing those calls' lines and keeping the
    others, in every_call() order."""
    merged = {tag: p.line() for tag, p in (read_pins(path) if path.exists() else {}).items()}
    new = {Pin.parse(ln).tag: ln for ln in lines}
    merged |= new
    order = [c.tag for c in every_call()]
    known = [t for t in order if t in merged] + sorted(t for t in merged if t not in order)
    path.write_text(PIN_FILE_HEADER + "".join(merged[t] + "\n" for t in known))
    if not quiet:
        print(f"recorded {len(new)} calls into {path} ({len(known)} in all)")


if __name__ == "__main__":
    sys.exit(main())
