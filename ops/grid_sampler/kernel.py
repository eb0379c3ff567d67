"""The main kernel (vector cores): per tile of grid points, the corner coordinates and weights,
the gathered corners, gridGrad, and the inputGrad contributions scattered by atomic-add
DataCopyPadIndirect, software-pipelined. `GridPointTiles` is what it shares with the forward
kernel (forward_kernel.py): tiles of grid points, the grid tile's coordinates, the corner gathers.
"""
from __future__ import annotations

from functools import lru_cache, partial

import numpy as np

from simulator.kernel import (GM_ADDR, Add, Cast, Copy, DataCopyExtParams, DataCopyPad, Duplicate,
                              GetBlockIdx, GlobalTensor, HardEvent, Loop, Mul, Muls, PipeBarrier, PIPE_ALL,
                              RoundMode, SetAtomicAdd, SetAtomicNone, SetFlag, Sub, TBuf, TPipe, TPosition,
                              TQue, WaitFlag, int32)
from simulator.kernel.indirect import IndirectCopies, nominal_rows
from simulator.arith import align_up
from .coordinates import SourceCoordinates
from .layout_kernels import transpose_2d
from .tiling import BICUBIC, BILINEAR, NEAREST, GridSamplerGradTiling, main_buffers


class _Scratch:
    """Named vectors carved out of one VECCALC buffer, each allocated on first use of its name:
    compute-dtype vectors (`vec`), int32 vectors (`int_vec`: floor coordinates, GM offsets) and
    32-byte Compare bit masks (`mask`), in three regions sized by the tiling (n_vec, n_int)."""

    def __init__(self, buf: TBuf, t: GridSamplerGradTiling):
        self.P, self.cdt = t.P, t.cdt
        self.raw = buf.Get(np.uint8)
        self.vec_base, self.int_base = 0, t.n_vec * t.P * t.cdt.itemsize
        self.mask_base = self.int_base + t.n_int * t.P * 4
        self.n_vec, self.n_int = t.n_vec, t.n_int
        self._vecs, self._int_vecs, self._masks = {}, {}, {}

    def vec(self, name: str, length: int = 1):
        """A compute-dtype vector of length * P elements."""
        got = self._vecs.get(name)
        if got is None:
            used = sum(n for _, n in self._vecs.values())
            if used + length > self.n_vec:
                raise RuntimeError(f"scratch: {used + length} vectors needed, {self.n_vec} planned")
            t = self.raw[self.vec_base + used * self.P * self.cdt.itemsize].ReinterpretCast(self.cdt)
            got = self._vecs[name] = (t, length)
        return got[0]

    def int_vec(self, name: str):
        """An int32 vector of P elements."""
        got = self._int_vecs.get(name)
        if got is None:
            k = len(self._int_vecs)
            if k >= self.n_int:
                raise RuntimeError(f"scratch: more than {self.n_int} int vectors")
            got = self._int_vecs[name] = self.raw[self.int_base + k * self.P * 4].ReinterpretCast(int32)
        return got

    def mask(self, name: str):
        """A Compare bit mask (32 bytes: one bit per point)."""
        got = self._masks.get(name)
        if got is None:
            k = len(self._masks)
            got = self._masks[name] = self.raw[self.mask_base + k * 32]
        return got


@lru_cache(maxsize=4096)
def _identity_offsets(H: int, W: int, C: int, Ho: int, Wo: int, pad: int, p0: int, cnt: int, dy: int, dx: int,
                      L: int) -> np.ndarray:
    """KernelGridSampler2DGrad._nominal's offsets, made once per tile position and corner run: every
    image, every block and both the copies and the Loop's touches ask for the same few (read-only)."""
    ho, wo = np.divmod(np.arange(p0, p0 + cnt), Wo)
    y = np.minimum(np.maximum(ho * H // Ho + dy, 0), H - 1)
    x = np.minimum(np.maximum(wo * W // Wo + dx, -pad), W - L + pad)
    out = (y * W + x) * C
    out.flags.writeable = False
    return out


class GridPointTiles(SourceCoordinates):
    """What both GridSampler kernels do alike: tiles of P grid points of one image (dealt over
    the blocks by the tiling), channel chunks, the grid tile brought in (CopyInGrid, GridXY),
    and the corner runs gathered from the NHWC input by DataCopyPadIndirect (GatherOps), with
    the nominal addresses the L2 model and fast mode's Loop see (StepTouches). Expects
    gridQ, cornerQ, scratch, idxEvent and xws set by the kernel's Init."""

    def _tile(self, tile):
        t = self.t
        n, j = divmod(tile, t.tiles_per_n)
        p0 = j * t.P
        return n, p0, min(t.P, t.Ho * t.Wo - p0)

    def _chunk(self, tile, ch):
        """The tile's image, first point and point count, and the chunk's first channel and count."""
        c0 = ch * self.t.Cc
        return (*self._tile(tile), c0, min(self.t.Cc, self.t.C - c0))

    # ---- grid tile -> coordinates, weights, masks, offsets ------------------------------------
    def CopyInGrid(self, tile):
        t = self.t
        n, p0, cnt = self._tile(tile)
        g = self.gridQ.AllocTensor(t.io)
        DataCopyPad(g, self.gridGm[(n * t.Ho * t.Wo + p0) * 2],
                    DataCopyExtParams(1, cnt * 2 * t.io.itemsize, 0, 0))
        self.gridQ.EnQue(g)

    def GridXY(self):
        """The grid tile (gridQ) as two compute-dtype P-vectors, x then y."""
        t, s, P = self.t, self.scratch, self.t.P
        g = self.gridQ.DeQue(t.io)
        xy = s.vec("xy", 2)
        if t.io.itemsize != t.cdt.itemsize:
            gf = s.vec("gridf", 2)
            Cast(gf, g, RoundMode.CAST_NONE, 2 * P)
            transpose_2d(xy, gf, P, 2)                 # [P][2] -> [2][P]: x then y
        else:
            transpose_2d(xy, g, P, 2)
        self.gridQ.FreeTensor(g)
        return xy, xy[P]

    def _chunk_gm(self, base: GM_ADDR, n, c0) -> GlobalTensor:
        t = self.t
        g = GlobalTensor(t.cdt)
        g.SetGlobalBuffer(base + ((t.pad + n * t.H * t.W) * t.C + c0))
        return g

    def _nominal(self, n, p0, cnt, dy, dx, L) -> np.ndarray:
        """The element offsets an identity grid would touch at points p0..p0+cnt-1 (for the L2
        model only), from the image's start (the same in every image)."""
        t = self.t
        return _identity_offsets(t.H, t.W, t.C, t.Ho, t.Wo, t.pad, p0, cnt, dy, dx, L)

    def _indirect_runs(self, tile, ch, gather: bool):
        """Per corner run of the step: (its first corner, the GM tensor, the copies' params, their
        nominal offsets) of its gathers (from the input) or its atomic scatters (to the
        accumulator)."""
        t, P, Ccp = self.t, self.t.P, self.t.Ccp
        n, p0, cnt, c0, cc = self._chunk(tile, ch)
        esz = t.cdt.itemsize
        gm = self._chunk_gm(self.xws if gather else self.acc, n, c0)
        ub_gap = (P * Ccp * esz - align_up(cc * esz, 32)) // 32
        for k0, L, dy, dx in t.runs:
            gm_gap = (t.C - cc) * esz
            params = (DataCopyExtParams(L, cc * esz, gm_gap, ub_gap) if gather else
                      DataCopyExtParams(L, cc * esz, ub_gap, gm_gap))
            yield k0, gm, params, self._nominal(n, p0, cnt, dy, dx, L)

    def StepTouches(self, i, steps):
        """What step i's gathers (the next step's corners) and scatters show the L2: the Loop's
        `touches`, for the steps fast mode skips."""
        t, out = self.t, []
        if t.need_x and i + 1 < len(steps):
            out += [nominal_rows(gm, params, nom, True) for _, gm, params, nom in self._indirect_runs(*steps[i + 1], True)]
        if t.need_in:
            out += [nominal_rows(gm, params, nom, False) for _, gm, params, nom in self._indirect_runs(*steps[i], False)]
        return out

    def GatherOps(self, tile, ch):
        """Allocate the corner buffer now; return (the gathers, the EnQue that ends them)."""
        t, P, Ccp = self.t, self.t.P, self.t.Ccp
        cnt = self._tile(tile)[2]
        x = self.cornerQ.AllocTensor(t.cdt)
        if ch == 0:
            WaitFlag(HardEvent.V_MTE2, self.idxEvent)
        runs = []
        for r, (k0, gm, params, nominal) in enumerate(self._indirect_runs(tile, ch, True)):
            idx = self.scratch.int_vec(f"idx{tile % 2}_{r}")
            runs.append(IndirectCopies(x[k0 * P * Ccp], gm, params, idx, 0, cnt, Ccp, nominal))
        return runs, partial(self.cornerQ.EnQue, x)


class KernelGridSampler2DGrad(GridPointTiles):
    """Init, then per tile: CopyInGrid, ComputeCoords, per channel chunk (CopyInGradOutput,
    Gather, ComputeChunk, Scatter), ComputeGridGrad, CopyOutGridGrad."""

    def Init(self, gradOutput: GM_ADDR, grid: GM_ADDR, xws: GM_ADDR | None, acc: GM_ADDR | None,
             gridGrad: GM_ADDR | None, t: GridSamplerGradTiling):
        self.t = t
        P, Ccp, K = t.P, t.Ccp, t.K
        io, cdt = t.io, t.cdt
        sizes = iter(main_buffers(t))
        self.pipe = pipe = TPipe()
        self.gridQ = TQue(TPosition.VECIN, 1)
        pipe.InitBuffer(self.gridQ, 1, next(sizes))
        self.gradOutQ = TQue(TPosition.VECIN, 1)
        pipe.InitBuffer(self.gradOutQ, 1, next(sizes))
        if t.need_x:
            self.cornerQ = TQue(TPosition.VECIN, 1)
            pipe.InitBuffer(self.cornerQ, 1, next(sizes))
        if t.need_in:
            self.contribQ = TQue(TPosition.VECOUT, 1)
            pipe.InitBuffer(self.contribQ, 1, next(sizes))
        if t.need_gg:
            self.gridGradQ = TQue(TPosition.VECOUT, 1)
            pipe.InitBuffer(self.gridGradQ, 1, next(sizes))
        if t.need_x or t.need_in:
            self.channelMajorBuf = TBuf()
            pipe.InitBuffer(self.channelMajorBuf, next(sizes))
        if io.itemsize != cdt.itemsize:
            self.gradOutCastBuf = TBuf()
            pipe.InitBuffer(self.gradOutCastBuf, next(sizes))
        self.pointMajorBuf = TBuf()
        pipe.InitBuffer(self.pointMajorBuf, next(sizes))
        scratchBuf = TBuf()
        pipe.InitBuffer(scratchBuf, next(sizes))
        self.scratch = _Scratch(scratchBuf, t)
        if t.need_x:
            self.idxEvent = pipe.AllocEventID(HardEvent.V_MTE2)
        self.goGm, self.gridGm = GlobalTensor(io), GlobalTensor(io)
        self.goGm.SetGlobalBuffer(gradOutput)
        self.gridGm.SetGlobalBuffer(grid)
        self.xws, self.acc = xws, acc
        if gridGrad is not None:
            self.ggGm = GlobalTensor(io)
            self.ggGm.SetGlobalBuffer(gridGrad)
        # lanes no copy writes (channel padding, the tail tile's points) are read by vector ops:
        # give them zeros once, before any copy lands
        for q, n in ((self.gridQ, P * 2), (self.gradOutQ, Ccp * P)):
            z = q.AllocTensor(io)
            Duplicate(z, 0, n)
            q.FreeTensor(z)
        if t.need_x:
            z = self.cornerQ.AllocTensor(cdt)
            Duplicate(z, 0, K * P * Ccp)
            self.cornerQ.FreeTensor(z)
        Duplicate(self.scratch.vec("one"), 1.0, P)
        PipeBarrier(PIPE_ALL)

    # ---- driver ------------------------------------------------------------------------------
    def Process(self):
        """Software-pipelined over (tile, channel chunk) steps: while step s's contributions are
        scattered (MTE3), step s+1's corners are gathered (MTE2); the copies are issued
        alternately so the scalar unit's in-order issue never starves one queue behind the
        other's backlog."""
        t = self.t
        first, end = t.blocks[GetBlockIdx()]
        steps = [(tile, ch) for tile in range(first, end) for ch in range(t.nch)]
        if not steps:
            return
        self.CopyInGrid(steps[0][0])
        self.ComputeCoords(steps[0][0])
        self.CopyInGradOutput(*steps[0])
        gathers = self.GatherOps(*steps[0]) if t.need_x else None
        self.Interleave(gathers, None)
        # a step repeats two tiles later (the index buffers alternate by tile); a partial tile,
        # its neighbour and the last step are steps of their own kind
        points = [self._tile(tile)[2] for tile, _ in steps] + [0]
        for i in Loop(len(steps), key=lambda i: (points[i], points[i + 1]), period=2 * t.nch,
                       touches=partial(self.StepTouches, steps=steps)):
            tile, ch = steps[i]
            nxt = steps[i + 1] if i + 1 < len(steps) else None
            last = ch == t.nch - 1
            if last and nxt is not None:
                self.CopyInGrid(nxt[0])             # MTE2 runs it after this step's gathers
            self.ComputeChunk(tile, ch)
            if last and t.need_gg:
                self.ComputeGridGrad()
            if last and nxt is not None:
                self.ComputeCoords(nxt[0])
            gathers = scatters = None
            if nxt is not None:
                self.CopyInGradOutput(*nxt)
                if t.need_x:
                    gathers = self.GatherOps(*nxt)
            if t.need_in:
                scatters = self.ScatterOps(tile, ch)
            self.Interleave(gathers, scatters)
            if last and t.need_gg:
                self.CopyOutGridGrad(tile)

    @staticmethod
    def Interleave(a, b):
        """Issue two (runs of copies, finish) alternately, a copy from each in turn, then their
        finishing steps."""
        ops_a = [(r.issue, i) for r in a[0] for i in range(r.count)] if a else []
        ops_b = [(r.issue, i) for r in b[0] for i in range(r.count)] if b else []
        for k in range(max(len(ops_a), len(ops_b))):
            if k < len(ops_a):
                issue, i = ops_a[k]
                issue(i)
            if k < len(ops_b):
                issue, i = ops_b[k]
                issue(i)
        for x in (a, b):
            if x:
                x[1]()

    def ComputeCoords(self, tile):
        t, s = self.t, self.scratch
        par = tile % 2
        ix, iy = self.GridXY()
        if t.interp == BICUBIC:
            # d(source coordinate)/d(grid), PyTorch's gix_mult / giy_mult: constants here (bicubic
            # pads each tap, not the coordinate), per-point vectors below
            self.gix_mult, self.giy_mult = self.unnormalize(ix, t.W), self.unnormalize(iy, t.H)
            self.sanitize(ix)
            self.sanitize(iy)
            self.BicubicCoords(ix, iy, par)
        else:
            self.gix_mult, self.giy_mult = s.vec("gxm"), s.vec("gym")
            self.source_index(ix, t.W, self.gix_mult)
            self.source_index(iy, t.H, self.giy_mult)
            if t.interp == BILINEAR:
                self.BilinearCoords(ix, iy, par)
            else:
                self.NearestCoords(ix, iy, par)
        if t.need_x:
            SetFlag(HardEvent.V_MTE2, self.idxEvent)      # the offsets are in UB

    # ---- per channel chunk --------------------------------------------------------------------
    def CopyInGradOutput(self, tile, ch):
        """gradOutput[n, c0:c0+cc, p0:p0+cnt] channel-major, rows P elements apart."""
        t = self.t
        n, p0, cnt, c0, cc = self._chunk(tile, ch)
        isz = t.io.itemsize
        g = self.gradOutQ.AllocTensor(t.io)
        HoWo = t.Ho * t.Wo
        row = align_up(cnt * isz, 32)
        DataCopyPad(g, self.goGm[(n * t.C + c0) * HoWo + p0],
                    DataCopyExtParams(cc, cnt * isz, (HoWo - cnt) * isz, (t.P * isz - row) // 32))
        self.gradOutQ.EnQue(g)

    def ComputeChunk(self, tile, ch):
        t, s, P, Ccp, K = self.t, self.scratch, self.t.P, self.t.Ccp, self.t.K
        cc = min(t.Cc, t.C - ch * t.Cc)
        KP = K * P
        g = self.gradOutQ.DeQue(t.io)
        gpm = self.pointMajorBuf.Get(t.cdt)
        if t.io.itemsize != t.cdt.itemsize:
            gf = self.gradOutCastBuf.Get(t.cdt)
            Cast(gf, g, RoundMode.CAST_NONE, Ccp * P)
            transpose_2d(gpm, gf, Ccp, P)              # [C][P] -> [P][C]
        else:
            transpose_2d(gpm, g, Ccp, P)
        self.gradOutQ.FreeTensor(g)
        T = self.channelMajorBuf.Get(t.cdt)
        if t.need_x:
            x = self.cornerQ.DeQue(t.cdt)
            for k in range(K):
                Mul(x[k * P * Ccp], x[k * P * Ccp], gpm, P * Ccp)
            transpose_2d(T, x, KP, Ccp)                # [K*P][C] -> [C][K*P]
            self.cornerQ.FreeTensor(x)
            rows = cc                               # sum the channel rows: a tree of Adds
            while rows > 1:
                h = rows // 2
                Add(T, T, T[(rows - h) * KP], h * KP)
                rows -= h
            d = s.vec("d", K)
            if ch == 0:
                Copy(d, T, KP)
            else:
                Add(d, d, T, KP)
        if t.need_in:
            S = self.contribQ.AllocTensor(t.cdt)
            Copy(T, self.corner_weights, KP)                     # the weights, repeated along the channels
            rows = 1
            while rows < Ccp:
                m = min(rows, Ccp - rows)
                Copy(T[rows * KP], T, m * KP)
                rows += m
            transpose_2d(S, T, Ccp, KP)                # [C][K*P] -> [K*P][C]
            for k in range(K):
                Mul(S[k * P * Ccp], S[k * P * Ccp], gpm, P * Ccp)
            self.contribQ.EnQue(S)

    def ScatterOps(self, tile, ch):
        """Take the contributions now; return (the atomic scatters, what ends them)."""
        t, P, Ccp = self.t, self.t.P, self.t.Ccp
        cnt = self._tile(tile)[2]
        S = self.contribQ.DeQue(t.cdt)
        SetAtomicAdd(t.cdt)                         # MTE3's stores to GM now add
        runs = []
        for r, (k0, gm, params, nominal) in enumerate(self._indirect_runs(tile, ch, False)):
            idx = self.scratch.int_vec(f"idx{tile % 2}_{r}")
            runs.append(IndirectCopies(gm, S[k0 * P * Ccp], params, idx, 0, cnt, Ccp, nominal))

        def finish():
            SetAtomicNone()
            self.contribQ.FreeTensor(S)
        return runs, finish

    # ---- gridGrad -----------------------------------------------------------------------------
    def ComputeGridGrad(self):
        t, s, P = self.t, self.scratch, self.t.P
        gg = self.gridGradQ.AllocTensor(t.io)
        g2 = s.vec("g2", 2)
        gx, gy = g2, g2[P]
        if t.interp == NEAREST:
            Duplicate(g2, 0.0, 2 * P)
        else:
            d = s.vec("d", t.K)
            if self.corner_in_bounds is not None:
                Mul(d, d, self.corner_in_bounds, t.K * P)   # out-of-bounds corners contribute nothing
            u = s.vec("gu")
            if t.interp == BILINEAR:
                Dk = [d[k * P] for k in range(4)]   # nw, ne, sw, se
                uy, ty, ux, tx = s.vec("uy"), s.vec("ty"), s.vec("ux"), s.vec("tx")
                Sub(u, Dk[1], Dk[0], P)
                Mul(gx, u, uy, P)
                Sub(u, Dk[3], Dk[2], P)
                Mul(u, u, ty, P)
                Add(gx, gx, u, P)                   # (ne - nw)(1 - ty) + (se - sw) ty
                Sub(u, Dk[2], Dk[0], P)
                Mul(gy, u, ux, P)
                Sub(u, Dk[3], Dk[1], P)
                Mul(u, u, tx, P)
                Add(gy, gy, u, P)                   # (sw - nw)(1 - tx) + (se - ne) tx
                Mul(gx, gx, self.gix_mult, P)
                Mul(gy, gy, self.giy_mult, P)
            else:
                e = s.vec("ge")
                Duplicate(gx, 0.0, 2 * P)
                for j in range(4):                  # gix = -sum_j cy_j sum_i D_ij gcx_i
                    Mul(e, d[(4 * j) * P], self.cubic_x_grad, P)
                    for i in range(1, 4):
                        Mul(u, d[(4 * j + i) * P], self.cubic_x_grad[i * P], P)
                        Add(e, e, u, P)
                    Mul(e, e, self.cubic_y[j * P], P)
                    Sub(gx, gx, e, P)
                for i in range(4):                  # giy = -sum_i cx_i sum_j D_ij gcy_j
                    Mul(e, d[i * P], self.cubic_y_grad, P)
                    for j in range(1, 4):
                        Mul(u, d[(4 * j + i) * P], self.cubic_y_grad[j * P], P)
                        Add(e, e, u, P)
                    Mul(e, e, self.cubic_x[i * P], P)
                    Sub(gy, gy, e, P)
                Muls(gx, gx, self.gix_mult, P)
                Muls(gy, gy, self.giy_mult, P)
        if t.io.itemsize != t.cdt.itemsize:
            gT = s.vec("gT", 2)
            transpose_2d(gT, g2, 2, P)                 # [2][P] -> [P][2]
            Cast(gg, gT, RoundMode.CAST_RINT, 2 * P)
        else:
            transpose_2d(gg, g2, 2, P)
        self.gridGradQ.EnQue(gg)

    def CopyOutGridGrad(self, tile):
        t = self.t
        n, p0, cnt = self._tile(tile)
        gg = self.gridGradQ.DeQue(t.io)
        DataCopyPad(self.ggGm[(n * t.Ho * t.Wo + p0) * 2], gg,
                    DataCopyExtParams(1, cnt * 2 * t.io.itemsize, 0, 0))
        self.gridGradQ.FreeTensor(gg)


def grid_sampler2d_grad_kernel(gradOutput, grid, xws, acc, gridGrad, tiling):
    op = KernelGridSampler2DGrad()
    op.Init(gradOutput, grid, xws, acc, gridGrad, tiling)
    op.Process()
