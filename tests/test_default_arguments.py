"""Transforms of functions with defaulted parameters, called without them (fuzz, 2026-11-28).

A transform's call may omit a function's trailing parameters that have defaults, as a
call of the function may: the defaults are constants of the program, not inputs. So
sg.grad and sg.value_and_grad apply them on every call (the guards' code included),
sg.vjp's vjp_fn returns one gradient per primal and sg.jvp takes one tangent per primal
(as torch.func's do), and sg.jacobian / sg.hessian differentiate the arguments given.
Each expected value is a central difference of the function called the same way."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd.graph import saved_tensors_hooks
from tests.conftest import assert_close, numeric_grad

X = np.array([0.3, -0.8, 1.2])


def with_defaults(x, scale=None, shift=0.25):
    s = 0.9 if scale is None else scale
    return np.sum(np.sin(x) * s + shift * x)


def array_out(x, b=None, power=2.0):
    if b is None:
        b = 2.0
    return np.sin(x) * b + x ** power


def loop_with_defaults(x, scale=0.8, steps=3):
    for _ in range(steps):
        x = np.sin(x) * scale + 0.1 * x
    return np.sum(x * x)


def _jacobian_by_differences(fn, x, eps=1e-6):
    cols = [(np.reshape(fn(x + e), -1) - np.reshape(fn(x - e), -1)) / (2 * eps)
            for e in np.eye(x.size).reshape((x.size,) + x.shape) * eps]
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("transform", [sg.grad, sg.value_and_grad])
def test_every_call_of_grad_applies_the_defaults(transform):
    """The first call binds the guards' code to the returned function; its later calls
    omit the defaulted parameters as the first did (before: the guards' code was swapped
    into a function with no defaults, so the second call raised TypeError: missing 2
    required positional arguments)."""
    f = transform(with_defaults)
    for call, args in [(lambda: f(X), ()), (lambda: f(X), ()), (lambda: f(X, 2.0), (2.0,)),
                       (lambda: f(X, shift=-1.0), (None, -1.0)), (lambda: f(X), ())]:
        out = call()
        grad = out[1] if transform is sg.value_and_grad else out
        assert_close(grad, numeric_grad(lambda v, a=args: with_defaults(v, *a), [X], 0))
        if transform is sg.value_and_grad:
            assert_close(out[0], with_defaults(X, *args))


@pytest.mark.parametrize("fn,cotangent", [(with_defaults, 1.0), (array_out, np.array([1.0, -2.0, 0.5]))])
@pytest.mark.parametrize("hooked", [False, True])
def test_vjp_returns_one_gradient_per_primal(fn, cotangent, hooked):
    """Before: a gradient for every parameter, the defaulted ones' too (for `b=None`, an
    object array)."""
    expected = numeric_grad(lambda v: np.sum(fn(v) * cotangent), [X], 0)
    for _ in range(2):  # the second call: sg.vjp's guarded plain call
        if hooked:
            with saved_tensors_hooks(lambda a: ("box", a), lambda box: box[1]):
                out, vjp_fn = sg.vjp(fn, X)
        else:
            out, vjp_fn = sg.vjp(fn, X)
        assert_close(out, fn(X))
        grads = vjp_fn(cotangent)
        assert isinstance(grads, tuple) and len(grads) == 1
        assert_close(grads[0], expected)


def test_vjp_with_a_default_given_differentiates_it_too():
    (gx, gb) = sg.vjp(array_out, X, 3.0)[1](np.ones(3))
    assert_close(gx, numeric_grad(lambda v: np.sum(array_out(v, 3.0)), [X], 0))
    assert_close(gb, np.sum(np.sin(X)))


@pytest.mark.parametrize("fn", [with_defaults, array_out, loop_with_defaults])
def test_jvp_takes_one_tangent_per_primal(fn):
    """Before: TypeError `jvp: f() takes 3 arguments; got 1 primals`."""
    t = np.array([0.5, 1.0, -1.5])
    out, t_out = sg.jvp(fn, (X,), (t,))
    assert_close(out, fn(X))
    assert_close(t_out, _jacobian_by_differences(fn, X) @ t)


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
@pytest.mark.parametrize("fn", [array_out, with_defaults])
def test_jacobian_of_the_arguments_given(mode, fn):
    """Before, forward mode: TypeError `array_out_jvp() missing 1 required positional
    argument: 'x_t'` (the tangent was passed as `b`)."""
    jac = sg.jacobian(fn, mode=mode)
    expected = _jacobian_by_differences(fn, X).reshape(np.shape(fn(X)) + X.shape)
    for _ in range(2):
        assert_close(jac(X), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn", [with_defaults, loop_with_defaults])
@pytest.mark.parametrize("chunk_size", [None, 1])
def test_hessian_of_the_arguments_given(fn, chunk_size):
    """Before: TypeError `grad_with_defaults_jvp() missing 1 required positional argument`."""
    hess = sg.hessian(fn, chunk_size=chunk_size)
    expected = _jacobian_by_differences(lambda v: numeric_grad(fn, [v], 0, eps=1e-4), X, eps=1e-4)
    assert_close(hess(X), expected, rtol=1e-5, atol=1e-6)


def test_a_partial_of_a_lambda_is_compiled():
    """functools.partial's stand-in is named after the function (`<lambda>` is no name)."""
    f = functools.partial(lambda x, k: np.sum(np.sin(x) * k), k=2.0)  # noqa: E731
    assert_close(sg.grad(f)(X), 2.0 * np.cos(X))
    assert_close(sg.vjp(f, X)[1](1.0)[0], 2.0 * np.cos(X))


def _calls_vjp(x):
    out, vjp_fn = sg.vjp(array_out, x)
    (g,) = vjp_fn(np.ones_like(x))
    return np.sum(g * x) + np.sum(out)


def _calls_jvp(x):
    out, t = sg.jvp(array_out, (x,), (np.ones_like(x),))
    return np.sum(t * x) + np.sum(out)


def _loop_out(x, scale=0.8):
    for _ in range(2):
        x = np.sin(x) * scale
    return x


def _calls_jvp_of_a_loop(x):
    out, t = sg.jvp(_loop_out, (x,), (np.ones_like(x),))
    return np.sum(t * x)


@pytest.mark.parametrize("fn", [_calls_vjp, _calls_jvp, _calls_jvp_of_a_loop])
def test_vjp_and_jvp_in_compiled_code_of_the_arguments_given(fn):
    """Before: 'unpacking 3 values into 1 names' (vjp_fn's gradients for b and power),
    'bad call to `array_out_jvp`: missing a required argument'."""
    assert_close(sg.grad(fn)(X), numeric_grad(fn, [X], 0))
