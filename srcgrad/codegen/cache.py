"""The module cache: generated source by key, in memory and on disk (DESIGN decision 9).

Note [Cache file format]
~~~~~~~~~~~~~~~~~~~~~~~~
A cached module lives at `<dir>/<key[:2]>/<key>.py`. The file is the generated source
exactly as the pipeline produced it, followed by one trailer line:

    # srcgrad-cache: key=<key> sha256=<hex of the sha256 of everything above this line>

The check line goes last, not first, so that line N of the file is line N of the
generated module: the loader compiles the text under the file's real path, and
tracebacks, `inspect.getsource` and debuggers that open the file all agree. The
template's `@generated` banner stays on line 1, where tools look for it.

`get` re-hashes the body and compares the key, so a truncated, hand-edited or foreign
file (one copied in from another key, or written by something else) is never loaded:
it is removed and the pipeline compiles again. Writes go to a temporary file in the
same directory and are then `os.replace`d into place, so a reader in another process
sees either no file or a whole one. They are not fsynced (a few milliseconds of a
compile on a busy disk): a cache needs no durability, and a file a crash left torn or
empty fails the check above.

Beside it, `<key>.<cache tag>.pyc` holds the module's code object (marshal), so that a
disk-cache hit does not compile the text again (a quarter of a millisecond: issue 15).
It starts with Python's magic number, the SHA-256 of the source and of the file name
the code was compiled under (tracebacks name it), and the SHA-256 of the marshal data
after them; anything else is not loaded, and the text is compiled as before. A missing
or stale code file only costs a compile.

A directory that other users can write to (group/world-writable, or owned by another
uid) could be used to plant code that we would then execute, so it is refused with a
`CacheWarning`, and so is a directory we cannot create or write: the cache then runs
in memory only, and the user's program goes on.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
import warnings
from _thread import allocate_lock  # threading.Lock: importing threading costs a hit 0.6 ms
from pathlib import Path
from typing import Any

from srcgrad.digest import sha256  # (not hashlib: OpenSSL's load is 3 ms of a hit)
from srcgrad.errors import CacheWarning

ENV_VAR = "SRCGRAD_CACHE_DIR"
TRAILER_PREFIX = "# srcgrad-cache: "

# Keys name files, so they may not contain path separators or dots: 2-128 characters of
# [A-Za-z0-9_-]. Checked with a set, not a regular expression: compiling one costs a
# disk-cache hit's process a tenth of a millisecond (issue 15).
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _is_key(name: str) -> bool:
    return 2 <= len(name) <= 128 and _KEY_CHARS.issuperset(name)


def default_directory() -> Path:
    """`$SRCGRAD_CACHE_DIR` when set and non-empty, else the platform's user cache
    directory for srcgrad: `$XDG_CACHE_HOME/srcgrad` or `~/.cache/srcgrad` on Linux,
    `~/Library/Caches/srcgrad` on macOS, `%LOCALAPPDATA%\\srcgrad\\Cache` on Windows."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    # platformdirs knows each platform's convention; imported only here, because a
    # process that has $SRCGRAD_CACHE_DIR set never needs it.
    from platformdirs import user_cache_path

    return user_cache_path("srcgrad", appauthor=False)


def _sha256(text: str) -> str:
    return sha256(text.encode("utf-8")).hexdigest()


def _check_key(key: str) -> str:
    if not isinstance(key, str) or not _is_key(key):
        raise ValueError(f"bad cache key {key!r}: expected 2-128 characters of [A-Za-z0-9_-]")
    return key


def _unsafe_reason(directory: Path) -> str | None:
    """Why `directory` must not be trusted with code we execute, or None if it may."""
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        return f"{directory} is not a directory"
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # Windows: POSIX modes and owners mean little there
        return None
    if st.st_uid != getuid():
        return (f"cache directory {directory} is owned by another user (uid {st.st_uid}); "
                f"set {ENV_VAR} to a directory of your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"cache directory {directory} is writable by other users "
                f"(mode {stat.S_IMODE(st.st_mode):o}); run `chmod go-w {directory}` "
                f"or set {ENV_VAR} to a private directory")
    return None


class ModuleCache:
    """Generated module source by key: on disk (atomic, checked) plus a memory dict.

    `memory` holds whatever the pipeline wants to keep per key in this process (loaded
    namespaces); the cache only empties it in `clear()`.
    """

    def __init__(self, directory: str | os.PathLike | None = None):
        # None: resolved at first use (so tests can set $SRCGRAD_CACHE_DIR first).
        self._requested = Path(directory).expanduser() if directory is not None else None
        self._directory: Path | None = None
        self._directory_text: str | None = None  # str(self.directory), once
        self._usable: bool | None = None  # None until checked; False: memory-only
        self._reason: str | None = None  # why not usable
        self._warned = False
        self._lock = allocate_lock()
        self.memory: dict[str, Any] = {}

    # -- where ---------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        if self._directory is None:
            self._directory = (self._requested if self._requested is not None
                               else default_directory())
        return self._directory

    def path_for(self, key: str) -> Path:
        return Path(self.file_for(key))

    def file_for(self, key: str) -> str:
        """`path_for` as a string, without pathlib (a disk-cache hit asks it)."""
        return self._file(key, ".py")

    def _file(self, key: str, suffix: str) -> str:
        key = _check_key(key)
        if self._directory_text is None:
            self._directory_text = str(self.directory)
        return os.path.join(self._directory_text, key[:2], key + suffix)

    @property
    def usable(self) -> bool:
        """Whether the disk cache is in use (checks the directory on first call)."""
        if self._usable is None:
            with self._lock:
                if self._usable is None:
                    self._check_directory()
        return bool(self._usable)

    def _check_directory(self) -> None:
        try:
            directory = self.directory
            if not os.path.isdir(directory):  # (a stat, not a mkdir: every hit's process asks)
                directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            reason = _unsafe_reason(directory)
        except (OSError, RuntimeError) as err:  # RuntimeError: no home directory
            reason = f"cannot create cache directory: {err}"
        if reason is None:
            self._usable = True
        else:
            self._disable(reason)

    def _disable(self, reason: str) -> None:
        self._usable = False
        self._reason = reason
        if not self._warned:
            self._warned = True
            warnings.warn(f"srcgrad: not using the on-disk cache: {reason}. "
                          "Generated modules are kept in memory only.",
                          CacheWarning, stacklevel=4)

    # -- read and write ------------------------------------------------------------

    def get(self, key: str) -> str | None:
        """The source stored for `key`, or None (absent, unreadable, corrupt, foreign)."""
        path = self.file_for(key)
        if not self.usable:
            return None
        try:
            with open(path, "rb") as f:  # (no pathlib: this runs on every hit)
                data = f.read()
        except OSError:
            return None
        source = _decode(data, key)
        if source is None:
            # Never trusted; remove it so the next put starts clean (a racing put that
            # already replaced it only costs one recompile).
            try:
                os.unlink(path)
            except OSError:
                pass
        return source

    def put(self, key: str, source: str) -> str:
        """Store `source` for `key` atomically; the file's path, or "" when memory-only."""
        path = self.path_for(key)
        if not self.usable:
            return ""
        try:  # no fsync: a file a crash left torn fails its trailer's check and is
            write_atomically(path, key, _encode(source, key))  # compiled again (Note
        except OSError as err:  # [Cache file format])
            self._disable(f"cannot write {path}: {err}")
            return ""
        return str(path)

    def get_code(self, key: str, source: str, filename: str):
        """The code object stored for `key`'s `source` compiled as `filename`, or None
        (Note [Cache file format])."""
        if not self.usable:
            return None
        try:
            with open(self._code_path(key), "rb") as f:  # (no pathlib: this runs on every hit)
                data = f.read()
        except OSError:
            return None
        head = _code_header(source, filename)
        body = data[len(head) + 32:]
        if not data.startswith(head) or data[len(head):len(head) + 32] != sha256(body).digest():
            return None
        try:
            return marshal.loads(body)
        except (EOFError, ValueError, TypeError):
            return None

    def put_code(self, key: str, source: str, filename: str, code) -> None:
        """Store the code object of `key`'s `source` beside it (no fsync: a torn file fails
        its checksum and only costs a compile)."""
        if not self.usable:
            return
        body = marshal.dumps(code)
        try:
            write_atomically(Path(self._code_path(key)), key,
                              _code_header(source, filename) + sha256(body).digest() + body)
        except OSError:
            pass  # the text is cached; its code is compiled on each load

    def code(self, key: str, source: str, filename: str, compile_module):
        """`key`'s code object: the one stored beside its `source`, else compiled by
        `compile_module(source, filename)` and stored."""
        code = self.get_code(key, source, filename)
        if code is None:
            code = compile_module(source, filename)
            self.put_code(key, source, filename, code)
        return code

    def _code_path(self, key: str) -> str:
        return self._file(key, f".{_CODE_TAG}.pyc")

    # -- housekeeping --------------------------------------------------------------

    def _files(self) -> list[Path]:
        """Cache files and leftover temp files; nothing else in the directory is touched."""
        found = []
        try:
            shards = [d for d in self.directory.iterdir()
                      if d.is_dir() and not d.is_symlink() and len(d.name) == 2]
        except OSError:
            return found
        for shard in shards:
            try:
                for p in shard.iterdir():
                    name = p.name
                    if name.endswith(".py") and _is_key(name[:-3]) \
                            and name[:2] == shard.name:
                        found.append(p)
                    elif name.endswith(".pyc") and _is_key(name.partition(".")[0]) \
                            and name[:2] == shard.name:  # a code file (any Python's)
                        found.append(p)
                    elif name.startswith(".") and name.endswith(".tmp"):
                        found.append(p)
            except OSError:
                continue
        return found

    def clear(self) -> int:
        """Empty the memory dict and remove the cache files; how many modules were removed."""
        self.memory.clear()
        if not self.usable:
            return 0
        removed = 0
        for p in self._files():
            try:
                p.unlink()
            except OSError:
                continue
            if p.name.endswith(".py"):
                removed += 1
            try:
                p.parent.rmdir()  # only succeeds once the shard is empty
            except OSError:
                pass
        return removed

    def info(self) -> dict:
        """directory, entries, bytes, memory_entries, usable, and reason when not usable."""
        usable = self.usable
        entries = size = 0
        if usable:
            for p in self._files():
                if p.name.endswith(".py"):
                    try:
                        size += p.stat().st_size
                    except OSError:
                        continue
                    entries += 1
        out = {"directory": str(self.directory), "entries": entries, "bytes": size,
               "memory_entries": len(self.memory), "usable": usable}
        if not usable:
            out["reason"] = self._reason
        return out

    def __repr__(self) -> str:
        return f"ModuleCache({str(self.directory)!r})"


def write_atomically(path: Path, key: str, data: bytes) -> None:
    """`data` as the file `path`, whole or not at all: written to a private temporary
    file beside it, then renamed over it (OSError where that fails; nothing is left)."""
    try:
        fd, tmp = _temporary(path.parent, key)
    except FileNotFoundError:  # a new shard directory (a mkdir first for every write cost
        path.parent.mkdir(mode=0o700, exist_ok=True)  # a cold compile ~0.1 ms: issue 15)
        fd, tmp = _temporary(path.parent, key)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _temporary(directory: Path, key: str) -> tuple:
    """(fd, path) of a new private file `.<key>.<random>.tmp` in `directory`, as
    tempfile.mkstemp makes it (O_EXCL, mode 0600), without importing tempfile: its import
    (shutil, random, lzma...) cost a fresh process's first compile milliseconds (issue 15)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = os.path.join(directory, f".{key}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {directory}")


_CODE_TAG = sys.implementation.cache_tag or "python"


def _code_header(source: str, filename: str) -> bytes:
    from importlib.util import MAGIC_NUMBER  # (site and NumPy have imported it already)

    return MAGIC_NUMBER + sha256(f"{filename}\0{source}".encode()).digest()


def _encode(source: str, key: str) -> bytes:
    body = source if source.endswith("\n") or not source else source + "\n"
    return (body + f"{TRAILER_PREFIX}key={key} sha256={_sha256(source)}\n").encode("utf-8")


def _decode(data: bytes, key: str) -> str | None:
    """The source in a cache file's bytes, or None unless the trailer vouches for it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    cut = text.rfind("\n" + TRAILER_PREFIX)
    start = cut + 1 if cut >= 0 else (0 if text.startswith(TRAILER_PREFIX) else -1)
    if start < 0:
        return None
    trailer = text[start:-1] if text.endswith("\n") else text[start:]
    expected = f"{TRAILER_PREFIX}key={key} sha256="  # then the body's 64 hex digits
    digest = trailer[len(expected):]
    if not trailer.startswith(expected) or len(digest) != 64:
        return None
    body = text[:start]
    # put() adds a newline to a source that lacks one; the hash is of the source itself.
    for source in (body, body[:-1]) if body.endswith("\n") else (body,):
        if _sha256(source) == digest:
            return source
    return None


_default: ModuleCache | None = None
_default_env: str | None = None
_default_lock = allocate_lock()


def default_cache() -> ModuleCache:
    """This process's cache; a new one if `$SRCGRAD_CACHE_DIR` changed since the last call."""
    global _default, _default_env
    env = os.environ.get(ENV_VAR)
    with _default_lock:
        if _default is None or env != _default_env:
            _default, _default_env = ModuleCache(), env
        return _default
