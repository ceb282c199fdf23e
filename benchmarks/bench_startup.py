"""Start-up costs (issue 15): `import srcgrad`, a fresh process's first gradient, and the
first call's peak memory.

    python benchmarks/bench_startup.py [--runs 5] [--src DIR] [--json] [--breakdown]

Every number comes from fresh interpreters (this process imports nothing of srcgrad):

* import: `import srcgrad` alone, over `--runs` processes;
* first gradient, MLP loss (32x32 -> 64 -> 10): `sg.grad(loss)` plus its first call, in
  a process that has imported NumPy and run the hand gradient once (BLAS set up), so
  only srcgrad's imports and work are charged (NumPy's own import is not). *cold*: an
  empty disk cache (the compile); *warm*: the module already on disk (a hit). Also
  shown less one steady call, which is the gradient's own arithmetic. The process has
  imported benchmarks.workloads (and with it dataclasses and copy, which srcgrad is then
  not charged for); the *numpy only* rows run the same loss from a process that imported
  NumPy and examples/mlp.py alone, so every stdlib module srcgrad imports is charged;
* the same from an *installed copy* (the sources and templates copied under a
  `site-packages` directory, as a wheel installs them): its compiler fingerprint is
  read from the install's stamps, where a source checkout stats every source file on
  each start (Note: srcgrad.pipeline.keys.compiler_fingerprint);

Times are the minimum over the processes (the least disturbed run: on a loaded machine
the median mostly measures the other processes) and the median beside it; the load
average is printed with them, and the least CPU time (time.process_time) of the first
gradient, which other processes disturb far less than the wall clock.
* peak memory (tracemalloc, NumPy's buffers included) of the first call (cold cache:
  compile, probe and the call) and of a steady call, for mlp_b1024_512-1024-10 and
  elementwise_1e6, with the hand-written gradient's peak for reference.

The child processes may write bytecode (under a temporary PYTHONPYCACHEPREFIX, one
throwaway run first) even where PYTHONDONTWRITEBYTECODE is set, as an installed package
has its .pyc files; without them every process compiles srcgrad's sources (~60 ms).
`--breakdown` takes a disk-cache hit's first gradient apart instead (imports, sg.grad, and
in the first call the key, the cache file, the code object, the module, the guards).
`--src DIR` runs another copy of srcgrad's sources (e.g. `git archive` of an older
commit) for before/after comparisons. `--busy N` keeps N other processes busy meanwhile:
the numbers of a loaded machine, on purpose.

BLAS runs on one thread in the child processes (OPENBLAS_NUM_THREADS=1 and its kin, as
benchmarks/run.py pins them): after the setup's hand gradient, a multi-threaded OpenBLAS
leaves a worker spinning on a core for ~60 ms waiting for more work (the process's CPU
time ran at twice the wall clock through the cold first gradient). On an idle 2-core
machine that cost srcgrad nothing; with one other busy process, srcgrad's thread shared
the remaining core with that spinner and the cold first gradient read 11-22 ms where
one BLAS thread gave 11-12 (measured 2026-11-28): the setup's residue, not srcgrad's
cost, and what made earlier "slow hours" read 20-24 ms. (Sleeping until the spinner
stopped instead cost a disk-cache hit 0.3-1 ms: the caches a fresh process has warm
went cold.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LATENCY = "mlp_b32_32-64-10"
MEMORY = ("mlp_b1024_512-1024-10", "elementwise_1e6")

_IMPORT = r"""
import time
t = time.perf_counter()
import srcgrad
print(time.perf_counter() - t)
"""

# the first gradient, timed from `import srcgrad` on; the setups bind `args`, `loss`, `wrt`
_TIME_FIRST = r"""
t0, c0 = time.perf_counter(), time.process_time()
import srcgrad as sg
g = sg.grad(loss, wrt=wrt)
g(*args)
first, cpu = time.perf_counter() - t0, time.process_time() - c0
steady = []
for _ in range(20):
    t = time.perf_counter()
    g(*args)
    steady.append(time.perf_counter() - t)
print(json.dumps({"first": first, "cpu": cpu, "steady": statistics.median(steady),
                  "compiled": "srcgrad.pipeline.programs" in sys.modules,
                  "table": "srcgrad.rules.table" in sys.modules}))
"""

_FIRST = r"""
import json, statistics, sys, time
sys.path.append(sys.argv[1])  # benchmarks, examples; srcgrad from PYTHONPATH first
import numpy as np
from benchmarks import workloads
wl = workloads.BY_NAME[sys.argv[2]]
args = tuple(wl.make_inputs().values())
loss, wrt = wl.loss, wl.wrt
wl.hand(*args)
""" + _TIME_FIRST

# the same first gradient from a process that has imported only NumPy and the loss's module
_FIRST_BARE = r"""
import json, statistics, sys, time
sys.path.append(sys.argv[1])
import numpy as np
from examples import mlp
rng = np.random.default_rng(0)
W1, b1, W2, b2 = mlp.init_params(rng, 32, 64, 10)
X, y = rng.standard_normal((32, 32)), rng.standard_normal((32, 10))
args = (W1, b1, W2, b2, X, y)
loss, wrt = mlp.loss, ("W1", "b1", "W2", "b2")
mlp.loss(*args)
""" + _TIME_FIRST

# a disk-cache hit's first gradient taken apart (the numpy-only setup, then the hit): the
# imports, sg.grad, and within the first call the quick key (the compiler fingerprint and
# the function's own print), the cache file's read and check, the stored code object's
# load, the globals the module reads, running the module, the guards' new dispatcher
# and the generated gradient's first run; each part timed by a wrapper (a microsecond each)
_BREAKDOWN = _FIRST_BARE.split("import srcgrad as sg")[0].replace("import json, statistics, sys, time",
                                                                  "import json, sys, time") + r"""
p = time.perf_counter
t0 = p()
import srcgrad as sg
from srcgrad import api
from srcgrad.codegen import cache, loader
from srcgrad.pipeline import keys, modules
t1 = p()
parts = {}

def timed(owner, name, label):
    inner = getattr(owner, name)

    def wrapper(*a, **k):
        t = p()
        try:
            return inner(*a, **k)
        finally:
            parts[label] = parts.get(label, 0.0) + p() - t
    setattr(owner, name, wrapper)

for owner, name, label in [(keys, "compiler_fingerprint", "fingerprint"), (keys, "quick_key", "quick key"),
                           (cache.ModuleCache, "get", "cache file read+check"),
                           (cache.ModuleCache, "code", "code object load"),
                           (loader, "free_globals", "globals read"), (modules, "load_module", "module run"),
                           (api._Dispatch, "_retarget", "guards' dispatcher")]:
    timed(owner, name, label)
t2 = p()
g = sg.grad(loss, wrt=wrt)
t3 = p()
g(*args)
t4 = p()
parts["quick key"] -= parts.get("fingerprint", 0.0)
rest = t4 - t3 - sum(parts.values())  # (the parts are disjoint)
parts = {"imports": t1 - t0, "sg.grad": t3 - t2, "first call": t4 - t3, **parts,
         "rest (the gradient's first run, checks)": rest,
         "compiled": "srcgrad.pipeline.programs" in sys.modules}
print(json.dumps(parts))
"""

_MEMORY = r"""
import json, sys, tracemalloc
sys.path.append(sys.argv[1])  # benchmarks, examples; srcgrad from PYTHONPATH first
import numpy as np
from benchmarks import workloads
wl = workloads.BY_NAME[sys.argv[2]]
args = tuple(wl.make_inputs().values())
wl.hand(*args)
import srcgrad as sg
from srcgrad import api  # imports outside the measured region

def peak(fn):
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = fn()
    top = tracemalloc.get_traced_memory()[1] - base
    del out
    return top

tracemalloc.start()
hand = peak(lambda: wl.hand(*args))
g = sg.grad(wl.loss, wrt=wl.wrt)
first = peak(lambda: g(*args))
steady = max(peak(lambda: g(*args)) for _ in range(3))
print(json.dumps({"hand": hand, "first": first, "steady": steady}))
"""


_ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def _env(src: str, cache_dir: str, pycache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(dict.fromkeys(_ONE_THREAD, "1"))  # no BLAS worker spinning beside (docstring)
    env["SRCGRAD_CACHE_DIR"] = cache_dir
    env["PYTHONPYCACHEPREFIX"] = pycache
    if src != str(ROOT):
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _run(code: str, argv: list, env: dict) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-2000:])
    return proc.stdout.strip().splitlines()[-1]


def _installed_copy(src: str, tmp: str) -> str:
    """`src`'s package and templates copied as a wheel installs them: <tmp>/site-packages."""
    site = os.path.join(tmp, "lib", "site-packages")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(os.path.join(src, "srcgrad"), os.path.join(site, "srcgrad"), ignore=ignore)
    shutil.copytree(os.path.join(src, "templates"), os.path.join(site, "srcgrad", "templates"),
                    ignore=ignore, dirs_exist_ok=True)
    return site


def _first(code: str, runs: int, src: str, tmp: str, tag: str, pycache: str) -> tuple:
    """(cold rows, warm rows): `runs` processes on empty caches, then `runs` on a filled one."""
    env = _env(src, os.path.join(tmp, f"warm-{tag}"), pycache)
    _run(code, [str(ROOT), LATENCY], env)  # bytecode written; the module cached
    cold = [json.loads(_run(code, [str(ROOT), LATENCY],
                            _env(src, os.path.join(tmp, f"cold-{tag}-{i}"), pycache)))
            for i in range(runs)]
    warm = [json.loads(_run(code, [str(ROOT), LATENCY], env)) for _ in range(runs)]
    return cold, warm


def _summary(out: dict, name: str, rows: list) -> None:
    out[f"first_{name}_cpu_s"] = min(r["cpu"] for r in rows)  # (CPU time: robust to a busy machine)
    out[f"first_{name}_s"] = min(r["first"] for r in rows)
    out[f"first_{name}_median_s"] = statistics.median(r["first"] for r in rows)
    out[f"first_{name}_less_steady_s"] = min(r["first"] - r["steady"] for r in rows)


@contextlib.contextmanager
def _busy(n: int):
    """`n` processes that each keep a core busy meanwhile (a loaded machine, on purpose)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def measure(runs: int, src: str, memory: bool = True, busy: int = 0) -> dict:
    with _busy(busy):
        out = _measure(runs, src, memory)
    out["busy"] = busy
    return out


def _measure(runs: int, src: str, memory: bool) -> dict:
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="sg-startup-") as tmp:
        pycache = os.path.join(tmp, "pycache")
        warm_dir = os.path.join(tmp, "warm-cache")
        env = _env(src, warm_dir, pycache)
        _run(_FIRST, [str(ROOT), LATENCY], env)  # bytecode written; the module cached
        imports = [float(_run(_IMPORT, [], env)) for _ in range(runs)]
        out["import_s"], out["import_median_s"] = min(imports), statistics.median(imports)

        cold = []
        for i in range(runs):
            cold_env = _env(src, os.path.join(tmp, f"cold-{i}"), pycache)
            cold.append(json.loads(_run(_FIRST, [str(ROOT), LATENCY], cold_env)))
        warm = [json.loads(_run(_FIRST, [str(ROOT), LATENCY], env)) for _ in range(runs)]
        for name, rows in (("cold", cold), ("warm", warm)):
            _summary(out, name, rows)
        out["warm_hits_compiled"] = sum(r["compiled"] for r in warm)  # a miss: files changed
        out["warm_hits_imported_table"] = sum(r["table"] for r in warm)
        out["steady_s"] = min(r["steady"] for r in warm)

        bare_cold, bare_warm = _first(_FIRST_BARE, runs, src, tmp, "bare", pycache)
        site = _installed_copy(src, tmp)
        inst_imports = [float(_run(_IMPORT, [], _env(site, os.path.join(tmp, "i"), pycache)))
                        for _ in range(runs)]
        out["import_installed_s"] = min(inst_imports)
        inst_cold, inst_warm = _first(_FIRST_BARE, runs, site, tmp, "installed", pycache)
        for name, rows in (("cold_bare", bare_cold), ("warm_bare", bare_warm),
                           ("cold_installed", inst_cold), ("warm_installed", inst_warm)):
            _summary(out, name, rows)
        out["warm_hits_compiled"] += sum(r["compiled"] for r in bare_warm + inst_warm)
        out["load_average"] = os.getloadavg() if hasattr(os, "getloadavg") else None

        for name in MEMORY if memory else ():
            mem_env = _env(src, os.path.join(tmp, f"mem-{name}"), pycache)
            out[f"memory_{name}"] = json.loads(_run(_MEMORY, [str(ROOT), name], mem_env))
    return out


def breakdown(runs: int, src: str) -> dict:
    """{checkout, installed copy: {part: least seconds over `runs` hits}} (_BREAKDOWN)."""
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="sg-startup-") as tmp:
        pycache = os.path.join(tmp, "pycache")
        for name, where in (("checkout", src), ("installed copy", _installed_copy(src, tmp))):
            env = _env(where, os.path.join(tmp, f"cache-{name}"), pycache)
            _run(_BREAKDOWN, [str(ROOT), LATENCY], env)  # bytecode written; the module cached
            rows = [json.loads(_run(_BREAKDOWN, [str(ROOT), LATENCY], env)) for _ in range(runs)]
            if any(r.pop("compiled") for r in rows):
                raise RuntimeError("a warm run compiled: a source file changed during the runs")
            out[name] = {k: min(r[k] for r in rows) for k in rows[0]}
    return out


def report_breakdown(parts: dict) -> None:
    print("a disk-cache hit's first gradient, numpy only (least over the runs, ms; the parts "
          "are inside `first call`)")
    for name, row in parts.items():
        print(f"  {name}: " + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in row.items()))


def report(r: dict) -> None:
    ms = 1e3
    print(f"min (median) over the runs; load average {r['load_average']}"
          + (f"; {r['busy']} busy process(es) running meanwhile" if r["busy"] else ""))
    print(f"import srcgrad                        {r['import_s'] * ms:7.2f} ms "
          f"({r['import_median_s'] * ms:.2f})")
    for name, what in (("cold", "cold (empty cache)"), ("warm", "warm (disk-cache hit)"),
                       ("cold_bare", "cold, numpy only"), ("warm_bare", "warm, numpy only"),
                       ("cold_installed", "cold, installed copy"),
                       ("warm_installed", "warm, installed copy")):
        if f"first_{name}_s" in r:
            print(f"first gradient, {what:<21s} {r[f'first_{name}_s'] * ms:7.2f} ms "
                  f"({r[f'first_{name}_median_s'] * ms:.2f})"
                  f"   less one steady call {r[f'first_{name}_less_steady_s'] * ms:.2f} ms;"
                  f" CPU {r[f'first_{name}_cpu_s'] * ms:.2f} ms")
    if "import_installed_s" in r:
        print(f"import srcgrad, installed copy        {r['import_installed_s'] * ms:7.2f} ms")
    print(f"steady call                           {r['steady_s'] * ms:7.3f} ms   "
          f"({LATENCY}; warm runs that compiled: {r['warm_hits_compiled']}, "
          f"that imported the rule table: {r['warm_hits_imported_table']})")
    for name in MEMORY:
        if f"memory_{name}" not in r:
            continue
        m = r[f"memory_{name}"]
        print(f"peak memory {name:<24s} first call {m['first'] / 2**20:7.1f} MB, steady "
              f"{m['steady'] / 2**20:6.1f} MB (first/steady {m['first'] / m['steady']:.2f}x), "
              f"hand {m['hand'] / 2**20:6.1f} MB")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per timing (min, median)")
    parser.add_argument("--src", default=str(ROOT), help="srcgrad sources to run (default: this checkout)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--busy", type=int, default=0,
                        help="keep this many other processes busy meanwhile (a loaded machine)")
    parser.add_argument("--breakdown", action="store_true",
                        help="only a disk-cache hit's first gradient taken apart (checkout, installed)")
    args = parser.parse_args(argv)
    if args.breakdown:
        report_breakdown(breakdown(args.runs, str(Path(args.src).resolve())))
        return 0
    result = measure(args.runs, str(Path(args.src).resolve()), memory=not args.no_memory, busy=args.busy)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
