"""In-place Tensor ops (`add_`, `mul_`, `t[i] = v`, `t += u`, `zero_`, `copy_`, ...).

An in-place op is the out-of-place row applied to the target, its result written into
the target's memory (so views and `detach()` aliases see it), the shared version
counter bumped, and — when a node was recorded — the target rebased onto that node
(torch: the grad_fn of a non-leaf becomes the in-place op's, spec §3). Under no_grad
the write is invisible to autograd: the grad_fn stays.

Part 1 of the runtime covers in-place ops on tensors that are not views, and writes
into views while no graph is recorded; an in-place op that would need torch's
CopySlices (a recorded write into a view) is refused with NotImplementedError.
"""

from __future__ import annotations

import numpy

from srcgrad.autograd import grad_mode
from srcgrad.autograd.ops import DUAL, apply, node_name
from srcgrad.autograd.tensor import Tensor

_STATE = grad_mode.STATE
_E = {}


def check_target(target: Tensor) -> None:
    """torch's checks before an in-place write into `target`."""
    if target._inference and not _STATE.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed.You can make a clone to get a normal tensor before doing "
                           "inplace update.See https://github.com/pytorch/rfcs/pull/17 for more "
                           "details.")
    if not _STATE.grad_enabled:
        return
    base = target._base
    if base is not None and base._rg and base._grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    if target._rg and target._grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")


def write(target: Tensor, result) -> Tensor:
    """Write `result` (a Tensor from the out-of-place row) into `target`."""
    data = result._data if isinstance(result, Tensor) else numpy.asarray(result)
    recorded = isinstance(result, Tensor) and result._grad_fn is not None
    if recorded and target._base is not None:
        raise NotImplementedError("srcgrad: an in-place op on a view that records a graph "
                                  "(torch's CopySlices) is not supported yet; write into a "
                                  "clone, or use the out-of-place op")
    node = result._grad_fn if recorded else None
    if node is not None and node._saved:
        # a saved operand that is the target's own array would be overwritten: keep a copy
        if any(s is target._data for s in node._saved):
            node._saved = tuple(s.copy() if s is target._data else s for s in node._saved)
    if target._data.shape != data.shape or not target._data.flags.writeable:
        numpy.copyto(target._data, numpy.broadcast_to(data, target._data.shape),
                     casting="same_kind")
    else:
        numpy.copyto(target._data, data, casting="same_kind")
    target._vc.v += 1
    if recorded:
        _rebase(target, result, node)
    if DUAL.written is not None:  # a forward-AD level is open: the target takes the tangent
        DUAL.written(target, result)
    return target


def _rebase(target, result, node):
    old_vc = result._vc
    old = target._grad_fn
    if target._retains_grad and old is not None and old._retain:  # the current version's grad
        ref = old._retain.pop(target._output_nr, None)
        if node._retain is None:
            node._retain = {}
        node._retain[result._output_nr] = ref
    target._grad_fn = node
    target._output_nr = result._output_nr
    target._rg = True
    versions = node._versions
    if versions is not None:  # the saved output is now the target's current version
        node._versions = [(target._vc, target._vc.v, v[2], None)
                          if v is not None and v[0] is old_vc else v for v in versions]


def _inplace(rule, swap=False):
    name = node_name(rule)

    def op(self, other=None, *, alpha=1):
        check_target(self)
        if alpha != 1:
            other = other * alpha
        operands = (self,) if other is None else (other, self) if swap else (self, other)
        return write(self, apply(rule, _E, (), operands, name))

    op.__name__ = rule + "_"
    return op


def _inplace_unary(rule):
    name = node_name(rule)

    def op(self):
        check_target(self)
        return write(self, apply(rule, _E, (), (self,), name))

    op.__name__ = rule + "_"
    return op


def zero_(self):
    check_target(self)
    if _STATE.grad_enabled and self._rg:
        return write(self, apply("multiply", _E, (), (self, 0.0), "ZeroBackward0"))
    self._data[...] = 0
    self._vc.v += 1
    return self


def fill_(self, value):
    check_target(self)
    if isinstance(value, Tensor) and value._rg or _STATE.grad_enabled and self._rg:
        full = apply("full_like", {"dtype": None}, (None,), (self, value), "FillBackward0")
        return write(self, full)
    self._data[...] = value._data if isinstance(value, Tensor) else value
    self._vc.v += 1
    return self


def copy_(self, src):
    check_target(self)
    if isinstance(src, Tensor) and src._rg and _STATE.grad_enabled:
        moved = apply("broadcast_to", {"shape": self.shape}, self.shape,
                      (apply("astype", {"dtype": self.dtype}, self.dtype, (src,),
                             "ToCopyBackward0"),), "CopyBackwards")
        return write(self, moved)
    self._data[...] = src._data if isinstance(src, Tensor) else src
    self._vc.v += 1
    return self


def clamp_(self, min=None, max=None):
    check_target(self)
    return write(self, self.clamp(min, max))


def setitem(self, index, value):
    """`t[index] = value`: the `setitem` row (a copy with value written), written back."""
    if _STATE.grad_enabled and self._rg and self._grad_fn is None:  # torch indexes a view first
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    check_target(self)
    if isinstance(index, Tensor):
        index = index._data
    elif isinstance(index, list):
        index = numpy.asarray(index)
    v_rg = isinstance(value, Tensor) and value._rg
    if _STATE.grad_enabled and (self._rg or v_rg):
        if self._base is not None:
            raise NotImplementedError("srcgrad: a recorded write into a view (torch's "
                                      "CopySlices) is not supported yet")
        result = apply("setitem", _E, (), (self, index, value), "IndexPutBackward0")
        write(self, result)
        return
    self._data[index] = value._data if isinstance(value, Tensor) else value
    self._vc.v += 1


def add_at(target, index, values):
    """`numpy.add.at(target, index, values)` on Tensors (repeated indices accumulate): the
    `scatter_index` row, added into target in place. Helpers that build a cotangent this
    way (srcgrad.rules.helpers) are thereby differentiable again."""
    if not isinstance(target, Tensor):
        numpy.add.at(target, index, values._data if isinstance(values, Tensor) else values)
        return None
    if isinstance(index, Tensor):
        index = index._data
    scattered = apply("scatter_index", {"shape": target.shape}, target.shape, (values, index),
                      "IndexPutBackward0") if isinstance(values, Tensor) else None
    if scattered is None:
        numpy.add.at(target._data, index, values)
        target._vc.v += 1
        return None
    check_target(target)
    write(target, apply("add", _E, (), (target, scattered), "AddBackward0"))
    return None


def install(cls) -> None:
    for method, rule in (("add_", "add"), ("sub_", "subtract"), ("mul_", "multiply"),
                         ("div_", "divide"), ("pow_", "power"), ("true_divide_", "divide")):
        setattr(cls, method, _inplace(rule))
    for dunder, rule in (("iadd", "add"), ("isub", "subtract"), ("imul", "multiply"),
                         ("itruediv", "divide"), ("ipow", "power")):
        op = _inplace(rule)
        setattr(cls, f"__{dunder}__", lambda self, other, _op=op: _op(self, other))
    for rule in ("exp", "log", "sin", "cos", "tanh", "sqrt", "abs", "negative", "sigmoid",
                 "reciprocal", "square", "relu"):
        if rule in ("sigmoid", "relu"):
            def op(self, _m=rule):
                check_target(self)
                return write(self, getattr(self, _m)())
            setattr(cls, rule + "_", op)
        else:
            setattr(cls, rule + "_", _inplace_unary(rule))
    cls.neg_ = cls.negative_
    cls.zero_, cls.fill_, cls.copy_, cls.clamp_ = zero_, fill_, copy_, clamp_
    cls.__setitem__ = setitem


install(Tensor)
