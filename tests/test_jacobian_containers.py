"""sg.jacobian and sg.hessian of functions of tuple, list and dict arguments (issue 28:
an IndexError in generated code before), nested like JAX's: for each output leaf, each
argument's block is nested like the argument (`J['w']` has shape out.shape + w.shape),
and a Hessian nests twice (`H['w']['b']` is d2f / dw db, shape w.shape + b.shape).
Values against central differences (float64). Note [Jacobians of container arguments]."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close

W, B, C = np.array([0.3, 0.5]), np.array([1.2, -0.7, 0.4]), np.array([[0.2, -0.1], [0.6, 0.9]])


def loss(p):
    return np.sum(np.sin(p["w"]) * p["b"][:2] ** 2) + np.sum(p["b"] ** 3) * 0.1


def vec(p, c):
    return np.sin(p["w"]) * p["b"][0] + c @ p["w"]


def loss_tuple(t, c):
    w, b = t
    return np.sum(np.cos(w) * b[1:] * np.sum(c)) + np.sum(b ** 2) * w[0]


def loss_loop(p):
    acc = np.sum(p["w"]) * 0.0
    for i in range(3):
        acc = acc + np.sum(np.sin(p["w"] * (i + 1))) * np.sum(p["b"])
    return acc


def replace(value, path, new):
    """`value` (nested tuples/lists/dicts) with the leaf at `path` replaced by `new`."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: replace(v, rest, new) if k == head else v for k, v in value.items()}
    items = [replace(v, rest, new) if k == head else v for k, v in enumerate(value)]
    return type(value)(items)


def get(value, path):
    for p in path:
        value = value[p]
    return value


def fd(h, x, eps=1e-6):
    cols = []
    for i in range(x.size):
        step = np.zeros(x.size)
        step[i] = eps
        step = step.reshape(x.shape)
        cols.append((np.asarray(h(x + step)) - np.asarray(h(x - step))) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(np.shape(h(x)) + x.shape)


def d_leaf(f, args, argnum, path, eps=1e-6):
    """d f / d (the leaf at `path` of argument `argnum`), central differences."""
    def h(v):
        a = list(args)
        a[argnum] = replace(a[argnum], path, v)
        return f(*a)
    return fd(h, get(args[argnum], path), eps)


MODES = ["forward", "reverse", "auto"]


@pytest.mark.parametrize("mode", MODES)
def test_jacobian_of_a_dict_argument(mode):
    p = {"w": W, "b": B}
    jac = sg.jacobian(vec, wrt=(0, 1), mode=mode)(p, C)
    assert isinstance(jac, tuple) and set(jac[0]) == {"w", "b"}
    for key in ("w", "b"):
        assert jac[0][key].shape == (2,) + p[key].shape
        assert_close(jac[0][key], d_leaf(vec, (p, C), 0, (key,)), rtol=1e-6, atol=1e-8)
    assert jac[1].shape == (2, 2, 2)
    assert_close(jac[1], fd(lambda c: vec(p, c), C), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", [loss, loss_loop], ids=["straight", "for"])
def test_hessian_of_a_dict_argument(f):
    p = {"w": W, "b": B}
    hess = sg.hessian(f)(p)
    assert set(hess) == {"w", "b"} and all(set(hess[k]) == {"w", "b"} for k in hess)
    for k1 in ("w", "b"):
        for k2 in ("w", "b"):
            assert hess[k1][k2].shape == p[k1].shape + p[k2].shape
            want = d_leaf(lambda q, k1=k1: d_leaf(f, (q,), 0, (k1,), 1e-4), (p,), 0, (k2,), 1e-4)
            assert_close(hess[k1][k2], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("container", [tuple, list])
def test_hessian_and_jacobian_of_a_sequence_argument(container):
    t = container((W, B))
    hess = sg.hessian(loss_tuple, wrt=(0, 1))(t, C)
    # jax.hessian(f, (0, 1)): the gradient's tree (t's, then c's leaf), each leaf a tuple
    # over wrt of blocks nested like that argument: H[0][i][0][j] = d2f / dt_i dt_j
    assert isinstance(hess, tuple) and len(hess) == 2 and isinstance(hess[0], container)
    for i in range(2):
        assert isinstance(hess[0][i], tuple) and isinstance(hess[0][i][0], container)
        for j in range(2):
            want = d_leaf(lambda q, c, i=i: d_leaf(loss_tuple, (q, c), 0, (i,), 1e-4), (t, C), 0,
                          (j,), 1e-4)
            assert hess[0][i][0][j].shape == t[i].shape + t[j].shape
            assert_close(hess[0][i][0][j], want, rtol=1e-5, atol=1e-6)
        want = fd(lambda c, i=i: d_leaf(loss_tuple, (t, c), 0, (i,), 1e-4), C, 1e-4)  # d2f/dt_i dc
        assert hess[0][i][1].shape == t[i].shape + C.shape
        assert_close(hess[0][i][1], want, rtol=1e-5, atol=1e-6)
    grad = sg.jacobian(loss_tuple)(t, C)  # a scalar's Jacobian: the gradient, nested like t
    assert isinstance(grad, container)
    for i in range(2):
        assert_close(grad[i], d_leaf(loss_tuple, (t, C), 0, (i,)), rtol=1e-6, atol=1e-8)


def test_a_record_argument_is_refused():
    from collections import namedtuple

    Params = namedtuple("Params", "w b")
    with pytest.raises(TypeError, match="namedtuple, dataclass"):
        sg.jacobian(lambda q: np.sin(q.w) * q.b[0])(Params(W, B))
