"""Split a differentiated graph into a forward and a backward function.

The forward keeps the primal ops; the backward gets every op that reads a
cotangent or that a derivative formula introduced. What the backward reads of
the forward is *saved*: derived from the formulas' free variables, never declared.

Formula ops that compute static facts (`xp.shape(x)`) run in the forward instead,
so when a formula needs only the shape of `x`, the shape is saved and `x` is not.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import Var


def split(ops: list, inputs: list, seeds: list, outputs=()) -> tuple:
    """(forward ops, backward ops, saved Vars in first-use order).

    What the forward returns (`outputs`) is computed in the forward even when an op
    on its way came from a formula (a simplified `matmul_bar` in a function that calls
    it is `c @ other.T`, marked as backward work)."""
    in_backward = {s for s in seeds if isinstance(s, Var)}
    needed = {v for v in outputs if isinstance(v, Var)}
    for op in reversed(ops):
        if any(o in needed for o in op.outs):
            needed.update(op.operand_vars())
    forward, backward = [], []
    for op in ops:
        reads_cotangent = any(v in in_backward for v in op.operand_vars())
        from_formula = (op.attrs.get("backward") and not rules.RULES[op.prim].static_out
                        and not any(o in needed for o in op.outs))
        if reads_cotangent or from_formula:
            backward.append(op)
            in_backward.update(op.outs)
        else:
            forward.append(op)
    defined_forward = set(inputs) | {o for op in forward for o in op.outs}
    saved: dict = {}
    for op in backward:
        for v in op.operand_vars():
            if v in defined_forward:
                saved.setdefault(v, None)
    return forward, backward, list(saved)

