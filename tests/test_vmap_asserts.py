"""sg.vmap of a function with `assert`s (issue 28: every transform composes): the assert
holds for every example, as a Python loop of the function runs each example's. Before, the
batched `assert_true` was refused ("control flow, effects"), under vmap and vmap of a
gradient alike."""

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close


def asserts_on_a_scalar(x):
    y = np.sum(x * x)
    assert y >= 0.0, "non-negative"
    assert np.all(np.isfinite(x))
    return np.sin(y)


def asserts_a_bound(x):
    assert np.sum(x) < 10.0, "too big"
    return np.sum(x * 2.0)


def asserts_an_array(x):
    assert x > 0.0  # several elements per example: ambiguous, as Python says
    return np.sum(x)


X = np.array([[0.1, 0.2], [0.3, -0.4], [1.0, 2.0]])


def loop_of(fn, batch):
    return np.stack([np.asarray(fn(x)) for x in batch])


@pytest.mark.parametrize("transform", [lambda f: f, sg.grad], ids=["f", "grad"])
def test_asserts_that_hold_for_every_example(transform):
    fn = transform(asserts_on_a_scalar)
    assert_close(sg.vmap(fn)(X), loop_of(fn, X), rtol=1e-12)


def test_an_assert_one_example_fails_raises_its_message():
    batch = np.array([[1.0, 2.0], [20.0, 1.0]])
    with pytest.raises(AssertionError, match="too big"):
        asserts_a_bound(batch[1])
    with pytest.raises(AssertionError, match="too big"):
        sg.vmap(asserts_a_bound)(batch)
    with pytest.raises(AssertionError, match="too big"):
        sg.vmap(sg.grad(asserts_a_bound))(batch)
    assert_close(sg.vmap(asserts_a_bound)(batch[:1]), loop_of(asserts_a_bound, batch[:1]))


def test_an_assert_of_an_array_per_example_raises_as_python_does():
    with pytest.raises(ValueError, match="ambiguous"):
        asserts_an_array(X[0])
    with pytest.raises(ValueError, match="ambiguous"):
        sg.vmap(asserts_an_array)(X)
