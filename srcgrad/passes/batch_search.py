"""Batched forms of the rows that search, sort and look up (Note [Batching] in
srcgrad.passes.batch): arg reductions, sort and argsort, and the lookups of values in
a table (isin, searchsorted, digitize), and polyval (its coefficients as a table).

An arg reduction or a sort along an axis is the row along the shifted axis; over the
flattened array (axis=None) it is the row along axis 1 of each example's flattened
values, which is what the example's own call reads. The gathers that read what a sort
found (`take_along_axis` and its transpose, sort's gradient) take an index per example:
each example's row reads its own indices (Note [Mapped options]). A lookup is elementwise in its
values and reads the table whole, so it batches when only the values are mapped: a
mapped table (one per example) has no single call that reads it."""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Op
from srcgrad.passes.batch_base import MAPPED_OPTIONS, Unbatchable, _shift, _static


def _flat(b, x):
    return b.call("reshape", x, (b.size, -1), shape=(int(numpy.prod(b.shape(x))),))


def _arg_reduction(b, op, x, axis, keepdims):
    value, keep = _static(axis, op.prim), _static(keepdims, op.prim)
    if value is None:
        if keep and b.rank(x) != 1:
            raise Unbatchable(f"`{op.prim}` over the flattened array with keepdims")
        return b.keep(op, _flat(b, x), Const(1), keepdims)
    b.keep(op, x, Const(_shift(value, b.rank(x))), keepdims)


def _sorting(b, op, x, axis):
    value = _static(axis, op.prim)
    if value is None:
        return b.keep(op, _flat(b, x), Const(1))
    b.keep(op, x, Const(_shift(value, b.rank(x))))


def _take_along_axis(b, op, x, indices, axis):
    value = _static(axis, op.prim)
    if value is None:  # along the flattened array
        x, value = _flat(b, x), 0
        if b.is_b(indices):
            indices = _flat(b, indices)
    if b.is_b(indices):
        return b.keep(op, b.full(x), indices, Const(_shift(value, b.rank(x))))
    idx = b.expander.apply(rules.RULES["reshape"], [indices, (1,) + b.shape(indices)], {})
    b.keep(op, x, idx, Const(_shift(value, b.rank(x))))


def _take_along_bar(b, op, c, shape, indices, axis):
    """Each example's cotangent scattered at its own indices (or the shared ones)."""
    value, target = _static(axis, op.prim), tuple(_static(shape, op.prim))
    if value is None:  # into each example's flattened array, then shaped back
        size = int(numpy.prod(target))
        flat = b.call("take_along_bar", b.full(c), (b.size, size), b.full(indices), 1, shape=(size,))
        return b.keep(Op("reshape", (), op.outs, op.loc), flat, Const((b.size,) + target))
    b.keep(op, b.full(c), Const((b.size,) + target), b.full(indices),
           Const(_shift(value, len(target))))


MAPPED_OPTIONS.update((_take_along_axis, _take_along_bar))


def _lookup(b, op, values, table, *options):
    """isin(element, test_elements, ...), digitize(x, bins, right): the values mapped."""
    if b.is_b(table) or any(b.is_b(a) for a in options):
        raise Unbatchable(f"`{op.prim}` of a mapped table")
    b.keep(op, values, table, *options)


def _searchsorted(b, op, table, values, side):
    if b.is_b(table) or b.is_b(side):
        raise Unbatchable("`searchsorted` of a mapped table")
    b.keep(op, table, values, side)


def _polyval(b, op, p, x):
    """polyval(p, x) is elementwise in x and reads its coefficients p whole, as a lookup
    reads its table: with p unmapped, the row itself. With p mapped (a polynomial per
    example, or a tangent's seeds), NumPy's own Horner steps (`y = y * x + p[k]` from
    zeros like x), each example's coefficient broadcast over its x."""
    if not b.is_b(p):
        return b.keep(op, p, x)
    xs = b.shape(x)
    xf = b.full(x)
    unit = (1,) * len(xs)
    y = b.call("zeros_like", xf, shape=xs)
    for k in range(b.shape(p)[0]):
        pk = b.call("getitem", p, (slice(None), k), shape=())
        pk = b.call("reshape", pk, (b.size,) + unit, shape=unit)
        y = b.call("add", b.call("multiply", y, xf, shape=xs), pk, shape=xs)
    b.alias(op, y)


HANDLERS = {
    "polyval": _polyval,
    "argmax": _arg_reduction, "argmin": _arg_reduction, "nanargmax": _arg_reduction,
    "nanargmin": _arg_reduction, "argsort": _sorting, "sort": _sorting,
    "isin": _lookup, "digitize": _lookup, "digitize_sorted": _lookup,
    "searchsorted": _searchsorted, "take_along_axis": _take_along_axis,
    "take_along_bar": _take_along_bar,
}
