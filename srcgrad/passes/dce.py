"""Dead-code elimination: drop ops none of whose outputs is needed.

`grad` does not return the loss, so the forward ops that only compute the loss
value (and no value the backward reads) disappear here. So do a loop's carried
values that nothing after the loop reads and that feed only themselves in the
body (a loss summed step by step, which the gradient never reads).
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import Pack, operand_vars

LOOPS = ("for_range", "while_loop")


def dce(ops: list, needed: list) -> list:
    """`ops` without the ones nothing needs; nested blocks are cleaned too.

    An op with an effect (a loop tape's push: Note [Reverse mode of control flow])
    or containing one is always kept."""
    live = {v for a in needed for v in operand_vars(a)}
    kept = []
    for op in reversed(ops):
        if any(o in live for o in op.outs) or has_effect(op):
            if op.prim in LOOPS and op.blocks:
                drop_dead_carried(op, live)
            for block in op.blocks:
                block.ops = dce(block.ops, block.results)
            kept.append(op)
            live.update(op.operand_vars())
    kept.reverse()
    return kept


def has_effect(op) -> bool:
    return rules.RULES[op.prim].effect or any(has_effect(o) for b in op.blocks for o in b.ops)


def drop_dead_carried(op, live) -> None:
    """Remove the carried values of loop `op` that are dead: their output is not in
    `live`, and the body reads their param only to compute dead values. The break
    flag (attrs["until"]) and a while loop's test stay."""
    block = op.blocks[0]
    first = 1 if op.prim == "while_loop" else 0  # a while block's results start with its test
    params, results = block.params[1:], block.results[first:]
    inits, outs = list(op.args[-1].items), list(op.outs)
    if not (len(params) == len(results) == len(inits) == len(outs)):
        return
    keep = {k for k, o in enumerate(outs) if o in live or params[k] is op.attrs.get("until")}
    while True:
        read = _reads(block.ops, [*block.results[:first], *(results[k] for k in keep)])
        more = {k for k, p in enumerate(params) if p in read} - keep
        if not more:
            break
        keep |= more
    if len(keep) == len(outs):
        return
    kept = sorted(keep)
    block.params = block.params[:1] + [params[k] for k in kept]
    block.results = block.results[:first] + [results[k] for k in kept]
    op.args = (*op.args[:-1], Pack(tuple(inits[k] for k in kept), op.args[-1].style))
    op.outs = tuple(outs[k] for k in kept)


def _reads(ops, needed) -> set:
    """The Vars that the ops computing `needed` (or having an effect) read."""
    live = {v for a in needed for v in operand_vars(a)}
    for op in reversed(ops):
        if any(o in live for o in op.outs) or has_effect(op):
            live.update(op.operand_vars())
    return live
