"""sg.vjp / sg.jvp on container arguments, has_aux, custom Function applies, and the
argument checks of the transforms (issue 16's "inputs like JAX and torch").

Every derivative is checked against central differences of the function itself.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.corpus.functions import Exp


def layer(p, x):
    return np.tanh(x @ p["W"] + p["b"])


def loss(p, x):
    return np.sum(layer(p, x) ** 2)


def with_aux(x):
    y = np.sin(x) * x
    return y, {"mean": np.mean(y), "n": 3}


RNG = np.random.default_rng(3)
P = {"W": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}
X = RNG.standard_normal((4, 3))


def _numeric_dict_grad(f, p, x):
    """Central differences of scalar f(p, x) w.r.t. each array of the dict p."""
    out = {}
    for key in p:
        out[key] = numeric_grad(lambda a, key=key: f({**p, key: a}, x), (p[key],), 0)
    return out


def test_vjp_of_a_dict_argument_returns_a_dict_of_gradients():
    out, vjp_fn = sg.vjp(loss, P, X)
    assert_close(out, loss(P, X))
    gp, gx = vjp_fn(1.0)
    assert isinstance(gp, dict) and list(gp) == ["W", "b"]
    expected = _numeric_dict_grad(loss, P, X)
    assert_close(gp["W"], expected["W"], rtol=1e-5)
    assert_close(gp["b"], expected["b"], rtol=1e-5)
    assert_close(gx, numeric_grad(lambda x: loss(P, x), (X,), 0), rtol=1e-5)
    again = vjp_fn(2.0)  # a vjp_fn is reusable, and linear in the cotangent
    assert_close(again[0]["W"], 2 * gp["W"])


def test_jvp_of_a_dict_argument():
    tangent = ({"W": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}, np.zeros_like(X))
    out, tout = sg.jvp(layer, (P, X), tangent)
    assert_close(out, layer(P, X))
    eps = 1e-6
    plus = layer({k: P[k] + eps * tangent[0][k] for k in P}, X)
    minus = layer({k: P[k] - eps * tangent[0][k] for k in P}, X)
    assert_close(tout, (plus - minus) / (2 * eps), rtol=1e-5)
    with pytest.raises(ValueError, match="tangent 0 is"):
        sg.jvp(layer, (P, X), (np.zeros(3), X))


def test_vjp_and_jvp_with_aux():
    x = RNG.standard_normal(5)
    out, vjp_fn, aux = sg.vjp(with_aux, x, has_aux=True)
    assert_close(out, with_aux(x)[0])
    assert aux["n"] == 3 and np.isclose(aux["mean"], np.mean(out))
    (g,) = vjp_fn(np.ones(5))
    assert_close(g, numeric_grad(lambda a: np.sum(with_aux(a)[0]), (x,), 0), rtol=1e-5)
    out, tout, aux = sg.jvp(with_aux, (x,), (np.ones(5),), has_aux=True)
    assert_close(tout, np.cos(x) * x + np.sin(x))
    assert aux["n"] == 3
    with pytest.raises(TypeError, match=r"returning \(out, aux\)"):
        sg.vjp(lambda a: np.sin(a), x, has_aux=True)


def test_vjp_fn_refuses_a_cotangent_of_the_wrong_shape():
    out, vjp_fn = sg.vjp(lambda a: np.sin(a), np.ones(3))
    with pytest.raises(ValueError, match=r"cotangent has shape \(4,\), but the output has shape \(3,\)"):
        vjp_fn(np.ones(4))
    with pytest.raises(ValueError, match="structure"):
        vjp_fn((np.ones(3),))


def test_source_of_a_vjp_fn_and_vjp_of_a_function_apply():
    out, vjp_fn = sg.vjp(Exp.apply, np.zeros(2))
    assert "def Exp_apply_bwd(" in sg.source(vjp_fn)
    assert_close(out, np.ones(2))
    (g,) = vjp_fn(np.array([1.0, 2.0]))
    assert_close(g, [1.0, 2.0])
    with pytest.raises(sg.CompileError, match="jvp"):  # Exp has no jvp: torch's error
        sg.jvp(Exp.apply, (np.zeros(2),), (np.ones(2),))


def test_vjp_of_a_function_apply_after_linecache_was_emptied():
    # Exp_apply's text lives only in linecache; a test (or a debugger) may empty it
    import linecache

    sg.vjp(Exp.apply, np.zeros(2))
    linecache.clearcache()
    sg.cache_clear()
    out, vjp_fn = sg.vjp(Exp.apply, np.zeros(2))
    assert_close(vjp_fn(np.array([1.0, 2.0]))[0], [1.0, 2.0])


@pytest.mark.parametrize("bad, what", [(np.arange(3), r"an integer array \(int64\)"),
                                        (np.array([True, False]), r"an integer array \(bool\)"),
                                        (2, "the int 2"), (np.ones(2, complex), "complex")])
def test_differentiated_arguments_must_be_floating_point(bad, what):
    def f(x, n):
        return np.sum(x * n)

    with pytest.raises(TypeError, match=f"argument `x` is {what}"):
        sg.grad(f)(bad, 2)
    assert sg.grad(f)(np.ones(2), 2).tolist() == [2.0, 2.0]  # an int elsewhere is fine
    with pytest.raises(TypeError, match="argument `x`"):
        sg.hessian(f)(bad, 2)


def logistic(w, b, X, y):
    z = X @ w + b
    return np.mean(np.logaddexp(0, z) - y * z)


def test_vjp_compiles_a_variant_per_argument_shapes():
    rng = np.random.default_rng(5)
    for n in (8, 5):  # the second shape compiles its own variant
        w, X, y = rng.standard_normal(3), rng.standard_normal((n, 3)), (rng.random(n) > 0.5) * 1.0
        out, vjp_fn = sg.vjp(logistic, w, 0.1, X, y)
        assert f"/ {n}" in sg.source(vjp_fn)  # the mean's 1/N is a constant of the variant
        for ct in (1.0, np.float64(2.0), np.array(3.0)):  # a float cotangent is made an array
            gw, gb, gX, gy = vjp_fn(ct)
            expected_w = numeric_grad(lambda a, X=X, y=y: logistic(a, 0.1, X, y), (w,), 0)
            expected_b = numeric_grad(lambda a, w=w, X=X, y=y: logistic(w, a, X, y), (0.1,), 0)
            assert_close(gw, float(ct) * expected_w, rtol=1e-5)
            assert_close(gb, float(ct) * expected_b, rtol=1e-5)


def test_vjp_of_a_function_whose_output_shape_depends_on_data_runs_generic_code():
    def positive(x):
        return x[x > 0] * 2.0

    x = np.array([1.0, -1.0, 2.0])
    out, vjp_fn = sg.vjp(positive, x)
    assert_close(out, [2.0, 4.0])
    (g,) = vjp_fn(np.ones(2))
    assert_close(g, [2.0, 0.0, 2.0])
    out, vjp_fn = sg.vjp(positive, -x)  # same shapes, another output shape: still right
    (g,) = vjp_fn(np.ones(1))
    assert_close(g, [0.0, 2.0, 0.0])


def test_a_forward_value_simplified_into_formula_ops_stays_in_the_forward():
    # matmul_bar called by user code is simplified, in a specialised variant, into ops
    # marked as derivative work; the forward must still compute (and return) the value.
    from srcgrad.rules.helpers import matmul_bar

    def f(c, other, w):
        return np.sum(w * matmul_bar(c, other, (3, 4), 0))

    c, other, w = RNG.standard_normal((3, 5)), RNG.standard_normal((4, 5)), RNG.standard_normal((3, 4))
    out, vjp_fn = sg.vjp(f, c, other, w)
    assert_close(out, f(c, other, w))
    gc, _, _ = vjp_fn(1.0)
    assert_close(gc, numeric_grad(lambda a: f(a, other, w), (c,), 0), rtol=1e-5)


def test_vjp_of_a_function_returning_a_constant_array():
    def f(x):
        return np.sum(x), np.ones(3)

    out, vjp_fn = sg.vjp(f, np.arange(3.0))
    assert_close(out[1], np.ones(3))
    (g,) = vjp_fn((1.0, np.ones(3)))
    assert_close(g, np.ones(3))


def _total(x):
    return np.sum(x)


def _same(x):
    return x


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_jacobian_when_the_derivative_is_a_view_of_the_seed(mode):
    # np.sum's gradient is a broadcast of the cotangent and the identity's tangent is the
    # tangent itself: the Jacobian must copy each column before the seed is reset.
    x = np.arange(3.0)
    assert_close(sg.jacobian(_total, mode=mode)(x), np.ones(3))
    assert_close(sg.jacobian(_same, mode=mode)(x), np.eye(3))


def _sin_squares(x):
    return np.sum(np.sin(x) ** 2)


def _sin(x):
    return np.sin(x)


def test_explain_reads_jacobians_hessians_and_vmaps():
    """sg.explain of a jacobian (of a gradient too), a hessian or a vmap raised
    AttributeError ('JacobianSource' object has no attribute 'fn'); API.md promises a text."""
    jac = sg.jacobian(sg.grad(_sin_squares), mode="forward")
    jac(np.ones(3))
    text = sg.explain(jac)
    assert text.startswith("jacobian of _sin_squares (mode forward)") and "1 batched" in text
    hess = sg.hessian(_sin_squares)
    assert "plans compiled: 0" in sg.explain(hess)
    hess(np.ones(3))
    assert sg.explain(hess).startswith("hessian of _sin_squares") and "1 batched" in sg.explain(hess)
    vm = sg.vmap(_sin)
    assert sg.explain(vm).endswith("(not called yet)")
    vm(np.ones((2, 3)))
    assert sg.explain(vm).startswith("vmap of _sin: one batched program")
