"""Tuples, lists and dicts of arrays while tracing: methods and comprehensions.

Containers are the tracer's own native Python containers of tvalues (Note [Static
versus dynamic values] in srcgrad.ir.core): their *structure* is static, their
elements may be dynamic. So `lst.append(v)`, `lst[i] = v` and `d[k] = v` mutate
the native container at trace time; names bound to the same list see the change,
exactly as in Python, and no op is emitted. Only the elements reach the IR.
"""

from __future__ import annotations

import gast

from srcgrad.frontend.scope import Scope
from srcgrad.ir.core import Const, Var

# Methods that read a container and leave it unchanged, or change only its structure.
_LIST_METHODS = {"append", "extend", "insert", "pop", "copy", "index", "count", "reverse", "clear"}
_DICT_METHODS = {"items", "keys", "values", "get", "update", "pop", "copy", "setdefault", "clear"}
_TUPLE_METHODS = {"index", "count"}
_CHANGING = {"append", "extend", "insert", "pop", "reverse", "clear", "update", "setdefault"}


def _static(tracer, value, node, what):
    if not isinstance(value, Const):
        tracer.fail(node, f"{what} that depends on array values")
    return value.value


def _items(value):
    """The elements of a static sequence tvalue, as tvalues."""
    if isinstance(value, Const):
        return [Const(v) for v in value.value]
    if isinstance(value, dict):
        return [Const(k) for k in value]
    return list(value)


def method(tracer, base, name, args, kwargs, node):
    """`base.<name>(*args, **kwargs)` for a native tuple/list/dict tvalue."""
    allowed = (_DICT_METHODS if isinstance(base, dict) else
               _LIST_METHODS if isinstance(base, list) else _TUPLE_METHODS)
    if name not in allowed or kwargs:
        kind = type(base).__name__
        tracer.fail(node, f"the {kind} method `.{name}()`",
                    f"compiled code supports {', '.join(sorted(allowed))} on a {kind}")
    if name in _CHANGING:
        tracer.mutation.guard_region(node, f"`.{name}()` of a {type(base).__name__}", container=True)
    if isinstance(base, dict):
        return _dict_method(tracer, base, name, args, node)
    if name == "append":
        base.append(args[0])
    elif name == "extend":
        base.extend(_iterate(tracer, args[0], node))
    elif name == "insert":
        base.insert(_static(tracer, args[0], node, "a list position"), args[1])
    elif name == "pop":
        return base.pop(*(_static(tracer, a, node, "a list position") for a in args))
    elif name == "copy":
        return list(base)
    elif name == "reverse":
        base.reverse()
    elif name == "clear":
        base.clear()
    else:  # index / count: by identity of tvalues, or equality of static values
        target = args[0]
        hits = [i for i, v in enumerate(base) if v is target or (
            isinstance(v, Const) and isinstance(target, Const) and _equal(v.value, target.value))]
        if name == "count":
            return Const(len(hits))
        if not hits:
            tracer.error(node, "list.index(x): x not in list")
        return Const(hits[0])
    return Const(None)


def _equal(a, b):
    try:
        return bool(a == b)
    except Exception:  # arrays: ambiguous truth value
        return a is b


def _dict_method(tracer, base, name, args, node):
    if name == "items":
        return [(Const(k), v) for k, v in base.items()]
    if name == "keys":
        return [Const(k) for k in base]
    if name == "values":
        return list(base.values())
    if name == "copy":
        return dict(base)
    if name == "clear":
        base.clear()
        return Const(None)
    if name == "update":
        other = args[0] if args else {}
        if not isinstance(other, dict):
            tracer.fail(node, "`dict.update` with something other than a dict")
        base.update(other)
        return Const(None)
    key = _static(tracer, args[0], node, "a dict key")
    if name == "get":
        return base.get(key, args[1] if len(args) > 1 else Const(None))
    if name == "setdefault":
        return base.setdefault(key, args[1] if len(args) > 1 else Const(None))
    if key not in base and len(args) < 2:  # pop
        tracer.error(node, f"KeyError: {key!r}")
    return base.pop(key, *args[1:])


def _iterate(tracer, value, node):
    """The elements of an iterable whose length is known when compiling."""
    if isinstance(value, (tuple, list)):
        return list(value)
    if isinstance(value, dict):
        return [Const(k) for k in value]
    if isinstance(value, Const):
        try:
            return [Const(v) for v in value.value]
        except TypeError:
            tracer.error(node, f"{type(value.value).__name__} is not iterable")
    if isinstance(value, Var):
        tracer.fail(node, "iterating over an array in a comprehension",
                    "use array operations on the whole array (`x * 2` for "
                    "`[v * 2 for v in x]`), or iterate over a literal `range(3)`")
    tracer.fail(node, "iterating over this value")


def set_item(tracer, base, index, value, node):
    """`base[index] = value` for a native list/dict: the container itself changes."""
    if isinstance(base, tuple):
        tracer.error(node, "'tuple' object does not support item assignment")
    tracer.mutation.guard_region(node, "item assignment into a list or dict", container=True)
    key = _static(tracer, index, node, "a list index or dict key")
    if isinstance(base, list):
        if isinstance(key, slice):
            base[key] = _iterate(tracer, value, node)
        else:
            try:
                base[key] = value
            except (IndexError, TypeError) as err:
                tracer.error(node, f"cannot assign to this list item: {err}")
    else:
        base[key] = value


def comprehension(tracer, node, scope):
    """A list/dict comprehension or generator expression over static iterables: each
    element is traced in turn (the iterables' lengths are known when compiling).
    Its variables live in their own scope, as in Python 3."""
    inner = Scope({}, scope.lookup_free, scope.locate, outer=scope)
    out = {} if isinstance(node, gast.DictComp) else []

    def walk(i):
        if i == len(node.generators):
            if isinstance(node, gast.DictComp):
                key = tracer.expr(node.key, inner)
                out[_static(tracer, key, node, "a dict key")] = tracer.expr(node.value, inner)
            else:
                out.append(tracer.expr(node.elt, inner))
            return
        gen = node.generators[i]
        if getattr(gen, "is_async", 0):
            tracer.fail(node, "an async comprehension")
        for item in _iterate(tracer, tracer.expr(gen.iter, inner if i else scope), node):
            tracer.bind(gen.target, item, inner)
            keep = True
            for cond in gen.ifs:
                test = tracer.expr(cond, inner)
                if not isinstance(test, Const):
                    tracer.fail(cond, "a comprehension `if` on array values",
                                "use `np.where` or boolean indexing")
                keep = keep and bool(test.value)
            if keep:
                walk(i + 1)

    walk(0)
    return out
