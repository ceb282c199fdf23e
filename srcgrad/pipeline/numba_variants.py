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
1e-9 relative, see below): numba's own semantics differ from NumPy's in corners (a 0-d result, an
integer power, a reduction's dtype), and a variant whose results differ runs on
NumPy (never a wrong result). numba's array expressions allocate a temporary per op,
which the fusion pass removes (one loop per elementwise chain: Note [Fused elementwise
chains] in srcgrad.pipeline.fusion); there exp, tanh, sin and cos call kernels that
LLVM vectorizes (Note [Vectorizable math for numba] in srcgrad.codegen.numba_math), where
numba alone calls libm's scalar functions (`tanh` ~15 ns a value, NumPy's SIMD one
~1.4 ns). Other functions stay libm's, so a chain of them over large arrays may still
run slower compiled than on NumPy's vectorised loops: a variant whose compiled run on
the first call was over SLOWER times NumPy's runs NumPy's code too, and `sg.explain`
says so (the better of two runs each, on the first call, which so runs the variant six
times). The values are compared to 1e-12 of the result's largest (a gradient component
that cancels to ~1e-17 is rounding, whichever code rounds it).
`disable_compile()` then stops numba compiling again for
other argument types behind the dispatcher's back (an F-ordered or read-only array of
the same shape, a Python int beside the float the variant saw): such a call, and any
call numba raises in, runs the NumPy code instead, which gives NumPy's answer or error.

`cache=True` keeps numba's machine code beside the module's text in srcgrad's disk
cache (numba's `__pycache__` under the cache's shard directory, keyed by the module
file, whose name is its content's hash); a module not stored there (one with constants
bound at load) is compiled without numba's cache. A later process's first call so reads
two small modules from srcgrad's cache (no trace, no emit) and the verdict, and numba
loads the machine code (`dispatcher.stats.cache_hits`, which `sg.explain` reports): what
it costs beyond that is numba's own first use of its target context (its registries are
imported lazily), which any numba function loaded from numba's cache pays as well.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import sys
import time
import types
import warnings

import numpy

from srcgrad.codegen.numba_reductions import MARKER as REDUCTIONS_MARKER
from srcgrad.codegen.numba_reductions import along_axis, reduction_source

INSTALL = "pip install 'srcgrad[numba]'"
# numba's run this much slower than NumPy's on the first call: NumPy's code runs (1.0: a
# fused elementwise chain of scalar libm calls ties NumPy's SIMD loops, and 1.2 let a
# variant 1.28x slower than NumPy's in the steady state through: bench_numba.py's chain)
SLOWER = 1.0
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

    __slots__ = ("arguments", "backend", "reason", "cached", "loaded", "dispatcher")

    def __init__(self, arguments: str, backend: str, reason: str = "", cached: bool = False,
                 loaded: bool = False):
        self.arguments, self.backend, self.reason, self.cached = arguments, backend, reason, cached
        self.loaded = loaded  # numba's dispatcher loaded the machine code from its disk cache
        self.dispatcher = None  # numba's (its `.stats`: cache hits and misses)

    def line(self) -> str:
        if self.backend == "numba":
            if self.loaded:
                return f"{self.arguments}: numba (machine code loaded from the disk cache)"
            return f"{self.arguments}: numba" + (" (compiled; machine code cached on disk)"
                                                 if self.cached else " (compiled, not cached)")
        return f"{self.arguments}: NumPy" + (f" (numba fallback: {self.reason})" if self.reason else "")


def describe_arguments(args) -> str:
    parts = []
    for a in args:
        if isinstance(a, numpy.ndarray):
            parts.append(f"{a.dtype}[{','.join(map(str, a.shape))}]")
        elif type(a) is tuple:
            parts.append(describe_arguments(a))
        else:
            parts.append(type(a).__name__)
    return "(" + ", ".join(parts) + ")"


def note(compiled, args, backend: str, reason: str = "", cached: bool = False,
         loaded: bool = False) -> None:
    """Record a variant for `sg.explain` (once per argument description)."""
    records = compiled.__dict__.setdefault("numba_records", {})
    text = describe_arguments(args)
    records[text] = Record(text, backend, reason, cached, loaded)


def variant(compiled, rendered, args, fallback):
    """The function a call with arguments like `args` runs: `rendered` (the variant
    rendered for numba) compiled by numba, or `fallback` (NumPy's variant) where numba
    cannot take it (Note [The numba backend])."""
    numba = require()
    odd = _unsupported_argument(args)
    if odd:
        note(compiled, args, "numpy", odd)
        return fallback
    cached = os.path.isfile(getattr(rendered.__code__, "co_filename", ""))
    signature = tuple(numba.typeof(a) for a in args)
    path = _verdict_path(rendered, signature, numba.__version__) if cached else ""
    known = _read_verdict(path)
    if known is not None and known["backend"] != "numba":  # an earlier process's verdict
        note(compiled, args, "numpy", known["reason"])
        return fallback
    try:
        with warnings.catch_warnings():  # (numba's performance and deprecation warnings)
            warnings.simplefilter("ignore")
            jitted = numba.njit(cache=cached, error_model="numpy", fastmath=_fastmath(rendered))(
                _in_named_module(rendered))
            jitted.compile(signature)
            jitted.disable_compile()
    except Exception as err:  # noqa: BLE001 - any numba failure: this variant runs on NumPy
        return _on_numpy(compiled, args, fallback, path,
                         f"numba could not compile it: {_first_line(err)}")
    if known is not None:  # checked by an earlier process (Note [Verdicts kept])
        converts = [(tuple(p), getattr(numpy, name)) for p, name in known["converts"]]
    else:
        reason, converts = _judge(jitted, fallback, args)
        if reason:
            return _on_numpy(compiled, args, fallback, path, reason)
        _write_verdict(path, {"backend": "numba", "converts": [[list(p), c.__name__] for p, c in converts]})
    # (`compile` of a signature numba's index holds loads it: a cache hit, no compile)
    note(compiled, args, "numba", cached=cached, loaded=bool(sum(jitted.stats.cache_hits.values())))
    compiled.numba_records[describe_arguments(args)].dispatcher = jitted
    restore = (lambda out: _convert(out, converts)) if converts else _same

    def call(*args):
        try:
            out = jitted(*args)
        except Exception:  # noqa: BLE001 - other argument types, or numba raised: NumPy's answer
            return fallback(*args)
        return restore(out)

    call.__wrapped__ = fallback
    call.__srcgrad_numba__ = jitted
    return call


def _fastmath(rendered):
    """FMA contraction where the module calls the vectorizable kernels (Note [Vectorizable
    math for numba]); none of numba's other fast-math flags, anywhere."""
    from srcgrad.codegen.numba_math import calls_kernels

    return {"contract"} if calls_kernels(rendered.__globals__) else False


def on_first_call(compiled, rendered, fallback, lock):
    """`variant` of `rendered` for the arguments of its first call (sg.vjp's backward:
    the saved values its forward returned, and the cotangent), compiled holding `lock`
    (one compile at a time)."""
    chosen = []

    def call(*args):
        if not chosen:
            with lock:
                chosen.append(variant(compiled, rendered, args, fallback))
        return chosen[0](*args)

    call.__wrapped__ = fallback
    return call


def _judge(jitted, impl, args) -> tuple:
    """(why NumPy's code runs, or "", the conversions of numba's results): the first call's
    check (Note [The numba backend])."""
    try:
        want = impl(*_copies(args))
        numpy_time = _best_of_two(impl, args)
    except Exception:  # noqa: BLE001 - NumPy's code raises: the real call says why, from it
        return "the NumPy code raised on the first call's arguments", []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = jitted(*_copies(args))
            numba_time = _best_of_two(jitted, args)
    except Exception as err:  # noqa: BLE001
        return f"numba's code raised where NumPy's did not: {_first_line(err)}", []
    converts: list = []
    if not _compare(want, got, (), converts):
        return "numba's result differed from NumPy's on the first call (its type, shape, dtype or values)", []
    if numba_time > SLOWER * numpy_time:  # Note [The numba backend]: never slower than NumPy
        return (f"numba's code ran slower than NumPy's on the first call ({1e3 * numba_time:.3g} ms, "
                f"NumPy's {1e3 * numpy_time:.3g} ms)"), []
    return "", converts


def _on_numpy(compiled, args, fallback, path, reason):
    note(compiled, args, "numpy", reason)
    _write_verdict(path, {"backend": "numpy", "reason": reason})
    return fallback


# Note [Verdicts kept]
# ~~~~~~~~~~~~~~~~~~~~
# The first call's check runs the variant six times (Note [The numba backend]), and a
# variant numba refuses costs its failed compile: seconds a later process need not spend.
# So the verdict is kept beside the module's text in srcgrad's cache, one small JSON file
# per module, argument types and numba version: a later process runs NumPy's code where
# the verdict says so (no numba compile), and where it says numba, loads numba's cached
# machine code and calls it without the check (the conversions of its results kept too).
def _verdict_path(rendered, signature, version: str) -> str:
    from srcgrad.digest import sha256

    tag = sha256(f"{signature}\0{version}".encode()).hexdigest()[:16]
    return f"{os.path.splitext(rendered.__code__.co_filename)[0]}.{tag}.numba.json"


def _read_verdict(path: str):
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            verdict = json.load(file)
        return verdict if verdict.get("backend") in ("numba", "numpy") else None
    except (OSError, ValueError):
        return None


def _write_verdict(path: str, verdict: dict) -> None:
    if not path:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as file:
            json.dump(verdict, file)
        os.replace(tmp, path)
    except OSError:
        pass  # (a read-only cache: the next process checks again)


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


def _best_of_two(fn, args) -> float:
    """The better of two timed runs on copies (the first run of a fresh buffer's pages counts
    against whichever runs first)."""
    best = float("inf")
    for _ in range(2):
        copies = _copies(args)
        start = time.perf_counter()
        fn(*copies)
        best = min(best, time.perf_counter() - start)
    return best


def _unsupported_argument(args) -> str:
    for i, a in enumerate(args):
        if type(a) is tuple:  # sg.vjp's saved values: numba's tuples of arrays and numbers
            inner = _unsupported_argument(a)
            if inner:
                return f"argument {i}, a tuple: its {inner}"
            continue
        if isinstance(a, numpy.ndarray):
            if a.dtype.kind not in "fiub" or a.dtype.byteorder not in "=|":
                return f"argument {i} is an array of dtype {a.dtype}"
        elif type(a) not in _PLAIN_SCALARS:
            return f"argument {i} is a {type(a).__name__}"
        elif type(a) is int and not -2**63 <= a < 2**63:
            return f"argument {i} is an int beyond 64 bits"
    return ""


def _copies(args) -> tuple:
    return tuple(a.copy() if isinstance(a, numpy.ndarray) else _copies(a) if type(a) is tuple
                 else copy.copy(a) for a in args)


def _first_line(err) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = f"{type(err).__name__}: {lines[0] if lines else ''}"
    for line in lines:  # numba's own summary of a typing error names the construct
        if line.startswith(("No implementation of function", "Unknown attribute", "Untyped global",
                            "Use of unsupported", "Cannot determine Numba type")):
            text = f"{type(err).__name__}: {line}"
            break
    return re.sub(r" at 0x[0-9a-f]+", "", text)[:200]  # (an address: not the same text twice)


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


def _compare(want, got, path, converts, scale=None) -> bool:
    """Whether numba's result `got` is NumPy's `want`: types, shapes, dtypes, and values to
    1e-9 relative or 1e-12 of the largest value of the whole result (a gradient that
    cancels to ~1e-17 beside components of 1 differs in its rounding: Note [Vectorizable
    math for numba] in srcgrad.codegen.numba_math)."""
    scale = _largest(want) if scale is None else scale
    if isinstance(want, tuple):
        return (isinstance(got, tuple) and len(got) == len(want)
                and all(_compare(w, g, (*path, i), converts, scale)
                        for i, (w, g) in enumerate(zip(want, got))))
    if isinstance(want, numpy.ndarray):
        return (type(got) is numpy.ndarray and got.shape == want.shape and got.dtype == want.dtype
                and _close(want, got, scale))
    if isinstance(want, numpy.generic):
        if not isinstance(got, (float, int, bool, numpy.generic)) or isinstance(got, numpy.ndarray):
            return False
        if type(got) is not type(want):
            converts.append((path, type(want)))
        return _close(numpy.asarray(want), numpy.asarray(got, dtype=want.dtype), scale)
    if isinstance(want, (float, int, bool)):
        return type(got) is type(want) and _close(numpy.asarray(want), numpy.asarray(got), scale)
    return False


def _largest(out) -> float:
    """The largest finite magnitude among a result's floating values."""
    if isinstance(out, tuple):
        return max((_largest(o) for o in out), default=0.0)
    a = numpy.asarray(out) if isinstance(out, (numpy.ndarray, numpy.generic, float)) else None
    if a is None or a.dtype.kind not in "fc":
        return 0.0
    return float(numpy.max(numpy.abs(a[numpy.isfinite(a)]), initial=0.0))


def _close(want, got, scale) -> bool:
    if want.dtype.kind not in "fc":
        return bool(numpy.array_equal(want, got))
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


_NJIT_HELPER = '''def _njit(fn):
    """`fn` compiled by numba (its machine code cached beside this file); where numba
    cannot type it, `fn` itself runs, as Python over NumPy."""
    jitted = numba.njit(cache=True, error_model="numpy")(fn)
    refused = []

    def call(*args):
        if not refused:
            try:
                return jitted(*args)
            except numba.core.errors.TypingError:
                refused.append(True)
        return fn(*args)

    call.__wrapped__, call.__name__, call.dispatcher = fn, fn.__name__, jitted
    return call'''


def emitted_for_numba(text: str, entries: tuple) -> str:
    """`srcgrad emit --backend numba`: the NumPy module (rendered without `out=`) with its
    helpers written out (Note [Rewrites for numba]) and its entry functions decorated
    `@_njit`, which runs the Python function where numba cannot type it."""
    from srcgrad.codegen import numba_math

    text = rewritten(text)
    helper = _NJIT_HELPER if not numba_math.calls_kernels(text) else _NJIT_HELPER.replace(
        'error_model="numpy")', 'error_model="numpy", fastmath={"contract"})')  # as _fastmath
    markers = (numba_math.MARKER, REDUCTIONS_MARKER)
    at = min((text.find(m) for m in markers if m in text), default=len(text))
    text, kernels = text[:at], text[at:]  # the kernels' source stays as written
    head, _, body = text.partition("\n\n")
    tree = ast.parse(body)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in entries:
            node.decorator_list.append(ast.Name("_njit", ast.Load()))
    at = next(i for i, node in enumerate(tree.body) if not isinstance(node, (ast.Import, ast.ImportFrom)))
    tree.body[at:at] = [ast.Import([ast.alias("numba")])] + ast.parse(helper).body
    code = head + "\n\n" + ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    return code + ("\n\n" + kernels if kernels else "")


# Note [Rewrites for numba]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# numba types none of the rule helpers (they ask for the array namespace, take any index)
# and no slice of a `range`. Where a helper's index is a literal basic index (ints and
# `slice(...)` of int constants: no array, no newaxis), its call is written out as the
# NumPy it does: `t = setitem(x, i, v)` as `t = x.copy(); t[i] = v`, `t = scatter_index(x,
# shape, i)` as `t = xp.zeros(shape); t[i] = x`, `setitem_bar(c, i)` as `c[i]`, and
# `stack_bar(c, [a, b], 0)` as `(c[0], c[1])`; `range(n)[::-1]` is `range(n - 1, -1, -1)`;
# `xp.stack([a, b])` is `xp.array([a, b])` (numba's stack takes arrays only, NumPy's array
# makes the same of numbers and of equal-shaped arrays); a scatter's newaxis items are
# dropped from the index and their axes (index 0) from the value written; `x.sum(axis=k,
# keepdims=True)` (k an int) is `xp.expand_dims(x.sum(axis=k), k)` (numba's has no keepdims);
# `numpy_number(v)` is `v` (njit's error_model="numpy" gives a number's division by zero
# NumPy's inf or nan, the helper's purpose: Note [Scalar code] in srcgrad.passes.scalars),
# `xp.result_type(a)` of one name is `a.dtype`, and max/min along a literal axis call the
# functions of Note [Reductions along an axis for numba] (srcgrad.codegen.numba_reductions).
# Any other call stays, numba refuses it, and the variant runs NumPy's code
# (Note [The numba backend]). The first call's check compares the result with NumPy's
# (a float32 `x` scattered into float64 zeros is a dtype that differs: NumPy's code).
def rewritten(source: str) -> str:
    """The module text for numba (Note [Rewrites for numba]); its leading comments kept."""
    lines = source.split("\n")
    head = []
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        head.append(lines.pop(0))
    from srcgrad.codegen.numba_math import kernel_source
    from srcgrad.pipeline.numba_accumulate import scatters_added_in_place

    tree = scatters_added_in_place(_ForNumba().visit(ast.parse("\n".join(lines))))
    text = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    # Note [Vectorizable math for numba], Note [Reductions along an axis for numba]
    kernels = "\n\n".join(k for k in (kernel_source(text), reduction_source(text)) if k)
    return "\n".join(head) + "\n" + text + ("\n\n" + kernels if kernels else "")


def _is_basic(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Name) and node.func.id == "slice" and not node.keywords
                and all(_is_int_or_none(a) for a in node.args))
    if isinstance(node, ast.Tuple):
        return bool(node.elts) and all(_is_basic(e) for e in node.elts)
    return False


def _no_newaxis(index):
    """A tuple index without its `None` items (the axes they add are dropped from the value
    written: `_newaxis_dropped`)."""
    if isinstance(index, ast.Tuple) and any(_is_none(e) for e in index.elts):
        return ast.Tuple([e for e in index.elts if not _is_none(e)], ast.Load())
    return index


def _newaxis_dropped(v, index):
    """`v[...]` without the length-1 axes `index`'s `None` items made: 0 at each of those,
    every axis of a slice kept, none for an int."""
    if not (isinstance(index, ast.Tuple) and any(_is_none(e) for e in index.elts)):
        return v
    items = [ast.Constant(0) if _is_none(e) else ast.parse("slice(None)", mode="eval").body
             for e in index.elts if _is_none(e) or isinstance(e, ast.Call)]
    return ast.Subscript(v, ast.Tuple(items, ast.Load()), ast.Load())


def _is_int_constant(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_int_or_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None or _is_basic(node) and not (
        isinstance(node, (ast.Call, ast.Tuple)))


def _helper_call(node, name, arity):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
            and len(node.args) == arity and not node.keywords)


class _ForNumba(ast.NodeTransformer):
    """Note [Rewrites for numba]."""

    def visit_Assign(self, node):
        self.generic_visit(node)
        value = node.value
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return node
        name = node.targets[0].id
        if _helper_call(value, "setitem", 3) and _is_basic(value.args[1]):
            x, index, v = value.args
            first = ast.parse(f"{name} = {ast.unparse(x)}.copy()").body[0]
        elif _helper_call(value, "scatter_index", 3) and _is_basic(_no_newaxis(value.args[2])):
            v, shape, index = value.args
            index, v = _no_newaxis(index), _newaxis_dropped(v, index)
            first = ast.parse(f"{name} = xp.zeros({ast.unparse(shape)})").body[0]
        else:
            return node
        store = ast.Subscript(ast.Name(name, ast.Load()), index, ast.Store())
        return [first, ast.Assign([store], v)]

    def visit_Call(self, node):
        self.generic_visit(node)
        reduction = along_axis(node)  # Note [Reductions along an axis for numba]
        if reduction is not None:
            return reduction
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "stack"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "xp"
                and len(node.args) == 1 and isinstance(node.args[0], ast.List)
                and not node.keywords):  # numba's stack takes no numbers: array's does
            node.func.attr = "array"
            return node
        kw = {k.arg: k.value for k in node.keywords}
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "sum" and not node.args
                and kw.keys() == {"axis", "keepdims"} and _is_int_constant(kw["axis"])
                and isinstance(kw["keepdims"], ast.Constant) and kw["keepdims"].value is True):
            node.keywords = [k for k in node.keywords if k.arg == "axis"]  # numba: no keepdims
            return ast.Call(ast.Attribute(ast.Name("xp", ast.Load()), "expand_dims", ast.Load()),
                            [node, kw["axis"]], [])
        if _helper_call(node, "numpy_number", 1):  # njit's error_model="numpy" does its work
            return node.args[0]
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "result_type"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "xp"
                and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and not node.keywords):
            return ast.Attribute(node.args[0], "dtype", ast.Load())  # one array's dtype
        if _helper_call(node, "setitem_bar", 2) and _is_basic(node.args[1]):
            return ast.Subscript(node.args[0], node.args[1], ast.Load())
        if (_helper_call(node, "stack_bar", 3) and isinstance(node.args[1], ast.List)
                and isinstance(node.args[2], ast.Constant) and node.args[2].value == 0):
            c = node.args[0]
            return ast.Tuple([ast.Subscript(c, ast.Constant(i), ast.Load())
                              for i in range(len(node.args[1].elts))], ast.Load())
        return node

    def visit_Subscript(self, node):
        self.generic_visit(node)
        s = node.slice
        if (isinstance(node.value, ast.Call) and _helper_call(node.value, "range", 1)
                and isinstance(s, ast.Slice) and s.lower is None and s.upper is None
                and isinstance(s.step, ast.UnaryOp) and isinstance(s.step.op, ast.USub)
                and isinstance(s.step.operand, ast.Constant) and s.step.operand.value == 1):
            n = ast.unparse(node.value.args[0])
            return ast.parse(f"range(({n}) - 1, -1, -1)", mode="eval").body
        return node
