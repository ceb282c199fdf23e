"""Custom Functions and saved-tensor hooks: what inlining a Function and the hook variant cost.

    python benchmarks/bench_functions.py [--quick]

Workload: logistic regression whose softplus is a custom `sg.autograd.Function` that saves
its input (`Softplus`), on X 64x32 (per-call overhead dominates) and X 4096x512.
One call is a forward and a backward: the loss and its gradients with respect to all four
arguments (w, b, X, y), as `sg.vjp` returns them (float64, fixed seed, one BLAS thread):

  hand              the closed form, written by hand
  builtin           sg.vjp of the same loss written with np.logaddexp (no custom Function)
  function          sg.vjp of the loss calling Softplus.apply: the hook-free variant
  function+hooks    the same inside saved_tensors_hooks(identity, identity): the hook variant
  function+grad     sg.grad of the loss calling Softplus.apply (one generated function)
  torch             torch.autograd.Function Softplus, forward + backward (when installed)
  torch+hooks       the same inside torch.autograd.graph.saved_tensors_hooks

"function" against "builtin" is the cost of a custom Function; "function+hooks" against
"function" the cost of packing and unpacking; with no hooks active nothing of the hook
machinery runs (DESIGN decision 6). Every result is checked against the hand-written one
before timing. The figure is the least over rounds of the mean time per call, the
candidates timed in turn within each round.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import srcgrad as sg  # noqa: E402
from benchmarks.bench_jacobians import interleaved_times  # noqa: E402
from srcgrad.autograd import Function  # noqa: E402
from srcgrad.autograd.graph import saved_tensors_hooks  # noqa: E402


class Softplus(Function):
    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return np.logaddexp(0.0, z)

    @staticmethod
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        return grad / (1.0 + np.exp(-z))


def loss_function(w, b, X, y):
    z = X @ w + b
    return np.mean(Softplus.apply(z) - y * z)


def loss_builtin(w, b, X, y):
    z = X @ w + b
    return np.mean(np.logaddexp(0.0, z) - y * z)


def hand(w, b, X, y):
    z = X @ w + b
    value = np.mean(np.logaddexp(0.0, z) - y * z)
    g = (1.0 / (1.0 + np.exp(-z)) - y) / z.size
    return value, X.T @ g, np.sum(g), np.outer(g, w), z * (-1.0 / z.size)


def vjp_call(f):
    def call(w, b, X, y):
        value, vjp_fn = sg.vjp(f, w, b, X, y)
        return (value, *vjp_fn(1.0))
    return call


def hooked(call):
    identity = (lambda t: t, lambda t: t)

    def run(*args):
        with saved_tensors_hooks(*identity):
            return call(*args)
    return run


def grad_call():
    g = sg.value_and_grad(loss_function, wrt=(0, 1, 2, 3))

    def call(w, b, X, y):
        value, grads = g(w, b, X, y)
        return (value, *grads)
    return call


def torch_candidates():
    try:
        import torch
    except ImportError:
        return []
    torch.set_num_threads(1)

    class TorchSoftplus(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return torch.logaddexp(torch.zeros((), dtype=z.dtype), z)

        @staticmethod
        def backward(ctx, grad):
            (z,) = ctx.saved_tensors
            return grad / (1.0 + torch.exp(-z))

    def call(w, b, X, y):
        leaves = [torch.from_numpy(a).requires_grad_() for a in (w, b, X, y)]
        w_t, b_t, X_t, y_t = leaves
        z = X_t @ w_t + b_t
        value = torch.mean(TorchSoftplus.apply(z) - y_t * z)
        grads = torch.autograd.grad(value, leaves)
        return (value.item(), *(g.numpy() for g in grads))

    def call_hooks(*args):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            return call(*args)

    return [("torch", call), ("torch+hooks", call_hooks)]


def main(argv=None):
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    rounds = 5 if quick else 15
    rng = np.random.default_rng(0)
    candidates = [("hand", hand), ("builtin", vjp_call(loss_builtin)),
                  ("function", vjp_call(loss_function)),
                  ("function+hooks", hooked(vjp_call(loss_function))),
                  ("function+grad", grad_call())] + torch_candidates()
    print(f"numpy {np.__version__}; one BLAS thread; least of {rounds} interleaved rounds\n")
    header = f"{'workload':18s} {'candidate':15s} {'time':>11s} {'vs hand':>8s} {'vs function':>12s}"
    print(header)
    print("-" * len(header))
    for n, d in ((64, 32), (4096, 512)):
        X = rng.standard_normal((n, d))
        y = (rng.random(n) < 0.5).astype(np.float64)
        args = (rng.standard_normal(d) / np.sqrt(d), np.array(0.1), X, y)
        expected = hand(*args)
        for name, fn in candidates:
            for got, want in zip(fn(*args), expected):
                np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9, atol=1e-12,
                                           err_msg=f"{name} disagrees with the hand-written gradient")
        # the candidates timed in turn within each round: this machine's speed drifts over
        # seconds, and one candidate's rounds after another's compared them at different
        # speeds (a "hand" timed in a slow spell once made sg.vjp look 0.8x of it)
        times = {name: best for name, (_, best) in interleaved_times(candidates, args, rounds).items()}
        for name, t in times.items():
            print(f"{f'logistic {n}x{d}':18s} {name:15s} {t * 1e6:9.1f}us {t / times['hand']:7.2f}x "
                  f"{t / times['function']:11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
