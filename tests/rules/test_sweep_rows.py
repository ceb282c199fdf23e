"""Issue 29's rows where their support ends: a clear error, never a silent value."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError


def svd_full(a):
    u, s, vh = np.linalg.svd(a)
    return np.sum(u) + np.sum(s)


def svd_square(a):
    u, s, vh = np.linalg.svd(a)
    return np.sum(u * u[0]) + np.sum(s)


def convolve_same(a, v):
    return np.sum(np.convolve(a, v, "same"))


def trapezoid_x(y, x):
    return np.trapezoid(y, x)


def nan_to_num_in_place(x):
    return np.sum(np.nan_to_num(x, copy=False))


def test_svd_full_matrices_of_a_wide_matrix_raises_at_backward():
    # NumPy's default full_matrices=True gives a 2x2 U but a 3x3 Vh whose last row is
    # not unique: its derivative is refused where it is taken
    with pytest.raises(ValueError, match="full_matrices=False"):
        sg.grad(svd_full)(np.arange(6.0).reshape(2, 3) ** 1.5)


def test_svd_full_matrices_of_a_square_matrix_is_differentiated():
    a = np.array([[2.0, 0.3, -0.5], [0.1, 1.0, 0.4], [-0.2, 0.6, 3.0]])
    g = sg.grad(svd_square)(a)
    eps, e = 1e-6, np.zeros_like(a)
    e[1, 2] = eps
    assert np.isclose(g[1, 2], (svd_square(a + e) - svd_square(a - e)) / (2 * eps), atol=1e-6)


@pytest.mark.parametrize("fn,args", [
    (convolve_same, (np.ones(4), np.ones(2))),  # mode='full' only
    (trapezoid_x, (np.ones(4), np.arange(4.0))),  # sample points x are not supported
    (nan_to_num_in_place, (np.ones(3),)),  # copy=False writes in place
], ids=["convolve-same", "trapezoid-x", "nan_to_num-copy"])
def test_an_unsupported_call_form_is_a_compile_error(fn, args):
    with pytest.raises(CompileError, match="does not fit its supported signature"):
        sg.grad(fn)(*args)


# ---------------------------------------------------------------- the fuzzer's spellings
def _sweep_forms():
    from tests.fuzz.generator import SWEEP_REDUCE_ALL, SWEEP_REDUCE_AXIS, sweep_unary

    out = []
    for shape in ((3,), (3, 3), (4, 3)):
        out += [(shape, form) for form in sweep_unary("{0}", shape)]
    out += [((3, 4), form.format(e="{0}")) for form in SWEEP_REDUCE_ALL]
    out += [((3, 4), form.format(e="{0}", k=1)) for form in SWEEP_REDUCE_AXIS]
    return out


SWEEP_FORMS = _sweep_forms()


@pytest.mark.parametrize("shape,form", SWEEP_FORMS, ids=[f"{s}-{f}" for s, f in SWEEP_FORMS])
def test_every_fuzzer_spelling_compiles_and_matches_differences(tmp_path, shape, form):
    """Each spelling the fuzzer draws for the sweep rows, as user code (x + 0.1 * x * x so
    that a linear row still has a second derivative), against central differences."""
    import importlib.util

    from tests.conftest import numeric_grad

    body = form.format("(x + 0.1 * x * x)")
    path = tmp_path / "sweep_form.py"
    path.write_text(f"import numpy as np\n\n\ndef f(x):\n    return np.sum(np.sin({body}))\n")
    spec = importlib.util.spec_from_file_location("sweep_form", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.random.default_rng(11).uniform(0.2, 0.9, shape) * np.array([1.0, -1.0] * 6)[:shape[-1]]
    np.testing.assert_allclose(sg.grad(module.f)(x), numeric_grad(module.f, [x], 0),
                               rtol=1e-5, atol=1e-6, err_msg=form)


def boolean_results(x):
    y = np.where(np.isreal(x), x, 0.0) + np.where(np.iscomplex(x), 0.0, x) + np.fix(x) * x
    y = y + np.where(np.isposinf(x), 0.0, x) + np.where(np.isneginf(x), 0.0, x)
    y = y + np.where(np.isclose(x, 0.5), 0.0, x) + np.where(np.isclose(x, x, equal_nan=True), x, 0.0)
    return np.sum(y * y) + np.where(np.allclose(x, 0.5 * x), 1.0, 0.0) * np.sum(x)


def test_the_boolean_rows_array_api_spellings_agree_with_numpy():
    xs = pytest.importorskip("array_api_strict")
    x = np.array([0.5, -1.5, 2.25, 0.5000000001])
    expected = sg.grad(boolean_results)(x)
    np.testing.assert_allclose(np.asarray(sg.grad(boolean_results)(xs.asarray(x))), expected)
    from tests.conftest import numeric_grad

    np.testing.assert_allclose(expected, numeric_grad(boolean_results, [x], 0), rtol=1e-6)
