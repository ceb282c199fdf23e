"""`sg.autograd.gradcheck` and `srcgrad check` accept every transform's output (issue 10):
the functions sg.grad / sg.value_and_grad return are generated code, differentiated like
any function; sg.jacobian / sg.hessian objects and sg.vjp's vjp_fn are not source, and
their derivatives come from srcgrad.autograd.transform_blocks. Each check compares with
central differences, so a wrong derivative still fails it (the planted case below)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd.gradcheck import GradcheckError, check_cli


def scalar(x):
    return np.sum(np.sin(x) * x)


def vector(x):
    return np.tanh(x) * x[0]


def two_arguments(x, w):
    return np.sum(np.sin(x) * w * w)


def pair(x, w):
    return np.cos(x) * w, np.sum(x * w)


X = np.array([0.3, -0.5, 0.8])
W = np.array([1.2, 0.4, -0.7])

TRANSFORMS = {
    "grad": (lambda: sg.grad(scalar), (X,)),
    "grad-two": (lambda: sg.grad(two_arguments, wrt=(0, 1)), (X, W)),
    "value_and_grad": (lambda: sg.value_and_grad(scalar), (X,)),
    "jacobian-reverse": (lambda: sg.jacobian(vector, mode="reverse"), (X,)),
    "jacobian-forward": (lambda: sg.jacobian(vector, mode="forward"), (X,)),
    "jacobian-auto-tuple": (lambda: sg.jacobian(pair, wrt=(0, 1)), (X, W)),
    "hessian": (lambda: sg.hessian(scalar), (X,)),
    "hessian-two": (lambda: sg.hessian(two_arguments, wrt=(0, 1)), (X, W)),
    "vjp_fn": (lambda: sg.vjp(vector, X)[1], (np.array([0.5, -1.0, 2.0]),)),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_gradcheck_accepts_the_output(name):
    make, args = TRANSFORMS[name]
    fn = make()
    assert sg.autograd.gradcheck(fn, args)
    assert sg.autograd.gradcheck(fn, args, check_forward_ad=True, check_backward_ad=False)
    assert sg.autograd.gradcheck(fn, args, fast_mode=True)


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_srcgrad_check_accepts_the_output(name):
    make, args = TRANSFORMS[name]
    ok, report = check_cli(make(), [np.shape(a) for a in args])
    assert ok, report
    assert "MISMATCH" not in report and report.rstrip().endswith("OK")


class CubeWrongBackward(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):  # planted: 3 * x * x is right
        x, = ctx.saved_tensors
        return g * x * x

    @staticmethod
    def jvp(ctx, t):
        x, = ctx.saved_tensors
        return 3.0 * x * x * t


def planted(x):
    return CubeWrongBackward.apply(x) + np.sin(x)


def test_a_wrong_jacobian_fails_the_check():
    """The reverse-mode Jacobian reads the wrong backward: the derivative of that matrix
    (central differences) disagrees with the derivative of the true one."""
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        sg.autograd.gradcheck(sg.jacobian(planted, mode="reverse"), (X,))
    ok, report = check_cli(sg.jacobian(planted, mode="reverse"), [(3,)])
    assert not ok and "MISMATCH" in report
    assert sg.autograd.gradcheck(sg.jacobian(planted, mode="forward"), (X,))  # its jvp is right
