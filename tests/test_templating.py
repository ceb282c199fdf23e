"""The templates rendered without jinja2 (Note [Templates without jinja2] in
srcgrad.codegen.templating) give jinja2's text, byte for byte."""

import itertools

import jinja2
import pytest

from srcgrad.codegen import emit, templating


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
    text = (emit._template_dir() / "function.py.j2").read_text()
    assert emit._parsed_template("function.py.j2") is not None  # the subset covers it
    assert _ours(text, **context) == _jinja(text, **context)


def test_the_module_template_renders_as_jinja2_renders_it():
    text = (emit._template_dir() / "module.py.j2").read_text()
    assert emit._parsed_template("module.py.j2") is not None
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
