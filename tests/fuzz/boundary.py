"""The fuzzer's boundary grammar (issue 28, item 5): what users write that the curated
grammar of tests/fuzz/generator.py does not reach.

- `row_program(seed)`: one call of ANY differentiable row of the derivative table, drawn
  from its gradcheck cases (tests/rules/cases.py), with the case's arrays as the point
  (module constants) and the program's arguments a small perturbation of them
  (`C0 + 0.05 * x0`), so every argument stays in the row's domain (positive, SPD,
  well-conditioned, symmetric where the row reads one triangle).
- `index_unary(s)` / `index_reduce_all()`: NumPy's index objects (`np.r_`, `np.c_`,
  `np.s_`, `np.ix_`, boolean masks) and alternative call forms (a method against the
  function, keywords against positions), each a function of one expression `{0}` of
  shape s and of shape s (or a scalar), drawn by generator.Generator from its own stream.
- Two-deep transform compositions and complex arguments are the oracle's
  (`oracle.run_nested`, `oracle.run_complex`, opt-in transforms).

Note [Boundary share]: the curated grammar's seeds keep their programs (the CI slice
and the shrunk repros name seeds): the boundary grammar is drawn only where the share is
set, `SRCGRAD_FUZZ_BOUNDARY=0.3` (benchmarks/fuzz.py --boundary), from streams of its
own: a seed's curated program then differs only where a boundary draw replaced a pick.
"""

from __future__ import annotations

import ast
import os
import random
import zlib

import numpy as np

ROW_SHARE_OF_BOUNDARY = 0.5  # of boundary-grammar seeds: a row program (else index forms)


def share() -> float:
    try:
        return float(os.environ.get("SRCGRAD_FUZZ_BOUNDARY", "0") or 0)
    except ValueError:
        return 0.0


# ---------------------------------------------------------------- index objects, call forms
def index_unary(s: tuple) -> list:
    """Spellings of an expression `{0}` of shape s, of shape s."""
    forms = ["np.clip({0}, a_min=-1.0, a_max=1.0)", "({0}).clip(-1.0, 1.0)",
             "np.power({0}, 2)", "np.multiply({0}, 0.5, dtype=None)",
             "np.where(({0}) > 0.25, {0}, 0.5 * ({0}))", "abs({0})", "pow({0}, 2)",
             "np.negative({0}).__neg__()", "({0}).__mul__(0.5)", "np.asarray({0}) * 1.5"]
    if s:
        n = s[0]
        forms += ["({0})[np.s_[:]]", "({0})[np.s_[::-1]][::-1]",
                  "np.concatenate([({0})[np.s_[:1]], ({0})[np.s_[1:]]])",
                  "np.r_[({0})[:1], ({0})[1:]]", "np.r_[{0}]",
                  f"({{0}})[np.array({[True] * n!r})]" if len(s) == 1 else "({0})[np.s_[...]]",
                  "np.take({0}, " + repr(list(range(n))) + ", axis=0)",
                  "np.flip(np.flip({0}, axis=0), 0)", "np.swapaxes(({0})[None], 0, 1)[:, 0]",
                  f"np.reshape({{0}}, shape={s!r})", f"({{0}}).reshape(*{s!r})",
                  f"({{0}})[{list(range(n - 1, -1, -1))!r}][::-1]",
                  f"np.reshape(np.ravel({{0}}, order='F'), {s!r}, order='F')"]
    if len(s) == 1:
        forms += ["np.c_[{0}, 2.0 * ({0})].sum(axis=1)", "np.c_[{0}][:, 0]",
                  "np.r_['0', {0}]", "np.r_[({0})[1:], ({0})[:1]][np.r_[-1, :" + str(s[0] - 1) + "]]",
                  "np.r_['-1', ({0})[:1], ({0})[1:]]", "np.r_['0,2', {0}][0]",
                  "np.r_['0,2,0', {0}][:, 0]", "np.c_['0', {0}][:, 0]"]
    if len(s) == 2:
        n, m = s
        forms += ["np.c_[({0})[:, :1], ({0})[:, 1:]]", "np.r_['1', ({0})[:, :1], ({0})[:, 1:]]",
                  f"({{0}})[np.ix_({list(range(n))!r}, {list(range(m))!r})]",
                  f"({{0}})[np.ix_({list(range(n - 1, -1, -1))!r}, {list(range(m))!r})][::-1]",
                  "({0})[np.s_[:, :]]", "({0}).T.T", "np.transpose(a=np.transpose({0}))",
                  "np.sum(np.expand_dims({0}, axis=0), 0, keepdims=False)",
                  "np.r_['0,2', ({0})[:1], ({0})[1:]]", "np.r_['-1', ({0})[:, :1], ({0})[:, 1:]]",
                  f"({{0}}).flatten('F').reshape({(m, n)!r}).T", "np.vstack([({0})[:1], ({0})[1:]])",
                  "np.hstack([({0})[:, :1], ({0})[:, 1:]])",
                  f"np.einsum('ij,jk,kl->il', np.eye({n}), {{0}}, np.eye({m}), "
                  "optimize=['einsum_path', (1, 2), (0, 1)])"]
    return forms


def index_reduce_all() -> list:
    """Scalars of an expression `{e}` (any shape): masks, method and keyword forms."""
    return ["np.sum(({e})[({e}) > 0.2])", "np.sum(np.where(({e}) > 0.2, {e}, 0.0))",
            "({e})[({e}) < 0.5].sum()", "np.sum(a={e})", "np.sum({e}, None)", "({e}).sum(None)",
            "np.mean({e}, axis=None, keepdims=False)", "np.max({e}, None, None, False)",
            "np.amax({e})", "({e}).max(axis=None)", "np.prod(np.tanh({e}), dtype=None)",
            "np.add.reduce(np.ravel({e}))", "np.sum(np.ravel({e}, order='C'))",
            "np.sum(({e}).flatten('F') ** 2)", "np.mean(np.atleast_2d({e}), None, None, None, False)",
            "np.linalg.norm(x={e})", "sum(np.ravel({e}))", "np.sum(np.atleast_1d({e})[np.s_[:]])",
            "np.sum(np.linalg.svd(np.atleast_2d({e}), compute_uv=False))"]


def index_reduce_axis() -> list:
    """An axis reduction of `{e}` at `{k}`: positional and keyword, method and function."""
    return ["np.sum({e}, {k})", "({e}).sum({k})", "np.mean({e}, {k}, None, None, False)",
            "np.max({e}, axis={k}, keepdims=False)", "({e}).max({k})", "np.amin({e}, {k})",
            "np.sum(a={e}, axis={k})", "np.add.reduce({e}, axis={k})",
            "np.prod(np.tanh({e}), axis={k}, keepdims=False)", "({e}).max({k}, None, False)",
            "np.sum({e}, {k}, None, None, False)", "np.std({e}, {k}, None, None, 0)"]


# ---------------------------------------------------------------- a call of any table row
_CASES = None


def row_cases() -> list:
    """(rule, case_id, args) of every differentiable row case whose float operands are
    arrays the program can take as arguments and whose result is real."""
    global _CASES
    if _CASES is None:
        from tests.rules import cases

        out = []
        for rule, case_id, args in cases.differentiable_cases("vjp"):
            ops = [p for p in rule.params if p in rule.vjp and _float_array(args[p])]
            if ops:
                out.append((rule, case_id, args))
        _CASES = out
    return _CASES


def _float_array(v) -> bool:
    if isinstance(v, (np.ndarray, np.generic)):
        return np.asarray(v).dtype.kind == "f"
    return isinstance(v, (list, tuple)) and bool(v) and all(
        isinstance(x, np.ndarray) and x.dtype.kind == "f" for x in v)


def _const(v) -> str:
    a = np.asarray(v)
    kind = "float64" if a.dtype.kind == "f" else str(a.dtype)
    return f"np.array({a.tolist()!r}, dtype={kind!r})"


def _substitute(render: str, pieces: dict) -> str:
    tree = ast.parse(render, mode="eval")

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in pieces:
                return ast.parse(pieces[node.id], mode="eval").body
            return node

    return ast.unparse(Sub().visit(tree))


def row_program(seed: int):
    """A Program calling one table row (rule.render, NumPy as `xp`) at a perturbed case."""
    from srcgrad import rules
    from tests.fuzz.generator import Program
    from tests.rules.cases import SYMMETRIC_INPUTS

    rng = random.Random(seed ^ 0x80A5)
    rule, case_id, args = rng.choice(row_cases())
    symmetric = SYMMETRIC_INPUTS.get(rule.name, ())
    consts, body, params, spec, pieces = [], [], [], [], {}
    env = {"xp": np, "np": np, **rules.FORMULA_GLOBALS}

    def operand(value, label):
        """A perturbed float array: a new argument; returns the local name."""
        k = len(params)
        c = f"C{k}"
        consts.append(f"{c} = {_const(value)}")
        x = f"x{k}"
        params.append(x)
        value = np.asarray(value, dtype=float)
        spec.append(("array", value.shape) if value.shape else ("float",))
        bump = f"0.05 * {x}"
        if label in symmetric:
            bump = f"0.025 * ({x} + np.swapaxes({x}, -1, -2))"
        body.append(f"    a{k} = {c} + {bump}")
        env[f"a{k}"] = value
        return f"a{k}"

    for name in rule.params:
        value = args[name]
        differentiable = name in rule.vjp
        if differentiable and isinstance(value, (list, tuple)) and _float_array(value):
            names = [operand(v, name) for v in value]
            joined = ", ".join(names)
            pieces[name] = f"[{joined}]" if isinstance(value, list) else f"({joined},)"
        elif differentiable and _float_array(value):
            pieces[name] = operand(value, name)
        elif isinstance(value, (np.ndarray, np.generic)):
            c = f"K{len(consts)}"
            consts.append(f"{c} = {_const(value)}")
            pieces[name] = c
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
            names = []
            for v in value:
                c = f"K{len(consts)}"
                consts.append(f"{c} = {_const(v)}")
                names.append(c)
            pieces[name] = "[" + ", ".join(names) + "]"
        elif callable(value) and not isinstance(value, type):
            return None  # a function-valued parameter (a pack hook): not a user's call
        else:
            pieces[name] = repr(value)
    expr = _substitute(rule.render, pieces)
    try:
        with np.errstate(all="ignore"):
            ns = dict(env)
            exec("\n".join(c for c in consts), ns)  # noqa: S102 - our own constants
            out = eval(expr, ns)  # noqa: S307 - the row's primal at the case
    except Exception:  # noqa: BLE001 - a case the render cannot run outside the compiler
        return None
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not outs or any(np.asarray(o).dtype.kind != "f" for o in outs):
        return None
    wrng = np.random.default_rng(zlib.crc32(f"{rule.name}/{case_id}".encode()))
    terms = []
    for i, o in enumerate(outs):
        consts.append(f"W{i} = {_const(wrng.standard_normal(np.shape(o)))}")
        at = f"_out[{i}]" if isinstance(out, (tuple, list)) else "_out"
        terms.append(f"xp.sum(W{i} * {at})")
    source = "\n".join([
        "import math", "", "import numpy as np", "import numpy as xp", "",
        "from srcgrad.rules.helpers import *  # noqa: F403", "",
        f"ARGS = {spec!r}", "OUTPUT = 'scalar'", f"ROW = {rule.name!r}  # case {case_id!r}",
        *consts, "", "",
        f"def f({', '.join(params)}):", *body, f"    _out = {expr}", f"    return {' + '.join(terms)}", ""])
    return Program(seed, source, "f", spec, "scalar", {"table_row", f"row:{rule.name}"})
