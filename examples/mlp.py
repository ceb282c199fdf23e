"""A 2-layer tanh MLP trained by gradient descent with gradients from srcgrad.

The loss is plain NumPy; srcgrad reads its source and writes the backward pass.
Run:  python examples/mlp.py  (with srcgrad installed: `pip install -e .` in the
repository root), or  python -m examples.mlp  from the repository root.
"""

import numpy as np


def loss(W1, b1, W2, b2, X, y):
    """Mean squared error of a tanh MLP: mean over all batch x output entries."""
    h = np.tanh(X @ W1 + b1)
    out = h @ W2 + b2
    return np.mean((out - y) ** 2)


def init_params(rng, n_in, n_hidden, n_out):
    W1 = rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)
    b1 = np.zeros(n_hidden)
    W2 = rng.standard_normal((n_hidden, n_out)) / np.sqrt(n_hidden)
    b2 = np.zeros(n_out)
    return W1, b1, W2, b2


def main():
    # Imported here so that the loss above can be imported without srcgrad installed.
    import srcgrad as sg

    rng = np.random.default_rng(0)
    n, n_in, n_hidden, n_out = 256, 8, 32, 3
    X = rng.standard_normal((n, n_in))
    # Targets from a fixed random "teacher" network, so there is something to learn.
    A = rng.standard_normal((n_in, n_out))
    y = np.sin(X @ A)

    W1, b1, W2, b2 = init_params(rng, n_in, n_hidden, n_out)
    grad = sg.grad(loss, wrt=("W1", "b1", "W2", "b2"))

    lr = 0.2
    for step in range(301):
        if step % 50 == 0:
            print(f"step {step:3d}  loss {loss(W1, b1, W2, b2, X, y):.6f}")
        gW1, gb1, gW2, gb2 = grad(W1, b1, W2, b2, X, y)
        W1 -= lr * gW1
        b1 -= lr * gb1
        W2 -= lr * gW2
        b2 -= lr * gb2


if __name__ == "__main__":
    main()
