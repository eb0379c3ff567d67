"""One pipe of a block (block_run.BlockRun): executes its queue in order, meets the other cores at
its GM transfers' turns, and keeps the pipe's figures (busy and work cycles, bytes per path, L2
lines). The block's docstring says how the actors share a core's time."""
from __future__ import annotations

import itertools
from heapq import heappop, heappush
from typing import Any, Generator, NamedTuple

from .fast import cross_beside
from .profile import PIPES
from .program import BARRIER, END, GM_XFER, MARK, SET, WAIT, XSET, Instr

# an actor: the scalar unit's or a pipe's generator; the block resumes it with send(), and it yields
# a time to be resumed at (after what is due before it) or None (it waits to be resumed)
Actor = Generator[float | None, Any, None]


class PipeFigures(NamedTuple):
    """What one pipe did in a finished block (BlockRun.figures[pipe])."""
    busy: float                  # cycles it was busy
    executed: int                # instructions it ran
    bytes: dict                  # path -> bytes it moved
    l2_lines: list               # L2 lines: read hits, read misses, write hits, write misses
    work: float                  # the same, each instruction for its own cycles (without contention)
    path_cycles: dict            # path -> cycles its transfers took


class PipeRun:
    """One pipe of a BlockRun: executes its queue in order, and keeps the pipe's figures."""

    def __init__(self, block, pipe: str):
        """`block`: the block_run.BlockRun whose queue for `pipe` this runs (not imported here:
        the block imports its pipes)."""
        device = block.device
        self.block, self.pipe, self.core, self.rec = block, pipe, block.core, block.rec
        self.actor: Actor | None = None      # run()'s generator, which the block resumes
        self.pipe_at = PIPES.index(pipe)
        self.functional, self.tracing = device.functional, device.tracing
        self.gm_path = device.gm_path
        self.record_writes = self.core.record_writes
        self.block_bytes: dict[str, int] = {}
        self.path_cycles: dict[str, float] = {}
        self.l2_lines = [0, 0, 0, 0]          # read hits, read misses, write hits, write misses
        self.l2_bytes = self.hbm_bytes = 0    # added to the task's totals at the end
        self.hbm_opened = 0                   # device memory's time opening pieces, in bytes
        self.flying: list[tuple] = []         # heap of (lands at, order, instr): transfers in flight
        self.last_lands = 0.0                 # the latest `lands at` in `flying`
        self.order = itertools.count()

    # The pipe's whole loop, ~105 lines, longer than the house's 80 for speed: it runs once per
    # instruction, so its state stays in locals and the steps every instruction takes (take it,
    # wait for its turn, account its cycles) are written in place. The others are methods.
    def run(self) -> Actor:
        """Generator: execute the pipe's queue in order. It yields `now` when another pipe has
        something due earlier (the block resumes it after that), None when it waits (for the
        scalar unit, a flag, or its turn on the shared clock)."""
        block, core, pipe, pipe_at, me = self.block, self.core, self.pipe, self.pipe_at, self.actor
        q, room, idle, runnable = block.queues[pipe], block.room_at[pipe], block.idle, block.runnable
        shared, seq, timeline, windows = block.shared, block.seq, block.timeline, block.device.in_flight_bytes
        in_flight, state, tracing = block.device.in_flight, core.pipe_state, self.tracing
        check_reads, complete, book = core.check_reads, self.complete, self.book
        now = block.start
        busy = work = 0.0            # cycles: the union of its instructions' [start, end), and of
        busy_until = work_until = 0.0    # [start, start + own cycles) (without contention)
        executed = 0
        while True:
            # take the next instruction (the scalar unit issued it at `issued`, ready at `ready`)
            if not q:
                state[pipe] = "idle, waiting for the scalar unit to issue"
                idle[pipe] = (me, now)
                yield
            instr = q.popleft()
            kind = instr.kind
            if kind == MARK:                # fast mode: no instruction, the pipe's figures noted
                block.fast.pipe_mark(self, instr, now, busy, work, executed)
                continue
            if instr.issued > now:          # it reached the queue after the pipe freed up
                now = instr.issued
            room.append(now)
            if block.scalar_waits == pipe:
                block.scalar_waits = None
                runnable.append((block.scalar_actor, None))
            if kind == END:
                break
            if instr.ready > now:
                now = now + (instr.ready - now)
            if timeline and timeline[0][0] < now:
                yield now                   # another pipe has something earlier: after it
            # flags and barriers: no time of their own
            if kind >= SET:
                if self.flying and kind != WAIT:    # they order after the pipe's transfers land
                    now = yield from self.until_landed(self.last_lands, now)
                if kind == WAIT:
                    t_set = self.take_flag(instr.flag)
                    if t_set is None:               # not set yet: its SetFlag sends its time
                        state[pipe] = ("waiting for flag {flag} at {instr}", instr)
                        block.waiting[instr.flag] = (me, now)
                        t_set = yield
                    if t_set > now:
                        now = t_set
                    if tracing:                     # the dependency, for the per-pipe trace layout
                        self.rec.flows.append((core.index, instr.flag[0], pipe, t_set, now))
                elif kind == SET:
                    self.set_flag(instr, now)
                elif kind == BARRIER:
                    if instr.pipe_all_marker:
                        block.pipe_drained(now)
                elif kind == XSET:
                    block.share(now, pipe_at, True, me)
                    yield
                    block.device.cross_core_set(core, block.group, instr)
                else:
                    state[pipe] = ("waiting for a cross-core flag at {instr}", instr)
                    now = yield from block.cross_core_wait(instr, now, pipe_at, me)
                continue
            # the sanitizer: every byte it reads was written in this block
            if instr.reads:
                check_reads(pipe, instr)
            # execute it: a GM transfer meets the other cores at its turn on the shared clock
            start = now
            if kind == GM_XFER:
                if (overlap := in_flight[instr.path]) > 1 and len(self.flying) >= overlap:   # every slot taken
                    now = start = yield from (self.until_slot(overlap, windows[instr.path], now) if windows
                                              else self.until_landed(self.flying[0][0], now))
                shared.append((start, pipe_at, next(seq), False, me))   # block.share(), inline
                yield
                end, need, hbm_bytes, streamed = self.transfer(instr, start, overlap)
                dur = end - start
            else:
                dur = need = instr.cycles
                hbm_bytes, streamed = 0, None
            if streamed is not None:        # in flight: it lands at `end`, the pipe goes on at `streamed`
                now = streamed
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
        if self.flying:
            now = yield from self.until_landed(self.last_lands, now)
        self.finish(now, busy, work, executed)

    # ---- its steps ---------------------------------------------------------------------------
    def complete(self, instr: Instr) -> None:
        """The instruction's bytes are written: the sanitizer knows them, and its effect runs."""
        if instr.writes:
            self.record_writes(instr.writes)
        if self.functional and instr.fn is not None:
            instr.fn()

    def book(self, instr: Instr, start: float, dur: float, hbm_bytes: int) -> None:
        """An executed instruction's bytes and cycles per path, and its trace entry."""
        path = instr.path
        if path is not None:
            rec = self.rec
            rec.path_bytes[path] = rec.path_bytes.get(path, 0) + instr.nbytes
            self.block_bytes[path] = self.block_bytes.get(path, 0) + instr.nbytes
            self.path_cycles[path] = self.path_cycles.get(path, 0.0) + dur
        if self.tracing:
            self.rec.trace.append((self.core.index, self.pipe, instr.name, start, dur, hbm_bytes))
            self.rec.book_line(self.core.index, instr.line, self.pipe, dur)

    def take_flag(self, flag: tuple) -> float | None:
        """A WaitFlag: when its flag was set (now consumed), or None if it is not set yet."""
        block = self.block
        if not block.flags.get(flag):
            return None
        block.flags[flag] = None
        return block.flag_times.pop(flag)

    def set_flag(self, instr: Instr, now: float) -> None:
        """A SetFlag at `now`: handed straight to a pipe that waits on it, or left set (twice
        without a wait between is a fault)."""
        block, key = self.block, instr.flag
        waiter = block.waiting.pop(key, None)
        if waiter is not None:
            actor, arrived = waiter
            block.at(arrived if arrived > now else now, actor, now)
            return
        first = block.flags.get(key)
        if first:
            raise self.core.fault(self.pipe, instr, f"flag {key[0]}->{key[1]} id {key[2]} set twice "
                                  f"without a wait between (first set by {first.describe()})")
        block.flags[key] = instr
        block.flag_times[key] = now

    def until_landed(self, t: float, now: float) -> Generator[float, None, float]:
        """Generator: the pipe waits until `t` (if later than `now`), then completes the
        transfers that have landed by then, in the order they land. Returns the new now."""
        if t > now:
            now = now + (t - now)
            timeline = self.block.timeline
            if timeline and timeline[0][0] < now:
                yield now
        upto = t if t > now else now        # (now + (t - now) may round below t)
        flying, complete = self.flying, self.complete
        while flying and flying[0][0] <= upto:
            complete(heappop(flying)[2])
        return now

    def until_slot(self, overlap: int, window: int | None, now: float) -> Generator[float, None, float]:
        """Generator: the pipe waits until a transfer may start, with fewer than `overlap` in flight
        or, given the path's `window`, fewer bytes in flight than it (each landing frees its slot
        and its bytes). Returns the new now."""
        flying = self.flying
        while flying and len(flying) >= overlap and (window is None
                                                     or sum(f[2].chan_bytes for f in flying) >= window):
            now = yield from self.until_landed(flying[0][0], now)
        return now

    def transfer(self, instr: Instr, start: float, overlap: int) -> tuple[float, float, int, float | None]:
        """A GM transfer that starts at `start`, at its turn on the shared clock. Returns (when it
        ends, its own cycles, bytes that reached device memory, and when the pipe may go on if
        it stays in flight (its path overlaps transfers), else None)."""
        block = self.block
        shadows = block.shadows              # fast mode: its shadows' transfers cross beside it
        done, local, fetch, hbm_bytes, hits, misses, opened = (
            cross_beside(shadows, self.pipe, instr, start, block.env) if shadows else self.gm_path.cross(instr, start))
        if block.moved is None:
            block.sealed = True
        else:
            block.moved.append((self.pipe, start, local))
        w = 2 if instr.gm_write else 0
        self.l2_lines[w] += hits
        self.l2_lines[w + 1] += misses
        self.l2_bytes += instr.chan_bytes
        self.hbm_bytes += hbm_bytes
        self.hbm_opened += opened
        if overlap <= 1:
            return done, local, hbm_bytes, None
        # the pipe moves on once the bytes have streamed; the latency (and a miss's) overlaps the
        # next transfers, and the data lands at `done`
        stream = local - self.gm_path.latency(instr, fetch > 0)
        if not self.flying or done > self.last_lands:
            self.last_lands = done
        heappush(self.flying, (done, next(self.order), instr))
        return done, local, hbm_bytes, (start + stream if stream > 0 else start)

    def finish(self, now: float, busy: float, work: float, executed: int) -> None:
        """The pipe's queue is done at `now`: its figures into the task's record and the block's."""
        rec, core, pipe, block = self.rec, self.core, self.pipe, self.block
        core.pipe_state[pipe] = "finished"
        now, busy, work, executed = block.fast.pipe_finished(self, now, busy, work, executed)
        parts = rec.path_parts
        for path, cycles in self.path_cycles.items():
            key = (core.index, pipe, path)
            parts[key] = parts.get(key, 0.0) + cycles
        l2_lines = self.l2_lines
        rec.l2_hit_lines += l2_lines[0] + l2_lines[2]
        rec.l2_miss_lines += l2_lines[1] + l2_lines[3]
        rec.l2_bytes += self.l2_bytes
        rec.hbm_bytes += self.hbm_bytes
        rec.hbm_opened += self.hbm_opened
        busy_key = (core.name, pipe)
        rec.busy[busy_key] = rec.busy.get(busy_key, 0.0) + busy
        rec.work[busy_key] = rec.work.get(busy_key, 0.0) + work
        if now > block.end:
            block.end = now
        block.figures[pipe] = PipeFigures(busy, executed, self.block_bytes, l2_lines, work, self.path_cycles)
