"""`sg.Tensor` and the creation functions (API.md §3; spec/torch_semantics.md §3, §10).

A Tensor wraps an array (`_data`, NumPy by default) with torch's autograd state:
`requires_grad`, `grad_fn` (an `OpNode`, None for leaves), `.grad`, hooks, and a
version counter shared with its views and `detach()` results. Ops on Tensors are
rows of the derivative table (srcgrad.autograd.ops, Note [One node per op] in
srcgrad.autograd.node).

Dtypes follow torch: Python floats make float32 tensors (torch's default dtype),
NumPy arrays and NumPy scalars (`np.float64(0.5)`, what indexing an array gives) keep theirs.
"""

from __future__ import annotations

import warnings
from weakref import ref as _weakref

import numpy

from srcgrad.autograd import grad_mode
from srcgrad.autograd.dtypes import of as _torch_dtype_object
from srcgrad.autograd.node import AccumulateGrad, add_hook, c_type, scalar_name, torch_dtype

__all__ = ["Tensor", "tensor", "zeros", "ones", "empty", "full", "rand", "randn", "arange",
           "linspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
           "randn_like", "manual_seed", "is_tensor", "from_numpy"]

_STATE = grad_mode.STATE
_INFERENCE_SEEN = grad_mode.INFERENCE_SEEN
DEFAULT_FLOAT = numpy.dtype(numpy.float32)


class _Version:
    """A version counter, shared by a tensor, its views and its detach() results."""

    __slots__ = ("v",)

    def __init__(self):
        self.v = 0


class Tensor:
    """An array with torch.autograd semantics."""

    # What every tensor has is a slot; what few have (a .grad, hooks, a base, an
    # AccumulateGrad) reads the class default until set in the instance dict.
    __slots__ = ("_data", "_rg", "_grad_fn", "_output_nr", "_vc", "__dict__", "__weakref__")
    _grad = _base = _hooks = _post_hooks = _acc = None
    # a base's live views (weakrefs); how a view was made; why its grad_fn may not be read
    _views = _creation = _stale = None  # (srcgrad.autograd.views)
    _retains_grad = _inference = False
    __array_priority__ = 1000  # ndarray <op> Tensor defers to Tensor

    def __init__(self, data=None, *, dtype=None, requires_grad=False):
        t = tensor(numpy.empty(0, DEFAULT_FLOAT) if data is None else data, dtype=dtype,
                   requires_grad=requires_grad)
        _init(self, t._data, t._rg)

    @classmethod
    def _make(cls, data, rg=False, grad_fn=None, output_nr=0, vc=None, base=None):
        t = object.__new__(cls)
        t._data = data
        t._rg = rg
        t._grad_fn = grad_fn
        t._output_nr = output_nr
        t._vc = vc if vc is not None else _Version()
        if base is not None:
            t._base = base
        if _INFERENCE_SEEN[0] and _STATE.inference:
            t._inference = True
        return t

    # ------------------------------------------------------------ autograd state
    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        flag = bool(requires_grad)
        if self._grad_fn is not None:
            if not flag:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to "
                    "use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach().")
            return self
        if flag and self._data.dtype.kind not in "fc":
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if flag and self._inference and not _STATE.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        self._rg = flag
        return self

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def grad_fn(self):
        if self._stale is not None:  # a view that may no longer be used (views.py)
            raise RuntimeError(self._stale)
        return self._grad_fn

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def grad(self):
        if self._grad_fn is not None and not self._retains_grad:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its "
                ".grad attribute won't be populated during autograd.backward(). If you indeed want "
                "the .grad field to be populated for a non-leaf Tensor, use .retain_grad() on the "
                "non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you "
                "access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for "
                "more information.", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError("assigned grad expected to be a Tensor or None but got grad of "
                                f"type {type(value).__name__}")
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor "
                    f"of size '{list(self.shape)}'. Please ensure that the gradient and the "
                    "tensor are the same size")
            if value.dtype != self.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{c_type(value.dtype)}' to a "
                    f"tensor with grad_dtype '{scalar_name(self.dtype)}'. The gradient must "
                    "match the tensor's grad_dtype (defaults to the tensor's dtype). You can set "
                    "the tensor's grad_dtype attribute with a specific dtype, or None to allow "
                    "any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and "
                    "its gradient may break downstream systems that assume they match.")
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def retain_grad(self) -> None:
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is None or self._retains_grad:
            return
        node = self._grad_fn
        if node._retain is None:
            node._retain = {}
        import weakref

        node._retain[self._output_nr] = weakref.ref(self)
        self._retains_grad = True

    def register_hook(self, hook):
        """`hook(grad) -> Tensor | None`, called with this tensor's total gradient."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            return add_hook(self._grad_fn.tensor_pre_hooks(self._output_nr, create=True), hook)
        if self._hooks is None:
            self._hooks = {}
        return add_hook(self._hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """`hook(tensor) -> None`, called after `.grad` of this leaf was updated."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        if self._post_hooks is None:
            self._post_hooks = {}
        return add_hook(self._post_hooks, hook)

    def accumulator(self):
        """This leaf's AccumulateGrad node, shared by all uses while alive."""
        acc = self._acc() if self._acc is not None else None
        if acc is None:  # (once per leaf per graph: the graph holds it, the leaf a weakref)
            acc = AccumulateGrad(self)
            self._acc = _weakref(acc)
        return acc

    # backward() is installed by srcgrad.autograd.engine, the operators and methods by
    # srcgrad.autograd.methods/inplace, the NumPy protocols by srcgrad.autograd.dispatch.

    def detach(self):
        """A new leaf over the same array and version counter, not requiring grad. Not a
        view (torch: a non-differentiable view): `_base` is None, writes through it bump
        the shared counter and change no graph."""
        t = Tensor._make(self._data, vc=self._vc)
        t._inference = self._inference  # an alias of an inference tensor is one (torch)
        return t

    def detach_(self):
        if self._base is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as "
                "True, gradients are views of DDP buckets, and hence detach_() cannot be called on "
                "these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
                "function in torch/optim/optimizer.py as the solution.")
        self._grad_fn = None
        self._rg = False
        self._output_nr = 0
        return self

    @property
    def data(self):
        """A detached alias whose in-place changes do not bump the version counter."""
        t = Tensor._make(self._data)
        t._inference = self._inference
        return t

    @data.setter
    def data(self, value):
        self._data = value._data if isinstance(value, Tensor) else numpy.asarray(value)

    @property
    def _version(self) -> int:
        if self._inference and not _STATE.inference:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._vc.v

    def _is_view(self) -> bool:
        return self._base is not None

    def is_inference(self) -> bool:
        return self._inference

    # ------------------------------------------------------------ array facts
    @property
    def shape(self) -> tuple:
        return self._data.shape

    def size(self, dim=None):
        return self._data.shape if dim is None else self._data.shape[dim]

    @property
    def dtype(self):
        return _torch_dtype_object(self._data.dtype)  # Note [Dtype objects] in srcgrad.autograd.dtypes

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    @property
    def device(self) -> str:
        return "cpu"

    def stride(self, dim=None):
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        return strides if dim is None else strides[dim]

    def is_contiguous(self) -> bool:
        return self._data.flags.c_contiguous

    def numpy(self):
        if self._rg and _STATE.grad_enabled:  # torch: allowed under no_grad (a Function's forward)
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        return self._data

    def item(self):
        return self._data.item()

    def tolist(self):
        return self._data.tolist()

    def __array__(self, dtype=None, copy=None):
        return self._data if dtype is None else self._data.astype(dtype)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return len(self._data)

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self._data)))

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data)

    def __float__(self):
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def _scalar(self):
        """The one element (torch converts any one-element tensor; NumPy 2 only 0-d)."""
        if self._data.size != 1:
            raise RuntimeError("only one element tensors can be converted to Python scalars")
        return self._data.reshape(()).item()

    def __index__(self):
        return self._data.__index__()

    def __hash__(self):
        return id(self)

    def __repr__(self) -> str:
        return _format(self)

    __str__ = __repr__


def share_storage(view, source, multi=None) -> None:
    """`view` (whose array is a NumPy view of `source`'s) becomes a view of `source`'s
    root base: it shares the version counter and is registered with the base, so an
    in-place op on the base or another view regenerates its grad_fn (Note [Views and
    CopySlices] in srcgrad.autograd.views). `multi` is (node name, output index) for an
    output of an op returning several views (split, chunk, unbind)."""
    import weakref

    view._inference = source._inference  # torch: a view is an inference tensor iff its base is
    if source._inference:  # and inference tensors track no views: `_is_view()` is False
        return
    view._vc = source._vc
    base = source._base if source._base is not None else source
    view._base = base
    views = base._views
    if views is None:
        base._views = [weakref.ref(view)]
    else:
        views.append(weakref.ref(view))
        if len(views) > 32 and len(views) & (len(views) - 1) == 0:  # at powers of two
            views[:] = [r for r in views if r() is not None]
    if not _STATE.grad_enabled:
        view._creation = ("no_grad",)
    elif source._creation is not None:
        view._creation = source._creation
    elif multi is not None:
        view._creation = ("multi",) + tuple(multi)


def _init(t, data, rg):
    t._data = data
    t._rg = rg
    t._grad_fn = None
    t._output_nr = 0
    t._grad = None
    t._vc = _Version()
    t._base = None
    t._hooks = t._post_hooks = t._acc = None
    t._retains_grad = False
    t._inference = _STATE.inference


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


# ---------------------------------------------------------------- repr (torch's layout)
def _format(t: Tensor) -> str:
    data = t._data
    body = _format_data(data)
    extras = []
    if data.dtype != DEFAULT_FLOAT and data.dtype.name not in ("int64", "bool") or (
            data.dtype.name == "bool" and False):
        extras.append(f"dtype={torch_dtype(data.dtype)}")
    elif data.dtype.name == "bool" and data.size == 0:
        extras.append("dtype=torch.bool")
    if data.size == 0 and data.ndim != 1:
        extras.insert(0, f"size={tuple(data.shape)}")
    if t._grad_fn is not None:
        extras.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._rg:
        extras.append("requires_grad=True")
    return "tensor(" + ", ".join([body] + extras) + ")"


def _format_data(data) -> str:
    if data.size == 0:
        return "[]"
    opts = {"separator": ", ", "prefix": "tensor("}
    if data.dtype.kind == "f":
        finite = data[numpy.isfinite(data)]
        integral = finite.size == 0 or bool(numpy.all(finite == numpy.round(finite)))
        big = finite.size and float(numpy.max(numpy.abs(finite))) >= 1e8
        if not integral or big:
            opts.update(precision=4, floatmode="fixed")
            if big or (finite.size and 0 < float(numpy.min(numpy.abs(finite[finite != 0]),
                                                           initial=1.0)) < 1e-4):
                opts.update(floatmode="maxprec_equal")
    text = numpy.array2string(data, **opts)
    return text


# ---------------------------------------------------------------- creation
_RNG = [numpy.random.default_rng()]


def manual_seed(seed: int) -> None:
    """Seed the generator behind rand/randn."""
    _RNG[0] = numpy.random.default_rng(seed)


def _dtype_of(data, dtype):
    if dtype is not None:
        return numpy.dtype(dtype)
    if isinstance(data, (numpy.ndarray, numpy.generic)):  # torch: a NumPy scalar keeps its dtype
        return data.dtype
    probe = numpy.asarray(data)
    if probe.dtype.kind == "f":
        return DEFAULT_FLOAT
    if probe.dtype.kind == "c":
        return numpy.dtype(numpy.complex64)
    if probe.dtype.kind in "iu":
        return numpy.dtype(numpy.int64)
    return probe.dtype


def _leaf(data, requires_grad) -> Tensor:
    t = Tensor._make(data)
    if requires_grad:
        if data.dtype.kind not in "fc":
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        t._rg = True
    return t


def _check_device(device):
    if device not in (None, "cpu"):
        raise NotImplementedError(f"srcgrad Tensors live on the CPU (NumPy); device={device!r} "
                                  "is not supported yet")


def tensor(data, *, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    """A new leaf holding a copy of `data` (a number, nested list, array or Tensor)."""
    _check_device(device)
    if isinstance(data, Tensor):
        data = data._data
    elif isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in data):
        data = [d._data if isinstance(d, Tensor) else d for d in data]
    array = numpy.array(data, dtype=_dtype_of(data, dtype))
    return _leaf(array, requires_grad)


def from_numpy(array) -> Tensor:
    """A leaf sharing `array`'s memory."""
    return Tensor._make(numpy.asarray(array))


def _shape(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _factory(fill):
    def make(*size, dtype=None, requires_grad=False, device="cpu"):
        _check_device(device)
        shape = _shape(size)
        return _leaf(fill(shape, numpy.dtype(dtype) if dtype is not None else DEFAULT_FLOAT),
                     requires_grad)

    return make


def _uniform(shape, dtype):
    return _RNG[0].random(shape).astype(dtype)


def _normal(shape, dtype):
    return _RNG[0].standard_normal(shape).astype(dtype)


zeros = _factory(numpy.zeros)
ones = _factory(numpy.ones)
empty = _factory(numpy.empty)
rand = _factory(_uniform)
randn = _factory(_normal)
zeros.__name__, ones.__name__, empty.__name__, rand.__name__, randn.__name__ = (
    "zeros", "ones", "empty", "rand", "randn")


def full(size, fill_value, *, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    _check_device(device)
    return _leaf(numpy.full(tuple(size), fill_value, dtype=_dtype_of(fill_value, dtype)),
                 requires_grad)


def arange(start, end=None, step=1, *, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    _check_device(device)
    if end is None:
        start, end = 0, start
    probe = numpy.arange(start, end, step)
    if dtype is None:  # torch: float bounds give the default dtype, int bounds int64
        dtype = DEFAULT_FLOAT if probe.dtype.kind == "f" else numpy.dtype(numpy.int64)
    return _leaf(probe.astype(dtype), requires_grad)


def linspace(start, end, steps, *, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    _check_device(device)
    return _leaf(numpy.linspace(start, end, steps).astype(dtype or DEFAULT_FLOAT), requires_grad)


def eye(n, m=None, *, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    _check_device(device)
    return _leaf(numpy.eye(n, m, dtype=dtype or DEFAULT_FLOAT), requires_grad)


def _like(fill):
    def make(other, *, dtype=None, requires_grad=False, device="cpu"):
        _check_device(device)
        data = other._data if isinstance(other, Tensor) else numpy.asarray(other)
        return _leaf(fill(data.shape, numpy.dtype(dtype) if dtype is not None else data.dtype),
                     requires_grad)

    return make


zeros_like = _like(numpy.zeros)
ones_like = _like(numpy.ones)
empty_like = _like(numpy.empty)
rand_like = _like(_uniform)
randn_like = _like(_normal)


def full_like(other, fill_value, *, dtype=None, requires_grad=False, device="cpu") -> Tensor:
    _check_device(device)
    data = other._data if isinstance(other, Tensor) else numpy.asarray(other)
    return _leaf(numpy.full(data.shape, fill_value, dtype=dtype or data.dtype), requires_grad)
