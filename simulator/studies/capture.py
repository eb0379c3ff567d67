"""Capture a training step from a real PyTorch model: the aten calls of its forward and backward
that map to our operators become the simulated calls of a workload trace; every other call that
runs a kernel becomes an estimated call (simulator/studies/estimate.py), so that `replay`, `sweep`
and `regress` take the trace as a whole step.

    with simulator.capture() as cap:
        loss = model(x).sum()
        loss.backward()
    cap.save("traces/my_model.yaml")
    print(cap.summary())          # what the trace simulates, what it estimates, and the set-up left out

A `TorchDispatchMode` sees every aten call below autograd, forward and backward. The calls we map
(`convolution` -> Convolution, `convolution_backward` -> ConvolutionBackward, `native_batch_norm`
-> BatchNorm, `native_batch_norm_backward` -> BatchNormBackward, `add` / `mul` / `relu` /
`threshold_backward` / `sigmoid` / `silu` -> Add / Mul / Relu / ThresholdBackward / Sigmoid / Silu (floating tensor operands; a scalar or
integer operand is estimated), `silu_backward` -> SiluBackward, `glu` / `glu_backward` -> Glu / GluBackward, `sum` / `mean` -> ReduceSum / Mean, `mm` -> Mm,
`addmm` -> Addmm, `bmm` -> Matmul (batched), `max_pool2d_with_indices` -> MaxPool2dWithIndices,
`grid_sampler_2d` -> GridSampler2D, `grid_sampler_2d_backward` -> GridSampler2DBackward, `conv_tbc` -> ConvTbc, `conv_tbc_backward` -> ConvTbcBackward) keep
their shapes, dtypes and strides (a non-contiguous view stays one) and identical calls are counted
(`count`), in the order they first ran.

The captured region is the step: it begins at the first aten call made with autograd recording
and a tensor that requires grad (the forward's first layer), or at the first mapped call other
than the elementwise ones (NOT_STEP_START: set-up arithmetic is common; in a declared inference
pass, `kind="inference"`, any mapped call), and ends with the block. A step in which a backward
ran is a training step; one with none (a forward under `no_grad`, `inference_mode` or neither) is
an inference pass. The trace keeps which (`step: {kind, batch}`; `batch`, when given, lets replay
print samples a second). What runs before it in the block (building the model: `empty`, weight init
such as `uniform_` under no_grad, `_to_copy` casts of the parameters, creating the inputs) is
set-up: reported, not counted. Inside the step, views and allocations (`detach`, `view`,
`expand`, `empty`, ...) run no kernel and move no bytes; `ones_like` and its kind write their
result and read nothing. FLOPs are 2 x multiply-adds, from our own
formula for convolution and its backward (torch's `flop_counter` ignores `groups` in the weight
gradient) and ConvTBC, from `torch.utils.flop_counter` for the other matmul-like ops; elementwise
ops have none. Bytes are every tensor argument and result (a strided view counts the memory it
spans). torch is optional: without it this says how to install it.
"""
from __future__ import annotations

import contextlib
import operator
from dataclasses import dataclass
from pathlib import Path

from .trace import STEP_KINDS, Call, EstimatedCall, StudyError, Workload, save_trace

from .capture_ops import INSTALL, MAPPED, TORCH_DTYPES, _spec, _torch


# mapped ops that do not begin the step when they run before it (set-up arithmetic is common)
NOT_STEP_START = {"add", "mul", "relu", "threshold_backward", "sigmoid", "silu", "add_", "mul_", "relu_", "sum",
                  "mean"}

# ops on the Cube (matmul and convolution); every other op's estimate is on the vector unit
CUBE_OPS = {"convolution", "_convolution", "convolution_backward", "conv_tbc", "conv_tbc_backward",
            "mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "_addmm_activation",
            "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_flash_attention_backward",
            "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
            "_scaled_mm"}
# calls that run no kernel and move no data besides the views (func.is_view): allocations, and
# view-like ops whose schema does not say so
NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_unsafe_view",
             "lift_fresh", "is_same_size", "_has_compatible_shallow_copy_type", "sym_size", "sym_stride",
             "sym_numel", "sym_storage_offset", "_local_scalar_dense", "set_", "resize_"}


# factories shaped like their argument: they read its shape, not its data
LIKE_FACTORIES = {"zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like"}


@dataclass
class OpStats:
    calls: int = 0
    flops: int = 0
    bytes: int = 0


class Capture:
    """What a capture saw: the mapped calls (deduplicated, counted), the estimated calls (every
    other call that runs a kernel, identical ones counted), every aten op's calls, FLOPs and bytes
    in the step, and the set-up before it."""

    def __init__(self, name: str = "captured", merge: bool = True, kind: str | None = None, batch: int | None = None):
        if kind not in (None,) + STEP_KINDS:
            raise StudyError(f"capture kind {kind!r}: one of {', '.join(STEP_KINDS)} (or None: from autograd)")
        if batch is not None:
            try:
                n = -1 if isinstance(batch, bool) else operator.index(batch)
            except TypeError:
                n = -1
            if n <= 0:
                raise StudyError(f"capture batch {batch!r}: a positive integer (samples per step)")
            batch = n
        self.name, self.merge, self.declared, self.batch = name, merge, kind, batch
        self.autograd = False                      # the autograd engine ran a backward in the step
        self.calls: list[Call] = []
        self._index: dict[str, int] = {}
        self.estimated: list[EstimatedCall] = []
        self._est_index: dict[tuple, int] = {}
        self._mapped_estimated: list[EstimatedCall] = []     # per entry of self.calls
        self.ops: dict[str, OpStats] = {}          # aten op name -> stats in the step (mapped ones included)
        self.setup: dict[str, OpStats] = {}        # aten op name -> stats of the set-up before the step
        self.no_kernel: dict[str, int] = {}        # views and allocations in the step: calls
        self.started = False                       # the step has begun (see the module's docstring)
        self._flops = None
        self.inside: str | None = None             # a composite mapped op running: its parts are its own

    # ---- recording (called by the dispatch mode) ----
    def record(self, func, args: tuple, kwargs: dict, out) -> None:
        name = self.inside or func._overloadpacket.__name__
        kernel = not (func.is_view or name in NO_KERNEL)
        if not kernel:
            nbytes = 0
        elif name in LIKE_FACTORIES:
            nbytes = _tensor_bytes(out)
        else:
            nbytes = _tensor_bytes(args) + _tensor_bytes(kwargs) + _tensor_bytes(out)
        if not self.started:
            torch = _torch()
            if (name in MAPPED and (name not in NOT_STEP_START or self.declared == "inference")) or (
                    torch.is_grad_enabled() and _requires_grad(args, kwargs)):
                self.started = True
            else:
                st = self.setup.setdefault(name, OpStats())
                st.calls += 1
                st.bytes += nbytes
                return
        if not self.autograd and _in_backward(name):
            self.autograd = True
        stats = self.ops.setdefault(name, OpStats())
        stats.bytes += nbytes
        if self.inside:                 # the composite's own FLOPs were counted when it began
            return
        flops = self._count_flops(func, args, kwargs, out)
        stats.flops += flops
        stats.calls += 1
        estimated = _as_estimated(name, flops, nbytes, args, kwargs, out, self.ops[name].calls) if kernel else None
        if name in MAPPED and self.add(name, _flat_args(func, args, kwargs), estimated):
            pass
        elif kernel:
            self.add_estimated(estimated)
        else:
            self.no_kernel[name] = self.no_kernel.get(name, 0) + 1

    def add_estimated(self, est: EstimatedCall) -> None:
        """A call we do not simulate, as the estimate needs it (identical ones counted)."""
        key = est.key()
        if key in self._est_index:
            self.estimated[self._est_index[key]].count += 1
        else:
            self._est_index[key] = len(self.estimated)
            self.estimated.append(est)

    def add(self, name: str, args: list, as_estimated: EstimatedCall) -> bool:
        """A mapped call (aten op `name` with its schema-order arguments) into the trace, with its
        estimated form (for a trace that leaves its operator out of the simulated part); False
        when the operator cannot take this call (a scalar or integer operand): it is estimated."""
        op, fn = MAPPED[name]
        mapped = fn(args)
        if mapped is None:
            return False
        tensors, attrs = mapped
        call = Call(op, {k: _spec(op, k, t) for k, t in tensors.items() if t is not None}, attrs,
                    label=f"aten.{name} #{self.ops[name].calls}")
        key = call.key()
        if self.merge and key in self._index:
            self.calls[self._index[key]].count += 1
        else:
            self._index[key] = len(self.calls)
            self.calls.append(call)
            self._mapped_estimated.append(as_estimated)
        return True

    def _count_flops(self, func, args, kwargs, out) -> int:
        name = func._overloadpacket.__name__
        if name == "conv_tbc":                               # torch's registry has no formula for it
            return _conv_tbc_flops(args[0], args[1], out)
        if name in ("convolution", "_convolution", "convolution_backward"):
            return _convolution_flops(name, _flat_args(func, args, kwargs), out)
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
    def _simulated(self, simulate=None) -> set[str]:
        """The aten ops the trace simulates: every mapped one, or those of the operators `simulate`."""
        return {n for n, (op, _) in MAPPED.items() if simulate is None or op in simulate}

    def coverage(self, simulate=None) -> dict[str, float]:
        """The share of the step's FLOPs and bytes in the calls the trace simulates (all mapped
        calls, or those of the operators in `simulate`)."""
        sim = self._simulated(simulate)
        tot_f = sum(s.flops for s in self.ops.values())
        tot_b = sum(s.bytes for s in self.ops.values())
        map_f = sum(s.flops for n, s in self.ops.items() if n in sim)
        map_b = sum(s.bytes for n, s in self.ops.items() if n in sim)
        return {"flops": map_f / tot_f if tot_f else 0.0, "bytes": map_b / tot_b if tot_b else 0.0}

    def unmapped(self) -> list[tuple[str, OpStats]]:
        """The ops the trace estimates, by share of FLOPs, then of bytes (views and allocations,
        which run no kernel, are left out)."""
        rest = [(n, s) for n, s in self.ops.items() if n not in MAPPED and not (n in self.no_kernel and not s.bytes)]
        return sorted(rest, key=lambda kv: (-kv[1].flops, -kv[1].bytes, kv[0]))

    def workload(self, name: str | None = None, description: str = "", simulate=None) -> Workload:
        """The trace: the mapped calls simulated (all, or those of the operators in `simulate`;
        the others join the estimated part), every other kernel estimated."""
        cov = self.coverage(simulate)
        calls, estimated, index = [], [], {}
        for c, e in zip(self.calls, self._mapped_estimated):
            if simulate is None or c.op in simulate:
                calls.append(Call(c.op, dict(c.tensors), dict(c.attrs), c.stream, c.label, c.count, c.tiling))
            elif e.key() in index:          # identical estimates counted, as add_estimated does
                estimated[index[e.key()]].count += c.count
            else:
                index[e.key()] = len(estimated)
                estimated.append(EstimatedCall(e.op, e.unit, e.dtype, e.flops, e.bytes, c.count, c.label, e.shape))
        estimated += [EstimatedCall(e.op, e.unit, e.dtype, e.flops, e.bytes, e.count, e.label, e.shape)
                      for e in self.estimated]
        return Workload(name or self.name, calls,
                        description=description or (
                            f"Captured from PyTorch with simulator.capture(): {sum(c.count for c in calls)} "
                            f"simulated calls ({len(calls)} distinct) covering {cov['flops']:.1%} of the "
                            f"step's FLOPs and {cov['bytes']:.1%} of its bytes; "
                            f"{sum(e.count for e in estimated)} estimated calls ({len(estimated)} distinct)"),
                        source="simulator.capture() (aten calls through a TorchDispatchMode)",
                        extra={"step": {"kind": self.kind, **({"batch": self.batch} if self.batch else {})}},
                        estimated=estimated)

    def save(self, path: str | Path, name: str | None = None) -> Path:
        if not self.calls:
            raise StudyError("the capture holds no call of an operator we simulate (mapped: "
                             f"{', '.join(f'aten.{n} -> {op}' for n, (op, _) in MAPPED.items())}); nothing to save")
        return save_trace(self.workload(name or Path(path).stem), path)

    @property
    def kind(self) -> str:
        """'training' when a backward ran in the step, else 'inference' (a forward, under no_grad,
        inference_mode or neither), unless declared."""
        return self.declared or ("training" if self.autograd else "inference")

    def summary(self, top: int = 10) -> str:
        cov = self.coverage()
        tot_f = sum(s.flops for s in self.ops.values()) or 1
        tot_b = sum(s.bytes for s in self.ops.values()) or 1
        lines = [f"captured {sum(c.count for c in self.calls)} calls ({len(self.calls)} distinct) of "
                 f"{', '.join(sorted(set(c.op for c in self.calls))) or 'no operator we simulate'}: "
                 f"{cov['flops']:.1%} of the step's FLOPs, {cov['bytes']:.1%} of its bytes",
                 f"the step: {'a training step (a backward ran)' if self.kind == 'training' else 'an inference pass (a forward, no backward)'}"
                 + (f", batch {self.batch}" if self.batch else "")]
        lines.append(f"estimated (not simulated; a roofline on replay): {sum(e.count for e in self.estimated)} "
                     f"calls ({len(self.estimated)} distinct)")
        if self.no_kernel:
            lines.append(f"views and allocations (no kernel, no bytes): {sum(self.no_kernel.values())} calls")
        if self.setup:
            top_setup = sorted(self.setup.items(), key=lambda kv: -kv[1].calls)[:4]
            lines.append(f"set-up before the step (not counted): {sum(s.calls for s in self.setup.values())} calls "
                         f"({', '.join(f'{n} x{s.calls}' for n, s in top_setup)}"
                         f"{', ...' if len(self.setup) > 4 else ''})")
        rest = self.unmapped()
        if rest:
            lines.append(f"not simulated ({len(rest)} aten ops), by share of FLOPs, then bytes:")
            lines.append(f"  {'aten op':<36} {'calls':>7} {'FLOPs':>8} {'bytes':>8}")
            for n, s in rest[:top]:
                lines.append(f"  {n:<36} {s.calls:>7} {s.flops / tot_f:>8.1%} {s.bytes / tot_b:>8.1%}")
            if len(rest) > top:
                lines.append(f"  ... and {len(rest) - top} more")
        return "\n".join(lines)


def _as_estimated(name: str, flops: int, nbytes: int, args, kwargs, out, nth: int) -> EstimatedCall:
    """A call as the estimate takes it: its unit, dtype, work and bytes."""
    tensors = _tensors(out) + _tensors(args) + _tensors(kwargs)
    unit = "cube" if name in CUBE_OPS else "vector"
    if unit == "vector":            # one operation per element of the largest tensor
        flops = max([flops] + [int(t.numel()) for t in tensors])
    floating = [t for t in tensors if t.dtype.is_floating_point]
    first = (floating or tensors or [None])[0]
    dtype = TORCH_DTYPES.get(str(first.dtype).replace("torch.", ""), "FLOAT") if first is not None else "FLOAT"
    outs = _tensors(out)
    shape = tuple(int(d) for d in outs[0].shape) if outs else ()
    return EstimatedCall(f"aten.{name}", unit, dtype, int(flops), int(nbytes), 1, f"aten.{name} #{nth}", shape)


def _convolution_flops(name: str, a: list, out) -> int:
    """2 x multiply-adds of a convolution (forward) or of its backward's requested gradients.
    One output element of a convolution takes C_in / groups x prod(kernel) multiply-adds, so a
    forward makes N x C_out x prod(out spatial) x (C_in / groups) x prod(kernel) of them; the
    weight shape [C_out, C_in / groups, k...] carries the groups. A transposed convolution is the
    adjoint of the forward one its weight describes: the same count with input and output
    swapped. gradInput and gradWeight each take as many multiply-adds as the forward (the
    gradient of a bilinear map); gradBias (a sum) is not counted, as the forward's bias is not."""
    if name == "convolution_backward":
        go, inp, w = a[0], a[1], a[2]
        transposed, mask = bool(a[7]), a[10]
        y, x = go, inp
        n_grads = int(bool(mask[0])) + int(bool(mask[1]))
    else:
        inp, w = a[0], a[1]
        transposed = bool(a[6])
        y, x = out, inp
        n_grads = 1
    wide = x if transposed else y          # the side whose channels are the weight's first dimension
    macs = int(wide.shape[0]) * int(w.shape[0]) * int(w.shape[1])
    for d in list(wide.shape[2:]) + list(w.shape[2:]):
        macs *= int(d)
    return 2 * macs * n_grads


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


def _tensors(x) -> list:
    """The tensors in an argument, result, list or mapping, in order."""
    torch = _torch()
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _tensor_bytes(x) -> int:
    """Bytes of the tensors: the elements of a contiguous one, the memory a strided view spans
    (an expanded scalar is one element, however large its shape)."""
    total = 0
    for t in _tensors(x):
        n = int(t.numel())
        if n and not t.is_contiguous():
            n = min(n, 1 + sum((int(d) - 1) * abs(int(s)) for d, s in zip(t.shape, t.stride())))
        total += n * t.element_size()
    return total


def _in_backward(name: str) -> bool:
    """The autograd engine is running a backward (its graph task), or the op is a backward."""
    task = getattr(_torch()._C, "_current_graph_task_id", None)
    return (task is not None and task() >= 0) or name.endswith("_backward")


def _requires_grad(args, kwargs) -> bool:
    return any(t.requires_grad for t in _tensors(args) + _tensors(kwargs))


@contextlib.contextmanager
def capture(name: str = "captured", merge: bool = True, kind: str | None = None, batch: int | None = None):
    """Record the aten calls made inside the block (see the module's docstring). merge=False keeps
    every call in the order it ran instead of counting identical ones. kind: 'training' or
    'inference' (default: 'training' if a backward ran); batch: the samples a step processes, for
    replay's samples per second."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    cap = Capture(name, merge, kind, batch)

    class _Aten(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            # under inference_mode the composites (conv2d, batch_norm, linear) reach the mode whole,
            # where autograd would have decomposed them: run their C++ composite kernel here, back
            # into the mode (not decompose(), whose Python decompositions eager never runs)
            if torch.is_inference_mode_enabled() and torch._C._dispatch_has_kernel_for_dispatch_key(
                    func.name(), "CompositeImplicitAutograd"):
                with self:
                    return func._op_dk(torch._C.DispatchKey.CompositeImplicitAutograd, *args, **kwargs)
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
                    cap.started = True
                    st = cap.ops.setdefault("conv_tbc_backward", OpStats())
                    st.calls += 1
                    flops = 2 * _conv_tbc_flops(inp, w, grad_outputs[0])
                    st.flops += flops
                    # gradOutput read, the three inputs read and their gradients written
                    nbytes = _tensor_bytes(grad_outputs[0]) + 2 * _tensor_bytes([inp, w, b])
                    cap.add("conv_tbc_backward", [grad_outputs[0], inp, w, b, pad],
                            EstimatedCall("aten.conv_tbc_backward", "cube", TORCH_DTYPES.get(
                                str(w.dtype).replace("torch.", ""), "FLOAT"), flops, nbytes, 1,
                                f"aten.conv_tbc_backward #{st.calls}", tuple(int(d) for d in inp.shape)))
                    cap.inside = "conv_tbc_backward"

                def post(grad_inputs, grad_outputs):
                    cap.inside = None
                node.register_prehook(pre)
                node.register_hook(post)
            return out

    with _Composites(), _Aten():
        yield cap


def run_script(path: str | Path, argv: list[str] | None = None, name: str | None = None, kind: str | None = None,
               batch: int | None = None) -> Capture:
    """Run a user's Python script under capture() (as `python script.py argv...` would)."""
    import runpy
    import sys
    from ..inputs import read_text
    path = Path(path)
    read_text(path, "script", error=StudyError)     # missing, a folder, binary, a bad path: one line before Python runs it
    old = sys.argv
    sys.argv = [str(path)] + list(argv or [])
    try:
        with capture(name or path.stem, kind=kind, batch=batch) as cap:
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = old
    return cap


__all__ = ["capture", "Capture", "OpStats", "MAPPED", "CUBE_OPS", "NO_KERNEL", "run_script", "INSTALL"]
