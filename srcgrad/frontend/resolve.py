"""Resolve the free names of a function: closure cells, then globals, then builtins."""

from __future__ import annotations

import builtins
import os
import types

import gast
import numpy

from srcgrad import rules
from srcgrad.digest import sha256  # (not OpenSSL's: its load is 3 ms of a compile)
from srcgrad.frontend.classes import parse_function_class
from srcgrad.ir.expand import MISSING


def resolve(name: str, fs) -> object:
    """The value `name` has inside `fs`'s function, or MISSING."""
    if name in fs.closure:
        return fs.closure[name]
    if name in fs.globals:
        return fs.globals[name]
    return getattr(builtins, name, MISSING)


def free_names(node) -> list:
    """Names a function reads but never binds, in order of first appearance."""
    bound = {a.id for a in gast.walk(node.args) if isinstance(a, gast.Name)}
    loads: dict = {}  # (one walk: a name bound anywhere, even after a read, is not free)
    for n in gast.walk(node):
        if isinstance(n, gast.Name):
            if isinstance(n.ctx, (gast.Store, gast.Del)):
                bound.add(n.id)
            elif isinstance(n.ctx, gast.Load):
                loads.setdefault(n.id, None)
        elif isinstance(n, (gast.FunctionDef, gast.Lambda)) and n is not node:
            bound.add(getattr(n, "name", ""))
    return [name for name in loads if name not in bound]


def fingerprint(fs, _stack=None) -> str | None:
    """A stable hash of a function's source and everything its free names resolve to.

    None when some value cannot be fingerprinted reliably (then the disk cache is
    not used for it). Part of the cache key: a changed helper function, constant
    or NumPy alias gives a new key.
    """
    from srcgrad.frontend.parse import parse_function

    stack = _stack or set()
    if id(fs.fn) in stack:
        return "recursive:" + fs.fn.__qualname__
    stack = stack | {id(fs.fn)}
    h = sha256(fs.source.encode())
    # Where it is: generated comments and error messages name file lines.
    h.update(f"\0{os.path.basename(fs.filename)}:{fs.line_offset}".encode())
    paths = _attribute_paths(fs.node)
    for name in free_names(fs.node):
        value = resolve(name, fs)
        part = _value_print(value, stack, parse_function)
        if part is None:
            return None
        if isinstance(value, types.ModuleType):  # what `mod.helper` / `mod.K` hold now
            part += "".join(f"\0{'.'.join(path)}={_member_of(value, path, stack, parse_function)}"
                            for path in paths.get(name, ()))
        h.update(f"\0{name}={part}".encode())
    return h.hexdigest()


def _attribute_paths(node) -> dict:
    """name -> sorted attribute paths read from it (`mod.a.b` gives ("a", "b"))."""
    paths: dict = {}
    for n in gast.walk(node):
        if isinstance(n, gast.Attribute) and isinstance(n.ctx, gast.Load):
            chain, base = [n.attr], n.value
            while isinstance(base, gast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, gast.Name):
                paths.setdefault(base.id, set()).add(tuple(reversed(chain)))
    return {k: sorted(v) for k, v in paths.items()}


def _member_of(module, path, stack, parse_function) -> str:
    """The fingerprint of `module.<path>`: a user module's helper or constant changes
    the key when it changes; what cannot be fingerprinted (a C function) is named."""
    value = module
    for attr in path:
        value = getattr(value, attr, MISSING)
        if value is MISSING:
            return "missing"
        if isinstance(value, types.ModuleType):
            continue
    if isinstance(value, types.ModuleType):
        return "module:" + value.__name__
    return _value_print(value, stack, parse_function) or "opaque"


def _value_print(value, stack, parse_function) -> str | None:
    if value is MISSING:
        return "missing"
    if isinstance(value, types.ModuleType):
        return "module:" + value.__name__
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list)):
        parts = [_value_print(v, stack, parse_function) for v in value]
        return None if None in parts else f"{type(value).__name__}({','.join(parts)})"
    if isinstance(value, numpy.ndarray):
        return f"array:{value.dtype}:{value.shape}:" + sha256(value.tobytes()).hexdigest()
    # (identity, not `in`: a Tensor global compares elementwise, and its __eq__ records a node)
    if isinstance(value, (numpy.generic, numpy.dtype)) or value is numpy.float32 or value is numpy.float64:
        return f"np:{value!r}"
    rule = rules.lookup_callable(value) if callable(value) else None
    if rule is not None:
        return "rule:" + rule.name
    if isinstance(value, (types.BuiltinFunctionType, type)) and getattr(
            builtins, value.__name__, None) is value:  # `len`, and `staticmethod` in a Function class
        return "builtin:" + value.__name__
    if isinstance(value, type) and getattr(value, "_srcgrad_function", False):
        return fingerprint_function(value, stack)  # a custom Function class
    if isinstance(value, types.FunctionType):
        inner = getattr(value, "__srcgrad__", None)
        if inner is not None:
            return inner.fingerprint()
        try:
            sub = parse_function(value)
        except Exception:
            return None
        fp = fingerprint(sub, stack)
        return None if fp is None else "fn:" + fp
    return None


def fingerprint_function(cls, stack) -> str | None:
    """A Function class's part of a cache key: its methods' sources and free names."""
    try:
        parsed = parse_function_class(cls)
    except Exception:
        return None
    parts = [f"function:{parsed.name}:{parsed.once_differentiable}"]
    for fs in (parsed.forward, parsed.setup_context, parsed.backward, parsed.jvp):
        fp = "-" if fs is None else fingerprint(fs, stack)
        if fp is None:
            return None
        parts.append(fp)
    # The rest of the class body: a helper method or constant its methods read as
    # `MyFn.helper(...)` must change the key too.
    for name, value in sorted(vars(cls).items()):
        if name.startswith("__") or name in ("forward", "setup_context", "backward", "vjp", "jvp"):
            continue
        fp = _member_print(value, stack)
        if fp is None:
            return None
        parts.append(f"{name}={fp}")
    return ":".join(parts)


def _member_print(value, stack) -> str | None:
    from srcgrad.frontend.parse import parse_function

    value = getattr(value, "__func__", value)  # staticmethod / classmethod
    return _value_print(value, stack, parse_function)


# Modules whose members never change under a running program: reading `np.sum` or
# `math.pi` is not a binding to guard (and checking them would cost every call).
_STABLE_MODULES = frozenset({"numpy", "math", "cmath", "scipy", "cupy", "srcgrad", "builtins",
                             "operator", "functools", "itertools", "collections", "dataclasses"})


def global_bindings(fs, _stack=None) -> list:
    """The `(namespace, name, value)` bindings a compiled function's code bakes in: the
    globals it reads, the `mod.attr` members of user modules it reads, and, the same way,
    those of the plain functions it calls (they are inlined).

    The cache key hashes their values (`fingerprint`); a transform's fast path checks
    that each name is still bound to the same object, so rebinding a global or a
    helper in the running process recompiles instead of reusing the old code (issue 10).
    Values changed in place (an array global written into) are not bindings: generated
    code reads such a global's current contents.
    """
    from srcgrad.frontend.parse import parse_function

    stack = _stack if _stack is not None else set()
    if id(fs.fn) in stack:
        return []
    stack.add(id(fs.fn))
    found = []
    paths = _attribute_paths(fs.node)
    for name in free_names(fs.node):
        if name in fs.closure:  # a cell is not rebound in a module; a user object's
            found += object_bindings(fs.closure[name])  # attributes may be (Note [Bound methods])
        if name in fs.closure or name not in fs.globals:
            continue  # a closure cell, a builtin or a missing name: nothing to rebind in a module
        value = fs.globals[name]
        found += object_bindings(value)
        if not isinstance(value, types.ModuleType):
            found.append((fs.globals, name, value))
            found += _callee_bindings(value, stack, parse_function)
        elif value.__name__.partition(".")[0] not in _STABLE_MODULES:
            for path in paths.get(name, ()):
                member = getattr(value, path[0], MISSING)
                if member is not MISSING and not isinstance(member, types.ModuleType):
                    found.append((vars(value), path[0], member))
                    found += _callee_bindings(member, stack, parse_function)
    return found


def _callee_bindings(value, stack, parse_function) -> list:
    """The bindings of a plain Python function the compiled code inlines."""
    value = getattr(value, "__wrapped__", value) if hasattr(value, "__srcgrad__") else value
    if not isinstance(value, types.FunctionType) or rules.lookup_callable(value) is not None:
        return []
    try:
        sub = parse_function(value)
    except Exception:  # noqa: BLE001 (not our code to parse: its fingerprint says so)
        return []
    return global_bindings(sub, stack)


# Note [Bound methods]
# ~~~~~~~~~~~~~~~~~~~~
# A method of a user object (`sim.step(y)` in compiled code, or `sg.grad(sim.loss)`:
# srcgrad.arguments.plain_function makes it a partial of the function and the object)
# is inlined with `self` the object itself, a constant: `self.dt` folds to the float it
# holds (srcgrad.frontend.python_forms.call_other). Folded values are bindings (Note
# [Bindings] in srcgrad.pipeline.modules): every attribute of the object's `__dict__`
# and of its class's, and so on for the objects they hold, is guarded by identity, so
# `sim.dt = 0.05` after a call compiles again instead of reusing the old step. An
# array attribute written in place is not rebound (the generated code reads the
# array's current contents, as for an array global). Such a function has no disk-cache
# key (srcgrad.frontend.resolve.fingerprint prints no user object).
_PLAIN_VALUES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                 numpy.ndarray, numpy.generic, bool, int, float, complex, str, bytes,
                 tuple, list, dict, type(None))


def object_bindings(obj, _seen=None, depth: int = 0) -> list:
    """(namespace, name, value) for every attribute of a user object and of its class
    (Note [Bound methods]); [] for anything else."""
    if isinstance(obj, _PLAIN_VALUES) or depth > 3 or callable(obj) and not hasattr(obj, "__dict__"):
        return []
    attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, dict):
        return []
    seen = _seen if _seen is not None else set()
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    found = [(attrs, k, v) for k, v in attrs.items()]
    found += [(vars(type(obj)), k, v) for k, v in vars(type(obj)).items()
              if not k.startswith("__") and not isinstance(v, types.FunctionType)]
    for v in list(attrs.values()):
        found += object_bindings(v, seen, depth + 1)
    return found
