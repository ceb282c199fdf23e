"""Programs that crashed inside the compiler or generated code (issue 10, "Crashes
today"): each now gives NumPy's value and the central-difference derivative, in
reverse mode (grad, called twice: the variant is reused) and forward mode (jvp)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad

W = np.array([1.0, 2.0, 3.0])


def constant_array_operands(x):
    return np.sum(x * W) + np.sum(x * np.ones(3)) + np.sum(x * np.arange(3.0))


def dot_is_the_output(x):
    return np.dot(x, x)


def method_dot_of_slices(x):
    return x[:2].dot(x[1:])


def inner_and_tensordot(x):
    return np.inner(x, x) + np.tensordot(x, x, axes=1)


def loop_writes_into_zeros(x):
    y = np.zeros(3)
    for i in range(3):
        y[i] = x[i] * 2.0
    return np.sum(y * y)


def nested_def_in_static_loop(x0):
    for r1 in (x0,):
        def helper(p):
            return r1 * p  # noqa: B023 (the fuzzer's program, as written)
    y5 = x0
    return np.sum(y5 * y5)


def nested_def_in_range_loop(x):
    s = x[0] * 0.0
    for i in range(3):
        def term(p):
            return p * x[i]  # noqa: B023 (called in the same iteration)
        s = s + term(x[i])
    return s


def tuple_and_list_matmul_operands(x):
    # `@` reads a tuple or list as an array (fuzz seed 2100169: AttributeError on .shape
    # in the gradient's matmul_bar)
    return np.sum(np.sin((1.0, 2.0, -0.5) @ x)) + np.sum((x @ [[1.0], [2.0], [0.5]]) ** 2)


CASES = [
    ("tuple-list-matmul", tuple_and_list_matmul_operands),
    ("constant-operands", constant_array_operands),
    ("dot-output", dot_is_the_output),
    ("method-dot", method_dot_of_slices),
    ("inner-tensordot", inner_and_tensordot),
    ("loop-writes-zeros", loop_writes_into_zeros),
    ("def-in-static-loop", nested_def_in_static_loop),
    ("def-in-range-loop", nested_def_in_range_loop),
]
X1, X2 = np.array([0.3, 0.5, 0.7]), np.array([-0.4, 1.1, 0.2])


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_reverse_and_forward(name, fn):
    grad = sg.grad(fn)
    for x in (X1, X2):
        expected = numeric_grad(fn, [x], 0)
        assert_close(grad(x), expected, rtol=1e-5, atol=1e-7)
        out, t_out = sg.jvp(fn, (x,), (np.ones(3),))
        assert_close(out, fn(x))
        assert_close(t_out, np.sum(expected), rtol=1e-5, atol=1e-7)
        _, vjp_fn = sg.vjp(fn, x)
        assert_close(vjp_fn(1.0)[0], expected, rtol=1e-5, atol=1e-7)


def list_of_scalars(a):
    return np.sum([1.0, a * a, 2.0]) * a


def list_of_rows(x):
    return np.sum(np.array([x, x * x]) * 2.0) + np.sum([x, np.sin(x)])


def test_list_operand_holding_differentiated_values():
    for a in (0.7, -1.3):  # Python floats
        expected = numeric_grad(list_of_scalars, [a], 0)
        assert_close(sg.grad(list_of_scalars)(a), expected, rtol=1e-6)
        assert_close(sg.vjp(list_of_scalars, a)[1](1.0)[0], expected, rtol=1e-6)
        assert_close(sg.jvp(list_of_scalars, (a,), (1.0,))[1], expected, rtol=1e-6)
    expected = numeric_grad(list_of_rows, [X1], 0)
    assert_close(sg.grad(list_of_rows)(X1), expected, rtol=1e-6)
    assert_close(sg.jvp(list_of_rows, (X1,), (np.ones(3),))[1], np.sum(expected), rtol=1e-6)


def mean_of_empty(x):
    return np.mean(x[:0]) + np.sum(x * x)


def test_mean_of_an_empty_slice_is_nan_as_in_numpy():
    # folding 1 / size at compile time divided by zero (ZeroDivisionError while compiling)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "Mean of empty slice"
        value, grad = sg.value_and_grad(mean_of_empty)(X1)
        assert np.isnan(value) and np.isnan(mean_of_empty(X1))
        assert_close(grad, 2.0 * X1)  # the empty slice reads no element of x
        out, _ = sg.jvp(mean_of_empty, (X1,), (np.ones(3),))
        assert np.isnan(out)


# `x += ...` on a Python-float argument rebinds it (fuzz seed 5078): the run-time check
# for an argument written in place took a NumPy scalar for a read-only array.

def augments_float_argument(x, k):
    k += math.sqrt(k * k + 1.0)
    return np.sum(x * k)


def test_augmented_assignment_to_a_float_argument():
    x = np.array([1.0, 2.0])
    for k in (0.5, np.float64(-0.5), np.array(0.25)):
        value, grads = sg.value_and_grad(augments_float_argument, wrt=(0, 1))(x, k)
        assert_close(value, augments_float_argument(x, np.array(k, dtype=float)))
        for i, g in enumerate(grads):
            assert_close(g, numeric_grad(lambda a, b: augments_float_argument(a, b.copy()),
                                         [x, np.array(k, dtype=float)], i))
        out, t = sg.jvp(augments_float_argument, (x, k), (np.zeros(2), 1.0))
        assert_close(t, grads[1])
    read_only = np.array(0.5)
    read_only.flags.writeable = False  # NumPy raises writing into it: so does compiled code
    with pytest.raises(ValueError, match="read-only"):
        sg.grad(augments_float_argument, wrt=(0, 1))(x, read_only)


# A function that fails on the example arguments, called with a tuple/list/dict argument
# (fuzz seed 1176): the probe's internal ProbeFailed reached the user. Now the generic
# code runs and raises the function's own error, as for array arguments.

class SavesItsSecondInput(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x, z):
        ctx.save_for_backward(x, z)
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        x, z = ctx.saved_tensors
        return g * z.reshape(2), g


def writes_a_saved_view(x0, params):
    v2 = SavesItsSecondInput.apply(x0 * x0, x0.reshape((1, 2)))  # a view of x0, saved
    x0[0:1] += params["w"]
    return np.sum(v2 * x0)


def inverts(m, params):
    return np.sum(np.linalg.inv(m) * params[0])


def test_a_function_failing_on_container_arguments_raises_its_own_error():
    x, params = np.array([0.5, -0.3]), {"w": np.array([1.0])}
    for transform in (sg.grad(writes_a_saved_view, wrt=(0, 1)),
                      sg.value_and_grad(writes_a_saved_view, wrt=(0, 1))):
        with pytest.raises(RuntimeError, match="has been modified by an inplace operation"):
            transform(x.copy(), params)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        sg.grad(inverts, wrt=(0, 1))(np.zeros((2, 2)), (np.ones((2, 2)),))
    m = np.array([[2.0, 0.5], [0.1, 1.0]])  # elsewhere the same transform is exact
    grads = sg.grad(inverts, wrt=(0, 1))(m, (np.ones((2, 2)),))
    assert_close(grads[0], numeric_grad(lambda a: inverts(a, (np.ones((2, 2)),)), [m], 0))


def written_by_an_integral_part(x0, x1):
    # modf's integral part has derivative 0: the cotangent of the 0-d reshape is the Python
    # number 0.0 (hoisting.zeros_of_numbers), whose `.reshape((1,))` the probe had chosen
    x1[3] *= np.modf(np.reshape(x1[:1], ()))[1]
    y2 = np.tile(x0, 32).reshape((4, 4, 4))
    y2[0] = x1.reshape((4, 1))
    return np.sum(y2)


def test_a_zero_cotangent_that_is_a_number_gets_no_method_call():
    """Fuzz seed 2662863: "'float' object has no attribute 'reshape'" in the generated
    gradient, sg.grad and sg.value_and_grad alike."""
    x0, x1 = np.array([0.026139, 1.071559]), np.array([-0.538206, -0.440085, 0.170349, -1.802107])
    for _ in range(2):  # (the variant is reused)
        value, (g0, g1) = sg.value_and_grad(written_by_an_integral_part, wrt=(0, 1))(x0.copy(), x1.copy())
        assert value == pytest.approx(written_by_an_integral_part(x0.copy(), x1.copy()), rel=1e-12)
        assert_close(g0, numeric_grad(written_by_an_integral_part, [x0, x1], 0), rtol=1e-6)
        assert_close(g1, numeric_grad(written_by_an_integral_part, [x0, x1], 1), rtol=1e-6)
