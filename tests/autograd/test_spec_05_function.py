"""spec/torch_semantics.md §5: custom Functions applied to eager tensors — every "(b)
Errors" row that srcgrad has the feature for, every "(c) Test cases" entry, and the
section's probes (values are torch's, errors torch's exact texts)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import Function
from srcgrad.autograd.function import once_differentiable
from tests.autograd.spec_util import SECOND_TIME, check, const, exact, leaf, val
from tests.corpus import functions as F


class MulConst(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


class Double(Function):  # torch's F in the mark_dirty case: x.mul_(2)
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class Identity(Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class TwoOut(Function):
    """(x*2, x*3); records what backward received for the second output."""

    seen: list = []

    @staticmethod
    def forward(ctx, x, materialize=True):
        ctx.set_materialize_grads(materialize)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        TwoOut.seen.append(g2)
        return g1 * 2 + (0 if g2 is None else g2 * 3), None


# ---------------------------------------------------------------- (c) test cases

def test_case1_mulconst():
    x = leaf([1.0, 2.0])
    y = MulConst.apply(x, 3.0)
    check(y, [3.0, 6.0])
    assert y.grad_fn.name() == "MulConstBackward" and type(y.grad_fn).__name__ == "MulConstBackward"
    y.sum().backward()
    check(x.grad, [3.0, 3.0])


def test_case2_number_of_gradients():
    with pytest.raises(RuntimeError, match=exact(
            "function TooFewBackward returned an incorrect number of gradients (expected 2, got 1)")):
        F.TooFew.apply(leaf([1.0]), leaf([2.0])).sum().backward()
    x = leaf([1.0, 2.0])
    F.ExtraNone.apply(x).sum().backward()  # (g, None, None) for one input is fine
    check(x.grad, [2.0, 2.0])


def test_case3_invalid_gradient_shape():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return sg.randn(10)

    x = sg.randn(5, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match=exact(
            "Function BadBackward returned an invalid gradient at index 0 - got [10] but expected "
            "shape compatible with [5, 5]")):
        Bad.apply(x).sum().backward()


def test_case4_mark_dirty():
    a = leaf([1.0, 2.0])
    b = a.clone()
    v0 = b._version
    c = Double.apply(b)
    assert c is b and b._version > v0 + 1  # mul_ and mark_dirty each bump it
    assert c.grad_fn.name() == "DoubleBackward"
    c.sum().backward()
    check(a.grad, [2.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(
            "a leaf Variable that requires grad has been used in an in-place operation.")):
        Double.apply(a)
    check(a.detach(), [2.0, 4.0])  # the error comes after forward ran: the data changed


def test_case5_once_differentiable():
    x = leaf([3.0])
    y = F.SqOnce.apply(x)
    (g,) = sg.autograd.grad(y, x, sg.ones(1, dtype=np.float64, requires_grad=True),
                            create_graph=True)
    check(g, [6.0])
    assert g.grad_fn.name() == "torch::autograd::Error"
    assert [type(f).__name__ if f is not None else None
            for f, _ in g.grad_fn.next_functions] == ["AccumulateGrad"]
    with pytest.raises(RuntimeError, match=exact(
            "trying to differentiate twice a function that was marked with @once_differentiable")):
        g.backward()


def test_case5_plain_grad_output_does_not_require_grad():
    """probe 5.once_differentiable_create_graph_plain_grad_output"""
    x = leaf([3.0])
    (g,) = sg.autograd.grad(F.SqOnce.apply(x).sum(), x, create_graph=True)
    check(g, [6.0])
    assert not g.requires_grad


def test_case6_materialize_grads():
    TwoOut.seen.clear()
    x = leaf([1.0, 2.0])
    a, _ = TwoOut.apply(x)
    a.sum().backward()
    check(TwoOut.seen[-1], [0.0, 0.0])
    a, _ = TwoOut.apply(x, False)
    a.sum().backward()
    assert TwoOut.seen[-1] is None
    check(x.grad, [4.0, 4.0])


def test_case7_setup_context():
    x = leaf([3.0])
    y = F.PowSetup.apply(x)
    check(y, [9.0])
    y.backward(sg.ones(1, dtype=np.float64))
    check(x.grad, [6.0])
    check(F.PowSetup.apply(x, 3), [27.0])


def test_setup_context_receives_inputs_with_defaults_and_the_output():
    seen = []

    class Two(Function):
        @staticmethod
        def forward(x, y=3):
            return x * 1, x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen.append((inputs[1], type(output).__name__, len(output)))

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 + 2 * g2, None

    Two.apply(leaf([1.0]))
    assert seen == [(3, "tuple", 2)]


# ---------------------------------------------------------------- (a) semantics probes

def test_grad_mode_inside_forward_and_backward():  # probe 5.grad_mode_inside_forward_and_backward
    modes = []

    class Probe(Function):
        @staticmethod
        def forward(ctx, x):
            modes.append(sg.is_grad_enabled())
            return x * 2

        @staticmethod
        def backward(ctx, g):
            modes.append(sg.is_grad_enabled())
            return g * 2

    x = leaf([1.0])
    Probe.apply(x).sum().backward()
    y = Probe.apply(x).sum()
    sg.autograd.grad(y, x, create_graph=True)
    assert modes == [False, False, False, True]


def test_no_graph_without_grad_mode_or_inputs_requiring_grad():
    with sg.no_grad():
        y = MulConst.apply(leaf([1.0]), 2.0)
    assert y.grad_fn is None and not y.requires_grad
    y = MulConst.apply(const([1.0]), 2.0)
    assert y.grad_fn is None and not y.requires_grad
    assert F.MulConst.apply(1.5, 2.0) == 3.0  # probe 5.no_tensor_inputs: forward's result


def test_nontensor_outputs_pass_through():  # probe 5.nontensor_outputs
    class Mixed(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, 7, "s", None

        @staticmethod
        def backward(ctx, g, *rest):
            return g * 2

    x = leaf([1.0])
    t, n, s, none = Mixed.apply(x)
    assert (n, s, none) == (7, "s", None) and t.grad_fn.name() == "MixedBackward"
    t.sum().backward()
    check(x.grad, [2.0])


def test_next_functions_one_per_tensor_input():  # probe 5.custom_fn_next_functions_with_nontensor_arg
    class Three(Function):
        @staticmethod
        def forward(ctx, a, k, b):
            return a * k + b

        @staticmethod
        def backward(ctx, g):
            return g, None, g

    a, b = leaf([1.0]), leaf([2.0])
    fns = Three.apply(a, 3, b).grad_fn.next_functions
    assert [f.name() for f, _ in fns] == ["torch::autograd::AccumulateGrad"] * 2


def test_input_returned_as_is_is_a_new_view():  # test_function_returns_input
    x = leaf([1.0, 2.0])
    y = Identity.apply(x)
    assert y is not x and y._is_view() and y.grad_fn.name() == "IdentityBackward"
    y.sum().backward()
    check(x.grad, [1.0, 1.0])


def test_returned_twice():  # test_return_duplicate, probe 5.forward_returns_input_twice
    class Dup(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            return y, y

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 2

    p, q = Dup.apply(leaf([1.0]))
    assert p is q

    class Twice(Function):
        @staticmethod
        def forward(ctx, x):
            return x, x

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 + g2

    x = leaf([1.0])
    p, q = Twice.apply(x)
    assert p is not q and p is not x and q is not x
    (p + q).sum().backward()
    check(x.grad, [2.0])


def test_needs_input_grad():  # probe 5.needs_input_grad
    seen = []

    class Three(Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen.append(ctx.needs_input_grad)
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            return g, None, None

    Three.apply(leaf([1.0]), const([2.0]), 3.0).sum().backward()
    assert seen == [(True, False, False)] * 2


def test_ctx_attributes_visible_on_grad_fn():  # probe 5.ctx_nontensor_attributes_visible_on_grad_fn
    y = MulConst.apply(leaf([1.0]), 3)
    assert y.grad_fn.k == 3


def test_backward_result_conventions():
    # a gradient for an input that does not require grad is dropped
    x = leaf([1.0])
    F.NeedsGrad.apply(x, const([2.0])).sum().backward()
    check(x.grad, [2.0])

    # None for an input that requires grad: no gradient (test_function_returns_undefined_tensor)
    class NoGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return None

    x = leaf([1.0])
    NoGrad.apply(x).sum().backward()
    assert x.grad is None

    # [1, 3] for a [3] input is summed to it; a float64 gradient is cast to float32
    class Wide(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return sg.ones(1, 3, dtype=np.float64)

    x = sg.ones(3, requires_grad=True)  # float32
    Wide.apply(x).sum().backward()
    check(x.grad, [1.0, 1.0, 1.0])
    assert x.grad.dtype == np.float32

    class Scalar(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return sg.tensor(1.0)

    with pytest.raises(RuntimeError, match=exact(
            "Function ScalarBackward returned an invalid gradient at index 0 - got [] but expected "
            "shape compatible with [3]")):
        Scalar.apply(sg.ones(3, requires_grad=True)).sum().backward()


def test_exception_in_backward_keeps_its_type():  # probe 5.exception_in_backward_type_preserved
    class Raises(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("mine")

    with pytest.raises(ValueError, match="^mine$"):
        Raises.apply(leaf([1.0])).sum().backward()


def test_saved_tensors():
    class Saves(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            ctx.save_for_backward(None, x, y)
            ctx.save_for_backward(x, y)  # the last call wins
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * 2

    x = leaf([1.0, 2.0])
    y = Saves.apply(x)
    saved_x, saved_y = y.grad_fn.saved_tensors
    assert saved_x is x and saved_y is not y  # probe 5.save_input_and_output: (True, False)
    check(saved_y, val(y))
    assert saved_y.grad_fn is y.grad_fn
    raw = y.grad_fn._raw_saved_tensors
    assert raw[0].data is x and raw[0].unpack_hook is None
    y.sum().backward()
    for access in (lambda: y.grad_fn.saved_tensors, lambda: y.grad_fn._raw_saved_tensors,
                   lambda: y.sum().backward()):
        with pytest.raises(RuntimeError, match=exact(SECOND_TIME)):
            access()


def test_save_none():  # test_save_none_for_backward
    class SavesNone(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(None, x, None)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            a, x, b = ctx.saved_tensors
            assert a is None and b is None
            return g * x

    x = leaf([3.0])
    SavesNone.apply(x).sum().backward()
    check(x.grad, [3.0])


def test_saved_tensors_in_forward_is_empty():  # probe 5.saved_tensors_accessed_in_forward
    class Peek(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.saved_tensors[0]
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(IndexError):
        Peek.apply(leaf([1.0]))


def test_function_that_saved_nothing_runs_twice():  # probe 5.second_backward_custom_fn_without_saved_ok
    x = leaf([1.0])
    y = F.MulConst.apply(x, 2.0).sum()
    y.backward()
    y.backward()
    check(x.grad, [4.0])


def test_saved_input_and_output_modified_in_place():  # probes 5.saved_input_modified_inplace / output
    a = leaf([1.0, 2.0])
    x = a * 2
    y = F.Sq.apply(x)
    x.add_(1)  # torch names the saved input's producer at backward: now the in-place add
    with pytest.raises(RuntimeError, match=r"^one of the variables needed for gradient computation "
                       r"has been modified by an inplace operation: \[torch.DoubleTensor \[2\]\] "
                       r"\(srcgrad: a float64 sg.Tensor of shape \(2,\)\), "
                       r"which is output 0 of Add, is at version 1; expected version 0 instead\. "
                       r"Hint: "):
        y.sum().backward()
    y = F.Exp.apply(a * 1)
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"which is output 0 of Exp, is at version 1; expected "
                                           r"version 0 instead"):
        y.sum().backward()


def test_mark_dirty_on_a_leaf_not_requiring_grad():  # test_return_leaf_inplace
    class AddInPlace(Function):
        @staticmethod
        def forward(ctx, a, b):
            a.add_(b)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return g, g

    x, y = const([1.0]), leaf([2.0])
    q = AddInPlace.apply(x, y)
    assert q is x and not x.is_leaf and x.requires_grad and x.grad_fn.name() == "AddInPlaceBackward"
    q.sum().backward()
    check(y.grad, [1.0])


def test_inplace_without_mark_dirty():  # probes 5.inplace_on_leaf_inside_forward_without_mark_dirty_silent
    class Sneaky(Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = leaf([1.0, 2.0])
    c = Sneaky.apply(a)  # a leaf that requires grad: silent (grad mode is off in forward)
    assert c is not a
    check(a.detach(), [2.0, 4.0])
    b = leaf([1.0]).clone()
    s = b * b  # saves b
    Sneaky.apply(b)
    with pytest.raises(RuntimeError, match=r"which is output 0 of Clone, is at version 1; "
                                           r"expected version 0 instead"):
        s.sum().backward()


def test_seed_inplace_example_mark_dirty_then_version_error():
    """The seed's `Inplace` example (mark_dirty's docstring): mark_dirty bumps the version,
    so `b` (which saved `a`) reports it at backward. As written, `x.numpy()` runs: a
    Function's forward runs under no_grad, where torch's Tensor.numpy allows a tensor that
    requires grad (observed in torch 2.14.1: the literal example returns
    tensor(2., dtype=torch.float64, grad_fn=<LiteralBackward>))."""

    class Literal(Function):
        @staticmethod
        def forward(ctx, x):
            x_npy = x.numpy()
            x_npy += 1
            ctx.mark_dirty(x)
            return x

    out = Literal.apply(sg.tensor(1.0, requires_grad=True, dtype=np.float64).clone())
    assert out.item() == 2.0 and out.grad_fn.name() == "LiteralBackward"

    class Inplace(Function):
        @staticmethod
        def forward(ctx, x):
            x_npy = x.detach().numpy()  # shares storage with x
            x_npy += 1
            ctx.mark_dirty(x)
            return x

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            return grad_output

    a = sg.tensor(1.0, requires_grad=True, dtype=np.float64).clone()
    b = a * a
    Inplace.apply(a)
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation "
                                           "has been modified by an inplace operation"):
        b.backward()


def test_mark_non_differentiable():  # probes 5.mark_non_differentiable_grad_is_zeros / materialize False
    seen = []

    class Sort(Function):
        @staticmethod
        def forward(ctx, x, materialize=True):
            ctx.set_materialize_grads(materialize)
            idx = np.argsort(x)
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            return np.take_along_axis(x, idx, axis=-1), idx

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append(g2)
            (idx,) = ctx.saved_tensors
            return np.take_along_axis(g1, np.argsort(idx), axis=-1), None

    x = leaf([3.0, 1.0, 2.0])
    ordered, idx = Sort.apply(x)
    assert not idx.requires_grad and idx.grad_fn is None and idx.is_leaf
    ordered.backward(const([1.0, 2.0, 3.0]))
    check(x.grad, [3.0, 1.0, 2.0])
    check(seen[-1], [0, 0, 0])
    Sort.apply(x, False)[0].sum().backward()
    assert seen[-1] is None
    with pytest.raises(RuntimeError, match=exact(
            "element 0 of tensors does not require grad and does not have a grad_fn")):
        Sort.apply(x)[1].sum().backward()


def test_double_backward_through_a_differentiable_backward():  # probe 5.custom_fn_double_backward...
    x = leaf([3.0])
    (g,) = sg.autograd.grad(F.Sq.apply(x).sum(), x, create_graph=True)
    check(g, [6.0])
    (gg,) = sg.autograd.grad(g.sum(), x)
    check(gg, [2.0])


def test_grad_fn_apply_and_call():
    x = leaf([1.0, 2.0])
    y = MulConst.apply(x, 3.0)
    (g, none) = y.grad_fn.apply(const([1.0, 1.0]))  # the user's backward, as it is
    check(g, [3.0, 3.0])
    assert none is None
    check(y.grad_fn(const([1.0, 1.0])), [3.0, 3.0])  # the node: one gradient per edge
    assert isinstance(y.grad_fn, sg.autograd.function.BackwardCFunction)
    assert MulConst._backward_cls is type(y.grad_fn)


# ---------------------------------------------------------------- (b) error rows

def test_error_too_few_gradients():
    with pytest.raises(RuntimeError, match=exact(
            "function TooFewBackward returned an incorrect number of gradients (expected 2, got 1)")):
        F.TooFew.apply(leaf([1.0]), leaf([2.0])).sum().backward()


def test_error_extra_non_none_gradient():
    with pytest.raises(RuntimeError, match=exact(
            "function ExtraValueBackward returned an incorrect number of gradients (expected 1, "
            "got 2)")):
        F.ExtraValue.apply(leaf([1.0])).sum().backward()


def test_error_gradient_shape_incompatible():
    with pytest.raises(RuntimeError, match=exact(
            "Function WrongShapeBackward returned an invalid gradient at index 0 - got [10] but "
            "expected shape compatible with [5, 5]")):
        F.WrongShape.apply(sg.ones(5, 5, dtype=np.float64, requires_grad=True)).sum().backward()


def test_error_backward_returns_a_python_float():
    class ReturnsFloat(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return 1.0

    with pytest.raises(RuntimeError, match=exact("expected Variable or None (got float)")):
        ReturnsFloat.apply(leaf([1.0])).sum().backward()


def test_error_gradient_for_a_non_tensor_input():
    class NonTensor(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match=exact(
            "function NonTensorBackward returned a gradient different than None at position 2, but "
            "the corresponding forward input was not a Variable")):
        NonTensor.apply(leaf([1.0]), 3.0).sum().backward()


def test_error_save_for_backward_of_a_number():
    with pytest.raises(TypeError, match=exact(
            "save_for_backward can only save variables, but argument 1 is of type int")):
        F.SaveInt.apply(leaf([1.0]))


def test_error_save_for_forward_of_a_number():
    class SavesForward(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x, 3)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(AssertionError, match=exact(
            "save_for_forward expects all arguments to be tensors; you should save non-tensors as "
            "attributes on ctx.")):
        SavesForward.apply(leaf([1.0]))


def test_error_mark_dirty_on_a_leaf_requiring_grad():
    with pytest.raises(RuntimeError, match=exact(
            "a leaf Variable that requires grad has been used in an in-place operation.")):
        Double.apply(leaf([1.0]))


def test_error_mark_dirty_on_a_view_of_a_leaf_requiring_grad():
    a = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=exact(
            "a view of a leaf Variable that requires grad is being used in an in-place operation.")):
        Double.apply(a[0:2])


def test_error_mark_dirty_on_a_multi_output_view():
    a = leaf([1.0, 2.0, 3.0, 4.0])
    first, _ = np.split(a * 1, 2)
    with pytest.raises(RuntimeError, match=exact(
            "Output 0 of Split is a view and is being modified inplace. This view is the output of "
            "a function that returns multiple views. Such functions do not allow the output views "
            "to be modified inplace. You should replace the inplace operation by an out-of-place "
            "one.")):
        Double.apply(first)


NOT_INPUT = ("ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that "
             "have been mutated should be passed to ctx.mark_dirty().")


def test_error_mark_dirty_on_a_view_of_an_intermediate():
    """test_custom_function_mark_output_view_of_intermediate"""
    class ViewOfIntermediate(Function):
        @staticmethod
        def forward(ctx, x):
            v = (x * 2)[0:1]
            ctx.mark_dirty(v)
            return v

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match=exact(NOT_INPUT)):
        ViewOfIntermediate.apply(leaf([1.0, 2.0]))


def test_warning_mark_dirty_on_a_non_input():  # test_autograd_python_custom_function_inplace
    class NotInput(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 3
            y.add_(1)
            ctx.mark_dirty(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = leaf([1.0])
    with pytest.warns(UserWarning, match=exact(NOT_INPUT)):
        y = NotInput.apply(x)
    y.sum().backward()
    check(x.grad, [3.0])


def test_error_dirty_tensor_not_returned():
    with pytest.raises(RuntimeError, match=exact(
            "Some elements marked as dirty during the forward method were not returned as output. "
            "The inputs that are modified inplace must all be outputs of the Function.")):
        F.DirtyNotReturned.apply(leaf([1.0]).clone())


def test_error_double_backward_through_once_differentiable():
    x = leaf([3.0])
    (g,) = sg.autograd.grad(F.SqOnce.apply(x), x, const([1.0]).requires_grad_(),
                            create_graph=True)
    with pytest.raises(RuntimeError, match=exact(
            "trying to differentiate twice a function that was marked with @once_differentiable")):
        g.sum().backward()


def test_error_no_forward():
    with pytest.raises(NotImplementedError, match=exact(
            "You must implement the forward function for custom autograd.Function.")):
        Function.apply(leaf([1.0]))


def test_error_no_backward_at_backward_time():
    y = F.NoBackward.apply(leaf([1.0]))  # applying is fine
    with pytest.raises(NotImplementedError, match=exact(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD.")):
        y.sum().backward()


def test_error_both_backward_and_vjp():
    class Both(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def vjp(ctx, g):
            return g

    y = Both.apply(leaf([1.0]))
    with pytest.raises(RuntimeError, match=exact(
            "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You "
            "should only implement one of them.")):
        y.sum().backward()


def test_vjp_is_the_alias_of_backward():
    a, b = leaf(1.0), leaf(2.0)
    F.MulXYZ.apply(a, b, 4.0).backward()
    assert (float(val(a.grad)), float(val(b.grad))) == (8.0, 4.0)


def test_error_no_jvp():
    y = F.Exp.apply(leaf([1.0]))
    with pytest.raises(NotImplementedError, match=exact(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD.")):
        y.grad_fn.apply_jvp(const([1.0]))


def test_error_instantiation_warns_and_legacy_call_raises():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = MulConst()
    (w,) = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert str(w.message) == (
        f"{MulConst} should not be instantiated. Methods on autograd functions are all static, so "
        "you should invoke them on the class itself. Instantiating an autograd function will "
        "raise an error in a future version of PyTorch.")
    with pytest.raises(RuntimeError, match=exact(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")):
        fn(leaf([1.0]))


def test_error_setup_context_with_a_ctx_forward():
    class CtxAndSetup(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match=exact("missing a required argument: 'x'")):
        CtxAndSetup.apply(leaf([1.0]))


def test_error_forward_without_ctx_and_no_setup_context():
    class NoCtx(Function):
        @staticmethod
        def forward(x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match=exact(
            f"{NoCtx.forward.__qualname__}() takes 1 positional argument but 2 were given")):
        NoCtx.apply(leaf([1.0]))


def test_error_in_place_on_a_view_returned_by_a_custom_function():
    class IdView(Function):
        @staticmethod
        def forward(ctx, x):
            return x[:]

        @staticmethod
        def backward(ctx, g):
            return g

    class Id(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    tail = (" is a view and is being modified inplace. This view was created inside a custom "
            "Function (or because an input was returned as-is) and the autograd logic to handle "
            "view+inplace would override the custom backward associated with the custom "
            "Function, leading to incorrect gradients. This behavior is forbidden. You can fix "
            "this by cloning the output of the custom Function.")
    y = IdView.apply(leaf([1.0, 2.0]) * 1)
    with pytest.raises(RuntimeError, match=exact("Output 0 of IdView" + tail)):
        y.mul_(2)
    z = Id.apply(leaf([1.0, 2.0]))  # an input returned as-is
    with pytest.raises(RuntimeError, match=exact("Output 0 of Id" + tail)):
        z.add_(1)
    w = IdView.apply(leaf([1.0, 2.0]) * 1).clone()  # the fix: clone the output
    w.mul_(2)


def test_error_jvp_returns_a_tangent_for_a_non_differentiable_output():
    from srcgrad.autograd import forward_ad as fwAD  # noqa: N812 (torch's spelling)

    class SortJvp(Function):
        @staticmethod
        def forward(ctx, x):
            idx = np.argsort(x)
            ctx.mark_non_differentiable(idx)
            ctx.save_for_forward(idx)
            return np.take_along_axis(x, idx, axis=-1), idx

        @staticmethod
        def jvp(ctx, x_t):
            (idx,) = ctx.saved_tensors
            return np.take_along_axis(x_t, idx, axis=-1), x_t

    with fwAD.dual_level():
        x = fwAD.make_dual(const([3.0, 1.0, 2.0]), const([1.0, 2.0, 3.0]))
        with pytest.raises(RuntimeError, match=exact(
                "Function's jvp returned a gradient at position 1, but  the corresponding forward "
                "output is not a differentiable Tensor.You should return None at that position "
                "instead.")):
            SortJvp.apply(x)


def test_mark_dirty_on_a_view_rebases_its_base():
    """A dirtied view of a non-leaf: the base's history becomes CopySlices around the node,
    and the gradient of what the base came from is right (central differences)."""
    x0 = np.array([0.5, -1.0, 1.5, 2.0])
    x = leaf(x0)
    a = x * 1.0
    b = Double.apply(a[1:])
    assert a.grad_fn.name() == "torch::autograd::CopySlices"
    assert b.grad_fn.name() == "AsStridedBackward0"
    (a * sg.tensor(x0)).sum().backward()
    check(x.grad, x0 * [1.0, 2.0, 2.0, 2.0])  # d/dx sum(x * a), a = [x0, 2x1, 2x2, 2x3]

    class TwoOutputs(Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x, x * 1

        @staticmethod
        def backward(ctx, g1, g2):
            return 2 * (g1 + g2)

    with pytest.raises(RuntimeError, match="^If your Function modifies inplace an input that is a "
                                           "view of another Tensor, your Function cannot return "
                                           "more than one Tensor."):
        TwoOutputs.apply((x * 1.0)[1:])


def test_apply_with_keyword_arguments():  # probe 5.apply_with_kwargs_backward
    x = leaf([1.0, 2.0])
    y = MulConst.apply(x, k=3.0)
    check(y, [3.0, 6.0])
    y.sum().backward()  # backward returns one gradient per positional slot of forward
    check(x.grad, [3.0, 3.0])


def test_mark_dirty_itself_bumps_the_version():  # probe 5.mark_dirty_itself_bumps_version_by_1
    class MarkOnly(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    b = leaf([1.0]).clone()
    v0 = b._version
    assert MarkOnly.apply(b) is b and b._version > v0
