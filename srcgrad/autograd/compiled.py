"""`sg.compile(f)`: a compiled function that, called on Tensors, is one graph node.

Note [A compiled call is one node]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Called on plain arrays, a `CompiledFunction` runs `f`. Called on Tensors while grad
mode records and some argument requires grad, it runs the forward of `f`'s generated
VJP module (`sg.vjp`: the same code, cache and saved-tensor-hook variants as the
compiler's front door) on the arrays, and records a single `CompiledFunctionBackward`
node whose backward is the generated backward, fed the cotangents of every output.

A generated backward works on arrays with its saved values baked in, so it cannot be
differentiated by running it on Tensors. Under `create_graph=True` the node therefore
computes its gradient by running `f` itself eagerly on the input Tensors (NumPy code
runs on Tensors through the array protocols) and differentiating that with
`create_graph=True`: the double backward is exact, never a silently first-order one.
"""

from __future__ import annotations

import functools

import numpy

from srcgrad.autograd import grad_mode
from srcgrad.autograd.node import OpNode, node_class
from srcgrad.autograd.ops import DUAL
from srcgrad.autograd.tensor import Tensor
from srcgrad.ir import tree as pytree

__all__ = ["compile", "CompiledFunction"]

_STATE = grad_mode.STATE
NODE_NAME = "CompiledFunctionBackward"


class _CallKernel:
    """What OpNode expects of a kernel, for one call of a compiled function."""

    __slots__ = ("vjp_fn", "out_tree", "fn", "inputs", "grad_positions")
    saved_from = ()
    saved_names = ()

    def __init__(self, vjp_fn, out_tree, fn, inputs, grad_positions):
        self.vjp_fn, self.out_tree, self.fn = vjp_fn, out_tree, fn
        self.inputs, self.grad_positions = inputs, grad_positions

    def backward(self, saved, *cts):
        if any(isinstance(c, Tensor) for c in cts):  # create_graph=True
            return self._eager_backward(cts)
        grads = self.vjp_fn(pytree.unflatten(self.out_tree, list(cts)))
        return tuple(grads[i] for i in self.grad_positions)

    def _eager_backward(self, cts):
        from srcgrad.autograd.engine import grad

        inputs = [self.inputs[i] for i in self.grad_positions]
        wanted = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
        with grad_mode.enable_grad():
            out = self.fn(*self.inputs)
            outs, _ = pytree.flatten(out)
            pairs = [(o, c) for o, c in zip(outs, cts) if c is not None and
                     isinstance(o, Tensor) and o.requires_grad]
            found = grad([o for o, _ in pairs], wanted, [c for _, c in pairs],
                         create_graph=True, allow_unused=True) if pairs and wanted else ()
        by_id = {id(t): g for t, g in zip(wanted, found)}
        return tuple(by_id.get(id(t)) for t in inputs)


class CompiledFunction:
    """`sg.compile(f)`: call it like `f`; on Tensors it is one node of the autograd graph.
    `.grad(wrt)`, `.value_and_grad(wrt)`, `.vjp(*primals)`, `.jvp(primals, tangents)` are
    the compiler's transforms of `f`; `backend="numba"`: theirs and the node's backward
    compiled by numba where it can (Note [The numba backend])."""

    def __init__(self, fn, backend=None):
        self.fn, self.backend = fn, backend
        functools.update_wrapper(self, fn)

    def __call__(self, *args):
        if not any(isinstance(a, Tensor) for a in args):
            return self.fn(*args)
        if DUAL.hook is not None and _dual(args):  # forward AD: f's ops run eagerly, each op's
            return self.fn(*args)  # tangent from its row's JVP (srcgrad.autograd.forward_ad)
        datas = [a._data if isinstance(a, Tensor) else a for a in args]
        record = _STATE.grad_enabled and not _STATE.inference and any(
            isinstance(a, Tensor) and a._rg for a in args)
        if not record:
            return _wrap_tree(self.fn(*datas))
        from srcgrad.api import vjp

        out, vjp_fn = vjp(self.fn, *datas, backend=self.backend)
        leaves, tree = pytree.flatten(out)
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        kernel = _CallKernel(vjp_fn, tree, self.fn, args, positions)
        from srcgrad.autograd.ops import _edge

        edges = tuple(_edge(args[i]) for i in positions)
        arrays = [numpy.asarray(v) for v in leaves]
        node = node_class(NODE_NAME)(NODE_NAME, kernel, (), None, edges, len(arrays),
                                     tuple((a.shape, a.dtype) for a in arrays))
        outs = [Tensor._make(a, a.dtype.kind in "fc", node if a.dtype.kind in "fc" else None, k)
                for k, a in enumerate(arrays)]
        return pytree.unflatten(tree, outs)

    def grad(self, wrt=0):
        from srcgrad.api import grad

        return grad(self.fn, wrt, backend=self.backend)

    def value_and_grad(self, wrt=0):
        from srcgrad.api import value_and_grad

        return value_and_grad(self.fn, wrt, backend=self.backend)

    def vjp(self, *primals):
        from srcgrad.api import vjp

        return vjp(self.fn, *primals, backend=self.backend)

    def jvp(self, primals, tangents):
        from srcgrad.api import jvp

        return jvp(self.fn, primals, tangents, backend=self.backend)

    def __repr__(self) -> str:
        return f"<srcgrad.compile of {getattr(self.fn, '__qualname__', self.fn)!r}>"


def _dual(args) -> bool:
    from srcgrad.autograd.forward_ad import tangent_of

    return any(isinstance(a, Tensor) and tangent_of(a) is not None for a in args)


def _wrap_tree(value):
    leaves, tree = pytree.flatten(value)
    return pytree.unflatten(tree, [Tensor._make(numpy.asarray(v)) if isinstance(
        v, (numpy.ndarray, numpy.generic, float)) else v for v in leaves])


def compile(f=None, *, backend=None):  # noqa: A001 (the API's name)
    """`sg.compile(f)` / `@sg.compile`: a CompiledFunction (Note [A compiled call is one
    node]); `backend`: None or "numba" (API.md)."""
    if f is None:
        return lambda fn: compile(fn, backend=backend)
    if backend is not None:
        from srcgrad.api import _backend_option  # (the option's errors, at the decorator)

        backend = _backend_option(backend)
    return CompiledFunction(f, backend)


_ = OpNode
