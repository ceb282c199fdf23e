"""sg.Tensor's softmax and log_softmax as one node each (torch's SoftmaxBackward0 and
LogSoftmaxBackward0: rules/torch_rows.py), and the renderer fix they exposed: a keyword
equal to the row's default was dropped from every call in the formula, also from a call
whose own default differs (`xp.max(x, axis=axis)` with axis=-1 rendered as a max over
every axis). Values are checked by arithmetic: rows of softmax sum to 1, log_softmax is
its log, and the gradients match central differences (the table's gradcheck checks the
rows at first and second order too)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.codegen.emit import _callee_default_is
from tests.conftest import numeric_grad


def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_one_node_with_the_value_and_gradient_of_arithmetic(name, dim):
    rng = np.random.default_rng(2)
    a, w = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    x = sg.tensor(a, requires_grad=True)
    y = getattr(x, name)(dim)
    want = _softmax(a, dim) if name == "softmax" else np.log(_softmax(a, dim))
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12, atol=1e-15)
    assert y.grad_fn.name() == ("SoftmaxBackward0" if name == "softmax" else "LogSoftmaxBackward0")
    (y * sg.tensor(w)).sum().backward()

    def value(v):
        s = _softmax(v, dim)
        return np.sum((s if name == "softmax" else np.log(s)) * w)
    np.testing.assert_allclose(x.grad.numpy(), numeric_grad(value, [a], 0), rtol=1e-6, atol=1e-8)


def test_a_row_default_is_dropped_only_where_the_callee_has_it_too():
    import ast

    call = ast.parse("xp.max(x, axis=axis)", mode="eval").body.func
    assert not _callee_default_is(call, "axis", -1)  # numpy.max's axis defaults to None
    assert _callee_default_is(call, "axis", None)
    sort = ast.parse("xp.sort(x, axis=axis)", mode="eval").body.func
    assert _callee_default_is(sort, "axis", -1)  # numpy.sort's own default is -1
