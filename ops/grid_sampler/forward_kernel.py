"""The forward kernel, GridSampler2D (vector cores): per tile of P grid points of one image, the
source coordinates, the corner weights and the corners' GM offsets (the coordinate code the
backward uses, without its gradient work), the corner runs gathered from the NHWC input, their
weighted sum, and the channel-major result written to the NCHW output, software-pipelined so
that MTE2 gathers step s+1's corners while the vector pipe weighs step s's.
"""
from __future__ import annotations

from simulator.kernel import (GM_ADDR, Add, Broadcast, Cast, Copy, DataCopyExtParams, DataCopyPad, Duplicate,
                              GetBlockIdx, GlobalTensor, HardEvent, Loop, Mul, PipeBarrier, PIPE_ALL, RoundMode,
                              SetFlag, TBuf, TPipe, TPosition, TQue)
from functools import partial

from simulator.arith import align_up
from .kernel import GridPointTiles, _Scratch
from .layout_kernels import transpose_2d
from .tiling import BICUBIC, BILINEAR, GridSamplerTiling, forward_buffers


class KernelGridSampler2D(GridPointTiles):
    """Init, then per step (tile, channel chunk): [new tile: CopyInGrid, ComputeCoords] of the
    next step, Compute of this one, CopyOut of this one, the next step's gathers."""

    coordinate_grads = False

    def Init(self, grid: GM_ADDR, xws: GM_ADDR, out: GM_ADDR, t: GridSamplerTiling):
        self.t = t
        P, Ccp, K = t.P, t.Ccp, t.K
        io, cdt = t.io, t.cdt
        sizes = iter(forward_buffers(t))
        self.pipe = pipe = TPipe()
        self.gridQ = TQue(TPosition.VECIN, 1)
        pipe.InitBuffer(self.gridQ, 1, next(sizes))
        self.cornerQ = TQue(TPosition.VECIN, 2)                 # BUFFER_NUM = 2
        pipe.InitBuffer(self.cornerQ, 2, next(sizes))
        next(sizes)
        self.weightBuf = TBuf()
        pipe.InitBuffer(self.weightBuf, next(sizes))
        self.outQ = TQue(TPosition.VECOUT, 2)
        pipe.InitBuffer(self.outQ, 2, next(sizes))
        next(sizes)
        if io.itemsize != cdt.itemsize:
            self.castBuf = TBuf()
            pipe.InitBuffer(self.castBuf, next(sizes))
        scratchBuf = TBuf()
        pipe.InitBuffer(scratchBuf, next(sizes))
        self.scratch = _Scratch(scratchBuf, t)
        self.idxEvent = pipe.AllocEventID(HardEvent.V_MTE2)
        self.gridGm, self.outGm = GlobalTensor(io), GlobalTensor(io)
        self.gridGm.SetGlobalBuffer(grid)
        self.outGm.SetGlobalBuffer(out)
        self.xws = xws
        # lanes no copy writes (channel padding, the tail tile's points) are read by vector ops:
        # give them zeros once, before any copy lands
        z = self.gridQ.AllocTensor(io)
        Duplicate(z, 0, P * 2)
        self.gridQ.FreeTensor(z)
        for _ in range(2):
            z = self.cornerQ.AllocTensor(cdt)
            Duplicate(z, 0, K * P * Ccp)
            self.cornerQ.FreeTensor(z)
        Duplicate(self.scratch.vec("one"), 1.0, P)
        PipeBarrier(PIPE_ALL)

    # ---- driver ------------------------------------------------------------------------------
    def Process(self):
        """Steps (tile, channel chunk) in order. A step's vector work and its write are issued
        before the next step's gathers, so that the scalar unit, held at MTE2's queue while it
        issues the gathers, has already handed the vector pipe its work: MTE2 gathers step s+1
        (into the other corner buffer) while the vector pipe weighs step s. A new tile's
        coordinates are computed before the last step of the tile before it, so that its offsets
        are ready when MTE2 reaches its gathers (offsets and weights are kept per tile parity)."""
        t = self.t
        first, end = t.blocks[GetBlockIdx()]
        steps = [(tile, ch) for tile in range(first, end) for ch in range(t.nch)]
        if not steps:
            return
        self.CopyInGrid(steps[0][0])
        self.ComputeCoords(steps[0][0])
        self.Gather(*steps[0])
        # a step repeats two tiles later (offsets and weights alternate by tile); a partial tile,
        # its neighbour and the last step are steps of their own kind
        points = [self._tile(tile)[2] for tile, _ in steps] + [0]
        for i in Loop(len(steps), key=lambda i: (points[i], points[i + 1]), period=2 * t.nch,
                       touches=partial(self.StepTouches, steps=steps)):
            tile, ch = steps[i]
            nxt = steps[i + 1] if i + 1 < len(steps) else None
            if nxt is not None and nxt[1] == 0:
                self.CopyInGrid(nxt[0])             # MTE2 runs it after this step's gathers
                self.ComputeCoords(nxt[0])
            self.Compute(tile, ch)
            self.CopyOut(tile, ch)
            if nxt is not None:
                self.Gather(*nxt)

    # ---- grid tile -> coordinates, weights, offsets -------------------------------------------
    def ComputeCoords(self, tile):
        """PyTorch's grid_sampler_compute_source_index (bicubic: unnormalised only, its taps are
        padded one by one), the corner weights (zero for a corner outside the image with zeros
        padding) kept for the tile's parity, and the corner runs' GM offsets."""
        t, s = self.t, self.scratch
        par = tile % 2
        ix, iy = self.GridXY()
        if t.interp == BICUBIC:
            self.unnormalize(ix, t.W)
            self.unnormalize(iy, t.H)
            self.sanitize(ix)
            self.sanitize(iy)
            self.BicubicCoords(ix, iy, par)
        else:
            self.source_index(ix, t.W)
            self.source_index(iy, t.H)
            if t.interp == BILINEAR:
                self.BilinearCoords(ix, iy, par)
            else:
                self.NearestCoords(ix, iy, par)
        Copy(s.vec(f"wsave{par}", t.K), self.corner_weights, t.K * t.P)
        SetFlag(HardEvent.V_MTE2, self.idxEvent)          # the offsets are in UB

    def Gather(self, tile, ch):
        """Every run of every point of the step, in bounds or not (the instruction stream does not
        depend on the data), into a corner buffer: plane k, point p, channel c at
        ((k * P) + p) * Ccp + c."""
        runs, finish = self.GatherOps(tile, ch)
        for r in runs:
            r.issue_all()
        finish()

    # ---- per step -----------------------------------------------------------------------------
    def Compute(self, tile, ch):
        """out[p][c] = sum_k w_k[p] x_k[p][c]: the tile's weights broadcast along the channels
        (once per tile), one Mul over every plane, a tree of Adds over the planes, then a
        Transpose to channel-major (and the cast to the output dtype)."""
        t, P, Ccp, K = self.t, self.t.P, self.t.Ccp, self.t.K
        PC = P * Ccp
        wb = self.weightBuf.Get(t.cdt)
        if ch == 0:
            Broadcast(wb, self.scratch.vec(f"wsave{tile % 2}", K), (K * P, Ccp), (K * P, 1))
        x = self.cornerQ.DeQue(t.cdt)
        Mul(x, x, wb, K * PC)
        planes = K
        while planes > 1:
            h = planes // 2
            Add(x, x, x[(planes - h) * PC], h * PC)
            planes -= h
        o = self.outQ.AllocTensor(t.io)
        if t.io.itemsize != t.cdt.itemsize:
            f = self.castBuf.Get(t.cdt)
            transpose_2d(f, x, P, Ccp)                 # [P][C] -> [C][P]
            Cast(o, f, RoundMode.CAST_RINT, Ccp * P)
        else:
            transpose_2d(o, x, P, Ccp)
        self.cornerQ.FreeTensor(x)
        self.outQ.EnQue(o)

    def CopyOut(self, tile, ch):
        """out[n, c0:c0+cc, p0:p0+cnt]: cc channel rows of cnt points, HoWo apart in GM."""
        t = self.t
        n, p0, cnt, c0, cc = self._chunk(tile, ch)
        isz = t.io.itemsize
        HoWo = t.Ho * t.Wo
        o = self.outQ.DeQue(t.io)
        row = align_up(cnt * isz, 32)
        DataCopyPad(self.outGm[(n * t.C + c0) * HoWo + p0], o,
                    DataCopyExtParams(cc, cnt * isz, (t.P * isz - row) // 32, (HoWo - cnt) * isz))
        self.outQ.FreeTensor(o)


def grid_sampler2d_kernel(grid, xws, out, tiling):
    op = KernelGridSampler2D()
    op.Init(grid, xws, out, tiling)
    op.Process()
