"""NumPy functions written as compositions of rows: source the tracer reads (issue 29).

Note [Compositions]
~~~~~~~~~~~~~~~~~~~
Some NumPy functions are a few rows in a row: `np.linalg.matrix_power` is matmuls,
`np.cov` a mean and a matmul, `np.quantile` a sort and two gathers. Rather than a row
with formulas of its own, each is written here in plain NumPy, the way NumPy computes
it (the same operations in the same order, so the values are NumPy's), and the tracer
inlines that source where user code calls the NumPy function with an active operand
(srcgrad.frontend.trace.Tracer.call; a call on constants runs NumPy itself, Note
[Lowered idioms]). Its derivatives are then those of the rows it calls, to any order,
and nothing here can be a silent constant: what a composition does not support is not
in its signature, so such a call is a CompileError ("bad call to `quantile`: got an
unexpected keyword argument 'method'").

This file is part of the rule table's fingerprint (every .py file of srcgrad/rules is),
so a changed composition recompiles what cached it. Each one is gradchecked to second
order in reverse and forward mode by tests/rules/test_compositions.py and drawn by the
compiler fuzzer (tests/fuzz/generator.py, sweep_unary).
"""

from __future__ import annotations

import numpy as np

__all__ = ["composition"]


def matrix_power(a, n):
    """np.linalg.matrix_power: NumPy's binary decomposition (n a Python int)."""
    if n == 0:
        return np.zeros_like(a) + np.eye(a.shape[-2], dtype=a.dtype)
    if n < 0:
        a = np.linalg.inv(a)
        n = -n
    if n == 1:
        return a  # NumPy returns its argument itself
    if n == 2:
        return a @ a
    if n == 3:
        return (a @ a) @ a
    z = a
    result = a if n % 2 == 1 else None
    n = n // 2
    while n > 0:
        z = z @ z
        if n % 2 == 1:
            result = z if result is None else result @ z
        n = n // 2
    return result


def linspace(start, stop, num=50, endpoint=True, retstep=False):
    """np.linspace along a new first axis (NumPy's arithmetic: t * step + start, the
    last sample `stop` itself)."""
    div = num - 1 if endpoint else num
    delta = stop - start
    t = np.arange(num) * 1.0
    if div > 0:
        step = delta / div
        y = np.tensordot(t, step, axes=0) + start
    else:
        step = np.nan * delta
        y = np.tensordot(t, delta, axes=0) + start
    if endpoint and num > 1:
        y[-1] = stop
    if retstep:
        return y, step
    return y


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """np.meshgrid of 1-D arrays: each reshaped along its own axis, then broadcast."""
    ndim = len(xi)
    reshaped = []
    for i, x in enumerate(xi):
        shape = [1] * ndim
        shape[i] = -1
        if indexing == "xy" and ndim > 1 and i < 2:
            shape[i] = 1
            shape[1 - i] = -1
        reshaped.append(np.reshape(x, tuple(shape)))
    if sparse:
        return reshaped
    total = reshaped[0]
    for r in reshaped[1:]:
        total = total + r
    zero = np.zeros_like(total)  # the grid's shape, without a derivative
    return [r + zero for r in reshaped]


def _columns(m, rowvar):
    x = np.atleast_2d(m)
    if not rowvar and x.shape[0] != 1:
        x = x.T
    return x


def cov(m, y=None, rowvar=True, bias=False, ddof=None):
    """np.cov without weights: centred rows, X @ X.T * (1 / (N - ddof)), squeezed."""
    x = _columns(m, rowvar)
    if y is not None:
        x = np.concatenate((x, _columns(y, rowvar)), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    fact = x.shape[1] - ddof
    x = x - np.mean(x, axis=1, keepdims=True)
    c = (x @ x.T) * (1.0 / fact)
    return np.squeeze(c)


def corrcoef(x, y=None, rowvar=True):
    """np.corrcoef: cov divided by the outer product of the standard deviations, clipped
    to [-1, 1] as NumPy clips it."""
    c = cov(x, y, rowvar)
    if np.ndim(c) == 0:
        return c / c
    stddev = np.sqrt(np.diag(c))
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    return np.clip(c, -1, 1)


def _sorted_along(a, axis):
    if axis is None:
        return np.sort(np.ravel(a), axis=0), 0
    return np.sort(a, axis=axis), axis


def _keep(result, a, axis, keepdims):
    if not keepdims:
        return result
    if axis is None:
        return np.reshape(result, np.ones(np.ndim(a), dtype=np.int64))
    return np.expand_dims(result, axis)


def _quantile(a, q, axis, keepdims):
    """One scalar q, method 'linear' (NumPy's virtual index q * (n - 1) and its lerp)."""
    s, ax = _sorted_along(a, axis)
    n = s.shape[ax]
    index = q * (n - 1)
    below = np.floor(index)
    gamma = index - below
    lo = np.take(s, np.astype(below, np.int64), axis=ax)
    hi = np.take(s, np.minimum(np.astype(below, np.int64) + 1, n - 1), axis=ax)
    diff = hi - lo
    result = np.where(gamma >= 0.5, hi - diff * (1 - gamma), lo + diff * gamma)
    # a slice holding nan: nan, as NumPy's (sort puts nan last)
    result = np.where(np.isnan(np.take(s, n - 1, axis=ax)), np.nan, result)
    return _keep(result, a, axis, keepdims)


def quantile(a, q, axis=None, keepdims=False):
    """np.quantile, method 'linear', q a constant scalar or 1-D sequence."""
    if np.ndim(q) == 0:
        return _quantile(a, q, axis, keepdims)
    return np.stack([_quantile(a, qi, axis, keepdims) for qi in q])


def percentile(a, q, axis=None, keepdims=False):
    """np.percentile: the quantile of q / 100 (NumPy divides the same way)."""
    return quantile(a, np.true_divide(q, 100), axis, keepdims)


def median(a, axis=None, keepdims=False):
    """np.median: the middle element, or the mean of the two middle ones."""
    s, ax = _sorted_along(a, axis)
    n = s.shape[ax]
    lo = np.take(s, (n - 1) // 2, axis=ax)
    hi = np.take(s, n // 2, axis=ax)
    result = (lo + hi) / 2
    result = np.where(np.isnan(np.take(s, n - 1, axis=ax)), np.nan, result)
    return _keep(result, a, axis, keepdims)


def append(arr, values, axis=None):
    """np.append: one concatenation (of the flattened arrays when axis is None)."""
    if axis is None:
        return np.concatenate((np.ravel(arr), np.ravel(values)), axis=0)
    return np.concatenate((arr, values), axis=axis)


def select(condlist, choicelist, default=0):
    """np.select: the first true condition's choice, written from the last one back."""
    result = default
    for i in range(len(condlist) - 1, -1, -1):
        result = np.where(condlist[i], choicelist[i], result)  # (broadcasts them all)
    return result


def array_split(ary, indices_or_sections, axis=0):
    """np.array_split: NumPy's division points (the first `total % sections` pieces one
    longer), then a split at them."""
    if np.ndim(indices_or_sections) != 0:
        return np.split(ary, indices_or_sections, axis=axis)
    sections = indices_or_sections
    total = ary.shape[axis]
    each, extras = total // sections, total % sections
    points = []
    point = 0
    for i in range(sections - 1):
        point = point + each + (i < extras)
        points.append(point)
    return np.split(ary, points, axis=axis)


def hsplit(ary, indices_or_sections):
    """np.hsplit: split along axis 1 (axis 0 of a 1-D array)."""
    return np.split(ary, indices_or_sections, axis=1 if np.ndim(ary) > 1 else 0)


def vsplit(ary, indices_or_sections):
    """np.vsplit: split along axis 0 (of an array of at least 2 dimensions)."""
    return np.split(ary, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    """np.dsplit: split along axis 2 (of an array of at least 3 dimensions)."""
    return np.split(ary, indices_or_sections, axis=2)


def interp(x, xp, fp):
    """np.interp without left/right/period: NumPy's segment (the last knot at or below
    x), its slope times the offset plus the left value, exact at knots and clamped
    outside [xp[0], xp[-1]]. xp increasing with distinct knots, as NumPy requires."""
    n = xp.shape[0]
    j = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, n - 2)
    # gathers by a flat index, reshaped back (the Array API's take wants 1-D indices)
    flat, shape = np.ravel(j), np.shape(j)
    x0 = np.reshape(np.take(xp, flat), shape)
    f0 = np.reshape(np.take(fp, flat), shape)
    slope = (np.reshape(np.take(fp, flat + 1), shape) - f0) / (
        np.reshape(np.take(xp, flat + 1), shape) - x0)
    y = slope * (x - x0) + f0
    y = np.where(x == x0, f0, y)
    y = np.where(x < xp[0], fp[0], y)
    return np.where(x >= xp[n - 1], fp[n - 1], y)


def real(val):
    """np.real of a real array: the array itself, as NumPy returns it."""
    return val


def imag(val):
    """np.imag of a real array: zeros (its derivative is 0, the truth)."""
    return np.zeros_like(val)


_BY_NAME = {
    "numpy.linalg.matrix_power": matrix_power, "numpy.linspace": linspace,
    "numpy.meshgrid": meshgrid, "numpy.cov": cov, "numpy.corrcoef": corrcoef,
    "numpy.quantile": quantile, "numpy.percentile": percentile, "numpy.median": median,
    "numpy.append": append, "numpy.select": select, "numpy.real": real, "numpy.imag": imag,
    "numpy.array_split": array_split, "numpy.hsplit": hsplit, "numpy.vsplit": vsplit,
    "numpy.dsplit": dsplit, "numpy.interp": interp,
}
_BY_ID: dict = {}


def composition(callee):
    """The composition standing for the NumPy callable `callee`, or None."""
    if not _BY_ID:
        for dotted, fn in _BY_NAME.items():
            module, _, name = dotted.rpartition(".")
            obj = getattr(np.linalg if module == "numpy.linalg" else np, name)
            _BY_ID[id(obj)] = (obj, fn)
    hit = _BY_ID.get(id(callee))
    return hit[1] if hit is not None and hit[0] is callee else None


def names() -> dict:
    """Dotted NumPy name -> its composition (for docs/numpy_coverage.md)."""
    return dict(_BY_NAME)
