"""cross_entropy's and nll_loss's common case (class-index targets, reduction='mean', no
weight) as torch records it: NllLossBackward0 after LogSoftmaxBackward0, two nodes (the
torch_nll_loss row, rules/torch_rows.py), not a composition of gather/mul/sum/div rows.
Values and gradients are checked against arithmetic (central differences of a NumPy
cross entropy, first and second order) and against values observed in torch 2.14."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import numeric_grad

F = sg.nn.functional
_X = [[0.1, -0.5, 1.2], [0.3, 0.8, -1.0], [2.0, 0.0, 0.5]]


def _np_ce(v, t, ignore=-100):
    v = np.asarray(v, dtype=np.float64).reshape(-1, np.shape(v)[-1])
    t = np.asarray(t).reshape(-1)
    logp = v - v.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    keep = t != ignore
    return -logp[np.arange(len(t))[keep], t[keep]].mean()


def _grad_ce(v, t):
    """The analytic gradient of the mean cross entropy (softmax - one_hot) / kept."""
    v = np.asarray(v, dtype=np.float64)
    e = np.exp(v - v.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    keep = t != -100
    oh = np.zeros_like(p)
    oh[np.arange(len(t))[keep], t[keep]] = 1
    return (p - oh) * keep[:, None] / keep.sum()


def test_cross_entropy_is_two_nodes_with_torchs_value_and_gradient():
    x = sg.tensor(_X, dtype=sg.float64, requires_grad=True)
    loss = F.cross_entropy(x, sg.tensor([2, -100, 0]))
    assert loss.grad_fn.name() == "NllLossBackward0"
    inner = loss.grad_fn.next_functions[0][0]
    assert inner.name() == "LogSoftmaxBackward0"
    assert inner.next_functions[0][0].name() == "torch::autograd::AccumulateGrad"
    assert loss.item() == pytest.approx(0.3610685809618439, rel=1e-14)  # observed in torch 2.14
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [  # observed in torch 2.14
        [0.10981824145290377, 0.060269528764736936, -0.17008777021764077], [0.0, 0.0, 0.0],
        [-0.1319376378437031, 0.04981182403115915, 0.0821258138125439]], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("target", [[2, 0, 1], [2, -100, 0], [1, 1, -100]])
def test_first_and_second_order_match_central_differences(target):
    rng = np.random.default_rng(3)
    a, w = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    t = np.array(target)
    x = sg.tensor(a, requires_grad=True)
    loss = F.cross_entropy(x, sg.tensor(t))
    assert loss.item() == pytest.approx(_np_ce(a, t), rel=1e-12)
    (g,) = sg.autograd.grad(loss, x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), numeric_grad(lambda v: _np_ce(v, t), [a], 0),
                               rtol=1e-6, atol=1e-9)
    (h,) = sg.autograd.grad((g * sg.tensor(w)).sum(), x)
    want = numeric_grad(lambda v: np.sum(_grad_ce(v, t) * w), [a], 0)
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-6, atol=1e-8)


def test_the_rows_backward_is_differentiated_in_its_cotangent():
    # nll_loss is linear in its input: the second derivative lives in the cotangent,
    # d/ds of the gradient of s**2 * nll(x) is 2 s * (-keep / count) at the picked places
    x = sg.tensor(_X, dtype=sg.float64, requires_grad=True)
    s = sg.tensor(1.5, dtype=sg.float64, requires_grad=True)
    (g,) = sg.autograd.grad(s * s * F.nll_loss(x, sg.tensor([2, -100, 0])), x, create_graph=True)
    want = np.zeros((3, 3))
    want[0, 2] = want[2, 0] = -1.5 * 1.5 / 2
    np.testing.assert_allclose(g.detach().numpy(), want, rtol=1e-14)
    (gs,) = sg.autograd.grad(g[0, 2], s)
    assert gs.item() == pytest.approx(-2 * 1.5 / 2, rel=1e-14)


def test_gradcheck_and_gradgradcheck_of_the_row():
    t = sg.tensor([1, -100, 2, 0])
    x = sg.tensor(np.random.default_rng(4).normal(size=(4, 3)), requires_grad=True)
    assert sg.autograd.gradcheck(lambda v: F.cross_entropy(v, t), (x,))
    assert sg.autograd.gradgradcheck(lambda v: F.cross_entropy(v, t), (x,))


def test_one_dimensional_input_and_a_zero_d_target():
    x = sg.tensor(_X[0], dtype=sg.float64, requires_grad=True)
    loss = F.cross_entropy(x, sg.tensor(1))
    assert loss.shape == () and loss.grad_fn.name() == "NllLossBackward0"
    assert loss.item() == pytest.approx(2.1157814496945413, rel=1e-14)  # observed in torch 2.14
    assert F.nll_loss(sg.tensor([0.1, 0.2, 0.3]), sg.tensor(1)).item() == pytest.approx(-0.2)


def test_every_target_ignored_is_nan_with_a_zero_gradient():
    # observed in torch 2.14: loss nan, x.grad all zeros (not nan)
    x = sg.tensor(_X, dtype=sg.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        loss = F.cross_entropy(x, sg.tensor([-100, -100, -100]))
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 3)))


def test_float32_stays_float32():
    x = sg.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    loss = F.cross_entropy(x, sg.tensor([0, 1]))
    assert loss.dtype == sg.float32
    loss.backward()
    assert x.grad.dtype == sg.float32


@pytest.mark.parametrize("bad", [5, -1])
def test_a_target_out_of_range_is_torchs_index_error(bad):
    # observed in torch 2.14: IndexError 'Target 5 is out of bounds.' (also for -1, which
    # numpy's take_along_axis would read silently as the last class)
    x = sg.zeros(2, 3, requires_grad=True)
    with pytest.raises(IndexError, match=f"^Target {bad} is out of bounds.$"):
        F.cross_entropy(x, sg.tensor([0, bad]))


def test_a_masked_logit_off_the_target_is_no_nan():
    # a -inf logit gives a -inf log-probability; the row must not multiply it by 0
    inf = float("inf")
    x = sg.tensor([[0.5, -inf, 1.0], [0.2, 0.1, -inf]], dtype=sg.float64, requires_grad=True)
    loss = F.cross_entropy(x, sg.tensor([0, 1]))
    assert loss.item() == pytest.approx(0.8592368221268387, rel=1e-14)  # observed in torch 2.14
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [  # observed in torch 2.14
        [-0.3112296656009273, 0.0, 0.3112296656009273],
        [0.26248959373947, -0.26248959373947, 0.0]], rtol=1e-12, atol=0)


W = sg.tensor([1.0, 2.0, 0.5], dtype=sg.float64)
# (keywords, torch's loss, torch's x.grad of sum(loss * [1, 2, 3])), observed in torch 2.14.1
WEIGHTED = [
    (dict(reduction="sum"),
     1.294149817569127,
     [[0.219636482905808, 0.120539057529474, -0.340175540435282],
      [0.342318853650335, -0.435611624625008, 0.093292770974674],
      [-0.263875275687406, 0.099623648062318, 0.164251627625088]]),
    (dict(weight=W),
     0.473791928104942,
     [[0.031376640415115, 0.017219865361353, -0.048596505776469],
      [0.195610773514477, -0.248920928357148, 0.053310154842671],
      [-0.075392935910687, 0.028463899446377, 0.046929036464311]]),
    (dict(weight=W, reduction="sum"),
     1.658271748367296,
     [[0.109818241452904, 0.060269528764737, -0.170087770217641],
      [0.68463770730067, -0.871223249250017, 0.186585541949347],
      [-0.263875275687406, 0.099623648062318, 0.164251627625088]]),
    (dict(weight=W, reduction="none"),
     [0.207890724847271, 1.144025311290879, 0.306355712229147],
     [[0.109818241452904, 0.060269528764737, -0.170087770217641],
      [1.36927541460134, -1.742446498500034, 0.373171083898694],
      [-0.791625827062219, 0.298870944186955, 0.492754882875263]]),
    (dict(reduction="none", ignore_index=1),
     [0.415781449694541, 0.0, 0.306355712229147],
     [[0.219636482905808, 0.120539057529474, -0.340175540435282],
      [0.0, 0.0, 0.0],
      [-0.791625827062219, 0.298870944186955, 0.492754882875263]]),
    (dict(weight=W, ignore_index=2),
     0.483460341173342,
     [[0.0, 0.0, 0.0],
      [0.228212569100223, -0.290407749750006, 0.062195180649782],
      [-0.087958425229135, 0.033207882687439, 0.054750542541696]]),
]


@pytest.mark.parametrize("kw, loss, grad", WEIGHTED, ids=[str(i) for i in range(len(WEIGHTED))])
def test_weights_and_reductions_are_one_node_with_torchs_values(kw, loss, grad):
    """torch 2.14.1 records one NllLossBackward0 (after LogSoftmaxBackward0) for class
    weights and reduction 'sum'/'none' too; srcgrad's composition was seven nodes
    (DivBackward0, SumBackward0, MulBackward0 x2, SqueezeBackward0, GatherBackward0)."""
    x = sg.tensor(_X, dtype=sg.float64, requires_grad=True)
    out = F.cross_entropy(x, sg.tensor([2, 1, 0]), **kw)
    fn = out.grad_fn
    assert fn.name() == "NllLossBackward0"
    assert fn.next_functions[0][0].name() == "LogSoftmaxBackward0"
    np.testing.assert_allclose(out.detach().numpy(), loss, rtol=1e-12, atol=1e-15)
    scale = sg.arange(1, out.numel() + 1, dtype=sg.float64).reshape(out.shape)
    (out * scale).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-12, atol=1e-15)
