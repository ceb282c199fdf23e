"""Logistic regression on data larger than one chunk, with dask and srcgrad.

The loss is plain NumPy code. `sg.value_and_grad(loss)` called with dask arrays
returns a lazy dask graph (Note [Array namespaces] in srcgrad.backend): each chunk
of X contributes its part of the gradient on whichever worker holds it, and only
the 3-element gradient comes back to this process.

It needs dask's `distributed` scheduler, which the `dask` extra installs:

    pip install -e '.[dask]'
    python examples/dask_logistic.py              # a LocalCluster of 4 worker processes
    python examples/dask_logistic.py --workers 2 --rows 2000000

On a real cluster, start `dask scheduler` and `dask worker scheduler:8786` on the
machines and give this script `--scheduler scheduler:8786`: the only change is
`Client("scheduler:8786")` in place of `Client(LocalCluster(...))`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import srcgrad as sg


def loss(w, X, y):
    z = X @ w
    # log(1 + exp(-z)) written stably: logaddexp(0, -z)
    return np.mean(np.logaddexp(0.0, -z) + (1.0 - y) * z) + 1e-4 * np.sum(w ** 2)


def make_data(da, rows: int, features: int, chunk_rows: int, seed: int = 0):
    """Synthetic, generated lazily on the workers: X (rows, features) and labels y."""
    rng = da.random.default_rng(seed)
    X = rng.standard_normal((rows, features), chunks=(chunk_rows, features))
    true_w = np.linspace(-2.0, 2.0, features)
    noise = rng.logistic(size=(rows,), chunks=(chunk_rows,))
    y = ((X @ true_w + noise) > 0).astype(np.float64)
    return X, y, true_w


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scheduler", help="address of a running scheduler, e.g. scheduler:8786")
    p.add_argument("--workers", type=int, default=4, help="LocalCluster worker processes")
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--chunk-rows", type=int, default=50_000)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--lr", type=float, default=1.0)
    args = p.parse_args(argv)

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    if args.scheduler:
        client = Client(args.scheduler)
    else:
        client = Client(LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True))
    print(client)
    X, y, true_w = make_data(da, args.rows, args.features, args.chunk_rows)
    X, y = dask.persist(X, y)  # generated once, kept in the workers' memory, chunk by chunk
    print(f"X: {X.shape} in {X.numblocks[0]} chunks of {args.chunk_rows} rows ({X.nbytes / 1e6:.0f} MB)")

    step = sg.value_and_grad(loss)
    w = np.zeros(args.features)
    start = time.perf_counter()
    for i in range(args.steps):
        value, grad = step(w, X, y)  # lazy: a dask graph
        value, grad = dask.compute(value, grad)  # the workers reduce; 8 numbers come back
        w = w - args.lr * np.asarray(grad)
        if i % 10 == 0 or i == args.steps - 1:
            print(f"step {i:3d}  loss {float(value):.5f}")
    elapsed = time.perf_counter() - start
    cosine = float(w @ true_w / (np.linalg.norm(w) * np.linalg.norm(true_w)))
    print(f"{args.steps} steps in {elapsed:.1f} s; cos(w, true w) = {cosine:.4f}")
    client.close()


if __name__ == "__main__":
    main()
