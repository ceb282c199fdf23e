"""gradcheck/gradgradcheck flags on sg.Tensors that must run, and torch's deprecated
get_numerical_jacobian / get_analytical_jacobian; values and texts observed in torch 2.14
(torch/autograd/gradcheck.py of 2.14.1)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import batching, batching_rules  # noqa: F401 (the rules registered)
from srcgrad.autograd.function import Function
from srcgrad.autograd.gradcheck import (
    GradcheckError,
    get_analytical_jacobian,
    get_numerical_jacobian,
    gradcheck,
    gradgradcheck,
)
from tests.autograd.spec_util import leaf

NOT_REENTRANT = ("Backward is not reentrant, i.e., running backward with same input and "
                 "grad_output multiple times gives different values, although analytical "
                 "gradient matches numerical gradient.The tolerance for nondeterminism was 0.0.")


def _nondeterministic():
    calls = [0]

    class N(Function):  # each backward a little different: not reentrant
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, go):
            calls[0] += 1
            return go * (2 + 1e-4 * calls[0])

    return N


@pytest.mark.parametrize("fast_mode", [False, True])
def test_nondet_tol_runs_in_slow_and_fast_mode(fast_mode):
    # observed in torch 2.14: the reentrancy error in both modes at nondet_tol=0;
    # True with nondet_tol=1e-2; False with raise_exception=False
    x = leaf([1.0, 2.0])
    with pytest.raises(GradcheckError, match="^" + NOT_REENTRANT.replace(".", r"\.")
                       .replace("(", r"\(").replace(")", r"\)")):
        gradcheck(_nondeterministic().apply, (x,), fast_mode=fast_mode, check_undefined_grad=False)
    assert gradcheck(_nondeterministic().apply, (x,), fast_mode=fast_mode, nondet_tol=1e-2,
                     check_undefined_grad=False)
    assert gradcheck(_nondeterministic().apply, (x,), fast_mode=fast_mode,
                     raise_exception=False, check_undefined_grad=False) is False


def test_zero_and_undefined_grad_outputs_are_checked():
    # observed in torch 2.14: "backward not multiplied by grad_output" for the first; the
    # undefined-gradient text (with check_undefined_grad) and True (without) for the second
    class OnlyUndefinedWrong(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, go):
            return go * 2 + (go == 0).all().float() * 1.0

    x = leaf([1.0, 2.0])
    with pytest.raises(GradcheckError, match="^backward not multiplied by grad_output$"):
        gradcheck(OnlyUndefinedWrong.apply, (x,), check_undefined_grad=False)

    class UndefinedWrong(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2

        @staticmethod
        def backward(ctx, go):
            return sg.ones(2, dtype=sg.float64) if go is None else go * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(GradcheckError, match="^Expected all input grads to be undefined or "
                                                 "zero when all output grads are undefined"):
            gradcheck(UndefinedWrong.apply, (x,))
    assert gradcheck(UndefinedWrong.apply, (x,), check_undefined_grad=False)


def test_check_batched_grad_passes_on_rows_and_custom_functions():
    # observed in torch 2.14: True for this function, and for gradgradcheck of (x**3).sum()
    a = leaf([[1.0, 2.0], [3.0, 4.0]])
    b = leaf([0.5, -1.0])
    assert gradcheck(lambda a, b: (a.sin() @ b).exp().sum(0, keepdim=True) * a, (a, b),
                     check_batched_grad=True)
    assert gradgradcheck(lambda x: (x ** 3).sum(), (leaf([1.0, 2.0]),), check_batched_grad=True)

    class Scale(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, go):
            (x,) = ctx.saved_tensors
            return go * 2 * x

    assert gradcheck(lambda x: Scale.apply(x).cos(), (leaf([0.3, -1.2]),), check_batched_grad=True)


def test_check_batched_grad_runs_the_batched_backward(monkeypatch):
    """The check compares one batched pass with per-seed passes: a wrong batching rule
    (planted here for numpy.cumsum, whose VJP flips and cumsums) is caught; a rule that
    raises gives torch's "While computing batched gradients" text."""
    x = leaf([1.0, 2.0, 3.0])
    f = lambda t: t.cumsum(0) * 1.5  # noqa: E731
    assert gradcheck(f, (x,), check_batched_grad=True)
    real = batching._FUNCS[np.cumsum]

    def wrong(*args, **kwargs):
        return real(*args, **kwargs) * 2

    monkeypatch.setitem(batching._FUNCS, np.cumsum, wrong)
    assert gradcheck(f, (x,))  # the unbatched check does not see it
    with pytest.raises(GradcheckError, match=r"^For output 0 and input 0:\n\ngradcheck or "
                                             r"gradgradcheck failed while testing batched "
                                             r"gradient computation\.(.|\n)*\n\nGot:\n"
                                             r"tensor(.|\n)*\n\nExpected:\ntensor"):
        gradcheck(f, (x,), check_batched_grad=True)

    def raising(*args, **kwargs):
        raise RuntimeError("no rule")

    monkeypatch.setitem(batching._FUNCS, np.cumsum, raising)
    with pytest.raises(GradcheckError, match=r"^While computing batched gradients, got: no rule"
                                             r"\n\ngradcheck or gradgradcheck failed"):
        gradcheck(f, (x,), check_batched_grad=True)


def test_flag_preconditions_are_torchs_assertions():
    x = leaf([1.0, 2.0])
    with pytest.raises(AssertionError, match="^Setting check_batched_grad=True requires "
                                             "check_backward_ad to be True$"):
        gradcheck(lambda t: t * 2, (x,), check_batched_grad=True, check_backward_ad=False,
                  check_forward_ad=True)
    with pytest.raises(AssertionError, match="^Setting check_batched_forward_grad=True requires "
                                             "check_forward_ad to be True$"):
        gradcheck(lambda t: t * 2, (x,), check_batched_forward_grad=True)
    with pytest.raises(AssertionError, match="^Setting check_undefined_grad=True requires "
                                             "check_rev_over_rev to be True$"):
        gradgradcheck(lambda t: (t ** 3).sum(), (x,), check_batched_grad=True,
                      check_rev_over_rev=False, check_fwd_over_rev=True)
    with pytest.raises(AssertionError, match="^Setting check_batched_grad=True requires "
                                             "check_rev_over_rev to be True$"):
        gradgradcheck(lambda t: (t ** 3).sum(), (x,), check_batched_grad=True,
                      check_rev_over_rev=False, check_fwd_over_rev=True,
                      check_undefined_grad=False)


def test_batched_backward_of_custom_function_runs_per_seed():
    """A custom Function's backward takes one seed of a batch at a time (it is Python code),
    so functional.jacobian(vectorize=True) no longer falls back for the whole Jacobian."""
    seen = []

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, go):
            seen.append(tuple(go.shape))
            (x,) = ctx.saved_tensors
            return go * 3 * x * x

    x = leaf([1.0, -2.0])
    jac = sg.autograd.functional.jacobian(lambda t: Cube.apply(t).sin(), x, vectorize=True)
    xs = np.array([1.0, -2.0])
    np.testing.assert_allclose(jac.numpy(), np.diag(np.cos(xs ** 3) * 3 * xs ** 2))
    assert seen == [(2,), (2,)]


FUTURE = ("`{}` was part of PyTorch's private API and not meant to be exposed. We are "
          "deprecating it and it will be removed in a future version of PyTorch. If you have a "
          "specific use for this or feature request for this to be a stable API, please file us "
          "an issue at https://github.com/pytorch/pytorch/issues/new")


def test_get_numerical_jacobian():
    a = leaf([1.0, 2.0, 3.0])
    b = leaf([0.5, -1.0])
    with pytest.warns(FutureWarning) as record:
        ja, jb = get_numerical_jacobian(lambda inp: (inp[0] ** 2).sum() * inp[1], (a, b))
    assert str(record[0].message) == FUTURE.format("get_numerical_jacobian")
    # observed in torch 2.14: (3, 2) [[1,-2],[2,-4],[3,-6]] and (2, 2) [[14,0],[0,14]], float64
    assert ja.dtype == sg.float64 and ja.shape == (3, 2) and jb.shape == (2, 2)
    np.testing.assert_allclose(ja.numpy(), [[1, -2], [2, -4], [3, -6]], atol=1e-6)
    np.testing.assert_allclose(jb.numpy(), [[14, 0], [0, 14]], atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = leaf([1.0, 2.0])
        # default eps 1e-3: observed in torch 2.14 [[3.000001, 0], [0, 12.000001]]
        (j,) = get_numerical_jacobian(lambda inp: inp[0] ** 3, (x,))
        np.testing.assert_allclose(j.numpy(), [[3.000001, 0], [0, 12.000001]], rtol=1e-9)
        # target: a tensor fn reaches (perturbed in place); observed [[1.0, 2.0]]
        c = leaf([3.0])
        (j,) = get_numerical_jacobian(lambda inp: inp[0] * inp[1], (x, c), target=(c,))
        np.testing.assert_allclose(j.numpy(), [[1.0, 2.0]], rtol=1e-9)
        np.testing.assert_array_equal(c.detach().numpy(), [3.0])  # restored
        # a single tensor is packed into a tuple: `inp * 2` repeats the tuple; observed [[1,0],[0,1]]
        (j,) = get_numerical_jacobian(lambda inp: inp * 2, x)
        np.testing.assert_allclose(j.numpy(), np.eye(2), rtol=1e-9)
        # first output only, inputs not requiring grad skipped; observed [[5,0],[0,6]]
        (j,) = get_numerical_jacobian(lambda inp: (inp[0] * inp[1], inp[0]),
                                      (x, sg.tensor([5.0, 6.0], dtype=sg.float64)))
        np.testing.assert_allclose(j.numpy(), [[5, 0], [0, 6]], rtol=1e-9)
        (j,) = get_numerical_jacobian(lambda inp: inp[0] * 2, (sg.tensor([1.0, 2.0],
                                                                          requires_grad=True),))
        assert j.dtype == sg.float32  # observed in torch 2.14: torch.float32
        with pytest.raises(ValueError, match="^Expected grad_out to be 1.0. get_numerical_jacobian "
                                             "no longer supports values of grad_out != 1.0.$"):
            get_numerical_jacobian(lambda inp: inp[0], (x,), grad_out=2.0)


def test_get_analytical_jacobian():
    a = leaf([1.0, 2.0, 3.0])
    b = leaf([0.5, -1.0])
    with pytest.warns(FutureWarning) as record:
        (ja, jb), reentrant, sizes_ok, types_ok = get_analytical_jacobian((a, b),
                                                                          (a ** 2).sum() * b)
    assert str(record[0].message) == FUTURE.format("get_analytical_jacobian")
    # observed in torch 2.14: the numerical Jacobians' values, True, True, True
    np.testing.assert_allclose(ja.numpy(), [[1, -2], [2, -4], [3, -6]])
    np.testing.assert_allclose(jb.numpy(), [[14, 0], [0, 14]])
    assert (reentrant, sizes_ok, types_ok) == (True, True, True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x, unused = leaf([1.0, 2.0]), leaf([0.5])
        c = sg.tensor([3.0], dtype=sg.float64)
        jacs, *flags = get_analytical_jacobian((x, c, unused), x * 2 * c)
        # observed in torch 2.14: ([[6,0],[0,6]], [[0,0]]), True, True, True
        np.testing.assert_array_equal(jacs[0].numpy(), [[6, 0], [0, 6]])
        np.testing.assert_array_equal(jacs[1].numpy(), [[0, 0]])
        assert flags == [True, True, True]
        out = _nondeterministic().apply(x)
        # observed in torch 2.14: (False, True)
        assert get_analytical_jacobian((x,), out)[1] is False
        assert get_analytical_jacobian((x,), out, nondet_tol=1.0)[1] is True
        with pytest.raises(ValueError, match="^Expected grad_out to be 1.0. get_analytical_"
                                             "jacobian no longer supports values of grad_out "
                                             "!= 1.0.$"):
            get_analytical_jacobian((x,), x * 2, grad_out=2.0)
        z = sg.tensor([1.0, 2.0], dtype=sg.complex128, requires_grad=True)
        with pytest.raises(ValueError, match="^Expected output to be non-complex. get_analytical"
                                             "_jacobian no longer supports functions that return "
                                             "complex outputs.$"):
            get_analytical_jacobian((z,), z * 2)


def test_gradcheck_names_the_function_as_torch_does():
    import sys

    # observed in torch 2.14: torch.autograd.gradcheck is the function; the module holds
    # the deprecated Jacobian functions
    assert callable(sg.autograd.gradcheck) and not hasattr(sg.autograd.gradcheck,
                                                           "get_numerical_jacobian")
    assert sys.modules["srcgrad.autograd.gradcheck"].get_numerical_jacobian is \
        get_numerical_jacobian


def test_check_batched_forward_grad_runs(monkeypatch):
    # observed in torch 2.14: True for this function, and for a custom Function with jvp
    a = leaf([[1.0, 2.0], [3.0, 4.0]])
    b = leaf([0.5, -1.0])
    assert gradcheck(lambda a, b: ((a.sin() @ b).exp().sum(0, keepdim=True) * a, b.cumsum(0)),
                     (a, b), check_forward_ad=True, check_batched_forward_grad=True)

    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x * x

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 2 * x * t

        @staticmethod
        def backward(ctx, g):
            return g

    assert gradcheck(Sq.apply, (leaf([1.0, 2.0]),), check_forward_ad=True, check_backward_ad=False,
                     check_undefined_grad=False, check_batched_forward_grad=True)
    # a wrong batching rule (planted) is caught; the per-tangent check alone does not see it
    x = leaf([1.0, 2.0, 3.0])
    f = lambda t: t.cumsum(0) * 1.5  # noqa: E731
    real = batching._FUNCS[np.cumsum]
    monkeypatch.setitem(batching._FUNCS, np.cumsum, lambda *a, **k: real(*a, **k) * 2)
    assert gradcheck(f, (x,), check_forward_ad=True)
    # (torch's text: its forward-AD note keeps its leading newline, so three newlines)
    with pytest.raises(GradcheckError, match=r"^For output 0 and input 0:\n\n\ngradcheck failed "
                                             r"while testing batched gradient computation with "
                                             r"forward-mode AD\."):
        gradcheck(f, (x,), check_forward_ad=True, check_batched_forward_grad=True)
