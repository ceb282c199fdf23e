"""A vanilla tanh RNN over a sequence, trained by gradient descent with srcgrad.

The loss is a plain Python `for` loop over time steps. srcgrad compiles it without
unrolling: one forward loop that keeps what the backward needs on a tape, and one
adjoint loop that runs the steps in reverse (see `srcgrad emit examples/rnn.py:loss`).
Run:  python -m examples.rnn  from the repository root.
"""

import numpy as np


def loss(Wx, Wh, b, xs, y):
    """Mean squared error of the last hidden state; xs is (time, batch, input)."""
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.mean((h - y) ** 2)


def main():
    import srcgrad as sg

    rng = np.random.default_rng(0)
    T, B, n_in, H = 20, 16, 8, 32
    xs = rng.standard_normal((T, B, n_in))
    y = np.tanh(xs.sum(axis=0) @ rng.standard_normal((n_in, H)) * 0.3)
    Wx = rng.standard_normal((n_in, H)) * 0.3
    Wh = rng.standard_normal((H, H)) * 0.1
    b = np.zeros(H)
    grad = sg.value_and_grad(loss, wrt=("Wx", "Wh", "b"))
    for step in range(201):
        value, (gWx, gWh, gb) = grad(Wx, Wh, b, xs, y)
        if step % 50 == 0:
            print(f"step {step:3d}  loss {value:.6f}")
        Wx -= 0.5 * gWx
        Wh -= 0.5 * gWh
        b -= 0.5 * gb


if __name__ == "__main__":
    main()
