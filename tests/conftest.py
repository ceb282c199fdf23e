"""Shared test helpers: an isolated cache directory and finite differences."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("SRCGRAD_CACHE_DIR", str(tmp_path_factory.mktemp("srcgrad-cache")))
    yield
    mp.undo()


def numeric_grad(f, args, index, eps=1e-6):
    """Central-difference gradient of scalar f w.r.t. args[index] (float64)."""
    args = list(args)
    x = np.array(args[index], dtype=np.float64)
    grad = np.zeros(x.shape)  # C-ordered, so `flat` is a view whatever x's layout
    flat = grad.reshape(-1)
    for i in range(x.size):
        xp_, xm = x.copy().reshape(-1), x.copy().reshape(-1)
        xp_[i] += eps
        xm[i] -= eps
        ap, am = list(args), list(args)
        ap[index], am[index] = xp_.reshape(x.shape), xm.reshape(x.shape)
        if x.ndim == 0 and not isinstance(args[index], np.ndarray):
            ap[index], am[index] = float(xp_[0]), float(xm[0])
        flat[i] = (float(f(*ap)) - float(f(*am))) / (2 * eps)
    return grad


def numeric_hessian_of_grad(f, x, eps=1e-4):
    """Central differences of numeric_grad: f's Hessian, shaped x.shape + x.shape."""
    rows = []
    for i in range(x.size):
        d = np.zeros(x.size)
        d[i] = eps
        d = d.reshape(x.shape)
        rows.append((numeric_grad(f, [x + d], 0, eps=eps)
                     - numeric_grad(f, [x - d], 0, eps=eps)).reshape(-1) / (2 * eps))
    return np.array(rows).reshape(x.shape + x.shape)


def assert_first_and_second_order(f, x):
    """f's value (sg.value_and_grad), gradient, Hessian and a JVP against NumPy's value
    and central differences: what a NumPy calling form must match."""
    import pytest

    import srcgrad as sg

    value, grad = sg.value_and_grad(f)(x)
    assert value == pytest.approx(f(x), rel=1e-12)
    np.testing.assert_allclose(grad, numeric_grad(f, [x], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(sg.hessian(f)(x), numeric_hessian_of_grad(f, x), rtol=1e-4, atol=1e-5)
    t = np.cos(np.arange(x.size)).reshape(x.shape)
    _, tangent = sg.jvp(f, (x,), (t,))
    assert tangent == pytest.approx(np.sum(numeric_grad(f, [x], 0) * t), rel=1e-6)


def assert_close(actual, expected, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(np.asarray(actual, dtype=float), np.asarray(expected, dtype=float),
                               rtol=rtol, atol=atol)


def import_source(tmp_path_factory, name: str, source: str):
    """Yield a module `name` written from `source` into a temp dir and imported (srcgrad
    reads the functions' source files); for module-scoped fixtures."""
    import importlib
    import sys

    path = tmp_path_factory.mktemp(name) / f"{name}.py"
    path.write_text(source)
    sys.path.insert(0, str(path.parent))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(path.parent))
