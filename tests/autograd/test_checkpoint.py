"""sg.utils.checkpoint: gradients equal the un-checkpointed ones; the forward is recomputed."""

import numpy as np
import pytest

import srcgrad as sg
import srcgrad.nn.functional as F
from srcgrad.utils.checkpoint import (
    CheckpointError,
    checkpoint,
    checkpoint_sequential,
    set_checkpoint_early_stop,
)


def _params():
    sg.manual_seed(3)
    W = sg.randn(4, 4, dtype=sg.float64, requires_grad=True)
    x = sg.randn(3, 4, dtype=sg.float64, requires_grad=True)
    return W, x


def _grads(loss_fn, *leaves):
    for t in leaves:
        t.grad = None
    loss_fn().backward()
    return [t.grad.numpy().copy() for t in leaves]


@pytest.mark.parametrize("reentrant", [False, True])
def test_gradients_equal_the_uncheckpointed_ones_and_the_forward_runs_again(reentrant):
    W, x = _params()
    calls = []

    def block(a, scale=1.0):  # W is closed over: its gradient must arrive too
        calls.append(1)
        return (a @ W).tanh().exp().sin() * scale

    plain = _grads(lambda: block(x).sum(), W, x)
    calls.clear()
    W.grad = x.grad = None
    y = checkpoint(block, x, use_reentrant=reentrant)
    assert len(calls) == 1
    y.sum().backward()
    assert len(calls) == 2  # recomputed in backward
    np.testing.assert_array_equal(W.grad.numpy(), plain[0])
    np.testing.assert_array_equal(x.grad.numpy(), plain[1])


def test_nothing_computed_is_kept_by_the_checkpointed_nodes():
    W, x = _params()
    y = checkpoint(lambda a: (a @ W).exp(), x)
    node = y.grad_fn  # ExpBackward0 saved its result: a handle only, no array
    assert node._packed is not None and all(s is None for s in node._saved)


def test_non_reentrant_supports_grad_inputs_and_double_backward():
    W, x = _params()

    def block(a):
        return (a @ W).tanh().exp().sin()

    g_ck = sg.autograd.grad(checkpoint(block, x).sum(), [x, W], create_graph=True)
    g = sg.autograd.grad(block(x).sum(), [x, W], create_graph=True)
    for a, b in zip(g_ck, g):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-14)
    (h_ck,) = sg.autograd.grad(g_ck[0].sum(), [W])
    (h,) = sg.autograd.grad(g[0].sum(), [W])
    np.testing.assert_allclose(h_ck.numpy(), h.numpy(), rtol=1e-12)


def test_kwargs_and_nested_checkpoints():
    W, x = _params()

    def inner(a):
        return (a @ W).sin()

    def outer(a, *, shift):
        return checkpoint(inner, a + shift).exp()

    plain = _grads(lambda: inner(x + 0.5).exp().sum(), W, x)
    got = _grads(lambda: checkpoint(outer, x, shift=0.5).sum(), W, x)
    for a, b in zip(got, plain):
        np.testing.assert_allclose(a, b, rtol=1e-14)


@pytest.mark.parametrize("reentrant", [False, True])
def test_random_ops_replay_the_forward_draws(reentrant):
    W, x = _params()

    def block(a):
        return F.dropout(a @ W, p=0.5).sin()

    sg.manual_seed(11)
    plain = _grads(lambda: block(x).sum(), W, x)
    sg.manual_seed(11)
    got = _grads(lambda: checkpoint(block, x, use_reentrant=reentrant).sum(), W, x)
    np.testing.assert_array_equal(got[0], plain[0])
    np.testing.assert_array_equal(got[1], plain[1])


def test_a_recomputation_saving_less_is_torch_s_checkpoint_error():
    x = sg.tensor([0.1, 0.2], dtype=sg.float64, requires_grad=True)
    n = [0]

    def f(a):
        n[0] += 1
        return a.exp().sin() if n[0] == 1 else a.exp() * 2

    y = checkpoint(f, x)
    # torch 2.14.1: CheckpointError (a RuntimeError) with this first line and the two counts
    with pytest.raises(CheckpointError, match="A different number of tensors was saved during "
                                              "the original forward and recomputation"):
        y.sum().backward()


def test_early_stop_ends_the_recomputation_at_the_last_saved_value():
    x = sg.tensor([0.1, 0.2], dtype=sg.float64, requires_grad=True)
    reached = []

    def f(a):
        y = a.exp()
        reached.append(1)  # after exp's save, the one value this forward saves
        return y

    checkpoint(f, x).sum().backward()
    assert len(reached) == 1  # the recomputation stopped at exp's save
    with set_checkpoint_early_stop(False):
        y = checkpoint(f, x)
    y.sum().backward()
    assert len(reached) == 3 and x.grad.tolist() == pytest.approx(2 * np.exp([0.1, 0.2]))


def test_checkpoint_sequential_matches_the_plain_chain():
    W, x = _params()
    fns = [lambda a: a @ W, sg.tanh, lambda a: a.exp(), sg.sin, lambda a: a * 3]
    plain = _grads(lambda: _chain(fns, x).sum(), W, x)
    got = _grads(lambda: checkpoint_sequential(fns, 2, x).sum(), W, x)
    for a, b in zip(got, plain):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def _chain(fns, x):
    for f in fns:
        x = f(x)
    return x


def test_reentrant_refuses_kwargs_as_torch():
    with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
        checkpoint(lambda a, k: a, sg.ones(1), use_reentrant=True, k=1)
