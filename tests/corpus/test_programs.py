"""Compiled gradients of user-style programs against arithmetic.

Every case is checked against central differences in float64 and, where HIPS
autograd is installed, against autograd running the very same source.
"""

from __future__ import annotations

import inspect
import types

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.corpus import programs as P

rng = np.random.default_rng(0)


def _r(*shape):
    return rng.standard_normal(shape)


def _spd(n):
    a = rng.standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def _onehot(n, k):
    y = np.zeros((n, k))
    y[np.arange(n), rng.integers(0, k, n)] = 1
    return y


CASES = [
    ("poly", P.poly, lambda: [_r(5)], (0,)),
    ("mlp", P.mlp, lambda: [_r(4, 6), _r(6), _r(6, 3), _r(3), _r(5, 4), _r(5, 3)], (0, 1, 2, 3)),
    ("logistic", P.logistic, lambda: [_r(4), 0.3, _r(7, 4), (rng.random(7) > 0.5) * 1.0], (0, 1)),
    ("softmax", P.softmax_xent, lambda: [_r(4, 5), _r(6, 4), _onehot(6, 5)], (0, 1)),
    ("aliases", P.aliases, lambda: [_r(5)], (0,)),
    ("calls_helper", P.calls_helper, lambda: [_r(3, 2), _r(2)], (0, 1)),
    ("methods_and_attrs", P.methods_and_attrs, lambda: [_r(4, 3)], (0,)),
    ("indexing", P.indexing, lambda: [rng.random((4, 5)), np.array([0, 2, 2, 3])], (0,)),
    ("broadcasting", P.broadcasting, lambda: [_r(3, 4), _r(4), _r(3, 1)], (0, 1, 2)),
    ("tuple_unpack", P.tuple_unpack, lambda: [_r(3), _r(3)], (0, 1)),
    ("keywords", P.docstring_and_keywords, lambda: [_r(3, 4)], (0,)),
    ("where", P.uses_where, lambda: [_r(6) + 0.1], (0,)),
    ("matrix_ops", P.matrix_ops, lambda: [_spd(3), _r(3, 3)], (0, 1)),
]


@pytest.mark.parametrize("name,fn,make,wrt", CASES, ids=[c[0] for c in CASES])
def test_grad_matches_finite_differences(name, fn, make, wrt):
    args = make()
    grads = sg.grad(fn, wrt=wrt)(*args)
    assert isinstance(grads, tuple) and len(grads) == len(wrt)
    for i, g in zip(wrt, grads):
        assert np.shape(g) == np.shape(args[i]), f"gradient of argument {i} has the wrong shape"
        assert_close(g, numeric_grad(fn, args, i), rtol=1e-5, atol=1e-7)


def _autograd_twin(fn):
    """`fn` re-executed from its module's source with numpy swapped for autograd.numpy."""
    anp = pytest.importorskip("autograd.numpy")
    source = inspect.getsource(P).replace("import numpy as xp_alias", "import autograd.numpy as xp_alias")
    source = source.replace("import numpy as np", "import autograd.numpy as np")
    source = source.replace("from numpy import exp as np_exp", "from autograd.numpy import exp as np_exp")
    module = types.ModuleType("programs_autograd")
    exec(compile(source, P.__file__, "exec"), module.__dict__)
    assert module.np is anp
    return getattr(module, fn.__name__)


# autograd's ArrayBox cannot run these two (boolean-mask reads, the .dot method):
# finite differences alone check them.
AUTOGRAD_CASES = [c for c in CASES if c[0] not in ("indexing", "methods_and_attrs")]


@pytest.mark.parametrize("name,fn,make,wrt", AUTOGRAD_CASES, ids=[c[0] for c in AUTOGRAD_CASES])
def test_grad_matches_autograd(name, fn, make, wrt):
    autograd = pytest.importorskip("autograd")
    args = make()
    twin = _autograd_twin(fn)
    expected = autograd.grad(twin, wrt)(*args)
    for g, e in zip(sg.grad(fn, wrt=wrt)(*args), expected):
        assert_close(g, e, rtol=1e-9, atol=1e-12)


def test_value_and_grad_and_single_wrt():
    x = _r(5)
    value, g = sg.value_and_grad(P.poly)(x)
    assert_close(value, P.poly(x))
    assert_close(g, numeric_grad(P.poly, [x], 0), rtol=1e-5)
    assert isinstance(g, np.ndarray)  # a single wrt gives a bare gradient


def test_wrt_by_name_and_decorator():
    args = [_r(3), _r(3)]
    by_name = sg.grad(P.tuple_unpack, wrt=("y", "x"))(*args)
    by_index = sg.grad(P.tuple_unpack, wrt=(1, 0))(*args)
    for a, b in zip(by_name, by_index):
        assert_close(a, b, rtol=0, atol=0)

    @sg.grad
    def f(x):
        return np.sum(np.sin(x))

    assert_close(f(args[0]), np.cos(args[0]))


def test_has_aux():
    x = _r(4)
    g, aux = sg.grad(P.aux_output, has_aux=True)(x)
    assert_close(g, 2 * x)
    assert_close(aux["norm"], np.linalg.norm(x))
    (value, aux2), g2 = sg.value_and_grad(P.aux_output, has_aux=True)(x)
    assert_close(value, np.sum(x ** 2))
    assert_close(aux2["norm"], np.linalg.norm(x))
    assert_close(g2, 2 * x)


def test_vjp_with_structured_output():
    x, y = _r(3), _r(3)
    out, vjp_fn = sg.vjp(P.several_returns, x, y)
    assert_close(out[0], x * y)
    assert_close(out[1]["s"], np.sum(x))
    ct = (np.ones(3), {"s": 2.0, "p": [np.full(3, 0.5), np.arange(3.0)]})
    gx, gy = vjp_fn(ct)
    assert_close(gx, y + 2.0 + np.arange(3.0))
    assert_close(gy, x + 1.0)
    with pytest.raises(ValueError, match="structure"):
        vjp_fn((np.ones(3),))


def test_gradient_of_constant_function_is_zero():
    g = sg.grad(P.constant_output)(_r(3))
    assert_close(g, np.zeros(3), atol=0)


def test_integer_arguments_are_refused_naming_the_argument():
    # As JAX and torch: the derivative w.r.t. an integer is not defined; differentiating it
    # as a float silently would hide the caller's bug. The same values as floats work.
    with pytest.raises(TypeError, match=r"grad: argument `x` is an integer array \(int64\)"):
        sg.grad(P.int_ops)(np.arange(4))
    with pytest.raises(TypeError, match=r"argument `x` is the int 2"):
        sg.grad(P.poly)(2)
    with pytest.raises(TypeError, match="complex"):
        sg.value_and_grad(P.poly)(2.0 + 1j)
    with pytest.raises(TypeError, match="integer array"):
        sg.jacobian(P.int_ops)(np.arange(4))
    assert_close(sg.grad(P.int_ops)(np.arange(4.0)), 2.0 * np.arange(4))
    assert sg.grad(P.poly)(2.0) == pytest.approx(9.0 * 4 - 4.0 * 2 + 1.0)


def test_returned_gradients_are_writable_and_own_their_memory():
    x = _r(4)

    def f(a):
        return np.sum(a)

    g = sg.grad(f)(x)
    g += 1.0  # a read-only broadcast view would raise here
    assert_close(g, np.full(4, 2.0))


def test_source_is_readable_python():
    g = sg.grad(P.mlp, wrt=("W1", "b1"))
    text = sg.source(g)
    assert "def grad_mlp(W1, b1, W2, b2, X, y):" in text
    assert "# grad of: h = np.tanh(X @ W1 + b1)" in text
    assert "@generated" in text
    compile(text, "<check>", "exec")


def test_integer_argument_through_astype_is_not_truncated():
    g = sg.grad(P.int_astype)(np.arange(4.0))
    assert g.dtype.kind == "f"
    assert_close(g, 2.0 * np.arange(4))


def test_nested_grads_stay_zero_safe():
    d = P.poly4
    derivatives = []
    for _ in range(5):
        d = sg.grad(d)
        derivatives.append(d(0.0))
    assert derivatives == [1.0, 2.0, 6.0, 24.0, 0.0]
