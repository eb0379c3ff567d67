"""The way a core's GM transfer goes: the L2's tags decide which bytes hit and which must be
fetched from device memory (or written back to it by an eviction); the bytes then cross the L2's
chip-wide channel and, for those, device memory's channel. Both channels are shared by every core,
so a transfer's time depends on what the other cores moved before it: the engine asks at the
transfer's turn on the shared clock."""
from __future__ import annotations

from .l2_cache import L2Cache
from .memory import MemoryChannel
from .profile import Profile
from .program import Instr, Rows


class GmPath:
    """The L2 and the two channels, with the profile's cost of each data path."""

    def __init__(self, l2: L2Cache, l2_channel: MemoryChannel, hbm: MemoryChannel, profile: Profile):
        self.l2, self.l2_channel, self.hbm = l2, l2_channel, hbm
        self.profile = profile
        self.miss_latency = profile.l2.miss_latency_cycles
        self._miss_cycles: dict[tuple, float] = {}   # (path, bytes) -> a transfer's cycles when it misses
        self._latencies: dict[tuple, float] = {}     # (path, bytes, missed) -> its latency
        self.opening_bytes = profile.device_memory.piece_overhead_bytes

    def cross(self, instr: Instr, start: float) -> tuple[float, float, int, int, int, int, int]:
        """The transfer `instr`, starting at `start`: a hit streams at the path's rate within the
        L2's bandwidth; misses also cross the device-memory channel, and so does write-back (dirty
        lines evicted, writes gone through), which each transfer carries up to its own size of. Returns
        (when its bytes have passed, its own cycles (without contention), bytes fetched from
        device memory, bytes that crossed device memory's channel, L2 lines hit, lines missed, and
        the bytes' worth of channel time device memory spent opening the pieces it fetched)."""
        fetch, evicted, hits, misses, local = self._through_l2(instr)
        chan = instr.chan_bytes
        done = self.l2_channel.reserve(start, chan)[0]
        if start + local > done:
            done = start + local
        hbm, hbm_bytes, opened = self.hbm, 0, 0
        if fetch or evicted or hbm.pending:      # (else reserve() moves nothing)
            hbm.pending += evicted
            opened = self._opening(instr, misses) if fetch and self.opening_bytes else 0
            end, hbm_bytes = hbm.reserve(start, fetch, chan, opened)
            if end > done:
                done = end
        return done, local, fetch, hbm_bytes, hits, misses, opened

    def _opening(self, instr: Instr, missed_lines: int) -> int:
        """Device memory's cost, in bytes of its channel, of starting the pieces a fetch reads: one
        per piece of the transfer that starts afresh (not where the piece before it ended), and of
        those only the ones whose lines the L2 held nothing of (a line partly held was opened when
        its other sectors came)."""
        g = instr.gm
        if type(g) is Rows:
            pieces = 1 if g.count <= 1 or g.pitch == g.n else g.count
        else:
            pieces, end = 0, None
            for addr, n in sorted(g):
                if n > 0:
                    pieces += end != addr
                    end = addr + n
        return self.opening_bytes * (pieces if instr.l2_bypass else min(pieces, missed_lines))

    def _through_l2(self, instr: Instr) -> tuple[int, int, int, int, float]:
        """The L2's part of a transfer: (bytes to fetch, bytes written back: dirty lines evicted
        and a write gone through; lines hit, lines missed, its own cycles: the path's, or a
        miss's)."""
        l2 = self.l2
        if instr.l2_bypass:             # not cached: every byte crosses device memory, the tags untouched
            return instr.chan_bytes, 0, 0, 0, self._missed(instr)
        hits, misses = l2.hit_lines, l2.miss_lines
        fetch, evicted = l2.access(instr.gm, instr.gm_write)
        local = instr.cycles
        if fetch:
            local = self._missed(instr)
        return fetch, evicted, l2.hit_lines - hits, l2.miss_lines - misses, local

    def _missed(self, instr: Instr) -> float:
        """A transfer's own cycles when its bytes come from (or go to) device memory."""
        key = (instr.path, instr.chan_bytes)
        local = self._miss_cycles.get(key)
        if local is None:
            local = self._miss_cycles[key] = self.profile.path(instr.path).cycles(instr.chan_bytes, self.miss_latency)
        return local

    def cross_shadows(self, shadows: list, pipe: str, start: float) -> list[float]:
        """Each shadow's next GM transfer on `pipe`, at `start`, in order (fast mode: cross()'s
        work for a shadow, which needs no end time); returns each one's own cycles."""
        l2_channel, hbm = self.l2_channel, self.hbm
        own = []
        for shadow in shadows:
            instr = shadow.transfers[pipe].popleft()
            fetch, evicted, hits, misses, local = self._through_l2(instr)
            chan = instr.chan_bytes
            l2_channel.reserve(start, chan)
            hbm_bytes = 0
            if fetch or evicted or hbm.pending:
                hbm.pending += evicted
                opened = self._opening(instr, misses) if fetch and self.opening_bytes else 0
                hbm_bytes = hbm.reserve(start, fetch, chan, opened)[1]
                shadow.hbm_opened += opened
            w = 2 if instr.gm_write else 0
            lines = shadow.l2_lines
            lines[w] += hits
            lines[w + 1] += misses
            shadow.l2_bytes += chan
            shadow.hbm_bytes += hbm_bytes
            own.append(local)
        return own

    def latency(self, instr: Instr, missed: bool) -> float:
        """The part of a transfer's own cycles that later transfers on its path overlap (its
        latency, and a miss's)."""
        key = (instr.path, instr.chan_bytes, missed)
        lat = self._latencies.get(key)
        if lat is None:
            lat = self._latencies[key] = self.profile.path(instr.path).latency(
                instr.chan_bytes, self.miss_latency if missed else 0.0)
        return lat
