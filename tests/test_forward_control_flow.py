"""Forward mode through if/for/while (srcgrad/passes/jvp_control.py)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close
from tests.corpus import control as C

rng = np.random.default_rng(9)

CASES = [
    ("branch", C.branch, lambda: [rng.standard_normal(4)]),
    ("early-return", C.early_return, lambda: [np.abs(rng.standard_normal(4))]),
    ("for-range", C.loop, lambda: [rng.standard_normal(3), rng.standard_normal((3, 3)) * 0.5]),
    ("running-logsumexp", C.running_logsumexp, lambda: [rng.standard_normal(6)]),
    ("while", C.while_loop, lambda: [np.abs(rng.standard_normal(3)) + 0.5]),
    ("break", C.with_break, lambda: [np.abs(rng.standard_normal(6)) * 0.3]),
    ("rnn", C.rnn, lambda: [rng.standard_normal((3, 4)) * 0.3, rng.standard_normal((4, 4)) * 0.3,
                            rng.standard_normal(4), rng.standard_normal((5, 2, 3)),
                            rng.standard_normal((2, 4))]),
]


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_jvp_matches_finite_differences(name, fn, make):
    args = make()
    directions = [rng.standard_normal(np.shape(a)) for a in args]
    out, tangent = sg.jvp(fn, tuple(args), tuple(directions))
    eps = 1e-6
    plus = fn(*[a + eps * d for a, d in zip(args, directions)])
    minus = fn(*[a - eps * d for a, d in zip(args, directions)])
    assert_close(out, fn(*args))
    assert_close(tangent, (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_hessian_through_a_branch():
    x = rng.standard_normal(4)
    H = sg.hessian(C.branch)(x)
    eps = 1e-5
    g = sg.grad(C.branch)
    fd = np.stack([(g(x + eps * e) - g(x - eps * e)) / (2 * eps) for e in np.eye(4)], axis=1)
    assert_close(H, fd, rtol=1e-5, atol=1e-6)


def test_second_derivative_through_a_loop():
    # issue 15: forward over reverse through the loop's tape (tests/test_second_order_loops.py);
    # the loop is affine in x, so its Hessian is exactly zero
    np.testing.assert_array_equal(sg.hessian(C.long_loop)(np.ones(2), 3), np.zeros((2, 2)))
