"""What a process imports: `import srcgrad` is cheap, a transform does not import the
eager runtime, and a disk-cache hit does not import the compiler (issue 15, start-up).

Each case runs in a fresh interpreter, since this test process has imported everything.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np

RUNTIME = ("srcgrad.autograd.tensor", "srcgrad.autograd.engine")


def _imported_after(script: str, tmp_path, cache_dir, prefixes=("srcgrad",), extra="") -> dict:
    module = tmp_path / "user_loss.py"
    module.write_text(textwrap.dedent("""
        import numpy as np

        def loss(w, x):
            return np.sum(np.tanh(x @ w) ** 2)
    """) + textwrap.dedent(extra))
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        {textwrap.indent(textwrap.dedent(script), "        ").strip()}
        print(json.dumps(sorted(m for m in sys.modules if m.startswith({tuple(prefixes)!r}))))
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
    from srcgrad.startup import TRANSFORM_HIT  # (run from the start-up file where there is one)

    loaded = _imported_after("import srcgrad", tmp_path, tmp_path / "cache")
    assert loaded <= {"srcgrad", "srcgrad.startup", *TRANSFORM_HIT}, loaded


def test_a_transform_does_not_import_the_eager_runtime(tmp_path):
    loaded = _imported_after(GRAD_CALL, tmp_path, tmp_path / "cache")
    assert "srcgrad.pipeline.programs" in loaded  # a miss: compiled here
    assert not loaded & set(RUNTIME), loaded & set(RUNTIME)


def test_a_compile_renders_the_templates_without_jinja2(tmp_path):
    """Note [Templates without jinja2] (srcgrad.codegen.templating): a miss renders
    templates/*.j2 with the subset renderer, so a fresh process's first compile imports
    neither jinja2 nor importlib.resources."""
    loaded = _imported_after(GRAD_CALL, tmp_path, tmp_path / "cache",
                             ("srcgrad", "jinja2", "importlib.resources"))
    assert "srcgrad.codegen.emit" in loaded  # a miss: rendered here
    assert not loaded & {"jinja2", "importlib.resources"}, loaded


def test_a_compile_does_not_import_hashlib(tmp_path):
    """srcgrad.digest: cache keys, cache files and fingerprints hash with Python's own
    SHA-256, so a process that has not imported hashlib (OpenSSL's load, ~3 ms) compiles
    without it, a miss included."""
    if not (importlib.util.find_spec("_sha2") or importlib.util.find_spec("_sha256")):
        return  # (a Python without its own SHA-256: hashlib is the only one)
    loaded = _imported_after(GRAD_CALL, tmp_path, tmp_path / "cache", ("srcgrad", "hashlib"))
    assert "srcgrad.pipeline.programs" in loaded  # a miss: compiled here
    assert "hashlib" not in loaded


def test_a_disk_cache_hit_does_not_import_the_compiler(tmp_path):
    cache = tmp_path / "cache"
    _imported_after(GRAD_CALL, tmp_path, cache)  # fills the disk cache
    loaded = _imported_after(GRAD_CALL, tmp_path, cache)
    compiler = {"srcgrad.pipeline.programs", "srcgrad.frontend.trace", "srcgrad.passes.vjp",
                "srcgrad.passes.jvp", "srcgrad.codegen.templates"}
    assert not loaded & compiler, loaded & compiler
    assert not loaded & set(RUNTIME)


def test_a_disk_cache_hit_imports_neither_the_rule_table_nor_jinja2_nor_gast(tmp_path):
    """Issue 15: a hit imports only the transforms, the cache key (from the function's code
    object: Note [Quick keys]), the cache and the loader; the rule helpers only when the
    module reads one (Note [Globals a module reads]), and no stdlib module NumPy has not."""
    cache = tmp_path / "cache"
    heavy = ("srcgrad", "jinja2", "gast", "array_api_compat", "hashlib", "threading", "dataclasses",
             "platformdirs")
    for _ in range(3):  # a srcgrad file edited between the two runs makes the second one a miss
        _imported_after(GRAD_CALL, tmp_path, cache)  # fills the disk cache
        loaded = _imported_after(GRAD_CALL, tmp_path, cache, heavy)
        if "srcgrad.pipeline.programs" not in loaded:
            break
    assert "srcgrad.pipeline.programs" not in loaded  # a hit
    assert not loaded & (HEAVY | PLAIN_HIT), loaded & (HEAVY | PLAIN_HIT)
    assert not {m for m in loaded if m.startswith("srcgrad.passes")}, loaded
    if importlib.util.find_spec("_sha2") or importlib.util.find_spec("_sha256"):
        assert "hashlib" not in loaded  # OpenSSL's load: Python's own SHA-256 (codegen/cache.py)


# What a disk-cache hit of a NumPy program must not import (issue 15): the rule table,
# the renderer and its templates, the parser, the IR's dataclasses, any pass (ProbeFailed
# lives in srcgrad.errors), and array_api_compat (NumPy arrays need no compat layer).
HEAVY = frozenset({"srcgrad.rules.table", "srcgrad.rules.core", "jinja2", "gast",
                   "srcgrad.codegen.emit", "srcgrad.frontend.parse", "srcgrad.frontend.trace",
                   "srcgrad.frontend.classes", "srcgrad.ir.core", "srcgrad.passes",
                   "srcgrad.passes.shapes", "srcgrad.pipeline.programs", "array_api_compat"})

# ... nor, for sg.grad of arrays whose module reads no helper (GRAD_CALL's), the frontend
# (the transforms are registered lazily: srcgrad.frontend.transforms._registered), the IR's
# trees (arrays are no containers), the helpers and codegen.names (which imports them), and
# threading / dataclasses (NumPy imports neither; _thread's lock and local are the same).
PLAIN_HIT = frozenset({"srcgrad.frontend", "srcgrad.frontend.transforms", "srcgrad.frontend.scope",
                       "srcgrad.ir", "srcgrad.ir.tree", "srcgrad.rules", "srcgrad.rules.helpers",
                       "srcgrad.codegen.names", "threading", "dataclasses",
                       # nor the miss's other layers: the parsed key, the graphs, the renderer's
                       # parts, the templates' package, the jacobians, platformdirs (the cache
                       # directory comes from $SRCGRAD_CACHE_DIR) and the eager runtime's kernels
                       "srcgrad.frontend.resolve", "srcgrad.pipeline.graphs", "srcgrad.codegen.templating",
                       "srcgrad.codegen.spellings", "srcgrad.templates", "srcgrad.jacobians",
                       "platformdirs", "srcgrad.kernels", "srcgrad.autograd"})

TRANSFORMS_CALL = """
    import numpy as np
    import srcgrad as sg
    from user_loss import loss, pair, named
    w, x = np.linspace(-0.5, 0.5, 6).reshape(3, 2), np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    t = np.tanh(x @ w)
    expected = x.T @ (2.0 * t * (1.0 - t * t))  # d/dw sum(tanh(x @ w) ** 2), by hand
    out, vjp_fn = sg.vjp(loss, w, x)
    assert np.allclose(out, np.sum(t ** 2)) and np.allclose(vjp_fn(1.0)[0], expected)
    value, g = sg.value_and_grad(loss)(w, x)
    assert np.allclose(value, np.sum(t ** 2)) and np.allclose(g, expected)
    (h, h2), (dh, dh2) = sg.jvp(pair, (w, x), (w, np.zeros_like(x)))  # a tuple result
    assert np.allclose(h2, 2.0 * t) and np.allclose(dh, (1.0 - t * t) * (x @ w))
    assert np.allclose(dh2, 2.0 * dh)
    out, vjp_fn = sg.vjp(named, w)  # a dict result
    assert sorted(out) == ["a", "b"] and np.allclose(out["a"], 2.0 * w)
    ga, = vjp_fn({"a": np.ones_like(w), "b": 1.0})
    assert np.allclose(ga, 3.0)
"""

LOSSES = """
    def pair(w, x):
        h = np.tanh(x @ w)
        return h, h * 2.0

    def named(w):
        return {"a": w * 2.0, "b": np.sum(w)}
"""


def test_vjp_jvp_and_value_and_grad_hits_import_no_compiler(tmp_path):
    """sg.vjp's and sg.jvp's output structure is stored in the module (Note [The out tree in
    the module] in srcgrad.codegen.loader): their hits import no compiler either."""
    cache, heavy = tmp_path / "cache", ("srcgrad", "jinja2", "gast", "array_api_compat")
    for _ in range(3):  # a srcgrad file edited between the two runs makes the second one a miss
        _imported_after(TRANSFORMS_CALL, tmp_path, cache, extra=LOSSES)  # fills the disk cache
        loaded = _imported_after(TRANSFORMS_CALL, tmp_path, cache, heavy, extra=LOSSES)
        if "srcgrad.pipeline.programs" not in loaded:
            break
    assert not loaded & HEAVY, loaded & HEAVY


def test_the_out_tree_line_reads_back():
    from srcgrad.codegen.loader import stored_out_tree, with_out_tree

    tree = ("tuple", (("leaf",), ("dict", ("a", "b"), (("leaf",), ("leaf",)))))
    text = with_out_tree("def f(x):\n    return x\n", tree)
    assert stored_out_tree(text) == tree
    assert stored_out_tree("def f(x):\n    return x\n") is None  # an older module: traced

    class Point:  # a record class has no literal form: no line, the tree is traced
        pass

    assert with_out_tree("x = 1\n", ("record", Point, (), (), ())) == "x = 1\n"


def _user_module(directory, name, body, module_name=None):
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(module_name or name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


QUICK = """
    import numpy as np

    K = {k}
    W = np.arange(3.0) * {w}

    def helper(x):
        return x * {scale}

    def f(x, c={c}):
        return np.sum(np.tanh(helper(x)) * K * W + hm.SHIFT * c)
"""


def _quick_key_of(tmp_path, tag, k=2.0, w=1.0, scale=3.0, c=1.0, shift=0.5):
    """The quick key of `f` in a module written from QUICK into its own directory (the
    same file name each time: it is part of the key, as messages name it)."""
    from srcgrad.pipeline import keys

    helpers = _user_module(tmp_path / tag, "quick_helpers", f"SHIFT = {shift}\n")
    mod = _user_module(tmp_path / tag, "quick_mod", QUICK.format(k=k, w=w, scale=scale, c=c))
    mod.hm = helpers
    key = keys.quick_key(mod.f, ("grad", (0,), True, False, None))
    assert key is not None
    return key[0]


def test_the_quick_key_changes_with_everything_the_function_reads(tmp_path):
    base = _quick_key_of(tmp_path, "base")
    assert _quick_key_of(tmp_path, "same") == base
    changed = [_quick_key_of(tmp_path, "k", k=3.0),  # a global constant
               _quick_key_of(tmp_path, "w", w=2.0),  # a global array's contents
               _quick_key_of(tmp_path, "scale", scale=4.0),  # a helper's source
               _quick_key_of(tmp_path, "c", c=2.0),  # a default
               _quick_key_of(tmp_path, "shift", shift=1.5)]  # a user module's member
    assert len({base, *changed}) == 6


def test_the_quick_key_is_none_where_it_cannot_see_everything():
    from srcgrad.pipeline import keys

    options = ("grad", (0,), True, False, None)
    assert keys.quick_key(lambda x: np.sum(x), options) is None  # named by its assignment

    class Opaque:
        scale = 2.0

    obj = Opaque()

    def f(x):
        return np.sum(x * obj.scale)

    assert keys.quick_key(f, options) is None  # an object: only the parsed fingerprint decides


def test_a_rebound_global_recompiles_on_the_quick_path(tmp_path, monkeypatch):
    """The quick key's bindings guard the variant as the parsed ones do (Note [Bindings])."""
    import srcgrad as sg

    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))
    mod = _user_module(tmp_path, "rebound", """
        import numpy as np
        K = 2.0
        def f(x):
            return np.sum(x * x) * K
    """)
    from srcgrad.pipeline import modules

    x = np.arange(3.0)
    assert np.allclose(sg.grad(mod.f)(x), 4.0 * x)  # compiled, and written to the disk cache
    modules._MEMORY.clear()
    g = sg.grad(mod.f)
    assert np.allclose(g(x), 4.0 * x)  # from the disk
    assert g.__srcgrad__._fs is None  # not parsed: the key and bindings came from the code
    mod.K = 5.0
    assert np.allclose(g(x), 10.0 * x)


def test_the_probe_frees_each_value_after_its_last_use():
    """Issue 15: the probe runs the unoptimised program on the first call's arrays; a
    chain of large temporaries must not all be alive at once (Note [The probe's memory])."""
    from srcgrad.frontend.parse import parse_function
    from srcgrad.passes.shapes import probe
    from srcgrad.pipeline import programs

    def chain(x):
        a = x * 2.0
        b = np.sin(a)
        c = b + 1.0
        d = np.exp(c)
        e = d * 3.0
        dead = e * e  # noqa: F841 (nothing reads it)
        h = np.tanh(e)
        return np.sum(h)

    graph, _ = programs.trace(parse_function(chain))
    x = np.ones(2**20)  # 8 MB
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        found = probe(graph.ops, graph.inputs, (x,))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert found.shapes  # it ran
    assert peak < 3 * x.nbytes, f"{peak / x.nbytes:.1f} arrays alive at once"


def test_runtime_names_still_resolve():
    import srcgrad as sg

    assert sg.Tensor is sg.autograd.Tensor
    assert callable(sg.grad) and callable(sg.no_grad)
    assert "Tensor" in dir(sg)


def test_an_installed_copy_is_fingerprinted_by_its_install_not_by_a_walk(tmp_path):
    """Issue 15: the compiler fingerprint of a site-packages copy is computed once per
    installation (its version and the stamps an install writes), not by a walk over its
    files in every process; a reinstall (new stamps) changes it."""
    import shutil

    import srcgrad

    site = tmp_path / "lib" / "site-packages"
    shutil.copytree(os.path.dirname(srcgrad.__file__), site / "srcgrad",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = ("from srcgrad.pipeline import keys; import srcgrad; "
            "print(keys.compiler_fingerprint(), srcgrad.__file__)")

    def fingerprint():
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(site)})
        assert proc.returncode == 0, proc.stderr
        fp, where = proc.stdout.split()
        assert where.startswith(str(site))
        return fp

    first = fingerprint()
    (site / "srcgrad" / "passes" / "dce.py").write_text("# edited in place: not walked, not seen\n")
    assert fingerprint() == first
    os.utime(site / "srcgrad" / "_version.py", ns=(1, 1))  # a reinstall writes every file anew
    assert fingerprint() != first


def test_entry_names_are_spelled_as_codegen_names_spells_them():
    """srcgrad.pipeline.modules spells the generated functions' names itself (codegen.names
    imports the rule helpers, which a disk-cache hit does without): the two must agree."""
    from srcgrad.codegen import names
    from srcgrad.pipeline import modules

    class Kind:
        fn_name = "loss"

    for kind, expected in (("grad", (names.grad_fn_name("loss"),)),
                           ("value_and_grad", (names.value_and_grad_fn_name("loss"),)),
                           ("vjp", (names.forward_fn_name("loss"), names.backward_fn_name("loss")))):
        Kind.kind = kind
        assert modules.entry_names(Kind) == expected


def test_free_globals_are_the_names_the_code_reads_as_globals():
    """Note [Globals a module reads]: loads of globals in functions, nested code and the
    module body, less builtins and what the module defines; attributes are not globals."""
    from srcgrad.codegen.loader import free_globals

    text = textwrap.dedent("""
        def grad_f(x, s):
            t = [unbroadcast(v, s) for v in (x, x)]
            return xp.sum(len(t) * _c0 * helper(x).T, axis=0)

        def helper(x):
            return sum_to(x, (1,)) if math.pi else x.sum_to
    """)
    found = free_globals(compile(text, "<test>", "exec"))
    if found is None:  # a Python whose bytecode the scan does not know: everything is bound
        return
    assert found == {"unbroadcast", "xp", "_c0", "sum_to", "math"}, found
    assert free_globals(compile("def g(x):\n    return xp.tanh(x).T\n", "<t>", "exec")) == {"xp"}


def test_a_module_reading_no_helper_is_bound_without_them():
    from srcgrad import backend, rules

    plain = backend.module_globals(backend.NUMPY, frozenset({"xp"}))
    assert plain == {"xp": np, "math": __import__("math")}
    full = backend.module_globals(backend.NUMPY, frozenset({"xp", "unbroadcast"}))
    assert full["unbroadcast"] is rules.FORMULA_GLOBALS["unbroadcast"]
    assert backend.module_globals(backend.NUMPY).keys() == full.keys()  # reads unknown: all


def test_a_disk_cache_hit_that_reads_a_helper_runs_in_a_fresh_process(tmp_path):
    """A module whose code calls a rule helper (np.diff's gradient: diff_bar) is bound to the
    helpers when loaded from the disk (Note [Globals a module reads]); checked by hand."""
    script = """
        import numpy as np
        import srcgrad as sg
        from user_loss import squared_steps
        x = np.array([0.5, -1.0, 2.0, 0.25, 1.5])
        steps = np.diff(x)
        expected = np.zeros_like(x)
        expected[:-1] -= 2.0 * steps
        expected[1:] += 2.0 * steps
        assert np.allclose(sg.grad(squared_steps)(x), expected)
    """
    extra = """
        def squared_steps(x):
            return np.sum(np.diff(x) ** 2)
    """
    cache = tmp_path / "cache"
    for _ in range(3):  # a srcgrad file edited between the two runs makes the second one a miss
        _imported_after(script, tmp_path, cache, extra=extra)
        loaded = _imported_after(script, tmp_path, cache, extra=extra)
        if "srcgrad.pipeline.programs" not in loaded:
            break
    assert "srcgrad.pipeline.programs" not in loaded  # a hit
    assert "srcgrad.rules.helpers" in loaded  # bound, since the module reads diff_bar


def test_a_hit_loads_the_stored_code_and_ignores_a_damaged_code_file(tmp_path, monkeypatch):
    """Note [Cache file format]: the code object is stored beside the text; a hit does not
    compile it, and a code file that fails its checks is compiled again and rewritten."""
    import srcgrad as sg
    from srcgrad.codegen import loader
    from srcgrad.pipeline import modules

    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))
    mod = _user_module(tmp_path, "coded", """
        import numpy as np
        def f(x):
            return np.sum(np.sin(x) * x)
    """)
    x = np.linspace(0.0, 1.0, 5)
    expected = np.sin(x) + x * np.cos(x)
    assert np.allclose(sg.grad(mod.f)(x), expected)  # a miss: text and code written
    codes = [p for p in (tmp_path / "cache").rglob("*.pyc") if not p.name.startswith("dispatch-")]
    assert len(codes) == 1

    def no_compile(*args):
        raise AssertionError("compiled on a hit")

    modules._MEMORY.clear()
    with monkeypatch.context() as m:
        m.setattr(loader, "compile_module", no_compile)
        assert np.allclose(sg.grad(mod.f)(x), expected)
    codes[0].write_bytes(codes[0].read_bytes()[:-7] + b"garbage")
    modules._MEMORY.clear()
    assert np.allclose(sg.grad(mod.f)(x), expected)  # compiled from the text
    modules._MEMORY.clear()
    with monkeypatch.context() as m:
        m.setattr(loader, "compile_module", no_compile)
        assert np.allclose(sg.grad(mod.f)(x), expected)  # the rewritten code file


def test_source_lines_are_linecaches_lines(tmp_path):
    """keys.source_lines (a quick key's text, without tokenize where it may) reads the same
    lines as linecache.getlines: UTF-8, CRLF and CR line ends, no final newline, a BOM,
    a coding cookie (latin-1 bytes), non-ASCII text; and enters them in linecache so an
    edit is seen."""
    import linecache

    from srcgrad.pipeline.keys import source_lines

    cases = {
        "plain": b"def f(x):\n    return x\n",
        "crlf": b"def f(x):\r\n    return x\r\n\r\n",
        "cr": b"def f(x):\r    return x\r",
        "no_newline": b"def f(x):\n    return x",
        "bom": b"\xef\xbb\xbfdef f(x):\n    return x\n",
        "cookie": b"# -*- coding: latin-1 -*-\ndef f(x):\n    return x  # \xe9\n",
        "utf8": "def f(x):\n    return x  # \u00e9\u4e2d\n".encode(),
        "not_utf8": b"def f(x):\n    return x  # \xff\n",
        "empty": b"",
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.py"
        path.write_bytes(data)
        filename = str(path)
        linecache.checkcache(filename)
        expected = linecache.getlines(filename)
        linecache.cache.pop(filename, None)
        assert source_lines(filename) == expected, name
        assert linecache.getlines(filename) == expected, name  # (entered, or not, as linecache)
    path = tmp_path / "edited.py"
    path.write_bytes(b"def f(x):\n    return x\n")
    assert source_lines(str(path)) == ["def f(x):\n", "    return x\n"]
    path.write_bytes(b"def f(x):\n    return 2 * x  # longer\n")
    linecache.checkcache(str(path))  # (as the quick key's linecache entry is checked)
    assert source_lines(str(path))[1] == "    return 2 * x  # longer\n"


def test_a_keys_options_text_is_their_repr():
    """keys._text prints a variant's options as repr does (builtin dtypes' reprs kept)."""
    from srcgrad.pipeline.keys import _text

    f8, big = np.dtype("f8"), np.dtype(">f8")
    options = ("grad", (0, 1), True, False, (((3, 4), f8, np.ndarray, True), ((), f8, np.float64),
                                            float, ((2,), big, np.ndarray), ((1,), np.dtype("i4"),
                                            np.ndarray, False)),
               ("allow_mutation_on_saved_tensors",), ("trees", (("leaf",),), ()), [1, (2,)], None,
               (), ("x",), np.dtype([("a", "f8")]), np.dtype("U3"))
    assert _text(options) == repr(options)
    assert _text(options) == repr(options)  # the kept reprs


def test_rule_is_as_a_frozen_dataclass():
    """rules.core.Rule is written out (its decorator cost ~6 ms of a compile's start-up):
    constructor, defaults, equality, hash, repr and FrozenInstanceError as
    @dataclass(frozen=True) with the same fields makes them."""
    import dataclasses
    import inspect

    from srcgrad.rules.core import _FIELDS, Rule

    fields = [(n, object) if n in ("name", "signature", "render") else
              (n, object, dataclasses.field(default_factory=dict)) if n in ("vjp", "jvp") else
              (n, object, dataclasses.field(default=inspect.signature(Rule).parameters[n].default))
              for n in _FIELDS]
    Made = dataclasses.make_dataclass("Rule", fields, frozen=True)
    kwargs = [dict(), dict(vjp={"x": "g"}, targets=("numpy.tanh",), elementwise=True, doc="d"),
              dict(nout=lambda s: 2, method="m", method_varargs=True, attribute="T", vjp=None)]
    for kw in kwargs:
        ours, made = Rule("r", "x", "xp.r(x)", **kw), Made("r", "x", "xp.r(x)", **kw)
        assert repr(ours) == repr(made)
        assert ours == Rule("r", "x", "xp.r(x)", **kw) and ours != Rule("s", "x", "xp.r(x)", **kw)
        assert ours.__eq__(made) is NotImplemented
        assert [getattr(ours, n) for n in _FIELDS] == [getattr(made, n) for n in _FIELDS]
        for obj in (ours, made):
            try:
                obj.name = "other"
            except dataclasses.FrozenInstanceError as err:
                assert str(err) == "cannot assign to field 'name'"
            else:
                raise AssertionError("assigned")
            try:
                del obj.doc
            except dataclasses.FrozenInstanceError as err:
                assert str(err) == "cannot delete field 'doc'"
            else:
                raise AssertionError("deleted")
    assert Rule("r", "x", "y").vjp is not Rule("r", "x", "y").vjp  # a new dict each
    hashable = dict(vjp=(), jvp=())
    assert hash(Rule("r", "x", "y", **hashable)) == hash(Made("r", "x", "y", **hashable))
    assert Rule.__match_args__ == Made.__match_args__


def test_bound_args_binds_as_inspect_does():
    """arguments.bound_args (a first call's example arguments, without inspect.signature
    where it may): the positional arguments with the defaults after them."""
    import inspect

    from srcgrad.arguments import bound_args

    def f(a, b=2.0, *, c=1.0):
        return a

    def g(a, *rest):
        return a

    class K:
        def m(self, a, b=1.0):
            return a

    for fn, args in [(f, (1.0,)), (f, (1.0, 3.0)), (g, (1.0,)), (g, (1.0, 2.0, 3.0)),
                     (K().m, (1.0,)), (K().m, (1.0, 2.0)), (lambda x, y=3: x, (1,))]:
        full = inspect.signature(fn).bind(*args)
        full.apply_defaults()
        assert bound_args(fn, args) == tuple(full.args), (fn, args)


def test_ir_classes_are_as_their_dataclasses():
    """ir.core's Loc, Op, Block and Graph are written out (the decorator's generated
    methods cost a compile's start-up): constructors, defaults, equality, hash, repr and
    FrozenInstanceError as @dataclass makes them (Loc frozen, the others eq=False)."""
    import dataclasses
    import pickle

    from srcgrad.ir import core

    def made(name, fields, **options):
        return dataclasses.make_dataclass(name, [
            (n, object, dataclasses.field(default_factory=d)) if callable(d) else
            (n, object) if d is _REQUIRED else (n, object, dataclasses.field(default=d))
            for n, d in fields], **options)

    MadeLoc = made("Loc", [("file", _REQUIRED), ("line", _REQUIRED), ("col", _REQUIRED),
                           ("text", _REQUIRED)], frozen=True)
    MadeOp = made("Op", [("prim", _REQUIRED), ("args", _REQUIRED), ("outs", _REQUIRED), ("loc", None),
                         ("attrs", dict), ("blocks", ())], eq=False)
    MadeBlock = made("Block", [("ops", _REQUIRED), ("results", _REQUIRED), ("params", list)], eq=False)
    MadeGraph = made("Graph", [("name", _REQUIRED), ("inputs", _REQUIRED), ("ops", _REQUIRED),
                               ("outputs", _REQUIRED), ("out_tree", None), ("param_names", ()),
                               ("defaults", dict), ("loc", None)], eq=False)
    v, c = core.Var("v1"), core.Const(2.0)
    cases = [(core.Loc, MadeLoc, ("f.py", 3, 4, "y = x"), {}),
             (core.Op, MadeOp, ("add", (v, c), (core.Var("v2"),)), {}),
             (core.Op, MadeOp, ("getitem", (v,), (v,)), dict(loc=None, attrs={"i": 1}, blocks=(1,))),
             (core.Block, MadeBlock, ([], [v]), {}), (core.Block, MadeBlock, ([], [], [v]), {}),
             (core.Graph, MadeGraph, ("f", [v], [], [v]), {}),
             (core.Graph, MadeGraph, ("f", [v], [], [v], ("leaf",), ("x",), {"x": 1.0}), {})]
    for ours_cls, made_cls, args, kwargs in cases:
        ours, theirs = ours_cls(*args, **kwargs), made_cls(*args, **kwargs)
        assert repr(ours) == repr(theirs), ours_cls
        assert ours_cls.__match_args__ == made_cls.__match_args__
        names = made_cls.__match_args__
        assert [getattr(ours, n) for n in names] == [getattr(theirs, n) for n in names]
        assert pickle.loads(pickle.dumps(ours)).__class__ is ours_cls
    op, block, graph = core.Op("neg", (v,), (v,)), core.Block([], []), core.Graph("g", [], [], [])
    assert op.attrs is not core.Op("neg", (v,), (v,)).attrs and block.params is not core.Block([], []).params
    assert graph.defaults is not core.Graph("g", [], [], []).defaults
    assert op != core.Op("neg", (v,), (v,)) and op == op  # (identity, as eq=False)
    loc = core.Loc("f.py", 3, 4, "y = x")
    assert loc == core.Loc("f.py", 3, 4, "y = x") and loc != core.Loc("f.py", 5, 4, "y = x")
    assert hash(loc) == hash(MadeLoc("f.py", 3, 4, "y = x")) and loc.__eq__(MadeLoc("f.py", 3, 4, "y = x")) \
        is NotImplemented
    for obj in (loc, MadeLoc("f.py", 3, 4, "y = x")):
        for act, message in ((lambda o: setattr(o, "line", 1), "cannot assign to field 'line'"),
                             (lambda o: delattr(o, "text"), "cannot delete field 'text'")):
            try:
                act(obj)
            except dataclasses.FrozenInstanceError as err:
                assert str(err) == message
            else:
                raise AssertionError("changed a frozen Loc")
    op.loc = loc  # the others are mutable
    assert op.loc is loc


_REQUIRED = object()


def test_function_source_replace_is_dataclasses_replace():
    """FunctionSource.replace (the pipeline's way to give a parsed function its argument
    trees) makes what dataclasses.replace made: every field kept but the changed ones."""
    from srcgrad.frontend.parse import parse_function

    def f(x, y):
        return np.sum(x * y)

    fs = parse_function(f)
    trees = (("leaf",), ("tuple", (("leaf",), ("leaf",))))
    new = fs.replace(arg_trees=trees)
    assert new is not fs and new.__class__ is fs.__class__ and new.arg_trees == trees
    assert fs.arg_trees is None  # (the original unchanged)
    for name in fs.__match_args__:
        if name != "arg_trees":
            assert getattr(new, name) is getattr(fs, name), name
    try:
        fs.replace(no_such_field=1)
    except TypeError:
        pass
    else:
        raise AssertionError("replaced a field that does not exist")


def test_a_dispatcher_is_compiled_once_then_read_from_the_disk_cache(tmp_path, monkeypatch):
    """srcgrad.api._dispatcher_code: the guards' code a transform's function gets on its
    first call is stored in the disk cache; another transform of the function (as in a
    new process) reads it and compiles nothing."""
    import builtins

    import srcgrad as sg

    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path / "cache"))
    mod = _user_module(tmp_path, "dispatched", """
        import numpy as np
        def f(x, y):
            return np.sum(np.sin(x) * y)
    """)
    x, y = np.linspace(0.0, 1.0, 5), np.linspace(1.0, 2.0, 5)
    assert np.allclose(sg.grad(mod.f)(x, y), np.cos(x) * y)  # a miss: the dispatcher stored
    assert len(list((tmp_path / "cache").rglob("dispatch-*.pyc"))) == 1

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled")

    monkeypatch.setattr(builtins, "compile", no_compile)
    assert np.allclose(sg.grad(mod.f)(x, y), np.cos(x) * y)


def test_a_compile_imports_neither_dataclasses_nor_copy(tmp_path):
    """Issue 15: no class on a compile's path is made by @dataclass (each decoration
    generated and compiled its methods at start-up; importing dataclasses, and copy with
    it, cost ~1 ms more): they are written out (srcgrad.ir.core.Fields and its kin)."""
    loaded = _imported_after(GRAD_CALL, tmp_path, tmp_path / "cache", ("srcgrad", "dataclasses", "copy"))
    assert "srcgrad.pipeline.programs" in loaded  # a miss: compiled here
    assert not loaded & {"dataclasses", "copy"}, loaded & {"dataclasses", "copy"}


def _check_as_dataclass(ours_cls, made_cls, args, kwargs, other, *, frozen, eq, own_repr=False):
    """`ours_cls(*args, **kwargs)` behaves as `made_cls`'s (a dataclass with the same fields
    and options): fields and defaults, repr, equality (with an instance made from `other`'s
    arguments), hash, (im)mutability."""
    import dataclasses

    ours, theirs = ours_cls(*args, **kwargs), made_cls(*args, **kwargs)
    names = made_cls.__match_args__
    assert ours_cls.__match_args__ == names, ours_cls
    assert [getattr(ours, n) for n in names] == [getattr(theirs, n) for n in names], ours_cls
    if not own_repr:
        assert repr(ours) == repr(theirs), ours_cls
    twin, made_twin = ours_cls(*args, **kwargs), made_cls(*args, **kwargs)
    assert (ours == twin) is (theirs == made_twin), ours_cls  # eq=False: identity
    assert ours == ours and not (ours != ours)
    if other is not None:
        assert (ours == ours_cls(*other)) is (theirs == made_cls(*other)) is False, ours_cls
    assert ours.__eq__(theirs) is NotImplemented or not eq  # another class: not equal
    if made_cls.__hash__ is None:
        assert ours_cls.__hash__ is None, ours_cls  # eq=True, not frozen: unhashable
    elif eq:
        assert hash(ours) == hash(theirs), ours_cls  # frozen: the fields' hash
    else:
        assert hash(ours) == object.__hash__(ours), ours_cls  # identity
    for act, message in ((lambda o: setattr(o, names[0], 1), f"cannot assign to field {names[0]!r}"),
                         (lambda o: delattr(o, names[-1]), f"cannot delete field {names[-1]!r}")):
        for obj in (ours_cls(*args, **kwargs), made_cls(*args, **kwargs)):
            try:
                act(obj)
            except dataclasses.FrozenInstanceError as err:
                assert frozen and str(err) == message, (ours_cls, err)
            else:
                assert not frozen, ours_cls


def _made(name, fields, **options):
    import dataclasses

    return dataclasses.make_dataclass(name, [
        (n, object, dataclasses.field(default_factory=d)) if d in (dict, list, set) else
        (n, object) if d is _REQUIRED else (n, object, dataclasses.field(default=d))
        for n, d in fields], **options)


def test_compile_path_classes_are_as_their_dataclasses():
    """ir.core's Var, Const and Pack, frontend's Unset, ParsedFunction, FunctionSource,
    FunctionCall and SavedRecord, passes' Probe and _Facts, codegen's Refused and the
    kernels' OpKernel and _Program are written out as the @dataclass each was (issue 15):
    each against dataclasses.make_dataclass's class with the same fields and options."""
    import pickle

    from srcgrad import kernels
    from srcgrad.codegen.spellings import Refused
    from srcgrad.frontend.classes import ParsedFunction
    from srcgrad.frontend.function import FunctionCall
    from srcgrad.frontend.parse import FunctionSource, parse_function
    from srcgrad.frontend.results import Unset
    from srcgrad.frontend.versions import SavedRecord
    from srcgrad.ir import core
    from srcgrad.passes.shapes import Probe
    from srcgrad.passes.simplify import _Facts

    R = _REQUIRED
    v, w = core.Var("v1"), core.Var("w1", "static")
    fs = parse_function(_check_as_dataclass)
    fs_fields = [(n, R) for n in ("fn", "node", "source", "filename", "line_offset", "col_offset",
                                  "globals")] + [("closure", dict), ("arg_trees", None)]
    fs_args = (fs.fn, fs.node, fs.source, fs.filename, 1, 0, {"np": np})
    call_fields = [("parsed", R), ("inputs", R), ("out_tree", R), ("out_leaves", R), ("saved", ()),
                   ("saved_records", ()), ("saved_forward", ()), ("attributes", dict),
                   ("non_differentiable", frozenset()), ("materialize_grads", True), ("loc", None),
                   ("body", ()), ("tracer_class", None)]
    probe_fields = [(n, dict) for n in ("shapes", "kinds", "dtypes", "values", "pushes")] + [
        ("floats_pushed", set)]
    record_fields = [("value", R), ("function", R), ("loc", R), ("allow", R), ("shown", R),
                     ("certain", list), ("ops", None), ("possible", list), ("hidden", None),
                     ("counted", list), ("where", ())]
    kernel_fields = [(n, R) for n in ("rule", "forward", "backward", "jvp", "saved_from",
                                      "saved_names", "source")]
    parsed_fields = [(n, R) for n in ("cls", "name", "forward", "setup_context", "backward", "jvp",
                                      "once_differentiable")]
    cases = [  # (ours, made, args, kwargs, other args, frozen, eq, own repr)
        (core.Var, _made("Var", [("name", R), ("kind", "array")], eq=False), ("v1",), {}, None,
         False, False, True),
        (core.Var, _made("Var", [("name", R), ("kind", "array")], eq=False), ("v1", "static"), {},
         None, False, False, True),
        (core.Const, _made("Const", [("value", R)], frozen=True), (2.0,), {}, (3.0,), True, True, True),
        (core.Pack, _made("Pack", [("items", R), ("style", "tuple")], frozen=True), ((v, w),), {},
         ((w, v),), True, True, True),
        (core.Pack, _made("Pack", [("items", R), ("style", "tuple")], frozen=True), ((v,), "list"), {},
         ((v,), "slice"), True, True, True),
        (Unset, _made("Unset", [("value", None)], bases=(core.Const,), frozen=True), (), {}, (1,),
         True, True, True),
        (Refused, _made("Refused", [("reason", R)], frozen=True), ("no cube root",), {}, ("other",),
         True, True, False),
        (ParsedFunction, _made("ParsedFunction", parsed_fields, frozen=True, eq=False),
         (int, "F", fs, None, fs, None, False), {}, None, True, False, False),
        (FunctionSource, _made("FunctionSource", fs_fields), fs_args, {}, (*fs_args[:4], 2, 0, {}),
         False, True, False),
        (FunctionSource, _made("FunctionSource", fs_fields), fs_args, dict(closure={"k": 1},
                                                                           arg_trees=(("leaf",),)),
         None, False, True, False),
        (FunctionCall, _made("FunctionCall", call_fields, eq=False), ("parsed", (v,), ("leaf",), (w,)),
         {}, None, False, False, True),
        (FunctionCall, _made("FunctionCall", call_fields, eq=False), ("parsed", (v,), ("leaf",), (w,)),
         dict(saved=(v,), attributes={"a": w}, non_differentiable=frozenset({0}), loc="here"), None,
         False, False, True),
        (SavedRecord, _made("SavedRecord", record_fields, eq=False), (v, "F", None, False, "x"), {},
         None, False, False, False),
        (SavedRecord, _made("SavedRecord", record_fields, eq=False), (v, "F", None, True, "x"),
         dict(certain=[1], ops=[], hidden="_h", where=(2,)), None, False, False, False),
        (Probe, _made("Probe", probe_fields),
         (), {}, ({v: (2,)},), False, True, False),
        (Probe, _made("Probe", probe_fields),
         ({v: (2,)}, {}, {v: "f8"}), {}, ({v: (3,)},), False, True, False),
        (_Facts, _made("_Facts", [("shape_class", dict), ("producer", dict), ("floats", set),
                                  ("scalars", set), ("shapes", dict), ("uses", dict)]),
         (), dict(shapes={v: (2,)}), ({v: w},), False, True, False),
        (kernels.OpKernel, _made("OpKernel", kernel_fields, frozen=True),
         ("tanh", abs, min, max, (("input", 0),), ("x",), "src"), {},
         ("sin", abs, min, max, (("input", 0),), ("x",), "src"), True, True, False),
        (kernels._Program, _made("_Program", [(n, R) for n in ("sources", "entries", "constants",
                                                               "saved_from", "saved_names")]),
         (["def f(): pass"], ("f",), {}, (), ()), {}, ([], ("f",), {}, (), ()), False, True, False),
    ]
    for ours_cls, made_cls, args, kwargs, other, frozen, eq, own_repr in cases:
        _check_as_dataclass(ours_cls, made_cls, args, kwargs, other, frozen=frozen, eq=eq,
                            own_repr=own_repr)
    # the classes' own reprs, and defaults made anew per instance
    assert repr(v) == "v1" and repr(core.Const(2.0)) == "Const(2.0)" and repr(Unset()) == "Const(None)"
    assert repr(core.Pack((v, w))) == "Pack(v1, w1)" and Unset() != core.Const(None)
    assert FunctionSource(*fs_args).closure is not FunctionSource(*fs_args).closure
    assert Probe().shapes is not Probe().shapes and _Facts().floats is not _Facts().floats
    record = SavedRecord(v, "F", None, False, "x")
    assert record.certain is not SavedRecord(v, "F", None, False, "x").certain
    call = FunctionCall("parsed", (), None, ())
    assert call.attributes is not FunctionCall("parsed", (), None, ()).attributes
    # a repr of a value holding itself stops, as the dataclass's does
    made_probe = _made("Probe", probe_fields)
    ours_probe, theirs_probe = Probe(), made_probe()
    ours_probe.shapes["me"], theirs_probe.shapes["me"] = ours_probe, theirs_probe
    assert repr(ours_probe) == repr(theirs_probe)
    for value in (v, core.Const(2.0), core.Pack((v,), "list"), Unset(), Refused("r"), Probe({1: (2,)})):
        again = pickle.loads(pickle.dumps(value))
        assert again.__class__ is value.__class__ and repr(again) == repr(value)
    # none of them is a record to the trees (a Var or Const was a leaf to every caller)
    from srcgrad.ir.tree import is_record

    assert not any(is_record(x) for x in (v, core.Const(1.0), core.Pack((v,)), Unset(), fs, record))
