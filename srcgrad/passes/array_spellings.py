"""How a variant writes an op whose operand it knows is a NumPy array.

A variant (Note [Shape specialisation]) knows from its probe which values are NumPy
ndarrays on every call its guard admits, and writes them as a person would:

* `x.sum(axis=0)` rather than `xp.sum(x, axis=0)`: the method skips NumPy's
  Python-level dispatch (about a microsecond of a small array's reduction);
* a render's test of an operand against None (`einsum`'s second operand:
  `xp.einsum(s, x) if y is None else xp.einsum(s, x, y)`) decided: an array is not
  None, so the call is written alone.

Shape-generic code knows neither and keeps the `xp.` call and the test. Loop and
branch bodies too: the probe's facts cover them (Note [Regions]). The ops get
attrs that srcgrad.codegen.emit reads: "as_method" (the method's name) and "arrays"
(the parameters whose operands are known arrays).
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import Var


def spell_for_arrays(ops: list, arrays) -> None:
    """Mark the ops of `ops` (and of their blocks) that read values in `arrays`."""
    for op in ops:
        rule = rules.RULES[op.prim]
        if rule.method and op.args and isinstance(op.args[0], Var) and op.args[0] in arrays:
            op.attrs["as_method"] = rule.method
        if " is None" in rule.render:
            known = tuple(p for p, a in zip(rule.params, op.args) if isinstance(a, Var) and a in arrays)
            if known:
                op.attrs["arrays"] = known
        for block in op.blocks:
            spell_for_arrays(block.ops, arrays)
