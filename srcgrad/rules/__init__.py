"""The derivative table (Note [The derivative table] in srcgrad.rules.core).

`lookup_callable`, `lookup_method` and `lookup_attribute` map what user code
calls to a rule; `FORMULA_GLOBALS` is the namespace rule formulas are resolved in.

Note [The table on demand]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A generated module needs only the helpers (`FORMULA_GLOBALS`, `HELPER_NAMES`), so
they are bound when this package is imported. The table itself (`RULES`, the
lookups, `defrule`) is imported on first use of one of those names (PEP 562):
building its ~300 rows and resolving their targets costs tens of milliseconds, and a
process whose modules all come from the disk cache never needs them (issue 15).
Every layer may keep `from srcgrad import rules` at its top: only reading
`rules.RULES` (or a lookup) pays for the table.
"""

from __future__ import annotations

import importlib
import math
import sys

import numpy

from srcgrad.rules import helpers

__all__ = ["RULES", "Rule", "defrule", "table_fingerprint", "lookup_callable",
           "lookup_method", "lookup_attribute", "FORMULA_GLOBALS", "HELPER_NAMES"]

# Formulas name NumPy as `xp` and the helpers by their bare names.
HELPER_NAMES = tuple(helpers.__all__)
FORMULA_GLOBALS = {"xp": numpy, "math": math, **{n: getattr(helpers, n) for n in HELPER_NAMES}}

_LAZY = frozenset({"RULES", "Rule", "defrule", "table_fingerprint", "lookup_callable",
                   "lookup_method", "lookup_attribute"})


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'srcgrad.rules' has no attribute {name!r}")
    _load_table()
    return globals()[name]


def __dir__():
    return sorted(set(globals()) | set(__all__))


def _load_table() -> None:
    """Import the table and bind its names here (Note [The table on demand])."""
    core = importlib.import_module("srcgrad.rules.core")  # not `from srcgrad.rules import`:
    importlib.import_module("srcgrad.rules.table")  # that asks this module's __getattr__; fills RULES

    by_id, by_method, by_attr = _index(core.RULES)
    rules = core.RULES

    def lookup_callable(obj):
        hit = by_id.get(id(obj))
        return rules[hit[1]] if hit is not None and hit[0] is obj else None

    def lookup_method(name: str):
        rule = by_method.get(name)
        return rules[rule] if rule else None

    def lookup_attribute(name: str):
        rule = by_attr.get(name)
        return rules[rule] if rule else None

    globals().update(RULES=rules, Rule=core.Rule, defrule=core.defrule,
                     table_fingerprint=core.table_fingerprint, lookup_callable=lookup_callable,
                     lookup_method=lookup_method, lookup_attribute=lookup_attribute)


def _resolve(dotted: str):
    module, _, attr = dotted.rpartition(".")  # (the attribute: after the last dot)
    return getattr(sys.modules.get(module) or importlib.import_module(module), attr)


def _index(rules: dict):
    by_id, by_method, by_attr = {}, {}, {}
    modules = sys.modules
    for rule in rules.values():
        for dotted in rule.targets:
            module, _, attr = dotted.rpartition(".")  # _resolve, inlined: ~300 targets
            try:
                obj = getattr(modules.get(module) or importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                continue  # e.g. a NumPy function this NumPy version lacks
            by_id[id(obj)] = (obj, rule.name)
        if rule.method:
            by_method[rule.method] = rule.name
        if rule.attribute:
            by_attr[rule.attribute] = rule.name
    for dunder, name in _OPERATOR_METHODS.items():  # `x.__mul__(y)` is `x * y` (issue 28)
        if name in rules:
            by_method.setdefault(dunder, name)
    return by_id, by_method, by_attr


_OPERATOR_METHODS = {"__neg__": "negative", "__abs__": "abs", "__add__": "add",
                     "__sub__": "subtract", "__mul__": "multiply", "__truediv__": "divide",
                     "__pow__": "power", "__matmul__": "matmul"}
