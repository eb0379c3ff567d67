"""A float64 reference for grid_sampler_2d_backward, written from the formulas (SPEC section 4 and
PyTorch's documented algorithm), not from torch:

* unnormalise: x' = (x + 1) / 2 * (W - 1) with alignCorners, ((x + 1) * W - 1) / 2 without; its
  derivative is (W - 1) / 2 or W / 2;
* padding of the sampling point (bilinear, nearest): zeros leaves it; border clips to [0, W-1]
  with derivative 0 at and beyond the border (x <= 0 or x >= W - 1); reflection reflects about
  -0.5 and W - 0.5 (0 and W - 1 when aligned) as often as needed, the derivative's sign flipping
  with each reflection, then clips as border does;
* bilinear: the four corners around (x', y'), weights (1 - tx)(1 - ty) etc.; out-of-bounds
  corners take no gradient and give no value; gridGrad = d(out)/d(x', y') times the padding
  derivative;
* nearest: round half to even; gridGrad is zero;
* bicubic: cubic convolution with A = -0.75 over the 4 x 4 taps around floor(x'), each tap's
  integer position padded on its own (border clip; reflection reflect then clip), the sampling
  point itself not padded; gridGrad from the derivatives of the cubic coefficients.

Besides the gradients it returns two yardsticks per element, for the tolerances:
* "scale": the sum of the absolute values of the terms that make it up (a sum of terms of mixed
  sign can cancel far below its terms, and each term carries its own rounding error);
* "cscale": the same sum with each weight replaced by |coordinate| + 1 (and each weight's
  derivative by its bound): a kernel that holds the unnormalised coordinate in FP32 has it
  rounded by ~2^-24 |coordinate|, which moves a weight by that much even where the weight itself
  is tiny (1 - tx with tx close to 1).
"""
from __future__ import annotations

import numpy as np

A = -0.75


def unnormalize(c, size, align):
    if align:
        return (c + 1) / 2 * (size - 1), (size - 1) / 2
    return ((c + 1) * size - 1) / 2, size / 2


def clip_set_grad(x, size):
    out = x.copy()
    g = np.ones_like(x)
    lo = x <= 0
    hi = ~lo & (x >= size - 1)
    out[lo], g[lo] = 0, 0
    out[hi], g[hi] = size - 1, 0
    return out, g


def reflect_set_grad(x, twice_low, twice_high):
    if twice_low == twice_high:
        return np.zeros_like(x), np.zeros_like(x)
    mn = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = x - mn
    sign = np.where(x < 0, -1.0, 1.0)
    x = np.abs(x)
    extra = np.fmod(x, span)
    flips = np.floor(x / span)
    even = np.fmod(flips, 2) == 0
    return np.where(even, extra + mn, span - extra + mn), np.where(even, sign, -sign)


def reflect_bounds(size, align):
    return (0.0, 2.0 * (size - 1)) if align else (-1.0, 2.0 * size - 1)


def source_index(c, size, padding, align):
    """grid_sampler_compute_source_index_set_grad: (coordinate, d coordinate / d grid)."""
    x, mult = unnormalize(c, size, align)
    g = np.full_like(x, mult)
    if padding == 1:
        x, gc = clip_set_grad(x, size)
        g = g * gc
    elif padding == 2:
        x, gr = reflect_set_grad(x, *reflect_bounds(size, align))
        x, gc = clip_set_grad(x, size)
        g = g * gr * gc
    return x, g


def pad_tap(x, size, padding, align):
    """compute_coordinates for an (integer) bicubic tap."""
    if padding == 1:
        return np.clip(x, 0, size - 1)
    if padding == 2:
        x, _ = reflect_set_grad(x, *reflect_bounds(size, align))
        return np.clip(x, 0, size - 1)
    return x


def conv1(x):
    return ((A + 2) * x - (A + 3)) * x * x + 1


def conv2(x):
    return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A


def dconv1(x):
    return 3 * (A + 2) * x * x - 2 * (A + 3) * x


def dconv2(x):
    return 3 * A * x * x - 10 * A * x + 8 * A


def cubic_coeffs(t):
    """Coefficients of taps floor-1 .. floor+2 and their derivatives in t."""
    c = [conv2(t + 1), conv1(t), conv1(1 - t), conv2(2 - t)]
    d = [dconv2(t + 1), dconv1(t), -dconv1(1 - t), -dconv2(2 - t)]
    return c, d


def grid_sampler_2d_backward_ref(grad_output, inp, grid, interpolation, padding, align):
    """Returns a dict: inputGrad, gridGrad and their scale and cscale (see the module), float64."""
    go = np.asarray(grad_output, dtype=np.float64)
    x = np.asarray(inp, dtype=np.float64)
    g = np.asarray(grid, dtype=np.float64)
    N, C, H, W = x.shape
    Ho, Wo = g.shape[1], g.shape[2]
    gin = np.zeros_like(x)
    gin_s = np.zeros_like(x)
    ggrid = np.zeros(g.shape, dtype=np.float64)
    ggrid_s = np.zeros(g.shape, dtype=np.float64)
    gin_c = np.zeros_like(x)
    ggrid_c = np.zeros(g.shape, dtype=np.float64)
    for n in range(N):
        gx, gy = g[n, ..., 0].reshape(-1), g[n, ..., 1].reshape(-1)
        gout = go[n].reshape(C, -1)                        # (C, points)
        acc = gin[n].reshape(C, -1)                        # views into gin
        acc_s = gin_s[n].reshape(C, -1)
        acc_c = gin_c[n].reshape(C, -1)

        def scatter(yy, xx, w, valid):
            idx = (yy * W + xx)[valid].astype(np.int64)
            contrib = gout[:, valid] * w[valid]
            np.add.at(acc, (slice(None), idx), contrib)
            np.add.at(acc_s, (slice(None), idx), np.abs(contrib))
            np.add.at(acc_c, (slice(None), idx), np.abs(gout[:, valid]) * cmag[valid])

        def value(yy, xx, valid):
            v = np.zeros((C, yy.size))
            idx = (np.where(valid, yy, 0) * W + np.where(valid, xx, 0)).astype(np.int64)
            v[:, valid] = x[n].reshape(C, -1)[:, idx[valid]]
            return v

        def inb(yy, xx):
            return (xx >= 0) & (xx <= W - 1) & (yy >= 0) & (yy <= H - 1)

        ux, _ = unnormalize(gx, W, align)
        uy, _ = unnormalize(gy, H, align)
        cmag = np.abs(ux) + np.abs(uy) + 1.0
        if interpolation in (0, 1):
            ix, mx = source_index(gx, W, padding, align)
            iy, my = source_index(gy, H, padding, align)
        if interpolation == 0:
            x0, y0 = np.floor(ix), np.floor(iy)
            x1, y1 = x0 + 1, y0 + 1
            corners = [(y0, x0, (x1 - ix) * (y1 - iy), -(y1 - iy), -(x1 - ix)),
                       (y0, x1, (ix - x0) * (y1 - iy), (y1 - iy), -(ix - x0)),
                       (y1, x0, (x1 - ix) * (iy - y0), -(iy - y0), (x1 - ix)),
                       (y1, x1, (ix - x0) * (iy - y0), (iy - y0), (ix - x0))]
            gix = np.zeros(ix.size); giy = np.zeros(ix.size)
            gix_s = np.zeros(ix.size); giy_s = np.zeros(ix.size)
            gc = np.zeros(ix.size)
            for yy, xx, w, dwx, dwy in corners:
                ok = inb(yy, xx)
                scatter(yy, xx, w, ok)
                dot = (value(yy, xx, ok) * gout).sum(axis=0)
                adot = np.abs(value(yy, xx, ok) * gout).sum(axis=0)
                gc += adot
                gix += dwx * dot; giy += dwy * dot
                gix_s += np.abs(dwx) * adot; giy_s += np.abs(dwy) * adot
            ggrid[n, ..., 0] = (mx * gix).reshape(Ho, Wo)
            ggrid[n, ..., 1] = (my * giy).reshape(Ho, Wo)
            ggrid_s[n, ..., 0] = (np.abs(mx) * gix_s).reshape(Ho, Wo)
            ggrid_s[n, ..., 1] = (np.abs(my) * giy_s).reshape(Ho, Wo)
            ggrid_c[n, ..., 0] = (np.abs(mx) * cmag * gc).reshape(Ho, Wo)
            ggrid_c[n, ..., 1] = (np.abs(my) * cmag * gc).reshape(Ho, Wo)
        elif interpolation == 1:
            xn, yn = np.rint(ix), np.rint(iy)            # round half to even
            ok = inb(yn, xn)
            scatter(yn, xn, np.ones_like(ix), ok)
        else:
            ix, mx = unnormalize(gx, W, align)
            iy, my = unnormalize(gy, H, align)
            x0, y0 = np.floor(ix), np.floor(iy)
            cx, dcx = cubic_coeffs(ix - x0)
            cy, dcy = cubic_coeffs(iy - y0)
            gix = np.zeros(ix.size); giy = np.zeros(ix.size)
            gix_s = np.zeros(ix.size); giy_s = np.zeros(ix.size)
            gc = np.zeros(ix.size)
            for j in range(4):
                yy = pad_tap(y0 - 1 + j, H, padding, align)
                for i in range(4):
                    xx = pad_tap(x0 - 1 + i, W, padding, align)
                    ok = inb(yy, xx)
                    scatter(yy, xx, cx[i] * cy[j], ok)
                    v = value(yy, xx, ok) * gout
                    dot, adot = v.sum(axis=0), np.abs(v).sum(axis=0)
                    gix += dcx[i] * cy[j] * dot; giy += cx[i] * dcy[j] * dot
                    gix_s += np.abs(dcx[i] * cy[j]) * adot; giy_s += np.abs(cx[i] * dcy[j]) * adot
                    gc += 8 * adot          # |d(coefficient products)/dt| <= 8 on [0, 1)
            ggrid[n, ..., 0] = (mx * gix).reshape(Ho, Wo)
            ggrid[n, ..., 1] = (my * giy).reshape(Ho, Wo)
            ggrid_s[n, ..., 0] = (abs(mx) * gix_s).reshape(Ho, Wo)
            ggrid_s[n, ..., 1] = (abs(my) * giy_s).reshape(Ho, Wo)
            ggrid_c[n, ..., 0] = (abs(mx) * cmag * gc).reshape(Ho, Wo)
            ggrid_c[n, ..., 1] = (abs(my) * cmag * gc).reshape(Ho, Wo)
    return {"inputGrad": gin, "gridGrad": ggrid, "inputGrad_scale": gin_s, "gridGrad_scale": ggrid_s,
            "inputGrad_cscale": gin_c, "gridGrad_cscale": ggrid_c}
