"""A batch of seeds that flows through the generated kernels in one pass (functional's
`vectorize=True`).

Note [Batched seeds]
~~~~~~~~~~~~~~~~~~~~
`functional.jacobian(vectorize=True)` needs J's rows (reverse mode) or columns (forward
mode) for all basis seeds at once. The seeds are a `Batched`: one array of shape
`(B,) + shape` that *looks like* an array of `shape` (its `.shape`, `.ndim`, axes,
indexing and reductions are the logical ones). A cotangent or tangent is only ever
combined linearly with plain values (primals, saved arrays) in the VJP/JVP formulas, so
the generated kernels run unchanged on a Batched: NumPy hands every call on it to
`__array_ufunc__` / `__array_function__` here, which moves the batch axis out of the way:

* ufuncs and `where`/`clip`: operands aligned on their logical trailing axes (the batch
  axis stays first); exact for every elementwise formula;
* axis-taking functions (sum, mean, reshape, broadcast_to, expand_dims, swapaxes,
  transpose, moveaxis, concatenate, stack, diagonal, trace, cumsum, flip, take_along_axis,
  ...): the axes shifted by one; matmul/tensordot/einsum with one batched operand;
* anything else: the call is made once per seed and the results stacked (correct, not
  batched; the table-driven test in tests/autograd/test_spec_09_functional.py checks every
  row's VJP and JVP on a Batched against per-seed calls).

So one pass through the user's function and one backward (or one forward-mode pass)
serve all B seeds; the kernels' NumPy calls are each made once, on the whole batch.
"""

from __future__ import annotations

import numpy

__all__ = ["Batched"]

_FUNCS: dict = {}


def _register(*funcs):
    def deco(impl):
        for f in funcs:
            _FUNCS[f] = impl
        return impl
    return deco


class Batched:
    """B arrays of one logical shape, stored as one array of shape (B,) + shape."""

    __slots__ = ("data",)
    __array_priority__ = 3000

    def __init__(self, data):
        self.data = data

    @staticmethod
    def constant(value, like, size: int) -> Batched:
        """`value` (None: zeros) of `like`'s shape, the same for every seed."""
        value = numpy.zeros_like(like) if value is None else numpy.asarray(value)
        value = numpy.broadcast_to(value, numpy.shape(like))
        return Batched(numpy.broadcast_to(value, (size,) + value.shape))

    # ------------------------------------------------------------ what an array shows
    @property
    def size(self) -> int:  # the batch size (not the logical element count)
        return self.data.shape[0]

    @property
    def shape(self) -> tuple:
        return self.data.shape[1:]

    @property
    def ndim(self) -> int:
        return self.data.ndim - 1

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def T(self):
        return Batched(numpy.transpose(self.data, (0,) + tuple(range(self.data.ndim - 1, 0, -1))))

    @property
    def mT(self):
        return Batched(numpy.swapaxes(self.data, -1, -2))

    @property
    def real(self):
        return Batched(numpy.real(self.data))

    @property
    def imag(self):
        return Batched(numpy.imag(self.data))

    def __array__(self, dtype=None, copy=None):
        raise TypeError("srcgrad internal: a batch of seeds cannot become one array")

    def __array_namespace__(self, api_version=None):
        return numpy

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"Batched({self.data!r})"

    def __getitem__(self, index):
        parts = index if isinstance(index, tuple) else (index,)
        simple = all(p is None or p is Ellipsis or isinstance(p, (int, numpy.integer, slice))
                     for p in parts)
        arrays = [p for p in parts if not (p is None or p is Ellipsis
                                          or isinstance(p, (int, numpy.integer, slice)))]
        if simple or (len(arrays) == 1 and len(parts) == 1):
            return Batched(self.data[(slice(None),) + parts])
        return _per_seed(lambda x: x[index], (self,), {})

    # ------------------------------------------------------------ methods the formulas call
    def sum(self, axis=None, dtype=None, keepdims=False):
        return _reduce(numpy.sum, self, axis, keepdims, dtype=dtype)

    def mean(self, axis=None, dtype=None, keepdims=False):
        return _reduce(numpy.mean, self, axis, keepdims, dtype=dtype)

    def reshape(self, *shape, order="C"):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return Batched(self.data.reshape((self.size,) + tuple(shape), order=order))

    def ravel(self):
        return self.reshape(-1)

    def astype(self, dtype, copy=True):
        return Batched(self.data.astype(dtype, copy=copy))

    def conj(self):
        return Batched(numpy.conj(self.data))

    conjugate = conj

    def copy(self):
        return Batched(self.data.copy())

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return _transpose(self, axes or None)

    def swapaxes(self, a, b):
        return _swapaxes(self, a, b)

    # ------------------------------------------------------------ operators
    def _binary(ufunc, reflected=False):
        if reflected:
            return lambda self, other: ufunc(other, self)
        return lambda self, other: ufunc(self, other)

    __add__, __radd__ = _binary(numpy.add), _binary(numpy.add, True)
    __sub__, __rsub__ = _binary(numpy.subtract), _binary(numpy.subtract, True)
    __mul__, __rmul__ = _binary(numpy.multiply), _binary(numpy.multiply, True)
    __truediv__, __rtruediv__ = _binary(numpy.true_divide), _binary(numpy.true_divide, True)
    __pow__, __rpow__ = _binary(numpy.power), _binary(numpy.power, True)
    __matmul__, __rmatmul__ = _binary(numpy.matmul), _binary(numpy.matmul, True)
    del _binary

    def __neg__(self):
        return Batched(-self.data)

    def __pos__(self):
        return self

    def __abs__(self):
        return Batched(numpy.abs(self.data))

    # ------------------------------------------------------------ NumPy's protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if kwargs.get("out") is not None:
            return NotImplemented
        if method == "__call__":
            if ufunc is numpy.matmul:
                return _matmul(*inputs)
            return _elementwise(ufunc, inputs, kwargs)
        return _per_seed(getattr(ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        impl = _FUNCS.get(func)
        if impl is not None:
            return impl(*args, **kwargs)
        return _per_seed(func, args, kwargs)


# ---------------------------------------------------------------- helpers
def _size(values) -> int:
    for v in values:
        if isinstance(v, Batched):
            return v.size
        if isinstance(v, (list, tuple)):
            n = _size(v)
            if n:
                return n
    return 0


def _seed(value, b):
    if isinstance(value, Batched):
        return value.data[b]
    if isinstance(value, (list, tuple)):
        return type(value)(_seed(v, b) for v in value)
    if isinstance(value, dict):
        return {k: _seed(v, b) for k, v in value.items()}
    return value


def _per_seed(func, args, kwargs):
    """The call made once per seed, the results stacked (Note [Batched seeds])."""
    n = _size(list(args) + list(kwargs.values()))
    results = [func(*_seed(args, b), **_seed(kwargs, b)) for b in range(n)]
    return _stack(results)


def _stack(results):
    first = results[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_stack([r[k] for r in results]) for k in range(len(first)))
    if isinstance(first, numpy.ndarray) or numpy.isscalar(first) and not isinstance(first, str):
        return Batched(numpy.stack([numpy.asarray(r) for r in results]))
    return first  # a fact that does not depend on the seed (a shape, a dtype)


def _aligned(value, ndim):
    """A Batched's data with singleton axes after the batch axis up to `ndim` logical axes."""
    if isinstance(value, Batched):
        d = value.data
        missing = ndim - (d.ndim - 1)
        return d.reshape(d.shape[:1] + (1,) * missing + d.shape[1:]) if missing > 0 else d
    return value


def _elementwise(func, inputs, kwargs):
    ndim = max(v.ndim if isinstance(v, Batched) else numpy.ndim(v) for v in inputs)
    result = func(*(_aligned(v, ndim) for v in inputs), **kwargs)
    if isinstance(result, tuple):
        return tuple(Batched(r) for r in result)
    return Batched(result)


def _axis(axis, ndim):
    """A logical axis (or tuple of them) of an array of `ndim` axes, in the batched data."""
    if isinstance(axis, (tuple, list)):
        return tuple(a % ndim + 1 for a in axis)
    return axis % ndim + 1


def _reduce(func, x, axis, keepdims, **kwargs):
    axis = tuple(range(1, x.ndim + 1)) if axis is None else _axis(axis, x.ndim)
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return Batched(func(x.data, axis=axis, keepdims=keepdims, **kwargs))


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


for _f in (numpy.cumsum, numpy.cumprod, numpy.flip):
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
def _take_along_axis(arr, indices, axis):
    if not isinstance(arr, Batched) or isinstance(indices, Batched) or axis is None:
        return _per_seed(numpy.take_along_axis, (arr, indices), {"axis": axis})
    idx = numpy.broadcast_to(indices, (arr.size,) + numpy.shape(indices))
    return Batched(numpy.take_along_axis(arr.data, idx, axis=_axis(axis, arr.ndim)))


@_register(numpy.take)
def _take(a, indices, axis=None, **kw):
    if not isinstance(a, Batched) or isinstance(indices, Batched) or axis is None:
        return _per_seed(numpy.take, (a, indices), {"axis": axis})
    return Batched(numpy.take(a.data, indices, axis=_axis(axis, a.ndim)))


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


# ---------------------------------------------------------------- products
def _matmul(a, b):
    """`a @ b` with one or both operands batched (1-D operands as torch/NumPy read them)."""
    na = a.ndim if isinstance(a, Batched) else numpy.ndim(a)
    nb = b.ndim if isinstance(b, Batched) else numpy.ndim(b)
    if na == 0 or nb == 0:
        return _elementwise(numpy.multiply, (a, b), {})
    da = _data(a)
    db = _data(b)
    if na == 1:  # a row vector: (..., 1, k)
        da = numpy.expand_dims(da, -2)
    if nb == 1:  # a column vector: (..., k, 1)
        db = numpy.expand_dims(db, -1)
    lead = max(max(na, 2), max(nb, 2)) - 2
    da = _pad_lead(da, a, max(na, 2), lead)
    db = _pad_lead(db, b, max(nb, 2), lead)
    out = numpy.matmul(da, db)
    if na == 1:
        out = numpy.squeeze(out, -2)
    if nb == 1:
        out = numpy.squeeze(out, -1)
    return Batched(out)


def _data(v):
    return v.data if isinstance(v, Batched) else v


def _pad_lead(d, v, nd, lead):
    """A batched operand's data with singleton stack axes after the batch axis, so its
    logical stack axes line up with the other operand's."""
    if not isinstance(v, Batched):
        return d
    missing = lead - (nd - 2)
    return d.reshape(d.shape[:1] + (1,) * missing + d.shape[1:]) if missing > 0 else d


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
    if not isinstance(subscripts, str) or "." in subscripts or "->" not in subscripts \
            or sum(isinstance(o, Batched) for o in operands) != 1:
        return _per_seed(numpy.einsum, (subscripts,) + operands, kw)
    inputs, out = subscripts.replace(" ", "").split("->")
    letter = next(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba"
                  if c not in subscripts)
    terms = inputs.split(",")
    terms = [letter + t if isinstance(o, Batched) else t for t, o in zip(terms, operands)]
    spec = ",".join(terms) + "->" + letter + out
    return Batched(numpy.einsum(spec, *(_data(o) for o in operands), **kw))
