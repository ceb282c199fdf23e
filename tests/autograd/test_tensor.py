"""The eager runtime beyond the spec's case tables: creation, repr, methods, NumPy
functions on Tensors, engine order, gradient layout, sg.compile, the example script.
Gradients are checked against central differences in float64, never against srcgrad."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import srcgrad as sg

ROOT = pathlib.Path(__file__).resolve().parents[2]


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def leaf(values):
    return sg.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


# ---------------------------------------------------------------- creation and repr
def test_dtypes_follow_torch():
    assert sg.tensor([1.0, 2.0]).dtype == np.float32  # torch's default dtype
    assert sg.tensor([1, 2]).dtype == np.int64
    assert sg.tensor(np.ones(2)).dtype == np.float64  # NumPy arrays keep theirs
    assert sg.zeros(2, 3).shape == (2, 3) and sg.ones((2, 3)).dtype == np.float32
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype"):
        sg.ones(2, dtype=np.int64, requires_grad=True)


def test_repr_as_torch_prints():
    assert repr(sg.ones(5, requires_grad=True)) == \
        "tensor([1., 1., 1., 1., 1.], requires_grad=True)"
    assert repr(sg.ones(5, requires_grad=True) * 2) == \
        "tensor([2., 2., 2., 2., 2.], grad_fn=<MulBackward0>)"
    assert repr(sg.tensor([0.5, 1.0])) == "tensor([0.5000, 1.0000])"
    assert repr(sg.tensor(np.array([1.0]))) == "tensor([1.], dtype=torch.float64)"


def test_seed_pack_hook_example_prints(capsys):
    a = sg.ones(5, requires_grad=True)
    b = sg.ones(5, requires_grad=True) * 2

    def pack(x):
        print("Packing", x)
        return x

    def unpack(x):
        print("Unpacking", x)
        return x

    with sg.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = a * b
    y.sum().backward()
    lines = set(capsys.readouterr().out.splitlines())
    assert lines == {"Packing tensor([1., 1., 1., 1., 1.], requires_grad=True)",
                     "Packing tensor([2., 2., 2., 2., 2.], grad_fn=<MulBackward0>)",
                     "Unpacking tensor([1., 1., 1., 1., 1.], requires_grad=True)",
                     "Unpacking tensor([2., 2., 2., 2., 2.], grad_fn=<MulBackward0>)"}
    np.testing.assert_allclose(a.grad.numpy(), 2.0)


# ---------------------------------------------------------------- ops
@pytest.mark.parametrize("name,f", [
    ("np.exp", lambda t: np.exp(t).sum()),
    ("np.sum axis", lambda t: (np.sum(t * t, axis=0) ** 2).sum()),
    ("method chain", lambda t: t.tanh().mean(dim=1).sum()),
    ("matmul", lambda t: (t @ t.T).sum()),
    ("getitem", lambda t: (t[0, 1:] * t[1, :2]).sum()),
    ("max dim", lambda t: t.max(dim=1).values.sum()),
    ("sort", lambda t: (t.sort(dim=1).values * np.arange(3.0)).sum()),
    ("reshape/permute", lambda t: (t.reshape(3, 2).permute(1, 0) * t).sum()),
    ("relu/clamp", lambda t: (t.relu() * 2 + t.clamp(-0.5, 0.5)).sum()),
    ("sigmoid", lambda t: t.sigmoid().sum()),
    ("concatenate", lambda t: (np.concatenate([t, t * 2], axis=1) ** 2).sum()),
])
def test_op_gradients_match_central_differences(name, f):
    x0 = np.random.default_rng(1).standard_normal((2, 3))
    x = leaf(x0)
    out = f(x)
    assert isinstance(out, sg.Tensor) and out.grad_fn is not None, name
    out.backward()
    expected = numeric_grad(lambda v: float(f(sg.tensor(v)).item()), x0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6, atol=1e-8)


def test_second_order_matches_central_differences():
    x0 = np.array([0.3, -0.7, 1.1])
    x = leaf(x0)
    (g,) = sg.autograd.grad((np.sin(x) * x ** 3).sum(), x, create_graph=True)
    (h,) = sg.autograd.grad(g.sum(), x)

    def first(v):
        return np.cos(v) * v ** 3 + 3 * np.sin(v) * v ** 2

    np.testing.assert_allclose(h.numpy(), numeric_grad(lambda v: first(v).sum(), x0),
                               rtol=1e-6)


def test_integer_outputs_do_not_require_grad():
    x = leaf([1.0, 3.0, 2.0])
    assert not x.argmax().requires_grad
    assert not x.sort().indices.requires_grad
    assert not (x > 1).requires_grad


def test_a_numpy_function_without_a_row_is_refused_on_tensors_that_require_grad():
    x = leaf([1.0, 2.0])
    with pytest.raises(TypeError, match="not in srcgrad's derivative table"):
        np.unique(x)
    assert isinstance(np.unique(x.detach()), sg.Tensor)


# ---------------------------------------------------------------- engine
def test_shared_subexpression_runs_once_with_the_total_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    calls = []
    y.register_hook(lambda g: calls.append(g.numpy().copy()))
    (y * 3 + y * 4).sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [7.0, 7.0])
    np.testing.assert_allclose(x.grad.numpy(), [14.0, 14.0])


def test_grad_of_a_transposed_leaf_keeps_its_strides():
    a = sg.tensor(np.random.default_rng(0).random((3, 4)).T, requires_grad=True)
    (a * 2).sum().backward()
    assert a.grad.stride() == a.stride() == (1, 4)


def test_accumulation_is_in_place_without_create_graph():
    x = leaf([1.0, 2.0])
    (x * 2).sum().backward()
    g = x.grad
    (x * 3).sum().backward()
    assert x.grad is g
    np.testing.assert_allclose(g.numpy(), [5.0, 5.0])


def test_no_grad_records_nothing():
    x = leaf([1.0])
    with sg.no_grad():
        y = x * 2
    assert y.grad_fn is None and not y.requires_grad


# ---------------------------------------------------------------- sg.compile
def test_compiled_function_is_one_node_with_exact_gradients():
    @sg.compile
    def f(W, x):
        return np.sum(np.tanh(x @ W) ** 2)

    rng = np.random.default_rng(0)
    W0, x0 = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    W = leaf(W0)
    y = f(W, sg.tensor(x0))
    assert y.grad_fn.name() == "CompiledFunctionBackward"
    assert [n is None for n, _ in y.grad_fn.next_functions] == [False, True]
    y.backward()
    np.testing.assert_allclose(W.grad.numpy(), numeric_grad(lambda v: f(v, x0), W0), rtol=1e-6)
    (g,) = sg.autograd.grad(f(W, sg.tensor(x0)), W, create_graph=True)
    (h,) = sg.autograd.grad(g.sum(), W)
    first = sg.grad(f)
    np.testing.assert_allclose(h.numpy(), numeric_grad(lambda v: first(v, x0).sum(), W0),
                               rtol=1e-5, atol=1e-7)
    assert f(W0, x0) == pytest.approx(float(y.item()))  # plain arrays: just f


# ---------------------------------------------------------------- examples/
def test_train_tensor_example_reduces_the_loss():
    spec = importlib.util.spec_from_file_location("train_tensor", ROOT / "examples" /
                                                  "train_tensor.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    losses = module.train(steps=150, verbose=False)
    assert losses[-1] < 0.2 * losses[0]


def test_an_op_on_many_operands():
    # np.stack of 70 tensors: 70 operands in one op, with and without a graph
    plain = [sg.tensor(np.full(2, float(i))) for i in range(70)]
    assert np.stack(plain).shape == (70, 2)
    leaves = [sg.tensor(np.full(2, float(i)), requires_grad=True) for i in range(70)]
    (np.stack(leaves) ** 2).sum().backward()
    assert np.allclose(leaves[69].grad.numpy(), [138.0, 138.0])
