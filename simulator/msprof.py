"""A call's figures in the files msprof and msKPP write, so that scripts built on them read ours.
docs/OUTPUTS.md lists every file, whose headers these are (msOpProf's metric_csv_header.h for
`msprof op`, msprof's op_summary assembler for the system profiler, msKPP's tests), and what we
write in each column:

    DIR/OPPROF_<stamp>_<seq>/            one per kernel launch, as `msprof op` writes per kernel
        OpBasicInfo.csv  PipeUtilization.csv  Memory.csv  L2Cache.csv  ArithmeticUtilization.csv
        simulator/core<N>.<veccore|cubecore><M>/<same>_instr_exe.csv, <same>_code_exe.csv
        simulator/trace.json             the per-pipe timeline (`msprof op simulator`'s layout)
    DIR/op_summary_<stamp>_<seq>.csv     one row per launch, as the system profiler writes it
    DIR/Pipe_statistic.csv, Instruction_statistic.csv   msKPP's two summaries

A column we do not model is N/A. Per-block rows come from the engine's BlockRecords; the
per-instruction, per-line and timeline files need a traced run.
"""
from __future__ import annotations

import csv
import io
import json
import math
import time
from pathlib import Path

from .outputs import write_text
from .records import BlockRecord, TaskRecord

NA = "N/A"
STEM = {"PIPE_M": "cube", "PIPE_V": "vec", "PIPE_S": "scalar", "PIPE_MTE1": "mte1", "PIPE_MTE2": "mte2",
        "PIPE_MTE3": "mte3", "PIPE_FIX": "fixpipe"}
# data path -> (the pipe that moves it, Memory.csv's *_datas(KB) column)
PATHS = {"GM_L1": ("PIPE_MTE2", "GM_to_L1_datas(KB)"), "GM_L1_ND2NZ": ("PIPE_MTE2", "GM_to_L1_datas(KB)"),
         "GM_UB": ("PIPE_MTE2", "GM_to_UB_datas(KB)"), "UB_GM": ("PIPE_MTE3", "UB_to_GM_datas(KB)"),
         "L0C_GM": ("PIPE_FIX", "L0C_to_GM_datas(KB)"), "L1_L0A": ("PIPE_MTE1", None), "L1_L0B": ("PIPE_MTE1", None)}


def _h(text: str) -> list[str]:
    return text.split(",")


# ---- msprof op, Atlas A2 (block rows: sub_block_id cube0 / vector0 / vector1) ----
A2 = {
    "OpBasicInfo": _h("Op Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,Device Id,Pid,Current Freq,Rated Freq"),
    "PipeUtilization": _h(
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_time(us),aic_cube_ratio,aic_mte1_time(us),"
        "aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_mte3_time(us),aic_mte3_ratio,aic_mte3_active_bw(GB/s),"
        "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_fixpipe_active_bw(GB/s),aic_icache_miss_rate,aic_scalar_time(us),"
        "aic_scalar_ratio,aic_scalar_single_time(us),aic_scalar_dual_time(us),aic_scalar_mte1_stall_time(us),"
        "aic_scalar_mte2_stall_time(us),aic_scalar_mte3_stall_time(us),aic_scalar_cube_stall_time(us),"
        "aic_scalar_wait_ib_time(us),aic_scalar_wait_time(us),aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
        "aiv_vec_ratio,aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte2_active_bw(GB/s),aiv_mte3_time(us),aiv_mte3_ratio,"
        "aiv_mte3_active_bw(GB/s),aiv_icache_miss_rate,aiv_scalar_time(us),aiv_scalar_ratio,aiv_scalar_single_time(us),"
        "aiv_scalar_dual_time(us),aiv_scalar_mte2_stall_time(us),aiv_scalar_mte3_stall_time(us),"
        "aiv_scalar_stall_by_ub_time(us),aiv_scalar_vector_stall_time(us),aiv_scalar_wait_ib_time(us),"
        "aiv_scalar_wait_time(us)"),
    "Memory": _h(
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_l1_read_bw(GB/s),aic_l1_write_bw(GB/s),"
        "aic_main_mem_read_bw(GB/s),aic_main_mem_write_bw(GB/s),aic_mte1_instructions,aic_mte1_ratio,"
        "aic_mte2_instructions,aic_mte2_ratio,aic_mte3_instructions,aic_mte3_ratio,aiv_time(us),aiv_total_cycles,"
        "aiv_ub_to_gm_bw(GB/s),aiv_gm_to_ub_bw(GB/s),aiv_main_mem_read_bw(GB/s),aiv_main_mem_write_bw(GB/s),"
        "aiv_mte2_instructions,aiv_mte2_ratio,aiv_mte3_instructions,aiv_mte3_ratio,read_main_memory_datas(KB),"
        "write_main_memory_datas(KB),GM_to_L1_datas(KB),GM_to_L1_bw_usage_rate(%),L1_to_GM_datas(KB)(estimate),"
        "L1_to_GM_bw_usage_rate(%)(estimate),L0C_to_L1_datas(KB),L0C_to_L1_bw_usage_rate(%),L0C_to_GM_datas(KB),"
        "L0C_to_GM_bw_usage_rate(%),GM_to_UB_datas(KB),GM_to_UB_bw_usage_rate(%),UB_to_GM_datas(KB),"
        "UB_to_GM_bw_usage_rate(%)"),
    "L2Cache": _h(
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_write_cache_hit,aic_write_cache_miss_allocate,"
        "aic_r0_read_cache_hit,aic_r0_read_cache_miss_allocate,aic_r1_read_cache_hit,aic_r1_read_cache_miss_allocate,"
        "aic_write_hit_rate(%),aic_read_hit_rate(%),aic_total_hit_rate(%),aiv_time(us),aiv_total_cycles,"
        "aiv_write_cache_hit,aiv_write_cache_miss_allocate,aiv_r0_read_cache_hit,aiv_r0_read_cache_miss_allocate,"
        "aiv_r1_read_cache_hit,aiv_r1_read_cache_miss_allocate,aiv_write_hit_rate(%),aiv_read_hit_rate(%),"
        "aiv_total_hit_rate(%)"),
    "ArithmeticUtilization": _h(
        "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_ratio,aic_cube_fp16_ratio,aic_cube_int8_ratio,"
        "aic_cube_fops,aic_cube_total_instr_number,aic_cube_fp_instr_number,aic_cube_int_instr_number,aiv_time(us),"
        "aiv_total_cycles,aiv_vec_ratio,aiv_vec_fp32_ratio,aiv_vec_fp16_ratio,aiv_vec_int32_ratio,aiv_vec_int16_ratio,"
        "aiv_vec_misc_ratio,aiv_vec_fops"),
}
# ---- msprof op, coupled AI cores (the 310P layout: no block columns, one row per block) ----
COUPLED = {
    "OpBasicInfo": _h("Op Name,Op Type,Task Duration(us),Block Dim,Device Id,Pid,Current Freq,Rated Freq"),
    "PipeUtilization": _h(
        "aic_time(us),aic_total_cycles,aic_cube_time(us),aic_cube_ratio,aic_scalar_time(us),aic_scalar_ratio,"
        "aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_mte3_time(us),aic_mte3_ratio,"
        "aic_icache_miss_rate,aic_vec_time(us),aic_vec_ratio"),
    "Memory": _h(
        "aic_time(us),aic_total_cycles,aic_l1_read_bw(GB/s),aic_l1_write_bw(GB/s),aic_ub_to_gm_bw(GB/s),"
        "aic_gm_to_ub_bw(GB/s),aic_main_mem_read_bw(GB/s),aic_main_mem_write_bw(GB/s),aic_mte1_instructions,"
        "aic_mte1_ratio,aic_mte2_instructions,aic_mte2_ratio,aic_mte3_instructions,aic_mte3_ratio"),
    "L2Cache": _h("aic_l2_cache_hit_rate(%)"),          # msOpProf writes the hit rate alone on these chips
    "ArithmeticUtilization": _h(
        "aic_time(us),aic_total_cycles,aic_cube_ratio,aic_cube_fp16_ratio,aic_cube_int8_ratio,aic_cube_fops,"
        "aic_cube_total_instr_number,aic_vec_ratio,aic_vec_fp32_ratio,aic_vec_fp16_ratio,aic_vec_int32_ratio,"
        "aic_vec_int16_ratio,aic_vec_misc_ratio,aic_vec_fops"),
}
# ---- the system profiler's op_summary (newest naming: Block Num) ----
SUMMARY_HEAD = _h("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
                  "Task Duration(us),Task Wait Time(us),Block Num,Mix Block Num,HF32 Eligible,Input Shapes,"
                  "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID")
SUMMARY_A2 = SUMMARY_HEAD + _h(
    "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,"
    "aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,"
    "aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),"
    "aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,"
    "cube_utilization(%)")
# msprof masks the STARS-only columns (Mix Block Num, Context ID) on Ascend910A / Ascend310P
SUMMARY_COUPLED = [c for c in SUMMARY_HEAD if c not in ("Mix Block Num", "Context ID")] + _h(
    "aicore_time(us),total_cycles,vec_time(us),vec_ratio,mac_time(us),mac_ratio,scalar_time(us),scalar_ratio,"
    "mte1_time(us),mte1_ratio,mte2_time(us),mte2_ratio,mte3_time(us),mte3_ratio,icache_miss_rate,memory_bound")
SUMMARY_STEMS = {"PIPE_M": "mac", "PIPE_V": "vec", "PIPE_S": "scalar", "PIPE_MTE1": "mte1", "PIPE_MTE2": "mte2",
                 "PIPE_MTE3": "mte3", "PIPE_FIX": "fixpipe"}


def _fmt(v) -> str:
    if v is None:
        return NA
    if isinstance(v, float):
        return f"{v:.6g}" if math.isfinite(v) else NA
    return str(v)


def _table(header: list[str], rows: list[dict], quote: bool = False) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL if quote else csv.QUOTE_MINIMAL)
    w.writerow(header)
    for r in rows:
        w.writerow([_fmt(r.get(c)) for c in header])
    return buf.getvalue()


def side_of(units) -> str:
    return "aic" if "cube" in units else "aiv"


class MsprofWriter:
    """One call's files, from its TaskRecord and the profile it ran on."""

    def __init__(self, rec: TaskRecord, profile, op: str, stamp: str | None = None):
        self.rec, self.profile, self.op = rec, profile, op
        self.mhz = profile.clock_mhz
        self.stamp = stamp or time.strftime("%Y%m%d%H%M%S")
        self.side = {name: side_of(kind.units) for name, kind in profile.cores.items()}
        self.coupled = any("cube" in k.units and "vector" in k.units for k in profile.cores.values())
        self.heads = COUPLED if self.coupled else A2
        self.names = [f"{n}{i}" for n, k in profile.cores.items() for i in range(k.count)]
        self._rows: list[tuple] | None = None

    def rows(self) -> list[tuple]:
        """The trace in (core, pipe, start) order, sorted once for every file that reads it."""
        if self._rows is None:
            self._rows = self.rec.sorted_trace()
        return self._rows

    def _us(self, cycles: float) -> float:
        return cycles / self.mhz

    def blocks(self, launch: int) -> list[BlockRecord]:
        return sorted((b for b in self.rec.blocks if b.launch == launch), key=lambda b: (b.block, b.sub_block, b.core))

    def _sub(self, b: BlockRecord) -> str:
        return f"cube{b.sub_block}" if self.side[b.core_kind] == "aic" else f"vector{b.sub_block}"

    def _base(self, b: BlockRecord) -> tuple[dict, str, float]:
        side = self.side[b.core_kind]
        cyc = b.end - b.start
        row = {"block_id": b.block, "sub_block_id": self._sub(b), f"{side}_time(us)": self._us(cyc),
               f"{side}_total_cycles": round(cyc)}
        return row, side, cyc

    # ---- msprof op ----
    def op_basic_info(self, launch: int) -> str:
        l = self.rec.launches[launch]
        blocks = self.blocks(launch)
        mix = sum(1 for b in blocks if self.side[b.core_kind] == "aiv") if {self.side[b.core_kind] for b in blocks} \
            == {"aic", "aiv"} else NA
        row = {"Op Name": l.name, "Op Type": self.op, "Task Duration(us)": self._us(l.end - l.start),
               "Block Dim": l.block_dim, "Mix Block Dim": mix, "Device Id": 0, "Pid": 0,
               "Current Freq": round(self.mhz), "Rated Freq": round(self.mhz)}
        return _table(self.heads["OpBasicInfo"], [row])

    def per_block(self, launch: int, name: str) -> str:
        """One of msprof op's per-block files (PipeUtilization, Memory, L2Cache,
        ArithmeticUtilization): a row per block, its time columns, then the file's own."""
        fill = {"PipeUtilization": self._pipe_cols, "Memory": self._memory_cols, "L2Cache": self._l2_cols,
                "ArithmeticUtilization": self._arith_cols}[name]
        rows = []
        for b in self.blocks(launch):
            row, side, cyc = self._base(b)
            fill(b, row, side, cyc)
            rows.append(row)
        return _table(self.heads[name], rows)

    def _pipe_cols(self, b: BlockRecord, row: dict, side: str, cyc: float) -> None:
        for p, busy in b.busy.items():
            row[f"{side}_{STEM[p]}_time(us)"] = self._us(busy)
            row[f"{side}_{STEM[p]}_ratio"] = busy / cyc if cyc else 0.0
        for path, n in b.path_bytes.items():      # active bandwidth: bytes over the pipe's busy time
            pipe = PATHS.get(path, (None,))[0]
            if pipe in ("PIPE_MTE2", "PIPE_MTE3", "PIPE_FIX") and b.busy.get(pipe):
                key = f"{side}_{STEM[pipe]}_active_bw(GB/s)"
                row[key] = row.get(key, 0.0) + n / (b.busy[pipe] / (self.mhz * 1e6)) / 1e9

    def _memory_cols(self, b: BlockRecord, row: dict, side: str, cyc: float) -> None:
        secs = cyc / (self.mhz * 1e6)
        for p in ("PIPE_MTE1", "PIPE_MTE2", "PIPE_MTE3"):
            if p in b.busy:
                row[f"{side}_{STEM[p]}_instructions"] = b.instructions.get(p, 0)
                row[f"{side}_{STEM[p]}_ratio"] = b.busy[p] / cyc if cyc else 0.0
        for path, n in b.path_bytes.items():
            col = PATHS.get(path, (None, None))[1]
            if col:
                row[col] = row.get(col, 0.0) + n / 1024
            if path == "UB_GM" and secs:
                row[f"{side}_ub_to_gm_bw(GB/s)"] = n / secs / 1e9
            if path == "GM_UB" and secs:
                row[f"{side}_gm_to_ub_bw(GB/s)"] = n / secs / 1e9

    def _l2_cols(self, b: BlockRecord, row: dict, side: str, cyc: float) -> None:
        rh, rm, wh, wm = b.l2
        if self.coupled:
            row["aic_l2_cache_hit_rate(%)"] = _pct(rh + wh, rh + rm + wh + wm)
        else:
            row.update({f"{side}_write_cache_hit": wh, f"{side}_write_cache_miss_allocate": wm,
                        f"{side}_r0_read_cache_hit": rh, f"{side}_r0_read_cache_miss_allocate": rm,
                        f"{side}_write_hit_rate(%)": _pct(wh, wh + wm), f"{side}_read_hit_rate(%)": _pct(rh, rh + rm),
                        f"{side}_total_hit_rate(%)": _pct(rh + wh, rh + rm + wh + wm)})

    def _arith_cols(self, b: BlockRecord, row: dict, side: str, cyc: float) -> None:
        if "PIPE_M" in b.busy:
            row[f"{side}_cube_ratio"] = b.busy["PIPE_M"] / cyc if cyc else 0.0
            row[f"{side}_cube_total_instr_number"] = b.instructions.get("PIPE_M", 0)
        if "PIPE_V" in b.busy:
            row[f"{side}_vec_ratio"] = b.busy["PIPE_V"] / cyc if cyc else 0.0

    # ---- op_summary ----
    def launch_sides(self, launch: int) -> dict[str, dict]:
        from .report import launch_sides
        return launch_sides(self.rec, self.profile, launch)

    def op_summary(self) -> str:
        """One row per launch. aicore_time is the launch's time on the cores; a pipe's time is its
        share of the blocks' cycles (msprof's ratio) times that."""
        rows = []
        prev = self.rec.start
        ncores = {side: sum(k.count for n, k in self.profile.cores.items() if self.side[n] == side)
                  for side in ("aic", "aiv")}
        for i, l in enumerate(self.rec.launches):
            sides = self.launch_sides(i)
            on_cores = l.core_cycles()
            kind = ("AI_CORE" if self.coupled or "aiv" not in sides else
                    "MIX_AIC" if "aic" in sides else "AI_VECTOR_CORE")
            row = {"Device_id": 0, "Model ID": NA, "Task ID": i + 1, "Stream ID": 0, "Op Name": l.name,
                   "OP Type": self.op, "OP State": NA, "Task Type": kind,
                   "Task Start Time(us)": self._us(l.start - self.rec.start), "Task Duration(us)": self._us(l.end - l.start),
                   "Task Wait Time(us)": self._us(max(l.start - prev, 0.0)), "Block Num": l.block_dim,
                   "Mix Block Num": NA, "HF32 Eligible": NA, "Context ID": NA}
            prev = l.end
            for side, s in sides.items():
                pre = "" if self.coupled else f"{side}_"
                total = "aicore_time(us)" if self.coupled or side == "aic" else "aiv_time(us)"
                row[total] = self._us(on_cores)
                row[f"{pre}total_cycles"] = round(s["cycles"])
                for p, busy in s["busy"].items():
                    ratio = busy / s["cycles"] if s["cycles"] else 0.0
                    row[f"{pre}{SUMMARY_STEMS[p]}_time(us)"] = ratio * self._us(on_cores)
                    row[f"{pre}{SUMMARY_STEMS[p]}_ratio"] = ratio
                if self.coupled:
                    compute = max(row.get("mac_ratio", 0.0), row.get("vec_ratio", 0.0))
                    row["memory_bound"] = row.get("mte2_ratio", 0.0) / compute if compute else None
                elif side == "aic" and l.end > l.start:     # (A2 only: coupled chips have no such column)
                    row["cube_utilization(%)"] = 100.0 * s["cycles"] / ((l.end - l.start) * max(ncores["aic"], 1))
            rows.append(row)
        return _table(SUMMARY_COUPLED if self.coupled else SUMMARY_A2, rows)

    # ---- msprof op simulator: per core ----
    def core_dir(self, index: int) -> str:
        """core<N>.veccore<M> (AIV M of AI core N, two per AI core on A2) or core<N>.cubecore0."""
        name = self.names[index]
        kname = name.rstrip("0123456789")
        i = int(name[len(kname):])
        kind = self.profile.cores[kname]
        if "cube" in kind.units:
            return f"core{i}.cubecore0"
        cubes = sum(k.count for k in self.profile.cores.values() if "cube" in k.units) or kind.count
        per = max(kind.count // cubes, 1)
        return f"core{i // per}.veccore{i % per}"

    def instr_exe(self) -> dict[int, str]:
        per: dict[int, dict] = {}
        for core, pipe, name, _, dur, _ in self.rows():
            s = per.setdefault(core, {}).setdefault((name, pipe), [0, 0.0])
            s[0] += 1
            s[1] += dur
        head = _h("instr,addr,pipe,call_count,cycles,running_time(us),detail")
        return {core: _table(head, [{"instr": n, "addr": NA, "pipe": p, "call_count": k, "cycles": round(c),
                                     "running_time(us)": self._us(c), "detail": NA}
                                    for (n, p), (k, c) in sorted(st.items(), key=lambda kv: (-kv[1][1], kv[0]))])
                for core, st in per.items()}

    def code_exe(self) -> dict[int, str]:
        per: dict[int, dict] = {}
        for (core, line, pipe), (k, c) in self.rec.lines.items():
            if line is None:
                continue
            s = per.setdefault(core, {}).setdefault(line, [0, 0.0])
            if pipe != "PIPE_S":
                s[0] += k
            s[1] += c
        head = _h("code,call_count,cycles,running_time(us)")
        return {core: _table(head, [{"code": f"{path}:{n}", "call_count": k, "cycles": round(c),
                                     "running_time(us)": self._us(c)}
                                    for (path, n), (k, c) in sorted(st.items(), key=lambda kv: (-kv[1][1], kv[0]))])
                for core, st in per.items()}

    # ---- msKPP ----
    def pipe_statistic(self) -> str:
        busy: dict[str, float] = {}
        ops: dict[str, int] = {}
        for b in self.rec.blocks:
            for p, c in b.busy.items():
                busy[p] = busy.get(p, 0.0) + c
                ops[p] = ops.get(p, 0) + b.instructions.get(p, 0)
        size: dict[str, int] = {}
        for path, n in self.rec.path_bytes.items():
            p = PATHS.get(path, (None,))[0]
            if p:
                size[p] = size.get(p, 0) + n
        # msKPP models one core: a pipe's duration is its mean over the call's blocks (as msprof's
        # per-core times are); Size(B) and Ops (instructions) count the whole call
        n = max(len(self.rec.blocks), 1)
        total = self.rec.end - self.rec.start
        rows = [{"Pipe": "Total", "Duration(us)": self._us(total), "Cycle": round(total),
                 "Size(B)": sum(size.values()), "Ops": sum(ops.values())}]
        for p in sorted(busy):
            if busy[p]:
                rows.append({"Pipe": p.replace("_", "-"), "Duration(us)": self._us(busy[p] / n),
                             "Cycle": round(busy[p] / n), "Size(B)": size.get(p, "-"), "Ops": ops.get(p, 0)})
        return _table(_h("Pipe,Duration(us),Cycle,Size(B),Ops"), rows, quote=True)

    def instruction_statistic(self) -> str:
        stats: dict[str, list] = {}
        for _, _, name, _, dur, _ in self.rows():
            s = stats.setdefault(name, [0, 0.0])
            s[0] += 1
            s[1] += dur
        rows = [{"Instruction": n, "Duration(us)": self._us(c), "Cycle": round(c), "Size(B)": "-", "Ops": k}
                for n, (k, c) in sorted(stats.items(), key=lambda kv: (-kv[1][1], kv[0]))]
        return _table(_h("Instruction,Duration(us),Cycle,Size(B),Ops"), rows, quote=True)

    # ---- writing ----
    def write(self, out: Path, seq: int) -> list[Path]:
        from .report import Trace
        written = []
        for i in range(len(self.rec.launches)):
            d = out / f"OPPROF_{self.stamp}_{seq + i:03d}"
            written.append(write_text(d / "OpBasicInfo.csv", self.op_basic_info(i), "OpBasicInfo.csv"))
            for name in ("PipeUtilization", "Memory", "L2Cache", "ArithmeticUtilization"):
                written.append(write_text(d / f"{name}.csv", self.per_block(i, name), f"{name}.csv"))
        if self.rec.trace:
            sim = out / f"OPPROF_{self.stamp}_{seq:03d}" / "simulator"
            code = self.code_exe()
            for core, text in self.instr_exe().items():
                cd = self.core_dir(core)
                written.append(write_text(sim / cd / f"{cd}_instr_exe.csv", text, "instr_exe.csv"))
                if core in code:
                    written.append(write_text(sim / cd / f"{cd}_code_exe.csv", code[core], "code_exe.csv"))
            written.append(write_text(sim / "trace.json", json.dumps(Trace(self.rec, self.profile).to_chrome("pipe")),
                                      "trace"))
            written.append(write_text(out / "Instruction_statistic.csv", self.instruction_statistic(),
                                      "Instruction_statistic.csv"))
        written.append(write_text(out / f"op_summary_{self.stamp}_{seq:03d}.csv", self.op_summary(), "op_summary"))
        written.append(write_text(out / "Pipe_statistic.csv", self.pipe_statistic(), "Pipe_statistic.csv"))
        return written


def _pct(a: int, b: int) -> float | None:
    return 100.0 * a / b if b else None


def write_msprof(rec: TaskRecord, profile, op: str, out: str | Path, stamp: str | None = None) -> list[Path]:
    """Write a finished task's msprof and msKPP files under `out` (docs/OUTPUTS.md). Launches are
    numbered on from the OPPROF directories already there, so several calls can share `out`."""
    out = Path(out)
    seq = len(list(out.glob("OPPROF_*"))) if out.is_dir() else 0
    return MsprofWriter(rec, profile, op, stamp).write(out, seq)
