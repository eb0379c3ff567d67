"""Device memory (GM): allocations in a device address space, the shared L2 cache in front of it,
and the chip-wide channels (L2 and device memory) that all cores' GM traffic shares."""
from __future__ import annotations

import bisect
from collections import OrderedDict

import numpy as np

ALLOC_ALIGN = 512          # aclrtMalloc returns 512-byte aligned addresses in our model
BASE_ADDRESS = 0x12C0_0000_0000


class Allocation:
    __slots__ = ("addr", "size", "data")

    def __init__(self, addr: int, size: int, data: np.ndarray | None):
        self.addr, self.size, self.data = addr, size, data


class DeviceMemory:
    """Device memory of the profile's capacity. In functional mode each allocation is backed by a
    numpy byte array; in timing-only mode nothing is backed (no data moves)."""

    def __init__(self, capacity: int, functional: bool):
        self.capacity = capacity
        self.functional = functional
        self.used = 0
        self._next = BASE_ADDRESS
        self._bases: list[int] = []
        self._allocs: dict[int, Allocation] = {}

    def malloc(self, size: int) -> int | None:
        size = max(int(size), 1)
        padded = -(-size // ALLOC_ALIGN) * ALLOC_ALIGN
        if self.used + padded > self.capacity:
            return None
        addr = self._next
        self._next += padded
        data = np.zeros(size, dtype=np.uint8) if self.functional else None
        self._allocs[addr] = Allocation(addr, size, data)
        bisect.insort(self._bases, addr)
        self.used += padded
        return addr

    def free(self, addr: int) -> bool:
        a = self._allocs.pop(addr, None)
        if a is None:
            return False
        self._bases.remove(addr)
        self.used -= -(-a.size // ALLOC_ALIGN) * ALLOC_ALIGN
        return True

    def find(self, addr: int) -> Allocation | None:
        """The allocation holding address `addr`, if any."""
        i = bisect.bisect_right(self._bases, addr) - 1
        if i < 0:
            return None
        a = self._allocs[self._bases[i]]
        return a if addr < a.addr + a.size else None

    def bytes_at(self, addr: int, nbytes: int) -> np.ndarray | None:
        """A writable uint8 view of [addr, addr+nbytes), or None in timing-only mode. The range
        must lie inside one allocation (callers check extents first)."""
        a = self.find(addr)
        if a is None or addr + nbytes > a.addr + a.size:
            raise ValueError(f"device address range 0x{addr:x}+{nbytes} is not inside one allocation")
        if a.data is None:
            return None
        off = addr - a.addr
        return a.data[off:off + nbytes]


class MemoryChannel:
    """A chip-wide channel (the L2's bandwidth, or device memory's). A transfer reserves its bytes
    in arrival order (first come, first served), so one core alone gets its own path's rate while
    all cores together saturate at the channel's bandwidth. The reservation is analytic: no SimPy
    events."""

    def __init__(self, bytes_per_cycle: float):
        self.bytes_per_cycle = bytes_per_cycle
        self.free_at = 0.0
        self.busy_cycles = 0.0
        self.bytes = 0

    def reserve(self, now: float, nbytes: int) -> float:
        """Reserve nbytes starting no earlier than now; returns when they have passed."""
        start = now if now > self.free_at else self.free_at
        occupancy = nbytes / self.bytes_per_cycle
        self.free_at = start + occupancy
        self.busy_cycles += occupancy
        self.bytes += nbytes
        return self.free_at


class L2Cache:
    """Tags of the shared L2: LRU over lines, write-back, write-allocate without a fetch (a core's
    write fills its bytes). Each line remembers which 32-byte sectors it holds: a read fetches the
    sectors it touches that the line lacks; evicting a dirty line writes the whole line back. The
    cache holds no data (GM arrays do): it only decides which bytes go to device memory."""

    SECTOR = 32

    def __init__(self, nbytes: int, line: int):
        self.line = line
        self.capacity = max(nbytes // line, 1)
        self.sectors = max(line // self.SECTOR, 1)
        self.full = (1 << self.sectors) - 1
        self.dirty = 1 << self.sectors
        self.lines: OrderedDict[int, int] = OrderedDict()     # line -> sector mask | dirty bit
        self.hit_lines = 0
        self.miss_lines = 0

    def access(self, ranges, write: bool) -> tuple[int, int]:
        """Touch address ranges [(addr, nbytes)]; returns (bytes to fetch from device memory,
        bytes of dirty lines evicted to it)."""
        line, lines, sector, cap = self.line, self.lines, self.SECTOR, self.capacity
        full, dirty = self.full, self.dirty
        move, pop = lines.move_to_end, lines.popitem
        fetch = evicted = hits = misses = 0
        for addr, n in ranges:
            if n <= 0:
                continue
            end = addr + n
            first, last = addr // line, (end - 1) // line
            for ln in range(first, last + 1):
                if first < ln < last:
                    want = full
                else:
                    base = ln * line
                    lo = (max(addr, base) - base) // sector
                    hi = -(-(min(end, base + line) - base) // sector)
                    want = ((1 << (hi - lo)) - 1) << lo
                state = lines.get(ln)
                if state is None:
                    misses += 1
                    state = 0
                    lines[ln] = 0
                    if len(lines) > cap and pop(last=False)[1] & dirty:
                        evicted += line
                else:
                    move(ln)
                    hits += 1
                if write:
                    state |= want | dirty
                else:
                    missing = want & ~state
                    if missing:
                        fetch += bin(missing).count("1") * sector
                        state |= want
                lines[ln] = state
        self.hit_lines += hits
        self.miss_lines += misses
        return fetch, evicted
