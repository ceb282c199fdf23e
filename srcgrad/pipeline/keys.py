"""Cache keys: what a generated module depends on, hashed.

Kept apart from `programs` so that a cache hit (memory or disk) never imports the
compiler's passes: looking a module up needs the function's fingerprint and this
key, nothing else.

Note [Quick keys]
~~~~~~~~~~~~~~~~~
`cache_key` fingerprints a *parsed* function (srcgrad.frontend.resolve): its gast
tree's free names and the rule each NumPy callee is. Parsing imports gast, and naming
rules imports the derivative table: tens of milliseconds at the start of a process
whose module is already on disk (issue 15). `quick_key` gets the same guarantee from
the code object instead, reading nothing a disk-cache hit does not already have:

* the text of the definition (the lines its code covers, from linecache), where it
  is (file name and first line: messages name lines), its defaults and closure;
* every name its code (and the code nested in it) loads, `co_names`: that is each
  global or builtin it reads *and* each attribute name. A global's value is printed
  as `fingerprint` prints it (an array by its bytes, a helper function by its own
  quick fingerprint), a module by the members it has under any of those names. A
  superset of what the function reads can only give a new key where none was
  needed (a recompile), never the old key for changed code;
* NumPy's, `math`'s and the builtins' objects are named, not fingerprinted: NumPy's
  version and Python's are in the key, and srcgrad's rules for them are in the
  compiler fingerprint.

Where some value has no such print (a transform's result called inside, a custom
Function class, a lambda, an object) `quick_key` answers None and the caller uses
`cache_key`: the quick key is an acceleration, never the only way to a module. The
quick fingerprint also lists the function's bindings (Note [Bindings] in
srcgrad.pipeline.modules) from the same names, so a hit never parses the function.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import io
import linecache
import os
import sys
import types

import numpy

from srcgrad._version import __version__ as VERSION
from srcgrad.codegen.cache import sha256  # hashlib's, without importing OpenSSL
from srcgrad.errors import last_line


def _scan(directory: str, suffixes: tuple, recurse: bool, out: list) -> None:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if recurse and entry.name != "__pycache__":
                _scan(entry.path, suffixes, recurse, out)
        elif entry.name.endswith(suffixes):
            st = entry.stat()
            out.append(f"\0{entry.path}:{st.st_size}:{st.st_mtime_ns}")


@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """What every generated module depends on besides its own function: srcgrad's sources
    (passes, rules, codegen) and templates, not only the version number.

    The files are identified by path, size and modification time, not by their bytes:
    hashing some 100 files cost 6-8 ms at the start of every process (issue 15), while an
    edit always changes a file's mtime and an installed version's files never change. A
    false miss (a file touched but unchanged) recompiles; a stale hit would need an edit
    that keeps both size and nanosecond mtime. One `os.scandir` walk, no pathlib and no
    import of the renderer: this runs on every disk-cache hit.

    An installed copy (in site-packages, not an editable checkout) is identified once per
    installation: its version and the stamps of its `__init__.py` and `_version.py`,
    which every (re)install writes anew. Editing an installed copy's files in place is
    not seen; `srcgrad cache clear` after such an edit.
    """
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts: list = []
    if installed(package):
        for name in ("__init__.py", "_version.py"):
            st = os.stat(os.path.join(package, name))
            parts.append(f"\0{name}:{st.st_size}:{st.st_mtime_ns}")
        return sha256(f"{VERSION}:{package}{''.join(parts)}".encode()).hexdigest()[:16]
    _scan(package, (".py", ".j2"), True, parts)  # a wheel holds srcgrad/templates/*.j2
    _scan(os.path.join(os.path.dirname(package), "templates"), (".j2",), False, parts)  # a checkout
    h = sha256(VERSION.encode())
    h.update("".join(parts).encode())
    return h.hexdigest()[:16]


def installed(package: str) -> bool:
    """Whether srcgrad's package directory is an installed copy (site-packages), whose
    files only an install writes, rather than a source checkout someone edits."""
    return os.path.basename(os.path.dirname(package)) in ("site-packages", "dist-packages")


def cache_key(fs, options: tuple) -> str | None:
    """Hash of everything the generated module depends on; None when not cacheable."""
    from srcgrad.frontend.resolve import fingerprint  # the parsed path: a miss, or no quick key

    fp = fingerprint(fs)
    if fp is None:
        return None
    return _key(fp, options)


def _key(fp: str, options: tuple) -> str:
    h = sha256()
    for part in (fp, _text(options), VERSION, compiler_fingerprint(), numpy.__version__):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


_DTYPE_REPRS: dict = {}  # id of a builtin dtype -> (the dtype, its repr)


def _text(value) -> str:
    """`repr(value)`, the same text, for the tuples of a variant's options: NumPy's
    dtype repr is Python code, ~15 microseconds an argument of every first call (issue
    15), so a builtin dtype's (one object per type, always printed alike) is kept."""
    cls = value.__class__
    if cls is tuple:
        items = [_text(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, numpy.dtype) and value.isbuiltin == 1:
        hit = _DTYPE_REPRS.get(id(value))  # (by identity: equal dtypes may print apart)
        if hit is None or hit[0] is not value:
            hit = _DTYPE_REPRS[id(value)] = (value, repr(value))
        return hit[1]
    return repr(value)


def quick_key(fn, options: tuple) -> tuple | None:
    """(cache key, bindings, function name) of a plain function, from its code object
    alone (Note [Quick keys]); None when it has no quick fingerprint."""
    found = _Quick()
    fp = found.function(fn)
    if fp is None:
        return None
    fp = f"quick:{sys.version_info[:3]}:{fp}"
    return _key(fp, options), found.bindings, found.name


# Modules whose objects are named, not fingerprinted: their contents are fixed by the
# versions in the key (Python's, NumPy's, srcgrad's own).
_NAMED = frozenset({"numpy", "math", "cmath", "builtins", "operator", "srcgrad"})
# Modules whose members are not bindings (as srcgrad.frontend.resolve._STABLE_MODULES).
_UNGUARDED = frozenset({"numpy", "math", "cmath", "scipy", "cupy", "srcgrad", "builtins",
                        "operator", "functools", "itertools", "collections", "dataclasses"})
_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def _root(module_name) -> str:
    return module_name.partition(".")[0] if isinstance(module_name, str) else ""


class _Quick:
    """One quick fingerprint: the prints, the bindings met on the way, the name."""

    def __init__(self):
        self.bindings: list = []
        self.name = None
        self._stack: set = set()

    def function(self, fn, top: bool = True) -> str | None:
        if hasattr(fn, "__srcgrad__"):
            return None  # a transform's result: its generated code is what gets parsed
        fn = inspect.unwrap(fn, stop=lambda f: hasattr(f, "__srcgrad__"))
        code = getattr(fn, "__code__", None)
        if hasattr(fn, "__srcgrad__") or not isinstance(fn, types.FunctionType) \
                or code.co_name == "<lambda>":
            return None  # a lambda is named after its assignment, which only parsing finds
        if top:
            self.name = code.co_name
        if id(fn) in self._stack:
            return "recursive:" + fn.__qualname__
        lines = source_lines(code.co_filename)
        chunk = lines[code.co_firstlineno - 1:last_line(code)]
        if not chunk:
            return None
        self._stack.add(id(fn))
        h = sha256("".join(chunk).encode())
        h.update(f"\0{os.path.basename(code.co_filename)}:{code.co_firstlineno}".encode())
        names = sorted(_names(code))
        parts = [("defaults", fn.__defaults__), ("kwdefaults", fn.__kwdefaults__)]
        if fn.__closure__:
            for var, cell in zip(code.co_freevars, fn.__closure__):
                try:
                    parts.append((f"cell:{var}", cell.cell_contents))
                except ValueError:
                    parts.append((f"cell:{var}", "<empty>"))
        for name in names:
            value = fn.__globals__.get(name, _MISSING)
            if value is _MISSING:
                value = getattr(builtins, name, _MISSING)
            else:
                self._bind(fn.__globals__, name, value, names)
            parts.append((name, value))
        for label, value in parts:
            text = self.value(value, names)
            if text is None:
                return None
            h.update(f"\0{label}={text}".encode())
        self._stack.discard(id(fn))
        return h.hexdigest()

    def value(self, value, names) -> str | None:
        if value is _MISSING:
            return "missing"
        if isinstance(value, _SCALARS):
            return f"{type(value).__name__}:{value!r}"
        if isinstance(value, (tuple, list)):
            parts = [self.value(v, names) for v in value]
            return None if None in parts else f"{type(value).__name__}({','.join(parts)})"
        if isinstance(value, numpy.ndarray):
            return f"array:{value.dtype}:{value.shape}:" + sha256(value.tobytes()).hexdigest()
        if isinstance(value, (numpy.generic, numpy.dtype)):
            return f"np:{value!r}"
        if isinstance(value, types.ModuleType):
            return self.module(value, names)
        if isinstance(value, types.FunctionType) and _root(value.__module__) not in _NAMED:
            fp = self.function(value, top=False)
            return None if fp is None else "fn:" + fp
        if isinstance(value, type) and getattr(value, "_srcgrad_function", False):
            return None  # a custom Function class: its methods are parsed (cache_key)
        name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        module = getattr(value, "__module__", None)
        if isinstance(name, str) and _root(module) in _NAMED and _resolves(module, name, value):
            return f"named:{module}.{name}"  # np.tanh, np.float64, len, math.exp
        return None  # an object, or one made at run time (np.frompyfunc): not by its name

    def module(self, module, names) -> str | None:
        """A module by its name and its members under the names the code loads."""
        if id(module) in self._stack:
            return "module:" + module.__name__
        members = vars(module)
        named = _root(module.__name__) in _NAMED
        if not named and "__getattr__" in members:
            return None  # members made on demand: which ones are read is not known here
        self._stack.add(id(module))
        parts = ["module:" + module.__name__]
        for n in names:
            member = members.get(n, _MISSING)
            if member is _MISSING:
                continue
            text = self.value(member, names)
            if text is None:
                self._stack.discard(id(module))
                return None
            parts.append(f"{n}={text}")
        self._stack.discard(id(module))
        return "\0".join(parts)

    def _bind(self, namespace, name, value, names) -> None:
        """Note [Bindings]: a global the code may read, or a user module's members it may
        read, and so on through the plain functions it calls (they are inlined)."""
        if not isinstance(value, types.ModuleType):
            self.bindings.append((namespace, name, value))  # a callee's own: when printed
        elif _root(value.__name__) not in _UNGUARDED:
            members = vars(value)
            for n in names:
                member = members.get(n, _MISSING)
                if member is not _MISSING and not isinstance(member, types.ModuleType):
                    self.bindings.append((members, n, member))


_MISSING = object()


def source_lines(filename: str) -> list:
    """`linecache.getlines(filename)`, the same lines, without tokenize's encoding
    detection where the file is plain UTF-8 (no BOM, no coding cookie): a tenth of a
    millisecond of a disk-cache hit's quick key (issue 15). The lines are entered in
    linecache as linecache enters them (size and mtime: `checkcache` sees an edit)."""
    if filename in linecache.cache or not os.path.isabs(filename):
        return linecache.getlines(filename)
    try:
        with open(filename, "rb") as f:
            st, data = os.fstat(f.fileno()), f.read()
        first = data.find(b"\n")
        second = data.find(b"\n", first + 1) if first >= 0 else -1
        head = data if second < 0 else data[:second]  # the lines a coding cookie may be on
        if b"coding" in head or data.startswith(b"\xef\xbb\xbf"):
            return linecache.getlines(filename)
        lines = io.StringIO(data.decode("utf-8"), newline=None).readlines()
    except (OSError, UnicodeDecodeError):
        return linecache.getlines(filename)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[filename] = (st.st_size, st.st_mtime, lines, filename)
    return lines


def _resolves(module: str, name: str, value) -> bool:
    """Whether `module.name` is `value` itself: a library's own object, which its name and
    the library's version identify."""
    obj = sys.modules.get(module, _MISSING)
    for part in name.split("."):
        obj = getattr(obj, part, _MISSING)
    return obj is value


def _names(code) -> set:
    """Every name the code and the code nested in it loads as a global or an attribute."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


