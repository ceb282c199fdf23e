"""Reverse mode: write the backward ops of a straight-line graph.

For each op, last to first, whose outputs received a cotangent, each active
parameter's VJP formula (srcgrad.rules) is traced into IR with the formula's names
bound to the op's operands, `ans` to its outputs and `g` to the summed cotangent.
Cotangents of a value used several times are summed when its producer is reached,
and that sum is named `grad_<value>`.

Note [Masked cotangents]
~~~~~~~~~~~~~~~~~~~~~~~~
`np.where(x > 0, np.sqrt(x), 0.0)` evaluates sqrt everywhere; where x <= 0 its
derivative is inf or NaN, and the where's cotangent there is 0, so the chain rule
computes 0 * inf = NaN. The mathematically intended gradient is 0: that branch
was not taken. So the cotangent `where` sends into each branch is *masked* by its
condition, and the mask travels upstream through shape-preserving elementwise ops:
each VJP contribution there is wrapped in `xp.where(cond, contribution, 0)`,
forcing exact zeros wherever the branch was not taken. A value whose cotangent
also comes from elsewhere (unmasked) stops the propagation.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.errors import CompileError
from srcgrad.ir.core import Const, Pack, Var, operand_vars
from srcgrad.ir.expand import Expander, from_operand
from srcgrad.passes.activity import active_vars, refuse_silent_constants
from srcgrad.passes.simplify import _classify, shape_classes


def reverse(ops: list, wrt: list, seeds: list, namer, hooks=None, zero_edges=frozenset(),
            tapes=None) -> tuple:
    """(backward ops, {wrt var: cotangent operand or None}).

    `seeds` pairs output operands with their cotangents (a Var input of the
    backward, or Const(1.0) for the scalar output of `grad`). `hooks`, the
    `(pack, unpack)` Vars of the saved-tensor-hook variant (srcgrad.passes.hooks),
    makes custom Functions pack and unpack what they save. `zero_edges` lists
    `(id(op), param)` edges known to carry no derivative (srcgrad.passes.invariance).
    `tapes`: the cotangent tapes of the blocks' enclosing call (Note [Reverse mode over
    adjoint loops] in srcgrad.passes.vjp_control); a call given none owns them.
    """
    own_tapes = tapes is None
    if own_tapes:
        tapes = _tape_cotangents(ops)

    def reverse_block(b_ops, b_wrt, b_seeds, b_namer):
        return reverse(b_ops, b_wrt, b_seeds, b_namer, tapes=tapes)

    refuse_silent_constants(ops, wrt)  # Note [No silent constants] in srcgrad.passes.activity
    active = active_vars(ops, wrt, [v for v, _ in seeds])
    classes = shape_classes(ops)
    tracer = Expander(namer)
    contributions: dict = {}  # Var -> [(cotangent, mask or None)]
    masks: dict = {}  # Var -> the mask every contribution to it carries (Note [Masked cotangents])
    for v, seed in seeds:
        if isinstance(v, Var) and (v in active or v in wrt):
            contributions.setdefault(v, []).append((seed, None))

    def total(v):
        parts = contributions.get(v)
        if not parts:
            return None
        result = parts[0][0]
        for part, _ in parts[1:]:
            result = tracer.apply(rules.RULES["add"], [result, part], {})
        if isinstance(result, Var) and result.name.startswith("_"):
            result.name = namer.fresh("grad_" + v.name.lstrip("_"))
        common = {id(m): m for _, m in parts}
        masks[v] = next(iter(common.values())) if len(common) == 1 else None
        contributions[v] = [(result, masks[v])]
        return result

    def same_shape(a, b):
        return isinstance(a, Var) and classes.get(a, a) is classes.get(b, b)

    pending: list = []  # (forward op, op to insert before it): loops' tapes

    for op in reversed(ops):
        rule = rules.RULES[op.prim]
        if op.prim == "tape_push":  # Note [Reverse mode over adjoint loops]
            tracer.loc = op.loc
            for arg, ct in tapes.reverse_push(op, tracer, namer):
                _distribute(arg, ct, active, contributions)
            continue
        if op.prim == "tape_pop":  # also for a nested loop's tape alone (no cotangent of its own)
            if any(o in contributions or o in tapes.cotangent for o in op.outs):
                tracer.loc = op.loc
                tapes.reverse_pop(op, [total(o) for o in op.outs], tracer, namer)
            continue
        if rule.control:
            tapes.alias_exports(op)
        if not any(o in contributions for o in op.outs) and not (rule.control and tapes.pushes_in(op)):
            continue
        # ---- custom Functions (Note [Custom Functions] in srcgrad.frontend.function)
        if op.prim == "custom_call":
            tracer.loc = op.loc
            cts = {o: total(o) for o in op.outs}
            call = op.attrs["function"]
            same = _shape_test(op, classes, tracer.ops)
            grads = call.backward_ops(tracer, op, cts, active, same, hooks)
            for arg, ct in zip(op.args[1].items, grads):
                if ct is not None:
                    _distribute(arg, ct, active, contributions)
            continue
        if op.prim == "differentiable_once":
            raise CompileError.at(op.loc, "trying to differentiate twice a function that was "
                                  f"marked with @once_differentiable ({op.args[1].value})")
        # ---- end custom Functions
        if rule.control:  # Note [Reverse mode of control flow]
            tracer.loc = op.loc
            cts = [total(o) for o in op.outs]
            from srcgrad.passes.vjp_control import reverse_region  # (control flow only: issue 15)
            for arg, ct in reverse_region(op, cts, tracer, namer, active, pending, reverse_block):
                _distribute(arg, ct, active, contributions)
            continue
        if rule.nondiff:
            continue
        tracer.loc = op.loc
        cts = [total(o) for o in op.outs]
        if len(op.outs) == 1 and not callable(rule.nout):
            g, ans = cts[0], op.outs[0]
        else:
            g = tuple(ct if ct is not None else _zeros_like(tracer, o) for o, ct in zip(op.outs, cts))
            ans = tuple(op.outs)
        env = {p: from_operand(a) for p, a in zip(rule.params, op.args)}
        env.update(g=g, ans=ans)
        out_mask = masks.get(op.outs[0]) if rule.elementwise else None
        for param, arg in zip(rule.params, op.args):
            if param not in rule.vjp or not any(v in active for v in operand_vars(arg)) \
                    or (id(op), param) in zero_edges:
                continue
            ct = tracer.expand(rule.vjp[param], env, op.loc)
            mask = None
            if op.prim == "where" and same_shape(arg, op.outs[0]):
                mask = (op.args[0], param == rule.params[1])  # (condition, branch taken when true)
            elif out_mask is not None and same_shape(arg, op.outs[0]):
                mask = out_mask
                cond, when_true = mask
                zero = Const(0.0)
                ct = tracer.apply(rules.RULES["where"], [cond, ct, zero] if when_true
                                  else [cond, zero, ct], {})
            if isinstance(arg, Pack) and isinstance(ct, Var):
                ct = _split_sequence(tracer, arg, ct)  # NumPy made the list an array
            _distribute(arg, ct, active, contributions, mask)
    grads = {w: total(w) for w in wrt}
    if own_tapes and tapes is not None:  # the cotangent tapes start empty before the backward
        tracer.ops[:0] = tapes.creations
    for new in tracer.ops:
        new.attrs["backward"] = True
    for before, new in pending:
        ops.insert(ops.index(before), new)
    return tracer.ops, grads


def _tape_cotangents(ops):
    """The TapeCotangents of a backward whose `ops` hold a loop, a branch or a tape (a
    nested op sits in a block of one of them), else None: straight-line code never asks."""
    if not any(rules.RULES[op.prim].control or op.prim in ("tape_push", "tape_pop") for op in ops):
        return None
    from srcgrad.passes.vjp_control import TapeCotangents  # (control flow only: issue 15)
    return TapeCotangents()


def _shape_test(op, classes, new_ops):
    """`same(a, b)`: whether `a` provably has `b`'s shape, with the shape classes (Note
    [Shape classes]) extended over the ops a custom Function's backward adds."""
    def same(a, b):
        if not isinstance(a, Var):
            return False
        extended = dict(classes)
        for out, leaf in zip(op.outs, op.args[0].items):  # an output has its forward leaf's shape
            extended[out] = extended.get(leaf, leaf)
        producer: dict = {}
        for new in new_ops:
            _classify(new, rules.RULES.get(new.prim), extended, producer)
            for o in new.outs:
                producer[o] = new
        return a is b or extended.get(a, a) is extended.get(b, b)

    return same


def _distribute(arg, ct, active, contributions, mask=None):
    """Record cotangent `ct` for operand `arg` (recursing into packs)."""
    if isinstance(arg, Var):
        if arg in active:
            contributions.setdefault(arg, []).append((ct, mask))
    elif isinstance(arg, Pack):
        items = ct if isinstance(ct, (tuple, list)) else None
        if items is None or len(items) != len(arg.items):
            raise AssertionError(f"VJP of a sequence operand returned {ct!r}")
        for a, c in zip(arg.items, items):
            _distribute(a, c, active, contributions)


def _split_sequence(tracer, pack, ct):
    """The cotangent of each item of a list operand (`np.sum([1.0, a * a])`) that NumPy
    converted to one array: its rows, nested like the list."""
    items = []
    for i, item in enumerate(pack.items):
        row = tracer.apply(rules.RULES["getitem"], [ct, Const(i)], {})
        items.append(_split_sequence(tracer, item, row) if isinstance(item, Pack) else row)
    return tuple(items)


def _zeros_like(tracer, v):
    return tracer.apply(rules.RULES["zeros_like"], [v], {})


def zeros_for(tracer, v):
    """A zero cotangent for input `v`, for a gradient that does not depend on it."""
    if isinstance(v, Var):
        return _zeros_like(tracer, v)
    return Const(0.0)
