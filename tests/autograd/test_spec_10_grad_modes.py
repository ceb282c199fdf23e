"""spec/torch_semantics.md §10: grad modes applied to ops, inference tensors, and the
gradient layout — every "(b) Errors and warnings" row and "(c) Test cases" entry, plus
the section's probes. The modes as state (threads, decorators, generators) are in
test_grad_mode.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import check, exact, leaf

INFERENCE_SAVED = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a "
    "clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
    "`torch.inference_mode()` (srcgrad: `sg.no_grad()` instead of `sg.inference_mode()`).")
INFERENCE_INPLACE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone "
    "to get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 "
    "for more details.")


# ---------------------------------------------------------------- (b) errors and warnings

def test_inference_tensor_saved_for_backward():
    with sg.inference_mode():
        c = sg.ones(2)
    with pytest.raises(RuntimeError, match=exact(INFERENCE_SAVED)):
        c * sg.ones(2, requires_grad=True)


def test_inplace_update_of_an_inference_tensor_outside_inference_mode():
    with sg.inference_mode():
        c = sg.ones(2)
    with pytest.raises(RuntimeError, match=exact(INFERENCE_INPLACE)):
        c.add_(1)


def test_decorating_a_class_warns():
    with pytest.warns(FutureWarning, match=exact(
            "Decorating classes is deprecated and will be disabled in future versions. You should "
            "only decorate functions or methods. To preserve the current behavior of class "
            "decoration, you can directly decorate the `__init__` method and nothing else.")):

        @sg.no_grad()
        class Model:
            def __init__(self, x):
                self.y = x * 2

    x = leaf([1.0])
    assert Model(x).y.requires_grad is False


# ---------------------------------------------------------------- (c) test cases

def test_case_1_mode_table():  # probe 10.mode_table
    x = leaf([1.0, 2.0])
    table = [sg.is_grad_enabled()]
    with sg.no_grad():
        table.append(("no_grad", sg.is_grad_enabled(), (x * 2).requires_grad))
        with sg.enable_grad():
            table.append(("enable_grad inside no_grad", sg.is_grad_enabled(), (x * 2).requires_grad))
    with sg.set_grad_enabled(False):
        table.append(("set_grad_enabled(False)", (x * 2).requires_grad))
    sg.set_grad_enabled(False)
    table.append(("function-form set_grad_enabled(False)", (x * 2).requires_grad))
    sg.set_grad_enabled(True)
    with sg.inference_mode():
        y = x * 2
        table.append(("inference_mode", sg.is_grad_enabled(), sg.is_inference_mode_enabled(),
                      y.requires_grad, y.is_inference()))
        with sg.inference_mode(False):
            table.append(("inference_mode(False)", sg.is_inference_mode_enabled(),
                          sg.is_grad_enabled()))
    table.append(("after", sg.is_grad_enabled(), sg.is_inference_mode_enabled()))
    assert table == [True, ("no_grad", False, False), ("enable_grad inside no_grad", True, True),
                     ("set_grad_enabled(False)", False),
                     ("function-form set_grad_enabled(False)", False),
                     ("inference_mode", False, True, False, True), ("inference_mode(False)", False, True),
                     ("after", True, False)]


def test_case_2_enable_grad_decorator_no_paren():  # test_enable_grad_decorator_no_paren
    x = leaf([1.0])

    @sg.enable_grad
    def doubler(t):
        return t * 2

    with sg.no_grad():
        z = doubler(x)
    assert z.requires_grad
    z.sum().backward()
    check(x.grad, [2.0])


def test_case_3_accumulate_in_place_unless_create_graph():  # test_accumulate_grad
    x = leaf([1.0, 1.0])
    y = x + 2
    y.backward(sg.ones(2), retain_graph=True)
    g = x.grad
    check(g, [1.0, 1.0])
    y.backward(sg.ones(2), retain_graph=True)
    assert x.grad is g
    check(g, [2.0, 2.0])

    x = leaf([1.0, 1.0])
    y = x + 2
    y.backward(sg.ones(2), retain_graph=True)
    g = x.grad
    with pytest.warns(UserWarning):
        y.backward(sg.ones(2), create_graph=True)
    assert x.grad is not g
    check(g, [1.0, 1.0])  # probe 10.accumulate_inplace_vs_outofplace
    check(x.grad, [2.0, 2.0])


def test_case_4_gradient_layout():  # test_strided_leaf_grad_layout
    a = sg.rand(3, 4).T.requires_grad_()
    assert a.stride() == (1, 4)
    (a * 2).sum().backward()
    assert a.grad.stride() == (1, 4)
    check(a.grad, np.full((4, 3), 2.0))

    c = sg.rand(2, 4)[:, ::2].requires_grad_()
    assert c.is_leaf and c.stride() == (4, 2)  # not dense
    (c * 2).sum().backward()
    assert c.grad.stride() == (2, 1)
    check(c.grad, np.full((2, 2), 2.0))


def test_case_5_inference_tensor_updated_outside():
    with sg.inference_mode():
        c = sg.ones(2)
    with pytest.raises(RuntimeError, match=exact(INFERENCE_INPLACE)):
        c.add_(1)


def test_case_5_inference_tensor_saved():
    with sg.inference_mode():
        c = sg.ones(2)
    with pytest.raises(RuntimeError, match=exact(INFERENCE_SAVED)):
        c * sg.ones(2, requires_grad=True)


# ---------------------------------------------------------------- (a) probes

def test_plain_call_inside_a_block_reenables():  # test_set_grad_enabled
    x = leaf([1.0])
    with sg.set_grad_enabled(False):
        sg.set_grad_enabled(True)
        y = x * 2
    assert y.requires_grad


def test_no_grad_outputs_and_factories():
    x = leaf([1.0])
    with sg.no_grad():
        y = x * 2
        w = sg.zeros(2, requires_grad=True)
    assert not y.requires_grad and y.grad_fn is None
    assert w.requires_grad and w.is_leaf


def test_decorated_generator_builds_no_graph():  # test_set_grad_generator_functions
    x = leaf([1.0])

    @sg.no_grad()
    def gen():
        for _ in range(2):
            yield x * 2

    for y in gen():
        assert not y.requires_grad
        assert (x * 2).requires_grad  # the caller's mode between steps


def test_no_grad_inplace_on_a_nonleaf_is_invisible():  # probe 10.no_grad_inplace_on_nonleaf_grad_ignores_op
    x = leaf([1.0, 1.0])
    y = x * 2
    with sg.no_grad():
        y.mul_(3)
    y.sum().backward()
    check(x.grad, [2.0, 2.0])


def test_inference_tensor_in_normal_mode():  # probe 10.inference_tensor_in_normal_mode
    with sg.inference_mode():
        c = sg.ones(2)
    out = c * 2  # saves nothing of c
    assert (out.is_inference(), out.requires_grad, c.is_inference()) == (False, False, True)


def test_enable_grad_inside_inference_mode():  # probe 10.enable_grad_inside_inference_mode
    x = leaf([1.0])
    with sg.inference_mode():
        with sg.enable_grad():
            y = x * 2
            got = (sg.is_grad_enabled(), sg.is_inference_mode_enabled(), y.requires_grad, y.is_inference())
    assert got == (True, True, False, True)


def test_existing_noncontiguous_grad_accumulated_in_place():
    # probe 10.existing_noncontiguous_grad_accumulated_inplace
    x = leaf(np.ones((2, 3)))
    g = sg.zeros(3, 2, dtype=np.float64).T
    assert g.stride() == (1, 2)
    x.grad = g
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        (x * 1).sum().backward()
    assert x.grad is g
    check(g, np.ones((2, 3)))
    assert [str(w.message) for w in record if w.category is UserWarning] == [
        "grad and param do not obey the gradient layout contract. This is not an error, but may "
        "impair performance.\ngrad.sizes() = [2, 3], strides() = [1, 2]\n"
        "param.sizes() = [2, 3], strides() = [3, 1]"]


def test_first_grad_is_a_plain_leaf():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    assert x.grad.is_leaf and not x.grad.requires_grad and x.grad.grad_fn is None


def test_ops_follow_their_own_threads_mode():
    """A thread under no_grad records no graph while another thread records one."""
    import threading

    x = leaf([1.0, 2.0])
    barrier = threading.Barrier(2)
    out = {}

    def worker(name, ctx):
        with ctx:
            barrier.wait()
            out[name] = (x * 2).requires_grad
            barrier.wait()

    threads = [threading.Thread(target=worker, args=("off", sg.no_grad())),
               threading.Thread(target=worker, args=("on", sg.enable_grad()))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {"off": False, "on": True}
    assert (x * 2).requires_grad
