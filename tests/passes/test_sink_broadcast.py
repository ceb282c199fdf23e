"""A scalar broadcast to a shape and then scaled is scaled first (simplify's
`_sink_broadcast`): the broadcast disappears where it meets an operand of that shape,
and stays where the gradient itself is the broadcast. Values against central differences."""

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, import_source, numeric_grad

SOURCE = '''
import numpy as np

def mean_loss(w, x, y):
    z = x @ w
    return np.mean(np.logaddexp(0.0, z) - y * z)

def mean_only(x):
    return np.mean(x)

def scaled_sum(x, y):
    return -(3.0 * np.sum(x * y)) / 7.0
'''


@pytest.fixture(scope="module")
def m(tmp_path_factory):
    yield from import_source(tmp_path_factory, "sink_broadcast_cases", SOURCE)


def _variant_source(g) -> str:
    return g.__srcgrad__.module_source


def _grad_called(f, *args):
    g = sg.grad(f, wrt=tuple(range(len(args))))
    g(*args)
    return g  # its seed is the constant 1.0: simplify's algebra folds the broadcast


def test_a_mean_cotangent_is_never_broadcast_when_it_meets_full_arrays(m):
    rng = np.random.default_rng(0)
    w, x, y = rng.standard_normal(5), rng.standard_normal((7, 5)), rng.random(7)
    out, vjp_fn = sg.vjp(m.mean_loss, w, x, y)  # the cotangent is an argument: sunk
    grads = vjp_fn(1.0)
    assert "broadcast_to" not in _variant_source(vjp_fn)
    assert "broadcast_to" not in _variant_source(_grad_called(m.mean_loss, w, x, y))
    for i in range(3):
        assert_close(grads[i], numeric_grad(m.mean_loss, (w, x, y), i))


def test_a_gradient_that_is_the_broadcast_keeps_its_shape(m):
    x = np.arange(6.0).reshape(2, 3)
    g = sg.grad(m.mean_only)
    out = g(x)
    assert out.shape == (2, 3)
    assert_close(out, numeric_grad(m.mean_only, (x,), 0))


def test_scaled_sums_in_both_orders(m):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    gx, gy = sg.grad(m.scaled_sum, wrt=(0, 1))(x, y)
    assert_close(gx, numeric_grad(m.scaled_sum, (x, y), 0))
    assert_close(gy, numeric_grad(m.scaled_sum, (x, y), 1))
