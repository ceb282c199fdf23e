"""`sg.autograd.Variable` (torch's legacy name for Tensor) and its `_execution_engine`.

As in torch, `Variable` is not Tensor itself: it is a class whose isinstance check
accepts every Tensor, and calling it makes a Tensor (`Variable(t, requires_grad=True)`
is a leaf sharing t's data). `Variable._execution_engine` is the engine object torch's
code reaches through it: `queue_callback(fn)` (Note [Final callbacks] in
srcgrad.autograd.final_callbacks), `run_backward(...)` and `is_checkpoint_valid()`.
"""

from __future__ import annotations

import warnings

from srcgrad.autograd import engine
from srcgrad.autograd.final_callbacks import queue_callback
from srcgrad.autograd.tensor import Tensor

__all__ = ["Variable", "VariableMeta"]


class _ImperativeEngine:
    """torch._C._ImperativeEngine's Python surface."""

    def queue_callback(self, callback, /) -> None:
        queue_callback(callback)

    def run_backward(self, tensors, grad_tensors, keep_graph, create_graph, inputs,
                     allow_unreachable, accumulate_grad, /):
        if accumulate_grad:
            engine.backward(tuple(tensors), tuple(grad_tensors), keep_graph, create_graph,
                            inputs=tuple(inputs) or None)
            return None
        if not inputs:
            raise RuntimeError("grad requires non-empty inputs.")
        return engine.grad(tuple(tensors), tuple(inputs), tuple(grad_tensors), keep_graph,
                           create_graph, allow_unused=allow_unreachable)

    def is_checkpoint_valid(self) -> bool:
        return True


class VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=VariableMeta):
    """`Variable(data, requires_grad=False, volatile=False)`: a Tensor sharing `data`'s
    values, detached from its graph (torch's legacy constructor)."""

    _execution_engine = _ImperativeEngine()

    def __new__(cls, data=None, requires_grad=False, volatile=False, _grad_fn=None):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                          "instead.", UserWarning, stacklevel=2)
        if data is None:
            from srcgrad.autograd.tensor import tensor

            return tensor([])
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad and out._data.dtype.kind not in "fc":  # the constructor's text
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        if requires_grad:
            out.requires_grad_(True)
        return out


Variable.__module__ = "srcgrad.autograd.variable"
