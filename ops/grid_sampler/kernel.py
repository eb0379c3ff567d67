"""The main kernel (vector cores): per tile of grid points, the corner coordinates and weights,
the gathered corners, gridGrad, and the inputGrad contributions scattered by atomic-add
DataCopyPadIndirect, software-pipelined.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from simulator.kernel import (CMPMODE, GM_ADDR, SELMODE, Abs, Add, Cast, Compare, CompareScalar, Copy,
                              DataCopyExtParams, DataCopyPad, Div, Duplicate, GetBlockIdx, GlobalTensor,
                              HardEvent, Maxs, Mins, Mul, Muls, PipeBarrier, PIPE_ALL, RoundMode, Select,
                              SetAtomicAdd, SetAtomicNone, SetFlag, Sub, TBuf, TPipe, TPosition, TQue,
                              WaitFlag, Adds, int32)
from simulator.kernel.indirect import DataCopyPadIndirect
from simulator.program import align_up
from .layout_kernels import transpose_2d
from .tiling import (BICUBIC, BILINEAR, BORDER, COORD_LIMIT, CUBIC_A, GridSamplerGradTiling, NAN_COORD,
                     NEAREST, REFLECTION, ZEROS, main_buffers)


TS = SELMODE.VSEL_TENSOR_SCALAR_MODE
TT = SELMODE.VSEL_TENSOR_TENSOR_MODE


class _Scratch:
    """Named vectors carved out of one VECCALC buffer (allocated on first use)."""

    def __init__(self, buf: TBuf, t: GridSamplerGradTiling):
        self.P, self.cdt = t.P, t.cdt
        self.raw = buf.Get(np.uint8)
        self.vec_base, self.int_base = 0, t.n_vec * t.P * t.cdt.itemsize
        self.mask_base = self.int_base + t.n_int * t.P * 4
        self.n_vec, self.n_int = t.n_vec, t.n_int
        self.vecs, self.ints, self.masks = {}, {}, {}

    def v(self, name: str, length: int = 1):
        """A compute-dtype vector of length * P elements."""
        got = self.vecs.get(name)
        if got is None:
            used = sum(n for _, n in self.vecs.values())
            if used + length > self.n_vec:
                raise RuntimeError(f"scratch: {used + length} vectors needed, {self.n_vec} planned")
            t = self.raw[self.vec_base + used * self.P * self.cdt.itemsize].ReinterpretCast(self.cdt)
            got = self.vecs[name] = (t, length)
        return got[0]

    def i(self, name: str):
        got = self.ints.get(name)
        if got is None:
            k = len(self.ints)
            if k >= self.n_int:
                raise RuntimeError(f"scratch: more than {self.n_int} int vectors")
            got = self.ints[name] = self.raw[self.int_base + k * self.P * 4].ReinterpretCast(int32)
        return got

    def m(self, name: str):
        got = self.masks.get(name)
        if got is None:
            k = len(self.masks)
            got = self.masks[name] = self.raw[self.mask_base + k * 32]
        return got


class KernelGridSampler2DGrad:
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
        self.gQ = TQue(TPosition.VECIN, 1)
        pipe.InitBuffer(self.gQ, 1, next(sizes))
        if t.need_x:
            self.xQ = TQue(TPosition.VECIN, 1)
            pipe.InitBuffer(self.xQ, 1, next(sizes))
        if t.need_in:
            self.sQ = TQue(TPosition.VECOUT, 1)
            pipe.InitBuffer(self.sQ, 1, next(sizes))
        if t.need_gg:
            self.ggQ = TQue(TPosition.VECOUT, 1)
            pipe.InitBuffer(self.ggQ, 1, next(sizes))
        if t.need_x or t.need_in:
            self.tBuf = TBuf()
            pipe.InitBuffer(self.tBuf, next(sizes))
        if io.itemsize != cdt.itemsize:
            self.gfBuf = TBuf()
            pipe.InitBuffer(self.gfBuf, next(sizes))
        self.gpmBuf = TBuf()
        pipe.InitBuffer(self.gpmBuf, next(sizes))
        sbuf = TBuf()
        pipe.InitBuffer(sbuf, next(sizes))
        self.s = _Scratch(sbuf, t)
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
        for q, n in ((self.gridQ, P * 2), (self.gQ, Ccp * P)):
            z = q.AllocTensor(io)
            Duplicate(z, 0, n)
            q.FreeTensor(z)
        if t.need_x:
            z = self.xQ.AllocTensor(cdt)
            Duplicate(z, 0, K * P * Ccp)
            self.xQ.FreeTensor(z)
        Duplicate(self.s.v("one"), 1.0, P)
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
        for i, (tile, ch) in enumerate(steps):
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

    def _tile(self, tile):
        t = self.t
        n, j = divmod(tile, t.tiles_per_n)
        p0 = j * t.P
        return n, p0, min(t.P, t.Ho * t.Wo - p0)

    @staticmethod
    def Interleave(a, b):
        """Issue two (ops, finish) lists alternately, then their finishing steps."""
        ops_a, ops_b = (a[0] if a else []), (b[0] if b else [])
        for k in range(max(len(ops_a), len(ops_b))):
            if k < len(ops_a):
                ops_a[k]()
            if k < len(ops_b):
                ops_b[k]()
        for x in (a, b):
            if x:
                x[1]()

    # ---- grid tile -> coordinates, weights, masks, offsets ------------------------------------
    def CopyInGrid(self, tile):
        t = self.t
        n, p0, cnt = self._tile(tile)
        g = self.gridQ.AllocTensor(t.io)
        DataCopyPad(g, self.gridGm[(n * t.Ho * t.Wo + p0) * 2],
                    DataCopyExtParams(1, cnt * 2 * t.io.itemsize, 0, 0))
        self.gridQ.EnQue(g)

    def ComputeCoords(self, tile):
        t, s, P = self.t, self.s, self.t.P
        par = tile % 2
        g = self.gridQ.DeQue(t.io)
        xy = s.v("xy", 2)
        if t.io.itemsize != t.cdt.itemsize:
            gf = s.v("gridf", 2)
            Cast(gf, g, RoundMode.CAST_NONE, 2 * P)
            transpose_2d(xy, gf, P, 2)                 # [P][2] -> [2][P]: x then y
        else:
            transpose_2d(xy, g, P, 2)
        self.gridQ.FreeTensor(g)
        ix, iy = xy, xy[P]
        if t.interp == BICUBIC:
            self.mx, self.my = self.unnormalize(ix, t.W), self.unnormalize(iy, t.H)
            self.sanitize(ix)
            self.sanitize(iy)
            self.BicubicCoords(ix, iy, par)
        else:
            self.gxm, self.gym = s.v("gxm"), s.v("gym")
            self.source_index(ix, t.W, self.gxm)
            self.source_index(iy, t.H, self.gym)
            if t.interp == BILINEAR:
                self.BilinearCoords(ix, iy, par)
            else:
                self.NearestCoords(ix, iy, par)
        if t.need_x:
            SetFlag(HardEvent.V_MTE2, self.idxEvent)      # the offsets are in UB

    def unnormalize(self, v, size):
        """grid_sampler_unnormalize_set_grad: returns the constant d(coord)/d(grid)."""
        P = self.t.P
        Adds(v, v, 1.0, P)
        if self.t.align:
            Muls(v, v, 0.5, P)
            Muls(v, v, float(size - 1), P)
            return (size - 1) / 2.0
        Muls(v, v, float(size), P)
        Adds(v, v, -1.0, P)
        Muls(v, v, 0.5, P)
        return size / 2.0

    def sanitize(self, v):
        """NaN -> -100 (outside, as the CANN kernel does); clamp to +-2^23 (no int32 overflow)."""
        s, P = self.s, self.t.P
        m = s.m("m0")
        Compare(m, v, v, CMPMODE.EQ, P)
        Select(v, m, v, NAN_COORD, TS, P)
        Maxs(v, v, -COORD_LIMIT, P)
        Mins(v, v, COORD_LIMIT, P)

    def clip(self, v, size, g=None):
        """clip_coordinates(_set_grad): <= 0 -> 0 and >= size-1 -> size-1 with gradient 0."""
        s, P = self.s, self.t.P
        m = s.m("m0")
        if g is None:
            Maxs(v, v, 0.0, P)
            Mins(v, v, float(size - 1), P)
            return
        CompareScalar(m, v, 0.0, CMPMODE.GT, P)
        Select(v, m, v, 0.0, TS, P)
        Select(g, m, g, 0.0, TS, P)
        CompareScalar(m, v, float(size - 1), CMPMODE.LT, P)
        Select(v, m, v, float(size - 1), TS, P)
        Select(g, m, g, 0.0, TS, P)

    def reflect(self, v, twice_low, twice_high, g=None):
        """reflect_coordinates(_set_grad), with fmod and floor(in / span) as PyTorch has them."""
        s, P = self.s, self.t.P
        if twice_low == twice_high:
            Duplicate(v, 0.0, P)
            if g is not None:
                Duplicate(g, 0.0, P)
            return
        mn = twice_low / 2.0
        span = (twice_high - twice_low) / 2.0
        m, sg, q, e, h = s.m("m0"), s.v("r_sign"), s.v("r_q"), s.v("r_e"), s.v("r_h")
        qi = s.i("r_qi")
        Adds(v, v, -mn, P)
        if g is not None:
            CompareScalar(m, v, 0.0, CMPMODE.LT, P)
            Duplicate(sg, -1.0, P)
            Select(sg, m, sg, 1.0, TS, P)            # -1 where in < min
        Abs(v, v, P)
        Duplicate(q, span, P)
        Div(q, v, q, P)
        Cast(qi, q, RoundMode.CAST_FLOOR, P)
        Cast(q, qi, RoundMode.CAST_NONE, P)         # flips = floor(in / span)
        Muls(e, q, span, P)
        Sub(e, v, e, P)                             # in - flips * span
        CompareScalar(m, e, 0.0, CMPMODE.LT, P)     # in / span rounded up to the next integer:
        Adds(h, e, span, P)                         # fmod is one span more
        Select(e, m, h, e, TT, P)
        Muls(h, q, 0.5, P)
        Cast(qi, h, RoundMode.CAST_FLOOR, P)
        Cast(h, qi, RoundMode.CAST_NONE, P)
        Muls(h, h, 2.0, P)
        Sub(h, q, h, P)                             # flips % 2
        CompareScalar(m, h, 0.5, CMPMODE.LT, P)     # even flips
        Adds(q, e, mn, P)                           # extra + min
        Muls(h, e, -1.0, P)
        Adds(h, h, span, P)
        Adds(h, h, mn, P)                           # span - extra + min
        Select(v, m, q, h, TT, P)
        if g is not None:
            Muls(h, sg, -1.0, P)
            Select(sg, m, sg, h, TT, P)
            Mul(g, g, sg, P)

    def source_index(self, v, size, g):
        """grid_sampler_compute_source_index_set_grad: v in place, g = its gradient factor."""
        t = self.t
        mult = self.unnormalize(v, size)
        self.sanitize(v)
        Duplicate(g, mult, t.P)
        if t.padding == BORDER:
            self.clip(v, size, g)
        elif t.padding == REFLECTION:
            if t.align:
                self.reflect(v, 0.0, 2.0 * (size - 1), g)
            else:
                self.reflect(v, -1.0, 2.0 * size - 1.0, g)
            self.clip(v, size, g)

    def valid(self, dst, v, lo, hi):
        """dst = 1 where lo <= v <= hi (v integral floats), else 0."""
        s, P = self.s, self.t.P
        m = s.m("m0")
        CompareScalar(m, v, lo - 0.5, CMPMODE.GT, P)
        Select(dst, m, s.v("one"), 0.0, TS, P)
        CompareScalar(m, v, hi + 0.5, CMPMODE.LT, P)
        Select(dst, m, dst, 0.0, TS, P)

    def offsets(self, dst, yi, xi, ylo, yhi, xlo, xhi):
        """dst = (clamp(yi) * W + clamp(xi)) * C, int32 (xi / yi are clobbered)."""
        t, P = self.t, self.t.P
        Maxs(yi, yi, ylo, P)
        Mins(yi, yi, yhi, P)
        Maxs(xi, xi, xlo, P)
        Mins(xi, xi, xhi, P)
        Muls(dst, yi, t.W, P)
        Add(dst, dst, xi, P)
        Muls(dst, dst, t.C, P)

    def BilinearCoords(self, ix, iy, par):
        t, s, P = self.t, self.s, self.t.P
        x0i, y0i, a, b = s.i("x0i"), s.i("y0i"), s.i("ta"), s.i("tb")
        x0, y0, tx, ty, ux, uy = (s.v(n) for n in ("x0", "y0", "tx", "ty", "ux", "uy"))
        vx0, vx1, vy0, vy1 = (s.v(n) for n in ("vx0", "vx1", "vy0", "vy1"))
        for fi, f, v, tv, uv in ((x0i, x0, ix, tx, ux), (y0i, y0, iy, ty, uy)):
            Cast(fi, v, RoundMode.CAST_FLOOR, P)
            Cast(f, fi, RoundMode.CAST_NONE, P)
            Sub(tv, v, f, P)                        # ix - ix_nw
            Adds(uv, f, 1.0, P)
            Sub(uv, uv, v, P)                       # ix_se - ix
        self.valid(vx0, x0, 0, t.W - 1)
        self.valid(vx1, x0, -1, t.W - 2)
        self.valid(vy0, y0, 0, t.H - 1)
        self.valid(vy1, y0, -1, t.H - 2)
        w, vm = s.v("w", 4), s.v("vm", 4)
        ax0, ax1, by0, by1 = s.v("ax0"), s.v("ax1"), s.v("by0"), s.v("by1")
        Mul(ax0, ux, vx0, P)
        Mul(ax1, tx, vx1, P)
        Mul(by0, uy, vy0, P)
        Mul(by1, ty, vy1, P)
        for k, (xa, ya, xv, yv) in enumerate(((ax0, by0, vx0, vy0), (ax1, by0, vx1, vy0),
                                              (ax0, by1, vx0, vy1), (ax1, by1, vx1, vy1))):
            Mul(w[k * P], xa, ya, P)                # nw, ne, sw, se
            Mul(vm[k * P], xv, yv, P)
        self.w, self.vm = w, vm
        for r, (_, _, dy, _) in enumerate(t.runs):
            Adds(a, y0i, dy, P)
            Copy(b, x0i, P)
            self.offsets(s.i(f"idx{par}_{r}"), a, b, 0, t.H - 1, -1, t.W - 1)

    def NearestCoords(self, ix, iy, par):
        t, s, P = self.t, self.s, self.t.P
        xi, yi = s.i("x0i"), s.i("y0i")
        x, y, vx, vy = s.v("x0"), s.v("y0"), s.v("vx0"), s.v("vy0")
        Cast(xi, ix, RoundMode.CAST_RINT, P)        # nearbyint: half to even
        Cast(yi, iy, RoundMode.CAST_RINT, P)
        Cast(x, xi, RoundMode.CAST_NONE, P)
        Cast(y, yi, RoundMode.CAST_NONE, P)
        self.valid(vx, x, 0, t.W - 1)
        self.valid(vy, y, 0, t.H - 1)
        w = s.v("w", 1)
        Mul(w, vx, vy, P)
        self.w = w
        self.offsets(s.i(f"idx{par}_0"), yi, xi, 0, t.H - 1, 0, t.W - 1)

    def cubic(self, c, cg, tv):
        """PyTorch's get_cubic_upsample_coefficients (c: 4 vectors) and
        get_cubic_coefficients_grad (cg), for the fractional part tv."""
        s, P, A = self.s, self.t.P, CUBIC_A
        u = s.v("cu")
        # c0 = conv2(t + 1), c1 = conv1(t), c2 = conv1(1 - t), c3 = conv2(2 - t)
        for k, (sign, off, conv) in enumerate(((1, 1.0, 2), (1, 0.0, 1), (-1, 1.0, 1), (-1, 2.0, 2))):
            Muls(u, tv, float(sign), P)
            Adds(u, u, off, P)                      # x
            d = c[k * P]
            if conv == 1:                           # ((A + 2) x - (A + 3)) x x + 1
                Muls(d, u, A + 2, P)
                Adds(d, d, -(A + 3), P)
                Mul(d, d, u, P)
                Mul(d, d, u, P)
                Adds(d, d, 1.0, P)
            else:                                   # ((A x - 5A) x + 8A) x - 4A
                Muls(d, u, A, P)
                Adds(d, d, -5 * A, P)
                Mul(d, d, u, P)
                Adds(d, d, 8 * A, P)
                Mul(d, d, u, P)
                Adds(d, d, -4 * A, P)
        # gradients: x = -1 - t, -t, 1 - t, 2 - t
        forms = ((-1.0, -3 * A, -10 * A, -8 * A), (0.0, -3 * (A + 2), -2 * (A + 3), None),
                 (1.0, 3 * (A + 2), -2 * (A + 3), None), (2.0, 3 * A, -10 * A, 8 * A))
        for k, (off, p2, p1, p0) in enumerate(forms):
            Muls(u, tv, -1.0, P)
            Adds(u, u, off, P)
            d = cg[k * P]
            Muls(d, u, p2, P)
            Adds(d, d, p1, P)
            Mul(d, d, u, P)
            if p0 is not None:
                Adds(d, d, p0, P)

    def pad_tap(self, v, size):
        """compute_coordinates for an integer tap (bicubic): border clip, reflection reflect+clip."""
        t = self.t
        if t.padding == REFLECTION:
            if t.align:
                self.reflect(v, 0.0, 2.0 * (size - 1))
            else:
                self.reflect(v, -1.0, 2.0 * size - 1.0)
        self.clip(v, size)

    def BicubicCoords(self, ix, iy, par):
        t, s, P = self.t, self.s, self.t.P
        x0i, y0i, a, b = s.i("x0i"), s.i("y0i"), s.i("ta"), s.i("tb")
        x0, y0, tx, ty = s.v("x0"), s.v("y0"), s.v("tx"), s.v("ty")
        for fi, f, v, tv in ((x0i, x0, ix, tx), (y0i, y0, iy, ty)):
            Cast(fi, v, RoundMode.CAST_FLOOR, P)
            Cast(f, fi, RoundMode.CAST_NONE, P)
            Sub(tv, v, f, P)
        cx, cy, gx, gy = s.v("cx", 4), s.v("cy", 4), s.v("gcx", 4), s.v("gcy", 4)
        self.cubic(cx, gx, tx)
        self.cubic(cy, gy, ty)
        self.cx, self.cy, self.gcx, self.gcy = cx, cy, gx, gy
        w = s.v("w", 16)
        if t.padding == ZEROS:
            vx, vy, vm = s.v("vx", 4), s.v("vy", 4), s.v("vm", 16)
            ax, by = s.v("ax", 4), s.v("by", 4)
            for i in range(4):
                self.valid(vx[i * P], x0, 1 - i, t.W - i)       # x0 - 1 + i in [0, W-1]
                self.valid(vy[i * P], y0, 1 - i, t.H - i)
                Mul(ax[i * P], cx[i * P], vx[i * P], P)
                Mul(by[i * P], cy[i * P], vy[i * P], P)
            for j in range(4):
                for i in range(4):
                    Mul(w[(4 * j + i) * P], ax[i * P], by[j * P], P)
                    Mul(vm[(4 * j + i) * P], vx[i * P], vy[j * P], P)
            self.vm = vm
            for r, (_, _, dy, dx) in enumerate(t.runs):
                Adds(a, y0i, dy, P)
                Adds(b, x0i, dx, P)
                self.offsets(s.i(f"idx{par}_{r}"), a, b, 0, t.H - 1, -3, t.W - 1)
        else:
            xt, yt = s.v("xt", 4), s.v("yt", 4)
            for i in range(4):
                Adds(xt[i * P], x0, float(i - 1), P)
                self.pad_tap(xt[i * P], t.W)
                Adds(yt[i * P], y0, float(i - 1), P)
                self.pad_tap(yt[i * P], t.H)
            for j in range(4):
                for i in range(4):
                    Mul(w[(4 * j + i) * P], cx[i * P], cy[j * P], P)
            self.vm = None
            xs = [s.i(f"xt{i}") for i in range(4)]
            ys = [s.i(f"yt{i}") for i in range(4)]
            for i in range(4):
                Cast(xs[i], xt[i * P], RoundMode.CAST_RINT, P)
                Cast(ys[i], yt[i * P], RoundMode.CAST_RINT, P)
                Muls(ys[i], ys[i], t.W, P)
            for j in range(4):
                for i in range(4):
                    d = s.i(f"idx{par}_{4 * j + i}")
                    Add(d, ys[j], xs[i], P)
                    Muls(d, d, t.C, P)
        self.w = w

    # ---- per channel chunk --------------------------------------------------------------------
    def CopyInGradOutput(self, tile, ch):
        """gradOutput[n, c0:c0+cc, p0:p0+cnt] channel-major, rows P elements apart."""
        t = self.t
        n, p0, cnt = self._tile(tile)
        c0 = ch * t.Cc
        cc = min(t.Cc, t.C - c0)
        isz = t.io.itemsize
        g = self.gQ.AllocTensor(t.io)
        HoWo = t.Ho * t.Wo
        row = align_up(cnt * isz, 32)
        DataCopyPad(g, self.goGm[(n * t.C + c0) * HoWo + p0],
                    DataCopyExtParams(cc, cnt * isz, (HoWo - cnt) * isz, (t.P * isz - row) // 32))
        self.gQ.EnQue(g)

    def _chunk_gm(self, base: GM_ADDR, n, c0) -> GlobalTensor:
        t = self.t
        g = GlobalTensor(t.cdt)
        g.SetGlobalBuffer(base + ((t.pad + n * t.H * t.W) * t.C + c0))
        return g

    def _nominal(self, n, p0, p, dy, dx, L, c0):
        """The element offset an identity grid would touch (for the L2 model only)."""
        t = self.t
        ho, wo = divmod(p0 + p, t.Wo)
        y = min(max(ho * t.H // t.Ho + dy, 0), t.H - 1)
        x = min(max(wo * t.W // t.Wo + dx, -t.pad), t.W - L + t.pad)
        return (y * t.W + x) * t.C

    def GatherOps(self, tile, ch):
        """Allocate the corner buffer now; return (the gathers, the EnQue that ends them)."""
        t, P, Ccp = self.t, self.t.P, self.t.Ccp
        n, p0, cnt = self._tile(tile)
        c0 = ch * t.Cc
        cc = min(t.Cc, t.C - c0)
        esz = t.cdt.itemsize
        x = self.xQ.AllocTensor(t.cdt)
        if ch == 0:
            WaitFlag(HardEvent.V_MTE2, self.idxEvent)
        gm = self._chunk_gm(self.xws, n, c0)
        ops = []
        for r, (k0, L, dy, dx) in enumerate(t.runs):
            idx = self.s.i(f"idx{tile % 2}_{r}")
            params = DataCopyExtParams(L, cc * esz, (t.C - cc) * esz,
                                       (P * Ccp * esz - align_up(cc * esz, 32)) // 32)
            for p in range(cnt):
                ops.append(partial(DataCopyPadIndirect, x[(k0 * P + p) * Ccp], gm, params, idx, p,
                                   nominal=self._nominal(n, p0, p, dy, dx, L, c0)))
        return ops, partial(self.xQ.EnQue, x)

    def ComputeChunk(self, tile, ch):
        t, s, P, Ccp, K = self.t, self.s, self.t.P, self.t.Ccp, self.t.K
        cc = min(t.Cc, t.C - ch * t.Cc)
        KP = K * P
        g = self.gQ.DeQue(t.io)
        gpm = self.gpmBuf.Get(t.cdt)
        if t.io.itemsize != t.cdt.itemsize:
            gf = self.gfBuf.Get(t.cdt)
            Cast(gf, g, RoundMode.CAST_NONE, Ccp * P)
            transpose_2d(gpm, gf, Ccp, P)              # [C][P] -> [P][C]
        else:
            transpose_2d(gpm, g, Ccp, P)
        self.gQ.FreeTensor(g)
        T = self.tBuf.Get(t.cdt)
        if t.need_x:
            x = self.xQ.DeQue(t.cdt)
            for k in range(K):
                Mul(x[k * P * Ccp], x[k * P * Ccp], gpm, P * Ccp)
            transpose_2d(T, x, KP, Ccp)                # [K*P][C] -> [C][K*P]
            self.xQ.FreeTensor(x)
            rows = cc                               # sum the channel rows: a tree of Adds
            while rows > 1:
                h = rows // 2
                Add(T, T, T[(rows - h) * KP], h * KP)
                rows -= h
            d = s.v("d", K)
            if ch == 0:
                Copy(d, T, KP)
            else:
                Add(d, d, T, KP)
        if t.need_in:
            S = self.sQ.AllocTensor(t.cdt)
            Copy(T, self.w, KP)                     # the weights, repeated along the channels
            rows = 1
            while rows < Ccp:
                m = min(rows, Ccp - rows)
                Copy(T[rows * KP], T, m * KP)
                rows += m
            transpose_2d(S, T, Ccp, KP)                # [C][K*P] -> [K*P][C]
            for k in range(K):
                Mul(S[k * P * Ccp], S[k * P * Ccp], gpm, P * Ccp)
            self.sQ.EnQue(S)

    def ScatterOps(self, tile, ch):
        """Take the contributions now; return (the atomic scatters, what ends them)."""
        t, P, Ccp = self.t, self.t.P, self.t.Ccp
        n, p0, cnt = self._tile(tile)
        c0 = ch * t.Cc
        cc = min(t.Cc, t.C - c0)
        esz = t.cdt.itemsize
        S = self.sQ.DeQue(t.cdt)
        gm = self._chunk_gm(self.acc, n, c0)
        SetAtomicAdd(t.cdt)                         # MTE3's stores to GM now add
        ops = []
        for r, (k0, L, dy, dx) in enumerate(t.runs):
            idx = self.s.i(f"idx{tile % 2}_{r}")
            params = DataCopyExtParams(L, cc * esz, (P * Ccp * esz - align_up(cc * esz, 32)) // 32,
                                       (t.C - cc) * esz)
            for p in range(cnt):
                ops.append(partial(DataCopyPadIndirect, gm, S[(k0 * P + p) * Ccp], params, idx, p,
                                   nominal=self._nominal(n, p0, p, dy, dx, L, c0)))

        def finish():
            SetAtomicNone()
            self.sQ.FreeTensor(S)
        return ops, finish

    # ---- gridGrad -----------------------------------------------------------------------------
    def ComputeGridGrad(self):
        t, s, P = self.t, self.s, self.t.P
        gg = self.ggQ.AllocTensor(t.io)
        g2 = s.v("g2", 2)
        gx, gy = g2, g2[P]
        if t.interp == NEAREST:
            Duplicate(g2, 0.0, 2 * P)
        else:
            d = s.v("d", t.K)
            if self.vm is not None:
                Mul(d, d, self.vm, t.K * P)         # out-of-bounds corners contribute nothing
            u = s.v("gu")
            if t.interp == BILINEAR:
                Dk = [d[k * P] for k in range(4)]   # nw, ne, sw, se
                uy, ty, ux, tx = s.v("uy"), s.v("ty"), s.v("ux"), s.v("tx")
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
                Mul(gx, gx, self.gxm, P)
                Mul(gy, gy, self.gym, P)
            else:
                e = s.v("ge")
                Duplicate(gx, 0.0, 2 * P)
                for j in range(4):                  # gix = -sum_j cy_j sum_i D_ij gcx_i
                    Mul(e, d[(4 * j) * P], self.gcx, P)
                    for i in range(1, 4):
                        Mul(u, d[(4 * j + i) * P], self.gcx[i * P], P)
                        Add(e, e, u, P)
                    Mul(e, e, self.cy[j * P], P)
                    Sub(gx, gx, e, P)
                for i in range(4):                  # giy = -sum_i cx_i sum_j D_ij gcy_j
                    Mul(e, d[i * P], self.gcy, P)
                    for j in range(1, 4):
                        Mul(u, d[(4 * j + i) * P], self.gcy[j * P], P)
                        Add(e, e, u, P)
                    Mul(e, e, self.cx[i * P], P)
                    Sub(gy, gy, e, P)
                Muls(gx, gx, self.mx, P)
                Muls(gy, gy, self.my, P)
        if t.io.itemsize != t.cdt.itemsize:
            gT = s.v("gT", 2)
            transpose_2d(gT, g2, 2, P)                 # [2][P] -> [P][2]
            Cast(gg, gT, RoundMode.CAST_RINT, 2 * P)
        else:
            transpose_2d(gg, g2, 2, P)
        self.ggQ.EnQue(gg)

    def CopyOutGridGrad(self, tile):
        t = self.t
        n, p0, cnt = self._tile(tile)
        gg = self.ggQ.DeQue(t.io)
        DataCopyPad(self.ggGm[(n * t.Ho * t.Wo + p0) * 2], gg,
                    DataCopyExtParams(1, cnt * 2 * t.io.itemsize, 0, 0))
        self.ggQ.FreeTensor(gg)


def grid_sampler2d_grad_kernel(gradOutput, grid, xws, acc, gridGrad, tiling):
    op = KernelGridSampler2DGrad()
    op.Init(gradOutput, grid, xws, acc, gridGrad, tiling)
    op.Process()
