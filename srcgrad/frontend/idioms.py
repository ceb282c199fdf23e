"""NumPy and Python idioms the tracer lowers onto table rows.

Note [Lowered idioms]
~~~~~~~~~~~~~~~~~~~~~
Some ordinary calls are not one primitive, but a few rows in a row:

* `np.hstack/vstack/dstack/column_stack/stack/concatenate` of one array (not a sequence) is refused
  with a rewrite: the rows take a sequence, whose VJP is one cotangent per element.
* `np.array(seq)` / `np.asarray(seq)` of a (nested) list holding traced values is a
  `stack` per nesting level; of a traced array, `asarray` is the array itself (NumPy
  returns the same object, so writes through either name are one write) and `array`
  a `copy`; a `dtype=` is an `astype`.
* `np.add.at(x, idx, v)` / `np.subtract.at` write `x +/- scatter(v)` into x's storage:
  `scatter_index` accumulates repeated indices, as `ufunc.at` does.
* A call of a pure NumPy or `math` function whose arguments are all constants runs at
  compile time (`np.linspace(0, 1, 5)`, `math.factorial(3)`); numpy.random is never
  folded (each call must draw anew).
* `getattr(obj, "name")` of a constant object and name is that attribute (`getattr(np,
  "exp")(x)` calls the `exp` row).
* `float(i)` / `int(i)` of a loop index or a shape (a value of kind "static") is a
  row that runs with the function; of a traced array it stays refused, since the
  number would lose its derivative. `dict(a=a, b=b)` is a native dict.

Each lowering returns `NOT_LOWERED` when the call is not its idiom, and the tracer goes
on as before.
"""

from __future__ import annotations

import functools
import math

import numpy

from srcgrad import rules
from srcgrad.frontend import numpy_forms
from srcgrad.frontend.numpy_forms import _stack_nested, _static
from srcgrad.frontend.scope import TraceObject
from srcgrad.ir.core import Const, Var
from srcgrad.rules import compositions

NOT_LOWERED = numpy_forms.NOT_LOWERED

_STACKING = {numpy.hstack: "hstack", numpy.vstack: "vstack", numpy.dstack: "dstack",
             numpy.column_stack: "column_stack", numpy.stack: "stack",
             numpy.concatenate: "concatenate"}
# NumPy call forms with traced arguments lowered (or refused) by srcgrad.frontend.numpy_forms
_FORMS = {numpy.einsum: "einsum", numpy.linalg.norm: "norm", numpy.average: "average",
          numpy.block: "block", numpy.linalg.svd: "svd"}
_SCATTER_UFUNCS = {numpy.add: "add", numpy.subtract: "subtract"}
# `np.add.reduce(x, axis)` is the reduction row's (issue 28's boundary fuzzing)
_REDUCE_UFUNCS = {numpy.add: "sum", numpy.multiply: "prod", numpy.maximum: "max",
                  numpy.minimum: "min"}
# Methods of a constant array that return a new value (never those that write into it).
_PURE_METHODS = {"reshape", "sum", "mean", "prod", "max", "min", "transpose", "ravel", "flatten",
                 "copy", "astype", "cumsum", "cumprod", "std", "var", "dot", "round", "clip",
                 "squeeze", "swapaxes", "diagonal", "trace", "all", "any", "argmax", "argmin",
                 "take", "repeat", "tolist", "item", "conj", "conjugate", "nonzero", "argsort"}
# NumPy functions that write into an argument: never run on a constant at compile time.
_WRITERS = {numpy.copyto, numpy.put, numpy.place, numpy.putmask, numpy.fill_diagonal,
            numpy.put_along_axis}


def lower_call(tracer, callee, args, kwargs, node):
    """The value of `callee(*args, **kwargs)` built from rows, or NOT_LOWERED."""
    try:
        stacking = _STACKING.get(callee)
        array_like = callee in (numpy.array, numpy.asarray, numpy.asanyarray)
    except TypeError:  # an unhashable callee
        return NOT_LOWERED
    if stacking is not None:
        return _stacking(tracer, stacking, args, node)
    if callee is compositions.refuse:  # a composition's unsupported form (Note [Compositions])
        tracer.fail(node, *(a.value for a in args))
    if array_like:
        return _array(tracer, callee, args, kwargs, node)
    if callee is getattr and not kwargs and 2 <= len(args) <= 3 and all(
            isinstance(a, Const) for a in args):  # `getattr(np, "exp")`: a constant name
        return Const(getattr(*(a.value for a in args)))
    if callee is functools.partial and args and not kwargs.keys() & {"func"}:
        return _partial(args, kwargs)
    if getattr(callee, "__name__", None) == "at" and \
            getattr(callee, "__self__", None) in _SCATTER_UFUNCS:
        return _ufunc_at(tracer, _SCATTER_UFUNCS[callee.__self__], args, kwargs, node)
    if getattr(callee, "__name__", None) == "reduce" and \
            getattr(callee, "__self__", None) in _REDUCE_UFUNCS:
        return _ufunc_reduce(tracer, _REDUCE_UFUNCS[callee.__self__], args, kwargs, node)
    form = _FORMS.get(callee) if _hashable(callee) else None
    if form is not None:  # Note [No silent constants] in srcgrad.passes.activity
        lowered = getattr(numpy_forms, form)(tracer, args, kwargs, node)
        if lowered is not NOT_LOWERED:
            return lowered
    return _fold_constant(callee, args, kwargs, tracer)


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def lower_builtin(tracer, fn, args, kwargs, node):
    """`float(i)`, `int(i)` of a static-kind value; `dict(a=a)`; else NOT_LOWERED."""
    if fn in (float, int) and len(args) == 1 and not kwargs and isinstance(args[0], Var) \
            and args[0].kind == "static":
        name = "py_float" if fn is float else "py_int"
        return tracer.apply(rules.RULES[name], args, {}, node)
    if fn is dict and not args:
        return dict(kwargs)
    if fn is dict and len(args) == 1 and isinstance(args[0], dict):
        return {**args[0], **kwargs}
    return NOT_LOWERED


# ---------------------------------------------------------------------- stacking
def _stacking(tracer, name, args, node):
    """The stacking rows take a sequence; `np.vstack(x)` of one array is its rows."""
    if args and isinstance(args[0], Var):  # (np.stack(x): a KeyError, not this, before)
        tracer.fail(node, f"`np.{name}` of an array (a sequence of its rows)",
                    f"pass a list: `np.{name}([x[0], x[1]])`")
    return NOT_LOWERED


# ---------------------------------------------------------------------- np.array
def _array(tracer, callee, args, kwargs, node):
    if not args or set(kwargs) - {"dtype"} or len(args) > 2:
        return NOT_LOWERED
    obj = args[0]
    dtype = args[1] if len(args) == 2 else kwargs.get("dtype", Const(None))
    if not isinstance(dtype, Const):
        tracer.fail(node, "a dtype that depends on the arguments",
                    "name the dtype (`dtype=np.float64`): compiled code computes in float64")
    static = _static(obj)
    if static is not NOT_LOWERED:
        return Const(callee(static, dtype=dtype.value))
    if isinstance(obj, (tuple, list)):
        value = _stack_nested(tracer, obj, node)
    elif isinstance(obj, Var):
        if dtype.value is None:
            return obj if callee is not numpy.array else \
                tracer.apply(rules.RULES["copy"], [obj], {}, node)
        value = obj
    else:
        return NOT_LOWERED
    if dtype.value is not None:
        value = tracer.apply(rules.RULES["astype"], [value, dtype], {}, node)
    return value


# ---------------------------------------------------------------------- ufunc.reduce
def _ufunc_reduce(tracer, name, args, kwargs, node):
    """`ufunc.reduce(array, axis=0, dtype=None, out=None, keepdims=False)`: the row `name`
    over `axis`, whose default is 0 (not the reduction functions' None)."""
    import inspect

    P = inspect.Parameter
    sig = inspect.Signature([P("array", P.POSITIONAL_OR_KEYWORD)] + [
        P(k, P.POSITIONAL_OR_KEYWORD, default=d) for k, d in
        (("axis", 0), ("dtype", None), ("out", None), ("keepdims", False))])
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as err:
        tracer.fail(node, f"`np.{name}`'s ufunc.reduce call ({err})",
                    "write `np.add.reduce(x, axis=0, keepdims=False)` (any ufunc with a rule)")
    bound.apply_defaults()
    a = bound.arguments
    if any(not (a[k] is None or isinstance(a[k], Const) and a[k].value is None)
           for k in ("dtype", "out")):
        tracer.fail(node, "ufunc.reduce with `dtype` or `out`", "leave them out")
    return tracer.apply(rules.RULES[name], [a["array"]], {"axis": a["axis"], "keepdims": a["keepdims"]},
                        node)


# ---------------------------------------------------------------------- ufunc.at
def _ufunc_at(tracer, name, args, kwargs, node):
    if kwargs or len(args) != 3:
        tracer.fail(node, f"`np.{name}.at` without exactly (a, indices, b)",
                    f"write `np.{name}.at(a, indices, b)`")
    # `b` may be a view of `a`: NumPy's ufunc.at copies an operand that overlaps `a`
    # before it writes (PyArray_MapIterArrayCopyIfOverlap), so `b` is read as it was
    # before the call, as compiled code reads it (checked against NumPy for slices,
    # integer lists, masks, reversed and transposed views of `a`)
    target, index, v = args
    if isinstance(index, list):  # a list of integers is one index array, as in NumPy
        static = _static(index)
        index = Const(numpy.asarray(static)) if static is not NOT_LOWERED \
            else _stack_nested(tracer, index, node)
    elif isinstance(index, tuple):  # one index per axis
        index = tuple(index)
    picked = tracer.apply(rules.RULES["getitem"], [target, index], {}, node)
    shape = tracer.apply(rules.RULES["shape"], [target], {}, node)
    spread = tracer.apply(rules.RULES["broadcast_to"],
                          [v, tracer.apply(rules.RULES["shape"], [picked], {}, node)], {}, node)
    added = tracer.apply(rules.RULES["scatter_index"], [spread, shape, index], {}, node)
    result = tracer.apply(rules.RULES[name], [target, added], {}, node)
    tracer.mutation.write_out(target, result, node)
    return Const(None)


# ---------------------------------------------------------------------- constants
def _fold_constant(callee, args, kwargs, tracer=None):
    """Run a pure NumPy/`math` function on constant arguments at compile time."""
    module = getattr(callee, "__module__", None) or ""
    owner = getattr(callee, "__self__", None)
    pure = (module == "math" or callee.__class__ is numpy.ufunc
            or (module.startswith("numpy") and not module.startswith("numpy.random"))
            or owner is math)
    if isinstance(owner, numpy.ndarray):  # `c.reshape(2, 3)` of a constant array
        pure = getattr(callee, "__name__", "") in _PURE_METHODS
    if not pure or callee in _WRITERS:
        return NOT_LOWERED
    values = _static(list(args))
    kw = _static(dict(kwargs))
    if values is NOT_LOWERED or kw is NOT_LOWERED:
        return NOT_LOWERED
    try:
        result = callee(*values, **kw)
    except Exception:  # let the tracer say it has no rule for the call
        return NOT_LOWERED
    bases = [a for a in [owner, *values, *kw.values()] if isinstance(a, numpy.ndarray)
             and isinstance(result, numpy.ndarray) and numpy.shares_memory(result, a)]
    if not bases:
        return Const(result)
    return _constant_view(tracer, callee, result, bases[0])


def _constant_view(tracer, callee, result, base):
    """`w = c.reshape(-1)` (or ravel, squeeze) of a constant array `c`: a view, recorded
    so that a write through w reaches c (fuzz seed 90093: the fold lost the write); other
    views of a local constant are refused by the tracer (no rule for the call)."""
    holders = [r for r in tracer.mutation._references() if isinstance(r, Const) and r.value is base] \
        if tracer is not None else []
    if not holders:  # a global's or closure's array: no name here sees it
        return Const(result)
    if getattr(callee, "__name__", "") not in ("reshape", "ravel", "squeeze") or len(holders) != 1:
        return NOT_LOWERED
    out = Const(result)
    tracer.mutation.views[id(out)] = (out, holders[0], "reshape", (Const(result.shape),), "view")
    return out


# ---------------------------------------------------------------------- functools.partial
def _partial(args, kwargs):
    """`functools.partial(f, ...)` in compiled code: of constants, the partial itself
    (a constant the tracer calls); else a `BoundCall` holding the traced values."""
    if all(isinstance(a, Const) for a in args) and all(isinstance(v, Const) for v in kwargs.values()):
        return Const(functools.partial(args[0].value, *(a.value for a in args[1:]),
                                       **{k: v.value for k, v in kwargs.items()}))
    return BoundCall(args[0], list(args[1:]), dict(kwargs))


class BoundCall(TraceObject):
    """A functools.partial of traced values: calling it calls its function with them first."""

    def __init__(self, func, args, kwargs):
        self.func, self.args, self.kwargs = func, args, kwargs

    def trace_method(self, tracer, name, args, kwargs, node):
        if name != "__call__":
            tracer.fail(node, f"the method `.{name}()` of a functools.partial")
        if not isinstance(self.func, Const):
            tracer.fail(node, "a functools.partial of a value that is not a function")
        return tracer.call(self.func.value, self.args + list(args), {**self.kwargs, **kwargs}, node)

    def trace_getattr(self, tracer, name, node):
        tracer.fail(node, f"the attribute `.{name}` of a functools.partial in compiled code")

    def trace_setattr(self, tracer, name, value, node):
        tracer.fail(node, f"assigning to `.{name}` of a functools.partial")
