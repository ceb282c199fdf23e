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
    if label.__class__ is int:  # a saved output: this node's (Note [Saved outputs' labels] in
        label = (node, label)  # srcgrad.autograd.ops)
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
# and for their shapes and the clamp bounds (ClampBackward1._saved_min)
_TORCH_PARAM = {"x": "self", "y": "other", "x_sym_sizes": "self_sym_sizes",
                "y_sym_sizes": "other_sym_sizes", "a_min": "min", "a_max": "max"}
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
    own = _TORCH_ATTRS.get(type(node).__name__)
    if own is not None and attr.startswith("_saved_"):
        get = own.get(attr[len("_saved_"):])
        if get is not None:
            value = get(node, _STATICS.get(id(node._kernel), _NO_STATIC))
            if value is not _GENERIC:
                return value
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
    """`_saved_<name>` and `_raw_saved_<name>` on `cls` for `kernel`'s saved names, and
    torch's non-tensor attributes of a node named `cls.__name__` (`_TORCH_ATTRS`)."""
    for key in saved_attr_names(kernel):
        for attr in ("_saved_" + key, "_raw_saved_" + key):
            if not hasattr(cls, attr):
                setattr(cls, attr, _saved_property(attr))
    for key in _TORCH_ATTRS.get(cls.__name__, ()):
        if not hasattr(cls, "_saved_" + key):
            setattr(cls, "_saved_" + key, _saved_property("_saved_" + key))


def _node_dir(node):
    mine = {f"_saved_{key}" for key in _TORCH_ATTRS.get(type(node).__name__, ())}
    for key in saved_attr_names(node._kernel):
        mine |= {f"_saved_{key}", f"_raw_saved_{key}"}
    # the class's saved properties of other kernels are not this node's attributes
    return sorted({a for a in object.__dir__(node) if a in mine or not (
        a.startswith("_saved_") or a.startswith("_raw_saved_"))} | mine)


OpNode.__dir__ = _node_dir
OpNode.saved_value = saved_value


# Note [Torch's non-tensor saved attributes]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch's nodes show the non-tensor arguments their backward keeps as `_saved_<name>` too:
# `(x ** 3).grad_fn._saved_exponent == 3`, `x.sum(1).grad_fn._saved_dim == (1,)`. A node
# here keeps its kernel, whose static arguments (axis, keepdims, ...) ops.entry_for records
# once per kernel in `_STATICS` (`remember_static`); the number operands are the node's
# operands. `_TORCH_ATTRS` says, per torch node name, how each attribute is read (observed
# in torch 2.14.1: tests/autograd/test_saved_attributes.py). torch shows a negative dim as
# the unsigned 64-bit integer of its bits (`sum(-1)`: 18446744073709551615), and so does
# `_torch_dim`. A getter returns `_GENERIC` where the node's own saved value is torch's
# (`MulBackward0._saved_other` of a Tensor other); the tensor attributes stay those of
# Note [Saved attributes as properties].
_STATICS: dict = {}  # id(kernel) -> its static arguments (kernels live forever)
_NO_STATIC: dict = {}
_GENERIC = object()


def remember_static(kernel, static: dict) -> None:
    _STATICS.setdefault(id(kernel), static)


def _torch_dim(d):
    if isinstance(d, (tuple, list)):  # np.prod(t, axis=(0, 1)) and the like
        return tuple(_torch_dim(a) for a in d)
    d = int(d)
    return d + (1 << 64) if d < 0 else d


def _dims(axis):
    """An IntArrayRef dim as torch shows it: a tuple (None for all dims stays None)."""
    if axis is None:
        return None
    return tuple(_torch_dim(int(a)) for a in (axis if isinstance(axis, tuple) else (axis,)))


def keep_numbers(out) -> None:
    """Keep the node's number operands past its release: torch's Scalar arguments are no
    saved tensors, so `(x ** 2).grad_fn._saved_exponent` is 2 after a backward too, as are
    clamp's `_saved_min`/`_saved_max` and PowBackward2's `_saved_self` (observed in torch
    2.14.1). Called by the methods of those nodes only: the per-op path keeps nothing."""
    node = out._grad_fn
    if node is not None and node._operands is not None:
        numbers = {}  # (a loop, not a comprehension: its frame was a third of this call)
        i = 0
        for v in node._operands:
            if isinstance(v, _NUMBERS):
                numbers[i] = v
            i += 1
        node._numbers = numbers


_NUMBERS = (int, float, bool, complex)


def _operand(node, i):
    """Operand i of the node (a number or Tensor), or, once the node keeps no operands, a
    number operand it kept (`keep_numbers`) or `_GENERIC` (the node's own saved value)."""
    ops = node._operands
    if ops is not None and i < len(ops):
        return ops[i]
    return node.__dict__.get("_numbers", {}).get(i, _GENERIC)


def _number_operand(node, i, wrapped: bool):
    """A Python number operand i; torch's wrapped-number 0-d Tensor where `wrapped`
    (MulBackward0._saved_other of `x * 2.0`: float64 for a float, int64 for an int)."""
    value = _operand(node, i)
    if value is _GENERIC or not isinstance(value, (int, float, bool, complex)):
        return _GENERIC
    if not wrapped:
        return value
    dtype = numpy.int64 if isinstance(value, (int, bool)) else numpy.float64
    return Tensor._make(numpy.asarray(value, dtype=dtype))


def _binary_saved(which):
    """MulBackward0/DivBackward0's `self` and `other`: torch computes `c * x` as `x * c`, so
    a number c is its wrapped `other` and `self` is None; of two Tensors, one the backward
    does not read (the other needs no gradient) is None too."""
    index = 0 if which == "self" else 1

    def get(node, static):
        ops = node._operands
        if ops is None:  # released, or nothing kept: a number operand was kept_numbers'd
            if node.__dict__.get("_numbers"):
                return None if which == "self" else _GENERIC  # a freed wrapped number
        else:
            numbers = [i for i in (0, 1) if not isinstance(ops[i], (Tensor, numpy.ndarray))]
            if numbers:
                return None if which == "self" else \
                    _number_operand(node, numbers[0], wrapped=True)
        if ("input", index) not in node._kernel.saved_from:
            return None  # not saved: torch's None, before a backward and after
        return _GENERIC
    return get


def _exponent(node, static):
    """PowBackward0._saved_exponent: the number, or the saved exponent Tensor."""
    value = _number_operand(node, 1, wrapped=False)
    if value is not _GENERIC:
        return value
    j = saved_attr_names(node._kernel).get("y")
    return _GENERIC if j is None else saved_value(node, j, as_tensor=True)


def _clamp_bound(which):
    """ClampBackward1's `min`/`max`: None for a bound not given (clamp(min=...) passes the
    other as a static None), the number as given, the saved Tensor bound otherwise."""
    def get(node, static):
        if static.get(which, 0) is None:
            return None
        other = "a_max" if which == "a_min" else "a_min"
        value = _operand(node, 1 if which == "a_min" or other in static else 2)
        return _GENERIC if value is _GENERIC or isinstance(value, Tensor) else value
    return get


def _static(key, convert=None, default=None):
    def get(node, static):
        value = static.get(key)
        if value is None:
            return default
        return value if convert is None else convert(value)
    return get


def _numel(node, static):
    shape = _self_shape(node)
    return _GENERIC if shape is None else int(numpy.prod(shape))


def _self_shape(node):
    kernel = node._kernel
    for j, (kind, i) in enumerate(kernel.saved_from):
        if i == 0 and kind in ("shape", "input") and node._saved is not None:
            raw = node._saved[j]
            return tuple(raw) if kind == "shape" else numpy.shape(raw)
    return None


_DIM = _static("axis", _torch_dim)
_DIMS = _static("axis", _dims)
_KEEPDIM = _static("keepdims", bool, False)
_REDUCED = {"dim": _DIMS, "keepdim": _KEEPDIM}
_ALL_OR_DIMS = _static("axis", lambda a: _dims(a) or (), ())  # amax(): torch's dim is ()
def _by_dim(k, convert=None):
    """MaxBackward0/MinBackward0 (max(dim)): a `take` of x's flat positions whose dim,
    keepdim and indices methods._max_min keeps on the node (`_by_dim`)."""
    def get(node, static):
        kept = node.__dict__.get("_by_dim")
        if kept is None:
            return _GENERIC
        return kept[k] if convert is None else convert(kept[k])
    return get


def _correction(node, static):
    """Var/StdBackward0's correction: None for a bare x.var() (torch's var(Tensor) overload,
    marked by methods.var), else the degrees of freedom removed."""
    return None if node.__dict__.get("_bare") else static.get("ddof", _GENERIC)


_VAR = {"dim": _DIMS, "keepdim": _KEEPDIM, "correction": _correction}
_MAX_MIN = {"dim": _by_dim(0, _torch_dim), "keepdim": _by_dim(1), "indices": _by_dim(2)}
_TORCH_ATTRS = {
    "VarBackward0": _VAR,
    "StdBackward0": _VAR,
    "MaxBackward0": _MAX_MIN,
    "MinBackward0": _MAX_MIN,
    "PowBackward0": {"exponent": _exponent},
    "PowBackward1": {"exponent": _exponent},
    "PowBackward2": {"exponent": _exponent,
                     "self": lambda node, s: _number_operand(node, 0, wrapped=False)},
    "SumBackward1": _REDUCED,
    "MeanBackward0": {"self_sym_numel": _numel},
    "MeanBackward1": {**_REDUCED, "self_sym_numel": _numel},
    "AmaxBackward0": {"dim": _ALL_OR_DIMS, "keepdim": _KEEPDIM},
    "AminBackward0": {"dim": _ALL_OR_DIMS, "keepdim": _KEEPDIM},
    "ProdBackward1": {"dim": _DIM, "keepdim": _KEEPDIM},
    "CumsumBackward0": {"dim": _DIM},
    "CumprodBackward0": {"dim": _DIM},
    "SoftmaxBackward0": {"dim": _DIM},
    "LogSoftmaxBackward0": {"dim": _DIM},
    "UnsqueezeBackward0": {"dim": _DIM},
    "CatBackward0": {"dim": _DIM},
    "StackBackward0": {"dim": _DIM},
    "TransposeBackward0": {"dim0": _static("axis1", _torch_dim),
                           "dim1": _static("axis2", _torch_dim)},
    "PermuteBackward0": {"dims": _static("axes", _dims)},
    "FlipBackward0": {"dims": _static("axis", _dims)},
    "MulBackward0": {"self": _binary_saved("self"), "other": _binary_saved("other")},
    "DivBackward0": {"self": _binary_saved("self"), "other": _binary_saved("other")},
    # sg's add/sub with alpha != 1 records the multiplication as its own node first
    "AddBackward0": {"alpha": lambda node, s: 1},
    "SubBackward0": {"alpha": lambda node, s: 1},
    "ClampBackward1": {"min": _clamp_bound("a_min"), "max": _clamp_bound("a_max")},
    "LinalgVectorNormBackward0": {"ord": lambda node, s: 2 if s.get("ord") is None else s["ord"],
                                  "dim": _DIMS,
                                  "keepdim": _KEEPDIM},
}

