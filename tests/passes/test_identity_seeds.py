"""Contractions of identity seeds (Note [Identity seeds]): the rewrite against NumPy's
own tensordot of a real identity, its before/after IR, the ops it leaves alone, and
whole Jacobians and Hessians taking every seed in one chunk against differences and the
closed forms."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.ir.core import Const, Op, Var
from srcgrad.ir.expand import Namer
from srcgrad.ir.printer import print_ops
from srcgrad.passes.identity_seeds import _contracted_into, contract_identity_seeds
from tests.test_batched_jacobians import (
    _chunk_source,
    _mlp_args,
    mlp_loss,
    numeric_jacobian,
    second_differences,
)


def _identity(shape):
    n = int(np.prod(shape))
    return np.eye(n).reshape((n,) + shape)


@pytest.mark.parametrize("seed_shape, m_shape, axes", [
    ((3, 4), (3, 4, 5), ((1, 2), (0, 1))),  # M's leading axes, in order: a reshape
    ((3, 4), (4, 3, 5), ((1, 2), (1, 0))),  # swapped: a transpose first
    ((3, 4), (5, 4, 3), ((2, 1), (1, 2))),  # the seed's axes listed out of order
    ((3, 4), (3, 4, 5), 2),  # an int: the seed's last axes with M's first
    ((6,), (2, 6), ((1,), (1,))),
    ((6,), (2, 6), ((-1,), (-1,))),  # negative axes
    ((2, 3), (3, 2), ((1, 2), (1, 0))),  # nothing left of M: a vector per seed
])
def test_the_rewrite_is_numpys_tensordot_of_the_identity(seed_shape, m_shape, axes):
    rng = np.random.default_rng(0)
    seed, m, out = Var("seed"), Var("m"), Var("out")
    eye, value = _identity(seed_shape), rng.standard_normal(m_shape)
    expected = np.tensordot(eye, value, axes=axes)
    op = Op("tensordot", (seed, m, Const(axes)), (out,))
    perm = _contracted_into(op, seed, {seed: eye.shape, m: m_shape, out: expected.shape})
    assert perm is not None
    np.testing.assert_array_equal(np.transpose(value, perm).reshape(expected.shape), expected)


def test_before_and_after():
    seed, m, out, other = Var("seed"), Var("m"), Var("out"), Var("other")
    ops = [Op("tensordot", (seed, m, Const(((1, 2), (1, 0)))), (out,)),
           Op("add", (out, other), (Var("total"),))]
    shapes = {seed: (12, 3, 4), m: (4, 3, 5), out: (12, 5)}
    after = contract_identity_seeds(ops, seed, shapes, Namer())
    assert print_ops(after, indent="", with_loc=False).splitlines() == [
        "_transpose = transpose(m, (1, 0, 2))",
        "_reshape = reshape(_transpose, (12, 5))",
        "total = add(_reshape, other)",
    ]


@pytest.mark.parametrize("make", [
    lambda seed, m, out: Op("tensordot", (seed, m, Const(((1,), (0,)))), (out,)),  # a partial contraction
    lambda seed, m, out: Op("tensordot", (m, seed, Const(((0, 1), (1, 2)))), (out,)),  # the seed second
    lambda seed, m, out: Op("matmul", (seed, m), (out,)),
])
def test_other_ops_are_left_alone(make):
    seed, m, out = Var("seed"), Var("m"), Var("out")
    op = make(seed, m, out)
    shapes = {seed: (12, 3, 4), m: (3, 4, 4), out: (12, 4, 4)}
    assert contract_identity_seeds([op], seed, shapes, Namer()) == [op]


def mlp_out(W1, b1, W2, b2, X):
    return np.tanh(X @ W1 + b1) @ W2 + b2


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_jacobian_of_one_chunk_contracts_no_identity(mode):
    rng = np.random.default_rng(2)  # the benchmark's sizes, where fusion contracts the seed last
    W1, b1 = rng.standard_normal((32, 64)) / 6, rng.standard_normal(64) * 0.1
    W2, b2, X = rng.standard_normal((64, 10)) / 8, rng.standard_normal(10), rng.standard_normal((32, 32))
    args = (W1, b1, W2, b2, X)
    h = np.tanh(X @ W1 + b1)
    closed = (1.0 - h * h)[:, None, :] * W2.T[None, :, :]  # [n, o, j] = s[n, j] W2[j, o]
    whole = sg.jacobian(mlp_out, wrt=1, mode=mode)
    got = whole(*args)
    assert whole.fallback_reason is None, whole.fallback_reason
    kind = "jacfwd" if mode == "forward" else "jacrev"
    assert "tensordot" not in _chunk_source(whole, kind)
    np.testing.assert_allclose(got, closed, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got, numeric_jacobian(mlp_out, args, 1)[0], rtol=1e-6, atol=1e-8)
    chunked = sg.jacobian(mlp_out, wrt=1, mode=mode, chunk_size=48)  # not the identity: kept
    np.testing.assert_allclose(chunked(*args), closed, rtol=1e-12, atol=1e-14)
    assert "tensordot" in _chunk_source(chunked, kind)


def test_a_hessian_of_one_chunk():
    args = _mlp_args()
    H = sg.hessian(mlp_loss, wrt=(1, 2))  # two seed parameters: left as they were
    got = H(*args)
    for a, i in enumerate((1, 2)):
        for b, j in enumerate((1, 2)):
            np.testing.assert_allclose(got[a][b], second_differences(mlp_loss, args, i, j),
                                       rtol=1e-5, atol=1e-6)
    single = sg.hessian(mlp_loss, wrt=1)(*args)
    np.testing.assert_allclose(single, got[0][0], rtol=1e-12, atol=1e-14)
