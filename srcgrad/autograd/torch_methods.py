"""Tensor methods torch has and the table's own names do not give (torch's signatures).

Each is a composition of rows (srcgrad.autograd.ops.apply) or of other methods: no
formula lives here. Installed on `Tensor` when the runtime is imported; the `sg.<name>`
functions of the torch namespace (srcgrad.autograd.namespace) call them.
"""

from __future__ import annotations

import collections

import numpy

from srcgrad.autograd.methods import return_types_sort
from srcgrad.autograd.methods import sort as _table_sort
from srcgrad.autograd.ops import apply
from srcgrad.autograd.tensor import Tensor, _leaf, _shape

__all__ = ["gather", "index_select", "softmax", "log_softmax", "logsumexp", "topk", "median",
           "var_mean", "std_mean", "argmax", "argmin", "roll", "split_with_sizes"]

_E: dict = {}
return_types_topk = collections.namedtuple("topk", ["values", "indices"])
return_types_median = collections.namedtuple("median", ["values", "indices"])


def _index(index):
    data = index._data if isinstance(index, Tensor) else numpy.asarray(index)
    if data.dtype.kind not in "iu":
        raise RuntimeError(f"gather(): Expected dtype int64 for index, but got {data.dtype}")
    return data


def gather(self, dim, index, *, sparse_grad=False):
    """out[i][j] = self[i][index[i][j]] (dim 1): `take_along_axis` on the part of self
    that index covers (torch lets index be smaller than self off `dim`)."""
    idx = _index(index)
    dim = dim % max(self._data.ndim, 1)
    if idx.ndim != self._data.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    cover = tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(idx.shape))
    src = self if all(idx.shape[d] == self._data.shape[d] for d in range(idx.ndim) if d != dim) \
        else self[cover]
    return apply("take_along_axis", {"axis": dim}, dim, (src, idx), "GatherBackward0")


def index_select(self, dim, index):
    idx = _index(index)
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    dim = dim % max(self._data.ndim, 1)
    return apply("take", {"axis": dim}, dim, (self, idx.reshape(-1)), "IndexSelectBackward0")


def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    """torch's scatter_reduce for reduce="sum" and "mean": scatter_add onto self (its
    scattered positions zeroed first without include_self), "mean" divided by how many
    values met at each position. "prod", "amax", "amin" are refused, not approximated."""
    if reduce not in ("sum", "mean"):
        if reduce in ("prod", "amax", "amin"):
            raise NotImplementedError(f"srcgrad: scatter_reduce(reduce={reduce!r}) is not "
                                      "supported yet (reduce='sum' and 'mean' are)")
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    from srcgrad.autograd.inplace import _scatter_index

    counts = numpy.zeros(self._data.shape, self._data.dtype)
    numpy.add.at(counts, _scatter_index(dim, _index(index)), 1)
    base = self if include_self else self.masked_fill(counts > 0, 0.0)
    total = base.scatter_add(dim, index, src)
    if reduce == "sum":
        return total
    denominator = counts + (1 if include_self else 0)
    return total / Tensor._make(numpy.where(denominator == 0, 1, denominator))


def _shift(x, dim):
    """The largest entry along `dim`, a constant (0 where it is not finite)."""
    m = numpy.max(x._data, axis=dim, keepdims=True) if x._data.ndim else x._data
    return Tensor._make(numpy.where(numpy.isfinite(m), m, 0).astype(x._data.dtype))


def logsumexp(self, dim, keepdim=False):
    """log(sum(exp(x))) along dim, shifted by the (constant) max for stability."""
    dims = tuple(dim) if isinstance(dim, (list, tuple)) else dim
    m = _shift(self, dims)
    out = (self - m).exp().sum(dims, keepdim=True).log() + m
    return out if keepdim or self._data.ndim == 0 else out.squeeze(dims)


def _implicit_dim(ndim, name):
    import warnings

    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=4)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(self, dim=None, dtype=None):
    x = self if dtype is None else self.to(dtype)
    if dim is None:
        dim = _implicit_dim(x._data.ndim, "softmax")
    if x._data.ndim == 0:
        return (x - x).exp()
    return apply("torch_softmax", {"axis": dim}, dim, (x,), "SoftmaxBackward0")


def log_softmax(self, dim=None, dtype=None):
    x = self if dtype is None else self.to(dtype)
    if dim is None:
        dim = _implicit_dim(x._data.ndim, "log_softmax")
    if x._data.ndim == 0:
        return x - x
    return apply("torch_log_softmax", {"axis": dim}, dim, (x,), "LogSoftmaxBackward0")


def _gather_at(self, order, dim):
    return gather(self, dim, Tensor._make(order))


def topk(self, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) entries along dim and their indices; the values are
    gathered at the indices, so the gradient reaches those entries alone."""
    data = self._data
    dim = dim % max(data.ndim, 1)
    if not 0 <= k <= (data.shape[dim] if data.ndim else 1):
        raise RuntimeError("selected index k out of range")
    key = -data if largest else data
    order = numpy.take(numpy.argsort(key, axis=dim, kind="stable"), numpy.arange(k), axis=dim)
    return return_types_topk(_gather_at(self, order.astype(numpy.int64), dim),
                             Tensor._make(order.astype(numpy.int64)))


def sort(self, dim=-1, descending=False, *, stable=False, axis=None):
    """torch's sort; `stable=True` keeps tied entries in their order (indices from a
    stable argsort, values gathered at them, so the gradient follows the indices)."""
    if not stable:
        return _table_sort(self, dim, descending, axis=axis)
    ax = (dim if axis is None else axis) % max(self._data.ndim, 1)
    order = numpy.argsort(-self._data if descending else self._data, axis=ax, kind="stable")
    order = order.astype(numpy.int64)
    return return_types_sort(_gather_at(self, order, ax), Tensor._make(order))


def median(self, dim=None, keepdim=False):
    """torch's median: the lower of the two middle values; with `dim`, (values, indices)."""
    data = self._data
    if dim is None:
        flat = self.reshape(-1)
        order = numpy.argsort(flat._data, kind="stable")
        return flat[int(order[(flat._data.size - 1) // 2])]
    dim = dim % max(data.ndim, 1)
    middle = (data.shape[dim] - 1) // 2
    order = numpy.argsort(data, axis=dim, kind="stable")
    at = numpy.take(order, [middle], axis=dim).astype(numpy.int64)
    values = _gather_at(self, at, dim)
    indices = Tensor._make(at)
    if not keepdim:
        values, indices = values.squeeze(dim), Tensor._make(numpy.squeeze(at, dim))
    return return_types_median(values, indices)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 0 if unbiased is False else 1


def var_mean(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    ddof = _correction(unbiased, correction)
    return (self.var(dim, keepdim=keepdim, correction=ddof), self.mean(dim, keepdim))


def std_mean(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    ddof = _correction(unbiased, correction)
    return (self.std(dim, keepdim=keepdim, correction=ddof), self.mean(dim, keepdim))


def _arg(fn):
    def op(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        ax = dim if axis is None else axis
        keep = bool(keepdim if keepdims is None else keepdims)
        out = fn(self._data, axis=ax)
        if keep:
            out = numpy.expand_dims(out, ax) if ax is not None else out.reshape(
                (1,) * self._data.ndim)
        return Tensor._make(numpy.asarray(out, dtype=numpy.int64))

    op.__name__ = fn.__name__
    return op


argmax, argmin = _arg(numpy.argmax), _arg(numpy.argmin)


def roll(self, shifts, dims=None):
    if isinstance(shifts, list):
        shifts = tuple(shifts)
    if isinstance(dims, list):
        dims = tuple(dims)
    if isinstance(shifts, tuple) and isinstance(dims, tuple):  # one roll per dimension
        if len(shifts) != len(dims):
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               f"dims:{len(dims)}")
        out = self
        for s, d in zip(shifts, dims):
            out = roll(out, s, d)
        return out
    if dims is None:  # torch: rolls the flattened tensor and restores the shape
        return apply("roll", {"shift": shifts, "axis": None}, (shifts, None), (self,),
                     "RollBackward0")
    return apply("roll", {"shift": shifts, "axis": dims}, (shifts, dims), (self,),
                 "RollBackward0")


def split_with_sizes(self, split_sizes, dim=0):
    return self.split(list(split_sizes), dim)


def movedim(self, source, destination):
    return numpy.moveaxis(self, source, destination)


def tril(self, diagonal=0):
    return numpy.tril(self, diagonal)


def triu(self, diagonal=0):
    return numpy.triu(self, diagonal)


def masked_select(self, mask):
    m = mask._data if isinstance(mask, Tensor) else numpy.asarray(mask)
    shape = numpy.broadcast_shapes(self.shape, m.shape)
    x = self if self.shape == shape else self.expand(shape)
    return x[numpy.broadcast_to(m, shape)]


def nonzero(self, *, as_tuple=False):
    where = numpy.nonzero(self._data)
    if as_tuple:
        return tuple(Tensor._make(w.astype(numpy.int64)) for w in where)
    return Tensor._make(numpy.stack(where, axis=1).astype(numpy.int64) if where else
                        numpy.zeros((1, 0), numpy.int64))


# ---------------------------------------------------------------- in-place comparisons, shapes
def _compare_inplace(name):
    def op(self, other):
        """torch's `x.eq_(y)`: x holds 1/0 in its own dtype; no gradient reaches x's past."""
        return self.copy_(getattr(self, name)(other).to(self._data.dtype))

    op.__name__ = name + "_"
    return op


def _shape_inplace(name):
    def op(self, *args):
        """torch's in-place shape ops: self becomes the view (its grad_fn the view's node);
        the version moves, as torch's (observed in torch 2.14.1: unsqueeze_ bumps it)."""
        from srcgrad.autograd.inplace import check_target

        if self._base is not None or self._views and any(r() is not None for r in self._views):
            raise NotImplementedError(f"srcgrad: {name}_() of a view or of a tensor with views "
                                      f"is not supported yet; use {name}() instead")
        check_target(self)
        out = getattr(self, name)(*args)
        self._data, self._grad_fn, self._output_nr = out._data, out._grad_fn, out._output_nr
        self._views = None  # (only `out`, which is gone: self is that view now)
        self._vc.v += 1
        return self

    op.__name__ = name + "_"
    return op


# ---------------------------------------------------------------- new_* and dtype facts
def _new(fill):
    def make(self, *size, dtype=None, device=None, requires_grad=False, **_):
        dt = self._data.dtype if dtype is None else numpy.dtype(dtype)
        return _leaf(fill(_shape(size), dt), requires_grad)

    return make


new_zeros, new_ones, new_empty = _new(numpy.zeros), _new(numpy.ones), _new(numpy.empty)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, **_):
    dt = self._data.dtype if dtype is None else numpy.dtype(dtype)
    return _leaf(numpy.full(tuple(size), fill_value, dtype=dt), requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, **_):
    """A copy of `data` with self's dtype unless given (torch's)."""
    if isinstance(data, Tensor):
        data = data._data
    dt = self._data.dtype if dtype is None else numpy.dtype(dtype)
    return _leaf(numpy.array(data, dtype=dt), requires_grad)


def is_floating_point(self) -> bool:
    return self._data.dtype.kind == "f"


def is_complex(self) -> bool:
    return self._data.dtype.kind == "c"


def element_size(self) -> int:
    return self._data.itemsize


_INSTALL = dict(
    gather=gather, index_select=index_select, scatter_reduce=scatter_reduce, softmax=softmax,
    log_softmax=log_softmax,
    logsumexp=logsumexp, topk=topk, sort=sort, median=median, var_mean=var_mean, std_mean=std_mean,
    argmax=argmax, argmin=argmin, roll=roll, split_with_sizes=split_with_sizes, tril=tril,
    triu=triu, movedim=movedim, masked_select=masked_select, nonzero=nonzero, new_zeros=new_zeros,
    new_ones=new_ones, new_empty=new_empty, new_full=new_full, new_tensor=new_tensor,
    is_floating_point=is_floating_point, is_complex=is_complex, element_size=element_size)
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _INSTALL[_name + "_"] = _compare_inplace(_name)
for _name in ("t", "transpose", "squeeze", "unsqueeze"):
    _INSTALL[_name + "_"] = _shape_inplace(_name)
for _name, _fn in _INSTALL.items():
    setattr(Tensor, _name, _fn)
