"""Loops whose lowering refuses an in-place write into storage other names share are
traced unrolled when their trip count is known while tracing (Note [Unrolling loops
the lowering refuses] in srcgrad.frontend.unrolling): each program against NumPy's
value and central differences, in reverse and forward mode, called twice on the same
shapes with different data (the variant is reused)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


def _numpy(fn):
    """`fn` on copies: NumPy's writes into an argument never reach the caller's array."""
    return lambda *a: fn(*[b.copy() for b in a])


def _check(fn, *args):
    value, grad = sg.value_and_grad(fn)(*[a.copy() for a in args])
    assert_close(value, _numpy(fn)(*args))
    expected = numeric_grad(_numpy(fn), list(args), 0)
    assert_close(grad, expected, rtol=1e-5, atol=1e-7)
    tangent = np.cos(np.arange(args[0].size) + 0.5).reshape(args[0].shape)
    tangents = (tangent,) + tuple(np.zeros_like(a) for a in args[1:])
    out, t_out = sg.jvp(fn, tuple(a.copy() for a in args), tangents)
    assert_close(out, value)
    assert_close(t_out, np.sum(expected * tangent), rtol=1e-5, atol=1e-7)


def alias_written_in_range(a):
    x = a * 1.0
    y = x
    for i in range(3):
        y[i] = y[i] * x[0] + 1.0  # reaches x: NumPy's y is x
    return np.sum(x * x)


def view_written_in_range(a):
    x = a * 1.0
    row = x[1:]
    for _ in range(2):
        row *= np.sin(x[0]) + 1.5
    return np.sum(x * a)


def argument_alias_written(x):
    y = x
    for i in range(2):
        y[i] += np.sum(x)  # writes into the argument (a copy of the caller's) and reaches x
    return np.sum(x * x)


def rows_written_through(x):
    m = np.stack([x, x * 2.0])
    for row in m:
        row[0] = row[0] * 3.0 + row[1]
    return np.sum(m * m)


def enumerated_rows_of_an_argument(x):
    for i, row in enumerate(x):
        row[i] *= np.sum(x)  # each iteration reads x as the earlier ones left it
    return np.sum(x * x)


def iterated_array_written(x):
    y = x * 1.0
    for r in y:  # a row is read when its iteration starts: it sees the earlier writes
        y[-1] += r * 0.5
    return np.sum(y * y)


def zip_of_rows(x):
    y = x * 1.0
    for r, s in zip(y, x * 2.0):
        r[0] += s[0] * r[1]
    return np.sum(y)


def counter_while_true(a):
    x = a * 1.0
    v = x[:2]
    k = 0
    while True:
        k += 1
        if k > 2:
            break
        v *= np.cos(x[2]) + 2.0
    return np.sum(x * x)


def break_on_data(a, c):
    x = a * 1.0
    y = x
    for i in range(3):
        y[i] = y[i] * 2.0
        if np.sum(x * c) > 1.0:
            break
    return np.sum(x * x)


def return_inside(a):
    x = a * 1.0
    y = x[1:]
    for i in range(2):
        y[i] *= 3.0
        if x[1] > 1e6:
            return np.sum(y)
    return np.sum(x * x)


def nested_rows_in_range(x):
    y = x * 1.0
    for _ in range(2):
        for r in y:
            r[0] = r[0] * 0.5 + r[1]
    return np.sum(y * y)


A = np.array([0.5, -1.2, 2.0, 0.3])
M = np.array([[0.5, -0.2, 0.7], [0.3, 0.9, -1.1], [1.3, -0.4, 0.2]])


@pytest.mark.parametrize("fn,shape", [
    (alias_written_in_range, 4), (view_written_in_range, 4), (argument_alias_written, 4),
    (rows_written_through, 3), (enumerated_rows_of_an_argument, (3, 3)),
    (iterated_array_written, (3, 3)), (zip_of_rows, (3, 3)), (counter_while_true, 4),
    (return_inside, 4), (nested_rows_in_range, (3, 3)),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_loop_writing_into_shared_storage_is_unrolled(fn, shape):
    first = A[:shape] if isinstance(shape, int) else M
    _check(fn, first.copy())
    _check(fn, np.cos(first * 3.0) - 0.2)  # the same variant, other data


@pytest.mark.parametrize("c", [np.array([0.1, 0.1, 0.1, 0.1]), np.array([1.0, 1.0, 0.0, 0.0]),
                               np.array([0.0, 0.0, 1.0, 0.0])])  # no break; a break at the first
# iteration for one data set and none for the other; the reverse
def test_a_break_on_data_in_an_unrolled_loop(c):
    for a in (A, np.array([2.0, 1.0, -0.5, 0.25])):
        _check(break_on_data, a.copy(), c)


def long_loop_writing_an_alias(a):
    x = a * 1.0
    y = x
    for _ in range(5000):
        y[0] = y[0] * 0.5
    return np.sum(x * x)


def data_while_writing_an_alias(a):
    x = a * 1.0
    y = x
    k = 0
    while k < 3 and np.sum(x) < 100.0:
        y[0] = y[0] * 2.0
        k += 1
    return np.sum(x * x)


def while_on_data_without_a_bound(a):
    x = a * 1.0
    y = x
    while np.sum(x) < 100.0:  # no counter: the unrolled `if`s would nest without end
        y[0] = y[0] * 2.0 + 1.0
    return np.sum(x * x)


@pytest.mark.parametrize("fn", [long_loop_writing_an_alias, while_on_data_without_a_bound])
def test_beyond_the_bound_the_refusal_stands(fn):
    with pytest.raises(sg.CompileError, match="shares memory with `x` from before the loop") as info:
        sg.grad(fn)(A.copy())
    assert info.value.filename.endswith("test_unrolled_loops.py")
    assert "copy it before the loop" in info.value.hint


# Programs the lowering refuses, each for its own reason, with a trip count known while
# tracing: the same programs with a trip count on data stay refused (their tests in
# test_never_wrong_mutation, test_mutation_control, test_containers_in_blocks).

def static_while_through_a_view(a):  # a view from before the loop (`while i < 2`)
    x = a * 1.0
    acc = x[:2]
    i = 0
    while i < 2:
        acc += a[2:]
        i = i + 1
    return np.sum(x * x)


def rebound_to_alias_then_written(a):  # the next iteration writes into v
    x = a * 1.0
    v = a * 2.0
    for _ in range(3):
        x[0] = x[0] + 1.0
        x = v
    return np.sum(v * v)


def alias_in_nested_loops_rebound(x0):  # fuzz seed 4718
    v1 = x0
    if x0.max() > 5.0:
        return np.sum(x0)
    for _ in range(2):
        for _ in range(3):
            x0[0:2] = x0[0:2] * 0.5 + 1.0
            x0 = v1
    return np.dot(v1[:1], x0[:1])


def loop_rebinds_to_a_dict_item(x):  # fuzz seed 200979
    d = {"a": x, "b": np.maximum(x, 0.0) + 0.5}
    v = d["a"] * 1.0
    for _ in range(3):
        v[0] = v[0] * v[1]  # from the second iteration on, writes into the array d["b"] holds
        v = d["b"]
    return np.sum(v)


def shared_items_in_a_list(x):
    y = x * 1.0
    L = [y, y * 2.0]
    for r in x:
        L = [L[0], L[1] * r]
        y[0] += r
    return np.sum(L[0]) + np.sum(L[1]) + np.sum(y)


@pytest.mark.parametrize("fn", [static_while_through_a_view, rebound_to_alias_then_written,
                                alias_in_nested_loops_rebound, loop_rebinds_to_a_dict_item,
                                shared_items_in_a_list],
                         ids=lambda f: f.__name__)
def test_each_refusal_of_the_lowering_is_unrolled(fn):
    for a in (A, np.array([-0.7, 0.4, 1.1, -0.9])):
        _check(fn, a.copy())


# Note [Unrolling a while on data] (srcgrad.frontend.unrolling): a `while` whose test reads
# data is unrolled as nested `if`s, each iteration inside the branch where the test held,
# until a counter makes the test false; a break on data guards the rest of the loop.

def break_on_data_in_while_true(a):
    x = a * 1.0
    y = x[1:]
    k = 0
    while True:
        k += 1
        if k > 3:
            break
        y *= np.cos(x[0]) + 1.5
        if np.sum(x) > 4.0:
            break
    return np.sum(x * x)


def rows_written_in_a_while_on_data(x):
    y = x * 1.0
    k = 0
    while k < 2 and np.sum(y) < 3.0:
        k += 1
        for r in y:
            r *= np.sin(r[0]) + 1.5
    return np.sum(y * y)


def continue_in_a_while_on_data(a):
    x = a * 1.0
    v = x[:2]
    k = 0
    while k < 3 and np.max(x) < 6.0:
        k += 1
        if x[3] > 0.5:
            continue
        v += x[2:] * 0.5
    return np.sum(x * x) + k


@pytest.mark.parametrize("fn,shape", [
    (data_while_writing_an_alias, 4), (break_on_data_in_while_true, 4),
    (rows_written_in_a_while_on_data, (3, 3)), (continue_in_a_while_on_data, 4),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_while_on_data_is_unrolled_as_nested_ifs(fn, shape):
    first = A[:shape] if isinstance(shape, int) else M
    for data in (first, np.cos(first * 3.0) - 0.2, first * 2.5, -first):  # (paths differ)
        _check(fn, data.copy())


# Note [Views merged across branches] (srcgrad.frontend.aliases): a view rebound by a write
# on one path is the same view of the merged array after the `if`.

def view_rebound_in_one_branch(a):
    x = a * 1.0
    r = x[1:]
    if np.sum(a) > 0.0:
        x[0] = x[0] * 2.0  # rebinds x and r on this path
    x[1] = x[1] * 3.0 + 1.0  # reaches r on both paths
    return np.sum(r * r) + np.sum(x)


def row_of_an_argument_across_a_branch(x):
    r = x[0]  # a row: a view of the argument (NumPy's answer, read at run time)
    if np.sum(x) > 0.0:
        x[1] *= 2.0
    x[0] += np.sum(x[2])
    return np.sum(r * r) + np.sum(x * x)


def written_on_later_loop_iterations(a):  # the unrolled `for` leaves `r` merged each time
    x = a * 1.0
    r = x[2:]
    for i in range(3):
        if x[i] > 0.0:
            x[i] = x[i] * 0.5
        r += 0.25
    return np.sum(r * x[:2]) + np.sum(x * x)


@pytest.mark.parametrize("fn,shape", [
    (view_rebound_in_one_branch, 4), (row_of_an_argument_across_a_branch, (3, 3)),
    (written_on_later_loop_iterations, 4),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_view_merged_across_branches_sees_later_writes(fn, shape):
    first = A[:shape] if isinstance(shape, int) else M
    for data in (first, -first):
        _check(fn, data.copy())


# sg.vjp of a function taking a list: a variant for the leaves' shapes, so the rows of an
# argument are known (fuzz seed 760103: the shape-generic code refused the loop).

def rows_beside_a_list_argument(x, L):
    for r in x:
        r[0] -= np.tanh(np.sum(L[0]) * r[1])
    return np.sum(x * x) + np.sum(L[1] * x[0])


@pytest.mark.parametrize("hooks", [False, True])  # under saved-tensor hooks: a variant too
def test_vjp_with_a_list_argument_unrolls_the_rows(hooks):
    from srcgrad.autograd.graph import saved_tensors_hooks

    def numpy_fn(x, a, b):
        return rows_beside_a_list_argument(x.copy(), [a, b])

    def boxed(fn, *args):
        if not hooks:
            return fn(*args)
        with saved_tensors_hooks(lambda v: [v], lambda box: box[0]):
            return fn(*args)

    for scale in (1.0, -2.0):
        x, a, b = M * scale, np.array([0.3, -0.1]) * scale, np.array([0.5, 1.5, -0.5]) * scale
        out, vjp_fn = boxed(sg.vjp, rows_beside_a_list_argument, x.copy(), [a.copy(), b.copy()])
        assert_close(out, numpy_fn(x, a, b))
        gx, (ga, gb) = boxed(vjp_fn, 2.0)
        for got, i in ((gx, 0), (ga, 1), (gb, 2)):
            assert_close(got, 2.0 * numeric_grad(numpy_fn, [x, a, b], i), rtol=1e-5, atol=1e-7)


def test_vjp_under_hooks_unrolls_the_rows_of_an_argument():
    from srcgrad.autograd.graph import saved_tensors_hooks

    def rows(x):
        for r in x:
            r[1] *= np.sin(r[0]) + 1.5
        return np.sum(x * x)

    for data in (M, np.cos(M * 3.0)):
        with saved_tensors_hooks(lambda v: [v], lambda box: box[0]):
            out, vjp_fn = sg.vjp(rows, data.copy())
            (grad,) = vjp_fn(1.0)
        assert_close(out, rows(data.copy()))
        assert_close(grad, numeric_grad(lambda y: rows(y.copy()), [data], 0), rtol=1e-5, atol=1e-7)
