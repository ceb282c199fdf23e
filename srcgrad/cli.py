"""The `srcgrad` command line (API.md section 2).

    srcgrad emit FILE.py:FUNC [--wrt x,W] [--mode reverse|forward|both] [--no-optimize] [-o OUT.py]
    srcgrad check FILE.py:FUNC --args "SHAPES"
    srcgrad graph FILE.py:FUNC [-o graph.dot]
    srcgrad cache {info,clear}

Exit status: 0 success, 1 the function cannot be compiled (CompileError) or a check
failed, 2 a usage error (bad FILE:FUNC, missing file or function, options the api
refuses with ValueError, unavailable command).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
        mod_spec.loader.exec_module(module)
    except Exception as err:
        sys.modules.pop(name, None)
        detail = "".join(traceback.format_exception_only(type(err), err)).rstrip()
        raise UsageError(f"cannot import {file}: {detail}") from None
    obj: Any = module
    for part in func.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{file} has no function {func!r}") from None
    if not callable(obj):
        raise UsageError(f"{file}:{func} is not a function")
    return obj


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


def cmd_emit(args: argparse.Namespace) -> int:
    emit_standalone = _api("emit_standalone", "emit")
    func = load_function(args.target)
    try:
        source = emit_standalone(func, wrt=_parse_wrt(args.wrt), mode=args.mode,
                                 optimize=not args.no_optimize)
    except ValueError as err:  # e.g. --wrt names no argument, a mode not available yet
        raise Unsupported(str(err)) from err
    _write(source, args.output)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    check_cli = _api("check_cli", "check")
    func = load_function(args.target)
    ok, report = check_cli(func, args.args)
    _write(report, None)
    return 0 if ok else 1


def cmd_graph(args: argparse.Namespace) -> int:
    graph_dot = _api("graph_dot", "graph")
    func = load_function(args.target)
    _write(graph_dot(func), args.output)
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from srcgrad.codegen.cache import default_cache

    cache = default_cache()
    if args.action == "info":
        for key, value in cache.info().items():
            print(f"{key}: {value}")
    else:
        n = cache.clear()
        print(f"removed {n} cached module{'s' if n != 1 else ''} from {cache.directory}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="srcgrad",
        description="Source-transformation autograd for NumPy: write gradients as code.")
    sub = p.add_subparsers(dest="command", metavar="{emit,check,graph,cache}")
    sub.required = True

    e = sub.add_parser("emit", help="print a standalone module computing FUNC's gradient")
    e.add_argument("target", metavar="FILE.py:FUNC")
    e.add_argument("--wrt", metavar="x,W",
                   help="comma-separated argument names (or positions) to differentiate "
                        "with respect to (default: all)")
    e.add_argument("--mode", choices=("reverse", "forward", "both"), default="reverse")
    e.add_argument("--no-optimize", action="store_true",
                   help="skip simplify/cse/dce (shows the raw derivative)")
    e.add_argument("-o", "--output", metavar="OUT.py", help="write here instead of stdout")
    e.set_defaults(run=cmd_emit)

    c = sub.add_parser("check", help="gradcheck FUNC against finite differences")
    c.add_argument("target", metavar="FILE.py:FUNC")
    c.add_argument("--args", required=True, metavar="SHAPES",
                   help='argument shapes, e.g. "(3,4), (4,)"')
    c.set_defaults(run=cmd_check)

    g = sub.add_parser("graph", help="the IR graph of FUNC as Graphviz DOT")
    g.add_argument("target", metavar="FILE.py:FUNC")
    g.add_argument("-o", "--output", metavar="graph.dot", help="write here instead of stdout")
    g.set_defaults(run=cmd_graph)

    k = sub.add_parser("cache", help="show or empty the generated-module cache")
    k.add_argument("action", choices=("info", "clear"))
    k.set_defaults(run=cmd_cache)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # argparse: usage error (2) or --help (0)
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
