"""Functions that generated code calls besides the array namespace.

Each one is a row of the derivative table too (srcgrad.rules.table), so code that
calls it can be differentiated again. They take whatever array type they are given
and find its namespace from the array (NumPy, CuPy, any Array-API namespace), so a
generated module never imports a backend itself. `srcgrad emit` copies the source
of the helpers a module uses into it, with the functions of this file they call
(srcgrad.codegen.skeletons' closure), so keep them self-contained: each may use other
functions of this file and `numpy` for plain-Python bookkeeping such as pad widths.

They call the Array API's names (`xp.concat`, `xp.matrix_transpose`, function forms
rather than methods), which NumPy 2.1+, array_api_compat's wrappers of CuPy and
dask, and every Array-API namespace have (Note [Array namespaces] in
srcgrad.backend). Where the Array API has no equivalent (`einsum`, `bincount`) they
call NumPy's name, and the rows that need it are refused for Array-API targets at
compile time (srcgrad.codegen.spellings); for `add.at` they fall back to a one-hot
contraction (Note [Scatter-add without add.at]).

They sit on the hot path of generated code: every one starts with its cheap cases
(shapes already equal, nothing to do) before doing any work.

Most of them are the *transposes* of linear NumPy functions (`tile_bar` sums the
tiles that `tile` copied). A transpose `T` of a linear map `L` has the rows
``vjp = L(g)``, ``jvp = T(t)``; a bilinear map's transposes (`matmul_bar`,
`tensordot_bar`, `einsum_bar`) close on each other, see Note [Bilinear transposes]
in srcgrad.rules.table.
"""

from __future__ import annotations

import math

import numpy

__all__ = [
    "unbroadcast", "expand_reduced", "scatter_index",
    "shift", "linrec", "excumprod", "fold_axes", "unfold_axes",
    "reduced_size", "inverse_axes", "vector_only", "linear_pad_mode",
    "matmul_bar", "tensordot_bar", "einsum_bar", "diagonal_bar",
    "tile_bar", "repeat_bar", "pad_bar", "concat_bar", "stack_bar",
    "take_bar", "take_along_bar", "diff_bar", "gather_index", "split_bounds",
    "ensure_scalar", "as_columns", "from_columns", "broadcast_solve",
    "check_grad", "check_tangent", "zero_tangent", "differentiable_once", "storage_written",
    "check_saved",
    "setitem", "setitem_bar", "no_alias", "no_alias_batched", "numpy_number", "stacked_bar", "diag_bar",
    "kron_bar", "svd_reduced", "singular_ties", "assert_true", "frexp_exponent",
    "torch_pow", "softmax_along", "log_softmax_along", "trunc_divide", "torch_prod_bar", "torch_cumprod_bar",
    "nan_arg_extreme", "digitize_sorted", "taken_input", "math_checked",
    "polyval_horner", "kron_blocks", "trapezoid_uniform", "convolve_full", "einsum_contract",
]


# NumPy arrays take the fast path: NumPy itself where it has the Array API's names
# (2.1+), array_api_compat's wrapper of it before that. array_api_compat is imported
# where another array needs it: a process with NumPy 2.1+ arrays only (a disk-cache
# hit, issue 15) never imports it.
_NUMPY = numpy if hasattr(numpy, "cumulative_prod") else \
    __import__("array_api_compat").array_namespace(numpy.ones(1))


def _namespace(x):
    """The Array-API namespace of `x` (array_api_compat's for CuPy and dask)."""
    if x.__class__ is numpy.ndarray:
        return _NUMPY
    import array_api_compat

    try:
        return array_api_compat.array_namespace(x)
    except TypeError:  # a Python number or a NumPy scalar
        return _NUMPY


def _normalize_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, tuple):
        axis = (axis,)
    return tuple(a % ndim if ndim else 0 for a in axis)


def _full_index(index):
    """`index` as a tuple ending in `...` where it has none: the Array API wants an index
    that names every axis or has an ellipsis; NumPy reads the two alike."""
    if not isinstance(index, tuple):
        if getattr(index, "ndim", 0):  # an index array: a mask must stand alone
            return index
        index = (index,)
    return index if any(p is Ellipsis for p in index) else index + (Ellipsis,)


def _python_ints(index, out):
    """`index` with its 0-d integer arrays (an argmax) as Python ints where `out` is not a
    NumPy array: the Array API writes at integers and slices only (array_api_strict
    refuses an array in `__setitem__`)."""
    if out.__class__ is numpy.ndarray:
        return index
    parts = index if isinstance(index, tuple) else (index,)
    ints = tuple(int(p) if getattr(p, "ndim", None) == 0 and "int" in str(getattr(p, "dtype", ""))
                 else p for p in parts)
    return ints if isinstance(index, tuple) else ints[0]


def _is_basic_index(index):
    """True when `x[index]` reads every element at most once (no integer arrays)."""
    parts = index if isinstance(index, tuple) else (index,)
    for p in parts:
        if p is None or p is Ellipsis or isinstance(p, (int, slice)):
            continue
        dtype = getattr(p, "dtype", None)
        if dtype is not None and (getattr(dtype, "kind", "") == "b" or str(dtype).endswith("bool")
                                  or getattr(p, "ndim", 1) == 0):
            continue  # a boolean mask, or an integer scalar array
        return False
    return True


# ---------------------------------------------------------------- broadcasting, reductions

def unbroadcast(x, shape):
    """Sum `x` down to `shape`: the transpose of broadcasting to x's shape.

    An `x` that broadcasts to `shape` instead is broadcast up (the transpose of
    summing down), so `unbroadcast(g, xp.shape(x))` is its own VJP either way.
    """
    xshape = getattr(x, "shape", ())
    if xshape == shape:
        return x
    found = _summed_axes(xshape, shape)
    if found is None:  # smaller than `shape`: broadcast up, the transpose of summing down
        return _namespace(x).broadcast_to(x, shape)
    axes, only_leading = found  # (only leading axes: the sum has the shape already)
    if x.__class__ is numpy.ndarray:  # the eager runtime's every broadcast add: no wrappers
        summed = x.sum(axis=axes)
        return summed if only_leading else summed.reshape(shape)
    xp = _namespace(x)
    summed = xp.sum(x, axis=axes)
    return summed if only_leading else xp.reshape(summed, shape)


def _summed_axes(xshape, shape):
    """(axes, only leading) that unbroadcast sums `xshape` over to reach `shape`, or None
    where `shape` is not smaller (broadcast up instead)."""
    lead = len(xshape) - len(shape)
    if lead < 0:
        return None
    axes = list(range(lead))
    for i, n in enumerate(shape):
        m = xshape[lead + i]
        if m != n:
            if n != 1:
                return None
            axes.append(lead + i)
    return tuple(axes), len(axes) == lead


def expand_reduced(x, shape, axis, keepdims):
    """Reshape the cotangent of a reduction over `axis` so it broadcasts against `shape`."""
    if keepdims or axis is None:
        return x
    axes = _normalize_axes(axis, len(shape))
    return _namespace(x).reshape(x, tuple(1 if i in axes else n for i, n in enumerate(shape)))


def reduced_size(shape, axis):
    """How many elements a reduction over `axis` of an array of `shape` combines."""
    n = 1
    for a in _normalize_axes(axis, len(shape)):
        n *= shape[a]
    return n


def inverse_axes(axes):
    """The permutation that undoes `transpose(x, axes)` (negative axes allowed)."""
    n = len(axes)
    inverse = [0] * n
    for i, a in enumerate(axes):
        inverse[a % n] = i
    return tuple(inverse)


def vector_only(x, axis, ord=None):
    """`x` itself; raises when `linalg.norm(x, ord, axis)` would be a matrix norm.

    The table differentiates vector norms of every `ord` but only the Frobenius
    matrix norm, so the derivative of any other matrix norm refuses to run rather
    than return the gradient of a different function.
    """
    if isinstance(axis, tuple) or (axis is None and len(getattr(x, "shape", ())) != 1):
        raise NotImplementedError(
            f"srcgrad: the matrix norm linalg.norm(..., ord={ord!r}) is supported on NumPy arrays "
            "only where the matrix is known when compiling (a composition of singular values or "
            "of sums, chosen for known shapes; this shape-generic code cannot choose it); here "
            "vector norms and the Frobenius norm are (pass axis=(0, 1) for the matrix norm, an "
            "int axis for a vector norm, or ord=None/'fro')")
    return x


def scatter_index(x, shape, index):
    """Zeros of `shape` with `x` added at `index`: the transpose of `x[index]`.

    Repeated integer indices accumulate (`add.at`), as the chain rule requires.
    """
    xp = _namespace(x)
    out = xp.zeros(shape, dtype=getattr(x, "dtype", None))
    if _is_basic_index(index):
        _write(out, _full_index(_python_ints(index, out)), x, xp)
    elif hasattr(xp, "add") and hasattr(xp.add, "at"):
        xp.add.at(out, index, x)
    else:  # Note [Scatter-add without add.at]
        size = 1
        for n in shape:
            size *= n
        ids = gather_index(xp.reshape(xp.arange(size), shape), index)
        out = xp.reshape(_scatter_along(xp.reshape(x, (-1,)), xp.reshape(ids, (-1,)), size, 0, xp),
                         shape)
    return out


def _scatter_along(c, idx, n, axis, xp):
    """Zeros with axis `axis` of length `n` and `c` added at `idx` along it (`idx` has c's
    shape; repeats accumulate): NumPy's `add.at` along one axis, for a namespace without it.

    Note [Scatter-add without add.at]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    The Array API has no scatter-add, which the gradient of every gather (an integer-array
    index, take, take_along_axis, sort) needs. It is a one-hot contraction instead:
    ``out[..., i] = sum_j where(idx[..., j] == i, c[..., j], 0)``. `where`, not a product
    with the one-hot matrix, so that an inf or nan in `c` reaches only the place it is
    added to, as with add.at; the sum adds the same terms as add.at (and zeros). It costs
    ``c.size * n`` comparisons, done in blocks of `idx` so that at most about 2**22
    elements are held at once: meant for the modest sizes where one uses the Array API
    for gathers, exact at any size.
    """
    cm, im = xp.moveaxis(c, axis, -1), xp.moveaxis(idx, axis, -1)
    im = xp.where(im < 0, im + n, im)  # NumPy's negative indices
    m = cm.shape[-1]
    outer = 1
    for k in cm.shape[:-1]:
        outer *= k
    positions = xp.arange(n, dtype=im.dtype)
    zero = xp.zeros((), dtype=cm.dtype)
    out = xp.zeros(cm.shape[:-1] + (n,), dtype=cm.dtype)
    block = max(1, 2 ** 22 // max(1, outer * n))
    for j in range(0, m, block):
        e = min(m, j + block)  # (the Array API refuses a slice past the end)
        hit = im[..., j:e, None] == positions
        out = out + xp.sum(xp.where(hit, cm[..., j:e, None], zero), axis=-2)
    return xp.moveaxis(out, -1, axis)


def _one_array(index):
    """Where `index` is a tuple of slices and `...` around one integer array (list or
    array of any rank), the array's place in the index with `...` spelled out as slices
    for `ndim` axes: (position, parts); else None."""
    parts = index if isinstance(index, tuple) else (index,)
    arrays = [i for i, p in enumerate(parts) if not (p is Ellipsis or isinstance(p, slice))]
    if len(arrays) != 1 or sum(p is Ellipsis for p in parts) > 1:
        return None
    p = parts[arrays[0]]
    if isinstance(p, (bool, int)) or p is None:
        return None
    dtype = numpy.asarray(p).dtype if isinstance(p, list) else getattr(p, "dtype", None)
    if dtype is None or "int" not in str(dtype):
        return None  # (a boolean mask, or not an index array)
    return arrays[0], parts


def gather_index(x, index):
    """`x[index]` with NumPy's reading of one integer array among slices (`x[[2, 0]]`,
    `x[:, idx]`), which the Array API lacks (it takes integer arrays only with integers
    on every axis): the slices, then `take` along the array's axis. Any other index is
    `x[index]` as the namespace reads it."""
    xp = _namespace(x)
    found = _one_array(index)
    if found is None:  # (integer arrays on every axis stand without `...`)
        whole = isinstance(index, tuple) and len(index) == x.ndim and not any(
            p is Ellipsis for p in index)
        return x[index if whole else _full_index(index)]
    k, parts = found
    if any(p is Ellipsis for p in parts):  # (`...` before the array: its axis from the end)
        e = next(i for i, p in enumerate(parts) if p is Ellipsis)
        parts = parts[:e] + (slice(None),) * (x.ndim - len(parts) + 1) + parts[e + 1:]
        k = next(i for i, p in enumerate(parts) if not isinstance(p, slice))
    idx = xp.asarray(parts[k])
    sliced = x[parts[:k] + (slice(None),) + parts[k + 1:] + (Ellipsis,)]
    n = sliced.shape[k]
    flat = xp.reshape(idx, (-1,))
    taken = xp.take(sliced, xp.where(flat < 0, flat + n, flat), axis=k)
    return xp.reshape(taken, sliced.shape[:k] + idx.shape + sliced.shape[k + 1:])


# ---------------------------------------------------------------- scans (prod, cumprod)

def shift(x, axis, reverse, fill):
    """Shift `x` one place along `axis`, filling the vacated end with `fill`.

    Forward (`reverse=False`): ``y[i] = x[i-1]``, ``y[0] = fill``; reverse:
    ``y[i] = x[i+1]``, ``y[-1] = fill``. With ``fill=0`` the two are transposes.
    """
    xp = _namespace(x)
    if x.shape[axis] == 0:
        return x
    moved = xp.moveaxis(x, axis, -1)
    edge = xp.full(moved.shape[:-1] + (1,), fill, dtype=x.dtype)
    if reverse:
        out = xp.concat([moved[..., 1:], edge], axis=-1)
    else:
        out = xp.concat([edge, moved[..., :-1]], axis=-1)
    return xp.moveaxis(out, -1, axis)


def linrec(a, b, axis, reverse):
    """Solve the linear recurrence ``u[i] = b[i] + a[i] * u[i-1]`` along `axis`.

    With `reverse`, ``u[i] = b[i] + a[i] * u[i+1]``. The end coefficient (`a[0]`,
    or `a[-1]` in reverse) is not used. A log-depth (Hillis-Steele) scan: no
    division, so zeros in `a` are exact; it is what makes the gradients of `prod`
    and `cumprod` zero-safe.
    """
    xp = _namespace(b)
    a, b = xp.broadcast_arrays(a, b)
    n = b.shape[axis]
    if n <= 1:
        return b
    A = xp.moveaxis(a, axis, -1)
    B = xp.moveaxis(b, axis, -1)
    if reverse:
        A, B = xp.flip(A, axis=-1), xp.flip(B, axis=-1)
    # A[i] is the coefficient of u[i-d] in B[i]; it is zero once the chain reaches u[0].
    A = xp.concat([xp.zeros_like(A[..., :1]), A[..., 1:]], axis=-1)
    d = 1
    while d < n:
        B = xp.concat([B[..., :d], B[..., d:] + A[..., d:] * B[..., :-d]], axis=-1)
        if 2 * d < n:
            A = xp.concat([A[..., :d], A[..., d:] * A[..., :-d]], axis=-1)
        d *= 2
    if reverse:
        B = xp.flip(B, axis=-1)
    return xp.moveaxis(B, -1, axis)


def excumprod(x, axis, reverse):
    """Exclusive cumulative product along `axis` (an int).

    Forward: ``y[i] = prod(x[:i])``; reverse: ``y[i] = prod(x[i+1:])``. The
    product of all elements but one is ``excumprod(x, a, False) * excumprod(x, a, True)``:
    no division, so exact with zeros.
    """
    xp = _namespace(x)
    n = x.shape[axis]
    moved = xp.moveaxis(x, axis, -1)
    if n == 0:
        return x
    one = xp.ones_like(moved[..., :1])
    # NumPy's name where there is one: the eager runtime maps NumPy functions to rows
    cumprod = xp.cumprod if hasattr(xp, "cumprod") else xp.cumulative_prod
    if reverse:
        inner = xp.flip(cumprod(xp.flip(moved[..., 1:], axis=-1), axis=-1), axis=-1)
        out = xp.concat([inner, one], axis=-1)
    else:
        out = xp.concat([one, cumprod(moved[..., :-1], axis=-1)], axis=-1)
    return xp.moveaxis(out, -1, axis)


def fold_axes(x, axis):
    """Move the axes `axis` (None, int or tuple) to the end and merge them into one."""
    xp = _namespace(x)
    ndim = len(x.shape)
    axes = _normalize_axes(axis, ndim)
    if axes == (ndim - 1,):
        return x
    k = len(axes)
    moved = xp.moveaxis(x, axes, tuple(range(ndim - k, ndim)))
    size = 1
    for a in axes:
        size *= x.shape[a]
    return xp.reshape(moved, moved.shape[:ndim - k] + (size,))


def unfold_axes(x, shape, axis):
    """The inverse of `fold_axes`: back to `shape`, whose axes `axis` were folded."""
    xp = _namespace(x)
    ndim = len(shape)
    axes = _normalize_axes(axis, ndim)
    if axes == (ndim - 1,):
        return x
    k = len(axes)
    rest = tuple(n for i, n in enumerate(shape) if i not in axes)
    moved = xp.reshape(x, rest + tuple(shape[a] for a in axes))
    return xp.moveaxis(moved, tuple(range(ndim - k, ndim)), axes)


# ---------------------------------------------------------------- transposes of linear maps

def matmul_bar(c, other, shape, which):
    """Cotangent of operand `which` (0: x, 1: y) of ``x @ y``, given its shape.

    `c` is the cotangent of the product, `other` the other operand. Handles 1-D
    operands (NumPy's promotion rules) and batch broadcasting (summed out). `other` may
    be a tuple or list constant, which `@` reads as an array (`(1, 2) @ y`).
    """
    if other.__class__ in (tuple, list):
        other = _namespace(c).asarray(other)
    if len(shape) == 2 and c.ndim == 2 and other.ndim == 2:  # the common case, first
        return c @ other.T if which == 0 else other.T @ c
    if len(shape) == 2 and c.ndim == 1 and other.ndim == 1 and c.__class__ is numpy.ndarray:
        return c[:, None] * other if which == 0 else other[:, None] * c  # outer products
    xp = _namespace(c)
    if which == 0:
        y = other
        if len(y.shape) == 1:
            r = c * y if len(shape) == 1 else xp.expand_dims(c, axis=-1) * y
        else:
            yt = xp.matrix_transpose(y)
            r = (xp.expand_dims(c, axis=-2) @ yt)[..., 0, :] if len(shape) == 1 else c @ yt
    else:
        x = other
        if len(x.shape) == 1:
            r = c * x if len(shape) == 1 else xp.expand_dims(x, axis=-1) * xp.expand_dims(c, axis=-2)
        else:
            xt = xp.matrix_transpose(x)
            r = (xt @ xp.expand_dims(c, axis=-1))[..., 0] if len(shape) == 1 else xt @ c
    if r.shape == shape:
        return r
    lead = len(r.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and r.shape[lead + i] != 1)
    return xp.reshape(xp.sum(r, axis=axes), shape)


def tensordot_bar(c, other, axes, shape, which):
    """Cotangent of operand `which` of a contraction, given that operand's shape.

    `axes` is tensordot's `axes` (an int or a pair), or "dot" / "inner" for
    `numpy.dot` / `numpy.inner`, which contract the last axis of the first operand
    with the second-to-last (dot) or last (inner) axis of the second. `c` may be a
    Python float (the seed of a scalar output), hence `numpy.ndim`.
    """
    xp = _namespace(c)
    ndims = (len(shape), numpy.ndim(other)) if which == 0 else (numpy.ndim(other), len(shape))
    if axes in ("dot", "inner") and 0 in ndims:  # a scalar operand: a product
        r = c * other
        if len(shape) == 0:
            return xp.sum(r)
        return r
    if axes == "dot":
        pair = ((ndims[0] - 1,), (max(ndims[1] - 2, 0),))
    elif axes == "inner":
        pair = ((ndims[0] - 1,), (ndims[1] - 1,))
    elif isinstance(axes, int):
        pair = (tuple(range(ndims[0] - axes, ndims[0])), tuple(range(axes)))
    else:
        pair = tuple((ax,) if isinstance(ax, int) else tuple(ax) for ax in axes)
    a_axes = tuple(ax % ndims[0] for ax in pair[0])
    b_axes = tuple(ax % ndims[1] for ax in pair[1])
    a_free = [i for i in range(ndims[0]) if i not in a_axes]
    b_free = [j for j in range(ndims[1]) if j not in b_axes]
    # a 0-d cotangent contracts nothing: a product (array_api_compat's tensordot, which
    # CuPy's namespace is, refuses a 0-d operand where NumPy's takes it)
    if which == 0:
        r = c * other if numpy.ndim(c) == 0 else \
            xp.tensordot(c, other, axes=(list(range(len(a_free), numpy.ndim(c))), b_free))
        labels = a_free + [a_axes[b_axes.index(j)] for j in sorted(b_axes)]
    else:
        r = other * c if numpy.ndim(c) == 0 else \
            xp.tensordot(other, c, axes=(a_free, list(range(len(a_free)))))
        labels = [b_axes[a_axes.index(i)] for i in sorted(a_axes)] + b_free
    perm = tuple(labels.index(k) for k in range(len(labels)))
    if perm == tuple(range(len(perm))):
        return r
    return xp.permute_dims(r, perm)


def einsum_bar(c, other, subscripts, shape, which):
    """Cotangent of operand `which` of a one- or two-operand einsum.

    `other` is the other operand (None for a one-operand einsum). Handles implicit
    outputs, ellipses with broadcasting, indices summed within one operand
    (broadcast back with ones) and repeated indices such as 'ii' (put back on the
    diagonal with an identity).
    """
    xp = _namespace(c)
    c = xp.asarray(c)  # a Python float: the seed of `grad` of a full contraction ('ii')
    spec = subscripts.replace(" ", "")
    lhs, arrow, out = spec.partition("->")
    inputs = lhs.split(",")
    shapes = [shape] if other is None else (
        [shape, other.shape] if which == 0 else [other.shape, shape])
    if not arrow:  # implicit output: ellipsis, then the indices used once, sorted
        letters = lhs.replace(",", "").replace(".", "")
        out = ("..." if "..." in lhs else "") + "".join(
            sorted(ch for ch in set(letters) if letters.count(ch) == 1))
    used = set(spec)
    fresh = iter(ch for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                 if ch not in used)
    n_ell = max((len(s) - len(sub.replace("...", "")) for sub, s in zip(inputs, shapes)
                 if "..." in sub), default=0)
    ell = "".join(next(fresh) for _ in range(n_ell))
    expanded = []
    for sub, s in zip(inputs, shapes):
        if "..." in sub:
            k = len(s) - len(sub.replace("...", ""))
            sub = sub.replace("...", ell[n_ell - k:] if k else "")
        expanded.append(sub)
    out = out.replace("...", ell)
    target = expanded[which]
    operands, subs = [c], [out]
    if other is not None:
        operands.append(other)
        subs.append(expanded[1 - which])
    present = set("".join(subs))
    result = ""
    for ch, n in zip(target, shape):
        if ch in result:  # a repeated index: the cotangent lies on a diagonal
            f = next(fresh)
            operands.append(xp.eye(n, dtype=c.dtype))
            subs.append(ch + f)
            ch = f
        elif ch not in present:  # summed within this operand only: broadcast back
            operands.append(xp.ones((n,), dtype=c.dtype))
            subs.append(ch)
        elif ch in ell and n == 1:  # a broadcast ellipsis dimension: sum it out
            f = next(fresh)
            operands.append(xp.ones((1,), dtype=c.dtype))
            subs.append(f)
            ch = f
        result += ch
    einsum = getattr(xp, "einsum", None) or einsum_contract
    return einsum(",".join(subs) + "->" + result, *operands)


def diagonal_bar(c, shape, offset, axis1, axis2):
    """Zeros of `shape` with `c` on the diagonal `numpy.diagonal` reads.

    A trailing axis of length 1 in `c` is broadcast along the diagonal (the
    transpose of `trace`).
    """
    xp = _namespace(c)
    nd = len(shape)
    a1, a2 = axis1 % nd, axis2 % nd
    n, m = shape[a1], shape[a2]
    rest = tuple(s for i, s in enumerate(shape) if i not in (a1, a2))
    k = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    c = xp.broadcast_to(c, rest + (k,))
    # c's entry i goes to row r0 + i, column c0 + i: spread c over the rows, then keep the
    # diagonal with a mask (the Array API has no fancy-index assignment)
    r0, c0 = min(max(-offset, 0), n), max(offset, 0)
    before = xp.zeros(rest + (r0,), dtype=c.dtype)
    after = xp.zeros(rest + (n - r0 - k,), dtype=c.dtype)
    by_row = xp.concat([before, c, after], axis=-1)
    rows = xp.reshape(xp.arange(n), (n, 1))
    cols = xp.reshape(xp.arange(m), (1, m))
    out = xp.where(cols - rows == c0 - r0, xp.expand_dims(by_row, axis=-1), xp.zeros((), dtype=c.dtype))
    return xp.moveaxis(out, (-2, -1), (a1, a2))


def tile_bar(c, shape, reps):
    """Sum the tiles of `numpy.tile(x, reps)` back onto x's `shape`."""
    xp = _namespace(c)
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    if all(r == 1 for r in reps) and len(reps) <= len(shape):
        return c
    d = max(len(reps), len(shape))
    reps = (1,) * (d - len(reps)) + reps
    full = (1,) * (d - len(shape)) + tuple(shape)
    split = []
    for r, s in zip(reps, full):
        split += [r, s]
    return xp.reshape(xp.sum(xp.reshape(c, tuple(split)), axis=tuple(range(0, 2 * d, 2))),
                      shape)


def repeat_bar(c, shape, repeats, axis):
    """Sum the copies of `numpy.repeat(x, repeats, axis)` back onto x's `shape`."""
    xp = _namespace(c)
    if axis is None:
        size = 1
        for s in shape:
            size *= s
        work, ax = (size,), 0
    else:
        work, ax = tuple(shape), axis % len(shape)
    n = work[ax]
    moved = xp.moveaxis(c, ax, -1)
    size = getattr(repeats, "size", None)
    if size is None:
        size = 1 if isinstance(repeats, int) else len(repeats)
    if size == 1:
        r = int(repeats if isinstance(repeats, int) else
                (repeats.reshape(-1)[0] if hasattr(repeats, "reshape") else repeats[0]))
        summed = xp.sum(xp.reshape(moved, moved.shape[:-1] + (n, r)), axis=-1)
    else:
        counts = xp.asarray(repeats)
        ends = xp.cumsum(counts)
        zero = xp.zeros(moved.shape[:-1] + (1,), dtype=c.dtype)
        total = xp.concat([zero, xp.cumsum(moved, axis=-1)], axis=-1)
        summed = xp.take(total, ends, axis=-1) - xp.take(total, ends - counts, axis=-1)
    out = xp.moveaxis(summed, -1, ax)
    return xp.reshape(out, shape) if axis is None else out


_INDEX_PAD_MODES = ("edge", "reflect", "symmetric", "wrap")


def linear_pad_mode(mode):
    """`mode` itself when `numpy.pad` is linear in its input under it, else an error.

    Formulas call it on the static `mode`, so the compiler evaluates it while
    tracing and an unsupported mode is a CompileError at the user's call.
    """
    if mode == "constant" or mode in _INDEX_PAD_MODES:
        return mode
    raise ValueError(f"no derivative for numpy.pad(mode={mode!r}); differentiable modes: "
                     f"'constant', {', '.join(map(repr, _INDEX_PAD_MODES))}")


def pad_bar(c, shape, pad_width, mode):
    """The transpose of `numpy.pad(x, pad_width, mode)` (x of `shape`) applied to `c`.

    'constant' drops the padding; 'edge', 'reflect', 'symmetric' and 'wrap' copy
    elements of x into the border, so their copies are added back.
    """
    xp = _namespace(c)
    nd = len(shape)
    if mode == "constant":
        widths = numpy.broadcast_to(numpy.asarray(pad_width, dtype=numpy.int64), (nd, 2))
        return c[tuple(slice(int(b), int(b) + s) for (b, _), s in zip(widths, shape))]
    size = 1
    for s in shape:
        size *= s
    source = numpy.pad(numpy.arange(size).reshape(shape), pad_width, mode=mode)
    index = xp.asarray(source.reshape(-1))
    flat = xp.reshape(c, (-1,))
    out = xp.astype(xp.bincount(index, weights=flat, minlength=size), c.dtype)
    return xp.reshape(out, shape)


def concat_bar(c, arrays, axis):
    """The pieces of `c` that `numpy.concatenate(arrays, axis)` took from each array."""
    ax = axis % len(c.shape)
    pieces, start = [], 0
    lead = (slice(None),) * ax
    for a in arrays:
        n = a.shape[ax]
        pieces.append(c[lead + (slice(start, start + n), Ellipsis)])
        start += n
    return tuple(pieces)


def stack_bar(c, arrays, axis):
    """The slices of `c` that `numpy.stack(arrays, axis)` took from each array."""
    ax = axis % len(c.shape)
    lead = (slice(None),) * ax
    return tuple(c[lead + (i, Ellipsis)] for i in range(len(arrays)))


def _scatter_flat(c, shape, indices):
    """Zeros of `shape` with `c` added at flat `indices` (repeats accumulate)."""
    xp = _namespace(c)
    size = 1
    for s in shape:
        size *= s
    out = xp.zeros((size,), dtype=c.dtype)
    xp.add.at(out, indices, c)
    return xp.reshape(out, shape)


def take_bar(c, shape, indices, axis):
    """Zeros of `shape` with `c` added where `numpy.take(x, indices, axis)` read.

    Repeated indices accumulate.
    """
    xp = _namespace(c)
    if not (hasattr(xp, "add") and hasattr(xp.add, "at")):  # Note [Scatter-add without add.at]
        indices = xp.asarray(indices)
        if axis is None:
            size = 1
            for n in shape:
                size *= n
            flat = _scatter_along(xp.reshape(c, (-1,)), xp.reshape(indices, (-1,)), size, 0, xp)
            return xp.reshape(flat, shape)
        ax = axis % len(shape)
        m = 1
        for n in indices.shape:
            m *= n
        lined = shape[:ax] + (m,) + shape[ax + 1:]
        idx = xp.reshape(indices, tuple(m if i == ax else 1 for i in range(len(shape))))
        return _scatter_along(xp.reshape(c, lined), xp.broadcast_to(idx, lined), shape[ax], ax, xp)
    if axis is None:
        return _scatter_flat(c, shape, indices)
    out = xp.zeros(shape, dtype=c.dtype)
    xp.add.at(out, (slice(None),) * (axis % len(shape)) + (indices,), c)
    return out


def take_along_bar(c, shape, indices, axis):
    """Zeros of `shape` with `c` added where `numpy.take_along_axis(x, indices, axis)` read.

    Repeated indices accumulate. The transpose of `sort` (with `argsort` indices).
    """
    xp = _namespace(c)
    if not (hasattr(xp, "add") and hasattr(xp.add, "at")):  # Note [Scatter-add without add.at]
        if axis is None:
            flat = xp.reshape(c, (-1,))
            size = 1
            for n in shape:
                size *= n
            return xp.reshape(_scatter_along(flat, xp.reshape(indices, (-1,)), size, 0, xp), shape)
        ax = axis % len(shape)
        out = _scatter_along(c, xp.broadcast_to(indices, c.shape), shape[ax], ax, xp)
        summed = tuple(i for i, (a, b) in enumerate(zip(out.shape, shape)) if a != b)
        return xp.sum(out, axis=summed, keepdims=True) if summed else out  # broadcast x
    if axis is None:
        return _scatter_flat(c, shape, indices)
    nd = len(shape)
    ax = axis % nd
    index = []
    for i in range(nd):
        if i == ax:
            index.append(indices)
        else:
            index.append(xp.reshape(xp.arange(indices.shape[i]),
                                    tuple(-1 if j == i else 1 for j in range(nd))))
    out = xp.zeros(shape, dtype=c.dtype)
    xp.add.at(out, tuple(index), c)
    return out


def split_bounds(shape, axis, indices_or_sections):
    """The (start, stop) of each piece `numpy.split` cuts from axis `axis` of `shape`, each
    within [0, n] and start <= stop (the Array API takes no slice past the end): the
    Array-API spelling of split slices them. NumPy's ValueError for an unequal division."""
    n = shape[axis]
    if isinstance(indices_or_sections, int) or getattr(indices_or_sections, "ndim", 1) == 0:
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        if n % k:
            raise ValueError("array split does not result in an equal division")
        return tuple((i * (n // k), (i + 1) * (n // k)) for i in range(k))
    points = [0] + [int(i) for i in indices_or_sections] + [n]
    pieces = []
    for start, stop in zip(points[:-1], points[1:]):
        start, stop, _ = slice(start, stop).indices(n)  # Python's slicing, as NumPy's
        pieces.append((start, max(start, stop)))
    return tuple(pieces)


def diff_bar(c, n, axis):
    """The transpose of `numpy.diff(x, n, axis)` applied to `c` (one longer per order)."""
    xp = _namespace(c)
    moved = xp.moveaxis(c, axis, -1)
    for _ in range(n):
        zero = xp.zeros(moved.shape[:-1] + (1,), dtype=moved.dtype)
        padded = xp.concat([zero, moved, zero], axis=-1)
        moved = padded[..., :-1] - padded[..., 1:]
    return xp.moveaxis(moved, -1, axis)


def numpy_number(x):
    """A Python number as a NumPy value, so that an operator on it follows NumPy's rules
    (inf or nan at a singular point, not ZeroDivisionError): Note [Scalar code] in
    srcgrad.passes.scalars. A NumPy value is returned as it is."""
    return numpy.asarray(x) if isinstance(x, (int, float, complex)) else x


def ensure_scalar(x, name):
    """`x` itself, once checked to be a scalar: `grad` needs a scalar output."""
    if getattr(x, "ndim", 0) != 0:
        raise TypeError(f"grad of {name}() needs a scalar output; it returned an array of shape "
                        f"{x.shape}. Use sg.vjp, or reduce it (e.g. .sum())")
    return x


def setitem(x, index, v):
    """A copy of `x` with `v` written at `index`: `x[index] = v` as a function
    (Note [Mutation at trace time] in srcgrad.frontend.mutation)."""
    xp = _namespace(x)
    out = xp.asarray(x)
    out = out.copy() if hasattr(out, "copy") else xp.asarray(out, copy=True)  # Array API: no .copy
    if not _is_basic_index(index) and not (hasattr(xp, "add") and hasattr(xp.add, "at")):
        # Note [Scatter-add without add.at]: each place takes the last value written there
        ids, last = _last_writes(out.shape, index, xp)
        picked = xp.broadcast_to(xp.asarray(v, dtype=out.dtype), ids.shape)
        flat = xp.reshape(out, (-1,))
        if 0 not in ids.shape:
            values = xp.take(xp.reshape(picked, (-1,)), xp.where(last >= 0, last, 0))
            flat = xp.where(last >= 0, values, flat)
        return xp.reshape(flat, out.shape)
    _write(out, _full_index(index), v, xp)
    return out


def _last_writes(shape, index, xp):
    """The flat places `x[index] = v` writes (in v's shape), and for each flat place of
    `shape` the position in that order of the last write there (NumPy keeps the last), or
    -1: a one-hot comparison (Note [Scatter-add without add.at])."""
    size = 1
    for n in shape:
        size *= n
    ids = gather_index(xp.reshape(xp.arange(size), shape), index)
    flat = xp.reshape(ids, (-1,))
    if not flat.shape[0]:
        return ids, xp.full((size,), -1, dtype=flat.dtype)
    order = xp.arange(flat.shape[0], dtype=flat.dtype)
    hit = flat[:, None] == xp.arange(size, dtype=flat.dtype)
    return ids, xp.max(xp.where(hit, order[:, None], -1), axis=0)


def _write(out, full, v, xp):
    """`out[full] = v`, where a newaxis (None) of a basic index is dropped and `v` shaped to
    match: the Array API reads None in an index, never in a write (array_api_strict raises
    IndexError), and a view `x[None]` written through (`w = x[None]; w += 1`) is one."""
    if isinstance(full, tuple) and any(p is None for p in full):
        target = out[full].shape
        full = tuple(p for p in full if p is not None)
        v = xp.reshape(xp.broadcast_to(xp.asarray(v), target), out[full].shape)
    out[full] = v


def setitem_bar(c, index):
    """`c[index]` where the write `x[index] = v` survived: zero where a later repeated
    integer index overwrote it (NumPy keeps the last write). The transpose of
    `setitem(zeros, index, v)` with respect to v."""
    if _is_basic_index(index):
        return c[_full_index(index)]
    xp = _namespace(c)
    if not (hasattr(xp, "add") and hasattr(xp.add, "at")):  # Note [Scatter-add without add.at]
        picked = gather_index(c, index)
        ids, last = _last_writes(c.shape, index, xp)
        flat = xp.reshape(ids, (-1,))
        survived = xp.take(last, flat) == xp.arange(flat.shape[0], dtype=flat.dtype)
        return xp.where(xp.reshape(survived, ids.shape), picked, xp.zeros((), dtype=picked.dtype))
    picked = c[_full_index(index)]
    size = 1
    for n in picked.shape:
        size *= n
    ids = xp.reshape(xp.arange(size), picked.shape)
    owner = xp.full(c.shape, -1)
    owner[index] = ids
    return xp.where(owner[index] == ids, picked, 0)


def no_alias(x, base, *others):
    """`x` itself, once argument `base`, written in place by the compiled function, is
    checked to share no memory with the other arguments (whose values NumPy would
    have changed too), and to be writable (NumPy raises writing into a read-only array)."""
    if isinstance(base, numpy.generic):  # a NumPy scalar (a float argument): `+=` rebinds it
        return x
    flags = getattr(base, "flags", None)
    if flags is not None and not getattr(flags, "writeable", True):
        raise ValueError("assignment destination is read-only (compiled code writes into this "
                         "argument, as NumPy would; pass a writable copy: `x.copy()`)")
    if others and hasattr(base, "__array_interface__"):
        for i, other in enumerate(others):
            if hasattr(other, "__array_interface__") and numpy.may_share_memory(base, other):
                raise ValueError("compiled code writes into an argument that shares memory "
                                 f"with another argument (the {i + 1}th other array argument); "
                                 "pass a copy (`x.copy()`) so each argument is its own array")
    return x


def no_alias_batched(x, base, mapped, *others):
    """`no_alias` of each example of a batch (axis 0 of the operands `mapped` flags, base
    first): where the whole arrays pass, every example does (a slice's memory lies within
    its array's); else each example is checked, raising the loop's error at the first
    that fails (Note [Writes into mapped arguments] in srcgrad.pipeline.vmap)."""
    try:
        return no_alias(x, base, *others)
    except ValueError:
        pass
    n = base.shape[0] if mapped[0] else next(o.shape[0] for o, m in zip(others, mapped[1:]) if m)
    for i in range(n):
        no_alias(None, *(v[i] if m else v for v, m in zip((base, *others), mapped)))
    return x


def broadcast_solve(a, b):
    """`numpy.linalg.solve(a, b)` where the namespace's solve wants a's and a matrix b's
    batch axes alike (CuPy's): both are broadcast to their common batch shape first."""
    xp = _namespace(a)
    if len(b.shape) == 1 or a.shape[:-2] == b.shape[:-2]:
        return xp.linalg.solve(a, b)
    batch = numpy.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return xp.linalg.solve(xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:]))


def as_columns(x, b_ndim):
    """`x` as a stack of columns (..., M, 1) when `solve`'s right-hand side was a vector."""
    return x[..., None] if b_ndim == 1 else x


def from_columns(x, b_ndim):
    """The inverse of `as_columns`."""
    return x[..., 0] if b_ndim == 1 else x


# ---------------------------------------------------------------- custom Functions
# Note [Custom Functions] in srcgrad.frontend.function.

def check_grad(grad, shape, name, index):
    """A custom Function's gradient for an input of `shape`, checked as torch does.

    A gradient of another shape is accepted when the input's shape broadcasts to it,
    and summed down to the input's shape; anything else is an error.
    """
    gshape = tuple(getattr(grad, "shape", ()))
    if gshape == tuple(shape):
        return grad
    try:
        ok = numpy.broadcast_shapes(tuple(shape), gshape) == gshape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"Function {name} returned an invalid gradient at index {index} - got "
                           f"{list(gshape)} but expected shape compatible with {list(shape)}")
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and gshape[lead + i] != 1)
    xp = _namespace(grad)
    return xp.reshape(xp.sum(grad, axis=axes), tuple(shape))


def check_tangent(tangent, shape):
    """A custom Function's tangent for an output of `shape`, checked as torch does:
    exactly that shape (a forward gradient is not summed down as a backward's is)."""
    tshape = tuple(getattr(tangent, "shape", ()))
    if tshape != tuple(shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that "
                           "of the original Tensor, this is not supported. Tensor is of size "
                           f"{list(shape)} while the given forward gradient is of size "
                           f"{list(tshape)}.")
    return tangent


def zero_tangent(x):
    """The tangent a custom Function's jvp receives for an input that has none, as torch
    gives it: zeros for a floating or complex array, None for anything else (a Python
    number, an integer array)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:  # a Python number
        return None
    xp = _namespace(x)
    return xp.zeros_like(x) if xp.isdtype(dtype, ("real floating", "complex floating")) else None


def taken_input(x, taken):
    """`x` itself: an input of a batched `if` branch, whose cotangent reaches only the
    examples that take the branch (Note [The branch an example does not take] in
    srcgrad.passes.batch_control)."""
    return x


# math.<name> of an example of a batched value runs as NumPy's function (Note [Python's
# math over a batch] in srcgrad.passes.batch_scalars); these raise where math would not
# give a float: a pole or a value outside the domain (ValueError), an overflow (OverflowError)
_MATH_OVERFLOWS = frozenset({"exp", "expm1", "cosh", "sinh"})


def math_checked(x, name):
    """`x` itself, where Python's `math.<name>` takes each element of x; else math's own
    error: `ValueError: math domain error` (nan from a number, or a pole: log(0)) or
    `OverflowError: math range error`, as the example's own call would raise."""
    xp = _namespace(x)
    x = xp.asarray(x)
    name = "abs" if name == "fabs" else name
    fn = getattr(xp, name, None) or getattr(xp, "arc" + name[1:])  # (CuPy spells arccos)
    with numpy.errstate(all="ignore"):
        y = fn(x)
    fails = xp.isinf(y) & xp.isfinite(x)
    if bool(xp.any(xp.isnan(y) & ~xp.isnan(x))) or (name not in _MATH_OVERFLOWS and bool(xp.any(fails))):
        raise ValueError("math domain error")
    if bool(xp.any(fails)):
        raise OverflowError("math range error")
    return x


def differentiable_once(x, name):
    """`x` itself: a gradient an `@once_differentiable` backward returned. The compiler
    refuses to differentiate it again (a CompileError naming `name`)."""
    return x


# Note [Saved values written in place] in srcgrad.frontend.versions.

def storage_written(saved, target):
    """Whether an in-place write into `target` (NumPy semantics) wrote into the storage
    of `saved`: `target` is an array (`x += 1` only rebinds a NumPy scalar) sharing
    its buffer with `saved`. As torch's version counter, this is per buffer, not per
    element."""
    def is_array(a):
        return isinstance(a, numpy.ndarray) or hasattr(a, "__cuda_array_interface__")

    def owner(a):  # the object owning the memory a view looks at
        while is_array(a) and a.base is not None:
            a = a.base
        return a

    if is_array(target) and is_array(saved):  # the common case, first: it runs every call
        return owner(target) is owner(saved)
    for a in (saved, target):  # another library's array: no NumPy answer to read
        if hasattr(a, "__array_namespace__") and not is_array(a) and not isinstance(a, numpy.generic):
            raise TypeError(f"srcgrad: whether an in-place write reaches another name (a view or a "
                            f"copy, an array or a scalar) is read at run time from NumPy and CuPy "
                            f"arrays only, not {type(a).__name__}: copy explicitly (`.copy()`) "
                            "where a copy is meant, or write through the original array")
    return False


def check_saved(x, written, name, saved_at, writes):
    """`x`, a value custom Function `name` saved at `saved_at`, unless one of the in-place
    writes `writes` changed it (its flag in `written` is set): torch's RuntimeError."""
    version = sum(int(w) for w in written)  # a flag, or a count of writes (in a loop)
    if version:
        first = next(where for w, where in zip(written, writes) if w)
        shape = ", ".join(str(n) for n in getattr(x, "shape", ()))
        raise RuntimeError("one of the variables needed for gradient computation has been modified "
                           f"by an inplace operation: [{getattr(x, 'dtype', type(x).__name__)} "
                           f"[{shape}]], which was saved by {name} at {saved_at}, is at version "
                           f"{version}; expected version 0 instead. Hint: it was written in place "
                           f"at {first}; write out of place, save a copy, or run under "
                           "sg.autograd.graph.allow_mutation_on_saved_tensors().")
    return x


def stacked_bar(c, arrays, how):
    """The pieces of `c` that `numpy.<how>(arrays)` took from each array, each in its
    array's shape (`how`: "hstack", "vstack", "dstack" or "column_stack").

    An array of lower rank than `c` was promoted (atleast_1d/2d/3d, or a column) to
    extent 1 along the joined axis; its piece is reshaped back."""
    xp = _namespace(c)
    ndim = len(c.shape)
    ax = {"hstack": 0 if ndim == 1 else 1, "vstack": 0, "dstack": 2}.get(how, 1)
    lead = (slice(None),) * ax
    pieces, start = [], 0
    for a in arrays:
        shape = tuple(getattr(a, "shape", ()))
        n = shape[ax] if len(shape) == ndim else 1
        piece = c[lead + (slice(start, start + n), Ellipsis)]
        pieces.append(piece if len(shape) == ndim else xp.reshape(piece, shape))
        start += n
    return tuple(pieces)


def diag_bar(c, shape, k):
    """The cotangent of `numpy.diag(v, k)` for v of `shape`: the k-th diagonal of c
    when v is 1-D; c placed on the k-th diagonal of zeros of `shape` when v is 2-D."""
    xp = _namespace(c)
    if len(shape) == 1:  # (the Array API's has no diag: its linalg.diagonal)
        return xp.diag(c, k) if hasattr(xp, "diag") else xp.linalg.diagonal(c, offset=k)
    rows, cols = shape
    lo = max(-k, 0)  # the first row the k-th diagonal crosses
    n = c.shape[0]
    column = xp.concat([xp.zeros((lo,), dtype=c.dtype), c,
                        xp.zeros((rows - lo - n,), dtype=c.dtype)])
    return xp.eye(rows, cols, k=k, dtype=c.dtype) * column[:, None]


def kron_bar(c, other, shape, which):
    """Cotangent of operand `which` (0: a, 1: b) of ``numpy.kron(a, b)``, given its shape.

    `c` is the cotangent of the product, `other` the other operand. `kron` pads the
    operand of fewer dimensions with leading ones, and its result reshaped to
    ``(a0, b0, a1, b1, ...)`` is ``a[i0, i1, ...] * b[j0, j1, ...]`` at
    ``(i0, j0, i1, j1, ...)``: the cotangent is that block array times the other operand,
    summed over the other operand's axes."""
    xp = _namespace(c)
    nd = max(len(shape), other.ndim)
    mine = (1,) * (nd - len(shape)) + tuple(shape)
    theirs = (1,) * (nd - other.ndim) + tuple(other.shape)
    ones = (1,) * nd
    if which == 0:
        blocks = xp.reshape(c, tuple(d for p in zip(mine, theirs) for d in p))
        spread = xp.reshape(other, tuple(d for p in zip(ones, theirs) for d in p))
        summed = tuple(range(1, 2 * nd, 2))
    else:
        blocks = xp.reshape(c, tuple(d for p in zip(theirs, mine) for d in p))
        spread = xp.reshape(other, tuple(d for p in zip(theirs, ones) for d in p))
        summed = tuple(range(0, 2 * nd, 2))
    return xp.reshape(xp.sum(blocks * spread, axis=summed), tuple(shape))


def svd_reduced(x, full_matrices):
    """x itself, checked: the derivative of ``numpy.linalg.svd`` is that of the reduced
    factors; with ``full_matrices=True`` a non-square matrix's U or Vh holds columns
    that no derivative fixes, so a derivative through it raises instead."""
    if full_matrices and x.shape[-1] != x.shape[-2]:
        raise ValueError("srcgrad: the derivative of np.linalg.svd of a non-square matrix "
                         "needs full_matrices=False (the extra columns of U or Vh are not "
                         "unique)")
    return x


def singular_ties(s, sign):
    """1.0 where s_j + sign * s_i is 0 to rounding for two of the singular values `s`
    (..., k) (so the diagonal, for sign -1), else 0.0, as an array (..., k, k) of s's
    dtype: the poles the SVD's derivative drops (srcgrad/rules/table_sweep.py)."""
    xp = _namespace(s)
    d = xp.expand_dims(s, -2) + sign * xp.expand_dims(s, -1)
    scale = xp.sqrt(xp.expand_dims(xp.sum(s ** 2, axis=-1, keepdims=True), -1))
    return xp.astype(xp.abs(d) <= 1000 * xp.finfo(s.dtype).eps * scale, s.dtype)


def assert_true(test, message):
    """The user's `assert test, message`, run where their code runs it: AssertionError
    when the test is false (a multi-element array raises as Python's `assert` does)."""
    if not test:
        raise AssertionError(message) if message is not None else AssertionError()


def frexp_exponent(x):
    """The integer exponent of ``numpy.frexp`` (its mantissa is ``ldexp(x, -e)``: the
    composition in srcgrad/rules/compositions.py). In a namespace without frexp: e with
    2**(e-1) <= |x| < 2**e from log2, corrected by one where log2 rounded across a power
    of two; 0 for 0, inf and nan, in int32, as NumPy's."""
    xp = _namespace(x)
    if xp is _NUMPY:
        return numpy.frexp(x)[1]
    x = xp.asarray(x)
    regular = xp.isfinite(x) & (x != 0)
    a = xp.where(regular, xp.abs(x), xp.ones_like(x))
    e = xp.floor(xp.log2(a)) + 1
    half = xp.floor(e / 2)
    m = a * xp.pow(2.0, -half) * xp.pow(2.0, -(e - half))  # a / 2**e in two halves
    e = xp.where(m >= 1, e + 1, xp.where(m < 0.5, e - 1, e))
    return xp.astype(xp.where(regular, e, xp.zeros_like(e)), xp.int32)


# Array-API spellings of rows the standard lacks (srcgrad.codegen.spellings), computed as
# NumPy computes them; their derivatives are the rows' own formulas, not these helpers'.
def polyval_horner(p, x):
    """NumPy's polyval: Horner's rule over p (highest degree first)."""
    xp = _namespace(p)
    p, x = xp.asarray(p), xp.asarray(x)
    y = xp.zeros(x.shape, dtype=xp.result_type(p, x))
    for k in range(p.shape[0]):
        y = y * x + p[k]
    return y


def kron_blocks(a, b):
    """NumPy's kron: the operand of fewer axes padded with leading ones, then each a[i]
    times all of b, as blocks (a's axes interleaved with b's, then merged)."""
    xp = _namespace(a)
    a, b = xp.asarray(a), xp.asarray(b)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    blocks = xp.reshape(a, tuple(n for d in sa for n in (d, 1))) * xp.reshape(
        b, tuple(n for d in sb for n in (1, d)))
    return xp.reshape(blocks, tuple(m * n for m, n in zip(sa, sb)))


def trapezoid_uniform(y, dx, axis):
    """NumPy's trapezoid with uniform spacing: dx * (the sum less half of each end)."""
    xp = _namespace(y)
    y = xp.moveaxis(xp.asarray(y), axis, -1)
    if y.shape[-1] == 0:
        return xp.zeros(y.shape[:-1], dtype=y.dtype) * dx
    return dx * (xp.sum(y, axis=-1) - 0.5 * (y[..., 0] + y[..., -1]))


def einsum_contract(subscripts, *operands):
    """NumPy's einsum in a namespace without it (Note [Einsum as matmuls]): any number of
    operands, implicit or explicit output, '...' with broadcasting, repeated indices."""
    xp = _namespace(operands[0])
    arrays = [xp.asarray(a) for a in operands]
    subs, out = _einsum_subscripts(subscripts, [a.ndim for a in arrays])
    terms = [_einsum_distinct(xp, sub, a) for sub, a in zip(subs, arrays)]
    sizes = {}
    for sub, a in terms:
        for ch, n in zip(sub, a.shape):
            sizes[ch] = max(sizes.get(ch, 1), n)
    terms = [(sub, xp.broadcast_to(a, tuple(sizes[ch] for ch in sub))) for sub, a in terms]
    while True:
        terms = [_einsum_sum_unused(xp, k, terms, out) for k in range(len(terms))]
        if len(terms) == 1:
            break
        rest = "".join(sub for sub, _ in terms[2:]) + out
        terms = [_einsum_pair(xp, terms[0], terms[1], rest, sizes)] + terms[2:]
    sub, a = terms[0]
    return xp.permute_dims(a, tuple(sub.index(ch) for ch in out)) if sub != out else a


# Note [Einsum as matmuls]
# ~~~~~~~~~~~~~~~~~~~~~~~
# The Array API has no einsum. Its subscripts are made explicit (the ellipsis spelled out
# with fresh letters, right-aligned per operand; the implicit output is the ellipsis and
# the letters used once, sorted, as NumPy's), an operand's repeated letter becomes one
# axis by linalg.diagonal, every letter is broadcast to its one size, a letter no other
# operand and not the output has is summed away, and the operands are contracted left
# to right, two at a time, as one matmul: the letters both have that the output or a
# later operand needs are batch axes, those both have that nothing needs are contracted
# (the inner axis), the others are the rows and columns. No product of every letter's
# size is ever formed, so 'ij,jk->ik' costs a matmul, as in NumPy.
def _einsum_subscripts(subscripts, ranks):
    spec = subscripts.replace(" ", "")
    lhs, arrow, out = spec.partition("->")
    inputs = lhs.split(",")
    fresh = iter(ch for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if ch not in spec)
    n_ell = max((r - len(sub.replace("...", "")) for sub, r in zip(inputs, ranks) if "..." in sub),
                default=0)
    ell = "".join(next(fresh) for _ in range(n_ell))
    subs = []
    for sub, r in zip(inputs, ranks):
        k = r - len(sub.replace("...", "")) if "..." in sub else 0
        subs.append(sub.replace("...", ell[n_ell - k:] if k else ""))
    if not arrow:
        letters = lhs.replace(",", "").replace(".", "")
        out = ell + "".join(sorted(ch for ch in set(letters) if letters.count(ch) == 1))
    return subs, out.replace("...", ell)


def _einsum_distinct(xp, sub, a):
    """(sub, a) with each repeated letter's axes replaced by their diagonal, at the end."""
    while len(set(sub)) < len(sub):
        ch = next(c for c in sub if sub.count(c) > 1)
        p = sub.index(ch)
        q = sub.index(ch, p + 1)
        a = xp.linalg.diagonal(xp.moveaxis(a, (p, q), (-2, -1)))
        sub = "".join(c for i, c in enumerate(sub) if i not in (p, q)) + ch
    return sub, a


def _einsum_sum_unused(xp, k, terms, out):
    sub, a = terms[k]
    others = "".join(s for i, (s, _) in enumerate(terms) if i != k) + out
    unused = tuple(i for i, ch in enumerate(sub) if ch not in others)
    if not unused:
        return sub, a
    return "".join(ch for ch in sub if ch in others), xp.sum(a, axis=unused)


def _einsum_pair(xp, left, right, needed, sizes):
    (s1, a), (s2, b) = left, right
    batch = [ch for ch in s1 if ch in s2 and ch in needed]
    inner = [ch for ch in s1 if ch in s2 and ch not in needed]
    rows = [ch for ch in s1 if ch not in s2]
    cols = [ch for ch in s2 if ch not in s1]

    def arranged(sub, x, order, split):
        x = xp.permute_dims(x, tuple(sub.index(ch) for ch in order))
        head = tuple(sizes[ch] for ch in batch)
        return xp.reshape(x, head + tuple(math.prod(sizes[ch] for ch in part) for part in split))
    product = arranged(s1, a, batch + rows + inner, (rows, inner)) @ arranged(
        s2, b, batch + inner + cols, (inner, cols))
    shape = tuple(sizes[ch] for ch in batch + rows + cols)
    return "".join(batch + rows + cols), xp.reshape(product, shape)


def convolve_full(a, v):
    """NumPy's convolve in its default mode ('full'): out[k] = sum_i a[i] v[k - i], as
    len(v) shifted copies of a * v[j] (NumPy swaps the operands when v is the longer)."""
    xp = _namespace(a)
    a, v = xp.asarray(a), xp.asarray(v)
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    n, m = a.shape[0], v.shape[0]
    dtype = xp.result_type(a, v)
    out = xp.zeros((n + m - 1,), dtype=dtype)
    for j in range(m):
        out = out + xp.concat([xp.zeros((j,), dtype=dtype), a * v[j],
                               xp.zeros((m - 1 - j,), dtype=dtype)])
    return out


# ---------------------------------------------------------------- torch's eager formulas
# (srcgrad/rules/torch_rows.py, Note [Eager rows at kinks and poles]; compiled code never
# calls these.) NumPy arrays run torch's no-grad-mode backward; Tensors (the eager
# runtime's create_graph backward) run torch's grad-mode one, recording the ops torch
# records, so the second derivative is torch's too.

def _eager_tensors(x):
    """Whether x is the eager runtime's Tensor (a create_graph backward) rather than an array."""
    return not isinstance(x, (numpy.ndarray, numpy.generic, int, float)) and \
        hasattr(x, "requires_grad")


def torch_pow(x, y):
    """x ** y for a number y as torch's pow(Tensor, Scalar) computes it: sqrt(x) at
    y == 0.5 and 1 / sqrt(x) at -0.5 (so -0.0 gives -0.0 and -inf, -inf gives nan, where
    IEEE pow gives +0.0, +inf and +inf, 0.0)."""
    if (y == 0.5 or y == -0.5) and not _eager_tensors(x):
        return numpy.sqrt(x) if y == 0.5 else 1 / numpy.sqrt(x)
    return x ** y  # a Tensor: the eager pow picks this function again (one PowBackward0)


def softmax_along(x, axis):
    """exp(x - m) / sum(exp(x - m)) along `axis`, m the max along it: the eager softmax
    row's value. The formula as one expression computed the shift and the exponentials
    twice; on a float ndarray they are computed once, the same operations in the same
    order (the same bits), written in place into the one new array."""
    if x.__class__ is not numpy.ndarray or x.dtype.kind != "f":
        xp = _namespace(x)
        shifted = x - xp.max(x, axis=axis, keepdims=True)
        return xp.exp(shifted) / xp.sum(xp.exp(shifted), axis=axis, keepdims=True)
    e = numpy.subtract(x, numpy.maximum.reduce(x, axis, keepdims=True))
    numpy.exp(e, out=e)
    e /= numpy.add.reduce(e, axis, keepdims=True)
    return e


def log_softmax_along(x, axis):
    """(x - m) - log(sum(exp(x - m))) along `axis`, m the max along it: the eager
    log_softmax row's value, the shift computed once (as softmax_along)."""
    if x.__class__ is not numpy.ndarray or x.dtype.kind != "f":
        xp = _namespace(x)
        shifted = x - xp.max(x, axis=axis, keepdims=True)
        return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))
    shifted = numpy.subtract(x, numpy.maximum.reduce(x, axis, keepdims=True))
    shifted -= numpy.log(numpy.add.reduce(numpy.exp(shifted), axis, keepdims=True))
    return shifted


def trunc_divide(x, y):
    """trunc(x / y), torch's div(rounding_mode="trunc"): derivative 0, connected to x and y
    (a Tensor's namespace records it as one node; trunc(x / y) would differentiate x / y,
    0 / 0 where y == 0)."""
    t = x if hasattr(x, "shape") else y
    own = getattr(_namespace(t), "trunc_divide", None)
    if own is not None:
        return own(x, y)
    return numpy.trunc(x / y)


def _excl_products(g, x, axis):
    """torch's prod_safe_zeros_backward along `axis` (an int): g times the product of the
    other elements, as exclusive cumulative products of x with a one prepended."""
    xp = _namespace(x)
    n = x.shape[axis]
    if n == 1:
        return g
    ones = xp.ones_like(xp.take(x, numpy.arange(1), axis=axis))
    head = xp.take(x, numpy.arange(n - 1), axis=axis)
    tail = xp.flip(xp.take(x, numpy.arange(1, n), axis=axis), axis=axis)
    normal = xp.cumprod(xp.concat([ones, head], axis=axis), axis=axis)
    reverse = xp.flip(xp.cumprod(xp.concat([ones, tail], axis=axis), axis=axis), axis=axis)
    return g * (normal * reverse)


def torch_prod_bar(g, x, ans, axis, keepdims):
    """prod's gradient as torch's prod_backward computes it: `g * (ans / x)` where x has
    no zero (nan at an inf entry, inf / inf), the exclusive products where it has; a
    one-element axis with a zero passes g itself (no graph), and without grad mode more than
    one zero gives zeros."""
    xp = _namespace(x)
    if len(x.shape) == 0:
        return g
    if isinstance(axis, tuple):  # torch's prod takes one dim: the axes folded into one
        kept = tuple(1 if i in _normalize_axes(axis, len(x.shape)) else n
                     for i, n in enumerate(x.shape))
        g, ans = (fold_axes(xp.reshape(v, kept), axis) for v in (g, ans))
        return unfold_axes(torch_prod_bar(g, fold_axes(x, axis), ans, -1, True), x.shape, axis)
    zeros = int(numpy.count_nonzero(numpy.asarray(x) == 0))
    if axis is None:
        if zeros == 0:
            return g * (ans / x)
        if zeros > 1 and not _eager_tensors(x):
            return xp.zeros_like(x)
        return xp.reshape(_excl_products(g, xp.reshape(x, (-1,)), 0), x.shape)
    if not keepdims:
        g, ans = xp.expand_dims(g, axis=axis), xp.expand_dims(ans, axis=axis)
    if zeros == 0:
        return g * (ans / x)
    return _excl_products(g, x, axis)


def torch_cumprod_bar(g, x, ans, axis):
    """cumprod's gradient as torch's cumprod_backward computes it: one element (or a
    one-element axis) passes g (no graph); no zero: reversed_cumsum(ans * g) / x; zeros:
    without grad mode torch's O(n) masks (0 past the first zero), with it the products
    sum_{j >= k} g_j prod_{i <= j, i != k} x_i, term by term (O(n^2), as torch)."""
    xp = _namespace(x)
    if axis is None:
        return xp.reshape(torch_cumprod_bar(g, xp.reshape(x, (-1,)), ans, 0), x.shape)
    if numpy.size(numpy.asarray(x)) <= 1:  # (a 0-d x's cumprod has one element, 1-d)
        return g if g.shape == x.shape else xp.reshape(g, x.shape)
    n = x.shape[axis]
    if n == 1:
        return g
    data = numpy.asarray(x)
    zero = data == 0
    if not zero.any():
        return xp.flip(xp.cumsum(xp.flip(ans * g, axis=axis), axis=axis), axis=axis) / x
    if not _eager_tensors(x):
        return _cumprod_bar_masked(g, data, numpy.asarray(ans), zero, axis)
    columns = []
    for k in range(n):
        if k == 0:
            ones = xp.ones_like(xp.take(x, numpy.arange(1), axis=axis))
            after = xp.cumprod(xp.take(x, numpy.arange(1, n), axis=axis), axis=axis)
            omega = xp.concat([ones, after], axis=axis)
        else:
            until = xp.prod(xp.take(x, numpy.arange(k), axis=axis), axis=axis, keepdims=True)
            omega = until
            if k < n - 1:
                after = xp.cumprod(xp.take(x, numpy.arange(k + 1, n), axis=axis), axis=axis)
                omega = xp.concat([until, until * after], axis=axis)
        columns.append(xp.sum(xp.take(g, numpy.arange(k, n), axis=axis) * omega, axis=axis))
    return xp.stack(columns, axis=axis % len(x.shape))


def _cumprod_bar_masked(g, x, ans, zero, axis):
    """torch's cumprod_backward without grad mode where x has a zero (its O(n) branch):
    before the first zero reversed_cumsum(ans * g) / x, at it the products up to the
    second zero, after it 0."""
    count = numpy.cumsum(zero, axis=axis)
    before = count == 0
    w = numpy.where(before, ans * g, 0)
    with numpy.errstate(all="ignore"):
        first = numpy.where(before, numpy.flip(numpy.cumsum(numpy.flip(w, axis), axis=axis),
                                                axis) / x, 0)
    one = count == 1
    index = numpy.argmax(one, axis=axis, keepdims=True)
    at_zero = (numpy.arange(x.shape[axis]).reshape(
        [-1 if a == axis % x.ndim else 1 for a in range(x.ndim)]) == index) & one
    between = one & ~at_zero
    prev = numpy.where(index == 0, 1, numpy.take_along_axis(ans, numpy.maximum(index - 1, 0),
                                                            axis=axis))
    value = numpy.sum(numpy.cumprod(numpy.where(between, x, 1), axis=axis)
                      * numpy.where(one, g, 0), axis=axis, keepdims=True) * prev
    return numpy.where(at_zero, value, first)


def nan_arg_extreme(a, axis, keepdims, largest):
    """NumPy's nanargmax (largest) / nanargmin in a namespace without them, as NumPy
    computes them: nan read as -inf (+inf), then argmax (argmin), so a nan before a -inf
    is its index, as NumPy's; ValueError on an all-nan slice, as NumPy's."""
    xp = _namespace(a)
    a = xp.asarray(a)
    nan = xp.isnan(a)
    if bool(xp.any(xp.all(nan, axis=axis))):
        raise ValueError("All-NaN slice encountered")
    filled = xp.where(nan, xp.full_like(a, -xp.inf if largest else xp.inf), a)
    return (xp.argmax if largest else xp.argmin)(filled, axis=axis, keepdims=keepdims)


def digitize_sorted(x, bins, right):
    """NumPy's digitize in a namespace without it: searchsorted on the bins, increasing or
    decreasing (ValueError for bins that are neither, as NumPy's)."""
    xp = _namespace(bins)
    bins, side = xp.asarray(bins), "left" if right else "right"
    x = xp.asarray(x, dtype=bins.dtype)
    steps = bins[1:] - bins[:-1]
    if bool(xp.all(steps >= 0)):
        return xp.searchsorted(bins, x, side=side)
    if not bool(xp.all(steps <= 0)):
        raise ValueError("bins must be monotonically increasing or decreasing")
    return bins.shape[0] - xp.searchsorted(xp.flip(bins), x, side=side)
