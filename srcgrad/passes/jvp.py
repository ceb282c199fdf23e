"""Forward mode: write the tangent ops of a straight-line graph.

For each op, first to last, with an operand that carries a tangent, each active
parameter's JVP formula (srcgrad.rules, Note [The derivative table]) is traced
into IR with the formula's names bound to the op's operands, `ans` to its outputs
and `<param>_t` to the operand's tangent; the output's tangent is the sum of the
contributions and is named `<value>_t`. Tangent ops follow their primal op
directly, so generated code reads primal line, tangent lines, next primal line.

Note [Partial tangents of elementwise ops]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`z = x * W` with only `x` active: the contribution `x_t * W` has the broadcast
shape of x and W, which is z's; but `z = x + W` gives just `x_t`, which may be
smaller than z. Summing contributions would broadcast correctly, yet an output
tangent of the wrong shape must not escape. So an elementwise op's contribution
is wrapped in `xp.broadcast_to(t, xp.shape(ans))` unless it is provably in ans's
shape class (Note [Shape classes] in srcgrad.passes.simplify); simplify removes
the broadcasts it can prove redundant. An operand without a tangent counts whatever
its kind: a "static" Var (a mask, a loop's constant array) may give ans its shape.
"""

from __future__ import annotations

import re

import numpy

from srcgrad import rules
from srcgrad.errors import CompileError
from srcgrad.ir.core import Const, Pack, Var, operand_vars
from srcgrad.ir.expand import Expander, from_operand
from srcgrad.passes.activity import refuse_silent_constants
from srcgrad.passes.jvp_control import TAPE_OPS, forward_region, forward_tape
from srcgrad.passes.simplify import _SCALAR_STATICS, _classify, _is_scalar


def tangent_name(value_name: str) -> str:
    return value_name + "_t"


def forward(ops: list, tangents: dict, namer, scalars: set | None = None) -> tuple:
    """(ops with tangent ops interleaved, {var: tangent operand}).

    `tangents` maps input Vars to their tangent Vars (parameters of the generated
    function). Every emitted tangent op has `attrs["backward"] = True`: it is
    derivative code that simplify may rewrite algebraically. `scalars`: static Vars
    known to be Python/0-d scalars (an enclosing loop's index), shared with the blocks.
    """
    refuse_silent_constants(ops, tangents)  # Note [No silent constants] in passes.activity
    tangents = dict(tangents)
    out: list = []
    shape_class: dict = {}
    producer: dict = {}
    scalars = set() if scalars is None else scalars

    def record(op):
        rule = rules.RULES.get(op.prim)
        _note_scalars(op, rule, scalars, producer)
        _classify(op, rule, shape_class, producer, scalars)
        for o in op.outs:
            producer[o] = op
        out.append(op)

    def forward_block(block_ops, block_tangents, block_namer):  # (jvp_control's blocks)
        return forward(block_ops, block_tangents, block_namer, scalars)

    custom_body = {id(b) for op in ops if op.prim == "custom_call" for b in op.attrs["function"].body}
    for op in ops:
        rule = rules.RULES[op.prim]
        if rule.control:  # tangents beside the values in its blocks (passes/jvp_control.py)
            if op.prim == "for_range" and op.blocks and op.blocks[0].params:
                scalars.add(op.blocks[0].params[0])  # the index: a Python int
            for pre in forward_region(op, tangents, namer, forward_block):
                record(pre)
            record(op)
            continue
        if op.prim in TAPE_OPS:  # Note [Tangents on tapes] in srcgrad.passes.jvp_control
            forward_tape(op, tangents, namer)
            record(op)
            continue
        record(op)
        # ---- custom Functions (Note [Custom Functions] in srcgrad.frontend.function)
        if id(op) in custom_body:
            continue  # the user's jvp gives the tangents of the call's outputs
        if op.prim == "custom_call":
            call = op.attrs["function"]
            if any(v in tangents for v in call.differentiable_inputs(op).items):
                tracer = Expander(namer)
                tangents.update(call.jvp_ops(tracer, op, tangents))
                for new in tracer.ops:
                    new.attrs["backward"] = True
                    record(new)
            continue
        if op.prim == "differentiable_once" and isinstance(op.args[0], Var) and op.args[0] in tangents:
            raise CompileError.at(op.loc, "trying to differentiate twice a function that was "
                                  f"marked with @once_differentiable ({op.args[1].value})")
        # ---- end custom Functions
        if rule.nondiff or rule.static_out or not any(o.kind == "array" for o in op.outs):
            continue
        active = [(p, a) for p, a in zip(rule.params, op.args)
                  if p in rule.jvp and any(v in tangents for v in operand_vars(a))]
        if not active:
            continue
        multi = len(op.outs) != 1 or callable(rule.nout)
        ans = tuple(op.outs) if multi else op.outs[0]
        tracer = Expander(namer)
        tracer.loc = op.loc
        env = {p: from_operand(a) for p, a in zip(rule.params, op.args)}
        env["ans"] = ans
        for p, a in active:
            env[tangent_name(p)] = _operand_tangent(tracer, a, tangents)
        total = None
        for p, _ in active:
            part = tracer.expand(rule.jvp[p], env, op.loc)
            if rule.elementwise and not multi and len(active) < _array_operands(op, scalars):
                part = _broadcast_to_ans(tracer, part, ans, shape_class, producer, tracer.ops,
                                         scalars)
            total = part if total is None else _add(tracer, total, part, multi)
        for new in tracer.ops:
            new.attrs["backward"] = True
            record(new)
        for o, t in zip(op.outs, total if multi else (total,)):
            if t is None or o.kind != "array":
                continue
            if isinstance(t, Var) and t.name.startswith("_") and t not in tangents.values():
                # h_t; a temporary's tangent `_sum_t` (tidy_temporaries renumbers it)
                t.name = namer.fresh(tangent_name(re.sub(r"_\d+$", "", o.name) if o.name.startswith("_")
                                                  else o.name))
            tangents[o] = t
    return out, tangents


def _array_operands(op, scalars) -> int:
    """Operands that may have the output's shape: every Var not known to be a scalar,
    and every non-scalar constant.

    A Var of kind "static" carries no derivative but may still be an array that gives
    the output its shape (a mask `x > 0`, an array a loop fills with constants): in
    `s + mask` with only a scalar s active, `s_t` must be broadcast like any partial
    tangent (fuzz seed 974404: its tile, reshape or masked read crashed, or a tangent
    of shape () escaped as a (2,)-output's)."""
    return sum(1 for a in op.args if (isinstance(a, Var) and a not in scalars)
               or (isinstance(a, Const) and numpy.ndim(a.value) > 0))


def _note_scalars(op, rule, scalars, producer) -> None:
    """Add op's output to `scalars` when it is a static Python/0-d scalar for every
    input: a size, `x.shape[k]`, arithmetic on such values (`i + 1`, `n * 2`)."""
    if len(op.outs) != 1 or rule is None or op.outs[0].kind != "static":
        return
    args = op.args
    if op.prim in _SCALAR_STATICS:
        scalars.add(op.outs[0])
    elif op.prim == "getitem" and isinstance(args[0], Var) and isinstance(args[1], Const) \
            and isinstance(args[1].value, int) and getattr(producer.get(args[0]), "prim", None) == "shape":
        scalars.add(op.outs[0])
    elif rule.elementwise and args and all(_is_scalar(a, scalars) for a in args):
        scalars.add(op.outs[0])


def _operand_tangent(tracer, arg, tangents):
    """The tangent of operand `arg`: a packed sequence becomes a tuple/list of tangents."""
    if isinstance(arg, Var):
        t = tangents.get(arg)
        return t if t is not None else _zeros_like(tracer, arg)
    if isinstance(arg, Pack) and arg.style != "slice":
        items = tuple(_operand_tangent(tracer, i, tangents) for i in arg.items)
        return items if arg.style == "tuple" else list(items)
    if isinstance(arg, Const):
        return Const(numpy.zeros_like(arg.value, dtype=float))
    return arg


def _zeros_like(tracer, v):
    return tracer.apply(rules.RULES["zeros_like"], [v], {})


def _add(tracer, a, b, multi):
    if multi:
        return tuple(x if y is None else y if x is None else
                     tracer.apply(rules.RULES["add"], [x, y], {}) for x, y in zip(a, b))
    return tracer.apply(rules.RULES["add"], [a, b], {})


def _broadcast_to_ans(tracer, part, ans, shape_class, producer, new_ops, scalars):
    """`part` broadcast to ans's shape, unless provably already of that shape."""
    # Classify the contribution's own ops first (they are not recorded yet).
    classes, prods = dict(shape_class), dict(producer)
    for new in new_ops:
        _classify(new, rules.RULES.get(new.prim), classes, prods, scalars)
        for o in new.outs:
            prods[o] = new
    if isinstance(part, Var) and classes.get(part, part) is classes.get(ans, ans):
        return part
    shape = tracer.apply(rules.RULES["shape"], [ans], {})
    return tracer.apply(rules.RULES["broadcast_to"], [part, shape], {})
