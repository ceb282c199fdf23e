"""spec/torch_semantics.md §3: leaf / non-leaf semantics — every "(b) Errors and
warnings" row and "(c) Test cases" entry, plus the section's probes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import (
    NONLEAF_GRAD_WARNING,
    check,
    const,
    exact,
    leaf,
    no_warnings,
    val,
)

REQUIRES_GRAD_FLAGS = ("you can only change requires_grad flags of leaf variables. If you want to "
                       "use a computed variable in a subgraph that doesn't require differentiation "
                       "use var_no_grad = var.detach().")
DETACH_VIEW = ("Can't detach views in-place. Use detach() instead. If you are using "
               "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as "
               "True, gradients are views of DDP buckets, and hence detach_() cannot be called on "
               "these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
               "function in torch/optim/optimizer.py as the solution.")


# ---------------------------------------------------------------- (b) errors and warnings

def test_grad_of_a_nonleaf_warns():  # test_tensor_grad_warnings
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.warns(UserWarning) as record:
        assert y.grad is None
    assert [str(w.message) for w in record] == [NONLEAF_GRAD_WARNING]
    with no_warnings():
        assert x.grad is None  # a leaf: no warning
        y.retain_grad()
        assert y.grad is None  # retains grad: no warning
        assert const([1.0]).grad is None


def test_retain_grad_without_requires_grad():
    with pytest.raises(RuntimeError, match=exact("can't retain_grad on Tensor that has requires_grad=False")):
        const([1.0]).retain_grad()


def test_requires_grad_false_on_a_nonleaf():
    y = leaf([1.0]) * 2
    with pytest.raises(RuntimeError, match=exact(REQUIRES_GRAD_FLAGS)):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match=exact(REQUIRES_GRAD_FLAGS)):
        y.requires_grad = False
    assert y.requires_grad


def test_int_tensor_requires_grad_():
    t = sg.tensor(np.array([1, 2], dtype=np.int64))
    with pytest.raises(RuntimeError, match=exact(
            "only Tensors of floating point dtype can require gradients")):
        t.requires_grad_()


def test_int_factory_with_requires_grad():
    with pytest.raises(RuntimeError, match=exact(
            "Only Tensors of floating point and complex dtype can require gradients")):
        sg.ones(2, dtype=np.int64, requires_grad=True)


def test_inplace_on_a_leaf_that_requires_grad():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(
            "a leaf Variable that requires grad is being used in an in-place operation.")):
        x.add_(1)


def test_inplace_on_a_view_of_such_a_leaf():
    x = leaf([1.0, 2.0])
    message = exact("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    with pytest.raises(RuntimeError, match=message):
        x[0] = 5.0
    with pytest.raises(RuntimeError, match=message):
        x[:1].add_(1)


def test_detach_in_place_on_a_view():
    x = leaf([1.0, 2.0]) * 1
    with pytest.raises(RuntimeError, match=exact(DETACH_VIEW)):
        x[:1].detach_()


def test_assign_grad_of_the_wrong_size():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(
            "attempting to assign a gradient of size '[3]' to a tensor of size '[2]'. Please ensure "
            "that the gradient and the tensor are the same size")):
        x.grad = sg.ones(3)


def test_assign_grad_that_is_not_a_tensor():
    x = leaf([1.0, 2.0])
    with pytest.raises(TypeError, match=exact(
            "assigned grad expected to be a Tensor or None but got grad of type int")):
        x.grad = 0


def test_assign_grad_of_another_dtype():
    x = leaf([1.0, 2.0], dtype=np.float32)
    pattern = ("^attempting to assign a gradient with dtype '[^']+' to a tensor with grad_dtype "
               "'[^']+'" + exact(
                   ". The gradient must match the tensor's grad_dtype (defaults to the tensor's "
                   "dtype). You can set the tensor's grad_dtype attribute with a specific dtype, or "
                   "None to allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a "
                   "tensor and its gradient may break downstream systems that assume they match.")[1:])
    with pytest.raises(RuntimeError, match=pattern):
        x.grad = sg.tensor(np.array([1, 2], dtype=np.int64))


def test_assign_a_tensor_as_its_own_grad():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact("can't assign Variable as its own grad")):
        x.grad = x


def test_numpy_of_a_tensor_that_requires_grad():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")):
        x.numpy()
    np.testing.assert_array_equal(x.detach().numpy(), [1.0, 2.0])


# ---------------------------------------------------------------- (c) test cases

def test_case_1_is_leaf_table():  # probe 3.is_leaf_table
    a = sg.ones(2)
    b = sg.ones(2, requires_grad=True)
    c = b * 2
    d = a * 2
    e = c.detach()
    got = (a.is_leaf, a.requires_grad, b.is_leaf, b.requires_grad, c.is_leaf, c.requires_grad,
           d.is_leaf, d.requires_grad, e.is_leaf, e.requires_grad)
    assert got == (True, False, True, True, False, True, True, False, True, False)


def test_case_2_retain_grad():  # test_retain_grad
    x = leaf([1.0, 2.0])
    h = x * 3
    h.retain_grad()
    h.retain_grad()  # idempotent
    assert h.retains_grad is True
    out = (h * h).sum()
    out.backward(retain_graph=True)
    check(h.grad, [6.0, 12.0])
    out.backward()
    check(h.grad, [12.0, 24.0])
    check(x.grad, [36.0, 72.0])


def test_case_3_requires_grad_on_a_nonleaf():
    y = leaf([1.0]) * 2
    with pytest.raises(RuntimeError, match=exact(REQUIRES_GRAD_FLAGS)):
        y.requires_grad_(False)
    assert y.requires_grad_(True) is y
    assert y.requires_grad is True


def test_case_4_inplace_on_leaves():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=exact(
            "a leaf Variable that requires grad is being used in an in-place operation.")):
        x.add_(1)
    view_message = exact("a view of a leaf Variable that requires grad is being used in an in-place "
                         "operation.")
    with pytest.raises(RuntimeError, match=view_message):
        x[0] = 5.0
    with pytest.raises(RuntimeError, match=view_message):
        x.view_as(x).add_(1)
    with sg.no_grad():
        x.add_(1)
    check(x, [2.0, 3.0])
    assert x.is_leaf and x._version == 1


def test_case_5_detach_shares_storage_and_version():  # probe 3.detach_shares_storage_and_version
    x = leaf([1.0, 2.0])
    y = x * 2
    d = y.detach()
    before = y._version
    d.add_(1)
    check(y, [3.0, 5.0])
    assert y._version == before + 1
    assert d.requires_grad is False and d.is_leaf is True


# ---------------------------------------------------------------- (a) probes

def test_detach_is_a_constant():  # test_detach
    x = leaf([1.0, 2.0])
    z = x + (x * 2).detach()
    d = (x * 2).detach()
    assert d.grad_fn is None and not d.requires_grad and d.is_leaf
    z.sum().backward()
    check(x.grad, [1.0, 1.0])


def test_detach_in_place_makes_a_leaf():
    x = leaf([1.0, 2.0])
    y = x * 2
    assert y.detach_() is y
    assert y.is_leaf and y.grad_fn is None and not y.requires_grad
    check(y, [2.0, 4.0])


def test_requires_grad_on_leaves():  # test_requires_grad_
    x = sg.tensor(np.array([1.0, 2.0]))
    assert x.requires_grad_() is x and x.requires_grad and x.is_leaf
    assert x.requires_grad_(False) is x and not x.requires_grad
    x.requires_grad = True
    assert x.requires_grad


def test_propagation_and_integer_outputs():  # test_integer_outputs
    x = leaf([3.0, 1.0, 2.0])
    c = const([1.0, 1.0, 1.0])
    assert (x * c).requires_grad and not (c * c).requires_grad
    i = np.argmax(x)
    assert isinstance(i, sg.Tensor)
    assert not i.requires_grad and i.grad_fn is None
    assert int(i.item()) == 0
    assert not (x > 1.5).requires_grad


def test_grad_fn_of_a_leaf_is_none():
    x = leaf([1.0])
    assert x.grad_fn is None
    assert (x * 2).grad_fn.name() == "MulBackward0"


def test_retain_grad_on_a_leaf_is_a_no_op():
    x = leaf([1.0, 2.0])
    x.retain_grad()
    assert x.retains_grad is False
    (x * 2).sum().backward()
    check(x.grad, [2.0, 2.0])


def test_assign_grad_then_accumulate_in_place():  # probe 3.grad_assign_then_accumulate_inplace
    x = leaf([1.0, 2.0])
    g = const([5.0, 6.0])
    x.grad = g
    (x * 3).sum().backward()
    assert x.grad is g
    check(x.grad, [8.0, 9.0])


def test_del_grad_sets_none():
    x = leaf([1.0, 2.0])
    (x * 2).sum().backward()
    del x.grad
    assert x.grad is None
    x.grad = None
    assert x.grad is None


def test_factory_under_no_grad_makes_requiring_leaves():  # probe 3.no_grad_factory_requires_grad
    with sg.no_grad():
        a = sg.ones(2, requires_grad=True)
        b = a * 2
    assert (a.requires_grad, a.is_leaf, b.requires_grad, (a * 2).requires_grad) == (True, True, False, True)


def test_repr():  # test_autograd_print_tensor
    x = leaf([1.0])
    r = repr(x)
    assert r.startswith("tensor(") and "requires_grad=True" in r
    assert "grad_fn=<MulBackward0>" in repr(x * 2)
    assert "grad_fn=<CloneBackward0>" in repr(x.clone())
    assert "requires_grad" not in repr(const([1.0])) and "grad_fn" not in repr(const([1.0]))


def test_only_float_and_complex_can_require_grad():
    z = sg.tensor(np.array([1 + 1j]), requires_grad=True)
    assert z.requires_grad
    with pytest.raises(RuntimeError):
        sg.tensor(np.array([1, 2]), requires_grad=True)
    with pytest.raises(RuntimeError):
        sg.tensor(np.array([True]), requires_grad=True)


def test_values_round_trip():
    x = sg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.shape == (2, 2) and x.ndim == 2
    np.testing.assert_array_equal(val(x.T), [[1.0, 3.0], [2.0, 4.0]])
    assert sg.tensor(2.5).item() == 2.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(x.data, sg.Tensor) and not x.data.requires_grad


def test_data_does_not_bump_the_version():  # probe 3.dot_data_does_not_bump_version
    x = leaf([1.0, 2.0])
    before = x._version
    x.data.add_(1)
    assert x._version == before
    check(x, [2.0, 3.0])


def test_retained_grad_is_the_grad_of_the_current_version():  # test_retain_grad_inplace
    a = leaf([1.0]) * 1
    a.retain_grad()
    a.mul_(2)
    a.sum().backward()
    check(a.grad, [1.0])


def test_inplace_with_a_requiring_operand_makes_a_nonleaf():
    # probe 3.inplace_with_requiring_operand_makes_nonleaf, test_requires_grad_inplace
    a = sg.tensor(np.array([1.0, 2.0]))
    b = leaf([3.0, 4.0])
    a.add_(b)
    assert a.requires_grad and not a.is_leaf and a.grad_fn.name() == "AddBackward0"
    a.sum().backward()
    check(b.grad, [1.0, 1.0])


def test_inplace_on_a_nonleaf_changes_its_grad_fn():  # probe 3.nonleaf_inplace_ok
    x = leaf([1.0, 2.0])
    y = x * 2
    y.add_(1)
    assert y.grad_fn.name() == "AddBackward0"
    (y * y).sum().backward()
    check(x.grad, 4 * (2 * np.array([1.0, 2.0]) + 1))
