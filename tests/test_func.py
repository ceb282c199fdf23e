"""sg.func (issue 32): torch.func's names over functions of sg.Tensors, on the compiled
transforms (Note [sg.func on the compiled transforms])."""

import numpy as np
import pytest

import srcgrad as sg

RNG = np.random.default_rng(1)
W = RNG.normal(size=(4, 3))
X = RNG.normal(size=(5, 3))
Y = RNG.normal(size=(5, 4))


def loss(W, x, y):
    return np.sum((np.tanh(W @ x) - y) ** 2)


def layer(W, x):
    return np.tanh(W @ x)


def t(a):
    return sg.tensor(a)


def central(f, a, eps=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (f(hi) - f(lo)) / (2 * eps)
    return g


def test_grad_returns_tensors_and_matches_finite_differences():
    g = sg.func.grad(loss)(t(W), t(X[0]), t(Y[0]))
    assert isinstance(g, sg.Tensor) and not g.requires_grad
    np.testing.assert_allclose(g.numpy(), central(lambda w: loss(w, X[0], Y[0]), W), rtol=1e-6, atol=1e-8)


def test_per_example_gradients_vmap_of_grad():
    pe = sg.func.vmap(sg.func.grad(loss), in_dims=(None, 0, 0))(t(W), t(X), t(Y))
    assert isinstance(pe, sg.Tensor) and pe.shape == (5, 4, 3)
    want = np.stack([sg.grad(loss)(W, x, y) for x, y in zip(X, Y)])
    np.testing.assert_allclose(pe.numpy(), want, rtol=1e-12, atol=1e-12)


def test_grad_and_value_order_and_its_vmap():
    g, v = sg.func.grad_and_value(loss)(t(W), t(X[0]), t(Y[0]))
    np.testing.assert_allclose(v.numpy(), loss(W, X[0], Y[0]), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), sg.grad(loss)(W, X[0], Y[0]), rtol=1e-12)
    gs, vs = sg.func.vmap(sg.func.grad_and_value(loss), in_dims=(None, 0, 0))(t(W), t(X), t(Y))
    np.testing.assert_allclose(vs.numpy(), [loss(W, x, y) for x, y in zip(X, Y)], rtol=1e-12)
    assert gs.shape == (5, 4, 3)


def test_jacrev_jacfwd_hessian():
    jr = sg.func.jacrev(layer)(t(W), t(X[0]))
    jf = sg.func.jacfwd(layer)(t(W), t(X[0]))
    want = sg.jacobian(layer)(W, X[0])
    np.testing.assert_allclose(jr.numpy(), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jf.numpy(), want, rtol=1e-12, atol=1e-12)
    jx = sg.func.jacfwd(layer, argnums=1)(t(W), t(X[0]))
    np.testing.assert_allclose(jx.numpy(), sg.jacobian(layer, wrt=1)(W, X[0]), rtol=1e-12, atol=1e-12)
    h = sg.func.hessian(loss, argnums=1)(t(W), t(X[0]), t(Y[0]))
    np.testing.assert_allclose(h.numpy(), sg.hessian(loss, wrt=1)(W, X[0], Y[0]), rtol=1e-12, atol=1e-12)


def test_vjp_and_jvp():
    out, vjp_fn = sg.func.vjp(layer, t(W), t(X[0]))
    gW, gx = vjp_fn(t(np.ones(4)))
    _, ref_fn = sg.vjp(layer, W, X[0])
    rW, rx = ref_fn(np.ones(4))
    np.testing.assert_allclose(gW.numpy(), rW, rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), rx, rtol=1e-12)
    out, tan = sg.func.jvp(layer, (t(W), t(X[0])), (t(np.ones_like(W)), t(np.zeros(3))))
    np.testing.assert_allclose(tan.numpy(), sg.jvp(layer, (W, X[0]), (np.ones_like(W), np.zeros(3)))[1],
                               rtol=1e-12)


def test_inputs_that_require_grad_are_refused_not_disconnected():
    with pytest.raises(RuntimeError, match="not be connected to the autograd graph"):
        sg.func.grad(loss)(sg.tensor(W, requires_grad=True), t(X[0]), t(Y[0]))
    with sg.no_grad():  # no graph is being built: the same values
        g = sg.func.grad(loss)(sg.tensor(W, requires_grad=True), t(X[0]), t(Y[0]))
    np.testing.assert_allclose(g.numpy(), sg.grad(loss)(W, X[0], Y[0]), rtol=1e-12)


GLOBAL = sg.tensor(X[0])


def closes_over_a_tensor(W):
    return np.sum(np.tanh(W @ GLOBAL.data))


def test_a_function_reading_a_global_tensor_compiles():
    # the resolver compared the global with `in (float32, float64)`: Tensor.__eq__ raised
    g = sg.func.grad(closes_over_a_tensor)(t(W))
    np.testing.assert_allclose(g.numpy(), central(closes_over_a_tensor, W), rtol=1e-6, atol=1e-8)
