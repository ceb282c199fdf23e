"""A write into a value a custom Function saved, on a path the data may not take (issue 11,
task I9; Note [Saved values written in place] in srcgrad.frontend.versions).

torch raises "modified by an inplace operation" at backward only where the write really
ran after the save. A write inside an `if`/loop runs on some paths only: it is checked
at run time (a version count, or a flag beside the saved value), not refused at compile
time; a save and a write in two branches of one `if` are never both run. Each program is
checked against central differences in reverse and forward mode where the write did not
reach the saved value, with a second call on data that takes the other path (torch's
error there)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import Function
from tests.conftest import assert_close, numeric_grad


class Sq(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2.0 * g * x

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 2.0 * t * x


def saved_then_written_in_a_branch(x):
    y = Sq.apply(x)  # saved at the function's level: certainly x itself
    if np.sum(x) > 0:
        x[0, 0] = 1.0  # certainly into x, but only where the branch runs (seed 760043)
    return np.sum(np.sin(y)) + np.sum(x * x)


def saved_and_written_in_one_branch(x):
    if np.sum(x) > 0:
        v = x[0]
        y = Sq.apply(v)
        v[0] = 3.0  # the save and the write in one block (seed 760593)
        return np.sum(np.sin(y)) + np.sum(x)
    return np.sum(np.cos(x) * x)


def saved_and_written_in_one_loop_body(x):
    s = 0.0
    for i in range(2):
        if x[i, 0] > 0:
            y = Sq.apply(x)
            x[0, 1] = 5.0
            s = s + np.sum(np.sin(y))
    return s + np.sum(x * x)


def saved_in_one_branch_written_in_the_other(x):
    v = x * 1.0
    if np.sum(x) > 0:
        if np.max(x) > 10.0:
            return np.sum(Sq.apply(v.reshape(-1)[:2]))  # v.reshape(-1): a view of v
        v = np.sin(v)
    elif np.min(x) > -10.0:
        v[0, 2] = 2.0  # another branch of the same `if`: never after the save (seed 760692)
    return np.sum(v * x)


def saved_in_a_branch_then_written(x):
    y = Sq.apply(x) if np.sum(x) > 0 else np.sin(x)  # saved only where the test holds
    x[0:1] = 2.0  # certainly into x, after the save on that path (seed 760699)
    return np.sum(y * y) + np.sum(x)


ON_A_PATH = [saved_then_written_in_a_branch, saved_and_written_in_one_branch,
             saved_and_written_in_one_loop_body, saved_in_a_branch_then_written]
NEG = -np.arange(1.0, 7.0).reshape(2, 3) / 4.0  # the writes do not run
POS = np.arange(1.0, 7.0).reshape(2, 3) / 4.0  # they run after the save
TORCH = "one of the variables needed for gradient computation has been modified by an inplace"


def _copying(f):
    return lambda a: f(a.copy())


def _check(f, x):
    assert_close(sg.value_and_grad(f)(x.copy())[0], f(x.copy()))
    expected = numeric_grad(_copying(f), [x], 0)
    assert_close(sg.grad(f)(x.copy()), expected, rtol=1e-5, atol=1e-7)
    t = np.linspace(0.5, 1.5, x.size).reshape(x.shape)
    _, t_out = sg.jvp(f, (x.copy(),), (t,))
    assert_close(t_out, np.sum(expected * t), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f", ON_A_PATH, ids=lambda f: f.__name__)
def test_a_write_on_a_path_not_taken_compiles_and_differentiates(f):
    _check(f, NEG)
    _check(f, NEG * 2.0)  # a second call, other data


@pytest.mark.parametrize("f", ON_A_PATH, ids=lambda f: f.__name__)
def test_the_write_that_ran_raises_torchs_error_at_backward(f):
    g = sg.grad(f)
    assert_close(g(NEG.copy()), numeric_grad(_copying(f), [NEG], 0), rtol=1e-5, atol=1e-7)
    with pytest.raises(RuntimeError, match=TORCH):
        g(POS.copy())  # the same compiled code, the write reached the saved value
    with pytest.raises(RuntimeError, match=TORCH):
        sg.grad(f)(POS.copy())  # also where it is the first call


@pytest.mark.parametrize("f", ON_A_PATH, ids=lambda f: f.__name__)
def test_forward_mode_never_checks(f):
    t = np.linspace(0.5, 1.5, 6).reshape(2, 3)
    _, t_out = sg.jvp(f, (POS.copy(),), (t,))
    assert_close(t_out, np.sum(numeric_grad(_copying(f), [POS], 0) * t), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("x", [POS, NEG, POS * 20.0, -POS * 20.0], ids=["save", "write", "ret", "none"])
def test_a_save_and_a_write_in_two_branches_never_meet(x):
    _check(saved_in_one_branch_written_in_the_other, x)


def test_a_certain_write_at_the_functions_level_is_still_a_compile_error():
    def f(x):
        y = Sq.apply(x)
        x[0, 0] = 1.0
        return np.sum(y)
    with pytest.raises(sg.CompileError, match="modified by an inplace operation"):
        sg.grad(f)(POS.copy())
