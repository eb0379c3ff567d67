"""One block's fast-forwards (BlockFastForward): what its actors noted at its loops' marks, what
their skips added, and the block's bound (block_run.BlockRun owns one in fast mode)."""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ..program import Instr
from .barrier import SkipBarrier
from .l2 import TOUCH_CHUNK, L2Projection, skipped_touches
from .meter import Meter, Window, skip_bound
from .schedule import FastSchedule

if TYPE_CHECKING:
    from .shadows import ShadowBlock


class BlockTotals(NamedTuple):
    """What a block's skips came to, once it has ended."""
    bound: float                 # cycles the block's time may be off by
    fast_forwarded: float        # cycles its skips added to its time
    skipped_instructions: int    # instructions its scalar unit did not issue


class BlockFastForward:
    """What a block's actors noted at its loops' marks, what their skips added, and the L2
    touches and the bound that follow. The block calls it where an actor meets a mark."""

    def __init__(self, schedule: FastSchedule, gm_path, memory, pipes: tuple[str, ...], cores: int,
                 barrier: SkipBarrier, skips: int | None):
        self.schedule, self.l2, self.memory = schedule, gm_path.l2, memory
        self.hbm = gm_path.hbm
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
        self.closed: BlockTotals | None = None       # totals() once the block has ended
        self.skips_met: dict[int, int] = {}          # loop run -> pipes that have met its skip
        self.marks = 0                               # marks seen (they are no instructions)
        self.shadows: list[ShadowBlock] = []         # alike blocks run as its shadows (their skips too)
        self.sealed = False                          # it has touched the L2 for a skip
        self.window2_start: dict[int, tuple[float, int]] = {}   # loop run -> (time, device memory's bytes) then
        self.delivered: dict[int, float] = {}        # loop run -> device memory's bytes a cycle over window 2
        self.last_pace: float | None = None          # cycles a period of the last skip its pipes measured

    def scalar_mark(self, mark: Instr, clock: float, busy: float) -> float:
        """The scalar unit meets a mark (the block then puts it in every pipe's queue). Returns
        the lead it gains over the pipes at a skip: where it issues a period faster than the
        pipes run one, the skipped periods would have let it run that much further ahead (the
        queues' room caps it, as it does in the simulated periods), so what follows the loop
        finds its instructions issued as the exact engine would. The pipes' pace is that of the
        block's last skip measured, since the scalar unit meets a skip before its pipes do."""
        self.marks += 1
        window = self.scalar.mark(mark.flag, {"time": clock, "busy": busy, "issued": mark.index - self.marks},
                                  _strata(mark.flag.windows))
        if window is None or not window.periods or self.last_pace is None:
            return 0.0
        return window.periods * max(self.last_pace - window.second, 0.0)

    def pipe_mark(self, pipe, mark: Instr, now: float, busy: float, work: float, executed: int) -> None:
        """A pipe (pipe_run.PipeRun) meets a mark in its queue: all before it has been taken."""
        run, skip, period, windows = mark.flag.run, mark.flag.skip, mark.flag.period, mark.flag.windows
        if mark.flag.phase == 1 and run not in self.window2_start:
            self.window2_start[run] = (now, self.hbm.bytes)
        window = self.pipe_meters[pipe.pipe].mark(mark.flag, _pipe_figures(pipe, now, busy, work, executed),
                                                  _strata(windows))
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
            then, moved = self.window2_start.pop(run)
            if now > then:     # (every core's traffic: the rate the channel kept while the windows ran)
                self.delivered[run] = (self.hbm.bytes - moved) / (now - then)
            self.skip_of[run] = self.barrier.arrive(self, windows, skip // period)
            # the pace of the pipes past their windows (an idle pipe's window may come much later)
            _, pace = skip_bound(list(self.windows[run].values()))
            if pace is not None:
                self.last_pace = pace.second
        if met == len(self.pipes):
            del self.skips_met[run], self.movers[run]
            self.arrived.discard(run)
            windows = self.windows[run]
            _, pace = skip_bound(list(windows.values()))
            if pace is not None:
                work = tuple(sorted((p, w.work) for p, w in windows.items()))
                key = self.pace_keys[run] = (self.skip_of.pop(run), work)
                self.barrier.measured(key, pace.second, pace.periods, _miss_rates(windows.values()))

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

    def totals(self) -> BlockTotals:
        """Once the block has ended: its BlockTotals, fixed when first asked (the block's end is taken from it).
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
                cycles = pace.second if key is None else self.barrier.block_pace(
                    key, pace.first, pace.second, _miss_rates(windows.values()), self.schedule.systematic_share)
                skipped_time += self._behind_device_memory(key, cycles, pace.periods, self.delivered.get(run, 0.0))
                # a later run of an earlier one's work at a faster pace may owe it to the L2 skips left
                work = tuple((p, tuple((k, round(v)) for k, v in w.work)) for p, w in sorted(windows.items()))
                best = earlier.get(work, cycles)
                b += pace.periods * max(best - cycles, 0.0)
                earlier[work] = max(best, cycles)
                bound += b
                skipped_time += pace.periods * cycles
            bound += self.schedule.unmeasured * skipped_time
            self.closed = BlockTotals(bound, skipped_time, round(self.scalar.extra.get("issued", 0)))
        return self.closed

    def _behind_device_memory(self, key: tuple | None, cycles: float, periods: float, delivered: float) -> float:
        """Cycles a skip's periods add beyond its pace (`cycles` a period) where device memory
        could not move what the L2 says they moved: the skips that ran beside it last, over the
        periods their touches took, at least those bytes at device memory's rate, or at the rate
        the channel kept over window 2 (`delivered`, bytes a cycle) where that was higher (a
        transfer reserves the channel as it starts: over a short window its bytes may run ahead
        of the rate), however long the longest of them was paced to take. A loop that comes to evict
        dirty lines where its windows evicted clean ones, on a full L2, or to miss on input the
        L2 held as it began, slows."""
        if key is None:
            return 0.0
        moved, kept = self.barrier.crossing(self, key[0])
        if not kept or not moved:
            return 0.0
        rate = max(self.hbm.bytes_per_cycle, delivered)
        return max(moved / rate - max(min(kept, periods) * cycles, self.barrier.longest(key[0], kept)), 0.0)

    def skipped_lines(self, windows: tuple, periods: int, sources: int) -> tuple[list, int]:
        """What a loop run's skipped periods would have left in the L2, its own and its shadows'
        k-th skips' (the same shape, their own lines): skipped_touches generators, each taking
        its share of a chunk among `sources` (the launch's SkipBarrier hands them to the L2
        together). The dirty lines that evicts went back to device memory during the skipped
        time, which the windows' extrapolation may or may not have paid for (the windows may
        have evicted clean lines, or none): the cycles take them where device memory could not
        have carried them (_behind_device_memory), the bound takes them all. Returns (the
        generators, how many of the last skipped periods they touch)."""
        l2, spans = self.l2, self.memory.spans()
        declared = windows[2]
        keep = declared.kept if declared else L2Projection(windows[:2], l2.capacity * l2.line, l2.line,
                                                           self.cores).kept(periods, self.cores)
        self.sealed = True                        # (its shadows' skips pair with its own from the first)
        rows = max(TOUCH_CHUNK // max(sources, 1), 1)
        chunk_bytes = l2.capacity * l2.line // l2.POOL // max(sources, 1)
        return ([skipped_touches(w, p, keep, spans, rows, chunk_bytes)
                 for w, p in [(windows, periods)] + [shadow.skips.popleft() for shadow in self.shadows]], keep)


def _miss_rates(windows) -> tuple[float, float]:
    """The share of a loop run's L2 read lines that missed, over its pipes' windows: (window 1, window 2)."""
    windows = list(windows)
    return tuple(sum(w.misses[i] for w in windows) / max(sum(w.reads[i] for w in windows), 1) for i in (0, 1))


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
