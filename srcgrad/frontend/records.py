"""Namedtuples and dataclasses as arguments of compiled functions (Note [Records] in
srcgrad.ir.tree): a parameter bound to a record reads its fields with `p.W`, and a
dataclass's methods and properties (`model(x)`, `model.predict(x)`, `self.W` inside
them) are inlined with `self` bound to the record."""

from __future__ import annotations

import inspect

from srcgrad.frontend.parse import parse_function
from srcgrad.frontend.scope import TraceObject
from srcgrad.ir.core import Const


def bind(cls, fields: dict):
    """The traced value of a record argument: a namedtuple of the fields' values (so
    indexing and unpacking work as in Python), or a `Record` for a dataclass."""
    if issubclass(cls, tuple):
        return cls(**fields)
    return Record(cls, fields)


class Record(TraceObject):
    """A dataclass instance whose fields are traced values."""

    def __init__(self, cls, fields: dict):
        self.cls, self.fields = cls, fields

    def trace_getattr(self, tracer, name, node):
        if name in self.fields:
            return self.fields[name]
        attr = inspect.getattr_static(self.cls, name, None)
        if isinstance(attr, property) and attr.fget is not None:
            return tracer.inline(parse_function(attr.fget), [self], {}, node)
        if attr is None or callable(attr) or isinstance(attr, (staticmethod, classmethod)):
            tracer.fail(node, f"`{self.cls.__name__}.{name}` as a value (call the method instead)"
                        if attr is not None else f"the attribute `.{name}` of a "
                        f"`{self.cls.__name__}` (it has no such field)")
        return Const(attr)  # a class-level constant

    def trace_setattr(self, tracer, name, value, node):
        tracer.fail(node, f"assigning to `.{name}` of a `{self.cls.__name__}` argument",
                    f"use a local name instead (`{name} = ...`) and read that")

    def trace_method(self, tracer, name, args, kwargs, node):
        attr = inspect.getattr_static(self.cls, name, None)
        if isinstance(attr, staticmethod):
            return tracer.inline(parse_function(attr.__func__), list(args), kwargs, node)
        if not inspect.isfunction(attr):
            tracer.fail(node, f"calling `{self.cls.__name__}.{name}`, which is not a method "
                        "defined in Python", "call the function it holds directly (`np.tanh(x)` "
                        "for `act = np.tanh`), or define the method with `def`")
        return tracer.inline(parse_function(attr), [self, *args], kwargs, node)

    def __repr__(self):
        return f"<{self.cls.__name__} record>"


def record_fingerprint(cls) -> str:
    """The part of a cache key that changes when the class's methods change."""
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):  # defined where no source is (a namedtuple factory)
        return repr(getattr(cls, "_fields", cls))
