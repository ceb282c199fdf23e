"""The eager autograd runtime (`sg.Tensor`, `sg.autograd`), mirroring torch.autograd."""

from srcgrad.autograd import function, graph
from srcgrad.autograd.function import Function, FunctionCtx, once_differentiable
from srcgrad.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from srcgrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError", "Function", "FunctionCtx",
           "once_differentiable", "function", "graph", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "is_inference_mode_enabled"]
