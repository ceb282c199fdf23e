"""Algebraic simplification of the ops the derivative formulas produced.

Formulas are written once for the general case (`unbroadcast(g * y, xp.shape(x))`);
most instances are simpler. This pass folds constants and removes identities:
multiplying by one, adding zero, double negation, and the `unbroadcast` /
`broadcast_to` of a value that provably already has the target shape.

Note [Shape classes]
~~~~~~~~~~~~~~~~~~~~
Without concrete shapes we still know that some values have *equal* shapes:
an elementwise op of operands from one class (and scalar constants) is in that
class, and `unbroadcast(a, shape(b))` / `broadcast_to(a, shape(b))` are in b's.
Two values in one class have equal shapes for every input, so removing an
`unbroadcast` between them is always correct. Only ops the VJP/JVP passes wrote
are rewritten algebraically: the user's own forward code keeps its exact
NumPy semantics (`x * 1.0` still turns an int array into floats).
"""

from __future__ import annotations

import numbers

import numpy

from srcgrad import rules
from srcgrad.frontend.trace import evaluate_static
from srcgrad.ir.core import Const, Op, Var, substitute

# Primitives whose result is floating point whatever their operands' dtypes.
_FLOAT_RESULTS = frozenset("""
    exp expm1 log log1p log2 log10 sqrt cbrt reciprocal sin cos tan arcsin arccos arctan
    arctan2 sinh cosh tanh arcsinh arccosh arctanh divide mean var std logaddexp hypot norm
    inv solve det slogdet cholesky eigh eigvalsh
""".split())


def _float_result(op, floats) -> bool:
    """Whether op's outputs are floating point for every input (NumPy promotion).

    Note [Dtype-preserving simplification]: `x * 1.0` turns an int array into floats,
    so dropping the `* 1.0` is only right when x is known to be floating point.
    """
    rule = rules.RULES.get(op.prim)
    if rule is None or rule.static_out:
        return False
    if op.prim in _FLOAT_RESULTS:
        return True
    if op.prim == "astype":
        dtype = op.args[1]
        return isinstance(dtype, Const) and numpy.dtype(dtype.value).kind in "fc"
    for a in op.args:
        if isinstance(a, Var) and a in floats:
            return True
        if isinstance(a, Const) and isinstance(a.value, float) or (
                isinstance(a, Const) and getattr(a.value, "dtype", None) is not None
                and a.value.dtype.kind in "fc"):
            return True
    return False


def simplify(ops: list, keep: list) -> tuple:
    """(simplified ops, {removed var: the operand standing for it}).

    `keep` lists Vars whose names are user-facing (outputs, gradients): when one is
    replaced by a temporary, the temporary takes its name.
    """
    out, alias, shape_class, producer, floats, scalars = [], {}, {}, {}, set(), set()
    for op in ops:
        substitute([op], alias)
        rule = rules.RULES.get(op.prim)
        if rule is not None and not any(True for _ in op.operand_vars()) and len(op.outs) == 1:
            alias[op.outs[0]] = Const(evaluate_static(rule, op.args))
            continue
        facts = (shape_class, producer, floats, scalars)
        replacement = _identity(op, *facts) if op.attrs.get("backward") else None
        while isinstance(replacement, _Rewrite):
            for pre in replacement.before:  # new scalar ops the rewrite reads
                _record(pre, out, shape_class, producer, floats, scalars)
            op.args = tuple(replacement.args)
            op.prim = replacement.prim or op.prim
            rule = rules.RULES[op.prim]
            replacement = _identity(op, *facts)
        if replacement is not None and len(op.outs) == 1:
            alias[op.outs[0]] = replacement
            continue
        _record(op, out, shape_class, producer, floats, scalars)
    _rename_survivors(alias, keep)
    return out, alias


# Static primitives whose result is a Python scalar (a count), not a tuple.
_SCALAR_STATICS = frozenset({"reduced_size", "size", "ndim"})


def _record(op, out, shape_class, producer, floats, scalars):
    """Keep `op` and the facts about its outputs."""
    rule = rules.RULES[op.prim]
    _classify(op, rule, shape_class, producer, scalars)
    if _float_result(op, floats):
        floats.update(op.outs)
    if op.prim in _SCALAR_STATICS or (rule.elementwise and all(_is_scalar(a, scalars) for a in op.args)):
        scalars.update(op.outs)
    for o in op.outs:
        producer[o] = op
    out.append(op)


def _rename_survivors(alias, keep):
    """An output replaced by another value passes its (user-facing) name on."""
    for v in keep:
        target = alias.get(v)
        while isinstance(target, Var) and target in alias:
            target = alias[target]
        if isinstance(target, Var) and target.name.startswith("_"):
            target.name = v.name


def _is_const(a, value) -> bool:
    return isinstance(a, Const) and isinstance(a.value, numbers.Number) and not isinstance(
        a.value, bool) and a.value == value


def _is_scalar_const(a) -> bool:
    return isinstance(a, Const) and (isinstance(a.value, numbers.Number)
                                     or (isinstance(a.value, numpy.ndarray) and a.value.ndim == 0))


def _same_shape(a, b, shape_class) -> bool:
    return isinstance(a, Var) and isinstance(b, Var) and (
        a is b or shape_class.get(a, a) is shape_class.get(b, b))


def _is_scalar(a, scalars) -> bool:
    return (isinstance(a, Var) and a in scalars) or _is_scalar_const(a)


def _identity(op, shape_class, producer, floats, scalars):
    """The operand `op` reduces to, a _Rewrite of it, or None."""
    p, args = op.prim, op.args

    def neutral(a, value, other):  # `other (op) a` is `other`, dtype included
        return _is_const(a, value) and (isinstance(a.value, int) or other in floats)

    if p == "multiply":
        if neutral(args[1], 1, args[0]):
            return args[0]
        if neutral(args[0], 1, args[1]):
            return args[1]
    if p in ("add", "subtract") and neutral(args[1], 0, args[0]):
        return args[0]
    if p == "add" and neutral(args[0], 0, args[1]):
        return args[1]
    if p == "divide" and neutral(args[1], 1, args[0]) and args[0] in floats:
        return args[0]
    if p == "negative" and isinstance(args[0], Var):
        inner = producer.get(args[0])
        if inner is not None and inner.prim == "negative":
            return inner.args[0]
    if p == "shape" and isinstance(args[0], Var):
        # Ask an earlier value of the same shape class, so the array itself may die.
        rep = shape_class.get(args[0], args[0])
        if rep is not args[0]:
            return _Rewrite((rep,))
    if p == "power" and neutral(args[1], 1, args[0]):
        return args[0]
    if p == "expand_reduced" and (_is_none(args[2]) or _is_true(args[3])):
        return args[0]  # a full reduction's cotangent, or keepdims: already broadcastable
    if rules.RULES[p].elementwise:
        folded = _fold_broadcast_scalars(op, producer, scalars)
        if folded is not None:
            return folded
    if rules.RULES[p].elementwise and len(args) == 2:
        for i in (0, 1):
            scalar = _broadcast_scalar(args[i], args[1 - i], shape_class, producer, scalars)
            if scalar is not None:
                return _Rewrite((scalar, args[1]) if i == 0 else (args[0], scalar))
    if p in ("unbroadcast", "broadcast_to") and isinstance(args[1], Var):
        shape_op = producer.get(args[1])
        if shape_op is not None and shape_op.prim == "shape" and _same_shape(
                args[0], shape_op.args[0], shape_class):
            return args[0]
    return None


def _is_none(a) -> bool:
    return isinstance(a, Const) and a.value is None


def _is_true(a) -> bool:
    return isinstance(a, Const) and a.value is True


def _broadcast_scalar(a, other, shape_class, producer, scalars):
    """`c` when `a` is `broadcast_to(c, shape(b))` for a scalar c and `other` has
    b's shape: the elementwise op broadcasts c itself."""
    op = producer.get(a) if isinstance(a, Var) else None
    if op is None or op.prim != "broadcast_to" or not _is_scalar(op.args[0], scalars):
        return None
    shape_op = producer.get(op.args[1]) if isinstance(op.args[1], Var) else None
    if shape_op is not None and shape_op.prim == "shape" and _same_shape(
            other, shape_op.args[0], shape_class):
        return op.args[0]
    return None


def _fold_broadcast_scalars(op, producer, scalars):
    """`f(broadcast_to(c, s), k)` → `broadcast_to(f(c, k), s)` for scalars c, k.

    The scalar arithmetic is folded at compile time when c and k are constants, and
    otherwise done once on scalars (e.g. `1.0 / n` for a mean) instead of on arrays.
    """
    shape, values = None, []
    for a in op.args:
        inner = producer.get(a) if isinstance(a, Var) else None
        if inner is not None and inner.prim == "broadcast_to" and _is_scalar(inner.args[0], scalars):
            if shape is not None and inner.args[1] is not shape:
                return None
            shape = inner.args[1]
            values.append(inner.args[0])
        elif _is_scalar(a, scalars):
            values.append(a)
        else:
            return None
    if shape is None:
        return None
    if all(isinstance(v, Const) for v in values):
        return _Rewrite((Const(evaluate_static(rules.RULES[op.prim], values)), shape), prim="broadcast_to")
    scalar = Var(f"_{op.outs[0].name.lstrip('_')}_scalar")
    pre = Op(op.prim, tuple(values), (scalar,), op.loc, {"backward": True})
    return _Rewrite((scalar, shape), prim="broadcast_to", before=(pre,))


class _Rewrite:
    """Keep the op, with new operands (and maybe a new primitive), and simplify it again."""

    def __init__(self, args, prim=None, before=()):
        self.args, self.prim, self.before = args, prim, before


def shape_classes(ops: list) -> dict:
    """Var -> representative Var of its shape class (Note [Shape classes])."""
    shape_class, producer = {}, {}
    for op in ops:
        _classify(op, rules.RULES.get(op.prim), shape_class, producer)
        for o in op.outs:
            producer[o] = op
    return shape_class


def _classify(op, rule, shape_class, producer, scalars=frozenset()):
    """Record the shape class of op's output (Note [Shape classes])."""
    if len(op.outs) != 1 or rule is None:
        return
    out = op.outs[0]
    if rule.elementwise:
        # Scalars broadcast without changing the shape of the others.
        arrays = [a for a in op.args if not _is_scalar(a, scalars)]
        classes = {shape_class.get(a, a) for a in arrays if isinstance(a, Var)}
        if len(classes) == 1 and all(isinstance(a, Var) for a in arrays):
            shape_class[out] = classes.pop()
    elif op.prim in ("unbroadcast", "broadcast_to") and isinstance(op.args[1], Var):
        shape_op = producer.get(op.args[1])
        if shape_op is not None and shape_op.prim == "shape" and isinstance(shape_op.args[0], Var):
            shape_class[out] = shape_class.get(shape_op.args[0], shape_op.args[0])
