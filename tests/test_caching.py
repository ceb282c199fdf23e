"""The compiler's use of the module cache: reuse, invalidation, corruption."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.pipeline import modules


def _files(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".py"))


def _write_module(path, body):
    path.write_text(textwrap.dedent(body))


def test_disk_cache_is_written_reused_and_survives_a_new_process(tmp_path, monkeypatch):
    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))
    _write_module(tmp_path / "userfn.py", """
        import numpy as np
        def f(x):
            return np.sum(np.sin(x) * x)
    """)
    script = textwrap.dedent(f"""
        import sys, numpy as np
        sys.path.insert(0, {str(tmp_path)!r})
        import srcgrad as sg, userfn
        from srcgrad import api
        g = sg.grad(userfn.f)
        print(float(g(np.arange(3.0)).sum()), api.__dict__.get('_LAST_SOURCE_', 'na'))
    """)
    env = {**os.environ, "SRCGRAD_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    files = _files(tmp_path / "cache")
    assert len(files) == 1
    stamp = os.stat(files[0]).st_mtime_ns
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert _files(tmp_path / "cache") == files and os.stat(files[0]).st_mtime_ns == stamp


def test_changed_source_gets_a_new_module(tmp_path, monkeypatch):
    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))
    sys.path.insert(0, str(tmp_path))
    try:
        for i, body in enumerate(["np.sum(x * x)", "np.sum(x * x * x)"]):
            _write_module(tmp_path / f"changing{i}.py", f"""
                import numpy as np
                def f(x):
                    return {body}
            """)
            mod = __import__(f"changing{i}")
            g = sg.grad(mod.f)(np.array([2.0]))
            assert g[0] == (4.0 if i == 0 else 12.0)
        assert len(_files(tmp_path / "cache")) == 2
    finally:
        sys.path.remove(str(tmp_path))


def test_corrupt_cache_file_is_recompiled(tmp_path, monkeypatch):
    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))

    def f(x):
        return np.sum(np.exp(x))

    x = np.arange(3.0)
    assert np.allclose(sg.grad(f)(x), np.exp(x))
    (path,) = _files(tmp_path / "cache")
    with open(path, "a") as fh:
        fh.write("\nraise SystemExit('tampered')\n")
    modules._MEMORY.clear()
    assert np.allclose(sg.grad(f)(x), np.exp(x))
    assert "tampered" not in open(path).read()


def test_cache_clear_empties_memory_and_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))

    def f(x):
        return np.sum(x ** 2)

    sg.grad(f)(np.ones(2))
    assert _files(tmp_path / "cache") and modules._MEMORY
    sg.cache_clear()
    assert not _files(tmp_path / "cache") and not modules._MEMORY


def test_a_module_that_does_not_compile_leaves_no_cache_entry(tmp_path, monkeypatch):
    """The generated text is compiled before it is stored (its compile is its syntax
    check): a text that does not compile raises and writes no file (DESIGN: a failed
    compile leaves no cache entry), and the next call compiles again."""
    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))

    def f(x):
        return np.sum(np.cos(x) * x)

    real = modules._module
    monkeypatch.setattr(modules, "_module", lambda *a: ("def broken(:\n",) + real(*a)[1:])
    with pytest.raises(SyntaxError):
        sg.grad(f)(np.ones(3))
    assert not _files(tmp_path / "cache")
    monkeypatch.setattr(modules, "_module", real)
    x = np.linspace(-1.0, 1.0, 3)
    np.testing.assert_allclose(sg.grad(f)(x), np.cos(x) - x * np.sin(x))
    assert len(_files(tmp_path / "cache")) == 1


def test_traceback_shows_the_generated_line(tmp_path, monkeypatch):
    import traceback

    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))

    def f(A, b):
        return np.sum(np.linalg.solve(A, b))

    try:
        sg.grad(f)(np.zeros((2, 2)), np.ones(2))
    except np.linalg.LinAlgError:
        text = traceback.format_exc()
    else:
        raise AssertionError("singular matrix did not raise")
    assert "xp.linalg.solve(A, b)" in text or "solve(" in text


def _key_of(directory, body):
    """The cache key of `f` in a module `fnmod.py` written from `body` into `directory`."""
    import importlib.util

    from srcgrad import pipeline
    from srcgrad.frontend.parse import parse_function

    directory.mkdir()
    path = directory / "fnmod.py"
    _write_module(path, body)
    spec = importlib.util.spec_from_file_location(f"fnmod_{directory.name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return pipeline.cache_key(parse_function(mod.f), ())


FUNCTION_MODULE = """
    import numpy as np
    from srcgrad.autograd import Function


    class Scale(Function):
        FACTOR = {factor}

        @staticmethod
        def forward(ctx, x):
            return Scale.scaled(x)

        @staticmethod
        def scaled(x):
            return x * Scale.FACTOR

        @staticmethod
        def backward(ctx, g):
            return g * Scale.FACTOR
{padding}

    def f(x):
        return np.sum(Scale.apply(x))
"""


def test_programs_with_custom_functions_are_disk_cached_and_keyed_on_the_whole_class(tmp_path):
    def key(name, factor=2.0, padding=""):
        return _key_of(tmp_path / name, FUNCTION_MODULE.format(factor=factor, padding=padding))

    base = key("a")
    assert base is not None  # `@staticmethod` in the class body does not disable the cache
    assert key("same") == base
    assert key("constant", factor=3.0) != base  # a class constant the methods read
    assert key("moved", padding="\n") != base  # f one line down: messages name lines
