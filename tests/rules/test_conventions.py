"""Conventions at kinks, ties and zeros (docs/conventions.md), checked numerically.

The table in docs/conventions.md between the BEGIN/END markers is generated from
the rows' `doc` fields; `SRCGRAD_REGEN_DOCS=1 pytest tests/rules/test_conventions.py`
rewrites it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from srcgrad.rules import RULES
from tests.rules import evaluate as ev

DOC = Path(__file__).resolve().parents[2] / "docs" / "conventions.md"
BEGIN, END = "<!-- BEGIN GENERATED TABLE -->", "<!-- END GENERATED TABLE -->"


def _how_called(rule):
    names = [t.removeprefix("numpy.").removeprefix("srcgrad.rules.helpers.") for t in rule.targets]
    if rule.method:
        names.append(f"x.{rule.method}()")
    if rule.attribute:
        names.append(f"x.{rule.attribute}")
    if not names and rule.render.startswith(("x ", "-x", "+x", "~x", "x[")):
        names.append(rule.render)
    return ", ".join(f"`{n}`" for n in names)


def generated_table() -> str:
    lines = ["| row | called as | convention |", "|---|---|---|"]
    for name in sorted(RULES):
        rule = RULES[name]
        if rule.doc:
            doc = rule.doc.replace("|", "\\|")
            lines.append(f"| `{name}` | {_how_called(rule)} | {doc} |")
    return "\n".join(lines)


def test_conventions_doc_is_current():
    text = DOC.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    expected = f"{head}{BEGIN}\n{generated_table()}\n{END}{tail}"
    if os.environ.get("SRCGRAD_REGEN_DOCS"):
        DOC.write_text(expected)
    assert text == expected, "docs/conventions.md is stale: rerun with SRCGRAD_REGEN_DOCS=1"


# ---------------------------------------------------------------- helpers

def _vjp(name, param, g=None, **args):
    rule = RULES[name]
    bound = rule.py_signature.bind(**args)
    bound.apply_defaults()
    args = dict(bound.arguments)
    ans = ev.primal(rule, args)
    if g is None:
        g = tuple(np.ones(np.shape(a)) for a in ans) if ev.multi(rule) else np.ones(np.shape(ans))
    return ev.vjp(rule, param, args, ans, g)


def _jacobian_fd(f, x, eps=1e-6):
    x = np.asarray(x, np.float64)
    cols = []
    for i in range(x.size):
        d = np.zeros(x.size)
        d[i] = eps
        d = d.reshape(x.shape)
        cols.append((np.asarray(f(x + d)) - np.asarray(f(x - d))).reshape(-1) / (2 * eps))
    return np.stack(cols, axis=-1)  # (out.size, x.size)


def _jacobian_vjp(name, param, x, **args):
    rule = RULES[name]
    bound = rule.py_signature.bind(**{param: x, **args})
    bound.apply_defaults()
    full = dict(bound.arguments)
    ans = ev.primal(rule, full)
    rows = []
    for i in range(np.size(ans)):
        g = np.zeros(np.size(ans))
        g[i] = 1.0
        rows.append(np.asarray(ev.vjp(rule, param, full, ans, g.reshape(np.shape(ans)))).reshape(-1))
    return np.stack(rows)


# ---------------------------------------------------------------- kinks

def test_abs_at_zero_is_zero():
    np.testing.assert_array_equal(_vjp("abs", "x", x=np.array([-2.0, 0.0, 3.0])), [-1, 0, 1])


def test_sign_is_not_differentiable():
    assert RULES["sign"].nondiff and not RULES["sign"].vjp


@pytest.mark.parametrize("name", ["max", "min"])
def test_reduction_ties_split_evenly(name):
    x = np.array([[1.0, 3.0, 3.0, 2.0], [1.0, 1.0, 1.0, 0.0]])
    if name == "min":
        x = -x
    np.testing.assert_allclose(_vjp(name, "x", x=x, axis=1),
                               [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0]])
    whole = _vjp(name, "x", x=x, axis=None, keepdims=True, g=np.full((1, 1), 6.0))
    np.testing.assert_allclose(whole, [[0, 3, 3, 0], [0, 0, 0, 0]])


def test_inf_norm_ties_split_evenly():
    x = np.array([1.0, -3.0, 3.0, 2.0])
    np.testing.assert_allclose(_vjp("norm", "x", x=x, ord=np.inf), [0, -0.5, 0.5, 0])


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_elementwise_ties_half_each(name):
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([2.0, 2.0, 2.0])
    gx, gy = _vjp(name, "x", x=x, y=y), _vjp(name, "y", x=x, y=y)
    big = [0.0, 0.5, 1.0] if name == "maximum" else [1.0, 0.5, 0.0]
    np.testing.assert_array_equal(gx, big)
    np.testing.assert_array_equal(gx + gy, [1.0, 1.0, 1.0])


def test_clip_bounds_belong_to_x():
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    lo, hi = np.array(-0.5), np.array(0.5)
    np.testing.assert_array_equal(_vjp("clip", "x", x=x, a_min=lo, a_max=hi), [0, 1, 1, 1, 0])
    assert _vjp("clip", "a_min", x=x, a_min=lo, a_max=hi) == 1.0
    assert _vjp("clip", "a_max", x=x, a_min=lo, a_max=hi) == 1.0
    np.testing.assert_array_equal(_vjp("clip", "x", x=x, a_min=None, a_max=0.5), [1, 1, 1, 1, 0])


def test_sqrt_at_zero_is_inf():
    with np.errstate(divide="ignore"):
        assert _vjp("sqrt", "x", x=np.array(0.0)) == np.inf


@pytest.mark.parametrize("p,expected", [(1, 1.0), (2, 0.0), (3, 0.0), (2.5, 0.0)])
def test_power_with_static_exponent_at_zero(p, expected):
    assert _vjp("power", "x", x=np.array(0.0), y=p) == expected


def test_power_exponent_gradient_is_finite_at_zero():
    x = np.array([0.0, 2.0, 0.0])
    y = np.array([2.0, 3.0, 0.5])
    with np.errstate(all="raise"):
        gy = _vjp("power", "y", x=x, y=y)
    np.testing.assert_allclose(gy, [0.0, 8.0 * np.log(2.0), 0.0])


def test_std_of_constant_is_zero():
    x = np.full((2, 3), 1.5)
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(_vjp("std", "x", x=x, axis=1), np.zeros((2, 3)))


def test_norm_and_hypot_at_zero_are_zero():
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(_vjp("norm", "x", x=np.zeros(3)), np.zeros(3))
        np.testing.assert_array_equal(_vjp("norm", "x", x=np.zeros((2, 3)), axis=1),
                                      np.zeros((2, 3)))
        assert _vjp("hypot", "x", x=np.array(0.0), y=np.array(0.0)) == 0.0


def test_matrix_norm_refuses_to_differentiate():
    with pytest.raises(NotImplementedError):
        _vjp("norm", "x", x=np.ones((2, 3)), ord=2)
    with pytest.raises(NotImplementedError):
        _vjp("norm", "x", x=np.ones((2, 3)), ord="nuc")


def test_pad_mode_without_derivative_refuses():
    with pytest.raises(ValueError, match="no derivative for numpy.pad"):
        _vjp("pad", "x", x=np.ones(3), pad_width=1, mode="maximum")


def test_pad_mode_without_derivative_is_a_compile_error_at_the_call(tmp_path):
    import importlib.util

    import srcgrad as sg

    path = tmp_path / "padmode.py"
    path.write_text("import numpy as np\n\n\ndef f(x):\n"
                    "    return np.sum(np.pad(x, 1, mode='maximum'))\n")
    spec = importlib.util.spec_from_file_location("padmode", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(sg.CompileError) as info:
        sg.grad(module.f)(np.ones(3))
    assert info.value.lineno == 5 and "mode='maximum'" in str(info.value)


def test_eigh_repeated_eigenvalues_stay_finite():
    x = np.diag([1.0, 1.0, 2.0])
    with np.errstate(all="raise"):
        g = _vjp("eigh", "x", x=x)
    assert np.all(np.isfinite(g))


# ---------------------------------------------------------------- where and zeros

def test_where_untaken_inf_gives_finite_vjp():
    c = np.array([True, False, True])
    x = np.array([1.0, np.inf, 2.0])  # x[1] is not taken
    y = np.array([np.inf, 3.0, -np.inf])  # y[0], y[2] are not taken
    gx = _vjp("where", "x", condition=c, x=x, y=y)
    gy = _vjp("where", "y", condition=c, x=x, y=y)
    np.testing.assert_array_equal(gx, [1, 0, 1])
    np.testing.assert_array_equal(gy, [0, 1, 0])


@pytest.mark.parametrize("x", [
    [1.5, 0.0, -2.0, 0.7],          # one zero
    [1.5, 0.0, -2.0, 0.0],          # two zeros
    [0.0, 0.0, 0.0],                # all zeros
    [[1.5, 0.0, 0.8], [0.0, 2.0, 0.0]],
])
@pytest.mark.parametrize("axis", [None, -1])
def test_prod_with_zeros_matches_finite_differences(x, axis):
    x = np.array(x)
    with np.errstate(all="raise"):  # no division by zero anywhere
        jac = _jacobian_vjp("prod", "x", x, axis=axis)
    expected = _jacobian_fd(lambda z: np.prod(z, axis=axis), x)
    np.testing.assert_allclose(jac, expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("x", [
    [1.5, 0.0, -2.0, 0.7],
    [1.5, 0.0, -2.0, 0.0],
    [0.0, 2.0, 0.0, 3.0, 0.5],
    [[1.5, 0.0, 0.8], [0.0, 2.0, 0.0]],
])
@pytest.mark.parametrize("axis", [None, -1])
def test_cumprod_with_zeros_matches_finite_differences(x, axis):
    x = np.array(x)
    with np.errstate(all="raise"):
        jac = _jacobian_vjp("cumprod", "x", x, axis=axis)
    expected = _jacobian_fd(lambda z: np.cumprod(z, axis=axis), x)
    np.testing.assert_allclose(jac, expected, rtol=1e-6, atol=1e-9)


def test_cumprod_jvp_with_zeros():
    x = np.array([1.5, 0.0, -2.0, 0.0, 0.7])
    rule = RULES["cumprod"]
    args = {"x": x, "axis": 0}
    ans = ev.primal(rule, args)
    expected = _jacobian_fd(lambda z: np.cumprod(z), x)
    for i in range(x.size):
        t = np.zeros(x.size)
        t[i] = 1.0
        with np.errstate(all="raise"):
            np.testing.assert_allclose(ev.jvp(rule, "x", args, ans, t), expected[:, i],
                                       rtol=1e-6, atol=1e-9)
