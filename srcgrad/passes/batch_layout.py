"""Batched forms of layout rows (Note [Batching] in srcgrad.passes.batch): flips, the
atleast_* family, tile, repeat, split, pad and its transpose, the joins that promote
their elements first (hstack, vstack, dstack, column_stack) and their transpose, and
ediff1d. Each is the row itself on the batched operand with its axis or width arguments
extended by the batch axis, or, for a join, its meaning: each element promoted to the
joined rank (per example), then one concatenation along the shifted axis."""

from __future__ import annotations

import numpy

from srcgrad.ir.core import Const, Op, Pack
from srcgrad.passes.batch_base import MAPPED_OPTIONS, Unbatchable, _axes, _shift, _static


def _fliplr(b, op, x):
    b.keep(Op("flip", (), op.outs, op.loc), x, Const(2))


def _flipud(b, op, x):
    b.keep(Op("flip", (), op.outs, op.loc), x, Const(1))


def _atleast(b, op, x):
    """atleast_1d/2d/3d only add unit axes: the batched operand reshaped to the result."""
    b.keep(Op("reshape", (), op.outs, op.loc), x, Const((b.size,) + b.shape(op.outs[0])))


def _tile(b, op, x, reps):
    value = _static(reps, op.prim)
    value = (value,) if isinstance(value, int) else tuple(value)
    if len(value) > b.rank(x):  # the operand gains leading unit axes first, as NumPy's does
        x = b.pad(x, len(value))
    b.keep(op, x, Const((1,) * (b.rank(x) + 1 - len(value)) + value))


def _tile_bar(b, op, c, shape, reps):
    """The tiles summed back, each example's: x's shape with leading unit axes up to the
    tiled rank (NumPy's tile pads the shorter of the two), then x's own shape."""
    target = tuple(_static(shape, op.prim))
    value = _static(reps, op.prim)
    value = (value,) if isinstance(value, int) else tuple(value)
    d = max(len(value), len(target))
    full, r = (1,) * (d - len(target)) + target, (1,) * (d - len(value)) + value
    c = b.full(c)
    if full == target:
        return b.keep(op, c, Const((b.size,) + target), Const((1,) + r))
    summed = b.call("tile_bar", c, (b.size,) + full, (1,) + r, shape=full)
    b.keep(Op("reshape", (), op.outs, op.loc), summed, Const((b.size,) + target))


def _repeat(b, op, x, repeats, axis):
    value = _static(axis, op.prim)
    if value is None:  # the flattened array
        x = b.call("reshape", x, (b.size, -1), shape=(int(numpy.prod(b.shape(x))),))
        return b.keep(op, x, repeats, Const(1))
    b.keep(op, x, repeats, Const(_shift(value, b.rank(x))))


def _split(b, op, x, sections, axis):
    b.keep(op, x, sections, Const(_axes(_static(axis, op.prim), b.rank(x))[0] + 1))


def _widths(pad_width, rank):
    """pad_width as one (before, after) pair per axis, the batch axis first with none."""
    pairs = numpy.broadcast_to(numpy.asarray(pad_width, dtype=numpy.int64), (rank, 2))
    return ((0, 0),) + tuple((int(p), int(q)) for p, q in pairs)


def _pad(b, op, x, pad_width, mode, constant_values):
    b.keep(op, x, Const(_widths(_static(pad_width, op.prim), b.rank(x))), mode, constant_values)


def _pad_bar(b, op, c, shape, pad_width, mode):
    if _static(mode, op.prim) != "constant":
        raise Unbatchable("`pad_bar` of a mode that copies elements into the border")
    target = tuple(_static(shape, op.prim))
    b.keep(op, c, Const((b.size,) + target), Const(_widths(_static(pad_width, op.prim), len(target))),
           mode)


def _promoted(how, shape):
    """An element's shape once `numpy.<how>` has promoted it to the joined rank: hstack's
    atleast_1d, vstack's atleast_2d, dstack's atleast_3d, column_stack's column."""
    if how == "column_stack":
        return shape if len(shape) >= 2 else (int(numpy.prod(shape)), 1)
    if how == "hstack":
        return shape or (1,)
    if how == "vstack":
        return shape if len(shape) >= 2 else (1,) + (shape or (1,))
    return {0: (1, 1, 1), 1: (1,) + shape + (1,), 2: shape + (1,)}.get(len(shape), shape)


def _join_axis(how, ndim) -> int:
    """The axis `numpy.<how>` concatenates along, in a result of `ndim` dimensions."""
    return {"hstack": 0 if ndim == 1 else 1, "vstack": 0, "dstack": 2}.get(how, 1)


def _joined(b, op, arrays):
    """hstack/vstack/dstack/column_stack: every element promoted to its joined shape
    (one batched reshape each), concatenated along the shifted join axis."""
    if not isinstance(arrays, Pack):
        raise Unbatchable(f"`{op.prim}` of an array (its rows as the elements)")
    how, out_ndim = op.prim, b.rank(op.outs[0])
    items = []
    for a in arrays.items:
        shape = _promoted(how, b.shape(a))
        items.append(b.call("reshape", b.full(a), (b.size,) + shape, shape=shape))
    b.alias(op, b.call("concatenate", Pack(tuple(items), arrays.style),
                       _join_axis(how, out_ndim) + 1, shape=b.shape(op.outs[0])))


def _stacked_bar(b, op, c, arrays, how):
    """The join's transpose: c's slices along the shifted join axis, each reshaped to its
    element's own shape (helpers.stacked_bar, per example)."""
    how, c = _static(how, op.prim), b.full(c)
    if isinstance(arrays, Pack):
        shapes = [b.shape(a) for a in arrays.items]
    elif isinstance(arrays, Const) and isinstance(arrays.value, (tuple, list)):
        shapes = [numpy.shape(a) for a in arrays.value]  # (constant elements: fuzz seed 3101483)
    else:
        raise Unbatchable("`stacked_bar` of an array (its rows as the elements)")
    ndim = b.rank(c)
    ax, start = _join_axis(how, ndim), 0
    for out, shape in zip(op.outs, shapes):
        n = shape[ax] if len(shape) == ndim else 1
        piece_shape = b.shape(c)[:ax] + (n,) + b.shape(c)[ax + 1:]
        piece = b.call("getitem", c, (slice(None),) * (ax + 1) + (slice(start, start + n),),
                       shape=piece_shape)
        b.alias(Op("reshape", (), (out,), op.loc),
                piece if piece_shape == shape else b.call("reshape", piece, (b.size,) + shape, shape=shape))
        start += n


def _ediff1d(b, op, x):
    """Differences of each example's flattened values: along axis 1 of (B, -1)."""
    n = int(numpy.prod(b.shape(x)))
    flat = b.call("reshape", x, (b.size, n), shape=(n,))
    b.keep(Op("diff", (), op.outs, op.loc), flat, Const(1), Const(1))


HANDLERS = {
    "hstack": _joined, "vstack": _joined, "dstack": _joined, "column_stack": _joined,
    "stacked_bar": _stacked_bar, "ediff1d": _ediff1d,
    "fliplr": _fliplr, "flipud": _flipud, "atleast_1d": _atleast, "atleast_2d": _atleast,
    "atleast_3d": _atleast, "tile": _tile, "tile_bar": _tile_bar,
    "repeat": _repeat, "split": _split, "pad": _pad,
    "pad_bar": _pad_bar,
}
MAPPED_OPTIONS.add(_stacked_bar)  # (it reads its `arrays`' shapes only)
