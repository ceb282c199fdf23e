"""srcgrad: a source-transformation autograd compiler for NumPy and CuPy.

Public names only (the contract: the transforms, the CLI and the sg.Tensor runtime).
"""

from srcgrad import autograd
from srcgrad._version import __version__
from srcgrad.api import cache_clear, grad, hessian, jacobian, jvp, source, value_and_grad, vjp
from srcgrad.autograd.compiled import CompiledFunction, compile  # noqa: A004
from srcgrad.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from srcgrad.autograd.tensor import (
    Tensor,
    arange,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    is_tensor,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from srcgrad.errors import CompileError

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "source", "cache_clear",
           "CompileError", "autograd", "__version__", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "is_inference_mode_enabled",
           # the eager runtime (API.md §3)
           "Tensor", "tensor", "zeros", "ones", "empty", "full", "rand", "randn", "arange",
           "linspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
           "randn_like", "manual_seed", "is_tensor", "from_numpy", "compile", "CompiledFunction"]
