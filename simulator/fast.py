"""Fast mode: a declared loop's steady state is measured, and the rest of it fast-forwarded.

A kernel declares its loops with `Loop` (simulator.kernel). In the exact modes a `Loop` is its
iterations, nothing more. In fast mode it splits them into runs of interchangeable iterations (the
same `key`) and, in a run long enough, records only:

    warm-up | window 1 | window 2 | (skipped: a whole number of periods) | tail

Each window is one `period` of iterations (the loop's buffer rotation: 2 for a double-buffered
loop, so that the iterations before and after the skip alternate their buffers as the whole loop
would). Three marks go into the program (`MARK` instructions): at each window's start and at the
skip. Every actor of the block (the scalar unit and each pipe) snapshots its own figures where
it meets a mark (a pipe meets it in its queue's order, so what it has done before it belongs to
the iterations before it), and at the skip adds the skipped periods times its figures over
window 2 to what it will report: busy cycles, instructions, bytes per path, L2 lines. The block
then ends later than its simulated part did by the skipped periods times its pace: what a period
cost the busiest pipe, averaged over the launch's blocks that skip alike (the same k-th skip of
the same work), since alike blocks side by side differ in one window only by where each stood in
the shared queues. Nested loops work the same way: an actor's figures at a mark include what
inner skips already added. The L2 takes the lines the skipped periods would have left in it
(their addresses extrapolated from the windows) once every block of the launch is past its
windows (SkipBarrier), before any block's tail. A skip stops where the L2 would fill: at its
free room as the loop is recorded (less what the loop's head fills), then at its size.

A launch's alike blocks on vector-only cores (one program shape, one start) are simulated in a
few representatives; the others are recorded and run as their shadows, whose GM transfers cross
the L2 and the channels beside the representatives' (AlikeBlocks, ShadowBlock, cross_beside).

Where a Loop's declared gathers show its periods in two classes (simulator.kernel.loop.
PeriodClasses), the windows sit on one period of each, and each skipped period costs window 2's
figures plus window 1's difference from them in the share its class lies towards window 1's.

What this cannot see, and so what the bound is made of:
* a steady state that is not one: window 2's duration against window 1's, times the periods
  skipped (per actor; the block takes the largest); with two classes, the whole of what their
  mix moved the pace;
* the skipped iterations' traffic: the L2 does not hold their lines and the channels do not carry
  their bytes while the other cores run. Where every core fast-forwards alike (blocks of one
  launch), the contention each window measured is the contention of the whole run; the bound
  adds `unmeasured` (a share of the fast-forwarded time) for what differs;
* the L2 a run starts from, left by the skips before it: where a run does an earlier one's work
  at a faster pace, the bound adds the difference for its skipped periods;
* the skipped periods' write-back: the dirty lines the L2 evicts as it takes their lines went
  back to device memory in the skipped time, which the windows paid for only if they evicted
  alike (where the L2 fills part-way, or its old clean lines run out, they did not): the bound
  adds device memory's time for all of them, per launch;
* a shadow's own time: it takes its representative's; the bound adds the spread of the
  representatives' times, what a shadow's transfers cost more, and `AlikeBlocks.grouping`.
The stated bound is checked against the exact engine by tests/test_fast_mode.py.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .program import GM_XFER, MARK, SET, XSET, XWAIT, Instr
from .skipped_lines import TOUCH_CHUNK, kept_periods, new_lines, skipped_touches, touch_together


@dataclass(frozen=True)
class FastSchedule:
    """How much of a run of interchangeable iterations fast mode simulates."""
    warmup_periods: int = 1      # periods before the first window (the pipeline fills)
    tail_periods: int = 0        # periods after the skip (the seam is itself an ordinary step: none needed)
    unmeasured: float = 0.01     # bound added per fast-forwarded cycle (L2 and channel state)
    # more warm-up for a segment after an L2 cut: the write-back the fill starts takes periods to
    # reach its pace (SiLU calls that fill the L2 mid-loop: up to 4 % short with none, within 1 % with 3)
    settle_periods: int = 3

    def split(self, length: int, period: int, settle: bool = False) -> tuple[int, int] | None:
        """(iterations simulated before the skip, iterations skipped) for a run of `length`
        interchangeable iterations (`settle`: the segment follows an L2 cut), or None when the run
        is too short to be worth a skip."""
        head = (self.warmup_periods + 2) * period
        extra = self.settle_periods * period if settle else 0
        skip = length - extra - head - self.tail_periods * period
        skip -= skip % period
        if skip < max(head, 2):          # a short run: its transient would weigh too much
            return None
        return head + extra, skip

    def within_l2(self, skip: int, period: int, windows: list[list[Instr]], l2_bytes: int, line: int,
                  cores: int, l2=None) -> tuple[int, bool]:
        """The skip, cut to a whole number of periods in which the lines the loop newly touches
        (per period: those of window 2 that window 1 did not touch, on every core running it)
        fit in the L2, and whether the cut was at the L2's size. Past that the L2 may change
        regime (it fills, and its evictions start to cost) where the windows cannot see it: the
        rest of the run is measured again. Given the L2 as the loop is recorded (`l2`; for a
        block recorded whole, before it runs), a skip is cut first where its free room runs out:
        the lines new to the loop that it does not hold already, less what the loop's head fills
        (an L2 the head fills gives no skip: its windows straddle the fill); the next segment
        then at the L2's size (the evictions reach lines older than the loop, then the loop's
        own), and from then on the L2 holds the loop's own newest lines (the regime stays)."""
        if len(windows) < 2:
            return skip, True
        new = new_lines(windows, line)
        per_period = new.size * line * max(cores, 1)
        if per_period <= 0:
            return skip, True
        fit, by_size = l2_bytes // per_period, True
        if l2 is not None:
            filling = int(np.count_nonzero(~l2.held(new))) * line * max(cores, 1)
            free = l2.free_bytes()
            if 0 < filling <= free:                   # (else nothing to fill, or full already)
                room = max(free - filling * (self.warmup_periods + 2), 0)
                if room // filling < fit:
                    fit, by_size = room // filling, False
        return min(skip, fit * period), by_size


DEFAULT_SCHEDULE = FastSchedule()


class Meter:
    """One actor's figures at a loop's marks, and what its fast-forwards have added."""
    __slots__ = ("marks", "extra")

    def __init__(self):
        self.marks: dict[int, list[dict]] = {}   # loop token -> its figures at the windows' starts
        self.extra: dict = {}                    # figure -> added by fast-forwards so far

    def virtual(self, figures: dict) -> dict:
        """The figures as the whole run would have them by now (the skips' additions included)."""
        extra = self.extra
        return {k: v + extra.get(k, 0) for k, v in figures.items()}

    def mark(self, token: int, phase: int, skip: int, period: int, figures: dict,
             strata=None) -> Window | None:
        """The actor meets mark `phase` (0, 1: a window starts; 2: the skip) of loop `token`;
        at the skip, its windows (and its figures gain the skipped periods'). With `strata`
        (simulator.kernel.loop.Strata: the windows on periods of two classes), each skipped
        period gains window 2's figures plus window 1's difference from them in proportion to
        how far its class lies from window 2's towards window 1's."""
        now = self.virtual(figures)
        if phase < 2:
            self.marks.setdefault(token, []).append(now)
            return None
        start1, start2 = self.marks.pop(token)
        periods = skip / period
        toward1 = strata.excess / (strata.new1 - strata.new2) if strata is not None else 0.0
        extra = self.extra
        work = []
        for k, v in now.items():
            step = v - start2.get(k, 0)
            add = periods * step
            if toward1:
                add += toward1 * (start2.get(k, 0) - start1.get(k, 0) - step)
            if add:
                extra[k] = extra.get(k, 0) + add
            if step and (k == "executed" or (type(k) is tuple and k[0] == "bytes")):
                work.append((repr(k), step))
        first, second = start2["time"] - start1["time"], now["time"] - start2["time"]
        busy = now.get("busy", 0.0) - start2.get("busy", 0.0)
        if toward1 and periods:
            # the skip's pace is the classes' mix; what the bound takes for a steady state not
            # reached is then the whole of the mix's correction (window 1 might have been a transient)
            shift = toward1 * (first - second) / periods
            busy += toward1 * (start2.get("busy", 0.0) - start1.get("busy", 0.0) - busy) / periods
            # (a window next to a period of another class catches the pipes out of phase: over
            # the two windows they keep one pace, which is what the pipes' spread compares)
            return Window(periods, first, second + shift, busy, tuple(sorted(work)), abs(shift), (first + second) / 2)
        return Window(periods, first, second, busy, tuple(sorted(work)), abs(second - first), second)


@dataclass(frozen=True)
class Window:
    """One actor's two measured windows of a fast-forwarded loop run (cycles per period)."""
    periods: float               # periods skipped
    first: float
    second: float                # what each skipped period was taken to cost
    busy: float                  # the actor's busy cycles in the second window
    work: tuple = ()             # its instructions and bytes per path in the second window
    drift: float = 0.0           # how far the pace may be from a steady state's, per period
    steady: float = 0.0          # what the pipes' spread compares: window 2, or with classes the two windows' mean


def skip_bound(windows: list[Window]) -> tuple[float, Window | None]:
    """A loop run's bound, and the window that sets its pace, from its pipes' windows. In a
    steady state every pipe that works in the loop keeps one pace (the busiest pipe's) and the
    pace repeats: the bound is the skipped periods times the larger of the spread of the working
    pipes' second windows and the change of the busiest pipe's window from the first to the
    second."""
    active = [w for w in windows if w.busy > 0] or windows
    if not active:
        return 0.0, None
    pace = max(active, key=lambda w: w.busy)
    spread = max(w.steady for w in active) - min(w.steady for w in active)
    return pace.periods * max(spread, pace.drift), pace


@dataclass
class FastRecord:
    """What fast mode did in a task: instructions simulated and fast-forwarded, and the bound."""
    skipped: int = 0             # instructions fast-forwarded (estimated from the windows)
    # (launch, core) -> bound cycles of the blocks that core ran in that launch
    bounds: dict[tuple[int, str], float] = field(default_factory=dict)
    fast_forwarded: dict[tuple[int, str], float] = field(default_factory=dict)   # same key: cycles
    # launch -> device memory's cycles for the dirty lines its skips' L2 touches evicted: write-back
    # of the skipped time that the windows' extrapolation may not have paid (the windows may have
    # evicted clean lines, or none, where the skipped periods evicted dirty ones)
    writeback: dict[int, float] = field(default_factory=dict)
    # launch -> what its shadows may be off by: the representatives' spread, excess, grouping
    sampling: dict[int, float] = field(default_factory=dict)
    shadowed: int = 0            # blocks run as a representative's shadow
    shadow_recorded: int = 0     # instructions they recorded (their GM transfers crossed, the rest not run)

    def add_block(self, launch: int, core: str, bound: float, skipped_time: float) -> None:
        key = (launch, core)
        self.bounds[key] = self.bounds.get(key, 0.0) + bound
        self.fast_forwarded[key] = self.fast_forwarded.get(key, 0.0) + skipped_time

    def bound_cycles(self) -> float:
        """The task's bound: per launch, the core with the largest (its blocks run one after
        another; the cores run side by side), its unpaid write-back and its shadows' sampling
        bound, summed over the launches (one after another)."""
        per_core: dict[int, float] = {}
        for (launch, _), b in self.bounds.items():
            per_core[launch] = max(per_core.get(launch, 0.0), b)
        return float(sum(per_core.values()) + sum(self.writeback.values()) + sum(self.sampling.values()))

    def to_dict(self, cycles: float, instructions: int) -> dict:
        """The report's `fast` entry: `instructions` is the task's count, fast-forwarded included."""
        bound = self.bound_cycles()
        simulated = instructions - self.skipped
        return {"simulated_instructions": simulated, "fast_forwarded_instructions": self.skipped,
                "simulated_fraction": simulated / instructions if instructions else 1.0,
                "bound_cycles": bound, "bound_fraction": bound / cycles if cycles else 0.0,
                "shadowed_blocks": self.shadowed, "recorded_instructions": simulated + self.shadow_recorded,
                "exact": bound == 0.0 and self.skipped == 0 and self.shadowed == 0}


class SkipBarrier:
    """A launch's blocks give the L2 their skipped periods' lines together. Their windows run
    side by side, and the skipped periods come after all of them and before any block's tail: a
    block that touched alone would change the L2 under the windows the others are still
    measuring, one that waited for the rest of its own run would touch after its tail. So the
    k-th skip of each block waits until every running block that has a k-th skip has reached it
    (or ended); a block whose skips are not known before it runs (recorded in chunks) is not
    waited for and touches at once.

    The blocks' k-th skips that repeat the same work also share their pace: each skipped period
    is taken to cost the mean of what their windows measured. Side by side, alike blocks differ
    in a window only by where each happened to stand in the shared channels' queues (which core
    carried the write-back of that moment), which evens out over the whole loop; one block's
    window, extrapolated alone, does not (and the launch's slowest block would be the one whose
    window drew the longest wait)."""

    def __init__(self):
        self.blocks: dict[BlockFastForward, list] = {}   # block -> [its skips (None: unknown), arrived]
        self.pending: dict[int, list[tuple]] = {}        # k -> (block, window 1, window 2, periods)
        self.paces: dict[tuple, list[float]] = {}        # (k, the windows' work) -> cycles per period
        self.unpaid_writeback = 0                        # dirty bytes the launch's skips' L2 touches evicted

    def join(self, block: BlockFastForward, skips: int | None) -> None:
        self.blocks[block] = [skips, 0]

    def arrive(self, block: BlockFastForward, windows: tuple, periods: int) -> int:
        """The block's next skip has its GM-moving pipes past its windows; returns which (k)."""
        entry = self.blocks[block]
        k = entry[1]
        entry[1] += 1
        if entry[0] is None:
            self.unpaid_writeback += touch_together(block.l2, block.skipped_lines(windows, periods, 1))
        else:
            self.pending.setdefault(k, []).append((block, windows, periods))
            self._flush_ready()
        return k

    def measured(self, key: tuple, cycles: float) -> None:
        """A block's k-th skip has all its windows: its pace, for the blocks doing the same work."""
        self.paces.setdefault(key, []).append(cycles)

    def pace(self, key: tuple) -> float:
        """The mean cycles per period of the blocks' k-th skips doing the same work, over those
        measured so far (a block that ends before the others have measured takes fewer)."""
        got = self.paces[key]
        return sum(got) / len(got)

    def leave(self, block: BlockFastForward) -> None:
        """The block has ended: it is waited for no more."""
        self.blocks.pop(block, None)
        self._flush_ready()

    def _flush_ready(self) -> None:
        for k in sorted(self.pending):
            if any(skips is not None and skips > k and got <= k for skips, got in self.blocks.values()):
                return
            ready = self.pending.pop(k)
            sources = sum(1 + len(entry[0].shadows) for entry in ready)
            lines = [g for block, windows, periods in ready for g in block.skipped_lines(windows, periods, sources)]
            self.unpaid_writeback += touch_together(ready[0][0].l2, lines)


# ---- one block's fast-forwards (block_run.BlockRun owns one in fast mode) ---------------------
class BlockFastForward:
    """What a block's actors noted at its loops' marks, what their skips added, and the L2
    touches and the bound that follow. The block calls it where an actor meets a mark."""

    def __init__(self, schedule: FastSchedule, gm_path, memory, pipes: tuple[str, ...], cores: int,
                 barrier: SkipBarrier, skips: int | None):
        self.schedule, self.l2, self.memory = schedule, gm_path.l2, memory
        self.pipes, self.cores = pipes, cores
        self.barrier = barrier
        barrier.join(self, skips)
        self.movers: dict[int, set[str]] = {}        # loop run -> pipes with GM transfers not yet past its windows
        self.arrived: set[int] = set()               # loop runs handed to the barrier
        self.scalar = Meter()
        self.pipe_meters: dict[str, Meter] = {p: Meter() for p in pipes}
        self.windows: dict[int, dict[str, Window]] = {}   # loop run -> pipe -> its measured windows
        self.pace_keys: dict[int, tuple] = {}        # loop run -> (k, its work): its pace in the barrier
        self.skip_of: dict[int, int] = {}            # loop run -> which of the block's skips (k)
        self.closed: tuple[float, float, int] | None = None   # totals() once the block has ended
        self.skips_met: dict[int, int] = {}          # loop run -> pipes that have met its skip
        self.marks = 0                               # marks seen (they are no instructions)
        self.shadows: list[ShadowBlock] = []         # alike blocks run as its shadows (their skips too)
        self.sealed = False                          # it has touched the L2 for a skip

    def scalar_mark(self, mark: Instr, clock: float, busy: float) -> None:
        """The scalar unit meets a mark (the block then puts it in every pipe's queue)."""
        self.marks += 1
        run, phase, skip, period, windows = mark.flag
        self.scalar.mark(run, phase, skip, period, {"time": clock, "busy": busy, "issued": mark.index - self.marks},
                         _strata(windows))

    def pipe_mark(self, pipe, mark: Instr, now: float, busy: float, work: float, executed: int) -> None:
        """A pipe (pipe_run.PipeRun) meets a mark in its queue: all before it has been taken."""
        run, phase, skip, period, windows = mark.flag
        window = self.pipe_meters[pipe.pipe].mark(run, phase, skip, period,
                                                  _pipe_figures(pipe, now, busy, work, executed), _strata(windows))
        if window is None:
            return
        self.windows.setdefault(run, {})[pipe.pipe] = window
        met = self.skips_met[run] = self.skips_met.get(run, 0) + 1
        movers = self.movers.get(run)
        if movers is None:
            movers = self.movers[run] = {i.pipe for i in windows[1]}
        movers.discard(pipe.pipe)
        if not movers and run not in self.arrived:
            # every pipe that moves GM data is past the windows (an idle pipe may meet its mark
            # only after the others have run the tail): the launch's SkipBarrier gives the L2
            # the skipped periods' lines once the other blocks' windows are done too
            self.arrived.add(run)
            self.skip_of[run] = self.barrier.arrive(self, windows, skip // period)
        if met == len(self.pipes):
            del self.skips_met[run], self.movers[run]
            self.arrived.discard(run)
            windows = self.windows[run]
            _, pace = skip_bound(list(windows.values()))
            if pace is not None:
                work = tuple(sorted((p, w.work) for p, w in windows.items()))
                key = self.pace_keys[run] = (self.skip_of.pop(run), work)
                self.barrier.measured(key, pace.second)

    def pipe_finished(self, pipe, now: float, busy: float, work: float,
                      executed: int) -> tuple[float, float, float, int]:
        """A pipe's figures with what its skips added: its bytes, L2 lines and path cycles in
        place, and (now, busy, work, executed) returned."""
        extra = self.pipe_meters[pipe.pipe].extra
        for key, v in extra.items():
            if type(key) is tuple:
                what, sub = key
                if what == "l2":
                    pipe.l2_lines[sub] += round(v)
                elif what == "bytes":
                    pipe.block_bytes[sub] = pipe.block_bytes.get(sub, 0) + round(v)
                    pipe.rec.path_bytes[sub] = pipe.rec.path_bytes.get(sub, 0) + round(v)
                else:
                    pipe.path_cycles[sub] = pipe.path_cycles.get(sub, 0.0) + v
        pipe.l2_bytes += round(extra.get("l2_bytes", 0))
        pipe.hbm_bytes += round(extra.get("hbm_bytes", 0))
        return (now, busy + extra.get("busy", 0.0), work + extra.get("work", 0.0),
                executed + round(extra.get("executed", 0)))

    def skipped_traffic(self) -> tuple[list[int], int, int]:
        """What its skips added to its pipes' GM traffic: (L2 lines: read hits, read misses,
        write hits, write misses; bytes through the L2; bytes to device memory)."""
        lines, l2_bytes, hbm_bytes = [0, 0, 0, 0], 0, 0
        for meter in self.pipe_meters.values():
            extra = meter.extra
            for i in range(4):
                lines[i] += round(extra.get(("l2", i), 0))
            l2_bytes += round(extra.get("l2_bytes", 0))
            hbm_bytes += round(extra.get("hbm_bytes", 0))
        return lines, l2_bytes, hbm_bytes

    def scalar_busy(self) -> float:
        """The scalar unit's busy cycles its skips added."""
        return self.scalar.extra.get("busy", 0.0)

    def totals(self) -> tuple[float, float, int]:
        """Once the block has ended: (its bound, its cycles fast-forwarded, the instructions its
        scalar unit fast-forwarded), fixed when first asked (the block's end is taken from it).
        Each skip fast-forwards its periods at the pace the launch's blocks measured for it.
        Its touches' write-back is the launch's (SkipBarrier.unpaid_writeback: one block's touch
        may evict for all, and may run after it has ended)."""
        if self.closed is None:
            bound = skipped_time = 0.0
            earlier: dict[tuple, float] = {}      # a run's work -> the highest pace of the runs before
            for run, windows in self.windows.items():
                b, pace = skip_bound(list(windows.values()))
                if pace is None or not pace.periods:      # (unlike windows: nothing skipped)
                    continue
                key = self.pace_keys.get(run)
                cycles = pace.second if key is None else self.barrier.pace(key)
                # a later run of an earlier one's work at a faster pace may owe it to the L2 skips left
                work = tuple((p, tuple((k, round(v)) for k, v in w.work)) for p, w in sorted(windows.items()))
                best = earlier.get(work, cycles)
                b += pace.periods * max(best - cycles, 0.0)
                earlier[work] = max(best, cycles)
                bound += b
                skipped_time += pace.periods * cycles
            bound += self.schedule.unmeasured * skipped_time
            self.closed = bound, skipped_time, round(self.scalar.extra.get("issued", 0))
        return self.closed

    def skipped_lines(self, windows: tuple, periods: int, sources: int) -> list:
        """What a loop run's skipped periods would have left in the L2, its own and its shadows'
        k-th skips' (the same shape, their own lines): skipped_touches generators, each taking
        its share of a chunk among `sources` (the launch's SkipBarrier hands them to the L2
        together). The dirty lines that evicts went back to device memory during the skipped
        time, which the windows' extrapolation may or may not have paid for (the windows may
        have evicted clean lines, or none): the bound takes them."""
        l2, spans = self.l2, self.memory.spans()
        declared = windows[2]
        keep = declared.kept if declared else kept_periods(windows, periods, l2.capacity * l2.line, l2.line,
                                                           self.cores)
        self.sealed = True                        # (its shadows' skips pair with its own from the first)
        rows = max(TOUCH_CHUNK // max(sources, 1), 1)
        return [skipped_touches(w, p, keep, spans, rows)
                for w, p in [(windows, periods)] + [shadow.skips.popleft() for shadow in self.shadows]]


def _strata(windows) -> tuple | None:
    """A skip mark's strata (its DeclaredTouches'), if any."""
    declared = windows[2] if windows else None
    return declared.strata if declared else None


def _pipe_figures(pipe, now: float, busy: float, work: float, executed: int) -> dict:
    """What a pipe has done so far, as a loop's marks compare it."""
    figures = {"time": now, "busy": busy, "work": work, "executed": executed,
               "l2_bytes": pipe.l2_bytes, "hbm_bytes": pipe.hbm_bytes}
    for i, n in enumerate(pipe.l2_lines):
        figures["l2", i] = n
    for path, n in pipe.block_bytes.items():
        figures["bytes", path] = n
    for path, c in pipe.path_cycles.items():
        figures["cycles", path] = c
    return figures


def cost_shape(instr: Instr) -> tuple:
    """What an instruction costs, without its addresses: its pipe, kind, cycles, path and bytes,
    its flag (a SetFlag's, a barrier's), and for a loop's mark the periods it skips. Two measured
    windows, or two blocks, of the same shapes issue the same work."""
    kind = instr.kind
    flag = instr.flag if SET <= kind < MARK else instr.flag[2:4] if kind == MARK else None
    return instr.pipe, kind, instr.cycles, instr.path, instr.nbytes, instr.chan_bytes, flag


# ---- alike blocks of a launch: representatives simulated, the others their shadows -------------
def program_shape(program: list[Instr]) -> tuple | None:
    """A block's program's cost shapes: blocks of one shape issue the same instructions at the
    same costs, with the same flags and the same loop skips. None for a program that syncs with
    other cores (its shadow could not)."""
    if any(i.kind == XSET or i.kind == XWAIT for i in program):
        return None
    return tuple(map(cost_shape, program))


class ShadowBlock:
    """A block that runs as a shadow of an alike block (its representative) started at the same
    time: its instructions are not simulated, its GM transfers are. Each crosses the L2 and the
    channels when the representative's corresponding transfer does, before it in the channels'
    queue (cross_beside), so the L2 holds the shadows' own lines and the channels carry their
    bytes: the contention the representative meets is the whole launch's. Its skips' lines go
    into the L2 with the representative's. Its time, instructions and busy cycles are the
    representative's."""

    def __init__(self, program: list[Instr], core, block: int, sub: int, start: float, gm_path):
        self.core, self.block, self.sub, self.start = core, block, sub, start
        self.gm_path = gm_path
        self.instructions = len(program)
        self.transfers: dict[str, deque] = {}        # pipe -> its GM transfers, in program order
        self.skips: deque = deque()                  # its skips' ((window 1, window 2, declared), periods)
        for i in program:
            if i.kind == GM_XFER:
                q = self.transfers.get(i.pipe)
                if q is None:
                    q = self.transfers[i.pipe] = deque()
                q.append(i)
            elif i.kind == MARK:
                _, phase, skip, period, windows = i.flag
                if phase == 2:
                    self.skips.append((windows, skip // period))
        self.l2_lines = [0, 0, 0, 0]                 # read hits, read misses, write hits, write misses
        self.l2_bytes = self.hbm_bytes = 0
        self.finished = None                         # the event its representative's end succeeds
        # its transfers' own cycles less its representative's (a line the one finds in the L2 and
        # the other does not): what the bound takes where it is positive
        self.excess = 0.0


def cross_beside(shadows: list[ShadowBlock], pipe: str, instr: Instr, start: float) -> tuple:
    """A representative's GM transfer on `pipe`, at `start`, after its shadows' corresponding ones
    in the channels' queue; GmPath.cross's result for its own. The representative stands last
    among the blocks it stands for, as the slowest of alike blocks does, the one that ends their
    launch (half of the shadows before it and half after left GridSampler calls up to 0.7 % short,
    outside their bound). Each shadow keeps what its own transfer cost more (its own lines in
    the L2 or not)."""
    gm_path = shadows[0].gm_path
    own = gm_path.cross_shadows(shadows, pipe, start)
    result = gm_path.cross(instr, start)
    for shadow, local in zip(shadows, own):
        shadow.excess += local - result[1]
    return result


class AlikeBlocks:
    """A launch's blocks grouped by program shape and start: the first two of a group, then one
    more for every `per_representative` + 1 once those carry their shadows, are simulated
    (representatives); the others run as shadows (ShadowBlock) of the one carrying the fewest.
    Shadows move their data when it does, so a group's transfers reach the channels in one lump,
    where in the exact run each block goes on at its own time: that shifts every block's waits
    (docs/FAST_MODE.md), hence lumps of 3 and `grouping` of the launch in its bound."""

    grouping = 0.03     # 120 shadowed campaign calls against every block simulated: at most 2.8 %

    def __init__(self, per_representative: int = 2):
        self.per_representative = per_representative
        self.groups: dict[tuple, list[list]] = {}    # (shape, start) -> [[representative, its shadows]]

    def representative_for(self, shape: tuple | None, start: float):
        """The representative a block of this shape starting now shadows, or None: it is one."""
        if shape is None:
            return None
        reps = self.groups.get((shape, start))
        if reps is None or len(reps) < 2:
            return None
        entry = min(reps, key=lambda e: e[1])
        rep = entry[0]
        if entry[1] >= self.per_representative or rep.sealed or rep.fast.sealed:
            return None
        entry[1] += 1
        return rep

    def add(self, shape: tuple | None, start: float, run) -> None:
        """`run` (a BlockRun) represents the blocks of its shape and start that come after it."""
        if shape is not None:
            self.groups.setdefault((shape, start), []).append([run, 0])

    def spread(self, launch_cycles: float) -> float:
        """Once the launch has ended, its sampling bound: `grouping` of its cycles if it had
        shadows, plus, over the groups that had them, the largest spread of a group's
        representatives' times (the launch ends with its slowest block, and which of alike blocks
        is slowest is decided by where each stood in the shared queues: cores meet in core order
        within a cycle), plus the most a shadow's transfers cost more than its representative's
        (its own lines missing from the L2 where the representative's were there: a shadow takes
        its representative's time), scaled from what was simulated to the whole block (the
        skipped periods' are its representative's)."""
        worst, shadowed = 0.0, False
        for reps in self.groups.values():
            if len(reps) > 1 and any(n for _, n in reps):     # (shadows need two representatives)
                shadowed = True
                times = [run.end - run.start for run, _ in reps]
                excess = 0.0
                for run, _ in reps:
                    total = run.end - run.start
                    simulated = total - run.fast.totals()[1]
                    scale = total / simulated if simulated > 0 else 1.0
                    excess = max([excess, *(s.excess * scale for s in run.shadows)])
                worst = max(worst, max(times) - min(times) + excess)
        return worst + (self.grouping * launch_cycles if shadowed else 0.0)
