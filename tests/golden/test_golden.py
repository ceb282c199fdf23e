"""Golden files: the exact source `srcgrad emit` writes for a few examples.

Generated code is a product: a change to it shows up here as a diff to review like
any code change. Regenerate with `SRCGRAD_UPDATE_GOLDEN=1 pytest tests/golden`.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import pytest

from srcgrad.api import emit_standalone

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

def _mlp(r):
    return [r.standard_normal(s) for s in ((4, 6), (6,), (6, 3), (3,), (5, 4), (5, 3))]


def _logistic(r):
    return [r.standard_normal(4), 0.1, r.standard_normal((7, 4)), (r.random(7) > 0.5) * 1.0]


def _softmax(r):
    return [r.standard_normal((4, 3)), r.standard_normal((6, 4)), np.eye(3)[r.integers(0, 3, 6)]]


CASES = [
    ("mlp_grad", "examples.mlp", "loss", ("W1", "b1", "W2", "b2"), _mlp),
    ("logistic_grad", "examples.logistic", "loss", ("w", "b"), _logistic),
    ("softmax_grad", "examples.softmax", "loss", ("W",), _softmax),
    ("elementwise_grad", "examples.elementwise", "f", ("x",), lambda r: [r.standard_normal(9)]),
    # a loop: one forward loop with a tape of only what the adjoint reads, one adjoint loop
    ("rnn_grad", "examples.rnn", "loss", ("Wx", "Wh", "b"),
     lambda r: [r.standard_normal((3, 4)) * 0.3, r.standard_normal((4, 4)) * 0.3, r.standard_normal(4),
                r.standard_normal((5, 2, 3)), r.standard_normal((2, 4))]),
]


@pytest.mark.parametrize("name,module,func,wrt,make", CASES, ids=[c[0] for c in CASES])
def test_emitted_source_matches_golden(name, module, func, wrt, make, monkeypatch):
    monkeypatch.chdir(ROOT)
    fn = getattr(importlib.import_module(module), func)
    text = emit_standalone(fn, wrt=wrt)
    path = HERE / f"{name}.py"
    if os.environ.get("SRCGRAD_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name}: run with SRCGRAD_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"emitted source of {module}:{func} changed; review the diff"


@pytest.mark.parametrize("name,module,func,wrt,make", CASES, ids=[c[0] for c in CASES])
def test_golden_module_runs_and_is_right(name, module, func, wrt, make):
    """The golden module, imported as a plain file, gives the gradients the test suite checks."""
    import srcgrad as sg

    namespace: dict = {}
    exec(compile((HERE / f"{name}.py").read_text(), f"{name}.py", "exec"), namespace)
    fn = getattr(importlib.import_module(module), func)
    args = make(np.random.default_rng(1))
    got = namespace[f"grad_{func}"](*args)
    want = sg.grad(fn, wrt=wrt)(*args)
    pairs = zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,))
    for a, b in pairs:
        np.testing.assert_allclose(a, b, rtol=1e-12)


# RK4 (examples/rk4.py): a `while` loop of 1000 steps, emitted for numba with the
# arguments' shapes (`srcgrad emit examples/rk4.py:loss --wrt p --backend numba --args
# "(4,), (2,)"`): the variant sg.grad(..., backend="numba") compiles, no shape plumbing
RK4_ARGS = (np.array([1.0, 0.5, 0.5, 1.0]), np.array([1.0, 0.5]))


def test_rk4_numba_module_matches_golden(monkeypatch):
    monkeypatch.chdir(ROOT)
    from examples.rk4 import loss

    text = emit_standalone(loss, wrt=("p",), backend="numba", args=RK4_ARGS)
    path = HERE / "rk4_grad.py"
    if os.environ.get("SRCGRAD_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), "emitted source of examples.rk4:loss changed; review the diff"


def _load_golden_module(tmp_path, name):
    """A golden numba module imported from a file of its own (numba caches beside it)."""
    pytest.importorskip("numba")
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text((HERE / f"{name}.py").read_text())
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rk4_golden_module_runs_and_is_right(tmp_path):
    import srcgrad as sg
    from examples.rk4 import loss

    module = _load_golden_module(tmp_path, "rk4_grad")
    assert module.grad_loss.__wrapped__ is not module.grad_loss  # the @_njit wrapper
    got = module.grad_loss(*RK4_ARGS)
    assert module.grad_loss.dispatcher.signatures, "numba compiled nothing: the Python ran"
    np.testing.assert_allclose(got, sg.grad(loss, wrt="p")(*RK4_ARGS), rtol=1e-12)
    # and arithmetic: central differences of the loss
    eps = 1e-6
    fd = [(loss(RK4_ARGS[0] + eps * e, RK4_ARGS[1]) - loss(RK4_ARGS[0] - eps * e, RK4_ARGS[1]))
          / (2 * eps) for e in np.eye(4)]
    np.testing.assert_allclose(got, fd, rtol=1e-6)


# The elementwise chain (examples/elementwise.py) emitted for numba with its argument's
# shape: the fusion pass's one loop over the values, forward and gradient (Note [Fused
# elementwise chains] in srcgrad.pipeline.fusion), `srcgrad emit examples/elementwise.py:f
# --backend numba --args "(1000,)"`
CHAIN_X = np.linspace(-2.0, 2.0, 1000)


def test_fused_chain_numba_module_matches_golden(monkeypatch):
    monkeypatch.chdir(ROOT)
    from examples.elementwise import f

    text = emit_standalone(f, wrt=("x",), backend="numba", args=(CHAIN_X,))
    path = HERE / "elementwise_numba_grad.py"
    if os.environ.get("SRCGRAD_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), "emitted source of examples.elementwise:f changed; review the diff"


def test_fused_chain_golden_module_runs_and_is_right(tmp_path):
    import srcgrad as sg
    from examples.elementwise import df_closed_form, f

    module = _load_golden_module(tmp_path, "elementwise_numba_grad")
    got = module.grad_f(CHAIN_X)
    assert module.grad_f.dispatcher.signatures, "numba compiled nothing: the Python ran"
    np.testing.assert_allclose(got, sg.grad(f)(CHAIN_X), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, df_closed_form(CHAIN_X), rtol=1e-12, atol=1e-15)
