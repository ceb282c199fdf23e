"""`x[i] op= f(...)` where f writes into x (fuzz seed 811682; srcgrad.frontend.inplace
aug_assign). Python reads the item `x[i]` before it runs the right side: where the item is
a view (`x[0]` of a matrix) NumPy's in-place op then sees what the right side wrote, where
it is a copy (`x[0]` of a vector: a NumPy scalar) the write is lost under the store. An
argument's rank decides it at run time, so compiled code selects between the two."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


def _writes_a_view(a):
    a[0:1] = 0.1
    return a


def _writes_through(a, b):
    for _ in b:
        a[0:1] = a[0:1] * 0.5 + 0.2
    return 1.5


def row_plus_a_view_the_call_wrote(x, y):
    x[0] += _writes_a_view(x.ravel()[:1])  # x[0] a row: it sees the 0.1 the call wrote
    return np.sum(x * y)


def item_plus_what_the_call_returns(x, y):
    x[0] += _writes_through(x[0:1], y)  # a matrix's row sees the write, a vector's item not
    return np.sum(np.sin(x) * x)


def in_a_loop(x, y):
    for _ in range(len(y)):
        y += x.ravel()[:1]
        x[0] += _writes_a_view(x.ravel()[:1]) * y[0]
    return np.sum(y * y) + np.sum(x)


CASES = [
    (row_plus_a_view_the_call_wrote, [(2, 4, 3), (2, 4, 3)]),
    (item_plus_what_the_call_returns, [(5,), (3,)]),
    (item_plus_what_the_call_returns, [(3, 4), (3,)]),
    (in_a_loop, [(2, 3), (3,)]),
]


def _data(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.2, 1.0, s) for s in shapes]


@pytest.mark.parametrize("f,shapes", CASES, ids=lambda c: getattr(c, "__name__", str(c)))
def test_the_item_read_is_numpys_and_the_gradient_is_the_differences(f, shapes):
    for seed in (0, 1):  # the second call reuses the compiled code on other data
        args = _data(shapes, seed)
        value, grad = sg.value_and_grad(f, wrt=(0, 1))(*[a.copy() for a in args])
        assert_close(value, f(*[a.copy() for a in args]))
        for k in (0, 1):
            expected = numeric_grad(lambda *a: f(*[v.copy() for v in a]), args, k)
            assert_close(grad[k], expected, rtol=1e-5, atol=1e-7)
            t = np.linspace(0.5, 1.5, args[k].size).reshape(args[k].shape)
            tangents = tuple(t if j == k else np.zeros_like(a) for j, a in enumerate(args))
            _, t_out = sg.jvp(f, tuple(a.copy() for a in args), tangents)
            assert_close(t_out, np.sum(expected * t), rtol=1e-5, atol=1e-7)
