"""Turn generated source into live functions, keeping its lines for tracebacks.

The text is registered in `linecache` under the code's filename (the cache file's
path, or a `<srcgrad:KEY>` pseudo-name when there is no file), so a traceback through
generated code shows the generated line, and `inspect.getsource` works on the
functions it defines. The entry's mtime is None, which `linecache.checkcache` leaves
alone (as it does for source that came from a module's `__loader__`).
"""

from __future__ import annotations

import builtins
import linecache
import sys
from typing import Any

from srcgrad.errors import warn_at_user_lines


def pseudo_filename(key: str) -> str:
    """The code filename of a module that has no cache file."""
    return f"<srcgrad:{key[:12]}>"


def uncached_filename(name: str, source: str) -> str:
    """The code filename of a module that has no cache key: named by its text, since
    linecache holds one text per filename and the tracer reads a generated function's
    source back from there (grad(grad(f)), vmap(grad(f))). Named by the function
    (`f-<id>`), a gradient's shape-specialised variant overwrote its generic entry's
    text, and a vmap of the gradient then traced the wrong function's lines: a constant
    None for every example (fuzz seed 2670430)."""
    from hashlib import sha256  # (on an uncacheable compile only)

    return f"<srcgrad:{name}-{sha256(source.encode()).hexdigest()[:12]}>"


def compile_module(source: str, filename: str):
    """The code object of a generated module's text."""
    return compile(source, filename, "exec", dont_inherit=True)


def load_module(source: str, filename: str, namespace: dict | None = None, code=None) -> dict[str, Any]:
    """Compile (unless `code` is its code already) and run `source` as a module named by
    `filename`; its globals dict.

    The dict starts as `{"__name__", "__file__"}` updated with `namespace` (e.g.
    `{"xp": numpy}`), so generated code sees exactly what the caller binds.
    """
    if code is None:
        code = compile_module(source, filename)
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[filename] = (len(source), None, lines, filename)
    warn_at_user_lines()  # a NumPy warning in it names the user's line (srcgrad.errors)
    ns: dict[str, Any] = {"__name__": "srcgrad.generated", "__file__": filename}
    if namespace:
        ns.update(namespace)
    exec(code, ns)
    return ns


# Note [Globals a module reads]
# A generated module is bound to `xp`, `math`, its constants and every rule helper
# (srcgrad.backend.module_globals), but most read only `xp`: then importing the helpers
# (srcgrad.rules.helpers, half a millisecond) is all a disk-cache hit would pay them for.
# `free_globals` reads the names the code loads as globals from its bytecode (LOAD_GLOBAL
# in functions, LOAD_NAME in the module body, nested code included), less the builtins and
# what the module body defines. It answers None, and every helper is bound, on a Python
# whose bytecode it was not written for, so a new opcode can cost a hit time, never a
# NameError. A superset of what the code reads is harmless (more is bound).
_OPS = None  # (LOAD_GLOBAL, LOAD_NAME, STORE_NAME, EXTENDED_ARG, LOAD_GLOBAL's shift)


def free_globals(code) -> frozenset | None:
    """The global names a module's code reads and does not define (Note [Globals a module
    reads]), or None where this Python's bytecode is not known."""
    global _OPS
    if not (3, 10) <= sys.version_info[:2] <= (3, 13):
        return None
    if _OPS is None:
        import opcode  # (inspect, which NumPy imports, has imported it)

        m = opcode.opmap
        _OPS = (m["LOAD_GLOBAL"], m["LOAD_NAME"], m["STORE_NAME"], opcode.EXTENDED_ARG,
                1 if sys.version_info >= (3, 11) else 0)
    loads: set = set()
    stores: set = set()
    _scan_names(code, loads, stores)
    return frozenset(loads - stores - builtins.__dict__.keys())


def _scan_names(code, loads: set, stores: set) -> None:
    load_global, load_name, store_name, extended, shift = _OPS
    raw, names, ext = code.co_code, code.co_names, 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | ext
        if op == extended:
            ext = arg << 8
            continue
        ext = 0
        if op == load_global:
            loads.add(names[arg >> shift])
        elif op == load_name:
            loads.add(names[arg])
        elif op == store_name:
            stores.add(names[arg])
    for const in code.co_consts:
        if const.__class__ is code.__class__:
            _scan_names(const, loads, stores)


def render_dispatcher(name: str, params: list, args: list, guards: list, impl: str) -> str:
    """The function a transform returns: O(1) guards on argument shapes pick the
    variant compiled for them (Note [Shape specialisation]), the global `impl`;
    anything else misses.

    Written with an f-string, not a template, and kept here rather than in the
    renderer (srcgrad.codegen.emit): it is rendered when a transform is created and
    again on each miss, so a process whose modules come from the disk cache renders
    it too, and it should import neither jinja2 nor the renderer (issue 15).
    """
    call = ", ".join(args)
    lines = [f"def {name}({', '.join(params)}):"]
    if guards:
        lines += [f"    if {' and '.join(guards)}:", f"        return {impl}({call})"]
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
