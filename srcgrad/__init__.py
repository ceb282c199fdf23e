"""srcgrad: a source-transformation autograd compiler for NumPy and CuPy.

Public names only; see API.md.
"""

from srcgrad import autograd
from srcgrad._version import __version__
from srcgrad.api import cache_clear, grad, hessian, jacobian, jvp, source, value_and_grad, vjp
from srcgrad.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from srcgrad.errors import CompileError

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "source", "cache_clear",
           "CompileError", "autograd", "__version__", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "is_inference_mode_enabled"]
