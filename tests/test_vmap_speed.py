"""sg.vmap's per-call costs (issue 32's per-example gradient benchmark): the quick path
of VMapped.__call__, and Note [Unbuffered rows] (srcgrad.pipeline.vmap): its ops give
exactly NumPy's values, it leaves NumPy's buffer size as it found it, and code another
transform traces is written without it."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.vmapping import VMapped

RNG = np.random.default_rng(3)


def logistic(w, x, y):
    z = x @ w
    return np.log1p(np.exp(-y * z))


def reference(w, X, y):
    """The per-example gradient written out: (-y * sigmoid(-y z)) * x, per row."""
    e = np.exp(-y * (X @ w))
    return X * ((-y) * (e * (1.0 / (1 + e))))[:, None]


WIDE = (RNG.normal(size=300) * 0.1, RNG.normal(size=(128, 300)), np.sign(RNG.normal(size=128)))


def test_a_wide_row_scaling_runs_with_a_small_buffer_and_gives_numpys_bits():
    vm = sg.vmap(sg.grad(logistic), in_axes=(None, 0, 0))
    out = vm(*WIDE)
    text = sg.source(vm)
    assert text.count("xp.setbufsize(256)") == 1 and "with xp.errstate():" in text
    assert np.array_equal(out, reference(*WIDE))  # bit for bit: an elementwise op's values
    want = np.stack([sg.grad(logistic)(WIDE[0], x, t) for x, t in zip(WIDE[1], WIDE[2])])
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def test_the_buffer_size_is_restored_after_the_call_and_after_an_error():
    vm = sg.vmap(sg.grad(logistic), in_axes=(None, 0, 0))
    old = np.setbufsize(4096)  # the caller's own setting survives the call
    try:
        vm(*WIDE)
        assert np.getbufsize() == 4096
    finally:
        np.setbufsize(old)
    assert np.getbufsize() == old


def test_small_or_narrow_or_mixed_dtype_ops_are_written_plainly():
    vm = sg.vmap(sg.grad(logistic), in_axes=(None, 0, 0))
    vm(np.ones(3), RNG.normal(size=(5, 3)), np.ones(5))  # 15 elements: the `with` would cost more
    assert "setbufsize" not in sg.source(vm)
    vm32 = sg.vmap(lambda x, s: x * s, in_axes=(0, 0))  # float32 rows times float64 scales: a cast
    x32, s64 = RNG.normal(size=(200, 300)).astype(np.float32), RNG.normal(size=(200, 1))
    assert np.array_equal(vm32(x32, s64), x32 * s64)
    assert "setbufsize" not in sg.source(vm32)


def test_a_vmap_traced_by_another_transform_has_no_with_block():
    """A vmap of the vmap traces the inner one's generated code (entry_at), whose `with`
    the frontend refuses: that code is written without it."""
    Xs = RNG.normal(size=(2, 128, 300))
    ys = np.sign(RNG.normal(size=(2, 128)))
    inner = sg.vmap(sg.grad(logistic), in_axes=(None, 0, 0))
    outer = sg.vmap(inner, in_axes=(None, 0, 0))
    out = outer(WIDE[0], Xs, ys)
    for k in range(2):
        assert np.array_equal(out[k], reference(WIDE[0], Xs[k], ys[k]))
    def summed(w, X, y):
        return inner(w, X, y).sum(axis=0)
    J = sg.jacobian(summed)(WIDE[0], Xs[0], ys[0])  # (its trace reads the inner 128 x 300 rows)
    H = [sg.hessian(logistic)(WIDE[0], x, t) for x, t in zip(Xs[0], ys[0])]
    np.testing.assert_allclose(J, np.sum(H, axis=0), rtol=1e-12, atol=1e-12)


def test_a_repeated_call_skips_the_axes_check(monkeypatch):
    calls = []
    original = VMapped.axes_for

    def counting(self, *a, **k):
        calls.append(1)
        return original(self, *a, **k)
    monkeypatch.setattr(VMapped, "axes_for", counting)
    vm = sg.vmap(sg.grad(logistic), in_axes=(None, 0, 0))
    args = (np.ones(3), RNG.normal(size=(5, 3)), np.ones(5))
    first = vm(*args)
    assert np.array_equal(vm(*args), first) and len(calls) == 1
    with pytest.raises(ValueError, match="inconsistent sizes"):  # other shapes: checked again
        vm(np.ones(3), RNG.normal(size=(5, 3)), np.ones(4))
    with pytest.raises(TypeError, match="positionally"):
        vm(*args[:2], y=args[2])
    assert vm(np.ones(3), RNG.normal(size=(7, 3)), np.ones(7)).shape == (7, 3)
