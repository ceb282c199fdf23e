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
