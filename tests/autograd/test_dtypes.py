"""torch's dtype objects, finfo and iinfo (srcgrad.autograd.dtypes); values observed in
torch 2.14."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import srcgrad as sg

# observed in torch 2.14: (is_floating_point, is_complex, is_signed, itemsize)
FACTS = {"float16": (True, False, True, 2), "float32": (True, False, True, 4),
         "float64": (True, False, True, 8), "complex64": (False, True, True, 8),
         "int64": (False, False, True, 8), "uint8": (False, False, False, 1),
         "bool": (False, False, False, 1)}


@pytest.mark.parametrize("name", sorted(FACTS))
def test_dtype_attributes(name):
    d = getattr(sg, name)
    assert (d.is_floating_point, d.is_complex, d.is_signed, d.itemsize) == FACTS[name]
    assert repr(d) == str(d) == f"torch.{name}"  # observed: torch.float32, ...
    assert isinstance(d, sg.dtype)


def test_tensor_dtype_is_the_dtype_object_and_numpy_takes_it():
    t = sg.ones(2, dtype=sg.float64)
    assert t.dtype is sg.float64 and t.dtype.is_floating_point
    assert sg.tensor([1, 2]).dtype is sg.int64 and not sg.tensor([1, 2]).dtype.is_floating_point
    # it stands for its NumPy dtype: equal both ways, same hash, accepted as dtype=
    assert sg.float32 == np.dtype("float32") and np.dtype("float32") == sg.float32
    assert sg.float32 == np.float32 and sg.float32 != np.float64
    assert {np.dtype("float32"): 1}[sg.float32] == 1
    assert np.zeros(2, dtype=sg.float32).dtype == np.float32
    assert np.ones(2).astype(t.dtype).dtype == np.float64
    assert sg.float32.kind == "f" and sg.float32.name == "float32"
    # observed in torch 2.14: float32 == float, never a string; pickles to itself
    assert sg.float32 == sg.float and sg.float32 != "float32" and hash(sg.float32) == hash(sg.float)
    assert pickle.loads(pickle.dumps(sg.float32)) is sg.float32
    assert sg.dtype(np.float64) is sg.float64


def test_to_complex_and_to_real():
    # observed in torch 2.14: float32 -> complex64, float64 -> complex128, complex64 -> float32
    assert sg.float32.to_complex() is sg.complex64 and sg.float64.to_complex() is sg.complex128
    assert sg.complex64.to_real() is sg.float32 and sg.float64.to_real() is sg.float64
    with pytest.raises(RuntimeError, match="^Unknown Complex ScalarType for Int$"):
        sg.int32.to_complex()


def test_finfo_and_iinfo():
    f = sg.finfo(sg.float32)
    # observed in torch 2.14
    assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution, f.dtype) == (
        32, 1.1920928955078125e-07, 3.4028234663852886e+38, -3.4028234663852886e+38,
        1.1754943508222875e-38, 1.1754943508222875e-38, 1e-06, "float32")
    assert type(f.eps) is float
    assert repr(f) == ("finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07,"
                       " smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)")
    assert sg.finfo().dtype == "float32" and sg.finfo(sg.float64).eps == 2.220446049250313e-16
    i = sg.iinfo(sg.int32)
    assert (i.bits, i.max, i.min, i.dtype) == (32, 2147483647, -2147483648, "int32")
    assert type(i.max) is int
    assert repr(i) == "iinfo(min=-2.14748e+09, max=2.14748e+09, dtype=int32)"
    with pytest.raises(TypeError, match=r"^torch.finfo\(\) requires a floating point input type. "
                                        r"Use torch.iinfo to handle 'torch.finfo'$"):
        sg.finfo(sg.int32)
    with pytest.raises(TypeError, match=r"^torch.iinfo\(\) requires an integer input type. Use "
                                        r"torch.finfo to handle 'torch.iinfo'$"):
        sg.iinfo(sg.float32)
