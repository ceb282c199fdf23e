"""Reading what an OpNode saved: `_saved_<name>`, `_raw_saved_<name>`, saved-tensor hooks,
version checks (spec §6, §7; Note [One node per op] in srcgrad.autograd.node).

The node keeps the kernel's saved tuple raw. `saved_value` gives entry j back as an
array (what the kernel's backward reads on the fast path) or as a Tensor (what
`_saved_<name>` shows and what a create_graph backward reads): a saved input is the
input Tensor itself, a saved output a Tensor over the same array whose grad_fn is the
node. Each read of a packed entry goes through the unpack hook, and each read checks
that the saved Tensor was not changed in place since it was saved.
"""

from __future__ import annotations

import numpy

from srcgrad.autograd.node import _RAW, SECOND_TIME, OpNode, version_error
from srcgrad.autograd.tensor import Tensor

__all__ = ["saved_value", "SavedTensor"]


def saved_value(node, j: int, as_tensor: bool, unpack: bool = True):
    """Saved entry j of `node`: an array (as_tensor=False) or a Tensor."""
    if node._saved is None:
        raise RuntimeError(SECOND_TIME)
    if unpack and node._packed is not None and node._packed[j] is not _RAW:
        return _unpacked(node, j, as_tensor)
    _check_version(node, j)
    raw = node._saved[j]
    if not as_tensor:
        return raw
    kind, i = node._kernel.saved_from[j]
    if kind == "input":
        operand = node._operands[i]
        return operand if isinstance(operand, Tensor) else raw
    if kind == "output":  # torch's SavedVariable of an output: no reference cycle
        t = Tensor._make(raw, rg=True, grad_fn=node, output_nr=i)
        versions = node._versions
        if versions is not None and versions[j] is not None:
            # torch's unpacked variable shares the saved tensor's version counter: after
            # `y.exp_()`, `y.grad_fn._saved_result._version` is 1, as `y._version`
            t._vc = versions[j][0]
        return t
    if kind == "shape" or not isinstance(raw, numpy.ndarray):
        return raw  # a shape, a dtype, a Python number: facts, not tensors
    return Tensor._make(raw)


def _unpacked(node, j, as_tensor):
    value = node._unpack(node._packed[j])
    if not isinstance(value, Tensor):
        raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                        f"result of type {type(value).__name__}")
    if not as_tensor:
        return value._data
    return _with_saved_identity(node, j, value)


def _with_saved_identity(node, j, value):
    """The unpack hook's values with the saved tensor's place in the graph (torch's
    SavedVariable::unpack: `make_variable(data, Edge(grad_fn, output_nr))`, a leaf's grad
    accumulator): a gradient through the unpacked tensor reaches what was saved, never
    the graph the hooks built (`pack = lambda x: 2 * x` is not differentiated through)."""
    kind, i = node._kernel.saved_from[j]
    if kind == "output":
        if value._grad_fn is node and value._output_nr == i:
            return value
        return Tensor._make(value._data, True, node, i)
    if kind != "input" or node._operands is None:
        return value
    orig = node._operands[i]
    if not isinstance(orig, Tensor) or value is orig:
        return value
    if not orig._rg:
        return Tensor._make(value._data)
    versions = node._versions
    producer = versions[j][2] if versions is not None and versions[j] is not None else None
    if producer is None and orig._grad_fn is not None:
        producer = (orig._grad_fn, orig._output_nr)
    if producer is not None:
        return Tensor._make(value._data, True, producer[0], producer[1])
    t = Tensor._make(value._data, True)
    acc = orig.accumulator()
    t._acc = lambda: acc  # the saved leaf's AccumulateGrad, held while t lives
    return t


def _check_version(node, j):
    versions = node._versions
    if versions is None or versions[j] is None:
        return
    counter, expected, label, watched = versions[j]
    if watched is not None and watched._grad_fn is None:
        raise RuntimeError("Trying to use a saved tensor that has been detached in-place, i.e. "
                           "with .detach_().This is not supported, please use out-of-place "
                           "`.detach()` instead")
    if counter.v != expected:
        if watched is not None and watched._grad_fn is not None:  # a saved input: torch names
            label = (watched._grad_fn, watched._output_nr)  # its grad_fn as it is now
        raise version_error(node._saved[j], counter.v, expected, label)


class SavedTensor:
    """`grad_fn._raw_saved_<name>` (torch's `torch._C._autograd.SavedTensor`)."""

    __slots__ = ("_node", "_index")

    def __init__(self, node, index):
        self._node, self._index = node, index

    def _is_packed(self) -> bool:
        node = self._node
        return node._packed is not None and node._packed[self._index] is not _RAW

    @property
    def data(self):
        if self._is_packed():
            return self._node._packed[self._index]
        return saved_value(self._node, self._index, as_tensor=True, unpack=False)

    @property
    def unpack_hook(self):
        return self._node._unpack if self._is_packed() else None

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        node = self._node
        if node._saved is None:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved "
                "intermediate values of the graph are freed when you call .backward() or "
                "autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved variables after calling "
                "backward.")
        if self._is_packed():
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already "
                               "been set. Hint: only one pair of hooks is allowed at a time.")
        value = saved_value(node, self._index, as_tensor=True, unpack=False)
        if value is None:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is "
                               "forbidden")
        node.pack_one(self._index, value, pack_hook, unpack_hook)


# torch's names for the saved operands of binary rows (MulBackward0._saved_self/_saved_other)
_TORCH_PARAM = {"x": "self", "y": "other"}
_SAVED_NAMES: dict = {}  # id(kernel) -> {attribute suffix: saved index}; kernels live forever


def saved_attr_names(kernel) -> dict:
    names = _SAVED_NAMES.get(id(kernel))
    if names is None:
        names = {}
        for j, label in enumerate(kernel.saved_names):
            names.setdefault(label, j)
            torch_name = _TORCH_PARAM.get(label)
            if torch_name is not None:
                names.setdefault(torch_name, j)
        _SAVED_NAMES[id(kernel)] = names
    return names


def _node_getattr(node, attr):
    if attr.startswith("_raw_saved_"):
        j = saved_attr_names(node._kernel).get(attr[len("_raw_saved_"):])
        if j is not None:
            return SavedTensor(node, j)
    elif attr.startswith("_saved_"):
        j = saved_attr_names(node._kernel).get(attr[len("_saved_"):])
        if j is not None:
            return saved_value(node, j, as_tensor=True)
    raise AttributeError(f"'{type(node).__name__}' object has no attribute '{attr}'")


# Note [Saved attributes as properties]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# `grad_fn._saved_self` and `_raw_saved_self` are properties of the node's class, added
# for a kernel's saved names when ops.apply first records a node of that class with that
# kernel (`add_saved_properties`), not an OpNode.__getattr__: a class with __getattr__
# gets no specialized attribute reads in CPython, and the engine reads a dozen node fields
# per node per pass. A property reads the node's own kernel, so a node whose kernel saved
# no such value raises AttributeError as a missing attribute does.
def _saved_property(attr):
    return property(lambda node: _node_getattr(node, attr), doc=f"torch's {attr}")


def add_saved_properties(cls, kernel) -> None:
    """`_saved_<name>` and `_raw_saved_<name>` on `cls` for `kernel`'s saved names."""
    for key in saved_attr_names(kernel):
        for attr in ("_saved_" + key, "_raw_saved_" + key):
            if not hasattr(cls, attr):
                setattr(cls, attr, _saved_property(attr))


def _node_dir(node):
    mine = set()
    for key in saved_attr_names(node._kernel):
        mine |= {f"_saved_{key}", f"_raw_saved_{key}"}
    # the class's saved properties of other kernels are not this node's attributes
    return sorted({a for a in object.__dir__(node) if a in mine or not (
        a.startswith("_saved_") or a.startswith("_raw_saved_"))} | mine)


OpNode.__dir__ = _node_dir
OpNode.saved_value = saved_value
