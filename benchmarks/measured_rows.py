"""Rows of measured kernel times in the format the CANN team's benchmark rows reach us in
(shared/references/measured-kernels-calibration.yaml: id, operator, kernels_in_value, shapes, dtype,
conv_params, measured_us), read as validation figures. The held-out half of that source comes in
the same format and is checked with the reproducers the calibration half runs through, by whoever
holds it, without our seeing it:

    python benchmarks/validation.py --rows held_out.yaml

A row is simulated only as the call it describes. One this cannot reproduce becomes a figure that
says why (another operator, a transposed MatMul, gradients other than gradWeight, a key or a pad
order it does not know, pads that differ between the two sides of an axis, a gradOutput whose
shape the convolution does not give, a size that is not a positive whole number); it never stops
the others.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path


# the source's dtype names, as the reproducers take them
DTYPES = {"float16": "FLOAT16", "bfloat16": "BF16", "float32": "FLOAT"}
# the fidelity issue's bounds: 25 % for a whole convolution call, 20 % for the other rows
BOUNDS = {"aclnn_conv": 0.25, "gemm": 0.2, "sigmoid": 0.2}
ROW_KEYS = {"id", "operator", "kernels_in_value", "shapes", "dtype", "conv_params", "measured_us"}
# what a row's gradOutput is called in the source's shapes
GRAD_KEYS = ("grad(out_backprop)", "out_backprop", "grad_output", "grad", "dy")
# the pad orders the source writes in its key, by spatial rank: each axis's two sides in turn
PAD_ORDERS = {3: "(front,back,top,bottom,left,right)", 2: "(top,bottom,left,right)", 1: "(left,right)"}
CONV_PARAMS = {"strides", "dilations", "groups", "pads"}


class RowsError(ValueError):
    """The file is not a YAML list (a row's own faults become its figure's `why`)."""


def load_rows(path: Path) -> list:
    from simulator.inputs import parse_yaml, read_text      # sized, depth-limited, alias bombs refused
    rows = parse_yaml(read_text(path, "rows file", RowsError), str(path), RowsError)
    if not isinstance(rows, list):
        raise RowsError(f"{path}: expected a YAML list of rows (id, operator, shapes, dtype, measured_us)")
    return rows


def figure(row, chip: str = "Ascend910B2", chip_published: str = "910b2", source: str = "rows") -> dict:
    """The validation figure of one row: its reproduce spec, or a `why` where it has none."""
    row = row if isinstance(row, dict) else {"operator": "", "_not_a_mapping": row}
    rid = str(row.get("id", "?"))
    op = str(row.get("operator", ""))
    measured = row.get("measured_us")
    fig = {"id": rid.replace("-", "_"), "source": source, "chip": chip, "chip_published": chip_published,
           "unit": "us", "what": f"{op.split(' (')[0] or '?'} (row {rid})", "measured": float("nan"),
           "bound": 0.2, "quick": False, "conditions": str(row.get("kernels_in_value", "")),
           "expected_ratio": None, "_reproduction": {}}
    try:
        if "_not_a_mapping" in row:
            raise _Unreproduced(f"the row is {row['_not_a_mapping']!r}, not a mapping of its fields")
        if not _number(measured) or measured <= 0:
            raise _Unreproduced(f"measured_us {measured!r} is not a positive time")
        fig["measured"] = float(measured)
        unknown = sorted(map(str, set(row) - ROW_KEYS))
        if unknown:
            raise _Unreproduced(f"unknown key(s) {', '.join(unknown)}: the reproducer would leave them out")
        kind, what, spec = _spec(op, row)
    except _Unreproduced as e:
        fig["reproduce"] = {"why": str(e)}
        return fig
    fig.update(what=what, bound=BOUNDS[kind], reproduce={"kind": kind, **spec})
    return fig


def launches_differ(fig: dict, launches: list[str]) -> str:
    """'' when the kernels the row lists (`kernels_in_value`, e.g. "TransData×3 + MemSet×1 +
    Conv3DBackpropFilter×1") are the ones our call launches, by kind and count (aclnn's Cast of a
    3D gradWeight apart, which the rows' path does not make); else what differs."""
    listed = Counter()
    for part in fig["conditions"].split("+"):
        m = re.fullmatch(r"\s*(\w+)\s*[×x]\s*(\d+)\s*", part)
        if not m:
            return ""                           # no kernel list to hold ours to
        listed[m.group(1)] += int(m.group(2))
    cube = next((k for k in listed if k not in ("TransData", "MemSet")), None)
    ours = Counter()
    for name in launches:
        head = name.split("(")[0].split(":")[0].strip()
        if head == "Cast" and fig["reproduce"].get("kind") == "aclnn_conv":
            continue
        ours[cube if head in ("Cube", "MatMul", "Sigmoid") and cube else head] += 1
    if ours == listed:
        return ""
    fmt = lambda c: " + ".join(f"{k}×{v}" for k, v in sorted(c.items()))  # noqa: E731
    return f"the row lists {fmt(listed)}; ours launches {fmt(ours)}"


class _Unreproduced(Exception):
    pass


def _number(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _spec(op: str, row: dict) -> tuple[str, str, dict]:
    shapes = row.get("shapes")
    if not isinstance(shapes, dict):
        raise _Unreproduced("the row has no shapes")
    dtype = DTYPES.get(str(row.get("dtype")))
    if dtype is None:
        raise _Unreproduced(f"dtype {row.get('dtype')!r} is none of {', '.join(DTYPES)}")
    name = op.split(" ")[0]
    if name in ("Conv3DBackpropFilter", "Conv2DBackpropFilter", "Conv1DBackpropFilter"):
        if re.search(r"grad_input|grad_bias|bias", op.lower()):
            raise _Unreproduced(f"{op!r}: the reproducer computes gradWeight alone")
        if "conv_params" in row and not isinstance(row["conv_params"], dict):
            raise _Unreproduced(f"conv_params is {row['conv_params']!r}, not a mapping")
        return _conv(int(name[4]), shapes, row.get("conv_params") or {}, dtype)
    if "conv_params" in row:
        raise _Unreproduced(f"conv_params on a {name or '?'} row")
    if name in ("MatMul", "BatchMatMul"):
        return _matmul(op, shapes, dtype)
    if name == "Sigmoid":
        x = _dims(shapes, "x")
        return "sigmoid", f"Sigmoid {dtype} {'x'.join(map(str, x))}", {"dtype": dtype, "shape": x}
    raise _Unreproduced(f"no reproducer for operator {op!r}")


def _dims(shapes: dict, key: str) -> list[int]:
    v = shapes.get(key)
    if not isinstance(v, list) or not v or not all(type(d) is int and d > 0 for d in v):
        raise _Unreproduced(f"shapes.{key} is {v!r}, not a list of positive whole sizes")
    return v


def _per_axis(params: dict, key: str, nd: int) -> list[int]:
    """An attribute of 1 or more per spatial axis (or per NC(D)HW axis, N's and C's then 1)."""
    v = params.get(key, [1] * nd)
    if type(v) is int:
        v = [v] * nd
    if isinstance(v, list) and len(v) == nd + 2 and v[:2] == [1, 1]:
        v = v[2:]
    if not isinstance(v, list) or len(v) != nd or not all(type(d) is int and d >= 1 for d in v):
        raise _Unreproduced(f"conv_params.{key} is {params.get(key)!r}, not {nd} whole numbers of 1 or more")
    return v


def _pads(params: dict, nd: int) -> list[int]:
    """One pad per spatial axis, from the two sides of each in the order the key names."""
    keys = [k for k in params if str(k).split("(")[0] == "pads"]
    if not keys:
        return [0] * nd
    key = str(keys[0])
    if len(keys) > 1 or ("(" in key and key[4:].replace(" ", "") != PAD_ORDERS[nd]):
        raise _Unreproduced(f"pads key {key!r}: the reproducer reads pads{PAD_ORDERS[nd]}")
    v = params[keys[0]]
    if isinstance(v, list) and len(v) == nd and "(" not in key:
        v = [p for p in v for _ in (0, 1)]
    if not isinstance(v, list) or len(v) != 2 * nd or not all(type(p) is int and p >= 0 for p in v):
        raise _Unreproduced(f"conv_params.{key} is {v!r}, not {2 * nd} whole pads")
    if any(v[2 * i] != v[2 * i + 1] for i in range(nd)):
        raise _Unreproduced(f"pads {v} differ between the two sides of an axis; aclnnConvolutionBackward "
                            "takes one pad per spatial axis")
    return v[::2]


def _conv(nd_named: int, shapes: dict, params: dict, dtype: str) -> tuple[str, str, dict]:
    """A gradWeight-only aclnnConvolutionBackward, its gradOutput checked against the convolution."""
    unknown = sorted(str(k) for k in params if str(k).split("(")[0] not in CONV_PARAMS)
    if unknown:
        raise _Unreproduced(f"unknown conv_params {', '.join(unknown)}: the reproducer would leave them out")
    x, w = _dims(shapes, "x"), _dims(shapes, "filter_size")
    gkeys = [k for k in GRAD_KEYS if k in shapes]
    if len(gkeys) != 1 or set(shapes) - {"x", "filter_size", *gkeys}:
        raise _Unreproduced(f"shapes {sorted(map(str, shapes))}: want x, filter_size and one gradOutput "
                            f"({', '.join(GRAD_KEYS)})")
    dy = _dims(shapes, gkeys[0])
    nd = len(x) - 2
    if nd != nd_named or len(w) != len(x) or len(dy) != len(x):
        raise _Unreproduced(f"a Conv{nd_named}D row with x {x}, gradOutput {dy} and filter_size {w}")
    stride, dilation, padding = _per_axis(params, "strides", nd), _per_axis(params, "dilations", nd), _pads(params, nd)
    groups = params.get("groups", 1)
    if type(groups) is not int or groups < 1 or x[1] % groups or w[0] % groups or w[1] * groups != x[1]:
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
    """A @ B through aclnnMm (aclnnMatmul with a batch over 1), neither operand transposed: the
    operator must say "no transpose" or name no layout at all."""
    text = op.lower()
    if re.search(r"\^t|trans|adj", text.replace("no transpose", "")):
        raise _Unreproduced(f"a transposed operand ({op!r}): the reproducer runs A[M,K] @ B[K,N]")
    if dtype not in ("FLOAT16", "BF16"):
        raise _Unreproduced(f"a {dtype} MatMul: the reproducer runs aclnnMm on 16-bit data")
    if set(shapes) - {"A", "B", "MKN"}:
        raise _Unreproduced(f"shapes {sorted(map(str, shapes))}: want A, B and MKN")
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
