"""`backend=` of the transforms and `sg.explain` (Note [The numba backend] in
srcgrad.pipeline.numba_variants): the option's errors, the fallback and its reason, a
call whose argument types numba was not compiled for, numba's machine code cached
across processes. The tests that need numba skip without it; the ImportError one runs
with numba hidden."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.pipeline import numba_variants


def chain(x, w):
    return np.sum(np.tanh(x * w) * np.exp(-x * x) + np.sin(x) ** 2)


def test_without_numba_the_option_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'srcgrad\[numba\]'"):
        sg.grad(chain, backend="numba")
    with pytest.raises(ImportError, match=r"srcgrad\[numba\]"):
        sg.value_and_grad(chain, backend="numba")


def test_an_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="backend='numba'"):
        sg.grad(chain, backend="jax")


def test_explain_without_numba_names_the_namespace():
    g = sg.grad(chain)
    g(np.linspace(0, 1, 5), 0.5)
    text = sg.explain(g)
    assert "grad of chain" in text and "array namespace" in text and "variants compiled: 1" in text
    with pytest.raises(TypeError, match="not returned by a srcgrad transform"):
        sg.explain(chain)


def test_numba_variant_equals_numpys_and_explain_says_numba():
    pytest.importorskip("numba")
    x = np.linspace(-1, 1, 7)
    g = sg.grad(chain, wrt=(0, 1), backend="numba")
    got, want = g(x, 0.5), sg.grad(chain, wrt=(0, 1))(x, 0.5)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-15)
    # d/dw cancels to ~1e-17 beside d/dx's ~1: numba's vectorized tanh (Note [Vectorizable
    # math for numba]) rounds it differently, so it is compared at the gradient's scale
    assert type(got[1]) is type(want[1]) and abs(got[1] - want[1]) <= 1e-12 * np.max(np.abs(want[0]))
    text = sg.explain(g)
    assert "backend: numba" in text and "(float64[7], float): numba" in text
    v, gr = sg.value_and_grad(chain, backend="numba")(x, 0.5)
    np.testing.assert_allclose(v, chain(x, 0.5), rtol=1e-12)


def test_a_construct_numba_cannot_type_runs_on_numpy_with_its_reason():
    pytest.importorskip("numba")

    def f(x):
        return np.sum(np.var(x, axis=0, keepdims=True) * x)  # numba's var takes no axis

    x = np.arange(6.0).reshape(3, 2) / 5
    g = sg.grad(f, backend="numba")
    np.testing.assert_allclose(g(x), sg.grad(f)(x), rtol=1e-12)
    text = sg.explain(g)
    assert "NumPy (numba fallback: numba could not compile it: TypingError" in text, text
    # a later process reads the verdict and compiles nothing (Note [Verdicts kept])
    from srcgrad.codegen.cache import default_cache

    kept = list(default_cache().directory.glob("*/*.numba.json"))
    assert any('"backend": "numpy"' in p.read_text() and "TypingError" in p.read_text() for p in kept)


def test_a_layout_numba_was_not_compiled_for_runs_numpys_code():
    pytest.importorskip("numba")
    g = sg.grad(lambda x: np.sum(np.sin(x) * x), backend="numba")
    base = np.linspace(0, 1, 12).reshape(3, 4)
    f_order = np.asfortranarray(base)
    strided = np.linspace(0, 1, 24).reshape(3, 8)[:, ::2]  # not C-contiguous either: one variant
    want = np.cos(base) * base + np.sin(base)
    np.testing.assert_allclose(g(f_order), want, rtol=1e-12)
    s = strided
    np.testing.assert_allclose(g(strided), np.cos(s) * s + np.sin(s), rtol=1e-12)


def test_results_numba_gives_otherwise_are_not_taken():
    """The first call's check (Note [The numba backend]): another shape, dtype or value
    than NumPy's is no match; a Python float for numpy.float64 is converted."""
    a = np.ones(3)
    assert numba_variants._restorer((a, np.float64(2.0)), (a.copy(), 2.0))((a, 2.0))[1].__class__ \
        is np.float64
    assert numba_variants._restorer(a, np.ones((3, 1))) is None
    assert numba_variants._restorer(a, a.astype(np.float32)) is None
    assert numba_variants._restorer(a, a + 1e-6) is None
    assert numba_variants._restorer(np.float64(1.0), np.ones(1)) is None
    assert numba_variants._restorer(a, a + 1e-14) is not None


def test_numbas_machine_code_is_loaded_by_a_second_process(tmp_path):
    pytest.importorskip("numba")
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import srcgrad as sg

        def f(x, w):
            return np.sum(np.tanh(x * w) * np.exp(-x * x))

        g = sg.grad(f, backend="numba")
        g(np.linspace(0, 1, 9), 0.3)
        (record,) = g.__srcgrad__.numba_records.values()
        jitted = record.dispatcher  # the dispatcher numba compiled or loaded
        print(sum(jitted.stats.cache_hits.values()), sum(jitted.stats.cache_misses.values()))
        print(sg.explain(g).splitlines()[-1])
    """))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "SRCGRAD_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": root}
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                           check=True).stdout.split("\n") for _ in range(2)]
    # the first process compiles (a miss) and writes numba's cache; the second loads it
    assert runs[0][0] == "0 1" and "numba (compiled; machine code cached on disk)" in runs[0][1], runs
    assert runs[1][0] == "1 0" and "numba (machine code loaded from the disk cache)" in runs[1][1], runs
    assert list((tmp_path / "cache").glob("*/__pycache__/*.nbi")), "numba wrote no cache index"
    verdicts = list((tmp_path / "cache").glob("*/*.numba.json"))  # Note [Verdicts kept]
    assert len(verdicts) == 1 and '"backend": "numba"' in verdicts[0].read_text()


def test_a_variant_numba_runs_slower_runs_numpys_code(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(numba_variants, "SLOWER", 0.0)  # any compiled run counts as slower

    def f(x):
        return np.sum(np.cos(x) * x)

    g = sg.grad(f, backend="numba")
    x = np.linspace(0, 1, 5)
    np.testing.assert_allclose(g(x), np.cos(x) - np.sin(x) * x, rtol=1e-12)
    assert "numba's code ran slower than NumPy's on the first call" in sg.explain(g)


def test_helpers_written_out_for_numba():
    """Note [Rewrites for numba]: literal basic indices only; an integer-array index (a
    scatter-add that must accumulate repeats) keeps its helper, which numba refuses."""
    src = "\n".join([
        "def g(x, c, v, idx):",
        "    a = setitem(x, slice(1, -1, None), v)",
        "    b = scatter_index(c, (4, 3), (slice(None, None, None), None, 0))",
        "    d = scatter_index(c, (4,), idx)",
        "    e = setitem_bar(c, -1)",
        "    p, q = stack_bar(c, [a, b], 0)",
        "    s = xp.stack([p, q])",
        "    k = c.sum(axis=-1, keepdims=True)",
        "    for i in range(n)[::-1]:",
        "        pass",
        "    return a"])
    out = numba_variants.rewritten(src)
    assert "a = x.copy()\n    a[slice(1, -1, None)] = v" in out
    assert "b = xp.zeros((4, 3))\n    b[slice(None, None, None), 0] = c[slice(None), 0]" in out
    assert "d = scatter_index(c, (4,), idx)" in out
    assert "e = c[-1]" in out and "p, q = (c[0], c[1])" in out and "xp.array([p, q])" in out
    assert "range(n - 1, -1, -1)" in out
    assert "k = xp.expand_dims(c.sum(axis=-1), -1)" in out


def test_a_scatter_numba_writes_out_equals_numpys():
    pytest.importorskip("numba")

    def f(u, D):
        u = u.copy()
        for _ in range(5):
            lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
            u[1:-1] += 0.1 * (D * lap + u[1:-1] * (1.0 - u[1:-1]))
            u[0] = u[1]
        return np.sum(u * u)

    u = np.linspace(0.1, 0.9, 9)
    g = sg.grad(f, wrt=(0, 1), backend="numba")
    got, want = g(u, 0.2), sg.grad(f, wrt=(0, 1))(u, 0.2)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-15)
    assert abs(got[1] - want[1]) <= 1e-12 * abs(want[1])
    assert ": numba" in sg.explain(g).splitlines()[-1]


def test_scatters_are_added_in_place_where_nothing_else_reads_them():
    """Note [Scatters added in place]: a fresh `a` plus a scatter's zeros is `a` written at
    the index; an `a` read elsewhere, or one of another shape, keeps NumPy's values."""
    src = "\n".join([
        "def g(x, v, w):",
        "    a = x * 2.0",
        "    s = xp.zeros((4,))",
        "    s[1:3] = v",
        "    y = a + s",
        "    t = xp.zeros((4,))",
        "    t[0] = w",
        "    z = t + y",
        "    b = x * 3.0",
        "    r = xp.zeros((4,))",
        "    r[2] = w",
        "    q = b + r",
        "    return z, q, b"])
    out = numba_variants.rewritten(src)
    assert "y[1:3] += v" in out and "z = y\n    z[0] += w" in out, out
    assert "s = xp.zeros" not in out and "t = xp.zeros" not in out
    assert "r = xp.zeros((4,))" in out and "q = b + r" in out  # b is returned too: not fresh
    ns = {"xp": np}
    exec(out, ns)
    plain = {"xp": np}
    exec(src, plain)
    for x in (np.arange(4.0), np.array([5.0])):  # (1,): broadcast, as NumPy's `a + s`
        got, want = ns["g"](x, np.array([7.0, 8.0]), 9.0), plain["g"](x, np.array([7.0, 8.0]), 9.0)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
