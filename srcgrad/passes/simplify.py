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
from srcgrad.ir.core import FACTORY, Const, EqFields, Op, Var, substitute, uses
from srcgrad.ir.renders import evaluate_static

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


class _Facts(EqFields):
    """What simplify knows about the values defined so far (a `@dataclass` written out:
    srcgrad.ir.core.Loc says why)."""

    __slots__ = __match_args__ = ("shape_class", "producer", "floats", "scalars", "shapes", "uses")

    def __init__(self, shape_class: dict = FACTORY, producer: dict = FACTORY, floats: set = FACTORY,
                 scalars: set = FACTORY, shapes: dict = FACTORY, uses: dict = FACTORY):
        # Var -> representative (Note [Shape classes])
        self.shape_class = {} if shape_class is FACTORY else shape_class
        self.producer = {} if producer is FACTORY else producer  # Var -> the op defining it
        self.floats = set() if floats is FACTORY else floats  # Vars known to be floating point
        self.scalars = set() if scalars is FACTORY else scalars  # Vars known to be Python/0-d scalars
        # Var -> concrete shape (Note [Shape specialisation])
        self.shapes = {} if shapes is FACTORY else shapes
        self.uses = {} if uses is FACTORY else uses  # Var -> reads in the input ops (an upper bound)


def simplify(ops: list, keep: list, shapes: dict | None = None, alike: dict | None = None,
             values: dict | None = None, floats=()) -> tuple:
    """(simplified ops, {removed var: the operand standing for it}).

    `keep` lists Vars whose names are user-facing (outputs, gradients): when one is
    replaced by a temporary, the temporary takes its name. `shapes` (from
    srcgrad.passes.shapes) holds concrete shapes when compiling for known arguments;
    `alike` maps Vars to values of the same shape (Note [Shape classes]); `floats`,
    Vars the probe found floating point (a variant's arguments: `1.0 * x` is `x`).
    """
    out, alias, facts = [], {}, _Facts(shapes=dict(shapes or {}), uses=uses(ops), floats=set(floats))
    known_values = values or {}
    # `alike`: values known to share a shape with another, defined later (a loop's
    # carried cotangent and the value it is the cotangent of).
    pending_alike = dict(alike or {})
    for op in ops:
        substitute([op], alias)
        rule = rules.RULES.get(op.prim)
        if known_values:  # shape-derived values of this variant (Note [Shape specialisation])
            op.args = tuple(Const(known_values[a]) if isinstance(a, Var) and a in known_values else a
                            for a in op.args)
        folded = _fold(op, rule)
        if folded is not None:
            alias[op.outs[0]] = folded
            continue
        replacement = _rewrite(op, facts)
        while isinstance(replacement, _Rewrite):
            for pre in replacement.before:  # new ops the rewrite reads, in op's section:
                # a gradient computed inside the forward (a nested sg.grad) has forward
                # matmul_bars and sums too (fuzz seed 1902485: a backward-marked `x.T`
                # read by the forward, which the program writes after it: UnboundLocalError)
                pre.attrs.pop("backward", None)
                if op.attrs.get("backward"):
                    pre.attrs["backward"] = True
                _record(pre, out, facts)
            op.args = tuple(replacement.args)
            op.prim = replacement.prim or op.prim
            rule = rules.RULES[op.prim]
            replacement = _fold(op, rule)
            if replacement is not None:
                break
            replacement = _rewrite(op, facts)
        if replacement is not None and len(op.outs) == 1:
            alias[op.outs[0]] = replacement
            continue
        _record(op, out, facts)
        for v, like in list(pending_alike.items()):
            if like in facts.shape_class or any(like is o for o in op.outs):
                facts.shape_class[v] = facts.shape_class.get(like, like)
                del pending_alike[v]
    _rename_survivors(alias, keep)
    return out, alias


def _fold(op, rule):
    """The constant an op on constants computes, when it is a literal (never an array:
    an array constant would be baked into the module and kept alive by it)."""
    if rule is None or len(op.outs) != 1 or rule.control or rule.effect or any(
            True for _ in op.operand_vars()):
        return None
    value = evaluate_static(rule, op.args)
    if callable(rule.nout):  # a one-output `split`/`unpack`: its value is a 1-sequence
        value = value[0]
    if isinstance(value, numpy.ndarray) and value.ndim > 0:
        return None
    return Const(value)


def _rewrite(op, facts):
    """Shape-specialised rewrites apply to every op; algebraic ones to derivative code."""
    replacement = _specialize(op, facts) if facts.shapes else None
    if replacement is None and op.attrs.get("backward"):
        replacement = _identity(op, facts)
    return replacement


# Static primitives whose result is a Python scalar (a count), not a tuple.
_SCALAR_STATICS = frozenset({"reduced_size", "size", "ndim"})


def _record(op, out, facts):
    """Keep `op` and the facts about its outputs."""
    rule = rules.RULES[op.prim]
    _classify(op, rule, facts.shape_class, facts.producer, facts.scalars)
    if _float_result(op, facts.floats):
        facts.floats.update(op.outs)
    if op.prim in _SCALAR_STATICS or (rule.elementwise and all(
            _is_scalar(a, facts.scalars) for a in op.args)):
        facts.scalars.update(op.outs)
    for o in op.outs:
        facts.producer[o] = op
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


def _identity(op, facts):
    """The operand `op` reduces to, a _Rewrite of it, or None."""
    p, args = op.prim, op.args
    shape_class, producer, floats, scalars = facts.shape_class, facts.producer, facts.floats, facts.scalars

    def neutral(a, value, other):  # `other (op) a` is `other`, dtype included
        return _is_const(a, value) and (isinstance(a.value, int) or (
            isinstance(other, Var) and other in floats))  # (a constant array: unhashable)

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
    factored = _common_factor(op, facts)
    if factored is not None:
        return factored
    if p in ("add", "subtract"):  # a + (-b) -> a - b, a - (-b) -> a + b, (-a) + b -> b - a
        negated = [isinstance(a, Var) and producer.get(a) is not None
                   and producer[a].prim == "negative" for a in args]
        if negated[1]:
            inner = producer[args[1]].args[0]
            return _Rewrite((args[0], inner), prim="subtract" if p == "add" else "add")
        if negated[0] and p == "add":
            return _Rewrite((args[1], producer[args[0]].args[0]), prim="subtract")
    if p == "sum" and isinstance(args[0], Var) and producer.get(args[0]) is not None \
            and producer[args[0]].prim == "negative":  # sum(-a) -> -sum(a): negate the small one
        partial = Var(f"_{op.outs[0].name.lstrip('_')}_sum")
        pre = Op("sum", (producer[args[0]].args[0], *args[1:]), (partial,), op.loc)
        return _Rewrite((partial,), prim="negative", before=(pre,))
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
            scalar = _broadcast_scalar(args[i], args[1 - i], facts)
            if scalar is not None:
                return _Rewrite((scalar, args[1]) if i == 0 else (args[0], scalar))
    if p in ("unbroadcast", "broadcast_to") and isinstance(args[1], Var):
        shape_op = producer.get(args[1])
        if shape_op is not None and shape_op.prim == "shape" and _same_shape(
                args[0], shape_op.args[0], shape_class):
            return args[0]
    return None


def _specialize(op, facts):
    """Rewrites valid for the argument shapes a variant is compiled for.

    Note [Shape specialisation] in srcgrad.passes.shapes: every Var in
    `facts.shapes` has that shape on every call this variant serves.
    """
    p, args, shapes = op.prim, op.args, facts.shapes
    if p == "broadcast_to" and _is_scalar_const(args[0]) and isinstance(args[1], Const) \
            and args[1].value == () and not isinstance(args[0].value, numpy.ndarray):
        return args[0]  # a scalar "broadcast" to 0-d: the scalar itself
    if p == "shape" and isinstance(args[0], Var) and args[0] in shapes:
        return Const(shapes[args[0]])
    if p in ("reshape", "broadcast_to") and isinstance(args[1], Const):
        inner = facts.producer.get(args[0]) if isinstance(args[0], Var) else None
        if inner is not None and inner.prim == "broadcast_to" and _is_scalar(inner.args[0], facts.scalars):
            return _Rewrite((inner.args[0], args[1]), prim="broadcast_to")  # still one scalar
    if rules.RULES[p].elementwise and len(args) == 2:
        for i in (0, 1):  # f(broadcast_to(a, s), b) with b of shape s is f(a, b)
            inner = facts.producer.get(args[i]) if isinstance(args[i], Var) else None
            if inner is not None and inner.prim == "broadcast_to" and isinstance(inner.args[1], Const) \
                    and isinstance(args[1 - i], Var) and shapes.get(args[1 - i]) == inner.args[1].value:
                return _Rewrite((inner.args[0], args[1]) if i == 0 else (args[0], inner.args[0]))
    if p == "ensure_scalar" and isinstance(args[0], Var) and shapes.get(args[0]) == ():
        return args[0]  # this variant's output is 0-d: nothing left to check
    sunk = _sink_broadcast(op, facts)
    if sunk is not None:
        return sunk
    statics = args[2:] if p == "matmul_bar" else args[1:]
    if p not in ("unbroadcast", "broadcast_to", "expand_reduced", "matmul_bar") or not all(
            isinstance(a, Const) for a in statics):
        return None
    known = shapes.get(args[0]) if isinstance(args[0], Var) else numpy.shape(args[0].value)
    if p in ("unbroadcast", "broadcast_to") and known == args[1].value:
        return args[0]
    if p == "unbroadcast" and known is not None:
        return _sum_to(op, known, args[1].value, facts)
    if p == "expand_reduced":
        shape, axis, keepdims = (a.value for a in args[1:])
        if keepdims or axis is None:
            return args[0]  # already broadcastable against `shape`
        target = tuple(1 if i in _normalize_axes(axis, len(shape)) else n for i, n in enumerate(shape))
        return args[0] if known == target else _Rewrite((args[0], Const(target)), prim="reshape")
    if p == "matmul_bar":
        # A 2-D other operand, as a person writes it: g @ y.T and x.T @ g (g 1-D or 2-D).
        other, target, which = args[1], args[2].value, args[3].value
        other_shape = shapes.get(other) if isinstance(other, Var) else None
        if known is None or other_shape is None or len(other_shape) != 2 or len(known) > 2:
            return None
        t_shape = other_shape[::-1]
        product = (known[:-1] + t_shape[1:]) if which == 0 else (t_shape[:-1] + known[1:])
        inner = (known[-1], t_shape[0]) if which == 0 else (t_shape[-1], known[0])
        if product != tuple(target) or inner[0] != inner[1]:
            return None
        t = Var(f"_{other.name.lstrip('_')}_T")
        facts.shapes[t] = t_shape
        pre = Op("T", (other,), (t,), op.loc)
        return _Rewrite((args[0], t) if which == 0 else (t, args[0]), prim="matmul", before=(pre,))
    return None


def _sink_broadcast(op, facts):
    """f(broadcast_to(a, s), k...) with scalar k is broadcast_to(f(a, k...), s).

    A mean's or a sum's cotangent is a scalar broadcast to the input's shape and then
    scaled (`/ n`, `-`): sinking the broadcast past those scalar steps lets the rule
    above drop it where it meets an operand of shape s, and leaves the unused
    broadcasts to dce (np.broadcast_to costs microseconds, which small variants feel).
    """
    rule = rules.RULES[op.prim]
    if not rule.elementwise or len(op.outs) != 1:
        return None
    spread = [i for i, a in enumerate(op.args) if isinstance(a, Var) and _broadcast_of(a, facts)]
    if len(spread) != 1 or not all(
            i in spread or _is_scalar(a, facts.scalars) or _zero_d(a, facts)
            for i, a in enumerate(op.args)):
        return None
    i = spread[0]
    inner = facts.producer[op.args[i]]
    t = Var(f"_{op.outs[0].name.lstrip('_')}_0d")
    before = Op(op.prim, op.args[:i] + (inner.args[0],) + op.args[i + 1:], (t,), op.loc, dict(op.attrs))
    if _zero_d(inner.args[0], facts):
        facts.shapes[t] = ()
    return _Rewrite((t, inner.args[1]), prim="broadcast_to", before=(before,))


def _broadcast_of(v, facts) -> bool:
    """Whether `v` is a scalar broadcast to a constant shape."""
    inner = facts.producer.get(v)
    # A constant scalar (sg.grad's seed 1.0) is left to the algebra of `_identity`, which
    # folds it into one factor (`-0.015625 * (y - e)`); a cotangent argument (sg.vjp's) is not.
    return (inner is not None and inner.prim == "broadcast_to" and isinstance(inner.args[1], Const)
            and isinstance(inner.args[0], Var)
            and (inner.args[0] in facts.scalars or _zero_d(inner.args[0], facts)))


def _zero_d(a, facts) -> bool:
    return isinstance(a, Var) and facts.shapes.get(a) == ()


def _sum_to(op, known, target, facts):
    """`unbroadcast` from shape `known` to `target` as a plain NumPy sum (and reshape)."""
    lead = len(known) - len(target)
    if lead < 0 or any(m == 1 and n != 1 for m, n in zip(known[lead:], target)):
        return _Rewrite((op.args[0], Const(tuple(target))), prim="broadcast_to")  # smaller: up
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(target)
                                      if n == 1 and known[lead + i] != 1)
    if any(m != n and m != 1 and n != 1 for m, n in zip(known[lead:], target)):
        return None
    summed = tuple(n for i, n in enumerate(known) if i not in axes)
    axis = Const(axes if len(axes) != 1 else axes[0])
    if summed == tuple(target):
        return _Rewrite((op.args[0], axis, Const(False)), prim="sum")
    if lead == 0:  # only size-1 axes of the target: keep them
        return _Rewrite((op.args[0], axis, Const(True)), prim="sum")
    sum_args = (op.args[0], axis, Const(False))
    partial = Var(f"_{op.outs[0].name.lstrip('_')}_sum")
    facts.shapes[partial] = summed
    pre = Op("sum", sum_args, (partial,), op.loc)
    return _Rewrite((partial, Const(tuple(target))), prim="reshape", before=(pre,))


def _normalize_axes(axis, ndim):
    axes = axis if isinstance(axis, tuple) else (axis,)
    return {a % ndim for a in axes}


def _scaled(v, facts):
    """(k, a) when `v` is `k * a` for a scalar constant k, read nowhere else."""
    op = facts.producer.get(v) if isinstance(v, Var) else None
    if op is None or op.prim != "multiply" or facts.uses.get(v, 0) != 1:
        return None
    k, a = op.args
    if _is_scalar_const(a):
        k, a = a, k
    return (k.value, a) if _is_scalar_const(k) and not isinstance(k.value, numpy.ndarray) else None


def _common_factor(op, facts):
    """k*a + k*b -> k*(a + b), k*a - k*b -> k*(a - b), k*a + (-k)*b -> k*(a - b):
    one full-size multiply fewer (derivative code is full of such scaled terms)."""
    if op.prim not in ("add", "subtract"):
        return None
    left, right = _scaled(op.args[0], facts), _scaled(op.args[1], facts)
    if left is None or right is None or left[0] == 0:
        return None
    (k, a), (m, b) = left, right
    if m == k:
        inner = op.prim
    elif m == -k:
        inner = "subtract" if op.prim == "add" else "add"
    else:
        return None
    combined = Var(f"_{op.outs[0].name.lstrip('_')}_terms")
    pre = Op(inner, (a, b), (combined,), op.loc)
    return _Rewrite((Const(k), combined), prim="multiply", before=(pre,))


def _is_none(a) -> bool:
    return isinstance(a, Const) and a.value is None


def _is_true(a) -> bool:
    return isinstance(a, Const) and a.value is True


def _broadcast_scalar(a, other, facts):
    """`c` when `a` is `broadcast_to(c, shape(b))` for a scalar c and `other` has
    b's shape: the elementwise op broadcasts c itself."""
    shape_class, producer = facts.shape_class, facts.producer
    op = producer.get(a) if isinstance(a, Var) else None
    if op is None or op.prim != "broadcast_to" or not _is_scalar(op.args[0], facts.scalars):
        return None
    if isinstance(op.args[1], Const):  # a specialised shape
        # (a constant array operand has no entry: its shape is its value's)
        other_shape = numpy.shape(other.value) if isinstance(other, Const) \
            else facts.shapes.get(other)
        return op.args[0] if other_shape == op.args[1].value else None
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
    scalar = Var(_scalar_name(op.prim, values))
    pre = Op(op.prim, tuple(values), (scalar,), op.loc)
    return _Rewrite((scalar, shape), prim="broadcast_to", before=(pre,))


def _scalar_name(prim, values) -> str:
    """A name that says what a scalar factored out of an array op is: `1.0 / n` is the
    reciprocal of n (a mean's 1/N), anything else is named after its operation."""
    numerator = values[0]
    if prim == "divide" and isinstance(numerator, Const) and numerator.value == 1 \
            and isinstance(values[1], Var):
        return "_inv" + "_" + values[1].name.lstrip("_")
    return f"_{prim}"


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
