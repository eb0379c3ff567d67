"""The machine: a SimPy discrete-event model of one device.

A kernel launch is a body of Python (written in the micro-program language of simulator.kernel)
and a block count. When a core takes a block, the body runs once in that block's context and
records the block's micro-program: `Instr`s (a long one a chunk at a time, ProgramRecorder). The
core's scalar unit issues them in order into per-pipe queues of bounded depth; each pipe executes
its queue in order and the pipes run in parallel, ordered only by set/wait flags and barriers. GM
transfers also reserve bytes on the chip-wide L2 and device-memory channels.

The engine knows instructions, pipes, buffers and paths; it never knows an operator.
"""
from __future__ import annotations

import gc
from typing import Any, Generator, Iterator

import numpy as np
import simpy

from .block_run import RELEASE, BlockRun, CrossCoreWake
from .core_state import CoreState, Group
from .gm_path import GmPath
from .l2_cache import L2Cache
from .memory import DeviceMemory, MemoryChannel
from .profile import PIPES, Profile
from .fast import FastSchedule, ShadowBlock
from .fast.mode import EXACT, ExactLaunch, FastMode, LaunchFastForward
from .program import BARRIER, COMPUTE, END, GM_XFER, MARK, SET, WAIT, XSET, XWAIT, Instr, KernelLaunch
from .recorder import (BlockContext, CountingContext, DeviceView, ProgramRecorder, count_instructions,
                       record_whole)
from .records import BlockRecord, LaunchRecord, TaskRecord
from .sim_clock import succeed_at, turn


def scalar_costs(profile: Profile) -> dict[str, tuple[float, ...]]:
    """pipe -> the scalar unit's cycles for the API call that emits an instruction, by kind."""
    per_call = profile.scalar.cycles_per_call
    costs = {}
    for pipe in PIPES:
        data = per_call[{"PIPE_V": "vector", "PIPE_M": "cube"}.get(pipe, "copy")]
        costs[pipe] = tuple(0.0 if kind in (END, MARK) else per_call["flag"] if kind >= SET else data
                            for kind in (COMPUTE, GM_XFER, SET, WAIT, BARRIER, END, XSET, XWAIT, MARK))
    return costs


def block_figures(run: BlockRun, pipes) -> tuple[dict, dict, dict]:
    """A finished block's busy cycles (PIPE_S: its scalar unit's too), instructions and bytes per
    path, per pipe, as its BlockRecord keeps them."""
    busy, count, nbytes = {"PIPE_S": run.scalar_busy}, {}, {}
    for p in pipes:
        figures = run.figures[p]
        busy[p] = busy.get(p, 0.0) + figures.busy
        count[p] = figures.executed
        for path, n in figures.bytes.items():
            nbytes[path] = nbytes.get(path, 0) + n
    return busy, count, nbytes


class Device:
    """One simulated device: the SimPy environment, device memory, the memory channel and the
    cores. Streams enqueue task processes; `run_until` advances simulated time."""

    def __init__(self, profile: Profile, functional: bool = True, trace: bool = True,
                 fast: FastSchedule | None = None):
        self.profile = profile
        self.functional = functional and fast is None
        functional = self.functional
        self.fast = fast         # fast mode: declared loops fast-forwarded (simulator/fast/)
        self.fast_mode = FastMode(fast) if fast is not None else EXACT   # its hooks (doing nothing when exact)
        self.tracing = trace
        self.env = simpy.Environment()
        self.memory = DeviceMemory(profile.device_memory.bytes, functional)
        self.l2 = L2Cache(profile.l2.bytes, profile.l2.line_bytes, lambda a: self.memory.find(a),
                          writes_through_when_full=profile.l2.writes_through_when_full)
        self.l2_channel = MemoryChannel(profile.l2_bytes_per_cycle)
        self.hbm = MemoryChannel(profile.device_bytes_per_cycle)
        self.gm_path = GmPath(self.l2, self.l2_channel, self.hbm, profile)
        self.cores: dict[str, list[CoreState]] = {}
        self.free_cores: dict[str, simpy.Store] = {}
        index = 0
        for kname, kind in profile.cores.items():
            cores = []
            for i in range(kind.count):
                core = CoreState(f"{kname}{i}", index, kname, kind, functional)
                if fast is not None:
                    core.without_sanitizer()
                cores.append(core)
                index += 1
            self.cores[kname] = cores
            store = simpy.Store(self.env)
            store.items.extend(cores)
            self.free_cores[kname] = store
        rt = profile.runtime
        self.launch_cycles = rt.launch_overhead_us * profile.clock_mhz
        self.dispatch_cycles = rt.block_dispatch_cycles
        self.staggered = rt.block_dispatch == "staggered" and rt.block_dispatch_cycles > 0
        self.start_cycles = (rt.block_start_cycles, rt.block_start_contention_cycles)
        self.depth = profile.sync.pipe_queue_depth
        self.issue_cycles = profile.sync.scalar_issue_cycles
        self.scalar_cost = scalar_costs(profile)
        self.memo: dict = {}       # the kernel language's memo of what depends on the profile alone (costs, flag fields)
        self.view = DeviceView(profile, self.memory, functional, trace, self.scalar_cost, self.memo, fast,
                               self.l2)
        self.in_flight = {name: path.in_flight for name, path in profile.paths.items()}
        windows = {name: path.in_flight_bytes for name, path in profile.paths.items()}
        self.in_flight_bytes = windows if any(w is not None for w in windows.values()) else None
        self.active: set[CoreState] = set()
        self._launches = 0
        self.dispatching: dict[int, str] = {}
        # cross-core flags (A2), keyed (launch, core name or, for mode 0, core kind, flag id):
        self.cross_flag_counts: dict[tuple, int] = {}      # key -> sets not yet consumed
        self.cross_flag_waiters: dict[tuple, list] = {}    # key -> [(waiter, sets it needs, consumes?)]
        self.cross_barrier_waits: dict[tuple, int] = {}    # (launch, core, flag) -> its mode-0 waits so far
        self.cross_flag_limit = profile.sync.cross_core_counter_limit    # sets a counter holds
        self.recorders: set[ProgramRecorder] = set()      # blocks still recording their programs
        self.issued = 0          # instructions handed to the scalar units so far (progress bars read it)

    def run(self, until: simpy.Event | None = None) -> None:
        """Advance simulated time (until `until` has happened, or until nothing is left to do).
        The engine makes several short-lived objects per instruction, all freed by reference
        counting (programs hold no reference cycles; a block makes a few). A gen-0 collection
        walks every young object still alive, so at the default threshold the collector would
        spend a large share of a run finding nothing; the threshold is raised for the run, and
        the collector still runs, as a safety net for cycles a kernel might make.
        The machine's arithmetic raises no floating-point warnings: a Vector cast that overflows
        gives inf, as the hardware's does, and the padding lanes of a tile may hold anything
        (numpy's error state is per thread; the effects run on this one)."""
        old = gc.get_threshold()
        gc.set_threshold(max(old[0], 1_000_000), *old[1:])
        try:
            with np.errstate(all="ignore"):
                self.env.run(until=until)
        finally:
            gc.set_threshold(*old)

    # ---- estimates ---------------------------------------------------------------------------
    def count_launch(self, launch: KernelLaunch, samples: int = 2) -> int:
        """Instructions a launch will issue, estimated before it runs: its first and last blocks'
        bodies are recorded without keeping their programs (on spare cores, no simulated time)
        and the mean is scaled to every block. Exact when the blocks have equal work."""
        kind_name, kind = self.profile.core_kind_for(launch.kind)
        kinds = [(kind_name, kind, 0)]
        if launch.kind == "mix" and "vector" not in kind.units:
            vname, vkind = self.profile.core_kind_for("vector")
            kinds += [(vname, vkind, sub) for sub in range(max(vkind.count // max(kind.count, 1), 1))]
        blocks = sorted({0, launch.block_dim - 1})[:samples] if launch.block_dim > 0 else []
        total = 0
        for b in blocks:
            cores = [(CoreState(f"{n}(estimate)", -1, n, k, False), sub) for n, k, sub in kinds]
            group = Group(0, b, [c for c, _ in cores], {kind_name: launch.block_dim})
            for core, sub in cores:
                core.reset_for_block(b, launch.name)
                ctx = CountingContext(self.view, core, b, launch.block_dim, group, sub)
                total += count_instructions(ctx, launch.body, launch.args)
        return round(total * launch.block_dim / max(len(blocks), 1))

    # ---- launches ----------------------------------------------------------------------------
    def run_launch(self, launch: KernelLaunch, rec: TaskRecord) -> Generator[simpy.Event, Any, None]:
        """SimPy process: the launch overhead, then blocks dispatched to free cores of the right
        kind as they free up (more blocks than cores run in waves), each core first paying its
        start. On A2 a mix kernel's block takes one AIC and its share of AIVs together. The task
        scheduler hands blocks out one after another, block_dispatch_cycles apart: `staggered`
        (profile.runtime.block_dispatch), each block starts as it is handed out; else (`tail`)
        they start together and the skew is charged once after the last block."""
        kind_name, kind = self.profile.core_kind_for(launch.kind)
        partners: list[tuple[str, int]] = []
        if launch.kind == "mix" and "vector" not in kind.units:
            vname, vkind = self.profile.core_kind_for("vector")
            partners = [(vname, max(vkind.count // max(kind.count, 1), 1))]
        participants = {kind_name: launch.block_dim}
        participants.update({n: launch.block_dim * r for n, r in partners})
        self._launches += 1
        launch_id = self._launches
        lrec = LaunchRecord(launch.name, launch.block_dim, kind_name, start=self.env.now)
        rec.launches.append(lrec)
        yield self.env.timeout(self.launch_cycles)
        lrec.cores_start = self.env.now
        self.l2.launch_began()
        hbm_bytes, hbm_opened = self.hbm.bytes, self.hbm.opened
        running = []
        # fast mode without a trace (which shows every block): alike blocks shadow a representative,
        # on vector-only cores (AIV). Shadows end with their representative, so the cores they free
        # are taken again in another order than the exact engine's; where Cube launches run on the
        # same cores (the coupled chips' AI cores) that puts their unlike blocks on other cores
        # (docs/FAST_MODE.md: a ResNet-50 call on Ascend910A outside its bound, and no faster)
        fast = self.fast_mode.launch(not self.tracing and not partners and "cube" not in kind.units)
        long_kinds: set[str] = set()    # core kinds whose blocks outgrew a chunk in this launch
        handed = None                   # staggered: when the last block was handed out
        sweep = None                    # when the blocks handed out without waiting for a core began
        for b in range(launch.block_dim):
            self.dispatching[launch_id] = (f"launch {launch.name}: block {b} of {launch.block_dim} "
                                           f"waits for a free {kind_name} core")
            asked = self.env.now
            core = yield self.free_cores[kind_name].get()
            if sweep is None or self.env.now > asked:
                sweep = self.env.now
            members = [(core, 0)]
            for pname, ratio in partners:
                for sub in range(ratio):
                    members.append(((yield self.free_cores[pname].get()), sub))
            if self.staggered:
                if handed is not None and handed + self.dispatch_cycles > self.env.now:
                    wait = handed + self.dispatch_cycles - self.env.now
                    lrec.dispatch_waits += wait
                    yield self.env.timeout(wait)
                handed = self.env.now
            group = Group(launch_id, b, [c for c, _ in members], participants, len(rec.launches) - 1)
            for c, sub in members:
                running.append(self.env.process(self._block(c, launch, b, rec, group, sub, long_kinds, fast, sweep)))
        self.dispatching.pop(launch_id, None)
        if running:
            yield simpy.AllOf(self.env, running)
        behind = fast.behind_device_memory(self.env.now - lrec.cores_start, self.hbm.bytes - hbm_bytes,
                                           self.hbm.opened - hbm_opened, self.hbm.bytes_per_cycle)
        if behind > 0:
            yield self.env.timeout(behind)
        lrec.cores_end = self.env.now
        if self.dispatch_cycles and launch.block_dim > 1 and not self.staggered:
            yield self.env.timeout(self.dispatch_cycles * (launch.block_dim - 1))
        lrec.end = self.env.now
        fast.ended(rec, len(rec.launches) - 1, lrec.cores_end - lrec.cores_start, self.hbm.bytes_per_cycle)

    def _block(self, core: CoreState, launch: KernelLaunch, b: int, rec: TaskRecord, group: Group,
               sub: int, long_kinds: set[str], fast: LaunchFastForward | ExactLaunch, sweep: float
               ) -> Generator[simpy.Event, Any, None]:
        """SimPy process: one block on one core. Its program is recorded (ProgramRecorder for a
        long one), then its scalar unit and pipes run as a BlockRun, which meets the shared
        clock only where the core touches something shared. Once a block of a launch has
        outgrown a chunk, the launch's later blocks on that core kind go straight to a
        ProgramRecorder: they are likely as long, and trying record_whole first would record a
        chunk's worth of each twice. `sweep`: when the blocks handed out with it without waiting
        for a core began (fast mode's alike blocks are of one sweep)."""
        pool = self.free_cores[core.kind_name]
        core_start = self.env.now
        base, contention = self.start_cycles
        if base or contention:       # the core's start: its first instructions fetched, its state set
            starting = min(launch.block_dim, len(self.cores[core.kind_name]))
            yield self.env.timeout(base + contention * (starting - 1))
        core.reset_for_block(b, launch.name)
        self.active.add(core)
        rec.cores_used.setdefault(core.kind_name, set()).add(core.name)
        program = None
        if core.kind_name not in long_kinds:
            ctx = BlockContext(self.view, core, b, launch.block_dim, group, sub)
            program = record_whole(ctx, launch.body, launch.args)
        recorder = None
        if program is None:
            long_kinds.add(core.kind_name)
            ctx = BlockContext(self.view, core, b, launch.block_dim, group, sub)
            recorder = ProgramRecorder(ctx, launch.body, launch.args)
            self.recorders.add(recorder)
        block_start = self.env.now
        shape, rep, shadow = fast.shadow_of(program, core, b, sub, block_start, self.gm_path, sweep)
        if rep is not None:
            del program, ctx
            yield from self._shadow(rep, shadow, rec, group, fast, core_start)
            return
        skips = ctx.skips if recorder is None else None   # fast mode: known if recorded whole
        run = BlockRun(self, core, group, rec, self._chunks(program, recorder, rec, core),
                       fast.block(self, core.kind.pipes, core.kind.count, skips))
        fast.add(run, shape, sweep)
        if self.staggered and shape is not None:     # later blocks of its sweep may still shadow it
            run.moved = []
        del program

        def on_end():                     # at the block's end time: its records
            self.recorders.discard(recorder)
            for shadow in run.shadows:    # fast mode: they end with it (their lag later), each at its own core's turn
                succeed_at(self.env, shadow.finished, self.env.now + shadow.lag, turn(shadow.core.index, RELEASE))
            l2_lines = [sum(run.figures[p].l2_lines[i] for p in core.kind.pipes) for i in range(4)]
            self._book_block(rec, core, group, b, sub, core_start, run, l2_lines)
            fast.block_ended(run, rec, group.record, core)
            leftover = run.leftover_flag()
            if leftover:
                (src, dst, eid), setter = leftover
                raise core.fault(src, setter, f"block ended with flag {src}->{dst} id {eid} set but "
                                 f"never waited on (every SetFlag needs a matching WaitFlag)")
            self.active.discard(core)
            core.block = -1

        finished = simpy.Event(self.env)   # scheduled by the run as the core's release turn
        run.begin(finished, on_end)
        yield finished                     # cores freed in the same cycle: taken in core order
        yield pool.put(core)

    def _shadow(self, rep: BlockRun, shadow: ShadowBlock, rec: TaskRecord, group: Group,
                fast: LaunchFastForward, core_start: float) -> Generator[simpy.Event, Any, None]:
        """Fast mode: a block run as `rep`'s shadow (simulator/fast/shadows.py, ShadowBlock), its
        core taken at `core_start`: its GM transfers cross beside rep's (its lag later); when rep
        ends, so does it (its lag later), with rep's figures (its own GM traffic), and its core is
        released at its own turn (cores freed together are taken again in core order, as the
        exact engine's are)."""
        core = shadow.core
        core.scalar_state = f"running as a shadow of {rep.core.name}'s block (fast mode)"
        for p in core.pipe_state:
            core.pipe_state[p] = "finished"
        shadow.finished = simpy.Event(self.env)      # rep succeeds it at its end, at this core's turn
        rep.shadows.append(shadow)
        for pipe, t, cycles in rep.moved or ():      # rep's transfers so far: each crosses its lag later
            shadow.cross_at(self.env, t + shadow.lag, pipe, cycles)
        rep.fast.shadows.append(shadow)
        rec.instructions += shadow.instructions
        self.issued += shadow.instructions
        yield shadow.finished
        lines, l2_bytes, hbm_bytes = rep.fast.skipped_traffic()
        lines = [a + b for a, b in zip(lines, shadow.l2_lines)]
        nbytes = self._book_block(rec, core, group, shadow.block, shadow.sub, core_start, rep, lines)
        for p in core.kind.pipes:               # what PipeRun.finish books for a block's own pipes
            figures = rep.figures[p]
            for path, c in figures.path_cycles.items():
                part = (core.index, p, path)
                rec.path_parts[part] = rec.path_parts.get(part, 0.0) + c
            rec.busy[core.name, p] = rec.busy.get((core.name, p), 0.0) + figures.busy
            rec.work[core.name, p] = rec.work.get((core.name, p), 0.0) + figures.work
        for path, n in nbytes.items():
            rec.path_bytes[path] = rec.path_bytes.get(path, 0) + n
        rec.l2_hit_lines += lines[0] + lines[2]
        rec.l2_miss_lines += lines[1] + lines[3]
        rec.l2_bytes += l2_bytes + shadow.l2_bytes
        rec.hbm_bytes += hbm_bytes + shadow.hbm_bytes
        rec.hbm_opened += shadow.hbm_opened
        fast.shadow_ended(rep, shadow, rec, group.record, core)
        self.active.discard(core)
        core.block = -1
        yield self.free_cores[core.kind_name].put(core)

    def _book_block(self, rec: TaskRecord, core: CoreState, group: Group, b: int, sub: int, start: float,
                    run: BlockRun, l2_lines: list) -> dict:
        """A finished block's scalar unit cycles and its BlockRecord, its figures `run`'s (its own
        BlockRun, or a shadow's representative's); its pipes book their own (PipeRun.finish).
        Returns its bytes per path."""
        key = (core.name, "PIPE_S")
        rec.busy[key] = rec.busy.get(key, 0.0) + run.scalar_busy
        rec.work[key] = rec.work.get(key, 0.0) + run.scalar_busy
        busy, count, nbytes = block_figures(run, core.kind.pipes)
        rec.blocks.append(BlockRecord(group.record, b, sub, core.name, core.kind_name, start, self.env.now,
                                      busy, count, nbytes, tuple(l2_lines)))
        return nbytes

    def _chunks(self, program: list[Instr] | None, recorder: ProgramRecorder | None, rec: TaskRecord,
                core: CoreState) -> Iterator[list[Instr]]:
        """The block's instructions in program order, a list at a time, then an END for every pipe."""
        for chunk in [program] if recorder is None else recorder.chunks():
            rec.instructions += len(chunk)
            self.issued += len(chunk)
            yield chunk
        yield [Instr(p, "END", END) for p in core.kind.pipes]

    def abandon_recordings(self) -> None:
        """Unwind the kernel bodies of blocks that will never finish (after a fault)."""
        for r in list(self.recorders):
            r.abandon()
        self.recorders.clear()

    # ---- cross-core flags (A2) -------------------------------------------------------------
    def _cross_core_targets(self, core: CoreState, group: Group, mode: int) -> list[tuple]:
        """The counters a CrossCoreSetFlag of `mode` adds to, as (launch, owner): mode 0 one for
        the core's whole kind in the launch (a barrier), mode 1 each other AIV of the group, mode
        2 the AIVs from the AIC or the AIC from an AIV."""
        lid, flag_targets = group.launch_id, []
        if mode == 0:
            return [(lid, core.kind_name)]
        aic, aivs = group.aic(), group.aivs()
        if mode == 1:
            flag_targets = [c for c in aivs if c is not core]
        elif mode == 2:
            flag_targets = aivs if core is aic else ([aic] if aic is not None else [])
        return [(lid, c.name) for c in flag_targets]

    def cross_core_set(self, core: CoreState, group: Group, instr: Instr) -> None:
        """CrossCoreSetFlag, at its turn: count it, and wake the waits it satisfies."""
        flag, mode = instr.flag
        targets = self._cross_core_targets(core, group, mode)
        if not targets:
            raise core.fault(instr.pipe, instr, f"CrossCoreSetFlag mode {mode} has no partner core "
                             f"in this launch (mode 1 needs two AIVs, mode 2 an AIC and AIVs: a mix kernel)")
        for t in targets:
            key = t + (flag,)
            n = self.cross_flag_counts.get(key, 0) + 1
            if mode != 0 and n > self.cross_flag_limit:
                raise core.fault(instr.pipe, instr, f"cross-core flag {flag} of {t[1]} set {n} times "
                                 f"without a wait: the counter holds {self.cross_flag_limit}")
            self.cross_flag_counts[key] = n
            waiters = self.cross_flag_waiters.get(key)
            while waiters and waiters[0][1] <= self.cross_flag_counts[key]:
                waiter, need, consume = waiters.pop(0)
                if consume:
                    self.cross_flag_counts[key] -= need
                waiter.succeed()

    def cross_core_wait(self, core: CoreState, group: Group, instr: Instr, waiter: CrossCoreWake) -> bool:
        """CrossCoreWaitFlag, at its turn: True if the flag is there (taken), else `waiter` is
        queued and its succeed() is called when a set satisfies it."""
        flag, mode = instr.flag
        if mode == 0:
            key = (group.launch_id, core.kind_name, flag)
            done = self.cross_barrier_waits.get((group.launch_id, core.name, flag), 0) + 1
            self.cross_barrier_waits[(group.launch_id, core.name, flag)] = done
            need, consume = done * group.participants[core.kind_name], False
        else:
            key = (group.launch_id, core.name, flag)
            need = len(group.aivs()) if (mode == 2 and core is group.aic()) else 1
            consume = True
        if self.cross_flag_counts.get(key, 0) >= need:
            if consume:
                self.cross_flag_counts[key] -= need
            return True
        self.cross_flag_waiters.setdefault(key, []).append((waiter, need, consume))
        return False

    # ---- diagnosis -----------------------------------------------------------------------------
    def deadlock_report(self) -> str:
        """What every active core's scalar unit and pipes wait for, once nothing can move."""
        lines = ["deadlock: the event queue drained while pipes still wait"]
        def text(state):
            if isinstance(state, Instr):
                return f"executing {state.describe()}"
            if isinstance(state, tuple):
                form, instr = state
                flag = instr.flag
                if isinstance(flag, tuple) and len(flag) == 3:
                    flag = f"{flag[0]}->{flag[1]} id {flag[2]}"
                return form.format(instr=instr.describe(), pipe=instr.pipe, flag=flag)
            return state
        lines += [f"  {d}" for d in self.dispatching.values()]
        for core in sorted(self.active, key=lambda c: c.index):
            lines.append(f"  core {core.name} (block {core.block}): scalar {text(core.scalar_state)}")
            for p, s in core.pipe_state.items():
                if s != "finished":
                    lines.append(f"    {p}: {text(s)}")
        return "\n".join(lines)


__all__ = ["Device"]
