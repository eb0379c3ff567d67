"""The way a core's GM transfer goes: the L2's tags decide which bytes hit and which must be
fetched from device memory (or written back to it by an eviction); the bytes then cross the L2's
chip-wide channel and, for those, device memory's channel. Both channels are shared by every core,
so a transfer's time depends on what the other cores moved before it: the engine asks at the
transfer's turn on the shared clock."""
from __future__ import annotations

from .l2_cache import L2Cache
from .memory import MemoryChannel
from .profile import Profile
from .program import Instr


class GmPath:
    """The L2 and the two channels, with the profile's cost of each data path."""

    def __init__(self, l2: L2Cache, l2_channel: MemoryChannel, hbm: MemoryChannel, profile: Profile):
        self.l2, self.l2_channel, self.hbm = l2, l2_channel, hbm
        self.profile = profile
        self.miss_latency = profile.l2.miss_latency_cycles
        self._miss_cycles: dict[tuple, float] = {}   # (path, bytes) -> a transfer's cycles when it misses
        self._latencies: dict[tuple, float] = {}     # (path, bytes, missed) -> its latency

    def cross(self, instr: Instr, start: float) -> tuple[float, float, int, int, int, int]:
        """The transfer `instr`, starting at `start`: a hit streams at the path's rate within the
        L2's bandwidth; misses and dirty evictions also cross the device-memory channel. Returns
        (when its bytes have passed, its own cycles (without contention), bytes fetched from
        device memory, bytes that crossed device memory's channel, L2 lines hit, lines missed)."""
        l2 = self.l2
        hits, misses = l2.hit_lines, l2.miss_lines
        fetch, evicted = l2.access(instr.gm, instr.gm_write)
        hits, misses = l2.hit_lines - hits, l2.miss_lines - misses
        chan = instr.chan_bytes
        local = instr.cycles
        if fetch:
            local = self._miss_cycles.get((instr.path, chan))
            if local is None:
                local = self._miss_cycles[instr.path, chan] = \
                    self.profile.path(instr.path).cycles(chan, self.miss_latency)
        done = self.l2_channel.reserve(start, chan)[0]
        if start + local > done:
            done = start + local
        hbm, hbm_bytes = self.hbm, 0
        if fetch or evicted or hbm.pending:      # (else reserve() moves nothing)
            hbm.pending += evicted
            end, hbm_bytes = hbm.reserve(start, fetch, chan)
            if end > done:
                done = end
        return done, local, fetch, hbm_bytes, hits, misses

    def latency(self, instr: Instr, missed: bool) -> float:
        """The part of a transfer's own cycles that later transfers on its path overlap (its
        latency, and a miss's)."""
        key = (instr.path, instr.chan_bytes, missed)
        lat = self._latencies.get(key)
        if lat is None:
            lat = self._latencies[key] = self.profile.path(instr.path).latency(
                instr.chan_bytes, self.miss_latency if missed else 0.0)
        return lat
