"""Read a function's source and parse it with gast."""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
import re
import textwrap
import weakref

import gast

from srcgrad.errors import CompileError, last_line
from srcgrad.ir.core import FACTORY, EqFields, Loc
from srcgrad.ir.gast_nodes import FUNCTIONS_WITHOUT_GAST, to_gast


class FunctionSource(EqFields):
    """A parsed Python function and everything its names may resolve to. A `@dataclass`
    written out (equality over the fields, no hash, its repr: srcgrad.ir.core.Loc says why)."""

    __slots__ = __match_args__ = ("fn", "node", "source", "filename", "line_offset", "col_offset",
                                  "globals", "closure", "arg_trees")

    def __init__(self, fn: object, node: gast.FunctionDef, source: str, filename: str,
                 line_offset: int, col_offset: int, globals: dict, closure: dict = FACTORY,
                 arg_trees: tuple | None = None):
        self.fn = fn  # the function object itself
        self.node = node  # its definition, line numbers relative to `source`
        self.source = source  # dedented text of the definition
        self.filename = filename
        self.line_offset = line_offset  # file line of `source`'s line 1, minus 1
        self.col_offset = col_offset  # columns removed by dedenting
        self.globals = globals
        self.closure = {} if closure is FACTORY else closure  # free variable name -> cell contents
        # Per parameter, the tree definition (srcgrad.ir.tree) of a container argument, or
        # None: every parameter one array (Note [Container arguments] in srcgrad.ir.tree).
        self.arg_trees = arg_trees

    def loc(self, node) -> Loc:
        """The source location of a gast node of this function."""
        line = getattr(node, "lineno", 1) + self.line_offset
        col = getattr(node, "col_offset", 0) + self.col_offset
        text = linecache.getline(self.filename, line).rstrip("\n")
        return Loc(self.filename, line, col, text.strip())

    @property
    def name(self) -> str:
        return self.node.name

    def replace(self, **changes) -> FunctionSource:
        """A copy with `changes` to its fields (as `dataclasses.replace`: the pipeline
        gives a parsed function its argument trees so)."""
        return self.__class__(**{**{f: getattr(self, f) for f in self.__match_args__}, **changes})


def _parse(text: str):
    """gast.parse(text), without gast's converter where srcgrad.ir.gast_nodes.to_gast makes its
    nodes (Note [Formulas without gast's converter])."""
    return to_gast(ast.parse(text)) if FUNCTIONS_WITHOUT_GAST else gast.parse(text)


def _source_lines(fn, code):
    """(lines, first line number, the dedented text's gast module or None) of a function's
    definition.

    The code object knows where the definition starts and (through its positions,
    Python 3.11+) where its last statement ends, so the lines come straight from
    linecache; `inspect.getsourcelines` tokenizes to find the end, which costs
    milliseconds on a process's first call (DESIGN decision 11). The parse that checks
    those lines hold the definition is the function's parse (parse_function takes it):
    parsing its text twice was 0.2 ms of a cold first gradient (issue 15).
    """
    positions = getattr(code, "co_positions", None)
    lines = linecache.getlines(code.co_filename)
    if positions is None or not lines or code.co_name == "<lambda>":
        return (*inspect.getsourcelines(fn), None)
    end = last_line(code)
    first = code.co_firstlineno
    chunk = lines[first - 1:end]
    text = textwrap.dedent("".join(chunk))
    try:
        tree = _parse(text)
    except SyntaxError:
        return (*inspect.getsourcelines(fn), None)
    if not tree.body or not isinstance(tree.body[0], gast.FunctionDef):
        return (*inspect.getsourcelines(fn), None)
    return chunk, first, tree


def parse_function(fn) -> FunctionSource:
    """Parse `fn`'s source; CompileError when there is none to read."""
    if inspect.ismethod(fn) and inspect.isfunction(fn.__func__) and not isinstance(
            fn.__self__, type) and not fn.__func__.__module__.startswith("srcgrad"):
        fn = functools.partial(fn.__func__, fn.__self__)  # sg.vjp(sim.loss, x): Note [Bound methods]
    if isinstance(fn, functools.partial):
        fn = partial_function(fn)
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
        lines, first, module = _source_lines(fn, code)
    except (OSError, TypeError) as err:
        raise CompileError(f"cannot read the source of {fn.__qualname__}: {err}",
                           filename=code.co_filename, lineno=code.co_firstlineno,
                           hint="define the function in a file (not in an interactive prompt)") from None
    raw = "".join(lines)
    source = textwrap.dedent(raw)
    col_offset = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    if module is None:  # (inspect's lines: not parsed yet)
        module = _parse(source)
    node = module.body[0]
    if not isinstance(node, gast.FunctionDef):
        raise CompileError(f"cannot compile {fn.__qualname__}: only functions defined with "
                           "`def` are supported here", filename=code.co_filename,
                           lineno=first, hint="write it as a `def`")
    if not _defines(node, code):  # (fuzz seed 2670430: a generated module's lines replaced)
        raise CompileError(f"cannot compile {fn.__qualname__}: the source at "
                           f"{code.co_filename}:{first} is not the definition it was compiled "
                           "from (the file changed since it was loaded?)",
                           filename=code.co_filename, lineno=first,
                           hint="reload the module (or restart) so the code and its file agree")
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


def _defines(node, code) -> bool:
    """Whether the `def` read is the one `code` was compiled from: its name and its
    parameters' names. The tracer differentiates the text, the caller runs the code, so
    a text that is not the code's (a file edited after its import, a linecache entry
    another module's text replaced) would be a right-looking wrong answer."""
    a = node.args
    params = [p.id for p in a.posonlyargs + a.args + a.kwonlyargs]
    return node.name == code.co_name and params == list(
        code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])


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
        module = _parse("".join(lines))
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


# `# grad of: s = s + f(x)  (model.py:12)`: a generated statement's user line (templates/);
# compiled on first use, by `re`'s own cache (an error: not on every compile's start, 0.3 ms)
_ORIGIN = r"^\s*# (?:grad of: |tangent of: )?(.*?)\s+\((\S+?):(\d+)\)\s*$"


def user_line(filename: str, lineno: int) -> Loc | None:
    """The user's line behind line `lineno` of a generated module: the origin comment
    codegen writes above each statement group (None when there is none)."""
    lines = linecache.getlines(filename)
    for line in reversed(lines[:lineno]):
        found = re.match(_ORIGIN, line)
        if found:
            text, path, number = found.groups()
            return Loc(_full_path(path), int(number), 0, text.strip())
    return None


def _full_path(path: str) -> str:
    """The file a generated comment's short path (relative, or a base name) names: the
    source file srcgrad read it from (in linecache) when exactly one matches."""
    if os.path.exists(path):
        return os.path.abspath(path)
    tail = os.sep + os.path.basename(path)
    found = [f for f in list(linecache.cache) if f.endswith(tail) and os.path.isabs(f)]
    return found[0] if len(found) == 1 else path


def is_generated(fs) -> bool:
    """Whether `fs` is a transform's generated function (grad(grad(f)) traces one)."""
    return fs.globals.get("__name__") == "srcgrad.generated"


_PARTIALS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # partial -> its function


def partial_function(p):
    """A plain function for `functools.partial(f, *args, **keywords)`: its parameters are
    `f`'s positional parameters the partial leaves open, and it calls `f` with the bound
    values, which compiled code reads as constants (globals of the function), as
    `jax.grad(partial(f, a=2.0))` does. Other partials (of builtins, or leaving
    `*args`) are returned as they are, and refused where their source is read."""
    made = _PARTIALS.get(p)
    if made is not None:
        return made
    fn = p.func
    while isinstance(fn, functools.partial):  # partial(partial(f, a), b): flattened by Python
        fn = fn.func
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return p
    if not isinstance(fn, type(partial_function)) or any(
            q.kind not in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD) for q in params):
        return p
    bound, ns = [], {"_fn": fn, "__name__": getattr(fn, "__module__", None) or "__main__"}
    for i, value in enumerate(p.args):
        ns[f"_arg{i}"] = value
        bound.append(f"_arg{i}")
    open_params, signature = [q.name for q in params[len(p.args):] if q.name not in p.keywords], []
    for q in params[len(p.args):]:
        if q.name in p.keywords:
            continue
        if q.default is not q.empty:
            ns[f"_default_{q.name}"] = q.default
        signature.append(q.name if q.default is q.empty else f"{q.name}=_default_{q.name}")
    for i, (key, value) in enumerate(p.keywords.items()):
        ns[f"_kw{i}"] = value
        bound.append(f"{key}=_kw{i}")
    call = ", ".join(bound[:len(p.args)] + [f"{q}={q}" for q in open_params] + bound[len(p.args):])
    made = _PARTIALS[p] = _stand_in(fn, "partial", signature, call, ns, f"{id(p):x}")
    return made


def leading_function(fn, n: int):
    """A plain function of `fn`'s first `n` parameters that calls `fn` with them, its
    other parameters taking their defaults: a transform called with `n` arguments
    differentiates this, so the defaults are constants of the program (as
    partial_function's bound values are), not inputs with gradients or tangents. `fn`
    itself where a later parameter has no default or a parameter is not a plain
    positional one (the transform's call then fails as a call of `fn` would)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn
    if not isinstance(fn, type(leading_function)) or len(params) <= n or any(
            q.kind is not q.POSITIONAL_OR_KEYWORD for q in params) or any(
            q.default is q.empty for q in params[n:]):
        return fn
    names = [q.name for q in params[:n]]
    ns = {"_fn": fn, "__name__": getattr(fn, "__module__", None) or "__main__"}
    return _stand_in(fn, "defaults", names, ", ".join(names), ns, f"{id(fn):x} {n}")


def keyword_function(fn):
    """A plain function for `def f(x, *, s=2.0)` or `def f(x, **options)`: its
    keyword-only parameters (each with a default) become parameters after the positional
    ones, passed on by name, and `**options` is left empty; `fn` itself where it takes
    `*args` or a keyword-only parameter without a default (the trace refuses those with
    a rewrite: list the parameters explicitly)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn
    if not isinstance(fn, type(keyword_function)) or any(
            q.kind is q.VAR_POSITIONAL or q.kind is q.KEYWORD_ONLY and q.default is q.empty
            for q in params):
        return fn
    ns = {"_fn": fn, "__name__": getattr(fn, "__module__", None) or "__main__"}
    signature, call = [], []
    for q in params:
        if q.kind is q.VAR_KEYWORD:
            continue
        if q.default is not q.empty:
            ns[f"_default_{q.name}"] = q.default
        signature.append(q.name if q.default is q.empty else f"{q.name}=_default_{q.name}")
        call.append(f"{q.name}={q.name}" if q.kind is q.KEYWORD_ONLY else q.name)
    return _stand_in(fn, "keywords", signature, ", ".join(call), ns, f"{id(fn):x}")


def _stand_in(fn, kind: str, signature: list, call: str, ns: dict, tag: str):
    """`def <fn>_<kind>(<signature>): return _fn(<call>)`, executed in `ns`, its text
    in linecache where the compiler reads it."""
    base = fn.__name__ if fn.__name__.isidentifier() else "_lambda"  # (`<lambda>`)
    name = f"{base}_{kind}"
    text = f"def {name}({', '.join(signature)}):\n    return _fn({call})\n"
    filename = f"<srcgrad {kind} {fn.__qualname__} {tag}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    exec(compile(text, filename, "exec", dont_inherit=True), ns)  # noqa: S102 (our own text)
    return ns[name]
