"""torch's strided-storage ops on sg.Tensors: `as_strided`, `as_strided_`, `empty_strided`,
`storage_offset`, `set_`.

A Tensor's storage here is the NumPy buffer at the bottom of its array's `.base` chain
(torch.from_numpy shares the same buffer as its storage); sizes, strides and offsets
count elements of it, as torch's do. `as_strided` makes a NumPy view of that buffer,
checked against its bounds with torch's texts, and registered as a view of the tensor's
root base (Note [Views and CopySlices] in srcgrad.autograd.views); its grad_fn is
`AsStridedBackward0`, a `getitem` of the base at the view's element indices, so
overlapping elements sum their gradients as torch's. Where the view reaches memory
that is not an element of the base (the gaps of a strided base), it cannot be
differentiated and is refused when the base requires grad.

`set_(source)` makes the tensor share `source`'s array and version counter (torch:
its storage); it is refused where autograd is involved.
"""

from __future__ import annotations

import numpy
from numpy.lib.stride_tricks import as_strided as _np_as_strided

from srcgrad.autograd import grad_mode, tensor, torch_methods
from srcgrad.autograd.ops import apply
from srcgrad.autograd.tensor import Tensor, _check_device, _leaf, share_storage

__all__ = ["as_strided", "empty_strided", "storage_offset", "set_"]

_STATE = grad_mode.STATE
_E: dict = {}


def _buffer(a) -> numpy.ndarray:
    while True:
        base = a.base
        if type(base).__name__ == "DummyArray":  # what numpy's as_strided views hang on
            base = base.base
        if not isinstance(base, numpy.ndarray):
            return a
        a = base


def _address(a) -> int:
    return a.__array_interface__["data"][0]


def _storage(data) -> tuple:
    """(the buffer's elements as a flat array, `data`'s offset into it)."""
    buf = _buffer(data)
    if not buf.flags.c_contiguous or buf.dtype != data.dtype:
        raise NotImplementedError("as_strided: srcgrad takes a tensor's storage to be its NumPy "
                                  "buffer, and this tensor's buffer is not a contiguous array of "
                                  "its dtype")
    flat = buf.reshape(-1)
    return flat, (_address(data) - _address(flat)) // data.itemsize


def storage_offset(self) -> int:
    return _storage(self._data)[1]


def _strided_view(data, size, stride, offset) -> numpy.ndarray:
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got "
                           f"strides: {list(stride)}")
    flat, own = _storage(data)
    offset = own if offset is None else int(offset)
    needed = 0 if 0 in size else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if needed > flat.size:
        item = data.itemsize
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {offset}, and itemsize {item} requiring a storage size of "
                           f"{needed * item} are out of bounds for storage of size "
                           f"{flat.size * item}")
    return _np_as_strided(flat[offset:], size, [s * data.itemsize for s in stride])


def _base_index(view, base) -> tuple:
    """Per element of `view`, its index in `base`'s array; None if one lies outside it."""
    b_flat, b_off = _storage(base)
    v_off = (_address(view) - _address(b_flat)) // view.itemsize if view.size else 0
    item = base.itemsize
    pos = numpy.full(b_flat.size, -1, numpy.intp)  # buffer element -> flat index in base
    _np_as_strided(pos[b_off:], base.shape, [s // item * pos.itemsize for s in base.strides])[
        ...] = numpy.arange(base.size).reshape(base.shape)
    mine = _np_as_strided(pos[v_off:], view.shape,
                          [s // item * pos.itemsize for s in view.strides]).copy()
    if view.size and mine.min() < 0:
        return None
    return numpy.unravel_index(mine, base.shape)


def as_strided(self, size, stride, storage_offset=None):
    """torch's Tensor.as_strided: a view of the storage with these sizes and strides."""
    data = _strided_view(self._data, size, stride, storage_offset)
    root = self._base if self._base is not None else self
    if _STATE.grad_enabled and root._rg:
        index = _base_index(data, root._data)
        if index is None:
            raise NotImplementedError("as_strided: the view reaches memory that is not an "
                                      "element of its base tensor (a gap of a strided tensor); "
                                      "srcgrad cannot differentiate it. Call .contiguous() first")
        out = apply("getitem", _E, (), (root, index), "AsStridedBackward0")
        out._data = data  # the values getitem copied, as a view of the storage
    else:
        out = Tensor._make(data)
    share_storage(out, root)
    return out


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """torch.empty_strided: an uninitialised (here zero) tensor with these strides."""
    _check_device(device)
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    dt = tensor.DEFAULT_FLOAT if dtype is None else numpy.dtype(dtype)
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    buf = numpy.zeros(extent, dt)
    return _leaf(_np_as_strided(buf, size, [s * dt.itemsize for s in stride]), requires_grad)


def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """torch's Tensor.set_: share `source`'s data (set_() empties the tensor)."""
    from srcgrad.autograd.inplace import check_target

    check_target(self)
    if self._rg or self._grad_fn is not None or self._base is not None or (
            isinstance(source, Tensor) and (source._rg or source._grad_fn is not None)):
        raise NotImplementedError("srcgrad: set_() of or to a tensor that requires grad (or of a "
                                  "view) is not supported; srcgrad tensors share memory only as "
                                  "views")
    if source is None:
        self._data = numpy.zeros((0,), self._data.dtype)
    elif not isinstance(source, Tensor):
        raise TypeError(f"set_(): expected a Tensor source, got {type(source).__name__}")
    elif size is not None:
        self._data = _strided_view(source._data, size, stride if stride is not None else
                                   _contiguous_strides(size), storage_offset)
    else:
        self._data = source._data
    if isinstance(source, Tensor):
        self._vc = source._vc  # one storage, one version counter
    self._vc.v += 1
    return self


def _contiguous_strides(size) -> tuple:
    strides, acc = [], 1
    for n in reversed(tuple(size)):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


for _name, _fn in (("as_strided", as_strided), ("storage_offset", storage_offset),
                   ("set_", set_), ("as_strided_", torch_methods._shape_inplace("as_strided"))):
    setattr(Tensor, _name, _fn)
