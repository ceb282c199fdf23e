"""as_strided / as_strided_ / empty_strided / storage_offset / set_ (srcgrad.autograd.strided);
values and texts observed in torch 2.14, gradients also checked by central differences."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd.gradcheck import gradcheck


def test_as_strided_values_grad_fn_and_gradient():
    # observed in torch 2.14: [[1, 3], [2, 4]], AsStridedBackward0, y._base is x,
    # x.grad [0, 1, 3, 2, 4, 0], stride (1, 2), storage_offset 1
    x = sg.arange(6.0).requires_grad_()
    y = x.as_strided((2, 2), (1, 2), 1)
    np.testing.assert_array_equal(y.detach().numpy(), [[1, 3], [2, 4]])
    assert y.grad_fn.name() == "AsStridedBackward0" and y._base is x
    assert y.stride() == (1, 2) and y.storage_offset() == 1
    (y * sg.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 1, 3, 2, 4, 0])


def test_as_strided_overlapping_sums_gradients():
    # observed in torch 2.14: [[0,1],[1,2],[2,3]], x.grad [1, 2, 2, 1]
    x = sg.arange(4.0).requires_grad_()
    y = sg.as_strided(x, (3, 2), (1, 1))
    np.testing.assert_array_equal(y.detach().numpy(), [[0, 1], [1, 2], [2, 3]])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 2, 2, 1])
    # of a non-leaf: observed [2, 0, 2, 0, 2, 0]
    z = sg.arange(6.0, requires_grad=True)
    (z * 2).as_strided((3,), (2,)).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [2, 0, 2, 0, 2, 0])


def test_as_strided_against_central_differences():
    x = sg.tensor(np.linspace(-1, 1, 7), requires_grad=True)
    assert gradcheck(lambda t: (t.sin() * 1.0).as_strided((3, 3), (2, 1), 0).exp(), (x,))


def test_as_strided_of_a_view_counts_in_the_storage():
    # observed in torch 2.14: v.as_strided((2,), (1,)) [2, 3] (v's own offset); offset 0: [0, 1]
    x = sg.arange(6.0)
    v = x[2:]
    assert v.storage_offset() == 2
    np.testing.assert_array_equal(v.as_strided((2,), (1,)).numpy(), [2, 3])
    np.testing.assert_array_equal(v.as_strided((2,), (1,), 0).numpy(), [0, 1])


def test_as_strided_errors_are_torchs():
    x = sg.arange(4.0)
    with pytest.raises(RuntimeError, match=r"^setStorage: sizes \[3, 2\], strides \[2, 1\], "
                                           r"storage offset 0, and itemsize 4 requiring a storage "
                                           r"size of 24 are out of bounds for storage of size 16$"):
        x.as_strided((3, 2), (2, 1))
    with pytest.raises(RuntimeError, match=r"^as_strided: Negative strides are not supported at "
                                           r"the moment, got strides: \[-1\]$"):
        x.as_strided((2,), (-1,))
    with pytest.raises(RuntimeError, match="^mismatch in length of strides and shape$"):
        x.as_strided((2, 2), (1,))


def test_as_strided_into_a_gap_of_a_strided_base_is_refused_with_grad():
    x = sg.from_numpy(np.arange(8.0)[::2]).requires_grad_()  # its storage has gaps
    with pytest.raises(NotImplementedError, match="^as_strided: the view reaches memory that is "
                                                  "not an element of its base tensor"):
        x.as_strided((2,), (1,))


def test_write_into_base_regenerates_as_strided_view():
    x = sg.arange(4.0).requires_grad_()
    b = x * 1
    y = b.as_strided((3, 2), (1, 1))
    b.mul_(sg.tensor([1.0, 10.0, 100.0, 1000.0]))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 20, 200, 1000])


def test_as_strided_inplace_and_empty_strided():
    # observed in torch 2.14: [[0, 2], [1, 3]] of shape (2, 2)
    x = sg.arange(6.0)
    x.as_strided_((2, 2), (1, 2))
    np.testing.assert_array_equal(x.numpy(), [[0, 2], [1, 3]])
    # observed: shape (2, 3), stride (1, 2), float32, not contiguous, not a view, no grad
    t = sg.empty_strided((2, 3), (1, 2))
    assert (t.shape, t.stride(), t.dtype, t.is_contiguous(), t._is_view(), t.requires_grad) == (
        (2, 3), (1, 2), sg.float32, False, False, False)
    t = sg.empty_strided((2, 3), (1, 2), dtype=sg.float64, requires_grad=True)
    assert (t.stride(), t.dtype, t.requires_grad, t.is_leaf) == ((1, 2), sg.float64, True, True)


def test_set_shares_data_or_is_refused():
    # observed in torch 2.14: x.set_(y); y.add_(1) -> x is [1., 1.] (not y itself); set_() -> []
    x, y = sg.ones(3), sg.zeros(2)
    x.set_(y)
    y.add_(1)
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0])
    assert x is not y and x._version == y._version
    assert repr(sg.ones(3).set_()) == "tensor([])"
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used in "
                                           "an in-place operation.$"):
        sg.ones(3, requires_grad=True).set_(sg.zeros(2))
    with pytest.raises(NotImplementedError, match=r"^srcgrad: set_\(\) of or to a tensor that "
                                                  "requires grad"):
        sg.ones(3).set_(sg.zeros(2, requires_grad=True))
