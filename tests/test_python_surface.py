"""Issue 29 §2: Python constructs research code uses, compiled or refused clearly."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from tests.conftest import numeric_grad


def checked(x):
    assert x.shape[0] == 3, "three rows"
    assert np.all(np.isfinite(x)), "finite"
    return np.sum(x * x * x)


def test_assert_runs_in_the_forward_and_leaves_the_gradient_alone():
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(sg.grad(checked)(x), 3 * x * x)
    np.testing.assert_allclose(sg.hessian(checked)(x), np.diag(6 * x))


def test_a_failing_assert_raises_assertion_error_with_its_message():
    with pytest.raises(AssertionError, match="finite"):
        sg.grad(checked)(np.array([0.5, np.inf, 2.0]))
    with pytest.raises(AssertionError, match="three rows"):
        sg.grad(checked)(np.ones(4))


def by_name(x):  # (ruff's B009 would rewrite the very construct under test)
    return np.sum(getattr(np, "exp")(x) * getattr(np, "sin")(x))  # noqa: B009


def test_getattr_of_numpy_with_a_constant_name_is_that_function():
    x = np.array([0.3, -0.7])
    np.testing.assert_allclose(sg.grad(by_name)(x), numeric_grad(by_name, [x], 0), rtol=1e-6)


def row_sum(x):
    return np.sum(np.sin(sum(x))) + np.sum(sum(x, 1.5) ** 2)


def test_builtin_sum_of_an_array_adds_its_rows():
    x = np.array([[0.3, -0.7, 1.1], [0.2, 0.5, -0.4]])
    assert np.isclose(sg.value_and_grad(row_sum)(x)[0], row_sum(x))
    np.testing.assert_allclose(sg.grad(row_sum)(x), numeric_grad(row_sum, [x], 0), rtol=1e-6)


def to_float(x):
    return float(np.sum(x)) * x[0]


def to_int(x):
    return int(np.sum(x)) * x[0]


def to_item(x):
    return np.sum(x).item() * x[0]


def to_list(x):
    return np.sum(np.array(x.tolist()))


@pytest.mark.parametrize("fn", [to_float, to_int, to_item, to_list],
                         ids=["float", "int", "item", "tolist"])
def test_a_python_number_of_an_active_array_is_a_compile_error(fn):
    # decided in issue 29 (Note [Python numbers of arrays]): never a silent zero
    with pytest.raises(CompileError, match="silent constant"):
        sg.grad(fn)(np.array([0.5, 1.5]))


def constant_call(x, n):
    return np.sum(x * np.linspace(0, 1, n)) + np.sum(x * np.sinc(np.arange(3.0)))


def test_a_call_on_constants_runs_as_numpy():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(sg.grad(constant_call)(x, 3), np.linspace(0, 1, 3) + np.sinc(np.arange(3.0)))
