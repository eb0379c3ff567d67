"""Rows of measured kernel times in the format the CANN team's benchmark rows reach us in
(shared/references/measured-kernels-calibration.yaml: id, operator, kernels_in_value, shapes, dtype,
conv_params, measured_us), read as validation figures. The held-out half of that source comes in
the same format and is checked with the reproducers the calibration half runs through, by whoever
holds it, without our seeing it:

    python benchmarks/validation.py --rows held_out.yaml

A row this cannot reproduce becomes a figure that says why (its operator, a transposed MatMul,
pads that differ between the two sides of an axis, a gradOutput whose shape the convolution does
not give); it never stops the others.
"""
from __future__ import annotations

from pathlib import Path

import yaml

# the source's dtype names, as the reproducers take them
DTYPES = {"float16": "FLOAT16", "bfloat16": "BF16", "float32": "FLOAT"}
# the fidelity issue's bounds: 25 % for a whole convolution call, 20 % for the other rows
BOUNDS = {"aclnn_conv": 0.25, "gemm": 0.2, "sigmoid": 0.2}
# what a row's gradOutput is called in the source's shapes
GRAD_KEYS = ("grad(out_backprop)", "out_backprop", "grad_output", "grad", "dy")


class RowsError(ValueError):
    """The file is not a list of rows (a row's own faults become a figure's `why`)."""


def load_rows(path: Path) -> list[dict]:
    try:
        rows = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise RowsError(f"{path}: cannot read it as YAML: {e}") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise RowsError(f"{path}: expected a YAML list of rows (id, operator, shapes, dtype, measured_us)")
    return rows


def figure(row: dict, chip: str = "Ascend910B2", chip_published: str = "910b2", source: str = "rows") -> dict:
    """The validation figure of one row: its reproduce spec, or a `why` where it has none."""
    rid = str(row.get("id", "?"))
    op = str(row.get("operator", ""))
    fig = {"id": rid.replace("-", "_"), "source": source, "chip": chip, "chip_published": chip_published,
           "unit": "us", "what": f"{op.split(' (')[0] or '?'} (row {rid})", "measured": row.get("measured_us"),
           "bound": 0.2, "quick": False, "conditions": str(row.get("kernels_in_value", "")),
           "expected_ratio": None, "_reproduction": {}}
    try:
        if not isinstance(fig["measured"], (int, float)) or fig["measured"] <= 0:
            raise _Unreproduced(f"measured_us {fig['measured']!r} is not a positive time")
        kind, what, spec = _spec(op, row)
    except _Unreproduced as e:
        fig["measured"] = fig["measured"] if isinstance(fig["measured"], (int, float)) else float("nan")
        fig["reproduce"] = {"why": str(e)}
        return fig
    fig.update(what=what, bound=BOUNDS[kind], reproduce={"kind": kind, **spec})
    return fig


class _Unreproduced(Exception):
    pass


def _spec(op: str, row: dict) -> tuple[str, str, dict]:
    shapes = row.get("shapes")
    if not isinstance(shapes, dict):
        raise _Unreproduced("the row has no shapes")
    dtype = DTYPES.get(str(row.get("dtype")))
    if dtype is None:
        raise _Unreproduced(f"dtype {row.get('dtype')!r} is none of {', '.join(DTYPES)}")
    name = op.split(" ")[0]
    if name in ("Conv3DBackpropFilter", "Conv2DBackpropFilter", "Conv1DBackpropFilter"):
        return _conv(shapes, row.get("conv_params") or {}, dtype)
    if name in ("MatMul", "BatchMatMul"):
        return _matmul(op, shapes, dtype)
    if name == "Sigmoid":
        x = _dims(shapes, "x")
        return "sigmoid", f"Sigmoid {dtype} {'x'.join(map(str, x))}", {"dtype": dtype, "shape": x}
    raise _Unreproduced(f"no reproducer for operator {op!r}")


def _dims(shapes: dict, key: str) -> list[int]:
    v = shapes.get(key)
    if not isinstance(v, list) or not v or not all(isinstance(d, int) and d > 0 for d in v):
        raise _Unreproduced(f"shapes.{key} is {v!r}, not a list of positive sizes")
    return v


def _per_axis(params: dict, prefix: str, nd: int, default: int) -> list[int]:
    """An attribute given per spatial axis (or per NC(D)HW axis, whose first two are dropped)."""
    key = next((k for k in params if k.split("(")[0] == prefix), None)
    v = params.get(key, [default] * nd) if key else [default] * nd
    if isinstance(v, int):
        v = [v] * nd
    if isinstance(v, list) and len(v) == nd + 2:
        v = v[2:]
    if not isinstance(v, list) or len(v) != nd or not all(isinstance(d, int) for d in v):
        raise _Unreproduced(f"conv_params.{key or prefix} is {v!r}, not {nd} values")
    return v


def _conv(shapes: dict, params: dict, dtype: str) -> tuple[str, str, dict]:
    """A gradWeight-only aclnnConvolutionBackward: pads as (front, back, top, bottom, left, right),
    which aclnn takes only when each axis has the same pad on both sides."""
    x, w = _dims(shapes, "x"), _dims(shapes, "filter_size")
    gkey = next((k for k in GRAD_KEYS if k in shapes), None)
    if gkey is None:
        raise _Unreproduced(f"shapes has no gradOutput (one of {', '.join(GRAD_KEYS)})")
    dy = _dims(shapes, gkey)
    nd = len(x) - 2
    if not 1 <= nd <= 3 or len(w) != len(x) or len(dy) != len(x):
        raise _Unreproduced(f"x {x}, gradOutput {dy} and filter_size {w} are not all N, C and 1-3 spatial axes")
    stride, dilation = _per_axis(params, "strides", nd, 1), _per_axis(params, "dilations", nd, 1)
    groups = params.get("groups", 1)
    pkey = next((k for k in params if k.split("(")[0] == "pads"), None)
    pads = params.get(pkey, [0] * 2 * nd) if pkey else [0] * 2 * nd
    if isinstance(pads, list) and len(pads) == nd:
        pads = [p for p in pads for _ in (0, 1)]
    if not isinstance(pads, list) or len(pads) != 2 * nd or not all(isinstance(p, int) and p >= 0 for p in pads):
        raise _Unreproduced(f"conv_params.{pkey or 'pads'} is {pads!r}, not {2 * nd} pads")
    if any(pads[2 * i] != pads[2 * i + 1] for i in range(nd)):
        raise _Unreproduced(f"pads {pads} differ between the two sides of an axis; aclnnConvolutionBackward "
                            "takes one pad per spatial axis")
    padding = pads[::2]
    if not isinstance(groups, int) or groups < 1 or x[1] % groups or w[0] % groups or w[1] * groups != x[1]:
        raise _Unreproduced(f"groups {groups!r} does not divide x's {x[1]} channels into filter_size's {w[1]}")
    want = [x[0], w[0]] + [(x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
                           for i in range(nd)]
    if dy != want:
        raise _Unreproduced(f"gradOutput {dy} is not the {want} this convolution of x {x} gives")
    what = (f"ConvolutionBackward {nd}D gradWeight {dtype} x {'x'.join(map(str, x))} "
            f"w {'x'.join(map(str, w))}")
    return "aclnn_conv", what, {"dtype": dtype, "x": x, "grad_output": dy, "weight": w, "stride": stride,
                                "padding": padding, "dilation": dilation, "groups": groups}


def _matmul(op: str, shapes: dict, dtype: str) -> tuple[str, str, dict]:
    """A @ B through aclnnMm (or aclnnMatmul with a batch), neither operand transposed."""
    text = op.lower()
    if "transpose" in text.replace("no transpose", "") or "trans_" in text:
        raise _Unreproduced(f"a transposed operand ({op!r}): the reproducer runs A[M,K] @ B[K,N]")
    if dtype not in ("FLOAT16", "BF16"):
        raise _Unreproduced(f"a {dtype} MatMul: the reproducer runs aclnnMm on 16-bit data")
    a, b = _dims(shapes, "A"), _dims(shapes, "B")
    if len(a) != len(b) or len(a) not in (2, 3) or a[:-2] != b[:-2] or a[-1] != b[-2]:
        raise _Unreproduced(f"A {a} and B {b} are not [batch,] M x K and [batch,] K x N")
    M, K, N = a[-2], a[-1], b[-1]
    if "MKN" in shapes and shapes["MKN"] != [M, K, N]:
        raise _Unreproduced(f"MKN {shapes['MKN']} is not A {a} @ B {b}")
    batch = a[0] if len(a) == 3 else 1
    spec = {"dtype": dtype, "mnk": [M, N, K], "value": "us"}
    if batch > 1:
        spec["batch"] = batch
    head = f"BatchMatMul {dtype} batch {batch}" if batch > 1 else f"MatMul {dtype}"
    return "gemm", f"{head} M {M} K {K} N {N}", spec
