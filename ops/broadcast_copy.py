"""The copy of a broadcast view (stride-0 dimensions: an operand expanded to an output's shape, as
CANN's BroadcastTo kernel makes it) into a dense buffer: each UB tile loads its source values
once, the vector unit repeats them (Broadcast), MTE3 writes the tile. The generic run copy would
move one burst (and plan one Python object) per output element of a column broadcast along rows.

The view's dimensions, merged, end in a unit of `a` rows by `b` columns: a column of `a` source
values repeated along the rows (a trailing stride-0 dimension), or a row of `b` repeated `a`
times (a stride-0 dimension before a unit-stride one, `a` = 1 when there is none); the
dimensions before the unit repeat it, each at its own source stride (0 when broadcast). Tiles
are whole rows of a unit, or a piece of one row when a row does not fit, so each is one
contiguous run of the dense output. A unit smaller than a tile shares it with the next units of
its innermost outer dimension (one load of their values at that dimension's stride, a Broadcast
each, one store), so a short unit does not pay a load and a store of its own. Tiles are
numbered, not listed: a block's tiles are a range."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.arith import align_up, ceil_div
from simulator.kernel import (BUFFER_NUM, Broadcast, DataCopyExtParams, DataCopyPad, GetBlockIdx, GlobalTensor, Loop,
                              TPipe, TPosition, TQue)

_SAME_SIZE_INT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
MIN_PACKED_UNIT = 1024     # bytes: smaller units share a tile only at one Broadcast instruction each per KiB


@dataclass(frozen=True)
class BroadcastPlan:
    outer: tuple          # (size, source stride) of each dimension before the unit, outermost first
    a: int                # unit rows
    b: int                # unit columns
    column: bool          # True: a source values, one a row; False: b source values, one a column
    offset: int           # the view's storage offset (elements)
    rows: int             # unit rows a tile (whole rows); 0: tiles are pieces of one row
    cols: int             # columns a tile when rows is 0
    isz: int
    tiles: int            # in all
    per_block: int
    out_bytes: int        # a UB output buffer
    pack: int = 1         # whole units a tile, of the innermost outer dimension (1: a unit or a part of one)

    @property
    def values(self) -> int:
        """Source values a unit."""
        return self.a if self.column else self.b

    def packed(self, i: int) -> tuple[int, int, int]:
        """Tile i of a packed plan: (its first unit's source offset, dense offset, units)."""
        inner, step = self.outer[-1]
        line, piece = divmod(i, ceil_div(inner, self.pack))
        first = line * inner + piece * self.pack
        return self.tile(first * self.tiles_per_unit)[0], first * self.a * self.b, min(self.pack, inner - piece * self.pack)

    @property
    def block_dim(self) -> int:
        return ceil_div(self.tiles, self.per_block)

    @property
    def tiles_per_unit(self) -> int:
        return ceil_div(self.a, self.rows) if self.rows else self.a * ceil_div(self.b, self.cols)

    def tile(self, i: int) -> tuple[int, int, int, int]:
        """Tile i: (source offset, source values, dense offset, output rows x columns as (r, c))."""
        n_unit, k = divmod(i, self.tiles_per_unit)
        src, u = self.offset, n_unit
        for size, stride in reversed(self.outer):
            u, idx = divmod(u, size)
            src += idx * stride
        unit = n_unit * self.a * self.b
        if self.rows:
            r0 = k * self.rows
            r = min(self.rows, self.a - r0)
            if self.column:
                return src + r0, r, unit + r0 * self.b, (r, self.b)
            return src, self.b, unit + r0 * self.b, (r, self.b)
        per_row = ceil_div(self.b, self.cols)
        row, piece = divmod(k, per_row)
        c0 = piece * self.cols
        c = min(self.cols, self.b - c0)
        if self.column:
            return src + row, 1, unit + row * self.b + c0, (1, c)
        return src + c0, c, unit + row * self.b + c0, (1, c)


def plan_broadcast_copy(dims, offset: int, isz: int, cores: int, ub: int) -> BroadcastPlan | None:
    """The plan for a view given as its merged dims ([size, stride], size-1 dims dropped, runs of
    contiguous or of broadcast dims merged: common._merge_dims); None when none is stride-0, or
    when the unit's source values are not consecutive in storage (the run copy takes those)."""
    if not dims or not any(s == 0 for _, s in dims) or any(s < 0 for _, s in dims) or isz not in _SAME_SIZE_INT:
        return None
    if dims[-1][1] == 0:                      # a column: one source value a row
        column, b = True, dims[-1][0]
        a, step = (dims[-2][0], dims[-2][1]) if len(dims) > 1 else (1, 1)
        outer = dims[:-2]
    else:
        column, b, step = False, dims[-1][0], dims[-1][1]
        a = dims[-2][0] if len(dims) > 1 and dims[-2][1] == 0 else 1
        outer = dims[:-2] if a > 1 else dims[:-1]
    if step != 1:
        return None
    # two buffers each of input and output; an input never needs more than its output (+ alignment)
    out_bytes = (ub // (2 * BUFFER_NUM) - 32) // 32 * 32
    units = int(np.prod([d for d, _ in outer], dtype=np.int64))
    share = ceil_div(units * a * b, cores)            # a core's share of the output, in elements
    if b * isz <= out_bytes:
        rows, cols = max(1, min(a, out_bytes // (b * isz), ceil_div(share, b))), b
        tiles = units * ceil_div(a, rows)
    else:
        rows, cols = 0, out_bytes // isz
        tiles = units * a * ceil_div(b, cols)
    pack, unit_bytes = 1, a * b * isz
    if rows == a and outer and unit_bytes % 32 == 0 and unit_bytes >= MIN_PACKED_UNIT:
        inner, stride = outer[-1]
        if stride == 0 or stride >= (a if column else b):        # the units' values do not overlap
            pack = max(1, min(out_bytes // unit_bytes, ceil_div(share, a * b), inner))
        if pack > 1:
            tiles = units // inner * ceil_div(inner, pack)
    per_block = ceil_div(tiles, min(cores, tiles))
    return BroadcastPlan(tuple((d, s) for d, s in outer), a, b, column, offset, rows, cols, isz, tiles, per_block,
                         out_bytes, pack)


def broadcast_copy_body(src_addr, dense_addr, plan: BroadcastPlan):
    """Per tile: MTE2 brings the source values, V repeats them into the output tile (Broadcast),
    MTE3 writes it: double-buffered queues."""
    dt = _SAME_SIZE_INT[plan.isz]
    src, dst = GlobalTensor(dt), GlobalTensor(dt)
    src.SetGlobalBuffer(src_addr.cast(dt))
    dst.SetGlobalBuffer(dense_addr.cast(dt))
    pipe = TPipe()
    in_que, out_que = TQue(TPosition.VECIN, BUFFER_NUM), TQue(TPosition.VECOUT, BUFFER_NUM)
    pipe.InitBuffer(in_que, BUFFER_NUM, plan.out_bytes + 32)
    pipe.InitBuffer(out_que, BUFFER_NUM, plan.out_bytes)
    first = GetBlockIdx() * plan.per_block
    last = min(plan.tiles, first + plan.per_block)

    def alike(i):       # what a tile's cost depends on: its shape and both addresses' 32-B phases
        if plan.pack > 1:
            s, d, k = plan.packed(i)
            return i - first < BUFFER_NUM, k, s * plan.isz % 32, d * plan.isz % 32
        s, n, d, rc = plan.tile(i)
        return i - first < BUFFER_NUM, rc, n, s * plan.isz % 32, d * plan.isz % 32

    for i in Loop(range(first, last), key=alike, period=BUFFER_NUM):
        values = in_que.AllocTensor(dt)
        if plan.pack > 1:
            s, d, k = plan.packed(i)
            stride = plan.outer[-1][1]
            loads, n = (k if stride else 1), plan.values
            DataCopyPad(values, src[s], DataCopyExtParams(loads, n * plan.isz, (stride - n) * plan.isz if loads > 1
                                                          else 0, 0))
            in_que.EnQue(values)
            values = in_que.DeQue(dt)
            out = out_que.AllocTensor(dt)
            slot = align_up(n * plan.isz, 32) // plan.isz
            for j in range(k):
                Broadcast(out[j * plan.a * plan.b], values[slot * j if stride else 0], (plan.a, plan.b),
                          (plan.a, 1) if plan.column else (1, plan.b))
            r, c = k * plan.a, plan.b
        else:
            s, n, d, (r, c) = plan.tile(i)
            DataCopyPad(values, src[s], DataCopyExtParams(1, n * plan.isz, 0, 0))
            in_que.EnQue(values)
            values = in_que.DeQue(dt)
            out = out_que.AllocTensor(dt)
            Broadcast(out, values, (r, c), (r, 1) if plan.column else (1, c))
        in_que.FreeTensor(values)
        out_que.EnQue(out)
        out = out_que.DeQue(dt)
        DataCopyPad(dst[d], out, DataCopyExtParams(1, r * c * plan.isz, 0, 0))
        out_que.FreeTensor(out)
