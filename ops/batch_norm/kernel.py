"""The batch-norm kernel: per channel, a reduction pass over its (N, spatial) elements and an
elementwise pass, on the vector cores, each block a run of whole channels (so no core waits on
another). One kernel serves the four calls:

    forward, training     pass 1: sum x, sum x^2 -> mean, invstd (biased variance), running stats;
                          pass 2: y = x * scale + shift   (scale = w * invstd, shift = b - mean * scale)
    forward, inference    pass 2 only, from runningMean / runningVar
    backward, training    pass 1: sum dy, sum dy * x -> gradWeight, gradBias (saveMean, saveInvstd);
                          pass 2: gradInput = A dy + B x + C
    backward, inference   the same from runningMean / runningVar (gradInput = w * invstd * dy)

Everything is computed in FP32 (16-bit data cast on the way in and out), as CANN's batch-norm
kernels do. A per-channel scalar cannot be an instruction's immediate here (it is data), so the
statistics of 16 channels live as a vector and reach each element as a broadcast tile: a [64][16]
block of rows made by doubling copies, transposed to [16][64], then one row doubled to the tile.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.kernel import (BUFFER_NUM, GM_ADDR, Add, Adds, Cast, Copy, DataCopy, DataCopyExtParams,
                              DataCopyPad, Duplicate, GetBlockIdx, GlobalTensor, HardEvent, Loop, Maxs, Mul,
                              Muls, Reciprocal, RoundMode, SetFlag, Sqrt, Sub, TBuf, TPipe, TPosition, TQue,
                              WaitFlag, float32)
from simulator.kernel.vector import Broadcast, Transpose, TransposeParamsExt, TransposeType
from simulator.program import KernelLaunch

CH = 16            # channels whose statistics travel together (one transpose's rows)
ROWS = 64          # the broadcast block's width, before a row is doubled to the tile
F32 = np.dtype(np.float32)


@dataclass(frozen=True)
class BatchNormJob:
    """What every block of one launch knows: the call's shape and mode, the tile, and per block
    its channel range."""
    N: int
    C: int
    S: int                    # elements per (n, c) row: the spatial size
    mode: str                 # forward-train | forward-infer | backward-train | backward-infer
    phase: str                # "reduce" (pass 1: per-channel sums to the workspace), "update" (the
                              # sums from the workspace, pass 2), or "both" in one launch
    eps: float
    momentum: float
    x_dtype: np.dtype         # input, output, gradOutput, gradInput (the 1-D tensors keep their own)
    tile: int                 # elements per UB tile (a power of two >= ROWS)
    rows: int                 # (n, c) rows a tile holds: several when a row is short, at `pitch`
    pitch: int                # UB elements a row takes when a tile holds several (32-B aligned)
    across: bool              # BNInfer's pass 2 takes CH channels of one image a tile (short rows, fewer tiles so)
    ranges: tuple             # per block: (first channel, channel count)
    has: frozenset            # the tensors this launch reads or writes (weight, bias, sums, ...)

    @property
    def backward(self) -> bool:
        return self.mode.startswith("backward")

    @property
    def training(self) -> bool:
        return self.mode.endswith("train")



# (floats) the broadcast rows and a block per coefficient, sums, statistics, one raw vector
SMALL = 4 * CH * ROWS + 3 * CH * CH + 13 * CH


def streams(backward: bool) -> int:
    """Tensors a tile loads: x, or gradOutput and x."""
    return 2 if backward else 1


def fp32_tiles(backward: bool, isz: int) -> int:
    """FP32 tiles: a cast of each loaded tensor (16-bit data), then the two sums of pass 1 or the
    broadcast coefficients of pass 2 (two forward, three backward)."""
    return (streams(backward) if isz != 4 else 0) + (3 if backward else 2)


def ub_need(tile: int, isz: int, backward: bool) -> int:
    """UB bytes for a tile of `tile` elements: the input queue (a slot holds each loaded tensor),
    the output queue, the FP32 tiles, and the small vectors."""
    return (BUFFER_NUM * streams(backward) * tile * isz + BUFFER_NUM * tile * isz
            + fp32_tiles(backward, isz) * tile * 4 + SMALL * 4)


class BatchNormKernel:
    STATS = ("sum", "sumsq", "mean", "invstd", "w", "b", "a", "bb", "c", "t0", "t1", "t2")

    def __init__(self, job: BatchNormJob, gm: dict):
        self.job = job
        self.g = {}
        for name, (addr, dt) in gm.items():
            t = GlobalTensor(dt)
            t.SetGlobalBuffer(addr)
            self.g[name] = t
        T, isz = job.tile, job.x_dtype.itemsize
        self.pipe = TPipe()
        self.in_que = TQue(TPosition.VECIN, BUFFER_NUM)
        self.pipe.InitBuffer(self.in_que, BUFFER_NUM, streams(job.backward) * T * isz)
        self.out_que = TQue(TPosition.VECOUT, BUFFER_NUM)
        self.pipe.InitBuffer(self.out_que, BUFFER_NUM, T * isz)
        calc = TBuf(TPosition.VECCALC)
        ntiles = fp32_tiles(job.backward, isz)
        self.pipe.InitBuffer(calc, (ntiles * T + SMALL) * 4)
        f = calc.Get(float32)
        self.t = [f[i * T] for i in range(ntiles)]
        self.cast_tiles = self.t[:ntiles - (3 if job.backward else 2)]   # one a loaded tensor (16-bit data)
        self.work = self.t[len(self.cast_tiles):]                          # sums, or coefficients
        at = ntiles * T

        def take(n):
            nonlocal at
            at += n
            return f[at - n]
        self.rows = take(CH * ROWS)                                    # [ROWS][CH]
        self.blocks = {k: take(CH * ROWS) for k in ("a", "bb", "c")}    # [CH][ROWS] per coefficient
        self.acc, self.acc2, self.accT = take(CH * CH), take(CH * CH), take(CH * CH)   # per channel, CH partials
        stats = take(len(self.STATS) * CH)          # the group's [CH] FP32 vectors, 32-B aligned slots
        self.v = {name: stats[i * CH] for i, name in enumerate(self.STATS)}
        self.raw = take(CH).ReinterpretCast(np.uint8)
        self.ev_mte2_v = self.pipe.AllocEventID(HardEvent.MTE2_V)
        self.ev_v_mte3 = self.pipe.AllocEventID(HardEvent.V_MTE3)
        self.ev_mte3_v = self.pipe.AllocEventID(HardEvent.MTE3_V)
        self.ev_v_mte2 = self.pipe.AllocEventID(HardEvent.V_MTE2)

    # ---- small vectors: load, store ---------------------------------------------------------------
    def load_vec(self, dst, name: str, c0: int, n: int, fill: float) -> None:
        """dst[:CH] = tensor `name`[c0 : c0 + n] as FP32 (fill where the call has no such tensor
        and past n)."""
        Duplicate(dst, fill, CH)
        if name not in self.job.has:
            return
        g = self.g[name]
        raw = self.raw.ReinterpretCast(g.dtype)
        SetFlag(HardEvent.V_MTE2, self.ev_v_mte2)
        WaitFlag(HardEvent.V_MTE2, self.ev_v_mte2)
        DataCopyPad(raw, g[c0], DataCopyExtParams(1, n * g.dtype.itemsize, 0, 0))
        SetFlag(HardEvent.MTE2_V, self.ev_mte2_v)
        WaitFlag(HardEvent.MTE2_V, self.ev_mte2_v)
        if g.dtype != F32:
            Cast(dst, raw, RoundMode.CAST_NONE, n)
        else:
            Copy(dst, raw, n)

    def store_vec(self, name: str, src, c0: int, n: int) -> None:
        if name not in self.job.has:
            return
        g = self.g[name]
        out = self.raw.ReinterpretCast(g.dtype)
        if g.dtype != F32:
            Cast(out, src, RoundMode.CAST_RINT, CH)
        else:
            Copy(out, src, CH)
        SetFlag(HardEvent.V_MTE3, self.ev_v_mte3)
        WaitFlag(HardEvent.V_MTE3, self.ev_v_mte3)
        DataCopyPad(g[c0], out, DataCopyExtParams(1, n * g.dtype.itemsize, 0, 0))
        SetFlag(HardEvent.MTE3_V, self.ev_mte3_v)
        WaitFlag(HardEvent.MTE3_V, self.ev_mte3_v)

    # ---- the passes over one channel ----------------------------------------------------------------
    def _tiles(self):
        """(first n, rows, first position, positions) per tile of one channel: a tile of several
        short rows (`rows` of them, each at `pitch`), or a piece of one long row."""
        job, T = self.job, self.job.tile
        if job.rows > 1:
            count = -(-job.N // job.rows)
            for i in Loop(count, key=lambda i: i == count - 1, period=BUFFER_NUM):
                yield i * job.rows, min(job.rows, job.N - i * job.rows), 0, job.S
            return
        per_row = -(-job.S // T)
        for i in Loop(job.N * per_row, key=lambda i: (i % per_row) == per_row - 1, period=BUFFER_NUM):
            n, k = divmod(i, per_row)
            yield n, 1, k * T, min(T, job.S - k * T)

    def _load(self, names, c: int, n: int, nrows: int, s0: int, ln: int, row_step: int | None = None):
        """The tiles of tensors `names` at rows (n .. n + nrows, c), positions [s0, s0 + ln): (the
        queue's slot, to free after use, an FP32 tile per name: the slot itself for FP32 data, a
        cast otherwise, and the elements the tile's instructions take: the rows at their pitch.
        Bytes the copy leaves between rows or in a row's last 32-B block are zeroed first, so the
        sums may take them. Rows are row_step elements apart in GM: the next image's (C x S, the
        default) or the next channel's (S)."""
        job, T = self.job, self.job.tile
        isz = job.x_dtype.itemsize
        per_block = 32 // isz
        count = nrows * job.pitch if nrows > 1 else -(-ln // per_block) * per_block
        local = self.in_que.AllocTensor(job.x_dtype)
        if (nrows > 1 and ln < job.pitch) or (ln * isz) % 32:
            Duplicate(local.ReinterpretCast(np.uint8).ReinterpretCast(np.float32), 0.0, len(names) * T * isz // 4)
            SetFlag(HardEvent.V_MTE2, self.ev_v_mte2)
            WaitFlag(HardEvent.V_MTE2, self.ev_v_mte2)
        off = (n * job.C + c) * job.S + s0
        step = job.C * job.S if row_step is None else row_step
        for i, name in enumerate(names):
            if nrows > 1:
                DataCopyPad(local[i * T], self.g[name][off], DataCopyExtParams(nrows, ln * isz, (step - ln) * isz, 0))
            elif (ln * isz) % 32 == 0:
                DataCopy(local[i * T], self.g[name][off], ln)
            else:
                DataCopyPad(local[i * T], self.g[name][off], DataCopyExtParams(1, ln * isz, 0, 0))
        self.in_que.EnQue(local)
        local = self.in_que.DeQue(job.x_dtype)
        if job.x_dtype == F32:
            return local, [local[i * T] for i in range(len(names))], count
        for i in range(len(names)):
            Cast(self.cast_tiles[i], local[i * T], RoundMode.CAST_NONE, count)
        return local, self.cast_tiles[:len(names)], count

    def _store(self, name: str, src, count: int, c: int, n: int, nrows: int, s0: int, ln: int,
               row_step: int | None = None) -> None:
        job = self.job
        isz = job.x_dtype.itemsize
        y = self.out_que.AllocTensor(job.x_dtype)
        if job.x_dtype != F32:
            Cast(y, src, RoundMode.CAST_RINT, count)
        else:
            Copy(y, src, count)
        self.out_que.EnQue(y)
        y = self.out_que.DeQue(job.x_dtype)
        off = (n * job.C + c) * job.S + s0
        step = job.C * job.S if row_step is None else row_step
        if nrows > 1:
            DataCopyPad(self.g[name][off], y, DataCopyExtParams(nrows, ln * isz, 0, (step - ln) * isz))
        elif (ln * isz) % 32 == 0:
            DataCopy(self.g[name][off], y, ln)
        else:
            DataCopyPad(self.g[name][off], y, DataCopyExtParams(1, ln * isz, 0, 0))
        self.out_que.FreeTensor(y)

    def _fold(self, acc, dst) -> None:
        """dst[:CH] = acc[:T] summed in CH lanes (halving adds)."""
        n = self.job.tile
        while n > CH:
            n //= 2
            Add(acc, acc, acc[n], n)
        Copy(dst, acc, CH)

    def reduce_channel(self, j: int, c: int) -> None:
        """Pass 1 over channel c (slot j): forward sum x, sum x^2; backward sum dy, sum dy * x."""
        T = self.job.tile
        s, q = self.work[0], self.work[1]
        Duplicate(s, 0.0, T)
        Duplicate(q, 0.0, T)
        names = ("gradOutput", "input") if self.job.backward else ("input",)
        for n, nrows, s0, ln in self._tiles():
            local, tiles, count = self._load(names, c, n, nrows, s0, ln)
            a = tiles[0]
            b = tiles[1] if self.job.backward else tiles[0]
            Add(s, s, a, count)
            Mul(b, a, b, count)
            Add(q, q, b, count)
            self.in_que.FreeTensor(local)
        self._fold(s, self.acc[j * CH])
        self._fold(q, self.acc2[j * CH])

    def _channel_totals(self, acc, dst) -> None:
        """dst[j] = sum over acc's row j (CH partial sums each): a transpose, then row folds."""
        Transpose(self.accT, acc, None, TransposeParamsExt(1, CH, CH, 1, TransposeType.TRANSPOSE_NCHW2NHWC))
        rows = CH
        while rows > 1:
            rows //= 2
            Add(self.accT, self.accT, self.accT[rows * CH], rows * CH)
        Copy(dst, self.accT, CH)

    def spread(self, name: str) -> None:
        """The group's coefficient `name` as [CH][ROWS], row j channel j's value: [ROWS][CH] rows
        made by doubling copies, transposed."""
        Copy(self.rows, self.v[name], CH)
        filled = 1
        while filled < ROWS:
            Copy(self.rows[filled * CH], self.rows, filled * CH)
            filled *= 2
        Transpose(self.blocks[name], self.rows, None,
                  TransposeParamsExt(1, CH, ROWS, 1, TransposeType.TRANSPOSE_NHWC2NCHW))

    def broadcast(self, name: str, j: int, dst) -> None:
        """dst[:T] = channel j's coefficient `name`: its row of the spread block, doubled."""
        Copy(dst, self.blocks[name][j * ROWS], ROWS)
        filled = ROWS
        while filled < self.job.tile:
            Copy(dst[filled], dst, filled)
            filled *= 2

    # ---- a group of up to CH channels --------------------------------------------------------------
    def statistics(self, c0: int, nch: int) -> None:
        """The group's mean and invstd (v["mean"], v["invstd"]): of the batch (training, from pass
        1's sums; forward) or as the call gives them (saveMean / saveInvstd in a training
        backward; runningMean / runningVar in inference)."""
        job, v = self.job, self.v
        M = job.N * job.S
        if job.mode == "forward-train":
            Muls(v["mean"], v["sum"], 1.0 / M, CH)
            Muls(v["t0"], v["sumsq"], 1.0 / M, CH)
            Mul(v["t1"], v["mean"], v["mean"], CH)
            Sub(v["t0"], v["t0"], v["t1"], CH)             # the biased variance
            Maxs(v["t0"], v["t0"], 0.0, CH)
            Adds(v["t1"], v["t0"], job.eps, CH)
            Sqrt(v["t1"], v["t1"], CH)
            Reciprocal(v["invstd"], v["t1"], CH)
            self.running_update(c0, nch)
            self.store_vec("saveMean", v["mean"], c0, nch)
            self.store_vec("saveInvstd", v["t0"], c0, nch)       # CANN's A2 / 910 / 310P: the variance
        elif job.mode == "backward-train":                      # saveInvstd read as the forward wrote it
            self.load_vec(v["mean"], "saveMean", c0, nch, 0.0)
            self.load_vec(v["t1"], "saveInvstd", c0, nch, 1.0)
            Adds(v["t1"], v["t1"], job.eps, CH)
            Sqrt(v["t1"], v["t1"], CH)
            Reciprocal(v["invstd"], v["t1"], CH)
        else:
            self.load_vec(v["mean"], "runningMean", c0, nch, 0.0)
            self.load_vec(v["t1"], "runningVar", c0, nch, 1.0)
            Adds(v["t1"], v["t1"], job.eps, CH)
            Sqrt(v["t1"], v["t1"], CH)
            Reciprocal(v["invstd"], v["t1"], CH)

    def running_update(self, c0: int, nch: int) -> None:
        """runningMean = (1 - m) runningMean + m mean; runningVar likewise with the unbiased
        variance (v["t0"] holds the biased one)."""
        job, v = self.job, self.v
        M, m = job.N * job.S, job.momentum
        if "runningMean" in job.has:
            self.load_vec(v["t1"], "runningMean", c0, nch, 0.0)
            Muls(v["t1"], v["t1"], 1.0 - m, CH)
            Muls(v["t2"], v["mean"], m, CH)
            Add(v["t1"], v["t1"], v["t2"], CH)
            self.store_vec("runningMean", v["t1"], c0, nch)
        if "runningVar" in job.has:
            self.load_vec(v["t1"], "runningVar", c0, nch, 0.0)
            Muls(v["t1"], v["t1"], 1.0 - m, CH)
            Muls(v["t2"], v["t0"], m * M / max(M - 1, 1), CH)
            Add(v["t1"], v["t1"], v["t2"], CH)
            self.store_vec("runningVar", v["t1"], c0, nch)

    def coefficients(self, c0: int, nch: int) -> None:
        """Per channel: forward y = a x + bb; backward gradInput = a dy + bb x + c, and
        gradWeight / gradBias from pass 1's sums."""
        job, v = self.job, self.v
        M = job.N * job.S
        self.load_vec(v["w"], "weight", c0, nch, 1.0)
        Mul(v["a"], v["w"], v["invstd"], CH)                   # w * invstd
        if not job.backward:
            self.load_vec(v["b"], "bias", c0, nch, 0.0)
            Mul(v["t1"], v["mean"], v["a"], CH)
            Sub(v["bb"], v["b"], v["t1"], CH)                  # b - mean * w * invstd
            return
        # v["sum"] = sum dy, v["sumsq"] = sum dy * x
        Mul(v["t0"], v["mean"], v["sum"], CH)
        Sub(v["t0"], v["sumsq"], v["t0"], CH)
        Mul(v["t0"], v["t0"], v["invstd"], CH)                 # sum dy * xhat: gradWeight
        if job.phase != "update":
            self.store_vec("gradWeight", v["t0"], c0, nch)
            self.store_vec("gradBias", v["sum"], c0, nch)
        if not job.training:                                   # gradInput = w * invstd * dy
            Duplicate(v["bb"], 0.0, CH)
            Duplicate(v["c"], 0.0, CH)
            return
        Mul(v["t1"], v["a"], v["invstd"], CH)
        Mul(v["t1"], v["t1"], v["t0"], CH)
        Muls(v["bb"], v["t1"], -1.0 / M, CH)                   # -w invstd^2 sum(dy xhat) / M
        Mul(v["t2"], v["a"], v["sum"], CH)
        Muls(v["t2"], v["t2"], -1.0 / M, CH)                   # -w invstd sum(dy) / M
        Mul(v["t1"], v["bb"], v["mean"], CH)
        Sub(v["c"], v["t2"], v["t1"], CH)

    def apply_channel(self, j: int, c: int) -> None:
        """Pass 2 over channel c (slot j): y = a x + bb, or gradInput = a dy + bb x + c."""
        ta, tb = self.work[0], self.work[1]
        tc = self.work[2] if self.job.backward else None
        self.broadcast("a", j, ta)
        self.broadcast("bb", j, tb)
        if self.job.backward:
            self.broadcast("c", j, tc)
            for n, nrows, s0, ln in self._tiles():
                local, (dy, x), count = self._load(("gradOutput", "input"), c, n, nrows, s0, ln)
                Mul(dy, dy, ta, count)
                Mul(x, x, tb, count)
                Add(dy, dy, x, count)
                Add(dy, dy, tc, count)
                self._store("gradInput", dy, count, c, n, nrows, s0, ln)
                self.in_que.FreeTensor(local)
            return
        for n, nrows, s0, ln in self._tiles():
            local, (x,), count = self._load(("input",), c, n, nrows, s0, ln)
            Mul(x, x, ta, count)
            Add(x, x, tb, count)
            self._store("output", x, count, c, n, nrows, s0, ln)
            self.in_que.FreeTensor(local)

    def apply_across(self, c0: int, nch: int) -> None:
        """Pass 2 of the forward over the group's nch channels, a tile per image: the group's
        rows (consecutive in GM) at their pitch, each row's coefficients broadcast from the
        group's vectors once."""
        job = self.job
        ta, tb = self.work[0], self.work[1]
        Broadcast(ta, self.v["a"], (CH, job.pitch), (CH, 1))
        Broadcast(tb, self.v["bb"], (CH, job.pitch), (CH, 1))
        for n in Loop(job.N, key=lambda i: i == job.N - 1, period=BUFFER_NUM):
            local, (x,), count = self._load(("input",), c0, n, nch, 0, job.S, row_step=job.S)
            Mul(x, x, ta, count)
            Add(x, x, tb, count)
            self._store("output", x, count, c0, n, nch, 0, job.S, row_step=job.S)
            self.in_que.FreeTensor(local)

    def process(self) -> None:
        job, v = self.job, self.v
        first, count = job.ranges[GetBlockIdx()]
        reduces = job.training or job.backward
        for c0 in range(first, first + count, CH):
            nch = min(CH, first + count - c0)
            if reduces and job.phase != "update":
                for j in range(nch):
                    self.reduce_channel(j, c0 + j)
                if nch < CH:
                    Duplicate(self.acc[nch * CH], 0.0, (CH - nch) * CH)
                    Duplicate(self.acc2[nch * CH], 0.0, (CH - nch) * CH)
                self._channel_totals(self.acc, v["sum"])
                self._channel_totals(self.acc2, v["sumsq"])
                if job.phase == "reduce":
                    self.store_vec("sum", v["sum"], c0, nch)
                    self.store_vec("sumsq", v["sumsq"], c0, nch)
                    if not job.backward:         # BNTrainingReduce: the sums only
                        continue
            elif reduces:
                self.load_vec(v["sum"], "sum", c0, nch, 0.0)
                self.load_vec(v["sumsq"], "sumsq", c0, nch, 0.0)
            self.statistics(c0, nch)
            self.coefficients(c0, nch)
            if job.phase != "reduce" and job.across:
                self.apply_across(c0, nch)
            elif job.phase != "reduce" and (not job.backward or "gradInput" in job.has):
                for name in ("a", "bb", "c") if job.backward else ("a", "bb"):
                    self.spread(name)
                for j in range(nch):
                    self.apply_channel(j, c0 + j)


def batch_norm_body(gm: dict, job: BatchNormJob):
    BatchNormKernel(job, gm).process()


def _fill_body(dst: GM_ADDR, count: int, dtype, value: float):
    """dst[:count] = value, one block (the small fills around an empty batch norm)."""
    g = GlobalTensor(dtype)
    g.SetGlobalBuffer(dst)
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    n = -(-count * dtype.itemsize // 32) * 32 // dtype.itemsize
    pipe.InitBuffer(buf, n * dtype.itemsize)
    t = buf.Get(dtype)
    Duplicate(t, value, n)
    ev = pipe.AllocEventID(HardEvent.V_MTE3)
    SetFlag(HardEvent.V_MTE3, ev)
    WaitFlag(HardEvent.V_MTE3, ev)
    DataCopyPad(g, t, DataCopyExtParams(1, count * dtype.itemsize, 0, 0))


def fill_launch(label: str, dst: GM_ADDR, count: int, dtype, value: float) -> KernelLaunch:
    return KernelLaunch(label, _fill_body, 1, "vector", (dst, count, np.dtype(dtype), value))
