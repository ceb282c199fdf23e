"""torch's dtype objects (`sg.float32`, `t.dtype`), `sg.finfo` and `sg.iinfo`.

Note [Dtype objects]
~~~~~~~~~~~~~~~~~~~~
NumPy's dtypes cannot carry torch's attributes (`is_floating_point`, `is_signed`,
`to_complex()`; numpy.dtype cannot be subclassed), so `sg.float32` and `Tensor.dtype`
are `sg.dtype` objects, one per NumPy dtype, each standing for its NumPy dtype:
NumPy takes any object with a `.dtype` attribute as that dtype (`numpy.zeros(2,
dtype=sg.float32)`, `a.astype(t.dtype)`, `a.dtype == t.dtype`), the object compares
equal to and hashes as its NumPy dtype (so dicts keyed by NumPy dtypes find it), and
other NumPy attributes (`kind`, `name`, `char`, ...) are the NumPy dtype's. As in
torch, a dtype never equals a string (`sg.float32 == "float32"` is False) and prints
as `torch.float32`.
"""

from __future__ import annotations

import builtins

import numpy

__all__ = ["dtype", "of", "finfo", "iinfo"]

_COMPLEX = {"float16": "complex32", "float32": "complex64", "float64": "complex128"}
_REAL = {"complex64": "float32", "complex128": "float64"}


class dtype:  # noqa: N801 (torch's name)
    """One torch dtype: `sg.float32`, the `dtype` of a float32 Tensor (Note [Dtype objects])."""

    __slots__ = ("dtype", "_hash")

    def __new__(cls, np_dtype):
        return of(np_dtype)

    @property
    def is_floating_point(self) -> builtins.bool:
        return self.dtype.kind == "f"

    @property
    def is_complex(self) -> builtins.bool:
        return self.dtype.kind == "c"

    @property
    def is_signed(self) -> builtins.bool:
        return self.dtype.kind in "fci"

    @property
    def itemsize(self) -> builtins.int:
        return self.dtype.itemsize

    def to_complex(self) -> dtype:
        name = _COMPLEX.get(self.dtype.name)
        if name is None:
            raise RuntimeError(f"Unknown Complex ScalarType for {_scalar(self)}")
        return of(numpy.dtype(name)) if name != "complex32" else self._no_complex32()

    def _no_complex32(self):
        raise NotImplementedError("torch.complex32 (srcgrad: complex32) has no NumPy dtype")

    def to_real(self) -> dtype:
        name = _REAL.get(self.dtype.name)
        return of(numpy.dtype(name)) if name is not None else self

    def __getattr__(self, name):
        return getattr(self.dtype, name)

    def __eq__(self, other):
        if isinstance(other, dtype):
            return self is other
        if isinstance(other, numpy.dtype) or (isinstance(other, type) and
                                              issubclass(other, numpy.generic)):
            return self.dtype == other
        return NotImplemented if not isinstance(other, str) else False

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"torch.{self.dtype.name}"

    __str__ = __repr__

    def __reduce__(self):
        return (of, (self.dtype.str,))


def _scalar(d) -> str:
    return {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}.get(d.dtype.name, d.dtype.name)


_OBJECTS: dict = {}


def of(np_dtype) -> dtype:
    """The `sg.dtype` of a NumPy dtype (or anything numpy.dtype accepts); one per dtype."""
    d = _OBJECTS.get(np_dtype)
    if d is None:
        key = numpy.dtype(np_dtype)
        d = _OBJECTS.get(key)
        if d is None:
            d = object.__new__(dtype)
            object.__setattr__(d, "dtype", key)
            object.__setattr__(d, "_hash", hash(key))
            _OBJECTS[key] = d
        if isinstance(np_dtype, numpy.dtype):
            _OBJECTS[np_dtype] = d
    return d


class finfo:  # noqa: N801 (torch's name)
    """torch.finfo: the floating dtype's limits as Python floats, `dtype` its name."""

    def __init__(self, type):  # noqa: A002 (torch's parameter name; sg.finfo() defaults it)
        d = numpy.dtype(type)
        if d.kind not in "fc":
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo "
                            "to handle 'torch.finfo'")
        info = numpy.finfo(d)
        self.bits = int(info.bits)
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # torch: a Python float, 1e-06
        self.dtype = info.dtype.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801 (torch's name)
    """torch.iinfo: the integer dtype's limits as Python ints, `dtype` its name."""

    def __init__(self, type):  # noqa: A002
        d = numpy.dtype(type)
        if d.kind not in "iub":
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to "
                            "handle 'torch.iinfo'")
        info = numpy.iinfo(numpy.uint8 if d.kind == "b" else d)
        self.bits, self.max, self.min = int(info.bits), int(info.max), int(info.min)
        self.dtype = d.name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
