"""Gathers on array_api_strict (Note [Scatter-add without add.at] in srcgrad.rules.helpers).

The Array API has no scatter-add, which the gradient of every gather needs; these
were refused ("the Array API has no scatter-add", 126 of 3,581 fuzz programs of seed
2620000) and now run as a one-hot contraction. Each program is written as a user
writes it and judged by arithmetic: the gradient, a Hessian-vector product (forward over
reverse) and a JVP computed on array_api_strict arrays against central differences of the
same function run by NumPy, in float64. Repeated and negative indices are included:
their contributions must add up, and of repeated writes (`y[[0, 2, 0]] = v`) only the
last one counts, as NumPy keeps it.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import numeric_grad

xs = pytest.importorskip("array_api_strict")


def list_index(x):
    return np.sum(np.sin(x[[2, 0, 0]]) * x[[1, 1, 2]])


def list_index_second_axis(x):
    return np.sum(x[:, [3, 0, 3]] ** 3)


def list_index_after_ellipsis(x):
    return np.sum(np.tanh(x[..., [1, -1, 1]]) * x[:, 0:1])


def two_d_list_index(x):
    return np.sum(np.cos(x[[[0, 2], [2, 2]]]) * x[1, 0])


def take_2d_indices(x):
    return np.sum(np.take(x, np.array([[0, 3], [3, -1]]), axis=1) ** 3)


def take_flat(x):
    return np.sum(np.exp(np.take(x, [5, 0, 5, -2])))


def take_method(x):
    return np.sum(x.take([1, 1], axis=0) ** 3)


def take_along(x):
    i = np.argsort(x, axis=1)
    return np.sum(np.take_along_axis(x, i, axis=1) * np.arange(4.0) ** 2 * x)


def sorted_weighted(x):
    return np.sum(np.sort(x, axis=0) * np.array([[1.0], [2.0], [3.0]]) * np.sin(x))


def through_median(x):
    return np.sum(x * x) * np.median(np.abs(x) + 1.0)


def indexed_by_an_argument(x, idx):
    return np.sum(x[idx] ** 3)


def indexed_on_both_axes(x, i, j):
    return np.sum(x[i, j] ** 3)


def write_at_repeated_rows(x):
    y = x * 1.0
    y[[0, 2, 0]] = np.sin(x[1])  # the last write to row 0 wins (x[1]'s second copy)
    return np.sum(y ** 3)


def scaled_at_repeated_columns(x):
    y = x * 1.0
    y[:, [1, -1, 1]] *= x[:, :3] ** 2
    return np.sum(np.sin(y) * x)


PROGRAMS = [write_at_repeated_rows, scaled_at_repeated_columns, list_index, list_index_second_axis,
            list_index_after_ellipsis, two_d_list_index,
            take_2d_indices, take_flat, take_method, take_along, sorted_weighted, through_median]
_X = np.array([[0.3, -0.7, 1.1, 0.4], [0.9, -0.2, 0.5, -1.3], [0.6, 1.4, -0.8, 0.2]])


def check_first_and_second_order(f, x):
    """`f`'s gradient, a Hessian-vector product (forward over reverse: sg.hessian takes
    NumPy arrays only) and a JVP, computed on array_api_strict arrays, against central
    differences of `f` run by NumPy (nested for the second order)."""
    got = sg.grad(f)(xs.asarray(x))
    assert type(got) is type(xs.asarray(0.0))  # computed by array_api_strict
    np.testing.assert_allclose(np.asarray(got), numeric_grad(f, [x], 0), rtol=1e-6, atol=1e-8)
    t = np.cos(np.arange(x.size)).reshape(x.shape)
    _, hvp = sg.jvp(sg.grad(f), (xs.asarray(x),), (xs.asarray(t),))
    eps = 1e-4  # (nested central differences: truncation ~eps**2, rounding ~1e-16 / eps**2)
    want = (numeric_grad(f, [x + eps * t], 0, eps=eps)
            - numeric_grad(f, [x - eps * t], 0, eps=eps)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(hvp), want, rtol=1e-4, atol=1e-5)
    _, tangent = sg.jvp(f, (xs.asarray(x),), (xs.asarray(t),))
    np.testing.assert_allclose(float(tangent), np.sum(numeric_grad(f, [x], 0) * t), rtol=1e-6)


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_first_and_second_order_of_a_gather_on_array_api_strict(f):
    check_first_and_second_order(f, _X)


def test_index_arrays_given_as_arguments_accumulate():
    """A run-time index (as the one index of a matrix, as NumPy reads it, and on every
    axis, as the Array API reads it): repeated rows receive the sum of their parts."""
    idx = np.array([2, 0, 2, 2])
    got = sg.grad(indexed_by_an_argument)(xs.asarray(_X), xs.asarray(idx))
    want = numeric_grad(indexed_by_an_argument, [_X, idx], 0)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-8)
    i, j = np.array([0, 2, 2]), np.array([1, 1, -1])
    got = sg.grad(indexed_on_both_axes)(xs.asarray(_X), xs.asarray(i), xs.asarray(j))
    want = numeric_grad(indexed_on_both_axes, [_X, i, j], 0)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-8)


def test_an_inf_cotangent_reaches_only_its_own_place():
    """The one-hot contraction is a `where`, not a product with the one-hot matrix: an
    inf in the cotangent stays where add.at puts it (0 * inf would spread nan)."""
    from srcgrad.rules.helpers import scatter_index, take_bar

    c = xs.asarray(np.array([np.inf, 1.0, 2.0]))
    got = np.asarray(scatter_index(c, (4,), [3, 0, 0]))
    np.testing.assert_array_equal(got, [3.0, 0.0, 0.0, np.inf])
    got = np.asarray(take_bar(c, (2, 4), xs.asarray(np.array([1, 1, 6])), None))
    np.testing.assert_array_equal(got, [[0.0, 1.0 + np.inf, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0]])
