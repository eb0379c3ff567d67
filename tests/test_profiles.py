"""Chip profiles (devices/*.yaml, simulator/profile.py): every SoC loads, its figures are SPEC
section 2's, the schema rejects a broken file naming the file and the field, profiles are
immutable, and override() makes validated what-if profiles that change the simulated cost."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pydantic
import pytest

import simulator
from simulator.profile import DEVICES_DIR, load_profile_file

from conftest import F16, SERIES, SPEC_SILU_DTYPES, dtype_id

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# SPEC section 2 (CANN 8.1.RC1 platform_config/<SoC>.ini); "cube" = AI cores / AIC, "vector" =
# the cores vector kernels run on (AI cores on the coupled chips, AIV on A2).
SPEC = {
    "Ascend910A": dict(series="training", clock=1000, cube=32, vector=32, l2=32 * MiB, mem=32 * GiB,
                       l1=1 * MiB, l0=(64 * KiB, 64 * KiB, 256 * KiB), ub=256 * KiB, tflops="262",
                       bw=1200, events=4),
    "Ascend310P3": dict(series="inference", clock=1060, cube=8, vector=8, l2=16 * MiB, mem=24 * 10 ** 9,
                        l1=1 * MiB, l0=(64 * KiB, 64 * KiB, 256 * KiB), ub=256 * KiB, tflops="69.5",
                        bw=204.8, events=8),
    "Ascend910B1": dict(series="A2", clock=1850, cube=24, vector=48, l2=192 * MiB, mem=64 * GiB,
                        l1=512 * KiB, l0=(64 * KiB, 64 * KiB, 128 * KiB), ub=192 * KiB, tflops="363.7",
                        bw=1600, events=8),
    "Ascend910B2": dict(series="A2", clock=1800, cube=24, vector=48, l2=192 * MiB, mem=64 * GiB,
                        l1=512 * KiB, l0=(64 * KiB, 64 * KiB, 128 * KiB), ub=192 * KiB, tflops="353.9",
                        bw=1600, events=8),
    "Ascend910B3": dict(series="A2", clock=1800, cube=20, vector=40, l2=192 * MiB, mem=64 * GiB,
                        l1=512 * KiB, l0=(64 * KiB, 64 * KiB, 128 * KiB), ub=192 * KiB, tflops="294.9",
                        bw=1600, events=8),
    "Ascend910B4": dict(series="A2", clock=1500, cube=20, vector=40, l2=96 * MiB, mem=32 * GiB,
                        l1=512 * KiB, l0=(64 * KiB, 64 * KiB, 128 * KiB), ub=192 * KiB, tflops="245.8",
                        bw=800, events=8),      # the B4's own figure (two sources: devices/Ascend910B4.yaml)
}
# Chips beyond SPEC section 2, each figure as its devices/ file cites it: Atlas A3 dies (the A2
# core and buffers per Huawei's NPUTargetSpec.td; L2, memory and bandwidth from secondary sources;
# the clock an assumption, see devices/Ascend910_9392.yaml).
BEYOND_SPEC = {
    "Ascend910_9392": dict(series="A2", clock=1850, cube=24, vector=48, l2=192 * MiB, mem=64 * GiB,
                           l1=512 * KiB, l0=(64 * KiB, 64 * KiB, 128 * KiB), ub=192 * KiB, tflops="363.7",
                           bw=1600, events=8),
    # a smaller A3 bin, every figure but the bandwidth from CANN's own platform file for it
    "Ascend910_9362": dict(series="A2", clock=1500, cube=20, vector=40, l2=168 * MiB, mem=32 * GiB,
                           l1=512 * KiB, l0=(64 * KiB, 64 * KiB, 128 * KiB), ub=192 * KiB, tflops="245.8",
                           bw=1600, events=8),
}
CHIPS = SPEC | BEYOND_SPEC


def test_list_socs_is_spec_chips():
    assert simulator.list_socs() == sorted(CHIPS)
    assert simulator.DEFAULT_SOC == "Ascend910B1"


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_profile_figures_match_spec(soc):
    p = simulator.load_profile(soc)
    s = CHIPS[soc]
    assert isinstance(p, simulator.Profile)
    assert p.soc_version == soc and p.series == s["series"] == SERIES.get(soc, s["series"])
    assert p.clock_mhz == s["clock"]
    _, cube = p.core_kind_for("cube")
    _, vec = p.core_kind_for("vector")
    assert cube.count == s["cube"] and vec.count == s["vector"]
    assert "cube" in cube.units and "vector" in vec.units
    if s["series"] == "A2":                        # split: AIC (cube only) and AIV (vector only) 1:2
        assert tuple(cube.units) == ("cube",) and tuple(vec.units) == ("vector",) and vec.count == 2 * cube.count
    else:                                          # coupled: one AI Core does both
        assert cube is vec and set(cube.units) == {"cube", "vector"}
    assert p.l2.bytes == s["l2"]
    assert p.device_memory.bytes == s["mem"]
    assert p.device_memory.bandwidth_GBps == pytest.approx(s["bw"])
    assert cube.buffers["L1"] == s["l1"]
    assert (cube.buffers["L0A"], cube.buffers["L0B"], cube.buffers["L0C"]) == s["l0"]
    assert vec.buffers["UB"] == s["ub"]
    # SPEC's derived fp16 peak (cores x 4096 MAC x 2 x clock), within 0.1 TFLOPS, or within half
    # a unit where SPEC states it to the unit ("910A 262")
    stated = s["tflops"]
    tol = 0.1 if "." in stated else 0.5
    derived = cube.count * 4096 * 2 * s["clock"] * 1e6 / 1e12
    assert derived == pytest.approx(float(stated), abs=tol)
    assert p.peak_fp16_tflops == pytest.approx(float(stated), abs=tol)
    assert p.sync.event_ids == s["events"]
    assert p.cube.macs_per_cycle["FLOAT16"] == 4096 and p.cube.macs_per_cycle["INT8"] == 8192
    assert p.vector.repeat_bytes == 256 and p.vector.max_repeat == 255
    assert p.alignment == {"UB": 32, "L1": 32, "L0A": 512, "L0B": 512, "L0C": 64}


def test_310p3_vector_cores():
    """310P3: 8 AI cores plus 7 separate Vector Cores at 1000 MHz (SPEC section 2)."""
    p = simulator.load_profile("Ascend310P3")
    extra = [k for k in p.cores.values() if tuple(k.units) == ("vector",)]
    assert len(extra) == 1 and extra[0].count == 7 and extra[0].clock_mhz == 1000
    assert extra[0].buffers["UB"] == 256 * KiB


@pytest.mark.parametrize("soc", sorted(SPEC))
def test_nominal_per_core_rates(soc):
    """SPEC's platform-ini per-core L2 rates carry the coupled chips' GM paths (a path's rate is
    what an L2 hit gets; device memory bounds misses chip-wide): 910A l2 110 read / 86 write,
    310P3 l2 114 read."""
    p = simulator.load_profile(soc)
    if soc == "Ascend310P3":
        assert p.path("GM_UB").bytes_per_cycle == 114 and p.path("GM_L1").bytes_per_cycle == 114
    if soc == "Ascend910A":
        assert p.path("GM_UB").bytes_per_cycle == 110 and p.path("UB_GM").bytes_per_cycle == 86
    with pytest.raises(simulator.ProfileError, match="no data path"):
        p.path("GM_NOWHERE")


@pytest.mark.parametrize("soc", sorted(SPEC))
def test_silu_support_matches_spec(soc):
    """SPEC section 4: SiluBackward FLOAT, FLOAT16 on training; none on inference; + BF16 on A2."""
    p = simulator.load_profile(soc)
    want = {dtype_id(d) for d in SPEC_SILU_DTYPES[SERIES[soc]]}
    support = p.supports("SiluBackward")
    if not want:
        assert support is None
    else:
        assert set(support.dtypes) == want and support.max_rank == 8


def test_unknown_soc_is_a_profile_error():
    with pytest.raises(simulator.ProfileError, match="Ascend999Z"):
        simulator.load_profile("Ascend999Z")
    with pytest.raises(simulator.ProfileError):
        simulator.load_profile("_atlas_a2")                  # a shared base is not a chip


# ---- corrupted profiles --------------------------------------------------------------------------
GOOD_CHILD = """\
inherits: _atlas_a2
soc_version: Ascend910X9
clock_mhz: 1700
"""

CORRUPTIONS = [
    # (id, yaml text, field the message must name)
    ("misspelled_top_key", GOOD_CHILD + "clock_mzh: 1800\n", "clock_mzh"),
    ("misspelled_nested_key", GOOD_CHILD + "l2:\n  bytez: 5\n", "l2.bytez"),
    ("misspelled_core_field", GOOD_CHILD + "cores:\n  aiv: {cuont: 8}\n", "cores.aiv.cuont"),
    ("wrong_type_top", GOOD_CHILD.replace("1700", "fast"), "clock_mhz"),
    ("wrong_type_nested", GOOD_CHILD + "cores:\n  aiv: {count: many}\n", "cores.aiv.count"),
    ("wrong_type_list", GOOD_CHILD + "cores:\n  aiv: {pipes: PIPE_V}\n", "cores.aiv.pipes"),
    ("unknown_pipe", GOOD_CHILD + "cores:\n  aiv: {pipes: [PIPE_S, PIPE_Q]}\n", "cores.aiv.pipes"),
    ("unknown_dtype", GOOD_CHILD + "operators:\n  SiluBackward: {dtypes: [FLOAT, FLOAT128]}\n",
     "operators.SiluBackward.dtypes"),
    ("negative_value", GOOD_CHILD + "device_memory: {bandwidth_GBps: -1}\n", "device_memory.bandwidth_GBps"),
    ("zero_clock", GOOD_CHILD.replace("1700", "0"), "clock_mhz"),
    ("bad_series", GOOD_CHILD + "series: datacenter\n", "series"),
    ("missing_clock", GOOD_CHILD.replace("clock_mhz: 1700\n", ""), "clock_mhz"),
    ("missing_soc_version", GOOD_CHILD.replace("soc_version: Ascend910X9\n", ""), "soc_version"),
    ("no_cores_at_all", GOOD_CHILD + "cores:\n  aic: {count: 0}\n  aiv: {count: 0}\n", "cores"),
    ("missing_parent", GOOD_CHILD.replace("_atlas_a2", "_atlas_a9"), "inherits"),
]


@pytest.fixture
def devices_copy(tmp_path) -> Path:
    d = tmp_path / "devices"
    shutil.copytree(DEVICES_DIR, d)
    return d


def test_good_child_profile_loads(devices_copy):
    """The control: the uncorrupted child inherits everything from the copied _atlas_a2."""
    path = devices_copy / "Ascend910X9.yaml"
    path.write_text(GOOD_CHILD)
    p = load_profile_file(path)
    assert p.soc_version == "Ascend910X9" and p.clock_mhz == 1700 and p.series == "A2"
    assert p.cores == simulator.load_profile("Ascend910B1").cores
    assert simulator.load_profile(str(path)) == p


@pytest.mark.parametrize("name,text,field", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corrupted_profile_names_file_and_field(devices_copy, name, text, field):
    path = devices_copy / "Ascend910X9.yaml"
    path.write_text(text)
    with pytest.raises(simulator.ProfileError) as info:
        load_profile_file(path)
    msg = str(info.value)
    assert str(path) in msg, f"the message does not name the file: {msg}"
    assert field in msg, f"the message does not name the field {field!r}: {msg}"


def test_missing_field_in_a_parent(devices_copy):
    """A section removed from the copied _base.yaml: the chip that inherits it fails, naming the
    chip's file and the missing field."""
    base = devices_copy / "_base.yaml"
    lines = base.read_text().splitlines()
    start = lines.index("scalar:")
    end = start + 1
    while end < len(lines) and (lines[end].startswith(" ") or not lines[end].strip()):
        end += 1
    base.write_text("\n".join(lines[:start] + lines[end:]) + "\n")
    path = devices_copy / "Ascend910B4.yaml"
    with pytest.raises(simulator.ProfileError) as info:
        load_profile_file(path)
    assert str(path) in str(info.value) and "scalar" in str(info.value)


@pytest.mark.parametrize("text", ["clock_mhz: [1, 2\n", "- just\n- a list\n"], ids=["bad_yaml", "not_a_mapping"])
def test_unparseable_profile(devices_copy, text):
    path = devices_copy / "Ascend910X9.yaml"
    path.write_text(text)
    with pytest.raises(simulator.ProfileError) as info:
        load_profile_file(path)
    assert str(path) in str(info.value)


def test_inheritance_cycle(devices_copy):
    (devices_copy / "_a.yaml").write_text("inherits: _b\n")
    (devices_copy / "_b.yaml").write_text("inherits: _a\n")
    path = devices_copy / "Ascend910X9.yaml"
    path.write_text("inherits: _a\n")
    with pytest.raises(simulator.ProfileError, match="cycle"):
        load_profile_file(path)


# ---- immutability --------------------------------------------------------------------------------
@pytest.mark.parametrize("assign", [
    lambda p: setattr(p, "clock_mhz", 2000),
    lambda p: setattr(p, "soc_version", "Ascend910B9"),
    lambda p: setattr(p.l2, "bytes", 1),
    lambda p: setattr(p.device_memory, "bandwidth_GBps", 1.0),
    lambda p: setattr(p.cores["aiv"], "count", 1),
    lambda p: setattr(p.vector, "startup_cycles", 0),
], ids=["clock", "soc_version", "l2.bytes", "bandwidth", "aiv.count", "vector.startup"])
def test_profile_attribute_assignment_raises(assign):
    p = simulator.load_profile("Ascend910B1")
    before = p.model_dump()
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        assign(p)
    assert simulator.load_profile("Ascend910B1").model_dump() == before


@pytest.mark.parametrize("mutate", [
    lambda p: p.cores.__setitem__("aiv", p.cores["aic"]),
    lambda p: p.paths.pop("GM_UB"),
    lambda p: p.operators["SiluBackward"].dtypes.append("INT32"),
    lambda p: p.cores["aiv"].buffers.__setitem__("UB", 1),
], ids=["cores[...]=", "paths.pop", "dtypes.append", "buffers[...]="])
def test_profile_containers_are_immutable(mutate):
    """On a freshly loaded (uncached) profile, so a mutation that got through could not leak
    into other tests."""
    p = load_profile_file(DEVICES_DIR / "Ascend910B1.yaml")
    assert p is not simulator.load_profile("Ascend910B1")
    with pytest.raises((TypeError, AttributeError, pydantic.ValidationError)):
        mutate(p)


# ---- override: what-if profiles -------------------------------------------------------------------
def test_override_returns_a_new_validated_profile():
    p = simulator.load_profile("Ascend910B1")
    before = p.model_dump()
    q = p.override({"device_memory.bandwidth_GBps": 3200})
    assert isinstance(q, simulator.Profile) and q is not p
    assert q.device_memory.bandwidth_GBps == 3200
    assert p.device_memory.bandwidth_GBps == 1600 and p.model_dump() == before
    dq = q.model_dump()
    dq["device_memory"]["bandwidth_GBps"] = 1600
    assert dq == before, "override changed more than the field it was asked to"
    assert q.device_bytes_per_cycle == pytest.approx(2 * p.device_bytes_per_cycle)
    r = p.override({"cores.aiv.count": 24, "l2.bytes": 96 * MiB})
    assert r.core_kind_for("vector")[1].count == 24 and r.l2.bytes == 96 * MiB
    with pytest.raises(pydantic.ValidationError):
        q.clock_mhz = 1                         # the new profile is frozen too


@pytest.mark.parametrize("changes,field", [
    ({"device_memory.bandwidth_gbps": 3200}, "device_memory.bandwidth_gbps"),   # unknown field
    ({"cores.aiv.cnt": 3}, "cores.aiv.cnt"),
    ({"nonsense": 1}, "nonsense"),
    ({"cores.npu.count": 3}, "cores.npu.count"),
    ({"device_memory.bandwidth_GBps": -1}, "device_memory.bandwidth_GBps"),     # negative value
    ({"clock_mhz": 0}, "clock_mhz"),
    ({"cores.aiv.count": -48}, "cores.aiv.count"),
    ({"l2.bytes": "big"}, "l2.bytes"),                                          # wrong type
    ({"series": "mainframe"}, "series"),
    ({"cores.aic.count": 0, "cores.aiv.count": 0}, "cores"),
])
def test_bad_override_is_a_profile_error(changes, field):
    p = simulator.load_profile("Ascend910B1")
    before = p.model_dump()
    with pytest.raises(simulator.ProfileError) as info:
        p.override(changes)
    assert field in str(info.value)
    assert p.model_dump() == before


def _big_silu(profile, n=1 << 20):
    x = np.zeros(n, F16)
    return simulator.run("SiluBackward", profile=profile, gradOutput=x, self=x.copy(),
                         mode="timing", trace=False)


def test_what_if_bandwidth_changes_cycles():
    """A large streaming SiluBackward is device-memory bound: less bandwidth costs cycles, more
    never costs any, and the report shows the profile it ran on."""
    p = simulator.load_profile("Ascend910B1")
    base = _big_silu(p)
    slow = _big_silu(p.override({"device_memory.bandwidth_GBps": 400}))
    fast = _big_silu(p.override({"device_memory.bandwidth_GBps": 3200}))
    assert slow.cycles > 1.3 * base.cycles
    assert fast.cycles <= base.cycles
    assert slow.report.device_memory["peak_GBps"] == 400
    assert slow.report.bound == "device memory"
    # deep in the bandwidth-bound regime the time after the launch overhead scales like
    # bytes / bandwidth: halving the bandwidth about doubles it
    launch = p.runtime.launch_overhead_us * p.clock_mhz
    at200 = _big_silu(p.override({"device_memory.bandwidth_GBps": 200}))
    at100 = _big_silu(p.override({"device_memory.bandwidth_GBps": 100}))
    assert at100.cycles - launch == pytest.approx(2 * (at200.cycles - launch), rel=0.15)


def test_what_if_core_count_and_clock_change_cycles():
    p = simulator.load_profile("Ascend910B1")
    base = _big_silu(p, 1 << 18)
    few = _big_silu(p.override({"cores.aiv.count": 4}), 1 << 18)
    assert few.cycles > 2 * base.cycles
    assert few.report.tiling["blockDim"] <= 4 < base.report.tiling["blockDim"]
    slow_clock = _big_silu(p.override({"clock_mhz": 925}), 1 << 18)
    assert slow_clock.report.clock_mhz == 925
    assert slow_clock.time_us > base.time_us


def test_load3d_rates_follow_the_documented_a2_table():
    """An img2col load's rate on every A2 profile against the form of Ascend C's table of the Cube
    instructions' rates (asc-devkit docs/zh/api/附录/Cube指令理论性能汇总.md, table 4, n read as CANN's
    tiling model reads it: the row switches of 16 positions): 512 B over the read port's turns at
    strides 1, 2, 4 and 8, never under 32 B a cycle into L0A and 512 // 18 into L0B, which any other
    stride reads at. (The table's rates are whole numbers; the model's are not rounded down.)"""
    for soc in simulator.list_socs():
        l3d = simulator.load_profile(soc).load3d
        if l3d is None:
            continue
        for stride in (1, 2, 3, 4, 5, 8, 16):
            for map_w in (1, 2, 3, 5, 8, 15, 16, 17, 64):
                for out_w in (1, 4, 7, 16):
                    switches = (15 if 16 % out_w == 0 else 16) // map_w
                    for into_l0b, floor in ((False, 32), (True, 512 // 18)):
                        if stride in (1, 2, 4, 8):
                            rate = max(512 / (2 * stride + switches + (2 if into_l0b else 0)), floor)
                        else:
                            rate = floor
                        cycles = l3d.cycles(4096, into_l0b, stride, map_w, out_w)
                        assert cycles == pytest.approx(l3d.fixed_cycles + 4096 / rate, rel=1e-12), (
                            soc, stride, map_w, out_w, into_l0b)


def test_a_users_file_named_after_a_shipped_chip_inherits_it(tmp_path):
    """Cycles are files, not names: a user's Ascend910B1.yaml inheriting Ascend910B1 takes the
    shipped one (its own folder holds no other), and a file beside it inheriting Ascend910B1 takes
    the user's; a real cycle is still one."""
    (tmp_path / "Ascend910B1.yaml").write_text("inherits: Ascend910B1\nclock_mhz: 1000\n")
    (tmp_path / "mine.yaml").write_text("inherits: Ascend910B1\n")
    (tmp_path / "_base.yaml").write_text("inherits: Ascend910B1\nclock_mhz: 700\n")
    assert load_profile_file(tmp_path / "Ascend910B1.yaml").clock_mhz == 1000
    assert load_profile_file(tmp_path / "mine.yaml").clock_mhz == 1000
    assert load_profile_file(tmp_path / "_base.yaml").clock_mhz == 700
    (tmp_path / "a.yaml").write_text("inherits: b\n")
    (tmp_path / "b.yaml").write_text("inherits: a\n")
    with pytest.raises(simulator.ProfileError, match="cycle"):
        load_profile_file(tmp_path / "a.yaml")
