"""sg.vmap of an `if` on a mapped test whose branch holds a `for` loop over a range (fuzz:
"an `if` on a mapped test whose branch holds `for_range`", refused before). Both branches
run for every example, the loop batched as any loop, then one value is chosen per example
(passes/batch_control._select); a `while` there stays refused: on an example that does not
take the branch its test may never turn false.

Truth is arithmetic: the vmap against a loop over examples, and sg.grad of a function of
the vmap (and the vmap of sg.jvp) against central differences."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError

V = np.array([[0.3, -0.2, 0.5], [-1.5, 0.7, 0.1], [0.4, 1.1, -2.0], [-0.3, -0.4, -0.5]])


def loop_in_then(x):
    y = x * 1.0
    if np.sum(x) > 0:
        for _ in range(3):
            y = np.tanh(y * x + 1.0)
    else:
        y = -x * 2.0
    return np.sum(y ** 2)


def accumulated_in_a_branch(x):
    acc = 0.0
    if x[0] > 0:
        for i in range(4):
            acc = acc + np.sum(np.exp(x * i * 0.3))
    return acc + np.sum(x)


def written_in_a_branch(x):
    y = x * 1.0
    if np.sum(x) > 0:
        for i in range(2):
            y[i] = y[i] * x[2]
    return np.sum(y ** 3)


def loops_in_both(x):
    y, z = x * 1.0, x * 0.5
    if x[1] > 0:
        for _ in range(3):
            y = np.sin(y) * x
    else:
        for _ in range(2):
            z = np.cos(z) + x * z
    return np.sum(y * z)


def branch_in_a_loop_in_a_branch(x):
    s = 0.0
    for j in range(2):
        if x[j] > 0:
            for i in range(2):
                s = s + np.sum(np.tanh(x * s + i))
        else:
            s = s * 2.0 + x[j]
    return s


FUNCTIONS = [loop_in_then, accumulated_in_a_branch, written_in_a_branch, loops_in_both,
             branch_in_a_loop_in_a_branch]


def central_differences(f, x, h=1e-6):
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


@pytest.mark.parametrize("f", FUNCTIONS, ids=[f.__name__ for f in FUNCTIONS])
def test_vmap_equals_the_loop_over_examples(f):
    assert {bool(np.sum(x) > 0) for x in V} == {True, False}  # both branches taken
    np.testing.assert_allclose(sg.vmap(f)(V), [f(x.copy()) for x in V], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("f", FUNCTIONS, ids=[f.__name__ for f in FUNCTIONS])
def test_gradient_of_the_vmap_equals_central_differences(f):
    got = sg.grad(lambda X: np.sum(sg.vmap(f)(X)))(V)
    np.testing.assert_allclose(got, [central_differences(f, x) for x in V], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("f", FUNCTIONS, ids=[f.__name__ for f in FUNCTIONS])
def test_vmap_of_jvp_equals_central_differences(f):
    u = np.array([1.0, -0.5, 0.25])
    got = sg.vmap(lambda x: sg.jvp(f, (x,), (u,))[1])(V)
    np.testing.assert_allclose(got, [central_differences(f, x) @ u for x in V], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("f", FUNCTIONS, ids=[f.__name__ for f in FUNCTIONS])
def test_vmap_of_grad_is_refused_at_the_loop_not_wrong(f):
    """The adjoint loop of the branch an example's probe does not take has no shapes yet."""
    with pytest.raises(CompileError, match="sg.vmap"):
        sg.vmap(sg.grad(f))(V)


def while_in_a_branch(x):
    y = x * 1.0
    if np.sum(x) > 0:
        while np.sum(y) < 10.0:  # never ends for an example with sum(x) <= 0
            y = y * 2.0
    return np.sum(y)


def test_a_while_in_a_branch_stays_refused():
    with pytest.raises(CompileError, match="holds `while_loop`"):
        sg.vmap(while_in_a_branch)(V)
