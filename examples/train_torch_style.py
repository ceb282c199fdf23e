"""A training loop written for PyTorch, run on srcgrad: only the import line differs.

    python examples/train_torch_style.py

Change the first import to `import torch` and this file runs on PyTorch unchanged (the
test tests/autograd/test_train_torch_style.py compares its losses with torch's, observed,
and with the same loop written in NumPy with hand-derived gradients). A two-layer
classifier with a checkpointed GELU block, Adam, cross-entropy and accuracy by argmax;
the data and initial weights are formulas, so every run (and torch's) sees the same.
"""

import srcgrad as torch

F = torch.nn.functional
checkpoint = torch.utils.checkpoint.checkpoint


def make_data(n=64):
    t = torch.arange(float(n)).reshape(n, 1)
    x = torch.cat([torch.sin(t * 0.37), torch.cos(t * 0.23), torch.sin(t * 0.11 + 1.0)], dim=1)
    y = ((x[:, 0] > 0).long() + (x[:, 1] > 0.3).long()).reshape(n)  # classes 0, 1, 2
    return x, y


def init_params(n_features=6, hidden=16, classes=3):
    W1 = (torch.sin(torch.arange(float(hidden * n_features))) * 0.4).reshape(hidden, n_features)
    b1 = torch.zeros(hidden)
    W2 = (torch.cos(torch.arange(float(classes * hidden)) * 1.3) * 0.3).reshape(classes, hidden)
    b2 = torch.zeros(classes)
    return [p.requires_grad_() for p in (W1, b1, W2, b2)]


def train(steps=30, lr=0.05, verbose=False):
    x, y = make_data()
    W1, b1, W2, b2 = params = init_params()
    optimizer = torch.optim.Adam(params, lr=lr)

    def block(features):  # recomputed in backward instead of keeping its activations
        return F.gelu(F.linear(features, W1, b1))

    losses, accuracies = [], []
    for step in range(steps):
        optimizer.zero_grad()
        features = torch.cat([x, x * x], dim=1)
        hidden = checkpoint(block, features, use_reentrant=False)
        logits = F.linear(hidden, W2, b2)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            accuracy = (logits.argmax(dim=1) == y).float().mean().item()
        losses.append(loss.item())
        accuracies.append(accuracy)
        if verbose and step % 5 == 0:
            print(f"step {step:3d}  loss {loss.item():.4f}  accuracy {accuracy:.3f}")
    return losses, accuracies


if __name__ == "__main__":
    losses, accuracies = train(verbose=True)
    print(f"final loss {losses[-1]:.4f}, accuracy {accuracies[-1]:.3f}")
