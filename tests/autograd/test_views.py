"""Views of sg.Tensor and in-place ops on them (torch's CopySlices), spec §3 and §6.

Gradients are checked against central differences in float64: each case is a function
of plain arrays that builds Tensors, writes into views in place and returns a scalar;
its gradient from `backward()` must match the differences of the same function run on
Tensors that do not require grad (no graph recorded, only the written values).
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import check, exact, leaf

RNG = np.random.default_rng(13)


def numeric_grads(f, arrays, eps=1e-6):
    """Central differences of f(*Tensors) -> scalar Tensor, per argument."""
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[k][i] += eps
            minus[k][i] -= eps
            hi = f(*[sg.tensor(x) for x in plus]).item()
            lo = f(*[sg.tensor(x) for x in minus]).item()
            g[i] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


def check_gradients(f, *shapes):
    arrays = [RNG.uniform(0.5, 1.5, s) for s in shapes]
    xs = [leaf(a) for a in arrays]
    f(*xs).backward()
    for x, expected in zip(xs, numeric_grads(f, arrays)):
        np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


def weights(shape):
    return sg.tensor(np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape) / 7.0)


# ---------------------------------------------------------------- what is a view
@pytest.mark.parametrize("make", [
    lambda t: t[1:], lambda t: t[1], lambda t: t.T, lambda t: t.transpose(0, 1),
    lambda t: t.view(12), lambda t: t.reshape(4, 3), lambda t: t.select(1, 2),
    lambda t: t.narrow(0, 1, 2), lambda t: t.unsqueeze(0), lambda t: t.unsqueeze(0).squeeze(0),
    lambda t: t.expand(2, 3, 4), lambda t: t.permute(1, 0), lambda t: t.diagonal(),
    lambda t: t[1:][0], lambda t: t.flatten(), lambda t: t[0, 1],
], ids=["slice", "int", "T", "transpose", "view", "reshape", "select", "narrow", "unsqueeze",
        "squeeze", "expand", "permute", "diagonal", "view_of_view", "flatten", "scalar"])
def test_views_share_storage_and_version_with_the_root_base(make):
    t = sg.tensor(np.arange(12.0).reshape(3, 4))
    v = make(t)
    assert v._is_view() and v._base is t
    assert v._version == t._version == 0
    t.add_(1)
    assert v._version == 1
    assert np.shares_memory(v.numpy(), t.numpy())


def test_a_reshape_that_copies_is_not_a_view():
    t = sg.tensor(np.arange(6.0).reshape(2, 3))
    r = t.T.reshape(6)  # not contiguous: NumPy copies, as torch's reshape does
    assert not r._is_view() and r._base is None
    r.add_(1)
    assert t._version == 0
    check(t, np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("make", [lambda t: t.flip(0), lambda t: np.fliplr(t),
                                  lambda t: np.atleast_2d(t)])
def test_ops_that_copy_in_torch_copy(make):  # NumPy returns views for these; torch does not
    t = sg.tensor(np.arange(4.0).reshape(2, 2))
    c = make(t)
    assert not c._is_view()
    c.add_(1)
    assert t._version == 0
    check(t, np.arange(4.0).reshape(2, 2))


def test_detach_shares_the_counter_but_is_not_a_view():
    x = leaf([1.0, 2.0])
    d = x[:1].detach()
    assert not d._is_view() and d._base is None and not d.requires_grad
    d.add_(1)  # not a view of a leaf: allowed (torch: a non-differentiable view)
    assert x._version == 1
    check(x, [2.0, 2.0])


def test_a_write_through_a_view_changes_the_base():
    t = sg.zeros(2, 3, dtype=np.float64)
    t[1].fill_(2.0)
    t[:, 0].add_(1.0)
    t.T[2, 0] = 5.0
    check(t, [[1.0, 0.0, 5.0], [3.0, 2.0, 2.0]])
    assert t._version == 3


def test_an_element_of_a_vector_is_a_0d_view():
    t = sg.zeros(3, dtype=np.float64)
    e = t[1]
    assert e.shape == () and e._is_view()
    e.add_(1.0)
    check(t, [0.0, 1.0, 0.0])


# ---------------------------------------------------------------- CopySlices
def test_case_4_copyslices_name_and_gradient():  # spec §6 (c) 4, test_inplace_on_view_backprop_base
    root = leaf([[1.0, 2.0], [3.0, 4.0]])
    x = root.clone()
    v = x.narrow(0, 0, 1)
    v.mul_(2)
    assert x.grad_fn.name() == "torch::autograd::CopySlices"
    assert type(x.grad_fn).__name__ == "CopySlices"
    assert v.grad_fn.name() == "AsStridedBackward0"
    assert v.grad_fn.next_functions[0][0] is x.grad_fn
    assert x.grad_fn.next_functions[0][0].name() == "CloneBackward0"
    x.sum().backward()
    check(root.grad, [[2.0, 2.0], [1.0, 1.0]])


def test_mul_by_a_tensor_into_a_slice():
    def f(x, y):
        b = x * 1.0
        b[1:3].mul_(y)
        return (b * b * weights((5,))).sum()

    check_gradients(f, (5,), (2,))


def test_exp_into_a_strided_slice():
    def f(x):
        b = x.clone()
        b[::2].exp_()
        return (b * weights((6,))).sum()

    check_gradients(f, (6,))


def test_sin_into_a_row_of_a_transpose():  # a view of a view
    def f(x):
        b = x.reshape(3, 4) * 1.0
        b.T[1].sin_()
        return (b ** 2 * weights((3, 4))).sum()

    check_gradients(f, (12,))


def test_copy_into_a_column():
    def f(x, y):
        b = x * 2.0
        b[:, 1].copy_(y)
        return (b.exp() * weights((3, 3))).sum()

    check_gradients(f, (3, 3), (3,))


def test_setitem_basic_and_advanced():
    def f(x, y):
        b = x * 1.0
        b[0] = y[0] * 3.0  # basic: a view written by copy_ (CopySlices)
        b[1:, ::2] = y[1:].reshape(2, 1) * x[1:, ::2]  # (* b[...] would save a view of b)
        b[[2, 0]] = b[[0, 2]] * y[1]  # an index array: index_put_
        return (b * b * weights((3, 3))).sum()

    check_gradients(f, (3, 3), (3,))
    x = leaf(np.ones((2, 2)))
    b = x * 1.0
    b[0] = 2.0
    assert b.grad_fn.name() == "torch::autograd::CopySlices"
    b[[1]] = 3.0
    assert b.grad_fn.name() == "IndexPutBackward0"


def test_scale_the_diagonal():
    def f(x, y):
        b = x.reshape(3, 3) * 1.0
        b.diagonal().mul_(y)
        return (b.sin() * weights((3, 3))).sum()

    check_gradients(f, (9,), (3,))


def test_a_0d_view_and_a_view_through_unsqueeze():
    def f(x, y):
        b = x * 1.0
        b[1].mul_(3.0)
        b.unsqueeze(0)[0, 2].add_(y[0] * y[0])
        return (b * b * weights((4,))).sum()

    check_gradients(f, (4,), (1,))


def test_a_base_that_did_not_require_grad():
    def f(y):
        b = sg.zeros(4, dtype=np.float64)
        b[1:3].copy_(y * y)
        return (b.exp() * weights((4,))).sum()

    check_gradients(f, (2,))
    y = leaf([1.0, 2.0])
    b = sg.zeros(4, dtype=np.float64)
    v = b[1:3]
    b[:2].copy_(y)
    assert b.requires_grad and b.grad_fn.name() == "torch::autograd::CopySlices"
    assert v.requires_grad and v.grad_fn.name() == "AsStridedBackward0"  # regenerated


def test_several_inplace_ops_on_one_view():
    def f(x, y):
        b = x * 1.0
        v = b[1:3]
        v.mul_(y)
        v.sin_()  # saves its input (the value before): a later write is fine
        v.add_(b[0])
        return (b * weights((4,))).sum() + (v ** 2).sum()

    check_gradients(f, (4,), (2,))


def test_the_same_view_as_both_operands():
    def f(x):
        b = x * 1.0
        v = b[1:]
        v.mul_(v)
        return (b * weights((3,))).sum()

    check_gradients(f, (3,))


def test_inplace_into_the_base_regenerates_its_views():
    def f(x, y):
        b = x * 1.0
        v = b[1:]
        u = b.T if b.ndim == 2 else b[::2]
        b.mul_(y)  # v and u now read b's new history
        return (v * weights((3,))).sum() + (u ** 2).sum()

    check_gradients(f, (4,), (4,))
    x = leaf([1.0, 2.0, 3.0])
    b = x * 1.0
    v = b[1:]
    assert v.grad_fn.name() == "SliceBackward0"
    b.mul_(2.0)
    assert v.grad_fn.name() == "AsStridedBackward0"
    assert v.grad_fn.next_functions[0][0] is b.grad_fn


def test_inplace_into_one_view_regenerates_the_others():
    def f(x, y):
        b = x * 1.0
        v = b[1:]
        u = v[:2]
        w = b[:2]
        u.add_(y)
        return (b * weights((4,))).sum() + (v ** 2).sum() + (w ** 3).sum()

    check_gradients(f, (4,), (2,))


def test_indexed_inplace_methods():
    index = np.array([[0, 1, 2, 0], [2, 0, 0, 1]])

    def f(x, y):
        b = x * 1.0
        b.scatter_add_(0, index, y)
        b[1:].index_add_(1, [3, 0, 3], y[:, :3] * 2.0)  # into a view: CopySlices
        b.masked_fill_(np.eye(3, 4, dtype=bool), 0.5)
        b.T.index_fill_(0, [2], 0.25)
        b[:2].scatter_(1, np.array([[1], [2]]), y[:, 3:] ** 2)
        b.addcmul_(b, x, value=0.5)
        b.lerp_(x.exp(), 0.25)
        return (b * b * weights((3, 4))).sum()

    check_gradients(f, (3, 4), (2, 4))
    t = sg.zeros(3, 4, dtype=np.float64)
    t.scatter_add_(0, index, sg.tensor(np.arange(1.0, 9.0).reshape(2, 4)))
    check(t, [[1, 6, 7, 4], [0, 2, 0, 8], [5, 0, 3, 0]])  # torch's scatter_add_ semantics


def test_second_order_through_copyslices():
    def first(x):  # d/dx of sum(w * b) with b[1:3] = x[1:3] ** 3 written in place
        b = x * 1.0
        b[1:3].mul_(x[1:3] * x[1:3])
        (g,) = sg.autograd.grad((b * weights((4,))).sum(), x, create_graph=True)
        return g

    x0 = RNG.uniform(0.5, 1.5, 4)
    x = leaf(x0)
    g = first(x)
    w = weights((4,)).numpy()
    check(g, [w[0], 3 * w[1] * x0[1] ** 2, 3 * w[2] * x0[2] ** 2, w[3]])
    (g * g).sum().backward()
    expected = np.array([0.0, 2 * (3 * w[1] * x0[1] ** 2) * 6 * w[1] * x0[1],
                         2 * (3 * w[2] * x0[2] ** 2) * 6 * w[2] * x0[2], 0.0])
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-10)


def test_retained_grad_of_the_base_is_the_current_versions():
    x = leaf([1.0, 2.0, 3.0])
    b = x * 2.0
    b.retain_grad()
    b[1:].mul_(3.0)
    (b * sg.tensor([1.0, 2.0, 3.0], dtype=np.float64)).sum().backward()
    check(b.grad, [1.0, 2.0, 3.0])
    check(x.grad, [2.0, 12.0, 18.0])


def test_second_backward_through_copyslices_needs_retain_graph():
    x = leaf([1.0, 2.0])
    b = x * 1.0
    b[:1].mul_(x[1:])  # MulBackward0 saves both operands
    out = b.sum()
    out.backward(retain_graph=True)
    out.backward()
    check(x.grad, [2 * 2.0, 2 * (1.0 + 1.0)])
    b = x * 1.0
    b[:1].mul_(x[1:])
    out = b.sum()
    out.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_an_indirectly_modified_no_grad_view_refuses_its_grad_fn():
    b = leaf([1.0, 2.0, 3.0]) * 1.0
    with sg.no_grad():
        w = b[:2]
    b.mul_(2.0)
    with pytest.raises(RuntimeError, match=exact(
            "A view was created in no_grad mode and its base or another view of its base has "
            "been modified inplace with grad mode enabled. Given that this use case is ambiguous "
            "and error-prone, it is forbidden. You can clarify your code by moving both the view "
            "and the inplace either both inside the no_grad block (if you don't want the inplace "
            "to be tracked) or both outside (if you want the inplace to be tracked).")):
        _ = w.grad_fn


def test_inplace_under_no_grad_on_a_view_keeps_the_history():
    x = leaf([1.0, 2.0, 3.0])
    b = x * 2.0
    with sg.no_grad():
        b[1:].mul_(10.0)  # invisible to autograd: b's grad_fn stays
    assert b.grad_fn.name() == "MulBackward0"
    check(b, [2.0, 40.0, 60.0])
    b.sum().backward()
    check(x.grad, [2.0, 2.0, 2.0])


def test_split_chunk_unbind_are_views():
    t = sg.tensor(np.arange(6.0))
    a, b = t.split(3)
    c, d, e = t.chunk(3)
    f = t.reshape(2, 3).unbind(1)
    assert all(p._base is t for p in (a, b, c, d, e) + f)
    check(b, [3.0, 4.0, 5.0])
    check(f[2], [2.0, 5.0])
    x = leaf(np.arange(6.0))
    parts = x.split([1, 2, 3])
    assert parts[2].grad_fn.name() == "SplitWithSizesBackward0"
    sum((p * (k + 1)).sum() for k, p in enumerate(parts)).backward()
    check(x.grad, [1.0, 2.0, 2.0, 3.0, 3.0, 3.0])
