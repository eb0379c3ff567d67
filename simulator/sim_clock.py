"""The engine's two uses of SimPy's event queue that SimPy's public API does not offer, and the one
place in the project that depends on SimPy 4's internals (`Environment._queue`, `_eid`, an event's
`_ok` and `_value`; pyproject.toml pins SimPy's major version for them).

- A callback at an exact time: `Environment.schedule` takes a delay from now, and now + (t - now)
  may round away from t. The engine's times are float sums that must come out the same however a
  core meets the others, so the queue entry is written with t itself.
- A chosen priority: a block meets the other cores at its (core, pipe) turn of a cycle, a priority
  after SimPy's own (see turn); `Event.succeed` always takes NORMAL.

SimPy's `step` pops (time, priority, id, event) from the heap, calls `event.callbacks` and then
reads `event._ok`: anything with those two fields can stand in the queue.
"""
from __future__ import annotations

from heapq import heappush
from typing import Callable

import simpy


class Wakeup:
    """A callback waiting in SimPy's queue (lighter than an Event, which a step does not need).
    Its identity tells a stale wakeup (one a later wait replaced) from the current one."""
    __slots__ = ("callbacks", "_ok")

    def __init__(self, fn: Callable[[Wakeup], None]):
        self.callbacks = [fn]
        self._ok = True


def call_at(env: simpy.Environment, t: float, priority: int, fn: Callable[[Wakeup], None]) -> Wakeup:
    """Call `fn(wakeup)` when the environment reaches (t, priority); t >= env.now."""
    wakeup = Wakeup(fn)
    heappush(env._queue, (t, priority, next(env._eid), wakeup))
    return wakeup


def succeed_at(env: simpy.Environment, event: simpy.Event, t: float, priority: int) -> None:
    """Succeed `event` (value None) at (t, priority): the processes waiting for it resume there."""
    event._ok, event._value = True, None
    heappush(env._queue, (t, priority, next(env._eid), event))


def turn(core_index: int, pipe_at: int) -> int:
    """SimPy priority of a core's pipe's turn in a cycle: after every ordinary event of the cycle
    (priority 1), in (core, pipe) order. Where the cores meet (the L2 and the channels, cross-core
    flags, the pool of free cores), requests of one cycle are served in this fixed order, the
    hardware model's rule, not in the order the engine happened to create them."""
    return 2 + core_index * 8 + pipe_at
