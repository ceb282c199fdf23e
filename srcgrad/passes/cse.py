"""Common-subexpression elimination: an op identical to an earlier one reuses its outputs.

Every primitive is pure, so two ops with the same primitive, operands and attributes
compute the same values. Formulas often recompute `xp.shape(x)` or a transpose.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import Pack, Var, substitute


def _key(operand):
    if isinstance(operand, Var):
        return ("v", id(operand))
    if isinstance(operand, Pack):
        return ("p", operand.style, tuple(_key(i) for i in operand.items))
    value = operand.value
    try:
        hash(value)
        return ("c", type(value).__name__, repr(value))
    except TypeError:
        return ("c", "id", id(value))


def cse(ops: list) -> tuple:
    """(ops without repeats, {dropped var: the var it repeats})."""
    seen, alias, out = {}, {}, []
    for op in ops:
        substitute([op], alias)
        if op.blocks or rules.RULES[op.prim].effect:  # never merged; blocks cleaned on their own
            out.append(op)
            continue
        key = (op.prim, tuple(_key(a) for a in op.args),
               tuple(sorted((k, repr(v)) for k, v in op.attrs.items() if k != "backward")))
        earlier = seen.get(key)
        if earlier is not None:
            alias.update(zip(op.outs, earlier.outs))
            continue
        seen[key] = op
        out.append(op)
    return out, alias


