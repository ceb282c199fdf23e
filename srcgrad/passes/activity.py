"""Activity analysis: which values lie on a path from a `wrt` input to an output.

Only those need a cotangent. A value is *varied* if it depends differentiably on a
`wrt` input and *useful* if an output depends differentiably on it; active values
are both. Non-differentiable primitives (comparisons, `shape`, `sign`) and static
values (shapes, ints) cut every path.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.errors import CompileError
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


# Note [No silent constants]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# DESIGN.md decision 12: a value computed from a differentiated input reaches the output
# only through a table row's derivative formula, through source the tracer reads, or not
# at all: a CompileError at the user's line. A zero gradient is a claim, and it must be
# true. The places a differentiated ("varied") value could otherwise become a constant:
#
# * a row's parameter that has no derivative formula (`einsum`'s subscripts: the sublist
#   form `np.einsum(A, (0, 1), (1, 0))` binds A there; `pad`'s constant_values;
#   `arange`'s bounds). `refuse_silent_constants` below refuses a varied operand there,
#   unless the row's derivative through it is zero in truth (`NO_DERIVATIVE_NEEDED`:
#   indices, conditions, values of which the row reads only the shape). Both reverse
#   and forward mode call it (srcgrad.passes.vjp, srcgrad.passes.jvp), on every block
#   they differentiate, so a new row is refused by default, never silently zero.
# * an object the tracer would evaluate: `np.r_[x, C]` is a `getitem` of the constant
#   `np.r_` with x in its index. Index objects are lowered onto rows or refused in
#   srcgrad.frontend.idioms (`index_object`); a `getitem` of any other constant that is
#   not an array with a traced index is refused there too.
# * a call folded at compile time (srcgrad.frontend.idioms._fold_constant) runs only when
#   every argument is a constant, so it never sees a traced value; a NumPy function that
#   has no row and is not plain Python (`np.average`, `np.cov`) is refused by the tracer
#   (Expander.no_rule) unless srcgrad.frontend.idioms lowers it onto rows.
# tests/test_no_silent_constants.py checks each construct against central differences
# and sweeps NumPy's public functions.

# (row, parameter) pairs with no derivative formula whose operand may still be varied:
# the true derivative through them is zero (a discrete index or condition, the step of
# heaviside, the sign copysign takes) or the row reads only their shape (or checks
# them). A new row whose derivative through an array parameter is zero lists it here.
NO_DERIVATIVE_NEEDED = frozenset({
    ("getitem", "index"), ("setitem", "index"), ("setitem_bar", "index"),
    ("take", "indices"), ("take_bar", "indices"), ("take_along_axis", "indices"),
    ("take_along_bar", "indices"), ("scatter_index", "index"), ("where", "condition"),
    ("full_like", "x"), ("concat_bar", "arrays"), ("stack_bar", "arrays"),
    ("stacked_bar", "arrays"), ("check_saved", "written"), ("repeat", "repeats"), ("repeat_bar", "repeats"),
    ("split", "indices_or_sections"), ("heaviside", "x"), ("copysign", "y"),
    ("ldexp", "x2"),  # an integer exponent: discrete, as an index
    ("taken_input", "taken"),  # a condition, as where's
})
# Rows marked nondiff whose value does move with a varied operand (`np.arange(a, a + 3)`);
# Python's `round()` of a differentiated value is refused as `int()` is (Note [Python
# numbers of arrays] in srcgrad.frontend.trace): `round(T / dt)` of other values compiles.
_MOVING_NONDIFF = frozenset({"arange", "builtin_round"})


def refuse_silent_constants(ops: list, varied) -> None:
    """CompileError at the first op of `ops` that would turn a varied value (one that
    depends differentiably on `varied`) into a constant (Note [No silent constants])."""
    varied = {v for v in varied if isinstance(v, Var) and v.kind == "array"}
    for op in ops:
        rule = rules.RULES.get(op.prim)
        if rule is not None and not rule.control and op.prim not in ("custom_call", "tape_push",
                                                                     "tape_pop"):
            for p, a in zip(rule.params, op.args):
                if rule.nondiff or rule.static_out:
                    if op.prim not in _MOVING_NONDIFF:
                        break
                elif p in rule.vjp or (op.prim, p) in NO_DERIVATIVE_NEEDED or rule.alias_check:
                    continue  # (an alias check's other operands are only checked)
                if any(v in varied for v in operand_vars(a)):
                    raise CompileError.at(
                        op.loc, f"`{op.prim}` of a differentiated value in its `{p}` argument "
                        "has no derivative: srcgrad refuses rather than return a zero gradient",
                        f"srcgrad differentiates `{op.prim}({rule.signature})` through "
                        + (", ".join(q for q in rule.params if q in rule.vjp) or "none of its")
                        + " argument(s) only")
        if any(v in varied for _, a in _differentiable_args(op) for v in operand_vars(a)):
            varied.update(o for o in op.outs if o.kind == "array")
