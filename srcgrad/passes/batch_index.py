"""Batched forms of indexing (Note [Batching] in srcgrad.passes.batch): reads and writes
at an index, their transposes, and `take`. A batched operand is indexed with a leading
full slice; where NumPy would move the advanced-index axes to the front (integer arrays
that are not adjacent) the op is refused."""

from __future__ import annotations

import numpy

from srcgrad.ir.core import Const, Pack, Var
from srcgrad.passes.batch_base import Unbatchable, _shift, _static


def _batched_index(index):
    """`index` with a leading full slice, as an operand; Unbatchable where NumPy would
    place the advanced-index axes first (integer arrays not adjacent)."""
    if isinstance(index, Pack) and index.style == "tuple":
        parts = list(index.items)
    elif isinstance(index, Const) and isinstance(index.value, tuple):
        parts = [Const(p) for p in index.value]
    else:
        parts = [index]
    advanced = [i for i, p in enumerate(parts) if _is_advanced(p)]
    if advanced:
        ints = [i for i, p in enumerate(parts) if isinstance(p, Const) and isinstance(
            p.value, (int, numpy.integer)) and not isinstance(p.value, bool)]
        spots = sorted(set(advanced) | set(ints))
        if spots != list(range(spots[0], spots[-1] + 1)):
            raise Unbatchable("an index with integer arrays that are not adjacent")
    parts = [Const(slice(None))] + parts
    if all(isinstance(p, Const) for p in parts):
        return Const(tuple(p.value for p in parts))
    return Pack(tuple(parts), "tuple")


def _is_advanced(part) -> bool:
    if isinstance(part, Var):
        return True  # an index array, or an integer read at run time: adjacency matters
    if isinstance(part, Const):
        return isinstance(part.value, (list, numpy.ndarray))
    return False


def _getitem(b, op, x, index):
    if b.is_b(index):
        raise Unbatchable("an index computed from a seed")
    b.keep(op, x, _batched_index(index))


def _scatter_index(b, op, x, shape, index):
    b.keep(op, x, Const((b.size,) + tuple(_static(shape, op.prim))), _batched_index(index))


def _setitem_bar(b, op, c, index):
    b.keep(op, c, _batched_index(index))


def _setitem(b, op, x, index, v):
    picked = numpy.empty(b.shape(x))[_stand_in(b, index)].ndim  # the rank of x[index]
    v = b.pad(v, picked) if b.is_b(v) else v
    b.keep(op, b.full(x), _batched_index(index), v)


def _stand_in(b, index):
    """`index` with every integer read at run time (a loop's counter, `x[i] = ...`) as 0:
    any integer picks one axis, so the rank of `x[index]` follows; another value read
    at run time (a mask, an index array: its rank is the data's) is refused."""
    parts = index.items if isinstance(index, Pack) and index.style == "tuple" else (index,)
    values = []
    for part in parts:
        if isinstance(part, Const):
            values.append(part.value)
        elif isinstance(part, Var) and part in b.ints:
            values.append(0)
        else:
            raise Unbatchable("`setitem` at an index computed at run time")
    if isinstance(index, Const):
        return index.value
    return tuple(values) if isinstance(index, Pack) else values[0]


def _take(b, op, x, indices, axis):
    value = _static(axis, op.prim)
    if value is None and b.rank(x) != 1:  # from the flattened array
        x = b.call("reshape", x, (b.size, -1), shape=(int(numpy.prod(b.shape(x))),))
    b.keep(op, x, indices, Const(1 if value is None else _shift(value, b.rank(x))))


def _take_bar(b, op, c, shape, indices, axis):
    """The examples' cotangents scattered at the shared indices (Note [Mapped options]
    refuses indices one per example)."""
    value, target = _static(axis, op.prim), tuple(_static(shape, op.prim))
    if value is None:
        raise Unbatchable("`take_bar` into the flattened array")
    b.keep(op, b.full(c), Const((b.size,) + target), indices, Const(_shift(value, len(target))))


HANDLERS = {"getitem": _getitem, "scatter_index": _scatter_index, "setitem": _setitem,
            "setitem_bar": _setitem_bar, "take": _take, "take_bar": _take_bar}
