"""The rule table's gradcheck suite on CuPy arrays (Note [Array namespaces] in
srcgrad.backend): every case of tests/rules/cases.py, written as NumPy user code,
differentiated once and run on the GPU, against central differences of the same
function run on the GPU: the function as CuPy computes it, which NumPy's need not be
(eigh's eigenvectors may have other signs; of repeated writes `x[[0, 0]] = v` another
one may land), or by NumPy where CuPy cannot run the user's function. Skipped where
CuPy or a CUDA device is missing (`pip install 'srcgrad[cuda12]'`).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.cuda import cupy_or_skip

cp = cupy_or_skip()

import srcgrad as sg  # noqa: E402
from tests.conftest import numeric_grad  # noqa: E402
from tests.rules.test_compiled_rules import (  # noqa: E402
    _SYMMETRIC_INPUT,
    _build,
    _sym,
    compiled_cases,
)

VJP_CASES = compiled_cases("vjp")


def _gpu(value):
    return cp.asarray(value) if isinstance(value, np.ndarray) else value


def _on_gpu(f):
    """f of NumPy values, run on their CuPy copies (for central differences)."""
    return lambda *values: float(f(*[_gpu(v) for v in values]))


def _expected(f, values, i):
    """Central differences of f run on the GPU; NumPy's where the user's function itself
    does not run on CuPy arrays (`np.full` of a CuPy fill value, `np.column_stack` of 0-d
    arrays, `np.linalg.solve` broadcasting b's batch axes: CuPy refuses each), which
    its compiled gradient does."""
    try:
        return numeric_grad(_on_gpu(f), values, i)
    except (TypeError, ValueError):
        return numeric_grad(f, values, i)


@pytest.mark.parametrize("case", VJP_CASES, ids=[f"{c[0].name}-{c[1]}" for c in VJP_CASES])
def test_rule_gradient_on_cupy(tmp_path, case):
    rule, _, args = case
    module, wrt, values = _build(tmp_path, rule, args)
    grads = sg.grad(module.f, wrt=tuple(wrt))(*[_gpu(v) for v in values])
    for i, g in zip(wrt, grads):
        assert isinstance(g, cp.ndarray) or np.ndim(g) == 0, type(g)
        got = cp.asnumpy(g)
        expected = _expected(module.f, values, i)
        if rule.name in _SYMMETRIC_INPUT:
            got, expected = _sym(got), _sym(expected)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=f"argument {i}")


def test_numpy_then_cupy_same_shapes(tmp_path):
    path = tmp_path / "cupy_user.py"
    path.write_text("import numpy as np\n\n\ndef f(x, W):\n    return np.sum(np.tanh(x @ W) ** 2)\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location("cupy_user", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rng = np.random.default_rng(0)
    x, W = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    g = sg.grad(mod.f, wrt=1)
    on_cpu = g(x, W)
    on_gpu = g(cp.asarray(x), cp.asarray(W))
    assert isinstance(on_gpu, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(on_gpu), on_cpu, rtol=1e-10)
    np.testing.assert_allclose(on_cpu, numeric_grad(mod.f, [x, W], 1), rtol=1e-6, atol=1e-8)
