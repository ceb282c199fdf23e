"""Binding a call to a row by the NumPy function's own signature, where it differs from
the row's (srcgrad.ir.expand's Expander.apply): NumPy's name for the first parameter
(`np.sum(a=x)`), NumPy's positions for the later ones (`np.mean(x, 0, None, None,
True)`), NumPy's no-op defaults (`dtype=None`, `out=None`) dropped, and NumPy's `order`
of ravel, flatten and reshape."""

from __future__ import annotations

import importlib
import inspect

from srcgrad import rules
from srcgrad.ir.core import Const, Pack


def first_by_target_name(rule, sig, kwargs: dict) -> dict:
    """`kwargs` with the NumPy function's own name for its first parameter (`np.sum(a=x)`,
    `np.linalg.norm(x=...)`) renamed to the row's (`x`); only the first: the later
    parameters of a row need not sit where NumPy's do (issue 28's boundary fuzzing).
    Keywords the row lacks that are NumPy's no-op defaults are dropped."""
    kwargs = {k: v for k, v in kwargs.items() if not (  # `dtype=None`, `out=None`: NumPy's
        k in ("dtype", "out") and k not in sig.parameters  # defaults, the call without them
        and (v is None or isinstance(v, Const) and v.value is None))}
    first = next(iter(sig.parameters), None)
    if not kwargs or first is None or first in kwargs:
        return kwargs
    for target in rule.targets:
        module, _, name = target.rpartition(".")
        try:
            theirs = next(iter(inspect.signature(getattr(importlib.import_module(module), name)).parameters))
        except (ImportError, AttributeError, TypeError, ValueError, StopIteration):
            continue
        if theirs in kwargs and theirs not in sig.parameters:
            return {first if k == theirs else k: v for k, v in kwargs.items()}
    return kwargs


_TARGET_NAMES: dict = {}  # row name -> its first target's positional parameter names


def by_target_position(rule, sig, args: list, kwargs: dict):
    """`(args, kwargs)` with the positional arguments after the first bound by the NumPy
    function's signature and passed by name, where the row's would read one differently
    (`np.mean(x, 0, None, None, True)`: NumPy's axis, dtype, out, keepdims; the row's
    `x, axis, keepdims` would take dtype for keepdims) or could not take them all; a
    method's receiver is its first. None where nothing changes. A keyword the row lacks
    is then refused by the bind, or dropped as NumPy's no-op default (`dtype=None`,
    `out=None`: first_by_target_name)."""
    names = _TARGET_NAMES.get(rule.name)
    if names is None:
        names = _TARGET_NAMES[rule.name] = next(filter(None, map(_positional_names, rule.targets)), ())
    ours = list(sig.parameters)
    if len(args) < 2 or len(args) > len(names) or any(n in kwargs for n in names[1:len(args)]) \
            or any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        return None
    if len(args) <= len(ours) and not any(n != r and (n in sig.parameters or n in ("dtype", "out"))
                                          for n, r in zip(names[1:len(args)], ours[1:])):
        return None
    return list(args[:1]), {**dict(zip(names[1:], args[1:])), **kwargs}


def _positional_names(target: str) -> tuple:
    module, _, name = target.rpartition(".")
    try:
        params = inspect.signature(getattr(importlib.import_module(module), name)).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return ()
    return tuple(n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


# rows that take NumPy's `order`, and the position it has in their calls (after x, shape)
ORDERED = {"ravel": 1, "flatten": 1, "reshape": 2}


def in_order(expander, rule, args: list, kwargs: dict, node):
    """`ravel`/`flatten`/`reshape` with NumPy's `order`: 'C' is the row itself; 'F' reads
    and writes the elements with the first index fastest, which is the row between two
    transposes (`ravel(x.T)`, `reshape(x.T, shape[::-1]).T`), so its derivative is theirs.
    'A' and 'K' follow the memory layout of the argument, which compiled code does not
    see: refused, naming the orders that are taken."""
    n = ORDERED[rule.name]
    kwargs = dict(kwargs)
    order = kwargs.pop("order") if "order" in kwargs else args[n] if len(args) > n else Const("C")
    args = list(args[:n]) + list(args[n + 1:])
    value = order.value if isinstance(order, Const) else order
    if value == "C":
        return expander.apply(rule, args, kwargs, node)
    if value != "F":
        expander.error(node, f"`{rule.name}` with order={value!r} (the element order of 'A' and "
                             f"'K' depends on the argument's memory layout, which compiled code "
                             f"does not see)", "write order='C' or order='F'")
    transpose = rules.RULES["transpose"]
    flipped = expander.apply(transpose, [args[0]], {}, node)
    if rule.name != "reshape":
        return expander.apply(rule, [flipped, *args[1:]], kwargs, node)
    shape = args[1] if len(args) > 1 else kwargs.pop("shape", None)
    if isinstance(shape, Const) and isinstance(shape.value, (int, tuple)):
        shape = Const(tuple(reversed(shape.value)) if isinstance(shape.value, tuple) else (shape.value,))
    elif isinstance(shape, Pack):
        shape = Pack(tuple(reversed(shape.items)), shape.style)
    elif isinstance(shape, (tuple, list)):
        shape = type(shape)(reversed(shape))
    else:
        expander.error(node, "`reshape` with order='F' to a shape not known when compiling",
                       "write the shape as a tuple")
    return expander.apply(transpose, [expander.apply(rule, [flipped, shape, *args[2:]], kwargs, node)],
                          {}, node)
