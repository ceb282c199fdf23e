"""Spec §6: the version counter and in-place correctness checks (and §7's
allow_mutation_on_saved_tensors, which lifts them), against torch's values and texts."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import graph
from tests.autograd.spec_util import check, exact, leaf

# torch 2.x's text, with srcgrad's API named after torch's (Note [torch's words, srcgrad's names])
HINT = ("enable anomaly detection to find the operation that failed to compute its gradient, "
        "with torch.autograd.set_detect_anomaly(True, check_nan=False)"
        " (srcgrad: sg.autograd.set_detect_anomaly(True, check_nan=False)).")
ANOMALY_HINT = ("the backtrace further above shows the operation that failed to compute its "
                "gradient. The variable in question was changed in there or anywhere later. "
                "Good luck!")


def version_error(tensor_type, sizes, where, current, expected, hint=HINT):
    """torch's text, with srcgrad's type after torch's (`[torch.FloatTensor [2, 3]] (srcgrad:
    a float32 sg.Tensor of shape (2, 3))`)."""
    dtype = {"torch.FloatTensor": "float32", "torch.DoubleTensor": "float64"}[tensor_type]
    shape = tuple(int(n) for n in sizes.split(", ") if n)
    return exact("one of the variables needed for gradient computation has been modified by an "
                 f"inplace operation: [{tensor_type} [{sizes}]] (srcgrad: a {dtype} sg.Tensor of "
                 f"shape {shape}){where} is at version {current}; "
                 f"expected version {expected} instead. Hint: {hint}")


# ---------------------------------------------------------------- (a) the counter
def test_version_sequence():  # probe 6._version_behaviour
    x = sg.ones(3)
    seq = [x._version]
    x.add_(1)
    seq.append(x._version)
    x.add_(1).mul_(2)
    seq.append(x._version)
    v = x.view(3)
    seq.append(("view", v._version))
    v.add_(1)
    seq.append(("after view inplace", x._version, v._version))
    x.detach().add_(1)
    seq.append(("after detach inplace", x._version))
    x[0] = 1.0
    seq.append(("setitem", x._version))
    np.add(x, 1, out=x)
    seq.append(("out=", x._version))
    with sg.no_grad():
        x.add_(1)
    seq.append(("no_grad inplace", x._version))
    x.data = sg.ones(3)
    seq.append(("after .data=", x._version))
    seq.append(("new tensor", sg.ones(3)._version))
    assert seq == [0, 1, 3, ("view", 3), ("after view inplace", 4, 4),
                   ("after detach inplace", 5), ("setitem", 6), ("out=", 7),
                   ("no_grad inplace", 8), ("after .data=", 8), ("new tensor", 0)]


def test_every_inplace_op_bumps_once():
    t = sg.tensor(np.linspace(0.1, 0.9, 6).reshape(2, 3))
    ops = [lambda: t.add_(1), lambda: t.sub_(0.5), lambda: t.mul_(2), lambda: t.div_(2),
           lambda: t.pow_(1), lambda: t.exp_(), lambda: t.log_(), lambda: t.sin_(),
           lambda: t.cos_(), lambda: t.tanh_(), lambda: t.sigmoid_(), lambda: t.relu_(),
           lambda: t.neg_(), lambda: t.abs_(), lambda: t.sqrt_(), lambda: t.clamp_(0.1, 0.9),
           lambda: t.clamp_min_(0.2), lambda: t.clamp_max_(0.8), lambda: t.square_(),
           lambda: t.reciprocal_(), lambda: t.zero_(), lambda: t.fill_(0.5),
           lambda: t.copy_(sg.ones(2, 3)), lambda: t.masked_fill_(t.numpy() > 0, 0.25),
           lambda: t.index_add_(0, [1], sg.ones(1, 3)), lambda: t.index_fill_(1, [0], 2.0),
           lambda: t.index_copy_(0, [0], sg.ones(1, 3)), lambda: t.lerp_(sg.ones(2, 3), 0.5),
           lambda: t.addcmul_(t, t, value=0.1), lambda: t.addcdiv_(t, t + 1, value=0.1),
           lambda: t.uniform_(), lambda: t.normal_(), lambda: t.fill_diagonal_(1.0),
           lambda: t.__setitem__((0, 1), 3.0), lambda: t.__setitem__([1], 2.0)]
    for k, op in enumerate(ops):
        before = t._version
        op()
        assert t._version == before + 1, k


def test_resize_bumps_only_when_the_size_changes():  # test_resize_version_bump
    x = sg.rand(1)
    y = sg.randn(3)
    x.resize_((1, 2))
    versions = [x._version]
    x.resize_as_(y)
    versions.append(x._version)
    x.resize_((3,))
    x.resize_as_(y)
    versions.append(x._version)
    assert versions == [1, 2, 2] and x.shape == (3,)
    with pytest.raises(RuntimeError, match=exact("cannot resize variables that require grad")):
        sg.ones(2, requires_grad=True).resize_(3)


def test_augmented_assignment_is_inplace():
    t = sg.ones(2)
    alias = t
    t += 1
    t *= 3
    t -= 1
    t /= 5
    t **= 2
    assert t is alias and t._version == 5
    check(t, [1.0, 1.0])


def test_inplace_values_match_out_of_place():
    a = np.linspace(0.1, 0.9, 6).reshape(2, 3)
    cases = {"exp": np.exp(a), "log": np.log(a), "sqrt": np.sqrt(a), "neg": -a,
             "sigmoid": 1 / (1 + np.exp(-a)), "tanh": np.tanh(a), "reciprocal": 1 / a}
    for name, expected in cases.items():
        t = sg.tensor(a)
        assert getattr(t, name + "_")() is t
        check(t, expected)
    t = sg.tensor(a)
    t.masked_fill_(a > 0.5, -1.0)
    check(t, np.where(a > 0.5, -1.0, a))
    t = sg.tensor(a)
    t.index_add_(1, [0, 0, 2], sg.tensor(np.ones((2, 3))), alpha=2)
    check(t, a + np.array([[4.0, 0.0, 2.0]] * 2))


def test_increment_version():
    t = sg.ones(2)
    v = t[1:]
    graph.increment_version(t)
    assert (t._version, v._version) == (1, 1)
    graph.increment_version([t, sg.zeros(1)])
    assert t._version == 2


def test_increment_version_invalidates_a_saved_tensor():
    x = leaf([1.0, 2.0])
    w = sg.tensor([3.0, 4.0], dtype=np.float64)
    y = (x * w).sum()
    graph.increment_version(w)
    with pytest.raises(RuntimeError, match=version_error("torch.DoubleTensor", "2", "", 1, 0)):
        y.backward()


def test_inference_tensor_has_no_version():
    with sg.inference_mode():
        t = sg.ones(2)
    with pytest.raises(RuntimeError, match=exact("Inference tensors do not track version counter.")):
        _ = t._version


# ---------------------------------------------------------------- (b) the error's texts
def test_case_1_exp_example():
    x = sg.randn(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match=version_error("torch.FloatTensor", "3",
                                                         ", which is output 0 of Exp,", 1, 0)):
        y.sum().backward()


def test_double_dtype_modified_twice():
    x = leaf([1.0, 2.0, 3.0])
    y = x.exp()
    y.add_(1)
    y.mul_(2)
    with pytest.raises(RuntimeError, match=version_error("torch.DoubleTensor", "3",
                                                         ", which is output 0 of Exp,", 2, 0)):
        y.sum().backward()


def test_leaf_modified_under_no_grad():
    x = sg.randn(2, 3, requires_grad=True)
    w = sg.randn(2, 3, requires_grad=True)
    y = (x * w).sum()
    with sg.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match=version_error("torch.FloatTensor", "2, 3", "", 1, 0)):
        y.backward()


def test_0d_leaf_through_a_detached_alias():  # test_detach_then_inplace_raises_in_autograd
    x = sg.tensor(1.0, requires_grad=True)
    y = x * x
    x.detach().add_(1)
    with pytest.raises(RuntimeError, match=version_error("torch.FloatTensor", "", "", 1, 0)):
        y.backward()


def test_the_hint_under_anomaly_mode():
    x = sg.randn(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.warns(UserWarning):
        with sg.autograd.detect_anomaly():
            with pytest.raises(RuntimeError, match=version_error(
                    "torch.FloatTensor", "3", ", which is output 0 of Exp,", 1, 0, ANOMALY_HINT)):
                y.sum().backward()


def test_a_saved_input_is_named_by_its_grad_fn_now():
    x = leaf([1.0, 2.0])
    y = x * 2
    z = y * y  # saves y, an input
    y.add_(1)  # y's grad_fn is now AddBackward0
    with pytest.raises(RuntimeError, match=version_error("torch.DoubleTensor", "2",
                                                         ", which is output 0 of Add,", 1, 0)):
        z.sum().backward()


# ---------------------------------------------------------------- (c) cases
def test_case_2_only_saved_values_are_checked():  # test_inplace
    x = sg.ones(5, 5, requires_grad=True)
    y = sg.full((5, 5), 4.0, requires_grad=True)
    z = x * y
    q = z + y
    w = z * y
    z.add_(2)
    q.backward(sg.ones(5, 5))  # add saves nothing: the write into z does not matter
    assert x.grad.numpy()[0, 0] == 4 and y.grad.numpy()[0, 0] == 2  # 1 through z, 1 through q
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.backward(sg.ones(5, 5))


def test_case_3_version_sequence_of_a_view_and_its_base():
    x = sg.ones(4)
    v = x[1:]
    v.mul_(2)
    x.add_(1)
    assert (x._version, v._version) == (2, 2)


def test_case_4_copyslices():
    root = sg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x = root.clone()
    x.narrow(0, 0, 1).mul_(2)
    x.sum().backward()
    check(root.grad, [[2.0, 2.0], [1.0, 1.0]])
    assert x.grad_fn.name() == "torch::autograd::CopySlices"


def test_case_5_modifying_the_base_invalidates_a_saved_view():
    a = sg.randn(4, requires_grad=True)
    b = a * 1
    s = b[:2] ** 2
    b.add_(1)
    with pytest.raises(RuntimeError, match=version_error(
            "torch.FloatTensor", "2", ", which is output 0 of AsStrided,", 1, 0)):
        s.sum().backward()


def test_inplace_saving_its_own_input_keeps_the_value_before():
    x = leaf([0.5, 1.0])
    y = x * 2
    y.sin_()  # sin's backward reads the value before the write (torch's original_self)
    y.mul_(y)  # and mul_ by itself reads it twice
    y.sum().backward()
    check(x.grad, 2 * np.sin([1.0, 2.0]) * np.cos([1.0, 2.0]) * 2)


# ---------------------------------------------------------------- allow_mutation (§7)
def test_allow_mutation_clones_before_the_write():
    a0 = np.array([0.5, 1.0, 2.0])
    with graph.allow_mutation_on_saved_tensors():
        a = leaf(a0)
        b = a * 1.0
        out = (b.exp() * b).sum()  # saves b and exp(b)
        b.mul_(10.0)
        b.zero_()
        out.backward()
    check(a.grad, np.exp(a0) * a0 + np.exp(a0))
    check(b, [0.0, 0.0, 0.0])


def test_allow_mutation_through_a_view():
    a0 = np.array([1.0, 2.0, 3.0])
    with graph.allow_mutation_on_saved_tensors():
        a = leaf(a0)
        b = a.clone()
        out = (b ** 3).sum()
        b[1:].fill_(0.0)  # writes memory b's saved value shares
        out.backward()
    check(a.grad, 3 * a0 ** 2)


def test_allow_mutation_does_not_leak_past_the_context():
    with graph.allow_mutation_on_saved_tensors():
        pass
    a = leaf([1.0, 2.0])
    b = a.clone()
    out = (b ** 2).sum()
    b.sin_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
