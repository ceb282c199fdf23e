"""IR → Python source.

Python decides every line: each op becomes one statement, rendered from its rule's
`render` template by substituting operands into the template's AST (so precedence
is always right) and dropping keyword arguments left at their defaults. jinja2
only lays out the module and function skeletons (templates/). Every rendering is
checked with `ast.parse` before it leaves this module.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.resources
import inspect
import math
import os
from pathlib import Path

import jinja2
import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Pack, Var


# ---------------------------------------------------------------------- operands
class ConstPool:
    """Constants that have no literal form, bound as module globals `_const0`, ..."""

    def __init__(self):
        self.by_id: dict = {}
        self.values: dict = {}

    def name_for(self, value) -> str:
        entry = self.by_id.get(id(value))
        if entry is None:
            name = f"_const{len(self.values)}"
            self.by_id[id(value)] = (name, value)  # keep value alive so its id stays unique
            self.values[name] = value
            return name
        return entry[0]


def operand_ast(operand, pool: ConstPool, in_index: bool = False) -> ast.expr:
    if isinstance(operand, Var):
        return ast.Name(operand.name, ast.Load())
    if isinstance(operand, Pack):
        items = [operand_ast(i, pool) for i in operand.items]
        if operand.style == "slice":
            if in_index:
                return ast.Slice(*(None if _is_none(i) else a for i, a in zip(operand.items, items)))
            return _call("slice", items)
        if in_index and operand.style == "tuple":
            return ast.Tuple([operand_ast(i, pool, in_index=True) for i in operand.items], ast.Load())
        return (ast.Tuple if operand.style == "tuple" else ast.List)(items, ast.Load())
    return const_ast(operand.value, pool, in_index)


def _is_none(operand) -> bool:
    return isinstance(operand, Const) and operand.value is None


def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


def const_ast(value, pool: ConstPool, in_index: bool = False) -> ast.expr:
    if isinstance(value, numpy.generic) and value.dtype.kind in "fiub" and value.ndim == 0:
        # a NumPy scalar keeps its dtype (NEP 50: it is not a weak Python scalar)
        return ast.Call(ast.Attribute(ast.Name("xp", ast.Load()), value.dtype.name, ast.Load()),
                        [ast.Constant(value.item())], [])
    if value is None or value is Ellipsis or isinstance(value, (bool, str, int)):
        return ast.Constant(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return ast.Constant(value)
        return _call("float", [ast.Constant(repr(value))])
    if isinstance(value, tuple):
        return ast.Tuple([const_ast(v, pool, in_index) for v in value], ast.Load())
    if isinstance(value, list):
        return ast.List([const_ast(v, pool) for v in value], ast.Load())
    if isinstance(value, slice):
        parts = [None if p is None else const_ast(p, pool) for p in (value.start, value.stop, value.step)]
        if in_index:
            return ast.Slice(*parts)
        return _call("slice", [p or ast.Constant(None) for p in parts])
    if isinstance(value, type) and issubclass(value, numpy.generic):
        return ast.Attribute(ast.Name("xp", ast.Load()), value.__name__, ast.Load())
    if isinstance(value, numpy.dtype):
        return ast.Attribute(ast.Name("xp", ast.Load()), value.name, ast.Load())
    return ast.Name(pool.name_for(value), ast.Load())


# ---------------------------------------------------------------------- ops
@functools.cache
def _template(render: str) -> ast.expr:
    return ast.parse(render, mode="eval").body


class _Substitute(ast.NodeTransformer):
    """Put an op's operands into its rule's render template."""

    def __init__(self, rule, operands: dict, pool):
        self.rule, self.operands, self.pool = rule, operands, pool
        self.defaults = {n: p.default for n, p in rule.py_signature.parameters.items()}

    def visit_Name(self, node):
        if node.id in self.operands:
            return operand_ast(self.operands[node.id], self.pool)
        return node

    def visit_Subscript(self, node):
        node.value = self.visit(node.value)
        if isinstance(node.slice, ast.Name) and node.slice.id in self.operands:
            node.slice = operand_ast(self.operands[node.slice.id], self.pool, in_index=True)
        else:
            node.slice = self.visit(node.slice)
        return node

    def visit_Call(self, node):
        node.func = self.visit(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name) \
                    and isinstance(self.operands.get(a.value.id), Pack):
                args.extend(operand_ast(i, self.pool) for i in self.operands[a.value.id].items)
            else:
                args.append(self.visit(a))
        node.args = args
        keywords = []
        for kw in node.keywords:
            if isinstance(kw.value, ast.Name) and kw.value.id in self.operands:
                operand = self.operands[kw.value.id]
                default = self.defaults.get(kw.value.id, inspect.Parameter.empty)
                if isinstance(operand, Const) and _same_const(operand.value, default):
                    continue
            keywords.append(self.visit(kw))
        node.keywords = keywords
        return node


def _same_const(value, default) -> bool:
    if default is inspect.Parameter.empty:
        return False
    return type(value) is type(default) and value == default


def op_expr(op, pool: ConstPool) -> ast.expr:
    rule = rules.RULES[op.prim]
    template = _copy(_template(rule.render))
    method = op.attrs.get("as_method")
    if method and _is_namespace_call(template, rule.params[0]):
        # xp.f(x, *rest) -> x.method(*rest): the receiver is known to be an array
        template.func = ast.Attribute(template.args[0], method, ast.Load())
        template.args = template.args[1:]
    operands = dict(zip(rule.params, op.args))
    return _Substitute(rule, operands, pool).visit(template)


def _is_namespace_call(node, first_param) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "xp"
            and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == first_param)


def _copy(node):
    return ast.parse(ast.unparse(node), mode="eval").body


def op_statement(op, pool: ConstPool) -> str:
    targets = ", ".join(o.name for o in op.outs)
    into = op.attrs.get("out")
    if into is not None:  # srcgrad.passes.inplace: the result reuses a dead operand's buffer
        args = ", ".join(operand_source(a, pool) for a in op.args)
        return f"{targets} = xp.{op.attrs['ufunc']}({args}, out={into.name})"
    if "math" in op.attrs:  # Note [Scalar code]: Python floats in, a Python float out
        return f"{targets} = math.{op.attrs['math']}({', '.join(operand_source(a, pool) for a in op.args)})"
    if "python_value" in op.attrs:
        return f"{targets} = {operand_source(op.attrs['python_value'], pool)}"
    if op.prim == "custom_call":  # Note [Custom Functions]: name the forward's outputs
        return f"{targets} = {', '.join(operand_source(a, pool) for a in op.args[0].items)}"
    if op.prim == "tape_pop":  # a tuple per iteration (Note [Reverse mode of control flow])
        return f"{targets}, = {op.args[0].name}.pop()" if op.outs else f"{op.args[0].name}.pop()"
    if not op.outs:
        return ast.unparse(op_expr(op, pool))
    if len(op.outs) == 1 and callable(rules.RULES[op.prim].nout):
        targets += ","
    return f"{targets} = {ast.unparse(op_expr(op, pool))}"


def control_lines(op, pool: ConstPool, backward: bool) -> list:
    """`if`/`for`/`while` statements for a control-flow op (Note [Regions])."""
    def body(block, extra=()):
        lines = block_lines(block.ops, pool, backward=backward) + list(extra)
        return ["    " + line if line else "" for line in (lines or ["pass"])]

    def assign(targets, values):
        pairs = [(t, v) for t, v in zip(targets, values) if t != v]
        if not pairs:
            return []
        return [f"{', '.join(t for t, _ in pairs)} = {', '.join(v for _, v in pairs)}"]

    names = [o.name for o in op.outs]
    if op.prim == "cond":
        then, other = op.blocks
        return ([f"if {operand_source(op.args[0], pool)}:"]
                + body(then, assign(names, [operand_source(r, pool) for r in then.results]))
                + ["else:"]
                + body(other, assign(names, [operand_source(r, pool) for r in other.results])))
    block = op.blocks[0]
    carried = [p.name for p in block.params[1:]]
    inits = [operand_source(a, pool) for a in op.args[-1].items]
    results = [operand_source(r, pool) for r in block.results]
    if op.prim == "while_loop":
        flag = block.params[0].name
        return (assign([flag] + carried, [operand_source(op.args[0], pool)] + inits)
                + [f"while {flag}:"]
                + body(block, assign([flag] + carried, results))
                + assign(names, carried))
    start, stop, step = (operand_source(a, pool) for a in op.args[:3])
    bounds = stop if start == "0" and step == "1" else (
        f"{start}, {stop}" if step == "1" else f"{start}, {stop}, {step}")
    iterable = f"range({bounds})" + ("[::-1]" if op.attrs.get("reverse") else "")
    return (assign(carried, inits)
            + [f"for {block.params[0].name} in {iterable}:"]
            + body(block, assign(carried, results))
            + assign(names, carried))


def operand_source(operand, pool: ConstPool) -> str:
    return ast.unparse(operand_ast(operand, pool))


# ---------------------------------------------------------------------- blocks
def block_lines(ops: list, pool: ConstPool, *, backward: bool = False) -> list:
    """Statements for `ops`, one comment per run of ops from one source line."""
    lines, last = [], object()
    for op in ops:
        loc = op.loc
        key = (loc.file, loc.line) if loc else None
        if key != last:
            if loc is not None:
                if lines:
                    lines.append("")
                where = f"({os.path.basename(loc.file)}:{loc.line})"
                lines.append(f"# grad of: {loc.text}  {where}" if backward else f"# {loc.text}  {where}")
            last = key
        if rules.RULES[op.prim].control:
            lines.extend(control_lines(op, pool, backward))
            last = object()  # a comment again after the block
        else:
            lines.append(op_statement(op, pool))
    return lines


# ---------------------------------------------------------------------- templates
def _template_dir() -> Path:
    try:
        path = Path(str(importlib.resources.files("srcgrad.templates")))
        if path.is_dir():
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "templates"  # a source checkout


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(_template_dir())),
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined, autoescape=False)


@functools.lru_cache(maxsize=1)
def templates_fingerprint() -> str:
    h = hashlib.sha256()
    for path in sorted(_template_dir().glob("*.j2")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def render_function(name: str, params: list, body: list, result: str, doc: str = "") -> str:
    text = _environment().get_template("function.py.j2").render(
        name=name, params=params, body=body, result=result, doc=doc)
    ast.parse(text)
    return text.rstrip("\n")


def render_dispatcher(name: str, params: list, args: list, guards: list) -> str:
    """The function a transform returns: O(1) guards on argument shapes pick the
    variant compiled for them (Note [Shape specialisation]); anything else misses.

    Written with an f-string, not a template: it is rendered when a transform is
    created and again on each miss, and a process's first jinja2 template compile
    costs milliseconds (the disk-cache hit budget is 5 ms; DESIGN decision 11).
    """
    call = ", ".join(args)
    lines = [f"def {name}({', '.join(params)}):"]
    if guards:
        lines += [f"    if {' and '.join(guards)}:", f"        return _impl({call})"]
    lines.append(f"    return _miss({call})")
    return "\n".join(lines) + "\n"


def render_module(functions: list, *, version: str, origin: str, key: str, helpers=(),
                  constants=(), standalone: bool = False) -> str:
    helper_sources = [_helper_source(h) for h in helpers] if standalone else []
    if standalone and helpers:
        helper_sources = [_helper_source(n) for n in ("_namespace", "_normalize_axes",
                                                      "_is_basic_index")] + helper_sources
    text = _environment().get_template("module.py.j2").render(
        functions=functions, version=version, origin=origin, key=key, helpers=list(helpers),
        constants=list(constants), standalone=standalone, helper_sources=helper_sources)
    ast.parse(text)
    return text


def _helper_source(name: str) -> str:
    from srcgrad.rules import helpers

    return inspect.getsource(getattr(helpers, name)).rstrip("\n")


def helpers_used(source_lines) -> list:
    """Helper functions (srcgrad.rules.helpers) a body calls, in a stable order."""
    text = "\n".join(source_lines)
    tree = ast.parse(text)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name)}
    return [h for h in rules.HELPER_NAMES if h in called]
