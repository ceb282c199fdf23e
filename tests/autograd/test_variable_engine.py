"""`sg.autograd.Variable` and `Variable._execution_engine` (queue_callback, run_backward):
values and texts observed in torch 2.14 (torch.autograd.variable, torch/csrc/autograd/engine.cpp)."""

import warnings

import numpy as np
import pytest

import srcgrad as sg

V = sg.autograd.Variable
ENGINE = V._execution_engine


def _hooked(x, hook):
    y = x * 2
    y.register_hook(hook)
    return y


def test_variable_is_a_class_whose_isinstance_accepts_tensors():
    # observed in torch 2.14: (True, False, 'Tensor', True); Variable is not Tensor
    v = V(sg.ones(2), requires_grad=True)
    assert isinstance(sg.ones(2), V) and V is not sg.Tensor
    assert not issubclass(sg.Tensor, V) and not isinstance(3, V)
    assert type(v) is sg.Tensor and v.requires_grad and v.is_leaf
    assert V.__name__ == "Variable" and sg.autograd.graph.Variable is V


def test_variable_constructor_detaches_and_shares_data():
    # observed in torch 2.14: Variable(t).add_(1) changes t; Variable(nonleaf) is a leaf
    # (False, False, None, True); Variable() is tensor([])
    t = sg.ones(2)
    v = V(t)
    v.add_(1)
    np.testing.assert_array_equal(t.numpy(), [2.0, 2.0])
    assert v is not t and (t._version, v._version) == (1, 1)
    n = sg.ones(2, requires_grad=True) * 2
    w = V(n)
    assert (w.requires_grad, w.grad_fn, w.is_leaf) == (False, None, True)
    assert repr(V()) == "tensor([])"
    assert repr(V(sg.ones(2), True)) == "tensor([1., 1.], requires_grad=True)"


def test_variable_constructor_errors_and_volatile_warning():
    with pytest.raises(TypeError, match="^Variable data has to be a tensor, but got list$"):
        V([1.0, 2.0])
    with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex dtype "
                                           "can require gradients$"):
        V(sg.ones(2, dtype=sg.int64), requires_grad=True)
    with pytest.warns(UserWarning, match="^volatile was removed and now has no effect. Use "
                                         r"`with torch.no_grad\(\):` instead.$"):
        V(sg.ones(2), volatile=True)


def test_queue_callback_outside_backward_is_torchs_error():
    with pytest.raises(RuntimeError, match="^Final callbacks can only be installed during "
                                           "backward pass.$"):
        ENGINE.queue_callback(lambda: None)


def test_callback_runs_after_every_gradient_is_accumulated():
    # observed in torch 2.14: ['hook', ('cb', False)]; and both .grad set in the callback
    a, b = sg.ones(3, requires_grad=True), sg.ones(3, requires_grad=True)
    log = []

    def hook(g):
        log.append("hook")
        ENGINE.queue_callback(lambda: log.append(("cb", a.grad is None, b.grad is None)))
        return g

    (_hooked(a, hook) * b).sum().backward()
    assert log == ["hook", ("cb", False, False)]
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0, 2.0])


def test_callback_queued_by_a_callback_runs_and_list_is_per_pass():
    log = []

    def hook(g):
        def cb():
            log.append(1)
            ENGINE.queue_callback(lambda: log.append(2))
        ENGINE.queue_callback(cb)
        return g

    x = sg.ones(3, requires_grad=True)
    _hooked(x, hook).sum().backward()
    assert log == [1, 2]  # observed in torch 2.14
    (x * 3).sum().backward()  # a later pass runs none of them again
    assert log == [1, 2]
    with pytest.raises(RuntimeError, match="^Final callbacks"):
        ENGINE.queue_callback(lambda: None)  # the pass's list is closed


def test_callback_in_grad_and_in_custom_function_backward():
    log = []

    def hook(g):
        ENGINE.queue_callback(lambda: log.append("grad-cb"))
        return g

    x = sg.ones(3, requires_grad=True)
    (g,) = sg.autograd.grad(_hooked(x, hook).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [2.0, 2.0, 2.0])

    class F(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            ENGINE.queue_callback(lambda: log.append("fn-cb"))
            return g * 2

    F.apply(sg.ones(2, requires_grad=True)).sum().backward()
    assert log == ["grad-cb", "fn-cb"]  # observed in torch 2.14: ['cb'] in each case


def test_callback_grad_mode_is_the_passs():
    # observed in torch 2.14: [False, True] (create_graph=False, then True)
    log = []

    def hook(g):
        ENGINE.queue_callback(lambda: log.append(sg.is_grad_enabled()))
        return g

    x = sg.ones(3, requires_grad=True)
    _hooked(x, hook).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _hooked(x, hook).sum().backward(create_graph=True)
    assert log == [False, True]
    assert sg.is_grad_enabled()


def test_callback_errors_propagate_and_failed_pass_drops_callbacks():
    x = sg.ones(3, requires_grad=True)

    def raising(g):
        def cb():
            raise ValueError("boom")
        ENGINE.queue_callback(cb)
        return g

    with pytest.raises(ValueError, match="^boom$"):
        _hooked(x, raising).sum().backward()

    def not_callable(g):
        ENGINE.queue_callback(3)
        return g

    with pytest.raises(TypeError, match="^'int' object is not callable$"):
        _hooked(x, not_callable).sum().backward()

    log = []

    class Fails(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("bwd")

    def hook(g):
        ENGINE.queue_callback(lambda: log.append("cb"))
        return g

    y = Fails.apply(x) * 3
    y.register_hook(hook)
    with pytest.raises(ValueError, match="^bwd$"):
        y.sum().backward()
    assert log == []  # observed in torch 2.14: ['bwd'] only, the callback never ran


def test_reentrant_backward_has_its_own_callbacks():
    # observed in torch 2.14: ['inner-cb', 'after-inner', 'outer-cb']
    log = []

    def hook(g):
        with sg.enable_grad():
            w = sg.ones(2, requires_grad=True) * 2

            def inner(g2):
                ENGINE.queue_callback(lambda: log.append("inner-cb"))
                return g2

            w.register_hook(inner)
            w.sum().backward()
        log.append("after-inner")
        ENGINE.queue_callback(lambda: log.append("outer-cb"))
        return g

    _hooked(sg.ones(3, requires_grad=True), hook).sum().backward()
    assert log == ["inner-cb", "after-inner", "outer-cb"]


def test_run_backward_and_is_checkpoint_valid():
    # observed in torch 2.14: accumulate -> (None, tensor([2., 2., 2.])); grad ->
    # ((tensor([2., 2., 2.]),), None); is_checkpoint_valid() True
    x = sg.ones(3, requires_grad=True)
    r = ENGINE.run_backward(((x * 2).sum(),), (sg.tensor(1.0),), False, False, (), False, True)
    assert r is None
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    z = sg.ones(3, requires_grad=True)
    (g,) = ENGINE.run_backward(((z * 2).sum(),), (sg.tensor(1.0),), False, False, (z,), False,
                               False)
    np.testing.assert_array_equal(g.numpy(), [2.0, 2.0, 2.0])
    assert z.grad is None and ENGINE.is_checkpoint_valid() is True
