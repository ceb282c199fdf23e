"""`sg.nn.functional`: torch.nn.functional's activations and losses over `sg.Tensor`.

Every function is a composition of Tensor ops (rows of the derivative table), so its
gradient, second derivative and forward-mode tangent are the rows' own: no formula
lives here. The one exception is `erf` (exact GELU), which the table has no row for: a
custom Function whose forward is `math.erf` per element and whose backward,
2/sqrt(pi) * exp(-x**2), is again Tensor ops (so it can be differentiated again).
Defaults and error texts are torch 2.x's.
"""

from __future__ import annotations

import math
import warnings

import numpy

from srcgrad.autograd import torch_methods
from srcgrad.autograd.function import Function
from srcgrad.autograd.ops import apply
from srcgrad.autograd.tensor import _RNG, Tensor

__all__ = ["relu", "relu_", "leaky_relu", "gelu", "silu", "elu", "softplus", "sigmoid", "tanh",
           "softmax", "log_softmax", "logsumexp", "cross_entropy", "nll_loss", "mse_loss",
           "l1_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "linear",
           "dropout", "one_hot", "erf"]

_REDUCTIONS = ("none", "mean", "sum")


def _t(x):
    return x if isinstance(x, Tensor) else Tensor._make(numpy.asarray(x))


# ---------------------------------------------------------------- activations
def relu(input, inplace=False):
    if inplace:
        return relu_(input)
    return input.relu()


def relu_(input):
    with_grad = input.clamp(min=0)
    input.copy_(with_grad)
    return input


def leaky_relu(input, negative_slope=0.01, inplace=False):
    out = numpy.where(input._data > 0, input, input * negative_slope)
    return input.copy_(out) if inplace else out


def sigmoid(input):
    return input.sigmoid()


def tanh(input):
    return input.tanh()


def silu(input, inplace=False):
    out = input * input.sigmoid()
    return input.copy_(out) if inplace else out


def elu(input, alpha=1.0, inplace=False):
    negative = (numpy.minimum(input, 0.0).exp() - 1.0) * alpha
    out = numpy.where(input._data > 0, input, negative)
    return input.copy_(out) if inplace else out


class _Erf(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        data = x.detach().numpy()
        values = numpy.vectorize(math.erf, otypes=[numpy.float64])(data) if data.size else data
        return Tensor._make(numpy.asarray(values, dtype=data.dtype))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ((x * x * -1.0).exp() * (2.0 / math.sqrt(math.pi)))


def erf(input):
    """The error function, elementwise (torch.erf)."""
    return _Erf.apply(_t(input))


def gelu(input, approximate="none"):
    """x * Phi(x) (torch's default), or torch's tanh approximation."""
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (inner.tanh() + 1.0)
    if approximate != "none":
        raise RuntimeError("approximate argument must be either none or tanh.")
    return input * 0.5 * (erf(input * (1.0 / math.sqrt(2.0))) + 1.0)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta; x itself where beta * x > threshold (torch's)."""
    scaled = input * beta
    soft = numpy.logaddexp(0.0, scaled) * (1.0 / beta) if beta != 1 else numpy.logaddexp(0.0, input)
    return numpy.where(scaled._data > threshold, input, soft)


def logsumexp(input, dim, keepdim=False):
    return torch_methods.logsumexp(input, dim, keepdim)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return torch_methods.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return torch_methods.log_softmax(input, dim, dtype)


# ---------------------------------------------------------------- losses
def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy(size_average, reduce, reduction):
    """torch's size_average/reduce arguments (deprecated) mapped onto `reduction`."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else "mean" if size_average else "sum"


def _class_weights(target, weight, ignore_index, dtype):
    """Per-element weights of class-index targets (0 where ignored) and the targets
    with ignored entries replaced by class 0 (so gathering them stays in range)."""
    t = numpy.asarray(target._data if isinstance(target, Tensor) else target)
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"expected scalar type Long but found {_torch_name(t.dtype)}")
    keep = t != ignore_index
    safe = numpy.where(keep, t, 0)
    if weight is None:
        w = keep.astype(dtype)
        return Tensor._make(w), safe, None
    w = weight[Tensor._make(safe)] * Tensor._make(keep.astype(dtype))
    return w, safe, keep


def _torch_name(dtype) -> str:
    return {"float32": "Float", "float64": "Double", "int32": "Int", "bool": "Bool"}.get(
        numpy.dtype(dtype).name, str(dtype))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """-input[n, target[n], ...] * weight[target[n]], torch's nll_loss."""
    reduction = _legacy(size_average, reduce, reduction)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean" and weight is None and input._data.ndim in (1, 2):
        t = numpy.asarray(target._data if isinstance(target, Tensor) else target)
        if t.shape == input.shape[:input._data.ndim - 1]:
            return _nll_mean(input, t, ignore_index)
    if input._data.ndim == 1:  # (C,) with a 0-d target
        return nll_loss(input.unsqueeze(0), _t(target).reshape(1), weight, None, ignore_index,
                        None, reduction).squeeze(0) if reduction == "none" else \
            nll_loss(input.unsqueeze(0), _t(target).reshape(1), weight, None, ignore_index,
                     None, reduction)
    t = numpy.asarray(target._data if isinstance(target, Tensor) else target)
    if t.shape != input.shape[:1] + input.shape[2:]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({t.shape[0] if t.ndim else 0}).")
    if input._data.ndim == 2:
        return _nll_weighted(input, t, weight, ignore_index, reduction)
    w, safe, _ = _class_weights(target, weight, ignore_index, input._data.dtype)
    picked = numpy.take_along_axis(input, numpy.expand_dims(safe, 1), axis=1).squeeze(1)
    loss = picked * w * -1.0
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


def _nll_mean(input, t, ignore_index):
    """The common case, (N, C) or (C,) input, one node: torch_nll_loss (torch's
    NllLossBackward0) over the kept targets (row's comment, rules/torch_rows.py)."""
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"expected scalar type Long but found {_torch_name(t.dtype)}")
    keep = t != ignore_index
    kept = numpy.count_nonzero(keep)
    C = input._data.shape[-1]
    if kept == t.size:  # every target kept, the common case: no mask to apply
        picked = t.reshape(t.shape + (1,)) == numpy.arange(C)
        # a target in [0, C) picks one class, one outside none (torch's error below)
        safe = None if numpy.count_nonzero(picked) == kept else t
    else:
        safe = numpy.where(keep, t, 0)
        # one test for both ends: a negative target wraps to a huge unsigned one (torch's
        # error, where the composition's take_along_axis read -1 as the last class)
        if not (safe.astype(numpy.uint64) >= C).any():
            picked = (safe.reshape(t.shape + (1,)) == numpy.arange(C)) & keep.reshape(
                t.shape + (1,))
            safe = None
    if safe is not None:
        bad = (safe < 0) | (safe >= C)
        raise IndexError(f"Target {int(safe[bad].flat[0])} is out of bounds.")
    count = numpy.asarray(kept, input._data.dtype)
    return apply("torch_nll_loss", {}, (), (input, picked, count), "NllLossBackward0")


def _nll_weighted(input, t, weight, ignore_index, reduction):
    """(N, C) input with class weights or reduction 'sum'/'none': one node, torch_nll_weighted
    (torch's NllLossBackward0; the composition was seven nodes)."""
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"expected scalar type Long but found {_torch_name(t.dtype)}")
    keep = t != ignore_index
    safe = numpy.where(keep, t, 0)
    C, dtype = input._data.shape[-1], input._data.dtype
    if (safe.astype(numpy.uint64) >= C).any():
        bad = (safe < 0) | (safe >= C)
        raise IndexError(f"Target {int(safe[bad].flat[0])} is out of bounds.")
    picked = (safe[:, None] == numpy.arange(C)) & keep[:, None]
    w = numpy.ones(C, dtype) if weight is None else numpy.asarray(
        weight._data if isinstance(weight, Tensor) else weight, dtype)
    wpicked = numpy.where(picked, w, 0).astype(dtype)
    denom = numpy.asarray(wpicked.sum(), dtype)
    return apply("torch_nll_weighted", {"reduction": reduction}, reduction,
                 (input, picked, wpicked, denom), "NllLossBackward0")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over dim 1 (dim 0 of a 1-d input) and nll_loss, with torch's label
    smoothing; `target` holds class indices or (floating) class probabilities."""
    reduction = _legacy(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    class_dim = 0 if input._data.ndim == 1 else 1
    logp = log_softmax(input, dim=class_dim)
    C = input.shape[class_dim]
    target_data = numpy.asarray(target._data if isinstance(target, Tensor) else target)
    if target_data.dtype.kind == "f":  # class probabilities
        probs = _t(target)
        if label_smoothing:
            probs = probs * (1 - label_smoothing) + label_smoothing / C
        w = 1.0 if weight is None else weight.reshape((C,) + (1,) * (input.ndim - 1 - class_dim))
        loss = (logp * w * probs).sum(class_dim) * -1.0
        if reduction == "mean":
            return loss.sum() / (input.shape[0] if input.ndim > 1 else 1) / (
                int(numpy.prod(input.shape[2:])) if input.ndim > 2 else 1)
        return _reduce(loss, reduction)
    nll = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if not label_smoothing:
        return nll
    if input._data.ndim == 1:
        logp, target_data = logp.unsqueeze(0), target_data.reshape(1)
    wshape = (C,) + (1,) * (logp.ndim - 2)
    keep = Tensor._make((target_data != ignore_index).astype(input._data.dtype))
    per = logp if weight is None else logp * weight.reshape(wshape)
    smooth = per.sum(1) * keep * -1.0
    if reduction == "mean":
        if weight is None:
            smooth = smooth.sum() / keep.sum()
        else:
            w, _, _ = _class_weights(target_data, weight, ignore_index, input._data.dtype)
            smooth = smooth.sum() / w.sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    elif input._data.ndim == 1:
        smooth = smooth.squeeze(0)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / C)


def _check_same_size(input, target, name):
    if tuple(_t(target).shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({_size(target)}) that is different to the input "
                      f"size ({_size(input)}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", UserWarning,
                      stacklevel=3)


def _size(x) -> str:
    return f"torch.Size({list(_t(x).shape)})"


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _check_same_size(input, target, "mse_loss")
    d = input - target
    loss = d * d if weight is None else d * d * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _check_same_size(input, target, "l1_loss")
    loss = (input - target).abs()
    return _reduce(loss if weight is None else loss * weight,
                   _legacy(size_average, reduce, reduction))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)), each log clamped at -100 as torch's."""
    if tuple(_t(target).shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({_size(target)}) that is different to the input "
                         f"size ({_size(input)}) is deprecated. Please ensure they have the same "
                         "size.")
    data = input._data
    if data.size and (numpy.any(data < 0) or numpy.any(data > 1)):
        raise RuntimeError("all elements of input should be between 0 and 1")
    log_x = input.log().clamp(min=-100.0)
    log_1mx = (input * -1.0 + 1.0).log().clamp(min=-100.0)
    loss = (target * log_x + (target * -1.0 + 1.0) * log_1mx) * -1.0
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """(1 - t) x + (1 + (pos_weight - 1) t) log(1 + exp(-x)), stably (torch's)."""
    if tuple(_t(target).shape) != tuple(input.shape):
        raise ValueError(f"Target size ({_size(target)}) must be the same as input size "
                         f"({_size(input)})")
    softplus_neg = numpy.logaddexp(0.0, input * -1.0)
    if pos_weight is None:
        loss = (target * -1.0 + 1.0) * input + softplus_neg
    else:
        lw = (pos_weight - 1.0) * target + 1.0
        loss = (target * -1.0 + 1.0) * input + lw * softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction))


# ---------------------------------------------------------------- layers without modules
def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    out = input @ weight.t()
    return out if bias is None else out + bias


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p and scales the rest by 1 / (1 - p) when
    `training`; the input itself otherwise (torch's). The mask comes from sg's generator
    (`sg.manual_seed`)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        keep = _RNG[0].random(input.shape) >= p
        out = input * Tensor._make((keep / (1.0 - p)).astype(input._data.dtype))
    return input.copy_(out) if inplace else out


def one_hot(tensor, num_classes=-1):
    data = numpy.asarray(tensor._data if isinstance(tensor, Tensor) else tensor)
    if data.dtype.kind not in "iu":
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    n = int(data.max()) + 1 if num_classes == -1 else num_classes
    return Tensor._make((data[..., None] == numpy.arange(n)).astype(numpy.int64))
