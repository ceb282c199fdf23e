"""torch's non-tensor saved attributes on grad_fn (issue 30): `_saved_exponent`,
`_saved_dim`, `_saved_keepdim`, `_saved_alpha`, ... as torch shows them, each value
observed in torch 2.14.1 (Note [Torch's non-tensor saved attributes] in
srcgrad/autograd/saved.py). Before the note's table these raised AttributeError (or showed
srcgrad's own names: `_saved_y` for the exponent, a float for MulBackward0's `other`)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg

U64 = 1 << 64  # torch shows a negative dim as its unsigned 64-bit bits: -1 -> 2**64 - 1


def _x():
    return sg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=sg.float64, requires_grad=True)


# (expression over x, y (no grad) and x2 (a second leaf), node name, attribute, torch's
# value), observed in torch 2.14.1
CASES = [
    ("x ** 3", "PowBackward0", "exponent", 3),
    ("x ** 2.5", "PowBackward0", "exponent", 2.5),
    ("x.pow(-0.5)", "PowBackward0", "exponent", -0.5),
    ("2.0 ** x", "PowBackward2", "self", 2.0),
    ("x.pow(3)", "PowBackward0", "exponent", 3),
    ("x.sum(dim=1)", "SumBackward1", "dim", (1,)),
    ("x.sum(dim=1)", "SumBackward1", "keepdim", False),
    ("x.sum(dim=(0, 1), keepdim=True)", "SumBackward1", "dim", (0, 1)),
    ("x.sum(dim=(0, 1), keepdim=True)", "SumBackward1", "keepdim", True),
    ("x.sum(-1, keepdim=True)", "SumBackward1", "dim", (U64 - 1,)),
    ("x.sum()", "SumBackward0", "self_sym_sizes", (2, 2)),
    ("x.mean()", "MeanBackward0", "self_sym_numel", 4),
    ("x.mean(1)", "MeanBackward1", "dim", (1,)),
    ("x.mean(1)", "MeanBackward1", "keepdim", False),
    ("x.mean(1)", "MeanBackward1", "self_sym_numel", 4),
    ("x.mean(dim=0, keepdim=True)", "MeanBackward1", "keepdim", True),
    ("x.mean(-1)", "MeanBackward1", "dim", (U64 - 1,)),
    ("x.amax(1)", "AmaxBackward0", "dim", (1,)),
    ("x.amax()", "AmaxBackward0", "dim", ()),
    ("x.amin(0)", "AminBackward0", "keepdim", False),
    ("x.prod(1)", "ProdBackward1", "dim", 1),
    ("x.prod(1)", "ProdBackward1", "keepdim", False),
    ("x.prod(-1)", "ProdBackward1", "dim", U64 - 1),
    ("x.cumsum(1)", "CumsumBackward0", "dim", 1),
    ("x.cumsum(-1)", "CumsumBackward0", "dim", U64 - 1),
    ("x.cumprod(0)", "CumprodBackward0", "dim", 0),
    ("x.softmax(1)", "SoftmaxBackward0", "dim", 1),
    ("x.softmax(-1)", "SoftmaxBackward0", "dim", U64 - 1),
    ("x.log_softmax(1)", "LogSoftmaxBackward0", "dim", 1),
    ("x.transpose(0, 1)", "TransposeBackward0", "dim0", 0),
    ("x.transpose(-1, -2)", "TransposeBackward0", "dim1", U64 - 2),
    ("x.permute(1, 0)", "PermuteBackward0", "dims", (1, 0)),
    ("x.permute(-1, 0)", "PermuteBackward0", "dims", (U64 - 1, 0)),
    ("x.unsqueeze(0)", "UnsqueezeBackward0", "dim", 0),
    ("x.unsqueeze(-1)", "UnsqueezeBackward0", "dim", U64 - 1),
    ("x.flip(0)", "FlipBackward0", "dims", (0,)),
    ("sg.cat([x, x2], 1)", "CatBackward0", "dim", 1),
    ("sg.cat([x, x2], -1)", "CatBackward0", "dim", U64 - 1),
    ("sg.stack([x, x2])", "StackBackward0", "dim", 0),
    ("x + 2.0", "AddBackward0", "alpha", 1),
    ("x - x2", "SubBackward0", "alpha", 1),
    ("x.clamp(0.5, 2.5)", "ClampBackward1", "min", 0.5),
    ("x.clamp(0.5, 2.5)", "ClampBackward1", "max", 2.5),
    ("x.clamp(min=0.5)", "ClampBackward1", "max", None),
    ("x.clamp(max=0.5)", "ClampBackward1", "min", None),
    ("x.clamp(max=0.5)", "ClampBackward1", "max", 0.5),
    ("x.norm(dim=1)", "LinalgVectorNormBackward0", "ord", 2),
    ("x.norm(dim=1)", "LinalgVectorNormBackward0", "dim", (1,)),
    ("x.norm(dim=1)", "LinalgVectorNormBackward0", "keepdim", False),
    ("x.norm()", "LinalgVectorNormBackward0", "dim", None),
    ("x.norm(p=1)", "LinalgVectorNormBackward0", "ord", 1),
    ("x.max(1).values", "MaxBackward0", "dim", 1),
    ("x.max(-1).values", "MaxBackward0", "dim", U64 - 1),
    ("x.max(1, keepdim=True).values", "MaxBackward0", "keepdim", True),
    ("x.min(0).values", "MinBackward0", "keepdim", False),
    # correction: None only for a bare var()/std() (observed in torch 2.14.1)
    ("x.var()", "VarBackward0", "correction", None),
    ("x.var()", "VarBackward0", "dim", None),
    ("x.var(unbiased=True)", "VarBackward0", "correction", 1),
    ("x.var(0)", "VarBackward0", "correction", 1),
    ("x.var(0)", "VarBackward0", "dim", (0,)),
    ("x.var(0, unbiased=False)", "VarBackward0", "correction", 0),
    ("x.var(0, correction=2)", "VarBackward0", "correction", 2),
    ("x.var(dim=-1, keepdim=True)", "VarBackward0", "dim", (U64 - 1,)),
    ("x.var(dim=-1, keepdim=True)", "VarBackward0", "keepdim", True),
    ("x.std()", "StdBackward0", "correction", None),
    ("x.std(1)", "StdBackward0", "correction", 1),
    ("x.std(correction=0)", "StdBackward0", "correction", 0),
    # a number operand of mul/div: torch's wrapped 0-d `other` (x * c even for c * x), and
    # no `self`; of two Tensors, the one no gradient reads is None
    ("x * 2.0", "MulBackward0", "self", None),
    ("2.0 * x", "MulBackward0", "self", None),
    ("x / 2.0", "DivBackward0", "self", None),
    ("x * y", "MulBackward0", "self", None),
    ("y * x", "MulBackward0", "other", None),
]


def _node(expr):
    x, x2 = _x(), _x()
    y = sg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=sg.float64)
    return eval(expr, {"x": x, "x2": x2, "y": y, "sg": sg}).grad_fn


@pytest.mark.parametrize("expr, node, attr, torch_value", CASES,
                         ids=[f"{e}.{a}" for e, _, a, _ in CASES])
def test_saved_attribute_is_torchs(expr, node, attr, torch_value):
    fn = _node(expr)
    assert type(fn).__name__ == node
    value = getattr(fn, f"_saved_{attr}")
    assert value == torch_value and type(value) is type(torch_value), (value, torch_value)
    assert f"_saved_{attr}" in dir(fn)


@pytest.mark.parametrize("expr, value, dtype", [
    ("x * 2.0", 2.0, np.float64), ("x * 2", 2, np.int64), ("2.0 * x", 2.0, np.float64),
    ("x / 2.0", 2.0, np.float64)])
def test_a_number_other_is_a_wrapped_0d_tensor(expr, value, dtype):
    """torch: `(x * 2.0).grad_fn._saved_other` is tensor(2., dtype=torch.float64), not
    requiring grad; `x * 2` gives an int64 tensor (observed in torch 2.14.1)."""
    other = _node(expr)._saved_other
    assert isinstance(other, sg.Tensor) and other.shape == () and not other.requires_grad
    assert other.item() == value and other.numpy().dtype == dtype


def test_tensor_exponent_and_tensor_operands_stay_the_saved_tensors():
    """torch 2.14.1: x ** y is PowBackward1 (pow(Tensor, Tensor)), 2.0 ** x PowBackward2
    (pow(Scalar, Tensor)), each `_saved_exponent` the exponent Tensor (srcgrad named all
    three PowBackward0)."""
    x, y = _x(), _x()
    fn = (x ** y).grad_fn
    assert type(fn).__name__ == "PowBackward1" and type(x.pow(y).grad_fn).__name__ == \
        "PowBackward1"
    assert fn._saved_exponent is y and fn._saved_self is x  # torch: the saved Tensors
    assert fn._saved_result.grad_fn is fn
    fn = (2.0 ** x).grad_fn
    assert type(fn).__name__ == "PowBackward2" and fn._saved_exponent is x
    fn = (x * y).grad_fn
    assert fn._saved_self is x and fn._saved_other is y


def test_attributes_of_another_node_are_not_this_nodes():
    fn = _node("x.sum()")
    assert not hasattr(fn, "_saved_dim") and "_saved_dim" not in dir(fn)
    fn = _node("x.exp()")
    assert not hasattr(fn, "_saved_exponent")


def test_max_by_dim_saves_torchs_indices():
    """torch 2.14.1: `x.max(1).values.grad_fn._saved_indices` is the int64 indices along
    dim 1 ([1, 1] here); srcgrad showed the flat positions of its `take` ([1, 3], an array)."""
    x = _x()
    out = x.max(1)
    saved = out.values.grad_fn._saved_indices
    assert isinstance(saved, sg.Tensor) and saved.tolist() == [1, 1] == out.indices.tolist()
    assert saved.numpy().dtype == np.int64


# After a backward (observed in torch 2.14.1): a Scalar argument stays, a saved tensor is
# freed (SECOND_TIME), and an operand torch does not save stays None.
AFTER_BACKWARD = [
    ("x ** 2", "exponent", 2),
    ("x ** 2.5", "exponent", 2.5),
    ("x ** 0", "exponent", 0),
    ("x ** 0.0", "exponent", 0.0),
    ("2.0 ** x", "self", 2.0),
    ("x.clamp(min=0.5)", "min", 0.5),
    ("x.clamp(min=0.5)", "max", None),
    ("x.clamp(0.5, 3.0)", "max", 3.0),
    ("x * 2.0", "self", None),
    ("2.0 * x", "self", None),
    ("x / 2.0", "self", None),
]


@pytest.mark.parametrize("expr, attr, value", AFTER_BACKWARD,
                         ids=[f"{e}.{a}" for e, a, _ in AFTER_BACKWARD])
def test_number_arguments_outlive_the_backward(expr, attr, value):
    """Before: every `_saved_<name>` of a released node raised torch's "backward through the
    graph a second time" error, the exponent of `x ** 2` included."""
    x = _x()
    out = eval(expr, {"sg": sg, "x": x})
    fn = out.grad_fn
    out.sum().backward()
    got = getattr(fn, "_saved_" + attr)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("expr, attr", [("x ** 2", "self"), ("x ** 0", "self"),
                                        ("2.0 ** x", "result"), ("x * 2.0", "other"),
                                        ("x.clamp(min=0.5)", "self")])
def test_saved_tensors_are_freed_by_the_backward(expr, attr):
    x = _x()
    out = eval(expr, {"sg": sg, "x": x})
    fn = out.grad_fn
    out.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        getattr(fn, "_saved_" + attr)


def test_x_to_the_zero_saves_self():
    """torch 2.14.1: `(x ** 0).grad_fn` is PowBackward0 with `_saved_self is x` and
    `_saved_exponent == 0`; srcgrad's node saved nothing (no such attributes)."""
    x = _x()
    fn = (x ** 0).grad_fn
    assert type(fn).__name__ == "PowBackward0" and fn._saved_self is x
    assert fn._saved_exponent == 0 and type(fn._saved_exponent) is int
    g, = sg.autograd.grad((x ** 0).sum(), x, create_graph=True)
    assert g.tolist() == [[0.0, 0.0], [0.0, 0.0]] and not g.requires_grad  # torch: no graph


def test_a_saved_number_operand_is_freed_too():
    """torch saves the number of `x * 2.0` as a wrapped tensor, which the backward frees:
    a second backward through the node raises (srcgrad ran it again); `x + 1` saves
    nothing and runs again (observed in torch 2.14.1)."""
    x = _x()
    y = x * 2.0
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()
    y = x + 1
    y.sum().backward()
    y.sum().backward()
    assert x.grad.tolist() == [[4.0, 4.0], [4.0, 4.0]]


@pytest.mark.parametrize("func", ["zeros_like", "ones_like", "empty_like"])
def test_like_constructors_are_not_in_the_graph(func):
    """torch 2.14.1: `torch.zeros_like(x)` of an x that requires grad does not require grad;
    srcgrad's np.zeros_like(t) recorded a ZerosLikeBackward0 node."""
    out = getattr(np, func)(_x())
    assert isinstance(out, sg.Tensor) and not out.requires_grad and out.grad_fn is None
