"""The estimated part of a step: a roofline per call we do not simulate, from the chip profile's
own figures (docs/STEP.md says what it leaves out).

    time = max(work / unit rate, bytes / bandwidth) + launch overhead

- unit rate: the Cube (matmul, convolution) at `cube.macs_per_cycle[dtype]` x 2 FLOPs per cycle
  on every core that runs cube kernels; the vector unit (everything else) at `vector.repeat_bytes
  / itemsize / cycles_per_repeat["add"]` element operations per cycle on every core that runs
  vector kernels, each kind at its own clock.
- bandwidth: the L2's (`device_memory.bandwidth_GBps / l2.miss_bandwidth_ratio`) when the call's
  bytes fit in the L2 (`l2.bytes`: its operands can stay there between calls), device memory's
  (`bandwidth_GBps x efficiency`) otherwise.
- launch overhead: once per call, what a kernel with no work costs on every core of its kind
  (`Profile.launch_cycles`: the gap after the previous kernel, dispatch, the cores' start).

A dtype the Cube has no rate for (FLOAT on the training series and 310P3, whose Cube is FP16 and
INT8 only) runs at the FLOAT16 rate: CANN's default precision mode there, allow_fp32_to_fp16,
casts FP32 matmuls to FP16 on the Cube.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..profile import Profile
from .trace import EstimatedCall, numpy_dtype


@dataclass(frozen=True)
class Roofline:
    """One estimated call on one profile: its parts in us (per occurrence) and what bound it."""
    compute_us: float
    memory_us: float
    launch_us: float
    rate: float              # the unit's work per second
    bandwidth: float         # bytes per second of the memory the call streams from
    memory: str              # "L2" | "device memory"
    rate_dtype: str          # the dtype whose rate was used (FLOAT16 where the Cube lacks the call's)

    @property
    def time_us(self) -> float:
        return max(self.compute_us, self.memory_us) + self.launch_us

    @property
    def bound(self) -> str:
        """What the time mostly is: the launch overhead, or the larger of compute and memory."""
        if self.launch_us >= max(self.compute_us, self.memory_us):
            return "launch"
        return "compute" if self.compute_us >= self.memory_us else "memory"


def _cores_and_clock(profile: Profile, kernel_kind: str) -> tuple[int, float]:
    """Cores that take this kernel kind and their clock in Hz (all kinds that take it)."""
    kinds = [k for k in profile.cores.values() if kernel_kind in k.runs and k.count > 0]
    if not kinds:
        return 0, profile.hz
    clock = (kinds[0].clock_mhz or profile.clock_mhz) * 1e6
    return sum(k.count for k in kinds), clock


def unit_rate(profile: Profile, unit: str, dtype: str) -> tuple[float, str]:
    """The unit's work per second on the whole chip for this dtype, and the dtype whose rate it is."""
    if unit == "cube":
        cores, hz = _cores_and_clock(profile, "cube")
        macs = profile.cube.macs_per_cycle
        used = dtype if dtype in macs else "FLOAT16"
        return cores * macs[used] * 2 * hz, used
    cores, hz = _cores_and_clock(profile, "vector")
    v = profile.vector
    cpr = v.cycles_per_repeat.get(f"add.{dtype}", v.cycles_per_repeat.get("add", 2))
    lanes = v.repeat_bytes / numpy_dtype(dtype).itemsize
    return cores * lanes / cpr * hz, dtype


def roofline(call: EstimatedCall, profile: Profile) -> Roofline:
    rate, used = unit_rate(profile, call.unit, call.dtype)
    in_l2 = call.bytes <= profile.l2.bytes
    bandwidth = (profile.l2_bytes_per_cycle if in_l2 else profile.device_bytes_per_cycle) * profile.hz
    compute_us = call.flops / rate * 1e6 if rate else 0.0
    memory_us = call.bytes / bandwidth * 1e6
    cores, _ = _cores_and_clock(profile, call.unit)
    launch_us = profile.launch_cycles(cores, cores) / profile.clock_mhz
    return Roofline(compute_us, memory_us, launch_us, rate, bandwidth,
                    "L2" if in_l2 else "device memory", used)


def estimated_row(call: EstimatedCall, profile: Profile) -> dict[str, Any]:
    """The row of an estimated call (the columns a simulated call's row has where they mean the
    same; `status` and `kind` say "estimated")."""
    r = roofline(call, profile)
    return {"kind": "estimated", "op": call.op, "shapes": call.shapes(), "status": "estimated",
            "cycles": r.time_us * profile.clock_mhz, "time_us": r.time_us, "bound": r.bound,
            "unit": call.unit, "dtype": call.dtype, "flops": call.flops, "bytes": call.bytes,
            "compute_us": r.compute_us, "memory_us": r.memory_us, "launch_us": r.launch_us,
            "memory": r.memory, "rate_dtype": r.rate_dtype}


__all__ = ["Roofline", "unit_rate", "roofline", "estimated_row"]
