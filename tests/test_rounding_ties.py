"""Derivatives at values tied to rounding: equal values whose std NumPy computes as 2e-16
(the mean's rounding), where the true function is constant (fuzz seed 2667271, issue 28)."""

import numpy as np
import pytest

import srcgrad as sg


def std_of_copies(x):
    return np.std(np.tile(x, 3), 0, None, None, 0)  # (the positional ddof, as the fuzzer wrote it)


def std_of_copies_plus(x):
    return np.std(np.tile(x, 3)) + np.sum(x * x)


@pytest.mark.parametrize("x", [-1.952601, 0.3, 1e-300, 0.0])
def test_std_of_equal_values_has_derivative_zero(x):
    """srcgrad's gradient was 0.83 at -1.952601: the ratio of two rounding errors (the
    centred values and the std)."""
    assert np.std(np.tile(np.array([x]), 3)) < 1e-15  # NumPy: 0 or 2.2e-16
    g = sg.grad(std_of_copies)(np.array([x]))
    assert g.tolist() == [0.0]
    _, t = sg.jvp(std_of_copies, (np.array([x]),), (np.array([1.0]),))
    assert float(t) == 0.0
    np.testing.assert_allclose(sg.grad(std_of_copies_plus)(np.array([x])), [2 * x], rtol=1e-12)


def test_std_of_distinct_values_keeps_its_derivative():
    x = np.array([0.3, -0.2, 0.5, 1e-9])
    g = sg.grad(lambda_free_std)(x)
    want = (x - x.mean()) / (x.size * np.std(x))
    np.testing.assert_allclose(g, want, rtol=1e-12)


def lambda_free_std(x):
    return np.std(x)
