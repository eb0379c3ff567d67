"""What each captured aten op becomes: the operator it maps to (MAPPED) and how its arguments
become that operator's tensors and attributes (one small function per op). simulator.studies.capture
records the calls; the module docstring there lists the mapping in words."""
from __future__ import annotations

from typing import Callable

from ..enums import aclDataType
from .trace import StudyError, TensorSpec, default_init

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


def _convolution(a):
    inp, w, bias, stride, padding, dilation, transposed, out_pad, groups = a[:9]
    return ({"input": inp, "weight": w, "bias": bias},
            {"stride": _ints(stride), "padding": _ints(padding), "dilation": _ints(dilation),
             "transposed": bool(transposed), "outputPadding": _ints(out_pad), "groups": int(groups),
             "cubeMathType": 0})


def _batch_norm(a):
    inp, w, b, rm, rv, training, momentum, eps = a[:8]
    return ({"input": inp, "weight": w, "bias": b, "runningMean": rm, "runningVar": rv},
            {"training": bool(training), "momentum": float(momentum), "eps": float(eps)})


def _batch_norm_backward(a):
    go, inp, w, rm, rv, save_mean, save_invstd, training, eps, mask = a[:10]
    # in eval mode torch hands empty saved statistics: none, as aclnn takes them
    save_mean, save_invstd = (None, None) if not training or save_mean is None or save_mean.numel() == 0 \
        else (save_mean, save_invstd)
    # torch's save_invstd is 1 / sqrt(var + eps), CANN's the variance: the tensor's shape is what
    # the trace keeps
    return ({"gradOut": go, "input": inp, "weight": w, "runningMean": rm, "runningVar": rv,
             "saveMean": save_mean, "saveInvstd": save_invstd},
            {"training": bool(training), "eps": float(eps), "outputMask": [bool(m) for m in mask]})


def _floating(*ts) -> bool:
    """Tensors of FLOAT, FLOAT16 or BF16 with at least one dimension (an operand the operators
    take; a 0-dim tensor promotes as a scalar in torch, which they do not model; DOUBLE runs on
    no vector or cube unit we model)."""
    return all(hasattr(t, "dtype") and hasattr(t, "shape") and t.dtype.is_floating_point and t.dim() > 0
               and str(t.dtype) != "torch.float64" for t in ts)


def _add(a):
    x, y = a[0], a[1]
    alpha = a[2] if len(a) > 2 and a[2] is not None else 1
    if not _floating(x, y) or isinstance(alpha, bool):
        return None
    return {"self": x, "other": y}, {"alpha": float(alpha)}


def _mul(a):
    return ({"self": a[0], "other": a[1]}, {}) if _floating(a[0], a[1]) else None


def _unary(a):
    return ({"self": a[0]}, {}) if _floating(a[0]) else None


def _threshold_backward(a):
    go, x, threshold = a[:3]
    return ({"gradOutput": go, "self": x}, {"threshold": float(threshold)}) if _floating(go, x) else None


def _silu_backward(a):
    return {"gradOutput": a[0], "self": a[1]}, {}


def _glu(a):
    return ({"self": a[0]}, {"dim": int(a[1]) if len(a) > 1 else -1}) if _floating(a[0]) else None


def _glu_backward(a):
    return ({"gradOut": a[0], "self": a[1]}, {"dim": int(a[2])}) if _floating(a[0], a[1]) else None


def _reduction(dims_name: str, keep_name: str):
    """sum / mean, their default (every dim) and .dim overloads, dtype kwarg included; a floating
    self only."""
    def mapped(a):
        x = a[0]
        if not _floating(x):
            return None
        if len(a) >= 3 or (len(a) == 2 and isinstance(a[1], (list, tuple))):
            dims, keep, dtype = (list(a[1]) if a[1] is not None else []), bool(len(a) > 2 and a[2]), \
                (a[3] if len(a) > 3 else None)
        else:
            dims, keep, dtype = [], False, (a[1] if len(a) > 1 else None)
        name = TORCH_DTYPES.get(str(dtype or x.dtype).replace("torch.", ""))
        if name not in ("FLOAT", "FLOAT16", "BF16"):
            return None
        return {"self": x}, {dims_name: [int(d) for d in dims], keep_name: keep, "dtype": int(aclDataType[f"ACL_{name}"])}
    return mapped


def _mm(a):
    return ({"self": a[0], "mat2": a[1]}, {"cubeMathType": 0}) if _floating(a[0], a[1]) else None


def _addmm(a):
    (s, x, w), beta, alpha = a[:3], (a[3] if len(a) > 3 else 1), (a[4] if len(a) > 4 else 1)
    if not _floating(x, w, s.reshape(-1)) or s.dim() > 2 or isinstance(beta, bool) or isinstance(alpha, bool):
        return None
    return {"self": s, "mat1": x, "mat2": w}, {"beta": float(beta), "alpha": float(alpha), "cubeMathType": 0}


def _max_pool2d_with_indices(a):
    k, stride, padding, dilation = ([int(v) for v in (a[i] if len(a) > i and a[i] is not None else d)]
                                    for i, d in ((1, []), (2, []), (3, [0]), (4, [1])))
    if not _floating(a[0]) or any(v != 1 for v in dilation):
        return None
    return {"self": a[0]}, {"kernelSize": k, "stride": stride, "padding": padding, "dilation": dilation,
                            "ceilMode": bool(a[5]) if len(a) > 5 else False}


def _bmm(a):
    return ({"self": a[0], "other": a[1]}, {"cubeMathType": 0}) if _floating(a[0], a[1]) else None


def _grid_attrs(interp, pad, align) -> dict:
    return {"interpolationMode": int(interp), "paddingMode": int(pad), "alignCorners": bool(align)}


def _grid_sampler_2d(a):
    return ({"input": a[0], "grid": a[1]}, _grid_attrs(*a[2:5])) if _floating(a[0], a[1]) else None


def _grid_sampler_2d_backward(a):
    go, inp, grid, interp, pad, align, mask = a[:7]
    return ({"gradOutput": go, "input": inp, "grid": grid},
            _grid_attrs(interp, pad, align) | {"outputMask": [bool(m) for m in mask]})


def _conv_tbc(a):
    x, w, bias = a[:3]
    if not _floating(x, w, bias):
        return None
    return {"self": x, "weight": w, "bias": bias}, {"pad": int(a[3]) if len(a) > 3 else 0, "cubeMathType": 0}


def _conv_tbc_backward(a):
    grad, inp, w, bias, pad = a[:5]
    return {"self": grad, "input": inp, "weight": w, "bias": bias}, {"pad": int(pad), "cubeMathType": 0}


MAPPED: dict[str, tuple[str, Callable]] = {
    "convolution": ("Convolution", _convolution),
    "convolution_backward": ("ConvolutionBackward", _convolution_backward),
    "native_batch_norm": ("BatchNorm", _batch_norm),
    "native_batch_norm_backward": ("BatchNormBackward", _batch_norm_backward),
    "add": ("Add", _add),
    "mul": ("Mul", _mul),
    "relu": ("Relu", _unary),
    # the in-place forms (torchvision's ReLU(inplace=True), `out += identity`): the same kernels
    "add_": ("Add", _add),
    "mul_": ("Mul", _mul),
    "relu_": ("Relu", _unary),
    "threshold_backward": ("ThresholdBackward", _threshold_backward),
    "sigmoid": ("Sigmoid", _unary),
    "silu": ("Silu", _unary),
    "silu_backward": ("SiluBackward", _silu_backward),
    "glu": ("Glu", _glu),
    "glu_backward": ("GluBackward", _glu_backward),
    "sum": ("ReduceSum", _reduction("dims", "keepDims")),
    "mean": ("Mean", _reduction("dim", "keepDim")),
    "mm": ("Mm", _mm),
    "addmm": ("Addmm", _addmm),
    "bmm": ("Matmul", _bmm),
    "grid_sampler_2d": ("GridSampler2D", _grid_sampler_2d),
    "max_pool2d_with_indices": ("MaxPool2dWithIndices", _max_pool2d_with_indices),
    "grid_sampler_2d_backward": ("GridSampler2DBackward", _grid_sampler_2d_backward),
    # composite on CPU (it decomposes into mm calls below autograd, where the dispatch mode sits;
    # torch_npu runs it as one kernel): recorded from the autograd node of torch.conv_tbc instead
    "conv_tbc_backward": ("ConvTbcBackward", _conv_tbc_backward),
    "conv_tbc": ("ConvTbc", _conv_tbc),
}
