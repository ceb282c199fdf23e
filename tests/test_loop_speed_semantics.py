"""Loops at compiler speed keep their meaning (issue 15).

* `break` and `return` leave the forward loop at once, and the adjoint loop runs the
  iterations that ran: a Newton iteration bounded by 100,000 steps that converges in
  a few stops there (the loop's own `print` counts the iterations it ran), and its
  gradient matches central differences.

Every gradient here is checked against central differences (tests.conftest).
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


# ---------------------------------------------------------------------- break / return
def newton_sqrt(a, n):
    """sqrt(a) by Newton's method: leaves the loop when the step is tiny."""
    x = a * 1.0
    for _i in range(n):
        dx = (x * x - a) / (2.0 * x)
        x = x - dx
        if np.max(np.abs(dx)) < 1e-12:
            break
    return np.sum(x * x * x)


def newton_counting(a, n):
    x = a * 1.0
    for _i in range(n):
        print("step")
        dx = (x * x - a) / (2.0 * x)
        x = x - dx
        if np.max(np.abs(dx)) < 1e-12:
            break
    return np.sum(x)


def newton_return(a, n):
    """`return` inside the loop: also leaves it at once."""
    x = a * 1.0
    for _i in range(n):
        print("step")
        dx = (x * x - a) / (2.0 * x)
        x = x - dx
        if np.max(np.abs(dx)) < 1e-12:
            return np.sum(x * a)
    return np.sum(x)


def strided_break(x, w):
    """A negative step from a non-zero start: the adjoint loop's indices are the ones that ran."""
    acc = x * 0.0
    for i in range(9, 0, -2):
        acc = acc + w[i] * np.sin(x * i)
        if np.sum(acc) > 1.5:
            break
    return np.sum(acc * acc)


def nested_break(x, w):
    """A break in the inner loop leaves only that loop; the outer one runs on."""
    h = x * 1.0
    for j in range(3):
        for i in range(10):
            h = np.tanh(h * w[i] + 0.1 * j)
            if np.sum(h) < 0.2 * i:
                break
        h = h + 0.5
    return np.sum(h * h)


def while_break(x):
    s = x * 0.0
    k = 0
    while True:
        s = s + np.cos(x * k)
        k = k + 1
        if k >= 7:
            break
    return np.sum(s * x)


def float_newton(a, n):
    """On Python floats (the math variant)."""
    x = a
    for _i in range(n):
        dx = (x * x - a) / (2.0 * x)
        x = x - dx
        if abs(dx) < 1e-12:
            break
    return x * x * x


RNG = np.random.default_rng(15)
CASES = [
    ("newton", newton_sqrt, lambda: [np.array([2.0, 3.0, 0.5]), 100_000], (0,)),
    ("newton-return", newton_return, lambda: [np.array([2.0, 3.0]), 100_000], (0,)),
    ("strided", strided_break, lambda: [np.array([0.3, 0.2]), RNG.uniform(0.5, 1.0, 10)], (0, 1)),
    ("nested", nested_break, lambda: [np.array([0.6, 0.9]), RNG.uniform(0.5, 1.5, 10)], (0, 1)),
    ("while-break", while_break, lambda: [np.array([0.4, 1.3])], (0,)),
]


@pytest.mark.parametrize("name,f,make,wrt", CASES, ids=[c[0] for c in CASES])
def test_breaking_loops_reverse_mode(name, f, make, wrt, capsys):
    args = make()
    grads = sg.grad(f, wrt=wrt)(*args)
    capsys.readouterr()
    for i, g in zip(wrt, grads):
        assert_close(g, numeric_grad(lambda *a: f(*a), args, i), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name,f,make,wrt", CASES, ids=[c[0] for c in CASES])
def test_breaking_loops_forward_mode(name, f, make, wrt, capsys):
    args = make()
    tangents = [np.linspace(0.5, 1.5, np.size(a)).reshape(np.shape(a)) if i in wrt
                else np.zeros_like(a) if isinstance(a, np.ndarray) else 0 for i, a in enumerate(args)]
    _, out_t = sg.jvp(f, args, tangents)
    capsys.readouterr()
    expected = sum(np.sum(numeric_grad(f, args, i) * tangents[i]) for i in wrt)
    assert_close(out_t, expected, rtol=1e-5, atol=1e-7)


def test_break_leaves_the_forward_loop_at_once(capsys):
    """Bound 100,000; Newton converges in a few steps: the loop body ran only those."""
    a = np.array([2.0, 3.0])
    g = sg.grad(newton_counting)(a, 100_000)
    steps = capsys.readouterr().out.count("step")
    assert 3 <= steps <= 10
    assert_close(g, 0.5 / np.sqrt(a))


def test_return_leaves_the_forward_loop_at_once(capsys):
    a = np.array([2.0, 3.0])
    value, g = sg.value_and_grad(newton_return)(a, 100_000)
    steps = capsys.readouterr().out.count("step")
    assert 3 <= steps <= 10
    assert_close(value, np.sum(np.sqrt(a) * a))
    assert_close(g, 1.5 * np.sqrt(a))


def test_break_on_python_floats():
    g = sg.grad(float_newton)(2.0, 100_000)
    assert_close(g, numeric_grad(float_newton, [2.0, 100_000], 0), rtol=1e-6)


def test_vjp_of_a_breaking_loop_runs_twice():
    """sg.vjp's backward pops copies of the tapes: vjp_fn twice gives the same rows."""
    a = np.array([2.0, 3.0, 5.0])
    out, vjp_fn = sg.vjp(lambda v: newton_sqrt(v, 100_000), a)
    first, = vjp_fn(1.0)
    second, = vjp_fn(2.0)
    assert_close(first, 1.5 * np.sqrt(a))
    assert_close(second, 3.0 * np.sqrt(a))


def test_generated_loop_leaves_by_break():
    """The forward loop leaves with Python's `break`; the adjoint loop's range is the
    number of iterations the tape recorded, not the bound."""
    g = sg.grad(newton_counting)
    g(np.array([2.0]), 100_000)
    source = sg.source(g)
    assert "        break" in source
    assert "range(_tape_len)[::-1]" in source and "range(n)[::-1]" not in source
