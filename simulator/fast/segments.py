"""How fast mode records a declared loop (simulator.kernel.Loop): each run of interchangeable
iterations split into a warm-up, two measured windows and a skip, in segments where the L2 would
change regime during one skip, with the marks the engine's actors meet."""
from __future__ import annotations

from typing import Iterator

from .l2 import DeclaredTouches, PeriodClasses, first_lost, inflow, kept_periods, skip_within_l2


def fast_forwarded(ctx, items: list, key, period: int, declared_rows_of) -> Iterator:
    """Fast mode: each run of interchangeable iterations, with its middle fast-forwarded (in two
    segments, each measured, where the loop's new lines would fill the L2 during one skip: the
    first up to the fill, the second in the regime after it, its windows a few periods later).
    Where the Loop declares its gathers and their periods read unlike (PeriodClasses), its windows
    move to take a period of each class."""
    n, i = len(items), 0
    l2_spec = ctx.profile.l2
    cores = min(ctx.block_num, ctx.core.kind.count)
    while i < n:
        j = i + 1
        if key is None:
            j = n
        else:
            k = key(items[i])
            while j < n and key(items[j]) == k:
                j += 1
        filled = False          # a segment of this run has filled the L2 with its own lines
        # where the run's new lines outgrow the L2's free room as it begins (`fills`), the iteration
        # at which it first reads a line the L2 held before it began that its own lines have
        # evicted by then: a regime the windows before it do not see
        start, lost, fills = i, None, False
        l2 = ctx.device.l2                # (its free room cuts the first segment only)
        settle = False          # the segment follows an L2 cut: its windows wait for the new regime
        while i < j:
            split = ctx.fast.split(j - i, period, settle)
            if split is None:
                yield from items[i:j]
                i = j
                break
            head, skip = split
            classes = probe = None
            sampled = (head // period, skip // period)     # the periods the classes sample
            if declared_rows_of is not None:
                declared_rows_of.memo.clear()     # (rows are kept for one segment at a time)
                probe = classes = PeriodClasses(declared_rows_of, i, period, l2_spec.line_bytes,
                                                ctx.device.l2, ctx.fast)
                shift = classes.placement(head // period - 2, *sampled)
                if shift is None:
                    classes = None
                elif shift:
                    head, skip = head + shift * period, skip - shift * period
            run = None
            for r in range(head):
                if r == head - 2 * period:
                    run = ctx.loop_mark(None, 0)
                elif r == head - period:
                    ctx.loop_mark(run, 1)
                yield items[i + r]
            if not ctx.windows_alike():     # the key called unlike iterations alike: no skip here
                ctx.loop_mark(run, 2, 0, period)
                yield from items[i + head:j]
                i = j
                break
            if not filled:      # (once filled, the L2 holds this loop's newest lines: no new regime)
                cut, by_size = skip_within_l2(ctx.fast, skip, period, ctx.open_windows[-1], l2_spec.bytes,
                                              l2_spec.line_bytes, cores, l2)
                if l2 is not None and cut < skip and not by_size and declared_rows_of is not None:
                    fills = True
                    lost = first_lost(declared_rows_of, start, j, period, ctx.open_windows[-1], l2, cores)
                elif l2 is not None and cut < skip and probe is not None:     # (full as the loop begins)
                    fills = probe.losing(*sampled, inflow(ctx.open_windows[-1], l2, cores), cores)
                l2 = None
                settle = cut < skip
                filled, skip = cut < skip and by_size, cut
            if lost is not None and i + head + skip > lost >= i + head:     # (a whole number of periods)
                skip, settle, filled = lost - i - head, True, False
            declared = None
            if declared_rows_of is not None and skip:
                kept = kept_periods(ctx.open_windows[-1], skip // period, l2_spec.bytes // l2_spec.line_bytes
                                    * l2_spec.line_bytes, l2_spec.line_bytes, cores if fills else ctx.core.kind.count,
                                    fills)
                strata = classes and classes.strata(head // period - 2, head // period, skip // period)
                declared = DeclaredTouches(declared_rows_of, i + head, skip, period, kept, strata)
            ctx.loop_mark(run, 2, skip, period, declared)
            i += head + skip
