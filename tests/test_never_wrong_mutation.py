"""In-place writes through aliases and views outside straight-line code (Note [Mutation
at trace time], Note [Aliases across blocks]): the write reaches every name NumPy's
would, or the program is a CompileError naming the line; never a dropped write."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.api import emit_standalone
from tests.conftest import assert_close, numeric_grad

A = np.array([1.0, 2.0, 3.0, 4.0])


def same_alias_in_both_branches(a, c):
    x = a * 1.0
    if c[0] > 0.0:
        y = x
    else:
        y = x
    y[0] = 0.0
    return np.sum(x * x)


def same_alias_in_conditional_expression(a, c):
    x = a * 1.0
    y = x if c[0] > 0.0 else x
    y[1] = 0.0
    return np.sum(x * x)


def alias_on_one_path_not_read_again(a, c):
    x = a * 1.0
    z = a * 2.0
    y = x if c[0] > 0.0 else z
    y[0] = 0.0
    return np.sum(y * y)


def write_in_loop_no_alias(a):
    x = a * 1.0
    for i in range(2):
        x[i] = x[i + 1] * 2.0
    return np.sum(x * x)


def transpose_written_then_base_written(b):
    b = b * 1.0
    v = b.T
    v += 1.0
    b += 1.0
    return np.sum(b * v)


def reshape_view_chain(b):
    b = b * 1.0
    v = b[0, :]
    w = v[1:]
    w *= 3.0
    b[1, :] = v * 2.0
    return np.sum(b * b) + np.sum(w)


def view_written_before_break(x):
    y = x * 1.0
    for i in range(3):
        v = y[1:]
        v[0] = x[i] * v[1]
        if x[i] > 0.5:
            break
    return np.sum(y * y)


COMPILING = [
    ("same-alias-branches-then", same_alias_in_both_branches, [A, np.array([1.0])]),
    ("same-alias-branches-else", same_alias_in_both_branches, [A, np.array([-1.0])]),
    ("same-alias-ifexp", same_alias_in_conditional_expression, [A, np.array([1.0])]),
    ("alias-one-path-then", alias_on_one_path_not_read_again, [A, np.array([1.0])]),
    ("alias-one-path-else", alias_on_one_path_not_read_again, [A, np.array([-1.0])]),
    ("loop-write-no-alias", write_in_loop_no_alias, [A]),
    ("transpose-then-base", transpose_written_then_base_written, [np.arange(4.0).reshape(2, 2) / 3]),
    ("view-of-view", reshape_view_chain, [np.arange(6.0).reshape(2, 3) / 5]),
    ("view-write-then-break", view_written_before_break, [np.array([0.2, 0.7, 0.1, 0.4])]),
]


@pytest.mark.parametrize("name,fn,args", COMPILING, ids=[c[0] for c in COMPILING])
def test_reverse_mode(name, fn, args):
    value, grad = sg.value_and_grad(fn)(*[a.copy() for a in args])
    assert_close(value, fn(*[a.copy() for a in args]))
    assert_close(grad, numeric_grad(lambda *a: fn(*[b.copy() for b in a]), args, 0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name,fn,args", COMPILING, ids=[c[0] for c in COMPILING])
def test_forward_mode(name, fn, args):
    tangent = np.linspace(0.5, 1.5, args[0].size).reshape(args[0].shape)
    tangents = (tangent,) + tuple(np.zeros_like(a) for a in args[1:])
    out, t_out = sg.jvp(fn, tuple(a.copy() for a in args), tangents)
    assert_close(out, fn(*[a.copy() for a in args]))
    expected = np.sum(numeric_grad(lambda *a: fn(*[b.copy() for b in a]), args, 0) * tangent)
    assert_close(t_out, expected, rtol=1e-5, atol=1e-7)


def alias_write_in_loop(a):
    x = a * 1.0
    y = x
    for _ in range(2 if np.sum(a) < 1e3 else 3):  # a trip count on data: not unrolled
        y[0] = 0.0
    return np.sum(x * x)


def view_write_in_loop(a):
    x = a * 1.0
    row = x[1:]
    for _ in range(2 if np.sum(a) < 1e3 else 3):  # a trip count on data: not unrolled
        row[0] = row[0] * 2.0
    return np.sum(x * x)


def view_augmented_in_while(a):
    x = a * 1.0
    acc = x[:2]
    i = 0
    while np.sum(a) < 1e3 * (i + 1):  # on data, no bound: not unrolled (nested ifs, no end)
        acc += a[2:]
        i = i + 1
    return np.sum(x * x)


def alias_on_one_path_read_again(a, c):
    x = a * 1.0
    z = a * 2.0
    y = x if c[0] > 0.0 else z
    y[0] = 0.0
    return np.sum(x * x)


def undecided_write_in_one_branch(x0, x2, c):
    v2 = x0
    x2 = x2 * 1.0  # computed here: its layout is not the caller's (Note [Views of arguments])
    if c[0] > 0.35:
        pass
    else:
        w5 = x2.reshape(1)  # a view or a copy: the write may or may not reach x2
        w5 += v2
    return np.sum(x2 * x2)


def undecided_view_in_branch_then_loop(x1):
    x1 = x1[:, None] * x1  # of a strided x1: a matrix of unknown layout
    if np.sum(x1) > 0.26:
        w5 = x1.reshape(4)
        w5[[1]] = 1.0
    s = x1[0, 0] * 0.0
    for i in range(2):
        s = s + x1[0, i]
    return s


def vector_view_in_branch_then_loop(x1):
    x1 = x1 * 1.0  # of a strided x1: a vector of unknown layout, whose reshape is a view
    if np.sum(x1) > 0.26:
        w5 = x1.reshape(2)
        w5[[1]] = 1.0
    s = x1[0] * 0.0
    for i in range(2):
        s = s + x1[i]
    return s


REFUSED = [  # (undecided_write_in_one_branch and vector_view_in_branch_then_loop are decided:
    # tests/test_layout_facts.py)
    ("undecided-branch-then-loop", undecided_view_in_branch_then_loop,
     [np.repeat([0.5, 0.5], 2)[::2]], "view or a copy"),  # strided: x1's product's layout unknown
    ("alias-write-in-loop", alias_write_in_loop, [A], "shares memory with `x`"),
    ("view-write-in-loop", view_write_in_loop, [A], "shares memory with `x`"),
    ("view-augmented-in-while", view_augmented_in_while, [A], "shares memory with `x`"),
    ("alias-one-path-read", alias_on_one_path_read_again, [A, np.array([1.0])], "on some paths only"),
]


@pytest.mark.parametrize("name,fn,args,message", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_with_the_line(name, fn, args, message):
    for transform in (lambda: sg.grad(fn)(*args),
                      lambda: sg.jvp(fn, tuple(args), tuple(np.ones_like(a) for a in args))):
        with pytest.raises(sg.CompileError, match=message) as info:
            transform()
        assert info.value.filename.endswith("test_never_wrong_mutation.py")


def writes_its_argument(x):
    x[0] = 0.0
    return np.sum(x * x)


def test_read_only_argument_written_raises_as_numpy_does():
    x = np.array([1.0, 2.0])
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        writes_its_argument(x)
    for transform in (lambda: sg.grad(writes_its_argument)(x), lambda: sg.vjp(writes_its_argument, x),
                      lambda: sg.jvp(writes_its_argument, (x,), (np.ones(2),))):
        with pytest.raises(ValueError, match="read-only"):
            transform()
    y = np.array([1.0, 2.0])  # writable: the gradient of what NumPy computed, y untouched
    expected = numeric_grad(lambda a: writes_its_argument(a.copy()), [y], 0)
    assert_close(sg.grad(writes_its_argument)(y), expected)
    assert_close(y, [1.0, 2.0])


def write_through_enumerated_row(x0):
    for i, row in enumerate(x0):
        row[i] *= np.sum(x0)
    return np.sum(x0)


def write_through_index_instead(x0):
    x0 = x0 * 1.0
    for i in range(x0.shape[0]):
        x0[i, i] *= np.sum(x0)
    return np.sum(x0)


def test_row_of_the_loop_sequence_written_is_refused_and_the_rewrite_compiles():
    a = np.array([[0.5, -0.2], [0.3, 0.9]])
    with pytest.raises(sg.CompileError, match="row of the array the loop iterates over"):
        emit_standalone(write_through_enumerated_row)  # the shape-generic code: no trip count
    # known (a variant for these shapes unrolls it: tests/test_unrolled_loops.py)
    value, grad = sg.value_and_grad(write_through_index_instead)(a)
    assert_close(value, write_through_enumerated_row(a.copy()))
    assert_close(grad, numeric_grad(write_through_index_instead, [a], 0), rtol=1e-5, atol=1e-7)


def writes_then_reads_in_loop(x1):
    x1[[0, 1]] = np.cos(x1[:1])
    y1 = np.zeros((3,))
    for i in range(3):
        y1[i] = np.sum(x1)
    return y1[1]


def test_jacobian_auto_does_not_run_f_on_the_callers_array():
    x = np.array([0.3, -0.7, 1.1])
    expected = numeric_grad(lambda a: writes_then_reads_in_loop(a.copy()), [x], 0)
    for mode in ("auto", "reverse", "forward"):
        assert_close(sg.jacobian(writes_then_reads_in_loop, mode=mode)(x), expected, rtol=1e-5, atol=1e-7)
        assert_close(x, [0.3, -0.7, 1.1])


# ---------------------------------------------------------------------------------------
# `+=` through a name bound to a branch output (fuzz seed 7181): with no other name
# sharing the branch output itself, the write used to be taken for a rebinding, so the
# name the output is on one path (`x0`) kept its old value: value and gradient wrong.

def augmented_through_conditional_view(x0):
    r = x0.reshape((2, 2)) if x0[0, 0] > 0.1 else x0
    if x0[0, 1] > 0.59:
        pass
    else:
        r += x0
    return np.sum(x0)


def augmented_through_conditional_alias_in_loop(x0):
    for r in (x0 * 2.0, x0 if x0[0, 0] > 0.1 else x0 * 3.0):
        if x0[0, 1] > 0.59:
            continue
        r += x0
    return np.sum(x0)


def augmented_through_conditional_alias_unread(x0):
    r = x0 if x0[0, 0] > 0.1 else x0 * 3.0
    r += 1.0
    return np.sum(r * r)


def augmented_through_conditional_alias_rewritten(x0):
    r = x0.copy() if x0[0, 0] > 0.1 else x0 * 3.0  # the hint: copy in the branch
    r += x0
    return np.sum(x0) + np.sum(r)


X22 = [np.array([[-0.8, 0.4], [1.7, 0.8]]), np.array([[1.7, -0.1], [-1.0, 0.2]])]


@pytest.mark.parametrize("fn", [augmented_through_conditional_view,
                                augmented_through_conditional_alias_in_loop])
def test_augmented_write_through_a_branch_output_is_refused_when_read(fn):
    for x in X22:  # the write happens on the first data set only: refused for both
        with pytest.raises(sg.CompileError, match="on some paths only") as info:
            sg.grad(fn)(x.copy())
        assert info.value.filename.endswith("test_never_wrong_mutation.py")
        with pytest.raises(sg.CompileError, match="on some paths only"):
            sg.jvp(fn, (x.copy(),), (np.ones((2, 2)),))


@pytest.mark.parametrize("fn", [augmented_through_conditional_alias_unread,
                                augmented_through_conditional_alias_rewritten])
def test_augmented_write_through_a_branch_output_compiles_when_unambiguous(fn):
    grad = sg.value_and_grad(fn)
    for x in X22:
        value, g = grad(x.copy())
        assert_close(value, fn(x.copy()))
        assert_close(g, numeric_grad(lambda a: fn(a.copy()), [x], 0), rtol=1e-5, atol=1e-7)


# A tuple holding a name made Undecided inside one branch (fuzz seed 7284): the `if`
# merges containers leafwise, and the Undecided leaf reached generated code (crash
# "'Undecided' object has no attribute 'value'"). It stays Undecided: reading it is the
# CompileError, not reading it compiles.

def undecided_inside_a_tuple(x0):
    pair = (x0, x0)
    v1, v2 = pair
    if np.mean(v2) < 0.36:
        pass
    else:
        v2 *= 0.1 > v1
    return np.sum(v2 * v2)


def undecided_inside_a_tuple_read(x0):
    pair = (x0, x0)
    v1, v2 = pair
    if np.mean(v2) < 0.36:
        pass
    else:
        v2 *= 0.1 > v1
    return np.sum(pair[0])


@pytest.mark.parametrize("fn", [undecided_inside_a_tuple, undecided_inside_a_tuple_read])
def test_a_container_leaf_written_in_one_branch(fn):
    # `v2 *= ...` on an argument: in place where it is an ndarray, decided at run time
    # (Note [Views of arguments]); `pair[0]` reads the write on that path
    for x in (np.array([[0.25], [0.2], [0.7]]), np.array([[0.05], [0.02], [0.9]])):
        value, g = sg.value_and_grad(fn)(x.copy())
        assert_close(value, fn(x.copy()))
        assert_close(g, numeric_grad(lambda a: fn(a.copy()), [x], 0), rtol=1e-5, atol=1e-7)


# A nested loop inside `for i, row in enumerate(x)` dropped its enclosing loop's hidden
# sequence name when it ended (fuzz seed 109), so a write through `row` before it was
# neither carried nor refused: NumPy's write into x was lost (value and gradient wrong).

def row_written_then_nested_loop(x0):
    for i, row in enumerate(x0):
        row[i] *= np.sum(x0)
        for _ in range(2):
            pass
    return np.sum(x0)


def row_written_then_nested_loop_rewritten(x0):
    x0 = x0 * 1.0
    for i in range(len(x0)):
        x0[i, i] *= np.sum(x0)
        for _ in range(2):
            pass
    return np.sum(x0)


def test_row_write_before_a_nested_loop_is_refused_and_the_rewrite_compiles():
    a = np.array([[0.5, -0.2], [0.3, 0.9]])
    for mode in ("reverse", "forward"):  # the shape-generic code (a variant unrolls the loop)
        with pytest.raises(sg.CompileError, match="row of the array the loop iterates over"):
            emit_standalone(row_written_then_nested_loop, mode=mode)
    value, grad = sg.value_and_grad(row_written_then_nested_loop_rewritten)(a)
    assert_close(value, row_written_then_nested_loop(a.copy()))
    assert_close(grad, numeric_grad(row_written_then_nested_loop_rewritten, [a], 0), rtol=1e-5, atol=1e-7)
    _, tangent = sg.jvp(row_written_then_nested_loop_rewritten, (a,), (np.ones((2, 2)),))
    assert_close(tangent, np.sum(grad), rtol=1e-5, atol=1e-7)


# `x op= rhs` where rhs writes into x's storage (an inlined helper writing through a view;
# fuzz seed 316). Python reads the target (and for `x[i] op= rhs` the item) before rhs
# runs, and the in-place op then works on the array as rhs left it; the compiler stored
# into the value from before rhs, so rhs's write, or the op's, was lost.

def scale_first(a0):
    a0[0] *= 3.0
    a0 -= a0 / (a0 * a0 + 1.0)
    return np.sum(a0) * 1.5


def item_op_helper_writes_the_item(x0):
    v1 = x0 * np.array([1.0, 2.0, 3.0])
    v1[[0]] *= scale_first(v1[:1])
    return np.sum(v1 * v1)


def name_op_helper_writes_a_view(x0):
    v1 = x0 * np.array([1.0, 2.0, 3.0])
    v1 += scale_first(v1[:1])
    return np.sum(v1 * v1)


def item_op_helper_writes_other_items(x0):
    v1 = x0 * np.array([1.0, 2.0, 3.0])
    v1[0] += scale_first(v1[1:])
    return np.sum(v1 * v1)


@pytest.mark.parametrize("fn", [item_op_helper_writes_the_item, name_op_helper_writes_a_view,
                                item_op_helper_writes_other_items])
def test_augmented_assignment_whose_right_side_writes_the_target(fn):
    vg = sg.value_and_grad(fn)
    for x in (np.array([0.3, -0.2, 0.5]), np.array([-0.7, 0.4, 1.1])):
        value, grad = vg(x)
        assert_close(value, fn(x))
        expected = numeric_grad(fn, [x], 0)
        assert_close(grad, expected, rtol=1e-5, atol=1e-7)
        _, tangent = sg.jvp(fn, (x,), (np.ones(3),))
        assert_close(tangent, np.sum(expected), rtol=1e-5, atol=1e-7)


# A name bound inside a loop to another name's array (`y = x`, `y = x[1:]`), written
# after the loop: the loop's output was a new value sharing nothing, so the write never
# reached `x` (value and gradient wrong). The output is now what the last iteration left
# or, when the loop may run no iteration, the value before it (Note [Aliases across
# blocks]): a write through it is a CompileError where the other name is read again.

def alias_bound_in_for_written_after(a):
    x = a * 1.0
    y = a * 2.0
    for _ in range(2):
        y = x
    y += 1.0
    return np.sum(x * x)


def view_bound_in_while_written_after(a):
    x = a * 1.0
    y = a * 2.0
    i = 0
    while i < 2:
        y = x[1:]
        i += 1
    y *= 3.0
    return np.sum(x * x)


def alias_bound_in_branch_in_loop_written_after(a):
    x = a * 1.0
    y = a * 2.0
    for i in range(2):
        if a[i] > 0:
            y = x
    y[0] = 5.0
    return np.sum(x * x)


def fresh_value_in_loop_written_after(a):
    x = a * 1.0
    y = x
    for _ in range(2):
        y = y * 2.0  # a new array each iteration: the write after the loop misses x
    y += 1.0
    return np.sum(x * x) + np.sum(y)


@pytest.mark.parametrize("fn", [alias_bound_in_for_written_after, view_bound_in_while_written_after,
                                alias_bound_in_branch_in_loop_written_after])
def test_write_after_a_loop_through_an_alias_it_bound_is_refused(fn):
    with pytest.raises(sg.CompileError, match="on some paths only") as info:
        sg.grad(fn)(A)
    assert info.value.filename.endswith("test_never_wrong_mutation.py")
    with pytest.raises(sg.CompileError, match="on some paths only"):
        sg.jvp(fn, (A,), (np.ones(4),))


def test_write_after_a_loop_that_always_rebinds_to_a_fresh_array_compiles():
    fn = fresh_value_in_loop_written_after
    value, grad = sg.value_and_grad(fn)(A)
    assert_close(value, fn(A.copy()))
    assert_close(grad, numeric_grad(lambda a: fn(a.copy()), [A], 0), rtol=1e-5, atol=1e-7)


def residual_net(x, W):
    h = x
    for i in range(W.shape[0]):  # run-time bounds: taken to run (Note [Aliases across blocks])
        h = np.tanh(h @ W[i])
    h += 1.0
    return np.sum(h + x)


def test_write_after_a_range_loop_over_a_shape_compiles():
    x, W = np.array([0.1, -0.2]), np.linspace(-0.5, 0.5, 12).reshape(3, 2, 2)
    for i in range(2):
        assert_close(sg.grad(residual_net, wrt=(0, 1))(x, W)[i], numeric_grad(residual_net, [x, W], i),
                     rtol=1e-5, atol=1e-7)


# Arrays held in a tuple, list or dict, written through another name inside an if/loop
# block (fuzz seed 2878). The block traced in a copy of the env whose containers were the
# enclosing code's objects, changed in place: the branch's values leaked into the other
# branch and past the block (a zero gradient, a NameError in generated code). Containers
# are now copied on write inside blocks and merged after an `if`; a loop, which carries
# arrays and not containers, refuses the write. Names that share storage on both paths of
# an `if` share its output too, so a later write through one reaches the other.

def write_in_branch_through_dict_item(d):
    w = d["w"]
    if np.sum(w) > 0:
        w[0, 0] = 1.0
    return np.sum(d["w"] * d["w"])


def write_in_branch_through_list_item(a):
    held = [a * 1.0]
    w = held[0]
    if np.sum(w) > 0:
        w[0, 0] = 1.0
    else:
        w[0, 1] = 2.0
    return np.sum(held[0] * held[0])


def write_in_branch_then_after_it(a):
    x = a * 1.0
    y = x
    if a[0, 0] > 0:
        y[0, 0] = 1.0
    y[0, 1] = 2.0  # reaches x on both paths
    return np.sum(x * x)


def write_in_loop_through_dict_item(a):
    d = {"w": a * 1.0}
    w = d["w"]
    for i in range(2):
        w[0, i] = 1.0
    return np.sum(d["w"] * d["w"])


def write_in_loop_into_dict_item(a):
    w = a * 1.0
    d = {"w": w}  # `w` shares the array (unshared, the dict is carried: test_containers_in_blocks)
    k = 0
    while np.sum(a) < 1e3 * (k + 1):  # on data, no bound: not unrolled (nested ifs, no end)
        d["w"][0, k % 2] = 1.0
        k += 1
    return np.sum(d["w"] * d["w"]) + np.sum(w)


def write_in_loop_copied_out(a):
    d = {"w": a * 1.0}
    w = d["w"].copy()  # the hint's rewrite
    for i in range(2):
        w[0, i] = 1.0
    return np.sum(w * w) + np.sum(d["w"])


M23 = [np.arange(6.0).reshape(2, 3) / 7 + 0.1, -np.arange(6.0).reshape(2, 3) / 7 - 0.1]


@pytest.mark.parametrize("fn,wrap", [(write_in_branch_through_dict_item, lambda a: {"w": a}),
                                     (write_in_branch_through_list_item, lambda a: a),
                                     (write_in_branch_then_after_it, lambda a: a),
                                     (write_in_loop_copied_out, lambda a: a)])
def test_writes_through_container_items_and_aliases_across_an_if(fn, wrap):
    for a in M23:
        value, grad = sg.value_and_grad(fn)(wrap(a.copy()))
        grad = grad["w"] if isinstance(grad, dict) else grad
        assert_close(value, fn(wrap(a.copy())))
        assert_close(grad, numeric_grad(lambda b: fn(wrap(b.copy())), [a], 0), rtol=1e-5, atol=1e-7)
        if fn is not write_in_branch_through_dict_item:
            _, tangent = sg.jvp(fn, (a.copy(),), (np.ones((2, 3)),))
            assert_close(tangent, np.sum(numeric_grad(lambda b: fn(b.copy()), [a], 0)), rtol=1e-5,
                         atol=1e-7)


@pytest.mark.parametrize("fn,message", [(write_in_loop_through_dict_item, "that `d` holds was written"),
                                        (write_in_loop_into_dict_item, "that the dict `d` holds")])
def test_writes_in_a_loop_into_an_array_a_container_holds_are_refused(fn, message):
    with pytest.raises(sg.CompileError, match=message) as info:
        sg.grad(fn)(M23[0])
    assert info.value.filename.endswith("test_never_wrong_mutation.py")


def unpacked_then_written_in_loop(a, b):
    pair = (a * 2.0, b * 1.0)
    v1, v2 = pair  # `pair` still holds v2's array, and is not read again: compiles
    v2[0] = 1.0
    k = 0
    while k < 2 and np.mean(v2) < 5.0:
        k += 1
        v2 *= 2.0
    return np.sum(v1) * np.sum(v2 * b)


def test_a_write_in_a_loop_into_an_array_a_container_holds_compiles_when_not_read_through_it():
    fn = unpacked_then_written_in_loop
    args = [np.array([0.5, -1.0]), np.array([1.5, 0.25])]
    grads = sg.grad(fn, wrt=(0, 1))(*[a.copy() for a in args])
    for i in range(2):
        assert_close(grads[i], numeric_grad(lambda *x: fn(*[y.copy() for y in x]), args, i),
                     rtol=1e-5, atol=1e-7)


# Writes through a loop param that aliases another name's array on a later iteration or
# in a nested loop (fuzz seed 4718): the shared-memory check looked at the first value of
# the innermost loop's param only, so the write reaching `v` was dropped (a nan value).

def alias_in_nested_loop(a):
    x = a * 1.0
    v = x
    for _ in range(2 if np.sum(a) < 1e3 else 3):  # a trip count on data: not unrolled
        for _ in range(2):
            x[0] = 3.0
    return np.sum(v * v)


def rebound_to_alias_then_written(a):
    x = a * 1.0
    v = a * 2.0
    for _ in range(3 if np.sum(a) < 1e3 else 4):  # a trip count on data: not unrolled
        x[0] = x[0] + 1.0
        x = v  # the next iteration writes into v
    return np.sum(v * v)


def rebound_to_alias_on_some_paths(a):
    x = a * 1.0
    v = a * 2.0
    for _ in range(3 if np.sum(a) < 1e3 else 4):  # a trip count on data: not unrolled
        x[0] = x[0] + 1.0
        x = v if np.sum(a) < 0.0 else x  # v's array on some paths (fuzz seed 1402329)
    return np.sum(v * v)


def fuzz_4718(x0):
    v1 = x0
    if x0.max() > 0.25:
        return np.sum(x0)
    for _ in range(2 if np.sum(x0) < 1e3 else 3):  # a trip count on data: not unrolled
        for _ in range(4):
            x0[0:2] = 1.0
            x0 = v1
    return np.dot(v1[:1], x0[:1])


@pytest.mark.parametrize("fn,message", [(alias_in_nested_loop, "shares memory with `v`"),
                                        (rebound_to_alias_then_written, "leaves bound to the array of `v`"),
                                        (rebound_to_alias_on_some_paths, "leaves bound to the array of `v`"),
                                        (fuzz_4718, "shares memory with `v1`")])
def test_loop_writes_reaching_another_name_on_a_later_iteration_are_refused(fn, message):
    with pytest.raises(sg.CompileError, match=message) as info:
        sg.grad(fn)(np.array([-1.5, -1.9]))
    assert info.value.filename.endswith("test_never_wrong_mutation.py")


def alias_from_one_loop_written_in_the_next(x0):  # fuzz seed 7752
    v1 = x0 * 1.0
    r2 = x0 * 2.0
    k = 0
    while k < 2:
        k += 1
        r2 = v1.reshape((2,))  # after the while, r2 may be v1's array
    for _ in range(2 if np.sum(x0) < 1e3 else 3):  # a trip count on data: not unrolled
        r2 += r2[:1]
    return np.sum(v1)


def test_a_loop_param_that_may_be_another_names_array_is_refused_when_written():
    with pytest.raises(sg.CompileError, match="shares memory with `v1`") as info:
        sg.grad(alias_from_one_loop_written_in_the_next)(np.array([1.7, 0.2]))
    assert info.value.filename.endswith("test_never_wrong_mutation.py")


# Assigning into an array a view of itself (fuzz seed 9079): NumPy copies element by
# element where two strided views overlap, so its result depends on memory order; the
# compiled code would read every value as before the write. Refused, on every path.

def self_view_write(a):
    x = a * 1.0
    x[:, 0] = x.ravel()[:4]
    return np.sum(x * x)


def self_view_write_on_some_path(a):
    x = a * 1.0
    x[:, 0] = x.ravel()[1:5] if np.mean(x) < -10.0 else x.ravel()[:4]
    return np.sum(x)


def self_view_write_copied(a):
    x = a * 1.0
    x[:, 0] = x.ravel()[:4].copy()
    return np.sum(x * x)


@pytest.mark.parametrize("fn", [self_view_write, self_view_write_on_some_path])
def test_assigning_a_view_of_the_array_itself_is_refused(fn):
    with pytest.raises(sg.CompileError, match="a view of that same array") as info:
        sg.grad(fn)(np.arange(12.0).reshape(4, 3))
    assert "(...).copy()" in info.value.hint


def test_assigning_a_copy_of_a_view_of_the_array_itself_is_right():
    a = np.arange(12.0).reshape(4, 3) * 0.1
    g = sg.grad(self_view_write_copied)(a)
    assert_close(g, numeric_grad(self_view_write_copied, (a,), 0))


# A view chosen by a conditional expression, read after a write into the array it may
# view (fuzz seed 21388: the write was not seen, wrong value and gradient): refused.

def view_chosen_then_written(x0):
    v = np.reshape(x0 if x0[:1] < -0.95 else x0[:1], ())
    x0[[0, 1, 2]] += x0[:1]
    return v


def view_chosen_then_written_copied(x0):
    v = np.reshape(x0 if x0[:1] < -0.95 else x0[:1], ()).copy()
    x0[[0, 1, 2]] += x0[:1]
    return v


def test_a_view_chosen_on_some_paths_then_written_is_refused():
    with pytest.raises(sg.CompileError, match="on some paths this value is the array written") as info:
        sg.grad(view_chosen_then_written)(np.array([0.4, 0.9, 1.3, 1.8]))
    assert ".copy()" in info.value.hint


def test_the_copied_rewrite_is_right():
    x = np.array([0.4, 0.9, 1.3, 1.8])
    g = sg.grad(view_chosen_then_written_copied)(x.copy())
    assert_close(g, numeric_grad(view_chosen_then_written_copied, (x,), 0))


# Two names that share a value on some path only: both chose it in a branch (fuzz seed
# 21400: `v1 *= v1; x0_0 = v1` in one branch, then `x0_0[1:2] *= 2` and `v1` read). NumPy's
# write reaches `v1` on that path only: reading `v1` is refused, the copy compiles.

def shared_on_one_path_then_written(a):
    x = a[0]
    v = a[1] * 1.0
    if a[0, 0] > 0.0:
        pass
    else:
        v *= v  # `v` is a new value on this path: both names are merges
        x = v
    x[1:2] *= 3.0
    return np.sum(v * v)


def shared_on_one_path_copied(a):
    x = a[0]
    v = a[1] * 1.0
    if a[0, 0] > 0.0:
        pass
    else:
        v *= v
        x = v.copy()
    x[1:2] *= 3.0
    return np.sum(v * v)


# `x += ...` on a name no other name shares for certain, where a loop's output (or a
# branch's) is its array on some paths (fuzz seed 28843: `x1 = x0; while ...: break;
# x0 = (4, 3)`, then `x1 -= x1; return np.sum(x0)`): rebinding `x1` is right, `x0` may
# have been written. Refused on read.

def loop_output_may_be_the_written_array(a):
    y = a * 1.0
    x = y
    k = 0
    while k < 1:
        k += 1
        if a[0] < 10.0:
            break
        x = a * 5.0
    y -= 0.5 * y
    return np.sum(x * x)


def branch_output_may_be_the_written_array(a):
    y = a * 1.0
    z = y if a[0] > 0.0 else a * 2.0
    y += 1.0
    return np.sum(z * z)


def branch_output_copied(a):
    y = a * 1.0
    z = y.copy() if a[0] > 0.0 else a * 2.0
    y += 1.0
    return np.sum(z * z)


@pytest.mark.parametrize("fn", [shared_on_one_path_then_written, loop_output_may_be_the_written_array,
                                branch_output_may_be_the_written_array])
def test_a_name_sharing_the_written_array_on_some_paths_is_refused_on_read(fn):
    a = np.array([[-0.5, 0.7, 1.1], [0.3, -0.2, 0.9]])
    arg = a if fn is shared_on_one_path_then_written else a[0].copy()
    with pytest.raises(sg.CompileError, match="changed this value on some paths only") as info:
        sg.value_and_grad(fn)(arg)
    assert info.value.filename.endswith("test_never_wrong_mutation.py")
    assert ".copy()" in info.value.hint


@pytest.mark.parametrize("fn, arg", [
    (shared_on_one_path_copied, np.array([[-0.5, 0.7, 1.1], [0.3, -0.2, 0.9]])),
    (shared_on_one_path_copied, np.array([[0.5, 0.7, 1.1], [0.3, -0.2, 0.9]])),
    (branch_output_copied, np.array([0.5, 0.7, 1.1])),
    (branch_output_copied, np.array([-0.5, 0.7, 1.1]))])
def test_the_copy_where_it_is_bound_is_right(fn, arg):
    value, g = sg.value_and_grad(fn)(arg.copy())
    assert_close(value, fn(arg.copy()))
    assert_close(g, numeric_grad(fn, (arg,), 0))


# A loop writing through a name whose first value another name shares on some path only
# (fuzz seed 28752: `v1 = x2.reshape((3,)) if c else x2.reshape((3,))`, then `x2 -= ...`
# in a loop): the write would reach `v1`, which the loop does not carry. Refused.

def chosen_view_then_written_in_loop(a):
    x = a * 1.0
    v = x[:2] if a[0] > 0.0 else x[1:]
    for _ in range(2 if np.sum(a) < 1e3 else 3):  # a trip count on data: not unrolled
        x -= 0.5
    return np.sum(v)


def test_a_loop_write_into_an_array_a_chosen_view_may_share_is_refused():
    with pytest.raises(sg.CompileError, match="shares memory with `v`"):
        sg.grad(chosen_view_then_written_in_loop)(np.array([0.5, 0.7, 1.1]))


# A loop writing through a name whose first value a tuple holds, where the body also
# reads the tuple (fuzz seed 24688: `v1 = x2[1]; while ...: v1 *= g(x2[1])`): from the
# second iteration on, NumPy's `x2[1]` reads what the last write left. Refused; the copy
# compiles and is right.

def held_array_read_in_the_loop(x, t):
    v = t[1]
    for _ in range(3 if np.sum(x) < 1e3 else 4):  # a trip count on data: not unrolled
        v *= 0.5 / (t[1] * t[1] + 1.0)
    return np.log(v * v + 1.0) + np.sum(x)


def held_array_copied(x, t):
    v = t[1].copy()
    for _ in range(3):
        v *= 0.5 / (t[1] * t[1] + 1.0)
    return np.log(v * v + 1.0) + np.sum(x)


def test_a_loop_write_into_an_array_a_tuple_holds_and_the_body_reads_is_refused():
    t = (np.array(1.8), np.array(-1.0))
    with pytest.raises(sg.CompileError, match="shares memory with `t`"):
        sg.value_and_grad(held_array_read_in_the_loop, wrt=(0, 1))(np.ones(2), t)
    value, (gx, gt) = sg.value_and_grad(held_array_copied, wrt=(0, 1))(np.ones(2), t)
    assert_close(value, held_array_copied(np.ones(2), t))
    expected = numeric_grad(lambda s: held_array_copied(np.ones(2), (t[0], s)), (t[1],), 0)
    assert_close(gt[1], expected)


# Views of arguments (Note [Views of arguments] in srcgrad.frontend.layout): whether
# `x.reshape(...)` / `x.ravel()` / `x[i]` of an argument is a view is NumPy's answer at run
# time, on the caller's own array: C-ordered and Fortran-ordered arguments of one shape
# share a variant and each gets NumPy's value and gradient.

def write_through_reshape_of_argument(x):
    w = x.reshape(-1)
    w *= np.min(x)
    w += x.ravel()  # a second write through the same view-or-copy
    return np.sum(x * x) + np.sum(w)


def reshape_view_read_after_a_write_into_the_argument(x):
    v = x.ravel()
    x[0] = 5.0 * x[1]
    return np.sum(v * v) + np.sum(x)


def row_or_scalar_read_after_a_write_into_the_argument(x):
    r = x[1]
    x[0] = 3.0 * x[1]
    return np.sum(r * r) + np.sum(x)


def write_through_reshape_in_one_branch(x, c):
    if c[0] > 0.0:
        w = x.reshape((1, -1))
        w[0, :1] = 2.0 * w[0, 1:2]
    return np.sum(x * x)


def reshape_of_an_argument_written_before(x):
    x *= x.ravel()[:1]  # in place: still the caller's array and layout
    w = x.reshape(-1)
    w[1] = np.sin(np.sum(x))
    return np.sum(x * x)


def reshape_of_an_argument_written_in_one_branch(x):
    if np.sum(x) > 0.0:
        x[0] = 2.0 * x[1]
    w = x.reshape(-1)
    w[2:3] = np.mean(x)
    return np.sum(x * x) + np.sum(w)


def reshape_of_an_argument_written_in_a_loop(x):
    for i in range(2):
        x[i] = x[i] * 2.0
    w = x.reshape(-1)
    w *= 0.5
    return np.sum(x * x)


def _layout_grad(fn, x, rest, eps=1e-6):
    """Central differences that keep x's memory order (np.copy would make it C-ordered,
    and NumPy's own answer to 'view or copy' with it)."""
    g = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        up, down = x.copy(order="K"), x.copy(order="K")
        up[idx] += eps
        down[idx] -= eps
        g[idx] = (fn(up, *rest) - fn(down, *rest)) / (2 * eps)
    return g


@pytest.mark.parametrize("fn,rest", [
    (write_through_reshape_of_argument, ()),
    (reshape_view_read_after_a_write_into_the_argument, ()),
    (row_or_scalar_read_after_a_write_into_the_argument, ()),
    (write_through_reshape_in_one_branch, (np.array([1.0]),)),
    (write_through_reshape_in_one_branch, (np.array([-1.0]),)),
    (reshape_of_an_argument_written_before, ()),
    (reshape_of_an_argument_written_in_one_branch, ()),
    (reshape_of_an_argument_written_in_a_loop, ())])
@pytest.mark.parametrize("shape", [(4,), (2, 3)])
def test_a_view_of_an_argument_is_decided_by_its_layout_at_run_time(fn, rest, shape):
    base = np.linspace(-0.9, 1.3, int(np.prod(shape))).reshape(shape)
    h = sg.value_and_grad(fn)
    for x in (base, np.asfortranarray(base)):  # one variant: the guard does not see layout
        value, g = h(x.copy(order="K"), *rest)
        assert_close(value, fn(x.copy(order="K"), *rest))
        assert_close(g, _layout_grad(fn, x, rest), rtol=1e-5, atol=1e-6)
        _, t_out = sg.jvp(fn, (x.copy(order="K"), *rest), (np.ones(shape),) + tuple(
            np.zeros_like(r) for r in rest))
        assert_close(t_out, np.sum(_layout_grad(fn, x, rest)), rtol=1e-5, atol=1e-6)


# `x op= v` on an argument (or an integer-indexed view of one) that another name shares:
# in place where it is an ndarray at run time, a rebinding where it is a NumPy scalar
# (a row of a matrix, an element of a vector, a float argument). Decided at run time.

def augmented_row_or_element_with_an_alias(x):
    w = x[1]
    z = w
    w += np.sum(x)
    return np.sum(z * x) + np.sum(w)


def augmented_argument_with_an_alias(x):
    w = x
    w += np.exp(np.tanh(np.sum(w)))
    return np.sum(x * x) + np.sum(w)


def augmented_row_of_an_argument_written_before(x):
    x[0] = 1.5
    w = x[1]
    z = w
    w += np.sum(x)
    return np.sum(z * x) + np.sum(w)


def augmented_row_then_a_view_read(x):
    w = x[0]
    w *= np.maximum(np.sum(w), 0.25)
    v = x[1:]
    return np.sum(x) * np.sum(v) + np.sum(w)


@pytest.mark.parametrize("fn", [augmented_row_or_element_with_an_alias, augmented_argument_with_an_alias,
                                augmented_row_then_a_view_read,
                                augmented_row_of_an_argument_written_before])
@pytest.mark.parametrize("shape", [(3,), (2, 3)])
def test_augmented_assignment_on_an_argument_is_decided_at_run_time(fn, shape):
    x = np.linspace(-0.9, 1.3, int(np.prod(shape))).reshape(shape)
    value, g = sg.value_and_grad(fn)(x.copy())
    assert_close(value, fn(x.copy()))
    assert_close(g, _layout_grad(fn, x, ()), rtol=1e-5, atol=1e-6)
    out, t_out = sg.jvp(fn, (x.copy(),), (np.ones(shape),))
    assert_close(out, fn(x.copy()))
    assert_close(t_out, np.sum(_layout_grad(fn, x, ())), rtol=1e-5, atol=1e-6)


def test_augmented_assignment_on_a_float_argument_only_rebinds():
    fn = augmented_argument_with_an_alias
    for x in (0.7, np.float64(0.7)):
        value, g = sg.value_and_grad(fn)(x)
        assert_close(value, fn(x))  # x unchanged: 0.49 + (0.7 + e^tanh(0.7))
        assert_close(g, (fn(x + 1e-6) - fn(x - 1e-6)) / 2e-6, rtol=1e-5)


def test_an_augmented_alias_of_a_computed_value_is_decided_by_its_rank():
    def computed(x):
        y = x[0] * 1.0  # a row of a matrix: an ndarray, written in place (Note [Layout facts])
        z = y
        y += 1.0
        return np.sum(z * y)
    x = np.array([[0.3, -0.2], [0.5, 0.9]])
    assert_close(sg.grad(computed)(x), numeric_grad(computed, [x], 0), rtol=1e-5)


def alias_of_the_iterated_array_written(x):
    for r in x:
        y = x  # the loop reads x's rows: a write through y changes the rows still to come
        y += r
    return np.sum(x)


def test_a_write_into_the_iterated_array_names_it():
    with pytest.raises(sg.CompileError, match="shares memory with the array a loop iterates over"):
        emit_standalone(alias_of_the_iterated_array_written)  # (a variant unrolls the loop)


def held_array_written_while_another_item_is_read(x, t):
    v = t[0]
    for _ in range(3):
        v[1] = v[0] * 0.5 + t[1][0]  # t[1] shares nothing with v: the write cannot reach it
    return np.sum(v * x)


def test_a_loop_reading_another_item_of_the_container_compiles():
    fn = held_array_written_while_another_item_is_read
    x, t = np.array([0.3, 0.7]), (np.array([1.2, -0.4]), np.array([0.9, 0.1]))
    value, (gx, gt) = sg.value_and_grad(fn, wrt=(0, 1))(x, tuple(a.copy() for a in t))
    assert_close(value, fn(x, tuple(a.copy() for a in t)))
    assert_close(gx, numeric_grad(lambda a: fn(a, tuple(b.copy() for b in t)), (x,), 0))
    expected = numeric_grad(lambda a, b: fn(x, (a.copy(), b.copy())), (t[0], t[1]), 0)
    assert_close(gt[0], expected)


def test_another_librarys_array_is_refused_where_numpy_answers_at_run_time():
    # the generic code runs on another library's arrays, which have no NumPy answer to
    # read: a clear error at the call, never NumPy's answer taken for theirs
    xp = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match="NumPy and CuPy arrays only"):
        sg.value_and_grad(augmented_argument_with_an_alias)(xp.asarray([[1.0, 2.0], [3.0, 4.0]]))


# ---------------------------------------------------------------------------------------
# A write inside a loop through a name that is the loop's param on some paths only (`if
# c: x = f(x)`, then a write through `x`): on the paths that kept the param the write
# reaches what the param shares on the first iteration, the array `for r in x` iterates
# over or `y = x` before the loop (Note [Writes through merged values inside loops]). The
# lowered loop did not see it: its rows were read from the array before the loop, and
# the alias kept its old value (fuzz seed 910485: value and gradient wrong).

def rows_written_on_some_paths(x):
    for r in x:
        if np.sum(r) < 0.0:
            x = np.arctan(x)
        w = x[1:]
        w[0] = x[0] * 2.0
    return np.sum(x)


def alias_written_on_some_paths(x, n):
    y = x * 1.0
    z = y
    i = 0
    while i < n:  # a trip count on data: not unrolled
        if y[i] > 0.0:
            y = y * 2.0
        y[0] = y[1] * 3.0
        i += 1
    return np.sum(np.sin(z)) + np.sum(y)


def rows_written_on_some_paths_of_a_copy(x):  # the hints' rewrites
    for r in x.copy():
        if np.sum(r) < 0.0:
            x = np.arctan(x)
        w = x[1:]
        w[0] = x[0] * 2.0
    return np.sum(x)


def rows_written_on_some_paths_read_live(x):
    for i in range(len(x)):
        r = x[i]
        if np.sum(r) < 0.0:
            x = np.arctan(x)
        w = x[1:]
        w[0] = x[0] * 2.0
    return np.sum(x)


def written_on_some_paths_unshared(a):
    x = a * 1.0
    for i in range(3):
        if x[i] > 0.0:
            x = x * 2.0
        x[i] = x[i + 1] * 3.0
    return np.sum(x * x)


ROWS = [np.array([[0.4, -0.3], [-0.9, 0.2], [0.5, 0.6]]),  # the branch on some rows only
        np.array([[-0.4, -0.3], [0.9, 0.2], [-0.5, -0.6]])]


def test_rows_written_on_some_paths_are_refused_naming_the_write():
    for x in ROWS:
        with pytest.raises(sg.CompileError, match="next row of this loop.*line [0-9]+ "
                           r"\(`w\[0\] = x\[0\] \* 2.0`\).*on some paths only") as info:
            sg.grad(rows_written_on_some_paths)(x.copy())  # the variant unrolls the loop
        assert info.value.filename.endswith("test_never_wrong_mutation.py")
        assert "x.copy()" in info.value.hint and "range(len(x))" in info.value.hint
        with pytest.raises(sg.CompileError, match="into `x` .on the paths where it is still that "
                           "array., which shares memory with the array a loop iterates over"):
            sg.jvp(rows_written_on_some_paths, (x.copy(),), (np.ones((3, 2)),))  # a loop
    with pytest.raises(sg.CompileError, match="on the paths where it is still that array"):
        emit_standalone(rows_written_on_some_paths)  # the shape-generic code: no trip count


def test_an_alias_written_on_some_paths_in_a_loop_is_refused():
    x = np.array([0.5, -0.2, 0.3, 0.1])
    for transform in (lambda: sg.grad(alias_written_on_some_paths)(x, 3),
                      lambda: sg.jvp(alias_written_on_some_paths, (x, 3), (np.ones(4), 0))):
        with pytest.raises(sg.CompileError, match="into `y` .on the paths where it is still that "
                           "array., which shares memory with `z`"):
            transform()


@pytest.mark.parametrize("fn", [rows_written_on_some_paths_of_a_copy,
                                rows_written_on_some_paths_read_live])
def test_the_rewrites_of_rows_written_on_some_paths_are_right(fn):
    for x in ROWS:
        value, grad = sg.value_and_grad(fn)(x.copy())
        assert_close(value, fn(x.copy()))
        expected = numeric_grad(lambda a: fn(a.copy()), [x], 0)
        assert_close(grad, expected, rtol=1e-5, atol=1e-7)
        tangent = np.linspace(0.5, 1.5, 6).reshape(3, 2)
        out, t_out = sg.jvp(fn, (x.copy(),), (tangent,))
        assert_close(out, fn(x.copy()))
        assert_close(t_out, np.sum(expected * tangent), rtol=1e-5, atol=1e-7)


def _check_value_gradient_and_tangent(fn, a):
    """fn's value as NumPy computes it, its gradient against central differences, and
    its tangent along ones (the sum of the gradient)."""
    value, grad = sg.value_and_grad(fn)(a)
    assert_close(value, fn(a.copy()))
    expected = numeric_grad(fn, [a], 0)
    assert_close(grad, expected, rtol=1e-5, atol=1e-7)
    _, tangent = sg.jvp(fn, (a,), (np.ones(a.shape),))
    assert_close(tangent, np.sum(expected), rtol=1e-5, atol=1e-7)


def test_a_write_on_some_paths_into_an_unshared_loop_value_is_right():
    fn = written_on_some_paths_unshared
    for a in (np.array([0.5, -0.2, 0.3, 0.1]), np.array([-0.5, 0.2, -0.3, 0.1])):
        _check_value_gradient_and_tangent(fn, a)


# ---------------------------------------------------------------------------------------
# A list or tuple item made Undecided by a loop's write (a loop does not carry containers,
# so what one holds after a write through a name sharing its array is undecided) was
# checked where the item is read by subscript, not where the container as a whole becomes
# an operand: `np.stack(L)` compiled with the Undecided object as a constant, a crash in
# the generated code (fuzz seed 912233: "all input arrays must have the same shape").

def stacked_after_a_loop_write(a):
    x = a * 1.0
    L = [x[1:], a[1:] * 2.0]
    k = 0
    while k < 2 and np.sum(x) < 10.0:  # a test on data: the loop is lowered, not unrolled
        x[1] = x[1] * 2.0
        k += 1
    return np.sum(np.stack(L))


def summed_after_a_loop_write(a):
    x = a * 1.0
    L = [x[1:], a[1:] * 2.0]
    k = 0
    while k < 2 and np.sum(x) < 10.0:
        x[1] = x[1] * 2.0
        k += 1
    return np.sum(sum(L))


def concatenated_tuple_after_a_loop_write(a):
    x = a * 1.0
    T = (a * 2.0, x[1:])
    k = 0
    while k < 2 and np.sum(x) < 10.0:
        x[1] = x[1] * 2.0
        k += 1
    return np.sum(np.concatenate(T))


def stacked_after_a_loop_write_rewritten(a):  # the hint: read it as `x` after the loop
    x = a * 1.0
    k = 0
    while k < 2 and np.sum(x) < 10.0:
        x[1] = x[1] * 2.0
        k += 1
    L = [x[1:], a[1:] * 2.0]
    return np.sum(np.stack(L))


@pytest.mark.parametrize("fn", [stacked_after_a_loop_write, summed_after_a_loop_write,
                                concatenated_tuple_after_a_loop_write])
def test_a_container_holding_an_undecided_item_is_refused_as_an_operand(fn):
    a = np.array([0.5, -0.2, 0.3])
    for transform in (lambda: sg.grad(fn)(a), lambda: sg.jvp(fn, (a,), (np.ones(3),))):
        with pytest.raises(sg.CompileError, match="holds was written through `x` inside a loop") \
                as info:
            transform()
        assert info.value.filename.endswith("test_never_wrong_mutation.py")
        assert info.value.text.strip().startswith("return np.sum(")  # the line that reads it


def test_the_rewrite_of_a_container_read_after_a_loop_write_is_right():
    fn = stacked_after_a_loop_write_rewritten
    for a in (np.array([0.5, -0.2, 0.3]), np.array([4.0, 3.0, 5.0])):  # the loop runs, or not
        _check_value_gradient_and_tangent(fn, a)


# The check above counts the params of the loops being traced only: a write after a loop
# through its output, one of (the first value, a param the body left) on some paths, is
# not inside that loop (fuzz seeds 920657, 921513: refused as a write "inside a loop").

def written_after_a_loop_that_rebinds_on_some_paths(a):
    x = a * 1.0
    v = x
    for i in range(len(a)):
        if v[i] > 0.4:
            v = v * 2.0
    v += v  # reaches x on the paths where no iteration rebound v: x is not read again
    return np.sum(v * v)


def test_a_write_after_a_loop_through_its_output_compiles():
    fn = written_after_a_loop_that_rebinds_on_some_paths
    for a in (np.array([0.5, -0.2, 0.3]), np.array([0.1, -0.2, 0.3])):  # rebound, or not
        _check_value_gradient_and_tangent(fn, a)


def window_written_by_ufunc_at(x):
    w = np.lib.stride_tricks.sliding_window_view(x, 1, axis=0)[:, 0]
    np.add.at(w, [1, 0], 1.0)  # NumPy writes through the read-only window into x
    return np.sum(w * x)


def x_written_under_its_window(x):
    x = x * 1.0
    w = np.lib.stride_tricks.sliding_window_view(x, 2)
    x[0] += 1.0  # the window sees it in NumPy
    return np.sum(w * w)


def window_read_only(x):
    w = np.lib.stride_tricks.sliding_window_view(x, 2)
    return np.sum(w * w) + np.sum(x)


@pytest.mark.parametrize("fn", [window_written_by_ufunc_at, x_written_under_its_window])
def test_a_write_through_or_under_sliding_window_view_is_refused(fn):
    # fuzz seed 3609693: the window, computed as a gather, missed np.add.at's write
    # through NumPy's read-only view (value 8.41 against NumPy's 6.12)
    x = np.array([0.3, -0.4, 0.2])
    with pytest.raises(sg.CompileError, match="sliding_window_view") as info:
        sg.grad(fn)(x.copy())
    assert info.value.filename.endswith("test_never_wrong_mutation.py")
    assert_close(sg.grad(window_read_only)(x), numeric_grad(window_read_only, [x], 0))


def nested_loops_over_tuples_beside_a_hidden_looking_name(x):
    _item1 = np.zeros(3)  # a user's name shaped like the unrolled loops' hidden ones
    t = 0.0
    for r3 in (_item1 + x, np.sum(x) * x):
        for r4 in (1.0, _item1):
            t = t + np.sum(r3 * r3) * np.sum(r4 + 1.0)
    return t


def test_nested_loops_over_tuples_keep_their_own_sequences():
    # fuzz seed 3601157: the inner loop's hidden sequence was the outer's (KeyError)
    x = np.array([0.3, -0.2, 0.5])
    f = nested_loops_over_tuples_beside_a_hidden_looking_name
    value, grad = sg.value_and_grad(f)(x)
    assert abs(value - f(x)) <= 1e-12 * abs(f(x))
    assert_close(grad, numeric_grad(f, [x], 0))
