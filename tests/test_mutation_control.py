"""In-place writes inside if/for/while (needs the tracer's control-flow hooks):
branches carry writes out; loops refuse what they would not carry (never a wrong
gradient)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.corpus import surface as S

rng = np.random.default_rng(7)


def _r(*shape):
    return rng.standard_normal(shape)


@pytest.mark.parametrize("x", [np.array([0.5, -1.0, 2.0, 0.3]), np.array([-3.0, -1.0, 2.0, 0.3])])
def test_subscript_writes_in_a_branch(x):
    g = sg.grad(S.write_in_branch)(x)
    assert_close(g, numeric_grad(S.write_in_branch, [x], 0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["write_in_loop", "append_in_loop"])
def test_writes_and_appends_in_loops(name):
    # A loop carries every name its body rebinds, also through `y[i] = v`; a static
    # range whose body changes a list is traced once per iteration.
    fn = getattr(S, name)
    x = _r(3)
    assert_close(sg.grad(fn)(x), numeric_grad(fn, [x], 0), rtol=1e-5, atol=1e-7)


def test_a_list_grown_by_a_loop_of_run_time_length_is_refused():
    from tests.corpus import control as C

    with pytest.raises(sg.CompileError, match="the length or keys of `rows` would depend on array values"):
        sg.grad(C.append_in_dynamic_loop)(_r(3))


def _dict_array_written_in_nested_loops(d):
    w = d["w"]
    for _ in range(2):
        for _ in range(2):
            w *= w  # writes into the array the dict holds, from the inner loop
    return np.sum(d["w"])


def _dict_array_written_in_nested_loops_read_by_name(d):
    w = d["w"].copy()
    for _ in range(2):
        for _ in range(2):
            w *= w
    return np.sum(w)


def test_a_write_in_a_nested_loop_into_a_container_held_array_is_undecided():
    """A loop carries arrays, not containers: what a dict holds after a loop that wrote
    into it is Undecided. An inner loop's param starts as the outer loop's, so the write
    counts for the outer loop too (fuzz seed 82246: the read `d["w"]` after the loops saw
    the array before the writes, a wrong value and gradient). The hint's rewrite compiles."""
    d = {"w": np.array([[0.9, -1.2, -0.2]])}
    with pytest.raises(sg.CompileError, match=r"written through `w` inside a loop") as info:
        sg.value_and_grad(_dict_array_written_in_nested_loops)(d)
    assert "copy it out of the container before the loop" in str(info.value)
    f = _dict_array_written_in_nested_loops_read_by_name
    value, grad = sg.value_and_grad(f)(d)
    assert_close(value, f({"w": d["w"].copy()}))
    assert_close(grad["w"], numeric_grad(lambda w: f({"w": w}), [d["w"]], 0))


def _loop_rebinds_to_a_dict_item(x):
    d = {"a": x, "b": np.maximum(x, 0.0)}
    v = 2.0
    for _ in range(3 if np.sum(x) < 1e3 else 4):  # a trip count on data: not unrolled
        v *= v  # from the second iteration on, writes into the array d["b"] holds
        v = d["b"]
    return np.sum(v)


def _loop_rebinds_to_a_copy_of_a_dict_item(x):
    d = {"a": x, "b": np.maximum(x, 0.0)}
    v = 2.0
    for _ in range(3):
        v *= v
        v = d["b"].copy()
    return np.sum(v)


def test_a_loop_leaving_a_name_bound_to_a_container_item_is_refused():
    """An iteration that ends with `v` bound to the array a dict holds makes the next
    iteration's `v *= v` write into it: refused like a plain alias (fuzz seed 200979: the
    write was missed, a wrong value and gradient). The hint's copy compiles."""
    x = np.array([-1.2, 0.7, 1.3])
    with pytest.raises(sg.CompileError, match=r"bound to the array of `d\[\.\.\.\]`"):
        sg.value_and_grad(_loop_rebinds_to_a_dict_item)(x)
    f = _loop_rebinds_to_a_copy_of_a_dict_item
    value, grad = sg.value_and_grad(f)(x)
    assert_close(value, f(x.copy()))
    assert_close(grad, numeric_grad(f, [x], 0))


def _loop_over_a_temporary_tuple_holding_a_written_array(x):
    y = x.copy()  # an ndarray for certain: `y *= r` writes into it
    for r in (y, y):  # the second iteration's r is y as the first one left it
        y *= r
    return np.sum(y)


def test_an_unrolled_loop_reads_each_element_as_it_is_when_its_iteration_starts():
    """A write in one iteration reaches the arrays a temporary sequence holds (fuzz seed
    501217: `for r in (x, x.reshape(24)): x *= ...` read the first x in the
    second iteration, a wrong value and gradient)."""
    x = np.array([0.5, -1.2, 0.8])
    f = _loop_over_a_temporary_tuple_holding_a_written_array
    value, grad = sg.value_and_grad(f)(x)
    assert_close(value, np.sum(x ** 4))
    assert_close(grad, numeric_grad(f, [x], 0))


def _views_left_by_an_iteration(x, c):
    x = x * 1.0
    y = x * 3.0
    s = 0.0
    for _ in range(3 if np.sum(c) < 1e3 else 4):  # a trip count on data: not unrolled
        x[[1, 0]] *= c  # from the second iteration on, this reaches y (NumPy)
        s = s + np.sum(y * y)
        if x[0] > -5.0:
            y = x[1:]
    return s


def _view_rebound_before_it_is_read(x, c):
    x = x * 1.0
    s = 0.0
    for _ in range(3):
        x[[1, 0]] *= c
        y = x[1:]  # bound afresh each iteration before any read: the write cannot reach it
        s = s + np.sum(y * y)
    return s


def test_a_write_in_a_loop_reaching_a_view_an_earlier_iteration_left_is_refused():
    # Fuzz seed 700838: `x0[...] *= s; if c: x1 = x0.reshape(4)` in a loop read x1 as the
    # previous iteration left it, not as the next iteration's write changed it.
    x, c = _r(4), np.array([1.5])
    with pytest.raises(sg.CompileError, match="may have left shared with `y`"):
        sg.grad(_views_left_by_an_iteration)(x, c)


def test_a_view_bound_afresh_every_iteration_compiles():
    x, c = _r(4), np.array([1.5])
    for fn in (sg.grad, lambda f: (lambda *a: sg.value_and_grad(f)(*a)[1])):
        assert_close(fn(_view_rebound_before_it_is_read)(x.copy(), c),
                     numeric_grad(_view_rebound_before_it_is_read, [x, c], 0), rtol=1e-5, atol=1e-7)


def _bump(a):
    a[1:2] = np.sum(a)  # writes into its argument: must run once per evaluation
    return a * 2.0


def _write_in_the_iterable_of_a_tuple_loop(x):
    x = x * 1.0
    s = 0.0
    for r in (_bump(x), x):
        s = s + np.sum(r * r)
    return s + np.sum(x)


def _write_in_the_iterable_of_enumerate(x):
    x = x * 1.0
    s = 0.0
    for i, r in enumerate((_bump(x), x)):
        s = s + (i + 1.0) * np.sum(r * r)
    return s + np.sum(x)


def _write_in_the_iterable_of_zip(x):
    x = x * 1.0
    s = 0.0
    for r, q in zip((_bump(x), x), (x, _bump(x))):
        s = s + np.sum(r * q)
    return s + np.sum(x)


@pytest.mark.parametrize("fn", [_write_in_the_iterable_of_a_tuple_loop,
                                _write_in_the_iterable_of_enumerate,
                                _write_in_the_iterable_of_zip])
def test_a_loops_iterable_is_evaluated_once(fn):
    # Fuzz seed 703573: `for r in (helper(x0, b=x0),)` traced the call twice (once to
    # choose how to loop, once for the elements), so its write into x0 happened twice.
    x = np.array([0.3, -0.2, 0.5])
    assert_close(sg.value_and_grad(fn)(x.copy())[0], fn(x.copy()))
    assert_close(sg.grad(fn)(x.copy()), numeric_grad(fn, [x], 0), rtol=1e-5, atol=1e-7)
    out, t = sg.jvp(fn, (x.copy(),), (np.ones(3),))
    assert_close(out, fn(x.copy()))
    assert_close(t, np.sum(numeric_grad(fn, [x], 0)), rtol=1e-5, atol=1e-7)
