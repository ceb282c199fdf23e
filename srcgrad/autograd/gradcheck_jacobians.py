"""torch's deprecated `get_numerical_jacobian` / `get_analytical_jacobian` for sg.Tensors,
reached as `from srcgrad.autograd.gradcheck import get_numerical_jacobian` (torch's
`from torch.autograd.gradcheck import ...`; `sg.autograd.gradcheck` is the function, as
`torch.autograd.gradcheck` is).

Both follow torch 2.14's gradcheck.py: Jacobians are laid out (input numel, output
numel), the numerical one of `fn`'s first output only, by central differences that
perturb the input tensors' values in place (so `target` may be tensors `fn` reaches
some other way), in the output's dtype; the analytical one by one VJP per output
element, run twice for torch's reentrancy flag. Each warns torch's FutureWarning.
"""

from __future__ import annotations

import warnings

import numpy

from srcgrad.autograd import engine
from srcgrad.autograd.tensor import Tensor

__all__ = ["get_numerical_jacobian", "get_analytical_jacobian"]


def _deprecated(name: str) -> None:
    warnings.warn(f"`{name}` was part of PyTorch's private API and not meant to be exposed. We "
                  "are deprecating it and it will be removed in a future version of PyTorch. If "
                  "you have a specific use for this or feature request for this to be a stable "
                  "API, please file us an issue at https://github.com/pytorch/pytorch/issues/new",
                  FutureWarning, stacklevel=3)


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _tensors(values) -> list:
    return [v for v in _as_tuple(values) if isinstance(v, Tensor)]


def get_numerical_jacobian(fn, inputs, target=None, eps=1e-3, grad_out=1.0) -> tuple:
    """Per tensor of `target` (default `inputs`) that requires grad, d fn(inputs)[0] / d it
    by central differences: a tensor of shape (its numel, the first output's numel)."""
    _deprecated("get_numerical_jacobian")
    if grad_out != 1.0:
        raise ValueError("Expected grad_out to be 1.0. get_numerical_jacobian no longer supports "
                         "values of grad_out != 1.0.")

    packed = _as_tuple(inputs)  # torch calls fn with the inputs as one tuple

    def first_output():
        return _tensors(fn(packed))[0]

    # fn runs in the caller's grad mode, as torch calls it
    out = first_output()
    if out._data.dtype.kind == "c":
        raise ValueError("Expected output to be non-complex. get_numerical_jacobian no "
                         "longer supports functions that return complex outputs.")
    dtype = out._data.dtype
    targets = [t for t in (packed if target is None else _as_tuple(target))
               if isinstance(t, Tensor) and t.requires_grad]
    jacobians = []
    for t in targets:
        flat = t._data.reshape(-1)  # a view: the perturbation is seen by fn
        if not numpy.shares_memory(flat, t._data):
            raise NotImplementedError("get_numerical_jacobian: srcgrad perturbs inputs in "
                                      "place and needs each target's values contiguous")
        jac = numpy.zeros((flat.size, out._data.size), dtype)
        for i in range(flat.size):
            orig = flat[i].copy()
            flat[i] = orig - eps
            a = numpy.array(first_output()._data, dtype=dtype)
            flat[i] = orig + eps
            b = numpy.array(first_output()._data, dtype=dtype)
            flat[i] = orig
            jac[i] = ((b - a) / dtype.type(2 * eps)).reshape(-1)
        jacobians.append(Tensor._make(jac))
    return tuple(jacobians)


def _rows(output, diff_inputs) -> list:
    """Per input, the VJPs of the one-hot cotangents: (input numel, output numel)."""
    jacs = [numpy.zeros((x._data.size, output._data.size), x._data.dtype) for x in diff_inputs]
    sizes_ok, types_ok = True, True
    for row in range(output._data.size):
        v = numpy.zeros(output._data.shape, output._data.dtype)
        v.reshape(-1)[row] = 1
        grads = engine.grad([output], diff_inputs, [Tensor._make(v)], retain_graph=True,
                            allow_unused=True)
        for j, (g, x) in enumerate(zip(grads, diff_inputs)):
            if g is None:
                continue
            sizes_ok &= g.shape == x.shape
            types_ok &= g._data.dtype == x._data.dtype
            jacs[j][:, row] = numpy.asarray(g._data).reshape(-1) if sizes_ok else 0
    return jacs, sizes_ok, types_ok


def get_analytical_jacobian(inputs, output, nondet_tol=0.0, grad_out=1.0) -> tuple:
    """(jacobians, reentrant, sizes_ok, types_ok): per input that requires grad, d output /
    d it from the engine, shape (its numel, output numel); reentrant: two runs agree within
    nondet_tol."""
    _deprecated("get_analytical_jacobian")
    if grad_out != 1.0:
        raise ValueError("Expected grad_out to be 1.0. get_analytical_jacobian no longer supports "
                         "values of grad_out != 1.0.")
    if output._data.dtype.kind == "c":
        raise ValueError("Expected output to be non-complex. get_analytical_jacobian no longer "
                         "supports functions that return complex outputs.")
    diff_inputs = [x for x in _as_tuple(inputs) if isinstance(x, Tensor) and x.requires_grad]
    first, sizes_ok, types_ok = _rows(output, diff_inputs)
    second, _, _ = _rows(output, diff_inputs)
    reentrant = all(a.size == 0 or float(numpy.max(numpy.abs(a - b))) <= nondet_tol
                    for a, b in zip(first, second))
    return tuple(Tensor._make(j) for j in first), reentrant, sizes_ok, types_ok
