"""Every ```python block of the README and of every page of docs/ runs as written.

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
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


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


def _section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_a_product_page():
    text = (ROOT / "README.md").read_text()
    # .ci/run extracts and runs the fenced blocks of "## Quick start": the two commands
    quick = _section(text, "Quick start")
    assert re.findall(r"```\n(.*?)```", quick, re.S) == [
        "pip install -e . && srcgrad emit examples/mlp.py:loss --wrt W1,b1\n",
        "pip install -e '.[test]' && pytest\n"]
    for title in ("30 seconds", "Why srcgrad", "The eager runtime", "Command line", "Limitations",
                  "Documentation"):
        assert f"\n## {title}\n" in text, title
    assert text.count("\n## Limitations\n") == 1
    table = _section(text, "Why srcgrad")
    for peer in ("JAX", "torch.autograd", "HIPS autograd", "Tangent"):
        assert peer in next(line for line in table.splitlines() if line.startswith("|")), peer
    assert "python benchmarks/run.py" in table  # the command that measured the speeds
    # no dated lab notes: measurements with their dates live in docs/benchmarks.md
    assert not re.search(r"20\d\d-\d\d-\d\d", text)


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_links_stay_in_the_repository_and_resolve(path):
    text = path.read_text()
    for target in re.findall(r"\]\(([^)]+)\)", text):
        if re.match(r"https?://", target):
            continue
        assert "shared" not in target.split("/")[:2], target  # the project's own notes
        file = target.split("#", 1)[0]
        if not file:
            continue  # an anchor on the same page
        assert (path.parent / file).resolve().is_file(), f"{path.name}: {target} does not exist"
        assert ROOT in (path.parent / file).resolve().parents, target


def test_the_readmes_30_second_output_is_what_it_prints(tmp_path, monkeypatch, capsys):
    text = (ROOT / "README.md").read_text()
    section = _section(text, "30 seconds")
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "readme.py").write_text(code)
    runpy.run_path(str(tmp_path / "readme.py"), run_name="__main__")
    printed = capsys.readouterr().out
    assert printed[printed.index("def grad_loss"):].strip() == shown.strip()


def test_the_docs_build_as_a_site_with_every_page_in_nav(tmp_path):
    config = (ROOT / "mkdocs.yml").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f": {page.name}\n" in config, f"{page.name} is not in mkdocs.yml's nav"
    assert "docs = [\"mkdocs" in (ROOT / "pyproject.toml").read_text()  # the `docs` extra
    if (ROOT / ".ci" / "run").exists():  # (not in an sdist)
        assert "mkdocs build --strict" in (ROOT / ".ci" / "run").read_text()
    pytest.importorskip("mkdocs")  # (the `docs` extra; .ci/run installs it)
    import subprocess

    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "benchmarks" / "index.html").is_file()
