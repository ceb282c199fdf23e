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
from srcgrad.autograd.inplace import add_at, after_write, check_target, store
from srcgrad.autograd.ops import DUAL, call_rule, strip
from srcgrad.autograd.tensor import Tensor

_STATE = grad_mode.STATE
_ndarray = numpy.ndarray

def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if kwargs.get("out") is not None:
        return _with_out(self, ufunc, method, inputs, kwargs)
    if method == "at" and ufunc is numpy.add:
        target, index, values = inputs
        return add_at(target, index, values)
    if method != "__call__":
        return NotImplemented
    rule = rules.lookup_callable(ufunc)
    if rule is None or rule.static_out:
        return _fallback(ufunc, inputs, kwargs)
    return call_rule(rule, inputs, kwargs)


_TORCH_UFUNC = {"multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div",
                "power": "pow", "negative": "neg"}


def _with_out(self, ufunc, method, inputs, kwargs):
    """`np.multiply(a, b, out=t)` into a Tensor: torch's out= (spec §6: bumps t's version;
    refused when an input requires grad)."""
    out = kwargs.pop("out")
    target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if method != "__call__" or not isinstance(target, Tensor):
        return NotImplemented
    if _STATE.grad_enabled and _any_requires_grad(inputs):
        name = _TORCH_UFUNC.get(ufunc.__name__, ufunc.__name__)
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    check_target(target)
    store(target, array_ufunc(self, ufunc, method, *inputs, **kwargs))
    after_write(target, False)
    return target


def array_function(self, func, types, args, kwargs):
    if func is numpy.einsum and isinstance(args[0], str):
        operands = _einsum_broadcast(args[0], args[1:])
        if len(operands) > 2:
            return einsum_many(args[0], *operands, **kwargs)
        args = (args[0],) + operands
    if func in _LIKE:  # torch's zeros_like & co.: a new Tensor, never in the graph
        return Tensor._make(func(*strip(args), **{k: strip(v) for k, v in kwargs.items()}))
    rule = rules.lookup_callable(func)
    if rule is not None and rule.static_out:  # shapes, dtypes: facts, never differentiated
        return func(*strip(args), **{k: strip(v) for k, v in kwargs.items()})
    if rule is None:
        override = FUNCTIONS.get(func)
        if override is not None:
            return override(*args, **kwargs)
        return _fallback(func, args, kwargs)
    return call_rule(rule, args, kwargs)


# `torch.zeros_like(x)` of an x that requires grad does not (observed in torch 2.14.1; a
# create_graph backward of `x ** 0` is such a zeros_like): no node, no tangent.
_LIKE = frozenset({numpy.zeros_like, numpy.ones_like, numpy.empty_like})  # full_like: its
# fill_value row is differentiable (a Tensor fill)


def _fallback(func, args, kwargs):
    """A NumPy function with no row: fine on values that need no gradient."""
    if _STATE.grad_enabled and _any_requires_grad(args) or _any_requires_grad(kwargs.values()):
        raise TypeError(f"{getattr(func, '__name__', func)} is not in srcgrad's derivative table; "
                        "it cannot be applied to a Tensor that requires grad (detach() it, or "
                        "use no_grad())")
    if DUAL.hook is not None:  # forward AD: a function with no row has no JVP either
        from srcgrad.autograd.forward_ad import refuse_without_formula

        refuse_without_formula(func, args, kwargs)
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


def _tokens(term: str) -> list:
    """Index letters of one einsum operand, with '...' as one token."""
    out, i = [], 0
    while i < len(term):
        if term.startswith("...", i):
            out.append("...")
            i += 3
        else:
            out.append(term[i])
            i += 1
    return out


def _einsum_broadcast(subscripts, operands) -> tuple:
    """Operands with a size-1 axis under a letter another operand has longer, broadcast
    explicitly: the `einsum` row's derivative sums only what `broadcast_to` added."""
    inputs = subscripts.replace(" ", "").split("->")[0].split(",")
    if len(inputs) != len(operands):
        return tuple(operands)
    sizes: dict = {}
    for term, op in zip(inputs, operands):
        tokens = _tokens(term)
        if "..." in tokens:
            continue
        for t, n in zip(tokens, numpy.shape(op)):
            sizes[t] = max(sizes.get(t, 1), n)
    out = []
    for term, op in zip(inputs, operands):
        tokens = _tokens(term)
        shape = numpy.shape(op)
        if "..." not in tokens and any(n == 1 and sizes[t] > 1 for t, n in zip(tokens, shape)):
            op = numpy.broadcast_to(op, tuple(sizes[t] for t in tokens))
        out.append(op)
    return tuple(out)


def einsum_many(subscripts, *operands, optimize=False):
    """`numpy.einsum` of more than two operands as a chain of two-operand einsums (the
    `einsum` row takes one or two operands)."""
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        inputs, out = subscripts.split("->")
    else:
        inputs = subscripts
        letters = [t for t in _tokens(inputs.replace(",", "")) if t != "..."]
        out = ("..." if "..." in inputs else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1))
    terms = [_tokens(t) for t in inputs.split(",")]
    out_tokens = _tokens(out)
    current, value = terms[0], operands[0]
    for k in range(1, len(operands)):
        rest = [t for term in terms[k + 1:] for t in term] + out_tokens
        keep = [t for t in dict.fromkeys(current + terms[k]) if t in rest]
        spec = f"{''.join(current)},{''.join(terms[k])}->{''.join(keep)}"
        value = numpy.einsum(spec, value, operands[k])
        current = keep
    if current != out_tokens:
        value = numpy.einsum(f"{''.join(current)}->{out}", value)
    return value
