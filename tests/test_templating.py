"""The templates rendered without jinja2 (Note [Templates without jinja2] in
srcgrad.codegen.templating) give jinja2's text, byte for byte."""

import itertools
import random
import re

import jinja2
import pytest

from srcgrad.codegen import skeletons, templating


def _jinja(text: str, **context) -> str:
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    return env.from_string(text).render(**context)


def _ours(text: str, **context) -> str:
    return templating.render(templating.parse(text), context)


FUNCTIONS = [
    dict(name="grad_f", params=["x", "y=_default1"], body=["a = x * y", "", "b = a + 1"],
         result="(a, b)", doc=""),
    dict(name="f_jvp", params=[], body=[], result="None", doc="A docstring."),
    dict(name="g", params=["x"], body=["", "", "    if x:", "        pass"], result="x", doc=""),
]
MODULES = [dict(functions=f, version="0.1.0", origin="m.py:f", key="k" * 64, helpers=h,
                constants=c, standalone=s, helper_sources=hs, imports=i, needs="NumPy",
                backend="numpy", command="srcgrad emit m.py:f")
           for f, h, c, s, hs, i in itertools.product(
               [[], ["def a():\n    return 1"], ["def a():\n    return 1", "def b(x):\n    return x"]],
               [[], ["unbroadcast", "matmul_bar"]], [[], ["_c0"]], [False, True],
               [[], ["def _namespace(x):\n    return numpy"]], [[], ["import numpy as xp", "import math"]])]


@pytest.mark.parametrize("context", FUNCTIONS)
def test_the_function_template_renders_as_jinja2_renders_it(context):
    text = (skeletons._template_dir() / "function.py.j2").read_text()
    assert skeletons._parsed_template("function.py.j2") is not None  # the subset covers it
    assert _ours(text, **context) == _jinja(text, **context)


def test_the_module_template_renders_as_jinja2_renders_it():
    text = (skeletons._template_dir() / "module.py.j2").read_text()
    assert skeletons._parsed_template("module.py.j2") is not None
    for context in MODULES:
        assert _ours(text, **context) == _jinja(text, **context), context


@pytest.mark.parametrize("text", [
    "a\n  {% if x %}\n  b {{ y }}\n  {% endif %}\nc\n",
    "{% for v in xs %}{{ v }},{% endfor %}\n",
    "  {% for v in xs %}\n    {% if v %}\n{{ v }}\n    {% else %}\nnone\n    {% endif %}\n  {% endfor %}",
    "x {% if x %}inline{% endif %} y\n{{ xs | join(', ') }}\n",
    "{% if x %}\n{% endif %}",
])
def test_whitespace_control_matches_jinja2(text):
    for x, xs in [(True, [1, 0, 2]), (False, []), ("", ["a"])]:
        assert _ours(text, x=x, xs=xs, y="Y") == _jinja(text, x=x, xs=xs, y="Y")


@pytest.mark.parametrize("text", ["{# c #}", "{{ a.b }}", "{{ x | upper }}", "{% set a = 1 %}",
                                  "{%- if x %}{% endif %}", "{% if x %}", "{% endfor %}"])
def test_what_the_subset_lacks_is_refused_not_misrendered(text):
    with pytest.raises(templating.Unsupported):
        templating.parse(text)


def test_an_undefined_name_is_an_error_as_with_strict_undefined():
    with pytest.raises(templating.Undefined):
        _ours("{{ missing }}")


# The regular expressions srcgrad.codegen.templating read tags with before it used string
# methods (issue 15): the reading must stay theirs.
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TAG = re.compile(r"({{.*?}}|{%.*?%}|{#)", re.S)
_EXPR = re.compile(rf"\s*({_NAME})\s*(?:\|\s*join\(\s*(\"[^\"\\]*\"|'[^'\\]*')\s*\)\s*)?")
_IF = re.compile(rf"\s*if\s+({_NAME})\s*")
_FOR = re.compile(rf"\s*for\s+({_NAME})\s+in\s+({_NAME})\s*")


def _texts(alphabet, n, seed):
    rng = random.Random(seed)
    return [''.join(rng.choice(alphabet) for _ in range(rng.randrange(0, 14))) for _ in range(n)]


def test_tags_split_as_the_regular_expression_split_them():
    texts = _texts(["{", "}", "%", "#", "{{", "}}", "{%", "%}", "a", " ", "\n", "{#"], 20000, 1)
    texts += [(skeletons._template_dir() / n).read_text() for n in ("function.py.j2", "module.py.j2")]
    for text in texts:
        assert templating.split_tags(text) == _TAG.split(text), repr(text)


def _near_misses(seed, n):
    """Expressions and block bodies of the subset, each slot sometimes replaced by something
    close to it (a space, a wrong word, a stray quote)."""
    rng = random.Random(seed)
    slots = [["", " ", "\t", "\n "], ["x", "_a1", "xs", "1a", "é", "a.b", "if", "for", "in", ""],
             ["", " ", "  "], ["", "|", "| ", "||"], ["join(", "join (", "upper(", "join", ""],
             ["", " "], ['", "', '"-"', "'a'", "''", '"\\"', '"a"b"', "'a\"", '"', "x"],
             ["", " "], [")", "", "))"], ["", " ", "\n"]]
    blocks = [["", " "], ["if", "for", "iff", "endif", "else"], [" ", "", "\t"],
              ["x", "v", "1a", "é", "in"], ["", " "], ["", "in", "on", "in x"], [" ", ""],
              ["", "xs", "x y", "é"], ["", " "]]
    return ["".join(rng.choice(slot) for slot in (slots if i % 2 else blocks)) for i in range(n)]


def test_expressions_and_blocks_read_as_the_regular_expressions_read_them():
    words = ["x", "_a1", "1a", "é", "if", "for", "in", "|", "join", "(", ")", '"', "'", ", ",
             "\\", " ", "\t", "\n", "join(", "upper", '", "', "a.b"]
    seen = set()
    for inner in _texts(words, 20000, 2) + _near_misses(3, 40000):
        m = _EXPR.fullmatch(inner)
        expected = None if m is None else (m.group(1), None if m.group(2) is None else m.group(2)[1:-1])
        assert templating.expression(inner) == expected, repr(inner)
        seen.add("expression" if m is None or m.group(2) is None else "join")
        value = inner.strip()
        if value in ("else", "endif", "endfor"):
            continue
        if (m := _IF.fullmatch(value)) is not None:
            assert templating.parse(f"{{% {value} %}}{{% endif %}}") == [("if", m.group(1), [], [])]
            seen.add("if")
        elif (m := _FOR.fullmatch(value)) is not None:
            assert templating.parse(f"{{% {value} %}}{{% endfor %}}") == \
                [("for", m.group(1), m.group(2), [])]
            seen.add("for")
        else:
            for end in ("{% endif %}", "{% endfor %}"):
                with pytest.raises(templating.Unsupported):
                    templating.parse(f"{{% {value} %}}{end}")
    assert seen == {"expression", "join", "if", "for"}  # each read both ways
    assert templating.parse("{% if x %}a{% endif %}") == [("if", "x", [("text", "a")], [])]
    assert templating.parse("{% for v in xs %}{% endfor %}") == [("for", "v", "xs", [])]
