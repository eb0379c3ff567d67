"""A launch's blocks meet at their skips (SkipBarrier): the L2 takes their skipped periods' lines
together, and alike skips share one pace."""
from __future__ import annotations

from .l2 import touch_together


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
        self.blocks: dict = {}        # block (its BlockFastForward) -> [its skips (None: unknown), arrived]
        self.pending: dict[int, list[tuple]] = {}        # k -> (block, window 1, window 2, periods)
        self.paces: dict[tuple, list[float]] = {}        # (k, the windows' work) -> cycles per period
        self.periods: dict[tuple, float] = {}            # (k, the windows' work) -> most periods skipped
        self.miss_rates: dict[tuple, list[tuple]] = {}   # (k, the windows' work) -> each block's windows'
                                                         # shares of L2 read lines missed
        self.unpaid_writeback = 0                        # bytes the launch's skips' L2 touches wrote back
                                                         # (dirty lines evicted, writes gone through)
        # k -> per touch of k-th skips: (the blocks running as it was taken, what it moved across
        # device memory: fetches, writes gone through, dirty lines evicted (bytes), over how many
        # of the skips' last periods)
        self.crossings: dict[int, list[tuple[frozenset, int, int]]] = {}

    def join(self, block, skips: int | None) -> None:
        self.blocks[block] = [skips, 0]

    def arrive(self, block, windows: tuple, periods: int) -> int:
        """The block's next skip has its GM-moving pipes past its windows; returns which (k)."""
        entry = self.blocks[block]
        k = entry[1]
        entry[1] += 1
        if entry[0] is None:
            self._touch(k, block.l2, [(block, block.skipped_lines(windows, periods, 1))])
        else:
            self.pending.setdefault(k, []).append((block, windows, periods))
            self._flush_ready()
        return k

    def measured(self, key: tuple, cycles: float, periods: float, miss_rates: tuple = (0.0, 0.0)) -> None:
        """A block's k-th skip of `periods` has all its windows: its pace, for the blocks doing the
        same work, and the share of its windows' L2 reads that missed (window 1, window 2)."""
        self.paces.setdefault(key, []).append(cycles)
        self.miss_rates.setdefault(key, []).append(miss_rates)
        self.periods[key] = max(self.periods.get(key, 0.0), periods)

    def crossing(self, block, k: int) -> tuple[int, int]:
        """What the touches of k-th skips taken while the block ran moved across device memory
        (bytes) and the most periods one took: the skips that ran beside the block's own. A
        launch with more blocks than cores runs its later blocks' skips after the first ones
        have ended, not beside them."""
        beside = [(moved, kept) for running, moved, kept in self.crossings.get(k, ()) if block in running]
        return sum(m for m, _ in beside), max((p for _, p in beside), default=0)

    def longest(self, k: int, kept: float) -> float:
        """The most cycles the last `kept` periods of a k-th skip take at the paces measured so
        far: the blocks' k-th skips run side by side, and the longest (the slowest pace, or the
        most periods: a block given more rows) sets how long device memory has for them."""
        return max((min(kept, self.periods[key]) * self.pace(key) for key in self.paces if key[0] == k), default=0.0)

    def _touch(self, k: int, l2, touches: list) -> None:
        """The L2 takes the blocks' k-th skips' periods together (`touches`: (block, (its
        sources, periods kept)) each)."""
        crossed, dirty = touch_together(l2, [g for _, (sources, _) in touches for g in sources])
        self.unpaid_writeback += dirty
        running = frozenset(self.blocks) | {block for block, _ in touches}
        self.crossings.setdefault(k, []).append((running, crossed + dirty, max(p for _, (_, p) in touches)))

    @property
    def moved(self) -> int:
        """The bytes all the launch's skips' touches moved across device memory."""
        return sum(moved for touches in self.crossings.values() for _, moved, _ in touches)

    def pace(self, key: tuple) -> float:
        """The mean cycles per period of the blocks' k-th skips doing the same work, over those
        measured so far (a block that ends before the others have measured takes fewer)."""
        got = self.paces[key]
        return sum(got) / len(got)

    def block_pace(self, key: tuple, first: float, second: float, miss_rates: tuple, share: float) -> float:
        """A block's pace for its k-th skip (its windows `first`, `second`, the share of their L2
        reads that missed `miss_rates`): the shared one (pace), unless the block is off it for a
        reason that lasts, its input evicted from the L2 where the others' is held (or the
        reverse). Then both its windows lie on one side of the shared pace, each by more than
        `share` of it and by more than they differ from each other, the second no nearer than the
        first (not a block still settling towards the others from a start they did not share),
        and its windows' reads miss in the L2 more (or less) often than the others' on the mean,
        by more than `share` of that (not a block whose windows drew long waits in a queue: its
        reads hit as the others' do). Then its own second window."""
        shared = self.pace(key)
        off1, off2 = first - shared, second - shared
        if not (off1 * off2 > 0 and abs(off2) >= abs(off1) > max(share * shared, abs(second - first))):
            return shared
        rates = self.miss_rates[key]
        mean = sum(sum(r) for r in rates) / (2 * len(rates))
        own = sum(miss_rates) / 2
        if (own - mean) * off1 <= 0 or abs(own - mean) <= share * mean:
            return shared
        return second

    def leave(self, block) -> None:
        """The block has ended: it is waited for no more."""
        self.blocks.pop(block, None)
        self._flush_ready()

    def _flush_ready(self) -> None:
        for k in sorted(self.pending):
            if any(skips is not None and skips > k and got <= k for skips, got in self.blocks.values()):
                return
            ready = self.pending.pop(k)
            sources = sum(1 + len(entry[0].shadows) for entry in ready)
            self._touch(k, ready[0][0].l2, [(block, block.skipped_lines(windows, periods, sources))
                                            for block, windows, periods in ready])
