"""srcgrad's own modules read from one file at the start of a process (issue 15).

Note [The start-up file]
~~~~~~~~~~~~~~~~~~~~~~~~
Python imports a module through some 180 calls of its import machinery (finding the
file among the package's, opening its .pyc apart, checking its header): ~0.1 ms a
module on top of running the module's code. A disk-cache hit imports 13 of srcgrad's
modules and a first compile ~75, so that machinery was a third of a hit's first
gradient. So srcgrad keeps the code of the modules earlier processes imported in one
file beside its own bytecode, `__pycache__/srcgrad-startup.<cache tag>` (under
PYTHONPYCACHEPREFIX where that is set), and `import srcgrad` puts a finder for them
first on `sys.meta_path`: one read of the file's index, then per module one stat of
its source and one read of its code.

It only holds what Python's own bytecode cache holds, and never decides anything:
- a module is served while its source has the size and modification time recorded
  beside its code (what a .pyc is checked against); otherwise Python imports it as
  usual. A file written for another Python, another copy of srcgrad or in another
  format is not read;
- the modules it serves are ordinary source modules: their loader is a
  SourceFileLoader (`get_source`, resources, `importlib.reload`), `__file__` is the
  source, so tracebacks, `inspect` and debuggers read the source as before;
- it is written at the exit of a process that found it missing or out of date, from
  the .pyc files of the srcgrad modules that process imported (entries still valid
  are kept), to a temporary file that is then renamed over it (a reader sees a whole
  file or the old one); never where Python writes no bytecode
  (`sys.dont_write_bytecode`), and nothing happens where the directory is read-only.
"""

import marshal
import os
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import MAGIC_NUMBER, module_from_spec, spec_from_file_location

# The modules a transform's disk-cache hit runs, each after the srcgrad modules it imports
# (tests/test_startup_file.py checks both against a hit): read at `import srcgrad`.
TRANSFORM_HIT = ("srcgrad._version", "srcgrad.digest", "srcgrad.errors", "srcgrad.contexts",
                 "srcgrad.arguments", "srcgrad.backend", "srcgrad.codegen", "srcgrad.codegen.cache",
                 "srcgrad.codegen.loader", "srcgrad.pipeline", "srcgrad.pipeline.keys",
                 "srcgrad.pipeline.modules", "srcgrad.api")

_FORMAT = b"srcgrad-startup 1\n" + MAGIC_NUMBER
_CODE = (lambda: None).__code__.__class__
_PACKAGE = os.path.dirname(__file__)
_SKIPPED = frozenset({"srcgrad", "srcgrad.startup", "srcgrad.__main__"})  # (imported before it)


def _stamp(path: str):
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


class _StoredLoader(SourceFileLoader):
    """A source module whose code comes from the start-up file (read once, then as usual)."""

    def __init__(self, fullname, path, finder, entry):
        super().__init__(fullname, path)
        self._finder, self._entry = finder, entry

    def get_code(self, fullname):
        entry, self._entry = self._entry, None  # a reload reads the source as usual
        if entry is not None and fullname == self.name:
            try:
                code = marshal.loads(os.pread(self._finder.fd, entry[4], entry[3]))
                if code.__class__ is _CODE:
                    return code
            except (OSError, ValueError, EOFError, TypeError):
                pass
            self._finder.note_stale()
        return super().get_code(fullname)


class _Finder:
    """Finds srcgrad's modules in the start-up file (Note [The start-up file])."""

    def __init__(self, path: str):
        self.path = path
        self.fd = -1
        self.index: dict = {}  # module name -> (path in the package, is package, stamp..., offset, length)
        self.stale = False  # True: written at exit (a module this process imports is not in it)

    def open(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except OSError:
            self.note_stale()
            return
        try:
            head = os.read(fd, len(_FORMAT) + 8)
            size = int.from_bytes(head[len(_FORMAT):], "little")
            if head[:len(_FORMAT)] != _FORMAT or size <= 0:
                raise ValueError("another format")
            package, index = marshal.loads(os.read(fd, size))
            if package != _PACKAGE:
                raise ValueError("another copy of srcgrad")
        except (OSError, ValueError, EOFError, TypeError):
            os.close(fd)
            self.note_stale()
            return
        self.fd, self.index = fd, index

    def note_stale(self) -> None:
        """A module this process imports is missing from the file or changed: the file is
        written again at exit."""
        if not self.stale:
            self.stale = True
            if not sys.dont_write_bytecode:
                import atexit

                atexit.register(self.write)

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("srcgrad.") or fullname in _SKIPPED:
            return None
        entry = self.index.get(fullname)
        if entry is None:
            self.note_stale()
            return None
        source = os.path.join(_PACKAGE, entry[0])
        try:
            if _stamp(source) != (entry[1], entry[2]):
                raise OSError("changed")
        except OSError:
            self.note_stale()
            return None
        loader = _StoredLoader(fullname, source, self, entry)
        within = [os.path.dirname(source)] if entry[5] else None  # a package's submodules
        return spec_from_file_location(fullname, source, loader=loader, submodule_search_locations=within)

    def preload(self, names) -> None:
        """Run the stored code of the modules `names`, in that order, as importlib's own
        recipe for importing a module from its spec does (`module_from_spec`, then
        `exec_module`), without the search that each `import` makes: a third of the
        cost of importing them one by one. Called while `srcgrad` itself is being
        imported, so no other thread can import a submodule of it meanwhile (Python
        imports the parent package first, under its lock). The first module that is not
        stored or has changed ends it: the rest are imported as usual when first used."""
        for name in names:
            if name in sys.modules:
                continue
            spec = self.find_spec(name)
            if spec is None:
                return
            module = module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except Exception:  # (its own import raises the error again where it is used)
                sys.modules.pop(name, None)
                return
            parent, _, child = name.rpartition(".")
            setattr(sys.modules[parent], child, module)

    def write(self) -> None:
        """The start-up file for the srcgrad modules this process imported (and the ones
        it already held that are still valid), if it was missing or out of date."""
        if sys.dont_write_bytecode:
            return
        try:
            codes = self._codes()
            held = {name: (e[0], (e[1], e[2])) for name, e in self.index.items()}
            if codes and {name: c[:2] for name, c in codes.items()} != held:
                _write_atomically(self.path, _pack(codes))
        except (OSError, ValueError, EOFError, TypeError):
            pass  # (a cache: the next process imports as usual)

    def _codes(self) -> dict:
        """module name -> (path in the package, stamp, is package, marshalled code)."""
        codes = {}
        for name, (rel, mtime, size, offset, length, is_pkg) in self.index.items():
            try:
                if _stamp(os.path.join(_PACKAGE, rel)) == (mtime, size):
                    codes[name] = (rel, (mtime, size), is_pkg, os.pread(self.fd, length, offset))
            except OSError:
                continue
        for name, module in list(sys.modules.items()):
            if name.startswith("srcgrad.") and name not in _SKIPPED and name not in codes:
                try:
                    found = _compiled(module)
                except OSError:  # (no .pyc: Python could not write it)
                    continue
                if found is not None:
                    codes[name] = found
        return codes


def _compiled(module):
    """(path in the package, stamp, is package, marshalled code) from the module's .pyc,
    where that .pyc is the current one of a source file in this package."""
    source, cached = getattr(module, "__file__", None), getattr(module, "__cached__", None)
    if not source or not cached or not source.endswith(".py"):
        return None
    rel = os.path.relpath(source, _PACKAGE)
    if rel.startswith(os.pardir):
        return None
    mtime, size = _stamp(source)
    with open(cached, "rb") as f:
        data = f.read()
    # a timestamp .pyc: magic, flags 0, the source's mtime in seconds and its size (PEP 552)
    if (data[:4] != MAGIC_NUMBER or int.from_bytes(data[4:8], "little") != 0
            or int.from_bytes(data[8:12], "little") != (mtime // 10**9) & 0xFFFFFFFF
            or int.from_bytes(data[12:16], "little") != size & 0xFFFFFFFF):
        return None
    return rel, (mtime, size), hasattr(module, "__path__"), data[16:]


def _pack(codes: dict) -> bytes:
    index, blobs, offset = {}, [], 0
    for name, (rel, (mtime, size), is_pkg, blob) in sorted(codes.items()):
        index[name] = (rel, mtime, size, offset, len(blob), is_pkg)
        blobs.append(blob)
        offset += len(blob)
    head = marshal.dumps((_PACKAGE, index))
    start = len(_FORMAT) + 8 + len(head)  # the offsets count from the end of the index
    index = {name: (*e[:3], e[3] + start, *e[4:]) for name, e in index.items()}
    head = marshal.dumps((_PACKAGE, index))
    if len(_FORMAT) + 8 + len(head) != start:  # (marshal's ints: a larger offset, a longer index)
        raise ValueError("index size changed")
    return _FORMAT + len(head).to_bytes(8, "little") + head + b"".join(blobs)


def _write_atomically(path: str, data: bytes) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def install(cached: str | None) -> None:
    """Put the finder first on `sys.meta_path`; `cached` is srcgrad/__init__'s .pyc path
    (None where Python keeps no bytecode for it: then nothing is read or written)."""
    if not cached or not hasattr(os, "pread") or any(type(f).__name__ == "_Finder" for f in sys.meta_path):
        return  # (no os.pread on Windows: imports as usual there; one finder, even if srcgrad is re-imported)
    finder = _Finder(os.path.join(os.path.dirname(cached), f"srcgrad-startup.{sys.implementation.cache_tag}"))
    finder.open()
    sys.meta_path.insert(0, finder)
    finder.preload(TRANSFORM_HIT)
