"""Namedtuples and dataclasses as arguments (Note [Records] in srcgrad.ir.tree): fields
read as `p.W`, methods and properties of a model class inlined, gradients returned in the
same record type with configuration fields unchanged. Checked against central differences."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close


class Params(NamedTuple):
    W: np.ndarray
    b: np.ndarray


@dataclasses.dataclass
class Layer:
    W: np.ndarray
    b: np.ndarray
    activation: str = "tanh"
    scale_by: float = 2.0

    def __call__(self, x):
        return self.hidden(x) * self.scale_by

    def hidden(self, x):
        z = x @ self.W + self.b
        return np.tanh(z) if self.activation == "tanh" else np.maximum(z, 0.0)

    @property
    def norm(self):
        return np.sum(self.W ** 2)


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: np.ndarray


def loss_params(p, x):
    W, b = p  # unpacking a namedtuple works as in Python
    return np.sum(np.tanh(x @ p.W + b) ** 2)


def loss_layer(layer, x):
    return np.sum(layer(x) ** 2) + 0.1 * layer.norm


def loss_frozen(f, x):
    return np.sum(np.sin(f.w * x))


RNG = np.random.default_rng(7)
W, B, X = RNG.standard_normal((3, 2)), RNG.standard_normal(2), RNG.standard_normal((4, 3))


def _fd(f, record, x, field, eps=1e-6):
    """Central differences of f(record, x) w.r.t. one array field."""
    value = np.asarray(getattr(record, field), dtype=float)
    out = np.zeros_like(value)
    for i in np.ndindex(value.shape):
        step = np.zeros_like(value)
        step[i] = eps
        plus = dataclasses.replace(record, **{field: value + step}) if dataclasses.is_dataclass(record) \
            else record._replace(**{field: value + step})
        minus = dataclasses.replace(record, **{field: value - step}) if dataclasses.is_dataclass(record) \
            else record._replace(**{field: value - step})
        out[i] = (f(plus, x) - f(minus, x)) / (2 * eps)
    return out


def test_namedtuple_argument_gives_a_namedtuple_gradient():
    p = Params(W, B)
    g = sg.grad(loss_params)(p, X)
    assert type(g) is Params
    assert_close(g.W, _fd(loss_params, p, X, "W"), rtol=1e-5)
    assert_close(g.b, _fd(loss_params, p, X, "b"), rtol=1e-5)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_model_class_methods_and_properties_are_inlined(activation):
    layer = Layer(W, B, activation=activation)
    value, g = sg.value_and_grad(loss_layer)(layer, X)
    assert np.isclose(value, loss_layer(layer, X))
    assert type(g) is Layer and g.activation == activation  # a string field is configuration
    assert_close(g.scale_by, _fd(loss_layer, layer, X, "scale_by"), rtol=1e-5)  # a float is data
    assert_close(g.W, _fd(loss_layer, layer, X, "W"), rtol=1e-5)
    assert_close(g.b, _fd(loss_layer, layer, X, "b"), rtol=1e-5)


def test_frozen_dataclass_and_vjp_of_records():
    f = Frozen(RNG.standard_normal(3))
    x = RNG.standard_normal(3)
    g = sg.grad(loss_frozen)(f, x)
    assert type(g) is Frozen
    assert_close(g.w, np.cos(f.w * x) * x)
    out, vjp_fn = sg.vjp(loss_layer, Layer(W, B), X)
    g_layer, g_x = vjp_fn(1.0)
    assert_close(g_layer.b, _fd(loss_layer, Layer(W, B), X, "b"), rtol=1e-5)


def test_a_static_field_is_part_of_the_variant():
    tanh = sg.grad(loss_layer)(Layer(W, B, "tanh"), X)
    relu = sg.grad(loss_layer)(Layer(W, B, "relu"), X)
    assert not np.allclose(tanh.W, relu.W)
    assert_close(relu.W, _fd(loss_layer, Layer(W, B, "relu"), X, "W"), rtol=1e-5)


def test_assigning_to_a_record_field_is_a_clear_error():
    def bad(layer, x):
        layer.W = layer.W * 2.0
        return np.sum(layer(x))

    with pytest.raises(sg.CompileError, match=r"assigning to `\.W` of a `Layer` argument"):
        sg.grad(bad)(Layer(W, B), X)
