"""Batched Jacobians and Hessians (issue 15): srcgrad against a closed form and jax.jit.

    python benchmarks/bench_jacobians.py [--quick]

Workloads (float64, fixed seed, one BLAS thread), the MLP loss of examples/mlp.py
(batch 32, 32 -> H -> 10, tanh, mean squared error):
  hessian64   d2 loss / d b1^2 with H = 64: a 64 x 64 matrix
  hessian640  the same with H = 640: a 640 x 640 matrix
  jacfwd      d out / d b1 of the MLP output (32 x 10) w.r.t. the 64 hidden biases:
              32 x 10 x 64, forward mode (64 seeds)
  jacrev      the same, reverse mode (320 seeds)
srcgrad: sg.hessian / sg.jacobian(mode=...), one batched pass over all seeds
(Note [Batching] in srcgrad.passes.batch); jax: jax.jit(jax.hessian / jacfwd / jacrev)
when jax is importable (optional); hand: the closed forms below.
Every candidate's result is checked against the closed form before timing. The figures
are the median and the best over rounds of the mean time per call within a round; the
candidates take turns round by round (on a shared, loaded machine the best is the
steadier of the two).
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import srcgrad as sg  # noqa: E402
from examples import mlp  # noqa: E402


def mlp_out(W1, b1, W2, b2, X):
    return np.tanh(X @ W1 + b1) @ W2 + b2


def hessian_b1_hand(W1, b1, W2, b2, X, y):
    h = np.tanh(X @ W1 + b1)
    out = h @ W2 + b2
    N = out.size
    s = 1.0 - h * h
    g_h = (2.0 / N) * (out - y) @ W2.T
    H = (2.0 / N) * (W2 @ W2.T) * (s.T @ s)
    H[np.diag_indices_from(H)] += np.sum(g_h * (-2.0 * h * s), axis=0)
    return H


def jacobian_b1_hand(W1, b1, W2, b2, X):
    h = np.tanh(X @ W1 + b1)
    s = 1.0 - h * h
    return s[:, None, :] * W2.T[None, :, :]  # [n, o, j] = s[n, j] W2[j, o]


def _jax_peers():
    try:
        import jax
    except ImportError:
        return {}
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def loss_j(W1, b1, W2, b2, X, y):
        h = jnp.tanh(X @ W1 + b1)
        return jnp.mean((h @ W2 + b2 - y) ** 2)

    def out_j(W1, b1, W2, b2, X):
        return jnp.tanh(X @ W1 + b1) @ W2 + b2

    hess = jax.jit(jax.hessian(loss_j, argnums=1))
    fwd, rev = jax.jit(jax.jacfwd(out_j, argnums=1)), jax.jit(jax.jacrev(out_j, argnums=1))

    def run(fn):
        return lambda *args: fn(*args).block_until_ready()

    return {"hessian": run(hess), "jacfwd": run(fwd), "jacrev": run(rev)}


def calls_per_round(fn, args, min_time=0.05):
    """How many calls make one timed round (at least min_time seconds); warms fn up."""
    fn(*args)  # warm up (compiles once)
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        if time.perf_counter() - t0 >= min_time or n >= 1 << 20:
            return n
        n *= 2


def interleaved_times(cands, args, rounds):
    """name -> (median, best) of the mean time per call in a round. The candidates take
    turns round by round, so load on a shared machine falls on all of them alike."""
    counts = {name: calls_per_round(fn, args) for name, fn in cands}
    samples: dict = {name: [] for name, _ in cands}
    for _ in range(rounds):
        for name, fn in cands:
            n = counts[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn(*args)
            samples[name].append((time.perf_counter() - t0) / n)
    return {name: (statistics.median(s), min(s)) for name, s in samples.items()}


def _mlp_args(rng, hidden):
    W1, _, W2, b2 = mlp.init_params(rng, 32, hidden, 10)
    b1 = 0.1 * rng.standard_normal(hidden)
    X, y = rng.standard_normal((32, 32)), rng.standard_normal((32, 10))
    return W1, b1, W2, b2, X, y


def workloads(rng):
    """name -> (description, args, [(candidate, function)]) with the closed form first."""
    args64, args640 = _mlp_args(rng, 64), _mlp_args(rng, 640)
    jac_args = args64[:5]
    jax = _jax_peers()
    table = {
        "hessian64": ("d2 loss / d b1^2, MLP 32->64->10, batch 32 (64x64)", args64,
                      [("hand", hessian_b1_hand), ("srcgrad", sg.hessian(mlp.loss, wrt=1))]
                      + ([("jax.jit", jax["hessian"])] if jax else [])),
        "hessian640": ("d2 loss / d b1^2, MLP 32->640->10, batch 32 (640x640)", args640,
                       [("hand", hessian_b1_hand), ("srcgrad", sg.hessian(mlp.loss, wrt=1))]
                       + ([("jax.jit", jax["hessian"])] if jax else [])),
        "jacfwd": ("d out / d b1, MLP output 32x10 w.r.t. 64 inputs, forward", jac_args,
                   [("hand", jacobian_b1_hand),
                    ("srcgrad", sg.jacobian(mlp_out, wrt=1, mode="forward"))]
                   + ([("jax.jit", jax["jacfwd"])] if jax else [])),
        "jacrev": ("d out / d b1, MLP output 32x10 w.r.t. 64 inputs, reverse", jac_args,
                   [("hand", jacobian_b1_hand),
                    ("srcgrad", sg.jacobian(mlp_out, wrt=1, mode="reverse"))]
                   + ([("jax.jit", jax["jacrev"])] if jax else [])),
    }
    return table


def main(argv=None):
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    rounds = 3 if quick else 9
    table = workloads(np.random.default_rng(0))
    print(f"numpy {np.__version__}; one BLAS thread; median of {rounds} rounds\n")
    header = (f"{'workload':11s} {'candidate':9s} {'median':>12s} {'vs hand':>9s} "
              f"{'vs jax.jit':>11s} {'best':>12s} {'vs hand':>9s} {'vs jax.jit':>11s}")
    print(header)
    print("-" * len(header))
    for wname, (what, args, cands) in table.items():
        expected = cands[0][1](*args)
        for name, fn in cands:
            got = np.asarray(fn(*args))
            err = np.max(np.abs(got - expected)) / max(1e-300, np.max(np.abs(expected)))
            if not err < 1e-8:
                raise AssertionError(f"{wname}/{name}: relative error {err:.2e} against the hand version")
        times = interleaved_times(cands, args, rounds)
        for name, (med, best) in times.items():
            cols = []
            for k, t in ((0, med), (1, best)):
                vs_jax = (f"{t / times['jax.jit'][k]:10.2f}x" if "jax.jit" in times
                          else f"{'-':>11s}")
                cols.append(f"{t * 1e6:10.1f}us {t / times['hand'][k]:8.2f}x {vs_jax}")
            print(f"{wname:11s} {name:9s} {' '.join(cols)}")
        print(f"{'':11s} ({what})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
