"""aclnnMaxPool2dWithIndices against a direct loop over the windows written from the document's
formula (float64; the first maximum in window order wins, as torch's) and against
torch.nn.functional.max_pool2d(return_indices=True) where torch is installed: random N, C, H, W,
kernels to 7, strides, paddings to kernel / 2, ceilMode, 3-D and 4-D self, every dtype, INT32 and
INT64 indices, forced tilings, on Ascend910B1 and Ascend910B4 (the operator is A2's only).
`MAX_POOL_CASES=N` runs more.

Exact: a maximum is one of its inputs, so out equals the reference bit for bit and indices are
equal, whatever the dtype (ties broken by the first in window order; the random data has ties
in FLOAT16 / BF16).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import simulator
from conftest import BF16, F16, F32, assert_status
from simulator import TensorLayout as T

N_CASES = int(os.environ.get("MAX_POOL_CASES", "40"))
CHIPS = ("Ascend910B1", "Ascend910B4")


def out_size(size, k, s, p, ceil):
    n = (size + 2 * p - k + (s - 1 if ceil else 0)) // s + 1
    return n - 1 if ceil and (n - 1) * s >= size + p else n


def reference(x: np.ndarray, k, s, p, ceil):
    """Each window's maximum and the flat index h W + w of its first maximum."""
    x64 = x.astype(np.float64)
    *lead, H, W = x64.shape
    Ho, Wo = out_size(H, k[0], s[0], p[0], ceil), out_size(W, k[1], s[1], p[1], ceil)
    planes = x64.reshape(-1, H, W)
    out = np.full((planes.shape[0], Ho, Wo), -np.inf)
    idx = np.zeros((planes.shape[0], Ho, Wo), np.int64)
    for oh in range(Ho):
        for ow in range(Wo):
            for i in range(k[0]):
                for j in range(k[1]):
                    h, w = oh * s[0] - p[0] + i, ow * s[1] - p[1] + j
                    if 0 <= h < H and 0 <= w < W:
                        v = planes[:, h, w]
                        better = v > out[:, oh, ow]
                        out[:, oh, ow] = np.where(better, v, out[:, oh, ow])
                        idx[:, oh, ow] = np.where(better, h * W + w, idx[:, oh, ow])
    return out.reshape(*lead, Ho, Wo), idx.reshape(*lead, Ho, Wo)


def draw_case(seed: int) -> dict:
    rng = np.random.default_rng([seed, 131])
    k = tuple(int(v) for v in rng.integers(1, 8, 2)) if rng.random() < 0.7 else (3, 3)
    s = tuple(int(v) for v in rng.integers(1, 4, 2))
    p = tuple(int(rng.integers(0, kk // 2 + 1)) for kk in k)
    H, W = (int(rng.integers(kk, kk + 40)) for kk in k)
    lead = (int(rng.integers(1, 3)), int(rng.integers(1, 90))) if rng.random() < 0.8 else (int(rng.integers(1, 70)),)
    forced = None
    if rng.random() < 0.2:
        forced = {"planes": int(rng.choice([16, 32, 64])), "rows": int(rng.integers(1, 4)),
                  "cols": int(rng.integers(1, 9))}
    return dict(seed=seed, soc=CHIPS[seed % 2], shape=lead + (H, W), k=k, s=s, p=p, ceil=bool(rng.random() < 0.4),
                dtype=(F32, F16, BF16)[int(rng.integers(0, 3))], idx=(np.int32, np.int64)[int(rng.integers(0, 2))],
                forced=forced)


CASES = [draw_case(i) for i in range(N_CASES)]


def _id(c) -> str:
    return (f"seed{c['seed']}-{c['soc']}-{'x'.join(map(str, c['shape']))}-k{c['k']}-s{c['s']}-p{c['p']}"
            f"{'-ceil' if c['ceil'] else ''}-{np.dtype(c['dtype']).name}-{np.dtype(c['idx']).name}"
            f"{'-forced' if c['forced'] else ''}").replace(" ", "")


def _run(c):
    x = np.random.default_rng(13_000 + c["seed"]).standard_normal(c["shape"]).astype(c["dtype"])
    kept = x.copy()
    H, W = c["shape"][-2:]
    shape = c["shape"][:-2] + (out_size(H, c["k"][0], c["s"][0], c["p"][0], c["ceil"]),
                               out_size(W, c["k"][1], c["s"][1], c["p"][1], c["ceil"]))
    r = simulator.run("MaxPool2dWithIndices", c["soc"], self=x, kernelSize=list(c["k"]), stride=list(c["s"]),
                      padding=list(c["p"]), dilation=[1, 1], ceilMode=c["ceil"], out=np.zeros(shape, c["dtype"]),
                      indices=np.zeros(shape, c["idx"]), tiling=c["forced"])
    assert np.array_equal(x, kept), "self was modified"
    return x, r


@pytest.mark.parametrize("c", CASES, ids=[_id(c) for c in CASES])
def test_max_pool_matches_the_windows(c):
    x, r = _run(c)
    out, idx = reference(x, c["k"], c["s"], c["p"], c["ceil"])
    assert r.out.dtype == c["dtype"] and r.indices.dtype == c["idx"]
    np.testing.assert_array_equal(r.out.astype(np.float64), out, err_msg=_id(c))
    np.testing.assert_array_equal(r.indices, idx, err_msg=_id(c))


@pytest.mark.parametrize("soc", CHIPS)
def test_windows_larger_than_ub_and_strides_past_a_repeat_run(soc):
    """The document bounds neither kernelSize nor stride: a window too large for UB is taken in
    passes of kernel rows (then of one row and fewer columns), the maxima and indices kept between
    passes in window order; a column stride past a repeat stride's reach takes tiles one column
    wide. Exact against the window loop, ties (FLOAT16 data) included."""
    for shape, k, s, p, dt in (((1, 16, 26, 26), (25, 25), (13, 13), (12, 12), F16),    # passes of 12 rows
                               ((1, 16, 1, 2008), (1, 2000), (1, 8), (0, 0), F32),       # of 1 row, fewer columns
                               ((1, 16, 2, 520), (1, 130), (1, 130), (0, 0), BF16)):     # 130 x 2 blocks > 255
        c = dict(seed=0, soc=soc, shape=shape, k=k, s=s, p=p, ceil=False, dtype=dt, idx=np.int64, forced=None)
        x, r = _run(c)
        out, idx = reference(x, k, s, p, False)
        np.testing.assert_array_equal(r.out.astype(np.float64), out, err_msg=f"{soc} {shape} k{k} s{s}")
        np.testing.assert_array_equal(r.indices, idx, err_msg=f"{soc} {shape} k{k} s{s}")


@pytest.mark.parametrize("c", CASES[:15], ids=[_id(c) for c in CASES[:15]])
def test_max_pool_matches_torch(c):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    x, r = _run(c)
    out, idx = torch.nn.functional.max_pool2d(torch.from_numpy(x.astype(np.float64)), c["k"], c["s"], c["p"], 1,
                                              c["ceil"], True)
    np.testing.assert_array_equal(r.out.astype(np.float64), out.numpy(), err_msg=_id(c))
    np.testing.assert_array_equal(r.indices, idx.numpy(), err_msg=_id(c))


def _args(**over):
    a = dict(self=T((2, 4, 8, 8), F32), kernelSize=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1],
             ceilMode=False, out=T((2, 4, 4, 4), F32), indices=T((2, 4, 4, 4), np.int32))
    a.update(over)
    return a


STATUS = {
    "null self": (161001, "Ascend910B1", _args(self=None)),
    "not on the training series": (161002, "Ascend910A", _args()),
    "int32 self": (161002, "Ascend910B1", _args(self=T((2, 4, 8, 8), np.int32), out=T((2, 4, 4, 4), np.int32))),
    "out dtype differs": (161002, "Ascend910B1", _args(out=T((2, 4, 4, 4), F16))),
    "float indices": (161002, "Ascend910B1", _args(indices=T((2, 4, 4, 4), F32))),
    "2-D self": (161002, "Ascend910B1", _args(self=T((8, 8), F32))),
    "kernelSize of 3": (161002, "Ascend910B1", _args(kernelSize=[3, 3, 3])),
    "kernelSize 0": (161002, "Ascend910B1", _args(kernelSize=[0, 3])),
    "stride of 3": (161002, "Ascend910B1", _args(stride=[1, 1, 1])),
    "stride 0": (161002, "Ascend910B1", _args(stride=[0, 2])),
    "padding over kernel / 2": (161002, "Ascend910B1", _args(padding=[2, 2])),
    "negative padding": (161002, "Ascend910B1", _args(padding=[-1])),
    "dilation 2": (161002, "Ascend910B1", _args(dilation=[2, 2])),
    "dilation of 3": (161002, "Ascend910B1", _args(dilation=[1, 1, 1])),
    "an output dim of 0": (161002, "Ascend910B1", _args(self=T((2, 4, 2, 8), F32), padding=[0, 0],
                                                          out=T((2, 4, 0, 3), F32), indices=T((2, 4, 0, 3), np.int32))),
    "out shape": (161002, "Ascend910B1", _args(out=T((2, 4, 4, 5), F32))),
    "indices shape": (161002, "Ascend910B1", _args(indices=T((2, 4, 5, 4), np.int32))),
}


@pytest.mark.parametrize("name", list(STATUS))
def test_documented_status_codes(name):
    status, soc, args = STATUS[name]
    assert_status("MaxPool2dWithIndices", soc, args, status)


def test_stride_defaults_to_the_kernel():
    x = np.random.default_rng(5).standard_normal((1, 16, 9, 9)).astype(F32)
    r = simulator.run("MaxPool2dWithIndices", "Ascend910B1", self=x, kernelSize=[3], stride=[], padding=[0],
                      dilation=[1], ceilMode=False)
    out, idx = reference(x, (3, 3), (3, 3), (0, 0), False)
    np.testing.assert_array_equal(r.out, out)
    np.testing.assert_array_equal(r.indices, idx)


def test_a_bad_forced_tiling_is_a_tiling_error():
    assert_status("MaxPool2dWithIndices", "Ascend910B1", _args(tiling={"planes": 24}), 561002)


# ---- MaxPool2dWithIndicesBackward (A2: FLOAT gradients, INT32 indices) ----------------------------
def grad_reference(go: np.ndarray, idx: np.ndarray, self_shape) -> tuple[np.ndarray, np.ndarray]:
    """gradInput[plane, idx] += gradOutput, in float64; and the sum of |gradOutput| landing on
    each element (the FP32 adds' rounding scales with it)."""
    *lead, H, W = self_shape
    planes = int(np.prod(lead))
    g = go.astype(np.float64).reshape(planes, -1)
    i = idx.astype(np.int64).reshape(planes, -1) + np.arange(planes)[:, None] * H * W
    out, mag = np.zeros(planes * H * W), np.zeros(planes * H * W)
    np.add.at(out, i.ravel(), g.ravel())
    np.add.at(mag, i.ravel(), np.abs(g).ravel())
    return out.reshape(self_shape), mag.reshape(self_shape)


GRAD_CASES = [dict(draw_case(1000 + i), dtype=F32, idx=np.int32) for i in range(N_CASES // 2)]


def _run_grad(c):
    rng = np.random.default_rng(14_000 + c["seed"])
    x = rng.standard_normal(c["shape"]).astype(F32)
    _, idx = reference(x, c["k"], c["s"], c["p"], c["ceil"])
    go = rng.standard_normal(idx.shape).astype(F32)
    idx = idx.astype(np.int32)
    kept = (go.copy(), idx.copy())
    r = simulator.run("MaxPool2dWithIndicesBackward", c["soc"], gradOutput=go, self=x, indices=idx,
                      kernelSize=list(c["k"]), stride=list(c["s"]), padding=list(c["p"]), dilation=[1, 1],
                      ceilMode=c["ceil"], tiling=c["forced"])
    assert np.array_equal(go, kept[0]) and np.array_equal(idx, kept[1]), "an input was modified"
    return x, go, idx, r.outputs["gradInput"]


def _grad_close(c, got, go, idx, ref, what):
    _, mag = grad_reference(go, idx, c["shape"])
    adds = c["k"][0] * c["k"][1]                 # at most this many windows reach one element
    tol = adds * 2.0 ** -24 * mag + 1e-30
    assert got.shape == ref.shape and got.dtype == F32, what
    assert np.all(np.abs(got.astype(np.float64) - ref) <= tol), f"{what}: max error {np.abs(got - ref).max()}"


@pytest.mark.parametrize("c", GRAD_CASES, ids=[_id(c) for c in GRAD_CASES])
def test_max_pool_backward_scatters_to_the_maxima(c):
    _, go, idx, got = _run_grad(c)
    ref, _ = grad_reference(go, idx, c["shape"])
    _grad_close(c, got, go, idx, ref, _id(c))


@pytest.mark.parametrize("c", GRAD_CASES[:8], ids=[_id(c) for c in GRAD_CASES[:8]])
def test_max_pool_backward_matches_torch(c):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    x, go, idx, got = _run_grad(c)
    ref = torch.ops.aten.max_pool2d_with_indices_backward(
        torch.from_numpy(go.astype(np.float64)), torch.from_numpy(x.astype(np.float64)), list(c["k"]), list(c["s"]),
        list(c["p"]), [1, 1], c["ceil"], torch.from_numpy(idx.astype(np.int64))).numpy()
    _grad_close(c, got, go, idx, ref, f"{_id(c)} vs torch")


@pytest.mark.parametrize("soc", CHIPS)
def test_backward_windows_larger_than_ub_and_strides_past_a_repeat_run(soc):
    """As the forward: a window too large for UB is scattered in passes of kernel rows (then of one
    row and fewer columns), each pass's window added into gradInput; a column stride past a
    repeat stride's reach takes one-column tiles. Overlapping windows (stride 1) included."""
    for n, (shape, k, s, p) in enumerate((((1, 16, 37, 37), (33, 33), (1, 1), (0, 0)),     # passes of rows
                                          ((2, 9, 103, 2), (95, 1), (1, 1), (3, 0)),
                                          ((1, 16, 2, 1513), (1, 1505), (1, 2), (0, 0)),   # of fewer columns
                                          ((1, 16, 2, 512), (1, 1), (1, 128), (0, 0)))):   # 128 x 2 blocks > 255
        c = dict(seed=n, soc=soc, shape=shape, k=k, s=s, p=p, ceil=False, forced=None)
        _, go, idx, got = _run_grad(c)
        ref, _ = grad_reference(go, idx, shape)
        _grad_close(c, got, go, idx, ref, f"{soc} {shape} k{k} s{s}")


def _grad_args(**over):
    a = dict(gradOutput=T((2, 4, 4, 4), F32), self=T((2, 4, 8, 8), F32), indices=T((2, 4, 4, 4), np.int32),
             kernelSize=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceilMode=False,
             gradInput=T((2, 4, 8, 8), F32))
    a.update(over)
    return a


GRAD_STATUS = {
    "null self": (161001, "Ascend910B1", _grad_args(self=None)),
    "null indices": (161001, "Ascend910B1", _grad_args(indices=None)),
    "null gradOutput": (161001, "Ascend910B1", _grad_args(gradOutput=None)),
    "not on the training series": (161002, "Ascend910A", _grad_args()),
    "FLOAT16 on A2": (161002, "Ascend910B1", _grad_args(gradOutput=T((2, 4, 4, 4), F16), self=T((2, 4, 8, 8), F16),
                                                        gradInput=T((2, 4, 8, 8), F16))),
    "INT64 indices on A2": (161002, "Ascend910B1", _grad_args(indices=T((2, 4, 4, 4), np.int64))),
    "2-D self": (161002, "Ascend910B1", _grad_args(self=T((8, 8), F32), gradInput=T((8, 8), F32))),
    "kernelSize of 3": (161002, "Ascend910B1", _grad_args(kernelSize=[3, 3, 3])),
    "kernelSize 0": (161002, "Ascend910B1", _grad_args(kernelSize=[0, 3])),
    "stride of 3": (161002, "Ascend910B1", _grad_args(stride=[2, 2, 2])),
    "stride 0": (161002, "Ascend910B1", _grad_args(stride=[0, 2])),
    "padding of 3": (161002, "Ascend910B1", _grad_args(padding=[1, 1, 1])),
    "padding over kernel": (161002, "Ascend910B1", _grad_args(padding=[4, 4])),
    "dilation 2": (161002, "Ascend910B1", _grad_args(dilation=[2, 2])),
    "gradOutput shape": (161002, "Ascend910B1", _grad_args(gradOutput=T((2, 4, 4, 5), F32))),
    "indices shape": (161002, "Ascend910B1", _grad_args(indices=T((2, 4, 5, 4), np.int32))),
    "gradInput shape": (161002, "Ascend910B1", _grad_args(gradInput=T((2, 4, 8, 9), F32))),
}


@pytest.mark.parametrize("name", list(GRAD_STATUS))
def test_backward_documented_status_codes(name):
    status, soc, args = GRAD_STATUS[name]
    assert_status("MaxPool2dWithIndicesBackward", soc, args, status)


def test_a_wide_row_is_split_into_taps_of_at_most_255_columns():
    """A tap is one repeat a column (255 at most): a 1x1 pool of 600 columns is split, and a forced
    tile past the limit is a tiling error."""
    x = np.random.default_rng(3).standard_normal((1, 1, 2, 600)).astype(F32)
    kw = dict(self=x, kernelSize=[1, 1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], ceilMode=False)
    r = simulator.run("MaxPool2dWithIndices", "Ascend910B1", **kw)
    np.testing.assert_array_equal(r.outputs["out"], x)
    np.testing.assert_array_equal(r.outputs["indices"], np.arange(1200).reshape(1, 1, 2, 600))
    assert_status("MaxPool2dWithIndices", "Ascend910B1", dict(kw, tiling={"cols": 300}), 561002)


def test_strided_views_in_and_out():
    """A non-contiguous self is made contiguous first; strided out / indices / gradInput are
    written back by ViewCopy, the gaps untouched."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 9, 12)).astype(F32).transpose(0, 1, 3, 2)
    want, where = reference(x, (3, 3), (2, 2), (1, 1), False)
    out_buf, idx_buf = np.full((2, 5, 6, 10), np.nan, F32), np.zeros((2, 5, 6, 10), np.int64)
    simulator.run("MaxPool2dWithIndices", "Ascend910B1", self=x, kernelSize=[3, 3], stride=[2, 2], padding=[1, 1],
                  dilation=[1, 1], ceilMode=False, out=out_buf[..., ::2], indices=idx_buf[..., ::2])
    np.testing.assert_array_equal(out_buf[..., ::2], want)
    np.testing.assert_array_equal(idx_buf[..., ::2], where)
    assert np.isnan(out_buf[..., 1::2]).all() and not idx_buf[..., 1::2].any()
    go = np.asfortranarray(rng.standard_normal(want.shape).astype(F32))
    gi_buf = np.full((2, 5, 12, 18), np.nan, F32)
    simulator.run("MaxPool2dWithIndicesBackward", "Ascend910B4", gradOutput=go, self=x, indices=where.astype(np.int32),
                  kernelSize=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceilMode=False,
                  gradInput=gi_buf[..., ::2])
    ref, mag = grad_reference(go, where, x.shape)
    assert np.all(np.abs(gi_buf[..., ::2] - ref) <= 9 * 2.0 ** -24 * mag)
    assert np.isnan(gi_buf[..., 1::2]).all()


def test_backward_padding_up_to_the_kernel():
    """The backward's document allows padding up to kernelSize: windows wholly in the padding are
    discarded, the others' gradients land at their maxima."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 20, 5, 7)).astype(F32)
    k, s, p = (2, 2), (2, 2), (2, 2)
    out, idx = reference(x, k, s, p, False)
    go = rng.standard_normal(out.shape).astype(F32)
    r = simulator.run("MaxPool2dWithIndicesBackward", "Ascend910B1", gradOutput=go, self=x,
                      indices=idx.astype(np.int32), kernelSize=list(k), stride=list(s), padding=list(p),
                      dilation=[1, 1], ceilMode=False, tiling={"planes": 16, "rows": 1, "cols": 1})
    ref, _ = grad_reference(np.where(np.isfinite(out), go, 0).astype(F32), idx, x.shape)
    np.testing.assert_allclose(r.outputs["gradInput"], ref, rtol=1e-6, atol=1e-6)
