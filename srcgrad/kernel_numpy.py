"""The `xp` the eager runtime's one-op kernels (srcgrad.kernels) are bound to: NumPy, with
a direct path for plain ndarrays through the few functions whose Python wrappers cost
more than their work on small arrays.

Note [The kernels' NumPy]
~~~~~~~~~~~~~~~~~~~~~~~~~
An eager op runs its kernel once per call, on arrays of any size: at batch 8 NumPy's
Python-level wrappers are much of an op's time (`np.mean` of 128 floats is ~4 us, the
sum it wraps ~0.6 us; `np.broadcast_to` of a 0-d cotangent ~1.5 us; `np.shape` three
times `a.shape`). The functions below do what NumPy's own wrappers do for a plain
`numpy.ndarray` with the arguments generated code passes (same ufunc calls, same
arguments, the same `intp` count for mean, so the same bits), and call NumPy's
function for anything else: ndarray subclasses, a Tensor under create_graph (its
`__array_function__`), CuPy arrays, other arguments. Every other name is NumPy's
(the module's `__getattr__`). tests/autograd/test_kernel_numpy.py checks each fast
path against NumPy's result, dtype, flags and errors.
"""

from __future__ import annotations

import numpy

_nd = numpy.ndarray
_intp = numpy.intp
_add_reduce = numpy.add.reduce
_max_reduce = numpy.maximum.reduce
_min_reduce = numpy.minimum.reduce
_true_divide = numpy.true_divide
_normalize = numpy.lib.array_utils.normalize_axis_index
_np_shape, _np_sum, _np_max, _np_min, _np_mean, _np_broadcast_to = (
    numpy.shape, numpy.sum, numpy.max, numpy.min, numpy.mean, numpy.broadcast_to)


def __getattr__(name):
    value = getattr(numpy, name)
    globals()[name] = value  # found directly from now on
    return value


def shape(a):
    return a.shape if a.__class__ is _nd else _np_shape(a)


_AXIS_KEEP = frozenset({"axis", "keepdims"})  # what generated code passes (by name)


def sum(a, *args, **kwargs):  # noqa: A001
    if a.__class__ is _nd and not args and kwargs.keys() <= _AXIS_KEEP:
        # np.sum's _wrapreduction for an ndarray: add.reduce
        return _add_reduce(a, kwargs.get("axis"), None, None, kwargs.get("keepdims", False))
    return _np_sum(a, *args, **kwargs)  # as called: a Tensor's protocol reads what was given


def max(a, *args, **kwargs):  # noqa: A001
    if a.__class__ is _nd and not args and kwargs.keys() <= _AXIS_KEEP:
        return _max_reduce(a, kwargs.get("axis"), None, None, kwargs.get("keepdims", False))
    return _np_max(a, *args, **kwargs)


def min(a, *args, **kwargs):  # noqa: A001
    if a.__class__ is _nd and not args and kwargs.keys() <= _AXIS_KEEP:
        return _min_reduce(a, kwargs.get("axis"), None, None, kwargs.get("keepdims", False))
    return _np_min(a, *args, **kwargs)


amax, amin = max, min


def mean(a, *args, **kwargs):
    """np.mean's _methods._mean for a non-empty float ndarray over None or one axis: the
    sum, then a division by the count as an intp, as NumPy divides."""
    if a.__class__ is _nd and not args and kwargs.keys() <= _AXIS_KEEP \
            and a.dtype.kind == "f" and a.dtype.itemsize > 2 and a.size:
        axis = kwargs.get("axis")
        if axis is None:
            n = a.size
        elif axis.__class__ is int:
            n = a.shape[_normalize(axis, a.ndim)]
        else:
            return _np_mean(a, **kwargs)
        count = _intp(n)
        ret = _add_reduce(a, axis, None, None, kwargs.get("keepdims", False))
        if ret.__class__ is _nd:
            return _true_divide(ret, count, out=ret, casting="unsafe", subok=False)
        return ret.dtype.type(ret / count)
    return _np_mean(a, *args, **kwargs)


def broadcast_to(array, shape, *args, **kwargs):
    """np.broadcast_to of a 0-d ndarray: a read-only view with zero strides."""
    if array.__class__ is _nd and not array.ndim and shape.__class__ is tuple and not args \
            and not kwargs and array.dtype.kind in "fciub":
        for n in shape:
            if n.__class__ is not int or n < 0:
                break
        else:
            view = _nd(shape, array.dtype, array, 0, (0,) * len(shape))
            view.flags.writeable = False
            return view
    return _np_broadcast_to(array, shape, *args, **kwargs)
