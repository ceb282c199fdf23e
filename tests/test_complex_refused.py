"""Complex arguments are refused by every transform with a TypeError naming the argument
(issue 28): the derivative table has no conjugate convention yet, and a real formula run
on complex values is a plausible wrong answer. Before, sg.grad refused them but sg.vjp and
sg.jvp accepted them, and sg.jvp of np.abs(z) returned a complex tangent for a real output.
A plain call of a sg.compile'd function on arrays runs f and differentiates nothing, so
it takes complex values; its transforms (and its call on Tensors, through sg.vjp) refuse."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg


def f(z):
    return np.sum(np.abs(z))


def g(x, z):
    return np.abs(z) * x


Z = np.array([1 + 2j, 3 - 1j])
X = np.array([0.5, 0.2])

CALLS = {
    "grad": (lambda: sg.grad(f)(Z), "grad: argument `z`"),
    "value_and_grad": (lambda: sg.value_and_grad(f)(Z), "value_and_grad: argument `z`"),
    "vjp": (lambda: sg.vjp(f, Z), "vjp: argument `z`"),
    "vjp-second-argument": (lambda: sg.vjp(g, X, Z), "vjp: argument `z`"),
    "vjp-python-complex": (lambda: sg.vjp(f, 1 + 2j), "vjp: argument `z`"),
    "jvp": (lambda: sg.jvp(f, (Z,), (Z,)), "jvp: argument `z`"),
    "jvp-complex-tangent": (lambda: sg.jvp(g, (X, X), (X, Z)), "jvp: tangent `z`"),
    "jacobian-forward": (lambda: sg.jacobian(f, mode="forward")(Z), "jacobian: argument `z`"),
    "jacobian-reverse": (lambda: sg.jacobian(f, mode="reverse")(Z), "jacobian: argument `z`"),
    "jacobian-of-jacobian": (lambda: sg.jacobian(sg.jacobian(f))(Z), "jacobian: argument `z`"),
    "hessian": (lambda: sg.hessian(f)(Z), "hessian: argument `z`"),
    "compile.grad": (lambda: sg.compile(f).grad()(Z), "grad: argument `z`"),
    "compile.vjp": (lambda: sg.compile(f).vjp(Z), "vjp: argument `z`"),
    "compile.jvp": (lambda: sg.compile(f).jvp((Z,), (Z,)), "jvp: argument `z`"),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_complex_is_refused(name):
    call, text = CALLS[name]
    with pytest.raises(TypeError, match="is complex; complex differentiation is not supported") as info:
        call()
    assert text in str(info.value)


def test_compile_plain_call_runs_f():
    assert sg.compile(f)(Z) == pytest.approx(np.sum(np.abs(Z)))
