"""Fast mode as the engine meets it: `FastMode` (Device.fast_mode in fast mode) opens a
`LaunchFastForward` per launch, which makes each block's `BlockFastForward`, picks the blocks that
run as shadows and books what the blocks' skips and shadows came to. `EXACT` is the same hooks for
the exact modes, doing nothing: a launch, a block and a pipe never ask which mode they run in
(only the Device, as it is made, picks its hooks and drops the sanitizer in fast mode)."""
from __future__ import annotations

from .barrier import SkipBarrier
from .block import BlockFastForward, BlockTotals
from .record import FastRecord
from .schedule import FastSchedule
from .shadows import AlikeBlocks, ShadowBlock, program_shape


class ExactBlock:
    """A block's fast-forwards in the exact modes: none."""
    NONE = BlockTotals(0.0, 0.0, 0)

    def totals(self) -> BlockTotals:
        return self.NONE

    def scalar_busy(self) -> float:
        return 0.0

    def pipe_finished(self, pipe, now: float, busy: float, work: float,
                      executed: int) -> tuple[float, float, float, int]:
        return now, busy, work, executed


class ExactLaunch:
    """A launch in the exact modes: every block simulated, nothing fast-forwarded."""
    BLOCK = ExactBlock()

    def block(self, device, pipes: tuple[str, ...], cores: int, skips: int | None) -> ExactBlock:
        return self.BLOCK

    def shadow_of(self, program, core, b: int, sub: int, start: float, gm_path, sweep: float):
        """No block runs as a shadow: (no shape, no representative, no shadow)."""
        return None, None, None

    def add(self, run, shape, sweep: float) -> None:
        pass

    def block_ended(self, run, rec, launch: int, core) -> None:
        pass

    def shadow_ended(self, rep, shadow, rec, launch: int, core) -> None:
        pass

    def behind_device_memory(self, cycles: float, moved: int, opened: int, hbm_bytes_per_cycle: float) -> float:
        return 0.0

    def ended(self, rec, launch: int, launch_cycles: float, hbm_bytes_per_cycle: float) -> None:
        pass


class ExactMode:
    """The exact modes (functional, timing): every launch an ExactLaunch."""
    LAUNCH = ExactLaunch()

    def launch(self, alike_blocks: bool) -> ExactLaunch:
        return self.LAUNCH


EXACT = ExactMode()


class LaunchFastForward:
    """One launch in fast mode: its blocks' SkipBarrier and, where alike blocks may shadow a
    representative (`alike_blocks`), their AlikeBlocks."""

    def __init__(self, schedule: FastSchedule, alike_blocks: bool):
        self.schedule = schedule
        self.barrier = SkipBarrier()
        self.alike = AlikeBlocks(schedule) if alike_blocks else None

    def block(self, device, pipes: tuple[str, ...], cores: int, skips: int | None) -> BlockFastForward:
        return BlockFastForward(self.schedule, device.gm_path, device.memory, pipes, cores, self.barrier, skips)

    def shadow_of(self, program, core, b: int, sub: int, start: float, gm_path, sweep: float):
        """(its program shape, the representative, the ShadowBlock) if this block, whose program
        was recorded whole (`program`, else None) and starts at `start`, runs as a shadow of an
        alike block of its dispatch `sweep`; else (its shape or None, None, None)."""
        if self.alike is None or program is None:
            return None, None, None
        shape = program_shape(program)
        rep = self.alike.representative_for(shape, sweep)
        if rep is None:
            return shape, None, None
        return shape, rep, ShadowBlock(program, core, b, sub, start, gm_path, start - rep.start)

    def add(self, run, shape, sweep: float) -> None:
        """`run` (a BlockRun, its program of `shape`) represents the alike blocks of its dispatch
        sweep placed after it."""
        if self.alike is not None:
            self.alike.add(shape, sweep, run)

    def block_ended(self, run, rec, launch: int, core) -> None:
        """A simulated block has ended: its instructions counted as the whole run would have them
        (its marks are none), its bound and fast-forwarded cycles booked to its launch and core."""
        if rec.fast is None:
            rec.fast = FastRecord()
        run.fast.barrier.leave(run.fast)
        totals = run.fast.totals()
        rec.instructions += totals.skipped_instructions - run.fast.marks
        rec.fast.skipped += totals.skipped_instructions
        rec.fast.add_block(launch, core.name, totals.bound, totals.fast_forwarded)

    def shadow_ended(self, rep, shadow: ShadowBlock, rec, launch: int, core) -> None:
        """A shadow has ended with its representative `rep`: the same booking, with the
        instructions the shadow recorded and did not run."""
        totals = rep.fast.totals()
        if rec.fast is None:
            rec.fast = FastRecord()
        rec.instructions += totals.skipped_instructions - rep.fast.marks
        rec.fast.skipped += shadow.instructions - rep.fast.marks + totals.skipped_instructions
        rec.fast.shadowed += 1
        rec.fast.shadow_recorded += shadow.instructions - rep.fast.marks
        rec.fast.add_block(launch, core.name, totals.bound, totals.fast_forwarded)

    def behind_device_memory(self, cycles: float, moved: int, opened: int, hbm_bytes_per_cycle: float) -> float:
        """Cycles the launch's last block ends later than its blocks' totals say, where device
        memory could not have moved in `cycles` what the launch moved across it (`moved`: bytes
        its simulated transfers reserved there) and what its skips' L2 touches say theirs moved.
        Each skip's own floor (BlockFastForward._behind_device_memory) sees the touches of its
        k-th skips only; device memory is shared by all of them, and by the windows of the
        blocks' later runs, measured while the others were skipping. `opened`: the channel's time
        opening the simulated transfers' pieces, in bytes' worth; the skips' bytes open as many a
        byte."""
        skipped = self.barrier.moved
        if opened:      # (opened > 0 only where simulated transfers fetched: moved > 0; a launch whose
            # simulated transfers all hit in the L2 has no rate to open its skips' bytes at, and adds none)
            skipped += self.barrier.moved * opened / moved
        return max((moved + opened + skipped) / hbm_bytes_per_cycle - cycles, 0.0)

    def ended(self, rec, launch: int, launch_cycles: float, hbm_bytes_per_cycle: float) -> None:
        """The launch has ended: its shadows' sampling bound and its skips' unpaid write-back."""
        if self.alike is not None and rec.fast is not None:
            rec.fast.sampling[launch] = self.alike.spread(launch_cycles)
        if self.barrier.unpaid_writeback:     # (its touches are all done now)
            rec.fast.writeback[launch] = self.barrier.unpaid_writeback / hbm_bytes_per_cycle


class FastMode:
    """Fast mode's hooks for a device running `schedule`."""

    def __init__(self, schedule: FastSchedule):
        self.schedule = schedule

    def launch(self, alike_blocks: bool) -> LaunchFastForward:
        return LaunchFastForward(self.schedule, alike_blocks)
