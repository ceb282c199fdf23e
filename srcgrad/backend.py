"""Array namespaces: the one place that picks and binds `xp` for generated code.

Generated modules call one array namespace, `xp` (DESIGN decision 10), and the rule
helpers (srcgrad.rules.helpers) by their bare names. `module_globals(xp)` is what a
loaded module is bound to; `namespace_of(*arrays)` picks the namespace from a call's
arguments. NumPy is the only namespace today.
"""

from __future__ import annotations

import math

import numpy

from srcgrad import rules


def namespace_of(*values):
    """The array namespace of these arguments (NumPy for arrays, Python numbers and lists)."""
    return numpy


def module_globals(xp=numpy) -> dict:
    """The globals a generated module is loaded with, for namespace `xp`."""
    return {**rules.FORMULA_GLOBALS, "xp": xp, "math": math}
