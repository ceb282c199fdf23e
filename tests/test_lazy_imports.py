"""A compile imports the frontend and passes it uses (issue 15, start-up): straight-line
code leaves out the modules that serve loops, in-place writes, containers, custom
Functions, records and transforms in compiled code, which are imported where a statement
first needs them (Note [Mixins imported on demand] in srcgrad.frontend.scope).

Each case runs in a fresh interpreter with an empty disk cache, since this test process
has imported everything; each checks the gradient against central differences too.
"""

import json
import os
import subprocess
import sys
import textwrap

# Modules a straight-line compile (matmuls, tanh, a sum) does not need.
LAZY = (
    "srcgrad.frontend.loops", "srcgrad.frontend.unrolling", "srcgrad.frontend.iteration",
    "srcgrad.frontend.results", "srcgrad.frontend.containers", "srcgrad.frontend.records",
    "srcgrad.frontend.transforms", "srcgrad.frontend.function", "srcgrad.frontend.aliases",
    "srcgrad.frontend.inplace", "srcgrad.frontend.layout", "srcgrad.frontend.layout_facts",
    "srcgrad.frontend.layout_models", "srcgrad.frontend.versions",
    "srcgrad.passes.vjp_control", "srcgrad.passes.hooks", "srcgrad.passes.saved",
    "srcgrad.codegen.spellings",  # (another namespace's renders: Note [Spellings])
)
LOOPS = {"srcgrad.frontend.loops", "srcgrad.frontend.unrolling", "srcgrad.frontend.iteration"}
WRITES = {"srcgrad.frontend.inplace", "srcgrad.frontend.layout", "srcgrad.frontend.aliases"}

CHECK = """
    import numpy as np
    import srcgrad as sg
    from user_fns import f

    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    g = sg.grad(f)(w, x)
    num = np.zeros_like(w)
    for i in np.ndindex(*w.shape):
        e = np.zeros_like(w)
        e[i] = 1e-6
        num[i] = (f(w + e, x) - f(w - e, x)) / 2e-6
    assert np.allclose(g, num, rtol=1e-5, atol=1e-7), (g, num)
"""


def _modules_after(source: str, tmp_path) -> set:
    """srcgrad's modules in sys.modules after `sg.grad(f)(w, x)` of `f` in `source`,
    compiled in a fresh process (the gradient checked against central differences)."""
    (tmp_path / "user_fns.py").write_text("import numpy as np\n\n" + textwrap.dedent(source))
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        {textwrap.indent(textwrap.dedent(CHECK), "        ").strip()}
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("srcgrad"))))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "SRCGRAD_CACHE_DIR": str(tmp_path / "cache")},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_a_straight_line_compile_imports_none_of_the_constructs_it_does_not_use(tmp_path):
    loaded = _modules_after("""
        def f(w, x):
            h = np.tanh(x @ w)
            return np.mean((h.T @ h) ** 2)
    """, tmp_path)
    assert "srcgrad.pipeline.programs" in loaded  # (compiled here: a miss)
    assert not loaded & set(LAZY), sorted(loaded & set(LAZY))


def test_a_loop_imports_the_loop_statements(tmp_path):
    loaded = _modules_after("""
        def f(w, x):
            s = 0.0
            for row in x:
                s = s + np.sum(np.tanh(row @ w))
            return s
    """, tmp_path)
    assert LOOPS <= loaded, sorted(LOOPS - loaded)


def test_an_in_place_write_imports_the_writes(tmp_path):
    loaded = _modules_after("""
        def f(w, x):
            h = x @ w
            h[0] *= 3.0
            v = h[1:]
            v += np.tanh(h[1:])
            return np.sum(h ** 2)
    """, tmp_path)
    assert WRITES <= loaded, sorted(WRITES - loaded)
    assert not loaded & LOOPS, sorted(loaded & LOOPS)
