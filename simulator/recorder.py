"""Recording a block's program: the context a kernel body runs in (`BlockContext`: the core, the
block, the program so far, and what the body may see of the device, `DeviceView`; the kernel
language finds it with `current_context`), recorded in one go on the engine's thread
(`record_whole`) or, for a body that outgrows a chunk, on a helper thread a chunk at a time
(`ProgramRecorder`).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .core_state import CoreState, Group
from .enums import Unwind
from .fast import FastSchedule, WindowTransfers, cost_shape
from .memory import DeviceMemory
from .profile import Profile
from .program import MARK, Instr, LoopMark, Rows, caller_line

if TYPE_CHECKING:
    from .l2_cache import L2Cache


@dataclass(frozen=True)
class DeviceView:
    """What a kernel body may read of the device it records for (the Device makes one)."""
    profile: Profile
    memory: DeviceMemory      # GM: functional effects read and write its bytes
    functional: bool          # effects run (else timing only)
    tracing: bool             # instructions remember their source line
    scalar_cost: dict[str, tuple[float, ...]]   # pipe -> the scalar unit's cycles per API call, by kind
    memo: dict                # the kernel language's memo of what depends on the profile alone
    fast: FastSchedule | None = None   # fast mode: how declared loops are fast-forwarded
    l2: L2Cache | None = None          # fast mode: the L2, read as a loop is recorded


class BlockContext:
    """What a kernel body sees while it records one block: the core, the block index and count,
    the program being recorded and the launch's functional flag. simulator.kernel reads it."""

    def __init__(self, device: DeviceView, core: CoreState, block_idx: int, block_num: int,
                 group: Group | None = None, sub_block: int = 0):
        self.device, self.core = device, core
        self.profile = device.profile
        self.block_idx, self.block_num = block_idx, block_num
        self.group, self.sub_block = group, sub_block
        self.program: list[Instr] = []   # recorded, not yet taken by the scalar unit
        self.taken = 0                    # instructions the scalar unit has taken so far
        self.recorder: "ProgramRecorder | None" = None
        self.functional = device.functional
        self.pipe_alloc: Any = None   # the block's TPipe (simulator.kernel)
        self.atomic = None            # SetAtomicAdd's dtype: GM writes then add instead of store
        self.scalar_debt = 0.0        # ScalarWork's cycles, spent before the next instruction issues
        self.limit = ProgramRecorder.CHUNK      # instructions held before a pause (or a re-record)
        self.weight = 0                         # GM ranges and written spans held (same purpose)
        self.ranges = ProgramRecorder.RANGES
        self.pipes = self.core.kind.pipes
        self.costs_of = {p: device.scalar_cost[p] for p in self.pipes}   # pipe -> cycles by kind
        # a DataCopy between UB tensors runs on PIPE_V but is a copy call (a burst descriptor), not a vector one
        self.ub_copy_call = device.profile.scalar.cycles_per_call["copy"]
        self.memo = device.memo
        self.block_memo: dict = {}    # what the kernel language works out once per block
        self.lines = device.tracing           # remember each instruction's source line (for the report)
        self.fast = device.fast               # fast mode's schedule (None in the exact modes)
        self.loops = 0                        # fast-forwarded loop runs so far (each mark names its run)
        self.marks = 0                        # MARK instructions emitted so far
        self.skips = 0                        # ... of which skips (a SkipBarrier waits for them)
        # fast mode: per loop run being measured, its windows' GM transfers so far (innermost last)
        self.open_windows: list[list[list[Instr]]] = []
        # ... and what each of its windows' instructions costs (windows_alike() compares them)
        self.open_shapes: list[list[list[tuple]]] = []

    def keep_for_windows(self, instr: Instr) -> None:
        """Fast mode: an instruction inside the windows being measured: its cost's shape (the
        skip needs two alike windows) and, for a GM transfer, the instruction itself (the skip
        extrapolates their addresses, and cuts where their new lines would fill the L2)."""
        shape = cost_shape(instr)
        for shapes in self.open_shapes:
            shapes[-1].append(shape)
        gm = instr.gm
        if (gm.count if type(gm) is Rows else gm):      # (no Rows.__len__ call)
            for windows in self.open_windows:
                windows[-1].append(instr)

    def windows_alike(self) -> bool:
        """Fast mode: whether the innermost loop run's two windows issued the same instructions
        at the same costs (the same flags), as interchangeable iterations must. A loop whose `key`
        called unlike iterations alike is not fast-forwarded there."""
        first, second = self.open_shapes[-1]
        return first == second

    def loop_mark(self, run: int | None, phase: int, skip: int = 0, period: int = 1, declared=None) -> int:
        """Fast mode: mark `phase` of loop run `run` (0, 1: a window starts; 2: `skip`
        iterations are fast-forwarded here). Phase 0 starts a run: pass None, get its number.
        The GM transfers of each window are kept: the skip extrapolates their addresses, or
        takes the skipped iterations' gathers and scatters from `declared` (DeclaredTouches)."""
        if run is None:
            self.loops += 1
            run = self.loops
        windows = None
        if phase == 0:
            self.open_windows.append([WindowTransfers()])   # [window 1] (then [window 1, window 2])
            self.open_shapes.append([[]])
        elif phase == 1:
            self.open_windows[-1].append(WindowTransfers())
            self.open_shapes[-1].append([])
        else:
            windows = (*self.open_windows.pop(), declared)       # (window 1, window 2, declared)
            self.open_shapes.pop()
            self.skips += 1
        self.marks += 1
        self.emit(Instr("PIPE_S", "LoopMark", MARK, flag=LoopMark(run, phase, skip, period, windows),
                        operands=f"loop run {run}, phase {phase}"))
        return run

    def emit(self, instr: Instr) -> Instr:
        """Append `instr` to the block's program (its scalar cost, index and source line set); a
        full chunk hands the program to the engine (or, recorded in one go, starts again)."""
        costs = self.costs_of.get(instr.pipe)      # the scalar unit's cycles per kind, on this core's pipes
        if costs is None:
            raise self.core.fault(instr.pipe, instr, f"this core kind ({self.core.kind_name}) has no {instr.pipe}")
        instr.scalar = costs[instr.kind] if instr.path != "UB_UB" else self.ub_copy_call
        if self.scalar_debt:
            instr.scalar += self.scalar_debt
            self.scalar_debt = 0.0
        if self.lines and instr.line is None:      # (a run of copies names the line that made it)
            instr.line = caller_line()
        program = self.program
        instr.index = self.taken + len(program)
        program.append(instr)
        if self.open_windows:                      # fast mode: a measured window's instruction
            self.keep_for_windows(instr)
        # what the chunk holds: instructions, and their byte ranges (a strided copy has thousands)
        gm = instr.gm
        self.weight += (gm.count if type(gm) is Rows else len(gm)) + len(instr.writes)
        if len(program) >= self.limit or self.weight >= self.ranges:
            if self.recorder is None:
                raise _TooLong()
            self.recorder.pause()
        return instr


class CountingContext(BlockContext):
    """A BlockContext that records nothing: it counts the instructions a block's body emits
    (the same checks run), so the size of a launch is known before it is run."""

    def __init__(self, device: DeviceView, core: CoreState, block_idx: int, block_num: int,
                 group: Group | None = None, sub_block: int = 0):
        super().__init__(device, core, block_idx, block_num, group, sub_block)
        self.count = 0

    def emit(self, instr: Instr) -> Instr:
        if instr.pipe not in self.core.kind.pipes:
            raise self.core.fault(instr.pipe, instr,
                                  f"this core kind ({self.core.kind_name}) has no {instr.pipe}")
        instr.index = self.count
        self.count += 1
        if self.open_windows:                      # fast mode: the skip's checks read them
            self.keep_for_windows(instr)
        return instr


active_block = threading.local()        # .ctx: the block whose body this thread is running


def current_context() -> BlockContext:
    """The block whose kernel body is running on this thread (what an instruction is emitted to)."""
    ctx = getattr(active_block, "ctx", None)
    if ctx is None:
        raise RuntimeError("kernel instructions can only be issued inside a kernel body that the "
                           "machine is running (see docs/KERNELS.md)")
    return ctx


def count_instructions(ctx: CountingContext, body: Callable[..., None], args: tuple) -> int:
    """The instructions the body emits for ctx's block (nothing is kept)."""
    active_block.ctx = ctx
    try:
        _run_body(ctx, body, args)
    finally:
        active_block.ctx = None
    return ctx.count


class _Abandoned(Unwind):
    """Unwinds a kernel body whose block the engine has given up on (a fault, a deadlock)."""


class _TooLong(Unwind):
    """Unwinds a kernel body recorded in one go that outgrew a chunk (it is recorded again by a
    ProgramRecorder)."""


class _Helpers:
    """Reusable threads for ProgramRecorder (a recording may wait a long time for its turn)."""

    def __init__(self):
        self.jobs: SimpleQueue = SimpleQueue()
        self.idle = 0
        self.lock = threading.Lock()

    def run(self, job: Callable[[], None]) -> None:
        with self.lock:
            spawn = self.idle == 0          # else an idle thread takes the job
            if not spawn:
                self.idle -= 1
        self.jobs.put(job)
        if spawn:
            threading.Thread(target=self._loop, name="ascend-sim recorder", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.jobs.get()()
            with self.lock:
                self.idle += 1


_HELPERS = _Helpers()


def _fresh_helpers_after_fork() -> None:
    """A forked child (a sweep's worker process) has none of the parent's helper threads."""
    global _HELPERS
    _HELPERS = _Helpers()


os.register_at_fork(after_in_child=_fresh_helpers_after_fork)


def _run_body(ctx: BlockContext, body: Callable[..., None], args: tuple) -> None:
    """The kernel body, then its TPipe's end (which consumes the flags FreeTensor left set)."""
    body(*args)
    if ctx.pipe_alloc is not None:
        ctx.pipe_alloc.Destroy()


def record_whole(ctx: BlockContext, body: Callable[..., None], args: tuple) -> list[Instr] | None:
    """Run a block's kernel body on this thread and return its program, or None if it outgrew
    ProgramRecorder.CHUNK instructions (then a ProgramRecorder records it again, in chunks)."""
    active_block.ctx = ctx
    try:
        _run_body(ctx, body, args)
    except _TooLong:
        # drop the partial program now: the context is in a cycle with its TPipe, and a chunk of
        # instructions left in it would wait for the collector (a full chunk for every long block)
        ctx.program = []
        ctx.weight = 0
        ctx.pipe_alloc = None
        return None
    finally:
        active_block.ctx = None
    program, ctx.program = ctx.program, []      # effects that close over ctx make no cycle
    return program


class ProgramRecorder:
    """Runs a long block's kernel body on a helper thread, a chunk of instructions at a time: the
    scalar unit takes a chunk and issues it while the body waits, so a long kernel never holds its
    whole program in memory (a program grows by about a kilobyte per instruction, and some blocks
    issue millions). The engine and the body take strict turns (one always waits for the other),
    so recording is exactly as deterministic as one plain call, and a block's program is the same
    instructions either way. Most blocks are shorter than a chunk and are recorded in one go on
    the engine's thread (record_whole), which spares them the two thread handoffs of a turn; a
    body that outgrows a chunk is unwound and recorded again here, so kernel bodies must not
    change anything outside their block while they record (none of ours does)."""

    CHUNK = 8192
    # A recorded long block holds at most STEP instructions: every running block holds its chunk
    # at once, so the peak is (running blocks) x STEP x ~1 KB. A turn's handoffs cost about as
    # much as recording a thousand instructions, a small share per instruction at this size.
    STEP = 1024
    # ... and at most RANGES GM ranges and written spans: a strided copy carries one per row,
    # thousands per instruction, so a chunk's instructions alone do not bound its memory.
    RANGES = 32768

    def __init__(self, ctx: BlockContext, body: Callable[..., None], args: tuple):
        self.ctx, self.body, self.args = ctx, body, args
        ctx.limit = min(self.STEP, self.CHUNK)
        # binary semaphores; a turn is given by releasing the other side's lock
        self.body_turn, self.engine_turn = threading.Lock(), threading.Lock()
        self.body_turn.acquire()
        self.engine_turn.acquire()
        self.started = self.finished = self.abandoned = False
        self.error: BaseException | None = None
        ctx.recorder = self

    def _record(self) -> None:
        active_block.ctx = self.ctx
        try:
            if not self.abandoned:
                _run_body(self.ctx, self.body, self.args)
        except _Abandoned:
            pass
        except BaseException as e:           # raised again on the engine's side, in chunks()
            self.error = e
        finally:
            active_block.ctx = None
            self.finished = True
            self.engine_turn.release()

    def pause(self) -> None:
        """Body side: a chunk is full; wait until the scalar unit wants more."""
        self.engine_turn.release()
        self.body_turn.acquire()
        if self.abandoned:
            raise _Abandoned()

    def chunks(self) -> Iterator[list[Instr]]:
        """Engine side: the program, a chunk at a time, as the body records it."""
        ctx = self.ctx
        while not self.finished:
            if self.started:
                self.body_turn.release()
            else:                                # the body's first turn starts it
                self.started = True
                _HELPERS.run(self._record)
            self.engine_turn.acquire()
            if self.error is not None:
                raise self.error
            chunk, ctx.program = ctx.program, []
            ctx.weight = 0
            ctx.taken += len(chunk)
            yield chunk
        ctx.recorder = None                  # no cycle left between the block and its recorder

    def abandon(self) -> None:
        """Engine side: unwind the body (its block will never run on)."""
        if self.started and not self.finished:
            self.abandoned = True
            self.body_turn.release()
            self.engine_turn.acquire()
