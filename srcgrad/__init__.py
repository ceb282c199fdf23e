"""srcgrad: a source-transformation autograd compiler for NumPy and CuPy.

Public names only; see API.md.
"""

from srcgrad import autograd
from srcgrad.api import cache_clear, grad, hessian, jacobian, jvp, source, value_and_grad, vjp
from srcgrad.errors import CompileError

__version__ = "0.1.0"

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "source", "cache_clear",
           "CompileError", "autograd", "__version__"]
