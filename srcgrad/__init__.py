"""srcgrad: a source-transformation autograd compiler for NumPy and CuPy.

Public names only (the contract: the transforms, the CLI and the sg.Tensor runtime).

Every name is imported on first use (PEP 562): `import srcgrad` costs little, a
transform does not import the eager runtime, and a program using `sg.Tensor` does not
import the compiler until it compiles something. Where earlier processes left srcgrad's
start-up file, `import srcgrad` runs from it the dozen small modules a transform's
disk-cache hit needs (~1.5 ms, none of the compiler: Note [The start-up file]).
"""

import importlib
import marshal
import os
import sys
from _thread import allocate_lock
from importlib.machinery import SourceFileLoader
from importlib.util import MAGIC_NUMBER, module_from_spec, spec_from_file_location

# The reader of srcgrad's start-up file (Note [The start-up file] in srcgrad/startup.py,
# which writes it). It is here, not in that module, because a hit imports no other
# module through the import system's search: importing srcgrad.startup for it cost a
# quarter of a millisecond of a disk-cache hit's first gradient.
STARTUP_FORMAT = b"srcgrad-startup 3\n" + MAGIC_NUMBER
NOT_STORED = ("srcgrad.startup", "srcgrad.__main__")  # (besides srcgrad itself, imported before)
_CODE = (lambda: None).__code__.__class__
_pread = getattr(os, "pread", None)  # (not on Windows)
# importlib's lock for one module's import (where a Python has none by this name, no
# module is preloaded)
_ModuleLock = getattr(sys.modules["importlib._bootstrap"], "_ModuleLockManager", None)
_PACKAGE = os.path.dirname(__file__)


class _StoredLoader(SourceFileLoader):
    """A source module whose code comes from the start-up file (read once, then as usual)."""

    def __init__(self, fullname, path, finder, entry):
        super().__init__(fullname, path)
        self._finder, self._entry = finder, entry

    def get_code(self, fullname):
        entry, self._entry = self._entry, None  # a reload reads the source as usual
        if entry is not None and fullname == self.name:
            try:
                code = marshal.loads(self._finder.read(entry[3], entry[4]))
                if code.__class__ is _CODE:
                    return code
            except (OSError, ValueError, EOFError, TypeError):
                pass
            self._finder.note_stale()
        return super().get_code(fullname)


class _StartupFile:
    """Finds srcgrad's modules in the start-up file; first on `sys.meta_path`."""

    def __init__(self, path: str):
        self.path, self.fd = path, -1
        self.preloaded: tuple = ()  # the modules `import srcgrad` runs (startup.TRANSFORM_HIT)
        self.index: dict = {}  # module name -> (path in the package, mtime, size, offset, length, is package)
        self.stale = False  # True: written again at exit (a module imported is not in it, or changed)
        self._seeking = allocate_lock()
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except OSError:
            self.note_stale()
            return
        try:
            head = os.read(fd, len(STARTUP_FORMAT) + 8)
            size = int.from_bytes(head[len(STARTUP_FORMAT):], "little")
            if head[:len(STARTUP_FORMAT)] != STARTUP_FORMAT or size <= 0:
                raise ValueError("another format")
            package, self.preloaded, self.index = marshal.loads(os.read(fd, size))
            self.codes_start = len(STARTUP_FORMAT) + 8 + size
            if package != _PACKAGE:
                raise ValueError("another copy of srcgrad")
        except (OSError, ValueError, EOFError, TypeError):
            os.close(fd)
            self.preloaded, self.index = (), {}
            self.note_stale()
            return
        self.fd = fd

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes of the code at `offset` (counted from the end of the index)."""
        offset += self.codes_start
        if _pread is not None:
            return _pread(self.fd, length, offset)
        with self._seeking:  # (no os.pread, as on Windows: a seek and a read, one thread at a time)
            os.lseek(self.fd, offset, os.SEEK_SET)
            return os.read(self.fd, length)

    def note_stale(self) -> None:
        if not self.stale:
            self.stale = True
            if not sys.dont_write_bytecode:
                import atexit

                atexit.register(lambda: importlib.import_module("srcgrad.startup").write(self))

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("srcgrad.") or fullname in NOT_STORED:
            return None
        entry = self.index.get(fullname)
        if entry is None:
            self.note_stale()
            return None
        source = os.path.join(_PACKAGE, entry[0])
        try:
            st = os.stat(source)
        except OSError:
            st = None
        if st is None or (st.st_mtime_ns, st.st_size) != entry[1:3]:
            self.note_stale()
            return None
        loader = _StoredLoader(fullname, source, self, entry)
        within = [os.path.dirname(source)] if entry[5] else None  # a package's submodules
        return spec_from_file_location(fullname, source, loader=loader, submodule_search_locations=within)

    def preload(self) -> None:
        """Run the stored code of the modules a transform's disk-cache hit needs, in their
        order, as importlib's recipe for importing a module from its spec does
        (`module_from_spec`, then `exec_module`, under the module's import lock and
        initializing mark, so a thread importing it meanwhile waits as importlib makes it
        wait), without the search each `import` makes: a fifth of the cost of importing
        them one by one. The first module not stored or changed ends it: the rest are
        imported as usual when first used. Only where
        NumPy is imported already: those modules import it, and its import (~0.1 s) is
        not `import srcgrad`'s to make."""
        if "numpy" not in sys.modules or _ModuleLock is None:
            return
        for name in self.preloaded:
            with _ModuleLock(name):  # (as importlib: a thread importing it meanwhile waits)
                if name in sys.modules:
                    continue
                spec = self.find_spec(name)
                if spec is None:
                    return
                module = module_from_spec(spec)
                spec._initializing = True  # (importlib's mark: others take the lock to read it)
                sys.modules[name] = module
                try:
                    spec.loader.exec_module(module)
                except Exception:  # (its own import raises the error again where it is used)
                    sys.modules.pop(name, None)
                    return
                finally:
                    spec._initializing = False
                parent, _, child = name.rpartition(".")
                setattr(sys.modules[parent], child, module)


def _read_startup_file() -> None:
    cached = globals().get("__cached__")  # srcgrad/__init__'s .pyc: the file is beside it
    if not cached or any(type(f) is _StartupFile for f in sys.meta_path):
        return  # (no bytecode kept: imports as usual)
    name = f"srcgrad-startup.{sys.implementation.cache_tag}"
    found = _StartupFile(os.path.join(os.path.dirname(cached), name))
    sys.meta_path.insert(0, found)
    found.preload()


_read_startup_file()

from srcgrad._version import __version__  # noqa: E402 (after the reader: the file may serve it)

# public name -> the module that defines it
_HOMES = {
    **dict.fromkeys(["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "vmap", "source",
                     "cache_clear", "explain"], "srcgrad.api"),
    "CompileError": "srcgrad.errors",
    **dict.fromkeys(["compile", "CompiledFunction"], "srcgrad.autograd.compiled"),
    **dict.fromkeys(["no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
                     "is_grad_enabled", "is_inference_mode_enabled"], "srcgrad.autograd.grad_mode"),
    # the eager runtime (API.md §3)
    **dict.fromkeys(["Tensor", "tensor", "zeros", "ones", "empty", "full", "rand", "randn",
                     "arange", "linspace", "eye", "zeros_like", "ones_like", "empty_like",
                     "full_like", "rand_like", "randn_like", "manual_seed", "is_tensor",
                     "from_numpy"], "srcgrad.autograd.tensor"),
    **dict.fromkeys(["save", "load"], "srcgrad.autograd.serialization"),
    # the torch namespace on tensors and torch's dtypes (API.md §3)
    **dict.fromkeys((
    "abs acos acosh add addcdiv addcmul all amax amin any argmax argmin argsort as_strided asin asinh "
    "atan atan2 empty_strided "
    "atanh bmm bool cat cdouble ceil cfloat chunk clamp clip clone complex128 complex64 concat "
    "concatenate cos cosh cumprod cumsum detach div dot double dtype einsum eq exp exp2 expm1 finfo "
    "flatten "
    "flip float float16 float32 float64 floor fmod gather ge get_default_dtype gt half hstack iinfo "
    "index_add index_select int int16 int32 int64 int8 is_complex is_floating_point isfinite isinf "
    "isnan le lerp log log10 log1p log2 log_softmax logical_not logsumexp long lt masked_fill "
    "masked_select matmul max maximum mean median min minimum mm movedim mul mv narrow ne neg "
    "negative nonzero norm numel outer permute pow prod randint randperm reciprocal relu remainder "
    "reshape roll round rsqrt scatter scatter_add scatter_reduce select set_default_dtype short "
    "sigmoid sign sin "
    "sinh softmax sort split split_with_sizes sqrt square squeeze stack std std_mean sub sum t tan "
    "tanh topk trace transpose tril triu true_divide trunc uint8 unbind unsqueeze var var_mean vstack "
    "where"
    ).split(), "srcgrad.autograd.namespace"),
}

_SUBPACKAGES = ("autograd", "func", "optim", "nn", "utils")  # (imported on first use too)
__all__ = [*_HOMES, *_SUBPACKAGES, "__version__"]


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        value = importlib.import_module("srcgrad." + name)
    elif name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
    else:
        raise AttributeError(f"module 'srcgrad' has no attribute {name!r}")
    globals()[name] = value  # later reads skip __getattr__
    return value


def __dir__():  # (the public names: not the start-up file's reader above)
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})
