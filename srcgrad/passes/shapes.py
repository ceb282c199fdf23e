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
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Pack, Var, operand_vars


class ProbeFailed(Exception):
    """Running the ops on the example arguments raised (a singular matrix, a
    non-scalar loss): the caller runs the generic code instead, which raises the
    same error from a generated line the user can read."""


_SHAPE_FACTS = frozenset({"shape", "ndim", "size", "reduced_size"})


@functools.cache
def _code(render: str):
    return compile(render, "<rule>", "eval")


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


@dataclass
class Probe:
    """What running the ops once on example arguments showed."""

    # Var -> shape, for values whose shape depends on argument shapes alone
    shapes: dict = field(default_factory=dict)
    # Vars whose values are NumPy ndarrays (they have every method: `x.sum()` costs
    # half of `np.sum(x)`; NumPy scalars lack some, like `.dot`), and their dtypes.
    # Both follow from the arguments' classes, shapes and dtypes, which a variant's
    # guard fixes.
    dtypes: dict = field(default_factory=dict)
    # Tapes of loops whose shapes change between iterations: what they hold differs
    # in shape from entry to entry, so popped values have no recorded shape.
    unstable_tapes: set = field(default_factory=set)
    # Values computed from shapes alone (shape tuples, sizes), also through a loop's
    # tape: constants of the variant.
    values: dict = field(default_factory=dict)
    pushes: dict = field(default_factory=dict)  # tape Var -> the Vars its push takes

    @property
    def arrays(self):
        return self.dtypes.keys()


def probe(ops: list, inputs: list, args: tuple) -> Probe:
    """Run `ops` on `args`, recording what every variant for these argument shapes,
    dtypes and classes can rely on (Note [Shape specialisation])."""
    env = dict(zip(inputs, args))
    found = Probe()
    shapes, dtypes = found.shapes, found.dtypes
    dtypes.update((v, a.dtype) for v, a in zip(inputs, args) if isinstance(a, numpy.ndarray))
    derived: set = set()  # values computed from shapes only (shape tuples, sizes, counts)
    for v, a in zip(inputs, args):
        if _is_array(a) or isinstance(a, (int, float, complex, bool)):
            shapes[v] = numpy.shape(a)
    with numpy.errstate(all="ignore"):  # values after a loop are stand-ins (_run_control)
        _execute(ops, env, found, derived, record=True)
    return found


def _execute(ops, env, found, derived, record):
    """Run ops; with `record`, note shapes, dtypes and shape-derived values.

    Inside a branch or a loop body nothing is recorded: a value there may differ in
    shape from one iteration (or branch) to the next, so its shape is not a fact of
    the variant (Note [Shape specialisation])."""
    shapes, dtypes = found.shapes, found.dtypes
    for op in ops:
        rule = rules.RULES[op.prim]
        try:
            if rule.control:
                outs = _run_control(op, env, found, derived, record)
            else:
                namespace = dict(rules.FORMULA_GLOBALS)
                namespace.update((p, _value(a, env)) for p, a in zip(rule.params, op.args))
                result = eval(_code(rule.render), namespace)  # noqa: S307 (a rule's render: trusted)
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
            if record and isinstance(value, numpy.ndarray):
                dtypes[o] = value.dtype
        if op.prim == "tape_push":
            found.pushes[op.args[0]] = op.args[1].items
        if op.prim == "tape_pop":
            if record and op.args[0] not in found.unstable_tapes:
                shapes.update((o, numpy.shape(env[o])) for o in op.outs)
                for o, pushed in zip(op.outs, found.pushes.get(op.args[0], ())):
                    if pushed in found.values:
                        found.values[o] = found.values[pushed]
            continue
        if record and op.prim != "cond" and _stable(op, rule, env, shapes, derived):
            if op.prim in _SHAPE_FACTS or all(
                    v in derived for v in op.operand_vars()) and not _reads_arrays(op, env) \
                    and not op.prim.startswith("tape_"):  # a tape's length is a trip count
                derived.update(op.outs)
                found.values.update((o, env[o]) for o in op.outs if isinstance(env[o], (tuple, int)))
            for o in op.outs:
                shapes[o] = numpy.shape(env[o])


def _run_control(op, env, found, derived, record):
    """The values of a control-flow op's outputs (Note [Regions]).

    A loop runs *one* iteration: interpreting every iteration would cost the trip
    count at compile time. When that iteration leaves every carried value's shape
    as it found it, every iteration does (the body's shapes depend on shapes only,
    or `_stable` has said otherwise), so the body's shapes are recorded and the
    loop's outputs get the carried shapes; their values are not the loop's, but
    only shapes are kept from here on. Branches record nothing: which one runs
    depends on values."""
    def run(block, keep):
        _execute(block.ops, env, found, derived, record=keep)
        return [_value(r, env) for r in block.results]

    if op.prim == "cond":
        return run(op.blocks[0] if _value(op.args[0], env) else op.blocks[1], False)
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
    env.update(zip(block.params, params))
    before = {p: numpy.shape(v) for p, v in zip(block.params, params)}
    if record:  # tentatively: the iteration's ops read the carried values' shapes
        found.shapes.update((p, before[p]) for p in block.params[1:] if _is_array(env[p])
                            or isinstance(env[p], (int, float, complex, bool)))
    results = run(block, record)
    carried_after = results[1:] if op.prim == "while_loop" else results  # params[0]: flag/index
    stable = record and all(before[p] == numpy.shape(v)
                            for p, v in zip(block.params[1:], carried_after))
    if stable:
        found.shapes.update((p, before[p]) for p in block.params[1:])
        found.shapes.update((o, before[p]) for o, p in zip(op.outs, block.params[1:]))
    else:
        for inner in [*block.params, *_all_outs(block)]:
            found.shapes.pop(inner, None)
        found.unstable_tapes.update(o.args[0] for o in block.ops if o.prim == "tape_push")
    return results[1:] if op.prim == "while_loop" else results


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
    if op.prim in ("getitem", "scatter_index"):
        return op.args[0] not in () and _operand_stable(op.args[0], env, shapes, derived) \
            and _index_stable(op.args[2] if op.prim == "scatter_index" else op.args[1],
                              env, shapes, derived) \
            and (op.prim != "scatter_index" or _static_stable(op.args[1], derived))
    data = set(rule.vjp) | set(rule.jvp)
    for param, operand in zip(rule.params, op.args):
        if rule.elementwise or param in data or (rule.nondiff and _holds_array(operand, env)):
            if not _operand_stable(operand, env, shapes, derived):
                return False
        elif not _static_stable(operand, derived):
            return False
    return True


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

