"""One-element outputs of shape (1,) or (1, 1) under the scalar transforms (issue 28).

Decision: the compiler's transforms follow JAX, whose names they mirror (DESIGN decision
14): sg.grad, sg.value_and_grad and sg.hessian need a 0-d output and refuse a
one-element array of any other shape with a TypeError naming the function and the
shape (and a note naming the line), the same refusal as for any non-scalar output.
torch's `backward()` and HIPS autograd's `grad` accept a one-element output; srcgrad's
eager runtime (sg.Tensor.backward) follows torch there, and a compiled user writes
`y.sum()` or `y[0, 0]`, which are 0-d. Accepting them in the compiler would make
value_and_grad's value and the Hessian's shape depend on a convention JAX users do not
expect. sg.jacobian takes any output: its shape is out.shape + x.shape.
Before this test, sg.hessian of a (1, 1) output returned a (1, 1) matrix (the per-seed
code dropped the gradient's scalar check) while sg.grad refused it.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close


def one_by_one(x):
    return (x ** 3).reshape(1, 1)


def keepdims(x):
    return np.sum(x ** 3, keepdims=True)


def zero_d(x):
    return (x ** 3).reshape(())


X = np.array([0.5])


@pytest.mark.parametrize("f, shape", [(one_by_one, "(1, 1)"), (keepdims, "(1,)")],
                         ids=["1x1", "keepdims"])
@pytest.mark.parametrize("transform", [sg.grad, sg.value_and_grad, sg.hessian],
                         ids=["grad", "value_and_grad", "hessian"])
def test_one_element_output_is_refused(f, shape, transform):
    with pytest.raises(TypeError) as info:
        transform(f)(X)
    text = str(info.value)
    assert f"{f.__name__}() needs a scalar output" in text and shape in text
    assert "test_one_element_outputs.py" in "\n".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("f", [one_by_one, keepdims], ids=["1x1", "keepdims"])
def test_jacobian_of_one_element_output(f):
    for mode in ("forward", "reverse", "auto"):
        jac = sg.jacobian(f, mode=mode)(X)
        assert jac.shape == np.shape(f(X)) + X.shape
        assert_close(jac.reshape(-1), 3 * X ** 2)


def test_zero_d_output_is_accepted():
    assert_close(sg.grad(zero_d)(X), 3 * X ** 2)
    assert_close(sg.hessian(zero_d)(X), np.diag(6 * X))
