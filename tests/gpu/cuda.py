"""CuPy for the GPU tests, or a skip of the whole module where there is none to run on
(CI has no GPU; `pip install 'srcgrad[cuda12]'` and a CUDA device run them)."""

from __future__ import annotations

import pytest


def cupy_or_skip():
    """The cupy module; skips the calling test module where CuPy or a CUDA device is missing."""
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device", allow_module_level=True)
    except Exception as err:  # noqa: BLE001 - no driver, no runtime: nothing to run on
        pytest.skip(f"no usable CUDA device ({err})", allow_module_level=True)
    return cp
