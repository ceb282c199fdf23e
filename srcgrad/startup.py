"""The writer of srcgrad's start-up file: its own modules read from one file (issue 15).

Note [The start-up file]
~~~~~~~~~~~~~~~~~~~~~~~~
Python imports a module through some 180 calls of its import machinery (finding the
file among the package's, opening its .pyc apart, checking its header): ~0.05-0.1 ms a
module on top of running the module's code. A disk-cache hit imports 13 of srcgrad's
modules and a first compile ~60, so that machinery was a sixth of a hit's first
gradient. So srcgrad keeps the code of the modules earlier processes imported in one
file beside its own bytecode, `__pycache__/srcgrad-startup.<cache tag>` (under
PYTHONPYCACHEPREFIX where that is set), and `import srcgrad` (its reader,
srcgrad._StartupFile, is in srcgrad/__init__.py) puts a finder for them first on
`sys.meta_path`: one read of the file's index, then per module one stat of its source
and one read of its code. It then runs the modules a transform's disk-cache hit needs
(TRANSFORM_HIT below: none of the compiler, none of the eager runtime) straight from
their specs, without an import's search; a program that never calls a transform pays
~1.5 ms for them.

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
from pathlib import Path

from srcgrad import _PACKAGE, NOT_STORED, STARTUP_FORMAT
from srcgrad.codegen.cache import write_atomically  # (at exit only: no start-up's cost)

# The modules a transform's disk-cache hit runs, each after the srcgrad modules it imports
# (tests/test_startup_file.py checks both against a hit): run at `import srcgrad`.
TRANSFORM_HIT = ("srcgrad._version", "srcgrad.digest", "srcgrad.errors", "srcgrad.contexts",
                 "srcgrad.arguments", "srcgrad.backend", "srcgrad.codegen", "srcgrad.codegen.cache",
                 "srcgrad.codegen.loader", "srcgrad.pipeline", "srcgrad.pipeline.keys",
                 "srcgrad.pipeline.modules", "srcgrad.api")


def _stamp(path: str):
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


def write(found) -> None:
    """The start-up file for the srcgrad modules this process imported (and the ones
    `found`, the file read at start, held and are still valid), if it was missing or out
    of date; at the exit of a process that found it so (srcgrad._StartupFile.note_stale)."""
    if sys.dont_write_bytecode:
        return
    try:
        codes = _codes(found)
        held = {name: (e[0], (e[1], e[2])) for name, e in found.index.items()}
        if codes and {name: c[:2] for name, c in codes.items()} != held:
            write_atomically(Path(found.path), "srcgrad-startup", _pack(codes))
    except (OSError, ValueError, EOFError, TypeError):
        pass  # (a cache: the next process imports as usual)


def _codes(found) -> dict:
    """module name -> (path in the package, stamp, is package, marshalled code)."""
    codes = {}
    for name, (rel, mtime, size, offset, length, is_pkg) in found.index.items():
        try:
            if _stamp(os.path.join(_PACKAGE, rel)) == (mtime, size):
                codes[name] = (rel, (mtime, size), is_pkg, found.read(offset, length))
        except OSError:
            continue
    for name, module in list(sys.modules.items()):
        if name.startswith("srcgrad.") and name not in NOT_STORED and name not in codes:
            try:
                compiled = _compiled(module)
            except (OSError, SyntaxError, ImportError):  # (its source unreadable, or not Python now)
                continue
            if compiled is not None:
                codes[name] = compiled
    return codes


def _compiled(module):
    """(path in the package, stamp, is package, marshalled code) of a source module of this
    package, its code as Python's own loader gives it (the .pyc where that is current)."""
    source = getattr(module, "__file__", None)
    if not source or not source.endswith(".py"):
        return None
    rel = os.path.relpath(source, _PACKAGE)
    if rel.startswith(os.pardir):
        return None
    stamp = _stamp(source)
    code = SourceFileLoader(module.__name__, source).get_code(module.__name__)
    if _stamp(source) != stamp:
        return None  # (edited meanwhile: stored by a later process)
    return rel, stamp, hasattr(module, "__path__"), marshal.dumps(code)


def _pack(codes: dict) -> bytes:
    """The file: its format, the index's length, the index, then the codes (each entry's
    offset counted from the end of the index)."""
    index, blobs, offset = {}, [], 0
    for name, (rel, (mtime, size), is_pkg, blob) in sorted(codes.items()):
        index[name] = (rel, mtime, size, offset, len(blob), is_pkg)
        blobs.append(blob)
        offset += len(blob)
    preloaded = tuple(name for name in TRANSFORM_HIT if name in index)
    head = marshal.dumps((_PACKAGE, preloaded, index))
    return STARTUP_FORMAT + len(head).to_bytes(8, "little") + head + b"".join(blobs)
