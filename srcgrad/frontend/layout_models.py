"""Exact layouts of traced values: NumPy asked on stand-ins (Note [Layout stand-ins]).

Note [Layout stand-ins]
~~~~~~~~~~~~~~~~~~~~~~~
Whether `v.reshape(s)` is a view follows from v's shape and strides (NumPy's
`_attempt_nocopy_reshape`), and so do the flags of a view: `x.T` of a (4, 1) array and
`x[::-1]` of a (1, 2) array are still C-contiguous, since NumPy's contiguity ignores axes
of length one. A variant knows its arguments' shapes, and a C-contiguous argument's
strides up to those of length-one axes, which no decision reads (its guard checks shape
and C-contiguity: srcgrad.pipeline.modules.guard_value). So where a value's shape and
strides follow from those, the fact carries them (`Fact.layout`: shape and strides in
elements), and a rule's result is NumPy's own answer on a *stand-in*: a uint8 array of
that shape and those strides over a buffer just large enough (no data is read that
matters; `_MAX_ELEMENTS` bounds the buffer). A view step (an index, a transpose,
`reshape`, `ravel`, `expand_dims`, `squeeze`) runs on the stand-in itself, and
`numpy.may_share_memory` says whether it was a view; a fresh result (a ufunc's order
'K' output, a reduction, `np.take`, `np.concatenate`, an advanced index) is what NumPy
allocates for stand-ins of the operands' layouts, which does not depend on dtype or
values. What the stand-ins cannot say (a dynamic index, an argument that is not
C-contiguous, whose strides the guard does not fix) has no layout, and the flag rules of
Note [Layout facts] decide or leave it Undecided. Checked against NumPy on C, Fortran
and strided operands in tests/test_layout_facts.py.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy
from numpy.lib.stride_tricks import as_strided


class Fact(NamedTuple):
    array: bool  # an ndarray (False: a NumPy or Python scalar, immutable)
    ndim: int | None  # its rank where known
    c: bool  # known to be C-contiguous
    layout: tuple | None = None  # (shape, strides in elements) where exactly known


SCALAR = Fact(False, 0, False)


class Static(NamedTuple):
    """A constant operand of a rule (an axis, a shape, an index)."""

    value: object


_MAX_ELEMENTS = 1 << 20  # a larger stand-in is not made (no layout: the flag rules decide; a
# stand-in costs a pass over its bytes per rule a decision reads, at compile time only)


def c_layout(shape) -> tuple | None:
    """The layout of a fresh C-ordered array of `shape`."""
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
        return None
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return (shape, tuple(reversed(strides)))


def layout_of(a) -> tuple | None:
    """The layout of a real ndarray, in elements."""
    size = a.itemsize
    if size == 0 or any(s % size for s in a.strides):
        return None
    return (tuple(a.shape), tuple(s // size for s in a.strides))


def stand_in(layout):
    """A uint8 array with `layout`, over a buffer just large enough; None beyond the bound."""
    shape, strides = layout
    if any(n == 0 for n in shape):
        return numpy.empty(shape, numpy.uint8)
    lo = sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0)
    hi = sum(s * (n - 1) for n, s in zip(shape, strides) if s > 0)
    if hi - lo + 1 > _MAX_ELEMENTS:
        return None
    buffer = numpy.zeros(hi - lo + 1, numpy.uint8)
    return as_strided(buffer[-lo:], shape, strides)


def fact_of(result) -> Fact:
    """The fact of what NumPy returned for stand-ins."""
    if not isinstance(result, numpy.ndarray):
        return SCALAR
    return array_fact(result)


def array_fact(a) -> Fact:
    """A real array's fact. A C-contiguous one's strides are NumPy's fresh C array's on
    every axis longer than one, and no decision reads the others: its layout is that
    one's, so that equal facts compare equal (a branch merge, a loop's iteration)."""
    c = bool(a.flags.c_contiguous)
    return Fact(True, a.ndim, c, c_layout(tuple(a.shape)) if c else layout_of(a))


_VIEWS = frozenset({"getitem", "T", "transpose", "swapaxes", "moveaxis", "matrix_transpose",
                    "expand_dims", "squeeze", "reshape", "ravel", "flatten"})
_FRESH = frozenset({"take", "concatenate", "stack", "tile", "repeat", "cumsum", "cumprod",
                    "zeros_like", "ones_like", "empty_like", "full_like"})


def exact(name, args, ufuncs, reductions) -> Fact | None:
    """`name(**args)`'s fact from stand-ins of its operands' layouts, or None where some
    operand's layout (or a static parameter) is not known."""
    try:
        with warnings.catch_warnings(), numpy.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return _exact(name, args, ufuncs, reductions)
    except Exception:  # noqa: BLE001 (NumPy rejects these operands: no fact)
        return None


def _model(op):
    """A stand-in for an operand: an array's, 0 for a scalar or a number; None if unknown."""
    if isinstance(op, Static):
        v = op.value
        return 0 if isinstance(v, (int, float, bool, numpy.generic)) else None
    if isinstance(op, Fact):
        if not op.array:
            return 0
        return stand_in(op.layout) if op.layout is not None else None
    return None


def _static(args, key, default=None):
    op = args.get(key, Static(default))
    if not isinstance(op, Static):
        raise ValueError(key)
    return op.value


def _exact(name, args, ufuncs, reductions):
    x = args.get("x")
    if name in ufuncs or name == "where":
        ops = [_model(a) for a in args.values()]
        if any(m is None for m in ops):
            return None
        if name == "where":
            return fact_of(numpy.where(*ops))
        if name == "clip":
            return fact_of(numpy.clip(*ops))
        if len(ops) > 2:
            return None
        return fact_of(numpy.positive(ops[0]) if len(ops) == 1 else numpy.bitwise_or(*ops))
    if name in _VIEWS or name in _FRESH or name in reductions:
        if name in ("concatenate", "stack"):
            arrays = args.get("arrays")
            if not isinstance(arrays, tuple) or not arrays:
                return None
            models = [_model(a) for a in arrays]
            if any(m is None for m in models):
                return None
            if name == "concatenate" and any(not isinstance(m, numpy.ndarray) for m in models):
                return None  # NumPy refuses zero-dimensional operands
            return fact_of(getattr(numpy, name)(models, axis=_static(args, "axis", 0)))
        m = _model(x)
        if m is None or not isinstance(x, Fact):
            return None
        if not x.array:
            if name in ("reshape", "ravel", "flatten", "expand_dims") or name in _FRESH:
                m = numpy.uint8(0)  # a NumPy scalar: NumPy makes a fresh array
            else:
                return None
        return fact_of(_apply(name, m, args, reductions))
    return None


def _apply(name, m, args, reductions):
    if name == "getitem":
        index = _static(args, "index")
        return m[index]
    if name == "T":
        return m.T
    if name == "transpose":
        return numpy.transpose(m, _static(args, "axes"))
    if name == "swapaxes":
        return numpy.swapaxes(m, _static(args, "axis1"), _static(args, "axis2"))
    if name == "matrix_transpose":
        return numpy.swapaxes(m, -1, -2)
    if name == "moveaxis":
        return numpy.moveaxis(m, _static(args, "source"), _static(args, "destination"))
    if name == "expand_dims":
        return numpy.expand_dims(m, _static(args, "axis"))
    if name == "squeeze":
        return numpy.squeeze(m, axis=_static(args, "axis"))
    if name == "reshape":
        return numpy.reshape(m, _static(args, "shape"))
    if name == "ravel":
        return numpy.ravel(m)
    if name == "flatten":
        return numpy.asarray(m).flatten()
    if name == "take":
        return numpy.take(m, _static(args, "indices"), axis=_static(args, "axis"))
    if name == "tile":
        return numpy.tile(m, _static(args, "reps"))
    if name == "repeat":
        return numpy.repeat(m, _static(args, "repeats"), axis=_static(args, "axis"))
    if name in ("cumsum", "cumprod"):
        return numpy.cumsum(m, axis=_static(args, "axis"))  # (the same allocation)
    if name in ("zeros_like", "ones_like", "empty_like", "full_like"):
        return numpy.empty_like(m)
    if name in reductions:
        axis, keepdims = _static(args, "axis"), _static(args, "keepdims", False)
        out = numpy.sum(m, axis=axis, keepdims=keepdims)
        if name == "sum" or not isinstance(out, numpy.ndarray):
            return out
        # another reduction allocates its own result: its layout is known for a C operand only
        if m.flags.c_contiguous:
            return numpy.empty(out.shape, numpy.uint8)
        raise ValueError("not known")
    raise ValueError(name)


def is_view(name, args) -> bool | None:
    """Whether `name(**args)` (a reshape or ravel) returns a view of its operand: NumPy's
    answer on a stand-in of the operand's layout; None where it is not known."""
    x = args.get("x")
    if name == "reshape" and isinstance(x, Fact) and x.array and x.ndim == 1:
        return True  # one axis of any stride: every shape of its size is a view (NumPy's
        # _attempt_nocopy_reshape splits it), where ravel copies a strided vector
    if not isinstance(x, Fact) or not x.array or x.layout is None:
        return None
    m = stand_in(x.layout)
    if m is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = _apply(name, m, args, ())
    except Exception:  # noqa: BLE001 (a shape NumPy rejects, a dynamic one: not known)
        return None
    return bool(numpy.may_share_memory(out, m)) if out.size else None


# the ranks of np.concatenate's and np.stack's results, and of hstack's, vstack's, dstack's
# and column_stack's, which promote each element first (atleast_1d/2d/3d, or a column)
JOINS = {"concatenate": lambda d: d, "stack": lambda d: d + 1, "hstack": lambda d: max(d, 1),
         "vstack": lambda d: max(d, 2), "dstack": lambda d: max(d, 3),
         "column_stack": lambda d: max(d, 2)}


def joined(name, arrays) -> Fact | None:
    """A join's result: fresh, C-contiguous where every element is (NumPy lays it out as
    its elements are, order 'K'), of a rank known where the elements' ranks are equal."""
    if not isinstance(arrays, tuple) or not arrays:
        return None
    facts = [a if isinstance(a, Fact) else None for a in arrays]
    if any(f is None or not f.array for f in facts):
        return None
    ndims = {f.ndim for f in facts}
    ndim = ndims.pop() if len(ndims) == 1 else None
    return Fact(True, None if ndim is None else JOINS[name](ndim), all(f.c for f in facts))
