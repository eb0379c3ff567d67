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
windows (SkipBarrier), before any block's tail. A skip stops where the L2 would change regime
(l2.L2Projection, one LRU order of what the L2 holds): at its free room as the loop is recorded
(less what the loop's head fills), then where the lines from before the fill are gone.

A launch's alike blocks on vector-only cores (one program shape, one dispatch sweep) are simulated in a
few representatives; the others are recorded and run as their shadows, whose GM transfers cross
the L2 and the channels beside the representatives' (AlikeBlocks, ShadowBlock, cross_beside).

Where a Loop's declared gathers show its periods in two classes (l2.PeriodClasses), the windows
sit on one period of each, and each skipped period costs window 2's figures plus window 1's
difference from them in the share its class lies towards window 1's.

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
* the skipped periods' write-back: the dirty lines the L2 evicts as it takes their lines (and
  their writes that went through) went back to device memory in the skipped time, which the windows paid for only if they evicted
  alike (where the L2 fills part-way, or its old clean lines run out, they did not): the bound
  adds device memory's time for all of them, per launch;
* a shadow's own time: it takes its representative's; the bound adds the spread of the
  representatives' times, what a shadow's transfers cost more, and `FastSchedule.grouping`.
The stated bound is checked against the exact engine by tests/test_fast_mode.py.
"""
from __future__ import annotations

from .barrier import SkipBarrier
from .block import BlockFastForward
from .l2 import DeclaredTouches, L2Projection, PeriodClasses, Strata, WindowTransfers
from .meter import Meter, Window, skip_bound
from .record import FastRecord
from .schedule import DEFAULT_SCHEDULE, FastSchedule
from .shadows import AlikeBlocks, ShadowBlock, cost_shape, cross_beside, program_shape

__all__ = ["AlikeBlocks", "BlockFastForward", "DEFAULT_SCHEDULE", "DeclaredTouches", "FastRecord", "FastSchedule",
           "L2Projection", "Meter", "PeriodClasses", "ShadowBlock", "SkipBarrier", "Strata", "Window",
           "WindowTransfers", "cost_shape", "cross_beside", "program_shape", "skip_bound"]
