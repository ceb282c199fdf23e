"""Batched forms of `for`, `while` and `if` (Note [Batching control flow]), for `sg.vmap`.

Note [Batching control flow]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The batching pass (Note [Batching] in srcgrad.passes.batch) refuses control flow: a
Jacobian falls back to one pass per seed. `sg.vmap` has no fallback it may take
silently, so the loops and branches whose batched form is plain are batched here, as
JAX batches `fori_loop`, `while_loop` and `cond`:

* a `for` over a range whose bounds read no mapped value, and a `while` whose test
  reads none, run the same trip count for every example: the loop stays one loop, and
  each carried value that a mapped value reaches (on entry or on any iteration, found
  by iterating to a fixed point) carries the batch axis (its entry value broadcast
  along the batch where it is unbatched), its body batched op by op;
* an `if` whose test reads no mapped value stays an `if` with both branches batched
  (an unbatched branch value broadcast where the other branch's is batched);
* an `if` whose test is mapped runs both branches (they hold no effects and no control
  flow) and selects per example with `where`, as JAX's `select` does;
* a `while` whose test reads a mapped value (a trip count per example) runs while any
  example's test holds, with a mask: an example whose test failed keeps its values
  (`where(mask, new, old)`) and its test stays false, as JAX batches `while_loop`;
* a `for` whose `break` flag reads a mapped value (a `break` or a `return` in its body
  on a mapped test) runs until every example has stopped, the same way: an example that
  stopped keeps its values (`where(stopped, old, new)`). A `return`'s value enters the
  loop as None; batched, it enters as `False` of the value's shape (bool promotes to the
  value's dtype unchanged, where a broadcast None made an object array).

Note [The branch an example does not take]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
An example's untaken branch runs too, so its values may be inf where Python would never
compute them (`np.exp(x * 1000.0)` for the example whose `x` chose the other branch).
`where` gives that branch a cotangent of exactly 0 there, but 0 * inf is nan one op on
(exp's derivative), and the nan would flow out of the branch into the example's gradient
(fuzz seed 2763568: sg.grad of sg.vmap was nan where the true gradient is finite). So a
branch reads each array from outside it through `taken_input(x, taken)`: x itself, whose
cotangent is *selected* to the examples that take the branch (`where(taken, g, 0)`), so
whatever the branch computes for the others stops at its inputs. An unbatched input
(a parameter under in_axes=None) is broadcast along the batch first, so its cotangent
is summed over the examples only after the selection; where the branch reads it as an
index, a shape or a test (no batched form for a mapped one), it is left unbatched and
unmasked (README: the one case still open). Forward mode needs nothing: `where` selects the tangents.

Refused (Unbatchable, at the op's line): a carried value whose shape changes across
iterations, an `if` on a mapped test with effects or loops in a branch, and a `while`
on a mapped test, or a `for` with a mapped `break`, whose body has effects (a
gradient's tape: each example would need its own trip count in the adjoint loop).
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import Block, Const, Op, Pack, Var, operand_vars
from srcgrad.passes.batch import _Batcher
from srcgrad.passes.batch_base import Unbatchable

CONTROL = ("for_range", "while_loop", "cond")


def batch_ops(b: _Batcher, ops: list) -> None:
    """Every op of `ops` batched into `b.out`; control flow by the forms above. An
    Unbatchable carries the op's `loc` (its attribute `op`) for the caller's error."""
    for op in ops:
        try:
            if op.prim in ("tape_push", "tape_pop"):
                _tape(b, op)
            elif op.prim in CONTROL and _reached(b, op):
                op.args = tuple(b._map(a) for a in op.args)  # noqa: SLF001
                (_cond if op.prim == "cond" else _loop)(b, op)
            else:
                b.op(op)
        except Unbatchable as err:
            if getattr(err, "op", None) is None:
                err.op = op
            raise


def _tapes(b) -> dict:
    if not hasattr(b, "tapes"):
        b.tapes = {}  # tape Var -> which of the values pushed onto it are batched
    return b.tapes


def _tape(b, op):
    """A loop's tape (Note [Batching control flow]): a batched value is pushed as it is,
    and popped batched; one tape holds one pattern of batched values."""
    op.args = tuple(b._map(a) for a in op.args)  # noqa: SLF001
    tapes = _tapes(b)
    tape = op.args[0]
    if op.prim == "tape_push":
        items = op.args[1].items if isinstance(op.args[1], Pack) else (op.args[1],)
        pattern = tuple(b.is_b(v) for v in items)
        if tapes.setdefault(tape, pattern) != pattern:
            raise Unbatchable("a loop tape pushed with values batched in one place only")
    elif any(tapes.get(tape, ())):
        b.batched.update(o for o, is_b in zip(op.outs, tapes[tape]) if is_b)
    b.out.append(op)


def _reached(b, op) -> bool:
    """Whether a mapped value reaches `op`: an operand, a value its blocks read, or a
    batched value its blocks pop from a tape (a loop's adjoint)."""
    tapes = _tapes(b)
    return any(b.is_b(a) for a in op.args) or any(
        b._map(v) in b.batched for blk in op.blocks for v in blk.free_vars()) or any(  # noqa: SLF001
        inner.prim == "tape_pop" and any(tapes.get(inner.args[0], ()))
        for blk in op.blocks for inner in _all_ops(blk.ops))


def _depends(ops, batched: set, tapes: dict) -> set:
    """The Vars of `ops` a value in `batched` reaches (an over-approximation of what the
    batched program batches: broadcasting a carried value it would not is only slower),
    popping a batched value from a tape included."""
    reached = set(batched)
    for op in ops:
        if any(v in reached for v in op.operand_vars()) or (
                op.prim == "tape_pop" and any(tapes.get(op.args[0], ()))):
            reached.update(op.outs)
        if op.prim == "tape_push" and any(v in reached for v in op.operand_vars()):
            tapes.setdefault(op.args[0], (True,))  # (popped batched on a later iteration)
    return reached


def _sub(b) -> _Batcher:
    sub = _Batcher(b.size, b.shapes, b.namer)
    sub.ints = b.ints
    sub.batched = set(b.batched)
    sub.rename = b.rename  # SSA names: one map for the program and its blocks
    sub.tapes = _tapes(b)
    return sub


def _loop(b, op):
    (block,) = op.blocks
    if op.prim == "for_range":
        start, stop, step, inits = op.args
        if any(b.is_b(a) for a in (start, stop, step)):
            raise Unbatchable("a `for` whose range reads a mapped value")
        params, entries, offset = block.params[1:], list(inits.items), 0
    else:
        test, inits = op.args
        params, entries, offset = block.params, [test] + list(inits.items), 1
    results = [b._map(r) for r in block.results]  # noqa: SLF001
    carried = {k for k, e in enumerate(entries) if b.is_b(e)}
    while True:  # a fixed point: what a mapped value reaches on some iteration
        reached = _depends(block.ops, b.batched | {params[k] for k in carried}, dict(_tapes(b)))
        more = {k for k, r in enumerate(results) if any(v in reached for v in operand_vars(r))}
        if more <= carried:
            break
        carried |= more
    if offset and 0 in carried:
        return _masked_while(b, op, block, entries, params, results)
    if any(_is_none(e) for e in entries) and any(_entry_shape(b, block.ops, r) is None for r in results):
        raise Unbatchable(_LOST)  # (no fact of the body at all: the probe's iteration changed one)
    until = op.attrs.get("until")  # a `break`'s flag, or a `return`'s (Note [Tracing control flow])
    if until in params and params.index(until) in carried:
        return _masked_for(b, op, block, entries, params, results, params.index(until))
    for k in carried:
        if _is_none(entries[k]):  # a `return`'s value: _entry gives it the value's shape
            continue
        shapes = {b.shape(entries[k]), b.shape(results[k]), b.shape(params[k])}
        if len(shapes) != 1:
            raise Unbatchable(f"a loop-carried value (`{params[k]}`) whose shape changes "
                              "across iterations")
    new_entries = [_entry(b, e, _entry_shape(b, block.ops, results[k])) if k in carried else e
                   for k, e in enumerate(entries)]
    sub = _sub(b)
    sub.batched.update(params[k] for k in carried)
    batch_ops(sub, block.ops)
    new_results = [sub._map(r) for r in results]  # noqa: SLF001
    new_results = [_full(sub, r) if k in carried else r for k, r in enumerate(new_results)]
    for k, r in enumerate(new_results):
        if k not in carried and sub.is_b(r):
            raise Unbatchable("a loop-carried value batched on a later iteration only")
    body = Block(sub.out, new_results, list(block.params))
    if op.prim == "for_range":
        args = (start, stop, step, Pack(tuple(new_entries), inits.style))
    else:
        args = (new_entries[0], Pack(tuple(new_entries[1:]), inits.style))
    b.out.append(Op(op.prim, args, op.outs, op.loc, dict(op.attrs), (body,)))
    b.batched.update(o for k, o in enumerate(op.outs) if k + offset in carried)


def _masked_while(b, op, block, entries, params, results):
    """A `while` whose test reads a mapped value: it runs while any example's test holds,
    and an example whose test failed keeps its values (`where(mask, new, old)`), as JAX
    batches `while_loop`. Every carried value is batched (a counter stops per example)."""
    _refuse_effects(block, "a `while` whose test reads a mapped value")
    # a `return`'s value enters None: _entry's False of the value's shape, as _masked_for's
    # (a broadcast None was an object array, and the vmap's result with it: seed 3704070)
    shapes = _carried_shapes(b, block, entries, results)
    if any(b.shape(e) != sh for e, sh in zip(entries, shapes) if not _is_none(e)):
        raise Unbatchable("a loop-carried value whose shape changes across iterations")
    mask0 = _full(b, entries[0])
    flag0 = _any(b, mask0, op.loc)
    mask, mask_out = Var(b.namer.fresh("_mask")), Var(b.namer.fresh("_mask"))
    b.shapes[mask] = b.shapes[mask_out] = ()
    new_entries = [flag0, mask0] + [_entry(b, e, sh) for e, sh in zip(entries[1:], shapes[1:])]
    sub = _sub(b)
    sub.batched.update([mask, *params[1:]])
    batch_ops(sub, block.ops)
    new = [sub._map(r) for r in results]  # noqa: SLF001
    still = sub.call("logical_and", mask, _full(sub, new[0]), shape=())
    kept = []
    for p, r, shape in zip(params[1:], new[1:], shapes[1:]):
        chosen = sub.pad(mask, len(shape)) if shape else mask
        kept.append(sub.call("where", chosen, _full(sub, r), p, shape=shape))
    body = Block(sub.out, [_any(sub, still, op.loc), still] + kept, [params[0], mask] + list(params[1:]))
    inits = Pack(tuple(new_entries[1:]), op.args[1].style)
    b.out.append(Op("while_loop", (flag0, inits), (mask_out,) + tuple(op.outs), op.loc,
                    dict(op.attrs), (body,)))
    b.batched.update((mask_out,) + tuple(op.outs))


def _masked_for(b, op, block, entries, params, results, until: int):
    """A `for` whose `break` flag (`params[until]`: a `break` or a `return` in its body)
    reads a mapped value: it runs until every example has stopped, and an example that
    stopped keeps its values (`where(stopped, old, new)`), as a masked `while` does. Its
    own flag (every example stopped: `all`) is the one the loop breaks on."""
    _refuse_effects(block, "a `for` with a `break` or `return` that reads a mapped value")
    shapes = _carried_shapes(b, block, entries, results)
    for e, p, shape in zip(entries, params, shapes):
        if not _is_none(e) and (b.shape(e) != shape or b.shape(p) != shape):
            raise Unbatchable(f"a loop-carried value (`{p}`) whose shape changes across iterations")
    new_entries = [_entry(b, e, shape) for e, shape in zip(entries, shapes)]
    done0 = _reduce(b, "all", new_entries[until], op.loc)
    done, done_out = Var(b.namer.fresh("_stopped")), Var(b.namer.fresh("_stopped"))
    b.shapes[done] = b.shapes[done_out] = ()
    sub = _sub(b)
    sub.batched.update(params)
    batch_ops(sub, block.ops)
    new = [sub._map(r) for r in results]  # noqa: SLF001
    stopped = params[until]
    kept = [sub.call("where", sub.pad(stopped, len(shape)) if shape else stopped, p, _full(sub, r),
                     shape=shape) for p, r, shape in zip(params, new, shapes)]
    body = Block(sub.out, kept + [_reduce(sub, "all", kept[until], op.loc)],
                 list(block.params) + [done])
    start, stop, step, inits = op.args
    args = (start, stop, step, Pack(tuple(new_entries) + (done0,), inits.style))
    attrs = dict(op.attrs, until=done)
    b.out.append(Op("for_range", args, tuple(op.outs) + (done_out,), op.loc, attrs, (body,)))
    b.batched.update(op.outs)


def _value_shape(b, ops, r) -> tuple:
    """b.shape(r); for a value an `if` in `ops` gives whose shape is no fact (a
    `return`'s value: None, or the loop's value so far, where it did not return), the
    shape of the branch values that have one, where they agree."""
    if isinstance(r, Var) and r not in b.shapes:
        for op in ops:
            if op.prim == "cond" and r in op.outs:
                k, found = op.outs.index(r), set()
                for blk in op.blocks:
                    try:
                        found.add(_value_shape(b, blk.ops, blk.results[k]))
                    except Unbatchable:
                        pass  # (None, or a carried value: the other branch decides)
                if len(found) == 1:
                    return found.pop()
    return b.shape(r)


_LOST = ("a `return` inside a `for` whose value's shape is no fact of the arguments' shapes "
         "(the compiler's one probed iteration changed it from None); return a value "
         "computed after the loop")


def _entry_shape(b, ops, r):
    """The shape of a `return`'s value (`r`, a carried value entering as None); None
    where it is no fact (then _entry refuses)."""
    try:
        return _value_shape(b, ops, r)
    except Unbatchable:
        return None


def _carried_shapes(b, block, entries, results) -> list:
    """Each carried value's shape: its result's, or for a `return`'s value entering None
    the shape the body gives it (_entry_shape; None where that is no fact)."""
    return [_entry_shape(b, block.ops, r) if _is_none(e) else b.shape(r)
            for e, r in zip(entries, results)]


def _refuse_effects(block, what: str):
    for inner in _all_ops(block.ops):
        rule = rules.RULES[inner.prim]
        if rule.effect or rule.io:
            raise Unbatchable(f"{what}, with `{inner.prim}` in its body (a trip count per example)")


def _entry(b, e, shape):
    """A carried value's entry, batched. None (a `return`'s value before it returns,
    read only where the example returned) enters as `False` of the value's shape: bool
    promotes to any dtype unchanged, so the `where`s that merge it keep the value's
    (a broadcast None was an object array, and so was the vmap's result)."""
    if not _is_none(e):
        return _full(b, e)
    if shape is None:
        raise Unbatchable(_LOST)
    out = Var(b.namer.fresh("_batched"))
    b.out.append(Op("broadcast_to", (Const(False), Const((b.size,) + tuple(shape))), (out,),
                    getattr(b, "loc", None)))
    b.batched.add(out)
    b.shapes[out] = tuple(shape)
    return out


def _any(b, mask, loc):
    """Whether any example's test holds: an unbatched flag (not b.call: that batches)."""
    return _reduce(b, "any", mask, loc)


def _reduce(b, prim, mask, loc):
    flag = Var(b.namer.fresh(f"_{prim}"))
    b.out.append(Op(prim, (mask, Const(None), Const(False)), (flag,), loc))
    b.shapes[flag] = ()
    return flag


def _cond(b, op):
    (pred,) = op.args
    then, other = op.blocks
    if b.is_b(pred):
        return _select(b, op, pred, then, other)
    blocks = []
    for block in (then, other):
        sub = _sub(b)
        batch_ops(sub, block.ops)
        blocks.append((sub, [sub._map(r) for r in block.results]))  # noqa: SLF001
    batched = [any(s.is_b(rs[k]) for s, rs in blocks) for k in range(len(op.outs))]
    # a `return`'s value one branch leaves None (`while` on an unmapped test: the loop
    # that may return is not entered) enters as _entry's False of the other's shape: a
    # broadcast None was an object array, and the vmap's result with it (fuzz seed 3704070)
    shapes = [next((b.shape(rs[k]) for _, rs in blocks if not _is_none(rs[k])), None)
              for k in range(len(op.outs))]
    new_blocks = []
    for sub, rs in blocks:
        rs = [(_entry(sub, r, shapes[k]) if _is_none(r) else _full(sub, r)) if batched[k] else r
              for k, r in enumerate(rs)]
        new_blocks.append(Block(sub.out, rs, []))
    for k, o in enumerate(op.outs):
        if batched[k]:
            if not any(_is_none(rs[k]) for _, rs in blocks):
                _same_shape(b, blocks[0][1][k], blocks[1][1][k])
            b.shapes[o] = shapes[k]
    b.out.append(Op("cond", (pred,), op.outs, op.loc, dict(op.attrs), tuple(new_blocks)))
    b.batched.update(o for k, o in enumerate(op.outs) if batched[k])


def _same_shape(b, x, y):
    if b.shape(x) != b.shape(y):
        raise Unbatchable("an `if` whose branches give values of different shapes")


def _select(b, op, pred, then, other):
    """Both branches, then `where(pred, then, else)` per example. A branch may hold
    `if`s of its own (each batched as this one, or kept where its test is not mapped):
    pure too; so may `for` loops over a range (they end, whatever an example's values,
    and run batched as any loop). A `while` (its test on an example that does not take
    the branch may never turn false), effects and I/O are refused (they would run for
    every example)."""
    for block in (then, other):
        for inner in _all_ops(block.ops):
            rule = rules.RULES[inner.prim]
            if inner.prim in ("cond", "for_range") or inner.prim in _TAPES:
                continue
            if inner.blocks or rule.control or rule.effect or rule.io:
                raise Unbatchable(f"an `if` on a mapped test whose branch holds `{inner.prim}` "
                                  "(both branches run, then one value is chosen per example)")
    values = []
    for block, negated in ((then, False), (other, True)):
        taken = b.call("logical_not", pred, shape=b.shape(pred)) if negated else pred
        before = _take_inputs(b, block, taken)
        batch_ops(b, block.ops)
        values.append([b._map(r) for r in block.results])  # noqa: SLF001
        for v, old in before.items():  # (the other branch and what follows read v itself)
            if old is None:
                del b.rename[v]
            else:
                b.rename[v] = old
    for o, x, y in zip(op.outs, *values):
        if _is_none(x) != _is_none(y):
            # a value one branch leaves None: a gradient's saved value of the branch not
            # taken (`multiply_saved = None`), read only under the same test, where the
            # other branch is chosen per example: the merged value is the other's (`None`
            # tests were decided before batching: decide_none_tests). sg.vmap(sg.grad(f))
            # of an `if` on data crashed on `1.0 * None` (fuzz seed 2700169, issue 28)
            b.rename[o] = y if _is_none(x) else x
            continue
        _same_shape(b, x, y)
        shape = b.shape(x)
        p = b.pad(pred, len(shape)) if len(shape) > b.rank(pred) else pred
        out = b.call("where", p, _full(b, x), _full(b, y), shape=shape)
        b.rename[o] = out


# A loop's tape in a branch: every example runs the branch's loop and its adjoint (both
# branches run, in the forward and in the backward program alike), so what one pushes
# the other pops, example by example.
_TAPES = ("tape_new", "tape_push", "tape_pop")


def _take_inputs(b, block, taken) -> dict:
    """Note [The branch an example does not take]: each array the branch reads from outside
    it, read through `taken_input(x, taken)` (an unbatched one broadcast first, where it
    is read only as a differentiable operand: broadcast, it is read the same way). Returns
    the renames it replaced, for the caller to restore."""
    replaced = {}
    for v in dict.fromkeys(block.free_vars()):
        x = b._map(v)  # noqa: SLF001
        if not isinstance(x, Var) or x.kind != "array" or not (b.is_b(x) or _read_as_data(block, v)):
            continue
        x = b.full(x)
        shape = b.shape(x)
        t = b.pad(taken, len(shape)) if len(shape) > b.rank(taken) else taken
        replaced[v] = b.rename.get(v)
        b.rename[v] = b.call("taken_input", x, t, shape=shape)
    return replaced


def _read_as_data(block, v) -> bool:
    """Whether every op of the block that reads v reads it as a differentiable operand
    (a parameter with a derivative: batched, every such operand has a batched form), not
    as an index, a shape or a test."""
    for op in _all_ops(block.ops):
        rule = rules.RULES[op.prim]
        params = list(rule.py_signature.parameters) if rule.py_signature is not None else []
        for k, a in enumerate(op.args):
            if v in operand_vars(a) and (k >= len(params) or params[k] not in rule.vjp):
                return False
    return True


def _is_none(x) -> bool:
    return isinstance(x, Const) and x.value is None


def _all_ops(ops):
    for op in ops:
        yield op
        for block in op.blocks:
            yield from _all_ops(block.ops)


def _full(b, x):
    """b.full, also for a constant (`acc = 0.0` carried): its broadcast is written as an
    op, not folded into a constant array the module would bake in."""
    if not isinstance(x, Const):
        return b.full(x)
    shape = b.shape(x)
    out = Var(b.namer.fresh("_batched"))
    b.out.append(Op("broadcast_to", (x, Const((b.size,) + shape)), (out,), getattr(b, "loc", None)))
    b.batched.add(out)
    b.shapes[out] = shape
    return out
