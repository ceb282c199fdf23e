"""The rule table's gradcheck suite on array_api_strict (Note [Array namespaces]).

Each case of tests/rules/cases.py is written as NumPy user code (the module
tests/rules/test_compiled_rules.py builds), its gradient compiled once, and run on
`array_api_strict` arrays: the generated code is then spelled in the Array API's
names and bound to array_api_strict (Note [Spellings]). The gradient is compared with
central differences of the same function computed by NumPy, in float64.

A row the Array API cannot express must be refused with a CompileError naming the op
and the namespace; `REFUSED` lists them with the reason, and the test fails both when
a listed row starts to work and when an unlisted one is refused.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from tests.conftest import numeric_grad
from tests.rules.test_compiled_rules import _SYMMETRIC_INPUT, _build, _sym, compiled_cases

xs = pytest.importorskip("array_api_strict")

# row -> why the Array API cannot express it (a substring of the CompileError)
REFUSED = {
    "pad": "no pad",
    "pad_bar": "no pad",
    "repeat": "transpose of repeat",
    # rows whose NumPy function the namespace lacks: refused by name (diag and its
    # transpose are spelled: tests/backends/test_array_api_integer_results.py)
    "repeat_bar": "transpose of repeat",
    # (kron, polyval, convolve and trapezoid are spelled by helpers:
    # tests/backends/test_array_api_spelled_rows.py)
}
# Cases refused for an argument the Array API cannot take (case id -> reason), at
# compile time. (Gathers and writes at an index array, refused at run time before, run:
# tests/backends/test_array_api_gathers.py.)
REFUSED_CASES = {
    "eigh-upper": "UPLO='U'",
}  # (a vector's norm of any ord runs: tests/backends/test_array_api_spelled_rows.py)

VJP_CASES = compiled_cases("vjp")


def _strict(value):
    return xs.asarray(value) if isinstance(value, np.ndarray) else value


def _case_id(case) -> str:
    return f"{case[0].name}-{case[1]}"


@pytest.mark.parametrize("case", VJP_CASES, ids=[_case_id(c) for c in VJP_CASES])
def test_rule_gradient_on_array_api_strict(tmp_path, case):
    rule, case_id, args = case
    module, wrt, values = _build(tmp_path, rule, args)
    grad = sg.grad(module.f, wrt=tuple(wrt))
    reason = REFUSED.get(rule.name) or REFUSED_CASES.get(_case_id(case))
    try:
        grads = grad(*[_strict(v) for v in values])
    except (CompileError, NotImplementedError, IndexError) as err:
        assert isinstance(err, IndexError) or "array_api_strict" in str(err), str(err)
        assert reason is not None, f"refused but not listed in REFUSED: {err}"
        assert reason in str(err), str(err)
        return
    assert reason is None, f"{rule.name} is listed as refused ({reason}) but compiled"
    for i, g in zip(wrt, grads):
        assert type(g) is type(xs.asarray(0.0)), type(g)  # computed by array_api_strict
        got = np.asarray(g)
        expected = numeric_grad(module.f, values, i)
        if rule.name in _SYMMETRIC_INPUT:
            got, expected = _sym(got), _sym(expected)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=f"argument {i}")



# Programs whose gradients broadcast a Python number (NumPy's functions take one as any
# array_like; the Array API's and CuPy's take only arrays): a sum's seed `1.0`, a mean's
# `1 / size`, a value the scalar pass makes a float. Each was a TypeError before.
_SCALAR_SOURCE = '''
import math

import numpy as np


def mean_loss(w, X, y):
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z)


def seeded(x):
    return np.sum(np.sin(x))


def shifted(x):
    s = np.max(x, axis=1, keepdims=True)
    return np.mean(-np.sum(x - s - np.log(np.sum(np.exp(x - s), axis=1, keepdims=True)), axis=1))


def through_float(x, c):
    return np.sum(np.tanh(x)) * math.sin(c) + np.mean(x * c)
'''


@pytest.fixture(scope="module")
def scalar_user(tmp_path_factory):
    from tests.conftest import import_source

    yield from import_source(tmp_path_factory, "array_api_scalars", _SCALAR_SOURCE)


@pytest.mark.parametrize("name, shapes", [("mean_loss", [(3,), (5, 3), (5,)]), ("seeded", [(2, 3)]),
                                          ("shifted", [(4, 3)]), ("through_float", [(3,), ()])])
def test_gradient_broadcasting_a_python_number_on_array_api_strict(scalar_user, name, shapes):
    f = getattr(scalar_user, name)
    rng = np.random.default_rng(3)
    values = [rng.standard_normal(s) if s else 0.7 for s in shapes]
    got = sg.grad(f, wrt=0)(*[xs.asarray(v) if isinstance(v, np.ndarray) else v for v in values])
    assert type(got) is type(xs.asarray(0.0)) or np.ndim(got) == 0
    np.testing.assert_allclose(np.asarray(got), numeric_grad(f, values, 0), rtol=1e-6, atol=1e-8)


def test_jacobian_and_hessian_of_array_api_arrays_say_not_yet(scalar_user):
    """The matrices are assembled with NumPy: arrays of another library are refused with a
    TypeError that says so (it was a ValueError about dtypes from deep inside)."""
    x = xs.asarray(np.ones(3))
    for transform in (sg.jacobian, sg.hessian):
        with pytest.raises(TypeError, match=rf"{transform.__name__}: array_api_strict arrays are not "
                                            "supported yet"):
            transform(scalar_user.seeded)(x)


# Python numbers and NumPy constants in the shape-generic code another namespace runs
# (emit's Note [Python numbers in other namespaces]): NumPy's functions take a float where
# they take an array, array_api_strict's raise TypeError (fuzz seeds 1800000, 1800002,
# 1800008, 1800014, 1800053: sg.grad on array_api_strict arrays). Each was a TypeError,
# AttributeError or IndexError from the generated code before.
_NUMBERS_SOURCE = '''
import numpy as np


def float_through_functions(x, c):
    return np.sum(np.tanh(x) * np.tanh(c)) + np.minimum(c, c) * np.maximum(c, 0.3)


def float_argument_broadcast(x, c):
    return np.sum(np.sin(x) * c)


def stack_of_numbers(x, c):
    return np.sum(np.stack([np.sum(x), 3.0, c]) ** 2)


def numpy_constant(x):
    return np.sum(np.sin(x) @ np.ones((3,))) + np.mean(x * np.arange(3.0))


def shape_entry(x):
    return np.sum(x * x) / x.shape[0]


def loop_rows(x):
    s = 0.0
    for i in range(2):
        s = s + np.sum(np.sin(x[i]) * x[i + 1])
    return s


def take_of_constant_indices(x, w):
    return np.sum(x * np.take(w, [1, 0, 2], axis=0)) + np.sum(x[:, 0] * np.take(w, [5, 0, 1]))


def clip_of_float(x, c):
    return np.clip(c, -1.0, 1.0) * np.sum(np.clip(x, -0.5, c))


def unpacked(x):
    a, b = np.stack([np.tanh(x), x + x])
    n, m = x.shape
    return np.sum(a * b) / (n * m)


def returns_in_loop(x):
    k = 0
    while k < 3:
        k += 1
        if np.sum(x) > 100.0:
            return np.cos(np.sum(x))
    return np.sum(x * x)
'''


@pytest.fixture(scope="module")
def numbers_user(tmp_path_factory):
    from tests.conftest import import_source

    yield from import_source(tmp_path_factory, "array_api_numbers", _NUMBERS_SOURCE)


@pytest.mark.parametrize("name, shapes, wrt", [
    ("float_through_functions", [(2, 3), ()], (0, 1)), ("float_argument_broadcast", [(2, 3), ()], (0, 1)),
    ("stack_of_numbers", [(2, 3), ()], (0, 1)), ("numpy_constant", [(2, 3)], (0,)),
    ("shape_entry", [(2, 3)], (0,)), ("loop_rows", [(3, 2)], (0,)),
    ("take_of_constant_indices", [(3, 2), (3, 2)], (0,)),
    # seeds 1800476 (clip), 1800168 (`a, b = x`: array iteration), 1800265 (the zero
    # cotangent of a loop's `return` value, None where the loop did not return)
    ("clip_of_float", [(2, 3), ()], (0, 1)), ("unpacked", [(2, 3)], (0,)), ("returns_in_loop", [(3,)], (0,))])
def test_gradient_of_python_numbers_and_numpy_constants_on_array_api_strict(numbers_user, name, shapes, wrt):
    f = getattr(numbers_user, name)
    rng = np.random.default_rng(5)
    values = [rng.standard_normal(s) if s else 0.7 for s in shapes]
    grads = sg.grad(f, wrt=wrt)(*[_strict(v) for v in values])
    for i, g in zip(wrt, grads):
        if shapes[i]:
            assert type(g) is type(xs.asarray(0.0)), type(g)  # computed by array_api_strict
        np.testing.assert_allclose(np.asarray(g), numeric_grad(f, values, i), rtol=1e-6, atol=1e-8)


_CUPY_SOURCE = '''
import numpy as np


def reduces_a_float(x, c):
    return np.sum(c) * np.sum(np.clip(c, -1.0, 1.0) * x) + np.maximum(np.sum(x), c)
'''


@pytest.fixture(scope="module")
def cupy_user(tmp_path_factory):
    from tests.conftest import import_source

    yield from import_source(tmp_path_factory, "cupy_numbers", _CUPY_SOURCE)


def test_cupy_code_makes_a_float_an_array_where_cupy_calls_its_method(cupy_user):
    """CuPy is spelled as NumPy, but its reductions and clip call the operand's method
    (`cupy.sum(c)` is `c.sum()`: AttributeError for a float, seen on the H200): such an
    operand not known to be an array is `xp.asarray(c)` there too; beside a known array
    an elementwise call keeps the float (weak, as NumPy's: a float32 array stays float32)."""
    from srcgrad.pipeline.standalone import standalone_module

    text = standalone_module(cupy_user.reduces_a_float, (0, 1), False, "reverse", namespace="cupy")
    assert "xp.sum(xp.asarray(c))" in text and "xp.clip(xp.asarray(c), " in text, text
    assert "xp.maximum(_sum_1, c)" in text or "xp.maximum(_sum_2, c)" in text, text


_NEWAXIS_SOURCE = '''
import numpy as np


def write_through_newaxis(x):
    w = np.sin(x).min(axis=0)[None]
    v = w
    v += x[0] * 0.5
    return np.sum(w * w) + np.sum(v)
'''


@pytest.fixture(scope="module")
def newaxis_user(tmp_path_factory):
    from tests.conftest import import_source

    yield from import_source(tmp_path_factory, "newaxis_write", _NEWAXIS_SOURCE)


def test_write_through_a_newaxis_view_on_array_api_strict(newaxis_user):
    """A write through `y[None]` is a write into y at the index `(None, ...)`: array_api_strict
    takes None (newaxis) when reading only, and raised IndexError in helpers.setitem (fuzz
    seed 1801050). The newaxis is dropped and the value shaped to match (as scatter_index)."""
    f = newaxis_user.write_through_newaxis
    x = np.random.default_rng(2).standard_normal((3, 4))
    got = sg.grad(f)(xs.asarray(x))
    np.testing.assert_allclose(np.asarray(got), numeric_grad(f, [x], 0), rtol=1e-6, atol=1e-8)
