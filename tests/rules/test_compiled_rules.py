"""Every row of the derivative table, through the compiler, first and second order.

For each case of tests/rules/cases.py a tiny module is written to disk:

    def f(x, y, w0):                 # w0: fixed random weights on the output
        return xp.sum(w0 * <the row's primal>)
    GRAD = sg.grad(f, wrt=(0, 1))
    def h(x, y, w0, v0, v1):         # a directional derivative of the gradient
        gx, gy = GRAD(x, y, w0)
        return xp.sum(v0 * gx) + xp.sum(v1 * gy)

and `sg.grad(f)` and `sg.grad(h)` (which differentiates srcgrad's own generated
gradient code) are checked against central differences in float64.
"""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

import srcgrad as sg
from srcgrad import rules
from tests.conftest import numeric_grad

cases = pytest.importorskip("tests.rules.cases")

_counter = itertools.count()


def _differentiable(rule, value):
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def _build(tmp_path, rule, args: dict):
    """Write the module for one case; (module, wrt indices, argument values)."""
    params, values, wrt, pieces = [], [], [], {}
    for name in rule.params:
        value = args[name]
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
            names = [f"{name}{i}" for i in range(len(value))]
            for n, v in zip(names, value):
                if name in rule.vjp and v.dtype.kind == "f":
                    wrt.append(len(params))
                params.append(n)
                values.append(v)
            joined = ", ".join(names)
            pieces[name] = f"[{joined}]" if isinstance(value, list) else f"({joined},)"
        elif isinstance(value, np.ndarray):
            if name in rule.vjp and _differentiable(rule, value):
                wrt.append(len(params))
            params.append(name)
            values.append(value)
            pieces[name] = name
        else:
            pieces[name] = repr(value)
    primal = rule.render
    env = {"xp": np, **rules.FORMULA_GLOBALS, **{p: v for p, v in zip(params, values)}}
    env.update({k: eval(v, env) for k, v in pieces.items() if k not in env})  # noqa: S307
    expr = _substitute(primal, pieces)
    out = eval(expr, env)  # noqa: S307
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    rng = np.random.default_rng(7)
    weights = [rng.standard_normal(np.shape(o)) for o in outs]
    w_names = [f"w{i}" for i in range(len(outs))]
    v_names = [f"v{i}" for i in range(len(wrt))]
    total = " + ".join(
        f"xp.sum({w} * _out[{i}])" if isinstance(out, (tuple, list)) else f"xp.sum({w} * _out)"
        for i, w in enumerate(w_names))
    grads = ", ".join(f"_g{i}" for i in range(len(wrt)))
    source = "\n".join([
        "import math",
        "import numpy as xp",
        "import srcgrad as sg",
        "from srcgrad.rules.helpers import *  # noqa: F403",
        "",
        f"def f({', '.join(params + w_names)}):",
        f"    _out = {expr}",
        f"    return {total}",
        "",
        f"GRAD = sg.grad(f, wrt={tuple(wrt)!r})",
        "",
        f"def h({', '.join(params + w_names + v_names)}):",
        f"    {grads}, = GRAD({', '.join(params + w_names)})",
        "    return " + " + ".join(f"xp.sum({v} * _g{i})" for i, v in enumerate(v_names)),
        "",
    ])
    path = tmp_path / f"rule_case_{next(_counter)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, wrt, values + weights


def _substitute(render, pieces):
    import ast

    tree = ast.parse(render, mode="eval")

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in pieces:
                return ast.parse(pieces[node.id], mode="eval").body
            return node

    return ast.unparse(Sub().visit(tree))


# Rows that read only one triangle of a symmetric input: their gradient is defined
# on symmetric matrices, so compare the symmetric parts.
_SYMMETRIC_INPUT = {"cholesky", "eigh", "eigvalsh"}


def _sym(a):
    a = np.asarray(a)
    return (a + np.swapaxes(a, -1, -2)) / 2


def compiled_cases(kind: str):
    """Cases with a float operand the compiled module differentiates."""
    return [c for c in cases.differentiable_cases(kind)
            if any(isinstance(v, np.ndarray) or isinstance(v, np.generic) or (
                isinstance(v, (list, tuple)) and v and isinstance(v[0], np.ndarray))
                for p, v in c[2].items() if p in getattr(c[0], kind))]


VJP_CASES = compiled_cases("vjp")


@pytest.mark.parametrize("rule,case_id,args", VJP_CASES, ids=cases.case_ids(VJP_CASES))
def test_rule_first_and_second_order_through_the_compiler(tmp_path, rule, case_id, args):
    module, wrt, values = _build(tmp_path, rule, args)
    assert wrt, "a differentiable case must have a float operand"
    _check_grad(rule, module.f, values, wrt, "first order", rtol=1e-5, atol=1e-6)
    rng = np.random.default_rng(3)
    directions = [rng.standard_normal(np.shape(values[i])) for i in wrt]
    _check_grad(rule, module.h, values + directions, wrt, "second order", rtol=1e-4, atol=1e-5)


def _check_grad(rule, fn, values, wrt, order, rtol, atol):
    """sg.grad of `fn` against central differences, for every argument in `wrt`."""
    grads = sg.grad(fn, wrt=tuple(wrt))(*values)
    for i, g in zip(wrt, grads):
        expected = numeric_grad(fn, values, i)
        if rule.name in _SYMMETRIC_INPUT:
            g, expected = _sym(g), _sym(expected)
        np.testing.assert_allclose(g, expected, rtol=rtol, atol=atol, err_msg=f"{order}, argument {i}")
