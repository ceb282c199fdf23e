"""Layouts decided on stand-ins (Note [Layout stand-ins] in srcgrad.frontend.layout_models):
the facts against NumPy's own arrays on C, Fortran, strided, reversed and transposed
operands with axes of length one; and programs whose in-place writes NumPy decides by
shape and strides, against central differences in reverse and forward mode, each on two
data sets (the second call reuses the variant)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.frontend.layout_facts import Static, infer, of_value
from srcgrad.frontend.layout_models import is_view, stand_in
from tests.test_layout_facts import _check, _compiles_right

# ---------------------------------------------------------------------- facts, on NumPy

SHAPES = [(1,), (4,), (1, 2), (4, 1), (2, 3), (1, 3, 1), (2, 1, 3), (2, 3, 4)]


def _layouts(shape):
    a = np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape)
    out = [a, np.asfortranarray(a), a.T, a[::-1], a[..., ::-1]]
    if a.ndim >= 2:
        out.append(np.swapaxes(a, 0, 1))
        out.append(np.repeat(a, 2, axis=-1)[..., ::2])
        out.append(np.zeros(shape[:-1] + (3 * shape[-1],))[..., :shape[-1]])
    return out


def test_views_of_every_layout():
    for shape in SHAPES:
        for a in _layouts(shape):
            fact = of_value(a)
            assert fact.layout is not None
            for name, fn, params in [("T", lambda v: v.T, {}),
                                     ("transpose", np.transpose, {"axes": Static(None)}),
                                     ("ravel", np.ravel, {}),
                                     ("flatten", lambda v: v.flatten(), {}),
                                     ("expand_dims", lambda v: np.expand_dims(v, 0), {"axis": Static(0)}),
                                     ("squeeze", lambda v: np.squeeze(v), {"axis": Static(None)})]:
                _check(infer(name, {"x": fact, **params}), fn(a))
            if a.ndim >= 2:
                _check(infer("swapaxes", {"x": fact, "axis1": Static(0), "axis2": Static(-1)}),
                       np.swapaxes(a, 0, -1))
                _check(infer("moveaxis", {"x": fact, "source": Static(0), "destination": Static(-1)}),
                       np.moveaxis(a, 0, -1))
            for index in [0, -1, slice(None, None, -1), (Ellipsis, 0), (slice(None), None),
                          [0, 0], (slice(None), [0])]:
                try:
                    r = a[index]
                except IndexError:
                    continue
                _check(infer("getitem", {"x": fact, "index": Static(index)}), r)


def test_reshape_is_a_view_exactly_where_numpy_makes_one():
    for shape in SHAPES:
        for a in _layouts(shape):
            targets = [(-1,), (a.size, 1), (1, a.size)] + ([a.shape[::-1]] if a.ndim >= 2 else [])
            if a.ndim >= 2:
                targets.append(a.shape[:-2] + (a.shape[-2] * a.shape[-1],))
                targets.append((a.shape[0], -1))
            for target in targets:
                r = a.reshape(target)
                args = {"x": of_value(a), "shape": Static(target)}
                assert is_view("reshape", args) == np.shares_memory(r, a), (a.shape, a.strides, target)
                _check(infer("reshape", args), r)
            assert is_view("ravel", {"x": of_value(a)}) == np.shares_memory(a.ravel(), a)


def test_fresh_results_follow_numpy():
    for s1, s2 in itertools.product(SHAPES[:6], repeat=2):
        try:
            np.broadcast_shapes(s1, s2)
        except ValueError:
            continue
        for a, b in itertools.product(_layouts(s1), _layouts(s2)):
            if a.shape != s1 or b.shape != s2:
                continue
            _check(infer("add", {"x": of_value(a), "y": of_value(b)}), a + b)
            _check(infer("where", {"condition": of_value(a), "x": of_value(b), "y": Static(0.0)}),
                   np.where(a > 2.0, b, 0.0))
    for shape in SHAPES:
        for a in _layouts(shape):
            fact = of_value(a)
            _check(infer("take", {"x": fact, "indices": Static([0, 0]), "axis": Static(0)}),
                   np.take(a, [0, 0], axis=0))
            _check(infer("sum", {"x": fact, "axis": Static(0), "keepdims": Static(False)}), a.sum(axis=0))
            _check(infer("zeros_like", {"x": fact}), np.zeros_like(a))
            _check(infer("concatenate", {"arrays": (fact, fact), "axis": Static(0)}),
                   np.concatenate((a, a)))
            _check(infer("stack", {"arrays": (fact, fact), "axis": Static(-1)}), np.stack((a, a), -1))
    for sa, sb in [((2, 3, 4), (4, 2)), ((3,), (2, 3, 4)), ((2, 3, 4), (4,))]:
        a, b = np.ones(sa), np.ones(sb)
        _check(infer("dot", {"x": of_value(a), "y": of_value(b)}), np.dot(a, b))
        _check(infer("matmul", {"x": of_value(a), "y": of_value(b)}), a @ b)


def test_an_argument_that_is_not_c_contiguous_has_no_layout():
    """The variant's guard fixes a C-contiguous argument's strides, not another's."""
    f = np.asfortranarray(np.ones((2, 3)))
    assert of_value(f, argument=True).layout is None
    assert of_value(np.ones((2, 3)), argument=True).layout == ((2, 3), (3, 1))


def test_a_stand_in_is_bounded():
    assert stand_in(((2, 3), (3, 1))).shape == (2, 3)
    assert stand_in(((1 << 13, 1 << 13), (1 << 13, 1))) is None


# ---------------------------------------------------------------------- programs


def reversed_row_in_a_branch(x, c):
    v = x * 1.0
    if c[0] > 0.5:
        v = v[::-1]  # a (1, 3) array reversed along its axis of length one: C-contiguous
    w = v.reshape(-1)
    w[0] = 5.0 * c[0]
    return np.sum(v * x)


def transpose_of_a_column(x):
    v = x * 2.0
    w = v.T.reshape(-1)  # (1, 4): still C-contiguous, a view
    w[1] = 0.0
    return np.sum(v * v)


def transpose_of_a_matrix(x):
    v = x * 2.0
    w = v.T.reshape(-1)  # (3, 2) of a (2, 3): a copy
    w[1] = 0.0
    return np.sum(v * v) + np.sum(w)


def reshape_keeping_fortran_order(x):
    v = (x * 2.0).T  # Fortran-contiguous
    w = v.reshape((3, 2, 1))  # a view: the strides can be re-expressed
    w[0, 1, 0] = 1.0
    return np.sum(v * x.T)


def column_of_a_strided_slice(x):
    v = (x * 3.0)[:, :1]  # (3, 1) with a row stride of 4: not C-contiguous
    w = v.reshape(-1)  # a view all the same
    w *= 2.0
    u = v.ravel()  # ravel copies what is not C-contiguous
    u += 1.0
    return np.sum(v * v) + np.sum(u)


def advanced_index_then_reshape(x):
    v = (x * 2.0)[:, [0, 2]]  # a fresh array, not C-ordered
    w = v.reshape(-1)  # a copy
    w[0] = 7.0
    return np.sum(v * v) + np.sum(w)


def row_at_a_loop_index(x):
    v = x * 1.5
    for i in range(2):
        r = v[i]  # a row of a matrix whatever i is: a view
        r += x[i]
    return np.sum(v * v)


def reshape_of_a_batched_product(x, m):
    v = np.dot(x, m)  # (2, 3, 2), fresh and C-ordered
    w = v.reshape(-1)
    w[0] = 0.0
    return np.sum(v * v)


def reversed_in_a_loop(x):
    v = x * 1.0
    for i in range(3):
        v = v[::-1]  # (1, 3): the same layout on every iteration
        w = v.reshape(-1)
        w[i] = w[i] * 2.0
    return np.sum(v * x)


def _data(shape, k):
    return (np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape) / (3.0 + k)) * (-1.0) ** k


PROGRAMS = [
    (reversed_row_in_a_branch, lambda k: [_data((1, 3), k), np.array([0.9 if k else 0.2])]),
    (transpose_of_a_column, lambda k: [_data((4, 1), k)]),
    (transpose_of_a_matrix, lambda k: [_data((2, 3), k)]),
    (reshape_keeping_fortran_order, lambda k: [_data((2, 3), k)]),
    (column_of_a_strided_slice, lambda k: [_data((3, 4), k)]),
    (advanced_index_then_reshape, lambda k: [_data((2, 3), k)]),
    (row_at_a_loop_index, lambda k: [_data((2, 3), k)]),
    (reshape_of_a_batched_product, lambda k: [_data((2, 3, 4), k), _data((4, 2), k + 1)]),
    (reversed_in_a_loop, lambda k: [_data((1, 3), k)]),
]


@pytest.mark.parametrize("fn,make", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_decided_on_stand_ins(fn, make):
    for k in (0, 1):  # two data sets: the second call reuses the variant
        _compiles_right(fn, *make(k))


def test_the_probe_keeps_the_shape_of_a_written_argument():
    """An argument written in place, then a branch: the variant's probe knows the output's
    shape (no_alias is the identity on its first operand), so sg.vjp compiles the variant,
    whose layout facts decide the reshape in the branch (the shape-generic code refused)."""
    def f(x0, x2):
        x1 = np.minimum(x0.ravel()[:2], x2)
        w6 = x0.T
        w6[-1] = np.add(2.0, np.sum(x0))
        if np.sum(x0) > 100.0:
            x1 = x1 * 2.0
        else:
            w14 = x1.reshape(-1)
            w14[1:2] = np.sum(x1) ** 2
        return np.sum(x0) + np.mean(x1.ravel()[:3].reshape((3, 1)))

    for k in (0, 1):
        x0, x2 = _data((4, 1), k) / 4.0, _data((2, 2, 2), k + 1) / 4.0
        out, vjp_fn = sg.vjp(f, x0.copy(), x2.copy())
        assert np.isclose(out, f(x0.copy(), x2.copy()))
        _compiles_right(f, x0, x2)


# ---------------------------------------------------------------------- unpacking rows


def rows_unpacked_and_written(x):
    v = x * 1.0
    r0, r1 = v  # NumPy binds v[0] and v[1]: views of its rows
    r0 += 1.0
    r1 *= x[0]
    return np.sum(v * v)


def rows_of_an_argument_unpacked_and_written(x):
    r0, r1 = x  # views of the caller's rows: the write reaches x
    r0 *= 2.0
    return np.sum(x * x)


def items_of_a_vector_unpacked(x):
    v = x * 1.0
    a, b, c = v  # NumPy scalars: `+=` rebinds, v keeps its values
    a += 1.0
    return np.sum(v * v) + a * b + c


def shape_items_unpacked(x):
    n, m = x.shape
    v = x * 1.0
    w = v.reshape(n * m)
    w[m] = 0.0
    return np.sum(v * v) * m


@pytest.mark.parametrize("fn,shape", [(rows_unpacked_and_written, (2, 3)),
                                      (rows_of_an_argument_unpacked_and_written, (2, 3)),
                                      (items_of_a_vector_unpacked, (3,)),
                                      (shape_items_unpacked, (2, 3))])
def test_unpacked_rows_are_views(fn, shape):
    """`r0, r1 = x` binds views of x's rows (was: the write through r0 missed x, a wrong
    gradient); a vector's items are scalars, a shape's Python ints."""
    for k in (0, 1):
        _compiles_right(fn, _data(shape, k))


def _function_class():
    from srcgrad.autograd import Function

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3.0 * x * x

        @staticmethod
        def jvp(ctx, xt):
            x, = ctx.saved_tensors
            return xt * 3.0 * x * x

    return Cube


CUBE = _function_class()


def reshape_of_a_function_output(x):
    v = CUBE.apply(x * 0.5)  # what forward returned: a fresh C-ordered array
    w = v.reshape(-1)
    w[0] = 1.0
    return np.sum(v * x)


def test_a_custom_function_output_has_its_forward_result_layout():
    for k in (0, 1):
        _compiles_right(reshape_of_a_function_output, _data((2, 3), k))


def test_the_caller_array_is_found_through_a_deep_chain_of_merged_values():
    """An unrolled loop merges a value per iteration (a branch in each): `_caller_array`
    walks the merges' sources with its own stack, so hundreds of them are no
    RecursionError (fuzz seed 1303819, Fortran-ordered arguments: 4 x 36 unrolled
    iterations overflowed Python's recursion limit), and its answer is unchanged: the
    argument where every path leads to it, None where one leads elsewhere."""
    from srcgrad.frontend.mutation import Mutation
    from srcgrad.ir.core import Var

    mutation = Mutation(tracer=None)
    x, other = Var("x"), Var("other")
    mutation.inputs = [x, other]
    value = x
    for k in range(3000):
        merged = Var(f"m{k}")
        mutation.merged[id(merged)] = (value, value if k % 2 else merged)  # (itself: a loop param)
        value = merged
    assert mutation._caller_array(value) is x
    leaked = Var("leaked")
    mutation.merged[id(leaked)] = (value, other)
    assert mutation._caller_array(leaked) is None
