"""Every transform honours active saved-tensor hooks (issue 10 item 2, DESIGN decision 6):
under hooks that change what is saved, sg.grad / sg.value_and_grad give what sg.vjp
gives; with no hooks (before, after, identity hooks) the gradient is the exact one."""

from __future__ import annotations

import numpy as np

import srcgrad as sg
from srcgrad.autograd.graph import saved_tensors_hooks
from tests.conftest import assert_close, numeric_grad


def loss(x, w):
    return np.sum(np.sin(x) * x * w)


def loss_with_aux(x, w):
    return np.sum(np.tanh(x * w)), x.shape[0]


X, W = np.array([0.3, 0.7, -0.4]), np.array([1.5, -0.5, 2.0])


def test_grad_and_value_and_grad_pack_as_vjp_does():
    grad = sg.grad(loss, wrt=(0, 1))
    value_and_grad = sg.value_and_grad(loss, wrt=(0, 1))
    exact = [numeric_grad(loss, [X, W], i) for i in range(2)]
    for g, e in zip(grad(X, W), exact):  # bound to its variant's guards before the hooks
        assert_close(g, e)
    with saved_tensors_hooks(lambda a: a * 2.0, lambda a: a):  # changes every saved value
        _, vjp_fn = sg.vjp(loss, X, W)
        expected = vjp_fn(1.0)
        assert not np.allclose(expected[0], exact[0])
        for g, e in zip(grad(X, W), expected):
            assert_close(g, e)
        value, grads = value_and_grad(X, W)
        assert_close(value, loss(X, W))
        for g, e in zip(grads, expected):
            assert_close(g, e)
    for g, e in zip(grad(X, W), exact):  # hooks left: the hook-free variant again
        assert_close(g, e)


def test_identity_hooks_and_has_aux():
    grad = sg.grad(loss_with_aux, has_aux=True)
    with saved_tensors_hooks(lambda a: a, lambda a: a):
        g, aux = grad(X, W)
    assert aux == 3
    assert_close(g, numeric_grad(lambda x, w: loss_with_aux(x, w)[0], [X, W], 0))
