"""The oracle: one generated program through srcgrad's transforms, against arithmetic.

References: for each data set, central differences in float64
at two step sizes along random directions (u . grad f), and HIPS autograd where it runs
the program (no in-place writes, no custom Functions: autograd treats `+=` as rebinding
and cannot run a Function's `apply` on its boxes). When the step sizes disagree (a kink or
a branch flips within a step) or autograd disagrees with the differences, the program is
*discarded*, never counted as a pass.

Each transform (`sg.value_and_grad`, `sg.grad`, `sg.vjp`, `sg.vjp` inside saved-tensor
hooks, `sg.jvp`, `sg.jacobian`, `sg.hessian`; opt-in, OPT_IN: `sg.grad` of array_api_strict
arrays) is built once and called on data set A, then on data set
B of the same shapes (variant reuse; B is often -A,
which takes the other branch of conditions on sums). Outcome of a call: pass, wrong (a
value or derivative disagrees with the references), crash (an exception that is not a
CompileError, or a CompileError without file:line), refused (a CompileError: its first line
is the reason; on array_api_strict also srcgrad's NotImplementedError for what only a call
can see, such as a scatter-add the Array API lacks; also torch's "modified by an inplace
operation" RuntimeError, which the README promises for values a custom Function saved,
and torch's error for a jvp tangent of another shape than its output's), by_design (such a saved-value error,
compile-time or run-time, where the NumPy run shows that an in-place write did reach what
`ctx.save_for_backward` saved: torch raises there too, the program is invalid; counted
apart from refused, SavedRecorder), hang (over the time limit).
A program's outcome is its worst call's (by_design is worse than pass only).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import inspect
import os
import re
import signal
import sys
import time
import traceback
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import srcgrad as sg

OUTCOMES = ("pass", "by_design", "wrong", "crash", "refused", "hang", "discarded")
SEVERITY = {"pass": 0, "by_design": 0.5, "refused": 1, "wrong": 2, "crash": 3, "hang": 4}
TRANSFORMS = ("value_and_grad", "grad", "vjp", "jvp", "vjp_hooks", "jacobian", "hessian")
# Run only when asked (check(extra=...)): benchmarks/fuzz.py asks for them, the CI slice
# does not (its programs must all pass, and the Array API legitimately refuses some of
# them: a gather's scatter-add, einsum, pad). "array_api": run_array_api.
OPT_IN = ("array_api", "nested", "complex")  # the last two: tests/fuzz/compose.py
EPS = (1e-6, 1e-4)  # the two central-difference steps
HESSIAN_EPS = (1e-3, 1e-4)  # the two steps of the second differences (rounding / e**2)
RTOL, ATOL = 1e-4, 1e-6


class Discard(Exception):
    """The references cannot judge this program at this point."""


class Hang(Exception):
    pass


@dataclass
class Failure:
    outcome: str  # wrong | crash | refused | by_design | hang
    transform: str
    call: str  # "first call" | "second call"
    detail: str  # what happened: expected vs got, or the exception

    def signature(self) -> tuple:
        """What "fails the same way" means to the shrinker and to the report's classes."""
        if self.outcome == "wrong":
            kind = self.detail.split(":", 1)[0]
            return ("wrong", self.transform, self.call, kind)
        if self.outcome == "crash":
            return ("crash", self.detail.split("\n", 1)[0])
        if self.outcome in ("refused", "by_design"):
            return (self.outcome, self.detail)
        return (self.outcome,)  # a hang: one class (check() stops at the first)


@dataclass
class Result:
    outcome: str
    failures: list = field(default_factory=list)
    reason: str = ""  # discarded: why
    seconds: float = 0.0
    transforms: list = field(default_factory=list)  # those that ran (failed or passed)

    def worst(self) -> Failure | None:
        real = [f for f in self.failures if f.outcome not in ("refused", "by_design")] or self.failures
        return max(real, key=lambda f: SEVERITY[f.outcome]) if real else None


# ---------------------------------------------------------------------- programs on disk

def load(source: str, directory: Path, stem: str):
    """Write the module and import it (srcgrad reads functions with inspect.getsource)."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    name = f"fz_{stem}_{digest}"
    path = Path(directory) / f"{name}.py"
    if not path.exists():
        path.write_text(source)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------- argument trees

# SRCGRAD_FUZZ_LAYOUTS=1: every other array argument of rank >= 2 is Fortran-ordered (the
# same values), so in-place writes through reshape/ravel/index views of arguments meet
# NumPy's layout-dependent answers (Note [Views of arguments] in srcgrad.frontend.layout);
# the references keep the order (deepcopy and np.array keep it, axpy restores it).
LAYOUTS = os.environ.get("SRCGRAD_FUZZ_LAYOUTS") == "1"


def make_args(spec, rng) -> list:
    out = []
    for i, a in enumerate(spec):
        if a[0] == "array":
            x = rng.standard_normal(a[1])
            out.append(np.asfortranarray(x) if LAYOUTS and i % 2 == 0 and x.ndim >= 2 else x)
        elif a[0] == "float":
            out.append(float(rng.standard_normal()))
        elif a[0] == "dict":
            out.append({k: rng.standard_normal(s) for k, s in a[1]})
        else:
            items = [rng.standard_normal(s) for s in a[1]]
            out.append(tuple(items) if a[0] == "tuple" else items)
    return out


def flatten(values, spec) -> list:
    """The leaves of arguments (or of gradients shaped like them), in spec order."""
    leaves = []
    for v, a in zip(values, spec):
        if a[0] in ("array", "float"):
            leaves.append(v)
        elif a[0] == "dict":
            if not isinstance(v, dict) or sorted(v) != sorted(k for k, _ in a[1]):
                raise TypeError(f"expected a dict with keys {[k for k, _ in a[1]]}, got {type(v).__name__}")
            leaves += [v[k] for k, _ in a[1]]
        else:
            if not isinstance(v, (tuple, list)) or len(v) != len(a[1]):
                raise TypeError(f"expected a {a[0]} of {len(a[1])}, got {type(v).__name__}")
            leaves += list(v)
    return leaves


def unflatten(leaves, spec) -> list:
    out, i = [], 0
    for a in spec:
        if a[0] in ("array", "float"):
            out.append(leaves[i])
            i += 1
        elif a[0] == "dict":
            out.append({k: leaves[i + j] for j, (k, _) in enumerate(a[1])})
            i += len(a[1])
        else:
            items = leaves[i:i + len(a[1])]
            out.append(tuple(items) if a[0] == "tuple" else list(items))
            i += len(a[1])
    return out


def leaf_specs(spec) -> list:
    """("array", shape) or ("float",) per leaf."""
    out = []
    for a in spec:
        if a[0] in ("array", "float"):
            out.append(a)
        elif a[0] == "dict":
            out += [("array", s) for _, s in a[1]]
        else:
            out += [("array", s) for s in a[1]]
    return out


def axpy(leaves, direction, eps, lspecs) -> list:
    out = []
    for x, u, a in zip(leaves, direction, lspecs):
        out.append(float(x + eps * u) if a[0] == "float" else _same_layout(np.asarray(x) + eps * u, x))
    return out


def _same_layout(y, x):
    """`y` in `x`'s memory order (a Fortran-ordered argument stays one: SRCGRAD_FUZZ_LAYOUTS),
    and of x's class: a 0-d ndarray stays one (`x + eps * u` is an np.float64, for which
    `w *= w` rebinds where the 0-d array is written in place: fuzz seed 400898)."""
    if isinstance(x, np.ndarray) and x.ndim >= 2 and x.flags.f_contiguous and not x.flags.c_contiguous:
        return np.asfortranarray(y)
    if isinstance(x, np.ndarray) and not isinstance(y, np.ndarray):
        return np.asarray(y)
    return y


def dot(grads, direction) -> float:
    return float(sum(np.sum(np.asarray(g, dtype=float) * u) for g, u in zip(grads, direction)))


def out_leaves(value) -> list:
    if isinstance(value, (tuple, list)):
        return [np.asarray(v, dtype=float) for v in value]
    return [np.asarray(value, dtype=float)]


# ---------------------------------------------------------------------- references

@dataclass
class Reference:
    args: list
    value: object
    directions: list  # leaf lists
    derivs: list  # d/de phi(x + e u_k) per direction
    cotangent: object  # scalar output: 1.0
    jvp_out: list  # output leaves' derivative along directions[0]
    # a scalar function of arrays and floats: directions[1] . H directions[0] by second
    # differences, or None where their two step sizes disagree (the Hessian is not judged)
    hvp: float | None = None
    # per direction, |difference at the small step - at the large step|: the references' own
    # uncertainty (Note [A reference's spread]); () where no differences were taken
    spreads: tuple = ()
    saved_written: bool = False  # the NumPy run wrote into what a Function saved (by_design)


def _scalarize(fn, output, cotangent):
    if output == "scalar":
        return fn
    return lambda *a: sum(float(np.sum(o * c)) for o, c in zip(out_leaves(fn(*a)), out_leaves(cotangent)))


def _finite(value) -> bool:
    return all(np.all(np.isfinite(o)) for o in out_leaves(value))


def _close(a, b, scale) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return False
    return bool(np.all(np.abs(a - b) <= RTOL * np.maximum(np.abs(a), np.abs(b)) + ATOL * scale))


def references(fn, spec, output, args, rng, autograd_fn=None) -> Reference:
    lspecs = leaf_specs(spec)
    leaves = flatten(args, spec)

    def run(ls):
        return fn(*copy.deepcopy(unflatten(ls, spec)))

    try:
        with np.errstate(over="raise"), SavedRecorder() as recorder:
            value = run(leaves)
    except FloatingPointError:  # an inf inside: its derivative is 0 * inf in any program
        raise Discard("NumPy overflowed (an intermediate value is inf)") from None
    except Exception as e:  # a generator bug: the program is not valid NumPy
        raise Discard(f"NumPy raised {type(e).__name__}") from None
    if not _finite(value) or (output == "scalar" and np.ndim(value) != 0):
        raise Discard("non-finite or non-scalar value")
    if any(type(x) is float for x in leaves):  # Python's float `*` overflows to inf silently
        try:
            with np.errstate(over="raise"), _numpy_math(fn):
                run([np.float64(x) if type(x) is float else x for x in leaves])
        except FloatingPointError:  # (seed 62287: arctan of an inf, whose derivative is nan)
            raise Discard("NumPy overflowed (an intermediate value is inf)") from None
        except Exception:
            pass  # np.float64 may take another path; the Python-float run above is the reference
    cotangent = 1.0 if output == "scalar" else (
        tuple(rng.standard_normal(np.shape(o)) for o in value) if isinstance(value, tuple)
        else rng.standard_normal(np.shape(value)))
    phi = _scalarize(lambda *a: run(flatten(a, spec)), output, cotangent)
    directions = [[rng.standard_normal(np.shape(x)) if a[0] == "array" else float(rng.standard_normal())
                   for x, a in zip(leaves, lspecs)] for _ in range(2)]
    try:
        ref = _differences(run, phi, leaves, lspecs, spec, value, cotangent, directions, args,
                           output, autograd_fn, getattr(fn, "__globals__", None))
    except (ArithmeticError, FloatingPointError) as e:  # Python floats overflow near the point
        raise Discard(f"NumPy raised {type(e).__name__} next to the point") from None
    ref.saved_written = recorder.written()
    return ref


class SavedRecorder:
    """While the NumPy reference runs, each array a custom Function's `ctx.save_for_backward`
    receives, with a copy of its whole storage (the root of its `.base` chain) as saved.
    `written()`: did a later in-place write change any of them? PyTorch's version counter
    is per storage (a write into any view of the saved tensor's base counts), and its
    backward then raises "modified by an inplace operation": the program is invalid, and
    srcgrad's error about that saved value is the specified behaviour (outcome by_design).
    A write that leaves the contents equal is not seen: srcgrad's error then stays refused."""

    def __enter__(self):
        from srcgrad.autograd.function import FunctionCtx

        self.saved: list = []
        self._cls, self._real = FunctionCtx, FunctionCtx.__dict__["save_for_backward"]
        recorder, real = self, self._real

        def save_for_backward(ctx, *tensors):
            real(ctx, *tensors)
            for t in tensors:
                if isinstance(t, np.ndarray):
                    root = _storage(t)
                    recorder.saved.append((root, root.copy()))

        FunctionCtx.save_for_backward = save_for_backward
        return self

    def __exit__(self, *exc):
        self._cls.save_for_backward = self._real
        return False

    def written(self) -> bool:
        return any(root.shape != copy_.shape or not np.array_equal(root, copy_, equal_nan=True)
                   for root, copy_ in self.saved)


def _storage(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


SAVED_VALUE_ERRORS = ("one of the variables needed for gradient computation is modified by an "
                      "inplace operation", "this in-place write may change a value that ",
                      "RuntimeError: a saved value was modified by an inplace operation")


def by_design(outcome: str, detail: str, ref: Reference) -> str:
    """`refused` becomes `by_design` where srcgrad's error is about a value a Function saved
    and the NumPy run shows a write reached that value (SavedRecorder)."""
    if outcome == "refused" and ref.saved_written and detail.startswith(SAVED_VALUE_ERRORS):
        return "by_design"
    return outcome


@contextmanager
def _numpy_math(fn):
    """`math` in fn's module as NumPy's functions while the overflow check runs: `math.sqrt`
    of an np.float64 returns a Python float again, whose `*` overflows silently (seed
    724806: `x = math.sqrt(x * x * (x * x + 2.0))` in a loop reached inf, clip made the
    value finite and the derivative through the inf is nan in any program)."""
    module = getattr(fn, "__globals__", {})
    real = module.get("math")
    if real is None:
        yield
        return

    class NumpyMath:
        def __getattr__(self, name):
            return getattr(np, _NUMPY_MATH[name]) if name in _NUMPY_MATH else getattr(real, name)

    module["math"] = NumpyMath()
    try:
        yield
    finally:
        module["math"] = real


_NUMPY_MATH = {name: name for name in ("sqrt", "exp", "log", "log1p", "expm1", "sin", "cos", "tan",
                                        "tanh", "sinh", "cosh", "hypot", "fabs")}
_NUMPY_MATH.update(atan="arctan", asin="arcsin", acos="arccos", atan2="arctan2", pow="power")


_PERIODIC = {"sin": 1.0, "cos": 1.0, "tan": 1.0, "sinc": np.pi}  # radians per unit argument
# Piecewise-constant functions: their derivative is 0 between jumps, which differences see
# only where no step crosses one (Note [Steps across jumps]).
_STEPS = frozenset({"fix", "floor", "ceil", "trunc", "rint", "round", "around"})


def _unresolvable(phi, module, leaves, u, lspecs, spec) -> str | None:
    """Why finite differences along u cannot judge a derivative (None where they can):
    the smallest step moves the argument of sin, cos, tan or sinc's sine by more than 0.1
    radians, or changes the value of a piecewise-constant function (Note [Steps across
    jumps]). Seen in the calls of NumPy's and math's functions from phi's module
    (`module`: its globals, whose `np` and `math` are watched); not judged where the two
    runs called them differently.
    Seed 1601287: `np.sin(x1)` with x1 ~ 1e21, damped by a division by ~1e14 on its way to
    the output, so the output moved by 1e-13 while the sine's argument moved by ~1e15
    radians: both steps agreed on ~0, the derivative (cos x1) dx1 / 1e14 is ~-3e6; seed
    2640639: np.sinc of ~1e12. Not where the program calls a transform itself
    (`sg.grad(helper)` inside f): srcgrad would compile the helper against the watching
    wrappers (seed 1600356: a CompileError in the reference)."""
    if "sg" in module:
        return None
    runs = []
    for e in (0.0, EPS[0]):
        with _recording_calls(module) as seen:
            phi(*unflatten(axpy(leaves, u, e, lspecs), spec))
        runs.append(seen)
    if len(runs[0]) != len(runs[1]) or any(a[0] != b[0] for a, b in zip(*runs)):
        return None
    moved = {"angle": 0.0, "step": 0.0}
    for (kind, a), (_, b) in zip(*runs):
        if np.shape(a) == np.shape(b):
            moved[kind] = max(moved[kind], float(np.max(np.abs(np.subtract(b, a)), initial=0.0)))
    if moved["angle"] > 0.1:
        return ("the smallest step moves a sine's or cosine's argument by more than 0.1: finite "
                "differences cannot resolve a periodic function of such values")
    if moved["step"] > 0.0:
        return ("the smallest step changes the value of floor, fix, round or the like: finite "
                "differences see its jumps, not its derivative 0")
    return None


# Note [Steps across jumps]
# floor, fix, round and the like have derivative 0 between their jumps, which is what
# srcgrad (and torch, JAX, autograd) differentiate. Central differences judge that only
# where no step crosses a jump; a crossing near the point usually shows as two step sizes
# that disagree, but not for an argument beyond 2**52, where every float is an integer:
# there `fix(a)` is `a` for every step (both step sizes see slope 1, where the derivative
# is 0). Seed 2659225: `a1 * np.fix(a1) - x.x` with a1 ~ 8e45, the two terms equal in
# float64 but not in exact arithmetic (fractions.Fraction: srcgrad's derivative is the
# exact one). So the oracle watches those calls as it watches sines (_unresolvable): where
# the smallest step changes any of their values, the program is discarded.


@contextlib.contextmanager
def _recording_calls(module):
    """What every sin, cos and tan (its argument, in radians) and every piecewise-constant
    function (its value) that code of `module` calls meanwhile sees: ("angle" | "step",
    array) pairs, in call order."""
    seen: list = []
    saved = {name: module[name] for name in ("np", "math") if name in module}

    def angle(real, radians):
        def call(x, *a, **k):
            seen.append(("angle", radians * np.array(x, dtype=float, copy=True)))
            return real(x, *a, **k)
        return call

    def step(real):
        def call(*a, **k):
            value = real(*a, **k)
            seen.append(("step", np.array(value, dtype=float, copy=True)))
            return value
        return call

    class Namespace:
        def __init__(self, real):
            self._real = real

        def __getattr__(self, name):
            value = getattr(self._real, name)
            if name in _PERIODIC:
                return angle(value, _PERIODIC[name])
            return step(value) if name in _STEPS else value

    for name, real in saved.items():
        module[name] = Namespace(real)
    try:
        yield seen
    finally:
        module.update(saved)


def _differences(run, phi, leaves, lspecs, spec, value, cotangent, directions, args, output,
                 autograd_fn, module=None) -> Reference:
    scale = max(1.0, float(max(np.max(np.abs(o), initial=0.0) for o in out_leaves(value))))
    derivs, spreads = [], []
    at_point = float(phi(*unflatten(axpy(leaves, directions[0], 0.0, lspecs), spec)))
    for u in directions:
        sides = [(float(phi(*unflatten(axpy(leaves, u, e, lspecs), spec))),
                  float(phi(*unflatten(axpy(leaves, u, -e, lspecs), spec)))) for e in EPS]
        if not _close(at_point, sum(sides[0]) / 2, scale):  # (seed 782716: `np.where(np.sum(x)
            # > np.sum(v), ...)` with the sums equal but for rounding, which took one branch
            # at the point and the other at every neighbour: both steps agreed on the latter)
            raise Discard("the value at the point is not its neighbours' (a branch decided "
                          "by rounding at the point)")
        d = [(hi - lo) / (2 * e) for (hi, lo), e in zip(sides, EPS)]
        if not (np.isfinite(d[0]) and np.isfinite(d[1])) or not _close(d[0], d[1], scale * 10):
            raise Discard("finite differences disagree between step sizes (kink or branch)")
        if abs(d[0]) * EPS[0] > 1.0:  # (seed 701411: `s + np.cos(s)`, s ~ 4e13, whose
            # cosine turns 3e8 times within the smallest step: both steps average it away)
            raise Discard("the smallest step moves the output by more than 1: finite "
                          "differences cannot resolve a periodic function of such values")
        why = _unresolvable(phi, module, leaves, u, lspecs, spec) if module is not None else None
        if why:
            raise Discard(why)
        derivs.append(d[0])
        spreads.append(abs(d[0] - d[1]))
    u = directions[0]
    jvps = []
    for e in EPS:
        hi = out_leaves(run(axpy(leaves, u, e, lspecs)))
        lo = out_leaves(run(axpy(leaves, u, -e, lspecs)))
        jvps.append([(h - lo_) / (2 * e) for h, lo_ in zip(hi, lo)])
    if not all(_close(a, b, scale * 10) for a, b in zip(*jvps)):
        raise Discard("finite differences disagree between step sizes (kink or branch)")
    if autograd_fn is not None:
        try:
            _check_autograd(autograd_fn, spec, output, args, cotangent, directions, derivs, scale)
        except Discard:
            raise
        except Exception:  # noqa: BLE001 - autograd cannot run this program: the differences judge
            pass
    hvp = None
    if output == "scalar" and all(a[0] in ("array", "float") for a in spec):
        hvp = _second_difference(phi, leaves, lspecs, spec, directions, scale)
    return Reference(args, value, directions, derivs, cotangent, jvps[0], hvp=hvp,
                     spreads=tuple(spreads))


def _second_difference(phi, leaves, lspecs, spec, directions, scale) -> float | None:
    """v . H u (u, v: the two directions) by central second differences at two step sizes;
    None where they disagree (a kink or a branch within a step)."""
    u, v = directions
    estimates = []
    for e in HESSIAN_EPS:
        def at(a, b):
            return float(phi(*unflatten(axpy(axpy(leaves, u, a, lspecs), v, b, lspecs), spec)))
        estimates.append((at(e, e) - at(e, -e) - at(-e, e) + at(-e, -e)) / (4 * e * e))
    if not all(np.isfinite(estimates)) or not _close(estimates[0], estimates[1], scale * 10):
        return None
    # Richardson's extrapolation: each estimate's error is c e**2 (+ rounding / e**2), so
    # this combination cancels c; the larger step's own estimate was off by 1.4e-4 of a
    # smooth rational function's exact v . H u (fuzz seed 2657286, an oracle false wrong)
    (e1, e2), (h1, h2) = HESSIAN_EPS, estimates
    return (e1 * e1 * h2 - e2 * e2 * h1) / (e1 * e1 - e2 * e2)


def _check_autograd(afn, spec, output, args, cotangent, directions, derivs, scale):
    """Autograd's gradient, projected on the directions, must agree with the differences."""
    import autograd

    def phi(*a):
        out = afn(*a)
        if output == "scalar":
            return out
        outs = out if isinstance(out, tuple) else (out,)
        cts = cotangent if isinstance(cotangent, tuple) else (cotangent,)
        return sum(autograd.numpy.sum(o * c) for o, c in zip(outs, cts))

    try:
        grads = [autograd.grad(phi, i)(*copy.deepcopy(args)) for i in range(len(args))]
        flat = flatten(grads, spec)
    except Exception:
        return  # autograd does not run this program: the differences decide
    for u, d in zip(directions, derivs):
        if not _close(dot(flat, u), d, scale):
            raise Discard("autograd disagrees with finite differences")


def autograd_twin(source: str, directory: Path, stem: str):
    """The program with numpy swapped for autograd.numpy, or None where that cannot apply."""
    try:
        import autograd  # noqa: F401
    except ImportError:
        return None
    twin = source.replace("import numpy as np", "import autograd.numpy as np")
    return load(twin, directory, stem + "_ag").f


# ---------------------------------------------------------------------- transforms

@contextmanager
def time_limit(seconds: float):
    def on_alarm(signum, frame):
        raise Hang()

    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _where(tb) -> str:
    """The innermost frame in srcgrad (or in generated code) of a traceback."""
    frames = traceback.extract_tb(tb)
    inner = [f for f in frames if "/srcgrad/" in f.filename or _generated(f.filename)]
    if not inner:
        inner = [f for f in frames if "srcgrad" in f.filename]
    if not inner:
        return "?"
    f = inner[-1]
    where = "generated code" if _generated(f.filename) else f.filename.split("/srcgrad/", 1)[-1]
    return f"{where}:{f.name}"


def _generated(filename: str) -> bool:
    """A module srcgrad generated, loaded from its disk cache (benchmarks/fuzz.py's default
    directory, or $SRCGRAD_CACHE_DIR) or from memory: a TypeError the namespace raised there is the
    generated code's, not the dispatcher's that called it."""
    cache = os.environ.get("SRCGRAD_CACHE_DIR")
    if "sgcache" in filename or filename.startswith("<srcgrad:"):  # (a module never cached)
        return True
    return bool(cache) and filename.startswith(cache)


def normalize(message: str) -> str:
    """A message without the program's own names and numbers, to group by."""
    text = re.sub(r"\b(?:v|x|w|y|i|k|r|c|L|T|t|p|a|helper|Fn|fz_\w+?)\d+\b", "N", message)
    text = re.sub(r"\d+", "#", text)
    return text[:160]


class Refusal(Exception):
    """A documented limitation srcgrad raised at run time, not as a CompileError (the
    Array API's missing scatter-add for an index array that is an argument: only the
    call sees it). Raised by the runners that expect it (run_array_api)."""


def classify(exc: BaseException) -> tuple:
    """(outcome, detail) of an exception a transform raised."""
    if isinstance(exc, Refusal):
        return "refused", normalize(str(exc))
    if isinstance(exc, sg.CompileError):
        first = (exc.message or "").split("\n", 1)[0]
        if not exc.filename or exc.filename == "<unknown>" or not exc.lineno:
            return "crash", f"CompileError without file:line: {normalize(first)}"
        return "refused", normalize(first)
    message = str(exc).splitlines()[0] if str(exc) else ""
    if type(exc) is RuntimeError and "modified by an inplace operation" in message:
        # torch's check of a value a custom Function saved (README): an error by design
        return "refused", "RuntimeError: a saved value was modified by an inplace operation"
    if type(exc) is RuntimeError and message.startswith("Trying to set a forward gradient that "
                                                         "has a different size"):
        # torch's check of the tangent a custom Function's jvp returned: the program's jvp
        # is wrong for these shapes, torch raises too
        return "refused", "RuntimeError: a custom Function's jvp returned a tangent of another shape"
    if "maximum recursion depth exceeded" in message:
        message = "maximum recursion depth exceeded"
    return "crash", f"{type(exc).__name__} in {_where(exc.__traceback__)}: {normalize(message)}"


def _wrt(program_args, choice):
    n = len(program_args)
    if n == 1 and choice:
        return 0, True
    return tuple(range(n)), False


def _grad_leaves(grads, spec, single):
    grads = (grads,) if single else grads
    if not isinstance(grads, tuple) or len(grads) != len(spec):
        raise Wrong(f"structure: {len(spec)} gradients expected, got {type(grads).__name__}")
    try:
        leaves = flatten(grads, spec)
    except TypeError as e:
        raise Wrong(f"structure: {e}") from None
    for g, a in zip(leaves, leaf_specs(spec)):
        if g is None:
            raise Wrong("structure: a gradient is None")
        want = a[1] if a[0] == "array" else ()
        if np.shape(g) != want:
            raise Wrong(f"structure: gradient shape {np.shape(g)}, argument shape {want}")
    return leaves


class Wrong(Exception):
    pass


def _check_value(got, ref: Reference, scale):
    got_l, want_l = out_leaves(got), out_leaves(ref.value)
    if len(got_l) != len(want_l) or not all(_close(a, b, scale * 1e-3) for a, b in zip(got_l, want_l)):
        raise Wrong(f"value: expected {_short(ref.value)}, got {_short(got)}")


def _check_grads(leaves, ref: Reference, scale):
    # Note [A reference's spread]: the differences at the two steps bound what they know.
    # Where an output is 0 in exact arithmetic but its rounding is not (fuzz seed 2768588:
    # x[:3] - x[:3] summed with x ~ 1e6, value 3.6e-12), the small step's difference is
    # that rounding over 2e-6 (1.8e-6, beyond ATOL) and the large step's 100 times less;
    # an exact gradient (0) then differs from the reference by the spread and is right.
    # Within twice the spread, not "wrong"; the spread itself is at most 10 ATOL * scale
    # (beyond it the program is discarded), so a gradient off by more still shows.
    spreads = ref.spreads or (0.0,) * len(ref.derivs)
    for k, (u, d, spread) in enumerate(zip(ref.directions, ref.derivs, spreads)):
        got = dot(leaves, u)
        if not _close(got, d, scale) and abs(got - d) > 2 * spread:
            raise Wrong(f"gradient: along random direction {k}: expected {d:.6g}, got {got:.6g}")


def _short(v) -> str:
    return np.array2string(np.asarray(v, dtype=float), precision=5, threshold=12) if not isinstance(
        v, tuple) else "(" + ", ".join(_short(x) for x in v) + ")"


def _scale(ref: Reference) -> float:
    return max([1.0] + [float(np.max(np.abs(o), initial=0.0)) for o in out_leaves(ref.value)]
               + [abs(d) for d in ref.derivs])


def run_value_and_grad(state, fn, program, ref):
    if state.get("h") is None:
        wrt, single = _wrt(program.args, program.seed % 2)
        state["h"], state["single"] = sg.value_and_grad(fn, wrt=wrt), single
    value, grads = state["h"](*copy.deepcopy(ref.args))
    _check_value(value, ref, _scale(ref))
    _check_grads(_grad_leaves(grads, program.args, state["single"]), ref, _scale(ref))


def run_grad(state, fn, program, ref):
    if state.get("h") is None:
        n = len(program.args)
        wrt, single = _wrt(program.args, program.seed % 3 == 0)
        if not single and program.seed % 4 == 1:
            wrt = tuple(inspect.signature(fn).parameters)[:n]  # argument names
        state["h"], state["single"] = sg.grad(fn, wrt=wrt), single
    grads = state["h"](*copy.deepcopy(ref.args))
    _check_grads(_grad_leaves(grads, program.args, state["single"]), ref, _scale(ref))


def run_vjp(state, fn, program, ref):
    out, vjp_fn = sg.vjp(fn, *copy.deepcopy(ref.args))
    _check_value(out, ref, _scale(ref))
    grads = vjp_fn(ref.cotangent)
    leaves = _grad_leaves(tuple(grads), program.args, False)
    _check_grads(leaves, ref, _scale(ref))
    twice = vjp_fn(_times(ref.cotangent, 2.0))  # a vjp_fn is reusable and linear
    again = _grad_leaves(tuple(twice), program.args, False)
    if not all(_close(np.asarray(b, dtype=float), 2.0 * np.asarray(a, dtype=float), _scale(ref))
               for a, b in zip(leaves, again)):
        raise Wrong("gradient: vjp_fn called again with 2 * cotangent is not 2 * the first gradient")


def _times(ct, k):
    return tuple(c * k for c in ct) if isinstance(ct, tuple) else ct * k


def run_jvp(state, fn, program, ref):
    tangents = unflatten(ref.directions[0], program.args)
    out, tout = sg.jvp(fn, tuple(copy.deepcopy(ref.args)), tuple(tangents))
    _check_value(out, ref, _scale(ref))
    got = out_leaves(tout)
    if len(got) != len(ref.jvp_out) or not all(_close(a, b, _scale(ref)) for a, b in zip(got, ref.jvp_out)):
        raise Wrong(f"tangent: expected {_short(tuple(ref.jvp_out))}, got {_short(tuple(got))}")


def run_vjp_hooks(state, fn, program, ref):
    """sg.vjp inside saved-tensor hooks that box each saved value (a backward that reads a
    saved value without unpacking it fails loudly)."""
    from srcgrad.autograd.graph import saved_tensors_hooks

    def pack(a):
        return ("packed", np.array(a, copy=True))

    def unpack(box):
        return box[1]

    with saved_tensors_hooks(pack, unpack):
        run_vjp(state, fn, program, ref)


def run_jacobian(state, fn, program, ref):
    """sg.jacobian in the mode the seed picks, contracted with the cotangent and the directions."""
    if state.get("h") is None:
        mode = ("auto", "reverse", "forward")[program.seed % 3]
        state["h"] = sg.jacobian(fn, wrt=tuple(range(len(program.args))), mode=mode)
    jac = state["h"](*copy.deepcopy(ref.args))
    out_ndim = np.ndim(ref.value)
    if not isinstance(jac, tuple) or len(jac) != len(program.args):
        raise Wrong(f"structure: {len(program.args)} Jacobian blocks expected, got {type(jac).__name__}")
    grads = []
    for block, a in zip(jac, program.args):
        want = np.shape(ref.value) + (a[1] if a[0] == "array" else ())
        if np.shape(block) != want:
            raise Wrong(f"structure: Jacobian block shape {np.shape(block)}, expected {want}")
        grads.append(np.tensordot(np.asarray(ref.cotangent, dtype=float), np.asarray(block, dtype=float),
                                  axes=out_ndim))
    _check_grads(grads, ref, _scale(ref))


def run_hessian(state, fn, program, ref):
    """sg.hessian w.r.t. every argument, its blocks contracted with the two directions:
    v . H u against second differences."""
    if state.get("h") is None:
        state["h"] = sg.hessian(fn, wrt=tuple(range(len(program.args))))
    hess = state["h"](*copy.deepcopy(ref.args))
    u, v = ref.directions
    shapes = [a[1] if a[0] == "array" else () for a in program.args]
    total = 0.0
    for i, si in enumerate(shapes):
        for j, sj in enumerate(shapes):
            try:
                block = np.asarray(hess[i][j], dtype=float)
            except (TypeError, IndexError, KeyError):
                raise Wrong(f"structure: no Hessian block [{i}][{j}] in a {type(hess).__name__}") from None
            if block.shape != tuple(si) + tuple(sj):
                raise Wrong(f"structure: Hessian block [{i}][{j}] shape {block.shape}, expected "
                            f"{tuple(si) + tuple(sj)}")
            left = np.tensordot(np.asarray(v[i], dtype=float), block, axes=len(si))
            total += float(np.tensordot(left, np.asarray(u[j], dtype=float), axes=len(sj)))
    if not _close(total, ref.hvp, max(_scale(ref), abs(ref.hvp)) * 10):
        raise Wrong(f"hessian: along two random directions: expected {ref.hvp:.6g}, got {total:.6g}")


# srcgrad's own errors for what only a call can see on another namespace, raised on
# purpose with a message that says why: the Array API's missing scatter-add for an
# integer-array index given as an argument (NotImplementedError, srcgrad.rules.helpers),
# whether a write reached a view, which array_api_strict cannot tell (TypeError,
# storage_written). Refusals, judged like a CompileError; any other exception is a crash.
_NAMESPACE_REFUSALS = (NotImplementedError, TypeError)


def run_array_api(state, fn, program, ref):
    """sg.grad w.r.t. every argument, called with the array arguments as array_api_strict
    arrays (Python floats stay floats): the generated code is then spelled with the Array
    API's names and bound to array_api_strict (Note [Spellings]). Each gradient of an array
    must be array_api_strict's (computed there, not by NumPy), and is judged, converted
    back, against the same differences as run_grad's."""
    import array_api_strict as xs

    strict_array = type(xs.asarray(0.0))  # (array_api_strict exports no Array class)
    if state.get("h") is None:
        state["h"] = sg.grad(fn, wrt=tuple(range(len(program.args))))
    strict = [xs.asarray(a) if isinstance(a, np.ndarray) else a for a in copy.deepcopy(ref.args)]
    try:
        grads = state["h"](*strict)
    except _NAMESPACE_REFUSALS as e:
        if str(e).startswith("srcgrad: "):
            raise Refusal(str(e).split("\n", 1)[0]) from None
        raise
    if not isinstance(grads, tuple) or len(grads) != len(program.args):
        raise Wrong(f"structure: {len(program.args)} gradients expected, got {type(grads).__name__}")
    for g, a in zip(grads, program.args):
        if a[0] == "array" and not isinstance(g, strict_array):
            raise Wrong(f"structure: the gradient of an array is a {type(g).__name__}, not an "
                        "array_api_strict array")
    leaves = _grad_leaves(tuple(np.asarray(g) for g in grads), program.args, False)
    _check_grads(leaves, ref, _scale(ref))


RUNNERS = {"value_and_grad": run_value_and_grad, "grad": run_grad, "vjp": run_vjp, "jvp": run_jvp,
           "vjp_hooks": run_vjp_hooks, "jacobian": run_jacobian, "hessian": run_hessian,
           "array_api": run_array_api}


def runner(name):
    """RUNNERS' or tests/fuzz/compose.py's (imported here: it uses this module's helpers)."""
    from tests.fuzz import compose

    return RUNNERS.get(name) or compose.RUNNERS[name]


def applicable(program, extra=()) -> list:
    """The transforms that apply to the program: the default ones and those of `extra`
    (OPT_IN). array_api is sg.grad's (a scalar output), of array and float arguments only:
    containers of non-NumPy arrays are the README's "not yet", not a finding."""
    names = list(TRANSFORMS) + [n for n in extra if n not in TRANSFORMS]
    if program.output != "scalar":
        names = [n for n in names if n not in ("value_and_grad", "grad", "hessian", "array_api")]
    if any(a[0] not in ("array", "float") for a in program.args):
        if "array_api" in names:
            names.remove("array_api")
        names.remove("jvp")  # sg.jvp takes arrays and numbers (API.md), not containers
        names.remove("jacobian")
        if "hessian" in names:
            names.remove("hessian")
    if program.output == "tuple":
        names.remove("jacobian")
    from tests.fuzz import compose

    return [n for n in names if n not in compose.RUNNERS or compose.applies(n, program)]


# ---------------------------------------------------------------------- one program

@dataclass
class Spec:
    """What the oracle needs of a program (a generator.Program, or one read back from source)."""

    seed: int
    source: str
    args: list
    output: str
    features: set


def spec_from_source(source: str, seed: int = 0) -> Spec:
    ns: dict = {}
    header = "\n".join(line for line in source.splitlines() if line.startswith(("ARGS =", "OUTPUT =")))
    exec(header, ns)
    inplace = bool(re.search(r"\]\s*[-+*/]?=[^=]|[-+*/]=", source))
    features = {"inplace"} if inplace else set()
    if "Function)" in source:
        features.add("function")
    return Spec(seed, source, ns["ARGS"], ns["OUTPUT"], features)


def check(program, directory: Path, *, transforms=None, extra=(), order=("A", "B"), timeout: float = 30.0,
          stop_at_first=False) -> Result:
    """Run one program; see the module docstring. `transforms`: these only; else the
    applicable ones of TRANSFORMS and of `extra` (OPT_IN)."""
    start = time.perf_counter()
    stem = str(program.seed)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            module = load(program.source, directory, stem)
        except Exception as e:
            return Result("discarded", reason=f"module does not import: {type(e).__name__}")
        fn = module.f
        twin = None
        if not ({"inplace", "function"} & set(program.features)):
            try:
                twin = autograd_twin(program.source, directory, stem)
            except Exception:
                twin = None
        refs = {}
        for key in order:
            rng = np.random.default_rng([program.seed, ord(key)])
            args = make_args(program.args, rng)
            if key == "B" and program.seed % 2 == 0:
                base = make_args(program.args, np.random.default_rng([program.seed, ord("A")]))
                args = unflatten([-x for x in flatten(base, program.args)], program.args)
            try:
                with time_limit(timeout):
                    refs[key] = references(fn, program.args, program.output, args, rng, twin)
            except Discard as e:
                return Result("discarded", reason=str(e), seconds=time.perf_counter() - start)
            except Hang:
                return Result("discarded", reason="NumPy run over the time limit")
        failures, ran = [], []
        for name in transforms or applicable(program, extra):
            if name == "hessian" and any(refs[key].hvp is None for key in order):
                continue  # the second differences cannot judge it here
            ran.append(name)
            failure = _run_transform(name, fn, program, refs, order, timeout)
            if failure is not None:
                failures.append(failure)
                if failure.outcome == "hang" or (
                        stop_at_first and failure.outcome not in ("refused", "by_design")):
                    break  # after a hang the other transforms would likely hang too
    outcome = max((f.outcome for f in failures), key=SEVERITY.get, default="pass")
    return Result(outcome, failures, seconds=time.perf_counter() - start, transforms=ran)


def _run_transform(name, fn, program, refs, order, timeout) -> Failure | None:
    state: dict = {}
    for n, key in enumerate(order):
        call = "first call" if n == 0 else "second call"
        try:
            with time_limit(timeout):
                runner(name)(state, fn, program, refs[key])
        except Hang:
            return Failure("hang", name, call, f"over {timeout:g} s")
        except Wrong as e:
            return Failure("wrong", name, call, str(e))
        except Exception as e:  # noqa: BLE001 - any exception is a finding
            outcome, detail = classify(e)
            return Failure(by_design(outcome, detail, refs[key]), name, call, detail)
    return None


# ---------------------------------------------------------------------- explaining a failure

def _literal(v) -> str:
    if isinstance(v, float):
        return repr(round(v, 6))
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(_literal(x) for x in v)
        return f"({inner},)" if isinstance(v, tuple) else f"[{inner}]"
    return f"np.array({np.round(np.asarray(v), 6).tolist()!r})"


def data_sets(program, order=("A", "B")) -> dict:
    """The argument values check() uses."""
    out = {}
    for key in order:
        args = make_args(program.args, np.random.default_rng([program.seed, ord(key)]))
        if key == "B" and program.seed % 2 == 0:
            base = make_args(program.args, np.random.default_rng([program.seed, ord("A")]))
            args = unflatten([-x for x in flatten(base, program.args)], program.args)
        out[key] = args
    return out


def fd_gradient(fn, spec, args, eps=1e-6) -> list:
    """Full central-difference gradient of a scalar program, leaf by leaf."""
    leaves, lspecs = flatten(args, spec), leaf_specs(spec)
    grads = []
    for i, a in enumerate(lspecs):
        g = np.zeros(a[1] if a[0] == "array" else ())
        flat = g.reshape(-1)
        for j in range(flat.size):
            vals = []
            for sign in (1, -1):
                ls = copy.deepcopy(leaves)
                if a[0] == "float":
                    ls[i] = ls[i] + sign * eps
                else:
                    x = np.array(ls[i], dtype=float)
                    x.reshape(-1)[j] += sign * eps
                    ls[i] = x
                vals.append(float(fn(*copy.deepcopy(unflatten(ls, spec)))))
            flat[j] = (vals[0] - vals[1]) / (2 * eps)
        grads.append(g)
    return grads


def repro(program, failure: Failure, directory: Path) -> str:
    """A runnable script: the program, its data, the failing call, what it printed."""
    sets = data_sets(program)
    key = "A" if failure.call == "first call" else "B"
    body = [line for line in program.source.splitlines() if not line.startswith(("ARGS =", "OUTPUT ="))]
    lines = ["import srcgrad as sg"] + body + [""]
    for k, v in sets.items():
        lines.append(f"args_{k} = [{', '.join(_literal(a) for a in v)}]")
    n = len(program.args)
    wrt = tuple(range(n))
    if failure.transform == "array_api":
        runs = ["import array_api_strict as xs", f"h = sg.grad(f, wrt={wrt})",
                "strict = lambda a: [xs.asarray(v) if isinstance(v, np.ndarray) else v for v in a]"]
        if key == "B":
            runs.append("print('first call:', h(*strict(args_A)))")
        runs.append(f"print('{failure.call}:', h(*strict(args_{key})))")
    elif failure.transform in ("grad", "value_and_grad"):
        runs = [f"h = sg.{failure.transform}(f, wrt={wrt})"]
        if key == "B":
            runs.append("print('first call:', h(*args_A))")
        runs.append(f"print('{failure.call}:', h(*args_{key}))")
    elif failure.transform in ("vjp", "vjp_hooks"):
        ct = "1.0" if program.output == "scalar" else "ct"
        runs = ([] if key == "A" else ["out, vjp_fn = sg.vjp(f, *args_A)"]) + [
            f"out, vjp_fn = sg.vjp(f, *args_{key})", "print('out:', out)"]
        if program.output != "scalar":
            runs.insert(0, "ct = np.ones_like(f(*args_A)) if not isinstance(f(*args_A), tuple) else "
                           "tuple(np.ones_like(o) for o in f(*args_A))")
        twice = "2.0" if ct == "1.0" else "tuple(2.0 * c for c in ct) if isinstance(ct, tuple) else 2.0 * ct"
        runs += [f"print('vjp:', vjp_fn({ct}))", f"print('again, 2 * cotangent:', vjp_fn({twice}))"]
        if failure.transform == "vjp_hooks":
            runs = ["from srcgrad.autograd.graph import saved_tensors_hooks",
                    "with saved_tensors_hooks(lambda a: ('packed', np.array(a, copy=True)), lambda b: b[1]):"
                    ] + ["    " + r for r in runs]
    elif failure.transform in ("jacobian", "hessian"):
        mode = ("auto", "reverse", "forward")[program.seed % 3]
        runs = [f"J = sg.jacobian(f, wrt={wrt}, mode={mode!r})" if failure.transform == "jacobian"
                else f"J = sg.hessian(f, wrt={wrt})"]
        if key == "B":
            runs.append("print('first call:', J(*args_A))")
        runs.append(f"print('{failure.call}:', J(*args_{key}))")
    else:
        runs = ([] if key == "A" else ["sg.jvp(f, args_A, args_A)"]) + [
            f"print('jvp:', sg.jvp(f, args_{key}, args_{key}))  # tangents = the primals"]
    lines += runs
    out = "\n".join(lines)
    expected = _expected_text(program, failure, directory, sets[key])
    return out + ("\n# " + expected.replace("\n", "\n# ") if expected else "")


def _expected_text(program, failure, directory, args) -> str:
    """For a wrong result: NumPy's value and the central-difference derivative at these data."""
    if failure.outcome != "wrong":
        return ""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            fn = load(program.source, directory, str(program.seed)).f
            value = fn(*copy.deepcopy(args))
            text = [f"NumPy: f(*args) = {_short(value)}"]
            if program.output == "scalar" and failure.transform != "jvp":
                grads = fd_gradient(fn, program.args, args)
                text.append("central differences: gradient = " + ", ".join(_short(g) for g in grads))
            elif failure.transform == "jvp":
                u = flatten(args, program.args)
                lspecs = leaf_specs(program.args)
                hi = out_leaves(fn(*unflatten(axpy(u, u, 1e-6, lspecs), program.args)))
                lo = out_leaves(fn(*unflatten(axpy(u, u, -1e-6, lspecs), program.args)))
                text.append("central differences: tangent = " + ", ".join(
                    _short((h - lo_) / 2e-6) for h, lo_ in zip(hi, lo)))
            text.append(f"srcgrad ({failure.transform}, {failure.call}): {failure.detail}")
            return "\n".join(text)
    except Exception as e:  # noqa: BLE001
        return f"(could not compute the references: {type(e).__name__}: {e})"
