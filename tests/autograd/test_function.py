"""Custom Functions applied eagerly to plain arrays (outside compiled code) and to
sg.Tensor (srcgrad.autograd.custom), and the saved-tensor-hook context managers
(spec/torch_semantics.md §5 and §7). The spec's rows and cases for Functions on
tensors are in test_spec_05_function.py; eager against compiled in
test_function_parity.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import Function, FunctionCtx
from srcgrad.autograd.function import run_forward
from srcgrad.autograd.graph import (
    current_hooks,
    disable_saved_tensors_hooks,
    save_on_cpu,
    saved_tensors_hooks,
)
from tests.corpus import functions as F


def test_public_names():
    assert sg.autograd.Function is Function
    assert sg.autograd.function.once_differentiable is F.once_differentiable
    assert sg.autograd.graph.saved_tensors_hooks is saved_tensors_hooks


def test_apply_runs_forward_and_returns_its_output():
    a, b = np.array([1.0, 2.0]), np.array([2.0, 3.0])
    np.testing.assert_allclose(F.Func.apply(a, b, 4), a * b + b * 4 + a * 4 * b)
    np.testing.assert_allclose(F.Exp.apply(a), np.exp(a))


def test_ctx_records_saved_values_and_attributes():
    a, b = np.array([1.0, 2.0]), np.array([2.0, 3.0])
    out, ctx = run_forward(F.Func, (a, b, 4), {})
    x, y, w, o = ctx.saved_tensors
    assert x is a and y is b and o is out
    np.testing.assert_allclose(w, a * 4)
    assert ctx.z == 4
    assert ctx.needs_input_grad == (False, False, False)  # plain arrays need no gradient


def test_saved_tensors_inside_forward_is_empty():
    seen = []

    class Peek(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            seen.append(ctx.saved_tensors)
            return x

    Peek.apply(np.ones(2))
    assert seen == [()]


def test_two_outputs_and_mark_non_differentiable():
    x = np.array([3.0, 1.0, 2.0])
    ordered, idx = F.Sort.apply(x)
    np.testing.assert_allclose(ordered, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(idx, [1, 2, 0])
    _, ctx = run_forward(F.Sort, (x,), {})
    assert len(ctx.non_differentiable) == 1 and ctx.non_differentiable[0] is ctx.saved_tensors[1]


def test_set_materialize_grads_and_save_for_forward():
    _, ctx = run_forward(F.MaterializeOff, (np.ones(2),), {})
    assert ctx.materialize_grads is False
    _, ctx = run_forward(F.MulXYZ, (np.ones(2), np.ones(2), 4.0), {})
    assert len(ctx.saved_for_forward) == 2 and ctx.z == 4.0


def test_keyword_arguments_bind_to_forward():
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(F.MulConst.apply(x, k=3.0), [3.0, 6.0])


def test_setup_context_style_with_default_arguments():
    x = np.array([3.0])
    np.testing.assert_allclose(F.PowSetup.apply(x), [9.0])
    np.testing.assert_allclose(F.PowSetup.apply(x, 3), [27.0])
    out, ctx = run_forward(F.PowSetup, (x,), {})
    assert ctx.k == 2 and ctx.saved_tensors[0] is x


def test_save_for_backward_only_takes_arrays():
    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 "
                                        "is of type int"):
        F.SaveInt.apply(np.ones(2))
    ctx = FunctionCtx()
    ctx.save_for_backward(None, np.ones(1))  # None is allowed
    with pytest.raises(AssertionError, match="save_for_forward expects all arguments to be tensors"):
        ctx.save_for_forward(np.ones(1), 3)


def test_mark_dirty_returns_the_input_itself():
    x = np.array([1.0, 2.0])
    out = F.Dirty.apply(x)
    assert out is x
    np.testing.assert_allclose(x, [2.0, 4.0])


def test_mark_dirty_of_a_tensor_not_returned_raises():
    with pytest.raises(RuntimeError, match="Some elements marked as dirty during the forward method "
                                           "were not returned as output"):
        F.DirtyNotReturned.apply(np.ones(2))


def test_mark_dirty_of_a_non_input_warns():
    class NotInput(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 3
            y += 1
            ctx.mark_dirty(y)
            return y

    with pytest.warns(UserWarning, match=r"ctx.mark_dirty\(\) received a tensor that was not an input"):
        NotInput.apply(np.ones(2))


def test_forward_not_implemented():
    with pytest.raises(NotImplementedError, match="You must implement the forward function"):
        F.Function.apply(np.ones(1))


def test_instantiation_warns_and_legacy_call_raises():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = F.Exp()
    assert any(issubclass(w.category, DeprecationWarning) and "should not be instantiated" in str(w.message)
               for w in caught)
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward"):
        fn(np.ones(1))


def test_forward_without_ctx_and_no_setup_context():
    class NoCtx(Function):
        @staticmethod
        def forward(x):
            return x

    with pytest.raises(TypeError):
        NoCtx.apply(np.ones(1))


# ---------------------------------------------------------------- saved-tensor hook contexts

def _pack(x):
    return x


def test_hooks_nest_innermost_wins():
    assert current_hooks() is None
    with saved_tensors_hooks(_pack, _pack) as outer:
        inner_pair = (lambda x: x, lambda x: x)
        with saved_tensors_hooks(*inner_pair):
            assert current_hooks() == inner_pair
        assert current_hooks() == (outer.pack_hook, outer.unpack_hook)
    assert current_hooks() is None


def test_disable_saved_tensors_hooks_either_order():
    with disable_saved_tensors_hooks("my error message"):
        with pytest.raises(RuntimeError, match="^my error message$"):
            with saved_tensors_hooks(_pack, _pack):
                pass
        with disable_saved_tensors_hooks("inner"):
            with pytest.raises(RuntimeError, match="^inner$"):
                with save_on_cpu():
                    pass
    with saved_tensors_hooks(_pack, _pack):
        with pytest.raises(RuntimeError, match="^my error message$"):
            with disable_saved_tensors_hooks("my error message"):
                pass
    assert current_hooks() is None


def test_save_on_cpu_is_the_identity_for_numpy():
    x = np.arange(3.0)
    with save_on_cpu() as hooks:
        pack, unpack = current_hooks()
        assert unpack(pack(x)) is x
    assert hooks.pin_memory is False


# ---------------------------------------------------------------- on sg.Tensor (srcgrad.autograd.custom)
def _leaf(values):
    return sg.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def test_hooks_bound_at_save_time_and_applied_to_what_save_for_backward_saved():
    log = []
    x = _leaf([1.0, 2.0])
    with saved_tensors_hooks(lambda t: log.append("pack") or ("p", t),
                             lambda p: log.append("unpack") or p[1]):
        y = F.Sq.apply(x)
    assert log == ["pack"]
    with saved_tensors_hooks(lambda t: 1 / 0, lambda p: 1 / 0):  # active now: not used
        y.sum().backward()
    assert log == ["pack", "unpack"]
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_hook_errors():
    x = _leaf([1.0, 2.0])
    with saved_tensors_hooks(lambda t: t, lambda p: 3):
        y = F.Sq.apply(x)
    with pytest.raises(TypeError, match="^Output of saved tensor unpack_hook expected to be a "
                                        "Tensor but got result of type int$"):
        y.sum().backward()

    def mutating(t):
        t.add_(1)
        return t

    with pytest.raises(RuntimeError, match="^A saved tensor pack hook is modifying its input in "
                                           "place"):
        with saved_tensors_hooks(mutating, lambda p: p):
            F.Sq.apply(x * 1)

    def failing(t):
        raise KeyError("pack failed")

    with pytest.raises(KeyError, match="pack failed"):
        with saved_tensors_hooks(failing, lambda p: p):
            F.Sq.apply(x)


def test_raw_saved_tensor_register_hooks():
    x = _leaf([1.0, 2.0])
    y = F.Sq.apply(x)
    raw = y.grad_fn._raw_saved_tensors[0]
    assert raw.data is x and raw.unpack_hook is None
    raw.register_hooks(lambda t: ("kept", t * 2), lambda p: p[1])
    assert raw.data[0] == "kept" and raw.unpack_hook is not None
    with pytest.raises(RuntimeError, match="whose hooks have already been set"):
        raw.register_hooks(lambda t: t, lambda p: p)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])  # the backward read 2x
    with pytest.raises(RuntimeError, match="after it has been freed"):
        raw.register_hooks(lambda t: t, lambda p: p)


def test_saved_non_leaf_input_detached_in_place():
    x = _leaf([1.0, 2.0]) * 1
    y = F.Sq.apply(x)
    x.detach_()
    with pytest.raises(RuntimeError, match=r"^Trying to use a saved tensor that has been detached "
                                           r"in-place, i.e. with .detach_\(\).This is not supported"):
        y.sum().backward()


def test_retain_graph_and_node_and_tensor_hooks():
    x = _leaf([1.0, 2.0])
    y = F.Cube.apply(x)
    seen = []
    y.register_hook(lambda g: seen.append(("tensor", g.numpy().tolist())))
    y.grad_fn.register_prehook(lambda gs: seen.append(("pre", len(gs))))
    y.grad_fn.register_hook(lambda gi, go: seen.append(("post", len(gi), len(go))))
    y.retain_grad()
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert seen == [("tensor", [1.0, 1.0]), ("pre", 1), ("post", 1, 1)] * 2
    np.testing.assert_allclose(x.grad.numpy(), 2 * 3 * np.array([1.0, 4.0]))
    np.testing.assert_allclose(y.grad.numpy(), [2.0, 2.0])


def test_float32_gradients_and_inference_mode():
    x = sg.tensor([1.0, 2.0], requires_grad=True)  # float32
    F.Exp.apply(x).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    with sg.inference_mode():
        y = F.Exp.apply(x)
    assert y.grad_fn is None and not y.requires_grad


def test_gradcheck_of_a_function_applied_to_tensors():
    x = sg.tensor(np.array([0.3, -0.7, 1.1]), requires_grad=True)
    y = sg.tensor(np.array([1.5, 0.2, -0.4]), requires_grad=True)
    assert sg.autograd.gradcheck(lambda a, b: F.FuncTwice.apply(a, b, 4), (x, y))
    assert sg.autograd.gradcheck(F.Sq.apply, (x,))
    assert sg.autograd.gradgradcheck(F.Sq.apply, (x,))


def test_a_function_inside_a_create_graph_backward():
    """A custom Function applied while a create_graph backward runs is recorded too."""

    class Twice(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return F.Sq.apply(g)  # differentiable: g ** 2 recorded on g

    x = _leaf([1.0, 3.0])
    (g,) = sg.autograd.grad(Twice.apply(x).sum(), x, sg.tensor(1.0, dtype=np.float64,
                                                               requires_grad=True),
                            create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [1.0, 1.0])
    assert g.grad_fn is not None


def test_allow_mutation_on_saved_tensors_covers_save_for_backward():
    """torch's allow_mutation_on_saved_tensors saves through hooks, so a custom Function's
    saved input may be written afterwards: the backward reads the value as it was saved."""
    from srcgrad.autograd import graph

    with graph.allow_mutation_on_saved_tensors():
        a = _leaf([1.0, 2.0])
        b = a.clone()
        y = F.Sq.apply(b)
        b.sin_()
        y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 4.0])
    b = _leaf([1.0, 2.0]).clone()
    y = F.Sq.apply(b)
    b.sin_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
