"""The fusion pass on IR (Note [Fused elementwise chains] in srcgrad.pipeline.fusion):
which ops become one loop, what the loop reads, writes and sums. IR in, IR out; the
numbers the loops compute are tests/backends/test_numba_fusion.py's."""

from __future__ import annotations

import numpy as np

from srcgrad.ir.printer import op_text
from srcgrad.passes.shapes import probe
from srcgrad.pipeline import fusion
from srcgrad.pipeline.graphs import trace
from srcgrad.pipeline.modules import parse_function


def _fused(f, args) -> str:
    graph, _ = trace(parse_function(f), False, args)
    found = probe(graph.ops, graph.inputs, args)
    return "\n".join(_text(fusion.fuse(graph.ops, graph.outputs, found, [v.name for v in graph.inputs])))


def _text(ops, indent=""):
    lines = []
    for op in ops:
        lines.append(indent + op_text(op, False))
        for block in op.blocks:
            lines.append(f"{indent}  for {', '.join(p.name for p in block.params)}:")
            lines += _text(block.ops, indent + "    ")
            kinds = op.attrs.get("kinds", "")  # (a loop's block has none)
            lines.append(f"{indent}    -> {', '.join(map(str, block.results))} {kinds}".rstrip())
    return lines


def chains(x, y, c):
    a = np.tanh(x) * c  # c: a Python float, a number in the loop
    m = np.sum(a * a)  # a sum at the chain's end: accumulated in the loop
    b = np.exp(a) / m  # reads the sum: after the loop, alone (not a chain)
    z = b[::2]  # not elementwise, reads b
    w = np.cos(z) + z  # another shape: a chain of its own
    return np.sum(w) + np.sum(b * y)  # y broadcasts to b's shape: nested loops, y[i_3]


def test_chains_end_at_a_reader_of_their_sum_and_at_another_shape():
    got = _fused(chains, (np.ones((4, 6)), np.ones(6), 2.0))
    assert got == """\
m, _exp = fused(x)
  for i, x_i:
    _tanh = tanh(x_i)
    a = multiply(_tanh, c)
    _multiply_1 = multiply(a, a)
    exp_i = exp(a)
    -> _multiply_1, exp_i ('sum', 'store')
b = divide(_exp, m)
z = getitem(b, slice(None, None, 2))
_sum_1 = fused(z)
  for i_1, z_i:
    _cos = cos(z_i)
    w = add(_cos, z_i)
    -> w ('sum',)
_sum_2 = fused(b, y)
  for i_2, i_3, b_i, y_i:
    _multiply_2 = multiply(b_i, y_i)
    -> _multiply_2 ('sum',)
_add_1 = add(_sum_1, _sum_2)""", got


def forces(x, w):
    for _ in range(3):  # a loop body fuses as a block of its own
        d = x[:, None, :] - x[None, :, :]  # two broadcast reads
        r2 = np.sum(d * d, axis=-1) + w  # a sum over the last axis ends the chain
        x = x + np.sum(d / r2[:, :, None], axis=1, keepdims=True)[:, 0, :]
    return np.sum(x * x)


def test_loop_bodies_broadcasts_and_sums_over_some_axes_fuse():
    got = _fused(forces, (np.ones((4, 2)), 0.5))
    assert got == """\
x_3 = for_range(0, 3, 1, (x))
  for __1, x_1:
    _getitem = getitem(x_1, (slice(None, None, None), None, slice(None, None, None)))
    _getitem_1 = getitem(x_1, (None, slice(None, None, None), slice(None, None, None)))
    d, _sum = fused(_getitem, _getitem_1)
      for i, i_1, i_2, getitem_i, getitem_1_i:
        d_i = subtract(getitem_i, getitem_1_i)
        _multiply = multiply(d_i, d_i)
        -> d_i, _multiply ('store', ((2,), False))
    r2 = add(_sum, w)
    _getitem_2 = getitem(r2, (slice(None, None, None), slice(None, None, None), None))
    _sum_1 = fused(d, _getitem_2)
      for i_3, i_4, i_5, d_i_1, getitem_2_i:
        _divide = divide(d_i_1, getitem_2_i)
        -> _divide (((1,), True),)
    _getitem_3 = getitem(_sum_1, (slice(None, None, None), 0, slice(None, None, None)))
    x_2 = add(x_1, _getitem_3)
    -> x_2
_sum_2 = fused(x_3)
  for i_6, x_3_i:
    _multiply_1 = multiply(x_3_i, x_3_i)
    -> _multiply_1 ('sum',)""", got


def mixed(x, k, flags):
    u = np.sin(x) * 2.0
    v = np.cos(x) * k  # k an int array: read as numbers, into the loop
    s = np.sin(x).astype(np.float32) * 2.0  # a float32 result: not fused
    return np.sum(u + v) + np.sum(s * flags)


def test_integer_arrays_are_read_by_the_loop_and_other_results_stay_outside():
    """The chain ends at the float32 cast, which reads its `sin(x)` (the chain is placed
    at its last op: a reader outside it comes after); `u + v` then starts another."""
    got = _fused(mixed, (np.ones(5), np.arange(5), np.ones(5, bool)))
    assert got == """\
u, v, _sin_1 = fused(x, k)
  for i, x_i, k_i:
    _sin = sin(x_i)
    u_i = multiply(_sin, 2.0)
    _cos = cos(x_i)
    v_i = multiply(_cos, k_i)
    sin_1_i = sin(x_i)
    -> u_i, v_i, sin_1_i ('store', 'store', 'store')
_astype = astype(_sin_1, <const type>)
s = multiply(_astype, 2.0)
_sum = fused(u, v)
  for i_1, u_i_1, v_i_1:
    _add = add(u_i_1, v_i_1)
    -> _add ('sum',)
_multiply_3 = multiply(s, flags)
_sum_1 = sum(_multiply_3, None, False)
_add_1 = add(_sum, _sum_1)""", got


def test_only_the_function_rendered_for_numba_fuses():
    """A transform that function calls, compiled for NumPy meanwhile, is not fused (its
    loop would be Python's)."""
    numba_fs, other = parse_function(chains), parse_function(mixed)
    with fusion.fusing(numba_fs):
        assert fusion.enabled(numba_fs) and not fusion.enabled(other)
    assert not fusion.enabled(numba_fs)
