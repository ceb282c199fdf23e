"""Cache keys: what a generated module depends on, hashed.

Kept apart from `programs` so that a cache hit (memory or disk) never imports the
compiler's passes: looking a module up needs the function's fingerprint and this
key, nothing else.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy

from srcgrad._version import __version__ as VERSION
from srcgrad.codegen import emit
from srcgrad.frontend.parse import FunctionSource
from srcgrad.frontend.resolve import fingerprint


@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """What every generated module depends on besides its own function: srcgrad's sources
    (passes, rules, codegen) and templates, not only the version number.

    The sources are identified by path, size and modification time, not by their bytes:
    hashing some 80 files cost 6-8 ms at the start of every process (issue 15), while an
    edit always changes a file's mtime and an installed version's files never change. A
    false miss (a file touched but unchanged) recompiles; a stale hit would need an edit
    that keeps both size and nanosecond mtime.
    """
    h = hashlib.sha256(VERSION.encode())
    package = Path(__file__).parent.parent
    for path in sorted(package.rglob("*.py")):
        stat = path.stat()
        h.update(f"\0{path.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    h.update(emit.templates_fingerprint().encode())
    return h.hexdigest()[:16]


def cache_key(fs: FunctionSource, options: tuple) -> str | None:
    """Hash of everything the generated module depends on; None when not cacheable."""
    fp = fingerprint(fs)
    if fp is None:
        return None
    h = hashlib.sha256()
    for part in (fp, repr(options), VERSION, compiler_fingerprint(), numpy.__version__):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()
