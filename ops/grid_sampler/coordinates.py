"""Where each grid point samples the input: the unnormalised source coordinates and their
d(coordinate)/d(grid) factors, the padding modes (zeros, border, reflection), and per
interpolation mode the corner (or tap) offsets, validity masks and weights. A mixin of the main
kernel (`kernel.py`), which owns the buffers (`self.t` the tiling, `self.scratch` the UB scratch).
What it leaves for gridGrad and the scatters: `corner_weights` (one P-vector per corner or tap),
`corner_in_bounds` (their 0/1 validity, None when padding makes every tap valid), the gradient
factors `gix_mult` / `giy_mult`, and for bicubic the coefficients `cubic_x` / `cubic_y` and their
derivatives `cubic_x_grad` / `cubic_y_grad`. The forward kernel (forward_kernel.py) sets
`coordinate_grads = False` and passes no gradient vectors: then none of the gradient work is
recorded (bicubic's derivative coefficients, the padding's gradient factors).
"""
from __future__ import annotations

from simulator.kernel import (CMPMODE, SELMODE, Abs, Add, Adds, Cast, Compare, CompareScalar, Copy, Div,
                              Duplicate, Maxs, Mins, Mul, Muls, RoundMode, Select, Sub)
from .tiling import BORDER, COORD_LIMIT, CUBIC_A, NAN_COORD, REFLECTION, ZEROS

TS = SELMODE.VSEL_TENSOR_SCALAR_MODE
TT = SELMODE.VSEL_TENSOR_TENSOR_MODE


class SourceCoordinates:
    """Coordinate math of GridSampler2DGrad and GridSampler2D, per tile of P grid points, all in
    UB vectors."""

    coordinate_grads = True     # compute d(coordinate)/d(grid) too (the backward)

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
        s, P = self.scratch, self.t.P
        m = s.mask("m0")
        Compare(m, v, v, CMPMODE.EQ, P)
        Select(v, m, v, NAN_COORD, TS, P)
        Maxs(v, v, -COORD_LIMIT, P)
        Mins(v, v, COORD_LIMIT, P)

    def clip(self, v, size, g=None):
        """clip_coordinates(_set_grad): <= 0 -> 0 and >= size-1 -> size-1 with gradient 0."""
        s, P = self.scratch, self.t.P
        m = s.mask("m0")
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
        s, P = self.scratch, self.t.P
        if twice_low == twice_high:
            Duplicate(v, 0.0, P)
            if g is not None:
                Duplicate(g, 0.0, P)
            return
        mn = twice_low / 2.0
        span = (twice_high - twice_low) / 2.0
        m, sg, q, e, h = s.mask("m0"), s.vec("r_sign"), s.vec("r_q"), s.vec("r_e"), s.vec("r_h")
        qi = s.int_vec("r_qi")
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

    def source_index(self, v, size, g=None):
        """grid_sampler_compute_source_index(_set_grad): v in place, g = its gradient factor (None:
        no gradient, the forward's grid_sampler_compute_source_index)."""
        t = self.t
        mult = self.unnormalize(v, size)
        self.sanitize(v)
        if g is not None:
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
        s, P = self.scratch, self.t.P
        m = s.mask("m0")
        CompareScalar(m, v, lo - 0.5, CMPMODE.GT, P)
        Select(dst, m, s.vec("one"), 0.0, TS, P)
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
        t, s, P = self.t, self.scratch, self.t.P
        x0i, y0i, a, b = s.int_vec("x0i"), s.int_vec("y0i"), s.int_vec("ta"), s.int_vec("tb")
        x0, y0, tx, ty, ux, uy = (s.vec(n) for n in ("x0", "y0", "tx", "ty", "ux", "uy"))
        vx0, vx1, vy0, vy1 = (s.vec(n) for n in ("vx0", "vx1", "vy0", "vy1"))
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
        w, vm = s.vec("w", 4), s.vec("vm", 4)
        ax0, ax1, by0, by1 = s.vec("ax0"), s.vec("ax1"), s.vec("by0"), s.vec("by1")
        Mul(ax0, ux, vx0, P)
        Mul(ax1, tx, vx1, P)
        Mul(by0, uy, vy0, P)
        Mul(by1, ty, vy1, P)
        for k, (xa, ya, xv, yv) in enumerate(((ax0, by0, vx0, vy0), (ax1, by0, vx1, vy0),
                                              (ax0, by1, vx0, vy1), (ax1, by1, vx1, vy1))):
            Mul(w[k * P], xa, ya, P)                # nw, ne, sw, se
            Mul(vm[k * P], xv, yv, P)
        self.corner_weights, self.corner_in_bounds = w, vm
        for r, (_, _, dy, _) in enumerate(t.runs):
            Adds(a, y0i, dy, P)
            Copy(b, x0i, P)
            self.offsets(s.int_vec(f"idx{par}_{r}"), a, b, 0, t.H - 1, -1, t.W - 1)

    def NearestCoords(self, ix, iy, par):
        t, s, P = self.t, self.scratch, self.t.P
        xi, yi = s.int_vec("x0i"), s.int_vec("y0i")
        x, y, vx, vy = s.vec("x0"), s.vec("y0"), s.vec("vx0"), s.vec("vy0")
        Cast(xi, ix, RoundMode.CAST_RINT, P)        # nearbyint: half to even
        Cast(yi, iy, RoundMode.CAST_RINT, P)
        Cast(x, xi, RoundMode.CAST_NONE, P)
        Cast(y, yi, RoundMode.CAST_NONE, P)
        self.valid(vx, x, 0, t.W - 1)
        self.valid(vy, y, 0, t.H - 1)
        w = s.vec("w", 1)
        Mul(w, vx, vy, P)
        self.corner_weights = w
        self.offsets(s.int_vec(f"idx{par}_0"), yi, xi, 0, t.H - 1, 0, t.W - 1)

    def cubic(self, c, cg, tv):
        """PyTorch's get_cubic_upsample_coefficients (c: 4 vectors) and
        get_cubic_coefficients_grad (cg; None: not wanted), for the fractional part tv."""
        s, P, A = self.scratch, self.t.P, CUBIC_A
        u = s.vec("cu")
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
        if cg is None:
            return
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
        t, s, P = self.t, self.scratch, self.t.P
        x0i, y0i, a, b = s.int_vec("x0i"), s.int_vec("y0i"), s.int_vec("ta"), s.int_vec("tb")
        x0, y0, tx, ty = s.vec("x0"), s.vec("y0"), s.vec("tx"), s.vec("ty")
        for fi, f, v, tv in ((x0i, x0, ix, tx), (y0i, y0, iy, ty)):
            Cast(fi, v, RoundMode.CAST_FLOOR, P)
            Cast(f, fi, RoundMode.CAST_NONE, P)
            Sub(tv, v, f, P)
        cx, cy = s.vec("cx", 4), s.vec("cy", 4)
        gx, gy = (s.vec("gcx", 4), s.vec("gcy", 4)) if self.coordinate_grads else (None, None)
        self.cubic(cx, gx, tx)
        self.cubic(cy, gy, ty)
        self.cubic_x, self.cubic_y, self.cubic_x_grad, self.cubic_y_grad = cx, cy, gx, gy
        w = s.vec("w", 16)
        if t.padding == ZEROS:
            vx, vy, vm = s.vec("vx", 4), s.vec("vy", 4), s.vec("vm", 16)
            ax, by = s.vec("ax", 4), s.vec("by", 4)
            for i in range(4):
                self.valid(vx[i * P], x0, 1 - i, t.W - i)       # x0 - 1 + i in [0, W-1]
                self.valid(vy[i * P], y0, 1 - i, t.H - i)
                Mul(ax[i * P], cx[i * P], vx[i * P], P)
                Mul(by[i * P], cy[i * P], vy[i * P], P)
            for j in range(4):
                for i in range(4):
                    Mul(w[(4 * j + i) * P], ax[i * P], by[j * P], P)
                    Mul(vm[(4 * j + i) * P], vx[i * P], vy[j * P], P)
            self.corner_in_bounds = vm
            for r, (_, _, dy, dx) in enumerate(t.runs):
                Adds(a, y0i, dy, P)
                Adds(b, x0i, dx, P)
                self.offsets(s.int_vec(f"idx{par}_{r}"), a, b, 0, t.H - 1, -3, t.W - 1)
        else:
            xt, yt = s.vec("xt", 4), s.vec("yt", 4)
            for i in range(4):
                Adds(xt[i * P], x0, float(i - 1), P)
                self.pad_tap(xt[i * P], t.W)
                Adds(yt[i * P], y0, float(i - 1), P)
                self.pad_tap(yt[i * P], t.H)
            for j in range(4):
                for i in range(4):
                    Mul(w[(4 * j + i) * P], cx[i * P], cy[j * P], P)
            self.corner_in_bounds = None
            xs = [s.int_vec(f"xt{i}") for i in range(4)]
            ys = [s.int_vec(f"yt{i}") for i in range(4)]
            for i in range(4):
                Cast(xs[i], xt[i * P], RoundMode.CAST_RINT, P)
                Cast(ys[i], yt[i * P], RoundMode.CAST_RINT, P)
                Muls(ys[i], ys[i], t.W, P)
            for j in range(4):
                for i in range(4):
                    d = s.int_vec(f"idx{par}_{4 * j + i}")
                    Add(d, ys[j], xs[i], P)
                    Muls(d, d, t.C, P)
        self.corner_weights = w
