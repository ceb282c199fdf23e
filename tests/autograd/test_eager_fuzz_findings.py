"""Regressions found by the eager fuzzer (tests/eager_fuzz, benchmarks/fuzz_eager.py).

Each test pins the mechanism behind one failure class, not the generated program.
"""

from __future__ import annotations

import numpy as np

import srcgrad as sg


def test_numpy_scalar_keeps_its_dtype():
    """Eager fuzz seed 381 (0-d leaf from `rng.standard_normal(())`, a np.float64): the
    leaf was float32, so its `.grad` was float32 and off from central differences by
    ~1e-7 relative. torch.tensor(np.float64(x)) is float64, of np.float32(x) float32."""
    x = sg.tensor(np.float64(0.7109746152), requires_grad=True)
    assert x.dtype == np.float64
    assert sg.tensor(np.float32(1.5)).dtype == np.float32
    assert sg.tensor(np.int32(3)).dtype == np.int32
    assert sg.tensor(1.5).dtype == np.float32  # a Python float: torch's default dtype
    c = sg.tensor(np.array([0.1, 0.2, 0.3]))
    (c * x).sum().backward()
    assert x.grad.dtype == np.float64
    assert abs(x.grad.item() - 0.6) < 1e-15
