"""Tapes and sums of adjoint loops: drop tape entries nothing pops and reads (Note
[Reverse mode of control flow]); sum cotangents in place (Note [Sums in adjoint loops]).

What a loop pushes is decided when the backward is written, before simplification;
a value the backward read only for its shape (`xp.shape(h)` before the shape was
known) is no longer read afterwards. Each such entry is removed from the push in
the forward body and from the pop in the backward body.
"""

from __future__ import annotations

import contextlib
import contextvars

from srcgrad.ir.core import Const, Op, Pack, Var, operand_vars, substitute


def prune_tapes(ops: list) -> None:
    pops = {}
    for op in _walk(ops):
        if op.prim == "tape_pop":
            pops[op.args[0]] = op
    if not pops:
        return
    read = set()
    for op in _walk(ops):  # a push reads too: reverse mode over a gradient pushes what the
        # gradient's adjoint popped (fuzz seed 300253: a pruned pop left the push reading
        # a name nothing bound, a NameError in generated code)
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


# ---------------------------------------------------------------------- sums in place
def accumulate_in_place(ops: list, results: list, probe) -> None:
    """Sum the cotangents of adjoint loops into their buffers.

    Note [Sums in adjoint loops]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    An adjoint loop sums the cotangent of every outer value its body reads: a carried
    `grad_W_sum`, started at `zeros_like(W)`, with `grad_W_sum + c` per iteration. Hand
    BPTT writes `gW += c`; and for a read `xs[t]` indexed by the loop counter the
    contribution is `scatter_index(c, shape(xs), t)`, a full-size zero array a step
    (O(T) per step, O(T^2) a loop), where the hand writes `g_xs[t] += c`. For a variant
    compiled for NumPy arrays (the probe knows shapes and dtypes: Note [Shape
    specialisation]), `accumulate_in_place` writes such a sum into its buffer:

    * `xp.add(grad_W_sum, c, out=grad_W_sum)` when c has the sum's shape and dtype;
    * `grad_xs_sum[t] += c` (attrs["add_at"]) when c is `scatter_index(c', shape, t)` at
      a Python-int index, read only by the sum, and c' has the shape and dtype of a row.

    It may, because the buffer is the loop's own: the start is a `zeros_like` read by
    nothing else in the whole function (not merged with another by CSE, not returned),
    and inside the body the carried value is read once, by its sum, so no one sees it
    change. The start must be a backward op: a forward `zeros_like` that CSE merged it
    with (`y5 = np.zeros_like(x0)`, read by nothing) is a residual of sg.vjp's split
    program, saved once and read by every `vjp_fn` call, so summing into it would
    carry the first call's gradient into the next (fuzz seed 50848). After optimisation
    no pass reorders or merges ops, so this runs last.
    """
    reads = _read_counts(ops, results)
    _accumulate(ops, reads, probe)


def _read_counts(ops, results) -> dict:
    count: dict = {}

    def note(operand):
        for v in operand_vars(operand):
            count[v] = count.get(v, 0) + 1

    for r in results:
        note(r)
    for op in _walk(ops):
        for a in op.args:
            note(a)
        for block in op.blocks:
            for r in block.results:
                note(r)
    return count


def _accumulate(ops, reads, probe) -> None:
    """Sums in place, then what no longer varies leaves the adjoint loop (`Wh.T`,
    which specialisation wrote after the backward's own hoisting)."""
    producer = {o: op for op in ops for o in op.outs}
    out = []
    for op in ops:
        for block in op.blocks:
            _accumulate(block.ops, reads, probe)
        if op.prim == "for_range" and op.attrs.get("reverse") and op.blocks:
            _sums_in_place(op, producer, reads, probe)
            block = op.blocks[0]
            from srcgrad.passes.vjp_control import hoist_invariants  # (adjoint loops only: issue 15)
            hoisted = hoist_invariants(block.ops, [*block.params, *_all_outs(block.ops, "tape_pop")])
            for new in hoisted:  # beside its loop: among the primal lines where the loop is
                if not op.attrs.get("backward"):  # (a loop's gradient inlined in compiled code)
                    new.attrs.pop("backward", None)
            out.extend(hoisted)
        out.append(op)
    ops[:] = out


def _all_outs(ops, prim):
    return [o for op in _walk(ops) if op.prim == prim for o in op.outs]


def _sums_in_place(loop, outer_producer, reads, probe) -> None:
    block = loop.blocks[0]
    inner = {o: op for op in block.ops for o in op.outs}
    for k, (start, param) in enumerate(zip(loop.args[-1].items, block.params[1:])):
        result = block.results[k]
        first = outer_producer.get(start) if isinstance(start, Var) else None  # a Const start:
        # a folded array (fuzz seed 61013: `a1` carried unchanged, its zeros folded)
        add = inner.get(result)
        if (first is None or first.prim != "zeros_like" or not _plain(first) or reads.get(start) != 1
                or not first.attrs.get("backward")
                or add is None or add.prim != "add" or not _plain(add) or param not in add.args
                or reads.get(param) != 1 or reads.get(result) != 1
                or probe.dtypes.get(start) is None or probe.dtypes[start].kind != "f"):
            continue
        c = add.args[1] if add.args[0] is param else add.args[0]
        if not isinstance(c, Var) or c is param:
            continue
        scatter = inner.get(c)
        if scatter is not None and scatter.prim == "scatter_index" and _plain(scatter) and reads.get(c) == 1 \
                and _is_int_index(scatter.args[2], probe) \
                and probe.shapes.get(scatter.args[0]) == probe.shapes.get(start, ())[1:] \
                and probe.dtypes.get(scatter.args[0]) == probe.dtypes[start]:
            scatter.attrs["add_at"] = param  # `grad_xs_sum[t] += c'`
            scatter.outs = ()
            block.ops.remove(add)
            block.results[k] = param
        elif probe.shapes.get(c) == probe.shapes.get(start) and probe.dtypes.get(c) == probe.dtypes[start]:
            add.attrs["add_into"] = param  # `grad_W_sum += c`
            add.args, add.outs = (param, c), ()
            block.results[k] = param


def _is_int_index(index, probe) -> bool:
    """A Python int (the loop counter, or arithmetic on it): basic indexing, one row."""
    return isinstance(index, Var) and probe.kinds.get(index, (None,))[0] is int


def _plain(op) -> bool:
    """Rendered as its rule (no `out=`, `math`, Python value) wherever it runs."""
    return set(op.attrs) <= {"backward"}


# ---------------------------------------------------------------------- one tape per quantity
_PREALLOCATE = contextvars.ContextVar("srcgrad_preallocate_tapes", default=False)


@contextlib.contextmanager
def preallocated():
    """Render tapes of a `range` loop as preallocated arrays (backend="numba")."""
    token = _PREALLOCATE.set(True)
    try:
        yield
    finally:
        _PREALLOCATE.reset(token)


def split_tapes(ops: list, probe, taken=()) -> None:
    """One tape per saved quantity, named after it.

    Note [One tape per saved quantity]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    The VJP pass (Note [Reverse mode of control flow]) gives a loop one tape whose
    entries are tuples, `_tape.append((a, b, ...))` and `a_t, b_t, ... = _tape.pop()`,
    which every later pass moves as one value (pruning, copies for sg.vjp, cotangent
    tapes of second derivatives). Once no pass changes them, a tape pushed once and
    popped once, read by nothing else, becomes one list per distinct value it holds:
    `r2_tape.append(r2)` and `r2_t = r2_tape.pop()`, named after that value, each saved
    once however many entries held it (CSE merged their producers). For numba
    (`preallocated`), a number of a `range(n)` loop that the probe saw pushed as a float is
    one float64 array of n instead, `k_tape = xp.empty(n)`, written and read at the
    iteration's index (`k_tape[i] = k`, `k_t = k_tape[i]`): numba compiles them to a store
    and a load, half a typed list's cost (1000 steps of two floats: 2.6 us against 5.1 us).
    The index is the slot because both loops run over the same `range(0, n, 1)`, in either
    order. An array stays a list of references: the op that made it allocated it already,
    and copying it into a slot costs numba more than the op (a (32, 32, 2) array: 1.4-2 us
    a copy, 0.05 us an append; benchmarks/bench_numba.py's particles). A `while` (its trip
    count unknown until it ends), a loop that breaks, a value not seen as a float: a list,
    which grows. (A value NumPy computes as a float numba types as a float64, or wider
    where a branch makes it complex, which numba refuses to store: NumPy's code runs.)
    This runs last, after the names are tidied."""
    found: dict = {}
    escaped: set = set()
    _scan_tapes(ops, None, None, found, escaped)
    names = set(taken) | _all_names(ops)
    for tape, uses in found.items():
        if tape in escaped or [len(uses[k]) for k in ("tape_new", "tape_push", "tape_pop")] != [1, 1, 1]:
            continue
        (new, _, new_in), (push, loop, push_in), (pop, b_loop, pop_in) = (
            uses[k][0] for k in ("tape_new", "tape_push", "tape_pop"))
        items = push.args[1].items
        if not items or not all(isinstance(v, Var) for v in items) or len(pop.outs) != len(items) \
                or isinstance(pop_in, list):  # (a pop outside any block: none today)
            continue
        slots = _slots(loop, b_loop, new_in) if _PREALLOCATE.get() and not uses["tape_len"] else None
        _split(new, new_in, push, push_in, pop, pop_in, uses["tape_len"], slots, probe, names)


def _scan_tapes(ops, loop, block, found, escaped) -> None:
    """tape -> {prim: [(op, the op whose block holds it, that block (None: top level))]}."""
    for op in ops:
        if op.prim in ("tape_new", "tape_push", "tape_pop", "tape_len"):
            tape = op.outs[0] if op.prim == "tape_new" else op.args[0]
            uses = found.setdefault(tape, {"tape_new": [], "tape_push": [], "tape_pop": [], "tape_len": []})
            uses[op.prim].append((op, loop, block if block is not None else ops))
            if op.prim == "tape_push":  # a tape pushed on another (nested loops): left whole
                escaped.update(operand_vars(op.args[1]))
        else:
            for a in op.args:
                escaped.update(operand_vars(a))
        for inner in op.blocks:
            for r in inner.results:
                escaped.update(operand_vars(r))
            _scan_tapes(inner.ops, op, inner, found, escaped)


def _all_names(ops) -> set:
    names = set()
    for op in _walk(ops):
        names.update(o.name for o in op.outs)
        for block in op.blocks:
            names.update(p.name for p in block.params)
    return names


def _fresh(base, names) -> str:
    name, n = base, 1
    while name in names:
        name, n = f"{base}_{n}", n + 1
    names.add(name)
    return name


def _slots(loop, b_loop, new_in):
    """(forward index, backward index, n) where both loops run over range(0, n, 1) and
    the tape is made beside the forward loop; else None (a list)."""
    if loop is None or b_loop is None or loop.prim != "for_range" or b_loop.prim != "for_range" \
            or "until" in loop.attrs or "until" in b_loop.attrs \
            or not any(o is loop for o in _ops_of(new_in)):
        return None
    (start, stop, step), (b_start, b_stop, b_step) = loop.args[:3], b_loop.args[:3]
    if not all(isinstance(c, Const) and c.value == v for c, v in
               ((start, 0), (step, 1), (b_start, 0), (b_step, 1))):
        return None
    if not (stop is b_stop or isinstance(stop, Const) and isinstance(b_stop, Const)
            and stop.value == b_stop.value):
        return None
    return loop.blocks[0].params[0], b_loop.blocks[0].params[0], stop


def _split(new, new_in, push, push_in, pop, pop_in, lens, slots, probe, names) -> None:
    quantities = list(dict.fromkeys(push.args[1].items))
    first_out = {}
    alias = {}
    for v, out in zip(push.args[1].items, pop.outs):
        if v in first_out:
            alias[out] = first_out[v]
        else:
            first_out[v] = out
    names.difference_update(o.name for o in pop.outs)  # (named at the VJP, before names were tidied)
    news, pushes, pops = [], [], []
    for v in quantities:
        stem = v.name.lstrip("_")
        t = Var(_fresh(f"{stem}_tape", names), "static")
        out = first_out[v]
        out.name = _fresh(f"{stem}_t", names)
        typed = slots is not None and v in probe.floats_pushed and probe.shapes.get(v) == () \
            and v not in probe.dtypes  # (a number: an array is a list's reference, not copied)
        new_attrs = {**new.attrs, "entry": True}
        push_attrs, pop_attrs = {**push.attrs, "entry": True}, {**pop.attrs, "entry": True}
        if typed:
            new_attrs["alloc"] = slots[2]
            push_attrs["slot"], pop_attrs["slot"] = slots[0], slots[1]
        news.append(Op("tape_new", (), (t,), new.loc, new_attrs))
        pushes.append(Op("tape_push", (t, v), (), push.loc, push_attrs))
        pops.append(Op("tape_pop", (t,), (out,), pop.loc, pop_attrs))
    _replace(_ops_of(new_in), new, news)
    _replace(_ops_of(push_in), push, pushes)
    _replace(pop_in.ops, pop, pops)
    substitute(pop_in.ops, alias)  # (a duplicate's readers are in the popping block)
    pop_in.results = [alias.get(r, r) if isinstance(r, Var) else r for r in pop_in.results]
    for op, _, _ in lens:  # (a while's trip count: the length of any one of them)
        op.args = (news[0].outs[0],)


def _ops_of(where) -> list:
    return where if isinstance(where, list) else where.ops


def _replace(ops, op, new_ops) -> None:
    i = next(k for k, o in enumerate(ops) if o is op)
    ops[i:i + 1] = new_ops
