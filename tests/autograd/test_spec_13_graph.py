"""spec/torch_semantics.md §13: graph inspection — every "(c) Test cases" entry, the node
names the section lists for ops srcgrad spells with NumPy, and the section's probes."""

from __future__ import annotations

import re

import numpy as np
import pytest

import srcgrad as sg
from tests.autograd.spec_util import check, const, exact, leaf, node_names

ACC = "torch::autograd::AccumulateGrad"


# ---------------------------------------------------------------- (c) test cases

def test_case_1_next_functions():  # test_next_functions
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    a = x + y
    nf = a.grad_fn.next_functions
    assert len(nf) == 2
    for node, nr in nf:
        assert node.name() == ACC and type(node).__name__ == "AccumulateGrad" and nr == 0
    assert nf[0][0].variable is x and nf[1][0].variable is y
    assert nf[0][0].next_functions == ()
    b = a + 5
    assert b.grad_fn.next_functions == ((a.grad_fn, 0), (None, 0))
    assert b.grad_fn.next_functions[0][0] is a.grad_fn


def test_case_2_walk():
    x = leaf(np.ones((2, 3)))
    names, node = [], x.t().sum().grad_fn
    while node is not None:
        names.append(node.name())
        node = node.next_functions[0][0] if node.next_functions else None
    assert names == ["SumBackward0", "TBackward0", ACC]


def test_case_3_missing_edges():
    x, c = leaf([1.0, 2.0]), const([3.0, 4.0])
    assert node_names((x * c).grad_fn) == [ACC, None]
    assert node_names((c * x).grad_fn) == [None, ACC]


def test_case_4_metadata():
    x = leaf([1.0])
    y = x * 2
    md = y.grad_fn.metadata
    md["k"] = 1
    assert y.grad_fn.metadata == {"k": 1}
    assert y.grad_fn.metadata is md
    assert (x * 3).grad_fn.metadata == {}


def test_case_5_calling_a_node():  # test_grad_fn_badcalls
    x = leaf([1.0])
    y = x ** 2
    with pytest.raises(TypeError, match=exact("expected 1 arguments, got 0 instead")):
        y.grad_fn()
    out = y.grad_fn(sg.ones(1))
    out = out[0] if isinstance(out, tuple) else out
    check(out, [2.0])


# ---------------------------------------------------------------- names

P = np.array([[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]])

NAMES = [
    ("mul", lambda x: x * x, "MulBackward0"),
    ("add", lambda x: x + x, "AddBackward0"),
    ("sub", lambda x: x - 1.0, "SubBackward0"),
    ("div", lambda x: x / 2.0, "DivBackward0"),
    ("pow", lambda x: x ** 2, "PowBackward0"),
    ("sum", lambda x: x.sum(), "SumBackward0"),
    ("np.sum", lambda x: np.sum(x), "SumBackward0"),
    ("mean", lambda x: x.mean(), "MeanBackward0"),
    ("exp", lambda x: x.exp(), "ExpBackward0"),
    ("np.exp", lambda x: np.exp(x), "ExpBackward0"),
    ("np.sin", lambda x: np.sin(x), "SinBackward0"),
    ("reshape", lambda x: x.reshape(3, 2), "ViewBackward0"),
    ("select", lambda x: x[0], "SelectBackward0"),
    ("t", lambda x: x.t(), "TBackward0"),
    ("clone", lambda x: x.clone(), "CloneBackward0"),
    ("dot", lambda x: x[0] @ x[1], "DotBackward0"),
    ("broadcast_to", lambda x: np.broadcast_to(x, (4, 2, 3)), "ExpandBackward0"),
    ("expand_dims", lambda x: np.expand_dims(x, 0), "UnsqueezeBackward0"),
    ("concatenate", lambda x: np.concatenate([x, x]), "CatBackward0"),
    ("stack", lambda x: np.stack([x, x]), "StackBackward0"),
    ("neg", lambda x: -x, "NegBackward0"),
    ("abs", lambda x: np.abs(x), "AbsBackward0"),
    ("log", lambda x: np.log(x), "LogBackward0"),
    ("tanh", lambda x: np.tanh(x), "TanhBackward0"),
    ("max", lambda x: x.max(), "MaxBackward1"),
    ("sqrt", lambda x: np.sqrt(x), "SqrtBackward0"),
]


@pytest.mark.parametrize("make,name", [(m, n) for _, m, n in NAMES], ids=[i for i, _, _ in NAMES])
def test_node_names(make, name):
    x = leaf(P)
    out = make(x)
    assert isinstance(out, sg.Tensor)
    assert out.grad_fn.name() == name
    assert type(out.grad_fn).__name__ == name
    assert re.fullmatch(f"<{name} object at 0x[0-9a-fA-F]+>", repr(out.grad_fn))


def test_to_copy_name():
    x = leaf([1.0, 2.0], dtype=np.float32)
    y = x.astype(np.float64)
    assert y.dtype == np.float64 and y.grad_fn.name() == "ToCopyBackward0"


# ---------------------------------------------------------------- (a) probes

def test_nodes_are_graph_nodes():  # test_autograd_node_isinstance
    x = leaf([1.0])
    y = x * 2
    assert isinstance(y.grad_fn, sg.autograd.graph.Node)
    assert isinstance(y.grad_fn.next_functions[0][0], sg.autograd.graph.Node)


def test_accumulate_grad_node_is_shared_while_alive():  # probe 13.AccumulateGrad_node_shared_while_alive
    x = leaf([1.0])
    a, b = x * 2, x * 3
    assert a.grad_fn.next_functions[0][0] is b.grad_fn.next_functions[0][0]


def test_sequence_numbers_increase():
    x = leaf([1.0])
    a = x * 2
    b = a * 3
    assert b.grad_fn._sequence_nr() > a.grad_fn._sequence_nr()


def test_multi_output_producer_is_referenced_by_output_index():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    p, q = np.split(x, 2)
    r = p * q
    (n0, i0), (n1, i1) = r.grad_fn.next_functions
    assert n0 is n1 and (i0, i1) == (0, 1)
    r.sum().backward()
    check(x.grad, [3.0, 4.0, 1.0, 2.0])


def test_grad_fn_of_constant_and_leaf_is_none():
    assert const([1.0]).grad_fn is None
    assert leaf([1.0]).grad_fn is None
    assert (const([1.0]) * 2).grad_fn is None


def test_view_of_a_leaf():
    x = leaf([1.0, 2.0, 3.0, 4.0])
    v = x.view(2, 2)
    assert v._is_view() and v._base is x
    assert v.grad_fn.name() == "ViewBackward0" and v.is_leaf is False
