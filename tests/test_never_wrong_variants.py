"""A variant depends only on what its guard checks (DESIGN decision 11, Note [Shape
specialisation]): the shape probe runs the first call's data, but what it records must
hold for every call with the same shapes, dtypes and classes. Each program here is
called first with data taking one path and then, through the same variant, with data
taking another; every gradient is checked against central differences."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


def branch_in_loop(a, c):
    # the else-branch exports nothing the backward reads: its tape entry is None
    for _ in range(2):
        a = c * (a + c) if c[0] > 0.0 else a * 0.5
    return np.sum(a)


def float_or_array(x, c):
    # one arm binds a Python float, the other an array: `y` is neither for sure
    if c[0] > 0.0:
        y = 2.0
    else:
        y = x * 2.0
    return np.sum(y) + np.sum(x)


def iterations_mix_branches(a, c):
    for i in range(3):
        if c[i] > 0.0:
            a = a * c
        else:
            a = a + c
    return np.sum(a * a)


def broadcast_in_one_branch(a, c):
    # the carried value keeps its shape (1,) in one branch only
    for i in range(2):
        if c[i] > 0.0:
            a = a + c
        else:
            a = a * 2.0
    return np.sum(a * a)


def shape_of_branch_value(x, c):
    if c[0] > 0.0:
        y = x[:2]
    else:
        y = x[1:]
    return np.sum(y * y) + y.shape[0] * np.sum(x)


def while_trip_count_from_data(x, c):
    s = x * 0.0
    i = 0
    while i < c.shape[0] and c[i] > 0.0:
        s = s + x * c[i]
        i = i + 1
    return np.sum(s * s) + np.sum(x)


CASES = [
    ("branch-in-loop", branch_in_loop, [np.array([1.0, 2.0]), np.array([-1.0, 1.0])],
     [np.array([1.0, 2.0]), np.array([1.0, 3.0])]),
    ("float-or-array", float_or_array, [np.array([1.0, 2.0]), np.array([-1.0, 1.0])],
     [np.array([1.0, 2.0]), np.array([1.0, 1.0])]),
    ("iterations-mix-branches", iterations_mix_branches,
     [np.array([0.3, 0.7, 1.1]), np.array([1.0, -2.0, 0.5])],
     [np.array([0.3, 0.7, 1.1]), np.array([-1.0, 2.0, -0.5])]),
    ("broadcast-in-one-branch", broadcast_in_one_branch,
     [np.array([0.3]), np.array([-1.0, -2.0])], [np.array([0.3]), np.array([1.0, -2.0])]),
    ("shape-of-branch-value", shape_of_branch_value,
     [np.array([0.3, 0.7, 1.1]), np.array([1.0])], [np.array([0.3, 0.7, 1.1]), np.array([-1.0])]),
    ("while-trip-count", while_trip_count_from_data,
     [np.array([0.3, 0.7]), np.array([-1.0, 1.0, 1.0])], [np.array([0.3, 0.7]), np.array([1.0, 2.0, -1.0])]),
]


@pytest.mark.parametrize("name,fn,first,second", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("order", ["as-listed", "reversed"])
def test_variant_serves_every_path(name, fn, first, second, order):
    calls = [first, second] if order == "as-listed" else [second, first]
    grad = sg.grad(fn, wrt=(0, 1))
    value_and_grad = sg.value_and_grad(fn, wrt=(0, 1))
    for args in calls:
        expected = [numeric_grad(fn, args, i) for i in range(2)]
        for g, e in zip(grad(*args), expected):
            assert_close(g, e, rtol=1e-5, atol=1e-7)
        value, grads = value_and_grad(*args)
        assert_close(value, fn(*args))
        for g, e in zip(grads, expected):
            assert_close(g, e, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name,fn,first,second", CASES, ids=[c[0] for c in CASES])
def test_forward_mode_on_every_path(name, fn, first, second):
    for args in (first, second):
        tangent = np.linspace(0.5, 1.5, args[0].size).reshape(args[0].shape)
        out, t_out = sg.jvp(fn, tuple(args), (tangent, np.zeros_like(args[1])))
        assert_close(out, fn(*args))
        assert_close(t_out, np.sum(numeric_grad(fn, args, 0) * tangent), rtol=1e-5, atol=1e-7)
