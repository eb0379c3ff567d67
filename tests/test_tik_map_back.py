"""A 3D convolution's output (or gradInput), and its gradWeight from FRACTAL_Z_3D, back to NCDHW as
CANN's TIK TransData runs it (ops/conv/tik_map_back.py), against CANN's own tiling and kernel
source read by hand (canndev `trans_data_negative_target_ntc.cc`, CANN 8.1
`trans_data_negative_target_ntc.py`), ops-nn's aclnn_convolution_backward.cpp for the launches
after the Cube, and, for the numbers, against the float64 formula through aclnnConvolution and
aclnnConvolutionBackward (tests/test_convolution.py and test_conv_random.py draw more)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import simulator
from conv_reference import conv_backward, conv_forward
from ops.conv.tik_map_back import plan_tik_map_back

UB = 196608


def _plan(N, C, D, HW, dtype=np.float16, cores=48, fz3d_rows=0):
    return plan_tik_map_back(N=N, C=C, c0=16, D=D, HW=HW, dtype=dtype, ub_bytes=UB, cores=cores, tile_scalar=0.0,
                             fz3d_rows=fz3d_rows)


def _grad_weight(soc, x, w, go, stride, pad, dtype):
    return simulator.run("ConvolutionBackward", soc, gradOutput=go.astype(dtype), input=x.astype(dtype),
                         weight=w.astype(dtype), biasSizes=[w.shape[0]], stride=[stride] * 3, padding=[pad] * 3,
                         dilation=[1, 1, 1], transposed=False, outputPadding=[0, 0, 0], groups=1,
                         outputMask=[False, True, False], cubeMathType=0)


def _pipe_counts(r, prefix):
    index = next(i for i, l in enumerate(r.report.launches) if l["name"].startswith(prefix))
    counts = {}
    for b in r.report.trace.rec.blocks:
        if b.launch == index:
            for pipe, n in b.instructions.items():
                counts[pipe] = counts.get(pipe, 0) + n
    return counts


def test_the_patch_embedding_map_takes_the_tiling_cann_gives_it():
    """MinerU's Conv3D patch embedding output, 5476 x 1280 x 1 x 1 x 1 FP16, measured on a 910B2 on
    48 blocks (mineru_vision_910b2): one position a row is under every mode 2001 gate (32, 128 or
    240), 1280 channels are 80 blocks (not under 54: not 2003), so mode 2002; a vnchwconv line of
    3,056 elements (191 blocks of 16) takes 176 positions' C1 planes: 11 a tile; 16 rows a tile,
    343 row tiles; the rows fill the cores best: 8 a core, 43 cores busy."""
    t = _plan(5476, 1280, 1, 1)
    assert (t.mode, t.cl_unit, t.c_unit, t.cr_unit) == (2002, 16, 11, 1)
    assert (t.axis, t.per_core, t.cores, t.launched) == (0, 8, 43, 48)


@pytest.mark.parametrize("N, C, D, HW, dtype, mode", [
    (2, 32, 2, 16, np.float16, 2001),       # 32 positions, a multiple of 16: gate 32
    (2, 32, 1, 31, np.float16, 2002),       # 31 positions, under gate 128 (1 C1 ... 2 C1 planes fit a line)
    (2, 64, 3, 9, np.float32, 2002),        # a 3x3x3 window's 27 positions
    (2, 40, 1, 1, np.float16, None),        # 40 channels x 1 position: under 54 blocks, mode 2003
    (1, 8, 16, 16384, np.float16, 2001),
])
def test_the_mode_follows_the_tilings_gates(N, C, D, HW, dtype, mode):
    t = _plan(N, C, D, HW, dtype)
    assert (t.mode if t else None) == mode


def test_a_tile_issues_the_kernels_moves():
    """Mode 2002 with one position a row (TIK's mid planes: one data_move per (row, C1 plane)), per
    tile two vnchwconv and a UB -> UB move per channel, and one data_move_pad out, counted in the
    launch's instructions: the TransData of x 33 x 3 x 2 x 14 x 14, w 900 x 3 x 2 x 14 x 14."""
    x = np.ones((33, 3, 2, 14, 14), np.float16)
    w = np.full((900, 3, 2, 14, 14), 1 / 64, np.float16)
    r = simulator.run("Convolution", "Ascend910B2", input=x, weight=w, bias=None, stride=[2, 14, 14],
                      padding=[0, 0, 0], dilation=[1, 1, 1], transposed=False, outputPadding=[0, 0, 0], groups=1,
                      cubeMathType=0)
    np.testing.assert_array_equal(r.outputs["output"], np.full((33, 900, 1, 1, 1), 3 * 2 * 14 * 14 / 64))
    index = next(i for i, l in enumerate(r.report.launches) if l["name"].startswith("TransData(output NDC1HWC0"))
    t = _plan(33, 900, 1, 1)
    tiles = t.counts[0] * t.counts[1]                       # 3 row tiles x 6 C1 chunks
    counts = {}
    for b in r.report.trace.rec.blocks:
        if b.launch == index:
            for pipe, n in b.instructions.items():
                counts[pipe] = counts.get(pipe, 0) + n
    c1 = -(-900 // 16)
    assert counts["PIPE_MTE2"] == 33 * c1                   # a move per (row, C1 plane)
    assert counts["PIPE_MTE3"] == tiles                     # one data_move_pad a tile
    # per tile a move per channel (900 in each row tile) and two vnchwconv, plus one zero fill of UB
    # on each core whose tiles are partial (the last row tile: 1 of 16 rows)
    assert counts["PIPE_V"] - 2 * tiles - 900 * t.counts[0] in range(0, t.cores + 1)


def test_bfloat16_never_takes_mode_2001():
    """The tiling's dtype list for one vnchwconv has float16 and float32, not bfloat16: a bfloat16 map
    of many positions goes through two vnchwconv, 176 positions a tile."""
    assert _plan(2, 32, 2, 16, np.float16).mode == 2001
    t = _plan(2, 32, 2, 16, ml_dtypes.bfloat16)
    assert (t.mode, t.cr_unit) == (2002, 2 * 16)
    assert _plan(1, 8, 16, 16384, ml_dtypes.bfloat16).cr_unit == 176


def test_2001_and_2002_give_the_formulas_output():
    """Both modes' moves put every value in its place (exact: small integers in FP16, BF16 and
    FP32), ragged tiles included: a last C1 plane of 1 channel, a last row tile of 4 rows, and
    positions split over two cores (176 + 4, rounded up to a block after the moves)."""
    rng = np.random.default_rng(7)
    for xs, ws, s, p, dt in (((2, 16, 5, 9, 9), (33, 16, 3, 3, 3), 1, 1, np.float32),     # 405 positions: 2001
                             ((3, 8, 2, 6, 6), (70, 8, 2, 3, 3), 2, 1, np.float16),        # 2 x 3 x 3: 2002
                             ((16, 16, 4, 5, 9), (16, 16, 1, 1, 1), 1, 0, np.float16),     # 180 positions, 2 cores
                             ((20, 4, 2, 8, 8), (96, 4, 2, 3, 3), 2, 1, ml_dtypes.bfloat16)):
        x = rng.integers(-2, 3, xs).astype(dt)
        w = rng.integers(-1, 2, ws).astype(dt)
        r = simulator.run("Convolution", "Ascend910B4", input=x, weight=w, bias=None, stride=[s] * 3,
                          padding=[p] * 3, dilation=[1, 1, 1], transposed=False, outputPadding=[0, 0, 0], groups=1,
                          cubeMathType=0)
        names = [l["name"] for l in r.report.launches]
        assert "TransData(output NDC1HWC0 -> NCDHW)" in names
        np.testing.assert_array_equal(r.outputs["output"].astype(np.float64),
                                      conv_forward(x, w, [s] * 3, [p] * 3, [1, 1, 1]))


def test_a_weight_takes_the_tiling_cann_gives_it():
    """FRACTAL_Z_3D -> NCDHW of FP32 (the Cube's gradWeight) goes through the same tiling as a map,
    its C-right axes the kernel's depth and taps. UB 196,608 B less 256 reserved and 512 of tiling
    is 48,960 FP32 elements, 24,480 a half; a vnchwconv line of 191 blocks (1,528 elements) takes
    1,528 // 16 // 8 * 8 = 88 taps. 3x3x3 (27 taps, under every 2001 gate): mode 2002, 88 // 32 =
    2 C1 planes a tile of 16 rows; 128 x 64: 8 row tiles x 2 C1 chunks, the rows over 8 cores (a
    row tile each, 2 tiles). 5x5x5 (125 taps): 88 + 37, one C1 plane a tile: 8 x 4 x 2 tiles, the
    rows over 8 cores (8 tiles each)."""
    t = _plan(128, 64, 3, 9, np.float32, fz3d_rows=128)
    assert (t.mode, t.cl_unit, t.c_unit, t.cr_unit, t.counts) == (2002, 16, 2, 27, (8, 2, 1))
    assert (t.axis, t.per_core, t.cores) == (0, 1, 8)
    t = _plan(128, 64, 5, 25, np.float32, fz3d_rows=128)
    assert (t.mode, t.c_unit, t.cr_unit, t.counts) == (2002, 1, 88, (8, 4, 2))
    assert (t.axis, t.per_core, t.cores) == (0, 1, 8)
    assert _plan(32, 16, 4, 16, np.float32, fz3d_rows=32) is None     # 64 taps: mode 2001, not modelled here


def test_a_weight_tile_issues_the_kernels_moves():
    """Per tile of 16 output channels x 2 C1 planes of a 3x3x3 weight (every tap of the tile's
    depth planes whole): TIK's `_copy_data_in_1` makes one data_move per (C1 plane, depth plane), a
    burst per tap; then one UB -> UB move per row ("chnt -> ncht"), two vnchwconv around one move
    per channel, and one data_move_pad out. 40 x 24 x 3 x 3 x 3: row tiles of 16, 16 and 8 rows, C1
    chunks of 2 planes (24 channels: 16 + 8), 3 x 1 tiles on 3 cores."""
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, (2, 24, 4, 6, 6))
    w = rng.integers(-1, 2, (40, 24, 3, 3, 3))
    go = rng.integers(-2, 3, (2, 40, 2, 4, 4))
    r = _grad_weight("Ascend910B2", x, w, go, 1, 0, np.float16)
    counts = _pipe_counts(r, "TransData(gradWeight FRACTAL_Z_3D")
    t = _plan(40, 24, 3, 9, np.float32, fz3d_rows=48)
    assert (t.counts, t.cores) == ((3, 1, 1), 3)
    rows = [16, 16, 8]
    assert counts["PIPE_MTE2"] == 3 * (2 * 3)               # (2 C1 planes x 3 depth planes) a tile
    assert counts["PIPE_MTE3"] == 3
    # a row's move each, two vnchwconv and 24 channel moves a tile; a zero fill on each core (its
    # second vnchwconv reads the 8 padding channels of the second C1 plane, which no move writes)
    assert counts["PIPE_V"] == sum(rows) + 3 * (2 + 24) + 3
    np.testing.assert_array_equal(r.outputs["gradWeight"].astype(np.float64),
                                  conv_backward(go, x, w, [1] * 3, [0] * 3, [1] * 3, mask=(False, True, False))[1])


@pytest.mark.parametrize("soc", ["Ascend910B1", "Ascend910B3", "Ascend910_9392"])
def test_the_weights_moves_give_the_formulas_gradient(soc):
    """Exact (small integers): a 5x5x5 kernel whose 125 taps split 88 + 37 (tiles starting and
    ending inside a depth plane), ragged rows (Cout 33) and channels (Cin 17), strides, bfloat16,
    a kernel one tap deep. (40 channels of a 1x3x3 kernel would be mode 2003: our own pass.)"""
    rng = np.random.default_rng(11)
    for xs, ws, s, p, dt in (((1, 17, 6, 7, 7), (33, 17, 5, 5, 5), 1, 2, np.float16),
                             ((2, 20, 5, 9, 9), (18, 20, 3, 3, 3), 2, 1, ml_dtypes.bfloat16),
                             ((1, 64, 3, 5, 5), (70, 64, 1, 3, 3), 1, 1, np.float16)):   # one depth tap
        x = rng.integers(-2, 3, xs)
        w = rng.integers(-1, 2, ws)
        o = [(v + 2 * p - k) // s + 1 for v, k in zip(xs[2:], ws[2:])]
        go = rng.integers(-2, 3, (xs[0], ws[0], *o))
        r = _grad_weight(soc, x, w, go, s, p, dt)
        names = [l["name"] for l in r.report.launches]
        to = "BF16" if dt != np.float16 else "FLOAT16"
        assert names[-2:] == ["TransData(gradWeight FRACTAL_Z_3D -> NCDHW)", f"Cast(gradWeight FLOAT -> {to})"]
        np.testing.assert_array_equal(r.outputs["gradWeight"].astype(np.float64),
                                      conv_backward(go, x, w, [s] * 3, [p] * 3, [1] * 3, mask=(False, True, False))[1])


def test_aclnn_casts_a_16_bit_weight_after_its_transdata_and_only_then():
    """ops-nn's OutputPostProcess: one group, TransData then l0op::Cast to the weight's dtype (no
    kernel when it is FP32 already); groups cast first (not this path). FP32 maps (C0 8) and groups
    keep our own layout pass."""
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, (1, 16, 3, 5, 5))
    w = rng.integers(-1, 2, (16, 16, 3, 3, 3))
    go = rng.integers(-2, 3, (1, 16, 1, 3, 3))
    tail = lambda r: [l["name"].split("(")[0] + "(" + l["name"].split("(")[1][:10] for l in r.report.launches][-2:]
    assert tail(_grad_weight("Ascend910B2", x, w, go, 1, 0, np.float16)) == ["TransData(gradWeight", "Cast(gradWeight"]
    names = [l["name"] for l in _grad_weight("Ascend910B2", x, w, go, 1, 0, np.float32).report.launches]
    assert names[-1] == "TransData(gradWeight -> weight layout)"
    r = simulator.run("ConvolutionBackward", "Ascend910B2", gradOutput=go.astype(np.float16),
                      input=x.astype(np.float16), weight=w[:, :8].astype(np.float16), biasSizes=[16], stride=[1] * 3,
                      padding=[0] * 3, dilation=[1] * 3, transposed=False, outputPadding=[0] * 3, groups=2,
                      outputMask=[False, True, False], cubeMathType=0)
    assert not any(l["name"].startswith("Cast(gradWeight") for l in r.report.launches)
