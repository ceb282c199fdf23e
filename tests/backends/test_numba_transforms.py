"""backend="numba" on sg.vjp, sg.jvp, sg.jacobian, sg.hessian, @sg.compile and `srcgrad
emit --backend numba` (Note [The numba backend] in srcgrad.pipeline.numba_variants):
results equal NumPy's to 1e-12, and numba compiled the code that ran (its records, or
the emitted module's dispatcher). Skipped without numba."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.pipeline import numba_variants

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _numba_even_where_slower(monkeypatch):
    # these check numba's arithmetic; at 5 elements the speed rule is the timer's noise
    monkeypatch.setattr(numba_variants, "SLOWER", float("inf"))


def f(x, w):
    # no exp/tanh/sin/cos: their kernels (tests/test_numba_math.py) would triple each of
    # this file's numba compiles
    return np.arctan(x * w) * np.sqrt(1.0 + x * x) + np.log1p(x * x) ** 2


def s(x, w):
    return np.sum(f(x, w) * x)


X, W, CT = np.linspace(-1, 1, 5), np.linspace(0.3, 0.9, 5), np.arange(5.0) - 2


def _close(got, want):
    for a, b in zip(got, want):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _taken(compiled):
    records = list(compiled.numba_records.values())
    assert records and all(r.backend == "numba" for r in records), [r.line() for r in records]


def test_vjp_forward_and_backward_compiled_by_numba():
    out, vjp_fn = sg.vjp(f, X, W, backend="numba")
    want_out, want_fn = sg.vjp(f, X, W)
    _close([out], [want_out])
    _close(vjp_fn(CT), want_fn(CT))
    _close(vjp_fn(2 * CT), want_fn(2 * CT))  # the backward compiled once, called again
    _taken(vjp_fn.__srcgrad__)
    assert len(vjp_fn.__srcgrad__.numba_records) == 2  # the forward and the backward
    assert "numba (compiled" in sg.explain(vjp_fn) or "loaded" in sg.explain(vjp_fn)


def test_jvp_compiled_by_numba():
    out, tout = sg.jvp(f, (X, W), (CT, CT[::-1].copy()), backend="numba")
    want = sg.jvp(f, (X, W), (CT, CT[::-1].copy()))
    _close([out, tout], want)
    from srcgrad.pipeline import vjp_jvp

    _taken(next(c for k, c in vjp_jvp._JVP.items() if len(k) == 4 and k[3] == "numba"
                and c.fn_name == "f"))


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_by_numba_passes(mode):
    got = sg.jacobian(f, wrt=(0, 1), mode=mode, backend="numba")(X, W)
    _close(got, sg.jacobian(f, wrt=(0, 1), mode=mode)(X, W))


def test_hessian_by_numba_passes():
    got = sg.hessian(s, wrt=0, backend="numba")(X, W)
    want = sg.hessian(s, wrt=0)(X, W)
    _close([got], [want])
    # and arithmetic: a central difference of the gradient
    eps, g = 1e-6, sg.grad(s)
    fd = np.stack([(g(X + eps * e, W) - g(X - eps * e, W)) / (2 * eps) for e in np.eye(5)], 1)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)


def test_compile_with_numba_backend():
    c = sg.compile(s, backend="numba")
    g = c.grad((0, 1))
    _close(g(X, W), sg.grad(s, (0, 1))(X, W))
    _taken(g.__srcgrad__)
    _close(c.value_and_grad(0)(X, W)[1:], sg.value_and_grad(s)(X, W)[1:])
    out, vjp_fn = c.vjp(X, W)
    _close(vjp_fn(1.0), sg.vjp(s, X, W)[1](1.0))
    _close(c.jvp((X, W), (CT, CT)), sg.jvp(s, (X, W), (CT, CT)))
    t = sg.tensor(X, requires_grad=True)  # one node whose backward numba compiled
    c(t, W).backward()
    _close([t.grad.numpy()], [sg.grad(s)(X, W)])
    decorated = sg.compile(backend="numba")(s)
    assert decorated.backend == "numba"
    with pytest.raises(ValueError, match="backend='numba'"):
        sg.compile(s, backend="jax")


def test_transforms_refuse_an_unknown_backend():
    for call in (lambda: sg.vjp(f, X, W, backend="jax"),
                 lambda: sg.jvp(f, (X, W), (CT, CT), backend="jax"),
                 lambda: sg.jacobian(f, backend="jax"), lambda: sg.hessian(s, backend="jax")):
        with pytest.raises(ValueError, match="backend='numba'"):
            call()


def test_emit_backend_numba(tmp_path):
    src = tmp_path / "prog.py"
    src.write_text("import numpy as np\n\ndef s(x, w):\n"
                   "    return np.sum((np.arctan(x * w) * np.sqrt(1.0 + x * x)"
                   " + np.log1p(x * x) ** 2) * x)\n")
    out = tmp_path / "prog_grad.py"
    subprocess.run([sys.executable, "-m", "srcgrad", "emit", f"{src}:s", "--backend", "numba",
                    "--args", "(5,), (5,)", "-o", str(out)], check=True, capture_output=True)
    text = out.read_text()
    assert "import numba" in text and "@_njit\ndef grad_s(x, w):" in text
    assert "--backend numba" in text.splitlines()[2]
    sys.path.insert(0, str(tmp_path))
    try:
        import prog_grad
    finally:
        sys.path.remove(str(tmp_path))
    _close(prog_grad.grad_s(X, W), sg.grad(s, (0, 1))(X, W))
    assert prog_grad.grad_s.dispatcher.signatures, "numba compiled nothing"
    with pytest.raises(ValueError, match="emitted for arguments of the shapes"):
        prog_grad.grad_s(np.ones(3), np.ones(3))
