"""Table-driven checks of every row of the derivative table.

Every formula is evaluated directly (tests/rules/evaluate.py) and checked against
central differences in float64: a VJP through ``<vjp(g), v> == <g, J v>`` for a
random cotangent g and direction v, a JVP against ``(f(x + eps v) - f(x - eps v)) / 2 eps``.
Structural tests make sure every row has a case and that every function a formula
calls is itself a row (so the compiler can differentiate generated gradients again).
"""

from __future__ import annotations

import ast
import importlib
import math
import zlib

import numpy as np
import pytest

from srcgrad import rules
from srcgrad.rules import HELPER_NAMES, RULES
from tests.rules import evaluate as ev
from tests.rules.cases import CASES, case_ids, differentiable_cases, iter_cases, symmetric_direction

EPS = 1e-6
RTOL = 1e-6

ALL_CASES = list(iter_cases())
CASE_IDS = [f"{rule.name}-{cid}" for rule, cid, _ in ALL_CASES]
VJP_CASES = list(differentiable_cases("vjp"))
JVP_CASES = list(differentiable_cases("jvp"))


# ---------------------------------------------------------------- coverage and structure

# Control-flow rows have no formulas: tests/test_control_flow.py runs each of them
# (differentiated against finite differences) instead of a case here.
STRUCTURAL = {"cond", "for_range", "while_loop", "tape_new", "tape_push", "tape_pop", "tape_len",
              "tape_copy"}


# Rows that exist only at a pole, where no finite difference can judge them: torch's
# values there are pinned by the named test instead.
POLE_ONLY = {"torch_var_nodof": "tests/autograd/test_kinks_vs_torch.py"}


def test_every_rule_has_a_case():
    missing = sorted(name for name in RULES if not CASES.get(name) and name not in STRUCTURAL
                     and name not in POLE_ONLY)
    assert not missing, f"rules without a test case in tests/rules/cases.py: {missing}"
    assert STRUCTURAL <= set(RULES), "a structural row was renamed: update STRUCTURAL"


def test_cases_name_rules():
    assert not sorted(set(CASES) - set(RULES))


def test_table_size():
    assert len(RULES) >= 80


@pytest.mark.parametrize("name", sorted(RULES))
def test_row_is_complete(name):
    rule = RULES[name]
    if rule.control:  # differentiated structurally (srcgrad/passes/vjp_control.py)
        assert not rule.vjp and not rule.jvp and name in STRUCTURAL
        return
    if rule.static_out:
        assert rule.nondiff, "a static output has no derivative"
    if rule.nondiff:
        assert not rule.vjp and not rule.jvp, "a nondiff row has no formulas"
        return
    assert rule.vjp, "a differentiable row needs VJP formulas"
    assert set(rule.vjp) == set(rule.jvp), "every differentiable parameter needs VJP and JVP"
    assert set(rule.vjp) <= set(rule.params)


def test_targets_resolve():
    for rule in RULES.values():
        for dotted in rule.targets:
            module, _, attr = dotted.rpartition(".")
            obj = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
            assert rules.lookup_callable(obj) is not None, dotted


def test_one_rule_per_callable_method_attribute():
    seen_obj, seen_method, seen_attr = {}, {}, {}
    for rule in RULES.values():
        for dotted in rule.targets:
            obj = rules._resolve(dotted)
            assert seen_obj.setdefault(id(obj), rule.name) == rule.name, \
                f"{dotted} is claimed by {seen_obj[id(obj)]} and {rule.name}"
        if rule.method:
            assert seen_method.setdefault(rule.method, rule.name) == rule.name, rule.method
        if rule.attribute:
            assert seen_attr.setdefault(rule.attribute, rule.name) == rule.name, rule.attribute


def test_every_helper_has_a_row():
    targeted = {t for r in RULES.values() for t in r.targets}
    for name in HELPER_NAMES:
        assert f"srcgrad.rules.helpers.{name}" in targeted, name


# Operators a formula may use, and the rows that define their derivatives.
_BINOPS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide",
           ast.Pow: "power", ast.MatMult: "matmul", ast.Mod: "mod", ast.FloorDiv: "floor_divide",
           ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor"}
_UNARY = {ast.USub: "negative", ast.UAdd: "positive", ast.Invert: "invert"}
_COMPARE = {ast.Lt: "less", ast.LtE: "less_equal", ast.Gt: "greater", ast.GtE: "greater_equal",
            ast.Eq: "equal", ast.NotEq: "not_equal"}
_CONSTANT_ATTRIBUTES = {"inf"}


def _target_objects():
    objs = {}
    for rule in RULES.values():
        for dotted in rule.targets:
            obj = rules._resolve(dotted)
            objs[id(obj)] = obj
    return objs


def _xp_attribute(node):
    """`xp.a.b` -> the NumPy object, or None when node is not such a chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not (isinstance(node, ast.Name) and node.id == "xp"):
        return None, None
    obj = np
    for part in reversed(parts):
        obj = getattr(obj, part)
    return obj, ".".join(reversed(parts))


def _dynamic_names(rule, tree):
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and (n.id in ("g", "ans") or n.id.endswith("_t"))}


def _check_formula(rule, text, objs, where):
    tree = ast.parse(text, mode="eval")
    problems = []
    static_nodes = set()
    for node in ast.walk(tree):
        # Conditions of conditional expressions and boolean operators are static:
        # folded at compile time, so they may use `is`, `and`, `not` freely, but
        # must not depend on arrays the formula computes with.
        if isinstance(node, ast.IfExp):
            roots = [node.test]
        elif isinstance(node, ast.BoolOp) or (isinstance(node, ast.UnaryOp)
                                              and isinstance(node.op, ast.Not)):
            roots = [node]
        else:
            continue
        for root in roots:
            for sub in ast.walk(root):
                static_nodes.add(id(sub))
                if isinstance(sub, ast.Call):
                    problems.append(f"call in a static condition: {ast.unparse(sub)}")
            if _dynamic_names(rule, root):
                problems.append(f"static condition uses g/ans/tangents: {ast.unparse(root)}")
    for node in ast.walk(tree):
        if id(node) in static_nodes:
            continue
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                ok = func.id in HELPER_NAMES and any(
                    f"srcgrad.rules.helpers.{func.id}" in r.targets for r in RULES.values())
                if not ok:
                    problems.append(f"call of {func.id!r}: not a helper with a row")
            else:
                obj, dotted = _xp_attribute(func)
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                        and func.value.id == "math":  # the scalar rows (math_exp ...)
                    obj, dotted = getattr(math, func.attr, None), f"math.{func.attr}"
                if obj is None:
                    problems.append(f"call of {ast.unparse(func)!r}: only xp.<fn> and helpers")
                elif id(obj) not in objs:
                    problems.append(f"xp.{dotted} has no row")
            if any(isinstance(a, ast.Starred) for a in node.args) or any(
                    k.arg is None for k in node.keywords):
                problems.append("*args/**kwargs in a call")
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            problems.append("attribute store")
        elif isinstance(node, ast.BinOp):
            if _BINOPS.get(type(node.op)) not in RULES:
                problems.append(f"operator {type(node.op).__name__} has no row")
        elif isinstance(node, ast.UnaryOp):
            if _UNARY.get(type(node.op)) not in RULES:
                problems.append(f"operator {type(node.op).__name__} has no row")
        elif isinstance(node, ast.Compare):
            for op in node.ops:
                if _COMPARE.get(type(op)) not in RULES:
                    problems.append(f"comparison {type(op).__name__} outside a static condition")
        elif isinstance(node, ast.Subscript):
            if "getitem" not in RULES:
                problems.append("subscript without a getitem row")
        elif isinstance(node, (ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.DictComp,
                               ast.SetComp, ast.NamedExpr, ast.Await, ast.Yield, ast.JoinedStr)):
            problems.append(f"construct {type(node).__name__} is not part of the formula language")
    # Attributes that are not called: only constants such as xp.inf.
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in called:
            inner_call = any(id(node) == id(getattr(p, "value", None)) for p in ast.walk(tree)
                             if isinstance(p, ast.Attribute))
            if not inner_call and node.attr not in _CONSTANT_ATTRIBUTES:
                problems.append(f"attribute {ast.unparse(node)} (not a call, not a constant)")
    # Free names: parameters, ans, g (VJP) / the tangent (JVP), xp, helpers.
    allowed = set(rule.params) | {"ans", "xp", "math"} | set(HELPER_NAMES)
    allowed |= {"g"} if where[0] == "vjp" else {f"{where[1]}_t"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in allowed:
            problems.append(f"free name {node.id!r}")
    return problems


@pytest.mark.parametrize("name", sorted(RULES))
def test_formula_calls_are_rules(name):
    rule = RULES[name]
    objs = _target_objects()
    problems = []
    for kind in ("vjp", "jvp"):
        for param, text in getattr(rule, kind).items():
            problems += [f"{kind}[{param}]: {p}" for p in
                         _check_formula(rule, text, objs, (kind, param))]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- numerical checks

def _rng(rule, case_id, salt):
    return np.random.default_rng(zlib.crc32(f"{rule.name}/{case_id}/{salt}".encode()))


def _direction(rule, param, value, rng):
    return [symmetric_direction(rule.name, param, rng.standard_normal(leaf.shape))
            for leaf in ev.leaves(value)]


def _perturbed(rule, args, param, direction, step):
    value = args[param]
    moved = [leaf + step * d for leaf, d in zip(ev.leaves(value), direction)]
    return {**args, param: ev.rebuild(value, moved)}


def _finite_difference(rule, args, param, direction):
    plus = ev.outputs(rule, ev.primal(rule, _perturbed(rule, args, param, direction, EPS)))
    minus = ev.outputs(rule, ev.primal(rule, _perturbed(rule, args, param, direction, -EPS)))
    return [(np.asarray(a, np.float64) - np.asarray(b, np.float64)) / (2 * EPS)
            for a, b in zip(plus, minus)]


def _close(actual, expected, what):
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=RTOL * scale, err_msg=what)


@pytest.mark.parametrize("rule,case_id,args", ALL_CASES, ids=CASE_IDS)
def test_forward(rule, case_id, args):
    ans = ev.primal(rule, args)
    if rule.static_out:
        return
    outs = ev.outputs(rule, ans)
    if callable(rule.nout):
        assert len(outs) == rule.nout({k: v for k, v in args.items()})
    elif rule.nout != 1:
        assert len(outs) == rule.nout
    if rule.nondiff:
        assert not ev.differentiable_params(rule, args) or not rule.vjp


@pytest.mark.parametrize("rule,case_id,args", VJP_CASES, ids=case_ids(VJP_CASES))
def test_vjp(rule, case_id, args):
    params = [p for p in ev.differentiable_params(rule, args) if p in rule.vjp]
    rng = _rng(rule, case_id, "vjp")
    ans = ev.primal(rule, args)
    outs = ev.outputs(rule, ans)
    gs = [rng.standard_normal(np.shape(o)) for o in outs]
    g = tuple(gs) if ev.multi(rule) else gs[0]
    for param in params:
        direction = _direction(rule, param, args[param], rng)
        cot = ev.vjp(rule, param, args, ans, g)
        value_leaves = ev.leaves(args[param])
        cot_leaves = list(cot) if isinstance(args[param], (list, tuple)) else [cot]
        assert len(cot_leaves) == len(value_leaves), f"vjp[{param}]: one cotangent per array"
        for c, v in zip(cot_leaves, value_leaves):
            assert np.shape(c) == v.shape, \
                f"vjp[{param}] has shape {np.shape(c)}, the parameter {v.shape}"
            assert np.all(np.isfinite(c)), f"vjp[{param}] is not finite"
        lhs = sum(ev.inner(c, d) for c, d in zip(cot_leaves, direction))
        fd = _finite_difference(rule, args, param, direction)
        rhs = sum(ev.inner(gk, dk) for gk, dk in zip(gs, fd))
        scale = sum(float(np.sqrt(ev.inner(gk, gk) * ev.inner(dk, dk))) for gk, dk in zip(gs, fd))
        assert abs(lhs - rhs) <= RTOL * max(1.0, scale), \
            f"vjp[{param}]: <vjp(g), v> = {lhs!r}, <g, J v> = {rhs!r}"


@pytest.mark.parametrize("rule,case_id,args", JVP_CASES, ids=case_ids(JVP_CASES))
def test_jvp(rule, case_id, args):
    params = [p for p in ev.differentiable_params(rule, args) if p in rule.jvp]
    rng = _rng(rule, case_id, "jvp")
    ans = ev.primal(rule, args)
    outs = ev.outputs(rule, ans)
    for param in params:
        direction = _direction(rule, param, args[param], rng)
        tangent = ev.rebuild(args[param], direction)
        contribution = ev.jvp(rule, param, args, ans, tangent)
        parts = tuple(contribution) if ev.multi(rule) else (contribution,)
        assert len(parts) == len(outs), f"jvp[{param}]: one contribution per output"
        fd = _finite_difference(rule, args, param, direction)
        for k, (part, out, expected) in enumerate(zip(parts, outs, fd)):
            # A contribution may be smaller than the output (broadcast by the compiler).
            full = np.broadcast_to(part, np.shape(out))
            _close(full, expected, f"jvp[{param}], output {k}")


# ---------------------------------------------------------------- dtypes

def _as_float32(value):
    if ev.is_float_array(value):
        return value.astype(np.float32)
    if ev.leaves(value):
        return type(value)(v.astype(np.float32) for v in value)
    return value


def _float32_cases():
    """Differentiable cases whose primal keeps float32 (some promote by design, e.g. int exponents)."""
    for rule, case_id, args in ALL_CASES:
        if rule.nondiff or not ev.differentiable_params(rule, args):
            continue
        args32 = {k: _as_float32(v) for k, v in args.items()}
        outs = ev.outputs(rule, ev.primal(rule, args32))
        if all(np.asarray(o).dtype == np.float32 for o in outs if np.asarray(o).dtype.kind == "f"):
            yield rule, case_id, args32


FLOAT32_CASES = list(_float32_cases())


@pytest.mark.parametrize("rule,case_id,args", FLOAT32_CASES, ids=case_ids(FLOAT32_CASES))
def test_formulas_keep_float32(rule, case_id, args):
    """float32 in, float32 out: no formula may promote to float64 on its own."""
    params = ev.differentiable_params(rule, args)
    ans = ev.primal(rule, args)
    outs = ev.outputs(rule, ans)
    gs = [np.ones(np.shape(o), np.float32) for o in outs]
    g = tuple(gs) if ev.multi(rule) else gs[0]
    for param in params:
        value = args[param]
        cot = ev.vjp(rule, param, args, ans, g)
        cots = list(cot) if isinstance(value, (list, tuple)) else [cot]
        for c in cots:
            assert np.asarray(c).dtype == np.float32, f"vjp[{param}] is {np.asarray(c).dtype}"
        tangent = ev.rebuild(value, [np.ones_like(v) for v in ev.leaves(value)])
        out = ev.jvp(rule, param, args, ans, tangent)
        for k, part in enumerate(tuple(out) if ev.multi(rule) else (out,)):
            if np.asarray(outs[k]).dtype.kind == "f":
                assert np.asarray(part).dtype == np.float32, \
                    f"jvp[{param}] output {k} is {np.asarray(part).dtype}"
