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


# Note [Mapped options]
# ~~~~~~~~~~~~~~~~~~~~~
# A handler batches a row's data: the operands its derivative formulas differentiate
# (`x` of `take(x, indices, axis)`). The other operands (an index, a shift, a count of
# repeats, an axis) are read as one value for every example, so a mapped one (an
# `argmax` of a mapped value, one per example) would be spliced in whole: NumPy reads
# `x_b[:, idx_b]` as every example's row at every example's index, an answer of the
# wrong meaning that is never an error. So an op whose non-differentiated operand is
# mapped is refused here, once for every handler, unless its handler says it reads
# such operands per example (`MAPPED_OPTIONS`). Rows with no derivative (argmax, isin)
# name their data in their own handlers.

MAPPED_OPTIONS: set = set()  # handlers that batch a mapped index or option themselves


def refuse_mapped_options(b, op, rule, handler) -> None:
    """Unbatchable where an operand that no derivative formula of `rule` names is mapped
    and `handler` does not read it per example (Note [Mapped options])."""
    if handler in MAPPED_OPTIONS or rule.alias_check or not (rule.vjp or rule.jvp):
        return  # (an alias check reads its other operands' memory, never their values)
    for name, a in zip(rule.params, op.args):
        if name not in rule.vjp and name not in rule.jvp and b.is_b(a):
            raise Unbatchable(f"`{op.prim}` with its `{name}` computed from a mapped value")


def _elementwise(b, op, *args):
    rank = b.rank(op.outs[0])
    b.keep(op, *[b.pad(a, rank) if b.is_b(a) else a for a in args])
