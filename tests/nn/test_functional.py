"""sg.nn.functional: values and gradients as torch's (observed), gradchecked to second order."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

import srcgrad as sg
import srcgrad.nn.functional as F

# observed in torch 2.14.1: tests/nn/observe_functional_in_torch.py wrote each case's
# (output values, gradient of output.sum() w.r.t. x), float64
OBSERVED = json.loads((Path(__file__).parent / "torch_functional_observed.json").read_text())

X = np.sin(np.arange(12.0).reshape(3, 4) * 1.3) * 3
X[0, 0] = 25.0  # softplus's linear branch
T = (np.cos(np.arange(12.0).reshape(3, 4)) > 0).astype(np.float64)
tgt = sg.tensor([1, 3, 0])
w = sg.tensor(np.linspace(0.5, 2.0, 4))
tt = sg.tensor(T)
ar = sg.tensor(np.arange(4.0))

CASES = {
    "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "softplus": F.softplus, "softplus_b2_t5": lambda x: F.softplus(x, beta=2, threshold=5),
    "sigmoid": F.sigmoid, "tanh": F.tanh,
    "softmax1": lambda x: F.softmax(x, dim=1) * ar,
    "log_softmax0": lambda x: F.log_softmax(x, dim=0) * ar,
    "ce": lambda x: F.cross_entropy(x, tgt),
    "ce_sum_w": lambda x: F.cross_entropy(x, tgt, weight=w, reduction="sum"),
    "ce_ignore_w": lambda x: F.cross_entropy(x, sg.tensor([1, -100, 2]), weight=w),
    "ce_ls": lambda x: F.cross_entropy(x, tgt, label_smoothing=0.2),
    "ce_ls_w": lambda x: F.cross_entropy(x, tgt, weight=w, label_smoothing=0.2),
    "ce_ls_none": lambda x: F.cross_entropy(x, tgt, label_smoothing=0.2, reduction="none"),
    "ce_probs": lambda x: F.cross_entropy(x, F.softmax(tt, 1)),
    "nll": lambda x: F.nll_loss(x, tgt),
    "mse": lambda x: F.mse_loss(x, tt), "l1_sum": lambda x: F.l1_loss(x, tt, reduction="sum"),
    "bce": lambda x: F.binary_cross_entropy(F.sigmoid(x), tt),
    "bce_w_none": lambda x: F.binary_cross_entropy(F.sigmoid(x), tt, weight=w, reduction="none"),
    "bcel": lambda x: F.binary_cross_entropy_with_logits(x, tt),
    "bcel_pw": lambda x: F.binary_cross_entropy_with_logits(x, tt, pos_weight=w, reduction="sum"),
    "linear": lambda x: F.linear(x, sg.tensor(np.cos(np.arange(8.0)).reshape(2, 4)),
                                 sg.tensor([0.5, -1.0], dtype=np.float64)),
    "logsumexp": lambda x: sg.nn.functional.logsumexp(x, dim=1),
}


def test_every_observed_case_is_run():
    assert sorted(CASES) == sorted(OBSERVED)


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_gradient_as_torch(name):
    x = sg.tensor(X, requires_grad=True)
    y = CASES[name](x)
    (y.sum() if y.ndim else y).backward()
    value, grad = OBSERVED[name]
    np.testing.assert_allclose(y.detach().numpy().ravel(), value, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(x.grad.numpy().ravel(), grad, rtol=1e-9, atol=1e-11)


# gradcheck away from kinks (relu/l1 at 0) and thresholds: small values, float64
@pytest.mark.parametrize("name", sorted(set(CASES) - {"softplus_b2_t5"}))
def test_gradcheck_first_and_second_order(name):
    x = sg.tensor(np.sin(np.arange(12.0).reshape(3, 4) * 1.3) * 1.5 + 0.05, requires_grad=True)
    assert sg.autograd.gradcheck(CASES[name], (x,))
    if name not in ("relu", "l1_sum"):  # piecewise linear: no second derivative to check
        assert sg.autograd.gradgradcheck(CASES[name], (x,))


def test_softplus_threshold_switches_to_the_identity():
    x = sg.tensor([1.0, 3.0], dtype=np.float64, requires_grad=True)
    y = F.softplus(x, beta=2, threshold=5)  # beta*x = 2 (soft), 6 (> threshold: x)
    assert y.tolist() == pytest.approx([math.log1p(math.exp(2)) / 2, 3.0])


def test_erf_matches_math_erf_and_keeps_float32():
    x = sg.tensor([-1.5, 0.0, 0.3])
    y = F.erf(x)
    assert y.dtype == np.float32
    assert y.tolist() == pytest.approx([math.erf(v) for v in (-1.5, 0.0, 0.3)], rel=1e-6)


def test_dropout_masks_scales_and_respects_training():
    sg.manual_seed(0)
    x = sg.ones(2000, requires_grad=True)
    y = F.dropout(x, p=0.25)
    kept = y.detach().numpy() != 0
    np.testing.assert_allclose(y.detach().numpy()[kept], 1 / 0.75, rtol=1e-6)
    assert 0.70 < kept.mean() < 0.80
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.75, rtol=1e-6)
    assert F.dropout(x, p=0.25, training=False) is x
    assert F.dropout(x, p=1.0).sum().item() == 0.0
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but "
                                         "got 1.5"):  # torch 2.14.1's text
        F.dropout(x, p=1.5)


def test_errors_as_torch():
    x = sg.tensor(X)
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        F.mse_loss(x, tt, reduction="avg")
    with pytest.raises(RuntimeError, match="expected scalar type Long"):
        F.nll_loss(x, sg.tensor([1.0, 0.0, 2.0]))


def test_import_forms():
    import srcgrad.nn.functional as F2

    assert sg.nn.functional is F2 and F2.cross_entropy is F.cross_entropy
