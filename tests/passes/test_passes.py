"""Before/after tests of the passes on printed IR."""

from __future__ import annotations

import textwrap

import numpy as np

from srcgrad import pipeline
from srcgrad.codegen.names import tidy_temporaries
from srcgrad.frontend.parse import parse_function
from srcgrad.ir.core import Const
from srcgrad.ir.printer import print_graph, print_ops
from srcgrad.ir.verify import verify_graph, verify_ops
from srcgrad.passes.activity import active_vars
from srcgrad.passes.cse import cse
from srcgrad.passes.dce import dce
from srcgrad.passes.simplify import simplify
from srcgrad.passes.vjp import reverse


def _trace(fn):
    graph, namer = pipeline.trace(parse_function(fn))
    verify_graph(graph)
    return graph, namer


def _text(ops):
    return print_ops(ops, indent="", with_loc=False)


def f_chain(x, y):
    z = x * y + np.exp(x)
    return np.sum(z * z)


def test_trace_names_values_after_source_variables():
    graph, _ = _trace(f_chain)
    assert print_graph(graph, with_loc=False) == textwrap.dedent("""\
        graph f_chain(x, y):
          _multiply = multiply(x, y)
          _exp = exp(x)
          z = add(_multiply, _exp)
          _multiply_1 = multiply(z, z)
          _sum = sum(_multiply_1, None, False)
          return (_sum,)""")


def test_activity_follows_only_wrt_to_output_paths():
    graph, _ = _trace(f_chain)
    x, y = graph.inputs
    names = {v.name for v in active_vars(graph.ops, [y], graph.outputs)}
    assert names == {"y", "_multiply", "z", "_multiply_1", "_sum"}  # exp(x) is not active


def test_reverse_then_simplify_cse_dce():
    graph, namer = _trace(f_chain)
    x, y = graph.inputs
    backward, grads = reverse(graph.ops, [y], [(graph.outputs[0], Const(1.0))], namer)
    ops = graph.ops + backward
    verify_ops(ops, graph.inputs)
    before = _text(ops)
    assert "broadcast_to(1.0" in before
    ops, alias = simplify(ops, [grads[y]])
    ops, alias2 = cse(ops)
    g = alias2.get(grads[y], alias.get(grads[y], grads[y]))
    ops = dce(ops, [g])
    verify_ops(ops, graph.inputs, [g])
    tidy_temporaries(ops, ["x", "y"])
    assert _text(ops) == textwrap.dedent("""\
        _multiply = multiply(x, y)
        _exp = exp(x)
        z = add(_multiply, _exp)
        grad_z = add(z, z)
        _shape = shape(_multiply)
        grad_multiply = unbroadcast(grad_z, _shape)
        _multiply_1 = multiply(grad_multiply, x)
        _shape_1 = shape(y)
        grad_y = unbroadcast(_multiply_1, _shape_1)""")
    # The loss itself (z * z and its sum) is dead: grad does not return it.


def test_simplify_removes_unbroadcast_within_a_shape_class():
    def f(x):
        return np.sum(np.exp(x) * 2.0)

    graph, namer = _trace(f)
    (x,) = graph.inputs
    backward, grads = reverse(graph.ops, [x], [(graph.outputs[0], Const(1.0))], namer)
    ops, alias = simplify(graph.ops + backward, [grads[x]])
    text = _text(dce(cse(ops)[0], [alias.get(grads[x], grads[x])]))
    assert "unbroadcast" not in text and "broadcast_to" not in text
