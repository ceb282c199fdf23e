"""What a variant writes for operands it knows are NumPy arrays (srcgrad.passes.array_spellings):
methods for reductions, and a render's `is None` test of such an operand decided; the
shape-generic code keeps both. Values against central differences."""

from __future__ import annotations

import numpy as np

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.test_batched_jacobians import _mlp_args, mlp_loss, second_differences


def contracted(a, b):
    return np.sum(np.tanh(np.einsum("ij,jk->ik", a, b)) ** 2)


def test_einsum_of_two_arrays_is_written_alone_in_a_variant():
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((3, 4)), rng.standard_normal((4, 2)))
    g = sg.grad(contracted, wrt=(0, 1))
    generic = sg.source(g)  # before a call: the shape-generic module
    grads = g(*args)
    variant = sg.source(g)
    assert "is None" in generic
    assert "is None" not in variant and "xp.einsum('ij,jk->ik', a, b)" in variant, variant
    for i in (0, 1):
        assert_close(grads[i], numeric_grad(contracted, args, i))


def test_batched_programs_spell_for_arrays():
    args = _mlp_args()
    H = sg.hessian(mlp_loss, wrt=1)
    got = H(*args)
    source = sg.source(H)
    assert "is None" not in source and "xp.sum(" not in source, source
    np.testing.assert_allclose(got, second_differences(mlp_loss, args, 1, 1), rtol=1e-5, atol=1e-6)


def traced(x):
    return np.sum(np.einsum("ii->i", x) * np.sin(x[0]))


def _code(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if not line.strip().startswith("#"))


def test_a_constant_none_operand_is_decided_everywhere_and_a_float_times_one_dropped():
    """einsum's absent second operand is the constant None: its test is decided in the
    generic module too; and a variant, knowing the arrays are floating point, drops the
    backward's `1.0 * v` (the seed of a sum times an array) as it drops `v * 1`."""
    x = np.random.default_rng(1).standard_normal((3, 3))
    g = sg.grad(traced)
    generic = _code(sg.source(g))
    assert "is None" not in generic
    grad = g(x)
    variant = _code(sg.source(g))
    assert "is None" not in variant and "1.0 *" not in variant and "* 1.0" not in variant, variant
    assert_close(grad, numeric_grad(traced, [x], 0))
