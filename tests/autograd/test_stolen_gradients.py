"""A leaf's first `.grad` is the backward's own array where nothing else holds it, as
torch's AccumulateGrad steals it (Note [Stealing a gradient] in srcgrad.autograd.engine),
and a copy wherever another holder could see a write into it. Observed in torch 2.14.1:
in each case below the `.grad`s share no memory with one another, with a retained grad or
with the gradient the caller passed, and a later backward accumulates into `.grad` in
place, changing nothing else."""

from __future__ import annotations

import numpy as np

import srcgrad as sg
from srcgrad.autograd import accumulate


def _shares(a, b) -> bool:
    return np.shares_memory(a.detach().numpy(), b.detach().numpy())


def test_one_array_for_two_leaves_is_copied_for_each():
    """AddBackward0 of equal shapes hands the same array to both operands."""
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    b = sg.tensor([3.0, 4.0], requires_grad=True)
    (x + b).sum().backward()
    assert not _shares(x.grad, b.grad)
    x.grad += 1.0
    assert b.grad.tolist() == [1.0, 1.0]


def test_the_callers_gradient_is_not_the_leafs_grad():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    g = sg.tensor([0.5, 0.25])
    (x + 0.0).backward(g)
    assert not _shares(x.grad, g)
    x.grad *= 2.0
    assert g.tolist() == [0.5, 0.25]


def test_a_retained_grad_is_not_the_leafs_grad():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    y = x + 0.0
    y.retain_grad()
    (y * 3.0).sum().backward()
    assert not _shares(x.grad, y.grad)
    x.grad.zero_()
    assert y.grad.tolist() == [3.0, 3.0]


def test_a_stolen_gradient_takes_the_next_backwards_sum_in_place(monkeypatch):
    copies = []
    monkeypatch.setattr(accumulate, "layout_copy", lambda p, g: copies.append(1) or g.copy())
    w = sg.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    x = sg.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    ((x @ w) ** 2).mean().backward()
    first = w.grad
    expected = (x.numpy().T @ (2 * (x.numpy() @ np.ones((3, 2), np.float32)) / 8)).astype(np.float32)
    np.testing.assert_allclose(first.numpy(), expected, rtol=1e-6)
    ((x @ w) ** 2).mean().backward()
    assert w.grad is first
    np.testing.assert_allclose(w.grad.numpy(), 2 * expected, rtol=1e-6)
    assert w.grad.dtype == sg.float32
    if sg.autograd.engine._STEALS:  # (CPython 3.11-3.13)
        assert not copies  # the matmul's gradient became .grad as it was
