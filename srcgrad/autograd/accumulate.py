"""What the engine runs around a node: tensor hooks, Node pre/post-hooks, retain_grad,
and the accumulation into a leaf's `.grad` with torch's layout rules (spec §4, §10).

Without create_graph the engine's gradients are arrays and a hook sees a Tensor
wrapping one; with create_graph they are Tensors (Note [Engine order] in
srcgrad.autograd.engine).
"""

from __future__ import annotations

import warnings

import numpy

from srcgrad.autograd.node import hook_name, legacy_type
from srcgrad.autograd.ops import apply
from srcgrad.autograd.tensor import Tensor


def arr(g):
    return g._data if isinstance(g, Tensor) else numpy.asarray(g)


def wrap(g, create_graph):
    if create_graph or isinstance(g, Tensor):
        return g
    return Tensor._make(g if type(g) is numpy.ndarray else numpy.asarray(g))


def unwrap(t, create_graph):
    return t if create_graph else t._data


def tensor_hooks(hooks, g, create_graph):
    for fn in list(hooks.values()):
        before = wrap(g, create_graph)
        r = fn(before)
        if r is None:
            continue
        if not isinstance(r, Tensor):
            raise TypeError(f"expected Variable, but hook returned '{type(r).__name__}'")
        if r.shape != before.shape:
            raise RuntimeError(f"hook '{hook_name(fn)}' has changed the size of value")
        if r.dtype != before.dtype:
            raise RuntimeError(f"hook '{hook_name(fn)}' has changed the type of value (was "
                               f"{legacy_type(before._data)} got {legacy_type(r._data)})")
        g = unwrap(r, create_graph)
    return g


def node_prehooks(node, buf, create_graph):
    for fn in list(node._pre.values()):
        args = tuple(None if g is None else wrap(g, create_graph) for g in buf)
        r = fn(args)
        if r is None:
            continue
        r = tuple(r)
        if len(r) != len(buf):
            raise RuntimeError(f"hook '{hook_name(fn)}' has returned an incorrect number of "
                               f"values (got {len(r)}, but expected {len(buf)})")
        buf = [None if g is None else unwrap(g, create_graph) if isinstance(g, Tensor) else g
               for g in r]
    return buf


def node_posthooks(node, out, buf, create_graph):
    grad_outputs = tuple(None if g is None else wrap(g, create_graph) for g in buf)
    for fn in list(node._post.values()):
        grad_inputs = tuple(None if g is None else wrap(g, create_graph) for g in out)
        r = fn(grad_inputs, grad_outputs)
        if r is None:
            continue
        r = tuple(r)
        if len(r) != len(out):
            raise RuntimeError(f"hook '{hook_name(fn)}' has returned an incorrect number of "
                               f"values (got {len(r)}, but expected {len(out)})")
        for old, new in zip(out, r):
            if old is None and new is not None:
                raise RuntimeError("can't replace a None gradient with a non-None value")
        out = tuple(None if g is None else unwrap(g, create_graph) if isinstance(g, Tensor)
                    else g for g in r)
    return out


def retain(t, g, create_graph):
    old = t._grad
    if create_graph:
        t._grad = g.clone() if old is None else old + g
    else:
        t._grad = Tensor._make(numpy.array(g, copy=True)) if old is None else \
            Tensor._make(old._data + g)


def accumulate(var, g, create_graph):
    """`.grad += g` with torch's layout rules (spec §10)."""
    old = var._grad
    if create_graph:
        if not isinstance(g, Tensor):
            g = Tensor._make(arr(g))
        if g.dtype != var.dtype:
            g = g.astype(var.dtype)
        if old is None:
            if g._rg:
                var._grad = apply("copy", {}, (), (g,), "torch::autograd::CopyBackwards")
            else:
                var._grad = Tensor._make(layout_copy(var._data, g._data))
        else:
            var._grad = old + g
    elif old is None:
        var._grad = Tensor._make(layout_copy(var._data, g))
    else:
        data = old._data
        if data.strides != var._data.strides and data.strides != layout_strides(var._data):
            warnings.warn(
                "grad and param do not obey the gradient layout contract. This is not an error, "
                "but may impair performance.\n"
                f"grad.sizes() = {list(data.shape)}, strides() = {list(old.stride())}\n"
                f"param.sizes() = {list(var.shape)}, strides() = {list(var.stride())}",
                UserWarning, stacklevel=2)
        data += g
    if var._post_hooks:
        for fn in list(var._post_hooks.values()):
            if fn(var) is not None:
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def stealable(param, g) -> bool:
    """Whether `g` (held by nothing else: Note [Stealing a gradient] in
    srcgrad.autograd.engine) can be the parameter's `.grad` as it is: an ndarray owning its
    memory, writeable, laid out as layout_copy would lay out the copy."""
    return g.__class__ is numpy.ndarray and g.base is None and g.dtype == param.dtype and \
        g.shape == param.shape and param.flags.c_contiguous and g.flags.c_contiguous and \
        g.flags.writeable


def layout_copy(param, g):
    """A new gradient array laid out like the parameter (torch's layout contract)."""
    if g.__class__ is numpy.ndarray and g.dtype == param.dtype and g.shape == param.shape \
            and param.flags.c_contiguous:
        return g.copy()  # C order, the parameter's: the same array, half the calls
    out = numpy.empty_like(param)
    out[...] = g
    return out


def layout_strides(param):
    return numpy.empty_like(param).strides
