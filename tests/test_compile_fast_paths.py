"""The compile's fast paths against the general code they stand in for (issue 15).

Each cuts a cold first gradient's compile work and must give exactly what the
general path gives: gast's converter (formulas), inspect's bind (rule applications),
the Namer's character loop, a render's template tree (codegen)."""

from __future__ import annotations

import ast
import itertools
import re

import gast
import numpy as np

from srcgrad.codegen import emit
from srcgrad.codegen.names import numbered_base
from srcgrad.ir.expand import Namer, _bound_plainly, parse_formula
from srcgrad.ir.gast_nodes import to_gast
from srcgrad.rules import RULES
from srcgrad.rules.core import compiled_signature, plain_signature


def _same_nodes(a, b, path="") -> str | None:
    """Where two node trees differ (class, field or position), or None."""
    if type(a) is not type(b):
        return f"{path or 'root'}: {type(a).__name__} against {type(b).__name__}"
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items against {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b))
                     if (d := _same_nodes(x, y, f"{path}[{i}]"))), None)
    if isinstance(a, ast.AST):
        if vars(a).keys() != vars(b).keys():
            return f"{path or 'root'}: fields {sorted(vars(a))} against {sorted(vars(b))}"
        return next((d for k in vars(a) if (d := _same_nodes(vars(a)[k], vars(b)[k], f"{path}.{k}"))),
                    None)
    return None if a == b else f"{path}: {a!r} against {b!r}"


def test_formulas_parse_as_gast_parses_them():
    """srcgrad.ir.gast_nodes.to_gast (Note [Formulas without gast's converter]) makes the nodes
    gast.parse makes, on every formula and render of the table and the constructs of Note
    [Formula constructs] (and a few more: slices, starred arguments, a walrus)."""
    texts = {t for rule in RULES.values() for t in (*rule.vjp.values(), *rule.jvp.values(),
                                                        rule.render)}
    texts |= {"x[1:2, ::-1, ...]", "f(*a, k=1, **kw)", "(y := -x) if not a and b or c else 2.5j",
              "[a, (b,), {'k': v}][0] @ x ** 2 // 3 % 4", "a is not None in b < c"}
    problems = [f"{t}: {d}" for t in sorted(texts)
                if (d := _same_nodes(gast.parse(t, mode="eval").body,
                                     to_gast(ast.parse(t, mode="eval").body)))]
    assert not problems, "\n".join(problems)
    assert parse_formula("g * x") is parse_formula("g * x")  # parsed once per process
    assert isinstance(parse_formula("g * x"), gast.BinOp)


# Python srcgrad's own files do not spell: gast's special cases and rarer nodes
_CONSTRUCTS = """
async def f(a, /, b: int = 1, *args, c, d=2, **kw) -> None:
    try:
        x = [y async for y in z if y] + [*a, *b]
    except (A, B) as err:
        raise err from None
    except C:
        pass
    else:
        del a[1:2, ...]
    finally:
        global g
    async with m() as (p, q):
        await r
    async for i in s:
        yield i
    nonlocal_free = lambda u, *v, w=3, **x: (u, v, w, x)
    match q:
        case [1, *rest] if rest:
            pass
        case {"k": v, **others}:
            pass
        case Point(x=0, y=yy) | None as found:
            pass
        case _:
            pass
    print(f"{a!r:>{width}} {b=}", b"\\x00", 1j, ..., -0.0)
    (w := 1) and not q or r
    assert x, "message"
    import os.path as osp
    from . import sibling
    with open(p) as fh, open(q):
        pass
    while True:
        break
    else:
        continue


@decorated(arg)
class K(Base, metaclass=Meta):
    attr: int = 3
    def method(self): return {k: v for k, v in self.items()} | {1, 2}
"""


def test_function_trees_are_gasts_where_it_converts_nothing():
    """Where FUNCTIONS_WITHOUT_GAST (before Python 3.12), srcgrad.ir.gast_nodes.to_gast makes of
    a parsed module what gast.parse makes (Note [Formulas without gast's converter]): on
    srcgrad's and the examples' Python files and on the constructs they do not use."""
    from pathlib import Path

    from srcgrad.ir.gast_nodes import FUNCTIONS_WITHOUT_GAST
    if not FUNCTIONS_WITHOUT_GAST:  # (gast.parse itself is used there)
        return
    root = Path(__file__).resolve().parent.parent
    sources = {str(p.relative_to(root)): p.read_text(encoding="utf-8")
               for folder in ("srcgrad", "examples")
               for p in sorted((root / folder).rglob("*.py"))}
    sources["constructs"] = _CONSTRUCTS
    assert len(sources) > 100
    problems = [f"{name}: {d}" for name, text in sources.items()
                if (d := _same_nodes(gast.parse(text), to_gast(ast.parse(text))))]
    assert not problems, "\n".join(problems[:20])


def _inspect_bind(sig, args, kwargs):
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return [bound.arguments[n] for n in sig.parameters]


def test_plain_binding_is_inspects():
    """`_bound_plainly` gives inspect's bound values wherever it answers, and answers
    for the calls formulas make (positional operands, keywords after them); it leaves
    every call that does not fit to inspect (which then names what does not fit)."""
    answered = 0
    for rule in RULES.values():
        sig = rule.py_signature
        names = list(sig.parameters)
        for n_args in range(len(names) + 2):
            args = [object() for _ in range(n_args)]
            keyword_sets = [{}] + [dict.fromkeys(c, 7) for k in (1, 2)
                                   for c in itertools.combinations(names + ["bogus"], k)]
            for kwargs in keyword_sets:
                plain = _bound_plainly(rule.signature, sig, args, kwargs)
                if plain is None:
                    continue
                answered += 1
                assert plain == _inspect_bind(sig, args, kwargs), (rule.name, n_args, kwargs)
    assert answered > 500
    add = RULES["add"].py_signature
    assert _bound_plainly("x, y", add, [1, 2], {}) == [1, 2]
    assert _bound_plainly("x, y", add, [1], {"y": 2}) == [1, 2]
    for args, kwargs in (([1], {}), ([1, 2, 3], {}), ([1, 2], {"y": 3}), ([1], {"z": 2})):
        assert _bound_plainly("x, y", add, args, kwargs) is None  # inspect says why
    total = RULES["sum"]
    assert _bound_plainly(total.signature, total.py_signature, ["x"], {"axis": 0}) == \
        _inspect_bind(total.py_signature, ["x"], {"axis": 0})


def test_namer_fast_path_names_as_the_character_loop():
    def loop(hint):
        return "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "_v"

    for hint in ("x", "_", "", "grad_W1", "a.b", "x y", "é", "x\u203fy", "9x", "__", "a-1",
                 "Ω_2", "_add_3", "x\u0301"):
        expected = loop(hint)
        expected = "_" + expected if expected[0].isdigit() else expected
        assert Namer().fresh(hint) == expected, hint


def test_a_render_tree_is_fresh_and_as_parsed():
    """Each op's template is a new tree (the substitution edits it in place) and is
    the tree of its render, as the unparse-and-parse copy of a cached tree was."""
    for rule in RULES.values():
        tree = emit._template(rule.render)
        assert tree is not emit._template(rule.render)
        assert ast.dump(tree) == ast.dump(ast.parse(ast.unparse(ast.parse(rule.render, mode="eval").body),
                                                    mode="eval").body)


def test_an_expander_holding_nothing_expands_every_formula_as_the_general_path():
    """Expander.in_order skips the walks asking which operands may call where nothing is
    held (`hold` and `release` the identity): every VJP and JVP formula of the table
    expands to the same ops, result and error as through the general path, which a
    subclass with hold and release of its own takes (the walks checked to run there)."""
    from srcgrad.ir import expand
    from srcgrad.ir.core import Const, Var
    from srcgrad.ir.printer import op_text

    class Holding(expand.Expander):  # (identity functions of its own: the general path)
        def hold(self, value, scope):
            return value

        def release(self, held, scope):
            return held

    walks = []
    general = expand.may_call

    def counted(node):
        walks.append(node)
        return general(node)

    def expanded(cls, formula, env):
        ex = cls(expand.Namer())
        try:
            out = ex.expand(formula, dict(env), None)
        except Exception as err:  # noqa: BLE001 - compared as they are raised
            return type(err).__name__, str(err)
        return [op_text(op, with_loc=False) for op in ex.ops], repr(out)

    compared = 0
    for rule in RULES.values():
        sig = rule.py_signature
        env = {name: Const(p.default) if p.default is not p.empty else Var(name)
               for name, p in sig.parameters.items()}
        env.update(g=Var("g"), ans=Var("ans"))
        env.update((f"{name}_t", Var(f"{name}_t")) for name in sig.parameters)
        for formula in (*rule.vjp.values(), *rule.jvp.values()):
            fast = expanded(expand.Expander, formula, env)
            expand.may_call = counted
            try:
                assert expanded(Holding, formula, env) == fast, (rule.name, formula)
            finally:
                expand.may_call = general
            compared += 1
    assert compared > 300 and walks


def _same_value(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray) or isinstance(a, np.generic):
        return a.shape == b.shape and a.dtype == b.dtype and (
            a.dtype.kind not in "fcbiu" or np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a is b or a == b


def _outcomes(rule, values) -> tuple:
    """(run_render's outcome, the render text's eval's): ("value", v) or ("error", (type, message))."""
    from srcgrad.ir.renders import render_code, run_render
    from srcgrad.rules import FORMULA_GLOBALS

    def outcome(run, *args):
        try:
            return "value", run(*args)
        except Exception as err:  # noqa: BLE001 - compared as they are raised
            return "error", (type(err), str(err))

    namespace = {**FORMULA_GLOBALS, **dict(zip(rule.params, values))}
    return (outcome(run_render, rule, list(values)),
            outcome(eval, render_code(rule.render), namespace))  # (the table's own text)


def test_renders_called_directly_compute_what_their_text_computes():
    """srcgrad.ir.renders.run_render calls a render's function (Note [Renders called
    directly]) where its text is a plain call or one operator: on every case of every row
    of the table (tests/rules/cases.py), and on static values where folding meets them,
    it gives the value (or raises the error) the text's eval in the formula globals does."""
    from srcgrad.ir.renders import render_call
    from tests.rules.cases import iter_cases

    direct = {rule.name for rule in RULES.values() if render_call(rule.render, rule.params)}
    assert len(direct) > 200 and {"add", "matmul", "tanh", "sum", "getitem", "T"} <= direct
    compared = 0
    for rule, case_id, args in iter_cases():
        if rule.name not in direct or rule.io:
            continue
        ours, text = _outcomes(rule, [args[p] for p in rule.params])
        if rule.name.startswith("empty"):  # (uninitialised: only the shape and dtype agree)
            ours, text = [(k, (v.shape, v.dtype)) for k, v in (ours, text)]
        assert ours[0] == text[0] and (_same_value(ours[1], text[1]) if ours[0] == "value"
                                       else ours[1] == text[1]), (rule.name, case_id, ours, text)
        compared += 1
    assert compared > 400
    for rule_name, values in (("add", [1, "a"]), ("reshape", [np.zeros(4), (3,)]),  # errors
                              ("divide", [1.0, 0.0]), ("getitem", [(1, 2), 5])):
        ours, text = _outcomes(RULES[rule_name], values)
        assert ours == text and ours[0] == "error", (rule_name, ours, text)


def _described(sig):
    return [(p.name, p.kind, type(p.default), p.default) for p in sig.parameters.values()]


def test_plain_signatures_are_the_compiled_ones():
    """A rule's signature read without compiling a `def` is the compiled one (defaults of
    the same types), for every row; a text outside the plain subset is left to the compile."""
    texts = {rule.signature for rule in RULES.values()}
    assert sum(plain_signature(t) is not None for t in texts) >= len(texts) - 2
    texts |= {"a, b=1", "a='x,y'", "a='x', b=\"y\"", "a=True, *rest, b=None", "a=-12", "a, *, b=1",
              "a=1, b", "**kw", "a=01", "a=-0", "lambda=1", "a=1.5", "a=(1, 2)", "a=''", "a='\\n'",
              " ", "*a, b", "a=\"it's\"", "a, *, b=1.0", "a=1e-05", "a=-0.5", "a=1.", "a=nan"}
    plain = 0
    for text in sorted(texts):
        ours = plain_signature(text)
        if ours is None:
            continue
        plain += 1
        assert _described(ours) == _described(compiled_signature(text)), text
        assert ours == compiled_signature(text)
    for text in ("a=1, b", "a=01", "lambda=1", "a='x,y'", "a=1.", "a=nan", "a=inf", "**kw"):
        assert plain_signature(text) is None, text
    assert plain >= 80


def test_numbered_base_is_the_regular_expression():
    names = ["_a_12", "_12", "x_1_2", "a_", "a__3", "_shape", "_shape_3", "_", "__", "_x\u0663",
             "_x_\u0663", "_x_\u00b2", "_v_0", "_a_1b", "grad_W1", "_add_10_"]
    names += ["".join(p) for p in itertools.product(["_", "a", "1", "\u0663"], repeat=4)]
    for name in names:
        assert numbered_base(name) == re.sub(r"_\d+$", "", name), name
