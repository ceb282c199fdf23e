"""`np.r_` / `np.c_` with a leading directive string (srcgrad.frontend.numpy_forms).

NumPy's AxisConcatenator reads `'axis'`, `'axis,ndmin'` or `'axis,ndmin,trans1d'`:
the items are promoted to ndmin dimensions (new axes in front, or a vector made a
column where trans1d is 0) and joined along axis. These were refused ("a directive
string", 31 of 3,581 fuzz programs of seed 2620000); ndmin up to 2 is now a
concatenation of atleast_1d / atleast_2d / column_stack items. Judged by arithmetic:
value against NumPy's, gradient, Hessian and JVP against central differences.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_first_and_second_order


def rows_as_matrix(x):
    return np.sum(np.r_['0,2', x[0], x[1] ** 2] ** 3 * np.arange(4.0))


def last_axis(x):
    return np.sum(np.r_['-1', x[:, :1], x[:, 1:] ** 2] ** 3)


def columns_by_trans1d(x):
    return np.sum(np.r_['1,2,0', x[0], x[1] ** 2] ** 3 * np.arange(2.0))


def axis_only(x):
    return np.sum(np.r_['0', x, x ** 2] ** 3)


def c_along_rows(x):
    return np.sum(np.c_['0', x[0:1], x] ** 3)


def with_a_range(x):
    return np.sum(np.r_['0,2', x[0] ** 3, 0:4] * x[1:])


PROGRAMS = [rows_as_matrix, last_axis, columns_by_trans1d, axis_only, c_along_rows, with_a_range]
_X = np.array([[0.3, -0.7, 1.1, 0.4], [0.9, -0.2, 0.5, -1.3], [0.6, 1.4, -0.8, 0.25]])


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_directive_strings_match_numpy_and_finite_differences(f):
    assert_first_and_second_order(f, _X)


def as_a_matrix(x):
    return np.sum(np.r_['r', x[0], x[1]])


def three_dimensional(x):
    return np.sum(np.r_['0,3', x, x])


@pytest.mark.parametrize("f, why", [(as_a_matrix, "np.matrix"), (three_dimensional, "3 dimensions")])
def test_other_directives_are_refused_at_the_line(f, why):
    with pytest.raises(sg.CompileError, match=why) as err:
        sg.grad(f)(_X)
    assert "np.r_[" in str(err.value).splitlines()[1]
