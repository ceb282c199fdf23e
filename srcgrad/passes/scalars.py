"""Python floats stay Python floats: `math.sin(x)`, not `xp.sin(x)`, on scalars.

Note [Scalar code]
~~~~~~~~~~~~~~~~~~
NumPy spends about a microsecond on any call, even on one float, and returns a
NumPy scalar, so the next operation pays again; `math.sin` on a float takes a
twentieth of that. A variant compiled for Python-float (or int) arguments (their
class is part of its guard: Note [Shape specialisation]) knows which values are
plain Python numbers: those arguments, numeric literals, and the results of
arithmetic operators and `math`-equivalent functions applied to nothing else.
Those functions are written as `math.<f>`, so every later value stays a Python
float too; a loop's carried value is a Python number when it starts as one and
the body keeps it one.

At singular points Python raises where NumPy returns inf or nan (`1.0 / 0.0`,
`0.0 ** -0.5`, `math.log(0.0)`, `math.sqrt(-1.0)`), and a variant must compute what
the array variant computes. So a function with a restricted domain stays `xp.<f>`,
and a division or power that may be singular (a divisor or exponent that is not a
safe constant: derivatives read `x ** (y - 1)`) first makes its Python-number
operand a NumPy value (`numpy_number`, `xp.asarray`); what follows is NumPy's.
"""

from __future__ import annotations

import numbers

import numpy

from srcgrad.ir.core import Const, Op, Var, substitute

# NumPy primitive -> the math function that computes it on one float
MATH = {"sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos",
        "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh",
        "arccosh": "acosh", "arctanh": "atanh", "exp": "exp", "expm1": "expm1", "log": "log",
        "log1p": "log1p", "log2": "log2", "log10": "log10", "sqrt": "sqrt", "arctan2": "atan2",
        "hypot": "hypot"}
# Functions whose math version raises inside NumPy's domain (log(0) is -inf, sqrt(-1) nan)
# or overflows where NumPy returns inf: computed by NumPy.
RESTRICTED = frozenset({"sqrt", "log", "log1p", "log2", "log10", "arcsin", "arccos", "arccosh",
                        "arctanh", "exp", "expm1", "sinh", "cosh"})
# Primitives that Python's own operators compute on floats
OPERATORS = frozenset({"add", "subtract", "multiply", "divide", "negative", "positive", "power"})


def python_scalars(ops: list, inputs: list, args: tuple) -> set:
    """Mark ops that compute on Python numbers (attrs["math"]); the set of such Vars.

    An `np.float64` argument (a subclass of float holding the same double) is made a
    Python float first (`k_1 = float(k)`, attrs["python_float"]): arithmetic on NumPy
    scalars costs a NumPy call each, and returns NumPy scalars. A `range` loop's
    index is a Python int."""
    floats = {v: Var("_" + v.name) for v, a in zip(inputs, args) if type(a) is numpy.float64}
    substitute(ops, floats)
    ops[:0] = [Op("positive", (v,), (f,), None, {"python_float": True}) for v, f in floats.items()]
    known = {v for v, a in zip(inputs, args) if isinstance(a, (float, int)) and not isinstance(a, bool)}
    known.update(floats.values())
    _block(ops, known, {_NUMPY: set(floats.values())})
    no_methods_on_numbers(ops, known)
    return known


def no_methods_on_numbers(ops, known) -> None:
    """`x.clip(a, b)` was chosen where the probe saw an ndarray; where x is now a Python
    number (`zeros_like` of an np.float64 argument is `0.0`) the call is `xp.clip(x, a, b)`
    (fuzz seed 81498: 'float' object has no attribute 'clip')."""
    for op in ops:
        if "as_method" in op.attrs and op.args and isinstance(op.args[0], Var) and op.args[0] in known:
            del op.attrs["as_method"]
        for block in op.blocks:
            no_methods_on_numbers(block.ops, known)


def _is_scalar(a, known) -> bool:
    if isinstance(a, Var):
        return a in known
    return isinstance(a, Const) and isinstance(a.value, numbers.Real) and not isinstance(a.value, bool)


def _may_be_singular(op) -> bool:
    """A division by, or a power to, something that may make Python raise."""
    if op.prim not in ("divide", "power") or len(op.args) != 2:
        return False
    y = op.args[1]
    if not isinstance(y, Const) or isinstance(y.value, bool) or not isinstance(y.value, numbers.Real):
        return True
    if op.prim == "divide":
        return y.value == 0
    return not (y.value >= 0 and float(y.value).is_integer())  # x ** 2: fine for any float x


def _as_numpy(op, known):
    """When the first operand of `op` is a Python number: the op making it a NumPy value
    (which `op` then reads), else None. The other operand may be a Python number this
    pass cannot prove one (`y - 1 + (y == 0)`: a bool is not marked), and Python raises
    on `0.0 ** -1.0` whatever proved it (fuzz-audit: np.float64 arguments at x ** y's
    pole raised ZeroDivisionError where the user's function returns inf)."""
    if not _is_scalar(op.args[0], known):
        return None
    return _first_as_numpy(op)


def _first_as_numpy(op):
    """The op making `op`'s first operand a NumPy value again (which `op` then reads)."""
    a = op.args[0]
    out = Var("_number", a.kind if isinstance(a, Var) else "array")
    op.args = (out,) + op.args[1:]
    return Op("numpy_number", (a,), (out,), op.loc,
              attrs={k: v for k, v in op.attrs.items() if k == "backward"})


# Rules rendered as subscripts or attributes of their first operand
_SYNTAX_ON_ARRAYS = frozenset({"getitem", "T"})

_INDICES = "loop indices"  # a key of `tapes`: the range indices (Python ints)
_NUMPY = "numpy scalars"  # a key of `tapes`: values that are np.float64 in the user's program


def _block(ops, known, tapes):
    """`tapes`: tape Var -> which pushed entries are Python numbers (popped ones are)."""
    out = []
    indices = tapes.get(_INDICES, ())
    for op in ops:
        # `2 ** i`, `1 / i` on a loop index: Python's int arithmetic, as the user's loop does
        by_index = any(isinstance(a, Var) and a in indices for a in op.args)
        if not op.blocks and _may_be_singular(op) and not by_index:
            convert = _as_numpy(op, known)
            if convert is not None:
                out.append(convert)
        elif op.prim in _SYNTAX_ON_ARRAYS and op.args and isinstance(op.args[0], Var) \
                and op.args[0] in tapes.get(_NUMPY, ()):
            # `x[()]`, `x.T` of an np.float64 argument (or arithmetic on one) made a Python
            # float: NumPy's scalar has them, a float does not (F3: "'float' object is not
            # subscriptable"); on a Python float argument Python raises, as it should
            out.append(_first_as_numpy(op))
        out.append(op)
        _mark(op, known, tapes)
    ops[:] = out


def _mark(op, known, tapes):
    if op.blocks:
        _control(op, known, tapes)
        return
    if op.prim == "tape_push":
        tapes[op.args[0]] = [_is_scalar(v, known) for v in op.args[1].items]
        return
    if op.prim == "tape_pop":
        flags = tapes.get(op.args[0], ())
        known.update(o for o, flag in zip(op.outs, flags) if flag)
        return
    if not op.args or len(op.outs) != 1 or not _is_scalar(op.args[0], known) or (
            op.prim in MATH or op.prim in OPERATORS) and not all(_is_scalar(a, known) for a in op.args):
        return
    numpy_scalars = tapes.get(_NUMPY, set())
    if any(isinstance(a, Var) and a in numpy_scalars for a in op.args) and (
            op.prim in MATH and op.prim not in RESTRICTED or op.prim in OPERATORS):
        numpy_scalars.add(op.outs[0])  # np.float64 arithmetic gives np.float64 in NumPy
    if op.prim in MATH and op.prim not in RESTRICTED:
        op.attrs["math"] = MATH[op.prim]
        known.add(op.outs[0])
    elif op.prim in OPERATORS and not _may_be_singular(op):
        known.add(op.outs[0])
    elif op.prim == "zeros_like" and len(op.args) >= 1:
        op.attrs["python_value"] = Const(0.0)
        known.add(op.outs[0])
    elif op.prim == "ensure_scalar" or (op.prim in ("unbroadcast", "broadcast_to")
                                        and isinstance(op.args[1], Const) and op.args[1].value == ()):
        op.attrs["python_value"] = op.args[0]  # a Python number is 0-d already
        known.add(op.outs[0])


def _control(op, known, tapes):
    """A branch or loop: its results are Python numbers when every block keeps them so."""
    if op.prim == "cond":
        for block in op.blocks:
            _block(block.ops, known, tapes)
        for i, out in enumerate(op.outs):
            if all(_is_scalar(b.results[i], known) for b in op.blocks):
                known.add(out)
        return
    block = op.blocks[0]
    inits = list(op.args[-1].items)
    first = 1  # params[0]: the index (for) or the running flag (while)
    params = block.params[first:]
    results = block.results[first:] if op.prim == "while_loop" else block.results
    assumed = {p for p, init in zip(params, inits) if _is_scalar(init, known)}
    if op.prim == "for_range":
        known.add(block.params[0])  # range(...) yields Python ints
        tapes.setdefault(_INDICES, set()).add(block.params[0])
    while True:  # assume, check the body keeps them Python numbers, retract, repeat
        trial = set(known) | assumed
        for o in _all_ops(block.ops):
            o.attrs.pop("math", None)
            o.attrs.pop("python_value", None)
        _block(block.ops, trial, tapes)
        kept = {p for p, r in zip(params, results) if p in assumed and _is_scalar(r, trial)}
        if kept == assumed:
            known.update(trial)
            known.update(out for out, p in zip(op.outs, params) if p in assumed)
            return
        assumed = kept


def _all_ops(ops):
    for op in ops:
        yield op
        for block in op.blocks:
            yield from _all_ops(block.ops)
