"""Array-API spellings of NumPy rows the namespace lacks (srcgrad/codegen/spellings.py):
fmod, cbrt, nanmax/nanmin, array_equal (nanargmax/nanargmin stay refused: an integer index
mixed with floats cannot be promoted on the Array API, fuzz seed 2660121). Each was refused on
array_api_strict ("has no equivalent in array_api_strict", 147 programs of a
10,000-program fuzz campaign among them). The values are NumPy's own, computed here
beside them, and the gradients central differences (issue 29)."""

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import numeric_grad

xs = pytest.importorskip("array_api_strict")


def fmod_of_both_signs(x, y):
    return np.sum(np.fmod(x, y) * x)


def cube_roots(x):
    return np.sum(np.cbrt(x) * x)


def nan_extremes(x):
    m = np.where(x > 0.5, np.nan, x)  # row 1 is all nan
    return (np.nansum(np.nanmax(m, axis=1)) + 2.0 * np.nansum(np.nanmin(m, axis=0))
            + np.nanmax(m) + np.sum(np.where(np.isnan(np.nanmin(m, axis=1, keepdims=True)), 1.0, 0.0)))


def scaled_if_equal(x, y):
    same = (np.array_equal(x, y) + np.array_equal(x, x[:1]) + np.array_equal(x * 1.0, x)
            + np.array_equal(x * np.nan, x * np.nan, equal_nan=True))
    return np.sum(x * x) * (1.0 + same)


X = np.array([[0.2, -0.3, 0.4], [0.9, 0.7, 0.6]])
CASES = [
    (fmod_of_both_signs, [np.array([-3.7, 3.7, -1.2, 2.5, -0.0]),
                          np.array([2.0, -2.0, -0.5, 0.75, 1.0])], (0, 1)),
    (cube_roots, [np.array([-8.0, -0.3, 0.2, 27.0])], (0,)),
    (nan_extremes, [X], (0,)),
    (scaled_if_equal, [X, X + 1.0], (0,)),
]


@pytest.mark.parametrize("f, args, wrt", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_spelled_rows_match_numpy_and_differences(f, args, wrt):
    with np.errstate(all="ignore"), _quiet():
        expected_value = f(*[a.copy() for a in args])
        value, grads = sg.value_and_grad(f, wrt=wrt)(*[xs.asarray(a) for a in args])
    assert float(value) == pytest.approx(float(expected_value), rel=1e-12, nan_ok=True)
    for i, g in zip(wrt, grads):
        assert type(g) is type(xs.asarray(0.0))  # computed by array_api_strict
        with _quiet():
            np.testing.assert_allclose(np.asarray(g), numeric_grad(f, args, i), rtol=1e-5, atol=1e-6)


def _quiet():
    import warnings

    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore")

    class _Exit:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            ctx.__exit__(*exc)
            return False
    return _Exit()
