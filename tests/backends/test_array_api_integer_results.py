"""The Array API spellings of rows it lacks (nanargmax/nanargmin, digitize, isin of floats,
spacing, array_equiv, ldexp, diag and its transpose) and integer results in arithmetic (`x *
np.argmax(x)`, `x[np.argmax(x)]`'s transpose), against NumPy's values and gradients. NumPy
promotes an integer array with a float one; the Array API refuses mixed kinds, so the
generated code casts it (srcgrad.codegen.emit._int_arrays_as_floats). Before, these were
refused ("has no equivalent in array_api_strict") or raised in the generated code."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.rules.helpers import digitize_sorted, nan_arg_extreme

xs = pytest.importorskip("array_api_strict")


def times_an_argmax(x):
    return np.sum(x * np.argmax(x)) + x[np.argmax(x)] * 3.0


def nan_extremes(x):
    y = np.where(x > 0.6, np.nan, x)
    return x[np.nanargmax(y)] * 3.0 + x * (np.nanargmax(y) - np.nanargmin(y)) @ x


def bins(x):
    return np.sum(x * np.digitize(x, np.array([-0.5, 0.0, 0.5]))) + np.sum(
        x * np.digitize(x, np.array([0.5, 0.0, -0.5]), right=True)) + np.sum(
        x * np.searchsorted(np.array([-0.5, 0.0, 0.5]), x))


def membership(x):
    return np.sum(np.where(np.isin(x, np.array([0.5, 0.25])), 0.0, x ** 2)) + np.sum(
        np.isin(x, [0.5], invert=True) * x)


def spacing_and_equivalence(x):
    same = 3.0 * np.sum(x) if np.array_equiv(x, x[:1] * 0 + x) else 0.0
    other = 1.0 if np.array_equiv(x, np.ones(3)) else 0.0  # (shapes that do not broadcast)
    return np.sum(x * np.spacing(x) * 1e15) + same + other


def diagonals(x):
    return np.sum(np.diag(x, 1) * 2.0) + np.sum(np.diag(np.diag(x), -1) ** 2) + np.sum(
        np.diag(np.outer(x, x)) * x)


def integer_saved_on_a_loops_tape(x):
    y = x
    for _ in range(2):  # the difference of two argmaxes is saved for the backward
        y = y * (np.nanargmax(y) - np.nanargmin(y)) + x
    return np.sum(y)


def integer_chosen_by_a_branch(x):
    y = x * 1.0
    if np.sum(x) > 0:
        k = np.argmax(x)
    else:
        k = np.argmin(x)
    return np.sum(y * k)


def scaled_by_powers_of_two(x):
    y = np.ldexp(np.sum(x), 2) + np.sum(np.ldexp(x * x, 2))
    for _ in range(2):
        y = y + np.ldexp(y, -1)
    return y


def integer_as_a_cotangent(x):  # fuzz seed 2758411, shrunk: `1 * argmax` is argmax itself,
    v4 = np.max(x[1:], axis=0, keepdims=True)  # then divided by max's tie count
    return np.reshape(v4, ()) * np.nanargmax(x[:1] * 0.5)


def integer_times_a_helpers_result(x):  # fuzz seed 2759031: g * argmax, g from a helper
    return (np.outer(x, x).ravel() + np.mean(x) * np.nanargmax(x)).mean()


def integer_cotangent_of_a_maximum(x):  # fuzz seed 2760707: `1 * argmax` reached a where
    return np.maximum(0.5, np.sum(x)) * np.nanargmax(np.maximum(0.5, x))


def integer_index_arithmetic(x):  # an index stays an integer (a shape's item is no float)
    k = np.argmax(x)
    return x[k + x.shape[0] // 2 - 2] * 2.0 + x[k - 1] * k + np.sum(x / (k + 1))


def integer_times_an_items_cotangent(x):  # fuzz seed 2796941: `g * argmax` where g is
    v = ((4, 4), x.reshape((2, 2)))[1]  # a getitem's transpose of the seed 1.0 (a constant)
    return (v.ravel() * np.nanargmax(v.ravel()))[0] + (x * np.argmax(x))[1:].sum()


X = np.array([0.5, 0.3, -0.7, 0.25])


@pytest.mark.parametrize("fn", [times_an_argmax, nan_extremes, bins, membership,
                                spacing_and_equivalence, diagonals, integer_saved_on_a_loops_tape,
                                integer_chosen_by_a_branch, scaled_by_powers_of_two,
                                integer_as_a_cotangent, integer_times_a_helpers_result,
                                integer_index_arithmetic, integer_cotangent_of_a_maximum,
                                integer_times_an_items_cotangent],
                         ids=lambda f: f.__name__)
def test_as_numpy_on_the_array_api(fn):
    value, grad = sg.value_and_grad(fn)(X.copy())
    v, g = sg.value_and_grad(fn)(xs.asarray(X.copy()))
    np.testing.assert_allclose(float(v), fn(X.copy()), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(g), grad, rtol=1e-12)


def test_nan_arg_extremes_as_numpys():
    for values in ([np.nan, -np.inf, 1.0], [np.nan, -np.inf], [2.0, np.nan, 2.0], [np.inf, np.nan]):
        a = np.array(values)
        for largest, reference in ((True, np.nanargmax), (False, np.nanargmin)):
            assert int(nan_arg_extreme(xs.asarray(a), None, False, largest)) == reference(a)
    m = np.array([[np.nan, 1.0, 3.0], [-np.inf, np.nan, -np.inf]])
    got = nan_arg_extreme(xs.asarray(m), 1, True, True)
    np.testing.assert_array_equal(np.asarray(got), np.nanargmax(m, axis=1, keepdims=True))
    with pytest.raises(ValueError, match="All-NaN slice"):
        np.nanargmax(np.array([[np.nan], [1.0]]), axis=1)
    with pytest.raises(ValueError, match="All-NaN slice"):
        nan_arg_extreme(xs.asarray(np.array([[np.nan], [1.0]])), 1, False, True)


def test_digitize_as_numpys():
    x = np.array([-1.0, -0.5, 0.0, 0.2, 0.5, 2.0])
    for b in ([-0.5, 0.0, 0.5], [0.5, 0.0, -0.5], [0.0, 0.0, 1.0]):
        for right in (False, True):
            got = digitize_sorted(xs.asarray(x), xs.asarray(np.array(b)), right)
            np.testing.assert_array_equal(np.asarray(got), np.digitize(x, np.array(b), right=right))
    with pytest.raises(ValueError, match="monotonically"):
        digitize_sorted(xs.asarray(x), xs.asarray(np.array([0.0, 1.0, 0.5])), False)


# A Python float argument beside an array (fuzz seed 2768435, shrunk: `c * np.nanargmax(c)`
# raised in the generated code): a row with an integer or boolean result takes its operand
# as an array, a comparison of a float is a Python bool cast as an array, and a constant
# list is an array to an elementwise or integer-result row (`np.searchsorted([0.0, 1.0], c)`,
# and `c < [1.0, 0.0]` of minimum's derivative, which Python refuses on NumPy too).
def integer_results_of_a_float(c, x):
    return c * np.nanargmax(c) + c * np.argmax(c) * np.argmin(c) + c * np.count_nonzero(c) + np.sum(
        x * np.isin(c, [1.0])) + c * np.isnan(c) + c * (c > 0) + c * np.digitize(c, [0.0, 1.0])


def constant_lists_beside_a_float(c, x):
    return c * np.searchsorted([0.0, 1.0], c) + np.sum(x * np.minimum([1.0, 0.0], c)) + np.sum(
        x + np.maximum(x, [0.5, 0.0])) + np.sum(x * np.isin(x, [0.5, 0.25])) + np.sum(
        x * np.searchsorted([0.0, 1.0], x))


M = np.array([[0.5, -0.3], [0.7, 0.25], [-1.2, 0.4]])


@pytest.mark.parametrize("fn", [integer_results_of_a_float, constant_lists_beside_a_float],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("c", [-1.3, 0.6])
def test_a_float_beside_an_array(fn, c):
    grads = sg.grad(fn, wrt=(0, 1))(c, M.copy())
    expected = [(fn(c + 1e-6, M) - fn(c - 1e-6, M)) / 2e-6]
    np.testing.assert_allclose(float(grads[0]), expected[0], rtol=1e-6, atol=1e-9)
    strict = sg.grad(fn, wrt=(0, 1))(c, xs.asarray(M.copy()))
    np.testing.assert_allclose(float(strict[0]), float(grads[0]), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(strict[1]), grads[1], rtol=1e-12)
