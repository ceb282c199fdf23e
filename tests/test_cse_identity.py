"""Equal expressions are distinct arrays when a traced function writes into one of them
(Note [Values whose identity is checked] in srcgrad/passes/cse.py; fuzz seed 2640078)."""

from __future__ import annotations

import numpy as np

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


def _writes_into_second(a0, a1):
    w = a1.reshape(-1)
    w *= a1.ravel()  # in NumPy: a1 squared in place; a0, a separate array, unchanged
    return a1 * a0


def f(x):
    # four equal expressions, four fresh arrays in NumPy
    primals = (np.tile(x.ravel(), 2), np.tile(x.ravel(), 2))
    tangents = (np.tile(x.ravel(), 2), np.tile(x.ravel(), 2))
    return np.sum(sg.jvp(_writes_into_second, primals, tangents)[1])


def test_equal_fresh_arrays_passed_to_a_writing_function_are_not_merged():
    x = np.random.default_rng(0).normal(size=(2, 3))
    # the tangent of a1**2 * a0 along (t0, t1) = (x, x): 2 a1 a0 t1 + a1**2 t0 = 3 x**3
    assert_close(f(x), np.sum(3 * np.tile(x.ravel(), 2) ** 3))
    value, grad = sg.value_and_grad(f)(x)
    assert_close(value, f(x))
    assert_close(grad, numeric_grad(f, (x,), 0))


def test_the_same_array_passed_twice_is_still_refused():
    # the check the note keeps: one array as both arguments is aliasing NumPy would show
    def g(x):
        t = np.tile(x.ravel(), 2)
        return np.sum(sg.jvp(_writes_into_second, (t, t), (t, t))[1])

    x = np.random.default_rng(1).normal(size=(2, 3))
    try:
        sg.grad(g)(x)
    except (ValueError, sg.CompileError) as e:
        assert "shares memory" in str(e) or "alias" in str(e)
    else:
        raise AssertionError("the aliased write was not refused")
