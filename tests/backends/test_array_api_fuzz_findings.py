"""Fuzz findings of the merged main on array_api_strict (benchmarks/fuzz.py, seeds
2400000..2401525): each crashed in generated code before its fix. Values are judged by
arithmetic: `where(mask, x, x)` is x (derivative 1), `isclose` is boolean (derivative 0)."""

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import numeric_grad

xs = pytest.importorskip("array_api_strict")


def where_of_a_number(x1, x2):
    return np.where(np.signbit(x1), x1, x1)


def isclose_of_a_number(x0, x1):
    return np.isclose(x1, 0.5)


def isin_of_floats(x):
    return np.isin(np.sum(x), np.array([0.5]))


def test_where_of_two_numbers_beside_its_mask():
    """Seed 2400278: the mask was the array beside which x and y stayed Python numbers,
    and array_api_strict's where refuses two numbers."""
    g1, g2 = sg.grad(where_of_a_number, wrt=(0, 1))(-0.597069, xs.asarray(np.array([-0.04])))
    assert float(g1) == 1.0 and np.asarray(g2).tolist() == [0.0]


def test_isclose_of_a_number():
    """Seed 2400741: the Array-API spelling took xp.abs of two Python numbers."""
    g0, g1 = sg.grad(isclose_of_a_number, wrt=(0, 1))(xs.asarray(np.array([1.0, 2.0])), 0.85)
    assert np.asarray(g0).tolist() == [0.0, 0.0] and float(g1) == 0.0


def test_isin_of_floats_as_numpys():
    """Seed 2400409: array_api_strict's isin takes integer arrays only (a TypeError in
    generated code, then a refusal): now spelled as a comparison with every test element."""
    for x in (np.array([-1.1]), np.array([0.5])):
        g = sg.grad(isin_of_floats)
        np.testing.assert_allclose(np.asarray(g(xs.asarray(x))), g(x.copy()), rtol=1e-12)



def reshaped_above_the_median(x1):
    if np.median(x1, axis=-1) > 0.11:
        x1 = x1.reshape((1, 3))
    return np.sum(x1 * x1)


def scaled_by_the_median(x):
    return np.sum(x * x) * np.median(np.abs(x) + 1.0)


@pytest.mark.parametrize("x", [[0.5, 0.2, 0.9], [-0.5, 0.0, 0.1]])
def test_median_in_a_test_takes_its_middle_element_on_the_array_api(x):
    """Seed 2610161: median's composition takes the middle element with a 0-d index
    (np.take(s, k, axis=ax)); array_api_strict's take wants a 1-d index array and raised.
    The gradient of sum(x * x) is 2x on either branch."""
    x = np.array(x)
    got = sg.grad(reshaped_above_the_median)(xs.asarray(x))
    np.testing.assert_allclose(np.asarray(got), 2 * x, rtol=1e-12)


def test_a_gradient_through_median_on_the_array_api():
    # (its transpose is a scatter-add, which the Array API lacks: refused before, now a
    # one-hot contraction, Note [Scatter-add without add.at]; tests/backends/test_array_api_gathers.py)
    from tests.conftest import numeric_grad

    x = np.array([0.5, -0.2, 0.9])
    got = sg.grad(scaled_by_the_median)(xs.asarray(x))
    np.testing.assert_allclose(np.asarray(got), numeric_grad(scaled_by_the_median, [x], 0),
                               rtol=1e-6)


def least_squares_unused(x0):
    L1 = [np.linalg.lstsq(x0, x0)]  # noqa: F841 (the fuzz program's unused result)
    return np.sum(x0)


def least_squares(a, b):
    return np.sum(np.linalg.lstsq(a, b)[0])


def test_lstsq_on_the_array_api():
    """Seed 2621277: lstsq's default rcond was eps * np.maximum(m, n), an integer array on
    the Array API, which array_api_strict refuses to multiply by a Python float."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(4, 4)), rng.normal(size=4)
    np.testing.assert_array_equal(np.asarray(sg.grad(least_squares_unused)(xs.asarray(a))),
                                  np.ones((4, 4)))
    got = sg.grad(least_squares, wrt=(0, 1))(xs.asarray(a), xs.asarray(b))
    want = sg.grad(least_squares, wrt=(0, 1))(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-10)


def nanvar_of_rows(x, ddof):
    return np.sum(np.nanvar(x, axis=1, ddof=ddof)) + np.sum(np.nanstd(x, axis=0))


def test_nanvar_divides_by_a_float_count_on_the_array_api():
    """Seeds 2621101, 2621197, 2621310, 2621887, 2622900: nanvar's composition (nanstd's
    too) divided by the integer count of kept elements, which array_api_strict refuses to
    mix with a float array; the count is now in the operand's dtype."""
    x = np.array([[0.5, np.nan, -0.3, 0.8], [0.1, 0.2, np.nan, -1.0], [0.4, 0.9, 0.3, 0.2]])
    for ddof in (0, 1):
        got = sg.grad(nanvar_of_rows)(xs.asarray(x), ddof)
        want = sg.grad(nanvar_of_rows)(x, ddof)
        assert np.all(np.isfinite(want)) and np.any(want != 0)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


def squared_above_the_nanquantile(x, c):
    if np.nanquantile(x, 0.6) + np.nanpercentile(x, [20, 75])[1] > c:
        return np.sum(x * x)
    return np.sum(x)


@pytest.mark.parametrize("c, branch", [(-1.0, "squared"), (5.0, "sum")])
def test_nanquantile_in_a_test_interpolates_with_a_float_count_on_the_array_api(c, branch):
    """Seed 2621717: nanquantile's composition took q * (count - 1) with an integer count
    of the non-nan values, and array_api_strict refuses a Python float times an integer
    array; the count is now in the sorted values' dtype. (Its gradient needs a scatter-add
    there, refused; a test on it is not differentiated.) Either branch's gradient: 2x, 1."""
    x = np.array([0.5, np.nan, -0.3, 0.8, 0.1])
    got = np.asarray(sg.grad(squared_above_the_nanquantile)(xs.asarray(x), c))
    want = 2 * x if branch == "squared" else np.ones(5)
    np.testing.assert_array_equal(got, want)


def squared_derivative(p, m):
    return np.sum(np.polyder(p, m) ** 2)


@pytest.mark.parametrize("m", [1, 2])
def test_polyder_multiplies_by_float_powers_on_the_array_api(m):
    """Found beside seed 2621717 (the same mechanism): polyder's composition multiplied
    the coefficients by an integer arange, which array_api_strict refuses to promote.
    p = (1, 2, 3, 4): p' = (3, 4, 3), so d sum(p'^2)/dp = 2 p' * (3, 2, 1) at (p0, p1, p2);
    p'' = (6, 4): 2 p'' * (6, 2) at (p0, p1)."""
    p = np.array([1.0, 2.0, 3.0, 4.0])
    want = {1: [18.0, 16.0, 6.0, 0.0], 2: [72.0, 16.0, 0.0, 0.0]}[m]
    np.testing.assert_array_equal(sg.grad(squared_derivative)(p, m), want)
    np.testing.assert_array_equal(np.asarray(sg.grad(squared_derivative)(xs.asarray(p), m)), want)


def ptp_of_a_number(x0, x1):
    return np.ptp(x1)


def max_of_a_number(x0, x1):
    return np.max(x1) * np.sum(x0)


def test_tie_counts_of_a_python_number_on_the_array_api():
    """Seed 2630312: max/min's tie count took its dtype from `xp.result_type(x)` with x a
    Python number, which array_api_strict refuses; the count now takes ans's dtype.
    ptp of a number is 0 (derivative 1 - 1); max of a number is the number (derivative 1)."""
    x0 = xs.asarray(np.array([[1.0, 2.0, 3.0]]))
    g0, g1 = sg.grad(ptp_of_a_number, wrt=(0, 1))(x0, -0.54)
    assert np.asarray(g0).tolist() == [[0.0, 0.0, 0.0]] and float(g1) == 0.0
    g0, g1 = sg.grad(max_of_a_number, wrt=(0, 1))(x0, -0.5)
    assert np.asarray(g0).tolist() == [[-0.5, -0.5, -0.5]] and float(g1) == 6.0


def _relu_in_a_loop(a0, a1, scale=0.5):
    a1 = np.maximum(a0, 0.0)
    while True:
        break
    return np.reshape(a1 * np.ones((1, 1)), ())


def _stops_on_a_folded_derivative(x0, x1):
    for _r4, r5 in zip(x0, np.tile(x1.ravel(), 2).reshape((1, 4, 2))):
        if sg.grad(_relu_in_a_loop)(0.5, r5, scale=2) < 0.41:  # maximum's mask: a bool
            break
        x0 = np.vstack([np.reshape(x0.ravel()[:24], (3, 4, 2)), r5.reshape((1, 4, 2))])
    return np.sum(x0) + np.sum(x1 * x1)


def test_a_where_whose_condition_folded_to_a_python_bool_on_the_array_api():
    """Seed 2643979: `sg.grad(helper)(0.5, ...)` inside f folded maximum's mask to
    `xp.where(False, ...)`, and array_api_strict's where takes only an array there."""
    rng = np.random.default_rng(0)
    x0, x1 = rng.normal(size=(4, 4, 2)), rng.normal(size=(2, 2))
    g0, g1 = sg.grad(_stops_on_a_folded_derivative, wrt=(0, 1))(xs.asarray(x0), xs.asarray(x1))
    e0, e1 = sg.grad(_stops_on_a_folded_derivative, wrt=(0, 1))(x0, x1)
    np.testing.assert_allclose(np.asarray(g0), e0)
    np.testing.assert_allclose(np.asarray(g1), e1)
    np.testing.assert_allclose(e0, numeric_grad(_stops_on_a_folded_derivative, (x0, x1), 0), atol=1e-6)
    np.testing.assert_allclose(e1, numeric_grad(_stops_on_a_folded_derivative, (x0, x1), 1), atol=1e-6)


def _modf_parts(x0, x1):
    fractional, integral = np.modf(x0)
    return fractional * 3.0 + integral + np.sum(x1 * 0.0)


def test_modf_of_a_python_float_beside_an_array_on_the_array_api():
    """Seed 2647261: modf's Array API spelling is a tuple, so x stayed a Python float and
    array_api_strict's trunc refused it."""
    g0, g1 = sg.grad(_modf_parts, wrt=(0, 1))(2.72655, xs.asarray(np.array([0.5, -1.0])))
    assert float(g0) == 3.0 and np.asarray(g1).tolist() == [0.0, 0.0]


def _rot90_of_one_element(x1):
    return np.rot90(x1[1].reshape((1, 1))).reshape(())


def test_swapaxes_spelling_does_not_capture_operands_named_i_and_j():
    """Seed 2648651: rot90's composition swaps axes `i` and `j`, and the Array API
    spelling's comprehension variable was `i` too: 'repeated axis in transpose'."""
    x = np.array([[0.3], [0.7], [-0.2]])
    got = sg.grad(_rot90_of_one_element)(xs.asarray(x))
    assert np.asarray(got).tolist() == [[0.0], [1.0], [0.0]]


def _tanh_of_max_on_a_branch(a):
    if np.sum(a) > 0.0:
        return np.tanh(np.max(a * a))
    return np.sum(a)


def _through_a_nested_gradient(x):
    return np.sum(sg.grad(_tanh_of_max_on_a_branch)(x) * x)


def test_a_tie_mask_saved_across_a_branch_of_a_nested_gradient_on_the_array_api():
    """Seed 2665382: max's tie mask (`a == max`, boolean) of the inner gradient is saved
    across the `if` for the outer backward; the name the branch binds it to was not
    known to hold a mask, so `g * mask` reached array_api_strict uncast."""
    x = np.array([0.3, -0.2, 0.5])
    g = sg.grad(_through_a_nested_gradient)
    expected = numeric_grad(_through_a_nested_gradient, (x,), 0)
    np.testing.assert_allclose(g(x), expected, atol=1e-6)  # (NumPy's first, as the fuzzer ran)
    np.testing.assert_allclose(np.asarray(g(xs.asarray(x))), expected, atol=1e-6)


def _scaled_by_its_max_in_a_loop(a):
    for _ in range(2):
        a = a * np.max(a)
    return np.sum(a)


def _through_a_nested_gradient_of_a_loop(x):
    return np.sum(sg.grad(_scaled_by_its_max_in_a_loop)(x * x) * x)


def test_a_tie_mask_saved_on_a_loops_tape_of_a_nested_gradient_on_the_array_api():
    """Seed 2684438: max's tie mask of the inner gradient is pushed on a loop's tape of
    one saved quantity for the outer backward; the name its pop binds was not known to
    hold a mask, so `g * mask` reached array_api_strict uncast."""
    x = np.array([0.3, -0.2, 0.5])
    g = sg.grad(_through_a_nested_gradient_of_a_loop)
    expected = numeric_grad(_through_a_nested_gradient_of_a_loop, (x,), 0)
    np.testing.assert_allclose(g(x), expected, atol=1e-6)  # (NumPy's first, as the fuzzer ran)
    np.testing.assert_allclose(np.asarray(g(xs.asarray(x))), expected, atol=1e-6)


def _scaled_by_its_mean_and_max(a):
    for _ in range(1):
        a = np.abs(np.sum(a)) * np.maximum(a, a)
        a = a * np.max(np.mean(a) * np.ones((2,)))
    return np.sum(a)


def _nested_gradients_in_a_loop(x):
    a1 = np.sum(x)
    for _ in range(2):
        a1 = -sg.grad(_scaled_by_its_mean_and_max)(a1 * x)
    return np.sum(np.cos(a1 * 0.25))


def test_a_tie_mask_in_a_tuple_tape_saved_again_by_an_outer_loop_on_the_array_api():
    """Seed 2684438 itself: the tie masks of the inner gradient's loop are saved in a
    tuple per iteration, and that tape on the outer loop's tape; each position's mask
    must pop as a mask through both tapes (`g * mask` reached array_api_strict uncast)."""
    x = np.array([0.3, -0.2, 0.5, 0.4])
    g = sg.grad(_nested_gradients_in_a_loop)
    expected = numeric_grad(_nested_gradients_in_a_loop, (x,), 0)
    np.testing.assert_allclose(g(x), expected, atol=1e-6)
    np.testing.assert_allclose(np.asarray(g(xs.asarray(x))), expected, atol=1e-6)


def _rows_of_the_last_index(x0):
    for i1 in range(0, 4):  # noqa: B007 - its index is read after it
        pass
    return np.tile(x0, 6)[:16].reshape((4, 4))[i1][i1]


def test_a_loops_index_read_after_it_indexes_as_an_int_on_the_array_api():
    """Seed 2724337: the loop's index after the loop (Note [Names a loop binds]) is the
    loop's output, a copy of its Python int; it was not known to be one, so `m[i]` of a
    matrix lacked the `...` array_api_strict requires (an IndexError in generated code)."""
    x = np.array([1.429731, -0.898394, -1.138682])
    g = sg.grad(_rows_of_the_last_index)
    np.testing.assert_allclose(np.asarray(g(xs.asarray(x))), g(x.copy()), rtol=1e-12)
    np.testing.assert_allclose(g(x.copy()), numeric_grad(_rows_of_the_last_index, (x,), 0), atol=1e-6)
