"""A refused statement's CompileError names it, its line, and what to write instead."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg


def with_match(x, mode):
    match mode:
        case "sum":
            return np.sum(x)
    return np.mean(x)


def with_try(x):
    try:
        return np.sum(np.sin(x))
    except ValueError:
        return np.sum(x)


@pytest.mark.parametrize("fn, what, hint", [
    (with_match, "the statement `Match`", "move it out of the compiled function"),
    (with_try, "`try`/`except`", "assign the result to a name inside the `try`"),
])
def test_refused_statement_names_the_line_and_a_rewrite(fn, what, hint):
    with pytest.raises(sg.CompileError, match=what) as info:
        sg.grad(fn)(np.ones(3), "sum") if fn is with_match else sg.grad(fn)(np.ones(3))
    assert hint in info.value.hint
    assert info.value.lineno == fn.__code__.co_firstlineno + 1


def test_the_traceback_ends_at_the_users_call_not_inside_the_compiler():
    import traceback

    with pytest.raises(sg.CompileError) as info:
        sg.grad(with_try)(np.ones(3))
    files = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
    internal = [f for f in files if "/srcgrad/" in f or f.startswith("<srcgrad")]
    assert len(internal) <= 2, files  # the dispatcher and the line that re-raises


def test_a_shape_mismatch_is_one_error_naming_the_users_line():
    def f(x, W):
        h = x @ W
        return np.sum(h)

    with pytest.raises(ValueError, match="matmul") as info:
        sg.grad(f)(np.ones(3), np.ones((4, 2)))
    err = info.value
    assert err.__context__ is None and err.__cause__ is None  # no chained tracebacks
    line = f.__code__.co_firstlineno + 1
    assert f"test_statement_hints.py:{line}: h = x @ W" in "\n".join(err.__notes__)
