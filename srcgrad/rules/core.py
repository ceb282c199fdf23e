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

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RULES: dict = {}  # rule name -> Rule


@dataclass(frozen=True)
class Rule:
    name: str  # the primitive's name in IR and in error messages
    signature: str  # its parameters, as in a `def`: "x, axis=None, keepdims=False"
    render: str  # the primal in generated code, over the parameter names
    vjp: dict = field(default_factory=dict)  # parameter -> cotangent formula
    jvp: dict = field(default_factory=dict)  # parameter -> tangent contribution formula
    targets: tuple = ()  # dotted names of the Python callables that mean this primitive
    method: str | None = None  # `x.<method>(...)` means `render` with x as first parameter
    # `x.reshape(2, 3)`: extra positional method arguments are packed into the
    # second parameter, as NumPy's varargs methods do.
    method_varargs: bool = False
    attribute: str | None = None  # `x.<attribute>` means this primitive applied to x
    elementwise: bool = False  # output shape is the broadcast of the array parameters
    nondiff: bool = False  # derivative is zero everywhere (or undefined): outputs are inactive
    static_out: bool = False  # outputs are shapes/ints/bools, never arrays that carry derivatives
    # Number of outputs: an int, or a function of the bound static arguments
    # (a dict name -> value) for primitives like `split`.
    nout: int | Callable = 1
    # A structural primitive with nested blocks (`cond`, loops: Note [Regions]) or a
    # side effect (a tape push): passes treat these specially, never as formulas.
    control: bool = False
    effect: bool = False  # must run even when no output is read
    # Talks to the outside world (`print`): runs where the user's code runs it and never
    # at compile time (not folded on static arguments, not run by the shape probe).
    io: bool = False
    doc: str = ""  # a line for the conventions table (kinks, ties, zeros)

    @property
    def params(self) -> tuple:
        return tuple(self.py_signature.parameters)

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


_SIGNATURES: dict = {}


def _signature(text: str) -> inspect.Signature:
    sig = _SIGNATURES.get(text)
    if sig is None:
        namespace: dict = {}
        exec(f"def _({text}): pass", namespace)  # the table is ours: trusted text
        sig = _SIGNATURES[text] = inspect.signature(namespace["_"])
    return sig


def table_fingerprint() -> str:
    """Hash of the rule table and helper sources: part of every cache key."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in sorted(p.name for p in here.glob("*.py")):
        h.update(name.encode())
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]
