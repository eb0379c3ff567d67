"""The shipped workloads' models written with torch.nn, to capture their traces from PyTorch itself
(`simulator.capture()`) instead of from our arithmetic (traces/generate.py):

    python traces/torch_models.py              # capture each at full size (meta device: no compute,
                                               # seconds) and compare with the shipped trace
    python traces/torch_models.py --write NAME # rewrite a shipped trace from its capture
    python traces/torch_models.py --estimate NAME|all
                                               # write the step's other calls into a shipped trace's
                                               # `estimated:` block (its calls and baselines untouched)

Each function builds the model and its inputs (set-up, which the capture leaves out) and runs one
training step's forward and backward (what the trace holds: the calls we simulate, and every other
kernel as an estimated call); the layer tables are the same published ones traces/generate.py cites. Needs torch (no
torchvision: the models are built here from torch.nn layers).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def _step(model: nn.Module, x: torch.Tensor) -> None:
    y = model(x)
    y.backward(torch.ones_like(y))        # a contiguous gradient, as a loss's would be


# ---- ResNet-50 (torchvision v1.5: the stride on the bottleneck's 3x3) ---------------------------
class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        idt = x if self.downsample is None else self.downsample(x)
        return F.relu(out + idt)


def resnet50_model() -> nn.Module:
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """ResNet-18's block (torchvision): two 3x3 convolutions, the stride on the first."""
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


def resnet18_model() -> nn.Module:
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        layers += [BasicBlock(cin, width, stride), BasicBlock(width, width, 1)]
        cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers)


def resnet50(batch: int = 32, res: int = 224, device: str = "meta", dtype=torch.float32) -> None:
    _step(resnet50_model().to(device, dtype), torch.randn(batch, 3, res, res, device=device, dtype=dtype))


# ---- EfficientNet-B0 (torchvision's _efficientnet_conf, width = depth = 1.0) --------------------
def _cna(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: bool = True) -> nn.Sequential:
    mods = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*mods, nn.SiLU()) if act else nn.Sequential(*mods)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, squeeze: int):
        super().__init__()
        self.fc1, self.fc2, self.act = nn.Conv2d(channels, squeeze, 1), nn.Conv2d(squeeze, channels, 1), nn.SiLU()

    def forward(self, x):
        s = torch.sigmoid(self.fc2(self.act(self.fc1(F.adaptive_avg_pool2d(x, 1)))))
        return s * x


class MBConv(nn.Module):
    def __init__(self, e: int, k: int, stride: int, cin: int, cout: int):
        super().__init__()
        exp = cin * e
        mods = [_cna(cin, exp, 1)] if e != 1 else []
        mods += [_cna(exp, exp, k, stride, groups=exp), SqueezeExcitation(exp, max(1, cin // 4)),
                 _cna(exp, cout, 1, act=False)]
        self.block = nn.Sequential(*mods)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return y + x if self.residual else y


def efficientnet_b0_model() -> nn.Module:
    stages = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
              (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1)]
    mods = [_cna(3, 32, 3, 2)]
    for e, k, s, cin, cout, n in stages:
        for i in range(n):
            mods.append(MBConv(e, k, s if i == 0 else 1, cin if i == 0 else cout, cout))
    mods += [_cna(320, 1280, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
    return nn.Sequential(*mods)


def efficientnet_b0(batch: int = 32, res: int = 224, device: str = "meta", dtype=torch.float32) -> None:
    _step(efficientnet_b0_model().to(device, dtype), torch.randn(batch, 3, res, res, device=device, dtype=dtype))


# ---- fairseq fconv_wmt_en_de encoder (ConvTBC, GLU) ---------------------------------------------
class ConvTBC(nn.Module):
    def __init__(self, cin: int, cout: int, k: int, pad: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, cin, cout) * 0.01)
        self.bias = nn.Parameter(torch.zeros(cout))
        self.pad = pad

    def forward(self, x):
        return torch.conv_tbc(x, self.weight, self.bias, self.pad)


def fconv_encoder_model() -> nn.Module:
    layers = [(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2
    mods, cin = [], layers[0][0]
    for out, k in layers:
        mods += [ConvTBC(cin, 2 * out, k, k // 2 if k % 2 == 1 else 0), nn.GLU(dim=2)]
        cin = out
    return nn.Sequential(*mods)


def fconv_wmt_en_de(T: int = 50, B: int = 80, device: str = "meta", dtype=torch.float32) -> None:
    x = torch.randn(T, B, 512, device=device, dtype=dtype, requires_grad=True)   # the embeddings train
    _step(fconv_encoder_model().to(device, dtype), x)


# ---- Deformable DETR's multi-scale deformable attention, PyTorch path ----------------------------
def ms_deform_attn_core_pytorch(value, shapes, sampling_locations, attention_weights):
    """Deformable-DETR models/ops/functions/ms_deform_attn_func.py, as published."""
    N_, S_, M_, D_ = value.shape
    _, Lq_, M_, L_, P_, _ = sampling_locations.shape
    value_list = value.split([h * w for h, w in shapes], dim=1)
    grids = 2 * sampling_locations - 1
    sampled = []
    for lid, (h, w) in enumerate(shapes):
        value_l = value_list[lid].flatten(2).transpose(1, 2).reshape(N_ * M_, D_, h, w)
        grid_l = grids[:, :, :, lid].transpose(1, 2).flatten(0, 1)
        sampled.append(F.grid_sample(value_l, grid_l, mode="bilinear", padding_mode="zeros", align_corners=False))
    attention_weights = attention_weights.transpose(1, 2).reshape(N_ * M_, 1, Lq_, L_ * P_)
    out = (torch.stack(sampled, dim=-2).flatten(-2) * attention_weights).sum(-1).view(N_, M_ * D_, Lq_)
    return out.transpose(1, 2).contiguous()


def deformable_detr(N: int = 4, heads: int = 8, d_model: int = 256, points: int = 4, img=(800, 1216),
                    queries: int = 300, layers: int = 6, device: str = "meta", dtype=torch.float32) -> None:
    """The sampling of `layers` encoder layers (every pixel of 4 levels a query) and as many decoder
    layers (`queries` queries), forward then backward (the rest of each layer is not captured)."""
    H, W = img
    shapes = [(-(-H // s), -(-W // s)) for s in (8, 16, 32, 64)]
    S = sum(h * w for h, w in shapes)
    D = d_model // heads
    inputs = []                 # every layer's inputs first: set-up, not the step
    for lq in [S] * layers + [queries] * layers:
        inputs.append((torch.randn(N, S, heads, D, device=device, dtype=dtype, requires_grad=True),
                       torch.rand(N, lq, heads, len(shapes), points, 2, device=device, dtype=dtype, requires_grad=True),
                       torch.rand(N, lq, heads, len(shapes), points, device=device, dtype=dtype, requires_grad=True)))
    outs = [ms_deform_attn_core_pytorch(value, shapes, loc, aw).sum() for value, loc, aw in inputs]
    torch.stack(outs).sum().backward()


# ---- inference passes: the forward of a model in eval() under no_grad ---------------------------
INFERENCE_MODELS = {"resnet50": resnet50_model, "resnet18": resnet18_model, "efficientnet_b0": efficientnet_b0_model}
INFERENCE_BATCHES = (1, 8, 64)
# max pooling stays estimated, as in the training traces: Ascend910A and Ascend310P3 refuse
# aclnnMaxPool2dWithIndices (A2 only), and a pass with a call left out has no samples a second
INFERENCE_ESTIMATED = {"MaxPool2dWithIndices"}


def inference_trace(model: str, batch: int, res: int = 224, dtype=torch.float16):
    """The forward of `model` (eval(), no_grad) at `batch`, captured on the meta device, as a
    workload: every mapped call simulated but max pooling, the rest estimated."""
    import simulator
    from simulator.studies.capture import MAPPED
    name = f"{model}_infer_b{batch}"
    net = INFERENCE_MODELS[model]().to("meta", dtype).eval()
    with simulator.capture(name, batch=batch) as cap:
        x = torch.randn(batch, 3, res, res, device="meta", dtype=dtype)
        with torch.no_grad():
            net(x)
    ops = {op for op, _ in MAPPED.values()} - INFERENCE_ESTIMATED
    w = cap.workload(name, simulate=ops)
    w.description = (f"{model} inference (torchvision's layout, eval(), under torch.no_grad()), batch {batch}, "
                     f"{res}x{res}, FLOAT16: the forward's {sum(c.count for c in w.calls)} simulated calls "
                     f"({len(w.calls)} distinct); max pooling estimated (A2 only as aclnnMaxPool2dWithIndices)")
    w.source = "captured from torch.nn models with simulator.capture() (traces/torch_models.py --write-inference)"
    return w


def resnet50_b256(device: str = "meta", dtype=torch.float16) -> None:
    """The batch of MindSpore's published Ascend 910 figure (docs/STEP.md)."""
    resnet50(batch=256, device=device, dtype=dtype)


# max pooling stays estimated: Ascend910A refuses aclnnMaxPool2dWithIndices (A2 only), and a step
# that left it out there would read faster than its roofline
RESNET_OPS = ("ConvolutionBackward", "Convolution", "BatchNorm", "BatchNormBackward", "Relu", "ThresholdBackward",
              "Add", "Mul", "Mean", "Addmm", "Mm", "ReduceSum")
EFFICIENTNET_OPS = ("ConvolutionBackward", "Convolution", "BatchNorm", "BatchNormBackward", "Silu", "SiluBackward",
                    "Sigmoid", "Mul", "Add", "Mean", "ReduceSum", "Addmm", "Mm")
# trace name -> (model step, capture options, the operators the trace simulates, their calls in
# this order of operators: ResNet-50's backward calls keep the indices that pins, tests and
# benchmarks name); every other kernel of the step is estimated
MODELS = {
    "resnet50_conv_backward": (resnet50, {}, RESNET_OPS),                   # distinct calls, counted
    "efficientnet_b0_silu_backward": (efficientnet_b0, {"merge": False}, ("SiluBackward",)),   # every SiLU, in order
    "fconv_wmt_en_de_conv_tbc_backward": (fconv_wmt_en_de, {"merge": False},
                                          ("ConvTbcBackward", "ConvTbc", "Glu", "GluBackward")),
    "deformable_detr_grid_sample_backward": (deformable_detr, {}, ("GridSampler2DBackward",)),
    "resnet50_step_b256": (resnet50_b256, {}, RESNET_OPS),
    "efficientnet_b0_step": (efficientnet_b0, {}, EFFICIENTNET_OPS),      # the whole step, distinct calls counted
}


def captured(name: str, dtype=None, **kw):
    """The capture of a shipped workload's model (full size, meta device unless told), its calls in
    the shipped trace's dtype."""
    import simulator
    from simulator import studies
    fn, opts, ops = MODELS[name]
    shipped = studies.load_trace(HERE / f"{name}.yaml")
    tdtype = dtype or {"FLOAT16": torch.float16, "FLOAT": torch.float32}[shipped.calls[0].tensors[
        next(iter(shipped.calls[0].tensors))].dtype]
    with simulator.capture(name, **opts) as cap:
        fn(dtype=tdtype, **kw)
    return sorted((c for c in cap.calls if c.op in ops), key=lambda c: ops.index(c.op)), cap, shipped


def differences(a, b) -> list[str]:
    """Calls of two workloads that differ (label aside), as readable lines."""
    out = []
    if len(a) != len(b):
        out.append(f"{len(a)} calls against {len(b)}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x.key() != y.key() or x.count != y.count:
            out.append(f"call {i}: {x.to_record()} != {y.to_record()}")
    return out


def step_workload(name: str, **kw):
    """The shipped trace with the step's estimated part from a fresh capture: the simulated calls
    stay the shipped ones (their operators only); every other kernel of the step, the calls of
    our other operators included, is estimated. Refused when the capture's simulated calls differ
    from the shipped ones (rewrite them with --write first)."""
    calls, cap, shipped = captured(name, **kw)
    diff = differences(calls, shipped.calls)
    if diff:
        raise SystemExit(f"{name}: the capture's simulated calls differ from the shipped trace's "
                         f"({diff[0][:200]}); rewrite it with --write {name} first")
    step = cap.workload(name, simulate=set(MODELS[name][2]))
    shipped.estimated = step.estimated
    return shipped, cap


def _keep_layer_labels(calls, shipped) -> None:
    """A recaptured call keeps the shipped call's label (its layers' names); a forward convolution
    takes the layer names of the backward call of the same layer (input, weight, stride)."""
    labels = {c.key(): c.label for c in shipped}

    def layer(c):
        return (c.tensors["input"].shape, c.tensors["weight"].shape, tuple(c.attrs["stride"]))
    by_layer = {layer(c): c.label for c in shipped
                if c.op == "ConvolutionBackward" and not c.label.startswith("aten.")}
    for c in calls:
        if c.key() in labels:
            c.label = labels[c.key()]
        elif c.op == "Convolution" and layer(c) in by_layer:
            c.label = by_layer[layer(c)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", metavar="NAME", help="rewrite this shipped trace from its capture")
    ap.add_argument("--write-inference", action="store_true",
                    help="write the inference traces (ResNet-50, ResNet-18, EfficientNet-B0 at batch 1, 8, 64)")
    ap.add_argument("--estimate", metavar="NAME", help="write the estimated part of this shipped trace's step "
                                                      "(or 'all') from its capture")
    args = ap.parse_args()
    if args.write_inference:
        from simulator import studies
        for model in INFERENCE_MODELS:
            for batch in INFERENCE_BATCHES:
                w = inference_trace(model, batch)
                studies.save_trace(w, HERE / f"{w.name}.yaml")
                print(f"traces/{w.name}.yaml: {len(w.calls)} distinct simulated calls, "
                      f"{sum(e.count for e in w.estimated)} estimated")
        return 0
    status = 0
    for name in MODELS:
        if args.estimate in (name, "all"):
            from simulator import studies
            w, cap = step_workload(name)
            studies.write_estimated(w)
            print(f"{name}: {sum(e.count for e in w.estimated)} estimated calls ({len(w.estimated)} distinct) "
                  f"written to traces/{name}.yaml")
            continue
        calls, cap, shipped = captured(name)
        diff = differences(calls, shipped.calls)
        print(f"{name}: {'same calls as the shipped trace' if not diff else f'{len(diff)} differences'}; "
              f"{cap.summary().splitlines()[0]}")
        for d in diff[:5]:
            print("   ", d[:300])
        if args.write == name:
            from simulator import studies
            w = cap.workload(name, shipped.description, simulate=set(MODELS[name][2]))
            w.calls.sort(key=lambda c: MODELS[name][2].index(c.op))
            w.source = shipped.source if shipped.source.startswith("captured from") else \
                f"captured from torch.nn models with simulator.capture() (traces/torch_models.py); {shipped.source}"
            w.extra = dict(shipped.extra)
            _keep_layer_labels(w.calls, shipped.calls)
            if not diff:
                w.baselines = shipped.baselines
            studies.save_trace(w, HERE / f"{name}.yaml")
            print(f"    rewritten: traces/{name}.yaml" + ("" if not diff else " (baselines dropped: re-record them)"))
        status |= bool(diff) and args.write != name
    return 0


if __name__ == "__main__":
    sys.exit(main())
