"""The seed documents' examples (/work/shared/seeds/, torch 2.1's autograd docs) that use
only the part-1 runtime (tensors, backward, hooks, graph inspection, saved-tensor hooks,
layouts), run on `sg.Tensor` with torch's printed values. Custom Function, forward-mode,
functional-API, anomaly and profiler examples belong to issues 13 and 14."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import check, exact, val

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


# ---------------------------------------------------------------- custom Functions (issue 13)
# The seed documents' `Function` examples (torch.autograd.Function, FunctionCtx's methods,
# BackwardCFunction), run on sg.Tensor with torch's values. NumPy functions stand in for
# torch's where the example calls them on tensors (`i.exp()` works as written).
Function = sg.autograd.Function
once_differentiable = sg.autograd.function.once_differentiable


class SeedExp(Function):  # torch.autograd.Function's docstring
    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result


def test_function_exp_example():
    x0 = np.array([0.0, 0.5, -1.0])
    inp = sg.tensor(x0, requires_grad=True)
    output = SeedExp.apply(inp)
    assert output.grad_fn.name() == "SeedExpBackward"
    check(output, np.exp(x0))
    output.backward(sg.tensor([1.0, 2.0, 3.0], dtype=np.float64))
    check(inp.grad, np.exp(x0) * [1.0, 2.0, 3.0])


class SeedFunc(Function):  # save_for_backward's docstring
    @staticmethod
    def forward(ctx, x, y, z):
        w = x * z
        out = x * y + y * z + w * y
        ctx.save_for_backward(x, y, w, out)
        ctx.z = z  # z is not a tensor
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        x, y, w, out = ctx.saved_tensors
        z = ctx.z
        gx = grad_out * (y + y * z)
        gy = grad_out * (x + z + w)
        gz = None
        return gx, gy, gz


def test_save_for_backward_example():
    a = sg.tensor(1.0, requires_grad=True, dtype=np.float64)
    b = sg.tensor(2.0, requires_grad=True, dtype=np.float64)
    c = 4
    d = SeedFunc.apply(a, b, c)
    check(d, 18.0)  # 1*2 + 2*4 + 4*2
    d.backward()
    check(a.grad, 10.0)  # torch: a.grad = 10, b.grad = 9
    check(b.grad, 9.0)


def test_mark_dirty_example():
    """mark_dirty's docstring: `b` saved `a`; Inplace writes `a` through a NumPy alias (no
    version bump) and marks it dirty (one bump), so b.backward() raises the version error,
    naming `a`'s producer as it is now (torch reads a saved input's grad_fn at unpack).
    (`x.numpy()` on a tensor that requires grad raises, in torch too: the alias is taken
    from `x.detach()`.)"""

    class Inplace(Function):
        @staticmethod
        def forward(ctx, x):
            x_npy = x.detach().numpy()  # x_npy shares storage with x
            x_npy += 1
            ctx.mark_dirty(x)
            return x

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            return grad_output

    a = sg.tensor(1.0, requires_grad=True, dtype=np.float64).clone()
    b = a * a
    Inplace.apply(a)  # This would lead to wrong gradients!
    with pytest.raises(RuntimeError, match=r"^one of the variables needed for gradient "
                                           r"computation has been modified by an inplace "
                                           r"operation: \[torch.DoubleTensor \[\]\] \(srcgrad: a "
                                           r"float64 sg.Tensor of shape \(\)\), which is "
                                           r"output 0 of Inplace, is at version 1; expected "
                                           r"version 0 instead\. Hint: "):
        b.backward()


def test_mark_non_differentiable_sort_example():
    class Func(Function):
        @staticmethod
        def forward(ctx, x):
            sorted, idx = x.sort()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(x, idx)
            return sorted, idx

        @staticmethod
        @once_differentiable
        def backward(ctx, g1, g2):  # still need to accept g2
            x, idx = ctx.saved_tensors
            grad_input = sg.zeros_like(x)
            grad_input.index_add_(0, idx, g1)
            return grad_input

    x = sg.tensor([3.0, 1.0, 2.0], requires_grad=True, dtype=np.float64)
    ordered, idx = Func.apply(x)
    check(ordered, [1.0, 2.0, 3.0])
    assert idx.tolist() == [1, 2, 0] and not idx.requires_grad
    ordered.backward(sg.tensor([10.0, 20.0, 30.0], dtype=np.float64))
    check(x.grad, [30.0, 10.0, 20.0])


def test_set_materialize_grads_example():
    class SimpleFunc(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone(), x.clone()

        @staticmethod
        @once_differentiable
        def backward(ctx, g1, g2):
            return g1 + g2  # No check for None necessary

    # We modify SimpleFunc to handle non-materialized grad outputs
    class Func(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x.clone(), x.clone()

        @staticmethod
        @once_differentiable
        def backward(ctx, g1, g2):
            x, = ctx.saved_tensors
            grad_input = sg.zeros_like(x)
            if g1 is not None:  # We must check for None now
                grad_input += g1
            if g2 is not None:
                grad_input += g2
            return grad_input

    a = sg.tensor(1.0, requires_grad=True)
    b, _ = SimpleFunc.apply(a)  # g2 is materialized as zeros
    b.backward()
    check(a.grad, 1.0)
    a = sg.tensor(1.0, requires_grad=True)
    b, _ = Func.apply(a)  # induces g2 to be undefined
    b.backward()
    check(a.grad, 1.0)


def test_save_for_forward_example():
    """save_for_forward's docstring: the jvp under forward AD, the vjp alias in reverse mode."""

    class Func(Function):
        @staticmethod
        def forward(ctx, x, y, z):
            ctx.save_for_backward(x, y)
            ctx.save_for_forward(x, y)
            ctx.z = z
            return x * y * z

        @staticmethod
        def jvp(ctx, x_t, y_t, _):
            x, y = ctx.saved_tensors
            z = ctx.z
            return z * (y * x_t + x * y_t)

        @staticmethod
        def vjp(ctx, grad_out):
            x, y = ctx.saved_tensors
            z = ctx.z
            return z * grad_out * y, z * grad_out * x, None

    a = sg.tensor(1.0, requires_grad=True, dtype=np.float64)
    t = sg.tensor(1.0, dtype=np.float64)
    b = sg.tensor(2.0, requires_grad=True, dtype=np.float64)
    c = 4
    from srcgrad.autograd import forward_ad as fwAD  # noqa: N812 (torch's spelling)

    with fwAD.dual_level():
        a_dual = fwAD.make_dual(a, t)
        d = Func.apply(a_dual, b, c)
        primal, tangent = fwAD.unpack_dual(d)
    check(primal, 8.0)  # torch test_custom_function_save_for_forward: primal 8, tangent 8
    check(tangent, 8.0)
    d.backward()
    check(a.grad, 8.0)
    check(b.grad, 4.0)


def test_mymm_example():
    """torch's MyMM (the custom_fwd/custom_bwd example; autocast decorators left out):
    checked against central differences."""

    class MyMM(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a.mm(b)

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad.mm(b.t()), a.t().mm(grad)

    rng = np.random.default_rng(5)
    a0, b0, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal((3, 2))
    a, b = sg.tensor(a0, requires_grad=True), sg.tensor(b0, requires_grad=True)
    (MyMM.apply(a, b) * sg.tensor(w)).sum().backward()
    check(a.grad, w @ b0.T)
    check(b.grad, a0.T @ w)
    eps = 1e-6
    bump = np.zeros_like(a0)
    bump[1, 2] = eps
    numeric = (np.sum(((a0 + bump) @ b0) * w) - np.sum(((a0 - bump) @ b0) * w)) / (2 * eps)
    np.testing.assert_allclose(val(a.grad)[1, 2], numeric, rtol=1e-7)


def test_saved_tensors_hooks_apply_to_save_for_backward(capsys):
    """saved_tensors_hooks' docstring: the hooks run for what an operation saves,
    "this includes intermediary results saved using save_for_backward()"."""

    def pack_hook(x):
        print("Packing", x)
        return x

    def unpack_hook(x):
        print("Unpacking", x)
        return x

    a = sg.ones(5, requires_grad=True)
    with graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = SeedExp.apply(a * 0)
    assert capsys.readouterr().out.splitlines() == [
        "Packing tensor([1., 1., 1., 1., 1.], grad_fn=<SeedExpBackward>)"]
    y.sum().backward()
    assert capsys.readouterr().out.splitlines() == [
        "Unpacking tensor([1., 1., 1., 1., 1.], grad_fn=<SeedExpBackward>)"]
    check(a.grad, np.zeros(5))  # exp(a * 0) * 0
