"""Python-float variants (Note [Scalar code]) compute what the array variant computes,
also at singular points where Python's own operators and `math` raise (`0.0 ** -0.5`,
`1.0 / 0.0`, `math.log(0.0)`) and NumPy returns inf or nan."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


def half_power(x):
    return x ** 0.5


def square_root(x):
    return np.sqrt(x)


def zeroth_power(x):
    return x ** 0


def log_plus_ratio(x):
    return np.log(x) + x / x


def ratio(x, y):
    return x / y


def pendulum(k, x):
    # sin, cos, products: stays on Python floats (math), no NumPy call
    for _ in range(3):
        x = x - 0.1 * k * np.sin(x) * np.cos(x)
    return x * x


SINGULAR = [
    ("half-power-at-0", half_power, (0.0,)),
    ("sqrt-at-0", square_root, (0.0,)),
    ("zeroth-power-at-0", zeroth_power, (0.0,)),
    ("log-at-0", log_plus_ratio, (0.0,)),
    ("log-below-0", log_plus_ratio, (-1.0,)),
    ("divide-by-0", ratio, (1.0, 0.0)),
]


@pytest.mark.parametrize("name,fn,args", SINGULAR, ids=[c[0] for c in SINGULAR])
def test_float_variant_matches_array_variant(name, fn, args):
    wrt = tuple(range(len(args)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        as_floats = sg.value_and_grad(fn, wrt=wrt)(*args)
        as_arrays = sg.value_and_grad(fn, wrt=wrt)(*[np.array(a) for a in args])
        expected = fn(*[np.float64(a) for a in args])
    np.testing.assert_array_equal(np.asarray(as_floats[0], dtype=float), np.asarray(expected, dtype=float))
    np.testing.assert_array_equal(np.asarray(as_floats[1], dtype=float),
                                  np.asarray(as_arrays[1], dtype=float))


def test_regular_points_still_exact_and_on_python_floats():
    g = sg.grad(pendulum, wrt=(0, 1))
    for args in ((0.7, 1.2), (2.0, -0.3)):
        grads = g(*args)
        for i, got in enumerate(grads):
            assert isinstance(got, float)
            assert_close(got, numeric_grad(pendulum, list(args), i), rtol=1e-6)
    assert "math.sin" in sg.source(g) and "xp." not in sg.source(g).split("def ")[1]


@pytest.mark.parametrize("x", [4.0, 0.25])
def test_singular_operators_keep_their_value_elsewhere(x):
    for fn in (half_power, square_root, log_plus_ratio):
        value, grad = sg.value_and_grad(fn)(x)
        assert_close(value, fn(x))
        assert_close(grad, numeric_grad(fn, [x], 0), rtol=1e-6)


@pytest.mark.parametrize("name,fn,args", SINGULAR, ids=[c[0] for c in SINGULAR])
def test_vjp_and_jvp_on_python_floats_as_on_numpy_scalars(name, fn, args):
    """sg.vjp / sg.jvp treat Python-float primals as np.float64: NumPy's inf and nan at a
    singular point, never ZeroDivisionError from Python's float operators."""
    wrt = tuple(range(len(args)))
    tangents = tuple(0.5 + i for i in wrt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out, vjp_fn = sg.vjp(fn, *args)
        grads = vjp_fn(1.0)
        j_out, tangent = sg.jvp(fn, args, tangents)
        a_out, a_vjp_fn = sg.vjp(fn, *[np.array(a) for a in args])
        a_grads = a_vjp_fn(np.array(1.0))
        _, a_tangent = sg.jvp(fn, tuple(np.array(a) for a in args), tuple(map(np.array, tangents)))
        expected = fn(*[np.float64(a) for a in args])
    for got in (out, j_out):
        np.testing.assert_array_equal(np.asarray(got, dtype=float), np.asarray(expected, dtype=float))
    np.testing.assert_array_equal(np.asarray(grads, dtype=float), np.asarray(a_grads, dtype=float))
    np.testing.assert_array_equal(np.asarray(tangent, dtype=float), np.asarray(a_tangent, dtype=float))
    singular = not np.all(np.isfinite(np.asarray((out, *grads), dtype=float)))
    assert singular or name == "zeroth-power-at-0"  # where Python's float operators raise


def test_vjp_and_jvp_on_python_floats_at_regular_points():
    for args in ((0.7, 1.2), (2.0, -0.3)):
        out, vjp_fn = sg.vjp(pendulum, *args)
        assert_close(out, pendulum(*args))
        expected = [numeric_grad(pendulum, list(args), i) for i in range(2)]
        for got, e in zip(vjp_fn(1.0), expected):
            assert_close(got, e, rtol=1e-6)
        _, tangent = sg.jvp(pendulum, args, (1.0, -2.0))
        assert_close(tangent, expected[0] - 2.0 * expected[1], rtol=1e-6)
