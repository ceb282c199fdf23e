"""Read a function's source and parse it with gast."""

from __future__ import annotations

import inspect
import linecache
import textwrap
from dataclasses import dataclass, field

import gast

from srcgrad.errors import CompileError
from srcgrad.ir.core import Loc


@dataclass
class FunctionSource:
    """A parsed Python function and everything its names may resolve to."""

    fn: object  # the function object itself
    node: gast.FunctionDef  # its definition, line numbers relative to `source`
    source: str  # dedented text of the definition
    filename: str
    line_offset: int  # file line of `source`'s line 1, minus 1
    col_offset: int  # columns removed by dedenting
    globals: dict
    closure: dict = field(default_factory=dict)  # free variable name -> cell contents
    # Per parameter, the tree definition (srcgrad.ir.tree) of a container argument, or
    # None: every parameter one array (Note [Container arguments] in srcgrad.ir.tree).
    arg_trees: tuple | None = None

    def loc(self, node) -> Loc:
        """The source location of a gast node of this function."""
        line = getattr(node, "lineno", 1) + self.line_offset
        col = getattr(node, "col_offset", 0) + self.col_offset
        text = linecache.getline(self.filename, line).rstrip("\n")
        return Loc(self.filename, line, col, text.strip())

    @property
    def name(self) -> str:
        return self.node.name


def _source_lines(fn, code):
    """(lines, first line number) of a function's definition.

    The code object knows where the definition starts and (through its positions,
    Python 3.11+) where its last statement ends, so the lines come straight from
    linecache; `inspect.getsourcelines` tokenizes to find the end, which costs
    milliseconds on a process's first call (DESIGN decision 11).
    """
    positions = getattr(code, "co_positions", None)
    lines = linecache.getlines(code.co_filename)
    if positions is None or not lines or code.co_name == "<lambda>":
        return inspect.getsourcelines(fn)
    end = _last_line(code)
    first = code.co_firstlineno
    chunk = lines[first - 1:end]
    text = textwrap.dedent("".join(chunk))
    try:
        tree = gast.parse(text)
    except SyntaxError:
        return inspect.getsourcelines(fn)
    if not tree.body or not isinstance(tree.body[0], gast.FunctionDef):
        return inspect.getsourcelines(fn)
    return chunk, first


def _last_line(code) -> int:
    end = code.co_firstlineno
    for _, line_end, _, _ in code.co_positions():
        if line_end is not None and line_end > end:
            end = line_end
    for const in code.co_consts:
        if hasattr(const, "co_positions"):
            end = max(end, _last_line(const))
    return end


def parse_function(fn) -> FunctionSource:
    """Parse `fn`'s source; CompileError when there is none to read."""
    compiled = getattr(fn, "__srcgrad__", None)
    if compiled is not None:
        # A transform's result runs generated code: that code is what gets parsed
        # (grad(grad(f)) differentiates the generated gradient, not f).
        fn = compiled.entry()
    else:
        fn = inspect.unwrap(fn, stop=lambda f: hasattr(f, "__srcgrad__"))
        if hasattr(fn, "__srcgrad__"):
            fn = fn.__srcgrad__.entry()
    code = getattr(fn, "__code__", None)
    if code is None:
        raise CompileError(f"cannot compile {fn!r}: it is not a Python function",
                           hint="pass a function defined with `def` in a file")
    if code.co_name == "<lambda>":
        return _parse_lambda(fn, code)
    try:
        lines, first = _source_lines(fn, code)
    except (OSError, TypeError) as err:
        raise CompileError(f"cannot read the source of {fn.__qualname__}: {err}",
                           filename=code.co_filename, lineno=code.co_firstlineno,
                           hint="define the function in a file (not in an interactive prompt)") from None
    raw = "".join(lines)
    source = textwrap.dedent(raw)
    col_offset = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    module = gast.parse(source)
    node = module.body[0]
    if not isinstance(node, gast.FunctionDef):
        raise CompileError(f"cannot compile {fn.__qualname__}: only functions defined with "
                           "`def` are supported here", filename=code.co_filename,
                           lineno=first, hint="write it as a `def`")
    closure = {}
    if fn.__closure__:
        for name, cell in zip(code.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:  # an empty cell: the name is not bound yet
                pass
    return FunctionSource(fn=fn, node=node, source=source, filename=code.co_filename,
                          line_offset=max(first, 1) - 1, col_offset=col_offset,
                          globals=fn.__globals__, closure=closure)


def _parse_lambda(fn, code) -> FunctionSource:
    """A lambda's source: `inspect` gives only whole lines, so the file is parsed and
    the Lambda node found by its line, parameter names and (when several lambdas share
    the line) the positions of its code. It becomes a `def` named after the name it is
    assigned to (`sq = lambda x: ...` compiles as `def sq(x): return ...`)."""
    lines = linecache.getlines(code.co_filename)
    where = dict(filename=code.co_filename, lineno=code.co_firstlineno)
    if not lines:
        raise CompileError(f"cannot read the source of {fn.__qualname__}", **where,
                           hint="define the lambda in a file (not in an interactive prompt)")
    try:
        module = gast.parse("".join(lines))
    except SyntaxError as err:
        raise CompileError(f"cannot parse the file of {fn.__qualname__}: {err}", **where) from None
    params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    found = [n for n in gast.walk(module) if isinstance(n, gast.Lambda)
             and n.lineno == code.co_firstlineno
             and tuple(a.id for a in n.args.args + n.args.kwonlyargs) == params]
    if len(found) > 1:
        spots = [(line, col) for _, line, col, _ in code.co_positions()
                 if line is not None and col is not None]
        found = [n for n in found if any(
            (n.body.lineno, n.body.col_offset) <= spot <= (n.body.end_lineno, n.body.end_col_offset)
            for spot in spots)]
    if len(found) != 1:
        raise CompileError(f"cannot tell which lambda on line {code.co_firstlineno} is "
                           f"{fn.__qualname__}", **where, hint="write it as a `def`")
    lam = found[0]
    name = "lambda_"
    for n in gast.walk(module):
        if isinstance(n, gast.Assign) and n.value is lam and len(n.targets) == 1 \
                and isinstance(n.targets[0], gast.Name):
            name = n.targets[0].id
    node = gast.parse(f"def {name}(): pass").body[0]
    node.args = lam.args
    node.body = [gast.copy_location(gast.Return(value=lam.body), lam.body)]
    gast.copy_location(node, lam)
    closure = {}
    if fn.__closure__:
        for var, cell in zip(code.co_freevars, fn.__closure__):
            try:
                closure[var] = cell.cell_contents
            except ValueError:
                pass
    source = "".join(lines[lam.lineno - 1:lam.end_lineno])
    return FunctionSource(fn=fn, node=node, source=source, filename=code.co_filename,
                          line_offset=0, col_offset=0, globals=fn.__globals__, closure=closure)
