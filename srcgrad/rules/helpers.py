"""Functions that generated code calls besides the array namespace.

Each one is a row of the derivative table too (srcgrad.rules.table), so code that
calls it can be differentiated again. They take whatever array type they are given
and find its namespace from the array (NumPy, CuPy, any Array-API namespace), so a
generated module never imports a backend itself. `srcgrad emit` copies the source
of the helpers a module uses into it, so keep them self-contained: each may use
only `_namespace`, `_is_basic_index` and `_normalize_axes` from this file.
"""

from __future__ import annotations

import numpy

__all__ = ["unbroadcast", "expand_reduced", "scatter_index"]


def _namespace(x):
    get = getattr(x, "__array_namespace__", None)
    return get() if get is not None else numpy


def _normalize_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, tuple):
        axis = (axis,)
    return tuple(a % ndim if ndim else 0 for a in axis)


def _is_basic_index(index):
    """True when `x[index]` reads every element at most once (no integer arrays)."""
    parts = index if isinstance(index, tuple) else (index,)
    for p in parts:
        if p is None or p is Ellipsis or isinstance(p, (int, slice)):
            continue
        dtype = getattr(p, "dtype", None)
        if dtype is not None and (dtype.kind == "b" or getattr(p, "ndim", 1) == 0):
            continue  # a boolean mask, or an integer scalar array
        return False
    return True


def unbroadcast(x, shape):
    """Sum `x` down to `shape`: the transpose of broadcasting to x's shape."""
    xshape = getattr(x, "shape", ())
    if xshape == shape:
        return x
    if len(xshape) < len(shape):  # a cotangent smaller than its primal: broadcast it up
        return _namespace(x).broadcast_to(x, shape)
    lead = len(xshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and xshape[lead + i] != 1)
    return x.sum(axis=axes).reshape(shape)


def expand_reduced(x, shape, axis, keepdims):
    """Reshape the cotangent of a reduction over `axis` so it broadcasts against `shape`."""
    if keepdims or axis is None:
        return x
    axes = _normalize_axes(axis, len(shape))
    return x.reshape(tuple(1 if i in axes else n for i, n in enumerate(shape)))


def scatter_index(x, shape, index):
    """Zeros of `shape` with `x` added at `index`: the transpose of `x[index]`.

    Repeated integer indices accumulate (`add.at`), as the chain rule requires.
    """
    xp = _namespace(x)
    out = xp.zeros(shape, dtype=getattr(x, "dtype", numpy.float64))
    if _is_basic_index(index):
        out[index] = x
    else:
        xp.add.at(out, index, x)
    return out
