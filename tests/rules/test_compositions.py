"""The NumPy functions written as compositions of rows (Note [Compositions] in
srcgrad/rules/compositions.py), each through the compiler on a few calls:

* the value is NumPy's own (the same operations in the same order);
* reverse mode, first and second order (sg.grad of <v, sg.grad f>), against central
  differences in float64;
* forward mode, first and second order (sg.jvp of sg.jvp f), against central
  differences along the tangent.

Each `f_*` sums a nonlinear function of the composition's result, so second
derivatives exercise the composition's own (a sum of a linear map would not).
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from tests.conftest import numeric_grad


def _out(y):
    return np.sum(np.sin(1.3 * y) + 0.5 * y * y)


def f_matrix_power_5(a): return _out(np.linalg.matrix_power(a, 5))        # noqa: E704
def f_matrix_power_4(a): return _out(np.linalg.matrix_power(a, 4))        # noqa: E704
def f_matrix_power_3(a): return _out(np.linalg.matrix_power(a, 3))        # noqa: E704
def f_matrix_power_1(a): return _out(np.linalg.matrix_power(a, 1))        # noqa: E704
def f_matrix_power_0(a): return _out(np.linalg.matrix_power(a, 0) * a)    # noqa: E704
def f_matrix_power_neg2(a): return _out(np.linalg.matrix_power(a, -2))    # noqa: E704
def f_linspace(a, b): return _out(np.linspace(a, b, 7))                    # noqa: E704
def f_linspace_open(a, b): return _out(np.linspace(a, b, 4, endpoint=False))  # noqa: E704
def f_linspace_step(a, b):                                                 # noqa: E302
    y, step = np.linspace(a, b, 5, retstep=True)
    return _out(y) + _out(step)
def f_linspace_one(a, b): return _out(np.linspace(a, b, 1))                # noqa: E302, E704
def f_meshgrid(x, y):                                                      # noqa: E302
    X, Y = np.meshgrid(x, y)
    return _out(X * Y * Y)
def f_meshgrid_ij(x, y):                                                   # noqa: E302
    X, Y = np.meshgrid(x, y, indexing="ij")
    return _out(X - Y * X)
def f_meshgrid_sparse(x, y):                                               # noqa: E302
    X, Y = np.meshgrid(x, y, sparse=True)
    return _out(X * Y)
def f_cov(m): return _out(np.cov(m))                                       # noqa: E302, E704
def f_cov_xy(x, y): return _out(np.cov(x, y))                              # noqa: E704
def f_cov_cols(m): return _out(np.cov(m, rowvar=False, bias=True))        # noqa: E704
def f_cov_ddof(m): return _out(np.cov(m, ddof=2))                          # noqa: E704
def f_corrcoef(m): return _out(np.corrcoef(m))                             # noqa: E704
def f_corrcoef_xy(x, y): return _out(np.corrcoef(x, y))                    # noqa: E704
def f_quantile(x): return _out(np.quantile(x, 0.3))                        # noqa: E704
def f_quantile_axis(x): return _out(np.quantile(x, [0.1, 0.75], axis=1))   # noqa: E704
def f_quantile_keep(x): return _out(np.quantile(x, 0.6, axis=0, keepdims=True))  # noqa: E704
def f_percentile(x): return _out(np.percentile(x, 40.0, axis=-1))          # noqa: E704
def f_median(x): return _out(np.median(x))                                 # noqa: E704
def f_median_axis(x): return _out(np.median(x, axis=0))                    # noqa: E704
def f_median_keep(x): return _out(np.median(x, axis=1, keepdims=True))     # noqa: E704
def f_append(x, y): return _out(np.append(x, y))                           # noqa: E704
def f_append_axis(x, y): return _out(np.append(x, y, axis=0))              # noqa: E704
def f_select(x, y): return _out(np.select([x > 0.3, y < 0.0], [x * y, y], 0.5))  # noqa: E704
def f_array_split(x):                                                     # noqa: E302
    a, b, c = np.array_split(x, 3, axis=1)
    return _out(a) + _out(b * b) + _out(c * 3.0)
def f_array_split_points(x):                                              # noqa: E302
    a, b, c = np.array_split(x, [1, 3])
    return _out(a) + _out(b * b) + _out(c * 3.0)
def f_hsplit(x):                                                          # noqa: E302
    a, b = np.hsplit(x, 2)
    return _out(a * b)
def f_vsplit(x):                                                          # noqa: E302
    a, b = np.vsplit(x, [1])
    return _out(a) + _out(b * b)
def f_dsplit(x):                                                          # noqa: E302
    a, b = np.dsplit(x, 2)
    return _out(a - b * a)
def f_interp(x, fp): return _out(np.interp(x, np.array([-1.0, -0.2, 0.5, 1.3]), fp))  # noqa: E704
def f_interp_knots(x, k): return _out(np.interp(x, np.cumsum(np.exp(k)), np.sin(k)))  # noqa: E704
def f_real_imag(x): return _out(np.real(x) * x + np.imag(x))               # noqa: E704
def f_rot90(x): return _out(np.rot90(x) * np.rot90(x, -1, axes=(1, 0)))  # noqa: E704
def f_rot90_k(x): return _out(np.rot90(x, 2) * x) + _out(np.rot90(x, 3, axes=(0, 2)))  # noqa: E704
def f_rollaxis(x): return _out(np.rollaxis(x, 2) * np.rollaxis(x, -1, 1).transpose(1, 0, 2))  # noqa: E704
def f_rollaxis_end(x): return _out(np.rollaxis(x, 0, 3) * 2.0)               # noqa: E704
def f_logspace(a, b): return _out(np.logspace(a, b, 4, base=2.0))          # noqa: E704
def f_geomspace(a, b): return _out(np.geomspace(a, b, 5))                  # noqa: E704
def f_geomspace_open(a, b): return _out(np.geomspace(a, b, 3, endpoint=False))  # noqa: E704
def f_gradient(x):                                                        # noqa: E302
    gx, gy = np.gradient(x, 0.5, axis=(0, -1), edge_order=2)
    return _out(gx * gy) + _out(np.gradient(x, axis=1))
def f_gradient_1d(x, h): return _out(np.gradient(x, h, axis=0))                   # noqa: E302, E704
def f_divmod(x, y):                                                       # noqa: E302
    q, r = np.divmod(x, y)
    return _out(q * r + r)
def f_frexp(x):                                                           # noqa: E302
    m, e = np.frexp(x)
    return _out(m * e + m)
def f_sliding_window(x): return _out(np.lib.stride_tricks.sliding_window_view(x, (2, 2), axis=(0, 1)))  # noqa: E302, E704
def f_sliding_window_axis(x):                                             # noqa: E302
    return _out(np.lib.stride_tricks.sliding_window_view(x, 3, axis=-1))
def f_correlate(a, v):                                                    # noqa: E302
    return _out(np.correlate(a, v)) + _out(np.correlate(a, v, "same")) + _out(
        np.correlate(v, a, "full")) + _out(np.correlate(v, a, "same"))
def f_matrix_norms(x):                                                    # noqa: E302
    ax = (0, 1)  # (an axis pair: a 2-d x's matrix norm needs its shape, unknown to nested code)
    return (_out(np.linalg.norm(x, 2, ax)) + _out(np.linalg.norm(x, "nuc", ax)) + _out(
        np.linalg.norm(x, -2, ax)) + _out(np.linalg.norm(x, np.inf, ax)) + _out(
        np.linalg.norm(x, 1, ax)) + _out(np.linalg.norm(x, -1, ax)))
def f_matrix_norm_axes(x):                                                # noqa: E302
    return _out(np.linalg.matrix_norm(x, ord=2)) + _out(
        np.linalg.norm(x, "nuc", axis=(0, 2), keepdims=True)) + _out(np.linalg.norm(x, -np.inf, axis=(2, 1)))
def f_cond(x):                                                            # noqa: E302
    return (_out(np.linalg.cond(x)) + _out(np.linalg.cond(x, -2)) + _out(np.linalg.cond(x, 1))
            + _out(np.linalg.cond(x, "fro")))
def f_lstsq(a, b):                                                        # noqa: E302
    x, res, rank, s = np.linalg.lstsq(a, b)
    return _out(x) + _out(res) + _out(s)
def f_lstsq_wide(a, b):                                                   # noqa: E302
    x, res, rank, s = np.linalg.lstsq(a, b)
    return _out(x) + _out(s)
def f_copyto(a, b):                                                       # noqa: E302
    c = a * 1.0
    np.copyto(c, b * b)
    d = a * 2.0
    np.copyto(d, b, where=a > 0)
    return _out(c * a) + _out(d)
def f_putmask(a, b):                                                      # noqa: E302
    c = a * 1.0
    np.putmask(c, a > 0, b[:2] * b[:2])
    return _out(c * a)
def f_place(a, b):                                                        # noqa: E302
    c = a * 1.0
    np.place(c, a > 0, b[:2] * 3.0)
    return _out(c * a)
def f_put(a, b):                                                          # noqa: E302
    c = a * 1.0
    np.put(c, [0, 3], b[1:3] ** 2)
    return _out(c * a)
def f_ptp(x): return _out(np.ptp(x, axis=1) * np.ptp(x))                 # noqa: E302, E704
def f_fmax_fmin(x, y): return _out(np.fmax(x, y) * np.fmin(x, y))          # noqa: E704
def f_nan_stats(x):                                                       # noqa: E302
    return (_out(np.nanvar(x, axis=0)) + _out(np.nanstd(x, ddof=1)) + _out(np.nanprod(x, axis=1))
            + _out(np.nancumsum(x, axis=1)) + _out(np.nancumprod(x)))
def f_cumulative(x):                                                      # noqa: E302
    return _out(np.cumulative_sum(x, axis=0, include_initial=True)) + _out(
        np.cumulative_prod(x, axis=1)) + _out(np.cumulative_sum(x[0], include_initial=True))
def f_vector_norm(x):                                                     # noqa: E302
    return _out(np.linalg.vector_norm(x)) + _out(np.linalg.vector_norm(x, axis=1, ord=3)) + _out(
        np.linalg.vector_norm(x, keepdims=True))
def f_vecdot(x, y):                                                       # noqa: E302
    return _out(np.vecdot(x, y)) + _out(np.linalg.vecdot(x, y, axis=0)) + _out(
        np.matvec(x[None] * y[:, None], y)) + _out(np.vecmat(y, x[None] * y[:, None]))
def f_linalg_aliases(x, y):                                               # noqa: E302
    return (_out(np.linalg.outer(x[0], y[1])) + _out(np.linalg.trace(x * y, offset=1))
            + _out(np.linalg.diagonal(x @ y.T)) + _out(np.linalg.tensordot(x, y, axes=1 + 1))
            + _out(np.linalg.cross(x, y)))
def f_diagflat(x): return _out(np.diagflat(x, 1) * 2.0)                    # noqa: E302, E704
def f_polys(p, q): return _out(np.polymul(p, q)) + _out(np.polyder(p)) + _out(np.polyder(q, 2))  # noqa: E704


def f_median_all_keep(x): return _out(np.median(x, keepdims=True) * x)    # noqa: E302, E704
def f_small_aliases(x, y):                                                # noqa: E302
    return (_out(np.ascontiguousarray(x) * np.asfortranarray(y))
            + _out(np.asarray_chkfinite(x)) + _out(np.float_power(x * x + 1.0, y)))
def f_average(x, w):                                                      # noqa: E302
    # (weights along an int axis need the ranks: a shape-specialised variant only, which
    # tests/test_no_silent_constants.py checks to first order)
    return _out(np.average(x, axis=1)) + _out(np.average(x * w, weights=x * x + w))
def f_fftshift(x):                                                        # noqa: E302
    return _out(np.fft.fftshift(x, axes=(0, 1)) * x) + _out(np.fft.ifftshift(x, axes=1) * x)
def f_vander(x): return _out(np.vander(x) * 0.5) + _out(np.vander(x, 2, increasing=True))  # noqa: E302, E704
def f_broadcast_arrays(x, y):                                             # noqa: E302
    a, b = np.broadcast_arrays(x, y)
    return _out(a * b * b)
def f_nan_order(x):                                                       # noqa: E302
    return (_out(np.nanmedian(x, axis=1)) + _out(np.nanquantile(x, [0.2, 0.7], axis=0))
            + _out(np.nanpercentile(x, 35.0)) + _out(np.nanmedian(x, keepdims=True))
            + _out(np.nanquantile(x, 0.4, axis=1, keepdims=True)))


def f_i0(x): return _out(np.i0(x) * 0.01)                                 # noqa: E302, E704
def f_block(a, b): return _out(np.block([[a, b], [b, a]]))                # noqa: E302, E704
def f_block_mixed(a, b): return _out(np.block([[a, b[:, None]], [b[None, :2], 0.5]]))  # noqa: E704




_R = np.random.default_rng(29)
_WC = _R.standard_normal((2, 3, 3)) * 0.3 + np.eye(3)
CASES = [
    (f_matrix_power_5, [_WC]), (f_matrix_power_4, [_WC[0]]), (f_matrix_power_3, [_WC]),
    (f_matrix_power_1, [_WC[1]]), (f_matrix_power_0, [_WC]), (f_matrix_power_neg2, [_WC]),
    (f_linspace, [_R.standard_normal(3), _R.standard_normal((2, 1))]),
    (f_linspace_open, [np.array(0.3), np.array(-1.2)]),
    (f_linspace_step, [_R.standard_normal(2), _R.standard_normal(2)]),
    (f_linspace_one, [np.array(0.5), np.array(2.0)]),
    (f_meshgrid, [_R.standard_normal(3), _R.standard_normal(4)]),
    (f_meshgrid_ij, [_R.standard_normal(3), _R.standard_normal(2)]),
    (f_meshgrid_sparse, [_R.standard_normal(3), _R.standard_normal(2)]),
    (f_cov, [_R.standard_normal((3, 5))]), (f_cov_xy, [_R.standard_normal(5), _R.standard_normal(5)]),
    (f_cov_cols, [_R.standard_normal((6, 2))]), (f_cov_ddof, [_R.standard_normal((2, 6))]),
    (f_corrcoef, [_R.standard_normal((3, 5))]),
    (f_corrcoef_xy, [_R.standard_normal(6), _R.standard_normal(6)]),
    (f_quantile, [_R.standard_normal((3, 4))]), (f_quantile_axis, [_R.standard_normal((3, 5))]),
    (f_quantile_keep, [_R.standard_normal((4, 3))]), (f_percentile, [_R.standard_normal((2, 6))]),
    (f_median, [_R.standard_normal((3, 4))]), (f_median_axis, [_R.standard_normal((5, 3))]),
    (f_median_keep, [_R.standard_normal((2, 5))]),
    (f_append, [_R.standard_normal((2, 2)), _R.standard_normal(3)]),
    (f_append_axis, [_R.standard_normal((2, 3)), _R.standard_normal((1, 3))]),
    (f_select, [_R.standard_normal((3, 4)), _R.standard_normal(4)]),
    (f_real_imag, [_R.standard_normal(4)]),
    (f_array_split, [_R.standard_normal((2, 7))]), (f_array_split_points, [_R.standard_normal(5)]),
    (f_hsplit, [_R.standard_normal((3, 4))]), (f_vsplit, [_R.standard_normal((3, 2))]),
    (f_dsplit, [_R.standard_normal((2, 1, 4))]),
    (f_interp, [np.array([[-1.5, -0.7, 0.1], [0.6, 1.1, 2.0]]), _R.standard_normal(4)]),
    (f_interp_knots, [np.array([0.9, 1.7, 2.4, 3.1, 5.0]), _R.standard_normal(4) * 0.3]),
    (f_interp, [np.array(0.2), _R.standard_normal(4)]),
    (f_rot90, [_R.standard_normal((3, 4))]), (f_rot90_k, [_R.standard_normal((2, 3, 2))]),
    (f_rollaxis, [_R.standard_normal((2, 3, 4))]), (f_rollaxis_end, [_R.standard_normal((2, 3, 4))]),
    (f_logspace, [_R.standard_normal(2), _R.standard_normal(2)]),
    (f_geomspace, [np.array(0.5), np.array(2.0)]),
    (f_geomspace_open, [np.array([-0.5, 1.5]), np.array([-2.0, 0.3])]),
    (f_gradient, [_R.standard_normal((4, 5))]),
    (f_gradient_1d, [_R.standard_normal(5), np.array(0.7)]),
    (f_divmod, [_R.standard_normal((2, 4)) * 3, _R.uniform(0.5, 1.0, 4)]),
    (f_frexp, [_R.standard_normal((2, 3)) * 3]),
    (f_sliding_window, [_R.standard_normal((3, 4))]),
    (f_sliding_window_axis, [_R.standard_normal((2, 5))]),
    (f_correlate, [_R.standard_normal(5), _R.standard_normal(3)]),
    (f_correlate, [_R.standard_normal(4), _R.standard_normal(4)]),
    (f_correlate, [_R.standard_normal(2), _R.standard_normal(6)]),
    (f_matrix_norms, [_R.standard_normal((3, 4))]),
    (f_matrix_norm_axes, [_R.standard_normal((2, 3, 4))]),
    (f_cond, [_R.standard_normal((3, 3)) * 0.3 + 2 * np.eye(3)]),
    (f_cond, [_WC]),
    (f_lstsq, [_R.standard_normal((5, 3)), _R.standard_normal(5)]),
    (f_lstsq, [_R.standard_normal((4, 2)), _R.standard_normal((4, 2))]),
    (f_lstsq_wide, [_R.standard_normal((2, 4)), _R.standard_normal(2)]),
    (f_copyto, [_R.standard_normal(5), _R.standard_normal(5)]),
    (f_putmask, [_R.standard_normal((2, 3)), _R.standard_normal(4)]),
    (f_place, [_R.standard_normal((2, 3)), _R.standard_normal(4)]),
    (f_put, [_R.standard_normal((2, 3)), _R.standard_normal(4)]),
    (f_ptp, [_R.standard_normal((3, 4))]),
    (f_fmax_fmin, [np.array([[0.3, np.nan, -1.2], [0.8, 2.0, 0.4]]), np.array([0.1, -0.5, np.nan])]),
    (f_nan_stats, [np.array([[1.0, np.nan, -2.0, 0.5], [np.nan, 0.3, 0.7, -1.0], [2.0, -0.4, 0.9, 1.5]])]),
    (f_cumulative, [_R.standard_normal((3, 4))]),
    (f_vector_norm, [_R.standard_normal((3, 4))]),
    (f_vecdot, [_R.standard_normal((3, 3)), _R.standard_normal((3, 3))]),
    (f_linalg_aliases, [_R.standard_normal((2, 3)), _R.standard_normal((2, 3))]),
    (f_diagflat, [_R.standard_normal((2, 2))]),
    (f_polys, [_R.standard_normal(4), _R.standard_normal(3)]),
    (f_median_all_keep, [_R.standard_normal((2, 3))]),
    (f_small_aliases, [_R.standard_normal((2, 3)), _R.standard_normal((2, 3))]),
    (f_average, [_R.standard_normal((2, 3)), _R.uniform(0.5, 1.5, 3)]),
    (f_fftshift, [_R.standard_normal((3, 4))]),
    (f_vander, [np.array([0.0, 0.7, -1.3])]),
    (f_broadcast_arrays, [_R.standard_normal((3, 1)), _R.standard_normal(4)]),
    (f_nan_order, [np.array([[1.0, np.nan, -2.0, 0.5], [np.nan, 0.3, 0.7, -1.0], [2.0, -0.4, 0.9, 1.5]])]),
    (f_i0, [np.array([[-8.6, -3.0, 0.4], [2.2, 7.9, 9.1]])]),
    (f_i0, [np.array([0.0, -0.999, 1.001, 0.03])]),  # the series, its end, and 0 itself
    (f_block, [_R.standard_normal((2, 2)), _R.standard_normal((2, 3))[:, :2]]),
    (f_block_mixed, [_R.standard_normal((2, 2)), _R.standard_normal(2)]),
]
IDS = [f.__name__.removeprefix("f_") for f, _ in CASES]


def _dirs(args):
    rng = np.random.default_rng(7)
    return [rng.standard_normal(np.shape(a)) for a in args]


def _along(fn, args, dirs, eps=1e-5):
    """Central difference of scalar fn along the direction dirs."""
    plus = [a + eps * d for a, d in zip(args, dirs)]
    minus = [a - eps * d for a, d in zip(args, dirs)]
    return (float(fn(*plus)) - float(fn(*minus))) / (2 * eps)


# (compiled functions take plain positional parameters: one of each per arity)
def _along_gradient(grad, dirs, n):
    """The compiled gradient `grad` along `dirs`, as a function of the arguments."""
    if n == 1:
        def h(a):
            (ga,) = grad(a)
            return np.sum(ga * dirs[0])
    else:
        def h(a, b):
            ga, gb = grad(a, b)
            return np.sum(ga * dirs[0]) + np.sum(gb * dirs[1])
    return h


def _forward_along(f, dirs, n):
    """The derivative of f along `dirs` by forward mode, as a function of the arguments."""
    if n == 1:
        def k(a):
            return sg.jvp(f, (a,), (dirs[0],))[1]
    else:
        def k(a, b):
            return sg.jvp(f, (a, b), (dirs[0], dirs[1]))[1]
    return k


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_value_is_numpys(f, args):
    value, _ = sg.value_and_grad(f, wrt=tuple(range(len(args))))(*args)
    np.testing.assert_allclose(value, f(*args), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_reverse_first_and_second_order(f, args):
    wrt = tuple(range(len(args)))
    grad = sg.grad(f, wrt=wrt)
    for i, g in enumerate(grad(*args)):
        np.testing.assert_allclose(g, numeric_grad(f, args, i), rtol=1e-5, atol=1e-6)
    dirs = _dirs(args)

    h = _along_gradient(grad, dirs, len(args))  # its gradient: the Hessian times dirs
    hess = sg.grad(h, wrt=wrt)(*args)
    for i, g in enumerate(hess):
        np.testing.assert_allclose(g, numeric_grad(h, args, i), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_forward_first_and_second_order(f, args):
    dirs = _dirs(args)
    _, tangent = sg.jvp(f, tuple(args), tuple(dirs))
    np.testing.assert_allclose(tangent, _along(f, args, dirs), rtol=1e-5, atol=1e-6)

    k = _forward_along(f, dirs, len(args))
    _, second = sg.jvp(k, tuple(args), tuple(dirs))
    np.testing.assert_allclose(second, _along(k, args, dirs), rtol=1e-4, atol=1e-5)


def f_quantile_method(x): return np.quantile(x, 0.5, method="nearest")    # noqa: E704


def test_an_unsupported_argument_is_a_compile_error():
    with pytest.raises(CompileError, match="bad call to `quantile`.*method"):
        sg.grad(f_quantile_method)(np.arange(4.0))


def interp_scalar(x, fp):
    return np.interp(x, np.array([-1.0, 0.0, 1.0]), fp)


def test_interp_of_a_scalar_on_array_api_strict_is_right_not_a_crash():
    # seed 0 of the fuzzer: a 0-d index into take() crashed array_api_strict before the
    # composition gathered by a flat index; the gradient needs a scatter-add, refused
    # before and a one-hot contraction now (Note [Scatter-add without add.at])
    from tests.conftest import numeric_grad

    xs = pytest.importorskip("array_api_strict")
    fp = np.array([0.5, 0.3, 1.2])
    gx, gfp = sg.grad(interp_scalar, wrt=(0, 1))(-0.7, xs.asarray(fp))
    np.testing.assert_allclose(float(gx), numeric_grad(interp_scalar, [-0.7, fp], 0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gfp), numeric_grad(interp_scalar, [-0.7, fp], 1), rtol=1e-6)
