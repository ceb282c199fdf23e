"""The eager autograd runtime (`sg.Tensor`, `sg.autograd`), mirroring torch.autograd."""

from srcgrad.autograd import function, graph
from srcgrad.autograd.function import Function, FunctionCtx, once_differentiable
from srcgrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError", "Function", "FunctionCtx",
           "once_differentiable", "function", "graph"]
