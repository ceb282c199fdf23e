"""What the tracer's pieces share without importing the tracer: name scopes, and the
base class of compile-time objects user code treats as values."""

from __future__ import annotations

from types import FunctionType


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


class Undecided:
    """What a name reads after a write the compiler cannot resolve: reading it fails
    (Note [Mutation at trace time]; here, not in srcgrad.frontend.aliases, since every
    read of a name checks for one and a trace with no write imports no aliases: issue 15)."""

    def __init__(self, message, hint, loc):
        self.message, self.hint, self.loc = message, hint, loc

    def __repr__(self):
        return "<undecided>"


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


# Note [Mixins imported on demand]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The tracer's loop statements (srcgrad.frontend.loops.Loops, with Unrolling and
# Iteration) are methods of the tracer, written as a mixin, and so are Mutation's
# in-place writes (srcgrad.frontend.inplace, layout and aliases); most compiled
# functions have no loop and no write, and importing those modules (and what they
# import) is a good part of a cold compile's start-up (issue 15). So the class that
# would inherit the mixins defines `__getattr__` instead, which Python calls only for a
# name the normal lookup misses: it imports the mixins' modules and returns their
# attribute bound to the object, as inheritance would have (a method bound, a
# staticmethod plain), and keeps a method in the object's own dict, so that each name
# misses once per object (a miss costs microseconds: a loop's trace looks its methods
# up thousands of times). Two limits follow: the mixins' methods may not call `super()`
# (none does), and a class that overrides one of their methods cannot reach it with
# `super()` (the tracer's `_length` calls Iteration's by name).
def mixed_in(obj, name, *classes):
    """The attribute `name` of the first of `classes` (in each one's MRO) that has it,
    bound to `obj` as if `obj`'s class inherited `classes` in this order (Note [Mixins
    imported on demand])."""
    for cls in classes:
        for klass in cls.__mro__[:-1]:  # (not `object`'s)
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                value = attr.__get__(obj, type(obj)) if hasattr(attr, "__get__") else attr
                if isinstance(attr, (FunctionType, staticmethod)):
                    obj.__dict__[name] = value  # (its next lookup is an ordinary one)
                return value
    raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
