"""Writes the shipped workload traces from the models' published layer tables.

    python traces/generate.py            # rewrites the .yaml traces' calls here (baselines and the
                                         # estimated part of the step are kept)

Each trace is what one training step's backward pass of the model asks of the operator, at the
batch size given, in backward order (the last layer first) or, for the convolution workloads, as
the distinct call shapes with `count` = how often each occurs in one step. Sources and the
arithmetic behind every shape are in the comments below and in traces/README.md.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from simulator import studies  # noqa: E402


def _flow(rec: dict) -> str:
    return json.dumps(rec, separators=(", ", ": "))


def write(path: Path, header: dict, comment: str, calls: list[dict]) -> None:
    """Write the trace's calls; the baselines and the estimated part of the step
    (traces/torch_models.py --estimate) already in the file are kept."""
    previous = studies.load_trace(path) if path.exists() else None
    old = previous.baselines if previous else {}
    lines = [f"# {l}".rstrip() for l in comment.strip().splitlines()]
    lines.append(f"format: {studies.FORMAT}")
    for k, v in header.items():
        lines.append(f"{k}: {json.dumps(v)}")
    lines.append("calls:")
    for c in calls:
        lines.append(f"  - {_flow(c)}")
    text = "\n".join(lines) + "\n" + (studies.estimated_yaml(previous.estimated) if previous else "")
    path.write_text(text)
    w = studies.load_trace(path)              # validates what we wrote
    keep = {soc: b for soc, b in old.items() if len(b["calls"]) == len(w.calls)}
    if keep:
        w.baselines = keep
        studies.write_baselines(w)


# ---- EfficientNet-B0 SiLU activations ---------------------------------------------------------
def efficientnet_b0(batch: int = 32, res: int = 224) -> list[dict]:
    """torchvision.models.efficientnet_b0: every nn.SiLU in forward order, with its output shape.
    Stages (expand ratio, kernel, stride, in, out, layers) from torchvision's _efficientnet_conf
    for width_mult = depth_mult = 1.0; SqueezeExcitation's squeeze channels are
    max(1, block input channels // 4) and its fc1 is followed by SiLU."""
    stages = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
              (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1)]
    acts = []
    h = res // 2                                     # stem: conv 3x3 stride 2, 3 -> 32
    acts.append(("features.0 (stem conv 3x3 s2, 32 ch)", (batch, 32, h, h)))
    for si, (e, k, s, cin, cout, n) in enumerate(stages, start=1):
        for li in range(n):
            inp = cin if li == 0 else cout
            stride = s if li == 0 else 1
            exp = inp * e
            b = 0
            name = f"features.{si}.{li}.block"
            if e != 1:
                acts.append((f"{name}.{b} (expand 1x1, {exp} ch)", (batch, exp, h, h)))
                b += 1
            h_out = h // stride
            acts.append((f"{name}.{b} (depthwise {k}x{k} s{stride}, {exp} ch)", (batch, exp, h_out, h_out)))
            b += 1
            sq = max(1, inp // 4)
            acts.append((f"{name}.{b} (squeeze-excitation fc1, {sq} ch)", (batch, sq, 1, 1)))
            h = h_out
    acts.append(("features.8 (head conv 1x1, 1280 ch)", (batch, 1280, h, h)))
    calls = []
    for label, shape in reversed(acts):              # backward runs last layer first
        calls.append({"op": "SiluBackward", "label": label,
                      "tensors": {"gradOutput": list(shape), "self": list(shape)}})
    return calls


# ---- ResNet-50 convolutions -------------------------------------------------------------------
def resnet50(batch: int = 32, res: int = 224) -> list[dict]:
    """torchvision.models.resnet50 (v1.5: the stride is on the 3x3 conv of the bottleneck);
    every Conv2d with its input, weight, stride and padding, grouped by identical call."""
    convs = []   # (label, cin, cout, k, stride, pad, h_in)
    convs.append(("conv1", 3, 64, 7, 2, 3, res))
    h = res // 4                                          # conv1 s2 + maxpool s2 -> 56
    cin = 64
    for li, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1):
        cout = width * 4
        for b in range(blocks):
            s = stride if b == 0 else 1
            name = f"layer{li}.{b}"
            convs.append((f"{name}.conv1", cin, width, 1, 1, 0, h))
            convs.append((f"{name}.conv2", width, width, 3, s, 1, h))
            convs.append((f"{name}.conv3", width, cout, 1, 1, 0, h // s))
            if b == 0:
                convs.append((f"{name}.downsample.0", cin, cout, 1, s, 0, h))
            h //= s
            cin = cout
    groups: dict[tuple, list[str]] = {}
    for label, ci, co, k, s, p, hin in convs:
        groups.setdefault((ci, co, k, s, p, hin), []).append(label)
    # backward order: the deepest layers' gradients come first
    order = sorted(groups, key=lambda g: -convs.index(next(c for c in convs if c[0] == groups[g][-1])))
    calls = []
    for key in order:
        ci, co, k, s, p, hin = key
        hout = (hin + 2 * p - k) // s + 1
        labels = groups[key]
        first = labels == ["conv1"]
        calls.append({
            "op": "ConvolutionBackward",
            "label": ", ".join(labels) if len(labels) <= 4 else f"{labels[0]} ... {labels[-1]} ({len(labels)} layers)",
            "count": len(labels),
            "tensors": {"gradOutput": [batch, co, hout, hout], "input": [batch, ci, hin, hin],
                        "weight": [co, ci, k, k]},
            "attrs": {"biasSizes": [co], "stride": [s, s], "padding": [p, p], "dilation": [1, 1],
                      "transposed": False, "outputPadding": [0, 0], "groups": 1,
                      # conv1's input is the image: autograd asks for no input gradient there
                      "outputMask": [False, True, False] if first else [True, True, False],
                      "cubeMathType": 0},
        })
    return calls


# ---- fairseq fconv encoder (ConvTBC) ----------------------------------------------------------
def fconv_wmt_en_de(T: int = 50, B: int = 80) -> list[dict]:
    """fairseq fconv_wmt_en_de encoder: convolutions [(512, 3)] * 9 + [(1024, 3)] * 4 +
    [(2048, 1)] * 2; each is ConvTBC(in, 2 * out, k, padding = k // 2) (the GLU halves it);
    `in` is the previous layer's `out`, the first is 512. T x B ~ 4000 tokens (--max-tokens 4000)."""
    layers = [(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2
    calls = []
    cin = layers[0][0]
    spec = []
    for i, (out, k) in enumerate(layers):
        pad = k // 2 if k % 2 == 1 else 0
        cout = 2 * out
        tout = T + 2 * pad + 1 - k
        spec.append((f"encoder.convolutions.{i} (ConvTBC {cin}->{cout}, k{k}, pad {pad})", cin, cout, k, pad, tout))
        cin = out
    for label, ci, co, k, pad, tout in reversed(spec):
        calls.append({"op": "ConvTbcBackward", "label": label,
                      "tensors": {"self": [tout, B, co], "input": [T, B, ci], "weight": [k, ci, co], "bias": [co]},
                      "attrs": {"pad": pad, "cubeMathType": 0}})
    return calls


# ---- Deformable DETR grid sampling --------------------------------------------------------------
def deformable_detr(N: int = 4, heads: int = 8, d_model: int = 256, points: int = 4,
                    img=(800, 1216), queries: int = 300) -> list[dict]:
    """Deformable DETR's multi-scale deformable attention in its PyTorch form
    (ms_deform_attn_core_pytorch): per level, F.grid_sample(value (N*M, D, H_l, W_l),
    grid (N*M, Lq, P, 2), bilinear, zeros, align_corners=False). Four levels at strides 8-64 of an
    800x1216 padded batch; encoder queries = every pixel of every level, decoder 300 queries;
    6 encoder and 6 decoder layers (count 6)."""
    H, W = img
    levels = []
    for s in (8, 16, 32, 64):
        levels.append((-(-H // s), -(-W // s)))
    lq_enc = sum(h * w for h, w in levels)
    L = len(levels)
    D = d_model // heads
    calls = []
    for part, lq in (("decoder", queries), ("encoder", lq_enc)):
        for li, (h, w) in reversed(list(enumerate(levels))):
            calls.append({"op": "GridSampler2DBackward", "label": f"{part} level {li} ({h}x{w}, {lq} queries)",
                          "count": 6,
                          # autograd hands grid_sample's backward one level's slice of the gradient
                          # of the levels stacked at dim -2: a view (traces/torch_models.py captures it)
                          "tensors": {"gradOutput": {"shape": [N * heads, D, lq, points],
                                                     "strides": [D * lq * L * points, lq * L * points, L * points, 1]},
                                      "input": [N * heads, D, h, w],
                                      "grid": {"shape": [N * heads, lq, points, 2], "init": "uniform(-1,1)"}},
                          "attrs": {"interpolationMode": 0, "paddingMode": 0, "alignCorners": False,
                                    "outputMask": [True, True]}})
    return calls


def main() -> None:
    write(HERE / "efficientnet_b0_silu_backward.yaml",
          {"name": "efficientnet_b0_silu_backward",
           "description": "Every SiLU backward of one EfficientNet-B0 training step (torchvision), batch 32, "
                          "224x224, mixed precision (FLOAT16), last layer first.",
           "source": "torchvision.models.efficientnet_b0 layer table (_efficientnet_conf), shapes derived in traces/generate.py",
           "defaults": {"dtype": "FLOAT16"}},
          "EfficientNet-B0 SiLU backward calls (49: stem, 16 MBConv blocks with expand / depthwise /\n"
          "squeeze-excitation SiLUs, head). Written by traces/generate.py; baselines by\n"
          "`ascend-sim regress traces/efficientnet_b0_silu_backward.yaml --soc Ascend910B1 --update`.",
          efficientnet_b0())
    write(HERE / "resnet50_conv_backward.yaml",
          {"name": "resnet50_conv_backward",
           "description": "The 23 distinct convolution backward calls of one ResNet-50 training step "
                          "(53 convolutions), batch 32, 224x224, FLOAT16; count = layers sharing the shape.",
           "source": "torchvision.models.resnet50 (v1.5), shapes derived in traces/generate.py",
           "defaults": {"dtype": "FLOAT16"}},
          "ResNet-50 backward convolutions: gradInput and gradWeight (no bias: outputMask [1,1,0];\n"
          "conv1 needs no input gradient: [0,1,0]). biasSizes is given as [C_out] although unused.",
          resnet50())
    write(HERE / "fconv_wmt_en_de_conv_tbc_backward.yaml",
          {"name": "fconv_wmt_en_de_conv_tbc_backward",
           "description": "ConvTBC backward of the fairseq fconv_wmt_en_de encoder (15 layers), T=50 B=80 "
                          "(~4000 tokens), FLOAT16, last layer first.",
           "source": "fairseq/models/fconv.py (fconv_wmt_en_de, FConvEncoder, ConvTBC), shapes in traces/generate.py",
           "defaults": {"dtype": "FLOAT16"}},
          "fairseq convolutional seq2seq encoder: ConvTBC(in, 2*out, k, pad=k//2) per layer.",
          fconv_wmt_en_de())
    write(HERE / "deformable_detr_grid_sample_backward.yaml",
          {"name": "deformable_detr_grid_sample_backward",
           "description": "grid_sample backward of Deformable DETR's multi-scale deformable attention "
                          "(PyTorch reference path), batch 4, 8 heads, 4 levels, 4 points, 800x1216, FLOAT; "
                          "count 6 = layers per encoder / decoder; gradOutput is the strided view autograd "
                          "passes (one level of the stacked gradient), as captured from PyTorch.",
           "source": "fundamentalvision/Deformable-DETR models/ops/functions/ms_deform_attn_func.py "
                     "(ms_deform_attn_core_pytorch), shapes in traces/generate.py",
           "defaults": {"dtype": "FLOAT"}},
          "Deformable DETR sampling: value (N*M, D, H_l, W_l), grid (N*M, Lq, P, 2) uniform in [-1, 1].",
          deformable_detr())


if __name__ == "__main__":
    main()
