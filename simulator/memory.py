"""Device memory (GM): allocations in a device address space, and the chip-wide channels (the L2's
bandwidth and device memory's) that all cores' GM traffic shares. The L2's tags, which decide what
crosses to device memory, are in simulator.l2_cache."""
from __future__ import annotations

import bisect

import numpy as np

ALLOC_ALIGN = 512          # aclrtMalloc returns 512-byte aligned addresses in our model
BASE_ADDRESS = 0x12C0_0000_0000
# aclrtMalloc does not clear what it hands out. A fresh allocation here holds this byte: NaN in
# every float dtype, -1 in the integers, so a kernel that reads workspace it never wrote (a
# MemSet left out before atomic adds) shows NaN where zeros would have hidden it.
UNWRITTEN_BYTE = 0xFF


class Allocation:
    __slots__ = ("addr", "size", "data")

    def __init__(self, addr: int, size: int, data: np.ndarray | None):
        self.addr, self.size, self.data = addr, size, data


class DeviceMemory:
    """Device memory of the profile's capacity. In functional mode each allocation is backed by a
    numpy byte array filled with UNWRITTEN_BYTE; in timing-only mode nothing is backed (no data
    moves)."""

    def __init__(self, capacity: int, functional: bool):
        self.capacity = capacity
        self.functional = functional
        self.used = 0
        self._next = BASE_ADDRESS
        self._bases: list[int] = []
        self._allocs: dict[int, Allocation] = {}
        self._spans: tuple[np.ndarray, np.ndarray] | None = None

    def malloc(self, size: int) -> int | None:
        size = max(int(size), 1)
        padded = -(-size // ALLOC_ALIGN) * ALLOC_ALIGN
        if self.used + padded > self.capacity:
            return None
        addr = self._next
        self._next += padded
        data = np.full(size, UNWRITTEN_BYTE, dtype=np.uint8) if self.functional else None
        self._allocs[addr] = Allocation(addr, size, data)
        bisect.insort(self._bases, addr)
        self._spans = None
        self.used += padded
        return addr

    def free(self, addr: int) -> bool:
        a = self._allocs.pop(addr, None)
        if a is None:
            return False
        self._bases.remove(addr)
        self._spans = None
        self.used -= -(-a.size // ALLOC_ALIGN) * ALLOC_ALIGN
        return True

    def spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(first byte, past the last byte) of every allocation, ascending: for finding many
        addresses' allocations at once."""
        if self._spans is None:
            bases = np.array(self._bases, dtype=np.int64)
            self._spans = bases, bases + np.array([self._allocs[b].size for b in self._bases], dtype=np.int64)
        return self._spans

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
    events. Write-backs of dirty L2 lines are deferred and interleaved with later traffic (each
    transfer carries up to its own size of them), as background write-back shares the channel."""

    def __init__(self, bytes_per_cycle: float):
        self.bytes_per_cycle = bytes_per_cycle
        self.free_at = 0.0
        self.busy_cycles = 0.0
        self.bytes = 0
        self.opened = 0             # the channel's time opening pieces, in bytes' worth (overhead)
        self.pending = 0            # write-back bytes not yet carried

    def reserve(self, now: float, nbytes: int, drain: int = 0, overhead: int = 0) -> tuple[float, int]:
        """Reserve nbytes, plus up to `drain` bytes of pending write-back, starting no earlier than
        now; `overhead`: the channel's time for as many more bytes, none of them moved (device
        memory opening the pieces a fetch reads). Returns (when they have passed, bytes moved).
        Nothing to move: (now, 0)."""
        carried = min(self.pending, drain)
        self.pending -= carried
        total = nbytes + carried
        if total <= 0:
            return now, 0
        start = now if now > self.free_at else self.free_at
        occupancy = (total + overhead) / self.bytes_per_cycle
        self.free_at = start + occupancy
        self.busy_cycles += occupancy
        self.bytes += total
        self.opened += overhead
        return self.free_at, total
