"""The derivative table (Note [The derivative table] in srcgrad.rules.core).

`lookup_callable`, `lookup_method` and `lookup_attribute` map what user code
calls to a rule; `FORMULA_GLOBALS` is the namespace rule formulas are resolved in.
"""

from __future__ import annotations

import importlib
import math

import numpy

from srcgrad.rules import helpers
from srcgrad.rules import table as _table  # noqa: F401  (fills RULES)
from srcgrad.rules.core import RULES, Rule, defrule, table_fingerprint

__all__ = ["RULES", "Rule", "defrule", "table_fingerprint", "lookup_callable",
           "lookup_method", "lookup_attribute", "FORMULA_GLOBALS", "HELPER_NAMES"]

# Formulas name NumPy as `xp` and the helpers by their bare names.
HELPER_NAMES = tuple(helpers.__all__)
FORMULA_GLOBALS = {"xp": numpy, "math": math, **{n: getattr(helpers, n) for n in HELPER_NAMES}}


def _resolve(dotted: str):
    module, _, attr = dotted.rpartition(".")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _index():
    by_id, by_method, by_attr = {}, {}, {}
    for rule in RULES.values():
        for dotted in rule.targets:
            try:
                obj = _resolve(dotted)
            except (ImportError, AttributeError):
                continue  # e.g. a NumPy function this NumPy version lacks
            by_id[id(obj)] = (obj, rule.name)
        if rule.method:
            by_method[rule.method] = rule.name
        if rule.attribute:
            by_attr[rule.attribute] = rule.name
    return by_id, by_method, by_attr


_BY_ID, _BY_METHOD, _BY_ATTRIBUTE = _index()


def lookup_callable(obj) -> Rule | None:
    hit = _BY_ID.get(id(obj))
    return RULES[hit[1]] if hit is not None and hit[0] is obj else None


def lookup_method(name: str) -> Rule | None:
    rule = _BY_METHOD.get(name)
    return RULES[rule] if rule else None


def lookup_attribute(name: str) -> Rule | None:
    rule = _BY_ATTRIBUTE.get(name)
    return RULES[rule] if rule else None
