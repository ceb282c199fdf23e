"""srcgrad: a source-transformation autograd compiler for NumPy and CuPy.

Public names only (the contract: the transforms, the CLI and the sg.Tensor runtime).

Every name is imported on first use (PEP 562): `import srcgrad` costs little, a
transform does not import the eager runtime, and a program using `sg.Tensor` does not
import the compiler until it compiles something. Where earlier processes left srcgrad's
start-up file, `import srcgrad` runs from it the dozen small modules a transform's
disk-cache hit needs (~1.5 ms, none of the compiler: Note [The start-up file]).
"""

import importlib

from srcgrad import startup

startup.install(globals().get("__cached__"))  # Note [The start-up file]

from srcgrad._version import __version__  # noqa: E402 (served by the start-up file)

# public name -> the module that defines it
_HOMES = {
    **dict.fromkeys(["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "source",
                     "cache_clear"], "srcgrad.api"),
    "CompileError": "srcgrad.errors",
    **dict.fromkeys(["compile", "CompiledFunction"], "srcgrad.autograd.compiled"),
    **dict.fromkeys(["no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
                     "is_grad_enabled", "is_inference_mode_enabled"], "srcgrad.autograd.grad_mode"),
    # the eager runtime (API.md §3)
    **dict.fromkeys(["Tensor", "tensor", "zeros", "ones", "empty", "full", "rand", "randn",
                     "arange", "linspace", "eye", "zeros_like", "ones_like", "empty_like",
                     "full_like", "rand_like", "randn_like", "manual_seed", "is_tensor",
                     "from_numpy"], "srcgrad.autograd.tensor"),
}

__all__ = [*_HOMES, "autograd", "__version__"]


def __getattr__(name: str):
    if name == "autograd":
        value = importlib.import_module("srcgrad.autograd")
    elif name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
    else:
        raise AttributeError(f"module 'srcgrad' has no attribute {name!r}")
    globals()[name] = value  # later reads skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
