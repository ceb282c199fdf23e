"""spec/torch_semantics.md §1: `sg.autograd.backward` and `Tensor.backward` — every
"(b) Errors" row and "(c) Test cases" entry, plus the section's probes, with torch's
values and texts."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import (
    SECOND_TIME,
    check,
    const,
    dtype_re,
    exact,
    leaf,
    no_warnings,
    shape_re,
    val,
)

CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break the "
    "cycle and avoid the leak.")


# ---------------------------------------------------------------- (b) errors and warnings

def test_nonscalar_root_without_gradient():
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=exact(
            "grad can be implicitly created only for scalar outputs")):
        (x * 2).backward()


def test_complex_scalar_root_without_gradient():
    z = sg.tensor(np.array(1 + 2j, dtype=np.complex64), requires_grad=True)
    with pytest.raises(RuntimeError, match="^" + exact(
            "grad can be implicitly created only for real scalar outputs but got ")[1:-1]
            + dtype_re("complex64") + "$"):
        (z * 2).backward()


def test_root_that_does_not_require_grad():
    with pytest.raises(RuntimeError, match=exact(
            "element 0 of tensors does not require grad and does not have a grad_fn")):
        const([1.0]).sum().backward()
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(
            "element 1 of tensors does not require grad and does not have a grad_fn")):
        sg.autograd.backward([(x * 2).sum(), const([3.0]).sum()])


def test_gradient_shape_mismatch():
    x = leaf([1.0, 2.0, 3.0])
    pattern = (r"^Mismatch in shape: grad_output\[0\] has a shape of " + shape_re(2)
               + r" and output\[0\] has a shape of " + shape_re(3) + r"\.$")
    with pytest.raises(RuntimeError, match=pattern):
        (x * 2).backward(const([1.0, 1.0]))


def test_gradient_shape_mismatch_at_index_1_is_a_runtime_error():
    # torch crashes formatting this message (spec §0): require only the error type
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError):
        sg.autograd.backward([x * 2, x * 3], [const([1.0, 1.0, 1.0]), const([1.0, 1.0])])


def test_complex_gradient_for_a_real_output():
    x = leaf([1.0, 2.0], dtype=np.float32)
    pattern = ("^" + exact("For complex Tensors, both grad_output and output are required to have "
                           "the same dtype. Mismatch in dtype: grad_output[0] has a dtype of ")[1:-1]
               + dtype_re("complex64") + " and output\\[0\\] has a dtype of "
               + dtype_re("float32") + "\\.$")
    with pytest.raises(RuntimeError, match=pattern):
        (x * 2).backward(sg.tensor(np.array([1 + 0j, 1 + 0j], dtype=np.complex64)))


def test_gradient_that_is_not_a_tensor():
    x = leaf([1.0])
    with pytest.raises(TypeError, match=exact("gradients can be either Tensors or None, but got int")):
        (x * 2).backward(1)


def test_number_of_gradients():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact("got 2 tensors and 1 gradients")):
        sg.autograd.backward([(x * 2).sum(), (x * 3).sum()], [const(1.0)])


def test_empty_inputs():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(
            "`inputs` argument to `backward()` cannot be empty.")):
        (x * x).sum().backward(inputs=[])


def test_second_backward_after_the_buffers_were_freed():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=exact(SECOND_TIME)):
        y.backward()


def test_create_graph_warns():  # test_backward_create_graph_warns
    x = leaf([2.0])
    with pytest.warns(UserWarning) as record:
        (x ** 3).sum().backward(create_graph=True)
    assert CREATE_GRAPH_WARNING in [str(w.message) for w in record]


def test_grad_without_create_graph_does_not_warn():
    x = leaf([2.0])
    with no_warnings():
        (x ** 3).sum().backward()
        sg.autograd.grad((x ** 3).sum(), x, create_graph=True)


def test_grad_variables_is_deprecated():
    # torch's signature still takes it (not in API.md's list; the spec's (b) row)
    x = leaf([1.0, 2.0])
    with pytest.warns(FutureWarning, match=exact(
            "`grad_variables` is deprecated. Use `grad_tensors` instead.")):
        sg.autograd.backward([x * 2], grad_variables=[const([1.0, 10.0])])
    check(x.grad, [2.0, 20.0])


# ---------------------------------------------------------------- (c) test cases

def test_case_1_scalar_implicit_grad():
    x = leaf([1.0, 2.0, 3.0])
    (x ** 2).sum().backward()
    check(x.grad, [2.0, 4.0, 6.0])


def test_case_2_nonscalar_needs_a_gradient():
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=exact(
            "grad can be implicitly created only for scalar outputs")):
        (x * 2).backward()
    (x * 2).backward(const([1.0, 10.0, 100.0]))
    check(x.grad, [2.0, 20.0, 200.0])


def test_case_3_retain_graph_then_free():  # test_backward_twice_with_saved_values
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    check(x.grad, [2.0, 4.0])
    y.backward()
    check(x.grad, [4.0, 8.0])
    with pytest.raises(RuntimeError, match=exact(SECOND_TIME)):
        y.backward()


def test_case_4_inputs():  # test_backward_with_inputs, test_backward_with_nonleaf_inputs
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (x * y).sum().backward(inputs=[x])
    check(x.grad, [3.0, 4.0])
    assert y.grad is None

    x = leaf([1.0, 2.0])
    h = x * 3
    (h * h).sum().backward(inputs=[h, x])
    check(h.grad, [6.0, 12.0])
    check(x.grad, [18.0, 36.0])
    assert h.is_leaf is False


def test_case_5_create_graph_higher_order():  # test_hessian_vector
    x = leaf([2.0])
    y = x ** 3
    with pytest.warns(UserWarning):
        y.backward(create_graph=True)
    check(x.grad, [12.0])
    assert x.grad.requires_grad
    assert x.grad.grad_fn.name() == "torch::autograd::CopyBackwards"
    g = x.grad
    x.grad = None
    g.backward()
    check(x.grad, [12.0])


# ---------------------------------------------------------------- (a) probes

def test_numel1_nonscalar_implicit_ok():
    x = leaf([3.0])
    (x * 2).backward()
    check(x.grad, [2.0])


def test_float64_gradient_for_float32_output_is_cast():
    x = leaf([1.0, 2.0], dtype=np.float32)
    (x * 2).backward(const([1.0, 1.0], dtype=np.float64))
    assert x.grad.dtype == np.float32
    check(x.grad, [2.0, 2.0])


def test_gradient_none_for_an_output_that_does_not_require_grad():
    # (a) 2: such an output may be given None ... (a) 4: but every root must require grad
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(
            "element 1 of tensors does not require grad and does not have a grad_fn")):
        sg.autograd.backward([(x * 2).sum(), const([1.0, 2.0])], [None, None])


def test_accumulation_across_graphs():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    check(x.grad, [5.0, 7.0])


def test_multiple_roots_and_duplicate_root_are_summed():  # test_multi_backward, duplicate root
    x = leaf([1.0, 2.0])
    a, b = (x * 2).sum(), (x * x).sum()
    sg.autograd.backward([a, b])
    check(x.grad, [4.0, 6.0])
    x.grad = None
    c = (x * 5).sum()
    sg.autograd.backward([c, c])
    check(x.grad, [10.0, 10.0])


def test_single_tensor_and_single_gradient():
    x = leaf([1.0, 2.0])
    sg.autograd.backward(x * 2, const([1.0, 3.0]))
    check(x.grad, [2.0, 6.0])


def test_nonleaf_gets_no_grad():
    x = leaf([1.0, 2.0])
    h = x * 2
    (h * h).sum().backward()
    with pytest.warns(UserWarning):
        assert h.grad is None


def test_second_backward_of_a_graph_without_saved_tensors():
    # test_backward_twice_without_saved_values
    x = leaf([1.0, 2.0])
    y = (x + 1).sum()
    y.backward()
    y.backward()
    check(x.grad, [2.0, 2.0])


def test_create_graph_true_retain_graph_false_frees():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    with pytest.warns(UserWarning):
        y.backward(create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match=exact(SECOND_TIME)):
        y.backward()


def test_retain_graph_defaults_to_create_graph():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    with pytest.warns(UserWarning):
        y.backward(create_graph=True)
    x.grad = None
    y.backward()  # the graph was kept
    check(x.grad, [2.0, 4.0])


def test_nonleaf_in_inputs_retains_grad_flag():
    x = leaf([1.0, 2.0])
    h = x * 3
    assert h.retains_grad is False
    (h * h).sum().backward(inputs=[h])
    assert h.retains_grad is True
    check(h.grad, [6.0, 12.0])
    assert x.grad is None


def test_inputs_as_a_single_tensor_and_unreachable_inputs():
    x, z = leaf([1.0, 2.0]), leaf([5.0])
    (x * x).sum().backward(inputs=x)
    check(x.grad, [2.0, 4.0])
    (x * x).sum().backward(inputs=[x, z])  # z unreachable: silently left alone
    check(x.grad, [4.0, 8.0])
    assert z.grad is None


def test_inputs_keep_other_leaves_grad():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (x * y).sum().backward()
    (x * y).sum().backward(inputs=[y])
    check(x.grad, [3.0, 4.0])
    check(y.grad, [2.0, 4.0])


def test_backward_called_inside_no_grad_still_works():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    with sg.no_grad():
        y.backward()
    check(x.grad, [2.0, 4.0])


def test_output_computed_under_no_grad_has_no_grad_fn():
    x = leaf([1.0, 2.0])
    with sg.no_grad():
        y = (x * x).sum()
    assert y.grad_fn is None and not y.requires_grad
    with pytest.raises(RuntimeError, match=exact(
            "element 0 of tensors does not require grad and does not have a grad_fn")):
        y.backward()


def test_broadcast_reduces_grad():
    x = leaf([1.0, 2.0, 3.0])
    w = leaf([[1.0], [2.0]])
    (x * w).sum().backward()
    check(x.grad, [3.0, 3.0, 3.0])
    check(w.grad, [[6.0], [6.0]])


def test_zero_numel_leaf_gets_zero_numel_grad():  # test_accumulate_grad_with_zero_numel_grad
    x = sg.tensor(np.zeros((0, 3)), requires_grad=True)
    (x * 2).sum().backward()
    assert val(x.grad).shape == (0, 3)


def test_user_gradient_is_not_aliased():
    x = leaf([1.0, 2.0])
    g = const([1.0, 1.0])
    (x * 1).backward(g)
    assert x.grad is not g
    check(g, [1.0, 1.0])


def test_inputs_as_a_dict_uses_its_values():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (x * y).sum().backward(inputs={"first": x})
    check(x.grad, [3.0, 4.0])
    assert y.grad is None
