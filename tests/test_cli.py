"""The `srcgrad` command line, and the packaging it is installed by."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from srcgrad.cli import main
from srcgrad.codegen.cache import ModuleCache
from srcgrad.errors import CompileError

ROOT = Path(__file__).resolve().parents[1]
# The real emit tests need the compiler's api module; they run as soon as it exists.

TINY = """\
import numpy as np


def loss(W, x):
    h = np.tanh(W @ x)
    return np.sum(h ** 2)
"""


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch):
    # The CLI puts the target file's directory on sys.path; keep that inside one test.
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(d))
    return d


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny_model.py"
    path.write_text(TINY)
    return path


@pytest.fixture
def fake_api(monkeypatch):
    """A stand-in `srcgrad.api` that records calls, for testing the CLI's wiring."""
    api = types.ModuleType("srcgrad.api")
    api.calls = []
    monkeypatch.setitem(sys.modules, "srcgrad.api", api)
    return api


def _lines(text: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in text.splitlines())


# -- cache ----------------------------------------------------------------------------


def test_cache_info_and_clear(cache_dir, capsys):
    assert main(["cache", "info"]) == 0
    info = _lines(capsys.readouterr().out)
    assert info["directory"] == str(cache_dir)
    assert info["entries"] == "0" and info["usable"] == "True"

    c = ModuleCache(cache_dir)
    c.put("ab" * 8, "x = 1\n")
    c.put("cd" * 8, "y = 2\n")
    assert main(["cache", "info"]) == 0
    info = _lines(capsys.readouterr().out)
    assert info["entries"] == "2" and int(info["bytes"]) > 0

    assert main(["cache", "clear"]) == 0
    assert "removed 2 cached modules" in capsys.readouterr().out
    assert c.get("ab" * 8) is None
    assert main(["cache", "clear"]) == 0
    assert "removed 0 cached modules" in capsys.readouterr().out


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_cache_info_unsafe_directory(cache_dir, capsys):
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    with pytest.warns(UserWarning, match="writable by other users"):
        assert main(["cache", "info"]) == 0
    info = _lines(capsys.readouterr().out)
    assert info["usable"] == "False" and "chmod go-w" in info["reason"]


def test_python_dash_m(cache_dir):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "srcgrad", "cache", "info"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"directory: {cache_dir}" in r.stdout


# -- usage errors ------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["cache"], ["cache", "wipe"],
                                  ["emit"], ["emit", "f.py:loss", "--mode", "sideways"],
                                  ["check", "f.py:loss"]])
def test_bad_arguments(argv, capsys):
    assert main(argv) == 2
    assert "usage: srcgrad" in capsys.readouterr().err


def test_help(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in ("emit", "check", "graph", "cache"):
        assert cmd in out


@pytest.mark.parametrize("cmd", [["emit"], ["graph"], ["check", "--args", "(3,)"]])
def test_bad_target(cmd, tiny, tmp_path, fake_api, capsys):
    fake_api.emit_standalone = fake_api.graph_dot = lambda *a, **k: "x"
    fake_api.check_cli = lambda *a, **k: (True, "ok")
    cases = {
        "no-colon": "expected FILE.py:FUNC",
        f"{tiny}:": "expected FILE.py:FUNC",
        f"{tmp_path / 'missing.py'}:loss": "no such file",
        f"{tiny}:nope": "has no function 'nope'",
        f"{tiny}:np": "is not a function",
    }
    for target, message in cases.items():
        assert main([cmd[0], target, *cmd[1:]]) == 2
        err = capsys.readouterr().err
        assert err.startswith("srcgrad: ") and message in err
        assert len(err.strip().splitlines()) == 1


def test_target_that_fails_to_import(tmp_path, fake_api, capsys):
    fake_api.emit_standalone = lambda *a, **k: "x"
    bad = tmp_path / "bad_mod.py"
    bad.write_text("import numpy\nraise RuntimeError('boom at import')\n")
    assert main(["emit", f"{bad}:f"]) == 2
    err = capsys.readouterr().err
    assert "cannot import" in err and "RuntimeError: boom at import" in err


@pytest.mark.parametrize("cmd", [["check", "--args", "(3,)"], ["graph"], ["emit"]])
def test_unavailable_commands(cmd, tiny, fake_api, capsys):
    assert main([cmd[0], f"{tiny}:loss", *cmd[1:]]) == 2
    assert capsys.readouterr().err.strip() == (
        f"srcgrad: '{cmd[0]}' is not available in this version")


# -- wiring to srcgrad.api (with a stand-in api) ------------------------------------------


def test_emit_wiring(tiny, tmp_path, fake_api, capsys):
    def emit_standalone(func, wrt=None, mode="reverse", optimize=True):
        fake_api.calls.append((func.__name__, wrt, mode, optimize))
        return "def grad_loss(W, x):\n    return W"

    fake_api.emit_standalone = emit_standalone
    assert main(["emit", f"{tiny}:loss"]) == 0
    assert capsys.readouterr().out == "def grad_loss(W, x):\n    return W\n"
    out = tmp_path / "out.py"
    assert main(["emit", f"{tiny}:loss", "--wrt", "W, x", "--mode", "both", "--no-optimize",
                 "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert out.read_text() == "def grad_loss(W, x):\n    return W\n"
    assert main(["emit", f"{tiny}:loss", "--wrt", "0", "--mode", "forward"]) == 0
    assert fake_api.calls == [("loss", None, "reverse", True), ("loss", ("W", "x"), "both", False),
                              ("loss", (0,), "forward", True)]


def test_emit_compile_error(tiny, fake_api, capsys):
    def emit_standalone(func, **kwargs):
        raise CompileError("unsupported construct: yield", filename=str(tiny), lineno=5,
                           col=4, text="    h = np.tanh(W @ x)")

    fake_api.emit_standalone = emit_standalone
    assert main(["emit", f"{tiny}:loss"]) == 1
    err = capsys.readouterr().err
    assert f"{tiny}:5:5: unsupported construct: yield" in err
    assert "h = np.tanh(W @ x)" in err


def test_emit_refused_options(tiny, fake_api, capsys):
    def emit_standalone(func, wrt=None, mode="reverse", optimize=True):
        raise ValueError(f"mode={mode!r}: only 'reverse' is available in this version")

    fake_api.emit_standalone = emit_standalone
    assert main(["emit", f"{tiny}:loss", "--mode", "forward"]) == 2
    assert capsys.readouterr().err == (
        "srcgrad: mode='forward': only 'reverse' is available in this version\n")


def test_check_and_graph_wiring(tiny, tmp_path, fake_api, capsys):
    fake_api.check_cli = lambda func, spec: (spec == "(3,4), (4,)", f"checked {func.__name__}")
    fake_api.graph_dot = lambda func: f"digraph {func.__name__} {{}}"
    assert main(["check", f"{tiny}:loss", "--args", "(3,4), (4,)"]) == 0
    assert capsys.readouterr().out == "checked loss\n"
    assert main(["check", f"{tiny}:loss", "--args", "(2,)"]) == 1
    assert main(["graph", f"{tiny}:loss"]) == 0
    assert "digraph loss {}" in capsys.readouterr().out
    assert main(["graph", f"{tiny}:loss", "-o", str(tmp_path / "g.dot")]) == 0
    assert (tmp_path / "g.dot").read_text() == "digraph loss {}\n"


def test_sibling_imports_and_dotted_names(tmp_path, fake_api, capsys):
    fake_api.emit_standalone = lambda func, **k: f"# {func.__qualname__} {func(2.0)}"
    (tmp_path / "helpers_sib.py").write_text("def twice(x):\n    return 2 * x\n")
    (tmp_path / "user_mod.py").write_text(textwrap.dedent("""\
        from helpers_sib import twice


        class Model:
            @staticmethod
            def loss(x):
                return twice(x)
        """))
    assert main(["emit", f"{tmp_path / 'user_mod.py'}:Model.loss"]) == 0
    assert capsys.readouterr().out == "# Model.loss 4.0\n"


# -- the real compiler (runs once srcgrad/api.py exists) ---------------------------------


def test_emit_prints_a_module(tiny, capsys):
    assert main(["emit", f"{tiny}:loss", "--wrt", "W"]) == 0
    out = capsys.readouterr().out
    tree = ast.parse(out)
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "grad_loss" in names


def test_emitted_module_runs_with_only_numpy(tiny, tmp_path):
    out = tmp_path / "tiny_grad.py"
    assert main(["emit", f"{tiny}:loss", "--wrt", "W", "-o", str(out)]) == 0
    rng = np.random.default_rng(0)
    W, x = rng.standard_normal((3, 4)), rng.standard_normal(4)
    np.save(tmp_path / "W.npy", W)
    np.save(tmp_path / "x.npy", x)
    # srcgrad and its compile-time dependencies are made unimportable in the child.
    script = textwrap.dedent("""\
        import sys
        for name in ("srcgrad", "gast", "astor", "jinja2"):
            sys.modules[name] = None
        import numpy as np
        import tiny_grad
        g = tiny_grad.grad_loss(np.load("W.npy"), np.load("x.npy"))
        if isinstance(g, tuple):
            (g,) = g
        np.save("g.npy", g)
        """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    h = np.tanh(W @ x)
    expected = np.outer(2 * h * (1 - h**2), x)
    np.testing.assert_allclose(np.load(tmp_path / "g.npy"), expected, rtol=1e-10)


# -- packaging ---------------------------------------------------------------------------


def test_pyproject_lists_every_package():
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "srcgrad").rglob("*.py") if "__pycache__" not in p.parts}
    listed = set(config["packages"])
    missing = on_disk - listed
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"
    assert config["package-dir"] == {"srcgrad.templates": "templates"}
    # Without it an editable install cannot serve files("srcgrad.templates") (the
    # editable finder only maps directories that are regular packages).
    assert (ROOT / "templates" / "__init__.py").exists()
