"""The `srcgrad` command line.

    srcgrad emit FILE.py:FUNC [--wrt x,W] [--mode reverse|forward|both] [--no-optimize] [--ir] [-o OUT.py]
    srcgrad check FILE.py:FUNC --args "(3,4), (4,)" [--mode reverse|forward|both]
    srcgrad graph FILE.py:FUNC [--mode reverse|forward] [--wrt x,W] [--format dot|svg|png] [-o OUT]
    srcgrad cache {info,clear}
    srcgrad --version

Exit status: 0 success, 1 the function cannot be compiled (CompileError) or a check
failed, 2 a usage error (bad FILE:FUNC, missing file or function, bad --args, options
the api refuses with ValueError, a missing Graphviz for --format svg|png). Usage
errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from srcgrad._version import __version__
from srcgrad.errors import CompileError


class UsageError(Exception):
    """A one-line problem with what the user asked for (exit status 2)."""


class Unsupported(Exception):
    """The api refused the options asked for (a ValueError from it; exit status 2)."""


class Unavailable(Exception):
    """The api function behind a command does not exist in this version."""


def _api(name: str, command: str) -> Callable[..., Any]:
    """`srcgrad.api.<name>`, imported only when a command needs it."""
    try:
        api = importlib.import_module("srcgrad.api")
    except ModuleNotFoundError as err:
        if err.name not in ("srcgrad.api", "srcgrad"):
            raise  # a real missing dependency inside the api: let it show
        raise Unavailable(command) from None
    fn = getattr(api, name, None)
    if fn is None:
        raise Unavailable(command)
    return fn


def _module_name(path: Path) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in path.stem) or "_module"
    if name[0].isdigit():
        name = "_" + name
    # Never shadow a module this process already has (a user file called json.py).
    return name if name not in sys.modules else f"_srcgrad_user_{name}"


def load_function(spec: str) -> Callable[..., Any]:
    """The function named by `FILE.py:FUNC` (FUNC may be dotted: `Model.loss`)."""
    file, sep, func = spec.rpartition(":")
    if not sep or not file or not func:
        raise UsageError(f"expected FILE.py:FUNC, got {spec!r}")
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"no such file: {file}")
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so the file's sibling imports work
    name = _module_name(path)
    mod_spec = importlib.util.spec_from_file_location(name, path)
    if mod_spec is None or mod_spec.loader is None:
        raise UsageError(f"cannot import {file}")
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module  # inspect.getsource and dataclasses look it up there
    try:
        # what the file's top level prints goes to stderr: stdout is the emitted module
        with contextlib.redirect_stdout(sys.stderr):
            mod_spec.loader.exec_module(module)
    except Exception as err:
        sys.modules.pop(name, None)
        raise UsageError(f"cannot import {file}: {_one_line(err)}") from None
    obj: Any = module
    for part in func.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{file} has no function {func!r}") from None
    if not callable(obj):
        raise UsageError(f"{file}:{func} is not a function")
    return obj


def _one_line(err: BaseException) -> str:
    """`Type: message` on one line; a syntax error also says where (`file:line:`)."""
    if isinstance(err, SyntaxError):
        return f"{err.filename}:{err.lineno}: {type(err).__name__}: {err.msg}"
    return traceback.format_exception_only(type(err), err)[-1].strip()


def _write(text: str, out: str | None) -> None:
    if not text.endswith("\n"):
        text += "\n"
    if out is None or out == "-":
        sys.stdout.write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")


def _parse_wrt(text: str | None) -> tuple[int | str, ...] | None:
    if text is None:
        return None
    names = [w.strip() for w in text.split(",") if w.strip()]
    if not names:
        raise UsageError("--wrt needs at least one argument name")
    # An argument can't be called "0", so digits are positions.
    return tuple(int(w) if w.isdigit() else w for w in names)


def _wrt_indices(func: Callable[..., Any], text: str | None) -> tuple[int, ...]:
    """Parameter positions named by --wrt (names or positions); all of them by default."""
    params = list(inspect.signature(func).parameters)
    items = _parse_wrt(text)
    if items is None:
        return tuple(range(len(params)))
    indices = []
    for item in items:
        if isinstance(item, str):
            if item not in params:
                raise UsageError(f"--wrt {item}: {func.__name__}() has no argument named "
                                 f"{item!r} (it has {', '.join(params)})")
            item = params.index(item)
        elif item >= len(params):
            raise UsageError(f"--wrt {item}: {func.__name__}() has {len(params)} arguments")
        indices.append(item)
    return tuple(indices)


# -- srcgrad check --args --------------------------------------------------------------

# Note [The --args syntax]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# One item per argument, separated by commas, read as Python literals: a tuple is the
# shape of a random float64 array, `()` a 0-d array; a number is passed as it is (an
# int is not differentiated, a float is). `(3)` is read as the shape (3,), which is
# what a person writing it means, although Python reads it as 3. The older forms
# `3x4` and `scalar` still read as shapes.

_LEGACY_SHAPE = re.compile(r"(?<![\w.])(\d+(?:\s*x\s*\d+)+)(?![\w.])")


def parse_arg_spec(text: str) -> list:
    """`"(3,4), (4,), 2, 0.5"` -> [(3, 4), (4,), 2, 0.5]: shapes as tuples, numbers as
    themselves (Note [The --args syntax]). Raises argparse.ArgumentTypeError."""
    source = _LEGACY_SHAPE.sub(lambda m: "(" + m.group(1).replace("x", ",") + ",)", text)
    source = re.sub(r"(?<![\w.])scalar(?![\w.])", "()", source)
    wrapped = f"[{source}\n]"
    try:
        tree = ast.parse(wrapped, mode="eval").body
    except SyntaxError:
        raise argparse.ArgumentTypeError(
            f"cannot read {text!r}: write shapes as tuples and numbers as numbers, "
            f'e.g. "(3,4), (4,), 0.5"') from None
    if not isinstance(tree, ast.List) or not tree.elts:
        raise argparse.ArgumentTypeError("give one shape or number per argument")
    return [_arg_item(node, wrapped) for node in tree.elts]


def _arg_item(node: ast.expr, wrapped: str):
    segment = ast.get_source_segment(wrapped, node) or ""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read {segment!r}: not a shape or a number") from None
    if isinstance(value, int) and not isinstance(value, bool) and _parenthesized(node, wrapped):
        value = (value,)
    if isinstance(value, tuple):
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value):
            raise argparse.ArgumentTypeError(
                f"cannot read {segment!r}: a shape is a tuple of non-negative ints")
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    raise argparse.ArgumentTypeError(f"cannot read {segment!r}: not a shape or a number")


def _parenthesized(node: ast.expr, wrapped: str) -> bool:
    """Whether the element was written in parentheses: `(3)`."""
    lines = wrapped.splitlines(keepends=True)
    offset = sum(len(line) for line in lines[:node.lineno - 1]) + node.col_offset
    before = wrapped[:offset].rstrip()
    return before.endswith("(")


def _spec_text(items: list) -> str:
    """`items` as the user would write them: `(3, 4), (4,), 2, 0.5`."""
    return ", ".join(repr(item) for item in items)


# -- commands ----------------------------------------------------------------------------


# Note [emit --args]
# ~~~~~~~~~~~~~~~~~~
# emit's --args are example arguments: they give a dict, list, tuple or record argument
# its structure (Note [Emitted container arguments] in srcgrad.pipeline.standalone), and
# a function whose shape-generic code does not compile the shapes of the variant emitted.
# The syntax is check's (a tuple of ints is the shape of a random float64 array, a number
# is itself) nested in dict, list and tuple literals, and calls of the classes the file
# defines: "{'W': (3, 4), 'b': (4,)}, (5, 3)" or "Params(w=(3,), b=(3,)), (3,)".


def example_args(text: str, module_globals: dict) -> tuple:
    """emit's --args `text` as arguments (Note [emit --args])."""
    import numpy

    rng = numpy.random.default_rng(0)
    try:
        tree = ast.parse(f"[{text}\n]", mode="eval").body
    except SyntaxError:
        raise UsageError(f"--args {text!r}: not Python literals") from None

    def value(node):
        if isinstance(node, ast.Tuple) and node.elts and all(
                isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts):
            return rng.standard_normal(tuple(e.value for e in node.elts))
        if isinstance(node, ast.Tuple) and not node.elts:
            return rng.standard_normal(())
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [value(e) for e in node.elts]
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
            return {k.value: value(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and callable(module_globals.get(node.func.id)):
            return module_globals[node.func.id](*[value(a) for a in node.args],
                                                **{k.arg: value(k.value) for k in node.keywords})
        raise UsageError(f"--args: cannot read {ast.unparse(node)!r}: give shapes as tuples, "
                         "numbers, dict/list/tuple literals of them, or a class of the file "
                         "called on them")

    return tuple(value(e) for e in tree.elts)


def cmd_emit(args: argparse.Namespace) -> int:
    if args.ir:
        from srcgrad.frontend.parse import parse_function
        from srcgrad.ir.printer import print_graph

        func = load_function(args.target)
        fs = parse_function(func)
        wrt = _wrt_indices(func, args.wrt)
        modes = ("reverse", "forward") if args.mode == "both" else (args.mode,)
        texts = [print_graph(derivative_graph(fs, wrt, m, optimized=not args.no_optimize))
                 for m in modes]
        _write("\n\n".join(texts), args.output)
        return 0
    emit_standalone = _api("emit_standalone", "emit")
    func = load_function(args.target)
    try:
        namespace = {"backend": args.backend} if args.backend != "numpy" else {}
        if args.args is not None:
            namespace["args"] = example_args(args.args, vars(sys.modules.get(func.__module__, object)))
        source = emit_standalone(func, wrt=_parse_wrt(args.wrt), mode=args.mode,
                                 optimize=not args.no_optimize, **namespace)
    except ValueError as err:  # e.g. --wrt names no argument, a mode not available yet
        raise Unsupported(str(err)) from err
    if args.args is not None:  # the header's command line, runnable as it is
        source = source.replace(" --args ...`", f" --args \"{args.args}\"`", 1)
    _write(source, args.output)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from srcgrad.autograd.gradcheck import check_cli

    func = load_function(args.target)
    items = args.args
    params = list(inspect.signature(func).parameters)
    if len(items) != len(params):
        raise UsageError(f"--args gives {len(items)} shapes but {func.__name__}() takes "
                         f"{len(params)} arguments ({', '.join(params)})")
    try:
        modes = ("reverse", "forward") if args.mode == "both" else (args.mode,)
        ok, report = check_cli(func, items, **({} if args.mode == "both" else {"modes": modes}))
    except CompileError:
        raise
    except Exception as err:  # the user's function fails at these shapes
        raise UsageError(f"{func.__name__}() fails at --args {_spec_text(items)}: "
                         f"{type(err).__name__}: {err}") from None
    _write(report, None)
    return 0 if ok else 1


def cmd_graph(args: argparse.Namespace) -> int:
    from srcgrad.frontend.parse import parse_function
    from srcgrad.ir.dot import to_dot

    fmt = args.format or _format_from_name(args.output)
    if fmt == "png" and args.output in (None, "-") and sys.stdout.isatty():
        raise UsageError("--format png writes binary data: give -o FILE.png")
    func = load_function(args.target)
    fs = parse_function(func)
    if args.mode is None:
        from srcgrad import pipeline

        graph = pipeline.trace(fs)[0]
    else:
        graph = derivative_graph(fs, _wrt_indices(func, args.wrt), args.mode,
                                 optimized=not args.no_optimize)
    text = to_dot(graph)
    if fmt == "dot":
        _write(text, args.output)
    else:
        _write_bytes(render_dot(text, fmt), args.output)
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from srcgrad.codegen.cache import default_cache

    cache = default_cache()
    if args.action == "info":
        info = cache.info()
        for key, value in info.items():
            print(f"{key}: {value}")
        print(f"size: {_human_size(info['bytes'])} in {info['entries']} "
              f"cached module{'s' if info['entries'] != 1 else ''}")
    else:
        n = cache.clear()
        print(f"removed {n} cached module{'s' if n != 1 else ''} from {cache.directory}")
    return 0


def _human_size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # not reached


# -- graph: the derivative's IR and Graphviz -------------------------------------------


def derivative_graph(fs, wrt: tuple, mode: str, optimized: bool = True):
    """The IR `Graph` of `fs`'s derivative: its forward ops followed by the adjoint
    (mode "reverse": gradients w.r.t. the parameters in `wrt`, seeded with 1.0 for a
    provably scalar output and with a cotangent parameter per output otherwise) or
    with tangents interleaved (mode "forward": a tangent parameter per `wrt`)."""
    from srcgrad import pipeline
    from srcgrad.codegen import names
    from srcgrad.frontend.trace import Tracer
    from srcgrad.ir.core import Const, Graph, Var

    graph, namer = pipeline.trace(fs)
    wrt_vars = [graph.inputs[i] for i in wrt]
    extra: list = []
    if mode == "reverse":
        from srcgrad.passes.invariance import zero_edges
        from srcgrad.passes.vjp import reverse, zeros_for

        outs = [o for o in graph.outputs if isinstance(o, Var)]
        scalar = len(graph.outputs) == 1 and bool(outs) and pipeline.provably_scalar(graph.ops, outs[0])
        seeds = []
        for out in outs:
            seed = Const(1.0) if scalar else Var(namer.fresh(names.cotangent_name(out.name)))
            if isinstance(seed, Var):
                extra.append(seed)
            seeds.append((out, seed))
        backward, grads = reverse(graph.ops, wrt_vars, seeds, namer, zero_edges=zero_edges(graph.ops))
        tracer = Tracer(namer, backward)
        derivs = [grads[w] if grads[w] is not None else zeros_for(tracer, w) for w in wrt_vars]
        ops, name = graph.ops + backward, names.grad_fn_name(fs.name)
    elif mode == "forward":
        from srcgrad.passes.jvp import forward, tangent_name

        extra = [Var(namer.fresh(tangent_name(w.name))) for w in wrt_vars]
        ops, tangents = forward(graph.ops, dict(zip(wrt_vars, extra)), namer)
        derivs = [tangents.get(o, Const(0.0)) if isinstance(o, Var) else Const(0.0)
                  for o in graph.outputs]
        name = f"{fs.name}_jvp"
    else:
        raise ValueError(f"mode={mode!r}: choose 'reverse' or 'forward'")
    results = list(graph.outputs) + derivs
    if optimized:
        ops, results = pipeline.optimize(ops, results)
    inputs = list(graph.inputs) + extra
    names.tidy_temporaries(ops, [v.name for v in inputs])  # the names emitted code has
    return Graph(name, inputs, ops, results, loc=graph.loc,
                 param_names=graph.param_names)


_FORMATS = ("dot", "svg", "png")


def _format_from_name(output: str | None) -> str:
    suffix = Path(output).suffix.lower().lstrip(".") if output and output != "-" else ""
    return suffix if suffix in _FORMATS else "dot"


def render_dot(text: str, fmt: str) -> bytes:
    """DOT text rendered by Graphviz's `dot` program to `fmt` (svg or png)."""
    dot = shutil.which("dot")
    if dot is None:
        raise UsageError(f"--format {fmt} needs Graphviz's `dot` program, which is not on PATH: "
                         "install Graphviz (apt-get install graphviz, brew install graphviz, "
                         "conda install graphviz) or write DOT with --format dot")
    try:
        done = subprocess.run([dot, f"-T{fmt}"], input=text.encode("utf-8"),
                              capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UsageError(f"running {dot} failed: {err}") from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(f"{dot} -T{fmt} failed: {detail[0] if detail else done.returncode}")
    return done.stdout


def _write_bytes(data: bytes, out: str | None) -> None:
    if out is None or out == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        Path(out).write_bytes(data)


# -- the parser --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="srcgrad",
        description="Source-transformation autograd for NumPy: write gradients as code.")
    p.add_argument("--version", action="version", version=f"srcgrad {__version__}")
    sub = p.add_subparsers(dest="command", metavar="{emit,check,graph,cache}")
    sub.required = True

    e = sub.add_parser("emit", help="print a standalone module computing FUNC's gradient",
                       description="Print a standalone module (it needs only NumPy) computing "
                                   "FUNC's gradient. emit imports FILE.py, running its top "
                                   "level once, as `import` would; what it prints goes to "
                                   "stderr.")
    e.add_argument("target", metavar="FILE.py:FUNC")
    e.add_argument("--wrt", metavar="x,W",
                   help="comma-separated argument names (or positions) to differentiate "
                        "with respect to (default: all)")
    e.add_argument("--mode", choices=("reverse", "forward", "both"), default="reverse")
    e.add_argument("--backend", choices=("numpy", "cupy", "array-api", "numba"), default="numpy",
                   help="the array namespace the module imports: numpy, cupy, or array-api "
                        "(array_api_strict; rebind the module's `xp` for another); numba: "
                        "NumPy's code with its entry functions compiled by numba.njit")
    e.add_argument("--no-optimize", action="store_true",
                   help="skip simplify/cse/dce (shows the raw derivative)")
    e.add_argument("--ir", action="store_true",
                   help="print the derivative's IR (one op per line) instead of Python")
    e.add_argument("--args", metavar="ARGS",
                   help="example arguments, for a dict, list, tuple or dataclass argument's "
                        "structure: \"{'W': (3, 4), 'b': (4,)}, (5, 3)\" (a tuple of ints is "
                        "the shape of a random array; a class of FILE may be called: "
                        "\"Params(w=(3,), b=(3,)), (3,)\")")
    e.add_argument("-o", "--output", metavar="OUT.py", help="write here instead of stdout")
    e.set_defaults(run=cmd_emit)

    c = sub.add_parser("check", help="gradcheck FUNC against finite differences")
    c.add_argument("target", metavar="FILE.py:FUNC")
    c.add_argument("--args", required=True, metavar="ARGS", type=parse_arg_spec,
                   help='one per argument: a shape for a random float64 array, e.g. '
                        '"(3,4), (4,), ()", or a number passed as it is (an int is not '
                        'differentiated)')
    c.add_argument("--mode", choices=("reverse", "forward", "both"), default="both",
                   help="which Jacobians to check against finite differences (default: both)")
    c.set_defaults(run=cmd_check)

    g = sub.add_parser("graph", help="the IR graph of FUNC (or of its derivative) as Graphviz DOT")
    g.add_argument("target", metavar="FILE.py:FUNC")
    g.add_argument("--mode", choices=("reverse", "forward"),
                   help="draw the derivative's graph: FUNC's ops followed by its adjoint "
                        "(reverse) or with tangents beside them (forward)")
    g.add_argument("--wrt", metavar="x,W", help="with --mode: the arguments to differentiate "
                                                "with respect to (default: all)")
    g.add_argument("--no-optimize", action="store_true",
                   help="with --mode: draw the derivative before simplify/cse/dce")
    g.add_argument("--format", choices=_FORMATS,
                   help="dot (default, or from -o's suffix); svg and png run Graphviz's `dot`")
    g.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    g.set_defaults(run=cmd_graph)

    k = sub.add_parser("cache", help="show or empty the generated-module cache")
    k.add_argument("action", choices=("info", "clear"))
    k.set_defaults(run=cmd_cache)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # argparse: usage error (2), --help or --version (0)
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        return args.run(args)
    except CompileError as err:
        print(str(err), file=sys.stderr)
        return 1
    except (UsageError, Unsupported) as err:
        print(f"srcgrad: {err}", file=sys.stderr)
        return 2
    except Unavailable as err:
        print(f"srcgrad: '{err}' is not available in this version", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `srcgrad emit ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
