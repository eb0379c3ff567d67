"""The plan of a ConvolutionBackward / ConvTbcBackward call: the workspace parts, the tiling and the
launches (Contiguous copies, prologue, Cube, epilogue, ViewCopy write-backs, zero fills, gradBias).

Where this sits in the two-phase protocol:

    check(args)                      the operator's checks (phase 1; a failure is its status)
    plan_convolution_backward(call)  phase 1's plan: workspace parts, tiling, launch builder
    Plan.build(workspace address)    phase 2: the launches, with every address bound

Both operators reduce their call to a ConvBackwardCall (ConvTbcBackward as a conv1d over permuted
views), so one planner serves them.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from simulator.aclnn import Plan, Workspace, WorkspacePart
from simulator.enums import dtype_name
from simulator.program import KernelLaunch
from simulator.arith import align_up, ceil_div
from simulator.kernel.cube_load import LOAD3D_MAX_STRIDE
from ..common import tiling_error, ub_bytes, vector_core_count, view_copy_launch, workspace_arg, zero_fill_launch
from ..elementwise.kernel import elementwise_body
from ..elementwise.template import flat_job
from .call import ConvBackwardCall, GradientWork, divide_work
from .cube_kernel import CubeJob, cube_body
from .epilogue import (Epilogue, EpilogueTensors, epilogue_body, dw_out_blocks, dx_out_items, plan_dw_out, plan_dx_out,
                       plan_space_to_depth_out, space_to_depth_out_items)
from .geometry import F32, STORAGE, CubeGeometry, make_cube_geometry
from .packing import plan_packw
from .places import Outputs, Sources, add_part, plan_dense_outputs, plan_source_copies
from .prologue import (CastPass, Prologue, PrologueTensors, SpaceToDepthMap, prologue_body, cast_items, gap_items,
                       plan_space_to_depth_map, plan_to5hd, plan_to5hd_tik, space_to_depth_items, tik_to5hd_blocks, to5hd_items)
from .small_launches import bias_add_launch, bias_launch, enlarge_launch
from .tik_map_back import TikMapBack, map_back_tiles, plan_tik_map_back
from .grad_weight_tiling import DwTiling, plan_dw
from .grad_weight_runs import dw_run_items, plan_dw_tap_runs
from .tiling import CubeCaps, DxTiling, balance, cube_caps, plan_dx
from .vector_pipeline import align32


# ---- the Cube path -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _CubeSetup:
    """What every step of the Cube path's plan reads: its geometry and the chip's buffers."""
    geo: CubeGeometry
    caps: CubeCaps
    compute: np.dtype         # the maps' storage dtype (FP32 for HF32)
    buffers: int              # L1 / L0 buffers per operand (2: double-buffered)
    ub: int
    zero_bytes: int           # UB the prologue keeps zeroed, for gap rows
    tik_tile: float           # the scalar unit's work per tile of a TIK layout kernel (profile.scalar)

    @property
    def itemsize(self) -> int:
        return self.compute.itemsize

    @property
    def c0(self) -> int:
        return 32 // self.compute.itemsize

    @property
    def room(self) -> int:
        """UB left to a prologue pass besides its zeros."""
        return self.ub - self.zero_bytes


def tik_clears_output(profile) -> bool:
    """Whether the weight's layout kernels are CANN's TIK TransData built for dynamic shapes, whose
    output is declared atomic so that a MemSet zeroes it before each launch (A2 / A3: their
    binaries are built for unknown shapes). Two of them reach a convolution: NC(D)HW -> FRACTAL_Z(_3D)
    (trans_data_positive_source_ntc: `_is_padding_n` is true for any unknown shape) and
    FRACTAL_Z(_3D) of groups to or from the enlarged groups' (trans_data_groups, always atomic).
    NCHW -> FRACTAL_Z of an FP32 weight (C0 8) is a DSL TransData instead, which writes every byte;
    NCDHW -> FRACTAL_Z_3D is no DSL pair and runs TIK in every dtype."""
    return "PIPE_FIX" in profile.core_kind_for("cube")[1].pipes


@dataclass
class _CubePlan:
    """The Cube path: its launches' jobs, in CANN's order, and the workspace parts they hand on."""
    prologues: list                        # (label, Prologue): one vector launch per layout or cast
    cube_jobs: list                        # (label, CubeJob): gradInput's GEMMs, then gradWeight's
    epilogues: dict                        # "dx" / "dw" -> (label, Epilogue)
    dy_map: WorkspacePart                  # gradOutput as tall NC1HWC0
    x_map: WorkspacePart | None            # input as tall NC1HWC0
    packed_weight: WorkspacePart | None    # weight as gradInput's right operand
    dx_phases: WorkspacePart | None        # gradInput per sub-pixel phase
    dw_acc: WorkspacePart | None           # gradWeight tiles or their FP32 accumulator
    acc_dtype: np.dtype | None
    acc_zeroed: bool                       # the accumulator takes atomic adds: a MemSet zeroes it first
    # gradWeight's ND->NZ left operand: a part holding its cast copy, the name of the source it
    # reads as it is, or None (load3d path)
    left_operand: WorkspacePart | str | None
    cast_source: str | None                # the source the prologue casts into left_operand
    # gradWeight in NCDHW in the accumulator's dtype, which aclnn then casts to the weight's (as
    # its OutputPostProcess: TransData, then Cast); None where the layout pass writes gradWeight
    weight_f32: WorkspacePart | None = None
    # the weight's TransData is CANN's TIK one, whose output a MemSet zeroes first (tik_clears_output)
    weight_zeroed: bool = False


def _tile_gemms(setup: _CubeSetup, call: ConvBackwardCall, computed, forced: dict):
    """The tiling of gradInput's and gradWeight's GEMMs (None where not computed)."""
    geo, caps, isz, c0 = setup.geo, setup.caps, setup.itemsize, setup.c0
    nd2nz = isz == 4        # FP32 maps: gradWeight's left operand goes ND->NZ (load3d has no FP32 transpose)
    shared = dict(caps=caps, isz=isz, c0=c0, forced=forced, buffers=setup.buffers)
    dx = plan_dx(geo, osz=call.grad_input.itemsize, **shared) if computed[0] else None
    dw = plan_dw(geo, osz=call.grad_weight.itemsize, nd2nz=nd2nz, **shared) if computed[1] else None
    return dx, dw


def _plan_maps(setup: _CubeSetup, call: ConvBackwardCall, computed, workspace: Workspace):
    """The tall NC1HWC0 maps the prologue writes: their parts and passes (pass, source, destination:
    PrologueTensors' names)."""
    geo, c0, compute = setup.geo, setup.c0, setup.compute
    G, isz = geo.G, setup.itemsize
    dy_map = add_part(workspace, f"gradOutput as tall NC1HWC0 ({dtype_name(compute)}, C0 {c0}, {geo.dy.pitch} "
                                  f"rows per image)", G * ceil_div(geo.Cout, c0) * geo.dy.block * c0 * isz)
    x_map = None
    if computed[1]:
        x_map = add_part(workspace, f"input as tall NC1HWC0 ({dtype_name(compute)}, C0 {c0}, {geo.x.pitch} rows "
                                     f"per image)", G * ceil_div(geo.Cin, c0) * geo.x.block * c0 * isz)
    # a 3D convolution's maps are NDC1HWC0, which CANN makes with its TIK TransData (whole UB, no
    # gap rows); 1D / 2D ones NC1HWC0 with gap rows, as its auto-scheduled TransData would
    to5hd = (partial(plan_to5hd_tik, ub_bytes=setup.ub, tile_scalar=setup.tik_tile) if not geo.dy.fold
             else partial(plan_to5hd, ub_bytes=setup.room))
    maps = [(to5hd("gradOutput", N=geo.N, G=G, Cg=geo.Cout, c0=c0, P=int(np.prod(geo.O)), lay=geo.dy,
                   src_dtype=call.grad_output.dtype, compute_dtype=compute), "grad_output", "dy_map")]
    if computed[1] and geo.s2d is not None:
        maps.append((plan_space_to_depth_map(geo.s2d, N=geo.N, X=geo.X[1:], lay=geo.x, src_dtype=call.input.dtype,
                                             compute_dtype=compute, ub_bytes=setup.room), "input", "x_map"))
    elif computed[1]:
        maps.append((to5hd("input", N=geo.N, G=G, Cg=geo.Cin, c0=c0, P=int(np.prod(geo.X)), lay=geo.x,
                           src_dtype=call.input.dtype, compute_dtype=compute), "input", "x_map"))
    return dy_map, x_map, maps


def _plan_grad_input_parts(setup: _CubeSetup, call: ConvBackwardCall, dx: DxTiling, workspace: Workspace):
    """The packed weight (gradInput's right operand) and the per-phase gradInput grid."""
    geo, compute = setup.geo, setup.compute
    packw = plan_packw(geo, w_dtype=call.weight.dtype, compute_dtype=compute, c0=setup.c0, ntiles=dx.ntiles,
                       ub_bytes=setup.room)
    per_phase = "per sub-pixel phase, " if geo.nphase > 1 else ""
    packed = add_part(workspace, f"weight as gradInput's right operand (taps flipped, {per_phase}L0B zN fractals "
                                  f"per n-tile of {dx.nt}, {dtype_name(compute)})", packw.size * setup.itemsize)
    grad_input = call.grad_input
    phases = add_part(workspace, f"gradInput per sub-pixel phase, NC1HWC0 ({geo.nphase} phase grid(s) of "
                                  f"{geo.dxg.R} x {geo.dxg.Wd}, {dtype_name(grad_input.dtype)})",
                       geo.G * ceil_div(geo.Cin, 16) * geo.nphase * geo.dxg.block * 16 * grad_input.itemsize)
    return packw, packed, phases


def _grad_weight_dtype(setup: _CubeSetup, call: ConvBackwardCall, dw: DwTiling) -> np.dtype:
    """The accumulator's dtype: FP32 where partial sums add, and where a C0 block of the output
    dtype is not whole 32-B blocks (FP32 / HF32 compute, C0 = 8, into a 16-bit gradWeight): the
    layout pass cuts rows into C1 chunks, each a run of whole blocks."""
    out_dtype = np.dtype(call.grad_weight.dtype)
    return F32 if dw.atomic or setup.c0 * out_dtype.itemsize % 32 else out_dtype


def _plan_grad_weight_parts(setup: _CubeSetup, call: ConvBackwardCall, dw: DwTiling, back: TikMapBack | None,
                            workspace: Workspace):
    """gradWeight's tiles (an FP32 accumulator when the K split adds partial sums; FRACTAL_Z_3D
    where `back` takes it to NCDHW) and, on the ND->NZ path, its left operand cast to the compute
    dtype: (acc part, acc dtype, left operand, CastPass or None)."""
    geo, compute, c0 = setup.geo, setup.compute, setup.c0
    row_elems = ceil_div(geo.Cb, c0) * geo.dwf.Khw * c0
    acc_dtype = _grad_weight_dtype(setup, call, dw)
    rows = back.fz3d_rows if back is not None else geo.G * geo.Mg
    fz3d = "FRACTAL_Z_3D; " if back is not None else ""
    acc = add_part(workspace, f"gradWeight FP32 accumulator ({fz3d}partial sums of {dw.ks} cores per tile, atomic add)"
                    if dw.atomic else f"gradWeight tiles ({dtype_name(acc_dtype)}, "
                                      f"{'FRACTAL_Z_3D' if back is not None else 'C0-blocked columns'})",
                    rows * geo.dwf.ax[0].K * row_elems * acc_dtype.itemsize)
    left = cast = None
    if setup.itemsize == 4:
        name, t = ("gradOutput", call.grad_output) if geo.amap == "dy" else ("input", call.input)
        if np.dtype(t.dtype) != compute:
            left = add_part(workspace, f"{name} cast to {dtype_name(compute)} (gradWeight's left operand, ND->NZ)",
                             t.numel() * setup.itemsize)
            cast = CastPass(t.numel(), np.dtype(t.dtype), compute, 8192, name)
        else:
            left = name
    return acc, acc_dtype, left, cast


def _deal_cube_units(dx: DxTiling | None, dw: DwTiling | None, forced: dict, cores: int):
    """The GEMM units balanced over the Cube blocks (longest first): per block its gradInput
    units, then its gradWeight units; and the estimated makespan in cycles."""
    costs, kinds = [], []
    if dx is not None:
        costs += dx.costs
        kinds += [("dx", i) for i in range(len(dx.units))]
    if dw is not None:
        costs += dw.costs
        kinds += [("dw", i) for i in range(len(dw.units))]
    groups, makespan = balance(costs, int(forced.get("blockDim", 0)) or cores)
    blocks = []
    for group in groups:
        units = [kinds[i] for i in group]
        blocks.append([u for u in units if u[0] == "dx"] + [u for u in units if u[0] == "dw"])
    return blocks, makespan


def _size_cube_buffers(setup: _CubeSetup, dx: DxTiling | None, dw: DwTiling | None, out_itemsize: int,
                       acc_dtype):
    """Bytes of L1, L0A, L0B, L0C and (coupled chips) UB per output slot the tiles use; a
    tiling error if one does not fit."""
    caps, isz, nb, ub = setup.caps, setup.itemsize, setup.buffers, setup.ub
    l1 = max(align32(dx.slab) + dx.bchunk if dx else 0, align32(dw.slabA) + dw.slabB if dw else 0,
             # a unit that no tap reaches writes its tile from zero fractals (_zero_stage)
             (ceil_div(dx.m, 16) + ceil_div(dx.nt, 16)) * 512 if dx else 0,
             (ceil_div(dw.mt, 16) + ceil_div(dw.nt, 16)) * 512 if dw else 0)
    l0a = max(align_up(dx.m, 16) * dx.kk * isz if dx else 0, align_up(dw.mt, 16) * dw.kk * isz if dw else 0)
    l0b = max(dx.kk * align_up(dx.nt, 16) * isz if dx else 0, dw.kk * align_up(dw.nt, 16) * isz if dw else 0)
    l0c = max(dx.nc * align_up(dx.m, 16) * align_up(dx.nt, 16) * 4 if dx else 0,
              align_up(dw.mt, 16) * align_up(dw.nt, 16) * 4 if dw else 0)
    for buf, need, cap in (("L1", nb * l1, caps.L1), ("L0A", nb * l0a, caps.L0A), ("L0B", nb * l0b, caps.L0B),
                           ("L0C", l0c, caps.L0C)):
        if need > cap:
            raise tiling_error(f"ConvolutionBackward tiling: {need} B of {buf} does not fit: {buf} holds {cap} B")
    ub_out = 0
    if not caps.a2:
        ub_out = max(align_up(dx.m, 16) * align_up(dx.nt, 16) * out_itemsize if dx else 0,
                     align_up(dw.mt, 16) * align_up(dw.nt, 16) * acc_dtype.itemsize if dw else 0)
        if 2 * ub_out > ub:
            raise tiling_error(f"ConvolutionBackward tiling: 2 x {ub_out} B of UB for L0C -> UB does not fit: "
                               f"UB holds {ub} B")
    return align32(l1), l0a, l0b, l0c, ub_out


def _round_robin(items: list, vector_cores: int) -> list:
    """Items [(kind, item)] dealt round-robin over the vector blocks, kind by kind, continuing the
    round from one kind to the next so similar items spread evenly."""
    blocks = [[] for _ in range(min(vector_cores, len(items)))]
    kinds = []
    for kind, _ in items:
        if kind not in kinds:
            kinds.append(kind)
    start = 0
    for kind in kinds:
        of_kind = [it for k, it in items if k == kind]
        for i, it in enumerate(of_kind):
            blocks[(start + i) % len(blocks)].append((kind, it))
        start += len(of_kind)
    return blocks


def _plan_prologues(setup: _CubeSetup, maps, packw, cast, vector_cores: int) -> list:
    """The vector launches before the Cube, as CANN makes them: a TransData per map (gradOutput,
    then input), the weight's, and the ND->NZ operand's cast: [(label, Prologue)]."""
    out = []
    for i, (t, _, _) in enumerate(maps):
        if isinstance(t, SpaceToDepthMap):
            items = [(("5hd", i), it) for it in space_to_depth_items(t)]
        elif t.slots == 1:                    # CANN's TIK TransData: its own split over the cores
            blocks = [[(("5hd", i), it) for it in b] for b in tik_to5hd_blocks(t, vector_cores)]
            out.append((f"TransData({t.name} -> NDC1HWC0)", Prologue(setup.ub, 0, maps, None, None, blocks)))
            continue
        else:
            items = [(("5hd", i), it) for it in to5hd_items(t)]
        gaps = [(("gap", i), it) for it in gap_items(t, setup.zero_bytes)]
        out.append((f"TransData({t.name} -> NC1HWC0)",
                     Prologue(setup.ub, setup.zero_bytes if gaps else 0, maps, None, None,
                              _round_robin(items + gaps, vector_cores))))
    if packw is not None:
        out.append(("TransData(weight -> W')", Prologue(setup.ub, 0, maps, packw, None,
                                                        _round_robin([("pack", it) for it in packw.items], vector_cores))))
    if cast is not None:
        out.append((f"Cast({cast.source} -> {dtype_name(cast.dst_dtype)})",
                    Prologue(setup.ub, 0, maps, None, cast,
                             _round_robin([("cast", it) for it in cast_items(cast.elements, cast.chunk)],
                                          vector_cores))))
    return out


def _plan_epilogues(setup: _CubeSetup, call: ConvBackwardCall, computed, acc_dtype, weight_back: TikMapBack | None,
                    weight_dtype, vector_cores: int) -> dict:
    """The layout launches after the Cube, each its own launch (as CANN's TransData after each
    kernel): gradInput's phases back to the input layout, items dealt round-robin; gradWeight's
    tiles to the weight layout in `weight_dtype`, as CANN's TIK TransData splits them over the
    cores (the space-to-depth fold's, round-robin): {"dx" / "dw": (label, Epilogue)}."""
    geo, ub = setup.geo, setup.ub
    out = {}
    if computed[0]:
        back = _tik_map_back(setup, call, vector_cores)
        if back is not None:        # a 3D map of one phase: CANN's TIK TransData NDC1HWC0 -> NCDHW
            out["dx"] = ("TransData(gradInput NDC1HWC0 -> NCDHW)",
                         Epilogue(ub, back, None, [[("dx", it) for it in b] for b in map_back_tiles(back)]))
        else:
            dx_out = plan_dx_out(geo, odt=call.grad_input.dtype, ub_bytes=ub)
            out["dx"] = ("TransData(gradInput phases -> NC[D]HW)",
                         Epilogue(ub, dx_out, None,
                                  _round_robin([("dx", it) for it in dx_out_items(dx_out)], vector_cores)))
    if computed[1] and weight_back is not None:
        out["dw"] = ("TransData(gradWeight FRACTAL_Z_3D -> NCDHW)",
                     Epilogue(ub, None, weight_back, [[("dw", it) for it in b] for b in map_back_tiles(weight_back)]))
    elif computed[1]:
        if geo.s2d is not None:
            dw_out = plan_space_to_depth_out(geo.s2d, Mg=geo.Mg, adt=acc_dtype, odt=call.grad_weight.dtype, ub_bytes=ub)
            blocks = _round_robin([("dw", it) for it in space_to_depth_out_items(dw_out)], vector_cores)
        else:
            shape = dict(G=geo.G, Mg=geo.Mg, Cc=geo.Cb, c0=setup.c0, KD=geo.dwf.ax[0].K, Khw=geo.dwf.Khw,
                         adt=acc_dtype, odt=weight_dtype, ub_bytes=ub, tile_scalar=setup.tik_tile)
            dw_out = plan_dw_out(**shape)
            if dw_out is not None:
                blocks = [[("dw", it) for it in b] for b in dw_out_blocks(dw_out, vector_cores)]
            else:                   # one row of one C1 plane is longer than half the UB: runs of taps
                dw_out = plan_dw_tap_runs(C1=ceil_div(geo.Cb, setup.c0), **shape)
                blocks = _round_robin([("dw", it) for it in dw_run_items(dw_out)], vector_cores)
        out["dw"] = ("TransData(gradWeight -> weight layout)", Epilogue(ub, None, dw_out, blocks))
    return out


def _tik_map_back(setup: _CubeSetup, call: ConvBackwardCall, vector_cores: int) -> TikMapBack | None:
    """gradInput of a 3D convolution whose workspace is its map as the Cube wrote it ([C1][N][D][H][W]
    of 16 channels: one phase, one group, no shifted or padded rows) goes back to NCDHW as CANN's TIK
    TransData takes NDC1HWC0 (its 2D maps run CANN's DSL TransData: our own pass). None otherwise, or
    where the TIK tiling picks its mode 2003 (not modelled)."""
    geo = setup.geo
    lay, (Xd, Xh, Xw) = geo.dxg, geo.X
    if geo.nd != 3 or geo.nphase != 1 or geo.G != 1 or lay.fold or (lay.D, lay.pitch, lay.Wd) != (Xd, Xh, Xw):
        return None
    f = geo.phases[0]
    if f is None or f.ax[1].sh or f.ax[2].sh:
        return None
    return plan_tik_map_back(N=geo.N, C=geo.Cin, c0=16, D=Xd, HW=Xh * Xw, dtype=call.grad_input.dtype,
                             ub_bytes=setup.ub, cores=vector_cores, tile_scalar=setup.tik_tile)


def _conv3d_filter_path(setup: _CubeSetup, call: ConvBackwardCall) -> bool:
    """A 3D gradWeight of one group and 16-bit maps on a chip with a Fixpipe: CANN's
    Conv3DBackpropFilter writes it FP32 in FRACTAL_Z_3D, and aclnn's OutputPostProcess takes it to
    NCDHW with a TransData, then casts it to the weight's dtype (with groups it casts first)."""
    geo = setup.geo
    return (geo.nd == 3 and call.geometry.groups * call.enlarge == 1 and geo.s2d is None and setup.caps.a2
            and setup.c0 == 16)


def _tik_weight_back(setup: _CubeSetup, call: ConvBackwardCall, acc_dtype: np.dtype,
                     vector_cores: int) -> TikMapBack | None:
    """gradWeight on CANN's Conv3DBackpropFilter path goes back to NCDHW as CANN's TIK TransData
    takes FRACTAL_Z_3D (the Cube writes its accumulator so). None otherwise (our own pass), or
    where the TIK tiling picks a mode not modelled for this source."""
    geo = setup.geo
    if not _conv3d_filter_path(setup, call):
        return None
    return plan_tik_map_back(N=geo.Mg, C=geo.Cb, c0=16, D=geo.dwf.ax[0].K, HW=geo.dwf.Khw, dtype=acc_dtype,
                             ub_bytes=setup.ub, cores=vector_cores, tile_scalar=setup.tik_tile,
                             fz3d_rows=align_up(geo.Mg, 16))


def _report_tiling(tiling: dict, geo: CubeGeometry, dx, dw, buffers: int, blocks: list, makespan: float) -> None:
    """The Cube path's figures in the tiling the report shows (blockDim: the larger Cube launch's)."""
    if dx is not None:
        tiling["gradInput"] = {"baseM": dx.m, "baseN": dx.nt, "baseK": dx.kk, "c1Chunk": dx.c1n,
                               "L0CTiles": dx.nc, "units": len(dx.units), "phases": geo.nphase,
                               "phasesWithTaps": sum(f is not None for f in geo.phases),
                               "rowsPerImage": geo.dy.pitch, "doubleBuffer": buffers == 2}
        if dx.hgroup:       # tap groups: a stage holds this many kernel rows' window (large dilations)
            tiling["gradInput"]["kernelRowsPerStage"] = dx.hgroup
    if dw is not None:
        tiling["gradWeight"] = {"baseM": dw.mt, "baseN": dw.nt, "baseK": dw.kk, "stagePositions": dw.kc,
                                "kSplit": dw.ks, "units": len(dw.units), "leftOperand":
                                "ND->NZ + load2d" if dw.a_nd2nz else "load3d (1x1, transposed)",
                                "doubleBuffer": buffers == 2}
        if dw.hgroup:
            tiling["gradWeight"]["kernelRowsPerStage"] = dw.hgroup
    tiling["blockDim"] = max(len(b) for b in blocks)
    tiling["estimatedCubeCycles"] = round(makespan)


def _check_load3d_strides(geo: CubeGeometry, computed) -> None:
    """A GEMM whose img2col steps past load3d's stride field is not modelled: 561002 in phase 1
    (aclnn allows 1D / 2D strides to 2^31 - 2; CANN runs them in ways this plan does not port),
    where the kernel would fault in phase 2."""
    families = [("gradInput", f) for f in geo.phases if f is not None] if computed[0] else []
    if computed[1] and geo.dwf is not None:
        families.append(("gradWeight", geo.dwf))
    for name, f in families:
        s = max(f.ax[1].s, f.ax[2].s)
        if s > LOAD3D_MAX_STRIDE:
            raise tiling_error(f"{name}: an img2col stride of {s} is past load3d's field [1, {LOAD3D_MAX_STRIDE}]; "
                               f"such strides are not modelled yet (CANN accepts 1D / 2D strides to 2^31 - 2)")


def _plan_cube(call: ConvBackwardCall, work: GradientWork, profile, forced: dict, workspace: Workspace,
               tiling: dict) -> _CubePlan:
    """The Cube path: tile the GEMMs, lay out their workspace, deal each GEMM's units over the
    blocks of its own launch (CANN runs gradInput's and gradWeight's kernels one after the other),
    size the buffers, and plan the layout launches that feed and drain the Cube."""
    computed = work.computed
    compute = STORAGE[call.compute_dtype]
    ub = ub_bytes(profile)
    setup = _CubeSetup(make_cube_geometry(work.cube_convolution, computed, 32 // compute.itemsize),
                       cube_caps(profile, call.compute_dtype), compute,
                       2 if bool(forced.get("doubleBuffer", True)) else 1, ub, min(16384, ub // 8) // 32 * 32,
                       profile.scalar.tik_tile_cycles)
    geo = setup.geo
    _check_load3d_strides(geo, computed)
    dx, dw = _tile_gemms(setup, call, computed, forced)
    dy_map, x_map, maps = _plan_maps(setup, call, computed, workspace)
    packw = packed_weight = dx_phases = None
    if computed[0]:
        packw, packed_weight, dx_phases = _plan_grad_input_parts(setup, call, dx, workspace)
    acc = acc_dtype = left_operand = cast = weight_back = None
    vector_cores = vector_core_count(profile)
    if computed[1]:
        weight_back = _tik_weight_back(setup, call, _grad_weight_dtype(setup, call, dw), vector_cores)
        acc, acc_dtype, left_operand, cast = _plan_grad_weight_parts(setup, call, dw, weight_back, workspace)
    l1, l0a, l0b, l0c, ub_out = _size_cube_buffers(setup, dx, dw, call.grad_input.itemsize if dx else 0,
                                                   acc_dtype)
    jobs, all_blocks, makespan = [], [], 0.0
    for name, label, gemm in (("dx", "GradInput(sub-pixel img2col x W'T)", dx), ("dw", "GradWeight(dy^T x img2col)", dw)):
        if gemm is None:
            continue
        blocks, span = _deal_cube_units(dx if name == "dx" else None, dw if name == "dw" else None, forced,
                                        setup.caps.cores)
        jobs.append((f"Cube: {label}",
                     CubeJob(geo, setup.caps.a2, compute, call.compute_dtype == "HF32", setup.buffers, l1, l0a, l0b,
                             l0c, dx, dw, packw, np.dtype(call.grad_input.dtype) if computed[0] else None, acc_dtype,
                             ub_out, blocks, weight_back.fz3d_rows if weight_back is not None else 0)))
        all_blocks.append(blocks)
        makespan += span
    prologues = _plan_prologues(setup, maps, packw, cast, vector_cores)
    weight_f32 = None
    weight_dtype = np.dtype(call.grad_weight.dtype) if computed[1] else None
    if computed[1] and _conv3d_filter_path(setup, call) and acc_dtype != weight_dtype:
        weight_f32 = add_part(workspace, f"gradWeight NCDHW ({dtype_name(acc_dtype)}), before its Cast",
                              call.grad_weight.numel() * acc_dtype.itemsize)
        weight_dtype = acc_dtype
    epilogues = _plan_epilogues(setup, call, computed, acc_dtype, weight_back, weight_dtype, vector_cores)
    _report_tiling(tiling, geo, dx, dw, setup.buffers, all_blocks, makespan)
    return _CubePlan(prologues, jobs, epilogues, dy_map, x_map, packed_weight, dx_phases, acc, acc_dtype,
                     computed[1] and dw.atomic, left_operand, cast.source if cast else None, weight_f32,
                     packed_weight is not None and tik_clears_output(profile) and (setup.itemsize == 2 or geo.nd == 3))


# ---- the launches (phase 2) ----------------------------------------------------------------------
def _zero_fill_launches(call: ConvBackwardCall, work: GradientWork, outputs: Outputs, profile, ws: int) -> list:
    """Zero fills of the gradients no GEMM writes: an empty call's (as its empty dimension
    makes them zero) and those no window reaches."""
    geom, computed = work.cube_convolution, work.computed
    launches = []

    def fill(name):
        t = outputs.tensors[name]
        return zero_fill_launch(f"ZeroFill({name})", outputs.arg(name, ws), t.numel() * t.itemsize, profile)

    if work.empty:
        if computed[1] and call.grad_weight.numel():
            launches.append(fill("gradWeight"))
        if computed[0] and call.grad_input.numel() and (geom.Cout == 0 and geom.N > 0 and geom.Cin > 0):
            launches.append(fill("gradInput"))
        if computed[2] and call.grad_bias.numel() and (geom.N == 0 or geom.Cout == 0):
            launches.append(fill("gradBias"))
    for name, zero in (("gradInput", work.zero_grad_input), ("gradWeight", work.zero_grad_weight)):
        if zero:
            launches.append(fill(name))
    return launches


def _cube_launches(call: ConvBackwardCall, work: GradientWork, sources: Sources, outputs: Outputs, cube: _CubePlan,
                   profile, ws: int) -> list:
    """The launches of the Cube path in CANN's order: the layout passes and cast that feed the Cube,
    then per gradient its Cube launch and the layout pass that drains it (gradWeight's FP32
    accumulator zeroed by a MemSet just before the Cube adds into it), with their GM arguments
    bound to the workspace at `ws`."""
    computed, compute = work.computed, STORAGE[call.compute_dtype]
    dx, dw = computed[0], computed[1]
    narrowed = work.cube_grad_output is not call.grad_output

    def part(p, dtype, name):
        return workspace_arg(ws, p, dtype, name) if p is not None else None

    grad_output = sources.arg("gradOutput:cube" if narrowed else "gradOutput", ws)
    inp = sources.arg("input", ws) if dw else None
    weight = sources.arg("weight", ws) if dx else None
    packed_weight = part(cube.packed_weight, compute, "workspace:W'")
    dy_map = workspace_arg(ws, cube.dy_map, compute, "workspace:dy 5HD")
    x_map = part(cube.x_map, compute, "workspace:x 5HD")
    acc = part(cube.dw_acc, cube.acc_dtype, "workspace:dW acc")
    dx_phases = part(cube.dx_phases, call.grad_input.dtype if dx else None, "workspace:dX phases")
    left = cast_src = cast_dst = None
    if isinstance(cube.left_operand, str):
        left = sources.arg(cube.left_operand, ws)
    elif cube.left_operand is not None:
        left = cast_dst = workspace_arg(ws, cube.left_operand, compute, "workspace:A cast")
        cast_src = sources.arg(cube.cast_source, ws)
    prologue_args = PrologueTensors(grad_output=grad_output, input=inp, weight=weight, packed_weight=packed_weight,
                                    dy_map=dy_map, x_map=x_map, cast_src=cast_src, cast_dst=cast_dst)
    weight_f32 = part(cube.weight_f32, cube.acc_dtype, "workspace:dW NCDHW")
    grad_weight = outputs.cube_grad_weight(ws) if dw else None
    epilogue_args = EpilogueTensors(dx_phases=dx_phases, grad_input=outputs.arg("gradInput", ws) if dx else None,
                                    dw_acc=acc, grad_weight=weight_f32 if weight_f32 is not None else grad_weight)
    launches = []
    for label, p in cube.prologues:
        if p.packw is not None and cube.weight_zeroed:
            launches.append(zero_fill_launch("MemSet(weight FRACTAL_Z)", packed_weight, cube.packed_weight.nbytes,
                                             profile))
        launches.append(KernelLaunch(label, prologue_body, len(p.blocks), "vector", (prologue_args, p)))
    for (label, job), kind in zip(cube.cube_jobs, [k for k in ("dx", "dw") if computed[("dx", "dw").index(k)]]):
        if kind == "dw" and cube.acc_zeroed:
            launches.append(zero_fill_launch("MemSet(gradWeight FP32 accumulator)", acc, cube.dw_acc.nbytes, profile))
        launches.append(KernelLaunch(label, cube_body, len(job.blocks), "cube",
                                     (dy_map, x_map, packed_weight, dx_phases, acc, left, job)))
        elabel, epilogue = cube.epilogues[kind]
        launches.append(KernelLaunch(elabel, epilogue_body, len(epilogue.blocks), "vector", (epilogue_args, epilogue)))
        if kind == "dw" and weight_f32 is not None:
            job, blocks = flat_job("cast", (cube.acc_dtype,), call.grad_weight.dtype,
                                   call.grad_weight.numel(), profile)    # (the part is a 32-B block at least)
            launches.append(KernelLaunch(f"Cast(gradWeight {dtype_name(cube.acc_dtype)} -> "
                                         f"{dtype_name(call.grad_weight.dtype)})", elementwise_body, blocks, "vector",
                                         ((weight_f32,), grad_weight, job)))
        if kind == "dw" and outputs.enlarged is not None:
            if tik_clears_output(profile):
                launches.append(zero_fill_launch("MemSet(gradWeight)", outputs.arg("gradWeight", ws),
                                                 call.grad_weight.numel() * call.grad_weight.itemsize, profile))
            launches.append(enlarge_launch(call.grad_weight, call.enlarge, call.geometry.groups,
                                           outputs.cube_grad_weight(ws), outputs.arg("gradWeight", ws), profile,
                                           gather=True))
    return launches


def _write_back(outputs: Outputs, name: str, profile, ws: int) -> KernelLaunch:
    """The ViewCopy of a gradient written dense into its non-contiguous view."""
    build, _ = view_copy_launch(outputs.tensors[name], name, profile, gather=False)
    return build(outputs.arg(name, ws))


def _grad_bias_launches(call: ConvBackwardCall, work: GradientWork, sources: Sources, outputs: Outputs, profile,
                        ws: int) -> list:
    """gradBias, a reduction of gradOutput over N and the spatial dims (a zero fill wrote it
    where N is 0), and its write-back."""
    gb, geom = call.grad_bias, work.cube_convolution
    if not (work.computed[2] and gb.numel()):
        return []
    launches = []
    if geom.N:
        grad_output = sources.arg("gradOutput", ws)
        positions = int(np.prod(call.geometry.out_sp))      # every column, also those no window reads
        launches.append(bias_launch(grad_output, outputs.arg("gradBias", ws), geom.N, geom.Cout, positions,
                                    grad_output.dtype, gb.dtype, profile))
    if "gradBias" in outputs.dense:
        launches.append(_write_back(outputs, "gradBias", profile, ws))
    return launches


def _build_launches(call: ConvBackwardCall, work: GradientWork, sources: Sources, outputs: Outputs,
                    cube: _CubePlan | None, profile, ws: int) -> list[KernelLaunch]:
    """Phase 2: the call's launches in order, for the workspace at `ws`."""
    launches = []
    for name, t, copy in sources.copies:
        build, _ = view_copy_launch(t, name, profile, gather=True)
        launches.append(build(workspace_arg(ws, copy, t.dtype, f"workspace:{name}")))
    launches += _zero_fill_launches(call, work, outputs, profile, ws)
    if "weight:given" in sources.places:
        zeroed = tik_clears_output(profile)
        if zeroed:
            launches.append(zero_fill_launch("MemSet(weight groups enlarged)", sources.arg("weight", ws),
                                             call.weight.numel() * call.enlarge * call.weight.itemsize, profile))
        launches.append(enlarge_launch(call.weight, call.enlarge, call.geometry.groups, sources.arg("weight:given", ws),
                                       sources.arg("weight", ws), profile, zeroed=zeroed))
    if cube is not None:
        launches += _cube_launches(call, work, sources, outputs, cube, profile, ws)
    if call.bias is not None and call.grad_input.numel():
        gi = call.grad_input
        launches.append(bias_add_launch(outputs.arg("gradInput", ws), sources.arg("bias", ws), gi.viewDims[0],
                                        gi.viewDims[1], int(np.prod(gi.viewDims[2:])), gi.dtype, call.bias.dtype,
                                        profile))
    for name in ("gradInput", "gradWeight"):
        if name in outputs.dense:       # written dense above (by the epilogue or a zero fill)
            launches.append(_write_back(outputs, name, profile, ws))
    return launches + _grad_bias_launches(call, work, sources, outputs, profile, ws)


def plan_convolution_backward(call: ConvBackwardCall, profile, forced: dict) -> Plan:
    """Phase 1's plan of one checked call: every workspace part (so the workspace size is known)
    and the tiling, with a builder that phase 2 calls with the workspace's address. `forced`
    holds the tiling fields the caller forced (their types checked by the runtime; a forced tile
    that does not fit is a tiling error here)."""
    compute = STORAGE[call.compute_dtype]
    c0 = 32 // compute.itemsize
    workspace = Workspace()
    tiling: dict = {"computeDtype": call.compute_dtype, "cubeMathType": call.cube_math_type,
                    "promotedDtype": call.promoted_dtype, "C0": c0, "groups": call.geometry.groups * call.enlarge}
    tiling.update({"groupEnlarge": call.enlarge, "cubeGroups": call.geometry.groups} if call.enlarge > 1 else {})
    work = divide_work(call, c0)
    sources = plan_source_copies(call, work, workspace)
    cube = _plan_cube(call, work, profile, forced, workspace, tiling) if work.uses_cube else None
    outputs = plan_dense_outputs(call, work, workspace)
    return Plan(workspace, lambda ws: _build_launches(call, work, sources, outputs, cube, profile, ws), tiling)
