"""max and min along one axis for numba (Note [Reductions along an axis for numba] in
srcgrad.codegen.numba_reductions): the written-out functions equal NumPy's reductions
(values, nans, dtype, shape, its error on an empty axis) as plain Python and compiled by
numba; the rewrite takes exactly the literal-axis forms; and a softmax cross-entropy and
a gradient through max/min now compile under backend="numba" (they ran NumPy's code),
equal to NumPy's gradient and to central differences."""

from __future__ import annotations

import ast

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.codegen import numba_reductions

AXES = [(axis, keep) for axis in (-3, -2, -1, 0, 1, 2) for keep in (False, True)]


def _arrays():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 5))
    with_nan = x.copy()
    with_nan[1, 2, :] = np.nan  # a whole row along the last axis
    with_nan[0, 0, 3] = np.nan  # one value: its row along each axis is nan
    strided = rng.standard_normal((6, 4, 10))[::2, :, ::2]  # not contiguous
    ints = rng.integers(-50, 50, (3, 4, 5))
    return [x, with_nan, strided, ints]


def _function(kind, axis, keep, compiled=False):
    name = numba_reductions.along_axis(ast.parse(
        f"x.{kind}(axis={axis}, keepdims={keep})", mode="eval").body).func.id
    namespace = {"xp": np}
    exec(numba_reductions._reduction(kind, axis, keep), namespace)
    fn = namespace[name]
    if compiled:
        numba = pytest.importorskip("numba")
        fn = numba.njit(fn)
    return fn


def _check(fn, kind, x, axis, keep):
    want = getattr(np, kind)(x, axis=axis, keepdims=keep)
    got = fn(x)
    assert np.shape(got) == want.shape and np.asarray(got).dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # nan where NumPy's is nan, same values elsewhere


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("axis,keep", AXES)
def test_the_written_out_reduction_is_numpys(kind, axis, keep):
    fn = _function(kind, axis, keep)
    for x in _arrays():
        _check(fn, kind, x, axis, keep)
    for x in (np.array([2.0, -1.0, 7.0]), np.array([[np.nan, 1.0], [1.0, 2.0]])):
        if -x.ndim <= axis < x.ndim:
            _check(fn, kind, x, axis, keep)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_an_empty_axis_raises_numpys_error(kind):
    x = np.ones((2, 0, 3))
    with pytest.raises(ValueError) as want:
        getattr(np, kind)(x, axis=1)
    with pytest.raises(ValueError) as got:
        _function(kind, 1, False)(x)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("axis,keep", [(-1, True), (1, False)])
def test_the_reduction_compiled_by_numba_is_numpys(kind, axis, keep):
    fn = _function(kind, axis, keep, compiled=True)
    for x in _arrays():
        _check(fn, kind, x, axis, keep)


@pytest.mark.parametrize("source,rewritten", [
    ("z.max(axis=1, keepdims=True)", "reduce_max_axis1_keepdims(z)"),
    ("z.min(axis=-2)", "reduce_min_axism2(z)"),
    ("xp.max(z + 1, axis=0, keepdims=False)", "reduce_max_axis0(z + 1)"),
    ("xp.amin(z, axis=2, keepdims=True)", "reduce_min_axis2_keepdims(z)"),
])
def test_literal_axis_forms_are_rewritten(source, rewritten):
    got = numba_reductions.along_axis(ast.parse(source, mode="eval").body)
    assert ast.unparse(got) == rewritten


@pytest.mark.parametrize("source", [
    "z.max()", "z.max(axis=(0, 1))", "z.max(axis=k)", "xp.max(z, axis=1, out=o)",
    "z.max(axis=1, keepdims=flag)", "z.amax(axis=1)", "np.max(z, axis=1)", "xp.maximum(z, axis=1)",
])
def test_other_forms_stay(source):
    assert numba_reductions.along_axis(ast.parse(source, mode="eval").body) is None


def xent(logits, Y):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return np.mean(-np.sum(Y * logp, axis=1))


def through_max_and_min(x):
    return (np.sum(np.max(x, axis=-1) ** 2) + np.sum(x.min(axis=0) * 3.0)
            + np.sum(np.amax(x, axis=1, keepdims=True) * x))


def _central(f, args, i, h=1e-6):
    x = args[i]
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        up, down = [a.copy() for a in args], [a.copy() for a in args]
        up[i][k] += h
        down[i][k] -= h
        g[k] = (f(*up) - f(*down)) / (2 * h)
    return g


@pytest.mark.parametrize("f,args", [
    (xent, (np.random.default_rng(0).standard_normal((6, 5)), np.eye(5)[[0, 2, 4, 1, 1, 3]])),
    (through_max_and_min, (np.random.default_rng(1).standard_normal((3, 4, 5)),)),
])
def test_gradients_through_max_compile_under_numba(f, args, monkeypatch):
    pytest.importorskip("numba")
    from srcgrad.pipeline import numba_variants

    monkeypatch.setattr(numba_variants, "SLOWER", float("inf"))  # the arithmetic, not speed
    g = sg.grad(f, wrt=0, backend="numba")
    got = g(*args)
    assert "numba (compiled" in sg.explain(g).splitlines()[-1], sg.explain(g)
    np.testing.assert_allclose(got, sg.grad(f, wrt=0)(*args), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, _central(f, args, 0), rtol=1e-6, atol=1e-8)
