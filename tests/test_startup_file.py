"""Note [The start-up file] (srcgrad.startup): the code of srcgrad's modules read from one
file, only while each module's source is the one it was compiled from.

Each case runs fresh interpreters on a copy of the package (as a wheel installs it), with
bytecode written under a private PYTHONPYCACHEPREFIX.
"""

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from srcgrad.startup import TRANSFORM_HIT

ROOT = Path(__file__).resolve().parent.parent

REPORT = """
import json, sys, inspect
import numpy
import srcgrad
preloaded = sorted(n for n in sys.modules if n.startswith("srcgrad."))
from srcgrad import api, contexts
stored = sorted(n for n, m in sys.modules.items()
                if n.startswith("srcgrad.") and type(m.__spec__.loader).__name__ == "_StoredLoader")
print(json.dumps({"stored": stored, "mark": getattr(contexts, "MARK", None), "preloaded": preloaded,
                  "source": inspect.getsource(api.grad).splitlines()[0],
                  "file": api.__file__}))
"""


def _copy(tmp_path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(ROOT / "srcgrad", site / "srcgrad", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "templates", site / "srcgrad" / "templates",
                    ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    return site


def _run(site, tmp_path, code=REPORT, write=True) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"), SRCGRAD_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(site))
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _startup_file(tmp_path) -> Path:
    found = list((tmp_path / "pyc").rglob("srcgrad-startup.*"))
    return found[0] if found else None


def test_a_second_process_reads_the_modules_from_the_file(tmp_path):
    site = _copy(tmp_path)
    first = _run(site, tmp_path)
    assert first["stored"] == []  # nothing stored yet: imported as usual, the file written at exit
    assert _startup_file(tmp_path) is not None
    second = _run(site, tmp_path)
    assert {"srcgrad.api", "srcgrad.contexts", "srcgrad.pipeline.modules"} <= set(second["stored"])
    # a transform's hit path, run at `import srcgrad` (startup.TRANSFORM_HIT)
    assert set(second["preloaded"]) == set(TRANSFORM_HIT)
    assert first["preloaded"] == ["srcgrad._version"]
    # ordinary source modules: their file, their source
    assert second["file"] == str(site / "srcgrad" / "api.py")
    assert second["source"].startswith("def grad(")


def test_an_edited_module_is_imported_from_its_source_then_stored_again(tmp_path):
    site = _copy(tmp_path)
    _run(site, tmp_path), _run(site, tmp_path)
    contexts = site / "srcgrad" / "contexts.py"
    contexts.write_text(contexts.read_text() + "\nMARK = 'edited'\n")
    edited = _run(site, tmp_path)
    assert edited["mark"] == "edited"
    assert "srcgrad.contexts" not in edited["stored"] and "srcgrad.errors" in edited["stored"]
    # the preload ends at the changed module; what follows it imports as usual
    assert set(edited["preloaded"]) == set(TRANSFORM_HIT[:TRANSFORM_HIT.index("srcgrad.contexts")])
    again = _run(site, tmp_path)  # the file was written again at the last exit
    assert again["mark"] == "edited" and "srcgrad.contexts" in again["stored"]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_file_is_not_read(tmp_path, damage):
    site = _copy(tmp_path)
    _run(site, tmp_path)
    path = _startup_file(tmp_path)
    data = path.read_bytes()
    path.write_bytes({"truncated": data[:len(data) // 2], "garbage": b"x" * 100, "empty": b""}[damage])
    out = _run(site, tmp_path, write=False)
    assert out["stored"] == [] or damage == "truncated"  # (a truncated file's index may still read)
    assert out["source"].startswith("def grad(")


def test_a_truncated_file_serves_no_module_it_lost(tmp_path):
    """The index reads, a module's code is cut off: that module imports from its source."""
    site = _copy(tmp_path)
    _run(site, tmp_path)
    path = _startup_file(tmp_path)
    path.write_bytes(path.read_bytes()[:-10])
    code = REPORT + "\nfrom srcgrad import api\nassert callable(api.grad)\n"
    out = _run(site, tmp_path, code=code, write=False)
    assert out["source"].startswith("def grad(")


def test_nothing_is_written_where_python_writes_no_bytecode(tmp_path):
    site = _copy(tmp_path)
    _run(site, tmp_path, write=False)
    assert _startup_file(tmp_path) is None


def test_a_gradient_from_stored_modules_is_right(tmp_path):
    site = _copy(tmp_path)
    (tmp_path / "user_f.py").write_text("import numpy as np\n\ndef f(x):\n    return np.sum(np.sin(x) * x)\n")
    code = """
        import json, sys
        import numpy as np
        import srcgrad as sg
        from user_f import f

        x = np.linspace(0.1, 1.0, 5)
        g = sg.grad(f)(x)
        assert np.allclose(g, np.cos(x) * x + np.sin(x)), g
        loader = type(sys.modules["srcgrad.api"].__spec__.loader).__name__
        print(json.dumps({"loader": loader}))
    """
    assert _run(site, tmp_path, code=code)["loader"] != "_StoredLoader"
    assert _run(site, tmp_path, code=code)["loader"] == "_StoredLoader"


def test_the_preloaded_modules_are_a_hits_each_after_the_srcgrad_modules_it_imports(tmp_path):
    """startup.TRANSFORM_HIT is what a disk-cache hit imports (no start-up file: as usual),
    in an order where each module's own top-level srcgrad imports come before it."""
    site = _copy(tmp_path)
    (tmp_path / "user_g.py").write_text("import numpy as np\n\ndef g(x):\n    return np.sum(np.tanh(x))\n")
    code = """
        import json, sys
        import numpy as np
        import srcgrad as sg
        from user_g import g
        sg.grad(g)(np.ones(3))
        print(json.dumps(sorted(n for n in sys.modules if n.startswith("srcgrad."))))
    """
    _run(site, tmp_path, code=code, write=False)  # a miss: the module compiled, then a hit
    hit = _run(site, tmp_path, code=code, write=False)  # (no start-up file: imported as usual)
    assert set(hit) == set(TRANSFORM_HIT)
    for position, name in enumerate(TRANSFORM_HIT):
        for imported in _top_level_srcgrad_imports(name):
            assert imported not in TRANSFORM_HIT or TRANSFORM_HIT.index(imported) < position, (name, imported)


def _top_level_srcgrad_imports(name: str) -> set:
    """The srcgrad modules `name` imports when it runs (not inside its functions)."""
    path = ROOT / (name.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / name.replace(".", "/") / "__init__.py"
    tree = ast.parse(path.read_text())
    found = set()
    for node in tree.body:
        for inner in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else ():
            if isinstance(inner, ast.Import):
                found |= {a.name for a in inner.names}
            elif isinstance(inner, ast.ImportFrom) and inner.module:
                found |= {inner.module} | {f"{inner.module}.{a.name}" for a in inner.names}
    return {m for m in found if m in TRANSFORM_HIT}


def test_without_numpy_imported_nothing_is_preloaded(tmp_path):
    """The hit path imports NumPy; `import srcgrad` before NumPy does not import it."""
    site = _copy(tmp_path)
    _run(site, tmp_path)
    code = """
        import json, sys
        import srcgrad
        print(json.dumps(sorted(n for n in sys.modules if n.startswith(("srcgrad.", "numpy")))))
    """
    assert _run(site, tmp_path, code=code) == ["srcgrad._version"]


def test_a_compiles_modules_are_read_from_the_file(tmp_path):
    """The compiler's modules (not preloaded at `import srcgrad`) are served from the file
    too, on a miss in a later process."""
    site = _copy(tmp_path)
    (tmp_path / "user_h.py").write_text("import numpy as np\n\ndef h(x):\n    return np.sum(np.tanh(x))\n")
    code = """
        import json, sys
        import numpy as np
        import srcgrad as sg
        from user_h import h
        sg.grad(h)(np.ones(2))
        compiler = sorted(n for n in sys.modules if n.startswith("srcgrad.frontend"))
        loaders = {n: type(sys.modules[n].__spec__.loader).__name__ for n in compiler}
        stored = sorted(n for n in compiler if loaders[n] == "_StoredLoader")
        print(json.dumps({"compiler": compiler, "stored": stored}))
    """
    first = _run(site, tmp_path, code=code)
    assert first["compiler"] and not first["stored"]  # a miss; nothing stored yet
    (tmp_path / "cache").rename(tmp_path / "cache-old")  # another miss: the compiler again
    second = _run(site, tmp_path, code=code)
    assert second["stored"] == second["compiler"]


def test_without_os_pread_the_file_is_read_by_seeking(tmp_path):
    """Where the OS has no pread (Windows), a module's code is read with a seek and a read."""
    site = _copy(tmp_path)
    _run(site, tmp_path)
    code = "import os\ndel os.pread\n" + textwrap.dedent(REPORT)
    out = _run(site, tmp_path, code=code, write=False)
    assert {"srcgrad.api", "srcgrad.contexts", "srcgrad.pipeline.modules"} <= set(out["stored"])
    assert out["source"].startswith("def grad(")
