"""Layout facts (Note [Layout facts] in srcgrad.frontend.layout_facts): what NumPy's layout
and types are, checked against NumPy itself; and programs whose in-place writes NumPy
decides by them, checked against central differences in reverse and forward mode."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.frontend.layout_facts import Fact, Static, infer, of_value
from srcgrad.frontend.layout_models import is_view
from tests.conftest import assert_close

# ---------------------------------------------------------------------- the facts, on NumPy


def _predicted(name, **operands):
    """infer() on the facts of real operands (arrays and numbers) and static parameters."""
    args = {}
    for k, v in operands.items():
        if isinstance(v, Static):
            args[k] = v
        elif isinstance(v, (list, tuple)):
            args[k] = tuple(of_value(a) for a in v)
        else:
            args[k] = of_value(v)
    return infer(name, args)


def _check(fact, result):
    """The fact holds for NumPy's result (and a reshape of it is a view iff it says so)."""
    assert fact is not None
    assert isinstance(result, np.ndarray) == fact.array, (fact, type(result))
    if not fact.array:
        return
    if fact.ndim is not None:
        assert result.ndim == fact.ndim
    if fact.c:
        assert result.flags.c_contiguous
        assert np.shares_memory(result.reshape(-1), result) or result.size == 0
        assert np.shares_memory(result.ravel(), result) or result.size == 0
    if fact.layout is not None:  # Note [Layout stand-ins]: NumPy's shape, strides and flags
        shape, strides = fact.layout
        assert result.shape == shape, (fact, result.shape)
        assert fact.c == result.flags.c_contiguous
        assert all(n <= 1 or s * result.itemsize == t
                   for n, s, t in zip(shape, strides, result.strides)), (fact, result.strides)

SHAPES = [(), (1,), (3,), (1, 3), (3, 1), (2, 3), (2, 1, 3), (3, 3)]


def _c(shape):
    return np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape)


def _layouts(shape):
    """The same values C-ordered, Fortran-ordered and strided."""
    a = _c(shape)
    out = [a, np.asfortranarray(a)]
    if a.ndim >= 1:
        out.append(np.repeat(a, 2, axis=-1)[..., ::2])
    return out


UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "arctan2": np.arctan2,
          "greater": np.greater, "clip": lambda a, b: np.clip(a, b, 5.0),
          "where": lambda a, b: np.where(a > 2.0, a, b)}


@pytest.mark.parametrize("name", sorted(UFUNCS))
def test_ufunc_results(name):
    fn = UFUNCS[name]
    for s1, s2 in itertools.product(SHAPES, repeat=2):
        try:
            np.broadcast_shapes(s1, s2)
        except ValueError:
            continue
        for a, b in itertools.product(_layouts(s1), _layouts(s2)):
            params = {"condition": a, "x": a, "y": b} if name == "where" else (
                {"x": a, "a_min": b, "a_max": Static(5.0)} if name == "clip" else {"x": a, "y": b})
            fact = _predicted(name, **params)
            _check(fact, fn(a, b))
            both_c = a.flags.c_contiguous and b.flags.c_contiguous
            assert fact.c == both_c or fact.ndim == 0 or fact.layout is not None


def test_ufuncs_of_numbers_and_0d_arrays_are_scalars():
    for a in (np.array(1.5), np.float64(1.5), 1.5):
        _check(_predicted("sin", x=a), np.sin(a))
        _check(_predicted("multiply", x=a, y=Static(2.0)), np.multiply(a, 2.0))
        _check(_predicted("where", condition=a, x=a, y=Static(0.0)), np.where(a, a, 0.0))
        _check(_predicted("clip", x=a, a_min=Static(0.0), a_max=Static(1.0)), np.clip(a, 0.0, 1.0))
    _check(_predicted("math_sin", x=1.5), 0.99)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "prod", "var", "std", "norm", "nansum",
                                  "nanmean"])
def test_reductions(name):
    fn = np.linalg.norm if name == "norm" else getattr(np, name)
    for shape in SHAPES:
        for a in _layouts(shape):
            _check(_predicted(name, x=a), fn(a))
            _check(_predicted(name, x=a, axis=Static(None), keepdims=Static(True)),
                   fn(a, axis=None, keepdims=True) if name != "norm" else fn(a, keepdims=True))
            for axis in range(a.ndim):
                for keep in (False, True):
                    fact = _predicted(name, x=a, axis=Static(axis), keepdims=Static(keep))
                    _check(fact, fn(a, axis=axis, keepdims=keep))


def test_products_creations_and_copies():
    for sa, sb in [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 2))]:
        for a, b in itertools.product(_layouts(sa), _layouts(sb)):
            _check(_predicted("matmul", x=a, y=b), a @ b)
            _check(_predicted("dot", x=a, y=b), np.dot(a, b))
    for sa, sb in [((2, 3), (3, 2)), ((2, 3), (3,)), ((2, 2, 3), (3, 2)), ((2, 2, 3), (2, 3, 2))]:
        for a, b in itertools.product(_layouts(sa), _layouts(sb)):
            _check(_predicted("dot", x=a, y=b), np.dot(a, b))
            fact = _predicted("matmul", x=a, y=b)
            _check(fact, a @ b)
            # a product of matrices is C-ordered whatever its operands' layouts (it was
            # claimed only for C-contiguous operands: a reshape of it was "may copy")
            assert _predicted("dot", x=a, y=b).c and (fact.c or len(sa) > 2 or len(sb) > 2)
    _check(_predicted("outer", x=_c((3,)), y=_c((2,))), np.outer(_c((3,)), _c((2,))))
    for name, fn in [("zeros", np.zeros), ("ones", np.ones), ("empty", np.empty)]:
        for shape in [3, (2, 3), (), (1, 2, 3)]:
            _check(_predicted(name, shape=Static(shape)), fn(shape))
    _check(_predicted("eye", N=Static(3)), np.eye(3))
    _check(_predicted("arange", start=Static(4)), np.arange(4))
    for shape in SHAPES:
        for a in _layouts(shape):
            _check(_predicted("copy", x=a), np.copy(a))
            _check(_predicted("copy", x=a), a.copy() if a.flags.c_contiguous else np.copy(a))
            _check(_predicted("astype", x=a, dtype=Static(np.float32)), a.astype(np.float32))
            _check(_predicted("zeros_like", x=a), np.zeros_like(a))
            _check(_predicted("flatten", x=a), a.flatten())
    for a in (np.float64(2.0), 2.0):
        _check(_predicted("zeros_like", x=a), np.zeros_like(a))


def test_repeated_arrays():
    for shape in SHAPES:
        for a in _layouts(shape):
            for reps in (2, (2, 1), (1, 2, 2)):
                _check(_predicted("tile", x=a, reps=Static(reps)), np.tile(a, reps))
            for axis in [None, *range(a.ndim)]:
                _check(_predicted("repeat", x=a, repeats=Static(2), axis=Static(axis)),
                       np.repeat(a, 2, axis=axis))
                _check(_predicted("cumsum", x=a, axis=Static(axis)), np.cumsum(a, axis=axis))
    for s in (np.float64(2.0), 2.0):
        _check(_predicted("tile", x=s, reps=Static(3)), np.tile(s, 3))
        _check(_predicted("repeat", x=s, repeats=Static(2), axis=Static(None)), np.repeat(s, 2))
        _check(_predicted("cumsum", x=s, axis=Static(None)), np.cumsum(s))


def test_joined_arrays():
    for shape in [(3,), (2, 3), (1, 3)]:
        for a, b in itertools.product(_layouts(shape), repeat=2):
            for axis in range(len(shape)):
                _check(_predicted("concatenate", arrays=(a, b), axis=Static(axis)),
                       np.concatenate((a, b), axis=axis))
            for axis in range(len(shape) + 1):
                _check(_predicted("stack", arrays=(a, b), axis=Static(axis)), np.stack((a, b), axis=axis))
            for name in ("hstack", "vstack", "dstack", "column_stack"):  # (each promotes first)
                if name != "column_stack" or shape[:1] == b.shape[:1]:
                    _check(_predicted(name, arrays=(a, b)), getattr(np, name)((a, b)))


def test_a_reshape_of_a_vector_is_a_view_whatever_its_stride():
    """One axis of any stride splits into any shape of its size without a copy; ravel
    copies a strided vector, so only reshape is claimed."""
    base = np.arange(1.0, 49.0)
    vectors = [base[::2][:12], base[::-1][:12], base[::3][:12], base.reshape(12, 4)[:, 1],
               np.broadcast_to(np.array([2.0]), (12,)), base[:12]]
    for v in vectors:
        for target in [(-1,), (12,), (3, 4), (2, 2, 3), (1, 12), (12, 1), (4, -1), (2, 3, 1, 2)]:
            assert is_view("reshape", {"x": of_value(v), "shape": Static(target)})
            assert np.shares_memory(v.reshape(target), v)
            assert np.shares_memory(v.reshape(target, order="F"), v)
    assert not np.shares_memory(base[::2].ravel(), base)
    unknown = Fact(True, 1, False)  # a vector whose strides the compiler does not know
    assert is_view("reshape", {"x": unknown, "shape": Static((3, 4))})
    assert is_view("ravel", {"x": unknown}) is None


def test_reshape_ravel_and_transposes():
    for shape in SHAPES:
        for a in _layouts(shape):
            for target in [(-1,), (a.size,), (1, a.size), (a.size, 1, 1)]:
                fact = _predicted("reshape", x=a, shape=Static(target))
                r = a.reshape(target)
                _check(fact, r)
                if a.flags.c_contiguous:  # a C-contiguous array: always a view
                    assert np.shares_memory(r, a) or a.size == 0
                # Note [Layout stand-ins]: NumPy's answer on a stand-in of a's layout
                answer = is_view("reshape", {"x": of_value(a), "shape": Static(target)})
                assert answer == np.shares_memory(r, a) or a.size == 0
            fact = _predicted("ravel", x=a)
            _check(fact, a.ravel())
            if a.flags.c_contiguous:
                assert fact.c and np.shares_memory(a.ravel(), a)
            _check(_predicted("T", x=a), a.T)
            _check(_predicted("transpose", x=a, axes=Static(None)), np.transpose(a))
            for axis in (0, -1, (0, 1)):
                fact = _predicted("expand_dims", x=a, axis=Static(axis))
                _check(fact, np.expand_dims(a, axis))
                assert np.shares_memory(np.expand_dims(a, axis), a) or a.size == 0  # a view
    for s in (np.float64(2.0), 2.0):  # a scalar's reshape is a fresh array
        fact = _predicted("reshape", x=s, shape=Static((-1,)))
        _check(fact, np.reshape(s, (-1,)))
        _check(_predicted("ravel", x=s), np.ravel(s))


INDICES = [0, -1, (0, 0), (0, 1), slice(1, None), slice(None, 2), (slice(None), 0), (0, slice(1, 3)),
           (Ellipsis, 0), (0, Ellipsis), (None, 0), (0, None), slice(None, None, 2), (), Ellipsis,
           (1, 2, 0), (slice(0, 1), slice(None))]


def test_basic_indexing():
    for shape in [(3,), (2, 3), (3, 4), (2, 3, 4), ()]:
        for a in _layouts(shape):
            for index in INDICES:
                try:
                    r = a[index]
                except IndexError:
                    continue
                fact = _predicted("getitem", x=a, index=Static(index))
                if fact is None:
                    continue
                _check(fact, r)
                if fact.array:
                    assert np.shares_memory(r, a) or r.size == 0  # a view
    for index in INDICES:  # every index the table names is decided for a C-ordered matrix
        try:
            _c((3, 4))[index]
        except IndexError:
            continue
        assert _predicted("getitem", x=_c((3, 4)), index=Static(index)) is not None


def test_facts_of_values():
    assert of_value(np.float64(1.0)).array is False
    assert of_value(np.ones(3)).c and not of_value(np.ones((2, 3), order="F")).c
    assert of_value(np.ones((2, 3))[:, ::2]).c is False
    assert of_value("text") is None


# ---------------------------------------------------------------------- programs


def _numeric(f, args, index, eps=1e-6):
    x = np.array(args[index], dtype=np.float64)
    grad = np.zeros(x.shape)
    flat = grad.reshape(-1)
    for i in range(x.size):
        vals = []
        for sign in (1, -1):
            copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
            moved = x.copy().reshape(-1)
            moved[i] += sign * eps
            copies[index] = moved.reshape(x.shape)
            vals.append(float(f(*copies)))
        flat[i] = (vals[0] - vals[1]) / (2 * eps)
    return grad


def _compiles_right(f, *args):
    """Reverse and forward mode agree with central differences (the compiled code does not
    write into the caller's arrays)."""
    for i, a in enumerate(args):
        expected = _numeric(f, args, i)
        grads = sg.grad(f, wrt=i)(*[np.copy(b) for b in args])
        assert_close(grads, expected, rtol=1e-5, atol=1e-7)
        u = np.linspace(0.3, 1.1, np.size(a)).reshape(np.shape(a))
        tangents = tuple(u if j == i else np.zeros_like(b) for j, b in enumerate(args))
        out, t = sg.jvp(f, tuple(np.copy(b) for b in args), tangents)
        assert_close(out, f(*[np.copy(b) for b in args]), rtol=1e-9)
        assert_close(t, np.sum(expected * u), rtol=1e-5, atol=1e-7)


def reshape_of_computed(x):
    v = x * 2.0
    w = v.reshape(-1)
    w[0] = 5.0
    return np.sum(v * v)


def ravel_of_computed_augmented(x):
    v = np.sin(x) + 1.0
    w = v.ravel()
    w *= x.ravel()
    return np.sum(v * x)


def reshape_of_a_reduction(x):
    v = x.sum(axis=0)
    w = v.reshape((1, -1))
    w += 1.0
    return np.sum(v * v)


def reshape_of_a_scalar_is_a_copy(x):
    s = np.sum(x)
    w = np.reshape(s, (1,))
    w *= 3.0
    return s * np.sum(w)


def row_of_a_computed_matrix(x):
    m = np.outer(x, x)
    row = m[0]
    row += 1.0
    return np.sum(m * m)


def item_of_a_computed_vector(x):
    v = x.sum(axis=0)
    w = v[1]
    w *= 3.0
    return np.sum(v) + w


def item_then_alias(x):
    y = x[0, 1] * 1.0  # a NumPy scalar: `+=` rebinds y, z keeps the old value
    z = y
    y += 1.0
    return z * y


def reshape_in_a_loop(x):
    v = x * 1.5
    for i in range(2):
        w = v.reshape(-1)
        w[i] = w[i] * w[i]
    return np.sum(v * x)


def reshape_in_a_branch(x, c):
    v = x * 1.0
    if c[0] > 0.35:
        w = v.reshape(-1)
        w += c
    return np.sum(v * v)


def ravel_of_an_argument_in_a_while(x, y):
    k = 0
    while k < 2:
        k += 1
        w = y.ravel()
        w[0] = np.sum(x) * 0.5
    return np.sum(y * y) + np.sum(x * y[0])


def reshape_of_a_product_of_strided_matrices(x):
    v = (x[:, 1:] @ x[1:, ::2]) * 2.0  # matmul of 2-d operands: C-ordered, whatever theirs
    w = v.reshape((1, -1))[-1]
    v += x[:1, :1]
    return np.sum(w * x[0, 0])


def reshape_of_a_strided_vector_written(x):
    v = x[::2] * 1.0  # an elementwise result of a strided slice: C-contiguous
    u = x[1::2]  # a strided view of the argument: a vector of unknown layout
    w = u.reshape((2, 1))  # a view all the same (one axis of any stride)
    w += v.reshape((2, 1)) ** 2
    return np.sum(u * x[0]) + np.sum(x * x)


def reshape_of_stacked_vectors_written(x):
    v = np.where(x[:2] > 0.0, x[:2], np.hstack([x[2:3], x[3:4]]))  # hstack: a fresh array
    w = v.reshape(-1)
    w += np.max(w[:1], axis=0, keepdims=True)
    return np.sum(v * x[1:3]) + np.sum(np.vstack([x[:2], x[2:]]).reshape(-1) * x)


def aliased_nansum_written_in_place(x):
    v = np.nansum(x * 1.0, axis=1)  # an array: `v *=` writes into it, so into w too
    w = v
    v *= x[:, 0]
    return np.sum(w * x[:, 1]) + np.nanmean(x, axis=0)[0]


PROGRAMS = [
    (reshape_of_a_strided_vector_written, [_c((4,)) / 5.0 - 0.3]),
    (reshape_of_stacked_vectors_written, [np.array([0.4, -0.3, 0.8, 0.2])]),
    (aliased_nansum_written_in_place, [_c((2, 3)) / 7.0]),
    (reshape_of_a_product_of_strided_matrices, [_c((3, 3)) / 7.0]),
    (reshape_of_computed, [_c((2, 3)) / 7.0]),
    (ravel_of_computed_augmented, [_c((2, 2)) / 5.0]),
    (reshape_of_a_reduction, [_c((2, 3)) / 6.0]),
    (reshape_of_a_scalar_is_a_copy, [_c((3,)) / 4.0]),
    (row_of_a_computed_matrix, [_c((3,)) / 3.0]),
    (item_of_a_computed_vector, [_c((2, 3)) / 6.0]),
    (item_then_alias, [_c((2, 3)) / 6.0]),
    (reshape_in_a_loop, [_c((2, 2)) / 5.0]),
    (reshape_in_a_branch, [_c((2, 2)) / 5.0, np.array([0.5])]),
    (reshape_in_a_branch, [_c((2, 2)) / 5.0, np.array([0.1])]),
    (ravel_of_an_argument_in_a_while, [_c((2,)) / 3.0, _c((3,)) / 4.0]),
]


@pytest.mark.parametrize("fn,args", PROGRAMS, ids=[f"{p[0].__name__}-{i}" for i, p in enumerate(PROGRAMS)])
def test_decided_by_layout_facts(fn, args):
    _compiles_right(fn, *args)


@pytest.mark.parametrize("fn", [reshape_of_computed, ravel_of_computed_augmented, reshape_in_a_loop])
def test_a_fortran_ordered_argument_keeps_the_refusal(fn):
    """NumPy's reshape of a Fortran-ordered array's arithmetic is a copy: the variant for it
    knows no C-contiguity, and refuses as before; the C-ordered variant still compiles."""
    x = np.asfortranarray(_c((2, 2)) / 5.0)
    g = sg.grad(fn)
    with pytest.raises(sg.CompileError, match="memory layout"):
        g(x)
    assert_close(g(np.ascontiguousarray(x)), _numeric(fn, [np.ascontiguousarray(x)], 0), rtol=1e-5)


def test_a_write_in_a_branch_through_a_reshape_of_a_strided_vector():
    from tests.test_never_wrong_mutation import vector_view_in_branch_then_loop as f

    for x in (np.repeat([0.5, 0.3], 2)[::2], np.repeat([0.1, 0.05], 2)[::2]):  # written, or not
        assert not x.flags.c_contiguous  # (the variant for it knows no C-contiguity)
        expected = _numeric(f, [x.copy()], 0)
        assert_close(sg.grad(f)(x), expected, rtol=1e-5, atol=1e-7)
        _, t = sg.jvp(f, (x,), (np.array([1.0, -0.5]),))
        assert_close(t, np.sum(expected * [1.0, -0.5]), rtol=1e-5, atol=1e-7)


def test_a_write_in_one_branch_through_a_reshape_of_a_computed_value():
    from tests.test_never_wrong_mutation import undecided_write_in_one_branch as f

    for c in (0.0, 0.9):  # the write runs, or not
        _compiles_right(f, np.array([0.5]), np.array([0.3]), np.array([c]))
