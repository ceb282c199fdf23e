"""spec/torch_semantics.md §7: saved-tensor hooks on eager tensors — every "(b) Errors"
row and "(c) Test cases" entry, plus the section's probes (`_saved_*`, `_raw_saved_*`)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import (
    SECOND_TIME,
    check,
    const,
    exact,
    leaf,
    val,
)

graph = sg.autograd.graph
saved_tensors_hooks = graph.saved_tensors_hooks


class Counter:
    """Identity pack/unpack hooks that count their calls."""

    def __init__(self):
        self.packed, self.unpacked = 0, 0

    def pack(self, t):
        self.packed += 1
        return t

    def unpack(self, t):
        self.unpacked += 1
        return t


# ---------------------------------------------------------------- (b) errors

def test_pack_hook_modifies_its_input_in_place():
    def pack(t):
        t.add_(1)
        return t

    a = leaf([1.0, 2.0])
    b = a * 1
    with pytest.raises(RuntimeError, match=exact(
            "A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
            "pack hook cannot be modified by in-place operations as this can lead to unexpected "
            "side-effects. Please open an issue if you need to perform in-place operations on the "
            "input to a pack hook.")):
        with saved_tensors_hooks(pack, lambda t: t):
            b * b


def test_unpack_returns_a_non_tensor():
    a = leaf([1.0, 2.0])
    with saved_tensors_hooks(lambda t: t, lambda p: 1):
        y = a * a
    with pytest.raises(TypeError, match=exact(
            "Output of saved tensor unpack_hook expected to be a Tensor but got result of type int")):
        y.sum().backward()


def test_exception_in_pack_hook_keeps_its_type():
    def pack(t):
        raise KeyError("pack failed")

    a = leaf([1.0, 2.0])
    with pytest.raises(KeyError, match="pack failed"):
        with saved_tensors_hooks(pack, lambda p: p):
            a * a


def test_exception_in_unpack_hook_keeps_its_type():
    def unpack(p):
        raise KeyError("unpack failed")

    a = leaf([1.0, 2.0])
    with saved_tensors_hooks(lambda t: t, unpack):
        y = a * a
    with pytest.raises(KeyError, match="unpack failed"):
        y.sum().backward()


def test_hooks_entered_under_disable_either_order():
    # test_disabling_saved_tensor_hooks, test_disabling_saved_tensor_hooks_nested
    with graph.disable_saved_tensors_hooks("my error message"):
        with pytest.raises(RuntimeError, match=exact("my error message")):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        with pytest.raises(RuntimeError, match=exact("my error message")):
            with graph.disable_saved_tensors_hooks("my error message"):
                pass
    with graph.disable_saved_tensors_hooks("outer"):
        with graph.disable_saved_tensors_hooks("inner"):
            with pytest.raises(RuntimeError, match=exact("inner")):
                with saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
        with pytest.raises(RuntimeError, match=exact("outer")):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass


def test_nested_allow_mutation_on_saved_tensors():
    with graph.allow_mutation_on_saved_tensors():
        with pytest.raises(RuntimeError, match=exact(
                "allow_mutation_on_saved_tensors contexts cannot be nested")):
            with graph.allow_mutation_on_saved_tensors():
                pass


def test_backward_outside_the_allow_mutation_context():  # test_backward_out_of_context
    with graph.allow_mutation_on_saved_tensors():
        a = leaf([1.0, 2.0])
        out = (a ** 2).sum()
    with pytest.raises(AssertionError, match=exact(
            "Trying to backward outside of the 'allow_mutation_on_saved_tensors' contextin which the "
            "graph was originally recorded.")):
        out.backward()


def test_register_hooks_twice():
    a = leaf([1.0, 2.0])
    y = a * a
    raw = y.grad_fn._raw_saved_self
    raw.register_hooks(lambda t: t, lambda t: t)
    with pytest.raises(RuntimeError, match=exact(
            "Calling register_hooks on a saved tensor whose hooks have already been set. Hint: only "
            "one pair of hooks is allowed at a time.")):
        raw.register_hooks(lambda t: t, lambda t: t)


def test_register_hooks_after_free():
    a = leaf([1.0, 2.0])
    y = a * a
    raw = y.grad_fn._raw_saved_self
    y.sum().backward()
    with pytest.raises(RuntimeError, match=exact(
            "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate "
            "values of the graph are freed when you call .backward() or autograd.grad(). Specify "
            "retain_graph=True if you need to backward through the graph a second time or if you "
            "need to access saved variables after calling backward.")):
        raw.register_hooks(lambda t: t, lambda t: t)


def test_saved_attribute_after_free():
    a = leaf([1.0, 2.0])
    y = a * a
    y.sum().backward()
    with pytest.raises(RuntimeError, match=exact(SECOND_TIME)):
        _ = y.grad_fn._saved_self


def test_saved_input_detached_in_place():  # test_saved_variable_saved_original_inplace_detach
    a = leaf([1.0, 2.0])
    b = a * 1
    c = b * b  # saves the input b
    b.detach_()
    with pytest.raises(RuntimeError, match=exact(
            "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This "
            "is not supported, please use out-of-place `.detach()` instead")):
        c.sum().backward()


def test_saved_output_detached_in_place_is_fine():
    a = leaf([1.0, 2.0])
    e = a.exp()  # saves its output
    out = e * 1
    e.detach_()
    out.sum().backward()
    check(a.grad, np.exp([1.0, 2.0]))


# ---------------------------------------------------------------- (c) test cases

def test_case_1_pack_unpack_counts():  # probe 7.pack_unpack_counts
    c = Counter()
    x = leaf([1.0, 2.0])
    y = sg.ones(2)
    with saved_tensors_hooks(c.pack, c.unpack):
        z = (x * y).sum()
    assert (c.packed, c.unpacked) == (1, 0)  # only y is saved: x's gradient needs y
    z.backward()
    assert (c.packed, c.unpacked) == (1, 1)
    check(x.grad, [1.0, 1.0])


def test_case_2_scaling_hooks_and_any_packed_object():
    a = leaf([1.0, 2.0, 3.0])
    with saved_tensors_hooks(lambda t: 2 * t, lambda t: t):
        y = a * a
    y.sum().backward()
    check(a.grad, 4 * np.array([1.0, 2.0, 3.0]))

    x = leaf([1.0, 2.0])
    with saved_tensors_hooks(lambda t: ("stored", t * 2), lambda p: p[1]):
        y = x * x
    y.sum().backward()
    check(x.grad, [4.0, 8.0])


def test_case_3_only_the_innermost_pair_applies():
    # test_setting_default_saved_variable_hooks_twice_should_use_inner
    a, b = leaf([1.0, 1.0]), leaf([1.0, 1.0])
    with saved_tensors_hooks(lambda t: 3 * t, lambda t: 3 * t):
        with saved_tensors_hooks(lambda t: 5 * t, lambda t: 5 * t):
            y = a * a
        z = b * b
    y.sum().backward()
    z.sum().backward()
    check(a.grad, [50.0, 50.0])
    check(b.grad, [18.0, 18.0])


def test_case_4_every_read_of_a_saved_attribute_unpacks():
    c = Counter()
    a = leaf([1.0, 2.0])
    with saved_tensors_hooks(c.pack, c.unpack):
        y = a.exp()
    first, second = y.grad_fn._saved_result, y.grad_fn._saved_result
    check(first, np.exp([1.0, 2.0]))
    check(second, np.exp([1.0, 2.0]))
    y.sum().backward()
    assert (c.packed, c.unpacked) == (1, 3)
    check(a.grad, np.exp([1.0, 2.0]))


def test_case_5_disable():
    with graph.disable_saved_tensors_hooks("my error message"):
        with pytest.raises(RuntimeError, match=exact("my error message")):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass


def test_case_6_allow_mutation():  # TestAllowMutationOnSaved.test_basic
    a0 = np.random.default_rng(0).random((2, 3))
    with graph.allow_mutation_on_saved_tensors():
        a = leaf(a0)
        b = a.clone()
        out = (b ** 2).sum()
        b.sin_()
        out.backward()
    check(a.grad, 2 * a0)
    a = leaf(a0)
    b = a.clone()
    out = (b ** 2).sum()
    b.sin_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


# ---------------------------------------------------------------- (a) probes

def test_hooks_are_bound_at_save_time():
    # probe 7.hooks_active_during_backward_do_not_affect_already_saved
    c = Counter()
    a = leaf([1.0, 2.0])
    y = a * a
    with saved_tensors_hooks(c.pack, c.unpack):
        y.sum().backward()
    assert (c.packed, c.unpacked) == (0, 0)
    check(a.grad, [2.0, 4.0])


def test_hooks_apply_to_values_saved_by_a_create_graph_backward():
    # test_default_saved_tensors_hooks_double_backward
    c = Counter()
    a = leaf([1.0, 2.0])
    y = (a ** 3).sum()
    with saved_tensors_hooks(c.pack, c.unpack):
        (g,) = sg.autograd.grad(y, a, create_graph=True)
    assert c.packed >= 1
    check(g, 3 * np.array([1.0, 4.0]))
    (gg,) = sg.autograd.grad(g.sum(), a)
    check(gg, 6 * np.array([1.0, 2.0]))
    assert c.unpacked >= 1


def test_wrapped_numbers_are_not_hooked():  # test_wrapped_number_saved_tensors_hooks
    c = Counter()
    a = leaf([1.0, 2.0])
    with saved_tensors_hooks(c.pack, c.unpack):
        y = a * 2.0
    y.sum().backward()
    assert c.packed == 0
    check(a.grad, [2.0, 2.0])


def test_saved_attributes_of_mul_and_exp():
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    y = a * b
    assert y.grad_fn._saved_self is a and y.grad_fn._saved_other is b
    sq = a * a
    assert sq.grad_fn._saved_self is a
    e = a.exp()
    r = e.grad_fn._saved_result
    assert r is not e  # test_no_unnecessary_unwrapping
    np.testing.assert_allclose(val(r), np.exp([1.0, 2.0]))


def test_raw_saved_tensor_data_and_unpack_hook():  # probe 7.SavedTensor.data_and_unpack_hook
    a = leaf([1.0, 2.0])
    y = a * a
    raw = y.grad_fn._raw_saved_self
    assert raw.data is a  # a saved input, no hooks: the input itself
    assert raw.unpack_hook is None
    e = a.exp()
    raw_out = e.grad_fn._raw_saved_result
    assert raw_out.data is not e  # a saved output: a detached alias
    np.testing.assert_allclose(val(raw_out.data), val(e))

    def unpack(p):
        return p[0]

    z = a * a
    rz = z.grad_fn._raw_saved_self
    rz.register_hooks(lambda t: (t,), unpack)
    assert rz.data == (a,) or (isinstance(rz.data, tuple) and rz.data[0] is a)
    assert rz.unpack_hook is unpack
    z.sum().backward()
    check(a.grad, [2.0, 4.0])


def test_raw_saved_register_hooks_on_none():
    class SavesNone(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(None, x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = leaf([1.0, 2.0])
    y = SavesNone.apply(a)
    with pytest.raises(RuntimeError, match=exact(
            "Calling register_hooks on a saved tensor with value None is forbidden")):
        y.grad_fn._raw_saved_tensors[0].register_hooks(lambda t: t, lambda t: t)


def test_save_on_cpu():  # probe 7.save_on_cpu
    a, b, c = leaf([1.0, 2.0]), leaf([3.0, 4.0]), leaf([5.0, 6.0])
    prod_1 = a * b
    with graph.save_on_cpu():
        prod_2 = prod_1 * c
    y = prod_2 * a
    y.sum().backward()
    check(a.grad, 2 * np.array([1.0, 2.0]) * [3.0, 4.0] * [5.0, 6.0])
    check(b.grad, np.array([1.0, 4.0]) * [5.0, 6.0])
    check(c.grad, np.array([1.0, 4.0]) * [3.0, 4.0])


def test_disabled_hooks_report_disabled():
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        assert graph.current_hooks() is not None
    with graph.disable_saved_tensors_hooks("off"):
        assert graph.current_hooks() is None


def test_no_hooks_means_no_calls_and_right_grads():
    a = leaf([1.0, 2.0])
    y = (a * const([3.0, 4.0])).exp().sum()
    y.backward()
    check(a.grad, np.array([3.0, 4.0]) * np.exp(np.array([3.0, 8.0])))
