"""Per-op overhead of the eager runtime: a small MLP training step with sg.Tensor and
.backward(), against the same step written by hand in NumPy and, when installed, in
torch eager (CPU, one thread), then a per-op table.

    python benchmarks/bench_eager.py [--batch 8] [--hidden 16] [--repeat 2000] [--no-ops]

The MLP is 2 layers (x @ W1 + b1, tanh, @ W2 + b2, mean squared error): 8 recorded
forward ops and their backward nodes. Times are the best of `--rounds` rounds of
`--repeat` steps, the implementations taking turns within each round; "per op" divides
a step's time by the number of ops (forward + backward).

The per-op table times each op's forward alone and forward + backward (`out.backward(g)`
with a gradient made once, so no extra op is recorded) on (batch, 16) float32 operands,
for sg.Tensor and torch; "bwd" is the difference. The same code runs on both (`lib` is
srcgrad or torch). Both run on one thread: torch.set_num_threads(1) here, and
OMP/OPENBLAS/MKL_NUM_THREADS=1 set before NumPy loads.
"""

from __future__ import annotations

import argparse
import os
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before NumPy loads its BLAS: one thread, as torch's

import numpy as np  # noqa: E402

import srcgrad as sg  # noqa: E402


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
    ap.add_argument("--no-ops", action="store_true", help="skip the per-op table")
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
    if not args.no_ops:
        op_table(args.batch, max(args.repeat // 2, 1), args.rounds, torch)
    return results


# ---------------------------------------------------------------- the per-op table
def _ops(batch):
    """name -> (make(lib) -> operands, op(lib, *operands) -> Tensor); the same code on both."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((batch, 16)).astype(np.float32)
    B = rng.standard_normal((batch, 16)).astype(np.float32)
    W = rng.standard_normal((16, 16)).astype(np.float32)
    T = rng.integers(0, 16, batch)
    idx = np.array([0, batch - 1, 1], dtype=np.int64)

    def leaves(*arrays):
        return lambda lib: tuple(lib.tensor(a, requires_grad=True) for a in arrays)

    def with_target(lib):
        return (lib.tensor(A, requires_grad=True), lib.tensor(T))

    def with_index(lib):
        return (lib.tensor(A, requires_grad=True), lib.tensor(idx))

    return {
        "add": (leaves(A, B), lambda lib, a, b: a + b),
        "mul": (leaves(A, B), lambda lib, a, b: a * b),
        "matmul": (leaves(A, W), lambda lib, a, w: a @ w),
        "tanh": (leaves(A), lambda lib, a: a.tanh()),
        "relu": (leaves(A), lambda lib, a: a.relu()),
        "sum": (leaves(A), lambda lib, a: a.sum()),
        "mean": (leaves(A), lambda lib, a: a.mean()),
        "sum(dim=1)": (leaves(A), lambda lib, a: a.sum(dim=1)),
        "softmax": (leaves(A), lambda lib, a: a.softmax(dim=1)),
        "log_softmax": (leaves(A), lambda lib, a: a.log_softmax(dim=1)),
        "cross_entropy": (with_target, lambda lib, a, t: lib.nn.functional.cross_entropy(a, t)),
        "a[1:5]": (leaves(A), lambda lib, a: a[1:5]),
        "a[idx]": (with_index, lambda lib, a, i: a[i]),
        "cat": (leaves(A, B), lambda lib, a, b: lib.cat([a, b], dim=0)),
        "view": (leaves(A), lambda lib, a: a.view(-1)),
        "reshape": (leaves(A), lambda lib, a: a.reshape(4, -1)),
    }


def _op_fns(lib, make, op):
    operands = make(lib)
    out = op(lib, *operands)
    g = lib.ones_like(out)  # a gradient made once: backward(g) records no extra op

    def forward():
        return op(lib, *operands)

    def both():
        op(lib, *operands).backward(g)
        for a in operands:
            a.grad = None

    return forward, both


def op_table(batch, repeat, rounds, torch):
    """Forward and forward + backward per op, sg.Tensor beside torch eager."""
    libs = {"sg": sg}
    if torch is not None:
        libs["torch"] = torch
    rows = []
    for name, (make, op) in _ops(batch).items():
        fns = {}
        for label, lib in libs.items():
            fns[label + " fwd"], fns[label + " f+b"] = _op_fns(lib, make, op)
        t = timeit(fns, repeat, rounds)
        rows.append((name, t))
    print(f"\nPer op, batch {batch} (x16), float32, us (bwd = f+b - fwd):")
    head = f"  {'op':14s} {'sg fwd':>7s} {'sg bwd':>7s} {'sg f+b':>7s}"
    if torch is not None:
        head += f" {'th fwd':>7s} {'th bwd':>7s} {'th f+b':>7s} {'ratio':>6s}"
    print(head)
    for name, t in rows:
        sf, sb = t["sg fwd"] * 1e6, t["sg f+b"] * 1e6
        line = f"  {name:14s} {sf:7.1f} {sb - sf:7.1f} {sb:7.1f}"
        if torch is not None:
            tf, tb = t["torch fwd"] * 1e6, t["torch f+b"] * 1e6
            line += f" {tf:7.1f} {tb - tf:7.1f} {tb:7.1f} {sb / tb:5.2f}x"
        print(line)
    return rows


if __name__ == "__main__":
    main()
