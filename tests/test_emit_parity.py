"""`srcgrad emit` compiles what sg.grad compiles, and its module computes sg.grad's gradient.

The functions are collected from the suite itself: every `CASES` list of the test modules
that compile gradients with sg.grad (the corpus, control flow, mutation, containers,
custom Functions, loops with early exits, augmented writes through views),
the examples, and tests/corpus/emit_cases.py (records, nested containers, a self-read
write). For each, sg.grad runs here; emit writes a module from the same example arguments
(Note [Emitted container arguments] in srcgrad.pipeline.standalone); one subprocess in
which `import srcgrad` fails imports every module and returns its gradients. Where sg.grad
refuses a function, emit must refuse it too with the same message, and where sg.grad's
gradient raises when run (a non-scalar output), the emitted module must raise the same.
"""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.api import emit_standalone
from srcgrad.errors import CompileError
from srcgrad.ir import tree as pytree
from tests.corpus import containers_args, emit_cases

ROOT = Path(__file__).resolve().parent.parent
rng = np.random.default_rng(31)


def _r(*shape):
    return rng.standard_normal(shape)


# test modules whose module-level `CASES` list functions that sg.grad compiles, in
# any of the suite's shapes: (name, fn, make[, wrt]), (name, make) with the function
# found by name, (fn, args), (name, fn, x), (fn, shapes)
_CASE_MODULES = ("tests.corpus.test_programs", "tests.test_control_flow",
                 "tests.test_forward_control_flow", "tests.test_functions_and_containers",
                 "tests.test_mutation",
                 "tests.test_custom_function_compiled", "tests.test_never_wrong_control",
                 "tests.test_aug_assign_item_views", "tests.test_loop_speed_semantics")


def _is_def(v) -> bool:
    return callable(v) and getattr(v, "__name__", "<lambda>") != "<lambda>" \
        and hasattr(v, "__code__")


def _by_name(module, name):
    """A function `name` of the test module or of a module it imported (`S.name`)."""
    if _is_def(getattr(module, name, None)):
        return getattr(module, name)
    for value in vars(module).values():
        if isinstance(value, type(module)) and _is_def(getattr(value, name, None)):
            return getattr(value, name)
    return None


def _arguments(item):
    if callable(item) and getattr(item, "__name__", "") == "<lambda>":
        item = item()
    if isinstance(item, np.ndarray):
        return [item]
    items = list(item)
    if items and all(isinstance(a, tuple) and all(isinstance(n, int) for n in a) for a in items):
        return [rng.standard_normal(a) for a in items]  # shapes
    return items


def _case(module, case):
    """(fn, args, wrt) of one CASES entry, or None where it is none of the shapes."""
    case = tuple(case)
    fns = [c for c in case if _is_def(c)]
    fn = fns[0] if fns else _by_name(module, case[0]) if isinstance(case[0], str) else None
    rest = [c for c in case if c is not fn and not isinstance(c, str)]
    if fn is None or not rest:
        return None
    args = _arguments(rest[0])
    wrt = rest[1] if len(rest) > 1 and isinstance(rest[1], tuple) and all(
        isinstance(i, int) for i in rest[1]) else tuple(
        i for i, a in enumerate(args) if isinstance(a, float) or (
            isinstance(a, np.ndarray) and a.dtype.kind == "f"))
    return (fn, args, wrt) if wrt else None


def _collected():
    """(id, fn, args, wrt) for every function the suite's CASES compile with sg.grad."""
    out = []
    for name in _CASE_MODULES:
        module = importlib.import_module(name)
        for k, case in enumerate(module.CASES):
            found = _case(module, case)
            assert found is not None, (name, case)  # a new shape of CASES: teach _case
            fn, args, wrt = found
            label = case[0] if isinstance(case[0], str) else fn.__name__
            out.append((f"{name.rsplit('.', 1)[-1]}:{label}-{k}", fn, args, _wrt(wrt)))
    return out


def _wrt(wrt):
    """One argument as an int: emit_standalone reads a 1-tuple `wrt` as `--wrt x` (a bare
    gradient), sg.grad as a tuple of one, and an int bare in both."""
    return wrt[0] if len(wrt) == 1 else wrt


def _examples():
    from examples import elementwise, logistic, mlp, rnn, softmax

    return [
        ("examples/mlp.py:loss", mlp.loss, [_r(4, 6), _r(6), _r(6, 3), _r(3), _r(5, 4), _r(5, 3)],
         (0, 1, 2, 3)),
        ("examples/logistic.py:loss", logistic.loss, [_r(4), 0.3, _r(7, 4), (_r(7) > 0) * 1.0], (0, 1)),
        ("examples/rnn.py:loss", rnn.loss, [_r(3, 4) * .5, _r(4, 4) * .5, _r(4), _r(5, 2, 3), _r(2, 4)],
         (0, 1, 2)),
        ("examples/softmax.py:loss", softmax.loss, [_r(4, 3), _r(6, 4), np.eye(3)[[0, 2, 1, 1, 0, 2]]],
         (0,)),
        ("examples/softmax.py:xent", softmax.xent, [_r(6, 3), np.eye(3)[[0, 2, 1, 1, 0, 2]]], (0,)),
        ("examples/elementwise.py:f", elementwise.f, [_r(7)], (0,)),
    ]


def _containers():
    E = emit_cases
    params = {"W1": _r(3, 4), "b1": _r(4), "W2": _r(4, 2)}
    return [
        ("containers_args:mlp-dict", containers_args.mlp, [params, _r(5, 3)], (0, 1)),
        ("containers_args:layers-list", containers_args.layers, [[_r(3, 3) * .5 for _ in range(3)],
                                                                 _r(2, 3)], (0, 1)),
        ("emit_cases:dataclass", E.dataclass_loss, [E.Params(_r(3), _r(3)), _r(3)], (0, 1)),
        ("emit_cases:namedtuple", E.namedtuple_loss, [E.Pair(_r(3), _r(3)), _r(3)], (0, 1)),
        ("emit_cases:nested", E.nested_loss, [{"first": (_r(3, 4), _r(4)), "rest": [_r(4, 4) * .5]},
                                              _r(2, 3)], (0, 1)),
        ("emit_cases:self-read-write", E.self_read_write, [_r(5)], (0,)),
    ]


CASES = _collected() + [(n, f, a, _wrt(w)) for n, f, a, w in _examples() + _containers()]

# The child: srcgrad cannot be imported; each module is imported from its file and
# called on the pickled arguments; the gradients' leaves come back pickled.
_CHILD = textwrap.dedent("""
    import importlib.abc, importlib.util, pickle, sys

    class NoSrcgrad(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "srcgrad" or name.startswith("srcgrad."):
                raise ImportError("srcgrad is not importable here")
            return None

    sys.meta_path.insert(0, NoSrcgrad())
    work = sys.argv[1]
    sys.path.insert(0, sys.argv[2])  # the repository: tests.corpus.emit_cases' classes
    cases = pickle.load(open(work + "/cases.pkl", "rb"))

    def leaves(v):
        if isinstance(v, dict):
            return [x for k in v for x in leaves(v[k])]
        if isinstance(v, (tuple, list)):
            return [x for c in v for x in leaves(c)]
        if hasattr(type(v), "__dataclass_fields__"):
            return [x for k in type(v).__dataclass_fields__ for x in leaves(getattr(v, k))]
        return [] if isinstance(v, (int, str)) else [v]  # (a record's configuration field)

    out = {}
    for i, (entry, args) in enumerate(cases):
        if not entry:  # sg.grad refused it: nothing emitted
            continue
        spec = importlib.util.spec_from_file_location(f"emitted_{i}", f"{work}/m{i}.py")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            got = getattr(module, entry)(*args)
            out[i] = ("ok", type(got).__name__, [type(g).__name__ for g in got
                                                 if not isinstance(g, (float, int))
                                                 and not hasattr(g, "dtype")]
                      if isinstance(got, tuple) else None, leaves(got))
        except Exception as err:
            out[i] = ("error", f"{type(err).__name__}: {err}")
    assert "srcgrad" not in sys.modules
    pickle.dump(out, open(work + "/out.pkl", "wb"))
""")


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """Per case: ("refused", sg.grad's error, emit's error) or ("ok", sg.grad's
    gradient, what the emitted module returned in the child)."""
    work = tmp_path_factory.mktemp("emitted")
    results, jobs = {}, []
    for i, (name, fn, args, wrt) in enumerate(CASES):
        try:
            want = sg.grad(fn, wrt=wrt)(*args)
        except (CompileError, NotImplementedError, TypeError, ValueError) as err:
            try:  # emit refuses it too, or writes a module that raises the same when run
                source = emit_standalone(fn, wrt=wrt, args=args)
            except Exception as refused:  # noqa: BLE001 (compared below)
                results[name] = ("refused", err, refused)
                continue
            (work / f"m{i}.py").write_text(source)
            jobs.append((i, name, err, (f"grad_{fn.__name__}", args), source))
            continue
        source = emit_standalone(fn, wrt=wrt, args=args)
        (work / f"m{i}.py").write_text(source)
        entry = f"grad_{fn.__name__}"
        jobs.append((i, name, want, (entry, args), source))
    table = [("", ())] * len(CASES)
    for i, _, _, call, _ in jobs:
        table[i] = call
    with open(work / "cases.pkl", "wb") as f:
        pickle.dump(table, f)
    child = work / "child.py"
    child.write_text(_CHILD)
    done = subprocess.run([sys.executable, str(child), str(work), str(ROOT)], cwd=ROOT, capture_output=True,
                          text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(work / "out.pkl", "rb") as f:
        out = pickle.load(f)
    for i, name, want, _, source in jobs:
        results[name] = ("ok", want, out[i], source)
    return results


def test_the_parity_corpus_is_broad():
    # the suite's CASES lists, the examples and the container cases are all collected
    names = [c[0] for c in CASES]
    assert len(names) >= 60 and len(set(names)) == len(names)
    for prefix in ("test_programs:", "test_control_flow:", "test_functions_and_containers:",
                   "examples/", "containers_args:", "emit_cases:"):
        assert any(n.startswith(prefix) for n in names), prefix


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_emitted_module_computes_sg_grads_gradient(name, emitted):
    result = emitted[name]
    if result[0] == "refused":  # sg.grad refuses it, and so does emit, for the same reason
        _, err, refused = result
        assert type(refused) is type(err) and str(refused).splitlines()[0] == str(err).splitlines()[0]
        return
    _, want, got, source = result
    if isinstance(want, Exception):  # sg.grad raises when run: so does the emitted module
        assert got[0] == "error" and got[1].startswith(f"{type(want).__name__}: "), (got, want)
        assert got[1].split(": ", 1)[1].splitlines()[0] == str(want).splitlines()[0]
        return
    assert got[0] == "ok", f"{name}: the emitted module raised {got[1]}\n{source}"
    assert source.count("import numpy") <= 1, source
    if isinstance(want, tuple):
        # the same containers (a float64 gradient may be a Python float: the same number)
        assert got[1] == "tuple"
        assert got[2] == [type(w).__name__ for w in want
                          if not isinstance(w, (float, int)) and not hasattr(w, "dtype")]
    want_leaves = pytree.flatten(want)[0]
    assert len(got[3]) == len(want_leaves)
    for a, b in zip(got[3], want_leaves):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)


def test_most_cases_compile(emitted):
    # the parity is checked on compiled gradients, not on a list of refusals
    compiled = [n for n, r in emitted.items() if r[0] == "ok" and not isinstance(r[1], Exception)]
    assert len(compiled) >= len(CASES) - 5, [n for n, r in emitted.items() if r[0] != "ok"]


def test_a_container_argument_without_example_arguments_is_refused_naming_the_line():
    with pytest.raises(ValueError) as err:
        emit_standalone(containers_args.mlp)
    text = str(err.value)
    assert "containers_args.py:7: mlp() reads argument `params` as a container (`params['W1']`)" in text
    assert "--args \"{'W1': (SHAPE), 'b1': (SHAPE), 'W2': (SHAPE)}, (SHAPE)\"" in text


def test_records_are_rebuilt_as_the_users_types_by_an_import_free_helper(emitted):
    _, want, _, source = emitted["emit_cases:dataclass"]
    assert "_record(p, w=_g[0], b=_g[1], scale=p.scale)" in source
    assert "def _record(like, **fields):" in source and "import dataclasses" not in source
    assert "_record" not in emitted["containers_args:mlp-dict"][3]  # no helper it does not call


def test_a_self_read_write_is_emitted_for_its_shapes_with_a_check(tmp_path):
    source = emit_standalone(emit_cases.self_read_write, args=(np.ones(5),))
    ns: dict = {}
    exec(compile(source, "m.py", "exec"), ns)
    with pytest.raises(ValueError, match=r"grad_self_read_write was emitted for arguments of the "
                                         r"shapes u \(5,\)"):
        ns["grad_self_read_write"](np.ones(4))
    with pytest.raises(CompileError, match="give `srcgrad emit --args` the arguments' shapes"):
        emit_standalone(emit_cases.self_read_write)


def test_cli_emit_args_gives_a_dict_its_structure_and_the_file_runs_once(tmp_path, capsys):
    from srcgrad.cli import main

    src = tmp_path / "user.py"
    src.write_text("import numpy as np\nprint('top level ran')\n\n"
                   "def loss_fn(params, x):\n    return np.sum(np.tanh(x @ params['W']) * params['b'])\n")
    assert main(["emit", f"{src}:loss_fn"]) == 2
    err = capsys.readouterr().err
    assert "user.py:5: loss_fn() reads argument `params` as a container (`params['W']`)" in err
    assert main(["emit", f"{src}:loss_fn", "--args", "{'W': (3, 4), 'b': (4,)}, (5, 3)"]) == 0
    out, err = capsys.readouterr()
    assert err.count("top level ran") == 1 and "top level ran" not in out  # stdout is the module
    assert "Regenerate with `srcgrad emit " in out and "--args \"{'W': (3, 4), 'b': (4,)}, (5, 3)\"`" in out
    ns: dict = {}
    exec(compile(out, "emitted.py", "exec"), ns)
    params, x = {"W": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)}, rng.standard_normal((2, 3))
    g_params, g_x = ns["grad_loss_fn"](params, x)
    want = sg.grad(lambda p, x: np.sum(np.tanh(x @ p["W"]) * p["b"]), wrt=(0, 1))(params, x)
    for key in params:
        np.testing.assert_allclose(g_params[key], want[0][key], rtol=1e-12)
    np.testing.assert_allclose(g_x, want[1], rtol=1e-12)


def test_cli_emit_help_says_it_imports_the_file(capsys):
    from srcgrad.cli import main

    assert main(["emit", "--help"]) == 0
    assert "emit imports FILE.py, running its top level once" in " ".join(capsys.readouterr().out.split())
