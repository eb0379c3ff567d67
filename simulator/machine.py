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
import itertools
from collections import deque

import numpy as np
import simpy

from .memory import DeviceMemory, L2Cache, MemoryChannel
from .profile import PIPES, Profile
from .program import (BARRIER, COMPUTE, END, GM_XFER, SET, WAIT, XSET, XWAIT, Instr, KernelLaunch, align_up,
                      ceil_div, current_context)
from .recorder import BlockContext, CountingContext, ProgramRecorder, count_instructions, record_whole
from .state import BlockRecord, CoreState, Group, LaunchRecord, TaskRecord


# The sanitizer remembers at most this many spans per block as known-written (a cache: a span
# past it is checked against the byte map each time). A strided copy has a span per row: a DETR
# gradient's Contiguous left 430,000 per block, 1.3 GB over 48 blocks at once.
CHECKED_SPANS = 16384
RELEASE = len(PIPES)        # the slot after a core's pipes: its release at a block's end


def scalar_costs(profile: Profile) -> dict[tuple[int, str], float]:
    """(instruction kind, pipe) -> the scalar unit's cycles for the API call that emits it."""
    per_call = profile.scalar.cycles_per_call
    costs = {}
    for kind in (COMPUTE, GM_XFER, SET, WAIT, BARRIER, END, XSET, XWAIT):
        for pipe in PIPES:
            if kind == END:
                cls = None
            elif kind >= SET:
                cls = "flag"
            else:
                cls = {"PIPE_V": "vector", "PIPE_M": "cube"}.get(pipe, "copy")
            costs[kind, pipe] = per_call[cls] if cls else 0.0
    return costs


def per_line(lines: dict, core: int, line, pipe: str, cycles: float) -> None:
    """Book an instruction's cycles on a core's pipe to the source line that issued it."""
    st = lines.get((core, line, pipe))
    if st is None:
        lines[core, line, pipe] = [1, cycles]
    else:
        st[0] += 1
        st[1] += cycles


def union(total: float, until: float, start: float, end: float) -> tuple[float, float]:
    """Add [start, end) to a pipe's busy time, counting once what overlaps its earlier
    intervals (which end by `until`): returns the new (total, until)."""
    if start >= until:
        return total + (end - start), end
    if end > until:
        return total + (end - until), end
    return total, until


class Device:
    """One simulated device: the SimPy environment, device memory, the memory channel and the
    cores. Streams enqueue task processes; `run_until` advances simulated time."""

    def __init__(self, profile: Profile, functional: bool = True, trace: bool = True):
        self.profile = profile
        self.functional = functional
        self.tracing = trace
        self.env = simpy.Environment()
        self.memory = DeviceMemory(profile.device_memory.bytes, functional)
        self.l2 = L2Cache(profile.l2.bytes, profile.l2.line_bytes, lambda a: self.memory.find(a))
        self.l2_channel = MemoryChannel(profile.l2_bytes_per_cycle)
        self.hbm = MemoryChannel(profile.device_bytes_per_cycle)
        self.miss_latency = profile.l2.miss_latency_cycles
        self.cores: dict[str, list[CoreState]] = {}
        self.free_cores: dict[str, simpy.Store] = {}
        index = 0
        for kname, kind in profile.cores.items():
            cores = []
            for i in range(kind.count):
                cores.append(CoreState(f"{kname}{i}", index, kname, kind, functional))
                index += 1
            self.cores[kname] = cores
            store = simpy.Store(self.env)
            store.items.extend(cores)
            self.free_cores[kname] = store
        self.launch_cycles = profile.runtime.launch_overhead_us * profile.clock_mhz
        self.depth = profile.sync.pipe_queue_depth
        self.issue_cycles = profile.sync.scalar_issue_cycles
        self.scalar_cost = scalar_costs(profile)
        self.in_flight = {name: path.in_flight for name, path in profile.paths.items()}
        self.active: set[CoreState] = set()
        self._launches = 0
        self.dispatching: dict[int, str] = {}
        self.xcount: dict[tuple, int] = {}               # cross-core flag counters
        self.xwaiters: dict[tuple, list] = {}            # key -> [(event, need, consume)]
        self.xwaits_done: dict[tuple, int] = {}          # (core, flag) -> mode-0 waits so far
        self.xlimit = profile.sync.cross_core_counter_limit
        self.recorders: set[ProgramRecorder] = set()      # blocks still recording their programs
        self.issued = 0          # instructions handed to the scalar units so far (progress bars read it)

    def run(self, until: simpy.Event | None = None) -> None:
        """Advance simulated time (until `until` has happened, or until nothing is left to do).
        The engine allocates several short-lived objects per instruction, all freed by reference
        counting (programs hold no cycles; a few per block do, ~3,000 objects in 790,000
        instructions). A gen-0 collection walks every young object still alive, so at the default
        threshold (700) collections took 10-17 % of a run, and at 50,000 still ~11 % of a
        GridSampler run against none at all; at 1,000,000 they cost no more than none, and the
        collector still runs, as a safety net for cycles a kernel might make."""
        old = gc.get_threshold()
        gc.set_threshold(max(old[0], 1_000_000), *old[1:])
        try:
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
                ctx = CountingContext(self, core, b, launch.block_dim, group, sub)
                total += count_instructions(ctx, launch.body, launch.args)
        return round(total * launch.block_dim / max(len(blocks), 1))

    # ---- launches ----------------------------------------------------------------------------
    def run_launch(self, launch: KernelLaunch, rec: TaskRecord):
        """SimPy process: the launch overhead, then blocks dispatched to free cores of the right
        kind as they free up (more blocks than cores run in waves). On A2 a mix kernel's block
        takes one AIC and its share of AIVs together."""
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
        running = []
        for b in range(launch.block_dim):
            self.dispatching[launch_id] = (f"launch {launch.name}: block {b} of {launch.block_dim} "
                                           f"waits for a free {kind_name} core")
            core = yield self.free_cores[kind_name].get()
            members = [(core, 0)]
            for pname, ratio in partners:
                for sub in range(ratio):
                    members.append(((yield self.free_cores[pname].get()), sub))
            group = Group(launch_id, b, [c for c, _ in members], participants, len(rec.launches) - 1)
            for c, sub in members:
                running.append(self.env.process(self._block(c, launch, b, rec, group, sub)))
        self.dispatching.pop(launch_id, None)
        if running:
            yield simpy.AllOf(self.env, running)
        lrec.end = self.env.now

    def _block(self, core: CoreState, launch: KernelLaunch, b: int, rec: TaskRecord, group: Group,
               sub: int):
        pool = self.free_cores[core.kind_name]
        core.reset_for_block(b, launch.name)
        self.active.add(core)
        rec.cores_used.setdefault(core.kind_name, set()).add(core.name)
        ctx = BlockContext(self, core, b, launch.block_dim, group, sub)
        program = record_whole(ctx, launch.body, launch.args)
        recorder = None
        if program is None:
            ctx = BlockContext(self, core, b, launch.block_dim, group, sub)
            recorder = ProgramRecorder(ctx, launch.body, launch.args)
            self.recorders.add(recorder)
        queues = {p: deque() for p in core.kind.pipes}
        wake: dict[str, simpy.Event | None] = {p: None for p in core.kind.pipes}
        space: dict[str, simpy.Event | None] = {p: None for p in core.kind.pipes}
        env = self.env
        pipes = [env.process(self._pipe(core, p, queues[p], wake, space, rec, group))
                 for p in core.kind.pipes]
        ts = block_start = env.now
        depth, issue = self.depth, self.issue_cycles
        scalar_busy = 0.0
        run_start = run_end = ts             # the scalar unit's current stretch of work (trace)
        trace = rec.trace if self.tracing else None
        for chunk in self._chunks(program, recorder, rec, core):
            for instr in chunk:
                s = instr.scalar
                if s:
                    if ts > run_end:
                        if trace is not None and run_end > run_start:
                            trace.append((core.index, "PIPE_S", "scalar", run_start, run_end - run_start, 0))
                        run_start = ts
                    ts += s
                    run_end = ts
                    scalar_busy += s
                    if trace is not None:
                        per_line(rec.lines, core.index, instr.line, "PIPE_S", s)
                kind = instr.kind
                if kind >= BARRIER:
                    if kind == BARRIER and instr.flag == "PIPE_ALL":
                        # the scalar unit stalls until every pipe has drained
                        core.scalar_state = ("stalled at {instr} until every pipe drains", instr)
                        marks = []
                        for p in core.kind.pipes:
                            m = Instr(p, "PipeBarrier(PIPE_ALL)", BARRIER)
                            m.event = env.event()
                            marks.append(m.event)
                            yield from self._put(core, queues[p], wake, space, m, ts)
                            ts = max(ts, env.now)
                        yield simpy.AllOf(env, marks)
                        ts = max(ts, env.now)
                        core.scalar_state = "issuing"
                        continue
                    if kind == XWAIT and instr.pipe == "PIPE_S":
                        core.scalar_state = ("waiting for a cross-core flag at {instr}", instr)
                        yield from self._xwait(core, group, instr, max(ts, env.now))
                        ts = max(ts, env.now)
                        core.scalar_state = "issuing"
                        continue
                pipe = instr.pipe
                q = queues[pipe]
                if len(q) >= depth:
                    core.scalar_state = ("waiting for room in the {pipe} queue to issue {instr}", instr)
                    yield from self._put(core, q, wake, space, instr, ts)
                    ts = max(ts, env.now)
                    core.scalar_state = "issuing"
                else:
                    instr.ready = ts
                    q.append(instr)
                    ev = wake[pipe]
                    if ev is not None:
                        wake[pipe] = None
                        ev.succeed()
                ts += issue
            del chunk
        core.scalar_state = "done issuing"
        self.recorders.discard(recorder)
        del program
        if trace is not None and run_end > run_start:
            trace.append((core.index, "PIPE_S", "scalar", run_start, run_end - run_start, 0))
        yield simpy.AllOf(env, pipes)
        key = (core.name, "PIPE_S")
        rec.busy[key] = rec.busy.get(key, 0.0) + scalar_busy
        rec.work[key] = rec.work.get(key, 0.0) + scalar_busy
        busy, count, nbytes, l2_lines = {"PIPE_S": scalar_busy}, {}, {}, [0, 0, 0, 0]
        for p, proc in zip(core.kind.pipes, pipes):      # each pipe returns its block's figures
            b_busy, b_count, b_bytes, b_l2 = proc.value
            busy[p] = busy.get(p, 0.0) + b_busy
            count[p] = b_count
            for path, n in b_bytes.items():
                nbytes[path] = nbytes.get(path, 0) + n
            l2_lines = [a + b for a, b in zip(l2_lines, b_l2)]
        rec.blocks.append(BlockRecord(group.record, b, sub, core.name, core.kind_name, block_start, env.now,
                                      busy, count, nbytes, tuple(l2_lines)))
        leftover = [(k, v) for k, v in core.flags.items() if v]
        if leftover:
            (src, dst, eid), setter = leftover[0]
            raise core.fault(src, setter, f"block ended with flag {src}->{dst} id {eid} set but "
                             f"never waited on (every SetFlag needs a matching WaitFlag)")
        self.active.discard(core)
        core.block = -1
        yield self.slot(core, RELEASE)    # cores freed in the same cycle: taken in core order
        yield pool.put(core)

    def slot(self, core: CoreState, pipe_at: int) -> simpy.Event:
        """An event for this cycle that comes after every ordinary event of the cycle, in
        (core, pipe) order: where the cores meet (the L2 and the memory channels, cross-core flags,
        the pool of free cores), requests of one cycle are served in a fixed order, the hardware
        model's rule, not in the order the engine happened to create them."""
        ev = simpy.Event(self.env)
        ev._ok, ev._value = True, None
        self.env.schedule(ev, 2 + core.index * 8 + pipe_at)
        return ev

    def _chunks(self, program: list[Instr] | None, recorder: ProgramRecorder | None, rec: TaskRecord,
                core: CoreState):
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

    def _put(self, core, q, wake, space, instr, ts):
        while len(q) >= self.depth:
            ev = self.env.event()
            space[instr.pipe] = ev
            yield ev
        instr.ready = max(ts, self.env.now)
        q.append(instr)
        ev = wake[instr.pipe]
        if ev is not None:
            wake[instr.pipe] = None
            ev.succeed()

    # ---- cross-core flags (A2) -------------------------------------------------------------
    def _xtargets(self, core: CoreState, group: Group, mode: int) -> list[tuple]:
        lid, flag_targets = group.launch_id, []
        if mode == 0:
            return [(lid, core.kind_name)]
        aic, aivs = group.aic(), group.aivs()
        if mode == 1:
            flag_targets = [c for c in aivs if c is not core]
        elif mode == 2:
            flag_targets = aivs if core is aic else ([aic] if aic is not None else [])
        return [(lid, c.name) for c in flag_targets]

    def _xset(self, core: CoreState, group: Group, instr: Instr) -> None:
        flag, mode = instr.flag
        targets = self._xtargets(core, group, mode)
        if not targets:
            raise core.fault(instr.pipe, instr, f"CrossCoreSetFlag mode {mode} has no partner core "
                             f"in this launch (mode 1 needs two AIVs, mode 2 an AIC and AIVs: a mix kernel)")
        for t in targets:
            key = t + (flag,)
            n = self.xcount.get(key, 0) + 1
            if mode != 0 and n > self.xlimit:
                raise core.fault(instr.pipe, instr, f"cross-core flag {flag} of {t[1]} set {n} times "
                                 f"without a wait: the counter holds {self.xlimit}")
            self.xcount[key] = n
            waiters = self.xwaiters.get(key)
            while waiters and waiters[0][1] <= self.xcount[key]:
                ev, need, consume = waiters.pop(0)
                if consume:
                    self.xcount[key] -= need
                ev.succeed()

    def _xwait(self, core: CoreState, group: Group, instr: Instr, ts: float):
        flag, mode = instr.flag
        if ts > self.env.now:
            yield self.env.timeout(ts - self.env.now)
        yield self.slot(core, PIPES.index(instr.pipe))
        if mode == 0:
            key = (group.launch_id, core.kind_name, flag)
            done = self.xwaits_done.get((group.launch_id, core.name, flag), 0) + 1
            self.xwaits_done[(group.launch_id, core.name, flag)] = done
            need, consume = done * group.participants[core.kind_name], False
        else:
            key = (group.launch_id, core.name, flag)
            need = len(group.aivs()) if (mode == 2 and core is group.aic()) else 1
            consume = True
        if self.xcount.get(key, 0) >= need:
            if consume:
                self.xcount[key] -= need
            return
        ev = self.env.event()
        self.xwaiters.setdefault(key, []).append((ev, need, consume))
        yield ev

    def _pipe(self, core: CoreState, pipe: str, q: deque, wake, space, rec: TaskRecord,
              group: Group):
        """SimPy process: one pipe executing its queue in order. It runs once per instruction, so
        it is kept lean (hot attributes in locals, the flag kinds tested once); its events, their
        order and every float sum are a plain loop's (bit-identical cycles and reports)."""
        env = self.env
        timeout = env.timeout
        functional = self.functional
        tracing = self.tracing
        busy_key = (core.name, pipe)
        busy = work = 0.0
        executed = 0
        block_bytes: dict[str, int] = {}
        l2_lines = [0, 0, 0, 0]          # read hits, read misses, write hits, write misses
        valid, checked = core.valid, core.checked
        trace, lines = rec.trace, rec.lines
        flags, waiters, state = core.flags, core.waiters, core.pipe_state
        path_bytes, path_cycles = rec.path_bytes, {}
        slot, peek = self.slot, env.peek
        pipe_at = PIPES.index(pipe)
        in_flight = self.in_flight
        busy_until = work_until = 0.0
        flying: list[tuple] = []        # (lands at, order, instr): transfers still in flight
        order = itertools.count()

        def complete(instr: Instr) -> None:
            """The instruction's bytes are written: the sanitizer knows them, and its effect runs."""
            for span in instr.writes:
                if span not in checked:
                    buf, lo, hi = span
                    valid[buf][lo:hi] = True
                    if len(checked) < CHECKED_SPANS:
                        checked.add(span)
            if functional and instr.fn is not None:
                instr.fn()

        def book(instr: Instr, start: float, dur: float, hbm_bytes: int) -> None:
            """An executed instruction's bytes and cycles per path, and its trace entry."""
            path = instr.path
            if path is not None:
                path_bytes[path] = path_bytes.get(path, 0) + instr.nbytes
                block_bytes[path] = block_bytes.get(path, 0) + instr.nbytes
                path_cycles[path] = path_cycles.get(path, 0.0) + dur
            if tracing:
                trace.append((core.index, pipe, instr.name, start, dur, hbm_bytes))
                per_line(lines, core.index, instr.line, pipe, dur)

        def land(now: float) -> None:
            """Complete the transfers that have landed by `now`."""
            nonlocal flying
            done = sorted(t for t in flying if t[0] <= now)
            flying = [t for t in flying if t[0] > now]
            for _, _, instr in done:
                complete(instr)
        l2, l2_channel, hbm = self.l2, self.l2_channel, self.hbm
        while True:
            if not q:
                state[pipe] = "idle, waiting for the scalar unit to issue"
                ev = env.event()
                wake[pipe] = ev
                yield ev
            instr = q.popleft()
            sev = space[pipe]
            if sev is not None:
                space[pipe] = None
                sev.succeed()
            kind = instr.kind
            if kind == END:
                break
            if instr.ready > env.now:
                yield timeout(instr.ready - env.now)
            if kind >= SET:               # SET, WAIT, BARRIER, XSET, XWAIT: no time of their own
                if flying and kind != WAIT:
                    # a flag or barrier on a pipe orders after its transfers have landed
                    last = max(t[0] for t in flying)
                    if last > env.now:
                        state[pipe] = ("waiting for its transfers in flight to land before {instr}", instr)
                        yield timeout(last - env.now)
                    land(last)              # (now + (last - now) may round below last)
                if kind == WAIT:
                    key = instr.flag
                    if flags.get(key):
                        flags[key] = None
                        if tracing:                 # the dependency, for the per-pipe trace layout
                            rec.flows.append((core.index, key[0], pipe, core.flag_times.pop(key, env.now), env.now))
                    else:
                        state[pipe] = ("waiting for flag {flag} at {instr}", instr)
                        ev = env.event()
                        waiters[key] = ev
                        yield ev
                elif kind == SET:
                    key = instr.flag
                    first = flags.get(key)
                    if first:
                        raise core.fault(pipe, instr, f"flag {key[0]}->{key[1]} id {key[2]} set twice "
                                         f"without a wait between (first set by {first.describe()})")
                    waiter = waiters.pop(key, None)
                    if waiter is not None:
                        waiter.succeed()        # handed straight to the waiting pipe
                        if tracing:
                            rec.flows.append((core.index, pipe, key[1], env.now, env.now))
                    else:
                        flags[key] = instr
                        if tracing:
                            core.flag_times[key] = env.now
                elif kind == BARRIER:
                    if instr.event is not None:
                        instr.event.succeed()
                elif kind == XSET:
                    yield slot(core, pipe_at)
                    self._xset(core, group, instr)
                else:
                    state[pipe] = ("waiting for a cross-core flag at {instr}", instr)
                    yield from self._xwait(core, group, instr, env.now)
                continue
            for span in instr.reads:
                if span in checked:         # bytes once written stay written for the block
                    continue
                buf, lo, hi = span
                v = valid[buf][lo:hi]
                if not v.all():
                    bad = lo + int(np.argmin(v))
                    raise core.fault(pipe, instr, f"reads {buf}[{lo}:{hi}] but byte {bad} was never "
                                     f"written in this block (missing copy-in or missing flag)")
                if len(checked) < CHECKED_SPANS:
                    checked.add(span)
            overlap = 1
            if kind == GM_XFER:
                overlap = in_flight[instr.path]
                if overlap > 1 and len(flying) >= overlap:
                    # every slot taken: the first transfer to land frees one
                    first = min(t[0] for t in flying)
                    if first > env.now:
                        state[pipe] = ("waiting for a free in-flight slot to start {instr}", instr)
                        yield timeout(first - env.now)
                    land(max(first, env.now))
            start = env.now
            state[pipe] = instr             # executing it
            hbm_bytes = 0
            if kind == GM_XFER:
                if peek() <= start:            # others act this cycle: take the (core, pipe) turn
                    yield slot(core, pipe_at)
                # through L2: a hit streams at the path's rate within the L2's chip-wide
                # bandwidth; misses and dirty evictions also cross the device-memory channel
                hits, misses = l2.hit_lines, l2.miss_lines
                fetch, evicted = l2.access(instr.gm, instr.gm_write)
                hits, misses = l2.hit_lines - hits, l2.miss_lines - misses
                rec.l2_hit_lines += hits
                rec.l2_miss_lines += misses
                w = 2 if instr.gm_write else 0
                l2_lines[w] += hits
                l2_lines[w + 1] += misses
                local = instr.cycles
                if fetch:
                    local = self.profile.path(instr.path).cycles(instr.chan_bytes, self.miss_latency)
                done = start + local
                done = max(done, l2_channel.reserve(start, instr.chan_bytes)[0])
                hbm.pending += evicted
                end, hbm_bytes = hbm.reserve(start, fetch, drain=instr.chan_bytes)
                done = max(done, end)
                rec.l2_bytes += instr.chan_bytes
                rec.hbm_bytes += hbm_bytes
                dur = done - start
                need = local
                if overlap > 1:
                    # the pipe moves on once the bytes have streamed; the latency (and a miss's)
                    # overlaps the next transfers, and the data lands at `done`
                    cost = self.profile.path(instr.path)
                    stream = local - cost.latency(instr.chan_bytes, self.miss_latency if fetch else 0.0)
                    busy, busy_until = union(busy, busy_until, start, done)
                    work, work_until = union(work, work_until, start, start + need)
                    flying.append((done, next(order), instr))
                    executed += 1
                    book(instr, start, dur, hbm_bytes)
                    if stream > 0:
                        yield timeout(stream)
                    continue
            else:
                dur = need = instr.cycles
            if dur > 0:
                yield timeout(dur)
            complete(instr)
            busy, busy_until = union(busy, busy_until, start, start + dur)
            work, work_until = union(work, work_until, start, start + need)
            executed += 1
            book(instr, start, dur, hbm_bytes)
        if flying:
            last = max(t[0] for t in flying)
            if last > env.now:
                state[pipe] = "waiting for its transfers in flight to land"
                yield timeout(last - env.now)
            land(last)
        state[pipe] = "finished"
        parts = rec.path_parts
        for path, cycles in path_cycles.items():
            key = (core.index, pipe, path)
            parts[key] = parts.get(key, 0.0) + cycles
        rec.busy[busy_key] = rec.busy.get(busy_key, 0.0) + busy
        rec.work[busy_key] = rec.work.get(busy_key, 0.0) + work
        return busy, executed, block_bytes, l2_lines

    # ---- diagnosis -----------------------------------------------------------------------------
    def deadlock_report(self) -> str:
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


__all__ = ["Device", "KernelLaunch", "TaskRecord", "Instr", "BlockContext", "Group", "current_context",
           "COMPUTE", "GM_XFER", "SET", "WAIT", "BARRIER", "END", "XSET", "XWAIT", "ceil_div",
           "align_up"]
