"""Higher order: grad of grad, jvp of grad, Hessians by forward-over-reverse."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from examples import mlp
from tests.conftest import numeric_grad


def poly(x):
    return x + x**2 + x**3 + x**4


def quadratic(x, A):
    return x @ A @ x


def sum_exp(x):
    return np.sum(np.exp(x))


def test_grad_of_grad():
    np.testing.assert_allclose(sg.grad(sg.grad(poly))(0.5), 2 + 6 * 0.5 + 12 * 0.25)


def test_five_nested_grads_of_a_polynomial_are_finite_at_zero():
    d, values = poly, []
    for _ in range(5):
        d = sg.grad(d)
        values.append(float(d(0.0)))
    assert values == [1.0, 2.0, 6.0, 24.0, 0.0]


def test_jvp_of_grad_is_a_hessian_vector_product():
    rng = np.random.default_rng(0)
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    g, hv = sg.jvp(sg.grad(sum_exp), (x,), (v,))
    np.testing.assert_allclose(g, np.exp(x))
    np.testing.assert_allclose(hv, np.exp(x) * v)


def test_hessian_of_sum_exp():
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(sg.hessian(sum_exp)(x), np.diag(np.exp(x)), rtol=1e-12)


def test_hessian_of_a_quadratic_form():
    rng = np.random.default_rng(1)
    x, A = rng.standard_normal(6), rng.standard_normal((6, 6))
    np.testing.assert_allclose(sg.hessian(quadratic)(x, A), A + A.T, rtol=1e-12, atol=1e-12)


def test_hessian_with_a_tuple_wrt_gives_blocks():
    rng = np.random.default_rng(2)
    x, A = rng.standard_normal(3), rng.standard_normal((3, 3))
    H = sg.hessian(quadratic, wrt=(0, 1))(x, A)
    np.testing.assert_allclose(H[0][0], A + A.T, atol=1e-12)
    # d/dA_jk of d/dx_i (x^T A x) = delta_ij x_k + x_j delta_ik
    expected = np.einsum("ij,k->ijk", np.eye(3), x) + np.einsum("j,ik->ijk", x, np.eye(3))
    np.testing.assert_allclose(H[0][1], expected, atol=1e-12)
    assert H[1][1].shape == (3, 3, 3, 3)


def test_hessian_of_the_mlp_loss_wrt_b1_matches_differences_of_the_gradient():
    rng = np.random.default_rng(3)
    W1, b1, W2, b2 = mlp.init_params(rng, 5, 8, 3)
    b1 = 0.1 * rng.standard_normal(8)
    X, y = rng.standard_normal((6, 5)), rng.standard_normal((6, 3))
    args = [W1, b1, W2, b2, X, y]
    H = sg.hessian(mlp.loss, wrt=1)(*args)
    g = sg.grad(mlp.loss, wrt=1)
    expected = np.stack([numeric_grad(lambda *a, k=k: g(*a)[k], args, 1) for k in range(8)])
    np.testing.assert_allclose(H, expected, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(H, H.T, atol=1e-12)


@pytest.mark.parametrize("x", [0.0, 0.7, -1.3])
def test_hessian_of_a_scalar_function_of_a_scalar(x):
    np.testing.assert_allclose(sg.hessian(poly)(x), 2 + 6 * x + 12 * x**2)
