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
