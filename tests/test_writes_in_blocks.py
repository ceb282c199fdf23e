"""In-place writes made by a function called inside an `if`/loop (issue 11, task I5):
the callee's body is traced in the block, so what its writes rebind in the caller is
the block's to carry; and by a callee's own `if` into its caller's arrays (task I8),
merged by that `if` (Note [Writes by callees inside blocks] in
srcgrad.frontend.inlining). Each program is checked against central differences in
reverse and forward mode, and called again with data that takes the other path."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


def _bump(v):
    v[0] = 0.0


def _scale_tail(v, s):
    v[1:] *= s
    return np.sum(v)


def _fill_local(a):
    y = np.zeros((4,))
    for i, r in enumerate(a):
        y[i] = np.sum(a) * r
    return y * a


def _write_view(a):
    w = a[1:]
    w[0:1] = np.min(a)
    return np.sum(w)


def _write_reshaped(a):
    w = a.reshape(-1)
    w[0:1] = np.min(a)
    return np.sum(w)


def _twice(v):
    _bump(v)
    v += 1.0


def write_in_branch(x):
    y = x * 1.0
    if np.sum(x) > 0:
        _bump(y)
    return np.sum(y * x)


def write_in_both_branches(x):
    y = x * 2.0
    if np.max(x) > 1.0:
        _scale_tail(y, x[0])
    else:
        _bump(y)
    return np.sum(y * y)


def write_in_for_loop(x):
    y = x * 1.0
    for r in x[:2]:
        _scale_tail(y, r)
    return np.sum(np.sin(y))


def write_in_while_loop(x):
    y = x + 0.5
    k = 0
    while k < 3 and np.sum(y) < 20.0:
        k += 1
        _scale_tail(y, 1.5)
    return np.sum(y * x)


def local_buffer_in_callee_loop(x):
    out = x * 0.0
    for r in x[:2]:
        out = out + _fill_local(x) * r
    return np.sum(out)


def write_through_view_in_branch(x):
    y = x * 1.0
    if np.mean(x) > 0:
        s = _write_view(y)
    else:
        s = np.sum(y)
    return s * np.sum(y * x)


def nested_callees_in_branch(x):
    y = x * 3.0
    if x[1] > 0:
        _twice(y)
    return np.sum(y * x)


def argument_view_written_in_branch(x):
    s = 0.0
    if x[0] > 0:  # a reshape of the argument: a view or not is NumPy's answer at run time
        s = _write_reshaped(x)
    return s * np.sum(x * x)


def argument_written_in_branch(x):
    if np.sum(x) > 0:
        _scale_tail(x, 2.0)
    return np.sum(x * x)


PROGRAMS = [write_in_branch, write_in_both_branches, write_in_for_loop, write_in_while_loop,
            local_buffer_in_callee_loop, write_through_view_in_branch, nested_callees_in_branch,
            argument_written_in_branch, argument_view_written_in_branch]
DATA = [np.array([0.5, -1.0, 2.0, 0.3]), np.array([-3.0, 1.5, -2.0, 0.3])]


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_reverse_mode_against_central_differences(f):
    g = sg.grad(f)
    for x in DATA:  # the second call takes the other path
        assert_close(g(x.copy()), numeric_grad(f, [x.copy()], 0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_forward_mode_against_central_differences(f):
    for x in DATA:
        t = np.linspace(0.5, 1.5, x.size)
        out, t_out = sg.jvp(f, (x.copy(),), (t,))
        assert_close(out, f(x.copy()))
        assert_close(t_out, numeric_grad(f, [x.copy()], 0) @ t, rtol=1e-5, atol=1e-7)


def test_value_and_grad_give_numpys_value():
    for x in DATA:
        value, _ = sg.value_and_grad(write_in_branch)(x.copy())
        assert_close(value, write_in_branch(x.copy()))


# ------------------------------------------------- a callee's own `if` writes the caller's array
# The branches of an `if` in a called function are traced with the callers' envs copied
# too, and the `if` merges what its writes rebind there (Note [Writes by callees inside
# blocks]): `y` of the caller, and every name sharing its memory.

def _bump_if_positive(v):
    if np.sum(v) > 0:
        v[0] = 0.0


def _scale_or_set(a, s):
    if np.sum(a) > 0.5:
        a += s * a
    else:
        a[0:1] = s
    return np.sum(a)


def _early_return_after_write(a):
    if np.sum(a) > 0.5:
        a *= 2.0
        return np.sum(a)
    a[1] = 0.0
    return np.sum(a) * 3.0


def _calls_a_writer_in_branch(a):
    if a[0] > 0:
        _bump_if_positive(a[1:])  # a view of the caller's caller's array
    return a * 1.0


def callee_branch_writes_callers_array(x):
    y = x * 1.0
    _bump_if_positive(y)
    return np.sum(y * x)


def callee_branches_write_an_aliased_array(x):
    y = x * 1.0
    z = y  # the same array: the write reaches z
    w = y[1:]  # a view of it
    t = _scale_or_set(y, x[0])
    return np.sum(z * x) + t * np.sum(w)


def callee_returns_early_after_a_write(x):
    y = x * 1.0
    w = y[1:]
    t = _early_return_after_write(y)
    return np.sum(w * x[1:]) + t


def nested_callees_write_in_branches(x):
    y = np.sin(x)
    u = _calls_a_writer_in_branch(y)
    return np.sum(y * x) + np.sum(u * u)


def closure_branch_writes_definers_array(x):
    y = x * 2.0

    def bump(s):
        if s > 0:
            y[2] = s
    bump(x[3])
    return np.sum(y * x)


def callee_branch_writes_the_argument(x):
    _bump_if_positive(x)
    return np.sum(x * x)


def _scale_first_two(v, s):
    for i in range(2):
        v[i] = v[i] * s


def callee_loop_with_known_trips_writes_callers_array(x):
    # a callee's loop is not merged with its callers' names: refused by the lowering, it
    # is unrolled (Note [Unrolling loops the lowering refuses]), its trip count known
    y = x * 1.0
    w = y[1:]
    _scale_first_two(y, x[3])
    return np.sum(y * x) + np.sum(w * w)


CALLEE_BRANCHES = [callee_branch_writes_callers_array, callee_branches_write_an_aliased_array,
                   callee_returns_early_after_a_write, nested_callees_write_in_branches,
                   closure_branch_writes_definers_array, callee_branch_writes_the_argument,
                   callee_loop_with_known_trips_writes_callers_array]


@pytest.mark.parametrize("f", CALLEE_BRANCHES, ids=lambda f: f.__name__)
def test_a_callees_branch_writing_the_callers_array(f):
    for x in DATA + [np.array([0.1, 0.2, 0.3, -0.4])]:  # each path of each `if`
        value, g = sg.value_and_grad(f)(x.copy())
        assert_close(value, f(x.copy()))
        assert_close(g, numeric_grad(f, [x.copy()], 0), rtol=1e-5, atol=1e-7)
        t = np.linspace(0.5, 1.5, x.size)
        _, t_out = sg.jvp(f, (x.copy(),), (t,))
        assert_close(t_out, numeric_grad(f, [x.copy()], 0) @ t, rtol=1e-5, atol=1e-7)


def _subtract_until_large(x0, x1):
    for _ in range(len(x1)):
        if np.sum(x0) > 0.99:  # a return inside the loop: its body branches
            return np.sum(x0)
        np.subtract.at(x1, 0, np.sum(x1))
    return np.sum(x0 * x0)


def callee_loop_with_a_return_writes_callers_argument(x0, x1):
    return _subtract_until_large(x0, x1) + np.sum(x1 * x1)


@pytest.mark.parametrize("x0", [np.array([0.3, -0.2]), np.array([0.9, 0.5])], ids=["writes", "returns"])
def test_a_callees_loop_with_a_return_writing_the_callers_argument(x0):
    """The branch writing `x1` merges the caller's names, but the loop around it carries
    only the callee's: a write there into the caller's names is refused by the lowering
    and the loop unrolled for the arguments' shapes (fuzz seed 971186: the caller read a
    value of the lowered loop's body, a NameError in the generated jvp)."""
    f = callee_loop_with_a_return_writes_callers_argument

    def on_copies(a, b):  # (f writes into x1: each evaluation on fresh arrays)
        return f(a.copy(), b.copy())
    x1 = np.array([[0.5, -1.0], [2.0, 0.3], [0.1, 0.7]])
    t0, t1 = np.array([0.5, 1.5]), np.linspace(-1.0, 1.0, 6).reshape(3, 2)
    g0, g1 = numeric_grad(on_copies, [x0, x1], 0), numeric_grad(on_copies, [x0, x1], 1)
    out, t_out = sg.jvp(f, (x0.copy(), x1.copy()), (t0, t1))
    assert_close(out, on_copies(x0, x1))
    assert_close(t_out, g0 @ t0 + np.sum(g1 * t1), rtol=1e-5, atol=1e-7)
    value, grads = sg.value_and_grad(f, wrt=(0, 1))(x0.copy(), x1.copy())
    assert_close(value, on_copies(x0, x1))
    assert_close(grads[0], g0, rtol=1e-5, atol=1e-7)
    assert_close(grads[1], g1, rtol=1e-5, atol=1e-7)


def _bump_while_positive(v):
    while np.sum(v) > 0:  # no trip count known while tracing
        v[0] = v[0] - 1.0


def callee_loop_writes_callers_array(x):
    y = x * 1.0
    _bump_while_positive(y)
    return np.sum(y * x)


def test_a_callees_own_loop_writing_the_callers_array_is_refused():
    # A loop carries only the callee's names: `y` of the caller is outside its body, and
    # the loop's trip count depends on the data, so it is not unrolled either.
    with pytest.raises(sg.CompileError, match="inside an `if`/loop in a called function, into `y`"):
        sg.grad(callee_loop_writes_callers_array)(DATA[0].copy())


# ---------------------------------------------------------------- x[index] = a view of x
# With an integer-array index NumPy copies an overlapping value before writing (its map
# iterator's copy-if-overlap), which is what compiled code computes; a slice or a mask
# is assigned element by element, its result depending on memory order: refused.

def fancy_write_of_own_view(x):
    y = x * 1.0
    y[[2, 0, 1]] = y[0:3]
    return np.sum(y * x)


def fancy_write_of_own_scalar_view(x):
    w = (x * 2.0).reshape(-1)
    w[[1]] = w[:1].reshape(())
    return np.sum(w * w)


def fancy_rows_of_own_reversed_view(x):
    m = np.outer(x, x[:3])
    m[np.array([1, 3]), 1:] = m[::-1][:2, :2]
    return np.sum(np.sin(m))


FANCY = [fancy_write_of_own_view, fancy_write_of_own_scalar_view, fancy_rows_of_own_reversed_view]


@pytest.mark.parametrize("f", FANCY, ids=lambda f: f.__name__)
def test_integer_array_write_of_a_view_of_itself(f):
    for x in DATA:
        assert_close(sg.value_and_grad(f)(x.copy())[0], f(x.copy()))
        assert_close(sg.grad(f)(x.copy()), numeric_grad(f, [x.copy()], 0), rtol=1e-5, atol=1e-7)
        t = np.linspace(0.5, 1.5, x.size)
        _, t_out = sg.jvp(f, (x.copy(),), (t,))
        assert_close(t_out, numeric_grad(f, [x.copy()], 0) @ t, rtol=1e-5, atol=1e-7)


def mask_write_of_own_view(x):
    m = np.outer(x, x)
    m[m > 0.0] = m.T[m > 0.0]  # (a copy: fine) ...
    m[np.ones((4, 4), dtype=bool)] = m.ravel()[::-1]  # ... a view through a mask: refused
    return np.sum(m)


def test_mask_or_slice_write_of_a_view_of_itself_is_refused():
    with pytest.raises(sg.CompileError, match="a view of that same array"):
        sg.grad(mask_write_of_own_view)(DATA[0].copy())


# ---------------------------------------------------------------- saved, then written in a block
# A value a custom Function saved at the function's level and possibly written inside
# an `if`/loop has a version count the blocks carry (Note [Saved values written in
# place] in srcgrad.frontend.versions); the backward raises torch's error where a write
# really reached it, and gives the derivative where none did.
from tests.corpus.functions import Mul  # noqa: E402

TORCH_PREFIX = ("one of the variables needed for gradient computation has been modified by an "
                "inplace operation: ")


def saved_view_written_in_branch(x, w):
    flat = x.reshape(-1)  # a view of a C-ordered x, a copy of an F-ordered one
    z = Mul.apply(flat, w)
    if np.sum(w) > 0:
        x[0, 0] = 7.0
    return np.sum(z) + np.sum(x)


def saved_view_written_in_loop(x, w):
    z = Mul.apply(x.reshape(-1), w)  # (unnamed: a loop may not write into a name's view)
    s = 0.0
    for r in w[:2]:
        s = s + np.sum(np.tanh(z * r))
        if r > 0:
            x[0, 0] = r
    return s + np.sum(x * x)


def saved_view_written_by_callee_in_branch(x, w):
    flat = x.reshape(-1)
    z = Mul.apply(flat, w)
    if np.sum(w) > 0:
        _bump(x[0])
    return np.sum(z) + np.sum(x)


def _bump_corner_if(v, w):
    if np.sum(w) > 0:
        v[0, 0] = 7.0


def saved_view_written_in_callees_branch(x, w):
    flat = x.reshape(-1)
    z = Mul.apply(flat, w)
    _bump_corner_if(x, w)  # the count is the caller's, merged by the callee's `if`
    return np.sum(z) + np.sum(x)


def saved_view_written_after_early_return(x, w):
    flat = x.reshape(-1)
    z = Mul.apply(flat, w)
    if np.sum(w) > 10.0:
        return np.sum(z)
    if np.sum(w) > 0:
        x[0, 0] = 7.0  # the count would stay in the branches of the early return: refused
    return np.sum(z) + np.sum(x)


C_ORDER = np.arange(1.0, 7.0).reshape(2, 3) / 4.0
F_ORDER = np.asfortranarray(C_ORDER)
W_POS, W_NEG = np.linspace(0.5, 1.5, 6), -np.linspace(0.5, 1.5, 6)
SAVED = [saved_view_written_in_branch, saved_view_written_in_loop,
         saved_view_written_by_callee_in_branch, saved_view_written_in_callees_branch]


def _copying(f):
    """`f` on copies of its arrays, in their memory order (f writes into its argument)."""
    return lambda *args: f(*[a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args])


def _numeric_check(f, args):
    g = sg.grad(f, wrt=(0, 1))(*[a.copy(order="K") for a in args])
    for gi, i in zip(g, (0, 1)):
        assert_close(gi, numeric_grad(_copying(f), list(args), i), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f", SAVED, ids=lambda f: f.__name__)
def test_a_write_in_a_block_into_a_saved_value_raises_torchs_error(f):
    with pytest.raises(RuntimeError) as info:
        sg.grad(f, wrt=(0, 1))(C_ORDER.copy(), W_POS)  # reshape was a view: it was written
    message = str(info.value)
    assert message.startswith(TORCH_PREFIX + "[float64 [6]], which was saved by Mul at ")
    assert "is at version 1; expected version 0 instead." in message
    assert "written in place at " in message


@pytest.mark.parametrize("f", SAVED, ids=lambda f: f.__name__)
def test_no_error_where_the_block_did_not_write_the_saved_value(f):
    _numeric_check(f, (C_ORDER, W_NEG))  # the block's write did not run
    _numeric_check(f, (F_ORDER, W_POS))  # it ran, into x, but reshape had copied


@pytest.mark.parametrize("f", SAVED, ids=lambda f: f.__name__)
def test_forward_mode_never_checks(f):
    t = np.linspace(0.5, 1.5, 6).reshape(2, 3)
    _, t_out = sg.jvp(f, (C_ORDER.copy(), W_POS), (t, np.zeros(6)))
    assert_close(t_out, numeric_grad(_copying(f), [C_ORDER, W_POS], 0).ravel() @ t.ravel(),
                 rtol=1e-5, atol=1e-7)


def test_a_loop_counts_every_write():
    def twice(x, w):
        z = Mul.apply(x.reshape(-1), w)
        for r in w[:2]:
            x[0, 1] += r
        return np.sum(z)
    # (a version of at least 1: after the first write the compiled x is a copy of its own)
    with pytest.raises(RuntimeError, match="is at version [12]; expected version 0"):
        sg.grad(twice, wrt=(0, 1))(C_ORDER.copy(), W_POS)


def test_a_count_lost_in_an_early_return_is_refused():
    with pytest.raises(sg.CompileError, match="the compiler cannot check it at run time"):
        sg.grad(saved_view_written_after_early_return, wrt=(0, 1))(C_ORDER.copy(), W_POS)


def _write_first_in_a_loop(a):
    k = 0
    while True:
        k += 1
        if k > 2:
            break
        if a.ravel()[0] > 0.28:  # the callee's `if` copies the caller's names, its loop does not
            w = a
            w[0, 0] = 3.0
        else:
            a = a * 2.0  # (the loop carries `a`: lowered, not unrolled)
    return a


class _SavesItsOutput(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * 1.0
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y / y


def saved_value_written_by_a_callees_loop(x, w):
    y = _write_first_in_a_loop(_SavesItsOutput.apply(x))
    return np.sum(y * w[0])


@pytest.mark.parametrize("transform", ["grad", "vjp"])
def test_a_count_that_would_not_leave_a_callees_loop_is_refused(transform):
    """The version count of a value saved at the function's level, written inside a
    called function's `if` within its loop: the `if` merges the caller's names but the
    loop carries only the callee's, so the count never left the loop (fuzz seed 1401800:
    NameError '_saved_version_0' in sg.vjp's backward, and sg.grad never checked the
    write). The write is refused as one the compiler cannot check, at the user's line."""
    with pytest.raises(sg.CompileError, match="the compiler cannot check it at run time") as info:
        if transform == "grad":
            sg.grad(saved_value_written_by_a_callees_loop, wrt=(0, 1))(C_ORDER.copy(), W_POS)
        else:
            sg.vjp(saved_value_written_by_a_callees_loop, C_ORDER.copy(), W_POS)[1](1.0)
    assert info.value.filename.endswith("test_writes_in_blocks.py")
