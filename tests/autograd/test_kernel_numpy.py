"""srcgrad.kernel_numpy (Note [The kernels' NumPy]): each direct path gives NumPy's own
result, bit for bit, with NumPy's dtype, shape and flags; anything else is NumPy's call."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad import kernel_numpy as kn
from srcgrad.kernels import op_kernel

RNG = np.random.default_rng(0)
ARRAYS = [RNG.standard_normal((8, 16)).astype(np.float32), RNG.standard_normal((3, 4, 5)),
          np.float32(RNG.standard_normal()) * np.ones((), np.float32),
          RNG.standard_normal((7,)).astype(np.float32) * 1e6 + 0.1]


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("x", ARRAYS, ids=lambda x: str(x.shape))
@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"axis": -1, "keepdims": True},
                                    {"keepdims": True}])
def test_reductions_are_numpys_bits(x, kwargs):
    if x.ndim == 0 and "axis" in kwargs:
        return
    for fast, slow in ((kn.sum, np.sum), (kn.max, np.max), (kn.min, np.min),
                       (kn.mean, np.mean)):
        got, want = fast(x, **kwargs), slow(x, **kwargs)
        assert type(got) is type(want)  # a NumPy scalar where NumPy gives one
        _same(got, want)


def test_mean_takes_numpys_path_off_floats():
    # integers and float16 are NumPy's (a float64 / float32 sum), and so is an empty mean
    for x in (np.arange(6), np.ones((2, 3), np.float16), np.array([True, False, True])):
        got, want = kn.mean(x), np.mean(x)
        assert type(got) is type(want)
        _same(got, want)
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"), np.errstate(invalid="ignore"):
        kn.mean(np.zeros(0, np.float32))


def test_broadcast_to_of_a_scalar_is_numpys_view():
    g = np.array(2.5, np.float32)
    got, want = kn.broadcast_to(g, (8, 2)), np.broadcast_to(g, (8, 2))
    _same(got, want)
    assert got.strides == want.strides == (0, 0)
    assert not got.flags.writeable and not want.flags.writeable
    assert np.shares_memory(got, g)
    with pytest.raises(ValueError, match="read-only"):
        got[0, 0] = 1
    _same(kn.broadcast_to(np.arange(3.0), (2, 3)), np.broadcast_to(np.arange(3.0), (2, 3)))
    with pytest.raises(ValueError):
        kn.broadcast_to(g, (-1,))


def test_other_names_are_numpys():
    assert kn.shape(ARRAYS[0]) == (8, 16) and kn.shape(3.0) == ()
    assert kn.tanh is np.tanh and kn.linalg is np.linalg and kn.float32 is np.float32


def test_tensors_take_numpys_path():
    # under create_graph a kernel's backward runs on Tensors: the call reaches the
    # Tensor's __array_function__ with what the generated code passed
    x = sg.tensor(ARRAYS[0], requires_grad=True)
    s = kn.sum(x, axis=1, keepdims=True)
    assert isinstance(s, sg.Tensor) and s.grad_fn is not None and tuple(s.shape) == (8, 1)
    m = kn.mean(x)
    assert isinstance(m, sg.Tensor) and np.allclose(m.item(), ARRAYS[0].mean())


def test_eager_kernels_are_bound_to_it():
    k = op_kernel("mean", {"axis": None, "keepdims": False}, (True,))
    assert k.forward.__globals__["xp"] is kn
