"""The fusion pass (Note [Fused elementwise chains] in srcgrad.pipeline.fusion) on the
straight-line workloads: sg.grad on NumPy, with backend="numba" fused, and with
backend="numba" unfused (a second process, its own cache), one thread, float64:

    python benchmarks/bench_fusion.py

`fused on NumPy` runs the fused module's Python (the loop without numba) on NumPy: what
enabling the pass for NumPy would cost (it is off there).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ["SRCGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-fusion-")

import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import srcgrad as sg  # noqa: E402
from benchmarks.workloads import WORKLOADS, elementwise_inputs  # noqa: E402
from examples import elementwise  # noqa: E402
from srcgrad.pipeline import fusion, numba_variants  # noqa: E402


def best(fn, args, repeat=7) -> float:
    fn(*args)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return min(times)


def cases():
    for w in WORKLOADS:
        yield w.name, w.loss, w.wrt, tuple(w.make_inputs().values())
    for n in (10**3, 10**4):
        yield f"elementwise_{n:.0e}", elementwise.f, ("x",), tuple(elementwise_inputs(n)().values())


def numba_times(fused: bool) -> dict:
    """name -> (numba's time, its backend) with the pass on or off (numba taken even where
    slower, to time it)."""
    numba_variants.SLOWER = float("inf")
    if not fused:
        fusion.enabled = lambda fs: False
    out = {}
    for name, f, wrt, args in cases():
        g = sg.grad(f, wrt=wrt, backend="numba")
        t = best(g, args)
        (record,) = g.__srcgrad__.numba_records.values()
        out[name] = (t, record.backend)
    return out


def main():
    if sys.argv[1:] == ["--unfused"]:
        print(repr(numba_times(False)))
        return
    unfused = eval(subprocess.run([sys.executable, __file__, "--unfused"], check=True,  # noqa: S307
                                  capture_output=True, text=True).stdout.strip().splitlines()[-1])
    fused = numba_times(True)
    print("times in ms (best of 7), one thread")
    print(f"{'workload':24} {'NumPy':>9} {'numba fused':>12} {'numba unfused':>14} {'fused on NumPy':>15}")
    for name, f, wrt, args in cases():
        t_np = best(sg.grad(f, wrt=wrt), args)
        line = f"{name:24} {1e3 * t_np:9.3f} {1e3 * fused[name][0]:12.3f} {1e3 * unfused[name][0]:14.3f}"
        if name.startswith("elementwise_1e+0"):  # (not 1e6: a Python loop)
            g = sg.grad(f, wrt=wrt, backend="numba")
            g(*args)
            (record,) = g.__srcgrad__.numba_records.values()
            line += f" {1e3 * best(record.dispatcher.py_func, args, 2):15.3f}"
        print(line)


if __name__ == "__main__":
    main()
