"""Softmax regression (multinomial logistic regression) with gradients from srcgrad.

Run:  python examples/softmax.py  (with srcgrad installed: `pip install -e .` in the
repository root), or  python -m examples.softmax  from the repository root.
"""

import numpy as np


def loss(W, X, Y):
    """Mean softmax cross-entropy of logits X @ W against one-hot (or probability) rows Y."""
    logits = X @ W
    shifted = logits - np.max(logits, axis=1, keepdims=True)  # for stability only
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return np.mean(-np.sum(Y * logp, axis=1))


def xent(logits, Y):
    """The same cross-entropy taking the logits directly (the form benchmarks/ times)."""
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return np.mean(-np.sum(Y * logp, axis=1))


def one_hot(labels, k):
    return np.eye(k)[labels]


def main():
    # Imported here so that the losses above can be imported without srcgrad installed.
    import srcgrad as sg

    rng = np.random.default_rng(0)
    n, d, k = 600, 4, 3
    centers = 2.0 * rng.standard_normal((k, d))
    labels = rng.integers(0, k, size=n)
    X = centers[labels] + rng.standard_normal((n, d))
    X = np.hstack([X, np.ones((n, 1))])  # a bias column
    Y = one_hot(labels, k)

    W = np.zeros((d + 1, k))
    grad = sg.grad(loss, wrt="W")

    lr = 0.5
    for step in range(101):
        if step % 20 == 0:
            acc = np.mean(np.argmax(X @ W, axis=1) == labels)
            print(f"step {step:3d}  loss {loss(W, X, Y):.6f}  accuracy {acc:.3f}")
        W -= lr * grad(W, X, Y)


if __name__ == "__main__":
    main()
