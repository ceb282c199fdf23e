"""A rule's render evaluated on values: what folding a row on static operands and the
shape probe running a variant's program compute (Note [Renders called directly]).

Kept apart from the expander (srcgrad.ir.expand), which folds through
`evaluate_static`, because the probe (srcgrad.passes.shapes) needs only this.
"""

from __future__ import annotations

import builtins
import keyword
import operator

import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Pack

_MISSING = object()  # a name the formula globals and the builtins do not bind


def evaluate_static(rule, operands):
    """Run a primitive on static operands at compile time."""
    values = [_static_value(operand) for operand in operands]
    try:
        return run_render(rule, values)
    except (ZeroDivisionError, OverflowError):  # Python raises where NumPy gives inf or nan
        numbers = [numpy.float64(v) if type(v) in (int, float) else v for v in values]
        with numpy.errstate(all="ignore"):
            value = run_render(rule, numbers)
        return float(value) if isinstance(value, numpy.floating) else value


def run_render(rule, values: list):
    """`rule`'s render on its parameters' values (in order), as an eval of its text with
    the formula globals and the parameters bound computes it (Note [Renders called
    directly])."""
    call = render_call(rule.render, rule.params) if len(values) == len(rule.params) else None
    if call is not None:
        return call(values)
    namespace = dict(rules.FORMULA_GLOBALS)
    namespace.update(zip(rule.params, values))
    return eval(render_code(rule.render), namespace)  # noqa: S307 (a rule's own render: trusted)


_CODES: dict = {}  # a rule's render -> its code object


def render_code(render: str):
    """A render compiled once per process (an eval of the text compiles it each time)."""
    code = _CODES.get(render)
    if code is None:
        code = _CODES[render] = compile(render, "<rule>", "eval")
    return code


# Note [Renders called directly]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The shape probe runs every op of a variant's program on the first call's arguments,
# and folding runs a row on static operands: each evaluated its render's text, compiled
# once per process, in a copy of the formula globals with the parameters bound. Most
# renders only call a function of those globals (`xp.tanh(x)`, `xp.sum(x, axis=axis,
# keepdims=keepdims)`, `unbroadcast(x, shape)`) or apply one operator to parameters
# (`x @ y`, `-x`, `x[index]`, `x.T`), and then the call is made directly: the same
# callable, found by the same names when the render runs, given the same values. The
# compiles were a fifth of a cold first gradient's probe (issue 15). Any other render
# (a constant argument, a nested call, a conditional expression) is evaluated as before.
# tests/test_compile_fast_paths.py runs every row of the table both ways.
_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "**": operator.pow, "%": operator.mod, "//": operator.floordiv, "@": operator.matmul,
           "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne, "&": operator.and_, "|": operator.or_,
           "^": operator.xor, "is": operator.is_, "is not": operator.is_not}
_UNARY = {"-": operator.neg, "+": operator.pos, "~": operator.invert}
_RENDER_CALLS: dict = {}  # (render, parameters) -> a function of their values, or None
_UNSEEN = object()


def render_call(render: str, params: tuple):
    """The direct call a render spells, as a function of its parameters' values, or None
    (Note [Renders called directly])."""
    key = (render, params)
    call = _RENDER_CALLS.get(key, _UNSEEN)
    if call is _UNSEEN:
        call = _RENDER_CALLS[key] = _direct_call(render, params)
    return call


def _direct_call(render: str, params: tuple):
    index = {name: i for i, name in enumerate(params)}
    if render in index:  # the parameter itself
        i = index[render]
        return lambda values: values[i]
    words = render.split(" ")
    if len(words) in (3, 4) and words[0] in index and words[-1] in index:
        fn = _BINARY.get(" ".join(words[1:-1]))
        if fn is not None:
            i, j = index[words[0]], index[words[-1]]
            return lambda values: fn(values[i], values[j])
    if render[:1] in _UNARY and render[1:] in index:
        fn, i = _UNARY[render[0]], index[render[1:]]
        return lambda values: fn(values[i])
    base, dot, attr = render.partition(".")
    if dot and base in index and _is_name(attr):
        i = index[base]
        return lambda values: getattr(values[i], attr)
    if render.endswith("]") and "[" in render:
        base, _, item = render[:-1].partition("[")
        if base in index and item in index:
            i, j = index[base], index[item]
            return lambda values: values[i][values[j]]
    return _call_form(render, index)


def _is_name(text: str) -> bool:
    return text.isascii() and text.isidentifier() and not keyword.iskeyword(text)


def _call_form(render: str, index: dict):
    """`f(a, b, k=c)`: a dotted name of the formula globals (or a builtin) called with
    parameters, positional first; None for any other render."""
    head, paren, rest = render.partition("(")
    if not paren or not rest.endswith(")"):
        return None
    path = head.split(".")
    if path[0] in index or not all(_is_name(name) for name in path):
        return None
    positional, keywords = [], {}
    for item in rest[:-1].split(", ") if rest != ")" else ():
        name, eq, value = item.partition("=")
        if not eq:
            if keywords or name not in index:  # (a positional after a keyword: not Python)
                return None
            positional.append(index[name])
        elif value not in index or name in keywords or not _is_name(name):
            return None
        else:
            keywords[name] = index[value]
    root, attrs = path[0], path[1:]

    def call(values):
        fn = rules.FORMULA_GLOBALS.get(root, _MISSING)
        if fn is _MISSING:
            fn = getattr(builtins, root, _MISSING)
            if fn is _MISSING:
                raise NameError(f"name {root!r} is not defined")
        for attr in attrs:
            fn = getattr(fn, attr)
        return fn(*[values[i] for i in positional], **{k: values[i] for k, i in keywords.items()})

    return call


def _static_value(operand):
    if isinstance(operand, Const):
        return operand.value
    if isinstance(operand, Pack):
        items = tuple(_static_value(i) for i in operand.items)
        if operand.style == "slice":
            return slice(*items)
        return items if operand.style == "tuple" else list(items)
    raise TypeError(operand)
