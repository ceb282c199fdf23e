"""The torch namespace on tensors (`sg.cat`, `sg.gather`, ...): the same programs as torch's,
values and gradients observed in torch; out=, dtypes, new_*, scalar conversions."""

import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import srcgrad as sg

_HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("observe_ns", _HERE / "observe_namespace_in_torch.py")
observe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(observe)
# observed in torch 2.14.1: observe_namespace_in_torch.py run with torch wrote each case's
# (values, grad of x, grad of y) for the weighted sum of its output
OBSERVED = json.loads((_HERE / "torch_namespace_observed.json").read_text())
CASES = observe.cases(sg)


def test_every_observed_case_is_run():
    assert sorted(CASES) == sorted(OBSERVED)


@pytest.mark.parametrize("name", sorted(OBSERVED))
def test_same_program_as_torch(name):
    x = sg.tensor(observe.X, requires_grad=True)
    y = sg.tensor(observe.Y, requires_grad=True)
    r = CASES[name](x, y)
    W = np.linspace(-1.0, 2.0, 48)
    w = sg.tensor(W[: r.numel()].reshape(r.shape))
    (r * w).sum().backward()
    value, gx, gy = OBSERVED[name]
    np.testing.assert_allclose(r.detach().numpy().ravel(), value, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(x.grad.numpy().ravel(), gx, rtol=1e-9, atol=1e-11)
    if gy is None:
        assert y.grad is None
    else:
        np.testing.assert_allclose(y.grad.numpy().ravel(), gy, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", ["logsumexp", "softmax", "gather", "scatter_add", "scatter",
                                  "index_select", "scatter_reduce_mean_excl", "var_mean", "topk",
                                  "median_dim", "roll_dims",
                                  "einsum_list", "cat0", "where", "masked_select"])
def test_gradcheck_first_and_second_order(name):
    x = sg.tensor(observe.X + 0.05, requires_grad=True)  # (X[0, 0] is 0: where's kink)
    y = sg.tensor(observe.Y, requires_grad=True)
    assert sg.autograd.gradcheck(CASES[name], (x, y))
    assert sg.autograd.gradgradcheck(CASES[name], (x, y))


def test_out_refused_when_an_input_requires_grad_and_written_otherwise():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    out = sg.zeros(4)
    # torch 2.14.1's text
    with pytest.raises(RuntimeError, match=r"cat\(\): functions with out=\.\.\. arguments don't "
                                           "support automatic differentiation, but one of the "
                                           "arguments requires grad."):
        sg.cat([x, x], out=out)
    with sg.no_grad():
        assert sg.cat([x, x * 2], out=out) is out
    assert out.tolist() == [1.0, 2.0, 2.0, 4.0] and out._version == 1
    assert sg.exp(sg.zeros(2), out=out) is out and out.tolist() == [1.0, 1.0]  # resized


def test_dtypes_and_default_dtype():
    assert sg.float32 == np.float32 and sg.float64 is sg.double and sg.long == np.int64
    assert sg.zeros(2, dtype=sg.float64).dtype == sg.float64
    assert sg.get_default_dtype() == sg.float32
    assert sg.arange(10.0).dtype == sg.float32 and sg.arange(3).dtype == sg.int64  # as torch's
    assert sg.finfo(sg.float32).eps == np.finfo(np.float32).eps
    assert sg.is_floating_point(sg.ones(1)) and not sg.tensor([1]).is_floating_point()
    try:
        sg.set_default_dtype(sg.float64)
        assert sg.tensor([1.5]).dtype == sg.float64 and sg.zeros(1).dtype == sg.float64
        assert sg.get_default_dtype() == sg.float64
    finally:
        sg.set_default_dtype(sg.float32)
    assert sg.tensor([1.5]).dtype == sg.float32
    with pytest.raises(TypeError, match="only floating-point types are supported as the default "
                                        "type"):
        sg.set_default_dtype(sg.int64)


def test_new_factories_take_self_dtype():
    x = sg.ones(2, dtype=sg.float64)
    for t in (x.new_zeros(3), x.new_ones((2, 2)), x.new_empty(1), x.new_full((2,), 7),
              x.new_tensor([1, 2])):
        assert t.dtype == sg.float64 and not t.requires_grad
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0]
    assert x.new_zeros(2, dtype=sg.int64, requires_grad=False).dtype == sg.int64
    assert x.new_ones(2, requires_grad=True).requires_grad


def test_python_scalars_of_one_element_tensors():
    assert float(sg.tensor([[2.5]])) == 2.5 and int(sg.tensor([3])) == 3
    assert bool(sg.tensor([1.0])) is True and float(sg.tensor(1.5, requires_grad=True)) == 1.5
    with pytest.raises(RuntimeError, match="only one element tensors can be converted to Python "
                                           "scalars"):  # torch 2.14.1's text
        float(sg.tensor([1.0, 2.0]))


def test_randint_signatures():
    sg.manual_seed(0)
    a = sg.randint(10, (3, 4))
    b = sg.randint(5, 7, size=(100,))
    assert a.dtype == sg.int64 and a.shape == (3, 4) and 0 <= a.min().item() <= a.max().item() < 10
    assert set(b.tolist()) == {5, 6}


def test_scatter_reduce_refuses_the_reductions_it_lacks():
    x = sg.ones(3, requires_grad=True)
    with pytest.raises(NotImplementedError, match="scatter_reduce.reduce='amax'. is not supported"):
        x.scatter_reduce(0, sg.tensor([0, 0]), sg.ones(2), "amax")


def test_where_condition_only_and_non_boolean_condition():
    x = sg.tensor([0.0, 1.5, 0.0, 2.0])
    (i,) = sg.where(x != 0)
    assert i.tolist() == [1, 3] and i.dtype == sg.int64
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor"):
        sg.where(x, x, x)


def test_softmax_without_dim_warns_as_torch():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sg.nn.functional.softmax(sg.ones(2, 3))
    assert "Implicit dimension choice for softmax has been deprecated" in str(w[0].message)


def test_every_namespace_function_is_a_public_name_of_sg():
    import srcgrad.autograd.namespace as namespace

    missing = set(namespace.__all__) - set(dir(sg))
    assert not missing, f"add {sorted(missing)} to srcgrad/__init__.py's torch namespace names"
    assert sg.gather is namespace.gather and sg.float64 is namespace.float64
