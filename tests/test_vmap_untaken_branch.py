"""sg.grad of sg.vmap of an `if` on a mapped test (fuzz seed 2763568): the batched `if`
runs both branches and chooses per example, so an example's untaken branch that overflows
(np.exp of large values) put 0 * inf = nan into its gradient, where the true one is finite
(Python never runs that branch). Each branch now reads its inputs through `taken_input`,
whose cotangent is selected to the examples that take it (Note [The branch an example does
not take] in srcgrad.passes.batch_control). Checked against central differences: mapped
inputs, an unmapped parameter read by elementwise ops, by a matmul and through an index,
an `if` nested in the branch, forward mode and the Hessian."""

import numpy as np
import pytest

import srcgrad as sg


def branchy(x):
    if np.sum(x) > 0.0:
        y = np.sum(x * x)
    else:
        y = np.sum(np.exp(x * 1000.0))  # overflows for the example that takes the other branch
    return y


def batched(x):
    return np.sum(np.tanh(sg.vmap(branchy)(np.stack([x, -x]))))


def scaled(w, x):  # an unmapped parameter, read by elementwise ops in both branches
    if np.sum(x) > 0.0:
        y = np.sum(x * x * w)
    else:
        y = np.sum(np.exp(x * 1000.0) * w)
    return y


def projected(W, x):  # an unmapped matrix, read by a matmul
    if np.sum(x) > 0.0:
        y = np.sum(W @ x)
    else:
        y = np.sum(np.exp(W @ x * 10000.0))  # (W @ x of the other example: 0.15, 0.51)
    return y


def indexed(w, x, idx):  # an unmapped index array beside an unmapped parameter
    if np.sum(x) > 0.0:
        y = np.sum(x * w[idx])
    else:
        y = np.sum(np.exp(x * 1000.0) * w[0])
    return y


def nested(x):  # an `if` inside the branch, and the branch's input returned as it is
    if np.sum(x) > 0.0:
        if np.max(x) > 1.0:
            y = x * 2.0
        else:
            y = x
    else:
        y = np.exp(x * 1000.0)
    return np.sum(y * y)


X = np.array([0.9, 1.2])
P = np.array([[0.5, -0.25], [0.3, 0.2]])

CASES = {
    "mapped": (lambda p, x: batched(x * p[0]), np.array([1.0])),
    "elementwise_parameter": (
        lambda w, x: np.sum(sg.vmap(scaled, in_axes=(None, 0))(w, np.stack([x, -x]))), P[0]),
    "matmul_parameter": (
        lambda W, x: np.sum(sg.vmap(projected, in_axes=(None, 0))(W, np.stack([x, -x]))), P),
    "indexed_parameter": (
        lambda w, x: np.sum(sg.vmap(indexed, in_axes=(None, 0, None))(w, np.stack([x, -x]),
                                                                     np.array([1, 0]))), P[1]),
    "nested_if": (lambda p, x: np.sum(sg.vmap(nested)(np.stack([x * p[0], -x, x * 0.5]))),
                  np.array([1.0])),
}


def _differences(fn, p, x, eps=1e-6):
    return np.array([(fn(p + eps * u.reshape(p.shape), x) - fn(p - eps * u.reshape(p.shape), x))
                     / (2 * eps) for u in np.eye(p.size)]).reshape(p.shape)


@pytest.mark.parametrize("name", CASES)
def test_the_gradient_is_the_taken_branchs(name):
    fn, p = CASES[name]
    with np.errstate(over="ignore", invalid="ignore"):
        for wrt in (0, 1):
            got = sg.grad(fn, wrt=wrt)(p.copy(), X.copy())
            if wrt == 0:
                want = _differences(fn, p, X)
            else:
                want = _differences(lambda x, p_: fn(p_, x), X, p)
            assert np.all(np.isfinite(got)), (name, wrt, got)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["mapped", "elementwise_parameter", "nested_if"])
def test_forward_mode_and_the_hessian_are_finite_and_right(name):
    fn, p = CASES[name]
    with np.errstate(over="ignore", invalid="ignore"):
        t = np.ones_like(X)
        _, tangent = sg.jvp(lambda x: fn(p, x), (X.copy(),), (t,))
        want = (fn(p, X + 1e-6 * t) - fn(p, X - 1e-6 * t)) / 2e-6
        np.testing.assert_allclose(tangent, want, rtol=1e-6, atol=1e-8)
        H = sg.hessian(lambda x: fn(p, x))(X.copy())
        assert np.all(np.isfinite(H)), H
        grad = sg.grad(lambda x: fn(p, x))
        want = np.array([(grad(X + 1e-5 * u) - grad(X - 1e-5 * u)) / 2e-5 for u in np.eye(2)])
        assert np.all(np.isfinite(want)), want
        np.testing.assert_allclose(H, want, rtol=1e-5, atol=1e-6)


def test_the_values_are_python_s():
    with np.errstate(over="ignore"):
        assert np.isclose(batched(X), np.tanh(branchy(X)) + np.tanh(branchy(-X)))
