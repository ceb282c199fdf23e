"""spec/torch_semantics.md §4: hooks — every "(b) Errors" row and "(c) Test cases" entry,
plus the section's probes (order of execution, hooks under `grad`)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import check, const, exact, leaf

register_multi_grad_hook = sg.autograd.graph.register_multi_grad_hook


def acc_node(t):
    """The AccumulateGrad node of leaf `t` (shared by all uses while alive)."""
    return (t * 1).grad_fn.next_functions[0][0]


# ---------------------------------------------------------------- (b) errors

def test_hook_on_a_tensor_that_does_not_require_grad():
    message = exact("cannot register a hook on a tensor that doesn't require gradient")
    with pytest.raises(RuntimeError, match=message):
        const([1.0]).register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match=message):
        const([1.0]).register_post_accumulate_grad_hook(lambda t: None)


def test_hook_changes_the_size():
    x = leaf([1.0, 2.0])

    def bad(g):
        return sg.ones(3)

    y = x * 2
    y.register_hook(bad)
    with pytest.raises(RuntimeError, match=exact("hook 'bad' has changed the size of value")):
        y.sum().backward()


def test_hook_changes_the_dtype():
    x = leaf([1.0, 2.0], dtype=np.float32)

    def bad(g):
        return sg.ones(2, dtype=np.float64)

    y = x * 2
    y.register_hook(bad)
    # torch: "(was torch.FloatTensor got torch.DoubleTensor)"; srcgrad names its type after each
    with pytest.raises(RuntimeError, match=exact(
            "hook 'bad' has changed the type of value (was torch.FloatTensor (srcgrad: a float32 "
            "sg.Tensor) got torch.DoubleTensor (srcgrad: a float64 sg.Tensor))")):
        y.sum().backward()


def test_hook_returns_a_non_tensor():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.register_hook(lambda g: 1)
    with pytest.raises(TypeError, match=exact("expected Variable, but hook returned 'int'")):
        y.sum().backward()


def test_post_accumulate_hook_on_a_nonleaf():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match=exact(
            "post accumulate grad hooks cannot be registered on non-leaf tensors")):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_post_accumulate_hook_returns_a_value():
    x = leaf([1.0])
    x.register_post_accumulate_grad_hook(lambda t: t.grad)
    with pytest.raises(RuntimeError, match=exact("Tensor post accumulate grad hooks should return None.")):
        x.sum().backward()


def test_node_hook_returns_the_wrong_number_of_values():
    a = leaf([1.0, 2.0])
    b = a * 2
    b.grad_fn.register_prehook(lambda gO: (gO[0], gO[0]))
    with pytest.raises(RuntimeError, match=exact(
            "hook '<lambda>' has returned an incorrect number of values (got 2, but expected 1)")):
        b.sum().backward()


def test_node_post_hook_replaces_a_none_gradient():
    a = leaf([1.0, 2.0])
    b = a * 2
    b.grad_fn.register_hook(lambda gI, gO: (gI[0], sg.ones(2)))
    with pytest.raises(RuntimeError, match=exact("can't replace a None gradient with a non-None value")):
        b.sum().backward()


def test_multi_grad_hook_mode():
    a = leaf([1.0])
    with pytest.raises(ValueError, match=exact("Expects mode to be one of ('all', 'any') but got foo")):
        register_multi_grad_hook((a,), lambda gs: None, mode="foo")


def test_hook_exception_keeps_its_type():  # probe 4.hook_raises_propagates
    a = leaf([1.0])
    y = a * 2

    def hook(g):
        raise ValueError("from hook")

    y.register_hook(hook)
    with pytest.raises(ValueError, match="from hook"):
        y.sum().backward()


# ---------------------------------------------------------------- (c) test cases

def test_case_1_hook_replaces_the_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.register_hook(lambda g: g * 10)
    y.sum().backward()
    check(x.grad, [20.0, 20.0])


def test_case_2_hooks_added_and_removed():  # test_hooks
    x = sg.ones((5, 5), requires_grad=True)
    y = sg.ones((5, 5)) * 4
    y.requires_grad_(True)
    counter = [0]

    def bw_hook(inc, grad):
        assert isinstance(grad, sg.Tensor)
        counter[0] += inc

    z = x ** 2 + x * 2 + x * y + y
    x.register_hook(lambda *args: bw_hook(0, *args))
    test = z.register_hook(lambda *args: bw_hook(1, *args))
    z.backward(sg.ones((5, 5)), retain_graph=True)
    assert counter[0] == 1
    test2 = z.register_hook(lambda *args: bw_hook(2, *args))
    z.backward(sg.ones((5, 5)), retain_graph=True)
    assert counter[0] == 4
    test2.remove()
    z.backward(sg.ones((5, 5)), retain_graph=True)
    assert counter[0] == 5

    def bw_hook_modify(grad):
        return grad * 2

    test.remove()
    z.register_hook(bw_hook_modify)
    y.grad = None  # torch zeroes it in place; a fresh accumulation is the same here
    z.backward(sg.ones((5, 5)), retain_graph=True)
    check(y.grad, np.full((5, 5), 4.0))  # (x + 1) * 2
    y.register_hook(bw_hook_modify)
    y.grad = None
    z.backward(sg.ones((5, 5)))
    check(y.grad, np.full((5, 5), 8.0))  # (x + 1) * 4


def test_case_3_multi_grad_hook_doc_example():  # probe 4.register_multi_grad_hook_doc_example
    a = sg.rand(2, 3, requires_grad=True)
    b = sg.rand(2, 3, requires_grad=True)
    c = a * b
    d = a * b
    calls = []

    def fn(grads):
        calls.append([g is not None for g in grads])

    handle = register_multi_grad_hook((a, b, c, d), fn)
    c.sum().backward(retain_graph=True)
    c.sum().backward(inputs=(a,), retain_graph=True)
    assert calls == [[True, True, True, False], [True, False, True, False]]
    handle.remove()
    c.sum().backward(retain_graph=True)
    assert len(calls) == 2


def _prehook_ordering_setup(log):
    def hook1(g):
        log.append(1)
        return g * 3

    def hook2(gs):
        log.append(2)
        return tuple(g * 2 for g in gs)

    a = sg.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.grad_fn.register_prehook(hook2)
    b.register_hook(hook1)
    b.grad_fn.register_prehook(hook2)
    acc = b.grad_fn.next_functions[0][0]
    a.register_hook(hook1)
    acc.register_prehook(hook2)
    a.register_hook(hook1)
    return a, b


def test_case_4_prehook_ordering():  # test_prehook_ordering, probe 4.prehook_ordering
    log = []
    a, b = _prehook_ordering_setup(log)
    b.sum().backward()
    assert log == [1, 2, 2, 1, 1, 2]
    check(a.grad, 216.0)

    log.clear()
    sg.autograd.grad(b.sum(), inputs=(a,), retain_graph=True)
    assert log == [1, 2, 2, 1, 1]  # AccumulateGrad pre-hooks do not run under grad

    log.clear()
    b.sum().backward(inputs=(b,))
    assert log == [1, 2, 2]
    assert b.grad.item() == 3.0  # retain_grad sees tensor hooks, not node pre-hooks


def test_case_4_post_accumulate_grad_hook_ordering():
    # test_post_accumulate_grad_hook_ordering, probe 4.hook_order_on_leaf. The result
    # ((1-2)/5 + 0.5) * 10 = 3 also relies on .grad being grad_out[0] of the AccumulateGrad
    # post-hook (torch "steals" the incoming buffer, spec Appendix B).
    tensor = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def pre_hook(grad):
        return grad - 2.0

    def acc_grad_node_pre_hook(grad_out):
        return (grad_out[0] / 5.0,)

    def post_acc_grad_hook(t):
        t.grad.add_(0.5)

    def acc_grad_node_post_hook(grad_in, grad_out):
        tensor.grad = grad_out[0] * 10

    acc_grad = tensor.view_as(tensor).grad_fn.next_functions[0][0]
    tensor.register_hook(pre_hook)
    acc_grad.register_prehook(acc_grad_node_pre_hook)
    tensor.register_post_accumulate_grad_hook(post_acc_grad_hook)
    acc_grad.register_hook(acc_grad_node_post_hook)
    tensor.sum().backward()
    check(tensor.grad, [3.0, 3.0, 3.0])


def test_order_of_execution_on_a_leaf():
    """The six steps of §4 "Order of execution", without in-place ops."""
    log = []
    x = leaf([1.0, 2.0])
    acc = acc_node(x)

    def tensor_hook(g):
        log.append(("tensor", list(g.detach().numpy())))
        return g - 2.0

    def node_prehook(gO):
        log.append(("prehook", list(gO[0].detach().numpy())))
        return (gO[0] / 5.0,)

    def post_accumulate(t):
        log.append(("post-accumulate", list(t.grad.detach().numpy())))

    def node_posthook(gI, gO):
        log.append(("posthook", len(gI), list(gO[0].detach().numpy())))

    acc.register_hook(node_posthook)  # registration order does not matter
    x.register_post_accumulate_grad_hook(post_accumulate)
    acc.register_prehook(node_prehook)
    x.register_hook(tensor_hook)
    x.sum().backward()
    assert log == [("tensor", [1.0, 1.0]), ("prehook", [-1.0, -1.0]),
                   ("post-accumulate", [-0.2, -0.2]), ("posthook", 0, [-0.2, -0.2])]
    check(x.grad, [-0.2, -0.2])


def test_case_5_post_accumulate_grad_hook_errors():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match=exact(
            "post accumulate grad hooks cannot be registered on non-leaf tensors")):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    x.register_post_accumulate_grad_hook(lambda t: t.grad)
    with pytest.raises(RuntimeError, match=exact("Tensor post accumulate grad hooks should return None.")):
        x.sum().backward()


# ---------------------------------------------------------------- (a) probes

def test_tensor_hook_called_once_with_summed_grad():  # probe 4.tensor_hook_called_once_with_summed_grad
    x = leaf([1.0, 1.0])
    y = x * 1
    seen = []
    y.register_hook(lambda g: seen.append(list(g.detach().numpy())))
    (y * 2 + y * 3).sum().backward()
    assert seen == [[5.0, 5.0]]


def test_tensor_hooks_chain_in_registration_order():  # probe 4.tensor_hooks_chain_in_registration_order
    x = leaf([1.0])
    seen = []

    def h1(g):
        seen.append(("h1", g.item()))
        return g + 1

    def h2(g):
        seen.append(("h2", g.item()))
        return g * 10

    x.register_hook(h1)
    x.register_hook(h2)
    x.sum().backward()
    assert seen == [("h1", 1.0), ("h2", 2.0)]
    check(x.grad, [20.0])


def test_leaf_hook_modifies_before_accumulate():  # probe 4.leaf_hook_modifies_before_accumulate
    x = leaf([1.0, 1.0])
    x.register_hook(lambda g: g * 100)
    (x * 2).sum().backward()
    check(x.grad, [200.0, 200.0])


def test_hook_returning_none_keeps_the_gradient_and_remove_is_idempotent():
    x = leaf([1.0, 2.0])
    calls = []
    h = x.register_hook(lambda g: calls.append(1))
    (x * 3).sum().backward()
    check(x.grad, [3.0, 3.0])
    h.remove()
    h.remove()
    (x * 3).sum().backward()
    assert calls == [1]


def test_leaf_hook_runs_for_grad_inputs():  # probe 4.leaf_hook_runs_for_grad_inputs
    x = leaf([1.0, 1.0])
    x.register_hook(lambda g: g * 10)
    (g,) = sg.autograd.grad((x * 2).sum(), x)
    check(g, [20.0, 20.0])
    assert x.grad is None


def test_post_accumulate_grad_hook():
    x = leaf([1.0])
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append((t is x, t.grad.item())))
    (x * 2).sum().backward()
    (x * 2).sum().backward()  # probe 4.post_accumulate_grad_hook_sees_accumulated_grad
    assert seen == [(True, 2.0), (True, 4.0)]
    sg.autograd.grad((x * 2).sum(), x)  # probe 4.post_accumulate_grad_hook_not_run_by_autograd_grad
    assert len(seen) == 2


def test_post_accumulate_grad_hook_doc_example_without_inplace():
    # the doc's hook is `p.add_(p.grad, alpha=-0.01)` (in-place: issue 13); the same step
    # done by rebinding the data under no_grad
    v = sg.tensor([0.0, 0.0, 0.0], requires_grad=True)
    updates = []
    v.register_post_accumulate_grad_hook(lambda p: updates.append(-0.01 * p.grad.detach().numpy()))
    v.backward(sg.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(updates[0], [-0.01, -0.02, -0.03])


def test_tensor_hooks_fire_in_reverse_topological_order():  # probe 4.tensor_hooks_fire_in_re...
    order = []
    x = leaf([1.0])
    y = x * 2
    z = y * 3
    for name, t in (("x", x), ("y", y), ("z", z)):
        t.register_hook(lambda g, name=name: order.append(name))
    z.sum().backward()
    assert order == ["z", "y", "x"]


def test_node_posthook_grad_inputs_match_next_functions():
    # probe 4.node_posthook_grad_inputs_len_matches_next_functions
    a = leaf([1.0, 2.0])
    b = a * 2
    seen = []
    b.grad_fn.register_hook(lambda gI, gO: seen.append((len(gI), gI[1] is None, len(gO))))
    assert len(b.grad_fn.next_functions) == 2
    b.sum().backward()
    assert seen == [(2, True, 1)]


def test_accumulate_grad_node_hook_arguments():  # probe 4.AccumulateGrad_node_hook_arguments
    x = leaf([1.0, 2.0])
    seen = []
    acc = acc_node(x)
    acc.register_hook(lambda gI, gO: seen.append((gI, len(gO), list(gO[0].detach().numpy()))))
    (x * 3).sum().backward()
    assert seen == [((), 1, [3.0, 3.0])]


def test_node_prehook_doc_examples():
    a = sg.tensor([0.0, 0.0, 0.0], requires_grad=True)
    b = a.clone()
    handle = b.grad_fn.register_prehook(lambda gI: (gI[0] * 2,))
    b.sum().backward(retain_graph=True)
    check(a.grad, [2.0, 2.0, 2.0])
    handle.remove()
    a.grad = None
    b.sum().backward(retain_graph=True)
    check(a.grad, [1.0, 1.0, 1.0])
    b.grad_fn.register_hook(lambda gI, gO: (gO[0] * 2,))
    a.grad = None
    b.sum().backward(retain_graph=True)
    check(a.grad, [2.0, 2.0, 2.0])


def test_multi_grad_hook_any():  # test_multi_grad_any_hooks
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    calls = []
    register_multi_grad_hook((a, b), lambda g: calls.append(list(g.detach().numpy())), mode="any")
    (a * 2 + b * 3).sum().backward()
    assert len(calls) == 1 and calls[0] in ([2.0, 2.0], [3.0, 3.0])


def test_multi_grad_hook_all_sees_unrelated_tensors_as_none():
    a, b = leaf([1.0]), leaf([2.0])
    calls = []
    register_multi_grad_hook((a, b), lambda gs: calls.append([None if g is None else g.item() for g in gs]))
    (a * 5).sum().backward()
    assert calls == [[5.0, None]]


def test_hooks_with_grad_vs_backward():  # test_hook_edge_case_when_called_with_grad
    counts = {"tensor": 0, "pre": 0, "post": 0}

    def setup():
        a = leaf([1.0])
        b = a * 2
        c = b * 2
        acc = b.grad_fn.next_functions[0][0]

        def tensor_hook(g):
            counts["tensor"] += 1

        def pre(gO):
            counts["pre"] += 1

        def post(gI, gO):
            counts["post"] += 1

        for t in (a, b):
            t.register_hook(tensor_hook)
        for node in (b.grad_fn, acc):
            node.register_prehook(pre)
            node.register_hook(post)
        return a, b, c

    a, b, c = setup()
    sg.autograd.grad(c.sum(), inputs=(b,))
    assert counts == {"tensor": 1, "pre": 0, "post": 0}
    counts.update(tensor=0, pre=0, post=0)
    a, b, c = setup()
    sg.autograd.grad(c.sum(), inputs=(a, b))
    assert counts == {"tensor": 2, "pre": 1, "post": 1}
    counts.update(tensor=0, pre=0, post=0)
    a, b, c = setup()
    c.sum().backward()
    assert counts == {"tensor": 2, "pre": 2, "post": 2}


def test_hooks_across_inplace():  # test_tensor_hooks_inplace, probe 4.hooks_across_inplace
    seen = []

    def fn1(g):
        seen.append(("fn1", g.item()))  # x2 from mul, x2 from fn2
        return g * 2

    def fn2(g):
        seen.append(("fn2", g.item()))
        return g * 2

    a = sg.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.register_hook(fn1)
    b.mul_(2)
    b.register_hook(fn2)
    b.sum().backward()
    assert seen == [("fn2", 1.0), ("fn1", 4.0)]
    check(a.grad, 8.0)
