"""Golden file: the generated `sg.vjp` module of a function calling two custom Functions
(tests/corpus/functions.py:f_two_calls), hook-free and with saved-tensor hooks, and the
hook variant of one that may write in place into what a Function saved
(tests/corpus/saved_writes.py:maybe_scalar_augmented): its forward computes the flag
`storage_written`, its backward unpacks the saved value and checks it (`check_saved`).

The hook variants' functions are renamed `*_hooks` so all fit one importable file.
Regenerate with `SRCGRAD_UPDATE_GOLDEN=1 pytest tests/golden`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import srcgrad as sg
from srcgrad import pipeline
from srcgrad.autograd.graph import saved_tensors_hooks
from srcgrad.codegen import emit
from srcgrad.frontend.parse import parse_function
from tests.corpus import functions as F
from tests.corpus import saved_writes as S

HERE = Path(__file__).parent
GOLDEN = HERE / "custom_function_vjp.py"


def _module_text() -> str:
    fs = parse_function(F.f_two_calls)
    plain = pipeline.vjp_program(fs).sources
    hooked = [s.replace("def f_two_calls_fwd(", "def f_two_calls_fwd_hooks(")
               .replace("def f_two_calls_bwd(", "def f_two_calls_bwd_hooks(")
              for s in pipeline.vjp_program(fs, hooks=True).sources]
    checked = [s.replace("_fwd(", "_fwd_hooks(").replace("_bwd(", "_bwd_hooks(")
               for s in pipeline.vjp_program(parse_function(S.maybe_scalar_augmented),
                                             hooks=True).sources]
    sources = plain + hooked + checked
    return emit.render_module(sources, version=pipeline.VERSION,
                              origin="tests/corpus/functions.py:f_two_calls, "
                                     "tests/corpus/saved_writes.py:maybe_scalar_augmented",
                              key="standalone",
                              helpers=emit.helpers_used(sources), standalone=True)


def test_emitted_source_matches_golden():
    text = _module_text()
    if os.environ.get("SRCGRAD_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), f"no golden file {GOLDEN.name}: run with SRCGRAD_UPDATE_GOLDEN=1"
    assert text == GOLDEN.read_text(), "emitted source of f_two_calls changed; review the diff"


def test_golden_module_runs_and_is_right():
    namespace: dict = {}
    exec(compile(GOLDEN.read_text(), GOLDEN.name, "exec"), namespace)
    rng = np.random.default_rng(1)
    x, y, ct = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    want_out, want_fn = sg.vjp(F.f_two_calls, x, y)
    want = want_fn(ct)
    (out,), saved = namespace["f_two_calls_fwd"](x, y)
    np.testing.assert_allclose(out, want_out, rtol=1e-12)
    for a, b in zip(namespace["f_two_calls_bwd"](saved, ct), want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    log = []
    pack, unpack = (lambda t: log.append("pack") or t), (lambda t: log.append("unpack") or t)
    (out,), saved = namespace["f_two_calls_fwd_hooks"](pack, x, y)
    grads = namespace["f_two_calls_bwd_hooks"](unpack, saved, ct)
    assert log == ["pack"] * 5 + ["unpack"] * 5
    with saved_tensors_hooks(pack, unpack):
        _, hooked_fn = sg.vjp(F.f_two_calls, x, y)
    for a, b, c in zip(grads, want, hooked_fn(ct)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
        np.testing.assert_allclose(c, b, rtol=1e-12)


def test_golden_version_check_runs():
    namespace: dict = {}
    exec(compile(GOLDEN.read_text(), GOLDEN.name, "exec"), namespace)
    fwd, bwd = namespace["maybe_scalar_augmented_fwd_hooks"], namespace["maybe_scalar_augmented_bwd_hooks"]
    log = []
    pack, unpack = (lambda t: log.append("pack") or t), (lambda t: log.append("unpack") or t)
    x, w = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    _, saved = fwd(pack, x, w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation: \\[float64 \\[2\\]\\], "
                                           "which was saved by Mul at saved_writes.py:16"):
        bwd(unpack, saved, 1.0)
    # Mul's two saved values and the two the loss's own backward reads; all unpacked, then checked
    assert log == ["pack"] * 4 + ["unpack"] * 4
    x0, w0 = np.array(1.0), np.array(3.0)  # 0-d: `y += 1.0` rebinds a NumPy scalar
    _, saved = fwd(pack, x0, w0)
    (grad_x, grad_w) = bwd(unpack, saved, 1.0)
    np.testing.assert_allclose([grad_x, grad_w], sg.grad(S.maybe_scalar_augmented, wrt=(0, 1))(x0, w0))
