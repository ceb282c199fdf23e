"""Jumps out of nested loops (Note [Tracing control flow]): a `return` inside an inner
loop leaves every enclosing loop, and each loop's `break` has its own flag. Values,
gradients (reverse mode) and tangents (forward mode) against NumPy and central
differences, on data taking each way out."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


def return_in_inner_for(x):
    for i in range(3):
        for j in range(3):
            if x[j] > 0.5 * i:
                return np.sum((x * x[j]) ** 2)
    return np.sum(x * 2.0)


def return_in_inner_while(x):
    s = x[0] * 0.0
    for i in range(3):
        j = 0
        while j < 3:
            s = s + x[j] * x[i]
            if s > 1.0:
                return s * x[0]
            j = j + 1
    return s


def return_three_deep(x):
    for i in range(2):
        for j in range(2):
            for k in range(2):
                if x[i] * x[j] > x[k] + 0.5:
                    return x[i] * x[j] * x[k]
    return np.sum(x)


def break_in_while_before_inner_for(x):
    s = 0.0
    i = 0
    while i < 3:
        if i >= 1:
            break
        for j in range(2):
            s = s + x[j] * 0.5
        i = i + 1
    return s


def break_in_both_loops(x):
    s = x[0] * 0.0
    for i in range(3):
        if s > 2.0:
            break
        for j in range(3):
            if x[j] < 0.0:
                break
            s = s + x[i] * x[j]
    return s


def break_in_inner_while_of_while(x):
    s = x[0] * 0.0
    i = 0
    while True:
        j = 0
        while True:
            s = s + x[i] * x[j]
            j = j + 1
            if j >= 2:
                break
        i = i + 1
        if i >= 2 or s > 3.0:
            break
    return s


CASES = [
    ("return-inner-for-early", return_in_inner_for, np.array([0.2, 0.9, 0.1])),
    ("return-inner-for-late", return_in_inner_for, np.array([0.2, 0.3, 0.1])),
    ("return-inner-for-never", return_in_inner_for, np.array([-0.2, -0.3, -0.1])),
    ("return-inner-while", return_in_inner_while, np.array([0.6, 0.5, 0.4])),
    ("return-inner-while-never", return_in_inner_while, np.array([0.1, 0.1, 0.1])),
    ("return-three-deep", return_three_deep, np.array([0.9, 1.2])),
    ("return-three-deep-never", return_three_deep, np.array([0.3, 0.2])),
    ("break-while-then-for", break_in_while_before_inner_for, np.array([1.0, 1.0])),
    ("break-both-outer", break_in_both_loops, np.array([1.0, 1.5, 0.8])),
    ("break-both-inner", break_in_both_loops, np.array([0.5, -1.0, 0.8])),
    ("break-while-while", break_in_inner_while_of_while, np.array([0.7, 1.1])),
    ("break-while-while-early", break_in_inner_while_of_while, np.array([1.7, 1.1])),
]


@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_reverse_mode(name, fn, x):
    value, grad = sg.value_and_grad(fn)(x)
    assert_close(value, fn(x))
    assert_close(grad, numeric_grad(fn, [x], 0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_forward_mode(name, fn, x):
    tangent = np.linspace(0.5, 1.5, x.size)
    out, t_out = sg.jvp(fn, (x,), (tangent,))
    assert_close(out, fn(x))
    assert_close(t_out, np.sum(numeric_grad(fn, [x], 0) * tangent), rtol=1e-5, atol=1e-7)


def reshape_in_loop(x):
    for _ in range(2):
        x = x.reshape((1, 1)) * x
    return np.sum(x)


def while_inside_for(x):
    s = x * 0.0
    for _ in range(3):
        t = x
        j = 0
        while j < 2:
            t = np.sin(t) * x
            j = j + 1
        s = s + t
    return s


REUSED = [
    ("for", reshape_in_loop, np.array([0.3])),
    ("while-in-for", while_inside_for, np.array([0.3, 0.5])),
    ("return-in-inner-loop", return_in_inner_for, np.array([0.2, 0.9, 0.1])),
]


@pytest.mark.parametrize("name,fn,x", REUSED, ids=[c[0] for c in REUSED])
def test_vjp_fn_runs_again_on_loops(name, fn, x):
    # the backward pops copies of the saved tapes: a vjp_fn is reusable
    out, vjp_fn = sg.vjp(fn, x)
    ct = np.linspace(1.0, 2.0, np.size(out)).reshape(np.shape(out))
    jac = np.stack([numeric_grad(lambda y, i=i: np.ravel(fn(y))[i], [x], 0)
                    for i in range(np.size(out))]).reshape(np.shape(out) + x.shape)
    expected = np.tensordot(ct, jac, axes=np.ndim(out))
    (first,) = vjp_fn(ct)
    (second,) = vjp_fn(2.0 * ct)
    assert_close(first, expected, rtol=1e-5, atol=1e-7)
    assert_close(second, 2.0 * expected, rtol=1e-5, atol=1e-7)
    for mode in ("reverse", "forward", "auto"):
        assert_close(np.reshape(sg.jacobian(fn, mode=mode)(x), jac.shape), jac, rtol=1e-5, atol=1e-7)


def optional_scale(x, scale=None):
    if scale is None:
        return np.sum(x * x)
    return np.sum(x * scale)


def default_to_x(x, y=None):
    if y is None:
        y = x
    return np.sum(x * y * 2.0)


def none_until_first_iteration(x):
    y = None
    for _ in range(3):
        if y is None:
            y = x * 1.0
        else:
            y = y * x
    return np.sum(y)


X = np.array([1.0, 2.0])
NONE_CASES = [
    ("default-none", optional_scale, [X]),
    ("explicit-none", optional_scale, [X, None]),
    ("given", optional_scale, [X, np.array([3.0, 4.0])]),
    ("y-defaults-to-x", default_to_x, [X]),
    ("y-given", default_to_x, [X, np.array([3.0, 4.0])]),
    ("none-in-loop", none_until_first_iteration, [X]),
]


@pytest.mark.parametrize("name,fn,args", NONE_CASES, ids=[c[0] for c in NONE_CASES])
def test_is_none_on_a_parameter_is_decided_at_run_time(name, fn, args):
    # `param is None` is a test of the call's argument, not folded at compile time;
    # the same transform serves calls with and without the argument
    expected = numeric_grad(lambda x: fn(x, *args[1:]), [args[0]], 0)
    assert_close(sg.grad(fn)(*args), expected)
    out, vjp_fn = sg.vjp(fn, *args)
    assert_close(out, fn(*args))
    assert_close(vjp_fn(1.0)[0], expected)
    if all(a is not None for a in args) and len(args) == fn.__code__.co_argcount:
        tangents = (np.ones_like(X),) + tuple(np.zeros_like(a) for a in args[1:])
        assert_close(sg.jvp(fn, tuple(args), tangents)[1], np.sum(expected))


def _mean_of(a):
    return np.mean(a)


def shape_read_in_while(x):
    # the adjoint reads only shapes of `np.sum(x)` (taped as shapes): nothing of the body
    # may be read outside the loop, which may not run at all
    k = 0
    while k < 1 and x.ravel().max() > 0.51:
        x = x + np.maximum(np.add(np.sum(x), 0.5), _mean_of(np.sum(x)))
        k = k + 1
    return np.sum(x * x)


@pytest.mark.parametrize("x", [np.array([[-0.15, -0.79]]), np.array([[0.7, 0.2]])],
                         ids=["not-entered", "entered"])
def test_taped_shape_not_read_outside_the_loop(x):
    expected = numeric_grad(shape_read_in_while, [x], 0)
    _, vjp_fn = sg.vjp(shape_read_in_while, x)
    assert_close(vjp_fn(1.0)[0], expected, rtol=1e-5, atol=1e-7)
    assert_close(sg.grad(shape_read_in_while)(x), expected, rtol=1e-5, atol=1e-7)


# A loop's break flag is a name of the traced code: a program (or srcgrad's own generated
# code, traced again by an outer transform) that binds `_break1` itself must not share
# it with the flag (fuzz seed 2684023: vmap's mask `_break1` and the gradient's flag were
# one variable; the loop below left after one iteration, a gradient of x**2 for x**5).
def binds_the_flags_name(x):
    _break_ = 0.0  # a name the depth count sees: the loop's flag would be `_break1`
    y = x
    for i in range(4):
        _break1 = True  # the user's own variable
        y = y * x
        if i == 5:
            break
    return np.sum(y) + _break_


def binds_the_flags_name_in_nested_loops(x):
    _break = x[0]
    y = x
    for _i in range(3):
        for _j in range(2):
            _break2 = y[0] > 100.0
            y = y * x
            if _break2:
                break
        _break1 = np.sum(y) > 100.0
        if _break1:
            break
    return np.sum(y) * _break


@pytest.mark.parametrize("fn", [binds_the_flags_name, binds_the_flags_name_in_nested_loops])
def test_a_name_the_program_binds_is_never_a_loops_break_flag(fn):
    x = np.array([1.1, 0.9])
    assert_close(sg.grad(fn)(x), numeric_grad(fn, (x,), 0), rtol=1e-6, atol=1e-8)
    _, tangent = sg.jvp(fn, (x,), (np.ones(2),))
    assert_close(tangent, np.sum(numeric_grad(fn, (x,), 0)), rtol=1e-6, atol=1e-8)


def binds_the_items_name(x):
    y = x
    for w in (1.0, 2.0, 3.0):  # unrolled: each element is bound through a hidden name
        y = y * w * x
        _item0 = 7.0  # the user's own variable, of the hidden name's spelling
    return np.sum(y) + _item0


def test_a_name_the_program_binds_is_never_an_unrolled_loops_element():
    x = np.array([1.1, 0.9])
    assert_close(sg.grad(binds_the_items_name)(x), numeric_grad(binds_the_items_name, (x,), 0),
                 rtol=1e-6, atol=1e-8)


def binds_the_sequences_name(x):
    _sequence1 = x[0] * 0.0  # the user's own variable, of the hidden names' spelling
    for row in x:  # the rows are read through a hidden name of the iterated array
        _sequence1 = _sequence1 + np.sum(row * row)
    return np.sum(_sequence1)


def test_a_name_the_program_binds_is_never_the_hidden_name_of_iterated_rows():
    x = np.array([[1.1, 0.9], [0.3, 0.2]])
    assert_close(sg.grad(binds_the_sequences_name)(x),
                 numeric_grad(binds_the_sequences_name, (x,), 0), rtol=1e-6, atol=1e-8)
