"""Reductions called with NumPy's positional arguments (srcgrad.ir.bind_targets).

`np.mean(x, 1, None, None, False)` passes NumPy's axis, dtype, out and keepdims by
position; the rows are `mean(x, axis=None, keepdims=False)`, so the call was refused
("too many positional arguments", 67 of 3,581 fuzz programs of seed 2620000), and a
third positional argument (NumPy's dtype) was bound to keepdims. Each program is
judged by arithmetic: gradient, Hessian and JVP against central differences.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_first_and_second_order, numeric_grad


def mean_all_positional(x):
    return np.sum(np.mean(x, 1, None, None, False) ** 3)


def max_positional(x):
    return np.max(x * x, None, None, False)


def max_method_keepdims(x):
    return np.sum(x.max(1, None, True) * x)


def sum_keepdims(x):
    return np.sum(np.sum(x, 0, None, None, True) ** 2 * x)


def mean_method(x):
    return np.sum(x.mean(0, None, None, True) * x)


def std_ddof(x):
    return np.sum(np.std(x, 0, None, None, 1) ** 3)


def var_method(x):
    return np.sum(x.var(1, None, None, 1, True) * x)


def min_positional(x):
    return np.sum(np.min(x, 1, None, False) ** 3)


def prod_positional(x):
    return np.sum(np.prod(x, -1, None, None, True) * x)


def amax_positional(x):
    return np.sum(np.amax(x, 0, None, True) ** 2)


PROGRAMS = [mean_all_positional, max_positional, max_method_keepdims, sum_keepdims, mean_method,
            std_ddof, var_method, min_positional, prod_positional, amax_positional]
_X = np.array([[0.3, -0.7, 1.1, 0.4], [0.9, -0.2, 0.5, -1.3], [0.6, 1.4, -0.8, 0.25]])


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_positional_reduction_arguments_are_bound_as_numpy_binds_them(f):
    assert_first_and_second_order(f, _X)


def mean_with_a_dtype(x):
    return np.sum(np.mean(x, 1, np.float32))


def mean_with_keepdims(x):
    return np.sum(np.mean(x, 1, None, None, True) * x)


def test_a_third_positional_argument_is_numpys_dtype_not_keepdims():
    """`np.mean(x, 1, np.float32)`: NumPy's third parameter is dtype. It was bound to the
    row's keepdims (a TypeError inside generated code); now it is a dtype, which the row
    does not take: refused at the line, naming the parameter."""
    with pytest.raises(sg.CompileError, match="unexpected keyword argument 'dtype'") as err:
        sg.grad(mean_with_a_dtype)(_X)
    assert "np.mean(x, 1, np.float32)" in str(err.value)
    # keepdims given by NumPy's position (the fifth) keeps the reduced axis
    want = numeric_grad(mean_with_keepdims, [_X], 0)
    np.testing.assert_allclose(sg.grad(mean_with_keepdims)(_X), want, rtol=1e-6, atol=1e-8)


def nan_to_num_with_copy(x):
    return np.sum(np.nan_to_num(x, True, 0.0))


def test_a_positional_argument_the_row_lacks_is_refused_not_misbound():
    """NumPy's second positional of nan_to_num is copy (the row's is nan): bound to the
    row's parameters, `np.nan_to_num(x, True, 0.0)` read nan=True, posinf=0.0; now it is
    NumPy's copy, which the row does not take."""
    with pytest.raises(sg.CompileError, match="unexpected keyword argument 'copy'"):
        sg.grad(nan_to_num_with_copy)(np.array([0.3, -0.7, 1.1]))
