"""What the 10,000-program kinks-and-poles campaign against torch found
(`benchmarks/fuzz_eager.py --torch --seed 2600000 --programs 10000`: 377 wrong in six
classes), each now torch's value (observed in torch 2.14.1; runs without torch, the values
are written here). Each case failed before the eager rows named beside it
(srcgrad/rules/torch_rows.py, helpers.torch_pow / trunc_divide / torch_prod_bar /
torch_cumprod_bar)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import srcgrad as sg
from tests.eager_fuzz import kinks

INF, NAN = math.inf, math.nan

# (expression, inputs, torch's (first-order grads, second-order grads), campaign seed or
# None for a neighbour of a finding), observed in torch 2.14.1
FINDINGS = [
    # 1. torch runs pow(x, 0.5) as sqrt and pow(x, -0.5) as rsqrt, its derivative
    # c * x.pow(c - 1) likewise: rsqrt(-0.0) == -inf and rsqrt(-inf) == nan, where IEEE
    # pow (NumPy's) gives +inf and 0.0 (torch_power_scalar, helpers.torch_pow)
    ("x ** 0.5", [[-0.0]], ([[-INF]], [[-INF]]), 2600616),
    ("x ** 0.5", [[-INF]], ([[NAN]], [[0.0]]), None),
    ("x ** -0.5", [[-0.0, -INF]], ([[-INF, 0.0]], [[INF, 0.0]]), None),
    ("x ** 1.5", [[-0.0]], ([[0.0]], [[-INF]]), 2600184),
    ("x ** 1.5", [[-1.0, -INF]], ([[NAN, NAN]], [[NAN, NAN]]), 2600120),
    # rsqrt's own derivative is -0.5 * grad * result ** 3 (torch_rsqrt): +inf at -0.0
    ("x.rsqrt()", [[-0.0]], ([[INF]], [[-INF]]), 2600813),
    ("x.rsqrt()", [[-INF]], ([[NAN]], [[NAN]]), None),
    # 2. fmod's d/dy is -grad * div(x, y, rounding_mode="trunc"), whose derivative is zeros
    # (trunc_divide): 0 at second order, where trunc(x / y) differentiated x / y (nan)
    ("x.fmod(y)", [[-INF], [-INF]], ([[1.0], [NAN]], [[0.0], [0.0]]), 2600402),
    ("x.fmod(y)", [[1.0, -1.0], [0.0, INF]], ([[1.0, 1.0], [-INF, 0.0]], [[0.0, 0.0], [0.0, 0.0]]),
     None),
    # 3. one element with a zero: torch's prod_backward / cumprod_backward pass grad itself,
    # no graph (a None second derivative, where srcgrad gave 0)
    ("x.prod()", [[0.0]], ([[1.0]], None), None),
    ("x.cumprod(0)", [[2.0]], ([[1.0]], None), None),
    # 4. no zero: torch divides the result by x (nan at an inf entry); with one, products
    ("x.prod()", [[1.0, -INF]], ([[-INF, NAN]], [[NAN, NAN]]), 2601028),
    ("x.prod()", [[0.0, INF]], ([[INF, 0.0]], [[1.0, NAN]]), None),
    ("x.cumprod(0)", [[INF, 2.0]], ([[NAN, INF]], [[NAN, NAN]]), None),
    ("x.cumprod(0)", [[0.0, INF]], ([[INF, 0.0]], [[1.0, 1.0]]), None),
    ("x.cumprod(0)", [[2.0, INF, 0.0]], ([[NAN, 2.0, INF]], [[INF, NAN, INF]]), None),
]


@pytest.mark.parametrize("expr, inputs, torch_value, seed", FINDINGS,
                         ids=[f"{e}@{i}" for e, i, _, _ in FINDINGS])
def test_kink_matches_torch(expr, inputs, torch_value, seed):
    ours = kinks.evaluate(sg, expr, inputs)
    assert kinks.same(ours, torch_value), (seed, ours, torch_value)


def test_pow_half_values_are_sqrt_and_rsqrt():
    """The value too, not only the derivative: x ** 0.5 is sqrt(x), x ** -0.5 and rsqrt
    1 / sqrt(x) (observed in torch 2.14.1); x ** 1.5 stays IEEE pow."""
    x = sg.tensor([-0.0, -INF, -1.0, 4.0])
    with np.errstate(all="ignore"):
        half, minus_half, rsqrt, three_halves = x ** 0.5, x ** -0.5, x.rsqrt(), x ** 1.5
    assert kinks.same(half.tolist(), [-0.0, NAN, NAN, 2.0])
    assert math.copysign(1, half.tolist()[0]) == -1  # sqrt(-0.0) is -0.0, pow's is +0.0
    assert kinks.same(minus_half.tolist(), [-INF, NAN, NAN, 0.5])
    assert kinks.same(rsqrt.tolist(), [-INF, NAN, NAN, 0.5])
    assert kinks.same(three_halves.tolist(), [0.0, INF, NAN, 8.0])


def _first_order(expr, values):
    x = sg.tensor(values, requires_grad=True)
    with np.errstate(all="ignore"):
        (g,) = sg.autograd.grad(eval(expr, {"x": x}).sum(), [x])
    return g.tolist()


@pytest.mark.parametrize("expr, values, torch_grad", [
    # without create_graph torch's prod_backward gives zeros where x has two zeros or more
    # (an inf among them too), and its cumprod_backward its O(n) masks: 0 past the first
    # zero, a division before it (observed in torch 2.14.1)
    ("x.prod()", [0.0, 0.0, INF], [0.0, 0.0, 0.0]),
    ("x.prod(0)", [0.0, 0.0, INF], [NAN, NAN, 0.0]),
    ("x.cumprod(0)", [INF, 0.0, INF], [NAN, INF, 0.0]),
    ("x.cumprod(0)", [2.0, 0.0, INF, 0.0], [1.0, NAN, 0.0, 0.0]),
])
def test_prod_without_create_graph_is_torchs_no_grad_mode_branch(expr, values, torch_grad):
    assert kinks.same(_first_order(expr, values), torch_grad)
