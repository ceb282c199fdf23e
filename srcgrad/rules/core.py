"""The derivative table's row type and registry.

Note [The derivative table]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
Every primitive srcgrad can differentiate is one `Rule`: how its primal is written
(`render`), which Python objects call it (`targets`, `method`, `attribute`), and
its derivatives as small Python *formulas*:

* `vjp[p]` is the cotangent of parameter `p`, an expression over the parameter
  names, `ans` (the primal output) and `g` (the output's cotangent). For a
  multi-output primitive `ans` and `g` are tuples.
* `jvp[p]` is the contribution of parameter `p`'s tangent `p_t` to the output
  tangent, an expression over the parameter names, `ans` and `p_t`. The output
  tangent is the sum of the contributions of the active parameters.

Formulas are ordinary NumPy-subset Python: `xp.<fn>` for NumPy functions and the
helpers in `srcgrad.rules.helpers`. The compiler parses them with the same
frontend that parses user code and inlines them, so every function a formula
calls must itself be a row of the table: that is what makes the generated
gradient differentiable again (second and higher order). Static parameters
(`axis`, `keepdims`) are constants at compile time, so a formula may branch on
them with a conditional expression and the branch is folded away.

What a backward must save is derived from the formulas' free variables, never
declared by hand (see srcgrad.passes.saved).
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable

from srcgrad.ir.core import FACTORY, FrozenFields

RULES: dict = {}  # rule name -> Rule


_FIELDS = ("name", "signature", "render", "vjp", "jvp", "targets", "method", "method_varargs",
           "attribute", "elementwise", "nondiff", "static_out", "nout", "control", "effect",
           "io", "alias_check", "doc")
class Rule(FrozenFields):
    """One row of the table (Note [The derivative table]), immutable.

    Written out as `@dataclass(frozen=True)` would make it (the same constructor,
    equality, hash, repr and FrozenInstanceError), not made by the decorator: generating
    and compiling that class's methods cost a compiling process ~6 ms of start-up, more
    than building every row (issue 15)."""

    __match_args__ = _FIELDS

    def __init__(self, name: str, signature: str, render: str, vjp: dict = FACTORY,
                 jvp: dict = FACTORY, targets: tuple = (), method: str | None = None,
                 method_varargs: bool = False, attribute: str | None = None,
                 elementwise: bool = False, nondiff: bool = False, static_out: bool = False,
                 nout: int | Callable = 1, control: bool = False, effect: bool = False,
                 io: bool = False, alias_check: bool = False, doc: str = ""):
        # The fields, as the frozen dataclass's __init__ sets them, in one update of the
        # instance dict (a setattr each cost the table's ~230 rows 0.3 ms: issue 15).
        vars(self).update(
            name=name,  # the primitive's name in IR and in error messages
            signature=signature,  # its parameters, as in a `def`: "x, axis=None, keepdims=False"
            render=render,  # the primal in generated code, over the parameter names
            vjp={} if vjp is FACTORY else vjp,  # parameter -> cotangent formula
            jvp={} if jvp is FACTORY else jvp,  # parameter -> tangent contribution formula
            targets=targets,  # dotted names of the Python callables that mean this primitive
            method=method,  # `x.<method>(...)` means `render` with x as first parameter
            # `x.reshape(2, 3)`: extra positional method arguments are packed into the
            # second parameter, as NumPy's varargs methods do.
            method_varargs=method_varargs,
            attribute=attribute,  # `x.<attribute>` means this primitive applied to x
            elementwise=elementwise,  # output shape is the broadcast of the array parameters
            # derivative is zero everywhere (or undefined): outputs are inactive
            nondiff=nondiff,
            # outputs are shapes/ints/bools, never arrays that carry derivatives
            static_out=static_out,
            # Number of outputs: an int, or a function of the bound static arguments
            # (a dict name -> value) for primitives like `split`.
            nout=nout,
            # A structural primitive with nested blocks (`cond`, loops: Note [Regions]) or a
            # side effect (a tape push): passes treat these specially, never as formulas.
            control=control,
            effect=effect,  # must run even when no output is read
            # Talks to the outside world (`print`): runs where the user's code runs it and never
            # at compile time (not folded on static arguments, not run by the shape probe).
            io=io,
            # The identity on its first operand, raising at run time where the arrays its
            # other operands hold share memory (`no_alias`: Note [Mutation at trace time]).
            # Passes read it so: the value is the first operand's (shapes, layout), the
            # others get no derivative, and they are never merged with equal values (cse).
            alias_check=alias_check,
            doc=doc,  # a line for the conventions table (kinks, ties, zeros)
        )

    def __repr__(self) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{f}={getattr(self, f)!r}' for f in _FIELDS)})"


    @property
    def params(self) -> tuple:
        names = _PARAMS.get(self.signature)  # (read per op by the passes: kept, not rebuilt)
        if names is None:
            names = _PARAMS[self.signature] = tuple(self.py_signature.parameters)
        return names

    @property
    def py_signature(self) -> inspect.Signature:
        return _signature(self.signature)


def defrule(name: str, signature: str, render: str, **fields) -> Rule:
    """Add one row to the table."""
    if name in RULES:
        raise ValueError(f"duplicate rule {name!r}")
    rule = Rule(name=name, signature=signature, render=render, **fields)
    # (that its formulas name its parameters is checked by tests/rules/test_table.py, not
    # here: parsing every signature cost a compiling process 5 ms of start-up)
    RULES[name] = rule
    return rule


_SIGNATURES: dict = {}  # signature text -> inspect.Signature
_PARAMS: dict = {}  # signature text -> its parameter names


def _signature(text: str) -> inspect.Signature:
    sig = _SIGNATURES.get(text)
    if sig is None:
        sig = _SIGNATURES[text] = plain_signature(text) or compiled_signature(text)
    return sig


def compiled_signature(text: str) -> inspect.Signature:
    """The signature of `def _(<text>): pass`."""
    namespace: dict = {}
    exec(f"def _({text}): pass", namespace)  # the table is ours: trusted text
    return inspect.signature(namespace["_"])


_NOT_PLAIN = object()
_WORDS = {"None": None, "True": True, "False": False}


def plain_signature(text: str) -> inspect.Signature | None:
    """`compiled_signature(text)` read without compiling a function, where each parameter
    is `name`, `*name`, a bare `*` or `name=<None, True, False, an int, a float written as
    Python writes it, or a string without quotes or backslashes in it>`; None for any other
    text. Compiling one and asking inspect cost
    ~80 microseconds a signature, 0.6 ms of a first gradient (issue 15)."""
    P = inspect.Parameter
    params, kind = [], P.POSITIONAL_OR_KEYWORD
    if not text.strip():
        return inspect.Signature([])
    for part in text.split(","):
        name, eq, default = (s.strip() for s in part.partition("="))
        if name == "*" and not eq:  # what follows is keyword-only
            kind = P.KEYWORD_ONLY
            continue
        if name.startswith("*") and not eq:
            name, star = name[1:], True
        else:
            star = False
        if not name.isidentifier() or keyword.iskeyword(name):
            return None
        if star:
            params.append(P(name, P.VAR_POSITIONAL))
            kind = P.KEYWORD_ONLY
        elif eq:
            value = _literal(default)
            if value is _NOT_PLAIN:
                return None
            params.append(P(name, kind, default=value))
        else:
            params.append(P(name, kind))
    try:
        return inspect.Signature(params)
    except ValueError:  # a parameter without a default after one with: the compile says so
        return None


def _literal(text: str):
    if text in _WORDS:
        return _WORDS[text]
    if text.isascii() and text.lstrip("-").isdigit() and str(int(text)) == text:
        return int(text)
    try:
        value = float(text)
        if repr(value) == text and value - value == 0:  # (`1e-05`, `0.0`; not `1.`, `nan`, `inf`)
            return value
    except ValueError:
        pass
    if len(text) >= 2 and text[0] in "\"'" and text[-1] == text[0] \
            and text[0] not in text[1:-1] and "\\" not in text:
        return text[1:-1]
    return _NOT_PLAIN


def table_fingerprint() -> str:
    """Hash of the rule table and helper sources: part of every cache key."""
    import hashlib  # (here: OpenSSL's load is ~3 ms of a compiling process's start-up)
    from pathlib import Path

    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in sorted(p.name for p in here.glob("*.py")):
        h.update(name.encode())
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]
