"""`srcgrad emit` output reads as hand-written: its header's command writes it again, and
every import and helper in it is used."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def _emit(args) -> str:
    out = subprocess.run([sys.executable, "-m", "srcgrad", "emit", *args], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return out.stdout


@pytest.mark.parametrize("args", [["examples/mlp.py:loss", "--wrt", "W1,b1"],
                                  ["examples/rnn.py:loss", "--mode", "both"],
                                  ["examples/logistic.py:loss", "--no-optimize"]])
def test_the_header_command_reproduces_the_module(args):
    text = _emit(args)
    command = re.search(r"Regenerate with `(srcgrad emit [^`]*)`", text).group(1)
    assert _emit(shlex.split(command)[2:]) == text


@pytest.mark.parametrize("target", ["examples/mlp.py:loss", "examples/rnn.py:loss",
                                    "examples/softmax.py:loss", "examples/elementwise.py:f"])
def test_every_import_and_helper_is_used(target):
    tree = ast.parse(_emit([target]))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert (alias.asname or alias.name) in used, f"unused import {alias.name}"
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith(("grad_", "loss_", "f_")):
            assert node.name in used, f"unused helper {node.name}"
