"""sg.vmap over tuple, list, dict and namedtuple arguments (Note [Vmap of container
arguments] in srcgrad.vmapping): JAX's per-example gradient of a params dict,
`sg.vmap(sg.grad(loss), in_axes=(None, 0, 0))(params, X, Y)`, and in_axes given as a tree.
Every batched result is compared with a Python loop of the unbatched function, exactly
(1e-12); the unbatched gradients are themselves gradchecked elsewhere (test_vmap.py's
loop reference is the transform the suite checks against finite differences)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import srcgrad as sg

Params = namedtuple("Params", ["w", "b"])


def loss(p, x, y):
    z = x @ p["w"] + p["b"]
    return np.sum((np.tanh(z) - y) ** 2)


def record_loss(p, x, y):
    return np.sum((np.tanh(x @ p.w + p.b) - y) ** 2)


def pair(xs, scale):
    a, b = xs
    return np.sin(a) * b + scale * np.sum(a)


def listed(xs):
    return xs[0] * xs[1] - xs[2]


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    p = {"w": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}
    return p, rng.normal(size=(5, 3)), rng.normal(size=(5, 2))


def assert_tree_close(got, want):
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for k in want:
            assert_tree_close(got[k], want[k])
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_tree_close(g, w)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def stack(trees):
    """A list of per-example trees as one tree of stacked arrays."""
    first = trees[0]
    if isinstance(first, dict):
        return {k: stack([t[k] for t in trees]) for k in first}
    if isinstance(first, tuple) and not hasattr(first, "_fields"):
        return tuple(stack([t[i] for t in trees]) for i in range(len(first)))
    if hasattr(first, "_fields"):
        return type(first)(*(stack([t[i] for t in trees]) for i in range(len(first))))
    return np.stack(trees)


def test_per_example_gradients_of_a_params_dict(data):
    p, X, Y = data
    g = sg.grad(loss)
    got = sg.vmap(g, in_axes=(None, 0, 0))(p, X, Y)
    assert_tree_close(got, stack([g(p, X[i], Y[i]) for i in range(5)]))


def test_value_and_grad_of_a_params_dict(data):
    p, X, Y = data
    vg = sg.value_and_grad(loss)
    value, grads = sg.vmap(vg, in_axes=(None, 0, 0))(p, X, Y)
    loop = [vg(p, X[i], Y[i]) for i in range(5)]
    np.testing.assert_allclose(value, [v for v, _ in loop], rtol=1e-12)
    assert_tree_close(grads, stack([gr for _, gr in loop]))


def test_gradients_wrt_several_arguments_with_a_dict(data):
    p, X, Y = data
    g = sg.grad(loss, wrt=(0, 1))
    got = sg.vmap(g, in_axes=(None, 0, 0))(p, X, Y)
    assert_tree_close(got, stack([g(p, X[i], Y[i]) for i in range(5)]))


def test_in_axes_as_a_tree_maps_some_leaves(data):
    p, X, Y = data
    rng = np.random.default_rng(4)
    pb = {"w": p["w"], "b": rng.normal(size=(5, 2))}  # one bias per example, w shared
    g = sg.grad(loss)
    got = sg.vmap(g, in_axes=({"w": None, "b": 0}, 0, 0))(pb, X, Y)
    want = stack([g({"w": p["w"], "b": pb["b"][i]}, X[i], Y[i]) for i in range(5)])
    assert_tree_close(got, want)


def test_a_mapped_dict_of_per_example_params(data):
    p, X, Y = data
    rng = np.random.default_rng(5)
    P = {"w": rng.normal(size=(5, 3, 2)), "b": rng.normal(size=(5, 2))}
    g = sg.grad(loss)
    got = sg.vmap(g)(P, X, Y)
    want = stack([g({"w": P["w"][i], "b": P["b"][i]}, X[i], Y[i]) for i in range(5)])
    assert_tree_close(got, want)


def test_a_namedtuple_of_params(data):
    p, X, Y = data
    params = Params(p["w"], p["b"])
    g = sg.grad(record_loss)
    got = sg.vmap(g, in_axes=(None, 0, 0))(params, X, Y)
    assert isinstance(got, Params)
    assert_tree_close(tuple(got), tuple(stack([g(params, X[i], Y[i]) for i in range(5)])))


def test_a_plain_function_of_a_mapped_tuple():
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(3, 4))
    got = sg.vmap(pair, in_axes=((0, 1), None))((a, b), 0.5)
    want = np.stack([pair((a[i], b[:, i]), 0.5) for i in range(4)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_plain_function_of_a_mapped_list():
    rng = np.random.default_rng(7)
    xs = [rng.normal(size=(4, 2)) for _ in range(3)]
    got = sg.vmap(listed)(xs)
    want = np.stack([listed([x[i] for x in xs]) for i in range(4)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_in_axes_tree_of_another_structure_names_the_argument(data):
    p, X, Y = data
    with pytest.raises(ValueError, match=r"in_axes for `p` is .* but the argument is"):
        sg.vmap(sg.grad(loss), in_axes=({"w": None}, 0, 0))(p, X, Y)


def test_leaves_of_different_batch_sizes_are_named(data):
    p, X, Y = data
    P = {"w": np.ones((4, 3, 2)), "b": np.ones((5, 2))}
    with pytest.raises(ValueError, match=r"`p\['w'\]` \(argument 0\) has size 4"):
        sg.vmap(sg.grad(loss))(P, X, Y)


def test_a_jacobian_of_container_arguments_is_refused_clearly(data):
    p, X, Y = data
    with pytest.raises(TypeError, match="tuple, list or dict arguments: not yet"):
        sg.vmap(sg.jacobian(loss), in_axes=(None, 0, 0))(p, X, Y)


def loss_of_arrays(w, b, x, y):
    return np.sum((np.tanh(x @ w + b) - y) ** 2)


def total_of_arrays(w, b, X, Y):
    return np.sum(sg.vmap(loss_of_arrays, in_axes=(None, None, 0, 0))(w, b, X, Y))


def total_of_a_dict(p, X, Y):
    return np.sum(sg.vmap(loss, in_axes=(None, 0, 0))(p, X, Y))


def test_grad_of_a_vmap_with_a_0d_argument(data):
    # the 0-d bias had no stand-in for the inner vmap's variant: a TypeError from the tracer
    p, X, Y = data
    w, b, y = p["w"][:, 0], np.zeros(()), Y[:, 0]
    got = sg.grad(total_of_arrays, wrt=(0, 1))(w, b, X, y)
    g = sg.grad(loss_of_arrays, wrt=(0, 1))
    want = [sum(g(w, b, X[i], y[i])[k] for i in range(5)) for k in range(2)]
    for gk, wk in zip(got, want):
        np.testing.assert_allclose(gk, wk, rtol=1e-12, atol=1e-12)


def test_grad_of_a_vmap_of_a_dict_is_refused_at_the_line(data):
    p, X, Y = data
    with pytest.raises(sg.CompileError, match="tuple, list or dict argument") as err:
        sg.grad(total_of_a_dict)(p, X, Y)
    assert err.value.lineno is not None and "test_vmap_containers.py" in err.value.filename
