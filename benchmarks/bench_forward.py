"""Forward mode and second order: srcgrad against jax (no jit), HIPS autograd and by hand.

    python benchmarks/bench_forward.py [--quick]

Workloads (float64, fixed seed, one BLAS thread):
  hessian   Hessian of the MLP loss of examples/mlp.py (batch 32, 32 -> 64 -> 10, tanh,
            mean squared error) w.r.t. b1, the 64-vector of hidden biases: a 64 x 64 matrix.
            srcgrad: sg.hessian (forward-over-reverse: one jvp of the generated gradient per
            column); jax: jax.hessian (jacfwd of jacrev, vmapped); autograd: autograd.hessian;
            hand: the closed form  (2/N) (W2 W2^T) * (S^T S) + diag(sum_n g_h * (-2 h s)).
  jacobian  Jacobian of a 32 -> 64 tanh layer tanh(x @ W + b) w.r.t. x: 64 x 32.
            srcgrad: sg.jacobian (auto picks forward: 32 inputs < 64 outputs);
            jax: jax.jacfwd; autograd: autograd.jacobian (reverse, its only mode);
            hand: (1 - t**2)[:, None] * W.T.
Every candidate's result is checked against the hand-written one before timing. The figure
is the median over rounds of the mean time per call within a round (autorange-style loops).
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import srcgrad as sg  # noqa: E402
from examples import mlp  # noqa: E402


def tanh_layer(x, W, b):
    return np.tanh(x @ W + b)


def hessian_b1_hand(W1, b1, W2, b2, X, y):
    h = np.tanh(X @ W1 + b1)
    out = h @ W2 + b2
    N = out.size
    s = 1.0 - h * h
    g_h = (2.0 / N) * (out - y) @ W2.T
    H = (2.0 / N) * (W2 @ W2.T) * (s.T @ s)
    H[np.diag_indices_from(H)] += np.sum(g_h * (-2.0 * h * s), axis=0)
    return H


def jacobian_hand(x, W, b):
    t = np.tanh(x @ W + b)
    return (1.0 - t * t)[:, None] * W.T


def _peers():
    peers = {}
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        def loss_j(W1, b1, W2, b2, X, y):
            h = jnp.tanh(X @ W1 + b1)
            return jnp.mean((h @ W2 + b2 - y) ** 2)

        peers["jax"] = (jax.hessian(loss_j, argnums=1),
                        jax.jacfwd(lambda x, W, b: jnp.tanh(x @ W + b), argnums=0))
    except ImportError:
        pass
    try:
        import autograd
        import autograd.numpy as anp

        def loss_a(W1, b1, W2, b2, X, y):
            h = anp.tanh(X @ W1 + b1)
            return anp.mean((h @ W2 + b2 - y) ** 2)

        peers["autograd"] = (autograd.hessian(loss_a, 1),
                             autograd.jacobian(lambda x, W, b: anp.tanh(x @ W + b), 0))
    except ImportError:
        pass
    return peers


def median_time(fn, args, rounds, min_time=0.05):
    fn(*args)  # warm up (compiles srcgrad's module once)
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        if time.perf_counter() - t0 >= min_time or n >= 1 << 20:
            break
        n *= 2
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def main(argv=None):
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    rounds = 3 if quick else 7
    rng = np.random.default_rng(0)
    W1, _, W2, b2 = mlp.init_params(rng, 32, 64, 10)
    b1 = 0.1 * rng.standard_normal(64)
    X, y = rng.standard_normal((32, 32)), rng.standard_normal((32, 10))
    mlp_args = (W1, b1, W2, b2, X, y)
    x, W, b = rng.standard_normal(32), rng.standard_normal((32, 64)) / np.sqrt(32), rng.standard_normal(64)
    layer_args = (x, W, b)

    peers = _peers()
    candidates = {
        "hessian": [("hand", hessian_b1_hand), ("srcgrad", sg.hessian(mlp.loss, wrt=1))]
        + [(name, p[0]) for name, p in peers.items()],
        "jacobian": [("hand", jacobian_hand), ("srcgrad", sg.jacobian(tanh_layer, wrt=0))]
        + [(name, p[1]) for name, p in peers.items()],
    }
    workloads = {"hessian": (mlp_args, "d2 loss / d b1^2, MLP 32->64->10, batch 32 (64x64)"),
                 "jacobian": (layer_args, "d tanh(x@W+b) / dx, 32->64 (64x32)")}
    print(f"numpy {np.__version__}; one BLAS thread; median of {rounds} rounds\n")
    header = f"{'workload':10s} {'candidate':10s} {'time':>12s} {'vs hand':>9s} {'vs srcgrad':>11s}"
    print(header)
    print("-" * len(header))
    for wname, cands in candidates.items():
        args, what = workloads[wname]
        expected = cands[0][1](*args)
        times = {}
        for name, fn in cands:
            got = np.asarray(fn(*args))
            err = np.max(np.abs(got - expected)) / max(1e-300, np.max(np.abs(expected)))
            if not err < 1e-8:
                raise AssertionError(f"{wname}/{name}: relative error {err:.2e} against the hand version")
            times[name] = median_time(fn, args, rounds)
        for name, t in times.items():
            print(f"{wname:10s} {name:10s} {t * 1e6:10.1f}us {t / times['hand']:8.1f}x "
                  f"{t / times['srcgrad']:10.2f}x")
        print(f"{'':10s} ({what})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
