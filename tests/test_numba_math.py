"""The vectorizable exp, tanh, sin and cos of numba's fused loops (Note [Vectorizable math
for numba] in srcgrad.codegen.numba_math) against NumPy's own functions (libm's):
as plain Python (no numba needed), then compiled by numba inside a loop as the fused
code calls them, then through sg.grad(backend="numba"), arguments past sin's range
included (the loop runs again with libm's)."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from srcgrad.codegen import numba_math

ULP = 2.0 ** -52


def _points() -> np.ndarray:
    rng = np.random.default_rng(7)
    scales = (1e-300, 1e-10, 1e-3, 0.3, 1.0, 3.0, 10.0, 100.0, 1e3, 1e4, 9e4)
    edges = [0.0, -0.0, 5e-324, -5e-324, 2.2e-308, 1e-5, 19.0, 19.1, 20.0, 25.0, 700.0,
             709.7, 709.78, 709.79, 720.0, -708.0, -740.0, -745.0, -745.2, -800.0,
             math.pi / 2, math.pi, 2 * math.pi, 1e5, -1e5, np.inf, -np.inf, np.nan]
    return np.concatenate([rng.standard_normal(2000) * s for s in scales]
                          + [np.array(edges), np.arange(-3000, 3000) * (math.pi / 2),
                             np.arange(1, 2000) * math.pi * 31.0])


POINTS = _points()


def _domain(name, x):
    """Where a kernel stands for NumPy's function: sin and cos only to TRIG_LIMIT."""
    return x[~(np.abs(x) > numba_math.TRIG_LIMIT)] if name in ("sin", "cos") else x


def _ulps(got, want):
    """Each value's distance from NumPy's, in units of the last place (0 where both are
    nan, equal, or subnormals one step apart)."""
    with np.errstate(all="ignore"):
        err = np.abs(got - want) / np.maximum(np.abs(want), 2.2250738585072014e-308) / ULP
        err[(np.isnan(got) & np.isnan(want)) | (got == want)] = 0.0
        err[(np.abs(want) < 2.3e-308) & (np.abs(got - want) <= 5e-324)] = 0.0
    return err


@pytest.mark.parametrize("name", sorted(numba_math.KERNELS))
def test_each_kernel_is_within_two_ulp_of_numpys(name):
    x = _domain(name, POINTS)
    kernel = numba_math.KERNELS[name]
    with np.errstate(all="ignore"):  # (exp's overflows, as NumPy's)
        got = np.array([kernel(float(v)) for v in x])
        want = getattr(np, name)(x)
    err = _ulps(got, want)
    worst = int(np.argmax(err))
    assert err[worst] <= 2.0, (x[worst], got[worst], want[worst])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    zeros = want == 0.0
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])), "the sign of a zero"


def test_the_loop_flags_sin_and_cos_past_their_range_and_rewrites_only_code():
    lines = ["# _out = xp.tanh(xp.cos(x))  (f.py:2)", "_cos = xp.cos(x_i)", "_s = xp.sin(x_i)",
             "_e = xp.exp(_cos)", "_t = xp.tanh(_e)", "_l = xp.log(_t)"]
    out, trig = numba_math.vectorized(lines)
    assert trig
    assert out == [lines[0], "_cos = simd_cos(x_i)",
                   f"{numba_math.BEYOND} = {numba_math.BEYOND} | (abs(x_i) > 100000)",
                   "_s = simd_sin(x_i)", "_e = simd_exp(_cos)", "_t = simd_tanh(_e)", lines[-1]]
    assert numba_math.vectorized(["_e = xp.exp(x_i)"]) == (["_e = simd_exp(x_i)"], False)
    source = numba_math.kernel_source("\n".join(out))
    assert "def simd_cos(" in source and "def simd_tanh(" in source and "def _simd_reduced(" in source
    assert numba_math.kernel_source("_l = xp.log(_t)") == ""


numba = pytest.importorskip("numba")


def _jitted_loop(name):
    """A numba loop calling the kernel as a fused loop does: inlined, FMA contraction on."""
    for f in vars(numba_math).values():  # register_jitable registers the function itself
        if callable(f) and getattr(f, "__module__", "") == numba_math.__name__ and "simd" in f.__name__:
            numba.extending.register_jitable(inline="always")(f)
    kernel = numba_math.KERNELS[name]

    @numba.njit(error_model="numpy", fastmath={"contract"})
    def loop(x, out):
        for i in range(x.size):
            out[i] = kernel(x[i])
    return loop


@pytest.mark.parametrize("name", sorted(numba_math.KERNELS))
def test_each_kernel_compiled_by_numba_is_within_two_ulp_of_numpys(name):
    x = _domain(name, POINTS)
    out = np.empty_like(x)
    _jitted_loop(name)(x, out)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
    err = _ulps(out, want)
    assert float(np.max(err)) <= 2.0, x[int(np.argmax(err))]
    assert np.array_equal(np.isnan(out), np.isnan(want))
    zeros = want == 0.0
    assert np.array_equal(np.signbit(out[zeros]), np.signbit(want[zeros])), "the sign of a zero"


def _chain(x):
    return np.sum(np.tanh(x) * np.exp(-x * x) + np.sin(x) ** 2 + np.cos(0.5 * x))


@pytest.mark.parametrize("scale", [1.0, 3e5], ids=["in-range", "past-sin's-range"])
def test_the_fused_gradient_with_the_kernels_equals_numpys(scale, monkeypatch):
    import srcgrad as sg
    from srcgrad.pipeline import numba_variants

    monkeypatch.setattr(numba_variants, "SLOWER", float("inf"))  # the arithmetic, not the speed
    x = np.random.default_rng(3).standard_normal(4096) * scale
    g = sg.grad(_chain, backend="numba")
    got, want = g(x), sg.grad(_chain)(x)
    (record,) = g.__srcgrad__.numba_records.values()
    assert record.backend == "numba", record.reason
    fast, _, exact = inspect.getsource(record.dispatcher.py_func).partition("if _trig_beyond:")
    assert "simd_tanh(" in fast and "xp.tanh(" in exact
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.max(np.abs(want)))
    eps = 1e-6 * max(1.0, scale * 1e-5)  # and arithmetic, at a few points
    for i in (0, 17, 4095):
        e = np.zeros_like(x)
        e[i] = eps
        fd = (_chain(x + e) - _chain(x - e)) / (2 * eps)
        assert abs(got[i] - fd) <= 1e-5 * max(1.0, abs(fd)), (i, got[i], fd)
