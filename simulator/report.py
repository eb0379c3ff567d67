"""What a call cost and why: the per-call report and its Chrome-trace timeline."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .fast import FastRecord
from .records import TaskRecord
from .outputs import atomic_path, write_text
from .profile import PIPES, Profile


@dataclass
class Report:
    op: str
    soc: str
    mode: str
    clock_mhz: float
    workspace_bytes: int
    workspace_breakdown: list[dict]
    tiling: dict[str, Any]
    cycles: float
    time_us: float
    launches: list[dict]
    # the launches' Task Durations summed (msprof's op_summary), without the gaps between them
    kernel_cycles: float
    kernel_us: float
    instructions: int
    cores: dict[str, dict[str, float]]            # core -> pipe -> busy cycles
    pipes: dict[str, dict[str, float]]            # pipe -> busy/work totals and fractions
    paths: dict[str, dict[str, float]]            # data path -> bytes, GB/s
    device_memory: dict[str, float]
    l2: dict[str, float]
    bound: str
    utilisation: dict[str, float]                 # resource -> fraction of the call it was needed
    roofline_cycles: float
    roofline_efficiency: float
    # the kernel source lines that cost the most (traced runs): file, line, cycles over every pipe,
    # the busiest pipe, instructions issued, per-pipe cycles, the line's text
    lines: list[dict] = field(default_factory=list, repr=False)
    trace: "Trace" = field(repr=False, default=None)
    # fast mode: instructions simulated and fast-forwarded, and the bound on the cycles' error
    fast: dict | None = None
    # how this operator's cycles compare with published kernel times on this series (the profile's
    # operators.<op>.measured); {}: none checks them; None: not an operator the profile lists (a
    # kernel file of the user's)
    measured: dict | None = None

    @classmethod
    def from_task(cls, rec: TaskRecord, profile: Profile, op: str,
                  workspace: list[tuple[str, int]] = (), workspace_bytes: int = 0,
                  tiling: dict | None = None, functional: bool = True, mode: str | None = None) -> "Report":
        cycles = rec.end - rec.start
        us = profile.cycles_to_us(cycles)
        cores: dict[str, dict[str, float]] = {}
        for (core, pipe), busy in sorted(rec.busy.items()):
            cores.setdefault(core, {})[pipe] = busy
        pipes: dict[str, dict[str, float]] = {}
        for pipe in PIPES:
            keys = sorted(k for k in rec.busy if k[1] == pipe)     # sums in one order: same bits
            if not keys:
                continue
            n = len(keys)
            busy = sum(rec.busy[k] for k in keys)
            work = sum(rec.work[k] for k in keys)
            pipes[pipe] = {
                "cores": n,
                "busy_cycles": busy,
                "work_cycles": work,
                "busy_fraction": busy / (n * cycles) if cycles else 0.0,
                "max_core_busy_fraction": max(rec.busy[k] for k in keys) / cycles if cycles else 0.0,
            }
        path_cycles = rec.path_cycles
        paths = {p: {"bytes": b, "GBps": b / (us * 1e3) if us else 0.0,
                     "busy_cycles": path_cycles.get(p, 0.0)}
                 for p, b in sorted(rec.path_bytes.items())}
        chan_cycles = (rec.hbm_bytes + rec.hbm_opened) / profile.device_bytes_per_cycle
        l2_cycles = rec.l2_bytes / profile.l2_bytes_per_cycle
        dm_gbps = rec.hbm_bytes / (us * 1e3) if us else 0.0
        device_memory = {"bytes": rec.hbm_bytes, "busy_cycles": chan_cycles,
                         "GBps": dm_gbps, "peak_GBps": profile.device_memory.bandwidth_GBps,
                         "fraction_of_peak": dm_gbps / profile.device_memory.bandwidth_GBps}
        lines = rec.l2_hit_lines + rec.l2_miss_lines
        l2 = {"bytes": rec.l2_bytes, "busy_cycles": l2_cycles,
              "GBps": rec.l2_bytes / (us * 1e3) if us else 0.0,
              "hit_rate": rec.l2_hit_lines / lines if lines else 0.0}
        launch_cycles = launch_fixed_cycles(rec, profile)
        kernel_cycles = sum(l.end - l.start for l in rec.launches)
        # utilisation: the time each resource needed (without contention) over the call's time
        util = {"device memory": chan_cycles / cycles if cycles else 0.0,
                "L2": l2_cycles / cycles if cycles else 0.0,
                "launch overhead": launch_cycles / cycles if cycles else 0.0}
        per_pipe_bound = 0.0
        for pipe in pipes:
            keys = sorted(k for k in rec.work if k[1] == pipe)
            util[pipe] = max(rec.work[k] for k in keys) / cycles if cycles else 0.0
            # every core of the kinds the call ran on could share the pipe's work: the ideal
            ncores = sum(profile.cores[k].count for k in rec.cores_used if pipe in profile.cores[k].pipes)
            per_pipe_bound = max(per_pipe_bound, sum(rec.work[k] for k in keys) / max(ncores, 1))
        bound = max(util, key=lambda k: util[k]) if cycles else "nothing (empty call)"
        roofline = launch_cycles + max(chan_cycles, l2_cycles, per_pipe_bound)
        launches = [{"name": l.name, "block_dim": l.block_dim, "core_kind": l.core_kind,
                     "start_cycle": l.start - rec.start, "cycles": l.end - l.start,
                     # on the cores, without the launch overhead: msprof's aicore_time
                     "core_cycles": l.core_cycles(),
                     "sides": launch_sides(rec, profile, i)}
                    for i, l in enumerate(rec.launches)]
        ws = [{"purpose": name, "bytes": n} for name, n in workspace]
        mode = mode or ("functional" if functional else "timing")
        fast = None
        if mode == "fast":
            fast = (rec.fast or FastRecord()).to_dict(cycles, rec.instructions)   # (none: nothing fast-forwarded)
        return cls(op=op, soc=profile.soc_version, mode=mode, fast=fast,
                   clock_mhz=profile.clock_mhz,
                   workspace_bytes=workspace_bytes, workspace_breakdown=ws,
                   tiling=dict(tiling or {}), cycles=cycles, time_us=us, launches=launches,
                   kernel_cycles=kernel_cycles, kernel_us=profile.cycles_to_us(kernel_cycles),
                   instructions=rec.instructions, cores=cores, pipes=pipes, paths=paths,
                   device_memory=device_memory, l2=l2, bound=bound, utilisation=util,
                   roofline_cycles=roofline,
                   roofline_efficiency=roofline / cycles if cycles else 1.0,
                   lines=hot_lines(rec), trace=Trace(rec, profile), measured=measured_fit(profile, op))

    # ---- output --------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        # (`fast` only in fast mode: an exact mode's report is what it always was)
        d = {k: v for k, v in self.__dict__.items() if k != "trace" and not (k == "fast" and v is None)}
        return json.loads(json.dumps(d, default=str))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def pipe_rows(self) -> list[dict]:
        """One row per (core, pipe): busy cycles and fraction of the call (for pandas / CSV)."""
        return [{"core": core, "pipe": pipe, "busy_cycles": busy,
                 "busy_fraction": busy / self.cycles if self.cycles else 0.0}
                for core, pipes in self.cores.items() for pipe, busy in pipes.items()]

    def instruction_rows(self) -> list[dict]:
        """Per instruction name and pipe: count, total and mean cycles (msKPP's per-instruction
        statistics). Needs the trace (run with trace=True)."""
        stats: dict[tuple[str, str], list[float]] = {}
        for _, pipe, name, _, dur, _ in self.trace.rows() if self.trace else ():
            s = stats.setdefault((pipe, name), [0, 0.0])
            s[0] += 1
            s[1] += dur
        return [{"pipe": p, "instruction": n, "count": c, "total_cycles": t, "mean_cycles": t / c}
                for (p, n), (c, t) in sorted(stats.items(), key=lambda kv: -kv[1][1])]

    def lines_table(self, top: int = 10) -> str:
        """The hottest kernel source lines: cycles (all pipes), busiest pipe, instructions."""
        if not self.lines:
            return "  no source lines (run with tracing on)"
        out = [f"  {'cycles':>12} {'share':>6} {'busiest pipe':<12} {'instr':>8}  line"]
        total = sum(l["cycles"] for l in self.lines) or 1.0
        for l in self.lines[:top]:
            where = f"{l['file']}:{l['line']}"
            out.append(f"  {l['cycles']:>12,.0f} {l['cycles'] / total:>6.1%} {l['pipe']:<12} {l['instructions']:>8,}  "
                       f"{where}  {l['source']}")
        return "\n".join(out)

    def to_csv(self, path: str | Path, rows: str = "pipes") -> Path:
        """Write pipe_rows() (rows="pipes") or instruction_rows() (rows="instructions") as CSV."""
        import csv
        data = self.pipe_rows() if rows == "pipes" else self.instruction_rows()
        with atomic_path(path, "CSV") as tmp, tmp.open("w", newline="") as f:
            if data:
                w = csv.DictWriter(f, fieldnames=list(data[0]))
                w.writeheader()
                w.writerows(data)
        return Path(path)

    def summary(self) -> str:
        lines = [f"{self.op} on {self.soc} ({self.mode} mode)",
                 f"  time       {self.cycles:,.0f} cycles = {self.time_us:,.2f} us @ {self.clock_mhz:g} MHz"
                 + (f" (kernels {self.kernel_us:,.2f} us: msprof's Task Durations summed, without the "
                    f"{self.time_us - self.kernel_us:,.2f} us of gaps between launches)"
                    if self.cycles - self.kernel_cycles > 0.5 else "")]
        if self.fast is not None:
            f = self.fast
            shadows = f" ({f['shadowed_blocks']} blocks as shadows of alike ones)" if f.get("shadowed_blocks") else ""
            lines.append(f"  fast mode  {f['simulated_fraction']:.1%} of {self.instructions:,} instructions simulated{shadows}; "
                         + ("exact (nothing fast-forwarded)" if f["exact"] else
                            f"cycles within +/-{f['bound_cycles']:,.0f} ({f['bound_fraction']:.2%}) of the exact engine"))
        lines += [
                 f"  workspace  {self.workspace_bytes:,} B"
                 + "".join(f"\n               {w['bytes']:>12,} B  {w['purpose']}" for w in self.workspace_breakdown),
                 "  launches   " + "; ".join(f"{l['name']} x{l['block_dim']} blocks on {l['core_kind']} "
                                              f"({l['cycles']:,.0f} cycles)" for l in self.launches),
                 "  pipes      busy fraction (mean over cores used / busiest core)"]
        for pipe, p in self.pipes.items():
            lines.append(f"    {pipe:<10} {p['busy_fraction']:6.1%} / {p['max_core_busy_fraction']:6.1%}"
                         f"   on {p['cores']} cores")
        dm = self.device_memory
        lines.append(f"  device mem {dm['bytes']:,} B at {dm['GBps']:,.1f} GB/s = "
                     f"{dm['fraction_of_peak']:.1%} of {dm['peak_GBps']:g} GB/s")
        lines.append(f"  L2         {self.l2['bytes']:,} B at {self.l2['GBps']:,.1f} GB/s, "
                     f"hit rate {self.l2['hit_rate']:.1%}")
        for path, p in self.paths.items():
            lines.append(f"    {path:<8} {p['bytes']:>14,} B  {p['GBps']:>9,.1f} GB/s")
        if self.bound not in self.utilisation:          # an empty call: no work, nothing bounds it
            lines.append(f"  bound by   {self.bound}")
        else:
            lines.append(f"  bound by   {self.bound} ({self.utilisation[self.bound]:.0%} of the call); "
                         f"roofline {self.roofline_cycles:,.0f} cycles = {self.roofline_efficiency:.0%} of achieved")
        if self.measured is not None:
            lines.append(f"  measured   {measured_text(self.measured, self.op)}")
        return "\n".join(lines)


def measured_fit(profile: Profile, op: str) -> dict | None:
    support = profile.operators.get(op)
    if support is None:
        return None
    return {} if support.measured is None else support.measured.model_dump()


def measured_text(m: dict, op: str) -> str:
    """One line on how far `op`'s cycles on this series have been checked against hardware."""
    if not m:
        return (f"no published time of a whole {op} call on this series to check these cycles against "
                f"(docs/CALIBRATION.md: what is checked)")
    lean = ("optimistic: the chip took longer" if m["geomean"] < 1 - m["bound"] / 2 else
            "pessimistic: the chip was faster" if m["geomean"] > 1 + m["bound"] / 2 else "close")
    return (f"{m['calls']} published calls on {m['chip']} ({m['source']}): simulated / measured "
            f"{m['low']:.2f} .. {m['high']:.2f}, geometric mean {m['geomean']:.2f}, {m['within']} within "
            f"{m['bound']:.0%}; {lean} (docs/CALIBRATION.md)")


def launch_fixed_cycles(rec: TaskRecord, profile: Profile) -> float:
    """The cycles of a task that are no block's work: the gaps between its launches, each
    launch's dispatch and completion (profile.runtime), the blocks' hand-out and its cores' start."""
    rt = profile.runtime
    total = 0.0
    for i, l in enumerate(rec.launches):
        if i:
            total += l.start - rec.launches[i - 1].end
        if l.cores_start is not None and l.cores_end is not None:
            total += (l.cores_start - l.start) + (l.end - l.cores_end) + l.dispatch_waits
        cores = profile.cores[l.core_kind].count if l.core_kind in profile.cores else 1
        total += rt.block_start_cycles + rt.block_start_contention_cycles * (min(l.block_dim, cores) - 1)
    return total


def launch_sides(rec: TaskRecord, profile: Profile, launch: int) -> dict[str, dict]:
    """msprof's per-launch totals, per side ("aic": Cube cores, "aiv": vector cores, "": coupled AI
    cores): the blocks, their cycles and each pipe's busy cycles, summed over the blocks."""
    out: dict[str, dict] = {}
    for b in rec.blocks:
        if b.launch != launch:
            continue
        units = profile.cores[b.core_kind].units
        side = "" if "cube" in units and "vector" in units else "aic" if "cube" in units else "aiv"
        s = out.setdefault(side, {"blocks": 0, "cycles": 0.0, "busy": {}})
        s["blocks"] += 1
        s["cycles"] += b.end - b.start
        for p, c in sorted(b.busy.items()):
            s["busy"][p] = s["busy"].get(p, 0.0) + c
    return out


def hot_lines(rec: TaskRecord, top: int = 50) -> list[dict]:
    """Per kernel source line: cycles summed over pipes (the scalar unit's included), the busiest
    pipe, the instructions it issued (pipe instructions; PIPE_S counts the same calls again)."""
    import linecache
    import os
    per: dict[tuple, dict] = {}
    for (_, line, pipe), (count, cycles) in rec.lines.items():
        if line is None:
            continue
        d = per.setdefault(line, {"pipes": {}, "instructions": 0})
        d["pipes"][pipe] = d["pipes"].get(pipe, 0.0) + cycles
        if pipe != "PIPE_S":
            d["instructions"] += count
    rows = []
    for (path, n), d in per.items():
        try:
            rel = os.path.relpath(path)
        except ValueError:          # another drive (Windows)
            rel = path
        rows.append({"file": rel if not rel.startswith("..") else path, "line": n,
                     "cycles": sum(d["pipes"].values()), "pipe": max(d["pipes"], key=d["pipes"].get),
                     "instructions": d["instructions"], "pipes": dict(sorted(d["pipes"].items())),
                     "source": linecache.getline(path, n).strip()})
    rows.sort(key=lambda r: (-r["cycles"], r["file"], r["line"]))
    return rows[:top]


class Trace:
    """The call's timeline in the Chrome trace event format (Perfetto, chrome://tracing):
    pid = core, tid = pipe, "X" events per instruction, "C" counters of device-memory bandwidth."""

    def __init__(self, rec: TaskRecord, profile: Profile):
        self.rec, self.profile = rec, profile
        self._rows: list[tuple] | None = None

    def rows(self) -> list[tuple]:
        """(core index, pipe, name, start, cycles, device-memory bytes) per instruction, in
        (core, pipe, start) order."""
        if self._rows is None:
            self._rows = self.rec.sorted_trace()
        return self._rows

    LAYOUTS = ("core", "pipe")

    def events(self, layout: str = "core") -> list[dict]:
        """layout "core": a process per core, a thread per pipe (Perfetto's natural view);
        "pipe": a process per pipe, a thread per core, and each flag a core's pipes waited on as a
        flow arrow from its SetFlag to its WaitFlag (the layout of `msprof op simulator`'s trace)."""
        if layout == "pipe":
            return self._pipe_events()
        rec, profile = self.rec, self.profile
        mhz = profile.clock_mhz
        t0 = rec.start
        names = {}
        for kname, kind in profile.cores.items():
            for i in range(kind.count):
                names[len(names)] = f"{kname}{i}"
        ev: list[dict] = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
                           "args": {"name": f"{profile.soc_version} launches"}}]
        used = sorted({t[0] for t in rec.trace})
        for idx in used:
            ev.append({"name": "process_name", "ph": "M", "pid": idx + 1, "tid": 0,
                       "args": {"name": f"core {names.get(idx, idx)}"}})
            ev.append({"name": "process_sort_index", "ph": "M", "pid": idx + 1, "tid": 0,
                       "args": {"sort_index": idx + 1}})
            for tid, pipe in enumerate(PIPES):
                ev.append({"name": "thread_name", "ph": "M", "pid": idx + 1, "tid": tid,
                           "args": {"name": pipe}})
        for l in rec.launches:
            ev.append({"name": l.name, "ph": "X", "pid": 0, "tid": 0, "ts": (l.start - t0) / mhz,
                       "dur": (l.end - l.start) / mhz, "args": {"blockDim": l.block_dim}})
        tid_of = {p: i for i, p in enumerate(PIPES)}
        buckets: dict[int, float] = {}
        span = max(rec.end - t0, 1.0)
        width = max(span / 200.0, mhz)          # at least 1 us per counter sample
        rows = self.rows()
        for i, (core, pipe, name, start, dur, gm) in enumerate(rows):
            e = {"name": name, "ph": "X", "pid": core + 1, "tid": tid_of[pipe],
                 "ts": (start - t0) / mhz, "dur": dur / mhz}
            nxt = rows[i + 1] if i + 1 < len(rows) else None
            if nxt is not None and nxt[0] == core and nxt[1] == pipe and nxt[3] < start + dur:
                # transfers in flight overlap on their pipe; a track's slices must not, so this
                # one is drawn up to the next one's start and carries its whole duration
                e["dur"] = (nxt[3] - start) / mhz
                e["args"] = {"in flight until (us)": (start + dur - t0) / mhz}
            ev.append(e)
            if gm:
                buckets[int((start - t0) // width)] = buckets.get(int((start - t0) // width), 0.0) + gm
        for b in sorted(buckets):
            ev.append({"name": "device memory GB/s", "ph": "C", "pid": 0, "ts": b * width / mhz,
                       "args": {"GB/s": buckets[b] / (width / mhz) / 1e3}})
        return ev

    def _pipe_events(self) -> list[dict]:
        rec, mhz, t0 = self.rec, self.profile.clock_mhz, self.rec.start
        names = [f"{n}{i}" for n, k in self.profile.cores.items() for i in range(k.count)]
        pid = {p: i + 1 for i, p in enumerate(PIPES)}
        ev: list[dict] = []
        used = sorted({t[0] for t in rec.trace})
        for p in PIPES:
            ev.append({"name": "process_name", "ph": "M", "pid": pid[p], "tid": 0, "args": {"name": p}})
            ev.append({"name": "process_sort_index", "ph": "M", "pid": pid[p], "tid": 0,
                       "args": {"sort_index": pid[p]}})
            for c in used:
                ev.append({"name": "thread_name", "ph": "M", "pid": pid[p], "tid": c,
                           "args": {"name": f"core {names[c] if c < len(names) else c}"}})
        rows = self.rows()
        for i, (core, pipe, name, start, dur, _) in enumerate(rows):
            nxt = rows[i + 1] if i + 1 < len(rows) else None
            shown = (nxt[3] - start) if nxt is not None and nxt[:2] == (core, pipe) and nxt[3] < start + dur else dur
            ev.append({"name": name, "ph": "X", "pid": pid[pipe], "tid": core, "ts": (start - t0) / mhz,
                       "dur": shown / mhz})
        for k, (core, src, dst, t_set, t_wait) in enumerate(rec.flows):
            common = {"name": f"flag {src}->{dst}", "cat": "flag", "id": k + 1, "tid": core}
            ev.append(dict(common, ph="s", pid=pid[src], ts=(t_set - t0) / mhz))
            ev.append(dict(common, ph="f", bp="e", pid=pid[dst], ts=(t_wait - t0) / mhz))
        return ev

    def to_chrome(self, layout: str = "core") -> dict:
        return {"traceEvents": self.events(layout), "displayTimeUnit": "ns",
                "otherData": {"soc": self.profile.soc_version, "clock_mhz": self.profile.clock_mhz}}

    def save(self, path: str | Path, layout: str = "core") -> Path:
        """Write the Chrome trace JSON (atomically: a failed write leaves no half file)."""
        return write_text(path, json.dumps(self.to_chrome(layout)), "trace")
