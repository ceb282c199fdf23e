"""Common-subexpression elimination: an op identical to an earlier one reuses its outputs.

Every primitive is pure, so two ops with the same primitive, operands and attributes
compute the same values. Formulas often recompute `xp.shape(x)` or a transpose.

Note [Values whose identity is checked]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A function that writes into an argument gets a run-time `no_alias(new, arg, *others)`
check (Note [Mutation at trace time] in frontend/mutation.py). When that function is
traced inline (a nested `sg.jvp(helper, (np.tile(x, 2), np.tile(x, 2)), ...)`), its
arguments are the caller's values, and two equal expressions are two fresh arrays in
NumPy. Merging them would hand `no_alias` one array twice, and it would refuse a program
NumPy runs (fuzz seed 2640078). So an op whose value reaches a `no_alias` check is
never merged.
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


def _checked_operands(ops: list, into: set) -> set:
    """ids of the Vars any alias check (`no_alias`) in `ops` (or their blocks) reads."""
    for op in ops:
        if rules.RULES[op.prim].alias_check:
            into.update(id(v) for v in op.operand_vars())
        for block in op.blocks:
            _checked_operands(block.ops, into)
    return into


def _identity_checked(ops: list) -> set:
    """ids of the Vars whose value reaches a `no_alias` check (Note [Values whose
    identity is checked])."""
    checked = _checked_operands(ops, set())
    for op in reversed(ops):
        if any(id(v) in checked for v in op.outs):
            checked.update(id(v) for v in op.operand_vars())
    return checked


def cse(ops: list) -> tuple:
    """(ops without repeats, {dropped var: the var it repeats})."""
    seen, alias, out = {}, {}, []
    distinct = _identity_checked(ops)
    for op in ops:
        substitute([op], alias)
        if (op.blocks or rules.RULES[op.prim].effect  # never merged; blocks cleaned on their own
                or any(id(v) in distinct for v in op.outs)):
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


