"""The eager autograd runtime (`sg.Tensor`, `sg.autograd`), mirroring torch.autograd."""

# The Tensor runtime after `function`/`graph`: srcgrad.frontend.function imports
# srcgrad.autograd.function lazily, and that import must not pull the runtime in half-built.
# Each module below installs its part of Tensor (operators, methods, NumPy protocols,
# backward) when imported.
from srcgrad.autograd import custom, dispatch, engine, function, graph, inplace, methods, ops, saved, tensor  # noqa: E402,I001,E501,F401
from srcgrad.autograd import serialization, strided, torch_methods  # noqa: E402,I001,F401  (install methods)
from srcgrad.autograd.engine import backward, grad  # noqa: E402
from srcgrad.autograd.function import Function, FunctionCtx, once_differentiable
from srcgrad.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from srcgrad.autograd.anomaly_mode import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from srcgrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck
from srcgrad.autograd.tensor import Tensor  # noqa: E402
from srcgrad.autograd.variable import Variable  # noqa: E402

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError", "Function", "FunctionCtx",
           "once_differentiable", "function", "graph", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "is_inference_mode_enabled", "backward", "grad",
           "Tensor", "Variable", "engine", "tensor", "ops", "methods", "inplace", "dispatch", "saved"]
__all__ += ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
            "is_anomaly_check_nan_enabled"]


def __getattr__(name: str):
    """`sg.autograd.<submodule>` (forward_ad, functional, profiler, ...) on first use."""
    import importlib

    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = module
    return module
