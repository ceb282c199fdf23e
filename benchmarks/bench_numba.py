"""backend="numba" against NumPy and jax.jit(jax.grad), on four programs as a NumPy user
writes them (issue 33):

    python benchmarks/bench_numba.py [--quick]
    PYTHONPATH=. /work/peers/bin/python benchmarks/bench_numba.py   # with jax

* RK4 Lotka-Volterra, `while t < T`, 1000 steps, the gradient w.r.t. its 4 parameters;
* 1-D reaction-diffusion, 128 cells, 200 steps, `u[1:-1] += ...`, `u[0] = u[1]`;
* 32 particles, pairwise soft forces, 50 leapfrog steps;
* an elementwise chain on 1e6 values, `tanh(x) * exp(-x*x) + sin(x)**2`.

For each: the NumPy primal, srcgrad's gradient on NumPy, srcgrad's with backend="numba",
and jax.jit(jax.grad) of the same program written with `jax.lax.fori_loop` and `.at[]`
when jax is importable; steady-state (the best of several runs) and first-call times
(srcgrad's cache is a fresh directory, so its first call compiles, and numba's with it;
jax's first call traces and compiles with XLA). One process, one thread, float64.

Then the disk cache across processes: a program computing the chain's gradient (1e3
values) runs in two fresh processes sharing one cache; the second's first call loads the
machine code. Beside it, numba's own floor: the first call of a one-line
`numba.njit(cache=True)` function loaded from numba's cache in a fresh process (numba
fills its typing and target registries on a process's first compile or load).
"""

from __future__ import annotations

import os
import tempfile

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ["SRCGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-numba-")  # first calls compile

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import srcgrad as sg  # noqa: E402
from examples import rk4  # noqa: E402

try:
    import jax  # noqa: E402

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp  # noqa: E402
except ImportError:
    jax = jnp = None


# ---------------------------------------------------------------------- the programs
lotka_volterra = rk4.loss  # RK4 on Lotka-Volterra, 1000 steps (examples/rk4.py: its golden module)


def reaction_diffusion(u0, D):
    """Fisher-KPP on 128 cells, 200 explicit steps, reflecting ends."""
    u = u0.copy()
    for _ in range(200):
        lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
        u[1:-1] += 0.1 * (D * lap + u[1:-1] * (1.0 - u[1:-1]))
        u[0] = u[1]
        u[-1] = u[-2]
    return np.sum(u * u)


def particles(x0, v0):
    """32 particles in 2-D, soft pairwise repulsion, 50 leapfrog steps of dt = 0.01."""
    x = x0
    v = v0
    for _ in range(50):
        d = x[:, None, :] - x[None, :, :]
        r2 = np.sum(d * d, axis=-1) + 0.1
        f = np.sum(d / (r2 * np.sqrt(r2))[:, :, None], axis=1)
        v = v + 0.005 * f
        x = x + 0.01 * v
        d = x[:, None, :] - x[None, :, :]
        r2 = np.sum(d * d, axis=-1) + 0.1
        f = np.sum(d / (r2 * np.sqrt(r2))[:, :, None], axis=1)
        v = v + 0.005 * f
    return np.sum(x * x) + 0.5 * np.sum(v * v)


def chain(x):
    return np.sum(np.tanh(x) * np.exp(-x * x) + np.sin(x) ** 2)


# ---------------------------------------------------------------------- the same, in jax
def _jax_programs():
    def lv_rhs(p, u):
        return jnp.stack([p[0] * u[0] - p[1] * u[0] * u[1], p[2] * u[0] * u[1] - p[3] * u[1]])

    def lv(p, u0):
        dt = 0.01

        def step(_, u):
            k1 = lv_rhs(p, u)
            k2 = lv_rhs(p, u + 0.5 * dt * k1)
            k3 = lv_rhs(p, u + 0.5 * dt * k2)
            k4 = lv_rhs(p, u + dt * k3)
            return u + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        u = jax.lax.fori_loop(0, 1000, step, u0)
        return jnp.sum(u * u)

    def rd(u0, D):
        def step(_, u):
            lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
            u = u.at[1:-1].add(0.1 * (D * lap + u[1:-1] * (1.0 - u[1:-1])))
            u = u.at[0].set(u[1])
            return u.at[-1].set(u[-2])
        u = jax.lax.fori_loop(0, 200, step, u0)
        return jnp.sum(u * u)

    def force(x):
        d = x[:, None, :] - x[None, :, :]
        r2 = jnp.sum(d * d, axis=-1) + 0.1
        return jnp.sum(d / (r2 * jnp.sqrt(r2))[:, :, None], axis=1)

    def pt(x0, v0):
        def step(_, s):
            x, v = s
            v = v + 0.005 * force(x)
            x = x + 0.01 * v
            return x, v + 0.005 * force(x)
        x, v = jax.lax.fori_loop(0, 50, step, (x0, v0))
        return jnp.sum(x * x) + 0.5 * jnp.sum(v * v)

    def ch(x):
        return jnp.sum(jnp.tanh(x) * jnp.exp(-x * x) + jnp.sin(x) ** 2)

    return {"lotka_volterra": lv, "reaction_diffusion": rd, "particles": pt, "chain": ch}


def workloads(quick: bool):
    rng = np.random.default_rng(0)
    n = 10**5 if quick else 10**6
    return [
        ("RK4 Lotka-Volterra (1000 steps, 4 params)", "lotka_volterra", lotka_volterra, 0,
         (np.array([1.1, 0.4, 0.1, 0.4]), np.array([10.0, 5.0]))),
        ("reaction-diffusion (128 cells, 200 steps)", "reaction_diffusion", reaction_diffusion, (0, 1),
         (rng.uniform(0.1, 0.9, 128), 0.2)),
        ("32 particles, 50 leapfrog steps", "particles", particles, (0, 1),
         (rng.standard_normal((32, 2)), 0.1 * rng.standard_normal((32, 2)))),
        (f"elementwise chain ({n:.0e} values)", "chain", chain, 0, (rng.standard_normal(n),)),
    ]


# ---------------------------------------------------------------------- timing
def first_and_best(fn, args, repeat: int):
    t = time.perf_counter()
    out = fn(*args)
    first = time.perf_counter() - t
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t)
    return out, first, best


def _leaves(g):
    return [np.asarray(a) for a in (g if isinstance(g, tuple) else (g,))]


def max_rel_diff(a, b) -> float:
    return max(float(np.max(np.abs(x - y)) / max(float(np.max(np.abs(y))), 1e-300))
               for x, y in zip(_leaves(a), _leaves(b)))


# ---------------------------------------------------------------------- a second process
_USER = """
import numpy as np

def chain(x):
    return np.sum(np.tanh(x) * np.exp(-x * x) + np.sin(x) ** 2)

def one_line(x):  # numba's floor: the same load, without srcgrad
    return np.sum(np.tanh(x) * 2.0)
"""

_CHILD = """
import sys, time
import numpy as np
t = time.perf_counter()
import numba
t_numba = time.perf_counter() - t
import srcgrad as sg
import user
x = np.linspace(-2.0, 2.0, 1000)
if sys.argv[1] == "srcgrad":
    fn = sg.grad(user.chain, backend="numba")
else:
    fn = numba.njit(cache=True)(user.one_line)
t = time.perf_counter()
fn(x)
first = time.perf_counter() - t
if sys.argv[1] == "srcgrad":
    (record,) = fn.__srcgrad__.numba_records.values()
    fn = record.dispatcher
print(t_numba, first, sum(fn.stats.cache_hits.values()))
"""


def second_process() -> None:
    """Print the first call of a fresh process whose srcgrad and numba caches are warm."""
    work = Path(tempfile.mkdtemp(prefix="bench-numba-second-"))
    (work / "user.py").write_text(_USER)
    env = {**os.environ, "SRCGRAD_CACHE_DIR": str(work / "cache"), "NUMBA_CACHE_DIR": str(work / "nb"),
           "PYTHONPATH": os.pathsep.join([str(work), str(Path(__file__).resolve().parent.parent)])}

    def child(kind):
        out = subprocess.run([sys.executable, "-c", _CHILD, kind], env=env, cwd=work, check=True,
                             capture_output=True, text=True).stdout.split()
        return float(out[0]), float(out[1]), int(out[2])

    print("\na fresh process's first call, its caches warm (ms; import numba / first call / cache hits)")
    for kind, label in (("srcgrad", "sg.grad(chain, backend='numba')"),
                        ("numba", "numba.njit(cache=True), one line")):
        child(kind)  # the first process compiles and writes the caches
        runs = [child(kind) for _ in range(3)]
        t_numba, first, hits = min(runs, key=lambda r: r[1])
        print(f"  {label:34s} {1e3 * t_numba:6.0f} / {1e3 * first:6.1f} / {hits}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, 1e5 chain values")
    args = parser.parse_args(argv)
    repeat = 3 if args.quick else 10
    jaxed = _jax_programs() if jax is not None else {}
    print(f"numpy {np.__version__}, srcgrad {sg.__version__}"
          + (f", jax {jax.__version__}" if jax is not None else ", jax not importable"))
    print("times in ms: steady (best of runs) / first call; ratios of steady times")
    rows = []
    for label, name, f, wrt, inputs in workloads(args.quick):
        _, primal_first, primal = first_and_best(f, inputs, repeat)
        g_np, np_first, np_best = first_and_best(sg.grad(f, wrt=wrt), inputs, repeat)
        g = sg.grad(f, wrt=wrt, backend="numba")
        g_nb, nb_first, nb_best = first_and_best(g, inputs, repeat)
        line = sg.explain(g).splitlines()[-1].strip()
        row = {"label": label, "primal": primal, "np": np_best, "np_first": np_first,
               "nb": nb_best, "nb_first": nb_first, "diff": max_rel_diff(g_nb, g_np), "how": line}
        if name in jaxed:
            jg = jax.jit(jax.grad(jaxed[name], argnums=wrt))
            jargs = tuple(jnp.asarray(a) for a in inputs)

            def run(*a, jg=jg):
                return jax.block_until_ready(jg(*a))
            g_jax, row["jax_first"], row["jax"] = first_and_best(run, jargs, repeat)
            row["jax_diff"] = max_rel_diff(tuple(np.asarray(a) for a in _leaves(g_jax)), g_np)
        rows.append(row)
    for r in rows:
        print(f"\n{r['label']}")
        print(f"  NumPy primal            {1e3 * r['primal']:9.3f}")
        print(f"  srcgrad (NumPy)         {1e3 * r['np']:9.3f} / {1e3 * r['np_first']:9.1f} first")
        print(f"  srcgrad (numba)         {1e3 * r['nb']:9.3f} / {1e3 * r['nb_first']:9.1f} first"
              f"   [{r['how']}; max rel diff to NumPy's {r['diff']:.1e}]")
        if "jax" in r:
            print(f"  jax.jit(jax.grad)       {1e3 * r['jax']:9.3f} / {1e3 * r['jax_first']:9.1f} first"
                  f"   [max rel diff to srcgrad's {r['jax_diff']:.1e}]")
        ratios = f"  numba / NumPy gradient: {r['nb'] / r['np']:.2f}x"
        if "jax" in r:
            ratios += (f"; numba / jax: {r['nb'] / r['jax']:.2f}x"
                       f"; srcgrad NumPy / jax: {r['np'] / r['jax']:.2f}x")
        print(ratios)
    second_process()


if __name__ == "__main__":
    main()
