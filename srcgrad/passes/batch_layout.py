"""Batched forms of layout rows (Note [Batching] in srcgrad.passes.batch): flips, the
atleast_* family, tile, repeat, split, pad and its transpose. Each is the row itself on
the batched operand with its axis or width arguments extended by the batch axis."""

from __future__ import annotations

import numpy

from srcgrad.ir.core import Const, Op
from srcgrad.passes.batch_base import Unbatchable, _axes, _shift, _static


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


HANDLERS = {
    "fliplr": _fliplr, "flipud": _flipud, "atleast_1d": _atleast, "atleast_2d": _atleast,
    "atleast_3d": _atleast, "tile": _tile, "tile_bar": _tile_bar,
    "repeat": _repeat, "split": _split, "pad": _pad,
    "pad_bar": _pad_bar,
}
