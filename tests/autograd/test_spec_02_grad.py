"""spec/torch_semantics.md §2: `sg.autograd.grad` — every "(b) Errors" row and
"(c) Test cases" entry, plus the section's probes."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import SECOND_TIME, check, const, exact, leaf, shape_re

grad = sg.autograd.grad

UNUSED_1 = ("The differentiated Tensor at index 1 appears to not have been used in the graph. "
            "Set allow_unused=True if this is the desired behavior.")


# ---------------------------------------------------------------- (b) errors

def test_unreachable_input():
    x, y = leaf([1.0, 2.0]), leaf([3.0])
    with pytest.raises(RuntimeError, match=exact(UNUSED_1)):
        grad((x * 2).sum(), [x, y])


def test_input_that_does_not_require_grad():
    x, c = leaf([1.0, 2.0]), const([3.0, 4.0])
    with pytest.raises(RuntimeError, match=exact("One of the differentiated Tensors does not require grad")):
        grad((x * c).sum(), [x, c])


def test_output_that_does_not_require_grad():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(
            "element 0 of tensors does not require grad and does not have a grad_fn")):
        grad(const([1.0]).sum(), [x])
    with pytest.raises(RuntimeError, match=exact(  # probe 2.outputs_list_with_non_requiring_element
            "element 1 of tensors does not require grad and does not have a grad_fn")):
        grad([(x * 2).sum(), const([1.0]).sum()], [x])


def test_empty_inputs():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact("`inputs` argument to `grad()` cannot be empty.")):
        grad((x * x).sum(), [])


def test_materialize_grads_with_allow_unused_false():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match=exact(
            "Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
            "allow_unused=False.")):
        grad((x * x).sum(), [x], materialize_grads=True, allow_unused=False)


def test_grad_output_shape_mismatch():  # test_grad
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    pattern = (r"^Mismatch in shape: grad_output\[0\] has a shape of " + shape_re(2)
               + r" and output\[0\] has a shape of " + shape_re(2, 2) + r"\.$")
    with pytest.raises(RuntimeError, match=pattern):
        grad(x * 2, [x], [const([1.0, 1.0])])


def test_batched_grad_output_shape_mismatch():
    x = leaf([1.0, 2.0])
    pattern = ("^" + exact("If `is_grads_batched=True`, we interpret the first dimension of each "
                           "grad_output as the batch dimension. The sizes of the remaining "
                           "dimensions are expected to match the shape of corresponding output, "
                           "but a mismatch was detected: grad_output[0] has a shape of ")[1:-1]
               + shape_re() + r" and output\[0\] has a shape of " + shape_re(2)
               + exact(". If you only want some tensors in `grad_output` to be considered "
                       "batched, consider using vmap.")[1:])
    with pytest.raises(RuntimeError, match=pattern):
        grad(x * 2, [x], [const([1.0, 1.0])], is_grads_batched=True)


def test_only_inputs_false_is_deprecated():
    x = leaf([1.0, 2.0])
    with pytest.warns(FutureWarning, match=exact(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To "
            "accumulate gradient for other parts of the graph, please use "
            "torch.autograd.backward (srcgrad: sg.autograd.backward).")):
        (g,) = grad((x * x).sum(), [x], only_inputs=False)
    check(g, [2.0, 4.0])


# ---------------------------------------------------------------- (c) test cases

def test_case_1():
    x, y = leaf([1.0, 2.0]), leaf([3.0])
    gx, gy = grad((x * y).sum(), [x, y])
    check(gx, [3.0, 3.0])
    check(gy, [3.0])


def test_case_2_unused_inputs():  # test_grad_unreachable, test_grad_materialize_grads
    x, y = leaf([1.0, 2.0]), leaf([3.0])
    with pytest.raises(RuntimeError, match=exact(UNUSED_1)):
        grad((x * 2).sum(), [x, y])
    gx, gy = grad((x * 2).sum(), [x, y], allow_unused=True)
    check(gx, [2.0, 2.0])
    assert gy is None
    gx, gy = grad((x * 2).sum(), [x, y], materialize_grads=True)
    check(gx, [2.0, 2.0])
    check(gy, [0.0])
    assert not gy.requires_grad


def test_case_3_double_grad():  # probe 2.create_graph_double_grad
    x = leaf([2.0])
    (g,) = grad(x ** 3, x, create_graph=True)
    check(g, [12.0])
    assert g.grad_fn.name() == "MulBackward0"
    (gg,) = grad(g, x)
    check(gg, [12.0])


def test_case_4_batched_grad():  # test_grad_batched_grad
    x = leaf([1.0, 2.0])
    (g,) = grad(x * const([3.0, 4.0]), x, const(np.eye(2)), is_grads_batched=True)
    check(g, [[3.0, 0.0], [0.0, 4.0]])


def test_case_5_grad_does_not_touch_dot_grad_and_frees():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    (g,) = grad(y, x)
    check(g, [2.0, 4.0])
    assert x.grad is None
    with pytest.raises(RuntimeError, match=exact(SECOND_TIME)):
        grad(y, x)

    y = (x * x).sum()
    grad(y, x, retain_graph=True)
    (g,) = grad(y, x)
    check(g, [2.0, 4.0])


# ---------------------------------------------------------------- (a) probes

def test_returns_a_tuple():
    x = leaf([1.0, 2.0])
    out = grad((x * x).sum(), x)
    assert isinstance(out, tuple) and len(out) == 1


def test_dict_inputs_return_a_dict():  # probe 2.dict_inputs_returns_dict
    x, y = leaf([1.0, 2.0]), leaf([3.0])
    out = grad((x * y).sum(), {"a": x, "b": y})
    assert isinstance(out, dict) and list(out) == ["a", "b"]
    check(out["a"], [3.0, 3.0])
    check(out["b"], [3.0])


def test_nonleaf_input():  # test_grad_nonleaf
    x = leaf([1.0, 2.0])
    h = x * 3
    (gh,) = grad((h * h).sum(), h)
    check(gh, [6.0, 12.0])
    assert x.grad is None and h.retains_grad is False


def test_create_graph_on_a_linear_function():
    # probe 2.create_graph_on_linear_fn_grad_requires_grad?
    x = leaf([1.0, 2.0])
    (g,) = grad((x * 3).sum(), x, create_graph=True)
    check(g, [3.0, 3.0])
    assert g.requires_grad is False and g.grad_fn is None


def test_grad_under_no_grad_with_create_graph():
    # probe 2.grad_called_under_no_grad_with_create_graph
    x = leaf([2.0])
    y = (x ** 3).sum()
    with sg.no_grad():
        (g,) = grad(y, x, create_graph=True)
    assert g.requires_grad
    (gg,) = grad(g.sum(), x)
    check(gg, [12.0])


def test_grad_outputs_weight_the_outputs():
    x = leaf([1.0, 2.0])
    (g,) = grad([x * 2, x * x], x, [const([1.0, 10.0]), const([1.0, 1.0])])
    check(g, [4.0, 24.0])
