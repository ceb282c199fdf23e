"""Forward mode through `cond`, `for_range` and `while_loop` (Note [Regions]).

Tangents travel with their values: a branch computes the tangents of its results
next to them, a loop carries a tangent beside each carried value (its start: the
initial value's tangent). The op is extended in place: tangent ops inside its
blocks, tangent results, tangent outputs; codegen needs nothing new.
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Var
from srcgrad.ir.expand import Expander


def forward_region(op, tangents: dict, namer, forward) -> list:
    """Extend control-flow `op` with tangents; ops to run before it (zero tangents)."""
    outer = {v: tangents[v] for v in dict.fromkeys(op.operand_vars()) if v in tangents}
    if op.prim == "cond":
        return _cond(op, outer, tangents, namer, forward)
    return _loop(op, outer, tangents, namer, forward)


def _tangent(v, t_map, tracer):
    if isinstance(v, Var) and v in t_map:
        return t_map[v]
    if isinstance(v, Var):
        return tracer.apply(rules.RULES["zeros_like"], [v], {})
    if numpy.ndim(v.value) > 0:  # a constant array (`y = np.zeros(n)` written in the loop)
        return Const(numpy.zeros(numpy.shape(v.value)))
    return Const(0.0)


def _cond(op, outer, tangents, namer, forward):
    if not outer:
        return []
    arrays = [i for i, o in enumerate(op.outs) if o.kind == "array"]
    for block in op.blocks:
        block.ops, t_map = forward(block.ops, outer, namer)
        tracer = Expander(namer, block.ops)
        block.results = block.results + [_tangent(block.results[i], t_map, tracer) for i in arrays]
    outs = [Var(namer.fresh(op.outs[i].name.lstrip("_") + "_t")) for i in arrays]
    op.outs = op.outs + tuple(outs)
    tangents.update(zip((op.outs[i] for i in arrays), outs))
    return []


def _loop(op, outer, tangents, namer, forward):
    body = op.blocks[0]
    params = body.params[1:]
    inits = list(op.args[-1].items)
    carried = [i for i, p in enumerate(params) if p.kind == "array"]
    if not outer or not carried:
        return []
    before = Expander(namer, [])
    init_t = [_tangent(inits[i], tangents, before) for i in carried]
    params_t = [Var(namer.fresh(params[i].name.lstrip("_") + "_t")) for i in carried]
    body_outer = {**{v: t for v, t in outer.items()}, **dict(zip((params[i] for i in carried), params_t))}
    body.ops, t_map = forward(body.ops, body_outer, namer)
    tracer = Expander(namer, body.ops)
    shift = 1 if op.prim == "while_loop" else 0  # a while block's results start with its test
    body.results = body.results + [_tangent(body.results[shift + i], t_map, tracer) for i in carried]
    body.params = body.params + params_t
    from srcgrad.ir.core import Pack

    op.args = (*op.args[:-1], Pack(tuple(inits) + tuple(init_t)))
    outs = [Var(namer.fresh(op.outs[i].name.lstrip("_") + "_t")) for i in carried]
    op.outs = op.outs + tuple(outs)
    tangents.update(zip((op.outs[i] for i in carried), outs))
    for new in before.ops:
        new.attrs["backward"] = True
    return before.ops
