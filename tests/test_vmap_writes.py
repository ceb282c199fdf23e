"""sg.vmap of functions that write into their arguments (Note [Writes into mapped
arguments] in srcgrad.pipeline.vmap): once refused (`no_alias` has no batched form),
now each example's check, against a Python loop of the unbatched transform: the
values to 1e-12, and the same error where the loop raises one."""

import numpy as np
import pytest

import srcgrad as sg

RNG = np.random.default_rng(11)
TOL = 1e-12


def writes(x, y):
    x[0] = 2.0 * y[1]
    x += y
    return np.sum(x * x)


def writes_the_second(x, y):
    y *= x
    return np.sum(np.sin(y)) + x[0]


def loop(fn, args, axes):
    """fn per example, on copies (a compiled transform never changes its arguments)."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = [fn(*(np.array(a) if ax is None else np.array(np.take(a, i, axis=ax))
                 for a, ax in zip(args, axes))) for i in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([o[k] for o in outs]) for k in range(len(outs[0])))
    return np.stack(outs)


X, Y = RNG.normal(size=(5, 3)), RNG.normal(size=(5, 3))


@pytest.mark.parametrize("fn", [writes, writes_the_second,
                                sg.grad(writes, wrt=0), sg.grad(writes, wrt=1),
                                sg.grad(writes_the_second, wrt=(0, 1))])
@pytest.mark.parametrize("axes", [(0, 0), (0, None), (None, 0), (1, 1)])
def test_writes_match_a_loop_of_the_transform(fn, axes):
    args = [a if ax is None else (a if ax == 0 else a.T.copy()) for a, ax in zip((X, Y), axes)]
    args = [a[0] if ax is None else a for a, ax in zip(args, axes)]
    before = [a.copy() for a in args]
    want = loop(fn, args, axes)
    got = sg.vmap(fn, in_axes=axes)(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w, rtol=TOL, atol=TOL)
    for a, b in zip(args, before):  # functional, as sg.grad(f) is: the caller's arrays unchanged
        assert np.array_equal(a, b)


def error_of(call):
    try:
        call()
    except ValueError as err:
        return str(err)
    return None


@pytest.mark.parametrize("fn", [sg.grad(writes, wrt=1), sg.grad(writes_the_second, wrt=0)])
def test_the_same_array_twice_raises_the_loops_error(fn):
    """(the loop of the compiled transform: the Python function itself checks nothing)"""
    A = RNG.normal(size=(4, 3))
    want = error_of(lambda: [fn(a, a) for a in A])  # each example's x and y are one row
    assert want is not None and "shares memory" in want
    assert error_of(lambda: sg.vmap(fn)(A, A)) == want


def test_interleaved_arguments_that_share_no_example_are_not_refused():
    """The whole arrays' bounds overlap (rows of one array, side by side), each
    example's do not: the loop runs, so the vmap does (a whole-array check raised)."""
    A = RNG.normal(size=(4, 6))
    x, y = A[:, :3], A[:, 3:]
    assert np.may_share_memory(x, y) and not any(np.may_share_memory(r, s) for r, s in zip(x, y))
    np.testing.assert_allclose(sg.vmap(writes)(x, y), loop(writes, (x, y), (0, 0)), rtol=TOL, atol=TOL)
    g = sg.grad(writes, wrt=1)
    np.testing.assert_allclose(sg.vmap(g)(x, y), [g(r.copy(), s.copy()) for r, s in zip(x, y)],
                               rtol=TOL, atol=TOL)


def test_a_read_only_written_argument_raises_the_loops_error():
    x = X.copy()
    x.setflags(write=False)
    g = sg.grad(writes, wrt=1)
    want = error_of(lambda: [g(r, s) for r, s in zip(x, Y)])
    assert want is not None and "read-only" in want
    assert error_of(lambda: sg.vmap(g)(x, Y)) == want
    assert error_of(lambda: sg.vmap(writes)(x, Y)) == want
    assert error_of(lambda: sg.vmap(g, in_axes=(None, 0))(x[0], Y)) == want


def test_code_another_transform_traces_still_refuses_it():
    with pytest.raises(sg.CompileError, match="no_alias"):
        sg.vmap(sg.vmap(writes))(np.stack([X, X]), np.stack([Y, Y]))


@pytest.mark.parametrize("make", [lambda f: sg.hessian(f, wrt=1),
                                  lambda f: sg.jacobian(f, wrt=1, mode="forward"),
                                  lambda f: sg.jacobian(f, wrt=1, mode="reverse")])
def test_vmap_of_a_hessian_or_jacobian_of_a_function_that_writes(make):
    t = make(writes)
    for axes in [(0, 0), (None, 0)]:
        args = (X[0] if axes[0] is None else X, Y)
        np.testing.assert_allclose(sg.vmap(t, in_axes=axes)(*args), loop(t, args, axes), rtol=TOL, atol=TOL)
    A = RNG.normal(size=(4, 3))
    want = error_of(lambda: [t(a, a) for a in A])
    assert want is not None and error_of(lambda: sg.vmap(t)(A, A)) == want


def _sum_of_a_vmap_that_writes(x, y):
    return np.sum(sg.vmap(writes)(x * 1.0, y))


def test_the_check_in_code_another_transform_traces_is_each_examples():
    """sg.grad of a function calling sg.vmap(writes): the check runs in the traced code as
    `no_alias_batched`, example by example (it was refused: `no_alias` has no batched
    form). Interleaved rows that share no example's memory pass, where a check of the
    whole arrays would raise; the gradient is the loop's."""
    A = RNG.normal(size=(4, 6))
    x, y = A[:, :3], A[:, 3:]
    got = sg.grad(_sum_of_a_vmap_that_writes, wrt=1)(x, y)
    want = sg.grad(lambda_free_loss, wrt=1)(x.copy(), y.copy())
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)


def lambda_free_loss(x, y):
    total = 0.0
    for i in range(4):
        xi = x[i] * 1.0
        xi[0] = 2.0 * y[i, 1]
        xi += y[i]
        total = total + np.sum(xi * xi)
    return total


def test_each_examples_check_raises_the_loops_error():
    from srcgrad.rules.helpers import no_alias, no_alias_batched

    A = RNG.normal(size=(4, 6))
    x, y = A[:, :3], A[:, 3:]  # the whole arrays' bounds overlap, no example's do
    assert no_alias_batched(x, x, (True, True), y) is x
    with pytest.raises(ValueError, match="shares memory") as whole:
        no_alias(x, x, y)
    z = A[:, 1:4]  # each example's row overlaps x's row
    with pytest.raises(ValueError, match="shares memory") as each:
        no_alias_batched(x, x, (True, True), z)
    assert str(each.value) == str(whole.value)
    assert no_alias_batched(x, x, (True, False), A[0, 3:]) is x  # an unmapped other


def writes_a_view_read_in_a_branch(x, y):
    w = y.reshape(-1)
    w[1:2] = 0.5
    if np.sum(y) < 0:  # (no mapped value reaches the branch: it is not batched)
        s = np.sum(w)
    else:
        s = np.sum(y)
    return s * x[0]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_written_view_read_in_a_branch_no_mapped_value_reaches(sign):
    """Seed 2663984: the written view's name after the write (a lifted no_alias's result)
    was renamed in the program but not inside the untouched branch, which then read an
    undefined name (NameError on the first call taking it, KeyError in the probe)."""
    x, y = X, sign * np.abs(Y[0])
    got = sg.vmap(writes_a_view_read_in_a_branch, in_axes=(0, None))(x, y)
    np.testing.assert_allclose(got, loop(writes_a_view_read_in_a_branch, (x, y), (0, None)),
                               rtol=TOL, atol=TOL)
