"""A loop's names after it, as Python binds them (Note [Names a loop binds] in
srcgrad.frontend.loops): the body's names and the loop's target hold the last
iteration's values. Before, a name first bound in the body was "not defined" after the
loop, and a target bound before the loop kept its old value: a silently wrong gradient
(`for i in range(2): ...` then `x[i, 0]` read row 0, not row 1)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


def body_name_after_a_range_loop(x):
    s = 0.0
    for i in range(3):
        t = x[i] * x[i]
        s = s + np.sum(t)
    return s * np.sum(t)


def body_name_after_a_loop_over_rows(x):
    s = 0.0
    for row in x:
        t = np.sin(row) * 2.0
        s = s + np.sum(t)
    return s + np.sum(t * t)


def range_target_bound_before(x):
    i = 0
    s = 0.0
    for i in range(2):
        s = s + np.sum(x[i])
    return s * x[i, 0]  # row 1: the target holds the last index


def rows_target_bound_before(x):
    row = x[0] * 0.0
    for row in x:  # noqa: B007 - its target is what is read after it
        pass
    return np.sum(row * row)  # the last row


def rows_target_first_bound_by_the_loop(x):
    s = 0.0
    for row in x:
        s = s + np.sum(row)
    return s * np.sum(row)


def body_name_after_a_while_loop(x):
    k = 0
    while k < 3:
        t = np.tanh(x[k]) * k
        k = k + 1
    return np.sum(t * x[0])


def inner_name_in_the_outer_loops_next_iteration(x):
    s = 0.0
    for j in range(2):
        if j > 0:
            s = s + np.sum(u * x[j])  # noqa: F821 - the inner loop's, of iteration j - 1
        for i in range(3):
            u = x[i] * (j + 1.0)
    return s + np.sum(u)


def name_bound_on_one_branch_of_the_body(x):
    s = 0.0
    for i in range(3):
        if i == 1:
            t = x[i] * 3.0
        s = s + np.sum(x[i])
    return s * np.sum(t)


def target_of_an_unrolled_loop(x):
    y = x[0]
    for w in (1.0, 2.0, 3.0):
        y = y * w
    return np.sum(y * w)


def reassigned_target_read_after(x):
    s = 0.0
    for i in range(3):
        i = i * 2 - 2  # the body rebinds the target: its last value is 2
        s = s + np.sum(x[i // 2])
    return s * np.sum(x[i])


CASES = [body_name_after_a_range_loop, body_name_after_a_loop_over_rows, range_target_bound_before,
         rows_target_bound_before, rows_target_first_bound_by_the_loop, body_name_after_a_while_loop,
         inner_name_in_the_outer_loops_next_iteration, name_bound_on_one_branch_of_the_body,
         target_of_an_unrolled_loop, reassigned_target_read_after]
X = np.array([[0.3, -0.7], [1.1, 0.4], [-0.5, 0.9]])


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_a_loops_names_hold_their_last_values_after_it(fn):
    value, grad = sg.value_and_grad(fn)(X.copy())
    assert_close(value, fn(X.copy()), rtol=1e-12)
    assert_close(grad, numeric_grad(fn, (X.copy(),), 0), rtol=1e-6, atol=1e-8)
    direction = np.array([[1.0, -0.5], [0.25, 2.0], [-1.5, 0.75]])
    _, tangent = sg.jvp(fn, (X.copy(),), (direction,))
    assert_close(tangent, np.sum(numeric_grad(fn, (X.copy(),), 0) * direction), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("fn", [range_target_bound_before, body_name_after_a_loop_over_rows,
                                inner_name_in_the_outer_loops_next_iteration], ids=lambda f: f.__name__)
def test_second_order_through_a_loops_names_after_it(fn):
    def flat(v):
        return fn(v.reshape(3, 2))
    v = X.ravel().copy()
    expected = np.stack([numeric_grad(lambda w, e=e: np.sum(sg.grad(flat)(w) * e), (v,), 0)
                         for e in np.eye(6)])
    assert_close(sg.hessian(flat)(v), expected, rtol=1e-5, atol=1e-7)


def test_a_name_no_path_of_the_body_binds_is_still_not_defined_after_it():
    def never_bound(x):
        for _ in range(2):
            if False:
                t = x * 2.0
        return np.sum(t)
    with pytest.raises(sg.CompileError, match="name `t` is not defined"):
        sg.grad(never_bound)(X.copy())
