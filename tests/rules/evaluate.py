"""Evaluate a rule's primal and derivative formulas directly (no compiler).

The namespace is `FORMULA_GLOBALS` (`xp` is NumPy, the helpers by name) plus the
case's arguments, `ans`, `g` and the tangent `<param>_t`: exactly the names the
compiler binds when it inlines a formula.
"""

from __future__ import annotations

import functools

import numpy as np

from srcgrad.rules import FORMULA_GLOBALS


@functools.cache
def _code(text: str, label: str):
    return compile(text, f"<{label}>", "eval")


def primal(rule, args):
    return eval(_code(rule.render, f"{rule.name}.render"), {**FORMULA_GLOBALS, **args})  # noqa: S307


def multi(rule) -> bool:
    return rule.nout != 1


def outputs(rule, ans):
    """The outputs as a tuple (one element for single-output rules, none for `print`)."""
    if rule.nout == 0:
        return ()
    return tuple(ans) if multi(rule) else (ans,)


def vjp(rule, param, args, ans, g):
    env = {**FORMULA_GLOBALS, **args, "ans": ans, "g": g}
    return eval(_code(rule.vjp[param], f"{rule.name}.vjp[{param}]"), env)  # noqa: S307


def jvp(rule, param, args, ans, tangent):
    env = {**FORMULA_GLOBALS, **args, "ans": ans, f"{param}_t": tangent}
    return eval(_code(rule.jvp[param], f"{rule.name}.jvp[{param}]"), env)  # noqa: S307


def is_float_array(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def leaves(value):
    """The float arrays a parameter's value consists of (a sequence parameter has several)."""
    if is_float_array(value):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(is_float_array(v) for v in value):
        return list(value)
    return []


def differentiable_params(rule, args):
    return [p for p in rule.params if (p in rule.vjp or p in rule.jvp) and leaves(args.get(p))]


def rebuild(value, new_leaves):
    """`value` with its float leaves replaced (same container type)."""
    if is_float_array(value):
        return new_leaves[0]
    return type(value)(new_leaves)


def inner(a, b) -> float:
    return float(np.sum(np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)))
