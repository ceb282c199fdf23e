"""What the 10,000-program kinks-and-poles campaign against torch found
(`benchmarks/fuzz_eager.py --torch --seed 2600000 --programs 10000`: 377 wrong in 8
classes) and is not fixed yet: each a strict xfail holding torch's observed value
(observed in torch 2.14.1), so a fix turns it into a failure to remove the mark.
Runs without torch (the values are written here)."""

from __future__ import annotations

import math

import pytest

import srcgrad as sg
from tests.eager_fuzz import kinks

INF, NAN = math.inf, math.nan

# (expression, inputs, torch's (first-order grads, second-order grads), campaign seed)
FINDINGS = [
    # torch runs pow(x, 0.5) as sqrt and pow(x, -0.5) as rsqrt: rsqrt(-0.0) == -inf and
    # rsqrt(-inf) == nan, where IEEE pow (NumPy's, srcgrad's row) gives +inf and 0.0
    ("x ** 0.5", [[-0.0]], ([[-INF]], [[-INF]]), 2600616),
    ("x.rsqrt()", [[-0.0]], ([[INF]], [[-INF]]), 2600813),
    ("x ** 1.5", [[-0.0]], ([[0.0]], [[-INF]]), 2600184),
    ("x ** 1.5", [[-1.0, -INF]], ([[NAN, NAN]], [[NAN, NAN]]), 2600120),
    # torch's fmod double backward w.r.t. y is 0 at (-inf, -inf); srcgrad's is nan
    ("x.fmod(y)", [[-INF], [-INF]], ([[1.0], [NAN]], [[0.0], [0.0]]), 2600402),
    # torch's prod backward divides the result by x where no entry is 0: nan at an inf
    ("x.prod()", [[1.0, -INF]], ([[-INF, NAN]], [[NAN, NAN]]), 2601028),
]


@pytest.mark.xfail(strict=True, reason="sg.Tensor differs from torch at this kink or pole "
                                       "(issue 28: campaign 2600000, not fixed yet)")
@pytest.mark.parametrize("expr, inputs, torch_value, seed", FINDINGS,
                         ids=[f"{e}@{i}" for e, i, _, _ in FINDINGS])
def test_kink_matches_torch(expr, inputs, torch_value, seed):
    ours = kinks.evaluate(sg, expr, inputs)
    assert kinks.same(ours, torch_value), (seed, ours, torch_value)
