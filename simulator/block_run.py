"""One block on one core, advanced arithmetically (issue 14).

The core's scalar unit and each of its pipes is a small generator (an actor) that keeps its own
clock exactly as a SimPy process of its own would (`now`, moved by the same float sums). It stops
where it needs another actor (an empty queue, a full one, a flag, a PIPE_ALL barrier) or something
the cores share (a GM transfer's L2 and memory channels, a cross-core flag). Only those shared
moments are SimPy events: the block puts a `_Ticket` in SimPy's queue at the earliest one's
(time, (core, pipe) turn) and is called back there (`turn`).

The pipes run in time order: a heap holds each runnable pipe's next time, and a pipe that gets
ahead of another (its clock past the heap's top) yields before it reads or writes a buffer, so
the sanitizer, the functional effects and a SetFlag's "set twice" check see what a process per
pipe saw. The scalar unit runs ahead freely: it touches no buffer, and what it shares with the
pipes is a maximum of times (a pipe takes an instruction at max(its time, when the scalar unit's
process issued it); the scalar unit finds room in a queue of depth D at max(its time, when the
pipe took the instruction D places back)), as is a WaitFlag (max(its arrival, the SetFlag's
time)). Each shared moment's time is no earlier than the last one's, since everything after it
descends from it, so the core meets the others in the order a process per pipe would have. What
a block does between its shared moments may run ahead of other cores' blocks: functional effects
on GM from different cores follow their cross-core synchronisation, not simulated time (atomic
adds of different cores accumulate in the order the blocks reach them).
"""
from __future__ import annotations

import itertools
from collections import deque
from heapq import heappop, heappush

import numpy as np
import simpy
from simpy.events import NORMAL

from .profile import PIPES
from .program import BARRIER, END, GM_XFER, SET, WAIT, XSET, XWAIT, Instr, Rows

# The sanitizer remembers at most this many spans per block as known-written (a cache: a span
# past it is checked against the byte map each time). A strided copy has a span per row: a DETR
# gradient's Contiguous left 430,000 per block, 1.3 GB over 48 blocks at once.
CHECKED_SPANS = 16384
S_AT = PIPES.index("PIPE_S")
RELEASE = len(PIPES)        # the turn after a core's pipes: its release at a block's end


def per_line(lines: dict, core: int, line, pipe: str, cycles: float) -> None:
    """Book an instruction's cycles on a core's pipe to the source line that issued it."""
    st = lines.get((core, line, pipe))
    if st is None:
        lines[core, line, pipe] = [1, cycles]
    else:
        st[0] += 1
        st[1] += cycles


def rows_of(flags: np.ndarray, rows: Rows) -> np.ndarray:
    """The bytes of local `rows` in a buffer's byte flags, as a (count, n) view (the rows were
    checked against the buffer when they were recorded)."""
    assert rows.start >= 0 and rows.start + (rows.count - 1) * rows.pitch + rows.n <= flags.size
    return np.lib.stride_tricks.as_strided(flags[rows.start:], shape=(rows.count, rows.n),
                                           strides=(rows.pitch, 1), writeable=True)


def turn(core_index: int, pipe_at: int) -> int:
    """SimPy priority of a core's pipe's turn in a cycle: after every ordinary event of the cycle
    (priority 1), in (core, pipe) order. Where the cores meet (the L2 and the channels, cross-core
    flags, the pool of free cores), requests of one cycle are served in this fixed order, the
    hardware model's rule, not in the order the engine happened to create them."""
    return 2 + core_index * 8 + pipe_at


class _Ticket:
    """What the block puts in SimPy's event queue to be called back (lighter than an Event:
    SimPy's step needs only `callbacks` and `_ok`)."""
    __slots__ = ("callbacks", "_ok")

    def __init__(self, fn):
        self.callbacks = [fn]
        self._ok = True


class _CrossCoreWake:
    """What a cross-core flag's setter succeeds for an actor of this block that waits on it."""
    __slots__ = ("run", "actor")

    def __init__(self, run: "BlockRun", actor):
        self.run, self.actor = run, actor

    def succeed(self) -> None:
        run = self.run
        run.xwaiting -= 1
        run.at(run.env.now, self.actor, run.env.now)
        run.woken()


class BlockRun:
    """The scalar unit and the pipes of one core for one block (see the module's docstring).
    `begin()` starts it; once its pipes have finished, `figures` holds each pipe's (busy,
    executed, bytes per path, L2 lines) and `scalar_busy` the scalar unit's cycles."""

    def __init__(self, device, core, group, rec, chunks):
        self.device, self.core, self.group, self.rec = device, core, group, rec
        self.env = env = device.env
        self.start = env.now
        self.chunks = chunks
        self.pipes = core.kind.pipes
        self.queues = {p: deque() for p in self.pipes}
        self.idle: dict[str, tuple] = {}         # pipe -> (its actor, its time): waiting to be issued to
        # when each pipe took its instructions, which is when its queue had room again (a queue
        # of depth D starts with D places: the scalar unit takes one time per instruction issued)
        self.pops = {p: deque([float("-inf")] * device.depth) for p in self.pipes}
        self.scalar_waits: str | None = None     # the pipe whose queue room the scalar unit waits for
        self.flags: dict[tuple, Instr | None] = {}   # flag -> the SetFlag that set it (not yet waited on)
        self.flag_times: dict[tuple, float] = {}     # flag -> when it was set
        self.waiting: dict[tuple, tuple] = {}    # flag -> (actor, arrived at): a WaitFlag before its set
        self.runnable: deque = deque()           # (actor, value to send): the scalar unit, at once
        self.timeline: list[tuple] = []          # (time, seq, actor, value): pipes, in time order
        self.shared: list[tuple] = []            # (at, pipe index, seq, forced turn, actor)
        self.seq = itertools.count()
        self.xwaiting = 0                        # actors waiting for a cross-core flag
        self.ticket = None                       # the pending callback (_Ticket) and why:
        self.mode, self.then = "running", None   # running, turn, timer, xwait, woken, done, deadlock
        self.markers_left = 0                    # PIPE_ALL: pipes that have not reached the barrier
        self.markers_at = 0.0
        self.scalar_actor = None
        self.actors: dict[str, object] = {}
        self.figures: dict[str, tuple] = {}
        self.end = self.start
        self.scalar_busy = 0.0

    # ---- the block's clock: callbacks from SimPy's event queue ---------------------------------
    def begin(self, finished: simpy.Event, on_end) -> None:
        """Start the block now. `on_end()` is called at the block's end time (its bookkeeping);
        then `finished` is scheduled as the core's release turn (what the block's process waits
        for)."""
        self.finished, self.on_end = finished, on_end
        self.scalar_actor = self.scalar()
        self.runnable.append((self.scalar_actor, None))
        for p in self.pipes:
            self.actors[p] = a = self.pipe(p)
            self.at(self.start, a, None)
        self._advance()

    def _wait(self, t: float, priority: int, mode: str, then=None) -> None:
        """Be called back at (t, priority) (a turn's priority, or NORMAL); `then` is the actor to
        resume first. A mode "timer" or "xwait" wait gives way to a cross-core flag's wake."""
        env = self.env
        self.ticket = ticket = _Ticket(self._resume)
        self.mode, self.then = mode, then
        heappush(env._queue, (t, priority, next(env._eid), ticket))

    def _resume(self, ticket) -> None:
        if ticket is not self.ticket:           # a timer a cross-core wake overtook
            return
        self.ticket = None
        self.mode = "running"
        then, self.then = self.then, None
        if then is not None and self.timeline and self.timeline[0][0] <= self.env.now:
            self.at(self.env.now, then, None)      # after what is due first
            then = None
        self._advance(then)                        # else it is the earliest: sent first

    def woken(self) -> None:
        """A cross-core flag made an actor runnable (at env.now)."""
        if self.mode in ("timer", "xwait"):
            self._wait(self.env.now, NORMAL, "woken")

    def _advance(self, first=None) -> None:
        """Run the actors until all wait (`first`, an actor due now before any other, is sent
        first); then wait for the earliest shared moment (or a wake)."""
        env, runnable, shared, timeline = self.env, self.runnable, self.shared, self.timeline
        self.mode = "running"
        while True:
            while runnable:
                actor, value = runnable.popleft()
                try:
                    actor.send(value)
                except StopIteration:
                    pass
            if first is not None or (timeline and (not shared or timeline[0][0] <= min(shared)[0])):
                if first is not None:           # (no trip through the timeline's heap)
                    actor, value, first = first, None, None
                else:
                    _, _, actor, value = heappop(timeline)
                try:
                    later = actor.send(value)
                except StopIteration:
                    continue
                if later is not None:            # others have something earlier: after them
                    heappush(timeline, (later, next(self.seq), actor, None))
                continue
            if len(self.figures) == len(self.pipes):
                self.mode = "done"
                if self.end > env.now:
                    self._wait(self.end, NORMAL, "done")
                    self.ticket.callbacks = [self._end]
                else:
                    self._end(None)
                return
            if shared:
                item = min(shared) if len(shared) > 1 else shared[0]
                t = item[0]
                if t < env.now:
                    raise RuntimeError(f"engine: {self.core.name} meets the others at {t} after {env.now}")
                if t > env.now and self.xwaiting:    # a cross-core flag may wake an actor sooner
                    self._wait(t, NORMAL, "timer")
                    return
                shared.remove(item)
                prio = turn(self.core.index, item[1])
                if t > env.now:
                    # straight to its (core, pipe) turn in that cycle: after every ordinary event
                    # of the cycle, as a process that woke then and found others acting would be
                    self._wait(t, prio, "turn", item[4])
                    return
                if item[3] or env.peek() <= t:     # others act this cycle: take the turn
                    self._wait(t, prio, "turn", item[4])
                    return
                self.at(t, item[4], None)
            elif self.xwaiting:
                self.mode = "xwait"
                return
            else:                                # nobody can move: the device reports a deadlock
                self.mode = "deadlock"
                return

    def _end(self, _ticket) -> None:
        self.ticket = None
        self.on_end()
        env, ev = self.env, self.finished
        ev._ok, ev._value = True, None
        heappush(env._queue, (env.now, turn(self.core.index, RELEASE), next(env._eid), ev))

    def at(self, t: float, actor, value) -> None:
        """Resume `actor` (sending it `value`) once nothing of this block is due before `t`."""
        heappush(self.timeline, (t, next(self.seq), actor, value))

    def _share(self, t: float, pipe_at: int, forced: bool, actor) -> None:
        """Ask for the shared clock at `t` (and the (core, pipe) turn): the actor yields next."""
        self.shared.append((t, pipe_at, next(self.seq), forced, actor))

    def _xwait(self, instr: Instr, t: float, pipe_at: int, actor):
        """Generator: a cross-core wait that starts at `t` (its turn taken first); returns the
        time it ends."""
        self._share(t, pipe_at, True, actor)
        yield
        waker = _CrossCoreWake(self, actor)
        if self.device.xwait_now(self.core, self.group, instr, waker):
            return self.env.now
        self.xwaiting += 1
        return (yield)

    # ---- the scalar unit ---------------------------------------------------------------------
    def scalar(self):
        """Issue the block's instructions in order into the pipes' queues (as a SimPy scalar
        process did: its API call's cycles, then one issue cycle; room in a full queue)."""
        core, rec, device = self.core, self.rec, self.device
        me = self.scalar_actor
        snow = ts = self.start       # snow: the time a SimPy process would be at (env.now)
        issue = device.issue_cycles
        scalar_busy = 0.0
        run_start = run_end = ts
        trace = rec.trace if device.tracing else None
        queues, idle, pops, at = self.queues, self.idle, self.pops, self.at
        lanes = {p: (queues[p], pops[p]) for p in self.pipes}
        for chunk in self.chunks:
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
                        self.markers_left, self.markers_at = len(self.pipes), snow
                        for p in self.pipes:
                            m = Instr(p, "PipeBarrier(PIPE_ALL)", BARRIER)
                            m.event = True
                            if not pops[p]:
                                self.scalar_waits = p
                                yield
                            t = pops[p].popleft()
                            if t > snow:
                                snow = t
                            m.ready = ts if ts > snow else snow
                            m.issued = snow
                            queues[p].append(m)
                            a = idle.pop(p, None)
                            if a is not None:           # (the pipe, its time)
                                at(a[1] if a[1] > snow else snow, a[0], None)
                            if snow > ts:
                                ts = snow
                        if self.markers_left:
                            yield
                        if self.markers_at > snow:
                            snow = self.markers_at
                        if snow > ts:
                            ts = snow
                        core.scalar_state = "issuing"
                        continue
                    if kind == XWAIT and instr.pipe == "PIPE_S":
                        core.scalar_state = ("waiting for a cross-core flag at {instr}", instr)
                        t = snow + (ts - snow) if ts > snow else snow
                        snow = yield from self._xwait(instr, t, S_AT, me)
                        if snow > ts:
                            ts = snow
                        core.scalar_state = "issuing"
                        continue
                pipe = instr.pipe
                q, pq = lanes[pipe]
                if not pq:          # the queue is full until the pipe takes the instruction D back
                    core.scalar_state = ("waiting for room in the {pipe} queue to issue {instr}", instr)
                    self.scalar_waits = pipe
                    yield
                    core.scalar_state = "issuing"
                t = pq.popleft()
                if t > snow:
                    snow = t
                    if t > ts:
                        ts = t
                instr.ready = ts
                instr.issued = snow
                q.append(instr)
                if idle:
                    a = idle.pop(pipe, None)
                    if a is not None:           # (the pipe, its time)
                        at(a[1] if a[1] > snow else snow, a[0], None)
                ts += issue
            del chunk
        core.scalar_state = "done issuing"
        self.chunks = None
        if trace is not None and run_end > run_start:
            trace.append((core.index, "PIPE_S", "scalar", run_start, run_end - run_start, 0))
        self.scalar_busy = scalar_busy

    # ---- a pipe --------------------------------------------------------------------------------
    def pipe(self, pipe: str):
        """Execute the pipe's queue in order (as a SimPy process per pipe did, with the same sums)."""
        device, core, rec, group = self.device, self.core, self.rec, self.group
        me = self.actors[pipe]                  # (begin() makes every actor before it starts any)
        functional, tracing = device.functional, device.tracing
        now = self.start
        busy = work = 0.0
        executed = 0
        block_bytes: dict[str, int] = {}
        l2_lines = [0, 0, 0, 0]          # read hits, read misses, write hits, write misses
        l2_bytes = hbm_total = 0         # added to the task's totals at the end
        valid, checked = core.valid, core.checked
        covers, add_run = core.runs.covers, core.runs.add
        trace, lines = rec.trace, rec.lines
        state = core.pipe_state
        path_bytes, path_cycles = rec.path_bytes, {}
        pipe_at = PIPES.index(pipe)
        in_flight = device.in_flight
        profile, miss_latency = device.profile, device.miss_latency
        busy_until = work_until = 0.0
        flying: list[tuple] = []        # heap of (lands at, order, instr): transfers in flight
        last_lands = 0.0                # the latest `lands at` in `flying`
        order = itertools.count()
        q, pops, idle, runnable = self.queues[pipe], self.pops[pipe], self.idle, self.runnable
        flags, flag_times, waiting = self.flags, self.flag_times, self.waiting
        shared, seq, timeline = self.shared, self.seq, self.timeline
        l2, l2_channel, hbm = device.l2, device.l2_channel, device.hbm

        def complete(instr: Instr) -> None:
            """The instruction's bytes are written: the sanitizer knows them, and its effect runs."""
            writes = instr.writes
            if type(writes) is Rows:
                key = writes.key()
                if key not in checked:
                    buf = writes.buf
                    lo, hi = writes.extent()
                    if not covers(buf, lo, hi):
                        rows_of(valid[buf], writes)[...] = True
                        if writes.pitch == writes.n:     # one run
                            add_run(buf, lo, hi)
                    if len(checked) < CHECKED_SPANS:
                        checked.add(key)
                writes = ()
            for span in writes:
                if span not in checked:
                    buf, lo, hi = span
                    if not covers(buf, lo, hi):
                        valid[buf][lo:hi] = True
                        add_run(buf, lo, hi)
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

        def land(upto: float) -> None:
            """Complete the transfers that have landed by `upto`, in the order they land."""
            while flying and flying[0][0] <= upto:
                complete(heappop(flying)[2])

        latencies: dict[tuple, float] = {}      # (path, bytes, missed) -> what overlaps later transfers
        miss_cycles: dict[tuple, float] = {}    # (path, bytes) -> a transfer's cycles when it misses

        while True:
            if not q:
                state[pipe] = "idle, waiting for the scalar unit to issue"
                idle[pipe] = (me, now)
                yield
            instr = q.popleft()
            if instr.issued > now:          # it reached the queue after the pipe freed up
                now = instr.issued
            pops.append(now)
            if self.scalar_waits == pipe:
                self.scalar_waits = None
                runnable.append((self.scalar_actor, None))
            kind = instr.kind
            if kind == END:
                break
            if instr.ready > now:
                now = now + (instr.ready - now)
            if timeline and timeline[0][0] < now:
                yield now                   # another pipe has something earlier: after it
            if kind >= SET:               # SET, WAIT, BARRIER, XSET, XWAIT: no time of their own
                if flying and kind != WAIT:
                    # a flag or barrier on a pipe orders after its transfers have landed
                    last = last_lands
                    if last > now:
                        now = now + (last - now)
                        if timeline and timeline[0][0] < now:
                            yield now
                    land(last)              # (now + (last - now) may round below last)
                if kind == WAIT:
                    key = instr.flag
                    if flags.get(key):
                        flags[key] = None
                        t_set = flag_times.pop(key)
                        if t_set > now:         # (never, in time order; a wait never precedes its set)
                            now = t_set
                    else:
                        state[pipe] = ("waiting for flag {flag} at {instr}", instr)
                        waiting[key] = (me, now)
                        t_set = yield
                        if t_set > now:
                            now = t_set
                    if tracing:                 # the dependency, for the per-pipe trace layout
                        rec.flows.append((core.index, key[0], pipe, t_set, now))
                elif kind == SET:
                    key = instr.flag
                    w = waiting.pop(key, None)
                    if w is not None:           # handed straight to the waiting pipe
                        self.at(w[1] if w[1] > now else now, w[0], now)
                    else:
                        first = flags.get(key)
                        if first:
                            raise core.fault(pipe, instr, f"flag {key[0]}->{key[1]} id {key[2]} set twice "
                                             f"without a wait between (first set by {first.describe()})")
                        flags[key] = instr
                        flag_times[key] = now
                elif kind == BARRIER:
                    if instr.event is not None:     # PIPE_ALL's marker: this pipe has drained
                        if now > self.markers_at:
                            self.markers_at = now
                        self.markers_left -= 1
                        if not self.markers_left:
                            runnable.append((self.scalar_actor, None))
                elif kind == XSET:
                    self._share(now, pipe_at, True, me)
                    yield
                    device.xset(core, group, instr)
                else:
                    state[pipe] = ("waiting for a cross-core flag at {instr}", instr)
                    now = yield from self._xwait(instr, now, pipe_at, me)
                continue
            reads = instr.reads
            if type(reads) is Rows:
                key = reads.key()
                lo, hi = reads.extent()
                if key in checked or covers(reads.buf, lo, hi) or rows_of(valid[reads.buf], reads).all():
                    if len(checked) < CHECKED_SPANS:
                        checked.add(key)
                    reads = ()              # else: row by row, to name the first unwritten byte
            for span in reads:
                if span in checked:         # bytes once written stay written for the block
                    continue
                buf, lo, hi = span
                if not covers(buf, lo, hi):
                    v = valid[buf][lo:hi]
                    if not v.all():
                        bad = lo + int(np.argmin(v))
                        raise core.fault(pipe, instr, f"reads {buf}[{lo}:{hi}] but byte {bad} was never "
                                         f"written in this block (missing copy-in or missing flag)")
                    add_run(buf, lo, hi)
                if len(checked) < CHECKED_SPANS:
                    checked.add(span)
            overlap = 1
            if kind == GM_XFER:
                overlap = in_flight[instr.path]
                if overlap > 1 and len(flying) >= overlap:
                    # every slot taken: the first transfer to land frees one
                    first = flying[0][0]
                    if first > now:
                        now = now + (first - now)
                        if timeline and timeline[0][0] < now:
                            yield now
                    land(first if first > now else now)
            start = now
            hbm_bytes = 0
            if kind == GM_XFER:
                shared.append((start, pipe_at, next(seq), False, me))   # _share(), inline: the L2 and channels
                yield
                # through L2: a hit streams at the path's rate within the L2's chip-wide
                # bandwidth; misses and dirty evictions also cross the device-memory channel
                hits, misses = l2.hit_lines, l2.miss_lines
                fetch, evicted = l2.access(instr.gm, instr.gm_write)
                hits, misses = l2.hit_lines - hits, l2.miss_lines - misses
                w = 2 if instr.gm_write else 0
                l2_lines[w] += hits
                l2_lines[w + 1] += misses
                chan = instr.chan_bytes
                local = instr.cycles
                if fetch:
                    local = miss_cycles.get((instr.path, chan))
                    if local is None:
                        local = miss_cycles[instr.path, chan] = profile.path(instr.path).cycles(chan, miss_latency)
                done = l2_channel.reserve(start, chan)[0]
                if start + local > done:
                    done = start + local
                if fetch or evicted or hbm.pending:      # (else reserve() moves nothing)
                    hbm.pending += evicted
                    end, hbm_bytes = hbm.reserve(start, fetch, chan)
                    if end > done:
                        done = end
                l2_bytes += chan
                hbm_total += hbm_bytes
                dur = done - start
                need = local
                if overlap > 1:
                    # the pipe moves on once the bytes have streamed; the latency (and a miss's)
                    # overlaps the next transfers, and the data lands at `done`
                    lkey = (instr.path, chan, fetch > 0)
                    lat = latencies.get(lkey)
                    if lat is None:
                        lat = latencies[lkey] = profile.path(instr.path).latency(
                            chan, miss_latency if fetch else 0.0)
                    stream = local - lat
                    if not flying or done > last_lands:
                        last_lands = done
                    heappush(flying, (done, next(order), instr))
            else:
                dur = need = instr.cycles
            if overlap > 1:
                end = done                  # it lands later; the pipe goes on once it has streamed
                if stream > 0:
                    now = now + stream
            else:
                end = start + dur
                if dur > 0:
                    now = now + dur
                if instr.writes or instr.fn is not None:
                    if timeline and timeline[0][0] < now:
                        yield now           # its bytes are written at `now`: after what comes first
                    complete(instr)
            # busy and work: unions of intervals (the earlier ones end by *_until)
            if start >= busy_until:
                busy += end - start
                busy_until = end
            elif end > busy_until:
                busy += end - busy_until
                busy_until = end
            end = start + need
            if start >= work_until:
                work += end - start
                work_until = end
            elif end > work_until:
                work += end - work_until
                work_until = end
            executed += 1
            if instr.path is not None or tracing:
                book(instr, start, dur, hbm_bytes)
        if flying:
            last = last_lands
            if last > now:
                now = now + (last - now)
                if timeline and timeline[0][0] < now:
                    yield now
            land(last)
        state[pipe] = "finished"
        parts = rec.path_parts
        for path, cycles in path_cycles.items():
            key = (core.index, pipe, path)
            parts[key] = parts.get(key, 0.0) + cycles
        rec.l2_hit_lines += l2_lines[0] + l2_lines[2]
        rec.l2_miss_lines += l2_lines[1] + l2_lines[3]
        rec.l2_bytes += l2_bytes
        rec.hbm_bytes += hbm_total
        busy_key = (core.name, pipe)
        rec.busy[busy_key] = rec.busy.get(busy_key, 0.0) + busy
        rec.work[busy_key] = rec.work.get(busy_key, 0.0) + work
        if now > self.end:
            self.end = now
        self.figures[pipe] = (busy, executed, block_bytes, l2_lines)

    def leftover_flag(self):
        """(flag, its SetFlag) for a flag set but never waited on, or None."""
        return next(((key, setter) for key, setter in self.flags.items() if setter), None)
