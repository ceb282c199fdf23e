"""Regressions found by the eager fuzzer (tests/eager_fuzz, benchmarks/fuzz_eager.py).

Each test pins the mechanism behind one failure class, not the generated program.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg


def test_numpy_scalar_keeps_its_dtype():
    """Eager fuzz seed 381 (0-d leaf from `rng.standard_normal(())`, a np.float64): the
    leaf was float32, so its `.grad` was float32 and off from central differences by
    ~1e-7 relative. torch.tensor(np.float64(x)) is float64, of np.float32(x) float32."""
    x = sg.tensor(np.float64(0.7109746152), requires_grad=True)
    assert x.dtype == np.float64
    assert sg.tensor(np.float32(1.5)).dtype == np.float32
    assert sg.tensor(np.int32(3)).dtype == np.int32
    assert sg.tensor(1.5).dtype == np.float32  # a Python float: torch's default dtype
    c = sg.tensor(np.array([0.1, 0.2, 0.3]))
    (c * x).sum().backward()
    assert x.grad.dtype == np.float64
    assert abs(x.grad.item() - 0.6) < 1e-15


def test_view_of_a_0d_base_regenerated_after_a_write():
    """Eager fuzz seed 428: `v5 = v2.expand(3)` of a 0-d non-leaf `v2`, then `v2.copy_(...)`:
    backward raised ValueError (could not broadcast (3,) into ()) in scatter_index. Cause:
    the view's regenerated grad_fn indexed the 0-d base with `()`, a 0-d result for a (3,)
    view. Fix: a view of a 0-d base is regenerated as a broadcast of the base."""
    x = sg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    v2 = (x * 2).sum()
    v5 = v2.expand(3)
    u = v2.unsqueeze(0).unsqueeze(1)  # (1, 1)
    v2.copy_(x.sum() * 3)  # every view now reads 3 * sum(x)
    np.testing.assert_allclose(v5.detach().numpy(), [9.0, 9.0, 9.0])
    (v5 * sg.tensor(np.array([1.0, 2.0, 3.0]))).sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [18.0, 18.0])  # (1 + 2 + 3) * 3
    x.grad = None
    (u * u).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [54.0, 54.0])  # 2 * 9 * 3
    # second order through the regenerated node
    y = (x * x).sum()
    w = y.expand(2)
    y.mul_(2.0)
    (g,) = sg.autograd.grad((w * w).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 2 * 2 * 2 * 10.0 * 2 * np.array([1.0, 2.0]))
    (h,) = sg.autograd.grad(g.sum(), x)
    assert h.shape == (2,)


def test_split_into_one_piece_and_unbind_of_a_size_1_dim():
    """Eager fuzz seeds 100368 and 101531: `v.unbind(0)` of a (1, 4) tensor raised
    ValueError/AxisError from squeeze, and `y.split(5)` of 3 rows returned the Tensor
    itself, so `y.split(5)[0]` was its first row. Cause: a split with no bounds is one
    piece, which the op path returns as a bare Tensor, not a 1-tuple. Fix: _split_at
    always returns a tuple; the one piece is still a multi-output view (torch)."""
    x = sg.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    y = x * 2
    parts = y.split(5)
    assert isinstance(parts, tuple) and len(parts) == 1 and parts[0].shape == (3, 4)
    assert len(y.chunk(1)) == 1
    (a,) = (x * 1)[:1].unbind(0)
    assert a.shape == (4,)
    (b,) = (x * 1)[:, :1].unbind(1)
    assert b.shape == (3,)
    (parts[0].sum() + (a * a).sum() + b.sum()).backward()
    expected = np.full((3, 4), 2.0)
    expected[0] += 2 * np.arange(4.0)
    expected[:, 0] += 1.0
    np.testing.assert_allclose(x.grad.numpy(), expected)
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        parts[0].mul_(2.0)


def _version_error(fn):
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        fn()


def test_division_saves_its_inputs_not_its_result():
    """Eager fuzz seed 100012 (KNOWN_DEVIATIONS 'output 0 of Div'): `q = a / b` then
    `q.add_(...)` raised a version error at backward. torch's DivBackward0 saves self
    (for other's gradient) and other, never the result: writing q is fine, writing a
    (when b requires grad) or b is not. Cause: the divide row's d/dy read `ans`."""
    x = sg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = sg.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    q = (x * 1.0) / (y * 1.0)
    q.add_(1.0)
    q.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 / y.detach().numpy())
    np.testing.assert_allclose(y.grad.numpy(), -x.detach().numpy() / y.detach().numpy() ** 2)
    a = x * 1.0
    q = a / y
    a.mul_(2.0)  # a is saved for y's gradient
    _version_error(lambda: q.sum().backward())
    a = x * 1.0
    q = a / 3.0  # only `other` (a number) is saved
    a.mul_(2.0)
    q.sum().backward()


def test_max_min_along_a_dim_save_the_indices():
    """Eager fuzz seeds 100063, 100268 (KNOWN_DEVIATIONS 'output 0 of Max/Min'): writing
    x or the values after `x.max(dim)` raised a version error. torch's MaxBackward0 saves
    the indices (and x's sizes) and puts the gradient at the index alone, the first
    extremum: a tie is not shared."""
    x = sg.tensor(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]]), requires_grad=True)
    y = x * 1.0
    v, i = y.max(1)
    m = y.min(dim=0, keepdim=True).values
    assert v.grad_fn.name() == "MaxBackward0" and m.grad_fn.name() == "MinBackward0"
    y.add_(1.0)
    v.add_(1.0)
    m.mul_(2.0)
    (v.sum() + m.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2.0, 1.0, 0.0], [1.0, 2.0, 2.0]])
    np.testing.assert_array_equal(i.numpy(), [1, 0])


def test_relu_saves_its_result():
    """KNOWN_DEVIATIONS 'no error where torch raises (version)': relu was
    where(x > 0, x, 0), a node saving no tensor. torch's ReluBackward0 saves the result:
    writing it raises, writing the input does not."""
    x = sg.tensor(np.array([-1.0, 0.0, 2.0]), requires_grad=True)
    a = x * 1.0
    r = a.relu()
    a.add_(1.0)
    (r * r).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0, 4.0])  # relu'(0) = 0
    r = (x * 1.0).relu()
    r.add_(1.0)
    _version_error(lambda: r.sum().backward())


def test_zero_and_fill_give_the_old_value_a_zero_gradient():
    """Eager fuzz seed 101509: `v = t.amax(1)`, `v.zero_()`, backward through v raised
    nothing where torch raises. torch's ZeroBackward0/FillBackward0 return zeros_like(grad)
    for self, a defined gradient: the node before runs (unpacking its saved tensors) and a
    leaf gets a .grad of zeros. srcgrad's fill_ was full_like, whose gradient for the old
    value is None, so the engine never ran the node before."""
    x = sg.tensor(np.ones((2, 3)), requires_grad=True)
    y = x * 2.0
    y.zero_()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))
    v = (x * 2.0).exp()
    v.fill_(0.25)
    _version_error(lambda: v.sum().backward())
    c = sg.tensor(np.array(0.5), requires_grad=True)
    w = x * 2.0
    w.fill_(c)
    w.sum().backward()
    assert c.grad.item() == 6.0


def test_amax_and_amin_nodes_are_named_as_torchs():
    """torch's x.amax() / x.amax(dim) is AmaxBackward0 (amin: AminBackward0); srcgrad named
    them MaxBackward0 / MinBackward0, the name of neither torch node. The tie rule is
    amax's: the gradient is shared evenly among the maxima (x.max() too, MaxBackward1)."""
    x = sg.tensor(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]), requires_grad=True)
    assert x.amax().grad_fn.name() == "AmaxBackward0"
    assert x.amax(1).grad_fn.name() == "AmaxBackward0"
    assert x.amin(0).grad_fn.name() == "AminBackward0"
    assert x.max().grad_fn.name() == "MaxBackward1"
    x.amax(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]])


def test_number_divided_by_a_tensor_goes_through_reciprocal():
    """torch's `c / t` is `t.reciprocal() * c` (Tensor.__rdiv__): MulBackward0 over
    ReciprocalBackward0, which saves its result, not t, so writing t in place afterwards
    leaves the backward valid. srcgrad's DivBackward0 saved t and raised a version error."""
    x = sg.tensor(np.array([1.0, 2.0, 4.0]), requires_grad=True)
    y = x * 1.0
    z = 2.0 / y
    assert z.grad_fn.name() == "MulBackward0"
    assert z.grad_fn.next_functions[0][0].name() == "ReciprocalBackward0"
    y.add_(1.0)  # torch: no error, the reciprocal's result was saved
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), -2.0 / np.array([1.0, 2.0, 4.0]) ** 2)
    np.testing.assert_allclose(z.detach().numpy(), [2.0, 1.0, 0.5])
    i = sg.tensor(np.array([1, 2]))
    np.testing.assert_allclose((2.0 / i).numpy(), [2.0, 1.0])  # integer t: still a division
