"""NumPy functions applied to Tensors: `np.exp(t)`, `np.sum(t, axis=0)`, `t1 @ ndarray`.

`__array_ufunc__` and `__array_function__` look the called object up in the derivative
table (`rules.lookup_callable`) and apply its row (srcgrad.autograd.ops). A NumPy
function with no row runs on the plain arrays when no gradient is needed and is a
TypeError otherwise, never a silently wrong gradient. `numpy.add.at` on a Tensor is
the `scatter_index` row added in place (srcgrad.autograd.inplace.add_at).
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.autograd import grad_mode
from srcgrad.autograd.inplace import add_at
from srcgrad.autograd.ops import call_rule, strip
from srcgrad.autograd.tensor import Tensor

_STATE = grad_mode.STATE
_ndarray = numpy.ndarray

def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if kwargs.get("out") is not None:
        return NotImplemented
    if method == "at" and ufunc is numpy.add:
        target, index, values = inputs
        return add_at(target, index, values)
    if method != "__call__":
        return NotImplemented
    rule = rules.lookup_callable(ufunc)
    if rule is None:
        return _fallback(ufunc, inputs, kwargs)
    return call_rule(rule, inputs, kwargs)


def array_function(self, func, types, args, kwargs):
    rule = rules.lookup_callable(func)
    if rule is None:
        override = FUNCTIONS.get(func)
        if override is not None:
            return override(*args, **kwargs)
        return _fallback(func, args, kwargs)
    return call_rule(rule, args, kwargs)


def _fallback(func, args, kwargs):
    """A NumPy function with no row: fine on values that need no gradient."""
    if _STATE.grad_enabled and _any_requires_grad(args) or _any_requires_grad(kwargs.values()):
        raise TypeError(f"{getattr(func, '__name__', func)} is not in srcgrad's derivative table; "
                        "it cannot be applied to a Tensor that requires grad (detach() it, or "
                        "use no_grad())")
    result = func(*strip(args), **{k: strip(v) for k, v in kwargs.items()})
    return _wrap_any(result)


def _any_requires_grad(values) -> bool:
    for v in values:
        if isinstance(v, Tensor) and v._rg:
            return True
        if isinstance(v, (list, tuple)) and _any_requires_grad(v):
            return True
    return False


def _wrap_any(value):
    if isinstance(value, _ndarray):
        return Tensor._make(value)
    if isinstance(value, tuple):
        return tuple(_wrap_any(v) for v in value)
    if isinstance(value, list):
        return [_wrap_any(v) for v in value]
    return value


FUNCTIONS: dict = {}  # NumPy function -> Tensor implementation, for calls with no row


Tensor.__array_ufunc__ = array_ufunc
Tensor.__array_function__ = array_function
