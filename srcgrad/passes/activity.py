"""Activity analysis: which values lie on a path from a `wrt` input to an output.

Only those need a cotangent. A value is *varied* if it depends differentiably on a
`wrt` input and *useful* if an output depends differentiably on it; active values
are both. Non-differentiable primitives (comparisons, `shape`, `sign`) and static
values (shapes, ints) cut every path.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import Var, operand_vars


def _differentiable_args(op):
    """(param name, operand) pairs through which a derivative flows."""
    if op.prim == "custom_call":  # Note [Custom Functions]: through its inputs, not its body
        return [("inputs", op.attrs["function"].differentiable_inputs(op))]
    rule = rules.RULES[op.prim]
    if rule.control:  # Note [Regions]: through everything the op and its blocks read
        return [(None, v) for v in dict.fromkeys(op.operand_vars())]
    if op.prim == "tape_pop":  # what was pushed (Note [Reverse mode over adjoint loops])
        return [(None, op.args[0])]
    if op.prim == "tape_push":
        return [(None, op.args[1])]
    if rule.nondiff or rule.static_out:
        return []
    return [(p, a) for p, a in zip(rule.params, op.args) if p in rule.vjp]


def active_vars(ops: list, wrt: list, outputs: list) -> set:
    tapes = tape_vars(ops)
    varied = {v for v in wrt if v.kind == "array"} | tapes
    for op in ops:
        if any(v in varied for _, a in _differentiable_args(op) for v in operand_vars(a)):
            varied.update(o for o in op.outs if o.kind == "array")
    useful = {v for v in outputs if isinstance(v, Var)} | tapes
    for op in reversed(ops):
        if any(o in useful for o in op.outs) or (tapes and op.prim == "tape_push") or (
                tapes and op.blocks and (any(v in tapes for v in op.operand_vars())
                                         or tape_vars([op]))):  # (a push inside: an `if`
            # whose branch makes a tape, a loop in it pushing, and exports it)
            for _, a in _differentiable_args(op):
                useful.update(operand_vars(a))
    return varied & useful


def tape_vars(ops: list) -> set:
    """The tapes `ops` push or pop (a program holding a loop's gradient, differentiated
    again: Note [Reverse mode over adjoint loops] in srcgrad.passes.vjp). Each counts
    as varied and useful: what is popped depends on what was pushed, a link no operand
    shows, so every popped array is varied and every pushed one useful (an over-
    approximation: a tape that holds nothing varied costs zero cotangents)."""
    found = set()
    for op in ops:
        if op.prim in ("tape_push", "tape_pop"):
            found.add(op.args[0])
        for block in op.blocks:
            found |= tape_vars(block.ops)
    return found
