"""srcgrad on a GPU: `sg.grad` of the workloads on CuPy arrays, side by side with the
hand-written gradient run on the same CuPy arrays, torch on CUDA and `jax.jit` on the GPU.

    python benchmarks/bench_gpu.py [--only NAME[,NAME...]] [--rounds 15]

Needs CuPy and a CUDA device (exits with a message otherwise); torch and jax are peers
when they import and see a GPU. float64 throughout, as the CPU benchmarks. Per workload:

* every candidate's gradient is checked against the NumPy hand gradient on the CPU
  (relative error ≤ 1e-6) before it is timed: a wrong one is reported, not timed;
* *first call*: srcgrad's first call on CuPy arrays (the compile, and CuPy's kernels
  built on first use, which a fresh machine has not cached);
* the timings: median per-call time over interleaved rounds, each call followed by a
  device synchronisation (the work done, not the work queued); the hand gradient runs
  through NumPy's dispatch to CuPy (`np.tanh(cupy_array)` is CuPy's), the same text
  as on the CPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import workloads  # noqa: E402

AGREE_TOL = 1e-6
DEFAULT = ("logistic_64x32", "logistic_4096x512", "mlp_b32_32-64-10", "mlp_b1024_512-1024-10",
           "softmax_256x1000", "elementwise_1e6")


def _peers():
    """{name: module} of the peers that import and see a GPU."""
    peers = {}
    try:
        import torch
        if torch.cuda.is_available():
            peers["torch"] = torch
    except ImportError:
        pass
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        if any(d.platform == "gpu" for d in jax.devices()):
            import jax.numpy as jnp
            peers["jax"], peers["jnp"] = jax, jnp
    except (ImportError, RuntimeError):
        pass
    return peers


def candidates(wl, args, cp, sg, peers, notes):
    """{name: zero-argument callable returning the gradient tuple, the device synchronised}."""
    sync = cp.cuda.get_current_stream().synchronize
    gargs = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    sync()
    fns = {}

    def synced(fn, wait=sync):
        def call():
            out = fn()
            wait()
            return out
        return call

    fns["hand (CuPy)"] = synced(lambda: wl.hand(*gargs))
    g = sg.grad(wl.loss, wrt=wl.wrt)
    t = time.perf_counter()
    g(*gargs)
    sync()
    notes["srcgrad first call"] = f"{(time.perf_counter() - t) * 1e3:.0f} ms"
    fns["srcgrad"] = synced(lambda: g(*gargs))
    if "torch" in peers:
        torch = peers["torch"]
        ts = [torch.as_tensor(a, device="cuda") for a in args]
        for i in wl.argnums:
            ts[i].requires_grad_(True)
        wrt = [ts[i] for i in wl.argnums]
        loss_t = wl.loss_torch(torch)
        fns["torch (CUDA)"] = synced(lambda: torch.autograd.grad(loss_t(*ts), wrt), torch.cuda.synchronize)
    if "jax" in peers:
        jax, jnp = peers["jax"], peers["jnp"]
        jargs = [jax.device_put(jnp.asarray(a)) for a in args]
        g_jit = jax.jit(jax.grad(wl.loss_xp(jnp), argnums=wl.argnums))
        jax.block_until_ready(g_jit(*jargs))  # compile now
        fns["jax.jit (GPU)"] = lambda: jax.block_until_ready(g_jit(*jargs))
    return fns


def to_numpy(x, cp):
    if hasattr(x, "detach"):  # torch
        return x.detach().cpu().numpy()
    return cp.asnumpy(x) if isinstance(x, cp.ndarray) else np.asarray(x)


def verify(fns, reference, cp, notes):
    for name in list(fns):
        try:
            out = fns[name]()
            err = max(workloads.rel_err(to_numpy(o, cp), r) for o, r in zip(out, reference, strict=True))
            if err > AGREE_TOL:
                raise ValueError(f"differs from the CPU hand gradient: rel err {err:.2e}")
        except Exception as e:  # noqa: BLE001 - reported beside the table, not timed
            notes[name] = f"WRONG or failed: {type(e).__name__}: {e}"
            del fns[name]


def time_rounds(fns, rounds, target_s=0.02):
    numbers = {}
    for name, fn in fns.items():
        n = 1
        while timeit.Timer(fn).timeit(n) < target_s:
            n *= 2
        numbers[name] = n
    samples = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(timeit.Timer(fns[name]).timeit(numbers[name]) / numbers[name])
    return {name: statistics.median(s) for name, s in samples.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(DEFAULT))
    parser.add_argument("--rounds", type=int, default=15)
    a = parser.parse_args(argv)
    try:
        import cupy as cp
        device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as e:  # noqa: BLE001 - no CuPy, no driver, no device
        print(f"bench_gpu: no CuPy device ({type(e).__name__}: {e})")
        return 2
    import srcgrad as sg
    peers = _peers()
    print(f"device {device}; CuPy {cp.__version__}; NumPy {np.__version__}; peers: "
          + (", ".join(k for k in peers if k != "jnp") or "none"))
    print(f"{'workload':<24s} " + " ".join(f"{c:>14s}" for c in
                                            ("hand (CuPy)", "srcgrad", "torch (CUDA)", "jax.jit (GPU)"))
          + "   srcgrad/hand")
    for name in a.only.split(","):
        wl = workloads.BY_NAME[name]
        args = tuple(wl.make_inputs().values())
        notes = {}
        try:
            fns = candidates(wl, args, cp, sg, peers, notes)
            verify(fns, wl.hand(*args), cp, notes)
            times = time_rounds(fns, a.rounds)
        except Exception:  # noqa: BLE001 - one workload's failure does not hide the others
            print(f"{name}: failed\n{traceback.format_exc()}")
            continue
        cells = [f"{times[c] * 1e6:11.1f} us" if c in times else f"{'n/a':>14s}"
                 for c in ("hand (CuPy)", "srcgrad", "torch (CUDA)", "jax.jit (GPU)")]
        ratio = (f"{times['srcgrad'] / times['hand (CuPy)']:.2f}x"
                 if "srcgrad" in times and "hand (CuPy)" in times else "n/a")
        print(f"{name:<24s} " + " ".join(cells) + f"   {ratio}")
        for k, v in notes.items():
            print(f"    {k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
