"""Tuples, lists and dicts of arrays as arguments: gradients with the same structure."""

from __future__ import annotations

import numpy as np

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.corpus import containers_args as C

rng = np.random.default_rng(3)


def _leafwise(fn, args, index, key):
    """Central differences w.r.t. one leaf `key` of container argument `index`."""
    def with_leaf(leaf):
        container = args[index]
        replaced = dict(container) if isinstance(container, dict) else list(container)
        replaced[key] = leaf
        new = list(args)
        new[index] = replaced if not isinstance(container, tuple) else tuple(replaced)
        return fn(*new)

    return numeric_grad(with_leaf, [args[index][key]], 0)


def test_dict_of_parameters():
    params = {"W1": rng.standard_normal((3, 4)), "b1": rng.standard_normal(4),
              "W2": rng.standard_normal((4, 2))}
    x = rng.standard_normal((5, 3))
    g = sg.grad(C.mlp)(params, x)
    assert isinstance(g, dict) and list(g) == list(params)
    for key in params:
        assert_close(g[key], _leafwise(C.mlp, [params, x], 0, key), rtol=1e-5, atol=1e-7)


def test_list_of_layers_and_value_and_grad():
    ws = [rng.standard_normal((3, 3)) * 0.5 for _ in range(3)]
    x = rng.standard_normal((2, 3))
    value, g = sg.value_and_grad(C.layers)(ws, x)
    assert_close(value, C.layers(ws, x))
    assert isinstance(g, list) and len(g) == 3
    for i in range(3):
        assert_close(g[i], _leafwise(C.layers, [ws, x], 0, i), rtol=1e-5, atol=1e-7)
