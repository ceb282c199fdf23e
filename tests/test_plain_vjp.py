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


# The guarded call (srcgrad.api._PLAIN_VJP): bound by a plain call, it serves the next
# calls of the same function with arguments like it, and no other.

K = 2.0


def scaled(x):
    return np.sum(K * np.sin(x) ** 2)


def grads_against_differences(f, args, vjp_fn, ct=1.0):
    grads = vjp_fn(ct)
    for i in range(len(args)):
        assert_close(grads[i], numeric_grad(f, args, i))


def test_repeated_plain_calls_run_the_guarded_call():
    from srcgrad import api

    sg.vjp(loss, W, 0.5, X)
    assert loss in api._PLAIN_VJP
    out, vjp_fn = api._PLAIN_VJP[loss]((W, 0.5, X))  # the guarded call itself answers
    assert isinstance(vjp_fn, vjp_jvp._PlainVjpFn)
    assert_close(out, loss(W, 0.5, X))
    grads_against_differences(loss, (W, 0.5, X), vjp_fn)


@pytest.mark.parametrize("args", [
    (RNG.standard_normal(4), 0.5, RNG.standard_normal((5, 4))),  # other shapes
    (W, np.array(0.5), X),  # a 0-d array where the bound call had a float
    (W, np.float64(0.5), X),
    (W, 0.5, np.asfortranarray(X)),  # not C-contiguous
    (W.astype(np.float32), 0.5, X),  # another dtype
])
def test_the_guarded_call_misses_on_other_arguments(args):
    from srcgrad import api

    sg.vjp(loss, W, 0.5, X)
    assert api._PLAIN_VJP[loss](args) is None
    out, vjp_fn = sg.vjp(loss, *args)
    assert_close(out, loss(*args), rtol=1e-5)
    if args[0].dtype == np.float64:
        grads_against_differences(loss, args, vjp_fn)


def test_the_guarded_call_misses_on_another_number_of_primals():
    sg.vjp(loss, W, 0.5, X)
    with pytest.raises(TypeError):
        sg.vjp(loss, W, 0.5)


def test_the_guarded_call_sees_a_rebound_global():
    global K
    x = np.linspace(-1.0, 1.0, 4)
    sg.vjp(scaled, x)
    try:
        K = 5.0
        out, vjp_fn = sg.vjp(scaled, x)
        assert_close(out, scaled(x))
        grads_against_differences(scaled, (x,), vjp_fn)
    finally:
        K = 2.0


def test_the_guarded_call_is_off_under_hooks_and_allow_mutation():
    from srcgrad.autograd.graph import allow_mutation_on_saved_tensors

    sg.vjp(loss, W, 0.5, X)
    packed = []
    with saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        _, vjp_fn = sg.vjp(loss, W, 0.5, X)
    assert packed
    grads_against_differences(loss, (W, 0.5, X), vjp_fn)
    with allow_mutation_on_saved_tensors():  # recorded in the mode: its backward must be too
        _, vjp_fn = sg.vjp(loss, W, 0.5, X)
    with pytest.raises(AssertionError, match="allow_mutation_on_saved_tensors"):
        vjp_fn(1.0)


def test_a_partial_binds_no_guarded_call_for_the_function_it_stands_for():
    """srcgrad.api looks guarded calls up by the callable it was given: a partial's plain
    stand-in would be an entry nothing reads (one per partial made)."""
    import functools

    from srcgrad import api

    p = functools.partial(loss, W)
    before = set(api._PLAIN_VJP)
    out, vjp_fn = sg.vjp(p, 0.5, X)
    assert set(api._PLAIN_VJP) == before
    assert_close(out, loss(W, 0.5, X))
    assert_close(vjp_fn(1.0)[1], numeric_grad(loss, (W, 0.5, X), 2))
