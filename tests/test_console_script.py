"""The installed `srcgrad` console script (what `pip install` puts on PATH), run as a user
runs it: every command, its exit status and its one-line usage errors."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = shutil.which("srcgrad", path=str(Path(sys.executable).parent)) or shutil.which("srcgrad")

pytestmark = pytest.mark.skipif(SCRIPT is None, reason="the package is not installed "
                                "(pip install -e . puts the srcgrad script on PATH)")


def run(*args, cwd=ROOT):
    return subprocess.run([SCRIPT, *args], cwd=cwd, capture_output=True, text=True)


def test_version_and_help():
    out = run("--version")
    assert out.returncode == 0 and out.stdout.startswith("srcgrad ")
    assert "emit" in run("--help").stdout


def test_emit_writes_a_module_that_runs(tmp_path):
    out = run("emit", "examples/mlp.py:loss", "--wrt", "W1,b1", "-o", str(tmp_path / "g.py"))
    assert out.returncode == 0, out.stderr
    ns: dict = {}
    exec(compile((tmp_path / "g.py").read_text(), "g.py", "exec"), ns)  # noqa: S102
    assert callable(ns["grad_loss"])


def test_check_and_graph():
    out = run("check", "examples/logistic.py:loss", "--args", "(4,), (), (6,4), (6,)")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.rstrip().endswith("OK")
    graph = run("graph", "examples/mlp.py:loss")
    assert graph.returncode == 0 and graph.stdout.startswith("digraph")


def test_usage_errors_exit_2_with_one_line():
    out = run("emit", "examples/mlp.py:nope")
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("srcgrad: ")
