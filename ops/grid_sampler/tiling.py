"""GridSampler2DBackward's vocabulary (modes, limits) and the main kernel's host-side tiling: points
per tile and channels per pass, the largest that fit UB (forced by pointsPerTile /
channelsPerChunk), and the corner geometry of each interpolation mode.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.arith import align_up, ceil_div
from ..common import split_evenly, tiling_error, ub_bytes, ub_too_small, vector_core_count


OP = "GridSampler2DBackward"
BILINEAR, NEAREST, BICUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2
PADDING_MODES = (ZEROS, BORDER, REFLECTION)
CUBIC_A = -0.75                 # PyTorch's cubic convolution coefficient
COORD_LIMIT = float(2 ** 23)    # |unnormalised coordinate| clamp (FP32 resolves no pixel beyond)
NAN_COORD = -100.0              # where the CANN kernel puts a NaN coordinate
P_MAX = 64                      # grid points per tile, at most (tiling choice)
P_ALIGN = 16                    # points per tile are a multiple of this (32-B rows for FP16 too)
UB_RESERVE = 2048               # UB bytes kept free (alignment slack)
MAX_BLOCK_COUNT = 4095          # DataCopyExtParams.blockCount is 12 bits


def geometry(interp: int, padding: int):
    """(planes K, runs, pad pixels). A run is (first plane, taps L, dy, dx): L taps that are
    consecutive in x, gathered / scattered by one copy; (dy, dx) place it relative to the corner
    (floor(y), floor(x)) (used for the L2's nominal address)."""
    if interp == BILINEAR:
        return 4, ((0, 2, 0, 0), (2, 2, 1, 0)), 1
    if interp == NEAREST:
        return 1, ((0, 1, 0, 0),), 0
    if padding == ZEROS:
        return 16, tuple((4 * j, 4, j - 1, -1) for j in range(4)), 3
    return 16, tuple((4 * j + i, 1, j - 1, i - 1) for j in range(4) for i in range(4)), 0


@dataclass
class GridTiles:
    """The tile geometry both grid-sample kernels receive (host-side tiling struct)."""
    N: int
    C: int
    H: int
    W: int
    Ho: int
    Wo: int
    interp: int
    padding: int
    align: bool
    io: np.dtype            # tensors' dtype
    cdt: np.dtype           # compute dtype (FLOAT, or DOUBLE)
    P: int                  # grid points per tile
    Cc: int                 # channels per chunk
    Ccp: int                # Cc padded to 32 bytes
    nch: int                # channel chunks
    K: int                  # corner planes
    runs: tuple
    pad: int                # zero pixels before / after the NHWC buffers


@dataclass
class GridSamplerGradTiling(GridTiles):
    """What the backward's main kernel receives."""
    need_x: bool            # gridGrad with bilinear / bicubic: gathers of the input
    need_in: bool           # inputGrad: scatters
    need_gg: bool           # gridGrad
    tiles_per_n: int
    blocks: tuple           # per block: (first tile, end tile)
    n_vec: int              # scratch vectors (compute dtype, P each)
    n_int: int              # scratch int32 vectors (P each)


def _scratch_counts(interp: int, K: int, runs: int) -> tuple[int, int]:
    vec = 24 + 3 * K + (48 if interp == BICUBIC else 14)
    ints = 6 + 2 * runs + (8 if interp == BICUBIC else 0)
    return vec, ints


def main_buffers(t: GridSamplerGradTiling) -> list[int]:
    """Byte sizes of every UB buffer the main kernel allocates, in its order."""
    P, Ccp, K = t.P, t.Ccp, t.K
    isz, esz = t.io.itemsize, t.cdt.itemsize
    out = [P * 2 * isz, Ccp * P * isz]                       # grid tile, gradOutput tile
    if t.need_x:
        out.append(K * P * Ccp * esz)                        # gathered corners
    if t.need_in:
        out.append(K * P * Ccp * esz)                        # contributions to scatter
    if t.need_gg:
        out.append(P * 2 * isz)                              # gridGrad tile
    if t.need_x or t.need_in:
        out.append(Ccp * K * P * esz)                        # channel-major scratch
    if isz != esz:
        out.append(Ccp * P * esz)                            # gradOutput in the compute dtype
    out.append(P * Ccp * esz)                                # gradOutput point-major
    out.append(t.n_vec * P * esz + t.n_int * P * 4 + 4 * 32)  # small vectors and masks
    return out


TILING_FIELDS = {"pointsPerTile": "int", "channelsPerChunk": "int", "blockDim": "int"}
MAX_BLOCK_DIM = 65535


def plan_main(N, C, H, W, Ho, Wo, interp, padding, align, io, cdt, need_in, need_gg, profile, override=None):
    """The main kernel's tiling: grid points per tile P (a multiple of P_ALIGN, at most P_MAX) and
    channels per pass Cc, the largest that fit UB (P first). `override` forces pointsPerTile and /
    or channelsPerChunk, and blockDim the number of blocks the tiles are dealt over (default:
    one per vector core); one that cannot work, or a call no tiling fits, is 561002."""
    K, runs, pad = geometry(interp, padding)
    need_x = need_gg and interp != NEAREST
    n_vec, n_int = _scratch_counts(interp, K, len(runs))

    def make(P, Cc, Ccp):
        return GridSamplerGradTiling(N, C, H, W, Ho, Wo, interp, padding, align, io, cdt, P, Cc,
                                     Ccp, ceil_div(C, Cc), K, runs, pad, need_x, need_in, need_gg,
                                     0, (), n_vec, n_int)
    return fit_tiles(OP, N, C, Ho * Wo, cdt, profile, override, make, main_buffers)


def fit_tiles(op: str, N, C, HoWo, cdt, profile, override, make, buffers):
    """Both GridSampler kernels' tile search: grid points per tile P (a multiple of P_ALIGN, at
    most P_MAX) and channels per pass Cc, the largest whose buffers (`buffers(make(P, Cc, Ccp))`,
    byte sizes) fit UB, P first; Cc halves (to 32 bytes of the compute dtype) while P would fall
    under 32. `override`: pointsPerTile / channelsPerChunk / blockDim forced (561002 where they
    cannot work, or where no tiling fits). Returns the tiling with its tiles dealt over the
    blocks."""
    cblk = 32 // cdt.itemsize
    ub = ub_bytes(profile) - UB_RESERVE
    p_cap = min(P_MAX, align_up(HoWo, P_ALIGN))
    override = override or {}
    o_p, o_c = override.get("pointsPerTile"), override.get("channelsPerChunk")
    o_b = override.get("blockDim")
    if o_b is not None and o_b > MAX_BLOCK_DIM:
        raise tiling_error(f"{op} tiling: blockDim {o_b} exceeds {MAX_BLOCK_DIM}")
    if o_p is not None and (o_p % P_ALIGN or o_p > P_MAX):
        raise tiling_error(f"{op} tiling: pointsPerTile {o_p} must be a multiple of {P_ALIGN}, at most {P_MAX}")
    if o_c is not None and o_c > C:
        raise tiling_error(f"{op} tiling: channelsPerChunk {o_c} exceeds C = {C}")
    p_range = [o_p] if o_p else range(p_cap, P_ALIGN - 1, -P_ALIGN)
    Cc = o_c or C
    while True:
        Ccp = align_up(Cc, cblk)
        best = None
        for P in p_range:
            t = make(P, Cc, Ccp)
            if sum(align_up(b, 32) for b in buffers(t)) <= ub:
                best = t
                break
        if best is not None and (o_c or o_p or best.P >= min(p_cap, 32) or Cc <= cblk):
            break
        if o_c or Cc <= cblk:
            if o_p or o_c:
                raise tiling_error(f"{op} tiling: no tiling fits UB ({ub} B usable) for C={C} "
                                   f"(pointsPerTile {o_p}, channelsPerChunk {o_c})")
            need = sum(align_up(b, 32) for b in buffers(make(P_ALIGN, Cc, Ccp))) + UB_RESERVE
            raise tiling_error(f"{op} tiling: " + ub_too_small(
                profile, need, f"the smallest tile ({P_ALIGN} points x {Cc} channels, {UB_RESERVE} B reserved)"))
        Cc = align_up(ceil_div(Cc, 2), cblk)
    t = best
    t.tiles_per_n = ceil_div(HoWo, t.P)
    t.blocks = split_evenly(N * t.tiles_per_n, o_b or vector_core_count(profile))
    return t


# ---- the forward (aclnnGridSampler2D) -------------------------------------------------------------
FORWARD_OP = "GridSampler2D"


@dataclass
class GridSamplerTiling(GridTiles):
    """What the forward kernel (GridSampler2D) receives."""
    tiles_per_n: int
    blocks: tuple           # per block: (first tile, end tile)
    n_vec: int              # scratch vectors (compute dtype, P each)
    n_int: int              # scratch int32 vectors (P each)
    need_x = True           # (what the shared gather code asks) the corners are gathered ...
    need_in = False         # ... and nothing is scattered


def forward_buffers(t: GridSamplerTiling) -> list[int]:
    """Byte sizes of every UB buffer the forward kernel allocates, in its order."""
    P, Ccp, K = t.P, t.Ccp, t.K
    isz, esz = t.io.itemsize, t.cdt.itemsize
    out = [P * 2 * isz]                                      # grid tile
    out += [K * P * Ccp * esz] * 2                           # gathered corners, double-buffered
    out.append(K * P * Ccp * esz)                            # the weights broadcast along the channels
    out += [Ccp * P * isz] * 2                               # output tile (channel-major), double-buffered
    if isz != esz:
        out.append(Ccp * P * esz)                            # channel-major before the cast
    out.append(t.n_vec * P * esz + t.n_int * P * 4 + 4 * 32)  # small vectors and masks
    return out


def plan_forward(N, C, H, W, Ho, Wo, interp, padding, align, io, cdt, profile, override=None):
    """The forward kernel's tiling (fit_tiles: the same search and overrides as the backward's)."""
    K, runs, pad = geometry(interp, padding)
    n_vec, n_int = _scratch_counts(interp, K, len(runs))
    n_vec += 2 * K                                           # the weights kept per tile parity

    def make(P, Cc, Ccp):
        return GridSamplerTiling(N, C, H, W, Ho, Wo, interp, padding, align, io, cdt, P, Cc, Ccp,
                                 ceil_div(C, Cc), K, runs, pad, 0, (), n_vec, n_int)
    return fit_tiles(FORWARD_OP, N, C, Ho * Wo, cdt, profile, override, make, forward_buffers)
