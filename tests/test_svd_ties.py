"""Second derivatives through the SVD where two singular values are equal to rounding
(docs/conventions.md, "Symmetric inputs and eigenvectors"; fuzz seed 2640084). The tied
pair's 1 / (s_j^2 - s_i^2) was rounding over rounding: nan, or O(1) wrong. (Where the
derivative of U and Vh is not unique and the function needs it, e.g. the sum of squared
singular values at a tie, the tied pole's coupling is dropped, as eigh's is: documented,
not tested as right.)"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad, numeric_hessian_of_grad


def _rank_one_path(x0):
    # every entry tanh(x0): rank 1, so two zero singular values all along the path
    return np.linalg.norm(np.tanh(x0 * np.ones((3, 3))), "nuc")


def test_nuclear_norm_along_a_rank_keeping_path():
    x0 = -1.830166  # nuc = 3 |tanh(x0)| = -3 tanh(x0) here: d2/dx0^2 = 6 tanh(x0) (1 - tanh(x0)^2)
    t = np.tanh(x0)
    assert_close(sg.grad(_rank_one_path)(x0), -3 * (1 - t * t))
    assert_close(sg.hessian(_rank_one_path)(x0), 6 * t * (1 - t * t))
    assert_close(sg.jvp(sg.grad(_rank_one_path), (x0,), (1.0,))[1], 6 * t * (1 - t * t))


def _repeated_nonzero():
    # full rank, singular values (2, 2, 1): the nuclear norm is smooth here
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    r, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q @ np.diag([2.0, 2.0, 1.0]) @ r.T


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4)])
def test_the_nuclear_norm_at_repeated_singular_values_has_its_hessian(shape):
    norm = lambda a: np.linalg.norm(a, "nuc")  # noqa: E731
    a = _repeated_nonzero()
    if shape != (3, 3):  # (2, 2, 1) stays the singular values with a zero row or column
        a = np.pad(a, ((0, shape[0] - 3), (0, shape[1] - 3)))
    assert_close(sg.grad(norm)(a), numeric_grad(norm, (a,), 0), atol=1e-6)
    assert_close(sg.hessian(norm)(a), numeric_hessian_of_grad(norm, a), atol=1e-4)


def test_distinct_singular_values_keep_the_exact_coupling():
    a = np.random.default_rng(4).normal(size=(4, 3))
    f = lambda a: np.sum(np.linalg.svd(a, full_matrices=False)[0][:, 0] ** 3)  # noqa: E731
    assert_close(sg.hessian(f)(a), numeric_hessian_of_grad(f, a), atol=1e-4)


def test_a_tall_matrix_with_a_zero_singular_value_along_a_rank_keeping_path():
    # fuzz seed 2643467: the tall term's 1 / s at s == 0 made 0 * inf = nan in the Hessian
    # even where no gradient reached the norm; here it does: sqrt(8) |tanh(x)|
    def g(x):
        return np.linalg.norm(np.tanh(x) * np.ones((4, 2)), "nuc")

    x, t = 0.7, np.tanh(0.7)
    assert_close(sg.hessian(g)(x), np.sqrt(8) * -2 * t * (1 - t * t))


def test_an_unused_rank_deficient_norm_leaves_the_hessian_finite():
    def f(x):
        m = np.tile(x[:1], (4, 1))  # every row x[0]: rank 1, a zero singular value
        return np.stack([np.sum(x ** 2), np.linalg.norm(m, "nuc")])[0]

    x = np.random.default_rng(5).normal(size=(3, 2))
    assert_close(sg.hessian(f)(x), numeric_hessian_of_grad(f, x), atol=1e-4)
    assert_close(sg.jacobian(sg.jacobian(f))(x), numeric_hessian_of_grad(f, x), atol=1e-4)
