"""Benchmark workloads: inputs, the loss srcgrad differentiates, a hand-written gradient.

Each `Workload` carries
  * `make_inputs()`: float64 inputs from a fixed seed, as a dict in the loss's argument order;
  * `loss`: the plain-NumPy loss, imported from `examples/` (the code srcgrad compiles);
  * `wrt`: the argument names differentiated, always a tuple (so every gradient is a tuple);
  * `hand`: the gradient written by hand the way an expert would (fused, nothing computed
    that is not needed), same signature as `loss`, returning a tuple in `wrt` order;
  * the same loss for the peers: `loss_xp(xp)` for NumPy-like namespaces (HIPS autograd's
    `autograd.numpy`, `jax.numpy`) and `loss_torch(torch)`; each has the same text as `loss`.

`check()` verifies every hand gradient against finite differences and against HIPS
autograd, and that every peer's loss computes the same value (run `benchmarks/check_hand.py`).

Loss forms (n = batch rows):
  logistic      z = X @ w + b;  mean(logaddexp(0, z) - y * z)          wrt w, b     y in {0, 1}
  mlp           h = tanh(X @ W1 + b1); out = h @ W2 + b2;  mean((out - y) ** 2)
                (mean over all n x 10 entries)                         wrt W1, b1, W2, b2
  softmax       logits given (256 x 1000), Y one-hot:
                s = logits - max(logits, axis=1, keepdims=True)
                logp = s - log(sum(exp(s), axis=1, keepdims=True));  mean(-sum(Y * logp, axis=1))
                                                                       wrt logits
  elementwise   sum(sin(x) * exp(-x * x) + tanh(x) ** 2),  x of 10**6 values   wrt x
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from examples import elementwise as ex_elementwise
from examples import logistic as ex_logistic
from examples import mlp as ex_mlp
from examples import softmax as ex_softmax


@dataclass(frozen=True)
class Workload:
    name: str
    family: str  # "logistic" | "mlp" | "softmax" | "elementwise"
    description: str
    make_inputs: Callable[[], dict[str, np.ndarray]]  # keys in `loss`'s argument order
    loss: Callable  # plain NumPy; what srcgrad differentiates
    wrt: tuple[str, ...]
    hand: Callable  # same signature as loss -> tuple of gradients in `wrt` order
    loss_xp: Callable  # (numpy-like namespace) -> the same loss written with it
    loss_torch: Callable  # (torch module) -> the same loss written in torch

    @property
    def argnums(self) -> tuple[int, ...]:
        names = list(inspect.signature(self.loss).parameters)
        return tuple(names.index(w) for w in self.wrt)


# --------------------------------------------------------------------------- logistic

def logistic_inputs(n, d, seed=0):
    def make():
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, d))
        w_true = rng.standard_normal(d) / np.sqrt(d)
        y = (X @ w_true + 0.5 * rng.standard_normal(n) > 0).astype(np.float64)
        w = 0.1 * rng.standard_normal(d)
        b = np.array(0.1)  # a 0-d float64 array
        return {"w": w, "b": b, "X": X, "y": y}
    return make


def logistic_hand(w, b, X, y):
    z = X @ w + b
    r = 1.0 / (1.0 + np.exp(-z))  # sigmoid(z) = d logaddexp(0, z) / dz
    r -= y
    r *= 1.0 / len(y)
    return X.T @ r, r.sum()


def logistic_xp(xp):
    def loss(w, b, X, y):
        z = X @ w + b
        return xp.mean(xp.logaddexp(0.0, z) - y * z)
    return loss


def logistic_torch(torch):
    def loss(w, b, X, y):
        z = X @ w + b
        return torch.mean(torch.logaddexp(z.new_zeros(()), z) - y * z)
    return loss


# --------------------------------------------------------------------------- mlp

def mlp_inputs(n, n_in, n_hidden, n_out, seed=0):
    def make():
        rng = np.random.default_rng(seed)
        W1, b1, W2, b2 = ex_mlp.init_params(rng, n_in, n_hidden, n_out)
        b1 = 0.1 * rng.standard_normal(n_hidden)  # nonzero biases: exercise the full path
        b2 = 0.1 * rng.standard_normal(n_out)
        X = rng.standard_normal((n, n_in))
        y = rng.standard_normal((n, n_out))
        return {"W1": W1, "b1": b1, "W2": W2, "b2": b2, "X": X, "y": y}
    return make


def mlp_hand(W1, b1, W2, b2, X, y):
    h = X @ W1
    h += b1
    np.tanh(h, out=h)
    d_out = h @ W2
    d_out += b2
    d_out -= y
    d_out *= 2.0 / d_out.size  # d mean((out - y)**2) / d out
    gW2 = h.T @ d_out
    d_a = d_out @ W2.T
    h *= h  # h is not needed any more: reuse its buffer for tanh' = 1 - tanh^2
    np.subtract(1.0, h, out=h)
    d_a *= h
    return X.T @ d_a, d_a.sum(axis=0), gW2, d_out.sum(axis=0)


def mlp_xp(xp):
    def loss(W1, b1, W2, b2, X, y):
        h = xp.tanh(X @ W1 + b1)
        out = h @ W2 + b2
        return xp.mean((out - y) ** 2)
    return loss


def mlp_torch(torch):
    def loss(W1, b1, W2, b2, X, y):
        h = torch.tanh(X @ W1 + b1)
        out = h @ W2 + b2
        return torch.mean((out - y) ** 2)
    return loss


# --------------------------------------------------------------------------- softmax

def softmax_inputs(n, k, seed=0):
    def make():
        rng = np.random.default_rng(seed)
        logits = 3.0 * rng.standard_normal((n, k))
        Y = np.eye(k)[rng.integers(0, k, size=n)]
        return {"logits": logits, "Y": Y}
    return make


def softmax_hand(logits, Y):
    # (softmax(logits) - Y) / n; this uses that each row of Y sums to 1 (one-hot labels).
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p -= Y
    p *= 1.0 / len(Y)
    return (p,)


def softmax_xp(xp):
    def xent(logits, Y):
        shifted = logits - xp.max(logits, axis=1, keepdims=True)
        logp = shifted - xp.log(xp.sum(xp.exp(shifted), axis=1, keepdims=True))
        return xp.mean(-xp.sum(Y * logp, axis=1))
    return xent


def softmax_torch(torch):
    def xent(logits, Y):
        shifted = logits - torch.amax(logits, dim=1, keepdim=True)
        logp = shifted - torch.log(torch.sum(torch.exp(shifted), dim=1, keepdim=True))
        return torch.mean(-torch.sum(Y * logp, dim=1))
    return xent


# --------------------------------------------------------------------------- elementwise

def elementwise_inputs(n, seed=0):
    def make():
        rng = np.random.default_rng(seed)
        return {"x": 1.5 * rng.standard_normal(n)}
    return make


def elementwise_hand(x):
    # d/dx sin(x) exp(-x^2) = exp(-x^2) (cos x - 2x sin x);  d/dx tanh^2 = 2 tanh (1 - tanh^2)
    g = np.sin(x)
    g *= x
    g *= -2.0
    g += np.cos(x)
    g *= np.exp(-x * x)
    t = np.tanh(x)
    u = t * t
    u -= 1.0
    u *= t
    u *= -2.0
    g += u
    return (g,)


def elementwise_xp(xp):
    def f(x):
        return xp.sum(xp.sin(x) * xp.exp(-x * x) + xp.tanh(x) ** 2)
    return f


def elementwise_torch(torch):
    def f(x):
        return torch.sum(torch.sin(x) * torch.exp(-x * x) + torch.tanh(x) ** 2)
    return f


# --------------------------------------------------------------------------- the list

_LOGISTIC = "z = X @ w + b; mean(logaddexp(0, z) - y*z)"
_MLP = "h = tanh(X @ W1 + b1); mean((h @ W2 + b2 - y)**2)"
_SOFTMAX = "logits given, one-hot Y; mean(-sum(Y * log_softmax(logits), axis=1))"
_ELEMENTWISE = "sum(sin(x) * exp(-x*x) + tanh(x)**2)"


def _logistic(name, n, d):
    return Workload(name, "logistic", f"{_LOGISTIC}; X {n}x{d}", logistic_inputs(n, d),
                    ex_logistic.loss, ("w", "b"), logistic_hand, logistic_xp, logistic_torch)


def _mlp(name, n, n_in, n_hidden, n_out):
    return Workload(name, "mlp", f"{_MLP}; batch {n}, {n_in}->{n_hidden}->{n_out}",
                    mlp_inputs(n, n_in, n_hidden, n_out), ex_mlp.loss,
                    ("W1", "b1", "W2", "b2"), mlp_hand, mlp_xp, mlp_torch)


WORKLOADS: list[Workload] = [
    _logistic("logistic_64x32", 64, 32),
    _logistic("logistic_4096x512", 4096, 512),
    _mlp("mlp_b32_32-64-10", 32, 32, 64, 10),
    _mlp("mlp_b1024_512-1024-10", 1024, 512, 1024, 10),
    Workload("softmax_256x1000", "softmax", f"{_SOFTMAX}; logits 256x1000",
             softmax_inputs(256, 1000), ex_softmax.xent, ("logits",), softmax_hand,
             softmax_xp, softmax_torch),
    Workload("elementwise_1e6", "elementwise", f"{_ELEMENTWISE}; x of 10**6 values",
             elementwise_inputs(10**6), ex_elementwise.f, ("x",), elementwise_hand,
             elementwise_xp, elementwise_torch),
]

BY_NAME = {w.name: w for w in WORKLOADS}


# --------------------------------------------------------------------------- checking

def rel_err(a, b):
    """max |a - b| / max |b| (plain absolute error where b is all zeros)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = np.max(np.abs(b)) if b.size else 0.0
    diff = np.max(np.abs(a - b)) if b.size else 0.0
    return diff / scale if scale > 0 else diff


def directional_fd(f, args, argnums, directions, h=1e-4):
    """Fourth-order central difference of f along `directions` (one per argnum).

    Error O(h^4 f''''') + O(eps |f| / h): about 1e-12 relative for these losses at h=1e-4.
    """
    def at(t):
        moved = list(args)
        for i, v in zip(argnums, directions, strict=True):
            moved[i] = args[i] + t * v
        return f(*moved)
    return (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)


def check(workloads=None, tol=1e-6, n_dirs=2, seed=1, verbose=True):
    """Verify hand gradients (finite differences + HIPS autograd) and peer losses' values.

    Returns a list of (workload, check, relative error, ok) rows; `ok` is err <= tol.
    Peers (torch, jax) are checked when importable.
    """
    import autograd
    import autograd.numpy as anp

    peers = _importable_peers()
    rows = []

    def record(wl, what, err):
        ok = bool(err <= tol)
        rows.append((wl.name, what, float(err), ok))
        if verbose:
            print(f"  {'ok ' if ok else 'FAIL'} {what:<34s} rel err {err:.2e}")

    for wl in workloads if workloads is not None else WORKLOADS:
        if verbose:
            print(f"{wl.name}: {wl.description}")
        inputs = wl.make_inputs()
        args = tuple(inputs.values())
        snapshot = [a.copy() for a in args]
        hand = wl.hand(*args)
        for a, s in zip(args, snapshot, strict=True):
            assert np.array_equal(a, s), f"{wl.name}: hand gradient mutated its inputs"
        assert len(hand) == len(wl.wrt)
        for g, i in zip(hand, wl.argnums, strict=True):
            assert np.shape(g) == np.shape(args[i]), (wl.name, np.shape(g), np.shape(args[i]))

        # 1. finite differences: each wrt argument alone, then all of them together.
        rng = np.random.default_rng(seed)
        groups = [(i,) for i in wl.argnums] + ([wl.argnums] if len(wl.argnums) > 1 else [])
        for group in groups:
            for _ in range(n_dirs):
                dirs = [rng.standard_normal(np.shape(args[i])) for i in group]
                fd = directional_fd(wl.loss, args, group, dirs)
                an = sum(float(np.sum(hand[wl.argnums.index(i)] * v))
                         for i, v in zip(group, dirs, strict=True))
                label = "fd d/d(" + ",".join(wl.wrt[wl.argnums.index(i)] for i in group) + ")"
                record(wl, label, abs(fd - an) / max(abs(fd), abs(an), 1e-300))

        # 2. HIPS autograd on the same loss written with autograd.numpy.
        loss_anp = wl.loss_xp(anp)
        record(wl, "loss value: autograd == numpy", rel_err(loss_anp(*args), wl.loss(*args)))
        ag = autograd.grad(loss_anp, wl.argnums)(*args)
        for name, g, a in zip(wl.wrt, hand, ag, strict=True):
            record(wl, f"hand vs autograd d/d{name}", rel_err(g, a))

        # 3. The peers compute the same loss and gradient (so run.py compares like with like).
        value = wl.loss(*args)
        if "torch" in peers:
            torch = peers["torch"]
            ts = [torch.from_numpy(a) for a in args]
            for i in wl.argnums:
                ts[i].requires_grad_(True)
            out = wl.loss_torch(torch)(*ts)
            tg = torch.autograd.grad(out, [ts[i] for i in wl.argnums])
            record(wl, "loss value: torch == numpy", rel_err(out.item(), value))
            for name, g, t in zip(wl.wrt, hand, tg, strict=True):
                record(wl, f"hand vs torch d/d{name}", rel_err(g, t.numpy()))
        if "jax" in peers:
            jax, jnp = peers["jax"], peers["jnp"]
            jargs = [jnp.asarray(a) for a in args]
            loss_j = wl.loss_xp(jnp)
            record(wl, "loss value: jax == numpy", rel_err(float(loss_j(*jargs)), value))
            jg = jax.grad(loss_j, argnums=wl.argnums)(*jargs)
            for name, g, t in zip(wl.wrt, hand, jg, strict=True):
                record(wl, f"hand vs jax d/d{name}", rel_err(g, np.asarray(t)))
    return rows


def _importable_peers():
    """torch and jax (float64) when importable; {} entries are simply missing otherwise."""
    peers = {}
    try:
        import torch
        peers["torch"] = torch
    except ImportError:
        pass
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        peers["jax"], peers["jnp"] = jax, jnp
    except ImportError:
        pass
    return peers
