"""The plan of a ConvolutionBackward / ConvTbcBackward call: the workspace parts, the tiling and the
launches (Contiguous copies, prologue, Cube, epilogue, ViewCopy write-backs, zero fills, gradBias).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulator.acl import aclTensor
from simulator.aclnn import Plan, Workspace
from simulator.enums import dtype_name
from simulator.program import KernelLaunch
from simulator.arith import align_up, ceil_div
from ..common import tensor_arg, tiling_error, ub_bytes, vector_core_count, view_copy_launch, workspace_arg, zero_fill_launch
from .cube_kernel import CubeJob, cube_body
from .epilogue import (Epilogue, SpaceToDepthOut, epilogue_body, dw_out_items, dx_out_items, plan_dw_out,
                       plan_dx_out, plan_space_to_depth_out, space_to_depth_out_items)
from .geometry import F32, STORAGE, check_load3d_limits, make_cube_geometry
from .prologue import (Prologue, SpaceToDepthMap, prologue_body, cast_items, gap_items, plan_packw,
                       plan_space_to_depth_map, plan_to5hd, space_to_depth_items, to5hd_items, zero_items)
from .small_launches import bias_launch
from .tiling import balance, cube_caps, plan_dw, plan_dx
from .vector_pipeline import align32


def _deal(items: list, nblocks: int) -> list[list]:
    """Items dealt round-robin over at most nblocks blocks (similar items, similar costs)."""
    nblocks = max(1, min(nblocks, len(items)))
    return [items[b::nblocks] for b in range(nblocks)]


def _cube_geometry(geom, go):
    """The convolution the Cube computes, the gradOutput view it reads, and whether no window
    reads any element at all. A transposed convolution's outputPadding may reach past every
    window along W (outputPadding >= stride, which CANN accepts in 1D and 2D): those last
    columns of gradOutput feed no gradient but gradBias, and load3d's output width follows its
    map's width, so the Cube reads a view of the columns the windows reach (made contiguous by
    the usual copy)."""
    if not geom.transposed:
        return geom, go, False
    X, O, k, s, d = geom.in_sp[-1], geom.out_sp[-1], geom.k[-1], geom.stride[-1], geom.dilation[-1]
    before = geom.pad[-1][0]
    reach = (X - 1) * s + d * (k - 1) + 1 - before      # columns of gradOutput the windows read
    if reach <= 0:
        return geom, go, True
    if O < reach + s:           # load3d's grid is X wide: the extra columns fit in its last stride
        return geom, go, False
    view = aclTensor(go.viewDims[:-1] + (reach,), go.dataType, go.stride, go.offset, go.format, go.storageDims,
                     go.data)
    return replace(geom, out_sp=geom.out_sp[:-1] + (reach,)), view, False


def plan_convolution_backward(op, geom, go, x, w, outs, promoted, compute, cube_math, profile,
                              forced: dict) -> Plan:
    """The plan of one call; `forced` holds the tiling fields the caller forced (checked by phase 1)."""
    mask = [o is not None for o in outs]
    gi, gw, gb = outs
    ov = forced
    cd = STORAGE[compute]
    isz, c0 = cd.itemsize, 32 // cd.itemsize
    G = geom.groups
    hf32 = compute == "HF32"
    nb = 2 if bool(ov.get("doubleBuffer", True)) else 1
    nvec = vector_core_count(profile)
    ub = ub_bytes(profile)
    workspace = Workspace()
    tiling: dict = {"computeDtype": compute, "cubeMathType": cube_math, "promotedDtype": promoted,
                    "C0": c0, "groups": G}

    def part(purpose: str, nbytes: int):
        return workspace.add(purpose, max(int(nbytes), 32))

    empty = geom.N == 0 or geom.Cin == 0 or geom.Cout == 0
    wanted = mask
    call_geom = geom
    geom, go_cube, no_taps = _cube_geometry(geom, go)
    # windows that touch no input element (stride and padding skip them all) give a zero
    # gradInput, and for a transposed convolution a zero gradWeight too: a zero fill writes them
    dx_zero = mask[0] and not empty and (no_taps or not geom.transposed
                                         and all(f is None for f in make_cube_geometry(geom, mask, c0).phases))
    dw_zero = mask[1] and not empty and no_taps
    mask = [mask[0] and not dx_zero, mask[1] and not dw_zero, mask[2]]      # what the Cube computes
    steps = []
    srcs = {}
    for name, t, needed in (("gradOutput", go, mask[2] or (go_cube is go and (mask[0] or mask[1]))),
                            ("gradOutput:cube", go_cube, go_cube is not go and (mask[0] or mask[1])),
                            ("input", x, mask[1]), ("weight", w, mask[0])):
        if not needed or t.numel() == 0:
            continue
        if t.is_contiguous():
            srcs[name] = ("tensor", t)
        else:
            copy = part(f"contiguous copy of gradOutput's first {t.viewDims[-1]} columns (the ones the windows read)"
                       if name == "gradOutput:cube" else f"contiguous copy of {name} (non-contiguous view)",
                       t.numel() * t.itemsize)
            steps.append((name, t, copy))
            srcs[name] = ("ws", copy, t.dtype)

    def src_arg(name, ws):
        s = srcs[name]
        if s[0] == "tensor":
            t = s[1]
            return tensor_arg(t, name) + t.offset
        return workspace_arg(ws, s[1], s[2], f"workspace:{name}")

    cube = None
    if not empty and (mask[0] or mask[1]):
        geo = make_cube_geometry(geom, mask, c0)
        cc = cube_caps(profile, compute)
        if mask[0]:
            for f in geo.phases:
                if f is not None:
                    check_load3d_limits(f, "ConvolutionBackward gradInput")
        nd2nz = isz == 4
        dx = plan_dx(geo, cc, isz, c0, gi.itemsize, ov, nb) if mask[0] else None
        dw = plan_dw(geo, cc, isz, c0, gw.itemsize, ov, nb, nd2nz) if mask[1] else None
        C1co, C1ci = ceil_div(geo.Cout, c0), ceil_div(geo.Cin, c0)
        zero_bytes = min(16384, ub // 8) // 32 * 32
        room = ub - zero_bytes
        # ---- workspace parts
        DYM = part(f"gradOutput as tall NC1HWC0 ({dtype_name(cd)}, C0 {c0}, {geo.dy.pitch} rows per image)",
                   G * C1co * geo.dy.block * c0 * isz)
        XM = None
        if mask[1]:
            XM = part(f"input as tall NC1HWC0 ({dtype_name(cd)}, C0 {c0}, {geo.x.pitch} rows per image)",
                      G * C1ci * geo.x.block * c0 * isz)
        maps = [(plan_to5hd("gradOutput", geo.N, G, geo.Cout, c0, int(np.prod(geo.O)), geo.dy, go.dtype, cd, room),
                 0, 4)]
        if mask[1] and geo.s2d is not None:
            maps.append((plan_space_to_depth_map(geo.N, geo.s2d, geo.X[1:], geo.x, x.dtype, cd, room), 1, 8))
        elif mask[1]:
            maps.append((plan_to5hd("input", geo.N, G, geo.Cin, c0, int(np.prod(geo.X)), geo.x, x.dtype, cd, room),
                         1, 8))
        wp = WP = DXG = None
        if mask[0]:
            wp = plan_packw(geo, w.dtype, cd, c0, dx.ntiles, room)
            WP = part(f"weight as gradInput's right operand (taps flipped, {'per sub-pixel phase, ' if geo.nphase > 1 else ''}"
                      f"L0B zN fractals per n-tile of {dx.nt}, {dtype_name(cd)})", wp.size * isz)
            DXG = part(f"gradInput per sub-pixel phase, NC1HWC0 ({geo.nphase} phase grid(s) of {geo.dxg.R} x "
                       f"{geo.dxg.Wd}, {dtype_name(gi.dtype)})",
                       G * ceil_div(geo.Cin, 16) * geo.nphase * geo.dxg.block * 16 * gi.itemsize)
        ACC = A32 = None
        acc_dt = None
        cast = None
        if mask[1]:
            KD, Khw = geo.dwf.ax[0].K, geo.dwf.Khw
            rowKd = ceil_div(geo.Cb, c0) * Khw * c0
            acc_dt = F32 if dw.ks > 1 else np.dtype(gw.dtype)
            ACC = part((f"gradWeight FP32 accumulator (partial sums of {dw.ks} cores per tile, atomic add)"
                        if dw.ks > 1 else f"gradWeight tiles ({dtype_name(acc_dt)}, C0-blocked columns)"),
                       G * geo.Mg * KD * rowKd * acc_dt.itemsize)
            if nd2nz:
                aname, at = ("gradOutput", go) if geo.amap == "dy" else ("input", x)
                if np.dtype(at.dtype) != cd:
                    A32 = part(f"{aname} cast to {dtype_name(cd)} (gradWeight's left operand, ND->NZ)", at.numel() * isz)
                    cast = (at.numel(), np.dtype(at.dtype), cd, 8192, aname)
                else:
                    A32 = ("src", aname)
        # ---- cube blocks: LPT over the AICs
        costs, kinds = [], []
        if dx is not None:
            costs += dx.costs
            kinds += [("dx", i) for i in range(len(dx.units))]
        if dw is not None:
            costs += dw.costs
            kinds += [("dw", i) for i in range(len(dw.units))]
        nblk = int(ov.get("blockDim", 0)) or cc.cores
        groups_, makespan = balance(costs, nblk)
        blocks = []
        for grp in groups_:
            ks = [kinds[i] for i in grp]
            blocks.append([k for k in ks if k[0] == "dx"] + [k for k in ks if k[0] == "dw"])
        l1 = max(align32(dx.slab) + dx.bchunk if dx else 0, align32(dw.slabA) + dw.slabB if dw else 0,
                 # a unit that no tap reaches writes its tile from zero fractals (_zero_stage)
                 (ceil_div(dx.m, 16) + ceil_div(dx.nt, 16)) * 512 if dx else 0,
                 (ceil_div(dw.mt, 16) + ceil_div(dw.nt, 16)) * 512 if dw else 0)
        l0a = max(align_up(dx.m, 16) * dx.kk * isz if dx else 0, align_up(dw.mt, 16) * dw.kk * isz if dw else 0)
        l0b = max(dx.kk * align_up(dx.nt, 16) * isz if dx else 0, dw.kk * align_up(dw.nt, 16) * isz if dw else 0)
        l0c = max(dx.nc * align_up(dx.m, 16) * align_up(dx.nt, 16) * 4 if dx else 0,
                  align_up(dw.mt, 16) * align_up(dw.nt, 16) * 4 if dw else 0)
        for b, need, cap in (("L1", nb * l1, cc.L1), ("L0A", nb * l0a, cc.L0A), ("L0B", nb * l0b, cc.L0B),
                             ("L0C", l0c, cc.L0C)):
            if need > cap:
                raise tiling_error(f"ConvolutionBackward tiling: {need} B of {b} does not fit: {b} holds {cap} B")
        ub_out = 0
        if not cc.a2:
            ub_out = max(align_up(dx.m, 16) * align_up(dx.nt, 16) * gi.itemsize if dx else 0,
                         align_up(dw.mt, 16) * align_up(dw.nt, 16) * acc_dt.itemsize if dw else 0)
            if 2 * ub_out > ub:
                raise tiling_error(f"ConvolutionBackward tiling: 2 x {ub_out} B of UB for L0C -> UB does not fit: "
                                   f"UB holds {ub} B")
        cube = CubeJob(geo, cc.a2, cd, hf32, nb, align32(l1), l0a, l0b, l0c, dx, dw, wp,
                       np.dtype(gi.dtype) if mask[0] else None, acc_dt, ub_out, blocks)
        # ---- prologue work
        pro_items = []
        for i, (t, _, _) in enumerate(maps):
            pro_items += [(("5hd", i), it) for it in (space_to_depth_items(t) if isinstance(t, SpaceToDepthMap) else to5hd_items(t))]
            pro_items += [(("gap", i), it) for it in gap_items(t, zero_bytes)]
        if wp is not None:
            pro_items += [("pack", it) for it in wp.items]
        if mask[1] and dw.ks > 1:
            pro_items += [("acc0", it) for it in zero_items(ACC.nbytes, zero_bytes)]
        if cast is not None:
            pro_items += [("cast", it) for it in cast_items(cast[0], cast[3])]
        pro_blocks = [[] for _ in range(min(nvec, len(pro_items)))]
        kinds_p = []
        for k, _ in pro_items:
            if k not in kinds_p:
                kinds_p.append(k)
        off = 0
        for k in kinds_p:
            its = [it for kk, it in pro_items if kk == k]
            for i, it in enumerate(its):
                pro_blocks[(off + i) % len(pro_blocks)].append((k, it))
            off += len(its)
        prologue = Prologue(ub, zero_bytes, maps, wp, ACC.nbytes if (mask[1] and dw.ks > 1) else 0,
                            cast[:4] if cast else None, pro_blocks)
        # ---- epilogue work
        dxo = plan_dx_out(geo, gi.dtype, ub) if mask[0] else None
        dwo = None
        if mask[1] and geo.s2d is not None:
            dwo = plan_space_to_depth_out(geo.s2d, geo.Mg, acc_dt, gw.dtype, ub)
        elif mask[1]:
            dwo = plan_dw_out(G, geo.Mg, geo.Cb, c0, geo.dwf.ax[0].K, geo.dwf.Khw, acc_dt, gw.dtype, ub)
        epi_items = ([("dx", it) for it in dx_out_items(dxo)] if dxo else []) + \
                    ([("dw", it) for it in (space_to_depth_out_items(dwo) if isinstance(dwo, SpaceToDepthOut) else dw_out_items(dwo))]
                     if dwo else [])
        epi_blocks = [[] for _ in range(min(nvec, len(epi_items)))]
        for i, it in enumerate(epi_items):
            epi_blocks[i % len(epi_blocks)].append(it)
        epilogue = Epilogue(ub, dxo, dwo, epi_blocks)
        if dx is not None:
            tiling["gradInput"] = {"baseM": dx.m, "baseN": dx.nt, "baseK": dx.kk, "c1Chunk": dx.c1n,
                                   "L0CTiles": dx.nc, "units": len(dx.units), "phases": geo.nphase,
                                   "phasesWithTaps": sum(f is not None for f in geo.phases),
                                   "rowsPerImage": geo.dy.pitch, "doubleBuffer": nb == 2}
        if dw is not None:
            tiling["gradWeight"] = {"baseM": dw.mt, "baseN": dw.nt, "baseK": dw.kk, "stagePositions": dw.kc,
                                    "kSplit": dw.ks, "units": len(dw.units), "leftOperand":
                                    "ND->NZ + load2d" if dw.a_nd2nz else "load3d (1x1, transposed)",
                                    "doubleBuffer": nb == 2}
        tiling["blockDim"] = len(blocks)
        tiling["estimatedCubeCycles"] = round(makespan)
    dense_out = {}
    for i, (name, t) in enumerate((("gradInput", gi), ("gradWeight", gw), ("gradBias", gb))):
        if wanted[i] and t.numel() > 0 and not t.is_contiguous():
            dense_out[name] = part(f"{name} dense, before the strided write-back", t.numel() * t.itemsize)

    def out_arg(name, t, ws):
        if name in dense_out:
            return workspace_arg(ws, dense_out[name], t.dtype, f"workspace:{name}")
        return tensor_arg(t, name) + t.offset

    def build(ws):
        L = []
        for name, t, copy in steps:
            b, _ = view_copy_launch(t, name, profile, gather=True)
            L.append(b(workspace_arg(ws, copy, t.dtype, f"workspace:{name}")))
        if empty:
            if mask[1] and gw.numel():
                L.append(zero_fill_launch("ZeroFill(gradWeight)", out_arg("gradWeight", gw, ws), gw.numel() * gw.itemsize,
                                          profile))
            if mask[0] and gi.numel() and (geom.Cout == 0 and geom.N > 0 and geom.Cin > 0):
                L.append(zero_fill_launch("ZeroFill(gradInput)", out_arg("gradInput", gi, ws), gi.numel() * gi.itemsize,
                                          profile))
            if mask[2] and gb.numel() and (geom.N == 0 or geom.Cout == 0):
                L.append(zero_fill_launch("ZeroFill(gradBias)", out_arg("gradBias", gb, ws), gb.numel() * gb.itemsize,
                                          profile))
        for name, t, zero in (("gradInput", gi, dx_zero), ("gradWeight", gw, dw_zero)):
            if zero:
                L.append(zero_fill_launch(f"ZeroFill({name})", out_arg(name, t, ws), t.numel() * t.itemsize, profile))
        if cube is not None:
            dya = src_arg("gradOutput" if go_cube is go else "gradOutput:cube", ws)
            xa = src_arg("input", ws) if mask[1] else None
            wa = src_arg("weight", ws) if mask[0] else None
            wpa = workspace_arg(ws, WP, cd, "workspace:W'") if WP is not None else None
            dym = workspace_arg(ws, DYM, cd, "workspace:dy 5HD")
            xm = workspace_arg(ws, XM, cd, "workspace:x 5HD") if XM is not None else None
            acca = workspace_arg(ws, ACC, acc_dt, "workspace:dW acc") if ACC is not None else None
            dxga = workspace_arg(ws, DXG, gi.dtype, "workspace:dX phases") if DXG is not None else None
            a32 = cs_src = cs_dst = None
            if A32 is not None:
                if isinstance(A32, tuple):
                    a32 = src_arg(A32[1], ws)
                else:
                    a32 = cs_dst = workspace_arg(ws, A32, cd, "workspace:A cast")
                    cs_src = src_arg(cast[4], ws)
            gms = (dya, xa, wa, wpa, dym, acca, cs_src, cs_dst, xm)
            L.append(KernelLaunch("TransData(gradOutput, input -> NC1HWC0; weight -> W')" if mask[0] and mask[1] else
                                  ("TransData(gradOutput -> NC1HWC0; weight -> W')" if mask[0] else
                                   "TransData(gradOutput, input -> NC1HWC0)"),
                                  prologue_body, len(prologue.blocks), "vector", (gms, prologue)))
            name = " + ".join(n for n, b in (("GradInput(sub-pixel img2col x W'T)", mask[0]),
                                             ("GradWeight(dy^T x img2col)", mask[1])) if b)
            L.append(KernelLaunch(f"Cube: {name}", cube_body, len(cube.blocks), "cube",
                                  (dym, xm, wpa, dxga, acca, a32, cube)))
            ego = (dxga, out_arg("gradInput", gi, ws) if mask[0] else None,
                   acca, out_arg("gradWeight", gw, ws) if mask[1] else None)
            L.append(KernelLaunch(" + ".join(n for n, b in (("GradInput(phases NC1HWC0 -> NCHW)", mask[0]),
                                                           ("GradWeight(-> weight layout)", mask[1])) if b),
                                  epilogue_body, len(epilogue.blocks), "vector", (ego, epilogue)))
        for name, t in (("gradInput", gi), ("gradWeight", gw)):
            if name in dense_out:       # written dense above (by the epilogue or a zero fill)
                b, _ = view_copy_launch(t, name, profile, gather=False)
                L.append(b(out_arg(name, t, ws)))
        if mask[2] and gb.numel() and not (geom.N == 0):
            goa = src_arg("gradOutput", ws)
            P = int(np.prod(call_geom.out_sp))
            L.append(bias_launch(goa, out_arg("gradBias", gb, ws), geom.N, geom.Cout, P, goa.dtype,
                                 gb.dtype, profile))
            if "gradBias" in dense_out:
                b, _ = view_copy_launch(gb, "gradBias", profile, gather=False)
                L.append(b(out_arg("gradBias", gb, ws)))
        return L

    return Plan(workspace, build, tiling)
