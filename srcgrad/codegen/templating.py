"""The generated modules' templates (templates/*.j2), rendered without importing jinja2.

Note [Templates without jinja2]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
templates/ stays the source of truth for the text of generated code, written in
Jinja2's syntax. But importing jinja2 and compiling a template cost a fresh process
tens of milliseconds on its first compile (issue 15), for two templates of twenty
lines. They use a small subset of the language, and this module renders exactly that
subset as the renderer's `jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
keep_trailing_newline=True, undefined=StrictUndefined, autoescape=False)` would:

* `{{ name }}` and `{{ name | join("sep") }}` (a value is printed with `str`);
* `{% if name %} ... {% else %} ... {% endif %}` (Python truthiness);
* `{% for x in name %} ... {% endfor %}`;
* lstrip_blocks: spaces and tabs before a block tag at the start of a line are dropped;
  trim_blocks: the newline right after a block tag is dropped.

Anything else (comments, other filters, expressions) raises `Unsupported` when the
template is parsed, and srcgrad.codegen.emit renders that template with jinja2, so a
template author may use the whole language and only pays jinja2's import for it.
tests/test_templating.py renders both templates both ways on varied inputs, and the
golden files pin the output.
"""

from __future__ import annotations

import re


class Unsupported(Exception):
    """A construct outside the subset (Note [Templates without jinja2])."""


class Undefined(NameError):
    """A template read a name the render call did not pass (jinja2's StrictUndefined)."""


_TAG = re.compile(r"({{.*?}}|{%.*?%}|{#)", re.S)
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_EXPR = re.compile(rf"\s*({_NAME})\s*(?:\|\s*join\(\s*(\"[^\"\\]*\"|'[^'\\]*')\s*\)\s*)?")
_IF = re.compile(rf"\s*if\s+({_NAME})\s*")
_FOR = re.compile(rf"\s*for\s+({_NAME})\s+in\s+({_NAME})\s*")


def _pieces(text: str) -> list:
    """("text", s) / ("expr", inner) / ("block", inner), whitespace control applied: the
    lstrip test reads the source as written (a tag's line in the template), the trim
    drops the newline a block tag ends its line with."""
    out: list = []
    parts = _TAG.split(text)  # text, tag, text, tag, ..., text (a text may be "")
    for i, part in enumerate(parts):
        if i % 2 == 0:
            if i and parts[i - 1].startswith("{%") and part.startswith("\n"):  # trim_blocks
                part = part[1:]
            out.append(["text", part])
            continue
        if part == "{#":
            raise Unsupported("a comment")
        if part.startswith("{{"):
            out.append(["expr", part[2:-2]])
            continue
        inner = part[2:-2]
        if inner.startswith(("-", "+")) or inner.endswith(("-", "+")):
            raise Unsupported("whitespace control marks")
        raw = parts[i - 1]  # the source text before this block tag
        line_start = raw.rfind("\n") + 1
        if raw[line_start:].strip(" \t") == "" and (line_start > 0 or i == 1):  # lstrip_blocks
            kept = out[-1][1]
            out[-1][1] = kept[:len(kept) - (len(raw) - line_start)]
        out.append(["block", inner.strip()])
    return [tuple(p) for p in out]


def parse(text: str) -> list:
    """The template as nested nodes; Unsupported outside the subset."""
    pieces = _pieces(text)
    body, stack = [], []
    current = body
    for kind, value in pieces:
        if kind == "text":
            if value:
                current.append(("text", value))
        elif kind == "expr":
            m = _EXPR.fullmatch(value)
            if m is None:
                raise Unsupported(f"the expression {{{{{value}}}}}")
            sep = m.group(2)
            current.append(("expr", m.group(1), None if sep is None else sep[1:-1]))
        else:
            if value == "endif" or value == "endfor":
                if not stack or stack[-1][0] != value[3:]:
                    raise Unsupported(f"an unmatched {{% {value} %}}")
                _, node, current = stack.pop()
            elif value == "else":
                if not stack or stack[-1][0] != "if":
                    raise Unsupported("{% else %} outside an if")
                node = stack[-1][1]
                current = node[3]
            elif (m := _IF.fullmatch(value)) is not None:
                node = ("if", m.group(1), [], [])
                current.append(node)
                stack.append(("if", node, current))
                current = node[2]
            elif (m := _FOR.fullmatch(value)) is not None:
                node = ("for", m.group(1), m.group(2), [])
                current.append(node)
                stack.append(("for", node, current))
                current = node[3]
            else:
                raise Unsupported(f"the block {{% {value} %}}")
    if stack:
        raise Unsupported(f"an unclosed {{% {stack[-1][0]} %}}")
    return body


def render(nodes: list, context: dict) -> str:
    out: list = []
    _render(nodes, context, out)
    return "".join(out)


def _lookup(context: dict, name: str):
    try:
        return context[name]
    except KeyError:
        raise Undefined(f"'{name}' is undefined") from None


def _render(nodes, context, out) -> None:
    for node in nodes:
        kind = node[0]
        if kind == "text":
            out.append(node[1])
        elif kind == "expr":
            value = _lookup(context, node[1])
            out.append(str(value) if node[2] is None else node[2].join(str(v) for v in value))
        elif kind == "if":
            _render(node[2] if _lookup(context, node[1]) else node[3], context, out)
        else:
            _, var, name, body = node
            for item in _lookup(context, name):
                _render(body, {**context, var: item}, out)
