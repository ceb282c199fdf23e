"""Bad input gets a clear error naming file, line and construct, and leaves nothing behind."""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

import srcgrad as sg
from tests.corpus import bad_programs as B


def _line_of(fn, text):
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(text)


@pytest.mark.parametrize("fn,construct,line_text", [
    (B.uses_try, "`try`/`except`", "try:"),
    (B.uses_unknown_numpy, "numpy.fft", "np.fft.fft"),
    (B.uses_undefined_name, "undefined_thing", "undefined_thing"),
    (B.uses_generator, "`yield`", "yield"),
    (B.calls_opaque, "vectorize", "vectorize"),
])
def test_compile_error_names_file_line_and_construct(fn, construct, line_text):
    with pytest.raises(sg.CompileError) as info:
        sg.grad(fn)(np.ones(3))
    err = info.value
    assert err.filename == B.__file__
    assert err.lineno == _line_of(fn, line_text)
    message = str(err)
    assert construct in message
    assert f"bad_programs.py:{err.lineno}" in message
    assert line_text in message  # the source line is quoted


def test_compile_error_is_a_syntax_error_with_a_hint():
    with pytest.raises(SyntaxError) as info:
        sg.grad(B.uses_try)(np.ones(3))
    assert "hint:" in str(info.value)


def test_grad_of_non_scalar_output_says_so():
    with pytest.raises(TypeError, match=r"scalar output.*shape \(3,\)"):
        sg.grad(B.vector_output)(np.ones(3))
    with pytest.raises(sg.CompileError, match="one scalar"):
        sg.grad(B.returns_tuple)(np.ones(3))


def test_bad_wrt():
    with pytest.raises(ValueError, match="no argument named 'z'"):
        sg.grad(B.vector_output, wrt="z")
    with pytest.raises(ValueError, match="has 1 arguments"):
        sg.grad(B.vector_output, wrt=3)
    with pytest.raises(TypeError):
        sg.grad(B.vector_output, wrt=1.5)


def test_failed_compile_leaves_no_cache_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("SRCGRAD_CACHE_DIR", str(tmp_path))
    with pytest.raises(sg.CompileError):
        sg.grad(B.uses_unknown_numpy)(np.ones(3))
    files = [f for _, _, fs in os.walk(tmp_path) for f in fs]
    assert files == []


def test_source_of_a_plain_function_is_a_type_error():
    with pytest.raises(TypeError, match="not returned by a srcgrad transform"):
        sg.source(B.vector_output)
