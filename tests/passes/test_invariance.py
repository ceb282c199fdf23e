"""Note [Shift invariance of softmax]: the max's VJP is skipped exactly when it is zero."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad import pipeline
from srcgrad.frontend.parse import parse_function
from srcgrad.passes.invariance import zero_edges
from tests.conftest import assert_close, numeric_grad
from tests.corpus import programs as P

rng = np.random.default_rng(11)


def _zero_edge_count(fn):
    graph, _ = pipeline.trace(parse_function(fn))
    return len(zero_edges(graph.ops))


@pytest.mark.parametrize("fn,expected", [
    (P.log_softmax_loss, 1),  # log-softmax: the max gets no derivative
    (P.softmax_probs, 1),  # softmax: likewise
    (P.shifted_used_elsewhere, 0),  # `shifted ** 2` is not shift-invariant
    (P.logsumexp, 0),  # m is added back: its derivative does not vanish
])
def test_zero_edges_are_found_only_where_the_function_is_invariant(fn, expected):
    assert _zero_edge_count(fn) == expected


@pytest.mark.parametrize("fn,args", [
    (P.log_softmax_loss, lambda: [rng.standard_normal((4, 5)), np.eye(5)[[0, 2, 1, 4]]]),
    (P.softmax_probs, lambda: [rng.standard_normal((3, 6)), rng.standard_normal((3, 6))]),
    (P.shifted_used_elsewhere, lambda: [rng.standard_normal((4, 5))]),
    (P.logsumexp, lambda: [rng.standard_normal((4, 5))]),
])
def test_gradients_stay_right(fn, args):
    values = args()
    assert_close(sg.grad(fn)(*values), numeric_grad(fn, values, 0), rtol=1e-6, atol=1e-8)


def test_log_softmax_backward_has_no_max_derivative():
    g = sg.grad(P.log_softmax_loss)
    g(rng.standard_normal((4, 5)), np.eye(5)[[0, 2, 1, 4]])
    text = sg.source(g)
    assert "==" not in text  # no tie mask of the max
