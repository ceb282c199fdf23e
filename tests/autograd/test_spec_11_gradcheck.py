"""spec/torch_semantics.md §11: `gradcheck` / `gradgradcheck` on functions of sg.Tensor and
on `Function.apply` — every "(c) Test cases" entry, the (b) failure messages, and the
index rules of the probes. (Functions of NumPy arrays, checked through the compiler:
tests/test_gradcheck.py.)"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd.function import Function
from srcgrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck
from tests.autograd.spec_util import const, exact, leaf

MISMATCH_00 = "Jacobian mismatch for output 0 with respect to input 0,\n"
FAST_NOTE = ("\n\nThe above quantities relating the numerical and analytical jacobians are "
             "computed \nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for "
             "more background \nabout fast mode. Below, we recompute numerical and analytical "
             "jacobians in slow mode:\n\nNumerical:\n ")


def xd():
    return leaf([1.0, 2.0, 3.0])


class BadGrad(Function):  # forward x*2, backward g*3 (test_gradcheck_jacobian_mismatch)
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 3


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


class BadDoubleGrad(Function):  # backward uses x.detach(): first order right, second wrong
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 2 * x.detach()


def _bad(x):
    """x * 2 whose gradient claims 3 (a detached extra term the finite differences see)."""
    return x * 2 + sg.tensor(x.detach().numpy())


# ---------------------------------------------------------------- (c) test cases
@pytest.mark.parametrize("fast_mode", [False, True])
def test_case_1_passes(fast_mode):
    assert gradcheck(lambda x: (x ** 2).sin(), (xd(),), fast_mode=fast_mode) is True
    assert gradgradcheck(lambda x: (x ** 2).sin(), (xd(),), fast_mode=fast_mode) is True


def test_case_2_bad_function_slow_mode_message():
    with pytest.raises(GradcheckError) as info:
        gradcheck(BadGrad.apply, (xd(),))
    assert str(info.value) == (
        MISMATCH_00 +
        "numerical:tensor([[2.0000, 0.0000, 0.0000],\n"
        "        [0.0000, 2.0000, 0.0000],\n"
        "        [0.0000, 0.0000, 2.0000]], dtype=torch.float64)\n"
        "analytical:tensor([[3., 0., 0.],\n"
        "        [0., 3., 0.],\n"
        "        [0., 0., 3.]], dtype=torch.float64)\n")
    assert isinstance(info.value, RuntimeError)
    assert gradcheck(BadGrad.apply, (xd(),), raise_exception=False) is False


def test_case_2_fast_mode_message():
    with pytest.raises(GradcheckError) as info:
        gradcheck(BadGrad.apply, (xd(),), fast_mode=True)
    text = str(info.value)
    assert re.match(r"Jacobian mismatch for output 0 with respect to input 0,\n"
                    r"numerical:tensor\(-?[0-9.]+, dtype=torch.float64\)\n"
                    r"analytical:tensor\(-?[0-9.]+, dtype=torch.float64\)\n", text)
    assert FAST_NOTE + "tensor([[2.0000, 0.0000, 0.0000]" in text
    assert text.endswith("The max per-element difference (slow mode) is: "
                         f"{text.rsplit(': ', 1)[1]}")
    assert float(text.rsplit(": ", 1)[1].rstrip(".\n")) == pytest.approx(1.0, abs=1e-6)
    assert gradcheck(BadGrad.apply, (xd(),), fast_mode=True, raise_exception=False) is False


def test_case_3_backward_not_multiplied_by_grad_output():
    def fn(x):  # test_gradcheck_backward_mul_by_grad_output
        y = x.clone()
        y.register_hook(lambda g: g + 1e-2)
        return y

    x = leaf([1.0])
    with pytest.raises(GradcheckError, match=exact("backward not multiplied by grad_output")):
        gradcheck(fn, (x,), atol=1e-1)
    assert gradcheck(fn, (x,), atol=1e-1, raise_exception=False) is False
    with pytest.raises(GradcheckError, match="^" + re.escape(MISMATCH_00)):
        gradcheck(fn, (x,))  # at the default atol the Jacobian is already wrong


@pytest.mark.parametrize("raise_exception", [True, False])
def test_case_4_no_input_requires_grad(raise_exception):
    with pytest.raises(ValueError, match=exact(
            "gradcheck expects at least one input tensor to require gradient, but none of them "
            "have requires_grad=True.")):
        gradcheck(lambda x: x * 2, (const([1.0, 2.0]),), raise_exception=raise_exception)


def test_case_5_bad_double_grad():
    assert gradcheck(BadDoubleGrad.apply, (xd(),)) is True
    with pytest.raises(GradcheckError, match="^" + re.escape(MISMATCH_00)):
        gradgradcheck(BadDoubleGrad.apply, (xd(),))
    assert gradgradcheck(BadDoubleGrad.apply, (xd(),), raise_exception=False) is False
    assert gradgradcheck(Square.apply, (xd(),)) is True


# ---------------------------------------------------------------- (b) messages, probes
def test_fail_second_input():  # probe 11.gradcheck_fail_second_input
    with pytest.raises(GradcheckError, match="^Jacobian mismatch for output 0 with respect to "
                                             "input 1,\n"):
        gradcheck(lambda a, b: a * 2 + _bad(b), (xd(), xd()))


def test_fail_second_output():  # probe 11.gradcheck_fail_second_output
    with pytest.raises(GradcheckError, match="^Jacobian mismatch for output 1 with respect to "
                                             "input 0,\n"):
        gradcheck(lambda x: (x * 2, _bad(x)), (xd(),))


@pytest.mark.parametrize("make", [
    lambda x: ((3.0, x), lambda s, t: _bad(t)),
    lambda x: ((const([1.0, 1.0, 1.0]), x), lambda c, t: c * _bad(t)),
    lambda x: ((x,), lambda t: (t.detach(), _bad(t))),
])
def test_indices_count_only_differentiable_inputs_outputs(make):
    # probe 11.gradcheck_indices_count_only_differentiable_inputs_outputs
    inputs, fn = make(xd())
    with pytest.raises(GradcheckError, match="^" + re.escape(MISMATCH_00)):
        gradcheck(fn, inputs)


def test_nontensor_input_passed_through():  # probe 11.gradcheck_with_nontensor_input
    seen = []

    def fn(x, scale, name):
        seen.append((scale, name))
        return x * scale

    assert gradcheck(fn, (xd(), 3.0, "label")) is True
    assert set(seen) == {(3.0, "label")}


def test_exception_in_func_propagates():  # test_gradcheck_custom_error
    def fn(x):
        raise ValueError("inside func")

    with pytest.raises(ValueError, match="inside func"):
        gradcheck(fn, (xd(),), raise_exception=False)


def test_numerical_gradient_expected_to_be_zero():
    def fn(x):  # no output requires grad, but one depends on x
        return sg.tensor(np.ones(2)), sg.tensor(x.detach().numpy() * 3)

    with pytest.raises(GradcheckError, match=exact(
            "Numerical gradient for function expected to be zero")):
        gradcheck(fn, (xd(),))
    with pytest.raises(GradcheckError, match=exact(
            "Numerical gradient for function expected to be zero")):
        gradcheck(fn, (xd(),), fast_mode=True)
    assert gradcheck(lambda x: (x.detach() * 0, sg.tensor(np.ones(2))), (xd(),)) is True


def test_backward_not_reentrant():
    calls = []

    class Drifting(Function):  # each backward returns something else
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g * (2 + 1e-3 * len(calls))

    with pytest.raises(GradcheckError) as info:
        gradcheck(Drifting.apply, (xd(),), atol=1.0)
    assert str(info.value).startswith(
        "Backward is not reentrant, i.e., running backward with same input and grad_output "
        "multiple times gives different values, although analytical gradient matches numerical "
        "gradient.The tolerance for nondeterminism was 0.0.\n\nNOTE: ")
    assert gradcheck(Drifting.apply, (xd(),), atol=1.0, nondet_tol=1.0) is True


def test_float32_input_warns():
    x = leaf([1.0, 2.0], dtype=np.float32)
    with pytest.warns(UserWarning, match=exact(
            "Input #0 requires gradient and is not a double precision floating point or complex. "
            "This check will likely fail if all the inputs are not of double precision floating "
            "point or complex. ")):
        # float32 cannot hold x + 1e-6 exactly: as the warning says, the check fails
        assert gradcheck(lambda t: t * 2, (x,), raise_exception=False) is False
    with pytest.warns(UserWarning, match="^Input #0 requires gradient"):
        assert gradcheck(lambda t: t * 2, (x,), eps=1e-2, atol=1e-3) is True


def test_stride_zero_input():
    x = leaf([1.0]).expand((3,))
    with pytest.raises(RuntimeError, match=exact(
            "The 0th input has a dimension with stride 0. gradcheck only supports inputs that "
            "are non-overlapping to be able to compute the numerical gradients correctly. You "
            "should call .contiguous on the input before passing it to gradcheck.")):
        gradcheck(lambda t: t * 2, (x,), raise_exception=False)


def test_neither_mode():
    with pytest.raises(AssertionError, match=exact(
            "Expected at least one of check_forward_ad or check_backward_ad to be True")):
        gradcheck(lambda t: t, (xd(),), check_forward_ad=False, check_backward_ad=False)


def test_output_shape_changes_under_perturbation():
    def fn(x):
        return x[:1] if x.detach().numpy()[0] == 1.0 else x[:2]

    with pytest.raises(AssertionError, match=re.escape(
            "Expected `func` to return outputs with the same shape when inputs are perturbed on "
            "index (0,) by 1e-06, but got: shapes torch.Size([1]) and torch.Size([2]).")):
        gradcheck(fn, (xd(),))


# ---------------------------------------------------------------- more functions
@pytest.mark.parametrize("fast_mode", [False, True])
def test_several_inputs_and_outputs(fast_mode):
    a, b = leaf(np.linspace(0.5, 1.5, 6).reshape(2, 3)), leaf([0.3, -0.2, 0.9])

    def fn(x, y):
        return (x * y).exp().sum(0), x @ y, (x - y).tanh()

    assert gradcheck(fn, (a, b), fast_mode=fast_mode) is True
    assert gradgradcheck(fn, (a, b), fast_mode=fast_mode) is True


def test_functions_on_tensors_and_arrays_agree():
    # the same check through the engine (Tensors) and through the compiler (arrays)
    def f(x):
        return np.sin(x) * x

    assert gradcheck(f, (np.array([0.5, 1.5]),)) is True
    assert gradcheck(f, (leaf([0.5, 1.5]),)) is True


def test_function_apply_good_and_gradgrad():
    assert gradcheck(Square.apply, (xd(),)) is True
    assert gradcheck(Square.apply, (xd(),), fast_mode=True) is True
    assert gradgradcheck(Square.apply, (xd(),), grad_outputs=(leaf([0.5, -1.0, 2.0]),)) is True


def test_gradgradcheck_grad_outputs_are_checked_too():
    # grad_outputs that require grad are inputs of the checked function: a backward that
    # ignores grad_output's value in a differentiable way is caught
    class IgnoresG(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g.detach()

    assert gradcheck(IgnoresG.apply, (xd(),)) is True
    with pytest.raises(GradcheckError, match="^Jacobian mismatch for output 0 with respect to "
                                             "input 1,\n"):
        gradgradcheck(IgnoresG.apply, (xd(),))


def test_no_warnings_on_a_passing_double_check():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradcheck(lambda x: x.exp(), (xd(),)) is True


# ---------------------------------------------------------------- check_forward_ad
class BadJvp(Function):  # backward right, jvp wrong
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2

    @staticmethod
    def jvp(ctx, t):
        return t * 3


@pytest.mark.parametrize("fast_mode", [False, True])
def test_check_forward_ad_passes(fast_mode):
    a, b = xd(), leaf([[1.0, 2.0, 3.0], [0.5, 0.2, 0.1]])

    def fn(x, y):
        return (x ** 2).sin() * y, y.sum(0)

    assert gradcheck(fn, (a, b), check_forward_ad=True, fast_mode=fast_mode) is True
    assert gradcheck(fn, (a, b), check_forward_ad=True, check_backward_ad=False,
                     fast_mode=fast_mode) is True


def test_check_forward_ad_catches_a_wrong_jvp():
    assert gradcheck(BadJvp.apply, (xd(),)) is True  # reverse mode alone: right
    with pytest.raises(GradcheckError) as info:
        gradcheck(BadJvp.apply, (xd(),), check_forward_ad=True)
    assert str(info.value) == (
        "Jacobian computed with forward mode mismatch for output 0 with respect to input 0,\n"
        "numerical:tensor([[2.0000, 0.0000, 0.0000],\n"
        "        [0.0000, 2.0000, 0.0000],\n"
        "        [0.0000, 0.0000, 2.0000]], dtype=torch.float64)\n"
        "analytical:tensor([[3., 0., 0.],\n"
        "        [0., 3., 0.],\n"
        "        [0., 0., 3.]], dtype=torch.float64)\n")
    assert gradcheck(BadJvp.apply, (xd(),), check_forward_ad=True, raise_exception=False) is False
    with pytest.raises(GradcheckError) as info:
        gradcheck(BadJvp.apply, (xd(),), check_forward_ad=True, fast_mode=True)
    text = str(info.value)
    assert text.startswith("Jacobian computed with forward mode mismatch for output 0 with "
                           "respect to input 0,\nnumerical:tensor(")
    assert "Analytical:\ntensor([[3., 0., 0.]," in text  # the slow recomputation is forward's


def test_fast_mode_tolerance_scales_with_the_projection():
    # an error of 0.5 * atol in every Jacobian entry passes in slow mode; v^T E u sums it
    # over all 400 entries (about 15x atol here), and torch's adjusted atol
    # (atol * sum(u) * sum(v)) scales the tolerance the same way
    x = leaf(np.linspace(1.0, 2.0, 20))

    def fn(t):
        return t * 2 + sg.tensor(np.full(20, t.detach().numpy().sum() * 0.5e-5))

    assert gradcheck(fn, (x,), rtol=0.0) is True
    assert gradcheck(fn, (x,), rtol=0.0, fast_mode=True) is True


def test_docs_exp_function_validated_by_gradcheck():
    # the Function docstring's Exp, "validating your backward function using gradcheck"
    from tests.corpus.functions import Exp

    x = leaf([-1.0, 0.5, 2.0])
    assert gradcheck(Exp.apply, (x,)) is True
    assert gradcheck(Exp.apply, (x,), fast_mode=True) is True
    assert gradgradcheck(Exp.apply, (x,)) is True  # its backward is made of ops: twice differentiable


# ---------------------------------------------------------------- check_undefined_grad
BC_WARNING = ("Backwards compatibility: New undefined gradient support checking feature is "
              "enabled by default, but it may break existing callers of this function. If this "
              "is true for you, you can call this function with \"check_undefined_grad=False\" "
              "to disable the feature")
NOTES = 'Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"'


def _no_materialize(bwd):
    class Twice(Function):  # x * 2; its backward sees None for an undefined gradient
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2

        backward = staticmethod(bwd)

    return Twice.apply


def test_undefined_output_grads_handled():
    assert gradcheck(_no_materialize(lambda ctx, g: None if g is None else g * 2), (xd(),))
    assert gradcheck(Square.apply, (xd(),))  # materialized: backward sees zeros


def test_undefined_output_grads_crash():
    def backward(ctx, g):
        if g is None:
            raise RuntimeError("this backward needs its output gradient")
        return g * 2

    fn = _no_materialize(backward)
    with pytest.warns(UserWarning, match=exact(BC_WARNING)):
        with pytest.raises(GradcheckError, match=exact(
                "Expected backward function to handle undefined output grads. " + NOTES)):
            gradcheck(fn, (xd(),))
    assert gradcheck(fn, (xd(),), check_undefined_grad=False) is True


def test_undefined_output_grads_give_nonzero():
    def backward(ctx, g):  # an undefined gradient taken for ones
        return (sg.ones(3, dtype=np.float64) if g is None else g) * 2

    with pytest.warns(UserWarning, match=exact(BC_WARNING)):
        with pytest.raises(GradcheckError, match=exact(
                "Expected all input grads to be undefined or zero when all output grads are "
                "undefined or zero. " + NOTES)):
            gradcheck(_no_materialize(backward), (xd(),))


def test_function_apply_on_arrays_goes_through_the_compiler():
    # the same Functions on NumPy arrays: checked by the generated code (the other door)
    from tests.corpus.functions import Exp

    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(GradcheckError, match="^" + re.escape(MISMATCH_00)):
        gradcheck(BadGrad.apply, (x,))
    assert gradcheck(Exp.apply, (x,)) is True
    assert gradgradcheck(Exp.apply, (x,)) is True
