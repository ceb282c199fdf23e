"""`print(...)` in compiled code prints in the forward pass, where the user wrote it: once
per call (never while compiling), in loops once per iteration, in every transform."""

from __future__ import annotations

import numpy as np

import srcgrad as sg


def f(x):
    y = np.sin(x)
    print("y is", y, sep=": ")
    for i in range(2):
        print("step", i)
    return np.sum(y * y)


EXPECTED = "y is: [0.84147098 0.84147098]\nstep 0\nstep 1\n"


def test_print_runs_once_per_call_in_each_transform(capsys):
    x = np.ones(2)
    g = sg.grad(f)
    for _ in range(2):  # the first call compiles: still one print per call
        np.testing.assert_allclose(g(x), 2 * np.sin(x) * np.cos(x))
        assert capsys.readouterr().out == EXPECTED
    sg.jvp(f, (x,), (x,))
    assert capsys.readouterr().out == EXPECTED
    out, vjp_fn = sg.vjp(f, x)
    vjp_fn(1.0)
    assert capsys.readouterr().out == EXPECTED  # the forward prints, the backward does not
    assert "print('y is', y, sep=': ')" in sg.source(g)


def test_print_of_constants_is_not_run_at_compile_time(capsys):
    def h(x):
        print("hello")
        return np.sum(x)

    g = sg.grad(h)
    assert capsys.readouterr().out == ""
    g(np.ones(3))
    assert capsys.readouterr().out == "hello\n"
