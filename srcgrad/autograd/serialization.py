"""Pickling tensors, `sg.save` and `sg.load` (torch.save/torch.load's contract).

A pickled Tensor is its values (bytes, dtype, shape) and `requires_grad`: it unpickles
as a new leaf, as torch's does (a non-leaf's graph and any `.grad` are not kept; nor is
storage shared between two pickled views, unlike torch's). `sg.load` reads only tensors,
containers and Python scalars unless `weights_only=False` (torch 2.6+'s default and
error), because unpickling other objects can run arbitrary code. `copy.deepcopy` is
torch's: a leaf with its `.grad`; a non-leaf is refused.
"""

from __future__ import annotations

import io
import os
import pickle

import numpy

from srcgrad.autograd.tensor import Tensor, _leaf

__all__ = ["save", "load"]


def _rebuild(raw: bytes, dtype: str, shape: tuple, requires_grad: bool) -> Tensor:
    data = numpy.frombuffer(raw, dtype=numpy.dtype(dtype)).reshape(shape).copy()
    return _leaf(data, requires_grad)


def _reduce_ex(self, protocol):
    data = numpy.asarray(self._data)
    if data.dtype.hasobject:
        raise pickle.PicklingError("srcgrad: a Tensor of Python objects cannot be pickled")
    # (tobytes is C order for any layout; not ascontiguousarray, which makes a 0-d array 1-d)
    return (_rebuild, (data.tobytes(), data.dtype.str, data.shape, bool(self._rg)))


def _deepcopy(self, memo):
    """torch's: a leaf's values, requires_grad and .grad copied; a non-leaf refused."""
    if self._grad_fn is not None:
        raise RuntimeError(
            "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
            "protocol at the moment.  If you were attempting to deepcopy a module, this may be "
            "because of a torch.nn.utils.weight_norm usage, see "
            "https://github.com/pytorch/pytorch/pull/103001")
    new = _leaf(self._data.copy(), False)
    new._rg = self._rg
    memo[id(self)] = new
    if self._grad is not None:
        import copy

        new._grad = copy.deepcopy(self._grad, memo)
    return new


Tensor.__reduce_ex__ = _reduce_ex
Tensor.__deepcopy__ = _deepcopy


class _WeightsOnly(pickle.Unpickler):
    _ALLOWED = {("srcgrad.autograd.serialization", "_rebuild"): _rebuild}

    def find_class(self, module, name):
        found = self._ALLOWED.get((module, name))
        if found is None and (module, name) == ("collections", "OrderedDict"):
            import collections

            found = collections.OrderedDict
        if found is None:
            raise pickle.UnpicklingError(
                "Weights only load failed. Re-running `sg.load` with `weights_only` set to "
                "`False` will likely succeed, but it can result in arbitrary code execution. "
                "Do it only if you got the file from a trusted source.\n\n"
                f"Trying to load unsupported GLOBAL {module}.{name}")
        return found


def save(obj, f, pickle_module=pickle, pickle_protocol=4, **_) -> None:
    """Pickle `obj` (tensors, optimizer state dicts, containers) into a path or file.
    Protocol 4 by default (torch's is 2): protocol 2 spells bytes as a `_codecs` call."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            pickle_module.dump(obj, fh, protocol=pickle_protocol)
    else:
        pickle_module.dump(obj, f, protocol=pickle_protocol)


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **_):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return load(fh, map_location, weights_only=weights_only)
    if map_location not in (None, "cpu"):
        raise NotImplementedError(f"srcgrad Tensors live on the CPU; map_location="
                                  f"{map_location!r} is not supported")
    if not weights_only:
        return pickle.load(f)
    data = f.read() if hasattr(f, "read") else f
    return _WeightsOnly(io.BytesIO(data)).load()
