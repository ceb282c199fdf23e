"""Reverse mode through `cond`, `for_range` and `while_loop` (Note [Regions]).

Note [Reverse mode of control flow]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`cond`: each branch is differentiated on its own (the block's results seeded with
the op outputs' cotangents) into a backward `cond` on the same predicate, whose
outputs are the cotangents of the outer values either branch reads (zeros from the
branch that does not). A forward branch value its backward reads is *exported*:
it becomes one more output of the forward `cond` (None from the other branch), so
the backward reads a top-level value like any other (and `sg.vjp` can save it).
Only the matching backward branch reads it, so it is the exporting branch's value
wherever it is read (op.attrs["exports"]: output -> that branch's index; the shape
probe takes its facts from there).

Loops: the body is differentiated once, as a block, with the carried values and the
outer values it reads as `wrt`. What the backward body reads of the forward body is
pushed on a *tape* (a Python list created before the loop) at the end of every
iteration, and popped at the top of every backward iteration, which runs the
iterations in reverse (`range(...)[::-1]`, or as many times as the tape is long
for a `while`). Cotangents of carried values are the backward loop's carried
values; those of outer values read in the body are accumulated in carried sums.
Generated code grows with the body, never with the trip count. `sg.vjp`'s backward
pops copies of its tapes (`reusable_tapes`), so `vjp_fn` can run more than once.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import Block, Const, Op, Pack, Var, substitute


def reverse_region(op, cts, tracer, namer, active, pending, reverse_block):
    """Emit the backward of control-flow `op`; [(outer operand, cotangent)].

    `cts` are the cotangents of op.outs (None: zero). `pending` collects
    (forward op, new op) pairs to insert before the forward op (tapes).
    `reverse_block(ops, wrt, seeds, namer)` is reverse mode of a nested block
    (srcgrad.passes.vjp.reverse, passed in: the two recurse into each other).
    """
    if op.prim == "cond":
        return _reverse_cond(op, cts, tracer, namer, active, reverse_block)
    return _reverse_loop(op, cts, tracer, namer, active, pending, reverse_block)


def _zeros_like(v, tracer):
    return tracer.apply(rules.RULES["zeros_like"], [v], {})


def _defined(block) -> set:
    return set(block.params) | {o for op in block.ops for o in op.outs}


# ---------------------------------------------------------------------- cond
def _reverse_cond(op, cts, tracer, namer, active, reverse_block):
    pred = op.args[0]
    free = [v for v in dict.fromkeys(op.operand_vars()) if v in active and v.kind == "array"
            and v is not pred]
    if not free:
        return []
    outs = [Var(namer.fresh("grad_" + v.name.lstrip("_"))) for v in free]
    blocks = []
    for block in op.blocks:
        seeds = [(r, ct) for r, ct in zip(block.results, cts) if ct is not None and isinstance(r, Var)]
        b_ops, grads = reverse_block(block.ops, free, seeds, namer)
        inner = type(tracer)(namer, b_ops)
        results = [grads[v] if grads[v] is not None else _zeros_like(v, inner) for v in free]
        _export(op, block, b_ops, results, namer)
        blocks.append(Block(b_ops, results))
    tracer.ops.append(Op("cond", (pred,), tuple(outs), op.loc, {"backward": True}, tuple(blocks)))
    return list(zip(free, outs))


def _export(op, block, b_ops, b_results, namer):
    """Make the forward values of `block` that its backward reads outputs of `op`."""
    defined = _defined(block)
    needed = [v for v in dict.fromkeys(Block(b_ops, b_results).free_vars()) if v in defined]
    if not needed:
        return
    mapping = {}
    exports = op.attrs.setdefault("exports", {})  # out -> the block that defines it
    for v in needed:
        out = Var(namer.fresh(v.name.lstrip("_") + "_saved"), v.kind)
        for other in op.blocks:
            other.results.append(v if other is block else Const(None))
        op.outs = op.outs + (out,)
        exports[out] = op.blocks.index(block)
        mapping[v] = out
    substitute(b_ops, mapping)
    b_results[:] = [mapping.get(r, r) if isinstance(r, Var) else r for r in b_results]


def _shapes_instead(needed, body, b_ops, namer):
    """Tape a shape, not an array, when the backward reads nothing else of it."""
    out = []
    for v in needed:
        readers = [op for op in b_ops if v in set(op.operand_vars())]
        if readers and all(op.prim == "shape" for op in readers):
            shape = Var(namer.fresh(f"_shape_{v.name.lstrip('_')}"), "static")
            body.ops.append(Op("shape", (v,), (shape,), readers[0].loc))
            substitute(b_ops, {op.outs[0]: shape for op in readers})
            for op in readers:
                b_ops.remove(op)
            out.append(shape)
        else:
            out.append(v)
    return out


def hoist_invariants(b_ops, varying):
    """Take out of the backward loop the ops that read nothing the loop changes
    (an op that writes in place stays: Note [Sums in adjoint loops])."""
    varying = set(varying)
    hoisted = []
    for op in list(b_ops):
        if op.blocks or rules.RULES[op.prim].effect or not op.outs or any(
                v in varying for v in op.operand_vars()):
            varying.update(op.outs)
            continue
        b_ops.remove(op)
        hoisted.append(op)
    return hoisted


def _simplify_with_forward(body, b_ops, grads, alike):
    """Simplify the backward body knowing the forward body's facts (shape classes:
    `xp.shape(t)` of a forward temporary becomes that of a carried value), before
    deciding what goes on the tape, so nothing is taped only for its shape."""
    from srcgrad.passes.dce import dce
    from srcgrad.passes.simplify import simplify

    forward = {id(op) for op in body.ops}
    keep = [g for g in grads.values() if isinstance(g, Var)]
    combined, alias = simplify(body.ops + b_ops, keep, alike=alike)
    split = next((i for i, op in enumerate(combined) if id(op) not in forward), len(combined))

    def follow(v):
        while isinstance(v, Var) and v in alias:
            v = alias[v]
        return v

    body.ops = combined[:split]
    body.results = [follow(r) for r in body.results]
    grads = {k: follow(v) for k, v in grads.items()}
    return dce(combined[split:], list(grads.values())), grads


# ---------------------------------------------------------------------- loops
def _reverse_loop(op, cts, tracer, namer, active, pending, reverse_block):
    body = op.blocks[0]
    is_while = op.prim == "while_loop"
    inits = list(op.args[-1].items)
    params = body.params[1:] if not is_while else body.params[1:]
    index = body.params[0] if not is_while else None
    results = body.results[1:] if is_while else body.results
    carried = [(p, r, init, out, ct) for p, r, init, out, ct
               in zip(params, results, inits, op.outs, cts) if p.kind == "array"]
    defined = _defined(body)
    free = [v for v in dict.fromkeys(body.free_vars()) if v in active and v.kind == "array"]
    if not carried and not free:
        return []
    # The body's backward, given the cotangents of its results at the end of an iteration.
    g_params = [Var(namer.fresh("grad_" + p.name.lstrip("_"))) for p, *_ in carried]
    seeds = [(r, g) for (p, r, *_), g in zip(carried, g_params) if isinstance(r, Var)]
    wrt = [p for p, *_ in carried] + free
    b_ops, grads = reverse_block(body.ops, wrt, seeds, namer)
    alike = {g: r for (_, r, *_), g in zip(carried, g_params) if isinstance(r, Var)}
    b_ops, grads = _simplify_with_forward(body, b_ops, grads, alike)
    inner = type(tracer)(namer, b_ops)
    defined = _defined(body)  # again: nested control flow may have exported values
    # What the backward body reads of the forward body travels on a tape.
    b_results_probe = [grads[p] for p, *_ in carried] + [grads[v] for v in free]
    needed = [v for v in dict.fromkeys(Block(b_ops, [r for r in b_results_probe if r is not None])
                                       .free_vars()) if v in defined and v is not index]
    needed = _shapes_instead(needed, body, b_ops, namer)
    # _shapes_instead defined new values in the body: an op reading one is not invariant
    hoisted = hoist_invariants(b_ops, _defined(body) | {index} | set(g_params))
    tracer.ops.extend(hoisted)
    until = op.attrs.get("until")  # a loop that breaks: its tape counts its iterations too
    taped = needed or is_while or until is not None
    if taped:
        tape = Var(namer.fresh("_tape"), "static")
        pending.append((op, Op("tape_new", (), (tape,), op.loc)))
        body.ops.append(Op("tape_push", (tape, Pack(tuple(needed))), (), op.loc, {"effect": True}))
    popped = [Var(namer.fresh(v.name.lstrip("_") + "_t"), v.kind) for v in needed]
    b_index = Var(namer.fresh(index.name if index is not None else "_i"), "static")
    mapping = dict(zip(needed, popped))
    if index is not None:
        mapping[index] = b_index
    substitute(b_ops, mapping)
    pops = [Op("tape_pop", (tape,), tuple(popped), op.loc, {"backward": True})] if taped else []
    # Backward iteration: carried cotangents, and sums for the outer values read.
    acc = [Var(namer.fresh("grad_" + v.name.lstrip("_") + "_sum")) for v in free]
    new_g = []
    for (p, *_), g in zip(carried, g_params):
        r = grads[p]
        new_g.append(mapping.get(r, r) if r is not None else _zeros_like(g, inner))
    sums = []
    for v, a in zip(free, acc):
        contribution = mapping.get(grads[v], grads[v])
        sums.append(a if contribution is None else inner.apply(rules.RULES["add"], [a, contribution], {}))
    for new in inner.ops:
        new.attrs["backward"] = True
    block = Block(pops + inner.ops, new_g + sums, [b_index] + g_params + acc)
    start = [ct if ct is not None else _zeros_like(out, tracer) for *_, out, ct in carried]
    start += [_zeros_like(v, tracer) for v in free]
    outs = tuple(Var(namer.fresh("grad_" + p.name.lstrip("_"))) for p, *_ in carried) + tuple(
        Var(namer.fresh("grad_" + v.name.lstrip("_"))) for v in free)
    if is_while:
        n = tracer.apply(rules.RULES["tape_len"], [tape], {})
        bounds = (Const(0), n, Const(1))
    elif until is not None:
        bounds = _ran_bounds(op.args[:3], tracer.apply(rules.RULES["tape_len"], [tape], {}), tracer)
    else:
        bounds = op.args[:3]
    tracer.ops.append(Op("for_range", (*bounds, Pack(tuple(start))), outs, op.loc,
                         {"backward": True, "reverse": True}, (block,)))
    pairs = [(init, out) for (_, _, init, _, _), out in zip(carried, outs) if isinstance(init, Var)]
    return pairs + list(zip(free, outs[len(carried):]))


def _ran_bounds(bounds, n, tracer):
    """`range(start, stop, step)`'s first `n` indices as a range's bounds: a loop that
    left by `break` ran `n` iterations (`start + n * step` stops it exactly, either sign)."""
    start, _, step = bounds
    count = n if isinstance(step, Const) and step.value == 1 else tracer.apply(
        rules.RULES["multiply"], [n, step], {})
    stop = count if isinstance(start, Const) and start.value == 0 else tracer.apply(
        rules.RULES["add"], [start, count], {})
    return start, stop, step


def reusable_tapes(ops: list, namer) -> list:
    """`ops` with each adjoint loop popping a copy of its tape (`list(tape)`), never the
    tape itself: `sg.vjp`'s backward may run again (`vjp_fn` called twice, a Jacobian
    row by row) on the same saved tapes. A tape nested in another's entries is copied
    where its own adjoint loop starts."""
    out = []
    for op in ops:
        for block in op.blocks:
            block.ops = reusable_tapes(block.ops, namer)
        if op.attrs.get("reverse") and op.blocks:
            for pop in (o for o in op.blocks[0].ops if o.prim == "tape_pop"):
                tape = pop.args[0]
                copy = Var(namer.fresh(tape.name), "static")
                out.append(Op("tape_copy", (tape,), (copy,), op.loc, {"backward": True}))
                pop.args = (copy,)
        out.append(op)
    return out
