"""What the tracer's pieces share without importing the tracer: name scopes, and the
base class of compile-time objects user code treats as values."""

from __future__ import annotations


class Scope:
    """Name bindings of one function being traced, and how to resolve free names.

    A nested `def`, lambda or comprehension gets a Scope whose `outer` is the scope it
    was defined in: its free names read the enclosing function's *current* bindings
    (Python closures capture variables, not values), then the globals."""

    def __init__(self, env: dict, lookup_free, locate, outer=None, nonlocals=frozenset(),
                 local_names=frozenset()):
        self.env = env  # local name -> tvalue
        self.lookup_free = lookup_free  # name -> value or MISSING
        self.locate = locate  # gast node -> Loc
        self.outer = outer  # the enclosing Scope of a nested def / comprehension, or None
        self.nonlocals = set(nonlocals)  # names declared `nonlocal`: read and written in `outer`
        # names the body assigns (a nested def's locals): never resolved in `outer`
        self.local_names = frozenset(local_names)

    def owner(self, name):
        """The scope whose env holds `name` for reads and writes here, or None."""
        scope = self
        while scope is not None:
            if name in scope.nonlocals:
                scope = scope.outer
                continue
            if name in scope.env:
                return scope
            if name in scope.local_names:
                return None  # a local not bound yet
            scope = scope.outer
        return None

    def free(self, name):
        """A name no scope binds: closure cells, globals, builtins (or MISSING)."""
        scope = self
        while scope.outer is not None:
            scope = scope.outer
        return scope.lookup_free(name)


class TraceObject:
    """A compile-time object that user code uses as a value: a custom Function's `ctx`
    (srcgrad.frontend.function). The tracer asks it for attributes, attribute
    stores and method calls instead of evaluating them."""

    def trace_getattr(self, tracer, name, node):
        raise NotImplementedError

    def trace_setattr(self, tracer, name, value, node):
        raise NotImplementedError

    def trace_method(self, tracer, name, args, kwargs, node):
        raise NotImplementedError


class NestedFunction:
    """Base of a `def` or lambda inside a compiled function as the tracer holds it
    (srcgrad.frontend.inlining._NestedDef): traced at each call, no Python function."""


def every_scope(scopes) -> list:
    """Each scope being traced (`scopes`, innermost callee last) and the scopes they are
    nested in, once each: the names an in-place write may reach."""
    seen, out = set(), []
    for s in scopes:
        while s is not None and id(s) not in seen:
            seen.add(id(s))
            out.append(s)
            s = s.outer
    return out
