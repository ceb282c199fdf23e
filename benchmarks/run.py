"""Time srcgrad's gradients against hand-written NumPy and peers, one workload at a time.

    python benchmarks/run.py [--quick] [--only NAME[,NAME...]] [--json OUT] [--no-latency]

Per workload, in one process: the hand-written gradient, `sg.grad(loss, wrt=...)`
(compiled before timing), and the peers that import: HIPS autograd, torch (CPU, float64,
one thread), jax without jit and with `jax.jit` (float64). Every candidate's gradient is
checked against the hand-written one before it is timed. Each timing sample is a loop of
calls long enough to measure (autorange-style), candidates alternate within every round,
and the reported figure is the median per-call time over the rounds. See README.md.
"""

import os

# Pin every thread pool to one thread *before* numpy (or any peer) is imported: BLAS
# reads these once, at load time. Single-threaded timings compare the work each
# candidate does, not how well each library's threading suits this machine.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
                           " intra_op_parallelism_threads=1").strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The variables above do not bind every pool (XLA's CPU runtime ignores its flags in recent
# jax and sizes its pool by core count), so also bind the process, and the fresh processes
# it starts, to one core: whatever threads a library starts then share that core.
PINNED_CPU = None
if hasattr(os, "sched_setaffinity"):
    PINNED_CPU = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {PINNED_CPU})

import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks import workloads  # noqa: E402

CANDIDATES = ("hand", "srcgrad", "autograd", "torch", "jax", "jax.jit")
AGREE_TOL = 1e-6  # relative; a candidate that disagrees with the hand gradient is not timed
LATENCY_WORKLOAD = "mlp_b32_32-64-10"


# --------------------------------------------------------------------------- libraries

def load_libraries():
    """Import srcgrad and the peers; {name: module or None} and {name: why it is n/a}."""
    libs, missing = {}, {}
    try:
        import srcgrad as sg
        for attr in ("grad", "cache_clear"):
            if not hasattr(sg, attr):
                raise AttributeError(f"srcgrad has no {attr!r} yet")
        libs["srcgrad"] = sg
    except Exception as e:  # ImportError, AttributeError, or a half-landed package
        missing["srcgrad"] = f"{type(e).__name__}: {e}"
    try:
        import autograd
        import autograd.numpy as anp
        libs["autograd"], libs["anp"] = autograd, anp
    except ImportError as e:
        missing["autograd"] = str(e)
    try:
        import torch
        torch.set_num_threads(1)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # only settable before torch starts any parallel work
            pass
        libs["torch"] = torch
    except ImportError as e:
        missing["torch"] = str(e)
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        libs["jax"], libs["jnp"] = jax, jnp
    except ImportError as e:
        missing["jax"] = str(e)
    return libs, missing


def build_candidates(wl, args, libs):
    """{candidate: zero-argument callable returning the gradient tuple} plus error notes.

    Everything that happens once (compiling, converting inputs, jit) happens here, outside
    the timed calls.
    """
    fns, notes = {"hand": lambda: wl.hand(*args)}, {}
    argnums = wl.argnums

    if "srcgrad" in libs:
        try:
            g = libs["srcgrad"].grad(wl.loss, wrt=wl.wrt)
            g(*args)  # compile (or load) now, not in the timed loop
            fns["srcgrad"] = lambda: g(*args)
        except Exception as e:
            notes["srcgrad"] = f"{type(e).__name__}: {e}"

    if "autograd" in libs:
        g_ag = libs["autograd"].grad(wl.loss_xp(libs["anp"]), argnums)
        fns["autograd"] = lambda: g_ag(*args)

    if "torch" in libs:
        torch = libs["torch"]
        ts = [torch.from_numpy(a) for a in args]  # shares memory; float64 stays float64
        for i in argnums:
            ts[i].requires_grad_(True)
        wrt_ts = [ts[i] for i in argnums]
        loss_t = wl.loss_torch(torch)
        fns["torch"] = lambda: torch.autograd.grad(loss_t(*ts), wrt_ts)

    if "jax" in libs:
        jax, jnp = libs["jax"], libs["jnp"]
        jargs = [jax.block_until_ready(jnp.asarray(a)) for a in args]
        g_j = jax.grad(wl.loss_xp(jnp), argnums=argnums)
        g_jit = jax.jit(g_j)
        jax.block_until_ready(g_jit(*jargs))  # compile now
        fns["jax"] = lambda: jax.block_until_ready(g_j(*jargs))
        fns["jax.jit"] = lambda: jax.block_until_ready(g_jit(*jargs))
    return fns, notes


def as_numpy(x):
    if hasattr(x, "detach"):  # torch
        return x.detach().numpy()
    return np.asarray(x)


def verify(fns, notes, reference):
    """Drop (with a note) every candidate whose gradient differs from the hand-written one."""
    for name in list(fns):
        if name == "hand":
            continue
        try:
            out = fns[name]()
            if not isinstance(out, tuple | list) or len(out) != len(reference):
                raise ValueError(f"returned {type(out).__name__} of length "
                                 f"{len(out) if hasattr(out, '__len__') else '?'}, "
                                 f"expected a tuple of {len(reference)}")
            errs = [workloads.rel_err(as_numpy(o), r) for o, r in zip(out, reference, strict=True)]
            if max(errs) > AGREE_TOL:
                raise ValueError(f"gradient differs from hand-written: rel err {max(errs):.2e}")
        except Exception as e:
            notes[name] = f"WRONG: {type(e).__name__}: {e}"
            del fns[name]


# --------------------------------------------------------------------------- timing

def calibrate(fn, target_s):
    """The number of calls per sample so that a sample lasts at least target_s."""
    number = 1
    while True:
        t = timeit.Timer(fn).timeit(number)
        if t >= target_s:
            return number
        # aim 20% past the target from the measured rate; at least double
        number = max(2 * number, int(number * 1.2 * target_s / max(t, 1e-9)))


def time_interleaved(fns, rounds, target_s):
    """Median per-call seconds per candidate; candidates alternate inside every round.

    Round r runs the candidates in an order rotated by r (and reversed on odd rounds), so
    no candidate always runs first, last or right after the same neighbour: slow drift
    (thermal, frequency, other tenants) spreads over all of them instead of biasing one.
    """
    names = list(fns)
    numbers = {n: calibrate(fns[n], target_s) for n in names}
    samples = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        if r % 2:
            order.reverse()
        for n in order:
            samples[n].append(timeit.Timer(fns[n]).timeit(numbers[n]) / numbers[n])
    return {n: statistics.median(s) for n, s in samples.items()}, samples, numbers


# --------------------------------------------------------------------------- srcgrad latency

_DISK_HIT_SCRIPT = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
t = time.perf_counter()
import srcgrad as sg
t_import = time.perf_counter() - t
from benchmarks import workloads
wl = workloads.BY_NAME[sys.argv[2]]
args = tuple(wl.make_inputs().values())
wl.hand(*args)  # warm NumPy/BLAS first so their one-time setup is not charged to srcgrad
t0 = time.perf_counter()
g = sg.grad(wl.loss, wrt=wl.wrt)
g(*args)
first = time.perf_counter() - t0
warm = []
for _ in range(25):
    t = time.perf_counter()
    g(*args)
    warm.append(time.perf_counter() - t)
print(json.dumps({"first": first, "warm": statistics.median(warm), "import": t_import}))
"""


def _cache_listing(cache_dir):
    return {str(p.relative_to(cache_dir)): p.stat().st_mtime_ns
            for p in Path(cache_dir).rglob("*") if p.is_file()}


def _warm_median(g, args, n=25):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        g(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def srcgrad_latency(sg, cache_dir, runs):
    """First-compile latency (in process) and disk-cache-hit latency (fresh processes)."""
    wl = workloads.BY_NAME[LATENCY_WORKLOAD]
    args = tuple(wl.make_inputs().values())
    wl.hand(*args)
    result = {"workload": wl.name}

    compile_s = []
    for _ in range(runs):
        sg.cache_clear()
        t0 = time.perf_counter()
        g = sg.grad(wl.loss, wrt=wl.wrt)
        g(*args)
        first = time.perf_counter() - t0
        compile_s.append(first - _warm_median(g, args))
    result["compile_s"] = statistics.median(compile_s)
    result["compile_runs_s"] = compile_s

    # The last iteration above left the module on disk; fresh processes should only load it.
    before = _cache_listing(cache_dir)
    result["disk_cache_files"] = len(before)
    hits, imports, errors = [], [], []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-c", _DISK_HIT_SCRIPT, str(ROOT), wl.name],
            env=dict(os.environ), cwd=str(ROOT), capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            errors.append(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip()
                          else f"exit {proc.returncode}")
            continue
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        hits.append(out["first"] - out["warm"])
        imports.append(out["import"])
    if hits:
        result["disk_hit_s"] = statistics.median(hits)
        result["disk_hit_runs_s"] = hits
        result["import_srcgrad_s"] = statistics.median(imports)
    if errors:
        result["disk_hit_errors"] = errors
    after = _cache_listing(cache_dir)
    # A hit reads the cache; a miss in the child would write (or rewrite) a module.
    result["disk_cache_unchanged"] = before == after
    return result


# --------------------------------------------------------------------------- reporting

def fmt_us(seconds):
    if seconds is None:
        return "n/a"
    us = seconds * 1e6
    return f"{us:,.1f}" if us < 1e4 else f"{us:,.0f}"


def fmt_ratio(num, den):
    if num is None or den is None:
        return "n/a"
    return f"{num / den:.2f}x"


def print_table(rows, headers):
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                     for i, (h, w) in enumerate(zip(headers, widths, strict=True)))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))


def environment(libs):
    env = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "threads": {v: os.environ.get(v) for v in
                    ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
    }
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        env["blas"] = f"{blas.get('name')} {blas.get('version', '')}".strip()
    except Exception:
        pass
    env["pinned_cpu"] = PINNED_CPU
    for name in ("srcgrad", "autograd", "torch", "jax"):
        if name in libs:
            env[name] = getattr(libs[name], "__version__", None) or _dist_version(name)
    return env


def _dist_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


# --------------------------------------------------------------------------- main

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="short samples and few rounds: a smoke run, not a measurement")
    parser.add_argument("--only", help="comma-separated workload names (see --list)")
    parser.add_argument("--json", metavar="OUT", help="also write all results to OUT")
    parser.add_argument("--no-latency", action="store_true",
                        help="skip srcgrad's compile / disk-cache latency measurements")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = parser.parse_args(argv)

    if args.list:
        for wl in workloads.WORKLOADS:
            print(f"{wl.name:<24s} {wl.description}")
        return 0
    selected = workloads.WORKLOADS
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in workloads.BY_NAME]
        if unknown:
            parser.error(f"unknown workload(s) {unknown}; known: {list(workloads.BY_NAME)}")
        selected = [workloads.BY_NAME[n] for n in names]
    rounds, target_s, latency_runs = (3, 0.01, 2) if args.quick else (9, 0.2, 5)

    # srcgrad gets a private cache directory: cache_clear() below must not wipe the
    # user's cache, and the fresh-process measurement needs a directory it alone fills.
    cache_dir = tempfile.mkdtemp(prefix="srcgrad-bench-")
    os.environ["SRCGRAD_CACHE_DIR"] = cache_dir
    try:
        return _run(selected, args, rounds, target_s, latency_runs, cache_dir)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def _run(selected, args, rounds, target_s, latency_runs, cache_dir):
    libs, missing = load_libraries()
    env = environment(libs)
    print(f"python {env['python']}, numpy {env['numpy']} ({env.get('blas', '?')}), "
          f"{env['cpu']}; threads pinned to 1"
          + (f", process bound to cpu {PINNED_CPU}" if PINNED_CPU is not None else ""))
    print("peers: " + ", ".join(f"{n} {env[n]}" if n in env else f"{n}: n/a"
                                for n in ("srcgrad", "autograd", "torch", "jax")))
    for name, why in missing.items():
        print(f"  {name}: n/a ({why})")
    print(f"{'quick smoke run: ' if args.quick else ''}{rounds} rounds, samples >= "
          f"{target_s * 1e3:g} ms, median per call\n")

    results = {"environment": env, "settings": {"rounds": rounds, "sample_target_s": target_s,
                                                "quick": args.quick},
               "missing": missing, "workloads": {}}
    table = []
    for wl in selected:
        print(f"{wl.name}: {wl.description}", flush=True)
        inputs = wl.make_inputs()
        call_args = tuple(inputs.values())
        reference = wl.hand(*call_args)
        fns, notes = build_candidates(wl, call_args, libs)
        verify(fns, notes, reference)
        for name, note in notes.items():
            print(f"  {name}: {_first_line(note)}")  # the whole message is in --json
        medians, samples, numbers = time_interleaved(fns, rounds, target_s)
        hand = medians["hand"]
        status = {c: ("ok" if c in medians else notes.get(c, "n/a")) for c in CANDIDATES}
        results["workloads"][wl.name] = {
            "description": wl.description,
            "median_s": medians,
            "samples_s": samples,
            "calls_per_sample": numbers,
            "ratio_to_hand": {c: m / hand for c, m in medians.items()},
            "status": status,
            "notes": notes,
        }
        table.append((wl, medians, status))

    print()
    headers = ["workload", "hand us", "srcgrad us", "srcgrad/hand", "autograd/hand",
               "torch/hand", "jax/hand", "jax.jit/hand"]
    rows = []
    for wl, m, status in table:
        sg_cell = fmt_us(m.get("srcgrad")) if "srcgrad" in m else _short(status["srcgrad"])
        rows.append([wl.name, fmt_us(m["hand"]), sg_cell, fmt_ratio(m.get("srcgrad"), m["hand"]),
                     *(fmt_ratio(m.get(c), m["hand"]) if c in m else _short(status[c])
                       for c in ("autograd", "torch", "jax", "jax.jit"))])
    print_table(rows, headers)

    print("\nper-call medians, us:")
    print_table([[wl.name, *(fmt_us(m.get(c)) if c in m else _short(status[c])
                             for c in CANDIDATES)] for wl, m, status in table],
                ["workload", *CANDIDATES])

    if "srcgrad" not in libs:
        print("\nsrcgrad: n/a (compile and disk-cache latency not measured)")
    elif not args.no_latency:
        print(f"\nsrcgrad latency on {LATENCY_WORKLOAD} (median of {latency_runs}):", flush=True)
        try:
            lat = srcgrad_latency(libs["srcgrad"], cache_dir, latency_runs)
            results["srcgrad_latency"] = lat
            print(f"  first compile (cache_clear, grad + first call - warm call): "
                  f"{lat['compile_s'] * 1e3:.1f} ms")
            if "disk_hit_s" in lat:
                print(f"  disk-cache hit in a fresh process (grad + first call - warm call): "
                      f"{lat['disk_hit_s'] * 1e3:.2f} ms   (import srcgrad: "
                      f"{lat['import_srcgrad_s'] * 1e3:.0f} ms; cache files: "
                      f"{lat['disk_cache_files']}, unchanged by the fresh processes: "
                      f"{lat['disk_cache_unchanged']})")
            for err in lat.get("disk_hit_errors", []):
                print(f"  fresh process failed: {err}")
        except Exception as e:
            results["srcgrad_latency"] = {"error": f"{type(e).__name__}: {e}"}
            print(f"  failed: {_first_line(f'{type(e).__name__}: {e}')}")

    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"\nwrote {args.json}")
    return 0


def _first_line(text):
    lines = str(text).strip().splitlines()
    return lines[0] + (" [...]" if len(lines) > 1 else "") if lines else ""


def _short(note):
    if note == "n/a" or note is None:
        return "n/a"
    return "wrong" if note.startswith("WRONG") else "err"


if __name__ == "__main__":
    sys.exit(main())
