"""Per-op overhead of the eager runtime: a small MLP training step with sg.Tensor and
.backward(), against the same step written by hand in NumPy and, when installed, in
torch eager (CPU).

    python benchmarks/bench_eager.py [--batch 8] [--hidden 16] [--repeat 2000]

The MLP is 2 layers (x @ W1 + b1, tanh, @ W2 + b2, mean squared error): 8 recorded
forward ops and their backward nodes. Times are the best of `--rounds` rounds of
`--repeat` steps, the implementations taking turns within each round; "per op" divides
a step's time by the number of ops (forward + backward).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import srcgrad as sg


def make_data(batch, n_in, hidden, n_out, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((batch, n_in)).astype(np.float32),
            rng.standard_normal((batch, n_out)).astype(np.float32),
            [rng.standard_normal(s).astype(np.float32) * 0.3
             for s in ((n_in, hidden), (hidden,), (hidden, n_out), (n_out,))])


def step_tape(params, X, Y):
    """One step on sg.Tensor or torch.Tensor: the same code runs on both."""
    W1, b1, W2, b2 = params
    h = (X @ W1 + b1).tanh()
    loss = ((h @ W2 + b2 - Y) ** 2).mean()
    loss.backward()
    for p in params:
        p.grad = None
    return loss


def step_numpy(params, X, Y):
    W1, b1, W2, b2 = params
    z = X @ W1 + b1
    h = np.tanh(z)
    d = h @ W2 + b2 - Y
    loss = np.mean(d ** 2)
    gd = (2.0 / d.size) * d
    gW2 = h.T @ gd
    gb2 = gd.sum(axis=0)
    gz = (gd @ W2.T) * (1 - h * h)
    gW1 = X.T @ gz
    gb1 = gz.sum(axis=0)
    return loss, (gW1, gb1, gW2, gb2)


def timeit(fns: dict, repeat, rounds) -> dict:
    """Per function, the best (least disturbed) of `rounds` rounds of `repeat` calls; the
    functions take turns within each round, so a busy machine slows them alike."""
    for fn in fns.values():
        fn()  # warm up (kernels compiled, caches filled)
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(repeat):
                fn()
            times[name].append((time.perf_counter() - t0) / repeat)
    return {name: min(t) for name, t in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--inputs", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--outputs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    X, Y, values = make_data(args.batch, args.inputs, args.hidden, args.outputs)
    n_ops = 8 * 2  # forward ops (matmul, add, tanh, matmul, add, sub, pow, mean) + backward

    params = [sg.tensor(v, requires_grad=True) for v in values]
    Xt, Yt = sg.tensor(X), sg.tensor(Y)
    fns = {"srcgrad eager": lambda: step_tape(params, Xt, Yt),
           "NumPy by hand": lambda: step_numpy(values, X, Y)}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)
        tparams = [torch.tensor(v, requires_grad=True) for v in values]
        tX, tY = torch.tensor(X), torch.tensor(Y)
        fns["torch eager"] = lambda: step_tape(tparams, tX, tY)
    results = timeit(fns, args.repeat, args.rounds)
    print(f"MLP step, batch {args.batch}, {args.inputs}-{args.hidden}-{args.outputs}, float32 "
          f"({n_ops // 2} forward ops + their backward)")
    for name, t in results.items():
        print(f"  {name:15s} {t * 1e6:8.1f} us/step  {t * 1e6 / n_ops:6.2f} us/op")
    if torch is None:
        print("  torch eager     not installed")
    return results


if __name__ == "__main__":
    main()
