"""Capture a workload from a real PyTorch model: the aten calls of its forward and backward that
map to our operators become a workload trace that `replay`, `sweep` and `regress` take as it is.

    with simulator.capture() as cap:
        loss = model(x).sum()
        loss.backward()
    cap.save("traces/my_model.yaml")
    print(cap.summary())          # what the trace covers, and the ops it could not map

A `TorchDispatchMode` sees every aten call below autograd, forward and backward. The calls we map
(`convolution_backward` -> ConvolutionBackward, `silu_backward` -> SiluBackward,
`grid_sampler_2d_backward` -> GridSampler2DBackward, `conv_tbc_backward` -> ConvTbcBackward) keep
their shapes, dtypes and strides (a non-contiguous view stays one) and identical calls are counted
(`count`), in the order they first ran. Every other call is counted with its FLOPs (PyTorch's own
FLOP formulas, `torch.utils.flop_counter`) and bytes (its tensors' sizes), so the summary can say
how much of the step the trace covers. torch is optional: without it this says how to install it.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .trace import Call, StudyError, TensorSpec, Workload, default_init, save_trace

TORCH_DTYPES = {"float32": "FLOAT", "float16": "FLOAT16", "bfloat16": "BF16", "float64": "DOUBLE",
                "int8": "INT8", "uint8": "UINT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
                "bool": "BOOL"}
INSTALL = ("capturing a PyTorch model needs torch (the CPU build is enough): pip install torch")


def _torch():
    try:
        import torch
    except ImportError:
        raise StudyError(INSTALL) from None
    return torch


def _spec(op: str, name: str, t) -> TensorSpec:
    dtype = TORCH_DTYPES.get(str(t.dtype).replace("torch.", ""))
    if dtype is None:
        raise StudyError(f"{op}.{name}: dtype {t.dtype} has no aclDataType here")
    strides = None if t.is_contiguous() else tuple(int(s) for s in t.stride())
    return TensorSpec(tuple(int(d) for d in t.shape), dtype, default_init(op, name), strides)


def _ints(v) -> list[int]:
    return [int(x) for x in v]


# aten op name -> (our operator, a function of the aten call's arguments -> (tensors, attrs))
def _convolution_backward(a):
    go, inp, w, bias_sizes, stride, padding, dilation, transposed, out_pad, groups, mask = a[:11]
    # a layer without bias: autograd passes [0] (or nothing) and outputMask[2] false, so the value
    # is unread; our traces give the bias's would-be size, C_out, as traces/generate.py does
    cout = int(w.shape[1]) * int(groups) if transposed else int(w.shape[0])
    bias = _ints(bias_sizes) if bias_sizes is not None else []
    if not mask[2] and bias in ([], [0]):
        bias = [cout]
    return ({"gradOutput": go, "input": inp, "weight": w},
            {"biasSizes": bias, "stride": _ints(stride),
             "padding": _ints(padding), "dilation": _ints(dilation), "transposed": bool(transposed),
             "outputPadding": _ints(out_pad), "groups": int(groups), "outputMask": [bool(m) for m in mask],
             "cubeMathType": 0})


def _silu_backward(a):
    return {"gradOutput": a[0], "self": a[1]}, {}


def _grid_sampler_2d_backward(a):
    go, inp, grid, interp, pad, align, mask = a[:7]
    return ({"gradOutput": go, "input": inp, "grid": grid},
            {"interpolationMode": int(interp), "paddingMode": int(pad), "alignCorners": bool(align),
             "outputMask": [bool(m) for m in mask]})


def _conv_tbc_backward(a):
    grad, inp, w, bias, pad = a[:5]
    return {"self": grad, "input": inp, "weight": w, "bias": bias}, {"pad": int(pad), "cubeMathType": 0}


MAPPED: dict[str, tuple[str, Callable]] = {
    "convolution_backward": ("ConvolutionBackward", _convolution_backward),
    "silu_backward": ("SiluBackward", _silu_backward),
    "grid_sampler_2d_backward": ("GridSampler2DBackward", _grid_sampler_2d_backward),
    # composite on CPU (it decomposes into mm calls below autograd, where the dispatch mode sits;
    # torch_npu runs it as one kernel): recorded from the autograd node of torch.conv_tbc instead
    "conv_tbc_backward": ("ConvTbcBackward", _conv_tbc_backward),
}


@dataclass
class OpStats:
    calls: int = 0
    flops: int = 0
    bytes: int = 0


class Capture:
    """What a capture saw: the mapped calls (deduplicated, counted) and every aten op's calls,
    FLOPs and bytes."""

    def __init__(self, name: str = "captured", merge: bool = True):
        self.name, self.merge = name, merge
        self.calls: list[Call] = []
        self._index: dict[str, int] = {}
        self.ops: dict[str, OpStats] = {}          # aten op name -> stats (mapped ones included)
        self._flops = None
        self.inside: str | None = None             # a composite mapped op running: its parts are its own

    # ---- recording (called by the dispatch mode) ----
    def record(self, func, args: tuple, kwargs: dict, out) -> None:
        name = self.inside or func._overloadpacket.__name__
        stats = self.ops.setdefault(name, OpStats())
        stats.flops += self._count_flops(func, args, kwargs, out)
        stats.bytes += _tensor_bytes(args) + _tensor_bytes(kwargs) + _tensor_bytes(out)
        if self.inside:
            return
        stats.calls += 1
        if name in MAPPED:
            self.add(name, _flat_args(func, args, kwargs))

    def add(self, name: str, args: list) -> None:
        """A mapped call (aten op `name` with its schema-order arguments) into the trace."""
        op, fn = MAPPED[name]
        tensors, attrs = fn(args)
        call = Call(op, {k: _spec(op, k, t) for k, t in tensors.items() if t is not None}, attrs,
                    label=f"aten.{name} #{self.ops[name].calls}")
        key = call.key()
        if self.merge and key in self._index:
            self.calls[self._index[key]].count += 1
        else:
            self._index[key] = len(self.calls)
            self.calls.append(call)

    def _count_flops(self, func, args, kwargs, out) -> int:
        if func._overloadpacket.__name__ == "conv_tbc":      # torch's registry has no formula for it
            return _conv_tbc_flops(args[0], args[1], out)
        if self._flops is None:
            try:
                from torch.utils.flop_counter import flop_registry
                self._flops = flop_registry
            except ImportError:            # an old torch: bytes only
                self._flops = {}
        f = self._flops.get(func._overloadpacket)
        if f is None:
            return 0
        try:
            return int(f(*args, **kwargs, out_val=out))
        except Exception:                  # a formula that does not take this overload's arguments
            return 0

    # ---- results ----
    def coverage(self) -> dict[str, float]:
        """The share of the step's FLOPs and bytes in calls the trace holds."""
        tot_f = sum(s.flops for s in self.ops.values())
        tot_b = sum(s.bytes for s in self.ops.values())
        map_f = sum(s.flops for n, s in self.ops.items() if n in MAPPED)
        map_b = sum(s.bytes for n, s in self.ops.items() if n in MAPPED)
        return {"flops": map_f / tot_f if tot_f else 0.0, "bytes": map_b / tot_b if tot_b else 0.0}

    def unmapped(self) -> list[tuple[str, OpStats]]:
        """The ops the trace does not hold, by share of FLOPs, then of bytes."""
        rest = [(n, s) for n, s in self.ops.items() if n not in MAPPED]
        return sorted(rest, key=lambda kv: (-kv[1].flops, -kv[1].bytes, kv[0]))

    def workload(self, name: str | None = None, description: str = "") -> Workload:
        cov = self.coverage()
        return Workload(name or self.name, [Call(c.op, dict(c.tensors), dict(c.attrs), c.stream, c.label,
                                                c.count, c.tiling) for c in self.calls],
                        description=description or (
                            f"Captured from PyTorch with simulator.capture(): {sum(c.count for c in self.calls)} "
                            f"calls ({len(self.calls)} distinct) covering {cov['flops']:.1%} of the step's FLOPs "
                            f"and {cov['bytes']:.1%} of its bytes"),
                        source="simulator.capture() (aten calls through a TorchDispatchMode)")

    def save(self, path: str | Path, name: str | None = None) -> Path:
        if not self.calls:
            raise StudyError("the capture holds no call of an operator we simulate (mapped: "
                             f"{', '.join(f'aten.{n} -> {op}' for n, (op, _) in MAPPED.items())}); nothing to save")
        return save_trace(self.workload(name or Path(path).stem), path)

    def summary(self, top: int = 10) -> str:
        cov = self.coverage()
        tot_f = sum(s.flops for s in self.ops.values()) or 1
        tot_b = sum(s.bytes for s in self.ops.values()) or 1
        lines = [f"captured {sum(c.count for c in self.calls)} calls ({len(self.calls)} distinct) of "
                 f"{', '.join(sorted(set(c.op for c in self.calls))) or 'no operator we simulate'}: "
                 f"{cov['flops']:.1%} of the step's FLOPs, {cov['bytes']:.1%} of its bytes"]
        rest = self.unmapped()
        if rest:
            lines.append(f"not mapped ({len(rest)} aten ops), by share of FLOPs, then bytes:")
            lines.append(f"  {'aten op':<36} {'calls':>7} {'FLOPs':>8} {'bytes':>8}")
            for n, s in rest[:top]:
                lines.append(f"  {n:<36} {s.calls:>7} {s.flops / tot_f:>8.1%} {s.bytes / tot_b:>8.1%}")
            if len(rest) > top:
                lines.append(f"  ... and {len(rest) - top} more")
        return "\n".join(lines)


def _conv_tbc_flops(inp, w, out) -> int:
    """2 x T_out x B x C_in x C_out x K multiply-adds of one ConvTBC (its backward is twice that:
    the input and the weight gradients)."""
    k, cin, cout = (int(d) for d in w.shape)
    return 2 * int(out.shape[0]) * int(inp.shape[1]) * cin * cout * k


def _flat_args(func, args: tuple, kwargs: dict) -> list:
    """The call's arguments in schema order (keyword ones included)."""
    if not kwargs:
        return list(args)
    out = list(args)
    for a in func._schema.arguments[len(args):]:
        out.append(kwargs.get(a.name, a.default_value))
    return out


def _tensor_bytes(x) -> int:
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return int(x.numel()) * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_tensor_bytes(v) for v in x)
    if isinstance(x, dict):
        return sum(_tensor_bytes(v) for v in x.values())
    return 0


@contextlib.contextmanager
def capture(name: str = "captured", merge: bool = True):
    """Record the aten calls made inside the block (see the module's docstring). merge=False keeps
    every call in the order it ran instead of counting identical ones."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    cap = Capture(name, merge)

    class _Aten(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            cap.record(func, args, kwargs, out)
            return out

    class _Composites(TorchFunctionMode):
        """torch.conv_tbc: its backward (a composite on CPU) is recorded as one call when autograd
        reaches its node, with the gradient autograd hands it."""
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            node = getattr(out, "grad_fn", None)
            if func is torch.conv_tbc and node is not None:
                inp, w, b = args[:3]
                pad = args[3] if len(args) > 3 else kwargs.get("pad", 0)

                def pre(grad_outputs, inp=inp, w=w, b=b, pad=pad):
                    st = cap.ops.setdefault("conv_tbc_backward", OpStats())
                    st.calls += 1
                    st.flops += 2 * _conv_tbc_flops(inp, w, grad_outputs[0])
                    cap.add("conv_tbc_backward", [grad_outputs[0], inp, w, b, pad])
                    cap.inside = "conv_tbc_backward"

                def post(grad_inputs, grad_outputs):
                    cap.inside = None
                node.register_prehook(pre)
                node.register_hook(post)
            return out

    with _Composites(), _Aten():
        yield cap


def run_script(path: str | Path, argv: list[str] | None = None, name: str | None = None) -> Capture:
    """Run a user's Python script under capture() (as `python script.py argv...` would)."""
    import runpy
    import sys
    from ..inputs import read_text
    path = Path(path)
    if not path.exists():
        raise StudyError(f"{path}: no such script")
    read_text(path, error=StudyError)        # a folder, binary: one line before Python runs it
    old = sys.argv
    sys.argv = [str(path)] + list(argv or [])
    try:
        with capture(name or path.stem) as cap:
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = old
    return cap


__all__ = ["capture", "Capture", "OpStats", "MAPPED", "run_script", "INSTALL"]
