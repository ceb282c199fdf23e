"""NumPy functions on a `Batched` batch of seeds: the axis-taking functions, products and
concatenations of the VJP/JVP formulas, each as one call on the whole batch
(Note [Batched seeds] in srcgrad.autograd.batching). A function with no rule here runs
once per seed (`_per_seed`)."""

from __future__ import annotations

import numpy

from srcgrad.autograd.batching import (
    Batched,
    _aligned,
    _axis,
    _data,
    _elementwise,
    _matmul,
    _per_seed,
    _reduce,
    _register,
    _shape_tuple,
    _size,
)


# ---------------------------------------------------------------- functions with a batched rule
@_register(numpy.shape)
def _shape(a):
    return a.shape


@_register(numpy.ndim)
def _ndim(a):
    return a.ndim


@_register(numpy.result_type)
def _result_type(*arrays_and_dtypes):
    return numpy.result_type(*(a.dtype if isinstance(a, Batched) else a for a in arrays_and_dtypes))


if hasattr(numpy, "astype"):
    @_register(numpy.astype)
    def _astype(x, dtype, copy=True, **kw):
        return x.astype(dtype, copy=copy)


@_register(numpy.sum)
def _sum(a, axis=None, dtype=None, keepdims=False, **kw):
    return _reduce(numpy.sum, a, axis, keepdims, dtype=dtype)


@_register(numpy.mean)
def _mean(a, axis=None, dtype=None, keepdims=False, **kw):
    return _reduce(numpy.mean, a, axis, keepdims, dtype=dtype)


@_register(numpy.reshape)
def _reshape(a, *args, **kw):
    shape = args[0] if args else kw.get("shape", kw.get("newshape"))
    shape = (shape,) if isinstance(shape, (int, numpy.integer)) else tuple(shape)
    return a.reshape(shape)


@_register(numpy.ravel)
def _ravel(a, order="C"):
    return a.reshape(-1)


@_register(numpy.broadcast_to)
def _broadcast_to(a, shape, subok=False):
    shape = (shape,) if isinstance(shape, (int, numpy.integer)) else tuple(shape)
    if not isinstance(a, Batched):
        return numpy.broadcast_to(a, shape)
    return Batched(numpy.broadcast_to(_aligned(a, len(shape)), (a.size,) + shape))


@_register(numpy.expand_dims)
def _expand_dims(a, axis):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return Batched(numpy.expand_dims(a.data, _axis(tuple(axes), a.ndim + len(axes))))


@_register(numpy.squeeze)
def _squeeze(a, axis=None):
    if axis is None:
        axis = tuple(i for i, n in enumerate(a.shape) if n == 1)
    return Batched(numpy.squeeze(a.data, _axis(axis, a.ndim)))


@_register(numpy.swapaxes)
def _swapaxes(a, axis1, axis2):
    return Batched(numpy.swapaxes(a.data, _axis(axis1, a.ndim), _axis(axis2, a.ndim)))


@_register(numpy.moveaxis)
def _moveaxis(a, source, destination):
    return Batched(numpy.moveaxis(a.data, _axis(source, a.ndim), _axis(destination, a.ndim)))


@_register(numpy.transpose)
def _transpose(a, axes=None):
    if axes is None:
        return a.T
    return Batched(numpy.transpose(a.data, (0,) + _axis(tuple(axes), a.ndim)))


@_register(numpy.where)
def _where(cond, x=None, y=None):
    if x is None:
        return _per_seed(numpy.where, (cond,), {})
    return _elementwise(numpy.where, (cond, x, y), {})


@_register(numpy.clip)
def _clip(a, a_min=None, a_max=None, **kw):
    return _elementwise(lambda *v: numpy.clip(*v, **kw), (a, a_min, a_max), {})


@_register(numpy.real)
def _real(a):
    return a.real


@_register(numpy.imag)
def _imag(a):
    return a.imag


def _like(func):
    return lambda a, *args, **kw: Batched(func(a.data, *args, **kw))


for _f in (numpy.zeros_like, numpy.ones_like, numpy.empty_like, numpy.copy):
    _register(_f)(_like(_f))


@_register(numpy.full_like)
def _full_like(a, fill_value, *args, **kw):
    if isinstance(fill_value, Batched):
        return _broadcast_to(fill_value, a.shape)
    return Batched(numpy.full_like(a.data, fill_value, *args, **kw))


def _sequence(arrays, ndim, size):
    return [v.data if isinstance(v, Batched) else
            numpy.broadcast_to(v, (size,) + numpy.shape(v)) for v in arrays]


@_register(numpy.concatenate)
def _concatenate(arrays, axis=0, **kw):
    if axis is None:
        return _per_seed(numpy.concatenate, (arrays,), {"axis": None})
    ndim = max(numpy.ndim(v) if not isinstance(v, Batched) else v.ndim for v in arrays)
    return Batched(numpy.concatenate(_sequence(arrays, ndim, _size(arrays)), axis=_axis(axis, ndim)))


@_register(numpy.stack)
def _stack_fn(arrays, axis=0, **kw):
    ndim = max(numpy.ndim(v) if not isinstance(v, Batched) else v.ndim for v in arrays)
    return Batched(numpy.stack(_sequence(arrays, ndim, _size(arrays)), axis=_axis(axis, ndim + 1)))


@_register(numpy.diagonal)
def _diagonal(a, offset=0, axis1=0, axis2=1):
    return Batched(numpy.diagonal(a.data, offset, _axis(axis1, a.ndim), _axis(axis2, a.ndim)))


@_register(numpy.trace)
def _trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    return Batched(numpy.trace(a.data, offset, _axis(axis1, a.ndim), _axis(axis2, a.ndim)))


def _along(func):
    def impl(a, axis=None, *args, **kw):
        if axis is None or not isinstance(a, Batched):
            return _per_seed(func, (a,) + args, {"axis": axis, **kw})
        return Batched(func(a.data, *args, axis=_axis(axis, a.ndim), **kw))
    return impl


for _f in (numpy.cumsum, numpy.cumprod):
    _register(_f)(_along(_f))


@_register(numpy.roll)
def _roll(a, shift, axis=None):
    if axis is None:
        return _per_seed(numpy.roll, (a, shift), {})
    return Batched(numpy.roll(a.data, shift, axis=_axis(axis, a.ndim)))


def _triangle(func):
    def impl(m, k=0):
        if isinstance(m, Batched) and m.ndim >= 2:  # acts on the last two axes
            return Batched(func(m.data, k))
        return _per_seed(func, (m,), {"k": k})
    return impl


for _f in (numpy.tril, numpy.triu):
    _register(_f)(_triangle(_f))


@_register(numpy.take_along_axis)
def _take_along_axis(arr, indices, axis=-1):
    if not isinstance(arr, Batched) or isinstance(indices, Batched) or axis is None:
        return _per_seed(numpy.take_along_axis, (arr, indices), {"axis": axis})
    idx = numpy.broadcast_to(indices, (arr.size,) + numpy.shape(indices))
    return Batched(numpy.take_along_axis(arr.data, idx, axis=_axis(axis, arr.ndim)))


@_register(numpy.repeat)
def _repeat(a, repeats, axis=None):
    if not isinstance(a, Batched) or isinstance(repeats, Batched) or axis is None:
        return _per_seed(numpy.repeat, (a, repeats), {"axis": axis})
    return Batched(numpy.repeat(a.data, repeats, axis=_axis(axis, a.ndim)))


@_register(numpy.diff)
def _diff(a, n=1, axis=-1, **kw):
    if kw or not isinstance(a, Batched):
        return _per_seed(numpy.diff, (a,), {"n": n, "axis": axis, **kw})
    return Batched(numpy.diff(a.data, n, axis=_axis(axis, a.ndim)))


@_register(numpy.matmul)
def _matmul_fn(a, b, **kw):
    return _matmul(a, b)


@_register(numpy.dot)
def _dot(a, b, out=None):
    na = a.ndim if isinstance(a, Batched) else numpy.ndim(a)
    nb = b.ndim if isinstance(b, Batched) else numpy.ndim(b)
    if out is None and na <= 2 and nb <= 2:
        return _matmul(a, b)
    return _per_seed(numpy.dot, (a, b), {})


@_register(numpy.inner)
def _inner(a, b):
    na = a.ndim if isinstance(a, Batched) else numpy.ndim(a)
    nb = b.ndim if isinstance(b, Batched) else numpy.ndim(b)
    if na == 1 and nb == 1:
        return _matmul(a, b)
    return _per_seed(numpy.inner, (a, b), {})


@_register(numpy.outer)
def _outer(a, b):
    return _elementwise(numpy.multiply, (numpy.reshape(a, (-1, 1)), numpy.reshape(b, (1, -1))), {})


@_register(numpy.tensordot)
def _tensordot(a, b, axes=2):
    if isinstance(a, Batched) == isinstance(b, Batched):
        return _per_seed(numpy.tensordot, (a, b), {"axes": axes})
    na = a.ndim if isinstance(a, Batched) else numpy.ndim(a)
    nb = b.ndim if isinstance(b, Batched) else numpy.ndim(b)
    if isinstance(axes, (int, numpy.integer)):
        axes = (tuple(range(na - axes, na)), tuple(range(axes)))
    ax, bx = (tuple(x) if isinstance(x, (tuple, list)) else (x,) for x in axes)
    if isinstance(a, Batched):
        return Batched(numpy.tensordot(a.data, b, (_axis(ax, na), tuple(i % nb for i in bx))))
    out = numpy.tensordot(a, b.data, (tuple(i % na for i in ax), _axis(bx, nb)))
    return Batched(numpy.moveaxis(out, na - len(ax), 0))


@_register(numpy.einsum)
def _einsum(subscripts, *operands, **kw):
    if not isinstance(subscripts, str) or ("." in subscripts and "->" not in subscripts) \
            or sum(isinstance(o, Batched) for o in operands) != 1:
        return _per_seed(numpy.einsum, (subscripts,) + operands, kw)
    subscripts = subscripts.replace(" ", "")
    if "->" not in subscripts:  # NumPy's implicit output: the letters used once, sorted
        letters = subscripts.replace(",", "")
        subscripts += "->" + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    inputs, out = subscripts.split("->")
    letter = next(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba"
                  if c not in subscripts)
    terms = inputs.split(",")
    terms = [letter + t if isinstance(o, Batched) else t for t, o in zip(terms, operands)]
    spec = ",".join(terms) + "->" + letter + out
    return Batched(numpy.einsum(spec, *(_data(o) for o in operands), **kw))


# ---------------------------------------------------------------- more rules the formulas use
@_register(numpy.broadcast_arrays)
def _broadcast_arrays(*arrays, subok=False):
    shape = numpy.broadcast_shapes(*(a.shape if isinstance(a, Batched) else numpy.shape(a)
                                     for a in arrays))
    return tuple(_broadcast_to(a, shape) for a in arrays)


@_register(numpy.linalg.solve)
def _solve(a, b):
    if isinstance(a, Batched) or not isinstance(b, Batched) or numpy.ndim(a) != 2 or b.ndim > 2:
        return _per_seed(numpy.linalg.solve, (a, b), {})
    if b.ndim == 1:  # one right-hand side per seed: the seeds are the columns
        return Batched(numpy.linalg.solve(a, b.data.T).T)
    moved = numpy.moveaxis(b.data, 0, -1)  # (..., M, K, B): the seeds join the columns
    flat = moved.reshape(moved.shape[:-2] + (-1,))
    out = numpy.linalg.solve(a, flat).reshape(moved.shape)
    return Batched(numpy.moveaxis(out, -1, 0))


@_register(numpy.diag)
def _diag(v, k=0):
    if v.ndim == 2:
        return Batched(numpy.diagonal(v.data, k, 1, 2))
    if v.ndim != 1:
        return _per_seed(numpy.diag, (v,), {"k": k})
    n = v.shape[0]
    m = n + abs(k)
    out = numpy.zeros((v.size, m, m), v.dtype)
    idx = numpy.arange(n)
    out[:, idx + max(-k, 0), idx + max(k, 0)] = v.data
    return Batched(out)


@_register(numpy.pad)
def _pad(array, pad_width, mode="constant", **kw):
    if not isinstance(array, Batched) or callable(mode):
        return _per_seed(numpy.pad, (array, pad_width), {"mode": mode, **kw})
    width = numpy.broadcast_to(numpy.asarray(pad_width), (array.ndim, 2))
    width = numpy.concatenate([numpy.zeros((1, 2), width.dtype), width])
    return Batched(numpy.pad(array.data, width, mode=mode, **kw))


@_register(numpy.tile)
def _tile(A, reps):
    reps = _shape_tuple(reps)
    d = max(A.ndim, len(reps))
    data = _aligned(A, d)
    return Batched(numpy.tile(data, (1,) + (1,) * (d - len(reps)) + reps))


@_register(numpy.flip)
def _flip(m, axis=None):
    axis = tuple(range(m.ndim)) if axis is None else axis
    return Batched(numpy.flip(m.data, _axis(axis, m.ndim)))


_register(numpy.fliplr)(lambda m: _flip(m, 1))
_register(numpy.flipud)(lambda m: _flip(m, 0))


if hasattr(numpy, "matrix_transpose"):
    _register(numpy.matrix_transpose)(lambda x: x.mT)


@_register(numpy.vdot)
def _vdot(a, b):
    product = _elementwise(numpy.multiply, (numpy.conj(numpy.ravel(a)), numpy.ravel(b)), {})
    return Batched(numpy.sum(product.data, axis=1))


@_register(numpy.take)
def _take(a, indices, axis=None, **kw):
    if not isinstance(a, Batched) or isinstance(indices, Batched):
        return _per_seed(numpy.take, (a, indices), {"axis": axis})
    if axis is None:
        return Batched(numpy.take(a.data.reshape(a.size, -1), indices, axis=1))
    return Batched(numpy.take(a.data, indices, axis=_axis(axis, a.ndim)))
