"""Dead-code elimination: drop ops none of whose outputs is needed.

`grad` does not return the loss, so the forward ops that only compute the loss
value (and no value the backward reads) disappear here.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import operand_vars


def dce(ops: list, needed: list) -> list:
    """`ops` without the ones nothing needs; nested blocks are cleaned too.

    An op with an effect (a loop tape's push: Note [Reverse mode of control flow])
    or containing one is always kept."""
    live = {v for a in needed for v in operand_vars(a)}
    kept = []
    for op in reversed(ops):
        if any(o in live for o in op.outs) or has_effect(op):
            for block in op.blocks:
                block.ops = dce(block.ops, block.results)
            kept.append(op)
            live.update(op.operand_vars())
    kept.reverse()
    return kept


def has_effect(op) -> bool:
    return rules.RULES[op.prim].effect or any(has_effect(o) for b in op.blocks for o in b.ops)
