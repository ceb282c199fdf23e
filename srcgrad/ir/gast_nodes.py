"""ast trees as gast's nodes, without gast's converter (Note [Formulas without gast's
converter]): rule formulas (srcgrad.ir.expand) and, before Python 3.12, a user
function's tree (srcgrad.frontend.parse).
"""

from __future__ import annotations

import ast
import sys

import gast

# Note [Formulas without gast's converter]
# `gast.parse` is `ast.parse` and gast's ast_to_gast, a NodeTransformer that visits every
# node and builds each gast node through a Python __init__: 80% of a formula's parse, ~0.6
# ms of a cold first gradient's 9 formulas (issue 15). Expression nodes need none of its
# special cases but Name's (gast adds `annotation` and `type_comment`), so `to_gast` makes
# the same nodes directly: the gast class of the same name, the same fields and positions.
# A user function's tree (srcgrad.frontend.parse) goes through it too where gast's other
# special cases are the ones below, before Python 3.12 (a parameter is a Name in the
# Param context, an `except ... as e` names a Name, a def or class gets empty
# `type_params`): gast's converter took 0.2 ms of a cold first gradient's parse.
# tests/test_compile_fast_paths.py checks it against gast.parse on every formula of the
# table and on every source file of this repository.
_GAST_CLASSES: dict = {}  # ast node class -> its gast class, or the function converting it
FUNCTIONS_WITHOUT_GAST = sys.version_info < (3, 12)  # (3.12: type parameters, gast's own cases)


def to_gast(node):
    """What gast.ast_to_gast makes of an ast expression, or of any ast tree where
    FUNCTIONS_WITHOUT_GAST (Note [Formulas without gast's converter])."""
    if isinstance(node, list):
        return [to_gast(n) for n in node]
    if not isinstance(node, ast.AST):
        return node
    cls = node.__class__
    target = _GAST_CLASSES.get(cls)
    if target is None:
        target = _GAST_CLASSES[cls] = _SPECIAL.get(cls) or getattr(gast, cls.__name__, _unknown)
    if target.__class__ is not type:  # (gast's special cases)
        return target(node)
    new = target.__new__(target)
    fields = new.__dict__
    for name in node._fields:
        fields[name] = to_gast(getattr(node, name))
    if cls is ast.Name:
        fields["annotation"] = fields["type_comment"] = None
    for name in node._attributes:
        fields[name] = getattr(node, name)
    return new


def _unknown(node):
    return None  # (as gast's converter: a node gast does not know becomes None)


def _gast_parameter(node):
    """gast's parameter: a Name in the Param context with the arg's annotation."""
    new = gast.Name(node.arg, gast.Param(), to_gast(node.annotation), node.type_comment)
    for name in node._attributes:
        setattr(new, name, getattr(node, name))
    return new


def _gast_handler(node):
    """gast's `except T as name`: the name a Name (Store context, no position)."""
    new = gast.ExceptHandler(to_gast(node.type), None if node.name is None else
                             gast.Name(node.name, gast.Store(), None, None), to_gast(node.body))
    for name in node._attributes:
        setattr(new, name, getattr(node, name))
    return new


def _gast_definition(node):
    """A def or class before Python 3.12: gast gives it empty `type_params`."""
    target = getattr(gast, node.__class__.__name__)
    new = target(*[to_gast(getattr(node, name)) for name in node._fields], [])
    for name in node._attributes:
        setattr(new, name, getattr(node, name))
    return new


_SPECIAL = {ast.arg: _gast_parameter, ast.ExceptHandler: _gast_handler,
            **{cls: _gast_definition for cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
               if "type_params" not in cls._fields}}
