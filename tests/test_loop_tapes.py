"""Loop tapes a reviewer reads: loop-invariant values off the tape (Note [Invariants off
the tape] in srcgrad/passes/hoisting.py), one tape per saved quantity, and for numba
preallocated arrays indexed by the loop's index (Note [One tape per saved quantity] in
srcgrad/passes/tapes.py). Gradients against central differences and NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.api import emit_standalone


def _fd(f, args, i, eps=1e-6):
    x = np.array(args[i], dtype=float)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[k] += eps
        lo[k] -= eps
        g[k] = (f(*args[:i], hi, *args[i + 1:]) - f(*args[:i], lo, *args[i + 1:])) / (2 * eps)
    return g


def decay(p, u0):
    u = u0
    t = 0.0
    while t < 0.2:
        u = u + 0.05 * (p[0] * u - p[1] * u * u)
        t = t + 0.05
    return np.sum(u * u)


def test_invariant_reads_leave_the_loop_and_the_tape():
    args = (np.array([0.7, 0.3]), np.array([1.0, 0.5]))
    g = sg.grad(decay, wrt="p")
    got = g(*args)
    np.testing.assert_allclose(got, _fd(decay, args, 0), rtol=1e-7)
    text = "\n".join(line for line in sg.source(g).splitlines() if not line.strip().startswith("#"))
    loop_at = text.index("while ")
    assert "p[0]" in text[:loop_at] and "p[1]" in text[:loop_at]  # read once, before the loop
    assert "p[0]" not in text[loop_at:] and "p[1]" not in text[loop_at:]
    appended = [line.split(".append(")[1].rstrip(")") for line in text.splitlines() if ".append(" in line]
    assert appended and len(appended) == len(set(appended))  # each quantity once
    hoisted = {line.split("=")[0].strip() for line in text[:loop_at].splitlines() if "p[" in line}
    assert not hoisted & set(appended)


def skip_or_read(x, n):
    h = x
    for _ in range(n):
        h = h * x[5]  # x[5] raises for a short x, but only where the loop runs
    return np.sum(h)


def test_a_loop_that_may_not_run_keeps_its_invariant_reads():
    """range(n) of an argument may be empty: hoisting x[5] out of it would raise where
    the user's program does not."""
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(sg.grad(skip_or_read)(x, 0), np.ones(3))
    x = np.linspace(0.5, 1.0, 6)
    np.testing.assert_allclose(sg.grad(skip_or_read)(x, 3), _fd(lambda x: skip_or_read(x, 3), (x,), 0),
                               rtol=1e-7)


def forces(x0, v0):
    x = x0
    v = v0
    for _ in range(6):
        d = x[:, None, :] - x[None, :, :]
        r2 = np.sum(d * d, axis=-1) + 0.1
        f = np.sum(d / (r2 * np.sqrt(r2))[:, :, None], axis=1)
        v = v + 0.05 * f
        x = x + 0.1 * v
    return np.sum(x * x) + np.sum(v * v)


def _forces_args():
    r = np.random.default_rng(3)
    return r.standard_normal((5, 2)), 0.1 * r.standard_normal((5, 2))


def test_numba_tapes_of_arrays_are_lists_of_references():
    """An array is appended, not copied into a preallocated slot (the copy costs numba
    more than the op that made it: Note [One tape per saved quantity])."""
    args = _forces_args()
    text = emit_standalone(forces, wrt=("x0", "v0"), backend="numba", args=args)
    assert "r2_tape = []" in text and "r2_tape.append(r2)" in text and "r2_t = r2_tape.pop()" in text


def steps(a, y0):
    y = y0
    for _ in range(20):
        y = y + 0.1 * np.sin(a * y) * y
    return y * y


def _numba_source(g) -> str:
    (record,) = g.__srcgrad__.numba_records.values()
    with open(record.dispatcher.py_func.__code__.co_filename, encoding="utf-8") as file:
        return file.read()


def test_numba_tapes_of_numbers_in_a_range_loop_are_preallocated_arrays():
    pytest.importorskip("numba")
    g = sg.grad(steps, wrt=(0, 1), backend="numba")
    g(0.7, 0.4)
    body = _numba_source(g)
    assert ".append(" not in body and ".pop()" not in body
    tapes = [line.split("=")[0].strip() for line in body.splitlines() if "= xp.empty(20)" in line]
    assert len(tapes) == 3  # one float64 array of the 20 iterations per saved number
    for tape in tapes:
        assert f"{tape}[_] = " in body  # written at the forward loop's index
        assert f"= {tape}[__1]" in body  # read at the adjoint loop's


def test_numba_gradient_of_numbers_on_preallocated_tapes():
    pytest.importorskip("numba")
    g = sg.grad(steps, wrt=(0, 1), backend="numba")
    got = g(0.7, 0.4)
    assert "numba" in sg.explain(g).splitlines()[-1] and "fallback" not in sg.explain(g)
    want = sg.grad(steps, wrt=(0, 1))(0.7, 0.4)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    eps = 1e-6
    fd = [(steps(0.7 + eps, 0.4) - steps(0.7 - eps, 0.4)) / (2 * eps),
          (steps(0.7, 0.4 + eps) - steps(0.7, 0.4 - eps)) / (2 * eps)]
    np.testing.assert_allclose(got, fd, rtol=1e-7)


def test_numpy_tapes_of_a_range_loop_are_lists_of_quantities():
    args = _forces_args()
    text = emit_standalone(forces, wrt=("x0", "v0"), args=args)
    assert "r2_tape = []" in text and "r2_tape.append(r2)" in text and "r2_t = r2_tape.pop()" in text


def test_numba_gradient_with_preallocated_tapes_is_numpys():
    pytest.importorskip("numba")
    args = _forces_args()
    g = sg.grad(forces, wrt=(0, 1), backend="numba")
    got = g(*args)
    assert "numba" in sg.explain(g).splitlines()[-1] and "fallback" not in sg.explain(g)
    want = sg.grad(forces, wrt=(0, 1))(*args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[0], _fd(forces, args, 0), rtol=1e-6)
    np.testing.assert_allclose(got[1], _fd(forces, args, 1), rtol=1e-6)
