"""The seed documents' examples (/work/shared/seeds/, torch 2.1's autograd docs) that use
only the part-1 runtime (tensors, backward, hooks, graph inspection, saved-tensor hooks,
layouts), run on `sg.Tensor` with torch's printed values. Custom Function, forward-mode,
functional-API, anomaly and profiler examples belong to issues 13 and 14."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import check, exact, needs_allow_mutation, val

graph = sg.autograd.graph


def test_factory_with_requires_grad():
    # "autograd_tensor = torch.randn((2, 3, 4), requires_grad=True)"
    t = sg.randn((2, 3, 4), requires_grad=True)
    assert t.shape == (2, 3, 4) and t.requires_grad and t.is_leaf and t.grad is None


def test_saved_result_of_exp():
    # "Autograd graph": a.exp() saves its result
    a = sg.tensor([0.0, 0.0, 0.0], requires_grad=True)
    b = a.exp()
    assert isinstance(b.grad_fn, graph.Node)
    names = dir(b.grad_fn)
    for name in ("_raw_saved_result", "_saved_result", "metadata", "name", "next_functions",
                 "register_hook", "register_prehook", "requires_grad"):
        assert name in names, name
    np.testing.assert_allclose(val(b.grad_fn._saved_result), val(b))  # torch.allclose: True


def test_saved_tensors_hooks_printing_example(capsys):
    def pack_hook(x):
        print("Packing", x)
        return x

    def unpack_hook(x):
        print("Unpacking", x)
        return x

    a = sg.ones(5, requires_grad=True)
    b = sg.ones(5, requires_grad=True) * 2
    with graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = a * b
    packed = capsys.readouterr().out.splitlines()
    y.sum().backward()
    unpacked = capsys.readouterr().out.splitlines()
    # the order one op packs its tensors in is unspecified (spec §7: torch 2.13 packs b first)
    assert sorted(packed) == sorted([
        "Packing tensor([1., 1., 1., 1., 1.], requires_grad=True)",
        "Packing tensor([2., 2., 2., 2., 2.], grad_fn=<MulBackward0>)"])
    assert sorted(unpacked) == sorted([
        "Unpacking tensor([1., 1., 1., 1., 1.], requires_grad=True)",
        "Unpacking tensor([2., 2., 2., 2., 2.], grad_fn=<MulBackward0>)"])
    check(a.grad, np.full(5, 2.0))


def test_save_on_cpu_example():
    rng = np.random.default_rng(0)
    a0, b0, c0 = rng.standard_normal((3, 5))
    a, b, c = (sg.tensor(v, requires_grad=True) for v in (a0, b0, c0))

    def f(a, b, c):
        prod_1 = a * b
        with graph.save_on_cpu():
            prod_2 = prod_1 * c
        y = prod_2 * a
        return y

    y = f(a, b, c)
    y.sum().backward()
    check(a.grad, 2 * a0 * b0 * c0)
    check(b.grad, a0 * a0 * c0)
    check(c.grad, a0 * b0 * a0)


def test_disable_saved_tensors_hooks_example():
    message = "saved tensors default hooks are disabled"
    with graph.disable_saved_tensors_hooks(message):
        with pytest.raises(RuntimeError, match=exact(message)):
            with graph.save_on_cpu():
                pass


def test_register_multi_grad_hook_example():
    a = sg.rand(2, 3, requires_grad=True)
    b = sg.rand(2, 3, requires_grad=True)
    c = a * b
    d = a * b
    printed = []

    def fn(grads):
        printed.append([g is not None for g in grads])

    graph.register_multi_grad_hook((a, b, c, d), fn)
    c.sum().backward(retain_graph=True)
    c.sum().backward(inputs=(a,), retain_graph=True)
    assert printed == [[True, True, True, False], [True, False, True, False]]


@needs_allow_mutation
def test_allow_mutation_on_saved_tensors_example(capsys):
    with graph.allow_mutation_on_saved_tensors():
        a = sg.ones((2, 3), requires_grad=True)
        b = a.clone()
        out = (b ** 2).sum()
        print(b.sin_())
        out.sum().backward()
    assert capsys.readouterr().out.strip() == (
        "tensor([[0.8415, 0.8415, 0.8415],\n        [0.8415, 0.8415, 0.8415]], "
        "grad_fn=<SinBackward0>)")
    check(a.grad, np.full((2, 3), 2.0))


def test_default_gradient_layouts():
    # 1. dense leaf: .grad has the leaf's strides; 3. accumulation keeps the object
    p = sg.rand(3, 4).T.requires_grad_()
    (p * 3).sum().backward()
    g = p.grad
    assert g.stride() == p.stride() == (1, 4)
    (p * 3).sum().backward()
    assert p.grad is g and g.stride() == (1, 4)
    check(g, np.full((4, 3), 6.0))
    # 4. create_graph=True replaces .grad with .grad + new grad
    with pytest.warns(UserWarning):
        (p * p).sum().backward(create_graph=True)
    assert p.grad is not g
    check(p.grad, 6.0 + 2 * val(p))


def test_resetting_grads_to_none_before_each_accumulation():
    # "for param in model.parameters(): param.grad = None; loss.backward()"
    w = sg.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        w.grad = None
        loss = (w * w).sum()
        loss.backward()
        check(w.grad, [2.0, 4.0])


def test_manual_gradient_layout_is_preserved():
    # "assign param.grad = a zeroed tensor with desired strides before the first backward()"
    p = sg.rand(2, 3, requires_grad=True)
    p.grad = sg.zeros(3, 2).T  # strides (1, 2): not the param's
    g = p.grad
    for _ in range(2):
        with pytest.warns(UserWarning, match="do not obey the gradient layout contract"):
            (p * 2).sum().backward()
    assert p.grad is g and g.stride() == (1, 2)
    check(g, np.full((2, 3), 4.0))
