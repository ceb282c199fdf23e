"""Shapes of every value, for one combination of argument shapes.

Note [Shape specialisation]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
Generic generated code must work for any shapes, so it carries plumbing:
`unbroadcast(g, xp.shape(x))`, `matmul_bar(...)`, `xp.shape(...)` of values
computed only for their shape. Hand-written NumPy has none of it, because its
author knows the shapes. So does srcgrad once the first call shows them: the
transform compiles a variant per tuple of argument shapes (an O(1) guard picks it;
DESIGN decision 11), and this pass finds the shape of each value by running the
ops once on the first call's arguments.

A shape found that way holds for every call with the same argument shapes only
if it depends on shapes alone. It does not when an op reads a *value* as a
shape parameter: a boolean mask, `x[:k]` with an integer argument `k`,
`np.zeros(n)` with `n = np.sum(mask)`. Such values are *unstable*: their shape
is not recorded, so the simplifier keeps the generic code for them and for all
that follows from them.

Nor may a fact come from which way the first call's data went (DESIGN decision 11).
Both branches of an `if` run (the untaken one on a copy of the environment), and a
branch's output has a fact only where both branches agree on it: a float in one arm
and an array in the other has no class. A loop's one probed iteration stands for
all only when it leaves the facts of every carried value as it found them, and a
value popped from a tape has the facts of what was pushed, never of what one
iteration happened to push.
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.errors import ProbeFailed  # defined there: the transforms catch it unimported
from srcgrad.ir.core import FACTORY, Const, EqFields, Pack, Var, operand_vars
from srcgrad.ir.renders import run_render

_SHAPE_FACTS = frozenset({"shape", "ndim", "size", "reduced_size"})
_FLOATS = (float, numpy.float64)


def _value(operand, env):
    if isinstance(operand, Var):
        return env[operand]
    if isinstance(operand, Pack):
        items = tuple(_value(i, env) for i in operand.items)
        if operand.style == "slice":
            return slice(*items)
        return items if operand.style == "tuple" else list(items)
    return operand.value


def _is_array(value) -> bool:
    return isinstance(value, (numpy.ndarray, numpy.generic)) and not isinstance(
        value, numpy.integer) or hasattr(value, "__array_namespace__")


class Probe(EqFields):
    """What running the ops once on example arguments showed: only *facts*, what
    holds on every call the variant's guard admits (Note [Shape specialisation]).
    A `@dataclass` written out (srcgrad.ir.core.Loc says why)."""

    __slots__ = __match_args__ = ("shapes", "kinds", "dtypes", "values", "pushes", "floats_pushed")

    def __init__(self, shapes: dict = FACTORY, kinds: dict = FACTORY, dtypes: dict = FACTORY,
                 values: dict = FACTORY, pushes: dict = FACTORY, floats_pushed: set = FACTORY):
        # Var -> shape, for values whose shape depends on argument shapes alone
        self.shapes = {} if shapes is FACTORY else shapes
        # Var -> (class, dtype), for values whose class and dtype follow from the
        # arguments' classes, shapes and dtypes (which a variant's guard fixes).
        self.kinds = {} if kinds is FACTORY else kinds
        # Vars that are NumPy ndarrays (they have every method: `x.sum()` costs half of
        # `np.sum(x)`; NumPy scalars lack some, like `.dot`), and their dtypes: the
        # ndarray entries of `kinds`.
        self.dtypes = {} if dtypes is FACTORY else dtypes
        # Values computed from shapes alone (shape tuples, sizes), also through a loop's
        # tape: constants of the variant.
        self.values = {} if values is FACTORY else values
        self.pushes = {} if pushes is FACTORY else pushes  # tape Var -> the operands its push takes
        # Vars pushed on a tape as a float (a Python float or np.float64: never a 0-d array,
        # an int or a bool): a numba tape of them is a float64 array (Note [One tape per
        # saved quantity] in srcgrad.passes.tapes)
        self.floats_pushed = set() if floats_pushed is FACTORY else floats_pushed

    @property
    def arrays(self):
        return self.dtypes.keys()

    @property
    def floats(self) -> set:
        """The arrays of a floating-point dtype (srcgrad.passes.simplify's `x * 1.0`)."""
        return {v for v, dtype in self.dtypes.items() if dtype.kind in "fc"}


def probe(ops: list, inputs: list, args: tuple) -> Probe:
    """Run `ops` on `args`, recording what every variant for these argument shapes,
    dtypes and classes can rely on (Note [Shape specialisation])."""
    # Python floats run as NumPy ones: the variant computes what NumPy does at singular
    # points (Note [Scalar code] in srcgrad.passes.scalars), where Python would raise.
    env = {v: numpy.float64(a) if type(a) is float else a for v, a in zip(inputs, args)}
    found = Probe()
    for v, a in zip(inputs, args):
        if _is_array(a) or isinstance(a, (int, float, complex, bool)):
            found.shapes[v] = numpy.shape(a)
        _note_kind(found, v, a)
    with numpy.errstate(all="ignore"):  # values after a loop are stand-ins (_run_control)
        _execute(ops, env, found, set())
    return found


def _execute(ops, env, found, derived, keep=()):
    """Run ops, noting the shapes, kinds and shape-derived values that are facts.

    A fact follows from facts: an op's output shape is one when its operands' shapes
    (and the values it reads as parameters) are; a control-flow op's outputs get facts
    only where every way through it agrees (`_run_control`). The values themselves
    are the first call's data and decide nothing."""
    dead = _dead_after(ops, keep)
    for i, op in enumerate(ops):
        _run_op(op, env, found, derived)
        for v in dead.get(i, ()):
            env.pop(v, None)  # Note [The probe's memory]


# Note [The probe's memory]
# The probe runs the unoptimised program (forward and backward, every temporary the
# simplifier will later fold away) on the first call's real arrays. Keeping every value
# until the end made the first call's peak memory the sum of all of them: 62 MB on the
# 1024x512 MLP where a steady call needs 28 MB, 192 MB against 61 MB on a 10**6-element
# elementwise loss (issue 15; now 34 and 65 MB, benchmarks/bench_startup.py). So each
# value is dropped from the environment after its last reader in its own op list; a
# value a nested block reads counts as read by the block's op (so it lives through the
# whole loop or branch), and a block's results live until the op that runs the block has
# taken them. Only facts (shapes, kinds, shape-derived values)
# outlive the probe, and those are taken when the op runs.
def _dead_after(ops, keep) -> dict:
    """op index -> the values defined in `ops` that no later op of `ops` (nor `keep`, a
    block's results) reads: they may go once that op has run."""
    last: dict = {}
    for i, op in enumerate(ops):
        for v in op.operand_vars():
            if v in last:  # defined in this list (SSA: before its readers)
                last[v] = i
        for o in op.outs:
            last[o] = i
    for r in keep:
        for v in operand_vars(r):
            last.pop(v, None)
    dead: dict = {}
    for v, i in last.items():
        dead.setdefault(i, []).append(v)
    return dead


def _run_op(op, env, found, derived) -> None:
    """Run one op on `env`, noting the facts of its outputs."""
    shapes = found.shapes
    rule = rules.RULES[op.prim]
    if rule.io:  # print: the user's program prints when it runs, not when it compiles
        return
    try:
        if rule.control:
            outs = _run_control(op, env, found, derived)
        else:
            result = run_render(rule, [_value(a, env) for a in op.args])
            if op.prim == "tape_pop":
                outs = result
            else:
                outs = result if len(op.outs) > 1 or callable(rule.nout) else (result,)
    except ProbeFailed:
        raise
    except Exception as err:
        raise ProbeFailed(f"{op.prim}: {err}") from err
    for o, value in zip(op.outs, outs):
        env[o] = value
    if rule.control:
        return
    if op.prim == "tape_push":
        tape, items = op.args[0], op.args[1].items
        found.pushes[tape] = items if found.pushes.get(tape, items) == items else ()
        found.floats_pushed.update(v for v in operand_vars(op.args[1]) if type(env.get(v)) in _FLOATS)
        return
    if op.prim == "tape_pop":  # an entry has the facts of what was pushed
        for o, pushed in zip(op.outs, found.pushes.get(op.args[0], ())):
            _set_facts(o, _facts(pushed, found), found)
            if pushed in derived:  # a shape pushed: the same on every iteration
                derived.add(o)
            if pushed in found.values:
                found.values[o] = found.values[pushed]
        return
    if _stable(op, rule, env, shapes, derived):
        if op.prim in _SHAPE_FACTS or all(
                v in derived for v in op.operand_vars()) and not _reads_arrays(op, env) \
                and not op.prim.startswith("tape_"):  # a tape's length is a trip count
            derived.update(op.outs)
            found.values.update((o, env[o]) for o in op.outs if isinstance(env[o], (tuple, int)))
        for o in op.outs:
            shapes[o] = numpy.shape(env[o])
    if all(v in found.kinds for v in op.operand_vars()):
        for o in op.outs:
            _note_kind(found, o, env[o])


def _run_control(op, env, found, derived):
    """The values of a control-flow op's outputs (Note [Regions]).

    A branch: the taken one computes the outputs; the other runs too, on a copy of
    the environment, so that its values get facts as well (an error there, on data
    it would never see, only costs its facts). An output is a fact only where both
    branches agree: which branch runs depends on values, which no guard checks.

    A loop runs *one* iteration: interpreting every iteration would cost the trip
    count at compile time. When that iteration leaves the facts of every carried
    value as it found them, every iteration does (the body's facts follow from
    facts), so the body's facts stand and the loop's outputs get the carried
    values' facts; their values are not the loop's, but only facts are kept from
    here on. Otherwise nothing inside the loop is a fact."""
    if op.prim == "cond":
        taken = 0 if _value(op.args[0], env) else 1
        results = _run_block(op.blocks[taken], env, found, derived)
        if _run_aside(op.blocks[1 - taken], env, found, derived):
            exports = op.attrs.get("exports", {})
            for o, a, b in zip(op.outs, op.blocks[0].results, op.blocks[1].results):
                if o in exports:  # read only where its branch ran (Note [Reverse mode of control flow])
                    _set_facts(o, _facts((a, b)[exports[o]], found), found)
                    continue
                (sa, ka), (sb, kb) = _facts(a, found), _facts(b, found)
                _set_facts(o, (sa if sa == sb else None, ka if ka == kb else None), found)
        return results
    block = op.blocks[0]
    carried = [_value(a, env) for a in op.args[-1].items]
    if op.prim == "while_loop":
        running = _value(op.args[0], env)
        if not running:
            return carried
        params = [running, *carried]
    else:
        start, stop, step = (_value(a, env) for a in op.args[:3])
        indices = range(start, stop, step)
        if not indices:
            return carried
        params = [indices[-1] if op.attrs.get("reverse") else indices[0], *carried]
        found.kinds[block.params[0]] = (int, None)
        found.shapes[block.params[0]] = ()  # a Python int, whatever its value (`t = i * dt`)
    env.update(zip(block.params, params))
    before = [_facts(a, found) for a in op.args[-1].items]
    for p, facts in zip(block.params[1:], before):  # tentatively: the iteration reads them
        _set_facts(p, facts, found)
    results = _run_block(block, env, found, derived)
    carried_after = block.results[1:] if op.prim == "while_loop" else block.results
    if all(_facts(r, found) == facts for r, facts in zip(carried_after, before)):
        for o, facts in zip(op.outs, before):
            _set_facts(o, facts, found)
    else:
        _forget([*block.params, *_all_outs(block)], found, derived)
    return results[1:] if op.prim == "while_loop" else results


def _run_block(block, env, found, derived):
    _execute(block.ops, env, found, derived, block.results)
    return [_value(r, env) for r in block.results]


def _run_aside(block, env, found, derived) -> bool:
    """Run a branch the data does not take, on a copy of `env` (tapes copied too, and
    stand-ins for values only the other branch defines); False, and its facts
    forgotten, when it raises."""
    aside = {k: (list(v) if type(v) is list else v) for k, v in env.items()}
    for v in block.free_vars():  # a value exported by the other branch: None here
        if env.get(v, 0) is None and v in found.shapes:
            aside[v] = _stand_in(found.shapes[v], found.kinds.get(v))
    try:
        _execute(block.ops, aside, found, derived, block.results)
    except ProbeFailed:
        _forget(list(_all_outs(block)), found, derived)
        return False
    return True


_NOT_AN_ARRAY = ("not an array", None)


def _stand_in(shape, kind):
    """A value with these facts, for running code whose real value is a placeholder."""
    if kind is not None and kind is not _NOT_AN_ARRAY:
        return numpy.ones(shape, kind[1])
    return numpy.float64(1.0) if shape == () else None


def _kind_of(value) -> tuple:
    """(class, dtype) of an array of one or more dimensions; one kind for every other
    value. A Python float in the variant is a NumPy scalar in the probe (Note [Scalar
    code]), and a 0-d array and a NumPy scalar share a guard, so those are not told
    apart: no fact says which."""
    if (isinstance(value, numpy.ndarray) or hasattr(value, "__array_namespace__") and not isinstance(
            value, numpy.generic)) and value.ndim > 0:
        return type(value), value.dtype
    return _NOT_AN_ARRAY


def _note_kind(found, var, value) -> None:
    found.kinds[var] = _kind_of(value)
    if isinstance(value, numpy.ndarray):
        found.dtypes[var] = value.dtype


def _facts(operand, found) -> tuple:
    """(shape, kind) of an operand as far as they are facts of the variant (None: not)."""
    if isinstance(operand, Const):
        try:
            return numpy.shape(operand.value), _kind_of(operand.value)
        except Exception:  # noqa: BLE001 (a ragged literal: no shape)
            return None, _kind_of(operand.value)
    if isinstance(operand, Var):
        return found.shapes.get(operand), found.kinds.get(operand)
    return None, None


def _set_facts(var, facts, found) -> None:
    shape, kind = facts
    if shape is not None:
        found.shapes[var] = shape
    if kind is not None:
        found.kinds[var] = kind
        if kind[0] is numpy.ndarray:
            found.dtypes[var] = kind[1]


def _forget(vars_, found, derived) -> None:
    for v in vars_:
        for table in (found.shapes, found.kinds, found.dtypes, found.values):
            table.pop(v, None)
        derived.discard(v)


def _all_outs(block):
    for op in block.ops:
        yield from op.outs
        for inner in op.blocks:
            yield from inner.params
            yield from _all_outs(inner)


def _reads_arrays(op, env) -> bool:
    return any(_is_array(env[v]) for v in op.operand_vars())


def _stable(op, rule, env, shapes, derived) -> bool:
    """Whether op's output shapes follow from its operands' shapes alone."""
    if op.prim == "setitem":  # x with a write at index: x's shape, whatever the index
        return _operand_stable(op.args[0], env, shapes, derived)
    if op.prim in ("getitem", "scatter_index", "setitem_bar"):  # setitem_bar(c, i): c[i]
        return op.args[0] not in () and _operand_stable(op.args[0], env, shapes, derived) \
            and _index_stable(op.args[2] if op.prim == "scatter_index" else op.args[1],
                              env, shapes, derived) \
            and (op.prim != "scatter_index" or _static_stable(op.args[1], derived))
    if op.prim in _FULL_REDUCTIONS and _reduces_all(op, rule):  # `np.sum(x[x > 0])`: a
        return True  # scalar, whatever the operand's shape (I7: vjp variants of such outputs)
    # the identity on its first operand (the others are only checked)
    if rule.alias_check:
        return _operand_stable(op.args[0], env, shapes, derived)
    if op.prim in _SHAPE_READS:  # operands read for their shapes, and ones the shape ignores
        by_shape, ignored = _SHAPE_READS[op.prim]
        return all(_operand_stable(a, env, shapes, derived) if i in by_shape
                   else i in ignored or _static_stable(a, derived) for i, a in enumerate(op.args))
    data = set(rule.vjp) | set(rule.jvp)
    for param, operand in zip(rule.params, op.args):
        if rule.elementwise or param in data or (rule.nondiff and _holds_array(operand, env)):
            if not _operand_stable(operand, env, shapes, derived):
                return False
        elif not _static_stable(operand, derived):
            return False
    return True


# prim -> (operands whose shape, not value, sets the result's shape; operands that do not
# bear on its shape at all): an index array, the pieces a cotangent is split into, a dtype.
_SHAPE_READS = {"concat_bar": ((0, 1), ()), "stack_bar": ((0, 1), ()), "take": ((0, 1), ()),
                "stacked_bar": ((0, 1), ()),
                "take_along_axis": ((0, 1), ()), "astype": ((0,), (1,)),
                "take_bar": ((0,), (2,)), "take_along_bar": ((0,), (2,)),  # x's shape given
                "full_like": ((0,), (1, 2))}


_FULL_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "std", "var"})


def _reduces_all(op, rule) -> bool:
    """A reduction over every axis without keepdims: its result has shape ()."""
    operands = dict(zip(rule.params, op.args))
    axis, keepdims = operands.get("axis"), operands.get("keepdims")
    return isinstance(axis, Const) and axis.value is None and isinstance(keepdims, Const) \
        and keepdims.value is False


def _holds_array(operand, env) -> bool:
    """Data, not a parameter: an array, or a float (an int may be a size: np.zeros(n))."""
    return any(_is_array(env[v]) or isinstance(env[v], (float, complex)) for v in operand_vars(operand))


def _operand_stable(operand, env, shapes, derived) -> bool:
    """A data operand: its shape (not its value) must be known."""
    return all(v in shapes or v in derived for v in operand_vars(operand))


def _static_stable(operand, derived) -> bool:
    """A parameter operand (axis, shape, repeats): its value must come from shapes."""
    return all(v in derived for v in operand_vars(operand))


def _index_stable(index, env, shapes, derived) -> bool:
    """An index: integer arrays matter by shape, masks and slice bounds by value."""
    parts = index.items if isinstance(index, Pack) and index.style != "slice" else (index,)
    for part in parts:
        if isinstance(part, Const):
            continue
        if isinstance(part, Pack):  # a slice with dynamic bounds
            if not _static_stable(part, derived):
                return False
            continue
        value = env[part]
        if getattr(value, "dtype", None) is not None and value.dtype.kind == "b":
            return False  # a boolean mask selects a data-dependent number of elements
        if _is_array(value):
            if part not in shapes:
                return False
        elif not isinstance(value, (int, numpy.integer)):
            return False
    return True

