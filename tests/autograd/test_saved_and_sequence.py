"""Saved tensors of custom Functions (saved_variables, clear_saved_tensors_on_access,
boxed_grads_call) and Node._set_sequence_nr; values and texts observed in torch 2.14."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd.function import Function

SECOND = ("Trying to backward through the graph a second time (or directly access saved "
          "tensors after they have already been freed).")
ONCE = ("saved_tensors can only be accessed once when clear_saved_tensors_on_access=True is set "
        "on the autograd.Function. Either access saved_tensors only once, or set "
        "clear_saved_tensors_on_access=False.")


def _saving(clear=False, reads=1):
    class F(Function):
        clear_saved_tensors_on_access = clear

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            for _ in range(reads):
                (x,) = ctx.saved_tensors
            return g * x

    return F


def test_saved_variables_is_deprecated_saved_tensors():
    x = sg.ones(2, requires_grad=True)
    y = _saving().apply(x)
    with pytest.warns(DeprecationWarning, match="^'saved_variables' is deprecated; use "
                                                "'saved_tensors'$"):
        (v,) = y.grad_fn.saved_variables
    assert v is x  # observed in torch 2.14: (tensor([1., 1.], requires_grad=True),), x itself
    y.sum().backward()
    with pytest.warns(DeprecationWarning), pytest.raises(RuntimeError, match="^" + SECOND[:40]):
        _ = y.grad_fn.saved_variables


def test_saved_tensors_after_backward_freed_is_second_time_text():
    x = sg.ones(2, requires_grad=True)
    y = _saving().apply(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match=r"^Trying to backward through the graph a second "
                                           r"time \(or directly access saved tensors"):
        _ = y.grad_fn.saved_tensors
    z = _saving().apply(x).sum()
    z.backward()
    with pytest.raises(RuntimeError, match=r"^Trying to backward through the graph a second"):
        z.backward()


def test_clear_saved_tensors_on_access():
    # observed in torch 2.14: default False; a second read raises ONCE, in one backward,
    # in a second (retained) backward and through grad_fn.saved_tensors
    assert Function.clear_saved_tensors_on_access is False
    x = sg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="^" + ONCE.replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.") + "$"):
        _saving(clear=True, reads=2).apply(x).sum().backward()
    y = _saving(clear=True).apply(x).sum()
    y.backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])
    with pytest.raises(RuntimeError, match="^saved_tensors can only be accessed once"):
        y.backward()
    out = _saving(clear=True).apply(x)
    assert len(out.grad_fn.saved_tensors) == 1
    with pytest.raises(RuntimeError, match="^saved_tensors can only be accessed once"):
        _ = out.grad_fn.saved_tensors
    # without retain_graph the node is freed: then torch's second-time text
    w = _saving(clear=True).apply(x).sum()
    w.backward()
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second"):
        w.backward()


def test_boxed_grads_call():
    # observed in torch 2.14: backward gets one list; (tensor([2., 2.]), tensor([3., 3.]))
    seen = []

    class F(Function):
        boxed_grads_call = True

        @staticmethod
        def forward(ctx, x, y):
            return x * 2, y * 3

        @staticmethod
        def backward(ctx, grads):
            seen.append(type(grads))
            g1, g0 = grads.pop(), grads.pop()
            return g0 * 2, g1 * 3

    assert Function.boxed_grads_call is False
    x, y = sg.ones(2, requires_grad=True), sg.ones(2, requires_grad=True)
    a, b = F.apply(x, y)
    (a + b).sum().backward()
    assert seen == [list]
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(y.grad.numpy(), [3.0, 3.0])


def test_set_sequence_nr_reorders_ready_nodes_only():
    # observed in torch 2.14: b's node runs first normally; after a's number is set above
    # b's, ['a', 'b'], both still after their consumer (the add)
    x = sg.ones(2, requires_grad=True)
    log = []
    a, b = x * 2, x * 3
    a.grad_fn.register_hook(lambda *args: log.append("a"))
    b.grad_fn.register_hook(lambda *args: log.append("b"))
    (a + b).sum().backward(retain_graph=True)
    assert log == ["b", "a"]
    log.clear()
    a.grad_fn._set_sequence_nr(b.grad_fn._sequence_nr() + 100)
    assert a.grad_fn._sequence_nr() - b.grad_fn._sequence_nr() == 100
    s = (a + b).sum()
    s.grad_fn._set_sequence_nr(0)  # below its inputs' nodes: it must still run first
    s.backward()
    assert log == ["a", "b"]
    np.testing.assert_array_equal(x.grad.numpy(), [10.0, 10.0])
    acc = (x * 2).grad_fn.next_functions[0][0]
    acc._set_sequence_nr(5)
    assert acc._sequence_nr() == 5  # observed in torch 2.14: 5


def test_set_sequence_nr_on_custom_function_node():
    x = sg.ones(2, requires_grad=True)
    y = _saving().apply(x)
    y.grad_fn._set_sequence_nr(7)
    assert y.grad_fn._sequence_nr() == 7
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])
