"""What a process imports: `import srcgrad` is cheap, a transform does not import the
eager runtime, and a disk-cache hit does not import the compiler (issue 15, start-up).

Each case runs in a fresh interpreter, since this test process has imported everything.
"""

import json
import os
import subprocess
import sys
import textwrap

RUNTIME = ("srcgrad.autograd.tensor", "srcgrad.autograd.engine")


def _imported_after(script: str, tmp_path, cache_dir) -> dict:
    module = tmp_path / "user_loss.py"
    module.write_text(textwrap.dedent("""
        import numpy as np

        def loss(w, x):
            return np.sum(np.tanh(x @ w) ** 2)
    """))
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        {textwrap.indent(textwrap.dedent(script), "        ").strip()}
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("srcgrad"))))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "SRCGRAD_CACHE_DIR": str(cache_dir)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


GRAD_CALL = """
    import numpy as np
    import srcgrad as sg
    from user_loss import loss
    g = sg.grad(loss)(np.ones((3, 2)), np.ones((4, 3)))
    assert g.shape == (3, 2)
"""


def test_import_srcgrad_imports_neither_compiler_nor_runtime(tmp_path):
    loaded = _imported_after("import srcgrad", tmp_path, tmp_path / "cache")
    assert loaded <= {"srcgrad", "srcgrad._version"}, loaded


def test_a_transform_does_not_import_the_eager_runtime(tmp_path):
    loaded = _imported_after(GRAD_CALL, tmp_path, tmp_path / "cache")
    assert "srcgrad.pipeline.programs" in loaded  # a miss: compiled here
    assert not loaded & set(RUNTIME), loaded & set(RUNTIME)


def test_a_disk_cache_hit_does_not_import_the_compiler(tmp_path):
    cache = tmp_path / "cache"
    _imported_after(GRAD_CALL, tmp_path, cache)  # fills the disk cache
    loaded = _imported_after(GRAD_CALL, tmp_path, cache)
    compiler = {"srcgrad.pipeline.programs", "srcgrad.frontend.trace", "srcgrad.passes.vjp",
                "srcgrad.passes.jvp", "srcgrad.codegen.templates"}
    assert not loaded & compiler, loaded & compiler
    assert not loaded & set(RUNTIME)


def test_runtime_names_still_resolve():
    import srcgrad as sg

    assert sg.Tensor is sg.autograd.Tensor
    assert callable(sg.grad) and callable(sg.no_grad)
    assert "Tensor" in dir(sg)
