"""Drop tape entries nothing pops and reads (Note [Reverse mode of control flow]).

What a loop pushes is decided when the backward is written, before simplification;
a value the backward read only for its shape (`xp.shape(h)` before the shape was
known) is no longer read afterwards. Each such entry is removed from the push in
the forward body and from the pop in the backward body.
"""

from __future__ import annotations

from srcgrad.ir.core import Pack, operand_vars


def prune_tapes(ops: list) -> None:
    pops = {}
    for op in _walk(ops):
        if op.prim == "tape_pop":
            pops[op.args[0]] = op
    if not pops:
        return
    read = set()
    for op in _walk(ops):
        if op.prim != "tape_push":
            read.update(op.operand_vars())
    for block in _blocks(ops):
        read.update(v for r in block.results for v in operand_vars(r))
    for op in _walk(ops):
        if op.prim == "tape_push" and op.args[0] in pops:
            pop = pops[op.args[0]]
            keep = [i for i, v in enumerate(pop.outs) if v in read]
            op.args = (op.args[0], Pack(tuple(op.args[1].items[i] for i in keep)))
            pop.outs = tuple(pop.outs[i] for i in keep)


def _walk(ops):
    for op in ops:
        yield op
        for block in op.blocks:
            yield from _walk(block.ops)


def _blocks(ops):
    for op in ops:
        for block in op.blocks:
            yield block
            yield from _blocks(block.ops)
