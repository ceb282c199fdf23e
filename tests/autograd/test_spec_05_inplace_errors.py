"""The in-place error rows of spec §3, §5 and §6: one test per row, torch's exact text."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import exact, leaf

LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation."
MULTI = (" is a view and is being modified inplace. This view is the output of a function that "
         "returns multiple views. Such functions do not allow the output views to be modified "
         "inplace. You should replace the inplace operation by an out-of-place one.")
NO_GRAD_VIEW = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
    "code by moving both the view and the inplace either both inside the no_grad block (if you "
    "don't want the inplace to be tracked) or both outside (if you want the inplace to be "
    "tracked).")


class MulDirty(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class IdView(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x[:]

    @staticmethod
    def backward(ctx, g):
        return g


# ---------------------------------------------------------------- §3
@pytest.mark.parametrize("op", [lambda x: x.add_(1), lambda x: x.mul_(x), lambda x: x.exp_(),
                                lambda x: x.zero_(), lambda x: x.copy_(sg.ones(2)),
                                lambda x: x.__iadd__(1)])
def test_inplace_on_a_leaf_that_requires_grad(op):
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(LEAF)):
        op(x)
    assert x._version == 0


@pytest.mark.parametrize("op", [lambda x: x[:1].add_(1), lambda x: x.view_as(x).mul_(2),
                                lambda x: x.T.zero_(), lambda x: x.__setitem__(0, 5.0),
                                lambda x: x.__setitem__([0], 5.0), lambda x: x[0].fill_(1.0)])
def test_inplace_or_setitem_on_a_view_of_such_a_leaf(op):
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(VIEW_OF_LEAF)):
        op(x)
    assert x._version == 0


def test_no_grad_allows_both():
    x = leaf([1.0, 2.0])
    with sg.no_grad():
        x.add_(1)
        x[0] = 5.0
        x[1:].mul_(2)
    assert x.is_leaf and x._version == 3
    np.testing.assert_array_equal(x.detach().numpy(), [5.0, 6.0])


# ---------------------------------------------------------------- §5 (custom Functions)
def test_mark_dirty_on_a_leaf():
    with pytest.raises(RuntimeError, match=exact(
            "a leaf Variable that requires grad has been used in an in-place operation.")):
        MulDirty.apply(leaf([1.0, 2.0]))


def test_mark_dirty_on_a_view_of_a_leaf():
    with pytest.raises(RuntimeError, match=exact(VIEW_OF_LEAF)):
        MulDirty.apply(leaf([1.0, 2.0])[:1])


def test_mark_dirty_on_a_multi_output_view():
    a, _ = (leaf([1.0, 2.0]) * 1).split([1, 1])
    with pytest.raises(RuntimeError, match=exact("Output 0 of SplitWithSizes" + MULTI)):
        MulDirty.apply(a)


def test_inplace_on_a_view_returned_by_a_custom_function():
    y = IdView.apply(leaf([1.0, 2.0]) * 1)
    with pytest.raises(RuntimeError, match=exact(
            "Output 0 of IdView is a view and is being modified inplace. This view was created "
            "inside a custom Function (or because an input was returned as-is) and the autograd "
            "logic to handle view+inplace would override the custom backward associated with the "
            "custom Function, leading to incorrect gradients. This behavior is forbidden. You can "
            "fix this by cloning the output of the custom Function.")):
        y.add_(1)


# ---------------------------------------------------------------- §6
@pytest.mark.parametrize("split, name, k", [
    (lambda t: t.split(2), "Split", 0), (lambda t: t.chunk(2), "Split", 1),
    (lambda t: t.unbind(0), "Unbind", 3), (lambda t: t.split([1, 3]), "SplitWithSizes", 1)])
def test_inplace_on_an_output_of_split_chunk_unbind(split, name, k):
    parts = split(leaf([1.0, 2.0, 3.0, 4.0]) * 1)
    with pytest.raises(RuntimeError, match=exact(f"Output {k} of {name}" + MULTI)):
        parts[k].mul_(2)


def test_split_outputs_may_be_written_when_nothing_is_recorded():
    t = sg.tensor([1.0, 2.0, 3.0, 4.0])
    a, b = t.split(2)
    b.mul_(2)
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0, 6.0, 8.0])


def test_view_made_under_no_grad_modified_with_grad():
    b = leaf([1.0, 2.0, 3.0]) * 1
    with sg.no_grad():
        v = b[:2]
    with pytest.raises(RuntimeError, match=exact(NO_GRAD_VIEW)):
        v.mul_(2)
    with sg.no_grad():
        v.mul_(2)  # both in no_grad: allowed


def test_view_made_under_no_grad_of_a_base_that_needs_no_grad():
    b = sg.zeros(3)
    with sg.no_grad():
        v = b[:2]
    with pytest.raises(RuntimeError, match=exact(NO_GRAD_VIEW)):
        v.copy_(sg.ones(2, requires_grad=True))


def test_out_with_inputs_that_require_grad():
    a = sg.ones(2, requires_grad=True)
    out = sg.zeros(2)
    with pytest.raises(RuntimeError, match=exact(
            "mul(): functions with out=... arguments don't support automatic differentiation, "
            "but one of the arguments requires grad.")):
        np.multiply(a, 2.0, out=out)
    assert out._version == 0


def test_writing_an_expanded_view():
    t = sg.ones(3).expand(2, 3)
    with pytest.raises(RuntimeError, match=exact(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the "
            "operation.")):
        t.add_(1)


def test_inplace_on_an_inference_tensor_outside_inference_mode():
    with sg.inference_mode():
        t = sg.ones(2)
    with pytest.raises(RuntimeError, match=exact(
            "Inplace update to inference tensor outside InferenceMode is not allowed.You can make "
            "a clone to get a normal tensor before doing inplace update.See "
            "https://github.com/pytorch/rfcs/pull/17 for more details.")):
        t.add_(1)
