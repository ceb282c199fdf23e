"""A `return` of a tuple, list or dict inside a loop (issue 11, task I8: Note [Results
of returns inside loops] in srcgrad.frontend.results), the identity of lists and dicts
where paths meet (Note [Containers merged across paths] in srcgrad.frontend.containers),
and a loop over a list whose name the body rebinds. Each program is checked against
NumPy's value and central differences in reverse and forward mode, on data that returns
from the loop at different iterations or not at all."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


def tuple_from_for(x):
    for _ in range(3):
        if np.sum(x) > 2.5:
            return x * 2.0, np.sum(x)
        x = x * 1.5
    return x, np.sum(x) * 3.0


def dict_from_while(x):
    k = 0
    while k < 4:
        k += 1
        if np.sum(x) > 2.5:
            return {"a": x * 2.0, "b": np.sum(x)}
        x = x * 1.5
    return {"a": x, "b": np.sum(x) * 3.0}


def list_from_nested_loops(x):
    for _ in range(2):
        for r in x:
            if r > 1.2:
                return [x * r, r]
        x = x * 2.0
    return [x, np.sum(x)]


def triple_from_rows(x):
    for r in x:
        if np.sin(r) > 0.9:
            return x * r, np.sum(x), r
    return x, np.sum(x * x), x[0]


def nested_tuple_from_loop_in_branch(x):
    if x[0] > -5.0:
        for _ in range(2):
            if np.max(x) > 1.0:
                return (x[:2] * 2.0, (np.sum(x), x[2:] * x[0]))
            x = x + 0.75
    return (x[:2], (np.sum(x * x), x[2:]))


def tuple_never_returned_in_loop(x):
    for _ in range(2):
        if False:
            return x, x
        x = x * 2.0
    return x, np.sum(x)


def _pair_loss(a, b):
    return np.sum(np.sin(a)) * b


def loss_tuple_from_for(x):
    a, b = tuple_from_for(x)
    return _pair_loss(a, b)


def loss_dict_from_while(x):
    d = dict_from_while(x)
    return _pair_loss(d["a"], d["b"])


def loss_list_from_nested_loops(x):
    a, b = list_from_nested_loops(x)
    return _pair_loss(a, b)


def loss_triple_from_rows(x):
    a, b, c = triple_from_rows(x)
    return _pair_loss(a, b) * c


def loss_nested_tuple(x):
    a, (b, c) = nested_tuple_from_loop_in_branch(x)
    return np.sum(np.sin(a)) + b * 0.5 + np.sum(c ** 2)


def loss_never_returned(x):
    a, b = tuple_never_returned_in_loop(x)
    return _pair_loss(a, b)


PROGRAMS = [loss_tuple_from_for, loss_dict_from_while, loss_list_from_nested_loops,
            loss_triple_from_rows, loss_nested_tuple, loss_never_returned]
# returns in the first iteration, in a later one, never (each away from a test's edge)
DATA = [np.array([1.3, 0.9, 0.7, 0.4]), np.array([0.2, 0.15, 0.1, 0.3]),
        np.array([-1.0, -0.6, -0.9, -0.4]), np.array([0.45, 0.3, 0.5, 0.1])]


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_reverse_mode_against_central_differences(f):
    vg = sg.value_and_grad(f)
    for x in DATA:
        value, g = vg(x.copy())
        assert_close(value, f(x.copy()))
        assert_close(g, numeric_grad(f, [x.copy()], 0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_forward_mode_against_central_differences(f):
    for x in DATA:
        t = np.linspace(0.5, 1.5, x.size)
        out, t_out = sg.jvp(f, (x.copy(),), (t,))
        assert_close(out, f(x.copy()))
        assert_close(t_out, numeric_grad(f, [x.copy()], 0) @ t, rtol=1e-5, atol=1e-7)


def test_the_returned_structure_reaches_the_caller():
    out = sg.jvp(tuple_from_for, (DATA[0],), (np.ones(4),))[0]
    assert isinstance(out, tuple) and len(out) == 2
    assert_close(out[0], tuple_from_for(DATA[0])[0])


def tuple_or_array_from_loop(x):
    for _ in range(2):
        if np.sum(x) > 1.0:
            return x, np.sum(x)
        x = x * 2.0
    return x


def test_returns_of_different_structures_stay_refused():
    with pytest.raises(sg.CompileError, match="differently shaped containers"):
        sg.grad(lambda x: np.sum(tuple_or_array_from_loop(x)[0]))(DATA[0])


# ------------------------------------------- lists and dicts merged where paths meet
# Before this note every one of these compiled to a wrong value and gradient: the merge
# made a new list, which a change through one name no longer reached from the other.

def change_through_merged_name(x):
    L = [x]
    K = [x * 2.0]
    if np.sum(x) > 0:
        M = L
    else:
        M = K
    M[0] = x * 3.0
    return np.sum(L[0])


def append_to_a_merged_source(x):
    L = [x]
    K = [x * 2.0]
    if np.sum(x) > 0:
        M = L
    else:
        M = K
    L.append(x * 5.0)
    return np.sum(M[-1])


def change_after_loop_rebinding(x):
    K = [x * 2.0]
    M = [x]
    for r in x:
        if r > 0:
            M = K
    M[0] = x * 3.0
    return np.sum(K[0])


def change_dict_through_merged_name(x):
    d = {"a": x}
    e = {"a": x * 2.0}
    M = d if np.sum(x) > 0 else e
    M["a"] = x * 3.0
    return np.sum(d["a"])


def one_branchs_list_under_two_names(x):
    M = [x * 2.0]
    L = [x]
    if np.sum(x) > 0:
        L[0] = x * 3.0  # (a copy bound to L: the merges of L and of M may be one list)
        M = L
    M[0] = M[0] * 5.0
    return np.sum(L[0])


def one_branchs_list_changed_through_the_other_name(x):
    M = [x * 2.0]
    L = [x]
    if np.sum(x) > 0:
        L[0] = x * 3.0
        M = L
    L[0] = L[0] * 5.0
    return np.sum(M[0])


AMBIGUOUS = [change_through_merged_name, append_to_a_merged_source, change_after_loop_rebinding,
             change_dict_through_merged_name, one_branchs_list_under_two_names,
             one_branchs_list_changed_through_the_other_name]


@pytest.mark.parametrize("f", AMBIGUOUS, ids=lambda f: f.__name__)
def test_a_change_to_one_of_several_containers_is_refused(f):
    with pytest.raises(sg.CompileError, match="depending on the path taken at line"):
        sg.grad(f)(DATA[0].copy())


def list_shared_by_both_paths(x):
    L = [x]
    if np.sum(x) > 0:
        T = (L, x)
    else:
        T = (L, x * 2.0)
    T[0][0] = x * 3.0  # the list both paths hold: L changes too
    return np.sum(L[0]) + np.sum(T[1])


def list_built_on_each_path(x):
    L = []
    if np.sum(x) > 0:
        L.append(x)
    else:
        L.append(x * 2.0)
    L.append(x * 3.0)  # no other name holds what either path made
    L[0] = L[0] * L[1]
    return np.sum(L[0]) + np.sum(L[1])


def copies_bound_on_each_path(x):
    L = [x]
    K = [x * 2.0]
    if np.sum(x) > 0:
        M = list(L)
    else:
        M = list(K)
    M[0] = M[0] * 3.0
    return np.sum(L[0] * K[0]) + np.sum(M[0])


MERGED = [list_shared_by_both_paths, list_built_on_each_path, copies_bound_on_each_path]


@pytest.mark.parametrize("f", MERGED, ids=lambda f: f.__name__)
def test_merged_containers_against_central_differences(f):
    for x in DATA[:3]:
        value, g = sg.value_and_grad(f)(x.copy())
        assert_close(value, f(x.copy()))
        assert_close(g, numeric_grad(f, [x.copy()], 0), rtol=1e-5, atol=1e-7)
        t = np.linspace(0.5, 1.5, x.size)
        _, t_out = sg.jvp(f, (x.copy(),), (t,))
        assert_close(t_out, numeric_grad(f, [x.copy()], 0) @ t, rtol=1e-5, atol=1e-7)


# ------------------------------------------- a loop over a list a name holds
# The loop iterates the list object (held under a hidden name), not the name: a change
# to the list is seen by later iterations, a rebinding of the name is not.

def rebinds_the_iterated_name(x):
    L = [x, x * 2.0]
    s = 0.0
    for v in L:
        s = s + np.sum(np.sin(v))
        L = [x * 5.0, x * 7.0]  # Python goes on over the old list
    return s + np.sum(L[1])


def changes_the_iterated_list(x):
    L = [x, x * 2.0]
    s = 0.0
    for v in L:
        s = s + np.sum(np.sin(v))
        L[1] = v * 3.0  # the second iteration reads it
    return s


@pytest.mark.parametrize("f", [rebinds_the_iterated_name, changes_the_iterated_list],
                         ids=lambda f: f.__name__)
def test_a_loop_iterates_the_list_not_the_name(f):
    for x in DATA[:2]:
        value, g = sg.value_and_grad(f)(x.copy())
        assert_close(value, f(x.copy()))
        assert_close(g, numeric_grad(f, [x.copy()], 0), rtol=1e-5, atol=1e-7)
        t = np.linspace(0.5, 1.5, x.size)
        _, t_out = sg.jvp(f, (x.copy(),), (t,))
        assert_close(t_out, numeric_grad(f, [x.copy()], 0) @ t, rtol=1e-5, atol=1e-7)
