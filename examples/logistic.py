"""Logistic regression by gradient descent with gradients from srcgrad.

Run:  python examples/logistic.py  (with srcgrad installed: `pip install -e .` in the
repository root), or  python -m examples.logistic  from the repository root.
"""

import numpy as np


def loss(w, b, X, y):
    """Mean binary cross-entropy, y in {0, 1}.

    log(1 + exp(z)) - y*z is the negative log-likelihood of the logistic model;
    np.logaddexp(0, z) computes log(1 + exp(z)) without overflow for large z.
    """
    z = X @ w + b
    return np.mean(np.logaddexp(0.0, z) - y * z)


def main():
    # Imported here so that the loss above can be imported without srcgrad installed.
    import srcgrad as sg

    rng = np.random.default_rng(0)
    n, d = 500, 5
    X = rng.standard_normal((n, d))
    w_true = rng.standard_normal(d)
    y = (X @ w_true + 0.3 * rng.standard_normal(n) > 0).astype(np.float64)

    w = np.zeros(d)
    b = 0.0
    grad = sg.grad(loss, wrt=("w", "b"))

    lr = 1.0
    for step in range(101):
        if step % 20 == 0:
            acc = np.mean((X @ w + b > 0) == (y > 0.5))
            print(f"step {step:3d}  loss {loss(w, b, X, y):.6f}  accuracy {acc:.3f}")
        gw, gb = grad(w, b, X, y)
        w = w - lr * gw
        b = b - lr * gb


if __name__ == "__main__":
    main()
