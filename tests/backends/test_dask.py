"""Gradients of functions of dask arrays (Note [Array namespaces] in srcgrad.backend).

The same NumPy-written function is differentiated once and run on chunked dask
arrays: the gradient must be a lazy dask graph (nothing computed until
`.compute()`), and equal NumPy's gradient of the same data, which is itself
checked against central differences. Chunks are chosen so that every reduction,
the matmul and the loop cross chunk boundaries.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import import_source, numeric_grad

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

SOURCE = textwrap.dedent('''
    import numpy as np


    def logistic(w, X, y):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


    def reductions(x):
        col = np.sum(x, axis=0)                      # across row chunks
        row = np.mean(x ** 2, axis=1, keepdims=True)  # across column chunks
        return np.sum(col * col) + np.sum(row) + np.max(x) + np.sum(np.min(x, axis=0))


    def rnn(h, W, xs):
        for t in range(3):
            h = np.tanh(h @ W + xs[t])
        return np.sum(h ** 2)


    def shapes_and_views(x, v):
        y = np.transpose(x)[:, 1:] * 2.0
        z = np.concatenate([y, y], axis=1)
        return np.sum(np.reshape(z, (-1,)) ** 2) + np.sum(np.dot(x, v))
''')


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    yield from import_source(tmp_path_factory, "user_dask", SOURCE)


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _check(f, np_args, chunks, wrt):
    """sg.grad of f on dask arrays is lazy and equals the NumPy gradient (itself checked
    against central differences)."""
    g = sg.grad(f, wrt=wrt)
    expected = g(*np_args)
    expected = expected if isinstance(wrt, tuple) else (expected,)
    for i, e in zip(wrt if isinstance(wrt, tuple) else (wrt,), expected):
        np.testing.assert_allclose(e, numeric_grad(f, np_args, i), rtol=1e-5, atol=1e-7)
    dask_args = [da.from_array(a, chunks=c) if c is not None else a for a, c in zip(np_args, chunks)]
    got = g(*dask_args)
    got = got if isinstance(wrt, tuple) else (got,)
    for lazy, e in zip(got, expected):
        assert isinstance(lazy, da.Array), type(lazy)  # a graph, not a value
        np.testing.assert_allclose(lazy.compute(), e, rtol=1e-10, atol=1e-12)
    assert "out=" not in sg.source(g)  # dask arrays are never written in place
    return g


def test_logistic_regression_on_row_chunks(user):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 5))
    y = (rng.random(40) > 0.5) * 1.0
    w = rng.standard_normal(5) * 0.1
    _check(user.logistic, [w, X, y], [None, (10, 5), (10,)], wrt=(0, 1))


def test_reductions_across_chunks(user):
    x = np.random.default_rng(1).standard_normal((9, 8))
    _check(user.reductions, [x], [(4, 3)], wrt=0)


def test_loop_with_matmul(user):
    rng = np.random.default_rng(2)
    h, W, xs = rng.standard_normal((6, 4)), rng.standard_normal((4, 4)) * 0.5, rng.standard_normal((3, 6, 4))
    _check(user.rnn, [h, W, xs], [(2, 4), (2, 2), (1, 3, 4)], wrt=(0, 1, 2))


def test_transpose_concat_reshape_dot(user):
    rng = np.random.default_rng(3)
    x, v = rng.standard_normal((5, 4)), rng.standard_normal(4)
    _check(user.shapes_and_views, [x, v], [(2, 3), (3,)], wrt=(0, 1))


def test_nothing_is_computed_before_compute(user):
    """Compiling and calling the gradient runs no task of the input's graph; compute()
    runs each block."""
    calls = []

    def counted(block):
        calls.append(block.shape)
        return block

    X = da.from_array(np.ones((8, 3)), chunks=(4, 3)).map_blocks(counted, dtype=float,
                                                                 meta=np.empty((0, 0)))
    y = da.zeros((8,), chunks=4)
    grad = sg.grad(user.logistic, wrt=(0, 1))(np.zeros(3), X, y)
    assert all(isinstance(g, da.Array) for g in grad)
    assert calls == []
    dask.compute(*grad)
    assert sorted(calls)[:2] == [(4, 3), (4, 3)]
