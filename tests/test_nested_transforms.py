"""srcgrad's transforms called inside compiled code (Note [Transforms in compiled code] in
srcgrad.frontend.transforms): sg.grad / value_and_grad / jvp / vjp inside a function that
is itself differentiated, in reverse and forward mode, against central differences of a
reference whose inner derivative is written by hand."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from tests.conftest import assert_close, numeric_grad

rng = np.random.default_rng(7)


def f(x):
    return np.sum(np.sin(x) ** 2)  # gradient: sin(2x)


def f2(x, y):
    return np.sum(np.sin(x) * y ** 2)  # d/dx: cos(x) y^2, d/dy: 2 sin(x) y


def f_pair(x, y):
    return np.sum(x * y), np.exp(x)  # vjp of (a, b): (a y + b e^x, a x)


def f_aux(x):
    return np.sum(x ** 3), np.cos(x)


df_outside = sg.grad(f)


# each case: (the compiled function, its reference with the inner derivative by hand)
def grad_inside(x):
    return np.sum(sg.grad(f)(x) ** 2)


def grad_inside_ref(x):
    return np.sum(np.sin(2 * x) ** 2)


def grad_bound_outside(x):
    return np.sum(df_outside(x) * x)


def grad_bound_outside_ref(x):
    return np.sum(np.sin(2 * x) * x)


def grad_bound_inside(x):
    df = sg.grad(f)
    return np.sum(np.cos(df(x)))


def grad_bound_inside_ref(x):
    return np.sum(np.cos(np.sin(2 * x)))


def value_and_grad_wrt(x):
    v, d = sg.value_and_grad(f2, wrt=1)(x, x * x)
    return v + np.sum(d * x)


def value_and_grad_wrt_ref(x):
    y = x * x
    return np.sum(np.sin(x) * y ** 2) + np.sum(2 * np.sin(x) * y * x)


def grad_wrt_tuple(x):
    dx, dy = sg.grad(f2, wrt=(0, 1))(x, 2.0 * x)
    return np.sum(dx * dy)


def grad_wrt_tuple_ref(x):
    y = 2.0 * x
    return np.sum(np.cos(x) * y ** 2 * 2 * np.sin(x) * y)


def grad_has_aux(x):
    d, aux = sg.grad(f_aux, has_aux=True)(x)
    return np.sum(d * aux)


def grad_has_aux_ref(x):
    return np.sum(3 * x ** 2 * np.cos(x))


def jvp_inside(x):
    y, t = sg.jvp(f2, (x, 2.0 * x), (x, np.ones_like(x)))
    return y * t


def jvp_inside_ref(x):
    y = 2.0 * x
    t = np.sum(np.cos(x) * y ** 2 * x) + np.sum(2 * np.sin(x) * y)
    return np.sum(np.sin(x) * y ** 2) * t


def jvp_tuple_out(x):
    (a, b), (ta, tb) = sg.jvp(f_pair, (x, x + 1.0), (np.cos(x), x))
    return a * ta + np.sum(b * tb)


def jvp_tuple_out_ref(x):
    y, tx, ty = x + 1.0, np.cos(x), x
    a, ta = np.sum(x * y), np.sum(tx * y + x * ty)
    return a * ta + np.sum(np.exp(x) * np.exp(x) * tx)


def vjp_inside(x):
    out, vjp_fn = sg.vjp(f2, x, 2.0 * x)
    gx, gy = vjp_fn(1.5)
    return out + np.sum(gx * gy)


def vjp_inside_ref(x):
    y = 2.0 * x
    gx, gy = 1.5 * np.cos(x) * y ** 2, 1.5 * 2 * np.sin(x) * y
    return np.sum(np.sin(x) * y ** 2) + np.sum(gx * gy)


def vjp_tuple_out(x):
    (a, b), vjp_fn = sg.vjp(f_pair, x, x * x)
    gx, gy = vjp_fn((2.0, np.sin(x)))
    return a + np.sum(gx * b) + np.sum(gy)


def vjp_tuple_out_ref(x):
    y = x * x
    gx = 2.0 * y + np.sin(x) * np.exp(x)
    return np.sum(x * y) + np.sum(gx * np.exp(x)) + np.sum(2.0 * x)


def vjp_has_aux(x):
    out, vjp_fn, aux = sg.vjp(f_aux, x, has_aux=True)
    (g,) = vjp_fn(out)
    return np.sum(g * aux)


def vjp_has_aux_ref(x):
    out = np.sum(x ** 3)
    return np.sum(out * 3 * x ** 2 * np.cos(x))


grad_in_lambda = lambda x: np.sum(sg.grad(f)(x) * np.exp(x))  # noqa: E731


def grad_in_lambda_ref(x):
    return np.sum(np.sin(2 * x) * np.exp(x))


CASES = {name: (globals()[name], globals()[name + "_ref"]) for name in [
    "grad_inside", "grad_bound_outside", "grad_bound_inside", "value_and_grad_wrt",
    "grad_wrt_tuple", "grad_has_aux", "jvp_inside", "jvp_tuple_out", "vjp_inside",
    "vjp_tuple_out", "vjp_has_aux", "grad_in_lambda"]}


@pytest.mark.parametrize("name", CASES)
def test_transform_inside_compiled_code(name):
    fn, ref = CASES[name]
    x = rng.uniform(0.2, 1.2, size=3)
    assert_close(fn(x), ref(x), rtol=1e-12)  # the reference is the same function
    expected = numeric_grad(ref, [x], 0)
    assert_close(sg.grad(fn)(x), expected, rtol=1e-6, atol=1e-8)  # reverse
    direction = rng.standard_normal(3)
    value, tangent = sg.jvp(fn, (x,), (direction,))  # forward
    assert_close(value, ref(x), rtol=1e-12)
    assert_close(tangent, np.sum(expected * direction), rtol=1e-6, atol=1e-8)


def test_grad_of_a_function_calling_a_transform_twice_nested():
    """A third level: grad of a function calling grad of a function calling grad."""
    def inner(x):
        return np.sum(sg.grad(f)(x) ** 2)  # sum(sin(2x)^2)

    def outer(x):
        return np.sum(sg.grad(inner)(x))  # sum(2 sin(4x))

    x = np.array([0.1, 0.7])
    assert_close(sg.grad(outer)(x), 8 * np.cos(4 * x), rtol=1e-10)
    assert_close(sg.grad(outer)(x), numeric_grad(lambda v: np.sum(2 * np.sin(4 * v)), [x], 0),
                 rtol=1e-6)


# ------------------------------------------------------------------ errors name the user's line
def f_loop(x):
    s = 0.0
    for i in range(3):
        s = s + np.sum(np.sin(x) * i)
    return s


def grad_of_loop_inside(x):
    return np.sum(sg.grad(f_loop)(x) ** 2)


def jacobian_inside(x):
    return np.sum(sg.jacobian(np.sin)(x))


def nested_def_inside(x):
    h = lambda y: np.sum(y ** 3)  # noqa: E731
    return np.sum(sg.grad(h)(x))


def internal_call_inside(x):
    return np.sum(x) + len(sg.source(df_outside))


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("fn, text, message", [
    (jacobian_inside, "sg.jacobian", "jacobian or hessian"),
    (nested_def_inside, "sg.grad(h)", "defined inside the compiled function"),
    (internal_call_inside, "sg.source", "srcgrad.api.source"),
], ids=["jacobian", "nested-def", "internal"])
def test_errors_name_the_users_call(fn, text, message):
    x = np.array([0.3, 0.5])
    with pytest.raises(CompileError, match=message) as info:
        sg.grad(fn)(x)
    assert info.value.filename == __file__
    assert info.value.lineno == _line_of(fn, text)


@pytest.mark.parametrize("how", ["grad-inside", "grad-of-grad", "hessian"])
def test_second_derivative_through_a_loop_is_right_or_names_the_users_line(how):
    """Second derivatives through loops are the passes' work (S2): until every form
    compiles, a refusal names the user's line (f_loop's loop or the call), never
    generated code or srcgrad's own files. f_loop = 3 sum(sin x)."""
    x = np.array([0.3, 0.5])
    try:
        if how == "grad-inside":
            got, expected = sg.grad(grad_of_loop_inside)(x), 2 * 9 * np.cos(x) * -np.sin(x)
        elif how == "grad-of-grad":
            got = sg.grad(lambda v: np.sum(sg.grad(f_loop)(v)))(x)
            expected = -3 * np.sin(x)
        else:
            got, expected = sg.hessian(f_loop)(x), np.diag(-3 * np.sin(x))
    except CompileError as err:
        assert "second derivative through a loop" in err.message
        assert err.filename == __file__
        assert err.lineno in (_line_of(f_loop, "for i in range(3)"),
                              _line_of(grad_of_loop_inside, "sg.grad(f_loop)"),
                              _line_of(test_second_derivative_through_a_loop_is_right_or_names_the_users_line,
                                       "sg.grad(f_loop)(v)"))
    else:
        assert_close(got, expected, rtol=1e-10, atol=1e-12)


def _outer_product_loss(a):
    return np.matmul(a * np.ones((4, 1)), a * np.ones((1, 3))).sum()


def _through_inner_matmul_gradient(x):
    return sg.grad(_outer_product_loss)(np.sum(x)) * np.sum(x)


def test_inner_gradient_whose_matmul_bar_becomes_a_transposed_product():
    """Fuzz seed 1902485: the inner gradient (computed in the outer program's forward) has
    `matmul_bar(g, y, shape, 1)`, which a shape-specialised variant writes `y.T @ g`; the
    `y.T` it adds before was always marked backward, so the program wrote it after the
    forward that reads it (UnboundLocalError in sg.grad and value_and_grad; sg.vjp, whose
    forward and backward are two functions, ran). Judged against central differences."""
    x = np.array([0.3, 0.5])
    expected = numeric_grad(_through_inner_matmul_gradient, [x], 0)
    assert_close(sg.grad(_through_inner_matmul_gradient)(x), expected)
    value, g = sg.value_and_grad(_through_inner_matmul_gradient)(x)
    assert_close(value, _through_inner_matmul_gradient(x))
    assert_close(g, expected)
