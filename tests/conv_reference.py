"""Float64 references for the convolution gradients, written directly from the formulas (no torch,
no autograd). Shapes and conventions are PyTorch's `convolution_backward`:

* 1, 2 or 3 spatial dimensions; input (N, Cin, *S), weight (Cout, Cin/groups, *K) for a convolution
  and (Cin, Cout/groups, *K) for a transposed one; gradOutput (N, Cout, *O).
* padding per spatial dimension as (before, after) pairs (symmetric = the same twice).

Convolution (cross-correlation), per group g, with xp the input padded by `before` zeros:

    y[n, co, o]  = sum_{ci, k} xp[n, ci, o*s + k*d] * w[co, ci, k]
    dx           = crop(scatter_{o, k}: dxp[n, ci, o*s + k*d] += sum_co dy[n, co, o] * w[co, ci, k])
    dw[co, ci, k] = sum_{n, o} dy[n, co, o] * xp[n, ci, o*s + k*d]
    db[co]        = sum_{n, o} dy[n, co, o]

Transposed convolution (the adjoint of the above in x, with weight (Cin, Cout/g, K)), with yp the
output before its `before` rows are cropped:

    yp[n, co, i*s + k*d] += sum_ci x[n, ci, i] * w[ci, co, k];  y = yp[before : before + O]
    dx[n, ci, i]  = sum_{co, k} dyp[n, co, i*s + k*d] * w[ci, co, k]     (dyp: dy placed at `before`)
    dw[ci, co, k] = sum_{n, i} x[n, ci, i] * dyp[n, co, i*s + k*d]
    db[co]        = sum_{n, o} dy[n, co, o]
"""
from __future__ import annotations

import itertools

import numpy as np


def norm_padding(padding, nd: int) -> list[tuple[int, int]]:
    """[p] * nd -> [(p, p)]; a 2D 4-entry [top, bottom, left, right] -> [(top, bottom), (left, right)]."""
    padding = list(padding)
    if len(padding) == 2 * nd and nd == 2:
        return [(padding[0], padding[1]), (padding[2], padding[3])]
    if len(padding) == 1 and nd > 1:
        padding = padding * nd
    return [(int(p), int(p)) for p in padding]


def _expand(v, nd):
    v = list(v) if np.ndim(v) else [v]
    return [int(x) for x in (v * nd if len(v) == 1 else v)]


def conv_out_size(in_sp, k, stride, pads, dilation, transposed=False, output_padding=None):
    nd = len(in_sp)
    output_padding = output_padding or [0] * nd
    out = []
    for i in range(nd):
        lo, hi = pads[i]
        if transposed:
            out.append((in_sp[i] - 1) * stride[i] - lo - hi + dilation[i] * (k[i] - 1) + output_padding[i] + 1)
        else:
            out.append((in_sp[i] + lo + hi - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1)
    return out


def _contract(a, b):
    """sum over batch and spatial axes: (N, A, *S) x (N, B, *S) -> (A, B)."""
    axes = [0] + list(range(2, a.ndim))
    return np.tensordot(a, b, axes=(axes, axes))


def _taps(k):
    return itertools.product(*[range(x) for x in k])


def _win(start, k_idx, s, d, count):
    """The slice picking positions o*s + k*d for o in range(count)."""
    return tuple(slice(ki * di, ki * di + (c - 1) * si + 1, si) for ki, si, di, c in zip(k_idx, s, d, count))


def conv_forward(x, w, stride, padding, dilation, groups=1, transposed=False, output_padding=None):
    """The forward convolution (for self-checks of the backward formulas by adjointness)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    nd = x.ndim - 2
    s, d = _expand(stride, nd), _expand(dilation, nd)
    pads = norm_padding(padding, nd) if not isinstance(padding[0], tuple) else list(padding)
    k = list(w.shape[2:])
    N, C = x.shape[:2]
    G = groups
    if not transposed:
        Cout, Cig = w.shape[0], w.shape[1]
        Cog = Cout // G
        out = conv_out_size(x.shape[2:], k, s, pads, d)
        xp = np.pad(x, [(0, 0), (0, 0)] + [(lo, max(hi, 0)) for lo, hi in pads])
        y = np.zeros((N, Cout, *out))
        for g in range(G):
            xg = xp[:, g * Cig:(g + 1) * Cig]
            wg = w[g * Cog:(g + 1) * Cog]
            for kk in _taps(k):
                win = xg[(slice(None), slice(None)) + _win(0, kk, s, d, out)]
                y[:, g * Cog:(g + 1) * Cog] += np.einsum("nc...,oc->no...", win, wg[(slice(None), slice(None)) + kk])
        return y
    Cin, Cog = w.shape[0], w.shape[1]
    Cig = Cin // G
    Cout = Cog * G
    out = conv_out_size(x.shape[2:], k, s, pads, d, True, _expand(output_padding or 0, nd))
    ins = x.shape[2:]
    full = [max((ins[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1, pads[i][0] + out[i]) for i in range(nd)]
    yp = np.zeros((N, Cout, *full))
    for g in range(G):
        xg = x[:, g * Cig:(g + 1) * Cig]
        wg = w[g * Cig:(g + 1) * Cig]
        for kk in _taps(k):
            contrib = np.einsum("nc...,co->no...", xg, wg[(slice(None), slice(None)) + kk])
            yp[(slice(None), slice(g * Cog, (g + 1) * Cog)) + _win(0, kk, s, d, ins)] += contrib
    return yp[(slice(None), slice(None)) + tuple(slice(pads[i][0], pads[i][0] + out[i]) for i in range(nd))]


def conv_backward(grad_output, x, w, stride, padding, dilation, groups=1, transposed=False,
                  output_padding=None, mask=(True, True, True)):
    """(dx, dw, db) in float64; an entry is None where its mask bit is False."""
    dy = np.asarray(grad_output, np.float64)
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    nd = x.ndim - 2
    s, d = _expand(stride, nd), _expand(dilation, nd)
    pads = norm_padding(padding, nd) if not isinstance(padding[0], tuple) else list(padding)
    k = list(w.shape[2:])
    N = x.shape[0]
    G = groups
    ins, outs = list(x.shape[2:]), list(dy.shape[2:])
    db = dy.sum(axis=(0,) + tuple(range(2, dy.ndim))) if mask[2] else None
    dx = np.zeros(x.shape) if mask[0] else None
    dw = np.zeros(w.shape) if mask[1] else None
    if not transposed:
        Cout, Cig = w.shape[0], w.shape[1]
        Cog = Cout // G
        full = [max(ins[i] + pads[i][0] + max(pads[i][1], 0), (outs[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1)
                for i in range(nd)]
        xp = np.zeros((N, x.shape[1], *full))
        xp[(slice(None), slice(None)) + tuple(slice(pads[i][0], pads[i][0] + ins[i]) for i in range(nd))] = x
        dxp = np.zeros_like(xp)
        for g in range(G):
            dyg = dy[:, g * Cog:(g + 1) * Cog]
            wg = w[g * Cog:(g + 1) * Cog]
            for kk in _taps(k):
                sl = (slice(None), slice(g * Cig, (g + 1) * Cig)) + _win(0, kk, s, d, outs)
                wk = wg[(slice(None), slice(None)) + kk]                      # (Cog, Cig)
                if mask[1]:
                    dw[(slice(g * Cog, (g + 1) * Cog), slice(None)) + kk] = _contract(dyg, xp[sl])
                if mask[0]:
                    dxp[sl] += np.einsum("no...,oc->nc...", dyg, wk)
        if mask[0]:
            dx[...] = dxp[(slice(None), slice(None)) + tuple(slice(pads[i][0], pads[i][0] + ins[i]) for i in range(nd))]
        return dx, dw, db
    Cin, Cog = w.shape[0], w.shape[1]
    Cig = Cin // G
    full = [max((ins[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1, pads[i][0] + outs[i]) for i in range(nd)]
    dyp = np.zeros((N, dy.shape[1], *full))
    dyp[(slice(None), slice(None)) + tuple(slice(pads[i][0], pads[i][0] + outs[i]) for i in range(nd))] = dy
    for g in range(G):
        xg = x[:, g * Cig:(g + 1) * Cig]
        wg = w[g * Cig:(g + 1) * Cig]
        for kk in _taps(k):
            win = dyp[(slice(None), slice(g * Cog, (g + 1) * Cog)) + _win(0, kk, s, d, ins)]   # (N, Cog, *ins)
            wk = wg[(slice(None), slice(None)) + kk]                                        # (Cig, Cog)
            if mask[0]:
                dx[:, g * Cig:(g + 1) * Cig] += np.einsum("no...,co->nc...", win, wk)
            if mask[1]:
                dw[(slice(g * Cig, (g + 1) * Cig), slice(None)) + kk] = _contract(xg, win)
    return dx, dw, db


def conv_tbc_forward(x, w, bias, pad):
    """PyTorch conv_tbc in float64: x (T, B, Cin), w (K, Cin, Cout), bias (Cout) ->
    (T + 2*pad + 1 - K, B, Cout), out[o] = bias + sum_k in[o + k - pad] @ W[k] (zeros outside
    0..T-1). For self-checks of conv_tbc_backward by adjointness."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    T, B = x.shape[:2]
    K = w.shape[0]
    To = T + 2 * pad + 1 - K
    xp = np.zeros((max(T + 2 * pad, To + K - 1), B, x.shape[2]))
    xp[pad:pad + T] = x
    y = np.zeros((To, B, w.shape[2])) + np.asarray(bias, np.float64)
    for k in range(K):
        y += xp[k:k + To] @ w[k]
    return y


def conv_tbc_backward(grad_output, x, w, pad):
    """PyTorch conv_tbc's backward from its formulas: x (T, B, Cin), w (K, Cin, Cout),
    grad_output (T_out, B, Cout), T_out = T + 2*pad + 1 - K.
        dIn[t]  = sum_k dOut[t - k + pad] @ W[k]^T
        dW[k]   = sum_o in[o + k - pad]^T @ dOut[o]
        dBias   = dOut summed over T and B"""
    dy = np.asarray(grad_output, np.float64)
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    T, K = x.shape[0], w.shape[0]
    To = dy.shape[0]
    dx = np.zeros(x.shape)
    dw = np.zeros(w.shape)
    for k in range(K):
        for o in range(To):
            t = o + k - pad
            if 0 <= t < T:
                dx[t] += dy[o] @ w[k].T
                dw[k] += x[t].T @ dy[o]
    return dx, dw, dy.sum(axis=(0, 1))
