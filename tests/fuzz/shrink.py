"""Shrinking a failing program to a small repro that still fails the same way.

Works on the Python AST of the module source, so it shrinks any program (generated or
written by hand), and the repro is what `ast.unparse` prints. Candidates, largest first:
delete a statement (a helper, a Function class, a line in any block), replace an `if` by
one of its arms or a loop by one pass of its body, replace a condition by True/False,
replace an expression by one of its operands, make an integer smaller (this also shrinks
the argument shapes in `ARGS`). A candidate is kept when the oracle still reports a
failure with the same signature (Failure.signature) on the same transform; a candidate
NumPy cannot run, or the references cannot judge, is dropped as "discarded".
"""

from __future__ import annotations

import ast
import copy
import time
from pathlib import Path

from tests.fuzz import oracle


def _parents(tree) -> dict:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _slot(parent, node):
    """(field name, index or None) where node sits in parent."""
    for name, value in ast.iter_fields(parent):
        if value is node:
            return name, None
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is node:
                    return name, i
    return None, None


def _replace(parent, node, new) -> bool:
    name, i = _slot(parent, node)
    if name is None:
        return False
    if i is None:
        setattr(parent, name, new)
        return True
    seq = getattr(parent, name)
    if isinstance(new, list):
        seq[i:i + 1] = new
        if not seq and name in ("body", "orelse", "finalbody"):
            if name == "orelse":
                return True
            seq.append(ast.Pass())
    else:
        seq[i] = new
    return True


def _protected(node, parent) -> bool:
    """Statements the program cannot lose: imports, ARGS/OUTPUT, the entry point, its final return."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Assign) and isinstance(parent, ast.Module):
        return any(isinstance(t, ast.Name) and t.id in ("ARGS", "OUTPUT") for t in node.targets)
    if isinstance(node, ast.FunctionDef) and isinstance(parent, ast.Module) and node.name == "f":
        return True
    return False


def _loop_prefix(loop: ast.For) -> list:
    """Bindings that stand for the loop target on one pass: `i = 0`, `r = xs[0]`."""
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
        first = it.args[0] if len(it.args) > 1 else ast.Constant(0)
        return [ast.Assign([loop.target], first)]
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("zip", "enumerate"):
        return []
    return [ast.Assign([loop.target], ast.Subscript(it, ast.Constant(0)))]


def _edits(node, parent):
    """The candidate rewrites at one node: (description, replacement) pairs."""
    if isinstance(node, ast.stmt):
        if not _protected(node, parent):
            yield "delete", []
        if isinstance(node, ast.If):
            yield "then-arm", node.body
            if node.orelse:
                yield "else-arm", node.orelse
        if isinstance(node, ast.For):
            yield "one pass", _loop_prefix(node) + node.body
        if isinstance(node, ast.While):
            yield "one pass", node.body
        return
    if isinstance(node, ast.expr):
        if isinstance(parent, (ast.If, ast.While, ast.IfExp)) and getattr(parent, "test", None) is node:
            yield "true", ast.Constant(True)
            yield "false", ast.Constant(False)
            return
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 1:
            yield "smaller", ast.Constant(1)
            yield "smaller", ast.Constant(node.value - 1)
        for child in _operands(node):
            yield "operand", child


def _operands(node) -> list:
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.Call):
        out = [a for a in node.args if not isinstance(a, ast.Starred)]
        if isinstance(node.func, ast.Attribute) and not isinstance(node.func.value, ast.Name):
            out.append(node.func.value)  # (expr).sum() -> expr
        return out
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return [node.value]
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        return [] if isinstance(node.value, ast.Name) else [node.value]
    return []


def _without_argument(tree, i: int):
    """The program without f's i-th parameter (and its ARGS entry), or None."""
    trial = copy.deepcopy(tree)
    f = next((n for n in trial.body if isinstance(n, ast.FunctionDef) and n.name == "f"), None)
    args = next((n for n in trial.body if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") == "ARGS"), None)
    if f is None or args is None or not isinstance(args.value, ast.List) or len(f.args.args) < 2:
        return None
    if i >= len(f.args.args) or i >= len(args.value.elts):
        return None
    del f.args.args[i]
    del args.value.elts[i]
    return ast.unparse(trial)


def candidates(source: str, start: int = 0):
    """(node index, smaller program): one edit each, in the order of ast.walk (outer nodes first);
    index -1: a program with one argument fewer."""
    tree = ast.parse(source)
    count = sum(1 for _ in ast.walk(tree))
    if start == 0:
        for i in range(8):
            text = _without_argument(tree, i)
            if text is not None:
                yield 0, text
    for index in range(start, count):
        probe = copy.deepcopy(tree)
        nodes = list(ast.walk(probe))
        node = nodes[index]
        parents = _parents(probe)
        parent = parents.get(id(node))
        if parent is None:
            continue
        for _, replacement in list(_edits(node, parent)):
            trial = copy.deepcopy(tree)
            t_node = list(ast.walk(trial))[index]
            t_parent = _parents(trial)[id(t_node)]
            new = copy.deepcopy(replacement)
            if not _replace(t_parent, t_node, new):
                continue
            try:
                text = ast.unparse(ast.fix_missing_locations(trial))
                compile(text, "<candidate>", "exec")
            except (SyntaxError, ValueError, TypeError, RecursionError):
                continue
            yield index, text


def same_failure(failure: oracle.Failure):
    """The predicate: does a program fail with failure's signature on failure's transform?"""
    order = ("A",) if failure.call == "first call" else ("A", "B")

    def fails(program, directory, timeout) -> bool:
        result = oracle.check(program, directory, transforms=[failure.transform], order=order,
                              timeout=timeout)
        return any(f.signature() == failure.signature() for f in result.failures)

    return fails


def shrink(program, failure: oracle.Failure, directory: Path, *, budget: float = 90.0,
           timeout: float = 20.0):
    """The smallest program found within `budget` seconds that fails as `failure` does."""
    fails = same_failure(failure)
    best = program.source
    deadline = time.monotonic() + budget
    if failure.outcome == "hang":
        timeout = min(timeout, 5.0)
    start = 0
    while time.monotonic() < deadline:
        found = False
        for index, text in candidates(best, start):
            if time.monotonic() > deadline:
                break
            if len(text) >= len(best):
                continue
            spec = oracle.spec_from_source(text, program.seed)
            spec.features |= set(program.features)  # a subset of the program keeps its exclusions
            try:
                ok = fails(spec, directory, timeout)
            except Exception:  # noqa: BLE001 - a candidate that breaks the oracle is not smaller
                ok = False
            if ok:
                best, start, found = text, index, True
                break
        if not found:
            if start == 0:
                break
            start = 0  # one more pass from the top: earlier edits may apply now
    return oracle.spec_from_source(best, program.seed) if best != program.source else _as_spec(program)


def _as_spec(program):
    return oracle.Spec(program.seed, program.source, program.args, program.output, set(program.features))
