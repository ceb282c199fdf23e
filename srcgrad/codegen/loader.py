"""Turn generated source into live functions, keeping its lines for tracebacks.

The text is registered in `linecache` under the code's filename (the cache file's
path, or a `<srcgrad:KEY>` pseudo-name when there is no file), so a traceback through
generated code shows the generated line, and `inspect.getsource` works on the
functions it defines. The entry's mtime is None, which `linecache.checkcache` leaves
alone (as it does for source that came from a module's `__loader__`).
"""

from __future__ import annotations

import linecache
from typing import Any


def pseudo_filename(key: str) -> str:
    """The code filename of a module that has no cache file."""
    return f"<srcgrad:{key[:12]}>"


def load_module(source: str, filename: str, namespace: dict | None = None) -> dict[str, Any]:
    """Compile and run `source` as a module named by `filename`; its globals dict.

    The dict starts as `{"__name__", "__file__"}` updated with `namespace` (e.g.
    `{"xp": numpy}`), so generated code sees exactly what the caller binds.
    """
    code = compile(source, filename, "exec", dont_inherit=True)
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[filename] = (len(source), None, lines, filename)
    ns: dict[str, Any] = {"__name__": "srcgrad.generated", "__file__": filename}
    if namespace:
        ns.update(namespace)
    exec(code, ns)
    return ns


def render_dispatcher(name: str, params: list, args: list, guards: list) -> str:
    """The function a transform returns: O(1) guards on argument shapes pick the
    variant compiled for them (Note [Shape specialisation]); anything else misses.

    Written with an f-string, not a template, and kept here rather than in the
    renderer (srcgrad.codegen.emit): it is rendered when a transform is created and
    again on each miss, so a process whose modules come from the disk cache renders
    it too, and it should import neither jinja2 nor the renderer (issue 15).
    """
    call = ", ".join(args)
    lines = [f"def {name}({', '.join(params)}):"]
    if guards:
        lines += [f"    if {' and '.join(guards)}:", f"        return _impl({call})"]
    lines.append(f"    return _miss({call})")
    return "\n".join(lines) + "\n"


# Note [The out tree in the module]
# sg.vjp and sg.jvp nest their flat outputs like the function's result: its tree
# definition (`out_tree`, srcgrad.ir.tree), which tracing the function finds. A module
# from the disk cache was not traced in this process, and tracing it there would
# import the whole compiler for one tuple (issue 15), so the module text ends with it,
# as a comment line `# srcgrad out tree: <repr>`, where the tree is a literal (tuples,
# strings, numbers: no record class, which only tracing can name). A module without
# the line is traced as before (srcgrad.pipeline.modules).
_OUT_TREE = "# srcgrad out tree: "


def with_out_tree(module: str, out_tree) -> str:
    """`module` ending with its out tree's line, where the tree is a literal."""
    if out_tree is None or not _literal(out_tree):
        return module
    return module.rstrip("\n") + f"\n{_OUT_TREE}{out_tree!r}\n"


def _literal(value) -> bool:
    """Whether `repr(value)` reads back as `value`."""
    import ast

    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def stored_out_tree(source: str):
    """The out tree a module's last line records, or None (Note [The out tree in the module])."""
    start = source.rfind("\n" + _OUT_TREE)
    if start < 0:
        return None
    import ast

    try:
        return ast.literal_eval(source[start + 1 + len(_OUT_TREE):].strip())
    except (ValueError, SyntaxError):
        return None
