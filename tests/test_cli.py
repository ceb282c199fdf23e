"""The `srcgrad` command line, and the packaging it is installed by."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

import srcgrad.autograd.gradcheck  # noqa: F401 (the tests monkeypatch its check_cli in sys.modules)
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
                                  ["check", "f.py:loss"], ["check", "f.py:loss", "--args", "(3,"],
                                  ["check", "f.py:loss", "--args", "(3, -1)"],
                                  ["check", "f.py:loss", "--args", "x"],
                                  ["graph", "f.py:loss", "--format", "pdf"],
                                  ["graph", "f.py:loss", "--mode", "both"]])
def test_bad_arguments(argv, capsys):
    assert main(argv) == 2
    assert "usage: srcgrad" in capsys.readouterr().err


def test_help(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in ("emit", "check", "graph", "cache"):
        assert cmd in out


@pytest.mark.parametrize("cmd", [["emit"], ["graph"], ["check", "--args", "(3,)"]])
def test_bad_target(cmd, tiny, tmp_path, fake_api, monkeypatch, capsys):
    fake_api.emit_standalone = lambda *a, **k: "x"
    monkeypatch.setattr(sys.modules["srcgrad.autograd.gradcheck"], "check_cli", lambda *a, **k: (True, "ok"))
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
    assert len(err.strip().splitlines()) == 1
    bad.write_text("def f(x):\n    return x +\n")
    assert main(["emit", f"{bad}:f"]) == 2
    err = capsys.readouterr().err
    assert err == f"srcgrad: cannot import {bad}: {bad}:2: SyntaxError: invalid syntax\n"


@pytest.mark.parametrize("cmd", [["emit"]])
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


def test_check_wiring(tiny, monkeypatch, capsys):
    # The CLI reads --args; the check receives one parsed item per argument.
    monkeypatch.setattr(sys.modules["srcgrad.autograd.gradcheck"], "check_cli",
                        lambda func, items: (items == [(3, 4), (4,)], f"checked {func.__name__} at {items}"))
    assert main(["check", f"{tiny}:loss", "--args", "(3,4), (4,)"]) == 0
    assert capsys.readouterr().out == "checked loss at [(3, 4), (4,)]\n"
    assert main(["check", f"{tiny}:loss", "--args", "(2,), 0.5"]) == 1
    assert capsys.readouterr().out == "checked loss at [(2,), 0.5]\n"


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


# -- the installed console script ---------------------------------------------------------

SCRIPT = Path(sys.executable).with_name("srcgrad.exe" if os.name == "nt" else "srcgrad")
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="srcgrad is not installed in this "
                                  "environment (pip install -e .)")

CONTROL = """\
import numpy as np


def f(x, n):
    s = np.zeros_like(x)
    for i in range(n):
        s = s + np.sin(x) * i
    if np.sum(s) > 0:
        s = s * 2.0
    return np.sum(s ** 2)
"""


def _run(*argv, env=None, cwd=None):
    return subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)


@needs_script
def test_version():
    import srcgrad

    r = _run("--version")
    assert r.returncode == 0 and r.stdout == f"srcgrad {srcgrad.__version__}\n"


@needs_script
def test_check_with_the_syntax_its_help_shows(tiny, cache_dir):
    r = _run("check", "--help")
    assert '"(3,4), (4,)' in " ".join(r.stdout.split())
    r = _run("check", f"{tiny}:loss", "--args", "(3,4), (4,)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "OK" and "loss(W: 3x4, x: 4)" in r.stdout


@needs_script
@pytest.mark.parametrize("args,message", [
    ("(3,4)", "--args gives 1 shapes but loss() takes 2 arguments"),
    ("(3,4), (5,)", "loss() fails at --args (3, 4), (5,): ValueError: matmul"),
    ("(3,4), [4]", "argument --args: cannot read '[4]'"),
    ("(3,4), 'a'", "argument --args: cannot read \"'a'\""),
])
def test_check_usage_errors_are_one_line(tiny, cache_dir, args, message):
    r = _run("check", f"{tiny}:loss", "--args", args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert message in r.stderr
    problem = [line for line in r.stderr.splitlines() if not line.startswith(("usage:", " "))]
    assert len(problem) == 1, r.stderr


SCALED = """\
import numpy as np


def scaled(x, p, alpha):
    return np.sum(np.abs(x) ** p) * alpha + alpha ** 2
"""


def test_check_with_ints_and_floats(tmp_path, cache_dir, capsys):
    path = tmp_path / "scaled_mod.py"
    path.write_text(SCALED)
    assert main(["check", f"{path}:scaled", "--args", "(3,), 3, 0.5"]) == 0
    out = capsys.readouterr().out
    assert "scaled(x: 3, p: int 3, alpha: float 0.5)" in out
    assert "w.r.t. x:" in out and "w.r.t. alpha:" in out  # a float is differentiated
    assert "w.r.t. p:" not in out  # an int is not
    assert out.splitlines()[-1] == "OK"


def test_check_reports_a_wrong_gradient(tmp_path, cache_dir, capsys):
    """A check that cannot fail is no check: a custom Function with a wrong backward."""
    path = tmp_path / "wrong_mod.py"
    path.write_text(textwrap.dedent("""\
        import numpy as np
        import srcgrad as sg


        class Wrong(sg.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2.0

            @staticmethod
            def backward(ctx, g):
                return g * 3.0  # wrong: the derivative is 2

            @staticmethod
            def jvp(ctx, t):
                return t * 2.0  # right


        def f(x):
            return np.sum(Wrong.apply(x))
        """))
    assert main(["check", f"{path}:f", "--args", "(4,)"]) == 1
    out = capsys.readouterr().out
    assert "reverse  output 0 w.r.t. x: max |analytical - numerical| = 1.00e+00  MISMATCH" in out
    assert "forward  output 0 w.r.t. x" in out and out.count("MISMATCH") == 1
    assert out.splitlines()[-1].startswith("FAILED")


@pytest.mark.parametrize("text,expected", [
    ("(3,4), (4,)", [(3, 4), (4,)]),
    ("(3, 4),(4,),()", [(3, 4), (4,), ()]),
    ("(3)", [(3,)]),  # what a person means by it, though Python reads an int
    ("3x4, 4x1, scalar", [(3, 4), (4, 1), ()]),
    ("(2,), 3, 0.5, -1e-3", [(2,), 3, 0.5, -1e-3]),
    ("(0, 3)", [(0, 3)]),
])
def test_parse_arg_spec(text, expected):
    from srcgrad.cli import parse_arg_spec

    got = parse_arg_spec(text)
    assert got == expected
    assert [type(g) for g in got] == [type(e) for e in expected]


@pytest.mark.parametrize("text", ["", "(3,", "(3, -1)", "(3.5,)", "abc", "[1]", "True",
                                  "1j", "(3,), None", "__import__('os')"])
def test_parse_arg_spec_refuses(text):
    import argparse

    from srcgrad.cli import parse_arg_spec

    with pytest.raises(argparse.ArgumentTypeError):
        parse_arg_spec(text)


@needs_script
def test_cache_info_shows_size_and_entries(cache_dir):
    size = Path(ModuleCache(cache_dir).put("ab" * 8, "x = 1\n" * 300)).stat().st_size
    r = _run("cache", "info", env=dict(os.environ, SRCGRAD_CACHE_DIR=str(cache_dir)))
    assert r.returncode == 0, r.stderr
    info = _lines(r.stdout)
    assert info["entries"] == "1" and info["directory"] == str(cache_dir)
    assert info["bytes"] == str(size) and 1024 < size < 2048
    assert info["size"] == f"{size / 1024:.1f} KiB in 1 cached module"


# -- graph and emit --ir ---------------------------------------------------------------


def _dot_nodes(text: str) -> dict[str, str]:
    """node id -> label of a DOT text as srcgrad writes it."""
    import re

    return {m.group(1): m.group(2) for m in re.finditer(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)"',
                                                        text, re.M)}


@needs_script
def test_graph_is_dot_labelled_with_source_lines(tiny, cache_dir):
    r = _run("graph", f"{tiny}:loss")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('digraph "loss" {') and r.stdout.rstrip().endswith("}")
    labels = list(_dot_nodes(r.stdout).values())
    assert labels[:2] == ["W", "x"]
    assert any(lab.startswith("h = tanh(") and "tiny_model.py:5  h = np.tanh(W @ x)" in lab
               for lab in labels)
    assert any("tiny_model.py:6  return np.sum(h ** 2)" in lab for lab in labels)
    assert "fillcolor=\"#dbe9f6\"" not in r.stdout  # no derivative ops in the function itself


@needs_script
@pytest.mark.parametrize("mode,derivative", [("reverse", "grad_W = "), ("forward", "_t = ")])
def test_graph_of_the_derivative(tiny, cache_dir, mode, derivative):
    r = _run("graph", f"{tiny}:loss", "--mode", mode, "--wrt", "W")
    assert r.returncode == 0, r.stderr
    labels = _dot_nodes(r.stdout)
    derived = [lab for lab in labels.values() if derivative in lab]
    assert derived and all("tiny_model.py:" in lab for lab in derived)
    assert 'fillcolor="#dbe9f6"' in r.stdout  # the derivative's ops are drawn filled
    assert "h = tanh(" in r.stdout  # and the function's own ops are there too


def test_graph_of_control_flow_has_clusters(tmp_path, cache_dir, capsys):
    path = tmp_path / "control_mod.py"
    path.write_text(CONTROL)
    assert main(["graph", f"{path}:f", "--mode", "reverse"]) == 0
    out = capsys.readouterr().out
    for title in ("for_range: body", "cond: then", "cond: else"):
        assert f'label="{title}"' in out
    # Edges are written outside the clusters (inside one they would pull both ends in).
    inside, depth = [], 0
    for line in out.splitlines():
        depth += line.count("{") - line.count("}")
        if depth > 1 and "->" in line:
            inside.append(line)
    assert inside == []


def _fake_dot(directory: Path) -> Path:
    """A `dot` that writes what it was asked for, so the wiring is tested without Graphviz."""
    directory.mkdir()
    script = directory / "dot"
    script.write_text(f"#!{sys.executable}\nimport sys\ndata = sys.stdin.read()\n"
                      "assert data.startswith('digraph')\n"
                      "sys.stdout.write('<svg fake %s>' % sys.argv[1])\n")
    script.chmod(0o755)
    return directory


@pytest.mark.skipif(os.name != "posix", reason="a fake `dot` script")
def test_graph_svg_runs_dot(tiny, tmp_path, cache_dir, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(_fake_dot(tmp_path / "bin")))
    assert main(["graph", f"{tiny}:loss", "--format", "svg"]) == 0
    assert capsys.readouterr().out == "<svg fake -Tsvg>"
    out = tmp_path / "g.svg"
    assert main(["graph", f"{tiny}:loss", "-o", str(out)]) == 0  # format from the suffix
    assert out.read_text() == "<svg fake -Tsvg>"


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_graph_without_graphviz_says_so(tiny, tmp_path, cache_dir, monkeypatch, capsys, fmt):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["graph", f"{tiny}:loss", "--format", fmt, "-o", str(tmp_path / f"g.{fmt}")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"srcgrad: --format {fmt} needs Graphviz's `dot` program")
    assert "--format dot" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / f"g.{fmt}").exists()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_graph_with_real_graphviz(tmp_path, cache_dir, capsys):
    path = tmp_path / "control_mod.py"
    path.write_text(CONTROL)
    svg, png = tmp_path / "g.svg", tmp_path / "g.png"
    assert main(["graph", f"{path}:f", "--mode", "reverse", "-o", str(svg)]) == 0
    assert main(["graph", f"{path}:f", "--mode", "forward", "--format", "png", "-o", str(png)]) == 0
    assert "<svg" in svg.read_text() and "control_mod.py:6" in svg.read_text()
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@needs_script
def test_emit_ir_prints_the_derivatives_ir(tiny, cache_dir):
    r = _run("emit", f"{tiny}:loss", "--wrt", "W", "--ir")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "graph grad_loss(W, x):"
    assert any(line.strip().startswith("h = tanh(") and line.endswith("# tiny_model.py:5")
               for line in lines)
    assert lines[-1].startswith("  return (") and "grad_W" in lines[-1]
    r = _run("emit", f"{tiny}:loss", "--ir", "--mode", "both", "--wrt", "x")
    assert "graph grad_loss(W, x):" in r.stdout and "graph loss_jvp(W, x, x_t):" in r.stdout


def test_derivative_graph_is_the_derivative(tiny):
    """The drawn reverse graph is the function's ops once, then the adjoint, returning
    the value and `grad_W` (whether that gradient is right is the transforms' tests'
    business: this graph comes from the same passes)."""
    from srcgrad.cli import derivative_graph, load_function
    from srcgrad.frontend.parse import parse_function

    func = load_function(f"{tiny}:loss")
    graph = derivative_graph(parse_function(func), (0,), "reverse")
    prims = [op.prim for op in graph.ops]
    assert prims.count("tanh") == 1 and "matmul" in prims
    assert [getattr(o, "name", None) for o in graph.outputs][-1] == "grad_W"


# -- how a CompileError prints ----------------------------------------------------------

BAD = """\
import numpy as np
import srcgrad as sg


def f(x):
    with np.errstate(all="ignore"):
        y = x
    return np.sum(y)


sg.grad(f)(np.ones(3))
"""


def test_uncaught_compile_error_shows_its_hint(tmp_path, cache_dir):
    path = tmp_path / "user_script.py"
    path.write_text(BAD)
    env = dict(os.environ, PYTHONPATH=str(ROOT), SRCGRAD_CACHE_DIR=str(cache_dir))
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                       env=env)
    err = r.stderr.splitlines()
    assert r.returncode == 1
    # Python's syntax-error display of the user's line, the message, then the rewrite.
    assert f'  File "{path}", line 6' in err
    assert err[-2] == "srcgrad.errors.CompileError: a `with` block is not supported in compiled code"
    assert err[-1] == "hint: move the context manager outside the differentiated function"
    assert "During handling of the above exception" not in r.stderr


def test_compile_error_str_and_note():
    import traceback

    err = CompileError("bad thing", filename="m.py", lineno=3, col=4, text="  y = f(x)",
                       hint="write g(x)")
    assert str(err) == "m.py:3:5: bad thing\n    y = f(x)\n  hint: write g(x)"
    assert err.msg == "bad thing" and err.lineno == 3
    shown = "".join(traceback.format_exception(err))
    assert shown.rstrip().endswith("CompileError: bad thing\nhint: write g(x)")
    assert "hint" not in "".join(traceback.format_exception(CompileError("plain")))


def test_compile_error_pickles():
    import pickle

    err = CompileError("bad", filename="m.py", lineno=3, col=4, text="y", hint="h")
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.hint, back.lineno) == (str(err), "h", 3)


def test_hide_internal_frames(tmp_path, cache_dir):
    import traceback

    import srcgrad as sg
    from srcgrad.errors import hide_internal_frames
    from tests.corpus import bad_programs as B

    try:
        sg.grad(B.uses_try)(np.ones(3))
    except CompileError as caught:
        err = caught
    package = str(ROOT / "srcgrad")
    files = [f.filename for f in traceback.extract_tb(err.__traceback__)]
    assert any(f.startswith(package) for f in files)  # the tracer's frames, before
    files = [f.filename for f in traceback.extract_tb(hide_internal_frames(err).__traceback__)]
    assert files == [__file__]  # this test's own frame is all that is left
