"""In-place writes in compiled code (Note [Mutation at trace time] in
srcgrad.frontend.mutation): gradients of what NumPy actually computed, against
central differences; undecidable aliasing is a CompileError, never a wrong gradient."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.corpus import surface as S

rng = np.random.default_rng(5)


def _r(*shape):
    return rng.standard_normal(shape)


def _copying(fn):
    """fn on copies of its arguments (fn may write into them)."""
    return lambda *a: fn(*[np.array(x, copy=True) if isinstance(x, np.ndarray) else x for x in a])


CASES = [
    ("subscript_writes", lambda: [_r(5)]),
    ("subscript_2d", lambda: [_r(3, 3)]),
    ("mask_write", lambda: [_r(6)]),
    ("write_through_view", lambda: [_r(5)]),
    ("write_through_transpose", lambda: [_r(3, 4)]),
    ("name_alias", lambda: [_r(4)]),
    ("augmented_on_argument", lambda: [_r(4)]),
    ("augmented_rebind_scalar", lambda: [_r(4)]),
    ("out_argument", lambda: [_r(4), _r(4)]),
    ("view_then_base_write", lambda: [_r(4)]),
    ("mutate_in_callee", lambda: [_r(4)]),
    ("write_in_nested", lambda: [_r(4)]),
    ("reshape_write_unread", lambda: [_r(2, 3)]),
    ("inplace_sort_and_fill", lambda: [_r(5)]),
]


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_grad_matches_finite_differences(name, make):
    fn = getattr(S, name)
    args = make()
    before = [a.copy() for a in args]
    grads = sg.grad(fn, wrt=tuple(range(len(args))))(*args)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)  # compiled transforms never write into arguments
    for i, g in enumerate(grads):
        assert_close(g, numeric_grad(_copying(fn), args, i), rtol=1e-5, atol=1e-7)


def test_the_original_function_does_write_into_its_argument():
    # ... which is why the compiled gradient's choice is documented (Note [Mutation at
    # trace time]): value and gradient are those of f at the values it was given.
    x = np.zeros(3)
    S.augmented_on_argument(x)
    np.testing.assert_array_equal(x, np.ones(3))
    x = np.zeros(3)
    value, g = sg.value_and_grad(S.augmented_on_argument)(x)
    np.testing.assert_array_equal(x, np.zeros(3))
    assert value == 3.0 and np.allclose(g, 2.0)


def test_arguments_sharing_memory_are_refused_at_run_time():
    x = _r(3)
    grad = sg.grad(S.out_argument, wrt=(0, 1))
    grad(x, x.copy())
    assert "no_alias" not in sg.source(grad)  # c is a local zeros_like: nothing to check
    with pytest.raises(ValueError, match="shares memory"):
        sg.grad(_aliased_write)(x, x)
    assert_close(sg.grad(_aliased_write)(x, x.copy()), np.r_[0.0, x[1:]])


def _aliased_write(a, b):
    a[0] = 5.0
    return np.sum(a * b)


def test_undecidable_view_is_a_compile_error_only_when_read():
    # of a Fortran-ordered x, y's layout is not known; of a C-ordered one the reshape is a
    # view (Note [Layout facts]; tests/test_layout_facts.py)
    with pytest.raises(sg.CompileError, match="reshape") as info:
        sg.grad(S.reshape_then_write)(np.asfortranarray(_r(2, 3)))
    assert "surface.py" in str(info.value) and ".copy()" in str(info.value)
    x = _r(2, 3)
    assert_close(sg.grad(S.reshape_then_write)(x), numeric_grad(S.reshape_then_write, [x], 0))


def test_int_index_view_augmented_assignment_is_decided():
    # np.outer is a fresh matrix: m[0] is a row, a view (Note [Layout facts])
    x = _r(3)
    assert_close(sg.grad(S.int_index_view_aug)(x), numeric_grad(S.int_index_view_aug, [x], 0))


def test_augmented_name_alias_of_an_array_writes_into_it():
    x = _r(3)  # y = x * 1.0 is an ndarray: `z += x` writes into y too
    assert_close(sg.grad(_alias_unknown)(x), numeric_grad(_alias_unknown, [x], 0))


def _alias_unknown(x):
    y = x * 1.0  # an ndarray, or a float if x is one: `+=` below means different things
    z = y
    z += x
    return np.sum(y)


def test_writing_into_a_global_is_refused():
    with pytest.raises(sg.CompileError, match="not a local variable"):
        sg.grad(S.writes_global)(_r(3))


def test_setitem_in_generated_code_is_readable():
    src = sg.source(sg.grad(S.write_through_view))
    assert "c_1 = setitem(c, slice(1, None" in src



# ---------------------------------------------------------------- `L[k] op= v` on an array item
def _item_of_a_list_augmented(x):
    y = x.copy()  # an ndarray for certain: `L[0] += x` writes into y as well
    L = [y, 2.0]
    L[0] += x
    L[1] += 1.0  # a float item: only the item changes
    return np.sum(y * y) * L[1]


def _item_that_may_be_a_scalar(x):
    y = x * 1.0  # an ndarray, or a NumPy scalar for a 0-d x: writes into y, or rebinds L[0]
    L = [y]
    L[0] += x
    return np.sum(y * y) + np.sum(L[0])


def _item_that_may_be_a_scalar_rewritten(x):
    y = x * 1.0
    L = [y]
    L[0] = L[0] + x
    return np.sum(y * y) + np.sum(L[0])


def test_augmenting_an_array_item_of_a_list_writes_into_the_array():
    """NumPy runs `L[0].__iadd__(x)`: the array object changes, so every name holding it
    sees the write (R1: `y = x * 1.0; L = [y]; L[0] += x` returned y's old value)."""
    x = np.array([0.3, -0.5, 0.7])
    value, grad = sg.value_and_grad(_item_of_a_list_augmented)(x)
    assert_close(value, _item_of_a_list_augmented(x.copy()))
    assert_close(grad, numeric_grad(_item_of_a_list_augmented, [x], 0))


def test_augmenting_an_item_that_is_an_array_writes_into_it_and_the_rewrite_compiles():
    x = np.array([0.3, -0.5, 0.7])  # y = x * 1.0 is an ndarray (Note [Layout facts])
    for f in (_item_that_may_be_a_scalar, _item_that_may_be_a_scalar_rewritten):
        assert_close(sg.grad(f)(x), numeric_grad(f, [x], 0))


def _writes_its_argument(a):
    a[a > 0.63] *= 3.0
    return a


def _receiver_computed_before_the_argument_writes(x):
    v = x[0] + 1.0
    return (v > 3.0).dot(_writes_its_argument(v)) + (v * 1.0).dot(_writes_its_argument(v))


def _receiver_is_the_written_array(x):
    v = x[0] + 1.0
    return v.dot(_writes_its_argument(v * 1.0)) + v.dot(_writes_its_argument(v))


def test_a_method_call_evaluates_its_receiver_before_its_arguments():
    """Python evaluates `base.method` first: a receiver computed before an argument writes
    into an array it was computed from keeps its value, and a receiver that is the written
    array itself sees the write (fuzz seed 602080: `(v > 3.0).dot(f(v))` read v after f
    wrote into it, a wrong value and gradient)."""
    for x in (np.array([[0.7, 0.4], [0.7, 0.2]]), np.array([[-0.7, -0.4], [0.1, 0.2]])):
        for f in (_receiver_computed_before_the_argument_writes, _receiver_is_the_written_array):
            value, grad = sg.value_and_grad(f)(x.copy())
            assert_close(value, f(x.copy()))
            assert_close(grad, numeric_grad(f, [x], 0))


def _bump(a):
    a[1:2] = np.sum(a)  # writes into its argument
    return a * 2.0


def _call_argument_before_a_writing_argument(x):
    x = x * 1.0
    return np.sum(np.add(x, _bump(x)))


def _list_element_before_a_writing_element(x):
    x = x * 1.0
    t = np.stack([x, _bump(x)])
    return np.sum(t * t)


def _operand_before_a_writing_operand(x):
    x = x * 1.0
    return np.sum(x * _bump(x)) + np.sum((x > 0.1) == (_bump(x) > 0.1))


def _tuple_and_dict_items_before_a_writing_item(x):
    x = x * 1.0
    t = (x, _bump(x))
    d = {"a": x, "b": _bump(x)}
    return np.sum(t[0] * t[1]) + np.sum(d["a"] * d["b"])


def _keyword_before_a_writing_keyword(x):
    x = x * 1.0
    return np.sum(np.clip(x, a_min=-0.1, a_max=_bump(x)) * x)


def _zipped_sequence_before_a_writing_one(x):
    x = x * 1.0
    s = 0.0
    for r, q in zip((_bump(x), x), (x, _bump(x))):
        s = s + np.sum(r * q)
    return s


def _index_computed_after_the_base(x):
    x = x * 1.0
    return np.sum(x[np.argsort(_bump(x))] * x)


@pytest.mark.parametrize("f", [_call_argument_before_a_writing_argument,
                               _list_element_before_a_writing_element,
                               _operand_before_a_writing_operand,
                               _tuple_and_dict_items_before_a_writing_item,
                               _keyword_before_a_writing_keyword,
                               _zipped_sequence_before_a_writing_one,
                               _index_computed_after_the_base])
def test_operands_evaluated_before_a_later_operand_writes_see_the_write(f):
    """Note [Operands evaluated in order] (srcgrad.ir.expand): Python evaluates operands
    left to right to objects, and an array evaluated first sees a write a later operand's
    call makes into it (fuzz seed 703573: `helper(x0, x0, b=x0)` in a loop's iterable)."""
    for x in (np.array([0.3, -0.2, 0.5]), np.array([-0.6, 0.4, 0.9])):
        value, grad = sg.value_and_grad(f)(x.copy())
        assert_close(value, f(x.copy()))
        assert_close(grad, numeric_grad(f, [x], 0), rtol=1e-5, atol=1e-7)
        out, t = sg.jvp(f, (x.copy(),), (np.ones(3),))
        assert_close(out, f(x.copy()))
        assert_close(t, np.sum(numeric_grad(f, [x], 0)), rtol=1e-5, atol=1e-7)


def _bump_test(a):
    a[1:2] = np.sum(a)
    return np.sum(a) > 0.0


def _and_with_a_writing_call(x):
    x = x * 1.0
    if np.sum(x) > 0.5 and _bump_test(x):
        return np.sum(x * x)
    return np.sum(x * 3.0)


def _or_with_a_writing_call(x):
    x = x * 1.0
    if np.sum(x) > 0.5 or _bump_test(x):
        return np.sum(x * x)
    return np.sum(x * 3.0)


def _conditional_expression_with_a_writing_call(x):
    x = x * 1.0
    v = np.sum(_bump(x)) if np.sum(x) > 0.5 else x[0]
    return np.sum(x * x) + v


@pytest.mark.parametrize("f", [_and_with_a_writing_call, _or_with_a_writing_call,
                               _conditional_expression_with_a_writing_call])
def test_a_call_python_may_skip_writes_only_where_it_runs(f):
    """`a and f(x)`, `a or f(x)`, `f(x) if c else v`: Python calls f on some paths only,
    and what f writes into x is merged after them as an `if` statement's writes are (both
    the short-circuit and the conditional expression dropped or always made the write)."""
    for x in (np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.2, -0.5]), np.array([0.5, 0.4, 0.3])):
        value, grad = sg.value_and_grad(f)(x.copy())
        assert_close(value, f(x.copy()))
        assert_close(grad, numeric_grad(f, [x], 0), rtol=1e-5, atol=1e-7)
        out, t = sg.jvp(f, (x.copy(),), (np.ones(3),))
        assert_close(out, f(x.copy()))


def _slice_updated_by_a_writing_call(x):
    x = x * 1.0
    x[0:2] += np.sum(_bump(x))  # the view x[0:2] is read first and sees _bump's write (NumPy)
    return np.sum(x * x)


def _element_updated_by_a_writing_call(x):
    x = x * 1.0
    x[1] += np.sum(_bump(x))  # x[1] is read first, a copy: _bump's write is overwritten
    return np.sum(x * x)


def _list_item_updated_by_a_writing_call(x):
    y = x * 1.0
    items = [y[0:2], y * 2.0]
    items[0] += np.sum(_bump(y))
    items[1] += _bump(items[1])
    return np.sum(y * y) + np.sum(items[1])


@pytest.mark.parametrize("f", [_slice_updated_by_a_writing_call, _element_updated_by_a_writing_call,
                               _list_item_updated_by_a_writing_call])
def test_the_item_of_an_augmented_assignment_is_read_before_its_right_side(f):
    """`x[i] op= f(x)`: Python reads x[i] before calling f; a view sees f's write into x
    and a copy does not (Note [Operands evaluated in order])."""
    for x in (np.array([0.3, -0.2, 0.5]), np.array([-0.6, 0.4, 0.9])):
        value, grad = sg.value_and_grad(f)(x.copy())
        assert_close(value, f(x.copy()))
        assert_close(grad, numeric_grad(f, [x], 0), rtol=1e-5, atol=1e-7)


def _sums_over_the_written_views(x1, x2):
    x = x1 * 1.0
    v = np.swapaxes(x.reshape((4, 6)), 0, 1)  # a strided view of x
    w = v[1:]
    w += np.abs(x2)  # writes into x's memory through both views
    # NumPy sums v and x over the same memory in the same order: equal to the last bit
    tie = np.where(np.sum(v) > np.sum(x), np.sum(v), 0.5 * np.sum(x))
    return tie + np.sum(w * np.sin(w)) - np.sum(v[1:]) + np.sum(x * x)


def _exact_difference_of_the_aliases(x1, x2):
    x = x1 * 1.0
    v = np.swapaxes(x.reshape((4, 6)), 0, 1)
    w = v[1:]
    w += np.abs(x2)
    return (np.sum(v) - np.sum(x)) + (np.sum(w) - np.sum(v[1:]))  # 0.0 in NumPy


def test_names_sharing_written_memory_read_one_array():
    """A write through views (`v = swapaxes(x.reshape(..))`, `w = v[1:]; w += ...`): every
    name reads a view of the one new x, as in NumPy, where v was a fresh array the
    write-back made x from (Note [Views of the written array]). Their sums then rounded
    differently, and `np.sum(v) > np.sum(x)`, False in NumPy, came out True for some data
    (fuzz seed 975529: np.where took the other branch, a wrong value and gradient)."""
    f, g = _sums_over_the_written_views, _exact_difference_of_the_aliases
    data = np.random.default_rng(975529)
    for _ in range(12):
        x1, x2 = data.standard_normal((6, 4)) * 10.0, data.standard_normal(4)
        expected = f(x1.copy(), x2.copy())
        value, grads = sg.value_and_grad(f, wrt=(0, 1))(x1.copy(), x2.copy())
        assert_close(value, expected, rtol=1e-12)
        for i in (0, 1):
            assert_close(grads[i], numeric_grad(f, [x1, x2], i), rtol=1e-5, atol=1e-6)
        out, vjp_fn = sg.vjp(f, x1.copy(), x2.copy())
        assert_close(out, expected, rtol=1e-12)
        u1, u2 = data.standard_normal((6, 4)), data.standard_normal(4)
        out, tangent = sg.jvp(f, (x1.copy(), x2.copy()), (u1, u2))
        assert_close(out, expected, rtol=1e-12)
        g1, g2 = vjp_fn(1.0)
        assert_close(tangent, np.sum(g1 * u1) + np.sum(g2 * u2), rtol=1e-6, atol=1e-6)
    for _ in range(6):  # the aliases' sums agree to the last bit, as NumPy's
        x1, x2 = data.standard_normal((6, 4)) * 10.0, data.standard_normal(4)
        assert g(x1.copy(), x2.copy()) == 0.0
        value, _ = sg.value_and_grad(g, wrt=(0, 1))(x1.copy(), x2.copy())
        assert value == 0.0


def _writes_first_then_returns_second(a, b):
    a[[0]] = 0.25
    return b


def aug_assign_of_a_view_whose_base_the_right_side_writes(x):
    w = x.reshape(-1)  # a view of the argument (or a copy: decided at run time)
    w += _writes_first_then_returns_second(x, w)
    return np.sum(w * w)


def aug_assign_of_a_slice_whose_base_the_right_side_writes(x):
    y = x * 1.0
    w = y[1:]
    w *= _writes_first_then_returns_second(y[1:], w)
    return np.sum(w * y[1:]) + np.sum(y * y)


def _scales_first_then_returns_second(a, b):
    a *= 3.0  # a write where `a` is an ndarray, a rebinding where it is a NumPy scalar
    return b


def aug_assign_of_the_name_the_right_side_may_write(x):
    x += _scales_first_then_returns_second(x, x)
    return np.sum(x * x)


def _scales_first_on_a_branch(a, b):
    if np.sum(b) > 0.0:
        a *= 3.0
    return b


def aug_assign_of_the_name_the_right_side_writes_on_a_branch(x):
    x += _scales_first_on_a_branch(x, x)
    return np.sum(x * x)


@pytest.mark.parametrize("f", [aug_assign_of_a_view_whose_base_the_right_side_writes,
                               aug_assign_of_a_slice_whose_base_the_right_side_writes,
                               aug_assign_of_the_name_the_right_side_may_write,
                               aug_assign_of_the_name_the_right_side_writes_on_a_branch])
def test_augmented_assignment_reads_its_target_after_the_right_side_wrote_it(f):
    """`w op= g(...)` where g writes into the array w views: NumPy's in-place op reads w
    after g ran. A view re-derived from the written array is the same object as before
    (its history), so the target is read again; it read the value before the write
    (fuzz seed 1500190: 2.15 for NumPy's 2.3). The same where g's write is decided at run
    time (`a *= 3` into an ndarray or a scalar), whose merge is the target's object on
    both paths, and where g writes on a branch (fuzz seed 2100169: sg.jvp's shape-generic
    code added to the value before the write; on a branch every transform did)."""
    x = np.array([0.1, 0.2, 0.3, 0.4])
    on_copy = lambda v: f(v.copy())  # noqa: E731 (f writes into its argument)
    value, grad = sg.value_and_grad(f)(x.copy())
    assert_close(value, on_copy(x), rtol=1e-12)
    assert_close(grad, numeric_grad(on_copy, [x], 0), rtol=1e-6, atol=1e-8)
    out, vjp_fn = sg.vjp(f, x.copy())
    assert_close(out, on_copy(x), rtol=1e-12)
    assert_close(vjp_fn(1.0)[0], numeric_grad(on_copy, [x], 0), rtol=1e-6, atol=1e-8)
    t = np.array([1.0, -0.5, 0.25, 2.0])
    out, t_out = sg.jvp(f, (x.copy(),), (t,))
    assert_close(out, on_copy(x), rtol=1e-12)
    assert_close(t_out, numeric_grad(on_copy, [x], 0) @ t, rtol=1e-6, atol=1e-8)
