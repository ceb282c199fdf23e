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
  (their rules live in srcgrad.autograd.batching_rules, imported by whoever makes a
  Batched: functional);
* anything else: the call is made once per seed and the results stacked (correct, not
  batched; the table-driven test in tests/autograd/test_spec_09_functional.py checks every
  row's VJP and JVP on a Batched against per-seed calls);
* the helpers of srcgrad.rules.helpers get a namespace (`__array_namespace__`) whose
  `zeros`/`full` make batches, so a scatter (`add.at`, `out[index] = g`) writes into a
  batch. What cannot be batched raises `BatchingError` (today: writing a batch into a
  plain array, as the JVP of `t[i] = v` with only v carrying tangents does); the caller
  (functional) then takes the per-seed loop for the whole Jacobian, never a wrong value.

So one pass through the user's function and one backward (or one forward-mode pass)
serve all B seeds; the kernels' NumPy calls are each made once, on the whole batch.
"""

from __future__ import annotations

import numpy

__all__ = ["Batched", "BatchingError"]


class BatchingError(TypeError):
    """A batch of seeds met code that cannot run on a batch (Note [Batched seeds])."""

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
        raise BatchingError("srcgrad internal: a batch of seeds cannot become one array")

    def __array_namespace__(self, api_version=None):
        return _Namespace(self.size)

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

    def __setitem__(self, index, value):
        parts = index if isinstance(index, tuple) else (index,)
        target = self.data[(slice(None),) + parts]  # a view, or a copy for an integer index
        value = numpy.broadcast_to(_aligned(value, target.ndim - 1), target.shape)
        self.data[(slice(None),) + parts] = value

    __hash__ = None

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
        return numpy.transpose(self, axes or None)

    def swapaxes(self, a, b):
        return numpy.swapaxes(self, a, b)

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

    __eq__, __ne__ = _binary(numpy.equal), _binary(numpy.not_equal)
    __lt__, __le__ = _binary(numpy.less), _binary(numpy.less_equal)
    __gt__, __ge__ = _binary(numpy.greater), _binary(numpy.greater_equal)
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
        if method == "at":
            return _at(ufunc, *inputs)
        return _per_seed(getattr(ufunc, method), inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        impl = _FUNCS.get(func)
        if impl is not None:
            return impl(*args, **kwargs)
        return _per_seed(func, args, kwargs)


class _Namespace:
    """What `_namespace(batched)` gives the helpers of srcgrad.rules.helpers: NumPy, but
    arrays it creates (the zeros a scatter writes into) are batches of this size."""

    def __init__(self, size: int):
        self.size = size

    def __getattr__(self, name):
        return getattr(numpy, name)

    def zeros(self, shape, dtype=None):
        return Batched(numpy.zeros((self.size,) + _shape_tuple(shape), dtype=dtype))

    def ones(self, shape, dtype=None):
        return Batched(numpy.ones((self.size,) + _shape_tuple(shape), dtype=dtype))

    def empty(self, shape, dtype=None):
        return self.zeros(shape, dtype)

    def full(self, shape, fill_value, dtype=None):
        return Batched(numpy.full((self.size,) + _shape_tuple(shape), fill_value, dtype=dtype))

    @staticmethod
    def asarray(x, dtype=None, copy=None):
        if isinstance(x, Batched):
            x = x.astype(dtype) if dtype is not None and x.dtype != dtype else x
            return x.copy() if copy else x
        return numpy.asarray(x, dtype=dtype)


def _shape_tuple(shape) -> tuple:
    return (shape,) if isinstance(shape, (int, numpy.integer)) else tuple(shape)


def _at(ufunc, target, index, values=None):
    """`ufunc.at(target, index, values)` into a batch (a scatter-add of the seeds)."""
    if not isinstance(target, Batched):
        raise BatchingError("srcgrad internal: a batch of seeds cannot be scattered into one "
                            "array")
    parts = index if isinstance(index, tuple) else (index,)
    full = (slice(None),) + parts
    if values is None:
        ufunc.at(target.data, full)
        return None
    shape = target.data[full].shape
    ufunc.at(target.data, full, numpy.broadcast_to(_aligned(values, len(shape) - 1), shape))
    return None


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
