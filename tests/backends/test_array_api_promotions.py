"""atleast_1d/2d/3d and hstack/vstack/dstack/column_stack on array_api_strict.

The Array API has none of them; they were refused ("it has no `xp.atleast_1d`", 21 of
3,581 fuzz programs of seed 2620000) and are now spelled as NumPy defines them: a
reshape adding axes (in front; a vector's atleast_3d is (1, n, 1)), and a concatenation
of the promoted elements (srcgrad.codegen.spellings). Judged by arithmetic, first and
second order, forward and reverse (tests/backends/test_array_api_gathers.py's check).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.backends.test_array_api_gathers import check_first_and_second_order

pytest.importorskip("array_api_strict")


def atleast_1d_of_a_sum(x):
    return np.sum(np.atleast_1d(np.sum(x ** 2)) * np.array([2.0]))


def atleast_2d_of_a_row(x):
    return np.sum(np.atleast_2d(x[0]) @ np.atleast_2d(x[1]).T ** 2)


def atleast_3d_of_a_row_and_a_matrix(x):
    a, b = np.atleast_3d(x[0]), np.atleast_3d(x)
    return np.sum(a * b[:1, :, :] ** 2) + np.sum(np.atleast_3d(np.sum(x)) ** 3)


def hstack_of_rows(x):
    return np.sum(np.hstack([x[0], x[1] ** 2, np.sum(x)]) * np.arange(7.0))


def hstack_of_matrices(x):
    return np.sum(np.hstack([x, x[:, :1] ** 2]) ** 3)


def vstack_of_a_row_and_a_matrix(x):
    return np.sum(np.vstack([x[0] ** 2, x]) ** 2 * np.arange(3.0))


def dstack_of_matrices(x):
    return np.sum(np.dstack([x, np.sin(x)]) ** 3)


def column_stack_of_rows(x):
    return np.sum(np.column_stack([x[0], x[1:].T ** 2]) * np.arange(3.0))


PROGRAMS = [atleast_1d_of_a_sum, atleast_2d_of_a_row, atleast_3d_of_a_row_and_a_matrix,
            hstack_of_rows, hstack_of_matrices, vstack_of_a_row_and_a_matrix,
            dstack_of_matrices, column_stack_of_rows]
_X = np.array([[0.3, -0.7, 1.1], [0.9, -0.2, 0.5], [0.6, 1.4, -0.8]])


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_promotion_and_stacking_on_array_api_strict(f):
    check_first_and_second_order(f, _X)
