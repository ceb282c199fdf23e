"""inference_mode(mode=...), hooks that remove themselves or raise, hook contexts exited
twice, allow_mutation_on_saved_tensors under double backward; values and texts observed
in torch 2.14."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg

graph = sg.autograd.graph


def test_inference_mode_mode_keyword():
    # observed in torch 2.14: (False, True, False) and (True, False)
    with sg.inference_mode(mode=False):
        x = sg.ones(2, requires_grad=True)
        y = x * 2
        state = sg.is_inference_mode_enabled()
    assert (state, y.requires_grad, y.is_inference()) == (False, True, False)
    with sg.inference_mode(mode=True):
        assert (sg.is_inference_mode_enabled(), sg.is_grad_enabled()) == (True, False)
    with sg.inference_mode():
        with sg.inference_mode(mode=False):  # grad back on inside (torch: (False, True))
            inner = (sg.is_inference_mode_enabled(), sg.is_grad_enabled())
        assert sg.is_inference_mode_enabled()
    assert inner == (False, True)


def test_requires_grad_on_inference_tensor_outside_inference_mode():
    with sg.inference_mode():
        t = sg.ones(2)
        t.requires_grad_()  # allowed inside (torch: requires_grad True)
        t.requires_grad_(False)
    with pytest.raises(RuntimeError, match="^Setting requires_grad=True on inference tensor "
                                           "outside InferenceMode is not allowed.$"):
        t.requires_grad_()
    assert not t.requires_grad
    t.requires_grad_(False)  # turning it off is no error


def test_hook_removing_itself_runs_once():
    # observed in torch 2.14: ([1], tensor([9., 9.])) and ([1], tensor([22., 22.]))
    x = sg.ones(2, requires_grad=True)
    log = []

    def hook(g):
        log.append(1)
        h.remove()
        return g * 2

    h = x.register_hook(hook)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert log == [1]
    np.testing.assert_array_equal(x.grad.numpy(), [9.0, 9.0])
    x2, log2 = sg.ones(2, requires_grad=True), []
    y = x2 * 2

    def nonleaf(g):
        log2.append(1)
        h2.remove()
        return g * 10

    h2 = y.register_hook(nonleaf)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert log2 == [1]
    np.testing.assert_array_equal(x2.grad.numpy(), [22.0, 22.0])


def test_raising_hooks_leave_grad_untouched_and_graph_usable():
    x = sg.ones(2, requires_grad=True)
    (x * 3).sum().backward()

    def fails(g):
        raise ValueError("hook fails")

    x.register_hook(fails)
    with pytest.raises(ValueError, match="^hook fails$"):
        (x * 5).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])  # observed in torch 2.14
    # a raising post-accumulate hook runs after .grad is set: observed tensor([5., 5.])
    z = sg.ones(2, requires_grad=True)
    z.register_post_accumulate_grad_hook(lambda t: (_ for _ in ()).throw(ValueError("post")))
    with pytest.raises(ValueError, match="^post$"):
        (z * 5).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [5.0, 5.0])
    # a non-leaf hook failing: neither retained grad nor leaf grad set; observed (None, None)
    w = sg.ones(2, requires_grad=True)
    y = w * w
    y.retain_grad()
    state = {"fail": True}

    def maybe(g):
        if state["fail"]:
            raise ValueError("x")
        return g

    y.register_hook(maybe)
    with pytest.raises(ValueError):
        y.sum().backward()
    assert y.grad is None and w.grad is None
    state["fail"] = False
    y.sum().backward()  # the graph was not freed by the failed pass: observed tensor([2., 2.])
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])


def test_hook_contexts_exited_twice():
    # observed in torch 2.14: exiting a saved_tensors_hooks / disable_saved_tensors_hooks
    # context twice is a no-op when nothing else is active ('ok')
    h = graph.saved_tensors_hooks(lambda t: t, lambda t: t)
    h.__enter__()
    h.__exit__(None, None, None)
    h.__exit__(None, None, None)
    d = graph.disable_saved_tensors_hooks("m")
    d.__enter__()
    d.__exit__(None, None, None)
    d.__exit__(None, None, None)
    with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        pass
    # with an outer context active, torch 2.14 fails an internal assert; srcgrad refuses
    # and leaves the outer pair active
    log = []
    outer = graph.saved_tensors_hooks(lambda t: (log.append("outer"), t)[1], lambda t: t)
    inner = graph.saved_tensors_hooks(lambda t: t, lambda t: t)
    with outer:
        inner.__enter__()
        inner.__exit__(None, None, None)
        with pytest.raises(RuntimeError, match="^saved_tensors_hooks: exiting a context that is "
                                               "not the innermost active one"):
            inner.__exit__(None, None, None)
        x = sg.ones(2, requires_grad=True)
        _ = x * x
    assert log and set(log) == {"outer"}


def test_hook_context_exited_during_backward():
    # observed in torch 2.14: tensor([2., 2.])
    x = sg.ones(2, requires_grad=True)
    h = graph.saved_tensors_hooks(lambda t: t, lambda t: t)
    h.__enter__()
    y = x * x

    def hook(g):
        h.__exit__(None, None, None)
        return g

    y.register_hook(hook)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    assert not sg.autograd.graph.current_hooks()


def test_allow_mutation_on_saved_tensors_double_backward():
    # observed in torch 2.14: g = tensor([2., 4.]) with a grad_fn, x.grad = tensor([2., 2.])
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    with graph.allow_mutation_on_saved_tensors():
        y = x.clone()
        z = y * y
        y.mul_(10)
        (g,) = sg.autograd.grad(z.sum(), x, create_graph=True)
        g.sum().backward()
    np.testing.assert_array_equal(g.detach().numpy(), [2.0, 4.0])
    assert g.grad_fn is not None
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_views_of_inference_tensors_are_no_views():
    """torch 2.14.1: inference tensors track no views, so `a[:2]` of one (made inside the
    mode or out of it) is an inference tensor with `_is_view()` False and `_base` None;
    srcgrad made it a view of `a`. An in-place write through it still reaches `a`."""
    with sg.inference_mode():
        a = sg.ones(3)
        v = a[:2]
        v.add_(1)
    assert v.is_inference() and not v._is_view() and v._base is None
    assert a[:1].is_inference() and not a[:1]._is_view()
    assert a.tolist() == [2.0, 2.0, 1.0]
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                           "InferenceMode is not allowed"):
        v.add_(1)


@pytest.mark.parametrize("mode", ["inference_mode", "no_grad"])
@pytest.mark.parametrize("view", ["c[:2]", "c.view(3)", "c.reshape(3)", "c.unsqueeze(0)"])
def test_a_view_made_without_grad_of_a_tensor_that_requires_grad_requires_grad(mode, view):
    """torch 2.14.1: under no_grad or inference mode, a view of a leaf that requires grad
    requires grad itself, as a leaf (grad_fn None, not an inference tensor); a backward
    from it fills its own .grad, not the base's. srcgrad's view did not require grad."""
    c = sg.ones(3, requires_grad=True)
    with getattr(sg, mode)():
        d = eval(view)
        e = c * 2
    assert (d.requires_grad, d.grad_fn, d.is_leaf, d.is_inference()) == (True, None, True, False)
    assert d._is_view() and d._base is c and not e.requires_grad
    d.sum().backward()
    assert c.grad is None and (d * 2).requires_grad
