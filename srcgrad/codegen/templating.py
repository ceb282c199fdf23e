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
golden files pin the output. The tags are read with string methods, not regular
expressions: compiling those was 0.8 ms of a fresh process's first compile (issue 15);
the test checks the reading against the expressions it replaced.
"""

from __future__ import annotations


class Unsupported(Exception):
    """A construct outside the subset (Note [Templates without jinja2])."""


class Undefined(NameError):
    """A template read a name the render call did not pass (jinja2's StrictUndefined)."""


_CLOSE = {"{": "}}", "%": "%}", "#": ""}  # the second character of an opening -> its closing


def split_tags(text: str) -> list:
    """text, tag, text, tag, ..., text (a text may be ""): what
    `re.split(r"({{.*?}}|{%.*?%}|{#)", text, flags=re.S)` gives. A tag is `{{ ... }}` or
    `{% ... %}` up to the first closing after it, or the `{#` opening a comment; an opening
    never closed is text."""
    parts, start, i = [], 0, text.find("{")
    while i >= 0:
        close = _CLOSE.get(text[i + 1:i + 2])
        end = -1 if close is None else i + 2 if not close else text.find(close, i + 2)
        if end < 0:
            i = text.find("{", i + 1)
            continue
        end += len(close)
        parts += [text[start:i], text[i:end]]
        start = end
        i = text.find("{", end)
    parts.append(text[start:])
    return parts


def _is_name(text: str) -> bool:
    """`[A-Za-z_][A-Za-z0-9_]*`."""
    return text.isascii() and text.isidentifier()


def expression(inner: str) -> tuple | None:
    """(name, separator or None) of `{{ name }}` or `{{ name | join("sep") }}` (inner: what
    the braces hold), None outside the subset."""
    name, bar, rest = inner.partition("|")
    name, rest = name.strip(), rest.strip()
    if not _is_name(name):
        return None
    if not bar:
        return name, None
    if not (rest.startswith("join(") and rest.endswith(")")):
        return None
    sep = rest[5:-1].strip()
    if len(sep) < 2 or sep[0] not in "\"'" or sep[-1] != sep[0] or sep[0] in sep[1:-1] \
            or "\\" in sep:
        return None  # not one string literal without escapes
    return name, sep[1:-1]


def _pieces(text: str) -> list:
    """("text", s) / ("expr", inner) / ("block", inner), whitespace control applied: the
    lstrip test reads the source as written (a tag's line in the template), the trim
    drops the newline a block tag ends its line with."""
    out: list = []
    parts = split_tags(text)  # text, tag, text, tag, ..., text (a text may be "")
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
            found = expression(value)
            if found is None:
                raise Unsupported(f"the expression {{{{{value}}}}}")
            current.append(("expr", *found))
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
            elif (words := value.split() or [""])[0] == "if" and len(words) == 2 and _is_name(words[1]):
                node = ("if", words[1], [], [])
                current.append(node)
                stack.append(("if", node, current))
                current = node[2]
            elif words[0] == "for" and len(words) == 4 and words[2] == "in" \
                    and _is_name(words[1]) and _is_name(words[3]):
                node = ("for", words[1], words[3], [])
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
