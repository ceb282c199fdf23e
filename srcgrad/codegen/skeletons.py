"""The skeletons of generated modules and functions (templates/, rendered without jinja2
where the template allows: Note [Templates without jinja2]), and the helpers a module
carries. srcgrad.codegen.emit renders the statements that go into them.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
from pathlib import Path

from srcgrad import rules
from srcgrad.codegen import templating
from srcgrad.digest import sha256  # (not OpenSSL's: its load is 3 ms of a compile)


# ---------------------------------------------------------------------- templates
@functools.cache
def _template_dir() -> Path:
    return Path(_template_folder())


@functools.cache
def _template_folder() -> str:
    """templates/, found with os.path first (pathlib's objects and an import of
    srcgrad.templates cost a first compile 0.35 ms: issue 15)."""
    here = os.path.dirname(os.path.dirname(__file__))  # the srcgrad package
    for path in (os.path.join(here, "templates"),  # a wheel
                 os.path.join(os.path.dirname(here), "templates")):  # a source checkout
        if os.path.isfile(os.path.join(path, "module.py.j2")):
            return path
    return str(_template_dir_elsewhere())


def _template_dir_elsewhere() -> Path:
    try:  # a directory in another layout: no importlib.resources where it need not (issue 15)
        import srcgrad.templates as package

        path = Path(package.__file__).parent
        if (path / "module.py.j2").is_file():
            return path
    except (ImportError, AttributeError, TypeError):
        pass
    try:
        import importlib.resources

        path = Path(str(importlib.resources.files("srcgrad.templates")))
        if path.is_dir():
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "templates"  # a source checkout


@functools.lru_cache(maxsize=1)
def _environment():
    import jinja2  # only when a module is rendered: a disk-cache hit never needs it

    return jinja2.Environment(loader=jinja2.FileSystemLoader(_template_folder()),
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined, autoescape=False)


@functools.cache
def _parsed_template(name: str):
    """A template's nodes for srcgrad.codegen.templating, or None where it uses more of
    Jinja2 than that subset (Note [Templates without jinja2])."""
    try:
        with open(os.path.join(_template_folder(), name), encoding="utf-8") as file:
            return templating.parse(file.read())
    except templating.Unsupported:
        return None


def _render(template: str, **context) -> str:
    """Render templates/<name>: without jinja2 where the template allows (a fresh process's
    first compile then never imports it), else with it."""
    nodes = _parsed_template(template)
    if nodes is None:
        return _environment().get_template(template).render(**context)
    return templating.render(nodes, context)


@functools.lru_cache(maxsize=1)
def templates_fingerprint() -> str:
    h = sha256()
    for path in sorted(_template_dir().glob("*.j2")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def render_function(name: str, params: list, body: list, result: str, doc: str = "") -> str:
    text = _render("function.py.j2", name=name, params=params, body=body, result=result, doc=doc)
    return text.rstrip("\n")  # (checked by ast.parse in its module: render_module)


# What a standalone module imports, and how its helpers find their arrays' namespace.
_STANDALONE = {
    "numpy": ("NumPy", ["import math", "import numpy", "import numpy as xp"],
              "def _namespace(x):\n    get = getattr(x, \"__array_namespace__\", None)\n"
              "    return get() if get is not None else numpy"),
    "cupy": ("CuPy and array_api_compat", ["import math", "import numpy", "import cupy as xp",
                                           "import array_api_compat"],
             "def _namespace(x):\n    return array_api_compat.array_namespace(x)"),
    "array-api": ("an Array-API namespace: array_api_strict here; rebind `xp` to run on another",
                  ["import math", "import array_api_strict as xp"],
                  "def _namespace(x):\n    get = getattr(x, \"__array_namespace__\", None)\n"
                  "    return get() if get is not None else xp"),
}


def render_module(functions: list, *, version: str, origin: str, key: str, helpers=(),
                  constants=(), standalone: bool = False, backend: str = "numpy",
                  command: str = "", check: bool = True) -> str:
    """A module of `functions`. `standalone`: it imports its namespace (`backend`, one
    of "numpy", "cupy", "array-api") and carries the helpers it calls (and only those,
    with what they call), so it runs without srcgrad; `command` is the `srcgrad emit`
    command line that writes it again. `check`: parse the text (a SyntaxError here is
    srcgrad's bug); a caller that compiles it at once passes False, its compile checks."""
    helper_sources, imports, needs = [], [], ""
    if standalone:
        needs, imports, namespace_def = _STANDALONE[backend]
        helper_sources = [namespace_def if name == "_namespace" else _helper_source(name)
                          for name in _helper_closure(helpers)]
        used = "\n".join(helper_sources + list(functions))
        imports = [line for line in imports if _import_used(line, used)]
        if "numpy." in used and not any(line.split("#")[0].strip() == "import numpy"
                                         for line in imports):
            imports = imports + ["import numpy  # shape bookkeeping in the helpers"]
    text = _render("module.py.j2",
        functions=functions, version=version, origin=origin, key=key, helpers=list(helpers),
        constants=list(constants), standalone=standalone, helper_sources=helper_sources,
        imports=imports, needs=needs, backend=backend,
        command=command or f"srcgrad emit {origin}")
    if check:
        ast.parse(text)
    return text


def _helper_closure(helpers) -> list:
    """`helpers` and every function of srcgrad.rules.helpers they call, transitively:
    private ones first, each in the order the helpers module defines them."""
    from srcgrad.rules import helpers as module

    defined = {name for name, value in vars(module).items()
               if inspect.isfunction(value) and value.__module__ == module.__name__}
    needed, stack = set(), list(helpers)
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        tree = ast.parse(_helper_source(name))
        stack += [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in defined]
    order = [name for name in vars(module) if name in needed]
    return [n for n in order if n.startswith("_")] + [n for n in order if not n.startswith("_")]


def _import_used(line: str, text: str) -> bool:
    """Whether the module name an `import X [as Y]` line binds is used in `text`."""
    words = line.split("#")[0].split()
    bound = words[-1] if "as" in words else words[1]
    return re.search(rf"\b{re.escape(bound)}\b", text) is not None


def _helper_source(name: str) -> str:
    from srcgrad.rules import helpers

    return inspect.getsource(getattr(helpers, name)).rstrip("\n")


def helpers_used(source_lines) -> list:
    """Helper functions (srcgrad.rules.helpers) a body calls, in a stable order."""
    text = "\n".join(source_lines)
    if not any(h in text for h in rules.HELPER_NAMES):
        return []  # (most specialised code calls none: no parse of it, issue 15)
    tree = ast.parse(text)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name)}
    return [h for h in rules.HELPER_NAMES if h in called]
