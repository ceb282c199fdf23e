"""What the batching pass and its contraction forms share (Note [Batching] in
srcgrad.passes.batch): the refusal, axis bookkeeping and the elementwise form."""

from __future__ import annotations

from srcgrad.ir.core import Const


class Unbatchable(Exception):
    """The program has an op this pass cannot batch; the message names it."""


def _axes(axis, rank, extra=0) -> tuple:
    """`axis` (None, int or tuple) of a rank-`rank` value as non-negative ints."""
    if axis is None:
        return tuple(range(rank))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    n = rank + extra
    return tuple(int(a) % n if n else 0 for a in axes)


def _shift(axis, rank, extra=0):
    """The batched program's spelling of `axis`: non-negative axes shift by one,
    negative ones are unchanged; None means every axis but the batch axis."""
    if axis is None:
        return tuple(range(1, rank + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(_shift(a, rank, extra) for a in axis)
    return axis + 1 if axis >= 0 else axis


def _static(operand, what):
    if not isinstance(operand, Const):
        raise Unbatchable(f"`{what}` with an argument computed at run time")
    return operand.value


def _elementwise(b, op, *args):
    rank = b.rank(op.outs[0])
    b.keep(op, *[b.pad(a, rank) if b.is_b(a) else a for a in args])
