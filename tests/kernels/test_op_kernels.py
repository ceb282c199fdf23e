"""The one-op kernel entry point (srcgrad.kernels, Note [One-op kernels]) on every row.

For each case of the rule table (tests/rules/cases.py), the generated kernel of the row
with every differentiable operand active is run as the eager runtime runs it: forward,
then backward on the saved values. Checked against arithmetic, never against the
formulas: the forward against the row's primal, the backward through
``<vjp(g), v> == <g, J v>`` with J v by central differences, the JVP against central
differences. `saved_from` is checked to say the truth about each saved value.
"""

from __future__ import annotations

import numpy as np
import pytest

from srcgrad.kernels import op_kernel, sequence_count
from tests.rules import evaluate as ev
from tests.rules.cases import case_ids, differentiable_cases
from tests.rules.test_table import RTOL, _close, _direction, _finite_difference, _rng

VJP_CASES = list(differentiable_cases("vjp"))
JVP_CASES = list(differentiable_cases("jvp"))


def _split(rule, args):
    """(static dict, dynamic operand list, names of the dynamic operands' params)."""
    static, dynamic, owners = {}, [], []
    for p in rule.params:
        value = args[p]
        if isinstance(value, np.ndarray):
            dynamic.append(value)
            owners.append(p)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
            static[sequence_count(p)] = len(value)
            dynamic += list(value)
            owners += [p] * len(value)
        else:  # a static value (cases spell inf as a float subclass whose repr is `xp.inf`)
            static[p] = float(value) if isinstance(value, float) else value
    return static, dynamic, owners


def _active(rule, args, owners, dynamic, kind):
    params = {p for p in ev.differentiable_params(rule, args) if p in getattr(rule, kind)}
    return tuple(p in params and ev.is_float_array(v) for p, v in zip(owners, dynamic))


@pytest.mark.parametrize("rule,case_id,args", VJP_CASES, ids=case_ids(VJP_CASES))
def test_kernel_backward(rule, case_id, args):
    static, dynamic, owners = _split(rule, args)
    active = _active(rule, args, owners, dynamic, "vjp")
    kernel = op_kernel(rule.name, static, active)
    ans, saved = kernel.forward(*dynamic)
    outs = ev.outputs(rule, ans)
    for got, expected in zip(outs, ev.outputs(rule, ev.primal(rule, args))):
        _close(got, expected, "forward")
    _check_saved_from(kernel, saved, dynamic, outs)
    rng = _rng(rule, case_id, "kernel-vjp")
    gs = [rng.standard_normal(np.shape(o)) for o in outs]
    grads = kernel.backward(saved, *gs)
    assert len(grads) == len(dynamic)
    for param in dict.fromkeys(p for p, a in zip(owners, active) if a):
        direction = _direction(rule, param, args[param], rng)
        cots = [g for g, p in zip(grads, owners) if p == param]
        assert all(np.shape(c) == np.shape(d) for c, d in zip(cots, direction))
        lhs = sum(ev.inner(c, d) for c, d in zip(cots, direction))
        fd = _finite_difference(rule, args, param, direction)
        rhs = sum(ev.inner(gk, dk) for gk, dk in zip(gs, fd))
        scale = sum(float(np.sqrt(ev.inner(gk, gk) * ev.inner(dk, dk))) for gk, dk in zip(gs, fd))
        assert abs(lhs - rhs) <= RTOL * max(1.0, scale), f"{param}: {lhs!r} vs {rhs!r}"
    for g, a in zip(grads, active):
        assert (g is None) != a, "a gradient for exactly the active operands"


@pytest.mark.parametrize("rule,case_id,args", JVP_CASES, ids=case_ids(JVP_CASES))
def test_kernel_jvp(rule, case_id, args):
    static, dynamic, owners = _split(rule, args)
    active = _active(rule, args, owners, dynamic, "jvp")
    kernel = op_kernel(rule.name, static, active)
    rng = _rng(rule, case_id, "kernel-jvp")
    for param in dict.fromkeys(p for p, a in zip(owners, active) if a):
        direction = _direction(rule, param, args[param], rng)
        parts = iter(direction)
        tangents = [next(parts) if p == param else np.zeros_like(v)
                    for p, v, a in zip(owners, dynamic, active) if a]
        ans, tangent = kernel.jvp(*dynamic, *tangents)
        fd = _finite_difference(rule, args, param, direction)
        tangent_outs = tangent if ev.multi(rule) else (tangent,)
        for k, (t, expected) in enumerate(zip(tangent_outs, fd)):
            _close(np.broadcast_to(t, np.shape(expected)), expected, f"jvp {param}, output {k}")


def _check_saved_from(kernel, saved, dynamic, outs):
    assert len(saved) == len(kernel.saved_from) == len(kernel.saved_names)
    for value, (kind, i) in zip(saved, kernel.saved_from):
        if kind == "input":
            assert value is dynamic[i]
        elif kind == "output":
            assert value is outs[i]
        elif kind == "shape":
            assert tuple(value) == np.shape(dynamic[i])


def test_kernels_are_generated_once():
    first = op_kernel("multiply", {}, (True, False))
    assert op_kernel("multiply", {}, (True, False)) is first
    assert op_kernel("multiply", {}, (True, True)) is not first


def test_backward_saves_a_shape_where_the_formula_reads_only_the_shape():
    kernel = op_kernel("sum", {"axis": 0, "keepdims": False}, (True,))
    assert kernel.saved_from == (("shape", 0),)
    x = np.ones((3, 2))
    _, saved = kernel.forward(x)
    assert saved == ((3, 2),)
    assert "def sum_bwd(_saved, " in kernel.source


def test_inactive_operand_has_no_gradient_and_is_not_differentiated():
    kernel = op_kernel("multiply", {}, (False, True))
    _, saved = kernel.forward(np.arange(3.0), np.ones(3))
    gx, gy = kernel.backward(saved, np.ones(3))
    assert gx is None
    np.testing.assert_array_equal(gy, np.arange(3.0))
    assert kernel.saved_from == (("input", 0), ("shape", 1))
