"""`ravel`, `flatten` and `reshape` with NumPy's `order` (srcgrad.ir.bind_targets.in_order).

`order='F'` is the row between two transposes; `order='C'` the row itself. These were
refused ("unexpected keyword argument 'order'", 32 of 3,581 fuzz programs of seed
2620000). Each program is judged by arithmetic: its value against NumPy's, gradient,
Hessian and JVP against central differences. 'A' and 'K' follow the argument's memory
layout, which compiled code does not see: refused at the line.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_first_and_second_order


def ravel_f(x):
    return np.sum(np.ravel(x, order='F') ** 3 * np.arange(12.0))


def reshape_method_f(x):
    return np.sum(x.reshape((4, 3), order='F') ** 3 * np.arange(3.0))


def flatten_f(x):
    return np.sum(x.flatten('F')[:5] ** 3)


def reshape_f_with_minus_one(x):
    return np.sum(np.reshape(x, (2, -1), order='F')[0] * x.ravel('C')[:6])


def reshape_varargs_f(x):
    return np.sum(x.reshape(6, 2, order='F')[:, 0] ** 3)


def reshape_int_f(x):
    return np.sum(np.reshape(x, 12, order='F')[:4] ** 3)


def ravel_c(x):
    return np.sum(np.ravel(x, order='C') ** 3 * np.arange(12.0))


def ravel_method_f_of_3d(x):
    return np.sum(np.sin(x.reshape((2, 3, 2)).ravel('F')) * np.arange(12.0))


PROGRAMS = [ravel_f, reshape_method_f, flatten_f, reshape_f_with_minus_one, reshape_varargs_f,
            reshape_int_f, ravel_c, ravel_method_f_of_3d]
_X = np.array([[0.3, -0.7, 1.1, 0.4], [0.9, -0.2, 0.5, -1.3], [0.6, 1.4, -0.8, 0.25]])


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_order_f_and_c_match_numpy_and_finite_differences(f):
    assert_first_and_second_order(f, _X)


def ravel_k(x):
    return np.sum(x.ravel(order='K') ** 2)


def reshape_a(x):
    return np.sum(np.reshape(x, (4, 3), order='A') ** 2)


@pytest.mark.parametrize("f", [ravel_k, reshape_a])
def test_layout_dependent_orders_are_refused_at_the_line(f):
    with pytest.raises(sg.CompileError, match="depends on the argument's memory layout") as err:
        sg.grad(f)(_X)
    assert "write order='C' or order='F'" in str(err.value)
    assert "order=" in str(err.value).splitlines()[1]
