"""Issue 29's second sweep (srcgrad/rules/table_sweep2.py and the compositions after it)
where tests/rules/test_compositions.py's nested second-order check cannot go: forms that
need the arguments' shapes (a shape-specialised first-order variant), the refused forms,
and the Array API."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from tests.conftest import numeric_grad

_R = np.random.default_rng(292)


def _out(y):
    return np.sum(np.sin(1.3 * y) + 0.5 * y * y)


def gradient_all_axes(x):
    gx, gy = np.gradient(x, 0.5)
    return _out(gx * gy)


def gradient_1d(x):
    return _out(np.gradient(x))


def windows_all_axes(x):
    return _out(np.lib.stride_tricks.sliding_window_view(x, (2, 3)))


def norms_of_a_matrix(x):
    return _out(np.linalg.norm(x, 2)) + _out(np.linalg.norm(x, "nuc")) + _out(
        np.linalg.norm(x, -np.inf))


def fftshift_all_axes(x):
    return _out(np.fft.fftshift(x) * x) + _out(np.fft.ifftshift(x) - x)


def put_repeated(a, b):
    c = a * 1.0
    np.put(c, [1, 4, 1], b)  # NumPy: the last write of index 1 wins
    return _out(c * a)


@pytest.mark.parametrize("fn,args", [
    (gradient_all_axes, [_R.standard_normal((4, 3))]),
    (gradient_1d, [_R.standard_normal(5)]),
    (windows_all_axes, [_R.standard_normal((3, 4))]),
    (norms_of_a_matrix, [_R.standard_normal((3, 4))]),
    (put_repeated, [_R.standard_normal((2, 3)), _R.standard_normal(3)]),
    (fftshift_all_axes, [_R.standard_normal((3, 4))]),
], ids=["gradient-all-axes", "gradient-1d", "windows-all-axes", "matrix-norms-no-axis",
        "put-repeated-index", "fftshift-all-axes"])
def test_shape_dependent_forms_match_differences(fn, args):
    wrt = tuple(range(len(args)))
    value, grads = sg.value_and_grad(fn, wrt=wrt)(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-13)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric_grad(fn, args, i), rtol=1e-6, atol=1e-8)


def gradient_coordinates(x):
    return np.sum(np.gradient(x, np.array([0.0, 0.5, 2.0])))


def correlate_bad_mode(a, v):
    return np.sum(np.correlate(a, v, "middle"))


def put_clip(a):
    c = a * 1.0
    np.put(c, [0, 9], a[:2], mode="clip")
    return np.sum(c)


def block_ragged(a):
    return np.sum(np.block([[a, a], a]))


def gradient_coordinates_given(x, coords):
    return np.sum(np.gradient(x, coords))


def test_gradient_with_sample_coordinates_raises_never_a_value():
    # (a spacing is reshaped to a number: constant coordinates fail there when
    # compiling; coordinates given as an argument fail the shape probe, so the shape-
    # generic trace refuses the axes' range)
    with pytest.raises(CompileError, match="reshape"):
        sg.grad(gradient_coordinates)(np.array([1.0, 2.0, 4.0]))
    with pytest.raises((CompileError, ValueError), match="reshape|range"):
        sg.grad(gradient_coordinates_given)(np.array([1.0, 2.0, 4.0]), np.array([0.0, 0.5, 2.0]))


@pytest.mark.parametrize("fn,args,message", [
    (correlate_bad_mode, (np.ones(3), np.ones(2)), "np.correlate` with a mode"),
    (put_clip, (np.ones(3),), "np.put` with mode"),
    (block_ragged, (np.ones(2),), "nested to different depths"),
], ids=["correlate-mode", "put-clip", "block-ragged"])
def test_an_unsupported_form_is_a_compile_error(fn, args, message):
    with pytest.raises(CompileError, match=message):
        sg.grad(fn)(*args)


def linalg_on_matrices(a):
    return (_out(np.linalg.matrix_norm(a, ord=2)) + _out(np.linalg.pinv(a))
            + _out(np.linalg.matrix_norm(a, ord="nuc")) + _out(np.linalg.matrix_norm(a, ord=1)))


def test_matrix_norms_and_pinv_on_array_api_strict_agree_with_numpy():
    xs = pytest.importorskip("array_api_strict")
    a = _R.standard_normal((2, 4, 3))
    expected = sg.grad(linalg_on_matrices)(a)
    np.testing.assert_allclose(expected, numeric_grad(linalg_on_matrices, [a], 0), rtol=1e-6,
                               atol=1e-8)
    got = sg.grad(linalg_on_matrices)(xs.asarray(a))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-10, atol=1e-12)


def i0_sum(x):
    return np.sum(np.i0(x))


_I0_GRAD = sg.grad(i0_sum)


def i0_grad_sum(x):
    return np.sum(_I0_GRAD(x))


def test_i0_second_derivative_at_zero_is_one_half():
    # i0(x) = 1 + x**2 / 4 + ...: i0''(0) = 1/2 (through |x| it would be abs's 0)
    x = np.array([0.0, 0.5, -2.0])
    second = sg.grad(i0_grad_sum)(x)
    assert second[0] == pytest.approx(0.5, abs=1e-12)
    np.testing.assert_allclose(second, numeric_grad(i0_grad_sum, [x], 0), rtol=1e-6, atol=1e-8)
