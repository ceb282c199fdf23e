"""Ordinary NumPy idioms that compile (issue 11): stacking functions, `np.array` of
traced values, unpacking, calls on constants, `ufunc.at`, `x ** 0`. Each program's
reverse-mode gradient and forward-mode tangent are checked against central differences."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from tests.conftest import assert_close, numeric_grad

rng = np.random.default_rng(11)


def _check(fn, x):
    """grad and jvp of scalar `fn` at x against central differences."""
    expected = numeric_grad(fn, [x], 0)
    assert_close(sg.grad(fn)(x), expected, rtol=1e-5, atol=1e-7)
    direction = rng.standard_normal(np.shape(x))
    _, tangent = sg.jvp(fn, (x,), (direction,))
    assert_close(tangent, np.sum(expected * direction), rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- stacking
def hstack_mixed(x):
    y = np.hstack([x, x[:2] * 2.0, x[0], np.ones(1)])
    return np.sum(y ** 2 * np.arange(7.0))


def hstack_2d(x):
    return np.sum(np.sin(np.hstack((x, x[:, :1] ** 2))))


def vstack_mixed(x):
    return np.sum(np.vstack([x, 2 * x, x[0] * np.ones(3)]) ** 3)


def vstack_2d(x):
    return np.sum(np.vstack([x, x[:1] * 3.0]) ** 2 * np.arange(3.0))


def dstack_mixed(x):
    return np.sum(np.dstack([x, x * x, x[0]]) ** 2 * np.arange(9.0).reshape(1, 3, 3))


def column_stack_mixed(x):
    return np.sum(np.column_stack([x[:, 0], x]) ** 3) + np.sum(
        np.column_stack([x[0, 0], x[1, 1] ** 2]) ** 2)


def atleast_nd(x):
    return np.sum(np.atleast_2d(x[0]) * np.atleast_3d(x)) + np.sum(np.atleast_1d(x[1]) ** 2)


@pytest.mark.parametrize("fn,shape", [(hstack_mixed, (3,)), (hstack_2d, (2, 3)),
                                      (vstack_mixed, (3,)), (vstack_2d, (2, 3)),
                                      (dstack_mixed, (1, 3)), (column_stack_mixed, (3, 2)),
                                      (atleast_nd, (3,))],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_stacking_functions(fn, shape):
    _check(fn, rng.standard_normal(shape))


def hstack_second_order(x):
    return np.sum(np.hstack([x, x * x]) ** 3)


def test_hstack_second_order():
    x = rng.standard_normal(3)
    hessian = sg.hessian(hstack_second_order)(x)
    expected = np.diag(6 * x + 30 * x ** 4)
    assert_close(hessian, expected, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- np.array / np.asarray
def array_of_scalars(x):
    a = np.array([x[0], x[1] * 2, 3.0])
    return np.sum(a ** 2 * np.array([1.0, 2.0, 3.0]))


def array_nested(x):
    m = np.array([[x[0], x[1]], [x[2], 1.0]])
    return np.sum(m @ m)


def asarray_of_array(x):
    b = np.asarray(x)
    return np.sum(b ** 3) + np.sum(np.array(x, dtype=float) * x)


def array_copy_is_not_a_view(x):
    c = np.array(x)
    c[0] = 0.0
    return np.sum(c * x)


def asarray_is_the_same_array(x):
    y = x * 1.0
    b = np.asarray(y)
    b[0] = 5.0
    return np.sum(y * x)


@pytest.mark.parametrize("fn", [array_of_scalars, array_nested, asarray_of_array,
                                array_copy_is_not_a_view, asarray_is_the_same_array],
                         ids=lambda f: f.__name__)
def test_array_and_asarray(fn):
    _check(fn, rng.standard_normal(3))


# ---------------------------------------------------------------- unpacking
def unpack_shape(x):
    r, c = x.shape
    return np.sum(x) * r + c * x[0, 0]


def unpack_one(x):
    n, = x.shape
    return x[0] * n


def unpack_rows(x):
    a, b, c = x
    return np.sum(a * b) + np.sum(c ** 2)


@pytest.mark.parametrize("fn,shape", [(unpack_shape, (2, 3)), (unpack_one, (4,)),
                                      (unpack_rows, (3, 2))],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_unpacking(fn, shape):
    _check(fn, rng.standard_normal(shape))


def test_unpacking_the_wrong_count_raises_as_python_does():
    with pytest.raises(ValueError, match="unpack"):
        sg.grad(unpack_rows)(rng.standard_normal((4, 2)))


# ---------------------------------------------------------------- calls on constants
def factorial_series(x):
    s = 0.0
    for i in range(4):
        s = s + x ** i / math.factorial(i) * float(i + 1)
    return s + math.comb(5, 2) * x + math.floor(2.5) * x


def linspace_weights(x):
    return np.sum(np.linspace(0, 1, 3) * x) + np.sum(np.array([0.0, 2.0, 1.0]) * x ** 2)


def dict_call(x):
    d = dict(a=x, b=x * 2)
    return np.sum(d["a"] * d["b"])


@pytest.mark.parametrize("fn,x", [(factorial_series, 0.7), (linspace_weights, None),
                                  (dict_call, None)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_calls_on_constants(fn, x):
    _check(fn, rng.standard_normal(3) if x is None else x)


def float_of_array(x):
    return float(x[0]) * x[1]


def test_float_of_a_traced_array_stays_refused():
    with pytest.raises(CompileError, match="float"):
        sg.grad(float_of_array)(rng.standard_normal(2))


# ---------------------------------------------------------------- ufunc.at
def add_at_repeated(x):
    y = np.zeros(5)
    np.add.at(y, np.array([0, 1, 1, 3]), x)
    return np.sum(y ** 2 * np.arange(1.0, 6.0))


def subtract_at_into_traced(x):
    y = x * 1.0
    np.subtract.at(y, [2, 2, 0], x[:3] ** 2)
    return np.sum(y ** 3)


def add_at_scalar(x):
    y = x * 2.0
    np.add.at(y, np.array([1, 1]), x[0])
    return np.sum(np.sin(y))


@pytest.mark.parametrize("fn", [add_at_repeated, subtract_at_into_traced, add_at_scalar],
                         ids=lambda f: f.__name__)
def test_ufunc_at_accumulates(fn):
    _check(fn, rng.standard_normal(4))


def test_add_at_matches_numpy():
    x = rng.standard_normal(4)
    y = np.zeros(5)
    np.add.at(y, np.array([0, 1, 1, 3]), x)
    assert sg.value_and_grad(add_at_repeated)(x)[0] == pytest.approx(
        np.sum(y ** 2 * np.arange(1.0, 6.0)))


# ---------------------------------------------------------------- x ** 0
def power_zero(x):
    return np.sum(x ** 0 + x ** 2)


def power_zero_traced_exponent(x):
    return np.sum(np.power(x, x[0] * 0.0))


def test_power_zero_at_zero_has_zero_gradient():
    x = np.array([0.0, 1.5, 0.0])
    assert_close(sg.grad(power_zero)(x), 2 * x)
    _, t = sg.jvp(power_zero, (x,), (np.ones(3),))
    assert_close(t, np.sum(2 * x))
    assert not np.any(np.isnan(sg.grad(power_zero_traced_exponent)(np.array([0.0, 0.0]))))


# ---------------------------------------------------------------- more NumPy functions
def more_numpy_functions(x):
    m = np.reshape(x, (2, 3))
    y = np.roll(x, 2) * np.ravel(np.fliplr(m)) + np.ravel(np.flipud(m)) ** 2
    return np.vdot(y, x) + np.sum(np.logaddexp2(x, y)) + np.count_nonzero(x > 0) * x[0] \
        + np.sum(np.asanyarray(x) ** 3)


def test_more_numpy_functions():
    _check(more_numpy_functions, rng.standard_normal(6))


# ---------------------------------------------------------------- break/continue, unrolled loops
def break_in_tuple_loop(x):
    s = 0.0
    for w in (x, 2.0 * x, 3.0 * x):
        if np.sum(w) > 1.0:
            break
        s = s + np.sum(w ** 2)
    return s


def continue_in_zip(x):
    s = 0.0
    for a, b in zip([x, x * 2.0, x ** 2], [x[0], x[1], x[2]]):
        if b > 0.0:
            continue
        s = s + np.sum(a * b)
    return s


def break_over_dict_and_list(x):
    params = {"a": x, "b": np.sin(x), "c": x ** 3}
    s = 0.0
    for key in params:
        s = s + np.sum(params[key])
        if s > 0.5:
            break
    for v in [x[0], x[1], x[2]]:
        if v < -0.5:
            continue
        s = s * 1.5 + v
    return s


def loop_variable_after_break(x):
    for w in [x, 2.0 * x, 4.0 * x]:
        if np.sum(w) > 0.5:
            break
    return np.sum(w ** 2)


def return_inside_tuple_loop(x):
    for w in (x, x * x):
        if np.sum(w) > 0.25:
            return np.sum(np.sin(w))
    return np.sum(x)


@pytest.mark.parametrize("fn", [break_in_tuple_loop, continue_in_zip, break_over_dict_and_list,
                                loop_variable_after_break, return_inside_tuple_loop],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", [[0.3, -0.2, 0.1], [0.6, 0.4, -0.7], [-0.4, -0.3, 0.2]],
                         ids=["a", "b", "c"])
def test_break_and_continue_in_unrolled_loops(fn, x):
    x = np.array(x)
    assert sg.grad(fn)(x).shape == x.shape
    _check(fn, x)
    assert sg.value_and_grad(fn)(x)[0] == pytest.approx(fn(x))


def unpack_constant_array(x):
    a, b = np.array([1.5, -2.0])
    return np.sum(x * a + b * x ** 2)


def test_unpacking_a_constant_array():
    _check(unpack_constant_array, rng.standard_normal(3))


class _Gather(sg.autograd.Function):
    """x[[0, 0, 2]], whose backward (run, never differentiated) scatters with np.add.at."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x[np.array([0, 0, 2])]

    @staticmethod
    @sg.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        out = np.zeros_like(x)
        np.add.at(out, np.array([0, 0, 2]), g)
        return out


def gather_with_add_at_backward(x):
    return np.sum(np.sin(_Gather.apply(x)))


def test_add_at_in_a_once_differentiable_backward():
    x = rng.standard_normal(3)
    assert_close(sg.grad(gather_with_add_at_backward)(x),
                 numeric_grad(gather_with_add_at_backward, [x], 0), rtol=1e-5, atol=1e-7)


def diag_both_ways(x):
    m = np.diag(x[:3]) + np.diag(x[3:5], 1)
    return np.sum(np.sin(m @ m)) + np.sum(np.diag(np.reshape(x, (2, 3)), -1) ** 2)


def test_diag():
    _check(diag_both_ways, rng.standard_normal(6))


# ---------------------------------------------------------------- functools.partial
def scaled_sum(x, a, b=1.0):
    return np.sum(np.sin(x) * a) + b * np.sum(x ** 2)


def calls_a_partial(x):
    p = functools.partial(scaled_sum, a=2.0)  # a partial made outside, called inside
    return PARTIAL_OUTSIDE(x) + p(x, b=0.5)


PARTIAL_OUTSIDE = functools.partial(scaled_sum, a=3.0, b=-1.0)


@pytest.mark.parametrize("p, extra", [(functools.partial(scaled_sum, a=2.0), {"b": 0.5}),
                                      (functools.partial(scaled_sum, a=np.array([1.0, -2.0, 0.5]),
                                                         b=3.0), {}),
                                      (functools.partial(scaled_sum, b=0.25), {"a": 1.5})],
                         ids=["keyword", "array-keyword", "open-middle"])
def test_transforms_of_a_partial(p, extra):
    """grad / jvp / vjp / value_and_grad of functools.partial, against the function it
    calls; `extra`: the other parameters it leaves open (sg.jvp takes every parameter,
    in the order of the function's signature)."""
    x = rng.standard_normal(3)
    expected = numeric_grad(lambda v: p(v, **extra), [x], 0)
    assert_close(sg.grad(p)(x, **extra), expected, rtol=1e-6, atol=1e-8)
    value, g = sg.value_and_grad(p)(x, **extra)
    assert_close(value, p(x, **extra), rtol=1e-12)
    assert_close(g, expected, rtol=1e-6, atol=1e-8)
    direction = rng.standard_normal(3)
    primals, tangents = (x, *extra.values()), (direction, *[0.0 for _ in extra])
    _, tangent = sg.jvp(p, primals, tangents)
    assert_close(tangent, np.sum(expected * direction), rtol=1e-6, atol=1e-8)
    _, vjp_fn = sg.vjp(p, *primals)
    assert_close(vjp_fn(1.0)[0], expected, rtol=1e-6, atol=1e-8)


def test_partial_of_positional_arguments_and_inside_compiled_code():
    x = rng.standard_normal(3)
    p = functools.partial(scaled_sum, x)  # the array is bound: the gradient is w.r.t. `a`
    assert_close(sg.grad(p)(0.7), numeric_grad(lambda a: scaled_sum(x, a), [0.7], 0), rtol=1e-6)
    _check(calls_a_partial, x)


# ---------------------------------------------------------------- iterating a number
def loop_over_a_shape_item(x):
    s = 0.0
    for v in x.shape[0]:
        s = s + v
    return np.sum(x) * s


def loop_over_len(x):
    s = 0.0
    for v in len(x):
        s = s + v * x[0]
    return s


@pytest.mark.parametrize("fn", [loop_over_a_shape_item, loop_over_len], ids=lambda f: f.__name__)
def test_a_loop_over_a_number_is_refused_as_python_refuses_it(fn):
    with pytest.raises(TypeError):  # Python: 'int' object is not iterable
        fn(rng.standard_normal(3))
    with pytest.raises(CompileError, match="'int' object is not iterable") as info:
        sg.grad(fn)(rng.standard_normal(3))
    assert info.value.text.startswith("for v in")


# ---------------------------------------------------------------- dict()/list() of constants
def dict_of_constants_written(x):
    d = dict(a=np.stack([3.0]))  # all constant: still a dict the code may write into
    d["b"] = x * 2.0
    return np.sum(d["a"] * d["b"])


def list_of_constants_appended(x):
    ys = list((1.0, 2.0))
    ys.append(np.sum(x ** 2))
    return ys[0] * ys[-1] + ys[1]


@pytest.mark.parametrize("fn", [dict_of_constants_written, list_of_constants_appended],
                         ids=lambda f: f.__name__)
def test_dict_and_list_of_constants_can_be_changed(fn):
    _check(fn, rng.standard_normal(3))


def _at_with_own_view(x):
    y = x * 1.0
    np.subtract.at(y, slice(0, 4), y[:1])
    return np.sum(y * x)


def _at_with_a_copy(x):
    y = x * 1.0
    np.subtract.at(y, slice(0, 4), y[:1].copy())
    return np.sum(y * x)


def _at_with_own_reversed_view(x):
    y = x * 1.0
    np.add.at(y, [1, 2, 2], y[::-1][:3] * 1.0 if x[0] > 10.0 else y[::-1][:3])
    np.subtract.at(y, np.array([0, 3]), y.reshape(2, 2)[1])
    return np.sum(y * x)


@pytest.mark.parametrize("fn", [_at_with_own_view, _at_with_a_copy, _at_with_own_reversed_view])
def test_ufunc_at_with_a_view_of_its_target(fn):
    """NumPy's `ufunc.at` copies a `b` that overlaps `a` before writing (its map
    iterator's copy-if-overlap), so `b` viewing `a` reads the values before the call,
    as compiled code does: the value is NumPy's, the gradient central differences'."""
    x = np.array([0.5, -1.0, 2.0, 0.25])
    assert_close(sg.grad(fn)(x), numeric_grad(fn, [x], 0), rtol=1e-5, atol=1e-7)
    assert_close(sg.value_and_grad(fn)(x)[0], fn(x.copy()))
    t = np.linspace(0.5, 1.5, 4)
    out, t_out = sg.jvp(fn, (x,), (t,))
    assert_close(t_out, numeric_grad(fn, [x], 0) @ t, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- shape facts (Note [Shape facts])
def sum_by_recursion(x):
    if x.shape[0] == 1:  # the base case is decided by a shape: each variant's depth is known
        return np.sum(x ** 2)
    return np.sin(x[0]) * x[-1] + sum_by_recursion(x[1:])


def comprehension_over_length(x):
    ys = [x[i] * x[-1 - i] for i in range(len(x))]
    return sum(ys) + np.sum(np.stack([np.cos(x[i]) for i in range(x.shape[0])]))


def rows_by_comprehension(x):
    return np.stack([np.sin(x[i]) * x[0] for i in range(x.shape[0])])


def positive_part(x):
    y = x[x > 0]  # a data-dependent shape: never a fact, the branch stays traced
    if y.shape[0] == 0:
        return np.sum(x) * 0.0
    return np.sum(y ** 2)


@pytest.mark.parametrize("fn", [sum_by_recursion, comprehension_over_length], ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", [1, 3, 5])
def test_shape_decisions_trace_in_a_shape_variant(fn, n):
    """Each argument shape gets its own variant (recursion depth, comprehension length);
    reverse mode through sg.grad and sg.vjp, forward over reverse through sg.hessian."""
    x = rng.uniform(0.2, 1.0, size=n)
    expected = numeric_grad(fn, [x], 0)
    assert_close(sg.grad(fn)(x), expected, rtol=1e-6, atol=1e-8)
    out, vjp_fn = sg.vjp(fn, x)
    assert_close(out, fn(x), rtol=1e-12)
    assert_close(vjp_fn(1.0)[0], expected, rtol=1e-6, atol=1e-8)
    g, eps = sg.grad(fn), 1e-5
    fd = np.stack([(g(x + eps * e) - g(x - eps * e)) / (2 * eps) for e in np.eye(n)], axis=1)
    assert_close(sg.hessian(fn)(x), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_jacobian_of_a_comprehension_over_a_shape(mode):
    x = rng.uniform(0.2, 1.0, size=4)
    eps = 1e-6
    fd = np.stack([(rows_by_comprehension(x + eps * e) - rows_by_comprehension(x - eps * e)) / (2 * eps)
                   for e in np.eye(4)], axis=1)
    assert_close(sg.jacobian(rows_by_comprehension, mode=mode)(x), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("fn", [sum_by_recursion, comprehension_over_length], ids=lambda f: f.__name__)
def test_sg_jvp_of_a_shape_decision(fn):
    """sg.jvp: the shape-generic code refuses these, so a variant for the primals' shapes
    runs (CompiledJvp.entry_at); two shapes, two variants."""
    for n in (2, 4):
        x = rng.uniform(0.2, 1.0, size=n)
        direction = rng.standard_normal(n)
        out, tangent = sg.jvp(fn, (x,), (direction,))
        assert_close(out, fn(x), rtol=1e-12)
        assert_close(tangent, np.sum(numeric_grad(fn, [x], 0) * direction), rtol=1e-6, atol=1e-8)


SHAPE_RECURSION = """
import json
import numpy as np
import srcgrad as sg

def rec(x):
    if x.shape[0] == 1:
        return np.sum(x ** 2)
    return np.sin(x[0]) + rec(x[1:])

x = np.array([0.3, 0.5, 0.9])
print(json.dumps([sg.vjp(rec, x)[1](1.0)[0].tolist(), float(sg.jvp(rec, (x,), (np.ones(3),))[1]),
                  sg.grad(rec)(x).tolist()]))
"""


def test_shape_variants_load_from_the_disk_cache_in_a_fresh_process(tmp_path):
    """A disk-cache hit rebuilds sg.vjp's and sg.jvp's output structure by tracing with
    the variant's shape facts, as the variant was compiled (not the generic trace,
    which refuses the recursion): the second process reads the first one's modules."""
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "shape_recursion.py"
    script.write_text(SHAPE_RECURSION)
    env = {**os.environ, "SRCGRAD_CACHE_DIR": str(tmp_path / "cache")}
    expected = [np.cos(0.3), np.cos(0.5), 1.8]
    for _ in range(2):
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                             check=False)
        assert run.returncode == 0, run.stderr
        vjp_grad, tangent, grad = json.loads(run.stdout)
        assert_close(vjp_grad, expected, rtol=1e-12)
        assert_close(grad, expected, rtol=1e-12)
        assert_close(tangent, np.sum(expected), rtol=1e-12)


def recursion_in_a_branch(x):
    if np.sum(x) > 1.0:  # a test on data: both branches are traced, facts hold in each
        y = np.stack([x[i] * 2.0 for i in range(x.shape[0])])
        return sum_by_recursion(y)
    return np.sum(x ** 3)


def comprehension_over_a_carried_shape(x):
    for k in range(2):  # x is the loop's param: its shape is no fact inside the body
        x = np.sum(np.stack([x[i] * k for i in range(x.shape[0])])) * x
    return np.sum(x)


def test_shape_facts_inside_a_branch_on_data():
    grad = sg.grad(recursion_in_a_branch)  # one variant, data taking each branch
    for x in (np.array([0.3, 0.5, 0.9]), np.array([0.1, 0.2, 0.3])):
        expected = numeric_grad(recursion_in_a_branch, [x], 0)
        assert_close(grad(x), expected, rtol=1e-6, atol=1e-8)
        _, tangent = sg.jvp(recursion_in_a_branch, (x,), (np.ones(3),))
        assert_close(tangent, np.sum(expected), rtol=1e-6, atol=1e-8)


def test_a_shape_inside_a_loop_body_is_no_fact():
    with pytest.raises(CompileError, match=r"`range\(\)` of an array") as info:
        sg.grad(comprehension_over_a_carried_shape)(np.array([0.3, 0.5, 0.9]))
    assert "for i in range(x.shape[0])" in info.value.text


def test_a_data_dependent_shape_is_never_a_fact():
    """One variant (same shape) for data that takes either branch of a test on a mask's
    count: the first call's count must not be baked in."""
    grad = sg.grad(positive_part)
    for x in (np.array([0.5, -0.2, 0.9]), np.array([-0.5, -0.2, -0.9]), np.array([0.5, 0.2, 0.9])):
        assert_close(grad(x), numeric_grad(positive_part, [x], 0), rtol=1e-6, atol=1e-8)
