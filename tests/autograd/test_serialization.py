"""Pickling tensors and sg.save/sg.load, as torch's (observed in torch 2.14.1)."""

import io
import os
import pickle

import numpy as np
import pytest

import srcgrad as sg


def test_a_pickled_tensor_is_a_new_leaf_with_its_values_and_requires_grad():
    x = sg.tensor([[1.5, -2.0]], dtype=sg.float64, requires_grad=True)
    x.grad = sg.ones(1, 2, dtype=sg.float64)
    y = pickle.loads(pickle.dumps(x))
    assert y.tolist() == [[1.5, -2.0]] and y.dtype == sg.float64 and y.requires_grad
    assert y.is_leaf and y.grad is None  # torch 2.14.1: the grad is not pickled
    z = pickle.loads(pickle.dumps(x * 2))  # torch 2.14.1: a non-leaf unpickles as a leaf
    assert z.is_leaf and z.requires_grad and z.tolist() == [[3.0, -4.0]]
    s = pickle.loads(pickle.dumps(sg.tensor(2.5)))  # 0-d stays 0-d
    assert s.shape == () and s.item() == 2.5
    v = pickle.loads(pickle.dumps(sg.arange(6).reshape(2, 3).t()))  # a non-contiguous view
    assert v.tolist() == [[0, 3], [1, 4], [2, 5]] and v.dtype == sg.int64


def test_deepcopy_as_torch():
    import copy

    x = sg.ones(2, requires_grad=True)
    x.grad = sg.full((2,), 3.0)
    d = copy.deepcopy({"a": x, "b": x})
    assert d["a"] is d["b"] and d["a"] is not x and d["a"].requires_grad and d["a"].is_leaf
    assert d["a"].grad.tolist() == [3.0, 3.0] and d["a"].grad is not x.grad
    d["a"].detach().add_(1.0)
    assert x.tolist() == [1.0, 1.0]  # not shared
    # torch 2.14.1's text
    with pytest.raises(RuntimeError, match=r"Only Tensors created explicitly by the user \(graph "
                                           r"leaves\) support the deepcopy protocol"):
        copy.deepcopy(x * 2)


def test_save_and_load_an_optimizer_state_dict(tmp_path):
    W = sg.tensor([1.0, 2.0], requires_grad=True)
    opt = sg.optim.Adam([W], lr=0.1)
    (W * W).sum().backward()
    opt.step()
    path = tmp_path / "state.pt"
    sg.save({"W": W, "opt": opt.state_dict(), "epoch": 3}, path)
    loaded = sg.load(path)
    assert loaded["epoch"] == 3 and np.array_equal(loaded["W"].detach().numpy(), W.detach().numpy())
    assert loaded["opt"]["state"][0]["step"].item() == 1.0
    opt2 = sg.optim.Adam([sg.tensor([0.0, 0.0], requires_grad=True)], lr=0.5)
    opt2.load_state_dict(loaded["opt"])
    assert opt2.param_groups[0]["lr"] == 0.1


def test_load_refuses_other_objects_unless_weights_only_is_false():
    buf = io.BytesIO()
    sg.save({"f": os.getcwd}, buf)
    buf.seek(0)
    # torch 2.14.1: "Weights only load failed. ... Trying to load unsupported GLOBAL posix.getcwd"
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        sg.load(buf)
    buf.seek(0)
    assert sg.load(buf, weights_only=False)["f"] is os.getcwd
