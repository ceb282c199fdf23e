"""sg.vjp's plain call (Note [The plain sg.vjp call] in srcgrad.pipeline.vjp_jvp): the
short path gives what the general one gives, checks cotangents the same way, and is
left for every call it does not cover. Values against central differences."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd.graph import saved_tensors_hooks
from srcgrad.pipeline import vjp_jvp
from tests.conftest import assert_close, numeric_grad


def loss(w, b, X):
    return np.mean(np.tanh(X @ w + b) ** 2)


def pair(x):
    return np.sin(x), np.cos(x)


RNG = np.random.default_rng(0)
W, X = RNG.standard_normal(3), RNG.standard_normal((5, 3))


def test_plain_call_takes_the_short_path_and_is_right():
    out, vjp_fn = sg.vjp(loss, W, 0.5, X)
    assert isinstance(vjp_fn, vjp_jvp._PlainVjpFn)
    assert_close(out, loss(W, 0.5, X))
    for ct in (1.0, np.float64(1.0), np.array(1.0)):
        grads = vjp_fn(ct)
        for i in range(3):
            assert_close(grads[i], numeric_grad(loss, (W, 0.5, X), i))
    assert "def loss_bwd(" in sg.source(vjp_fn)


def test_plain_call_checks_the_cotangent():
    _, vjp_fn = sg.vjp(loss, W, 0.5, X)
    with pytest.raises(ValueError, match=r"cotangent has shape \(2,\), but the output has shape \(\)"):
        vjp_fn(np.ones(2))
    with pytest.raises(ValueError, match="structure"):
        vjp_fn((1.0, 2.0))


def test_other_calls_take_the_general_path():
    _, vjp_fn = sg.vjp(pair, np.ones(3))  # a tuple output
    assert not isinstance(vjp_fn, vjp_jvp._PlainVjpFn)
    assert_close(vjp_fn((np.ones(3), np.zeros(3)))[0], np.cos(np.ones(3)))
    _, vjp_fn = sg.vjp(loss, W, 0.5, [X][0])
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        _, hooked = sg.vjp(loss, W, 0.5, X)
    assert not isinstance(hooked, vjp_jvp._PlainVjpFn)
    assert_close(hooked(1.0)[0], vjp_fn(1.0)[0])
    _, vjp_fn, aux = sg.vjp(lambda_free_aux, W, has_aux=True)
    assert not isinstance(vjp_fn, vjp_jvp._PlainVjpFn) and aux.shape == (3,)


def lambda_free_aux(w):
    return np.sum(w ** 2), w * 2.0
