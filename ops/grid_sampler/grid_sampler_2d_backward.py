"""aclnnGridSampler2DBackward: the gradients of grid_sample (2-D) with respect to its input and
its grid, as PyTorch's `grid_sampler_2d_backward` computes them.

Checks (SPEC section 4, in this order): a null outputMask -> success with workspace 0 (nothing to
do; also when both bits are false, as CANN does); an outputMask that is not 2 long -> 161002;
null gradOutput / input / grid, or a null inputGrad / gridGrad whose mask bit is set -> 161001;
the operator exists on the chip's series (161002 on the inference series); valid views; all
dtypes equal input's and in the series' list (profile operators.GridSampler2DBackward.dtypes);
all 4-D; N equal; C equal; input H, W != 0; grid dims 1, 2 == gradOutput dims 2, 3; grid last
dim == 2; inputGrad shape == input's, gridGrad shape == grid's; interpolationMode in the
profile's interpolation_modes (bicubic 2 on A2 only) and paddingMode in 0..2. All -> 161002.

How the kernel works (the strategy CANN's A2 path takes: l0op::Transpose to NHWC, then the
GridSamplerGrad kernel, then a transpose back):

1. `TransposeToNHWC(input)` (only when gridGrad is wanted with bilinear / bicubic): the NCHW input
   becomes an NHWC copy in the workspace, in the compute dtype (FLOAT; DOUBLE for DOUBLE), with
   `pad` zero pixels before and after so a corner run that starts one pixel left of the image or
   ends one pixel right of it stays inside the buffer. In NHWC one corner is one C-long burst and
   the two corners of a bilinear row (x0, x0+1) are one 2C-long burst: one gather per row.
2. `InitWorkspace(inputGrad accumulator)` (when inputGrad is wanted): a zeroed NHWC FLOAT
   accumulator of the same layout; atomic adds land there (FP16/BF16 would lose the sum in
   their own precision, and the transpose back needs a buffer anyway).
3. `GridSampler2DGrad` on the vector cores, per tile of P grid points of one batch:
   * MTE2 brings the grid tile; the vector pipe de-interleaves x / y (Transpose), casts to FP32,
     unnormalises, applies the padding with its gradient factor (border: clip; reflection:
     reflect with flips and sign, then clip), takes floor / round-half-to-even, the corner
     weights and their in-bounds masks (Compare / Select: no data-dependent control flow) and
     the int32 GM offsets of each corner run, clamped so every run stays inside the buffer.
   * MTE2 gathers every run of every point, in bounds or not (the instruction stream must not
     depend on the data): `DataCopyPad[gather]` with the offset read from UB when it executes.
     Bilinear 2 gathers per point, bicubic 4 (zeros) or 16 (border / reflection), nearest none.
   * gradOutput arrives channel-major straight from NCHW (one strided DataCopyPad per tile) and
     is transposed to point-major. gridGrad: per corner the dot product over channels of the
     gathered row and gradOutput (Mul, Transpose, a tree of Adds), masked, times the weights'
     derivatives, times the padding factor; written per tile. inputGrad: the weights broadcast
     along the channels (a doubling Copy and a Transpose) times gradOutput, then
     `DataCopyPad[scatter]+AtomicAdd` per run per point into the accumulator.
   * Channels beyond what fits UB are processed in chunks (the gathers then move a chunk each).
   * The steps (tile, chunk) are software-pipelined: step s+1's gathers are issued alternately
     with step s's scatters, so the scalar unit's in-order issue into bounded pipe queues never
     leaves MTE2 idle behind a backlog of MTE3 work; offsets are double-buffered by tile parity.
     Tiles are split evenly over the vector cores.
4. `TransposeCast(inputGrad)`: the accumulator back to NCHW, cast to the output dtype.
Non-contiguous inputs are first copied contiguous (Contiguous); non-contiguous outputs are
computed into the workspace and written back (ViewCopy).

FP16 / BF16 are computed in FP32 inside the kernels (casts are instructions), as the real kernel
does; on the training series CANN casts with separate Cast operators around a FP32 kernel, which
we fold into the transposes and the main kernel. DOUBLE (A2, as CANN's code lists it) runs the
same kernels in float64; the vector unit has no float64 rate, so its cost is the FLOAT class per
256 bytes, and the accumulator takes float64 atomic adds [ASSUMPTIONS: CANN really dispatches
DOUBLE to the AI CPU, which is not modelled].

Differences from the seed document: it lists interpolationMode 0 and 1 only; SPEC (recent CANN
code) adds bicubic (2) on A2, which we accept there. It lists 161001 for any null output; we
follow SPEC (only outputs whose outputMask bit is set must be non-null), and a null outputMask
(or both bits false) returns success with workspace 0, as CANN's code does.

Modelling notes: the scalar unit's per-point address arithmetic (GetValue) is not charged beyond
the one-cycle issue of each copy; gathers and scatters see the L2 at the address an identity grid
would touch (their real addresses are data, and timing-only mode has none); a point with NaN
coordinates is treated as -100 (outside), as the CANN kernel does; unnormalised coordinates are
clamped to +-2^23 (FP32 resolves no pixel beyond); a zero-weight corner still adds 0 * gradOutput,
so an infinite gradOutput turns an out-of-bounds neighbour into NaN where PyTorch skips it.
"""
from __future__ import annotations

import numpy as np

from simulator.aclnn import (OpDef, Param, Plan, Workspace, check_tensor_view, register, require_present,
                             require_support)
from simulator.enums import NUMPY_OF, aclDataType, dtype_name, param_invalid
from simulator.program import KernelLaunch
from simulator.arith import align_up, ceil_div
from ..common import tensor_arg, vector_core_count, view_copy_launch, workspace_arg, zero_fill_launch
from ..tiling_space import distinct_accepted
from .kernel import grid_sampler2d_grad_kernel
from .layout_kernels import nchw_to_nhwc_kernel, nhwc_to_nchw_kernel, plan_layout
from .tiling import BILINEAR, NEAREST, OP, P_ALIGN, P_MAX, PADDING_MODES, TILING_FIELDS, plan_main


def _mask(a: dict):
    m = a["outputMask"]
    if m is None:
        return None
    vals = tuple(getattr(m, "values", m))
    return vals


def check(a: dict, profile) -> None:
    mask = _mask(a)
    if mask is None:
        return                                       # nothing to compute (plan: workspace 0)
    if len(mask) != 2:
        raise param_invalid(f"outputMask must have 2 entries (inputGrad, gridGrad), got {len(mask)}")
    if not any(mask):
        return
    names = ["gradOutput", "input", "grid"] + [n for n, on in zip(("inputGrad", "gridGrad"), mask) if on]
    require_present(a, names)
    support = require_support(OP, profile)
    for name in names:
        check_tensor_view(a[name], name)
    x = a["input"]
    xdt = dtype_name(x.dataType)
    for name in names:
        if a[name].dataType != x.dataType:
            raise param_invalid(f"{name} has dtype {dtype_name(a[name].dataType)}; it must equal "
                                f"input's ({xdt})")
    if xdt not in support.dtypes:
        raise param_invalid(f"input has dtype {xdt}; {profile.series_name} supports "
                            f"{', '.join(support.dtypes)}")
    for name in names:
        if len(a[name].viewDims) != 4:
            raise param_invalid(f"{name} must be 4-D, got shape {list(a[name].viewDims)}")
    go, g = a["gradOutput"].viewDims, a["grid"].viewDims
    xs = x.viewDims
    if not (xs[0] == g[0] == go[0]):
        raise param_invalid(f"input, grid and gradOutput must have one batch size, got input "
                            f"{list(xs)}, grid {list(g)}, gradOutput {list(go)}")
    if xs[1] != go[1]:
        raise param_invalid(f"input and gradOutput must have one channel count, got input "
                            f"{list(xs)} and gradOutput {list(go)}")
    if xs[2] == 0 or xs[3] == 0:
        raise param_invalid(f"input must have non-empty spatial dimensions, got {list(xs)}")
    if g[1] != go[2] or g[2] != go[3]:
        raise param_invalid(f"grid dims 1, 2 must equal gradOutput dims 2, 3, got grid {list(g)} "
                            f"and gradOutput {list(go)}")
    if g[3] != 2:
        raise param_invalid(f"grid's last dimension must be 2, got {list(g)}")
    if mask[0] and a["inputGrad"].viewDims != xs:
        raise param_invalid(f"inputGrad shape {list(a['inputGrad'].viewDims)} must equal input's {list(xs)}")
    if mask[1] and a["gridGrad"].viewDims != g:
        raise param_invalid(f"gridGrad shape {list(a['gridGrad'].viewDims)} must equal grid's {list(g)}")
    modes = support.options.get("interpolation_modes", [BILINEAR, NEAREST])
    modes = [modes] if isinstance(modes, (int, np.integer)) else list(modes)     # a what-if may give one
    im, pm = a["interpolationMode"], a["paddingMode"]
    if not isinstance(im, (int, np.integer)) or isinstance(im, bool) or int(im) not in modes:
        raise param_invalid(f"interpolationMode {im!r} is not supported on {profile.series_name} "
                            f"(supported: {list(modes)})")
    if not isinstance(pm, (int, np.integer)) or isinstance(pm, bool) or int(pm) not in PADDING_MODES:
        raise param_invalid(f"paddingMode {pm!r} must be 0 (zeros), 1 (border) or 2 (reflection)")


def _nothing(note: str) -> Plan:
    return Plan(tiling={"note": note})


def plan(a: dict, profile, tiling: dict) -> Plan:
    mask = _mask(a)
    if mask is None or not any(mask):
        return _nothing("outputMask is null or all false: nothing to compute")
    x, grid = a["input"], a["grid"]
    N, C = x.viewDims[:2]
    Ho, Wo = grid.viewDims[1], grid.viewDims[2]
    outs = {"inputGrad": a["inputGrad"] if mask[0] else None,
            "gridGrad": a["gridGrad"] if mask[1] else None}
    if N * C * Ho * Wo == 0:
        return _plan_empty(outs, profile)
    if int(a["interpolationMode"]) == NEAREST and not mask[0]:
        return _plan_nearest_grid_grad(outs["gridGrad"], profile)
    return _plan_main(a, outs, profile, tiling)


def _zero_fill_launches(name: str, t, part, nbytes: int, ws, profile) -> list[KernelLaunch]:
    """Zeros for output `t`: straight into it, or (non-contiguous: `part` of the workspace)
    into the workspace and then written back through its view."""
    if part is None:
        return [zero_fill_launch(f"InitOutput({name})", tensor_arg(t, name) + t.offset, nbytes, profile)]
    dense = workspace_arg(ws, part, t.dtype, f"workspace:{name}")
    return [zero_fill_launch(f"InitOutput({name})", dense, nbytes, profile),
            view_copy_launch(t, name, profile, gather=False)[0](dense)]


def _plan_empty(outs: dict, profile) -> Plan:
    """Empty gradOutput: the outputs that are not empty are zeros."""
    workspace = Workspace()
    zero_jobs = []
    for name, t in outs.items():
        if t is None or t.numel() == 0:
            continue
        nbytes = t.numel() * t.itemsize
        part = None if t.is_contiguous() else workspace.add(
            f"zeros for {name} before the strided write-back", nbytes)
        zero_jobs.append((name, t, part, nbytes))
    if not zero_jobs:
        return _nothing("empty tensors: nothing to compute")

    def build_empty(ws):
        return [launch for name, t, part, nbytes in zero_jobs
                for launch in _zero_fill_launches(name, t, part, nbytes, ws, profile)]
    return Plan(workspace, build_empty, {"note": "empty gradOutput: the gradients are zeros"})


def _plan_nearest_grid_grad(t, profile) -> Plan:
    """Nearest sampling without inputGrad: gridGrad is zero everywhere."""
    workspace = Workspace()
    nbytes = t.numel() * t.itemsize
    part = None if t.is_contiguous() else workspace.add("zeros for gridGrad before the strided write-back",
                                                         nbytes)

    def build_zero(ws):
        return _zero_fill_launches("gridGrad", t, part, nbytes, ws, profile)
    return Plan(workspace, build_zero, {"note": "nearest: gridGrad is zero; no inputGrad wanted"})


def _plan_main(a: dict, outs: dict, profile, tiling: dict) -> Plan:
    """The four-step plan (module docstring): contiguous copies of non-contiguous inputs, the
    NHWC input and accumulator, the main kernel, the transpose back and the strided write-backs."""
    want_in, want_gg = outs["inputGrad"] is not None, outs["gridGrad"] is not None
    x, go, grid = a["input"], a["gradOutput"], a["grid"]
    N, C, H, W = x.viewDims
    Ho, Wo = grid.viewDims[1], grid.viewDims[2]
    interp, padding, align = int(a["interpolationMode"]), int(a["paddingMode"]), bool(a["alignCorners"])
    io = NUMPY_OF[x.dataType]
    cdt = np.dtype(np.float64) if x.dataType == aclDataType.ACL_DOUBLE else np.dtype(np.float32)
    t = plan_main(N, C, H, W, Ho, Wo, interp, padding, align, io, cdt, want_in, want_gg, profile,
                  tiling)
    inputs = {"gradOutput": go, "input": x, "grid": grid}
    workspace = Workspace()
    parts = _main_workspace(workspace, t, inputs, outs, cdt)
    lay_in = plan_layout(N, C, H * W, io, cdt, t.pad, profile) if t.need_x else None
    lay_out = plan_layout(N, C, H * W, cdt, io, t.pad, profile) if want_in else None
    runs = len(t.runs)
    gathers = N * Ho * Wo * runs * t.nch if t.need_x else 0
    scatters = N * Ho * Wo * runs * t.nch if want_in else 0
    run_len = sum(L for _, L, _, _ in t.runs)          # taps over a point's runs
    esz = cdt.itemsize
    report = {"blockDim": len(t.blocks), "pointsPerTile": t.P, "channelsPerChunk": t.Cc,
              "channelChunks": t.nch, "cornerPlanes": t.K, "runsPerPoint": runs,
              "gathers": gathers, "gatherBytes": gathers * run_len // max(runs, 1) * C * esz,
              "atomicScatters": scatters, "atomicBytes": scatters * run_len // max(runs, 1) * C * esz,
              "computeDtype": dtype_name(cdt), "interpolationMode": interp, "paddingMode": padding,
              "alignCorners": align, "outputMask": [want_in, want_gg]}
    return Plan(workspace, _main_builder(t, inputs, outs, parts, lay_in, lay_out, cdt, profile), report)


def _main_workspace(workspace: Workspace, t, inputs: dict, outs: dict, cdt) -> dict:
    """Add the main plan's workspace parts, in this order: contiguous copies of non-contiguous
    inputs, the NHWC input, the inputGrad accumulator, contiguous outputs before their strided
    write-back. Returns them by role."""
    add_ws = workspace.add
    contig = {}
    for name, tensor in inputs.items():
        if name == "input" and not t.need_x:
            continue
        if not tensor.is_contiguous():
            contig[name] = add_ws(f"contiguous copy of {name} (non-contiguous input)",
                                  tensor.numel() * tensor.itemsize)
    N, C, H, W = inputs["input"].viewDims
    nhwc_bytes = ((N * H * W) + 2 * t.pad) * C * cdt.itemsize
    x_part = add_ws(f"input transposed to NHWC in {dtype_name(cdt)}, {t.pad} zero pixel(s) each end, "
                    f"for the corner gathers", nhwc_bytes) if t.need_x else None
    acc_part = add_ws(f"inputGrad accumulator, NHWC {dtype_name(cdt)}, {t.pad} pixel(s) each end: "
                      f"the atomic adds land here", nhwc_bytes) if outs["inputGrad"] is not None else None
    out_parts = {}
    for name, tensor in outs.items():
        if tensor is not None and not tensor.is_contiguous():
            out_parts[name] = add_ws(f"contiguous {name} before the strided write-back",
                                     tensor.numel() * tensor.itemsize)
    return {"contig": contig, "x": x_part, "acc": acc_part, "outs": out_parts, "nhwc_bytes": nhwc_bytes}


def _main_builder(t, inputs: dict, outs: dict, parts: dict, lay_in, lay_out, cdt, profile):
    """build(ws) for the main plan: the launches in order, given the workspace's address."""
    contig, out_parts = parts["contig"], parts["outs"]
    builders = {name: view_copy_launch(tensor, name, profile, gather=True)[0]
                for name, tensor in inputs.items() if name in contig}
    out_builders = {name: view_copy_launch(outs[name], name, profile, gather=False)[0] for name in out_parts}

    def build(ws):
        launches = []
        args = {}
        for name, tensor in inputs.items():
            if name in contig:
                dense = workspace_arg(ws, contig[name], tensor.dtype, f"workspace:{name}")
                launches.append(builders[name](dense))
                args[name] = dense
            else:
                args[name] = tensor_arg(tensor, name) + tensor.offset
        xws = acc = None
        if t.need_x:
            xws = workspace_arg(ws, parts["x"], cdt, "workspace:input NHWC")
            launches.append(KernelLaunch("TransposeToNHWC(input)", nchw_to_nhwc_kernel,
                                         len(lay_in.blocks), "vector", (args["input"], xws, lay_in)))
        if outs["inputGrad"] is not None:
            acc = workspace_arg(ws, parts["acc"], cdt, "workspace:inputGrad accumulator")
            launches.append(zero_fill_launch("InitWorkspace(inputGrad accumulator)", acc,
                                             parts["nhwc_bytes"], profile))
        dst = {}
        for name, tensor in outs.items():
            if tensor is None:
                dst[name] = None
            elif name in out_parts:
                dst[name] = workspace_arg(ws, out_parts[name], tensor.dtype, f"workspace:{name}")
            else:
                dst[name] = tensor_arg(tensor, name) + tensor.offset
        launches.append(KernelLaunch("GridSampler2DGrad", grid_sampler2d_grad_kernel, len(t.blocks),
                                     "vector", (args["gradOutput"], args["grid"], xws, acc,
                                                dst["gridGrad"], t)))
        if acc is not None:
            launches.append(KernelLaunch("TransposeCast(inputGrad)", nhwc_to_nchw_kernel,
                                         len(lay_out.blocks), "vector", (acc, dst["inputGrad"], lay_out)))
        for name in out_parts:
            launches.append(out_builders[name](dst[name]))
        return launches
    return build


def infer_outputs(inputs: dict) -> dict:
    x, grid = inputs["input"], inputs["grid"]
    mask = inputs.get("outputMask")
    mask = (True, True) if mask is None else tuple(mask)
    out = {}
    if len(mask) > 0 and mask[0]:
        out["inputGrad"] = (tuple(x.shape), x.dtype)
    if len(mask) > 1 and mask[1]:
        out["gridGrad"] = (tuple(grid.shape), grid.dtype)
    return out


CHANNEL_SPLITS = (1, 2, 4, 8)          # channelsPerChunk: C over these (aligned to 32 B of the compute dtype)
CORE_FRACTIONS = (4, 2, 1)            # blockDim: all the vector cores, half, a quarter


def tiling_space(inputs: dict, profile) -> list[dict]:
    """Candidate tilings of the main kernel (`ascend-sim tune`), the full product of:

    - pointsPerTile: every multiple of 16 up to 64 (its maximum) and the call's points rounded
      up to 16 (at most 4 values);
    - channelsPerChunk: C, C/2, C/4, C/8, each rounded up to 32 bytes of the compute dtype (at
      most 4 values; fewer channels per pass for less UB, more passes);
    - blockDim: all, a half and a quarter of the vector cores (3 values).

    At most 48 candidates; phase 1 drops those that do not fit UB (561002) and those that plan
    as the default or an earlier candidate does (e.g. a call whose kernel the plan skips: all of
    them)."""
    x, grid = inputs["input"], inputs["grid"]
    C, points = int(x.shape[1]), int(grid.shape[1]) * int(grid.shape[2])
    cblk = 32 // (8 if np.dtype(x.dtype) == np.float64 else 4)
    p_cap = min(P_MAX, align_up(points, P_ALIGN))
    tiles = range(p_cap, 0, -P_ALIGN)
    chunks = sorted({min(C, align_up(ceil_div(C, d), cblk)) for d in CHANNEL_SPLITS}, reverse=True)
    cores = vector_core_count(profile)
    blocks = sorted({max(1, cores * q // 4) for q in CORE_FRACTIONS}, reverse=True)

    def propose(_default):
        return [{"pointsPerTile": p, "channelsPerChunk": c, "blockDim": b}
                for p in tiles for c in chunks for b in blocks]
    return distinct_accepted(OP, inputs, profile, propose)


register(OpDef(OP,
               [Param("gradOutput", "tensor"), Param("input", "tensor"), Param("grid", "tensor", init="uniform(-1,1)"),
                Param("interpolationMode", "int"), Param("paddingMode", "int"),
                Param("alignCorners", "bool"), Param("outputMask", "bool_array"),
                Param("inputGrad", "tensor", output=True), Param("gridGrad", "tensor", output=True)],
               check, plan, infer_outputs, tiling_space, TILING_FIELDS))
