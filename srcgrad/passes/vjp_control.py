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


# ---------------------------------------------------------------------- tapes, reversed again
class TapeCotangents:
    """Note [Reverse mode over adjoint loops]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    Reverse mode over a program that holds a loop's gradient (`sg.grad(sg.grad(f))`,
    a reverse-mode Jacobian of a gradient: Note [Transforms of loop gradients] in
    srcgrad.pipeline.graphs): its forward loop L1 pushes `(v1, v2)` on a tape T
    every iteration, its adjoint loop L2 pops them in reverse order. The value popped
    at an iteration *is* the value pushed at the same iteration, so the cotangent of a
    popped value belongs to the pushed one; no operand shows that link (activity
    analysis treats every tape as varied and useful: srcgrad.passes.activity).

    So the cotangents travel on a tape too, the other way. Reversing L2 gives a loop
    L2' over the same indices in forward order (the reverse of a reversed range), whose
    body, the reverse of L2's body, ends with the reverse of L2's `pop(T)`: a push of
    the popped values' cotangents (zeros where none) on a cotangent tape CT. Reversing
    L1 gives the usual reversed loop L1', whose body starts with the reverse of L1's
    `push(T, ...)`: `pop(CT)`, whose entries are the cotangents of the pushed values.
    L2' runs before L1' (L2 ran after L1) and pushes iteration 0 first; L1' pops
    iteration n-1 first: last in, first out, as for T. CT is created empty at the
    start of the whole backward (`creations`); L1' pops only where L2' pushes (a
    push is reversed only when its tape's pop was).

    Nested loops: the inner forward loop's tape T_in is made in the outer forward body
    and pushed on the outer tape To; the outer adjoint body pops it as another Var,
    T_in', which the inner adjoint loop pops. The reverse of the outer adjoint body
    reaches the inner adjoint loop first (giving T_in' a cotangent tape), then the pop
    of To, which notes that item k of To's entries was T_in'; the reverse of the
    outer forward body reaches its push of To first, whose item k is T_in: T_in's
    cotangent tape is T_in''s, before the inner forward loop is reversed. One
    cotangent tape serves every outer iteration: the inner pushes of outer iteration
    i come after those of i - 1 and are popped before them. A tape pushed in turn
    holds tapes (three levels of loops, or an `if` between two): the pushed tape takes
    over the popped one's links too (`_same_tape`), so each level finds its cotangent
    tape.

    In an `if`: a branch's tape leaves the `cond` as an export (Note [Reverse mode of
    control flow]), popped in the backward `cond` on the same predicate; so CT is
    pushed (reversing the backward `cond`) and popped (reversing the forward one) on
    the same path, the one taken. The export is its branch's tape (`alias_exports`,
    through nested `if`s at once, so `pushes_in` sees a push two `if`s down). A `cond`
    whose branches only pop tapes is reversed even when no array it reads has a
    cotangent (`return a0 * 1.0`: the gradient depends on a0 only through what the
    tape holds); and activity counts an op with a push anywhere in its blocks as
    useful (srcgrad.passes.activity). Each of these gave a wrong second derivative
    before (0.0 where it is 0.535: fuzz seed 62219; three nested loops, an `if` in an
    `if`, nested loops in an `if` in a loop).
    """

    def __init__(self):
        self.cotangent: dict = {}  # tape -> its cotangent tape
        self.creations: list = []  # the cotangent tapes' tape_new ops
        self.popped_tapes: dict = {}  # (tape, k) -> the tape popped as item k of its entries

    def alias_exports(self, op) -> None:
        """A tape a `cond` exports (Note [Reverse mode of control flow]) is its branch's
        own tape: it shares the exported one's cotangent tape, and the tapes its
        entries were popped as. A branch's tape may itself be a nested `cond`'s export
        (an `if` in an `if`): the nested ones are aliased now too, so that `pushes_in`
        sees the push inside (the outer `cond` holds no push on a tape of its own)."""
        for out, index in op.attrs.get("exports", {}).items():
            if out in self.cotangent:
                self._same_tape(op.blocks[index].results[op.outs.index(out)], out)
        if op.prim == "cond":
            for block in op.blocks:
                for inner in block.ops:
                    if inner.prim == "cond":
                        self.alias_exports(inner)

    def _same_tape(self, tape, other) -> None:
        """`tape` is `other` (a branch's tape and its export; a pushed tape and the one
        its adjoint popped): the same cotangent tape, and the same tapes popped from
        its entries, so that a tape nested two levels deep (a loop in a loop in a loop,
        or in an `if` in a loop) finds its cotangent tape too."""
        self.cotangent.setdefault(tape, self.cotangent[other])
        for (t, k), popped in list(self.popped_tapes.items()):
            if t is other:
                self.popped_tapes.setdefault((tape, k), popped)

    def pushes_in(self, op) -> bool:
        """Whether a block of `op` pushes on a tape whose pops were reversed."""
        return any(o.prim == "tape_push" and o.args[0] in self.cotangent or self.pushes_in(o)
                   for b in op.blocks for o in b.ops)

    def reverse_pop(self, op, cts, tracer, namer) -> None:
        """`values = pop(T)` reversed: push the values' cotangents on T's cotangent tape."""
        tape = self.cotangent.get(op.args[0])
        if tape is None:
            tape = self.cotangent[op.args[0]] = Var(namer.fresh("_ct_tape"), "static")
            self.creations.append(Op("tape_new", (), (tape,), op.loc))
        for k, o in enumerate(op.outs):
            if o in self.cotangent:  # a nested loop's tape (its own pops were reversed first)
                self.popped_tapes[op.args[0], k] = o
        items = [Const(None) if o.kind != "array" else ct if ct is not None else _zeros_like(o, tracer)
                 for o, ct in zip(op.outs, cts)]
        tracer.ops.append(Op("tape_push", (tape, Pack(tuple(items))), (), op.loc, {"effect": True}))

    def reverse_push(self, op, tracer, namer) -> list:
        """`push(T, values)` reversed: pop the values' cotangents; [(value, cotangent)]."""
        tape = self.cotangent.get(op.args[0])
        if tape is None:
            return []
        items = op.args[1].items
        for k, v in enumerate(items):
            popped = self.popped_tapes.get((op.args[0], k))
            if popped is not None:  # the pushed tape is the one its adjoint popped
                self._same_tape(v, popped)
        outs = tuple(Var(namer.fresh("grad_" + v.name.lstrip("_") + "_t"), v.kind) if isinstance(v, Var)
                     else Var(namer.fresh("_unused"), "static") for v in items)
        tracer.ops.append(Op("tape_pop", (tape,), outs, op.loc))
        return [(v, o) for v, o in zip(items, outs) if isinstance(v, Var) and v.kind == "array"]


# ---------------------------------------------------------------------- cond
def _reverse_cond(op, cts, tracer, namer, active, reverse_block):
    pred = op.args[0]
    free = [v for v in dict.fromkeys(op.operand_vars()) if v in active and v.kind == "array"
            and v is not pred]
    if not free and not any(_pops(b.ops) for b in op.blocks):
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
    if not free and not any(b.ops for b in blocks):
        return []
    tracer.ops.append(Op("cond", (pred,), tuple(outs), op.loc, {"backward": True}, tuple(blocks)))
    return list(zip(free, outs))


def _pops(ops) -> bool:
    """Whether `ops` pop a tape: a gradient's adjoint code, whose reverse pushes the
    popped values' cotangents (Note [Reverse mode over adjoint loops]) even where no
    array it reads has a cotangent (`grad_f(a) = 1.0 * (what the tape holds)`)."""
    return any(o.prim == "tape_pop" or any(_pops(b.ops) for b in o.blocks) for o in ops)


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
    # an adjoint loop's own reverse runs forward (Note [Reverse mode over adjoint loops])
    tracer.ops.append(Op("for_range", (*bounds, Pack(tuple(start))), outs, op.loc,
                         {"backward": True, "reverse": not op.attrs.get("reverse")}, (block,)))
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
    where its own adjoint loop starts. A cotangent tape (Note [Reverse mode over adjoint
    loops]) is the backward's own, pushed and popped there: each run starts its own
    copy of it, once (a nested loop's pops span the outer loop's iterations)."""
    own: dict = {}  # cotangent tape -> the backward's copy
    for op in ops:
        if op.prim == "tape_new" and op.attrs.get("backward"):
            own[op.outs[0]] = Var(namer.fresh(op.outs[0].name), "static")
    substitute(ops, own)
    out = []
    for op in _copied_pops(ops, namer, set(own.values())):
        out.append(op)
        if op.prim == "tape_new" and op.outs[0] in own:  # (the saved empty list, copied)
            out.append(Op("tape_copy", op.outs, (own[op.outs[0]],), op.loc, {"backward": True}))
    return out


def _copied_pops(ops: list, namer, own: set) -> list:
    out = []
    for op in ops:
        for block in op.blocks:
            block.ops = _copied_pops(block.ops, namer, own)
        if op.prim == "for_range" and op.attrs.get("backward") and op.blocks:  # (reversed or not)
            for pop in (o for o in op.blocks[0].ops if o.prim == "tape_pop" and o.args[0] not in own):
                tape = pop.args[0]
                copy = Var(namer.fresh(tape.name), "static")
                out.append(Op("tape_copy", (tape,), (copy,), op.loc, {"backward": True}))
                pop.args = (copy,)
        out.append(op)
    return out
