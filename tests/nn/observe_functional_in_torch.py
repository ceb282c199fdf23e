"""Run with a torch venv (never a dependency): prints the cases of test_functional.py as
JSON (torch_functional_observed.json), then two error texts."""
import json

import numpy as np
import torch
import torch.nn.functional as F

X = np.sin(np.arange(12.0).reshape(3, 4) * 1.3) * 3
X[0, 0] = 25.0  # softplus threshold branch
P = 1 / (1 + np.exp(-X))
T = (np.cos(np.arange(12.0).reshape(3, 4)) > 0).astype(np.float64)
tgt = np.array([1, 3, 0])
W = np.linspace(0.5, 2.0, 4)
x = torch.tensor(X, requires_grad=True)
def g(f):
    x.grad = None
    y = f(x)
    y.sum().backward() if y.ndim else y.backward()
    return [np.round(y.detach().numpy().ravel(), 12).tolist(),
            np.round(x.grad.numpy().ravel(), 12).tolist()]
t = torch.tensor(tgt)
w = torch.tensor(W)
tt = torch.tensor(T)
res = {
 "relu": g(F.relu), "gelu": g(F.gelu), "gelu_tanh": g(lambda x: F.gelu(x, approximate="tanh")),
 "softplus": g(F.softplus), "softplus_b2_t5": g(lambda x: F.softplus(x, beta=2, threshold=5)),
 "sigmoid": g(torch.sigmoid), "tanh": g(torch.tanh),
 "softmax1": g(lambda x: F.softmax(x, dim=1) * torch.arange(4.0, dtype=torch.float64)),
 "log_softmax0": g(lambda x: F.log_softmax(x, dim=0) * torch.arange(4.0, dtype=torch.float64)),
 "ce": g(lambda x: F.cross_entropy(x, t)),
 "ce_sum_w": g(lambda x: F.cross_entropy(x, t, weight=w, reduction="sum")),
 "ce_ignore_w": g(lambda x: F.cross_entropy(x, torch.tensor([1, -100, 2]), weight=w)),
 "ce_ls": g(lambda x: F.cross_entropy(x, t, label_smoothing=0.2)),
 "ce_ls_w": g(lambda x: F.cross_entropy(x, t, weight=w, label_smoothing=0.2)),
 "ce_ls_none": g(lambda x: F.cross_entropy(x, t, label_smoothing=0.2, reduction="none")),
 "ce_probs": g(lambda x: F.cross_entropy(x, torch.softmax(tt, 1))),
 "nll": g(lambda x: F.nll_loss(x, t)),
 "mse": g(lambda x: F.mse_loss(x, tt)), "l1_sum": g(lambda x: F.l1_loss(x, tt, reduction="sum")),
 "bce": g(lambda x: F.binary_cross_entropy(torch.sigmoid(x), tt)),
 "bce_w_none": g(lambda x: F.binary_cross_entropy(torch.sigmoid(x), tt, weight=w, reduction="none")),
 "bcel": g(lambda x: F.binary_cross_entropy_with_logits(x, tt)),
 "bcel_pw": g(lambda x: F.binary_cross_entropy_with_logits(x, tt, pos_weight=w, reduction="sum")),
 "linear": g(lambda x: F.linear(x, torch.tensor(np.cos(np.arange(8.0)).reshape(2, 4)),
                                torch.tensor([0.5, -1.0], dtype=torch.float64))),
 "logsumexp": g(lambda x: torch.logsumexp(x, dim=1)),
}
print(json.dumps(res))
try:
    F.dropout(x, p=1.5)
except Exception as e:
    print("DROP", type(e).__name__, e)
try:
    F.mse_loss(x, tt, reduction="avg")
except Exception as e:
    print("RED", type(e).__name__, e)
