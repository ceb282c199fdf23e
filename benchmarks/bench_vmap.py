"""Per-example gradients: `sg.vmap(sg.grad(loss), in_axes=(None, ..., 0, 0))` (issue 32).

    python benchmarks/bench_vmap.py [--quick]
    PYTHONPATH=. /work/peers/bin/python benchmarks/bench_vmap.py   # with jax / torch

Two workloads, one thread (BLAS pinned): an MLP's softmax cross-entropy (784-128-10,
batch 256) and a logistic regression (784 features, batch 1024). Each is timed as
srcgrad's vmap of its gradient, a Python loop of `sg.grad` over the examples, and,
when importable, `jax.jit(jax.vmap(jax.grad(...)))` and
`torch.func.vmap(torch.func.grad(...))`; every result is checked against the loop
before it is timed. Prints the median time of each, its ratio to srcgrad's vmap, and
the floor under all of them: the time to write the per-example gradients once.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import srcgrad as sg  # noqa: E402


# ---------------------------------------------------------------------- the losses (one example)
def mlp_loss(W1, b1, W2, b2, x, y):
    h = np.tanh(W1 @ x + b1)
    z = W2 @ h + b2
    z = z - np.max(z)
    logp = z - np.log(np.sum(np.exp(z)))
    return -np.sum(y * logp)


def logistic_loss(w, b, x, y):
    z = x @ w + b
    return np.log1p(np.exp(-y * z))


def workloads(rng):
    W1 = rng.normal(size=(128, 784)) * 0.05
    b1 = np.zeros(128)
    W2 = rng.normal(size=(10, 128)) * 0.1
    b2 = np.zeros(10)
    X = rng.normal(size=(256, 784))
    Y = np.eye(10)[rng.integers(0, 10, 256)]
    w, b = rng.normal(size=784) * 0.05, np.zeros(())
    Xl, yl = rng.normal(size=(1024, 784)), np.sign(rng.normal(size=1024))
    return {
        "mlp 784-128-10, batch 256": (mlp_loss, (0, 1, 2, 3), (W1, b1, W2, b2), (X, Y)),
        "logistic 784, batch 1024": (logistic_loss, (0, 1), (w, b), (Xl, yl)),
    }


def median_time(fn, repeat, number=1) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


# ---------------------------------------------------------------------- peers
def jax_version(loss_name, params, data):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def mlp(W1, b1, W2, b2, x, y):
        h = jnp.tanh(W1 @ x + b1)
        z = W2 @ h + b2
        z = z - jnp.max(z)
        return -jnp.sum(y * (z - jnp.log(jnp.sum(jnp.exp(z)))))

    def logistic(w, b, x, y):
        return jnp.log1p(jnp.exp(-y * (x @ w + b)))
    loss = mlp if loss_name == "mlp_loss" else logistic
    n = len(params)
    f = jax.jit(jax.vmap(jax.grad(loss, argnums=tuple(range(n))), in_axes=(None,) * n + (0, 0)))
    args = [jnp.asarray(a) for a in params + data]

    def run():
        return jax.block_until_ready(f(*args))
    return run


def torch_version(loss_name, params, data):
    try:
        import torch
        from torch.func import grad, vmap
    except ImportError:
        return None
    torch.set_num_threads(1)

    def mlp(W1, b1, W2, b2, x, y):
        h = torch.tanh(W1 @ x + b1)
        z = W2 @ h + b2
        z = z - torch.max(z)
        return -torch.sum(y * (z - torch.log(torch.sum(torch.exp(z)))))

    def logistic(w, b, x, y):
        return torch.log1p(torch.exp(-y * (x @ w + b)))
    loss = mlp if loss_name == "mlp_loss" else logistic
    n = len(params)
    f = vmap(grad(loss, argnums=tuple(range(n))), in_dims=(None,) * n + (0, 0))
    args = [torch.from_numpy(np.array(a, order="C")) for a in params + data]  # (not ascontiguousarray: 1-d)
    return lambda: f(*args)


def check(got, want, what):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-9, atol=1e-12, err_msg=what)


def time_workload(name, loss, wrt, params, data, repeat) -> dict:
    """label -> median seconds, each result checked against the loop of sg.grad first."""
    n = len(params)
    g = sg.grad(loss, wrt=wrt)
    per_example = sg.vmap(g, in_axes=(None,) * n + (0,) * len(data))
    batch = data[0].shape[0]

    def python_loop():
        return [g(*params, *(d[i] for d in data)) for i in range(batch)]
    want = per_example(*params, *data)
    loop = python_loop()
    check(want, [np.stack([r[k] for r in loop]) for k in range(n)], f"{name}: vmap vs loop")
    rows = {"sg.vmap(sg.grad)": median_time(lambda: per_example(*params, *data), repeat),
            "python loop of sg.grad": median_time(python_loop, max(1, repeat // 5))}
    # The floor of any per-example gradient: writing its outputs once (fresh arrays of
    # the results' shapes, filled). The MLP's 256 x 784 x 128 W1 gradients are 205 MB,
    # so a loop that writes them example by example is already near this floor.
    shapes = [np.shape(r) for r in want]
    rows["floor: write the outputs"] = median_time(
        lambda: [np.empty(s).fill(1.0) for s in shapes], repeat)
    for peer, make in (("jax.jit(vmap(grad))", jax_version), ("torch.func.vmap(grad)", torch_version)):
        run = make(loss.__name__, params, data)
        if run is not None:
            check(run(), want, f"{name}: {peer}")
            rows[peer] = median_time(run, repeat)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (CI)")
    opts = parser.parse_args(argv)
    repeat = 3 if opts.quick else 15
    rng = np.random.default_rng(0)
    for name, (loss, wrt, params, data) in workloads(rng).items():
        rows = time_workload(name, loss, wrt, params, data, repeat)
        base = rows["sg.vmap(sg.grad)"]
        print(f"\n{name}")
        for label, t in rows.items():
            print(f"  {label:26s} {t * 1e3:9.3f} ms   {t / base:7.2f}x sg.vmap")
    return 0


if __name__ == "__main__":
    sys.exit(main())
