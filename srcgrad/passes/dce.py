"""Dead-code elimination: drop ops none of whose outputs is needed.

`grad` does not return the loss, so the forward ops that only compute the loss
value (and no value the backward reads) disappear here.
"""

from __future__ import annotations

from srcgrad.ir.core import operand_vars


def dce(ops: list, needed: list) -> list:
    live = {v for a in needed for v in operand_vars(a)}
    kept = []
    for op in reversed(ops):
        if any(o in live for o in op.outs):
            kept.append(op)
            live.update(op.operand_vars())
    kept.reverse()
    return kept
