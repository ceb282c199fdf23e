"""Run with a torch venv (never a dependency): prints test_torch_namespace.py's cases as JSON
(torch_namespace_observed.json), each (output values, gradient of (output * weights).sum())."""
import json

import numpy as np

X = np.sin(np.arange(12.0).reshape(3, 4) * 1.7) * 2
Y = np.cos(np.arange(12.0).reshape(3, 4) * 0.9)
IDX = np.array([[0, 3], [2, 2], [1, 0]])
SIDX = np.array([[0, 0, 2], [1, 3, 1], [2, 2, 2]])


def cases(t):
    idx = t.tensor(IDX)
    sidx = t.tensor(SIDX)  # repeated positions
    return {
        "cat1": lambda x, y: t.cat([x, y], dim=1),
        "cat0": lambda x, y: t.cat((x, y * 2)),
        "stack": lambda x, y: t.stack([x, y], 1),
        "where": lambda x, y: t.where(x > 0, x, y),
        "sqrt_exp_log": lambda x, y: t.sqrt(t.exp(x)) + t.log(y * y + 1),
        "sum_dim": lambda x, y: t.sum(x * y, dim=1, keepdim=True),
        "mean_dims": lambda x, y: t.mean(x, dim=(0, 1)),
        "einsum": lambda x, y: t.einsum("ij,kj->ik", x, y),
        "einsum_list": lambda x, y: t.einsum("ij,ij->i", [x, y]),
        "matmul": lambda x, y: t.matmul(x, y.T),
        "mm": lambda x, y: t.mm(x.t(), y),
        "bmm": lambda x, y: t.bmm(x.reshape(3, 2, 2), y.reshape(3, 2, 2)),
        "softmax": lambda x, y: t.softmax(x, dim=0),
        "log_softmax": lambda x, y: t.log_softmax(x, 1),
        "logsumexp": lambda x, y: t.logsumexp(x, dim=1),
        "logsumexp_keep": lambda x, y: t.logsumexp(x, 0, keepdim=True),
        "gather": lambda x, y: t.gather(x, 1, idx),
        "gather_method": lambda x, y: x.gather(0, t.tensor([[2, 0, 1, 1], [0, 0, 2, 1]])),
        "scatter_add": lambda x, y: t.scatter_add(x, 1, idx, y[:, :2]),
        "scatter": lambda x, y: t.scatter(x, 1, t.tensor([[0, 3], [2, 1], [1, 0]]), y[:, 1:3]),
        "scatter_reduce_sum": lambda x, y: t.scatter_reduce(x, 1, sidx, y[:, :3], "sum"),
        "scatter_reduce_mean_excl": lambda x, y: x.scatter_reduce(1, sidx, y[:, :3], "mean",
                                                                  include_self=False),
        "scatter_reduce_mean": lambda x, y: t.scatter_reduce(x, 1, sidx, y[:, :3], reduce="mean"),
        "index_select": lambda x, y: t.index_select(x, 1, t.tensor([3, 0, 3])),
        "masked_fill": lambda x, y: t.masked_fill(x, y > 0.2, -1.0),
        "var": lambda x, y: t.var(x, dim=1),
        "var_c0": lambda x, y: t.var(x, 0, correction=0),
        "std": lambda x, y: t.std(x),
        "var_mean": lambda x, y: t.stack(t.var_mean(x, dim=1)),
        "std_mean": lambda x, y: t.stack(t.std_mean(x, dim=0, keepdim=True)),
        "sort_values": lambda x, y: t.sort(x, dim=1, descending=True).values,
        "sort_indices": lambda x, y: x + t.sort(x, 0).indices,
        "topk": lambda x, y: t.topk(x, 2, dim=1).values,
        "topk_small": lambda x, y: x.topk(2, dim=0, largest=False).values,
        "topk_indices": lambda x, y: x + t.topk(x, 3).indices.sum(),
        "median": lambda x, y: t.median(x),
        "median_dim": lambda x, y: t.median(x, dim=1).values,
        "argmax": lambda x, y: x + t.argmax(x, dim=1, keepdim=True),
        "argmin": lambda x, y: x + x.argmin(dim=0),
        "argmax_flat": lambda x, y: x + t.argmax(x),
        "cumsum": lambda x, y: t.cumsum(x, dim=1),
        "clamp": lambda x, y: t.clamp(x, min=-0.5, max=1.0),
        "clamp_min": lambda x, y: t.clamp(x, min=0.1),
        "split_with_sizes": lambda x, y: x.split_with_sizes([1, 3], dim=1)[1] * 2,
        "split": lambda x, y: t.split(x, 3, dim=1)[1],
        "chunk": lambda x, y: t.chunk(x, 2, dim=1)[1] * 3,
        "flip": lambda x, y: t.flip(x, [0, 1]),
        "roll": lambda x, y: t.roll(x, 1, 1),
        "roll_flat": lambda x, y: t.roll(x, 5),
        "roll_dims": lambda x, y: t.roll(x, (1, -1), (0, 1)),
        "max_dim": lambda x, y: t.max(x, dim=1).values,
        "max_pair": lambda x, y: t.max(x, y),
        "amax": lambda x, y: t.amax(x, dim=0),
        "tril": lambda x, y: t.tril(x),
        "triu1": lambda x, y: x.triu(1),
        "new_zeros": lambda x, y: x + x.new_zeros((3, 4)) + x.new_ones(4) + x.new_full((3, 1), 2.5),
        "new_tensor": lambda x, y: x * x.new_tensor([1, 2, 3, 4]),
        "masked_select": lambda x, y: t.masked_select(x, y > 0),
    }


if __name__ == "__main__":
    import torch

    out = {}
    W = np.linspace(-1.0, 2.0, 48)
    for name, f in cases(torch).items():
        x = torch.tensor(X, requires_grad=True)
        y = torch.tensor(Y, requires_grad=True)
        r = f(x, y)
        w = torch.tensor(W[: r.numel()].reshape(r.shape))
        (r * w).sum().backward()
        out[name] = [np.round(r.detach().numpy().ravel(), 12).tolist(),
                     np.round(x.grad.numpy().ravel(), 12).tolist(),
                     np.round(y.grad.numpy().ravel(), 12).tolist() if y.grad is not None else None]
    print(json.dumps(out))
