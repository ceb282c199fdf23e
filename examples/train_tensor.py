"""Train a small MLP with sg.Tensor and .backward(), as one would with torch.

    python examples/train_tensor.py

A 2-layer network fits y = sin(3x) on [-1, 1] with plain gradient descent. Every op
below records one node of the autograd graph; `loss.backward()` fills `.grad`.
"""

import numpy as np

import srcgrad as sg


def init(rng, sizes):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        W = sg.tensor(rng.standard_normal((n_in, n_out)) / np.sqrt(n_in), requires_grad=True)
        b = sg.zeros(n_out, dtype=np.float64, requires_grad=True)
        params += [W, b]
    return params


def model(params, x):
    W1, b1, W2, b2 = params
    h = (x @ W1 + b1).tanh()
    return h @ W2 + b2


def train(steps=500, lr=0.1, seed=0, verbose=True):
    rng = np.random.default_rng(seed)
    x = sg.tensor(np.linspace(-1, 1, 64).reshape(-1, 1))
    y = np.sin(3 * x)  # NumPy functions apply to Tensors and return Tensors
    params = init(rng, [1, 32, 1])
    losses = []
    for step in range(steps):
        loss = ((model(params, x) - y) ** 2).mean()
        loss.backward()
        with sg.no_grad():
            for p in params:
                p -= lr * p.grad  # an in-place update of a leaf: allowed under no_grad
                p.grad = None
        losses.append(loss.item())
        if verbose and step % 100 == 0:
            print(f"step {step:4d}  loss {loss.item():.5f}")
    if verbose:
        print(f"final loss {losses[-1]:.5f}")
    return losses


if __name__ == "__main__":
    train()
