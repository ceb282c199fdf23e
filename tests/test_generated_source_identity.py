"""The text the tracer reads back for a function is the text its code was compiled from.

A transform of a transform (grad(grad(f)), vmap(grad(f))) differentiates the generated
code of the inner one, read back from linecache by its code's filename. Fuzz seed 2670430:
an uncacheable module (a custom Function in the program) was named after the function
(`<srcgrad:f-<id>>`), so the gradient's shape-specialised variant, compiled on its second
call, replaced the text of its generic entry under the same name; sg.vmap of the gradient
then traced the variant's lines and returned None for every example. Now an uncached
module is named by its text (srcgrad.codegen.loader.uncached_filename), and a text that is
not the code's definition is a CompileError, never a trace of other lines."""

from __future__ import annotations

import linecache

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import Function
from srcgrad.autograd.function import once_differentiable
from srcgrad.errors import CompileError
from tests.conftest import numeric_grad


class Sigmoid(Function):  # (once_differentiable: the program has no disk-cache key)
    @staticmethod
    def forward(ctx, x):
        y = 1.0 / (1.0 + np.exp(-x))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * (1.0 - y)


def f(x0, x1, b=None):
    if b is None:
        b = 1.0
    y = Sigmoid.apply(x1)
    return np.sum(y[y > 0.2]) / (x0 * x0 + 1.0) * b


X1 = np.array([0.25, 1.1, -2.0])


def test_a_variant_leaves_its_generic_entrys_text_alone():
    g = sg.grad(f, wrt=0)
    entry = g.__srcgrad__.entry()
    before = linecache.getlines(entry.__code__.co_filename)
    g(0.1, X1), g(0.2, X1)  # the second call compiles the variant for these shapes
    assert linecache.getlines(entry.__code__.co_filename) == before


def test_vmap_of_a_gradient_after_its_variant_was_compiled():
    g = sg.grad(f, wrt=0)
    v = sg.vmap(g, in_axes=(0, None))
    np.testing.assert_allclose(v(np.array([0.1, 0.2, 0.3]), X1), [g(r, X1) for r in (0.1, 0.2, 0.3)])
    g(0.1, X1), g(0.2, X1)
    rows = np.array([-0.4, 0.7])
    expected = [numeric_grad(lambda a: f(a, X1), (r,), 0) for r in rows]
    np.testing.assert_allclose(v(rows, X1), expected, rtol=1e-6)


def test_a_text_that_is_not_the_codes_definition_is_refused():
    """A linecache entry replaced by another function's text (as a file edited after its
    import): the tracer refuses to differentiate lines its code was not compiled from."""
    filename = "<srcgrad-test replaced source>"
    ns: dict = {"np": np}
    text = "def h(x):\n    return np.sum(x * x)\n"
    exec(compile(text, filename, "exec"), ns)
    linecache.cache[filename] = (0, None, ["def other(y):\n", "    return None\n"], filename)
    try:
        with pytest.raises(CompileError, match="is not the definition it was compiled from"):
            sg.grad(ns["h"])(np.array([1.0, 2.0]))
    finally:
        linecache.cache.pop(filename, None)
