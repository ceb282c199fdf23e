"""What a backward pass starts from: the roots' edges and their gradients, with torch's
checks and its implicit ones (spec §1), and the small readers of backward()/grad()'s
arguments. Split from srcgrad.autograd.engine, which runs the pass."""

from __future__ import annotations

import numpy

from srcgrad.autograd.node import AccumulateGrad, GradientEdge, torch_dtype, torch_size
from srcgrad.autograd.tensor import Tensor


def _sequence(x) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (Tensor, GradientEdge)):
        return (x,)
    if isinstance(x, dict):
        return tuple(x.values())
    return tuple(x)


def _meta(t) -> tuple:
    """(shape, dtype) of an input: a Tensor, or the gradient an edge's node takes."""
    if not isinstance(t, GradientEdge):
        return t._data.shape, t._data.dtype
    if isinstance(t.node, AccumulateGrad):
        return t.node.variable._data.shape, t.node.variable._data.dtype
    return t.node._meta_out[t.output_nr]


def _arr(g):
    return g._data if isinstance(g, Tensor) else numpy.asarray(g)


def _roots(tensors, grad_tensors, create_graph) -> tuple:
    """(root edges, root gradients) with torch's checks and implicit ones."""
    if grad_tensors is None and type(tensors) is Tensor and tensors._rg:  # loss.backward()
        data = tensors._data
        if data.ndim == 0 and data.dtype.kind != "c":
            fn = tensors._grad_fn
            value = numpy.array(1, data.dtype)  # ones_like's value, without its wrappers
            return ([(tensors.accumulator(), 0) if fn is None else (fn, tensors._output_nr)],
                    [Tensor._make(value) if create_graph else value])
    tensors = _sequence(tensors)
    if grad_tensors is None:
        grads = (None,) * len(tensors)
    elif isinstance(grad_tensors, (list, tuple)):
        grads = tuple(grad_tensors)
    else:
        grads = (grad_tensors,)
    if len(grads) != len(tensors):
        raise RuntimeError(f"got {len(tensors)} tensors and {len(grads)} gradients")
    edges, values = [], []
    for i, (t, g) in enumerate(zip(tensors, grads)):
        if isinstance(t, GradientEdge):  # the gradient enters the graph at that edge
            edges.append(tuple(t))
            values.append(_edge_gradient(i, t, g, create_graph))
            continue
        if g is None:
            if t._rg:
                if t._data.size != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if t._data.dtype.kind == "c":
                    raise RuntimeError("grad can be implicitly created only for real scalar "
                                       f"outputs but got {torch_dtype(t.dtype)}")
            value = numpy.ones_like(t._data)
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        else:
            value = _check_grad(i, t, g, create_graph)
        if not t._rg:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have "
                               "a grad_fn")
        edges.append((t.accumulator(), 0) if t._grad_fn is None else (t._grad_fn, t._output_nr))
        if create_graph and not isinstance(value, Tensor):
            value = Tensor._make(value)
        values.append(value)
    return edges, values


class _EdgeOutput:
    """An edge as an output for _check_grad's messages: its node's output shape and dtype."""

    def __init__(self, edge):
        self.shape, self.dtype = _meta(edge)


def _edge_gradient(i, edge, g, create_graph):
    """The root gradient of an output given as a GradientEdge (torch 2.13.0 takes one as
    `outputs=`/`tensors=`: observed, `grad(get_gradient_edge(b), a, ones)`), implicit
    only where the node's output has one element, as a tensor's."""
    out = _EdgeOutput(edge)
    if g is None:
        if int(numpy.prod(out.shape)) != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        value = numpy.ones(out.shape, out.dtype)
    elif not isinstance(g, Tensor):
        raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
    else:
        value = _check_grad(i, out, g, create_graph)
    return Tensor._make(value) if create_graph and not isinstance(value, Tensor) else value


def _check_grad(i, t, g, create_graph):
    if g.shape != t.shape:
        raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                           f"{torch_size(g.shape)} and output[{i}] has a shape of "
                           f"{torch_size(t.shape)}.")
    if (g.dtype.kind == "c") != (t.dtype.kind == "c"):
        raise RuntimeError("For complex Tensors, both grad_output and output are required to have "
                           f"the same dtype. Mismatch in dtype: grad_output[{i}] has a dtype of "
                           f"{torch_dtype(g.dtype)} and output[{i}] has a dtype of "
                           f"{torch_dtype(t.dtype)}.")
    if create_graph:
        return g if g.dtype == t.dtype else g.astype(t.dtype)
    return g._data if g.dtype == t.dtype else g._data.astype(t.dtype)
