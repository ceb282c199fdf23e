"""Every CompileError's suggested rewrite compiles (issue 11): a table of refusals.

Each row is a small user program that srcgrad refuses, the refusal's message, and the
program rewritten by following the error's `hint` literally. The test asserts the refusal
names the right line and carries the hint of the raise site the row names, then that the
rewrite compiles under sg.grad (and sg.jvp) with the gradient of central differences.

`test_every_refusal_site_is_in_the_table` scans srcgrad's source with `ast` for every
raise site (`.fail(`, `.error(`, `CompileError(`, `CompileError.at(`, the in-place
markers `Undecided(` / `_poison_family(`, the fence's table): each must be a row here or
in EXEMPT with the reason it has no tested rewrite, so a new hint without a tested
rewrite fails the suite.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib
import textwrap
from collections.abc import Callable

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.api import emit_standalone
from tests.conftest import assert_close, import_source, numeric_grad

PROGRAM = textwrap.dedent('''
    import dataclasses
    import math

    import numpy as np

    import srcgrad as sg
    from srcgrad.autograd import Function

    G = np.array([1.0, 2.0, 3.0])
    W = np.array([1.0, 2.0, 3.0])
    D = np.diag([1.0, 2.0, 4.0])


    class Stepper:
        def __init__(self, dt):
            self.dt = dt

        def step(self, y):
            return y + self.dt * np.sin(y)


    STEPPER = Stepper(0.5)


    # ------------------------------------------------------------------ the fence
    def bad_yield(x):
        for i in range(3):
            yield x[i] * x[i]  # HERE

    def good_yield(x):
        return np.sum(np.stack([x[i] * x[i] for i in range(3)]))

    def bad_yield_from(x):
        yield from [x[0], x[1]]  # HERE

    def good_yield_from(x):
        return x[0] * x[1]

    def bad_nested_async(x):
        async def inner(v):  # HERE
            return v
        return np.sum(x)

    def good_nested_async(x):
        def inner(v):
            return v
        return np.sum(inner(x))

    def bad_global(x):
        global G  # HERE
        return np.sum(x * G)

    def good_global(x, g):
        return np.sum(x * g)

    def bad_try(x):
        try:  # HERE
            return np.sum(np.log(x))
        except ValueError:
            return np.sum(x)

    def good_try(x):
        try:
            y = np.sum(np.log(x))
        except ValueError:
            y = np.sum(x)
        return y

    def bad_raise(x):
        if np.sum(x) < 0.0:
            raise ValueError("negative")  # HERE
        return np.sum(np.sin(x))

    def good_raise(x):
        assert np.sum(x) >= 0.0, "negative"
        return np.sum(np.sin(x))

    def bad_reduce_with_dtype(x):
        return np.sum(np.add.reduce(np.sin(x), 0, np.float64))  # HERE

    def good_reduce_with_dtype(x):
        return np.sum(np.add.reduce(np.sin(x), 0))

    def bad_filter_on_data(x):
        return sum(filter(lambda v: v > 0.5, [x[0], x[1]]))  # HERE

    def good_filter_on_data(x):
        return np.sum(np.where(x[:2] > 0.5, x[:2], 0.0))

    def bad_traced_isinstance(x):
        s = np.sum(x * x)
        return s * 2.0 if isinstance(s, float) else s  # HERE

    def good_traced_isinstance(x):
        s = np.sum(x * x)
        return s * 2.0 if np.ndim(s) == 0 else s

    def bad_constructed_object(x):
        sim = Stepper(0.5)  # HERE
        return np.sum(sim.step(x))

    def good_constructed_object(x):
        return np.sum(STEPPER.step(x))


    def bad_with(x):
        with np.errstate(all="ignore"):  # HERE
            y = np.log(x)
        return np.sum(y)

    def good_with(x):
        y = np.log(x)
        return np.sum(y)

    def bad_class(x):
        class Scale:  # HERE
            k = 2.0
        return Scale.k * np.sum(x * x)

    class Scale:
        k = 2.0

    def good_class(x):
        return Scale.k * np.sum(x * x)

    def bad_del(x):
        y = x * 2.0
        del y  # HERE
        return np.sum(x * x)

    def good_del(x):
        y = x * 2.0
        return np.sum(x * x) + 0.0 * np.sum(y)

    def bad_import(x):
        import math  # HERE
        return np.sum(x) * math.pi

    def bad_import_from(x):
        from math import pi  # HERE
        return np.sum(x) * pi

    def good_import(x):
        return np.sum(x) * math.pi

    def bad_set(x):
        ks = {0, 2}  # HERE
        return sum([x[k] for k in ks])

    def good_set(x):
        ks = (0, 2)
        return sum([x[k] for k in ks])

    def bad_set_comp(x):
        ks = {k for k in range(2)}  # HERE
        return sum([x[k] for k in ks])

    def good_set_comp(x):
        ks = [k for k in range(2)]
        return sum([x[k] for k in ks])


    # ------------------------------------------------------------------ statements
    def bad_varargs(*xs):  # HERE
        return np.sum(xs[0] * 2.0)

    def good_varargs(x):
        return np.sum(x * 2.0)

    def bad_expression_statement(x):
        x + 1.0  # HERE
        return np.sum(x * x)

    def good_expression_statement(x):
        return np.sum(x * x)

    def bad_match(x):
        match x.ndim:  # HERE
            case 1:
                return np.sum(x * x)
        return np.mean(x)

    def good_match(x):
        return np.sum(x * x)

    def bad_starred_target(x):
        a, *rest = [x[0], x[1]]  # HERE
        return a * rest[0]

    def good_starred_target(x):
        seq = [x[0], x[1]]
        a, rest = seq[0], seq[1:]
        return a * rest[0]

    def bad_unpack_array(x):
        a, *rest = x  # HERE
        return a * rest[0]

    def good_unpack_array(x):
        a, b = x[0], x[1]
        return a * b

    def bad_attribute_target(x):
        np.total = np.sum(x)  # HERE
        return np.sum(x * x)

    def good_attribute_target(x):
        total = np.sum(x)
        return np.sum(x * x) * total

    def bad_builtin(x):
        return np.sum(x) * round(x[0], 2)  # HERE

    def good_builtin(x):
        return np.sum(x) * np.round(x[0], 2)

    def bad_recursion(x):
        if np.sum(x) > 100.0:
            return np.sum(x)
        return bad_recursion(x * 2.0)  # HERE

    def depth_limited(x, n):
        if n == 0:
            return np.sum(x)
        return depth_limited(x * 2.0, n - 1)

    def good_recursion(x):
        return depth_limited(x, 3)

    def bad_return_on_some_paths(x):
        if np.sum(x) > 0:  # HERE
            return np.sum(x * x)

    def good_return_on_some_paths(x):
        if np.sum(x) > 0:
            return np.sum(x * x)
        return np.sum(x)

    def bad_for_else(x):
        for i in range(3):  # HERE
            x = x * 1.5
        else:
            x = x + 1.0
        return np.sum(x * x)

    def good_for_else(x):
        finished = False
        for i in range(3):
            x = x * 1.5
        finished = True
        if finished:
            x = x + 1.0
        return np.sum(x * x)

    def bad_while_else(x):
        i = 0
        while i < 3:  # HERE
            x = x * 1.5
            i += 1
        else:
            x = x + 1.0
        return np.sum(x * x)

    def good_while_else(x):
        i = 0
        finished = False
        while i < 3:
            x = x * 1.5
            i += 1
        finished = True
        if finished:
            x = x + 1.0
        return np.sum(x * x)

    def bad_range_slice(x):
        for i in range(3)[::2]:  # HERE
            x = x * 1.5
        return np.sum(x * x)

    def good_range_slice(x):
        for i in range(0, 3, 2):
            x = x * 1.5
        return np.sum(x * x)

    def bad_reversed_range_step(x):
        for i in range(0, 3, x.shape[0] - 2)[::-1]:  # HERE
            x = x * x[i]
        return np.sum(x * x)

    def good_reversed_range_step(x):
        for i in reversed(range(0, 3, x.shape[0] - 2)):
            x = x * x[i]
        return np.sum(x * x)

    def _writes_first_item(a):
        a[0:1] = 0.1
        return a

    def bad_item_written_by_right_side(x):
        y = np.outer(x, x)
        y[0] += _writes_first_item(y.ravel()[:1])  # HERE
        return np.sum(y * y)

    def good_item_written_by_right_side(x):
        y = np.outer(x, x)
        v = _writes_first_item(y.ravel()[:1])
        y[0] += v
        return np.sum(y * y)

    def bad_container_in_loop(x):
        pair = (x, np.sin)
        for r in x:  # HERE
            pair = (pair[1](pair[0]) * r, np.cos)
        return np.sum(pair[0])

    def good_container_in_loop(x):
        a = np.sin(x) * x[0]
        for r in x[1:]:
            a = np.cos(a) * r
        return np.sum(a)

    def bad_append_in_loop(x):
        ys = [x[0]]
        for r in x:
            ys.append(r * 2.0)  # HERE
        return ys[-1]

    def good_append_in_loop(x):
        ys = np.zeros(len(x) + 1)
        ys[0] = x[0]
        for i, r in enumerate(x):
            ys[i + 1] = r * 2.0
        return ys[-1]

    def bad_change_shared_list(x):
        ys = [x, x]
        zs = ys
        if np.sum(x) > 0:
            ys[0] = x * 2.0  # HERE
        return np.sum(zs[0] * ys[1])

    def good_change_shared_list(x):
        ys = [x, x]
        zs = ys
        ys = list(ys)
        if np.sum(x) > 0:
            ys[0] = x * 2.0
        return np.sum(zs[0] * ys[1])

    def bad_change_merged_list(x):
        L = [x]
        K = [x * 2.0]
        if np.sum(x) > 0:
            M = L
        else:
            M = K
        M[0] = M[0] * 3.0  # HERE
        return np.sum(L[0] * K[0]) + np.sum(M[0])

    def good_change_merged_list(x):
        L = [x]
        K = [x * 2.0]
        if np.sum(x) > 0:
            M = list(L)
        else:
            M = list(K)
        M[0] = M[0] * 3.0
        return np.sum(L[0] * K[0]) + np.sum(M[0])

    def bad_change_held_list(x):
        d = {"a": [x, x]}
        if np.sum(x) > 0:
            d["a"][0] = x * 2.0  # HERE
        return np.sum(d["a"][0])

    def good_change_held_list(x):
        d = {"a": [x, x]}
        if np.sum(x) > 0:
            d["a"] = [x * 2.0, d["a"][1]]
        return np.sum(d["a"][0])

    def bad_shared_items_in_loop(x):
        y = x * 1.0
        ys = [y, y * 2.0]
        for r in x[:3 if np.sum(x) < 1e3 else 2]:  # HERE (a trip count on data: not unrolled)
            ys = [ys[0], ys[1] * r]
            y[0] += r
        return np.sum(ys[0]) + np.sum(ys[1]) + np.sum(y)

    def good_shared_items_in_loop(x):
        y = x * 1.0
        ys = [y, y * 2.0]
        ys[0] = ys[0].copy()
        for r in x:
            ys = [ys[0], ys[1] * r]
            y[0] += r
        return np.sum(ys[0]) + np.sum(ys[1]) + np.sum(y)

    def bad_change_iterated_list(x):
        ys = [x, x * 2.0]
        for v in ys:
            if np.sum(v) > 0:
                ys[-1] = ys[-1] * v  # HERE
        return np.sum(ys[-1])

    def good_change_iterated_list(x):
        ys = [x, x * 2.0]
        for v in list(ys):
            if np.sum(v) > 0:
                ys[-1] = ys[-1] * v
        return np.sum(ys[-1])

    def bad_two_names_in_loop(x):
        ys = [x]
        zs = ys
        for r in x:  # HERE
            ys = [ys[0] * r]
            zs = ys
        return np.sum(zs[0])

    def good_two_names_in_loop(x):
        ys = [x]
        zs = list(ys)
        for r in x:
            ys = [ys[0] * r]
            zs = list(ys)
        return np.sum(zs[0])

    def bad_write_in_called_helper(x):
        def bump(v):
            while np.sum(v) > 0:
                v[0] = v[0] - 1.0  # HERE
        y = x * 1.0
        bump(y)
        return np.sum(y * x)

    def good_write_in_called_helper(x):
        y = x * 1.0
        y = np.where(np.sum(x) > 0, y * (np.arange(3) != 0), y)
        return np.sum(y * x)


    # ------------------------------------------------------------------ containers
    def bad_list_method(x):
        ys = [x[0], x[1], x[2]]
        ys.remove(ys[0])  # HERE
        return ys[0] * ys[1]

    def good_list_method(x):
        ys = [x[0], x[1], x[2]]
        ys.pop(0)
        return ys[0] * ys[1]

    def bad_comprehension_over_array(x):
        ys = [v * 2.0 for v in x]  # HERE
        return sum(ys)

    def good_comprehension_over_array(x):
        ys = x * 2.0
        return np.sum(ys)

    def bad_comprehension_if(x):
        ys = [x[i] for i in range(3) if x[i] > 0.5]  # HERE
        return sum(ys)

    def good_comprehension_if(x):
        return np.sum(np.where(x > 0.5, x, 0.0))


    # ------------------------------------------------------------------ idioms
    def bad_vstack_of_array(x):
        return np.sum(np.vstack(x.reshape(3, 1)) ** 2)  # HERE

    def good_vstack_of_array(x):
        rows = x.reshape(3, 1)
        return np.sum(np.vstack([rows[0], rows[1], rows[2]]) ** 2)

    def bad_array_of_dict(x):
        return np.sum(np.array([x[0], {"a": 1.0}]) ** 2)  # HERE

    def good_array_of_dict(x):
        return np.sum(np.array([x[0], 1.0]) ** 2)

    def bad_ufunc_at(x):
        y = np.zeros(3)
        np.add.at(y, [0, 1])  # HERE
        return np.sum(y * x)

    def good_ufunc_at(x):
        y = np.zeros(3)
        np.add.at(y, [0, 1], x[:2])
        return np.sum(y * x)


    # ------------------------------------------------------------------ builtins, expressions
    def bad_float(x):
        return float(np.sum(x * x))  # HERE

    def good_float(x):
        return np.sum(x * x)

    def bad_item(x):
        return np.sum(x * x).item()  # HERE

    def good_item(x):
        return np.sum(x * x)

    def bad_max_of_array(x):
        return max(x[0], x[1], key=abs)  # HERE

    def good_max_of_array(x):
        return np.max(x * x)

    def bad_range_of_length(x, n):
        return sum([x[i] * 2.0 for i in range(n)])  # HERE (`range(len(x))` compiles: a shape)

    def good_range_of_length(x):
        return sum([x[i] * 2.0 for i in range(3)])

    def bad_signature(x):
        return np.sum(np.clip(x, 0.5, 1.0, None, None))  # HERE

    def good_signature(x):
        return np.sum(np.clip(x, a_min=0.5, a_max=1.0))

    def bad_fstring(x):
        label = f"{x[0]}"  # HERE
        return np.sum(x * x)

    def good_fstring(x):
        return np.sum(x * x)

    def bad_array_method(x):
        return np.sum(x.conjugate() * x)  # HERE

    def good_array_method(x):
        return np.sum(np.conjugate(x) * x)

    def bad_no_rule(x):
        return math.hypot(x[0], x[1])  # HERE

    def good_no_rule(x):
        return (x[0] ** 2 + x[1] ** 2) ** 0.5


    # ------------------------------------------------------------------ records, custom Functions
    @dataclasses.dataclass
    class Params:
        w: np.ndarray
        b: float

    def bad_field_write(x, p):
        p.b = 2.0  # HERE
        return np.sum(x * p.w) * p.b

    def good_field_write(x, p):
        b = 2.0
        return np.sum(x * p.w) * b

    class SquareCtxValue(Function):
        @staticmethod
        def forward(ctx, x):
            save = ctx.save_for_backward  # HERE
            save(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2.0 * x * g

    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2.0 * x * g

    def bad_ctx_method_value(x):
        return np.sum(SquareCtxValue.apply(x))

    def good_ctx_method_value(x):
        return np.sum(Square.apply(x))

    MASK = np.array([0.0, 1.0, 1.0])

    class ZeroFirst(Function):
        @staticmethod
        def forward(ctx, x):
            x[0] = 0.0  # HERE
            return x

        @staticmethod
        def backward(ctx, g):
            return g * MASK

    class ZeroFirstCopy(Function):
        @staticmethod
        def forward(ctx, x):
            x = x.copy()
            x[0] = 0.0
            return x

        @staticmethod
        def backward(ctx, g):
            return g * MASK

    def bad_unmarked_write(x):
        return np.sum(ZeroFirst.apply(x * 1.0) * x)

    def good_unmarked_write(x):
        return np.sum(ZeroFirstCopy.apply(x * 1.0) * x)

    class Mul(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad * b, grad * a

    def bad_saved_then_written(x):
        y = np.ones_like(x)
        z = Mul.apply(y, W * x)
        y += x  # HERE
        return np.sum(z * y)

    def good_saved_then_written(x):
        y = np.ones_like(x)
        z = Mul.apply(y, W * x)
        y = y + x
        return np.sum(z * y)

    def bad_maybe_written_in_loop(x, n):
        y = x[np.argmax(x)] * 1.0  # an index known at run time: a row or a NumPy scalar
        # saved inside a branch of a conditional expression, possibly written after it
        # (a save and a write in one loop body are checked at run time: I9)
        z = Mul.apply(y, W) if np.sum(x) > -1e9 else W * 1.0
        y += 1.0  # HERE
        return np.sum(z * y) * n

    def good_maybe_written_in_loop(x, n):
        y = x[np.argmax(x)] * 1.0
        z = Mul.apply(y, W) if np.sum(x) > -1e9 else W * 1.0
        y = y + 1.0
        return np.sum(z * y) * n


    # ------------------------------------------------------------------ in-place writes
    def bad_append_in_branch(x):
        ys = [x[0]]
        if np.sum(x) > 0:
            ys.append(x[1])  # HERE
        return sum(ys)

    def good_append_in_branch(x):
        ys = [x[0], np.where(np.sum(x) > 0, x[1], 0.0)]
        return sum(ys)

    def bad_augmented_alias(x):
        y = (x * 2.0)[np.argmax(x)]  # a row or a NumPy scalar, by an index known at run time
        z = y
        y += 1.0
        return z * y  # HERE

    def good_augmented_alias(x):
        y = (x * 2.0)[np.argmax(x)]
        z = y
        y = y + 1.0
        return z * y

    def bad_augmented_attribute(x):
        np.acc += np.sum(x)  # HERE
        return np.sum(x * x)

    def good_augmented_attribute(x):
        acc = np.sum(x * x)
        acc += np.sum(x)
        return acc

    def bad_inplace_method(x):
        y = x * W
        y.sort(axis=0)  # HERE
        return np.sum(y * W)

    def good_inplace_method(x):
        y = x * W
        y = np.sort(y, axis=0)
        return np.sum(y * W)

    def bad_write_global(x):
        W[0] = x[0]  # HERE
        return np.sum(W * x)

    def good_write_global(x):
        w = W.copy()
        w[0] = x[0]
        return np.sum(w * x)

    def bad_alias_write_in_loop(a):
        x = a * 1.0
        y = x
        for _ in range(2 if np.sum(a) < 1e3 else 3):  # a trip count on data: not unrolled
            y[0] = y[0] * 2.0  # HERE
        return np.sum(x * x)

    def good_alias_write_in_loop(a):
        x = a * 1.0
        y = x
        y = y.copy()
        for _ in range(2):
            y[0] = y[0] * 2.0
        return np.sum(x * x) + np.sum(y)

    def bad_write_into_held_array(x):
        w = x * 1.0
        ws = [w]
        for i in range(3 if np.sum(x) < 1e3 else 2):  # HERE (a trip count on data: not unrolled)
            ws[0][i] = ws[0][i] * 2.0
        return np.sum(ws[0] * x)

    def good_write_into_held_array(x):
        ws = [x * 1.0]
        w = ws[0].copy()
        for i in range(3):
            w[i] = w[i] * 2.0
        return np.sum(w * x)

    def bad_read_container_after_loop(x):
        t = (x * 1.0, x * 2.0)
        v1, v2 = t
        for i in range(3):
            v2[i] = v2[i] * 3.0
        return np.sum(t[1] * x)  # HERE

    def good_read_container_after_loop(x):
        t = (x * 1.0, x * 2.0)
        v1, v2 = t
        for i in range(3):
            v2[i] = v2[i] * 3.0
        return np.sum(v2 * x)

    def bad_write_through_row(x):
        m = np.stack([x, x * 2.0])
        for row in m[:2 if np.sum(x) < 1e3 else 1]:  # a trip count on data: not unrolled
            row[0] = row[0] * 3.0  # HERE
        return np.sum(m * m)

    def good_write_through_row(x):
        m = np.stack([x, x * 2.0])
        for i in range(len(m)):
            m[i, 0] = m[i, 0] * 3.0
        return np.sum(m * m)

    def bad_rows_written_on_some_paths(x):
        for r in x:  # HERE
            if np.sum(r) < 0.0:
                x = np.arctan(x)
            w = x[1:]
            w[0] = x[0] * 2.0
        return np.sum(x)

    def good_rows_written_on_some_paths(x):
        for r in x.copy():
            if np.sum(r) < 0.0:
                x = np.arctan(x)
            w = x[1:]
            w[0] = x[0] * 2.0
        return np.sum(x)

    def bad_write_on_one_path(a, c):
        x = a * 1.0
        z = a * 2.0
        y = x if c[0] > 0.0 else z
        y[0] = 0.0
        return np.sum(x * x)  # HERE

    def good_write_on_one_path(a, c):
        x = a * 1.0
        z = a * 2.0
        y = x.copy() if c[0] > 0.0 else z.copy()
        y[0] = 0.0
        return np.sum(x * x) + np.sum(y * y)

    def bad_self_view_write(x):
        y = x * 1.0
        y[:2] = y[::2]  # HERE (strides 1 and 2: NumPy's result depends on its loop's order)
        return np.sum(y * y)

    def good_self_view_write(x):
        y = x * 1.0
        y[:2] = y[::2].copy()
        return np.sum(y * y)

    def bad_loop_rebinds_to_alias(x):
        y = x * 1.0
        v = x * 2.0
        for _ in range(3 if np.sum(x) < 1e3 else 4):  # HERE (the loop; the message names the write's line)
            y[0] = y[0] + 1.0
            y = v
        return np.sum(v * v)

    def good_loop_rebinds_to_alias(x):
        y = x * 1.0
        v = x * 2.0
        for _ in range(3):
            y[0] = y[0] + 1.0
            y = v.copy()
        return np.sum(v * v) + np.sum(y * y)

    def bad_loop_leaves_a_view(x, c):
        x = x * 1.0
        y = x * 3.0
        for _ in range(3 if np.sum(c) < 1e3 else 4):  # HERE (the loop; the message names the write's line)
            x[[1, 0]] *= c
            if x[0] > -5.0:
                y = x[1:]
        return np.sum(y)

    def good_loop_leaves_a_view(x, c):
        x = x * 1.0
        y = x * 3.0
        for _ in range(3):
            x[[1, 0]] *= c
            if x[0] > -5.0:
                y = x[1:].copy()
        return np.sum(y)

    def bad_chosen_view_written(x):
        v = np.reshape(x if x[:1] < -0.95 else x[:1], ())
        x[[0, 1]] += x[:1]
        return v  # HERE

    def good_chosen_view_written(x):
        v = np.reshape(x if x[:1] < -0.95 else x[:1], ()).copy()
        x[[0, 1]] += x[:1]
        return v

    def bad_view_or_copy(x):
        y = x[:, None] * x  # of a strided x: its layout is not known (of a C-ordered one it
        if np.sum(x) > 0.26:  # is; a vector's reshape is a view whatever its layout)
            w = y.reshape(9)
            w[[1]] = 1.0
        s = y[0, 0] * 0.0  # HERE
        for i in range(2):
            s = s + y[0, i]
        return s

    def good_view_or_copy(x):
        y = x[:, None] * x
        if np.sum(x) > 0.26:
            w = y.reshape(9).copy()
            w[[1]] = 1.0
        s = y[0, 0] * 0.0
        for i in range(2):
            s = s + y[0, i]
        return s

    def bad_view_after_write(x):
        y = x[:, None] * x  # of a strided x: its layout is not known (as above)
        v = y.reshape(9)
        w = v[1:]
        y[0, 0] = 5.0
        return np.sum(w * x[0])  # HERE

    def good_view_after_write(x):
        y = x[:, None] * x
        y[0, 0] = 5.0
        w = y.reshape(9)[1:]
        return np.sum(w * x[0])

    def bad_write_into_broadcast_view(x):
        v = np.broadcast_to(x, (2, 3))
        v[0, 0] = 1.0  # HERE
        return np.sum(v * x)

    def good_write_into_broadcast_view(x):
        v = np.broadcast_to(x, (2, 3)).copy()
        v[0, 0] = 1.0
        return np.sum(v * x)


    def bad_layout_changed_by_loop(x):
        v = np.outer(x, x)
        for _ in range(2 if np.sum(x) < 1e3 else 3):  # a trip count on data: not unrolled
            w = v.reshape(-1)  # a view of a C-ordered v, a copy of its transpose's product
            w[0] = 1.0  # HERE
            v = v.T * 0.5
        return np.sum(v)

    def good_layout_changed_by_loop(x):
        v = np.outer(x, x)
        for _ in range(2 if np.sum(x) < 1e3 else 3):
            w = v.reshape(-1).copy()
            w[0] = 1.0
            v = v.T * 0.5
        return np.sum(v)

    # ------------------------------------------------------------------ whole programs
    async def bad_async_def(x):  # HERE
        return np.sum(x * x)

    def good_async_def(x):
        return np.sum(x * x)

    MAKE = lambda x: (lambda x: np.sum(x * x))  # HERE
    INNER = MAKE(0)

    def good_lambda(x):
        return np.sum(x * x)

    def bad_two_outputs(x):
        return np.sum(x * x), x[0]

    def sin_loop(x):
        for i in range(3):
            x = np.sin(x)
        return np.sum(x)

    def bad_vjp_of_loop_inside(x):
        value, vjp_fn = sg.vjp(sin_loop, x)  # HERE
        return np.sum(vjp_fn(1.0)[0] ** 2)

    GRAD_SIN_LOOP = sg.grad(sin_loop)

    def good_vjp_of_loop_inside(x):
        return np.sum(GRAD_SIN_LOOP(x) ** 2)

    def pair_loop(pair):
        a, b = pair
        for i in range(2):
            a = np.sin(a) * b
        return np.sum(a)

    GRAD_PAIR_LOOP = sg.grad(pair_loop)

    def bad_loop_gradient_of_a_tuple_inside(x):
        return np.sum(GRAD_PAIR_LOOP((x, 2.0 * x))[0])  # HERE

    def two_loop(a, b):
        for i in range(2):
            a = np.sin(a) * b
        return np.sum(a)

    GRAD_TWO_LOOP = sg.grad(two_loop)

    def good_loop_gradient_of_a_tuple_inside(x):
        return np.sum(GRAD_TWO_LOOP(x, 2.0 * x))

    def inner(x):
        return np.sin(x) * x[0]

    JACOBIAN = sg.jacobian(inner)

    def bad_jacobian_inside(x):
        return np.sum(JACOBIAN(x) ** 2)  # HERE

    def inner_0(x):
        return inner(x)[0]

    def inner_1(x):
        return inner(x)[1]

    def inner_2(x):
        return inner(x)[2]

    GRADS = [sg.grad(inner_0), sg.grad(inner_1), sg.grad(inner_2)]

    def good_jacobian_inside(x):
        J = np.stack([GRADS[0](x), GRADS[1](x), GRADS[2](x)])
        return np.sum(J ** 2)

    def bad_pad(x):  # (the Array API has no pad)
        return np.sum(np.pad(x, 1) ** 2)  # HERE

    def good_pad(x):
        return np.sum(x ** 2)  # (the border's zeros add nothing)

    def bad_loop_over_record(x, p):
        for v in p:  # HERE
            x = x * v
        return np.sum(x)

    def good_loop_over_record(x, p):
        for v in [p.w]:
            x = x * v
        return np.sum(x)

    def bad_out_list(x):
        a = np.zeros(3)
        np.add(x, 1.0, out=[a])  # HERE
        return np.sum(a * x)

    def good_out_list(x):
        a = np.add(x, 1.0)
        return np.sum(a * x)

    PROMPT_SOURCE = "def typed_at_a_prompt(x):\\n    return np.sum(x * x)\\n"
    exec(compile(PROMPT_SOURCE, "<stdin>", "exec"))
    exec(compile("lambda_at_a_prompt = lambda x: np.sum(x * x)\\n", "<stdin>", "exec"))

    def typed_in_a_file(x):
        return np.sum(x * x)

    def bad_dynamic_index(x):
        ys = [x[0] * 2.0, x[1], x[2]]
        return ys[np.argmax(x)]  # HERE

    def good_dynamic_index(x):
        ys = [x[0] * 2.0, x[1], x[2]]
        return np.stack(ys)[np.argmax(x)]

    def bad_star_of_array(x):
        return np.sum(np.stack([*x]) ** 2)  # HERE

    def good_star_of_array(x):
        return np.sum(np.stack([x[0], x[1], x[2]]) ** 2)

    def bad_repeat(x, n):
        ys = [x] * n  # HERE
        return np.sum(ys[0] * ys[1])

    def good_repeat(x, n):
        ys = [x] * 2
        return np.sum(ys[0] * ys[1])

    def bad_branch_structure(x):
        if np.sum(x) > 0:  # HERE
            acc = [x]
        else:
            acc = [x, x]
        return np.sum(acc[0] * acc[-1])

    def good_branch_structure(x):
        if np.sum(x) > 0:
            acc = [x, x]
        else:
            acc = [x, x * 2.0]
        return np.sum(acc[0] * acc[-1])

    SIN = np.sin

    def good_sin(x):
        return np.sum(np.sin(x))

    # ------------------------------------------------------------------ issue 11, H2
    def bad_array_dtype(x):
        return np.sum(np.array([x[0], x[1]], dtype=x.dtype) ** 2)  # HERE

    def good_array_dtype(x):
        return np.sum(np.array([x[0], x[1]], dtype=np.float64) ** 2)

    def bad_dict_key(x):
        d = {x.shape[0]: x * 2.0}  # HERE
        return np.sum(d[3] ** 2)

    def good_dict_key(x):
        d = {0: x * 2.0}
        return np.sum(d[0] ** 2)

    @dataclasses.dataclass
    class Layer:
        w: np.ndarray
        act = np.tanh

    def bad_record_callable(x, layer):
        return np.sum(layer.act(x * layer.w))  # HERE

    def good_record_callable(x, layer):
        return np.sum(np.tanh(x * layer.w))

    def cube_sum(v):
        return np.sum(v ** 3)

    def scaled_cube(v, s):
        return np.sum(v ** 3) * s

    def pair_product(p):
        return np.sum(p[0] * p[1])

    def product(a, b):
        return np.sum(a * b)

    GRAD_CUBE = sg.grad(cube_sum)

    def bad_transform_option(x):
        d = sg.grad(cube_sum, wrt=x.ndim - 1)(x)  # HERE
        return np.sum(d * x)

    def good_transform_option(x):
        d = sg.grad(cube_sum, wrt=0)(x)
        return np.sum(d * x)

    def bad_transform_of_nested(x):
        h = lambda v: np.sum(v ** 3) * x[0]
        return np.sum(sg.grad(h)(x))  # HERE

    def good_transform_of_nested(x):
        return np.sum(sg.grad(scaled_cube)(x, x[0]))

    def bad_transform_of_container(x):
        _, t = sg.jvp(pair_product, ((x, x * 2.0),), ((x, x),))  # HERE
        return t

    def good_transform_of_container(x):
        _, t = sg.jvp(product, (x, x * 2.0), (x, x))
        return t

    def bad_internal_call(x):
        return np.sum(x ** 2) + len(sg.source(GRAD_CUBE))  # HERE

    def good_internal_call(x):
        return np.sum(x ** 2)

    def bad_loop_over_number(x):
        s = 0.0
        for i in x.shape[0]:  # HERE
            s = s + x[i] ** 2
        return s

    def good_loop_over_number(x):
        s = 0.0
        for i in range(x.shape[0]):
            s = s + x[i] ** 2
        return s

    # ------------------------------------------------------------------ no silent constants
    class Lookup:
        def __getitem__(self, key):
            return key * 2.0

    LOOKUP = Lookup()

    def bad_index_object(x):
        return np.sum(LOOKUP[x])  # HERE

    def good_index_object(x):
        return np.sum(x * 2.0)

    def bad_s_traced(x):
        n = len(x)
        return np.sum(x[np.s_[1:n]] ** 2)  # HERE

    def good_s_traced(x):
        n = len(x)
        return np.sum(x[1:n] ** 2)

    def bad_r_traced_slice(x):
        n = len(x)
        return np.sum(np.r_[x, 0:n] * 2.0)  # HERE

    def good_r_traced_slice(x):
        return np.sum(np.concatenate([x, np.arange(3.0)]) * 2.0)

    def bad_r_matrix(x):
        return np.sum(np.r_['r', x, x ** 2] * 2.0)  # HERE

    def good_r_matrix(x):
        return np.sum(np.concatenate([np.atleast_2d(x), np.atleast_2d(x ** 2)]) * 2.0)

    def bad_r_three_dims(x):
        return np.sum(np.r_['0,3', x, x ** 2] * 2.0)  # HERE

    def good_r_three_dims(x):
        return np.sum(np.concatenate([np.expand_dims(x, (0, 1)), np.expand_dims(x ** 2, (0, 1))]) * 2.0)

    def bad_reshape_f_of_a_shape(x):
        return np.sum(np.reshape(x, x.shape, order='F') ** 2)  # HERE

    def good_reshape_f_of_a_shape(x):
        return np.sum(np.reshape(x, (3,), order='F') ** 2)

    def bad_ravel_order_k(x):
        return np.sum(x.ravel(order='K') ** 2)  # HERE

    def good_ravel_order_k(x):
        return np.sum(x.ravel(order='C') ** 2)

    def bad_einsum_ellipsis_three(x):
        return np.sum(np.einsum("...i,i,i->...", x, x, x))  # HERE

    def good_einsum_ellipsis_three(x):
        return np.sum(np.einsum("...i,i->...", np.einsum("i,i->i", x, x), x))

    def bad_svd_hermitian(x):
        return np.sum(np.linalg.svd(np.outer(x, x) + D, hermitian=True)[1])  # HERE

    def good_svd_hermitian(x):
        return np.sum(np.linalg.svd(np.outer(x, x) + D)[1])

    def bad_svd_traced_flag(x):
        return np.sum(np.linalg.svd(np.outer(x, x) + D, compute_uv=x[0] > 9.0))  # HERE

    def good_svd_traced_flag(x):
        return np.sum(np.linalg.svd(np.outer(x, x) + D, compute_uv=False))

    def bad_average_axes(x):
        return np.average(np.outer(x, x), axis=(0, 1), weights=np.outer(W, W))  # HERE

    def good_average_axes(x):
        return np.sum(np.outer(x, x) * np.outer(W, W), (0, 1)) / np.sum(np.outer(W, W), (0, 1))

    def bad_no_derivative_argument(x):
        return np.sum(np.pad(x, 1, constant_values=x[0]) ** 2)  # HERE

    def good_no_derivative_argument(x):
        return np.sum((np.pad(x, 1) + np.pad(np.zeros(3), 1, constant_values=1.0) * x[0]) ** 2)
''')

X = np.array([0.3, 0.7, 1.2])


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    yield from import_source(tmp_path_factory, "hint_rewrite_programs", PROGRAM)


def _x(m):
    return (X.copy(),)


def _strided(a):
    """`a`'s values in a non-contiguous array (Note [Layout facts]: its layout is not known)."""
    return np.repeat(a, 2)[::2]


def _grad(fn, args):
    return sg.grad(fn)(*args)


def _jvp(fn, args):
    return sg.jvp(fn, args, tuple(np.ones_like(a) for a in args))


@dataclasses.dataclass(frozen=True)
class Row:
    """A refusal and its rewrite. `site`: (file under srcgrad/, a fragment of the raise
    site's message as written in the source); `bad`/`good`: names in PROGRAM (the object
    named `here`, else `bad`, marks the refused line `# HERE`); `message`/`hint`: fragments
    of the error's message and hint. `check` replaces the grad/jvp check of `good` where
    the rewrite is a change of the call; `line=False` where the error names no user line
    (a known gap, said in the row); `jvp=False` where the rewrite applies a custom Function
    with no `jvp` method (forward mode needs one, as in torch)."""

    site: tuple[str, str]
    bad: str
    message: str
    hint: str
    good: str | None
    args: Callable = _x
    good_args: Callable | None = None
    trigger: Callable = _grad
    here: str | None = None
    jvp: bool = True
    line: bool = True
    check: Callable | None = None


def _with_aux(prog):
    g, aux = sg.grad(prog.bad_two_outputs, has_aux=True)(X.copy())
    assert_close(g, numeric_grad(lambda x: prog.bad_two_outputs(x)[0], [X], 0), rtol=1e-5, atol=1e-7)
    assert_close(aux, X[0])


def _strict(fn, args):
    xs = pytest.importorskip("array_api_strict")
    return sg.grad(fn)(*[xs.asarray(a) for a in args])


def _strict_rewrite(prog):
    m = _square(prog)[0]
    got = np.asarray(_strict(prog.good_pad, (m,)))
    assert_close(got, numeric_grad(prog.good_pad, [m], 0), rtol=1e-5, atol=1e-7)


def _square(m):
    return (np.array([[0.3, 0.7], [1.2, -0.4]]),)


ROWS = [
    # the fence
    Row(("frontend/fence.py", "a generator (`yield`)"), "bad_yield", "`yield`",
        "return a list or an array", "good_yield"),
    Row(("frontend/fence.py", "a generator (`yield from`)"), "bad_yield_from", "`yield from`",
        "return a list or an array", "good_yield_from"),
    Row(("frontend/fence.py", "an async function"), "bad_nested_async", "an async function",
        "synchronous function", "good_nested_async"),
    Row(("frontend/fence.py", "a `global` statement"), "bad_global", "`global`",
        "pass the value in as an argument", "good_global", good_args=lambda m: (X.copy(), m.G)),
    Row(("frontend/python_forms.py", "`return`, `break` or `continue` inside `try`"), "bad_try",
        "inside `try`", "assign the result to a name inside the `try`", "good_try"),
    Row(("frontend/python_forms.py", "`raise` on a path that depends on array values"),
        "bad_raise", "`raise` on a path", "`assert np.all(x > 0), 'x must be positive'`", "good_raise"),
    Row(("frontend/idioms.py", "ufunc.reduce with `dtype` or `out`"),
        "bad_reduce_with_dtype", "ufunc.reduce with `dtype`", "leave them out", "good_reduce_with_dtype"),
    Row(("frontend/python_forms.py", "`filter()` with a test on array values"),
        "bad_filter_on_data", "`filter()` with a test", "`np.where`", "good_filter_on_data"),
    Row(("frontend/python_forms.py", "`{}()` of a computed array or number"),
        "bad_traced_isinstance", "`isinstance()` of a computed", "`np.ndim(v) == 0`",
        "good_traced_isinstance"),
    Row(("frontend/python_forms.py", "constructing a `{}` object"), "bad_constructed_object",
        "constructing a `Stepper` object", "construct it outside the compiled function",
        "good_constructed_object"),
    Row(("frontend/fence.py", "a `with` block"), "bad_with", "`with`",
        "move the context manager outside", "good_with"),
    Row(("frontend/fence.py", "a class definition"), "bad_class", "class definition",
        "define the class at module level", "good_class"),
    Row(("frontend/fence.py", "`del`"), "bad_del", "`del`", "let the name go out of use", "good_del"),
    Row(("frontend/fence.py", "an `import` inside the function"), "bad_import", "`import`",
        "import at module level", "good_import"),
    Row(("frontend/fence.py", "an `import` inside the function"), "bad_import_from", "`import`",
        "import at module level", "good_import"),
    Row(("frontend/fence.py", "a set"), "bad_set", "a set is", "use a tuple or a list", "good_set"),
    Row(("frontend/fence.py", "a set comprehension"), "bad_set_comp", "set comprehension",
        "use a list", "good_set_comp"),
    # statements
    Row(("frontend/trace.py", "compiled functions take plain positional"), "bad_varargs",
        "plain positional parameters", "list the parameters explicitly", "good_varargs"),
    Row(("frontend/trace.py", "an expression statement"), "bad_expression_statement",
        "expression statement", "remove it", "good_expression_statement"),
    Row(("frontend/trace.py", "the statement `{}`"), "bad_match", "the statement `Match`",
        "move it out of the compiled function", "good_match"),
    Row(("frontend/python_forms.py", "{} whose row count is not known when compiling"),
        "bad_unpack_array", "star unpacking of an array", "index the rows (`x[0], x[1:]`)",
        "good_unpack_array", trigger=lambda fn, args: sg.source(sg.grad(fn))),  # (the
    # shape-generic code: a variant knows the row count and compiles)
    Row(("frontend/trace.py", "assignment to `{}`"), "bad_attribute_target",
        "assignment to `np.total`", "assign to a plain name", "good_attribute_target"),
    Row(("frontend/python_forms.py", "`{}()` of an array{}"), "bad_builtin", "`round()` of an array",
        "`np.round(...)`", "good_builtin"),
    Row(("frontend/python_forms.py", "a Python number carries no derivative"), "bad_float",
        "`float()` of an array", "drop the `float()`", "good_float"),
    Row(("frontend/trace.py", "Python numbers carry no derivative"), "bad_item",
        "`.item()` is not supported", "drop it", "good_item"),
    Row(("frontend/python_forms.py", "`{}()` with `{}=` of arrays"), "bad_max_of_array",
        "`max()` with `key=`", "`np.max(x)` of one array", "good_max_of_array"),
    Row(("frontend/python_forms.py", "`{}()` of an array{}"), "bad_range_of_length", "`range()` of an array",
        "a literal count (`range(3)`)", "good_range_of_length", args=lambda m: (X.copy(), 3),
        good_args=_x),
    Row(("frontend/inlining.py", "calls to `{}` nest more than"), "bad_recursion", "nest more than",
        "a literal (`f(x, 3)`)", "good_recursion"),
    Row(("frontend/control.py", "a function that returns on some paths only"),
        "bad_return_on_some_paths", "returns on some paths only", "return a value at the end",
        "good_return_on_some_paths"),
    Row(("frontend/loops.py", "`for ... else`"), "bad_for_else", "`for ... else`",
        "use a flag variable", "good_for_else"),
    Row(("frontend/loops.py", "`while ... else`"), "bad_while_else", "`while ... else`",
        "use a flag variable", "good_while_else"),
    Row(("frontend/iteration.py", "a loop over a slice of a `range` other than"), "bad_range_slice",
        "a slice of a `range`", "loop over `range(start, stop, step)`", "good_range_slice"),
    Row(("frontend/iteration.py", "with a step known only at run time"), "bad_reversed_range_step",
        "with a step known only at run time", "`reversed(range(a, b, step))`",
        "good_reversed_range_step", trigger=lambda fn, args: emit_standalone(fn)),  # (a
    # variant knows the step from the shapes and compiles)
    Row(("frontend/inplace.py", "with a right side that writes into"), "bad_item_written_by_right_side",
        "with a right side that writes into `y`", "compute the right side first",
        "good_item_written_by_right_side", trigger=lambda fn, args: sg.source(sg.grad(fn))),  # (the
    # shape-generic code, which does not know y's rank: a variant knows it and compiles)
    Row(("frontend/loops.py", "a tuple, list or dict holding functions"),
        "bad_container_in_loop", "change in a loop", "keep arrays in separate variables",
        "good_container_in_loop"),
    Row(("frontend/gradients.py", "`sg.vjp` of a function with a loop"), "bad_vjp_of_loop_inside",
        "`sg.vjp` of a function with a loop", "call `sg.grad` or `sg.value_and_grad`",
        "good_vjp_of_loop_inside"),  # (second derivatives of loops through sg.grad,
    # sg.value_and_grad and has_aux compile: issue 15)
    Row(("frontend/gradients.py", "the gradient of a function with a loop, called in a compiled function"),
        "bad_loop_gradient_of_a_tuple_inside", "with a tuple, list, dict or object as its argument `pair`",
        "pass the arrays as separate arguments", "good_loop_gradient_of_a_tuple_inside"),
    # containers
    Row(("frontend/containers.py", "the {} method `.{}()`"), "bad_list_method",
        "the list method `.remove()`", "compiled code supports", "good_list_method"),
    Row(("frontend/python_forms.py", "{} whose row count is not known when compiling"),
        "bad_comprehension_over_array", "iterating over an array", "use array operations",
        "good_comprehension_over_array", trigger=lambda fn, args: sg.source(sg.grad(fn))),
    Row(("frontend/containers.py", "a comprehension `if` on array values"), "bad_comprehension_if",
        "comprehension `if`", "`np.where`", "good_comprehension_if"),
    # idioms
    Row(("frontend/idioms.py", "`np.{}` of an array (a sequence of its rows)"),
        "bad_vstack_of_array", "`np.vstack` of an array", "pass a list", "good_vstack_of_array"),
    Row(("frontend/numpy_forms.py", "`np.array` of a list holding a dict"), "bad_array_of_dict",
        "holding a dict", "build the array from numbers and arrays", "good_array_of_dict"),
    Row(("frontend/idioms.py", "`np.{}.at` without exactly"), "bad_ufunc_at", "`np.add.at`",
        "`np.add.at(a, indices, b)`", "good_ufunc_at"),
    # expressions and calls
    Row(("ir/expand.py", "does not fit its supported signature"), "bad_signature",
        "the call to `clip`", "clip(x, a_min=None, a_max=None)", "good_signature"),
    Row(("frontend/python_forms.py", "an f-string of a traced array or number"), "bad_fstring",
        "an f-string of a traced", "format text outside the compiled function", "good_fstring"),
    Row(("ir/expand.py", "the array method `.{}()`"), "bad_array_method", "`.conjugate()`",
        "`np.conjugate(x)`", "good_array_method"),
    Row(("ir/expand.py", "cannot differentiate the call to `{}`"), "bad_no_rule", "`math.hypot`",
        "write the computation in Python", "good_no_rule"),
    # records and custom Functions
    Row(("frontend/records.py", "assigning to `.{}` of a"), "bad_field_write",
        "assigning to `.b` of a `Params` argument", "use a local name instead (`b = ...`)",
        "good_field_write", args=lambda m: (X.copy(), m.Params(m.W.copy(), 1.0))),
    Row(("frontend/function.py", "`ctx.{}` used as a value"), "bad_ctx_method_value",
        "`ctx.save_for_backward` used as a value", "call it", "good_ctx_method_value",
        here="SquareCtxValue", jvp=False),
    Row(("frontend/function.py", "without marking it with `ctx.mark_dirty`"), "bad_unmarked_write",
        "writes its input `x` in place", "write into a copy (`x = x.copy()`)",
        "good_unmarked_write", here="ZeroFirst", jvp=False),
    Row(("frontend/versions.py", "one of the variables needed for gradient computation"),
        "bad_saved_then_written", "Mul saved `a` for backward", "write out of place (`x = x + 1`)",
        "good_saved_then_written", jvp=False),
    Row(("frontend/versions.py", "this in-place write may change a value that"),
        "bad_maybe_written_in_loop", "the compiler cannot check it", "write out of place",
        "good_maybe_written_in_loop", args=lambda m: (X.copy(), 3)),
    # in-place writes
    Row(("frontend/mutation.py", "in a called function, into"), "bad_write_in_called_helper",
        "inside an `if`/loop in a called function, into `y`", "`y = np.where(mask, v, y)`",
        "good_write_in_called_helper"),
    Row(("frontend/control.py", "changes them, and `{}` differs {}"), "bad_append_in_branch",
        "the length or keys of `ys` would depend on array values", "append on both branches",
        "good_append_in_branch"),
    Row(("frontend/control.py", "changes them in every iteration of the loop"),
        "bad_append_in_loop", "changes them in every iteration", "preallocate an array",
        "good_append_in_loop"),
    Row(("frontend/containers.py", "a loop outside that `if`/loop iterates over"),
        "bad_change_iterated_list", "a loop outside that `if`/loop iterates over",
        "`for v in list(L):`", "good_change_iterated_list"),
    Row(("frontend/loops.py", "which shares a {} with `{}`"), "bad_two_names_in_loop",
        "which shares a list with `ys`", "`M = list(L)`", "good_two_names_in_loop"),
    Row(("frontend/containers.py", "on a {} that {} share"), "bad_change_shared_list",
        "on a list that `ys`, `zs` share", "`ys = list(ys)`", "good_change_shared_list"),
    Row(("frontend/containers.py", "one of several {}s that other names still hold"),
        "bad_change_merged_list", "depending on the path taken at line", "`M = list(L)`",
        "good_change_merged_list"),
    Row(("frontend/containers.py", "on a {} that only {} holds"), "bad_change_held_list",
        "only a container in `d` holds", "build a new list", "good_change_held_list"),
    Row(("frontend/loops.py", "whose items share memory with other names"),
        "bad_shared_items_in_loop", "whose items share memory", "`ys[k] = ys[k].copy()`",
        "good_shared_items_in_loop"),
    Row(("frontend/inplace.py", "if it is an ndarray (changing every name"),
        "bad_augmented_alias", "only rebinds it if it is a scalar", "write `y = y + ...`",
        "good_augmented_alias"),
    Row(("frontend/inplace.py", "augmented assignment to `{}`"), "bad_augmented_attribute",
        "augmented assignment to `Attribute`", "assign to a name", "good_augmented_attribute"),
    Row(("frontend/inplace.py", "the in-place array method"), "bad_inplace_method", "`.sort()`",
        "the NumPy function that returns a new array", "good_inplace_method"),
    Row(("frontend/inplace.py", "which is not a local variable"), "bad_write_global",
        "writing into `W`", "copy it into a local first", "good_write_global"),
    Row(("frontend/aliases.py", "which shares memory with"), "bad_alias_write_in_loop",
        "shares memory with `x`", "copy it before the loop (`y = y.copy()`)",
        "good_alias_write_in_loop"),
    Row(("frontend/aliases.py", "a write inside a loop into an array that the"),
        "bad_write_into_held_array", "an array that the list `ws` holds",
        "take the array out of `ws` before the loop as its own copy", "good_write_into_held_array"),
    Row(("frontend/aliases.py", "holds was written through `{}` inside a loop"),
        "bad_read_container_after_loop", "holds was written through `v2` inside a loop",
        "read it as `v2` after the loop", "good_read_container_after_loop"),
    Row(("frontend/aliases.py", "a row of the array the loop iterates over"),
        "bad_write_through_row", "a row of the array the loop iterates over",
        "loop over `range(len(x))`", "good_write_through_row"),
    Row(("frontend/unrolling.py", "cannot compile the next row of this loop"),
        "bad_rows_written_on_some_paths", "an earlier iteration wrote into the array it iterates "
        "over", "iterate over a copy (`for ... in x.copy():`)", "good_rows_written_on_some_paths",
        args=lambda m: (np.array([[0.4, -0.3], [-0.9, 0.2], [0.5, 0.6]]),)),
    Row(("frontend/aliases.py", "changed this value on some paths only"), "bad_write_on_one_path",
        "on some paths only", "copy explicitly where it is bound", "good_write_on_one_path",
        args=lambda m: (X.copy(), np.array([1.0]))),
    Row(("frontend/inplace.py", "assigning into an array a view of that same array"),
        "bad_self_view_write", "a view of that same array", "assign a copy", "good_self_view_write"),
    Row(("frontend/aliases.py", "through a name that an iteration leaves bound to the array of"),
        "bad_loop_rebinds_to_alias", "leaves bound to the array of `v`", "copy where the loop binds it",
        "good_loop_rebinds_to_alias"),
    Row(("frontend/aliases.py", "iteration may have left shared with"),
        "bad_loop_leaves_a_view", "may have left shared with `y`", "add `.copy()` to the value",
        "good_loop_leaves_a_view", args=lambda m: (X.copy(), np.array([1.5]))),
    Row(("frontend/mutation.py", "on some paths this value is the array written at line"),
        "bad_chosen_view_written", "on some paths this value is the array written",
        "copy explicitly where it is chosen", "good_chosen_view_written"),
    Row(("frontend/mutation.py", "this value may or may not have been changed"),
        "bad_view_or_copy", "view or a copy", "copy explicitly where you mean a copy",
        "good_view_or_copy", args=lambda m: (_strided(X),)),
    Row(("frontend/mutation.py", "a read-only view in NumPy (the write raises there)"),
        "bad_write_into_broadcast_view", "a read-only view in NumPy", "write into a copy",
        "good_write_into_broadcast_view"),
    Row(("frontend/mutation.py", "this view may or may not see the in-place write"),
        "bad_view_after_write", "may return a copy", "index the written array again after the write",
        "good_view_after_write", args=lambda m: (_strided(X),)),
    Row(("frontend/layout_facts.py", "whose memory layout or type a loop changes"),
        "bad_layout_changed_by_loop", "whose memory layout or type a loop changes",
        "copy explicitly where you mean a copy", "good_layout_changed_by_loop"),
    # whole programs and transforms
    Row(("frontend/iteration.py", "this loop's iterable"), "bad_loop_over_record",
        "this loop's iterable", "loop over range(...), an array, or a list",
        "good_loop_over_record", args=lambda m: (X.copy(), m.Params(m.W.copy(), 1.0))),
    Row(("frontend/inplace.py", "this `out=` argument"), "bad_out_list", "`out=`",
        "assign the result instead", "good_out_list"),
    Row(("frontend/parse.py", "cannot read the source of {}: {}"), "typed_at_a_prompt",
        "cannot read the source", "define the function in a file", "typed_in_a_file",
        line=False),  # names `<stdin>`, line 1: there is no file to point into
    Row(("frontend/parse.py", "cannot read the source of {}"), "lambda_at_a_prompt",
        "cannot read the source", "define the lambda in a file", "typed_in_a_file", line=False),
    Row(("ir/expand.py", "indexing a tuple, list or dict with a dynamic index"),
        "bad_dynamic_index", "dynamic index", "`np.stack(items)[i]`", "good_dynamic_index"),
    Row(("frontend/python_forms.py", "{} whose row count is not known when compiling"),
        "bad_star_of_array", "with `*`", "index the rows", "good_star_of_array",
        trigger=lambda fn, args: sg.source(sg.grad(fn))),  # (a variant knows the rows)
    Row(("frontend/trace.py", "repeating a sequence a dynamic number of times"), "bad_repeat",
        "a dynamic number of times", "`[x] * 2`", "good_repeat", args=lambda m: (X.copy(), 2)),
    Row(("frontend/control.py", "holding differently shaped containers"), "bad_branch_structure",
        "`acc` holding differently shaped containers", "the same structure on both paths",
        "good_branch_structure"),
    Row(("frontend/parse.py", "it is not a Python function"), "SIN", "not a Python function",
        "pass a function defined with `def`", "good_sin", line=False),  # no source: no line
    Row(("frontend/parse.py", "only functions defined with `def`"), "bad_async_def",
        "only functions defined with `def`", "write it as a `def`", "good_async_def"),
    Row(("frontend/parse.py", "cannot tell which lambda on line"), "INNER", "which lambda",
        "write it as a `def`", "good_lambda"),
    Row(("pipeline/graphs.py", "to return one scalar"), "bad_two_outputs", "one scalar",
        "has_aux=True", None, line=False, check=_with_aux),  # names the def line, not the return
    Row(("jacobians.py", "{}"), "bad_jacobian_inside",
        "nor called inside compiled code", "call sg.grad inside", "good_jacobian_inside"),
    Row(("frontend/idioms.py", "a dtype that depends on the arguments"), "bad_array_dtype",
        "a dtype that depends", "`dtype=np.float64`", "good_array_dtype"),
    Row(("frontend/trace.py", "a dict key that depends on the arguments"), "bad_dict_key",
        "a dict key", "use constant keys", "good_dict_key"),
    Row(("frontend/records.py", "which is not a method defined in Python"), "bad_record_callable",
        "`Layer.act`", "call the function it holds directly", "good_record_callable",
        args=lambda m: (X.copy(), m.Layer(m.W.copy())), jvp=False),
    Row(("frontend/transforms.py", "of a value computed in the compiled function"),
        "bad_transform_option", "of a value computed", "a function defined at module level",
        "good_transform_option"),
    Row(("frontend/transforms.py", "of a function defined inside the compiled function"),
        "bad_transform_of_nested", "defined inside the compiled function",
        "define the function at module level", "good_transform_of_nested"),
    Row(("frontend/transforms.py", "of a tuple, list or dict argument"),
        "bad_transform_of_container", "of a tuple, list or dict argument",
        "pass the arrays as separate arguments", "good_transform_of_container"),
    Row(("frontend/transforms.py", "calling `{}.{}`"), "bad_internal_call",
        "calling `srcgrad.api.source`", "call this outside the compiled function",
        "good_internal_call"),
    Row(("frontend/trace.py", "a `for` loop over a number"), "bad_loop_over_number",
        "'int' object is not iterable", "loop over `range(n)`", "good_loop_over_number"),
    Row(("codegen/namespaces.py", "has no equivalent in {}"), "bad_pad",
        "`pad` has no equivalent in array_api_strict", "write it with Array-API functions",
        None, args=_square, trigger=_strict, check=_strict_rewrite),
    Row(("frontend/numpy_forms.py", "with a traced value (srcgrad cannot read"), "bad_index_object",
        "indexing the object `Lookup`", "index it with constants only", "good_index_object"),
    Row(("frontend/numpy_forms.py", "of a slice with traced bounds"), "bad_s_traced",
        "`np.s_` of a slice", "write the index in place", "good_s_traced"),
    Row(("frontend/numpy_forms.py", "with a directive string after its first item, or a "),
        "bad_r_traced_slice", "`np.r_` with a directive", "np.concatenate",
        "good_r_traced_slice"),
    Row(("frontend/numpy_forms.py", " (the directive builds an np.matrix, whose `*` is a"),
        "bad_r_matrix", "builds an np.matrix", "np.concatenate of np.atleast_2d", "good_r_matrix"),
    Row(("frontend/numpy_forms.py", "(a promotion to {} dimensions with "), "bad_r_three_dims",
        "a promotion to 3 dimensions", "promote the arrays with np.expand_dims",
        "good_r_three_dims"),
    Row(("ir/bind_targets.py", "`reshape` with order='F' to a shape not known when compiling"),
        "bad_reshape_f_of_a_shape", "order='F' to a shape not known", "write the shape as a tuple",
        "good_reshape_f_of_a_shape"),
    Row(("ir/bind_targets.py", "with order={} (the element order of 'A' and "), "bad_ravel_order_k",
        "order='K'", "write order='C' or order='F'", "good_ravel_order_k"),
    Row(("frontend/numpy_forms.py", "of three or more operands with '...'"),
        "bad_einsum_ellipsis_three", "three or more operands", "nest einsums",
        "good_einsum_ellipsis_three"),
    Row(("frontend/numpy_forms.py", "`np.linalg.svd(..., hermitian=True)`"), "bad_svd_hermitian",
        "hermitian=True", "drop `hermitian=True`", "good_svd_hermitian"),
    Row(("frontend/numpy_forms.py", "`np.linalg.svd` with a traced full_matrices, compute_uv or "
         "hermitian"), "bad_svd_traced_flag", "a traced full_matrices", "write each flag as True or "
        "False", "good_svd_traced_flag"),
    Row(("frontend/numpy_forms.py", "with weights over a tuple of axes"), "bad_average_axes",
        "a tuple of axes", "sum(x * w, axis) / sum(w, axis)", "good_average_axes"),
    Row(("passes/activity.py", "of a differentiated value in its"), "bad_no_derivative_argument",
        "its `constant_values` argument", "through x argument(s) only",
        "good_no_derivative_argument"),
]


# Raise sites with no row, and why. A site with a hint belongs here only when its hint
# cannot be reached or is another site's hint passed on.
TORCH = "torch's exact text (spec/torch_semantics.md): the message is the contract"
WRONG = "the program is wrong as Python/NumPy too (it raises when run): nothing to rewrite"
PASSED_ON = "raises with the hint of the site that made it (tested in that site's row)"
ASYNC = "valid only inside an `async def`, which is refused first (the nested_async row)"
NOT_YET = "refuses valid code and has no hint yet: no rewrite known to compile (issue 11)"

BOUND = ("its rewrite differentiates another callable (`sg.grad(Model.loss, wrt=1)(model, x)`), "
         "which a row's trigger does not express; tests/test_newcomer_errors.py checks the text")
COMPOSED = ("a composition of transforms refused by rule, decided at the call: "
            "tests/test_composition_matrix.py holds its refused cells")
VMAP = ("sg.vmap's refusals (issue 32): no batched form yet and no rewrite known; "
        "tests/test_vmap.py checks those it can reach")
EXEMPT = {
    ("frontend/numpy_forms.py", "`np.block` of an empty list"): WRONG,
    ("frontend/numpy_forms.py", "`np.block` of lists nested to different depths"): WRONG,
    ("frontend/idioms.py", "{}"): "a composition's unsupported form (compositions.refuse): its "
    "message and hint are the composition's, tested in tests/rules/test_compositions.py",
    ("jacobian_transforms.py", "{} ({})"): COMPOSED,
    ("jacobians.py", "{} (of `{}`) is not supported"): COMPOSED,
    ("vmapping.py", "sg.vmap called inside compiled code without its arguments' shapes "
     "(sg.source of the outer transform), or there with a tuple, list or dict argument, is "
     "not supported yet; sg.grad and sg.value_and_grad of a vmap also need a scalar output, "
     "and a vmap's has the batch axis"): VMAP,
    ("pipeline/vmap.py", "sg.vmap of a {}: {}: `{}` has no batched form yet (in {}())"): VMAP,
    ("frontend/idioms.py", "`np.{}`'s ufunc.reduce call ({})"):
        "a call NumPy's reduce refuses too (its own TypeError text); the hint shows the form",
    ("frontend/control.py", "srcgrad's generated code of a loop's derivative cannot be traced "
     "again (its loop keeps a tape)"): COMPOSED,
    ("pipeline/vmap.py", "sg.vmap: a result of kind {} is not supported yet"): VMAP,
    ("pipeline/vmap.py", "sg.vmap: {}: `{}` has no batched form yet (in {}())"): VMAP,
    ("pipeline/vmap.py", "vmap of a jacobian: a derivative's shape depends on the data"): VMAP,
    ("pipeline/vmap.py", "vmap of a jacobian: no seed (an empty argument or output)"): VMAP,
    ("pipeline/vmap.py", "vmap: the shape of output {} of {}() depends on the data"): VMAP,
    ("frontend/numpy_forms.py", "with a traced axis, returned or keepdims"): NOT_YET,
    ("frontend/numpy_forms.py", "whose ranks are not known when compiling"):
        "forward mode only (no shape facts there): the weights-over-axes row tests its rewrite",
    ("frontend/numpy_forms.py", "names {} operands but is given {}"): WRONG,
    ("frontend/numpy_forms.py", "is not an int in [0, 52)"): WRONG,
    ("frontend/numpy_forms.py", "with an operand where a sublist belongs"): WRONG,
    ("frontend/numpy_forms.py", "of a value that is not an array"): WRONG,
    ("frontend/numpy_forms.py", "`np.einsum`'s path step {} does not name pending operands"): WRONG,
    ("frontend/numpy_forms.py", "`np.einsum`'s path leaves operands uncontracted"): WRONG,
    ("ir/expand.py", "indexing the object `{}` with a traced value"):
        "internal: formulas index no objects; the tracer's override (numpy_forms) is the user's",
    ("frontend/described.py", "is the {} object the method `{}` is bound to"): BOUND,
    ("frontend/described.py", "compiled code reads the argument `{}` as an array, and an array"): BOUND,
    ("frontend/classes.py", "Implementing both 'backward' and 'vjp'"): TORCH,
    ("frontend/classes.py", "You must implement the forward function"): TORCH,
    ("frontend/function.py", "Function's jvp returned a gradient at position"): TORCH,
    ("frontend/function.py", "Some elements marked as dirty"): TORCH,
    ("frontend/function.py", "You must implement either the backward or vjp"): TORCH,
    ("frontend/function.py", "You must implement the jvp function"): TORCH,
    ("frontend/function.py", "expected Variable or None"): TORCH,
    ("frontend/function.py", "returned a gradient different than None"): TORCH,
    ("frontend/function.py", "returned an incorrect number of gradients"): TORCH,
    ("frontend/function.py", "jvp returned an incorrect number of tangents"): TORCH,
    ("frontend/function.py", "save_for_backward can only save variables"): TORCH,
    ("frontend/function.py", "save_for_forward expects all arguments to be tensors"): TORCH,
    ("passes/jvp.py", "trying to differentiate twice"): TORCH,
    ("passes/vjp.py", "trying to differentiate twice"): TORCH,
    ("frontend/containers.py", "'tuple' object does not support item assignment"): WRONG,
    ("frontend/containers.py", "KeyError: {}"): WRONG,
    ("frontend/containers.py", "cannot assign to this list item"): WRONG,
    ("frontend/containers.py", "list.index(x): x not in list"): WRONG,
    ("frontend/containers.py", "{} is not iterable"): WRONG,
    ("frontend/loops.py", "a loop over a list that grows in every iteration"): WRONG,
    ("frontend/iteration.py", "a loop over a value that is not iterable"): WRONG,
    ("frontend/function.py", "bad call to `{}.apply`"): WRONG,
    ("frontend/function.py", "cannot assign to `ctx.{}`"): WRONG,
    ("frontend/function.py", "ctx has no attribute"): WRONG,
    ("frontend/function.py", "ctx has no method"): WRONG,
    ("frontend/function.py", "ctx.mark_dirty() takes the arrays"): WRONG,
    ("frontend/function.py", "ctx.set_materialize_grads() takes one constant bool"): WRONG,
    ("frontend/function.py", "should only be called from inside forward()"): WRONG,
    ("frontend/function.py", "takes positional arguments only"): WRONG,
    ("frontend/function.py", "mark_non_differentiable only accepts outputs"): WRONG,
    ("frontend/inplace.py", "' object does not support item assignment"): WRONG,
    ("frontend/inplace.py", "`out=` must be an array"): WRONG,
    ("frontend/inplace.py", "cannot evaluate this item"): WRONG,
    ("frontend/parse.py", "cannot parse the file of"): WRONG,
    ("frontend/parse.py", "is not the definition it was compiled"): (
        "the code and its file disagree (a module edited after it was loaded): its rewrite is a "
        "reload, which no row's trigger expresses; tests/test_generated_source_identity.py "
        "reaches it"),
    ("frontend/records.py", "as a value (call the method instead)"): WRONG,
    ("frontend/inlining.py", "bad call to `{}`: {}"): WRONG,
    ("frontend/trace.py", "referenced before assignment"): WRONG,
    ("frontend/trace.py", "name `{}` is not defined"): WRONG,
    ("frontend/trace.py", "no binding for nonlocal"): WRONG,
    ("frontend/trace.py", "unpacking {} values into {} names"): WRONG,
    ("frontend/trace.py", "unpacking an array into names"): (
        "reached only by a value Python cannot unpack either (`a, b = 3.0`): an array unpacks "
        "through the `unpack` row"),
    ("frontend/python_forms.py", "{}() iterable argument is empty"): WRONG,
    ("frontend/python_forms.py", "'{}' object is not iterable"): WRONG,
    ("frontend/python_forms.py", "reduce() of empty iterable"): WRONG,
    ("frontend/python_forms.py", "filter expected 2 arguments"): WRONG,
    ("frontend/python_forms.py", "calling a function that depends on the arguments"): (
        "a function passed as an argument is read as an array; the hint's named `def` or "
        "`lambda` compiles (tests/test_python_surface_forms.py: map and functools.reduce)"),
    ("frontend/python_forms.py", "{} of this value"): (
        "an object the tracer holds that is no sequence (a custom Function's ctx), which "
        "Python cannot iterate either; a list or an array compiles (the map/filter tests)"),
    ("ir/expand.py", "unpacking an array with `*`"): (
        "reached only by a value that is not an array or a sequence (`*ctx`): an array's rows "
        "unpack where their count is known, else the python_forms row-count row refuses"),
    ("ir/expand.py", "the expression `{}`"): (
        "unreachable from user code: every expression Python parses has a tracer method or is "
        "refused by the fence first (f-strings: frontend/python_forms.py's row)"),
    ("frontend/python_forms.py", "cannot unpack non-iterable"): WRONG,
    ("frontend/python_forms.py", "not enough values to unpack"): WRONG,
    ("frontend/python_forms.py", "No active exception to reraise"): WRONG,
    ("frontend/python_forms.py", "`isinstance()` with classes that depend"): (
        "classes passed as arguments are arrays to compiled code; the hint's literal classes "
        "compile (tests/test_python_surface_forms.py, isinstance of a dict argument)"),
    ("frontend/python_forms.py", "`{}()` of this value"): PASSED_ON,
    ("frontend/python_forms.py", "star unpacking of this value"): (
        "an object the tracer holds (a custom Function's ctx): indexing it is the rewrite, "
        "and a ctx is not indexed either"),
    ("frontend/python_forms.py", "`raise` of a traced value"): (
        "an exception object made from arrays: its constant-message rewrite is the raise "
        "row's (bad_raise)"),
    ("ir/expand.py", "`{}` does not exist"): WRONG,
    ("ir/expand.py", "name `{}` is not defined"): WRONG,
    ("ir/expand.py", "calling a value that is not a function"): WRONG,
    ("ir/expand.py", "of its constant arguments fails"): WRONG,
    ("ir/expand.py", "cannot evaluate `{}`"): WRONG,
    ("ir/expand.py", "`**` of a value that is not a dict"): WRONG,
    ("ir/expand.py", "the attribute `.{}` of a tuple, list or dict"): WRONG,
    ("ir/expand.py", "the method `.{}()` of a tuple, list or dict"): WRONG,
    ("pipeline/graphs.py", "must return `(value, aux)` when has_aux=True"): WRONG,
    ("frontend/fence.py", "{} is not supported in compiled code"): PASSED_ON,
    ("frontend/mutation.py", "cannot compile a read of a value after an in-place write"): PASSED_ON,
    ("frontend/mutation.py", "{}"): PASSED_ON,  # _poison_family's Undecided(message, hint)
    ("ir/expand.py", "{}"): PASSED_ON,  # error(): CompileError.at(loc, message, hint)
    ("ir/expand.py", "{} is not supported in compiled code"): PASSED_ON,  # fail()
    ("frontend/inlining.py", "{} (in the generated code of `{}`, called here)"): PASSED_ON,
    ("frontend/inlining.py", "{} (in the generated code of `{}`)"): PASSED_ON,
    ("frontend/inlining.py", "{}"): PASSED_ON,  # _generated_entry: the callee's error, at the call
    ("frontend/transforms.py", "{}"): WRONG,  # has_aux=True of f not returning (out, aux)
    ("frontend/transforms.py", "`sg.{}`: {}"): WRONG,  # options sg.grad refuses outside too
    ("frontend/transforms.py", "its first argument must be a function"): WRONG,
    ("frontend/transforms.py", "must be a tuple or list (one per argument of f)"): WRONG,
    ("frontend/transforms.py", "`sg.jvp` takes (f, primals, tangents"): WRONG,
    ("frontend/transforms.py", "`sg.vjp` takes (f, *primals"): WRONG,
    ("frontend/transforms.py", "primals but {} tangents"): WRONG,
    ("frontend/transforms.py", "vjp_fn takes one cotangent"): WRONG,
    ("frontend/transforms.py", "vjp_fn: the cotangent is {}"): WRONG,
    ("frontend/transforms.py", "the method `.{}()` of a vjp_fn"): WRONG,
    ("frontend/transforms.py", "the attribute `.{}` of a vjp_fn"): WRONG,
    ("frontend/transforms.py", "assigning to `.{}` of a vjp_fn"): NOT_YET,
    ("frontend/transforms.py", "has_aux must be True or False when compiling"): NOT_YET,
    ("frontend/transforms.py", "srcgrad's transforms are not loaded"):
        "internal: srcgrad.api registers the transforms when it is imported, before any runs",
    ("frontend/idioms.py", "the method `.{}()` of a functools.partial"): WRONG,
    ("frontend/idioms.py", "a functools.partial of a value that is not a function"): WRONG,
    ("frontend/idioms.py", "the attribute `.{}` of a functools.partial"): NOT_YET,
    ("frontend/idioms.py", "assigning to `.{}` of a functools.partial"): NOT_YET,
    ("frontend/inlining.py", "calls nest too deeply to compile"):
        "Python's recursion limit met before 64 inlined calls; its hint is the depth row's",
    ("frontend/fence.py", "`async for`"): ASYNC,
    ("frontend/fence.py", "`async with`"): ASYNC,
    ("frontend/fence.py", "`await`"): ASYNC,
    ("frontend/containers.py", "an async comprehension"): ASYNC,
    ("frontend/containers.py", "{} that depends on array values"): NOT_YET,
    ("frontend/containers.py", "`dict.update` with something other than a dict"): NOT_YET,
    ("frontend/containers.py", "iterating over this value"): NOT_YET,
    ("frontend/numpy_forms.py", "an empty list inside `np.array`"):
        "an empty list beside traced values is ragged: NumPy raises too (np.array([[1.0], []]))",
    ("frontend/inplace.py", "augmented assignment to a dynamic or sliced container item"): NOT_YET,
    ("frontend/inplace.py", "item assignment into this value"): NOT_YET,
    ("ir/expand.py", "a conditional expression on array values in a formula"): NOT_YET,
    ("ir/expand.py", "the array attribute `.{}`"): NOT_YET,
    ("ir/expand.py", "the comparison `{}` on arrays"): NOT_YET,
    ("ir/expand.py", "the operator `{}` on arrays"): NOT_YET,
}


def _here_line(fn):
    lines, start = inspect.getsourcelines(fn)
    marked = [start + i for i, line in enumerate(lines) if "# HERE" in line]
    assert len(marked) == 1, f"{fn.__name__} marks {len(marked)} lines `# HERE`"
    return marked[0]


# ---------------------------------------------------------------------- the source scan
SRC = pathlib.Path(sg.__file__).parent


def _static(node) -> str:
    """A message or hint as written, each interpolated value as `{}`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.IfExp):
        return _static(node.body)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _static(node.left) + _static(node.right)
    return "{}"


# name -> (index of the message, index of the hint) among positional arguments
_RAISERS = {"fail": (1, 2), "error": (1, 2), "CompileError": (0, None),
            "CompileError.at": (1, 2), "Undecided": (0, 1), "_poison_family": (2, 3)}


def _callee(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        if f.attr == "at" and isinstance(f.value, ast.Name) and f.value.id == "CompileError":
            return "CompileError.at"
        return f.attr
    return None


def refusal_sites() -> dict[tuple[str, str], str]:
    """{(file, message as written): hint as written ('' for none)} for every raise site."""
    sites = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "errors.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if rel == "frontend/fence.py" and isinstance(node, ast.Dict):
                for value in node.values:  # _REJECTED: node type -> (what, hint)
                    if isinstance(value, ast.Tuple):
                        sites[(rel, _static(value.elts[0]))] = _static(value.elts[1])
            if not isinstance(node, ast.Call) or _callee(node) not in _RAISERS:
                continue
            at_msg, at_hint = _RAISERS[_callee(node)]
            if len(node.args) <= at_msg:
                continue  # `error(...)` of something else
            keywords = {k.arg: k.value for k in node.keywords}
            hint = node.args[at_hint] if at_hint is not None and len(node.args) > at_hint \
                else keywords.get("hint")
            sites[(rel, _static(node.args[at_msg]))] = "" if hint is None else _static(hint)
    return sites


SITES = refusal_sites()


def _site_of(row):
    return _match(row.site)


def _match(key):
    file, fragment = key
    found = [key for key in SITES if key == (file, fragment)] or \
        [key for key in SITES if key[0] == file and fragment in key[1]]
    assert len(found) == 1, f"{key} matches {len(found)} raise sites: {found}"
    return found[0]


def _hint_fragments(hint: str) -> list[str]:
    return [part for part in hint.split("{}") if len(part.strip()) >= 3]


# ---------------------------------------------------------------------- the tests
def _check_grad_and_jvp(good, args, jvp=True):
    expected = numeric_grad(good, args, 0)
    assert_close(sg.grad(good)(*args), expected, rtol=1e-5, atol=1e-7)
    if jvp and all(isinstance(a, np.ndarray) for a in args):  # (no tangent for a record or an int)
        tangent = np.linspace(0.5, 1.5, args[0].size).reshape(args[0].shape)
        tangents = (tangent,) + tuple(np.zeros_like(a) for a in args[1:])
        out, t_out = sg.jvp(good, args, tangents)
        assert_close(out, good(*args))
        assert_close(t_out, np.sum(expected * tangent), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("row", ROWS, ids=[r.bad for r in ROWS])
def test_refusal_names_the_line_and_the_sites_hint(prog, row):
    bad = getattr(prog, row.bad)
    with pytest.raises(sg.CompileError) as info:
        row.trigger(bad, row.args(prog))
    err = info.value
    assert row.message in err.message
    assert row.hint in err.hint
    if row.line:
        assert err.filename == prog.__file__
        assert err.lineno == _here_line(getattr(prog, row.here or row.bad))
    site = _site_of(row)
    assert SITES[site], f"{site} has no hint: the row belongs in EXEMPT"
    for part in _hint_fragments(SITES[site]):
        assert part in err.hint, (part, err.hint)


@pytest.mark.parametrize("row", ROWS, ids=[r.bad for r in ROWS])
def test_the_hints_rewrite_compiles_with_the_right_gradient(prog, row):
    if row.check is not None:
        row.check(prog)
    else:
        _check_grad_and_jvp(getattr(prog, row.good), (row.good_args or row.args)(prog), row.jvp)


def test_every_refusal_site_is_in_the_table():
    assert len(SITES) > 100  # the scan sees the raise sites (not a scan that finds nothing)
    rows = {_site_of(row) for row in ROWS}
    exempt = {_match(key): reason for key, reason in EXEMPT.items()}
    assert not rows & set(exempt), "a site is both a row and exempt"
    missing = sorted(site for site in SITES if site not in rows and site not in exempt)
    assert not missing, f"raise sites with no row in ROWS and no reason in EXEMPT: {missing}"


def test_an_exempt_site_with_a_hint_says_why_its_hint_has_no_row():
    for key, reason in EXEMPT.items():
        hint = SITES[_match(key)]
        if hint.strip("{} "):
            assert reason not in (TORCH, WRONG, NOT_YET), (key, hint)
