"""What a value is, for a message about code that reads it as something else: an
argument compiled code reads as an array (`self.w` of a bound method's `self`,
`round(T / dt)` of float arguments). The tracer (srcgrad.frontend.trace) calls these
where it refuses such code; they only describe, never decide."""

from __future__ import annotations

import ast

import gast

from srcgrad.ir.core import Var


def not_an_array(tracer, node, name, fn):
    """`p.w` of a parameter compiled code reads as an array: say what `p` is."""
    read = f"`{name}.{node.attr}`"
    owner = getattr(fn, "__self__", None)
    if owner is not None and name == fn.__code__.co_varnames[0]:  # the bound `self`
        cls = type(owner).__name__
        call = f"sg.grad({cls}.{fn.__name__}, wrt=1)({cls.lower()}, ...)"
        how = (f"differentiate `{call}`: a dataclass argument's fields are arguments"
               if hasattr(type(owner), "__dataclass_fields__") else
               f"make {cls} a dataclass (its fields are then arguments) and differentiate "
               f"`{call}`, or pass `{name}.{node.attr}` as an argument")
        tracer.error(node, f"{read}: `{name}` is the {cls} object the method "
                         f"`{fn.__name__}` is bound to, which a transform of the bound "
                         f"method reads as an array (a {cls} object is not an array)", how)
    tracer.error(node, f"{read}: compiled code reads the argument `{name}` as an array, and "
                     f"an array has no attribute `.{node.attr}`",
               "a dataclass or namedtuple argument's fields are read as fields; pass other "
               "objects' values as arguments")


def from_arguments(tracer, node, value) -> str:
    """` (`T / dt`, computed from the arguments `T`, `dt`: ...)` for `round(T / dt)`:
    what the value is, where arguments (Python floats too) are arrays; '' where it
    comes from no argument."""
    sources, stack, seen = [], [value], set()
    made = {out: op for op in tracer.ops for out in op.outs}
    params = getattr(tracer, "_parameters", {})
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in params:
            sources.append(params[v][0])
        elif v in made:
            stack += [a for a in made[v].args if isinstance(a, Var)]
    if not sources or not node.args:
        return ""
    text = ast.unparse(gast.gast_to_ast(node.args[0]))  # (no parentheses around it)
    what = "the argument" if sources == [text] else \
        f"computed from the argument{'s' if len(sources) > 1 else ''} " + ", ".join(
            f"`{p}`" for p in sorted(sources))
    return (f" (`{text}`, {what}: compiled code reads every argument, a Python float "
            "too, as an array)")
