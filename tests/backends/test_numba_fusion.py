"""The fusion pass (Note [Fused elementwise chains] in srcgrad.pipeline.fusion): the numba
rendering of an elementwise chain is one loop, and its gradients equal NumPy's (unfused)
to 1e-12, on one gradcheck case of each fusible row of the table. Skipped without numba.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.pipeline import fusion

pytest.importorskip("numba")
compiled_rules = pytest.importorskip("tests.rules.test_compiled_rules")


@pytest.fixture(autouse=True)
def _numba_even_where_slower(monkeypatch):
    """These check the loop's arithmetic, not the speed rule (as tests/backends/test_numba.py)."""
    from srcgrad.pipeline import numba_variants

    monkeypatch.setattr(numba_variants, "SLOWER", float("inf"))


def _one_shape(args: dict) -> bool:
    shapes = {np.shape(v) for v in args.values() if isinstance(v, np.ndarray) and np.ndim(v)}
    return len(shapes) == 1 and all(
        isinstance(v, np.ndarray) and v.dtype == np.float64 for v in args.values() if np.ndim(v))


def _fused_cases():
    """One case per fusible row: its operands' arrays all of one float64 shape."""
    chosen = {}
    for case in compiled_rules.VJP_CASES:
        rule, _, args = case
        if rule.name in fusion.FUSIBLE and rule.name not in chosen and _one_shape(args):
            chosen[rule.name] = case
    return list(chosen.values())


CASES = _fused_cases()


def _numba_source(g) -> str:
    (record,) = g.__srcgrad__.numba_records.values()
    assert record.backend == "numba", record.reason
    return inspect.getsource(record.dispatcher.py_func)


def _close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = float(np.max(np.abs(want[np.isfinite(want)]), initial=1.0)) if want.ndim else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale)


def test_every_fusible_row_with_gradcheck_cases_has_a_case_here():
    with_cases = {c[0].name for c in compiled_rules.VJP_CASES} & fusion.FUSIBLE
    assert {c[0].name for c in CASES} == with_cases


@pytest.mark.parametrize("rule,case_id,args", CASES, ids=compiled_rules.cases.case_ids(CASES))
def test_fused_gradient_equals_numpys(tmp_path, rule, case_id, args):
    # the row's value through arctan: a chain of three ops or more in the forward and the
    # gradient whichever row it is (`w * x`'s gradient alone is one op: nothing to fuse)
    module, wrt, values = compiled_rules._build(tmp_path, _Through(rule, "xp.arctan"), args)
    want = sg.grad(module.f, wrt=tuple(wrt))(*values)
    g = sg.grad(module.f, wrt=tuple(wrt), backend="numba")
    got = g(*values)
    for a, b in zip(got, want):
        _close(a, b)
    assert "for i in range(" in _numba_source(g), "the gradient's chain was not fused"


class _Through:
    """A row as _build reads it, its render wrapped in a call of `outer`."""

    def __init__(self, rule, outer):
        self.params, self.vjp, self.name = rule.params, rule.vjp, rule.name
        self.render = f"{outer}({rule.render})"


def chain(x):
    return np.sum(np.tanh(x) * np.exp(-x * x) + np.sin(x) ** 2)


def test_the_chain_and_its_gradient_are_one_loop():
    x = np.random.default_rng(0).standard_normal(1000)
    g = sg.grad(chain, backend="numba")
    _close(g(x), sg.grad(chain)(x))
    source = _numba_source(g)
    # one loop of vectorizable math, and libm's again only if sin/cos met |x| > 1e5
    fast, _, exact = source.partition("if _trig_beyond:")
    assert fast.count("for ") == 1 and fast.count("xp.empty(") == 1, source
    assert all(f"simd_{f}(" in fast for f in ("tanh", "exp", "sin", "cos")), source
    assert exact.count("for ") == 1 and "xp.sin(" in exact, source
    assert "for " not in sg.source(sg.grad(chain)), "NumPy's code fused (it is off there)"


def test_a_sum_at_the_chain_end_is_accumulated_in_the_loop():
    x = np.random.default_rng(1).standard_normal((30, 40))  # 2-D: ravel and reshape
    vg = sg.value_and_grad(chain, backend="numba")
    value, grad = vg(x)
    want_value, want_grad = sg.value_and_grad(chain)(x)
    assert abs(value - want_value) <= 1e-12 * abs(want_value)
    _close(grad, want_grad)
    source = _numba_source(vg)
    fast = source.partition("if _trig_beyond:")[0]
    assert fast.count("for ") == 1 and " += " in fast and ".ravel()" in fast, source


def normalized(x):
    s = np.sum(x * x)  # the chain's sum: a reader of it starts another loop
    return np.sum(np.sin(x) / s)


def test_a_reader_of_the_chains_sum_ends_the_chain():
    x = np.random.default_rng(2).standard_normal(50)
    g = sg.grad(normalized, backend="numba")
    got = g(x)
    _close(got, sg.grad(normalized)(x))
    eps = 1e-6  # and arithmetic: central differences
    fd = [(normalized(x + eps * e) - normalized(x - eps * e)) / (2 * eps) for e in np.eye(50)]
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-9)
    source = _numba_source(g)
    assert source.count("for ") >= 2, source


def test_vjp_forward_and_backward_fuse():
    x = np.random.default_rng(3).standard_normal((4, 5))
    out, vjp_fn = sg.vjp(lambda x: np.tanh(x) * np.exp(x) + 1.0, x, backend="numba")
    ct = np.random.default_rng(4).standard_normal((4, 5))
    want_out, want_fn = sg.vjp(lambda x: np.tanh(x) * np.exp(x) + 1.0, x)
    _close(out, want_out)
    (got,), (want,) = vjp_fn(ct), want_fn(ct)
    _close(got, want)


def weighted(x, k):
    return np.sum(np.sin(x) * k + np.exp(x * k))


def test_integer_arrays_are_read_as_numbers():
    x = np.random.default_rng(5).standard_normal(40) * 0.1
    k = np.arange(40) % 5 - 2
    g = sg.grad(weighted, backend="numba")
    _close(g(x, k), sg.grad(weighted)(x, k))
    assert "k_i = k[i]" in _numba_source(g)


def forces(x, w):
    for _ in range(3):  # the loop body's chains fuse, over broadcast shapes
        d = x[:, None, :] - x[None, :, :]
        r2 = np.sum(d * d, axis=-1) + w
        x = x + 0.01 * np.sum(d / (r2 * np.sqrt(r2))[:, :, None], axis=1)
    return np.sum(x * x)


def test_loop_bodies_broadcast_operands_and_sums_over_some_axes_fuse():
    x = np.random.default_rng(6).standard_normal((6, 2))
    g = sg.grad(forces, backend="numba")
    got = g(x, 0.5)
    _close(got, sg.grad(forces)(x, 0.5))
    eps = 1e-6  # and arithmetic: central differences
    fd = [(forces(x + eps * e, 0.5) - forces(x - eps * e, 0.5)) / (2 * eps)
          for e in np.eye(12).reshape(12, 6, 2)]
    np.testing.assert_allclose(got, np.reshape(fd, (6, 2)), rtol=1e-6, atol=1e-8)
    source = _numba_source(g)
    assert "_getitem[i, 0, i_2]" in source and "_sum[i, i_1] +=" in source, source


def broadcasts(x, y, z):
    a = np.tanh(x) * y  # y (3,) under x's (4, 3): read as y[i_1]
    b = np.sum(a * z, axis=0, keepdims=True)  # z (4, 1); keepdims: b[0, i_1] +=
    return np.sum(np.sin(b) * a) + np.sum(np.sum(np.exp(a) * x, axis=1, keepdims=True) * z)


def test_lower_rank_and_length_one_operands_and_keepdims_sums():
    rng = np.random.default_rng(7)
    args = (rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((4, 1)))
    g = sg.grad(broadcasts, wrt=(0, 1, 2), backend="numba")
    got, want = g(*args), sg.grad(broadcasts, wrt=(0, 1, 2))(*args)
    for a, b in zip(got, want):
        _close(a, b)
    eps = 1e-6
    for k, arg in enumerate(args):
        fd = np.zeros(arg.shape)
        for idx in np.ndindex(arg.shape):
            up, down = [a.copy() for a in args], [a.copy() for a in args]
            up[k][idx] += eps
            down[k][idx] -= eps
            fd[idx] = (broadcasts(*up) - broadcasts(*down)) / (2 * eps)
        np.testing.assert_allclose(got[k], fd, rtol=1e-6, atol=1e-8)
    source = _numba_source(g)
    assert "y_i = y[i_1]" in source and "z_i = z[i, 0]" in source and "b[0, i_1] +=" in source, source
