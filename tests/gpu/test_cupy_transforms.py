"""The transforms the README says run on CuPy, on CuPy arrays: sg.grad, sg.value_and_grad,
sg.vjp and sg.jvp of NumPy-written programs (straight-line, a `for` loop over a range, a
data-dependent `while`, an in-place write, a helper call), each against central
differences computed by NumPy on the same values. Skipped where CuPy or a CUDA device is
missing (`pip install 'srcgrad[cuda12]'`), as tests/gpu/test_cupy.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.cuda import cupy_or_skip

cp = cupy_or_skip()

import srcgrad as sg  # noqa: E402
from tests.conftest import import_source, numeric_grad  # noqa: E402

SOURCE = '''
import numpy as np


def straight(x, W):
    h = np.tanh(x @ W)
    return np.sum(h * h) + np.mean(np.exp(-x * x))


def looped(x, W):
    h = x
    for _ in range(3):
        h = np.tanh(h @ W) + 0.5 * h
    return np.sum(h ** 2)


def until(x, W):
    s = np.sum(x * x)
    k = 0
    while s > 1e-3 and k < 20:
        x = 0.5 * np.sin(x @ W)
        s = np.sum(x * x)
        k += 1
    return s + np.sum(W * W)


def written(x, W):
    y = x @ W
    y[0] *= 3.0
    y[:, 1] += np.sum(x)
    return np.sum(np.cos(y))


def _layer(h, W):
    return np.maximum(h @ W, 0.1 * (h @ W))


def helper(x, W):
    return np.sum(_layer(_layer(x, W), W.T @ W))


def vector(x, W):
    return np.tanh(x @ W).sum(axis=0)
'''

SCALAR = ("straight", "looped", "until", "written", "helper")


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    yield from import_source(tmp_path_factory, "cupy_transforms_user", SOURCE)


@pytest.fixture(scope="module")
def values():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 3)), 0.5 * rng.standard_normal((3, 3))


def _host(a):
    return cp.asnumpy(a) if isinstance(a, cp.ndarray) else np.asarray(a)


def _expected(f, values, i):
    return numeric_grad(f, list(values), i)


@pytest.mark.parametrize("name", SCALAR)
def test_grad_on_cupy(user, values, name):
    f = getattr(user, name)
    gx, gW = sg.grad(f, wrt=(0, 1))(*[cp.asarray(v) for v in values])
    assert isinstance(gx, cp.ndarray) and isinstance(gW, cp.ndarray)
    np.testing.assert_allclose(_host(gx), _expected(f, values, 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(_host(gW), _expected(f, values, 1), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", SCALAR)
def test_value_and_grad_on_cupy(user, values, name):
    f = getattr(user, name)
    value, gW = sg.value_and_grad(f, wrt=1)(*[cp.asarray(v) for v in values])
    np.testing.assert_allclose(float(value), f(*values), rtol=1e-12)
    np.testing.assert_allclose(_host(gW), _expected(f, values, 1), rtol=1e-6, atol=1e-8)


def test_vjp_on_cupy(user, values):
    x, W = values
    out, vjp_fn = sg.vjp(user.vector, cp.asarray(x), cp.asarray(W))
    np.testing.assert_allclose(_host(out), user.vector(x, W), rtol=1e-12)
    ct = np.array([1.0, -2.0, 0.5])
    gx, gW = vjp_fn(cp.asarray(ct))
    assert isinstance(gW, cp.ndarray)

    def contracted(x, W):
        return float(np.dot(user.vector(x, W), ct))

    np.testing.assert_allclose(_host(gx), numeric_grad(contracted, [x, W], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(_host(gW), numeric_grad(contracted, [x, W], 1), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", SCALAR + ("vector",))
def test_jvp_on_cupy(user, values, name):
    f = getattr(user, name)
    x, W = values
    rng = np.random.default_rng(1)
    tx, tW = rng.standard_normal(x.shape), rng.standard_normal(W.shape)
    out, tangent = sg.jvp(f, (cp.asarray(x), cp.asarray(W)), (cp.asarray(tx), cp.asarray(tW)))
    eps = 1e-6
    ahead, behind = f(x + eps * tx, W + eps * tW), f(x - eps * tx, W - eps * tW)
    expected = (np.asarray(ahead) - np.asarray(behind)) / (2 * eps)
    np.testing.assert_allclose(_host(out), f(x, W), rtol=1e-12)
    np.testing.assert_allclose(_host(tangent), expected, rtol=1e-6, atol=1e-8)


def test_same_gradient_on_numpy_and_cupy(user, values):
    g = sg.grad(user.looped, wrt=1)
    on_cpu = g(*values)
    on_gpu = g(*[cp.asarray(v) for v in values])
    np.testing.assert_allclose(_host(on_gpu), on_cpu, rtol=1e-10)
