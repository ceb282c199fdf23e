"""An einsum of one operand is often a view of it (`'ij->ji'`, `'ii->i'`), not a new
array: buffer reuse (srcgrad.passes.inplace) and workspace buffers (srcgrad.passes.
workspace) must never write into it, or they write into the operand: the gradient of
`np.einsum('ij->ji', x)` overwrote the caller's `x`, and a batched forward Jacobian
crashed writing into its read-only seeds (fuzz seed 930395). Values against central
differences; the arguments are checked unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.test_batched_jacobians import numeric_jacobian


def transposed_sine(x):
    y = np.einsum("ij->ji", x)
    z = np.sin(y) * 2.0
    return np.sum(z * x)


def diagonal_cosine(x):
    d = np.einsum("ii->i", x)
    return np.sum(np.cos(d) * 3.0) + np.sum(x * x)


@pytest.mark.parametrize("fn", [transposed_sine, diagonal_cosine])
def test_an_einsum_view_is_never_written_into(fn):
    x = np.random.default_rng(0).standard_normal((32, 32))  # large enough for buffer reuse
    before = x.copy()
    for _ in range(2):
        value, grad = sg.value_and_grad(fn)(x)
        np.testing.assert_array_equal(x, before)
        assert_close(value, fn(before.copy()))
    assert_close(grad, numeric_grad(fn, [before], 0), rtol=1e-5, atol=1e-6)
    assert "out=y)" not in sg.source(sg.value_and_grad(fn)) and "out=d)" not in sg.source(
        sg.value_and_grad(fn))


def transposed_sum(x1, x2):
    v = np.transpose(x2.reshape((4, 2, 3)), (1, 0, 2)) + x1.reshape((2, 1, 3))
    return np.sum(v)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_batched_jacobian_of_an_einsum_view_of_its_seeds(mode):
    rng = np.random.default_rng(1)
    args = (rng.standard_normal((3, 2, 1)), rng.standard_normal((2, 4, 3)))
    jac = sg.jacobian(transposed_sum, wrt=(0, 1), mode=mode)
    got = jac(*args)
    assert jac.fallback_reason is None, jac.fallback_reason
    for i in (0, 1):
        np.testing.assert_allclose(got[i], numeric_jacobian(transposed_sum, args, i)[0],
                                   rtol=1e-6, atol=1e-8)
