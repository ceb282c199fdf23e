"""Lists and dicts changed inside `if`/loops on array values (issue 11; Note [Containers
changed inside blocks] in srcgrad/frontend/containers.py, Note [Containers carried by
loops] in srcgrad/frontend/loops.py).

Each program compiles and its gradient (sg.grad) and directional derivative (sg.jvp)
agree with central differences; the refusals name the line that changed the container
and their hint's rewrite compiles.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, import_source, numeric_grad

SOURCE = textwrap.dedent('''
    import numpy as np


    def made_in_row_loop(x1):  # fuzz seed 40004's shape: a list made and grown in the body
        acc = 0.0
        for r1, r2 in zip(x1, np.maximum(x1, 0.0)):
            L3 = [(r1.reshape((1, 2))).flatten()]
            L3.append((r2.reshape((2,)) - r1))
            acc = acc + np.sum(L3[0] * L3[1]) + np.sum(L3[-1] * r1)
        return acc


    def made_in_range_loop(x1, v1):  # fuzz seed 40013's shape
        for i3 in range(3):
            x1 = np.sin(x1) * 1.1
            L4 = [x1[np.array([2, 2, 1])]]
            L4.append(np.square(v1))
            x1 = x1 + L4[0] * L4[1]
        return np.sum(x1)


    def made_in_row_loop_carried(x):  # a name from before the loop, rebuilt in the body
        L = [x[0], x[1]]
        for r in x:
            L = [L[1] * r[0], L[0]]
            L.append(r)
            L = [L[0] + L[2], L[1]]
        return np.sum(L[0] * L[1])


    def made_in_branches(x):  # same structure on both paths: merged leafwise
        if np.sum(x) > 0:
            d = {"a": x * 2.0}
            d["b"] = np.sin(x)
        else:
            d = {"a": x}
            d["b"] = x * x
        return np.sum(d["a"] * d["b"])


    def item_in_branch(x):  # a list from outside: the item assignment rebinds `L`
        L = [x, x * 2.0]
        if np.sum(x) > 0:
            L[0] = np.sin(x)
        return np.sum(L[0] * L[1])


    def key_in_branch(x):
        d = {"w": x, "b": x[0]}
        if x[0] < x[1]:
            d["w"] = d["w"] * d["b"]
        else:
            d["b"] += 1.0
        return np.sum(d["w"]) * d["b"]


    def item_in_while(x):
        L = [x, 0.5]
        k = 0
        while k < 3:
            L[0] = np.tanh(L[0] * L[1])
            L[1] += 0.25
            k += 1
        return np.sum(L[0])


    def item_in_row_loop(x):
        acc = {"s": x[0] * 0.0, "n": "rows"}
        for r in x:
            acc["s"] += r * r
        if acc["n"] != "rows":  # a constant item stays a constant: a static test
            return np.sum(x)
        return np.sum(acc["s"])


    def item_in_branch_in_loop(x):
        L = [x[0], x[1]]
        for r in x:
            if np.sum(r) > 0.45:
                L[1] = L[1] * r
            else:
                L[0] = L[0] + r
        return np.sum(L[0] * L[1])


    def append_on_both_branches(x):
        L = [x]
        if np.sum(x) > 0:
            L.append(x * 3.0)
        else:
            L.append(np.cos(x))
        return np.sum(L[0] * L[1])


    def extend_on_both_branches(x):  # `L += [v]` extends the list itself
        L = [x]
        if np.sum(x) > 0:
            L += [x * 2.0]
        else:
            L += [np.cos(x)]
        return np.sum(L[0] * L[1])


    def append_in_static_loop(x):  # a literal trip count: traced once per iteration
        L = [x]
        for i in range(3):
            L.append(L[-1] * x)
        return np.sum(np.stack(L))


    def append_in_len_loop(x):  # range(len(x)) is a run-time loop: a literal, per iteration
        L = []
        for i in range(3):
            L.append(x[i] * x[i])
        return sum(L)


    def tuple_carried(x):
        pair = (x, x)
        for i in range(3):
            pair = (pair[1], pair[0] * 2.0)
        return np.sum(pair[0] * pair[1])


    def write_into_held_array(x):  # the list is carried: no other name shares its array
        ws = [x * 1.0]
        for i in range(3):
            ws[0][i] = ws[0][i] * 2.0 + ws[0][(i + 1) % 3]
        return np.sum(ws[0] * x)


    def write_into_dict_item_in_while(a):  # the dict is carried: no other name shares its array
        d = {"w": a * 1.0}
        k = 0
        while k < 2:
            d["w"][k] = d["w"][k] * 3.0 + d["w"][k + 1]
            k += 1
        return np.sum(d["w"] * d["w"])


    def change_list_being_iterated(x):  # straight-line: each element read as it is then
        L = [x, x * 2.0, x * 3.0]
        for v in L:
            L[-1] = L[-1] * v
        return np.sum(L[-1])


    def list_in_callee(x):
        def grow(v):
            out = [v]
            out.append(v * v)
            return out
        s = 0.0
        for r in x:
            parts = grow(r)
            s = s + np.sum(parts[0] + parts[1])
        return s


    # ------------------------------------------------------------------ refusals
    def bad_append_one_branch(x):
        L = [x]
        if np.sum(x) > 0:
            L.append(x * 3.0)  # HERE
        return np.sum(L[0])


    def good_append_one_branch(x):
        L = [x]
        L.append(np.where(np.sum(x) > 0, x * 3.0, 0.0))
        return np.sum(L[0])


    def bad_append_in_row_loop(x):
        L = [x[0]]
        for r in x:
            L.append(r * 2.0)  # HERE
        return np.sum(L[-1])


    def good_append_in_row_loop(x):
        L = np.zeros(len(x) + 1)
        L[0] = x[0]
        for i, r in enumerate(x):
            L[i + 1] = r * 2.0
        return np.sum(L[-1])


    def bad_append_in_len_loop(x):
        L = []
        for i in range(len(x)):
            L.append(x[i] * x[i])  # HERE
        return sum(L)


    def good_append_in_len_loop(x):
        L = []
        for i in range(3):
            L.append(x[i] * x[i])
        return sum(L)


    def bad_change_iterated_list(x):
        L = [x, x * 2.0]
        for v in L:
            if np.sum(v) > 0:
                L[-1] = L[-1] * v  # HERE
        return np.sum(L[-1])


    def good_change_iterated_list(x):
        L = [x, x * 2.0]
        for v in list(L):
            if np.sum(v) > 0:
                L[-1] = L[-1] * v
        return np.sum(L[-1])


    def bad_two_names_in_loop(x):
        L = [x]
        M = L
        for r in x:  # HERE
            L = [L[0] * r]
            M = L
        return np.sum(M[0])


    def good_two_names_in_loop(x):
        L = [x]
        M = list(L)
        for r in x:
            L = [L[0] * r]
            M = list(L)
        return np.sum(M[0])


    def shared_after_branch(x):  # one list under two names on both paths: still one after
        if np.sum(x) > 0:
            L = [x * 2.0]
            M = L
        else:
            L = [np.sin(x)]
            M = L
        M.append(x * 3.0)
        return np.sum(L[-1] * M[0])


    def bad_shared_list(x):
        L = [x, x]
        M = L
        if np.sum(x) > 0:
            L[0] = x * 2.0  # HERE
        return np.sum(M[0] * L[1])


    def good_shared_list(x):
        L = [x, x]
        M = L
        L = list(L)
        if np.sum(x) > 0:
            L[0] = x * 2.0
        return np.sum(M[0] * L[1])


    def bad_list_in_dict(x):
        d = {"a": [x, x]}
        if np.sum(x) > 0:
            d["a"][0] = x * 2.0  # HERE
        return np.sum(d["a"][0])


    def good_list_in_dict(x):
        d = {"a": [x, x]}
        if np.sum(x) > 0:
            d["a"] = [x * 2.0, d["a"][1]]
        return np.sum(d["a"][0])


    def bad_shared_items_in_loop(x):
        y = x * 1.0
        L = [y, y * 2.0]
        for r in x[:3 if np.sum(x) < 1e3 else 2]:  # HERE (a trip count on data: not unrolled)
            L = [L[0], L[1] * r]
            y[0] += r
        return np.sum(L[0]) + np.sum(L[1]) + np.sum(y)


    def good_shared_items_in_loop(x):
        y = x * 1.0
        L = [y, y * 2.0]
        L[0] = L[0].copy()
        for r in x:
            L = [L[0], L[1] * r]
            y[0] += r
        return np.sum(L[0]) + np.sum(L[1]) + np.sum(y)
''')

X = np.array([0.3, -0.5, 0.7])
X2 = np.array([[0.3, -0.5], [0.7, 0.2], [0.1, 0.4]])


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    yield from import_source(tmp_path_factory, "containers_in_blocks_prog", SOURCE)


def _check(fn, args):
    """sg.grad and sg.jvp (of every argument) against central differences."""
    for i in range(len(args)):
        expected = numeric_grad(fn, args, i)
        grads = sg.grad(fn, wrt=i)(*args)
        assert_close(grads, expected, rtol=1e-5, atol=1e-7)
    tangents = tuple(np.linspace(0.5, 1.5, a.size).reshape(a.shape) for a in args)
    out, t_out = sg.jvp(fn, args, tangents)
    assert_close(out, fn(*args))
    expected_t = sum(np.sum(numeric_grad(fn, args, i) * t) for i, t in enumerate(tangents))
    assert_close(t_out, expected_t, rtol=1e-5, atol=1e-7)


CASES = [
    ("made_in_row_loop", lambda: (X2.copy(),)),
    ("made_in_range_loop", lambda: (X.copy(), np.array([0.4, 0.9, -0.2]))),
    ("made_in_row_loop_carried", lambda: (X2.copy(),)),
    ("made_in_branches", lambda: (X.copy(),)),
    ("made_in_branches", lambda: (-X,)),
    ("item_in_branch", lambda: (X.copy(),)),
    ("item_in_branch", lambda: (-X,)),
    ("key_in_branch", lambda: (X.copy(),)),
    ("key_in_branch", lambda: (X[::-1].copy(),)),
    ("item_in_while", lambda: (X.copy(),)),
    ("item_in_row_loop", lambda: (X2.copy(),)),
    ("item_in_branch_in_loop", lambda: (X2.copy(),)),
    ("append_on_both_branches", lambda: (X.copy(),)),
    ("append_on_both_branches", lambda: (-X,)),
    ("extend_on_both_branches", lambda: (X.copy(),)),
    ("extend_on_both_branches", lambda: (-X,)),
    ("append_in_static_loop", lambda: (X.copy(),)),
    ("append_in_len_loop", lambda: (X.copy(),)),
    ("tuple_carried", lambda: (X.copy(),)),
    ("list_in_callee", lambda: (X2.copy(),)),
    ("write_into_held_array", lambda: (X.copy(),)),
    ("change_list_being_iterated", lambda: (X.copy(),)),
    ("write_into_dict_item_in_while", lambda: (X.copy(),)),
    ("shared_after_branch", lambda: (X.copy(),)),
    ("shared_after_branch", lambda: (-X,)),
]


@pytest.mark.parametrize("name,args", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_compiles_with_the_gradient_of_central_differences(prog, name, args):
    _check(getattr(prog, name), args())


def test_branches_both_ways_in_one_variant(prog):
    """One variant serves both paths: the merge is a run-time `cond`, not a trace of one."""
    g = sg.grad(prog.item_in_branch)
    for x in (X, -X):
        assert_close(g(x), numeric_grad(prog.item_in_branch, (x,), 0), rtol=1e-5, atol=1e-7)


def _here(fn):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if "# HERE" in line)


@pytest.mark.parametrize("bad,message,hint,good", [
    ("bad_append_one_branch", "the length or keys of `L` would depend on array values",
     "append on both branches", "good_append_one_branch"),
    ("bad_append_in_row_loop", "the length or keys of `L` would depend on array values",
     "preallocate an array", "good_append_in_row_loop"),
    ("bad_append_in_len_loop", "changes them in every iteration of the loop at line",
     "a literal `range(3)`", "good_append_in_len_loop"),
    ("bad_shared_items_in_loop", "whose items share memory with other names", "`L[k] = L[k].copy()`",
     "good_shared_items_in_loop"),
    ("bad_change_iterated_list", "a loop outside that `if`/loop iterates over", "`for v in list(L):`",
     "good_change_iterated_list"),
    ("bad_two_names_in_loop", "which shares a list with `L`", "`M = list(L)`", "good_two_names_in_loop"),
    ("bad_shared_list", "on a list that `L`, `M` share", "`L = list(L)`", "good_shared_list"),
    ("bad_list_in_dict", "on a list that only a container in `d` holds", "build a new list",
     "good_list_in_dict"),
])
def test_refusals_name_the_change_and_their_rewrite_compiles(prog, bad, message, hint, good):
    with pytest.raises(sg.CompileError) as info:
        sg.grad(getattr(prog, bad))(X.copy())
    err = info.value
    assert message in err.message
    assert hint in err.hint
    assert err.lineno == _here(getattr(prog, bad))
    if good is not None:
        _check(getattr(prog, good), (X.copy(),))
        _check(getattr(prog, good), (-X,))


def test_a_changed_list_is_not_seen_by_the_other_branch(prog):
    """The copy on write: the else path reads the list as it was before the `if`."""
    f = prog.item_in_branch
    assert_close(sg.value_and_grad(f)(-X)[0], f(-X))
    assert_close(sg.value_and_grad(f)(X)[0], f(X))
