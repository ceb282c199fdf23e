"""In-place Tensor ops (`add_`, `mul_`, `t[i] = v`, `t += u`, `zero_`, `copy_`, ...) and the
version counter (spec/torch_semantics.md §3, §6).

An in-place op is the out-of-place op applied to the target, its result written into the
target's memory (so views and `detach()` aliases see it), the shared version counter
bumped once, and, when a node was recorded, the target rebased onto that node (torch:
the grad_fn of a non-leaf becomes the in-place op's; for a view, the base's becomes
CopySlices, Note [Views and CopySlices] in srcgrad.autograd.views). Under no_grad the
write is invisible to autograd: the grad_fn stays.

Where a node is recorded, the op reads a *snapshot* of the target (a copy of its array
with its history) rather than the target itself: what the node saves is the value
before the write (torch saves `original_self`), never the memory the write overwrites.
"""

from __future__ import annotations

import numpy

from srcgrad.autograd import grad_mode
from srcgrad.autograd.ops import DUAL, apply
from srcgrad.autograd.tensor import Tensor
from srcgrad.autograd.views import check_creation, move_history, rebase_view, refresh_views
from srcgrad.contexts import mutation_allowed

_STATE = grad_mode.STATE
_E: dict = {}
OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a "
           "single memory location. Please clone() the tensor before performing the operation.")


def check_target(target: Tensor) -> None:
    """torch's checks before an in-place write into `target` (check_inplace)."""
    if target._inference and not _STATE.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed.You can make a clone to get a normal tensor before doing "
                           "inplace update.See https://github.com/pytorch/rfcs/pull/17 for more "
                           "details.")
    if _STATE.grad_enabled:
        base = target._base
        if base is not None and (target._rg or base._rg):
            check_creation(target)
            if base._rg and base._grad_fn is None:
                raise RuntimeError("a view of a leaf Variable that requires grad is being used "
                                   "in an in-place operation.")
        if target._rg and target._grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
    data = target._data
    if not data.flags.writeable:
        if any(s == 0 and n > 1 for s, n in zip(data.strides, data.shape)):
            raise RuntimeError(OVERLAP)  # an expanded view
        if target._base is not None:
            data.setflags(write=True)  # NumPy's read-only diagonal() view: torch's is writable


def recording(self, args=(), kwargs=None) -> bool:
    """Whether an op on `self` and these arguments records a node."""
    if not _STATE.grad_enabled or _STATE.inference:
        return False
    if self._rg:
        return True
    if any(isinstance(a, Tensor) and a._rg for a in args):
        return True
    return bool(kwargs) and any(isinstance(a, Tensor) and a._rg for a in kwargs.values())


def snapshot(t: Tensor) -> Tensor:
    """The value of `t` before a write, with its history (torch's original_self)."""
    return Tensor._make(t._data.copy(), t._rg, t._grad_fn, t._output_nr)


# ---------------------------------------------------------------- writing memory
def store(target: Tensor, value, index=Ellipsis) -> None:
    """Write `value` into `target[index]` and bump the version, with no graph."""
    ctx = mutation_allowed()
    if ctx is not None:
        ctx.before_write(target)
    target._data[index] = value._data if isinstance(value, Tensor) else value
    target._vc.v += 1
    if DUAL.stored is not None:  # a forward-AD level is open: the written part's tangent
        DUAL.stored(target, value, index)


def after_write(target: Tensor, recorded: bool) -> None:
    """Regenerate the grad_fn of every live view of the memory just written."""
    base = target._base if target._base is not None else target
    if base._views:
        refresh_views(base, recorded)


def write(target: Tensor, result) -> Tensor:
    """Write `result` (a Tensor from the out-of-place op) into `target`."""
    data = result._data if isinstance(result, Tensor) else numpy.asarray(result)
    node = result._grad_fn if isinstance(result, Tensor) else None
    if node is not None and target._base is not None:
        check_creation(target)
    ctx = mutation_allowed()
    if ctx is not None:
        ctx.before_write(target)
    dst = target._data
    if dst.shape != data.shape:
        data = numpy.broadcast_to(data, dst.shape)
    numpy.copyto(dst, data, casting="same_kind")
    target._vc.v += 1
    if node is not None:
        if target._base is not None:
            rebase_view(target, result)
        else:
            move_history(target, node, result._output_nr)
        _saved_output_is_target(node, result, target)
    after_write(target, node is not None)
    if DUAL.written is not None:  # a forward-AD level is open: the target takes the tangent
        DUAL.written(target, result)
    return target


def _saved_output_is_target(node, result, target) -> None:
    """A saved output of the in-place op is the target from now on: a later write into
    the target invalidates it (spec §6: `y.exp_()` then `y.add_(1)`)."""
    versions = node._versions
    if versions is not None:
        old_vc = result._vc
        node._versions = [(target._vc, target._vc.v, v[2], None)
                          if v is not None and v[0] is old_vc else v for v in versions]


# ---------------------------------------------------------------- the methods
def _inplace(method: str):
    """`t.<name>_(...)`: the out-of-place method `method` on a snapshot, written back."""
    def op(self, *args, **kwargs):
        check_target(self)
        src = self
        if recording(self, args, kwargs):
            src = snapshot(self)
            args = tuple(src if a is self else a for a in args)
        return write(self, getattr(src, method)(*args, **kwargs))

    op.__name__ = method.strip("_") + "_"
    return op


def zero_(self):
    return fill_(self, 0, "ZeroBackward0")


def fill_(self, value, _name="FillBackward0"):
    check_target(self)
    if recording(self, (value,)):
        # where(False, self, value): the old value's gradient is a zero array, not None, as
        # torch's `self: zeros_like(grad)`: the node before runs (its saved tensors are
        # version-checked) and a leaf gets a .grad of zeros
        nowhere = numpy.zeros(self._data.shape, bool)
        full = apply("where", _E, (), (nowhere, snapshot(self), value), _name)
        return write(self, full)
    store(self, value)
    after_write(self, False)
    return self


def copy_(self, src, non_blocking=False):
    check_target(self)
    if not isinstance(src, Tensor):
        src = Tensor._make(numpy.asarray(src, dtype=self._data.dtype))
    if recording(self, (src,)):
        # where(True, src, self): gradient to src (unbroadcast), none to the old value
        everywhere = numpy.ones(self._data.shape, bool)
        moved = apply("where", _E, (), (everywhere, src, snapshot(self)), "CopyBackwards")
        return write(self, moved)
    store(self, src)
    after_write(self, False)
    return self


def _index(index):
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, list):
        return numpy.asarray(index)
    if isinstance(index, tuple) and any(isinstance(i, (Tensor, list)) for i in index):
        return tuple(i._data if isinstance(i, Tensor) else numpy.asarray(i)
                     if isinstance(i, list) else i for i in index)
    return index


def _basic(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (slice, int, numpy.integer))
               and not isinstance(p, bool) for p in parts)


def setitem(self, index, value):
    """`t[index] = value`. A basic index writes through a view (torch: `t[index].copy_(v)`,
    CopySlices); an index array is `index_put_` (IndexPutBackward0)."""
    index = _index(index)
    if _basic(index):
        parts = index if isinstance(index, tuple) else (index,)
        if not any(p is Ellipsis for p in parts):
            parts = parts + (Ellipsis,)  # a view even where every axis is indexed (0-d)
        copy_(apply("getitem", _E, (), (self, parts), "AsStridedBackward0"), value)
        return
    if _STATE.grad_enabled and self._rg and self._grad_fn is None:  # torch indexes a view first
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    check_target(self)
    if recording(self, (value,)):
        write(self, apply("setitem", _E, (), (self, index, value), "IndexPutBackward0"))
        return
    store(self, value, index)
    after_write(self, False)


def add_at(target, index, values):
    """`numpy.add.at(target, index, values)` on Tensors (repeated indices accumulate): the
    `scatter_index` row, added into target in place. Helpers that build a cotangent this
    way (srcgrad.rules.helpers) are thereby differentiable again."""
    if not isinstance(target, Tensor):
        numpy.add.at(target, index, values._data if isinstance(values, Tensor) else values)
        return None
    index = _index(index)
    if not isinstance(values, Tensor):
        ctx = mutation_allowed()
        if ctx is not None:
            ctx.before_write(target)
        numpy.add.at(target._data, index, values)
        target._vc.v += 1
        after_write(target, False)
        return None
    check_target(target)
    scattered = apply("scatter_index", {"shape": target.shape}, target.shape, (values, index),
                      "IndexPutBackward0")
    src = snapshot(target) if recording(target, (values,)) else target
    write(target, apply("add", _E, (), (src, scattered), "AddBackward0"))
    return None


# ---------------------------------------------------------------- out-of-place forms
# torch methods with no NumPy-named row, defined by rows (each records its own nodes)
def _dim_index(t, dim, index):
    index = index._data if isinstance(index, Tensor) else numpy.asarray(index)
    return (slice(None),) * (dim % t._data.ndim) + (index,)


def masked_fill(self, mask, value):
    mask = mask._data if isinstance(mask, Tensor) else numpy.asarray(mask)
    return apply("where", _E, (), (mask, value, self), "MaskedFillBackward0")


def index_add(self, dim, index, source, *, alpha=1):
    if alpha != 1:
        source = source * alpha
    scattered = apply("scatter_index", {"shape": self.shape}, self.shape,
                      (source, _dim_index(self, dim, index)), "IndexAddBackward0")
    return apply("add", _E, (), (self, scattered), "IndexAddBackward0")


def index_fill(self, dim, index, value):
    mask = numpy.zeros(self._data.shape, bool)
    mask[_dim_index(self, dim, index)] = True
    return apply("where", _E, (), (mask, value, self), "IndexFillBackward0")


def index_copy(self, dim, index, source):
    return apply("setitem", _E, (), (self, _dim_index(self, dim, index), source),
                 "IndexCopyBackward0")


def _scatter_index(dim, index) -> tuple:
    """torch's scatter index along `dim` as NumPy's: `self[i][index[i][j]]...` for each
    element of `index` (the other axes are the element's own position)."""
    index = index._data if isinstance(index, Tensor) else numpy.asarray(index)
    grids = list(numpy.indices(index.shape, sparse=True))
    grids[dim % index.ndim] = index
    return tuple(grids)


def _scatter_source(src, index):
    shape = numpy.shape(index._data if isinstance(index, Tensor) else index)
    if isinstance(src, Tensor) and src.shape != shape:  # torch reads src[:index.shape]
        return src[tuple(slice(0, n) for n in shape)]
    return src


def scatter_add(self, dim, index, src):
    scattered = apply("scatter_index", {"shape": self.shape}, self.shape,
                      (_scatter_source(src, index), _scatter_index(dim, index)),
                      "ScatterAddBackward0")
    return apply("add", _E, (), (self, scattered), "ScatterAddBackward0")


def scatter(self, dim, index, src=None, *, value=None):
    """torch's scatter (src a Tensor, or `value`/a number); with repeated indices the last
    write wins (torch: undefined)."""
    if src is None or not isinstance(src, Tensor):
        src = value if src is None else src
    return apply("setitem", _E, (), (self, _scatter_index(dim, index),
                                     _scatter_source(src, index)), "ScatterBackward0")


def lerp(self, end, weight):
    return self + weight * (end - self)


def addcmul(self, tensor1, tensor2, *, value=1):
    return self + value * (tensor1 * tensor2)


def addcdiv(self, tensor1, tensor2, *, value=1):
    return self + value * (tensor1 / tensor2)


def clamp_min(self, min):
    return self.clamp(min=min)


def clamp_max(self, max):
    return self.clamp(max=max)


def _random_fill(draw):
    def op(self, *args, generator=None):
        from srcgrad.autograd.tensor import _RNG

        values = draw(_RNG[0], self._data.shape, *args).astype(self._data.dtype)
        return copy_(self, Tensor._make(values))

    return op


uniform_ = _random_fill(lambda rng, shape, a=0.0, b=1.0: rng.uniform(a, b, shape))
normal_ = _random_fill(lambda rng, shape, mean=0.0, std=1.0: rng.normal(mean, std, shape))


def fill_diagonal_(self, fill_value, wrap=False):
    mask = numpy.zeros(self._data.shape, bool)
    numpy.fill_diagonal(mask, True, wrap=wrap)
    check_target(self)
    src = snapshot(self) if recording(self, (fill_value,)) else self
    return write(self, apply("where", _E, (), (mask, fill_value, src), "FillBackward0"))


def resize_(self, *sizes):
    """torch's resize_: a new shape keeping the leading elements; a resize to the same
    shape is a no-op and does not bump the version (test_resize_version_bump)."""
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    if shape == self._data.shape:
        return self
    if self._rg:
        raise RuntimeError("cannot resize variables that require grad")
    data = numpy.zeros(shape, self._data.dtype)
    n = min(data.size, self._data.size)
    data.reshape(-1)[:n] = self._data.reshape(-1)[:n]
    self._data = data
    self._vc.v += 1
    return self


def resize_as_(self, other):
    return resize_(self, other.shape)


# the in-place methods: name_ -> the out-of-place method it writes back
_METHODS = {
    "add": "add", "sub": "sub", "subtract": "sub", "mul": "mul", "multiply": "mul",
    "div": "div", "divide": "div", "true_divide": "div", "pow": "pow", "fmod": "fmod",
    "remainder": "remainder", "atan2": "atan2", "arctan2": "atan2", "hypot": "hypot",
    "clamp": "clamp", "clip": "clamp", "clamp_min": "clamp_min", "clamp_max": "clamp_max",
    "masked_fill": "masked_fill", "index_add": "index_add", "index_fill": "index_fill",
    "index_copy": "index_copy", "scatter": "scatter", "scatter_add": "scatter_add",
    "lerp": "lerp", "addcmul": "addcmul", "addcdiv": "addcdiv",
    "relu": "relu", "sigmoid": "sigmoid", "neg": "neg", "negative": "neg", "abs": "abs",
    "absolute": "abs", "square": "square", "rsqrt": "rsqrt", "logical_not": "logical_not",
}
for _m in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan",
           "sinh", "cosh", "tanh", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "asinh",
           "acosh", "atanh", "reciprocal", "sign", "floor", "ceil", "trunc", "round"):
    _METHODS[_m] = _m
_DUNDERS = {"iadd": "__add__", "isub": "__sub__", "imul": "__mul__", "itruediv": "__truediv__",
            "ipow": "__pow__", "ifloordiv": "__floordiv__", "imod": "__mod__",
            "iand": "__and__", "ior": "__or__", "ixor": "__xor__"}


def install(cls) -> None:
    for name, fn in (("masked_fill", masked_fill), ("index_add", index_add),
                     ("index_fill", index_fill), ("index_copy", index_copy), ("lerp", lerp),
                     ("scatter", scatter), ("scatter_add", scatter_add),
                     ("addcmul", addcmul), ("addcdiv", addcdiv), ("clamp_min", clamp_min),
                     ("clamp_max", clamp_max)):
        if not hasattr(cls, name):
            setattr(cls, name, fn)
    for name, method in _METHODS.items():
        setattr(cls, name + "_", _inplace(method))
    for dunder, method in _DUNDERS.items():
        setattr(cls, f"__{dunder}__", _inplace(method))
    cls.zero_, cls.fill_, cls.copy_, cls.__setitem__ = zero_, fill_, copy_, setitem
    cls.uniform_, cls.normal_, cls.fill_diagonal_ = uniform_, normal_, fill_diagonal_
    cls.resize_, cls.resize_as_ = resize_, resize_as_


install(Tensor)
