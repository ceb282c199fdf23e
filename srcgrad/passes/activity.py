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
    if rule.nondiff or rule.static_out:
        return []
    return [(p, a) for p, a in zip(rule.params, op.args) if p in rule.vjp]


def active_vars(ops: list, wrt: list, outputs: list) -> set:
    varied = {v for v in wrt if v.kind == "array"}
    for op in ops:
        if any(v in varied for _, a in _differentiable_args(op) for v in operand_vars(a)):
            varied.update(o for o in op.outs if o.kind == "array")
    useful = {v for v in outputs if isinstance(v, Var)}
    for op in reversed(ops):
        if any(o in useful for o in op.outs):
            for _, a in _differentiable_args(op):
                useful.update(operand_vars(a))
    return varied & useful
