"""Python forms research code writes inside differentiated functions (issue 29 §2):
builtins on traced values (`max(a, b)`, `round(T / dt)`, `isinstance(p, dict)`,
`list(x)`), f-strings and constant `str` methods, `try`/`except`/`finally`, `raise`,
`assert`, star unpacking (`a, *rest = x`), and bound methods of user objects
(`sim.step(y)` reading `self.dt`). The tracer (srcgrad.frontend.trace) calls these; each
either lowers the form onto rows or refuses it at the user's line with a rewrite.

Note [Python forms decided when compiling]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
What Python decides from a value's *type* or *length* (`isinstance`, `type(x) is`,
`a, *rest = x`, `[f(r) for r in x]`, `max(x)`) is decided while tracing, where it is
certain for every call the generated code serves:
* a native container (a tuple, list or dict argument, or one the code built) is that
  container in the generated code too; a namedtuple argument is a namedtuple, a
  dataclass argument a `Record` of its class (Note [Records] in srcgrad.ir.tree);
* a traced value is an array or a number at run time, never a container, a string or
  None: `isinstance(x, dict)` is False for it;
* an argument's own class is known in a variant compiled for the arguments' classes
  and shapes (srcgrad.pipeline.modules.guard_value keys every variant on them);
* a row count is known where it is a shape fact (Note [Shape facts] in
  srcgrad.frontend.trace).
Anything else (`isinstance(np.sum(x), float)`: np.float64 is a float, a 0-d array is
not) is refused with a rewrite, never guessed.
"""

from __future__ import annotations

import ast
import builtins
import functools
import types

import gast
import numpy

from srcgrad import rules
from srcgrad.frontend import described, idioms
from srcgrad.frontend.scope import TraceObject
from srcgrad.ir.core import Const, Var

# Classes a traced value may be at run time (an array, a NumPy scalar, a Python number).
_RUNTIME_CLASSES = (numpy.ndarray, numpy.float64, numpy.float32, numpy.int64, numpy.bool_,
                    float, int, bool, complex)
_PACKAGE = __file__.rsplit("frontend", 1)[0]  # srcgrad's own directory (_python_error)
# Constants whose methods are pure: `"w_{}".format(i)`, `name.upper()` fold when compiling.
_PURE_CONSTANTS = (str, bytes, int, float, tuple, frozenset, range)


def builtin_hint(fn, of_arguments: bool = False) -> str:
    """What to write instead of a builtin applied to an array (tests/test_hint_rewrites.py
    compiles each suggestion); `of_arguments`: of a value computed from arguments."""
    if fn in (round, int) and of_arguments:
        return (f"use the NumPy function instead: `np.{'round' if fn is round else 'trunc'}(...)`"
                "; a number the code needs as a Python number (a loop count) is computed "
                "outside and passed as an int")
    if fn is float:
        return "drop the `float()`: a 0-d array works as a number in compiled code"
    if fn is range:
        return "use a literal count (`range(3)`) or array operations on the whole array"
    if fn in (min, max):
        return (f"use the NumPy function instead: `np.{fn.__name__}(x)` of one array, "
                f"`np.{fn.__name__}imum(a, b)` of two")
    if fn in (abs, round):
        return f"use the NumPy function instead: `np.{fn.__name__}(...)`"
    return "use the NumPy function instead"


# ---------------------------------------------------------------------- builtins
def builtin(tracer, fn, args, kwargs, node):
    """A builtin of FOLDABLE_BUILTINS (srcgrad.frontend.trace) called on tvalues."""
    if fn is range and tracer.facts is not None:  # `range(len(x))`: Note [Shape facts]
        args = [tracer.shape_fact(a) for a in args]
    if fn in (map, filter) and len(args) >= 2 and not kwargs:  # (a lambda: traced, not run)
        return _map_filter(tracer, fn, args, node)
    static = all(isinstance(a, Const) for a in args) and all(
        isinstance(v, Const) for v in kwargs.values())
    if static:
        try:
            value = fn(*(a.value for a in args), **{k: v.value for k, v in kwargs.items()})
        except Exception as err:  # the user's code raised (`int("x")`): a `try` may handle it
            err._srcgrad_static = True  # (Note [try in compiled code])
            raise
        if fn is dict:  # a new dict the code may write into (`d['b'] = x`): a native one
            return {k: Const(v) for k, v in value.items()}
        if fn is list:
            return [Const(v) for v in value]
        return Const(value)
    import gast as g

    if fn is abs and len(args) == 1:
        return tracer.apply(rules.RULES["abs"], args, {}, node)
    if fn is len and len(args) == 1 and isinstance(args[0], Var):
        shape = tracer.apply(rules.RULES["shape"], args, {}, node)
        return tracer.apply(rules.RULES["getitem"], [shape, Const(0)], {}, node)
    if fn in (len, tuple, list) and len(args) == 1 and isinstance(args[0], (tuple, list)):
        return Const(len(args[0])) if fn is len else fn(args[0])
    if fn is sum and isinstance(args[0], Var) and not kwargs:
        # Python's sum of an array adds its rows: NumPy's sum over axis 0 (a 0-d
        # array raises at run time, as Python's iteration of it does)
        total = tracer.apply(rules.RULES["sum"], [args[0]], {"axis": Const(0)}, node)
        return tracer.binop(g.Add, args[1], total, node) if len(args) > 1 else total
    if fn is sum and isinstance(args[0], (tuple, list)):
        total = args[1] if len(args) > 1 else Const(0)
        for item in args[0]:
            total = tracer.binop(g.Add, total, item, node)
        return total
    if fn in (zip, enumerate) and all(isinstance(a, (tuple, list, Const)) for a in args):
        seqs = [list(a) if not isinstance(a, Const) else [Const(x) for x in a.value]
                for a in args]
        if fn is enumerate:
            return [(Const(i), v) for i, v in enumerate(seqs[0])]
        return [tuple(items) for items in zip(*seqs)]
    if fn in (zip, enumerate) and any(isinstance(a, Var) for a in args) and not kwargs:
        seqs = [rows(tracer, a, node, f"`{fn.__name__}()` of an array") if isinstance(a, Var)
                else a for a in args]  # (a `for` over them: srcgrad.frontend.iteration)
        return builtin(tracer, fn, seqs, kwargs, node)
    if fn in (isinstance, type) and args:
        return _type_test(tracer, fn, args, node)
    if fn in (max, min):
        return _extremum(tracer, fn, args, kwargs, node)
    if fn is round and len(args) == 1 and not kwargs and isinstance(args[0], Var):
        # Python's round of a number is an int (a trip count: `range(round(T / dt))`);
        # of a differentiated value it is refused, as `int()` is (srcgrad.passes.activity
        # _MOVING_NONDIFF); a 0-d array raises TypeError at run time, as in Python
        return tracer.apply(rules.RULES["builtin_round"], args, {}, node)
    if fn in (list, tuple) and len(args) == 1 and isinstance(args[0], Var):
        items = rows(tracer, args[0], node, f"`{fn.__name__}()` of an array")
        return fn(items)
    lowered = idioms.lower_builtin(tracer, fn, args, kwargs, node)
    if lowered is not idioms.NOT_LOWERED:
        return lowered
    detail = described.from_arguments(tracer, node, args[0]) \
        if args and isinstance(args[0], Var) else ""
    if fn in (float, int):  # Note [Python numbers of arrays] in srcgrad.frontend.trace
        tracer.error(node, f"`{fn.__name__}()` of an array{detail} is not supported in compiled "
                     "code: a Python number carries no derivative, so the result would be a "
                     "silent constant", builtin_hint(fn, bool(detail)))
    tracer.fail(node, f"`{fn.__name__}()` of an array{detail}", builtin_hint(fn, bool(detail)))


def _items(tracer, value, node, what):
    """The items of a sequence tvalue: a native sequence's, a constant's, an array's rows."""
    if isinstance(value, (tuple, list)):
        return list(value)
    if isinstance(value, Var):
        return rows(tracer, value, node, what)
    if isinstance(value, Const):
        try:
            return [Const(v) for v in value.value]
        except TypeError:
            tracer.error(node, f"'{type(value.value).__name__}' object is not iterable")
    tracer.fail(node, f"{what} of this value", "pass a list or an array")


def _apply_callable(tracer, fn, args, node):
    if not isinstance(fn, Const):
        tracer.fail(node, "calling a function that depends on the arguments",
                    "call a function defined in the code (`def` or `lambda`) by its name")
    return tracer.call(fn.value, list(args), {}, node)


def _map_filter(tracer, fn, args, node):
    """`map(f, xs, ...)` / `filter(f, xs)` as the list of f's results (or of the items it
    keeps: each test decided when compiling), over a list or an array's rows."""
    seqs = [_items(tracer, a, node, f"`{fn.__name__}()`") for a in args[1:]]
    if fn is map:
        return [_apply_callable(tracer, args[0], items, node) for items in zip(*seqs)]
    if len(seqs) != 1:
        tracer.error(node, f"filter expected 2 arguments, got {len(args)}")
    kept = []
    for item in seqs[0]:
        test = item if isinstance(args[0], Const) and args[0].value is None else \
            _apply_callable(tracer, args[0], [item], node)
        if not isinstance(test, Const):
            tracer.fail(node, "`filter()` with a test on array values",
                        "use `np.where` or boolean indexing")
        if test.value:
            kept.append(item)
    return kept


_OPERATORS = {"add": gast.Add, "sub": gast.Sub, "mul": gast.Mult, "truediv": gast.Div,
              "floordiv": gast.FloorDiv, "mod": gast.Mod, "pow": gast.Pow,
              "matmul": gast.MatMult}


def rows(tracer, array, node, what):
    """The rows of a traced array as a list of values, where their count is a shape
    fact of this variant (Note [Python forms decided when compiling]); else refused."""
    count = tracer.shape_fact(tracer._length(array))
    if not isinstance(count, Const):
        tracer.fail(node, f"{what} whose row count is not known when compiling",
                    "index the rows (`x[0], x[1:]`), or use array operations on the whole array")
    if count.value == 0:
        return []
    return list(tracer.apply(rules.RULES["unpack"], [array, count], {}, node)) \
        if count.value > 1 else [tracer.apply(rules.RULES["getitem"], [array, Const(0)], {}, node)]


def _runtime_class(tracer, value):
    """The class `value` has at run time where the variant is specialised on it: an
    argument not rebound since (its example's class is in the variant's guard)."""
    example = getattr(tracer.mutation, "example", None)
    inputs = tracer.mutation.inputs
    if example is None or not isinstance(value, Var) or len(inputs) != len(example) or any(
            isinstance(a, (tuple, list, dict)) or hasattr(a, "__dataclass_fields__")
            for a in example):  # (inputs are leaves: one per argument only without containers)
        return None
    for var, arg in zip(inputs, example):
        if var is value:
            return type(arg)
    return None


def _type_test(tracer, fn, args, node):
    """`isinstance(v, C)` / `type(v)` where the answer is certain when compiling."""
    value = args[0]
    if fn is isinstance:
        classes = args[1] if len(args) == 2 else None
        if isinstance(classes, tuple) and all(isinstance(c, Const) for c in classes):
            classes = Const(tuple(c.value for c in classes))  # `isinstance(x, (list, str))`
        if not isinstance(classes, Const):
            tracer.fail(node, "`isinstance()` with classes that depend on the arguments",
                        "name the classes: `isinstance(p, dict)`")
        classes = classes.value
    if isinstance(value, (tuple, list, dict)):  # a native container is itself at run time
        return Const(isinstance(value, classes) if fn is isinstance else type(value))
    cls = value.cls if hasattr(value, "cls") and isinstance(value, TraceObject) else \
        _runtime_class(tracer, value)
    if cls is not None:
        return Const(issubclass(cls, classes) if fn is isinstance else cls)
    if fn is isinstance and isinstance(value, Var):
        wanted = classes if isinstance(classes, tuple) else (classes,)
        if not any(issubclass(t, c) for t in _RUNTIME_CLASSES for c in wanted):
            return Const(False)  # (an array or a number is never a dict, a str, None...)
    tracer.fail(node, f"`{fn.__name__}()` of a computed array or number (an ndarray, a NumPy "
                "scalar or a Python number at run time: not known when compiling)",
                "test the argument itself (`isinstance(x, np.ndarray)` of a parameter is "
                "decided per call), or `np.ndim(v) == 0` for a number")


def _extremum(tracer, fn, args, kwargs, node):
    """Python's `max`/`min` of traced values: the first extreme item, as Python picks it
    (`b if b > a else a`, a run-time branch: a gradient reaches the item picked)."""
    if kwargs:
        tracer.fail(node, f"`{fn.__name__}()` with `{next(iter(kwargs))}=` of arrays",
                    builtin_hint(fn))
    if len(args) == 1:
        items = args[0]
        if isinstance(items, Var):
            ndim = tracer.shape_fact(tracer.apply(rules.RULES["ndim"], [items], {}, node))
            if isinstance(ndim, Const) and ndim.value == 1:  # a vector's items: np.max/np.min
                return tracer.apply(rules.RULES[fn.__name__], [items], {}, node)  # (same value;
            return _whole_extremum(tracer, fn, items, node)  # ties are kinks)
        elif isinstance(items, Const):
            items = [Const(v) for v in items.value]
        elif not isinstance(items, (tuple, list)):
            tracer.fail(node, f"`{fn.__name__}()` of this value", builtin_hint(fn))
        items = list(items)
    else:
        items = list(args)
    if not items:
        tracer.error(node, f"{fn.__name__}() iterable argument is empty")
    best = items[0]
    compare = rules.RULES["greater" if fn is max else "less"]
    for item in items[1:]:
        test = tracer.apply(compare, [item, best], {}, node)
        if isinstance(test, Const):
            best = item if test.value else best
        else:
            best = _pick(tracer, node, test, item, best)
    return best


def _whole_extremum(tracer, fn, x, node):
    """Python's `max(x)` of an array, where its rank is not known when compiling: its
    rows compared, which Python can do only where each row has one item or there is at
    most one row (else "the truth value of an array ... is ambiguous"): then it is NumPy's
    max over axis 0, and elsewhere the generated code raises where Python raises."""
    n = tracer._length(x)
    one_item_rows = tracer.apply(rules.RULES["equal"], [tracer.apply(rules.RULES["size"], [x], {},
                                                                       node), n], {}, node)
    ok = tracer.apply(rules.RULES["logical_or"], [one_item_rows, tracer.apply(
        rules.RULES["less_equal"], [n, Const(1)], {}, node)], {}, node)
    message = Const(f"{fn.__name__}() of an array whose rows have several items: the truth "
                    "value of an array with more than one element is ambiguous")
    tracer.apply(rules.RULES["assert_true"], [ok, message], {}, node)
    return tracer.apply(rules.RULES[fn.__name__], [x], {"axis": Const(0)}, node)


def _pick(tracer, node, test, then, orelse):
    return tracer.branches(node, test, tracer.scopes[-1], [], [], lambda s: then, lambda s: orelse)


# ---------------------------------------------------------------------- calls
def call_other(tracer, callee, args, kwargs, node):
    """A callee the tracer has no other way to read: a bound method of a user object
    (its function inlined with `self` the object, a constant: its float attributes are
    guarded by srcgrad.frontend.resolve.object_bindings), a pure method of a constant
    (`"w_{}".format(i)`), or refused."""
    owner = getattr(callee, "__self__", None)
    if callee is functools.reduce and 2 <= len(args) <= 3 and not kwargs:
        items = _items(tracer, args[1], node, "`functools.reduce()`")
        if len(args) == 2 and not items:
            tracer.error(node, "TypeError: reduce() of empty iterable with no initial value")
        total = args[2] if len(args) == 3 else items.pop(0)
        for item in items:
            total = _apply_callable(tracer, args[0], [total, item], node)
        return total
    module = getattr(callee, "__module__", None)
    if module in ("_operator", "operator") and getattr(callee, "__name__", None) in _OPERATORS \
            and len(args) == 2 and not kwargs:  # `operator.mul(a, b)`: `a * b`
        return tracer.binop(_OPERATORS[callee.__name__], args[0], args[1], node)
    if module in ("_operator", "operator") and getattr(callee, "__name__", None) == "neg" \
            and len(args) == 1:
        return tracer.apply(rules.RULES["negative"], args, {}, node)
    if isinstance(callee, types.MethodType) and isinstance(callee.__func__, types.FunctionType):
        from srcgrad.frontend.parse import parse_function

        return tracer.inline(parse_function(callee.__func__), [Const(owner), *args], kwargs, node)
    # (`np.negative(3.0).__neg__()`, fuzz seed 2640188: a number's dunder method is a
    # method-wrapper; with an array argument it would give NotImplemented, so static only)
    if isinstance(callee, (types.BuiltinMethodType, types.MethodWrapperType)) \
            and isinstance(owner, _PURE_CONSTANTS + (complex, numpy.generic)) \
            and all(isinstance(a, Const) for a in (*args, *kwargs.values())):
        return Const(callee(*(a.value for a in args), **{k: v.value for k, v in kwargs.items()}))
    if isinstance(callee, type) and callee.__module__ not in ("builtins", "numpy") \
            and getattr(builtins, callee.__name__, None) is not callee:
        tracer.fail(node, f"constructing a `{callee.__name__}` object",
                    f"construct it outside the compiled function (a global or a closure "
                    f"variable) and call its methods inside: `{callee.__name__}`'s methods "
                    "and attributes are compiled")
    tracer.no_rule(callee, node)


# ---------------------------------------------------------------------- f-strings
def joined_str(tracer, node, scope):
    """An f-string of constants: its text (a dict key, a message); of a traced value
    refused (compiled code computes numbers and arrays, not their text)."""
    parts = []
    for part in node.values:
        if isinstance(part, gast.Constant):
            parts.append(str(part.value))
            continue
        value = tracer.expr(part.value, scope)
        if not isinstance(value, Const):
            tracer.fail(part, "an f-string of a traced array or number",
                        "print the value itself (`print('loss', v)` prints at run time), or "
                        "format text outside the compiled function")
        v = value.value
        v = {115: str, 114: repr, 97: ascii}.get(part.conversion, lambda t: t)(v)
        spec = joined_str(tracer, part.format_spec, scope).value if part.format_spec else ""
        parts.append(format(v, spec))
    return Const("".join(parts))


def trace_assert(tracer, node, scope):
    """`assert test, message` runs in the forward, with no effect on gradients; a
    message that formats traced values is its source text."""
    test = tracer.expr(node.test, scope)
    message = Const(None)
    if node.msg is not None:
        if _reads_traced(tracer, node.msg, scope):
            message = Const(ast.unparse(gast.gast_to_ast(node.msg)))
        else:
            message = tracer.expr(node.msg, scope)
            if not isinstance(message, Const):  # a traced message: the source text
                message = Const(ast.unparse(gast.gast_to_ast(node.msg)))
    if not (isinstance(test, Const) and test.value):
        tracer.apply(rules.RULES["assert_true"], [test, message], {}, node)


def _reads_traced(tracer, node, scope) -> bool:
    """Whether an f-string message formats a name bound to a traced value."""
    return isinstance(node, gast.JoinedStr) and any(
        isinstance(n, gast.Name) and not isinstance(scope.env.get(n.id, Const(None)), Const)
        for n in gast.walk(node))


# ---------------------------------------------------------------------- unpacking
def star_bind(tracer, target, value, scope):
    """`a, *rest, b = value`: the starred name gets a list of the middle items (an
    array's rows where their count is known: Note [Python forms decided when compiling])."""
    if isinstance(value, Var):
        items = rows(tracer, value, target, "star unpacking of an array")
    elif isinstance(value, Const):
        try:
            items = [Const(v) for v in value.value]
        except TypeError:
            tracer.error(target, f"cannot unpack non-iterable {type(value.value).__name__} object")
    elif isinstance(value, (tuple, list)):
        items = list(value)
    elif isinstance(value, dict):
        items = [Const(k) for k in value]
    else:
        tracer.fail(target, "star unpacking of this value", "index it instead")
    k = next(i for i, t in enumerate(target.elts) if isinstance(t, gast.Starred))
    after = len(target.elts) - k - 1
    if len(items) < len(target.elts) - 1:
        tracer.error(target, f"not enough values to unpack (expected at least "
                     f"{len(target.elts) - 1}, got {len(items)})")
    for t, v in zip(target.elts[:k], items[:k]):
        tracer.bind(t, v, scope)
    tracer.bind(target.elts[k].value, list(items[k:len(items) - after]), scope)
    for t, v in zip(target.elts[k + 1:], items[len(items) - after:]):
        tracer.bind(t, v, scope)


# ---------------------------------------------------------------------- try, raise
def trace_try(tracer, node, scope):
    """`try`/`except`/`else`/`finally` (Note [try in compiled code])."""
    parts = [node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)]
    if any(_leaves_block(s) for p in parts for s in p):
        tracer.fail(node, "`return`, `break` or `continue` inside `try`/`except`",
                    "assign the result to a name inside the `try` and return (or break) after it")
    try:
        try:
            tracer.trace_statements(node.body, scope)
        except Exception as caught:  # raised by code run while compiling: Python's handlers
            err = _python_error(caught)
            if err is None:
                raise
            handler = _handler_for(tracer, node, err, scope)
            if handler is None:
                raise
            if handler.name is not None:
                name = handler.name if isinstance(handler.name, gast.Name) else \
                    gast.Name(handler.name, gast.Store(), None, None)
                tracer.bind(name, Const(err), scope)
            handling = tracer.__dict__.setdefault("handling", [])
            handling.append(err)
            try:
                tracer.trace_statements(handler.body, scope)
            finally:
                handling.pop()
        else:
            tracer.trace_statements(node.orelse, scope)
    finally:
        tracer.trace_statements(node.finalbody, scope)


def _python_error(caught):
    """The Python exception behind an error raised while compiling the `try` body: the
    exception itself, or the one a constant's evaluation raised (`cannot evaluate
    `d[k]`: 'k'`: srcgrad.ir.expand); None for a refusal (a CompileError of its own)."""
    from srcgrad.errors import CompileError

    if not isinstance(caught, CompileError):
        # raised by the user's code run on constants (a fold, a `raise`), never by
        # srcgrad itself: an internal error is not the user's to handle
        return caught if getattr(caught, "_srcgrad_static", False) or _outside(caught) else None
    context = caught.__context__
    if caught.message.startswith("cannot evaluate `") and isinstance(
            context, (IndexError, KeyError, TypeError)):
        return context
    if caught.message.startswith("cannot compile this line: `") and isinstance(
            context, Exception) and _outside(context):  # a NumPy function of constants
        return context
    return None


def _outside(err) -> bool:
    """Whether `err` was raised by code outside srcgrad's package (its innermost frame)."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE)


def _leaves_block(node) -> bool:
    """A `return` (not a nested def's), or a `break`/`continue` of a loop outside `node`."""
    if isinstance(node, (gast.Return, gast.Break, gast.Continue)):
        return True
    if isinstance(node, (gast.FunctionDef, gast.Lambda)):
        return False
    if isinstance(node, (gast.For, gast.While)):  # its own break/continue stay inside
        return any(_returns(s) for s in node.body + node.orelse)
    return any(_leaves_block(child) for child in gast.iter_child_nodes(node))


def _returns(node) -> bool:
    if isinstance(node, gast.Return):
        return True
    if isinstance(node, (gast.FunctionDef, gast.Lambda)):
        return False
    return any(_returns(child) for child in gast.iter_child_nodes(node))


def _handler_for(tracer, node, err, scope):
    for handler in node.handlers:
        if handler.type is None:
            return handler
        classes = tracer.expr(handler.type, scope)
        if isinstance(classes, Const) and isinstance(err, classes.value):
            return handler
    return None


def trace_raise(tracer, node, scope):
    """`raise` reached while compiling straight-line code (a static condition, an
    `except` handler of a static error) raises as Python would; on a path that depends
    on array values it is refused (Note [try in compiled code])."""
    if tracer.blocks:
        tracer.fail(node, "`raise` on a path that depends on array values",
                    "check with `assert np.all(x > 0), 'x must be positive'` (asserts run in compiled "
                    "code), or check the inputs before calling the differentiated function")
    if node.exc is None:
        handling = tracer.__dict__.get("handling")
        if handling:  # re-raise the error an `except` handler traced now is handling
            raise handling[-1]
        tracer.error(node, "RuntimeError: No active exception to reraise (a bare `raise` "
                     "outside an `except` handler)")
    exc = tracer.expr(node.exc, scope)
    if not isinstance(exc, Const) or not (isinstance(exc.value, BaseException) or (
            isinstance(exc.value, type) and issubclass(exc.value, BaseException))):
        tracer.fail(node, "`raise` of a traced value", "raise an exception with a constant message")
    err = exc.value() if isinstance(exc.value, type) else exc.value
    err._srcgrad_static = True  # (the user's own raise: _python_error)
    raise err


# Note [try in compiled code]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A `try` body is traced in place. An exception raised while compiling by the user's
# code on constants (`int("x")`, a dict lookup of a missing constant key, a NumPy call
# on constants, a `raise` on a static path: `_python_error` tells them from srcgrad's
# own errors, which are never handed to the user's handlers) is handled as Python
# handles it: the first matching `except` handler is traced
# instead, and `finally` is traced after either. The generated code itself has no
# `try`: an exception the generated code raises at run time on traced data (a
# LinAlgError of a singular matrix) propagates to the caller instead of running a
# handler, so a handler meant for traced data never runs silently in its place: the
# user sees the error, never a value computed on a path Python would not have taken.
# `return`/`break`/`continue` inside a `try` are refused (the `finally` would have to
# run on each path out); a `raise` inside an `if` or loop on data is refused with the
# `assert` rewrite (asserts run in the forward, srcgrad.rules.helpers.assert_true).
