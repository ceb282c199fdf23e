"""`backend="numba"`: a transform's shape-specialised variant compiled by `numba.njit`.

Note [The numba backend]
~~~~~~~~~~~~~~~~~~~~~~~~
A variant's generated function (srcgrad.pipeline.modules: `Compiled.specialized`) is
plain Python over NumPy arrays bound to `xp = numpy`, which is what numba compiles.
It is rendered for numba as for an immutable namespace (no `out=` buffer: numba's
ufuncs take no keyword `out`), under its own cache key, and `variant` hands it to
`numba.njit(cache=True, error_model="numpy")` and compiles it at
once for the first call's argument types (`dispatcher.compile(signature)`: nothing
runs), so whatever numba cannot type (a helper that is plain Python, a keyword numba's
NumPy lacks, a container, an aux value) is a numba error caught here, not a crash at
some later call: that variant runs on NumPy, and the reason is recorded for
`sg.explain`. Then the compiled code and the NumPy code both run once on copies of
the first call's arguments and their results are compared (shapes, dtypes, values to
1e-9 relative): numba's own semantics differ from NumPy's in corners (a 0-d result, an
integer power, a reduction's dtype), and a variant whose results differ runs on
NumPy (never a wrong result). numba's array expressions allocate a temporary per op
and its transcendental functions are scalar code, so an elementwise chain over large
arrays runs slower compiled than on NumPy's vectorised loops: a variant whose compiled
run on the first call was over SLOWER times NumPy's runs NumPy's code too, and
`sg.explain` says so (the time of one run; a fusion pass is what would change it).
`disable_compile()` then stops numba compiling again for
other argument types behind the dispatcher's back (an F-ordered or read-only array of
the same shape, a Python int beside the float the variant saw): such a call, and any
call numba raises in, runs the NumPy code instead, which gives NumPy's answer or error.

`cache=True` keeps numba's machine code beside the module's text in srcgrad's disk
cache (numba's `__pycache__` under the cache's shard directory, keyed by the module
file, whose name is its content's hash); a module not stored there (one with constants
bound at load) is compiled without numba's cache.
"""

from __future__ import annotations

import copy
import os
import sys
import time
import types
import warnings

import numpy

INSTALL = "pip install 'srcgrad[numba]'"
SLOWER = 1.2  # numba's run this much slower than NumPy's on the first call: NumPy's code runs
_PLAIN_SCALARS = (float, int, bool, numpy.float64, numpy.float32, numpy.int64)


def require():
    """numba, or an ImportError saying which extra installs it."""
    try:
        import numba
    except ImportError as err:
        raise ImportError(f"srcgrad: backend='numba' needs numba, which is not installed: {INSTALL}") \
            from err
    return numba


class Record:
    """One variant as `sg.explain` reports it."""

    __slots__ = ("arguments", "backend", "reason", "cached")

    def __init__(self, arguments: str, backend: str, reason: str = "", cached: bool = False):
        self.arguments, self.backend, self.reason, self.cached = arguments, backend, reason, cached

    def line(self) -> str:
        if self.backend == "numba":
            return f"{self.arguments}: numba" + (" (machine code cached on disk)" if self.cached else "")
        return f"{self.arguments}: NumPy" + (f" (numba fallback: {self.reason})" if self.reason else "")


def describe_arguments(args) -> str:
    parts = []
    for a in args:
        if isinstance(a, numpy.ndarray):
            parts.append(f"{a.dtype}[{','.join(map(str, a.shape))}]")
        else:
            parts.append(type(a).__name__)
    return "(" + ", ".join(parts) + ")"


def note(compiled, args, backend: str, reason: str = "", cached: bool = False) -> None:
    """Record a variant for `sg.explain` (once per argument description)."""
    records = compiled.__dict__.setdefault("numba_records", {})
    text = describe_arguments(args)
    records[text] = Record(text, backend, reason, cached)


def variant(compiled, rendered, args, fallback):
    """The function a call with arguments like `args` runs: `rendered` (the variant
    rendered for numba) compiled by numba, or `fallback` (NumPy's variant) where numba
    cannot take it (Note [The numba backend])."""
    numba = require()
    impl = fallback
    odd = _unsupported_argument(args)
    if odd:
        note(compiled, args, "numpy", odd)
        return impl
    cached = os.path.isfile(getattr(rendered.__code__, "co_filename", ""))
    try:
        with warnings.catch_warnings():  # (numba's performance and deprecation warnings)
            warnings.simplefilter("ignore")
            jitted = numba.njit(cache=cached, error_model="numpy")(_in_named_module(rendered))
            jitted.compile(tuple(numba.typeof(a) for a in args))
            jitted.disable_compile()
    except Exception as err:  # noqa: BLE001 - any numba failure: this variant runs on NumPy
        note(compiled, args, "numpy", f"numba could not compile it: {_first_line(err)}")
        return impl
    try:
        copies = _copies(args)
        start = time.perf_counter()
        want = impl(*copies)
        numpy_time = time.perf_counter() - start
    except Exception:  # noqa: BLE001 - NumPy's code raises: the real call says why, from it
        note(compiled, args, "numpy", "the NumPy code raised on the first call's arguments")
        return impl
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = jitted(*_copies(args))
            copies = _copies(args)
            start = time.perf_counter()
            jitted(*copies)
            numba_time = time.perf_counter() - start
    except Exception as err:  # noqa: BLE001
        note(compiled, args, "numpy", f"numba's code raised where NumPy's did not: {_first_line(err)}")
        return impl
    restore = _restorer(want, got)
    if restore is None:
        note(compiled, args, "numpy", "numba's result differed from NumPy's on the first call "
                                      "(its type, shape, dtype or values)")
        return impl
    if numba_time > SLOWER * numpy_time:  # Note [The numba backend]: never slower than NumPy
        note(compiled, args, "numpy", f"numba's code ran slower than NumPy's on the first call "
                                      f"({1e3 * numba_time:.3g} ms, NumPy's {1e3 * numpy_time:.3g} ms)")
        return impl
    note(compiled, args, "numba", cached=cached)

    def call(*args):
        try:
            out = jitted(*args)
        except Exception:  # noqa: BLE001 - other argument types, or numba raised: NumPy's answer
            return impl(*args)
        return restore(out)

    call.__wrapped__ = impl
    call.__srcgrad_numba__ = jitted
    return call


def _in_named_module(impl):
    """`impl` with its globals in a module importable by name: numba's cache rebuilds a
    function's environment by importing its module (`__name__`) when it loads machine code
    in a later process, and a generated module is no package's. The name is the module
    file's (its content's hash), so every process gives the same function the same name."""
    stem = os.path.basename(impl.__code__.co_filename).partition(".")[0]
    name = f"_srcgrad_numba_{''.join(c if c.isalnum() else '_' for c in stem)}"
    module = sys.modules.get(name)
    if module is None:
        module = sys.modules[name] = types.ModuleType(name)
    module.__dict__.update({k: v for k, v in impl.__globals__.items() if not k.startswith("__")})
    return types.FunctionType(impl.__code__, module.__dict__, impl.__name__, impl.__defaults__,
                              impl.__closure__)


def _unsupported_argument(args) -> str:
    for i, a in enumerate(args):
        if isinstance(a, numpy.ndarray):
            if a.dtype.kind not in "fiub" or a.dtype.byteorder not in "=|":
                return f"argument {i} is an array of dtype {a.dtype}"
        elif type(a) not in _PLAIN_SCALARS:
            return f"argument {i} is a {type(a).__name__}"
        elif type(a) is int and not -2**63 <= a < 2**63:
            return f"argument {i} is an int beyond 64 bits"
    return ""


def _copies(args) -> tuple:
    return tuple(a.copy() if isinstance(a, numpy.ndarray) else copy.copy(a) for a in args)


def _first_line(err) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = f"{type(err).__name__}: {lines[0] if lines else ''}"
    for line in lines:  # numba's own summary of a typing error names the construct
        if line.startswith(("No implementation of function", "Unknown attribute", "Untyped global",
                            "Use of unsupported", "Cannot determine Numba type")):
            text = f"{type(err).__name__}: {line}"
            break
    return text[:200]


def _restorer(want, got):
    """A function making numba's results look as NumPy's did (a Python float where NumPy
    gave numpy.float64), or None where they differ beyond that."""
    converts = []
    if not _compare(want, got, (), converts):
        return None
    if not converts:
        return _same
    return lambda out: _convert(out, converts)


def _same(out):
    return out


def _compare(want, got, path, converts) -> bool:
    if isinstance(want, tuple):
        return (isinstance(got, tuple) and len(got) == len(want)
                and all(_compare(w, g, (*path, i), converts) for i, (w, g) in enumerate(zip(want, got))))
    if isinstance(want, numpy.ndarray):
        return (type(got) is numpy.ndarray and got.shape == want.shape and got.dtype == want.dtype
                and _close(want, got))
    if isinstance(want, numpy.generic):
        if not isinstance(got, (float, int, bool, numpy.generic)) or isinstance(got, numpy.ndarray):
            return False
        if type(got) is not type(want):
            converts.append((path, type(want)))
        return _close(numpy.asarray(want), numpy.asarray(got, dtype=want.dtype))
    if isinstance(want, (float, int, bool)):
        return type(got) is type(want) and _close(numpy.asarray(want), numpy.asarray(got))
    return False


def _close(want, got) -> bool:
    if want.dtype.kind not in "fc":
        return bool(numpy.array_equal(want, got))
    finite = numpy.abs(want[numpy.isfinite(want)]) if want.ndim else numpy.abs(want[()])
    scale = float(numpy.max(finite, initial=0.0))  # (a sum's cancellation: near 0 beside 1e3)
    return bool(numpy.allclose(got, want, rtol=1e-9, atol=1e-12 * scale, equal_nan=True)
                and numpy.array_equal(numpy.isinf(got), numpy.isinf(want)))


def _convert(out, converts):
    for path, cls in converts:
        out = _replace(out, path, cls)
    return out


def _replace(out, path, cls):
    if not path:
        return cls(out)
    i = path[0]
    return (*out[:i], _replace(out[i], path[1:], cls), *out[i + 1:])
