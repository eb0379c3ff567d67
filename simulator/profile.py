"""Chip profiles: one YAML file per SoC in devices/, validated by a pydantic schema.

A profile is the whole hardware description the machine is built from: core kinds and their
buffers, per-path transfer costs, vector and cube rates, the shared L2 and device memory, the
synchronisation limits and what each operator supports on the chip's product series. Profiles are
immutable; `Profile.override` returns a new, validated one (what-if studies).

A profile file may name another with `inherits:`; the child's keys are merged over the parent's
(dictionaries merged key by key, everything else replaced). Files whose names start with `_` are
shared bases, not chips.
"""
from __future__ import annotations

import copy
import math
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WrapSerializer,
                      field_validator, model_validator)

from .inputs import parse_yaml, read_text, schema_error

DEVICES_DIR = Path(__file__).resolve().parent.parent / "devices"
DEFAULT_SOC = "Ascend910B1"

PIPES = ("PIPE_S", "PIPE_V", "PIPE_M", "PIPE_MTE1", "PIPE_MTE2", "PIPE_MTE3", "PIPE_FIX")
BUFFERS = ("UB", "L1", "L0A", "L0B", "L0C")
DTYPE_NAMES = ("FLOAT", "FLOAT16", "BF16", "INT8", "UINT8", "INT16", "INT32", "INT64", "DOUBLE", "BOOL")


# DataCopy's 32-byte block (UB, L1), the 512-byte fractal of L0A/L0B, L0C's 64-byte granule
ISA_ALIGNMENT = {"UB": 32, "L1": 32, "L0A": 512, "L0B": 512, "L0C": 64}


class ProfileError(ValueError):
    """A profile file that does not load: the message names the file and the field."""


K = TypeVar("K")
V = TypeVar("V")
# read-only mappings (lists become tuples), so a loaded - and cached - profile cannot be changed
FrozenDict = Annotated[dict[K, V], AfterValidator(MappingProxyType),
                       WrapSerializer(lambda v, nxt: nxt(dict(v)))]


def _power_of_two(v: int) -> int:
    if v & (v - 1):
        raise ValueError(f"must be a power of two, got {v}")
    return v


# The physical constraints every profile - a shipped one, a user's file, a what-if - must meet,
# so that no value reaches the engine in a state it divides by or allocates with.
# Numbers are strict (never true, never text). The upper bounds keep every time the engine adds
# up exact in float64 (a cycle count far below 2**53) and no rate so small against a clock that
# bytes per cycle reach zero.
Cycles = Annotated[float, Field(strict=True, ge=0, le=1e9, allow_inf_nan=False)]         # finite, >= 0
Rate = Annotated[float, Field(strict=True, ge=1e-3, le=1e6, allow_inf_nan=False)]        # bytes/cycle, GB/s
ClockMHz = Annotated[float, Field(strict=True, ge=1, le=1e5, allow_inf_nan=False)]       # 1 MHz .. 100 GHz
Count = Annotated[int, Field(strict=True, ge=1, le=4096)]                                # cores, ids, ...
BufferBytes = Annotated[int, Field(strict=True, ge=32, le=1 << 30)]                      # on-chip, at most 1 GiB
PowerOfTwo = Annotated[int, Field(strict=True, ge=1, le=1 << 20), AfterValidator(_power_of_two)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def __deepcopy__(self, memo):       # immutable all the way down: a copy is the same object
        return self


class PathCost(_Frozen):
    """Cost of one transfer of n bytes on a data path, in core cycles:
    max(latency + n / burst_bytes_per_cycle, n / bytes_per_cycle). A lone small transfer pays
    the latency; a large one streams at the sustained rate with the latency hidden."""
    latency_cycles: Cycles
    bytes_per_cycle: Rate
    burst_bytes_per_cycle: Rate | None = None
    min_burst_bytes: int = Field(strict=True, default=32, ge=1, le=1 << 20)
    # transfers the engine keeps in flight on this path: the next one starts once this one's
    # bytes have streamed out (its latency, and a miss's, overlap the next transfers)
    in_flight: int = Field(strict=True, default=1, ge=1, le=64)
    # past in_flight, more may start while the pipe's transfers in flight hold fewer bytes than
    # this (a window of bytes, as an engine with a limit on outstanding requests keeps): many short
    # copies overlap, long ones as in_flight says (None: the count alone)
    in_flight_bytes: int | None = Field(strict=True, default=None, ge=32, le=1 << 24)
    # the sustained rate is a converter's (ND -> NZ) that the transfers in flight share: a transfer
    # holds the pipe for its bytes at that rate, so back-to-back ones stream no faster than one
    converter_bound: bool = Field(strict=True, default=False)

    def latency(self, nbytes: int, extra_latency: float = 0.0) -> float:
        """The part of cycles(nbytes) that overlaps later transfers when in_flight > 1."""
        if nbytes <= 0:
            return 0.0
        total = self.cycles(nbytes, extra_latency)
        hidden = min(self.latency_cycles + extra_latency, total)
        if self.converter_bound:
            hidden = min(hidden, total - nbytes / self.bytes_per_cycle)
        return hidden

    def cycles(self, nbytes: int, extra_latency: float = 0.0) -> float:
        """extra_latency: e.g. an L2 miss, hidden like the path's own latency on long transfers."""
        if nbytes <= 0:
            return 0.0
        burst = self.burst_bytes_per_cycle or self.bytes_per_cycle
        return max(self.latency_cycles + extra_latency + nbytes / burst, nbytes / self.bytes_per_cycle)


class Load3dCost(_Frozen):
    """An img2col load (LoadData 3Dv2) on MTE1: fixed_cycles + bytes / rate. The rate is the L1
    read port's read_bytes_per_cycle over the port's turns per 16 positions: one per map row the
    positions cross (16 // the map's width; 15 // it when 16 is a multiple of the output width),
    stride_turns per step of strideW (1, 2, 4 or 8) and l0b_turns more into L0B, never under
    odd_stride_bytes_per_cycle (L0A, L0B), the rate any other strideW reads at (Ascend C's table of
    the Cube instructions' rates on A2: asc-devkit `docs/zh/api/附录/Cube指令理论性能汇总.md`, table 4)."""
    fixed_cycles: Cycles
    read_bytes_per_cycle: Rate
    stride_turns: Cycles
    l0b_turns: Cycles
    odd_stride_bytes_per_cycle: tuple[Rate, Rate]

    def cycles(self, nbytes: int, into_l0b: bool, stride_w: int, map_w: int, out_w: int) -> float:
        if stride_w in (1, 2, 4, 8):
            rows = (15 if 16 % out_w == 0 else 16) // map_w
            turns = rows + self.stride_turns * stride_w + (self.l0b_turns if into_l0b else 0)
            rate = max(self.read_bytes_per_cycle / turns, self.odd_stride_bytes_per_cycle[1 if into_l0b else 0])
        else:
            rate = self.odd_stride_bytes_per_cycle[1 if into_l0b else 0]
        return self.fixed_cycles + nbytes / rate


class CoreKind(_Frozen):
    count: Count
    units: tuple[Literal["cube", "vector"], ...]
    runs: tuple[Literal["vector", "cube", "mix"], ...] = Field(
        description="which kernel kinds the launcher places on this core kind")
    pipes: tuple[Literal[PIPES], ...]  # type: ignore[valid-type]
    buffers: FrozenDict[Literal[BUFFERS], BufferBytes]  # type: ignore[valid-type]
    clock_mhz: ClockMHz | None = None


class VectorUnit(_Frozen):
    repeat_bytes: Annotated[PowerOfTwo, Field(ge=32)]      # a repeat is whole 32-byte blocks
    max_repeat: Count
    startup_cycles: Cycles
    # cycles per 256-byte repeat, by instruction class; "class.dtype" keys override per dtype
    cycles_per_repeat: FrozenDict[str, Cycles]


class CubeUnit(_Frozen):
    macs_per_cycle: FrozenDict[str, Annotated[int, Field(strict=True, ge=1, le=1 << 20)]]
    startup_cycles: Cycles


SCALAR_CLASSES = ("copy", "vector", "cube", "flag")

# what a core kind must have to run each kernel kind: its unit and the buffers that code uses
# (a mix kernel's cube side on the A2 chips; its vector side runs on the AIV cores of the group)
KERNEL_NEEDS = {"vector": ("vector", ("UB",)), "cube": ("cube", ("L1", "L0A", "L0B", "L0C")),
                "mix": ("cube", ("L1", "L0A", "L0B", "L0C"))}


class ScalarUnit(_Frozen):
    """The scalar unit's own work per Ascend C API call (address and loop arithmetic, queue
    bookkeeping), spent before the call's instruction issues: `copy` (DataCopy, LoadData,
    Fixpipe), `vector`, `cube` (Mmad), `flag` (SetFlag, WaitFlag, barriers, the queues' flags);
    and `tik_tile_cycles`, the work per tile of CANN's hand-written (TIK) layout kernels beside
    their calls (a tile's ragged sizes, its GM offsets, the vnchwconv address registers)."""
    cycles_per_call: FrozenDict[Literal[SCALAR_CLASSES], Cycles]  # type: ignore[valid-type]
    tik_tile_cycles: Cycles = 0.0

    @field_validator("cycles_per_call")
    @classmethod
    def _every_class(cls, v):
        missing = [c for c in SCALAR_CLASSES if c not in v]
        if missing:
            raise ValueError(f"needs a figure for every class: missing {', '.join(missing)}")
        return v


class L2Cache(_Frozen):
    bytes: int = Field(strict=True, ge=1 << 10, le=1 << 34)
    # 32..512 B: the L2 model keeps a line's 32-byte sectors and its dirty bit in one 32-bit word
    line_bytes: Annotated[PowerOfTwo, Field(ge=32, le=512)]
    read_latency_cycles: Cycles
    write_latency_cycles: Cycles
    miss_latency_cycles: Cycles = Field(description="extra latency of a transfer that misses")
    # device-memory bandwidth / L2 bandwidth, chip-wide: a miss streams at this fraction of a hit
    miss_bandwidth_ratio: float = Field(strict=True, gt=0, le=1, allow_inf_nan=False)
    writes_through_when_full: bool = Field(False, strict=True, description=(
        "once the running kernel's own traffic has filled the L2, its writes go on to device memory as they "
        "are made, as background write-back (their lines held clean)"))


class DeviceMemory(_Frozen):
    kind: str
    bytes: int = Field(strict=True, ge=1 << 20, le=1 << 50)
    bandwidth_GBps: Rate
    # the share of bandwidth_GBps that streaming traffic gets on the chip (refresh, bank and bus
    # turnarounds): a measured figure, where one is published; 1 where none is
    efficiency: float = Field(default=1.0, strict=True, gt=0, le=1, allow_inf_nan=False)
    # what device memory's channel spends opening a piece a fetch reads (a row of a strided copy
    # that starts a line the L2 held nothing of), in bytes it could have moved meanwhile (0: none;
    # no profile sets it yet, docs/CALIBRATION.md "Every core at once" gives the A2 what-if)
    piece_overhead_bytes: int = Field(default=0, strict=True, ge=0, le=1 << 16)


class SyncLimits(_Frozen):
    # the operator kernels here hold up to 4 event ids per pipe pair at once (real chips have 8):
    # a what-if below that is refused here rather than faulting inside a kernel
    event_ids: int = Field(strict=True, ge=4, le=4096)
    cross_core_flag_ids: int = Field(strict=True, ge=0, le=4096)
    cross_core_counter_limit: int = Field(strict=True, ge=0, le=1 << 20)
    pipe_queue_depth: Count
    scalar_issue_cycles: Cycles


class RuntimeCosts(_Frozen):
    """What a kernel launch costs besides its blocks' work, in msprof's terms: `launch_gap_us`
    lies between one task's end and the next task's start on a stream (outside any kernel's Task
    Duration); `launch_overhead_us` is the task scheduler's dispatch and completion inside the
    Task Duration; blocks are handed to cores `block_dispatch_cycles` apart; and each block's core
    spends `block_start_cycles` (plus `block_start_contention_cycles` for every other block
    starting with it) before its first instruction. `block_dispatch` is where the model puts the
    hand-out's skew: `tail`, every block starts together and the skew follows the last one;
    `staggered`, each block starts as it is handed out, at least `block_dispatch_cycles` after the
    one before, so the first blocks work while the others are still being handed out."""
    launch_overhead_us: Cycles
    launch_gap_us: Cycles = 0.0
    block_dispatch_cycles: Cycles = 0.0
    block_dispatch: Literal["tail", "staggered"] = "tail"
    block_start_cycles: Cycles = 0.0
    block_start_contention_cycles: Cycles = 0.0


# aclTensor has at most 8 dimensions; an attribute's limits and an option's integers are int32
# in CANN's op definitions (a what-if may move them, not past what an operator can be told)
TensorRank = Annotated[int, Field(strict=True, ge=1, le=8)]
AttrLimit = Annotated[int, Field(strict=True, ge=0, le=(1 << 31) - 1)]
OptionInt = Annotated[int, Field(strict=True, ge=-(1 << 31), le=(1 << 31) - 1)]


def _ordered(pair: tuple[int, int]) -> tuple[int, int]:
    if pair[0] > pair[1]:
        raise ValueError(f"a limit is (lowest, highest): {pair[0]} > {pair[1]}")
    return pair


Ratio = Annotated[float, Field(strict=True, gt=0, le=1e3, allow_inf_nan=False)]


class MeasuredFit(_Frozen):
    """How this operator's simulated calls compare with published kernel times of whole calls on
    this series: simulated / measured over the figures of one source in
    benchmarks/published_figures.yaml whose `what` starts with `what` (a test holds these equal to
    the ratios recorded there, which `benchmarks/validation.py --check` holds to the model)."""
    source: str                  # the source's id in benchmarks/published_figures.yaml
    what: str                    # its figures' `what` prefix
    chip: str                    # the chip they were measured on
    calls: Count
    geomean: Ratio
    low: Ratio
    high: Ratio
    within: Annotated[int, Field(strict=True, ge=0)]
    bound: Annotated[float, Field(strict=True, gt=0, lt=1)]    # |ratio - 1| a call is "within"


class OpSupport(_Frozen):
    """What one operator accepts on this chip's product series, and how far its cycles have been
    checked against hardware there (`measured`; None: no published kernel time checks it)."""
    dtypes: tuple[Literal[DTYPE_NAMES], ...]  # type: ignore[valid-type]
    ranks: tuple[TensorRank, ...] = ()
    max_rank: TensorRank | None = None
    limits: FrozenDict[str, Annotated[tuple[AttrLimit, AttrLimit], AfterValidator(_ordered)]] = \
        Field(default_factory=dict)
    options: FrozenDict[str, bool | OptionInt | str | tuple[OptionInt, ...]] = Field(default_factory=dict)
    measured: MeasuredFit | None = None


class Profile(_Frozen):
    soc_version: str
    series: Literal["training", "inference", "A2"]
    series_name: str
    clock_mhz: ClockMHz
    cores: FrozenDict[str, CoreKind]
    # the ISA's block and fractal sizes, which every Ascend C kernel is written against: not a
    # what-if (a kernel built for 32-byte UB blocks does not run on 64-byte ones)
    alignment: FrozenDict[Literal[BUFFERS], PowerOfTwo]  # type: ignore[valid-type]

    @field_validator("alignment")
    @classmethod
    def _isa_alignment(cls, v):
        for buf, size in v.items():
            if size != ISA_ALIGNMENT[buf]:
                raise ValueError(f"alignment.{buf} is the ISA's {ISA_ALIGNMENT[buf]} B (the size kernels are "
                                 f"written against), got {size}")
        return v
    paths: FrozenDict[str, PathCost]
    # img2col's own cost where one is known (else a load3d costs as its L1 -> L0 path)
    load3d: Load3dCost | None = None
    vector: VectorUnit
    cube: CubeUnit
    l2: L2Cache
    device_memory: DeviceMemory
    sync: SyncLimits
    scalar: ScalarUnit
    runtime: RuntimeCosts
    operators: FrozenDict[str, OpSupport]

    @field_validator("cores")
    @classmethod
    def _some_core(cls, v):
        if not v:
            raise ValueError("a chip needs at least one core kind")
        for kernel_kind in ("vector", "cube", "mix"):       # every operator launches one of these
            if not any(kernel_kind in kind.runs for kind in v.values()):
                raise ValueError(f"no core kind runs {kernel_kind} kernels (each kind's 'runs' lists those "
                                 f"it takes)")
        for name, kind in v.items():        # a kernel kind needs the unit and buffers its code uses
            for kernel_kind in kind.runs:
                unit, buffers = KERNEL_NEEDS[kernel_kind]
                missing = ([f"the {unit} unit"] if unit not in kind.units else []) + \
                    [b for b in buffers if b not in kind.buffers]
                if missing:
                    raise ValueError(f"{name} runs {kernel_kind} kernels but lacks {', '.join(missing)}")
        return v

    @model_validator(mode="after")
    def _buffers_aligned(self):
        for name, kind in self.cores.items():
            for buf, size in kind.buffers.items():
                align = self.alignment.get(buf, 1)
                if size % align:
                    raise ValueError(f"cores.{name}.buffers.{buf} = {size} is not a multiple of "
                                     f"alignment.{buf} = {align}")
        return self

    # ---- derived figures -------------------------------------------------------------
    @property
    def hz(self) -> float:
        return self.clock_mhz * 1e6

    def cycles_to_us(self, cycles: float) -> float:
        return cycles / self.clock_mhz

    @property
    def device_bytes_per_cycle(self) -> float:
        """Chip-wide device-memory bandwidth in bytes per core cycle: what streaming traffic gets
        (the nominal rate times device_memory.efficiency)."""
        return self.device_memory.bandwidth_GBps * self.device_memory.efficiency * 1e9 / self.hz

    @property
    def l2_bytes_per_cycle(self) -> float:
        """Chip-wide L2 bandwidth in bytes per core cycle (device memory's nominal / miss ratio:
        the ratio is of the two rates msKPP measured, not of what a stream gets)."""
        return self.device_memory.bandwidth_GBps * 1e9 / self.hz / self.l2.miss_bandwidth_ratio

    def launch_cycles(self, blocks: int, cores: int) -> float:
        """What a launch of `blocks` blocks on `cores` cores costs beside their work, in cycles:
        the gap after the stream's previous kernel, the dispatch and completion, each core's
        start and the blocks' dispatch skew (profile.runtime; what a kernel with no work takes)."""
        rt = self.runtime
        starting = max(min(blocks, cores), 1)
        return ((rt.launch_gap_us + rt.launch_overhead_us) * self.clock_mhz + rt.block_start_cycles
                + rt.block_start_contention_cycles * (starting - 1) + rt.block_dispatch_cycles * (max(blocks, 1) - 1))

    def core_kind_for(self, kernel_kind: str) -> tuple[str, CoreKind]:
        for name, kind in self.cores.items():
            if kernel_kind in kind.runs and kind.count > 0:
                return name, kind
        raise ProfileError(f"{self.soc_version}: no core kind runs {kernel_kind} kernels")

    def vector_cycles(self, op_class: str, dtype_name: str, nbytes: int) -> float:
        """Cycles of a vector instruction over nbytes: per-instruction start-up plus
        cycles per repeat, split into hardware instructions of at most max_repeat repeats."""
        v = self.vector
        cpr = v.cycles_per_repeat.get(f"{op_class}.{dtype_name}")
        if cpr is None:
            cpr = v.cycles_per_repeat.get(op_class)
        if cpr is None:
            raise ProfileError(f"{self.soc_version}: vector.cycles_per_repeat has no entry for "
                               f"'{op_class}' (or '{op_class}.{dtype_name}')")
        repeats = max(1, math.ceil(nbytes / v.repeat_bytes))
        n_instr = math.ceil(repeats / v.max_repeat)
        return n_instr * v.startup_cycles + repeats * cpr

    def path(self, name: str) -> PathCost:
        try:
            return self.paths[name]
        except KeyError:
            raise ProfileError(f"{self.soc_version}: no data path '{name}' in the profile "
                               f"(has: {', '.join(sorted(self.paths))})") from None

    def supports(self, op: str) -> OpSupport | None:
        return self.operators.get(op)

    @property
    def peak_fp16_tflops(self) -> float:
        name, kind = self.core_kind_for("cube")
        return kind.count * self.cube.macs_per_cycle["FLOAT16"] * 2 * self.hz / 1e12

    # ---- what-if ---------------------------------------------------------------------
    def override(self, changes: dict[str, Any] | None = None, **dotted: Any) -> "Profile":
        """A new validated profile with fields changed, by dotted path:
        `p.override({"device_memory.bandwidth_GBps": 3200, "cores.aiv.count": 24})`."""
        data = self.model_dump()
        for key, value in {**(changes or {}), **dotted}.items():
            _set_dotted(data, key, value)
        return _validate(data, f"{self.soc_version} (override)")


def _set_dotted(data: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for p in parts[:-1]:
        if not isinstance(node, dict) or p not in node:
            raise ProfileError(f"override: no field '{key}' (stopped at '{p}')")
        node = node[p]
    if not isinstance(node, dict) or parts[-1] not in node:
        raise ProfileError(f"override: no field '{key}'")
    node[parts[-1]] = value


def _validate(data: dict, origin: str) -> Profile:
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        raise ProfileError(schema_error(e, origin)) from None


def _merge(base: dict, child: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in child.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _read_raw(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    if path.resolve() in seen:          # files, not names: a user's Ascend910B1.yaml may inherit the shipped one
        raise ProfileError(f"{path}: inheritance cycle through {' -> '.join(p.name for p in seen)}")
    raw = parse_yaml(read_text(path, error=ProfileError), str(path), ProfileError)
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: a profile is a mapping of fields")
    parent = raw.pop("inherits", None)
    if parent is None:
        return raw
    if not isinstance(parent, str) or not parent or "/" in parent or "\\" in parent:
        raise ProfileError(f"{path}: field 'inherits': a profile name (Ascend910B1, _atlas_a2), got {parent!r}")
    ppath = path.parent / f"{parent}.yaml"
    if not ppath.exists() or ppath.resolve() == path.resolve():     # a user's file may inherit a shipped profile by name
        ppath = DEVICES_DIR / f"{parent}.yaml"
    if not ppath.exists():
        raise ProfileError(f"{path}: field 'inherits': no profile '{parent}' in {path.parent} or among "
                           f"the shipped ones ({', '.join(list_socs())})")
    return _merge(_read_raw(ppath, seen + (path.resolve(),)), raw)


def load_profile_file(path: str | Path) -> Profile:
    path = Path(path)
    if not path.exists():
        raise ProfileError(f"{path}: no such profile file")
    if path.is_dir():
        raise ProfileError(f"{path}: is a folder; give a profile file (.yaml)")
    return _validate(_read_raw(path), str(path))


def list_socs(directory: Path = DEVICES_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.yaml") if not p.stem.startswith("_"))


def profile_key(soc: str) -> str:
    """What identifies the profile `soc` names: a shipped SoC's name, or a file's resolved path
    with its size and modification time (an edited file is a new profile, not a cached one)."""
    if not soc.endswith((".yaml", ".yml")):
        return soc
    try:
        st = Path(soc).stat()
        return f"{Path(soc).resolve()}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        return soc


def load_profile(soc: str = DEFAULT_SOC) -> Profile:
    """The profile of a SoC by its CANN name (`Ascend910B1`), or of a YAML file by path."""
    return _load_profile(soc, profile_key(soc))


@lru_cache(maxsize=None)
def _load_profile(soc: str, key: str) -> Profile:
    if soc.endswith((".yaml", ".yml")):
        return load_profile_file(soc)
    path = DEVICES_DIR / f"{soc}.yaml"
    if soc.startswith("_") or not path.exists():
        raise ProfileError(f"unknown SoC '{soc}': known are {', '.join(list_socs())}")
    return load_profile_file(path)
