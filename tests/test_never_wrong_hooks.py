"""Every transform honours active saved-tensor hooks (issue 10 item 2, DESIGN decision 6):
under hooks that change what is saved, sg.grad / sg.value_and_grad give what sg.vjp
gives; with no hooks (before, after, identity hooks) the gradient is the exact one."""

from __future__ import annotations

import numpy as np
import pytest

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


class Cube(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x ** 3
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, _ = ctx.saved_tensors
        return g * 3.0 * x * x


def two_reshapes(x0):  # a Function's saved `reshape` and a formula's saved `reshape`
    return np.tile(x0, 3).reshape((3, 3)) * x0, Cube.apply(np.tile(x0, 2).reshape((2, 3)))


def test_function_pack_and_formula_pack_get_distinct_names():
    """Fuzz seed 7223: the formula's pack took the name of the Function's pack (names
    renumbered after tracing), so the backward read the wrong saved array."""
    x = np.array([-1.4, 1.3, 0.2])
    ct = (np.linspace(0.5, 1.5, 9).reshape(3, 3), np.linspace(-1.0, 1.0, 6).reshape(2, 3))

    def scalar(a):
        outs = two_reshapes(a)
        return np.sum(outs[0] * ct[0]) + np.sum(outs[1] * ct[1])

    exact = numeric_grad(scalar, [x], 0)
    with saved_tensors_hooks(lambda a: ("packed", np.array(a, copy=True)), lambda b: b[1]):
        out, vjp_fn = sg.vjp(two_reshapes, x)
        (g,) = vjp_fn(ct)
    assert_close(g, exact)
    assert_close(out[1], two_reshapes(x)[1])


def vector(x, w):
    return np.sin(x) * x * w


def test_jacobian_packs_as_vjp_does():
    """sg.jacobian in reverse mode (and "auto", which takes reverse mode under hooks, even
    where forward mode would take fewer passes) packs each saved value once and unpacks it
    for every row, as sg.vjp; forward mode saves nothing, so its hooks never run."""
    exact = sg.jacobian(vector, wrt=(0, 1), mode="forward")(X, W)
    counts = {"pack": 0, "unpack": 0}

    def pack(a):
        counts["pack"] += 1
        return a * 2.0

    def unpack(a):
        counts["unpack"] += 1
        return a

    with saved_tensors_hooks(pack, unpack):
        _, vjp_fn = sg.vjp(vector, X, W)
        rows = [vjp_fn(np.eye(3)[k]) for k in range(3)]
        expected = [np.stack([r[j] for r in rows]) for j in range(2)]
        assert not np.allclose(expected[0], exact[0])
        for mode in ("reverse", "auto"):
            counts.update(pack=0, unpack=0)
            got = sg.jacobian(vector, wrt=(0, 1), mode=mode)(X, W)
            for g, e in zip(got, expected):
                assert_close(g, e)
            assert counts["pack"] > 0 and counts["unpack"] == 3 * counts["pack"]
        counts.update(pack=0, unpack=0)  # one input element, three outputs: auto would be
        spread_jacobian = sg.jacobian(vector, mode="auto")(X[:1], W)  # forward, but reverse
        assert counts["pack"] > 0 and spread_jacobian.shape == (3, 1)  # mode packs here
        counts.update(pack=0, unpack=0)
        for g, e in zip(sg.jacobian(vector, wrt=(0, 1), mode="forward")(X, W), exact):
            assert_close(g, e)
        assert counts == {"pack": 0, "unpack": 0}
    for g, e in zip(sg.jacobian(vector, wrt=(0, 1), mode="auto")(X, W), exact):  # hooks left
        assert_close(g, e)


def test_hessian_packs_in_its_pass_over_the_gradient():
    """sg.hessian under hooks differentiates the gradient code in reverse mode (the pass
    that saves values), packing as sg.jacobian(sg.grad(f), mode="reverse") does."""
    hessian = sg.hessian(loss)
    exact = hessian(X, W)
    assert_close(exact, np.diag(numeric_grad(lambda a: np.sum(sg.grad(loss)(a, W)), [X], 0)), atol=1e-6)
    packed = []
    with saved_tensors_hooks(lambda a: packed.append(1) or a, lambda a: a):  # identity: exact
        assert_close(hessian(X, W), exact)
    assert packed
    with saved_tensors_hooks(lambda a: a * 2.0, lambda a: a):  # changes every saved value
        expected = sg.jacobian(sg.grad(loss), mode="reverse")(X, W)
        assert not np.allclose(expected, exact)
        assert_close(hessian(X, W), expected)
    assert_close(hessian(X, W), exact)


@pytest.mark.parametrize("transform", ["grad", "vjp"])
def test_hooks_of_one_thread_are_not_skipped_by_guards_another_thread_bound(transform):
    """Hooks are per thread, a transform's guards per process (Note [Modes the guards
    test]): a thread without hooks binding the guards while another thread has hooks
    active must not make that thread's calls skip its hooks."""
    import threading

    g = sg.grad(loss, wrt=(0, 1))

    def call():
        if transform == "grad":
            return g(X, W)[0]
        return sg.vjp(loss, X, W)[1](1.0)[0]

    call()
    packed, entered, bound, results = [], threading.Event(), threading.Event(), []

    def with_hooks():
        with saved_tensors_hooks(lambda a: packed.append(a) or a, lambda a: a):
            entered.set()
            bound.wait(10)
            results.append(call())

    def without_hooks():
        entered.wait(10)
        call(), call()  # a miss that binds the guards, then a call through them
        bound.set()

    threads = [threading.Thread(target=with_hooks), threading.Thread(target=without_hooks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert packed, "the hooked thread's call skipped its saved-tensor hooks"
    assert_close(results[0], numeric_grad(loss, [X, W], 0))
