"""Published measurements of real chips beside what we simulate for the same work: a calibration
table (sources some constant was fitted on) and a held-out validation table (sources nothing was
fitted on), with the validation set's mean absolute error and worst row.

    python benchmarks/validation.py             # every figure (a few minutes: 4096^3 GEMMs)
    python benchmarks/validation.py --quick     # the quick figures only (seconds)
    python benchmarks/validation.py --check     # also fail if a ratio moved from its recorded value
    python benchmarks/validation.py --record    # write the ratios back as expected_ratio
    python benchmarks/validation.py --rows F    # rows in the CANN team's benchmark format (a held-out half)

The figures, their sources, the split rule and how each is reproduced are in
benchmarks/published_figures.yaml; docs/CALIBRATION.md holds the tables this prints.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "examples"))
sys.path.insert(0, str(HERE))

from simulator.profile import load_profile  # noqa: E402

FIGURES = HERE / "published_figures.yaml"
# how far a ratio may move from its recorded value before --check (and the test) calls it drift
DRIFT = 0.02
# --dw-blocks slices (a what-if, set by main): a gradWeight call's Cube launch on whole (image,
# output depth) slices a block, as few rounds as the cores allow, instead of the plan's split
WHOLE_SLICES = False


@dataclass
class Result:
    figure: dict
    simulated: float | None      # None: not reproduced
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return None if self.simulated is None else self.simulated / self.figure["measured"]

    @property
    def within(self) -> bool:
        return self.ratio is not None and abs(self.ratio - 1) <= self.figure["bound"]


def load(path: Path = FIGURES) -> tuple[dict, list[dict]]:
    data = yaml.safe_load(path.read_text())
    for f in data["figures"]:
        f["_reproduction"] = data.get("reproduction", {})
    return data["sources"], data["figures"]


# ---------------------------------------------------------------------------------------------
# reproducers: one per `reproduce.kind`; each returns (simulated value in the figure's unit, note)
# ---------------------------------------------------------------------------------------------
_add_cache: dict = {}


def _add_sample(fig, spec):
    """msKPP's add sample, warm, through the code behind `ascend-sim compare`."""
    if fig["chip"] not in _add_cache:
        from hardware_measurements import FIXTURE, run_warm
        from simulator.studies.compare import compare, read_op_summary
        from vector_add_kernel import AddTiling, add_custom
        measured = read_op_summary(FIXTURE)[0]
        blocks, length, tile = measured.block_dim, 2048, 128
        buffers = {name: (np.float16, blocks * length) for name in ("x", "y", "z")}
        rep = run_warm(add_custom, blocks, buffers, (AddTiling(length, tile),), kind="vector", soc=fig["chip"])
        _add_cache[fig["chip"]] = {r.figure: r.simulated_us for r in compare(measured, rep.to_dict())}
    return _add_cache[fig["chip"]][spec["figure"]], ""


def _gemm(fig, spec):
    """examples/gemm_kernel.py at size^3 (or mnk), timing-only; TFLOPS over the call's time (plus the
    framework's per-call dispatch for a torch.mm figure). `set`: the chip as a what-if of its
    profile (field -> value); `tile`: the L0 tile's (baseM, baseN) where the published kernel's
    is not CANN's A2 template; `trans_b`: B stored N x K (column-major), as the published call
    had it (default: only for 32-bit types, which need it); `swizzle`: the (offset, direction) of
    the published kernel's block order. A 16-bit figure in us runs through aclnnMm, unless
    `kernel: template` asks for the template kernel itself; then `blocks` spreads its tiles over
    the published kernel's block count, and `pipe` makes the value that pipe's mean busy time a
    block (msprof's aic_<pipe>_time); `batch` > 1 makes it a BatchMatMul through aclnnMatmul
    (batch x M x K by batch x K x N). For the template kernel, `step_k` sets its L1 depth in baseK
    steps (1: the Matmul API's Norm template, a base block a load; 4: MDL's stepKa = stepKb = 4),
    `k_shift` starts each block's K loop at its own L1 tile (enableKdimReorderLoad), and `value:
    aic_time` takes the launch's time on the cores (msprof's aicore_time, the slowest block)."""
    from gemm_kernel import DTYPES
    soc, dtype = fig["chip"], spec["dtype"]
    profile = load_profile(soc).override(spec["set"]) if spec.get("set") else None
    M, N, K = spec["mnk"] if "mnk" in spec else (spec["size"],) * 3
    in_t, out_t = DTYPES[dtype]
    tile = dict(zip(("baseM", "baseN"), spec.get("tile", ())))
    if spec.get("value") == "us" and dtype in ("FLOAT16", "BF16") and spec.get("kernel") != "template":
        value, note, fig["_launches"] = _mm_operator(soc, profile, M, N, K, in_t, tile, spec.get("batch", 1))
        return value, note
    trans_b = spec.get("trans_b", np.dtype(in_t).itemsize == 4)
    overrides = tuple(sorted(spec["set"].items())) if spec.get("set") else None
    t, rep = _template_gemm(soc, overrides, M, N, K, dtype, trans_b, tuple(sorted(tile.items())),
                            tuple(spec.get("swizzle", ())), spec.get("blocks"), spec.get("step_k"),
                            spec.get("k_shift", False))
    extra = fig["_reproduction"].get("torch_call_overhead_us", 0.0) if spec.get("call") == "torch.mm" else 0.0
    note = f"kernel {rep.time_us:.1f} us + call {extra} us, {t.baseM}x{t.baseN}x{t.baseK} tiles, bound by {rep.bound}"
    if "pipe" in spec:                    # msprof's mean busy time of one pipe a block
        from hardware_measurements import per_core
        return per_core(rep, spec["pipe"]) / rep.clock_mhz, f"{t.usedCoreNum} blocks, {note}"
    if spec.get("value") == "us":         # msprof's Task Duration of the kernel
        return rep.kernel_us, note
    if spec.get("value") == "aic_time":   # the launch's time on the cores (its slowest block)
        return rep.launches[0]["core_cycles"] / rep.clock_mhz, note
    return 2.0 * M * N * K / ((rep.time_us + extra) * 1e-6) / 1e12, note


@functools.lru_cache(maxsize=8)
def _template_gemm(soc, overrides, M, N, K, dtype, trans_b, tile, swizzle, blocks, step_k=None, k_shift=False):
    """The template MatMul kernel (examples/gemm_kernel.py), warm, on its own launch: (tiling,
    report). Cached: a figure's Task Duration and its pipe times come from one run."""
    from gemm_kernel import DTYPES, gemm_kernel, gemm_tiling, input_elements
    from hardware_measurements import run_warm
    profile = load_profile(soc).override(dict(overrides)) if overrides else None
    in_t, out_t = DTYPES[dtype]
    t = gemm_tiling(M, N, K, dtype, soc, trans_b, profile=profile, **dict(tile))
    if swizzle:                            # the published kernel's own block order
        t = dataclasses.replace(t, swizzleOffset=swizzle[0], swizzleDirection=swizzle[1])
    if blocks:                             # the published kernel's block count (its tiles spread over them)
        t = dataclasses.replace(t, usedCoreNum=blocks)
    if step_k:                             # the published kernel's L1 depth, in baseK steps
        t = dataclasses.replace(t, stepK=step_k, kTiles=-(-K // (step_k * t.baseK)))
    if k_shift:
        t = dataclasses.replace(t, kShift=True)
    a_elems, b_elems = input_elements(t)      # (FRACTAL_NZ, padded, on chips without ND -> NZ)
    buffers = {"a": (in_t, a_elems), "b": (in_t, b_elems), "c": (out_t, M * N)}
    return t, run_warm(gemm_kernel, t.usedCoreNum, buffers, (t,), kind="cube", soc=soc, profile=profile, runs=1)


def _mm_operator(soc, profile, M, N, K, in_t, tile, batch=1):
    """The call through aclnnMm, or aclnnMatmul on batch x M x K by batch x K x N (its launches: on
    A2, for 16-bit data, the MatMul or BatchMatMul alone), cold as one call: msprof's Task Durations
    summed (and the launches' names)."""
    import simulator
    from simulator import TensorLayout
    lead = (batch,) if batch > 1 else ()
    op, right = ("Matmul", "other") if batch > 1 else ("Mm", "mat2")
    r = simulator.run(op, soc, profile=profile, mode="timing", trace=False, self=TensorLayout(lead + (M, K), in_t),
                      cubeMathType=0, tiling=tile or None, **{right: TensorLayout(lead + (K, N), in_t)})
    t = r.report
    names = [x["name"] for x in t.launches]
    return t.kernel_us, f"aclnn{op}: {', '.join(names)}, bound by {t.bound}", names


def _unary(fig, spec):
    """examples/elementwise_kernel.py on every vector core; input bytes over one call's time (the
    published figure's own definition; `bytes_per_element` 8 counts input and output, for a figure
    that counts both). `launches` > 1: the operator written as that many
    elementwise torch ops, each a pass over the whole vector into a new tensor (the caching
    allocator's two blocks in turn: x -> A -> B -> A -> B). `calls` (default 1: a cold L2): the
    call repeated back to back on one device, the last one timed, as a benchmark with untimed
    warm-up calls and a timed loop runs it."""
    from elementwise_kernel import elementwise_kernel, elementwise_tiling
    from hardware_measurements import run_calls
    p = load_profile(fig["chip"])
    _, kind = p.core_kind_for("vector")
    n, launches, calls = spec["elements"], spec.get("launches", 1), spec.get("calls", 1)
    t = elementwise_tiling(n, kind.count, spec["op"], kind.buffers["UB"])
    names = ["x"] + ["a", "b"] * ((launches + 1) // 2)
    passes = [(elementwise_kernel, kind.count, "vector", (names[i], names[i + 1]), (t,)) for i in range(launches)]
    rep = run_calls(passes, {b: (np.float32, n) for b in dict.fromkeys(names[:launches + 1])}, soc=fig["chip"],
                    calls=calls)
    dm = rep.device_memory
    return spec.get("bytes_per_element", 4) * n / (rep.time_us * 1e-6) / 1e9, \
        f"call {calls} of {calls}: {launches} launch(es), {rep.time_us:.1f} us, device memory " \
        f"{dm['bytes'] / 2**20:,.0f} MiB at {dm['GBps']:,.0f} GB/s, L2 hits {rep.l2['hit_rate']:.0%}, bound by {rep.bound}"


def _stream(fig, spec):
    """benchmarks/calibration.py's all-core GM -> UB stream: the chip's read-bandwidth ceiling."""
    from calibration import KB, run_device, stream_kernel
    p = load_profile(fig["chip"])
    _, kind = p.core_kind_for("vector")
    cores = kind.count
    chunk = kind.buffers["UB"] // 2 // (32 * KB) * (32 * KB)
    per_core = max(4, int(p.device_memory.bandwidth_GBps * 1e9 * 300e-6 / cores) // chunk) * chunk
    rep, _, _ = run_device(stream_kernel(per_core, chunk), cores, {"g": (np.uint8, per_core * cores)},
                           kind="vector", soc=fig["chip"], trace=False)
    cyc = rep.launches[0]["cycles"] - (p.launch_cycles(cores, cores) - p.runtime.launch_gap_us * p.clock_mhz)   # less what a launch with no work costs
    return per_core * cores / (cyc / (p.clock_mhz * 1e6)) / 1e9, \
        f"profile device memory {p.device_memory.bandwidth_GBps:,.0f} GB/s"


def _cube_loop(fig, spec):
    """examples/cube_throughput_kernel.py (AIbench's harness: matmuls from L1, each loading L0A /
    L0B and running one Mmad) on one core, times the chip's cube cores."""
    from cube_throughput_kernel import cube_loop_macs_per_cycle
    p = load_profile(fig["chip"])
    _, kind = p.core_kind_for("cube")
    rate = cube_loop_macs_per_cycle(fig["chip"], spec["m"], spec["n"], spec["k"], l0_buffers=spec["l0_buffers"])
    best = kind.count * 2 * p.cube.macs_per_cycle["FLOAT16"] * p.clock_mhz * 1e6 / 1e12
    return kind.count * 2 * rate * p.clock_mhz * 1e6 / 1e12, \
        f"{rate / p.cube.macs_per_cycle['FLOAT16']:.1%} of the Cube per core, {spec['l0_buffers']} L0 buffer(s); " \
        f"peak {best:.1f}"


def _vector_loop(fig, spec):
    """examples/vector_throughput_kernel.py (AIbench's harness: 30 blocks, 100 x (two GM -> UB
    copies, one vec_mul of `repeats` repeats, one UB -> GM copy)): multiplies over the Vector
    pipe's busy cycles per core, times the chip's vector cores."""
    from vector_throughput_kernel import vector_loop_rates
    p = load_profile(fig["chip"])
    _, kind = p.core_kind_for("vector")
    on_unit, on_call, rep = vector_loop_rates(fig["chip"], spec["repeats"])
    return kind.count * on_unit * p.clock_mhz / 1e3, \
        f"{on_unit:.1f} multiplies per Vector-busy cycle per core (the pipe's peak " \
        f"{p.vector.repeat_bytes // 2 / p.vector.cycles_per_repeat['mul']:g} at " \
        f"{p.vector.cycles_per_repeat['mul']:g} cycles a repeat); over the whole loop {on_call:.1f}, bound by {rep.report.bound}"


def _step(fig, spec):
    """A whole training step captured from PyTorch (a shipped trace): the simulated calls of our
    operators and a roofline for every other kernel (docs/STEP.md), replayed on the chip; images
    per second at the trace's batch."""
    from simulator import studies
    w = studies.load_trace(HERE.parent / "traces" / spec["trace"])
    rows = studies.replay(w, fig["chip"], workers=spec.get("workers", 2), estimated=True)
    t = studies.point_totals(rows)[0]
    if t["failed"] or t["skipped"]:
        return None, f"{t['failed']} call(s) failed, {t['skipped']} not available"
    return spec["batch"] / (t["step_us"] * 1e-6), \
        f"step {t['time_us']:,.0f} + {t['estimated_us']:,.0f} us (simulated + estimated, " \
        f"{t['simulated_share']:.0%} simulated)"


def _aclnn_conv(fig, spec):
    """aclnnConvolutionBackward, gradWeight only, timing-only, cold (the source evicts the L2 before
    each timed run): msprof's Task Durations of its kernels, summed, less the Cast of a 3D
    gradWeight to the weight's dtype that aclnn makes after its TransData: the rows time torch_npu's
    single-op path, which returns that gradWeight in FP32 and issues no Cast. `mask`: the outputMask
    (gradWeight only if not given). `set`: the chip as a what-if
    of its profile; `launch`: only the launch whose name starts with it (its Task Duration);
    `blockDim`: the published task's block count, forced on the plan (its units dealt over that
    many blocks) where the figure times a kernel whose split the data set records."""
    import simulator
    from simulator import TensorLayout
    from simulator.studies.trace import numpy_dtype
    dt = numpy_dtype(spec["dtype"])
    w = spec["weight"]
    nd = len(w) - 2
    profile = load_profile(fig["chip"]).override(spec["set"]) if spec.get("set") else None
    if WHOLE_SLICES and "blockDim" not in spec:
        slices = spec["grad_output"][0] * (spec["grad_output"][2] if nd == 3 else 1)
        cores = (profile or load_profile(fig["chip"])).core_kind_for("cube")[1].count
        spec = {**spec, "blockDim": -(-slices // -(-slices // cores))}
    r = simulator.run("ConvolutionBackward", soc=None if profile else fig["chip"], profile=profile, mode="timing",
                      trace=False, gradOutput=TensorLayout(spec["grad_output"], dt), input=TensorLayout(spec["x"], dt),
                      weight=TensorLayout(w, dt), biasSizes=[w[0]], stride=spec["stride"], padding=spec["padding"],
                      dilation=spec["dilation"], transposed=False, outputPadding=[0] * nd, groups=spec["groups"],
                      outputMask=spec.get("mask", [False, True, False]), cubeMathType=0,
                      tiling={"blockDim": spec["blockDim"]} if "blockDim" in spec else None)
    if "launch" not in spec:
        fig["_launches"] = [l["name"] for l in r.report.launches]
        cast = sum(l["cycles"] for l in r.report.launches if l["name"].startswith("Cast(gradWeight"))
        return r.report.kernel_us - cast / r.report.clock_mhz, _launch_list(r.report)
    got = next(l for l in r.report.launches if l["name"].startswith(spec["launch"]))
    side = next(iter(got["sides"].values()))
    busy = ", ".join(f"{p} {v / side['blocks'] / r.report.clock_mhz:.1f}" for p, v in sorted(side["busy"].items()))
    note = f"{got['block_dim']} blocks; a block's pipes (us): {busy}"
    if "blockDim" in spec and not WHOLE_SLICES:     # beside it, the plan's own split of the same call
        own = _aclnn_conv(fig, {k: v for k, v in spec.items() if k != "blockDim"})
        note += f"; the plan's own split: {own[0]:.1f} us ({own[0] / fig['measured']:.3f}), {own[1].split(';')[0]}"
    return got["cycles"] / r.report.clock_mhz, note


def _launch_list(rep) -> str:
    """A report's launches and their times, in order."""
    return "; ".join(f"{l['name'].split('(')[0]} {l['cycles'] / rep.clock_mhz:.1f} us" for l in rep.launches)


def _aclnn_conv_fwd(fig, spec):
    """aclnnConvolution (the forward), timing-only, one call on a fresh device: the launch whose
    name starts with `launch` (its Task Duration; with `pipe`, that pipe's mean busy time a block,
    msprof's aic_<pipe>_time), or every launch's summed."""
    call = {k: v for k, v in spec.items() if k not in ("launch", "pipe")}
    rep = _conv_fwd_report(fig["chip"], json.dumps(call, sort_keys=True))
    if "launch" not in spec:
        return rep.kernel_us, _launch_list(rep)
    got = next(l for l in rep.launches if l["name"].startswith(spec["launch"]))
    if "pipe" in spec:
        side = next(iter(got["sides"].values()))
        return side["busy"].get(spec["pipe"], 0.0) / side["blocks"] / rep.clock_mhz, \
            f"{got['block_dim']} blocks; {_launch_list(rep)}"
    return got["cycles"] / rep.clock_mhz, _launch_list(rep)


@functools.lru_cache(maxsize=4)
def _conv_fwd_report(soc: str, call: str):
    """The report of one aclnnConvolution call (a JSON of its spec): cached, since a call's launches
    are rows of their own."""
    import simulator
    from simulator import TensorLayout
    from simulator.studies.trace import numpy_dtype
    spec = json.loads(call)
    dt = numpy_dtype(spec["dtype"])
    w = spec["weight"]
    nd = len(w) - 2
    r = simulator.run("Convolution", soc=soc, mode="timing", trace=False,
                      input=TensorLayout(spec["x"], dt), weight=TensorLayout(w, dt), bias=None,
                      stride=spec["stride"], padding=spec["padding"], dilation=spec.get("dilation", [1] * nd),
                      transposed=False, outputPadding=[0] * nd, groups=spec.get("groups", 1), cubeMathType=0)
    return r.report


def _sigmoid(fig, spec):
    """The call through aclnnSigmoid (its one launch: CANN's Sigmoid kernel, ops/elementwise/sigmoid.py),
    cold (the source evicts the L2 before each timed run): its Task Duration."""
    import simulator
    from simulator import TensorLayout
    from simulator.studies.trace import numpy_dtype
    dt = numpy_dtype(spec["dtype"])
    r = simulator.run("Sigmoid", fig["chip"], mode="timing", trace=False,
                      self=TensorLayout(spec["shape"], dt))
    rep, facts = r.report, r.report.tiling
    fig["_launches"] = [l["name"] for l in rep.launches]
    return rep.kernel_us, (f"{facts['blockDim']} blocks, tiles of {facts['tileLength']}, "
                           f"L2 hits {rep.l2['hit_rate']:.0%}, bound by {rep.bound}")


def _transdata(fig, spec):
    """CANN's TIK TransData NCDHW -> NDC1HWC0 (ops/conv/prologue.py's 3D map pass: TIK's tiles,
    its one-axis core split), on its own launch, warm: its Task Duration."""
    from hardware_measurements import run_calls
    from ops.conv.geometry import MapLayout
    from ops.conv.prologue import Prologue, PrologueTensors, plan_to5hd_tik, prologue_body, tik_to5hd_blocks
    from simulator.studies.trace import numpy_dtype
    p = load_profile(fig["chip"])
    _, kind = p.core_kind_for("vector")
    N, C, D, H, W = spec["shape"]
    dt = numpy_dtype(spec["dtype"])
    t = plan_to5hd_tik("x", N=N, G=1, Cg=C, c0=32 // dt.itemsize, P=D * H * W, lay=MapLayout(N, False, D, H, H, W),
                       src_dtype=dt, compute_dtype=dt, ub_bytes=kind.buffers["UB"], tile_scalar=p.scalar.tik_tile_cycles)
    blocks = [[(("5hd", 0), it) for it in b] for b in tik_to5hd_blocks(t, kind.count)]
    pro = Prologue(kind.buffers["UB"], 0, [(t, "input", "dy_map")], None, None, blocks)
    out = t.C1 * t.c0 * N * D * H * W

    def body(src, dst, P):
        prologue_body(PrologueTensors(input=src, dy_map=dst), P)
    rep = run_calls([(body, len(blocks), "vector", ("src", "dst"), (pro,))],
                    {"src": (dt, N * C * D * H * W), "dst": (dt, out)}, soc=fig["chip"], calls=2)
    used = sum(1 for b in blocks if b)
    return rep.kernel_us, f"{used} of {len(blocks)} blocks with tiles, bound by {rep.bound}"


def _memset(fig, spec):
    """CANN's MemSet (ops.common's zero_kernel) of `bytes` on one block or on every vector core
    (`all`, as aclnn launches it), timed warm as msprof's Task Duration."""
    from hardware_measurements import run_calls
    from ops.common import ZeroTiling, plan_zero, zero_kernel
    p = load_profile(fig["chip"])
    n = spec["bytes"]
    t = plan_zero(n, p) if spec["blocks"] == "all" else ZeroTiling(n, n, ((0, n),))
    rep = run_calls([(zero_kernel, len(t.blocks), "vector", ("out",), (t,))], {"out": (np.uint8, max(n, 32))},
                    soc=fig["chip"], calls=2)
    return rep.kernel_us, f"{len(t.blocks)} block(s)"


def _data_copy(fig, spec):
    """examples/data_copy_kernel.py (Ascend C's data-copy best practice): a FLOAT16 matrix read tile
    by tile into L1 (ND -> NZ, cube cores) or UB (DataCopyPad, vector cores), cold in the L2; its
    Task Duration."""
    from data_copy_kernel import DataCopyTiling, run
    m, n = spec["shape"]
    rep = run(fig["chip"], spec["path"], DataCopyTiling(m, n, spec["blocks"], *spec["tile"], order=spec["order"])).report
    return rep.kernel_us, f"bound by {rep.bound}, L2 hit rate {rep.l2['hit_rate']:.1%}"


def _add_tuning(fig, spec):
    """examples/add_tuning_kernel.py (Ascend C's Add tuning sample): one case, one launch, cold in
    the L2; its Task Duration."""
    from add_tuning_kernel import run
    rep = run(fig["chip"], spec["case"]).report
    return rep.kernel_us, (f"bound by {rep.bound}, device memory {rep.device_memory['bytes'] / 1e6:.0f} MB, "
                           f"L2 hit rate {rep.l2['hit_rate']:.1%}")


REPRODUCERS = {"add_sample": _add_sample, "gemm": _gemm, "unary": _unary, "stream": _stream,
               "cube_loop": _cube_loop, "vector_loop": _vector_loop, "step": _step, "memset": _memset,
               "aclnn_conv": _aclnn_conv, "aclnn_conv_fwd": _aclnn_conv_fwd, "sigmoid": _sigmoid, "transdata": _transdata,
               "data_copy": _data_copy, "add_tuning": _add_tuning}


def simulate(fig: dict) -> Result:
    spec = fig.get("reproduce") or {}
    if spec.get("kind") not in REPRODUCERS:
        return Result(fig, None, spec.get("why", "not reproduced"))
    value, note = REPRODUCERS[spec["kind"]](fig, spec)
    return Result(fig, value, note)


# ---------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------
def table(results: list[Result], sources: dict) -> str:
    out = ["| figure | chip (published as) | source | measured | simulated | ratio | within |",
           "|---|---|---|---|---|---|---|"]
    for r in results:
        f = r.figure
        chip = f["chip"] if f["chip"] == f["chip_published"] else f"{f['chip']} ({f['chip_published']})"
        if r.simulated is None:
            out.append(f"| {f['what']} | {chip} | {f['source']} | {f['measured']:.4g} {f['unit']} | - | - | "
                       f"not reproduced: {r.note} |")
            continue
        ok = "yes" if r.within else f"NO (bound {f['bound']:.0%})"
        out.append(f"| {f['what']} | {chip} | {f['source']} | {f['measured']:.4g} {f['unit']} | "
                   f"{r.simulated:.4g} | {r.ratio:.3f} | {ok} |")
    return "\n".join(out)


def summary(results: list[Result]) -> str:
    done = [r for r in results if r.ratio is not None]
    if not done:
        return "no figure reproduced"
    errs = [abs(r.ratio - 1) for r in done]
    worst = max(done, key=lambda r: abs(r.ratio - 1))
    inside = sum(r.within for r in done)
    line = (f"{len(done)} figures reproduced ({len(results) - len(done)} not), {inside} within their bound; "
            f"mean absolute error {np.mean(errs):.1%}, worst {worst.figure['id']} "
            f"(ratio {worst.ratio:.3f})")
    kinds: dict = {}
    for r in done:                         # per reproducer: the geometric mean of simulated / measured
        kinds.setdefault((r.figure["source"], r.figure["reproduce"]["kind"]), []).append(r.ratio)
    return line + "".join(f"\n  {src} {kind}: {len(v)} figures, geometric mean ratio "
                          f"{float(np.exp(np.mean(np.log(v)))):.3f} ({min(v):.3f} .. {max(v):.3f})"
                          for (src, kind), v in sorted(kinds.items()) if len(v) > 1)


def drifted(results: list[Result]) -> list[str]:
    """Figures whose ratio moved more than DRIFT from the recorded expected_ratio."""
    bad = []
    for r in results:
        exp = r.figure.get("expected_ratio")
        if r.ratio is None or exp is None:
            continue
        if not exp:              # a new figure's placeholder: nothing recorded to drift from
            bad.append(f"{r.figure['id']}: ratio {r.ratio:.3f}, none recorded (run --record)")
        elif abs(r.ratio / exp - 1) > DRIFT:
            bad.append(f"{r.figure['id']}: ratio {r.ratio:.3f}, recorded {exp:.3f}")
    return bad


def record(results: list[Result], path: Path = FIGURES) -> None:
    """Write each simulated figure's ratio back into the data file as its expected_ratio."""
    text = path.read_text()
    for r in results:
        if r.ratio is None:
            continue
        # (within the figure's own entry: a figure not yet recorded must not take the next one's)
        pat = re.compile(r"(\{id: " + re.escape(r.figure["id"]) + r",(?:(?!\n  (?:- \{id: |#)).)*?expected_ratio: )"
                         r"(?:[0-9.]+|null|~)", re.S)
        text, n = pat.subn(lambda m: m.group(1) + f"{r.ratio:.3f}", text, count=1)
        if n != 1:
            raise ValueError(f"{r.figure['id']}: its entry has no expected_ratio to record (add one)")
    path.write_text(text)


def run(figures: list[dict], quick: bool = False, only: set[str] | None = None, source: str | None = None,
        soc: str | None = None) -> list[Result]:
    """Simulate the figures selected (quick ones, by id, of one source), on their own chip or, with
    `soc`, on another profile (to ask which chip a source's rows support)."""
    out = []
    for f in figures:
        if (quick and not f.get("quick")) or (only and f["id"] not in only) or (source and f["source"] != source):
            continue
        out.append(simulate(dict(f, chip=soc) if soc else f))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the figures marked quick")
    ap.add_argument("--only", nargs="*", help="figure ids")
    ap.add_argument("--source", help="only the figures of this source (e.g. cann_bench_910b2)")
    ap.add_argument("--soc", help="simulate the figures on this chip profile instead of their own (with "
                                  "--record refused: a ratio is recorded on the figure's own chip)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a ratio drifted from its recorded value")
    ap.add_argument("--record", action="store_true", help="write the ratios back as expected_ratio")
    ap.add_argument("--rows", metavar="FILE", help="simulate the rows of FILE, in the CANN team's benchmark "
                                                    "format (benchmarks/measured_rows.py), instead of the "
                                                    "published figures")
    ap.add_argument("--dw-blocks", choices=["slices"], help="what-if: a gradWeight call's Cube launch on whole "
                                                           "(image, output depth) slices a block, in as few rounds "
                                                           "as the cores allow, not the plan's split")
    args = ap.parse_args(argv)
    sources, figures = load()
    if (args.soc or args.dw_blocks) and args.record:
        ap.error("--record with a what-if (--soc, --dw-blocks): ratios are recorded as the model is")
    global WHOLE_SLICES
    WHOLE_SLICES = args.dw_blocks == "slices"
    if args.soc:
        from simulator.profile import ProfileError
        try:
            load_profile(args.soc)
        except ProfileError as e:
            ap.error(f"--soc: {e}")
    if args.rows:
        if args.record or args.check or args.quick or args.source:
            ap.error("--rows takes --only, --soc and --dw-blocks; nothing is recorded for its rows")
        return _main_rows(Path(args.rows), set(args.only) if args.only else None, args.soc)
    results = run(figures, args.quick, set(args.only) if args.only else None, args.source, args.soc)
    for split in ("calibration", "validation"):
        part = [r for r in results if sources[r.figure["source"]]["split"] == split]
        print_part(f"{split.capitalize()} ({len({r.figure['source'] for r in part})} sources)", part, sources)
    if args.record:
        record(results)
        print(f"recorded {sum(r.ratio is not None for r in results)} ratios in {FIGURES.name}")
    bad = [] if args.record else drifted(results)      # (recorded: nothing to drift from)
    if bad:
        print("drifted from the recorded ratios:\n  " + "\n  ".join(bad))
    return 1 if (args.check and bad) else 0


def _main_rows(path: Path, only: set[str] | None, soc: str | None) -> int:
    """--rows: the file's rows as figures (measured_rows.py), each simulated as its kind of
    published figure is; a call the simulator refuses is that row's note, not a traceback."""
    from measured_rows import RowsError, figure, launches_differ, load_rows
    from simulator.enums import AclnnError, KernelError
    try:
        rows = load_rows(path)
    except RowsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    figs = [figure(r, chip=soc) if soc else figure(r) for r in rows]
    if only:
        wanted = {i.replace("-", "_") for i in only}
        figs = [f for f in figs if f["id"] in wanted]
    results = []
    for i, f in enumerate(figs):
        print(f"row {i + 1} of {len(figs)}: {f['id']}", file=sys.stderr, flush=True)
        try:
            r = simulate(f)
        except (AclnnError, KernelError) as e:
            r = Result(f, None, f"the simulator refused it: {e}")
        except Exception as e:            # (a fault of ours: named in the row's line, the other rows run)
            r = Result(f, None, f"the simulator failed on it: {type(e).__name__}: {e}")
        if r.simulated is not None and (differ := launches_differ(f, f.get("_launches", []))):
            r.note += f" ({differ})"
        results.append(r)
    print_part(f"Rows of {path.name} ({len(results)})", results, {})
    return 0


def print_part(title: str, results: list[Result], sources: dict) -> None:
    """A part's table, its summary and each reproduced figure's note."""
    print(f"## {title}\n")
    print(table(results, sources))
    print()
    print(summary(results))
    print()
    for r in results:
        if r.note and r.simulated is not None:
            print(f"- {r.figure['id']}: {r.note}")
    print()


if __name__ == "__main__":
    sys.exit(main())
