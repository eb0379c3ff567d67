"""Where a fast-mode run's CPU time goes, and how fast each redesign could make it at most.

    python benchmarks/fast_mode_costs.py                  # GridSampler N8 (Ascend910B1, Ascend910A), the ResNet-50 trace (Ascend910B1)
    python benchmarks/fast_mode_costs.py --trace traces/silu_smoke.jsonl --calls 4 --soc Ascend910B1
    python benchmarks/fast_mode_costs.py --cube-stages    # also: how long the Cube launches' runs of alike stages are

Each call runs exact (timing mode), then fast, in this process, one after the other; CPU seconds
(process time) are measured, and inside each run (the exact run's recording too), per launch kind
(vector or cube):
  * `record`: the blocks' kernel bodies running to record their programs (the helper thread's own
    CPU time where a long block is recorded in chunks), every block, shadows included;
  * `shadows`: of that, the blocks that then ran as shadows (fast mode), and the CPU time of
    crossing their transfers beside their representatives' (`cross`);
  * the rest of the run: simulating the programs, the L2, the skips, the launch and the report.
Two ceilings follow from the fast run's own parts: `free shadows`, exact / (fast - shadows'
recording - crossing), what a shadow made without running its kernel body and crossed at no cost
would give at most; and `cube only`, exact / (fast run's Cube launches), what the call would give
if every other launch cost nothing. `--cube-stages` counts, over the Cube launches' blocks, how
many of their L1 stages lie in runs of alike stages (the same L0 steps, the same copy-in sizes,
the same unit boundaries) of each length: a declared stage loop fast-forwards only runs longer than
its warm-up, two windows and tail (about 8 stages at a period of 2). Runs from any directory.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))      # this checkout's simulator, not the installed one

import simulator  # noqa: E402
from simulator import fast, gm_path, machine, studies  # noqa: E402
from simulator.program import KernelLaunch  # noqa: E402


class Meter:
    """CPU seconds by (launch kind, part) while installed: wraps the launch bodies, the shadows'
    making and their transfers' crossing, and puts everything back on exit."""

    def __init__(self):
        self.seconds: collections.Counter = collections.Counter()
        self.last_body = 0.0
        self.kind = "vector"

    def __enter__(self):
        meter = self
        self._saved = (machine.Device.run_launch, fast.ShadowBlock.__init__, gm_path.GmPath.cross_shadows)
        run_launch, shadow_init, cross_shadows = self._saved

        def timed_launch(device, launch, rec):
            kind = "cube" if launch.kind in ("cube", "mix") else "vector"

            def body(*args):
                t = time.thread_time()     # the recording thread's own CPU, chunked or whole
                try:
                    launch.body(*args)
                finally:
                    meter.last_body = time.thread_time() - t
                    meter.seconds[kind, "record"] += meter.last_body
            meter.kind = kind
            t = time.process_time()
            yield from run_launch(device, KernelLaunch(launch.name, body, launch.block_dim, launch.kind, launch.args),
                                  rec)
            meter.seconds[kind, "launch"] += time.process_time() - t

        def timed_shadow(shadow, *args, **kwargs):
            meter.seconds[meter.kind, "shadows"] += meter.last_body     # recorded just before it became one
            shadow_init(shadow, *args, **kwargs)

        def timed_cross(path, *args, **kwargs):
            t = time.process_time()
            try:
                return cross_shadows(path, *args, **kwargs)
            finally:
                meter.seconds[meter.kind, "cross"] += time.process_time() - t
        machine.Device.run_launch, fast.ShadowBlock.__init__, gm_path.GmPath.cross_shadows = (
            timed_launch, timed_shadow, timed_cross)
        return self

    def __exit__(self, *exc):
        machine.Device.run_launch, fast.ShadowBlock.__init__, gm_path.GmPath.cross_shadows = self._saved


class StageRuns:
    """With --cube-stages: the Cube launches' stages counted by the length of the run of alike
    stages each lies in (ops/conv/cube_kernel.py's Sched; a stage's sizes read from its copy-in)."""

    PLACES = {"pl", "p0", "plane", "plane_b", "oh0", "hlo", "kdt", "c1"}   # where a piece lies

    def __init__(self):
        from ops.conv import cube_kernel
        self.module, self.stages = cube_kernel, collections.Counter()

    @staticmethod
    def _key(stage) -> tuple:
        cells = {n: c.cell_contents for n, c in zip(stage.copyin.__code__.co_freevars, stage.copyin.__closure__ or ())}
        sizes = []
        for n, v in sorted(cells.items()):
            if hasattr(v, "_fields"):      # a piece of a unit: its sizes, not where it lies
                sizes.append((n, tuple(x for f, x in zip(v._fields, v) if f not in StageRuns.PLACES)))
            elif isinstance(v, int) and not isinstance(v, bool):
                sizes.append((n, v))
        return stage.first, stage.last, tuple((s.m, s.n, s.k) for s in stage.steps), tuple(sizes)

    def __enter__(self):
        runs, saved = self, self.module.Sched.run
        self._saved = saved

        def counted(sched, stages):
            stages = list(stages)
            keys = [runs._key(s) for s in stages]
            i = 0
            while i < len(keys):
                j = i
                while j < len(keys) and keys[j] == keys[i]:
                    j += 1
                runs.stages[j - i] += j - i
                i = j
            return saved(sched, stages)
        self.module.Sched.run = counted
        return self

    def __exit__(self, *exc):
        self.module.Sched.run = self._saved

    def table(self) -> str:
        total = sum(self.stages.values())
        if not total:
            return "no Cube launch ran"
        edges = (1, 2, 6, 10, 20, 40, 10**9)
        out, lo = [], 1
        for hi in edges:
            n = sum(c for length, c in self.stages.items() if lo <= length <= hi)
            label = f"{lo}" if lo == hi else (f"{lo}-{hi}" if hi < 10**9 else f">={lo}")
            out.append(f"  runs of {label:>6} stages: {n:7,d} stages ({100 * n / total:5.1f} %)")
            lo = hi + 1
        return "\n".join(out)


def run_call(call, soc: str, mode: str) -> tuple[float, collections.Counter]:
    kw = studies.build_inputs(call, data=False)
    with Meter() as m:
        t = time.process_time()
        simulator.run(call.op, soc, mode=mode, trace=False, tiling=call.tiling, **kw)
        return time.process_time() - t, m.seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--soc", action="append", help="chip (repeatable)")
    ap.add_argument("--trace", help="trace file (default: silu_smoke.jsonl call 4 on Ascend910B1 and Ascend910A, "
                                    "then resnet50_conv_backward.yaml on Ascend910B1)")
    ap.add_argument("--calls", help="only these calls, e.g. 0-3,7")
    ap.add_argument("--cube-stages", action="store_true", help="count the Cube launches' runs of alike stages")
    args = ap.parse_args()
    if args.trace:
        jobs = [(args.trace, args.calls, soc) for soc in (args.soc or ["Ascend910B1"])]
    else:
        smoke, resnet = str(ROOT / "traces" / "silu_smoke.jsonl"), str(ROOT / "traces" / "resnet50_conv_backward.yaml")
        jobs = [(smoke, "4", "Ascend910B1"), (smoke, "4", "Ascend910A"), (resnet, None, "Ascend910B1")]
    print(f"{'calls':<44} {'exact s':>8} {'record':>6} {'fast s':>7} {'x':>5} | fast: {'record':>6} {'shadows':>7} {'cross':>6} "
          f"{'cube':>6} | ceiling: {'free shadows':>12} {'cube only':>9}")
    runs = StageRuns() if args.cube_stages else None
    for path, calls, soc in jobs:
        w = studies.load_trace(path)
        pick = w.select(calls)
        exact = fast_s = exact_record = 0.0
        parts: collections.Counter = collections.Counter()
        for i in pick:
            with (runs if runs is not None else _nothing()):
                s, p = run_call(w.calls[i], soc, "timing")
            exact += s
            exact_record += p["vector", "record"] + p["cube", "record"]
            s, p = run_call(w.calls[i], soc, "fast")
            fast_s += s
            parts.update(p)
        record = parts["vector", "record"] + parts["cube", "record"]
        shadows = parts["vector", "shadows"] + parts["cube", "shadows"]
        cross = parts["vector", "cross"] + parts["cube", "cross"]
        cube = parts["cube", "launch"]
        name = f"{Path(path).stem}[{calls or 'all'}] @{soc}"
        free = exact / max(fast_s - shadows - cross, 1e-9)
        print(f"{name:<44} {exact:8.2f} {exact_record:6.2f} {fast_s:7.2f} {exact / fast_s:5.1f} | {'':5} {record:6.2f} {shadows:7.2f} "
              f"{cross:6.2f} {cube:6.2f} | {'':8} {free:11.1f}x "
              f"{(f'{exact / cube:8.1f}x' if cube else '        -'):>9}", flush=True)
    if runs is not None:
        print("Cube launches' L1 stages (exact runs), by the length of their run of alike stages:")
        print(runs.table())
    return 0


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    sys.exit(main())
