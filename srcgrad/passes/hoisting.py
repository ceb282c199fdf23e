"""Loop-invariant values out of forward loops, before reverse mode (Note [Invariants
off the tape]).

Note [Invariants off the tape]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The tracer writes a loop body as the user wrote it, so `p[0] * u[0]` in an RK4 step
reads `p[0]` afresh every iteration: an op whose operands the loop never changes. Left
in the body, reverse mode sees a value the body defines and its backward reads, so the
value goes on the tape, one entry per iteration of the same number (the RK4 module's
tape held 56 fields a step, 32 of them the four rates `p[k]` again and again), and its
cotangent is scattered into `grad_p` inside the adjoint loop. Hoisted before the loop,
it is an outer value: the adjoint body reads it from the enclosing scope (no tape), its
cotangent is one carried sum, and its own VJP runs once after the adjoint loop.

An op is hoisted when it is a plain row (no block, no effect, no I/O, not a custom
Function's call, not a fresh allocation: an array a later pass may write in place must
stay one per iteration), every operand is defined outside the loop, and the loop runs
at least once: a `while` whose first test is the constant True, a `range` of constant
bounds that is not empty. Then the hoisted op runs exactly when it ran before, only
once instead of every time (a loop that might not run would raise or warn where the
user's program does not). Nested loops are hoisted inside out, so an op can leave both.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import Const, Var, substitute
from srcgrad.passes.cse import cse
from srcgrad.passes.scalars import no_methods_on_numbers
from srcgrad.passes.shapes import _NOT_AN_ARRAY

# Rows that make fresh storage of their own (no array operand they compute from): one per
# iteration, as the user wrote it (a later pass may write into it in place).
_FRESH = frozenset({"zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like",
                    "full_like", "copy", "array", "asarray", "arange", "eye", "identity",
                    "linspace"})


def hoist_loop_invariants(ops: list) -> list:
    """`ops` with each loop's invariant ops moved before it (Note [Invariants off the tape])."""
    out = []
    for op in ops:
        for block in op.blocks:
            block.ops = hoist_loop_invariants(block.ops)
        if op.prim in ("for_range", "while_loop") and op.blocks and _runs_once_at_least(op):
            # the body's repeats (`p[0]` read by each RK4 stage) are one value once outside:
            # one carried cotangent sum each, not one per read
            hoisted, alias = cse(_take_invariants(op.blocks[0]))
            substitute([op], alias)
            out.extend(hoisted)
        out.append(op)
    return out


def _runs_once_at_least(op) -> bool:
    args = op.args
    if op.prim == "while_loop":
        return isinstance(args[0], Const) and args[0].value is True
    bounds = args[:3]
    if not all(isinstance(b, Const) and type(b.value) is int for b in bounds) or bounds[2].value == 0:
        return False
    return len(range(*(b.value for b in bounds))) > 0


def _take_invariants(block) -> list:
    varying = set(block.params)
    hoisted, kept = [], []
    for op in block.ops:
        if _hoistable(op) and not any(v in varying for v in op.operand_vars()):
            hoisted.append(op)
        else:
            varying.update(op.outs)
            kept.append(op)
    block.ops = kept
    return hoisted


def _hoistable(op) -> bool:
    if op.blocks or not op.outs or op.prim in _FRESH or op.prim == "custom_call" \
            or op.prim.startswith(("tape_", "check")):
        return False
    rule = rules.RULES.get(op.prim)
    if rule is None or rule.effect or rule.io or rule.control:
        return False
    return any(isinstance(v, Var) for v in op.operand_vars())  # (constants were folded)


def zeros_of_numbers(ops: list, probe, made=None) -> None:
    """A backward `zeros_like(c)` of a number `c` (a hoisted `p[0]`: its cotangent sum's
    start) is `0.0`: NumPy's 0-d zeros plus a number is that number's type, and numba
    cannot carry a sum that starts a 0-d array and continues a float. A method call the
    probe chose on that value (its 0-d array: `g.reshape((1,))`) is the namespace's
    function again: 'float' object has no attribute 'reshape' (fuzz seed 2662863)."""
    top = made is None
    made = set() if top else made
    for op in ops:
        for block in op.blocks:
            zeros_of_numbers(block.ops, probe, made)
        if op.prim == "zeros_like" and op.attrs.get("backward") and set(op.attrs) == {"backward"} \
                and isinstance(op.args[0], Var) and all(isinstance(a, Const) and a.value is None
                                                        for a in op.args[1:]) \
                and probe.shapes.get(op.args[0]) == () and probe.kinds.get(op.args[0]) == _NOT_AN_ARRAY:
            op.attrs["python_value"] = Const(0.0)
            made.add(op.outs[0])
    if top and made:
        no_methods_on_numbers(ops, made)
