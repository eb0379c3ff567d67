"""One block on one core, advanced arithmetically between the moments it meets the other cores.

The core's scalar unit and each of its pipes is a small generator (an actor) that keeps its own
clock (`now`, moved by float sums). An actor stops where it needs another actor (an empty queue, a
full one, a flag, a PIPE_ALL barrier) or something the cores share (a GM transfer's L2 and memory
channels, a cross-core flag). Only those shared moments are SimPy events: the block puts a
callback in SimPy's queue at the earliest one's (time, (core, pipe) turn) and is called back there
(`turn`); what the core does alone in between costs no event.

The pipes run in time order: a heap holds each runnable pipe's next time, and a pipe that gets
ahead of another (its clock past the heap's top) yields before it reads or writes a buffer, so the
sanitizer, the functional effects and a SetFlag's "set twice" check see the pipes' reads and
writes in the order of their times. The scalar unit runs ahead freely: it touches no buffer, and
what it shares with the pipes is a maximum of times (a pipe takes an instruction at max(its time,
when the instruction entered its queue); the scalar unit finds room in a queue of depth D at
max(its time, when the pipe took the instruction D places back)), as is a WaitFlag (max(its
arrival, the SetFlag's time)). Each shared moment's time is no earlier than the last one's, since
everything after it descends from it, so the core meets the others in time order. What a block
does between its shared moments may run ahead of other cores' blocks: functional effects on GM
from different cores follow their cross-core synchronisation, not simulated time (atomic adds of
different cores accumulate in the order the blocks reach them).

BlockRun holds the block's clock (its callbacks from SimPy's queue), the actors' shared state
(queues, flags, the timeline) and the scalar unit; PipeRun (simulator.pipe_run) runs one pipe. A GM transfer's cost is
GmPath's (simulator.gm_path), the sanitizer's checks CoreState's, the SimPy calls sim_clock's.
"""
from __future__ import annotations

import itertools
from collections import deque
from heapq import heappop, heappush
from typing import Any, Callable, Generator, Iterator, Protocol

import simpy
from simpy.events import NORMAL

from .core_state import CoreState, Group
from .gm_path import GmPath
from .profile import PIPES
from .fast import BlockFastForward
from .fast.mode import ExactBlock
from .program import BARRIER, MARK, XWAIT, Instr
from .records import TaskRecord
from .sim_clock import Wakeup, call_at, succeed_at, turn
from .pipe_run import Actor, PipeFigures, PipeRun

S_AT = PIPES.index("PIPE_S")
RELEASE = len(PIPES)        # the turn after a core's pipes: its release at a block's end



class SharedDevice(Protocol):
    """What a block uses of its device: the clock, the parts the cores share, and settings."""
    env: simpy.Environment
    gm_path: GmPath
    in_flight: dict[str, int]        # path -> transfers that may be in flight at once
    in_flight_bytes: dict[str, int | None] | None   # path -> and more while their bytes are under it (None: none)
    depth: int                       # a pipe's queue depth
    issue_cycles: float              # the scalar unit's cycles to issue one instruction
    functional: bool
    tracing: bool

    def cross_core_set(self, core: CoreState, group: Group, instr: Instr) -> None: ...
    def cross_core_wait(self, core: CoreState, group: Group, instr: Instr, waiter: CrossCoreWake) -> bool: ...


class CrossCoreWake:
    """What a cross-core flag's setter succeeds for an actor of this block that waits on it."""
    __slots__ = ("run", "actor")

    def __init__(self, run: BlockRun, actor: Actor):
        self.run, self.actor = run, actor

    def succeed(self) -> None:
        run = self.run
        run.cross_waiting -= 1
        run.at(run.env.now, self.actor, run.env.now)
        run.woken()


class BlockRun:
    """The scalar unit and the pipes of one core for one block (see the module's docstring).
    `begin()` starts it; once its pipes have finished, `figures` holds each pipe's PipeFigures
    and `scalar_busy` the scalar unit's cycles."""

    def __init__(self, device: SharedDevice, core: CoreState, group: Group, rec: TaskRecord,
                 chunks: Iterator[list[Instr]], fast: BlockFastForward | ExactBlock):
        self.device, self.core, self.group, self.rec = device, core, group, rec
        self.env = env = device.env
        self.start = env.now
        self.chunks: Iterator[list[Instr]] | None = chunks   # the program, a list at a time
        self.pipes = core.kind.pipes
        self.queues = {p: deque() for p in self.pipes}
        self.idle: dict[str, tuple] = {}         # pipe -> (its actor, its time): waiting to be issued to
        # pipe -> when places in its queue freed up (the pipe took an instruction); a queue of
        # depth D starts with D free places, and the scalar unit takes one per instruction issued
        self.room_at = {p: deque([float("-inf")] * device.depth) for p in self.pipes}
        self.scalar_waits: str | None = None     # the pipe whose queue room the scalar unit waits for
        self.flags: dict[tuple, Instr | None] = {}   # flag -> the SetFlag that set it (not yet waited on)
        self.flag_times: dict[tuple, float] = {}     # flag -> when it was set
        self.waiting: dict[tuple, tuple] = {}    # flag -> (actor, arrived at): a WaitFlag before its set
        self.runnable: deque = deque()           # (actor, value to send): the scalar unit, at once
        self.timeline: list[tuple] = []          # (time, seq, actor, value): pipes, in time order
        self.shared: list[tuple] = []            # shared moments asked for: (at, pipe index, seq, forced turn, actor)
        self.seq = itertools.count()
        self.cross_waiting = 0                   # actors waiting for a cross-core flag
        self.wakeup: Wakeup | None = None        # the callback pending in SimPy's queue, and why:
        self.mode = "running"                    # running, turn, timer, cross wait, woken, done, deadlock
        self.resume_first: Actor | None = None   # the actor whose turn the callback is
        self.pipes_to_drain = 0                  # PIPE_ALL: pipes that have not reached the barrier
        self.drained_at = 0.0                    # PIPE_ALL: when the last of them reached it
        self.scalar_actor: Actor | None = None
        self.figures: dict[str, PipeFigures] = {}
        self.end = self.start
        self.scalar_busy = 0.0
        # fast mode: alike blocks run as its shadows; sealed (none joins) once it moved data or ended;
        # where blocks start staggered, `moved` keeps its transfers (pipe, start, own cycles) for
        # the shadows that join later, and it is sealed at its end (or its first skip's touch)
        self.shadows: list = []
        self.sealed = False
        self.moved: list[tuple[str, float, float]] | None = None
        # fast mode: the loops' marks, what their skips added, the bound (in the exact modes, none)
        self.fast = fast

    # ---- the block's clock: callbacks from SimPy's event queue ---------------------------------
    def begin(self, finished: simpy.Event, on_end: Callable[[], None]) -> None:
        """Start the block now. `on_end()` is called at the block's end time (its bookkeeping);
        then `finished` is scheduled as the core's release turn (what the block's process waits
        for)."""
        self.finished, self.on_end = finished, on_end
        self.scalar_actor = self.scalar()
        self.runnable.append((self.scalar_actor, None))
        for p in self.pipes:
            runner = PipeRun(self, p)
            runner.actor = runner.run()
            self.at(self.start, runner.actor, None)
        self._advance()

    def woken(self) -> None:
        """A cross-core flag made an actor runnable (at env.now)."""
        if self.mode in ("timer", "cross wait"):
            self._wait(self.env.now, NORMAL, "woken")

    def at(self, t: float, actor: Actor, value) -> None:
        """Resume `actor` (sending it `value`) once nothing of this block is due before `t`."""
        heappush(self.timeline, (t, next(self.seq), actor, value))

    def share(self, t: float, pipe_at: int, forced: bool, actor: Actor) -> None:
        """Ask for the shared clock at `t` (and the (core, pipe) turn): the actor yields next."""
        self.shared.append((t, pipe_at, next(self.seq), forced, actor))

    def leftover_flag(self) -> tuple[tuple, Instr] | None:
        """(flag, its SetFlag) for a flag set but never waited on, or None."""
        return next(((key, setter) for key, setter in self.flags.items() if setter), None)

    def _wait(self, t: float, priority: int, mode: str, resume_first: Actor | None = None) -> None:
        """Be called back at (t, priority) (a turn's priority, or NORMAL), then resume
        `resume_first` first. A mode "timer" or "cross wait" wait gives way to a cross-core
        flag's wake."""
        self.wakeup = call_at(self.env, t, priority, self._resume)
        self.mode, self.resume_first = mode, resume_first

    def _resume(self, wakeup: Wakeup) -> None:
        if wakeup is not self.wakeup:           # a timer a cross-core wake overtook
            return
        self.wakeup = None
        self.mode = "running"
        first, self.resume_first = self.resume_first, None
        if first is not None and self.timeline and self.timeline[0][0] <= self.env.now:
            self.at(self.env.now, first, None)     # after what is due first
            first = None
        self._advance(first)                       # else it is the earliest: sent first

    def _advance(self, first: Actor | None = None) -> None:
        """Run the actors until all wait (`first`, an actor due now before any other, is sent
        first); then wait for the earliest shared moment (or a wake)."""
        runnable, shared, timeline = self.runnable, self.shared, self.timeline
        self.mode = "running"
        while True:
            while runnable:                      # the scalar unit: it runs ahead of the pipes
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
                self._finish()
                return
            if not self._meet_others():
                return

    def _meet_others(self) -> bool:
        """Every actor waits: take the earliest shared moment. True if it is now and no other
        core acts this cycle (its actor is due, run on); else the block waits for its callback
        (a turn, a timer that a cross-core wake may overtake, a wake, or a deadlock's report)."""
        env, shared = self.env, self.shared
        if not shared:
            self.mode = "cross wait" if self.cross_waiting else "deadlock"   # the device reports a deadlock
            return False
        item = min(shared) if len(shared) > 1 else shared[0]
        t, pipe_at, _, forced, actor = item
        if t < env.now:
            raise RuntimeError(f"engine: {self.core.name} meets the others at {t} after {env.now}")
        if t > env.now and self.cross_waiting:     # a cross-core flag may wake an actor sooner
            self._wait(t, NORMAL, "timer")
            return False
        shared.remove(item)
        if t > env.now or forced or env.peek() <= t:
            # its (core, pipe) turn in that cycle: after every ordinary event of the cycle, as if
            # the core had woken then and found others acting
            self._wait(t, turn(self.core.index, pipe_at), "turn", actor)
            return False
        self.at(t, actor, None)
        return True

    def _finish(self) -> None:
        """Every pipe has finished: the block ends when the last one did (in fast mode, that
        much later than its simulated part did as its skips fast-forwarded)."""
        self.mode = "done"
        self.sealed = True
        self.end += self.fast.totals().fast_forwarded
        if self.end > self.env.now:
            self.wakeup = call_at(self.env, self.end, NORMAL, self._end)
        else:
            self._end(None)

    def _end(self, _wakeup: Wakeup | None) -> None:
        self.wakeup = None
        self.on_end()
        succeed_at(self.env, self.finished, self.env.now, turn(self.core.index, RELEASE))

    def cross_core_wait(self, instr: Instr, t: float, pipe_at: int, actor: Actor) -> Generator[None, float, float]:
        """Generator: a cross-core wait that starts at `t` (its turn taken first); returns the
        time it ends."""
        self.share(t, pipe_at, True, actor)
        yield
        waker = CrossCoreWake(self, actor)
        if self.device.cross_core_wait(self.core, self.group, instr, waker):
            return self.env.now
        self.cross_waiting += 1
        return (yield)

    # ---- the scalar unit ---------------------------------------------------------------------
    # Two clocks: `clock` is the scalar unit's own (its API calls' cycles and one issue cycle per
    # instruction); `held` is when it was last held up by a pipe or another core (room in a full
    # queue, a PIPE_ALL barrier, a cross-core flag). An instruction enters its pipe's queue at
    # `held` (`issued`) and is ready at `clock` (`ready`): the pipe takes it from its queue at
    # the one and starts it at the other.
    def scalar(self) -> Actor:
        """Generator: issue the block's instructions in order into the pipes' queues (each after
        its API call's cycles; one issue cycle each; room in a full queue)."""
        core, rec = self.core, self.rec
        held = clock = self.start
        issue = self.device.issue_cycles
        scalar_busy = 0.0
        run_start = run_end = clock      # the scalar unit's current busy run (one trace entry)
        trace = rec.trace if self.device.tracing else None
        lanes = {p: (self.queues[p], self.room_at[p]) for p in self.pipes}
        idle, at = self.idle, self.at
        for chunk in self.chunks:
            for instr in chunk:
                s = instr.scalar
                if s:                    # the API call's own cycles
                    if clock > run_end:
                        if trace is not None and run_end > run_start:
                            trace.append((core.index, "PIPE_S", "scalar", run_start, run_end - run_start, 0))
                        run_start = clock
                    clock += s
                    run_end = clock
                    scalar_busy += s
                    if trace is not None:
                        rec.book_line(core.index, instr.line, "PIPE_S", s)
                kind = instr.kind
                if kind >= BARRIER:
                    if kind == MARK:         # fast mode: noted, and put in every pipe's queue
                        lead = self.fast.scalar_mark(instr, clock, scalar_busy)
                        if lead:             # the run-ahead the skipped periods would have given it
                            if trace is not None and run_end > run_start:
                                trace.append((core.index, "PIPE_S", "scalar", run_start, run_end - run_start, 0))
                            clock -= lead
                            run_start = run_end = clock
                        for p in self.pipes:
                            self.queues[p].append(instr)
                        continue
                    if kind == BARRIER and instr.flag == "PIPE_ALL":
                        held, clock = yield from self._drain_pipes(instr, held, clock)
                        continue
                    if kind == XWAIT and instr.pipe == "PIPE_S":
                        held, clock = yield from self._scalar_cross_wait(instr, held, clock)
                        continue
                pipe = instr.pipe
                q, room = lanes[pipe]
                if not room:          # the queue is full until the pipe takes the instruction D back
                    core.scalar_state = ("waiting for room in the {pipe} queue to issue {instr}", instr)
                    self.scalar_waits = pipe
                    yield
                    core.scalar_state = "issuing"
                t = room.popleft()
                if t > held:
                    held = t
                    if t > clock:
                        clock = t
                instr.ready = clock
                instr.issued = held
                q.append(instr)
                if idle:
                    waiting = idle.pop(pipe, None)
                    if waiting is not None:           # (the pipe, its time)
                        at(waiting[1] if waiting[1] > held else held, waiting[0], None)
                clock += issue
            del chunk
        core.scalar_state = "done issuing"
        self.chunks = None
        if trace is not None and run_end > run_start:
            trace.append((core.index, "PIPE_S", "scalar", run_start, run_end - run_start, 0))
        scalar_busy += self.fast.scalar_busy()
        self.scalar_busy = scalar_busy

    def _drain_pipes(self, instr: Instr, held: float, clock: float) -> Generator[None, Any, tuple[float, float]]:
        """Generator: PipeBarrier(PIPE_ALL): a marker into every pipe's queue, then the scalar
        unit stalls until every pipe has reached its marker. Returns (held, clock)."""
        core, queues, room_at = self.core, self.queues, self.room_at
        core.scalar_state = ("stalled at {instr} until every pipe drains", instr)
        self.pipes_to_drain, self.drained_at = len(self.pipes), held
        for p in self.pipes:
            marker = Instr(p, "PipeBarrier(PIPE_ALL)", BARRIER)
            marker.pipe_all_marker = True
            if not room_at[p]:
                self.scalar_waits = p
                yield
            t = room_at[p].popleft()
            if t > held:
                held = t
            marker.ready = clock if clock > held else held
            marker.issued = held
            queues[p].append(marker)
            waiting = self.idle.pop(p, None)
            if waiting is not None:           # (the pipe, its time)
                self.at(waiting[1] if waiting[1] > held else held, waiting[0], None)
            if held > clock:
                clock = held
        if self.pipes_to_drain:
            yield
        if self.drained_at > held:
            held = self.drained_at
        if held > clock:
            clock = held
        core.scalar_state = "issuing"
        return held, clock

    def _scalar_cross_wait(self, instr: Instr, held: float, clock: float) -> Generator[None, Any, tuple[float, float]]:
        """Generator: a CrossCoreWaitFlag on the scalar unit. Returns (held, clock)."""
        self.core.scalar_state = ("waiting for a cross-core flag at {instr}", instr)
        t = held + (clock - held) if clock > held else held
        held = yield from self.cross_core_wait(instr, t, S_AT, self.scalar_actor)
        if held > clock:
            clock = held
        self.core.scalar_state = "issuing"
        return held, clock

    def pipe_drained(self, now: float) -> None:
        """A pipe reached its PIPE_ALL marker at `now`: the last one releases the scalar unit."""
        if now > self.drained_at:
            self.drained_at = now
        self.pipes_to_drain -= 1
        if not self.pipes_to_drain:
            self.runnable.append((self.scalar_actor, None))
