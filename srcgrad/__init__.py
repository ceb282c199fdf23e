"""srcgrad: a source-transformation autograd compiler for NumPy and CuPy.

Public names only; see API.md.
"""

from srcgrad.api import cache_clear, grad, source, value_and_grad, vjp
from srcgrad.errors import CompileError

__version__ = "0.1.0"

__all__ = ["grad", "value_and_grad", "vjp", "source", "cache_clear", "CompileError",
           "__version__"]
