"""A launch's alike blocks: a few representatives simulated, the others run as their shadows, whose
GM transfers cross the L2 and the channels beside the representatives' (AlikeBlocks, ShadowBlock,
cross_beside); cost_shape and program_shape tell alike instructions and blocks."""
from __future__ import annotations

from collections import deque

from ..profile import PIPES
from ..program import GM_XFER, MARK, SET, XSET, XWAIT, Instr
from ..sim_clock import call_at, turn
from .schedule import FastSchedule


def cost_shape(instr: Instr) -> tuple:
    """What an instruction costs, without its addresses: its pipe, kind, cycles, path and bytes,
    its flag (a SetFlag's, a barrier's), and for a loop's mark the periods it skips. Two measured
    windows, or two blocks, of the same shapes issue the same work."""
    kind = instr.kind
    flag = instr.flag if SET <= kind < MARK else (instr.flag.skip, instr.flag.period) if kind == MARK else None
    return instr.pipe, kind, instr.cycles, instr.path, instr.nbytes, instr.chan_bytes, flag


class ProgramShape(tuple):
    """A block's program's cost shapes (program_shape): a tuple that hashes its thousands of shapes
    once, not at every lookup among the launch's groups."""

    def __hash__(self) -> int:
        h = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h

    def __reduce__(self):
        return ProgramShape, (tuple(self),)      # (a hash is per process: not carried across)


def program_shape(program: list[Instr]) -> ProgramShape | None:
    """A block's program's cost shapes: blocks of one shape issue the same instructions at the
    same costs, with the same flags and the same loop skips. None for a program that syncs with
    other cores (its shadow could not)."""
    if any(i.kind == XSET or i.kind == XWAIT for i in program):
        return None
    return ProgramShape(map(cost_shape, program))


class ShadowBlock:
    """A block that runs as a shadow of an alike block (its representative) of the same dispatch
    sweep: its instructions are not simulated, its GM transfers are. Each crosses the L2 and the
    channels as long after the representative's corresponding transfer as the shadow started
    after it (`lag`; none where the sweep's blocks start together, and then before it in the
    channels' queue: cross_beside), so the L2 holds the shadows' own lines and the channels
    carry their bytes: the contention the representative meets is the whole launch's. Its skips'
    lines go into the L2 with the representative's. Its time, instructions and busy cycles are
    the representative's; it ends `lag` after it."""

    def __init__(self, program: list[Instr], core, block: int, sub: int, start: float, gm_path,
                 lag: float = 0.0):
        self.core, self.block, self.sub, self.start = core, block, sub, start
        self.gm_path = gm_path
        self.lag = lag
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
                mark = i.flag
                if mark.phase == 2:
                    self.skips.append((mark.windows, mark.skip // mark.period))
        self.l2_lines = [0, 0, 0, 0]                 # read hits, read misses, write hits, write misses
        self.l2_bytes = self.hbm_bytes = self.hbm_opened = 0
        self.finished = None                         # the event its representative's end succeeds
        # its transfers' own cycles less its representative's (a line the one finds in the L2 and
        # the other does not): what the bound takes where it is positive
        self.excess = 0.0

    def cross_at(self, env, t: float, pipe: str, rep_cycles: float) -> None:
        """Its next GM transfer on `pipe` crosses at `t` (its lag after its representative's,
        whose own cycles were `rep_cycles`), at its core's turn of that cycle."""
        def cross(_wakeup) -> None:
            self.excess += self.gm_path.cross_shadows([self], pipe, env.now)[0] - rep_cycles
        call_at(env, t, turn(self.core.index, PIPES.index(pipe)), cross)


def cross_beside(shadows: list[ShadowBlock], pipe: str, instr: Instr, start: float, env) -> tuple:
    """A representative's GM transfer on `pipe`, at `start`, after its shadows' corresponding ones
    in the channels' queue; GmPath.cross's result for its own. The representative stands last
    among the blocks it stands for, as the slowest of alike blocks does, the one that ends their
    launch (half of the shadows before it and half after left GridSampler calls up to 0.7 % short,
    outside their bound). Each shadow keeps what its own transfer cost more (its own lines in
    the L2 or not). A shadow that started later (staggered blocks) crosses its lag later."""
    gm_path = shadows[0].gm_path
    beside = [s for s in shadows if not s.lag]
    own = gm_path.cross_shadows(beside, pipe, start) if beside else ()
    result = gm_path.cross(instr, start)
    for shadow, local in zip(beside, own):
        shadow.excess += local - result[1]
    if len(beside) < len(shadows):
        for shadow in shadows:
            if shadow.lag:
                shadow.cross_at(env, start + shadow.lag, pipe, result[1])
    return result


class AlikeBlocks:
    """A launch's blocks grouped by program shape and dispatch sweep (the blocks handed out
    without waiting for a core: started together, or one after another where the chip staggers
    them): the first two of a group, then one
    more for every `per_representative` + 1 once those carry their shadows, are simulated
    (representatives); the others run as shadows (ShadowBlock) of the one carrying the fewest.
    Shadows move their data when it does, so a group's transfers reach the channels in one lump,
    where in the exact run each block goes on at its own time: that shifts every block's waits
    (docs/FAST_MODE.md), hence lumps of 3 and `grouping` of the launch in its bound (both the
    schedule's)."""

    def __init__(self, schedule: FastSchedule | None = None, per_representative: int | None = None):
        schedule = schedule or FastSchedule()
        self.grouping = schedule.grouping
        self.per_representative = (schedule.shadows_per_representative if per_representative is None
                                   else per_representative)
        self.groups: dict[tuple, list[list]] = {}    # (shape, sweep) -> [[representative, its shadows]]

    def representative_for(self, shape: tuple | None, sweep: float):
        """The representative a block of this shape handed out in `sweep` shadows, or None: it is one."""
        if shape is None:
            return None
        reps = self.groups.get((shape, sweep))
        if reps is None or len(reps) < 2:
            return None
        entry = min(reps, key=lambda e: e[1])
        rep = entry[0]
        if entry[1] >= self.per_representative or rep.sealed or rep.fast.sealed:
            return None
        entry[1] += 1
        return rep

    def add(self, shape: tuple | None, sweep: float, run) -> None:
        """`run` (a BlockRun) represents the blocks of its shape and sweep that come after it."""
        if shape is not None:
            self.groups.setdefault((shape, sweep), []).append([run, 0])

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
                    simulated = total - run.fast.totals().fast_forwarded
                    scale = total / simulated if simulated > 0 else 1.0
                    excess = max([excess, *(s.excess * scale for s in run.shadows)])
                worst = max(worst, max(times) - min(times) + excess)
        return worst + (self.grouping * launch_cycles if shadowed else 0.0)
