"""Forward mode through `cond`, `for_range` and `while_loop` (Note [Regions]), and
through the tapes of adjoint loops (Note [Tangents on tapes]).

Tangents travel with their values: a branch computes the tangents of its results
next to them, a loop carries a tangent beside each carried value (its start: the
initial value's tangent). The op is extended in place: tangent ops inside its
blocks, tangent results, tangent outputs; codegen needs nothing new.

Note [Tangents on tapes]
~~~~~~~~~~~~~~~~~~~~~~~~
A gradient through a loop (Note [Reverse mode of control flow]) pushes what its
adjoint loop reads on a tape in the forward loop and pops it in the adjoint loop,
which runs the iterations in reverse. Forward mode over that pair (a Hessian is
forward over reverse; `sg.jvp`/`sg.jacobian` of `sg.grad`) needs the tangent of
each popped value: it is the tangent of the value pushed at the same iteration. So
the tape carries the tangents beside the values: `tape_push(tape, (v1, v2))`
becomes `tape_push(tape, (v1, v2, v1_t))` when only v1 has a tangent, and the
matching `v1, v2 = tape_pop(tape)` becomes `v1, v2, v1_t = tape_pop(tape)`, with
v1_t the popped v1's tangent. Tangents go after the values, so `prune_tapes`, which
keeps push items and pop outputs by position, prunes them alike.

Which items carry a tangent is known when the push is met: the forward loop comes
before its adjoint loop, and the push ends the forward body. A `TapeTangents`
records it; `tape_new` puts one in the tangent map under the tape's Var (a static
value has no tangent of its own), a `tape_copy` (sg.vjp's reusable tapes) shares
its source's. The map is copied into nested blocks, the record is shared, so the
push inside the forward body informs the pop inside the adjoint body. A tape pushed
on another tape (a nested loop's) travels with its record: the popped tape's record
is the pushed one's. The adjoint loop is an ordinary `for_range` (with
`reverse`): its carried cotangents get tangents like any loop's.
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Pack, Var
from srcgrad.ir.expand import Expander

TAPE_OPS = frozenset({"tape_new", "tape_push", "tape_pop", "tape_copy", "tape_len"})


class TapeTangents:
    """What each item of a tape's entries carries (Note [Tangents on tapes]): per
    pushed item, None (no tangent), TANGENT (its tangent follows the values) or the
    TapeTangents of a tape pushed as an item. `items` is None until the push is met."""

    def __init__(self):
        self.items = None

    def carries(self) -> bool:
        return any(k is TANGENT or (isinstance(k, TapeTangents) and k.carries())
                   for k in self.items or ())


TANGENT = "tangent"


def forward_tape(op, tangents: dict, namer) -> None:
    """Extend a tape op with the tangents of what the tape holds (in place)."""
    if op.prim == "tape_new":
        tangents[op.outs[0]] = TapeTangents()
        return
    record = tangents.get(op.args[0])
    if not isinstance(record, TapeTangents):
        return
    if op.prim == "tape_copy":
        tangents[op.outs[0]] = record
    elif op.prim == "tape_push":
        items = op.args[1].items
        kinds, extra = [], []
        for v in items:
            t = tangents.get(v) if isinstance(v, Var) else None
            if isinstance(t, TapeTangents):
                kinds.append(t)
            elif t is not None and v.kind == "array":
                kinds.append(TANGENT)
                extra.append(t)
            else:
                kinds.append(None)
        record.items = kinds
        if extra:
            op.args = (op.args[0], Pack(tuple(items) + tuple(extra), op.args[1].style))
    elif op.prim == "tape_pop" and record.items:
        if len(record.items) != len(op.outs):
            raise AssertionError(f"tape_pop of {len(op.outs)} values from a tape of {len(record.items)}")
        extra = []
        for out, kind in zip(op.outs, record.items):
            if isinstance(kind, TapeTangents):
                tangents[out] = kind
            elif kind is TANGENT:
                t = Var(namer.fresh(out.name.lstrip("_") + "_t"))
                tangents[out] = t
                extra.append(t)
        op.outs = op.outs + tuple(extra)


def _carries(t) -> bool:
    """Whether tangent-map entry `t` brings a tangent into a region."""
    return not isinstance(t, TapeTangents) or t.carries()


def forward_region(op, tangents: dict, namer, forward) -> list:
    """Extend control-flow `op` with tangents; ops to run before it (zero tangents)."""
    outer = {v: tangents[v] for v in dict.fromkeys(op.operand_vars()) if v in tangents}
    if not any(_carries(t) for t in outer.values()):
        return []  # (a tape's record still reaches the blocks when something else does)
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
        for out, r in zip(op.outs, block.results):  # a loop's tape the branch exports
            if isinstance(r, Var) and isinstance(t_map.get(r), TapeTangents):
                tangents[out] = t_map[r]
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
    op.args = (*op.args[:-1], Pack(tuple(inits) + tuple(init_t)))
    outs = [Var(namer.fresh(op.outs[i].name.lstrip("_") + "_t")) for i in carried]
    op.outs = op.outs + tuple(outs)
    tangents.update(zip((op.outs[i] for i in carried), outs))
    for new in before.ops:
        new.attrs["backward"] = True
    return before.ops
