"""Loops in compiled code: a vanilla RNN and a scalar Euler integrator.

    python benchmarks/bench_control.py [--quick]

Times, in one process with BLAS pinned to one thread, srcgrad's generated gradient
against a hand-written gradient of the same function (backpropagation through time
written out by hand; the integrator's adjoint with `math` on floats), and HIPS
autograd / torch when importable, and prints ratios to the hand-written one. Also
reports how long compiling the RNN loss takes for several sequence lengths T (it
must not grow with T: the loop is not unrolled).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import srcgrad as sg  # noqa: E402
from benchmarks.bench_jacobians import interleaved_times  # noqa: E402


# ---------------------------------------------------------------------- the functions
def rnn_loss(Wx, Wh, b, xs, y):
    """A vanilla tanh RNN over a sequence xs (T x batch x input); MSE on the last state."""
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.mean((h - y) ** 2)


def rnn_hand(Wx, Wh, b, xs, y):
    """Backpropagation through time, by hand."""
    hs = [np.zeros((xs.shape[1], Wh.shape[0]))]
    for t in range(xs.shape[0]):
        hs.append(np.tanh(xs[t] @ Wx + hs[-1] @ Wh + b))
    dh = 2.0 * (hs[-1] - y) / y.size
    gWx, gWh, gb = np.zeros_like(Wx), np.zeros_like(Wh), np.zeros_like(b)
    for t in range(xs.shape[0] - 1, -1, -1):
        da = dh * (1.0 - hs[t + 1] ** 2)
        gWx += xs[t].T @ da
        gWh += hs[t].T @ da
        gb += da.sum(axis=0)
        dh = da @ Wh.T
    return gWx, gWh, gb


def euler_loss(k, v0, dt):
    """A pendulum integrated by 200 explicit Euler steps, on Python floats."""
    x = 1.0
    v = v0
    for _ in range(200):
        a = -k * np.sin(x) - 0.1 * np.cos(x) * v
        x = x + dt * v
        v = v + dt * a
    return x * x + v * v


def euler_hand(k, v0, dt):
    """The adjoint of the integrator, by hand, with `math` on floats."""
    xs, vs = [1.0], [v0]
    x, v = 1.0, v0
    for _ in range(200):
        a = -k * math.sin(x) - 0.1 * math.cos(x) * v
        x, v = x + dt * v, v + dt * a
        xs.append(x)
        vs.append(v)
    gx, gv, gk, gdt = 2.0 * x, 2.0 * v, 0.0, 0.0
    for i in range(199, -1, -1):
        x, v = xs[i], vs[i]
        a = -k * math.sin(x) - 0.1 * math.cos(x) * v
        # v' = v + dt * a;  x' = x + dt * v
        gdt += gv * a + gx * v
        ga = gv * dt
        gk += -math.sin(x) * ga
        gx_new = gx + ga * (-k * math.cos(x) + 0.1 * math.sin(x) * v)
        gv = gv + gx * dt + ga * (-0.1 * math.cos(x))
        gx = gx_new
    return gk, gv, gdt


def euler_hand_numpy(k, v0, dt):
    """The same adjoint with NumPy's functions (what one writes for np.float64 inputs)."""
    xs, vs = [1.0], [v0]
    x, v = 1.0, v0
    for _ in range(200):
        a = -k * np.sin(x) - 0.1 * np.cos(x) * v
        x, v = x + dt * v, v + dt * a
        xs.append(x)
        vs.append(v)
    gx, gv, gk, gdt = 2.0 * x, 2.0 * v, 0.0, 0.0
    for i in range(199, -1, -1):
        x, v = xs[i], vs[i]
        a = -k * np.sin(x) - 0.1 * np.cos(x) * v
        gdt += gv * a + gx * v
        ga = gv * dt
        gk += -np.sin(x) * ga
        gx_new = gx + ga * (-k * np.cos(x) + 0.1 * np.sin(x) * v)
        gv = gv + gx * dt + ga * (-0.1 * np.cos(x))
        gx = gx_new
    return gk, gv, gdt


def newton_loss(a, n):
    """sqrt(a) by Newton's method, at most n steps: leaves when every step is tiny."""
    x = a * 1.0
    for _i in range(n):
        dx = (x * x - a) / (2.0 * x)
        x = x - dx
        if np.max(np.abs(dx)) < 1e-12:
            break
    return np.sum(x * x * x)


def newton_hand(a, n):
    """The same loop and its adjoint by hand (the steps that ran, in reverse)."""
    xs = [a * 1.0]
    for _ in range(n):
        x = xs[-1]
        dx = (x * x - a) / (2.0 * x)
        xs.append(x - dx)
        if np.max(np.abs(dx)) < 1e-12:
            break
    gx, ga = 3.0 * xs[-1] ** 2, np.zeros_like(a)
    for x in reversed(xs[:-1]):  # x' = x - (x*x - a) / (2x) = x / 2 + a / (2x)
        ga += gx / (2.0 * x)
        gx = gx * (0.5 - a / (2.0 * x * x))
    return (ga + gx,)


# ---------------------------------------------------------------------- timing
def median_us(fn, repeat):
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return statistics.median(t / number for t in timer.repeat(repeat, number)) * 1e6


def check(a, b):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-9)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args(argv).quick
    repeat, rounds = (3, 5) if quick else (9, 15)
    rng = np.random.default_rng(0)
    T, B, n_in, H = 50, 16, 32, 64
    rnn_args = (rng.standard_normal((n_in, H)) * 0.2, rng.standard_normal((H, H)) * 0.1,
                np.zeros(H), rng.standard_normal((T, B, n_in)), rng.standard_normal((B, H)))
    euler_args = (2.0, 0.3, 0.01)

    rows = []
    for name, loss, hand, args, wrt in (
            ("rnn T=50 h=64 b=16", rnn_loss, rnn_hand, rnn_args, (0, 1, 2)),
            ("euler 200 steps (floats)", euler_loss, euler_hand, euler_args, (0, 1, 2)),
            ("euler (np.float64, NumPy hand)", euler_loss, euler_hand_numpy,
             tuple(np.float64(a) for a in euler_args), (0, 1, 2))):
        g = sg.grad(loss, wrt=wrt)
        check(g(*args), hand(*args))
        candidates = [("hand", hand), ("srcgrad", g)]
        try:
            import autograd

            ag = autograd.grad(_autograd_version(loss), wrt)
            check(ag(*args), hand(*args))
            candidates.append(("autograd", ag))
        except ImportError:
            pass
        # the candidates take turns within each round: this machine's speed drifts over
        # seconds, and one candidate timed after another would be timed at another speed
        times = interleaved_times(candidates, args, rounds)
        rows.append({"name": name, **{c: best * 1e6 for c, (_, best) in times.items()}})

    print(f"least of {rounds} interleaved rounds, one BLAS thread")
    print(f"{'workload':30} {'hand us':>10} {'srcgrad us':>11} {'srcgrad/hand':>13} {'autograd/hand':>14}")
    for r in rows:
        ag = f"{r['autograd'] / r['hand']:.2f}x" if "autograd" in r else "n/a"
        print(f"{r['name']:30} {r['hand']:10.1f} {r['srcgrad']:11.1f} "
              f"{r['srcgrad'] / r['hand']:12.2f}x {ag:>14}")

    print("\nRNN gradient w.r.t. Wx, Wh, b and xs (xs[t] read in the loop), by sequence length T:")
    g = sg.grad(rnn_loss, wrt=(0, 1, 2, 3))
    for t_len in (50, 200, 800):
        xs = rng.standard_normal((t_len, B, n_in))
        args = (*rnn_args[:3], xs, rnn_args[4])
        us = median_us(lambda args=args: g(*args), repeat)
        hand_us = median_us(lambda args=args: rnn_hand(*args), repeat)
        print(f"  T={t_len:4d}: srcgrad {us / 1e3:7.2f} ms ({us / t_len:5.1f} us a step; "
              f"hand without xs {hand_us / 1e3:7.2f} ms)")

    print("\nNewton's method with break (converges in 8 steps), by its bound n:")
    a = np.linspace(1.0, 20.0, 64)
    g = sg.grad(newton_loss)
    check((g(a, 100_000),), newton_hand(a, 100_000))
    times = interleaved_times([("hand", lambda a: newton_hand(a, 100_000))] + [
        (bound, lambda a, bound=bound: g(a, bound)) for bound in (8, 1_000, 100_000)], (a,), rounds)
    hand_us = times["hand"][1] * 1e6
    for bound in (8, 1_000, 100_000):
        us = times[bound][1] * 1e6
        print(f"  n={bound:7d}: srcgrad {us:7.1f} us  ({us / hand_us:.2f}x hand, {hand_us:.1f} us)")

    print("\ncompile time of the RNN gradient (cache cleared each time), by sequence length:")
    for t_len in (10, 50, 500):
        xs = rng.standard_normal((t_len, B, n_in))
        times = []
        for _ in range(3):
            sg.cache_clear()
            g = sg.grad(rnn_loss, wrt=(0, 1, 2))
            start = time.perf_counter()
            g(rnn_args[0], rnn_args[1], rnn_args[2], xs, rnn_args[4])
            first = time.perf_counter() - start
            start = time.perf_counter()
            g(rnn_args[0], rnn_args[1], rnn_args[2], xs, rnn_args[4])
            times.append(first - (time.perf_counter() - start))
        print(f"  T={t_len:4d}: {statistics.median(times) * 1e3:6.1f} ms")


def _autograd_version(loss):
    import types

    import autograd.numpy as anp

    return types.FunctionType(loss.__code__, {**loss.__globals__, "np": anp}, loss.__name__)


if __name__ == "__main__":
    main()
