"""Custom Function classes (`sg.autograd.Function` subclasses) as the compiler sees them:
recognised, and their methods parsed once per class (shared with the eager runtime).
How a call of one is traced: srcgrad.frontend.function."""

from __future__ import annotations

import weakref

from srcgrad.errors import CompileError
from srcgrad.frontend.parse import FunctionSource, parse_function
from srcgrad.ir.core import Fields, Frozen


class ParsedFunction(Frozen, Fields):
    """A Function subclass with its methods parsed (for the compiler and the runtime).
    A `@dataclass(frozen=True, eq=False)` written out (srcgrad.ir.core.Loc: issue 15)."""

    __match_args__ = ("cls", "name", "forward", "setup_context", "backward", "jvp",
                      "once_differentiable")

    def __init__(self, cls: type, name: str, forward: FunctionSource,
                 setup_context: FunctionSource | None, backward: FunctionSource | None,
                 jvp: FunctionSource | None, once_differentiable: bool):
        set_ = object.__setattr__
        set_(self, "cls", cls)
        set_(self, "name", name)  # the class name; the backward node is `<name>Backward`
        set_(self, "forward", forward)  # takes ctx first unless `setup_context` is set
        set_(self, "setup_context", setup_context)  # the `setup_context(ctx, inputs, output)` style
        set_(self, "backward", backward)  # `backward`, or its alias `vjp`; None if neither
        set_(self, "jvp", jvp)
        set_(self, "once_differentiable", once_differentiable)  # backward had @once_differentiable

    @property
    def node_name(self) -> str:
        return f"{self.name}Backward"


_PARSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_function_class(value) -> bool:
    return isinstance(value, type) and getattr(value, "_srcgrad_function", False)


def applied_class(callee):
    """The Function subclass when `callee` is its bound `apply`, else None."""
    owner = getattr(callee, "__self__", None)
    if is_function_class(owner) and getattr(callee, "__name__", None) == "apply":
        return owner
    return None


def parse_function_class(cls, loc=None) -> ParsedFunction:
    """Parse `cls`'s static methods (cached per class); CompileError on torch's class errors."""
    hit = _PARSED.get(cls)
    if hit is not None:
        return hit
    from srcgrad.autograd.function import Function

    def overridden(name):
        return getattr(cls, name) is not getattr(Function, name)

    if not overridden("forward"):
        raise CompileError.at(loc, "You must implement the forward function for custom "
                              "autograd.Function.")
    if overridden("backward") and overridden("vjp"):
        raise CompileError.at(loc, "Implementing both 'backward' and 'vjp' for a custom Function "
                              "is not allowed. You should only implement one of them.")
    backward = cls.backward if overridden("backward") else cls.vjp if overridden("vjp") else None
    parsed = ParsedFunction(
        cls=cls, name=cls.__name__, forward=parse_function(cls.forward),
        setup_context=parse_function(cls.setup_context) if overridden("setup_context") else None,
        backward=parse_function(backward) if backward is not None else None,
        jvp=parse_function(cls.jvp) if overridden("jvp") else None,
        once_differentiable=bool(getattr(backward, "_srcgrad_once_differentiable", False)))
    _PARSED[cls] = parsed
    return parsed
