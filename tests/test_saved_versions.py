"""In-place writes into values a custom Function saved, and `ctx.mark_dirty`, in compiled
code (Note [Saved values written in place] in srcgrad.frontend.versions; DESIGN decision
5; spec/torch_semantics.md §5 and §6). Each outcome: a CompileError naming both lines,
a run-time check raising torch's error, no check at all, and
`allow_mutation_on_saved_tensors`, whose gradients are checked against central
differences."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd.graph import allow_mutation_on_saved_tensors, saved_tensors_hooks
from tests.conftest import numeric_grad
from tests.corpus import saved_writes as S
from tests.corpus.functions import Mul as MulJvp

X = np.array([0.5, -1.0, 1.5, 2.0])
W = np.array([1.5, 0.25, -2.0, 0.75])
TORCH_PREFIX = ("one of the variables needed for gradient computation has been modified by an "
                "inplace operation: ")


def _line(fn, text) -> int:
    """The line number of the first line of `fn`'s source containing `text`."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _check_against_numeric(f, args, wrt=(0,)):
    grads = sg.grad(f, wrt=tuple(wrt))(*args)
    for g, i in zip(grads, wrt):
        np.testing.assert_allclose(g, numeric_grad(f, args, i), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- certainly written
CERTAIN = [
    (S.item_write, "y[0] = 5.0", S.Mul),
    (S.view_write, "tail *= 3.0", S.Mul),
    (S.base_of_saved_view_write, "y[3] = 0.0", S.Mul),
    (S.out_write, "np.multiply(y, 2.0, out=y)", S.Mul),
    (S.known_array_augmented, "y += x", S.Mul),
]


@pytest.mark.parametrize("f, write, fn_class", CERTAIN, ids=[c[0].__name__ for c in CERTAIN])
def test_certain_write_is_a_compile_error_naming_both_lines(f, write, fn_class):
    with pytest.raises(sg.CompileError) as info:
        sg.grad(f)(X, W)
    err = info.value
    save_line = _line(fn_class.forward, "save_for_backward")
    assert err.lineno == _line(f, write)
    assert f"Mul saved `a` for backward at {fn_class.forward.__code__.co_filename}:{save_line}" in str(err)
    assert f"line {_line(f, write)} (`{write}`) writes into it" in str(err)
    assert "allow_mutation_on_saved_tensors" in str(err)


def test_a_saved_output_written_by_the_caller():
    with pytest.raises(sg.CompileError, match="Exp saved `result` for backward") as info:
        sg.grad(S.output_written)(X)
    assert info.value.lineno == _line(S.output_written, "y[1:] += 1.0")


def test_forward_mode_never_checks():
    """torch runs `jvp` inside `apply`, before the later write: nothing to check."""
    def f(x, w):
        y = (x * 2.0).copy()
        z = MulJvp.apply(y, w)  # (saves both for backward and for forward)
        y[0] = 5.0
        return np.sum(z * y)

    out, tangent = sg.jvp(f, (X, W), (np.ones(4), np.zeros(4)))
    eps = 1e-6
    expected = (f(X + eps, W) - f(X - eps, W)) / (2 * eps)
    np.testing.assert_allclose(tangent, expected, rtol=1e-6)


# ---------------------------------------------------------------- possibly written
def test_possible_write_is_checked_at_run_time_with_torchs_error():
    g = sg.grad(S.maybe_scalar_augmented)
    with pytest.raises(RuntimeError) as info:
        g(X, W)
    message = str(info.value)
    assert message.startswith(TORCH_PREFIX + "[float64 [4]], which was saved by Mul at ")
    assert "is at version 1; expected version 0 instead." in message
    write_line = _line(S.maybe_scalar_augmented, "y += 1.0")
    assert f"saved_writes.py:{_line(S.Mul.forward, 'save_for_backward')}" in message
    assert "written in place at " in message and f":{write_line} (`y += 1.0`)" in message
    source = sg.source(g)
    assert "storage_written(" in source and "check_saved(" in source


def test_possible_write_that_only_rebinds_passes_the_check():
    """A 0-d x makes `y` a NumPy scalar: `y += 1.0` rebinds it, the saved value is intact."""
    x, w = np.array(0.5), np.array(1.5)
    _check_against_numeric(S.maybe_scalar_augmented, (x, w), wrt=(0, 1))


def test_reshape_view_or_copy_decided_at_run_time():
    c_ordered = np.arange(1.0, 7.0).reshape(2, 3)
    f_ordered = np.asfortranarray(c_ordered)
    w = np.full((2, 3), 0.5)
    # y = x * 2.0 of a C-ordered x is C-ordered: the reshape is a view and the write certain,
    # refused when compiled (Note [Layout facts]); of an F-ordered x a copy: nothing written
    with pytest.raises(sg.CompileError, match="modified by an inplace operation"):
        sg.grad(S.reshaped_then_written)(c_ordered, w)
    _check_against_numeric(S.reshaped_then_written, (f_ordered, w))
    strided = np.repeat(c_ordered, 2, axis=1)[:, ::2]  # a layout the compiler does not know:
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):  # at run time
        sg.grad(S.reshaped_then_written)(strided, w)


def test_the_check_runs_only_when_the_backward_reads_the_saved_value():
    out, vjp_fn = sg.vjp(S.maybe_scalar_augmented, X, W)  # the forward alone never raises
    np.testing.assert_allclose(out, S.maybe_scalar_augmented(X, W))
    with pytest.raises(RuntimeError, match="is at version 1"):
        vjp_fn(1.0)


# ---------------------------------------------------------------- never written
@pytest.mark.parametrize("f", [S.rebound_not_written, S.copy_written, S.other_array_written])
def test_no_check_where_the_saved_value_is_provably_untouched(f):
    g = sg.grad(f, wrt=(0, 1))
    source = sg.source(g)
    assert "check_saved" not in source and "storage_written" not in source
    _check_against_numeric(f, (X, W), wrt=(0, 1))


def test_values_the_compiler_saves_need_no_check():
    """Compiled code is functional: `y += 1` after `np.exp` is differentiated as written,
    where torch would raise for its own saved `exp` output."""
    def f(x):
        y = np.exp(x)
        y += 1.0
        return np.sum(y * y)

    source = sg.source(sg.grad(f))
    assert "check_saved" not in source
    _check_against_numeric(f, (X,))


# ---------------------------------------------------------------- allow_mutation_on_saved_tensors
@pytest.mark.parametrize("f", [S.item_write, S.view_write, S.out_write, S.known_array_augmented,
                               S.maybe_scalar_augmented, S.base_of_saved_view_write])
def test_allow_mutation_keeps_the_value_as_saved(f):
    """The custom backward sees each saved value as it was when saved (torch copies it
    before the write): the true derivative, so finite differences of NumPy's f agree."""
    with allow_mutation_on_saved_tensors():
        _check_against_numeric(f, (X, W), wrt=(0, 1))


def test_allow_mutation_switches_variants_both_ways():
    g = sg.grad(S.maybe_scalar_augmented)
    with pytest.raises(RuntimeError):
        g(X, W)
    with allow_mutation_on_saved_tensors():
        allowed = g(X, W)
    np.testing.assert_allclose(allowed, numeric_grad(S.maybe_scalar_augmented, (X, W), 0), rtol=1e-6)
    with pytest.raises(RuntimeError):
        g(X, W)  # outside again: the checking variant


def test_allow_mutation_makes_a_certain_write_compile():
    g = sg.grad(S.item_write)
    with allow_mutation_on_saved_tensors():
        g(X, W)
    with pytest.raises(sg.CompileError):
        g(X, W)


def test_allow_mutation_contexts_cannot_be_nested():
    with allow_mutation_on_saved_tensors():
        with pytest.raises(RuntimeError, match="allow_mutation_on_saved_tensors contexts cannot be nested"):
            with allow_mutation_on_saved_tensors():
                pass


def test_vjp_recorded_in_the_context_needs_its_backward_there():
    with allow_mutation_on_saved_tensors():
        _, vjp_fn = sg.vjp(S.item_write, X, W)
        inside = vjp_fn(1.0)
    with pytest.raises(AssertionError, match="Trying to backward outside of the "
                                             "'allow_mutation_on_saved_tensors' contextin which"):
        vjp_fn(1.0)
    np.testing.assert_allclose(inside[0], numeric_grad(S.item_write, (X, W), 0), rtol=1e-6)


# ---------------------------------------------------------------- hooks and checks together
def test_hook_variant_unpacks_then_checks():
    calls = []

    def pack(x):
        calls.append("pack")
        return x

    def unpack(x):
        calls.append("unpack")
        return x

    with saved_tensors_hooks(pack, unpack):
        _, vjp_fn = sg.vjp(S.maybe_scalar_augmented, X, W)
    assert calls == ["pack"] * 4  # what Mul saved, and what the loss's own backward reads
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        vjp_fn(1.0)
    assert calls == ["pack"] * 4 + ["unpack"] * 4  # the check runs on the unpacked value


# ---------------------------------------------------------------- mark_dirty
def test_mark_dirty_rebinds_the_callers_names():
    _check_against_numeric(S.dirty, (X,))
    np.testing.assert_allclose(sg.grad(S.dirty)(X), 16 * X)  # a is b == 2x: sum(8x^2)


def test_mark_dirty_seed_example():
    """torch_semantics §5 (c) 4: `c = F.apply(b)` with `b = a.clone()`: a.grad == [2, 2]."""
    def f(a):
        b = a.copy()
        c = S.Double.apply(b)
        return np.sum(c)

    np.testing.assert_allclose(sg.grad(f)(np.array([1.0, 2.0])), [2.0, 2.0])


def test_mark_dirty_on_a_view_of_a_callers_array():
    _check_against_numeric(S.dirty_view_of_caller, (X,))


def test_mark_dirty_with_a_saved_output_and_a_second_input():
    s = np.array(1.5)
    _check_against_numeric(S.dirty_scale_rows, (X, s), wrt=(0, 1))


def test_mark_dirty_in_forward_mode():
    out, tangent = sg.jvp(S.dirty, (X,), (np.ones(4),))
    np.testing.assert_allclose(out, S.dirty(X.copy()))
    np.testing.assert_allclose(tangent, np.sum(16 * X))


def test_a_written_input_must_be_marked_dirty():
    with pytest.raises(sg.CompileError, match="WritesWithoutMark.forward writes its input `x` in place "
                                              "without marking it with `ctx.mark_dirty`") as info:
        sg.grad(S.writes_without_mark)(X)
    assert info.value.lineno == _line(S.WritesWithoutMark.forward, "x[0] = 0.0")


def test_dirty_tensors_must_be_returned():
    with pytest.raises(sg.CompileError, match="Some elements marked as dirty during the forward method "
                                              "were not returned as output"):
        sg.grad(S.dirty_not_returned)(X)


def test_saving_an_input_then_dirtying_it_fails_at_compile_time():
    with pytest.raises(sg.CompileError, match="SavedThenDirtied saved `x` for backward") as info:
        sg.grad(S.saved_then_dirtied)(X)
    assert info.value.lineno == _line(S.SavedThenDirtied.forward, "x *= 2.0")


# ---------------------------------------------------------------- inside loops
def test_certain_write_inside_a_loop():
    """The save and the write are in one loop body: torch raises where the body runs, so
    the check is at run time (a loop that does not run saves nothing; issue 11, I9)."""
    with pytest.raises(RuntimeError, match="Mul at saved_writes.py:16, is at version 1; "
                                           "expected version 0") as info:
        sg.grad(S.loop_item_write)(X, W)
    assert f"written in place at saved_writes.py:{_line(S.loop_item_write, 'y[0] = 1.0')} " \
        in str(info.value)


def test_possible_write_inside_a_loop_raises_at_run_time():
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0") as info:
        sg.grad(S.loop_maybe_scalar)(X, W, 3)
    assert f"saved_writes.py:{_line(S.loop_maybe_scalar, 'y += 1.0')} (`y += 1.0`)" in str(info.value)


def test_write_in_a_later_iteration_keeps_the_values_as_saved():
    """Not detected (Note [Saved values written in place]), but never a wrong gradient:
    the backward sees each iteration's saved value, the true derivative."""
    _check_against_numeric(S.loop_write_before_save, (X, W, 3), wrt=(0, 1))


def _saved_in_one_branch_then_written(x, w):
    y = x * 2.0
    z = S.Mul.apply(y.reshape(-1), w) if np.sum(x) > 0.0 else w * 1.0
    y[0] = 7.0  # may reach what Mul saved, on the path that saved it
    return np.sum(z) + np.sum(y)


def test_a_value_saved_in_one_branch_and_written_after_it_is_refused():
    """The run-time version check reads the saved value where the write is: a value saved
    inside an `if` exists on one path only, so the compiler refuses (it used to emit a read
    of a name the other path never bound: UnboundLocalError from generated code)."""
    x, w = np.array([0.5, 1.0, 2.0, 0.25]), np.array([1.0, -2.0, 0.5, 3.0])
    with pytest.raises(sg.CompileError, match="saved (`a` )?for backward") as info:
        sg.grad(_saved_in_one_branch_then_written)(x, w)
    assert f":{_line(_saved_in_one_branch_then_written, 'y[0] = 7.0')}:" in str(info.value)
