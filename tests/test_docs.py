"""Every ```python block of the user guide (and of the README) runs as written.

Each block is a whole program: it is written to a file of its own (srcgrad reads the
source of what it differentiates, so a block cannot be exec'd from a string) and run
as `__main__`, with the cache in a temporary directory. A block's own `assert`s are
what it checks; a block that raises fails here.
"""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "docs" / "guide.md", ROOT / "README.md"]


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block in a Markdown file."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


CASES = [pytest.param(path, code, id=f"{path.name}:{line}")
         for path in DOCS for line, code in python_blocks(path)]


def test_the_guide_has_runnable_snippets():
    guide = python_blocks(ROOT / "docs" / "guide.md")
    assert len(guide) >= 6
    sections = (ROOT / "docs" / "guide.md").read_text().split("\n## ")
    for title in ("Transforms", "What compiles", "The command line", "Custom Functions",
                  "Backends", "The cache", "Troubleshooting compile errors"):
        assert any(s.startswith(title) for s in sections), title


@pytest.mark.parametrize("path,code", CASES)
def test_snippet_runs(path, code, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "argv", ["snippet"])
    monkeypatch.chdir(tmp_path)
    script = tmp_path / f"snippet_{path.stem}.py"
    script.write_text(code, encoding="utf-8")
    runpy.run_path(str(script), run_name="__main__")
