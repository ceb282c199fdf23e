"""Namespace selection (Note [Array namespaces] in srcgrad.backend) and
`srcgrad emit --backend`: the guard tells libraries apart, mixed libraries are an
error, refused rows name the op and the namespace, and an emitted Array-API module
runs with array_api_strict alone (srcgrad blocked from import)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import srcgrad as sg
from srcgrad import backend
from srcgrad.errors import CompileError
from tests.conftest import import_source, numeric_grad

xs = pytest.importorskip("array_api_strict")

SOURCE = textwrap.dedent('''
    import numpy as np


    def loss(w, X, y):
        z = X @ w
        p = 1.0 / (1.0 + np.exp(-z))
        return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)) + 0.01 * np.sum(w ** 2)


    def tied(x):
        return np.max(x, axis=0).sum() + np.sum(np.transpose(x)[0] ** 2)


    def uses_pad(x):  # (the Array API has no pad)
        return np.sum(np.pad(x, 1) ** 2)
''')


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    yield from import_source(tmp_path_factory, "user_ns", SOURCE)


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal(3), rng.standard_normal((6, 3)), (rng.random(6) > 0.5) * 1.0


def test_target_of():
    assert backend.target_of(np.ones(2), 1.0, np.float64(2)) is backend.NUMPY
    t = backend.target_of(xs.asarray([1.0]), 2.0, np.float64(1.0))  # a NumPy scalar mixes
    assert (t.name, t.spelling, t.mutable, t.xp) == ("array-api", "array-api", False, xs)
    with pytest.raises(TypeError, match=r"mix array libraries \(numpy, array_api_strict\)"):
        backend.target_of(np.ones(2), xs.asarray([1.0]))


def test_same_function_on_numpy_then_strict_then_numpy(user):
    w, X, y = _data()
    g = sg.grad(user.loss)
    expected = numeric_grad(user.loss, [w, X, y], 0)
    np.testing.assert_allclose(g(w, X, y), expected, rtol=1e-6, atol=1e-8)
    got = g(xs.asarray(w), xs.asarray(X), xs.asarray(y))  # same shapes: the guard's class tells
    assert type(got) is type(xs.asarray(0.0))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6, atol=1e-8)
    assert "xp.exp" in sg.source(g) and "out=" not in sg.source(g)
    back = g(w, X, y)
    assert type(back) is np.ndarray
    np.testing.assert_allclose(back, expected, rtol=1e-6, atol=1e-8)


def test_mixed_libraries_are_an_error(user):
    w, X, y = _data()
    with pytest.raises(TypeError, match="mix array libraries"):
        sg.grad(user.loss)(w, xs.asarray(X), y)


def test_boolean_mask_and_transpose_spelled(user):
    x = np.array([[1.0, 3.0], [3.0, 2.0], [0.5, 3.0]])  # a tie in column 1
    g = sg.grad(user.tied)
    got = g(xs.asarray(x))
    np.testing.assert_allclose(np.asarray(got), numeric_grad(user.tied, [x], 0), atol=1e-6)
    text = sg.source(g)  # the variant that ran: Array-API names, the mask cast to a number
    assert "xp.permute_dims(" in text and "xp.astype(_equal" in text and "xp.transpose" not in text


def test_refused_row_names_op_and_namespace(user):
    x = np.ones((2, 2))
    with pytest.raises(CompileError, match=r"`pad` has no equivalent in array_api_strict"):
        sg.grad(user.uses_pad)(xs.asarray(x))
    np.testing.assert_allclose(sg.grad(user.uses_pad)(x), numeric_grad(user.uses_pad, [x], 0),
                               atol=1e-6)  # NumPy still fine


def _emit(user, func, backend_name, *extra):
    cmd = [sys.executable, "-m", "srcgrad", "emit", f"{user.__file__}:{func}", "--backend",
           backend_name, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_emit_array_api_runs_with_array_api_strict_alone(user, tmp_path):
    done = _emit(user, "loss", "array-api", "--wrt", "w")
    assert done.returncode == 0, done.stderr
    module = tmp_path / "loss_aa.py"
    module.write_text(done.stdout)
    assert "import array_api_strict as xp" in done.stdout
    assert "import srcgrad" not in done.stdout and "from srcgrad" not in done.stdout
    w, X, y = _data()
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    script = textwrap.dedent(f'''
        import sys
        sys.modules["srcgrad"] = None  # the module must not need srcgrad
        sys.path.insert(0, {str(tmp_path)!r})
        import numpy as np
        import array_api_strict as xs
        import loss_aa
        w, X, y = (xs.asarray(np.load({str(tmp_path)!r} + f"/{{n}}.npy")) for n in "wXy")
        g = loss_aa.grad_loss(w, X, y)
        assert type(g) is type(w), type(g)
        np.save({str(tmp_path)!r} + "/g.npy", np.asarray(g))
    ''')
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(np.load(tmp_path / "g.npy"), numeric_grad(user.loss, [w, X, y], 0),
                               rtol=1e-6, atol=1e-8)


def test_emit_refused_row_is_a_compile_error(user):
    done = _emit(user, "uses_pad", "array-api")
    assert done.returncode != 0
    assert "`pad` has no equivalent in array-api" in done.stderr


def test_emit_cupy_imports_cupy(user):
    done = _emit(user, "loss", "cupy", "--wrt", "w")
    assert done.returncode == 0, done.stderr
    assert "import cupy as xp" in done.stdout
    assert "xp.exp(" in done.stdout  # NumPy's names: CuPy has them


def test_vjp_and_jvp_on_array_api_strict(user):
    w, X, y = _data()
    args = (xs.asarray(w), xs.asarray(X), xs.asarray(y))
    out, vjp_fn = sg.vjp(user.loss, *args)
    grads = vjp_fn(xs.asarray(1.0))
    assert all(type(g) is type(args[0]) for g in grads)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(grads[i]), numeric_grad(user.loss, [w, X, y], i),
                                   rtol=1e-6, atol=1e-8)
    v = np.random.default_rng(5).standard_normal(3)
    value, tangent = sg.jvp(user.loss, args, (xs.asarray(v), xs.asarray(0 * X), xs.asarray(0 * y)))
    assert type(tangent) is type(args[0])
    np.testing.assert_allclose(float(tangent), numeric_grad(user.loss, [w, X, y], 0) @ v, rtol=1e-6)
    np.testing.assert_allclose(float(value), user.loss(w, X, y), rtol=1e-12)


def test_container_arguments_of_other_libraries_say_not_yet(tmp_path):
    path = tmp_path / "pair_user.py"
    path.write_text("import numpy as np\n\n\ndef f(p):\n    return np.sum(p[0] * p[1])\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location("pair_user", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(NotImplementedError, match="array_api_strict arrays as arguments: not yet"):
        sg.grad(mod.f)((xs.asarray([1.0, 2.0]), xs.asarray([3.0, 4.0])))


def test_tensordot_bar_of_a_0d_cotangent_in_a_namespace_that_refuses_0d_operands(monkeypatch):
    """CuPy's namespace (array_api_compat.cupy) refuses tensordot of a 0-d operand with
    empty axes, which NumPy's takes (seen on a GPU: `np.dot(x, y)` of two vectors raised
    ValueError in its gradient); the helper writes that contraction as a product."""
    import types

    from srcgrad.rules import helpers

    def tensordot(a, b, axes=2):
        if np.ndim(a) == 0 or np.ndim(b) == 0:
            raise ValueError("An input is zero-dim while axes has dimensions")
        return np.tensordot(a, b, axes=axes)

    strict = types.SimpleNamespace(tensordot=tensordot, permute_dims=np.transpose)
    monkeypatch.setattr(helpers, "_namespace", lambda x: strict)
    c, y = np.asarray(0.5), np.arange(3.0)
    np.testing.assert_array_equal(helpers.tensordot_bar(c, y, "dot", (3,), 0), 0.5 * y)
    np.testing.assert_array_equal(helpers.tensordot_bar(c, y, "inner", (3,), 1), 0.5 * y)
    A = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(helpers.tensordot_bar(c, A, 2, (2, 3), 0), 0.5 * A)
