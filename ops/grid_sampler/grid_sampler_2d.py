"""aclnnGridSampler2D: torch.nn.functional.grid_sample for 4-D input (N, C, H_in, W_in) and grid
(N, H_out, W_out, 2), out (N, C, H_out, W_out), as PyTorch's `grid_sampler_2d` computes it.

Contract (CANN's aclnnGridSampler2D document, hicann/ops-cv image/grid_sample/docs and its
op_api/aclnn_grid_sampler2d.cpp): interpolationMode 0 bilinear, 1 nearest, 2 bicubic; paddingMode
0 zeros, 1 border, 2 reflection; alignCorners. Checks, in CANN's order: null input / grid / out
-> 161001; then all 161002: the operator exists on the chip's series (profile
operators.GridSampler2D); valid views; grid's and out's dtypes equal input's, and input's is in
the series' list (FLOAT, FLOAT16, DOUBLE: the document's; BF16 only on the regbase chips, not
simulated); formats ND / NCHW / NHWC (the private formats, and the 3-D / 5-D ones, are not the
document's); interpolationMode in 0..2 and in the profile's interpolation_modes (bicubic on A2
only; the training series runs the operator on the AI CPU, which has no bicubic), paddingMode in
0..2; all 4-D; N equal; C equal (input, out); grid dims 1, 2 == out dims 2, 3; input H, W != 0;
grid's last dim == 2; bicubic with DOUBLE (the document: bicubic needs FLOAT32 or FLOAT16).
Empty input or grid (N, C, H_out or W_out 0: out is empty too) -> success, workspace 0.

How it runs (the strategy of CANN's A2 AI Core path: l0op::Transpose of the input to NHWC, then
the GridSample kernel with channelLast = 1, whose GridSampler2D<float> gathers one C-long row per
corner point from the NHWC input with DataCopyPad):

1. `TransposeToNHWC(input)` (layout_kernels.py, the backward's): the NCHW input becomes an NHWC
   copy in the workspace, in the compute dtype (FLOAT; DOUBLE for DOUBLE), with `pad` zero pixels
   before and after so a corner run that starts a pixel left of the image or ends right of it
   stays in the buffer. Bilinear's two corners of a row (x0, x0+1) are one 2C-long burst.
2. `GridSampler2D` on the vector cores (forward_kernel.py), per tile of P grid points of one image
   and chunk of channels: MTE2 brings the grid tile; the vector pipe de-interleaves x / y, casts,
   unnormalises and pads the coordinates, takes floor / round-half-to-even, the corner weights
   (zeroed for a corner outside the image with zeros padding: Compare / Select, no branches) and
   the int32 offsets of every corner run, clamped into the buffer (coordinates.py, the backward's
   code without its gradient work); MTE2 gathers every run of every point (`DataCopyPad[gather]`,
   offset read from UB when it executes: the instruction stream does not depend on the data:
   bilinear 2 per point, nearest 1, bicubic 4 (zeros) or 16 (border / reflection)); the vector
   pipe broadcasts the weights along the channels (Broadcast, once per tile), multiplies, adds the
   planes in a tree, transposes to channel-major and casts to the output dtype; MTE3 writes the
   channel rows into the NCHW output (one strided DataCopyPad). Corner buffers and output tiles
   are double-buffered; MTE2 gathers step s+1 while the vector pipe weighs step s.
Non-contiguous inputs are first copied contiguous (Contiguous); a non-contiguous out is computed
into the workspace and written back (ViewCopy), as CANN's l0op::Contiguous / ViewCopy do.

Differences from CANN's kernel: its FP32 bilinear kernel writes each corner's weighted rows to the
output with atomic adds in GM (the first corner plainly), channel row by channel row; we sum the
corners in UB and write each output row once (its FP16 kernels, too, weigh in UB). FP16 is
computed in FP32 here, as CANN's kernels do (its FP16 variants need workspace, the document says).
[ASSUMPTIONS: DOUBLE, which CANN sends to the AI CPU on every series, and the training series'
whole operator, which CANN runs on the AI CPU there (its AI Core path is for A2 and the 310P), run
here as the same vector kernels (DOUBLE in float64, priced at the FLOAT rate per 256 bytes); the
AI CPU is not modelled.] Modelling notes as the backward's: the scalar unit's per-point address
arithmetic is not charged beyond each copy's issue; gathers show the L2 the addresses an identity
grid would touch; a NaN coordinate is -100 (outside); coordinates are clamped to +-2^23; an
out-of-bounds corner weighs 0 * (a clamped neighbour), so an infinite input value next to the
image's edge can turn an output NaN where PyTorch skips the corner.
"""
from __future__ import annotations

import numpy as np

from simulator.aclnn import (OpDef, Param, Plan, Workspace, check_tensor_view, register, require_present,
                             require_support)
from simulator.enums import NUMPY_OF, aclDataType, aclFormat, dtype_name, param_invalid
from simulator.program import KernelLaunch
from simulator.arith import align_up, ceil_div
from ..common import tensor_arg, vector_core_count, view_copy_launch, workspace_arg
from ..tiling_space import distinct_accepted
from .forward_kernel import grid_sampler2d_kernel
from .layout_kernels import nchw_to_nhwc_kernel, plan_layout
from .tiling import (BICUBIC, BILINEAR, FORWARD_OP, NEAREST, P_ALIGN, P_MAX, PADDING_MODES, TILING_FIELDS,
                     plan_forward)

OP = FORWARD_OP
NAMES = ("input", "grid", "out")
FORMATS = (aclFormat.ACL_FORMAT_ND, aclFormat.ACL_FORMAT_NCHW, aclFormat.ACL_FORMAT_NHWC)


def _mode(value, allowed, what: str, profile) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or int(value) not in allowed:
        raise param_invalid(f"{what} {value!r} is not supported on {profile.series_name} "
                            f"(supported: {list(allowed)})")


def check(a: dict, profile) -> None:
    require_present(a, NAMES)
    support = require_support(OP, profile)
    for name in NAMES:
        check_tensor_view(a[name], name)
    x = a["input"]
    xdt = dtype_name(x.dataType)
    for name in ("grid", "out"):
        if a[name].dataType != x.dataType:
            raise param_invalid(f"{name} has dtype {dtype_name(a[name].dataType)}; it must equal "
                                f"input's ({xdt})")
    if xdt not in support.dtypes:
        raise param_invalid(f"input has dtype {xdt}; {profile.series_name} supports "
                            f"{', '.join(support.dtypes)}")
    for name in NAMES:
        if a[name].format not in FORMATS:
            raise param_invalid(f"{name} has format {aclFormat(a[name].format).name}; supported: "
                                f"{', '.join(f.name for f in FORMATS)}")
    modes = support.options.get("interpolation_modes", [BILINEAR, NEAREST])
    modes = [modes] if isinstance(modes, (int, np.integer)) else list(modes)     # a what-if may give one
    _mode(a["interpolationMode"], [m for m in modes if m in (BILINEAR, NEAREST, BICUBIC)], "interpolationMode",
          profile)
    _mode(a["paddingMode"], PADDING_MODES, "paddingMode", profile)
    for name in NAMES:
        if len(a[name].viewDims) != 4:
            raise param_invalid(f"{name} must be 4-D, got shape {list(a[name].viewDims)}")
    xs, g, o = x.viewDims, a["grid"].viewDims, a["out"].viewDims
    if not (xs[0] == g[0] == o[0]):
        raise param_invalid(f"input, grid and out must have one batch size, got input {list(xs)}, "
                            f"grid {list(g)}, out {list(o)}")
    if xs[1] != o[1]:
        raise param_invalid(f"input and out must have one channel count, got input {list(xs)} and out {list(o)}")
    if g[1] != o[2] or g[2] != o[3]:
        raise param_invalid(f"grid dims 1, 2 must equal out dims 2, 3, got grid {list(g)} and out {list(o)}")
    if xs[2] == 0 or xs[3] == 0:
        raise param_invalid(f"input must have non-empty spatial dimensions, got {list(xs)}")
    if g[3] != 2:
        raise param_invalid(f"grid's last dimension must be 2, got {list(g)}")
    if int(a["interpolationMode"]) == BICUBIC and xdt not in ("FLOAT", "FLOAT16"):
        raise param_invalid(f"interpolationMode 2 (bicubic) needs FLOAT or FLOAT16, got {xdt}")


def plan(a: dict, profile, tiling: dict) -> Plan:
    x, grid, out = a["input"], a["grid"], a["out"]
    if x.numel() == 0 or grid.numel() == 0:
        return Plan(tiling={"note": "empty input or grid: nothing to compute (out is empty)"})
    N, C, H, W = x.viewDims
    Ho, Wo = grid.viewDims[1], grid.viewDims[2]
    interp, padding, align = int(a["interpolationMode"]), int(a["paddingMode"]), bool(a["alignCorners"])
    io = NUMPY_OF[x.dataType]
    cdt = np.dtype(np.float64) if x.dataType == aclDataType.ACL_DOUBLE else np.dtype(np.float32)
    t = plan_forward(N, C, H, W, Ho, Wo, interp, padding, align, io, cdt, profile, tiling)
    workspace = Workspace()
    contig = {name: workspace.add(f"contiguous copy of {name} (non-contiguous input)", tensor.numel() * tensor.itemsize)
              for name, tensor in (("input", x), ("grid", grid)) if not tensor.is_contiguous()}
    x_part = workspace.add(f"input transposed to NHWC in {dtype_name(cdt)}, {t.pad} zero pixel(s) each end, "
                           f"for the corner gathers", ((N * H * W) + 2 * t.pad) * C * cdt.itemsize)
    out_part = None if out.is_contiguous() else workspace.add(
        "contiguous out before the strided write-back", out.numel() * out.itemsize)
    lay = plan_layout(N, C, H * W, io, cdt, t.pad, profile)
    gathers = N * Ho * Wo * len(t.runs) * t.nch
    taps = sum(L for _, L, _, _ in t.runs)
    report = {"blockDim": len(t.blocks), "pointsPerTile": t.P, "channelsPerChunk": t.Cc,
              "channelChunks": t.nch, "cornerPlanes": t.K, "runsPerPoint": len(t.runs),
              "gathers": gathers, "gatherBytes": N * Ho * Wo * taps * C * cdt.itemsize,
              "computeDtype": dtype_name(cdt), "interpolationMode": interp, "paddingMode": padding,
              "alignCorners": align}
    builders = {name: view_copy_launch(tensor, name, profile, gather=True)[0]
                for name, tensor in (("input", x), ("grid", grid)) if name in contig}
    write_back = view_copy_launch(out, "out", profile, gather=False)[0] if out_part is not None else None

    def build(ws):
        launches, args = [], {}
        for name, tensor in (("input", x), ("grid", grid)):
            if name in contig:
                args[name] = workspace_arg(ws, contig[name], tensor.dtype, f"workspace:{name}")
                launches.append(builders[name](args[name]))
            else:
                args[name] = tensor_arg(tensor, name) + tensor.offset
        xws = workspace_arg(ws, x_part, cdt, "workspace:input NHWC")
        launches.append(KernelLaunch("TransposeToNHWC(input)", nchw_to_nhwc_kernel, len(lay.blocks), "vector",
                                     (args["input"], xws, lay)))
        dst = (workspace_arg(ws, out_part, out.dtype, "workspace:out") if out_part is not None
               else tensor_arg(out, "out") + out.offset)
        launches.append(KernelLaunch("GridSampler2D", grid_sampler2d_kernel, len(t.blocks), "vector",
                                     (args["grid"], xws, dst, t)))
        if write_back is not None:
            launches.append(write_back(dst))
        return launches
    return Plan(workspace, build, report)


def infer_outputs(inputs: dict) -> dict:
    x, grid = inputs["input"], inputs["grid"]
    return {"out": ((x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]), x.dtype)}


CHANNEL_SPLITS = (1, 2, 4, 8)          # channelsPerChunk: C over these (aligned to 32 B of the compute dtype)
CORE_FRACTIONS = (4, 2, 1)            # blockDim: all the vector cores, half, a quarter


def tiling_space(inputs: dict, profile) -> list[dict]:
    """Candidate tilings of the GridSampler2D kernel (`ascend-sim tune`), the full product of
    pointsPerTile (every multiple of 16 up to 64 and the call's points rounded up to 16: at most
    4), channelsPerChunk (C, C/2, C/4, C/8, each rounded up to 32 bytes of the compute dtype) and
    blockDim (all, a half and a quarter of the vector cores): at most 48, less those phase 1
    rejects (561002: they do not fit UB) or plans as the default or an earlier candidate does."""
    x, grid = inputs["input"], inputs["grid"]
    C, points = int(x.shape[1]), int(grid.shape[1]) * int(grid.shape[2])
    cblk = 32 // (8 if np.dtype(x.dtype) == np.float64 else 4)
    p_cap = min(P_MAX, align_up(max(points, 1), P_ALIGN))
    tiles = range(p_cap, 0, -P_ALIGN)
    chunks = sorted({max(1, min(C, align_up(ceil_div(C, d), cblk))) for d in CHANNEL_SPLITS}, reverse=True)
    cores = vector_core_count(profile)
    blocks = sorted({max(1, cores * q // 4) for q in CORE_FRACTIONS}, reverse=True)

    def propose(_default):
        return [{"pointsPerTile": p, "channelsPerChunk": c, "blockDim": b}
                for p in tiles for c in chunks for b in blocks]
    return distinct_accepted(OP, inputs, profile, propose)


register(OpDef(OP,
               [Param("input", "tensor"), Param("grid", "tensor", init="uniform(-1,1)"),
                Param("interpolationMode", "int"), Param("paddingMode", "int"), Param("alignCorners", "bool"),
                Param("out", "tensor", output=True)],
               check, plan, infer_outputs, tiling_space, TILING_FIELDS))
