"""atleast_1d/2d/3d, hstack/vstack/dstack/column_stack and split on array_api_strict.

The Array API has none of them; they were refused ("it has no `xp.atleast_1d`", 21 of
3,581 fuzz programs of seed 2620000) and are now spelled as NumPy defines them: a
reshape adding axes (in front; a vector's atleast_3d is (1, n, 1)), and a concatenation
of the promoted elements, slices of the axis where split cuts it
(srcgrad.codegen.spellings; `split` was refused too). Judged by arithmetic, first and
second order, forward and reverse (tests/backends/test_array_api_gathers.py's check).
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
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


def split_in_sections(x):
    a, b, c = np.split(x, 3, axis=1)
    return np.sum(a * b ** 2 + np.sin(c))


def split_at_indices(x):
    a, b, c, d = np.split(x, [1, -1, 9])  # the last piece empty (past the end)
    return np.sum(a ** 3) + np.sum(b * c[0]) + np.sum(d)


def array_split_unequally(x):
    # (np.array_split's composition adds `i < extras`, a Python bool, to a Python int: it
    # was cast with xp.astype as a boolean array would be, an AttributeError; seed 2620101)
    a, b = np.array_split(x, 2, axis=1)
    return np.sum(a ** 3) + np.sum(np.sin(b) * x)


PROGRAMS = [array_split_unequally, split_in_sections, split_at_indices, atleast_1d_of_a_sum,
            atleast_2d_of_a_row, atleast_3d_of_a_row_and_a_matrix,
            hstack_of_rows, hstack_of_matrices, vstack_of_a_row_and_a_matrix,
            dstack_of_matrices, column_stack_of_rows]
_X = np.array([[0.3, -0.7, 1.1], [0.9, -0.2, 0.5], [0.6, 1.4, -0.8]])


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_promotion_and_stacking_on_array_api_strict(f):
    check_first_and_second_order(f, _X)


def split_unequally(x):
    return np.sum(np.split(x, 2)[0])


def test_an_unequal_split_raises_numpys_error_on_array_api_strict():
    xs = pytest.importorskip("array_api_strict")
    with pytest.raises(ValueError, match="array split does not result in an equal division"):
        np.split(_X, 2)
    with pytest.raises(ValueError, match="array split does not result in an equal division"):
        sg.grad(split_unequally)(xs.asarray(_X))
