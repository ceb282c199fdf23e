"""Functions users write, compiled in tests/corpus/test_programs.py.

Each is plain NumPy. They live in a module of their own so `inspect.getsource`
reads them as a user's file would be read.
"""

import numpy as np
import numpy as xp_alias
from numpy import exp as np_exp

SCALE = 0.5


def poly(x):
    return np.sum(3.0 * x ** 3 - 2.0 * x ** 2 + x - 1.0)


def mlp(W1, b1, W2, b2, X, y):
    h = np.tanh(X @ W1 + b1)
    out = h @ W2 + b2
    return np.mean((out - y) ** 2)


def logistic(w, b, X, y):
    z = X @ w + b
    return np.mean(np.logaddexp(0.0, z) - y * z)


def softmax_xent(W, X, Y):
    logits = X @ W
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(np.sum(Y * logp, axis=1))


def aliases(x):
    return xp_alias.sum(np_exp(x) * SCALE) + np.linalg.norm(x)


def _helper(a, scale=2.0):
    return np.sin(a) * scale


def calls_helper(x, y):
    return np.sum(_helper(x) + _helper(y, scale=3.0) * x)


def methods_and_attrs(x):
    s = x.sum(axis=1)
    t = x.T.dot(s)
    r = x.reshape(-1)
    return t.mean() + r.max() + x.shape[0] * x.std()


def indexing(x, idx):
    a = x[1:, None, ::2]
    b = x[-1]
    c = x[idx]
    d = x[x > 0.5]
    return np.sum(a) + np.sum(b ** 2) + np.sum(c * c) + np.sum(d)


def broadcasting(x, row, col):
    return np.sum((x * row + col) ** 2 / (1.0 + row ** 2))


def tuple_unpack(x, y):
    a, b = x * y, x + y
    (c, d), e = (a, b), a - b
    return np.sum(c * d * e)


def several_returns(x, y):
    return x * y, {"s": np.sum(x), "p": [y * 2.0, x]}


def aux_output(x):
    loss = np.sum(x ** 2)
    return loss, {"norm": np.sqrt(loss)}


def docstring_and_keywords(x, axis=0):
    """Keyword arguments and defaults reach NumPy unchanged."""
    return np.sum(np.mean(x, axis=axis, keepdims=True) ** 2)


def uses_where(x):
    return np.sum(np.where(x > 0, np.sqrt(np.abs(x)), 0.0))


def matrix_ops(A, B):
    return np.trace(np.linalg.inv(A) @ B) + np.linalg.det(A)


def constant_output(x):
    return 3.0


def int_ops(x):
    return np.sum(x * x)


def int_astype(x):
    return np.sum(x.astype(np.float64) ** 2)


def poly4(x):
    return x + x ** 2 + x ** 3 + x ** 4


def log_softmax_loss(x, Y):
    shifted = x - np.max(x, axis=1, keepdims=True)
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.sum(Y * logp)


def softmax_probs(x, w):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return np.sum(w * (e / np.sum(e, axis=-1, keepdims=True)))


def shifted_used_elsewhere(x):
    shifted = x - np.max(x, axis=1, keepdims=True)
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return np.sum(logp) + np.sum(shifted ** 2)


def logsumexp(x):
    m = np.max(x, axis=1, keepdims=True)
    return np.sum(m + np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)))
