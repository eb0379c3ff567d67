"""simulator.capture(): workloads recorded from real PyTorch models (torch.nn layers, run by
PyTorch's own autograd), checked against the traces our layer arithmetic writes
(traces/generate.py) and against the shipped traces. The tests that run torch skip without it; the
ones about its absence run everywhere."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import simulator
from simulator import studies
from simulator.studies import StudyError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "traces"))
import generate  # noqa: E402

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
if HAVE_TORCH:
    import torch
    import torch_models


def calls_of(records: list[dict], dtype: str) -> list[studies.Call]:
    return [studies.call_from_record(r, f"call {i}", {"dtype": dtype}) for i, r in enumerate(records)]


def same(captured: list[studies.Call], expected: list[studies.Call], strides: bool = True) -> None:
    """The captured calls of the expected calls' operators are the expected ones."""
    ops = {e.op for e in expected}
    captured = [c for c in captured if c.op in ops]
    assert len(captured) == len(expected)
    def plain(c):
        return studies.Call(c.op, {k: studies.TensorSpec(v.shape, v.dtype, v.init) for k, v in c.tensors.items()},
                            c.attrs, count=c.count)
    for i, (c, e) in enumerate(zip(captured, expected)):
        if not strides:
            c, e = plain(c), plain(e)
        assert (c.key(), c.count) == (e.key(), e.count), f"call {i}: {c.to_record()} != {e.to_record()}"


@needs_torch
def test_resnet50_convolutions_are_what_generate_writes():
    """ResNet-50 (torchvision's v1.5 layout in torch.nn) on the CPU: its convolution_backward calls,
    grouped and counted, in backward order, with the masks autograd asks for (conv1: no input
    gradient; no bias anywhere)."""
    with simulator.capture() as cap:
        torch_models.resnet50(batch=2, res=64, device="cpu")
    backward = [c for c in cap.calls if c.op == "ConvolutionBackward"]
    same(backward, calls_of(generate.resnet50(batch=2, res=64), "FLOAT"))
    assert sum(c.count for c in backward) == 53


@needs_torch
def test_forward_convolutions_are_the_layers_and_replay_as_torch_computes():
    """ResNet-50's forward convolutions become Convolution calls, one per layer shape (counted),
    each the adjoint of its backward call; a captured call with a bias replays to torch's output."""
    with simulator.capture() as cap:
        torch_models.resnet50(batch=2, res=64, device="cpu")
    forward = [c for c in cap.calls if c.op == "Convolution"]
    backward = {(c.tensors["input"].shape, c.tensors["weight"].shape, c.attrs["stride"][0])
                for c in cap.calls if c.op == "ConvolutionBackward"}
    assert sum(c.count for c in forward) == 53
    assert {(c.tensors["input"].shape, c.tensors["weight"].shape, c.attrs["stride"][0]) for c in forward} == backward
    x = torch.randn(2, 3, 9, 9, requires_grad=True)
    w = torch.randn(5, 3, 3, 3, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    with simulator.capture() as cap:
        torch.nn.functional.conv2d(x, w, b, stride=2, padding=1).sum().backward()
    (call,) = [c for c in cap.calls if c.op == "Convolution"]
    assert set(call.tensors) == {"input", "weight", "bias"}
    x, w, b = (t.detach() for t in (x, w, b))
    r = simulator.run("Convolution", "Ascend910B1", input=x.numpy(), weight=w.numpy(), bias=b.numpy(), **call.attrs)
    want = torch.nn.functional.conv2d(x.double(), w.double(), b.double(), stride=2, padding=1).numpy()
    np.testing.assert_allclose(r.outputs["output"], want, rtol=1e-5, atol=1e-5)


@needs_torch
def test_efficientnet_silu_and_its_convolutions():
    """EfficientNet-B0 on the CPU: every SiLU backward, in the order autograd runs them, is what the
    layer-table arithmetic gives; its convolutions are captured too."""
    with simulator.capture(merge=False) as cap:
        torch_models.efficientnet_b0(batch=2, res=64, device="cpu")
    silu = [c for c in cap.calls if c.op == "SiluBackward"]
    same(silu, calls_of(generate.efficientnet_b0(batch=2, res=64), "FLOAT"))
    convs = [c for c in cap.calls if c.op == "ConvolutionBackward"]
    assert len([c for c in cap.calls if c.op == "Convolution"]) == 81
    assert len(convs) == 81                        # stem, 16 blocks' convs (SE fc1 / fc2 included), head
    depthwise = [c for c in convs if c.attrs["groups"] > 1]
    assert len(depthwise) == 16 and all(c.attrs["groups"] == c.tensors["weight"].shape[0] for c in depthwise)


@needs_torch
def test_conv_tbc_encoder_is_what_generate_writes():
    """The fconv encoder's ConvTBC layers: conv_tbc_backward is a composite on the CPU (mm calls
    below autograd); it is recorded as one call from its autograd node, as torch_npu runs it."""
    with simulator.capture(merge=False) as cap:
        torch_models.fconv_wmt_en_de(T=6, B=2, device="cpu")
    same(cap.calls, calls_of(generate.fconv_wmt_en_de(T=6, B=2), "FLOAT"))
    s = cap.ops["conv_tbc_backward"]
    assert s.calls == 15 and s.flops > 0
    assert "addmm_" not in cap.ops            # its parts are its own, not unmapped work


@needs_torch
def test_fconv_glu_and_its_backward_are_captured_and_replay_as_torch_computes():
    """The fconv encoder's 15 GLUs and their backward become Glu / GluBackward calls over the
    channel dim; a captured GluBackward call replays to torch's gradient."""
    with simulator.capture(merge=False) as cap:
        torch_models.fconv_wmt_en_de(T=6, B=2, device="cpu")
    glu = [c for c in cap.calls if c.op == "Glu"]
    back = [c for c in cap.calls if c.op == "GluBackward"]
    assert len(glu) == len(back) == 15 and {c.attrs["dim"] for c in glu + back} == {2}
    call = back[0]
    x = np.random.default_rng(0).standard_normal(call.tensors["self"].shape).astype(np.float32)
    g = np.random.default_rng(1).standard_normal(call.tensors["gradOut"].shape).astype(np.float32)
    r = simulator.run("GluBackward", "Ascend910B1", gradOut=g, self=x, **call.attrs)
    tx = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    torch.nn.functional.glu(tx, call.attrs["dim"]).backward(torch.from_numpy(g.astype(np.float64)))
    np.testing.assert_allclose(r.outputs["out"], tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@needs_torch
def test_deformable_sampling_keeps_pytorchs_non_contiguous_gradient():
    """ms_deform_attn_core_pytorch as published: the grid_sample calls are what generate writes,
    except that autograd hands grid_sample's backward a slice of the stacked levels' gradient,
    a non-contiguous view, and the capture keeps it so (replay then pays the copy)."""
    kw = dict(N=1, heads=2, d_model=16, points=2, img=(64, 96), queries=5)
    with simulator.capture() as cap:
        torch_models.deformable_detr(**kw, layers=6, device="cpu")
    same(cap.calls, calls_of(generate.deformable_detr(**kw), "FLOAT"), strides=False)
    for c in [c for c in cap.calls if c.op == "GridSampler2DBackward"]:
        assert c.tensors["gradOutput"].strides is not None          # a view (its layout is autograd's)
        assert c.tensors["grid"].init == "uniform(-1,1)"


@needs_torch
def test_the_shipped_traces_are_what_pytorch_calls():
    """Full size, on the meta device (shapes only, no arithmetic): every shipped model trace is
    exactly the capture of its model, strides included (Deformable DETR's gradient is a view), and
    what traces/generate.py writes."""
    generated = {"resnet50_conv_backward": "resnet50", "efficientnet_b0_silu_backward": "efficientnet_b0",
                 "fconv_wmt_en_de_conv_tbc_backward": "fconv_wmt_en_de",
                 "deformable_detr_grid_sample_backward": "deformable_detr"}
    for name in torch_models.MODELS:
        calls, _, shipped = torch_models.captured(name)
        same(calls, shipped.calls)
        if name not in generated:
            continue
        written = calls_of(getattr(generate, generated[name])(),
                           shipped.calls[0].tensors[next(iter(shipped.calls[0].tensors))].dtype)
        same([c for c in calls if c.op in {w.op for w in written}], written)


@needs_torch
def test_a_captured_view_replays_in_both_modes(tmp_path):
    x = torch.randn(16, 24, requires_grad=True)
    with simulator.capture() as cap:
        y = torch.nn.functional.silu(x.t())           # silu of a transposed view
        y.backward(torch.ones_like(y))
    (call,) = [c for c in cap.calls if c.op == "SiluBackward"]
    assert call.tensors["self"].strides == (1, 24)
    path = cap.save(tmp_path / "view.yaml")
    w = studies.load_trace(path)
    (saved,) = [c for c in w.calls if c.op == "SiluBackward"]
    assert saved.key() == call.key()
    kw = studies.build_inputs(saved)
    assert not kw["self"].flags["C_CONTIGUOUS"] and kw["self"].strides == (4, 96)
    r = simulator.run("SiluBackward", "Ascend910B1", **kw)
    xs = kw["self"].astype(np.float64)
    want = kw["gradOutput"] * (1 / (1 + np.exp(-xs))) * (1 + xs * (1 - 1 / (1 + np.exp(-xs))))
    np.testing.assert_allclose(r.outputs["gradInput"], want, rtol=1e-5, atol=1e-6)
    timing = simulator.run("SiluBackward", "Ascend910B1", mode="timing", **studies.build_inputs(saved, data=False))
    assert timing.cycles == r.cycles
    assert any("Contiguous" in l["name"] for l in r.report.launches)


@needs_torch
def test_summary_ranks_what_it_could_not_map():
    m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 8))
    x = torch.randn(32, 64)
    with simulator.capture() as cap:
        m(x).sum().backward()
    ops = [c.op for c in cap.calls]
    assert ops.count("Addmm") == 2 and "Mm" in ops       # the Linear layers' addmm, the backward's mm
    rest = cap.unmapped()
    assert [r[0] for r in rest[:2]] == ["tanh_backward", "tanh"]    # ranked by bytes
    cov = cap.coverage()
    assert cov["flops"] == 1 and 0 < cov["bytes"] < 1
    text = cap.summary()
    assert "not simulated" in text and "tanh" in text and "detach" not in text
    # the Linear's addmm: its bias broadcast over the rows, its weight a transposed view
    first = cap.calls[ops.index("Addmm")]
    kw = studies.build_inputs(first)
    assert kw["self"].shape == (256,) and kw["mat2"].shape == (64, 256) and not kw["mat2"].flags["C_CONTIGUOUS"]
    r = simulator.run("Addmm", "Ascend910B1", **kw)
    want = kw["self"].astype(np.float64) + kw["mat1"].astype(np.float64) @ kw["mat2"].astype(np.float64)
    np.testing.assert_allclose(r.outputs["out"], want, rtol=1e-4, atol=1e-4)


@needs_torch
def test_max_pooling_is_simulated_with_its_indices():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.MaxPool2d(3, 2, 1))
    x = torch.randn(2, 3, 20, 20)
    with simulator.capture() as cap:
        y = m(x)
    (call,) = [c for c in cap.calls if c.op == "MaxPool2dWithIndices"]
    assert call.attrs["kernelSize"] == [3, 3] and call.attrs["stride"] == [2, 2] and call.attrs["padding"] == [1, 1]
    kw = studies.build_inputs(call)
    r = simulator.run("MaxPool2dWithIndices", "Ascend910B1", **kw)
    want, where = torch.nn.functional.max_pool2d(torch.from_numpy(kw["self"]), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(r.outputs["out"], want.numpy())
    np.testing.assert_array_equal(r.outputs["indices"], where.numpy())
    assert y.shape == want.shape


@needs_torch
def test_batched_matmul_and_grid_sample_are_simulated():
    a, b = torch.randn(3, 5, 7), torch.randn(3, 7, 4)
    inp, grid = torch.randn(2, 3, 6, 5), torch.rand(2, 4, 3, 2) * 2 - 1
    with simulator.capture() as cap:
        torch.bmm(a, b)
        torch.nn.functional.grid_sample(inp, grid, align_corners=False)
    ops = [c.op for c in cap.calls]
    assert ops == ["Matmul", "GridSampler2D"]
    kw = studies.build_inputs(cap.calls[0])
    assert kw["self"].shape == (3, 5, 7) and kw["other"].shape == (3, 7, 4)
    r = simulator.run("Matmul", "Ascend910B1", **kw)
    np.testing.assert_allclose(r.outputs["out"], kw["self"].astype(np.float64) @ kw["other"].astype(np.float64),
                               rtol=1e-4, atol=1e-4)
    kw = studies.build_inputs(cap.calls[1])
    r = simulator.run("GridSampler2D", "Ascend910B1", **kw)
    want = torch.nn.functional.grid_sample(torch.from_numpy(kw["input"]), torch.from_numpy(kw["grid"]),
                                           align_corners=kw["alignCorners"])
    np.testing.assert_allclose(r.outputs["out"], want.numpy(), rtol=1e-4, atol=1e-5)


@needs_torch
def test_nothing_to_save_says_so(tmp_path):
    with simulator.capture() as cap:
        torch.randn(4, 4).exp()                      # no operator of ours
    with pytest.raises(StudyError, match="no call of an operator we simulate"):
        cap.save(tmp_path / "t.yaml")


def test_without_torch_it_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(StudyError, match="pip install torch"):
        with simulator.capture():
            pass


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "simulator.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@needs_torch
def test_cli_capture_runs_a_script_with_its_arguments(tmp_path):
    script = tmp_path / "step.py"
    script.write_text("import sys, torch\n"
                      "n = int(sys.argv[sys.argv.index('--batch') + 1])\n"
                      "x = torch.randn(n, 8, 16, requires_grad=True)\n"
                      "y = torch.nn.functional.silu(x)\n"
                      "y.backward(torch.ones_like(y))\n")
    out = tmp_path / "t.yaml"
    p = _cli("capture", str(script), "-o", str(out), "--", "--batch", "3")
    assert p.returncode == 0, p.stderr
    assert "captured 2 calls" in p.stdout and str(out) in p.stdout      # SiLU and its backward
    assert [c.op for c in studies.load_trace(out).calls] == ["Silu", "SiluBackward"]
    assert all(c.tensors["self"].shape == (3, 8, 16) for c in studies.load_trace(out).calls)
    p = _cli("replay", str(out), "--soc", "Ascend910B1", "--no-progress")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("case, code, message", [
    ("missing", 2, "no such file"),
    pytest.param("raises", 1, "raised ValueError: boom", marks=needs_torch),
    pytest.param("nothing", 2, "no call of an operator we simulate", marks=needs_torch),
])
def test_cli_capture_errors(tmp_path, case, code, message):
    script = tmp_path / "s.py"
    if case == "raises":
        script.write_text("raise ValueError('boom')\n")
    elif case == "nothing":
        script.write_text("import torch\ntorch.randn(3) + 1\n")
    p = _cli("capture", str(script), "-o", str(tmp_path / "t.yaml"))
    assert p.returncode == code, p.stdout + p.stderr
    assert message in p.stderr and "Traceback" not in p.stderr and p.stderr.count("\n") == 1


def _tiny_mobile_block():
    """A stem convolution, a depthwise 3x3 and a pointwise 1x1 with batch norms and ReLUs, then
    the head: 3 convolutions, 3 batch norms, 3 ReLUs, a mean and a Linear."""
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 24, 1, bias=False), nn.BatchNorm2d(24), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, 10)).half().eval()


@needs_torch
@pytest.mark.parametrize("how", ["no_grad", "inference_mode", "eval only", "declared"])
def test_an_inference_pass_is_the_forwards_kernels(tmp_path, how):
    model = _tiny_mobile_block()
    guard = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}.get(how)
    with simulator.capture("tiny", batch=4, kind="inference" if how == "declared" else None) as cap:
        x = torch.randn(4, 3, 32, 32, dtype=torch.float16)
        if guard:
            with guard():
                want = model(x)
        else:
            want = model(x)
    assert cap.kind == "inference" and "an inference pass" in cap.summary()
    ops = [c.op for c in cap.calls for _ in range(c.count)]
    assert sorted(ops) == sorted(["Convolution"] * 3 + ["BatchNorm"] * 3 + ["Relu"] * 3 + ["Mean", "Addmm"])
    convs = [c for c in cap.calls if c.op == "Convolution"]
    assert [c.attrs["groups"] for c in convs] == [1, 16, 1]         # the depthwise layer, as itself
    assert all(c.attrs["training"] is False for c in cap.calls if c.op == "BatchNorm")
    w = studies.load_trace(cap.save(tmp_path / "tiny.yaml"))
    assert w.step == {"kind": "inference", "batch": 4}
    # the head's Linear, replayed from the capture, computes what torch computed
    (head,) = [c for c in cap.calls if c.op == "Addmm"]
    assert head.tensors["mat1"].shape == (4, 24) and tuple(want.shape) == (4, 10)


@needs_torch
def test_a_declared_inference_pass_begins_at_its_first_mapped_call():
    """Pre-processing arithmetic (a Mul by a scalar, estimated) before the first convolution is
    set-up by default (set-up arithmetic is common) and the step's first call in a declared
    inference pass."""
    model = _tiny_mobile_block()
    for kind, mul_in_step in ((None, False), ("inference", True)):
        with simulator.capture(kind=kind) as cap, torch.no_grad():
            model(torch.randn(2, 3, 16, 16, dtype=torch.float16) * 0.5)
        assert ("mul" in cap.ops, "mul" in cap.setup) == (mul_in_step, not mul_in_step)
        assert cap.calls[0].op == "Convolution" and cap.kind == "inference"


@needs_torch
def test_a_training_step_says_so():
    x = torch.randn(2, 8, requires_grad=True)
    with simulator.capture() as cap:
        torch.nn.functional.silu(x).sum().backward()
    assert cap.kind == "training" and "a training step" in cap.summary()
    with pytest.raises(StudyError, match="capture kind 'serving'"):
        simulator.capture(kind="serving").__enter__()


@needs_torch
def test_replay_prints_samples_per_second_on_the_inference_chip(tmp_path):
    model = _tiny_mobile_block()
    with simulator.capture("tiny", batch=4) as cap, torch.no_grad():
        model(torch.randn(4, 3, 32, 32, dtype=torch.float16))
    path = cap.save(tmp_path / "tiny.yaml")
    p = _cli("replay", str(path), "--soc", "Ascend310P3", "--soc", "Ascend910B1", "--no-progress", "--json")
    assert p.returncode == 0, p.stderr
    import json
    steps = json.loads(p.stdout)["steps"]
    for s in steps:      # every call runs on both chips, the 310P3 included: the whole pass
        assert s["kind"] == "inference" and s["failed"] == 0 and s["simulated_share"] == 1.0
        assert s["samples_per_s"] == pytest.approx(4 / (s["step_us"] * 1e-6))
    p = _cli("replay", str(path), "--soc", "Ascend310P3", "--no-progress", "--batch", "8")
    assert p.returncode == 0 and "batch 8: " in p.stdout and "samples/s" in p.stdout


@pytest.mark.parametrize("step", ["{kind: serving}", "{kind: inference, batch: 0}", "{batch: 2.5}", "{kind: inference, bs: 8}",
                                  "[inference]", "0", "false", "{batch: true}"])
def test_a_bad_step_field_is_a_clear_error(tmp_path, step):
    path = tmp_path / "t.yaml"
    path.write_text(f"step: {step}\ncalls:\n  - op: Relu\n    tensors: {{self: {{shape: [4, 4], dtype: FLOAT}}}}\n")
    with pytest.raises(StudyError, match="field 'step' is"):
        studies.load_trace(path)
    path.write_text("step: {kind: inference, batch: 8}\ncalls:\n  - op: Relu\n    tensors: {self: {shape: [4, 4], dtype: FLOAT}}\n")
    assert studies.load_trace(path).step == {"kind": "inference", "batch": 8}


@needs_torch
def test_the_shipped_inference_traces_are_what_pytorch_calls():
    """Every shipped inference trace is its model's forward, captured now: the same calls, counts,
    estimated part and step (kind and batch); ResNet-50's forward has its 53 convolutions."""
    for model in torch_models.INFERENCE_MODELS:
        for batch in torch_models.INFERENCE_BATCHES:
            w = torch_models.inference_trace(model, batch)
            shipped = studies.load_trace(ROOT / "traces" / f"{w.name}.yaml")
            assert [(c.key(), c.count) for c in w.calls] == [(c.key(), c.count) for c in shipped.calls]
            assert [e.to_record() for e in w.estimated] == [e.to_record() for e in shipped.estimated]
            assert shipped.step == {"kind": "inference", "batch": batch}
            assert not any(c.op.endswith("Backward") for c in shipped.calls)
            if model == "resnet50":
                assert sum(c.count for c in shipped.calls if c.op == "Convolution") == 53


@needs_torch
def test_inference_mode_captures_what_no_grad_does():
    """Under inference_mode the composites reach the capture whole; it runs their C++ composite
    kernels, as eager PyTorch does (interpolate stays one upsample, not a Python decomposition)."""
    model = _tiny_mobile_block()
    x = torch.randn(2, 3, 16, 16, dtype=torch.float16)
    seen = []
    for guard in (torch.no_grad, torch.inference_mode):
        with simulator.capture(batch=np.int64(2)) as cap, guard():
            model(torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear"))
        seen.append(([(c.key(), c.count) for c in cap.calls], {n: st.calls for n, st in cap.ops.items()},
                     {n: st.calls for n, st in cap.setup.items()}))
        assert cap.batch == 2 and type(cap.batch) is int
    assert seen[0] == seen[1]
    assert seen[0][2].get("upsample_bilinear2d") == 1       # before the first mapped call: set-up
    for bad in (True, 0, 2.5, "8"):
        with pytest.raises(StudyError, match="capture batch"):
            simulator.capture(batch=bad).__enter__()
